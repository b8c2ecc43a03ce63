/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_backend.c -- the GPU backend core shared by backend_cuda.c and backend_hip.c (see
 * gpu_backend.h): modules, sessions, graph replay with its stream fallback, profiling and
 * memory, over the vendor's hk_gpu_ops_t.
 *
 * Every entry point first makes the module's device (CUDA: its primary context) current
 * on the calling thread, as the vendors' runtime APIs do, and leaves it current.
 */
#include <assert.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_backend.h"
#include "gpu_internal.h"
#include "status_internal.h"
#include "util_internal.h"

/* ---- the vendor runtime --------------------------------------------------------------------- */
/* dlopen()s the first library that loads (once) and dlsym()s every symbol into the table
 * (optional ones NULL when absent). False with d->reason when no library loads or one
 * lacks a required symbol. */
static bool driver_open(hk_gpu_driver_t *d) {
  const char *err = NULL;
  for (size_t i = 0; !d->dl && i < d->library_count; i++) {
    d->dl = dlopen(d->libraries[i], RTLD_NOW | RTLD_LOCAL);
    if (d->dl) d->dl_name = d->libraries[i];
    else if (!err) err = dlerror();
  }
  d->library = d->dl_name; /* NULL when none opened */
  if (!d->dl) {
    char names[256] = ""; /* "a", "a and b", "a, b and c" */
    size_t used = 0;
    for (size_t i = 0; i < d->library_count && used < sizeof names; i++) {
      const char *sep = i == 0 ? "" : i + 1 == d->library_count ? " and " : ", ";
      int n = snprintf(names + used, sizeof names - used, "%s%s", sep, d->libraries[i]);
      used += n > 0 ? (size_t)n : 0;
    }
    snprintf(d->reason, sizeof d->reason, "%s not found (%s): install %s", names, err ? err : "dlopen failed",
             d->package);
    return false;
  }
  for (size_t i = 0; i < d->symbol_count; i++) {
    const hk_gpu_symbol_t *s = &d->symbols[i];
    void *p = dlsym(d->dl, s->symbol);
    if (!p && s->alt) p = dlsym(d->dl, s->alt);
    if (!p && s->required) {
      snprintf(d->reason, sizeof d->reason, "%s lacks %s: %s is too old; update %s", d->library, s->symbol,
               d->runtime, d->package);
      return false;
    }
    memcpy((char *)d->table + s->offset, &p, sizeof p);
  }
  return true;
}

bool hk_gpu_driver_available(hk_gpu_driver_t *d) {
  pthread_mutex_lock(&d->lock);
  if (!d->probed) {
    d->probed = true;
    d->ok = false;
    d->device_count = 0;
    memset(d->table, 0, d->table_size);
    if (d->overridden) {
      memcpy(d->table, d->override_copy, d->table_size);
      d->library = "(override)";
    }
    if (d->overridden || driver_open(d)) d->device_count = d->find_devices(d);
    d->ok = d->device_count > 0;
  }
  bool ok = d->ok;
  pthread_mutex_unlock(&d->lock);
  return ok;
}

const char *hk_gpu_driver_unavailable_reason(hk_gpu_driver_t *d) { return hk_gpu_driver_available(d) ? "" : d->reason; }

void hk_gpu_driver_override(hk_gpu_driver_t *d, const void *table) {
  pthread_mutex_lock(&d->lock);
  d->overridden = table != NULL;
  if (table) memcpy(d->override_copy, table, d->table_size);
  d->probed = false;
  pthread_mutex_unlock(&d->lock);
}

/* ---- errors -------------------------------------------------------------------------------- */
hk_status_t hk_gpu_status(int r, int oom, hk_gpu_describe_fn describe, const char *call, const char *file, int line) {
  if (r == 0) return HK_OK;
  char name[96], desc[256];
  describe(r, name, sizeof name, desc, sizeof desc);
  return hk_error_set_at(r == oom ? HK_STATUS_OUT_OF_MEMORY : HK_STATUS_DRIVER, file, line, "%s failed: %s (%s)", call,
                         name, desc);
}

