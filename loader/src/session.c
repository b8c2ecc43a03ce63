/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session.c -- a session replays one target of a pack at a real batch size n. It keeps
 * the application's bound buffers and, per batch bucket, what replaying that bucket's
 * graph needs (hk_bucket_t): the argument arrays of every launch, one pointer slot per
 * tensor and the backend's per-session state (workspace arena, instantiated GPU graph).
 * The bucket that runs n is the bucket equal to n, else (batch policy pad) the smallest
 * one above it. A bucket's state is built the first time it is needed -- create builds
 * the first one, a run after hk_session_set_batch the others -- and kept until destroy.
 * bind allocates nothing; run allocates only when it builds a bucket's state.
 *
 * Argument storage: each tensor has one slot in a bucket's tensor_ptrs[]; a tensor
 * argument points at that slot, so changing a slot updates every launch that uses it.
 * Intermediates' slots point into the workspace. Before each launch of the graph the
 * slots of application tensors are set to the bound buffers (or staging buffers, below),
 * and the backend is told through bind_generation when one changed.
 *
 * Scratch and semaphores (HK_ARG_SCRATCH, HK_ARG_SEMAPHORE, format 1.3): a scratch argument
 * points at its byte range of the workspace (the plan made it the launch's own while it
 * runs). A graph's semaphore_count u32 counters lie in the bucket's arena after the workspace
 * and the staging buffers; they are zeroed once, when the bucket's memory is allocated, and
 * nothing but the kernels touches them again (each kernel leaves its counters at zero), so
 * runs, graph replays and captured runs need no reset.
 *
 * TMA tensor maps (HK_ARG_TMAP, CUDA): the argument is a 128-byte descriptor that holds a
 * tensor's address, so it cannot point at the slot. A bucket keeps one map per TMAP
 * argument (64-byte-aligned storage from the session allocator) with what it describes
 * (the tensor's matrix view at the bucket's batch, box, swizzle); the argument points at
 * the map. A bucket is refused (UNAVAILABLE) when its backend cannot build maps. A run
 * (profiling runs included) encodes every map of the bucket through the backend from the
 * current slots when a slot moved or the maps were never built, and then moves
 * bind_generation, so a GPU graph refreshes its node parameters (no re-instantiation).
 *
 * Padding (n < the bucket b): pad_layout_check() has made sure that every tensor whose
 * size depends on batch has batch only in its leading dim (mul*batch, no offset, rank
 * >= 2), so the n real rows are a prefix of the bucket's tensor and no op reduces over
 * that dim: rows never mix. The graph's slots of batch-dependent application tensors then
 * point at staging buffers of bucket size, carved from the end of the workspace arena
 * (one backend allocation, HK_STAGING_ALIGN-aligned). A run copies each input's (and
 * batch-dependent param's) n-row prefix in, launches, and copies each output's prefix
 * back, all on the run's stream. Rows >= n of input staging hold zeros (the whole staging
 * area is zeroed at its first use, and rows a larger n left behind are zeroed again when
 * n shrinks), so padded runs are reproducible. When n equals the bucket, tensors are
 * bound directly and nothing is copied.
 */
#include <assert.h>
#include <stdatomic.h>
#include <stddef.h> /* offsetof */
#include <stdio.h>
#include <stdlib.h> /* qsort */
#include <string.h>

#include "backend.h"
#include "pack_internal.h"
#include "session_internal.h"
#include "host_group_internal.h"
#include "status_internal.h"
#include "util_internal.h"

/* Every bound buffer's address is a multiple of this: GPU kernels use 16-byte vector
 * loads on rows whose length allows it (hkc_kernel_key_t.align). */
#define HK_BIND_ALIGN 16u
/* Staging buffers start at multiples of this from the arena base (which backends align
 * at least as much): what a device allocation would give the kernels. */
#define HK_STAGING_ALIGN 256u
#define HK_NO_STAGING UINT64_MAX

typedef union hk_arg_slot {
  void *ptr;     /* HK_ARG_NULL */
  int64_t i64;   /* HK_ARG_I64 */
  float f32;     /* HK_ARG_F32 */
} hk_arg_slot_t;

typedef struct hk_app_tensor {
  uint32_t tensor;        /* index in the pack's tensor table */
  hk_tensor_info_t info;  /* resolved at the session's real batch */
  void *data;             /* the bound buffer; NULL when unbound */
  void *owned;            /* memory of the session's device that the session allocated for this
                             tensor (hk_session_bind_weights) and frees when the tensor is rebound,
                             unbound by a batch change, or the session destroyed; NULL if none */
  bool batched;           /* some dim depends on batch */
} hk_app_tensor_t;

/* One TMA tensor map argument (HK_ARG_TMAP) of a bucket's graph. */
typedef struct hk_bucket_tmap {
  void *map;             /* HK_TMAP_BYTES, HK_TMAP_ALIGN-aligned, in the bucket's tmap_block;
                            the argument's arg_ptrs entry points here */
  uint32_t tensor;       /* whose slot (tensor_ptrs) is the map's global address */
  uint32_t launch;       /* graph-local launch index, for messages */
  hk_tmap_desc_t desc;   /* the tensor's matrix view at the graph's batch, box, swizzle */
} hk_bucket_tmap_t;

/* What one bucket's graph needs to replay. */
typedef struct hk_bucket {
  uint32_t graph;                /* index in the pack's graph table */
  void **tensor_ptrs;            /* one slot per pack tensor */
  void **arg_ptrs;               /* all launches' argument arrays, concatenated */
  hk_arg_slot_t *arg_slots;      /* values of non-tensor arguments */
  hk_launch_desc_t *launches;
  uint32_t launch_count;
  hk_backend_session_t *backend; /* owned: workspace arena, GPU graph */
  /* Padding: per application tensor, the arena offset of its bucket-sized staging buffer
   * (HK_NO_STAGING when it does not depend on batch); all of them lie in
   * [staging_first, +staging_bytes) of the arena. */
  bool has_staging;
  uint64_t *staging;
  uint64_t staging_first, staging_bytes;
  bool staging_zeroed;           /* the whole staging area was zeroed once */
  uint64_t input_rows;           /* input staging may hold data in batch rows [0, input_rows) */
  /* TMA tensor maps, one per TMAP argument in launch order, and the session allocation
   * holding their storage (over-allocated by one map so they can start HK_TMAP_ALIGN-aligned). */
  hk_bucket_tmap_t *tmaps;
  uint32_t tmap_count;
  void *tmap_block;
  bool tmaps_encoded;            /* every map holds its tensor's current slot */
  uint64_t semaphores;           /* arena offset of the graph's counters (zeroed once) */
} hk_bucket_t;

struct hk_session {
  hk_pack_t *pack;
  const hk_pack_view_t *view;
  const hk_allocator_t *allocator;
  uint32_t target;
  hk_module_t *module;           /* borrowed from the pack's cache */
  uint64_t batch;                /* the real batch */
  uint32_t bucket;               /* manifest index of the bucket that runs it */
  hk_app_tensor_t *app;          /* inputs, outputs, params in tensor-table order */
  uint32_t app_count;
  hk_bucket_t *buckets[HK_MAX_BATCH_BUCKETS]; /* by manifest index; NULL until needed */
  uint32_t builds;               /* bucket states built so far (hk_session_debug_builds) */
  uint32_t last_built;           /* manifest index of the bucket state built last */
  hk_session_options_t options;  /* complete (options_read); target NULL: it is borrowed */
  atomic_bool busy;              /* a state-changing call is running (session_enter) */
  char error[HK_ERROR_MAX];
};

/* Claims the session for one state-changing call (hkrt.h, "Threads"). A session belongs to
 * one thread at a time; a second thread that calls in meanwhile gets BUSY at once, before
 * it touches the buckets, the host pool or s->error -- a clear error instead of a data race
 * or a hang in the pool. Pairs with session_leave. */
