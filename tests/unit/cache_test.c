/* SPDX-License-Identifier: Apache-2.0 */
/* The compile cache: round trips, misses, corrupt entries, unusable directories. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hkc.h"
#include "test_util.h"

static const unsigned char k_code[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0xe0, 0};

static hkc_rtc_result_t sample(void) {
  hkc_rtc_result_t r;
  memset(&r, 0, sizeof r);
  r.code = malloc(sizeof k_code);
  memcpy(r.code, k_code, sizeof k_code);
  r.code_size = sizeof k_code;
  r.log = hkc_strdup("warning: something on line 3");
  r.vgprs = 40;
  r.agprs = 8;
  r.sgprs = 22;
  r.shared_bytes = 4096;
  r.scratch_bytes = 16;
  r.wave_size = 64;
  r.max_block = 256;
  return r;
}

static char *entry_path(const char *dir, const hkc_cache_request_t *r) {
  char key[33];
  hkc_cache_key(r->source, r->options, r->target, r->toolchain, key);
  char *p = malloc(strlen(dir) + 64);
  sprintf(p, "%s/%s.hkcc", dir, key);
  return p;
}

static void test_key(void **state) {
  char a[33], b[33], c[33], d[33];
  hkc_cache_key("src", "-O3", "gfx90a", "hiprtc 5.2", a);
  hkc_cache_key("src", "-O3", "gfx90a", "hiprtc 5.2", b);
  assert_string_equal(a, b);
  assert_int_equal(strlen(a), 32);
  hkc_cache_key("sr", "c-O3", "gfx90a", "hiprtc 5.2", c); /* same bytes, other boundaries */
  assert_string_not_equal(a, c);
  hkc_cache_key("src", "-O3", "gfx908", "hiprtc 5.2", d);
  assert_string_not_equal(a, d);
  hkc_cache_key("src", "-O3", "gfx90a", "hiprtc 6.0", d);
  assert_string_not_equal(a, d);
}

static void test_round_trip(void **state) {
  char *dir = hk_test_tmpdir();
  char sub[1024];
  snprintf(sub, sizeof sub, "%s/a/b/cache", dir); /* created as needed */
  hkc_cache_t *c = hkc_cache_open(sub);
  assert_non_null(c);
  const hkc_cache_request_t key[1] = {{"kernel source", "--offload-arch=gfx90a -O3", "gfx90a", "hiprtc 5.2.21153, comgr 2.4"}},
                            other[1] = {{"kernel source 2", "--offload-arch=gfx90a -O3", "gfx90a", "hiprtc 5.2.21153, comgr 2.4"}};
  hkc_rtc_result_t in = sample(), out;
  assert_int_equal(hkc_cache_get(c, key, &out), -1); /* empty */
  hkc_cache_put(c, key, &in);
  assert_int_equal(hkc_cache_get(c, key, &out), 0);
  assert_int_equal(out.code_size, in.code_size);
  assert_memory_equal(out.code, in.code, in.code_size);
  assert_string_equal(out.log, in.log);
  assert_int_equal(out.vgprs, 40);
  assert_int_equal(out.agprs, 8);
  assert_int_equal(out.sgprs, 22);
  assert_int_equal(out.shared_bytes, 4096);
  assert_int_equal(out.scratch_bytes, 16);
  assert_int_equal(out.wave_size, 64);
  assert_int_equal(out.max_block, 256);
  hkc_rtc_result_free(&out);
  assert_int_equal(hkc_cache_get(c, other, &out), -1);
  assert_null(out.code);
  /* a log-less result round-trips with a NULL log; a put replaces the entry */
  free(in.log);
  in.log = NULL;
  in.vgprs = 41;
  hkc_cache_put(c, key, &in);
  assert_int_equal(hkc_cache_get(c, key, &out), 0);
  assert_null(out.log);
  assert_int_equal(out.vgprs, 41);
  hkc_rtc_result_free(&out);
  hkc_rtc_result_free(&in);
  /* a second handle on the same directory sees the entry */
  hkc_cache_close(c);
  c = hkc_cache_open(sub);
  assert_int_equal(hkc_cache_get(c, key, &out), 0);
  hkc_rtc_result_free(&out);
  hkc_cache_close(c);
  hkc_cache_close(NULL);
  free(dir);
}

