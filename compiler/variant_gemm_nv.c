/* NVIDIA tensor-core GEMM variants (see gpu_variant.h):
 *   gemm_wgmma  sm_90a (HKC_MATRIX_WGMMA): warpgroup MMA from swizzled shared memory
 *   gemm_mma    sm_80+ (HKC_MATRIX_MMA_SYNC or WGMMA): mma.sync m16n8k16
 * Both: f16/bf16, align 8 (K % 8 == 0, N % 8 == 0, 16-byte-aligned tensors), every M, N,
 * K >= 1 (tails masked / zero-filled), every epilogue. Everything else keeps gemm.hip.
 *
 * The tile configuration is chosen here (defines() and launch() read the same table, so
 * kernel and launch cannot disagree); the tuner will drive it later. For experiments,
 * HKC_GEMM_MMA_CFG="BM,BN,WARPS_M,WARPS_N,STAGES" overrides gemm_mma's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_variant.h"

typedef struct gemm_cfg {
  int bm, bn, bk, warps_m, warps_n, stages, group_m;
} gemm_cfg_t;

static int cfg_ok(const gemm_cfg_t *c) {
  const int threads = 32 * c->warps_m * c->warps_n;
  return c->bm > 0 && c->bn > 0 && c->warps_m > 0 && c->warps_n > 0 && c->stages >= 2 && threads <= 1024 &&
         c->bm % (16 * c->warps_m) == 0 && c->bn % (16 * c->warps_n) == 0 && c->bn % 64 == 0 &&
         (c->bm * 8) % threads == 0 && (c->bn * 8) % threads == 0;
}

static gemm_cfg_t mma_cfg(const hkc_gpu_arch_t *arch) {
  /* 128x128x64, 8 warps of 64x32, 4 stages: 128 KiB of shared memory (sm_80: 3 stages, 96 KiB) */
  gemm_cfg_t c = {.bm = 128, .bn = 128, .bk = 64, .warps_m = 2, .warps_n = 4, .stages = 4, .group_m = 8};
  if (arch->max_lds_per_block < 4u * (128 + 128) * 64 * 2) c.stages = 3;
  const char *env = getenv("HKC_GEMM_MMA_CFG");
  gemm_cfg_t e = c;
  if (env && sscanf(env, "%d,%d,%d,%d,%d", &e.bm, &e.bn, &e.warps_m, &e.warps_n, &e.stages) == 5 && cfg_ok(&e) &&
      (uint64_t)e.stages * (uint64_t)(e.bm + e.bn) * 128u <= arch->max_lds_per_block)
    c = e;
  return c;
}

static uint32_t cfg_shared(const gemm_cfg_t *c) { return (uint32_t)(c->stages * (c->bm + c->bn) * c->bk * 2); }

static int gemm_nv_key_ok(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return arch->kind == HK_TARGET_CUDA && key->op == HK_OP_GEMM &&
         (key->dtype == HK_DTYPE_F16 || key->dtype == HK_DTYPE_BF16) && key->align >= 8 && key->align % 8 == 0;
}

static void cfg_defines(const hkc_kernel_key_t *key, const gemm_cfg_t *c, char *out, size_t size) {
  const int bf16 = key->dtype == HK_DTYPE_BF16;
  size_t len = strlen(out);
  snprintf(out + len, size > len ? size - len : 0,
           "#define HK_THREADS %d\n#define HK_TILE_M %d\n#define HK_TILE_N %d\n#define HK_TILE_K %d\n"
           "#define HK_WARPS_M %d\n#define HK_WARPS_N %d\n#define HK_STAGES %d\n#define HK_GROUP_M %d\n"
           "#define HK_MMA(c, a, b) %s(c, a, b)\n#define HK_PACK(lo, hi) %s(lo, hi)\n",
           32 * c->warps_m * c->warps_n, c->bm, c->bn, c->bk, c->warps_m, c->warps_n, c->stages, c->group_m,
           bf16 ? "hk_mma_16816_bf16" : "hk_mma_16816_f16", bf16 ? "hk_pack_bf16x2" : "hk_pack_f16x2");
}

