/* SPDX-License-Identifier: Apache-2.0 */
/*
 * extent.c -- launch extents: the bytes a launch of a kernel may read or write of each tensor
 * its arguments point at (format 1.6, the EXTENTS section; pack_format.h, "Launch extents").
 *
 * Computed from the kernel's key -- the compile-time choices that decide which arguments the
 * kernel takes and reads (lower.h's ABI: a dual gemm's B2, a rope or norm epilogue, a masked
 * attention, rope's and embedding's ctx) -- and from the launch's sizes, one function per op
 * kind, in the terms of lower.c's arguments: "this launch touches at most N elements of
 * argument i". The variants append only TMA tensor maps, scratch and semaphores (variant.h),
 * which have rules of their own (0 here). libhkrt derives the same numbers from the launch's
 * arguments alone (loader/src/extent.c) and refuses a pack where the two differ or a number
 * exceeds its tensor, so the formulas here and there must stay the same.
 */
#include <string.h>

#include "lower/lower.h"

typedef struct ext {
  const hkc_arg_t *args;
  uint32_t n;   /* the op ABI's arguments */
  int ok;       /* every argument read was of the kind the key implies */
  uint64_t *elems;
  uint8_t *esize; /* bytes per element of a tensor argument not of the key's dtype (i32: 4, the
                     dequant's q: 1, scales: 4); 0: the key's */
} ext_t;

