/* SPDX-License-Identifier: Apache-2.0 */
/* libhkrt sessions on the host backend, with a real kernel .so compiled at test time:
 * numerics at two batch sizes, binding errors, target and batch selection, bad code
 * objects, and an allocator that fails the Nth allocation. Batch buckets: a batch between
 * buckets runs padded (against the double reference, and bit for bit against a pack built
 * for exactly that batch through hkc_build), bucket states are built lazily and reused,
 * the exact policy and unpaddable layouts refuse, and allocation failures on the lazy
 * paths leave a session that still works. Launch extents: a pack whose launch would overrun
 * a tensor opens but gets no session of its target. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend.h"
#include "hk/hkrt.h"
#include "pack_fixture.h"
#include "pack_internal.h"
#include "pack_refix.h"
#include "session_internal.h"
#include "test_util.h"

typedef struct {
  void *code; /* the compiled kernels */
  size_t code_size;
  fx_t fx;
  void *pack_bytes;
  size_t pack_size;
  hk_pack_t *pack;
  char diag[4096];
} state_t;

static void *g_code;
static size_t g_code_size;

static int group_setup(void **ts) {
  (void)ts;
  if (fx_compile_kernels(&g_code, &g_code_size) != 0) g_code = NULL; /* tests skip */
  return 0;
}

static int group_teardown(void **ts) {
  (void)ts;
  free(g_code);
  return 0;
}

/* Writes the fixture (host + fake sm_90 target) and opens it. */
static int setup(void **ts) {
  state_t *st = calloc(1, sizeof *st);
  *ts = st;
  if (!g_code) return 0;
  fx_init(&st->fx, g_code, g_code_size, 1);
  hkc_diag_capture(st->diag, sizeof st->diag);
  if (hkc_pack_write_memory(&st->fx.in, &st->pack_bytes, &st->pack_size) != 0) return -1;
  if (hk_test_open_memory(st->pack_bytes, st->pack_size, NULL, &st->pack) != HK_OK) return -1;
  return 0;
}

static int teardown(void **ts) {
  state_t *st = *ts;
  hkc_diag_capture(NULL, 0);
  hk_pack_destroy(st->pack);
  free(st->pack_bytes);
  free(st);
  return 0;
}

#define NEED_CC(st)                                                      \
  do {                                                                   \
    if (!g_code) {                                                       \
      fprintf(stderr, "no C compiler: cannot build the test kernels\n"); \
      skip();                                                            \
    }                                                                    \
  } while (0)

/* Opens a fresh pack from a modified fixture; NULL when it does not open. */
static hk_pack_t *open_variant(state_t *st, void **out_bytes) {
  size_t size;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, out_bytes, &size), 0);
  hk_pack_t *pack = NULL;
  assert_int_equal(hk_test_open_memory(*out_bytes, size, NULL, &pack), HK_OK);
  return pack;
}

/* The weights of the last run_and_check (padded rows of y are (0 + 1.5) * w). */
static _Alignas(16) float g_last_w[FX_COLS];
/* Elements after y's bound bytes, poisoned: a run must never write past the real rows. */
#define GUARD 64

/* Runs the pipeline at `batch` on random inputs and compares with a double reference. */
static void run_and_check(hk_session_t *s, int64_t batch, uint64_t seed) {
  size_t n = (size_t)batch * FX_COLS;
  float *x = malloc(n * 4), *y = malloc((n + GUARD) * 4), *w = g_last_w;
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, seed);
  for (size_t i = 0; i < n; i++) x[i] = (float)hk_test_uniform(&rng, -2, 2);
  for (size_t i = 0; i < FX_COLS; i++) w[i] = (float)hk_test_uniform(&rng, -3, 3);
  for (size_t i = 0; i < n + GUARD; i++) y[i] = NAN; /* poison: an unwritten element fails */
  assert_int_equal(hk_session_bind(s, "x", x, n * 4), HK_OK);
  assert_int_equal(hk_session_bind(s, "w", w, FX_COLS * 4), HK_OK);
  assert_int_equal(hk_session_bind(s, "y", y, n * 4), HK_OK);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  for (size_t i = 0; i < n; i++) {
    double ref = ((double)x[i] + 1.5) * (double)w[i % FX_COLS];
    if (!(fabs((double)y[i] - ref) <= 1e-5 * (1 + fabs(ref))))
      fail_msg("batch %lld: y[%zu] = %g, expected %g", (long long)batch, i, (double)y[i], ref);
  }
  for (size_t i = n; i < n + GUARD; i++)
    if (!isnan(y[i])) fail_msg("batch %lld: y[%zu] past the real rows was written", (long long)batch, i);
  free(x);
  free(y);
}

/* The running library's version is the header's (hkrt.h, "version"; the build reads both from
 * the header, docs/ABI.md). */
static void test_version(void **ts) {
  (void)ts;
  assert_string_equal(hk_version(), HKRT_VERSION_STRING);
  assert_int_equal(hk_version_number(), HKRT_VERSION_NUMBER);
  unsigned major, minor, patch;
  assert_int_equal(sscanf(hk_version(), "%u.%u.%u", &major, &minor, &patch), 3);
  assert_int_equal(hk_version_number(), major * 10000 + minor * 100 + patch);
  assert_true(minor < 100 && patch < 100);
  /* the SONAME's number (tests/abi checks the built library's): from 1.0 on, MAJOR */
  assert_true(HKRT_VERSION_MAJOR == 0 || HKRT_SOVERSION == HKRT_VERSION_MAJOR);
  assert_true(HKRT_SOVERSION >= 1); /* 0.2.0 broke 0.1.0's libhkrt.so.0 (docs/ABI.md) */
}

static void test_run_two_batches(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  for (int b = 0; b < 2; b++) {
    int64_t batch = b ? 8 : 2;
    hk_session_t *s;
    assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = (uint64_t)batch), &s), HK_OK);
    assert_string_equal(hk_session_target(s), FX_HOST);
    assert_string_equal(hk_session_device_name(s), "host");
    assert_int_equal(hk_session_tensor_count(s), 3); /* x, w, y: not the intermediate */
    hk_tensor_info_t info;
    assert_int_equal(hk_session_tensor_info(s, 0, &info), HK_OK);
    assert_string_equal(info.name, "x");
    assert_int_equal(info.role, HK_TENSOR_INPUT);
    assert_int_equal(info.element_type, HK_ELEMENT_F32);
    assert_int_equal(info.rank, 2);
    assert_int_equal(info.dims[0], batch);
    assert_int_equal(info.dims[1], FX_COLS);
    assert_int_equal(info.bytes, (size_t)batch * FX_COLS * 4);
    assert_int_equal(hk_session_tensor_info(s, 1, &info), HK_OK);
    assert_string_equal(info.name, "w");
    assert_int_equal(info.role, HK_TENSOR_PARAM);
    assert_int_equal(info.bytes, FX_COLS * 4);
    assert_int_equal(hk_session_tensor_info(s, 2, &info), HK_OK);
    assert_int_equal(info.role, HK_TENSOR_OUTPUT);
    assert_int_equal(hk_session_tensor_info(s, 3, &info), HK_STATUS_NOT_FOUND);
    run_and_check(s, batch, 1 + (uint64_t)b);
    run_and_check(s, batch, 10 + (uint64_t)b); /* rebinding new buffers */
    hk_session_destroy(s);
  }
}

/* hk_session_profile on the host: a positive, finite median per launch, and outputs equal
 * to those of a normal run (checked against a poisoned buffer); launch info from PLAN. */
