/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_skinny (templates/gpu/gemm_skinny.hip): GEMMs of a few rows of A on NVIDIA sm_90a --
 * the decode steps of text generation, M = the step's token rows -- that stream B ([N, K], the
 * checkpoints' layout) at the memory's bandwidth on every SM. f16/bf16, align 8, every
 * epilogue but rope and the norm epilogue (bias, activation, multiplier, residual, the dual
 * SwiGLU form, a folded rmsnorm of A).
 *
 * Never the registry's pick for a 16-bit key: the tuner names it for the launches of M <= 8 that
 * it serves (tune.c, skinny_choose; not under the kernel option gemm_skinny=off), whose time is
 * the read of B; the tensor-core variants keep every other launch. The only sm_90a kernel of a gemm that reads 8-bit B itself (a folded dequant, lower.h:
 * half the bytes of the 16-bit read; the build folds only the launches of M <= 8 that it serves).
 * Parameters: "mb=R,ks=S,u=U,nw=C,w=W": rows of A per unit (1, 2, 4 or 8: the smallest power
 * of two >= M; larger M takes several passes), warps sharing a unit's K (1, 2, 4, 8), 16-byte
 * loads per B row in flight per lane (8-bit B: 8-byte; 0: the default), columns per unit (1
 * to 4) and warps per block (a multiple of ks, at most 16). Only mb is required: the others at
 * their defaults are left out of the canonical string. */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"

#define SK_WARPS 4 /* warps per block: several blocks per SM, loads of many warps in flight */
#define SK_NW 2    /* columns (rows of B) per warp */
/* 16-byte loads per B row in flight per lane (8-bit B: twice as many 8-byte loads). A launch is
 * bound by the bytes in flight per SM (~ bandwidth x latency / SMs, some 25-30 KB on an H100).
 * With K split over 2 warps (the default for a 16-bit B) 4 loads of each of a warp's two rows
 * suffice: the H100 ran Llama-3.2-1B's batch-1 decode step (2026-12-07, docs/BENCHMARKS.md,
 * "Generation", tenth run) 35 us faster with 4 than with 8 (the down projection, K = 8192, 19.4
 * us alone against 20.5; at K = 2048 a slice has 4 chunks a row anyway); a dual gemm reads two
 * matrices, 4 loads of each of its four rows. */
#define SK_U 4
#define SK_U_DUAL 4
#define SK_MAX_LOADS 32 /* loads in flight per lane (B matrices x columns x u): 128 registers */

static const char *const k_sk_names[] = {"mb", "ks", "u", "nw", "w"};
static const char *const k_gs_names[] = {"mb"};

typedef struct sk_cfg {
  int mb, ks, u, nw, w; /* u 0: sk_u_default */
} sk_cfg_t;

static int sk_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return arch->kind == HK_TARGET_CUDA && arch->matrix == HKC_MATRIX_WGMMA && key->op == HK_OP_GEMM && key->trans_b &&
         (key->dtype == HK_DTYPE_F16 || key->dtype == HK_DTYPE_BF16) && key->align >= 8 && key->align % 8 == 0 &&
         !key->rope && !key->norm_c && !hkc_gemm_fp8_act(key);
}

static int sk_u_default(const hkc_kernel_key_t *key) {
  const int u = key->dual ? SK_U_DUAL : SK_U;
  return hkc_gemm_quant_b(key) ? 2 * u : u;
}

/* params -> cfg: "mb=R" and then any prefix of the optional ones, in order; -1 when not canonical
 * or not legal for key */
static int sk_parse(const hkc_kernel_key_t *key, const char *params, sk_cfg_t *c) {
  int vals[5] = {8, 1, 0, SK_NW, SK_WARPS};
  int n = 0;
  if (params[0]) {
    for (n = 5; n >= 1; n--)
      if (hkc_tune_params_parse(params, k_sk_names, n, vals) == 0) break;
    if (n < 1) return -1;
  }
  *c = (sk_cfg_t){vals[0], vals[1], vals[2], vals[3], vals[4]};
  const int u = c->u ? c->u : sk_u_default(key);
  const int loads = (key->dual ? 2 : 1) * c->nw * u;
  if (c->mb != 1 && c->mb != 2 && c->mb != 4 && c->mb != 8) return -1;
  if (c->ks != 1 && c->ks != 2 && c->ks != 4 && c->ks != 8) return -1;
  if (c->nw < 1 || c->nw > 4 || c->mb * c->nw > 32 || u < 1 || u > 16 || loads > SK_MAX_LOADS) return -1;
  if (c->w < c->ks || c->w > 16 || c->w % c->ks) return -1;
  return 0;
}