static hk_status_t session_enter(hk_session_t *s) {
  HK_FAIL_IF(atomic_exchange_explicit(&s->busy, true, memory_order_acquire), HK_STATUS_BUSY,
             "the session is in use by another thread (a session is used by one thread at a time; "
             "create one session per thread to run in parallel)");
  return HK_OK;
}

static void session_leave(hk_session_t *s) { atomic_store_explicit(&s->busy, false, memory_order_release); }

bool hk_session_debug_hold(hk_session_t *s, bool hold) {
  if (hold) return session_enter(s) == HK_OK;
  session_leave(s);
  return true;
}

static void bucket_destroy(const hk_session_t *s, hk_bucket_t *b) {
  if (!b) return;
  if (b->backend) b->backend->backend->session_release(b->backend);
  const hk_allocator_t *a = s->allocator;
  hk_free(a, b->tensor_ptrs);
  hk_free(a, b->arg_ptrs);
  hk_free(a, b->arg_slots);
  hk_free(a, b->launches);
  hk_free(a, b->staging);
  hk_free(a, b->tmaps);
  hk_free(a, b->tmap_block);
  hk_free(a, b);
}

/* Frees the memory the session owns for app tensor i (if any). */
static void app_release_owned(hk_session_t *s, hk_app_tensor_t *at) {
  if (!at->owned) return;
  s->module->backend->mem_free(s->module, at->owned);
  at->owned = NULL;
}

HK_API void hk_session_destroy(hk_session_t *s) {
  if (!s) return;
  for (uint32_t i = 0; s->app && i < s->app_count; i++) app_release_owned(s, &s->app[i]);
  for (uint32_t i = 0; i < HK_MAX_BATCH_BUCKETS; i++) bucket_destroy(s, s->buckets[i]);
  hk_free(s->allocator, s->app);
  hk_free(s->allocator, s);
}

HK_API const char *hk_session_error(const hk_session_t *s) { return s ? s->error : ""; }

HK_API const char *hk_session_target(const hk_session_t *s) {
  return s ? hk_pack_string(s->view, s->view->targets[s->target].name) : "";
}

HK_API const char *hk_session_device_name(const hk_session_t *s) {
  if (!s) return "";
  const hk_backend_t *be = s->module->backend;
  if (be->kind == HK_TARGET_HOST) return "host";
  return be->device_name ? be->device_name(s->options.device) : "";
}

HK_API const char *hk_session_launch_mode(const hk_session_t *s, const char **out_reason) {
  if (out_reason) *out_reason = "";
  if (!s) return "";
  const hk_backend_session_t *b = s->buckets[s->last_built]->backend; /* create built one */
  if (out_reason) *out_reason = b->graph_fallback;
  return b->graph ? "graph" : "stream";
}

HK_API hk_code_kind_t hk_session_code_kind(const hk_session_t *s) {
  return s && s->module->ptx ? HK_CODE_PTX : HK_CODE_NATIVE;
}

HK_API const char *hk_session_host_blas(const hk_session_t *s, const char **out_reason) {
  if (out_reason) *out_reason = "";
  if (!s) return "";
  const hk_backend_session_t *b = s->buckets[s->last_built]->backend; /* create built one */
  if (out_reason && b->host_blas_reason) *out_reason = b->host_blas_reason;
  return b->host_blas ? b->host_blas : ""; /* GPU backends leave them NULL */
}

HK_API const char *hk_session_host_isa(const hk_session_t *s) {
  if (!s) return "";
  const char *isa = s->buckets[s->last_built]->backend->host_isa; /* create built one */
  return isa ? isa : "";
}

HK_API uint32_t hk_session_pdl_count(const hk_session_t *s) {
  return s ? s->buckets[s->last_built]->backend->pdl_count : 0; /* create built one */
}

HK_API uint32_t hk_session_tensor_count(const hk_session_t *s) { return s ? s->app_count : 0; }

HK_API hk_status_t hk_session_tensor_info(const hk_session_t *s, uint32_t index, hk_tensor_info_t *out_info) {
  HK_FAIL_IF(!s || !out_info, HK_STATUS_INVALID_ARGUMENT, "session and out_info must not be NULL");
  HK_FAIL_IF(index >= s->app_count, HK_STATUS_NOT_FOUND, "tensor index %u out of range (%u tensors)", index,
             s->app_count);
  *out_info = s->app[index].info;
  return HK_OK;
}

HK_API const char *hk_session_tensor_part(const hk_session_t *s, uint32_t index, uint32_t part) {
  if (!s || index >= s->app_count) return NULL;
  uint32_t first, count;
  hk_pack_tensor_parts(s->view, s->app[index].tensor, &first, &count);
  return part < count ? hk_pack_string(s->view, s->view->parts[first + part].name) : NULL;
}

const hk_shard_rec_t *hk_session_tensor_shard(const hk_session_t *s, uint32_t index, uint32_t *out_rank,
                                              uint32_t *out_ranks, uint32_t *out_source) {
  if (index >= s->app_count || !s->view->shard_count) return NULL;
  const hk_shard_rec_t *r = hk_pack_tensor_shard(s->view, s->app[index].tensor);
  if (!r) return NULL;
  *out_rank = s->options.tensor_rank;
  *out_ranks = s->view->tensor_ranks;
  *out_source = UINT32_MAX;
  for (uint32_t i = 0; i < s->app_count; i++)
    if (s->app[i].tensor == r->source) *out_source = i;
  return r;
}

HK_API uint64_t hk_session_batch(const hk_session_t *s) { return s ? s->batch : 0; }

HK_API uint64_t hk_session_bucket(const hk_session_t *s) {
  return s ? s->view->manifest->batch_sizes[s->bucket] : 0;
}

uint32_t hk_session_debug_builds(const hk_session_t *s) { return s->builds; }

const void *hk_session_debug_arena(const hk_session_t *s) {
  const hk_bucket_t *b = s->buckets[s->bucket];
  return b ? b->backend->workspace : NULL;
}

const uint32_t *hk_session_debug_semaphores(const hk_session_t *s) {
  const hk_bucket_t *b = s->buckets[s->bucket];
  if (!b || s->view->graphs[b->graph].semaphore_count == 0) return NULL;
  return (const uint32_t *)((const char *)b->backend->workspace + b->semaphores);
}

const void *hk_session_debug_staging(const hk_session_t *s, const char *name) {
  const hk_bucket_t *b = s->buckets[s->bucket];
  for (uint32_t i = 0; b && i < s->app_count; i++)
    if (strcmp(s->app[i].info.name, name) == 0 && b->staging[i] != HK_NO_STAGING)
      return (const char *)b->backend->workspace + b->staging[i];
  return NULL;
}

const void *hk_session_debug_bound(const hk_session_t *s, uint32_t index) {
  return index < s->app_count ? s->app[index].data : NULL;
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
    if (only_unbound && s->app[i].data) continue;
    if (used + 4 >= size) break;
    int n = snprintf(out + used, size - used, "%s%s", used ? ", " : "", s->app[i].info.name);
    if (n < 0 || (size_t)n >= size - used) {
      memcpy(out + size - 4, "...", 4);
      break;
    }
    used += (size_t)n;
  }
}

/* ---- batch sizes ---------------------------------------------------------------------------- */
/* Longest "1, 8, 32" list: 16 buckets of up to 20 digits and a separator. */
#define HK_BUCKET_LIST_MAX (HK_MAX_BATCH_BUCKETS * 24)

static void list_buckets(const hk_pack_view_t *v, char out[HK_BUCKET_LIST_MAX]) {
  size_t used = 0;
  out[0] = '\0';
  for (uint32_t i = 0; i < v->manifest->batch_count; i++)
    used += (size_t)snprintf(out + used, HK_BUCKET_LIST_MAX - used, "%s%llu", i ? ", " : "",
                             (unsigned long long)v->manifest->batch_sizes[i]);
}

