/*
 * backend_cuda.c -- runs "sm_*" targets through the CUDA driver API, dlopen'ed from
 * libcuda.so.1 on first use (never linked; no CUDA header: see gpu_internal.h).
 *
 * A module is one target's cubins on one device: each distinct code range of the CODE
 * payload is loaded once (cuModuleLoadData) into the device's primary context, and every
 * kernel resolved (cuModuleGetFunction). A session allocates its workspace and builds ONE
 * CUDA graph of kernel nodes with the stored dependencies, instantiated once; run
 * refreshes every node's parameters (cuGraphExecKernelNodeSetParams) when a bind happened
 * since the last refresh, then launches the graph. Stream launches (cuLaunchKernel per
 * node, in stored order) replace the graph when HK_LAUNCH=stream is set or when the
 * driver lacks the graph API or fails to build or instantiate the graph. For a batch
 * between buckets the session enqueues the staging copies around that launch on the same
 * stream (cuMemsetD8Async, cuMemcpyDtoDAsync_v2: copy_async / zero_async).
 *
 * Contexts: every entry point makes the module's primary context current on the calling
 * thread (the runtime API does the same) and leaves it current.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gpu_internal.h"
#include "status_internal.h"
#include "util_internal.h"

#define CUDA_LIBRARY "libcuda.so.1"
#define CUDA_PACKAGE "the NVIDIA driver (libcuda1 / nvidia-driver, or the driver of your distribution)"
/* Devices whose properties are cached; more are ignored (no machine has more GPUs today). */
#define CUDA_MAX_DEVICES 64
#define CUDA_ERROR_INVALID_IMAGE 200
#define CUDA_ERROR_NO_BINARY_FOR_GPU 209

typedef struct cuda_device {
  int major, minor;
  char name[96];
} cuda_device_t;

/* The driver, probed once under `lock` (again after an override). */
static struct {
  pthread_mutex_t lock;
  bool probed, ok;
  char reason[512]; /* why !ok */
  void *dl;
  bool overridden;
  hk_cuda_symbols_t override;
  hk_cuda_symbols_t sym;
  int device_count;
  cuda_device_t devices[CUDA_MAX_DEVICES];
} g_cuda = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define CU g_cuda.sym

static const struct {
  const char *symbol, *alt;
  bool required;
  size_t offset;
} k_cuda_symbols[] = {
#define HK_CUDA_ENTRY(member, symbol, alt, required, ret, params) \
  {symbol, alt, required, offsetof(hk_cuda_symbols_t, member)},
    HK_CUDA_SYMBOLS(HK_CUDA_ENTRY)
#undef HK_CUDA_ENTRY
};

/* "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" (or numbers when the driver cannot say). */
static void cu_describe(hk_cu_result_t r, char *name, size_t name_size, char *desc, size_t desc_size) {
  const char *n = NULL, *d = NULL;
  if (CU.cuGetErrorName && CU.cuGetErrorName(r, &n) != HK_CUDA_SUCCESS) n = NULL;
  if (CU.cuGetErrorString && CU.cuGetErrorString(r, &d) != HK_CUDA_SUCCESS) d = NULL;
  if (n) snprintf(name, name_size, "%s", n);
  else snprintf(name, name_size, "CUDA error %d", r);
  snprintf(desc, desc_size, "%s", d ? d : "no description");
}

/* The check macro's body: HK_OK, or OUT_OF_MEMORY / DRIVER with
 * "cuXxx failed: CUDA_ERROR_NAME (description)". */
static hk_status_t cu_status(hk_cu_result_t r, const char *call, const char *file, int line) {
  if (r == HK_CUDA_SUCCESS) return HK_OK;
  char name[96], desc[256];
  cu_describe(r, name, sizeof name, desc, sizeof desc);
  return hk_error_set_at(r == HK_CUDA_ERROR_OUT_OF_MEMORY ? HK_STATUS_OUT_OF_MEMORY : HK_STATUS_DRIVER, file, line,
                         "%s failed: %s (%s)", call, name, desc);
}
#define CU_CHECK(fn, args) cu_status(CU.fn args, #fn, __FILE__, __LINE__)

