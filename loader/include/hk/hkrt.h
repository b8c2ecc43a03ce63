/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hk/hkrt.h -- libhkrt, the embeddable runtime that replays .hkpack artifacts.
 *
 * The one public header of the loader. Typical use:
 *
 *   hk_pack_open_options_t po = {.struct_size = sizeof po, .trusted_keys = &key, .trusted_key_count = 1};
 *   hk_pack_t *pack;    hk_pack_open_file_ex("model.hkpack", &po, &pack);   (trust: see "packs" below)
 *   hk_session_t *s;    hk_session_create(pack, &(hk_session_options_t){.struct_size = sizeof(hk_session_options_t),
 *                                                                   .batch = 8}, &s);
 *   hk_session_bind(s, "x", x_ptr, x_bytes);     ... every input, output and param
 *   hk_session_run(s, NULL);                      ... as often as needed
 *   hk_session_destroy(s); hk_pack_destroy(pack);
 *
 * Conventions: every fallible function returns hk_status_t; outputs come last
 * and are named out_*; create/open pairs with destroy, and destroy(NULL) is a
 * no-op. Strings and info structs returned by accessors are borrowed: they live
 * as long as the object they came from. The detail of the last failure on the
 * calling thread is available from hk_last_error(); objects also keep their
 * own (hk_pack_error(), hk_session_error()).
 *
 * NULL, one rule for every function:
 *  - destroy/free functions accept a NULL object (or pointer) and do nothing;
 *  - accessors (functions that return a value, not a status) accept a NULL object and
 *    return a neutral value: 0 for counts and sizes, "" for strings (names, errors, launch
 *    modes, out_reason), HK_BATCH_POLICY_PAD (0) for the batch policy, and NULL from
 *    hk_pack_target_name, as for any index out of range (a NULL pack has no targets);
 *  - fallible functions return HK_STATUS_INVALID_ARGUMENT for a NULL object or a NULL
 *    required pointer (paths, artifact bytes, names, bound data, out_* pointers), with
 *    the reason in hk_last_error(). NULL is allowed only where documented: the allocator
 *    (libc), the open options (defaults), the trusted key list when its count is 0, hk_pack_select_target's `requested` and the options' `target` (best for this
 *    machine), streams (the default stream), out_reason, and the buffers of a 0-byte
 *    hk_session_copy. On failure (of any kind) a non-NULL out_pack, out_session, out_name
 *    or out_ptr is set to NULL.
 *
 * Memory: pointers bound to a session live where the session's target runs
 * (host memory for the host target, device memory for GPU targets).
 *
 * Threads:
 *  - A pack may be shared by any number of threads: opening, hk_pack_* accessors,
 *    hk_pack_select_target and hk_session_create/destroy of different sessions may run
 *    concurrently on one pack (its module cache is locked). hk_pack_destroy must come
 *    after every session of the pack is destroyed and no other call on it is running.
 *  - A session is used by one thread at a time (any thread, one after the other). The
 *    calls that change or run a session -- hk_session_bind, _run, _set_batch, _profile,
 *    _alloc, _copy and _synchronize -- detect a second thread inside one of them on the
 *    same session and return HK_STATUS_BUSY at once (nothing done, the session's own error
 *    message untouched, the detail in hk_last_error()) instead of racing or blocking.
 *    Other calls on a session that another thread is using (accessors, hk_session_free,
 *    hk_session_destroy) are the caller's race. Use one session per thread to run in
 *    parallel: sessions of one pack share its loaded code and nothing else.
 *  - hk_last_error() is per thread. hk_pack_error() returns this thread's copy of the
 *    pack's last message (taken under the pack's lock), so concurrent failing calls on a
 *    shared pack do not race on it; it is borrowed until this thread's next
 *    hk_pack_error() call.
 */
#ifndef HK_HKRT_H
#define HK_HKRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(HK_BUILDING_LIBRARY)
#define HK_API __attribute__((visibility("default")))
#else
#define HK_API
#endif

/* ---- version ------------------------------------------------------------------
 * libhkrt's version, semantic versioning (docs/ABI.md). These lines are the one place it is
 * written: CMake reads them for the project's version, the shared library's file name and
 * the package's version files. The macros say which header a program was compiled with;
 * hk_version() / hk_version_number() which library it runs with. */
#define HKRT_VERSION_MAJOR 0
#define HKRT_VERSION_MINOR 4
#define HKRT_VERSION_PATCH 3
#define HKRT_VERSION_NUMBER (HKRT_VERSION_MAJOR * 10000 + HKRT_VERSION_MINOR * 100 + HKRT_VERSION_PATCH)
#define HKRT_VERSION_STR_(x) #x
#define HKRT_VERSION_STR(x) HKRT_VERSION_STR_(x)
#define HKRT_VERSION_STRING \
  HKRT_VERSION_STR(HKRT_VERSION_MAJOR) "." HKRT_VERSION_STR(HKRT_VERSION_MINOR) "." HKRT_VERSION_STR(HKRT_VERSION_PATCH)
/* The N of the shared library's SONAME, libhkrt.so.N: bumped with every release that breaks
 * programs built against the previous one (docs/ABI.md, "The SONAME"); from 1.0 on, MAJOR.
 * CMake reads it from here too; tests/abi checks the header against the reference dump of the
 * last release of this SONAME, and the built library's SONAME against this line. */
#define HKRT_SOVERSION 1

/* Status codes. Pinned: never renumbered, only appended. */
typedef enum hk_status {
  HK_OK = 0,
  HK_STATUS_INVALID_ARGUMENT = 1,    /* a caller mistake: NULL, bad name, wrong size */
  HK_STATUS_NOT_FOUND = 2,           /* no such tensor / target / batch bucket */
  HK_STATUS_CORRUPT = 3,             /* the artifact failed verification */
  HK_STATUS_UNSUPPORTED_VERSION = 4, /* artifact format newer than this loader reads */
  HK_STATUS_UNAVAILABLE = 5,         /* vendor runtime or device missing */
  HK_STATUS_OUT_OF_MEMORY = 6,
  HK_STATUS_IO = 7,                  /* open/read/mmap failed */
  HK_STATUS_NO_COMPATIBLE_TARGET = 8,/* nothing in the pack runs on this machine */
  HK_STATUS_DRIVER = 9,              /* a driver/runtime call failed */
  HK_STATUS_FAILED_PRECONDITION = 10,/* e.g. run before every tensor is bound */
  HK_STATUS_INTERNAL = 11,
  HK_STATUS_BUSY = 12,               /* another thread is inside a call on the same session
                                        (see "Threads" above); nothing was done */
  HK_STATUS_UNTRUSTED = 13,          /* the open options' trust policy refuses the artifact: a bad
                                        signature, no trusted one where required (hk_pack_open_options_t) */
  HK_STATUS_COUNT_
} hk_status_t;

