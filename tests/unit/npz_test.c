/* SPDX-License-Identifier: Apache-2.0 */
/* npz.c: archives built here with libzip (stored and deflated members), read back from
 * memory and from a file; the member checks (names, duplicates, the size cap, a damaged
 * member, a member that is no .npy); the format sniffing of hkc run --weights. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include <cmocka.h>

#include "hkc.h"
#include "test_util.h"

static char diag[4096];

typedef struct member {
  const char *name;
  const void *data;
  size_t size;
  int deflate;
} member_t;

/* A zip of the members, written by libzip into memory: *out (malloc'd), *out_size. */
static void make_zip(const member_t *m, int n, unsigned char **out, size_t *out_size) {
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(NULL, 0, 0, &ze);
  assert_non_null(src);
  zip_source_keep(src);
  zip_t *za = zip_open_from_source(src, ZIP_TRUNCATE, &ze);
  assert_non_null(za);
  for (int i = 0; i < n; i++) {
    zip_source_t *f = zip_source_buffer(za, m[i].data, m[i].size, 0);
    assert_non_null(f);
    zip_int64_t idx = zip_file_add(za, m[i].name, f, ZIP_FL_ENC_UTF_8);
    assert_true(idx >= 0);
    zip_int32_t method = m[i].deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE;
    assert_int_equal(zip_set_file_compression(za, (zip_uint64_t)idx, method, 0), 0);
  }
  assert_int_equal(zip_close(za), 0);
  assert_int_equal(zip_source_open(src), 0);
  assert_int_equal(zip_source_seek(src, 0, SEEK_END), 0);
  zip_int64_t len = zip_source_tell(src);
  assert_true(len > 0);
  assert_int_equal(zip_source_seek(src, 0, SEEK_SET), 0);
  *out = malloc((size_t)len);
  assert_non_null(*out);
  assert_int_equal(zip_source_read(src, *out, (zip_uint64_t)len), len);
  zip_source_close(src);
  zip_source_free(src);
  zip_error_fini(&ze);
  *out_size = (size_t)len;
}

/* A .npy of n f32 values 0.5 * i - 1, shape (rows, n / rows), written by hkc's own writer. */
static unsigned char *make_npy(int rows, int n, size_t *out_size) {
  char path[4200];
  char *dir = hk_test_tmpdir();
  assert_non_null(dir);
  snprintf(path, sizeof path, "%s/m.npy", dir);
  float *data = malloc((size_t)n * sizeof *data);
  assert_non_null(data);
  for (int i = 0; i < n; i++) data[i] = 0.5f * (float)i - 1.0f;
  int64_t dims[2] = {rows, n / rows};
  assert_int_equal(hkc_npy_write_f32(path, data, dims, 2), 0);
  free(data);
  char *bytes;
  assert_int_equal(hkc_read_file(path, &bytes, out_size), 0);
  unlink(path);
  rmdir(dir);
  free(dir);
  return (unsigned char *)bytes;
}