/* Saturating: a count that does not fit is UINT64_MAX, which no tensor holds. */
static uint64_t mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
static uint64_t add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
static uint64_t min_u(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Size argument i: an I64 of at least lo (else the launch is not one lower.c makes). */
static uint64_t size_arg(ext_t *e, uint32_t i, int64_t lo) {
  if (i >= e->n || e->args[i].kind != HK_ARG_I64 || e->args[i].i < lo) {
    e->ok = 0;
    return 1;
  }
  return (uint64_t)e->args[i].i;
}

/* Tensor argument i (TENSOR, or NULL where optional) touches `elems` elements. */
static void touch(ext_t *e, uint32_t i, uint64_t elems, int optional) {
  if (i >= e->n || (e->args[i].kind != HK_ARG_TENSOR && (!optional || e->args[i].kind != HK_ARG_NULL))) {
    e->ok = 0;
    return;
  }
  if (e->args[i].kind == HK_ARG_TENSOR) e->elems[i] = elems;
}

static void touch_sized(ext_t *e, uint32_t i, uint64_t elems, int optional, uint8_t esize) {
  touch(e, i, elems, optional);
  if (i < e->n) e->esize[i] = esize;
}
static void touch_i32(ext_t *e, uint32_t i, uint64_t elems, int optional) { touch_sized(e, i, elems, optional, 4); }

static uint32_t gemm(const hkc_kernel_key_t *key, ext_t *e) {
  const uint64_t m = size_arg(e, HKC_GEMM_ARG_M, 1), n = size_arg(e, HKC_GEMM_ARG_N, 1),
                 k = size_arg(e, HKC_GEMM_ARG_K, 1);
  touch(e, HKC_GEMM_ARG_A, mul(m, k), 0);
  touch(e, HKC_GEMM_ARG_B, mul(k, n), 0);
  touch(e, HKC_GEMM_ARG_BIAS, n, 1);
  touch(e, HKC_GEMM_ARG_RESIDUAL, mul(m, n), 1);
  touch(e, HKC_GEMM_ARG_C, mul(m, n), 0);
  touch(e, HKC_GEMM_ARG_MUL, mul(m, n), 1);
  uint32_t end = HKC_GEMM_N_ARGS;
  if (key->dual) {
    touch(e, HKC_GEMM_ARG_B2, mul(k, n), 0);
    end = HKC_GEMM_N_ARGS_DUAL;
  } else if (key->rope) { /* the rotation touches C's columns only */
    size_arg(e, HKC_GEMM_ARG_ROPE_SEQ, 1);
    if (size_arg(e, HKC_GEMM_ARG_ROPE_COLS, 0) > n) e->ok = 0;
    if (HKC_GEMM_ARG_ROPE_THETA >= e->n || e->args[HKC_GEMM_ARG_ROPE_THETA].kind != HK_ARG_F32) e->ok = 0;
    end = HKC_GEMM_N_ARGS_ROPE;
  } else if (key->norm_c) {
    touch(e, HKC_GEMM_ARG_LN_GAMMA, n, 0);
    touch(e, HKC_GEMM_ARG_LN_BETA, n, 1);
    touch(e, HKC_GEMM_ARG_LN_SUM, mul(m, n), 1);
    end = HKC_GEMM_N_ARGS_LN;
  }
  if (key->norm_a) { /* gamma [K], eps */
    const uint32_t at = hkc_gemm_norm_arg(key->dual, key->rope);
    touch(e, at, k, 0);
    end = at + 2;
  }
  if (hkc_gemm_quant_b(key)) { /* 8-bit B (and B2), their f32 scales in blocks over B as stored */
    const uint32_t at = end;
    const uint64_t rows = size_arg(e, at + HKC_GEMM_QB_ROWS, 1), srows = size_arg(e, at + HKC_GEMM_QB_SCALE_ROWS, 1),
                   scols = size_arg(e, at + HKC_GEMM_QB_SCALE_COLS, 1),
                   brows = size_arg(e, at + HKC_GEMM_QB_BLOCK_ROWS, 1), bcols = size_arg(e, at + HKC_GEMM_QB_BLOCK_COLS, 1);
    const uint64_t cols = rows == k ? n : k;
    if ((rows != k && rows != n) || (rows - 1) / brows >= srows || (cols - 1) / bcols >= scols) e->ok = 0;
    touch_sized(e, HKC_GEMM_ARG_B, mul(k, n), 0, 1);
    if (key->dual) touch_sized(e, HKC_GEMM_ARG_B2, mul(k, n), 0, 1);
    touch_sized(e, at + HKC_GEMM_QB_SCALE, mul(srows, scols), 0, 4);
    touch_sized(e, at + HKC_GEMM_QB_SCALE2, mul(srows, scols), !key->dual, 4);
    if (!key->dual && at + HKC_GEMM_QB_SCALE2 < e->n && e->args[at + HKC_GEMM_QB_SCALE2].kind != HK_ARG_NULL) e->ok = 0;
    end = at + HKC_GEMM_QB_N_ARGS;
  }
  return end;
}

static uint32_t binary(ext_t *e) {
  const uint64_t n = size_arg(e, HKC_BINARY_ARG_N, 1);
  touch(e, HKC_BINARY_ARG_A, min_u(size_arg(e, HKC_BINARY_ARG_NA, 1), n), 0); /* a[i % na], i < n */
  touch(e, HKC_BINARY_ARG_B, min_u(size_arg(e, HKC_BINARY_ARG_NB, 1), n), 0);
  touch(e, HKC_BINARY_ARG_OUT, n, 0);
  return HKC_BINARY_N_ARGS;
}

static uint32_t unary(ext_t *e) {
  const uint64_t n = size_arg(e, HKC_UNARY_ARG_N, 1);
  touch(e, HKC_UNARY_ARG_X, n, 0);
  touch(e, HKC_UNARY_ARG_OUT, n, 0);
  return HKC_UNARY_N_ARGS;
}

static uint32_t norm_rows(hk_op_t op, ext_t *e) {
  if (op == HK_OP_SOFTMAX) {
    const uint64_t rc = mul(size_arg(e, HKC_SOFTMAX_ARG_ROWS, 1), size_arg(e, HKC_SOFTMAX_ARG_COLS, 1));
    touch(e, HKC_SOFTMAX_ARG_X, rc, 0);
    touch(e, HKC_SOFTMAX_ARG_OUT, rc, 0);
    return HKC_SOFTMAX_N_ARGS;
  }
  const int ln = op == HK_OP_LAYERNORM;
  const uint32_t rows = ln ? HKC_LAYERNORM_ARG_ROWS : HKC_RMSNORM_ARG_ROWS;
  const uint32_t cols_at = ln ? HKC_LAYERNORM_ARG_COLS : HKC_RMSNORM_ARG_COLS;
  const uint64_t cols = size_arg(e, cols_at, 1), rc = mul(size_arg(e, rows, 1), cols);
  touch(e, ln ? HKC_LAYERNORM_ARG_X : HKC_RMSNORM_ARG_X, rc, 0);
  touch(e, ln ? HKC_LAYERNORM_ARG_GAMMA : HKC_RMSNORM_ARG_GAMMA, cols, 0);
  if (ln) touch(e, HKC_LAYERNORM_ARG_BETA, cols, 0);
  touch(e, ln ? HKC_LAYERNORM_ARG_OUT : HKC_RMSNORM_ARG_OUT, rc, 0);
  touch(e, ln ? HKC_LAYERNORM_ARG_ADD : HKC_RMSNORM_ARG_ADD, rc, 1);
  touch(e, ln ? HKC_LAYERNORM_ARG_SUM : HKC_RMSNORM_ARG_SUM, rc, 1);
  return ln ? HKC_LAYERNORM_N_ARGS : HKC_RMSNORM_N_ARGS;
}

static uint32_t attention(const hkc_kernel_key_t *key, ext_t *e) {
  const uint64_t batch = size_arg(e, HKC_ATTENTION_ARG_BATCH, 1), seq_q = size_arg(e, HKC_ATTENTION_ARG_SEQ_Q, 1),
                 seq_kv = size_arg(e, HKC_ATTENTION_ARG_SEQ_KV, 1), heads = size_arg(e, HKC_ATTENTION_ARG_HEADS, 1),
                 kv_heads = size_arg(e, HKC_ATTENTION_ARG_KV_HEADS, 1), dh = size_arg(e, HKC_ATTENTION_ARG_DH, 1),
                 ld_q = size_arg(e, HKC_ATTENTION_ARG_LD_Q, 1), ld_kv = size_arg(e, HKC_ATTENTION_ARG_LD_KV, 1);
  if (heads % kv_heads != 0) e->ok = 0;
  /* row r starts at r * ld; head h reads columns col + h * dh .. + dh (kv head h / group) */
  touch(e, HKC_ATTENTION_ARG_Q,
        add(mul(mul(batch, seq_q) - 1, ld_q), add(size_arg(e, HKC_ATTENTION_ARG_Q_COL, 0), mul(heads, dh))), 0);
  touch(e, HKC_ATTENTION_ARG_K,
        add(mul(mul(batch, seq_kv) - 1, ld_kv), add(size_arg(e, HKC_ATTENTION_ARG_K_COL, 0), mul(kv_heads, dh))), 0);
  touch(e, HKC_ATTENTION_ARG_V,
        add(mul(mul(batch, seq_kv) - 1, ld_kv), add(size_arg(e, HKC_ATTENTION_ARG_V_COL, 0), mul(kv_heads, dh))), 0);
  touch(e, HKC_ATTENTION_ARG_OUT, mul(mul(batch, seq_q), mul(heads, dh)), 0);
  if (!key->has_lengths && !key->has_mask) return HKC_ATTENTION_N_ARGS;
  touch_i32(e, HKC_ATTENTION_ARG_LENGTHS, batch, 1);
  const uint64_t mask_heads = size_arg(e, HKC_ATTENTION_ARG_MASK_HEADS, 0);
  if (HKC_ATTENTION_ARG_MASK < e->n && e->args[HKC_ATTENTION_ARG_MASK].kind == HK_ARG_TENSOR &&
      mask_heads != 1 && mask_heads != heads)
    e->ok = 0;
  touch(e, HKC_ATTENTION_ARG_MASK, mul(mul(batch, mask_heads), mul(seq_q, seq_kv)), 1);
  return HKC_ATTENTION_MASKED_N_ARGS;
}

static uint32_t rope(const hkc_kernel_key_t *key, ext_t *e) {
  const uint64_t rows = size_arg(e, HKC_ROPE_ARG_ROWS, 1), heads = size_arg(e, HKC_ROPE_ARG_HEADS, 1),
                 dh = size_arg(e, HKC_ROPE_ARG_DH, 1), pass = size_arg(e, HKC_ROPE_ARG_PASS_HEADS, 0);
  size_arg(e, HKC_ROPE_ARG_SEQ, 1);
  if (dh % 2 != 0) e->ok = 0;
  const uint64_t x = mul(rows, mul(add(heads, pass), dh));
  touch(e, HKC_ROPE_ARG_X, x, 0);
  touch(e, HKC_ROPE_ARG_OUT, x, 0);
  if (key->has_ctx) touch_i32(e, hkc_rope_ctx_arg(), rows, 0);
  return hkc_rope_scaling_arg(key->has_ctx) + (key->rope_scaling ? (uint32_t)HKC_ROPE_SCALING_N_ARGS : 0u);
}

static uint32_t ewchain(const hkc_kernel_key_t *key, ext_t *e) {
  const int n_in = hkc_ew_program_operands(key->program);
  const uint64_t n = size_arg(e, HKC_EWCHAIN_ARG_N, 1);
  if (n_in < 1) {
    e->ok = 0;
    return 0;
  }
  touch(e, HKC_EWCHAIN_ARG_OUT, n, 0);
  for (int j = 0; j < n_in; j++) /* in_j[i % n_j], i < n */
    touch(e, HKC_EWCHAIN_ARG_IN(j), min_u(size_arg(e, HKC_EWCHAIN_ARG_N_IN(j), 1), n), 0);
  return HKC_EWCHAIN_ARG_IN(n_in);
}

static uint32_t embedding(const hkc_kernel_key_t *key, ext_t *e) {
  const uint64_t tokens = size_arg(e, HKC_EMBEDDING_ARG_TOKENS, 1), seq = size_arg(e, HKC_EMBEDDING_ARG_SEQ, 1),
                 vocab = size_arg(e, HKC_EMBEDDING_ARG_VOCAB, 1), hidden = size_arg(e, HKC_EMBEDDING_ARG_HIDDEN, 1);
  touch(e, HKC_EMBEDDING_ARG_TABLE, mul(vocab, hidden), 0);
  touch_i32(e, HKC_EMBEDDING_ARG_IDS, tokens, 0);
  touch(e, HKC_EMBEDDING_ARG_OUT, mul(tokens, hidden), 0);
  if (!key->has_ctx) { /* row t % seq of pos */
    touch(e, HKC_EMBEDDING_ARG_POS, mul(min_u(seq, tokens), hidden), 1);
    return HKC_EMBEDDING_N_ARGS;
  }
  /* row clamp(ctx[t] - 1, 0, max_pos - 1) of pos */
  touch(e, HKC_EMBEDDING_ARG_POS, mul(size_arg(e, HKC_EMBEDDING_ARG_MAX_POS, 1), hidden), 0);
  touch_i32(e, HKC_EMBEDDING_ARG_CTX, tokens, 0);
  return HKC_EMBEDDING_N_ARGS_CTX;
}

static uint32_t kv(const hkc_kernel_key_t *key, ext_t *e) {
  const int append = key->op == HK_OP_KV_APPEND;
  const uint8_t cache_esize = hkc_kv_fp8(key) ? 1 : 0; /* FP8 caches: a byte each; else the key's */
  const uint64_t rows = size_arg(e, HKC_KV_APPEND_ARG_ROWS, 1), heads = size_arg(e, HKC_KV_APPEND_ARG_HEADS, 1),
                 kv_heads = size_arg(e, HKC_KV_APPEND_ARG_KV_HEADS, 1), dh = size_arg(e, HKC_KV_APPEND_ARG_DH, 1),
                 layer = size_arg(e, HKC_KV_APPEND_ARG_LAYER, 0), slots = size_arg(e, HKC_KV_APPEND_ARG_SLOTS, 1),
                 max_seq = size_arg(e, HKC_KV_APPEND_ARG_MAX_SEQ, 1);
  if (heads % kv_heads != 0) e->ok = 0;
  if (!append) size_arg(e, HKC_KV_ATTENTION_ARG_WINDOW, 0);
  /* caches [layers, slots, max_seq, kv_heads dh]: the launch reaches layer `layer` */
  const uint64_t cache = mul(mul(layer + 1, slots), mul(max_seq, mul(kv_heads, dh)));
  const int packed = append || key->append; /* kv_append's rows, or a kv_attention that folds one in */
  touch(e, HKC_KV_APPEND_ARG_QKV, mul(rows, mul(packed ? add(heads, mul(2, kv_heads)) : heads, dh)), 0);
  touch_sized(e, HKC_KV_APPEND_ARG_K_CACHE, cache, 0, cache_esize);
  touch_sized(e, HKC_KV_APPEND_ARG_V_CACHE, cache, 0, cache_esize);
  touch_i32(e, HKC_KV_APPEND_ARG_CTX, rows, 0);
  touch_i32(e, HKC_KV_APPEND_ARG_SLOT, rows, 0);
  touch(e, HKC_KV_APPEND_ARG_OUT, mul(rows, mul(heads, dh)), 0);
  if (!append && key->append) size_arg(e, HKC_KV_ATTENTION_ARG_APPEND, 1);
  if (!key->rope) return append ? HKC_KV_APPEND_N_ARGS : key->append ? HKC_KV_ATTENTION_ARG_THETA : HKC_KV_ATTENTION_N_ARGS;
  if (dh % 2 != 0) e->ok = 0; /* a folded rope: theta, then a scaled rope's four numbers */
  return (append ? HKC_KV_APPEND_ROPE_N_ARGS : HKC_KV_ATTENTION_ROPE_N_ARGS) +
         (key->rope_scaling ? (uint32_t)HKC_ROPE_SCALING_N_ARGS : 0u);
}

static uint32_t take_rows(ext_t *e) {
  const uint64_t x_rows = size_arg(e, HKC_TAKE_ROWS_ARG_X_ROWS, 1), n_out = size_arg(e, HKC_TAKE_ROWS_ARG_N_OUT, 1),
                 width = size_arg(e, HKC_TAKE_ROWS_ARG_WIDTH, 1);
  touch(e, HKC_TAKE_ROWS_ARG_X, mul(x_rows, width), 0);
  touch_i32(e, HKC_TAKE_ROWS_ARG_ROWS, n_out, 0);
  touch(e, HKC_TAKE_ROWS_ARG_OUT, mul(n_out, width), 0);
  return HKC_TAKE_ROWS_N_ARGS;
}

static uint32_t dequant(ext_t *e) {
  const uint64_t rows = size_arg(e, HKC_DEQUANT_ARG_ROWS, 1), cols = size_arg(e, HKC_DEQUANT_ARG_COLS, 1),
                 srows = size_arg(e, HKC_DEQUANT_ARG_SCALE_ROWS, 1), scols = size_arg(e, HKC_DEQUANT_ARG_SCALE_COLS, 1),
                 brows = size_arg(e, HKC_DEQUANT_ARG_BLOCK_ROWS, 1), bcols = size_arg(e, HKC_DEQUANT_ARG_BLOCK_COLS, 1);
  if ((rows - 1) / brows >= srows || (cols - 1) / bcols >= scols) e->ok = 0;
  touch_sized(e, HKC_DEQUANT_ARG_Q, mul(rows, cols), 0, 1);
  touch_sized(e, HKC_DEQUANT_ARG_SCALE, mul(srows, scols), 0, 4);
  touch(e, HKC_DEQUANT_ARG_OUT, mul(rows, cols), 0);
  return HKC_DEQUANT_N_ARGS;
}

static uint32_t argmax(ext_t *e) {
  const uint64_t rows = size_arg(e, HKC_ARGMAX_ARG_ROWS, 1), cols = size_arg(e, HKC_ARGMAX_ARG_COLS, 1);
  touch(e, HKC_ARGMAX_ARG_X, mul(rows, cols), 0);
  touch_i32(e, HKC_ARGMAX_ARG_OUT, rows, 0);
  return HKC_ARGMAX_N_ARGS;
}

static uint32_t sample(ext_t *e) {
  const uint64_t rows = size_arg(e, HKC_SAMPLE_ARG_ROWS, 1), cols = size_arg(e, HKC_SAMPLE_ARG_COLS, 1);
  if (cols > INT32_MAX) e->ok = 0;
  touch(e, HKC_SAMPLE_ARG_X, mul(rows, cols), 0);
  touch_i32(e, HKC_SAMPLE_ARG_PARAMS, mul(rows, HK_SAMPLE_PARAMS), 0);
  touch_i32(e, HKC_SAMPLE_ARG_OUT, rows, 0);
  return HKC_SAMPLE_N_ARGS;
}

static uint32_t all_reduce(ext_t *e) {
  const uint64_t n = size_arg(e, HKC_ALL_REDUCE_ARG_N, 1);
  touch(e, HKC_ALL_REDUCE_ARG_IN, n, 0);
  touch(e, HKC_ALL_REDUCE_ARG_OUT, n, 0);
  return HKC_ALL_REDUCE_N_ARGS;
}

static uint32_t all_gather(ext_t *e) {
  const uint64_t rows = size_arg(e, HKC_ALL_GATHER_ARG_ROWS, 1), cols = size_arg(e, HKC_ALL_GATHER_ARG_COLS, 1),
                 ranks = size_arg(e, HKC_ALL_GATHER_ARG_RANKS, 1);
  if (ranks > HK_MAX_TENSOR_RANKS) e->ok = 0;
  touch(e, HKC_ALL_GATHER_ARG_IN, mul(rows, cols), 0);
  touch(e, HKC_ALL_GATHER_ARG_OUT, mul(mul(rows, cols), ranks), 0);
  return HKC_ALL_GATHER_N_ARGS;
}

int hkc_launch_extents(const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                       uint64_t out_bytes[HKC_MAX_ARGS]) {
  uint64_t elems[HKC_MAX_ARGS] = {0};
  uint8_t esizes[HKC_MAX_ARGS] = {0};
  /* the variant's arguments follow the ABI's: tensor maps, then scratch and semaphores */
  uint32_t n = n_args;
  if (n > HKC_MAX_ARGS) return -1;
  if (n >= 2 && args[n - 2].kind == HK_ARG_SCRATCH && args[n - 1].kind == HK_ARG_SEMAPHORE) n -= 2;
  while (n > 0 && args[n - 1].kind == HK_ARG_TMAP) n--;
  ext_t e = {args, n, 1, elems, esizes};
  uint32_t abi = 0;
  switch (key->op) {
  case HK_OP_GEMM: abi = gemm(key, &e); break;
  case HK_OP_ADD:
  case HK_OP_MUL: abi = binary(&e); break;
  case HK_OP_RELU:
  case HK_OP_GELU:
  case HK_OP_SILU:
  case HK_OP_GELU_TANH:
  case HK_OP_TANH: abi = unary(&e); break;
  case HK_OP_LAYERNORM:
  case HK_OP_RMSNORM:
  case HK_OP_SOFTMAX: abi = norm_rows(key->op, &e); break;
  case HK_OP_ATTENTION: abi = attention(key, &e); break;
  case HK_OP_ROPE: abi = rope(key, &e); break;
  case HK_OP_EWCHAIN: abi = ewchain(key, &e); break;
  case HK_OP_EMBEDDING: abi = embedding(key, &e); break;
  case HK_OP_KV_APPEND:
  case HK_OP_KV_ATTENTION: abi = kv(key, &e); break;
  case HK_OP_TAKE_ROWS: abi = take_rows(&e); break;
  case HK_OP_ARGMAX: abi = argmax(&e); break;
  case HK_OP_SAMPLE: abi = sample(&e); break;
  case HK_OP_DEQUANT: abi = dequant(&e); break;
  case HK_OP_ALL_REDUCE: abi = all_reduce(&e); break;
  case HK_OP_ALL_GATHER: abi = all_gather(&e); break;
  default: return -1;
  }
  if (!e.ok || abi != n) return -1;
  const uint64_t esize = key->dtype == HK_DTYPE_F32 ? 4 : 2;
  for (uint32_t a = 0; a < n_args; a++)
    out_bytes[a] = a < n && args[a].kind == HK_ARG_TENSOR ? mul(elems[a], esizes[a] ? esizes[a] : esize) : 0;
  return 0;
}
