/* SPDX-License-Identifier: Apache-2.0 */
/* Safetensors checkpoints in libhkrt (loader/src/weights.c, session_weights.c): a valid file
 * read from memory and from disk (records, metadata, alignment of the data), every malformed
 * header refused with CORRUPT and a message that says what is wrong, and binding to a host
 * session of the test fixture (param w f32 [100]): in place or copied, name maps, dtype and
 * shape mismatches named, nothing bound on failure, numerics through a real run; a param made of
 * parts (format 1.4) bound from its separate checkpoint tensors, mismatches refused. Also the
 * name map files of hkc run --weights-map (compiler/tools/weights_map.c).
 *
 * Conversions (loader/src/convert.c, which hkc shares): f32 -> f16 / bf16 on random bit
 * patterns (NaN, inf, subnormals, every exponent), on values near the formats' ranges and on
 * exact ties, f16 <-> bf16 and the widenings on every code, all against a reference computed
 * here in double from the formats' definitions (value of a code = m * 2^e; the nearest code
 * by search, ties to the even code); the overflow check's threshold. Binding a checkpoint of
 * another dtype: f16 / bf16 widened for the f32 fixture (a real run), f32 / f16 narrowed for
 * a bf16 or f16 param (the bound bytes against the reference), parts of mixed dtypes, the
 * note through the log callback (once, with the counts), a value that would overflow refused
 * naming the element, HK_BIND_WEIGHTS_EXACT_DTYPE, and the options of libhkrt 0.1's size. */
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

#include "convert_internal.h"
#include "hk/hkrt.h"
#include "pack_fixture.h"
#include "session_internal.h"
#include "test_util.h"
#include "tools/tools.h"

/* A safetensors image: u64 LE length of `header`, header, then `data_size` bytes of data. */
typedef struct {
  uint8_t *bytes;
  size_t size;
} st_file_t;

static st_file_t st_make(const char *header, const void *data, size_t data_size) {
  size_t n = strlen(header);
  st_file_t f = {malloc(8 + n + data_size + 1), 8 + n + data_size};
  assert_non_null(f.bytes);
  for (int i = 0; i < 8; i++) f.bytes[i] = (uint8_t)((uint64_t)n >> (8 * i));
  memcpy(f.bytes + 8, header, n);
  if (data_size) memcpy(f.bytes + 8 + n, data, data_size);
  return f;
}

/* Opens header+data from memory; expects `want`, and for errors a message containing `msg`. */
static void expect_open(const char *header, size_t data_size, hk_status_t want, const char *msg) {
  uint8_t *data = calloc(1, data_size + 1);
  st_file_t f = st_make(header, data, data_size);
  hk_weights_t *w = (hk_weights_t *)1;
  hk_status_t st = hk_weights_open_memory(f.bytes, f.size, NULL, &w);
  if (st != want || (msg && !strstr(hk_last_error(), msg)))
    fail_msg("header %s: status %s, message \"%s\"; expected %s with \"%s\"", header, hk_status_string(st),
             hk_last_error(), hk_status_string(want), msg ? msg : "");
  if (want != HK_OK) assert_null(w);
  hk_weights_destroy(w);
  free(f.bytes);
  free(data);
}

static void test_valid(void **ts) {
  (void)ts;
  float a[6] = {1, 2, 3, 4, 5, 6};
  uint16_t b[3] = {0x3f80, 0x4000, 0xc040}; /* bf16 1, 2, -3 */
  uint8_t data[24 + 6 + 2];
  memcpy(data, a, 24);
  memcpy(data + 24, b, 6);
  memset(data + 30, 0, 2); /* a zero-size tensor sits at 30, then a U8 [2] */
  st_file_t f = st_make("{\"__metadata__\": {\"format\": \"pt\", \"k\": \"v\"},"
                        " \"b.weight\": {\"dtype\": \"BF16\", \"shape\": [3], \"data_offsets\": [24, 30]},"
                        " \"a\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 24], \"x\": 1},"
                        " \"empty\": {\"dtype\": \"F16\", \"shape\": [0, 5], \"data_offsets\": [30, 30]},"
                        " \"u\": {\"dtype\": \"U8\", \"shape\": [2], \"data_offsets\": [30, 32]}}   ",
                        data, sizeof data);
  hk_weights_t *w;
  assert_int_equal(hk_weights_open_memory(f.bytes, f.size, NULL, &w), HK_OK);
  assert_int_equal(hk_weights_count(w), 4);
  hk_weights_tensor_info_t info;
  assert_int_equal(hk_weights_tensor_info(w, 0, &info), HK_OK); /* header order */
  assert_string_equal(info.name, "b.weight");
  assert_int_equal(info.dtype, HK_WEIGHTS_BF16);
  assert_string_equal(info.dtype_name, "BF16");
  assert_int_equal(info.rank, 1);
  assert_int_equal(info.dims[0], 3);
  assert_int_equal(info.bytes, 6);
  assert_memory_equal(info.data, b, 6);
  uint32_t i;
  assert_int_equal(hk_weights_find(w, "a", &i), HK_OK);
  assert_int_equal(i, 1);
  assert_int_equal(hk_weights_tensor_info(w, i, &info), HK_OK);
  assert_int_equal(info.rank, 2);
  assert_int_equal(info.dims[1], 3);
  assert_ptr_equal(info.data, f.bytes + f.size - sizeof data);
  assert_int_equal(hk_weights_tensor_info(w, 2, &info), HK_OK);
  assert_int_equal(info.bytes, 0);
  assert_null(info.data);
  assert_int_equal(hk_weights_find(w, "nope", &i), HK_STATUS_NOT_FOUND);
  assert_int_equal(hk_weights_tensor_info(w, 4, &info), HK_STATUS_NOT_FOUND);
  assert_string_equal(hk_weights_metadata(w, "format"), "pt");
  assert_string_equal(hk_weights_metadata(w, "k"), "v");
  assert_null(hk_weights_metadata(w, "missing"));
  hk_weights_destroy(w);

  /* the same from a file: owned memory, the data section 64-byte aligned */
  char *dir = hk_test_tmpdir(), path[512];
  snprintf(path, sizeof path, "%s/a.safetensors", dir);
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(f.bytes, 1, f.size, fp), f.size);
  fclose(fp);
  assert_int_equal(hk_weights_open_file(path, NULL, &w), HK_OK);
  assert_int_equal(hk_weights_tensor_info(w, 1, &info), HK_OK);
  assert_int_equal((uintptr_t)info.data % 64, 0);
  assert_memory_equal(info.data, a, 24);
  hk_weights_destroy(w);
  remove(path);
  snprintf(path, sizeof path, "%s/missing.safetensors", dir);
  assert_int_equal(hk_weights_open_file(path, NULL, &w), HK_STATUS_IO);
  assert_non_null(strstr(hk_last_error(), "missing.safetensors"));
  free(f.bytes);
  rmdir(dir);
  free(dir);

  /* an empty checkpoint; NULL arguments */
  expect_open("{}", 0, HK_OK, NULL);
  assert_int_equal(hk_weights_open_memory(NULL, 10, NULL, &w), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_weights_open_memory("", 0, NULL, NULL), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_weights_open_file(NULL, NULL, &w), HK_STATUS_INVALID_ARGUMENT);
  hk_weights_open_options_t o = {.struct_size = 4};
  assert_int_equal(hk_weights_open_memory("", 0, &o, &w), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_weights_count(NULL), 0);
  assert_null(hk_weights_metadata(NULL, "k"));
  hk_weights_destroy(NULL);
}

