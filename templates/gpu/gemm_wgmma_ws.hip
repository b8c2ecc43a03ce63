/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_wgmma_ws: C = act(A @ B + bias) * mul + residual on sm_90a, warp-specialized: one
 * producer warpgroup fills a shared-memory ring with cp.async, two consumer warpgroups
 * run wgmma m64nNk16 on it (f32 accumulators in registers, one rounding at the end).
 * f16/bf16, K % 8 == 0, N % 8 == 0, 16-byte-aligned tensors (key align 8). Same ABI as
 * gemm.hip.
 *
 * Macros (compiler/variant_gemm_nv.c): HK_THREADS = 384, HK_TILE_M = 128 (consumer
 * warpgroup 1 owns rows 0..63, warpgroup 2 rows 64..127), HK_TILE_N = the wgmma N (128 or
 * 256; HK_WGMMA the matching tile_wgmma.h wrapper), HK_TILE_K = 64, HK_STAGES ring slots,
 * HK_GROUP_M row tiles per L2 raster group, HK_PACK the dtype's pack, HK_WS_PRODUCER_REGS /
 * HK_WS_CONSUMER_REGS the setmaxnreg budgets.
 *
 * Shared memory (dynamic; the base is aligned up to 1024 bytes here, launch() asks 1 KiB
 * extra), in this order:
 *   A ring   HK_STAGES x [128][64] K-major, hk_swz128 (= wgmma 128-byte swizzle), SBO 1024
 *   B ring   HK_STAGES x (HK_TRANS_B: [HK_TILE_N][64] K-major, as A;
 *                         else HK_TILE_N/64 panels of [64 k][64 n], N-major, LBO 8192, SBO 1024)
 *   E        2 x [64][32] f32: each consumer warpgroup's epilogue staging
 *            (gemm_epilogue_wgmma.h)
 *   bars     full[HK_STAGES], empty[HK_STAGES] mbarriers
 * Same stage layouts and descriptors as gemm_wgmma.hip.
 *
 * Pipeline (no __syncthreads after the set-up). Ring use number u (counting k tiles over
 * all the tiles this block computes, identically in producer and consumers) goes to slot
 * u % S with phase parity (u / S) & 1.
 *   producer (warpgroup 0, 128 threads): wait empty[s] for parity ph ^ 1 (passes at once
 *     on the first round); issue its cp.async copies of the k tile (zero-fill outside
 *     [0,M) x [0,K) resp. [0,K) x [0,N)); cp.async.mbarrier.arrive.noinc on full[s].
 *     full[s] expects 128 arrivals: one per producer thread, each made when that thread's
 *     copies have landed.
 *   consumers (warpgroups 1, 2): wait full[s] for parity ph; fence.proxy.async (the
 *     copies are generic-proxy writes, wgmma reads through the async proxy); wgmma.fence;
 *     4 x wgmma k16; commit; wgmma.wait_group 1 -- the previous k tile's group has
 *     retired, so lane 0 of each consumer warp arrives on empty[previous slot]. empty[s]
 *     expects 8 arrivals (2 warpgroups x 4 warps). After the last k tile: wait_group 0 and
 *     release the last slot.
 *   epilogue (each consumer warpgroup on its own 64 rows, 32 columns at a time): the
 *     accumulators go to E (float2 stores), a warpgroup barrier, then every thread reads 8
 *     consecutive columns of a row, adds the bias (16-byte load), applies the activation,
 *     multiplies by mul and adds the residual (one 16-byte load each) and stores 8 outputs
 *     with one 16-byte store (rows >= M and columns >= N skipped; N % 8 == 0 so 8 columns
 *     are all in or all out); a
 *     second warpgroup barrier before E is rewritten. The producer meanwhile prefetches
 *     the next tile's k tiles (the ring is not used by the epilogue).
 * Tiles: grid-stride over the tiles in grouped raster order; the launch may be persistent
 * (grid = min(tiles, SMs)) or one block per tile. */
#define HK_WS_A_STAGE (128 * 64) /* halves */
#define HK_WS_B_STAGE (HK_TILE_N * 64)
#define HK_WS_NACC (HK_TILE_N / 2)
#define HK_WS_E_FLOATS (64 * 32) /* per consumer warpgroup */
#if HK_TILE_K != 64 || HK_TILE_M != 128 || HK_THREADS != 384 || (HK_TILE_N != 128 && HK_TILE_N != 256) || \
    HK_STAGES < 2
#error "gemm_wgmma_ws: bad tile configuration"
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* The producer's (128 threads, ptid 0..127) cp.async copies of k tile kt into one slot.
 * Rolled loops with running pointers (HK_WS_LOAD_UNROLL): the producer runs on
 * HK_WS_PRODUCER_REGS registers. */
