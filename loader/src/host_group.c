/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host_group.c -- the host target's communicator: ranks that are threads of one process
 * (hkrt.h, hk_host_group_create). The collectives of a tensor-parallel pack's host graphs run
 * here: every rank posts its buffer, waits at a barrier, computes its result from all the posted
 * buffers (each rank the whole sum, in rank order, in f32 for 16-bit types: every rank gets the
 * same bits), and waits again before anyone may reuse its buffer.
 *
 * A rank that does not arrive within the group's timeout, or a call to hk_host_group_abort,
 * fails every collective that is waiting and every later one with HK_STATUS_DRIVER: a rank that
 * fails never leaves the others hanging.
 */
#include <errno.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "convert_internal.h"
#include "host_group_internal.h"
#include "status_internal.h"
#include "util_internal.h"

struct hk_host_group {
  uint32_t ranks;
  uint32_t timeout_ms;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint32_t arrived;      /* ranks at the current barrier */
  uint64_t generation;   /* barriers completed */
  bool aborted;
  const void **posted;   /* per rank: its input of the collective in progress */
};

hk_status_t hk_host_group_create(uint32_t ranks, uint32_t timeout_ms, hk_host_group_t **out_group) {
  HK_FAIL_IF(!out_group, HK_STATUS_INVALID_ARGUMENT, "out_group is NULL");
  *out_group = NULL;
  HK_FAIL_IF(ranks < 1 || ranks > HK_MAX_TENSOR_RANKS, HK_STATUS_INVALID_ARGUMENT,
             "a host group has 1 to %u ranks, not %u", HK_MAX_TENSOR_RANKS, ranks);
  hk_host_group_t *g = calloc(1, sizeof *g);
  const void **posted = calloc(ranks, sizeof *posted);
  pthread_condattr_t ca;
  bool ok = g && posted && pthread_condattr_init(&ca) == 0;
  if (ok) {
    ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&g->cond, &ca) == 0;
    pthread_condattr_destroy(&ca);
  }
  if (ok && pthread_mutex_init(&g->lock, NULL) != 0) {
    pthread_cond_destroy(&g->cond);
    ok = false;
  }
  if (!ok) {
    free(g);
    free(posted);
    return HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory creating a host group of %u ranks", ranks);
  }
  g->ranks = ranks;
  g->timeout_ms = timeout_ms ? timeout_ms : HK_HOST_GROUP_DEFAULT_TIMEOUT_MS;
  g->posted = posted;
  *out_group = g;
  return HK_OK;
}

void hk_host_group_destroy(hk_host_group_t *g) {
  if (!g) return;
  pthread_cond_destroy(&g->cond);
  pthread_mutex_destroy(&g->lock);
  free(g->posted);
  free(g);
}

void hk_host_group_abort(hk_host_group_t *g) {
  if (!g) return;
  pthread_mutex_lock(&g->lock);
  g->aborted = true;
  pthread_cond_broadcast(&g->cond);
  pthread_mutex_unlock(&g->lock);
}

uint32_t hk_host_group_ranks(const hk_host_group_t *g) { return g->ranks; }

/* Waits until every rank has arrived. Errors: DRIVER (the group was aborted, or the timeout ran
 * out: then it is aborted for everyone). */
static hk_status_t barrier(hk_host_group_t *g, uint32_t rank, const char *what) {
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += g->timeout_ms / 1000;
  until.tv_nsec += (long)(g->timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_mutex_lock(&g->lock);
  const uint64_t gen = g->generation;
  bool timed_out = false;
  if (!g->aborted && ++g->arrived == g->ranks) {
    g->arrived = 0;
    g->generation++;
    pthread_cond_broadcast(&g->cond);
  }
  while (!g->aborted && g->generation == gen)
    if (pthread_cond_timedwait(&g->cond, &g->lock, &until) == ETIMEDOUT && g->generation == gen) {
      timed_out = true;
      g->aborted = true;
      pthread_cond_broadcast(&g->cond);
    }
  const bool failed = g->aborted && g->generation == gen;
  pthread_mutex_unlock(&g->lock);
  if (!failed) return HK_OK;
  return HK_ERROR(HK_STATUS_DRIVER, "%s on rank %u of %u: %s", what, rank, g->ranks,
                  timed_out ? "another rank did not arrive within the group's timeout; the group is aborted"
                            : "the host group was aborted (a rank failed, or hk_host_group_abort)");
}

static float load_f(uint32_t dtype, const void *p, uint64_t i) {
  if (dtype == HK_DTYPE_F32) return ((const float *)p)[i];
  const uint16_t h = ((const uint16_t *)p)[i];
  return dtype == HK_DTYPE_BF16 ? hk_bf16_to_f32(h) : hk_f16_to_f32(h);
}

static void store_f(uint32_t dtype, void *p, uint64_t i, float v) {
  if (dtype == HK_DTYPE_F32) ((float *)p)[i] = v;
  else ((uint16_t *)p)[i] = dtype == HK_DTYPE_BF16 ? hk_f32_to_bf16(v) : hk_f32_to_f16(v);
}

hk_status_t hk_host_group_all_reduce(hk_host_group_t *g, uint32_t rank, uint32_t dtype, const void *in, void *out,
                                     uint64_t n) {
  g->posted[rank] = in;
  HK_RETURN_IF_ERROR(barrier(g, rank, "all_reduce"));
  for (uint64_t i = 0; i < n; i++) {
    float sum = 0.0f;
    for (uint32_t r = 0; r < g->ranks; r++) sum += load_f(dtype, g->posted[r], i);
    store_f(dtype, out, i, sum);
  }
  return barrier(g, rank, "all_reduce");
}

hk_status_t hk_host_group_all_gather(hk_host_group_t *g, uint32_t rank, size_t elem_bytes, const void *in,
                                     void *out, uint64_t rows, uint64_t cols) {
  g->posted[rank] = in;
  HK_RETURN_IF_ERROR(barrier(g, rank, "all_gather"));
  const size_t piece = (size_t)cols * elem_bytes;
  for (uint32_t r = 0; r < g->ranks; r++)
    for (uint64_t i = 0; i < rows; i++)
      memcpy((char *)out + ((size_t)i * g->ranks + r) * piece, (const char *)g->posted[r] + (size_t)i * piece, piece);
  return barrier(g, rank, "all_gather");
}
