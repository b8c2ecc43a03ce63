/* SPDX-License-Identifier: Apache-2.0 */
/* Memory-bound GPU variants (see variant.h) with 16-byte vector access:
 *   rows_vec16        layernorm, rmsnorm (incl. the fused residual add), softmax
 *                     (templates/gpu/rows_fast.hip)
 *   elementwise_vec16 add, mul, relu, gelu, silu, ewchain (templates/gpu/elementwise_fast.hip)
 * Both serve a key when key.align is a multiple of the elements in 16 bytes (4 for f32,
 * 8 for f16/bf16): every row length (norms, softmax) or operand last dim (element-wise)
 * is a multiple of the vector, and tensors are 16-byte aligned (hk_session_bind checks
 * bound tensors; the arena aligns intermediates to 256). Any arch: the templates are
 * portable (wave32 and wave64). Other keys keep the simple kernels. */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"

/* ---- configurations ------------------------------------------------------------------
 * rows_vec16: threads per block, 16-byte vectors per lane kept in registers (cache), the
 * vectors per lane the group size aims at (target <= cache), blocks per SM asked of ptxas
 * (NVIDIA register cap 65536 / (threads x min_blocks)), next-row prefetch (0/1), and the
 * persistent grid's blocks per CU/SM: params "t=,c=,tg=,mb=,pf=,g=" (key->tune).
 * elementwise_vec16: threads, unroll, blocks per SM, waves of resident blocks and exact
 * activations (x=1: 16-bit gelu/silu through erff/expf): params "t=,u=,mb=,w=,x=".
 * For experiments the kernel options rows_cfg (rows_cfg_f32, rows_cfg_16), ew_cfg and
 * ew_exact_act force them (codegen.h; applied by tune/ through key->tune).
 * Layernorm / rmsnorm keys with has_add (x + add normalised) or has_sum halve CACHE and
 * TARGET of whichever configuration applies (defaults or forced). */
typedef struct rows_cfg {
  int threads, cache, target, min_blocks, prefetch, grid_per_cu;
} rows_cfg_t;

typedef struct ew_cfg {
  int threads, unroll, min_blocks, waves, exact;
} ew_cfg_t;

static const char *const k_rows_names[] = {"t", "c", "tg", "mb", "pf", "g"};
static const char *const k_ew_names[] = {"t", "u", "mb", "w", "x"};

/* The variant's own parameters of a key: key->tune when key->variant names it. */
static const char *tuned_params(const char *variant, const hkc_kernel_key_t *key) {
  return key->variant[0] && strncmp(key->variant, variant, HKC_TUNE_VARIANT_MAX) == 0 ? key->tune : NULL;
}

static int pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }

static int rows_cfg_ok(const rows_cfg_t *c) {
  return c->threads >= 64 && c->threads <= 1024 && pow2(c->threads) && c->cache >= 1 && c->cache <= 64 &&
         c->target >= 1 && c->target <= c->cache && c->min_blocks >= 1 && c->min_blocks <= 32 &&
         (c->prefetch == 0 || c->prefetch == 1) && c->grid_per_cu >= 1 && c->grid_per_cu <= 64;
}

static int ew_cfg_ok(const ew_cfg_t *e) {
  return e->threads >= 64 && e->threads <= 1024 && e->threads % 64 == 0 && e->unroll >= 1 && e->unroll <= 16 &&
         e->min_blocks >= 1 && e->min_blocks <= 32 && e->waves >= 1 && e->waves <= 64 && (e->exact == 0 || e->exact == 1);
}

