/* GPU code generation: one kernel key -> one HIP-dialect translation unit for an AMD
 * (hiprtc) or NVIDIA (nvrtc) target, from templates/gpu, plus its launch dimensions. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"
#include "util/util.h"

/* Default tile sizes and block sizes of the simple GPU kernels. They are emitted into
 * the generated source as macros, and hkc_gpu_launch_dims reads the same table, so the
 * kernels and their launches cannot disagree. The tuner will choose them later; these
 * are safe values for every arch (blocks are multiples of 64 threads, static shared
 * memory below 48 KiB, no spills). Block size = max_block of the kernel (its
 * __launch_bounds__): gemm 256, element-wise (and ewchain) 256, norms and softmax 256,
 * attention 128, rope 256. */
typedef struct gpu_params {
  int threads;                   /* HK_THREADS: threads per block (a multiple of 64) */
  int tile_m, tile_n, tile_k;    /* gemm: C tile and K step (HK_TILE_M/N/K) */
  int gemm_tx;                   /* gemm: threads along N (HK_GEMM_TX) */
  int ew_items;                  /* element-wise: elements per thread the grid is sized for */
  int attn_bq, attn_bkv, attn_dc; /* attention: query rows, keys per tile, head-dim chunk */
} gpu_params_t;

static const gpu_params_t k_gemm = {.threads = 256, .tile_m = 64, .tile_n = 64, .tile_k = 16, .gemm_tx = 16};
static const gpu_params_t k_elementwise = {.threads = 256, .ew_items = 4};
static const gpu_params_t k_row = {.threads = 256};
static const gpu_params_t k_attention = {.threads = 128, .attn_bq = 16, .attn_bkv = 32, .attn_dc = 128};
/* rope: HK_ROPE_VEC rotation pairs per thread when dh/2 is a multiple of it (else 1);
 * blocks per CU the launch aims at (each block then walks a strided set of rows) */
static const gpu_params_t k_rope = {.threads = 256};
#define GPU_ROPE_VEC 4
#define GPU_ROPE_BLOCKS_PER_CU 16

/* grid.x limit on both vendors (2^31 - 1); kernels stride over blocks beyond it. */
#define GPU_MAX_GRID_X 0x7fffffffLL

static const gpu_params_t *gpu_params(hk_op_t op) {
  switch (op) {
  case HK_OP_GEMM: return &k_gemm;
  case HK_OP_ADD:
  case HK_OP_MUL:
  case HK_OP_RELU:
  case HK_OP_GELU:
  case HK_OP_SILU:
  case HK_OP_EWCHAIN: return &k_elementwise;
  case HK_OP_ROPE: return &k_rope;
  case HK_OP_LAYERNORM:
  case HK_OP_RMSNORM:
  case HK_OP_SOFTMAX: return &k_row;
  case HK_OP_ATTENTION: return &k_attention;
  default: return NULL;
  }
}

static const char *gpu_template_path(hk_op_t op) {
  switch (op) {
  case HK_OP_GEMM: return "gpu/gemm.hip";
  case HK_OP_ADD:
  case HK_OP_MUL: return "gpu/binary.hip";
  case HK_OP_RELU:
  case HK_OP_GELU:
  case HK_OP_SILU: return "gpu/unary.hip";
  case HK_OP_LAYERNORM: return "gpu/layernorm.hip";
  case HK_OP_RMSNORM: return "gpu/rmsnorm.hip";
  case HK_OP_SOFTMAX: return "gpu/softmax.hip";
  case HK_OP_ATTENTION: return "gpu/attention.hip";
  case HK_OP_ROPE: return "gpu/rope.hip";
  case HK_OP_EWCHAIN: return "gpu/ewchain.hip";
  default: return NULL;
  }
}

static const char *gpu_act_fn(hk_act_t act) {
  switch (act) {
  case HK_ACT_RELU: return "hk_act_relu";
  case HK_ACT_GELU: return "hk_act_gelu";
  case HK_ACT_SILU: return "hk_act_silu";
  case HK_ACT_GELU_TANH: return "hk_act_gelu_tanh";
  default: return "hk_act_none";
  }
}

/* Appends template `path`; 0, or -1 after reporting a template missing from the build. */
static int sb_template(hkc_strbuf_t *sb, const char *path) {
  size_t size = 0;
  const char *text = hkc_template(path, &size);
  if (!text) {
    hkc_error((hkc_loc_t){0}, "GPU codegen: template %s is missing from this build", path);
    return -1;
  }
  hkc_sb_printf(sb, "\n/* ---- templates/%s ---- */\n", path);
  hkc_sb_append(sb, text, size);
  if (size && text[size - 1] != '\n') hkc_sb_append(sb, "\n", 1);
  return 0;
}