static bool tensor_batched(const hk_tensor_rec_t *t) {
  for (uint32_t d = 0; d < t->rank; d++)
    if (t->dims[d].mul != 0) return true;
  return false;
}

/* Whether every batch-dependent tensor of the pack (application tensors and
 * intermediates alike) has the layout padding needs: rank >= 2 (or i32, as lengths [batch]),
 * dim 0 = mul*batch with mul > 0 and no offset, no other dim depending on batch. hkc refuses other layouts under
 * `batch_policy: pad`, but the artifact is untrusted (and a format 1.0 file reads as pad
 * whatever its layouts). On false, *out_tensor is the first offender. */
static bool pad_layout_check(const hk_pack_view_t *v, uint32_t *out_tensor) {
  for (uint32_t i = 0; i < v->tensor_count; i++) {
    const hk_tensor_rec_t *t = &v->tensors[i];
    if (!tensor_batched(t)) continue;
    bool ok = (t->rank >= 2 || t->dtype == HK_DTYPE_I32) && t->dims[0].mul > 0 && t->dims[0].add == 0;
    for (uint32_t d = 1; d < t->rank && ok; d++) ok = t->dims[d].mul == 0;
    if (!ok) {
      *out_tensor = i;
      return false;
    }
  }
  return true;
}

/* The manifest index of the bucket that runs `batch`: the bucket equal to it, else under
 * pad the smallest one above it. Errors: NOT_FOUND (0, over the largest bucket, not a
 * bucket under exact, or a pack whose layouts cannot be padded), listing the buckets. */
static hk_status_t pick_bucket(const hk_pack_view_t *v, uint64_t batch, uint32_t *out_index) {
  const hk_manifest_t *m = v->manifest;
  char sizes[HK_BUCKET_LIST_MAX];
  list_buckets(v, sizes);
  HK_FAIL_IF(batch == 0, HK_STATUS_NOT_FOUND, "batch size 0 is not valid (batch sizes: %s)", sizes);
  uint32_t i = 0;
  while (i < m->batch_count && m->batch_sizes[i] < batch) i++;
  HK_FAIL_IF(i == m->batch_count, HK_STATUS_NOT_FOUND,
             "batch size %llu is larger than the largest batch size built into the artifact (batch sizes: %s)",
             (unsigned long long)batch, sizes);
  if (m->batch_sizes[i] != batch) {
    HK_FAIL_IF(m->batch_policy == HK_BATCH_POLICY_REC_EXACT, HK_STATUS_NOT_FOUND,
               "batch size %llu was not built into the artifact and its batch policy is exact (batch sizes: %s)",
               (unsigned long long)batch, sizes);
    uint32_t bad;
    if (!pad_layout_check(v, &bad)) {
      const hk_tensor_rec_t *t = &v->tensors[bad];
      return HK_ERROR(HK_STATUS_NOT_FOUND,
                      "batch size %llu was not built into the artifact and cannot be padded to %llu: tensor %s "
                      "depends on batch elsewhere than (only) its leading dim, so its rows are not a prefix "
                      "(batch sizes: %s)",
                      (unsigned long long)batch, (unsigned long long)m->batch_sizes[i], hk_pack_string(v, t->name),
                      sizes);
    }
  }
  *out_index = i;
  return HK_OK;
}

/* Resolves every application tensor's info at `batch`; a tensor whose size changes is
 * unbound. All or nothing. Errors: CORRUPT (a shape that is not valid at batch: only a
 * pack that got past pick_bucket's checks wrongly). */
static hk_status_t app_set_batch(hk_session_t *s, uint64_t batch) {
  for (uint32_t i = 0; i < s->app_count; i++) {
    const hk_tensor_rec_t *tr = &s->view->tensors[s->app[i].tensor];
    HK_FAIL_IF(!hk_tensor_shape(tr, batch, NULL, NULL), HK_STATUS_CORRUPT,
               "tensor %s has no valid shape at batch %llu", s->app[i].info.name, (unsigned long long)batch);
  }
  for (uint32_t i = 0; i < s->app_count; i++) {
    hk_app_tensor_t *at = &s->app[i];
    uint64_t bytes = 0;
    (void)hk_tensor_shape(&s->view->tensors[at->tensor], batch, at->info.dims, &bytes); /* checked above */
    if (bytes != at->info.bytes) {
      at->data = NULL;
      app_release_owned(s, at);
    }
    at->info.bytes = (size_t)bytes;
  }
  s->batch = batch;
  return HK_OK;
}

/* The application tensors, in tensor-table order. Errors: OUT_OF_MEMORY. */
static hk_status_t app_build(hk_session_t *s) {
  const hk_pack_view_t *v = s->view;
  for (uint32_t i = 0; i < v->tensor_count; i++)
    if (v->tensors[i].role != HK_ROLE_INTERMEDIATE) s->app_count++;
  s->app = hk_calloc(s->allocator, s->app_count ? s->app_count : 1, sizeof *s->app);
  HK_FAIL_IF(!s->app, HK_STATUS_OUT_OF_MEMORY, "out of memory creating a session");
  uint32_t k = 0;
  for (uint32_t i = 0; i < v->tensor_count; i++) {
    const hk_tensor_rec_t *tr = &v->tensors[i];
    if (tr->role == HK_ROLE_INTERMEDIATE) continue;
    hk_app_tensor_t *at = &s->app[k++];
    at->tensor = i;
    at->info.name = hk_pack_string(v, tr->name);
    at->info.role = (hk_tensor_role_t)tr->role; /* INPUT/OUTPUT/PARAM/STATE share numbers */
    at->info.element_type = (hk_element_type_t)tr->dtype;
    at->info.rank = tr->rank;
    at->batched = tensor_batched(tr);
  }
  return HK_OK;
}

/* Binds the params the pack stores (format 1.4; verify checked every record: a PARAM of exactly
 * its byte size, batch-independent, inside WEIGHTS): on the host target the pack's bytes in
 * place where aligned, else (and on GPU targets) a copy the session owns, freed on rebind or
 * destroy. Errors: OUT_OF_MEMORY, DRIVER (copies made so far stay owned and are freed by
 * hk_session_destroy). */
static hk_status_t app_bind_pack_weights(hk_session_t *s) {
  const hk_pack_view_t *v = s->view;
  const hk_backend_t *be = s->module->backend;
  uint32_t k = 0;
  for (uint32_t r = 0; r < v->weight_count; r++) {
    const hk_weight_rec_t *rec = &v->weight_recs[r];
    while (k < s->app_count && s->app[k].tensor < rec->tensor) k++; /* both ascend by tensor */
    assert(k < s->app_count && s->app[k].tensor == rec->tensor);    /* a PARAM: an app tensor */
    hk_app_tensor_t *at = &s->app[k];
    const uint8_t *src = v->weights + rec->offset;
    if (hk_session_binds_in_place(s, src)) {
      at->data = (void *)(uintptr_t)src; /* the session only reads params */
      continue;
    }
    void *dst = NULL;
    HK_RETURN_IF_ERROR(be->mem_alloc(s->module, (size_t)rec->size, &dst));
    at->data = at->owned = dst;
    HK_RETURN_IF_ERROR(be->mem_copy(s->module, dst, src, (size_t)rec->size, HK_COPY_HOST_TO_DEVICE));
  }
  return HK_OK;
}

/* Allocates every STATE tensor (format 1.5: a KV cache) in the session's device memory and
 * zeroes it: state lives as long as the session (or until the application binds its own
 * buffer), is shared by every bucket's graph and keeps what a run wrote for the next. State
 * never depends on batch (verify), so a batch change leaves it bound. Errors: OUT_OF_MEMORY,
 * DRIVER (allocations made so far stay owned and are freed by hk_session_destroy). */