static void test_read_members(void **state) {
  (void)state;
  size_t na, nb;
  unsigned char *a = make_npy(2, 6, &na), *b = make_npy(4, 64, &nb);
  member_t m[] = {{"w.npy", a, na, 0}, {"layer.0/b.npy", b, nb, 1}, {"a.npy", a, na, 1}};
  unsigned char *zip;
  size_t size;
  make_zip(m, 3, &zip, &size);
  hkc_npz_t *npz;
  assert_int_equal(hkc_npz_open_memory("t.npz", zip, size, &npz), 0);
  assert_int_equal(hkc_npz_count(npz), 3);
  assert_string_equal(hkc_npz_name(npz, 0), "a"); /* sorted by name */
  assert_string_equal(hkc_npz_name(npz, 1), "layer.0/b");
  assert_string_equal(hkc_npz_name(npz, 2), "w");
  assert_null(hkc_npz_name(npz, 3));
  uint32_t i;
  assert_int_equal(hkc_npz_find(npz, "layer.0/b", &i), 0);
  assert_int_equal(i, 1);
  assert_int_equal(hkc_npz_find(npz, "w.npy", &i), -1);
  hkc_npy_t npy;
  assert_int_equal(hkc_npz_read(npz, 1, hkc_npz_member_limit(64), &npy), 0); /* deflated */
  assert_int_equal(npy.rank, 2);
  assert_int_equal(npy.dims[0], 4);
  assert_int_equal(npy.dims[1], 16);
  for (int k = 0; k < 64; k++) assert_true(npy.data[k] == 0.5f * (float)k - 1.0f);
  hkc_npy_free(&npy);
  assert_int_equal(hkc_npz_read(npz, 2, hkc_npz_member_limit(6), &npy), 0); /* stored */
  assert_int_equal(npy.count, 6);
  assert_true(npy.data[5] == 1.5f);
  hkc_npy_free(&npy);
  /* the cap: a member larger than max_bytes is refused before it is inflated */
  hkc_diag_capture(diag, sizeof diag);
  assert_int_equal(hkc_npz_read(npz, 1, nb - 1, &npy), -1);
  hkc_diag_capture(NULL, 0);
  assert_non_null(strstr(diag, "t.npz: member layer.0/b.npy: "));
  assert_non_null(strstr(diag, "refused unread"));
  hkc_npz_destroy(npz);

  /* the same bytes from a file */
  char path[4200];
  char *dir = hk_test_tmpdir();
  assert_non_null(dir);
  snprintf(path, sizeof path, "%s/t.npz", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(zip, 1, size, f), size);
  fclose(f);
  assert_int_equal(hkc_npz_open_file(path, &npz), 0);
  assert_int_equal(hkc_npz_count(npz), 3);
  assert_int_equal(hkc_npz_read(npz, 0, hkc_npz_member_limit(6), &npy), 0);
  assert_true(npy.data[0] == -1.0f);
  hkc_npy_free(&npy);
  hkc_npz_destroy(npz);
  hkc_npz_destroy(NULL);
  unlink(path);
  rmdir(dir);
  free(dir);
  free(zip);
  free(a);
  free(b);
}

/* Opening bytes that must fail prints a message containing want. */
static void expect_open_fails(const void *bytes, size_t size, const char *want) {
  hkc_npz_t *npz = (hkc_npz_t *)1;
  hkc_diag_capture(diag, sizeof diag);
  int rc = hkc_npz_open_memory("bad.npz", bytes, size, &npz);
  hkc_diag_capture(NULL, 0);
  assert_int_equal(rc, -1);
  assert_null(npz);
  if (!strstr(diag, want)) fail_msg("expected \"%s\" in: %s", want, diag);
}

