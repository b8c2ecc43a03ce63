/* SPDX-License-Identifier: Apache-2.0 */
/* NVIDIA tensor-core GEMM variants (see variant.h):
 *   gemm_wgmma  sm_90a (HKC_MATRIX_WGMMA): warpgroup MMA from swizzled shared memory
 *   gemm_mma    sm_80+ (HKC_MATRIX_MMA_SYNC or WGMMA): mma.sync m16n8k16
 * Both: f16/bf16, align 8 (K % 8 == 0, N % 8 == 0, 16-byte-aligned tensors), every M, N,
 * K >= 1 (tails masked / zero-filled), every epilogue. Everything else keeps gemm.hip.
 *
 * The tile configuration comes from the kernel key (key->tune, chosen by compiler/tune/tune.c:
 * a tuning database, the analytical model or the defaults below); defines() and launch()
 * read the same configuration, so kernel and launch cannot disagree. Each variant's
 * tune_space() lists its legal configurations, default first. For experiments, the kernel
 * options gemm_mma_cfg / gemm_wgmma_cfg / gemm_ws_cfg force a configuration through the same
 * key->tune (codegen.h: parsed by the CLI, checked by tune_parse here, applied by tune/). */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"

/* gemm_tma's stream-K schedule, the kernel's own definition (templates/gpu/gemm_streamk.h) */
#define HK_SK_FN static inline
#include "gpu/gemm_streamk.h"

typedef struct gemm_cfg {
  int bm, bn, bk, warps_m, warps_n, stages, group_m;
  int splitk; /* gemm_mma: k slices per tile, each in its own block (1: none); others 1 */
} gemm_cfg_t;

/* The variant's own configuration of a key: key->tune when key->variant names it. */
static const char *tuned_params(const char *variant, const hkc_kernel_key_t *key) {
  return key->variant[0] && strncmp(key->variant, variant, HKC_TUNE_VARIANT_MAX) == 0 ? key->tune : NULL;
}

/* Registers per thread a configuration needs beyond its accumulators and fragments:
 * addressing, loop state and epilogue temporaries, read off ptxas reports of the default
 * configurations (gemm_mma 160-236 with 64 + 24 operand registers, gemm_wgmma 200-220
 * with 128 accumulators). An estimate for ranking before compiling only. */
#define NV_GEMM_REGS_OVERHEAD 72

static int cfg_ok(const gemm_cfg_t *c) {
  const int threads = 32 * c->warps_m * c->warps_n;
  return c->bm > 0 && c->bn > 0 && c->warps_m > 0 && c->warps_n > 0 && c->stages >= 2 && threads <= 1024 &&
         c->bm % (16 * c->warps_m) == 0 && c->bn % (16 * c->warps_n) == 0 && c->bn % 64 == 0 &&
         (c->bm * 8) % threads == 0 && (c->bn * 8) % threads == 0;
}

static uint32_t cfg_shared(const gemm_cfg_t *c) { return (uint32_t)(c->stages * (c->bm + c->bn) * c->bk * 2); }

/* ---- gemm_mma configurations --------------------------------------------------------------
 * params "bm=B,bn=B,wm=W,wn=W,st=S[,sk=K]": C tile bm x bn, warps_m x warps_n warps, S-stage
 * cp.async pipeline (prefetch distance S - 1), K-way split-K (K k slices per tile, each in its
 * own block, partial sums in the launch's scratch, the last slice to finish adds them up;
 * templates/gpu/gemm_mma.hip). The canonical string names sk only when it is > 1, so the
 * configurations without split-K keep the form (and kernel names) they had before it. */
static const char *const k_mma_names[] = {"bm", "bn", "wm", "wn", "st", "sk"};
#define MMA_NAMES_NO_SK 5 /* the string without sk */
#define MMA_MAX_SPLITK 8  /* more slices buy little once the k loop is shorter than its pipeline */

static gemm_cfg_t mma_default(const hkc_gpu_arch_t *arch) {
  /* 128x128x64, 8 warps of 64x32, 4 stages: 128 KiB of shared memory (3 stages, 96 KiB, where
   * a block may not have 128 KiB) */
  gemm_cfg_t c = {.bm = 128, .bn = 128, .bk = 64, .warps_m = 2, .warps_n = 4, .stages = 4, .group_m = 8, .splitk = 1};
  if (arch->max_lds_per_block < 4u * (128 + 128) * 64 * 2) c.stages = 3;
  return c;
}

static int mma_legal(const hkc_gpu_arch_t *arch, const gemm_cfg_t *c) {
  const int threads = 32 * c->warps_m * c->warps_n;
  const int acc = (c->bm / c->warps_m) * (c->bn / c->warps_n) / 32;
  return cfg_ok(c) && c->bk == 64 && threads >= 64 && threads <= 256 && (c->bn / c->warps_n) % 16 == 0 &&
         cfg_shared(c) <= arch->max_lds_per_block && acc + NV_GEMM_REGS_OVERHEAD <= (int)arch->max_vgprs_per_thread &&
         c->splitk >= 1 && c->splitk <= MMA_MAX_SPLITK;
}

/* params -> c (not checked for legality): the full string, or one without sk (sk 1). 0 / -1. */
static int mma_parse(const char *params, gemm_cfg_t *c) {
  int v[6] = {0, 0, 0, 0, 0, 1};
  if (hkc_tune_params_parse(params, k_mma_names, 6, v) != 0 &&
      hkc_tune_params_parse(params, k_mma_names, MMA_NAMES_NO_SK, v) != 0)
    return -1;
  *c = (gemm_cfg_t){.bm = v[0], .bn = v[1], .bk = 64, .warps_m = v[2], .warps_n = v[3], .stages = v[4], .group_m = 8,
                    .splitk = v[5]};
  return 0;
}

/* The configuration of a key (tuned, else the default). */
static gemm_cfg_t mma_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  gemm_cfg_t c = mma_default(arch), e;
  const char *params = tuned_params("gemm_mma", key);
  if (params && params[0] && mma_parse(params, &e) == 0 && mma_legal(arch, &e)) c = e;
  return c;
}

/* Model figures of a gemm_mma configuration. Efficiency 0.30: an estimate, not measured on
 * the H200 (mma.sync kernels reach about 2/3 of the wgmma rate on Hopper; ours reaches
 * 0.42 with wgmma, see wgmma_tile); it only ranks gemm_mma against the wgmma variants. */
