/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option parsing every hkc command shares (tools.h, "the command line"): getopt_long
 * with the options each command takes plus the common ones (-q, -v, -h, --json), usage
 * errors as one short line, and JSON written to stdout through cJSON; then what several
 * commands do alike (tools.h, "the commands"): the help's footer, the AMD compile workers,
 * the kernel options and the compile cache's cap of build and tune.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "rtc/rtc.h"
#include "rtc/rtc_worker.h"
#include "tools/tools.h"
#include "util/util.h"

void hkc_cli_init(hkc_cli_t *cli, const char *cmd, const char *synopsis, void (*help)(void), int json_ok) {
  memset(cli, 0, sizeof *cli);
  cli->cmd = cmd;
  cli->synopsis = synopsis;
  cli->help = help;
  cli->json_ok = json_ok;
  optind = 0; /* GNU getopt: 0 re-initializes it completely (a test may parse twice) */
  opterr = 0; /* the messages are ours (hkc_cli_usage) */
}

int hkc_cli_usage(hkc_cli_t *cli, const char *fmt, ...) {
  fprintf(stderr, "hkc %s: ", cli->cmd);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nusage: %s\ntry 'hkc %s --help'\n", cli->synopsis, cli->cmd);
  cli->rc = 2;
  return HKC_CLI_STOP;
}

/* Whether "--name[=value]" is a prefix of more than one long option (getopt_long refuses it). */
static int ambiguous(const char *arg, const struct option *longopts) {
  if (strncmp(arg, "--", 2) != 0 || !longopts) return 0;
  const size_t len = strcspn(arg + 2, "=");
  int n = 0;
  for (const struct option *o = longopts; o->name; o++) n += strncmp(o->name, arg + 2, len) == 0;
  return n > 1;
}

int hkc_cli_next(hkc_cli_t *cli, int argc, char **argv, const char *shortopts, const struct option *longopts) {
  char opts[128];
  /* ':' first: a missing value is reported as ':' rather than '?' */
  snprintf(opts, sizeof opts, ":%sqvh", shortopts ? shortopts : "");
  for (;;) {
    const int c = getopt_long(argc, argv, opts, longopts, NULL);
    switch (c) {
    case 'q': cli->quiet = 1; continue;
    case 'v': cli->verbose++; continue;
    case 'h':
      cli->help();
      cli->rc = 0;
      return HKC_CLI_STOP;
    case HKC_OPT_JSON:
      if (!cli->json_ok) return hkc_cli_usage(cli, "--json is not an option of this command");
      cli->json = 1;
      continue;
    case ':': { /* a long option is the last argument read; a short one is optopt */
      const char *arg = argv[optind - 1];
      if (strncmp(arg, "--", 2) == 0) return hkc_cli_usage(cli, "%s needs a value", arg);
      return hkc_cli_usage(cli, "-%c needs a value", optopt);
    }
    case '?': {
      const char *arg = argv[optind - 1];
      if (strncmp(arg, "--", 2) != 0) return hkc_cli_usage(cli, "unknown option -%c", optopt);
      const size_t len = strcspn(arg + 2, "=");
      for (const struct option *o = longopts; o && o->name; o++)
        if (strlen(o->name) == len && strncmp(o->name, arg + 2, len) == 0) /* --flag=value */
          return hkc_cli_usage(cli, "--%s takes no value", o->name);
      return hkc_cli_usage(cli, "%s option %.*s", ambiguous(arg, longopts) ? "ambiguous" : "unknown", (int)len + 2, arg);
    }
    default: return c;
    }
  }
}

int hkc_cli_count(hkc_cli_t *cli, const char *opt, const char *text, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(text ? text : "", &end, 10);
  if (!text || errno || *end || end == text || v < lo || v > hi) {
    hkc_cli_usage(cli, "%s expects an integer in [%lld, %lld], got '%s'", opt, lo, hi, text ? text : "");
    return -1;
  }
  *out = v;
  return 0;
}

int hkc_cli_progress(const hkc_cli_t *cli) {
  if (cli->quiet) return HKC_PROGRESS_OFF;
  if (cli->verbose) return HKC_PROGRESS_VERBOSE;
  return isatty(STDERR_FILENO) ? HKC_PROGRESS_TTY : HKC_PROGRESS_LINES;
}

cJSON *hkc_json_begin(const char *command) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return NULL;
  cJSON_AddNumberToObject(root, "schema", HKC_JSON_SCHEMA);
  cJSON_AddStringToObject(root, "command", command);
  cJSON_AddStringToObject(root, "hkc", HKC_VERSION_STRING);
  return root;
}