/* ---- modules ------------------------------------------------------------------------------- */
void hk_gpu_module_unload(hk_module_t *module) {
  if (!module) return;
  hk_gpu_module_t *m = (hk_gpu_module_t *)module;
  m->ops->module_close(m);
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

/* Loads every distinct code range once and resolves each kernel in its own object.
 * Errors: CORRUPT (an invalid object, checked before the driver reads it, or one the
 * driver rejects; a missing symbol), and the driver's. */
static hk_status_t load_objects(hk_gpu_module_t *m, const hk_pack_view_t *v, uint32_t target, const char *tname,
                                const uint8_t *code, bool ptx, range_ref_t *refs) {
  const hk_gpu_ops_t *ops = m->ops;
  const hk_target_rec_t *t = &v->targets[target];
  uint32_t n = t->kernel_count;
  uint32_t with_code = 0; /* collectives have no code (run by the communicator): no ref */
  for (uint32_t k = 0; k < n; k++) {
    const hk_kernel_rec_t *kr = &v->kernels[t->kernel_first + k];
    if (hk_op_collective(kr->op)) continue;
    /* verify: a target with PTX has one record per kernel, in order, from ptx_first */
    const hk_ptx_rec_t *pr = ptx ? &v->ptx_recs[v->ptx_first[target] + k] : NULL;
    refs[with_code++] = pr ? (range_ref_t){pr->offset, pr->size, k} : (range_ref_t){kr->code_offset, kr->code_size, k};
  }
  n = with_code;
  qsort(refs, n, sizeof *refs, range_cmp);
  char prefix[HK_MAX_NAME_LEN * 2 + 64];
  for (uint32_t i = 0; i < n; i++) {
    const range_ref_t *r = &refs[i];
    const char *kname = hk_pack_string(v, v->kernels[t->kernel_first + r->kernel].name);
    if (i == 0 || r->offset != refs[i - 1].offset || r->size != refs[i - 1].size) {
      const char *why;
      bool ok = ptx ? hk_ptx_text_ok(code + r->offset, (size_t)r->size, &why)
                    : hk_gpu_image_ok(code + r->offset, (size_t)r->size, ops->allow_bundle, ops->elf_machine, &why);
      HK_FAIL_IF(!ok, HK_STATUS_CORRUPT, "target %s: the %s of kernel %s (bytes [%llu, +%llu)) is invalid: %s", tname,
                 ptx ? "PTX" : "code object", kname, (unsigned long long)r->offset, (unsigned long long)r->size, why);
      void *obj = NULL;
      hk_status_t st = ops->object_load(code + r->offset, &obj);
      if (st != HK_OK) {
        snprintf(prefix, sizeof prefix, "target %s: loading the code object of kernel %s", tname, kname);
        hk_error_prefix(prefix);
        return st;
      }
      m->objects[m->object_count++] = obj;
    }
    hk_status_t st = ops->function_get(m->objects[m->object_count - 1], kname, &m->fns[r->kernel]);
    if (st != HK_OK) {
      snprintf(prefix, sizeof prefix, "target %s: kernel symbol \"%s\" is missing from its code object", tname, kname);
      hk_error_prefix(prefix);
      return st;
    }
  }
  return HK_OK;
}

hk_status_t hk_gpu_module_load(const hk_gpu_ops_t *ops, const hk_pack_view_t *view, uint32_t target, int device,
                               const hk_allocator_t *allocator, const void *code, bool ptx,
                               hk_module_t **out_module) {
  const hk_target_rec_t *t = &view->targets[target];
  const char *tname = hk_pack_string(view, t->name);
  HK_FAIL_IF(!hk_gpu_driver_available(ops->driver), HK_STATUS_UNAVAILABLE, "target %s: %s", tname,
             ops->driver->reason);
  int count = ops->driver->device_count;
  HK_FAIL_IF(device < 0 || device >= count, HK_STATUS_NOT_FOUND, "target %s: no %s device %d (this machine has %d)",
             tname, ops->vendor, device, count);
  assert(ops->module_size >= sizeof(hk_gpu_module_t));
  hk_gpu_module_t *m = hk_calloc(allocator, 1, ops->module_size);
  HK_FAIL_IF(!m, HK_STATUS_OUT_OF_MEMORY, "out of memory loading target %s", tname);
  m->base.backend = ops->backend;
  m->base.allocator = allocator;
  m->base.target = target;
  m->base.kernel_count = t->kernel_count;
  m->base.device = device;
  m->ops = ops;
  size_t n = t->kernel_count ? t->kernel_count : 1;
  m->fns = hk_calloc(allocator, n, sizeof *m->fns);
  m->objects = hk_calloc(allocator, n, sizeof *m->objects);
  range_ref_t *refs = hk_calloc(allocator, n, sizeof *refs);
  hk_status_t st = HK_OK;
  if (!m->fns || !m->objects || !refs) st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory loading target %s", tname);
  if (st == HK_OK) st = ops->module_open(m);
  if (st == HK_OK) st = load_objects(m, view, target, tname, code, ptx, refs);
  m->base.ptx = ptx;
  hk_free(allocator, refs);
  if (st != HK_OK) {
    hk_gpu_module_unload(&m->base);
    return st;
  }
  *out_module = &m->base;
  return HK_OK;
}

/* ---- sessions -------------------------------------------------------------------------- */
typedef struct gpu_session {
  hk_backend_session_t base; /* base.graph: exec holds the instantiated graph */
  void *graph;               /* NULL: stream launches */
  void *exec;
  void **nodes;              /* launch_count entries */
  bool refreshed;            /* node params hold the slot values of bind generation `generation` */
  uint64_t generation;
  unsigned pdl_support;      /* the driver's HK_GPU_PDL_* (0: every launch the ordinary way) */
  /* tensor-parallel sessions (launches with collectives): the communicator, all_gather's staging
   * memory, and the stream the graph is captured from (NULL: stream launches) */
  void *comm;
  uint32_t collectives;
  void *staging;
  void *capture_stream;
} gpu_session_t;

static const hk_gpu_module_t *session_module(const hk_backend_session_t *session) {
  return (const hk_gpu_module_t *)session->module;
}

/* Whether launch i goes to the stream as a programmatic dependent of the kernel before it:
 * a PDL launch, the driver can, and not a run's first launch, whose predecessor on the stream
 * is whatever the application queued before the run (its kernels may write what the PDL
 * kernel reads before its griddepcontrol.wait, e.g. weights). */
static bool stream_programmatic(const gpu_session_t *s, uint32_t i) {
  return i > 0 && s->base.launches[i].pdl && (s->pdl_support & HK_GPU_PDL_STREAM);
}

/* Whether launch i's graph edges are programmatic: a PDL launch with dependencies, and the
 * driver has programmatic edges. (A launch without dependencies is a root of the graph and
 * starts only after the work queued before the graph launch.) */
static bool graph_programmatic(const gpu_session_t *s, uint32_t i) {
  const hk_launch_desc_t *l = &s->base.launches[i];
  return l->pdl && l->dep_count > 0 && (s->pdl_support & HK_GPU_PDL_GRAPH);
}

/* Every launch on stream, in order: kernels (programmatic where allowed), collectives through
 * the communicator. */
static hk_status_t run_launches(gpu_session_t *s, void *stream) {
  const hk_gpu_module_t *m = session_module(&s->base);
  for (uint32_t i = 0; i < s->base.launch_count; i++) {
    const hk_launch_desc_t *l = &s->base.launches[i];
    HK_RETURN_IF_ERROR(l->collective ? m->ops->collective(s->comm, l, s->staging, stream)
                                     : m->ops->launch(m->fns[l->kernel], l, stream_programmatic(s, i), stream));
  }
  return HK_OK;
}

static void destroy_graph(gpu_session_t *s) {
  const hk_gpu_ops_t *ops = session_module(&s->base)->ops;
  if (s->exec) ops->graph_exec_destroy(s->exec);
  if (s->graph) ops->graph_destroy(s->graph);
  s->exec = NULL;
  s->graph = NULL;
}

/* Builds and instantiates the graph: one kernel node per launch, edges from deps
 * (programmatic ones into PDL launches when the driver has them; counted in
 * base.pdl_count). On failure nothing of the graph is left. */
static hk_status_t build_graph(gpu_session_t *s, const hk_allocator_t *a) {
  const hk_gpu_module_t *m = session_module(&s->base);
  const hk_gpu_ops_t *ops = m->ops;
  uint32_t max_deps = 0, edges = 0;
  for (uint32_t i = 0; i < s->base.launch_count; i++)
    if (s->base.launches[i].dep_count > max_deps) max_deps = s->base.launches[i].dep_count;
  /* max_deps <= HK_MAX_DEPS_PER_NODE: verified, so the product is small */
  void *scratch = hk_calloc(a, (size_t)(max_deps ? max_deps : 1) * HK_GPU_GRAPH_SCRATCH_SLOTS, sizeof(void *));
  HK_FAIL_IF(!scratch, HK_STATUS_OUT_OF_MEMORY, "out of memory building a %s graph", ops->vendor);
  hk_status_t st = ops->graph_create(&s->graph);
  for (uint32_t i = 0; st == HK_OK && i < s->base.launch_count; i++) {
    const hk_launch_desc_t *l = &s->base.launches[i]; /* deps < i: verified */
    const bool programmatic = graph_programmatic(s, i);
    st = ops->graph_add_kernel(s->graph, m->fns[l->kernel], l, s->nodes, scratch, programmatic, &s->nodes[i]);
    if (programmatic) edges += l->dep_count;
  }
  hk_free(a, scratch);
  if (st == HK_OK) st = ops->graph_instantiate(s->graph, &s->exec);
  if (st != HK_OK) destroy_graph(s);
  else s->base.pdl_count = edges;
  return st;
}

/* A session with collectives: its graph recorded from its own stream (the launches as
 * run_launches makes them), instantiated; with the slot values of the current bind generation.
 * On failure nothing of the graph is left. */
static hk_status_t capture_graph(gpu_session_t *s) {
  const hk_gpu_ops_t *ops = session_module(&s->base)->ops;
  destroy_graph(s);
  hk_status_t st = HK_OK;
  if (!s->capture_stream) st = ops->stream_create(&s->capture_stream);
  if (st == HK_OK) st = ops->capture_begin(s->capture_stream);
  if (st != HK_OK) return st;
  st = run_launches(s, s->capture_stream);
  void *graph = NULL;
  const hk_status_t end = ops->capture_end(s->capture_stream, &graph); /* ends the capture whatever happened */
  s->graph = graph;
  if (st == HK_OK) st = end;
  if (st == HK_OK) st = ops->graph_instantiate(s->graph, &s->exec);
  if (st != HK_OK) destroy_graph(s);
  s->refreshed = st == HK_OK;
  s->generation = s->base.bind_generation;
  return st;
}

/* The graph of a session that wants one (auto or graph mode). Auto mode falls back to
 * stream launches when the driver lacks the graph API or building the graph fails,
 * keeping the reason in base.graph_fallback; graph mode returns that error. Errors:
 * OUT_OF_MEMORY (the node array), and in graph mode UNAVAILABLE and the driver's. */
static hk_status_t graph_setup(gpu_session_t *s, const hk_session_options_t *options) {
  const hk_gpu_ops_t *ops = session_module(&s->base)->ops;
  const hk_allocator_t *a = s->base.module->allocator;
  s->nodes = hk_calloc(a, s->base.launch_count, sizeof *s->nodes);
  HK_FAIL_IF(!s->nodes, HK_STATUS_OUT_OF_MEMORY, "out of memory creating a %s session", ops->vendor);
  hk_status_t st = s->collectives ? capture_graph(s) : build_graph(s, a);
  if (st == HK_OK) {
    s->base.graph = true;
    return HK_OK;
  }
  if (options->launch_mode == HK_LAUNCH_MODE_GRAPH) {
    hk_error_prefix("graph launch mode asked for, but the graph cannot be built");
    return st;
  }
  hk_error_copy(s->base.graph_fallback, sizeof s->base.graph_fallback);
  hk_error_clear(); /* not fatal: launch on the stream instead */
  return HK_OK;
}

void hk_gpu_session_release(hk_backend_session_t *session) {
  if (!session) return;
  gpu_session_t *s = (gpu_session_t *)session;
  const hk_gpu_module_t *m = session_module(session);
  const hk_allocator_t *a = session->module->allocator;
  (void)m->ops->enter(m);
  destroy_graph(s);
  if (s->capture_stream) m->ops->stream_destroy(s->capture_stream);
  if (s->staging) m->ops->mem_free(s->staging);
  if (session->workspace) m->ops->mem_free(session->workspace);
  hk_free(a, s->nodes);
  hk_free(a, s);
}

/* A session whose launches include collectives: the vendor runs them (UNAVAILABLE otherwise),
 * its communicator matches the pack's ranks and the session's rank, and all_gather's staging
 * memory ([ranks, rows, cols] of the largest one of more than one row) is allocated. */
static hk_status_t collectives_setup(gpu_session_t *s, const hk_session_options_t *options) {
  const hk_gpu_module_t *m = session_module(&s->base);
  uint64_t staging = 0;
  uint32_t ranks = 0;
  for (uint32_t i = 0; i < s->base.launch_count; i++) {
    const hk_launch_desc_t *l = &s->base.launches[i];
    if (!l->collective) continue;
    s->collectives++;
    ranks = l->ranks;
    if (l->collective != HK_OP_ALL_GATHER || *(const int64_t *)l->args[2] <= 1) continue;
    const uint64_t bytes = (uint64_t)*(const int64_t *)l->args[2] * (uint64_t)*(const int64_t *)l->args[3] *
                           (uint64_t)*(const int64_t *)l->args[4] * (l->dtype == HK_DTYPE_F32 ? 4u : 2u);
    if (bytes > staging) staging = bytes; /* verified extents: each factor fits a tensor */
  }
  if (!s->collectives) return HK_OK;
  HK_FAIL_IF(!m->ops->collective, HK_STATUS_UNAVAILABLE,
             "the pack is one of %u tensor-parallel ranks, and this libhkrt runs no %s collectives", ranks,
             m->ops->vendor);
  s->comm = options->comm;
  HK_RETURN_IF_ERROR(m->ops->comm_check(s->comm, options->tensor_rank, ranks));
  if (staging) HK_RETURN_IF_ERROR(m->ops->mem_alloc((size_t)staging, &s->staging));
  return HK_OK;
}

hk_status_t hk_gpu_session_prepare(hk_module_t *module, const hk_session_options_t *options, uint64_t workspace_bytes,
                                   const hk_launch_desc_t *launches, uint32_t launch_count,
                                   hk_backend_session_t **out_session) {
  const hk_allocator_t *a = module->allocator;
  const hk_gpu_module_t *m = (const hk_gpu_module_t *)module;
  const hk_gpu_ops_t *ops = m->ops;
  HK_RETURN_IF_ERROR(ops->enter(m));
  gpu_session_t *s = hk_calloc(a, 1, sizeof *s);
  HK_FAIL_IF(!s, HK_STATUS_OUT_OF_MEMORY, "out of memory creating a %s session", ops->vendor);
  s->base.backend = ops->backend;
  s->base.module = module;
  s->base.launches = launches;
  s->base.launch_count = launch_count;
  s->base.workspace_bytes = workspace_bytes;
  hk_status_t st = HK_OK;
  for (uint32_t i = 0; i < launch_count && st == HK_OK && ops->launch_prepare; i++)
    st = ops->launch_prepare(m, &launches[i]);
  if (st != HK_OK) {
    hk_free(a, s);
    return st;
  }
  if (workspace_bytes > SIZE_MAX) {
    st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "a %llu-byte workspace does not fit in size_t",
                  (unsigned long long)workspace_bytes);
  } else if (workspace_bytes > 0) {
    st = ops->mem_alloc((size_t)workspace_bytes, &s->base.workspace);
    if (st != HK_OK) {
      char prefix[96];
      snprintf(prefix, sizeof prefix, "allocating a %llu-byte workspace", (unsigned long long)workspace_bytes);
      hk_error_prefix(prefix);
    }
  }
  s->pdl_support = ops->pdl_support ? ops->pdl_support() : 0;
  if (st == HK_OK) st = collectives_setup(s, options);
  if (st == HK_OK && options->launch_mode != HK_LAUNCH_MODE_STREAM && launch_count > 0) st = graph_setup(s, options);
  if (st != HK_OK) {
    hk_gpu_session_release(&s->base);
    return st;
  }
  for (uint32_t i = 0; !s->graph && i < launch_count; i++) s->base.pdl_count += stream_programmatic(s, i);
  *out_session = &s->base;
  return HK_OK;
}

