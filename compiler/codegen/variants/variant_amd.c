/* SPDX-License-Identifier: Apache-2.0 */
/* AMD CDNA matrix-core variants (see variant.h): "gemm_mfma", "gemm_mfma_pp" and
 * "attention_mfma", templates/gpu/{gemm_mfma,gemm_mfma_pp,attention_mfma}.hip on the tile
 * library templates/gpu/tile_amd.h.
 * "attention_mfma_pp" (attention_mfma_pp.hip, 8 waves) serves attention_mfma's keys where its
 * registers fit, chosen only by kernel option attn_mfma_pp=on.
 * They serve f16/bf16 keys with align 8 (16-byte rows) on HIP targets whose matrix path
 * is MFMA (gfx908, gfx90a, gfx942, gfx950) with wave64; attention only for head_dim 64
 * and 128. Everything else (gfx1030, f32, odd alignments) keeps the simple kernels. */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"

/* Default tile sizes (`hkc build --tune default`); gemm_mfma's tuned keys carry their own
 * (tune_space below). */
#define AMD_THREADS 256 /* 4 waves of 64 */
#define AMD_PP_THREADS 512 /* gemm_mfma_pp: 8 waves of 64 */
#define AMD_GEMM_BM 128
#define AMD_GEMM_BN 128
#define AMD_GEMM_BK 32
#define AMD_ATTN_BQ 128 /* 4 waves x 32 queries */
#define AMD_ATTN_BKV 64

static const char *const k_amd_includes[] = {"gpu/tile_amd.h", NULL};
static const char *const k_amd_gemm_includes[] = {"gpu/tile_amd.h", "gpu/gemm_epilogue_mfma.h", NULL};

static int amd_mfma_key(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return arch && key && arch->kind == HK_TARGET_HIP && arch->matrix == HKC_MATRIX_MFMA &&
         (arch->wave_size == 0 || arch->wave_size == 64) &&
         (key->dtype == HK_DTYPE_F16 || key->dtype == HK_DTYPE_BF16) && key->align >= 8;
}

/* gfx908 (CDNA1) lacks the bf16_1k MFMAs of gfx90a and later; tile_amd.h then pairs the
 * older half-k bf16 instructions. */
static int amd_cdna1(const hkc_gpu_arch_t *arch) { return arch->name && strncmp(arch->name, "gfx908", 6) == 0; }

static void amd_common_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, int threads, char *out,
                               size_t size) {
  size_t len = strlen(out);
  snprintf(out + len, size - len, "#define HK_THREADS %d\n#define HK_MFMA_BF16 %d\n#define HK_MFMA_BF16_1K %d\n",
           threads, key->dtype == HK_DTYPE_BF16 ? 1 : 0, amd_cdna1(arch) ? 0 : 1);
}

static uint32_t clamp_grid(int64_t blocks) {
  if (blocks < 1) blocks = 1;
  if (blocks > 0x7fffffffLL) blocks = 0x7fffffffLL;
  return (uint32_t)blocks;
}

/* ---- the GEMM configurations -------------------------------------------------------------
 * Both GEMM variants take "bm=B,bn=B,bk=K": a C tile bm x bn per block and a K step bk.
 *   gemm_mfma     4 waves in 2 x 2, register-staged copies into padded LDS rows.
 *   gemm_mfma_pp  8 waves in 2 x 4, two groups of 4 in a ping-pong schedule, copies straight
 *                 into swizzled LDS rows (templates/gpu/gemm_mfma_pp.hip).
 * Legality: the template's own limits, LDS within the block's, and registers within what
 * one wave may hold when a block fills its SIMDs (estimated; the compiled kernel is checked
 * again by the tuner and the build). */