int hkc_json_end(cJSON *root, FILE *out) {
  char *text = root ? cJSON_Print(root) : NULL;
  cJSON_Delete(root);
  if (!text) {
    fprintf(stderr, "hkc: out of memory writing JSON\n");
    return -1;
  }
  fputs(text, out);
  fputc('\n', out);
  free(text);
  return fflush(out) == 0 ? 0 : -1;
}

int hkc_cli_size(const char *text, uint64_t *out) {
  char *end;
  errno = 0;
  if (!text || *text < '0' || *text > '9') return -1;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno || end == text) return -1;
  unsigned shift = 0;
  switch (*end) {
  case 'K': case 'k': shift = 10; end++; break;
  case 'M': case 'm': shift = 20; end++; break;
  case 'G': case 'g': shift = 30; end++; break;
  case 'T': case 't': shift = 40; end++; break;
  default: break;
  }
  if (shift && *end == 'i') end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end || (shift && v > (UINT64_MAX >> shift))) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

/* ---- what several commands do alike ---------------------------------------------------------- */
/* The help's last lines: the options every command takes, and -v / --json where the command
 * has them (docs/CLI.md, "Conventions"). */
void hkc_cli_common_help(int verbose, int json) {
  printf("\ncommon options: -q/--quiet, -h/--help%s%s.\n"
         "Options take their value as `--opt VALUE` or `--opt=VALUE`.\n",
         verbose ? ", -v/--verbose (a progress line per item done)" : "",
         json ? ", --json (one document on stdout: docs/CLI.md)" : "");
}

/* AMD toolchain calls run in worker processes, this binary re-executed (rtc_worker.h says
 * why); at most `jobs` of them (0: one per core), started when the first call needs one. */
int hkc_cli_start_workers(int jobs, int timeout_s) {
  if (jobs <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    jobs = n > 0 ? (int)n : 1;
  }
  if (hkc_amd_workers_start("/proc/self/exe", jobs, timeout_s) != 0) {
    fprintf(stderr, "hkc: out of memory starting the compile workers\n");
    return -1;
  }
  return 0;
}

/* HK_HOST_THREADS (the loader's variable) as the default of --host-threads; 0 if unset or
 * not a positive count (the loader reports a bad value when it runs). */
int hkc_cli_host_threads_env(void) {
  const char *e = getenv("HK_HOST_THREADS");
  char *end;
  long n = e && *e ? strtol(e, &end, 10) : 0;
  return e && *e && !*end && n > 0 && n < 1 << 20 ? (int)n : 0;
}

/* --kernel-option VALUE and --host-threads N, shared by build and tune (c: getopt's value).
 * 0, or -1 after a usage error. */
int hkc_cli_kernel_option(hkc_cli_t *cli, int c, const char *v, hkc_kernel_options_t *ko, int *host_threads) {
  if (c == OPT_HOST_THREADS) {
    long long n;
    if (hkc_cli_count(cli, "--host-threads", v, 1, 1 << 20, &n) != 0) return -1;
    *host_threads = (int)n;
    return 0;
  }
  char err[1024];
  if (hkc_kernel_options_set_arg(ko, v, err, sizeof err) != 0) {
    hkc_cli_usage(cli, "--kernel-option %s", err);
    return -1;
  }
  return 0;
}

/* The compile cache's size cap: --cache-max-size SIZE, else $HKC_CACHE_MAX_SIZE (hkc cache
 * clean --max-size after the command). 0, or -1 after a usage error; *out UINT64_MAX: none. */
int hkc_cli_cache_cap_env(hkc_cli_t *cli, uint64_t *out) {
  *out = UINT64_MAX;
  const char *e = getenv("HKC_CACHE_MAX_SIZE");
  if (e && *e && hkc_cli_size(e, out) != 0) {
    hkc_cli_usage(cli, "HKC_CACHE_MAX_SIZE is '%s'; expected a size such as 500M or 2G", e);
    return -1;
  }
  return 0;
}

/* Applies the cap after a command that wrote to the cache. Never changes the exit status. */
void hkc_cli_apply_cache_cap(const hkc_cli_t *cli, uint64_t cap) {
  if (cap == UINT64_MAX) return;
  hkc_cache_stats_t removed;
  if (hkc_cache_trim(NULL, cap, &removed) != 0)
    fprintf(stderr, "hkc %s: warning: compile cache size cap: %s\n", cli->cmd, strerror(errno));
  else if (cli->verbose && removed.entries)
    fprintf(stderr, "hkc %s: compile cache over its cap: removed %llu entr%s (%llu bytes)\n", cli->cmd,
            (unsigned long long)removed.entries, removed.entries == 1 ? "y" : "ies",
            (unsigned long long)removed.bytes);
}