/* The canonical string of c: trailing parameters at their defaults left out */
static void sk_format(const sk_cfg_t *c, char *out, size_t size) {
  const int vals[5] = {c->mb, c->ks, c->u, c->nw, c->w}, defaults[5] = {0, 1, 0, SK_NW, SK_WARPS};
  int n = 5;
  while (n > 1 && vals[n - 1] == defaults[n - 1]) n--;
  size_t at = 0;
  for (int j = 0; j < n && at < size; j++) {
    const int len = snprintf(out + at, size - at, "%s%s=%d", j ? "," : "", k_sk_names[j], vals[j]);
    at += len > 0 ? (size_t)len : 0;
  }
}

/* The key's configuration: its tune string's when the key names `variant` (gemm_skinny), else
 * the defaults at mb 8 */
static sk_cfg_t sk_key_cfg(const hkc_kernel_key_t *key) {
  sk_cfg_t c = {8, 1, 0, SK_NW, SK_WARPS};
  if (strncmp(key->variant, "gemm_skinny", HKC_TUNE_VARIANT_MAX) == 0 && key->tune[0] && sk_parse(key, key->tune, &c) != 0)
    c = (sk_cfg_t){8, 1, 0, SK_NW, SK_WARPS};
  if (!c.u) c.u = sk_u_default(key);
  return c;
}

/* The default split of key's launches: K over 2 warps for a 16-bit B. The H100 ran
 * Llama-3.2-1B's batch-1 decode step (2026-12-07, docs/BENCHMARKS.md, "Generation") at 1.328 ms
 * with ks = 2 at every projection against 1.505 without a split, 1.364 with one column a unit
 * and 1.451 with 8 warps a unit: twice the warps, each with half the serial steps of loads, keep
 * more of the read in flight. An 8-bit B keeps one warp a unit (its split has not run on a GPU). */
static int sk_default_ks(const hkc_kernel_key_t *key) { return hkc_gemm_quant_b(key) ? 1 : 2; }

int hkc_gemm_skinny_params(const hkc_kernel_key_t *key, const char *forced, int64_t m, int64_t n, int64_t k,
                           char *out, size_t size) {
  (void)n;
  (void)k;
  sk_cfg_t c = {8, sk_default_ks(key), 0, SK_NW, SK_WARPS};
  if (forced && forced[0] && sk_parse(key, forced, &c) != 0) return -1;
  c.mb = m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8;
  sk_cfg_t check;
  sk_format(&c, out, size);
  return sk_parse(key, out, &check);
}

static int sk_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                         hkc_tile_cfg_t *out) {
  (void)arch;
  sk_cfg_t c;
  if (sk_parse(key, params, &c) != 0) return -1;
  memset(out, 0, sizeof *out);
  snprintf(out->variant, sizeof out->variant, "gemm_skinny");
  sk_format(&c, out->tune, sizeof out->tune);
  const int u = c.u ? c.u : sk_u_default(key);
  out->bm = c.mb;
  out->bn = c.w / c.ks * c.nw;
  out->bk = 256 * u * c.ks;
  out->threads = 32 * c.w;
  out->inflight = u;
  return 0;
}

static void sk_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  (void)arch;
  const sk_cfg_t c = sk_key_cfg(key);
  snprintf(out, size,
           "#define HK_THREADS %d\n#define HK_SK_WARPS %d\n#define HK_SK_NW %d\n#define HK_SK_U %d\n"
           "#define HK_SK_MB %d\n#define HK_SK_KS %d\n#define HK_SK_BF16 %d\n",
           32 * c.w, c.w, c.nw, c.u, c.mb, c.ks, key->dtype == HK_DTYPE_BF16);
}

static void sk_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                      uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)arch;
  const sk_cfg_t c = sk_key_cfg(key);
  const int64_t m = hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_M), n = hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_N);
  const int64_t units = hkc_variant_ceil_div(n, c.nw) * hkc_variant_ceil_div(m, c.mb);
  hkc_variant_launch_1d(hkc_variant_ceil_div(units, c.w / c.ks), 32 * c.w, 0, out_grid, out_block, out_shared);
}

const hkc_variant_t hkc_variant_gemm_skinny = {
    .name = "gemm_skinny",
    .template_path = "gpu/gemm_skinny.hip",
    .applies = sk_applies,
    .defines = sk_defines,
    .launch = sk_launch,
    /* every thread executes griddepcontrol.wait before it reads A or writes C; before it, only
     * L2 prefetches of B (a param) */
    .pdl = 1,
    .norm_a = 1,
    .quant_b = 1,
    .tune_parse = sk_tune_parse,
    .params = k_sk_names,
    .n_params = 5,
    .n_required_params = 1,
    .rules = "mb 1, 2, 4 or 8 (rows of A per unit); ks 1, 2, 4 or 8 (warps sharing a unit's K); u 0 (the "
             "default) or 1..16 (loads per B row in flight); nw 1..4 (columns per unit, mb nw <= 32); w warps "
             "per block, a multiple of ks, at most 16; at most 32 loads in flight a lane (u nw, twice for a dual)",
};