static const char *const k_mfma_names[] = {"bm", "bn", "bk"};
#define AMD_LDS_PAD 8          /* HK_LDS_PAD of tile_amd.h: LDS rows padded by 16 bytes */
#define AMD_GEMM_LDS_MAX 65536 /* the templates' #error bound (one CU's LDS on CDNA1-3) */
/* VGPRs beyond accumulators and staging registers: addressing, fragments and epilogue,
 * from comgr's report of the default (gfx90a: 220-228 total with 64 accumulators in 80
 * AGPRs and 16 staging registers; gfx908: 137-149 VGPRs; docs/AMD_KERNELS.md). An estimate
 * for ranking before compiling only. */
#define AMD_GEMM_VGPR_OVERHEAD 150
/* gemm_mfma_pp: VGPRs beyond accumulators, operands and staging (addressing, copy offsets,
 * epilogue), from comgr's reports of its configurations (88-100 beyond the accumulators at
 * 256 x 256 x 32, where this gives 88-96; bk 64 needs up to 40 more; docs/AMD_KERNELS.md). */
#define AMD_PP_VGPR_OVERHEAD 40
/* The model's efficiency of an MFMA GEMM whose LDS traffic is hidden: chosen so that
 * gemm_mfma's default (128 x 128 x 32, its LDS work serial with its MFMAs) keeps the 0.35
 * it had (an estimate: no AMD GPU here). */
#define AMD_MFMA_EFFICIENCY 0.48
/* Dense f16 matrix FLOPs per clock and CU over LDS bytes per clock and CU: 1024 / 128 on
 * CDNA1/2 (32x32x8 f16 in 64 cycles on each of 4 SIMDs; LDS 128 bytes per clock), 2048 / 128
 * on CDNA3 (ISA guides); gfx950 assumed like gfx942. */
static double amd_flops_per_lds_byte(const hkc_gpu_arch_t *arch) {
  return strncmp(arch->name, "gfx908", 6) == 0 || strncmp(arch->name, "gfx90a", 6) == 0 ? 8.0 : 16.0;
}

typedef struct mfma_cfg {
  int bm, bn, bk;
  int pp; /* 1: gemm_mfma_pp (8 waves), 0: gemm_mfma (4 waves) */
} mfma_cfg_t;

static int cfg_threads(const mfma_cfg_t *c) { return c->pp ? AMD_PP_THREADS : AMD_THREADS; }
static const char *cfg_variant(const mfma_cfg_t *c) { return c->pp ? "gemm_mfma_pp" : "gemm_mfma"; }

static uint32_t mfma_lds(const mfma_cfg_t *c) {
  return c->pp ? (uint32_t)(2 * (c->bm + c->bn) * c->bk * 2) /* unpadded, swizzled rows */
               : (uint32_t)(2 * (c->bm + c->bn) * (c->bk + AMD_LDS_PAD) * 2);
}

/* Per-lane registers: accumulators (32x32 fragments, 16 f32 each) and the rest. */
static int cfg_acc(const mfma_cfg_t *c) { return c->bm * c->bn / cfg_threads(c); }
static int cfg_other(const mfma_cfg_t *c, const hkc_kernel_key_t *key) {
  const int kc = c->bk / 8;
  if (!c->pp) return (c->bm * kc / AMD_THREADS + c->bn * kc / AMD_THREADS) * 4 + AMD_GEMM_VGPR_OVERHEAD;
  /* one K step's operands (4 k x 16 bits = 2 VGPRs each), B [K, N] staged 16 bytes at a time */
  const int operands = (c->bm / 64 + c->bn / 128) * kc * 2;
  const int staging = key->trans_b ? 0 : c->bn / 4 * c->bk / 1024 * 4;
  return operands + staging + AMD_PP_VGPR_OVERHEAD;
}
/* The occupancy model's view before compiling: the unified VGPR+AGPR total on gfx90a+, the
 * larger of the two files on gfx908 (accumulators in AGPRs there). */
static uint32_t cfg_regs(const hkc_gpu_arch_t *arch, const mfma_cfg_t *c, const hkc_kernel_key_t *key) {
  const int acc = cfg_acc(c), other = cfg_other(c, key);
  return (uint32_t)(arch->max_vgprs_per_thread > 256 ? acc + other : acc > other ? acc : other);
}

