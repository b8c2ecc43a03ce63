/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/frontend/frontend.h -- the spec and its IR.
 *
 *   spec.c      YAML -> hkc_spec_t (validated IR, shapes inferred, nodes in topological order);
 *               its steps in spec_yaml.c, spec_repeat.c, spec_node.c, spec_check.c (spec_internal.h)
 *   dimexpr.c   shape arithmetic over dims and the symbolic `batch`
 *   ir.c        names and sizes of IR values (dtypes, ops, tensors)
 *   fusion.c    the fusion plan: rewrites the IR, groups of nodes -> one node
 *   shard.c     tensor parallelism: the IR of one rank, collectives placed
 *
 * Uses util/ only.
 */
#ifndef HKC_FRONTEND_H
#define HKC_FRONTEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hk/pack_format.h"
#include "util/util.h"

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
/* How a PARAM or STATE tensor of one rank comes from the whole tensor (hk_shard_rec_t): along
 * axis, segments of seg_size elements each, segment k cut into seg_parts[k] pieces of which rank
 * r holds piece r * seg_parts[k] / ranks. n_seg 0: whole on every rank. */
typedef struct hkc_shard {
  int axis;
  int n_seg;
  int64_t seg_size[HK_MAX_SHARD_SEGMENTS];
  int seg_parts[HK_MAX_SHARD_SEGMENTS];
  int source;       /* the tensor whose checkpoint tensor this slices: itself, or (a `_shard` copy of
                       a param also read whole) that param */
} hkc_shard_t;

typedef struct hkc_tensor {
  char *name;
  hk_role_t role;       /* INPUT, OUTPUT (graph output), PARAM, INTERMEDIATE, STATE (`state:`) */
  hk_dtype_t dtype;     /* the spec's; I32 for i32 inputs and argmax / sample outputs; I8 or
                           FP8_E4M3 for quantized params, F32 for their scales */
  uint32_t rank;        /* 1..HK_MAX_RANK */
  hkc_dim_t dims[HK_MAX_RANK];
  int producer;         /* node index, -1 for inputs/params */
  hkc_loc_t loc;        /* where it was declared or produced */
  char **parts;         /* params only: the checkpoint tensors it concatenates along axis 0, in
                           order (`parts:`; pack PARTS section); NULL when n_parts is 0 */
  uint32_t n_parts;     /* 0..HK_MAX_PARTS */
  int scale;            /* a quantized (I8, FP8_E4M3) param: the f32 param of its scales
                           [scale_rows, scale_cols]; HKC_NONE otherwise */
  int64_t block[2];     /* a quantized param [rows, cols]: element (r, c) is scaled by
                           scale[r / block[0]][c / block[1]] */
  hkc_shard_t shard;    /* params and state under tensor parallelism: dims are one rank's (shard.c) */
} hkc_tensor_t;
/* Whether a tensor's dtype is one of the 8-bit types of quantized params. */
static inline int hkc_dtype_quantized(hk_dtype_t d) { return d == HK_DTYPE_I8 || d == HK_DTYPE_FP8_E4M3; }

#define HKC_NONE (-1)

/* hkc_node_t.shard: a gemm under tensor parallelism (docs/SPEC.md, "Tensor parallelism").
 * COLUMN: B's output columns are split over the ranks (each computes its N / ranks of C from the
 * whole A); ROW: B's K rows are (each multiplies its columns of A, and an all_reduce sums the
 * ranks' partial C). Unmarked gemms run whole on every rank. */
enum { HKC_SHARD_NONE = 0, HKC_SHARD_COLUMN = 1, HKC_SHARD_ROW = 2 };


#define HKC_MAX_NODE_IN 5      /* ewchain: up to 5 operands */
#define HKC_EW_PROGRAM_MAX 32  /* ewchain program text incl. NUL */

/* hkc_node_t.rope_scaling: how a rope rewrites its frequencies inv_freq[j] = theta^(-2j/dh)
 * (Hugging Face's rope_scaling / rope_parameters, computed in f32 as transformers does):
 *   LINEAR   inv_freq / factor
 *   LLAMA3   wavelength w = 2 pi / inv_freq; w < original_max / high_freq: kept; w >
 *            original_max / low_freq: inv_freq / factor; between: (1 - s) inv_freq / factor +
 *            s inv_freq with s = (original_max / w - low_freq) / (high_freq - low_freq) */
