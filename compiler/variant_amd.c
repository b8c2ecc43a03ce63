/* AMD CDNA matrix-core variants (see gpu_variant.h): "gemm_mfma" and "attention_mfma",
 * templates/gpu/{gemm,attention}_mfma.hip on the tile library templates/gpu/tile_amd.h.
 * They serve f16/bf16 keys with align 8 (16-byte rows) on HIP targets whose matrix path
 * is MFMA (gfx908, gfx90a, gfx942, gfx950) with wave64; attention only for head_dim 64
 * and 128. Everything else (gfx1030, f32, odd alignments) keeps the simple kernels. */
#include <stdio.h>
#include <string.h>

#include "gpu_variant.h"

/* Tile sizes; the tuner will choose them per arch and shape class later. */
#define AMD_THREADS 256 /* 4 waves of 64 */
#define AMD_GEMM_BM 128
#define AMD_GEMM_BN 128
#define AMD_GEMM_BK 32
#define AMD_ATTN_BQ 128 /* 4 waves x 32 queries */
#define AMD_ATTN_BKV 64

static const char *const k_amd_includes[] = {"gpu/tile_amd.h", NULL};

static int amd_mfma_key(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return arch && key && arch->kind == HK_TARGET_HIP && arch->matrix == HKC_MATRIX_MFMA &&
         (arch->wave_size == 0 || arch->wave_size == 64) &&
         (key->dtype == HK_DTYPE_F16 || key->dtype == HK_DTYPE_BF16) && key->align >= 8;
}

/* gfx908 (CDNA1) lacks the bf16_1k MFMAs of gfx90a and later; tile_amd.h then pairs the
 * older half-k bf16 instructions. */
static void amd_common_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  size_t len = strlen(out);
  const int cdna1 = arch->name && strncmp(arch->name, "gfx908", 6) == 0;
  snprintf(out + len, size - len, "#define HK_THREADS %d\n#define HK_MFMA_BF16 %d\n#define HK_MFMA_BF16_1K %d\n",
           AMD_THREADS, key->dtype == HK_DTYPE_BF16 ? 1 : 0, cdna1 ? 0 : 1);
}

static uint32_t clamp_grid(int64_t blocks) {
  if (blocks < 1) blocks = 1;
  if (blocks > 0x7fffffffLL) blocks = 0x7fffffffLL;
  return (uint32_t)blocks;
}

/* ---- gemm_mfma --------------------------------------------------------------------------- */
static int gemm_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return amd_mfma_key(arch, key) && key->op == HK_OP_GEMM;
}

static void gemm_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  amd_common_defines(arch, key, out, size);
  size_t len = strlen(out);
  snprintf(out + len, size - len, "#define HK_BM %d\n#define HK_BN %d\n#define HK_BK %d\n", AMD_GEMM_BM, AMD_GEMM_BN,
           AMD_GEMM_BK);
}

static void gemm_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                        uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)arch;
  (void)key;
  const int64_t m = hkc_variant_arg_i64(args, n_args, 5), n = hkc_variant_arg_i64(args, n_args, 6);
  out_grid[0] = clamp_grid(hkc_variant_ceil_div(m, AMD_GEMM_BM) * hkc_variant_ceil_div(n, AMD_GEMM_BN));
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = AMD_THREADS;
  out_block[1] = out_block[2] = 1;
  *out_shared = 0; /* static LDS only */
}

const hkc_gpu_variant_t hkc_variant_gemm_mfma = {
    .name = "gemm_mfma",
    .template_path = "gpu/gemm_mfma.hip",
    .includes = k_amd_includes,
    .applies = gemm_applies,
    .defines = gemm_defines,
    .launch = gemm_launch,
};

/* ---- attention_mfma ---------------------------------------------------------------------- */
static int attention_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return amd_mfma_key(arch, key) && key->op == HK_OP_ATTENTION && (key->head_dim == 64 || key->head_dim == 128);
}

static void attention_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  amd_common_defines(arch, key, out, size);
  size_t len = strlen(out);
  snprintf(out + len, size - len, "#define HK_ATTN_DH %d\n#define HK_ATTN_BKV %d\n", key->head_dim, AMD_ATTN_BKV);
}

static void attention_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                             uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)arch;
  (void)key;
  const int64_t batch = hkc_variant_arg_i64(args, n_args, 4), seq_q = hkc_variant_arg_i64(args, n_args, 5),
                heads = hkc_variant_arg_i64(args, n_args, 7);
  out_grid[0] = clamp_grid(batch * heads * hkc_variant_ceil_div(seq_q, AMD_ATTN_BQ));
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = AMD_THREADS;
  out_block[1] = out_block[2] = 1;
  *out_shared = 0;
}

const hkc_gpu_variant_t hkc_variant_attention_mfma = {
    .name = "attention_mfma",
    .template_path = "gpu/attention_mfma.hip",
    .includes = k_amd_includes,
    .applies = attention_applies,
    .defines = attention_defines,
    .launch = attention_launch,
};