typedef enum hk_tensor_role {
  HK_TENSOR_INPUT = 0, HK_TENSOR_OUTPUT = 1, HK_TENSOR_PARAM = 2,
  HK_TENSOR_STATE = 4 /* format 1.5: persists across runs (a KV cache); the session allocates it,
                         zeroed, when it is created; binding another buffer replaces it */
} hk_tensor_role_t;

typedef enum hk_element_type {
  HK_ELEMENT_F32 = 0, HK_ELEMENT_F16 = 1, HK_ELEMENT_BF16 = 2,
  HK_ELEMENT_I32 = 3, /* int32 inputs: token ids, sequence lengths (pack format 1.3 tensor records) */
  HK_ELEMENT_I8 = 4,  /* 8-bit integer params (quantized weights, pack format 1.7) */
  HK_ELEMENT_FP8_E4M3 = 5 /* float8 e4m3fn params (quantized weights, pack format 1.7), one byte each */
} hk_element_type_t;

#define HK_TENSOR_MAX_RANK 6

typedef struct hk_allocator {
  void *(*alloc)(void *ctx, size_t size); /* NULL on failure */
  void (*free)(void *ctx, void *ptr);
  void *ctx;
} hk_allocator_t;

typedef struct hk_pack hk_pack_t;
typedef struct hk_session hk_session_t;

typedef struct hk_tensor_info {
  const char *name;          /* borrowed */
  hk_tensor_role_t role;
  hk_element_type_t element_type;
  uint32_t rank;
  int64_t dims[HK_TENSOR_MAX_RANK]; /* resolved for the session's batch */
  size_t bytes;              /* size the bound buffer must have */
} hk_tensor_info_t;

/* What a session does with a batch size that is not one of the pack's buckets. */
typedef enum hk_batch_policy {
  HK_BATCH_POLICY_PAD = 0,   /* run the smallest bucket >= batch; inputs are copied into a
                                padded staging buffer, outputs' real rows copied back */
  HK_BATCH_POLICY_EXACT = 1  /* refuse (NOT_FOUND) */
} hk_batch_policy_t;

/* The host target shares a launch's blocks over at most this many threads. */
#define HK_HOST_MAX_THREADS 64

/* How a GPU session launches the kernels of a run. */
typedef enum hk_launch_mode {
  HK_LAUNCH_MODE_AUTO = 0,   /* one GPU graph (CUDA graph, hipGraph) replayed per run when the driver
                                can build it, else one launch per kernel; hk_session_launch_mode
                                says which and why */
  HK_LAUNCH_MODE_GRAPH = 1,  /* a GPU graph or an error (UNAVAILABLE, DRIVER) from the call that
                                builds the batch bucket's state */
  HK_LAUNCH_MODE_STREAM = 2  /* one launch per kernel, in stored order, on the run's stream */
} hk_launch_mode_t;

/* Options of hk_session_create. The struct grows at its end; struct_size tells the library
 * which fields the caller knows:
 *   sizeof(hk_session_options_t)  every field below is read;
 *   0                             only batch, target and device are read (the first
 *                                 layout's fields; callers that predate struct_size and
 *                                 initialize by name get this when recompiled);
 *   other values                  the fields that end within struct_size are read; a size
 *                                 below the end of `device`, or above this header's
 *                                 sizeof, is INVALID_ARGUMENT (built against a newer hkrt.h).
 * Fields not read take their zero defaults. Binaries built before struct_size existed
 * (libhkrt 0.1.0 headers) must be rebuilt: the field moved the others, and the SONAME went
 * from libhkrt.so.0 to libhkrt.so.1 for it (HKRT_SOVERSION), so such a binary does not load. */
typedef struct hk_session_options {
  uint32_t struct_size;      /* sizeof(hk_session_options_t), or 0 (see above) */
  uint64_t batch;            /* 1 .. the largest bucket under pad; a bucket under exact */
  const char *target;        /* target name ("host-x86_64", "sm_90"); NULL: best for this machine */
  int device;                /* GPU ordinal for GPU targets */
  /* ---- read when struct_size covers them ---- */
  hk_launch_mode_t launch_mode; /* GPU targets; the host target ignores it */
  uint32_t host_threads;     /* host target: threads that share a launch's blocks, the calling
                                one included (1: the calling thread alone; at most
                                HK_HOST_MAX_THREADS are used);
                                0: the online CPUs. GPU targets ignore it */
  uint32_t reserved0;        /* never read: the tail padding of the layout that ended with
                                host_threads (40 bytes on 64-bit hosts), kept so that no_pdl lies
                                past it and a caller built against that header (struct_size 40,
                                padding bytes undefined) never has them read as no_pdl */
  uint32_t no_pdl;           /* 0: kernels the pack marks for programmatic dependent launch (PDL,
                                CUDA targets on Hopper and later) start while the kernels they
                                depend on are still finishing (graph: programmatic edges, CUDA
                                12.3+; stream launches: cuLaunchKernelEx with programmatic
                                stream serialization, CUDA 12.0+; an older driver launches them
                                the ordinary way); 1: every kernel launches the ordinary way.
                                Other values are INVALID_ARGUMENT. hk_session_pdl_count says
                                what is in use */
  uint32_t reserved1;        /* never read: the tail padding of the layout that ended with no_pdl
                                (48 bytes on 64-bit hosts), kept so that prefer_ptx lies past it */
  uint32_t prefer_ptx;       /* 0: a CUDA target's cubins (SASS) where one runs on the device:
                                the same compute capability, else an older minor of the same
                                major (an sm_80 cubin on sm_86); its PTX only where no cubin runs
                                (a newer GPU: the driver JIT-compiles the PTX of the closest older
                                architecture; arch-specific sm_90a PTX only on sm_90). 1: the PTX
                                wherever it runs (testing the JIT path; hkc run: HK_PREFER_PTX=1).
                                Other values are INVALID_ARGUMENT. hk_session_code_kind says
                                which code a session runs */
  uint32_t reserved2;        /* never read: the tail padding of the layout that ended with
                                prefer_ptx (56 bytes on 64-bit hosts), kept so that
                                no_pack_weights lies past it */
  uint32_t no_pack_weights;  /* 0: a pack that stores its params (hk_pack_weight_count > 0; hkc
                                build --weights) binds them when the session is created (host
                                target: the pack's own bytes, in place, where 16-byte aligned,
                                else a copy the session owns; GPU targets: a copy in device
                                memory the session owns); 1: nothing is bound, the application
                                binds every param. Other values are INVALID_ARGUMENT. Binding a
                                param by hand (hk_session_bind, hk_session_bind_weights)
                                replaces the pack's, and frees the session's copy */
  uint32_t reserved3;        /* never read: the tail padding of the layout that ended with
                                no_pack_weights (64 bytes on 64-bit hosts), kept so that host_blas
                                lies past it */
  uint32_t host_blas;        /* host target: 0: the f32 GEMMs take their products from OpenBLAS
                                (libopenblas.so.0, dlopen'ed once per process, never linked) where
                                it is installed and the pack's host code takes it, else from
                                their C loops; 1: the C loops always. A session that uses OpenBLAS
                                sets its thread count to 1 (openblas_set_num_threads, process-wide):
                                the session's own threads (host_threads) share the GEMM, each
                                calling sgemm on its rows; the last bits of the sums may then
                                change with host_threads and the batch bucket (the C loops give
                                the same bits for any). Other values are INVALID_ARGUMENT.
                                hk_session_host_blas says what runs. GPU targets ignore it */
  uint32_t reserved4;        /* never read: the tail padding of the layout that ended with host_blas
                                (72 bytes on 64-bit hosts), kept so that comm lies past it */
  /* Tensor parallelism (a pack built with hkc build --tensor-parallel N; hk_pack_tensor_ranks):
   * each of the N ranks is a session of its own, created with the same pack, its rank and one
   * communicator shared by the N: on the host target an hk_host_group_t of N ranks (threads of
   * this process); on CUDA targets the application's ncclComm_t of N ranks (this session's rank
   * in it), on HIP targets its RCCL communicator. Every rank binds its shard of each sliced
   * param (hk_session_bind_weights slices a whole checkpoint), runs the same calls in the same
   * order, and the collectives in its graphs exchange data with the others. A pack of one rank
   * ignores both; a pack of N > 1 ranks needs both (FAILED_PRECONDITION without a communicator,
   * INVALID_ARGUMENT for a rank >= N or a host group of another size). A pack built for one rank
   * (--tensor-parallel 1) has collectives too, of one rank, and needs a communicator of one */
  void *comm;
  uint32_t tensor_rank;      /* this session's rank, 0 .. N-1 */
} hk_session_options_t;