enum { HKC_ROPE_SCALING_NONE = 0, HKC_ROPE_SCALING_LINEAR = 1, HKC_ROPE_SCALING_LLAMA3 = 2 };

/* hkc_node_t.norm_c: the norm a gemm's epilogue ends with (fusion) */
enum { HKC_NORM_C_LAYERNORM = 1, HKC_NORM_C_RMSNORM = 2 };

typedef struct hkc_node {
  char *name;
  hk_op_t op;
  hkc_loc_t loc;
  int in[HKC_MAX_NODE_IN]; /* tensor indices; n_in used. gemm: A,B (a dual gemm, made by fusion only:
                       A, B, B2 -- out = act(A @ B + bias) * (A @ B2) + residual, no mul);
                       add/mul: a,b; unary/norm/softmax/
                       rope: x; attention: q,k,v, or one packed qkv (n_in == 1); ewchain: the
                       operands its program reads (in[0] is loaded first); take_rows: x, rows;
                       argmax: x; sample: x, params (i32 [R, 4]); dequant (made by the
                       frontend for a gemm's quantized B): the quantized param, whose
                       hkc_tensor_t.scale and .block give its scales */
  int n_in;
  int bias;         /* gemm: [N]; HKC_NONE when absent */
  int residual;     /* gemm: shaped like out; HKC_NONE when absent */
  int mul;          /* gemm: shaped like out, multiplies the activated result (SwiGLU gate);
                       HKC_NONE when absent. Epilogue order: act(acc + bias) * mul + residual */
  int gamma, beta;  /* layernorm: both; rmsnorm: gamma only; gemm with norm_a: gamma; gemm with
                       norm_c: both */
  int add_in;       /* layernorm/rmsnorm (fused residual add): normalises in[0] + add_in,
                       same shape; HKC_NONE when absent */
  int sum_out;      /* with add_in: also stores in[0] + add_in here; a gemm with norm_c: also stores
                       h (the normalised values' input) here; HKC_NONE when absent */
  int lengths;      /* attention: i32 [B] key lengths (keys j >= lengths[b] masked); HKC_NONE when absent */
  int mask;         /* attention: additive mask [B, 1 or heads, S, Skv] added to the scaled scores;
                       HKC_NONE when absent */
  int pos;          /* embedding: position table [max_pos, hidden] (row s added at sequence
                       position s); HKC_NONE when absent */
  int out;          /* tensor index */
  hk_act_t act;     /* gemm epilogue activation */
  int norm_a;       /* gemm (fusion only): A is rmsnorm(in[0]) with `gamma` and `eps` (a folded
                       rmsnorm: the kernel scales A's k tiles by gamma and its rows' sums by
                       rsqrt(mean(in[0]^2) + eps)); any epilogue */
  int norm_c;       /* gemm (fusion only): out = norm(h), h = act(A @ B + bias) * mul + residual rounded
                       to the dtype before it is normalised, over the last dim with `gamma` (and
                       `beta`) and `eps` (a norm node's, folded into the epilogue): HKC_NORM_C_LAYERNORM
                       or HKC_NORM_C_RMSNORM; with sum_out, h is stored there too; no dual, rope, norm_a */
  int rope;         /* gemm (fusion only): a rope node's rotation applied last in the epilogue:
                       out = rope(A @ B + bias), with the rope's heads, kv_heads, packed, theta
                       and pos_offset below (no act, mul, residual or dual); kv_append (fusion
                       only): its q and k heads rotated at positions ctx - 1 (a packed rope's,
                       with theta and rope_scaling below) before they are stored */
  int trans_b;      /* gemm: B stored [N, K] */
  int64_t dequant_fold_rows; /* gemm whose B (and B2) are dequant nodes' copies: at the batch
                       sizes where its rows of A are at most this many, it reads the 8-bit
                       param and its scales itself and those dequant launches are left out
                       (lower.h, hkc_gemm_folds_dequant); 0: never. Set by the build
                       (hkc_fuse_for_targets) where every target has such a kernel */
  int64_t norm_fold_rows; /* gemm (a generation graph's fusion planner): its A is a plain rmsnorm's
                       output; at the batch sizes where its rows of A are at most this many it
                       normalises A itself (as norm_a, from the norm's input, gamma and eps) and
                       the norm's launch is left out (lower.h, hkc_gemm_folded_norm); 0: never */
  int64_t append_fold_rows; /* kv_attention whose q is the output of a kv_append (of the same
                       caches, ctx, slot, layer and heads) that nothing else reads: at the batch
                       sizes where its rows are at most this many it takes the packed q|k|v rows
                       and appends them itself (and the kv_append's rope), and the kv_append's
                       launch is left out (lower.h, hkc_kv_folded_append); 0: never. Set by the
                       build (hkc_fuse_for_targets) where every target has such a kernel */
  int fp8_act;      /* gemm of fp8_e4m3 B (read as stored at every batch size): A quantized per
                       row to fp8 too, the product in FP8 (lower.h, hkc_gemm_fp8_act); set by the
                       build under the kernel option gemm_fp8 */
  int shard;        /* gemm: HKC_SHARD_* (`shard:`), how tensor parallelism splits it (shard.c) */
  int ranks;        /* all_gather (made by shard.c): the ranks whose columns it puts side by side */
  float eps;        /* norms; default 1e-5 */
  int heads;        /* attention; rope: heads in the last dim (dh = last / heads), or q heads when packed */
  int kv_heads;     /* attention, defaults to heads; packed rope: k (and v) heads, defaults to heads */
  int packed;       /* rope: x is a packed q|k|v [..., (heads + 2*kv_heads)*dh]: the q and k heads are
                       rotated, the v heads copied unchanged */
  int causal;       /* attention */
  int has_scale;    /* attention: scale given */
  float scale;      /* attention: default 1/sqrt(dh) */
  float theta;      /* rope: base, default 10000 */
  int64_t pos_offset; /* rope: position of the first sequence row, default 0 */
  /* Generation (token rows: the symbolic batch counts the step's tokens; docs/GENERATE.md) */
  int ctx;          /* rope, embedding, kv_append, kv_attention: i32 [T] tensor, per token row the
                       number of cache positions it sees incl. its own (position = ctx - 1; 0 marks
                       a padding token); HKC_NONE when absent */
  int slot;         /* kv_append, kv_attention: i32 [T] tensor, the cache slot (sequence) of each
                       token row; HKC_NONE when absent */
  int k_cache, v_cache; /* kv_append, kv_attention: STATE tensors [layers, slots, max_seq,
                       kv_heads*dh]; HKC_NONE when absent */
  int layer;        /* kv_append, kv_attention: index into the caches' first dim, default 0 */
  int window;       /* kv_attention: sliding window (keys [ctx - window, ctx)); 0 = none */
  int rope_scaling; /* rope: HKC_ROPE_SCALING_* (default none) */
  float rope_factor, rope_low_freq, rope_high_freq; /* rope scaling: factor; llama3's
                       low_freq_factor, high_freq_factor */
  int64_t rope_original_max; /* llama3: original_max_position_embeddings */
  /* ewchain: the program, see hkc_kernel_key_t.program; steps[i] = op letter, operand */
  char program[HKC_EW_PROGRAM_MAX];
  /* Fusion: the spec nodes this node computes, comma-separated ("fc2,res"); NULL for an
   * unfused node (then `name` is the only one). n_fused >= 1. */
  char *fused_names;
  int n_fused;
} hkc_node_t;

