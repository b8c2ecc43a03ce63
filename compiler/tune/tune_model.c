/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The analytical model: estimates the time of one GEMM launch for a tile
 * configuration on a target of the target table, so that candidates can be ranked without
 * a GPU (every gfx target, and sm_* targets on a build machine). docs/TUNING.md explains
 * it with a worked example.
 *
 * Per configuration (C tile bm x bn, K step bk, threads, k tiles in flight, persistent or
 * not, efficiency; hkc_tile_cfg_t) and launch (M, N, K, element size), with U = the
 * target's SMs / CUs:
 *
 *   tiles   = ceil(M / bm) * ceil(N / bn)          edge tiles cost a full tile (masked)
 *   S       = split_k (1 without): S blocks per tile, each over ceil(K / bk) / S k steps
 *   n_sm    = ceil(S tiles / U)                     blocks on the busiest SM (wave
 *                                                   quantization: the scheduler spreads
 *                                                   blocks evenly, co-resident blocks share
 *                                                   the SM's matrix units)
 *   b       = blocks sharing an SM at once: min(resident blocks per SM from hkc_occupancy
 *             with the kernel's registers and shared memory, n_sm); 1 for persistent grids
 *             (one block per SM)
 *   R_sm    = matrix_tflops_f16 / U * efficiency    the SM's matrix rate for this kernel
 *   t_mma   = 2 bm bn bk / R_sm                     one k step of one tile
 *   t_xfer  = (bm + bn) bk elem / (L2_OVER_HBM * hbm_gbps / U)
 *                                                   the k step's A and B tiles at the SM's
 *                                                   share of L2 bandwidth: small tiles reuse
 *                                                   each loaded element less
 *   t_step  = max(t_mma, t_xfer, (L + t_xfer) / (inflight * b))
 *                                                   the last term is Little's law: an SM has
 *                                                   inflight * b k tiles of loads in flight,
 *                                                   each arriving after the latency L plus its
 *                                                   transfer; a shallow pipeline makes the k
 *                                                   loop latency-bound
 *   main    = n_sm * ceil(ceil(K / bk) / S) * t_step
 *   t_epi   = bm bn elem (1 + epilogue tensors) / (hbm_gbps / U)
 *                                                   writing a tile (and reading the residual
 *                                                   / multiplier) at the SM's bandwidth share
 *   fill    = L + t_xfer                            the first k tile of a tile arriving
 *   over    = persistent: fill + n_sm t_epi         the next tile's loads overlap the
 *                                                   epilogue: one pipeline fill per block
 *             else:       n_sm (fill + t_epi) / b   a fill per tile; other resident blocks
 *                                                   compute meanwhile
 *   red     = (S - 1) bm bn 4 / (L2_OVER_HBM * hbm_gbps / U)
 *                                                   split-K over a cluster: one block reads the
 *                                                   others' f32 partial tiles (distributed
 *                                                   shared memory, taken at the SM's L2 share)
 *             split_global: (n_sm + ceil(tiles / U) (S - 1)) bm bn 4 / (L2_OVER_HBM * hbm_gbps / U)
 *                           + n_sm L / b
 *                                                   split-K through the launch's scratch: every
 *                                                   block stores its partial tile, the last of a
 *                                                   tile reads the S - 1 others; each block
 *                                                   waits out a counter's round trip (L) unless
 *                                                   co-resident blocks compute meanwhile
 *   t_sm    = main + over + red
 * Stream-K (stream_k = T > 0; a persistent grid, gemm_streamk.h): the tiles' ceil(K / bk)
 * k steps each, I in all, go to G = hk_sk_grid(tiles, k steps, U, T) blocks, so
 *   main    = ceil(I / G) t_step                    the busiest block's k steps
 *   over    = fill + ceil(tiles / G) t_epi          one pipeline fill; the epilogues spread
 *   red     = 3 bm bn 4 / (L2_OVER_HBM * hbm_gbps / U) + L
 *                                                   a block stores at most two partial tiles
 *                                                   and, finishing a split tile, reads about one
 *                                                   more; one counter round trip (0 when the
 *                                                   tiles fill whole waves: no stream-K tiles)
 *   t_mem   = max(compulsory / hbm_gbps, operand traffic / (L2_OVER_HBM * hbm_gbps))
 *             compulsory = (M K + K N + M N (1 + epilogue tensors) + N bias) elem: every
 *             tensor once; operand traffic = (M K ceil(N/bn) + K N ceil(M/bm)) elem: A is
 *             re-read for every column of tiles and B for every row (tile reuse), served by
 *             L2
 *   time    = max(t_sm, t_mem)
 *
 * The efficiency of each variant (and tile width) is measured where a measurement exists
 * and cited where it is set (variant_gemm_nv.c, variant_amd.c). Ties rank by fewer
 * resources (tune.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "tune/tune.h"

/* the stream-K schedule's grid, as the kernel and its launch have it */
#define HK_SK_FN static inline
#include "gpu/gemm_streamk.h"
/* attention_mma's grouped-query row packing, as the kernel tiles it */
#define HK_GP_FN static inline
#include "gpu/attention_gp.h"

/* Global-memory load latency under load, seconds. NVIDIA: microbenchmarks of Hopper and
 * Ampere put an HBM load at 480-750 ns unloaded and over 800 ns under load; AMD CDNA2: HBM
 * loads take about 1 us (vendor optimisation guides; CDNA latency microbenchmarks). The
 * model only needs the order of magnitude: it decides whether a pipeline of one or two
 * k tiles keeps the matrix units busy. */
#define MODEL_LATENCY_NV 0.8e-6
#define MODEL_LATENCY_AMD 1.0e-6
/* L2 bandwidth over HBM bandwidth, for operand traffic that hits L2: about 2x on H100/H200
 * (L2 ~10 TB/s measured by microbenchmarks vs 4.8 TB/s HBM) and on MI250X/MI300X
 * (vendor figures); a conservative round number. */
#define MODEL_L2_OVER_HBM 2.0
/* An L2 hit's latency, seconds: Hopper and Ampere microbenchmarks put it at 200-300 ns (about
 * 260 cycles at 1.4-1.8 GHz); used for loads that other blocks brought into L2 just before. */
#define MODEL_L2_LATENCY 0.3e-6

uint32_t hkc_model_blocks_per_cu(const hkc_gpu_arch_t *arch, const hkc_tile_cfg_t *cfg, uint32_t regs,
                                 uint32_t agprs, uint32_t sgprs) {
  hkc_kernel_out_t k;
  memset(&k, 0, sizeof k);
  k.vgprs = regs;
  k.agprs = agprs;
  k.sgprs = sgprs;
  k.shared_bytes = cfg->shared_bytes;
  k.wave_size = arch->wave_size;
  k.max_block = (uint32_t)cfg->threads;
  uint32_t occ = hkc_occupancy(arch, &k, (uint32_t)cfg->threads, NULL, NULL);
  if (arch->kind == HK_TARGET_CUDA || occ == 0) return occ; /* NVIDIA: blocks per SM */
  /* AMD: waves per SIMD -> workgroups per CU */
  const uint32_t waves = ((uint32_t)cfg->threads + arch->wave_size - 1) / arch->wave_size;
  const uint32_t per_cu = occ * arch->simds_per_cu / (waves ? waves : 1);
  return per_cu ? per_cu : 1;
}

int hkc_model_meets_floor(const hkc_gpu_arch_t *arch, const hkc_tile_cfg_t *cfg, uint32_t per_cu) {
  const uint32_t warps = ((uint32_t)cfg->threads + arch->wave_size - 1) / arch->wave_size;
  return per_cu > 0 && per_cu * warps >= arch->simds_per_cu;
}

static double ceil_div_d(int64_t a, int64_t b) { return a <= 0 ? 0.0 : (double)((a + b - 1) / b); }

int hkc_model_estimate(const hkc_gpu_arch_t *arch, const hkc_tile_cfg_t *cfg, hkc_tune_shape_t shape,
                       hk_dtype_t dtype, int epilogue_tensors, int has_bias, uint32_t per_cu,
                       hkc_model_est_t *out) {
  memset(out, 0, sizeof *out);
  if (per_cu == 0 || cfg->bm <= 0 || cfg->bn <= 0 || cfg->bk <= 0 || arch->compute_units == 0) return -1;
  const double elem = (double)hkc_dtype_size(dtype);
  const double units = arch->compute_units;
  const double tiles_m = ceil_div_d(shape.m, cfg->bm), tiles_n = ceil_div_d(shape.n, cfg->bn);
  const double tiles = tiles_m * tiles_n;
  const double split = cfg->split_k > 1 ? cfg->split_k : 1;
  const double n_sm = ceil(tiles * split / units);
  double b = cfg->persistent ? 1.0 : (double)per_cu;
  if (b > n_sm) b = n_sm;
  if (b < 1) b = 1;
  const double latency = arch->kind == HK_TARGET_HIP ? MODEL_LATENCY_AMD : MODEL_LATENCY_NV;
  const double efficiency = cfg->efficiency > 0 ? cfg->efficiency : 0.5;
  const double r_sm = arch->matrix_tflops_f16 * 1e12 / units * efficiency;
  const double bw = arch->hbm_gbps * 1e9;
  const double t_mma = 2.0 * cfg->bm * cfg->bn * cfg->bk / r_sm;
  const double t_xfer = (double)(cfg->bm + cfg->bn) * cfg->bk * elem / (MODEL_L2_OVER_HBM * bw / units);
  const double t_lat = (latency + t_xfer) / ((cfg->inflight > 0 ? cfg->inflight : 1) * b);
  double t_step = t_mma > t_xfer ? t_mma : t_xfer;
  if (t_lat > t_step) t_step = t_lat;
  const double k_steps = ceil_div_d(shape.k, cfg->bk);
  const double t_epi = (double)cfg->bm * cfg->bn * elem * (1 + epilogue_tensors) / (bw / units);
  const double fill = latency + t_xfer;
  const double l2_share = MODEL_L2_OVER_HBM * bw / units, partial = cfg->bm * cfg->bn * 4.0;
  double main_loop = n_sm * ceil(k_steps / split) * t_step;
  double over = cfg->persistent ? fill + n_sm * t_epi : n_sm * (fill + t_epi) / b;
  double red = (split - 1) * partial / l2_share;
  if (cfg->split_global && split > 1)
    red = (n_sm + ceil(tiles / units) * (split - 1)) * partial / l2_share + n_sm * latency / b;
  if (cfg->stream_k > 0) {
    const long long grid = hk_sk_grid((long long)tiles, (long long)k_steps, (long long)units, cfg->stream_k);
    const hk_sk_plan_t plan = hk_sk_plan((long long)tiles, (long long)k_steps, grid);
    main_loop = ceil(tiles * k_steps / (double)grid) * t_step;
    over = fill + ceil(tiles / (double)grid) * t_epi;
    red = plan.sk_iters > 0 ? 3 * partial / l2_share + latency : 0.0; /* no split tile: data-parallel */
  }
  const double t_sm = main_loop + over + red;
  const double m = (double)shape.m, n = (double)shape.n, k = (double)shape.k;
  const double compulsory = (m * k + k * n + m * n * (1 + epilogue_tensors) + (has_bias ? n : 0)) * elem;
  const double operands = (m * k * tiles_n + k * n * tiles_m) * elem;
  const double t_hbm = compulsory / bw, t_l2 = operands / (MODEL_L2_OVER_HBM * bw);
  const double t_mem = t_hbm > t_l2 ? t_hbm : t_l2;
  out->t_sm = t_sm;
  out->t_mem = t_mem;
  out->seconds = t_sm > t_mem ? t_sm : t_mem;
  out->tiles = (int64_t)tiles;
  out->per_cu = per_cu;
  out->limiter = t_mem > t_sm ? "memory" : t_step == t_mma ? "compute" : t_step == t_xfer ? "bandwidth" : "latency";
  return 0;
}

/* ---- attention (attention_tma) -----------------------------------------------------------------
 * One launch of B H ceil(Sq / bm) work tiles (bm query rows, bn keys per K/V tile, bk = dh), on U
 * SMs with b = min(blocks per SM, ceil(tiles / U)) blocks sharing an SM:
 *   R_sm    = matrix_tflops_f16 / U * efficiency
 *   t_mma   = 4 bm bn dh / R_sm                     S = Q K^T and O += P V of one key tile
 *   t_xfer  = 2 bn dh elem / (L2_OVER_HBM hbm / U)  its K and V at the SM's share of L2
 *   t_step  = b max(t_mma, t_xfer, (L + t_xfer) / (inflight b))
 *   t_tile  = keys(tile) t_step + b bm dh elem / (hbm / U)   + the output tile's store;
 *             keys(tile) = ceil(Skv / bn), causal ceil(min(Skv, (qt + 1) bm) / bn)
 *   t_sm    = the busiest of U b block slots when the tiles are dealt in the kernel's order
 *             (hk_at_decode: sections of query heads that fit the L2 budget, query tiles
 *             descending when causal): persistent, tile t to block t % grid, + one pipeline fill
 *             (L + the first Q and K/V); otherwise each tile to the slot that frees first, + a
 *             fill per tile / b
 *   t_mem   = max(every tensor once / hbm, K/V read once per query tile / (L2_OVER_HBM hbm))
 *   time    = max(t_sm, t_mem)
 * The per-configuration efficiency is the variant's (variant_attention_nv.c). */
#define MODEL_ATTN_L2_BYTES (24ll << 20) /* templates/gpu/attention_tma.hip HK_AT_L2_BYTES */
#define MODEL_ATTN_MAX_SIM (1 << 20)     /* tiles dealt one by one; beyond: the average */

/* A min-heap of slot finish times (the next free slot on top). */
static void heap_down(double *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && h[l] < h[m]) m = l;
    if (r < n && h[r] < h[m]) m = r;
    if (m == i) return;
    const double t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

/* ---- attention_mma and split-KV (cfg->split_kv = S >= 1) ----------------------------------------
 * T = B H ceil(Sq / bm) tiles, each in S pieces, one block per piece (not persistent); a piece
 * takes ceil(kt / S) of its tile's kt = ceil(Skv / bn) key tiles (causal: rows see keys up to
 * their own, so a tile's kt is ceil(min(Skv, (qt + 1) bm) / bn), taken here as the mean over the
 * tiles), b = min(blocks per SM, ceil(T S / U)) blocks share an SM:
 *   rows    = bm, or min(bm, Sq rounded up to 16) when S > 1 (warps without a query row skip
 *             their matrix work)
 *   t_mma   = 4 rows bn dh / R_sm;  t_xfer = 2 bn dh elem / (L2_OVER_HBM hbm / U)
 *   t_step  = b max(t_mma, t_xfer, (L + t_xfer) / b)    one key tile ahead (cp.async double buffer)
 *   t_piece = ceil(kt / S) t_step + L + (bm + 2 bn) dh elem / (L2_OVER_HBM hbm / U)   + a fill
 *             + the output tile: S = 1 bm dh elem / (hbm / U); S > 1 the piece's partial, min(bm, Sq)
 *             (dh + 2) 4 bytes at the SM's L2 share
 *   t_sm    = ceil(T S / (U b)) t_piece
 *             + S > 1: ceil(T / (U b)) (3 L + S min(bm, Sq) (dh + 2) 4 / (L2_OVER_HBM hbm / U))
 *             the tiles' merges, on the critical path: the partial's stores acknowledged before
 *             the arrival (release), the counter's round trip, then the last piece reads every
 *             partial
 *   t_mem   = max((q, k, v, out once + S > 1: the partials written and read) / hbm,
 *             K/V once per tile / (L2_OVER_HBM hbm))
 * So a split pays when T is far below the SMs and kt is long (a decode step: T = B H, kt in the
 * hundreds), and costs three latencies and the partials' traffic: not on short keys.
 * Grouped-query row packing (cfg->gqa_pack; templates/gpu/attention_gp.h): a tile holds hg =
 * min(group, bm) query heads of qc = min(Sq, bm / hg) queries, T = B (H / group) ceil(group / hg)
 * ceil(Sq / qc); its rows hg qc (rounded up to 16: warps without a row skip their matrix work,
 * split or not) stand for min(bm, Sq) above, causal tiles end at (qt + 1) qc, and K/V is read
 * once per tile: the L2 term counts the T tiles' key tiles, and only the ceil(group / hg) tiles
 * of a kv head (not its group of query heads) share a load in L2. No packing (group 1): no
 * estimate, it would be the unpacked kernel's work. */
static int estimate_attention_mma(const hkc_gpu_arch_t *arch, const hkc_tile_cfg_t *cfg, hkc_tune_shape_t shape,
                                  hk_dtype_t dtype, uint32_t per_cu, hkc_model_est_t *out) {
  const double elem = (double)hkc_dtype_size(dtype), units = arch->compute_units, dh = (double)cfg->bk;
  const double S = cfg->split_kv, bm = cfg->bm, bn = cfg->bn;
  const hk_attn_gp_t gp = hk_attn_gp_geom(shape.heads, shape.kv_heads, shape.m, cfg->bm);
  if (cfg->gqa_pack && gp.group <= 1) return -1;
  const int64_t span = cfg->gqa_pack ? gp.qc : cfg->bm; /* queries per tile and head */
  const double q_tiles = ceil_div_d(shape.m, span);
  const double tiles = cfg->gqa_pack ? (double)shape.batch * gp.groups * gp.hc * q_tiles
                                     : (double)shape.batch * shape.heads * q_tiles;
  double kt = ceil_div_d(shape.n, cfg->bn);
  if (shape.causal) { /* the mean over the query tiles of ceil(min(Skv, (qt + 1) span) / bn) */
    double sum = 0;
    for (int64_t qt = 0; qt < (int64_t)q_tiles && qt < MODEL_ATTN_MAX_SIM; qt++) {
      const int64_t keys = (qt + 1) * span < shape.n ? (qt + 1) * span : shape.n;
      sum += ceil_div_d(keys, cfg->bn);
    }
    kt = q_tiles > MODEL_ATTN_MAX_SIM ? (kt + 1) / 2 : sum / q_tiles;
  }
  const double blocks = tiles * S;
  double b = per_cu;
  if (b > ceil(blocks / units)) b = ceil(blocks / units);
  if (b < 1) b = 1;
  /* grouped-query heads read the same K/V tiles at about the same time (adjacent blocks): one
   * of a group's loads goes to HBM, the others hit L2 */
  const double group = cfg->gqa_pack ? (double)gp.hc /* the tiles of a kv head */
                      : shape.heads >= shape.kv_heads ? (double)shape.heads / shape.kv_heads : 1.0;
  const double hbm_latency = arch->kind == HK_TARGET_HIP ? MODEL_LATENCY_AMD : MODEL_LATENCY_NV;
  const double latency = hbm_latency / group + MODEL_L2_LATENCY * (1.0 - 1.0 / group);
  const double bw = arch->hbm_gbps * 1e9, l2_share = MODEL_L2_OVER_HBM * bw / units;
  const double r_sm = arch->matrix_tflops_f16 * 1e12 / units * cfg->efficiency;
  const double rows_q = cfg->gqa_pack ? (double)(gp.hg * gp.qc) : shape.m < cfg->bm ? (double)shape.m : bm;
  double rows = bm;
  if ((S > 1 || cfg->gqa_pack) && 16 * ceil(rows_q / 16) < rows) rows = 16 * ceil(rows_q / 16);
  const double t_mma = 4.0 * rows * bn * dh / r_sm;
  const double t_xfer = 2.0 * bn * dh * elem / l2_share;
  const double t_lat = (latency + t_xfer) / b;
  double t_step = t_mma > t_xfer ? t_mma : t_xfer;
  if (t_lat > t_step) t_step = t_lat;
  t_step *= b;
  const double fill = latency + (bm + 2.0 * bn) * dh * elem / l2_share;
  const double partial = rows_q * (dh + 2) * 4.0;
  const double t_out = S > 1 ? partial / l2_share : (cfg->gqa_pack ? rows_q : bm) * dh * elem / (bw / units);
  const double t_piece = ceil(kt / S) * t_step + fill + t_out;
  double t_sm = ceil(blocks / (units * b)) * t_piece;
  if (S > 1) t_sm += ceil(tiles / (units * b)) * (3 * hbm_latency + S * partial / l2_share);
  const double q_bytes = (double)shape.batch * shape.m * shape.heads * dh * elem;
  const double kv_bytes = 2.0 * shape.batch * shape.n * shape.kv_heads * dh * elem;
  const double scratch = S > 1 ? 2.0 * S * (double)shape.batch * shape.heads * shape.m * (dh + 2) * 4.0 : 0.0;
  const double t_hbm = (2 * q_bytes + kv_bytes + scratch) / bw;
  const double t_l2 = tiles * kt * 2.0 * bn * dh * elem / (MODEL_L2_OVER_HBM * bw);
  const double t_mem = t_hbm > t_l2 ? t_hbm : t_l2;
  out->t_sm = t_sm;
  out->t_mem = t_mem;
  out->seconds = t_sm > t_mem ? t_sm : t_mem;
  out->tiles = (int64_t)tiles;
  out->per_cu = per_cu;
  out->limiter = t_mem > t_sm ? "memory" : t_step == t_mma * b ? "compute" : t_step == t_xfer * b ? "bandwidth" : "latency";
  return 0;
}

int hkc_model_estimate_attention(const hkc_gpu_arch_t *arch, const hkc_tile_cfg_t *cfg, hkc_tune_shape_t shape,
                                 hk_dtype_t dtype, uint32_t per_cu, hkc_model_est_t *out) {
  memset(out, 0, sizeof *out);
  if (per_cu == 0 || cfg->bm <= 0 || cfg->bn <= 0 || cfg->bk <= 0 || cfg->efficiency <= 0 || arch->compute_units == 0 ||
      shape.m <= 0 || shape.n <= 0 || shape.batch <= 0 || shape.heads <= 0 || shape.kv_heads <= 0)
    return -1;
  if (cfg->split_kv > 0) return estimate_attention_mma(arch, cfg, shape, dtype, per_cu, out);
  const double elem = (double)hkc_dtype_size(dtype), units = arch->compute_units, dh = (double)cfg->bk;
  const int64_t q_tiles = (shape.m + cfg->bm - 1) / cfg->bm, pairs = shape.batch * shape.heads;
  const int64_t tiles = pairs * q_tiles;
  double b = per_cu;
  if (b > ceil((double)tiles / units)) b = ceil((double)tiles / units);
  if (b < 1) b = 1;
  const double latency = arch->kind == HK_TARGET_HIP ? MODEL_LATENCY_AMD : MODEL_LATENCY_NV;
  const double bw = arch->hbm_gbps * 1e9, r_sm = arch->matrix_tflops_f16 * 1e12 / units * cfg->efficiency;
  const double t_mma = 4.0 * cfg->bm * cfg->bn * dh / r_sm;
  const double t_xfer = 2.0 * cfg->bn * dh * elem / (MODEL_L2_OVER_HBM * bw / units);
  const double t_lat = (latency + t_xfer) / ((cfg->inflight > 0 ? cfg->inflight : 1) * b);
  double t_step = t_mma > t_xfer ? t_mma : t_xfer;
  if (t_lat > t_step) t_step = t_lat;
  t_step *= b; /* b blocks share the SM's tensor cores */
  const double t_epi = b * cfg->bm * dh * elem / (bw / units);
  const double fill = latency + (cfg->bm + 2.0 * cfg->bn) * dh * elem / (MODEL_L2_OVER_HBM * bw / units);
  const int64_t full_keys = (shape.n + cfg->bn - 1) / cfg->bn;
  /* the kernel's order: sections of hs (b, h) pairs, query tiles outermost (causal: descending) */
  const int64_t group = shape.heads >= shape.kv_heads && shape.heads % shape.kv_heads == 0 ? shape.heads / shape.kv_heads : 1;
  const int64_t kv_per_head = 4 * shape.n * cfg->bk / group;
  int64_t hs = MODEL_ATTN_L2_BYTES / (kv_per_head > 0 ? kv_per_head : 1);
  if (hs >= group) hs -= hs % group;
  if (hs > pairs) hs = pairs;
  if (hs < 1) hs = 1;
  const size_t slots = (size_t)(units * b);
  const int64_t grid = tiles < (int64_t)slots ? tiles : (int64_t)slots;
  double t_sm = 0, key_tiles = 0;
  if (!shape.causal || tiles > MODEL_ATTN_MAX_SIM) {
    const double keys = shape.causal ? (full_keys + 1) / 2.0 : (double)full_keys; /* causal beyond the cap: the mean */
    key_tiles = keys * (double)tiles;
    t_sm = ceil((double)tiles / (double)slots) * (keys * t_step + t_epi) + (cfg->persistent ? fill : 0) +
           (cfg->persistent ? 0 : ceil((double)tiles / (double)slots) * fill / b);
  } else {
    double *load = calloc(slots, sizeof *load);
    if (!load) return -1;
    for (int64_t t = 0; t < tiles; t++) {
      const int64_t per = hs * q_tiles, sec = t / per, r = t - sec * per;
      const int64_t n = pairs - sec * hs < hs ? pairs - sec * hs : hs;
      const int64_t qt = q_tiles - 1 - r / n;
      int64_t keys = ((qt + 1) * cfg->bm < shape.n ? (qt + 1) * cfg->bm : shape.n);
      keys = (keys + cfg->bn - 1) / cfg->bn;
      key_tiles += (double)keys;
      const double tt = (double)keys * t_step + t_epi + (cfg->persistent ? 0 : fill / b);
      if (cfg->persistent) {
        load[t % grid] += tt;
      } else { /* the slot that frees first */
        load[0] += tt;
        heap_down(load, slots, 0);
      }
    }
    for (size_t i = 0; i < slots; i++)
      if (load[i] > t_sm) t_sm = load[i];
    if (cfg->persistent) t_sm += fill;
    free(load);
  }
  const double q_bytes = (double)shape.batch * shape.m * shape.heads * dh * elem;
  const double kv_bytes = 2.0 * shape.batch * shape.n * shape.kv_heads * dh * elem;
  const double compulsory = 2 * q_bytes + kv_bytes; /* q, k, v once, the output once */
  const double operands = key_tiles * 2.0 * cfg->bn * dh * elem;
  const double t_hbm = compulsory / bw, t_l2 = operands / (MODEL_L2_OVER_HBM * bw);
  const double t_mem = t_hbm > t_l2 ? t_hbm : t_l2;
  out->t_sm = t_sm;
  out->t_mem = t_mem;
  out->seconds = t_sm > t_mem ? t_sm : t_mem;
  out->tiles = tiles;
  out->per_cu = per_cu;
  out->limiter = t_mem > t_sm ? "memory" : t_step == t_mma * b ? "compute" : t_step == t_xfer * b ? "bandwidth" : "latency";
  return 0;
}
