/* SPDX-License-Identifier: Apache-2.0 */
/*
 * backend.h -- the interface every execution backend implements.
 *
 * A backend is a static const hk_backend_t (a table of function pointers). Its
 * module and session state structs start with the common bases below, so the
 * generic code (pack.c, session.c) can hold them without knowing the backend.
 * Backends: backend_cuda.c, backend_hip.c, backend_host.c, listed in hk_backends[]
 * (backend.c order = preference).
 *
 * Ownership: modules are created by module_load and cached in the pack (one per
 * target, shared by that target's sessions) until hk_pack_destroy calls module_unload.
 * Backend sessions belong to one hk_session_t.
 */
#ifndef HK_BACKEND_H
#define HK_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hk/hkrt.h"
#include "pack_internal.h"

typedef struct hk_backend hk_backend_t;

/* Common base of every backend's loaded code object. */
typedef struct hk_module {
  const hk_backend_t *backend;
  const hk_allocator_t *allocator; /* the pack's */
  uint32_t target;                 /* index in the pack */
  uint32_t kernel_count;           /* the target's kernels; launches use target-local indices */
  int device;                      /* GPU ordinal the module was loaded on (0 for host) */
  bool ptx;                        /* loaded from the target's PTX (JIT), not its code objects */
  struct hk_module *next;          /* the pack's cache: same target loaded on another device */
} hk_module_t;

/* One kernel launch, prepared once per session. args[i] points at the value of
 * argument i (CUDA kernelParams convention); the pointed-to storage belongs to the
 * session and may change between runs (rebinding), the array itself does not. */
typedef struct hk_launch_desc {
  uint32_t kernel; /* target-local kernel index (< module->kernel_count) */
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;
  void **args;
  uint32_t arg_count;
  const uint32_t *deps; /* graph-local indices of earlier launches this one waits for (borrowed) */
  uint32_t dep_count;
  /* The node is flagged HK_NODE_FLAG_PDL (CUDA targets; verified) and the session's options
   * allow PDL: the kernel waits with griddepcontrol.wait before touching earlier launches'
   * data, so a backend may launch it as a programmatic dependent of its predecessors (GPU
   * core: programmatic graph edges, or a programmatic stream launch). Ignoring it is correct. */
  bool pdl;
  /* A collective (HK_OP_ALL_REDUCE, HK_OP_ALL_GATHER; 0: a kernel): no code, the backend runs it
   * through the session's communicator (options comm, tensor_rank) on its arguments, in the
   * pack's element type `dtype` (lower.h's argument layouts). */
  uint32_t collective;
  uint32_t dtype;
  uint32_t ranks;  /* a collective's: the pack's tensor_ranks */
} hk_launch_desc_t;

/* What a TMA tensor map (HK_ARG_TMAP, pack_format.h) describes: the row-major matrix
 * [rows, cols] of dtype, read in boxes of box_inner x box_outer elements with swizzle. */
typedef struct hk_tmap_desc {
  uint32_t dtype;      /* hk_dtype_t: f16, bf16 or f32 (verified) */
  uint32_t swizzle;    /* hk_tmap_swizzle_t */
  uint64_t rows, cols; /* 1..2^32 each; cols * element size a multiple of 16 below 2^40 (verified) */
  uint32_t box_inner, box_outer; /* 1..256 (verified) */
} hk_tmap_desc_t;

/* Longest graph fallback reason kept (a driver message with its call; longer ones are cut). */
#define HK_GRAPH_FALLBACK_MAX 512

/* Common base of every backend's per-session state. */
typedef struct hk_backend_session {
  const hk_backend_t *backend;
  hk_module_t *module;
  void *workspace;                   /* where intermediates live (device memory on GPUs); NULL if 0 bytes */
  uint64_t workspace_bytes;
  const hk_launch_desc_t *launches;  /* borrowed from the session, in a topological order */
  uint32_t launch_count;
  /* Incremented by the session before a run when a tensor slot changed (a new binding, or
   * a switch between bound and staging buffers): a backend that copied argument values (a
   * GPU graph) refreshes them in that run when this moved. */
  uint64_t bind_generation;
  /* Set by session_prepare: whether run replays one GPU graph, and, when a graph was wanted
   * (HK_LAUNCH_MODE_AUTO) but the session launches kernel by kernel instead, why (the
   * driver's message; "" otherwise). hk_session_launch_mode reports them. */
  bool graph;
  char graph_fallback[HK_GRAPH_FALLBACK_MAX];
  /* Set by session_prepare: with a graph, its programmatic edges; with stream launches, the
   * launches that go as programmatic dependents of the kernel before them; 0 when none
   * (hk_session_pdl_count). */
  uint32_t pdl_count;
  /* Set by the host backend's session_prepare (static strings; "" elsewhere, never NULL): the
   * BLAS that computes the GEMM products ("" for the C loops), and why the C loops run
   * (hk_session_host_blas). */
  const char *host_blas;
  const char *host_blas_reason;
  /* Set by the host backend: the instruction set of the code it runs, "avx2" or "baseline"
   * (hk_session_host_isa; NULL elsewhere). */
  const char *host_isa;
} hk_backend_session_t;

