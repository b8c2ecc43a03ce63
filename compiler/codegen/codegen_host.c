/* SPDX-License-Identifier: Apache-2.0 */
/* Host code generation: kernel keys -> one C11 translation unit (templates/host). */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "lower/lower.h"
#include "util/util.h"

/* Block sizes of the host kernels. They are emitted into the generated source, so the
 * kernels and hkc_host_launch_dims below can never disagree. */
enum {
  HOST_GEMM_BM = 16,      /* rows per GEMM block: the B panel is reused by this many rows */
  HOST_GEMM_BN = 256,     /* columns per GEMM block: f32 accumulator row of 1 KiB */
  HOST_GEMM_BK = 32,      /* K step: B panel of BK x BN floats (32 KiB) stays in L1/L2 */
  HOST_EW_CHUNK = 16384,  /* elements per element-wise block: amortizes the call */
  HOST_ATTN_QT = 32,      /* query rows per attention block */
  HOST_ATTN_KB = 128,     /* keys per online-softmax step */
  HOST_ATTN_DC = 256,     /* head-dim columns accumulated at once (every common dh) */
  HOST_ROPE_JC = 64,      /* rope frequencies whose cos/sin are staged at once (dh 128) */
};

/* ---- host GEMM tuning ("host_gemm", codegen.h) -----------------------------------------------
 * params "bm=R,bn=C,bk=K": rows and columns of a block's C tile and the K step. The space
 * keeps the stack of a block, (bm + bk) * bn floats, within 128 KiB and bn a multiple of 64
 * (whole vectors). The host target is not modelled (a CPU's caches are not in the target
 * table): the model keeps the default; `hkc tune --target host` measures the space. */
static const char *const k_host_gemm_names[] = {"bm", "bn", "bk"};
#define HOST_GEMM_STACK_MAX (128 << 10)

static int host_gemm_legal(int bm, int bn, int bk) {
  return bm >= 1 && bm <= 128 && bn >= 64 && bn <= 1024 && bn % 64 == 0 && bk >= 8 && bk <= 256 &&
         (int64_t)(bm + bk) * bn * 4 <= HOST_GEMM_STACK_MAX;
}

static void host_gemm_tile(int bm, int bn, int bk, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "host_gemm");
  snprintf(t->tune, sizeof t->tune, "bm=%d,bn=%d,bk=%d", bm, bn, bk);
  t->bm = bm;
  t->bn = bn;
  t->bk = bk;
  t->threads = 1;
  t->inflight = 1;
  t->is_default = bm == HOST_GEMM_BM && bn == HOST_GEMM_BN && bk == HOST_GEMM_BK;
}

int hkc_host_tune_parse(const hkc_kernel_key_t *key, const char *params, hkc_tile_cfg_t *out) {
  int v[3] = {HOST_GEMM_BM, HOST_GEMM_BN, HOST_GEMM_BK};
  if (key->op != HK_OP_GEMM) return -1;
  if (params && params[0] && hkc_tune_params_parse(params, k_host_gemm_names, 3, v) != 0) return -1;
  if (!host_gemm_legal(v[0], v[1], v[2])) return -1;
  host_gemm_tile(v[0], v[1], v[2], out);
  return 0;
}

int hkc_host_tune_space(const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  static const int bms[] = {16, 8, 32, 64}, bns[] = {256, 128}, bks[] = {32, 64};
  int n = 0;
  if (max > 0 && hkc_host_tune_parse(key, "", &out[0]) == 0) n = 1;
  for (size_t i = 0; i < 4; i++)
    for (size_t j = 0; j < 2; j++)
      for (size_t k = 0; k < 2; k++) {
        if (!host_gemm_legal(bms[i], bns[j], bks[k]) || n >= max) continue;
        host_gemm_tile(bms[i], bns[j], bks[k], &out[n]);
        if (!out[n].is_default) n++;
      }
  return n;
}

/* The GEMM block of a key: its tuned configuration, else the defaults. A rope gemm's column
 * tile holds whole heads (both columns of every pair): bn becomes a multiple of lcm(head_dim,
 * 64), at most the chosen bn where one fits, and bk, then bm, halve until the block's stack
 * fits (head_dim <= HKC_ROPE_EPILOGUE_MAX_DH, a multiple of 16: lcm <= 960, legal with bm 16
 * and bk 16). */