static void mma_tile(const hkc_gpu_arch_t *arch, const gemm_cfg_t *c, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "gemm_mma");
  char tune[96] = ""; /* legal values fit HKC_TUNE_MAX ("bm=256,bn=256,wm=8,wn=8,st=4,sk=8") */
  const int len =
      snprintf(tune, sizeof tune, "bm=%d,bn=%d,wm=%d,wn=%d,st=%d", c->bm, c->bn, c->warps_m, c->warps_n, c->stages);
  if (c->splitk > 1 && len > 0) snprintf(tune + len, sizeof tune - (size_t)len, ",sk=%d", c->splitk);
  memcpy(t->tune, tune, sizeof t->tune - 1);
  t->split_k = c->splitk;
  t->split_global = c->splitk > 1;
  const int wtm = c->bm / c->warps_m, wtn = c->bn / c->warps_n;
  t->bm = c->bm;
  t->bn = c->bn;
  t->bk = c->bk;
  t->threads = 32 * c->warps_m * c->warps_n;
  t->inflight = c->stages - 1;
  t->shared_bytes = cfg_shared(c);
  t->regs = (uint32_t)(wtm * wtn / 32 + (wtm / 16) * 4 + (wtn / 8) * 2 + NV_GEMM_REGS_OVERHEAD);
  t->efficiency = 0.30;
  const gemm_cfg_t d = mma_default(arch);
  t->is_default = memcmp(&d, c, sizeof d) == 0;
}

static int mma_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                          hkc_tile_cfg_t *out) {
  (void)key;
  gemm_cfg_t c = mma_default(arch);
  if (params && params[0] && (mma_parse(params, &c) != 0 || !mma_legal(arch, &c))) return -1;
  mma_tile(arch, &c, out);
  return 0;
}

/* Tiles 64..256 on each side, warp tiles 32x32 .. 64x64 (4 or 8 warps), 3 or 4 stages; then
 * split-K 2, 4 and 8 on the three tiles that suit small M (64 x 64, 64 x 128 and the default
 * 128 x 128 with 4 warps' 64 x 64 or 8 warps' 64 x 32 tiles): 9 more candidates, not a
 * copy of the space per sk, so that `hkc tune` measures about 40 gemm_mma candidates. The
 * split ones are opt-in: tune.c drops them unless gemm_split=on (hkc_kernel_options_allow_cfg). */
static int mma_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  static const int sides[] = {64, 128, 256}, warp_tiles[][2] = {{64, 32}, {32, 64}, {64, 64}, {32, 32}};
  static const gemm_cfg_t split_tiles[] = {
      {.bm = 64, .bn = 64, .bk = 64, .warps_m = 2, .warps_n = 2, .stages = 4, .group_m = 8, .splitk = 1},
      {.bm = 64, .bn = 128, .bk = 64, .warps_m = 1, .warps_n = 4, .stages = 4, .group_m = 8, .splitk = 1},
      {.bm = 128, .bn = 128, .bk = 64, .warps_m = 2, .warps_n = 4, .stages = 4, .group_m = 8, .splitk = 1},
  };
  int n = 0;
  if (max > 0 && mma_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (int st = 4; st >= 3; st--)
    for (size_t i = 0; i < 3; i++)
      for (size_t j = 0; j < 3; j++)
        for (size_t w = 0; w < 4; w++) {
          const int bm = sides[i], bn = sides[j];
          if (bm % warp_tiles[w][0] || bn % warp_tiles[w][1]) continue;
          gemm_cfg_t c = {.bm = bm, .bn = bn, .bk = 64, .warps_m = bm / warp_tiles[w][0],
                          .warps_n = bn / warp_tiles[w][1], .stages = st, .group_m = 8, .splitk = 1};
          const int warps = c.warps_m * c.warps_n;
          if ((warps != 4 && warps != 8) || !mma_legal(arch, &c) || n >= max) continue;
          mma_tile(arch, &c, &out[n]);
          if (!out[n].is_default) n++;
        }
  for (size_t i = 0; i < sizeof split_tiles / sizeof split_tiles[0]; i++)
    for (int sk = 2; sk <= MMA_MAX_SPLITK; sk *= 2) {
      gemm_cfg_t c = split_tiles[i];
      c.splitk = sk;
      if (arch->max_lds_per_block < cfg_shared(&c)) c.stages = 3; /* as the default does */
      if (!mma_legal(arch, &c) || n >= max) continue;
      mma_tile(arch, &c, &out[n++]);
    }
  return n;
}

static int gemm_nv_key_ok(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return arch->kind == HK_TARGET_CUDA && key->op == HK_OP_GEMM &&
         (key->dtype == HK_DTYPE_F16 || key->dtype == HK_DTYPE_BF16) && key->align >= 8 && key->align % 8 == 0;
}

/* The wgmma variants' instruction and packing macros for key's dtype and wgmma N `bn`. */
static void wgmma_macros(const hkc_kernel_key_t *key, int bn, char *out, size_t size) {
  const int bf16 = key->dtype == HK_DTYPE_BF16;
  size_t len = strlen(out);
  snprintf(out + len, size > len ? size - len : 0,
           "#define HK_WGMMA(d, a, b, sc, tb) hk_wgmma_m64n%dk16_%s<tb>(d, a, b, sc)\n#define HK_PACK(lo, hi) %s(lo, hi)\n",
           bn, bf16 ? "bf16" : "f16", bf16 ? "hk_pack_bf16x2" : "hk_pack_f16x2");
}

static void cfg_defines(const hkc_kernel_key_t *key, const gemm_cfg_t *c, char *out, size_t size) {
  const int bf16 = key->dtype == HK_DTYPE_BF16;
  size_t len = strlen(out);
  snprintf(out + len, size > len ? size - len : 0,
           "#define HK_THREADS %d\n#define HK_TILE_M %d\n#define HK_TILE_N %d\n#define HK_TILE_K %d\n"
           "#define HK_WARPS_M %d\n#define HK_WARPS_N %d\n#define HK_STAGES %d\n#define HK_GROUP_M %d\n"
           "#define HK_SPLITK %d\n"
           "#define HK_MMA(c, a, b) %s(c, a, b)\n#define HK_PACK(lo, hi) %s(lo, hi)\n",
           32 * c->warps_m * c->warps_n, c->bm, c->bn, c->bk, c->warps_m, c->warps_n, c->stages, c->group_m, c->splitk,
           bf16 ? "hk_mma_16816_bf16" : "hk_mma_16816_f16", bf16 ? "hk_pack_bf16x2" : "hk_pack_f16x2");
}

/* C tiles of a launch. */
static int64_t cfg_tiles(const gemm_cfg_t *c, const hkc_arg_t *args, uint32_t n_args) {
  return hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_M), c->bm) *
         hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_N), c->bn);
}

/* One block per C tile (gemm_mma split-K: per k slice of a tile; grid-stride beyond 2^31 - 1
 * blocks), at least one block. */
static void cfg_launch(const gemm_cfg_t *c, int threads, const hkc_arg_t *args, uint32_t n_args,
                       uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared, uint32_t shared) {
  hkc_variant_launch_1d(cfg_tiles(c, args, n_args) * c->splitk, (uint32_t)threads, shared, out_grid, out_block,
                        out_shared);
}

/* ---- gemm_mma ---------------------------------------------------------------------------- */
static int mma_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return gemm_nv_key_ok(arch, key) && !key->dual && (arch->matrix == HKC_MATRIX_MMA_SYNC || arch->matrix == HKC_MATRIX_WGMMA);
}

