/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_host.c -- runs host targets: the code object is an ELF shared object for
 * the CPU named in the target ("host-x86_64"), loaded from memory.
 *
 * Kernel ABI (fixed contract with hkc's host code generator):
 *   void NAME(void *const *args, uint32_t block_begin, uint32_t block_end);
 * args[i] points at argument i's value (a void* for tensors and NULL args, an int64_t,
 * a float); the kernel processes blocks [block_begin, block_end) of grid.x.
 * Launches run in stored order. A launch's blocks are shared out in chunks (4 per thread, or
 * the kernel's optional KERNEL__chunks) between the calling thread and the session's worker
 * threads (hk_session_options_t.host_threads, default: the online CPUs); the next launch
 * starts when every block of this one is done. Blocks are
 * independent, so results do not depend on the number of threads.
 *
 * BLAS: where OpenBLAS is installed (libopenblas.so.0, dlopen'ed once per process, never
 * linked), a session (unless options.host_blas) hands the code object a table of its entry
 * points through the object's optional export hk_host_set_blas, on every thread that runs
 * its launches; the f32 GEMM kernels then take their products from sgemm, each thread over
 * the rows of its blocks, with OpenBLAS itself single-threaded. Objects without the export
 * (built before it) and sessions without OpenBLAS run the C loops. The C loops' results do not
 * depend on the thread count; through OpenBLAS, whose kernels follow the shape of each call (a
 * thread's rows), the last bits of the sums may.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "image_internal.h"
#include "host_group_internal.h"
#include "status_internal.h"
#include "util_internal.h"

#if defined(__x86_64__)
#define HK_HOST_ARCH "x86_64"
#elif defined(__aarch64__)
#define HK_HOST_ARCH "aarch64"
#else
#define HK_HOST_ARCH "unknown"
#endif
#define HK_HOST_TARGET "host-" HK_HOST_ARCH

/* Intermediates get GPU-like alignment, so vectorized host kernels may assume it. */
#define HK_HOST_WORKSPACE_ALIGN 256u

typedef void (*hk_host_kernel_fn)(void *const *args, uint32_t block_begin, uint32_t block_end);

/* The table a code object receives (templates/host/prelude.h declares the same layout; it
 * grows at its end, struct_size saying how far it is filled). */
typedef struct hk_host_blas {
  uint32_t struct_size;
  uint32_t reserved;
  void (*sgemm)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc); /* cblas_sgemm */
} hk_host_blas_t;
typedef void (*hk_host_set_blas_fn)(const hk_host_blas_t *blas);

typedef struct host_module {
  hk_module_t base;
  void *dl;
  int fd;                 /* the memfd the object was loaded from, open while it is loaded, else -1 */
  hk_host_kernel_fn *fns; /* base.kernel_count entries */
  uint8_t *chunks;        /* per kernel: chunks per thread its launches are cut into */
  const char *isa;        /* the functions in fns: "avx2" (the variants) or "baseline" */
  hk_host_set_blas_fn set_blas; /* the object's hk_host_set_blas, NULL when it has none */
} host_module_t;

/* ---- OpenBLAS, bound at run time --------------------------------------------------------------- */
#define HK_OPENBLAS_LIB "libopenblas.so.0"
#define HK_OPENBLAS_PACKAGE "libopenblas0-pthread"

/* (required, return type, name, parameters) of each symbol used. */
#define HK_OPENBLAS_SYMBOLS(X)                                                                              \
  X(1, void, cblas_sgemm,                                                                                 \
    (int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *, int))   \
  X(1, void, openblas_set_num_threads, (int))                                                             \
  X(0, char *, openblas_get_config, (void))

