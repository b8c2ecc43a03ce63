/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hk/pack_format.h -- the on-disk layout of a .hkpack artifact.
 *
 * This header is the single definition of the format. The loader (reader and
 * verifier) owns it; the compiler's writer includes it. docs/FORMAT.md explains
 * it in prose. Every multi-byte field is little-endian; every record is a
 * fixed-size struct with explicit padding so that it can be read in place from
 * a mapped file once hk verification has passed.
 *
 * File layout:
 *   hk_pack_header_t                     (offset 0, 64 bytes)
 *   hk_section_t[header.section_count]   (offset header.section_table_offset)
 *   section payloads, each aligned to HK_SECTION_ALIGN
 *
 * Compatibility rules: a reader accepts any file whose major version equals
 * its own and whose minor version is <= its own, or a newer minor whose extra
 * sections are all flagged HK_SECTION_FLAG_OPTIONAL. A newer minor may also add
 * argument kinds (1.2: HK_ARG_TMAP; 1.3: HK_ARG_SCRATCH, HK_ARG_SEMAPHORE), node flags (1.2:
 * HK_NODE_FLAG_PDL) and give a reserved field a meaning that is zero when unused (1.3:
 * hk_graph_rec_t.semaphore_count); a reader refuses a node that uses one it does not know.
 * A different major version is refused with HK_STATUS_UNSUPPORTED_VERSION.
 */
#ifndef HK_PACK_FORMAT_H
#define HK_PACK_FORMAT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Magic: a high-bit byte (catches 7-bit transfers), "HKP", then CR LF SUB LF
 * (catch line-ending conversion and DOS type). */
#define HK_PACK_MAGIC "\x89HKP\r\n\x1a\n"
#define HK_PACK_MAGIC_SIZE 8
#define HK_PACK_VERSION_MAJOR 1
/* Minor versions: 1: manifest batch_policy, ops rope/ewchain, PLAN section; 2: TMAP arguments,
 * node flags (HK_NODE_FLAG_PDL); 3: SCRATCH and SEMAPHORE arguments, graph semaphore_count,
 * PTX_INDEX and PTX sections (optional: PTX of CUDA targets); 4: PARTS section (optional: the
 * checkpoint tensors a param concatenates), WEIGHTS_INDEX and WEIGHTS sections (optional:
 * params stored in the pack); 5: role STATE (tensors that persist across runs: KV caches), ops
 * kv_append, kv_attention, take_rows, argmax and sample, i32 node outputs (argmax, sample); 6: EXTENTS
 * section (the bytes each launch touches of its tensor arguments; optional for readers before 1.6,
 * required in files of 1.6 and later); 7: 8-bit params (dtypes i8 and fp8_e4m3) and f32 params
 * in a 16-bit pack (their scales), op dequant; 8: gemm launches that read 8-bit B (and B2) themselves
 * (a dequant folded into them: seven arguments more, their scales and blocks); 9: tensor-parallel
 * packs (PARALLEL section: each graph is one rank's, its params shards of the checkpoint's), ops
 * all_reduce and all_gather (collectives: kernel records without code, run by the session's
 * communicator); 10: kv_append launches that rotate their q and k heads (a rope folded into them:
 * theta, and with a scaled rope its four numbers, appended); 11: kv_attention launches that do the
 * kv_append before them (folded in at a bucket of one row: q is the packed q|k|v rows, then
 * I append = 1, and that append's rope numbers when it turns the heads) */
#define HK_PACK_VERSION_MINOR 11
#define HK_PACK_MINOR_EXTENTS 6 /* the first minor version whose files carry an EXTENTS section */
#define HK_PACK_ENDIAN_TAG 0x01020304u
#define HK_SECTION_ALIGN 64u

/* Hard limits checked by the verifier before any allocation. Chosen far above
 * any realistic model so that they only stop hostile or corrupt files. */
#define HK_MAX_SECTIONS 4096u          /* ~ (targets x few) + fixed tables */
#define HK_MAX_RANK 6u                 /* attention needs 4 at most, headroom */
#define HK_MAX_TENSORS 65536u
#define HK_MAX_KERNELS 65536u
#define HK_MAX_TARGETS 64u
#define HK_MAX_GRAPHS 4096u            /* targets x batch buckets */
#define HK_MAX_NODES (1u << 22)        /* all graphs together */
#define HK_MAX_ARGS_PER_NODE 64u       /* the widest kernel ABI uses ~20 */
#define HK_MAX_DEPS_PER_NODE 4096u
#define HK_MAX_STRINGS_BYTES (16u << 20)
#define HK_MAX_CODE_BYTES (1ull << 30) /* decompressed code object per target */
#define HK_MAX_DEPS (1u << 26)         /* DEPS entries, all nodes: 16 per node of the largest pack */
#define HK_MAX_NAME_LEN 255u           /* tensor, node, kernel and target names */
#define HK_MAX_PARTS 64u              /* checkpoint tensors per param (PARTS): q|k|v and gate|up
                                          need 2-3; 64 leaves room for per-head or per-expert splits */