static void mma_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const gemm_cfg_t c = mma_cfg(arch, key);
  cfg_defines(key, &c, out, size);
}

static void mma_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                       uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const gemm_cfg_t c = mma_cfg(arch, key);
  cfg_launch(&c, 32 * c.warps_m * c.warps_n, args, n_args, out_grid, out_block, out_shared, cfg_shared(&c));
}

/* Split-K's workspace: sk f32 partial tiles per tile, one arrival counter per tile. */
static int mma_workspace(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                         uint32_t n_args, hkc_node_workspace_t *out) {
  const gemm_cfg_t c = mma_cfg(arch, key);
  if (c.splitk == 1) return 0;
  const int64_t tiles = cfg_tiles(&c, args, n_args);
  out->scratch_bytes = (uint64_t)(tiles > 0 ? tiles : 1) * (uint64_t)c.splitk * (uint64_t)(c.bm * c.bn) * 4u;
  out->counters = tiles > 0 && tiles < UINT32_MAX ? (uint32_t)tiles : UINT32_MAX; /* the plan refuses too many */
  return 1;
}

static const char *const k_nv_includes[] = {"gpu/tile_nv.h", NULL};

const hkc_variant_t hkc_variant_gemm_mma = {
    .name = "gemm_mma",
    .template_path = "gpu/gemm_mma.hip",
    .includes = k_nv_includes,
    .applies = mma_applies,
    .defines = mma_defines,
    .launch = mma_launch,
    .workspace = mma_workspace,
    .tune_space = mma_tune_space,
    .tune_parse = mma_tune_parse,
    .params = k_mma_names,
    .n_params = 6,
    .n_required_params = MMA_NAMES_NO_SK,
    .rules = "bk 64; bm, bn > 0 with bm % (16 wm) == 0, bn % (16 wn) == 0, bn % 64 == 0; 64..256 threads "
             "(32 wm wn); (bm 8) and (bn 8) multiples of the threads; st >= 2; st (bm + bn) 128 bytes of shared "
             "memory within the block limit; accumulators + 72 registers within the per-thread limit; sk 1..8 "
             "(sk > 1: split-K, sk f32 partial tiles per tile in the workspace)",
};

/* ---- gemm_wgmma -----------------------------------------------------------------------------
 * Default 128 x 256 x 64 tiles, 2 warpgroups of 64 x 256 (m64n256k16, 128 f32 accumulators
 * per thread), 4 stages of 48 KiB (+1 KiB for aligning the dynamic base to 1024 bytes).
 * params "bm=B,bn=B,st=S": bm 64 or 128 (one warpgroup per 64 rows), bn 64 / 128 / 256
 * (the wgmma N), S >= 3 stages (prefetch distance S - 2). */
static const char *const k_wgmma_names[] = {"bm", "bn", "st"};

static int wgmma_legal(const hkc_gpu_arch_t *arch, const gemm_cfg_t *c) {
  return (c->bm == 64 || c->bm == 128) && (c->bn == 64 || c->bn == 128 || c->bn == 256) && c->stages >= 3 &&
         c->stages <= 8 && cfg_shared(c) + 1024u <= arch->max_lds_per_block;
}

static gemm_cfg_t wgmma_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  gemm_cfg_t c = {.bm = 128, .bn = 256, .bk = 64, .warps_m = 8, .warps_n = 1, .stages = 4, .group_m = 8, .splitk = 1};
  const char *params = tuned_params("gemm_wgmma", key);
  int v[3];
  if (params && params[0] && hkc_tune_params_parse(params, k_wgmma_names, 3, v) == 0) {
    gemm_cfg_t e = c;
    e.bm = v[0];
    e.bn = v[1];
    e.stages = v[2];
    e.warps_m = e.bm / 16;
    if (wgmma_legal(arch, &e)) c = e;
  }
  return c;
}

/* Model figures. Efficiency by the wgmma N (the A operand is read from shared memory once
 * per N columns, so narrower instructions reach less of the peak): 256: 0.42 -- gemm_wgmma
 * 128x256, 4 stages reached 400.2 TFLOP/s at 4096^3 bf16 on the H200
 * (docs/device-runs/2026-11-30-tune-round1.log, t_gemm_256_4) = 0.405 of the 989 TFLOP/s
 * peak with 512 tiles on 132 SMs (3.88 of 4 rounds used: 0.97); 128: 0.40 -- 128x128
 * reached 381.0 (t_gemm_128_4, 1024 tiles, again 0.97); 64: 0.30, an estimate (not
 * measured). */
static void wgmma_tile(const gemm_cfg_t *c, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "gemm_wgmma");
  snprintf(t->tune, sizeof t->tune, "bm=%d,bn=%d,st=%d", c->bm, c->bn, c->stages);
  t->bm = c->bm;
  t->bn = c->bn;
  t->bk = 64;
  t->threads = 2 * c->bm;
  t->inflight = c->stages - 2;
  t->shared_bytes = cfg_shared(c) + 1024u;
  t->regs = (uint32_t)(c->bn / 2 + NV_GEMM_REGS_OVERHEAD);
  t->efficiency = c->bn == 256 ? 0.42 : c->bn == 128 ? 0.40 : 0.30;
  t->is_default = c->bm == 128 && c->bn == 256 && c->stages == 4;
}

static int wgmma_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                            hkc_tile_cfg_t *out) {
  (void)key;
  gemm_cfg_t c = {.bm = 128, .bn = 256, .bk = 64, .warps_m = 8, .warps_n = 1, .stages = 4, .group_m = 8, .splitk = 1};
  int v[3];
  if (params && params[0]) {
    if (hkc_tune_params_parse(params, k_wgmma_names, 3, v) != 0) return -1;
    c.bm = v[0];
    c.bn = v[1];
    c.stages = v[2];
    if (!wgmma_legal(arch, &c)) return -1;
  }
  wgmma_tile(&c, out);
  return 0;
}

static int wgmma_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  static const int bms[] = {128, 64}, bns[] = {256, 128, 64};
  int n = 0;
  if (max > 0 && wgmma_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (size_t i = 0; i < 2; i++)
    for (size_t j = 0; j < 3; j++)
      for (int st = 3; st <= 6; st++) {
        gemm_cfg_t c = {.bm = bms[i], .bn = bns[j], .bk = 64, .warps_m = bms[i] / 16, .warps_n = 1, .stages = st,
                        .group_m = 8, .splitk = 1};
        if (!wgmma_legal(arch, &c) || n >= max) continue;
        wgmma_tile(&c, &out[n]);
        if (!out[n].is_default) n++;
      }
  return n;
}

static int wgmma_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return gemm_nv_key_ok(arch, key) && !key->dual && arch->matrix == HKC_MATRIX_WGMMA;
}