static void test_profile(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  const size_t n = 8 * FX_COLS;
  float *x = malloc(n * 4), *y = malloc(n * 4), *y_run = malloc(n * 4), w[FX_COLS];
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 77);
  for (size_t i = 0; i < n; i++) x[i] = (float)hk_test_uniform(&rng, -2, 2);
  for (size_t i = 0; i < FX_COLS; i++) w[i] = (float)hk_test_uniform(&rng, -3, 3);
  double us[2] = {-1, -1};
  hk_session_t *s;
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 8), &s), HK_OK);
  assert_int_equal(hk_session_launch_count(s), 2);
  assert_int_equal(hk_session_launch_count(NULL), 0);
  hk_launch_info_t li;
  assert_int_equal(hk_session_launch_info(s, 1, &li), HK_OK);
  assert_string_equal(li.kernel, "hk_test_mul");
  assert_string_equal(li.nodes, "mul");
  assert_int_equal(li.bytes, 0); /* this pack has no PLAN section */
  assert_int_equal(li.flops, 0);
  assert_int_equal(hk_session_launch_info(s, 2, &li), HK_STATUS_NOT_FOUND);
  assert_int_equal(hk_session_launch_info(s, 0, NULL), HK_STATUS_INVALID_ARGUMENT);

  assert_int_equal(hk_session_profile(s, NULL, 3, us), HK_STATUS_FAILED_PRECONDITION); /* nothing bound */
  assert_non_null(strstr(hk_session_error(s), "unbound x, w, y"));
  assert_int_equal(hk_session_bind(s, "x", x, n * 4), HK_OK);
  assert_int_equal(hk_session_bind(s, "w", w, sizeof w), HK_OK);
  assert_int_equal(hk_session_bind(s, "y", y_run, n * 4), HK_OK);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  for (size_t i = 0; i < n; i++) y[i] = NAN;
  assert_int_equal(hk_session_bind(s, "y", y, n * 4), HK_OK);
  assert_int_equal(hk_session_profile(s, NULL, 0, us), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_session_profile(s, NULL, 3, NULL), HK_STATUS_INVALID_ARGUMENT);
  for (uint32_t repeats = 1; repeats <= 4; repeats++) { /* odd and even counts */
    us[0] = us[1] = -1;
    assert_int_equal(hk_session_profile(s, NULL, repeats, us), HK_OK);
    for (int i = 0; i < 2; i++)
      if (!(isfinite(us[i]) && us[i] > 0)) fail_msg("repeats %u: launch %d took %g us", repeats, i, us[i]);
  }
  assert_memory_equal(y, y_run, n * 4);
  hk_session_destroy(s);

  /* With a PLAN section the estimates come along. */
  fx_add_plan(&st->fx);
  void *bytes;
  hk_pack_t *pack = open_variant(st, &bytes);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 8), &s), HK_OK);
  assert_int_equal(hk_session_launch_info(s, 1, &li), HK_OK);
  assert_int_equal(li.bytes, 2001);
  assert_int_equal(li.flops, 21);
  assert_int_equal(li.matrix, 1);
  assert_int_equal(hk_session_launch_info(s, 0, &li), HK_OK);
  assert_int_equal(li.bytes, 2000);
  assert_int_equal(li.matrix, 0);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  free(bytes);
  free(x);
  free(y);
  free(y_run);
}

static void test_sessions_share_module(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  hk_session_t *a, *b;
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2), &a), HK_OK);
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 8, .target = FX_HOST), &b), HK_OK);
  hk_module_t *m1, *m2;
  assert_int_equal(hk_pack_module(st->pack, 0, &m1), HK_OK);
  assert_int_equal(hk_pack_module(st->pack, 0, &m2), HK_OK);
  assert_ptr_equal(m1, m2);
  run_and_check(b, 8, 3);
  run_and_check(a, 2, 4);
  hk_session_destroy(a);
  hk_session_destroy(b);
}

/* A session is used by one thread at a time (hkrt.h, "Threads"): while one call holds it,
 * every state-changing call answers BUSY at once, does nothing and leaves the session's own
 * message alone; after it is released the session runs normally. */
static void test_session_busy(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  assert_string_equal(hk_status_string(HK_STATUS_BUSY), "BUSY");
  hk_session_t *s;
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2, .target = FX_HOST), &s), HK_OK);
  assert_true(hk_session_debug_hold(s, true));
  assert_false(hk_session_debug_hold(s, true)); /* the claim is exclusive */
  _Alignas(16) float buf[2 * FX_COLS] = {0};
  void *p = NULL;
  assert_int_equal(hk_session_bind(s, "x", buf, sizeof buf), HK_STATUS_BUSY);
  assert_non_null(strstr(hk_last_error(), "in use by another thread"));
  assert_int_equal(hk_session_run(s, NULL), HK_STATUS_BUSY);
  assert_int_equal(hk_session_set_batch(s, 8), HK_STATUS_BUSY);
  assert_int_equal(hk_session_alloc(s, 64, &p), HK_STATUS_BUSY);
  assert_null(p);
  assert_int_equal(hk_session_copy(s, buf, buf + FX_COLS, 16, HK_COPY_HOST_TO_DEVICE), HK_STATUS_BUSY);
  assert_int_equal(hk_session_synchronize(s, NULL), HK_STATUS_BUSY);
  double us[2];
  assert_int_equal(hk_session_profile(s, NULL, 1, us), HK_STATUS_BUSY);
  assert_string_equal(hk_session_error(s), ""); /* the holder's message is its own */
  assert_int_equal(hk_session_batch(s), 2);      /* set_batch did nothing */
  assert_true(hk_session_debug_hold(s, false));
  run_and_check(s, 2, 11);
  hk_session_destroy(s);
}

/* hk_pack_error is a copy per thread, taken under the pack's lock: a failing call on
 * another thread later does not change a string this thread already holds. */
static void test_pack_error_per_thread(void **ts) {
  state_t *st = *ts;
  hk_session_t *s;
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 3000), &s), HK_STATUS_NOT_FOUND);
  const char *mine = hk_pack_error(st->pack);
  assert_non_null(strstr(mine, "batch size 3000"));
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 0), &s), HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(mine, "batch size 3000")); /* until this thread asks again */
  assert_non_null(strstr(hk_pack_error(st->pack), "batch size 0"));
}

static void test_bind_errors(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  hk_session_t *s;
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  _Alignas(16) float buf[804];
  assert_int_equal(hk_session_bind(s, "z", buf, 800), HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_last_error(), "no tensor named \"z\""));
  assert_non_null(strstr(hk_last_error(), "x, w, y"));
  assert_string_equal(hk_session_error(s), hk_last_error());
  assert_int_equal(hk_session_bind(s, "t", buf, 800), HK_STATUS_NOT_FOUND); /* intermediates are internal */
  assert_int_equal(hk_session_bind(s, "x", buf, 1000), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "tensor x expects 800 bytes (f32 [2,100]), got 1000"));
  assert_int_equal(hk_session_bind(s, "x", NULL, 800), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_session_bind(s, "x", buf + 1, 800), HK_STATUS_INVALID_ARGUMENT); /* 4 bytes off */
  assert_non_null(strstr(hk_last_error(), "is not 16-byte aligned"));
  assert_int_equal(hk_session_bind(s, "x", buf, 800), HK_OK);
  assert_int_equal(hk_session_bind(s, "w", buf, 400), HK_OK);
  assert_int_equal(hk_session_run(s, NULL), HK_STATUS_FAILED_PRECONDITION);
  assert_non_null(strstr(hk_last_error(), "unbound y"));
  assert_non_null(strstr(hk_session_error(s), "unbound y"));
  assert_int_equal(hk_session_bind(NULL, "x", buf, 800), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_session_run(NULL, NULL), HK_STATUS_INVALID_ARGUMENT);
  hk_session_destroy(s);
  hk_session_destroy(NULL);
  assert_string_equal(hk_session_error(NULL), "");
}

static void test_batch_not_found(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  hk_session_t *s = (hk_session_t *)1;
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 9), &s), HK_STATUS_NOT_FOUND);
  assert_null(s);
  assert_non_null(strstr(hk_last_error(), "batch size 9 is larger than the largest batch size built into the artifact"));
  assert_non_null(strstr(hk_last_error(), "batch sizes: 2, 8"));
  assert_non_null(strstr(hk_pack_error(st->pack), "batch sizes: 2, 8"));
  assert_int_equal(hk_session_create(st->pack, NULL, &s), HK_STATUS_INVALID_ARGUMENT);
}

/* hk_session_options_t: struct_size says which fields the caller knows (0: batch, target,
 * device only), out-of-range sizes and modes are refused; the host target reports stream
 * launches without a fallback and gives the same results on 1 or 3 threads. */