#define HK_MAX_PART_RECORDS 65536u     /* PARTS records of a pack (a 32-layer model's q|k|v weights
                                          and biases: 192); bounds verify's pairwise name checks */
#define HK_MAX_SEMAPHORES (1u << 24)   /* counters per graph (64 MiB): split GEMMs use one per
                                          output tile, and a model's GEMMs have far fewer */
#define HK_MAX_TENSOR_BYTES (1ull << 48) /* a tensor's bytes at any manifest batch size, and a
                                          graph's workspace_bytes, are below this (256 TiB: no
                                          device holds more; the spec's limit, docs/SPEC.md), so
                                          offset + size sums never overflow */

/* Default limits proportionate to the file (the open options may set others). A compressed
 * code object may declare at most HK_CODE_RATIO_MAX times its stored size plus
 * HK_CODE_SLACK_BYTES: hkc's code compresses 3-8x, so a small file cannot make the loader
 * decompress a gigabyte before the content checksum fails. */
#define HK_CODE_RATIO_MAX 128u
#define HK_CODE_SLACK_BYTES (1ull << 20)

typedef struct hk_pack_header {
  uint8_t magic[8];             /* HK_PACK_MAGIC */
  uint16_t version_major;       /* HK_PACK_VERSION_MAJOR */
  uint16_t version_minor;       /* HK_PACK_VERSION_MINOR */
  uint32_t endian_tag;          /* HK_PACK_ENDIAN_TAG as written by the host */
  uint32_t header_size;         /* sizeof(hk_pack_header_t) */
  uint32_t section_entry_size;  /* sizeof(hk_section_t) */
  uint32_t section_count;       /* entries in the section table */
  uint32_t reserved0;           /* zero */
  uint64_t file_size;           /* total bytes; a truncated file is caught here */
  uint64_t section_table_offset;
  uint64_t table_checksum;      /* XXH3-64 of the section table bytes */
  uint64_t header_checksum;     /* XXH3-64 of this header with this field zero */
} hk_pack_header_t;

typedef enum hk_section_kind {
  HK_SECTION_STRINGS = 1,    /* NUL-terminated UTF-8 strings; refs are byte offsets */
  HK_SECTION_MANIFEST = 2,   /* one hk_manifest_t */
  HK_SECTION_TARGETS = 3,    /* hk_target_rec_t[] */
  HK_SECTION_KERNELS = 4,    /* hk_kernel_rec_t[] (all targets) */
  HK_SECTION_TENSORS = 5,    /* hk_tensor_rec_t[] */
  HK_SECTION_GRAPHS = 6,     /* hk_graph_rec_t[] (one per target x batch) */
  HK_SECTION_NODES = 7,      /* hk_node_rec_t[] (all graphs) */
  HK_SECTION_ARGS = 8,       /* hk_arg_rec_t[] (all nodes) */
  HK_SECTION_DEPS = 9,       /* uint32_t[]: node-local indices of predecessors */
  HK_SECTION_PLACEMENTS = 10,/* uint64_t[]: per graph, per tensor workspace offset */
  HK_SECTION_PROVENANCE = 11,/* UTF-8 text, "key=value\n" lines */
  HK_SECTION_CODE = 12,      /* one code object per target (maybe compressed) */
  HK_SECTION_PLAN = 13,      /* optional: hk_plan_graph_rec_t[graph_count], then
                                hk_plan_node_rec_t[node_count] (cost model, inspect --plan) */
  HK_SECTION_SIGNATURE = 14, /* optional: one hk_signature_rec_t (hkc sign); any 1.x reader
                                that predates it skips it as an unknown optional section */
  HK_SECTION_PTX_INDEX = 15, /* optional (1.3), at most one, uncompressed: hk_ptx_rec_t[], one per
                                kernel of every target that has a PTX section, by kernel index */
  HK_SECTION_PTX = 16,       /* optional (1.3), at most one per CUDA target (section.target): the
                                target's PTX texts, concatenated (maybe compressed) */
  HK_SECTION_WEIGHTS_INDEX = 18, /* optional (1.4), at most one, uncompressed: hk_weight_rec_t[], one
                                per param stored in WEIGHTS, ascending by tensor index */
  HK_SECTION_WEIGHTS = 19,   /* optional (1.4), at most one, uncompressed (used in place): the
                                params' bytes, each at a multiple of HK_WEIGHTS_ALIGN */
  HK_SECTION_PARTS = 17,     /* optional (1.4), at most one, uncompressed: hk_part_rec_t[], the
                                checkpoint tensors params concatenate (hk_part_rec_t) */
  HK_SECTION_PARALLEL = 21,  /* (1.9) at most one, required by readers (never flagged optional: a
                                reader that skipped it would run one rank's graph as the whole
                                model), uncompressed: hk_parallel_rec_t, then its shard_count
                                hk_shard_rec_t (below, "Tensor parallelism") */
  HK_SECTION_EXTENTS = 20,   /* (1.6) flagged optional (a 1.5 reader skips it), exactly one in a file of
                                1.6 or later, uncompressed: uint64_t[arg_count], parallel to ARGS (below,
                                "Launch extents") */
} hk_section_kind_t;