static void wgmma_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const gemm_cfg_t c = wgmma_cfg(arch, key);
  size_t len = strlen(out);
  snprintf(out + len, size > len ? size - len : 0,
           "#define HK_THREADS %d\n#define HK_WGS %d\n#define HK_TILE_M %d\n#define HK_TILE_N %d\n#define HK_TILE_K %d\n"
           "#define HK_STAGES %d\n#define HK_GROUP_M %d\n",
           2 * c.bm, c.bm / 64, c.bm, c.bn, c.bk, c.stages, c.group_m);
  wgmma_macros(key, c.bn, out, size);
}

static void wgmma_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                         uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const gemm_cfg_t c = wgmma_cfg(arch, key);
  cfg_launch(&c, 2 * c.bm, args, n_args, out_grid, out_block, out_shared, cfg_shared(&c) + 1024u);
}

static const char *const k_wgmma_includes[] = {"gpu/tile_nv.h", "gpu/tile_wgmma.h", NULL};
/* the warp-specialized kernels: their shared epilogue too */
static const char *const k_ws_includes[] = {"gpu/tile_nv.h", "gpu/tile_wgmma.h", "gpu/gemm_epilogue_wgmma.h", NULL};
static const char *const k_tma_includes[] = {"gpu/tile_nv.h", "gpu/tile_wgmma.h", "gpu/gemm_epilogue_wgmma.h",
                                             "gpu/gemm_streamk.h", NULL};

const hkc_variant_t hkc_variant_gemm_wgmma = {
    .name = "gemm_wgmma",
    .template_path = "gpu/gemm_wgmma.hip",
    .includes = k_wgmma_includes,
    .applies = wgmma_applies,
    .defines = wgmma_defines,
    .launch = wgmma_launch,
    .tune_space = wgmma_tune_space,
    .tune_parse = wgmma_tune_parse,
    .params = k_wgmma_names,
    .n_params = 3,
    .rules = "bm 64 or 128; bn 64, 128 or 256; st 3..8; st (bm + bn) 128 + 1024 bytes of shared memory within the "
             "block limit",
};

/* ---- gemm_wgmma_ws ---------------------------------------------------------------------------
 * Warp-specialized: 384 threads = 1 producer warpgroup (cp.async into a ring guarded by
 * full/empty mbarriers, setmaxnreg 40) + 2 consumer warpgroups (wgmma m64nNk16 on 64 rows
 * each, setmaxnreg 232). Default 128 x 256 x 64 tiles, 3 stages of 48 KiB, + 16 KiB
 * epilogue staging + barriers + 1 KiB for aligning the dynamic base to 1024 bytes.
 * Persistent grid (min(tiles, SMs)) by default.
 * params "bn=B,st=S,p=P": bn 128 or 256, S >= 2 ring slots, P 1 persistent / 0 one block
 * per tile. The kernel option gemm_ws=off turns the variant off (sm_90a keys then get
 * gemm_wgmma; registry.c). */
typedef struct ws_cfg {
  int bn, stages, persistent;
} ws_cfg_t;

static const char *const k_ws_names[] = {"bn", "st", "p"};

static uint32_t ws_shared(const ws_cfg_t *c) {
  return (uint32_t)(c->stages * (128 + c->bn) * 64 * 2 + 2 * 64 * 32 * 4 + 2 * 8 * c->stages + 1024);
}

static int ws_legal(const hkc_gpu_arch_t *arch, const ws_cfg_t *c) {
  return (c->bn == 128 || c->bn == 256) && c->stages >= 2 && c->stages <= 12 && (c->persistent == 0 || c->persistent == 1) &&
         ws_shared(c) <= arch->max_lds_per_block;
}

static ws_cfg_t ws_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  /* 3 stages: measured on the H200 (2026-11-30), 5% faster than 4 on every benchmark shape
   * (docs/device-runs/2026-11-30-tune-gemm-ws.log) */
  ws_cfg_t c = {.bn = 256, .stages = 3, .persistent = 1};
  const char *params = tuned_params("gemm_wgmma_ws", key);
  int v[3];
  if (params && params[0] && hkc_tune_params_parse(params, k_ws_names, 3, v) == 0) {
    const ws_cfg_t e = {.bn = v[0], .stages = v[1], .persistent = v[2]};
    if (ws_legal(arch, &e)) c = e;
  }
  return c;
}

/* Model figures. Efficiency by BN: 256: 0.49 -- gemm_wgmma_ws 128x256, 3 stages,
 * persistent reached 473.7 TFLOP/s at 4096^3 bf16 and 464.7 at 8192^3 on the H200
 * (docs/device-runs/2026-11-30-tune-gemm-ws.log, t_ws_256_3) = 0.479 / 0.470 of the
 * 989 TFLOP/s peak, with 97% of the last round of tiles used at both shapes; 128: 0.40 --
 * 128x128, 6 stages reached 389.1 at 4096^3 (t_ws_128_6; 1024 tiles, 0.97). Registers:
 * ptxas reports the entry budget of 384 threads (168); the consumers raise theirs to 232. */
static void ws_tile(const ws_cfg_t *c, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "gemm_wgmma_ws");
  snprintf(t->tune, sizeof t->tune, "bn=%d,st=%d,p=%d", c->bn, c->stages, c->persistent);
  t->bm = 128;
  t->bn = c->bn;
  t->bk = 64;
  t->threads = 384;
  t->inflight = c->stages - 1;
  t->persistent = c->persistent;
  t->shared_bytes = ws_shared(c);
  t->regs = 168;
  t->efficiency = c->bn == 256 ? 0.49 : 0.40;
  t->is_default = c->bn == 256 && c->stages == 3 && c->persistent == 1;
}

static int ws_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                         hkc_tile_cfg_t *out) {
  (void)key;
  ws_cfg_t c = {.bn = 256, .stages = 3, .persistent = 1};
  int v[3];
  if (params && params[0]) {
    if (hkc_tune_params_parse(params, k_ws_names, 3, v) != 0) return -1;
    c = (ws_cfg_t){.bn = v[0], .stages = v[1], .persistent = v[2]};
    if (!ws_legal(arch, &c)) return -1;
  }
  ws_tile(&c, out);
  return 0;
}

static int ws_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  static const int bns[] = {256, 128};
  int n = 0;
  if (max > 0 && ws_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (int p = 1; p >= 0; p--)
    for (size_t j = 0; j < 2; j++)
      for (int st = 2; st <= 8; st++) {
        const ws_cfg_t c = {.bn = bns[j], .stages = st, .persistent = p};
        if (!ws_legal(arch, &c) || n >= max) continue;
        ws_tile(&c, &out[n]);
        if (!out[n].is_default) n++;
      }
  return n;
}

static int ws_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return gemm_nv_key_ok(arch, key) && !key->dual && arch->matrix == HKC_MATRIX_WGMMA;
}

static void ws_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const ws_cfg_t c = ws_cfg(arch, key);
  size_t len = strlen(out);
  snprintf(out + len, size > len ? size - len : 0,
           "#define HK_THREADS 384\n#define HK_TILE_M 128\n#define HK_TILE_N %d\n#define HK_TILE_K 64\n"
           "#define HK_STAGES %d\n#define HK_GROUP_M 8\n#define HK_WS_PRODUCER_REGS 40\n#define HK_WS_CONSUMER_REGS 232\n",
           c.bn, c.stages);
  wgmma_macros(key, c.bn, out, size);
}

