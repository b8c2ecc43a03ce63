/* SPDX-License-Identifier: Apache-2.0 */
/* npy.c: .npy round trips, NumPy-written headers, every malformed-header class, and
 * the f16/bf16 conversions against the independent ones in test_util.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hkc.h"
#include "test_util.h"

static char diag[4096];

static void test_conversions_exhaustive(void **state) {
  (void)state;
  for (uint32_t h = 0; h < 65536; h++) {
    float a = hkc_f16_to_f32((uint16_t)h), b = hk_test_f16_to_f32((uint16_t)h);
    if (!(a == b || (isnan(a) && isnan(b)))) fail_msg("f16 %04x: %g vs %g", h, a, b);
    a = hkc_bf16_to_f32((uint16_t)h);
    b = hk_test_bf16_to_f32((uint16_t)h);
    if (!(a == b || (isnan(a) && isnan(b)))) fail_msg("bf16 %04x: %g vs %g", h, a, b);
  }
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 3);
  for (int i = 0; i < 200000; i++) {
    /* wide range of magnitudes, including f16 subnormals and overflow */
    float f = (float)(hk_test_uniform(&rng, -1, 1) * pow(2.0, hk_test_uniform(&rng, -30, 18)));
    uint16_t x = hkc_f32_to_f16(f), y = hk_test_f32_to_f16(f);
    if (x != y) fail_msg("f32->f16 %a: %04x vs %04x", f, x, y);
    x = hkc_f32_to_bf16(f);
    y = hk_test_f32_to_bf16(f);
    if (x != y) fail_msg("f32->bf16 %a: %04x vs %04x", f, x, y);
  }
  assert_true(isnan(hkc_f16_to_f32(hkc_f32_to_f16(NAN))));
  assert_true(isnan(hkc_bf16_to_f32(hkc_f32_to_bf16(NAN))));
  assert_int_equal(hkc_f32_to_f16(INFINITY), 0x7c00);
  assert_int_equal(hkc_f32_to_f16(1e6f), 0x7c00);
}

/* float8 e4m3fn against this test's own model: value (8 + m) 2^(e - 10) (e >= 1) or m 2^-9,
 * encoding the nearest finite code by search (ties to the even mantissa), saturating at 448. */
static double fp8_model(int b) {
  const int e = (b >> 3) & 15, m = b & 7;
  if (e == 15 && m == 7) return NAN;
  const double a = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
  return b & 0x80 ? -a : a;
}

static int fp8_model_encode(float f) {
  if (isnan(f)) return 0x7f;
  int best = 0;
  const double a = fabs((double)f);
  for (int b = 0; b < 0x7f; b++) { /* the non-negative finite codes, in increasing value */
    const double d = fabs(fp8_model(b) - a), db = fabs(fp8_model(best) - a);
    if (d < db || (d == db && (b & 1) == 0)) best = b;
  }
  return (signbit(f) ? 0x80 : 0) | best;
}

static void test_fp8_e4m3(void **state) {
  (void)state;
  for (int b = 0; b < 256; b++) {
    const float v = hkc_fp8_e4m3_to_f32((uint8_t)b);
    const double want = fp8_model(b);
    if (isnan(want)) {
      assert_true(isnan(v));
      continue;
    }
    if ((double)v != want || (signbit(v) != 0) != ((b & 0x80) != 0)) fail_msg("fp8 %02x: %g, want %g", b, v, want);
    if (hkc_f32_to_fp8_e4m3(v) != b) fail_msg("fp8 %02x: round trip gives %02x", b, hkc_f32_to_fp8_e4m3(v));
  }
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 5);
  for (int i = 0; i < 100000; i++) { /* magnitudes from below the smallest subnormal to past 448 */
    const float f = (float)(hk_test_uniform(&rng, -1, 1) * pow(2.0, hk_test_uniform(&rng, -12, 10)));
    if (hkc_f32_to_fp8_e4m3(f) != fp8_model_encode(f))
      fail_msg("f32->fp8 %a: %02x, want %02x", f, hkc_f32_to_fp8_e4m3(f), fp8_model_encode(f));
  }
  /* ties to even, subnormal ties, the subnormal-normal edge, saturation, NaN */
  assert_int_equal(hkc_f32_to_fp8_e4m3(1.0625f), 0x38);     /* between 1 (m 0) and 1.125 (m 1) */
  assert_int_equal(hkc_f32_to_fp8_e4m3(1.1875f), 0x3a);     /* between m 1 and m 2 */
  assert_int_equal(hkc_f32_to_fp8_e4m3(0x1p-10f), 0x00);    /* half the smallest subnormal */
  assert_int_equal(hkc_f32_to_fp8_e4m3(0x3p-10f), 0x02);    /* 1.5 subnormal steps */
  assert_int_equal(hkc_f32_to_fp8_e4m3(0xfp-10f), 0x08);    /* 7.5 steps: the smallest normal */
  assert_int_equal(hkc_f32_to_fp8_e4m3(464.0f), 0x7e);      /* past 448: saturates */
  assert_int_equal(hkc_f32_to_fp8_e4m3(-INFINITY), 0xfe);
  assert_int_equal(hkc_f32_to_fp8_e4m3(NAN), 0x7f);
  assert_int_equal(hkc_f32_to_fp8_e4m3(-0.0f), 0x80);
}

