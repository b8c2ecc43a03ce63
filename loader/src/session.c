/*
 * session.c -- a session replays one graph (one target, one batch size): it owns the
 * argument arrays of every launch, the pointers of bound tensors and the backend's
 * per-session state (workspace). Everything is allocated at create; bind and run
 * allocate nothing.
 *
 * Argument storage: each tensor has one slot in tensor_ptrs[]; a tensor argument
 * points at that slot, so binding a buffer updates every launch that uses it.
 * Intermediate tensors' slots point into the workspace.
 */
#include <stdio.h>
#include <stdlib.h> /* qsort */
#include <string.h>

#include "backend.h"
#include "pack_internal.h"
#include "status_internal.h"
#include "util_internal.h"

/* Every bound buffer's address is a multiple of this: GPU kernels use 16-byte vector
 * loads on rows whose length allows it (hkc_kernel_key_t.align). */
#define HK_BIND_ALIGN 16u

typedef union hk_arg_slot {
  void *ptr;     /* HK_ARG_NULL */
  int64_t i64;   /* HK_ARG_I64 */
  float f32;     /* HK_ARG_F32 */
} hk_arg_slot_t;

typedef struct hk_app_tensor {
  uint32_t tensor;        /* index in the pack's tensor table */
  hk_tensor_info_t info;
  bool bound;
} hk_app_tensor_t;

struct hk_session {
  hk_pack_t *pack;
  const hk_pack_view_t *view;
  const hk_allocator_t *allocator;
  uint32_t target, graph;
  uint64_t batch;
  hk_module_t *module;           /* borrowed from the pack's cache */
  hk_backend_session_t *backend; /* owned */
  hk_app_tensor_t *app;          /* inputs, outputs, params in tensor-table order */
  uint32_t app_count;
  void **tensor_ptrs;            /* one slot per pack tensor */
  void **arg_ptrs;               /* all launches' argument arrays, concatenated */
  hk_arg_slot_t *arg_slots;      /* values of non-tensor arguments */
  hk_launch_desc_t *launches;
  uint32_t launch_count;
  char error[HK_ERROR_MAX];
};

HK_API void hk_session_destroy(hk_session_t *s) {
  if (!s) return;
  if (s->backend) s->backend->backend->session_release(s->backend);
  const hk_allocator_t *a = s->allocator;
  hk_free(a, s->app);
  hk_free(a, s->tensor_ptrs);
  hk_free(a, s->arg_ptrs);
  hk_free(a, s->arg_slots);
  hk_free(a, s->launches);
  hk_free(a, s);
}

HK_API const char *hk_session_error(const hk_session_t *s) { return s ? s->error : ""; }

HK_API const char *hk_session_target(const hk_session_t *s) {
  return hk_pack_string(s->view, s->view->targets[s->target].name);
}

HK_API uint32_t hk_session_tensor_count(const hk_session_t *s) { return s->app_count; }

HK_API hk_status_t hk_session_tensor_info(const hk_session_t *s, uint32_t index, hk_tensor_info_t *out_info) {
  HK_FAIL_IF(!s || !out_info, HK_STATUS_INVALID_ARGUMENT, "session and out_info must not be NULL");
  HK_FAIL_IF(index >= s->app_count, HK_STATUS_NOT_FOUND, "tensor index %u out of range (%u tensors)", index,
             s->app_count);
  *out_info = s->app[index].info;
  return HK_OK;
}

/* "f16 [8,128,192]" */
static void describe_shape(const hk_tensor_info_t *info, char *out, size_t size) {
  int n = snprintf(out, size, "%s [", hk_dtype_label(info->element_type));
  for (uint32_t d = 0; d < info->rank && n > 0 && (size_t)n < size; d++)
    n += snprintf(out + n, size - (size_t)n, "%s%lld", d ? "," : "", (long long)info->dims[d]);
  if (n > 0 && (size_t)n < size) snprintf(out + n, size - (size_t)n, "]");
}

