/* SPDX-License-Identifier: Apache-2.0 */
/* The simple GPU kernels (templates/gpu/<op>.hip): portable, untuned, correct for every key
 * of their op on every GPU arch. They end the GPU part of the registry, one entry per
 * template, all named "simple", so every valid key on a GPU target resolves to a variant.
 *
 * Their tile sizes and block sizes are emitted into the generated source as macros
 * (simple_defines), and simple_launch reads the same table, so the kernels and their
 * launches cannot disagree. They are safe values for every arch (blocks are multiples of 64
 * threads, static shared memory below 48 KiB, no spills). Block size = max_block of the
 * kernel (its __launch_bounds__): gemm 256, element-wise (and ewchain) 256, norms and
 * softmax 256, attention 128, rope 256, embedding 128, kv_append 128, kv_attention 128,
 * take_rows 256, argmax 256, sample 256 (its radix selects scan 256 bins, a thread a bin). */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"

typedef struct simple_params {
  int threads;                   /* HK_THREADS: threads per block (a multiple of 64) */
  int tile_m, tile_n, tile_k;    /* gemm: C tile and K step (HK_TILE_M/N/K) */
  int gemm_tx;                   /* gemm: threads along N (HK_GEMM_TX) */
  int ew_items;                  /* element-wise: elements per thread the grid is sized for */
  int attn_bq, attn_bkv, attn_dc; /* attention: query rows, keys per tile, head-dim chunk */
  int kv_rd, kv_dc;              /* kv_attention: output columns per thread, q's staged chunk */
} simple_params_t;

static const simple_params_t k_gemm = {.threads = 256, .tile_m = 64, .tile_n = 64, .tile_k = 16, .gemm_tx = 16};
static const simple_params_t k_elementwise = {.threads = 256, .ew_items = 4};
static const simple_params_t k_row = {.threads = 256};
static const simple_params_t k_attention = {.threads = 128, .attn_bq = 16, .attn_bkv = 32, .attn_dc = 128};
/* rope: HK_ROPE_VEC rotation pairs per thread when dh/2 is a multiple of it (else 1);
 * blocks per CU the launch aims at (each block then walks a strided set of rows) */
static const simple_params_t k_rope = {.threads = 256};
/* embedding: one token's row per block, threads over the hidden dim */
static const simple_params_t k_embedding = {.threads = 128};
/* take_rows, dequant: HK_THREADS columns of one row per block, one element per thread */
static const simple_params_t k_row_chunk = {.threads = 256};
/* kv_append: HK_THREADS x SIMPLE_KV_VEC columns of one row per block where the key's rows and
 * heads allow 16-byte vectors (align 8: a Llama q|k|v row of 3072 is three blocks), else
 * HK_THREADS columns */
static const simple_params_t k_kv_append = {.threads = 128};
#define SIMPLE_KV_VEC(key) ((key)->align >= 8 ? 8 : 1)
/* kv_attention: one (row, q head) per block, key tiles of HK_THREADS; head dims up to
 * threads x kv_rd (256) in one pass over the keys, q staged whole up to kv_dc columns */
static const simple_params_t k_kv_attention = {.threads = 128, .kv_rd = 2, .kv_dc = 256};
#define SIMPLE_ROPE_VEC 4
#define SIMPLE_ROPE_BLOCKS_PER_CU 16
#define SIMPLE_ROPE_HEADS 8 /* heads per item at most (a power of two): one sin / cos for all */

/* grid.x limit on both vendors (2^31 - 1); kernels stride over blocks beyond it. */
#define SIMPLE_MAX_GRID_X 0x7fffffffLL