#define HK_SECTION_FLAG_ZSTD 0x1u     /* payload is one zstd frame of raw_size bytes */
#define HK_SECTION_FLAG_OPTIONAL 0x2u /* a reader that does not know the kind may skip it */

typedef struct hk_section {
  uint32_t kind;       /* hk_section_kind_t */
  uint32_t flags;      /* HK_SECTION_FLAG_* */
  uint64_t offset;     /* from file start; multiple of HK_SECTION_ALIGN */
  uint64_t size;       /* stored bytes */
  uint64_t raw_size;   /* bytes after decompression (== size when not compressed) */
  uint64_t checksum;   /* XXH3-64 of the stored bytes */
  uint32_t target;     /* for CODE: index into TARGETS; else UINT32_MAX */
  uint32_t reserved;   /* zero */
} hk_section_t;

/* The SIGNATURE section (docs/FORMAT.md, "Signatures"): at most one, flags exactly OPTIONAL,
 * stored uncompressed, target UINT32_MAX, exactly sizeof(hk_signature_rec_t) bytes. The
 * signature is Ed25519 (RFC 8032) over HK_SIGNATURE_CONTEXT followed by the BLAKE2b-512 digest
 * of the whole file in which these bytes read as zero: the header's table_checksum and
 * header_checksum, the SIGNATURE entry's checksum in the section table, and the SIGNATURE
 * payload. (They depend on the signature itself; every other byte is covered.) */
#define HK_SIGNATURE_ED25519_BLAKE2B 1u   /* hk_signature_rec_t.algorithm */
#define HK_SIGNATURE_CONTEXT "hkpack sig v1\0\0\0" /* 16 bytes, domain separation */
#define HK_SIGNATURE_CONTEXT_SIZE 16u
#define HK_SIGNATURE_DIGEST_SIZE 64u      /* BLAKE2b-512 */
#define HK_KEY_ID_SIZE 8u                 /* first 8 bytes of BLAKE2b-256(public key) */

typedef struct hk_signature_rec {
  uint32_t algorithm;       /* HK_SIGNATURE_ED25519_BLAKE2B */
  uint32_t reserved0;       /* zero */
  uint8_t key_id[8];        /* HK_KEY_ID_SIZE bytes: identifies public_key (checked against it) */
  uint8_t public_key[32];   /* the signer's Ed25519 public key */
  uint8_t signature[64];    /* Ed25519 signature of context || digest */
  uint8_t reserved[16];     /* zero */
} hk_signature_rec_t;

/* Element types, operations and roles. Pinned numbers: never renumber. */
typedef enum hk_dtype {
  HK_DTYPE_F32 = 0, HK_DTYPE_F16 = 1, HK_DTYPE_BF16 = 2,
  HK_DTYPE_I32 = 3, /* tensor records only (ids, lengths): never a manifest's or a kernel's element type */
  HK_DTYPE_I8 = 4,       /* (1.7) params only: 8-bit integer weights, read by dequant */
  HK_DTYPE_FP8_E4M3 = 5, /* (1.7) params only: float8 e4m3fn weights (1 sign, 4 exponent bits of bias 7,
                            3 mantissa bits; no infinities, S.1111.111 is NaN), read by dequant */
  HK_DTYPE_COUNT_
} hk_dtype_t;
/* The element types a manifest (the spec's dtype) and a kernel key may have: f32, f16, bf16. */
#define HK_DTYPE_FLOAT_COUNT 3

typedef enum hk_op {
  HK_OP_GEMM = 0, HK_OP_ADD = 1, HK_OP_MUL = 2, HK_OP_RELU = 3, HK_OP_GELU = 4,
  HK_OP_SILU = 5, HK_OP_LAYERNORM = 6, HK_OP_RMSNORM = 7, HK_OP_SOFTMAX = 8,
  HK_OP_ATTENTION = 9,
  HK_OP_ROPE = 10,     /* rotary position embedding (rotate-half form) */
  HK_OP_EWCHAIN = 11,  /* a fused chain of element-wise ops (never written in a spec) */
  HK_OP_GELU_TANH = 12, /* gelu, tanh approximation (torch's approximate="tanh") */
  HK_OP_TANH = 13,
  HK_OP_EMBEDDING = 14, /* rows of a table by i32 ids, plus optional position rows */
  HK_OP_KV_APPEND = 15,  /* (1.5) a packed q|k|v's k and v rows into a KV cache (state), q out */
  HK_OP_KV_ATTENTION = 16, /* (1.5) one query row per token over its slot's cached keys */
  HK_OP_TAKE_ROWS = 17,  /* (1.5) rows of a matrix by i32 row indices (zeros where out of range) */
  HK_OP_ARGMAX = 18,     /* (1.5) i32 index of each row's largest value */
  HK_OP_SAMPLE = 19,     /* (1.5) i32 index drawn per row: seeded top-k / top-p / temperature */
  HK_OP_DEQUANT = 20,    /* (1.7) an 8-bit param times its f32 scales, in the manifest's dtype */
  HK_OP_ALL_REDUCE = 21, /* (1.9) collective: the element-wise sum of every rank's input */
  HK_OP_ALL_GATHER = 22, /* (1.9) collective: every rank's [rows, cols] side by side, [rows, ranks * cols] */
  HK_OP_COUNT_
} hk_op_t;