/* ---- tensor parallelism on the host: a group of ranks in one process ----------------------
 * The communicator of host-target ranks that are threads of one process (hk_session_options_t
 * comm). Collectives wait for every rank; one that waits longer than timeout_ms (0: 60000) for a
 * rank that does not come fails with HK_STATUS_DRIVER on every rank and aborts the group (as
 * hk_host_group_abort does: every later collective fails too), so a rank that fails or stops
 * never leaves the others hanging. A group outlives the sessions that use it; destroy it after
 * them. Sessions of one group may run at the same time on different threads (that is the
 * point); each session still belongs to one thread at a time. */
typedef struct hk_host_group hk_host_group_t;
#define HK_HOST_GROUP_DEFAULT_TIMEOUT_MS 60000u
HK_API hk_status_t hk_host_group_create(uint32_t ranks, uint32_t timeout_ms, hk_host_group_t **out_group);
HK_API void hk_host_group_abort(hk_host_group_t *group);
HK_API void hk_host_group_destroy(hk_host_group_t *group);

/* The code a session runs (hk_session_code_kind). */
typedef enum hk_code_kind {
  HK_CODE_NATIVE = 0, /* the target's code objects (cubin SASS, AMDGPU code objects, host ELF) */
  HK_CODE_PTX = 1     /* a CUDA target's PTX, JIT-compiled by the driver at session creation */
} hk_code_kind_t;


/* ---- version of the running library ------------------------------------------ */
/* "MAJOR.MINOR.PATCH" of the libhkrt this program runs with (static storage). */
HK_API const char *hk_version(void);
/* The same as MAJOR * 10000 + MINOR * 100 + PATCH, to compare with HKRT_VERSION_NUMBER. */
HK_API uint32_t hk_version_number(void);

/* ---- status ---------------------------------------------------------------- */
/* The code's name ("OK", "INVALID_ARGUMENT", ...); "UNKNOWN_STATUS" for a value outside the enum. */
HK_API const char *hk_status_string(hk_status_t status);
/* Detail of the last failure on this thread ("" if none). Borrowed until the next call. Never NULL. */
HK_API const char *hk_last_error(void);

/* ---- packs: opening and trust ------------------------------------------------------------
 * Opening a pack for code is executing it: a host target's code object is a shared object that
 * runs in this process (its ELF constructors included) when a session of that target is
 * created, and a GPU target's code runs on the device with access to the device memory the
 * process shares with it (a forged kernel can write anywhere there). Every pack carries code
 * (at least one target). A pack may carry an Ed25519 signature over every other byte of it
 * (hkc build signs with the user's key by default, hkc sign, hkc build --sign;
 * docs/FORMAT.md, "Signatures"). The policy, applied at open (UNTRUSTED names the reason):
 *  - a signature that does not verify is always refused (a metadata-only open reports it);
 *  - a pack, host or GPU, is refused unless signed by one of trusted_keys, or
 *    allow_unsigned_code is set (allow_unsigned_native_code, its older name, is the same);
 *  - with require_signature, any pack not signed by one of trusted_keys is refused, whatever
 *    the allow flags say;
 *  - metadata_only opens any pack that verifies: no code of it can ever load.
 * "Signed by a trusted key" means: the signature verifies and its public key is byte-equal to
 * one of trusted_keys. libhkrt trusts only the keys the application names (no user key, no
 * environment variable). The checks of a pack's bytes (verification at open) and of its
 * launches' extents (hk_session_create) catch damage and compiler bugs, not intent: they are
 * no substitute for this policy.
 * libhkrt 0.2 and earlier opened unsigned packs without host code by default; from 0.3 such
 * packs need a signature too (hkc sign PACK --key KEY, the application trusting KEY.pub) or
 * the opt-in (docs/EMBEDDING.md, "Trust"; docs/ABI.md, 0.3.0). */
#define HK_PUBLIC_KEY_BYTES 32 /* an Ed25519 public key */

/* Options of hk_pack_open_file_ex / hk_pack_open_memory_ex. NULL options: every field zero.
 * The struct grows at its end; struct_size tells the library which fields the caller knows:
 * sizeof(hk_pack_open_options_t) or any size from the end of `reserved0` (the first layout)
 * up to this header's sizeof; fields beyond it read as zero. Other sizes: INVALID_ARGUMENT. */