static void cuda_probe_locked(void) {
  if (g_cuda.probed) return;
  g_cuda.probed = true;
  g_cuda.ok = false;
  g_cuda.device_count = 0;
  memset(&g_cuda.sym, 0, sizeof g_cuda.sym);
  if (g_cuda.overridden) {
    g_cuda.sym = g_cuda.override;
  } else {
    if (!g_cuda.dl) g_cuda.dl = dlopen(CUDA_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!g_cuda.dl) {
      const char *e = dlerror();
      snprintf(g_cuda.reason, sizeof g_cuda.reason, "%s not found (%s): install %s", CUDA_LIBRARY,
               e ? e : "dlopen failed", CUDA_PACKAGE);
      return;
    }
    for (size_t i = 0; i < sizeof k_cuda_symbols / sizeof k_cuda_symbols[0]; i++) {
      void *p = dlsym(g_cuda.dl, k_cuda_symbols[i].symbol);
      if (!p && k_cuda_symbols[i].alt) p = dlsym(g_cuda.dl, k_cuda_symbols[i].alt);
      if (!p && k_cuda_symbols[i].required) {
        snprintf(g_cuda.reason, sizeof g_cuda.reason, "%s lacks %s: the NVIDIA driver is too old; update %s",
                 CUDA_LIBRARY, k_cuda_symbols[i].symbol, CUDA_PACKAGE);
        return;
      }
      memcpy((char *)&g_cuda.sym + k_cuda_symbols[i].offset, &p, sizeof p);
    }
  }
  char name[96], desc[256];
  hk_cu_result_t r = CU.cuInit(0);
  if (r != HK_CUDA_SUCCESS) {
    cu_describe(r, name, sizeof name, desc, sizeof desc);
    snprintf(g_cuda.reason, sizeof g_cuda.reason, "no usable NVIDIA GPU: cuInit failed: %s (%s)", name, desc);
    return;
  }
  int count = 0;
  r = CU.cuDeviceGetCount(&count);
  if (r != HK_CUDA_SUCCESS || count <= 0) {
    if (r == HK_CUDA_SUCCESS) r = HK_CUDA_ERROR_NO_DEVICE;
    cu_describe(r, name, sizeof name, desc, sizeof desc);
    snprintf(g_cuda.reason, sizeof g_cuda.reason, "no NVIDIA GPU found: cuDeviceGetCount returned %s (%s)", name,
             desc);
    return;
  }
  if (count > CUDA_MAX_DEVICES) count = CUDA_MAX_DEVICES;
  for (int i = 0; i < count; i++) {
    cuda_device_t *d = &g_cuda.devices[i];
    hk_cu_device_t dev;
    memset(d, 0, sizeof *d);
    if (CU.cuDeviceGet(&dev, i) != HK_CUDA_SUCCESS ||
        CU.cuDeviceGetAttribute(&d->major, HK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) != HK_CUDA_SUCCESS ||
        CU.cuDeviceGetAttribute(&d->minor, HK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev) != HK_CUDA_SUCCESS)
      d->major = d->minor = -1; /* runs nothing */
    if (CU.cuDeviceGetName(d->name, (int)sizeof d->name, dev) != HK_CUDA_SUCCESS) snprintf(d->name, sizeof d->name, "?");
  }
  g_cuda.device_count = count;
  g_cuda.ok = true;
}

static bool cuda_available(void) {
  pthread_mutex_lock(&g_cuda.lock);
  cuda_probe_locked();
  bool ok = g_cuda.ok;
  pthread_mutex_unlock(&g_cuda.lock);
  return ok;
}

static const char *cuda_unavailable_reason(void) { return cuda_available() ? "" : g_cuda.reason; }

const hk_cuda_symbols_t *hk_cuda_symbols(void) { return cuda_available() ? &g_cuda.sym : NULL; }

void hk_cuda_override_symbols(const hk_cuda_symbols_t *table) {
  pthread_mutex_lock(&g_cuda.lock);
  g_cuda.overridden = table != NULL;
  if (table) g_cuda.override = *table;
  g_cuda.probed = false;
  pthread_mutex_unlock(&g_cuda.lock);
}