/* Launch extents (format 1.6; docs/FORMAT.md, "EXTENTS"): for each ARGS record, the bytes the
 * launch may read or write from the start of the tensor a TENSOR argument points at, as hkc
 * computed them from the kernel's key and the launch's arguments (compiler/lower/extent.c); 0 for
 * every other kind of argument (a NULL pointer, a scalar; TMAP, SCRATCH and SEMAPHORE arguments
 * are bounded by their own rules). libhkrt derives the same numbers from the launch's arguments
 * alone, by the op's argument layout (loader/src/extent.c), requires the two to agree and each to
 * fit its tensor at the graph's batch, before it loads a target's code. A robustness check
 * against damaged or miscompiled packs: what a pack may run is decided by its signature. */

/* A row of HK_OP_SAMPLE's i32 params [rows, HK_SAMPLE_PARAMS], the numbers an application
 * (the generator) fills per step: the seed, top_k, and the temperature and top_p as IEEE f32
 * bits (docs/GENERATE.md, "sample"). */
enum { HK_SAMPLE_SEED = 0, HK_SAMPLE_TOP_K = 1, HK_SAMPLE_TEMPERATURE = 2, HK_SAMPLE_TOP_P = 3, HK_SAMPLE_PARAMS = 4 };

/* What a session does with a batch that is not a bucket (manifest.batch_policy). */
typedef enum hk_batch_policy_rec {
  HK_BATCH_POLICY_REC_PAD = 0,   /* run the smallest bucket that fits, padded */
  HK_BATCH_POLICY_REC_EXACT = 1, /* refuse */
  HK_BATCH_POLICY_REC_COUNT_
} hk_batch_policy_rec_t;

typedef enum hk_act {
  HK_ACT_NONE = 0, HK_ACT_RELU = 1, HK_ACT_GELU = 2, HK_ACT_SILU = 3, HK_ACT_GELU_TANH = 4, HK_ACT_COUNT_
} hk_act_t;

typedef enum hk_role {
  HK_ROLE_INPUT = 0, HK_ROLE_OUTPUT = 1, HK_ROLE_PARAM = 2, HK_ROLE_INTERMEDIATE = 3,
  HK_ROLE_STATE = 4, /* (1.5) persists across runs (a KV cache): owned by the session, zeroed when
                        created, shared by every bucket; not depending on batch */
  HK_ROLE_COUNT_
} hk_role_t;

typedef enum hk_target_kind {
  HK_TARGET_HOST = 0,  /* code: ELF shared object for the arch in target name */
  HK_TARGET_HIP = 1,   /* code: AMDGPU code object (ELF) */
  HK_TARGET_CUDA = 2,  /* code: cubin */
  HK_TARGET_KIND_COUNT_
} hk_target_kind_t;

typedef enum hk_arg_kind {
  HK_ARG_TENSOR = 0,   /* value = tensor index; passed as a device pointer */
  HK_ARG_NULL = 1,     /* a null pointer (absent optional tensor) */
  HK_ARG_I64 = 2,      /* value = int64 bits */
  HK_ARG_F32 = 3,      /* value low 32 bits = float bits */
  HK_ARG_TMAP = 4,     /* format 1.2, CUDA targets only: value = the fields below; passed as a
                          128-byte TMA tensor map (CUtensorMap) the loader builds at run time */
  HK_ARG_SCRATCH = 5,  /* format 1.3: value = hk_scratch_pack(offset, bytes); passed as a device
                          pointer to that byte range of the graph's workspace, the launch's alone */
  HK_ARG_SEMAPHORE = 6,/* format 1.3: value = hk_semaphore_pack(first, count); passed as a device
                          pointer to u32 counters [first, first + count) of the graph's semaphores */
  HK_ARG_KIND_COUNT_
} hk_arg_kind_t;