#define T(dtype, shape, b, e) "{\"t\": {\"dtype\": \"" dtype "\", \"shape\": " shape ", \"data_offsets\": [" b ", " e "]}}"

static void test_malformed(void **ts) {
  (void)ts;
  hk_weights_t *w;
  /* shorter than the length field; a length past the end; above the cap */
  assert_int_equal(hk_weights_open_memory("\x02\0\0", 3, NULL, &w), HK_STATUS_CORRUPT);
  assert_non_null(strstr(hk_last_error(), "8-byte header length"));
  assert_int_equal(hk_weights_open_memory("\x10\0\0\0\0\0\0\0{}", 10, NULL, &w), HK_STATUS_CORRUPT);
  assert_non_null(strstr(hk_last_error(), "header length 16 runs past the end of the 10-byte file"));
  assert_int_equal(hk_weights_open_memory("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10, NULL, &w), HK_STATUS_CORRUPT);
  assert_non_null(strstr(hk_last_error(), "above the limit"));
  hk_weights_open_options_t o = {.struct_size = sizeof o, .max_header_bytes = 1};
  assert_int_equal(hk_weights_open_memory("\x02\0\0\0\0\0\0\0{}", 10, &o, &w), HK_STATUS_CORRUPT);
  assert_null(w);

  expect_open("[1, 2]", 0, HK_STATUS_CORRUPT, "does not start with '{'");
  expect_open("{\"t\": ", 0, HK_STATUS_CORRUPT, "not valid JSON");
  expect_open("{} x", 0, HK_STATUS_CORRUPT, "are not white space");
  expect_open("{}", 4, HK_STATUS_CORRUPT, "no tensor, but 4 data bytes");
  expect_open("{\"t\": 3}", 0, HK_STATUS_CORRUPT, "tensor \"t\": not a JSON object");
  expect_open("{\"t\": {\"dtype\": \"F32\"}}", 0, HK_STATUS_CORRUPT, "needs \"dtype\"");
  expect_open(T("F33", "[1]", "0", "4"), 4, HK_STATUS_CORRUPT, "unknown dtype \"F33\"");
  expect_open(T("F32", "[1]", "0", "8"), 4, HK_STATUS_CORRUPT, "not a range within the 4 data bytes");
  expect_open(T("F32", "[1]", "4", "0"), 4, HK_STATUS_CORRUPT, "not a range");
  expect_open(T("F32", "[2]", "0", "4"), 4, HK_STATUS_CORRUPT, "hold 4 bytes, its shape and dtype F32 need 8");
  expect_open(T("F32", "[-1]", "0", "4"), 4, HK_STATUS_CORRUPT, "shape[0] is not an integer");
  expect_open(T("F32", "[1.5]", "0", "4"), 4, HK_STATUS_CORRUPT, "shape[0] is not an integer");
  expect_open(T("F32", "[\"1\"]", "0", "4"), 4, HK_STATUS_CORRUPT, "shape[0] is not an integer");
  expect_open(T("F32", "[1]", "0", "4.5"), 4, HK_STATUS_CORRUPT, "data_offsets must be two integers");
  expect_open(T("F32", "[1]", "0, 4", "4"), 4, HK_STATUS_CORRUPT, "data_offsets must be two integers");
  expect_open(T("F32", "[1e300]", "0", "4"), 4, HK_STATUS_CORRUPT, "shape[0] is not an integer");
  expect_open(T("U8", "[4294967296, 4294967296, 4294967296]", "0", "4"), 4, HK_STATUS_CORRUPT, "overflows");
  expect_open(T("F32", "[1,1,1,1,1,1,1,1,1]", "0", "4"), 4, HK_STATUS_CORRUPT, "rank 9 is above 8");
  expect_open("{\"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
              " \"t\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
              8, HK_STATUS_CORRUPT, "tensor \"t\" appears twice");
  expect_open("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
              " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}",
              8, HK_STATUS_CORRUPT, "overlap");
  expect_open("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
              " \"b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 12]}}",
              12, HK_STATUS_CORRUPT, "data bytes [4, 8) belong to no tensor");
  expect_open(T("F32", "[1]", "0", "4"), 6, HK_STATUS_CORRUPT, "[4, 6) at the end of the file belong to no tensor");
  expect_open("{\"a b\": {}}", 0, HK_STATUS_CORRUPT, "printable ASCII without spaces");
  expect_open("{\"\": {}}", 0, HK_STATUS_CORRUPT, "printable ASCII");
  expect_open("{\"a\\u0000b\": {}}", 0, HK_STATUS_CORRUPT, "\\u0000");
  expect_open("{\"__metadata__\": {\"k\": 1}}", 0, HK_STATUS_CORRUPT, "value is not a string");
  expect_open("{\"__metadata__\": [], \"x\": 1}", 0, HK_STATUS_CORRUPT, "\"__metadata__\" is not a JSON object");
  expect_open("{\"__metadata__\": {}, \"__metadata__\": {}}", 0, HK_STATUS_CORRUPT, "appears twice");
}

/* ---- conversions, against a reference in double ---- */
/* The value of a code from the format's definition: f16 (5 exponent bits, 10 fraction bits,
 * bias 15), bf16 (8, 7, bias 127). */
static double ref_f16_value(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}

static double ref_bf16_value(uint16_t h) {
  const int e = (h >> 7) & 0xff, m = h & 0x7f;
  const double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
  return (h & 0x8000) ? -v : v;
}

typedef struct {
  double (*value)(uint16_t);
  uint16_t max_code; /* the largest finite positive code; the next one is inf */
  double beyond;     /* where the next code would be if the exponent went on: 2^16, 2^128 */
} ref_format_t;

static const ref_format_t REF_F16 = {ref_f16_value, 0x7bff, 65536.0};
static const ref_format_t REF_BF16 = {ref_bf16_value, 0x7f7f, 0x1p128};

/* The code of finite x under round to nearest, ties to even: the largest code k at or below
 * |x| (binary search: values grow with codes), then k or k + 1 by distance (both differences
 * are exact: Sterbenz), max_code + 1 being inf. */
static uint16_t ref_round(const ref_format_t *f, double x) {
  const double a = fabs(x);
  uint32_t lo = 0, hi = f->max_code;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (f->value((uint16_t)mid) <= a) lo = mid;
    else hi = mid - 1;
  }
  const double below = f->value((uint16_t)lo), above = lo == f->max_code ? f->beyond : f->value((uint16_t)(lo + 1));
  uint32_t k = lo;
  if (a - below > above - a || (a - below == above - a && (lo & 1))) k = lo + 1;
  return (uint16_t)((signbit(x) ? 0x8000u : 0) | k);
}

static float bits_to_f32(uint32_t x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* f32 -> f16 and bf16 of f against the reference (NaN: a NaN of the same sign). */
static void check_narrow(float f) {
  const uint16_t h = hk_f32_to_f16(f), b = hk_f32_to_bf16(f);
  if (isnan(f)) {
    if (!isnan(ref_f16_value(h)) || !isnan(ref_bf16_value(b)) || !!(h & 0x8000) != !!signbit(f) ||
        !!(b & 0x8000) != !!signbit(f))
      fail_msg("NaN %08x: f16 %04x bf16 %04x", (unsigned)((union { float f; uint32_t u; }){f}).u, h, b);
    return;
  }
  const uint16_t want_h = isinf(f) ? (uint16_t)(signbit(f) ? 0xfc00 : 0x7c00) : ref_round(&REF_F16, f);
  const uint16_t want_b = isinf(f) ? (uint16_t)(signbit(f) ? 0xff80 : 0x7f80) : ref_round(&REF_BF16, f);
  if (h != want_h || b != want_b)
    fail_msg("%a: f16 %04x (want %04x), bf16 %04x (want %04x)", (double)f, h, want_h, b, want_b);
}

static void test_convert_f32(void **ts) {
  (void)ts;
  hk_test_rng_t r;
  hk_test_rng_seed(&r, 41);
  /* random bit patterns: every exponent, subnormals, inf, NaN */
  for (int i = 0; i < 200000; i++) check_narrow(bits_to_f32((uint32_t)hk_test_uniform(&r, 0, 4294967296.0)));
  /* values around f16's range (2^-26 .. 2^17) with random fractions */
  for (int i = 0; i < 200000; i++) {
    const int e = (int)hk_test_uniform(&r, -26, 18);
    check_narrow((float)ldexp(hk_test_uniform(&r, 1, 2), e) * (i & 1 ? -1.0f : 1.0f));
  }
  /* exact ties and near-ties between neighbouring codes (both formats' midpoints are floats) */
  for (int i = 0; i < 100000; i++) {
    const uint16_t k = (uint16_t)hk_test_uniform(&r, 0, 0x7bff);
    const float mid = (float)((ref_f16_value(k) + ref_f16_value((uint16_t)(k + 1))) / 2);
    check_narrow(mid);
    check_narrow(nextafterf(mid, 0));
    check_narrow(nextafterf(mid, INFINITY));
    const uint16_t kb = (uint16_t)hk_test_uniform(&r, 0, 0x7f7f);
    const float mid_b = (float)((ref_bf16_value(kb) + ref_bf16_value((uint16_t)(kb + 1))) / 2);
    check_narrow(-mid_b);
    check_narrow(nextafterf(mid_b, 0));
  }
  /* the edges, spelled out */
  const float edges[] = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, -65520.0f, 65536.0f, 0x1p-24f, 0x1p-25f,
                         0x1.000002p-25f, 0x1.8p-24f, 0x1p-14f, 0x1.ff8p-15f, 0x1p-126f, 0x1p-149f, 3.4028235e38f,
                         0x1.fep127f, 0x1.ffp127f, 0x1.fefffep127f, INFINITY, -INFINITY, NAN, -NAN};
  for (size_t i = 0; i < sizeof edges / sizeof *edges; i++) check_narrow(edges[i]);
  assert_int_equal(hk_f32_to_f16(65519.99f), 0x7bff); /* rounds down to the largest finite */
  assert_int_equal(hk_f32_to_f16(65520.0f), 0x7c00);  /* the tie goes to the even code: inf */
  assert_int_equal(hk_f32_to_f16(0x1p-25f), 0x0000);  /* half the smallest subnormal: to even, zero */
  assert_int_equal(hk_f32_to_f16(-0x1.000002p-25f), 0x8001);
  assert_int_equal(hk_f32_to_bf16(0x1p-149f), 0x0000); /* f32's smallest subnormal */
  assert_int_equal(hk_f32_to_bf16(0x1p-133f), 0x0001); /* bf16's */
  assert_int_equal(hk_f32_to_bf16(0x1.ffp127f), 0x7f80);
  assert_int_equal(hk_f32_to_bf16(0x1.fefffep127f), 0x7f7f);
}

static void test_convert_codes(void **ts) {
  (void)ts;
  for (uint32_t c = 0; c < 0x10000; c++) {
    const uint16_t h = (uint16_t)c;
    const double vh = ref_f16_value(h), vb = ref_bf16_value(h);
    /* widening is exact */
    const float fh = hk_f16_to_f32(h), fb = hk_bf16_to_f32(h);
    if (isnan(vh) ? !isnan(fh) : (double)fh != vh || !signbit(fh) != !signbit(vh))
      fail_msg("f16 %04x -> %a", h, (double)fh);
    if (isnan(vb) ? !isnan(fb) : (double)fb != vb || !signbit(fb) != !signbit(vb))
      fail_msg("bf16 %04x -> %a", h, (double)fb);
    /* f16 -> bf16 and bf16 -> f16 through hk_convert: one rounding of the exact value */
    uint16_t to_b, to_h;
    hk_convert(&to_b, HK_ELEMENT_BF16, &h, HK_ELEMENT_F16, 1);
    hk_convert(&to_h, HK_ELEMENT_F16, &h, HK_ELEMENT_BF16, 1);
    if (isnan(vh)) assert_true(isnan(ref_bf16_value(to_b)));
    else if (to_b != (isinf(vh) ? (uint16_t)(h & 0x8000 ? 0xff80 : 0x7f80) : ref_round(&REF_BF16, vh)))
      fail_msg("f16 %04x -> bf16 %04x, want %04x", h, to_b, ref_round(&REF_BF16, vh));
    if (isnan(vb)) assert_true(isnan(ref_f16_value(to_h)));
    else if (to_h != (isinf(vb) ? (uint16_t)(h & 0x8000 ? 0xfc00 : 0x7c00) : ref_round(&REF_F16, vb)))
      fail_msg("bf16 %04x -> f16 %04x, want %04x", h, to_h, ref_round(&REF_F16, vb));
  }
}

static void test_convert_overflow(void **ts) {
  (void)ts;
  float f32[6] = {1.0f, -65504.0f, 65519.99f, NAN, INFINITY, -70000.0f};
  assert_int_equal(hk_convert_find_overflow(f32, HK_ELEMENT_F32, HK_ELEMENT_F16, 6), 5); /* inf, NaN: not overflow */
  assert_int_equal(hk_convert_find_overflow(f32, HK_ELEMENT_F32, HK_ELEMENT_F16, 5), 5);
  assert_int_equal(hk_convert_find_overflow(f32, HK_ELEMENT_F32, HK_ELEMENT_BF16, 6), 6);
  f32[0] = 65520.0f;
  assert_int_equal(hk_convert_find_overflow(f32, HK_ELEMENT_F32, HK_ELEMENT_F16, 6), 0);
  f32[0] = -0x1.ffp127f;
  assert_int_equal(hk_convert_find_overflow(f32, HK_ELEMENT_F32, HK_ELEMENT_BF16, 6), 0);
  const uint16_t bf[3] = {0x3f80, 0x477f /* 65280 */, 0x4780 /* 65536 */};
  assert_int_equal(hk_convert_find_overflow(bf, HK_ELEMENT_BF16, HK_ELEMENT_F16, 2), 2);
  assert_int_equal(hk_convert_find_overflow(bf, HK_ELEMENT_BF16, HK_ELEMENT_F16, 3), 2);
  assert_int_equal(hk_convert_find_overflow(bf, HK_ELEMENT_BF16, HK_ELEMENT_F32, 3), 3); /* widening never */
  const uint16_t h[1] = {0x7bff};
  assert_int_equal(hk_convert_find_overflow(h, HK_ELEMENT_F16, HK_ELEMENT_BF16, 1), 1);
  assert_true(hk_convert_supported(HK_ELEMENT_F16, HK_ELEMENT_BF16));
  assert_false(hk_convert_supported(HK_ELEMENT_I32, HK_ELEMENT_F32));
  /* unaligned source and destination */
  uint8_t src[1 + 4 * 3], dst[1 + 2 * 3];
  const float vals[3] = {1.5f, -2.25f, 0x1p-20f};
  memcpy(src + 1, vals, sizeof vals);
  hk_convert(dst + 1, HK_ELEMENT_BF16, src + 1, HK_ELEMENT_F32, 3);
  for (int i = 0; i < 3; i++) {
    uint16_t b;
    memcpy(&b, dst + 1 + 2 * i, 2);
    assert_int_equal(b, ref_round(&REF_BF16, vals[i]));
  }
}

/* ---- binding to a host session of the fixture (x input [batch,100], w param f32 [100]) ---- */
static void *g_code;
static size_t g_code_size;

typedef struct {
  fx_t fx;
  void *pack_bytes;
  size_t pack_size;
  hk_pack_t *pack;
  hk_session_t *s;
} state_t;

static int group_setup(void **ts) {
  (void)ts;
  if (fx_compile_kernels(&g_code, &g_code_size) != 0) g_code = NULL; /* binding tests skip */
  return 0;
}

static int group_teardown(void **ts) {
  (void)ts;
  free(g_code);
  return 0;
}

static int setup(void **ts) {
  state_t *st = calloc(1, sizeof *st);
  *ts = st;
  if (!g_code) return 0;
  fx_init(&st->fx, g_code, g_code_size, 0);
  if (hkc_pack_write_memory(&st->fx.in, &st->pack_bytes, &st->pack_size) != 0) return -1;
  if (hk_test_open_memory(st->pack_bytes, st->pack_size, NULL, &st->pack) != HK_OK) return -1;
  if (hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2), &st->s) != HK_OK) return -1;
  return 0;
}