static void test_session_options(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  const hk_launch_mode_t bad_mode = (hk_launch_mode_t)99;
  hk_session_t *s = NULL;
  /* 0: the first layout; launch_mode and host_threads are not read */
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.batch = 2, .launch_mode = bad_mode}, &s),
                   HK_OK);
  hk_session_destroy(s);
  /* a size that ends before host_threads reads launch_mode but not host_threads */
  uint32_t up_to_mode = (uint32_t)(offsetof(hk_session_options_t, launch_mode) + sizeof(hk_launch_mode_t));
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.struct_size = up_to_mode, .batch = 2,
                                                                      .host_threads = 1000000}, &s), HK_OK);
  hk_session_destroy(s);
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.struct_size = up_to_mode, .batch = 2,
                                                                      .launch_mode = bad_mode}, &s),
                   HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "launch_mode 99 is not one of"));
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2, .launch_mode = bad_mode), &s),
                   HK_STATUS_INVALID_ARGUMENT);
  /* sizes this library cannot read */
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.struct_size = 4, .batch = 2}, &s),
                   HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "options->struct_size is 4"));
  uint32_t newer = (uint32_t)sizeof(hk_session_options_t) + 8;
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.struct_size = newer, .batch = 2}, &s),
                   HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "newer hkrt.h"));
  assert_null(s);
  /* no_pdl: 0 or 1; not read from a caller whose struct ends before it (the layout that
   * ended with host_threads, whose tail padding lies where reserved0 is now) */
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2, .no_pdl = 2), &s),
                   HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "no_pdl 2 is not 0 or 1"));
  const uint32_t before_pdl = (uint32_t)offsetof(hk_session_options_t, no_pdl);
  assert_true(before_pdl >= offsetof(hk_session_options_t, host_threads) + sizeof(uint32_t));
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.struct_size = before_pdl, .batch = 2,
                                                                      .reserved0 = 0xdead, .no_pdl = 7}, &s), HK_OK);
  assert_int_equal(hk_session_pdl_count(s), 0); /* the host target */
  hk_session_destroy(s);
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2, .no_pdl = 1), &s), HK_OK);
  hk_session_destroy(s);
  /* host_blas: 0 or 1; not read from a caller whose struct ends before it. The fixture's object
   * has no hk_host_set_blas (hand-written, like objects built before the binding): C loops. */
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2, .host_blas = 2), &s),
                   HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "host_blas 2 is not 0 or 1"));
  const uint32_t before_blas = (uint32_t)offsetof(hk_session_options_t, host_blas);
  assert_true(before_blas >= offsetof(hk_session_options_t, no_pack_weights) + sizeof(uint32_t));
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.struct_size = before_blas, .batch = 2,
                                                                      .reserved3 = 0xdead, .host_blas = 7}, &s), HK_OK);
  const char *why = NULL;
  assert_string_equal(hk_session_host_blas(s, &why), "");
  assert_non_null(strstr(why, "predates BLAS binding"));
  hk_session_destroy(s);
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2, .host_blas = 1), &s), HK_OK);
  assert_string_equal(hk_session_host_blas(s, &why), "");
  assert_string_equal(why, "the session's option host_blas is 1");
  run_and_check(s, 2, 7);
  hk_session_destroy(s);
  assert_string_equal(hk_session_host_blas(NULL, &why), "");
  assert_string_equal(why, "");

  for (uint32_t threads = 1; threads <= 3; threads += 2) {
    assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 8, .host_threads = threads,
                                                                  .launch_mode = HK_LAUNCH_MODE_GRAPH), &s),
                     HK_OK); /* graph mode means nothing to the host target */
    const char *reason = NULL;
    assert_string_equal(hk_session_launch_mode(s, &reason), "stream");
    assert_string_equal(reason, "");
    run_and_check(s, 8, 40 + threads);
    hk_session_destroy(s);
  }
}

/* Runs at batch 2 with w as the session has it (bound from the pack, or by hand) and checks
 * y = (x + 1.5) * want_w; the run's status when it fails. */
static hk_status_t run_expecting_w(hk_session_t *s, const float *want_w) {
  _Alignas(16) float x[2 * FX_COLS], y[2 * FX_COLS];
  for (int i = 0; i < 2 * FX_COLS; i++) x[i] = (float)i * 0.125f - 3.0f, y[i] = NAN;
  assert_int_equal(hk_session_bind(s, "x", x, sizeof x), HK_OK);
  assert_int_equal(hk_session_bind(s, "y", y, sizeof y), HK_OK);
  hk_status_t st = hk_session_run(s, NULL);
  if (st != HK_OK) return st;
  for (int i = 0; i < 2 * FX_COLS; i++) {
    double ref = ((double)x[i] + 1.5) * (double)want_w[i % FX_COLS];
    if (!(fabs((double)y[i] - ref) <= 1e-5 * (1 + fabs(ref))))
      fail_msg("y[%d] = %g, expected %g", i, (double)y[i], ref);
  }
  return HK_OK;
}

/* A pack that stores w (format 1.4): sessions bind it at creation, in place or (the pack's
 * memory 8 bytes off 16) as a copy the session owns; a hand binding replaces it; the option
 * no_pack_weights leaves w unbound, and a caller whose struct_size ends before that option
 * gets the binding. */
static void test_pack_weights(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  fx_add_weights(&st->fx, 0.75f);
  void *bytes = NULL;
  hk_pack_t *pack = open_variant(st, &bytes);
  assert_int_equal(hk_pack_weight_count(pack), 1);
  hk_session_t *s = NULL;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .target = FX_HOST), &s), HK_OK);
  assert_true(hk_session_tensor_bound(s, 1)); /* w */
  assert_false(hk_session_tensor_bound(s, 0));
  assert_int_equal(run_expecting_w(s, st->fx.weight_values), HK_OK);
  _Alignas(16) float other[FX_COLS];
  for (int i = 0; i < FX_COLS; i++) other[i] = -2.0f + (float)i / 32;
  assert_int_equal(hk_session_bind(s, "w", other, sizeof other), HK_OK);
  assert_int_equal(run_expecting_w(s, other), HK_OK);
  hk_session_destroy(s);

  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .no_pack_weights = 1), &s), HK_OK);
  assert_false(hk_session_tensor_bound(s, 1));
  assert_int_equal(run_expecting_w(s, other), HK_STATUS_FAILED_PRECONDITION);
  assert_non_null(strstr(hk_last_error(), "w"));
  hk_session_destroy(s);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .no_pack_weights = 2), &s),
                   HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "no_pack_weights 2 is not 0 or 1"));
  const uint32_t before = (uint32_t)offsetof(hk_session_options_t, no_pack_weights);
  assert_int_equal(hk_session_create(pack, &(hk_session_options_t){.struct_size = before, .batch = 2,
                                                                   .reserved2 = 0xdead, .no_pack_weights = 1}, &s),
                   HK_OK);
  assert_true(hk_session_tensor_bound(s, 1));
  hk_session_destroy(s);
  hk_pack_destroy(pack);

  /* The pack's bytes 8 bytes off a 16-byte boundary (opened in place): w is copied. */
  size_t size = 0;
  void *again = NULL;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &again, &size), 0);
  uint8_t *odd = aligned_alloc(16, (size + 31) & ~(size_t)15);
  memcpy(odd + 8, again, size);
  assert_int_equal(hk_test_open_memory(odd + 8, size, NULL, &pack), HK_OK);
  assert_int_equal((uintptr_t)hk_pack_view(pack)->weights % 16, 8);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  assert_int_equal(run_expecting_w(s, st->fx.weight_values), HK_OK);
  assert_int_equal(hk_session_bind(s, "w", other, sizeof other), HK_OK); /* frees the copy */
  assert_int_equal(run_expecting_w(s, other), HK_OK);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  free(odd);
  free(again);
  free(bytes);
}

static void test_target_selection(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  const char *name;
  assert_int_equal(hk_pack_select_target(st->pack, NULL, &name), HK_OK);
  assert_string_equal(name, FX_HOST);
  assert_int_equal(hk_pack_select_target(st->pack, FX_HOST, &name), HK_OK);
  assert_string_equal(name, FX_HOST);

  hk_session_t *s;
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2, .target = "gfx90a"), &s),
                   HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_last_error(), "target gfx90a is not in the artifact (it has: " FX_HOST ", sm_90)"));
  /* No CUDA driver or device here: the named target is UNAVAILABLE, and says why. */
  assert_int_equal(hk_pack_select_target(st->pack, "sm_90", &name), HK_STATUS_UNAVAILABLE);
  assert_null(name);
  assert_non_null(strstr(hk_last_error(), "sm_90 cannot run on this machine"));
  assert_non_null(strstr(hk_last_error(), "this machine runs [" FX_HOST "]"));
  assert_non_null(strstr(hk_pack_error(st->pack), "sm_90 cannot run"));

  /* A pack whose only target is a GPU: automatic choice fails, listing both sides. */
  st->fx.in.targets = &st->fx.targets[1];
  st->fx.in.n_targets = 1;
  void *bytes;
  hk_pack_t *gpu_only = open_variant(st, &bytes);
  assert_int_equal(hk_session_create(gpu_only, HK_TEST_OPTIONS(.batch = 2), &s),
                   HK_STATUS_NO_COMPATIBLE_TARGET);
  assert_non_null(strstr(hk_last_error(), "the artifact has [sm_90]; this machine runs [" FX_HOST "]"));
  hk_pack_destroy(gpu_only);
  free(bytes);
}

