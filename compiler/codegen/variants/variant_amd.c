/* AMD CDNA matrix-core variants (see variant.h): "gemm_mfma" and "attention_mfma",
 * templates/gpu/{gemm,attention}_mfma.hip on the tile library templates/gpu/tile_amd.h.
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

/* ---- gemm_mfma ---------------------------------------------------------------------------
 * params "bm=B,bn=B,bk=K": C tile bm x bn (64, 128 or 256 each: 2 x 2 waves of 32x32
 * fragments), K step bk (32 or 64), within the template's limits: LDS of the two buffers
 * 2 (bm + bn)(bk + HK_LDS_PAD) 2 bytes <= 64 KiB, whole 16-byte chunks per thread. */
static const char *const k_mfma_names[] = {"bm", "bn", "bk"};
#define AMD_LDS_PAD 8          /* HK_LDS_PAD of tile_amd.h: LDS rows padded by 16 bytes */
#define AMD_GEMM_LDS_MAX 65536 /* the template's #error bound (one CU's LDS on CDNA1-3) */
/* VGPRs beyond accumulators and staging registers: addressing, fragments and epilogue,
 * from comgr's report of the default (252-260 total with 64 accumulators and 16 staging
 * registers, docs/AMD_KERNELS.md). An estimate for ranking before compiling only. */
#define AMD_GEMM_VGPR_OVERHEAD 176

typedef struct mfma_cfg {
  int bm, bn, bk;
} mfma_cfg_t;

static uint32_t mfma_lds(const mfma_cfg_t *c) { return (uint32_t)(2 * (c->bm + c->bn) * (c->bk + AMD_LDS_PAD) * 2); }

static int mfma_legal(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const mfma_cfg_t *c) {
  const int side_ok = (c->bm == 64 || c->bm == 128 || c->bm == 256) && (c->bn == 64 || c->bn == 128 || c->bn == 256);
  const int kc = c->bk / 8;
  const int acc = c->bm * c->bn / 256, staging = (c->bm * kc / AMD_THREADS + c->bn * kc / AMD_THREADS) * 4;
  return side_ok && (c->bk == 32 || c->bk == 64) && (c->bm * kc) % AMD_THREADS == 0 && (c->bn * kc) % AMD_THREADS == 0 &&
         (key->trans_b || (c->bk * c->bn / 8) % AMD_THREADS == 0) && mfma_lds(c) <= AMD_GEMM_LDS_MAX &&
         mfma_lds(c) <= arch->max_lds_per_block &&
         /* gfx90a+: one 512-per-lane VGPR+AGPR file; gfx908: accumulators in the separate AGPRs */
         (arch->max_vgprs_per_thread > 256
              ? (uint32_t)(acc + staging + AMD_GEMM_VGPR_OVERHEAD) <= arch->max_vgprs_per_thread
              : (uint32_t)acc <= arch->max_vgprs_per_thread &&
                    (uint32_t)(staging + AMD_GEMM_VGPR_OVERHEAD) <= arch->max_vgprs_per_thread);
}

static mfma_cfg_t mfma_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  mfma_cfg_t c = {AMD_GEMM_BM, AMD_GEMM_BN, AMD_GEMM_BK};
  int v[3];
  if (key->variant[0] && strncmp(key->variant, "gemm_mfma", HKC_TUNE_VARIANT_MAX) == 0 && key->tune[0] &&
      hkc_tune_params_parse(key->tune, k_mfma_names, 3, v) == 0) {
    const mfma_cfg_t e = {v[0], v[1], v[2]};
    if (mfma_legal(arch, key, &e)) c = e;
  }
  return c;
}

/* Model figures. Efficiency 0.35: an estimate (no AMD GPU here); it only scales absolute
 * estimates, since gemm_mfma is the one GEMM variant on CDNA and the model ranks its own
 * configurations against each other. */
