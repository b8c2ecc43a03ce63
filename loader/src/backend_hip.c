/*
 * backend_hip.c -- runs "gfx*" targets through the HIP runtime, dlopen'ed from
 * libamdhip64.so.6, .so.5 or .so on first use (never linked; no HIP header: see
 * gpu_internal.h). Same structure as backend_cuda.c: one module per target and device
 * (each distinct code range loaded once with hipModuleLoadData), one hipGraph of kernel
 * nodes per session, instantiated once, its node parameters refreshed after a bind;
 * stream launches (hipModuleLaunchKernel) with HK_LAUNCH=stream or when the graph cannot
 * be built (ROCm releases before ~5.6 may refuse hipGraphAddKernelNode for a function
 * from hipModuleGetFunction; the fallback covers that). Padded runs' staging copies go on
 * the run's stream (hipMemsetAsync, hipMemcpyAsync device-to-device).
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
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gpu_internal.h"
#include "status_internal.h"
#include "util_internal.h"

static const char *const k_hip_libraries[] = {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};
#define HIP_PACKAGE "the ROCm HIP runtime (Debian: libamdhip64-5; ROCm repositories: hip-runtime-amd)"
#define HIP_MAX_DEVICES 64 /* devices whose ISA is cached; more are ignored */
#define HIP_ISA_MAX 128

static struct {
  pthread_mutex_t lock;
  bool probed, ok;
  char reason[512];
  void *dl;
  const char *library;
  bool overridden;
  hk_hip_symbols_t override;
  hk_hip_symbols_t sym;
  int device_count;
  char isa[HIP_MAX_DEVICES][HIP_ISA_MAX]; /* "" when unknown: runs nothing */
} g_hip = {.lock = PTHREAD_MUTEX_INITIALIZER};

#define HIP g_hip.sym

static const struct {
  const char *symbol, *alt;
  bool required;
  size_t offset;
} k_hip_symbols[] = {
#define HK_HIP_ENTRY(member, symbol, alt, required, ret, params) \
  {symbol, alt, required, offsetof(hk_hip_symbols_t, member)},
    HK_HIP_SYMBOLS(HK_HIP_ENTRY)
#undef HK_HIP_ENTRY
};

static void hip_describe_error(hk_hip_error_t r, char *name, size_t name_size, char *desc, size_t desc_size) {
  const char *n = HIP.hipGetErrorName ? HIP.hipGetErrorName(r) : NULL;
  const char *d = HIP.hipGetErrorString ? HIP.hipGetErrorString(r) : NULL;
  if (n) snprintf(name, name_size, "%s", n);
  else snprintf(name, name_size, "HIP error %d", r);
  snprintf(desc, desc_size, "%s", d ? d : "no description");
}

/* The check macro's body: HK_OK, or OUT_OF_MEMORY / DRIVER with
 * "hipXxx failed: hipErrorName (description)". */
static hk_status_t hip_status(hk_hip_error_t r, const char *call, const char *file, int line) {
  if (r == HK_HIP_SUCCESS) return HK_OK;
  char name[96], desc[256];
  hip_describe_error(r, name, sizeof name, desc, sizeof desc);
  return hk_error_set_at(r == HK_HIP_ERROR_OUT_OF_MEMORY ? HK_STATUS_OUT_OF_MEMORY : HK_STATUS_DRIVER, file, line,
                         "%s failed: %s (%s)", call, name, desc);
}
#define HIP_CHECK(fn, args) hip_status(HIP.fn args, #fn, __FILE__, __LINE__)

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