/* Defaults. NVIDIA 16-bit rows: up to 4 vectors per lane (768 bf16 = 96 vectors: 32 lanes
 * per row; 4096 bf16: 128 lanes), no prefetch, 4 blocks per SM, a persistent grid of 4
 * blocks per SM -- measured on the H200 (docs/device-runs/2026-12-02-rows-sweep/sweep.log:
 * seven configurations, the norms of bert_layer at 128-16384 rows of 768 and llama_block
 * at 512-8192 rows of 4096, alone and in the whole graphs): bert's layernorm 17.4 / 6.7 /
 * 6.1 / 5.6 us at batch 128 / 32 / 8 / 1 against 19.8 / 9.1 / 6.8 / 6.6 for the previous
 * "256,8,8,3,0,3" (which the 2026-11-30 sweep at 4096 columns had chosen: layernorm 3.47
 * vs 3.07 TB/s, softmax 3.23 vs 2.32, rmsnorm 3.51 vs 3.36, docs/device-runs/2026-11-30-ops-final/
 * sweeps.log), llama's rmsnorm at 8192 x 4096 41.1 against 49.5 us, no launch slower by
 * more than 1 us. More lanes per row put more rows' loads in flight per SM on short rows.
 * NVIDIA f32: 32 vectors per lane (4096 f32:
 * one warp per row), no prefetch (the cache alone is 128 registers; ~230 used), one block
 * per SM. AMD: 8 vectors per lane (4096 bf16: one wave64 per row on CDNA), no prefetch.
 * Alternatives for a sweep (no spills on sm_90): "256,16,16,2,0,2" (no prefetch, <= 128
 * registers, 16 warps per SM), "256,8,8,3,0,3" (two warps per row for 4096 bf16). */
static rows_cfg_t rows_default(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  if (arch->kind == HK_TARGET_CUDA)
    return key->dtype == HK_DTYPE_F32 ? (rows_cfg_t){256, 32, 32, 1, 0, 1} : (rows_cfg_t){256, 4, 4, 4, 0, 4};
  return (rows_cfg_t){256, 8, 8, 1, 0, 4};
}

/* The configuration of a key before the has_add / has_sum halving: tuned, else the default. */
static rows_cfg_t rows_base(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  rows_cfg_t c = rows_default(arch, key);
  const char *params = tuned_params("rows_vec16", key);
  int v[6];
  if (params && params[0] && hkc_tune_params_parse(params, k_rows_names, 6, v) == 0) {
    const rows_cfg_t e = {v[0], v[1], v[2], v[3], v[4], v[5]};
    if (rows_cfg_ok(&e)) c = e;
  }
  return c;
}

static rows_cfg_t rows_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  rows_cfg_t c = rows_base(arch, key);
  if ((key->has_add || key->has_sum) && key->op != HK_OP_SOFTMAX) {
    /* two input rows (x, add) per thread: half the vectors per lane keeps the bytes in
     * flight, and the f32 sums take the registers two 16-bit caches would (has_sum alone,
     * a copy of x, spilled at f32's full cache on sm_90) */
    c.cache = c.cache > 1 ? c.cache / 2 : 1;
    c.target = c.target > 1 ? c.target / 2 : 1;
  }
  return c;
}

static ew_cfg_t ew_cfg(const hkc_kernel_key_t *key) {
  /* NVIDIA: no register cap (min 1 block; a cap of 64 made f32 add spill) */
  ew_cfg_t c = {256, 4, 1, 4, 0};
  const char *params = tuned_params("elementwise_vec16", key);
  int v[5];
  if (params && params[0] && hkc_tune_params_parse(params, k_ew_names, 5, v) == 0) {
    const ew_cfg_t e = {v[0], v[1], v[2], v[3], v[4]};
    if (ew_cfg_ok(&e)) c = e;
  }
  return c;
}

/* ---- tuning hooks (parse + legality; the spaces are the defaults plus the measured
 * alternatives, for `hkc tune` once these ops are tunable) ---------------------------------- */
static void rows_tile(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const rows_cfg_t *c, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "rows_vec16");
  snprintf(t->tune, sizeof t->tune, "t=%d,c=%d,tg=%d,mb=%d,pf=%d,g=%d", c->threads, c->cache, c->target,
           c->min_blocks, c->prefetch, c->grid_per_cu);
  t->threads = c->threads;
  t->inflight = 1 + c->prefetch;
  t->persistent = 1;
  const rows_cfg_t d = rows_default(arch, key);
  t->is_default = memcmp(&d, c, sizeof d) == 0;
}