/* Damages the entry with fn, then expects a miss and the file gone. */
static void corrupt_case(void (*damage)(const char *path)) {
  char *dir = hk_test_tmpdir();
  hkc_cache_t *c = hkc_cache_open(dir);
  assert_non_null(c);
  const hkc_cache_request_t key[1] = {{"s", "o", "gfx90a", "t"}};
  hkc_rtc_result_t in = sample(), out;
  hkc_cache_put(c, key, &in);
  char *path = entry_path(dir, key);
  assert_int_equal(access(path, F_OK), 0);
  damage(path);
  assert_int_equal(hkc_cache_get(c, key, &out), -1);
  assert_null(out.code);
  assert_int_equal(access(path, F_OK), -1); /* removed */
  hkc_cache_put(c, key, &in);                /* and replaced */
  assert_int_equal(hkc_cache_get(c, key, &out), 0);
  hkc_rtc_result_free(&out);
  hkc_rtc_result_free(&in);
  free(path);
  hkc_cache_close(c);
  free(dir);
}

static long file_size(const char *path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  return (long)st.st_size;
}
static void flip_at(const char *path, long off) {
  FILE *f = fopen(path, "r+b");
  assert_non_null(f);
  fseek(f, off, SEEK_SET);
  int ch = fgetc(f);
  fseek(f, off, SEEK_SET);
  fputc(ch ^ 0x01, f);
  fclose(f);
}
static void damage_truncate(const char *path) { assert_int_equal(truncate(path, file_size(path) - 3), 0); }
static void damage_truncate_header(const char *path) { assert_int_equal(truncate(path, 10), 0); }
static void damage_flip_code(const char *path) { flip_at(path, file_size(path) - 30); }
static void damage_flip_log(const char *path) { flip_at(path, file_size(path) - 1); }
static void damage_flip_magic(const char *path) { flip_at(path, 0); }
static void damage_flip_resource(const char *path) { flip_at(path, 64); } /* vgprs */
static void damage_empty(const char *path) { assert_int_equal(truncate(path, 0), 0); }

static void test_corrupt(void **state) {
  corrupt_case(damage_truncate);
  corrupt_case(damage_truncate_header);
  corrupt_case(damage_flip_code);
  corrupt_case(damage_flip_log);
  corrupt_case(damage_flip_magic);
  corrupt_case(damage_flip_resource);
  corrupt_case(damage_empty);
}

/* A forger's edit of the entry at path: its key field set to key_hex, the checksum
 * recomputed (XXH3-64 over the header, checksum zeroed, and the payload). */
static void forge(const char *path, const char *key_hex) {
  char *data;
  size_t size;
  assert_int_equal(hkc_read_file(path, &data, &size), 0);
  memcpy(data + 16, key_hex, 32); /* magic 8, version 4, header_size 4, then the key */
  uint32_t header;                /* the header's own size field; the checksum is its last field */
  memcpy(&header, data + 12, 4);
  uint64_t zero = 0, sum;
  memcpy(data + header - 8, &zero, 8);
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, data, header);
  XXH3_64bits_update(&st, data + header, size - header);
  sum = XXH3_64bits_digest(&st);
  memcpy(data + header - 8, &sum, 8);
  FILE *f = fopen(path, "wb");
  assert_int_equal(fwrite(data, 1, size, f), size);
  fclose(f);
  free(data);
}

/* An entry copied under another key's name is a miss (the key is echoed inside), and so
 * is one whose key field is rewritten too, with the checksum recomputed: the
 * entry records its request, which is not the reader's. */
static void test_wrong_key_echo(void **state) {
  char *dir = hk_test_tmpdir();
  hkc_cache_t *c = hkc_cache_open(dir);
  const hkc_cache_request_t r1 = {"a", "", "gfx90a", "t"}, r2 = {"b", "", "gfx90a", "t"};
  char k1[33], k2[33];
  hkc_cache_key(r1.source, r1.options, r1.target, r1.toolchain, k1);
  hkc_cache_key(r2.source, r2.options, r2.target, r2.toolchain, k2);
  hkc_rtc_result_t in = sample(), out;
  char *p1 = entry_path(dir, &r1), *p2 = entry_path(dir, &r2);
  for (int rewrite = 0; rewrite < 2; rewrite++) {
    hkc_cache_put(c, &r1, &in);
    if (rewrite) { /* the forger's edit is well made: in place it still reads back */
      forge(p1, k1);
      assert_int_equal(hkc_cache_get(c, &r1, &out), 0);
      hkc_rtc_result_free(&out);
    }
    assert_int_equal(rename(p1, p2), 0);
    if (rewrite) forge(p2, k2);
    assert_int_equal(hkc_cache_get(c, &r2, &out), -1);
    assert_null(out.code);
    assert_int_equal(access(p2, F_OK), -1);
  }
  free(p1);
  free(p2);
  hkc_rtc_result_free(&in);
  hkc_cache_close(c);
  free(dir);
}