#ifndef HK_WS_LOAD_UNROLL
#define HK_WS_LOAD_UNROLL 4
#endif
constexpr int hk_ws_load_unroll = HK_WS_LOAD_UNROLL; /* pragma arguments are not macro-expanded */
HK_DEVICE void hk_ws_load(unsigned short *As, unsigned short *Bs, const HK_T *A, const HK_T *B, long long M,
                          long long N, long long K, long long m0, long long n0, long long kt, int ptid) {
  const long long k0 = kt * 64;
  {
    /* A: 128 rows x 8 chunks; thread: chunk c = ptid & 7 of rows r0 + 16 it, r0 = ptid / 8
     * (r0 + 16 it has the same row & 7, so the swizzled chunk stays; 16 rows = 1024 halves) */
    const int r0 = ptid >> 3, c = ptid & 7;
    const long long gk = k0 + c * 8, rows = M - m0 - r0;
    const bool pk = gk < K;
    const HK_T *src = A + (m0 + r0) * K + gk;
    unsigned short *dst = As + hk_swz128(r0, c * 8);
#pragma unroll hk_ws_load_unroll
    for (int it = 0; it < 8; it++) {
      const bool p = pk && 16 * it < rows;
      hk_cp_async16(dst + it * 1024, p ? src : A, p);
      src += 16 * K;
    }
  }
#if HK_TRANS_B
  {
    /* B^T [N, K]: as A over HK_TILE_N rows */
    const int r0 = ptid >> 3, c = ptid & 7;
    const long long gk = k0 + c * 8, rows = N - n0 - r0;
    const bool pk = gk < K;
    const HK_T *src = B + (n0 + r0) * K + gk;
    unsigned short *dst = Bs + hk_swz128(r0, c * 8);
#pragma unroll hk_ws_load_unroll
    for (int it = 0; it < HK_TILE_N / 16; it++) {
      const bool p = pk && 16 * it < rows;
      hk_cp_async16(dst + it * 1024, p ? src : B, p);
      src += 16 * K;
    }
  }
#else
  {
    /* B [K, N]: 64 k rows x HK_TILE_N / 8 chunks; thread: chunk cn of k rows r0 + RS it,
     * RS = 128 * 8 / HK_TILE_N (4 or 8) rows per pass of the 128 threads */
    const int cn = ptid % (HK_TILE_N / 8), r0 = ptid / (HK_TILE_N / 8);
    const int RS = 128 * 8 / HK_TILE_N;
    const long long gn = n0 + cn * 8, rows = K - k0 - r0;
    const bool pn = gn < N;
    const HK_T *src = B + (k0 + r0) * N + gn;
    unsigned short *dst = Bs + (cn >> 3) * 4096;
#pragma unroll hk_ws_load_unroll
    for (int it = 0; it < HK_TILE_N / 16; it++) {
      const int r = r0 + RS * it;
      const bool p = pn && RS * it < rows;
      hk_cp_async16(dst + hk_swz128(r, (cn & 7) * 8), p ? src : B, p);
      src += RS * N;
    }
  }
#endif
}

/* Tile number -> (m0, n0): groups of HK_GROUP_M row tiles x all column tiles, column-major
 * inside a group (as gemm_wgmma.hip). */
HK_DEVICE void hk_ws_tile(long long tile, long long tiles_m, long long tiles_n, long long *m0, long long *n0) {
  const long long group = (long long)HK_GROUP_M * tiles_n;
  const long long first_m = tile / group * HK_GROUP_M;
  const long long gsize = hk_min_ll(tiles_m - first_m, HK_GROUP_M);
  const long long in_group = tile % group;
  *m0 = (first_m + in_group % gsize) * HK_TILE_M;
  *n0 = in_group / gsize * HK_TILE_N;
}
#endif

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *A, const HK_T *B, const HK_T *bias, const HK_T *residual, HK_T *C, long long M, long long N,
        long long K, const HK_T *mul) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char hk_smem_raw[];
  unsigned short *const As = (unsigned short *)(hk_smem_raw + ((1024u - (hk_smem_u32(hk_smem_raw) & 1023u)) & 1023u));
  unsigned short *const Bs = As + HK_STAGES * HK_WS_A_STAGE;
  float *const Es = (float *)(Bs + HK_STAGES * HK_WS_B_STAGE);
  const unsigned bars = hk_smem_u32(Es + 2 * HK_WS_E_FLOATS); /* full[s] at bars + 8 s, empty[s] at + 8 (S + s) */