static void hip_probe_locked(void) {
  if (g_hip.probed) return;
  g_hip.probed = true;
  g_hip.ok = false;
  g_hip.device_count = 0;
  memset(&g_hip.sym, 0, sizeof g_hip.sym);
  if (g_hip.overridden) {
    g_hip.sym = g_hip.override;
    g_hip.library = "(override)";
  } else {
    const char *err = NULL;
    for (size_t i = 0; !g_hip.dl && i < sizeof k_hip_libraries / sizeof k_hip_libraries[0]; i++) {
      g_hip.dl = dlopen(k_hip_libraries[i], RTLD_NOW | RTLD_LOCAL);
      if (g_hip.dl) g_hip.library = k_hip_libraries[i];
      else if (!err) err = dlerror();
    }
    if (!g_hip.dl) {
      snprintf(g_hip.reason, sizeof g_hip.reason,
               "libamdhip64.so.6, libamdhip64.so.5 and libamdhip64.so not found (%s): install %s",
               err ? err : "dlopen failed", HIP_PACKAGE);
      return;
    }
    for (size_t i = 0; i < sizeof k_hip_symbols / sizeof k_hip_symbols[0]; i++) {
      void *p = dlsym(g_hip.dl, k_hip_symbols[i].symbol);
      if (!p && k_hip_symbols[i].alt) p = dlsym(g_hip.dl, k_hip_symbols[i].alt);
      if (!p && k_hip_symbols[i].required) {
        snprintf(g_hip.reason, sizeof g_hip.reason, "%s lacks %s: the HIP runtime is too old; update %s",
                 g_hip.library, k_hip_symbols[i].symbol, HIP_PACKAGE);
        return;
      }
      memcpy((char *)&g_hip.sym + k_hip_symbols[i].offset, &p, sizeof p);
    }
  }
  /* hipGetDeviceCount names the problem best (hipInit without a GPU says hipErrorInvalidDevice). */
  hk_hip_error_t init = HIP.hipInit(0);
  int count = 0;
  hk_hip_error_t r = HIP.hipGetDeviceCount(&count);
  if (r != HK_HIP_SUCCESS || count <= 0 || init != HK_HIP_SUCCESS) {
    char name[96], desc[256], iname[96], idesc[256];
    hip_describe_error(r == HK_HIP_SUCCESS && count <= 0 ? HK_HIP_ERROR_NO_DEVICE : r, name, sizeof name, desc,
                       sizeof desc);
    hip_describe_error(init, iname, sizeof iname, idesc, sizeof idesc);
    snprintf(g_hip.reason, sizeof g_hip.reason,
             "no AMD GPU found: hipGetDeviceCount returned %s (%.200s); hipInit returned %s", name, desc, iname);
    return;
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
  g_hip.device_count = count;
  g_hip.ok = true;
}

static bool hip_available(void) {
  pthread_mutex_lock(&g_hip.lock);
  hip_probe_locked();
  bool ok = g_hip.ok;
  pthread_mutex_unlock(&g_hip.lock);
  return ok;
}

static const char *hip_unavailable_reason(void) { return hip_available() ? "" : g_hip.reason; }

void hk_hip_override_symbols(const hk_hip_symbols_t *table) {
  pthread_mutex_lock(&g_hip.lock);
  g_hip.overridden = table != NULL;
  if (table) g_hip.override = *table;
  g_hip.probed = false;
  pthread_mutex_unlock(&g_hip.lock);
}

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
  if (!hip_available() || device < 0 || device >= g_hip.device_count) return 0;
  return hk_hip_target_rank(name, features, g_hip.isa[device]);
}

static void hip_describe(char *out, size_t size) {
  out[0] = '\0';
  if (!hip_available()) return;
  size_t used = 0;
  for (int i = 0; i < g_hip.device_count && used + 1 < size; i++) {
    int n = snprintf(out + used, size - used, "%s%s on device %d", i ? ", " : "",
                     g_hip.isa[i][0] ? g_hip.isa[i] : "an AMD GPU of unknown ISA", i);
    if (n < 0) break;
    used += (size_t)n;
  }
}

/* ---- modules ------------------------------------------------------------------------------- */
typedef struct hip_module {
  hk_module_t base;
  hk_hip_module_t *objects; /* one per distinct code range */
  uint32_t object_count;
  hk_hip_function_t *fns;   /* base.kernel_count entries */
} hip_module_t;

static hk_status_t device_enter(const hk_module_t *m) {
  int cur = -1;
  if (HIP.hipGetDevice(&cur) == HK_HIP_SUCCESS && cur == m->device) return HK_OK;
  return HIP_CHECK(hipSetDevice, (m->device));
}

static void hip_module_unload(hk_module_t *module) {
  if (!module) return;
  hip_module_t *m = (hip_module_t *)module;
  if (m->object_count) {
    (void)device_enter(module);
    for (uint32_t i = 0; i < m->object_count; i++)
      if (m->objects[i]) (void)HIP.hipModuleUnload(m->objects[i]);
  }
  hk_free(module->allocator, m->objects);
  hk_free(module->allocator, m->fns);
  hk_free(module->allocator, m);
}