/* A directory owned by someone else or writable by group/others is refused with one
 * warning (the build goes on uncached); fixing the mode makes it usable. */
static void test_dir_permissions(void **state) {
  char *dir = hk_test_tmpdir(), sub[1100], diag[2048];
  snprintf(sub, sizeof sub, "%s/shared", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  hkc_diag_capture(diag, sizeof diag);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(chmod(sub, i ? 0702 : 0770), 0);
    diag[0] = '\0';
    assert_null(hkc_cache_open(sub));
    assert_non_null(strstr(diag, i ? "writable by others" : "writable by its group"));
    assert_non_null(strstr(diag, "building without it"));
    assert_null(strchr(strchr(diag, '\n') + 1, '\n')); /* one warning */
  }
  assert_int_equal(chmod(sub, 0755), 0);
  diag[0] = '\0';
  hkc_cache_t *c = hkc_cache_open(sub);
  assert_non_null(c);
  assert_string_equal(diag, "");
  hkc_cache_close(c);
  if (geteuid() == 0) { /* root can make a directory someone else's */
    assert_int_equal(chown(sub, 12345, 12345), 0);
    assert_null(hkc_cache_open(sub));
    assert_non_null(strstr(diag, "owned by uid 12345"));
  } else {
    printf("not root: the foreign-owner case is checked on /tmp's sticky directory instead\n");
    diag[0] = '\0';
    assert_null(hkc_cache_open("/")); /* root's, not this user's */
    assert_non_null(strstr(diag, "owned by uid 0"));
  }
  hkc_diag_capture(NULL, 0);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  free(dir);
}

static void test_unusable_dir(void **state) {
  char *dir = hk_test_tmpdir();
  char file[1024], under[1100];
  snprintf(file, sizeof file, "%s/plainfile", dir);
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  fclose(f);
  assert_null(hkc_cache_open(file)); /* a file, not a directory */
  snprintf(under, sizeof under, "%s/sub", file);
  assert_null(hkc_cache_open(under)); /* below a file */
  if (geteuid() != 0) {                /* root ignores permission bits */
    char ro[1024];
    snprintf(ro, sizeof ro, "%s/ro", dir);
    assert_int_equal(mkdir(ro, 0500), 0);
    assert_null(hkc_cache_open(ro));
    snprintf(under, sizeof under, "%s/ro/sub", dir);
    assert_null(hkc_cache_open(under));
    chmod(ro, 0700);
  } else {
    printf("running as root: read-only directory case not checked\n");
  }
  /* the default directory: none set, none used; then the CLI's mapping of $HKC_CACHE_DIR */
  char env_dir[1024];
  snprintf(env_dir, sizeof env_dir, "%s/env", dir);
  hkc_env_set(NULL);
  assert_null(hkc_cache_open(NULL));
  setenv("HKC_CACHE_DIR", env_dir, 1);
  hkc_env_from_process();
  unsetenv("HKC_CACHE_DIR");
  hkc_cache_t *c = hkc_cache_open(NULL);
  assert_non_null(c);
  hkc_cache_close(c);
  struct stat st;
  assert_int_equal(stat(env_dir, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  hkc_env_set(NULL);
  free(dir);
}

typedef struct {
  hkc_cache_t *cache;
  const hkc_cache_request_t *key;
  int hits, bad;
} race_t;

/* Writers and readers of one key at once: every read is a clean miss or the full entry. */
static void *race_thread(void *arg) {
  race_t *r = arg;
  for (int i = 0; i < 200; i++) {
    hkc_rtc_result_t in = sample(), out;
    hkc_cache_put(r->cache, r->key, &in);
    if (hkc_cache_get(r->cache, r->key, &out) == 0) {
      r->hits++;
      if (out.code_size != sizeof k_code || memcmp(out.code, k_code, sizeof k_code) != 0 || out.vgprs != 40) r->bad++;
      hkc_rtc_result_free(&out);
    }
    hkc_rtc_result_free(&in);
  }
  return NULL;
}

static void test_concurrent(void **state) {
  char *dir = hk_test_tmpdir();
  hkc_cache_t *c = hkc_cache_open(dir);
  const hkc_cache_request_t key[1] = {{"race", "", "gfx90a", "t"}};
  race_t r[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    r[i] = (race_t){c, key, 0, 0};
    assert_int_equal(pthread_create(&th[i], NULL, race_thread, &r[i]), 0);
  }
  int hits = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(r[i].bad, 0);
    hits += r[i].hits;
  }
  assert_true(hits > 0);
  char cmd[1200], out[256];
  snprintf(cmd, sizeof cmd, "ls -A '%s' | wc -l", dir);
  hk_test_run(cmd, out, sizeof out);
  assert_int_equal(atoi(out), 1); /* one entry, no temporaries left */
  hkc_cache_close(c);
  free(dir);
}

/* Writes n bytes of text to path. */
static void write_small(const char *path, const char *text, size_t n) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, n, f), n);
  fclose(f);
}