/* HK_ARG_TMAP: a TMA tensor map of one tensor, viewed as the row-major matrix
 * [rows = elements / last dim, cols = last dim] of its dtype at the graph's batch size. The
 * kernel parameter is the 128-byte, 64-byte-aligned CUtensorMap that cuTensorMapEncodeTiled
 * builds for it: rank 2, globalDim {cols, rows}, globalStrides {cols * element size},
 * boxDim {box inner, box outer}, elementStrides {1, 1}, no interleave, the swizzle below,
 * L2 promotion 256 B, no float OOB fill (elements outside the matrix read as zero).
 * The fields of hk_arg_rec_t.value:
 *   bits [0, 32)   tensor index (< tensor_count)
 *   bits [32, 41)  box inner: elements along the last dim, 1..256
 *   bits [41, 50)  box outer: rows, 1..256
 *   bits [50, 52)  swizzle (hk_tmap_swizzle_t; the values of CUtensorMapSwizzle)
 *   bits [52, 64)  zero (reserved)
 * docs/FORMAT.md lists the rules verify checks (dtype, box and stride limits of TMA). */
typedef enum hk_tmap_swizzle {
  HK_TMAP_SWIZZLE_NONE = 0, HK_TMAP_SWIZZLE_32B = 1, HK_TMAP_SWIZZLE_64B = 2, HK_TMAP_SWIZZLE_128B = 3
} hk_tmap_swizzle_t;
#define HK_TMAP_BYTES 128u   /* sizeof(CUtensorMap): the kernel parameter */
#define HK_TMAP_ALIGN 64u    /* what cuTensorMapEncodeTiled requires of the map's address */
#define HK_TMAP_BOX_MAX 256u /* TMA's largest box dimension, in elements */
#define HK_TMAP_BOX_SHIFT_INNER 32
#define HK_TMAP_BOX_SHIFT_OUTER 41
#define HK_TMAP_SWIZZLE_SHIFT 50
#define HK_TMAP_BOX_MASK 0x1ffu  /* 9 bits: 0..511, of which 1..256 are valid */
#define HK_TMAP_SWIZZLE_MASK 0x3u
#define HK_TMAP_RESERVED_MASK (~0ull << 52)

/* The value of a TMAP argument. Each field is masked to its width; a caller passes values
 * in range (box 1..256), which the loader's verify checks again. */
static inline uint64_t hk_tmap_pack(uint32_t tensor, uint32_t box_inner, uint32_t box_outer, uint32_t swizzle) {
  return (uint64_t)tensor | (uint64_t)(box_inner & HK_TMAP_BOX_MASK) << HK_TMAP_BOX_SHIFT_INNER |
         (uint64_t)(box_outer & HK_TMAP_BOX_MASK) << HK_TMAP_BOX_SHIFT_OUTER |
         (uint64_t)(swizzle & HK_TMAP_SWIZZLE_MASK) << HK_TMAP_SWIZZLE_SHIFT;
}
static inline uint32_t hk_tmap_tensor(uint64_t value) { return (uint32_t)value; }
static inline uint32_t hk_tmap_box_inner(uint64_t value) {
  return (uint32_t)(value >> HK_TMAP_BOX_SHIFT_INNER) & HK_TMAP_BOX_MASK;
}
static inline uint32_t hk_tmap_box_outer(uint64_t value) {
  return (uint32_t)(value >> HK_TMAP_BOX_SHIFT_OUTER) & HK_TMAP_BOX_MASK;
}
static inline uint32_t hk_tmap_swizzle(uint64_t value) {
  return (uint32_t)(value >> HK_TMAP_SWIZZLE_SHIFT) & HK_TMAP_SWIZZLE_MASK;
}
/* Bytes of the swizzle pattern's span (32, 64, 128); 0 for HK_TMAP_SWIZZLE_NONE. */
static inline uint32_t hk_tmap_swizzle_bytes(uint32_t swizzle) { return swizzle ? 16u << swizzle : 0u; }

/* HK_ARG_SCRATCH: bytes [offset, offset + bytes) of the graph's workspace that belong to this
 * launch while it runs (f32 partial sums of a split GEMM, say); the memory plan gives the same
 * bytes to tensors and scratch that are not alive at the same time, and the kernel may find
 * anything there when it starts. Both in units of HK_SCRATCH_UNIT bytes:
 *   bits [0, 32)   offset / HK_SCRATCH_UNIT
 *   bits [32, 64)  bytes / HK_SCRATCH_UNIT (>= 1)
 * verify checks offset + bytes <= workspace_bytes. */
#define HK_SCRATCH_UNIT 256u
static inline uint64_t hk_scratch_pack(uint64_t offset_units, uint64_t size_units) {
  return (offset_units & 0xffffffffull) | (size_units & 0xffffffffull) << 32;
}
static inline uint64_t hk_scratch_offset(uint64_t value) { return (value & 0xffffffffull) * HK_SCRATCH_UNIT; }
static inline uint64_t hk_scratch_bytes(uint64_t value) { return (value >> 32) * HK_SCRATCH_UNIT; }

