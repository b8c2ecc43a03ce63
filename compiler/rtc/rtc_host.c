/* SPDX-License-Identifier: Apache-2.0 */
/* Host "runtime compilation": C source -> shared object bytes, through the system C
 * compiler ($CC, else cc). The compiler runs in a private temporary directory on the
 * relative names in.c / out.so, so no temporary path ends up in the object and the
 * same source gives the same bytes (reproducible builds). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rtc/rtc.h"
#include "util/util.h"

#define RTC_MAX_ARGV 64        /* words of $CC plus our ~14 flags */
#define RTC_MAX_DIAG (16 << 10) /* compiler output kept for the error message */
#define RTC_DIR_MAX 1024        /* the temporary directory's path ($TMPDIR + 15) */
#define RTC_PATH_MAX (RTC_DIR_MAX + 320) /* a file in it: room for any d_name */

/* Splits $CC (e.g. "ccache gcc") on blanks into argv; no shell quoting rules. */
static int split_cc(char *cc, char **argv, int max) {
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(cc, " \t", &save); tok && n < max; tok = strtok_r(NULL, " \t", &save))
    argv[n++] = tok;
  return n;
}

/* Runs argv in dir with stdout+stderr into dir/log. Returns the exit status, or -1
 * when the program could not be started (errno-like detail in the log). */
static int run_in_dir(char *const *argv, const char *dir, const char *log_name) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (chdir(dir) != 0) _exit(126);
    int fd = open(log_name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) _exit(126);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    execvp(argv[0], argv);
    static const char msg[] = "hkc: cannot execute the C compiler\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    char path[RTC_PATH_MAX];
    while ((e = readdir(d))) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
    closedir(d);
  }
  rmdir(dir);
}

static int write_file(const char *path, const char *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t put = fwrite(data, 1, size, f);
  return (fclose(f) == 0 && put == size) ? 0 : -1;
}

/* Names of the kernels in a generated source ("#define HK_NAME x" lines), for messages. */
static void kernel_names(const char *source, char *out, size_t size) {
  static const char tag[] = "#define HK_NAME ";
  size_t len = 0, count = 0;
  out[0] = '\0';
  for (const char *p = strstr(source, tag); p; p = strstr(p + 1, tag)) {
    p += sizeof tag - 1;
    size_t n = strcspn(p, "\n");
    if (count++ < 8 && len + n + 3 < size) {
      len += (size_t)snprintf(out + len, size - len, "%s%.*s", len ? ", " : "", (int)n, p);
    }
  }
  if (count > 8 && len + 16 < size) snprintf(out + len, size - len, " (+%zu more)", count - 8);
  if (count == 0) snprintf(out, size, "(none)");
}

/* First line of `$CC --version` into out; "unknown" when it cannot be run. */
static void cc_version(char **cc_argv, int cc_n, const char *dir, char *out, size_t size) {
  if (!out || !size) return;
  char *argv[RTC_MAX_ARGV + 1];
  int n = 0;
  for (int i = 0; i < cc_n; i++) argv[n++] = cc_argv[i];
  argv[n++] = "--version";
  argv[n] = NULL;
  snprintf(out, size, "unknown");
  if (run_in_dir(argv, dir, "version.txt") != 0) return;
  char path[RTC_PATH_MAX], *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/version.txt", dir);
  if (hkc_read_file(path, &text, &len) == 0) {
    text[strcspn(text, "\r\n")] = '\0';
    if (text[0]) snprintf(out, size, "%s", text);
    free(text);
  }
}

int hkc_rtc_host_compile(const char *source, void **out_code, size_t *out_size, char *out_version,
                         size_t version_size) {
  *out_code = NULL;
  *out_size = 0;
  const char *base = hkc_env_tmp_dir();
  char dir[RTC_DIR_MAX];
  int len = snprintf(dir, sizeof dir, "%s/hkc-rtc.XXXXXX", base);
  if (len < 0 || (size_t)len >= sizeof dir) {
    hkc_error((hkc_loc_t){0}, "host compile: $TMPDIR is longer than %d bytes", RTC_DIR_MAX - 16);
    return -1;
  }
  if (!mkdtemp(dir)) {
    hkc_error((hkc_loc_t){0}, "host compile: cannot create a temporary directory under %s: %s", base,
              hkc_strerror(errno));
    return -1;
  }

  char *cc = hkc_strdup(hkc_env_cc());
  char *argv[RTC_MAX_ARGV + 1];
  char prefix_map[RTC_PATH_MAX];
  char path[RTC_PATH_MAX];
  int rc = -1;
  if (!cc) goto done;
  int cc_n = split_cc(cc, argv, RTC_MAX_ARGV - 16);
  if (cc_n == 0) {
    hkc_error((hkc_loc_t){0}, "host compile: $CC is blank");
    goto done;
  }
  cc_version(argv, cc_n, dir, out_version, version_size);

  snprintf(path, sizeof path, "%s/in.c", dir);
  if (write_file(path, source, strlen(source)) != 0) {
    hkc_error((hkc_loc_t){0}, "host compile: cannot write %s: %s", path, hkc_strerror(errno));
    goto done;
  }
  snprintf(prefix_map, sizeof prefix_map, "-ffile-prefix-map=%s=.", dir);
  int n = cc_n;
  argv[n++] = "-O2";
  /* Kernels never read the floating-point exception flags: selects between values that may
   * raise them (prelude.h's hk_exp, hk_erf1p) become vector blends instead of branches. The
   * results are the same IEEE values. */
  argv[n++] = "-fno-trapping-math";
  argv[n++] = "-std=c11";
  argv[n++] = "-shared";
  argv[n++] = "-fPIC";
  argv[n++] = "-fvisibility=hidden";
  argv[n++] = prefix_map;
#if defined(__linux__)
  argv[n++] = "-Wl,--build-id=none";
#endif
  argv[n++] = "-o";
  argv[n++] = "out.so";
  argv[n++] = "in.c";
  argv[n++] = "-lm";
  argv[n] = NULL;

  int status = run_in_dir(argv, dir, "cc.log");
  if (status != 0) {
    char names[512], *log = NULL;
    size_t log_len = 0;
    kernel_names(source, names, sizeof names);
    snprintf(path, sizeof path, "%s/cc.log", dir);
    if (hkc_read_file(path, &log, &log_len) == 0 && log_len > RTC_MAX_DIAG) log[RTC_MAX_DIAG] = '\0';
    hkc_error((hkc_loc_t){0}, "host compile failed (%s exited with %d) for kernels %s:\n%s", argv[0], status,
              names, log ? log : "");
    free(log);
    goto done;
  }
  char *code = NULL;
  size_t code_size = 0;
  snprintf(path, sizeof path, "%s/out.so", dir);
  if (hkc_read_file(path, &code, &code_size) != 0) {
    hkc_error((hkc_loc_t){0}, "host compile: cannot read the compiled object: %s", hkc_strerror(errno));
    goto done;
  }
  *out_code = code;
  *out_size = code_size;
  rc = 0;
done:
  free(cc);
  remove_tree(dir);
  return rc;
}