/* Sets a file's modification time to `ago` seconds before now. */
static void age(const char *path, long ago) {
  struct timespec t[2];
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[0].tv_sec -= ago;
  t[1] = t[0];
  assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

/* hkc cache stats / clean: real entries, least recently used removed first (a hit makes an
 * entry recent), writers' young temporary files and foreign files kept. */
static void test_stats_trim(void **state) {
  char *dir = hk_test_tmpdir();
  hkc_cache_t *c = hkc_cache_open(dir);
  assert_non_null(c);
  hkc_cache_request_t req[4];
  char src[4][32], *paths[4];
  hkc_rtc_result_t in = sample(), out;
  for (int i = 0; i < 4; i++) {
    snprintf(src[i], sizeof src[i], "kernel %d", i);
    req[i] = (hkc_cache_request_t){src[i], "-O3", "gfx90a", "hiprtc"};
    hkc_cache_put(c, &req[i], &in);
    paths[i] = entry_path(dir, &req[i]);
    age(paths[i], 1000 - i * 100); /* entry 0 the oldest */
  }
  const off_t entry = file_size(paths[0]);
  hkc_cache_stats_t st;
  assert_int_equal(hkc_cache_stats(dir, &st), 0);
  assert_int_equal(st.entries, 4);
  assert_int_equal(st.bytes, 4 * (uint64_t)entry);
  /* a hit on entry 0 makes it the most recent */
  assert_int_equal(hkc_cache_get(c, &req[0], &out), 0);
  hkc_rtc_result_free(&out);
  char young[1200], old[1200], foreign[1200];
  snprintf(young, sizeof young, "%s/.%032x.hkcc.tmp.1", dir, 7);
  snprintf(old, sizeof old, "%s/.%032x.hkcc.tmp.2", dir, 8);
  snprintf(foreign, sizeof foreign, "%s/notes.txt", dir);
  write_small(young, "x", 1);
  write_small(old, "xy", 2);
  write_small(foreign, "mine", 4);
  age(old, 2 * HKC_CACHE_TMP_AGE_S);
  assert_int_equal(hkc_cache_stats(dir, &st), 0);
  assert_int_equal(st.temporary, 2);
  assert_int_equal(st.temporary_bytes, 3);
  /* cap at two entries: 1 and 2 (the least recently used now) go */
  hkc_cache_stats_t removed;
  assert_int_equal(hkc_cache_trim(dir, 2 * (uint64_t)entry, &removed), 0);
  assert_int_equal(removed.entries, 2);
  assert_int_equal(removed.bytes, 2 * (uint64_t)entry);
  assert_int_equal(removed.temporary, 1);
  assert_int_equal(access(paths[0], F_OK), 0);
  assert_int_not_equal(access(paths[1], F_OK), 0);
  assert_int_not_equal(access(paths[2], F_OK), 0);
  assert_int_equal(access(paths[3], F_OK), 0);
  assert_int_equal(access(young, F_OK), 0);
  assert_int_not_equal(access(old, F_OK), 0);
  /* UINT64_MAX removes no entry; 0 every one; foreign files stay */
  assert_int_equal(hkc_cache_trim(dir, UINT64_MAX, &removed), 0);
  assert_int_equal(removed.entries, 0);
  assert_int_equal(hkc_cache_trim(dir, 0, &removed), 0);
  assert_int_equal(removed.entries, 2);
  assert_int_equal(hkc_cache_stats(dir, &st), 0);
  assert_int_equal(st.entries, 0);
  assert_int_equal(access(foreign, F_OK), 0);
  /* a missing directory is an empty cache */
  char missing[1200];
  snprintf(missing, sizeof missing, "%s/none", dir);
  assert_int_equal(hkc_cache_stats(missing, &st), 0);
  assert_int_equal(st.entries + st.bytes + st.temporary, 0);
  assert_int_equal(hkc_cache_trim(missing, 0, &removed), 0);
  for (int i = 0; i < 4; i++) free(paths[i]);
  hkc_rtc_result_free(&in);
  hkc_cache_close(c);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_key),           cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_corrupt),       cmocka_unit_test(test_wrong_key_echo),
      cmocka_unit_test(test_unusable_dir),  cmocka_unit_test(test_concurrent),
      cmocka_unit_test(test_dir_permissions), cmocka_unit_test(test_stats_trim),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