static void host_gemm_block(const hkc_kernel_key_t *key, int *bm, int *bn, int *bk) {
  hkc_tile_cfg_t t;
  *bm = HOST_GEMM_BM;
  *bn = HOST_GEMM_BN;
  *bk = HOST_GEMM_BK;
  if (key->op == HK_OP_GEMM && strncmp(key->variant, "host_gemm", HKC_TUNE_VARIANT_MAX) == 0 &&
      hkc_host_tune_parse(key, key->tune, &t) == 0) {
    *bm = t.bm;
    *bn = t.bn;
    *bk = t.bk;
  }
  if (key->op == HK_OP_GEMM && key->rope && key->head_dim > 0) {
    int unit = key->head_dim, a = key->head_dim, b = 64;
    while (b) { /* lcm(head_dim, 64) = head_dim * 64 / gcd */
      const int r = a % b;
      a = b;
      b = r;
    }
    unit = unit / a * 64;
    *bn = *bn >= unit ? *bn / unit * unit : unit;
    while (!host_gemm_legal(*bm, *bn, *bk) && *bk > 8) *bk /= 2;
    while (!host_gemm_legal(*bm, *bn, *bk) && *bm > 1) *bm /= 2;
  }
}

/* A tuned GEMM instance redefines HK_GEMM_BM/BN/BK around its template (restore = 1 puts
 * the defaults back after it). */
static void host_gemm_macros(hkc_strbuf_t *sb, const hkc_kernel_key_t *key, int restore) {
  int bm, bn, bk;
  host_gemm_block(key, &bm, &bn, &bk);
  if (bm == HOST_GEMM_BM && bn == HOST_GEMM_BN && bk == HOST_GEMM_BK) return;
  if (restore) bm = HOST_GEMM_BM, bn = HOST_GEMM_BN, bk = HOST_GEMM_BK;
  hkc_sb_printf(sb, "#undef HK_GEMM_BM\n#undef HK_GEMM_BN\n#undef HK_GEMM_BK\n"
                    "#define HK_GEMM_BM %d\n#define HK_GEMM_BN %d\n#define HK_GEMM_BK %d\n", bm, bn, bk);
}

/* Template file for an op, NULL for an op the host target does not know. */
static const char *host_template_path(hk_op_t op) {
  switch (op) {
  case HK_OP_GEMM: return "host/gemm.c";
  case HK_OP_ADD:
  case HK_OP_MUL: return "host/binary.c";
  case HK_OP_RELU:
  case HK_OP_GELU:
  case HK_OP_GELU_TANH:
  case HK_OP_TANH:
  case HK_OP_SILU: return "host/unary.c";
  case HK_OP_LAYERNORM: return "host/layernorm.c";
  case HK_OP_RMSNORM: return "host/rmsnorm.c";
  case HK_OP_SOFTMAX: return "host/softmax.c";
  case HK_OP_ATTENTION: return "host/attention.c";
  case HK_OP_ROPE: return "host/rope.c";
  case HK_OP_EMBEDDING: return "host/embedding.c";
  case HK_OP_EWCHAIN: return "host/ewchain.c";
  case HK_OP_KV_APPEND: return "host/kv_append.c";
  case HK_OP_KV_ATTENTION: return "host/kv_attention.c";
  case HK_OP_TAKE_ROWS: return "host/take_rows.c";
  case HK_OP_ARGMAX: return "host/argmax.c";
  case HK_OP_SAMPLE: return "host/sample.c";
  case HK_OP_DEQUANT: return "host/dequant.c";
  default: return NULL;
  }
}

static const char *host_act_fn(hk_act_t act) {
  switch (act) {
  case HK_ACT_RELU: return "hk_act_relu";
  case HK_ACT_GELU: return "hk_act_gelu";
  case HK_ACT_SILU: return "hk_act_silu";
  case HK_ACT_GELU_TANH: return "hk_act_gelu_tanh";
  default: return "hk_act_none";
  }
}

static const char *const k_instance_macros[] = {
    "HK_NAME",  "HK_T",       "HK_LOAD",    "HK_STORE",  "HK_ACT",    "HK_TRANS_B",    "HK_HAS_BIAS",
    "HK_HAS_RESIDUAL", "HK_HAS_MUL", "HK_HAS_ADD", "HK_HAS_SUM", "HK_BINOP", "HK_UNARY", "HK_EW_NIN",
    "HK_EW_PROGRAM", "HK_ATTN_LENGTHS", "HK_ATTN_MASK", "HK_DUAL", "HK_ROPE", "HK_ROPE_DH", "HK_NORM_A",
    "HK_NORM_ARG", "HK_NORM_C", "HK_HAS_CTX", "HK_ROPE_SCALING", "HK_ROPE_SCALING_ARG", "HK_DQ_FP8",
    "HK_QB",    "HK_QB_ARG",  "HK_KV_FP8", "HK_QA", "HK_KV_APPEND",
};