/* HK_ARG_SEMAPHORE: u32 counters [first, first + count) of the graph's semaphore_count
 * counters, which the loader sets to zero once, when it allocates the graph's memory, and never
 * writes again: a kernel that takes them finds every one at zero and leaves it at zero when it
 * finishes, so reruns and graph replays need no reset. Launches of one graph get disjoint
 * ranges (they may run at the same time).
 *   bits [0, 32)   first
 *   bits [32, 64)  count (>= 1) */
static inline uint64_t hk_semaphore_pack(uint32_t first, uint32_t count) {
  return (uint64_t)first | (uint64_t)count << 32;
}
static inline uint32_t hk_semaphore_first(uint64_t value) { return (uint32_t)value; }
static inline uint32_t hk_semaphore_count(uint64_t value) { return (uint32_t)(value >> 32); }

typedef struct hk_manifest {
  uint32_t name;             /* string ref: spec name */
  uint32_t dtype;            /* default element type of the spec */
  uint32_t target_count;     /* must equal the TARGETS record count */
  uint32_t tensor_count;     /* must equal the TENSORS record count */
  uint32_t batch_count;      /* batch buckets; each target has one graph per bucket */
  uint32_t batch_policy;     /* hk_batch_policy_rec_t (format 1.1; zero = pad in 1.0 files) */
  uint64_t spec_hash;        /* XXH3-64 of the spec file bytes */
  uint64_t batch_sizes[16];  /* ascending; first batch_count used */
} hk_manifest_t;
#define HK_MAX_BATCH_BUCKETS 16u

typedef struct hk_target_rec {
  uint32_t name;           /* string ref: "host-x86_64", "gfx90a", "sm_90", ... */
  uint32_t kind;           /* hk_target_kind_t */
  uint32_t code_section;   /* index into the section table (a CODE section) */
  uint32_t kernel_first;   /* this target's kernels: [first, first+count) */
  uint32_t kernel_count;
  uint32_t graph_first;    /* this target's graphs: [first, first+count), one per batch bucket */
  uint32_t graph_count;
  uint32_t features;       /* string ref: ISA feature string ("xnack-"), or "" */
} hk_target_rec_t;

/* PTX (format 1.3; docs/FORMAT.md, "PTX"): besides its cubins (CODE), a CUDA target "sm_XY" or
 * "sm_XYa" may carry the PTX of its kernels for virtual architecture compute_XY / compute_XYa,
 * which the driver JIT-compiles for a GPU no cubin of the pack runs on (compute_XY: any GPU of
 * compute capability >= X.Y; an arch-specific compute_XYa: X.Y only). Each kernel's text is a
 * byte range of its target's decompressed PTX payload, NUL-terminated (the NUL is the range's
 * last byte; the loader checks it before the driver reads the text). Readers before 1.3 skip
 * both sections and load the cubins. */
typedef struct hk_ptx_rec {
  uint32_t kernel;    /* global kernel index; strictly ascending over the records */
  uint32_t reserved0; /* zero */
  uint64_t offset;    /* range in the PTX payload of the kernel's target */
  uint64_t size;      /* >= 1, NUL included */
} hk_ptx_rec_t;

/* Stored weights (format 1.4; docs/FORMAT.md, "Weights"): a self-contained pack carries the
 * bytes of its params (hkc build --weights), which libhkrt binds when a session is created.
 * WEIGHTS_INDEX and WEIGHTS are both present or both absent. Each record names a PARAM tensor
 * whose dims do not depend on batch; its bytes (little-endian, row-major, the tensor's dtype)
 * are [offset, offset + size) of the WEIGHTS payload, size the tensor's byte size. The layout
 * is canonical: the first record at offset 0, each next one at its predecessor's end rounded up
 * to HK_WEIGHTS_ALIGN, zero bytes between, the payload ending at the last record's end. Readers
 * before 1.4 skip both sections (the application binds the params). */
#define HK_WEIGHTS_ALIGN 64u
typedef struct hk_weight_rec {
  uint32_t tensor;    /* tensor index, a PARAM; strictly ascending over the records */
  uint32_t reserved0; /* zero */
  uint64_t offset;    /* in the WEIGHTS payload; a multiple of HK_WEIGHTS_ALIGN */
  uint64_t size;      /* bytes: the tensor's size */
} hk_weight_rec_t;
/* PARTS (format 1.4; docs/FORMAT.md, "PARTS"): a param declared with `parts:` in the spec is
 * the concatenation along axis 0 of the checkpoint tensors it names, in order (q | k | v rows of
 * nn.Linear weights). One record per part, grouped by tensor (ascending), each group in
 * concatenation order, 1..HK_MAX_PARTS records per tensor, names distinct within a group.
 * Only weight binding reads it (hk_session_bind_weights); readers before 1.4 skip it. */
typedef struct hk_part_rec {
  uint32_t tensor; /* index in TENSORS of a PARAM */
  uint32_t name;   /* string ref: the checkpoint tensor's name (tensor-name characters) */
} hk_part_rec_t;

