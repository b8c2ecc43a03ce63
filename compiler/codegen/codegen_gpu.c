/* SPDX-License-Identifier: Apache-2.0 */
/* GPU code generation: one kernel key -> one HIP-dialect translation unit for an AMD
 * (hiprtc) or NVIDIA (nvrtc) target, from templates/gpu, plus its launch dimensions. What
 * differs per kernel (template, tile macros, launch) is the variant's (variants/variant.h):
 * the registry's choice, the op's simple kernel when nothing better applies. */
#include <assert.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"
#include "util/util.h"

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
 * flags, wave size), the variant's macros (tile sizes, threads), the vendor prelude,
 * common.h, the variant's includes and its template. The
 * output depends only on (arch name, kind, wave size, kernel name, key). NULL after
 * reporting an unknown op/dtype/target kind or a missing template, or on OOM. */
char *hkc_codegen_gpu(const hkc_gpu_arch_t *arch, const hkc_kernel_out_t *kernel) {
  const hkc_kernel_key_t *key = &kernel->key;
  const hkc_variant_t *variant = hkc_variant_for(arch, key); /* the simple kernel when nothing better applies */
  const char *tpl = variant ? variant->template_path : NULL;
  static const char *const types[] = {"float", "unsigned short", "unsigned short"};
  static const char *const loads[] = {"hk_f32_load", "hk_f16_to_f32", "hk_bf16_to_f32"};
  static const char *const stores[] = {"hk_f32_store", "hk_f32_to_f16", "hk_f32_to_bf16"};
  if (!tpl || !variant->defines || (unsigned)key->dtype >= HK_DTYPE_FLOAT_COUNT || (unsigned)key->act >= HK_ACT_COUNT_) {
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
  const hk_act_t unary = key->op == HK_OP_RELU        ? HK_ACT_RELU
                         : key->op == HK_OP_GELU      ? HK_ACT_GELU
                         : key->op == HK_OP_SILU      ? HK_ACT_SILU
                         : key->op == HK_OP_GELU_TANH ? HK_ACT_GELU_TANH
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
  hkc_sb_printf(&sb, "#define HK_UNARY(x) %s(x)\n", key->op == HK_OP_TANH ? "tanhf" : gpu_act_fn(unary));
  hkc_sb_printf(&sb, "#define HK_BINOP(x, y) ((x) %c (y))\n", key->op == HK_OP_MUL ? '*' : '+');
  hkc_sb_printf(&sb, "#define HK_TRANS_B %d\n#define HK_HAS_BIAS %d\n#define HK_HAS_RESIDUAL %d\n", key->trans_b ? 1 : 0,
            key->has_bias ? 1 : 0, key->has_residual ? 1 : 0);
  hkc_sb_printf(&sb, "#define HK_HAS_MUL %d\n#define HK_HAS_ADD %d\n#define HK_HAS_SUM %d\n", key->has_mul ? 1 : 0,
                key->has_add ? 1 : 0, key->has_sum ? 1 : 0);
  hkc_sb_printf(&sb, "#define HK_DUAL %d\n#define HK_ROPE %d\n#define HK_NORM_A %d\n", key->dual ? 1 : 0,
                key->rope ? 1 : 0, key->norm_a ? 1 : 0);
  if (key->rope) hkc_sb_printf(&sb, "#define HK_ROPE_DH %d\n", key->head_dim);
  hkc_sb_printf(&sb, "#define HK_KV_FP8 %d\n", hkc_kv_fp8(key)); /* fp8_e4m3 KV caches */
  hkc_sb_printf(&sb, "#define HK_KV_APPEND %d\n", key->append ? 1 : 0); /* kv_attention: a kv_append folded in */
  hkc_sb_printf(&sb, "#define HK_QB %d\n", /* 8-bit B read by the gemm itself: 1 int8, 2 fp8_e4m3 */
                hkc_gemm_quant_b(key) == HK_DTYPE_I8 ? 1 : hkc_gemm_quant_b(key) ? 2 : 0);
  hkc_sb_printf(&sb, "#define HK_NORM_C %d\n", key->norm_c); /* 2: an rmsnorm */
  if (key->norm_c) hkc_sb_printf(&sb, "#define HK_NORM_C_N %d\n", key->norm_cols);
  hkc_sb_printf(&sb, "#define HK_ATTN_LENGTHS %d\n#define HK_ATTN_MASK %d\n", key->has_lengths ? 1 : 0,
                key->has_mask ? 1 : 0);
  if (key->op == HK_OP_EWCHAIN && sb_ewchain(&sb, kernel) != 0) {
    free(sb.data);
    return NULL;
  }
  char defs[2048] = "";
  variant->defines(arch, key, defs, sizeof defs);
  if (!variant->portable) hkc_sb_printf(&sb, "/* variant %s */\n", variant->name);
  hkc_sb_append(&sb, defs, strlen(defs));
  int rc = sb_template(&sb, dialect->prelude) |
           sb_template(&sb, "gpu/common.h");
  for (size_t i = 0; variant->includes && variant->includes[i]; i++) rc |= sb_template(&sb, variant->includes[i]);
  if (rc != 0 || sb_template(&sb, tpl) != 0 || sb.failed) {
    free(sb.data);
    return NULL;
  }
  return sb.data;
}

/* The variant's launch (variant.h); one thread and no block for an invalid key (codegen
 * reported it). */
void hkc_gpu_launch_dims(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                         uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const hkc_variant_t *variant = hkc_variant_for(arch, key);
  if (variant && variant->launch) {
    variant->launch(arch, key, args, n_args, out_grid, out_block, out_shared);
    return;
  }
  out_grid[0] = out_grid[1] = out_grid[2] = 1;
  out_block[0] = out_block[1] = out_block[2] = 1;
  *out_shared = 0;
}

uint32_t hkc_gpu_launch_args(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_arg_t *args,
                             uint32_t n_args, uint32_t max_args) {
  const hkc_variant_t *variant = hkc_variant_for(arch, key);
  if (!variant || !variant->launch_args) return n_args;
  uint32_t n = variant->launch_args(arch, key, args, n_args, max_args);
  assert(n >= n_args && n <= max_args);
  return n;
}

int hkc_gpu_launch_workspace(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                             uint32_t n_args, hkc_node_workspace_t *out) {
  memset(out, 0, sizeof *out);
  out->scratch_offset = HK_PLACEMENT_NONE;
  const hkc_variant_t *variant = hkc_variant_for(arch, key);
  if (!variant || !variant->workspace || !variant->workspace(arch, key, args, n_args, out)) return 0;
  assert(out->scratch_bytes > 0 && out->counters > 0);
  return 1;
}

int hkc_gpu_dual_gemm_ok(const hkc_gpu_arch_t *arch) {
  const hkc_kernel_key_t dual = {.op = HK_OP_GEMM, .dtype = HK_DTYPE_BF16, .act = HK_ACT_SILU, .dual = 1, .align = 8};
  const hkc_variant_t *v = arch ? hkc_variant_for(arch, &dual) : NULL;
  return !arch || (v && !v->portable);
}

int hkc_gpu_fused_gemm_ok(const hkc_gpu_arch_t *arch, const hkc_kernel_options_t *o, const hkc_kernel_key_t *key) {
  const int dh = key->head_dim;
  if (key->rope && (dh <= 0 || dh % 16 != 0 || dh > HKC_ROPE_EPILOGUE_MAX_DH)) return 0;
  if (key->rope && o && o->gemm_rope == HKC_SWITCH_OFF) return 0;
  if (key->norm_a && o && o->gemm_norm == HKC_SWITCH_OFF) return 0;
  if (key->norm_c && (key->norm_cols <= 0 || (o && o->gemm_ln == HKC_SWITCH_OFF))) return 0;
  if (!arch) return 1; /* the host GEMM has every form (rope: whole heads in its column tiles, codegen_host.c) */
  const hkc_variant_t *v = hkc_variant_for_options(arch, o, key);
  hkc_tile_cfg_t cfg;
  /* a variant that serves the key and has a configuration for it (a tile of whole heads; a
   * cluster of tiles over a layernorm's whole rows) */
  return v && (!v->tune_parse || v->tune_parse(arch, key, "", &cfg) == 0);
}

int hkc_gpu_launch_pdl(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  /* griddepcontrol is PTX for sm_90 and later: CUDA only, from Hopper on */
  if (!arch || arch->kind != HK_TARGET_CUDA || strncmp(arch->name, "sm_", 3) != 0 || atoi(arch->name + 3) < 90)
    return 0;
  const hkc_variant_t *variant = hkc_variant_for(arch, key);
  return variant && variant->pdl ? 1 : 0;
}