static int teardown(void **ts) {
  state_t *st = *ts;
  hk_session_destroy(st->s);
  hk_pack_destroy(st->pack);
  free(st->pack_bytes);
  free(st);
  return 0;
}

#define NEED_CC()                                                        \
  do {                                                                   \
    if (!g_code) {                                                       \
      fprintf(stderr, "no C compiler: cannot build the test kernels\n"); \
      skip();                                                            \
    }                                                                    \
  } while (0)

/* A checkpoint of one tensor `name` of dtype/shape text and `bytes` bytes from src, whose
 * data starts `lead` bytes into the data section (a filler U8 tensor before it). Opened in
 * owned memory through a file, so the data section is 64-byte aligned. */
static hk_weights_t *one_tensor(const char *name, const char *dtype, const char *shape, const void *src, size_t bytes,
                                size_t lead) {
  char header[512];
  if (lead)
    snprintf(header, sizeof header,
             "{\"pad\": {\"dtype\": \"U8\", \"shape\": [%zu], \"data_offsets\": [0, %zu]},"
             " \"%s\": {\"dtype\": \"%s\", \"shape\": %s, \"data_offsets\": [%zu, %zu]}}",
             lead, lead, name, dtype, shape, lead, lead + bytes);
  else
    snprintf(header, sizeof header, "{\"%s\": {\"dtype\": \"%s\", \"shape\": %s, \"data_offsets\": [0, %zu]}}", name,
             dtype, shape, bytes);
  uint8_t *data = calloc(1, lead + bytes);
  memcpy(data + lead, src, bytes);
  st_file_t f = st_make(header, data, lead + bytes);
  char *dir = hk_test_tmpdir(), path[512];
  snprintf(path, sizeof path, "%s/w.safetensors", dir);
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(f.bytes, 1, f.size, fp), f.size);
  fclose(fp);
  hk_weights_t *w = NULL;
  assert_int_equal(hk_weights_open_file(path, NULL, &w), HK_OK);
  remove(path);
  rmdir(dir);
  free(dir);
  free(f.bytes);
  free(data);
  return w;
}