typedef struct hk_pack_open_options {
  uint32_t struct_size;              /* sizeof(hk_pack_open_options_t) */
  uint32_t require_signature;        /* 1: refuse a pack that is not signed by a trusted key */
  const hk_allocator_t *allocator;   /* NULL: libc */
  const uint8_t (*trusted_keys)[HK_PUBLIC_KEY_BYTES]; /* trusted_key_count Ed25519 public keys
                                        (hk_public_key_parse reads a KEY.pub); NULL: none, and
                                        then trusted_key_count must be 0. Copied at open */
  uint32_t trusted_key_count;
  uint32_t allow_unsigned_native_code; /* the older name of allow_unsigned_code, with the same
                                        effect: 1 lets any pack open without a trusted
                                        signature. It once covered host code only, when GPU
                                        code needed no signature; host code being the greater
                                        risk, accepting it unsigned accepts GPU code too */
  uint32_t metadata_only;            /* 1: for tools that read the pack and never run it
                                        (hkc inspect): no trust rule but the signature's is
                                        checked, an invalid signature is reported by
                                        hk_pack_signature instead of refused, and
                                        hk_session_create fails (FAILED_PRECONDITION): no code
                                        is ever loaded */
  uint32_t reserved0;                /* zero */
  /* Limits, refusing a pack (CORRUPT, naming the limit) before the work they bound is done: a
   * pack's records are checked once each, so verification time and memory follow the file's
   * size and these limits (docs/FORMAT.md, "Verification"). 0: the default. */
  uint32_t max_nodes;                /* kernel launches in all graphs together; 0: 4 Mi (the format's limit) */
  uint32_t max_deps;                 /* dependency entries of all nodes together; 0: 64 Mi */
  uint64_t max_code_bytes;           /* a target's decompressed code object; 0: 128 x its compressed size
                                        + 1 MiB, and at most 1 GiB (the format's limit, never exceeded) */
  uint32_t allow_unsigned_code;      /* 1: a pack that no trusted key signed opens for execution (host
                                        code runs in this process, GPU code on the device): only for
                                        packs the application built itself. A signature that does
                                        not verify is still refused, and require_signature wins.
                                        0 (default): refused, UNTRUSTED */
  uint32_t reserved1;                /* zero */
} hk_pack_open_options_t;

/* Reads the whole file into memory the pack owns and verifies all of it (sizes, offsets,
 * counts, checksums, the signature and the trust policy) before anything else reads it; the
 * file is never read again (it may be replaced, truncated or deleted while the pack is open).
 * Errors: IO, CORRUPT, UNSUPPORTED_VERSION, OUT_OF_MEMORY, UNTRUSTED, INVALID_ARGUMENT.
 * NULL: options -> defaults (every field zero); path or out_pack -> INVALID_ARGUMENT. */
HK_API hk_status_t hk_pack_open_file_ex(const char *path, const hk_pack_open_options_t *options,
                                        hk_pack_t **out_pack);
/* Same over caller memory, which must outlive the pack and stay unchanged while it is open
 * (it is not copied, unless it is not 8-byte aligned). NULL: options -> defaults; data or
 * out_pack -> INVALID_ARGUMENT. */
HK_API hk_status_t hk_pack_open_memory_ex(const void *data, size_t size, const hk_pack_open_options_t *options,
                                          hk_pack_t **out_pack);
/* hk_pack_open_file_ex / _memory_ex with default options but the allocator (NULL: libc): no
 * trusted key, so every pack is refused (UNTRUSTED) but by a metadata-only open of the _ex
 * functions: these two are for packs whose trust the application does not decide. */
HK_API hk_status_t hk_pack_open_file(const char *path, const hk_allocator_t *allocator,
                                     hk_pack_t **out_pack);
HK_API hk_status_t hk_pack_open_memory(const void *data, size_t size, const hk_allocator_t *allocator,
                                       hk_pack_t **out_pack);

typedef enum hk_signature_state {
  HK_SIGNATURE_NONE = 0,     /* the pack has no signature */
  HK_SIGNATURE_VALID = 1,    /* it verifies, but its key is not one of the open's trusted keys */
  HK_SIGNATURE_TRUSTED = 2,  /* it verifies and its key is trusted */
  HK_SIGNATURE_INVALID = 3   /* it does not verify (only a metadata-only open keeps such a pack) */
} hk_signature_state_t;
/* The pack's signature as the open found it. *out_key_id (out_key_id may be NULL): the signing
 * key's id, 16 lowercase hex digits (docs/FORMAT.md), "" when unsigned; borrowed from the pack.
 * HK_SIGNATURE_NONE for a NULL pack. */
HK_API hk_signature_state_t hk_pack_signature(const hk_pack_t *pack, const char **out_key_id);
/* Parses the text of a public key file written by `hkc keygen` (KEY.pub: the line
 * "hk-ed25519-public <64 hex digits>", then optional white space). Errors: INVALID_ARGUMENT
 * (also for a NULL text or out_key). */
HK_API hk_status_t hk_public_key_parse(const char *text, size_t size, uint8_t out_key[HK_PUBLIC_KEY_BYTES]);
/* Frees the pack (its sessions must be destroyed first). NULL: nothing. */
HK_API void hk_pack_destroy(hk_pack_t *pack);
/* The pack's last failure message, as a copy owned by the calling thread (see "Threads").
 * "" for a NULL pack. */
HK_API const char *hk_pack_error(const hk_pack_t *pack);

/* The pack's accessors. NULL pack: "" for the name, 0 for counts and sizes, NULL from
 * hk_pack_target_name (as for an index out of range), HK_BATCH_POLICY_PAD. */
HK_API const char *hk_pack_name(const hk_pack_t *pack);
HK_API uint32_t hk_pack_target_count(const hk_pack_t *pack);
HK_API const char *hk_pack_target_name(const hk_pack_t *pack, uint32_t index);
HK_API uint32_t hk_pack_batch_count(const hk_pack_t *pack);
HK_API uint64_t hk_pack_batch_size(const hk_pack_t *pack, uint32_t index);
HK_API hk_batch_policy_t hk_pack_batch_policy(const hk_pack_t *pack);
/* Params whose bytes the pack stores (pack format 1.4, hkc build --weights): a session binds
 * them when it is created (hk_session_options_t.no_pack_weights); 0 when the pack stores none
 * (the application binds every param) or for a NULL pack. */
HK_API uint32_t hk_pack_weight_count(const hk_pack_t *pack);
/* The ranks a tensor-parallel pack's graphs are one of (pack format 1.9, hkc build
 * --tensor-parallel N): N >= 1 (every session of such a pack needs a communicator, even of one
 * rank); 0 for a whole pack or a NULL pack. */
HK_API uint32_t hk_pack_tensor_ranks(const hk_pack_t *pack);
/* Name of the target a session would pick on this machine (or error listing both sides).
 * requested: a target name, or NULL for the best one here. NULL pack or out_name:
 * INVALID_ARGUMENT. */
HK_API hk_status_t hk_pack_select_target(hk_pack_t *pack, const char *requested, const char **out_name);

/* ---- sessions ----------------------------------------------------------------- */
/* Loads the chosen target's code, allocates the workspace for options->batch, and binds the
 * params the pack stores (hk_pack_weight_count; unless options->no_pack_weights): on the host
 * target in place, so the pack must outlive the session, as it must anyway.
 * Before a target's code first loads (once per pack and target), every launch of its graphs,
 * one per batch bucket, is checked against the tensors it touches: from the launch's own
 * arguments (rows, columns, strides, ...) by its op's argument layout, the bytes it may read
 * or write of each tensor must fit that tensor at the bucket's batch and, in packs of format
 * 1.6 or later, equal what hkc recorded (docs/FORMAT.md, "Launch extents"). A launch that
 * would overrun a tensor is CORRUPT, naming the graph, the launch (node, kernel, op), the
 * argument, the tensor and both sizes, and the code is not loaded. This is a robustness check
 * against damaged or miscompiled packs, not the security boundary: a pack's code runs in this
 * process or on its device with the application's memory, and which packs may run at all is
 * decided by signatures and the open options' trust policy ("packs: opening and trust").
 * Errors: NOT_FOUND (batch or target), NO_COMPATIBLE_TARGET, UNAVAILABLE, CORRUPT, DRIVER,
 * FAILED_PRECONDITION (the pack was opened metadata_only). NULL pack, options or out_session:
 * INVALID_ARGUMENT (the options are required: they carry the batch). */