/* AGPRs gfx908 needs beyond the accumulators: the compiler keeps VGPR overflow there (seen
 * with ROCm 5.2: 80 AGPRs for 64 accumulators, 48-66 for 32; gemm_mfma_pp with 128
 * accumulators in a 128-AGPR share spilled to scratch). */
#define AMD_CDNA1_AGPR_SLACK 16

/* Whether the registers fit when the block's waves share the CU's SIMDs: each SIMD's file
 * split between ceil(waves / SIMDs) waves, at most the per-wave maximum. On gfx908 the
 * accumulators (AGPRs, with some slack) and the rest (VGPRs) each have half the file. */
static int cfg_regs_fit(const hkc_gpu_arch_t *arch, const mfma_cfg_t *c, const hkc_kernel_key_t *key) {
  const uint32_t waves = (uint32_t)cfg_threads(c) / 64, simds = arch->simds_per_cu ? arch->simds_per_cu : 4;
  const uint32_t per_simd = (waves + simds - 1) / simds;
  const int unified = arch->max_vgprs_per_thread > 256;
  uint32_t limit = (unified ? arch->vgprs_per_lane : arch->vgprs_per_lane / 2) / per_simd;
  if (limit > arch->max_vgprs_per_thread) limit = arch->max_vgprs_per_thread;
  const uint32_t acc = (uint32_t)cfg_acc(c), other = (uint32_t)cfg_other(c, key);
  return unified ? acc + other <= limit : acc + AMD_CDNA1_AGPR_SLACK <= limit && other <= limit;
}

static int mfma_legal(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const mfma_cfg_t *c) {
  const int side_m = c->bm == 64 || c->bm == 128 || c->bm == 256, side_n = c->bn == 64 || c->bn == 128 || c->bn == 256;
  const int kc = c->bk / 8;
  int shape;
  if (c->pp) /* 2 x 4 waves of >= 32 x 32; each wave copies whole 256-byte rows groups of A and B */
    shape = c->bn >= 128 && (c->bm / 8) % (128 / c->bk) == 0 && (key->trans_b || c->bn / 4 * c->bk % 1024 == 0);
  else
    shape = (c->bm * kc) % AMD_THREADS == 0 && (c->bn * kc) % AMD_THREADS == 0 &&
            (key->trans_b || (c->bk * c->bn / 8) % AMD_THREADS == 0);
  return side_m && side_n && (c->bk == 32 || c->bk == 64) && shape && mfma_lds(c) <= AMD_GEMM_LDS_MAX &&
         mfma_lds(c) <= arch->max_lds_per_block && cfg_regs_fit(arch, c, key);
}

/* The variant's default on arch for key: gemm_mfma 128 x 128 x 32 (legal on every MFMA
 * target); gemm_mfma_pp its largest tile that is legal there (256 x 256 x 32 on gfx90a and
 * later, 256 x 128 x 32 on gfx908), 128 x 128 x 32 at the least. */
static mfma_cfg_t mfma_default(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, int pp) {
  static const mfma_cfg_t k_pp[] = {{256, 256, 32, 1}, {256, 128, 32, 1}};
  for (size_t i = 0; pp && i < sizeof k_pp / sizeof *k_pp; i++)
    if (mfma_legal(arch, key, &k_pp[i])) return k_pp[i];
  return pp ? (mfma_cfg_t){128, 128, 32, 1} : (mfma_cfg_t){AMD_GEMM_BM, AMD_GEMM_BN, AMD_GEMM_BK, 0};
}

/* The configuration of key for variant pp (tuned, else the default). */
static mfma_cfg_t mfma_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, int pp) {
  mfma_cfg_t c = mfma_default(arch, key, pp);
  int v[3];
  if (key->variant[0] && strncmp(key->variant, cfg_variant(&c), HKC_TUNE_VARIANT_MAX) == 0 && key->tune[0] &&
      hkc_tune_params_parse(key->tune, k_mfma_names, 3, v) == 0) {
    const mfma_cfg_t e = {v[0], v[1], v[2], pp};
    if (mfma_legal(arch, key, &e)) c = e;
  }
  return c;
}