/* One block per C tile (grid-stride beyond 2^31 - 1 blocks), at least one block. */
static void cfg_launch(const gemm_cfg_t *c, int threads, const hkc_arg_t *args, uint32_t n_args,
                       uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared, uint32_t shared) {
  int64_t blocks = hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, 5), c->bm) *
                   hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, 6), c->bn);
  if (blocks < 1) blocks = 1;
  if (blocks > 0x7fffffffLL) blocks = 0x7fffffffLL;
  out_grid[0] = (uint32_t)blocks;
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = (uint32_t)threads;
  out_block[1] = out_block[2] = 1;
  *out_shared = shared;
}

/* ---- gemm_mma ---------------------------------------------------------------------------- */
static int mma_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return gemm_nv_key_ok(arch, key) && (arch->matrix == HKC_MATRIX_MMA_SYNC || arch->matrix == HKC_MATRIX_WGMMA);
}

static void mma_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const gemm_cfg_t c = mma_cfg(arch);
  cfg_defines(key, &c, out, size);
}

static void mma_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                       uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)key;
  const gemm_cfg_t c = mma_cfg(arch);
  cfg_launch(&c, 32 * c.warps_m * c.warps_n, args, n_args, out_grid, out_block, out_shared, cfg_shared(&c));
}

static const char *const k_nv_includes[] = {"gpu/tile_nv.h", NULL};

const hkc_gpu_variant_t hkc_variant_gemm_mma = {
    .name = "gemm_mma",
    .template_path = "gpu/gemm_mma.hip",
    .includes = k_nv_includes,
    .applies = mma_applies,
    .defines = mma_defines,
    .launch = mma_launch,
};

/* ---- gemm_wgmma -----------------------------------------------------------------------------
 * 128 x 256 x 64 tiles, 2 warpgroups of 64 x 256 (m64n256k16, 128 f32 accumulators per
 * thread), 4 stages of 48 KiB (+1 KiB for aligning the dynamic base to 1024 bytes).
 * HKC_GEMM_WGMMA_CFG="BN,STAGES" (BN 128 or 256) overrides, for experiments. */
static gemm_cfg_t wgmma_cfg(const hkc_gpu_arch_t *arch) {
  gemm_cfg_t c = {.bm = 128, .bn = 256, .bk = 64, .warps_m = 8, .warps_n = 1, .stages = 4, .group_m = 8};
  const char *env = getenv("HKC_GEMM_WGMMA_CFG");
  int bn = 0, st = 0;
  if (env && sscanf(env, "%d,%d", &bn, &st) == 2 && (bn == 128 || bn == 256) && st >= 3 &&
      (uint64_t)st * (uint64_t)(c.bm + bn) * 128u + 1024u <= arch->max_lds_per_block) {
    c.bn = bn;
    c.stages = st;
  }
  return c;
}

static int wgmma_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return gemm_nv_key_ok(arch, key) && arch->matrix == HKC_MATRIX_WGMMA;
}

static void wgmma_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const gemm_cfg_t c = wgmma_cfg(arch);
  const int bf16 = key->dtype == HK_DTYPE_BF16;
  size_t len = strlen(out);
  snprintf(out + len, size > len ? size - len : 0,
           "#define HK_THREADS %d\n#define HK_WGS %d\n#define HK_TILE_M %d\n#define HK_TILE_N %d\n#define HK_TILE_K %d\n"
           "#define HK_STAGES %d\n#define HK_GROUP_M %d\n"
           "#define HK_WGMMA(d, a, b, sc, tb) hk_wgmma_m64n%dk16_%s<tb>(d, a, b, sc)\n"
           "#define HK_PACK(lo, hi) %s(lo, hi)\n",
           2 * c.bm, c.bm / 64, c.bm, c.bn, c.bk, c.stages, c.group_m, c.bn, bf16 ? "bf16" : "f16",
           bf16 ? "hk_pack_bf16x2" : "hk_pack_f16x2");
}

static void wgmma_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                         uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)key;
  const gemm_cfg_t c = wgmma_cfg(arch);
  cfg_launch(&c, 2 * c.bm, args, n_args, out_grid, out_block, out_shared, cfg_shared(&c) + 1024u);
}

static const char *const k_wgmma_includes[] = {"gpu/tile_nv.h", "gpu/tile_wgmma.h", NULL};

const hkc_gpu_variant_t hkc_variant_gemm_wgmma = {
    .name = "gemm_wgmma",
    .template_path = "gpu/gemm_wgmma.hip",
    .includes = k_wgmma_includes,
    .applies = wgmma_applies,
    .defines = wgmma_defines,
    .launch = wgmma_launch,
};

