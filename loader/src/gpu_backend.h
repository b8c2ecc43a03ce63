/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_backend.h -- the GPU backend core (gpu_backend.c), written once for CUDA and HIP over
 * a table of vendor calls (hk_gpu_ops_t).
 *
 * The core owns what both vendors do the same way: a module per target and device whose
 * distinct code ranges are loaded once and every kernel resolved; a session's workspace;
 * one graph of kernel nodes built from the stored dependencies and instantiated once, its
 * node parameters refreshed in the first run after a bind; stream launches instead when
 * the session asks for them or the graph cannot be built (recorded in the base session's
 * graph / graph_fallback); programmatic dependent launch of the launches marked pdl
 * (programmatic edges in the graph; programmatic stream launches, never for a run's first
 * launch) when the vendor's driver can do it (pdl_support); event profiling, every launch
 * the ordinary way; memory, copies and fills; TMA tensor maps through the vendor's encoder
 * when it has one (CUDA).
 *
 * A vendor file (backend_cuda.c, backend_hip.c) keeps symbol loading, device discovery,
 * target ranking and the packing of its own structs, and fills one static const
 * hk_gpu_ops_t. Its hk_backend_t names its own available / runs_target / describe /
 * unavailable_reason and a module_load that calls hk_gpu_module_load with its table; the
 * other entries are the core's (HK_GPU_BACKEND_ENTRIES), which find the table through the
 * module.
 *
 * Handles: the core holds every vendor handle (code object, function, graph, graph node,
 * executable graph, event, stream, device pointer) as a void *; only the vendor converts
 * them to its types.
 */
#ifndef HK_GPU_BACKEND_H
#define HK_GPU_BACKEND_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "gpu_internal.h"

typedef struct hk_gpu_ops hk_gpu_ops_t;
typedef struct hk_gpu_driver hk_gpu_driver_t;

/* Common base of the vendor module structs: a target's code loaded on one device. */
typedef struct hk_gpu_module {
  hk_module_t base;
  const hk_gpu_ops_t *ops;
  void **objects;        /* loaded code objects, one per distinct code range */
  uint32_t object_count;
  void **fns;            /* base.kernel_count function handles, by target-local kernel index */
} hk_gpu_module_t;

/* The vendor calls the core makes. Calls returning hk_status_t go through the vendor's
 * check macro (message: "<driver call> failed: <driver's error name> (<description>)");
 * the core adds what it was doing as a prefix. */
struct hk_gpu_ops {
  const hk_backend_t *backend;
  hk_gpu_driver_t *driver; /* the vendor runtime, probed on first use */
  const char *vendor;      /* "CUDA", "HIP": in messages */
  size_t module_size;      /* of the vendor module struct, which starts with hk_gpu_module_t */
  bool allow_bundle;       /* code ranges may be clang offload bundles (hk_gpu_image_ok) */
  uint16_t elf_machine;    /* e_machine of the vendor's ELF code objects (image_internal.h) */

  /* Modules. open: makes the module's device (and context) current on this thread and
   * keeps what the module needs of it. close: unloads m->objects and undoes open; called
   * whatever open and the loads reached. enter: makes the module's device current again. */
  hk_status_t (*module_open)(hk_gpu_module_t *m);
  void (*module_close)(hk_gpu_module_t *m);
  hk_status_t (*enter)(const hk_gpu_module_t *m);
  /* Loads one code object; CORRUPT when the driver rejects it as such. */
  hk_status_t (*object_load)(const void *image, void **out_object);
  /* Resolves a kernel; CORRUPT when the object lacks the symbol. */
  hk_status_t (*function_get)(void *object, const char *name, void **out_fn);
  /* What launching l needs once per session (CUDA: opting in to large dynamic shared
   * memory), or NULL. */
  hk_status_t (*launch_prepare)(const hk_gpu_module_t *m, const hk_launch_desc_t *l);