static hk_status_t app_alloc_state(hk_session_t *s) {
  const hk_backend_t *be = s->module->backend;
  bool zeroed = false;
  for (uint32_t i = 0; i < s->app_count; i++) {
    hk_app_tensor_t *at = &s->app[i];
    if (at->info.role != HK_TENSOR_STATE) continue;
    void *dst = NULL;
    HK_RETURN_IF_ERROR(be->mem_alloc(s->module, at->info.bytes, &dst));
    at->data = at->owned = dst;
    HK_RETURN_IF_ERROR(be->zero_async(s->module, dst, at->info.bytes, NULL));
    zeroed = true;
  }
  return zeroed ? be->synchronize(s->module, NULL) : HK_OK;
}

/* ---- bucket states ------------------------------------------------------------------------- */
/* What TMAP argument `value` of graph g maps: the tensor as the matrix [elements / last
 * dim, last dim] at the graph's batch, its box and swizzle (all verified). */
static hk_tmap_desc_t tmap_desc(const hk_pack_view_t *v, const hk_graph_rec_t *g, uint64_t value) {
  const hk_tensor_rec_t *tr = &v->tensors[hk_tmap_tensor(value)];
  int64_t dims[HK_MAX_RANK];
  uint64_t bytes = 0;
  (void)hk_tensor_shape(tr, g->batch, dims, &bytes); /* true at every bucket: verified */
  hk_tmap_desc_t d = {.dtype = tr->dtype, .swizzle = hk_tmap_swizzle(value), .cols = (uint64_t)dims[tr->rank - 1],
                      .box_inner = hk_tmap_box_inner(value), .box_outer = hk_tmap_box_outer(value)};
  d.rows = bytes / hk_dtype_bytes(tr->dtype) / d.cols;
  return d;
}

/* Fills b's launch descriptors and argument storage for graph g; b->tmaps and the maps'
 * storage exist when the graph has TMAP arguments. */
static void bucket_fill_launches(const hk_session_t *s, hk_bucket_t *b, const hk_graph_rec_t *g) {
  const hk_pack_view_t *v = s->view;
  const hk_target_rec_t *t = &v->targets[s->target];
  size_t next = 0;
  uint32_t tmap = 0;
  char *maps = (char *)(((uintptr_t)b->tmap_block + HK_TMAP_ALIGN - 1) & ~(uintptr_t)(HK_TMAP_ALIGN - 1));
  for (uint32_t j = 0; j < g->node_count; j++) {
    const hk_node_rec_t *n = &v->nodes[g->node_first + j];
    hk_launch_desc_t *l = &b->launches[j];
    l->kernel = n->kernel - t->kernel_first;
    memcpy(l->grid, n->grid, sizeof l->grid);
    memcpy(l->block, n->block, sizeof l->block);
    l->shared_bytes = n->shared_bytes;
    l->args = &b->arg_ptrs[next];
    l->arg_count = n->arg_count;
    l->deps = v->deps + n->dep_first; /* graph-local, earlier nodes: verified */
    l->dep_count = n->dep_count;
    l->pdl = (n->flags & HK_NODE_FLAG_PDL) && !s->options.no_pdl; /* CUDA targets only: verified */
    const uint32_t op = v->kernels[n->kernel].op;
    l->collective = hk_op_collective(op) ? op : 0;
    l->dtype = v->manifest->dtype;
    l->ranks = v->tensor_ranks;
    for (uint32_t i = 0; i < n->arg_count; i++, next++) {
      const hk_arg_rec_t *ar = &v->args[n->arg_first + i];
      hk_arg_slot_t *slot = &b->arg_slots[next];
      switch ((hk_arg_kind_t)ar->kind) {
      case HK_ARG_TENSOR: b->arg_ptrs[next] = &b->tensor_ptrs[ar->value]; continue;
      case HK_ARG_TMAP: {
        hk_bucket_tmap_t *m = &b->tmaps[tmap];
        m->map = maps + (size_t)tmap++ * HK_TMAP_BYTES;
        m->tensor = hk_tmap_tensor(ar->value);
        m->launch = j;
        m->desc = tmap_desc(v, g, ar->value);
        b->arg_ptrs[next] = m->map; /* the kernel parameter is the map itself */
        continue;
      }
      case HK_ARG_SCRATCH:
      case HK_ARG_SEMAPHORE: /* pointers into the arena: bucket_place_workspace, once it exists */
      case HK_ARG_NULL: slot->ptr = NULL; break;
      case HK_ARG_I64: slot->i64 = (int64_t)ar->value; break;
      case HK_ARG_F32: {
        uint32_t bits = (uint32_t)ar->value;
        memcpy(&slot->f32, &bits, sizeof bits);
        break;
      }
      case HK_ARG_KIND_COUNT_: break; /* excluded by verify */
      }
      b->arg_ptrs[next] = slot;
    }
  }
}

/* Points the intermediates' slots and the scratch and semaphore arguments of b into its arena
 * (the workspace at base, the counters at b->semaphores; every range verified against the
 * graph), in the order bucket_fill_launches laid the arguments out. */
static void bucket_place_workspace(const hk_session_t *s, hk_bucket_t *b, const hk_graph_rec_t *g) {
  const hk_pack_view_t *v = s->view;
  char *base = b->backend->workspace;
  for (uint32_t i = 0; i < v->tensor_count; i++) {
    uint64_t p = v->placements[g->placement_first + i];
    if (p != HK_PLACEMENT_NONE) b->tensor_ptrs[i] = base + p;
  }
  size_t next = 0;
  for (uint32_t j = 0; j < g->node_count; j++) {
    const hk_node_rec_t *n = &v->nodes[g->node_first + j];
    for (uint32_t i = 0; i < n->arg_count; i++, next++) {
      const hk_arg_rec_t *ar = &v->args[n->arg_first + i];
      if (ar->kind == HK_ARG_SCRATCH) b->arg_slots[next].ptr = base + hk_scratch_offset(ar->value);
      if (ar->kind == HK_ARG_SEMAPHORE)
        b->arg_slots[next].ptr = base + b->semaphores + (uint64_t)hk_semaphore_first(ar->value) * sizeof(uint32_t);
    }
  }
}

/* Zeroes b's semaphores and waits for it: the only write libhkrt ever makes to them, before
 * any run. Errors: the backend's (DRIVER). */
static hk_status_t bucket_zero_semaphores(const hk_session_t *s, hk_bucket_t *b, const hk_graph_rec_t *g) {
  if (g->semaphore_count == 0) return HK_OK;
  const hk_backend_t *be = s->module->backend;
  char *counters = (char *)b->backend->workspace + b->semaphores;
  HK_RETURN_IF_ERROR(be->zero_async(s->module, counters, (size_t)g->semaphore_count * sizeof(uint32_t), NULL));
  return be->synchronize(s->module, NULL);
}

/* Launch j of graph g takes a TMA tensor map: whether this session's backend (and its
 * runtime) can build one. Errors: UNAVAILABLE, naming the kernel and the launch. */
static hk_status_t tmap_check_backend(const hk_session_t *s, const hk_graph_rec_t *g, uint32_t j) {
  const hk_pack_view_t *v = s->view;
  const hk_node_rec_t *n = &v->nodes[g->node_first + j];
  const char *kernel = hk_pack_string(v, v->kernels[n->kernel].name);
  const hk_backend_t *be = s->module->backend;
  HK_FAIL_IF(!be->tensor_map_encode, HK_STATUS_UNAVAILABLE,
             "kernel %s (launch %u, %s, batch size %llu) takes a TMA tensor map, and the %s backend cannot build "
             "tensor maps", kernel, j, hk_pack_string(v, n->name), (unsigned long long)g->batch, be->name);
  hk_status_t st = be->tensor_map_encode(s->module, NULL, NULL, NULL);
  if (st != HK_OK) {
    char prefix[HK_MAX_NAME_LEN * 2 + 96];
    snprintf(prefix, sizeof prefix, "kernel %s (launch %u, %s, batch size %llu) takes a TMA tensor map", kernel, j,
             hk_pack_string(v, n->name), (unsigned long long)g->batch);
    hk_error_prefix(prefix);
  }
  return st;
}

