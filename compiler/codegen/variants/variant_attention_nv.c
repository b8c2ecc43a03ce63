/* Variant "attention_mma": flash-attention-2 style forward on NVIDIA tensor cores
 * (templates/gpu/attention_mma.hip over gpu/tile_nv.h): mma.sync m16n8k16 with f32
 * accumulation, cp.async double-buffered K/V tiles in XOR-swizzled shared memory, online
 * softmax in registers. Serves attention keys in f16/bf16 with align 8 and head_dim 64
 * or 128 on CUDA archs with sm_80+ matrix paths (sm_80, sm_90, sm_90a: mma.sync runs on
 * all three). Everything else keeps the simple kernel (templates/gpu/attention.hip).
 *
 * Tiling (the tuner's knobs; one table here, emitted as macros, read back by launch()):
 *   warps    HK_ATTN_WARPS; each owns 16 query rows: a block is BQ = 16 * warps rows of
 *            one (batch, head)
 *   bkv      keys per K/V tile (a multiple of 16)
 *   minb     __launch_bounds__ minimum blocks per SM (caps registers at 64K/(threads*minb))
 * Dynamic shared memory: Q [BQ][dh] + 2 stages of K and of V [bkv][dh], f16/bf16. */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"

typedef struct attn_cfg {
  int warps, bkv, minb;
} attn_cfg_t;

/* dh 64: 128-row tiles (8 warps), 48 KiB, two blocks per SM on sm_90 (registers capped
 * at 128; sm_80's ptxas needs a few more, so one there);
 * dh 128 on sm_90/sm_90a: 64-row tiles (4 warps), 80 KiB, two blocks per SM (measured on
 * the H200, batch 8 x 16 heads, seq 4096: 4,64,2 258 TFLOP/s full / 246 causal against
 * 238 / 229 for 8,64,1); sm_80 keeps 128-row tiles, 96 KiB, one block per SM.
 * params "w=W,kv=K,mb=M" (key->tune; the kernel option attn_mma_cfg forces one for
 * experiments): warps 4 or 8, bkv 32/64/128 as the template's checks allow, minb 1..4. */
static int sm_number(const hkc_gpu_arch_t *arch) {
  int cc = 0;
  return arch->name && sscanf(arch->name, "sm_%d", &cc) == 1 ? cc : 0;
}

static attn_cfg_t attn_default(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  /* sm_80's ptxas needs a few more registers than 128 for dh 64 (it spilled 20 bytes) */
  const int sm90 = sm_number(arch) >= 90;
  return key->head_dim == 64 ? (attn_cfg_t){.warps = 8, .bkv = 64, .minb = sm90 ? 2 : 1}
         : sm90              ? (attn_cfg_t){.warps = 4, .bkv = 64, .minb = 2}
                             : (attn_cfg_t){.warps = 8, .bkv = 64, .minb = 1};
}

static uint32_t attn_smem(const hkc_kernel_key_t *key, const attn_cfg_t *c) {
  return (uint32_t)(16 * c->warps * key->head_dim * 2 + 4 * c->bkv * key->head_dim * 2);
}

static const char *const k_attn_names[] = {"w", "kv", "mb"};

static int attn_legal(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const attn_cfg_t *c) {
  return (c->warps == 4 || c->warps == 8) && (c->bkv == 32 || c->bkv == 64 || c->bkv == 128) && c->minb >= 1 &&
         c->minb <= 4 && attn_smem(key, c) <= arch->max_lds_per_block;
}

/* The variant's own parameters of a key: key->tune when key->variant names it. */
static const char *tuned_params(const char *variant, const hkc_kernel_key_t *key) {
  return key->variant[0] && strncmp(key->variant, variant, HKC_TUNE_VARIANT_MAX) == 0 ? key->tune : NULL;
}

static attn_cfg_t attn_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  attn_cfg_t c = attn_default(arch, key);
  const char *params = tuned_params("attention_mma", key);
  int v[3];
  if (params && params[0] && hkc_tune_params_parse(params, k_attn_names, 3, v) == 0) {
    const attn_cfg_t e = {.warps = v[0], .bkv = v[1], .minb = v[2]};
    if (attn_legal(arch, key, &e)) c = e;
  }
  return c;
}