static const simple_params_t *simple_params(hk_op_t op) {
  switch (op) {
  case HK_OP_GEMM: return &k_gemm;
  case HK_OP_ADD:
  case HK_OP_MUL:
  case HK_OP_RELU:
  case HK_OP_GELU:
  case HK_OP_GELU_TANH:
  case HK_OP_TANH:
  case HK_OP_SILU:
  case HK_OP_EWCHAIN: return &k_elementwise;
  case HK_OP_ROPE: return &k_rope;
  case HK_OP_EMBEDDING: return &k_embedding;
  case HK_OP_LAYERNORM:
  case HK_OP_RMSNORM:
  case HK_OP_SOFTMAX: return &k_row;
  case HK_OP_ATTENTION: return &k_attention;
  case HK_OP_KV_APPEND: return &k_kv_append;
  case HK_OP_TAKE_ROWS:
  case HK_OP_DEQUANT: return &k_row_chunk;
  case HK_OP_KV_ATTENTION: return &k_kv_attention;
  case HK_OP_ARGMAX:
  case HK_OP_SAMPLE: return &k_row;
  default: return NULL;
  }
}

/* HK_THREADS, the op's tile sizes, and the ABI tails a key adds (rope, embedding: HK_HAS_CTX;
 * rope: HK_ROPE_SCALING, HKC_ROPE_SCALING_*). */
static void simple_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  (void)arch;
  const simple_params_t *p = simple_params(key->op);
  size_t len = strlen(out);
  if (!p || len >= size) return;
  len += (size_t)snprintf(out + len, size - len, "#define HK_THREADS %d\n", p->threads);
  if (len >= size) return;
  if (key->op == HK_OP_GEMM)
    snprintf(out + len, size - len, "#define HK_TILE_M %d\n#define HK_TILE_N %d\n#define HK_TILE_K %d\n#define HK_GEMM_TX %d\n",
             p->tile_m, p->tile_n, p->tile_k, p->gemm_tx);
  else if (key->op == HK_OP_ATTENTION)
    snprintf(out + len, size - len, "#define HK_ATTN_BQ %d\n#define HK_ATTN_BKV %d\n#define HK_ATTN_DC %d\n", p->attn_bq,
             p->attn_bkv, p->attn_dc);
  else if (key->op == HK_OP_ROPE)
    snprintf(out + len, size - len,
             "#define HK_ROPE_VEC %d\n#define HK_ROPE_HEADS %d\n#define HK_ROPE_UNITS %d\n#define HK_HAS_CTX %d\n"
             "#define HK_ROPE_SCALING %d\n",
             SIMPLE_ROPE_VEC, SIMPLE_ROPE_HEADS, arch->compute_units ? arch->compute_units : 80, key->has_ctx ? 1 : 0,
             key->rope_scaling);
  else if (key->op == HK_OP_EMBEDDING)
    snprintf(out + len, size - len, "#define HK_HAS_CTX %d\n#define HK_ROW_VEC %d\n", key->has_ctx ? 1 : 0,
             hkc_variant_row_vec(key));
  else if (key->op == HK_OP_KV_APPEND) /* HK_ROPE (a folded rope) is codegen's */
    snprintf(out + len, size - len, "#define HK_KV_VEC %d\n#define HK_ROPE_SCALING %d\n", SIMPLE_KV_VEC(key),
             key->rope_scaling);
  else if (key->op == HK_OP_KV_ATTENTION) /* HK_KV_APPEND and HK_ROPE (a folded append's) are codegen's */
    snprintf(out + len, size - len, "#define HK_KV_RD %d\n#define HK_KV_DC %d\n#define HK_ROPE_SCALING %d\n", p->kv_rd,
             p->kv_dc, key->rope_scaling);
  else if (key->op == HK_OP_ARGMAX || key->op == HK_OP_SAMPLE) /* row_best.h: 16-byte loads where rows allow */
    snprintf(out + len, size - len, "#define HK_ROW_VEC %d\n", hkc_variant_row_vec(key));
  else if (key->op == HK_OP_DEQUANT)
    snprintf(out + len, size - len, "#define HK_DQ_FP8 %d\n", !strcmp(key->program, "e4m3"));
}