/* Encodes every tensor map of b over its tensor's current slot (an intermediate's place in
 * the workspace, an application tensor's bound or staging buffer). The maps are host
 * memory that the driver copies into the kernel parameters when a launch is enqueued or a
 * graph node's parameters are set, so rewriting them never races with queued work.
 * Errors: the backend's (DRIVER), naming the kernel and the tensor; b->tmaps_encoded stays
 * false then, so the next run tries again. */
static hk_status_t tmaps_encode(const hk_session_t *s, hk_bucket_t *b) {
  const hk_pack_view_t *v = s->view;
  const hk_graph_rec_t *g = &v->graphs[b->graph];
  b->tmaps_encoded = false;
  for (uint32_t i = 0; i < b->tmap_count; i++) {
    const hk_bucket_tmap_t *m = &b->tmaps[i];
    hk_status_t st = s->module->backend->tensor_map_encode(s->module, &m->desc, b->tensor_ptrs[m->tensor], m->map);
    if (st != HK_OK) {
      const hk_node_rec_t *n = &v->nodes[g->node_first + m->launch];
      char prefix[HK_MAX_NAME_LEN * 3 + 128];
      snprintf(prefix, sizeof prefix, "kernel %s (launch %u, %s): building the tensor map of %s [%llu x %llu, box "
               "%ux%u]", hk_pack_string(v, v->kernels[n->kernel].name), m->launch, hk_pack_string(v, n->name),
               hk_pack_string(v, v->tensors[m->tensor].name), (unsigned long long)m->desc.rows,
               (unsigned long long)m->desc.cols, m->desc.box_inner, m->desc.box_outer);
      hk_error_prefix(prefix);
      return st;
    }
  }
  b->tmaps_encoded = true;
  return HK_OK;
}

/* Builds the state of bucket `index` (with staging buffers for padded runs when
 * with_staging) and stores it in s->buckets[index]. Errors: OUT_OF_MEMORY, UNAVAILABLE (the
 * graph has TMA tensor maps the backend cannot build), and the backend's (DRIVER,
 * UNAVAILABLE). Nothing is kept on failure. */
static hk_status_t bucket_build(hk_session_t *s, uint32_t index, bool with_staging) {
  const hk_pack_view_t *v = s->view;
  const hk_allocator_t *a = s->allocator;
  uint32_t gi = v->targets[s->target].graph_first + index; /* one graph per bucket, in order: verified */
  const hk_graph_rec_t *g = &v->graphs[gi];
  uint64_t total_args = 0;
  uint32_t tmap_count = 0;
  for (uint32_t j = 0; j < g->node_count; j++) {
    const hk_node_rec_t *n = &v->nodes[g->node_first + j];
    total_args += n->arg_count;
    for (uint32_t i = 0; i < n->arg_count; i++)
      if (v->args[n->arg_first + i].kind == HK_ARG_TMAP && tmap_count++ == 0)
        HK_RETURN_IF_ERROR(tmap_check_backend(s, g, j));
  }

  hk_bucket_t *b = hk_calloc(a, 1, sizeof *b);
  HK_FAIL_IF(!b, HK_STATUS_OUT_OF_MEMORY, "out of memory preparing batch size %llu", (unsigned long long)g->batch);
  b->graph = gi;
  b->has_staging = with_staging;
  b->tensor_ptrs = hk_calloc(a, v->tensor_count ? v->tensor_count : 1, sizeof *b->tensor_ptrs);
  b->arg_ptrs = hk_calloc(a, total_args ? (size_t)total_args : 1, sizeof *b->arg_ptrs);
  b->arg_slots = hk_calloc(a, total_args ? (size_t)total_args : 1, sizeof *b->arg_slots);
  b->launches = hk_calloc(a, g->node_count ? g->node_count : 1, sizeof *b->launches);
  b->staging = hk_calloc(a, s->app_count ? s->app_count : 1, sizeof *b->staging);
  if (tmap_count) {
    b->tmap_count = tmap_count;
    b->tmaps = hk_calloc(a, tmap_count, sizeof *b->tmaps);
    b->tmap_block = hk_calloc(a, (size_t)tmap_count + 1, HK_TMAP_BYTES); /* + 1: room to align */
  }
  hk_status_t st = HK_OK;
  if (!b->tensor_ptrs || !b->arg_ptrs || !b->arg_slots || !b->launches || !b->staging ||
      (tmap_count && (!b->tmaps || !b->tmap_block))) {
    st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory preparing batch size %llu", (unsigned long long)g->batch);
    goto fail;
  }
  b->launch_count = g->node_count;
  bucket_fill_launches(s, b, g);

  /* Arena: the graph's workspace, then one staging buffer per batch-dependent
   * application tensor. */
  uint64_t arena = g->workspace_bytes;
  bool overflow = false;
  for (uint32_t i = 0; i < s->app_count; i++) b->staging[i] = HK_NO_STAGING;
  if (with_staging) {
    overflow = !hk_add_u64(arena, HK_STAGING_ALIGN - 1, &arena);
    arena = b->staging_first = arena / HK_STAGING_ALIGN * HK_STAGING_ALIGN;
    for (uint32_t i = 0; i < s->app_count && !overflow; i++) {
      if (!s->app[i].batched) continue;
      uint64_t bytes = 0;
      (void)hk_tensor_shape(&v->tensors[s->app[i].tensor], g->batch, NULL, &bytes); /* verified at every bucket */
      b->staging[i] = arena;
      overflow = !hk_add_u64(arena, bytes, &arena) || !hk_add_u64(arena, HK_STAGING_ALIGN - 1, &arena);
      arena = arena / HK_STAGING_ALIGN * HK_STAGING_ALIGN;
    }
    b->staging_bytes = arena - b->staging_first;
  }
  /* then the semaphores (at most HK_MAX_SEMAPHORES: verified) */
  overflow = overflow || !hk_add_u64(arena, HK_STAGING_ALIGN - 1, &arena);
  b->semaphores = arena = arena / HK_STAGING_ALIGN * HK_STAGING_ALIGN;
  overflow = overflow || !hk_add_u64(arena, (uint64_t)g->semaphore_count * sizeof(uint32_t), &arena);
  if (overflow) {
    st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "the staging buffers and semaphores of batch size %llu overflow",
                  (unsigned long long)g->batch);
    goto fail;
  }
  st = s->module->backend->session_prepare(s->module, &s->options, arena, b->launches, b->launch_count, &b->backend);
  if (st != HK_OK) goto fail;
  bucket_place_workspace(s, b, g);
  st = bucket_zero_semaphores(s, b, g);
  if (st != HK_OK) goto fail;
  s->buckets[index] = b;
  s->builds++;
  s->last_built = index;
  return HK_OK;
fail:
  bucket_destroy(s, b);
  return st;
}

/* ---- create ---------------------------------------------------------------------------------- */
/* Whether the caller's struct_size covers field `f` of hk_session_options_t. */
#define OPTION_SET(size, f) ((size) >= offsetof(hk_session_options_t, f) + sizeof(((hk_session_options_t *)0)->f))
/* sizeof the layout that ended with host_threads: a caller built against it passes this as
 * struct_size, with undefined tail padding, so every later field must start at or after it. */
#define OPTIONS_SIZE_HOST_THREADS                                                                   \
  ((offsetof(hk_session_options_t, host_threads) + sizeof(uint32_t) + _Alignof(hk_session_options_t) - 1) / \
   _Alignof(hk_session_options_t) * _Alignof(hk_session_options_t))
_Static_assert(offsetof(hk_session_options_t, no_pdl) >= OPTIONS_SIZE_HOST_THREADS,
               "no_pdl must lie past the end of the previous hk_session_options_t layout");