static void mfma_tile(const mfma_cfg_t *c, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "gemm_mfma");
  snprintf(t->tune, sizeof t->tune, "bm=%d,bn=%d,bk=%d", c->bm, c->bn, c->bk);
  const int kc = c->bk / 8;
  t->bm = c->bm;
  t->bn = c->bn;
  t->bk = c->bk;
  t->threads = AMD_THREADS;
  t->inflight = 1; /* the next K step is loaded into registers during this one's MFMAs */
  t->shared_bytes = mfma_lds(c);
  t->regs = (uint32_t)(c->bm * c->bn / 256 + (c->bm * kc / AMD_THREADS + c->bn * kc / AMD_THREADS) * 4 +
                       AMD_GEMM_VGPR_OVERHEAD);
  t->efficiency = 0.35;
  t->is_default = c->bm == AMD_GEMM_BM && c->bn == AMD_GEMM_BN && c->bk == AMD_GEMM_BK;
}

static int gemm_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                           hkc_tile_cfg_t *out) {
  mfma_cfg_t c = {AMD_GEMM_BM, AMD_GEMM_BN, AMD_GEMM_BK};
  int v[3];
  if (params && params[0]) {
    if (hkc_tune_params_parse(params, k_mfma_names, 3, v) != 0) return -1;
    c = (mfma_cfg_t){v[0], v[1], v[2]};
  }
  if (!mfma_legal(arch, key, &c)) return -1;
  mfma_tile(&c, out);
  return 0;
}

static int gemm_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  static const int sides[] = {128, 256, 64}, bks[] = {32, 64};
  int n = 0;
  if (max > 0 && gemm_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (size_t k = 0; k < 2; k++)
    for (size_t i = 0; i < 3; i++)
      for (size_t j = 0; j < 3; j++) {
        const mfma_cfg_t c = {sides[i], sides[j], bks[k]};
        if (!mfma_legal(arch, key, &c) || n >= max) continue;
        mfma_tile(&c, &out[n]);
        if (!out[n].is_default) n++;
      }
  return n;
}

static int gemm_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return amd_mfma_key(arch, key) && key->op == HK_OP_GEMM && !key->dual; /* dual gemms: the simple kernel */
}

static void gemm_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  amd_common_defines(arch, key, out, size);
  const mfma_cfg_t c = mfma_cfg(arch, key);
  size_t len = strlen(out);
  snprintf(out + len, size - len, "#define HK_BM %d\n#define HK_BN %d\n#define HK_BK %d\n", c.bm, c.bn, c.bk);
}

static void gemm_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                        uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const mfma_cfg_t c = mfma_cfg(arch, key);
  const int64_t m = hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_M), n = hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_N);
  out_grid[0] = clamp_grid(hkc_variant_ceil_div(m, c.bm) * hkc_variant_ceil_div(n, c.bn));
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = AMD_THREADS;
  out_block[1] = out_block[2] = 1;
  *out_shared = 0; /* static LDS only */
}

const hkc_variant_t hkc_variant_gemm_mfma = {
    .name = "gemm_mfma",
    .template_path = "gpu/gemm_mfma.hip",
    .includes = k_amd_includes,
    .applies = gemm_applies,
    .defines = gemm_defines,
    .launch = gemm_launch,
    .tune_space = gemm_tune_space,
    .tune_parse = gemm_tune_parse,
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
  const int64_t batch = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH),
                seq_q = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q),
                heads = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS);
  out_grid[0] = clamp_grid(batch * heads * hkc_variant_ceil_div(seq_q, AMD_ATTN_BQ));
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = AMD_THREADS;
  out_block[1] = out_block[2] = 1;
  *out_shared = 0;
}

const hkc_variant_t hkc_variant_attention_mfma = {
    .name = "attention_mfma",
    .template_path = "gpu/attention_mfma.hip",
    .includes = k_amd_includes,
    .applies = attention_applies,
    .defines = attention_defines,
    .launch = attention_launch,
};