HK_API hk_status_t hk_session_create(hk_pack_t *pack, const hk_session_options_t *options,
                                     hk_session_t **out_session);
/* Frees the session and its workspaces (buffers from hk_session_alloc first). NULL: nothing. */
HK_API void hk_session_destroy(hk_session_t *session);
/* The session's last failure message, and the name of the target it runs; "" for NULL. */
HK_API const char *hk_session_error(const hk_session_t *session);
HK_API const char *hk_session_target(const hk_session_t *session);
/* (0.4.1) The name of the device the session runs on, as its driver reports it ("NVIDIA H100
 * 80GB HBM3"); "host" for the host target; "" for NULL or where the driver does not say (HIP).
 * Static for the life of the process. */
HK_API const char *hk_session_device_name(const hk_session_t *session);
/* How runs launch the kernels of the batch bucket whose state was built last (create builds
 * the first; a run after hk_session_set_batch may build another): "graph" (one GPU graph
 * replay) or "stream" (one launch per kernel: asked for with HK_LAUNCH_MODE_STREAM, the
 * host target, or a fallback). *out_reason (out_reason may be NULL): why the GPU graph that
 * HK_LAUNCH_MODE_AUTO wanted is not used -- the driver lacks the graph API, or building or
 * instantiating the graph failed, with the driver's message -- and "" when nothing fell
 * back. Both strings are borrowed from the session ("" for a NULL session). */
HK_API const char *hk_session_launch_mode(const hk_session_t *session, const char **out_reason);
/* Programmatic dependent launch (PDL) in the batch bucket whose state was built last: with
 * graph replay, the programmatic edges of its graph (each from a launch to a PDL launch that
 * depends on it); with stream launches, the launches that go to the stream as programmatic
 * dependents of the kernel before them (every PDL launch but a run's first, which never
 * overlaps the work queued before the run). 0 when nothing overlaps: the pack marks no launch
 * for PDL (hkc build --no-pdl, or no kernel waits with griddepcontrol), options.no_pdl, a
 * target other than CUDA, or a driver without the calls (cuGraphAddDependencies_v2, CUDA
 * 12.3, for graphs; cuLaunchKernelEx, CUDA 12.0, for streams), which then launches those
 * kernels the ordinary way (correct, without the overlap). 0 for a NULL session. */
HK_API uint32_t hk_session_pdl_count(const hk_session_t *session);
/* Which code of its target the session runs (hk_session_options_t.prefer_ptx); HK_CODE_NATIVE
 * for a NULL session. */
HK_API hk_code_kind_t hk_session_code_kind(const hk_session_t *session);
/* What computes the host target's GEMM products (hk_session_options_t.host_blas): the BLAS
 * ("OpenBLAS 0.3.21 ... (libopenblas.so.0)") when the session uses one, else "" (the C loops,
 * a GPU target, or a NULL session). *out_reason (out_reason may be NULL): why a host session
 * runs the C loops ("libopenblas.so.0 not found ...", "host_blas = 1", "the pack's host code
 * predates BLAS binding"), "" otherwise. Both strings are static or borrowed from the session. */
HK_API const char *hk_session_host_blas(const hk_session_t *session, const char **out_reason);

/* The instruction set of the host code a session runs: "avx2" where the pack's host code
 * object carries hkc's AVX2 + FMA variants (hkc build on x86-64, by default) and this CPU runs
 * them, else "baseline" (x86-64 SSE2, or the build's own -march elsewhere); the variants give
 * the same results as the baseline, only faster. "" for GPU targets and a NULL session. */
HK_API const char *hk_session_host_isa(const hk_session_t *session);

/* Application-visible tensors (inputs, outputs, params), shapes resolved for the batch.
 * The count is 0 for a NULL session; NULL session or out_info: INVALID_ARGUMENT. */
HK_API uint32_t hk_session_tensor_count(const hk_session_t *session);
HK_API hk_status_t hk_session_tensor_info(const hk_session_t *session, uint32_t index,
                                          hk_tensor_info_t *out_info);
/* The checkpoint name of part `part` of param `index` (format 1.4; a spec param declared with
 * `parts:` is the concatenation of those checkpoint tensors along axis 0, which
 * hk_session_bind_weights binds; docs/WEIGHTS.md), borrowed from the pack; NULL when the
 * tensor has fewer parts (none: not a parts param), for an index out of range or a NULL
 * session. Parts are numbered from 0 in concatenation order. */
HK_API const char *hk_session_tensor_part(const hk_session_t *session, uint32_t index, uint32_t part);

/* Binds a buffer of exactly info.bytes bytes, at a 16-byte-aligned address, to the named
 * tensor. Rebinding is allowed. Errors: NOT_FOUND (no such tensor; the message lists the
 * names), INVALID_ARGUMENT (size, alignment, a NULL session, name or data). */
HK_API hk_status_t hk_session_bind(hk_session_t *session, const char *name, void *data, size_t bytes);

/* Tensor parallelism (hk_pack_tensor_ranks > 1): a param or state tensor that each rank holds a
 * slice of has, in hk_session_tensor_info, the rank's dims; hk_session_tensor_whole_info gives the
 * whole tensor's (the same as hk_session_tensor_info for every other tensor and pack; for a
 * `<param>_shard` copy, a slice of a param the ranks also read whole, the name is that param's:
 * the whole tensor is the same), and
 * hk_session_bind_sliced binds the rank's slice of a whole tensor in host memory (`whole`, exactly
 * the whole tensor's bytes, row-major, the tensor's element type): the session copies the slice
 * into memory it owns, so `whole` may be freed on return. For a tensor that is not sliced it binds
 * a copy of `whole`. hk_session_bind_weights slices a whole checkpoint itself. Errors: NOT_FOUND,
 * INVALID_ARGUMENT (size, NULL), OUT_OF_MEMORY, DRIVER, BUSY. */
HK_API hk_status_t hk_session_tensor_whole_info(const hk_session_t *session, uint32_t index,
                                                hk_tensor_info_t *out_info);
HK_API hk_status_t hk_session_bind_sliced(hk_session_t *session, const char *name, const void *whole, size_t bytes);

/* Runs the whole graph once. stream: the backend's stream (CUstream/hipStream_t), or NULL for
 * the default stream. NULL session: INVALID_ARGUMENT.
 * For the host target it returns when results are written. Errors: FAILED_PRECONDITION
 * when a tensor is unbound (named in the message), DRIVER. */