/* Tile figures (no model for attention yet: threads and shared memory only). */
static void attn_tile(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const attn_cfg_t *c, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "attention_mma");
  snprintf(t->tune, sizeof t->tune, "w=%d,kv=%d,mb=%d", c->warps, c->bkv, c->minb);
  t->bm = 16 * c->warps;
  t->bn = c->bkv;
  t->bk = key->head_dim;
  t->threads = 32 * c->warps;
  t->inflight = 1;
  t->shared_bytes = attn_smem(key, c);
  const attn_cfg_t d = attn_default(arch, key);
  t->is_default = d.warps == c->warps && d.bkv == c->bkv && d.minb == c->minb;
}

static int attn_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                           hkc_tile_cfg_t *out) {
  attn_cfg_t c = attn_default(arch, key);
  int v[3];
  if (params && params[0]) {
    if (hkc_tune_params_parse(params, k_attn_names, 3, v) != 0) return -1;
    c = (attn_cfg_t){.warps = v[0], .bkv = v[1], .minb = v[2]};
  }
  if (!attn_legal(arch, key, &c)) return -1;
  attn_tile(arch, key, &c, out);
  return 0;
}

static int attn_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  static const int warps[] = {8, 4}, bkvs[] = {64, 32, 128};
  int n = 0;
  if (max > 0 && attn_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (size_t i = 0; i < 2; i++)
    for (size_t j = 0; j < 3; j++)
      for (int mb = 1; mb <= 2; mb++) {
        const attn_cfg_t c = {.warps = warps[i], .bkv = bkvs[j], .minb = mb};
        if (!attn_legal(arch, key, &c) || n >= max) continue;
        attn_tile(arch, key, &c, &out[n]);
        if (!out[n].is_default) n++;
      }
  return n;
}


static int attn_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  if (arch->kind != HK_TARGET_CUDA || sm_number(arch) < 80 /* cp.async, bf16 mma.sync */) return 0;
  if (arch->matrix != HKC_MATRIX_MMA_SYNC && arch->matrix != HKC_MATRIX_WGMMA) return 0;
  if (key->op != HK_OP_ATTENTION || (key->dtype != HK_DTYPE_F16 && key->dtype != HK_DTYPE_BF16)) return 0;
  if (key->align != 8 || (key->head_dim != 64 && key->head_dim != 128)) return 0;
  const attn_cfg_t c = attn_cfg(arch, key);
  return attn_smem(key, &c) <= arch->max_lds_per_block;
}

static void attn_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const attn_cfg_t c = attn_cfg(arch, key);
  const size_t len = strlen(out);
  snprintf(out + len, size - len,
           "#define HK_THREADS %d\n#define HK_ATTN_WARPS %d\n#define HK_ATTN_BQ %d\n#define HK_ATTN_BKV %d\n"
           "#define HK_ATTN_MINB %d\n#define HK_DH %d\n#define HK_ATTN_BF16 %d\n#define HK_ATTN_SMEM %u\n",
           32 * c.warps, c.warps, 16 * c.warps, c.bkv, c.minb, key->head_dim, key->dtype == HK_DTYPE_BF16 ? 1 : 0,
           attn_smem(key, &c));
}

/* One block per (batch, head, query tile), 1-D grid clamped to 2^31 - 1 (the kernel
 * strides over the rest). */
static void attn_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                        uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const attn_cfg_t c = attn_cfg(arch, key);
  int64_t blocks = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH) * hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS) *
                   hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q), 16 * c.warps);
  hkc_variant_launch_1d(blocks, (uint32_t)(32 * c.warps), attn_smem(key, &c), out_grid, out_block, out_shared);
}

static const char *const attn_includes[] = {"gpu/tile_nv.h", NULL};

const hkc_variant_t hkc_variant_attention_mma = {
    .name = "attention_mma",
    .template_path = "gpu/attention_mma.hip",
    .includes = attn_includes,
    .applies = attn_applies,
    .defines = attn_defines,
    .launch = attn_launch,
    .tune_space = attn_tune_space,
    .tune_parse = attn_tune_parse,
    .params = k_attn_names,
    .n_params = 3,
    .rules = "w (warps) 4 or 8; kv 32, 64 or 128; mb 1..4; (16 w + 4 kv) head_dim 2 bytes of shared memory "
             "within the block limit",
};

