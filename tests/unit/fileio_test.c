/* SPDX-License-Identifier: Apache-2.0 */
/* The compiler's files (util.h, "files"): every writer -- the pack writer, the
 * tuning database, the compile cache, the .npy writer and its all-or-nothing sets -- runs
 * under an injected write layer that fails each write, fsync and rename in turn and that
 * writes short; after a failure no temporary file remains, the previous file keeps its
 * bytes and the error says which step failed. Outputs replace only regular files and the
 * umask decides their mode; inputs must be regular files below a cap. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pack_fixture.h"
#include "test_util.h"

/* ---- the injected layer ---------------------------------------------------------------- */
enum { K_WRITE, K_FSYNC, K_RENAME, K_KINDS };
static const char *const k_kind_names[K_KINDS] = {"write failed", "fsync failed", "rename failed"};
static int g_calls[K_KINDS];
static int g_fail_kind = -1, g_fail_at; /* the g_fail_at-th call of g_fail_kind fails (ENOSPC/EIO) */
static size_t g_short;                  /* > 0: writes put at most this many bytes */

static int inject(int kind) {
  if (++g_calls[kind] == g_fail_at && kind == g_fail_kind) {
    errno = kind == K_WRITE ? ENOSPC : EIO;
    return -1;
  }
  return 0;
}
static ssize_t t_write(int fd, const void *p, size_t n) {
  if (inject(K_WRITE)) return -1;
  return write(fd, p, g_short && n > g_short ? g_short : n);
}
static int t_fsync(int fd) { return inject(K_FSYNC) ? -1 : fsync(fd); }
static int t_rename(const char *a, const char *b) { return inject(K_RENAME) ? -1 : rename(a, b); }
static const hkc_io_ops_t k_ops = {t_write, t_fsync, t_rename};

static void arm(int kind, int at, size_t short_writes) {
  memset(g_calls, 0, sizeof g_calls);
  g_fail_kind = kind;
  g_fail_at = at;
  g_short = short_writes;
  hkc_io_set_ops(&k_ops);
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  if (d) closedir(d);
  return n;
}

static char *slurp(const char *path, size_t *size) {
  char *data = NULL;
  assert_int_equal(hkc_read_file(path, &data, size), 0);
  return data;
}

/* ---- the writers, each writing "new" content to path --------------------------------------- */
static char g_diag[8192];
static uint8_t g_code[64] = "host code bytes for the format: never loaded here";

static int write_pack(const char *path) {
  fx_t fx;
  fx_init(&fx, g_code, sizeof g_code, 0);
  return hkc_pack_write(&fx.in, path);
}

static int write_tunedb(const char *path) {
  static const char text[] = "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=128 n=64 k=64 | gemm_wgmma | bm=64,bn=64 | 6.25 us\n";
  hkc_tune_db_t db = {0};
  assert_int_equal(hkc_tune_db_parse(&db, "t.db", text, sizeof text - 1), 0);
  int rc = hkc_tune_db_write(&db, path);
  hkc_tune_db_free(&db);
  return rc;
}

static const hkc_cache_request_t k_request = {"kernel source", "-O3", "sm_90", "nvrtc test"};
static char g_cache_file[48]; /* <key>.hkcc of k_request: main() fills it */

/* The cache is best effort (no status): a failed put leaves the old file. The entry's
 * path is <dir>/<key>.hkcc, which the harness passes. */
static int write_cache(const char *path) {
  char dir[4200];
  snprintf(dir, sizeof dir, "%s", path);
  *strrchr(dir, '/') = '\0';
  hkc_cache_t *c = hkc_cache_open(dir);
  assert_non_null(c);
  char code[] = "cubin bytes";
  hkc_rtc_result_t r = {.code = code, .code_size = sizeof code, .log = (char *)"log"};
  hkc_cache_put(c, &k_request, &r);
  hkc_cache_close(c);
  return 0;
}

