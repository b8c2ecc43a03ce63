/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_skinny_amd (templates/gpu/gemm_skinny_amd.hip): GEMMs of a few rows of A on AMD CDNA
 * (wave64 with matrix cores: gfx908, gfx90a, gfx942) -- the decode steps of text generation,
 * M = the step's token rows -- that stream B ([N, K], the checkpoints' layout) from every CU.
 * f16/bf16, align 8, the plain epilogues (bias, activation, multiplier, residual) and the
 * rmsnorm folded into the one-row buckets' gemms (key.norm_a: fusion folds it per bucket, at the
 * rows this kernel takes); the dual SwiGLU gemm and 8-bit B of gemm_skinny on NVIDIA are not
 * served, because those fuse at every bucket (the prefill launches would need MFMA forms).
 *
 * Never the registry's pick (gemm_mfma serves every key it does, and comes first): the tuner
 * names it for the launches of few rows exactly as it names gemm_skinny on sm_90a (tune.c,
 * skinny_choose: one row under the kernel option gemm_skinny=auto, up to 8 under =on, none
 * under =off). At one row gemm_mfma reads B in a few dozen 64 x 64 tiles (Llama-3.2-1B's q|k|v
 * in 48 blocks), far from what the memory gives; this launch spreads the read over every CU.
 * Its speed has not been measured (no AMD GPU has been available): checked statically
 * (amd_variants_test: registers, no scratch, occupancy) and run in the CPU emulator
 * (amd_emulate_test) against a double-precision reference.
 * Parameters: "mb=R,ks=S,u=U,nw=C,w=W" as gemm_skinny's: rows of A per unit (1, 2, 4 or 8: the
 * smallest power of two >= M), waves sharing a unit's K (1, 2, 4, 8), 16-byte loads per B row
 * in flight per lane, columns per unit (1 to 4) and waves per block (a multiple of ks, at most
 * 16); only mb is required, the others at their defaults are left out of the canonical string. */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"

#define SKA_WARPS 4 /* waves per block */
#define SKA_NW 2    /* columns (rows of B) per wave */
#define SKA_U 4     /* 16-byte loads per B row in flight per lane: 8 KiB of a wave's two rows */
#define SKA_KS 1    /* K unsplit: K = 2048 is 4 chunks of 512 a row, one step of loads */
#define SKA_MAX_LOADS 32

static const char *const k_ska_names[] = {"mb", "ks", "u", "nw", "w"};

typedef struct ska_cfg {
  int mb, ks, u, nw, w;
} ska_cfg_t;

static int ska_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return arch->kind == HK_TARGET_HIP && arch->matrix == HKC_MATRIX_MFMA &&
         (arch->wave_size == 0 || arch->wave_size == 64) && key->op == HK_OP_GEMM && key->trans_b &&
         (key->dtype == HK_DTYPE_F16 || key->dtype == HK_DTYPE_BF16) && key->align >= 8 && key->align % 8 == 0 &&
         !key->rope && !key->norm_c && !key->dual && !hkc_gemm_quant_b(key) && !hkc_gemm_fp8_act(key);
}

/* params -> cfg: "mb=R" and then any prefix of the optional ones, in order ("": the defaults at
 * mb 8); -1 when not canonical or not legal */
static int ska_parse(const char *params, ska_cfg_t *c) {
  int vals[5] = {8, SKA_KS, SKA_U, SKA_NW, SKA_WARPS};
  int n = 0;
  if (params[0]) {
    for (n = 5; n >= 1; n--)
      if (hkc_tune_params_parse(params, k_ska_names, n, vals) == 0) break;
    if (n < 1) return -1;
  }
  *c = (ska_cfg_t){vals[0], vals[1], vals[2], vals[3], vals[4]};
  if (c->mb != 1 && c->mb != 2 && c->mb != 4 && c->mb != 8) return -1;
  if (c->ks != 1 && c->ks != 2 && c->ks != 4 && c->ks != 8) return -1;
  if (c->nw < 1 || c->nw > 4 || c->u < 1 || c->u > 16 || c->nw * c->u > SKA_MAX_LOADS) return -1;
  if (c->w < c->ks || c->w > 16 || c->w % c->ks) return -1;
  return 0;
}