struct hk_backend {
  const char *name;           /* "host", "hip", "cuda" */
  hk_target_kind_t kind;
  /* Whether this backend can run anything on this machine (driver present, device found).
   * Cheap after the first call. */
  bool (*available)(void);
  /* Whether a target of this kind with this name/features runs on GPU `device` (ignored
   * by host): 0 no; otherwise a rank, higher = better match (an exact ISA match beats a
   * compatible one), used to pick among several runnable targets. */
  int (*runs_target)(const char *name, const char *features, int device);
  /* Names of the targets this machine runs, for error messages ("host-x86_64"). */
  void (*describe)(char *out, size_t size);
  /* Optional: the name of GPU `device` as the driver reports it (static, or "" when unknown);
   * NULL where the backend does not know names (hk_session_device_name says ""). */
  const char *(*device_name)(int device);
  /* Why available() is false ("libcuda.so.1 not found ..."); "" when available. Borrowed,
   * static. */
  const char *(*unavailable_reason)(void);
  /* Loads a code object (owned by the caller; may be freed after return) and resolves
   * every kernel of the target. Errors: CORRUPT (bad object, missing symbol), UNAVAILABLE,
   * OUT_OF_MEMORY, DRIVER. */
  hk_status_t (*module_load)(const hk_pack_view_t *view, uint32_t target, int device,
                             const hk_allocator_t *allocator, const void *code, size_t code_size,
                             hk_module_t **out_module);
  void (*module_unload)(hk_module_t *module);
  /* Optional (CUDA; NULL elsewhere): whether the PTX of a target with this name JIT-compiles
   * for GPU `device`: 0 no, else a rank (higher = closer to the device; hk_cuda_ptx_rank). */
  int (*runs_ptx)(const char *name, int device);
  /* Optional, with runs_ptx: module_load from the target's decompressed PTX payload (the
   * ranges of its PTX records) instead of its code objects; the driver JIT-compiles it. */
  hk_status_t (*module_load_ptx)(const hk_pack_view_t *view, uint32_t target, int device,
                                 const hk_allocator_t *allocator, const void *ptx, size_t ptx_size,
                                 hk_module_t **out_module);
  /* Allocates the workspace (at least 256-byte aligned: the session carves padded staging
   * buffers out of its end) and whatever replay needs (e.g. an instantiated graph).
   * launches stay valid until session_release. options: the session's, complete (session.c
   * has filled in what the caller's struct_size did not cover); a backend reads the fields
   * meant for it (launch_mode, host_threads; no_pdl is already applied to launches[].pdl). */
  hk_status_t (*session_prepare)(hk_module_t *module, const hk_session_options_t *options, uint64_t workspace_bytes,
                                 const hk_launch_desc_t *launches, uint32_t launch_count,
                                 hk_backend_session_t **out_session);
  /* Whether the backend runs collective launches (hk_launch_desc_t.collective) through the
   * session's communicator; false: a tensor-parallel pack's session is refused. */
  bool collectives;
  /* Runs every launch in order. stream: backend stream or NULL. */
  hk_status_t (*run)(hk_backend_session_t *session, void *stream);
  void (*session_release)(hk_backend_session_t *session);
  /* Memory on the module's device (see hk_session_alloc). */
  hk_status_t (*mem_alloc)(hk_module_t *module, size_t bytes, void **out_ptr);
  void (*mem_free)(hk_module_t *module, void *ptr);
  hk_status_t (*mem_copy)(hk_module_t *module, void *dst, const void *src, size_t bytes, hk_copy_kind_t kind);
  hk_status_t (*synchronize)(hk_module_t *module, void *stream);
  /* Profiling (hk_session_profile): runs every launch in stored order, `passes` times, each
   * launch timed alone on stream (host: the wall clock around it; GPUs: events recorded
   * before and after it on the stream; never as a programmatic dependent, even when
   * launches[i].pdl), and returns when all of it finished.
   * out_us[i * passes + p] = microseconds of launch i in pass p. Errors: UNAVAILABLE (the
   * runtime lacks what timing needs), OUT_OF_MEMORY, DRIVER. */
  hk_status_t (*profile)(hk_backend_session_t *session, void *stream, uint32_t passes, double *out_us);
  /* Padded runs (session.c): enqueue on `stream` (NULL: the default stream), in order with
   * the runs on that stream, a copy of `bytes` between two buffers of the module's device /
   * a fill of `bytes` zero bytes. The host backend does them at once (its runs are
   * synchronous). Errors: DRIVER. */
  hk_status_t (*copy_async)(hk_module_t *module, void *dst, const void *src, size_t bytes, void *stream);
  hk_status_t (*zero_async)(hk_module_t *module, void *dst, size_t bytes, void *stream);
  /* Tensor maps (HK_ARG_TMAP); NULL when the backend cannot build them (host, HIP).
   * Encodes into out (HK_TMAP_BYTES bytes, HK_TMAP_ALIGN-aligned) the map of desc over the
   * device buffer data (16-byte aligned). With desc NULL it only checks that this module's
   * runtime can encode (data and out are ignored), so a session refuses a graph with tensor
   * maps when it is created rather than at its first run. Errors: UNAVAILABLE (the runtime
   * lacks the call), DRIVER (the driver's message). */
  hk_status_t (*tensor_map_encode)(hk_module_t *module, const hk_tmap_desc_t *desc, void *data, void *out);
};

extern const hk_backend_t hk_backend_host;
extern const hk_backend_t hk_backend_cuda;
extern const hk_backend_t hk_backend_hip;

/* Backends in order of preference (cuda, hip, host); NULL-terminated. */
extern const hk_backend_t *const hk_backends[];
/* The backend for a target kind, or NULL when this build has none. */
const hk_backend_t *hk_backend_for_kind(hk_target_kind_t kind);

#endif /* HK_BACKEND_H */