static void ws_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                      uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const ws_cfg_t c = ws_cfg(arch, key);
  int64_t blocks = hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_M), 128) *
                   hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_N), c.bn);
  if (c.persistent && arch->compute_units > 0 && blocks > (int64_t)arch->compute_units) blocks = arch->compute_units;
  hkc_variant_launch_1d(blocks, 384, ws_shared(&c), out_grid, out_block, out_shared);
}

const hkc_variant_t hkc_variant_gemm_wgmma_ws = {
    .name = "gemm_wgmma_ws",
    .template_path = "gpu/gemm_wgmma_ws.hip",
    .includes = k_ws_includes,
    .applies = ws_applies,
    .defines = ws_defines,
    .launch = ws_launch,
    .tune_space = ws_tune_space,
    .tune_parse = ws_tune_parse,
    .params = k_ws_names,
    .n_params = 3,
    .rules = "bn 128 or 256; st 2..12; p 0 or 1; st (128 + bn) 128 bytes + 16 KiB epilogue + barriers + 1 KiB of "
             "shared memory within the block limit",
};

/* ---- gemm_tma ---------------------------------------------------------------------------------
 * TMA loads (tensor maps built by libhkrt: pack argument kind TMAP), 384 threads = a
 * producer warpgroup (one thread issues the copies; setmaxnreg 40) + 2 consumer warpgroups
 * (setmaxnreg 232), persistent grid (min(tiles, SMs)) in grouped raster order.
 * params "pp=P,mw=W,bn=B,st=S,sk=K,cm=C,ts=T[,skm=R]": P 0 cooperative (both consumers on one
 * 128 W x B tile) or 1 ping-pong (consumers on alternate 64 W x B tiles, one's epilogue under
 * the other's MMAs); W 1 or 2 m64 blocks per consumer; B the wgmma N (64, 96, 128, 192, 256;
 * 96 only for trans_b, whose B tile is one K-major box) with W B <= 256 (at most 128
 * accumulators per thread); S ring slots; K split K ways over a cluster of K blocks per tile
 * (K > 1: one tile per cluster, no persistence; W B <= 128); C 2: multicast pairs; T 1: C
 * leaves by TMA stores. Optional last parameter ",skm=R" (written only when R > 0, so that
 * configurations without it keep the strings -- and kernel names, tuning database entries --
 * they had before it): stream-K, each block of the persistent grid taking a near-equal range
 * of the tiles' k tiles, at least R of them (templates/gpu/gemm_streamk.h; sk 1, cm 1, no dual
 * gemm; opt-in, kernel option gemm_split). Shared memory: S slots of (rows + B) x 128 bytes
 * (rows = 128 W cooperative, 64 W ping-pong) + 16 KiB epilogue staging (+ 16 KiB of output
 * buffers, T 1) + barriers (+ 8 bytes of stream-K flags) + 1 KiB for aligning the base.
 * Kernel option gemm_tma=off turns it off (sm_90a keys then get gemm_wgmma_ws). */
typedef struct tma_cfg {
  int pingpong, mw, bn, stages, splitk, cm, tma_store, streamk;
} tma_cfg_t;

/* ts (TMA store of C) and skm (stream-K) came last, in that order. ts is always written; a
 * string without it (tuning databases written before it) means ts=0. skm is optional
 * (variant.h, n_required_params): written only when > 0, absent means 0; a string with skm
 * but no ts (written by the split-K branch before ts existed) parses too. */
static const char *const k_tma_names[] = {"pp", "mw", "bn", "st", "sk", "cm", "ts", "skm"};
static const char *const k_tma_names_no_ts[] = {"pp", "mw", "bn", "st", "sk", "cm", "skm"};
#define TMA_N_PARAMS 8
#define TMA_N_REQUIRED 7   /* the string without skm */
#define TMA_MAX_STREAMK 64 /* k tiles per block: past a tile's worth or so stream-K is data-parallel */
static const tma_cfg_t k_tma_default = {
    .pingpong = 0, .mw = 1, .bn = 256, .stages = 4, .splitk = 1, .cm = 1, .tma_store = 0, .streamk = 0};

static int tma_rows(const tma_cfg_t *c) { return (2 - c->pingpong) * 64 * c->mw; }

/* B tiles per ring slot: 2 for a dual gemm (B and B2). */
static int tma_nb(const hkc_kernel_key_t *key) { return key->dual ? 2 : 1; }

/* The ring, the f32 staging E, the output buffers of the TMA store, the barriers (stream-K's
 * flags, a rope's column constants, a folded norm's row scales), and 1 KiB
 * for aligning the base (templates/gpu/gemm_tma.hip, "Shared memory"). */
static uint32_t tma_shared(const hkc_kernel_key_t *key, const tma_cfg_t *c) {
  return (uint32_t)(c->stages * (tma_rows(c) + tma_nb(key) * c->bn) * 128 + 2 * 64 * 32 * 4 +
                    c->tma_store * 4 * 64 * 32 * 2 + 8 * (2 * c->stages + 2) + (c->streamk ? 8 : 0) +
                    (key->rope ? 3 * (key->head_dim / 2) * 4 : 0) +
                    (key->norm_a ? 2 * tma_rows(c) * 4 : 0) + (key->norm_c ? 2 * tma_rows(c) * 8 : 0) + 1024);
}

/* A norm epilogue (norm_c): the blocks of a cluster (at most the portable 8) take the
 * column tiles of one row tile, so the row's statistics meet in distributed shared memory;
 * the tile is read back 16 bytes per lane (bn 64, 128 or 192; the template takes 256 too,
 * but this machine's ptxas spills 8-16 bytes of it with 168 registers, as it does of 128
 * with 4 stages, bias, gelu and residual -- not of 5: the default's). Rows of up to 1536
 * columns. One cluster per row tile, not a persistent grid: the GPCs hold fewer clusters at
 * once than SMs / cluster (on the H200, 2026-12-02: clusters of 6 ran in two waves, twice
 * as slow), and a grid of them all lets the hardware fill each GPC as clusters finish. */
#define TMA_LN_MAX_CLUSTER 8
#define TMA_LN_STAGES 5
static int tma_ln_cluster(const hkc_kernel_key_t *key, const tma_cfg_t *c) {
  return key->norm_c && c->bn > 0 && key->norm_cols % c->bn == 0 ? key->norm_cols / c->bn : 0;
}

/* The default: 128 x 256 cooperative, 4 stages; a dual gemm (two accumulator sets) 128 x 128;
 * a rope gemm the widest bn of whole heads (head_dim dividing it; none: bn 256, illegal); a
 * norm epilogue the first of bn 192, 128, 64 whose tiles its rows split into at most 8
 * (clusters of 4 for BERT's 768: whole GPCs), none: bn 256, illegal; 5 stages
 * (TMA_LN_STAGES). */