/* An ewchain program (hkc_kernel_key_t.program) as C statements on the f32 value v,
 * reading operand j through HK_EW_X(j). *out_nin: operands read (1 + the largest j).
 * 0, or -1 for a malformed program (reported). */
static int ew_program_code(const char *name, const char *program, hkc_strbuf_t *code, int *out_nin) {
  int nin = 1;
  size_t len = strnlen(program, HKC_EW_PROGRAM_MAX);
  if (len == 0 || len >= HKC_EW_PROGRAM_MAX) goto bad;
  for (size_t i = 0; i < len; i++) {
    char c = program[i];
    if (c == 'a' || c == 'm') {
      char j = program[++i];
      if (j < '1' || j > '0' + HKC_MAX_NODE_IN - 1) goto bad;
      if (j - '0' + 1 > nin) nin = j - '0' + 1;
      hkc_sb_printf(code, " v %c= HK_EW_X(%c);", c == 'a' ? '+' : '*', j);
    } else {
      hk_act_t act = c == 'r' ? HK_ACT_RELU : c == 'g' ? HK_ACT_GELU : c == 's' ? HK_ACT_SILU
                     : c == 't' ? HK_ACT_GELU_TANH : HK_ACT_NONE;
      if (act == HK_ACT_NONE) goto bad;
      hkc_sb_printf(code, " v = %s(v);", host_act_fn(act));
    }
  }
  *out_nin = nin;
  return 0;
bad:
  hkc_error((hkc_loc_t){0}, "host codegen: kernel %s has a malformed ewchain program '%.*s'", name,
            HKC_EW_PROGRAM_MAX, program);
  return -1;
}