/* Model figures. The efficiency follows the LDS traffic of a K step (operand reads by every
 * wave, plus the tile written once) in units of MFMA time, r = bytes x FLOPs-per-LDS-byte /
 * FLOPs: gemm_mfma has one wave per SIMD, which waits for its LDS work and barrier between
 * its MFMAs, so its time is (1 + r) x the MFMAs'; gemm_mfma_pp hides it behind the other
 * group's MFMAs while r < 1. */
static double mfma_efficiency(const hkc_gpu_arch_t *arch, const mfma_cfg_t *c) {
  const int waves_m = 2, waves_n = c->pp ? 4 : 2;
  const double reads = (double)waves_m * waves_n * (c->bm / waves_m + c->bn / waves_n) * c->bk * 2;
  const double writes = (double)(c->bm + c->bn) * c->bk * 2;
  const double r = (reads + writes) * amd_flops_per_lds_byte(arch) / (2.0 * c->bm * c->bn * c->bk);
  return AMD_MFMA_EFFICIENCY / (c->pp ? (r > 1.0 ? r : 1.0) : 1.0 + r);
}

static void mfma_tile(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const mfma_cfg_t *c,
                      hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "%s", cfg_variant(c));
  snprintf(t->tune, sizeof t->tune, "bm=%d,bn=%d,bk=%d", c->bm, c->bn, c->bk);
  t->bm = c->bm;
  t->bn = c->bn;
  t->bk = c->bk;
  t->threads = cfg_threads(c);
  t->inflight = 1; /* the next K step is loaded during this one's MFMAs */
  t->shared_bytes = mfma_lds(c);
  t->regs = cfg_regs(arch, c, key);
  t->efficiency = mfma_efficiency(arch, c);
  const mfma_cfg_t d = mfma_default(arch, key, c->pp);
  t->is_default = c->bm == d.bm && c->bn == d.bn && c->bk == d.bk;
}

static int mfma_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, int pp, const char *params,
                      hkc_tile_cfg_t *out) {
  mfma_cfg_t c = mfma_default(arch, key, pp);
  int v[3];
  if (params && params[0]) {
    if (hkc_tune_params_parse(params, k_mfma_names, 3, v) != 0) return -1;
    c = (mfma_cfg_t){v[0], v[1], v[2], pp};
  }
  if (!mfma_legal(arch, key, &c)) return -1;
  mfma_tile(arch, key, &c, out);
  return 0;
}

/* Every legal bm x bn x bk of the variant, its default first. */
static int mfma_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, int pp, hkc_tile_cfg_t *out, int max) {
  static const int sides[] = {128, 256, 64}, bks[] = {32, 64};
  int n = 0;
  if (max > 0 && mfma_parse(arch, key, pp, "", &out[0]) == 0) n = 1;
  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < 3; i++)
      for (size_t j = 0; j < 3; j++) {
        const mfma_cfg_t c = {sides[i], sides[j], bks[k], pp};
        if (!mfma_legal(arch, key, &c) || n >= max) continue;
        mfma_tile(arch, key, &c, &out[n]);
        if (!out[n].is_default) n++;
      }
  return n;
}

static int gemm_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return amd_mfma_key(arch, key) && key->op == HK_OP_GEMM && !key->dual; /* dual gemms: the simple kernel */
}

static void gemm_cfg_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const mfma_cfg_t *c, char *out,
                             size_t size) {
  amd_common_defines(arch, key, cfg_threads(c), out, size);
  size_t len = strlen(out);
  snprintf(out + len, size - len, "#define HK_BM %d\n#define HK_BN %d\n#define HK_BK %d\n", c->bm, c->bn, c->bk);
  /* gfx90a and later back off a barrier with loads in flight (gemm_mfma_pp.hip, HK_PP_BARRIER) */
  len = strlen(out);
  if (c->pp) snprintf(out + len, size - len, "#define HK_PP_ASYNC_BARRIER %d\n", amd_cdna1(arch) ? 0 : 1);
}