hk_status_t hk_gpu_run(hk_backend_session_t *session, void *stream) {
  gpu_session_t *s = (gpu_session_t *)session;
  const hk_gpu_module_t *m = session_module(session);
  const hk_gpu_ops_t *ops = m->ops;
  HK_RETURN_IF_ERROR(ops->enter(m));
  if (s->graph && s->collectives) { /* a captured graph: captured again after a bind */
    if (!s->refreshed || s->generation != session->bind_generation) HK_RETURN_IF_ERROR(capture_graph(s));
    return ops->graph_launch(s->exec, stream);
  }
  if (s->graph) {
    if (!s->refreshed || s->generation != session->bind_generation) {
      /* The args arrays point at the session's slots: re-reading them picks up new bindings. */
      s->refreshed = false;
      for (uint32_t i = 0; i < session->launch_count; i++) {
        const hk_launch_desc_t *l = &session->launches[i];
        HK_RETURN_IF_ERROR(ops->graph_set_params(s->exec, s->nodes[i], m->fns[l->kernel], l));
      }
      s->refreshed = true;
      s->generation = session->bind_generation;
    }
    return ops->graph_launch(s->exec, stream);
  }
  return run_launches(s, stream);
}

/* ---- profiling ------------------------------------------------------------------------------ */
/* Each launch goes to the stream on its own (never through the graph, never as a
 * programmatic dependent: its time is its own) between two events; one synchronization per
 * pass, then the elapsed times of that pass are read. A driver without events fails at the
 * first event_create (UNAVAILABLE). */