/* The same for the layout that ended with no_pdl, and prefer_ptx. */
#define OPTIONS_SIZE_NO_PDL                                                                   \
  ((offsetof(hk_session_options_t, no_pdl) + sizeof(uint32_t) + _Alignof(hk_session_options_t) - 1) / \
   _Alignof(hk_session_options_t) * _Alignof(hk_session_options_t))
_Static_assert(offsetof(hk_session_options_t, prefer_ptx) >= OPTIONS_SIZE_NO_PDL,
               "prefer_ptx must lie past the end of the previous hk_session_options_t layout");
#define OPTIONS_SIZE_PREFER_PTX                                                                   \
  ((offsetof(hk_session_options_t, prefer_ptx) + sizeof(uint32_t) + _Alignof(hk_session_options_t) - 1) / \
   _Alignof(hk_session_options_t) * _Alignof(hk_session_options_t))
_Static_assert(offsetof(hk_session_options_t, no_pack_weights) >= OPTIONS_SIZE_PREFER_PTX,
               "no_pack_weights must lie past the end of the previous hk_session_options_t layout");
#define OPTIONS_SIZE_HOST_BLAS                                                                    \
  ((offsetof(hk_session_options_t, host_blas) + sizeof(uint32_t) + _Alignof(hk_session_options_t) - 1) / \
   _Alignof(hk_session_options_t) * _Alignof(hk_session_options_t))
_Static_assert(offsetof(hk_session_options_t, comm) >= OPTIONS_SIZE_HOST_BLAS,
               "comm must lie past the end of the previous hk_session_options_t layout");
#define OPTIONS_SIZE_NO_PACK_WEIGHTS                                                              \
  ((offsetof(hk_session_options_t, no_pack_weights) + sizeof(uint32_t) + _Alignof(hk_session_options_t) - 1) / \
   _Alignof(hk_session_options_t) * _Alignof(hk_session_options_t))
_Static_assert(offsetof(hk_session_options_t, host_blas) >= OPTIONS_SIZE_NO_PACK_WEIGHTS,
               "host_blas must lie past the end of the previous hk_session_options_t layout");

/* Copies the fields of *in that its struct_size covers into *out and gives the others
 * their defaults (hkrt.h: struct_size 0 is the first layout, batch/target/device), then
 * checks the values. Errors: INVALID_ARGUMENT. */
static hk_status_t options_read(const hk_session_options_t *in, hk_session_options_t *out) {
  size_t size = in->struct_size ? in->struct_size : offsetof(hk_session_options_t, device) + sizeof in->device;
  HK_FAIL_IF(!OPTION_SET(size, device) || size > sizeof *in, HK_STATUS_INVALID_ARGUMENT,
             "options->struct_size is %u; this libhkrt reads hk_session_options_t of %zu to %zu bytes (set it to "
             "sizeof(hk_session_options_t); a larger size means a newer hkrt.h than this library)",
             in->struct_size, offsetof(hk_session_options_t, device) + sizeof in->device, sizeof *in);
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->batch = in->batch;
  out->target = in->target;
  out->device = in->device;
  if (OPTION_SET(size, launch_mode)) out->launch_mode = in->launch_mode;
  if (OPTION_SET(size, host_threads)) out->host_threads = in->host_threads;
  if (OPTION_SET(size, no_pdl)) out->no_pdl = in->no_pdl; /* reserved0 is never read */
  if (OPTION_SET(size, prefer_ptx)) out->prefer_ptx = in->prefer_ptx; /* nor reserved1 */
  if (OPTION_SET(size, no_pack_weights)) out->no_pack_weights = in->no_pack_weights; /* nor reserved2 */
  if (OPTION_SET(size, host_blas)) out->host_blas = in->host_blas; /* nor reserved3 */
  if (OPTION_SET(size, tensor_rank)) { /* nor reserved4 */
    out->comm = in->comm;
    out->tensor_rank = in->tensor_rank;
  }
  HK_FAIL_IF(out->device < 0, HK_STATUS_INVALID_ARGUMENT, "device ordinal %d is negative", out->device);
  HK_FAIL_IF(out->launch_mode != HK_LAUNCH_MODE_AUTO && out->launch_mode != HK_LAUNCH_MODE_GRAPH &&
                 out->launch_mode != HK_LAUNCH_MODE_STREAM,
             HK_STATUS_INVALID_ARGUMENT, "launch_mode %d is not one of HK_LAUNCH_MODE_AUTO, _GRAPH, _STREAM",
             (int)out->launch_mode);
  HK_FAIL_IF(out->no_pdl > 1, HK_STATUS_INVALID_ARGUMENT, "no_pdl %u is not 0 or 1", out->no_pdl);
  HK_FAIL_IF(out->prefer_ptx > 1, HK_STATUS_INVALID_ARGUMENT, "prefer_ptx %u is not 0 or 1", out->prefer_ptx);
  HK_FAIL_IF(out->no_pack_weights > 1, HK_STATUS_INVALID_ARGUMENT, "no_pack_weights %u is not 0 or 1",
             out->no_pack_weights);
  HK_FAIL_IF(out->host_blas > 1, HK_STATUS_INVALID_ARGUMENT, "host_blas %u is not 0 or 1", out->host_blas);
  return HK_OK;
}

/* A tensor-parallel pack's session needs its rank and a communicator of the pack's ranks (on
 * the host target a host group of that size). Errors: FAILED_PRECONDITION, INVALID_ARGUMENT. */
static hk_status_t check_ranks(const hk_pack_view_t *v, const hk_module_t *module, const hk_session_options_t *o) {
  const uint32_t ranks = v->tensor_ranks;
  if (ranks == 0) return HK_OK; /* a whole pack */
  HK_FAIL_IF(!o->comm, HK_STATUS_FAILED_PRECONDITION,
             "the pack is one of %u tensor-parallel ranks: the session needs its rank and a communicator of the %u "
             "(hk_session_options_t comm, tensor_rank; hkc run/generate --tensor-parallel)", ranks, ranks);
  HK_FAIL_IF(o->tensor_rank >= ranks, HK_STATUS_INVALID_ARGUMENT, "tensor_rank %u: the pack has %u ranks (0 .. %u)",
             o->tensor_rank, ranks, ranks - 1);
  if (module->backend->kind == HK_TARGET_HOST)
    HK_FAIL_IF(hk_host_group_ranks(o->comm) != ranks, HK_STATUS_INVALID_ARGUMENT,
               "the host group has %u ranks; the pack has %u", hk_host_group_ranks(o->comm), ranks);
  else
    HK_FAIL_IF(!module->backend->collectives, HK_STATUS_UNAVAILABLE,
               "the pack is one of %u tensor-parallel ranks, and the %s backend of this libhkrt runs no collectives",
               ranks, module->backend->name);
  return HK_OK;
}

static hk_status_t session_create(hk_pack_t *pack, const hk_session_options_t *caller_options,
                                  hk_session_t **out_session) {
  const hk_pack_view_t *v = hk_pack_view(pack);
  uint32_t target, bucket;
  hk_session_options_t opts;
  HK_RETURN_IF_ERROR(options_read(caller_options, &opts));
  const hk_session_options_t *options = &opts;
  bool ptx;
  HK_RETURN_IF_ERROR(
      hk_pack_select_code_on(pack, options->target, options->device, options->prefer_ptx != 0, &target, &ptx));
  HK_RETURN_IF_ERROR(pick_bucket(v, options->batch, &bucket));
  hk_module_t *module;
  HK_RETURN_IF_ERROR(hk_pack_module_code_on(pack, target, options->device, ptx, &module));
  HK_RETURN_IF_ERROR(check_ranks(v, module, options));

  const hk_allocator_t *a = hk_pack_allocator(pack);
  hk_session_t *s = hk_calloc(a, 1, sizeof *s);
  HK_FAIL_IF(!s, HK_STATUS_OUT_OF_MEMORY, "out of memory creating a session");
  s->pack = pack;
  s->view = v;
  s->allocator = a;
  s->target = target;
  s->module = module;
  s->bucket = bucket;
  s->options = opts;
  s->options.target = NULL;
  hk_status_t st = app_build(s);
  if (st == HK_OK) st = app_set_batch(s, options->batch);
  if (st == HK_OK && !options->no_pack_weights) st = app_bind_pack_weights(s);
  if (st == HK_OK) st = app_alloc_state(s);
  if (st == HK_OK) st = bucket_build(s, bucket, options->batch < v->manifest->batch_sizes[bucket]);
  if (st != HK_OK) {
    hk_session_destroy(s);
    return st;
  }
  *out_session = s;
  return HK_OK;
}

