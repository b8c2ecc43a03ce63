/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sessions_mt PACK -- libhkrt's concurrency contract (hkrt.h, "Threads") on the host target,
 * written to run under ThreadSanitizer (scripts/test.sh builds it with clang
 * -fsanitize=thread against the loader's sources) as well as plainly (ctest, through
 * tests/integration/concurrency.sh).
 *
 *  1. many threads x own sessions over one shared pack: each creates, binds, runs and
 *     destroys sessions in a loop (create/destroy churn, each with its own host pool),
 *     and every output equals, bit for bit, a reference run made before the threads start;
 *  2. concurrent failing hk_session_create calls (a batch size the pack lacks) on the same
 *     pack, reading hk_pack_error() each time: the message is whole and names the batch;
 *  3. the misuse: several threads call hk_session_run/bind on one session; every call
 *     returns OK or BUSY (none hangs, none fails otherwise) and the outputs stay right.
 * Exit status 0 when all holds; TSan reports make it non-zero (halt_on_error, exitcode).
 * Uses only the public API: it is what an embedding application may do.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk/hkrt.h"

#define THREADS 8        /* threads of parts 1-2; part 3 shares one session among them */
#define ROUNDS 6         /* sessions each thread creates and destroys in part 1 */
#define MISUSE_CALLS 40  /* runs each thread attempts on the shared session in part 3 */
#define MAX_TENSORS 32

typedef struct {
  hk_tensor_info_t info;
  void *data;           /* inputs and params: shared, read-only; outputs: the reference */
} tensor_t;

static hk_pack_t *g_pack;
static uint64_t g_batch;
static tensor_t g_tensors[MAX_TENSORS];
static uint32_t g_count;
static atomic_int g_failures;
static atomic_int g_busy_seen;
static hk_session_t *g_shared; /* part 3 */

#define FAIL(...)                      \
  do {                                 \
    fprintf(stderr, "FAIL: " __VA_ARGS__); \
    fputc('\n', stderr);               \
    atomic_fetch_add(&g_failures, 1);  \
  } while (0)

static void *alloc16(size_t bytes) { return aligned_alloc(16, (bytes + 15) / 16 * 16); }

/* Small values of every element type: the bytes of 0x3c00 are 1.0 in f16 and a finite
 * bf16; 0x3f80 in the high half of an f32 word is a finite f32 too. */
static void fill(void *data, size_t bytes, uint32_t seed) {
  uint16_t *h = data;
  for (size_t i = 0; i < bytes / 2; i++) h[i] = (uint16_t)(0x3c00u | ((seed + i * 2654435761u) >> 22 & 0xffu));
}

static hk_session_t *session_new(void) {
  hk_session_t *s = NULL;
  hk_session_options_t o = {.struct_size = sizeof o, .batch = g_batch, .host_threads = 2};
  if (hk_session_create(g_pack, &o, &s) != HK_OK) FAIL("create: %s", hk_last_error());
  return s;
}

/* Binds the shared inputs/params and the given outputs (out[i] for output i, else the
 * shared data). */
static hk_status_t bind_all(hk_session_t *s, void *const *outs) {
  for (uint32_t i = 0; i < g_count; i++) {
    void *p = g_tensors[i].info.role == HK_TENSOR_OUTPUT ? outs[i] : g_tensors[i].data;
    hk_status_t st = hk_session_bind(s, g_tensors[i].info.name, p, g_tensors[i].info.bytes);
    if (st != HK_OK) return st;
  }
  return HK_OK;
}

static void check_outputs(void *const *outs, const char *who) {
  for (uint32_t i = 0; i < g_count; i++)
    if (g_tensors[i].info.role == HK_TENSOR_OUTPUT && memcmp(outs[i], g_tensors[i].data, g_tensors[i].info.bytes))
      FAIL("%s: output %s differs from the reference run", who, g_tensors[i].info.name);
}

static void outputs_new(void **outs) {
  for (uint32_t i = 0; i < g_count; i++)
    outs[i] = g_tensors[i].info.role == HK_TENSOR_OUTPUT ? alloc16(g_tensors[i].info.bytes) : NULL;
}

static void outputs_free(void **outs) {
  for (uint32_t i = 0; i < g_count; i++) free(outs[i]);
}