typedef struct hk_kernel_rec {
  uint32_t name;          /* string ref: symbol in the code object */
  uint32_t op;            /* hk_op_t */
  uint32_t target;        /* owning target index */
  uint32_t params;        /* string ref: human-readable parameters ("act=gelu bm=64") */
  /* Resources as the target's toolchain reported them; 0 when unknown. */
  uint32_t vgprs;         /* vector registers (AMD) / registers per thread (NVIDIA) */
  uint32_t agprs;         /* accumulation registers (AMD) */
  uint32_t sgprs;         /* scalar registers (AMD) */
  uint32_t shared_bytes;  /* LDS / static shared memory */
  uint32_t scratch_bytes; /* private/local memory per lane: spills */
  uint32_t wave_size;     /* 64/32 on GPUs; 1 on host */
  uint32_t max_block;     /* largest block size the kernel is launched with */
  uint32_t occupancy;     /* waves per SIMD / blocks per SM; 0 when unknown */
  uint64_t source_hash;   /* XXH3-64 of the kernel source + options */
  /* The code object holding this kernel: a byte range of the target's decompressed
   * CODE payload (which may concatenate several objects, e.g. one per GPU kernel).
   * Kernels that share an object give the same range; the loader loads each range once.
   * code_offset is a multiple of 8. */
  uint64_t code_offset;
  uint64_t code_size;
} hk_kernel_rec_t;

typedef struct hk_dim_rec {
  int64_t mul;  /* value = mul * batch + add */
  int64_t add;
} hk_dim_rec_t;

typedef struct hk_tensor_rec {
  uint32_t name;   /* string ref */
  uint32_t role;   /* hk_role_t */
  uint32_t dtype;  /* hk_dtype_t */
  uint32_t rank;   /* 1..HK_MAX_RANK */
  hk_dim_rec_t dims[HK_MAX_RANK];
} hk_tensor_rec_t;

typedef struct hk_graph_rec {
  uint32_t target;          /* owning target index */
  uint32_t node_first;      /* [first, first+count) in NODES */
  uint32_t node_count;
  uint32_t semaphore_count; /* format 1.3 (a zero reserved field before): u32 counters its
                               SEMAPHORE arguments use, at most HK_MAX_SEMAPHORES */
  uint64_t batch;           /* the bucket this graph was planned for */
  uint64_t workspace_bytes; /* arena size for intermediates */
  uint64_t placement_first; /* tensor_count entries in PLACEMENTS */
} hk_graph_rec_t;

#define HK_PLACEMENT_NONE UINT64_MAX /* tensor is bound by the application */

typedef struct hk_node_rec {
  uint32_t kernel;      /* global kernel index; must belong to the graph's target */
  uint32_t name;        /* string ref: spec node name(s) this launch computes */
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shared_bytes;/* dynamic shared memory */
  uint32_t arg_first;   /* [first, first+count) in ARGS */
  uint32_t arg_count;
  uint32_t dep_first;   /* [first, first+count) in DEPS */
  uint32_t dep_count;
  uint32_t flags;       /* HK_NODE_FLAG_* (a zero reserved field before PDL: such files read as before) */
} hk_node_rec_t;

/* hk_node_rec_t.flags. Other bits must be zero (verify refuses them).
 * HK_NODE_FLAG_PDL (CUDA targets only): programmatic dependent launch. The launch's kernel
 * executes griddepcontrol.wait before it reads or writes anything an earlier launch touches,
 * and does not finish before the wait returned (every block waits; DEPS lists only the edges
 * not implied by others, so later launches rely on a launch finishing after its
 * predecessors); it may execute griddepcontrol.launch_dependents. So it may be launched as a
 * programmatic dependent of its predecessors: its blocks may start while they are still
 * running. A loader may always launch it the ordinary way instead (the wait then returns at
 * once). */
#define HK_NODE_FLAG_PDL 0x1u
#define HK_NODE_FLAGS_KNOWN HK_NODE_FLAG_PDL

typedef struct hk_arg_rec {
  uint32_t kind;   /* hk_arg_kind_t */
  uint32_t reserved0;
  uint64_t value;
} hk_arg_rec_t;

/* PLAN section (optional; format 1.1): the compiler's cost model, for tools. Per graph,
 * what the pipeline would cost unfused; per node (parallel to NODES), the estimated
 * minimum HBM traffic and arithmetic of that launch. */
typedef struct hk_plan_graph_rec {
  uint64_t unfused_bytes;  /* sum over the spec's nodes, one kernel each */
  uint64_t unfused_flops;
  uint32_t unfused_nodes;  /* kernels before fusion */
  uint32_t reserved0;
} hk_plan_graph_rec_t;