static struct {
  pthread_once_t once;
#define HK_OPENBLAS_MEMBER(req, ret, name, params) ret(*name) params;
  HK_OPENBLAS_SYMBOLS(HK_OPENBLAS_MEMBER)
#undef HK_OPENBLAS_MEMBER
  hk_host_blas_t table;
  const char *about; /* hk_session_host_blas: what runs, "" when the library is unusable */
  const char *why;   /* why not, "" when usable */
  char about_buf[192], why_buf[320];
} g_openblas = {.once = PTHREAD_ONCE_INIT};

/* pthread_once body: dlopens OpenBLAS and resolves its symbols into g_openblas (the library
 * stays loaded for the life of the process: its threads may outlive any session). */
static void openblas_load(void) {
  g_openblas.about = "";
  g_openblas.why = g_openblas.why_buf;
  void *dl = dlopen(HK_OPENBLAS_LIB, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    snprintf(g_openblas.why_buf, sizeof g_openblas.why_buf,
             "%s not found (Debian/Ubuntu package %s): the host GEMMs run their C loops", HK_OPENBLAS_LIB,
             HK_OPENBLAS_PACKAGE);
    return;
  }
  void *sym;
#define HK_OPENBLAS_RESOLVE(req, ret, name, params)                                                      \
  sym = dlsym(dl, #name);                                                                              \
  if (!sym && (req)) {                                                                                 \
    snprintf(g_openblas.why_buf, sizeof g_openblas.why_buf, "%s lacks %s: the host GEMMs run their C loops", \
             HK_OPENBLAS_LIB, #name);                                                                  \
    dlclose(dl);                                                                                       \
    return;                                                                                            \
  }                                                                                                    \
  memcpy(&g_openblas.name, &sym, sizeof sym);
  HK_OPENBLAS_SYMBOLS(HK_OPENBLAS_RESOLVE)
#undef HK_OPENBLAS_RESOLVE
  const char *config = g_openblas.openblas_get_config ? g_openblas.openblas_get_config() : NULL;
  snprintf(g_openblas.about_buf, sizeof g_openblas.about_buf, "%s (%s)", config && config[0] ? config : "OpenBLAS",
           HK_OPENBLAS_LIB);
  g_openblas.table = (hk_host_blas_t){.struct_size = sizeof(hk_host_blas_t), .sgemm = g_openblas.cblas_sgemm};
  g_openblas.about = g_openblas.about_buf;
  g_openblas.why = "";
}

/* Most threads a host session starts: beyond this, launches of layer-sized graphs have
 * too few blocks per thread to gain. */
/* Chunks per thread a launch is cut into, so uneven blocks (causal attention) balance; a kernel
 * may ask for another number through the optional export KERNEL__chunks (a const uint32_t):
 * hkc's 16-bit and normed GEMMs ask for 1, as each chunk of theirs converts its operands once
 * (templates/host/gemm.c). */
#define HK_HOST_CHUNKS_PER_THREAD 4
#define HK_HOST_SYMBOL_MAX 256 /* KERNEL__chunks: longer names take the default */
#define HK_HOST_VARIANT_SUFFIX "__avx2" /* hkc's HKC_HOST_VARIANT_SUFFIX */

/* Whether this CPU (and its OS: the AVX state saved) runs AVX2 and FMA code. */
static int host_cpu_avx2(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return 0;
#endif
}

/* Whether the object has the AVX2 variant of every kernel of target t. */
static int host_has_variants(void *dl, const hk_pack_view_t *view, const hk_target_rec_t *t) {
  for (uint32_t k = 0; k < t->kernel_count; k++) {
    char vname[HK_HOST_SYMBOL_MAX];
    const char *kname = hk_pack_string(view, view->kernels[t->kernel_first + k].name);
    if (hk_op_collective(view->kernels[t->kernel_first + k].op)) continue;
    if (snprintf(vname, sizeof vname, "%s" HK_HOST_VARIANT_SUFFIX, kname) >= (int)sizeof vname || !dlsym(dl, vname))
      return 0;
  }
  return t->kernel_count > 0;
}

/* Worker threads of one session. The caller publishes a launch under `lock` (a new
 * generation), works on it too, and waits until `busy` helpers have finished it. */
typedef struct host_pool {
  pthread_t threads[HK_HOST_MAX_THREADS];
  hk_host_set_blas_fn set_blas; /* set before the threads start; each helper passes it blas once */
  const hk_host_blas_t *blas;
  uint32_t n_threads;        /* helpers, not counting the caller */
  pthread_mutex_t lock;
  pthread_cond_t start, finished;
  uint64_t generation;
  int quit;
  uint32_t busy;
  hk_host_kernel_fn fn;
  void *const *args;
  uint32_t end, chunk;
  atomic_uint next;
} host_pool_t;

typedef struct host_session {
  hk_backend_session_t base;
  void *workspace_raw; /* unaligned allocation behind base.workspace */
  host_pool_t *pool;   /* NULL: single-threaded */
  const hk_host_blas_t *blas; /* what the object's threads get; NULL: the C loops */
  hk_host_group_t *group;     /* tensor-parallel packs: the ranks' communicator (session.c checked it) */
  uint32_t rank;
} host_session_t;

static void pool_work(host_pool_t *p) {
  for (;;) {
    uint32_t b = atomic_fetch_add(&p->next, p->chunk);
    if (b >= p->end) return;
    p->fn(p->args, b, p->end - b < p->chunk ? p->end : b + p->chunk);
  }
}

static void *pool_main(void *arg) {
  host_pool_t *p = arg;
  uint64_t seen = 0;
  if (p->set_blas) p->set_blas(p->blas); /* this thread's table for the session's life */
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->quit && p->generation == seen) pthread_cond_wait(&p->start, &p->lock);
    if (p->quit) break;
    seen = p->generation;
    pthread_mutex_unlock(&p->lock);
    pool_work(p);
    pthread_mutex_lock(&p->lock);
    if (--p->busy == 0) pthread_cond_signal(&p->finished);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

static void pool_stop(host_pool_t *p, const hk_allocator_t *a) {
  if (!p) return;
  pthread_mutex_lock(&p->lock);
  p->quit = 1;
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->lock);
  for (uint32_t i = 0; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->start);
  pthread_cond_destroy(&p->finished);
  pthread_mutex_destroy(&p->lock);
  hk_free(a, p);
}

/* Threads to use: the session's host_threads when set (1 = no pool), else the online CPUs. */
static uint32_t host_thread_count(uint32_t requested) {
  long n = requested ? (long)requested : sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1;
  if (n > HK_HOST_MAX_THREADS) n = HK_HOST_MAX_THREADS;
  return (uint32_t)n;
}

/* A pool of n-1 helpers in *out, each of which passes blas to set_blas (when not NULL) as it
 * starts; *out stays NULL when n is 1 or no thread can be started (the session then runs
 * single-threaded, which is always correct). Errors: OUT_OF_MEMORY from the allocator. */
static hk_status_t pool_start(uint32_t n, const hk_allocator_t *a, hk_host_set_blas_fn set_blas,
                              const hk_host_blas_t *blas, host_pool_t **out) {
  *out = NULL;
  if (n <= 1) return HK_OK;
  host_pool_t *p = hk_calloc(a, 1, sizeof *p);
  HK_FAIL_IF(!p, HK_STATUS_OUT_OF_MEMORY, "out of memory creating the host session's thread pool");
  p->set_blas = set_blas;
  p->blas = blas;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->start, NULL);
  pthread_cond_init(&p->finished, NULL);
  atomic_init(&p->next, 0);
  for (uint32_t i = 0; i + 1 < n; i++) {
    if (pthread_create(&p->threads[i], NULL, pool_main, p) != 0) break;
    p->n_threads++;
  }
  if (p->n_threads == 0) {
    pool_stop(p, a);
    return HK_OK;
  }
  *out = p;
  return HK_OK;
}

