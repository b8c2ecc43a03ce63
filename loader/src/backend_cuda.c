/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_cuda.c -- runs "sm_*" targets through the CUDA driver API, dlopen'ed from
 * libcuda.so.1 on first use (never linked; no CUDA header: see gpu_internal.h).
 *
 * This file keeps what is CUDA's own: loading the driver's symbols, finding the devices
 * and their compute capabilities, ranking sm_* targets, the primary context, and the
 * driver calls behind the GPU core's table (hk_gpu_ops_t, gpu_backend.h), among them the
 * packing of CUDA_KERNEL_NODE_PARAMS (v2 on CUDA 12+, else v1). Modules, sessions, graph
 * replay and its stream fallback, profiling and memory are the core's (gpu_backend.c).
 * Code objects are loaded with cuModuleLoadData, kernels launched with cuLaunchKernel,
 * graphs built with cuGraphAddKernelNode(_v2), padded runs' staging copies enqueued with
 * cuMemsetD8Async and cuMemcpyDtoDAsync_v2, TMA tensor maps (HK_ARG_TMAP) encoded with
 * cuTensorMapEncodeTiled (optional: CUDA 12.0+). Programmatic dependent launch (launches
 * marked pdl): stream launches through cuLaunchKernelEx with programmatic stream
 * serialization, graph edges through cuGraphAddDependencies_v2 with programmatic edge data
 * (both optional; without them such launches go the ordinary way).
 *
 * Contexts: every entry point makes the module's primary context current on the calling
 * thread (the runtime API does the same) and leaves it current.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gpu_backend.h"
#include "gpu_internal.h"
#include "image_internal.h"
#include "status_internal.h"
#include "util_internal.h"

static const char *const k_cuda_libraries[] = {"libcuda.so.1"};
#define CUDA_PACKAGE "the NVIDIA driver (libcuda1 / nvidia-driver, or the driver of your distribution)"
/* Devices whose properties are cached; more are ignored (no machine has more GPUs today). */
#define CUDA_MAX_DEVICES 64
#define CUDA_ERROR_INVALID_IMAGE 200
#define CUDA_ERROR_NO_BINARY_FOR_GPU 209

typedef struct cuda_device {
  int major, minor;
  char name[96];
} cuda_device_t;

/* The driver's symbols and devices, filled by g_cuda_driver's probe (gpu_backend.h). */
static struct {
  hk_cuda_symbols_t sym, override;
  cuda_device_t devices[CUDA_MAX_DEVICES];
} g_cuda;

#define CU g_cuda.sym

#define HK_GPU_SYMBOL_TABLE hk_cuda_symbols_t
static const hk_gpu_symbol_t k_cuda_symbols[] = {HK_CUDA_SYMBOLS(HK_GPU_SYMBOL_ENTRY)};

/* "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" (or numbers when the driver cannot say). */
static void cu_describe(int r, char *name, size_t name_size, char *desc, size_t desc_size) {
  const char *n = NULL, *d = NULL;
  if (CU.cuGetErrorName && CU.cuGetErrorName(r, &n) != HK_CUDA_SUCCESS) n = NULL;
  if (CU.cuGetErrorString && CU.cuGetErrorString(r, &d) != HK_CUDA_SUCCESS) d = NULL;
  if (n) snprintf(name, name_size, "%s", n);
  else snprintf(name, name_size, "CUDA error %d", r);
  snprintf(desc, desc_size, "%s", d ? d : "no description");
}

/* HK_OK, or OUT_OF_MEMORY / DRIVER with "cuXxx failed: CUDA_ERROR_NAME (description)". */
#define CU_STATUS(r, call) hk_gpu_status((r), HK_CUDA_ERROR_OUT_OF_MEMORY, cu_describe, (call), __FILE__, __LINE__)
#define CU_CHECK(fn, args) CU_STATUS(CU.fn args, #fn)