/* ---- attention_wgmma (sm_90a, HKC_MATRIX_WGMMA) -------------------------------------------
 * templates/gpu/attention_wgmma.hip: wgmma for S = Q K^T (both operands from swizzled
 * shared memory) and O += P V (P from registers), 64 query rows per warpgroup.
 *   wgs   warpgroups per block (1..3): BQ = 64 * wgs query rows, 128 * wgs threads
 *   bkv   keys per K/V tile (64 or 128)
 *   minb  __launch_bounds__ minimum blocks per SM
 * Shared: Q [BQ][dh] + 2 stages of K and V [bkv][dh] + 1 KiB to align the base to 1024.
 * Defaults (unmeasured; the largest tiles ptxas 13.0 fits without spilling): dh 128: 2
 * warpgroups, 64 keys (228 registers, 97 KiB); dh 64: 3 warpgroups, 64 keys (154
 * registers, 57 KiB). Spill-free sweeps: dh 128 "2,64,1"; dh 64 "2,64,1", "3,64,1",
 * "2,128,1" (223 registers), "1,128,2" (238). Spilling (valid but slow): dh 128 with 128
 * keys or 3 warpgroups, dh 64 "3,128,1", and anything with minb 2 at 256 threads.
 * params "wg=W,kv=K,mb=M" (key->tune; the kernel option attn_wgmma_cfg forces one). Which
 * keys it serves by default: registry.c (head_dim 128; the option attn_wgmma). */
typedef struct attn_wg_cfg {
  int wgs, bkv, minb;
} attn_wg_cfg_t;

static uint32_t attn_wg_smem(const hkc_kernel_key_t *key, const attn_wg_cfg_t *c) {
  return (uint32_t)(64 * c->wgs * key->head_dim * 2 + 4 * c->bkv * key->head_dim * 2 + 1024);
}

static attn_wg_cfg_t attn_wg_default(const hkc_kernel_key_t *key) {
  return key->head_dim == 128 ? (attn_wg_cfg_t){.wgs = 2, .bkv = 64, .minb = 1}
                              : (attn_wg_cfg_t){.wgs = 3, .bkv = 64, .minb = 1};
}

static const char *const k_attn_wg_names[] = {"wg", "kv", "mb"};

static int attn_wg_legal(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const attn_wg_cfg_t *c) {
  return c->wgs >= 1 && c->wgs <= 3 && (c->bkv == 64 || c->bkv == 128) && c->minb >= 1 && c->minb <= 2 &&
         (uint64_t)attn_wg_smem(key, c) * (uint64_t)c->minb <= arch->max_lds_per_block;
}

static attn_wg_cfg_t attn_wg_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  attn_wg_cfg_t c = attn_wg_default(key);
  const char *params = tuned_params("attention_wgmma", key);
  int v[3];
  if (params && params[0] && hkc_tune_params_parse(params, k_attn_wg_names, 3, v) == 0) {
    const attn_wg_cfg_t e = {.wgs = v[0], .bkv = v[1], .minb = v[2]};
    if (attn_wg_legal(arch, key, &e)) c = e;
  }
  return c;
}

static void attn_wg_tile(const hkc_kernel_key_t *key, const attn_wg_cfg_t *c, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "attention_wgmma");
  snprintf(t->tune, sizeof t->tune, "wg=%d,kv=%d,mb=%d", c->wgs, c->bkv, c->minb);
  t->bm = 64 * c->wgs;
  t->bn = c->bkv;
  t->bk = key->head_dim;
  t->threads = 128 * c->wgs;
  t->inflight = 1;
  t->shared_bytes = attn_wg_smem(key, c);
  const attn_wg_cfg_t d = attn_wg_default(key);
  t->is_default = d.wgs == c->wgs && d.bkv == c->bkv && d.minb == c->minb;
}