HK_API hk_status_t hk_session_create(hk_pack_t *pack, const hk_session_options_t *options,
                                     hk_session_t **out_session) {
  if (out_session) *out_session = NULL;
  HK_FAIL_IF(!pack || !options || !out_session, HK_STATUS_INVALID_ARGUMENT,
             "pack, options and out_session must not be NULL");
  hk_status_t st = session_create(pack, options, out_session);
  if (st != HK_OK) hk_pack_note_error(pack);
  return st;
}

HK_API hk_status_t hk_session_set_batch(hk_session_t *s, uint64_t batch) {
  HK_FAIL_IF(!s, HK_STATUS_INVALID_ARGUMENT, "session is NULL");
  HK_RETURN_IF_ERROR(session_enter(s));
  uint32_t bucket;
  hk_status_t st = pick_bucket(s->view, batch, &bucket);
  if (st == HK_OK) st = app_set_batch(s, batch);
  if (st == HK_OK) s->bucket = bucket;
  else hk_error_copy(s->error, sizeof s->error);
  session_leave(s);
  return st;
}

/* ---- bind and run ------------------------------------------------------------------------------ */
static hk_status_t session_bind(hk_session_t *s, const char *name, void *data, size_t bytes);

HK_API hk_status_t hk_session_bind(hk_session_t *s, const char *name, void *data, size_t bytes) {
  HK_FAIL_IF(!s || !name, HK_STATUS_INVALID_ARGUMENT, "session and name must not be NULL");
  HK_RETURN_IF_ERROR(session_enter(s));
  hk_status_t st = session_bind(s, name, data, bytes);
  session_leave(s);
  return st;
}