static void list_names(const hk_session_t *s, bool only_unbound, char *out, size_t size) {
  out[0] = '\0';
  size_t used = 0;
  for (uint32_t i = 0; i < s->app_count; i++) {
    if (only_unbound && s->app[i].bound) continue;
    if (used + 4 >= size) break;
    int n = snprintf(out + used, size - used, "%s%s", used ? ", " : "", s->app[i].info.name);
    if (n < 0 || (size_t)n >= size - used) {
      memcpy(out + size - 4, "...", 4);
      break;
    }
    used += (size_t)n;
  }
}

/* Builds the session's tables for graph s->graph. Errors: OUT_OF_MEMORY. */
static hk_status_t session_build(hk_session_t *s) {
  const hk_pack_view_t *v = s->view;
  const hk_graph_rec_t *g = &v->graphs[s->graph];
  const hk_target_rec_t *t = &v->targets[s->target];
  const hk_allocator_t *a = s->allocator;

  for (uint32_t i = 0; i < v->tensor_count; i++)
    if (v->tensors[i].role != HK_ROLE_INTERMEDIATE) s->app_count++;
  uint64_t total_args = 0;
  for (uint32_t j = 0; j < g->node_count; j++) total_args += v->nodes[g->node_first + j].arg_count;

  s->app = hk_calloc(a, s->app_count ? s->app_count : 1, sizeof *s->app);
  s->tensor_ptrs = hk_calloc(a, v->tensor_count ? v->tensor_count : 1, sizeof *s->tensor_ptrs);
  s->arg_ptrs = hk_calloc(a, total_args ? (size_t)total_args : 1, sizeof *s->arg_ptrs);
  s->arg_slots = hk_calloc(a, total_args ? (size_t)total_args : 1, sizeof *s->arg_slots);
  s->launches = hk_calloc(a, g->node_count ? g->node_count : 1, sizeof *s->launches);
  HK_FAIL_IF(!s->app || !s->tensor_ptrs || !s->arg_ptrs || !s->arg_slots || !s->launches, HK_STATUS_OUT_OF_MEMORY,
             "out of memory creating a session");
  s->launch_count = g->node_count;

  uint32_t k = 0;
  for (uint32_t i = 0; i < v->tensor_count; i++) {
    const hk_tensor_rec_t *tr = &v->tensors[i];
    if (tr->role == HK_ROLE_INTERMEDIATE) continue;
    hk_app_tensor_t *at = &s->app[k++];
    at->tensor = i;
    at->info.name = hk_pack_string(v, tr->name);
    at->info.role = (hk_tensor_role_t)tr->role; /* INPUT/OUTPUT/PARAM share numbers */
    at->info.element_type = (hk_element_type_t)tr->dtype;
    at->info.rank = tr->rank;
    uint64_t bytes = 0;
    (void)hk_tensor_shape(tr, s->batch, at->info.dims, &bytes); /* verified for every batch */
    at->info.bytes = (size_t)bytes;
  }

  size_t next = 0;
  for (uint32_t j = 0; j < g->node_count; j++) {
    const hk_node_rec_t *n = &v->nodes[g->node_first + j];
    hk_launch_desc_t *l = &s->launches[j];
    l->kernel = n->kernel - t->kernel_first;
    memcpy(l->grid, n->grid, sizeof l->grid);
    memcpy(l->block, n->block, sizeof l->block);
    l->shared_bytes = n->shared_bytes;
    l->args = &s->arg_ptrs[next];
    l->arg_count = n->arg_count;
    l->deps = v->deps + n->dep_first; /* graph-local, earlier nodes: verified */
    l->dep_count = n->dep_count;
    for (uint32_t i = 0; i < n->arg_count; i++, next++) {
      const hk_arg_rec_t *ar = &v->args[n->arg_first + i];
      hk_arg_slot_t *slot = &s->arg_slots[next];
      switch ((hk_arg_kind_t)ar->kind) {
      case HK_ARG_TENSOR: s->arg_ptrs[next] = &s->tensor_ptrs[ar->value]; continue;
      case HK_ARG_NULL: slot->ptr = NULL; break;
      case HK_ARG_I64: slot->i64 = (int64_t)ar->value; break;
      case HK_ARG_F32: {
        uint32_t bits = (uint32_t)ar->value;
        memcpy(&slot->f32, &bits, sizeof bits);
        break;
      }
      case HK_ARG_KIND_COUNT_: break; /* excluded by verify */
      }
      s->arg_ptrs[next] = slot;
    }
  }
  return HK_OK;
}