/* A rope node's (or a rope-fused gemm's) head_dim from its input or output x
 * [..., seq, width]: width / (heads, + 2 kv_heads when packed); 0 when that is not whole. */
static inline int64_t hkc_rope_head_dim(const hkc_node_t *nd, const hkc_tensor_t *x) {
  const int64_t all = nd->packed ? (int64_t)nd->heads + 2 * (int64_t)nd->kv_heads : (int64_t)nd->heads;
  if (all <= 0 || x->rank < 2 || x->dims[x->rank - 1].mul != 0 || x->dims[x->rank - 1].add % all != 0) return 0;
  return x->dims[x->rank - 1].add / all;
}
/* The heads a rope rotates: all of them, or a packed q|k|v's q and k heads (v passes). */
static inline int64_t hkc_rope_rotated_heads(const hkc_node_t *nd) {
  return (int64_t)nd->heads + (nd->packed ? (int64_t)nd->kv_heads : 0);
}
/* The head dims a gemm with a rope epilogue takes (fusion.c, codegen's rope_gemm_ok): even
 * head dims up to this many, in 16s (whole 8-column fragments on each side of a pair). */
#define HKC_ROPE_EPILOGUE_MAX_DH 256

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
  hkc_tensor_t *tensors; size_t n_tensors;   /* inputs, params, state, then node outputs */
  hkc_node_t *nodes; size_t n_nodes;         /* topological order (producers first) */
  int *outputs; size_t n_outputs;            /* tensor indices, role OUTPUT */
  hkc_fusion_mode_t fusion;
  int fusion_no_dual;    /* set by the build: some target has no dual gemm kernel but the simple
                            one, so auto fusion keeps SwiGLU as a gate gemm with a fused mul */
  int fusion_dual_blocked; /* set by fusion: fusion_no_dual kept at least one SwiGLU unfused */
  int fusion_no_rope;    /* keep every rope apart, as when a target has no gemm kernel with a rope
                            epilogue for it (the planner model's kernel_ok) */
  int fusion_rope_blocked; /* set by fusion: fusion_no_rope or kernel_ok kept a rope apart */
  int fusion_no_norm;    /* keep every rmsnorm out of the next gemm (as when a target has no gemm
                            kernel that folds one: the planner model's kernel_ok) */
  int fusion_norm_blocked; /* set by fusion: fusion_no_norm or kernel_ok kept an rmsnorm apart */
  int fusion_norm_always; /* fold an rmsnorm wherever a kernel has it, without asking the clock */
  int fusion_no_ln;      /* keep every norm out of the gemm epilogue before it (as when a target
                            has no such kernel: the planner model's kernel_ok) */
  int fusion_ln_blocked; /* set by fusion: fusion_no_ln or kernel_ok kept a norm apart */
  int fusion_ln_always;  /* take a norm into the gemm epilogue wherever a kernel has it, without
                            asking the clock */
  char *fusion_apart;    /* set by auto fusion: the legal steps its clock refused, "a + b (form)"
                            joined by "; " in the order weighed (NULL: none); the plan is every
                            other legal step, so equal texts mean equal plans (provenance) */
  int batch_policy;      /* hk_batch_policy_rec_t: `batch_policy: pad` (default) | exact */
  int **groups; size_t *group_sizes; size_t n_groups; /* node indices, for GROUPS */
  hkc_loc_t *group_locs;  /* where each group is written (n_groups entries), for errors */
  uint64_t hash;         /* hkc_hash64 of the file bytes */
  int tensor_parallel;   /* `parallel: {tensor: N}`: ranks the build splits the graph over (0 or 1:
                            none); hkc_shard applies it */
  int sharded_ranks;     /* set by hkc_shard: the ranks the IR is one of (0: whole) */
} hkc_spec_t;

