/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/lower/lower.h -- from the IR to kernels: what each node costs, the kernel a node
 * becomes with its arguments (the target-independent kernel ABI), the memory plan.
 *
 *   cost.c    bytes and FLOPs per node (inspect --plan, rooflines)
 *   lower.c   node -> kernel key + argument list
 *   extent.c  the bytes a launch touches of each tensor argument (the pack's EXTENTS)
 *   plan.c    memory plan (liveness -> one workspace arena) and graph dependencies
 *
 * Uses frontend/ and util/.
 */
#ifndef HKC_LOWER_H
#define HKC_LOWER_H

#include <stddef.h>
#include <stdint.h>

#include "frontend/frontend.h"

/* ---- cost model (cost.c) ------------------------------------------------------------------- */
typedef struct hkc_cost {
  uint64_t bytes;  /* every distinct tensor the node reads, once, + every tensor it writes */
  uint64_t flops;  /* multiply-add = 2 */
  int matrix;      /* flops are matrix-core work (gemm, attention) */
} hkc_cost_t;
/* Estimated minimum HBM traffic and arithmetic of node `node` at batch `batch`. */
void hkc_node_cost(const hkc_spec_t *spec, size_t node, int64_t batch, hkc_cost_t *out);
/* The same for any node over spec's tensors (a fused candidate the planner weighs). */
void hkc_node_cost_of(const hkc_spec_t *spec, const hkc_node_t *node, int64_t batch, hkc_cost_t *out);

/* ---- lowering: the kernel ABI ---------------------------------------------------
 * A kernel key names one compiled kernel: the op and every compile-time choice.
 * Runtime sizes are arguments, so one kernel serves every batch bucket.
 *
 * Argument layouts (T = tensor pointer or NULL, I = int64, F = float32), the same on
 * every target:
 *   gemm      T A, T B, T bias, T residual, T C, I M, I N, I K, T mul
 *             compile time: act, trans_b, has_bias, has_residual, has_mul
 *             (C = act(A @ B + bias) * mul + residual)
             a dual gemm (dual): then T B2 (C = act(A @ B + bias) * (A @ B2) + residual)
             a rope gemm (rope): then I seq, I rot_cols, I pos_offset, F theta
             (C = rope(A @ B + bias): heads of head_dim (the key's) columns; in those below
              rot_cols, element j < head_dim/2 of a head pairs with j + head_dim/2 at
              position row % seq + pos_offset, as the rope op rotates them)
             a folded rmsnorm (norm_a), after those: T gamma [K], F eps (A @ B becomes
              rmsnorm(A) @ B: (A * gamma) @ B, row i scaled by rsqrt(mean(A[i]^2) + eps))
             a norm epilogue (norm_c; none of the above): T gamma [N], T beta [N] (NULL for an
              rmsnorm), F eps, T sum (NULL unless has_sum) (C = layernorm(h) or rmsnorm(h) over
              each row of N = the key's norm_cols columns, h the plain epilogue's result rounded
              to the dtype, as a norm node would read it; with has_sum h is stored in sum too)
 *   add, mul  T a, T b, T out, I n, I na, I nb     (a[i % na] op b[i % nb], i < n)
 *   relu, gelu, silu, gelu_tanh, tanh   T x, T out, I n
 *   layernorm T x, T gamma, T beta, T out, I rows, I cols, F eps, T add, T sum
 *   rmsnorm   T x, T gamma, T out, I rows, I cols, F eps, T add, T sum
 *             (add/sum NULL unless has_add/has_sum: normalises x + add, stores it in sum)
 *   softmax   T x, T out, I rows, I cols
 *   attention T q, T k, T v, T out, I batch, I seq_q, I seq_kv, I heads, I kv_heads, I dh,
 *             I ld_q, I ld_kv, I q_col, I k_col, I v_col, I causal, F scale
 *             (row strides ld_* in elements; *_col: first column of head 0, so packed qkv
 *              passes the same tensor three times with columns 0, H*dh, (H+Hkv)*dh)
 *   rope      T x, T out, I rows, I seq, I heads, I dh, I pos_offset, F theta, I pass_heads
 *             (x [rows, (heads + pass_heads)*dh]; row r is at position r % seq + pos_offset;
 *              the first `heads` heads are rotated, the last pass_heads copied unchanged:
 *              0 for a plain rope; a packed q|k|v passes heads = H + Hkv, pass_heads = Hkv)
 *   embedding T table, T ids (i32), T pos, T out, I tokens, I seq, I vocab, I hidden
 *             (out[t] = table[clamp(ids[t], 0, vocab-1)] + pos[t % seq], pos NULL unless
 *              has_add; t < tokens, rows of `hidden` elements)
 *             with has_ctx (embedding's ctx:): then T ctx (i32 [tokens]); the position row is
 *              clamp(ctx[t] - 1, 0, max_pos - 1), I max_pos; pos rows are read as [max_pos, hidden]
 *   rope      with has_ctx (rope's ctx:): then T ctx (i32 [rows]): row r at position
 *              max(ctx[r] - 1, 0) (seq and pos_offset unused); with rope_scaling != 0 (key):
 *              then F factor, F low_freq, F high_freq, F original_max (frontend.h,
 *              HKC_ROPE_SCALING_*). Both may be given; ctx comes first.
 *   kv_append T qkv, T k_cache, T v_cache, T ctx (i32), T slot (i32), T out, I rows, I heads,
 *             I kv_heads, I dh, I layer, I slots, I max_seq
 *             (qkv [rows, (heads + 2 kv_heads) dh]; caches [layers, slots, max_seq, kv_heads dh];
 *              row t with 1 <= ctx[t] <= max_seq and 0 <= slot[t] < slots stores its k and v
 *              heads at cache[layer, slot[t], ctx[t] - 1]; any other row stores nothing;
 *              out[t] = the q heads of row t)
 *   kv_attention T q, T k_cache, T v_cache, T ctx (i32), T slot (i32), T out, I rows, I heads,
 *             I kv_heads, I dh, I layer, I slots, I max_seq, I window, F scale
 *             (q [rows, heads dh]; row t (valid as in kv_append) attends to the keys
 *              [max(0, ctx[t] - window), ctx[t]) of cache[layer, slot[t]] (window 0: from 0);
 *              q head h reads kv head h / (heads / kv_heads); an invalid row outputs zeros)
 *             with append (a kv_append folded in at a bucket: hkc_kv_folded_append): q is that
 *              kv_append's qkv [rows, (heads + 2 kv_heads) dh], then I append (1), and the
 *              launch does the append first, as kv_append would (its rope too, with rope: then
 *              F theta and the scaling's four as kv_append's tail), attending with the q heads
 *              it would have output; the rows' slots must differ (the build folds at one row)
 *   dequant   T q (int8 or fp8_e4m3, the key's program: "i8" / "e4m3"), T scale (f32), T out,
 *             I rows, I cols, I scale_rows, I scale_cols, I block_rows, I block_cols
 *             (out[r][c] = q[r][c] * scale[r / block_rows][c / block_cols]; q, out [rows, cols],
 *              scale [scale_rows, scale_cols])
 *   take_rows T x, T rows (i32), T out, I x_rows, I n_out, I width
 *             (out[r] = x[rows[r]] for 0 <= rows[r] < x_rows, else zeros; x [x_rows, width])
 *   argmax    T x, T out (i32), I rows, I cols
 *             (out[r] = the first index of row r's largest value; NaN never wins; 0 when the
 *              row has no number)
 *   sample    T x, T params (i32), T out (i32), I rows, I cols
 *             (x [rows, cols] logits; params [rows, 4] = {seed, top_k, temperature, top_p},
 *              the last two as IEEE f32 bits (HK_SAMPLE_* in hk/pack_format.h); out[r] = an
 *              index of row r drawn as docs/GENERATE.md "sample" defines it, on every target:
 *              - temperature T not a finite number > 0, or top_k == 1: argmax's index;
 *              - else z_j = f32(x_j) / T in f32; a NaN z is never a candidate; key(z) = z's
 *                bits with the sign bit flipped for z >= +0, all bits flipped for z <= -0 (an
 *                order-preserving uint32); k = top_k, every number when k <= 0 or k >= cols;
 *                tau_k = the k-th largest key (0 when k >= the count of numbers), S_k = {j :
 *                key_j >= tau_k} (ties at tau_k all in: S_k may hold more than k);
 *              - m = max z; w_j = expf(z_j - m), 1 where z_j == m (an infinite m too); W_j =
 *                (uint64)(w_j * 2^32); Wk = the sum of W_j over S_k (exact: below 2^63);
 *              - p = top_p, 1 when NaN, <= 0 or >= 1; p < 1: P = max(1, (uint64)((double)p *
 *                (double)Wk)), tau_p = the largest key v of S_k with sum(W_j : j in S_k,
 *                key_j >= v) >= P; p == 1: tau_p = tau_k; S = {j : key_j >= max(tau_k, tau_p)};
 *              - h_j = the top 23 bits of splitmix64((uint64)(uint32)seed << 32 | j), u_j =
 *                (h_j + 0.5) / 2^23 (exact in f32, inside (0, 1)), g_j = -logf(-logf(u_j));
 *                out[r] = the j of S with the largest z_j + g_j, the smallest j of equal ones
 *                (Gumbel-max: j with probability exp(z_j) / sum over S of exp(z));
 *              - a row without a number (all NaN): 0)
 *   all_reduce T in, T out, I n                 (collective: out = the sum of every rank's in, n elements)
 *   all_gather T in, T out, I rows, I cols, I ranks (collective: out [rows, ranks * cols], rank r's
 *             in [rows, cols] at columns r * cols ..). Collectives have no code: the runtime runs
 *             them through the session's communicator (hk/pack_format.h, "Tensor parallelism")
 *   ewchain   T out, I n, then per operand j = 0 .. n_in-1: T in_j, I n_j
 *             (out[i] = program over in_j[i % n_j], i < n)
 * lower.c produces exactly these. A GPU variant may append arguments of its own after them
 * (variants/variant.h, launch_args: e.g. TMA tensor maps, kind HK_ARG_TMAP, of the GEMM's
 * operands on sm_90a); the build adds them to the launch after its launch dimensions.
 */
#define HKC_MAX_ARGS 24 /* ewchain: 2 + 2*5 */

/* The layouts above as named indices into a launch's arguments (lower.c pushes them in this
 * order and checks each index; codegen, the variants and tuning read sizes by these names).
 * HKC_<OP>_N_ARGS: the number of arguments. */
enum hkc_gemm_arg {
  HKC_GEMM_ARG_A, HKC_GEMM_ARG_B, HKC_GEMM_ARG_BIAS, HKC_GEMM_ARG_RESIDUAL, HKC_GEMM_ARG_C,
  HKC_GEMM_ARG_M, HKC_GEMM_ARG_N, HKC_GEMM_ARG_K, HKC_GEMM_ARG_MUL, HKC_GEMM_N_ARGS,
  HKC_GEMM_ARG_B2 = HKC_GEMM_N_ARGS, /* a dual gemm's second B (key.dual): one argument more */
  HKC_GEMM_N_ARGS_DUAL,
  /* a rope gemm's rotation (key.rope; never dual): four arguments more */
  HKC_GEMM_ARG_ROPE_SEQ = HKC_GEMM_N_ARGS, HKC_GEMM_ARG_ROPE_COLS, HKC_GEMM_ARG_ROPE_POS0, HKC_GEMM_ARG_ROPE_THETA,
  HKC_GEMM_N_ARGS_ROPE,
  /* a norm epilogue (key.norm_c; never dual, rope or norm_a): four arguments more */
  HKC_GEMM_ARG_LN_GAMMA = HKC_GEMM_N_ARGS, HKC_GEMM_ARG_LN_BETA, HKC_GEMM_ARG_LN_EPS, HKC_GEMM_ARG_LN_SUM,
  HKC_GEMM_N_ARGS_LN
};
/* A folded rmsnorm's two arguments (gamma, eps) follow the dual's or the rope's, if any. */
static inline uint32_t hkc_gemm_norm_arg(int dual, int rope) {
  return (uint32_t)HKC_GEMM_N_ARGS + (dual ? 1u : rope ? 4u : 0u);
}
/* A gemm that reads 8-bit B itself (key.program "i8" or "e4m3": a dequant node folded into it at
 * this batch size, hkc_gemm_folds_dequant) takes seven arguments more, after all the others: B's
 * scales (f32), B2's (a dual gemm's; else NULL), B's stored rows (N with trans_b, else K), the
 * scales' rows and columns and the block each covers. Element (r, c) of B as stored is
 * q[r][c] * scale[r / block_rows][c / block_cols] rounded to the key's dtype -- exactly what the
 * dequant node would have stored. */
enum hkc_gemm_quant_arg {
  HKC_GEMM_QB_SCALE, HKC_GEMM_QB_SCALE2, HKC_GEMM_QB_ROWS, HKC_GEMM_QB_SCALE_ROWS, HKC_GEMM_QB_SCALE_COLS,
  HKC_GEMM_QB_BLOCK_ROWS, HKC_GEMM_QB_BLOCK_COLS, HKC_GEMM_QB_N_ARGS
};

enum hkc_binary_arg { /* add, mul */
  HKC_BINARY_ARG_A, HKC_BINARY_ARG_B, HKC_BINARY_ARG_OUT, HKC_BINARY_ARG_N, HKC_BINARY_ARG_NA, HKC_BINARY_ARG_NB,
  HKC_BINARY_N_ARGS
};
enum hkc_unary_arg { /* relu, gelu, silu, gelu_tanh, tanh */
  HKC_UNARY_ARG_X, HKC_UNARY_ARG_OUT, HKC_UNARY_ARG_N, HKC_UNARY_N_ARGS
};
enum hkc_layernorm_arg {
  HKC_LAYERNORM_ARG_X, HKC_LAYERNORM_ARG_GAMMA, HKC_LAYERNORM_ARG_BETA, HKC_LAYERNORM_ARG_OUT,
  HKC_LAYERNORM_ARG_ROWS, HKC_LAYERNORM_ARG_COLS, HKC_LAYERNORM_ARG_EPS, HKC_LAYERNORM_ARG_ADD,
  HKC_LAYERNORM_ARG_SUM, HKC_LAYERNORM_N_ARGS
};
enum hkc_rmsnorm_arg {
  HKC_RMSNORM_ARG_X, HKC_RMSNORM_ARG_GAMMA, HKC_RMSNORM_ARG_OUT, HKC_RMSNORM_ARG_ROWS, HKC_RMSNORM_ARG_COLS,
  HKC_RMSNORM_ARG_EPS, HKC_RMSNORM_ARG_ADD, HKC_RMSNORM_ARG_SUM, HKC_RMSNORM_N_ARGS
};
enum hkc_softmax_arg {
  HKC_SOFTMAX_ARG_X, HKC_SOFTMAX_ARG_OUT, HKC_SOFTMAX_ARG_ROWS, HKC_SOFTMAX_ARG_COLS, HKC_SOFTMAX_N_ARGS
};
enum hkc_attention_arg {
  HKC_ATTENTION_ARG_Q, HKC_ATTENTION_ARG_K, HKC_ATTENTION_ARG_V, HKC_ATTENTION_ARG_OUT,
  HKC_ATTENTION_ARG_BATCH, HKC_ATTENTION_ARG_SEQ_Q, HKC_ATTENTION_ARG_SEQ_KV, HKC_ATTENTION_ARG_HEADS,
  HKC_ATTENTION_ARG_KV_HEADS, HKC_ATTENTION_ARG_DH, HKC_ATTENTION_ARG_LD_Q, HKC_ATTENTION_ARG_LD_KV,
  HKC_ATTENTION_ARG_Q_COL, HKC_ATTENTION_ARG_K_COL, HKC_ATTENTION_ARG_V_COL, HKC_ATTENTION_ARG_CAUSAL,
  HKC_ATTENTION_ARG_SCALE, HKC_ATTENTION_N_ARGS,
  /* the masked ABI (key has_lengths or has_mask) appends: I32 lengths [batch] or null, T mask
   * [batch, mask_heads, seq_q, seq_kv] or null, I mask_heads (1 or heads; 0 without a mask) */
  HKC_ATTENTION_ARG_LENGTHS = HKC_ATTENTION_N_ARGS, HKC_ATTENTION_ARG_MASK, HKC_ATTENTION_ARG_MASK_HEADS,
  HKC_ATTENTION_MASKED_N_ARGS
};
enum hkc_rope_arg {
  HKC_ROPE_ARG_X, HKC_ROPE_ARG_OUT, HKC_ROPE_ARG_ROWS, HKC_ROPE_ARG_SEQ, HKC_ROPE_ARG_HEADS, HKC_ROPE_ARG_DH,
  HKC_ROPE_ARG_POS_OFFSET, HKC_ROPE_ARG_THETA, HKC_ROPE_ARG_PASS_HEADS, HKC_ROPE_N_ARGS
};
enum hkc_embedding_arg {
  HKC_EMBEDDING_ARG_TABLE, HKC_EMBEDDING_ARG_IDS, HKC_EMBEDDING_ARG_POS, HKC_EMBEDDING_ARG_OUT,
  HKC_EMBEDDING_ARG_TOKENS, HKC_EMBEDDING_ARG_SEQ, HKC_EMBEDDING_ARG_VOCAB, HKC_EMBEDDING_ARG_HIDDEN,
  HKC_EMBEDDING_N_ARGS
};
/* embedding with has_ctx: two arguments more */
enum { HKC_EMBEDDING_ARG_CTX = HKC_EMBEDDING_N_ARGS, HKC_EMBEDDING_ARG_MAX_POS, HKC_EMBEDDING_N_ARGS_CTX };
/* rope: the optional tails, each present per the key (has_ctx, then rope_scaling); their first
 * index is hkc_rope_ctx_arg / hkc_rope_scaling_arg */
enum { HKC_ROPE_SCALING_ARG_FACTOR, HKC_ROPE_SCALING_ARG_LOW, HKC_ROPE_SCALING_ARG_HIGH, HKC_ROPE_SCALING_ARG_ORIG,
       HKC_ROPE_SCALING_N_ARGS };
static inline uint32_t hkc_rope_ctx_arg(void) { return (uint32_t)HKC_ROPE_N_ARGS; }
static inline uint32_t hkc_rope_scaling_arg(int has_ctx) { return (uint32_t)HKC_ROPE_N_ARGS + (has_ctx ? 1u : 0u); }
enum hkc_kv_append_arg {
  HKC_KV_APPEND_ARG_QKV, HKC_KV_APPEND_ARG_K_CACHE, HKC_KV_APPEND_ARG_V_CACHE, HKC_KV_APPEND_ARG_CTX,
  HKC_KV_APPEND_ARG_SLOT, HKC_KV_APPEND_ARG_OUT, HKC_KV_APPEND_ARG_ROWS, HKC_KV_APPEND_ARG_HEADS,
  HKC_KV_APPEND_ARG_KV_HEADS, HKC_KV_APPEND_ARG_DH, HKC_KV_APPEND_ARG_LAYER, HKC_KV_APPEND_ARG_SLOTS,
  HKC_KV_APPEND_ARG_MAX_SEQ, HKC_KV_APPEND_N_ARGS
};
/* kv_append with a rope (key rope: fusion's rope + append) appends F theta, then with
 * rope_scaling the rope's four (HKC_ROPE_SCALING_ARG_*, from HKC_KV_APPEND_ROPE_N_ARGS) */
enum { HKC_KV_APPEND_ARG_THETA = HKC_KV_APPEND_N_ARGS, HKC_KV_APPEND_ROPE_N_ARGS };
enum hkc_kv_attention_arg {
  HKC_KV_ATTENTION_ARG_Q, HKC_KV_ATTENTION_ARG_K_CACHE, HKC_KV_ATTENTION_ARG_V_CACHE, HKC_KV_ATTENTION_ARG_CTX,
  HKC_KV_ATTENTION_ARG_SLOT, HKC_KV_ATTENTION_ARG_OUT, HKC_KV_ATTENTION_ARG_ROWS, HKC_KV_ATTENTION_ARG_HEADS,
  HKC_KV_ATTENTION_ARG_KV_HEADS, HKC_KV_ATTENTION_ARG_DH, HKC_KV_ATTENTION_ARG_LAYER, HKC_KV_ATTENTION_ARG_SLOTS,
  HKC_KV_ATTENTION_ARG_MAX_SEQ, HKC_KV_ATTENTION_ARG_WINDOW, HKC_KV_ATTENTION_ARG_SCALE, HKC_KV_ATTENTION_N_ARGS
};
/* kv_attention with a kv_append folded in (key append): I append (1: q is the packed q|k|v rows),
 * then where that append's rope came along (key rope) F theta, and with rope_scaling the rope's
 * four (HKC_ROPE_SCALING_ARG_*, from HKC_KV_ATTENTION_ROPE_N_ARGS) */
enum { HKC_KV_ATTENTION_ARG_APPEND = HKC_KV_ATTENTION_N_ARGS, HKC_KV_ATTENTION_ARG_THETA, HKC_KV_ATTENTION_ROPE_N_ARGS };
enum hkc_take_rows_arg {
  HKC_TAKE_ROWS_ARG_X, HKC_TAKE_ROWS_ARG_ROWS, HKC_TAKE_ROWS_ARG_OUT, HKC_TAKE_ROWS_ARG_X_ROWS,
  HKC_TAKE_ROWS_ARG_N_OUT, HKC_TAKE_ROWS_ARG_WIDTH, HKC_TAKE_ROWS_N_ARGS
};
enum hkc_dequant_arg {
  HKC_DEQUANT_ARG_Q, HKC_DEQUANT_ARG_SCALE, HKC_DEQUANT_ARG_OUT, HKC_DEQUANT_ARG_ROWS, HKC_DEQUANT_ARG_COLS,
  HKC_DEQUANT_ARG_SCALE_ROWS, HKC_DEQUANT_ARG_SCALE_COLS, HKC_DEQUANT_ARG_BLOCK_ROWS, HKC_DEQUANT_ARG_BLOCK_COLS,
  HKC_DEQUANT_N_ARGS
};
enum hkc_argmax_arg { HKC_ARGMAX_ARG_X, HKC_ARGMAX_ARG_OUT, HKC_ARGMAX_ARG_ROWS, HKC_ARGMAX_ARG_COLS, HKC_ARGMAX_N_ARGS };
enum hkc_sample_arg {
  HKC_SAMPLE_ARG_X, HKC_SAMPLE_ARG_PARAMS, HKC_SAMPLE_ARG_OUT, HKC_SAMPLE_ARG_ROWS, HKC_SAMPLE_ARG_COLS,
  HKC_SAMPLE_N_ARGS
};
enum hkc_all_reduce_arg { HKC_ALL_REDUCE_ARG_IN, HKC_ALL_REDUCE_ARG_OUT, HKC_ALL_REDUCE_ARG_N, HKC_ALL_REDUCE_N_ARGS };
enum hkc_all_gather_arg {
  HKC_ALL_GATHER_ARG_IN, HKC_ALL_GATHER_ARG_OUT, HKC_ALL_GATHER_ARG_ROWS, HKC_ALL_GATHER_ARG_COLS,
  HKC_ALL_GATHER_ARG_RANKS, HKC_ALL_GATHER_N_ARGS
};
/* Whether an op is a collective: no code; the runtime's communicator runs it. */
static inline int hkc_op_collective(hk_op_t op) { return op == HK_OP_ALL_REDUCE || op == HK_OP_ALL_GATHER; }
enum hkc_ewchain_arg { HKC_EWCHAIN_ARG_OUT, HKC_EWCHAIN_ARG_N, HKC_EWCHAIN_ARG_OPERANDS };
/* ewchain operand j (0 .. n_in-1): its tensor and its element count */
#define HKC_EWCHAIN_ARG_IN(j) (HKC_EWCHAIN_ARG_OPERANDS + 2 * (j))
#define HKC_EWCHAIN_ARG_N_IN(j) (HKC_EWCHAIN_ARG_OPERANDS + 2 * (j) + 1)
_Static_assert(HKC_ATTENTION_N_ARGS <= HKC_MAX_ARGS && HKC_EWCHAIN_ARG_IN(HKC_MAX_NODE_IN) <= HKC_MAX_ARGS,
               "HKC_MAX_ARGS holds the longest argument list");

#define HKC_TUNE_VARIANT_MAX 24 /* longest variant name + NUL ("elementwise_vec16") */
#define HKC_TUNE_MAX 48         /* longest parameter string + NUL ("bm=128,bn=128,wm=2,wn=4,st=4") */

typedef struct hkc_kernel_key {
  hk_op_t op;
  hk_dtype_t dtype;
  hk_act_t act;
  int trans_b, has_bias, has_residual;
  int has_mul;          /* gemm: epilogue multiply (hkc_node_t.mul) */
  int dual;             /* gemm: a dual gemm (fusion's SwiGLU form: act(A @ B + bias) * (A @ B2) +
                           residual; B2 is argument HKC_GEMM_ARG_B2) */
  int rope;             /* gemm: a rope epilogue (fusion's: rope(A @ B + bias), head_dim below;
                           arguments HKC_GEMM_ARG_ROPE_*) */
  int norm_a;           /* gemm: a folded rmsnorm of A (fusion's; arguments gamma, eps at
                           hkc_gemm_norm_arg) */
  int norm_c;           /* gemm: a norm epilogue (HKC_NORM_C_LAYERNORM / _RMSNORM) over rows of
                           norm_cols (= N) columns (fusion's; arguments HKC_GEMM_ARG_LN_*; has_sum:
                           the un-normalised result is stored too) */
  int norm_cols;
  int has_add, has_sum; /* layernorm/rmsnorm: fused residual add / also store the sum (a gemm with
                           norm_c: its un-normalised result);
                           embedding: has_add = a position table is added */
  int has_lengths, has_mask; /* attention: per-batch key lengths / an additive mask (the
                                masked ABI: HKC_ATTENTION_MASKED_N_ARGS arguments) */
  int has_ctx;          /* rope, embedding: positions from an i32 ctx tensor (lower.h's ABI tails) */
  int append;           /* kv_attention: the kv_append before it folded in (its q argument the packed
                           q|k|v rows; rope: that append's rope, arguments from
                           HKC_KV_ATTENTION_ARG_THETA) */
  int rope_scaling;     /* rope: HKC_ROPE_SCALING_* (frontend.h); nonzero adds its four arguments */
  /* ewchain: the element-wise program, a C-identifier-safe string of steps applied to
   * v = in0[i % n0]: a<j> v += in_j, m<j> v *= in_j (operand j in 1..4, element i % n_j),
   * r relu, g gelu, s silu, t gelu_tanh. E.g. "a1gm2" = gelu(in0 + in1) * in2. dequant: the
   * quantized type, "i8" (int8) or "e4m3" (fp8_e4m3). "" else. */
  char program[HKC_EW_PROGRAM_MAX];
  /* Shape facts fixed at build time (the same at every batch size) that let a GPU target
   * pick a specialised kernel. align: the largest of 8, 4, 2, 1 elements dividing every
   * row length, row stride and column offset the kernel indexes with (gemm: K and N;
   * norms/softmax: cols; element-wise: the operands' last dims; attention: ld_q, ld_kv,
   * the column offsets and dh; rope: the row length, dh and dh/2); with 16-byte-aligned
   * tensors (hk_session_bind checks it) align 8 allows 16-byte vector access of f16/bf16
   * rows. head_dim: attention's and rope's dh, a rope gemm's.
   * The host target ignores both (zero). */
  int align;
  int head_dim;
  /* Tuning (compiler/tune/tune.c): the variant this kernel uses ("" = the registry's first that
   * applies: codegen/variants/variant.h, e.g. "gemm_wgmma" or "host_gemm") and its parameters, a
   * canonical "bn=128,st=4,p=1" string ("" = the variant's defaults). Part of the kernel's
   * identity: a non-empty choice adds a short hash of both to the name. */
  char variant[HKC_TUNE_VARIANT_MAX];
  char tune[HKC_TUNE_MAX];
} hkc_kernel_key_t;

typedef struct hkc_arg {
  hk_arg_kind_t kind;
  int64_t i;   /* tensor index (TENSOR), value (I64), or for TMAP the packed field of the format
                  (hk_tmap_pack in hk/pack_format.h: tensor index, box, swizzle) as int64 bits */
  float f;     /* F32 */
} hkc_arg_t;

/* Fills the key and arguments of node `node` at batch size `batch`. Returns n_args, or
 * -1 after reporting an error when the node's sizes cannot be lowered. */
int hkc_lower_node(const hkc_spec_t *spec, size_t node, int64_t batch, hkc_kernel_key_t *out_key,
                   hkc_arg_t out_args[HKC_MAX_ARGS]);
/* The same for a node over spec's tensors that need not be one of its nodes (the fusion
 * planner's candidates). */
int hkc_lower_node_of(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch, hkc_kernel_key_t *out_key,
                      hkc_arg_t out_args[HKC_MAX_ARGS]);
/* The 8-bit type of a gemm key's B when the gemm reads it itself (HK_DTYPE_I8 or
 * HK_DTYPE_FP8_E4M3, from key.program), 0 when B has the key's dtype. */
static inline int hkc_gemm_quant_b(const hkc_kernel_key_t *key) {
  if (key->op != HK_OP_GEMM) return 0;
  return key->program[0] == 'i' ? HK_DTYPE_I8 : key->program[0] == 'e' ? HK_DTYPE_FP8_E4M3 : 0;
}
/* Whether a gemm key computes in FP8 (key.program "e4m3a", the kernel option gemm_fp8): B
 * fp8_e4m3 read as stored, A quantized per row to fp8_e4m3 with its scale absmax / 448, the
 * f32 sums of the products scaled by both (templates/host/gemm.c has the exact rule). Its
 * arguments are those of a gemm that reads 8-bit B (enum hkc_gemm_quant_arg). */
static inline int hkc_gemm_fp8_act(const hkc_kernel_key_t *key) {
  return key->op == HK_OP_GEMM && key->program[0] == 'e' && key->program[4] == 'a';
}
/* Where such a gemm's quantization arguments (enum hkc_gemm_quant_arg) start: after the dual's,
 * rope's or norm epilogue's and a folded rmsnorm's. */
static inline uint32_t hkc_gemm_quant_arg(const hkc_kernel_key_t *key) {
  if (key->norm_c) return HKC_GEMM_N_ARGS_LN;
  return hkc_gemm_norm_arg(key->dual, key->rope) + (key->norm_a ? 2u : 0u);
}
/* Whether gemm node nd reads its 8-bit B (and a dual's B2) and their scales itself at `batch`,
 * instead of the copies dequant nodes make (frontend: insert_dequant): its B (and B2) are such
 * copies (B2's scales shaped like B's; B's rows and columns below 2^31), and its rows of A are at
 * most nd->dequant_fold_rows (the build sets that where every target has a kernel for its key). */
int hkc_gemm_folds_dequant(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch);
/* Whether gemm node nd can compute in FP8 (hkc_gemm_fp8_act): its B (and a dual's B2) are dequant
 * copies of fp8_e4m3 params whose scales do not vary along K (per output channel or per
 * tensor). */
int hkc_gemm_fp8_eligible(const hkc_spec_t *spec, const hkc_node_t *nd);
/* The rmsnorm node whose work gemm node nd does at `batch` (NULL: none): nd has norm_fold_rows,
 * its rows of A at this batch are at most that many, and its A is the output of an rmsnorm
 * without a fused add; it then reads the norm's input, gamma and eps as a gemm with norm_a does. */
const hkc_node_t *hkc_gemm_folded_norm(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch);
/* The kv_append node whose work kv_attention node nd does at `batch` (NULL: none): nd has
 * append_fold_rows, its rows at this batch are at most that many, its q is the output of a
 * kv_append of the same caches, ctx, slot, layer, heads and kv_heads whose caches have the
 * dtype of its rows, and nothing else reads that output, which is no graph output. nd then
 * reads the kv_append's packed q|k|v rows (key.append, lower.h's kv_attention ABI). */
const hkc_node_t *hkc_kv_folded_append(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch);
/* Whether node `node` has no launch at `batch`: a dequant node whose every reader folds it, an
 * rmsnorm whose every reader is a gemm that folds it (hkc_gemm_folded_norm) and whose output
 * is no graph output, or a kv_append that its kv_attention folds (hkc_kv_folded_append). The memory plan and the dependencies leave it out too (its output is then
 * never made or read). */
int hkc_node_left_out(const hkc_spec_t *spec, size_t node, int64_t batch);
/* Whether a kv_append / kv_attention key's KV caches are fp8_e4m3 (key.program "e4m3"): kv_append
 * stores each k and v element rounded to e4m3 (to nearest even, saturating at +-448),
 * kv_attention reads them back exactly; else the caches have the key's dtype. */
static inline int hkc_kv_fp8(const hkc_kernel_key_t *key) {
  return (key->op == HK_OP_KV_APPEND || key->op == HK_OP_KV_ATTENTION) && key->program[0] == 'e';
}
/* Operands an ewchain program reads (1 + its largest operand number), or -1 when it is
 * malformed (see hkc_kernel_key_t.program). */
int hkc_ew_program_operands(const char *program);

/* Launch extents (extent.c; format 1.6, pack_format.h "Launch extents"): for a launch of the
 * kernel of `key` with args[0, n_args) -- the op ABI's as lower.c makes them, then the
 * variant's TMA tensor maps, then its scratch and semaphores -- out_bytes[i] = the bytes the
 * kernel may read or write of the tensor argument i points at (elements x the key's dtype,
 * x 4 for the ABI's i32 tensors), 0 for every argument that is not a tensor. Returns 0, or -1
 * when the arguments are not those the key's ABI takes (an argument of another kind, a size
 * below 1, a count that differs). libhkrt derives the same numbers from the arguments alone
 * (loader/src/extent.c); the pack writer stores these and checks them against the tensors. */
int hkc_launch_extents(const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                       uint64_t out_bytes[HKC_MAX_ARGS]);

/* Canonical symbol name for a key: "hk_<op>_<dtype>[_<flags>]". Writes at most size bytes. */
void hkc_kernel_key_name(const hkc_kernel_key_t *key, char *out, size_t size);
int hkc_kernel_key_equal(const hkc_kernel_key_t *a, const hkc_kernel_key_t *b);

/* ---- memory plan and dependencies ------------------------------------------------ */
#define HKC_ARENA_ALIGN 256 /* GPU-friendly alignment for every intermediate */
_Static_assert(HKC_ARENA_ALIGN % HK_SCRATCH_UNIT == 0, "scratch offsets are whole format units");

/* What a node's launch needs besides its tensors (format 1.3, SCRATCH and SEMAPHORE
 * arguments): scratch bytes that are its own while it runs (a split GEMM's f32 partial sums),
 * and u32 counters that are zero when it starts and that it leaves at zero. The kernel's
 * variant says how much (codegen.h, hkc_gpu_launch_workspace); the memory plan places both. */
typedef struct hkc_node_workspace {
  uint64_t scratch_bytes;  /* in: 0 = none */
  uint32_t counters;       /* in: 0 = none */
  uint64_t scratch_offset; /* out: in the arena, a multiple of HKC_ARENA_ALIGN (HK_PLACEMENT_NONE: none) */
  uint32_t first_counter;  /* out: its counters are [first_counter, + counters) of the graph's */
} hkc_node_workspace_t;

/* Assigns each INTERMEDIATE tensor an offset in one arena by liveness (tensors whose
 * lifetimes do not overlap may share bytes). out_offsets[t] = HK_PLACEMENT_NONE for
 * application-bound tensors. nodes (NULL: none needs workspace; else one entry per spec
 * node): each node's scratch gets arena bytes alive during that node only (shared with
 * tensors and other scratch not alive then), and its counters a range of the graph's that no
 * other node's overlaps (nodes may run at the same time); *out_counters = the graph's total.
 * Returns 0, or -1 (OOM; more counters than the format allows, reported). */
int hkc_plan_memory(const hkc_spec_t *spec, int64_t batch, hkc_node_workspace_t *nodes, uint64_t *out_offsets,
                    uint64_t *out_arena_bytes, uint32_t *out_counters);
/* Dependencies of every node on earlier nodes: read-after-write, and write-after-
 * read/write on arena bytes reused under the plan (a node's scratch counts as bytes it writes;
 * nodes as given to hkc_plan_memory, may be NULL); edges implied by others dropped.
 * Node j waits for list[start[j] .. start[j+1]). Returns 0 / -1 (OOM). */
typedef struct hkc_deps {
  uint32_t *start; /* n_nodes + 1 entries */
  uint32_t *list;
} hkc_deps_t;
int hkc_plan_deps(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets, const hkc_node_workspace_t *nodes,
                  hkc_deps_t *out);
void hkc_deps_free(hkc_deps_t *deps);
/* Appends a node's SCRATCH and SEMAPHORE arguments (in that order) after args[0, n_args)
 * when it has workspace (ws->scratch_bytes > 0; then counters > 0 too, placed by
 * hkc_plan_memory), as its kernel takes them last; returns the new count (n_args when none).
 * max_args leaves room for both (HKC_MAX_ARGS does for every kernel ABI). */
uint32_t hkc_plan_workspace_args(const hkc_node_workspace_t *ws, hkc_arg_t *args, uint32_t n_args, uint32_t max_args);

#endif /* HKC_LOWER_H */