/* hk_session_bind, the session claimed. */
static hk_status_t session_bind(hk_session_t *s, const char *name, void *data, size_t bytes) {
  hk_status_t st = HK_OK;
  if (!data) { /* a NULL required pointer, whatever else is wrong */
    st = HK_ERROR(HK_STATUS_INVALID_ARGUMENT, "tensor %s: data is NULL", name);
    hk_error_copy(s->error, sizeof s->error);
    return st;
  }
  for (uint32_t i = 0; i < s->app_count; i++) {
    hk_app_tensor_t *at = &s->app[i];
    if (strcmp(at->info.name, name) != 0) continue;
    if (bytes != at->info.bytes) {
      char shape[128];
      describe_shape(&at->info, shape, sizeof shape);
      st = HK_ERROR(HK_STATUS_INVALID_ARGUMENT, "tensor %s expects %zu bytes (%s), got %zu", name, at->info.bytes,
                    shape, bytes);
    } else if (((uintptr_t)data & (HK_BIND_ALIGN - 1)) != 0) {
      st = HK_ERROR(HK_STATUS_INVALID_ARGUMENT,
                    "tensor %s: buffer %p is not %u-byte aligned (kernels load 16-byte vectors; "
                    "malloc, cudaMalloc and hk_session_alloc all align enough)", name, data, HK_BIND_ALIGN);
    } else {
      if (at->owned != data) app_release_owned(s, at);
      at->data = data; /* reaches the graph's slots at the next run */
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

/* Enqueues, for a padded run at s->batch, the zeroing of input staging rows a larger
 * batch left behind (or of the whole staging area at its first use) and the copies of
 * the inputs' real rows into their staging buffers. */
static hk_status_t stage_inputs(hk_session_t *s, hk_bucket_t *b, void *stream) {
  const hk_backend_t *be = s->module->backend;
  char *base = b->backend->workspace;
  if (!b->staging_zeroed) {
    if (b->staging_bytes) /* 0 when nothing depends on batch */
      HK_RETURN_IF_ERROR(be->zero_async(s->module, base + b->staging_first, (size_t)b->staging_bytes, stream));
    b->staging_zeroed = true;
    b->input_rows = 0;
  }
  for (uint32_t i = 0; i < s->app_count && b->input_rows > s->batch; i++) {
    const hk_app_tensor_t *at = &s->app[i];
    if (b->staging[i] == HK_NO_STAGING || at->info.role == HK_TENSOR_OUTPUT) continue;
    size_t row = at->info.bytes / s->batch; /* bytes per unit of batch: the layout is mul*batch x rest */
    HK_RETURN_IF_ERROR(be->zero_async(s->module, base + b->staging[i] + at->info.bytes,
                                      row * (size_t)(b->input_rows - s->batch), stream));
  }
  b->input_rows = s->batch;
  for (uint32_t i = 0; i < s->app_count; i++) {
    const hk_app_tensor_t *at = &s->app[i];
    if (b->staging[i] == HK_NO_STAGING || at->info.role == HK_TENSOR_OUTPUT) continue;
    HK_RETURN_IF_ERROR(be->copy_async(s->module, base + b->staging[i], at->data, at->info.bytes, stream));
  }
  return HK_OK;
}

static hk_status_t unstage_outputs(hk_session_t *s, hk_bucket_t *b, void *stream) {
  const hk_backend_t *be = s->module->backend;
  char *base = b->backend->workspace;
  for (uint32_t i = 0; i < s->app_count; i++) {
    const hk_app_tensor_t *at = &s->app[i];
    if (b->staging[i] == HK_NO_STAGING || at->info.role != HK_TENSOR_OUTPUT) continue;
    HK_RETURN_IF_ERROR(be->copy_async(s->module, at->data, base + b->staging[i], at->info.bytes, stream));
  }
  return HK_OK;
}

/* The state of the bucket that runs s->batch, built now if it does not exist yet (or
 * lacks the staging buffers a padded batch needs); *out_pad: whether runs pad. Everything
 * that replays the current graph (runs, and tools that walk its launches) goes through
 * this. Errors: those of bucket_build. */
static hk_status_t bucket_current(hk_session_t *s, hk_bucket_t **out_bucket, bool *out_pad) {
  bool pad = s->batch < s->view->manifest->batch_sizes[s->bucket];
  hk_bucket_t *b = s->buckets[s->bucket];
  if (b && pad && !b->has_staging) { /* built for its own batch size: rebuild once, with staging */
    bucket_destroy(s, b);
    s->buckets[s->bucket] = b = NULL;
  }
  if (!b) HK_RETURN_IF_ERROR(bucket_build(s, s->bucket, pad));
  *out_bucket = s->buckets[s->bucket];
  *out_pad = pad;
  return HK_OK;
}

/* Runs the current bucket's graph at s->batch. Every application tensor is bound. */
static hk_status_t session_run(hk_session_t *s, void *stream) {
  hk_bucket_t *b;
  bool pad;
  HK_RETURN_IF_ERROR(bucket_current(s, &b, &pad));
  bool moved = false;
  for (uint32_t i = 0; i < s->app_count; i++) {
    const hk_app_tensor_t *at = &s->app[i];
    void *p = pad && b->staging[i] != HK_NO_STAGING ? (char *)b->backend->workspace + b->staging[i] : at->data;
    if (b->tensor_ptrs[at->tensor] != p) {
      b->tensor_ptrs[at->tensor] = p;
      moved = true;
    }
  }
  if (b->tmap_count && (moved || !b->tmaps_encoded)) { /* maps hold addresses: rebuild them */
    HK_RETURN_IF_ERROR(tmaps_encode(s, b));
    moved = true;
  }
  if (moved) b->backend->bind_generation++;
  if (pad) HK_RETURN_IF_ERROR(stage_inputs(s, b, stream));
  HK_RETURN_IF_ERROR(b->backend->backend->run(b->backend, stream));
  if (pad) HK_RETURN_IF_ERROR(unstage_outputs(s, b, stream));
  return HK_OK;
}

HK_API hk_status_t hk_session_run(hk_session_t *s, void *stream) {
  HK_FAIL_IF(!s, HK_STATUS_INVALID_ARGUMENT, "session is NULL");
  HK_RETURN_IF_ERROR(session_enter(s));
  hk_status_t st = HK_OK;
  for (uint32_t i = 0; i < s->app_count && st == HK_OK; i++) {
    if (s->app[i].data) continue;
    char names[600];
    list_names(s, true, names, sizeof names);
    st = HK_ERROR(HK_STATUS_FAILED_PRECONDITION, "run before every tensor is bound at batch size %llu: unbound %s",
                  (unsigned long long)s->batch, names);
  }
  if (st == HK_OK) st = session_run(s, stream);
  if (st != HK_OK) hk_error_copy(s->error, sizeof s->error);
  session_leave(s);
  return st;
}

HK_API int hk_session_tensor_bound(const hk_session_t *s, uint32_t index) {
  return s && index < s->app_count && s->app[index].data != NULL;
}

bool hk_session_binds_in_place(const hk_session_t *s, const void *bytes) {
  return s->module->backend->kind == HK_TARGET_HOST && bytes && ((uintptr_t)bytes & (HK_BIND_ALIGN - 1)) == 0;
}

hk_status_t hk_session_bind_many(hk_session_t *s, uint32_t n, const uint32_t *index, void *const *data,
                                 const bool *owned) {
  HK_RETURN_IF_ERROR(session_enter(s));
  for (uint32_t k = 0; k < n; k++) {
    assert(index[k] < s->app_count && data[k] && ((uintptr_t)data[k] & (HK_BIND_ALIGN - 1)) == 0);
    hk_app_tensor_t *at = &s->app[index[k]];
    app_release_owned(s, at);
    at->data = data[k];
    if (owned[k]) at->owned = data[k];
  }
  session_leave(s);
  return HK_OK;
}

hk_pack_t *hk_session_pack(const hk_session_t *s) { return s->pack; }
const hk_allocator_t *hk_session_allocator(const hk_session_t *s) { return s->allocator; }

void hk_session_note_error(hk_session_t *s) { hk_error_copy(s->error, sizeof s->error); }

/* ---- memory ------------------------------------------------------------------------------ */
HK_API hk_status_t hk_session_alloc(hk_session_t *s, size_t bytes, void **out_ptr) {
  if (out_ptr) *out_ptr = NULL;
  HK_FAIL_IF(!s || !out_ptr, HK_STATUS_INVALID_ARGUMENT, "session and out_ptr must not be NULL");
  HK_RETURN_IF_ERROR(session_enter(s));
  hk_status_t st = s->module->backend->mem_alloc(s->module, bytes, out_ptr);
  if (st != HK_OK) {
    *out_ptr = NULL; /* whatever the driver left there */
    hk_error_copy(s->error, sizeof s->error);
  }
  session_leave(s);
  return st;
}

HK_API void hk_session_free(hk_session_t *s, void *ptr) {
  if (s && ptr) s->module->backend->mem_free(s->module, ptr);
}

HK_API hk_status_t hk_session_copy(hk_session_t *s, void *dst, const void *src, size_t bytes, hk_copy_kind_t kind) {
  HK_FAIL_IF(!s || ((!dst || !src) && bytes), HK_STATUS_INVALID_ARGUMENT, "session, dst and src must not be NULL");
  HK_FAIL_IF(kind > HK_COPY_DEVICE_TO_DEVICE, HK_STATUS_INVALID_ARGUMENT, "unknown copy kind %d", (int)kind);
  HK_RETURN_IF_ERROR(session_enter(s));
  hk_status_t st = s->module->backend->mem_copy(s->module, dst, src, bytes, kind);
  if (st != HK_OK) hk_error_copy(s->error, sizeof s->error);
  session_leave(s);
  return st;
}

HK_API hk_status_t hk_session_synchronize(hk_session_t *s, void *stream) {
  HK_FAIL_IF(!s, HK_STATUS_INVALID_ARGUMENT, "session is NULL");
  HK_RETURN_IF_ERROR(session_enter(s));
  hk_status_t st = s->module->backend->synchronize(s->module, stream);
  if (st != HK_OK) hk_error_copy(s->error, sizeof s->error);
  session_leave(s);
  return st;
}

/* ---- profiling ----------------------------------------------------------------------------
 * The launches of the current bucket's graph (the target's graphs are one per manifest
 * bucket, in manifest order: verified). */

/* Most passes hk_session_profile runs: bounds the sample buffer (8 bytes x launches x passes). */
#define HK_PROFILE_MAX_REPEATS 100000u

static const hk_graph_rec_t *current_graph(const hk_session_t *s) {
  return &s->view->graphs[s->view->targets[s->target].graph_first + s->bucket];
}

HK_API uint32_t hk_session_launch_count(const hk_session_t *s) { return s ? current_graph(s)->node_count : 0; }

HK_API hk_status_t hk_session_launch_info(const hk_session_t *s, uint32_t index, hk_launch_info_t *out_info) {
  HK_FAIL_IF(!s || !out_info, HK_STATUS_INVALID_ARGUMENT, "session and out_info must not be NULL");
  const hk_graph_rec_t *g = current_graph(s);
  HK_FAIL_IF(index >= g->node_count, HK_STATUS_NOT_FOUND, "launch index %u out of range (%u launches)", index,
             g->node_count);
  const hk_pack_view_t *v = s->view;
  uint32_t node = g->node_first + index; /* in range: verified */
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

/* One normal run (bucket built, tensors placed, a padded batch staged), then the backend
 * times each launch alone over the same buffers. */
static hk_status_t session_profile(hk_session_t *s, void *stream, uint32_t repeats, double *out_us) {
  HK_FAIL_IF(repeats == 0 || repeats > HK_PROFILE_MAX_REPEATS, HK_STATUS_INVALID_ARGUMENT,
             "repeats must be 1..%u, got %u", HK_PROFILE_MAX_REPEATS, repeats);
  for (uint32_t i = 0; i < s->app_count; i++) {
    if (s->app[i].data) continue;
    char names[600];
    list_names(s, true, names, sizeof names);
    return HK_ERROR(HK_STATUS_FAILED_PRECONDITION, "profile before every tensor is bound: unbound %s", names);
  }
  HK_RETURN_IF_ERROR(session_run(s, stream));
  hk_bucket_t *bk = s->buckets[s->bucket];
  const hk_backend_t *b = bk->backend->backend;
  HK_FAIL_IF(!b->profile, HK_STATUS_UNAVAILABLE, "the %s backend cannot time launches", b->name);
  uint32_t n = bk->launch_count, passes = repeats + 1; /* pass 0 warms up: not counted */
  if (n == 0) return HK_OK;
  double *samples = hk_calloc(s->allocator, (size_t)n * passes, sizeof *samples);
  HK_FAIL_IF(!samples, HK_STATUS_OUT_OF_MEMORY, "out of memory for %u x %u timing samples", n, passes);
  hk_status_t st = b->profile(bk->backend, stream, passes, samples);
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
  HK_RETURN_IF_ERROR(session_enter(s));
  hk_status_t st = session_profile(s, stream, repeats, out_us);
  if (st != HK_OK) hk_error_copy(s->error, sizeof s->error);
  session_leave(s);
  return st;
}