static int attn_wg_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                              hkc_tile_cfg_t *out) {
  attn_wg_cfg_t c = attn_wg_default(key);
  int v[3];
  if (params && params[0]) {
    if (hkc_tune_params_parse(params, k_attn_wg_names, 3, v) != 0) return -1;
    c = (attn_wg_cfg_t){.wgs = v[0], .bkv = v[1], .minb = v[2]};
  }
  if (!attn_wg_legal(arch, key, &c)) return -1;
  attn_wg_tile(key, &c, out);
  return 0;
}

static int attn_wg_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  int n = 0;
  if (max > 0 && attn_wg_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (int wgs = 3; wgs >= 1; wgs--)
    for (int kv = 64; kv <= 128; kv += 64)
      for (int mb = 1; mb <= 2; mb++) {
        const attn_wg_cfg_t c = {.wgs = wgs, .bkv = kv, .minb = mb};
        if (!attn_wg_legal(arch, key, &c) || n >= max) continue;
        attn_wg_tile(key, &c, &out[n]);
        if (!out[n].is_default) n++;
      }
  return n;
}

static int attn_wg_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  /* Measured on the H200 (2026-11-30, docs/device-runs/final/sweeps.log; numerics: awg.log):
   * correct on every odd case, faster than attention_mma at dh 128 on every benchmark case
   * (seq 4096: 325 vs 263 TFLOP/s full, 307 vs 247 causal), mixed at dh 64 (slower at seq
   * 1024). So: default for dh 128 (registry.c); dh 64 when named (kernel option
   * attn_wgmma=on). */
  if (arch->kind != HK_TARGET_CUDA || arch->matrix != HKC_MATRIX_WGMMA) return 0;
  if (key->op != HK_OP_ATTENTION || (key->dtype != HK_DTYPE_F16 && key->dtype != HK_DTYPE_BF16)) return 0;
  if (key->align != 8 || (key->head_dim != 64 && key->head_dim != 128)) return 0;
  const attn_wg_cfg_t c = attn_wg_cfg(arch, key);
  return attn_wg_smem(key, &c) <= arch->max_lds_per_block;
}

static void attn_wg_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const attn_wg_cfg_t c = attn_wg_cfg(arch, key);
  const char *ty = key->dtype == HK_DTYPE_BF16 ? "bf16" : "f16";
  const size_t len = strlen(out);
  snprintf(out + len, size - len,
           "#define HK_THREADS %d\n#define HK_AW_WGS %d\n#define HK_ATTN_BQ %d\n#define HK_ATTN_BKV %d\n"
           "#define HK_ATTN_MINB %d\n#define HK_DH %d\n#define HK_ATTN_BF16 %d\n#define HK_ATTN_SMEM %u\n"
           "#define HK_AW_S hk_wgmma_m64n%dk16_%s\n#define HK_AW_O hk_wgmma_rs_m64n%dk16_%s\n",
           128 * c.wgs, c.wgs, 64 * c.wgs, c.bkv, c.minb, key->head_dim, key->dtype == HK_DTYPE_BF16 ? 1 : 0,
           attn_wg_smem(key, &c), c.bkv, ty, key->head_dim, ty);
}

static void attn_wg_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                           uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const attn_wg_cfg_t c = attn_wg_cfg(arch, key);
  int64_t blocks = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH) * hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS) *
                   hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q), 64 * c.wgs);
  hkc_variant_launch_1d(blocks, (uint32_t)(128 * c.wgs), attn_wg_smem(key, &c), out_grid, out_block,
                        out_shared);
}

static const char *const attn_wg_includes[] = {"gpu/tile_nv.h", "gpu/tile_wgmma.h", NULL};

const hkc_variant_t hkc_variant_attention_wgmma = {
    .name = "attention_wgmma",
    .template_path = "gpu/attention_wgmma.hip",
    .includes = attn_wg_includes,
    .applies = attn_wg_applies,
    .defines = attn_wg_defines,
    .launch = attn_wg_launch,
    .tune_space = attn_wg_tune_space,
    .tune_parse = attn_wg_tune_parse,
    .params = k_attn_wg_names,
    .n_params = 3,
    .rules = "wg (warpgroups) 1..3; kv 64 or 128; mb 1 or 2; mb x ((64 wg + 4 kv) head_dim 2 + 1024) bytes of "
             "shared memory within the block limit",
};