/* ---- the compiler's version without compiling (rtc.h; tune/ keys the tuning database with it) ---------- */
static char g_host_version[160];
static pthread_once_t g_host_version_once = PTHREAD_ONCE_INIT;

static void probe_host_version(void) {
  snprintf(g_host_version, sizeof g_host_version, "unknown");
  char dir[RTC_DIR_MAX];
  int len = snprintf(dir, sizeof dir, "%s/hkc-rtc.XXXXXX", hkc_env_tmp_dir());
  if (len < 0 || (size_t)len >= sizeof dir || !mkdtemp(dir)) return;
  char *cc = hkc_strdup(hkc_env_cc());
  char *argv[RTC_MAX_ARGV + 1];
  int cc_n = cc ? split_cc(cc, argv, RTC_MAX_ARGV - 16) : 0;
  if (cc_n > 0) cc_version(argv, cc_n, dir, g_host_version, sizeof g_host_version);
  free(cc);
  remove_tree(dir);
}

const char *hkc_rtc_host_version(void) {
  pthread_once(&g_host_version_once, probe_host_version);
  return g_host_version;
}

/* ---- the host entry of the toolchain table (toolchain.h) ------------------------------------ */
/* The C compiler is there when `$CC --version` runs. */
static int host_available(char *why, size_t why_size) {
  if (strcmp(hkc_rtc_host_version(), "unknown") != 0) return 0;
  if (why && why_size)
    snprintf(why, why_size, "cannot run `%s --version`: install a C compiler (Debian package gcc) or set $CC",
             hkc_env_cc());
  return -1;
}

/* The one translation unit of a host target; errors go through hkc_error (rtc_host.c's
 * compile reports them itself). */
static int host_compile(const char *source, const char *name, const char *target, hkc_rtc_result_t *out) {
  memset(out, 0, sizeof *out);
  char version[160];
  return hkc_rtc_host_compile(source, &out->code, &out->code_size, version, sizeof version);
}

static void host_launch_dims(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                             uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  hkc_host_launch_dims(key, args, n_args, out_grid, out_block);
  *out_shared = 0;
}

/* objdump on the shared object, the kernel's function only. */
static int host_disassemble(const void *code, size_t size, const char *kernel, const char *target, char **out_text,
                            char *why, size_t why_size) {
  *out_text = NULL;
  char *path = hkc_rtc_temp_file(code, size, ".so");
  if (!path) {
    snprintf(why, why_size, "cannot write a temporary file for objdump");
    return -1;
  }
  char sel[512];
  snprintf(sel, sizeof sel, "--disassemble=%s", kernel);
  char *argv[] = {"objdump", "-d", "--no-show-raw-insn", sel, path, NULL};
  int rc = hkc_rtc_exec_capture(argv, out_text);
  unlink(path);
  free(path);
  if (rc == 0) return 0;
  free(*out_text);
  *out_text = NULL;
  snprintf(why, why_size, "objdump failed or is missing (Debian package binutils)");
  return -1;
}

static int host_list_targets(char ***out_names, size_t *out_count, char *why, size_t why_size) {
  *out_count = 0;
  *out_names = calloc(1, sizeof **out_names);
  if (!*out_names || !((*out_names)[0] = hkc_strdup(hkc_host_target_name()))) {
    free(*out_names);
    *out_names = NULL;
    snprintf(why, why_size, "out of memory");
    return -1;
  }
  *out_count = 1;
  return 0;
}

const hkc_toolchain_t hkc_toolchain_host = {
    .name = "host",
    .kind = HK_TARGET_HOST,
    .vendor = "host",
    .program = "a C compiler",
    .label = "host",
    .spill_memory = "stack",
    .compute_unit = "core",
    .occupancy_unit = "-",
    .available = host_available,
    .version = hkc_rtc_host_version,
    .codegen_unit = hkc_codegen_host,
    .launch_dims = host_launch_dims,
    .compile = host_compile,
    .disassemble = host_disassemble,
    .list_targets = host_list_targets,
};