static uint32_t tensor_index(hk_session_t *s, const char *name) {
  for (uint32_t t = 0; t < hk_session_tensor_count(s); t++) {
    hk_tensor_info_t info;
    assert_int_equal(hk_session_tensor_info(s, t, &info), HK_OK);
    if (strcmp(info.name, name) == 0) return t;
  }
  fail_msg("no tensor %s", name);
  return 0;
}

/* Runs the session on random x, checks y = (x + 1.5) * w against doubles. */
static void run_and_check(hk_session_t *s, const float *w) {
  float *x = aligned_alloc(16, 2 * FX_COLS * sizeof(float)), *y = aligned_alloc(16, 2 * FX_COLS * sizeof(float));
  hk_test_rng_t r;
  hk_test_rng_seed(&r, 7);
  for (int i = 0; i < 2 * FX_COLS; i++) x[i] = (float)hk_test_uniform(&r, -1, 1), y[i] = NAN;
  assert_int_equal(hk_session_bind(s, "x", x, 2 * FX_COLS * sizeof(float)), HK_OK);
  assert_int_equal(hk_session_bind(s, "y", y, 2 * FX_COLS * sizeof(float)), HK_OK);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  for (int i = 0; i < 2 * FX_COLS; i++) assert_float_equal(y[i], ((double)x[i] + 1.5) * w[i % FX_COLS], 1e-5);
  free(x);
  free(y);
}

static void test_bind(void **ts) {
  state_t *st = *ts;
  NEED_CC();
  float wv[FX_COLS];
  hk_test_rng_t r;
  hk_test_rng_seed(&r, 3);
  for (int i = 0; i < FX_COLS; i++) wv[i] = (float)hk_test_uniform(&r, 0.5, 2);
  const uint32_t wi = tensor_index(st->s, "w");
  assert_false(hk_session_tensor_bound(st->s, wi));

  /* aligned: bound in place */
  hk_weights_t *w = one_tensor("w", "F32", "[100]", wv, sizeof wv, 0);
  hk_weights_tensor_info_t info;
  assert_int_equal(hk_weights_tensor_info(w, 0, &info), HK_OK);
  uint32_t bound = 9;
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, &bound), HK_OK);
  assert_int_equal(bound, 1);
  assert_true(hk_session_tensor_bound(st->s, wi));
  run_and_check(st->s, wv);
  float doubled[FX_COLS]; /* in place: a change of the weights' bytes reaches the next run */
  for (int i = 0; i < FX_COLS; i++) doubled[i] = 2 * wv[i];
  memcpy((void *)(uintptr_t)info.data, doubled, sizeof doubled);
  run_and_check(st->s, doubled);
  /* HK_BIND_WEIGHTS_COPY: a session-owned copy; the weights may go right away */
  hk_bind_weights_options_t o = {.struct_size = sizeof o, .flags = HK_BIND_WEIGHTS_COPY};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
  memcpy((void *)(uintptr_t)info.data, wv, sizeof wv);
  hk_weights_destroy(w);
  run_and_check(st->s, doubled);

  /* unaligned (4 bytes into the data): copied; rebinding by hand frees the copy (ASan) */
  w = one_tensor("w", "F32", "[100]", wv, sizeof wv, 4);
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, &bound), HK_OK);
  assert_int_equal(bound, 1);
  hk_weights_destroy(w);
  run_and_check(st->s, wv);
  float *mine = aligned_alloc(16, sizeof wv);
  memcpy(mine, wv, sizeof wv);
  assert_int_equal(hk_session_bind(st->s, "w", mine, sizeof wv), HK_OK);
  run_and_check(st->s, wv);

  /* a name map: the pack's w takes the file's "model.scale" */
  w = one_tensor("model.scale", "F32", "[100]", wv, sizeof wv, 0);
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, &bound), HK_OK);
  assert_int_equal(bound, 0); /* nothing of that name */
  o = (hk_bind_weights_options_t){.struct_size = sizeof o, .flags = HK_BIND_WEIGHTS_ALL_PARAMS};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_last_error(), "lack param(s) w"));
  hk_weights_name_t names[2] = {{"w", "model.scale"}, {"w", "model.scale"}};
  o = (hk_bind_weights_options_t){.struct_size = sizeof o, .names = names, .name_count = 1};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
  assert_int_equal(bound, 1);
  run_and_check(st->s, wv);
  o.name_count = 2;
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "mapped twice"));
  names[0] = (hk_weights_name_t){"nope", "model.scale"};
  o.name_count = 1;
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_last_error(), "no tensor named nope"));
  names[0] = (hk_weights_name_t){"y", "model.scale"};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "tensor y is an output"));
  names[0] = (hk_weights_name_t){"w", "model.other"};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_last_error(), "maps to \"model.other\""));
  o = (hk_bind_weights_options_t){.struct_size = 3};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_STATUS_INVALID_ARGUMENT);
  o = (hk_bind_weights_options_t){.struct_size = sizeof o, .flags = 0x80};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_session_bind_weights(NULL, w, NULL, &bound), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_session_bind_weights(st->s, NULL, NULL, &bound), HK_STATUS_INVALID_ARGUMENT);
  hk_weights_destroy(w);
  free(mine); /* nothing binds it any more: w was bound from the map above */
}