typedef struct range_ref {
  uint64_t offset, size;
  uint32_t kernel;
} range_ref_t;

static int range_cmp(const void *a, const void *b) {
  const range_ref_t *x = a, *y = b;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  if (x->size != y->size) return x->size < y->size ? -1 : 1;
  return x->kernel < y->kernel ? -1 : x->kernel > y->kernel;
}

static hk_status_t load_objects(hip_module_t *m, const hk_pack_view_t *v, const hk_target_rec_t *t,
                                const char *tname, const uint8_t *code, range_ref_t *refs) {
  uint32_t n = t->kernel_count;
  for (uint32_t k = 0; k < n; k++) {
    const hk_kernel_rec_t *kr = &v->kernels[t->kernel_first + k];
    refs[k] = (range_ref_t){kr->code_offset, kr->code_size, k};
  }
  qsort(refs, n, sizeof *refs, range_cmp);
  char prefix[HK_MAX_NAME_LEN * 2 + 64];
  for (uint32_t i = 0; i < n; i++) {
    const range_ref_t *r = &refs[i];
    const char *kname = hk_pack_string(v, v->kernels[t->kernel_first + r->kernel].name);
    if (i == 0 || r->offset != refs[i - 1].offset || r->size != refs[i - 1].size) {
      const char *why;
      HK_FAIL_IF(!hk_gpu_image_ok(code + r->offset, (size_t)r->size, true, &why), HK_STATUS_CORRUPT,
                 "target %s: the code object of kernel %s (bytes [%llu, +%llu)) is invalid: %s", tname, kname,
                 (unsigned long long)r->offset, (unsigned long long)r->size, why);
      hk_hip_module_t obj = NULL;
      hk_status_t st = HIP_CHECK(hipModuleLoadData, (&obj, code + r->offset));
      if (st != HK_OK) {
        snprintf(prefix, sizeof prefix, "target %s: loading the code object of kernel %s", tname, kname);
        hk_error_prefix(prefix);
        return st;
      }
      m->objects[m->object_count++] = obj;
    }
    hk_status_t st = HIP_CHECK(hipModuleGetFunction, (&m->fns[r->kernel], m->objects[m->object_count - 1], kname));
    if (st != HK_OK) {
      snprintf(prefix, sizeof prefix, "target %s: kernel symbol \"%s\" is missing from its code object", tname, kname);
      hk_error_prefix(prefix);
      return st == HK_STATUS_DRIVER ? HK_STATUS_CORRUPT : st;
    }
  }
  return HK_OK;
}

static hk_status_t hip_module_load(const hk_pack_view_t *view, uint32_t target, int device,
                                   const hk_allocator_t *allocator, const void *code, size_t code_size,
                                   hk_module_t **out_module) {
  (void)code_size; /* every kernel's range lies inside it: verified */
  const hk_target_rec_t *t = &view->targets[target];
  const char *tname = hk_pack_string(view, t->name);
  HK_FAIL_IF(!hip_available(), HK_STATUS_UNAVAILABLE, "target %s: %s", tname, g_hip.reason);
  HK_FAIL_IF(device < 0 || device >= g_hip.device_count, HK_STATUS_NOT_FOUND,
             "target %s: no HIP device %d (this machine has %d)", tname, device, g_hip.device_count);
  hip_module_t *m = hk_calloc(allocator, 1, sizeof *m);
  HK_FAIL_IF(!m, HK_STATUS_OUT_OF_MEMORY, "out of memory loading target %s", tname);
  m->base.backend = &hk_backend_hip;
  m->base.allocator = allocator;
  m->base.target = target;
  m->base.kernel_count = t->kernel_count;
  m->base.device = device;
  size_t n = t->kernel_count ? t->kernel_count : 1;
  m->fns = hk_calloc(allocator, n, sizeof *m->fns);
  m->objects = hk_calloc(allocator, n, sizeof *m->objects);
  range_ref_t *refs = hk_calloc(allocator, n, sizeof *refs);
  hk_status_t st = HK_OK;
  if (!m->fns || !m->objects || !refs) st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory loading target %s", tname);
  if (st == HK_OK) st = device_enter(&m->base);
  if (st == HK_OK) st = load_objects(m, view, t, tname, code, refs);
  hk_free(allocator, refs);
  if (st != HK_OK) {
    hip_module_unload(&m->base);
    return st;
  }
  *out_module = &m->base;
  return HK_OK;
}