/* ewchain: the operand list and the program as macros (key.program, see lower.h):
 *   HK_EW_NOPS          operands (in0 .. in<NOPS-1>)
 *   HK_EW_EACH(F)       F(1) F(2) ... F(NOPS-1): the template builds its parameters and
 *                       per-operand set-up from it (operand 0 is the template's own)
 *   HK_EW_PROGRAM(v, X) the steps on the f32 value v; X(j) is the template's expression for
 *                       operand j's f32 value at the current element
 * Activations: r hk_act_relu, t hk_act_gelu_tanh, g HK_EW_GELU, s HK_EW_SILU (the template
 * picks the exact common.h functions or faster ones for 16-bit outputs). 0, or -1 after
 * reporting a malformed program. */
static int sb_ewchain(hkc_strbuf_t *sb, const hkc_kernel_out_t *kernel) {
  const char *prog = kernel->key.program;
  const int ops = hkc_variant_ew_operands(prog);
  if (ops < 1) {
    hkc_error((hkc_loc_t){0}, "GPU codegen: kernel %s has a malformed ewchain program '%.*s'", kernel->name,
              HKC_EW_PROGRAM_MAX, prog);
    return -1;
  }
  hkc_sb_printf(sb, "#define HK_EW_NOPS %d\n#define HK_EW_EACH(F)", ops);
  for (int j = 1; j < ops; j++) hkc_sb_printf(sb, " F(%d)", j);
  hkc_sb_printf(sb, "\n/* program \"%s\" */\n#define HK_EW_PROGRAM(v, X)", prog);
  for (size_t i = 0; i < HKC_EW_PROGRAM_MAX && prog[i]; i++) {
    switch (prog[i]) {
    case 'a': hkc_sb_printf(sb, " v = v + X(%c);", prog[++i]); break;
    case 'm': hkc_sb_printf(sb, " v = v * X(%c);", prog[++i]); break;
    case 'r': hkc_sb_printf(sb, " v = hk_act_relu(v);"); break;
    case 'g': hkc_sb_printf(sb, " v = HK_EW_GELU(v);"); break;
    case 's': hkc_sb_printf(sb, " v = HK_EW_SILU(v);"); break;
    default: hkc_sb_printf(sb, " v = hk_act_gelu_tanh(v);"); break; /* 't' (validated above) */
    }
  }
  hkc_sb_printf(sb, "\n");
  return 0;
}

/* What the source of a GPU target kind starts with (the HIP dialect is shared; the prelude
 * maps it onto the vendor's builtins) and its wave size when the target table has none. */
typedef struct gpu_dialect {
  hk_target_kind_t kind;
  const char *prelude;
  uint32_t wave_size;
} gpu_dialect_t;

static const gpu_dialect_t *gpu_dialect(hk_target_kind_t kind) {
  static const gpu_dialect_t k_dialects[] = {
      {HK_TARGET_HIP, "gpu/prelude_hip.h", 64},
      {HK_TARGET_CUDA, "gpu/prelude_cuda.h", 32},
  };
  for (size_t i = 0; i < sizeof k_dialects / sizeof *k_dialects; i++)
    if (k_dialects[i].kind == kind) return &k_dialects[i];
  return NULL;
}

/* Emits: a header line, the kernel's macros (name, element type and converters, epilogue
 * flags, tile sizes, wave size), the vendor prelude, common.h and the op template. The
 * output depends only on (arch name, kind, wave size, kernel name, key). NULL after
 * reporting an unknown op/dtype/target kind or a missing template, or on OOM. */