static int write_npy(const char *path) {
  const float data[6] = {1, 2, 3, 4, 5, 6};
  const int64_t dims[2] = {2, 3};
  return hkc_npy_write_f32(path, data, dims, 2);
}

typedef struct {
  const char *name, *file;
  int (*write)(const char *path);
  int reports; /* returns -1 and prints the failed step (the cache is silent) */
} writer_t;

static const writer_t k_writers[] = {
    {"pack", "model.hkpack", write_pack, 1},
    {"tuning database", "tuning.db", write_tunedb, 1},
    {"cache entry", g_cache_file, write_cache, 0},
    {"npy", "y.npy", write_npy, 1},
};

/* Each write, fsync and rename fails in turn: the old file stays, byte for byte, nothing
 * else is left, and the error names the step; then short writes give the right bytes. */
static void check_writer(const writer_t *w) {
  char *dir = hk_test_tmpdir(), ref[4100], path[4200];
  snprintf(ref, sizeof ref, "%s/ref", dir);
  assert_int_equal(mkdir(ref, 0700), 0);
  snprintf(path, sizeof path, "%s/%s", ref, w->file);
  hkc_io_set_ops(NULL);
  assert_int_equal(w->write(path), 0);
  size_t want_size;
  char *want = slurp(path, &want_size);

  snprintf(path, sizeof path, "%s/%s", dir, w->file);
  for (int kind = 0; kind < K_KINDS; kind++) {
    for (int at = 1;; at++) {
      FILE *f = fopen(path, "w");
      fputs("OLD", f);
      fclose(f);
      g_diag[0] = '\0';
      arm(kind, at, 0);
      int rc = w->write(path);
      hkc_io_set_ops(NULL);
      if (g_calls[kind] < at) { /* every call of this kind passed: the write went through */
        assert_int_equal(rc, 0);
        if (at == 1) fail_msg("%s: no %s call went through the write layer", w->name, k_kind_names[kind]);
        break;
      }
      size_t size;
      char *got = slurp(path, &size);
      if (strcmp(got, "OLD") != 0) fail_msg("%s: %s #%d: the old file was changed", w->name, k_kind_names[kind], at);
      free(got);
      if (count_entries(dir) != 2) fail_msg("%s: %s #%d: a file was left behind", w->name, k_kind_names[kind], at);
      if (w->reports) {
        assert_int_equal(rc, -1);
        if (!strstr(g_diag, k_kind_names[kind]) || !strstr(g_diag, path))
          fail_msg("%s: %s #%d: unclear error \"%s\"", w->name, k_kind_names[kind], at, g_diag);
      }
    }
  }
  arm(-1, 0, 3); /* short writes: 3 bytes a call */
  assert_int_equal(w->write(path), 0);
  hkc_io_set_ops(NULL);
  assert_true(g_calls[K_WRITE] > 3);
  size_t size;
  char *got = slurp(path, &size);
  assert_int_equal(size, want_size);
  assert_memory_equal(got, want, size);
  free(got);
  free(want);
  char cmd[9000];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  free(dir);
}

static void test_writers_under_faults(void **state) {
  (void)state;
  hkc_diag_capture(g_diag, sizeof g_diag);
  for (size_t i = 0; i < sizeof k_writers / sizeof k_writers[0]; i++) check_writer(&k_writers[i]);
  hkc_diag_capture(NULL, 0);
}

/* --save-outputs' sets: a failure at any step leaves none of the set's files (and no
 * temporaries); names that would leave the directory are refused by the writer itself. */