int hk_cuda_target_rank(const char *name, const char *features, int major, int minor) {
  if (strncmp(name, "sm_", 3) != 0 || features[0] != '\0') return 0;
  const char *p = name + 3;
  int value = 0, digits = 0;
  for (; *p >= '0' && *p <= '9' && digits < 4; p++, digits++) value = value * 10 + (*p - '0');
  if (digits < 2) return 0;
  char suffix = *p;
  if (suffix != '\0' && (p[1] != '\0' || (suffix != 'a' && suffix != 'f'))) return 0;
  int tmajor = value / 10, tminor = value % 10;
  if (tmajor != major) return 0;
  if (suffix == 'a') return tminor == minor ? 3 : 0;
  if (tminor > minor) return 0;
  return tminor == minor ? 2 : 1;
}

static int cuda_runs_target(const char *name, const char *features, int device) {
  if (!cuda_available() || device < 0 || device >= g_cuda.device_count) return 0;
  const cuda_device_t *d = &g_cuda.devices[device];
  return hk_cuda_target_rank(name, features, d->major, d->minor);
}

/* "sm_90, sm_90a on device 0 (NVIDIA H200)"; for minor > 0: "sm_80..sm_86, sm_86a ...". */
static void cuda_describe(char *out, size_t size) {
  out[0] = '\0';
  if (!cuda_available()) return;
  size_t used = 0;
  for (int i = 0; i < g_cuda.device_count && used + 1 < size; i++) {
    const cuda_device_t *d = &g_cuda.devices[i];
    int n;
    if (d->minor > 0)
      n = snprintf(out + used, size - used, "%ssm_%d0..sm_%d%d, sm_%d%da on device %d (%s)", i ? ", " : "", d->major,
                   d->major, d->minor, d->major, d->minor, i, d->name);
    else
      n = snprintf(out + used, size - used, "%ssm_%d%d, sm_%d%da on device %d (%s)", i ? ", " : "", d->major,
                   d->minor, d->major, d->minor, i, d->name);
    if (n < 0) break;
    used += (size_t)n;
  }
}

/* ---- modules ------------------------------------------------------------------------------- */
typedef struct cuda_module {
  hk_module_t base;
  hk_cu_device_t dev;
  hk_cu_context_t ctx;          /* the device's primary context, retained; NULL before */
  hk_cu_module_t *objects;      /* one per distinct code range */
  uint32_t object_count;
  hk_cu_function_t *fns;        /* base.kernel_count entries */
} cuda_module_t;

/* Makes m's context current on this thread. */
static hk_status_t ctx_enter(const cuda_module_t *m) {
  hk_cu_context_t cur = NULL;
  if (CU.cuCtxGetCurrent(&cur) == HK_CUDA_SUCCESS && cur == m->ctx) return HK_OK;
  return CU_CHECK(cuCtxSetCurrent, (m->ctx));
}

static void cuda_module_unload(hk_module_t *module) {
  if (!module) return;
  cuda_module_t *m = (cuda_module_t *)module;
  if (m->ctx) {
    (void)ctx_enter(m);
    for (uint32_t i = 0; i < m->object_count; i++)
      if (m->objects[i]) (void)CU.cuModuleUnload(m->objects[i]);
    (void)CU.cuDevicePrimaryCtxRelease(m->dev);
  }
  hk_free(module->allocator, m->objects);
  hk_free(module->allocator, m->fns);
  hk_free(module->allocator, m);
}

/* Sort key for finding the distinct code ranges. */
typedef struct range_ref {
  uint64_t offset, size;
  uint32_t kernel; /* target-local */
} range_ref_t;

static int range_cmp(const void *a, const void *b) {
  const range_ref_t *x = a, *y = b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  return x->kernel < y->kernel ? -1 : x->kernel > y->kernel;
}