static tma_cfg_t tma_default(const hkc_kernel_key_t *key) {
  tma_cfg_t c = k_tma_default;
  if (key->dual) c.bn = 128;
  if (key->norm_c) {
    static const int widths[] = {192, 128, 64};
    c.stages = TMA_LN_STAGES;
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
      if (key->norm_cols % widths[i] == 0 && key->norm_cols / widths[i] <= TMA_LN_MAX_CLUSTER) {
        c.bn = widths[i];
        break;
      }
  }
  if (key->rope && key->head_dim > 0) {
    static const int widths[] = {256, 192, 128, 64};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
      if (widths[i] % key->head_dim == 0) {
        c.bn = widths[i];
        break;
      }
  }
  return c;
}

static int tma_legal(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const tma_cfg_t *c) {
  /* split-K partial sums (rows x bn f32) go over the ring */
  const int64_t ring = (int64_t)c->stages * (tma_rows(c) + c->bn) * 128, partial = (int64_t)tma_rows(c) * c->bn * 4;
  if (key->dual && (c->mw * c->bn > 128 || c->splitk != 1 || c->cm != 1 || c->streamk))
    return 0; /* two accumulator sets */
  /* a folded rmsnorm: each block sums its rows' squares over all of K */
  if (key->norm_a && (c->splitk != 1 || c->streamk)) return 0;
  /* rope: each tile holds whole heads, so both columns of a pair are in one thread's fragments */
  if (key->rope && (key->dual || key->head_dim <= 0 || key->head_dim % 16 != 0 || c->bn % key->head_dim != 0))
    return 0;
  /* norm epilogue: the cooperative schedule (every consumer in each row tile's cluster
   * barrier), whole rows over a cluster of plain blocks, C stored by the threads (read back) */
  if (key->norm_c) {
    const int cl = tma_ln_cluster(key, c);
    if (key->dual || key->rope || key->norm_a || c->pingpong || c->splitk != 1 || c->cm != 1 || c->streamk ||
        c->tma_store || (c->bn != 64 && c->bn != 128 && c->bn != 192) || cl < 1 || cl > TMA_LN_MAX_CLUSTER)
      return 0;
  }
  /* stream-K: its reduction needs registers beside the accumulators, as split-K's does */
  if (c->streamk < 0 || c->streamk > TMA_MAX_STREAMK ||
      (c->streamk && (c->splitk != 1 || c->cm != 1 || c->mw * c->bn > 128)))
    return 0;
  return (c->pingpong == 0 || c->pingpong == 1) && (c->mw == 1 || c->mw == 2) &&
         (c->bn == 64 || c->bn == 96 || c->bn == 128 || c->bn == 192 || c->bn == 256) &&
         (c->bn % 64 == 0 || key->trans_b) && c->mw * c->bn <= 256 && c->stages >= 2 && c->stages <= 16 &&
         c->splitk >= 1 && c->splitk <= 8 && (c->splitk == 1 || (ring >= partial && c->mw * c->bn <= 128)) &&
         (c->cm == 1 || (c->cm == 2 && c->splitk == 1)) && (c->tma_store == 0 || c->tma_store == 1) &&
         tma_shared(key, c) <= arch->max_lds_per_block;
}

static int tma_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params, tma_cfg_t *out) {
  int v[TMA_N_PARAMS] = {0};
  if (hkc_tune_params_parse(params, k_tma_names, TMA_N_PARAMS, v) != 0 &&
      hkc_tune_params_parse(params, k_tma_names, TMA_N_REQUIRED, v) != 0 &&     /* without skm: 0 */
      hkc_tune_params_parse(params, k_tma_names, TMA_N_REQUIRED - 1, v) != 0) { /* without ts either */
    int w[TMA_N_PARAMS - 1] = {0}; /* skm without ts */
    if (hkc_tune_params_parse(params, k_tma_names_no_ts, TMA_N_PARAMS - 1, w) != 0) return -1;
    memcpy(v, w, 6 * sizeof w[0]);
    v[6] = 0;
    v[7] = w[6];
  }
  const tma_cfg_t c = {.pingpong = v[0], .mw = v[1], .bn = v[2], .stages = v[3], .splitk = v[4], .cm = v[5],
                       .tma_store = v[6], .streamk = v[7]};
  if (!tma_legal(arch, key, &c)) return -1;
  *out = c;
  return 0;
}

static tma_cfg_t tma_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  tma_cfg_t c = tma_default(key);
  const char *params = tuned_params("gemm_tma", key);
  if (params && params[0]) (void)tma_parse(arch, key, params, &c);
  return c;
}

/* Model figures. Efficiency by the wgmma N, from the H200 runs of bench/gemm_bars.py
 * (docs/device-runs/2026-12-01-gemm-tma/): 256: 0.75 -- cooperative 128x256, 4 stages, 747 TFLOP/s at
 * 4096^3 bf16 = 0.755 of the 989 TFLOP/s peak (512 tiles, 0.97 of the last round used);
 * 192: 0.68 -- 128x192 at 4096x768x3072, 644 TFLOP/s with 128 tiles on 132 SMs; 128: 0.65 --
 * 128x128, 6 stages at 512x4096x4096, 629 TFLOP/s with 128 tiles; 96 and 64: 0.55 and 0.50,
 * estimates (their launches are latency-bound, which the model's other terms carry). */
static void tma_tile(const hkc_kernel_key_t *key, const tma_cfg_t *c, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "gemm_tma");
  const int len = snprintf(t->tune, sizeof t->tune, "pp=%d,mw=%d,bn=%d,st=%d,sk=%d,cm=%d,ts=%d", c->pingpong, c->mw,
                           c->bn, c->stages, c->splitk, c->cm, c->tma_store);
  if (c->streamk && len > 0) snprintf(t->tune + len, sizeof t->tune - (size_t)len, ",skm=%d", c->streamk);
  t->bm = tma_rows(c);
  t->bn = c->bn;
  t->bk = 64;
  t->threads = 384;
  t->inflight = c->stages - 1;
  t->persistent = c->splitk == 1;
  t->split_k = c->splitk;
  t->stream_k = c->streamk;
  t->shared_bytes = tma_shared(key, c);
  t->regs = 168;
  t->efficiency = c->bn == 256 ? 0.75 : c->bn == 192 ? 0.68 : c->bn == 128 ? 0.65 : c->bn == 96 ? 0.55 : 0.50;
  const tma_cfg_t d = tma_default(key);
  t->is_default = memcmp(c, &d, sizeof *c) == 0;
}

static int tma_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                          hkc_tile_cfg_t *out) {
  tma_cfg_t c = tma_default(key);
  if (params && params[0] && tma_parse(arch, key, params, &c) != 0) return -1;
  if ((key->rope || key->norm_c) && !tma_legal(arch, key, &c)) return -1; /* no tile of whole heads or rows */
  tma_tile(key, &c, out);
  return 0;
}