static int rows_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                           hkc_tile_cfg_t *out) {
  rows_cfg_t c = rows_default(arch, key);
  int v[6];
  if (params && params[0]) {
    if (hkc_tune_params_parse(params, k_rows_names, 6, v) != 0) return -1;
    c = (rows_cfg_t){v[0], v[1], v[2], v[3], v[4], v[5]};
    if (!rows_cfg_ok(&c)) return -1;
  }
  rows_tile(arch, key, &c, out);
  return 0;
}

static int rows_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  static const rows_cfg_t alt[] = {{256, 16, 16, 2, 0, 2}, {256, 8, 8, 3, 0, 3}, {256, 16, 16, 1, 1, 1}};
  int n = 0;
  if (max > 0 && rows_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (size_t i = 0; i < sizeof alt / sizeof alt[0] && n < max; i++) {
    rows_tile(arch, key, &alt[i], &out[n]);
    if (!out[n].is_default) n++;
  }
  return n;
}

static void ew_tile(const ew_cfg_t *c, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "elementwise_vec16");
  snprintf(t->tune, sizeof t->tune, "t=%d,u=%d,mb=%d,w=%d,x=%d", c->threads, c->unroll, c->min_blocks, c->waves,
           c->exact);
  t->threads = c->threads;
  t->inflight = c->unroll;
  t->is_default = c->threads == 256 && c->unroll == 4 && c->min_blocks == 1 && c->waves == 4 && c->exact == 0;
}

static int ew_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                         hkc_tile_cfg_t *out) {
  (void)arch;
  (void)key;
  ew_cfg_t c = {256, 4, 1, 4, 0};
  int v[5];
  if (params && params[0]) {
    if (hkc_tune_params_parse(params, k_ew_names, 5, v) != 0) return -1;
    c = (ew_cfg_t){v[0], v[1], v[2], v[3], v[4]};
    if (!ew_cfg_ok(&c)) return -1;
  }
  ew_tile(&c, out);
  return 0;
}

static int ew_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  static const ew_cfg_t alt[] = {{256, 8, 1, 4, 0}, {512, 4, 1, 4, 0}, {128, 8, 2, 3, 0}};
  int n = 0;
  if (max > 0 && ew_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (size_t i = 0; i < sizeof alt / sizeof alt[0] && n < max; i++) {
    ew_tile(&alt[i], &out[n]);
    if (!out[n].is_default) n++;
  }
  return n;
}

static int vec_elems(hk_dtype_t dtype) { return dtype == HK_DTYPE_F32 ? 4 : 8; }

static int vec_ok(const hkc_kernel_key_t *key) {
  return (key->dtype == HK_DTYPE_F32 || key->dtype == HK_DTYPE_F16 || key->dtype == HK_DTYPE_BF16) &&
         key->align > 0 && key->align % vec_elems(key->dtype) == 0;
}

/* Threads one CU/SM holds at most (waves per SIMD x SIMDs x wave size); 2048 if unknown. */
static int64_t threads_per_cu(const hkc_gpu_arch_t *arch) {
  int64_t t = (int64_t)arch->simds_per_cu * arch->max_waves_per_simd * arch->wave_size;
  return t > 0 ? t : 2048;
}

static int64_t cus(const hkc_gpu_arch_t *arch) { return arch->compute_units ? arch->compute_units : 80; }

static void set_1d(uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared, int64_t blocks,
                   int threads) {
  hkc_variant_launch_1d(blocks, (uint32_t)threads, 0, out_grid, out_block, out_shared);
}

/* ---- rows_vec16 ------------------------------------------------------------------------- */
static int rows_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  (void)arch;
  return (key->op == HK_OP_LAYERNORM || key->op == HK_OP_RMSNORM || key->op == HK_OP_SOFTMAX) && vec_ok(key);
}