/* Runs blocks [0, grid) of one launch on the pool and the calling thread. */
static void pool_run(host_pool_t *p, hk_host_kernel_fn fn, void *const *args, uint32_t grid, uint32_t chunks) {
  uint32_t pieces = (p->n_threads + 1) * chunks;
  pthread_mutex_lock(&p->lock);
  p->fn = fn;
  p->args = args;
  p->end = grid;
  p->chunk = grid / pieces ? grid / pieces : 1;
  atomic_store(&p->next, 0);
  p->busy = p->n_threads;
  p->generation++;
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->lock);
  pool_work(p);
  pthread_mutex_lock(&p->lock);
  while (p->busy) pthread_cond_wait(&p->finished, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

static bool host_available(void) { return true; }

static int host_runs_target(const char *name, const char *features, int device) {
  (void)device;
  return strcmp(name, HK_HOST_TARGET) == 0 && features[0] == '\0';
}

static const char *host_unavailable_reason(void) { return ""; }

static void host_describe(char *out, size_t size) { snprintf(out, size, "%s", HK_HOST_TARGET); }

static int write_all(int fd, const void *data, size_t size) {
  const char *p = data;
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    size -= (size_t)n;
  }
  return 0;
}

/* dlopen()s the object from memory: an anonymous memfd, else a temp file unlinked
 * right after dlopen. The memfd stays open (*out_fd) while the object is loaded: the
 * dynamic loader recognises objects by path, and "/proc/self/fd/N" of a closed fd would
 * be reused by the next pack's object, which dlopen would then take for the first one. */