static void test_missing_symbol(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  snprintf(st->fx.kernels[1].name, sizeof st->fx.kernels[1].name, "hk_test_nope");
  void *bytes;
  hk_pack_t *pack = open_variant(st, &bytes);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_CORRUPT);
  assert_non_null(strstr(hk_last_error(), "kernel symbol \"hk_test_nope\" is missing"));
  /* A failed load is not cached: the next attempt fails the same way. */
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 8), &s), HK_STATUS_CORRUPT);
  hk_pack_destroy(pack);
  free(bytes);
}

static void test_bad_code_object(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  st->fx.targets[0].code = "this is not an ELF file";
  st->fx.targets[0].code_size = 23;
  for (int k = 0; k < 2; k++) st->fx.kernels[k].code_size = 23;
  void *bytes;
  hk_pack_t *pack = open_variant(st, &bytes);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_CORRUPT);
  assert_non_null(strstr(hk_last_error(), "the code object is not a shared object for"));
  hk_pack_destroy(pack);
  free(bytes);
}

/* The host object's ELF headers are checked before the dynamic loader sees it (a
 * truncated object would crash inside it): a complete ELF64 shared object of this machine
 * that defines every kernel in .dynsym. Each variant: a CORRUPT naming what is wrong. */
static void expect_host_object(state_t *st, const uint8_t *code, size_t size, const char *needle) {
  st->fx.targets[0].code = (void *)code;
  st->fx.targets[0].code_size = size;
  for (int k = 0; k < 2; k++) st->fx.kernels[k].code_size = size;
  void *bytes;
  hk_pack_t *pack = open_variant(st, &bytes);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_CORRUPT);
  if (!strstr(hk_last_error(), needle)) fail_msg("expected \"%s\" in: %s", needle, hk_last_error());
  hk_pack_destroy(pack);
  free(bytes);
}

static void test_host_elf_checks(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  uint8_t *so = fx_copy(g_code, g_code_size);
  /* truncated: the headers are there, the segments they map are not */
  expect_host_object(st, so, g_code_size / 2, "lies outside the object");
  expect_host_object(st, so, 40, "truncated ELF header");
  so[4] = 1; /* ELFCLASS32 */
  expect_host_object(st, so, g_code_size, "not a 64-bit little-endian ELF object");
  so[4] = ((const uint8_t *)g_code)[4];
  so[18] ^= 0x40; /* e_machine */
  expect_host_object(st, so, g_code_size, "another machine");
  so[18] = ((const uint8_t *)g_code)[18];
  so[16] = 2; /* e_type EXEC */
  expect_host_object(st, so, g_code_size, "not a shared object (e_type)");
  so[16] = ((const uint8_t *)g_code)[16];
  /* a kernel name that is not in .dynsym is found missing before dlopen */
  snprintf(st->fx.kernels[1].name, sizeof st->fx.kernels[1].name, "hk_test_nope");
  expect_host_object(st, so, g_code_size, "\"hk_test_nope\" is missing from the code object's dynamic symbols");
  free(so);
}

/* Damage inside the zstd payload (checksums fixed up, so verify passes): the lazy
 * decompression at session creation catches it, or the object fails to load. */
static void test_damaged_code_payload(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  st->fx.in.n_targets = 1;
  void *bytes;
  size_t size;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &bytes, &size), 0);
  uint8_t *b = bytes;
  hk_section_t *cs = fx_section(b, fx_find_section(b, HK_SECTION_CODE));
  int corrupt_seen = 0;
  for (uint64_t at = 20; at < cs->size; at += cs->size / 7) {
    uint8_t *copy = fx_copy(b, size);
    copy[cs->offset + at] ^= 0x5a;
    hk_test_refix(copy, size);
    hk_pack_t *pack;
    hk_status_t s = hk_test_open_memory(copy, size, NULL, &pack);
    if (s == HK_OK) {
      hk_session_t *sess;
      s = hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &sess);
      hk_session_destroy(sess);
      hk_pack_destroy(pack);
    }
    /* Either it still decodes to a loadable object (unlikely), or a clean CORRUPT. */
    if (s != HK_OK) {
      assert_int_equal(s, HK_STATUS_CORRUPT);
      corrupt_seen++;
    }
    free(copy);
  }
  assert_true(corrupt_seen > 0);
  free(bytes);
}

/* ---- an allocator that fails the Nth allocation and counts what is live ------------ */
typedef struct {
  long calls, fail_at, live;
} counting_t;

static void *counting_alloc(void *ctx, size_t size) {
  counting_t *c = ctx;
  if (c->calls++ == c->fail_at) return NULL;
  c->live++;
  return malloc(size);
}

static void counting_free(void *ctx, void *ptr) {
  counting_t *c = ctx;
  c->live--;
  free(ptr);
}

static void test_allocation_failures(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  int failures = 0;
  for (long n = 0;; n++) {
    counting_t c = {0, n, 0};
    hk_allocator_t a = {counting_alloc, counting_free, &c};
    hk_pack_t *pack = NULL;
    hk_session_t *s = NULL;
    hk_status_t st1 = hk_test_open_memory(st->pack_bytes, st->pack_size, &a, &pack);
    if (st1 == HK_OK) st1 = hk_session_create(pack, HK_TEST_OPTIONS(.batch = 8), &s);
    if (st1 == HK_OK) run_and_check(s, 8, 5);
    hk_session_destroy(s);
    hk_pack_destroy(pack);
    assert_int_equal(c.live, 0);
    if (c.calls <= n) { /* nothing failed: every allocation point has been tried */
      assert_int_equal(st1, HK_OK);
      break;
    }
    if (st1 != HK_STATUS_OUT_OF_MEMORY)
      fail_msg("failing allocation %ld: %s (%s)", n, hk_status_string(st1), hk_last_error());
    failures++;
  }
  assert_true(failures >= 6); /* pack, zstd context, code, module, session tables, workspace */
}

/* An allocator whose memory starts as 0xA5 bytes: what a session must not rely on. */
static void *dirty_alloc(void *ctx, size_t size) {
  (void)ctx;
  void *p = malloc(size);
  if (p) memset(p, 0xA5, size);
  return p;
}
static void dirty_free(void *ctx, void *ptr) {
  (void)ctx;
  free(ptr);
}

/* Scratch and semaphore arguments (format 1.3) on the host backend: the kernel computes
 * through its scratch range of the workspace and finds its counters at zero -- in dirty
 * memory, so the session zeroed them -- at every run, padded ones (a rebuilt bucket)
 * included; the counters lie in the arena past the workspace and stay at zero. */
static void test_workspace_args(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  fx_use_workspace_kernel(&st->fx);
  void *bytes;
  size_t size;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &bytes, &size), 0);
  hk_allocator_t a = {dirty_alloc, dirty_free, NULL};
  hk_pack_t *pack = NULL;
  assert_int_equal(hk_test_open_memory(bytes, size, &a, &pack), HK_OK);
  for (int b = 0; b < 2; b++) {
    const int64_t batch = b ? 8 : 2;
    hk_session_t *s;
    assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = (uint64_t)batch, .target = FX_HOST), &s), HK_OK);
    const uint32_t *sem = hk_session_debug_semaphores(s);
    assert_non_null(sem);
    assert_true((const char *)sem >= (const char *)hk_session_debug_arena(s) + st->fx.graphs[b].workspace_bytes);
    for (int run = 0; run < 3; run++) {
      if (b == 1 && run == 2) assert_int_equal(hk_session_set_batch(s, 5), HK_OK); /* padded: bucket 8 rebuilt */
      run_and_check(s, b == 1 && run == 2 ? 5 : batch, 40 + (uint64_t)run);
      sem = hk_session_debug_semaphores(s);
      for (int i = 0; i < 3; i++) assert_int_equal(sem[i], 0);
    }
    hk_session_destroy(s);
  }
  hk_pack_destroy(pack);
  free(bytes);
}

/* ---- launch extents (format 1.6) ------------------------------------------------------------
 * The fixture's pack with bytes changed and the checksums fixed up: it opens (well formed), and
 * only the launch check stands between it and a run that writes past its tensors. Node 0 and 1
 * are the host target's batch-2 launches (add, mul), node 5 the sm_90 target's batch-2 mul. */