typedef struct hk_plan_node_rec {
  uint64_t bytes;          /* every distinct tensor read once + every tensor written once */
  uint64_t flops;          /* multiply-add = 2 */
  uint32_t fused_nodes;    /* spec nodes this launch computes (>= 1) */
  uint32_t flags;          /* HK_PLAN_MATRIX: flops run on matrix cores */
} hk_plan_node_rec_t;
#define HK_PLAN_MATRIX 0x1u

/* Tensor parallelism (format 1.9; docs/FORMAT.md, "PARALLEL"). A pack built for tensor_ranks > 1
 * ranks holds one rank's graphs: every rank runs the same launches on its own shard of the params
 * and state, and the collective launches (ops HK_OP_ALL_REDUCE, HK_OP_ALL_GATHER) exchange data
 * between the ranks through a communicator the application gives the session (NCCL on CUDA
 * targets, RCCL on HIP, libhkrt's in-process group on the host). A collective's kernel record
 * has no code (code_offset and code_size zero, every resource field zero); its name is
 * "hk_all_reduce_<dtype>" or "hk_all_gather_<dtype>". Arguments:
 *   all_reduce  T in, T out, I n            out[i] = sum over ranks r of in_r[i], i < n, in the
 *                                           manifest's dtype (summed in f32 on the host, rank order)
 *   all_gather  T in, T out, I rows, I cols out[i][r * cols + j] = in_r[i][j]
 * A shard record says how a PARAM's or STATE's dims in TENSORS (rank r's) come from the whole
 * tensor's: along `axis`, the whole tensor is segment_count segments of seg_size[k] elements,
 * one after the other (a packed q | k | v weight: three); segment k is cut into seg_parts[k] equal
 * pieces and rank r holds piece r * seg_parts[k] / tensor_ranks of each; seg_parts[k] is
 * tensor_ranks, or a divisor of it when pieces are replicated (kv heads fewer than the ranks:
 * tensor_ranks / seg_parts[k] ranks hold each). The rank's dim along axis is the sum of
 * seg_size[k] / seg_parts[k]; its other dims are the whole tensor's. Tensors without a record are
 * whole on every rank. Records are strictly ascending by tensor. */
#define HK_MAX_SHARD_SEGMENTS 3u
#define HK_MAX_TENSOR_RANKS 1024u
typedef struct hk_parallel_rec {
  uint32_t tensor_ranks;   /* 1..HK_MAX_TENSOR_RANKS (1: collectives of one rank, copies: a pack
                              that exercises the communicator on one device) */
  uint32_t shard_count;    /* hk_shard_rec_t records that follow */
} hk_parallel_rec_t;
typedef struct hk_shard_rec {
  uint32_t tensor;         /* a PARAM or STATE, not batched */
  uint32_t axis;           /* < the tensor's rank */
  uint32_t segment_count;  /* 1..HK_MAX_SHARD_SEGMENTS */
  uint32_t source;         /* the tensor whose whole (checkpoint) tensor this is a shard of: itself,
                              or a PARAM of the same whole dims that ranks read whole (tied
                              embeddings: the LM head's slice of the token table) */
  uint64_t seg_size[HK_MAX_SHARD_SEGMENTS];  /* whole-tensor elements along axis; zero past segment_count */
  uint32_t seg_parts[HK_MAX_SHARD_SEGMENTS]; /* pieces (each divides seg_size); zero past segment_count */
  uint32_t reserved1;      /* zero */
} hk_shard_rec_t;

/* Sizes are part of the format: a change here is a format change. */
_Static_assert(sizeof(hk_pack_header_t) == 64, "header size");
_Static_assert(sizeof(hk_section_t) == 48, "section entry size");
_Static_assert(sizeof(hk_signature_rec_t) == 128, "signature record size");
_Static_assert(sizeof(hk_manifest_t) == 160, "manifest size");
_Static_assert(sizeof(hk_target_rec_t) == 32, "target record size");
_Static_assert(sizeof(hk_kernel_rec_t) == 72, "kernel record size");
_Static_assert(sizeof(hk_tensor_rec_t) == 16 + 16 * HK_MAX_RANK, "tensor record size");
_Static_assert(sizeof(hk_graph_rec_t) == 40, "graph record size");
_Static_assert(sizeof(hk_node_rec_t) == 56, "node record size");
_Static_assert(sizeof(hk_arg_rec_t) == 16, "arg record size");
_Static_assert(sizeof(hk_part_rec_t) == 8, "part record size");
_Static_assert(sizeof(hk_plan_graph_rec_t) == 24, "plan graph record size");
_Static_assert(sizeof(hk_plan_node_rec_t) == 24, "plan node record size");
_Static_assert(sizeof(hk_weight_rec_t) == 24, "weight record size");
_Static_assert(sizeof(hk_parallel_rec_t) == 8, "parallel record size");
_Static_assert(sizeof(hk_shard_rec_t) == 56, "shard record size");

#ifdef __cplusplus
}
#endif
#endif /* HK_PACK_FORMAT_H */