static void test_bind_mismatch(void **ts) {
  state_t *st = *ts;
  NEED_CC();
  float wv[FX_COLS + 1] = {0};
  uint16_t hv[FX_COLS] = {0};
  hk_weights_t *w = one_tensor("w", "I16", "[100]", hv, sizeof hv, 0);
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, NULL), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "tensor w: the session expects f32 [100], the weights' tensor \"w\" is I16 [100]"));
  assert_non_null(strstr(hk_session_error(st->s), "expects f32 [100]"));
  hk_weights_destroy(w);
  w = one_tensor("w", "F32", "[101]", wv, sizeof wv, 0);
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, NULL), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "expects f32 [100], the weights' tensor \"w\" is F32 [101]"));
  hk_weights_destroy(w);
  w = one_tensor("w", "F32", "[1, 100]", wv, 400, 0);
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, NULL), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "is F32 [1,100]"));
  hk_weights_destroy(w);
  /* an input only with HK_BIND_WEIGHTS_INPUTS; its shape is checked at the session's batch */
  float xv[2 * FX_COLS] = {0};
  w = one_tensor("x", "F32", "[2, 100]", xv, sizeof xv, 0);
  uint32_t bound = 9;
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, &bound), HK_OK);
  assert_int_equal(bound, 0);
  hk_bind_weights_options_t o = {.struct_size = sizeof o, .flags = HK_BIND_WEIGHTS_INPUTS};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
  assert_int_equal(bound, 1);
  assert_true(hk_session_tensor_bound(st->s, tensor_index(st->s, "x")));
  assert_false(hk_session_tensor_bound(st->s, tensor_index(st->s, "w"))); /* nothing bound on failures */
  assert_int_equal(hk_session_set_batch(st->s, 8), HK_OK); /* x changes size: unbound */
  assert_false(hk_session_tensor_bound(st->s, tensor_index(st->s, "x")));
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "expects f32 [8,100]"));
  assert_false(hk_session_tensor_bound(NULL, 0));
  assert_false(hk_session_tensor_bound(st->s, 99));
  hk_weights_destroy(w);
}

static hk_weights_t *tensors_file(uint32_t n, const char *const *names, const char *const *dtypes,
                                  const char *const *shapes, const size_t *bytes, const void *src);

/* The notes of hk_session_bind_weights (options.log). */
typedef struct {
  int count;
  char last[512];
} log_t;

static void log_line(void *user, const char *message) {
  log_t *l = user;
  l->count++;
  snprintf(l->last, sizeof l->last, "%s", message);
}

/* f16 / bf16 checkpoints for the f32 fixture: widened (exactly) into session memory */
static void test_bind_widen(void **ts) {
  state_t *st = *ts;
  NEED_CC();
  float wv[FX_COLS], want[FX_COLS];
  uint16_t hv[FX_COLS];
  hk_test_rng_t r;
  hk_test_rng_seed(&r, 13);
  for (int i = 0; i < FX_COLS; i++) wv[i] = (float)hk_test_uniform(&r, 0.5, 2);
  for (int i = 0; i < FX_COLS; i++) hv[i] = hk_test_f32_to_bf16(wv[i]), want[i] = hk_test_bf16_to_f32(hv[i]);
  const uint32_t wi = tensor_index(st->s, "w");

  hk_weights_t *w = one_tensor("w", "BF16", "[100]", hv, sizeof hv, 0);
  log_t log = {0};
  hk_bind_weights_options_t o = {.struct_size = sizeof o, .log = log_line, .log_user = &log};
  uint32_t bound = 9;
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
  assert_int_equal(bound, 1);
  assert_int_equal(log.count, 1);
  assert_string_equal(log.last, "weights: converting 1 tensor from BF16 to F32");
  hk_weights_tensor_info_t info;
  assert_int_equal(hk_weights_tensor_info(w, 0, &info), HK_OK);
  assert_ptr_not_equal(hk_session_debug_bound(st->s, wi), info.data); /* a converted copy */
  hk_weights_destroy(w); /* the session owns it: the weights may go */
  run_and_check(st->s, want);

  /* f16, through options of libhkrt 0.1's size: log and log_user are not read (the note goes
   * to stderr) */
  for (int i = 0; i < FX_COLS; i++) hv[i] = hk_test_f32_to_f16(wv[i]), want[i] = hk_test_f16_to_f32(hv[i]);
  w = one_tensor("w", "F16", "[100]", hv, sizeof hv, 4);
  log.count = 0;
  o.struct_size = (uint32_t)offsetof(hk_bind_weights_options_t, reserved0) + 4;
  assert_int_equal(o.struct_size, 24);
  o.flags = HK_BIND_WEIGHTS_ALL_PARAMS;
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
  assert_int_equal(log.count, 0);
  hk_weights_destroy(w);
  run_and_check(st->s, want);

  /* the same dtype: nothing converted, nothing noted, bound in place */
  w = one_tensor("w", "F32", "[100]", wv, sizeof wv, 0);
  o = (hk_bind_weights_options_t){.struct_size = sizeof o, .log = log_line, .log_user = &log};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
  assert_int_equal(log.count, 0);
  assert_int_equal(hk_weights_tensor_info(w, 0, &info), HK_OK);
  assert_ptr_equal(hk_session_debug_bound(st->s, wi), info.data);
  run_and_check(st->s, wv);
  hk_weights_destroy(w);

  /* refusals: EXACT_DTYPE, integer and f64 tensors, an options size of neither layout */
  w = one_tensor("w", "F16", "[100]", hv, sizeof hv, 0);
  o = (hk_bind_weights_options_t){.struct_size = sizeof o, .flags = HK_BIND_WEIGHTS_EXACT_DTYPE};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "the session expects f32 [100], the weights' tensor \"w\" is F16 [100] "
                                          "(HK_BIND_WEIGHTS_EXACT_DTYPE: no conversion)"));
  o.struct_size = 32;
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "struct_size 32 is neither"));
  hk_weights_destroy(w);
  int32_t iv[FX_COLS] = {0};
  w = one_tensor("w", "I32", "[100]", iv, sizeof iv, 0);
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, &bound), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "expects f32 [100], the weights' tensor \"w\" is I32 [100]"));
  hk_weights_destroy(w);
  double dv[FX_COLS] = {0};
  w = one_tensor("w", "F64", "[100]", dv, sizeof dv, 0);
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, &bound), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "is F64 [100]"));
  hk_weights_destroy(w);
}