/* One kernel instance named k->name + suffix (a variant's: HKC_HOST_VARIANT_SUFFIX). */
static int emit_instance(hkc_strbuf_t *sb, const hkc_kernel_out_t *k, const char *text, size_t size,
                         const char *suffix) {
  const hkc_kernel_key_t *key = &k->key;
  static const char *const types[] = {"float", "uint16_t", "uint16_t"};
  static const char *const loads[] = {"hk_f32_load", "hk_f16_to_f32", "hk_bf16_to_f32"};
  static const char *const stores[] = {"hk_f32_store", "hk_f32_to_f16", "hk_f32_to_bf16"};
  size_t t = key->dtype < HK_DTYPE_FLOAT_COUNT ? (size_t)key->dtype : 0;
  hk_act_t unary = key->op == HK_OP_RELU        ? HK_ACT_RELU
                   : key->op == HK_OP_GELU      ? HK_ACT_GELU
                   : key->op == HK_OP_SILU      ? HK_ACT_SILU
                   : key->op == HK_OP_GELU_TANH ? HK_ACT_GELU_TANH
                                                : HK_ACT_NONE;

  hkc_sb_printf(sb, "\n/* ---- %s%s ---- */\n", k->name, suffix);
  hkc_sb_printf(sb, "#define HK_NAME %s%s\n", k->name, suffix);
  hkc_sb_printf(sb, "#define HK_T %s\n", types[t]);
  hkc_sb_printf(sb, "#define HK_LOAD(x) %s(x)\n", loads[t]);
  hkc_sb_printf(sb, "#define HK_STORE(x) %s(x)\n", stores[t]);
  hkc_sb_printf(sb, "#define HK_ACT(x) %s(x)\n", host_act_fn(key->act));
  hkc_sb_printf(sb, "#define HK_TRANS_B %d\n", key->trans_b ? 1 : 0);
  hkc_sb_printf(sb, "#define HK_HAS_BIAS %d\n", key->has_bias ? 1 : 0);
  hkc_sb_printf(sb, "#define HK_HAS_RESIDUAL %d\n", key->has_residual ? 1 : 0);
  hkc_sb_printf(sb, "#define HK_HAS_MUL %d\n", key->has_mul ? 1 : 0);
  hkc_sb_printf(sb, "#define HK_DUAL %d\n#define HK_ROPE %d\n#define HK_ROPE_DH %d\n", key->dual ? 1 : 0,
                key->rope ? 1 : 0, key->rope ? key->head_dim : 2);
  hkc_sb_printf(sb, "#define HK_NORM_A %d\n#define HK_NORM_ARG %u\n", key->norm_a ? 1 : 0,
                hkc_gemm_norm_arg(key->dual, key->rope));
  hkc_sb_printf(sb, "#define HK_NORM_C %d\n", key->norm_c); /* 2: an rmsnorm */
  hkc_sb_printf(sb, "#define HK_HAS_ADD %d\n", key->has_add ? 1 : 0);
  hkc_sb_printf(sb, "#define HK_HAS_SUM %d\n", (key->has_add || key->norm_c) && key->has_sum ? 1 : 0);
  hkc_sb_printf(sb, "#define HK_ATTN_LENGTHS %d\n#define HK_ATTN_MASK %d\n", key->has_lengths ? 1 : 0,
                key->has_mask ? 1 : 0);
  hkc_sb_printf(sb, "#define HK_HAS_CTX %d\n#define HK_ROPE_SCALING %d\n#define HK_ROPE_SCALING_ARG %u\n",
                key->has_ctx ? 1 : 0, key->rope_scaling, hkc_rope_scaling_arg(key->has_ctx));
  hkc_sb_printf(sb, "#define HK_BINOP(x, y) ((x) %c (y))\n", key->op == HK_OP_MUL ? '*' : '+');
  hkc_sb_printf(sb, "#define HK_UNARY(x) %s(x)\n", key->op == HK_OP_TANH ? "tanhf" : host_act_fn(unary));
  hkc_sb_printf(sb, "#define HK_DQ_FP8 %d\n", key->op == HK_OP_DEQUANT && !strcmp(key->program, "e4m3"));
  hkc_sb_printf(sb, "#define HK_KV_FP8 %d\n#define HK_QA %d\n", hkc_kv_fp8(key), hkc_gemm_fp8_act(key));
  hkc_sb_printf(sb, "#define HK_KV_APPEND %d\n", key->append ? 1 : 0); /* kv_attention: a kv_append folded in */
  hkc_sb_printf(sb, "#define HK_QB %d\n#define HK_QB_ARG %u\n",
                hkc_gemm_quant_b(key) == HK_DTYPE_I8 ? 1 : hkc_gemm_quant_b(key) ? 2 : 0, hkc_gemm_quant_arg(key));
  if (key->op == HK_OP_EWCHAIN) {
    hkc_strbuf_t code = {0};
    int nin = 1;
    int rc = ew_program_code(k->name, key->program, &code, &nin);
    if (rc == 0 && !code.failed) {
      hkc_sb_printf(sb, "#define HK_EW_NIN %d\n", nin);
      hkc_sb_append(sb, "#define HK_EW_PROGRAM", 21);
      hkc_sb_append(sb, code.data, code.len);
      hkc_sb_append(sb, "\n", 1);
    }
    free(code.data);
    if (rc != 0) return -1;
    if (code.failed) sb->failed = 1;
  }
  host_gemm_macros(sb, key, 0); /* tuning */
  hkc_sb_append(sb, text, size);
  if (size && text[size - 1] != '\n') hkc_sb_append(sb, "\n", 1);
  host_gemm_macros(sb, key, 1);
  /* A GEMM that converts its operands to f32 copies (16-bit types, a folded norm) does so once
   * per chunk of blocks (templates/host/gemm.c): one chunk per thread (the loader's hint,
   * backend_host.c) keeps that to once per thread. */
  if (key->op == HK_OP_GEMM && (key->dtype != HK_DTYPE_F32 || key->norm_a || hkc_gemm_quant_b(key)) && !suffix[0])
    hkc_sb_printf(sb, "HK_KERNEL const uint32_t %s__chunks = 1;\n", k->name);
  for (size_t i = 0; i < sizeof k_instance_macros / sizeof k_instance_macros[0]; i++)
    hkc_sb_printf(sb, "#undef %s\n", k_instance_macros[i]);
  return 0;
}