static hk_status_t open_object(const char *target_name, const void *code, size_t size, void **out_dl, int *out_fd) {
  char path[64];
  int fd = memfd_create("hk-host-code", MFD_CLOEXEC);
  char tmp[4096] = "";
  if (fd < 0) {
    /* only where memfd_create is missing (Linux < 3.17); libhkrt reads no environment */
    snprintf(tmp, sizeof tmp, "%s/hk-host-code.XXXXXX", P_tmpdir);
    fd = mkstemp(tmp);
    HK_FAIL_IF(fd < 0, HK_STATUS_IO, "target %s: cannot create a file for the code object: %s", target_name,
               hk_errno_text(errno));
  }
  if (write_all(fd, code, size) != 0) {
    int e = errno;
    close(fd);
    if (tmp[0]) unlink(tmp);
    return HK_ERROR(HK_STATUS_IO, "target %s: cannot write the code object: %s", target_name, hk_errno_text(e));
  }
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  void *dl = dlopen(tmp[0] ? tmp : path, RTLD_NOW | RTLD_LOCAL);
  const char *err = dl ? NULL : dlerror();
  if (tmp[0] || !dl) close(fd);
  else *out_fd = fd;
  if (tmp[0]) unlink(tmp);
  HK_FAIL_IF(!dl, HK_STATUS_CORRUPT, "target %s: the code object does not load: %s", target_name,
             err ? err : "unknown dlopen error");
  *out_dl = dl;
  return HK_OK;
}

/* What can be checked before the dynamic loader reads the object, which trusts its headers
 * (a truncated object crashed inside it): a complete shared object for this machine that
 * exports every kernel of the target as a function. */
static hk_status_t check_object(const hk_pack_view_t *view, const hk_target_rec_t *t, const void *code,
                                size_t code_size) {
  const char *tname = hk_pack_string(view, t->name), *why;
  HK_FAIL_IF(!hk_elf_image_ok(code, code_size, hk_elf_host_machine(HK_HOST_TARGET), HK_ET_DYN, &why),
             HK_STATUS_CORRUPT, "target %s: the code object is not a shared object for %s: %s", tname, HK_HOST_ARCH,
             why);
  for (uint32_t k = 0; k < t->kernel_count; k++) {
    if (hk_op_collective(view->kernels[t->kernel_first + k].op)) continue; /* no code */
    const char *kname = hk_pack_string(view, view->kernels[t->kernel_first + k].name);
    HK_FAIL_IF(!hk_elf_defines_function(code, code_size, kname), HK_STATUS_CORRUPT,
               "target %s: kernel symbol \"%s\" is missing from the code object's dynamic symbols", tname, kname);
  }
  return HK_OK;
}