HK_API hk_status_t hk_session_run(hk_session_t *session, void *stream);

/* ---- batch sizes ---------------------------------------------------------------------------
 * A session runs any batch its pack's policy allows. The graph of a bucket is built and
 * instantiated the first time a run needs it and kept for later runs (with its workspace).
 * Batch-dependent tensors change size with the batch: after a change they must be bound
 * again (run says which are unbound); others stay bound. Errors: NOT_FOUND (over the
 * largest bucket, or not a bucket under exact; the message lists the buckets), and
 * INVALID_ARGUMENT for a NULL session. The two accessors return 0 for a NULL session. */
HK_API hk_status_t hk_session_set_batch(hk_session_t *session, uint64_t batch);
HK_API uint64_t hk_session_batch(const hk_session_t *session);  /* the real batch */
HK_API uint64_t hk_session_bucket(const hk_session_t *session); /* the bucket it runs */

/* ---- profiling ------------------------------------------------------------------------------
 * The launches of the current bucket's graph, and each one's time measured alone. The count is
 * 0 for a NULL session; a NULL session or out_info / out_us is INVALID_ARGUMENT; stream as in
 * hk_session_run. */
typedef struct hk_launch_info {
  const char *kernel;  /* symbol (borrowed) */
  const char *nodes;   /* spec node(s) it computes, comma-separated (borrowed) */
  uint64_t bytes;      /* the compiler's estimate of its HBM traffic (0 if the pack has none) */
  uint64_t flops;
  int matrix;          /* flops are matrix-core work */
} hk_launch_info_t;
HK_API uint32_t hk_session_launch_count(const hk_session_t *session);
HK_API hk_status_t hk_session_launch_info(const hk_session_t *session, uint32_t index, hk_launch_info_t *out_info);
/* Runs every launch of the graph `repeats` times one by one on stream (after one warm-up
 * pass) and stores each launch's median time in microseconds into out_us[launch_count].
 * Needs every tensor bound; results in the outputs are those of a normal run. */
HK_API hk_status_t hk_session_profile(hk_session_t *session, void *stream, uint32_t repeats, double *out_us);

/* ---- memory where the session's target runs --------------------------------------------
 * For applications without an allocator of their own, and for tools: device memory for
 * GPU targets (hipMalloc / cuMemAlloc), 256-byte-aligned host memory for the host target.
 * Buffers belong to the session's device and must be freed before the session is
 * destroyed. */
typedef enum hk_copy_kind {
  HK_COPY_HOST_TO_DEVICE = 0, HK_COPY_DEVICE_TO_HOST = 1, HK_COPY_DEVICE_TO_DEVICE = 2
} hk_copy_kind_t;

/* NULL session or out_ptr: INVALID_ARGUMENT. */
HK_API hk_status_t hk_session_alloc(hk_session_t *session, size_t bytes, void **out_ptr);
/* A NULL session or ptr: nothing. */
HK_API void hk_session_free(hk_session_t *session, void *ptr);
/* Synchronous copy (returns when the bytes have arrived). NULL session: INVALID_ARGUMENT; NULL
 * dst or src only with bytes 0. */
HK_API hk_status_t hk_session_copy(hk_session_t *session, void *dst, const void *src, size_t bytes,
                                   hk_copy_kind_t kind);
/* Waits for the work submitted to stream (NULL: the default stream) to finish. NULL session:
 * INVALID_ARGUMENT. */
HK_API hk_status_t hk_session_synchronize(hk_session_t *session, void *stream);

/* ---- generation: prefill and decode over KV caches (docs/GENERATE.md) -----------------------
 * A generator drives a session of a generation pack: i32 inputs ids [batch], ctx [batch],
 * slot [batch] and rows [slots], the i32 output next [slots], state tensors (the KV caches)
 * [layers, slots, max_seq, width], optionally the output logits [slots, vocab]; `hkc import hf
 * --generate` writes such specs. Each of the pack's `slots` cache slots holds one sequence;
 * the generator keeps each slot's length (the tokens its cache holds).
 *
 *   hk_generator_t *g;  hk_generator_create(session, &g);       binds rows, next, logits
 *   hk_generator_append(g, 2, (uint32_t[]){0, 1}, prompts, lengths, next);   prefill two prompts
 *   hk_generator_append(g, 2, (uint32_t[]){0, 1}, (const int32_t *[]){&next[0], &next[1]},
 *                       (uint32_t[]){1, 1}, next);                          one decode step
 *   hk_generator_reset(g, 1);                                   slot 1 takes a new sequence
 *   hk_generator_destroy(g);  (before hk_session_destroy)
 *
 * Threads: a generator belongs to its session: the session's rule (one thread at a time)
 * covers both. While a generator exists, the application must not bind the generator's
 * inputs and outputs nor change the session's batch itself. */
typedef struct hk_generator hk_generator_t;
/* Errors: FAILED_PRECONDITION (not a generation pack: the message names what is missing),
 * OUT_OF_MEMORY, DRIVER; NULL arguments: INVALID_ARGUMENT. */
HK_API hk_status_t hk_generator_create(hk_session_t *session, hk_generator_t **out_generator);
/* Frees the generator's buffers (the session's memory): call it before hk_session_destroy.
 * NULL: nothing. */
HK_API void hk_generator_destroy(hk_generator_t *generator);
/* The pack's slots, max_seq (positions a slot's cache holds), vocab (0 without a logits
 * output), the largest step in tokens (the largest bucket: a longer append runs in several
 * steps), the graph runs so far, and a slot's length; 0 for a NULL generator (or slot out of
 * range). */
HK_API uint32_t hk_generator_slots(const hk_generator_t *generator);
HK_API uint32_t hk_generator_max_seq(const hk_generator_t *generator);
HK_API uint32_t hk_generator_vocab(const hk_generator_t *generator);
HK_API uint32_t hk_generator_max_step(const hk_generator_t *generator);
HK_API uint64_t hk_generator_steps(const hk_generator_t *generator);
HK_API uint32_t hk_generator_length(const hk_generator_t *generator, uint32_t slot);
/* Appends counts[i] tokens (tokens[i]) to the sequence of slots[i] for i < n, at positions
 * length .. length + counts[i] - 1 of that slot, in as few steps as the buckets allow (a
 * prefill is an append of the prompt, a decode step an append of one token per sequence),
 * and stores in out_next[i] the id the pack's output `next` gives after sequence i's last
 * token (the slot's sampling: hk_generator_set_sampling; greedy, the argmax of its logits, by
 * default). The slots' lengths grow by counts[i].
 * Errors, before anything runs: INVALID_ARGUMENT for n outside 1 .. slots, a slot out of
 * range or given twice, a count of 0, a sequence that would pass max_seq (the message says
 * by how much), a token outside 0 .. vocab-1 (when the pack has logits); DRIVER (and the
 * session's errors) when a step fails, after which the call's slots are reset (length 0). */