typedef enum forgery {
  FORGE_ROWS,          /* add claims 65536 rows of x and t, in 4096 blocks */
  FORGE_ROWS_RECORD,   /* the same, with the EXTENTS record forged to agree */
  FORGE_OUT_PARAM,     /* mul writes its 200 floats into w, a 100-float param */
  FORGE_CUDA_OUT,      /* the sm_90 target's mul does: not the host target's business */
  FORGE_OLD_ROWS,      /* FORGE_ROWS in a format 1.5 pack, which has no EXTENTS record */
  FORGE_OLD,           /* an unforged format 1.5 pack */
} forgery_t;

static hk_pack_t *open_forged(state_t *st, forgery_t how, uint8_t **out_bytes) {
  uint8_t *b = fx_copy(st->pack_bytes, st->pack_size);
  hk_node_rec_t *nodes = fx_payload(b, HK_SECTION_NODES);
  hk_arg_rec_t *args = fx_payload(b, HK_SECTION_ARGS);
  uint64_t *ext = fx_payload(b, HK_SECTION_EXTENTS);
  const uint64_t rows_bytes = 65536ull * FX_COLS * sizeof(float);
  if (how == FORGE_ROWS || how == FORGE_ROWS_RECORD || how == FORGE_OLD_ROWS) {
    nodes[0].grid[0] = 4096;
    args[nodes[0].arg_first + 3].value = 65536;
  }
  if (how == FORGE_ROWS_RECORD) ext[nodes[0].arg_first] = ext[nodes[0].arg_first + 2] = rows_bytes;
  if (how == FORGE_OUT_PARAM) args[nodes[1].arg_first + 2].value = 1;
  if (how == FORGE_CUDA_OUT) args[nodes[5].arg_first + 2].value = 1;
  if (how == FORGE_OLD_ROWS || how == FORGE_OLD) { /* what a 1.5 reader sees: EXTENTS as an unknown section */
    ((hk_pack_header_t *)b)->version_minor = 5;
    fx_section(b, fx_find_section(b, HK_SECTION_EXTENTS))->kind = 99;
  }
  hk_test_refix(b, st->pack_size);
  hk_pack_t *pack = NULL;
  assert_int_equal(hk_test_open_memory(b, st->pack_size, NULL, &pack), HK_OK);
  *out_bytes = b;
  return pack;
}

static void expect_refused(state_t *st, forgery_t how, const char *message) {
  uint8_t *bytes;
  hk_pack_t *pack = open_forged(st, how, &bytes);
  hk_session_t *s = (hk_session_t *)1;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .target = FX_HOST), &s), HK_STATUS_CORRUPT);
  assert_null(s);
  if (!strstr(hk_pack_error(pack), message)) fail_msg("\"%s\" does not contain \"%s\"", hk_pack_error(pack), message);
  /* every bucket's graph is checked at once: batch 8's session is refused as well */
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 8, .target = FX_HOST), &s), HK_STATUS_CORRUPT);
  hk_pack_destroy(pack);
  free(bytes);
}

static void expect_runs(state_t *st, forgery_t how) {
  uint8_t *bytes;
  hk_pack_t *pack = open_forged(st, how, &bytes);
  hk_session_t *s = NULL;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .target = FX_HOST), &s), HK_OK);
  run_and_check(s, 2, 91);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  free(bytes);
}

static void test_forged_launch_refused(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  const char *add = "graph 0 (target " FX_HOST ", batch 2) launch 0 (node add, kernel hk_test_addc, op rmsnorm): ";
  char want[512];
  snprintf(want, sizeof want, "%sargument 0 (x): the pack's EXTENTS record says 800 bytes, the launch's arguments "
           "give 26214400 (the record and the arguments disagree)", add);
  expect_refused(st, FORGE_ROWS, want);
  snprintf(want, sizeof want, "%sargument 0 (x) may touch 26214400 bytes of tensor x, which has 800 bytes at batch 2",
           add);
  expect_refused(st, FORGE_ROWS_RECORD, want);
  expect_refused(st, FORGE_OLD_ROWS, want); /* a 1.5 pack: the record is missing, the check is not */
  expect_refused(st, FORGE_OUT_PARAM, "graph 0 (target " FX_HOST ", batch 2) launch 1 (node mul, kernel hk_test_mul, "
                                      "op mul): argument 2 (out) may touch 800 bytes of tensor w, which has 400 bytes "
                                      "at batch 2");
  expect_runs(st, FORGE_CUDA_OUT); /* each target's graphs are checked before its own code loads */
  expect_runs(st, FORGE_OLD);      /* packs before format 1.6 still run */
}

static void test_open_file_and_run(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  char *dir = hk_test_tmpdir();
  char path[4200];
  snprintf(path, sizeof path, "%s/m.hkpack", dir);
  assert_int_equal(hkc_pack_write(&st->fx.in, path), 0);
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_file(path, NULL, &pack), HK_OK);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  run_and_check(s, 2, 7);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  remove(path);
  remove(dir);
  free(dir);
}

/* ---- batch buckets ------------------------------------------------------------------------- */
/* The fixture at batch sizes [1, 8, 32] under `policy`. */
static hk_pack_t *open_buckets(state_t *st, int policy, void **out_bytes) {
  static const int64_t buckets[] = {1, 8, 32};
  fx_set_batches(&st->fx, buckets, 3);
  st->fx.spec.batch_policy = policy;
  return open_variant(st, out_bytes);
}

static void expect_dims(hk_session_t *s, uint32_t index, int64_t d0, size_t bytes) {
  hk_tensor_info_t info;
  assert_int_equal(hk_session_tensor_info(s, index, &info), HK_OK);
  assert_int_equal(info.dims[0], d0);
  assert_int_equal(info.bytes, bytes);
}

/* Batch rows [from, to) of a staging buffer of FX_COLS floats per row hold zeros. */
static void expect_zero_rows(const float *staging, int64_t from, int64_t to) {
  for (int64_t i = from * FX_COLS; i < to * FX_COLS; i++)
    if (staging[i] != 0.0f) fail_msg("staging element %lld (row %lld) is %g, expected 0", (long long)i,
                                     (long long)(i / FX_COLS), (double)staging[i]);
}