/* The space (about 55, default first): the tile shapes that won somewhere on the H200
 * (docs/BENCHMARKS.md, "GEMM") with the ring depths that matter -- deep rings for the
 * narrow tiles, whose k loops are latency-bound on short K -- split-K 2/4/8 for the narrow
 * ping-pong tiles and 128 x 128 (small M, long K), multicast pairs (cm 2) for a few
 * persistent shapes, TMA stores of C on the wide ones, stream-K on six tiles. Entries illegal
 * for the key (bn 96 without trans_b) drop out. */
static int tma_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  static const tma_cfg_t space[] = {
      /* cooperative */
      {0, 1, 256, 3, 1, 1, 0, 0}, {0, 1, 192, 4, 1, 1, 0, 0}, {0, 1, 128, 5, 1, 1, 0, 0}, {0, 1, 128, 6, 1, 1, 0, 0},
      {0, 2, 128, 4, 1, 1, 0, 0}, {0, 1, 128, 5, 2, 1, 0, 0}, {0, 1, 128, 5, 4, 1, 0, 0}, {0, 1, 96, 6, 1, 1, 0, 0},
      {0, 1, 256, 4, 1, 2, 0, 0}, {0, 1, 192, 4, 1, 2, 0, 0},
      /* ping-pong */
      {1, 1, 256, 5, 1, 1, 0, 0}, {1, 1, 192, 5, 1, 1, 0, 0}, {1, 1, 128, 7, 1, 1, 0, 0}, {1, 1, 128, 10, 1, 1, 0, 0},
      {1, 2, 128, 6, 1, 1, 0, 0}, {1, 1, 96, 6, 1, 1, 0, 0}, {1, 1, 96, 10, 1, 1, 0, 0}, {1, 2, 96, 6, 1, 1, 0, 0},
      {1, 1, 64, 8, 1, 1, 0, 0}, {1, 1, 64, 12, 1, 1, 0, 0}, {1, 2, 64, 8, 1, 1, 0, 0}, {1, 1, 64, 8, 2, 1, 0, 0},
      {1, 1, 64, 8, 4, 1, 0, 0}, {1, 1, 64, 8, 8, 1, 0, 0}, {1, 1, 96, 6, 2, 1, 0, 0}, {1, 1, 96, 6, 4, 1, 0, 0},
      {1, 1, 96, 6, 8, 1, 0, 0}, {1, 1, 128, 6, 2, 1, 0, 0}, {1, 1, 128, 6, 4, 1, 0, 0}, {1, 1, 128, 7, 1, 2, 0, 0},
      {1, 1, 96, 10, 1, 2, 0, 0}, {1, 1, 64, 8, 1, 2, 0, 0}, {1, 1, 256, 5, 1, 2, 0, 0},
      /* shallow rings that fit a dual gemm's two B tiles (and serve plain keys as well) */
      {0, 1, 128, 3, 1, 1, 0, 0}, {0, 1, 128, 4, 1, 1, 0, 0}, {1, 1, 128, 4, 1, 1, 0, 0}, {1, 1, 128, 5, 1, 1, 0, 0},
      {0, 2, 64, 4, 1, 1, 0, 0}, {1, 2, 64, 5, 1, 1, 0, 0}, {0, 1, 64, 6, 1, 1, 0, 0},
      /* C by TMA stores (ts 1; this machine's ptxas spills 8 bytes in the plain 4-stage bn 256
       * ones, which the tuner then drops) */
      {0, 1, 256, 3, 1, 1, 1, 0}, {0, 1, 256, 4, 1, 1, 1, 0}, {1, 1, 256, 3, 1, 1, 1, 0}, {1, 1, 256, 4, 1, 1, 1, 0},
      {0, 1, 192, 3, 1, 1, 1, 0}, {0, 1, 128, 5, 1, 1, 1, 0}, {1, 1, 128, 7, 1, 1, 1, 0},
      /* stream-K (skm, last; tiles that do not fill the SMs evenly: small M, ragged last waves):
       * tiles of 64 accumulators per thread that won above, at least 4 or 8 k tiles per block.
       * Opt-in: tune.c drops them unless gemm_split=on (hkc_kernel_options_allow_cfg). */
      {0, 1, 128, 6, 1, 1, 0, 4}, {0, 1, 128, 6, 1, 1, 0, 8}, {1, 1, 128, 7, 1, 1, 0, 4}, {1, 1, 128, 7, 1, 1, 0, 8},
      {1, 1, 64, 8, 1, 1, 0, 4}, {0, 2, 64, 4, 1, 1, 0, 4},
  };
  int n = 0;
  if (max > 0 && tma_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (size_t i = 0; i < sizeof space / sizeof space[0] && n < max; i++) {
    if (!tma_legal(arch, key, &space[i])) continue;
    tma_tile(key, &space[i], &out[n]);
    if (!out[n].is_default) n++;
  }
  return n;
}

/* Its rope epilogue rotates row r at position r % seq + pos_offset with theta's own
 * frequencies: a rope with positions from ctx or rewritten frequencies (the rope op's tails,
 * has_ctx / rope_scaling) stays a rope kernel. */
static int tma_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return gemm_nv_key_ok(arch, key) && arch->matrix == HKC_MATRIX_WGMMA &&
         !(key->rope && (key->has_ctx || key->rope_scaling));
}

static void tma_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const tma_cfg_t c = tma_cfg(arch, key);
  size_t len = strlen(out);
  /* split-K's and stream-K's producers compute their k ranges: 56 registers (40 spill
   * there), their consumers 224 (128 x 56 + 256 x 224 registers fit the SM's 64 Ki); their
   * epilogues read each round's inputs in place (the reductions need the registers of the
   * lookahead) */
  const int split = c.splitk > 1 || c.streamk;
  const int producer_regs = split ? 56 : 40, consumer_regs = split ? 224 : 232;
  snprintf(out + len, size > len ? size - len : 0,
           "#define HK_THREADS 384\n#define HK_PINGPONG %d\n#define HK_MW %d\n#define HK_TILE_N %d\n#define HK_SPLITK %d\n"
           "#define HK_CM %d\n#define HK_STREAMK %d\n#define HK_TMA_STORE %d\n#define HK_EPI_LOOKAHEAD %d\n"
           "#define HK_STAGES %d\n#define HK_GROUP_M 8\n#define HK_PRODUCER_REGS %d\n#define HK_CONSUMER_REGS %d\n",
           c.pingpong, c.mw, c.bn, c.splitk, c.cm, c.streamk, c.tma_store, !split, c.stages, producer_regs,
           consumer_regs);
  /* 16-bit C: the cheaper gelu / silu of common.h (rounding-accurate for f16/bf16). In the
   * cooperative schedule the epilogue does not overlap the MMAs, and erff's form was most of
   * it: 4096^3 bf16 with bias, gelu and residual took 26 us more than the plain GEMM's 182. */
  if (key->dtype != HK_DTYPE_F32 && (key->act == HK_ACT_GELU || key->act == HK_ACT_SILU)) {
    len = strlen(out);
    snprintf(out + len, size > len ? size - len : 0, "#undef HK_ACT\n#define HK_ACT(x) %s(x)\n",
             key->act == HK_ACT_GELU ? "hk_act_gelu16" : "hk_act_silu16");
  }
  wgmma_macros(key, c.bn, out, size);
}