/* Loads every distinct code range once and resolves each kernel in its own object. */
static hk_status_t load_objects(cuda_module_t *m, const hk_pack_view_t *v, const hk_target_rec_t *t,
                                const char *tname, const uint8_t *code, range_ref_t *refs) {
  uint32_t n = t->kernel_count;
  for (uint32_t k = 0; k < n; k++) {
    const hk_kernel_rec_t *kr = &v->kernels[t->kernel_first + k];
    refs[k] = (range_ref_t){kr->code_offset, kr->code_size, k};
  }
  qsort(refs, n, sizeof *refs, range_cmp);
  for (uint32_t i = 0; i < n; i++) {
    const range_ref_t *r = &refs[i];
    const char *kname = hk_pack_string(v, v->kernels[t->kernel_first + r->kernel].name);
    if (i == 0 || r->offset != refs[i - 1].offset || r->size != refs[i - 1].size) {
      const char *why;
      HK_FAIL_IF(!hk_gpu_image_ok(code + r->offset, (size_t)r->size, false, &why), HK_STATUS_CORRUPT,
                 "target %s: the code object of kernel %s (bytes [%llu, +%llu)) is invalid: %s", tname, kname,
                 (unsigned long long)r->offset, (unsigned long long)r->size, why);
      hk_cu_module_t obj = NULL;
      hk_cu_result_t cr = CU.cuModuleLoadData(&obj, code + r->offset);
      if (cr != HK_CUDA_SUCCESS) {
        hk_status_t st = cu_status(cr, "cuModuleLoadData", __FILE__, __LINE__);
        char prefix[HK_MAX_NAME_LEN * 2 + 64];
        snprintf(prefix, sizeof prefix, "target %s: loading the code object of kernel %s", tname, kname);
        hk_error_prefix(prefix);
        return (cr == CUDA_ERROR_INVALID_IMAGE || cr == CUDA_ERROR_NO_BINARY_FOR_GPU) ? HK_STATUS_CORRUPT : st;
      }
      m->objects[m->object_count++] = obj;
    }
    hk_cu_result_t fr = CU.cuModuleGetFunction(&m->fns[r->kernel], m->objects[m->object_count - 1], kname);
    if (fr != HK_CUDA_SUCCESS) {
      hk_status_t st = cu_status(fr, "cuModuleGetFunction", __FILE__, __LINE__);
      char prefix[HK_MAX_NAME_LEN * 2 + 64];
      snprintf(prefix, sizeof prefix, "target %s: kernel symbol \"%s\" is missing from its code object", tname, kname);
      hk_error_prefix(prefix);
      return fr == HK_CUDA_ERROR_NOT_FOUND ? HK_STATUS_CORRUPT : st;
    }
  }
  return HK_OK;
}

static hk_status_t cuda_module_load(const hk_pack_view_t *view, uint32_t target, int device,
                                    const hk_allocator_t *allocator, const void *code, size_t code_size,
                                    hk_module_t **out_module) {
  (void)code_size; /* every kernel's range lies inside it: verified */
  const hk_target_rec_t *t = &view->targets[target];
  const char *tname = hk_pack_string(view, t->name);
  HK_FAIL_IF(!cuda_available(), HK_STATUS_UNAVAILABLE, "target %s: %s", tname, g_cuda.reason);
  HK_FAIL_IF(device < 0 || device >= g_cuda.device_count, HK_STATUS_NOT_FOUND,
             "target %s: no CUDA device %d (this machine has %d)", tname, device, g_cuda.device_count);
  cuda_module_t *m = hk_calloc(allocator, 1, sizeof *m);
  HK_FAIL_IF(!m, HK_STATUS_OUT_OF_MEMORY, "out of memory loading target %s", tname);
  m->base.backend = &hk_backend_cuda;
  m->base.allocator = allocator;
  m->base.target = target;
  m->base.kernel_count = t->kernel_count;
  m->base.device = device;
  size_t n = t->kernel_count ? t->kernel_count : 1;
  m->fns = hk_calloc(allocator, n, sizeof *m->fns);
  m->objects = hk_calloc(allocator, n, sizeof *m->objects);
  range_ref_t *refs = hk_calloc(allocator, n, sizeof *refs);
  hk_status_t st = HK_OK;
  if (!m->fns || !m->objects || !refs) {
    st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory loading target %s", tname);
    goto done;
  }
  st = CU_CHECK(cuDeviceGet, (&m->dev, device));
  if (st == HK_OK) st = CU_CHECK(cuDevicePrimaryCtxRetain, (&m->ctx, m->dev));
  if (st == HK_OK) st = ctx_enter(m);
  if (st == HK_OK) st = load_objects(m, view, t, tname, code, refs);
done:
  hk_free(allocator, refs);
  if (st != HK_OK) {
    cuda_module_unload(&m->base);
    return st;
  }
  *out_module = &m->base;
  return HK_OK;
}