/* One block per C tile, row-tile-major (grid-stride beyond 2^31 - 1), static LDS only. */
static void gemm_cfg_launch(const mfma_cfg_t *c, const hkc_arg_t *args, uint32_t n_args, uint32_t out_grid[3],
                            uint32_t out_block[3], uint32_t *out_shared) {
  const int64_t m = hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_M);
  const int64_t n = hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_N);
  out_grid[0] = clamp_grid(hkc_variant_ceil_div(m, c->bm) * hkc_variant_ceil_div(n, c->bn));
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = (uint32_t)cfg_threads(c);
  out_block[1] = out_block[2] = 1;
  *out_shared = 0;
}

/* ---- gemm_mfma (4 waves) ---------------------------------------------------------------- */
static int gemm_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                           hkc_tile_cfg_t *out) {
  return mfma_parse(arch, key, 0, params, out);
}
static int gemm_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  return mfma_space(arch, key, 0, out, max);
}
static void gemm_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const mfma_cfg_t c = mfma_cfg(arch, key, 0);
  gemm_cfg_defines(arch, key, &c, out, size);
}
static void gemm_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                        uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const mfma_cfg_t c = mfma_cfg(arch, key, 0);
  gemm_cfg_launch(&c, args, n_args, out_grid, out_block, out_shared);
}

const hkc_variant_t hkc_variant_gemm_mfma = {
    .name = "gemm_mfma",
    .template_path = "gpu/gemm_mfma.hip",
    .includes = k_amd_gemm_includes,
    .applies = gemm_applies,
    .defines = gemm_defines,
    .launch = gemm_launch,
    .tune_space = gemm_tune_space,
    .tune_parse = gemm_tune_parse,
    .params = k_mfma_names,
    .n_params = 3,
    .rules = "bm, bn 64, 128 or 256; bk 32 or 64; (bm bk / 8) and (bn bk / 8) multiples of 256 (and bk bn / 8 "
             "with B stored [K, N]); 2 (bm + bn)(bk + 8) 2 bytes of LDS within 64 KiB and the block limit; "
             "bm bn / 256 accumulators + staging + 150 registers within the per-lane file (gfx908: each file)",
};

/* ---- gemm_mfma_pp (8 waves, ping-pong) ---------------------------------------------------- */
static int pp_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                         hkc_tile_cfg_t *out) {
  return mfma_parse(arch, key, 1, params, out);
}
static int pp_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  return mfma_space(arch, key, 1, out, max);
}
static void pp_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const mfma_cfg_t c = mfma_cfg(arch, key, 1);
  gemm_cfg_defines(arch, key, &c, out, size);
}
static void pp_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                      uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const mfma_cfg_t c = mfma_cfg(arch, key, 1);
  gemm_cfg_launch(&c, args, n_args, out_grid, out_block, out_shared);
}

/* After gemm_mfma in the registry: an untuned key keeps the 4-wave kernel; the tuner and the
 * model rank both (kernel options gemm_mfma_pp=on|off, gemm_mfma_pp_cfg). */
const hkc_variant_t hkc_variant_gemm_mfma_pp = {
    .name = "gemm_mfma_pp",
    .template_path = "gpu/gemm_mfma_pp.hip",
    .includes = k_amd_gemm_includes,
    .applies = gemm_applies,
    .defines = pp_defines,
    .launch = pp_launch,
    .tune_space = pp_tune_space,
    .tune_parse = pp_tune_parse,
    .params = k_mfma_names,
    .n_params = 3,
    .rules = "bm 64, 128 or 256; bn 128 or 256; bk 32 or 64; (bm / 8) a multiple of 128 / bk (and bn bk / 4 of "
             "1024 with B stored [K, N]); 4 (bm + bn) bk bytes of LDS within 64 KiB and the block limit; "
             "bm bn / 512 accumulators + operands + staging + 40 registers within half the per-lane file "
             "(two waves per SIMD; gfx908: accumulators + 16 within half the AGPRs); K, N < 2^24 at run time",
};