/* Emits every kernel's instance (a repeated name once) with the given name suffix. */
static int emit_all(hkc_strbuf_t *sb, const hkc_kernel_out_t *kernels, size_t n_kernels, const char *suffix) {
  for (size_t i = 0; i < n_kernels; i++) {
    int seen = 0;
    for (size_t j = 0; j < i && !seen; j++) seen = strcmp(kernels[j].name, kernels[i].name) == 0;
    if (seen || hkc_op_collective(kernels[i].key.op)) continue; /* no code: the runtime's communicator */
    const char *path = host_template_path(kernels[i].key.op);
    size_t size = 0;
    const char *text = path ? hkc_template(path, &size) : NULL;
    if (!text) {
      hkc_error((hkc_loc_t){0}, "host codegen: no host template for kernel %s (op %d)", kernels[i].name,
                (int)kernels[i].key.op);
      return -1;
    }
    if (emit_instance(sb, &kernels[i], text, size, suffix) != 0) return -1;
  }
  return 0;
}

/* Emits the block-size constants, the prelude, then one instance per kernel in the
 * given order (a repeated name is emitted once); on x86-64 with GCC, every instance once more
 * as its AVX2 variant (HKC_HOST_VARIANT_SUFFIX, compiled for AVX2 + FMA, which libhkrt picks on
 * a CPU that has both) unless variants is 0. NULL on OOM or a missing template (reported
 * through hkc_error). */
char *hkc_codegen_host_variants(const hkc_kernel_out_t *kernels, size_t n_kernels, int variants) {
  hkc_strbuf_t sb = {0};
  size_t prelude_size = 0;
  const char *prelude = hkc_template("host/prelude.h", &prelude_size);
  if (!prelude) {
    hkc_error((hkc_loc_t){0}, "host codegen: template host/prelude.h is missing from this build");
    return NULL;
  }
  hkc_sb_printf(&sb, "/* generated by hkc %s: host kernels */\n", HKC_VERSION_STRING);
  hkc_sb_printf(&sb, "#define HK_GEMM_BM %d\n#define HK_GEMM_BN %d\n#define HK_GEMM_BK %d\n", HOST_GEMM_BM,
            HOST_GEMM_BN, HOST_GEMM_BK);
  hkc_sb_printf(&sb, "#define HK_EW_CHUNK %d\n#define HK_ATTN_KB %d\n#define HK_ATTN_DC %d\n", HOST_EW_CHUNK,
            HOST_ATTN_KB, HOST_ATTN_DC);
  hkc_sb_printf(&sb, "#define HK_ROPE_JC %d\n#define HK_ATTN_QT %d\n", HOST_ROPE_JC, HOST_ATTN_QT);
  hkc_sb_append(&sb, prelude, prelude_size);

  if (emit_all(&sb, kernels, n_kernels, "") != 0) {
    free(sb.data);
    return NULL;
  }
  if (variants) {
    /* Only the ISA changes: -std=c11 keeps a * b + c two roundings (no contraction into FMA),
     * and every sum is in the same order, so a variant computes the same bits as its baseline. */
    hkc_sb_printf(&sb, "\n/* ---- AVX2 variants ---- */\n#if defined(__x86_64__) && defined(__GNUC__) && "
                       "!defined(__clang__)\n#pragma GCC push_options\n#pragma GCC target(\"avx2,fma\")\n");
    if (emit_all(&sb, kernels, n_kernels, HKC_HOST_VARIANT_SUFFIX) != 0) {
      free(sb.data);
      return NULL;
    }
    hkc_sb_printf(&sb, "#pragma GCC pop_options\n#endif\n");
  }
  if (sb.failed) {
    free(sb.data);
    return NULL;
  }
  return sb.data;
}

char *hkc_codegen_host(const hkc_kernel_out_t *kernels, size_t n_kernels) {
  return hkc_codegen_host_variants(kernels, n_kernels, hkc_host_variants_enabled());
}

/* Whether host builds emit the AVX2 variants: x86-64 builds, unless $HKC_HOST_VARIANTS is
 * "baseline" (docs/CLI.md). */
int hkc_host_variants_enabled(void) {
#if defined(__x86_64__) || defined(_M_X64)
  const char *e = getenv("HKC_HOST_VARIANTS");
  return !(e && strcmp(e, "baseline") == 0);
#else
  return 0;
#endif
}

static int64_t arg_i64(const hkc_arg_t *args, uint32_t n_args, uint32_t i) {
  return i < n_args && args[i].kind == HK_ARG_I64 ? args[i].i : 0;
}