  /* Memory of the current device. mem_alloc sets *out_ptr only on success. */
  hk_status_t (*mem_alloc)(size_t bytes, void **out_ptr);
  void (*mem_free)(void *ptr);
  hk_status_t (*mem_copy)(void *dst, const void *src, size_t bytes, hk_copy_kind_t kind);
  hk_status_t (*copy_async)(void *dst, const void *src, size_t bytes, void *stream);
  hk_status_t (*zero_async)(void *dst, size_t bytes, void *stream);
  /* Waits for stream, or (NULL) for all work of the current device. */
  hk_status_t (*synchronize)(void *stream);
  /* Launches l on stream. programmatic (only when pdl_support has HK_GPU_PDL_STREAM): as a
   * programmatic dependent of the kernel before it on the stream (CUDA: cuLaunchKernelEx with
   * programmatic stream serialization allowed). */
  hk_status_t (*launch)(void *fn, const hk_launch_desc_t *l, bool programmatic, void *stream);
  /* What programmatic dependent launch this driver can do: HK_GPU_PDL_* bits; NULL when the
   * vendor has none (HIP). The core asks before it sets `programmatic` in launch and
   * graph_add_kernel, and launches the ordinary way otherwise. */
  unsigned (*pdl_support)(void);
  /* Tensor maps (hk_backend_t.tensor_map_encode, same contract, with the module's device
   * current); NULL when the vendor has none (HIP). CUDA: cuTensorMapEncodeTiled. */
  hk_status_t (*tensor_map_encode)(const hk_tmap_desc_t *desc, void *data, void *out);

  /* Graphs. graph_create: UNAVAILABLE, naming what, when the driver lacks the graph API.
   * graph_add_kernel: a node launching fn with l's geometry and args, after the nodes
   * nodes[l->deps[...]]; with `programmatic` (only when pdl_support has HK_GPU_PDL_GRAPH and
   * l->dep_count > 0) every one of those edges is programmatic (CUDA: from the upstream
   * kernel's programmatic port, type programmatic). scratch has room for
   * HK_GPU_GRAPH_SCRATCH_SLOTS * l->dep_count handles (void *). *out_* are written whatever
   * the driver returned. */
  hk_status_t (*graph_create)(void **out_graph);
  hk_status_t (*graph_add_kernel)(void *graph, void *fn, const hk_launch_desc_t *l, void *const *nodes, void *scratch,
                                  bool programmatic, void **out_node);
  hk_status_t (*graph_instantiate)(void *graph, void **out_exec);
  hk_status_t (*graph_set_params)(void *exec, void *node, void *fn, const hk_launch_desc_t *l);
  hk_status_t (*graph_launch)(void *exec, void *stream);
  void (*graph_exec_destroy)(void *exec);
  void (*graph_destroy)(void *graph);

  /* Collectives (tensor-parallel sessions; NULL when the vendor has none, HIP today: such a
   * session is refused). comm_check: the communicator (hk_session_options_t comm) has `ranks`
   * ranks and is rank `rank`. collective: runs collective launch l (hk_launch_desc_t.collective)
   * on stream through comm; staging is session memory of at least the session's all_gather
   * bytes ([ranks, rows, cols] of its largest). A session with collectives records its graph by
   * stream capture (capture_begin / capture_end on a stream of its own, stream_create), since
   * a collective library's calls cannot be added as graph nodes. */
  hk_status_t (*comm_check)(void *comm, uint32_t rank, uint32_t ranks);
  hk_status_t (*collective)(void *comm, const hk_launch_desc_t *l, void *staging, void *stream);
  hk_status_t (*stream_create)(void **out_stream);
  void (*stream_destroy)(void *stream);
  hk_status_t (*capture_begin)(void *stream);
  hk_status_t (*capture_end)(void *stream, void **out_graph);

  /* Events (profiling). event_create: UNAVAILABLE, naming what, when the driver lacks the
   * event API. */
  hk_status_t (*event_create)(void **out_event);
  hk_status_t (*event_record)(void *event, void *stream);
  hk_status_t (*event_sync)(void *event);
  hk_status_t (*event_elapsed)(void *start, void *stop, float *out_ms);
  void (*event_destroy)(void *event);
};

/* A collective library of the NCCL API (NCCL on CUDA, RCCL on HIP: the same calls), dlopened
 * on first use (the copy the application's communicator came from: one per process), or the
 * table a test installed (hk_ccl_override). */
typedef struct hk_ccl {
  const char *library, *name; /* "libnccl.so.2", "NCCL" */
  pthread_mutex_t lock;
  hk_nccl_symbols_t sym;
  bool loaded;
  char reason[512];           /* why it cannot be loaded (then not tried again) */
} hk_ccl_t;
#define HK_CCL_INIT(library, name) {library, name, PTHREAD_MUTEX_INITIALIZER, {0}, false, ""}
void hk_ccl_override(hk_ccl_t *c, const hk_nccl_symbols_t *table);
/* The communicator has `ranks` ranks and is rank `rank`. Errors: UNAVAILABLE (no library),
 * INVALID_ARGUMENT, DRIVER. */
hk_status_t hk_ccl_comm_check(hk_ccl_t *c, void *comm, uint32_t rank, uint32_t ranks);
/* Collective launch l (lower.h's layouts) on stream: all_reduce as one sum; all_gather straight
 * into out when it has one row, else into staging ([ranks, rows, cols]) and each rank's block
 * copied to its columns of out with the vendor's 2D copy. */