/* Parses and validates a spec file. On any problem prints FILE:LINE:COL errors and
 * returns -1 with *out_spec NULL. The caller owns the result (hkc_spec_destroy). */
int hkc_spec_load(const char *path, hkc_spec_t **out_spec);
/* Same over a buffer; `path` is used only in messages. */
int hkc_spec_parse(const char *path, const char *data, size_t size, hkc_spec_t **out_spec);
void hkc_spec_destroy(hkc_spec_t *spec);

int hkc_tensor_find(const hkc_spec_t *spec, const char *name); /* index or HKC_NONE */
/* Frees what a tensor owns (name, parts) and clears those fields. */
void hkc_tensor_free(hkc_tensor_t *t);

/* ---- tensor parallelism (shard.c) ----------------------------------------------------------
 * Rewrites spec in place into the graph of one of `ranks` ranks (Megatron-style): column- and
 * row-parallel gemms (node `shard:`) take their shards of B and bias, heads of rope, attention,
 * kv_append and kv_attention are split (kv heads replicated when fewer than the ranks), KV caches
 * are split by kv head, and collective nodes are placed where a tensor must be whole: an
 * all_reduce after each row-parallel gemm (then its bias and residual), an all_gather where a
 * split tensor meets an op that needs it whole or is a graph output. Params and state record
 * their shard (hkc_tensor_t.shard). ranks <= 1: nothing changes. Every rank's graph is the same;
 * only the shards of the params and state differ. Run before fusion and before any node is
 * lowered. Errors (reported at the node): a split that does not divide, a gemm marked in a way
 * the graph cannot run (a row-parallel gemm of whole A, a column-parallel gemm with a residual),
 * 8-bit params in a split gemm. Returns 0 / -1. */