hk_status_t hk_gpu_profile(hk_backend_session_t *session, void *stream, uint32_t passes, double *out_us) {
  const hk_gpu_module_t *m = session_module(session);
  const hk_gpu_ops_t *ops = m->ops;
  const hk_allocator_t *a = session->module->allocator;
  uint32_t n = session->launch_count;
  if (n == 0) return HK_OK;
  HK_RETURN_IF_ERROR(ops->enter(m));
  void **ev = hk_calloc(a, (size_t)n * 2, sizeof *ev);
  HK_FAIL_IF(!ev, HK_STATUS_OUT_OF_MEMORY, "out of memory creating %u timing events", n * 2);
  hk_status_t st = HK_OK;
  for (uint32_t i = 0; i < 2 * n && st == HK_OK; i++) st = ops->event_create(&ev[i]);
  for (uint32_t p = 0; p < passes && st == HK_OK; p++) {
    for (uint32_t i = 0; i < n && st == HK_OK; i++) {
      const hk_launch_desc_t *l = &session->launches[i];
      st = ops->event_record(ev[2 * i], stream);
      if (st == HK_OK)
        st = l->collective ? ops->collective(((gpu_session_t *)session)->comm, l, ((gpu_session_t *)session)->staging,
                                             stream)
                           : ops->launch(m->fns[l->kernel], l, false, stream);
      if (st == HK_OK) st = ops->event_record(ev[2 * i + 1], stream);
    }
    if (st == HK_OK) st = ops->event_sync(ev[2 * n - 1]);
    for (uint32_t i = 0; i < n && st == HK_OK; i++) {
      float ms = 0;
      st = ops->event_elapsed(ev[2 * i], ev[2 * i + 1], &ms);
      out_us[(size_t)i * passes + p] = (double)ms * 1e3;
    }
  }
  for (uint32_t i = 0; i < 2 * n; i++)
    if (ev[i]) ops->event_destroy(ev[i]);
  hk_free(a, ev);
  return st;
}