/* Blocks are 1-D (block.x = HK_THREADS of the op) and so is the grid (grid.x only: y and
 * z are limited to 65535). What a block is, per op:
 *   gemm        an HK_TILE_M x HK_TILE_N tile of C: ceil(M/TM) * ceil(N/TN) blocks
 *   add..silu, ewchain   HK_THREADS * ew_items elements (grid-stride loop inside)
 *   norms, softmax   one row
 *   embedding   one token's row (HK_THREADS threads over the hidden dim)
 *   take_rows, dequant   HK_THREADS columns of one (output) row, a thread an element:
 *               rows x ceil(width / HK_THREADS) blocks
 *   kv_append   HK_THREADS x HK_KV_VEC columns of one row, a thread HK_KV_VEC elements:
 *               rows x ceil(width / (HK_THREADS x HK_KV_VEC)) blocks
 *   kv_attention   one (token row, q head): rows x heads blocks
 *   argmax, sample   one row
 *   attention   HK_ATTN_BQ query rows of one (batch, head)
 *   rope        HK_THREADS items (HK_ROPE_VEC pairs of HK_ROPE_HEADS heads of a row; then of one
 *               copied head), grid-stride beyond SIMPLE_ROPE_BLOCKS_PER_CU blocks per CU (rope.hip)
 * Every kernel strides over blocks beyond gridDim.x, so clamping grid.x to 2^31 - 1 keeps
 * it correct. At least one block; no dynamic shared memory (all of it is static). */