/* The fixture with w of another dtype (bound and read back, not run: the kernels read f32). */
static int setup_dtype(void **ts, hk_dtype_t dtype) {
  state_t *st = calloc(1, sizeof *st);
  *ts = st;
  if (!g_code) return 0;
  fx_init(&st->fx, g_code, g_code_size, 0);
  /* the whole pack in dtype (the launches' argument layouts read the pack's element type;
   * libhkrt checks that before it loads code): w, the param bound here, among them */
  st->fx.spec.dtype = dtype;
  for (int t = 0; t < 4; t++) st->fx.tensors[t].dtype = dtype;
  for (int k = 0; k < 2; k++) st->fx.kernels[k].key.dtype = dtype;
  if (hkc_pack_write_memory(&st->fx.in, &st->pack_bytes, &st->pack_size) != 0) return -1;
  if (hk_test_open_memory(st->pack_bytes, st->pack_size, NULL, &st->pack) != HK_OK) return -1;
  if (hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2), &st->s) != HK_OK) return -1;
  return 0;
}
static int setup_bf16(void **ts) { return setup_dtype(ts, HK_DTYPE_BF16); }
static int setup_f16(void **ts) { return setup_dtype(ts, HK_DTYPE_F16); }

/* w's bound bytes against the reference rounding of each checkpoint value */
static void expect_bound(hk_session_t *s, const ref_format_t *f, const double *values) {
  const uint16_t *got = hk_session_debug_bound(s, tensor_index(s, "w"));
  assert_non_null(got);
  for (int i = 0; i < FX_COLS; i++) {
    if (isnan(values[i])) {
      assert_true(isnan(f->value(got[i])));
      continue;
    }
    const uint16_t want = isinf(values[i]) ? (uint16_t)(f->max_code + 1 + (values[i] < 0 ? 0x8000 : 0))
                                           : ref_round(f, values[i]);
    if (got[i] != want) fail_msg("element %d (%a): bound %04x, want %04x", i, values[i], got[i], want);
  }
}

/* f32 and f16 checkpoints for a bf16 param: rounded to nearest even, specials kept */
static void test_bind_narrow_bf16(void **ts) {
  state_t *st = *ts;
  NEED_CC();
  float fv[FX_COLS];
  double values[FX_COLS];
  hk_test_rng_t r;
  hk_test_rng_seed(&r, 17);
  for (int i = 0; i < FX_COLS; i++)
    fv[i] = (float)ldexp(hk_test_uniform(&r, -2, 2), (int)hk_test_uniform(&r, -140, 120));
  const float specials[] = {NAN, -INFINITY, INFINITY, -0.0f, 0x1p-149f, 0x1.fefffep127f, -3.39e38f, 1.00390625f};
  memcpy(fv, specials, sizeof specials);
  for (int i = 0; i < FX_COLS; i++) values[i] = fv[i];
  hk_weights_t *w = one_tensor("w", "F32", "[100]", fv, sizeof fv, 0);
  log_t log = {0};
  hk_bind_weights_options_t o = {.struct_size = sizeof o, .log = log_line, .log_user = &log};
  uint32_t bound = 0;
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
  assert_int_equal(bound, 1);
  assert_string_equal(log.last, "weights: converting 1 tensor from F32 to BF16");
  hk_weights_destroy(w);
  expect_bound(st->s, &REF_BF16, values);

  /* f16 -> bf16, every value rounded once; and x (bf16, as the whole pack) from f16 too: two
   * conversions, one note */
  uint16_t hv[FX_COLS], xv[2 * FX_COLS];
  for (int i = 0; i < FX_COLS; i++) hv[i] = (uint16_t)hk_test_uniform(&r, 0, 65536), values[i] = ref_f16_value(hv[i]);
  for (int i = 0; i < 2 * FX_COLS; i++) xv[i] = 0x3c00;
  uint8_t both[sizeof hv + sizeof xv];
  memcpy(both, hv, sizeof hv);
  memcpy(both + sizeof hv, xv, sizeof xv);
  w = tensors_file(2, (const char *[]){"w", "x"}, (const char *[]){"F16", "F16"}, (const char *[]){"[100]", "[2, 100]"},
                   (size_t[]){sizeof hv, sizeof xv}, both);
  o.flags = HK_BIND_WEIGHTS_INPUTS;
  log.count = 0;
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
  assert_int_equal(bound, 2);
  assert_int_equal(log.count, 1);
  assert_string_equal(log.last, "weights: converting 2 tensors from F16 to BF16");
  hk_weights_destroy(w);
  expect_bound(st->s, &REF_BF16, values);
  const uint16_t *x = hk_session_debug_bound(st->s, tensor_index(st->s, "x"));
  for (int i = 0; i < 2 * FX_COLS; i++) assert_int_equal(x[i], 0x3f80); /* 1.0 in bf16 */
}

/* f32 and bf16 checkpoints for an f16 param: a value that would overflow is refused, naming it */
static void test_bind_narrow_f16(void **ts) {
  state_t *st = *ts;
  NEED_CC();
  float fv[FX_COLS];
  double values[FX_COLS];
  hk_test_rng_t r;
  hk_test_rng_seed(&r, 23);
  for (int i = 0; i < FX_COLS; i++) fv[i] = (float)ldexp(hk_test_uniform(&r, -2, 2), (int)hk_test_uniform(&r, -28, 15));
  const float specials[] = {65504.0f, -65519.99f, 0x1p-25f, 0x1.000002p-25f, 0x1p-30f, NAN, -INFINITY};
  memcpy(fv, specials, sizeof specials);
  for (int i = 0; i < FX_COLS; i++) values[i] = fv[i];
  hk_weights_t *w = one_tensor("w", "F32", "[100]", fv, sizeof fv, 0);
  log_t log = {0};
  hk_bind_weights_options_t o = {.struct_size = sizeof o, .log = log_line, .log_user = &log};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, NULL), HK_OK);
  assert_string_equal(log.last, "weights: converting 1 tensor from F32 to F16");
  hk_weights_destroy(w);
  expect_bound(st->s, &REF_F16, values);

  fv[37] = 70000.0f; /* overflows f16: refused, nothing bound, nothing noted */
  w = one_tensor("w", "F32", "[100]", fv, sizeof fv, 0);
  log.count = 0;
  const void *before = hk_session_debug_bound(st->s, tensor_index(st->s, "w"));
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, NULL), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "tensor w: the weights' tensor \"w\" (F32) holds 70000 at element 37, "
                                          "beyond the largest finite f16 (65504)"));
  assert_int_equal(log.count, 0);
  assert_ptr_equal(hk_session_debug_bound(st->s, tensor_index(st->s, "w")), before);
  hk_weights_destroy(w);
  fv[37] = 65520.0f; /* the first value that rounds to inf */
  w = one_tensor("w", "F32", "[100]", fv, sizeof fv, 0);
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, NULL), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "holds 65520 at element 37"));
  hk_weights_destroy(w);
  uint16_t bv[FX_COLS];
  for (int i = 0; i < FX_COLS; i++) bv[i] = 0x3f80; /* 1.0 */
  bv[99] = 0xc780;                                  /* -65536 */
  w = one_tensor("w", "BF16", "[100]", bv, sizeof bv, 0);
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, NULL), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "(BF16) holds -65536 at element 99"));
  hk_weights_destroy(w);
}

/* An i32 input (x of the fixture as i32): I32 binds as it is, in place or copied, never
 * converted; a float tensor for it is refused. */
static int setup_x_i32(void **ts) {
  state_t *st = calloc(1, sizeof *st);
  *ts = st;
  if (!g_code) return 0;
  fx_init(&st->fx, g_code, g_code_size, 0);
  st->fx.tensors[0].dtype = HK_DTYPE_I32;
  /* no launch reads x (launch 0 reads t in place), so the i32 input passes the launches'
   * argument check: binding is what this pack is for */
  for (int g = 0; g < st->fx.spec.n_batch; g++) st->fx.launches[g][0].args[0] = (hkc_arg_t){HK_ARG_TENSOR, 2, 0};
  if (hkc_pack_write_memory(&st->fx.in, &st->pack_bytes, &st->pack_size) != 0) return -1;
  if (hk_test_open_memory(st->pack_bytes, st->pack_size, NULL, &st->pack) != HK_OK) return -1;
  if (hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2), &st->s) != HK_OK) return -1;
  return 0;
}