/* ---- gemm_wgmma_ws ---------------------------------------------------------------------------
 * Warp-specialized: 384 threads = 1 producer warpgroup (cp.async into a ring guarded by
 * full/empty mbarriers, setmaxnreg 40) + 2 consumer warpgroups (wgmma m64nNk16 on 64 rows
 * each, setmaxnreg 232). 128 x 256 x 64 tiles, 3 stages of 48 KiB, + 16 KiB epilogue
 * staging + barriers + 1 KiB for aligning the dynamic base to 1024 bytes. Persistent grid
 * (min(tiles, SMs)) by default.
 * HKC_GEMM_WS_CFG="BN,STAGES[,PERSISTENT]" (BN 128 or 256; PERSISTENT 0 = one block per
 * tile) overrides, for experiments; configurations over the shared limit are ignored.
 * HKC_GEMM_WS=0 turns the variant off (sm_90a keys then get gemm_wgmma). */
typedef struct ws_cfg {
  int bn, stages, persistent;
} ws_cfg_t;

static uint32_t ws_shared(const ws_cfg_t *c) {
  return (uint32_t)(c->stages * (128 + c->bn) * 64 * 2 + 2 * 64 * 32 * 4 + 2 * 8 * c->stages + 1024);
}

static ws_cfg_t ws_cfg(const hkc_gpu_arch_t *arch) {
  /* 3 stages: measured on the H200 (2026-11-30), 5% faster than 4 on every benchmark shape
   * (docs/device-runs/2026-11-30-tune-gemm-ws.log) */
  ws_cfg_t c = {.bn = 256, .stages = 3, .persistent = 1};
  const char *env = getenv("HKC_GEMM_WS_CFG");
  ws_cfg_t e = c;
  if (env) {
    const int n = sscanf(env, "%d,%d,%d", &e.bn, &e.stages, &e.persistent);
    if (n >= 2 && (e.bn == 128 || e.bn == 256) && e.stages >= 2 && e.stages <= 12 && ws_shared(&e) <= arch->max_lds_per_block)
      c = e;
    if (n < 3) c.persistent = 1;
  }
  return c;
}

static int ws_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  const char *off = getenv("HKC_GEMM_WS"); /* "0": gemm_wgmma instead, for A/B runs */
  if (off && strcmp(off, "0") == 0) return 0;
  return gemm_nv_key_ok(arch, key) && arch->matrix == HKC_MATRIX_WGMMA;
}

static void ws_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const ws_cfg_t c = ws_cfg(arch);
  const int bf16 = key->dtype == HK_DTYPE_BF16;
  size_t len = strlen(out);
  snprintf(out + len, size > len ? size - len : 0,
           "#define HK_THREADS 384\n#define HK_TILE_M 128\n#define HK_TILE_N %d\n#define HK_TILE_K 64\n"
           "#define HK_STAGES %d\n#define HK_GROUP_M 8\n#define HK_WS_PRODUCER_REGS 40\n#define HK_WS_CONSUMER_REGS 232\n"
           "#define HK_WGMMA(d, a, b, sc, tb) hk_wgmma_m64n%dk16_%s<tb>(d, a, b, sc)\n"
           "#define HK_PACK(lo, hi) %s(lo, hi)\n",
           c.bn, c.stages, c.bn, bf16 ? "bf16" : "f16", bf16 ? "hk_pack_bf16x2" : "hk_pack_f16x2");
}

static void ws_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                      uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)key;
  const ws_cfg_t c = ws_cfg(arch);
  int64_t blocks = hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, 5), 128) *
                   hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, 6), c.bn);
  if (c.persistent && arch->compute_units > 0 && blocks > (int64_t)arch->compute_units) blocks = arch->compute_units;
  if (blocks < 1) blocks = 1;
  if (blocks > 0x7fffffffLL) blocks = 0x7fffffffLL;
  out_grid[0] = (uint32_t)blocks;
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = 384;
  out_block[1] = out_block[2] = 1;
  *out_shared = ws_shared(&c);
}

const hkc_gpu_variant_t hkc_variant_gemm_wgmma_ws = {
    .name = "gemm_wgmma_ws",
    .template_path = "gpu/gemm_wgmma_ws.hip",
    .includes = k_wgmma_includes,
    .applies = ws_applies,
    .defines = ws_defines,
    .launch = ws_launch,
};