typedef hk_status_t (*hk_copy_2d_fn)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                     size_t height, void *stream);
hk_status_t hk_ccl_collective(hk_ccl_t *c, void *comm, const hk_launch_desc_t *l, void *staging, void *stream,
                              hk_copy_2d_fn copy_2d);

/* hk_gpu_ops_t.pdl_support bits: stream launches as programmatic dependents; programmatic
 * graph edges. */
#define HK_GPU_PDL_STREAM 0x1u
#define HK_GPU_PDL_GRAPH 0x2u
/* Handles of scratch per dependency graph_add_kernel may use: the upstream nodes, the
 * downstream node repeated, and one 8-byte edge record (at most 2 handles on any host). */
#define HK_GPU_GRAPH_SCRATCH_SLOTS 4

/* The entries of a vendor's hk_gpu_ops_t initializer that follow the naming rule: the
 * vendor defines static <prefix>_<op> for each op listed (CUDA: cuda_graph_create, ...).
 * The vendor sets backend, driver, vendor, module_size, allow_bundle, enter,
 * launch_prepare, tensor_map_encode and pdl_support itself (the last three may stay NULL). */
#define HK_GPU_OPS_ENTRIES(prefix)                                                                        \
  .module_open = prefix##_module_open, .module_close = prefix##_module_close,                             \
  .object_load = prefix##_object_load, .function_get = prefix##_function_get,                             \
  .mem_alloc = prefix##_mem_alloc, .mem_free = prefix##_mem_free, .mem_copy = prefix##_mem_copy,          \
  .copy_async = prefix##_copy_async, .zero_async = prefix##_zero_async,                                   \
  .synchronize = prefix##_synchronize, .launch = prefix##_launch,                                         \
  .graph_create = prefix##_graph_create, .graph_add_kernel = prefix##_graph_add_kernel,                   \
  .graph_instantiate = prefix##_graph_instantiate, .graph_set_params = prefix##_graph_set_params,         \
  .graph_launch = prefix##_graph_launch, .graph_exec_destroy = prefix##_graph_exec_destroy,               \
  .graph_destroy = prefix##_graph_destroy, .event_create = prefix##_event_create,                         \
  .event_record = prefix##_event_record, .event_sync = prefix##_event_sync,                               \
  .event_elapsed = prefix##_event_elapsed, .event_destroy = prefix##_event_destroy

/* module_load of a GPU backend: checks that the backend is available and the device
 * exists, then loads every distinct code range of the target once and resolves every
 * kernel (see hk_backend_t.module_load). ptx: code is the target's PTX payload and the
 * ranges are its PTX records (hk_backend_t.module_load_ptx; each text is checked to be
 * NUL-terminated before the driver reads it). */
hk_status_t hk_gpu_module_load(const hk_gpu_ops_t *ops, const hk_pack_view_t *view, uint32_t target, int device,
                               const hk_allocator_t *allocator, const void *code, bool ptx,
                               hk_module_t **out_module);

void hk_gpu_module_unload(hk_module_t *module);
hk_status_t hk_gpu_session_prepare(hk_module_t *module, const hk_session_options_t *options, uint64_t workspace_bytes,
                                   const hk_launch_desc_t *launches, uint32_t launch_count,
                                   hk_backend_session_t **out_session);
hk_status_t hk_gpu_run(hk_backend_session_t *session, void *stream);
void hk_gpu_session_release(hk_backend_session_t *session);
hk_status_t hk_gpu_mem_alloc(hk_module_t *module, size_t bytes, void **out_ptr);
void hk_gpu_mem_free(hk_module_t *module, void *ptr);
hk_status_t hk_gpu_mem_copy(hk_module_t *module, void *dst, const void *src, size_t bytes, hk_copy_kind_t kind);
hk_status_t hk_gpu_synchronize(hk_module_t *module, void *stream);
hk_status_t hk_gpu_profile(hk_backend_session_t *session, void *stream, uint32_t passes, double *out_us);
hk_status_t hk_gpu_copy_async(hk_module_t *module, void *dst, const void *src, size_t bytes, void *stream);
hk_status_t hk_gpu_zero_async(hk_module_t *module, void *dst, size_t bytes, void *stream);
/* hk_backend_t.tensor_map_encode through the vendor's ops->tensor_map_encode; a vendor whose
 * backend builds tensor maps names it in its hk_backend_t (it is not among
 * HK_GPU_BACKEND_ENTRIES, so the other vendors' entry stays NULL). */
hk_status_t hk_gpu_tensor_map_encode(hk_module_t *module, const hk_tmap_desc_t *desc, void *data, void *out);

