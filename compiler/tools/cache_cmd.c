/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc cache stats | clean [--max-size SIZE]`: the compile cache directory ($HKC_CACHE_DIR,
 * else $XDG_CACHE_HOME/hkc, else ~/.cache/hkc) through rtc/cache.c's size and cleaning calls.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "rtc/rtc.h"
#include "tools/tools.h"
#include "util/util.h"

static const char k_cache_usage[] =
    "usage: hkc cache stats [--json]\n"
    "       hkc cache clean [--max-size SIZE] [-q]\n"
    "\n"
    "The compile cache: one file per compiled kernel in $HKC_CACHE_DIR (default\n"
    "$XDG_CACHE_HOME/hkc, else ~/.cache/hkc).\n"
    "\n"
    "  stats                 its directory, entries and bytes (and writers' temporary files)\n"
    "  clean                 remove every entry\n"
    "  clean --max-size SIZE remove the least recently used entries (a build that reads an entry\n"
    "                        marks it used) until the rest take at most SIZE: bytes, or 500K,\n"
    "                        500M, 2G, 1T (binary units)\n"
    "  --json                stats: one JSON document on stdout (docs/CLI.md)\n"
    "\n"
    "Safe beside running builds: an entry is one file, removed whole; temporary files younger\n"
    "than a minute (a writer at work) are left. Only this user's own files are removed (owned\n"
    "by this user and not writable by group or others, as builds require of the entries they\n"
    "use), and nothing in a directory another user owns. `hkc build --cache-max-size SIZE` or\n"
    "HKC_CACHE_MAX_SIZE=SIZE cap the cache after every build.\n";

static void help_cache(void) { fputs(k_cache_usage, stdout); }

enum { OPT_MAX_SIZE = HKC_OPT_BASE };

int hkc_cmd_cache(int argc, char **argv) {
  static const struct option longopts[] = {{"max-size", required_argument, NULL, OPT_MAX_SIZE},
                                           {"json", no_argument, NULL, HKC_OPT_JSON},
                                           {"quiet", no_argument, NULL, 'q'},
                                           {"verbose", no_argument, NULL, 'v'},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "cache", "hkc cache stats [--json] | hkc cache clean [--max-size SIZE]", help_cache, 1);
  uint64_t max = 0;
  int have_max = 0, c;
  while ((c = hkc_cli_next(&cli, argc, argv, "", longopts)) != -1) {
    if (c == HKC_CLI_STOP) return cli.rc;
    if (hkc_cli_size(optarg, &max) != 0)
      return hkc_cli_usage(&cli, "--max-size expects a size such as 500M or 2G, got '%s'", optarg), 2;
    have_max = 1;
  }
  const char *sub = optind < argc ? argv[optind++] : NULL;
  if (!sub) return hkc_cli_usage(&cli, "say stats or clean"), 2;
  if (optind < argc) return hkc_cli_usage(&cli, "unexpected argument %s", argv[optind]), 2;
  const char *dir = hkc_env_cache_dir();
  if (!dir) {
    fprintf(stderr, "hkc cache: no compile cache directory (set HKC_CACHE_DIR or HOME)\n");
    return 1;
  }
  if (strcmp(sub, "stats") == 0) {
    if (have_max) return hkc_cli_usage(&cli, "--max-size goes with clean"), 2;
    hkc_cache_stats_t st;
    if (hkc_cache_stats(dir, &st) != 0) {
      fprintf(stderr, "hkc cache: %s: %s\n", dir, hkc_strerror(errno));
      return 1;
    }
    if (cli.json) {
      cJSON *root = hkc_json_begin("cache stats");
      if (!root) return 1;
      cJSON_AddStringToObject(root, "dir", dir);
      cJSON_AddNumberToObject(root, "entries", (double)st.entries);
      cJSON_AddNumberToObject(root, "bytes", (double)st.bytes);
      cJSON_AddNumberToObject(root, "temporary", (double)st.temporary);
      cJSON_AddNumberToObject(root, "temporary_bytes", (double)st.temporary_bytes);
      return hkc_json_end(root, stdout) == 0 ? 0 : 1;
    }
    printf("dir: %s\nentries: %llu\nbytes: %llu\n", dir, (unsigned long long)st.entries,
           (unsigned long long)st.bytes);
    if (st.temporary || cli.verbose)
      printf("temporary files: %llu (%llu bytes)\n", (unsigned long long)st.temporary,
             (unsigned long long)st.temporary_bytes);
    return 0;
  }
  if (strcmp(sub, "clean") == 0) {
    if (cli.json) return hkc_cli_usage(&cli, "--json goes with stats"), 2;
    hkc_cache_stats_t removed;
    const int rc = hkc_cache_trim(dir, have_max ? max : 0, &removed);
    if (rc != 0 && errno == EPERM)
      fprintf(stderr, "hkc cache: %s is not owned by this user (uid %u): nothing removed there\n", dir,
              (unsigned)geteuid());
    else if (rc != 0)
      fprintf(stderr, "hkc cache: %s: %s\n", dir, hkc_strerror(errno));
    if (!cli.quiet)
      printf("removed %llu entr%s (%llu bytes) from %s\n", (unsigned long long)removed.entries,
             removed.entries == 1 ? "y" : "ies", (unsigned long long)removed.bytes, dir);
    return rc == 0 ? 0 : 1;
  }
  return hkc_cli_usage(&cli, "unknown subcommand '%s' (stats or clean)", sub), 2;
}