static void test_bind_i32_input(void **ts) {
  state_t *st = *ts;
  NEED_CC();
  int32_t iv[2 * FX_COLS];
  for (int i = 0; i < 2 * FX_COLS; i++) iv[i] = 70000 * (i - 100); /* no float dtype holds these */
  const uint32_t xi = tensor_index(st->s, "x");
  log_t log = {0};
  for (size_t lead = 0; lead <= 4; lead += 4)
    for (uint32_t copy = 0; copy <= HK_BIND_WEIGHTS_COPY; copy += HK_BIND_WEIGHTS_COPY) {
      hk_weights_t *w = one_tensor("x", "I32", "[2, 100]", iv, sizeof iv, lead);
      hk_bind_weights_options_t o = {.struct_size = sizeof o, .flags = HK_BIND_WEIGHTS_INPUTS | copy,
                                     .log = log_line, .log_user = &log};
      uint32_t bound = 0;
      assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
      assert_int_equal(bound, 1);
      hk_weights_tensor_info_t info;
      assert_int_equal(hk_weights_tensor_info(w, lead ? 1 : 0, &info), HK_OK);
      const void *got = hk_session_debug_bound(st->s, xi);
      assert_true((got == info.data) == (lead == 0 && copy == 0)); /* in place only aligned, without COPY */
      assert_memory_equal(got, iv, sizeof iv);
      hk_weights_destroy(w);
    }
  assert_int_equal(log.count, 0); /* nothing converted */
  float fv[2 * FX_COLS] = {0};
  hk_weights_t *w = one_tensor("x", "F32", "[2, 100]", fv, sizeof fv, 0);
  hk_bind_weights_options_t o = {.struct_size = sizeof o, .flags = HK_BIND_WEIGHTS_INPUTS};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, NULL), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "expects i32 [2,100], the weights' tensor \"x\" is F32 [2,100]"));
  hk_weights_destroy(w);
}

/* ---- a param made of parts (format 1.4): w = m.a | m.b | m.c along axis 0 ---- */
static const char *g_parts[3] = {"m.a", "m.b", "m.c"};

static int setup_parts(void **ts) {
  state_t *st = calloc(1, sizeof *st);
  *ts = st;
  if (!g_code) return 0;
  fx_init(&st->fx, g_code, g_code_size, 0);
  st->fx.tensors[1].parts = (char **)g_parts;
  st->fx.tensors[1].n_parts = 3;
  if (hkc_pack_write_memory(&st->fx.in, &st->pack_bytes, &st->pack_size) != 0) return -1;
  if (hk_test_open_memory(st->pack_bytes, st->pack_size, NULL, &st->pack) != HK_OK) return -1;
  if (hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2), &st->s) != HK_OK) return -1;
  return 0;
}

/* A checkpoint of n tensors named names[k], dtypes[k], shape texts shapes[k], bytes[k] bytes
 * each from src (concatenated), opened from a file (owned memory). */
static hk_weights_t *tensors_file(uint32_t n, const char *const *names, const char *const *dtypes,
                                  const char *const *shapes, const size_t *bytes, const void *src) {
  char header[2048];
  size_t used = (size_t)snprintf(header, sizeof header, "{"), at = 0;
  for (uint32_t k = 0; k < n; k++) {
    used += (size_t)snprintf(header + used, sizeof header - used,
                             "%s\"%s\": {\"dtype\": \"%s\", \"shape\": %s, \"data_offsets\": [%zu, %zu]}", k ? ", " : "",
                             names[k], dtypes[k], shapes[k], at, at + bytes[k]);
    at += bytes[k];
  }
  snprintf(header + used, sizeof header - used, "}");
  st_file_t f = st_make(header, src, at);
  char *dir = hk_test_tmpdir(), path[512];
  snprintf(path, sizeof path, "%s/p.safetensors", dir);
  FILE *fp = fopen(path, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(f.bytes, 1, f.size, fp), f.size);
  fclose(fp);
  hk_weights_t *w = NULL;
  if (hk_weights_open_file(path, NULL, &w) != HK_OK) fail_msg("%s: %s", header, hk_last_error());
  remove(path);
  rmdir(dir);
  free(dir);
  free(f.bytes);
  return w;
}

static void expect_bind_error(hk_session_t *s, hk_weights_t *w, uint32_t flags, hk_status_t want, const char *m1,
                              const char *m2) {
  hk_bind_weights_options_t o = {.struct_size = sizeof o, .flags = flags};
  uint32_t bound = 9;
  hk_status_t got = hk_session_bind_weights(s, w, &o, &bound);
  if (got != want || !strstr(hk_last_error(), m1) || (m2 && !strstr(hk_last_error(), m2)))
    fail_msg("status %s, message \"%s\"; expected %s with \"%s\" and \"%s\"", hk_status_string(got), hk_last_error(),
             hk_status_string(want), m1, m2 ? m2 : "");
  assert_int_equal(bound, 0);
  for (uint32_t t = 0; t < hk_session_tensor_count(s); t++) assert_false(hk_session_tensor_bound(s, t));
  hk_weights_destroy(w);
}