int hkc_shard(hkc_spec_t *spec, int ranks);

/* ---- fusion (fusion.c) ---------------------------------------------------------------------
 * Rewrites spec in place by its fusion plan (spec->fusion; mode >= 0 overrides it with
 * HKC_FUSION_AUTO / HKC_FUSION_NONE): each group of nodes becomes one node (gemm epilogue
 * chains, residual add + norm, element-wise chains -> HK_OP_EWCHAIN), intermediate tensors
 * that no longer exist are removed from the tensor table (indices compacted), nodes stay
 * in a topological order. An explicit group that cannot be fused is an error at the group
 * naming the node that breaks it and why. Returns 0 / -1 (reported). */
int hkc_fuse(hkc_spec_t *spec, int mode);

/* The fusion planner's clock (the build's is codegen/fusion_model.c): estimated seconds of
 * one launch of `node` -- a spec node, or a fused candidate over spec's tensor table -- at
 * this batch on target t < n_targets; finite and > 0 (a sample that is not counts for
 * nothing). `auto` takes a legal step only when it pays on this clock: the mean over targets
 * and batch buckets of t(fused) / (sum of t(apart)) is at most 1 (each bucket counts the
 * same, whatever its size). */
typedef struct hkc_fuse_model {
  double (*seconds)(const struct hkc_fuse_model *model, size_t t, const hkc_spec_t *spec, const hkc_node_t *node,
                    int64_t batch);
  const void *const *targets; /* what `seconds` reads per target (the build: hkc_gpu_arch_t, NULL = host) */
  const char *const *names;   /* target names, for the report */
  size_t n_targets;
  FILE *report;               /* when set: one line per candidate, its ratios and the verdict */
  /* Whether target t has a kernel for `gemm`, a candidate gemm of a form only some targets
   * run (a rope epilogue, a folded rmsnorm); NULL: every target does. Asked before the clock;
   * a no keeps the nodes apart (spec->fusion_rope_blocked, fusion_norm_blocked). */
  int (*kernel_ok)(const struct hkc_fuse_model *model, size_t t, const hkc_spec_t *spec, const hkc_node_t *gemm);
  const void *options;        /* what kernel_ok reads besides the target (the build: its kernel options) */
  /* The most rows of A at which target t's gemm with a folded rmsnorm (norm_a) has run as fast as
   * the norm and the gemm apart: a generation graph folds a norm per bucket (norm_fold_rows) only
   * up to it, whatever the clock says; NULL: no cap. */
  int64_t (*norm_fold_rows)(const struct hkc_fuse_model *model, size_t t);
  /* 1 when target t has a gemm with a folded rmsnorm only for the few rows of norm_fold_rows (AMD:
   * gemm_skinny_amd; its other gemms fold none): a norm then never folds for a whole plan -- a
   * generation graph folds it per bucket within that range, any other graph keeps the pair apart,
   * whatever the clock or gemm_norm=on say. NULL: no target is so limited. */
  int (*norm_fold_limited)(const struct hkc_fuse_model *model, size_t t);
} hkc_fuse_model_t;

/* hkc_fuse with a planner: `auto` fuses what pays on model's clock (NULL model, or no
 * targets: every legal fusion, which is what hkc_fuse does). Explicit groups and `none`
 * are followed as written. */
int hkc_fuse_planned(hkc_spec_t *spec, int mode, const hkc_fuse_model_t *model);

/* ---- IR helpers (ir.c) ------------------------------------------------------------------- */
int64_t hkc_tensor_elems(const hkc_tensor_t *t, int64_t batch);
size_t hkc_dtype_size(hk_dtype_t dtype);
const char *hkc_dtype_name(hk_dtype_t dtype); /* "f32" | "f16" | "bf16" | "i32" | "int8" | "fp8_e4m3" */
const char *hkc_op_name(hk_op_t op);
const char *hkc_act_name(hk_act_t act);

#endif /* HKC_FRONTEND_H */
