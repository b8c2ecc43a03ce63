/*
 * compiler/hkc.h -- internal contracts between the stages of the hkc compiler.
 *
 *   spec.c      YAML -> hkc_spec_t (validated IR, shapes inferred, nodes in topological order)
 *   dimexpr.c   shape arithmetic over dims and the symbolic `batch`
 *   lower.c     node -> kernel key + argument list (the target-independent kernel ABI)
 *   plan.c      memory plan (liveness -> one workspace arena) and graph dependencies
 *   codegen_host.c / rtc_host.c   host kernels: C source from templates/host, cc -> .so
 *   pack_write.c  the artifact writer (format in loader/include/hk/pack_format.h)
 *   build.c     drives the stages for every target and batch bucket
 *   main.c      the CLI
 *
 * Not a public API: only the hkc binary and the tests use it.
 */
#ifndef HKC_HKC_H
#define HKC_HKC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hk/pack_format.h"

#define HKC_VERSION_STRING "0.1.0"

/* ---- diagnostics ----------------------------------------------------------- */
/* Every stage reports errors through hkc_error(): "FILE:LINE:COL: message" when a
 * location is known, "hkc: message" otherwise. Printed to the diag stream (stderr by
 * default; tests capture it with hkc_diag_capture). */
typedef struct hkc_loc {
  const char *file; /* borrowed; NULL when not from a file */
  int line;         /* 1-based; 0 = unknown */
  int col;          /* 1-based; 0 = unknown */
} hkc_loc_t;