static int64_t ceil_div(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

/* What a block is, per op (grid.x = number of blocks; block = {1,1,1}):
 *   gemm        a tile of HOST_GEMM_BM rows x HOST_GEMM_BN columns (a tuned key: its own);
 *               a norm epilogue's (norm_c): a row tile, all of its columns
 *   add..silu, ewchain   a chunk of HOST_EW_CHUNK elements
 *   norms, softmax   one row
 *   attention   a tile of HOST_ATTN_QT query rows of one (batch, head)
 *   rope        one row (all heads)
 *   embedding, kv_append, take_rows, argmax, sample, dequant   one row (a token's, an output row)
 *   kv_attention   one token row of one head: block = row * heads + head
 * Never less than 1 block; kernels ignore blocks past the end. */
void hkc_host_launch_dims(const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                          uint32_t out_grid[3], uint32_t out_block[3]) {
  int64_t blocks = 1;
  switch (key->op) {
  case HK_OP_GEMM: {
    int bm, bn, bk;
    host_gemm_block(key, &bm, &bn, &bk);
    blocks = ceil_div(arg_i64(args, n_args, HKC_GEMM_ARG_M), bm);
    if (!key->norm_c) blocks *= ceil_div(arg_i64(args, n_args, HKC_GEMM_ARG_N), bn); /* norm_c: whole rows */
    break;
  }
  case HK_OP_ADD:
  case HK_OP_MUL: blocks = ceil_div(arg_i64(args, n_args, HKC_BINARY_ARG_N), HOST_EW_CHUNK); break;
  case HK_OP_RELU:
  case HK_OP_GELU:
  case HK_OP_GELU_TANH:
  case HK_OP_TANH:
  case HK_OP_SILU: blocks = ceil_div(arg_i64(args, n_args, HKC_UNARY_ARG_N), HOST_EW_CHUNK); break;
  case HK_OP_EWCHAIN: blocks = ceil_div(arg_i64(args, n_args, HKC_EWCHAIN_ARG_N), HOST_EW_CHUNK); break;
  case HK_OP_LAYERNORM: blocks = arg_i64(args, n_args, HKC_LAYERNORM_ARG_ROWS); break;
  case HK_OP_RMSNORM: blocks = arg_i64(args, n_args, HKC_RMSNORM_ARG_ROWS); break;
  case HK_OP_SOFTMAX: blocks = arg_i64(args, n_args, HKC_SOFTMAX_ARG_ROWS); break;
  case HK_OP_ATTENTION:
    blocks = arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH) * arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS) *
             ceil_div(arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q), HOST_ATTN_QT);
    break;
  case HK_OP_ROPE: blocks = arg_i64(args, n_args, HKC_ROPE_ARG_ROWS); break;
  case HK_OP_EMBEDDING: blocks = arg_i64(args, n_args, HKC_EMBEDDING_ARG_TOKENS); break;
  case HK_OP_KV_APPEND: blocks = arg_i64(args, n_args, HKC_KV_APPEND_ARG_ROWS); break;
  case HK_OP_KV_ATTENTION:
    blocks = arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_ROWS) * arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_HEADS);
    break;
  case HK_OP_TAKE_ROWS: blocks = arg_i64(args, n_args, HKC_TAKE_ROWS_ARG_N_OUT); break;
  case HK_OP_ARGMAX: blocks = arg_i64(args, n_args, HKC_ARGMAX_ARG_ROWS); break;
  case HK_OP_SAMPLE: blocks = arg_i64(args, n_args, HKC_SAMPLE_ARG_ROWS); break;
  case HK_OP_DEQUANT: blocks = arg_i64(args, n_args, HKC_DEQUANT_ARG_ROWS); break;
  default: break;
  }
  if (blocks < 1) blocks = 1;
  if (blocks > UINT32_MAX) { /* needs > 2^32 rows or tiles: far beyond any real memory */
    hkc_error((hkc_loc_t){0}, "host launch: %lld blocks exceed grid.x", (long long)blocks);
    blocks = UINT32_MAX;
  }
  out_grid[0] = (uint32_t)blocks;
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = out_block[1] = out_block[2] = 1;
}

const char *hkc_host_target_name(void) {
#if defined(__x86_64__) || defined(_M_X64)
  return "host-x86_64";
#elif defined(__aarch64__) || defined(_M_ARM64)
  return "host-aarch64";
#elif defined(__riscv) && __riscv_xlen == 64
  return "host-riscv64";
#else
  return "host-unknown";
#endif
}
