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
/* XXH3-64 of bytes. */
uint64_t hkc_hash64(const void *data, size_t size);
/* A file under templates/, embedded at build time (path relative to templates/,
 * e.g. "host/gemm.c"). NULL when absent. */
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

typedef struct hkc_node {
  char *name;
  hk_op_t op;
  hkc_loc_t loc;
  int in[3];        /* tensor indices; n_in used. gemm: A,B; add/mul: a,b; unary/norm/softmax: x;
                       attention: q,k,v, or one packed qkv (n_in == 1) */
  int n_in;
  int bias;         /* gemm: [N]; HKC_NONE when absent */
  int residual;     /* gemm: shaped like out; HKC_NONE when absent */
  int gamma, beta;  /* layernorm: both; rmsnorm: gamma only */
  int out;          /* tensor index */
  hk_act_t act;     /* gemm epilogue activation */
  int trans_b;      /* gemm: B stored [N, K] */
  float eps;        /* norms; default 1e-5 */
  int heads;        /* attention */
  int kv_heads;     /* attention; defaults to heads */
  int causal;       /* attention */
  int has_scale;    /* attention: scale given */
  float scale;      /* attention: default 1/sqrt(dh) */
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
  int **groups; size_t *group_sizes; size_t n_groups; /* node indices, for GROUPS */
  uint64_t hash;         /* hkc_hash64 of the file bytes */
} hkc_spec_t;

/* Parses and validates a spec file. On any problem prints FILE:LINE:COL errors and
 * returns -1 with *out_spec NULL. The caller owns the result (hkc_spec_destroy). */
int hkc_spec_load(const char *path, hkc_spec_t **out_spec);
/* Same over a buffer; `path` is used only in messages. */
int hkc_spec_parse(const char *path, const char *data, size_t size, hkc_spec_t **out_spec);
void hkc_spec_destroy(hkc_spec_t *spec);

int hkc_tensor_find(const hkc_spec_t *spec, const char *name); /* index or HKC_NONE */
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
 *   gemm      T A, T B, T bias, T residual, T C, I M, I N, I K
 *             compile time: act, trans_b, has_bias, has_residual
 *   add, mul  T a, T b, T out, I n, I na, I nb     (a[i % na] op b[i % nb], i < n)
 *   relu, gelu, silu   T x, T out, I n
 *   layernorm T x, T gamma, T beta, T out, I rows, I cols, F eps
 *   rmsnorm   T x, T gamma, T out, I rows, I cols, F eps
 *   softmax   T x, T out, I rows, I cols
 *   attention T q, T k, T v, T out, I batch, I seq_q, I seq_kv, I heads, I kv_heads, I dh,
 *             I ld_q, I ld_kv, I q_col, I k_col, I v_col, I causal, F scale
 *             (row strides ld_* in elements; *_col: first column of head 0, so packed qkv
 *              passes the same tensor three times with columns 0, H*dh, (H+Hkv)*dh)
 */
#define HKC_MAX_ARGS 24

typedef struct hkc_kernel_key {
  hk_op_t op;
  hk_dtype_t dtype;
  hk_act_t act;
  int trans_b, has_bias, has_residual;
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
} hkc_build_options_t;

/* spec -> IR -> per target: kernels, code, one graph per batch bucket -> artifact.
 * Errors are reported through hkc_error; nothing is written unless every stage
 * succeeds. Returns 0 / -1. */
int hkc_build(const hkc_build_options_t *options);

#endif /* HKC_HKC_H */
