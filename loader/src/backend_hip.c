/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend_hip.c -- runs "gfx*" targets through the HIP runtime, dlopen'ed from
 * libamdhip64.so.6, .so.5 or .so on first use (never linked; no HIP header: see
 * gpu_internal.h).
 *
 * This file keeps what is HIP's own: loading the runtime's symbols, finding the devices
 * and their ISA names, ranking gfx* targets with their features, and the runtime calls
 * behind the GPU core's table (hk_gpu_ops_t, gpu_backend.h), among them the packing of
 * hipKernelNodeParams. Modules, sessions, graph replay and its stream fallback,
 * profiling and memory are the core's (gpu_backend.c). Code objects are loaded with
 * hipModuleLoadData (ELF or clang offload bundle), kernels launched with
 * hipModuleLaunchKernel, graphs built with hipGraphAddKernelNode (ROCm releases before
 * ~5.6 may refuse it for a function from hipModuleGetFunction: the core's stream fallback
 * covers that), padded runs' staging copies enqueued with hipMemsetAsync and
 * hipMemcpyAsync device-to-device.
 *
 * The device's ISA name: hipDeviceProp_t.gcnArchName ("gfx90a:sramecc+:xnack-") sits at
 * different offsets in ROCm 5 (hipDeviceProp_t) and ROCm 6 (hipDeviceProp_tR0600, exported
 * as hipGetDevicePropertiesR0600), and may move again. Instead of pinning layouts we hand
 * the call a zeroed HK_HIP_PROPS_BUFFER-byte buffer (far larger than any layout) and take
 * the longest NUL-terminated "gfx<hex>(:feature[+-])*" string in it (hk_hip_find_arch_name):
 * the only other text fields are the marketing name and uuid/luid bytes, which do not
 * match that shape.
 *
 * Devices: every entry point makes the module's device current (hipSetDevice) when it is
 * not already, and leaves it current.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gpu_backend.h"
#include "gpu_internal.h"
#include "image_internal.h"
#include "status_internal.h"
#include "util_internal.h"

static const char *const k_hip_libraries[] = {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};
#define HIP_PACKAGE "the ROCm HIP runtime (Debian: libamdhip64-5; ROCm repositories: hip-runtime-amd)"
#define HIP_MAX_DEVICES 64 /* devices whose ISA is cached; more are ignored */
#define HIP_ISA_MAX 128

/* The runtime's symbols and the devices' ISA names, filled by g_hip_driver's probe. */
static struct {
  hk_hip_symbols_t sym, override;
  char isa[HIP_MAX_DEVICES][HIP_ISA_MAX]; /* "" when unknown: runs nothing */
} g_hip;

#define HIP g_hip.sym

#define HK_GPU_SYMBOL_TABLE hk_hip_symbols_t
static const hk_gpu_symbol_t k_hip_symbols[] = {HK_HIP_SYMBOLS(HK_GPU_SYMBOL_ENTRY)};

/* "hipErrorOutOfMemory", "out of memory" (or numbers when the runtime cannot say). */
static void hip_describe_error(int r, char *name, size_t name_size, char *desc, size_t desc_size) {
  const char *n = HIP.hipGetErrorName ? HIP.hipGetErrorName(r) : NULL;
  const char *d = HIP.hipGetErrorString ? HIP.hipGetErrorString(r) : NULL;
  if (n) snprintf(name, name_size, "%s", n);
  else snprintf(name, name_size, "HIP error %d", r);
  snprintf(desc, desc_size, "%s", d ? d : "no description");
}

/* HK_OK, or OUT_OF_MEMORY / DRIVER with "hipXxx failed: hipErrorName (description)". */
#define HIP_CHECK(fn, args) \
  hk_gpu_status(HIP.fn args, HK_HIP_ERROR_OUT_OF_MEMORY, hip_describe_error, #fn, __FILE__, __LINE__)

static bool isa_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == ':' || c == '+' || c == '-';
}