HK_API hk_status_t hk_generator_append(hk_generator_t *generator, uint32_t n, const uint32_t *slots,
                                       const int32_t *const *tokens, const uint32_t *counts, int32_t *out_next);
/* Sets a slot's length to 0: its next append starts a new sequence (the other slots keep
 * theirs: continuous batching). Errors: INVALID_ARGUMENT (NULL, slot out of range). */
HK_API hk_status_t hk_generator_reset(hk_generator_t *generator, uint32_t slot);
/* Copies the logits that gave out_next[index] of the last append (f16/bf16 widened to float)
 * into out[count], count = vocab: those of the append's last step (an append longer than
 * hk_generator_max_step runs in several; a sequence that ended in an earlier one reads
 * zeros), valid until the next append.
 * Errors: FAILED_PRECONDITION (no logits output), INVALID_ARGUMENT, DRIVER. */
HK_API hk_status_t hk_generator_logits(hk_generator_t *generator, uint32_t index, float *out, size_t count);
/* How a slot picks its next token, on the device (the pack's `sample` op; docs/GENERATE.md):
 * temperature <= 0 (the default) or top_k == 1: greedy, the argmax; else a draw from
 * softmax(logits / temperature) restricted to the top_k largest (0: all) and then to the
 * smallest set of them holding top_p of their probability (1: all), by the Gumbel-max trick
 * with noise from a counter-based hash of (seed, the token's position): the same seed, prompt
 * and settings give the same tokens whatever else the step holds. */
typedef struct hk_sampling {
  float temperature;
  int32_t top_k;
  float top_p;
  uint32_t seed;
} hk_sampling_t;
/* Sets slot's sampling (NULL: greedy) for its next appends; hk_generator_reset keeps it.
 * Errors: INVALID_ARGUMENT (NULL generator, slot out of range, temperature or top_p not a
 * number, top_k < 0); FAILED_PRECONDITION for settings other than greedy on a pack without
 * an i32 input 'sampling' [slots, 4] (one that decodes with argmax). */
HK_API hk_status_t hk_generator_set_sampling(hk_generator_t *generator, uint32_t slot, const hk_sampling_t *sampling);


/* ---- weights: safetensors checkpoints --------------------------------------------------------
 * A weights object holds the tensors of one safetensors file (docs/WEIGHTS.md): an 8-byte
 * little-endian header length N, N bytes of JSON naming each tensor's dtype, shape and byte
 * range, then the tensors' bytes. The file is untrusted: open checks all of it before any
 * tensor is read (header length against the file and max_header_bytes, the JSON, every name,
 * dtype, shape and range; the ranges must tile the data exactly -- no gap, no overlap, as the
 * format requires -- and each must hold exactly product(shape) x dtype size bytes). Errors of
 * the file are CORRUPT, naming the tensor and what is wrong.
 *
 *   hk_weights_t *w;  hk_weights_open_file("model.safetensors", NULL, &w);
 *   hk_session_bind_weights(session, w, NULL, NULL);   every param the file names
 *   ... run ...
 *   hk_session_destroy(session); hk_weights_destroy(w);   (lifetime: hk_session_bind_weights)
 *
 * hk_session_bind_weights binds, for each param (and with HK_BIND_WEIGHTS_INPUTS each input)
 * of the session that the file provides, the file's tensor, after checking that its dtype and
 * shape are exactly the session's (hk_session_tensor_info). */
typedef struct hk_weights hk_weights_t;

/* The safetensors dtypes. Pinned; the first three equal hk_element_type_t's values; I32
 * binds to an HK_ELEMENT_I32 tensor; the others can be read from a file and looked at,
 * never bound. */
typedef enum hk_weights_dtype {
  HK_WEIGHTS_F32 = 0, HK_WEIGHTS_F16 = 1, HK_WEIGHTS_BF16 = 2,
  HK_WEIGHTS_F64 = 3, HK_WEIGHTS_I8 = 4, HK_WEIGHTS_U8 = 5, HK_WEIGHTS_I16 = 6, HK_WEIGHTS_U16 = 7,
  HK_WEIGHTS_I32 = 8, HK_WEIGHTS_U32 = 9, HK_WEIGHTS_I64 = 10, HK_WEIGHTS_U64 = 11, HK_WEIGHTS_BOOL = 12,
  HK_WEIGHTS_F8_E4M3 = 13, HK_WEIGHTS_F8_E5M2 = 14,
  HK_WEIGHTS_DTYPE_COUNT_
} hk_weights_dtype_t;

/* Highest rank of a file's tensor (a file with a higher one is refused, CORRUPT). */
#define HK_WEIGHTS_MAX_RANK 8
/* Default and largest header (the JSON) accepted: the limit of the reference implementation. */
#define HK_WEIGHTS_MAX_HEADER_BYTES (100u << 20)

typedef struct hk_weights_tensor_info {
  const char *name;          /* borrowed from the weights */
  hk_weights_dtype_t dtype;
  const char *dtype_name;    /* the file's spelling: "F32", "BF16", ... (static) */
  uint32_t rank;
  int64_t dims[HK_WEIGHTS_MAX_RANK];
  const void *data;          /* the tensor's bytes (little-endian, row-major), borrowed from
                                the weights; NULL when bytes is 0 */
  size_t bytes;
} hk_weights_tensor_info_t;

/* Options of hk_weights_open_file / _memory. NULL options: every field zero. struct_size:
 * sizeof(hk_weights_open_options_t) (the struct may grow at its end; later libraries keep
 * accepting this size); other sizes are INVALID_ARGUMENT. */
typedef struct hk_weights_open_options {
  uint32_t struct_size;              /* sizeof(hk_weights_open_options_t) */
  uint32_t reserved0;                /* zero */
  const hk_allocator_t *allocator;   /* NULL: libc. The JSON parser (cJSON) allocates from libc
                                        while open runs; nothing of it outlives the call */
  uint64_t max_header_bytes;         /* 0: HK_WEIGHTS_MAX_HEADER_BYTES; larger values are clamped
                                        to it */
} hk_weights_open_options_t;

/* Reads the whole file into memory the weights own (the data at a 64-byte-aligned address)
 * and checks it; the file is not read again. Errors: IO, CORRUPT, OUT_OF_MEMORY,
 * INVALID_ARGUMENT. NULL: options -> defaults; path or out_weights -> INVALID_ARGUMENT. */
HK_API hk_status_t hk_weights_open_file(const char *path, const hk_weights_open_options_t *options,
                                        hk_weights_t **out_weights);
/* Same over caller memory, which is not copied: it must outlive the weights and stay
 * unchanged. A tensor's data is 16-byte aligned when data + 8 + N + its begin offset is.
 * NULL: options -> defaults; data (unless size is 0) or out_weights -> INVALID_ARGUMENT. */