static void test_round_trip(void **state) {
  (void)state;
  char *dir = hk_test_tmpdir();
  char path[4096];
  snprintf(path, sizeof path, "%s/a.npy", dir);
  float data[2 * 3 * 5];
  for (int i = 0; i < 30; i++) data[i] = (float)i * 0.25f - 3.0f;
  int64_t dims[3] = {2, 3, 5};
  assert_int_equal(hkc_npy_write_f32(path, data, dims, 3), 0);
  hkc_npy_t npy;
  assert_int_equal(hkc_npy_read(path, &npy), 0);
  assert_int_equal(npy.rank, 3);
  assert_int_equal(npy.dims[0], 2);
  assert_int_equal(npy.dims[2], 5);
  assert_int_equal(npy.count, 30);
  assert_memory_equal(npy.data, data, sizeof data);
  hkc_npy_free(&npy);
  /* rank 1 and a header NumPy itself would write */
  int64_t d1 = 30;
  assert_int_equal(hkc_npy_write_f32(path, data, &d1, 1), 0);
  assert_int_equal(hkc_npy_read(path, &npy), 0);
  assert_int_equal(npy.rank, 1);
  assert_int_equal(npy.dims[0], 30);
  hkc_npy_free(&npy);
  /* when NumPy is around, it must read what we wrote */
  char cmd[8192], out[1024];
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c \"import numpy as np; a=np.load('%s'); print(a.dtype, a.shape, a[5])\"", path);
  if (hk_test_run(cmd, out, sizeof out) == 0) assert_non_null(strstr(out, "float32 (30,) -1.75"));
  remove(path);
  rmdir(dir);
  free(dir);
}

static int parse_bytes(const void *b, size_t n, hkc_npy_t *out) {
  hkc_diag_capture(diag, sizeof diag);
  int rc = hkc_npy_parse("t.npy", b, n, out);
  hkc_diag_capture(NULL, 0);
  return rc;
}

/* Builds a v1 .npy with the given header dict and `data_bytes` payload bytes. */
static size_t make_npy(unsigned char *buf, const char *dict, size_t data_bytes) {
  size_t dl = strlen(dict);
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (unsigned char)((dl + 1) & 0xff);
  buf[9] = (unsigned char)((dl + 1) >> 8);
  memcpy(buf + 10, dict, dl);
  buf[10 + dl] = '\n';
  for (size_t i = 0; i < data_bytes; i++) buf[11 + dl + i] = (unsigned char)(i * 7);
  return 11 + dl + data_bytes;
}

/* Integer files (i32 inputs: ids, lengths): <i4 and <i8 read exactly into ints (and as
 * floats into data); an <i8 value outside int32 is an error naming the element. */