/* cuInit, then each device's compute capability and name. */
static int cuda_find_devices(hk_gpu_driver_t *drv) {
  char name[96], desc[256];
  hk_cu_result_t r = CU.cuInit(0);
  if (r != HK_CUDA_SUCCESS) {
    cu_describe(r, name, sizeof name, desc, sizeof desc);
    snprintf(drv->reason, sizeof drv->reason, "no usable NVIDIA GPU: cuInit failed: %s (%s)", name, desc);
    return 0;
  }
  int count = 0;
  r = CU.cuDeviceGetCount(&count);
  if (r != HK_CUDA_SUCCESS || count <= 0) {
    if (r == HK_CUDA_SUCCESS) r = HK_CUDA_ERROR_NO_DEVICE;
    cu_describe(r, name, sizeof name, desc, sizeof desc);
    snprintf(drv->reason, sizeof drv->reason, "no NVIDIA GPU found: cuDeviceGetCount returned %s (%s)", name, desc);
    return 0;
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
  return count;
}

static hk_gpu_driver_t g_cuda_driver = {
    .libraries = k_cuda_libraries, .library_count = 1, .runtime = "the NVIDIA driver", .package = CUDA_PACKAGE,
    .symbols = k_cuda_symbols, .symbol_count = sizeof k_cuda_symbols / sizeof k_cuda_symbols[0], .table = &g_cuda.sym,
    .override_copy = &g_cuda.override, .table_size = sizeof g_cuda.sym, .find_devices = cuda_find_devices,
    .lock = PTHREAD_MUTEX_INITIALIZER};

static bool cuda_available(void) { return hk_gpu_driver_available(&g_cuda_driver); }
static const char *cuda_unavailable_reason(void) { return hk_gpu_driver_unavailable_reason(&g_cuda_driver); }
const hk_cuda_symbols_t *hk_cuda_symbols(void) { return cuda_available() ? &g_cuda.sym : NULL; }
void hk_cuda_override_symbols(const hk_cuda_symbols_t *table) { hk_gpu_driver_override(&g_cuda_driver, table); }

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

int hk_cuda_ptx_rank(const char *name, int major, int minor) {
  if (strncmp(name, "sm_", 3) != 0) return 0;
  const char *p = name + 3;
  int value = 0, digits = 0;
  for (; *p >= '0' && *p <= '9' && digits < 4; p++, digits++) value = value * 10 + (*p - '0');
  if (digits < 2) return 0;
  char suffix = *p;
  if (suffix != '\0' && (p[1] != '\0' || (suffix != 'a' && suffix != 'f'))) return 0;
  int tmajor = value / 10, tminor = value % 10;
  if (suffix == 'a') return tmajor == major && tminor == minor ? value : 0;
  if (suffix == 'f') return tmajor == major && tminor <= minor ? value : 0;
  return tmajor < major || (tmajor == major && tminor <= minor) ? value : 0;
}

static int cuda_runs_ptx(const char *name, int device) {
  if (!cuda_available() || device < 0 || device >= g_cuda_driver.device_count) return 0;
  const cuda_device_t *d = &g_cuda.devices[device];
  return hk_cuda_ptx_rank(name, d->major, d->minor);
}

static int cuda_runs_target(const char *name, const char *features, int device) {
  if (!cuda_available() || device < 0 || device >= g_cuda_driver.device_count) return 0;
  const cuda_device_t *d = &g_cuda.devices[device];
  return hk_cuda_target_rank(name, features, d->major, d->minor);
}

static const char *cuda_device_name(int device) {
  if (!cuda_available() || device < 0 || device >= g_cuda_driver.device_count) return "";
  return g_cuda.devices[device].name;
}

/* "sm_90, sm_90a on device 0 (NVIDIA H200)"; for minor > 0: "sm_80..sm_86, sm_86a ...". */
static void cuda_describe(char *out, size_t size) {
  out[0] = '\0';
  if (!cuda_available()) return;
  size_t used = 0;
  for (int i = 0; i < g_cuda_driver.device_count && used + 1 < size; i++) {
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

/* ---- modules --------------------------------------------------------------------------------- */
typedef struct cuda_module {
  hk_gpu_module_t gpu;
  hk_cu_device_t dev;
  hk_cu_context_t ctx; /* the device's primary context, retained; NULL before */
} cuda_module_t;

/* Makes m's context current on this thread. */
static hk_status_t ctx_enter(const hk_gpu_module_t *gm) {
  const cuda_module_t *m = (const cuda_module_t *)gm;
  hk_cu_context_t cur = NULL;
  if (CU.cuCtxGetCurrent(&cur) == HK_CUDA_SUCCESS && cur == m->ctx) return HK_OK;
  return CU_CHECK(cuCtxSetCurrent, (m->ctx));
}

/* Retains the device's primary context and makes it current. */
static hk_status_t cuda_module_open(hk_gpu_module_t *gm) {
  cuda_module_t *m = (cuda_module_t *)gm;
  HK_RETURN_IF_ERROR(CU_CHECK(cuDeviceGet, (&m->dev, gm->base.device)));
  HK_RETURN_IF_ERROR(CU_CHECK(cuDevicePrimaryCtxRetain, (&m->ctx, m->dev)));
  return ctx_enter(gm);
}

static void cuda_module_close(hk_gpu_module_t *gm) {
  cuda_module_t *m = (cuda_module_t *)gm;
  if (!m->ctx) return;
  (void)ctx_enter(gm);
  for (uint32_t i = 0; i < gm->object_count; i++)
    if (gm->objects[i]) (void)CU.cuModuleUnload((hk_cu_module_t)gm->objects[i]);
  (void)CU.cuDevicePrimaryCtxRelease(m->dev);
}

static hk_status_t cuda_object_load(const void *image, void **out_object) {
  hk_cu_module_t obj = NULL;
  hk_cu_result_t r = CU.cuModuleLoadData(&obj, image);
  hk_status_t st = CU_STATUS(r, "cuModuleLoadData");
  if (r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_NO_BINARY_FOR_GPU) return HK_STATUS_CORRUPT;
  *out_object = obj;
  return st;
}

static hk_status_t cuda_function_get(void *object, const char *name, void **out_fn) {
  hk_cu_function_t fn = NULL;
  hk_cu_result_t r = CU.cuModuleGetFunction(&fn, (hk_cu_module_t)object, name);
  hk_status_t st = CU_STATUS(r, "cuModuleGetFunction");
  *out_fn = fn;
  return r == HK_CUDA_ERROR_NOT_FOUND ? HK_STATUS_CORRUPT : st;
}

/* A block whose shared memory -- the launch's dynamic bytes plus the kernel's static ones (a
 * split kernel's arrival flag) -- exceeds 48 KiB must opt in, else the launch fails with
 * CUDA_ERROR_INVALID_VALUE (e.g. 48 KiB dynamic + 4 bytes static). */
static hk_status_t cuda_launch_prepare(const hk_gpu_module_t *m, const hk_launch_desc_t *l) {
  int static_bytes = 0;
  if (l->shared_bytes && CU.cuFuncGetAttribute &&
      CU.cuFuncGetAttribute(&static_bytes, HK_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, (hk_cu_function_t)m->fns[l->kernel]) !=
          HK_CUDA_SUCCESS)
    static_bytes = 0; /* unknown: decide on the dynamic bytes alone, as before */
  if ((uint64_t)l->shared_bytes + (uint64_t)(static_bytes > 0 ? static_bytes : 0) <= HK_CU_DEFAULT_DYNAMIC_SHARED)
    return HK_OK;
  HK_FAIL_IF(!CU.cuFuncSetAttribute, HK_STATUS_UNAVAILABLE,
             "this CUDA driver lacks cuFuncSetAttribute, needed for %u bytes of dynamic shared memory",
             l->shared_bytes);
  return CU_CHECK(cuFuncSetAttribute, ((hk_cu_function_t)m->fns[l->kernel],
                                       HK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)l->shared_bytes));
}

/* ---- kernel node parameters ------------------------------------------------------------------ */
static void node_params(void *fn, const hk_launch_desc_t *l, hk_cu_kernel_node_params_v2_t *p) {
  memset(p, 0, sizeof *p);
  p->func = (hk_cu_function_t)fn;
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

/* ---- launches and their timing --------------------------------------------------------------- */
/* programmatic: cuLaunchKernelEx with the one attribute that lets the kernel start while the
 * kernel before it on the stream finishes (the core asks only when cuda_pdl_support says the
 * driver has the call). */
static hk_status_t cuda_launch(void *fn, const hk_launch_desc_t *l, bool programmatic, void *stream) {
  if (!programmatic)
    return CU_CHECK(cuLaunchKernel, ((hk_cu_function_t)fn, l->grid[0], l->grid[1], l->grid[2], l->block[0],
                                     l->block[1], l->block[2], l->shared_bytes, (hk_cu_stream_t)stream, l->args, NULL));
  hk_cu_launch_attribute_t attr;
  memset(&attr, 0, sizeof attr);
  attr.id = HK_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  const hk_cu_launch_config_t config = {
      .gridDimX = l->grid[0], .gridDimY = l->grid[1], .gridDimZ = l->grid[2],
      .blockDimX = l->block[0], .blockDimY = l->block[1], .blockDimZ = l->block[2],
      .sharedMemBytes = l->shared_bytes, .hStream = (hk_cu_stream_t)stream, .attrs = &attr, .numAttrs = 1};
  return CU_CHECK(cuLaunchKernelEx, (&config, (hk_cu_function_t)fn, l->args, NULL));
}

/* Programmatic stream launches need cuLaunchKernelEx, programmatic graph edges
 * cuGraphAddDependencies_v2 (edge data: CUDA 12.3+). */
static unsigned cuda_pdl_support(void) {
  return (CU.cuLaunchKernelEx ? HK_GPU_PDL_STREAM : 0u) | (CU.cuGraphAddDependencies_v2 ? HK_GPU_PDL_GRAPH : 0u);
}

/* Events are optional in the driver: UNAVAILABLE when a part of the API is missing. */
static hk_status_t cuda_event_create(void **out_event) {
  HK_FAIL_IF(!CU.cuEventCreate || !CU.cuEventRecord || !CU.cuEventSynchronize || !CU.cuEventElapsedTime ||
                 !CU.cuEventDestroy,
             HK_STATUS_UNAVAILABLE, "this CUDA driver lacks the event API (cuEventCreate, cuEventRecord, "
             "cuEventSynchronize, cuEventElapsedTime, cuEventDestroy) that timing launches needs");
  hk_cu_event_t e = NULL;
  hk_status_t st = CU_CHECK(cuEventCreate, (&e, 0));
  *out_event = e;
  return st;
}

static hk_status_t cuda_event_record(void *event, void *stream) {
  return CU_CHECK(cuEventRecord, ((hk_cu_event_t)event, (hk_cu_stream_t)stream));
}
static hk_status_t cuda_event_sync(void *event) { return CU_CHECK(cuEventSynchronize, ((hk_cu_event_t)event)); }
static hk_status_t cuda_event_elapsed(void *start, void *stop, float *out_ms) {
  return CU_CHECK(cuEventElapsedTime, (out_ms, (hk_cu_event_t)start, (hk_cu_event_t)stop));
}
static void cuda_event_destroy(void *event) { (void)CU.cuEventDestroy((hk_cu_event_t)event); }

/* ---- graphs ---------------------------------------------------------------------------------- */
/* Whether the driver has the graph API, in one of its versions (v2 calls on CUDA 12+). */
static bool graph_api_present(void) {
  return CU.cuGraphCreate && (CU.cuGraphAddKernelNode_v2 || CU.cuGraphAddKernelNode) &&
         (CU.cuGraphInstantiateWithFlags || CU.cuGraphInstantiate_v2) && CU.cuGraphLaunch &&
         (CU.cuGraphExecKernelNodeSetParams_v2 || CU.cuGraphExecKernelNodeSetParams) && CU.cuGraphExecDestroy &&
         CU.cuGraphDestroy;
}

/* The graph API is optional in the driver: UNAVAILABLE when a part of it is missing. */
static hk_status_t cuda_graph_create(void **out_graph) {
  HK_FAIL_IF(!graph_api_present(), HK_STATUS_UNAVAILABLE, "this CUDA driver lacks the graph API (cuGraphCreate, "
             "cuGraphAddKernelNode, cuGraphInstantiate, cuGraphLaunch, cuGraphExecKernelNodeSetParams, cuGraphDestroy)");
  hk_cu_graph_t g = NULL;
  hk_status_t st = CU_CHECK(cuGraphCreate, (&g, 0));
  *out_graph = g;
  return st;
}

/* programmatic: the node goes in without dependencies, then its edges from them with
 * cuGraphAddDependencies_v2 and programmatic edge data (the core asks only when
 * cuda_pdl_support says the driver has the call). Scratch: the upstream nodes, the node
 * repeated, the edge records (HK_GPU_GRAPH_SCRATCH_SLOTS handles per dependency). */
static hk_status_t cuda_graph_add_kernel(void *graph, void *fn, const hk_launch_desc_t *l, void *const *nodes,
                                         void *scratch, bool programmatic, void **out_node) {
  const uint32_t n = l->dep_count;
  hk_cu_graph_node_t *deps = scratch, *to = deps + n, node = NULL;
  hk_cu_graph_edge_data_t *edges = (hk_cu_graph_edge_data_t *)(void *)(to + n);
  for (uint32_t d = 0; d < n; d++) deps[d] = (hk_cu_graph_node_t)nodes[l->deps[d]];
  const size_t node_deps = programmatic ? 0 : n;
  hk_cu_kernel_node_params_v2_t p;
  node_params(fn, l, &p);
  hk_status_t st;
  if (CU.cuGraphAddKernelNode_v2) {
    st = CU_CHECK(cuGraphAddKernelNode_v2, (&node, (hk_cu_graph_t)graph, deps, node_deps, &p));
  } else {
    hk_cu_kernel_node_params_v1_t p1;
    node_params_v1(&p, &p1);
    st = CU_CHECK(cuGraphAddKernelNode, (&node, (hk_cu_graph_t)graph, deps, node_deps, &p1));
  }
  *out_node = node;
  if (st != HK_OK || !programmatic || n == 0) return st;
  for (uint32_t d = 0; d < n; d++) {
    to[d] = node;
    edges[d] = (hk_cu_graph_edge_data_t){.from_port = HK_CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,
                                         .type = HK_CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC};
  }
  return CU_CHECK(cuGraphAddDependencies_v2, ((hk_cu_graph_t)graph, deps, to, edges, n));
}

static hk_status_t cuda_graph_instantiate(void *graph, void **out_exec) {
  hk_cu_graph_exec_t exec = NULL;
  hk_status_t st;
  if (CU.cuGraphInstantiateWithFlags) {
    st = CU_CHECK(cuGraphInstantiateWithFlags, (&exec, (hk_cu_graph_t)graph, 0));
  } else {
    char log[256] = "";
    st = CU_CHECK(cuGraphInstantiate_v2, (&exec, (hk_cu_graph_t)graph, NULL, log, sizeof log));
  }
  *out_exec = exec;
  return st;
}

static hk_status_t cuda_graph_set_params(void *exec, void *node, void *fn, const hk_launch_desc_t *l) {
  hk_cu_kernel_node_params_v2_t p;
  node_params(fn, l, &p);
  if (CU.cuGraphExecKernelNodeSetParams_v2)
    return CU_CHECK(cuGraphExecKernelNodeSetParams_v2, ((hk_cu_graph_exec_t)exec, (hk_cu_graph_node_t)node, &p));
  hk_cu_kernel_node_params_v1_t p1;
  node_params_v1(&p, &p1);
  return CU_CHECK(cuGraphExecKernelNodeSetParams, ((hk_cu_graph_exec_t)exec, (hk_cu_graph_node_t)node, &p1));
}

static hk_status_t cuda_graph_launch(void *exec, void *stream) {
  return CU_CHECK(cuGraphLaunch, ((hk_cu_graph_exec_t)exec, (hk_cu_stream_t)stream));
}

static void cuda_graph_exec_destroy(void *exec) { (void)CU.cuGraphExecDestroy((hk_cu_graph_exec_t)exec); }
static void cuda_graph_destroy(void *graph) { (void)CU.cuGraphDestroy((hk_cu_graph_t)graph); }

/* ---- TMA tensor maps (cuTensorMapEncodeTiled, CUDA 12.0+) ------------------------------------ */
static int tmap_data_type(uint32_t dtype) {
  switch (dtype) {
  case HK_DTYPE_F16: return HK_CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  case HK_DTYPE_BF16: return HK_CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  default: return HK_CU_TENSOR_MAP_DATA_TYPE_FLOAT32; /* f32: verify admits no other dtype */
  }
}

/* The map of the row-major matrix [rows, cols] (pack_format.h, HK_ARG_TMAP): rank 2, dims
 * innermost first, one row stride, unit element strides, no interleave, L2 promotion 256 B,
 * zero fill out of bounds. desc NULL: whether the driver has the call. */
static hk_status_t cuda_tensor_map_encode(const hk_tmap_desc_t *d, void *data, void *out) {
  HK_FAIL_IF(!CU.cuTensorMapEncodeTiled, HK_STATUS_UNAVAILABLE,
             "the NVIDIA driver lacks cuTensorMapEncodeTiled (CUDA 12.0+): update the driver");
  if (!d) return HK_OK;
  const uint64_t dims[2] = {d->cols, d->rows}, strides[1] = {d->cols * hk_dtype_bytes(d->dtype)};
  const uint32_t box[2] = {d->box_inner, d->box_outer}, element_strides[2] = {1, 1};
  return CU_CHECK(cuTensorMapEncodeTiled,
                  ((hk_cu_tensor_map_t *)out, tmap_data_type(d->dtype), 2, data, dims, strides, box, element_strides,
                   HK_CU_TENSOR_MAP_INTERLEAVE_NONE, (int)d->swizzle, HK_CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                   HK_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

/* ---- memory: device pointers are CUdeviceptr integers ---------------------------------------- */
static hk_cu_deviceptr_t dptr(const void *p) { return (hk_cu_deviceptr_t)(uintptr_t)p; }

static hk_status_t cuda_mem_alloc(size_t bytes, void **out_ptr) {
  hk_cu_deviceptr_t p = 0;
  HK_RETURN_IF_ERROR(CU_CHECK(cuMemAlloc, (&p, bytes)));
  *out_ptr = (void *)(uintptr_t)p;
  return HK_OK;
}

static void cuda_mem_free(void *ptr) { (void)CU.cuMemFree(dptr(ptr)); }

static hk_status_t cuda_mem_copy(void *dst, const void *src, size_t bytes, hk_copy_kind_t kind) {
  switch (kind) {
  case HK_COPY_HOST_TO_DEVICE: return CU_CHECK(cuMemcpyHtoD, (dptr(dst), src, bytes));
  case HK_COPY_DEVICE_TO_HOST: return CU_CHECK(cuMemcpyDtoH, (dst, dptr(src), bytes));
  case HK_COPY_DEVICE_TO_DEVICE: return CU_CHECK(cuMemcpyDtoD, (dptr(dst), dptr(src), bytes));
  }
  return HK_ERROR(HK_STATUS_INVALID_ARGUMENT, "unknown copy kind %d", (int)kind);
}

static hk_status_t cuda_copy_async(void *dst, const void *src, size_t bytes, void *stream) {
  return CU_CHECK(cuMemcpyDtoDAsync, (dptr(dst), dptr(src), bytes, (hk_cu_stream_t)stream));
}

static hk_status_t cuda_zero_async(void *dst, size_t bytes, void *stream) {
  return CU_CHECK(cuMemsetD8Async, (dptr(dst), 0, bytes, (hk_cu_stream_t)stream));
}

static hk_status_t cuda_synchronize(void *stream) {
  if (stream) return CU_CHECK(cuStreamSynchronize, ((hk_cu_stream_t)stream));
  return CU_CHECK(cuCtxSynchronize, ());
}

/* ---- collectives: NCCL (tensor-parallel sessions; the library code is the core's) ------------- */
static hk_ccl_t g_nccl = HK_CCL_INIT("libnccl.so.2", "NCCL");

void hk_nccl_override_symbols(const hk_nccl_symbols_t *table) { hk_ccl_override(&g_nccl, table); }

static hk_status_t cuda_comm_check(void *comm, uint32_t rank, uint32_t ranks) {
  return hk_ccl_comm_check(&g_nccl, comm, rank, ranks);
}

/* all_gather's columns: rank r's block [rows, cols] of staging to columns r * cols of out */
static hk_status_t cuda_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                                void *stream) {
  HK_FAIL_IF(!CU.cuMemcpy2DAsync, HK_STATUS_UNAVAILABLE, "this CUDA driver lacks cuMemcpy2DAsync_v2, which an "
             "all_gather of more than one row needs");
  const hk_cu_memcpy2d_t c = {.srcMemoryType = HK_CU_MEMORYTYPE_DEVICE, .srcDevice = dptr(src), .srcPitch = spitch,
                              .dstMemoryType = HK_CU_MEMORYTYPE_DEVICE, .dstDevice = dptr(dst), .dstPitch = dpitch,
                              .WidthInBytes = width, .Height = height};
  return CU_CHECK(cuMemcpy2DAsync, (&c, (hk_cu_stream_t)stream));
}

static hk_status_t cuda_collective(void *comm, const hk_launch_desc_t *l, void *staging, void *stream) {
  return hk_ccl_collective(&g_nccl, comm, l, staging, stream, cuda_copy_2d);
}

/* Stream capture: a tensor-parallel session's graph is recorded from a stream of its own. */
static hk_status_t cuda_stream_create(void **out_stream) {
  HK_FAIL_IF(!CU.cuStreamCreate || !CU.cuStreamDestroy || !CU.cuStreamBeginCapture || !CU.cuStreamEndCapture,
             HK_STATUS_UNAVAILABLE, "this CUDA driver lacks stream capture (cuStreamCreate, cuStreamBeginCapture_v2, "
             "cuStreamEndCapture), which a tensor-parallel session's graph needs");
  hk_cu_stream_t st = NULL;
  hk_status_t r = CU_CHECK(cuStreamCreate, (&st, HK_CU_STREAM_NON_BLOCKING));
  *out_stream = st;
  return r;
}
static void cuda_stream_destroy(void *stream) { (void)CU.cuStreamDestroy((hk_cu_stream_t)stream); }
static hk_status_t cuda_capture_begin(void *stream) {
  return CU_CHECK(cuStreamBeginCapture, ((hk_cu_stream_t)stream, HK_CU_STREAM_CAPTURE_MODE_RELAXED));
}
static hk_status_t cuda_capture_end(void *stream, void **out_graph) {
  hk_cu_graph_t g = NULL;
  hk_status_t st = CU_CHECK(cuStreamEndCapture, ((hk_cu_stream_t)stream, &g));
  *out_graph = g;
  return st;
}

/* ---- the tables ------------------------------------------------------------------------------ */
static const hk_gpu_ops_t k_cuda_ops = {
    .backend = &hk_backend_cuda,
    .driver = &g_cuda_driver,
    .vendor = "CUDA",
    .module_size = sizeof(cuda_module_t),
    .allow_bundle = false,
    .elf_machine = HK_EM_CUDA,
    .enter = ctx_enter,
    .launch_prepare = cuda_launch_prepare,
    .tensor_map_encode = cuda_tensor_map_encode,
    .pdl_support = cuda_pdl_support,
    .comm_check = cuda_comm_check,
    .collective = cuda_collective,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    HK_GPU_OPS_ENTRIES(cuda),
};

static hk_status_t cuda_module_load(const hk_pack_view_t *view, uint32_t target, int device,
                                    const hk_allocator_t *allocator, const void *code, size_t code_size,
                                    hk_module_t **out_module) {
  (void)code_size; /* every kernel's range lies inside it: verified */
  return hk_gpu_module_load(&k_cuda_ops, view, target, device, allocator, code, false, out_module);
}

/* The target's PTX texts (code: its decompressed PTX payload), JIT-compiled by the driver. */
static hk_status_t cuda_module_load_ptx(const hk_pack_view_t *view, uint32_t target, int device,
                                        const hk_allocator_t *allocator, const void *ptx, size_t ptx_size,
                                        hk_module_t **out_module) {
  (void)ptx_size; /* every kernel's range lies inside it: verified */
  return hk_gpu_module_load(&k_cuda_ops, view, target, device, allocator, ptx, true, out_module);
}

const hk_backend_t hk_backend_cuda = {.name = "cuda", .kind = HK_TARGET_CUDA, HK_GPU_BACKEND_ENTRIES(cuda),
                                      .collectives = true,
                                      .tensor_map_encode = hk_gpu_tensor_map_encode,
                                      .runs_ptx = cuda_runs_ptx, .module_load_ptx = cuda_module_load_ptx,
                                      .device_name = cuda_device_name};