/* ---- gemm_stream (templates/gpu/gemm_stream.hip) ----------------------------------------------
 * The launches of gemm_skinny with a 16-bit B (tune.c names it in gemm_skinny's place under
 * gemm_stream=on, where A fits: hkc_gemm_stream_fits; opt-in: measured slower on the whole): B streamed into shared memory by the
 * bulk copy engine and multiplied on the tensor cores (mma m16n8k16: a unit is 8 rows of B). A
 * block of GS_WARPS warps, each with a ring of GS_RING_BYTES, at most two blocks per SM, so
 * the next launch's block fits beside them and prefetches while these stream. Parameters: "mb"
 * as gemm_skinny's (rows of A: 1, 2, 4 or 8; A is staged in shared memory for that many). */
#define GS_WARPS 2
#define GS_SEG 256                /* elements of a B row per chunk */
#define GS_RING_BYTES (32 * 1024) /* a warp's ring: two blocks per SM and the next launch's beside them */
#define GS_PREFETCH (32 * 1024)   /* bytes of its rows a warp sends towards L2 before griddepcontrol.wait */

static int gs_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return sk_applies(arch, key) && !hkc_gemm_quant_b(key);
}

static int gs_stage_bytes(const hkc_kernel_key_t *key) { return (key->dual ? 2 : 1) * 8 * (GS_SEG * 2 + 16); }

static int gs_stages(const hkc_kernel_key_t *key) { return GS_RING_BYTES / gs_stage_bytes(key); }

/* The key's mb when it names gemm_stream, else 8 */
static int gs_mb(const hkc_kernel_key_t *key) {
  int mb = 8;
  if (strncmp(key->variant, "gemm_stream", HKC_TUNE_VARIANT_MAX) == 0 && key->tune[0] &&
      hkc_tune_params_parse(key->tune, k_gs_names, 1, &mb) != 0)
    mb = 8;
  return mb;
}

/* Bytes of shared memory for A: mb rows of K rounded up to a 32-element step, plus 8. */
static int64_t gs_a_bytes(int64_t mb, int64_t k) { return mb * ((k + 31) / 32 * 32 + 8) * 2; }

int hkc_gemm_stream_fits(int64_t m, int64_t k) {
  const int mb = m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8;
  return m >= 1 && m <= 8 && k >= 1 && gs_a_bytes(mb, k) <= HKC_GEMM_STREAM_A_BYTES;
}

static int gs_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                         hkc_tile_cfg_t *out) {
  int mb = 8;
  if (params[0] && hkc_tune_params_parse(params, k_gs_names, 1, &mb) != 0) return -1;
  if (mb != 1 && mb != 2 && mb != 4 && mb != 8) return -1;
  if (sk_tune_parse(arch, key, params, out) != 0) return -1;
  snprintf(out->variant, sizeof out->variant, "gemm_stream");
  out->bn = 8 * GS_WARPS;
  out->bk = GS_SEG;
  out->threads = 32 * GS_WARPS;
  out->inflight = gs_stages(key);
  return 0;
}

static void gs_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  (void)arch;
  snprintf(out, size,
           "#define HK_THREADS %d\n#define HK_GS_WARPS %d\n#define HK_GS_SEG %d\n#define HK_GS_STAGES %d\n"
           "#define HK_GS_PREFETCH %d\n#define HK_SK_MB %d\n#define HK_GS_BF16 %d\n",
           32 * GS_WARPS, GS_WARPS, GS_SEG, gs_stages(key), GS_PREFETCH, gs_mb(key), key->dtype == HK_DTYPE_BF16);
}

static void gs_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                      uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const int64_t n = hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_N);
  const int64_t k = hkc_variant_arg_i64(args, n_args, HKC_GEMM_ARG_K);
  int64_t blocks = hkc_variant_ceil_div(hkc_variant_ceil_div(n, 8), GS_WARPS);
  const int64_t cap = 2 * (int64_t)(arch->compute_units ? arch->compute_units : 132);
  if (blocks > cap) blocks = cap;
  const int64_t shared = (int64_t)GS_WARPS * gs_stages(key) * gs_stage_bytes(key) + gs_a_bytes(gs_mb(key), k);
  hkc_variant_launch_1d(blocks < 1 ? 1 : blocks, 32 * GS_WARPS, (uint32_t)shared, out_grid, out_block, out_shared);
}

static const char *const gs_includes[] = {"gpu/tile_nv.h", NULL};

const hkc_variant_t hkc_variant_gemm_stream = {
    .name = "gemm_stream",
    .template_path = "gpu/gemm_stream.hip",
    .includes = gs_includes,
    .applies = gs_applies,
    .defines = gs_defines,
    .launch = gs_launch,
    /* before griddepcontrol.wait: its own mbarriers and L2 prefetches of B only */
    .pdl = 1,
    .norm_a = 1,
    .tune_parse = gs_tune_parse,
    .params = k_gs_names,
    .n_params = 1,
    .rules = "mb 1, 2, 4 or 8 (rows of A)",
};