static void rows_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const rows_cfg_t c = rows_cfg(arch, key);
  const int op = key->op == HK_OP_LAYERNORM ? 1 : key->op == HK_OP_RMSNORM ? 2 : 3;
  size_t len = strlen(out);
  snprintf(out + len, size > len ? size - len : 0,
           "#define HK_THREADS %d\n#define HK_VEC %d\n#define HK_ROW_OP %d\n#define HK_ROW_CACHE %d\n"
           "#define HK_ROW_TARGET %d\n#define HK_ROW_MIN_BLOCKS %d\n#define HK_ROW_PREFETCH %d\n"
           "#define HK_ROW_GRID_PER_CU %d\n#define HK_ROW_FAST_EXP %d\n#define HK_ROW_UNITS %lld\n",
           c.threads, vec_elems(key->dtype), op, c.cache, c.target, c.min_blocks, c.prefetch, c.grid_per_cu,
           key->dtype == HK_DTYPE_F32 ? 0 : 1, (long long)cus(arch));
}

/* The template's rf_group: threads per row -- enough for c->target vectors per lane, more
 * (up to one vector per lane) while the rows would not cover the SMs. */
static int64_t rows_group(const hkc_gpu_arch_t *arch, int64_t nvec, int64_t rows, const rows_cfg_t *c) {
  const int64_t want = hkc_variant_ceil_div(nvec, c->target);
  int64_t g = 1;
  while (g < c->threads && g < want) g <<= 1;
  while (g < c->threads && g < nvec && hkc_variant_ceil_div(rows, c->threads / g) < cus(arch)) g <<= 1;
  return g;
}

/* A tile is threads / g rows; blocks stride over tiles: one block per tile, at most
 * grid_per_cu blocks per CU (persistent; with prefetch each block's next tile is in flight). */
static void rows_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                        uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const rows_cfg_t c = rows_cfg(arch, key);
  const int ln = key->op == HK_OP_LAYERNORM, rms = key->op == HK_OP_RMSNORM;
  const int64_t rows = hkc_variant_arg_i64(args, n_args, ln ? HKC_LAYERNORM_ARG_ROWS : rms ? HKC_RMSNORM_ARG_ROWS : HKC_SOFTMAX_ARG_ROWS);
  const int64_t cols = hkc_variant_arg_i64(args, n_args, ln ? HKC_LAYERNORM_ARG_COLS : rms ? HKC_RMSNORM_ARG_COLS : HKC_SOFTMAX_ARG_COLS);
  const int64_t rpb = c.threads / rows_group(arch, cols / vec_elems(key->dtype), rows, &c);
  int64_t blocks = hkc_variant_ceil_div(rows, rpb);
  const int64_t cap = cus(arch) * c.grid_per_cu;
  if (blocks > cap) blocks = cap;
  set_1d(out_grid, out_block, out_shared, blocks, c.threads);
}

const hkc_variant_t hkc_variant_rows_vec16 = {
    .name = "rows_vec16",
    .template_path = "gpu/rows_fast.hip",
    .includes = NULL,
    .applies = rows_applies,
    .defines = rows_defines,
    .launch = rows_launch,
    .pdl = 1, /* rows_fast.hip's kernel begins with HK_PDL_ENTRY() */
    .tune_space = rows_tune_space,
    .tune_parse = rows_tune_parse,
    .params = k_rows_names,
    .n_params = 6,
    .rules = "t (threads) a power of two in 64..1024; c (vectors cached per lane) 1..64; tg 1..c; mb 1..32; "
             "pf 0 or 1; g (blocks per CU/SM) 1..64",
};

/* ---- elementwise_vec16 ------------------------------------------------------------------ */
static int ew_binary(hk_op_t op) { return op == HK_OP_ADD || op == HK_OP_MUL; }