static void host_module_unload(hk_module_t *module) {
  if (!module) return;
  host_module_t *m = (host_module_t *)module;
  if (m->dl) dlclose(m->dl);
  if (m->fd >= 0) close(m->fd);
  hk_free(module->allocator, m->fns);
  hk_free(module->allocator, m->chunks);
  hk_free(module->allocator, m);
}

static hk_status_t host_module_load(const hk_pack_view_t *view, uint32_t target, int device,
                                    const hk_allocator_t *allocator, const void *code, size_t code_size,
                                    hk_module_t **out_module) {
  (void)device;
  const hk_target_rec_t *t = &view->targets[target];
  const char *tname = hk_pack_string(view, t->name);
  host_module_t *m = hk_calloc(allocator, 1, sizeof *m);
  HK_FAIL_IF(!m, HK_STATUS_OUT_OF_MEMORY, "out of memory loading target %s", tname);
  m->base.backend = &hk_backend_host;
  m->base.allocator = allocator;
  m->base.target = target;
  m->base.kernel_count = t->kernel_count;
  m->fd = -1;
  m->fns = hk_calloc(allocator, t->kernel_count ? t->kernel_count : 1, sizeof *m->fns);
  m->chunks = hk_calloc(allocator, t->kernel_count ? t->kernel_count : 1, sizeof *m->chunks);
  hk_status_t st = HK_OK;
  if (!m->fns || !m->chunks) {
    st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory loading target %s", tname);
    goto fail;
  }
  st = check_object(view, t, code, code_size);
  if (st != HK_OK) goto fail;
  st = open_object(tname, code, code_size, &m->dl, &m->fd);
  if (st != HK_OK) goto fail;
  /* the AVX2 variants (hkc's HKC_HOST_VARIANT_SUFFIX) on a CPU that runs them, where the object
   * has one for every kernel; else the baseline functions */
  const int avx2 = host_cpu_avx2() && host_has_variants(m->dl, view, t);
  m->isa = avx2 ? "avx2" : "baseline";
  for (uint32_t k = 0; k < t->kernel_count; k++) {
    if (hk_op_collective(view->kernels[t->kernel_first + k].op)) continue; /* fns[k] stays NULL: never called */
    const char *kname = hk_pack_string(view, view->kernels[t->kernel_first + k].name);
    char vname[HK_HOST_SYMBOL_MAX];
    void *sym = avx2 && snprintf(vname, sizeof vname, "%s" HK_HOST_VARIANT_SUFFIX, kname) < (int)sizeof vname
                    ? dlsym(m->dl, vname)
                    : NULL;
    if (!sym) sym = dlsym(m->dl, kname);
    if (!sym) {
      st = HK_ERROR(HK_STATUS_CORRUPT, "target %s: kernel symbol \"%s\" is missing from the code object", tname,
                    kname);
      goto fail;
    }
    /* POSIX guarantees a data pointer from dlsym converts to a function pointer. */
    memcpy(&m->fns[k], &sym, sizeof sym);
    /* optional: KERNEL__chunks, the chunks per thread the kernel's launches want (1..64) */
    char cname[HK_HOST_SYMBOL_MAX];
    m->chunks[k] = HK_HOST_CHUNKS_PER_THREAD;
    if (snprintf(cname, sizeof cname, "%s__chunks", kname) < (int)sizeof cname) {
      const uint32_t *hint = (const uint32_t *)dlsym(m->dl, cname);
      if (hint && *hint >= 1 && *hint <= 64) m->chunks[k] = (uint8_t)*hint;
    }
  }
  void *set_blas = dlsym(m->dl, "hk_host_set_blas"); /* optional: objects built before it lack it */
  if (set_blas) memcpy(&m->set_blas, &set_blas, sizeof set_blas);
  *out_module = &m->base;
  return HK_OK;
fail:
  host_module_unload(&m->base);
  return st;
}