/* ---- sessions -------------------------------------------------------------------------- */
typedef struct hip_session {
  hk_backend_session_t base;
  hk_hip_graph_t graph; /* NULL: stream launches */
  hk_hip_graph_exec_t exec;
  hk_hip_graph_node_t *nodes;
  bool refreshed;
  uint64_t generation;
} hip_session_t;

static void node_params(const hip_module_t *m, const hk_launch_desc_t *l, hk_hip_kernel_node_params_t *p) {
  memset(p, 0, sizeof *p);
  p->func = (void *)m->fns[l->kernel];
  p->gridDim = (hk_hip_dim3_t){l->grid[0], l->grid[1], l->grid[2]};
  p->blockDim = (hk_hip_dim3_t){l->block[0], l->block[1], l->block[2]};
  p->sharedMemBytes = l->shared_bytes;
  p->kernelParams = l->args;
}

static bool graph_api_present(void) {
  return HIP.hipGraphCreate && HIP.hipGraphAddKernelNode && HIP.hipGraphInstantiate && HIP.hipGraphLaunch &&
         HIP.hipGraphExecKernelNodeSetParams && HIP.hipGraphExecDestroy && HIP.hipGraphDestroy;
}

static void destroy_graph(hip_session_t *s) {
  if (s->exec) (void)HIP.hipGraphExecDestroy(s->exec);
  if (s->graph) (void)HIP.hipGraphDestroy(s->graph);
  s->exec = NULL;
  s->graph = NULL;
}

static hk_status_t build_graph(hip_session_t *s, const hk_allocator_t *a) {
  const hip_module_t *m = (const hip_module_t *)s->base.module;
  uint32_t max_deps = 0;
  for (uint32_t i = 0; i < s->base.launch_count; i++)
    if (s->base.launches[i].dep_count > max_deps) max_deps = s->base.launches[i].dep_count;
  hk_hip_graph_node_t *deps = hk_calloc(a, max_deps ? max_deps : 1, sizeof *deps);
  HK_FAIL_IF(!deps, HK_STATUS_OUT_OF_MEMORY, "out of memory building a HIP graph");
  hk_status_t st = HIP_CHECK(hipGraphCreate, (&s->graph, 0));
  for (uint32_t i = 0; st == HK_OK && i < s->base.launch_count; i++) {
    const hk_launch_desc_t *l = &s->base.launches[i];
    for (uint32_t d = 0; d < l->dep_count; d++) deps[d] = s->nodes[l->deps[d]];
    hk_hip_kernel_node_params_t p;
    node_params(m, l, &p);
    st = HIP_CHECK(hipGraphAddKernelNode, (&s->nodes[i], s->graph, deps, l->dep_count, &p));
  }
  hk_free(a, deps);
  if (st == HK_OK) {
    char log[256] = "";
    st = HIP_CHECK(hipGraphInstantiate, (&s->exec, s->graph, NULL, log, sizeof log));
  }
  if (st != HK_OK) destroy_graph(s);
  return st;
}

static void hip_session_release(hk_backend_session_t *session) {
  if (!session) return;
  hip_session_t *s = (hip_session_t *)session;
  const hk_allocator_t *a = session->module->allocator;
  (void)device_enter(session->module);
  destroy_graph(s);
  if (session->workspace) (void)HIP.hipFree(session->workspace);
  hk_free(a, s->nodes);
  hk_free(a, s);
}