/* The entries of a vendor's hk_backend_t after name and kind: its own <prefix>_available,
 * _runs_target, _describe, _unavailable_reason and _module_load (which calls
 * hk_gpu_module_load with its ops), and the core's for the rest. */
#define HK_GPU_BACKEND_ENTRIES(prefix)                                                                    \
  .available = prefix##_available, .runs_target = prefix##_runs_target, .describe = prefix##_describe,    \
  .unavailable_reason = prefix##_unavailable_reason, .module_load = prefix##_module_load,                 \
  .module_unload = hk_gpu_module_unload, .session_prepare = hk_gpu_session_prepare, .run = hk_gpu_run,    \
  .session_release = hk_gpu_session_release, .mem_alloc = hk_gpu_mem_alloc, .mem_free = hk_gpu_mem_free,  \
  .mem_copy = hk_gpu_mem_copy, .synchronize = hk_gpu_synchronize, .profile = hk_gpu_profile,              \
  .copy_async = hk_gpu_copy_async, .zero_async = hk_gpu_zero_async

/* ---- driver errors ------------------------------------------------------------------------------ */
/* Writes the driver's name for result r ("CUDA_ERROR_OUT_OF_MEMORY") and its description. */
typedef void (*hk_gpu_describe_fn)(int r, char *name, size_t name_size, char *desc, size_t desc_size);

/* The body of a vendor's check macro. r: a driver result (0 is success for both vendors).
 * HK_OK, else OUT_OF_MEMORY (r == oom) or DRIVER, with the message "<call> failed: <name>
 * (<description>)" recorded at file:line. */
hk_status_t hk_gpu_status(int r, int oom, hk_gpu_describe_fn describe, const char *call, const char *file, int line);

/* ---- the vendor runtime ------------------------------------------------------------------------ */
/* One entry of a vendor's symbol list (the X-macro in gpu_internal.h, expanded into an
 * array): a symbol, an alternative name, whether the backend cannot work without it, and
 * where its pointer goes in the vendor's table struct. */
typedef struct hk_gpu_symbol {
  const char *symbol, *alt;
  bool required;
  size_t offset;
} hk_gpu_symbol_t;

/* The X-macro's expansion into hk_gpu_symbol_t entries, with HK_GPU_SYMBOL_TABLE defined as
 * the vendor's table struct: {HK_CUDA_SYMBOLS(HK_GPU_SYMBOL_ENTRY)}. */
#define HK_GPU_SYMBOL_ENTRY(member, symbol, alt, required, ret, params) \
  {symbol, alt, required, offsetof(HK_GPU_SYMBOL_TABLE, member)},

/* Longest reason kept for an unavailable runtime. */
#define HK_GPU_REASON_MAX 512

/* A vendor runtime, probed once under `lock` and again after an override: its symbol table
 * is filled from the override (hk_cuda_override_symbols, a fake driver in a test) or from
 * the first of `libraries` that dlopen()s, then find_devices() finds the devices. The
 * vendor initializes the description fields statically (lock: PTHREAD_MUTEX_INITIALIZER);
 * the state fields belong to the functions below. */
struct hk_gpu_driver {
  const char *const *libraries; /* tried in order; the one that opens stays open */
  size_t library_count;
  const char *runtime;          /* "the NVIDIA driver": in "... is too old" */
  const char *package;          /* what to install: in messages */
  const hk_gpu_symbol_t *symbols;
  size_t symbol_count;
  void *table;                  /* the vendor's symbol table struct, table_size bytes */
  void *override_copy;          /* room for an override table, table_size bytes */
  size_t table_size;
  /* With `lock` held and the table filled: the number of devices (> 0), or 0 with the
   * reason written to reason. */
  int (*find_devices)(hk_gpu_driver_t *d);
  pthread_mutex_t lock;
  /* state */
  bool probed, ok, overridden;
  void *dl;
  const char *dl_name;          /* the library dl is */
  const char *library;          /* the library in use, "(override)" under an override */
  int device_count;             /* when ok */
  char reason[HK_GPU_REASON_MAX]; /* why !ok */
};

/* Whether the runtime is usable (probes it the first time). Thread-safe. */
bool hk_gpu_driver_available(hk_gpu_driver_t *d);
/* Why not ("" when available). Borrowed, static. */
const char *hk_gpu_driver_unavailable_reason(hk_gpu_driver_t *d);
/* Makes the next probe take `table` (table_size bytes, copied) instead of the library;
 * NULL goes back to the library. Call while no session of that vendor exists. */
void hk_gpu_driver_override(hk_gpu_driver_t *d, const void *table);

#endif /* HK_GPU_BACKEND_H */
