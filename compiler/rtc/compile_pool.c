/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU compile pool: kernels compile one per job on a pool of threads, each through the
 * content-addressed compile cache, through the kernel's toolchain entry (toolchain.h). nvrtc
 * compiles on the thread; hiprtc is not safe on threads, so the AMD entry's compile goes to
 * one of the worker processes (rtc_worker.h). The runtime compilers never print; the pool
 * counts each finished item in its phase of the caller's progress reporter (util.h). Used by
 * the build (every kernel of every GPU target) and by the tuner (its top candidates).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "rtc/rtc.h"
#include "util/util.h"

/* Upper bound on compile threads: beyond this the toolchains' own locks dominate. */
#define HKC_MAX_JOBS 64

/* Version of the kernel-source conventions: part of every cache key, so a change in how
 * hkc drives the toolchains invalidates old entries. */
#define HKC_CACHE_SCHEME "hkc-gpu-1"

struct hkc_compile_pool {
  hkc_compile_item_t *jobs;
  size_t n_jobs;
  atomic_size_t next;
  hkc_cache_t *cache;
  hkc_reporter_t *progress; /* borrowed; NULL: nothing shown */
  pthread_t threads[HKC_MAX_JOBS];
  int started;
};

/* One kernel through its toolchain's entry (toolchain.h): source, cache, compile. */
static void run_job(hkc_compile_pool_t *pool, hkc_compile_item_t *job) {
  hkc_kernel_out_t *k = job->kernel;
  const hkc_toolchain_t *tc = hkc_toolchain_for_arch(job->arch);
  job->rc = -1;
  if (!tc || !tc->codegen_kernel) {
    job->result.log = hkc_strdup("no toolchain compiles this target's kernels one by one");
    return;
  }
  char *source = tc->codegen_kernel(job->arch, k);
  if (!source) {
    job->result.log = hkc_strdup("out of memory generating the kernel source");
    return;
  }
  k->source_hash = hkc_hash64(source, strlen(source));
  const hkc_cache_request_t request = {source, HKC_CACHE_SCHEME, job->target, tc->version()};
  const int got = pool->cache ? hkc_cache_get(pool->cache, &request, &job->result) : -1;
  if (got >= 0) {
    job->rc = 0;
    job->cached = got == 1 ? 2 : 1;
  } else {
    job->rc = tc->compile(source, k->name, job->target, &job->result);
    if (job->rc == 0 && pool->cache) hkc_cache_put(pool->cache, &request, &job->result);
  }
  free(source);
}

static void *worker(void *arg) {
  hkc_compile_pool_t *pool = arg;
  for (;;) {
    size_t i = atomic_fetch_add(&pool->next, 1);
    if (i >= pool->n_jobs) return NULL;
    hkc_compile_item_t *job = &pool->jobs[i];
    run_job(pool, job);
    hkc_reporter_item(pool->progress, job->phase, "%s%s", job->kernel->name,
                      job->rc != 0              ? " (failed)"
                      : job->cached == 2        ? " (shared cache)"
                      : job->cached             ? " (cached)"
                                                : "");
  }
}

static int default_jobs(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

hkc_compile_pool_t *hkc_compile_pool_start(hkc_compile_item_t *items, size_t n, int jobs, int no_cache,
                                           const char *cache_dir, hkc_reporter_t *progress) {
  hkc_compile_pool_t *pool = calloc(1, sizeof *pool);
  if (!pool) return NULL;
  pool->jobs = items;
  pool->n_jobs = n;
  pool->progress = progress;
  atomic_init(&pool->next, 0);
  if (n && !no_cache) {
    pool->cache = hkc_cache_open(cache_dir); /* NULL: it warned why */
    hkc_cache_set_verbose(pool->cache, hkc_reporter_mode(progress) == HKC_PROGRESS_VERBOSE);
  }
  int want = jobs > 0 ? jobs : default_jobs();
  if (want > HKC_MAX_JOBS) want = HKC_MAX_JOBS;
  if ((size_t)want > n) want = (int)n;
  for (; pool->started < want; pool->started++)
    if (pthread_create(&pool->threads[pool->started], NULL, worker, pool) != 0) break;
  return pool;
}

int hkc_compile_pool_finish(hkc_compile_pool_t *pool) {
  if (!pool) return 0;
  if (pool->n_jobs && pool->started == 0) worker(pool); /* no threads: compile here */
  for (int i = 0; i < pool->started; i++) pthread_join(pool->threads[i], NULL);
  hkc_cache_close(pool->cache);
  const int threads = pool->n_jobs ? (pool->started ? pool->started : 1) : 0;
  free(pool);
  return threads;
}

size_t hkc_compile_gpu_items(hkc_compile_item_t *items, size_t n, int jobs, int no_cache, const char *cache_dir,
                             hkc_reporter_t *progress, int *out_threads) {
  hkc_compile_pool_t *pool = hkc_compile_pool_start(items, n, jobs, no_cache, cache_dir, progress);
  if (out_threads) *out_threads = 0;
  if (!pool) { /* out of memory: every item fails with a log saying so */
    for (size_t i = 0; i < n; i++) {
      items[i].rc = -1;
      if (!items[i].result.log) items[i].result.log = hkc_strdup("out of memory starting the compile pool");
      hkc_reporter_item(progress, items[i].phase, "%s (failed)", items[i].kernel->name);
    }
    return n;
  }
  const int threads = hkc_compile_pool_finish(pool);
  if (out_threads) *out_threads = threads;
  size_t failed = 0;
  for (size_t i = 0; i < n; i++) failed += items[i].rc != 0;
  return failed;
}