#define HK_WS_FULL(s) (bars + 8u * (unsigned)(s))
#define HK_WS_EMPTY(s) (bars + 8u * (unsigned)(HK_STAGES + (s)))
  const int tid = HK_TID, wg = tid >> 7;
  const long long tiles_m = (M + HK_TILE_M - 1) / HK_TILE_M, tiles_n = (N + HK_TILE_N - 1) / HK_TILE_N;
  const long long n_tiles = tiles_m * tiles_n, k_tiles = (K + 63) / 64;

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < HK_STAGES; s++) {
      hk_mbar_init(HK_WS_FULL(s), 128u); /* every producer thread, through cp.async.mbarrier.arrive.noinc */
      hk_mbar_init(HK_WS_EMPTY(s), 8u);  /* lane 0 of each of the 8 consumer warps */
    }
  }
  HK_SYNC(); /* the barriers are initialised before anyone uses them */

  if (wg == 0) {
    /* ---- producer ---- */
    HK_SETMAXNREG_DEC(HK_WS_PRODUCER_REGS);
    const int ptid = tid;
    int s = 0;
    unsigned ph = 0;
    for (long long tile = HK_BID; tile < n_tiles; tile += HK_NBLOCKS) {
      long long m0, n0;
      hk_ws_tile(tile, tiles_m, tiles_n, &m0, &n0);
      for (long long kt = 0; kt < k_tiles; kt++) {
        hk_mbar_wait(HK_WS_EMPTY(s), ph ^ 1u); /* the consumers released this slot's previous use */
        hk_ws_load(As + s * HK_WS_A_STAGE, Bs + s * HK_WS_B_STAGE, A, B, M, N, K, m0, n0, kt, ptid);
        hk_cp_async_mbar_arrive(HK_WS_FULL(s));
        if (++s == HK_STAGES) {
          s = 0;
          ph ^= 1u;
        }
      }
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory"); /* leave no copies behind */
  } else {
    /* ---- consumers ---- */
    HK_SETMAXNREG_INC(HK_WS_CONSUMER_REGS);
    const int cw = wg - 1, lt = tid & 127, lane = tid & 31;
    float *const E = Es + cw * HK_WS_E_FLOATS;
    int s = 0;
    unsigned ph = 0;
    for (long long tile = HK_BID; tile < n_tiles; tile += HK_NBLOCKS) {
      long long m0, n0;
      hk_ws_tile(tile, tiles_m, tiles_n, &m0, &n0);

      float acc[HK_WS_NACC];
#pragma unroll
      for (int i = 0; i < HK_WS_NACC; i++) acc[i] = 0.0f;

      int prev = 0;
      for (long long kt = 0; kt < k_tiles; kt++) {
        hk_mbar_wait(HK_WS_FULL(s), ph);
        hk_fence_proxy_async(); /* the generic-proxy cp.async writes -> wgmma's async-proxy reads */
        const unsigned short *as = As + s * HK_WS_A_STAGE + cw * 64 * 64, *bs = Bs + s * HK_WS_B_STAGE;
#pragma unroll
        for (int i = 0; i < HK_WS_NACC; i++) HK_WGMMA_FENCE_REG(acc[i]);
        hk_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
          const unsigned long long da = hk_wgmma_desc(as + kk * 16, 16, 1024);
#if HK_TRANS_B
          const unsigned long long db = hk_wgmma_desc(bs + kk * 16, 16, 1024);
          HK_WGMMA(acc, da, db, 1, 0);
#else
          const unsigned long long db = hk_wgmma_desc(bs + kk * 16 * 64, 8192, 1024);
          HK_WGMMA(acc, da, db, 1, 1);
#endif
        }
        hk_wgmma_commit();
#pragma unroll
        for (int i = 0; i < HK_WS_NACC; i++) HK_WGMMA_FENCE_REG(acc[i]);
        HK_WGMMA_WAIT(1); /* the group of k tile kt - 1 has retired: its slot may be refilled */
        if (kt > 0 && lane == 0) hk_mbar_arrive(HK_WS_EMPTY(prev));
        prev = s;
        if (++s == HK_STAGES) {
          s = 0;
          ph ^= 1u;
        }
      }
      HK_WGMMA_WAIT(0);
#pragma unroll
      for (int i = 0; i < HK_WS_NACC; i++) HK_WGMMA_FENCE_REG(acc[i]);
      if (k_tiles > 0 && lane == 0) hk_mbar_arrive(HK_WS_EMPTY(prev));

      /* ---- epilogue (gemm_epilogue_wgmma.h): this warpgroup's 64 rows through E ---- */
      hk_wgmma_epilogue(acc, E, m0 + cw * 64, n0, M, N, bias, residual, mul, C, lt, 1 + cw);
    }
  }
#undef HK_WS_FULL
#undef HK_WS_EMPTY
#endif /* sm_90a; the variant serves only sm_90a */
}
