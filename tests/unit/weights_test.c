/* SPDX-License-Identifier: Apache-2.0 */
/* Safetensors checkpoints in libhkrt (loader/src/weights.c, session_weights.c): a valid file
 * read from memory and from disk (records, metadata, alignment of the data), every malformed
 * header refused with CORRUPT and a message that says what is wrong, and binding to a host
 * session of the test fixture (param w f32 [100]): in place or copied, name maps, dtype and
 * shape mismatches named, nothing bound on failure, numerics through a real run; a param made of
 * parts (format 1.4) bound from its separate checkpoint tensors, mismatches refused. Also the
 * name map files of hkc run --weights-map (compiler/tools/weights_map.c). */
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

#include "hk/hkrt.h"
#include "pack_fixture.h"
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
  hk_weights_t *w = one_tensor("w", "F16", "[100]", hv, sizeof hv, 0);
  assert_int_equal(hk_session_bind_weights(st->s, w, NULL, NULL), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "tensor w: the session expects f32 [100], the weights' tensor \"w\" is F16 [100]"));
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
                    HK_BIND_WEIGHTS_INPUTS, HK_STATUS_INVALID_ARGUMENT, "tensor w: the session expects f32 [100]",
                    "each part must be f32 [ROWS]; part 1 \"m.b\" is F16 [50]");
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
      cmocka_unit_test(test_valid),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test_setup_teardown(test_bind, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bind_mismatch, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bind_parts, setup_parts, teardown),
      cmocka_unit_test(test_map_file),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