char *hkc_codegen_gpu(const hkc_gpu_arch_t *arch, const hkc_kernel_out_t *kernel) {
  const hkc_kernel_key_t *key = &kernel->key;
  const gpu_params_t *p = gpu_params(key->op);
  const hkc_variant_t *variant = hkc_variant_for(arch, key);
  const char *tpl = variant ? variant->template_path : gpu_template_path(key->op);
  static const char *const types[] = {"float", "unsigned short", "unsigned short"};
  static const char *const loads[] = {"hk_f32_load", "hk_f16_to_f32", "hk_bf16_to_f32"};
  static const char *const stores[] = {"hk_f32_store", "hk_f32_to_f16", "hk_f32_to_bf16"};
  if (!p || !tpl || (unsigned)key->dtype >= HK_DTYPE_COUNT_ || (unsigned)key->act >= HK_ACT_COUNT_) {
    hkc_error((hkc_loc_t){0}, "GPU codegen: kernel %s has no GPU template (op %d, dtype %d, act %d)",
              kernel->name, (int)key->op, (int)key->dtype, (int)key->act);
    return NULL;
  }
  const gpu_dialect_t *dialect = gpu_dialect(arch->kind);
  if (!dialect) {
    hkc_error((hkc_loc_t){0}, "GPU codegen: %s is not a GPU target", arch->name ? arch->name : "?");
    return NULL;
  }
  const size_t t = (size_t)key->dtype;
  const hk_act_t unary = key->op == HK_OP_RELU ? HK_ACT_RELU
                         : key->op == HK_OP_GELU ? HK_ACT_GELU
                         : key->op == HK_OP_SILU ? HK_ACT_SILU
                                                 : HK_ACT_NONE;
  hkc_strbuf_t sb = {0};
  hkc_sb_printf(&sb, "/* generated by hkc %s: %s for %s */\n", HKC_VERSION_STRING, kernel->name,
            arch->name ? arch->name : "?");
  hkc_sb_printf(&sb, "#define HK_NAME %s\n", kernel->name);
  hkc_sb_printf(&sb, "#define HK_WAVE %u\n", arch->wave_size ? arch->wave_size : dialect->wave_size);
  hkc_sb_printf(&sb, "#define HK_T %s\n", types[t]);
  hkc_sb_printf(&sb, "#define HK_LOAD(x) %s(x)\n", loads[t]);
  hkc_sb_printf(&sb, "#define HK_STORE(x) %s(x)\n", stores[t]);
  hkc_sb_printf(&sb, "#define HK_ACT(x) %s(x)\n", gpu_act_fn(key->act));
  hkc_sb_printf(&sb, "#define HK_UNARY(x) %s(x)\n", gpu_act_fn(unary));
  hkc_sb_printf(&sb, "#define HK_BINOP(x, y) ((x) %c (y))\n", key->op == HK_OP_MUL ? '*' : '+');
  hkc_sb_printf(&sb, "#define HK_TRANS_B %d\n#define HK_HAS_BIAS %d\n#define HK_HAS_RESIDUAL %d\n", key->trans_b ? 1 : 0,
            key->has_bias ? 1 : 0, key->has_residual ? 1 : 0);
  hkc_sb_printf(&sb, "#define HK_HAS_MUL %d\n#define HK_HAS_ADD %d\n#define HK_HAS_SUM %d\n", key->has_mul ? 1 : 0,
                key->has_add ? 1 : 0, key->has_sum ? 1 : 0);
  if (key->op == HK_OP_EWCHAIN && sb_ewchain(&sb, kernel) != 0) {
    free(sb.data);
    return NULL;
  }
  if (variant) {
    char defs[2048] = "";
    variant->defines(arch, key, defs, sizeof defs);
    hkc_sb_printf(&sb, "/* variant %s */\n", variant->name);
    hkc_sb_append(&sb, defs, strlen(defs));
  } else {
    hkc_sb_printf(&sb, "#define HK_THREADS %d\n", p->threads);
  }
  if (variant) {
    /* the variant's macros replace the simple kernels' tile sizes */
  } else if (key->op == HK_OP_GEMM)
    hkc_sb_printf(&sb, "#define HK_TILE_M %d\n#define HK_TILE_N %d\n#define HK_TILE_K %d\n#define HK_GEMM_TX %d\n",
              p->tile_m, p->tile_n, p->tile_k, p->gemm_tx);
  else if (key->op == HK_OP_ATTENTION)
    hkc_sb_printf(&sb, "#define HK_ATTN_BQ %d\n#define HK_ATTN_BKV %d\n#define HK_ATTN_DC %d\n", p->attn_bq,
              p->attn_bkv, p->attn_dc);
  else if (key->op == HK_OP_ROPE)
    hkc_sb_printf(&sb, "#define HK_ROPE_VEC %d\n", GPU_ROPE_VEC);
  int rc = sb_template(&sb, dialect->prelude) |
           sb_template(&sb, "gpu/common.h");
  for (size_t i = 0; variant && variant->includes && variant->includes[i]; i++) rc |= sb_template(&sb, variant->includes[i]);
  if (rc != 0 || sb_template(&sb, tpl) != 0 || sb.failed) {
    free(sb.data);
    return NULL;
  }
  return sb.data;
}