static hk_status_t hip_session_prepare(hk_module_t *module, uint64_t workspace_bytes, const hk_launch_desc_t *launches,
                                       uint32_t launch_count, hk_backend_session_t **out_session) {
  const hk_allocator_t *a = module->allocator;
  HK_RETURN_IF_ERROR(device_enter(module));
  hip_session_t *s = hk_calloc(a, 1, sizeof *s);
  HK_FAIL_IF(!s, HK_STATUS_OUT_OF_MEMORY, "out of memory creating a HIP session");
  s->base.backend = &hk_backend_hip;
  s->base.module = module;
  s->base.launches = launches;
  s->base.launch_count = launch_count;
  s->base.workspace_bytes = workspace_bytes;
  hk_status_t st = HK_OK;
  if (workspace_bytes > SIZE_MAX) {
    st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "a %llu-byte workspace does not fit in size_t",
                  (unsigned long long)workspace_bytes);
  } else if (workspace_bytes > 0) {
    st = HIP_CHECK(hipMalloc, (&s->base.workspace, (size_t)workspace_bytes));
    if (st != HK_OK) {
      s->base.workspace = NULL;
      char prefix[96];
      snprintf(prefix, sizeof prefix, "allocating a %llu-byte workspace", (unsigned long long)workspace_bytes);
      hk_error_prefix(prefix);
    }
  }
  const char *mode = getenv("HK_LAUNCH");
  if (st == HK_OK && !(mode && strcmp(mode, "stream") == 0) && graph_api_present() && launch_count > 0) {
    s->nodes = hk_calloc(a, launch_count, sizeof *s->nodes);
    if (!s->nodes) st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory creating a HIP session");
    else if (build_graph(s, a) != HK_OK) hk_error_clear(); /* not fatal: launch on the stream instead */
  }
  if (st != HK_OK) {
    hip_session_release(&s->base);
    return st;
  }
  *out_session = &s->base;
  return HK_OK;
}

static hk_status_t hip_run(hk_backend_session_t *session, void *stream) {
  hip_session_t *s = (hip_session_t *)session;
  const hip_module_t *m = (const hip_module_t *)session->module;
  HK_RETURN_IF_ERROR(device_enter(session->module));
  if (s->graph) {
    if (!s->refreshed || s->generation != session->bind_generation) {
      s->refreshed = false;
      for (uint32_t i = 0; i < session->launch_count; i++) {
        hk_hip_kernel_node_params_t p;
        node_params(m, &session->launches[i], &p);
        HK_RETURN_IF_ERROR(HIP_CHECK(hipGraphExecKernelNodeSetParams, (s->exec, s->nodes[i], &p)));
      }
      s->refreshed = true;
      s->generation = session->bind_generation;
    }
    return HIP_CHECK(hipGraphLaunch, (s->exec, (hk_hip_stream_t)stream));
  }
  for (uint32_t i = 0; i < session->launch_count; i++) {
    const hk_launch_desc_t *l = &session->launches[i];
    HK_RETURN_IF_ERROR(HIP_CHECK(hipModuleLaunchKernel,
                                 (m->fns[l->kernel], l->grid[0], l->grid[1], l->grid[2], l->block[0], l->block[1],
                                  l->block[2], l->shared_bytes, (hk_hip_stream_t)stream, l->args, NULL)));
  }
  return HK_OK;
}

/* ---- profiling ------------------------------------------------------------------------------ */
/* As cuda_profile: each launch alone on the stream between two events, one synchronization
 * per pass. */
static hk_status_t hip_profile(hk_backend_session_t *session, void *stream, uint32_t passes, double *out_us) {
  const hip_module_t *m = (const hip_module_t *)session->module;
  const hk_allocator_t *a = session->module->allocator;
  HK_FAIL_IF(!HIP.hipEventCreate || !HIP.hipEventRecord || !HIP.hipEventSynchronize || !HIP.hipEventElapsedTime ||
                 !HIP.hipEventDestroy,
             HK_STATUS_UNAVAILABLE, "this HIP runtime (%s) lacks the event API (hipEventCreate, hipEventRecord, "
             "hipEventSynchronize, hipEventElapsedTime, hipEventDestroy) that timing launches needs",
             g_hip.library ? g_hip.library : "overridden");
  uint32_t n = session->launch_count;
  if (n == 0) return HK_OK;
  HK_RETURN_IF_ERROR(device_enter(session->module));
  hk_hip_event_t *ev = hk_calloc(a, (size_t)n * 2, sizeof *ev);
  HK_FAIL_IF(!ev, HK_STATUS_OUT_OF_MEMORY, "out of memory creating %u timing events", n * 2);
  hk_status_t st = HK_OK;
  for (uint32_t i = 0; i < 2 * n && st == HK_OK; i++) st = HIP_CHECK(hipEventCreate, (&ev[i]));
  hk_hip_stream_t hs = (hk_hip_stream_t)stream;
  for (uint32_t p = 0; p < passes && st == HK_OK; p++) {
    for (uint32_t i = 0; i < n && st == HK_OK; i++) {
      const hk_launch_desc_t *l = &session->launches[i];
      st = HIP_CHECK(hipEventRecord, (ev[2 * i], hs));
      if (st == HK_OK)
        st = HIP_CHECK(hipModuleLaunchKernel, (m->fns[l->kernel], l->grid[0], l->grid[1], l->grid[2], l->block[0],
                                               l->block[1], l->block[2], l->shared_bytes, hs, l->args, NULL));
      if (st == HK_OK) st = HIP_CHECK(hipEventRecord, (ev[2 * i + 1], hs));
    }
    if (st == HK_OK) st = HIP_CHECK(hipEventSynchronize, (ev[2 * n - 1]));
    for (uint32_t i = 0; i < n && st == HK_OK; i++) {
      float ms = 0;
      st = HIP_CHECK(hipEventElapsedTime, (&ms, ev[2 * i], ev[2 * i + 1]));
      out_us[(size_t)i * passes + p] = (double)ms * 1e3;
    }
  }
  for (uint32_t i = 0; i < 2 * n; i++)
    if (ev[i]) (void)HIP.hipEventDestroy(ev[i]);
  hk_free(a, ev);
  return st;
}

