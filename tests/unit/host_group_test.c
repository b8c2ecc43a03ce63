/* SPDX-License-Identifier: Apache-2.0 */
/* The host target's communicator (loader/src/host_group.c, hkrt.h hk_host_group_*): the
 * collectives against sums and layouts computed here, on random data, in f32 and bf16, with
 * threads as ranks; a rank that never comes fails the others after the timeout (and every
 * later collective at once); an abort wakes a waiting rank; bad arguments. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "convert_internal.h"
#include "hk/hkrt.h"
#include "host_group_internal.h"

#define RANKS 3
#define ROWS 5
#define COLS 7
#define N (ROWS * COLS)

typedef struct rank_arg {
  hk_host_group_t *g;
  uint32_t rank;
  uint32_t dtype;
  const void *in;
  void *out_sum, *out_gather;
  hk_status_t st_sum, st_gather;
} rank_arg_t;

static void *rank_run(void *p) {
  rank_arg_t *a = p;
  const size_t es = a->dtype == HK_DTYPE_F32 ? 4 : 2;
  a->st_sum = hk_host_group_all_reduce(a->g, a->rank, a->dtype, a->in, a->out_sum, N);
  a->st_gather = hk_host_group_all_gather(a->g, a->rank, es, a->in, a->out_gather, ROWS, COLS);
  return NULL;
}

static float load(uint32_t dtype, const void *p, size_t i) {
  return dtype == HK_DTYPE_F32 ? ((const float *)p)[i] : hk_bf16_to_f32(((const uint16_t *)p)[i]);
}

/* Every rank gets the same sum, in rank order rounded once, and rank r's columns at r * COLS. */
static void check_collectives(uint32_t dtype) {
  hk_host_group_t *g = NULL;
  assert_int_equal(hk_host_group_create(RANKS, 0, &g), HK_OK);
  const size_t es = dtype == HK_DTYPE_F32 ? 4 : 2;
  uint8_t in[RANKS][N * 4], sum[RANKS][N * 4], gather[RANKS][N * RANKS * 4];
  srand(7);
  for (int r = 0; r < RANKS; r++)
    for (int i = 0; i < N; i++) {
      const float x = (float)rand() / RAND_MAX * 4.0f - 2.0f;
      if (dtype == HK_DTYPE_F32) ((float *)in[r])[i] = x;
      else ((uint16_t *)in[r])[i] = hk_f32_to_bf16(x);
    }
  memset(sum, 0xff, sizeof sum); /* poisoned: NaN in both types */
  memset(gather, 0xff, sizeof gather);
  pthread_t t[RANKS];
  rank_arg_t args[RANKS];
  for (uint32_t r = 0; r < RANKS; r++) {
    args[r] = (rank_arg_t){g, r, dtype, in[r], sum[r], gather[r], HK_STATUS_INTERNAL, HK_STATUS_INTERNAL};
    assert_int_equal(pthread_create(&t[r], NULL, rank_run, &args[r]), 0);
  }
  for (int r = 0; r < RANKS; r++) pthread_join(t[r], NULL);
  for (int r = 0; r < RANKS; r++) {
    assert_int_equal(args[r].st_sum, HK_OK);
    assert_int_equal(args[r].st_gather, HK_OK);
    for (int i = 0; i < N; i++) {
      float want = 0.0f;
      for (int k = 0; k < RANKS; k++) want += load(dtype, in[k], (size_t)i);
      if (dtype != HK_DTYPE_F32) want = hk_bf16_to_f32(hk_f32_to_bf16(want));
      assert_true(load(dtype, sum[r], (size_t)i) == want); /* bit for bit, on every rank */
    }
    for (int row = 0; row < ROWS; row++)
      for (int k = 0; k < RANKS; k++)
        assert_memory_equal(gather[r] + ((size_t)row * RANKS * COLS + (size_t)k * COLS) * es,
                            in[k] + (size_t)row * COLS * es, COLS * es);
  }
  hk_host_group_destroy(g);
}

static void test_collectives_f32(void **state) {
  (void)state;
  check_collectives(HK_DTYPE_F32);
}

static void test_collectives_bf16(void **state) {
  (void)state;
  check_collectives(HK_DTYPE_BF16);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Rank 1 never comes: rank 0 fails after the timeout, saying so, and so does every later call. */
static void test_timeout(void **state) {
  (void)state;
  hk_host_group_t *g = NULL;
  assert_int_equal(hk_host_group_create(2, 200, &g), HK_OK);
  float in[4] = {1, 2, 3, 4}, out[4];
  const double t0 = now_ms();
  assert_int_equal(hk_host_group_all_reduce(g, 0, HK_DTYPE_F32, in, out, 4), HK_STATUS_DRIVER);
  const double waited = now_ms() - t0;
  assert_true(waited >= 150 && waited < 5000);
  assert_non_null(strstr(hk_last_error(), "did not arrive within the group's timeout"));
  const double t1 = now_ms();
  assert_int_equal(hk_host_group_all_gather(g, 1, 4, in, out, 1, 2), HK_STATUS_DRIVER);
  assert_true(now_ms() - t1 < 100); /* aborted: at once */
  assert_non_null(strstr(hk_last_error(), "aborted"));
  hk_host_group_destroy(g);
}

static void *abort_later(void *p) {
  struct timespec ts = {0, 50 * 1000000L};
  nanosleep(&ts, NULL);
  hk_host_group_abort(p);
  return NULL;
}

/* A rank that fails aborts the group: a rank waiting in a collective returns at once. */
static void test_abort_wakes(void **state) {
  (void)state;
  hk_host_group_t *g = NULL;
  assert_int_equal(hk_host_group_create(2, 60000, &g), HK_OK);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, abort_later, g), 0);
  float in[2] = {1, 2}, out[2];
  const double t0 = now_ms();
  assert_int_equal(hk_host_group_all_reduce(g, 0, HK_DTYPE_F32, in, out, 2), HK_STATUS_DRIVER);
  assert_true(now_ms() - t0 < 5000);
  assert_non_null(strstr(hk_last_error(), "aborted"));
  pthread_join(t, NULL);
  hk_host_group_destroy(g);
}

static void test_bad_arguments(void **state) {
  (void)state;
  hk_host_group_t *g = (hk_host_group_t *)1;
  assert_int_equal(hk_host_group_create(0, 0, &g), HK_STATUS_INVALID_ARGUMENT);
  assert_null(g);
  assert_int_equal(hk_host_group_create(HK_MAX_TENSOR_RANKS + 1, 0, &g), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_host_group_create(2, 0, NULL), HK_STATUS_INVALID_ARGUMENT);
  hk_host_group_destroy(NULL); /* no-ops */
  hk_host_group_abort(NULL);
  /* a group of one rank: the collectives are copies */
  assert_int_equal(hk_host_group_create(1, 0, &g), HK_OK);
  float in[3] = {1.5f, -2, 3}, out[3] = {0};
  assert_int_equal(hk_host_group_all_reduce(g, 0, HK_DTYPE_F32, in, out, 3), HK_OK);
  assert_memory_equal(in, out, sizeof in);
  hk_host_group_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_collectives_f32), cmocka_unit_test(test_collectives_bf16), cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_abort_wakes),     cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