static hk_status_t session_create(hk_pack_t *pack, const hk_session_options_t *options, hk_session_t **out_session) {
  const hk_pack_view_t *v = hk_pack_view(pack);
  uint32_t target;
  HK_FAIL_IF(options->device < 0, HK_STATUS_INVALID_ARGUMENT, "device ordinal %d is negative", options->device);
  HK_RETURN_IF_ERROR(hk_pack_select_target_on(pack, options->target, options->device, &target));
  uint32_t graph;
  if (!hk_pack_find_graph(v, target, options->batch, &graph)) {
    char sizes[16 * 24] = "";
    size_t used = 0;
    for (uint32_t i = 0; i < v->manifest->batch_count; i++)
      used += (size_t)snprintf(sizes + used, sizeof sizes - used, "%s%llu", i ? ", " : "",
                               (unsigned long long)v->manifest->batch_sizes[i]);
    return HK_ERROR(HK_STATUS_NOT_FOUND, "batch size %llu was not built into the artifact (batch sizes: %s)",
                    (unsigned long long)options->batch, sizes);
  }
  hk_module_t *module;
  HK_RETURN_IF_ERROR(hk_pack_module_on(pack, target, options->device, &module));

  const hk_allocator_t *a = hk_pack_allocator(pack);
  hk_session_t *s = hk_calloc(a, 1, sizeof *s);
  HK_FAIL_IF(!s, HK_STATUS_OUT_OF_MEMORY, "out of memory creating a session");
  s->pack = pack;
  s->view = v;
  s->allocator = a;
  s->target = target;
  s->graph = graph;
  s->batch = options->batch;
  s->module = module;
  hk_status_t st = session_build(s);
  const hk_graph_rec_t *g = &v->graphs[graph];
  if (st == HK_OK)
    st = module->backend->session_prepare(module, g->workspace_bytes, s->launches, s->launch_count, &s->backend);
  if (st != HK_OK) {
    hk_session_destroy(s);
    return st;
  }
  for (uint32_t i = 0; i < v->tensor_count; i++) {
    uint64_t p = v->placements[g->placement_first + i];
    if (p != HK_PLACEMENT_NONE) s->tensor_ptrs[i] = (char *)s->backend->workspace + p; /* fits: verified */
  }
  *out_session = s;
  return HK_OK;
}

HK_API hk_status_t hk_session_create(hk_pack_t *pack, const hk_session_options_t *options,
                                     hk_session_t **out_session) {
  HK_FAIL_IF(!pack || !options || !out_session, HK_STATUS_INVALID_ARGUMENT,
             "pack, options and out_session must not be NULL");
  *out_session = NULL;
  hk_status_t st = session_create(pack, options, out_session);
  if (st != HK_OK) hk_pack_note_error(pack);
  return st;
}