/* ---- sessions -------------------------------------------------------------------------- */
typedef struct cuda_session {
  hk_backend_session_t base;
  hk_cu_deviceptr_t workspace;
  hk_cu_graph_t graph;           /* NULL: stream launches */
  hk_cu_graph_exec_t exec;
  hk_cu_graph_node_t *nodes;      /* launch_count entries */
  bool refreshed;          /* node params hold the slot values of bind generation `generation` */
  uint64_t generation;
} cuda_session_t;

static void node_params(const cuda_module_t *m, const hk_launch_desc_t *l, hk_cu_kernel_node_params_v2_t *p) {
  memset(p, 0, sizeof *p);
  p->func = m->fns[l->kernel];
  p->gridDimX = l->grid[0];
  p->gridDimY = l->grid[1];
  p->gridDimZ = l->grid[2];
  p->blockDimX = l->block[0];
  p->blockDimY = l->block[1];
  p->blockDimZ = l->block[2];
  p->sharedMemBytes = l->shared_bytes;
  p->kernelParams = l->args;
}

/* The v1 layout is the v2 layout's prefix. */
static void node_params_v1(const hk_cu_kernel_node_params_v2_t *p2, hk_cu_kernel_node_params_v1_t *p1) {
  memcpy(p1, p2, sizeof *p1);
}

static bool graph_api_present(void) {
  return CU.cuGraphCreate && (CU.cuGraphAddKernelNode_v2 || CU.cuGraphAddKernelNode) &&
         (CU.cuGraphInstantiateWithFlags || CU.cuGraphInstantiate_v2) && CU.cuGraphLaunch &&
         (CU.cuGraphExecKernelNodeSetParams_v2 || CU.cuGraphExecKernelNodeSetParams) && CU.cuGraphExecDestroy &&
         CU.cuGraphDestroy;
}

static void destroy_graph(cuda_session_t *s) {
  if (s->exec) (void)CU.cuGraphExecDestroy(s->exec);
  if (s->graph) (void)CU.cuGraphDestroy(s->graph);
  s->exec = NULL;
  s->graph = NULL;
}

/* Builds and instantiates the graph: one kernel node per launch, edges from deps. */
static hk_status_t build_graph(cuda_session_t *s, const hk_allocator_t *a) {
  const cuda_module_t *m = (const cuda_module_t *)s->base.module;
  uint32_t max_deps = 0;
  for (uint32_t i = 0; i < s->base.launch_count; i++)
    if (s->base.launches[i].dep_count > max_deps) max_deps = s->base.launches[i].dep_count;
  hk_cu_graph_node_t *deps = hk_calloc(a, max_deps ? max_deps : 1, sizeof *deps);
  HK_FAIL_IF(!deps, HK_STATUS_OUT_OF_MEMORY, "out of memory building a CUDA graph");
  hk_status_t st = CU_CHECK(cuGraphCreate, (&s->graph, 0));
  for (uint32_t i = 0; st == HK_OK && i < s->base.launch_count; i++) {
    const hk_launch_desc_t *l = &s->base.launches[i];
    for (uint32_t d = 0; d < l->dep_count; d++) deps[d] = s->nodes[l->deps[d]]; /* < i: verified */
    hk_cu_kernel_node_params_v2_t p;
    node_params(m, l, &p);
    if (CU.cuGraphAddKernelNode_v2) {
      st = CU_CHECK(cuGraphAddKernelNode_v2, (&s->nodes[i], s->graph, deps, l->dep_count, &p));
    } else {
      hk_cu_kernel_node_params_v1_t p1;
      node_params_v1(&p, &p1);
      st = CU_CHECK(cuGraphAddKernelNode, (&s->nodes[i], s->graph, deps, l->dep_count, &p1));
    }
  }
  hk_free(a, deps);
  if (st == HK_OK) {
    if (CU.cuGraphInstantiateWithFlags) {
      st = CU_CHECK(cuGraphInstantiateWithFlags, (&s->exec, s->graph, 0));
    } else {
      char log[256] = "";
      st = CU_CHECK(cuGraphInstantiate_v2, (&s->exec, s->graph, NULL, log, sizeof log));
    }
  }
  if (st != HK_OK) destroy_graph(s);
  return st;
}