/* Stream-K: the kernel's schedule (gemm_streamk.h) of a launch of c with these args, on a
 * grid of hk_sk_grid blocks. */
static hk_sk_plan_t tma_streamk_plan(const hkc_gpu_arch_t *arch, const tma_cfg_t *c, const hkc_arg_t *args,
                                     uint32_t n_args) {
  const int64_t tiles = hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_M), tma_rows(c)) *
                        hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_N), c->bn);
  const int64_t k_tiles = hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_K), 64);
  return hk_sk_plan(tiles, k_tiles, hk_sk_grid(tiles, k_tiles, arch->compute_units, c->streamk));
}

static void tma_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                       uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const tma_cfg_t c = tma_cfg(arch, key);
  if (c.streamk) {
    hkc_variant_launch_1d(tma_streamk_plan(arch, &c, args, n_args).grid, 384, tma_shared(key, &c), out_grid, out_block,
                          out_shared);
    return;
  }
  /* A cluster (the kernel's __cluster_dims__: sk blocks on one tile, or cm blocks on cm row
   * tiles; at most one of the two is > 1) takes one unit of work: units x cluster blocks, a
   * multiple of the cluster size; persistent (at most the SMs) without split-K or a layernorm
   * epilogue (TMA_LN_MAX_CLUSTER says why). The kernel strides over units beyond the grid. */
  const int ln = tma_ln_cluster(key, &c); /* a norm epilogue: a cluster per row tile */
  const int cluster = ln ? ln : c.splitk * c.cm;
  int64_t units = hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_M), (int64_t)tma_rows(&c) * c.cm);
  if (!ln) units *= hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_N), c.bn);
  int64_t max_units = 0x7fffffffLL / cluster;
  if (c.splitk == 1 && !ln && arch->compute_units > 0) max_units = arch->compute_units / cluster;
  const int64_t blocks = (units < max_units ? units : max_units) * cluster;
  hkc_variant_launch_1d(blocks, 384, tma_shared(key, &c), out_grid, out_block, out_shared);
}

/* Stream-K's workspace: the schedule's partial-tile slots (rows x bn f32 each) and counters. */
static int tma_workspace(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                         uint32_t n_args, hkc_node_workspace_t *out) {
  const tma_cfg_t c = tma_cfg(arch, key);
  if (!c.streamk) return 0;
  const hk_sk_plan_t p = tma_streamk_plan(arch, &c, args, n_args);
  out->scratch_bytes = (uint64_t)hk_sk_slots(&p) * (uint64_t)tma_rows(&c) * (uint64_t)c.bn * 4u;
  out->counters = (uint32_t)hk_sk_counters(&p); /* fewer than 2 grid */
  return 1;
}

/* The two tensor maps after the gemm ABI: A as [M][K] with a 64 x rows box, B as [N][K]
 * (trans_b) with a 64 x bn box or as [K][N] with 64 x 64 panels; 128-byte swizzle. */
static uint32_t tma_launch_args(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_arg_t *args,
                                uint32_t n_args, uint32_t max_args) {
  const tma_cfg_t c = tma_cfg(arch, key);
  const uint32_t abi =
      key->norm_c ? (uint32_t)HKC_GEMM_N_ARGS_LN : hkc_gemm_norm_arg(key->dual, key->rope) + (key->norm_a ? 2u : 0u);
  if (n_args != abi || n_args + 2 + (uint32_t)key->dual + (uint32_t)c.tma_store > max_args)
    return n_args; /* not the ABI: codegen reports */
  const int64_t a = args[HKC_GEMM_ARG_A].i, b = args[HKC_GEMM_ARG_B].i;
  const uint32_t b_rows = key->trans_b ? (uint32_t)(c.bn / c.cm) : 64;
  args[n_args++] = hkc_variant_arg_tmap(a, 64, tma_rows(&c), HK_TMAP_SWIZZLE_128B);
  args[n_args++] = hkc_variant_arg_tmap(b, 64, b_rows, HK_TMAP_SWIZZLE_128B);
  if (key->dual) args[n_args++] = hkc_variant_arg_tmap(args[HKC_GEMM_ARG_B2].i, 64, b_rows, HK_TMAP_SWIZZLE_128B);
  if (c.tma_store) args[n_args++] = hkc_variant_arg_tmap(args[HKC_GEMM_ARG_C].i, 32, 64, HK_TMAP_SWIZZLE_NONE);
  return n_args;
}

/* Programmatic dependent launch of gemm_tma's launches (variant.h, pdl): every thread of
 * every block executes griddepcontrol.wait (hk_pdl_wait) after the prologue and before any
 * global memory access, and triggers its dependents there (templates/gpu/gemm_tma.hip). */
#define HKC_GEMM_TMA_PDL 1

const hkc_variant_t hkc_variant_gemm_tma = {
    .name = "gemm_tma",
    .template_path = "gpu/gemm_tma.hip",
    .includes = k_tma_includes,
    .applies = tma_applies,
    .defines = tma_defines,
    .launch = tma_launch,
    .launch_args = tma_launch_args,
    .workspace = tma_workspace,
    .pdl = HKC_GEMM_TMA_PDL,
    .rope = 1,
    .norm_a = 1,
    .norm_c = 1,
    .tune_space = tma_tune_space,
    .tune_parse = tma_tune_parse,
    .params = k_tma_names,
    .n_params = TMA_N_PARAMS,
    .n_required_params = TMA_N_REQUIRED,
    .rules = "pp 0 or 1; mw 1 or 2; bn 64, 96 (trans_b only), 128, 192 or 256 with mw bn <= 256; st 2..16; sk 1..8; st (rows + bn) 128 "
             "bytes (rows = 128 mw for pp 0, 64 mw for pp 1) + 16 KiB epilogue + barriers + 1 KiB of shared memory "
             "within the block limit; sk > 1: mw bn <= 128 (the reduction's registers) and the ring holds rows x bn f32 "
             "partial sums; cm 1 or 2 (2: clusters of two blocks on adjacent row tiles sharing B by TMA multicast; sk 1); "
             "dual gemms: mw bn <= 128, sk 1, cm 1, skm 0; rope gemms: bn a multiple of head_dim; folded norms: sk 1, skm 0; norm epilogues: pp 0, bn 64, 128 or 192 dividing N into at most 8 (the cluster), sk 1, cm 1, ts 0, skm 0; ts 0 or 1 (1: C leaves by TMA stores through 16 KiB of "
             "output buffers; 0 when absent); skm 0..64 (> 0: stream-K, at least skm k tiles per block; sk 1, cm 1, "
             "mw bn <= 128; optional, 0 when absent)",
};