static void test_pad_batch_between_buckets(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  void *bytes;
  hk_pack_t *pack = open_buckets(st, HK_BATCH_POLICY_REC_PAD, &bytes);
  assert_int_equal(hk_pack_batch_policy(pack), HK_BATCH_POLICY_PAD);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 5), &s), HK_OK);
  assert_int_equal(hk_session_batch(s), 5);
  assert_int_equal(hk_session_bucket(s), 8);
  expect_dims(s, 0, 5, 5 * FX_COLS * 4);  /* x: sized for the real batch */
  expect_dims(s, 1, FX_COLS, FX_COLS * 4); /* w: no batch */
  expect_dims(s, 2, 5, 5 * FX_COLS * 4);  /* y */
  assert_int_equal(hk_session_debug_builds(s), 1);
  const void *arena8 = hk_session_debug_arena(s);
  assert_non_null(arena8);
  run_and_check(s, 5, 21);
  /* Inside: x's rows past the real ones are zero, and the bucket computed on them. */
  const float *xs = hk_session_debug_staging(s, "x"), *ys = hk_session_debug_staging(s, "y");
  assert_non_null(xs);
  assert_non_null(ys);
  assert_null(hk_session_debug_staging(s, "w"));
  expect_zero_rows(xs, 5, 8);
  for (int64_t i = 5 * FX_COLS; i < 8 * FX_COLS; i++) assert_true(ys[i] == 1.5f * g_last_w[i % FX_COLS]);

  /* Another batch in the same bucket: batch-dependent tensors must be bound again, the
   * bucket's state (workspace, graph) is reused. */
  assert_int_equal(hk_session_set_batch(s, 7), HK_OK);
  assert_int_equal(hk_session_batch(s), 7);
  assert_int_equal(hk_session_bucket(s), 8);
  expect_dims(s, 0, 7, 7 * FX_COLS * 4);
  assert_int_equal(hk_session_run(s, NULL), HK_STATUS_FAILED_PRECONDITION);
  assert_non_null(strstr(hk_last_error(), "bound at batch size 7: unbound x, y"));
  assert_non_null(strstr(hk_session_error(s), "unbound x, y"));
  run_and_check(s, 7, 22);
  assert_int_equal(hk_session_debug_builds(s), 1);
  assert_ptr_equal(hk_session_debug_arena(s), arena8);
  /* Shrinking again: the rows batch 7 left in x's staging are zeroed. */
  assert_int_equal(hk_session_set_batch(s, 5), HK_OK);
  run_and_check(s, 5, 23);
  expect_zero_rows(xs, 5, 8);
  assert_int_equal(hk_session_debug_builds(s), 1);

  /* Another bucket: built by the first run that needs it, not by set_batch. */
  assert_int_equal(hk_session_set_batch(s, 20), HK_OK);
  assert_int_equal(hk_session_bucket(s), 32);
  assert_int_equal(hk_session_debug_builds(s), 1);
  assert_null(hk_session_debug_arena(s));
  run_and_check(s, 20, 24);
  assert_int_equal(hk_session_debug_builds(s), 2);

  /* A batch that is a bucket binds directly: staging is left alone. */
  assert_int_equal(hk_session_set_batch(s, 8), HK_OK);
  assert_ptr_equal(hk_session_debug_arena(s), arena8);
  memset((void *)(uintptr_t)xs, 0xff, 8 * FX_COLS * 4);
  memset((void *)(uintptr_t)ys, 0xff, 8 * FX_COLS * 4);
  run_and_check(s, 8, 25);
  for (size_t i = 0; i < 8 * FX_COLS; i++) {
    uint32_t u, v;
    memcpy(&u, &xs[i], 4);
    memcpy(&v, &ys[i], 4);
    if (u != 0xffffffffu || v != 0xffffffffu) fail_msg("staging element %zu was used by an exact-batch run", i);
  }
  assert_int_equal(hk_session_debug_builds(s), 2);

  /* Over the largest bucket, and zero: NOT_FOUND listing the buckets; nothing changes. */
  assert_int_equal(hk_session_set_batch(s, 64), HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_last_error(), "batch size 64 is larger than the largest batch size built into the "
                                          "artifact (batch sizes: 1, 8, 32)"));
  assert_non_null(strstr(hk_session_error(s), "(batch sizes: 1, 8, 32)"));
  assert_int_equal(hk_session_set_batch(s, 0), HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_last_error(), "batch size 0 is not valid (batch sizes: 1, 8, 32)"));
  assert_int_equal(hk_session_batch(s), 8);
  assert_int_equal(hk_session_bucket(s), 8);
  run_and_check(s, 8, 28);
  assert_int_equal(hk_session_set_batch(NULL, 5), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_session_batch(NULL), 0);
  hk_session_destroy(s);

  hk_session_t *bad = (hk_session_t *)1;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 64), &bad), HK_STATUS_NOT_FOUND);
  assert_null(bad);
  assert_non_null(strstr(hk_pack_error(pack), "batch size 64 is larger"));
  assert_non_null(strstr(hk_pack_error(pack), "(batch sizes: 1, 8, 32)"));
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 0), &bad), HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_last_error(), "(batch sizes: 1, 8, 32)"));
  /* The smallest bucket pads nothing below it; batch 1 is a bucket. */
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  assert_int_equal(hk_session_bucket(s), 8);
  run_and_check(s, 2, 26);
  assert_int_equal(hk_session_set_batch(s, 1), HK_OK);
  assert_int_equal(hk_session_bucket(s), 1);
  run_and_check(s, 1, 27);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  free(bytes);
}

/* A bucket first built for its own batch (no staging) is rebuilt once, with staging, when
 * a smaller batch needs it padded; then reused. */
static void test_pad_rebuilds_exact_bucket(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  void *bytes;
  hk_pack_t *pack = open_buckets(st, HK_BATCH_POLICY_REC_PAD, &bytes);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 8), &s), HK_OK);
  assert_null(hk_session_debug_staging(s, "x"));
  run_and_check(s, 8, 31);
  assert_int_equal(hk_session_set_batch(s, 3), HK_OK);
  run_and_check(s, 3, 32);
  assert_int_equal(hk_session_debug_builds(s), 2);
  assert_non_null(hk_session_debug_staging(s, "x"));
  assert_int_equal(hk_session_set_batch(s, 6), HK_OK);
  run_and_check(s, 6, 33);
  assert_int_equal(hk_session_set_batch(s, 8), HK_OK);
  run_and_check(s, 8, 34);
  assert_int_equal(hk_session_debug_builds(s), 2);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  free(bytes);
}

static void test_exact_policy_refuses(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  void *bytes;
  hk_pack_t *pack = open_buckets(st, HK_BATCH_POLICY_REC_EXACT, &bytes);
  assert_int_equal(hk_pack_batch_policy(pack), HK_BATCH_POLICY_EXACT);
  hk_session_t *s = (hk_session_t *)1;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 5), &s), HK_STATUS_NOT_FOUND);
  assert_null(s);
  assert_non_null(strstr(hk_last_error(), "batch size 5 was not built into the artifact and its batch policy is "
                                          "exact (batch sizes: 1, 8, 32)"));
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 8), &s), HK_OK);
  run_and_check(s, 8, 41);
  assert_int_equal(hk_session_set_batch(s, 5), HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_session_error(s), "its batch policy is exact"));
  assert_int_equal(hk_session_batch(s), 8);
  assert_int_equal(hk_session_set_batch(s, 32), HK_OK);
  run_and_check(s, 32, 42);
  assert_int_equal(hk_session_debug_builds(s), 2);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  free(bytes);
}

/* An artifact whose layouts cannot be padded (hkc refuses such specs under pad, but the
 * bytes are untrusted, and a format 1.0 file reads as pad): its buckets still run, a batch
 * between them is refused naming the tensor. */
static void test_pad_refuses_unpaddable_layout(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  static const int64_t buckets[] = {2, 8};
  for (int variant = 0; variant < 2; variant++) {
    fx_init(&st->fx, g_code, g_code_size, 0);
    fx_set_batches(&st->fx, buckets, 2);
    if (variant == 0) /* t [100, batch]: same bytes, batch in the last dim */
      st->fx.tensors[2] = fx_tensor("t", HK_ROLE_INTERMEDIATE, 2, 0, FX_COLS, 1, 0);
    else /* x [batch + 0] as 2*batch - batch is not expressible: use an offset on the leading dim */
      st->fx.tensors[3] = fx_tensor("y", HK_ROLE_OUTPUT, 2, 1, 1, 0, FX_COLS);
    void *bytes;
    hk_pack_t *pack = open_variant(st, &bytes);
    hk_session_t *s = (hk_session_t *)1;
    assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 5), &s), HK_STATUS_NOT_FOUND);
    assert_null(s);
    assert_non_null(strstr(hk_last_error(), variant == 0 ? "cannot be padded to 8: tensor t depends on batch"
                                                         : "cannot be padded to 8: tensor y depends on batch"));
    assert_non_null(strstr(hk_last_error(), "(batch sizes: 2, 8)"));
    if (variant == 0) {
      assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 8), &s), HK_OK);
      run_and_check(s, 8, 51);
      assert_int_equal(hk_session_set_batch(s, 3), HK_STATUS_NOT_FOUND);
      assert_int_equal(hk_session_set_batch(s, 2), HK_OK);
      run_and_check(s, 2, 52);
      hk_session_destroy(s);
    }
    hk_pack_destroy(pack);
    free(bytes);
  }
}

/* ---- the same check on a real pipeline, built by hkc from a spec ---------------------------- */
static const char k_pad_spec[] =
    "hkc: 1\n"
    "name: padtest\n"
    "dtype: f32\n"
    "batch_sizes: %s\n"
    "dims: {s: 4, h: 32, f: 64}\n"
    "inputs: {x: [batch, s, h]}\n"
    "params: {w1: [h, f], b1: [f], w2: [f, h], g: [h], b: [h]}\n"
    "graph:\n"
    "  - {name: fc1, op: gemm, in: [x, w1], bias: b1, act: gelu, out: a}\n"
    "  - {name: fc2, op: gemm, in: [a, w2], residual: x, out: r}\n"
    "  - {name: ln, op: layernorm, in: [r], gamma: g, beta: b, out: n}\n"
    "  - {name: att, op: attention, in: [n, n, n], heads: 2, causal: true, out: o}\n"
    "  - {name: sm, op: softmax, in: [o], out: y}\n"
    "outputs: [y, n]\n";