static void cuda_session_release(hk_backend_session_t *session) {
  if (!session) return;
  cuda_session_t *s = (cuda_session_t *)session;
  const hk_allocator_t *a = session->module->allocator;
  (void)ctx_enter((const cuda_module_t *)session->module);
  destroy_graph(s);
  if (s->workspace) (void)CU.cuMemFree(s->workspace);
  hk_free(a, s->nodes);
  hk_free(a, s);
}

static bool stream_launch_requested(void) {
  const char *e = getenv("HK_LAUNCH");
  return e && strcmp(e, "stream") == 0;
}

static hk_status_t cuda_session_prepare(hk_module_t *module, uint64_t workspace_bytes,
                                        const hk_launch_desc_t *launches, uint32_t launch_count,
                                        hk_backend_session_t **out_session) {
  const hk_allocator_t *a = module->allocator;
  cuda_module_t *m = (cuda_module_t *)module;
  HK_RETURN_IF_ERROR(ctx_enter(m));
  cuda_session_t *s = hk_calloc(a, 1, sizeof *s);
  HK_FAIL_IF(!s, HK_STATUS_OUT_OF_MEMORY, "out of memory creating a CUDA session");
  s->base.backend = &hk_backend_cuda;
  s->base.module = module;
  s->base.launches = launches;
  s->base.launch_count = launch_count;
  s->base.workspace_bytes = workspace_bytes;
  hk_status_t st = HK_OK;
  /* Kernels launched with more than 48 KiB of dynamic shared memory must opt in. */
  for (uint32_t i = 0; i < launch_count && st == HK_OK; i++)
    if (launches[i].shared_bytes > HK_CU_DEFAULT_DYNAMIC_SHARED) {
      if (!CU.cuFuncSetAttribute)
        st = HK_ERROR(HK_STATUS_UNAVAILABLE, "this CUDA driver lacks cuFuncSetAttribute, needed for %u bytes of "
                      "dynamic shared memory", launches[i].shared_bytes);
      else
        st = CU_CHECK(cuFuncSetAttribute, (m->fns[launches[i].kernel], HK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           (int)launches[i].shared_bytes));
    }
  if (st != HK_OK) {
    hk_free(a, s);
    return st;
  }
  if (workspace_bytes > SIZE_MAX) {
    st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "a %llu-byte workspace does not fit in size_t",
                  (unsigned long long)workspace_bytes);
  } else if (workspace_bytes > 0) {
    st = CU_CHECK(cuMemAlloc, (&s->workspace, (size_t)workspace_bytes));
    if (st != HK_OK) {
      char prefix[96];
      snprintf(prefix, sizeof prefix, "allocating a %llu-byte workspace", (unsigned long long)workspace_bytes);
      hk_error_prefix(prefix);
    }
    s->base.workspace = (void *)(uintptr_t)s->workspace;
  }
  if (st == HK_OK && !stream_launch_requested() && graph_api_present() && launch_count > 0) {
    s->nodes = hk_calloc(a, launch_count, sizeof *s->nodes);
    if (!s->nodes) st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory creating a CUDA session");
    else if (build_graph(s, a) != HK_OK) hk_error_clear(); /* not fatal: launch on the stream instead */
  }
  if (st != HK_OK) {
    cuda_session_release(&s->base);
    return st;
  }
  *out_session = &s->base;
  return HK_OK;
}