HK_API hk_status_t hk_session_bind(hk_session_t *s, const char *name, void *data, size_t bytes) {
  HK_FAIL_IF(!s || !name, HK_STATUS_INVALID_ARGUMENT, "session and name must not be NULL");
  hk_status_t st = HK_OK;
  for (uint32_t i = 0; i < s->app_count; i++) {
    hk_app_tensor_t *at = &s->app[i];
    if (strcmp(at->info.name, name) != 0) continue;
    if (bytes != at->info.bytes) {
      char shape[128];
      describe_shape(&at->info, shape, sizeof shape);
      st = HK_ERROR(HK_STATUS_INVALID_ARGUMENT, "tensor %s expects %zu bytes (%s), got %zu", name, at->info.bytes,
                    shape, bytes);
    } else if (!data) {
      st = HK_ERROR(HK_STATUS_INVALID_ARGUMENT, "tensor %s: data is NULL", name);
    } else if (((uintptr_t)data & (HK_BIND_ALIGN - 1)) != 0) {
      st = HK_ERROR(HK_STATUS_INVALID_ARGUMENT,
                    "tensor %s: buffer %p is not %u-byte aligned (kernels load 16-byte vectors; "
                    "malloc, cudaMalloc and hk_session_alloc all align enough)", name, data, HK_BIND_ALIGN);
    } else {
      s->tensor_ptrs[at->tensor] = data;
      at->bound = true;
      s->backend->bind_generation++;
      return HK_OK;
    }
    hk_error_copy(s->error, sizeof s->error);
    return st;
  }
  char names[600];
  list_names(s, false, names, sizeof names);
  st = HK_ERROR(HK_STATUS_NOT_FOUND, "no tensor named \"%s\" to bind (tensors: %s)", name, names);
  hk_error_copy(s->error, sizeof s->error);
  return st;
}

HK_API hk_status_t hk_session_run(hk_session_t *s, void *stream) {
  HK_FAIL_IF(!s, HK_STATUS_INVALID_ARGUMENT, "session is NULL");
  for (uint32_t i = 0; i < s->app_count; i++) {
    if (s->app[i].bound) continue;
    char names[600];
    list_names(s, true, names, sizeof names);
    hk_status_t st = HK_ERROR(HK_STATUS_FAILED_PRECONDITION, "run before every tensor is bound: unbound %s", names);
    hk_error_copy(s->error, sizeof s->error);
    return st;
  }
  hk_status_t st = s->backend->backend->run(s->backend, stream);
  if (st != HK_OK) hk_error_copy(s->error, sizeof s->error);
  return st;
}

/* ---- memory ------------------------------------------------------------------------------ */
HK_API hk_status_t hk_session_alloc(hk_session_t *s, size_t bytes, void **out_ptr) {
  HK_FAIL_IF(!s || !out_ptr, HK_STATUS_INVALID_ARGUMENT, "session and out_ptr must not be NULL");
  *out_ptr = NULL;
  hk_status_t st = s->module->backend->mem_alloc(s->module, bytes, out_ptr);
  if (st != HK_OK) hk_error_copy(s->error, sizeof s->error);
  return st;
}

HK_API void hk_session_free(hk_session_t *s, void *ptr) {
  if (s && ptr) s->module->backend->mem_free(s->module, ptr);
}

HK_API hk_status_t hk_session_copy(hk_session_t *s, void *dst, const void *src, size_t bytes, hk_copy_kind_t kind) {
  HK_FAIL_IF(!s || ((!dst || !src) && bytes), HK_STATUS_INVALID_ARGUMENT, "session, dst and src must not be NULL");
  HK_FAIL_IF(kind > HK_COPY_DEVICE_TO_DEVICE, HK_STATUS_INVALID_ARGUMENT, "unknown copy kind %d", (int)kind);
  hk_status_t st = s->module->backend->mem_copy(s->module, dst, src, bytes, kind);
  if (st != HK_OK) hk_error_copy(s->error, sizeof s->error);
  return st;
}

HK_API hk_status_t hk_session_synchronize(hk_session_t *s, void *stream) {
  HK_FAIL_IF(!s, HK_STATUS_INVALID_ARGUMENT, "session is NULL");
  hk_status_t st = s->module->backend->synchronize(s->module, stream);
  if (st != HK_OK) hk_error_copy(s->error, sizeof s->error);
  return st;
}