/* Part 1 and 2: own sessions, churned; failing creates on the shared pack in between. */
static void *own_sessions(void *arg) {
  (void)arg;
  void *outs[MAX_TENSORS];
  outputs_new(outs);
  for (int r = 0; r < ROUNDS; r++) {
    hk_session_t *s = session_new();
    if (!s) break;
    for (uint32_t i = 0; i < g_count; i++)
      if (outs[i]) memset(outs[i], 0xff, g_tensors[i].info.bytes); /* poison */
    if (bind_all(s, outs) != HK_OK || hk_session_run(s, NULL) != HK_OK || hk_session_run(s, NULL) != HK_OK)
      FAIL("own session: %s", hk_session_error(s));
    check_outputs(outs, "own session");
    hk_session_destroy(s);
    hk_session_t *bad = NULL;
    hk_session_options_t o = {.struct_size = sizeof o, .batch = 1000000007};
    if (hk_session_create(g_pack, &o, &bad) != HK_STATUS_NOT_FOUND || bad)
      FAIL("a create at batch 1000000007 did not fail with NOT_FOUND");
    if (!strstr(hk_last_error(), "1000000007") || !strstr(hk_pack_error(g_pack), "1000000007"))
      FAIL("failing create: messages \"%s\" / \"%s\"", hk_last_error(), hk_pack_error(g_pack));
  }
  outputs_free(outs);
  return NULL;
}

/* Part 3: one session, many threads. */
static void *shared_session(void *arg) {
  void **outs = arg; /* the shared session's outputs, bound once */
  for (int k = 0; k < MISUSE_CALLS; k++) {
    hk_status_t st = k % 8 == 7 ? bind_all(g_shared, outs) : hk_session_run(g_shared, NULL);
    if (st == HK_STATUS_BUSY) atomic_fetch_add(&g_busy_seen, 1);
    else if (st != HK_OK) FAIL("shared session: status %s: %s", hk_status_string(st), hk_last_error());
  }
  return NULL;
}

static int start_threads(void *(*fn)(void *), void *arg) {
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    if (pthread_create(&t[i], NULL, fn, arg) != 0) return -1;
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  return 0;
}

/* The tensors, shared inputs and the reference outputs, from one single-threaded run. */
static int reference(void) {
  hk_session_t *s = session_new();
  if (!s) return -1;
  g_count = hk_session_tensor_count(s);
  if (g_count > MAX_TENSORS) g_count = MAX_TENSORS;
  for (uint32_t i = 0; i < g_count; i++) {
    hk_session_tensor_info(s, i, &g_tensors[i].info);
    g_tensors[i].data = alloc16(g_tensors[i].info.bytes);
    fill(g_tensors[i].data, g_tensors[i].info.bytes, i + 1);
  }
  void *outs[MAX_TENSORS];
  for (uint32_t i = 0; i < g_count; i++) outs[i] = g_tensors[i].data; /* outputs land in the reference */
  int rc = bind_all(s, outs) == HK_OK && hk_session_run(s, NULL) == HK_OK ? 0 : -1;
  if (rc) fprintf(stderr, "reference run: %s\n", hk_session_error(s));
  /* the names stay valid after the session: they are the pack's strings */
  hk_session_destroy(s);
  return rc;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: sessions_mt PACK\n");
    return 2;
  }
  /* a host pack this test's script built: its own code, unsigned (hkrt.h, trust) */
  const hk_pack_open_options_t oo = {.struct_size = sizeof oo, .allow_unsigned_native_code = 1};
  if (hk_pack_open_file_ex(argv[1], &oo, &g_pack) != HK_OK) {
    fprintf(stderr, "%s: %s\n", argv[1], hk_last_error());
    return 1;
  }
  g_batch = hk_pack_batch_size(g_pack, hk_pack_batch_count(g_pack) - 1);
  if (reference() != 0) return 1;
  if (start_threads(own_sessions, NULL) != 0) FAIL("cannot start threads");

  void *outs[MAX_TENSORS];
  outputs_new(outs);
  g_shared = session_new();
  if (g_shared && bind_all(g_shared, outs) == HK_OK) {
    if (start_threads(shared_session, outs) != 0) FAIL("cannot start threads");
    check_outputs(outs, "shared session");
  }
  hk_session_destroy(g_shared);
  outputs_free(outs);
  for (uint32_t i = 0; i < g_count; i++) free(g_tensors[i].data);
  hk_pack_destroy(g_pack);
  int failures = atomic_load(&g_failures);
  printf("sessions_mt: %d threads x %d sessions, %d calls on one shared session (%d answered BUSY): %s\n", THREADS,
         ROUNDS, THREADS * MISUSE_CALLS, atomic_load(&g_busy_seen), failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