/* ---- memory -------------------------------------------------------------------------------- */
static const hk_gpu_module_t *gpu_module(const hk_module_t *module) { return (const hk_gpu_module_t *)module; }

hk_status_t hk_gpu_mem_alloc(hk_module_t *module, size_t bytes, void **out_ptr) {
  const hk_gpu_module_t *m = gpu_module(module);
  HK_RETURN_IF_ERROR(m->ops->enter(m));
  return m->ops->mem_alloc(bytes ? bytes : 1, out_ptr);
}

void hk_gpu_mem_free(hk_module_t *module, void *ptr) {
  const hk_gpu_module_t *m = gpu_module(module);
  if (m->ops->enter(m) == HK_OK) m->ops->mem_free(ptr);
}

hk_status_t hk_gpu_mem_copy(hk_module_t *module, void *dst, const void *src, size_t bytes, hk_copy_kind_t kind) {
  const hk_gpu_module_t *m = gpu_module(module);
  if (bytes == 0) return HK_OK;
  HK_RETURN_IF_ERROR(m->ops->enter(m));
  return m->ops->mem_copy(dst, src, bytes, kind);
}

hk_status_t hk_gpu_synchronize(hk_module_t *module, void *stream) {
  const hk_gpu_module_t *m = gpu_module(module);
  HK_RETURN_IF_ERROR(m->ops->enter(m));
  return m->ops->synchronize(stream);
}