static hk_status_t cuda_run(hk_backend_session_t *session, void *stream) {
  cuda_session_t *s = (cuda_session_t *)session;
  const cuda_module_t *m = (const cuda_module_t *)session->module;
  HK_RETURN_IF_ERROR(ctx_enter(m));
  if (s->graph) {
    if (!s->refreshed || s->generation != session->bind_generation) {
      /* The args arrays point at the session's slots: re-reading them picks up new bindings. */
      s->refreshed = false;
      for (uint32_t i = 0; i < session->launch_count; i++) {
        hk_cu_kernel_node_params_v2_t p;
        node_params(m, &session->launches[i], &p);
        if (CU.cuGraphExecKernelNodeSetParams_v2) {
          HK_RETURN_IF_ERROR(CU_CHECK(cuGraphExecKernelNodeSetParams_v2, (s->exec, s->nodes[i], &p)));
        } else {
          hk_cu_kernel_node_params_v1_t p1;
          node_params_v1(&p, &p1);
          HK_RETURN_IF_ERROR(CU_CHECK(cuGraphExecKernelNodeSetParams, (s->exec, s->nodes[i], &p1)));
        }
      }
      s->refreshed = true;
      s->generation = session->bind_generation;
    }
    return CU_CHECK(cuGraphLaunch, (s->exec, (hk_cu_stream_t)stream));
  }
  for (uint32_t i = 0; i < session->launch_count; i++) {
    const hk_launch_desc_t *l = &session->launches[i];
    HK_RETURN_IF_ERROR(CU_CHECK(cuLaunchKernel, (m->fns[l->kernel], l->grid[0], l->grid[1], l->grid[2], l->block[0],
                                                 l->block[1], l->block[2], l->shared_bytes, (hk_cu_stream_t)stream, l->args,
                                                 NULL)));
  }
  return HK_OK;
}

/* ---- profiling ------------------------------------------------------------------------------ */
/* Each launch goes to the stream on its own (never through the graph) between two events;
 * one synchronization per pass, then the elapsed times of that pass are read. */
static hk_status_t cuda_profile(hk_backend_session_t *session, void *stream, uint32_t passes, double *out_us) {
  const cuda_module_t *m = (const cuda_module_t *)session->module;
  const hk_allocator_t *a = session->module->allocator;
  HK_FAIL_IF(!CU.cuEventCreate || !CU.cuEventRecord || !CU.cuEventSynchronize || !CU.cuEventElapsedTime ||
                 !CU.cuEventDestroy,
             HK_STATUS_UNAVAILABLE, "this CUDA driver lacks the event API (cuEventCreate, cuEventRecord, "
             "cuEventSynchronize, cuEventElapsedTime, cuEventDestroy) that timing launches needs");
  uint32_t n = session->launch_count;
  if (n == 0) return HK_OK;
  HK_RETURN_IF_ERROR(ctx_enter(m));
  hk_cu_event_t *ev = hk_calloc(a, (size_t)n * 2, sizeof *ev);
  HK_FAIL_IF(!ev, HK_STATUS_OUT_OF_MEMORY, "out of memory creating %u timing events", n * 2);
  hk_status_t st = HK_OK;
  for (uint32_t i = 0; i < 2 * n && st == HK_OK; i++) st = CU_CHECK(cuEventCreate, (&ev[i], 0));
  hk_cu_stream_t cs = (hk_cu_stream_t)stream;
  for (uint32_t p = 0; p < passes && st == HK_OK; p++) {
    for (uint32_t i = 0; i < n && st == HK_OK; i++) {
      const hk_launch_desc_t *l = &session->launches[i];
      st = CU_CHECK(cuEventRecord, (ev[2 * i], cs));
      if (st == HK_OK)
        st = CU_CHECK(cuLaunchKernel, (m->fns[l->kernel], l->grid[0], l->grid[1], l->grid[2], l->block[0],
                                       l->block[1], l->block[2], l->shared_bytes, cs, l->args, NULL));
      if (st == HK_OK) st = CU_CHECK(cuEventRecord, (ev[2 * i + 1], cs));
    }
    if (st == HK_OK) st = CU_CHECK(cuEventSynchronize, (ev[2 * n - 1]));
    for (uint32_t i = 0; i < n && st == HK_OK; i++) {
      float ms = 0;
      st = CU_CHECK(cuEventElapsedTime, (&ms, ev[2 * i], ev[2 * i + 1]));
      out_us[(size_t)i * passes + p] = (double)ms * 1e3;
    }
  }
  for (uint32_t i = 0; i < 2 * n; i++)
    if (ev[i]) (void)CU.cuEventDestroy(ev[i]);
  hk_free(a, ev);
  return st;
}