/* ---- memory -------------------------------------------------------------------------------- */
static hk_status_t hip_mem_alloc(hk_module_t *module, size_t bytes, void **out_ptr) {
  HK_RETURN_IF_ERROR(device_enter(module));
  return HIP_CHECK(hipMalloc, (out_ptr, bytes ? bytes : 1));
}

static void hip_mem_free(hk_module_t *module, void *ptr) {
  if (device_enter(module) == HK_OK) (void)HIP.hipFree(ptr);
}

static hk_status_t hip_mem_copy(hk_module_t *module, void *dst, const void *src, size_t bytes, hk_copy_kind_t kind) {
  if (bytes == 0) return HK_OK;
  HK_RETURN_IF_ERROR(device_enter(module));
  int k = kind == HK_COPY_HOST_TO_DEVICE   ? HK_HIP_MEMCPY_HOST_TO_DEVICE
          : kind == HK_COPY_DEVICE_TO_HOST ? HK_HIP_MEMCPY_DEVICE_TO_HOST
                                           : HK_HIP_MEMCPY_DEVICE_TO_DEVICE;
  return HIP_CHECK(hipMemcpy, (dst, src, bytes, k));
}

static hk_status_t hip_synchronize(hk_module_t *module, void *stream) {
  HK_RETURN_IF_ERROR(device_enter(module));
  if (stream) return HIP_CHECK(hipStreamSynchronize, ((hk_hip_stream_t)stream));
  return HIP_CHECK(hipDeviceSynchronize, ());
}

static hk_status_t hip_copy_async(hk_module_t *module, void *dst, const void *src, size_t bytes, void *stream) {
  if (bytes == 0) return HK_OK;
  HK_RETURN_IF_ERROR(device_enter(module));
  return HIP_CHECK(hipMemcpyAsync, (dst, src, bytes, HK_HIP_MEMCPY_DEVICE_TO_DEVICE, (hk_hip_stream_t)stream));
}

static hk_status_t hip_zero_async(hk_module_t *module, void *dst, size_t bytes, void *stream) {
  if (bytes == 0) return HK_OK;
  HK_RETURN_IF_ERROR(device_enter(module));
  return HIP_CHECK(hipMemsetAsync, (dst, 0, bytes, (hk_hip_stream_t)stream));
}

const hk_backend_t hk_backend_hip = {
    .name = "hip",
    .kind = HK_TARGET_HIP,
    .available = hip_available,
    .runs_target = hip_runs_target,
    .describe = hip_describe,
    .unavailable_reason = hip_unavailable_reason,
    .module_load = hip_module_load,
    .module_unload = hip_module_unload,
    .session_prepare = hip_session_prepare,
    .run = hip_run,
    .session_release = hip_session_release,
    .mem_alloc = hip_mem_alloc,
    .mem_free = hip_mem_free,
    .mem_copy = hip_mem_copy,
    .synchronize = hip_synchronize,
    .profile = hip_profile,
    .copy_async = hip_copy_async,
    .zero_async = hip_zero_async,
};