hk_status_t hk_gpu_copy_async(hk_module_t *module, void *dst, const void *src, size_t bytes, void *stream) {
  const hk_gpu_module_t *m = gpu_module(module);
  if (bytes == 0) return HK_OK;
  HK_RETURN_IF_ERROR(m->ops->enter(m));
  return m->ops->copy_async(dst, src, bytes, stream);
}

hk_status_t hk_gpu_zero_async(hk_module_t *module, void *dst, size_t bytes, void *stream) {
  const hk_gpu_module_t *m = gpu_module(module);
  if (bytes == 0) return HK_OK;
  HK_RETURN_IF_ERROR(m->ops->enter(m));
  return m->ops->zero_async(dst, bytes, stream);
}

/* ---- tensor maps ------------------------------------------------------------------------- */
hk_status_t hk_gpu_tensor_map_encode(hk_module_t *module, const hk_tmap_desc_t *desc, void *data, void *out) {
  const hk_gpu_module_t *m = gpu_module(module);
  HK_FAIL_IF(!m->ops->tensor_map_encode, HK_STATUS_UNAVAILABLE, "the %s backend cannot build TMA tensor maps",
             m->ops->vendor);
  HK_RETURN_IF_ERROR(m->ops->enter(m));
  return m->ops->tensor_map_encode(desc, data, out);
}