static void test_npy_set_all_or_nothing(void **state) {
  (void)state;
  hkc_diag_capture(g_diag, sizeof g_diag);
  char *dir = hk_test_tmpdir();
  const float data[4] = {1, 2, 3, 4};
  const int64_t dims[1] = {4};
  for (int kind = 0; kind < K_KINDS; kind++) {
    for (int at = 1;; at++) {
      hkc_npy_set_t set = {0};
      arm(kind, at, 0);
      int rc = hkc_npy_set_add(&set, dir, "a", data, dims, 1);
      if (rc == 0) rc = hkc_npy_set_add(&set, dir, "b", data, dims, 1);
      if (rc == 0) rc = hkc_npy_set_add(&set, dir, "c", data, dims, 1);
      if (rc == 0) rc = hkc_npy_set_commit(&set);
      hkc_npy_set_free(&set);
      hkc_io_set_ops(NULL);
      if (g_calls[kind] < at) {
        assert_int_equal(rc, 0);
        assert_true(at > 3); /* three files: at least three calls of each kind */
        assert_int_equal(count_entries(dir), 3);
        break;
      }
      assert_int_equal(rc, -1);
      if (count_entries(dir) != 0) fail_msg("%s #%d: %d file(s) left", k_kind_names[kind], at, count_entries(dir));
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -f '%s'/*", dir);
    assert_int_equal(system(cmd), 0);
  }
  const char *bad[] = {"../escaped_y", "a/b", "..", ".hidden", "x\033[31m", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    hkc_npy_set_t set = {0};
    g_diag[0] = '\0';
    assert_int_equal(hkc_npy_set_add(&set, dir, bad[i], data, dims, 1), -1);
    assert_non_null(strstr(g_diag, "refusing to write an output named"));
    hkc_npy_set_free(&set);
  }
  assert_int_equal(count_entries(dir), 0);
  rmdir(dir);
  free(dir);
  hkc_diag_capture(NULL, 0);
}

/* Outputs replace regular files only; the mode is 0666 less the umask. */
static void test_outputs_regular_files_and_umask(void **state) {
  (void)state;
  hkc_diag_capture(g_diag, sizeof g_diag);
  char *dir = hk_test_tmpdir(), path[4200];
  snprintf(path, sizeof path, "%s/fifo", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  for (size_t i = 0; i < sizeof k_writers / sizeof k_writers[0]; i++) {
    if (!k_writers[i].reports) continue;
    g_diag[0] = '\0';
    assert_int_equal(k_writers[i].write(path), -1);
    assert_non_null(strstr(g_diag, "is not a regular file (a FIFO): refusing to replace it"));
  }
  struct stat st;
  assert_int_equal(lstat(path, &st), 0);
  assert_true(S_ISFIFO(st.st_mode));
  unlink(path);
  snprintf(path, sizeof path, "%s/link.npy", dir);
  assert_int_equal(symlink("target.npy", path), 0);
  assert_int_equal(write_npy(path), -1);
  assert_non_null(strstr(g_diag, "symbolic link"));
  unlink(path);
  assert_int_equal(hkc_output_check("/dev/null", g_diag, sizeof g_diag), -1);
  assert_non_null(strstr(g_diag, "(a device)"));
  /* before any work: "-" (no file named "-"), a directory that does not exist or is a file */
  assert_int_equal(hkc_output_check("-", g_diag, sizeof g_diag), -1);
  assert_non_null(strstr(g_diag, "standard output"));
  snprintf(path, sizeof path, "%s/nodir/q.hkpack", dir);
  assert_int_equal(hkc_output_check(path, g_diag, sizeof g_diag), -1);
  assert_non_null(strstr(g_diag, "/nodir does not exist"));
  snprintf(path, sizeof path, "%s/plain", dir);
  assert_int_equal(write_npy(path), 0);
  snprintf(path, sizeof path, "%s/plain/q.hkpack", dir);
  assert_int_equal(hkc_output_check(path, g_diag, sizeof g_diag), -1);
  assert_non_null(strstr(g_diag, "/plain is not a directory"));
  snprintf(path, sizeof path, "%s/plain", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/new.hkpack", dir);
  assert_int_equal(hkc_output_check(path, g_diag, sizeof g_diag), 0);
  assert_int_equal(hkc_output_check("relative-new.hkpack", g_diag, sizeof g_diag), 0);

  mode_t old = umask(027);
  snprintf(path, sizeof path, "%s/m.npy", dir);
  assert_int_equal(write_npy(path), 0);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0640);
  unlink(path);
  snprintf(path, sizeof path, "%s/m.hkpack", dir);
  umask(0);
  assert_int_equal(write_pack(path), 0);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0666);
  unlink(path);
  umask(old);
  rmdir(dir);
  free(dir);
  hkc_diag_capture(NULL, 0);
}

/* Inputs: regular files only (a device or FIFO fails at once, without reading or blocking),
 * at most the cap. */
static void test_inputs_regular_and_capped(void **state) {
  (void)state;
  char *data;
  size_t size;
  assert_int_equal(hkc_read_file("/dev/zero", &data, &size), -1);
  assert_int_equal(errno, HKC_ENOTREG_DEVICE);
  assert_string_equal(hkc_strerror(HKC_ENOTREG_DEVICE), "not a regular file (a device)");
  assert_string_equal(hkc_strerror(HKC_ENOTREG_FIFO), "not a regular file (a FIFO)");
  assert_non_null(strstr(hkc_strerror(HKC_ENOTREG), "not a regular file"));
  /* never the C library's "Unknown error N" */
  assert_string_equal(hkc_strerror(0x7fff), "unexpected error code 32767");
  assert_string_equal(hkc_strerror(ENOENT), strerror(ENOENT));
  assert_null(data);
  char *dir = hk_test_tmpdir(), path[4200];
  assert_int_equal(hkc_read_file(dir, &data, &size), -1);
  assert_int_equal(errno, EISDIR);
  snprintf(path, sizeof path, "%s/fifo", dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  assert_int_equal(hkc_read_file(path, &data, &size), -1); /* and does not block */
  assert_int_equal(errno, HKC_ENOTREG_FIFO);
  assert_int_equal(hkc_open_input(path, UINT64_MAX, NULL), -1);
  assert_int_equal(errno, HKC_ENOTREG_FIFO);
  unlink(path);
  snprintf(path, sizeof path, "%s/f", dir);
  FILE *f = fopen(path, "w");
  fputs("0123456789", f);
  fclose(f);
  assert_int_equal(hkc_read_file_max(path, 9, &data, &size), -1);
  assert_int_equal(errno, EFBIG);
  assert_int_equal(hkc_read_file_max(path, 10, &data, &size), 0);
  assert_int_equal(size, 10);
  assert_string_equal(data, "0123456789");
  free(data);
  /* a regular file's descriptor comes back blocking, close-on-exec, with its stat */
  struct stat st;
  int fd = hkc_open_input(path, 10, &st);
  assert_true(fd >= 0);
  assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
  assert_int_not_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  assert_int_equal(st.st_size, 10);
  close(fd);
  assert_int_equal(hkc_open_input(path, 9, NULL), -1);
  assert_int_equal(errno, EFBIG);
  unlink(path);
  /* the spec loader: a clear error, at once */
  char diag[1024];
  hkc_diag_capture(diag, sizeof diag);
  hkc_spec_t *spec = NULL;
  assert_int_equal(hkc_spec_load("/dev/zero", &spec), -1);
  assert_non_null(strstr(diag, "/dev/zero: not a regular file (a device)"));
  hkc_diag_capture(NULL, 0);
  rmdir(dir);
  free(dir);
}

int main(void) {
  char key[33];
  hkc_cache_key(k_request.source, k_request.options, k_request.target, k_request.toolchain, key);
  snprintf(g_cache_file, sizeof g_cache_file, "%s.hkcc", key);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_writers_under_faults),
      cmocka_unit_test(test_npy_set_all_or_nothing),
      cmocka_unit_test(test_outputs_regular_files_and_umask),
      cmocka_unit_test(test_inputs_regular_and_capped),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