/* The canonical string of c: trailing parameters at their defaults left out */
static void ska_format(const ska_cfg_t *c, char *out, size_t size) {
  const int vals[5] = {c->mb, c->ks, c->u, c->nw, c->w}, defaults[5] = {0, SKA_KS, SKA_U, SKA_NW, SKA_WARPS};
  int n = 5;
  while (n > 1 && vals[n - 1] == defaults[n - 1]) n--;
  size_t at = 0;
  out[0] = '\0';
  for (int j = 0; j < n && at < size; j++) {
    const int len = snprintf(out + at, size - at, "%s%s=%d", j ? "," : "", k_ska_names[j], vals[j]);
    at += len > 0 ? (size_t)len : 0;
  }
}

/* The key's configuration: its tune string's when the key names gemm_skinny_amd, else the
 * defaults at mb 8 */
static ska_cfg_t ska_key_cfg(const hkc_kernel_key_t *key) {
  ska_cfg_t c = {8, SKA_KS, SKA_U, SKA_NW, SKA_WARPS};
  if (strncmp(key->variant, "gemm_skinny_amd", HKC_TUNE_VARIANT_MAX) == 0 && key->tune[0] &&
      ska_parse(key->tune, &c) != 0)
    c = (ska_cfg_t){8, SKA_KS, SKA_U, SKA_NW, SKA_WARPS};
  return c;
}

int hkc_gemm_skinny_amd_params(int64_t m, char *out, size_t size) {
  const ska_cfg_t c = {m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8, SKA_KS, SKA_U, SKA_NW, SKA_WARPS};
  ska_format(&c, out, size);
  ska_cfg_t check;
  return ska_parse(out, &check);
}

static int ska_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                          hkc_tile_cfg_t *out) {
  (void)arch;
  ska_cfg_t c;
  if (ska_parse(params, &c) != 0) return -1;
  memset(out, 0, sizeof *out);
  snprintf(out->variant, sizeof out->variant, "gemm_skinny_amd");
  ska_format(&c, out->tune, sizeof out->tune);
  out->bm = c.mb;
  out->bn = c.w / c.ks * c.nw;
  out->bk = 512 * c.u * c.ks;
  out->threads = 64 * c.w;
  out->inflight = c.u;
  out->shared_bytes = c.ks > 1 ? (uint32_t)(c.w * (c.mb * c.nw + (key->norm_a ? c.mb : 0)) * 4) : 0; /* ska_red */
  return 0;
}

/* A's 16-byte loads issued with B's, at most (4 VGPRs each): gfx908 has 256 VGPRs a lane, gfx90a
 * and later 512 -- at 8 there the folded norm's mb=2 form needs 130, one wave per SIMD */
static int ska_ahead(const hkc_gpu_arch_t *arch) {
  return arch->name && strncmp(arch->name, "gfx908", 6) == 0 ? 4 : 8;
}

static void ska_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const ska_cfg_t c = ska_key_cfg(key);
  snprintf(out, size,
           "#define HK_THREADS %d\n#define HK_SK_WARPS %d\n#define HK_SK_NW %d\n#define HK_SK_U %d\n"
           "#define HK_SK_MB %d\n#define HK_SK_KS %d\n#define HK_SKA_AHEAD %d\n",
           64 * c.w, c.w, c.nw, c.u, c.mb, c.ks, ska_ahead(arch));
}

static void ska_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                       uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)arch;
  const ska_cfg_t c = ska_key_cfg(key);
  const int64_t m = hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_M), n = hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_N);
  const int64_t units = hkc_variant_ceil_div(n, c.nw) * hkc_variant_ceil_div(m, c.mb);
  hkc_variant_launch_1d(hkc_variant_ceil_div(units, c.w / c.ks), 64 * c.w, 0, out_grid, out_block, out_shared);
}

const hkc_variant_t hkc_variant_gemm_skinny_amd = {
    .name = "gemm_skinny_amd",
    .template_path = "gpu/gemm_skinny_amd.hip",
    .applies = ska_applies,
    .defines = ska_defines,
    .launch = ska_launch,
    .norm_a = 1, /* the folded rmsnorm of the one-row buckets (fusion_model.c, norm_fold_rows) */
    .tune_parse = ska_tune_parse,
    .params = k_ska_names,
    .n_params = 5,
    .n_required_params = 1,
    .rules = "mb 1, 2, 4 or 8; ks 1, 2, 4 or 8; u 1..16; nw 1..4; nw u <= 32; w a multiple of ks, at most 16",
};