static void host_session_release(hk_backend_session_t *session) {
  if (!session) return;
  host_session_t *s = (host_session_t *)session;
  const hk_allocator_t *a = session->module->allocator;
  pool_stop(s->pool, a);
  hk_free(a, s->workspace_raw);
  hk_free(a, s);
}

static hk_status_t host_session_prepare(hk_module_t *module, const hk_session_options_t *options,
                                        uint64_t workspace_bytes, const hk_launch_desc_t *launches,
                                        uint32_t launch_count, hk_backend_session_t **out_session) {
  const hk_allocator_t *a = module->allocator;
  host_session_t *s = hk_calloc(a, 1, sizeof *s);
  HK_FAIL_IF(!s, HK_STATUS_OUT_OF_MEMORY, "out of memory creating a host session");
  s->base.backend = &hk_backend_host;
  s->base.module = module;
  s->base.launches = launches;
  s->base.launch_count = launch_count;
  s->base.workspace_bytes = workspace_bytes;
  s->group = options->comm;
  s->rank = options->tensor_rank;
  if (workspace_bytes > 0) {
    uint64_t total;
    if (!hk_add_u64(workspace_bytes, HK_HOST_WORKSPACE_ALIGN - 1, &total) || total > SIZE_MAX ||
        !(s->workspace_raw = hk_alloc(a, (size_t)total))) {
      hk_free(a, s);
      return HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory allocating a %llu-byte workspace",
                      (unsigned long long)workspace_bytes);
    }
    uintptr_t p = ((uintptr_t)s->workspace_raw + HK_HOST_WORKSPACE_ALIGN - 1) & ~(uintptr_t)(HK_HOST_WORKSPACE_ALIGN - 1);
    s->base.workspace = (void *)p;
  }
  const host_module_t *m = (const host_module_t *)module;
  s->base.host_isa = m->isa;
  s->base.host_blas = "";
  if (options->host_blas) {
    s->base.host_blas_reason = "the session's option host_blas is 1";
  } else if (!m->set_blas) {
    s->base.host_blas_reason = "the pack's host code predates BLAS binding (rebuild it with this hkc)";
  } else {
    pthread_once(&g_openblas.once, openblas_load);
    s->base.host_blas_reason = g_openblas.why;
    if (g_openblas.about[0]) {
      /* each of the session's threads calls sgemm on its own rows: OpenBLAS threads would
       * only compete with them */
      g_openblas.openblas_set_num_threads(1);
      s->blas = &g_openblas.table;
      s->base.host_blas = g_openblas.about;
    }
  }
  hk_status_t st = pool_start(host_thread_count(options->host_threads), a, m->set_blas, s->blas, &s->pool);
  if (st != HK_OK) {
    hk_free(a, s->workspace_raw);
    hk_free(a, s);
    return st;
  }
  *out_session = &s->base;
  return HK_OK;
}

/* A collective launch: its arguments (lower.h's layouts) through the session's host group. */
static hk_status_t host_collective(const host_session_t *s, const hk_launch_desc_t *l) {
  void *const *a = l->args; /* a[i] points at the argument's value */
  const void *in = *(void *const *)a[0];
  void *out = *(void *const *)a[1];
  if (l->collective == HK_OP_ALL_REDUCE)
    return hk_host_group_all_reduce(s->group, s->rank, l->dtype, in, out, (uint64_t)*(const int64_t *)a[2]);
  return hk_host_group_all_gather(s->group, s->rank, hk_dtype_bytes(l->dtype), in, out,
                                  (uint64_t)*(const int64_t *)a[2], (uint64_t)*(const int64_t *)a[3]);
}

/* Runs launch i of the session to completion (on the pool when it has blocks to share). Errors:
 * a collective's (DRIVER). */