/* ---- collective libraries (NCCL, RCCL) ----------------------------------------------------------- */
#define HK_CCL_SYMBOL_ENTRY(member, symbol, alt, required, ret, params) \
  {symbol, alt, required, offsetof(hk_nccl_symbols_t, member)},
static const hk_gpu_symbol_t k_ccl_symbols[] = {HK_NCCL_SYMBOLS(HK_CCL_SYMBOL_ENTRY)};

void hk_ccl_override(hk_ccl_t *c, const hk_nccl_symbols_t *table) {
  pthread_mutex_lock(&c->lock);
  memset(&c->sym, 0, sizeof c->sym);
  c->loaded = table != NULL;
  c->reason[0] = '\0';
  if (table) c->sym = *table;
  pthread_mutex_unlock(&c->lock);
}

static hk_status_t ccl_load(hk_ccl_t *c) {
  pthread_mutex_lock(&c->lock);
  if (!c->loaded && !c->reason[0]) {
    void *dl = dlopen(c->library, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
      snprintf(c->reason, sizeof c->reason, "%s cannot be loaded (%s): tensor-parallel sessions run their collectives "
               "through %s, the library the application's communicator came from", c->library, dlerror(), c->name);
    } else {
      bool ok = true;
      for (size_t i = 0; ok && i < sizeof k_ccl_symbols / sizeof *k_ccl_symbols; i++) {
        void *fn = dlsym(dl, k_ccl_symbols[i].symbol);
        if (!fn) snprintf(c->reason, sizeof c->reason, "%s lacks %s", c->library, k_ccl_symbols[i].symbol), ok = false;
        memcpy((char *)&c->sym + k_ccl_symbols[i].offset, &fn, sizeof fn);
      }
      c->loaded = ok;
      if (!ok) memset(&c->sym, 0, sizeof c->sym);
    }
  }
  const bool loaded = c->loaded;
  pthread_mutex_unlock(&c->lock);
  HK_FAIL_IF(!loaded, HK_STATUS_UNAVAILABLE, "%s", c->reason);
  return HK_OK;
}