/* ---- profiling ----------------------------------------------------------------------------
 * Self-contained on purpose: reads only s->view, s->graph, s->launches and s->backend. */

/* Most passes hk_session_profile runs: bounds the sample buffer (8 bytes x launches x passes). */
#define HK_PROFILE_MAX_REPEATS 100000u

HK_API uint32_t hk_session_launch_count(const hk_session_t *s) { return s ? s->launch_count : 0; }

HK_API hk_status_t hk_session_launch_info(const hk_session_t *s, uint32_t index, hk_launch_info_t *out_info) {
  HK_FAIL_IF(!s || !out_info, HK_STATUS_INVALID_ARGUMENT, "session and out_info must not be NULL");
  HK_FAIL_IF(index >= s->launch_count, HK_STATUS_NOT_FOUND, "launch index %u out of range (%u launches)", index,
             s->launch_count);
  const hk_pack_view_t *v = s->view;
  uint32_t node = v->graphs[s->graph].node_first + index; /* in range: verified */
  const hk_node_rec_t *n = &v->nodes[node];
  memset(out_info, 0, sizeof *out_info);
  out_info->kernel = hk_pack_string(v, v->kernels[n->kernel].name);
  out_info->nodes = hk_pack_string(v, n->name);
  if (v->plan_nodes) { /* packs before format 1.1 have no estimates: zeros */
    out_info->bytes = v->plan_nodes[node].bytes;
    out_info->flops = v->plan_nodes[node].flops;
    out_info->matrix = (v->plan_nodes[node].flags & HK_PLAN_MATRIX) != 0;
  }
  return HK_OK;
}

static int cmp_us(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static hk_status_t session_profile(hk_session_t *s, void *stream, uint32_t repeats, double *out_us) {
  HK_FAIL_IF(repeats == 0 || repeats > HK_PROFILE_MAX_REPEATS, HK_STATUS_INVALID_ARGUMENT,
             "repeats must be 1..%u, got %u", HK_PROFILE_MAX_REPEATS, repeats);
  for (uint32_t i = 0; i < s->app_count; i++) {
    if (s->app[i].bound) continue;
    char names[600];
    list_names(s, true, names, sizeof names);
    return HK_ERROR(HK_STATUS_FAILED_PRECONDITION, "profile before every tensor is bound: unbound %s", names);
  }
  const hk_backend_t *b = s->backend->backend;
  HK_FAIL_IF(!b->profile, HK_STATUS_UNAVAILABLE, "the %s backend cannot time launches", b->name);
  uint32_t n = s->launch_count, passes = repeats + 1; /* pass 0 warms up: not counted */
  if (n == 0) return HK_OK;
  double *samples = hk_calloc(s->allocator, (size_t)n * passes, sizeof *samples);
  HK_FAIL_IF(!samples, HK_STATUS_OUT_OF_MEMORY, "out of memory for %u x %u timing samples", n, passes);
  hk_status_t st = b->profile(s->backend, stream, passes, samples);
  for (uint32_t i = 0; st == HK_OK && i < n; i++) {
    double *t = samples + (size_t)i * passes + 1;
    qsort(t, repeats, sizeof *t, cmp_us);
    out_us[i] = repeats % 2 ? t[repeats / 2] : 0.5 * (t[repeats / 2 - 1] + t[repeats / 2]);
  }
  hk_free(s->allocator, samples);
  return st;
}

HK_API hk_status_t hk_session_profile(hk_session_t *s, void *stream, uint32_t repeats, double *out_us) {
  HK_FAIL_IF(!s || !out_us, HK_STATUS_INVALID_ARGUMENT, "session and out_us must not be NULL");
  hk_status_t st = session_profile(s, stream, repeats, out_us);
  if (st != HK_OK) hk_error_copy(s->error, sizeof s->error);
  return st;
}