static void simple_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                          uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const simple_params_t *p = simple_params(key->op);
  int64_t blocks = 1;
  switch (p ? key->op : HK_OP_COUNT_) {
  case HK_OP_GEMM:
    blocks = hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_M), p->tile_m) *
             hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_N), p->tile_n);
    break;
  case HK_OP_ADD:
  case HK_OP_MUL:
    blocks = hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_BINARY_ARG_N), (int64_t)p->threads * p->ew_items);
    break;
  case HK_OP_RELU:
  case HK_OP_GELU:
  case HK_OP_GELU_TANH:
  case HK_OP_TANH:
  case HK_OP_SILU:
    blocks = hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_UNARY_ARG_N), (int64_t)p->threads * p->ew_items);
    break;
  case HK_OP_LAYERNORM: blocks = hkc_variant_arg_i64(args, n_args, HKC_LAYERNORM_ARG_ROWS); break;
  case HK_OP_RMSNORM: blocks = hkc_variant_arg_i64(args, n_args, HKC_RMSNORM_ARG_ROWS); break;
  case HK_OP_SOFTMAX: blocks = hkc_variant_arg_i64(args, n_args, HKC_SOFTMAX_ARG_ROWS); break;
  case HK_OP_ATTENTION:
    blocks = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH) *
             hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS) *
             hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q), p->attn_bq);
    break;
  case HK_OP_EWCHAIN:
    blocks = hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_EWCHAIN_ARG_N), (int64_t)p->threads * p->ew_items);
    break;
  case HK_OP_EMBEDDING: blocks = hkc_variant_arg_i64(args, n_args, HKC_EMBEDDING_ARG_TOKENS); break;
  case HK_OP_KV_APPEND: {
    const int64_t width = (hkc_variant_arg_i64(args, n_args, HKC_KV_APPEND_ARG_HEADS) +
                           2 * hkc_variant_arg_i64(args, n_args, HKC_KV_APPEND_ARG_KV_HEADS)) *
                          hkc_variant_arg_i64(args, n_args, HKC_KV_APPEND_ARG_DH);
    blocks = hkc_variant_arg_i64(args, n_args, HKC_KV_APPEND_ARG_ROWS) *
             hkc_variant_ceil_div(width, (int64_t)p->threads * SIMPLE_KV_VEC(key));
    break;
  }
  case HK_OP_KV_ATTENTION:
    blocks = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_ROWS) *
             hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_HEADS);
    break;
  case HK_OP_TAKE_ROWS:
    blocks = hkc_variant_arg_i64(args, n_args, HKC_TAKE_ROWS_ARG_N_OUT) *
             hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_TAKE_ROWS_ARG_WIDTH), p->threads);
    break;
  case HK_OP_DEQUANT:
    blocks = hkc_variant_arg_i64(args, n_args, HKC_DEQUANT_ARG_ROWS) *
             hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_DEQUANT_ARG_COLS), p->threads);
    break;
  case HK_OP_ARGMAX: blocks = hkc_variant_arg_i64(args, n_args, HKC_ARGMAX_ARG_ROWS); break;
  case HK_OP_SAMPLE: blocks = hkc_variant_arg_i64(args, n_args, HKC_SAMPLE_ARG_ROWS); break;
  case HK_OP_ROPE: {
    /* items (row, group of SIMPLE_ROPE_HEADS heads, vector of pairs) over HK_THREADS threads,
     * at most SIMPLE_ROPE_BLOCKS_PER_CU blocks per CU (the grid strides; templates/gpu/rope.hip) */
    const int64_t rows = hkc_variant_arg_i64(args, n_args, HKC_ROPE_ARG_ROWS),
                  heads = hkc_variant_arg_i64(args, n_args, HKC_ROPE_ARG_HEADS),
                  dh = hkc_variant_arg_i64(args, n_args, HKC_ROPE_ARG_DH),
                  pass = hkc_variant_arg_i64(args, n_args, HKC_ROPE_ARG_PASS_HEADS);
    const int64_t units = arch->compute_units ? arch->compute_units : 80;
    /* rope.hip's V: vectors of pairs where dh/2 allows and they fill a wave, else a pair a thread */
    const int64_t half = dh / 2,
                  vec = half % SIMPLE_ROPE_VEC == 0 && rows * heads * (half / SIMPLE_ROPE_VEC) >= units * p->threads
                            ? SIMPLE_ROPE_VEC
                            : 1;
    int64_t gh = SIMPLE_ROPE_HEADS; /* rope.hip's rope_group */
    while (gh > 1 && rows * hkc_variant_ceil_div(heads, gh) * (half / vec) < units * p->threads) gh >>= 1;
    /* rotation items, then the copy items of the pass heads (one head's vector of pairs each) */
    const int64_t items = rows * (hkc_variant_ceil_div(heads, gh) + pass) * (half / vec);
    const int64_t cap = units * SIMPLE_ROPE_BLOCKS_PER_CU;
    blocks = hkc_variant_ceil_div(items, p->threads);
    if (blocks > cap) blocks = cap;
    break;
  }
  default: break;
  }
  if (blocks < 1) blocks = 1;
  if (blocks > SIMPLE_MAX_GRID_X) blocks = SIMPLE_MAX_GRID_X;
  out_grid[0] = (uint32_t)blocks;
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = p ? (uint32_t)p->threads : 1;
  out_block[1] = out_block[2] = 1;
  *out_shared = 0;
}

/* Any dtype and epilogue activation the kernel ABI defines. */
static int simple_key_ok(const hkc_kernel_key_t *key) {
  return (unsigned)key->dtype < HK_DTYPE_FLOAT_COUNT && (unsigned)key->act < HK_ACT_COUNT_;
}

/* One entry per template: its ops; pdl 1 where the template's kernel begins with HK_PDL_ENTRY()
 * (prelude_cuda.h: programmatic dependent launches on sm_90 and later, variant.h's pdl). */
#define SIMPLE_ENTRY_INC(ident, path, pdl_, includes_, rope_, ops_test)                             \
  static int ident##_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {             \
    (void)arch;                                                                                      \
    const hk_op_t op = key->op;                                                                      \
    return simple_key_ok(key) && (ops_test);                                                         \
  }                                                                                                  \
  const hkc_variant_t hkc_variant_##ident = {                                                        \
      .name = "simple", .template_path = path, .portable = 1, .applies = ident##_applies,          \
      .defines = simple_defines, .launch = simple_launch, .pdl = pdl_, .includes = includes_, .rope = rope_}