static int ew_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  (void)arch;
  if (key->op == HK_OP_EWCHAIN) return hkc_variant_ew_operands(key->program) >= 1 && vec_ok(key);
  return (ew_binary(key->op) || key->op == HK_OP_RELU || key->op == HK_OP_GELU || key->op == HK_OP_SILU ||
          key->op == HK_OP_GELU_TANH || key->op == HK_OP_TANH) &&
         vec_ok(key);
}

/* Vectors per thread and operand per step: the configured unroll is for two operands
 * (add, mul); an ewchain of k operands keeps about as many vectors in flight
 * (unroll * 2 / k, at least 1). */
static int ew_unroll(const hkc_kernel_key_t *key, const ew_cfg_t *c) {
  if (key->op != HK_OP_EWCHAIN) return c->unroll;
  const int ops = hkc_variant_ew_operands(key->program);
  const int u = c->unroll * 2 / (ops > 0 ? ops : 1);
  return u > 1 ? u : 1;
}

/* HK_EW_FAST_ACT: gelu / silu for 16-bit outputs through the hardware exp2 and reciprocal
 * (templates/gpu/elementwise_fast.hip: errors ~1e-6 relative, far below the f16/bf16
 * rounding); f32 keeps erff / expf and the IEEE division. ewchain: 3 (its g and s steps). */
static void ew_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  (void)arch;
  const ew_cfg_t c = ew_cfg(key);
  const int fast = key->dtype != HK_DTYPE_F32 &&
                   (key->op == HK_OP_GELU || key->op == HK_OP_SILU || key->op == HK_OP_EWCHAIN) && !c.exact;
  size_t len = strlen(out);
  snprintf(out + len, size > len ? size - len : 0,
           "#define HK_THREADS %d\n#define HK_VEC %d\n#define HK_EW_UNROLL %d\n#define HK_EW_BINARY %d\n"
           "#define HK_EW_CHAIN %d\n#define HK_EW_MIN_BLOCKS %d\n#define HK_EW_WAVES %d\n#define HK_EW_FAST_ACT %d\n",
           c.threads, vec_elems(key->dtype), ew_unroll(key, &c), ew_binary(key->op) ? 1 : 0,
           key->op == HK_OP_EWCHAIN ? 1 : 0, c.min_blocks, c.waves,
           !fast ? 0 : key->op == HK_OP_GELU ? 1 : key->op == HK_OP_SILU ? 2 : 3);
}

/* Enough blocks for one pass of unroll vectors per thread, at most `waves` rounds of
 * the blocks the device holds at once (the kernel strides beyond). */
static void ew_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                      uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const ew_cfg_t c = ew_cfg(key);
  const int64_t n = hkc_variant_arg_i64(args, n_args, key->op == HK_OP_EWCHAIN ? HKC_EWCHAIN_ARG_N
                                             : ew_binary(key->op) ? HKC_BINARY_ARG_N : HKC_UNARY_ARG_N);
  int64_t blocks = hkc_variant_ceil_div(n / vec_elems(key->dtype), (int64_t)c.threads * ew_unroll(key, &c));
  int64_t per_cu = threads_per_cu(arch) / c.threads;
  if (per_cu < 1) per_cu = 1;
  const int64_t cap = cus(arch) * per_cu * c.waves;
  if (blocks > cap) blocks = cap;
  set_1d(out_grid, out_block, out_shared, blocks, c.threads);
}

const hkc_variant_t hkc_variant_elementwise_vec16 = {
    .name = "elementwise_vec16",
    .template_path = "gpu/elementwise_fast.hip",
    .includes = NULL,
    .applies = ew_applies,
    .defines = ew_defines,
    .launch = ew_launch,
    .tune_space = ew_tune_space,
    .tune_parse = ew_tune_parse,
    .params = k_ew_names,
    .n_params = 5,
    .rules = "t (threads) a multiple of 64 in 64..1024; u (unroll) 1..16; mb 1..32; w (waves) 1..64; x 0 or 1",
};