#define CCL_CHECK(c, call, args)                                                                               \
  do {                                                                                                         \
    const hk_nccl_result_t r_ = (c)->sym.call args;                                                           \
    HK_FAIL_IF(r_ != 0, HK_STATUS_DRIVER, "%s failed: %s (%s error %d)", #call,                              \
               (c)->sym.ncclGetErrorString ? (c)->sym.ncclGetErrorString(r_) : "?", (c)->name, r_);           \
  } while (0)

hk_status_t hk_ccl_comm_check(hk_ccl_t *c, void *comm, uint32_t rank, uint32_t ranks) {
  HK_RETURN_IF_ERROR(ccl_load(c));
  int count = 0, user_rank = 0;
  CCL_CHECK(c, ncclCommCount, (comm, &count));
  CCL_CHECK(c, ncclCommUserRank, (comm, &user_rank));
  HK_FAIL_IF(count != (int)ranks || user_rank != (int)rank, HK_STATUS_INVALID_ARGUMENT,
             "the %s communicator has %d ranks and is rank %d; the session is rank %u of the pack's %u", c->name, count,
             user_rank, rank, ranks);
  return HK_OK;
}

hk_status_t hk_ccl_collective(hk_ccl_t *c, void *comm, const hk_launch_desc_t *l, void *staging, void *stream,
                              hk_copy_2d_fn copy_2d) {
  HK_RETURN_IF_ERROR(ccl_load(c));
  const int dt = l->dtype == HK_DTYPE_F32 ? HK_NCCL_FLOAT32 : l->dtype == HK_DTYPE_F16 ? HK_NCCL_FLOAT16 : HK_NCCL_BFLOAT16;
  const size_t es = l->dtype == HK_DTYPE_F32 ? 4 : 2;
  const void *in = *(void *const *)l->args[0];
  void *out = *(void *const *)l->args[1];
  if (l->collective == HK_OP_ALL_REDUCE) {
    CCL_CHECK(c, ncclAllReduce, (in, out, (size_t)*(const int64_t *)l->args[2], dt, HK_NCCL_SUM, comm, stream));
    return HK_OK;
  }
  const size_t rows = (size_t)*(const int64_t *)l->args[2], cols = (size_t)*(const int64_t *)l->args[3],
               ranks = (size_t)*(const int64_t *)l->args[4];
  if (rows == 1) {
    CCL_CHECK(c, ncclAllGather, (in, out, cols, dt, comm, stream));
    return HK_OK;
  }
  CCL_CHECK(c, ncclAllGather, (in, staging, rows * cols, dt, comm, stream));
  for (size_t r = 0; r < ranks; r++)
    HK_RETURN_IF_ERROR(copy_2d((char *)out + r * cols * es, ranks * cols * es,
                               (const char *)staging + r * rows * cols * es, cols * es, cols * es, rows, stream));
  return HK_OK;
}