#define SIMPLE_ENTRY_PDL(ident, path, pdl_, ops_test) SIMPLE_ENTRY_INC(ident, path, pdl_, NULL, 0, ops_test)
#define SIMPLE_ENTRY(ident, path, ops_test) SIMPLE_ENTRY_PDL(ident, path, 0, ops_test)

/* a rope's angles (rope, kv_append with a rope folded in, kv_attention with such an append folded in) */
static const char *const k_rope_includes[] = {"gpu/rope_freq.h", NULL};
/* argmax's scan of a row (argmax, and sample's greedy rows) */
static const char *const k_row_best_includes[] = {"gpu/row_best.h", NULL};

SIMPLE_ENTRY(simple_gemm, "gpu/gemm.hip", op == HK_OP_GEMM);
SIMPLE_ENTRY(simple_binary, "gpu/binary.hip", op == HK_OP_ADD || op == HK_OP_MUL);
SIMPLE_ENTRY(simple_unary, "gpu/unary.hip", op == HK_OP_RELU || op == HK_OP_GELU || op == HK_OP_SILU ||
                                                      op == HK_OP_GELU_TANH || op == HK_OP_TANH);
SIMPLE_ENTRY(simple_layernorm, "gpu/layernorm.hip", op == HK_OP_LAYERNORM);
SIMPLE_ENTRY_PDL(simple_rmsnorm, "gpu/rmsnorm.hip", 1, op == HK_OP_RMSNORM);
SIMPLE_ENTRY(simple_softmax, "gpu/softmax.hip", op == HK_OP_SOFTMAX);
SIMPLE_ENTRY(simple_attention, "gpu/attention.hip", op == HK_OP_ATTENTION);
SIMPLE_ENTRY_INC(simple_rope, "gpu/rope.hip", 1, k_rope_includes, 0,
                 op == HK_OP_ROPE && key->rope_scaling >= HKC_ROPE_SCALING_NONE &&
                     key->rope_scaling <= HKC_ROPE_SCALING_LLAMA3);
SIMPLE_ENTRY(simple_ewchain, "gpu/ewchain.hip", op == HK_OP_EWCHAIN);
SIMPLE_ENTRY_PDL(simple_embedding, "gpu/embedding.hip", 1, op == HK_OP_EMBEDDING);
SIMPLE_ENTRY_INC(simple_kv_append, "gpu/kv_append.hip", 1, k_rope_includes, 1, /* rope: a folded one */
                 op == HK_OP_KV_APPEND && key->rope_scaling >= HKC_ROPE_SCALING_NONE &&
                     key->rope_scaling <= HKC_ROPE_SCALING_LLAMA3);
SIMPLE_ENTRY_INC(simple_kv_attention, "gpu/kv_attention.hip", 1, k_rope_includes, 1, /* rope: a folded append's */
                 op == HK_OP_KV_ATTENTION && (!key->append || (!hkc_kv_fp8(key) &&
                                                               key->rope_scaling >= HKC_ROPE_SCALING_NONE &&
                                                               key->rope_scaling <= HKC_ROPE_SCALING_LLAMA3)));
SIMPLE_ENTRY_PDL(simple_take_rows, "gpu/take_rows.hip", 1, op == HK_OP_TAKE_ROWS);
SIMPLE_ENTRY_INC(simple_argmax, "gpu/argmax.hip", 1, k_row_best_includes, 0, op == HK_OP_ARGMAX);
SIMPLE_ENTRY_INC(simple_sample, "gpu/sample.hip", 1, k_row_best_includes, 0, op == HK_OP_SAMPLE);
SIMPLE_ENTRY(simple_dequant, "gpu/dequant.hip", op == HK_OP_DEQUANT);