/* Builds k_pad_spec at `batch_sizes` for the host into dir/name.hkpack and opens it. */
static hk_pack_t *build_spec_pack(const char *dir, const char *name, const char *batch_sizes) {
  char spec[4200], out[4200];
  snprintf(spec, sizeof spec, "%s/%s.yaml", dir, name);
  snprintf(out, sizeof out, "%s/%s.hkpack", dir, name);
  FILE *f = fopen(spec, "w");
  assert_non_null(f);
  fprintf(f, k_pad_spec, batch_sizes);
  fclose(f);
  hkc_build_options_t o = {.spec_path = spec, .out_path = out, .targets = "host", .quiet = 1, .no_cache = 1,
                           .fusion = -1};
  if (hkc_build(&o) != 0) fail_msg("hkc_build %s failed", spec);
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_file(out, NULL, &pack), HK_OK);
  remove(spec);
  remove(out);
  return pack;
}

/* Binds random inputs and params (seeded by name) and poisoned outputs with GUARD poisoned
 * floats after them, runs, checks the guards, and returns the outputs concatenated in
 * tensor order (malloc'd, *out_bytes). Every tensor is f32. */
static float *run_pipeline(hk_session_t *s, uint64_t seed, size_t *out_bytes) {
  uint32_t n = hk_session_tensor_count(s);
  float *bufs[16] = {0};
  size_t total = 0;
  assert_true(n <= 16);
  for (uint32_t t = 0; t < n; t++) {
    hk_tensor_info_t info;
    assert_int_equal(hk_session_tensor_info(s, t, &info), HK_OK);
    assert_int_equal(info.element_type, HK_ELEMENT_F32);
    size_t count = info.bytes / 4;
    bufs[t] = malloc((count + GUARD) * 4);
    hk_test_rng_t rng;
    hk_test_rng_seed(&rng, seed * 131 + info.name[0] * 7 + strlen(info.name));
    double scale = info.role == HK_TENSOR_PARAM && info.rank >= 2 ? 1 / sqrt((double)info.dims[0]) : 1;
    for (size_t i = 0; i < count + GUARD; i++)
      bufs[t][i] = info.role == HK_TENSOR_OUTPUT || i >= count ? NAN : (float)(hk_test_uniform(&rng, -1, 1) * scale);
    if (info.role == HK_TENSOR_OUTPUT) total += info.bytes;
    assert_int_equal(hk_session_bind(s, info.name, bufs[t], info.bytes), HK_OK);
  }
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  float *out = malloc(total ? total : 1);
  size_t at = 0;
  for (uint32_t t = 0; t < n; t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(s, t, &info);
    size_t count = info.bytes / 4;
    for (size_t i = count; i < count + GUARD; i++)
      if (!isnan(bufs[t][i])) fail_msg("tensor %s: element %zu past its bytes was written", info.name, i);
    if (info.role == HK_TENSOR_OUTPUT) {
      for (size_t i = 0; i < count; i++)
        if (!isfinite(bufs[t][i])) fail_msg("output %s[%zu] is not finite (unwritten?)", info.name, i);
      memcpy((char *)out + at, bufs[t], info.bytes);
      at += info.bytes;
    }
    free(bufs[t]);
  }
  *out_bytes = total;
  return out;
}

/* Batch 5 on buckets [1, 8, 32] (padded to 8) equals, bit for bit, the same inputs through
 * a pack built for exactly batch 5: the same kernels on the same real rows. The GEMMs run
 * their C loops (host_blas = 1), whose rows do not depend on the row count; through OpenBLAS,
 * which picks its kernels by a call's shape, the two agree within f32 rounding (checked last). */
static void test_pad_matches_exact_pack(void **ts) {
  NEED_CC(*ts);
  char *dir = hk_test_tmpdir();
  assert_non_null(dir);
  hk_pack_t *buckets = build_spec_pack(dir, "buckets", "[1, 8, 32]");
  hk_pack_t *exact = build_spec_pack(dir, "exact5", "[5]");
  hk_session_t *sp, *se;
  assert_int_equal(hk_session_create(buckets, HK_TEST_OPTIONS(.batch = 5, .host_blas = 1), &sp), HK_OK);
  assert_int_equal(hk_session_create(exact, HK_TEST_OPTIONS(.batch = 5, .host_blas = 1), &se), HK_OK);
  assert_int_equal(hk_session_bucket(sp), 8);
  assert_int_equal(hk_session_bucket(se), 5);
  size_t bp, be;
  float *padded = run_pipeline(sp, 3, &bp), *ref = run_pipeline(se, 3, &be);
  assert_int_equal(bp, be);
  assert_int_equal(bp, 2 * 5 * 4 * 32 * 4); /* y and n, [5, 4, 32] f32 */
  assert_memory_equal(padded, ref, bp);
  /* After a run at 7 in the same bucket and one at 20 in another, batch 5 again gives the
   * same bits. */
  size_t b2;
  assert_int_equal(hk_session_set_batch(sp, 7), HK_OK);
  free(run_pipeline(sp, 4, &b2));
  assert_int_equal(hk_session_set_batch(sp, 20), HK_OK);
  free(run_pipeline(sp, 5, &b2));
  assert_int_equal(hk_session_set_batch(sp, 5), HK_OK);
  float *again = run_pipeline(sp, 3, &b2);
  assert_memory_equal(again, ref, bp);
  assert_int_equal(hk_session_debug_builds(sp), 2);
  free(again);
  free(padded);
  hk_session_destroy(sp);
  hk_session_destroy(se);
  /* the default GEMM path (OpenBLAS where installed), padded, against the C loops' exact run */
  assert_int_equal(hk_session_create(buckets, HK_TEST_OPTIONS(.batch = 5), &sp), HK_OK);
  padded = run_pipeline(sp, 3, &b2);
  assert_int_equal(b2, be);
  for (size_t i = 0; i < be / 4; i++)
    if (!(fabsf(padded[i] - ref[i]) <= 1e-5f * (fabsf(ref[i]) + 1.0f)))
      fail_msg("output float %zu: %.9g padded (%s), %.9g exact (C loops)", i, padded[i],
               hk_session_host_blas(sp, NULL)[0] ? "OpenBLAS" : "C loops", ref[i]);
  free(padded);
  free(ref);
  hk_session_destroy(sp);
  hk_pack_destroy(buckets);
  hk_pack_destroy(exact);
  remove(dir);
  free(dir);
}

/* Fault injection on the padded paths: the rebuild of a bucket with staging, the lazy
 * build of other buckets inside run. A failing run reports OUT_OF_MEMORY and the session
 * works on the next try; nothing leaks. */
static void test_allocation_failures_padded(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  static const int64_t buckets[] = {1, 8, 32};
  fx_set_batches(&st->fx, buckets, 3);
  void *bytes;
  size_t size;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &bytes, &size), 0);
  /* 8 (built at create, no staging), 5 (rebuilt with staging), 20 (built padded), 32
   * (reused, exact), 1 (built), 7 (reused, padded) */
  static const uint64_t steps[] = {8, 5, 20, 32, 1, 7};
  int run_failures = 0;
  for (long n = 0;; n++) {
    counting_t c = {0, n, 0};
    hk_allocator_t a = {counting_alloc, counting_free, &c};
    hk_pack_t *pack = NULL;
    hk_session_t *s = NULL;
    hk_status_t st1 = hk_test_open_memory(bytes, size, &a, &pack);
    if (st1 == HK_OK) st1 = hk_session_create(pack, HK_TEST_OPTIONS(.batch = 8), &s);
    for (size_t k = 0; st1 == HK_OK && k < sizeof steps / sizeof steps[0]; k++) {
      long before = c.calls;
      assert_int_equal(hk_session_set_batch(s, steps[k]), HK_OK);
      assert_int_equal(c.calls, before); /* set_batch allocates nothing */
      size_t nx = (size_t)steps[k] * FX_COLS;
      float *x = calloc(nx, 4), *y = calloc(nx, 4);
      _Alignas(16) float w[FX_COLS] = {0};
      assert_int_equal(hk_session_bind(s, "x", x, nx * 4), HK_OK);
      assert_int_equal(hk_session_bind(s, "w", w, sizeof w), HK_OK);
      assert_int_equal(hk_session_bind(s, "y", y, nx * 4), HK_OK);
      hk_status_t r = hk_session_run(s, NULL);
      free(x);
      free(y);
      if (r != HK_OK) {
        if (r != HK_STATUS_OUT_OF_MEMORY)
          fail_msg("run at batch %llu, failing allocation %ld: %s (%s)", (unsigned long long)steps[k], n,
                   hk_status_string(r), hk_last_error());
        assert_true(c.calls > before && c.calls > n); /* it was this run's allocation */
        run_failures++;
        c.fail_at = -1; /* the allocator recovers: so does the session */
      }
      run_and_check(s, (int64_t)steps[k], 60 + k);
    }
    hk_session_destroy(s);
    hk_pack_destroy(pack);
    assert_int_equal(c.live, 0);
    if (c.calls <= n) break; /* nothing failed: every allocation point has been tried */
    if (st1 != HK_OK && st1 != HK_STATUS_OUT_OF_MEMORY)
      fail_msg("failing allocation %ld: %s (%s)", n, hk_status_string(st1), hk_last_error());
  }
  assert_true(run_failures >= 3 * 6); /* three builds inside run, each with tables, backend state, arena */
  free(bytes);
}