static void test_integers(void **state) {
  (void)state;
  unsigned char buf[1024];
  hkc_npy_t npy;
  const int32_t v4[3] = {-7, 0, INT32_MAX};
  size_t n = make_npy(buf, "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", 0);
  memcpy(buf + n, v4, sizeof v4);
  assert_int_equal(parse_bytes(buf, n + sizeof v4, &npy), 0);
  assert_non_null(npy.ints);
  assert_int_equal(npy.count, 3);
  for (int i = 0; i < 3; i++) assert_int_equal(npy.ints[i], v4[i]);
  assert_true(npy.data[0] == -7.0f);
  hkc_npy_free(&npy);
  int64_t v8[2] = {INT32_MIN, 123456789};
  n = make_npy(buf, "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 2), }", 0);
  memcpy(buf + n, v8, sizeof v8);
  assert_int_equal(parse_bytes(buf, n + sizeof v8, &npy), 0);
  assert_int_equal(npy.ints[0], INT32_MIN);
  assert_int_equal(npy.ints[1], 123456789);
  hkc_npy_free(&npy);
  v8[1] = (int64_t)INT32_MAX + 1;
  memcpy(buf + n, v8, sizeof v8);
  assert_int_equal(parse_bytes(buf, n + sizeof v8, &npy), -1);
  assert_non_null(strstr(diag, "element 1 = 2147483648 does not fit in int32"));
  assert_null(npy.ints);
  /* int8 and uint8 (quantized params' values and fp8 bit patterns) */
  const int8_t v1[3] = {-128, 0, 127};
  n = make_npy(buf, "{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }", 0);
  memcpy(buf + n, v1, sizeof v1);
  assert_int_equal(parse_bytes(buf, n + sizeof v1, &npy), 0);
  for (int i = 0; i < 3; i++) assert_int_equal(npy.ints[i], v1[i]);
  hkc_npy_free(&npy);
  const uint8_t u1[2] = {0x7e, 0xff};
  n = make_npy(buf, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", 0);
  memcpy(buf + n, u1, sizeof u1);
  assert_int_equal(parse_bytes(buf, n + sizeof u1, &npy), 0);
  assert_int_equal(npy.ints[0], 0x7e);
  assert_int_equal(npy.ints[1], 0xff);
  hkc_npy_free(&npy);
  /* a float file has no ints */
  n = make_npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8);
  assert_int_equal(parse_bytes(buf, n, &npy), 0);
  assert_null(npy.ints);
  hkc_npy_free(&npy);
}

static void test_malformed(void **state) {
  (void)state;
  unsigned char buf[1024];
  hkc_npy_t npy;
  size_t n = make_npy(buf, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", 6);
  assert_int_equal(parse_bytes(buf, n, &npy), 0); /* f16 accepted */
  assert_int_equal(npy.count, 3);
  hkc_npy_free(&npy);
  struct {
    const char *dict;
    size_t data;
    const char *word;
  } bad[] = {
      {"{'descr': '<u4', 'fortran_order': False, 'shape': (3,), }", 12, "dtype"},
      {"{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", 11, "bytes"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }", 12, "Fortran"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 11, "bytes"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 13, "bytes"},
      {"{'descr': '<f4', 'fortran_order': False}", 0, "malformed"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }", 0, "shape"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1), }", 4, "dimensions"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999, 99999999999), }", 4, "large"},
      /* strict: a word that starts like False is not False; 'shape' is found only
       * as a key, never inside another value; nothing but padding after the dict */
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (3,), }", 12, "True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'x': \"'shape': (3,)\", }", 12, "unknown or repeated key"},
      {"{'descr': \"<f4', 'shape': (3,)\", 'fortran_order': False}", 12, "dtype"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'shape': (3,)}", 12, "repeated"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } junk", 12, "text after the dict"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", 12, "(N,)"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (3,), }", 12, "no ','"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    n = make_npy(buf, bad[i].dict, bad[i].data);
    assert_int_equal(parse_bytes(buf, n, &npy), -1);
    if (!strstr(diag, bad[i].word) || strncmp(diag, "t.npy: ", 7) != 0)
      fail_msg("case %zu: expected '%s' in: %s", i, bad[i].word, diag);
    assert_null(npy.data);
  }
  /* every truncation of a valid file is an error, never a crash */
  n = make_npy(buf, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 16);
  for (size_t len = 0; len < n; len++) assert_int_equal(parse_bytes(buf, len, &npy), -1);
  assert_int_equal(parse_bytes(buf, n, &npy), 0);
  hkc_npy_free(&npy);
  buf[0] = 'X';
  assert_int_equal(parse_bytes(buf, n, &npy), -1);
  assert_non_null(strstr(diag, "magic"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_conversions_exhaustive),
      cmocka_unit_test(test_round_trip),
      cmocka_unit_test(test_fp8_e4m3),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_integers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