void hkc_error(hkc_loc_t loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hkc_warning(hkc_loc_t loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Redirects diagnostics into buf (NUL-terminated, truncated) until called with NULL. */
void hkc_diag_capture(char *buf, size_t size);
/* Number of errors reported since the last reset. */
int hkc_error_count(void);
void hkc_error_reset(void);

/* Growable-array helper: ensures *items has room for need elements. 0 / -1 on OOM. */
int hkc_reserve(void **items, size_t *cap, size_t need, size_t elem_size);
char *hkc_strdup(const char *s);
/* A growable NUL-terminated string for code generation. Appends after an allocation
 * failure (or a single hkc_sb_printf piece over 511 bytes) are dropped and set `failed`;
 * the owner frees `data`. */
typedef struct hkc_strbuf {
  char *data;
  size_t len, cap;
  int failed;
} hkc_strbuf_t;
void hkc_sb_append(hkc_strbuf_t *sb, const char *text, size_t n);
void hkc_sb_printf(hkc_strbuf_t *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* XXH3-64 of bytes. */
uint64_t hkc_hash64(const void *data, size_t size);
/* A file under templates/, embedded at build time (path relative to templates/,
 * e.g. "host/gemm.c"), or read from $HKC_TEMPLATE_DIR/<path> when that variable is set
 * and the file exists there. NULL when absent. Thread-safe. */
const char *hkc_template(const char *path, size_t *out_size);
/* Reads a whole file into a NUL-terminated malloc'd buffer. 0 / -1 (errno set). */
int hkc_read_file(const char *path, char **out_data, size_t *out_size);

/* ---- dims and shapes ------------------------------------------------------- */
/* A dimension is linear in the symbolic batch: value = mul * batch + add. */
typedef struct hkc_dim {
  int64_t mul;
  int64_t add;
} hkc_dim_t;

typedef struct hkc_named_dim {
  char *name;
  int64_t value; /* > 0 */
  hkc_loc_t loc;
} hkc_named_dim_t;

/* Evaluates a shape expression: integers, dim names, `batch`, + - * / and parentheses.
 * `batch` may only appear linearly (batch*seq is fine, batch*batch is not); division
 * must be exact. On error reports at loc (column offset by the error position) and
 * returns -1. */
int hkc_dimexpr_eval(const char *text, const hkc_named_dim_t *dims, size_t n_dims, hkc_loc_t loc,
                     hkc_dim_t *out_dim);
static inline int64_t hkc_dim_value(hkc_dim_t d, int64_t batch) { return d.mul * batch + d.add; }
static inline int hkc_dim_equal(hkc_dim_t a, hkc_dim_t b) { return a.mul == b.mul && a.add == b.add; }

/* ---- the IR ------------------------------------------------------------------ */
typedef struct hkc_tensor {
  char *name;
  hk_role_t role;       /* INPUT, OUTPUT (graph output), PARAM, INTERMEDIATE */
  hk_dtype_t dtype;
  uint32_t rank;        /* 1..HK_MAX_RANK */
  hkc_dim_t dims[HK_MAX_RANK];
  int producer;         /* node index, -1 for inputs/params */
  hkc_loc_t loc;        /* where it was declared or produced */
} hkc_tensor_t;

#define HKC_NONE (-1)
#define HKC_MAX_NODE_IN 5      /* ewchain: up to 5 operands */
#define HKC_EW_PROGRAM_MAX 32  /* ewchain program text incl. NUL */

typedef struct hkc_node {
  char *name;
  hk_op_t op;
  hkc_loc_t loc;
  int in[HKC_MAX_NODE_IN]; /* tensor indices; n_in used. gemm: A,B; add/mul: a,b; unary/norm/softmax/
                       rope: x; attention: q,k,v, or one packed qkv (n_in == 1); ewchain: the
                       operands its program reads (in[0] is loaded first) */
  int n_in;
  int bias;         /* gemm: [N]; HKC_NONE when absent */
  int residual;     /* gemm: shaped like out; HKC_NONE when absent */
  int mul;          /* gemm: shaped like out, multiplies the activated result (SwiGLU gate);
                       HKC_NONE when absent. Epilogue order: act(acc + bias) * mul + residual */
  int gamma, beta;  /* layernorm: both; rmsnorm: gamma only */
  int add_in;       /* layernorm/rmsnorm (fused residual add): normalises in[0] + add_in,
                       same shape; HKC_NONE when absent */
  int sum_out;      /* with add_in: also stores in[0] + add_in here; HKC_NONE when absent */
  int out;          /* tensor index */
  hk_act_t act;     /* gemm epilogue activation */
  int trans_b;      /* gemm: B stored [N, K] */
  float eps;        /* norms; default 1e-5 */
  int heads;        /* attention; rope: heads in the last dim (dh = last / heads) */
  int kv_heads;     /* attention; defaults to heads */
  int causal;       /* attention */
  int has_scale;    /* attention: scale given */
  float scale;      /* attention: default 1/sqrt(dh) */
  float theta;      /* rope: base, default 10000 */
  int64_t pos_offset; /* rope: position of the first sequence row, default 0 */
  /* ewchain: the program, see hkc_kernel_key_t.program; steps[i] = op letter, operand */
  char program[HKC_EW_PROGRAM_MAX];
  /* Fusion: the spec nodes this node computes, comma-separated ("fc2,res"); NULL for an
   * unfused node (then `name` is the only one). n_fused >= 1. */
  char *fused_names;
  int n_fused;
} hkc_node_t;

typedef enum hkc_fusion_mode { HKC_FUSION_AUTO = 0, HKC_FUSION_NONE = 1, HKC_FUSION_GROUPS = 2 } hkc_fusion_mode_t;

typedef struct hkc_spec {
  char *path;            /* as given; locations point into it */
  char *name;
  int version;           /* `hkc:` value; only 1 exists */
  hk_dtype_t dtype;
  int64_t batch_sizes[HK_MAX_BATCH_BUCKETS]; /* ascending, unique, > 0 */
  int n_batch;
  hkc_named_dim_t *dims; size_t n_dims;
  char **targets; size_t n_targets;          /* default targets, as written */
  hkc_tensor_t *tensors; size_t n_tensors;   /* inputs, params, then node outputs */
  hkc_node_t *nodes; size_t n_nodes;         /* topological order (producers first) */
  int *outputs; size_t n_outputs;            /* tensor indices, role OUTPUT */
  hkc_fusion_mode_t fusion;
  int batch_policy;      /* hk_batch_policy_rec_t: `batch_policy: pad` (default) | exact */
  int **groups; size_t *group_sizes; size_t n_groups; /* node indices, for GROUPS */
  hkc_loc_t *group_locs;  /* where each group is written (n_groups entries), for errors */
  uint64_t hash;         /* hkc_hash64 of the file bytes */
} hkc_spec_t;

/* Parses and validates a spec file. On any problem prints FILE:LINE:COL errors and
 * returns -1 with *out_spec NULL. The caller owns the result (hkc_spec_destroy). */
int hkc_spec_load(const char *path, hkc_spec_t **out_spec);
/* Same over a buffer; `path` is used only in messages. */
int hkc_spec_parse(const char *path, const char *data, size_t size, hkc_spec_t **out_spec);
void hkc_spec_destroy(hkc_spec_t *spec);

int hkc_tensor_find(const hkc_spec_t *spec, const char *name); /* index or HKC_NONE */

/* ---- fusion (fusion.c) ---------------------------------------------------------------------
 * Rewrites spec in place by its fusion plan (spec->fusion; mode >= 0 overrides it with
 * HKC_FUSION_AUTO / HKC_FUSION_NONE): each group of nodes becomes one node (gemm epilogue
 * chains, residual add + norm, element-wise chains -> HK_OP_EWCHAIN), intermediate tensors
 * that no longer exist are removed from the tensor table (indices compacted), nodes stay
 * in a topological order. An explicit group that cannot be fused is an error at the group
 * naming the node that breaks it and why. Returns 0 / -1 (reported). */
int hkc_fuse(hkc_spec_t *spec, int mode);

/* ---- cost model (cost.c) ------------------------------------------------------------------- */
typedef struct hkc_cost {
  uint64_t bytes;  /* every distinct tensor the node reads, once, + every tensor it writes */
  uint64_t flops;  /* multiply-add = 2 */
  int matrix;      /* flops are matrix-core work (gemm, attention) */
} hkc_cost_t;
/* Estimated minimum HBM traffic and arithmetic of node `node` at batch `batch`. */
void hkc_node_cost(const hkc_spec_t *spec, size_t node, int64_t batch, hkc_cost_t *out);
int64_t hkc_tensor_elems(const hkc_tensor_t *t, int64_t batch);
size_t hkc_dtype_size(hk_dtype_t dtype);
const char *hkc_dtype_name(hk_dtype_t dtype); /* "f32" | "f16" | "bf16" */
const char *hkc_op_name(hk_op_t op);
const char *hkc_act_name(hk_act_t act);

/* ---- lowering: the kernel ABI ---------------------------------------------------
 * A kernel key names one compiled kernel: the op and every compile-time choice.
 * Runtime sizes are arguments, so one kernel serves every batch bucket.
 *
 * Argument layouts (T = tensor pointer or NULL, I = int64, F = float32), the same on
 * every target:
 *   gemm      T A, T B, T bias, T residual, T C, I M, I N, I K, T mul
 *             compile time: act, trans_b, has_bias, has_residual, has_mul
 *             (C = act(A @ B + bias) * mul + residual)
 *   add, mul  T a, T b, T out, I n, I na, I nb     (a[i % na] op b[i % nb], i < n)
 *   relu, gelu, silu   T x, T out, I n
 *   layernorm T x, T gamma, T beta, T out, I rows, I cols, F eps, T add, T sum
 *   rmsnorm   T x, T gamma, T out, I rows, I cols, F eps, T add, T sum
 *             (add/sum NULL unless has_add/has_sum: normalises x + add, stores it in sum)
 *   softmax   T x, T out, I rows, I cols
 *   attention T q, T k, T v, T out, I batch, I seq_q, I seq_kv, I heads, I kv_heads, I dh,
 *             I ld_q, I ld_kv, I q_col, I k_col, I v_col, I causal, F scale
 *             (row strides ld_* in elements; *_col: first column of head 0, so packed qkv
 *              passes the same tensor three times with columns 0, H*dh, (H+Hkv)*dh)
 *   rope      T x, T out, I rows, I seq, I heads, I dh, I pos_offset, F theta
 *             (x [rows, heads*dh]; row r is at position r % seq + pos_offset)
 *   ewchain   T out, I n, then per operand j = 0 .. n_in-1: T in_j, I n_j
 *             (out[i] = program over in_j[i % n_j], i < n)
 */
#define HKC_MAX_ARGS 24 /* ewchain: 2 + 2*5 */
#define HKC_TUNE_VARIANT_MAX 24 /* longest variant name + NUL ("elementwise_vec16") */
#define HKC_TUNE_MAX 48         /* longest parameter string + NUL ("bm=128,bn=128,wm=2,wn=4,st=4") */

typedef struct hkc_kernel_key {
  hk_op_t op;
  hk_dtype_t dtype;
  hk_act_t act;
  int trans_b, has_bias, has_residual;
  int has_mul;          /* gemm: epilogue multiply (hkc_node_t.mul) */
  int has_add, has_sum; /* layernorm/rmsnorm: fused residual add / also store the sum */
  /* ewchain: the element-wise program, a C-identifier-safe string of steps applied to
   * v = in0[i % n0]: a<j> v += in_j, m<j> v *= in_j (operand j in 1..4, element i % n_j),
   * r relu, g gelu, s silu, t gelu_tanh. E.g. "a1gm2" = gelu(in0 + in1) * in2. "" else. */
  char program[HKC_EW_PROGRAM_MAX];
  /* Shape facts fixed at build time (the same at every batch size) that let a GPU target
   * pick a specialised kernel. align: the largest of 8, 4, 2, 1 elements dividing every
   * row length, row stride and column offset the kernel indexes with (gemm: K and N;
   * norms/softmax: cols; element-wise: the operands' last dims; attention: ld_q, ld_kv,
   * the column offsets and dh; rope: the row length, dh and dh/2); with 16-byte-aligned
   * tensors (hk_session_bind checks it) align 8 allows 16-byte vector access of f16/bf16
   * rows. head_dim: attention's and rope's dh.
   * The host target ignores both (zero). */
  int align;
  int head_dim;
  /* Tuning (compiler/tune.c): the variant this kernel uses ("" = the registry's first that
   * applies; gpu_variant.h, or "host_gemm" on the host target) and its parameters, a
   * canonical "bn=128,st=4,p=1" string ("" = the variant's defaults). Part of the kernel's
   * identity: a non-empty choice adds a short hash of both to the name. */
  char variant[HKC_TUNE_VARIANT_MAX];
  char tune[HKC_TUNE_MAX];
} hkc_kernel_key_t;

typedef struct hkc_arg {
  hk_arg_kind_t kind;
  int64_t i;   /* tensor index (TENSOR) or value (I64) */
  float f;     /* F32 */
} hkc_arg_t;

/* Fills the key and arguments of node `node` at batch size `batch`. Returns n_args, or
 * -1 after reporting an error when the node's sizes cannot be lowered. */
int hkc_lower_node(const hkc_spec_t *spec, size_t node, int64_t batch, hkc_kernel_key_t *out_key,
                   hkc_arg_t out_args[HKC_MAX_ARGS]);
/* Canonical symbol name for a key: "hk_<op>_<dtype>[_<flags>]". Writes at most size bytes. */
void hkc_kernel_key_name(const hkc_kernel_key_t *key, char *out, size_t size);
int hkc_kernel_key_equal(const hkc_kernel_key_t *a, const hkc_kernel_key_t *b);

/* ---- memory plan and dependencies ------------------------------------------------ */
#define HKC_ARENA_ALIGN 256 /* GPU-friendly alignment for every intermediate */

/* Assigns each INTERMEDIATE tensor an offset in one arena by liveness (tensors whose
 * lifetimes do not overlap may share bytes). out_offsets[t] = HK_PLACEMENT_NONE for
 * application-bound tensors. Returns 0 / -1 (OOM). */
int hkc_plan_memory(const hkc_spec_t *spec, int64_t batch, uint64_t *out_offsets,
                    uint64_t *out_arena_bytes);
/* Dependencies of every node on earlier nodes: read-after-write, and write-after-
 * read/write on arena bytes reused under the plan; edges implied by others dropped.
 * Node j waits for list[start[j] .. start[j+1]). Returns 0 / -1 (OOM). */
typedef struct hkc_deps {
  uint32_t *start; /* n_nodes + 1 entries */
  uint32_t *list;
} hkc_deps_t;
int hkc_plan_deps(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets, hkc_deps_t *out);
void hkc_deps_free(hkc_deps_t *deps);

/* ---- targets and codegen ----------------------------------------------------------- */
typedef struct hkc_kernel_out {
  char name[96];           /* symbol */
  hkc_kernel_key_t key;
  char params[160];        /* human-readable parameters, stored in the pack */
  uint32_t vgprs, agprs, sgprs, shared_bytes, scratch_bytes, wave_size, max_block, occupancy;
  uint64_t source_hash;
  uint64_t code_offset;    /* range of this kernel's code object in hkc_target_out_t.code */
  uint64_t code_size;
} hkc_kernel_out_t;

typedef struct hkc_launch {
  uint32_t kernel;         /* index into the target's kernels */
  const char *node_name;   /* borrowed from the spec */
  uint32_t grid[3], block[3], shared_bytes;
  hkc_arg_t args[HKC_MAX_ARGS];
  uint32_t n_args;
  uint32_t *deps;          /* graph-local indices of earlier launches */
  uint32_t n_deps;
} hkc_launch_t;

typedef struct hkc_graph_out {
  int64_t batch;
  uint64_t workspace_bytes;
  uint64_t *placements;    /* spec->n_tensors entries */
  hkc_launch_t *launches;
  size_t n_launches;
  hkc_cost_t *costs;       /* per launch (n_launches), from hkc_node_cost */
  int *fused_counts;       /* per launch: spec nodes it computes */
  hkc_cost_t unfused;      /* the spec without fusion: sums over its nodes */
  uint32_t unfused_nodes;
} hkc_graph_out_t;

typedef struct hkc_target_out {
  char name[64];           /* "host-x86_64", "gfx90a", "sm_90" */
  hk_target_kind_t kind;
  char features[64];
  void *code;              /* code object(s), concatenated (uncompressed), owned; each
                              kernel names its object's range (8-byte aligned offsets) */
  size_t code_size;
  char toolchain[160];     /* e.g. "cc: gcc (Debian 12.2.0-14) 12.2.0" -> provenance */
  hkc_kernel_out_t *kernels;
  size_t n_kernels;
  hkc_graph_out_t *graphs; /* one per spec batch size, same order */
  size_t n_graphs;
} hkc_target_out_t;

/* Host code generation: the full C translation unit for the given kernels (prelude
 * + one function per kernel, named kernels[i].name). Caller frees. NULL on OOM. */
char *hkc_codegen_host(const hkc_kernel_out_t *kernels, size_t n_kernels);
/* Launch dimensions of a host kernel for the given args (grid.x = independent blocks). */
void hkc_host_launch_dims(const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                          uint32_t out_grid[3], uint32_t out_block[3]);
/* Compiles C source with $CC (else cc) -O2 -shared -fPIC into a shared object held in
 * memory. Errors (with the compiler's output) are reported through hkc_error. 0 / -1.
 * out_version receives the first line of `cc --version`. */
int hkc_rtc_host_compile(const char *source, void **out_code, size_t *out_size, char *out_version,
                         size_t version_size);
/* The host target's name for this machine: "host-<arch>" (e.g. host-x86_64). */
const char *hkc_host_target_name(void);

/* ---- GPU targets: the target table ------------------------------------------------------
 * Figures per architecture for occupancy, legality (LDS / shared memory, registers) and
 * rooflines. Each entry cites its source. AMD: per SIMD / CU; NVIDIA: per SM. */
typedef enum hkc_matrix_path {
  HKC_MATRIX_FMA = 0,      /* no matrix cores (gfx1030, anything unknown) */
  HKC_MATRIX_MFMA = 1,     /* CDNA: gfx908, gfx90a, gfx942, gfx950 */
  HKC_MATRIX_MMA_SYNC = 2, /* NVIDIA sm_80+ warp-level mma.sync */
  HKC_MATRIX_WGMMA = 3,    /* NVIDIA sm_90a warpgroup wgmma */
} hkc_matrix_path_t;

typedef struct hkc_gpu_arch {
  const char *name;              /* "gfx90a", "sm_90", "sm_90a" */
  hk_target_kind_t kind;         /* HK_TARGET_HIP or HK_TARGET_CUDA */
  const char *product;           /* the part the figures describe: "MI250X (one GCD)", "H200 SXM" */
  uint32_t wave_size;            /* 64 (CDNA), 32 (RDNA wave32, NVIDIA warps) */
  uint32_t compute_units;        /* CUs / SMs of that product */
  uint32_t simds_per_cu;         /* AMD SIMDs per CU; NVIDIA SM sub-partitions (4) */
  uint32_t max_waves_per_simd;   /* AMD waves per SIMD; NVIDIA warps per SM / simds_per_cu */
  uint32_t vgprs_per_lane;       /* AMD: VGPR file per lane per SIMD (incl. AGPRs where unified);
                                    NVIDIA: 32-bit registers per SM */
  uint32_t vgpr_granule;         /* allocation granule (AMD per lane; NVIDIA per warp) */
  uint32_t max_vgprs_per_thread; /* 512 gfx90a (VGPR+AGPR), 255 NVIDIA */
  uint32_t sgprs_per_simd;       /* AMD; 0 on NVIDIA */
  uint32_t max_sgprs_per_wave;
  uint32_t lds_per_cu;           /* bytes of LDS per CU / shared memory per SM */
  uint32_t max_lds_per_block;    /* bytes a single block may use */
  uint32_t max_threads_per_block;
  uint32_t max_blocks_per_cu;    /* NVIDIA 32 (sm_90); AMD: 0 = limited by waves only */
  hkc_matrix_path_t matrix;
  double hbm_gbps;               /* datasheet peak memory bandwidth, GB/s */
  double matrix_tflops_f16;      /* datasheet dense f16/bf16 matrix rate, TFLOP/s */
  const char *source;            /* where the figures come from */
} hkc_gpu_arch_t;

/* The entry for a target name; "gfx90a:xnack-" finds "gfx90a". NULL when unknown. */
const hkc_gpu_arch_t *hkc_gpu_arch_find(const char *name);
const hkc_gpu_arch_t *hkc_gpu_arch_list(size_t *out_count);
/* Occupancy of a kernel launched with block_threads threads per block: AMD waves per
 * SIMD, NVIDIA blocks per SM (limited by registers, SGPRs, LDS/shared memory, block
 * size and the wave/block caps). out_percent: resident waves/warps over the maximum.
 * out_limiter (may be NULL): "vgprs", "sgprs", "lds", "waves", "blocks". */
uint32_t hkc_occupancy(const hkc_gpu_arch_t *arch, const hkc_kernel_out_t *kernel, uint32_t block_threads,
                       double *out_percent, const char **out_limiter);

/* ---- GPU code generation (templates/gpu/, HIP dialect for both vendors) -------------------
 * One kernel's complete source for a GPU target: the vendor prelude, then the op template
 * specialised by the key, defining `extern "C" __global__ void <kernel->name>(...)` with
 * the parameters of the kernel ABI above (tensor -> pointer, I64 -> long long,
 * F32 -> float). No standard or vendor headers. Caller frees. NULL on OOM. */
char *hkc_codegen_gpu(const hkc_gpu_arch_t *arch, const hkc_kernel_out_t *kernel);
/* Grid, block and dynamic shared memory of a GPU launch for these args. */
void hkc_gpu_launch_dims(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                         uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared);

/* ---- runtime compilers: hiprtc (+comgr) for gfx, nvrtc for sm ------------------------------
 * Vendor libraries are dlopen'ed on first use. These functions never print: problems come
 * back in the result's log / the why buffer, and the caller reports them. They may be called
 * from several threads. nvrtc is thread-safe and runs on the caller's thread. hiprtc and
 * comgr are NOT (ROCm 5.2: LLVM's global option registry; rtc_worker.h): their calls run in
 * worker processes once hkc_amd_workers_start has been called, else one at a time in this
 * process. */
typedef struct hkc_rtc_result {
  void *code;           /* code object: AMDGPU ELF or cubin; malloc'd */
  size_t code_size;
  char *log;            /* compiler log (errors, warnings); malloc'd, may be NULL */
  /* resources of the named kernel as the toolchain reports them (0 = unknown) */
  uint32_t vgprs, agprs, sgprs, shared_bytes, scratch_bytes, wave_size, max_block;
} hkc_rtc_result_t;
void hkc_rtc_result_free(hkc_rtc_result_t *result);

/* 0 when the toolchain loads; else -1 and why names the missing library and the package. */
int hkc_hiprtc_available(char *why, size_t why_size);
/* "hiprtc 5.2.21153, comgr 2.4" (static string; "" when unavailable). */
const char *hkc_hiprtc_version(void);
/* Compiles one kernel's source for an AMD arch ("gfx90a", or with features "gfx90a:xnack-")
 * into a code object; resources of kernel `name` read through comgr's metadata. 0 / -1. */
int hkc_hiprtc_compile(const char *source, const char *name, const char *arch, hkc_rtc_result_t *out);
/* ISAs comgr knows, as hkc target names ("gfx90a", "gfx90a:xnack-", ...). Caller frees
 * each string and the array. 0 / -1 (why filled). */
int hkc_comgr_isa_list(char ***out_names, size_t *out_count, char *why, size_t why_size);
/* Disassembly of an AMDGPU code object (text, malloc'd). 0 / -1 (why filled). */
int hkc_comgr_disassemble(const void *code, size_t size, const char *arch, char **out_text, char *why,
                          size_t why_size);

/* AMD toolchain calls go to up to max_workers processes `exe --rtc-worker` (exe: an hkc
 * binary; /proc/self/exe from hkc itself); a call running longer than timeout_s (0: no
 * limit) kills its worker. A worker that dies is replaced and the call retried once. 0 / -1. */
int hkc_amd_workers_start(const char *exe, int max_workers, int timeout_s);
void hkc_amd_workers_stop(void); /* ends the workers; later calls run in-process */
void hkc_amd_workers_counts(unsigned *out_started, unsigned *out_replaced);
/* The worker's side: serves jobs on fd 3 until its parent closes it; returns an exit status. */
int hkc_amd_worker_main(void);

int hkc_nvrtc_available(char *why, size_t why_size);
const char *hkc_nvrtc_version(void);  /* "nvrtc 13.0" */
/* Compiles one kernel's source for "sm_80", "sm_90", "sm_90a" into a cubin; registers,
 * shared and local (spill) memory of kernel `name` from ptxas' report. 0 / -1. */
int hkc_nvrtc_compile(const char *source, const char *name, const char *arch, hkc_rtc_result_t *out);
/* sm_XY numbers nvrtc can build (e.g. 75, 80, 86, 89, 90, 100, ...); caller frees. */
int hkc_nvrtc_supported_archs(int **out_archs, size_t *out_count, char *why, size_t why_size);

/* ---- compile cache ---------------------------------------------------------------------------
 * Content-addressed: the key hashes kernel source, options, target and toolchain version.
 * Entries are self-checking files written atomically; a corrupt entry is a miss (and is
 * replaced), never trusted. Thread-safe. */
typedef struct hkc_cache hkc_cache_t;
/* dir NULL: $HKC_CACHE_DIR, else $XDG_CACHE_HOME/hkc, else ~/.cache/hkc. NULL when the
 * directory cannot be used (the build then runs uncached, with a warning). */
hkc_cache_t *hkc_cache_open(const char *dir);
void hkc_cache_close(hkc_cache_t *cache);
void hkc_cache_key(const char *source, const char *options, const char *target, const char *toolchain,
                   char out_hex[33]);
/* 0 on a hit (result filled, owned by the caller), -1 on a miss. */
int hkc_cache_get(hkc_cache_t *cache, const char *key_hex, hkc_rtc_result_t *out);
void hkc_cache_put(hkc_cache_t *cache, const char *key_hex, const hkc_rtc_result_t *result);

/* ---- the artifact ------------------------------------------------------------------ */
typedef struct hkc_pack_in {
  const hkc_spec_t *spec;
  const hkc_target_out_t *targets;
  size_t n_targets;
  const char *provenance;  /* "key=value\n" lines */
  int compression_level;   /* zstd level; 0 = default (19) */
} hkc_pack_in_t;

/* Writes the artifact atomically: a temporary file in the destination directory,
 * fsync, rename. On failure nothing is left at `path` (an existing file is kept). */
int hkc_pack_write(const hkc_pack_in_t *in, const char *path);
/* Same, into a malloc'd buffer (tests, fuzz seeds). */
int hkc_pack_write_memory(const hkc_pack_in_t *in, void **out_data, size_t *out_size);

/* ---- element conversion and .npy files (hkc run) ------------------------------------- */
uint16_t hkc_f32_to_f16(float f);   /* round to nearest even; overflow -> inf */
float hkc_f16_to_f32(uint16_t h);
uint16_t hkc_f32_to_bf16(float f);  /* round to nearest even */
float hkc_bf16_to_f32(uint16_t h);

/* A float array read from NumPy's .npy format (little-endian f2, f4 or f8; C order). */
typedef struct hkc_npy {
  uint32_t rank;
  int64_t dims[HK_MAX_RANK];
  size_t count;
  float *data; /* owned; converted to f32 */
} hkc_npy_t;
/* Reads and bounds-checks a .npy file. Errors name the file and what was wrong. 0 / -1. */
int hkc_npy_read(const char *path, hkc_npy_t *out);
/* Parses .npy bytes already in memory (the fuzzable core of hkc_npy_read). */
int hkc_npy_parse(const char *name, const unsigned char *bytes, size_t size, hkc_npy_t *out);
void hkc_npy_free(hkc_npy_t *npy);
/* Writes f32 data as .npy (format 1.0), atomically. 0 / -1. */
int hkc_npy_write_f32(const char *path, const float *data, const int64_t *dims, uint32_t rank);

/* ---- the build driver --------------------------------------------------------------- */
typedef struct hkc_build_options {
  const char *spec_path;
  const char *out_path;
  const char *targets;     /* comma-separated; NULL: the spec's `targets` */
  int compression_level;   /* zstd level; 0 = default */
  int quiet;               /* no summary on stdout */
  int jobs;                /* parallel kernel compiles; 0 = number of cores */
  int no_cache;            /* bypass the compile cache */
  int werror_spills;       /* a kernel that spills to scratch/local memory is an error */
  int fusion;              /* -1: the spec's `fusion:`; else HKC_FUSION_AUTO / HKC_FUSION_NONE */
  const char *cache_dir;   /* NULL: hkc_cache_open's default */
  /* tuning (compiler/tune.h): how kernel parameters are chosen for launches no database
   * entry covers (HKC_TUNE_MODEL, the default, or HKC_TUNE_DEFAULT), and the databases
   * (`--tuning-db`, several allowed: the first that has a launch wins) */
  int tune_mode;
  const char *const *tuning_dbs;
  size_t n_tuning_dbs;
  int tune_verify;         /* model: compiled candidates per launch to check (0 = 3) */
} hkc_build_options_t;

/* spec -> IR -> per target: kernels, code, one graph per batch bucket -> artifact.
 * Errors are reported through hkc_error; nothing is written unless every stage
 * succeeds. Returns 0 / -1. */
int hkc_build(const hkc_build_options_t *options);

#endif /* HKC_HKC_H */