static hk_status_t host_launch(hk_backend_session_t *session, uint32_t i) {
  const host_module_t *m = (const host_module_t *)session->module;
  host_pool_t *pool = ((host_session_t *)session)->pool;
  const hk_launch_desc_t *l = &session->launches[i];
  if (l->collective) return host_collective((const host_session_t *)session, l);
  if (pool && l->grid[0] > 1)
    pool_run(pool, m->fns[l->kernel], (void *const *)l->args, l->grid[0], m->chunks[l->kernel]);
  else
    m->fns[l->kernel]((void *const *)l->args, 0, l->grid[0]);
  return HK_OK;
}

/* Gives the calling thread the session's BLAS table (it may have run another session's). */
static void host_bind_blas(hk_backend_session_t *session) {
  const host_module_t *m = (const host_module_t *)session->module;
  if (m->set_blas) m->set_blas(((host_session_t *)session)->blas);
}

static hk_status_t host_run(hk_backend_session_t *session, void *stream) {
  (void)stream;
  host_bind_blas(session);
  for (uint32_t i = 0; i < session->launch_count; i++) HK_RETURN_IF_ERROR(host_launch(session, i));
  return HK_OK;
}

static double host_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* Launches run synchronously here: the monotonic clock around each one times it alone. */
static hk_status_t host_profile(hk_backend_session_t *session, void *stream, uint32_t passes, double *out_us) {
  (void)stream;
  host_bind_blas(session);
  for (uint32_t p = 0; p < passes; p++)
    for (uint32_t i = 0; i < session->launch_count; i++) {
      double t0 = host_now_us();
      HK_RETURN_IF_ERROR(host_launch(session, i));
      out_us[(size_t)i * passes + p] = host_now_us() - t0;
    }
  return HK_OK;
}

static hk_status_t host_mem_alloc(hk_module_t *module, size_t bytes, void **out_ptr) {
  (void)module;
  void *p = NULL;
  /* libc, not the pack allocator: these buffers belong to the application */
  if (posix_memalign(&p, HK_HOST_WORKSPACE_ALIGN, bytes ? bytes : 1) != 0)
    return HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory allocating %zu bytes", bytes);
  *out_ptr = p;
  return HK_OK;
}

static void host_mem_free(hk_module_t *module, void *ptr) {
  (void)module;
  free(ptr);
}

static hk_status_t host_mem_copy(hk_module_t *module, void *dst, const void *src, size_t bytes, hk_copy_kind_t kind) {
  (void)module;
  (void)kind;
  if (bytes) memmove(dst, src, bytes);
  return HK_OK;
}

static hk_status_t host_synchronize(hk_module_t *module, void *stream) {
  (void)module;
  (void)stream;
  return HK_OK; /* host runs are synchronous */
}

static hk_status_t host_copy_async(hk_module_t *module, void *dst, const void *src, size_t bytes, void *stream) {
  (void)module;
  (void)stream;
  if (bytes) memcpy(dst, src, bytes);
  return HK_OK;
}

static hk_status_t host_zero_async(hk_module_t *module, void *dst, size_t bytes, void *stream) {
  (void)module;
  (void)stream;
  if (bytes) memset(dst, 0, bytes);
  return HK_OK;
}

const hk_backend_t hk_backend_host = {
    .name = "host",
    .kind = HK_TARGET_HOST,
    .available = host_available,
    .runs_target = host_runs_target,
    .describe = host_describe,
    .unavailable_reason = host_unavailable_reason,
    .module_load = host_module_load,
    .module_unload = host_module_unload,
    .session_prepare = host_session_prepare,
    .collectives = true,
    .run = host_run,
    .session_release = host_session_release,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .mem_copy = host_mem_copy,
    .synchronize = host_synchronize,
    .profile = host_profile,
    .copy_async = host_copy_async,
    .zero_async = host_zero_async,
};