/* ---- attention_mfma ---------------------------------------------------------------------- */
static int attention_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return amd_mfma_key(arch, key) && key->op == HK_OP_ATTENTION && (key->head_dim == 64 || key->head_dim == 128);
  /* the masked ABI (lengths, mask) is served too */
}

static void attention_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  amd_common_defines(arch, key, AMD_THREADS, out, size);
  size_t len = strlen(out);
  snprintf(out + len, size - len, "#define HK_ATTN_DH %d\n#define HK_ATTN_BKV %d\n", key->head_dim, AMD_ATTN_BKV);
}

/* Both AMD attention kernels: one block of `threads` per (batch, head, tile of bq queries). */
static void attention_grid(const hkc_arg_t *args, uint32_t n_args, int64_t bq, uint32_t threads, uint32_t out_grid[3],
                           uint32_t out_block[3], uint32_t *out_shared) {
  const int64_t batch = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH),
                seq_q = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q),
                heads = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS);
  out_grid[0] = clamp_grid(batch * heads * hkc_variant_ceil_div(seq_q, bq));
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = threads;
  out_block[1] = out_block[2] = 1;
  *out_shared = 0;
}

static void attention_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                             uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)arch;
  (void)key;
  attention_grid(args, n_args, AMD_ATTN_BQ, AMD_THREADS, out_grid, out_block, out_shared);
}

const hkc_variant_t hkc_variant_attention_mfma = {
    .name = "attention_mfma",
    .template_path = "gpu/attention_mfma.hip",
    .includes = k_amd_includes,
    .applies = attention_applies,
    .defines = attention_defines,
    .launch = attention_launch,
};

/* ---- attention_mfma_pp (8 waves, ping-pong) ----------------------------------------------
 * 256 queries per block (8 waves of 32), key tiles of 32 (K and V^T double-buffered: 18 KiB
 * at head_dim 64, 37 KiB at 128). Two waves per SIMD: each has half the register file, which
 * the template fits on gfx90a and later (the unified file: 169-251 with ROCm 5.2) and on
 * gfx908 at head_dim 64 only (128 VGPRs + 90-101 AGPRs); at head_dim 128 gfx908's 128 VGPRs
 * per wave do not hold the operands and the compiler spills (seen: 264 bytes of scratch), so
 * gfx908 keeps attention_mfma there. */
#define AMD_ATTN_PP_THREADS 512
#define AMD_ATTN_PP_BQ 256
#define AMD_ATTN_PP_BKV 32 /* 64 keys: 68 KiB of LDS at head_dim 128, and spills at 64 */

static int attention_pp_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return attention_applies(arch, key) && !(amd_cdna1(arch) && key->head_dim == 128);
}

static void attention_pp_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  amd_common_defines(arch, key, AMD_ATTN_PP_THREADS, out, size);
  size_t len = strlen(out);
  snprintf(out + len, size - len, "#define HK_ATTN_DH %d\n#define HK_ATTN_BKV %d\n#define HK_PP_ASYNC_BARRIER %d\n",
           key->head_dim, AMD_ATTN_PP_BKV, amd_cdna1(arch) ? 0 : 1);
}

static void attention_pp_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                                uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)arch;
  (void)key;
  attention_grid(args, n_args, AMD_ATTN_PP_BQ, AMD_ATTN_PP_THREADS, out_grid, out_block, out_shared);
}

/* After attention_mfma in the registry: chosen only by kernel option attn_mfma_pp=on;
 * docs/AMD_KERNELS.md says why auto keeps attention_mfma. */
const hkc_variant_t hkc_variant_attention_mfma_pp = {
    .name = "attention_mfma_pp",
    .template_path = "gpu/attention_mfma_pp.hip",
    .includes = k_amd_includes,
    .applies = attention_pp_applies,
    .defines = attention_pp_defines,
    .launch = attention_pp_launch,
};