static void test_refusals(void **state) {
  (void)state;
  size_t na;
  unsigned char *a = make_npy(1, 4, &na);
  unsigned char *zip;
  size_t size;
  member_t text[] = {{"w.npy", a, na, 0}, {"notes.txt", "hello", 5, 0}};
  make_zip(text, 2, &zip, &size);
  expect_open_fails(zip, size, "member \"notes.txt\" is not a .npy member");
  free(zip);
  member_t spaced[] = {{"a b.npy", a, na, 0}};
  make_zip(spaced, 1, &zip, &size);
  expect_open_fails(zip, size, "member \"a b.npy\" is not a .npy member");
  free(zip);
  member_t bare[] = {{".npy", a, na, 0}};
  make_zip(bare, 1, &zip, &size);
  expect_open_fails(zip, size, "is not a .npy member");
  free(zip);
  expect_open_fails("PK\3\4 and then nothing", 22, "truncated or damaged zip archive");
  expect_open_fails("plain text", 10, "not a zip archive");
  expect_open_fails("", 0, "empty file (not a zip archive)");

  /* a member whose stored bytes are damaged: the CRC check at its end */
  member_t one[] = {{"w.npy", a, na, 0}};
  make_zip(one, 1, &zip, &size);
  unsigned char *hit = memmem(zip, size, "\x93NUMPY", 6); /* the member, stored as it is */
  assert_non_null(hit);
  assert_true(hit + na <= zip + size);
  hit[na - 1] ^= 0x01; /* in its last value */
  hkc_npz_t *npz;
  assert_int_equal(hkc_npz_open_memory("crc.npz", zip, size, &npz), 0);
  hkc_npy_t npy;
  hkc_diag_capture(diag, sizeof diag);
  assert_int_equal(hkc_npz_read(npz, 0, hkc_npz_member_limit(4), &npy), -1);
  hkc_diag_capture(NULL, 0);
  assert_non_null(strstr(diag, "crc.npz: member w.npy: damaged"));
  hkc_npz_destroy(npz);
  free(zip);

  /* a member that is no .npy: the --param parser's message, naming the member */
  member_t junk[] = {{"w.npy", "not numpy at all", 16, 1}};
  make_zip(junk, 1, &zip, &size);
  assert_int_equal(hkc_npz_open_memory("j.npz", zip, size, &npz), 0);
  hkc_diag_capture(diag, sizeof diag);
  assert_int_equal(hkc_npz_read(npz, 0, hkc_npz_member_limit(4), &npy), -1);
  hkc_diag_capture(NULL, 0);
  assert_non_null(strstr(diag, "j.npz: member w.npy: not a .npy file"));
  hkc_npz_destroy(npz);
  free(zip);

  /* an empty archive (numpy.savez with no arrays) opens with no members */
  static const unsigned char eocd[22] = {'P', 'K', 5, 6}; /* what numpy.savez() writes: no entries */
  assert_int_equal(hkc_npz_open_memory("e.npz", eocd, sizeof eocd, &npz), 0);
  assert_int_equal(hkc_npz_count(npz), 0);
  uint32_t i;
  assert_int_equal(hkc_npz_find(npz, "w", &i), -1);
  hkc_npz_destroy(npz);
  free(a);
}

static void test_member_limit(void **state) {
  (void)state;
  assert_int_equal(hkc_npz_member_limit(0), 12 + HKC_NPY_MAX_HEADER);
  assert_int_equal(hkc_npz_member_limit(10), 12 + HKC_NPY_MAX_HEADER + 80);
  assert_int_equal(hkc_npz_member_limit(SIZE_MAX / 4), SIZE_MAX);
}

static void test_format(void **state) {
  (void)state;
  const unsigned char zip[] = "PK\3\4rest", empty[] = "PK\5\6", junk[] = "0123456789";
  const unsigned char st[] = "\x10\0\0\0\0\0\0\0{\"a\":1}";
  assert_int_equal(hkc_weights_format(zip, 8, "w.safetensors"), HKC_WEIGHTS_NPZ); /* content first */
  assert_int_equal(hkc_weights_format(empty, 4, NULL), HKC_WEIGHTS_NPZ);
  assert_int_equal(hkc_weights_format(st, 15, "w.npz"), HKC_WEIGHTS_SAFETENSORS);
  assert_int_equal(hkc_weights_format(junk, 10, "w.npz"), HKC_WEIGHTS_NPZ); /* then the name */
  assert_int_equal(hkc_weights_format(junk, 10, "w.safetensors"), HKC_WEIGHTS_SAFETENSORS);
  assert_int_equal(hkc_weights_format(junk, 10, "w.bin"), HKC_WEIGHTS_UNKNOWN);
  assert_int_equal(hkc_weights_format(junk, 0, NULL), HKC_WEIGHTS_UNKNOWN);
  assert_int_equal(hkc_weights_format(zip, 3, NULL), HKC_WEIGHTS_UNKNOWN); /* too short to tell */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_read_members),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_member_limit),
      cmocka_unit_test(test_format),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