static void test_bind_parts(void **ts) {
  state_t *st = *ts;
  NEED_CC();
  const uint32_t wi = tensor_index(st->s, "w");
  assert_string_equal(hk_session_tensor_part(st->s, wi, 0), "m.a");
  assert_string_equal(hk_session_tensor_part(st->s, wi, 2), "m.c");
  assert_null(hk_session_tensor_part(st->s, wi, 3));
  assert_null(hk_session_tensor_part(st->s, tensor_index(st->s, "x"), 0));
  assert_null(hk_session_tensor_part(st->s, 99, 0));
  assert_null(hk_session_tensor_part(NULL, wi, 0));

  /* values: x (for HK_BIND_WEIGHTS_INPUTS), then the parts' rows; the parts as f16 for the dtype case */
  float v[2 * FX_COLS + FX_COLS + 1];
  hk_test_rng_t r;
  hk_test_rng_seed(&r, 5);
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) v[i] = (float)hk_test_uniform(&r, 0.5, 2);
  const float *parts = v + 2 * FX_COLS;
  const char *names[4] = {"x", "m.a", "m.b", "m.c"}, *f32[4] = {"F32", "F32", "F32", "F32"};
  const size_t x_bytes = 2 * FX_COLS * sizeof(float);

  /* all checked before anything is bound: rows that do not add up, a dtype, a rank, a trailing dim */
  expect_bind_error(st->s,
                    tensors_file(4, names, f32, (const char *[]){"[2, 100]", "[30]", "[50]", "[21]"},
                                 (size_t[]){x_bytes, 120, 200, 84}, v),
                    HK_BIND_WEIGHTS_INPUTS, HK_STATUS_INVALID_ARGUMENT,
                    "tensor w: the session expects f32 [100], but the rows of its parts sum to 101, not 100",
                    "\"m.a\" 30 + \"m.b\" 50 + \"m.c\" 21");
  expect_bind_error(st->s,
                    tensors_file(4, names, (const char *[]){"F32", "F32", "F16", "F32"},
                                 (const char *[]){"[2, 100]", "[30]", "[50]", "[20]"}, (size_t[]){x_bytes, 120, 100, 80},
                                 v),
                    HK_BIND_WEIGHTS_INPUTS | HK_BIND_WEIGHTS_EXACT_DTYPE, HK_STATUS_INVALID_ARGUMENT,
                    "tensor w: the session expects f32 [100]",
                    "each part must be f32 [ROWS]; part 1 \"m.b\" is F16 [50] "
                    "(HK_BIND_WEIGHTS_EXACT_DTYPE: no conversion)");
  expect_bind_error(st->s,
                    tensors_file(3, names + 1, (const char *[]){"F32", "I32", "F32"},
                                 (const char *[]){"[30]", "[50]", "[20]"}, (size_t[]){120, 200, 80}, parts),
                    0, HK_STATUS_INVALID_ARGUMENT, "part 1 \"m.b\" is I32 [50]", NULL);
  expect_bind_error(st->s,
                    tensors_file(3, names + 1, f32, (const char *[]){"[30]", "[1, 50]", "[20]"},
                                 (size_t[]){120, 200, 80}, parts),
                    0, HK_STATUS_INVALID_ARGUMENT, "part 1 \"m.b\" is F32 [1,50]", NULL);
  /* a part missing: the param is not provided (left unbound; ALL_PARAMS names the part) */
  hk_weights_t *w = tensors_file(2, names + 1, f32, (const char *[]){"[30]", "[50]"}, (size_t[]){120, 200}, parts);
  uint32_t bound = 9;
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, &bound), HK_OK);
  assert_int_equal(bound, 0);
  expect_bind_error(st->s, w, HK_BIND_WEIGHTS_ALL_PARAMS, HK_STATUS_NOT_FOUND, "lack param(s) w (part \"m.c\")",
                    NULL);

  /* bound: one session-owned buffer, the parts at their row offsets; the weights may go */
  w = tensors_file(3, names + 1, f32, (const char *[]){"[30]", "[50]", "[20]"}, (size_t[]){120, 200, 80}, parts);
  hk_bind_weights_options_t o = {.struct_size = sizeof o, .flags = HK_BIND_WEIGHTS_ALL_PARAMS};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
  assert_int_equal(bound, 1);
  assert_true(hk_session_tensor_bound(st->s, wi));
  hk_weights_destroy(w);
  run_and_check(st->s, parts);

  /* parts of three dtypes: each converted (exactly: f16 and bf16 widen) at its row offset */
  {
    uint8_t mixed[30 * 4 + 50 * 2 + 20 * 2];
    float want[FX_COLS];
    memcpy(mixed, parts, 30 * 4);
    memcpy(want, parts, 30 * 4);
    for (int i = 0; i < 50; i++) {
      const uint16_t h = hk_test_f32_to_f16(parts[30 + i]);
      memcpy(mixed + 120 + 2 * i, &h, 2);
      want[30 + i] = hk_test_f16_to_f32(h);
    }
    for (int i = 0; i < 20; i++) {
      const uint16_t b = hk_test_f32_to_bf16(parts[80 + i]);
      memcpy(mixed + 220 + 2 * i, &b, 2);
      want[80 + i] = hk_test_bf16_to_f32(b);
    }
    w = tensors_file(3, names + 1, (const char *[]){"F32", "F16", "BF16"}, (const char *[]){"[30]", "[50]", "[20]"},
                     (size_t[]){120, 100, 40}, mixed);
    log_t log = {0};
    o = (hk_bind_weights_options_t){.struct_size = sizeof o, .log = log_line, .log_user = &log};
    assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
    assert_int_equal(bound, 1);
    assert_int_equal(log.count, 1);
    assert_string_equal(log.last, "weights: converting 1 tensor from F16 to F32, 1 from BF16 to F32");
    hk_weights_destroy(w);
    run_and_check(st->s, want);
  }

  /* the name map does not apply to parts: an entry for one says so */
  w = tensors_file(3, names + 1, f32, (const char *[]){"[30]", "[50]", "[20]"}, (size_t[]){120, 200, 80}, parts);
  hk_weights_name_t map[1] = {{"m.b", "m.a"}};
  o = (hk_bind_weights_options_t){.struct_size = sizeof o, .names = map, .name_count = 1};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_last_error(), "no tensor named m.b; it is a part of param w"));
  hk_weights_destroy(w);

  /* the param's own name in the file wins over its parts */
  const char *own[4] = {"w", "m.a", "m.b", "m.c"};
  w = tensors_file(4, own, f32, (const char *[]){"[100]", "[30]", "[50]", "[20]"}, (size_t[]){400, 120, 200, 80},
                   v + 1);
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, &bound), HK_OK);
  assert_int_equal(bound, 1);
  run_and_check(st->s, v + 1);
  hk_weights_destroy(w);

  /* a name map entry for the param wins over its own name and its parts */
  const char *mapped[5] = {"w", "full.w", "m.a", "m.b", "m.c"};
  w = tensors_file(5, mapped, (const char *[]){"F32", "F32", "F32", "F32", "F32"},
                   (const char *[]){"[100]", "[100]", "[30]", "[50]", "[20]"}, (size_t[]){400, 400, 120, 200, 80}, v);
  hk_weights_name_t to_full[1] = {{"w", "full.w"}};
  o = (hk_bind_weights_options_t){.struct_size = sizeof o, .names = to_full, .name_count = 1};
  assert_int_equal(hk_session_bind_weights(st->s, w, &o, &bound), HK_OK);
  assert_int_equal(bound, 1);
  run_and_check(st->s, v + FX_COLS); /* full.w: the file's second tensor, 100 floats after w's */
  hk_weights_destroy(w);
}

/* ---- name map files (hkc run --weights-map) ---- */
static void test_map_file(void **ts) {
  (void)ts;
  hkc_weights_map_t m;
  const char *text = "# comment\n\n  w   model.w\n\twt\tmodel.wt  \r\n   # indented comment\nb b";
  assert_int_equal(hkc_weights_map_parse("m.txt", text, strlen(text), &m), 0);
  assert_int_equal(m.count, 3);
  assert_string_equal(m.names[0].tensor, "w");
  assert_string_equal(m.names[0].weights, "model.w");
  assert_string_equal(m.names[1].tensor, "wt");
  assert_string_equal(m.names[1].weights, "model.wt");
  assert_string_equal(m.names[2].weights, "b");
  hkc_weights_map_free(&m);
  assert_int_equal(hkc_weights_map_parse("m.txt", "", 0, &m), 0);
  assert_int_equal(m.count, 0);
  hkc_weights_map_free(&m);
  assert_int_equal(hkc_weights_map_parse("m.txt", "w\n", 2, &m), -1);
  assert_int_equal(hkc_weights_map_parse("m.txt", "w a b\n", 6, &m), -1);
  assert_int_equal(hkc_weights_map_parse("m.txt", "w a\nw b\n", 8, &m), -1);
  assert_int_equal(hkc_weights_map_parse("m.txt", "w a\0", 4, &m), -1);
  assert_null(m.names);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_convert_f32),
      cmocka_unit_test(test_convert_codes),
      cmocka_unit_test(test_convert_overflow),
      cmocka_unit_test(test_valid),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test_setup_teardown(test_bind, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bind_mismatch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bind_widen, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bind_narrow_bf16, setup_bf16, teardown),
      cmocka_unit_test_setup_teardown(test_bind_narrow_f16, setup_f16, teardown),
      cmocka_unit_test_setup_teardown(test_bind_i32_input, setup_x_i32, teardown),
      cmocka_unit_test_setup_teardown(test_bind_parts, setup_parts, teardown),
      cmocka_unit_test(test_map_file),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
