/* The compile cache: round trips, misses, corrupt entries, unusable directories. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

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

static char *entry_path(const char *dir, const char *key) {
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
  char key[33], other[33];
  hkc_cache_key("kernel source", "--offload-arch=gfx90a -O3", "gfx90a", "hiprtc 5.2.21153, comgr 2.4", key);
  hkc_cache_key("kernel source 2", "--offload-arch=gfx90a -O3", "gfx90a", "hiprtc 5.2.21153, comgr 2.4", other);
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
  /* keys that are not 32 hex digits are refused (they name files) */
  assert_int_equal(hkc_cache_get(c, "../../etc/passwd", &out), -1);
  hkc_cache_put(c, "../x", &in);
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
  char key[33];
  hkc_cache_key("s", "o", "gfx90a", "t", key);
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

/* An entry copied under another key's name is a miss (the key is echoed inside). */
static void test_wrong_key_echo(void **state) {
  char *dir = hk_test_tmpdir();
  hkc_cache_t *c = hkc_cache_open(dir);
  char k1[33], k2[33];
  hkc_cache_key("a", "", "gfx90a", "t", k1);
  hkc_cache_key("b", "", "gfx90a", "t", k2);
  hkc_rtc_result_t in = sample(), out;
  hkc_cache_put(c, k1, &in);
  char *p1 = entry_path(dir, k1), *p2 = entry_path(dir, k2);
  assert_int_equal(rename(p1, p2), 0);
  assert_int_equal(hkc_cache_get(c, k2, &out), -1);
  assert_int_equal(access(p2, F_OK), -1);
  hkc_rtc_result_free(&in);
  free(p1);
  free(p2);
  hkc_cache_close(c);
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
  const char *key;
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
  char key[33];
  hkc_cache_key("race", "", "gfx90a", "t", key);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_key),           cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_corrupt),       cmocka_unit_test(test_wrong_key_echo),
      cmocka_unit_test(test_unusable_dir),  cmocka_unit_test(test_concurrent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