/* "gfx" hex+ then (":" lowercase+ ("+"|"-"))*, the whole of [s, s + len). */
static bool isa_shaped(const char *s, size_t len) {
  if (len < 4 || memcmp(s, "gfx", 3) != 0) return false;
  size_t i = 3;
  while (i < len && ((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) i++;
  if (i == 3) return false;
  while (i < len) {
    if (s[i++] != ':') return false;
    size_t start = i;
    while (i < len && s[i] >= 'a' && s[i] <= 'z') i++;
    if (i == start || i >= len || (s[i] != '+' && s[i] != '-')) return false;
    i++;
  }
  return true;
}

bool hk_hip_find_arch_name(const void *props, size_t size, char *out, size_t out_size) {
  const char *p = props;
  size_t best = 0, best_len = 0;
  for (size_t i = 0; i + 3 < size; i++) {
    if (p[i] != 'g') continue;
    size_t len = 0;
    while (i + len < size && p[i + len] != '\0' && isa_char(p[i + len])) len++;
    if (i + len >= size || p[i + len] != '\0') continue; /* must be NUL-terminated */
    if (isa_shaped(p + i, len) && len > best_len) {
      best = i;
      best_len = len;
    }
  }
  if (best_len == 0 || best_len >= out_size) return false;
  memcpy(out, p + best, best_len);
  out[best_len] = '\0';
  return true;
}

/* hipInit, the device count, then each device's ISA name. */
static int hip_find_devices(hk_gpu_driver_t *drv) {
  /* hipGetDeviceCount names the problem best (hipInit without a GPU says hipErrorInvalidDevice). */
  hk_hip_error_t init = HIP.hipInit(0);
  int count = 0;
  hk_hip_error_t r = HIP.hipGetDeviceCount(&count);
  if (r != HK_HIP_SUCCESS || count <= 0 || init != HK_HIP_SUCCESS) {
    char name[96], desc[256], iname[96], idesc[256];
    hip_describe_error(r == HK_HIP_SUCCESS && count <= 0 ? HK_HIP_ERROR_NO_DEVICE : r, name, sizeof name, desc,
                       sizeof desc);
    hip_describe_error(init, iname, sizeof iname, idesc, sizeof idesc);
    snprintf(drv->reason, sizeof drv->reason,
             "no AMD GPU found: hipGetDeviceCount returned %s (%.200s); hipInit returned %s", name, desc, iname);
    return 0;
  }
  if (count > HIP_MAX_DEVICES) count = HIP_MAX_DEVICES;
  void *props = malloc(HK_HIP_PROPS_BUFFER);
  for (int i = 0; i < count; i++) {
    g_hip.isa[i][0] = '\0';
    if (!props) continue;
    memset(props, 0, HK_HIP_PROPS_BUFFER);
    if (HIP.hipGetDeviceProperties(props, i) == HK_HIP_SUCCESS)
      (void)hk_hip_find_arch_name(props, HK_HIP_PROPS_BUFFER, g_hip.isa[i], sizeof g_hip.isa[i]);
  }
  free(props);
  return count;
}

static hk_gpu_driver_t g_hip_driver = {
    .libraries = k_hip_libraries,
    .library_count = sizeof k_hip_libraries / sizeof k_hip_libraries[0],
    .runtime = "the HIP runtime",
    .package = HIP_PACKAGE,
    .symbols = k_hip_symbols,
    .symbol_count = sizeof k_hip_symbols / sizeof k_hip_symbols[0],
    .table = &g_hip.sym,
    .override_copy = &g_hip.override,
    .table_size = sizeof g_hip.sym,
    .find_devices = hip_find_devices,
    .lock = PTHREAD_MUTEX_INITIALIZER,
};

static bool hip_available(void) { return hk_gpu_driver_available(&g_hip_driver); }

static const char *hip_unavailable_reason(void) { return hk_gpu_driver_unavailable_reason(&g_hip_driver); }

void hk_hip_override_symbols(const hk_hip_symbols_t *table) { hk_gpu_driver_override(&g_hip_driver, table); }

/* Splits "gfx90a:sramecc+:xnack-" (+ extra "xnack-") into the processor and a list of
 * settings; false when malformed or too long. */
#define HIP_MAX_FEATURES 8
typedef struct isa {
  char processor[32];
  struct {
    char name[24];
    char value; /* '+' or '-' */
  } features[HIP_MAX_FEATURES];
  int feature_count;
} isa_t;

static bool parse_features(const char *s, isa_t *out) {
  while (*s) {
    const char *end = strchr(s, ':');
    size_t len = end ? (size_t)(end - s) : strlen(s);
    if (len < 2 || (s[len - 1] != '+' && s[len - 1] != '-') || len - 1 >= sizeof out->features[0].name ||
        out->feature_count == HIP_MAX_FEATURES)
      return false;
    memcpy(out->features[out->feature_count].name, s, len - 1);
    out->features[out->feature_count].name[len - 1] = '\0';
    out->features[out->feature_count].value = s[len - 1];
    for (int i = 0; i < out->feature_count; i++)
      if (strcmp(out->features[i].name, out->features[out->feature_count].name) == 0) return false;
    out->feature_count++;
    s += len;
    if (*s == ':') s++;
  }
  return true;
}

static bool parse_isa(const char *name, const char *features, isa_t *out) {
  memset(out, 0, sizeof *out);
  const char *colon = strchr(name, ':');
  size_t len = colon ? (size_t)(colon - name) : strlen(name);
  if (len < 4 || len >= sizeof out->processor || strncmp(name, "gfx", 3) != 0) return false;
  memcpy(out->processor, name, len);
  if (colon && !parse_features(colon + 1, out)) return false;
  return parse_features(features, out);
}

static char feature_value(const isa_t *isa, const char *name) {
  for (int i = 0; i < isa->feature_count; i++)
    if (strcmp(isa->features[i].name, name) == 0) return isa->features[i].value;
  return 0;
}

int hk_hip_target_rank(const char *name, const char *features, const char *device_isa) {
  isa_t t, d;
  if (!parse_isa(name, features, &t) || !parse_isa(device_isa, "", &d)) return 0;
  if (strcmp(t.processor, d.processor) != 0) return 0;
  for (int i = 0; i < t.feature_count; i++)
    if (feature_value(&d, t.features[i].name) != t.features[i].value) return 0; /* contradicts or unsupported */
  for (int i = 0; i < d.feature_count; i++)
    if (!feature_value(&t, d.features[i].name)) return 1; /* built for "any": compatible */
  return 2;
}

static int hip_runs_target(const char *name, const char *features, int device) {
  if (!hip_available() || device < 0 || device >= g_hip_driver.device_count) return 0;
  return hk_hip_target_rank(name, features, g_hip.isa[device]);
}

static void hip_describe(char *out, size_t size) {
  out[0] = '\0';
  if (!hip_available()) return;
  size_t used = 0;
  for (int i = 0; i < g_hip_driver.device_count && used + 1 < size; i++) {
    int n = snprintf(out + used, size - used, "%s%s on device %d", i ? ", " : "",
                     g_hip.isa[i][0] ? g_hip.isa[i] : "an AMD GPU of unknown ISA", i);
    if (n < 0) break;
    used += (size_t)n;
  }
}

/* ---- modules: a HIP module is the core's, nothing more --------------------------------------- */
static hk_status_t device_enter(const hk_gpu_module_t *m) {
  int cur = -1;
  if (HIP.hipGetDevice(&cur) == HK_HIP_SUCCESS && cur == m->base.device) return HK_OK;
  return HIP_CHECK(hipSetDevice, (m->base.device));
}

static hk_status_t hip_module_open(hk_gpu_module_t *m) { return device_enter(m); }

static void hip_module_close(hk_gpu_module_t *m) {
  if (!m->object_count) return;
  (void)device_enter(m);
  for (uint32_t i = 0; i < m->object_count; i++)
    if (m->objects[i]) (void)HIP.hipModuleUnload((hk_hip_module_t)m->objects[i]);
}

static hk_status_t hip_object_load(const void *image, void **out_object) {
  hk_hip_module_t obj = NULL;
  hk_status_t st = HIP_CHECK(hipModuleLoadData, (&obj, image));
  *out_object = obj;
  return st;
}

/* The runtime names no "not found" error of its own here: any failure means the symbol. */
static hk_status_t hip_function_get(void *object, const char *name, void **out_fn) {
  hk_hip_function_t fn = NULL;
  hk_status_t st = HIP_CHECK(hipModuleGetFunction, (&fn, (hk_hip_module_t)object, name));
  *out_fn = fn;
  return st == HK_STATUS_DRIVER ? HK_STATUS_CORRUPT : st;
}

/* ---- kernel node parameters ------------------------------------------------------------------ */
static void node_params(void *fn, const hk_launch_desc_t *l, hk_hip_kernel_node_params_t *p) {
  memset(p, 0, sizeof *p);
  p->func = fn;
  p->gridDim = (hk_hip_dim3_t){l->grid[0], l->grid[1], l->grid[2]};
  p->blockDim = (hk_hip_dim3_t){l->block[0], l->block[1], l->block[2]};
  p->sharedMemBytes = l->shared_bytes;
  p->kernelParams = l->args;
}

/* ---- launches and their timing --------------------------------------------------------------- */
/* programmatic is never set: this vendor has no pdl_support (and verify allows PDL only on
 * CUDA targets). */
static hk_status_t hip_launch(void *fn, const hk_launch_desc_t *l, bool programmatic, void *stream) {
  (void)programmatic;
  return HIP_CHECK(hipModuleLaunchKernel, ((hk_hip_function_t)fn, l->grid[0], l->grid[1], l->grid[2], l->block[0],
                                           l->block[1], l->block[2], l->shared_bytes, (hk_hip_stream_t)stream,
                                           l->args, NULL));
}

/* Events are optional in the runtime: UNAVAILABLE when a part of the API is missing. */
static hk_status_t hip_event_create(void **out_event) {
  HK_FAIL_IF(!HIP.hipEventCreate || !HIP.hipEventRecord || !HIP.hipEventSynchronize || !HIP.hipEventElapsedTime ||
                 !HIP.hipEventDestroy,
             HK_STATUS_UNAVAILABLE, "this HIP runtime (%s) lacks the event API (hipEventCreate, hipEventRecord, "
             "hipEventSynchronize, hipEventElapsedTime, hipEventDestroy) that timing launches needs",
             g_hip_driver.library);
  hk_hip_event_t e = NULL;
  hk_status_t st = HIP_CHECK(hipEventCreate, (&e));
  *out_event = e;
  return st;
}

static hk_status_t hip_event_record(void *event, void *stream) {
  return HIP_CHECK(hipEventRecord, ((hk_hip_event_t)event, (hk_hip_stream_t)stream));
}
static hk_status_t hip_event_sync(void *event) { return HIP_CHECK(hipEventSynchronize, ((hk_hip_event_t)event)); }
static hk_status_t hip_event_elapsed(void *start, void *stop, float *out_ms) {
  return HIP_CHECK(hipEventElapsedTime, (out_ms, (hk_hip_event_t)start, (hk_hip_event_t)stop));
}
static void hip_event_destroy(void *event) { (void)HIP.hipEventDestroy((hk_hip_event_t)event); }

/* ---- graphs ---------------------------------------------------------------------------------- */
/* The graph API is optional in the runtime: UNAVAILABLE when a part of it is missing. */
static hk_status_t hip_graph_create(void **out_graph) {
  HK_FAIL_IF(!HIP.hipGraphCreate || !HIP.hipGraphAddKernelNode || !HIP.hipGraphInstantiate || !HIP.hipGraphLaunch ||
                 !HIP.hipGraphExecKernelNodeSetParams || !HIP.hipGraphExecDestroy || !HIP.hipGraphDestroy,
             HK_STATUS_UNAVAILABLE, "this HIP runtime (%s) lacks the graph API (hipGraphCreate, "
             "hipGraphAddKernelNode, hipGraphInstantiate, hipGraphLaunch, hipGraphExecKernelNodeSetParams, "
             "hipGraphExecDestroy, hipGraphDestroy)", g_hip_driver.library);
  hk_hip_graph_t g = NULL;
  hk_status_t st = HIP_CHECK(hipGraphCreate, (&g, 0));
  *out_graph = g;
  return st;
}

static hk_status_t hip_graph_add_kernel(void *graph, void *fn, const hk_launch_desc_t *l, void *const *nodes,
                                        void *scratch, bool programmatic, void **out_node) {
  (void)programmatic; /* never set: see hip_launch */
  hk_hip_graph_node_t *deps = scratch, node = NULL;
  for (uint32_t d = 0; d < l->dep_count; d++) deps[d] = (hk_hip_graph_node_t)nodes[l->deps[d]];
  hk_hip_kernel_node_params_t p;
  node_params(fn, l, &p);
  hk_status_t st = HIP_CHECK(hipGraphAddKernelNode, (&node, (hk_hip_graph_t)graph, deps, l->dep_count, &p));
  *out_node = node;
  return st;
}

static hk_status_t hip_graph_instantiate(void *graph, void **out_exec) {
  hk_hip_graph_exec_t exec = NULL;
  char log[256] = "";
  hk_status_t st = HIP_CHECK(hipGraphInstantiate, (&exec, (hk_hip_graph_t)graph, NULL, log, sizeof log));
  *out_exec = exec;
  return st;
}

static hk_status_t hip_graph_set_params(void *exec, void *node, void *fn, const hk_launch_desc_t *l) {
  hk_hip_kernel_node_params_t p;
  node_params(fn, l, &p);
  return HIP_CHECK(hipGraphExecKernelNodeSetParams, ((hk_hip_graph_exec_t)exec, (hk_hip_graph_node_t)node, &p));
}

static hk_status_t hip_graph_launch(void *exec, void *stream) {
  return HIP_CHECK(hipGraphLaunch, ((hk_hip_graph_exec_t)exec, (hk_hip_stream_t)stream));
}

static void hip_graph_exec_destroy(void *exec) { (void)HIP.hipGraphExecDestroy((hk_hip_graph_exec_t)exec); }
static void hip_graph_destroy(void *graph) { (void)HIP.hipGraphDestroy((hk_hip_graph_t)graph); }

/* ---- memory: device pointers are plain pointers ---------------------------------------------- */
static hk_status_t hip_mem_alloc(size_t bytes, void **out_ptr) {
  void *p = NULL;
  HK_RETURN_IF_ERROR(HIP_CHECK(hipMalloc, (&p, bytes)));
  *out_ptr = p;
  return HK_OK;
}

static void hip_mem_free(void *ptr) { (void)HIP.hipFree(ptr); }

static hk_status_t hip_mem_copy(void *dst, const void *src, size_t bytes, hk_copy_kind_t kind) {
  int k = kind == HK_COPY_HOST_TO_DEVICE   ? HK_HIP_MEMCPY_HOST_TO_DEVICE
          : kind == HK_COPY_DEVICE_TO_HOST ? HK_HIP_MEMCPY_DEVICE_TO_HOST
                                           : HK_HIP_MEMCPY_DEVICE_TO_DEVICE;
  return HIP_CHECK(hipMemcpy, (dst, src, bytes, k));
}

static hk_status_t hip_copy_async(void *dst, const void *src, size_t bytes, void *stream) {
  return HIP_CHECK(hipMemcpyAsync, (dst, src, bytes, HK_HIP_MEMCPY_DEVICE_TO_DEVICE, (hk_hip_stream_t)stream));
}

static hk_status_t hip_zero_async(void *dst, size_t bytes, void *stream) {
  return HIP_CHECK(hipMemsetAsync, (dst, 0, bytes, (hk_hip_stream_t)stream));
}

static hk_status_t hip_synchronize(void *stream) {
  if (stream) return HIP_CHECK(hipStreamSynchronize, ((hk_hip_stream_t)stream));
  return HIP_CHECK(hipDeviceSynchronize, ());
}

/* ---- collectives: RCCL (tensor-parallel sessions; the library code is the core's) ------------- */
static hk_ccl_t g_rccl = HK_CCL_INIT("librccl.so.1", "RCCL");

void hk_rccl_override_symbols(const hk_nccl_symbols_t *table) { hk_ccl_override(&g_rccl, table); }

static hk_status_t hip_comm_check(void *comm, uint32_t rank, uint32_t ranks) {
  return hk_ccl_comm_check(&g_rccl, comm, rank, ranks);
}

static hk_status_t hip_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                               void *stream) {
  HK_FAIL_IF(!HIP.hipMemcpy2DAsync, HK_STATUS_UNAVAILABLE, "this HIP runtime lacks hipMemcpy2DAsync, which an "
             "all_gather of more than one row needs");
  return HIP_CHECK(hipMemcpy2DAsync, (dst, dpitch, src, spitch, width, height, HK_HIP_MEMCPY_DEVICE_TO_DEVICE,
                                      (hk_hip_stream_t)stream));
}

static hk_status_t hip_collective(void *comm, const hk_launch_desc_t *l, void *staging, void *stream) {
  return hk_ccl_collective(&g_rccl, comm, l, staging, stream, hip_copy_2d);
}

static hk_status_t hip_stream_create(void **out_stream) {
  HK_FAIL_IF(!HIP.hipStreamCreateWithFlags || !HIP.hipStreamDestroy || !HIP.hipStreamBeginCapture ||
                 !HIP.hipStreamEndCapture,
             HK_STATUS_UNAVAILABLE, "this HIP runtime lacks stream capture (hipStreamCreateWithFlags, "
             "hipStreamBeginCapture, hipStreamEndCapture), which a tensor-parallel session's graph needs");
  hk_hip_stream_t st = NULL;
  hk_status_t r = HIP_CHECK(hipStreamCreateWithFlags, (&st, HK_HIP_STREAM_NON_BLOCKING));
  *out_stream = st;
  return r;
}
static void hip_stream_destroy(void *stream) { (void)HIP.hipStreamDestroy((hk_hip_stream_t)stream); }
static hk_status_t hip_capture_begin(void *stream) {
  return HIP_CHECK(hipStreamBeginCapture, ((hk_hip_stream_t)stream, HK_HIP_STREAM_CAPTURE_MODE_RELAXED));
}
static hk_status_t hip_capture_end(void *stream, void **out_graph) {
  hk_hip_graph_t g = NULL;
  hk_status_t st = HIP_CHECK(hipStreamEndCapture, ((hk_hip_stream_t)stream, &g));
  *out_graph = g;
  return st;
}

/* ---- the tables ------------------------------------------------------------------------------ */
static const hk_gpu_ops_t k_hip_ops = {
    .backend = &hk_backend_hip,
    .driver = &g_hip_driver,
    .vendor = "HIP",
    .module_size = sizeof(hk_gpu_module_t), /* nothing of its own */
    .allow_bundle = true,                   /* code objects may be clang offload bundles */
    .elf_machine = HK_EM_AMDGPU,
    .enter = device_enter,
    .comm_check = hip_comm_check,
    .collective = hip_collective,
    .stream_create = hip_stream_create,
    .stream_destroy = hip_stream_destroy,
    .capture_begin = hip_capture_begin,
    .capture_end = hip_capture_end,
    HK_GPU_OPS_ENTRIES(hip),
};

static hk_status_t hip_module_load(const hk_pack_view_t *view, uint32_t target, int device,
                                   const hk_allocator_t *allocator, const void *code, size_t code_size,
                                   hk_module_t **out_module) {
  (void)code_size; /* every kernel's range lies inside it: verified */
  return hk_gpu_module_load(&k_hip_ops, view, target, device, allocator, code, false, out_module);
}

const hk_backend_t hk_backend_hip = {.name = "hip", .kind = HK_TARGET_HIP, HK_GPU_BACKEND_ENTRIES(hip),
                                     .collectives = true};