static int64_t arg_i64(const hkc_arg_t *args, uint32_t n_args, uint32_t i) {
  return i < n_args && args[i].kind == HK_ARG_I64 ? args[i].i : 0;
}

static int64_t ceil_div(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

/* Blocks are 1-D (block.x = HK_THREADS of the op) and so is the grid (grid.x only: y and
 * z are limited to 65535). What a block is, per op:
 *   gemm        an HK_TILE_M x HK_TILE_N tile of C: ceil(M/TM) * ceil(N/TN) blocks
 *   add..silu, ewchain   HK_THREADS * ew_items elements (grid-stride loop inside)
 *   norms, softmax   one row
 *   attention   HK_ATTN_BQ query rows of one (batch, head)
 *   rope        one column block (HK_THREADS items of HK_ROPE_VEC pairs) of a strided
 *               set of rows: grid = column blocks x row groups (rope.hip)
 * Every kernel strides over blocks beyond gridDim.x, so clamping grid.x to 2^31 - 1 keeps
 * it correct. At least one block; no dynamic shared memory (all of it is static). */
void hkc_gpu_launch_dims(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                         uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const hkc_variant_t *variant = hkc_variant_for(arch, key);
  if (variant) {
    variant->launch(arch, key, args, n_args, out_grid, out_block, out_shared);
    return;
  }
  const gpu_params_t *p = gpu_params(key->op);
  int64_t blocks = 1;
  switch (key->op) {
  case HK_OP_GEMM:
    blocks = ceil_div(arg_i64(args, n_args, HKC_GEMM_ARG_M), p->tile_m) * ceil_div(arg_i64(args, n_args, HKC_GEMM_ARG_N), p->tile_n);
    break;
  case HK_OP_ADD:
  case HK_OP_MUL: blocks = ceil_div(arg_i64(args, n_args, HKC_BINARY_ARG_N), (int64_t)p->threads * p->ew_items); break;
  case HK_OP_RELU:
  case HK_OP_GELU:
  case HK_OP_SILU: blocks = ceil_div(arg_i64(args, n_args, HKC_UNARY_ARG_N), (int64_t)p->threads * p->ew_items); break;
  case HK_OP_LAYERNORM: blocks = arg_i64(args, n_args, HKC_LAYERNORM_ARG_ROWS); break;
  case HK_OP_RMSNORM: blocks = arg_i64(args, n_args, HKC_RMSNORM_ARG_ROWS); break;
  case HK_OP_SOFTMAX: blocks = arg_i64(args, n_args, HKC_SOFTMAX_ARG_ROWS); break;
  case HK_OP_ATTENTION:
    blocks = arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH) * arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS) *
             ceil_div(arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q), p->attn_bq);
    break;
  case HK_OP_EWCHAIN: blocks = ceil_div(arg_i64(args, n_args, HKC_EWCHAIN_ARG_N), (int64_t)p->threads * p->ew_items); break;
  case HK_OP_ROPE: {
    /* column blocks (a row's pairs over HK_THREADS threads) x row groups, about
     * GPU_ROPE_BLOCKS_PER_CU blocks per CU in all (templates/gpu/rope.hip) */
    const int64_t rows = arg_i64(args, n_args, HKC_ROPE_ARG_ROWS), heads = arg_i64(args, n_args, HKC_ROPE_ARG_HEADS),
                  dh = arg_i64(args, n_args, HKC_ROPE_ARG_DH);
    const int64_t half = dh / 2, vec = half % GPU_ROPE_VEC == 0 ? GPU_ROPE_VEC : 1;
    const int64_t col_blocks = ceil_div(heads * half / vec, p->threads);
    const int64_t want = (int64_t)(arch->compute_units ? arch->compute_units : 80) * GPU_ROPE_BLOCKS_PER_CU;
    int64_t row_groups = ceil_div(want, col_blocks > 0 ? col_blocks : 1);
    if (row_groups > rows) row_groups = rows;
    if (row_groups < 1) row_groups = 1;
    blocks = col_blocks * row_groups;
    if (blocks > GPU_MAX_GRID_X) blocks = GPU_MAX_GRID_X / (col_blocks > 0 ? col_blocks : 1) * col_blocks;
    break;
  }
  default: break;
  }
  if (blocks < 1) blocks = 1;
  if (blocks > GPU_MAX_GRID_X) blocks = GPU_MAX_GRID_X;
  out_grid[0] = (uint32_t)blocks;
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = p ? (uint32_t)p->threads : 1;
  out_block[1] = out_block[2] = 1;
  *out_shared = 0;
}