/* ---- NULL arguments (hkrt.h, "NULL"): every public function -------------------------------- */
/* A fallible call refused for a NULL object or required pointer, saying so. */
#define EXPECT_NULL_REFUSED(call)                                    \
  do {                                                               \
    assert_int_equal((call), HK_STATUS_INVALID_ARGUMENT);            \
    if (!strstr(hk_last_error(), "NULL"))                            \
      fail_msg("%s: the message does not name the NULL: %s", #call,  \
               hk_last_error());                                     \
  } while (0)

/* A NULL object: destroy and free do nothing, accessors return their neutral value,
 * fallible functions INVALID_ARGUMENT and clear their out_* pointer. No pack needed. */
static void test_null_objects(void **ts) {
  (void)ts;
  hk_pack_destroy(NULL);
  assert_string_equal(hk_pack_error(NULL), "");
  assert_string_equal(hk_pack_name(NULL), "");
  assert_int_equal(hk_pack_target_count(NULL), 0);
  assert_null(hk_pack_target_name(NULL, 0));
  assert_int_equal(hk_pack_batch_count(NULL), 0);
  assert_int_equal(hk_pack_batch_size(NULL, 0), 0);
  assert_int_equal(hk_pack_batch_policy(NULL), HK_BATCH_POLICY_PAD);
  const char *name = "poison";
  EXPECT_NULL_REFUSED(hk_pack_select_target(NULL, NULL, &name));
  assert_null(name);
  hk_pack_t *pack = (hk_pack_t *)1;
  EXPECT_NULL_REFUSED(hk_pack_open_file(NULL, NULL, &pack));
  assert_null(pack);
  pack = (hk_pack_t *)1;
  EXPECT_NULL_REFUSED(hk_pack_open_memory(NULL, 0, NULL, &pack));
  assert_null(pack);
  EXPECT_NULL_REFUSED(hk_pack_open_file("unused.hkpack", NULL, NULL));
  EXPECT_NULL_REFUSED(hk_pack_open_memory("", 0, NULL, NULL));

  hk_session_t *s = (hk_session_t *)1;
  EXPECT_NULL_REFUSED(hk_session_create(NULL, HK_TEST_OPTIONS(.batch = 2), &s));
  assert_null(s);
  hk_session_destroy(NULL);
  assert_string_equal(hk_session_error(NULL), "");
  assert_string_equal(hk_session_target(NULL), "");
  assert_string_equal(hk_session_device_name(NULL), "");
  const char *reason = "poison";
  assert_string_equal(hk_session_launch_mode(NULL, &reason), "");
  assert_string_equal(reason, "");
  assert_string_equal(hk_session_launch_mode(NULL, NULL), "");
  assert_int_equal(hk_session_pdl_count(NULL), 0);
  assert_int_equal(hk_session_tensor_count(NULL), 0);
  hk_tensor_info_t info;
  EXPECT_NULL_REFUSED(hk_session_tensor_info(NULL, 0, &info));
  _Alignas(16) float buf[4];
  EXPECT_NULL_REFUSED(hk_session_bind(NULL, "x", buf, sizeof buf));
  EXPECT_NULL_REFUSED(hk_session_run(NULL, NULL));
  EXPECT_NULL_REFUSED(hk_session_set_batch(NULL, 2));
  assert_int_equal(hk_session_batch(NULL), 0);
  assert_int_equal(hk_session_bucket(NULL), 0);
  assert_int_equal(hk_session_launch_count(NULL), 0);
  hk_launch_info_t launch;
  EXPECT_NULL_REFUSED(hk_session_launch_info(NULL, 0, &launch));
  double us[4];
  EXPECT_NULL_REFUSED(hk_session_profile(NULL, NULL, 1, us));
  void *ptr = buf;
  EXPECT_NULL_REFUSED(hk_session_alloc(NULL, 16, &ptr));
  assert_null(ptr);
  hk_session_free(NULL, buf); /* not touched: there is no session to free it from */
  hk_session_free(NULL, NULL);
  EXPECT_NULL_REFUSED(hk_session_copy(NULL, buf, buf, sizeof buf, HK_COPY_HOST_TO_DEVICE));
  EXPECT_NULL_REFUSED(hk_session_synchronize(NULL, NULL));
  assert_string_equal(hk_status_string(HK_STATUS_INVALID_ARGUMENT), "INVALID_ARGUMENT");
}

/* A real pack and session with NULL required pointers: refused; the optional NULLs
 * (requested target, stream, out_reason, 0-byte copy buffers, free(NULL)) work. */
static void test_null_arguments(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  const char *name = NULL;
  EXPECT_NULL_REFUSED(hk_pack_select_target(st->pack, NULL, NULL));
  assert_int_equal(hk_pack_select_target(st->pack, NULL, &name), HK_OK); /* NULL: best here */
  assert_string_equal(name, FX_HOST);
  hk_session_t *s = (hk_session_t *)1;
  EXPECT_NULL_REFUSED(hk_session_create(st->pack, NULL, &s));
  assert_null(s);
  EXPECT_NULL_REFUSED(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2), NULL));
  assert_int_equal(hk_session_create(st->pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);

  assert_string_equal(hk_session_launch_mode(s, NULL), "stream");
  EXPECT_NULL_REFUSED(hk_session_tensor_info(s, 0, NULL));
  _Alignas(16) float buf[256];
  EXPECT_NULL_REFUSED(hk_session_bind(s, NULL, buf, 800));
  EXPECT_NULL_REFUSED(hk_session_bind(s, "x", NULL, 800));
  EXPECT_NULL_REFUSED(hk_session_bind(s, "no_such_tensor", NULL, 0)); /* the NULL first */
  assert_non_null(strstr(hk_session_error(s), "data is NULL"));
  EXPECT_NULL_REFUSED(hk_session_launch_info(s, 0, NULL));
  EXPECT_NULL_REFUSED(hk_session_profile(s, NULL, 1, NULL));
  EXPECT_NULL_REFUSED(hk_session_alloc(s, 16, NULL));
  EXPECT_NULL_REFUSED(hk_session_copy(s, NULL, buf, 16, HK_COPY_HOST_TO_DEVICE));
  EXPECT_NULL_REFUSED(hk_session_copy(s, buf, NULL, 16, HK_COPY_DEVICE_TO_HOST));
  assert_int_equal(hk_session_copy(s, NULL, NULL, 0, HK_COPY_DEVICE_TO_DEVICE), HK_OK);
  hk_session_free(s, NULL);
  assert_int_equal(hk_session_synchronize(s, NULL), HK_OK);
  hk_session_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version),
      cmocka_unit_test_setup_teardown(test_run_two_batches, setup, teardown),
      cmocka_unit_test_setup_teardown(test_profile, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sessions_share_module, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bind_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_session_busy, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pack_error_per_thread, setup, teardown),
      cmocka_unit_test(test_null_objects),
      cmocka_unit_test_setup_teardown(test_null_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_batch_not_found, setup, teardown),
      cmocka_unit_test_setup_teardown(test_session_options, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pack_weights, setup, teardown),
      cmocka_unit_test_setup_teardown(test_target_selection, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_symbol, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_code_object, setup, teardown),
      cmocka_unit_test_setup_teardown(test_host_elf_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_damaged_code_payload, setup, teardown),
      cmocka_unit_test_setup_teardown(test_allocation_failures, setup, teardown),
      cmocka_unit_test_setup_teardown(test_open_file_and_run, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pad_batch_between_buckets, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pad_rebuilds_exact_bucket, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exact_policy_refuses, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pad_refuses_unpaddable_layout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pad_matches_exact_pack, setup, teardown),
      cmocka_unit_test_setup_teardown(test_allocation_failures_padded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_workspace_args, setup, teardown),
      cmocka_unit_test_setup_teardown(test_forged_launch_refused, setup, teardown),
  };
  const char *filter = getenv("HK_TEST_FILTER"); /* e.g. "test_pad_*": run only those */
  if (filter && *filter) cmocka_set_test_filter(filter);
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