HK_API hk_status_t hk_weights_open_memory(const void *data, size_t size, const hk_weights_open_options_t *options,
                                          hk_weights_t **out_weights);
/* Frees the weights. Sessions that bound tensors in place (see hk_session_bind_weights) must
 * be destroyed, or those tensors rebound, first. NULL: nothing. */
HK_API void hk_weights_destroy(hk_weights_t *weights);
/* Tensors of the file, in the file's header order (0 for NULL). */
HK_API uint32_t hk_weights_count(const hk_weights_t *weights);
/* NULL weights or out_info: INVALID_ARGUMENT; index out of range: NOT_FOUND. */
HK_API hk_status_t hk_weights_tensor_info(const hk_weights_t *weights, uint32_t index,
                                          hk_weights_tensor_info_t *out_info);
/* Index of the tensor named `name`. Errors: NOT_FOUND; NULL weights, name or out_index:
 * INVALID_ARGUMENT. */
HK_API hk_status_t hk_weights_find(const hk_weights_t *weights, const char *name, uint32_t *out_index);
/* The value of key in the file's "__metadata__" (a string -> string map), borrowed from the
 * weights; NULL when absent (or for a NULL weights or key). */
HK_API const char *hk_weights_metadata(const hk_weights_t *weights, const char *key);

/* One entry of a name map: session tensor `tensor` takes the file's tensor `weights`. */
typedef struct hk_weights_name {
  const char *tensor;
  const char *weights;
} hk_weights_name_t;

#define HK_BIND_WEIGHTS_INPUTS 1u     /* bind inputs the file provides too (default: params only) */
#define HK_BIND_WEIGHTS_ALL_PARAMS 2u /* NOT_FOUND, binding nothing, unless the file provides every
                                         param (the message names the missing ones) */
#define HK_BIND_WEIGHTS_COPY 4u       /* host target: always copy into session memory, never bind
                                         the weights' own bytes (GPU targets always copy) */
#define HK_BIND_WEIGHTS_EXACT_DTYPE 8u /* no conversion: a tensor whose dtype differs from the
                                         session's is INVALID_ARGUMENT (as before libhkrt 0.2) */

/* Options of hk_session_bind_weights. NULL options: every field zero. struct_size:
 * sizeof(hk_bind_weights_options_t), or the size of the layout that ended with name_count (24
 * on 64-bit hosts; libhkrt 0.1: the fields after it read as zero); other values are
 * INVALID_ARGUMENT. */
typedef struct hk_bind_weights_options {
  uint32_t struct_size;              /* sizeof(hk_bind_weights_options_t) */
  uint32_t flags;                    /* HK_BIND_WEIGHTS_* */
  const hk_weights_name_t *names;    /* name_count entries; NULL only with name_count 0 */
  uint32_t name_count;               /* a tensor of the session named by an entry takes the
                                        entry's file tensor; the others take the file's tensor
                                        of their own name, if any. Each entry must name a
                                        distinct tensor of the session that these flags bind
                                        (else INVALID_ARGUMENT; NOT_FOUND when there is none)
                                        and a tensor of the file (NOT_FOUND); several entries
                                        may name the same file tensor */
  uint32_t reserved0;                /* zero: the tail padding of the layout that ended with
                                        name_count (24 bytes on 64-bit hosts), never read */
  /* ---- read when struct_size covers them ---- */
  void (*log)(void *log_user, const char *message); /* notes of the call, one line each without
                                        a newline: "weights: converting 147 tensors from F32 to
                                        BF16" once, when tensors are converted. NULL: written to
                                        stderr (a function that does nothing silences them) */
  void *log_user;                    /* passed to log */
} hk_bind_weights_options_t;

/* Binds every param (with HK_BIND_WEIGHTS_INPUTS: and input) of the session that the weights
 * provide, after checking all of them: nothing is bound unless every one matches (shape
 * exactly equal to hk_session_tensor_info's at the current batch; dtype equal, or converted).
 * Conversion: a float tensor (F32, F16, BF16) of another float dtype than the session's is
 * converted to it, rounding to nearest even (f16 <-> bf16 rounded once, through f32, which
 * holds both exactly), into memory the session owns (on every target); NaN and inf stay NaN
 * and inf, values below the target's smallest subnormal become signed zeros. A finite value
 * that would round to infinity (f16: magnitude 65520 or more; bf16: 3.3961e38 or more) is
 * INVALID_ARGUMENT, naming the tensor, the element and its value. The call notes how many
 * tensors it converts through options->log (NULL: stderr), once. HK_BIND_WEIGHTS_EXACT_DTYPE
 * refuses instead of converting; integer tensors are never converted.
 * Parts (hk_session_tensor_part): a param with parts whose own name the weights lack and the
 * name map does not map is bound from its parts when the weights hold every one of them (part
 * names are checkpoint names, looked up as written: the name map does not apply to them): each
 * part of the param's dtype (or converted to it, as above), with the param's trailing dims, the
 * parts' rows summing to the param's dim 0; they are copied, at their row offsets, into one
 * buffer the session owns (on every target). A param with some of its parts missing is not
 * provided (left as it was; with HK_BIND_WEIGHTS_ALL_PARAMS NOT_FOUND names the missing part).
 * Memory and lifetime:
 *  - host target: a tensor whose bytes are 16-byte aligned (and not converted) is bound in
 *    place (no copy): the weights must then outlive the session, or that tensor's rebinding
 *    (hk_session_bind).
 *    Unaligned tensors, and all with HK_BIND_WEIGHTS_COPY, are copied into memory the
 *    session owns;
 *  - GPU targets: each tensor is copied into device memory the session owns
 *    (hk_session_alloc + hk_session_copy); the weights may be destroyed right after.
 *  Memory the session owns is freed when that tensor is rebound or the session destroyed.
 * A batch change that unbinds a batch-dependent input (hkrt.h, "batch sizes") leaves it
 * unbound as for any other buffer; bind the weights again.
 * *out_bound (out_bound may be NULL): the tensors bound.
 * Errors: INVALID_ARGUMENT (dtype or shape mismatch, naming the tensor (and the part), what the
 * session expects and what the file holds; a value that overflows the session's dtype; bad
 * options), NOT_FOUND (a name map entry naming no tensor; HK_BIND_WEIGHTS_ALL_PARAMS with a
 * param missing), OUT_OF_MEMORY, DRIVER, BUSY. NULL session or weights: INVALID_ARGUMENT; NULL
 * options: defaults. */
HK_API hk_status_t hk_session_bind_weights(hk_session_t *session, const hk_weights_t *weights,
                                           const hk_bind_weights_options_t *options, uint32_t *out_bound);
/* 1 when the session's tensor `index` (as in hk_session_tensor_info) has a buffer bound at
 * the current batch, else 0 (also for a NULL session or an index out of range). */
HK_API int hk_session_tensor_bound(const hk_session_t *session, uint32_t index);

#ifdef __cplusplus
}
#endif
#endif /* HK_HKRT_H */