/* ---- memory -------------------------------------------------------------------------------- */
static hk_status_t cuda_mem_alloc(hk_module_t *module, size_t bytes, void **out_ptr) {
  HK_RETURN_IF_ERROR(ctx_enter((const cuda_module_t *)module));
  hk_cu_deviceptr_t p = 0;
  HK_RETURN_IF_ERROR(CU_CHECK(cuMemAlloc, (&p, bytes ? bytes : 1)));
  *out_ptr = (void *)(uintptr_t)p;
  return HK_OK;
}

static void cuda_mem_free(hk_module_t *module, void *ptr) {
  if (ctx_enter((const cuda_module_t *)module) == HK_OK) (void)CU.cuMemFree((hk_cu_deviceptr_t)(uintptr_t)ptr);
}

static hk_status_t cuda_mem_copy(hk_module_t *module, void *dst, const void *src, size_t bytes, hk_copy_kind_t kind) {
  if (bytes == 0) return HK_OK;
  HK_RETURN_IF_ERROR(ctx_enter((const cuda_module_t *)module));
  switch (kind) {
  case HK_COPY_HOST_TO_DEVICE: return CU_CHECK(cuMemcpyHtoD, ((hk_cu_deviceptr_t)(uintptr_t)dst, src, bytes));
  case HK_COPY_DEVICE_TO_HOST: return CU_CHECK(cuMemcpyDtoH, (dst, (hk_cu_deviceptr_t)(uintptr_t)src, bytes));
  case HK_COPY_DEVICE_TO_DEVICE:
    return CU_CHECK(cuMemcpyDtoD, ((hk_cu_deviceptr_t)(uintptr_t)dst, (hk_cu_deviceptr_t)(uintptr_t)src, bytes));
  }
  return HK_ERROR(HK_STATUS_INVALID_ARGUMENT, "unknown copy kind %d", (int)kind);
}

static hk_status_t cuda_synchronize(hk_module_t *module, void *stream) {
  HK_RETURN_IF_ERROR(ctx_enter((const cuda_module_t *)module));
  if (stream) return CU_CHECK(cuStreamSynchronize, ((hk_cu_stream_t)stream));
  return CU_CHECK(cuCtxSynchronize, ());
}

static hk_status_t cuda_copy_async(hk_module_t *module, void *dst, const void *src, size_t bytes, void *stream) {
  if (bytes == 0) return HK_OK;
  HK_RETURN_IF_ERROR(ctx_enter((const cuda_module_t *)module));
  return CU_CHECK(cuMemcpyDtoDAsync, ((hk_cu_deviceptr_t)(uintptr_t)dst, (hk_cu_deviceptr_t)(uintptr_t)src, bytes,
                                      (hk_cu_stream_t)stream));
}

static hk_status_t cuda_zero_async(hk_module_t *module, void *dst, size_t bytes, void *stream) {
  if (bytes == 0) return HK_OK;
  HK_RETURN_IF_ERROR(ctx_enter((const cuda_module_t *)module));
  return CU_CHECK(cuMemsetD8Async, ((hk_cu_deviceptr_t)(uintptr_t)dst, 0, bytes, (hk_cu_stream_t)stream));
}

const hk_backend_t hk_backend_cuda = {
    .name = "cuda",
    .kind = HK_TARGET_CUDA,
    .available = cuda_available,
    .runs_target = cuda_runs_target,
    .describe = cuda_describe,
    .unavailable_reason = cuda_unavailable_reason,
    .module_load = cuda_module_load,
    .module_unload = cuda_module_unload,
    .session_prepare = cuda_session_prepare,
    .run = cuda_run,
    .session_release = cuda_session_release,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .mem_copy = cuda_mem_copy,
    .synchronize = cuda_synchronize,
    .profile = cuda_profile,
    .copy_async = cuda_copy_async,
    .zero_async = cuda_zero_async,
};
