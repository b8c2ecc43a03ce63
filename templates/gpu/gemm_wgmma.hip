/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_wgmma: C = act(A @ B + bias) * mul + residual on sm_90a with warpgroup MMA
 * (wgmma.mma_async m64nNk16, f32 accumulators in registers, one rounding at the end),
 * f16/bf16, K % 8 == 0, N % 8 == 0, 16-byte-aligned tensors (key align 8). Same ABI as
 * gemm.hip.
 *
 * Macros (compiler/variant_gemm_nv.c): HK_TILE_M = 64 * HK_WGS block rows (one
 * warpgroup per 64 rows), HK_TILE_N block columns = the wgmma N (HK_WGMMA the matching
 * tile_wgmma.h wrapper), HK_TILE_K = 64, HK_STAGES-deep cp.async pipeline with a
 * prefetch distance of HK_STAGES - 2 k tiles (one wgmma group stays in flight while the
 * next is issued), HK_GROUP_M row tiles per L2 raster group, HK_PACK the dtype's pack.
 *
 * Shared memory: dynamic, aligned up to 1024 bytes here (launch() asks 1 KiB extra);
 * per stage the same tiles as gemm_mma, which are wgmma's canonical 128-byte-swizzle
 * layouts (tile_nv.h hk_swz128 == hardware swizzle on 1024-byte-aligned atoms):
 *   A   [HK_TILE_M][64] K-major: atom = 8 rows x 128 B, SBO 1024 B (LBO unused)
 *   B^T [HK_TILE_N][64] K-major (HK_TRANS_B): as A
 *   B   HK_TILE_N/64 panels of [64 k][64 n], N-major (tnspB = 1): atom = 8 k rows x
 *       64 n; LBO 8192 B (next 64 n: next panel), SBO 1024 B (next 8 k rows)
 * The k16 step inside a 64-wide k tile moves the descriptor start by 32 B (K-major) or
 * 16 rows = 2048 B (N-major).
 *
 * Ordering per k tile kt: cp.async.wait_group(S-3) (this thread's copies of tile kt
 * landed); fence.proxy.async (make them visible to the async proxy); barrier (everyone's
 * copies, and every warpgroup has retired wgmma(kt-2) by its wait_group(1) in iteration
 * kt-1); prefetch tile kt+S-2 into slot (kt-2) % S; issue the 4 wgmmas of tile kt;
 * commit; wait_group(1) (retires tile kt-1). OOB chunks are zero-filled; the epilogue
 * masks M and N. */
#define HK_GW_A_STAGE (HK_TILE_M * 64) /* halves */
#define HK_GW_B_STAGE (HK_TILE_N * 64)
#define HK_GW_NACC (HK_TILE_N / 2)
#if HK_TILE_K != 64 || HK_TILE_M != 64 * HK_WGS || HK_THREADS != 128 * HK_WGS || HK_TILE_N % 64 != 0 || \
    (HK_TILE_M * 8) % HK_THREADS != 0 || (HK_TILE_N * 8) % HK_THREADS != 0 || HK_STAGES < 3
#error "gemm_wgmma: bad tile configuration"
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Issues the cp.async copies of k tile kt into one stage (no commit). */
HK_DEVICE void hk_gw_load(unsigned short *As, unsigned short *Bs, const HK_T *A, const HK_T *B, long long M,
                          long long N, long long K, long long m0, long long n0, long long kt, int tid) {
  const long long k0 = kt * 64;
#pragma unroll
  for (int it = 0; it < HK_TILE_M * 8 / HK_THREADS; it++) {
    const int i = tid + it * HK_THREADS, r = i >> 3, c = i & 7;
    const long long gm = m0 + r, gk = k0 + c * 8;
    const bool p = gm < M && gk < K;
    hk_cp_async16(As + hk_swz128(r, c * 8), p ? A + gm * K + gk : A, p);
  }
#if HK_TRANS_B
#pragma unroll
  for (int it = 0; it < HK_TILE_N * 8 / HK_THREADS; it++) {
    const int i = tid + it * HK_THREADS, r = i >> 3, c = i & 7;
    const long long gn = n0 + r, gk = k0 + c * 8;
    const bool p = gn < N && gk < K;
    hk_cp_async16(Bs + hk_swz128(r, c * 8), p ? B + gn * K + gk : B, p);
  }
#else
#pragma unroll
  for (int it = 0; it < HK_TILE_N * 8 / HK_THREADS; it++) {
    const int i = tid + it * HK_THREADS, r = i / (HK_TILE_N / 8), cn = i % (HK_TILE_N / 8);
    const long long gk = k0 + r, gn = n0 + cn * 8;
    const bool p = gk < K && gn < N;
    hk_cp_async16(Bs + (cn >> 3) * 4096 + hk_swz128(r, (cn & 7) * 8), p ? B + gk * N + gn : B, p);
  }
#endif
}
#endif

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *A, const HK_T *B, const HK_T *bias, const HK_T *residual, HK_T *C, long long M, long long N,
        long long K, const HK_T *mul) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char hk_smem_raw[];
  unsigned short *const As = (unsigned short *)(hk_smem_raw + ((1024u - (hk_smem_u32(hk_smem_raw) & 1023u)) & 1023u));
  unsigned short *const Bs = As + HK_STAGES * HK_GW_A_STAGE;
  const int tid = HK_TID, lane = tid & 31, wg = tid >> 7, wq = (tid >> 5) & 3;
  const long long tiles_m = (M + HK_TILE_M - 1) / HK_TILE_M, tiles_n = (N + HK_TILE_N - 1) / HK_TILE_N;
  const long long n_tiles = tiles_m * tiles_n, k_tiles = (K + 63) / 64;
  const long long group = (long long)HK_GROUP_M * tiles_n;

  for (long long tile = HK_BID; tile < n_tiles; tile += HK_NBLOCKS) {
    const long long first_m = tile / group * HK_GROUP_M;
    const long long gsize = hk_min_ll(tiles_m - first_m, HK_GROUP_M);
    const long long in_group = tile % group;
    const long long m0 = (first_m + in_group % gsize) * HK_TILE_M, n0 = in_group / gsize * HK_TILE_N;

    float acc[HK_GW_NACC];
#pragma unroll
    for (int i = 0; i < HK_GW_NACC; i++) acc[i] = 0.0f;

#pragma unroll
    for (int s = 0; s < HK_STAGES - 2; s++) {
      if (s < k_tiles) hk_gw_load(As + s * HK_GW_A_STAGE, Bs + s * HK_GW_B_STAGE, A, B, M, N, K, m0, n0, s, tid);
      hk_cp_async_commit();
    }

    for (long long kt = 0; kt < k_tiles; kt++) {
      HK_CP_ASYNC_WAIT(HK_STAGES - 3);
      hk_fence_proxy_async();
      HK_SYNC();
      {
        const long long nk = kt + HK_STAGES - 2;
        const int ns = (int)(nk % HK_STAGES);
        if (nk < k_tiles) hk_gw_load(As + ns * HK_GW_A_STAGE, Bs + ns * HK_GW_B_STAGE, A, B, M, N, K, m0, n0, nk, tid);
        hk_cp_async_commit();
      }
      const int s = (int)(kt % HK_STAGES);
      const unsigned short *as = As + s * HK_GW_A_STAGE + wg * 64 * 64, *bs = Bs + s * HK_GW_B_STAGE;
#pragma unroll
      for (int i = 0; i < HK_GW_NACC; i++) HK_WGMMA_FENCE_REG(acc[i]);
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
      for (int i = 0; i < HK_GW_NACC; i++) HK_WGMMA_FENCE_REG(acc[i]);
      HK_WGMMA_WAIT(1);
    }
    HK_WGMMA_WAIT(0);
#pragma unroll
    for (int i = 0; i < HK_GW_NACC; i++) HK_WGMMA_FENCE_REG(acc[i]);
    HK_CP_ASYNC_WAIT(0);

    /* epilogue: acc[4j + 2h + e] = (row 16 wq + g + 8h, col 8j + 2t + e) of this warpgroup's 64 rows */
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < HK_TILE_N / 8; j++) {
      const long long gn = n0 + j * 8 + 2 * t; /* N even: gn < N => gn + 1 < N */
      if (gn >= N) continue;
#if HK_HAS_BIAS
      const float b0 = HK_LOAD(bias[gn]), b1 = HK_LOAD(bias[gn + 1]);
#endif
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const long long gm = m0 + wg * 64 + wq * 16 + g + h * 8;
        if (gm >= M) continue;
        float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
#if HK_HAS_BIAS
        v0 += b0;
        v1 += b1;
#endif
        v0 = HK_ACT(v0);
        v1 = HK_ACT(v1);
#if HK_HAS_MUL
        const unsigned mm = *(const unsigned *)(mul + gm * N + gn);
        v0 *= HK_LOAD((unsigned short)(mm & 0xffffu));
        v1 *= HK_LOAD((unsigned short)(mm >> 16));
#endif
#if HK_HAS_RESIDUAL
        const unsigned rr = *(const unsigned *)(residual + gm * N + gn);
        v0 += HK_LOAD((unsigned short)(rr & 0xffffu));
        v1 += HK_LOAD((unsigned short)(rr >> 16));
#endif
        *(unsigned *)(C + gm * N + gn) = HK_PACK(v0, v1);
      }
    }
    HK_SYNC(); /* the next tile's prologue overwrites shared slots others may still read */
  }
#endif /* sm_90a; the variant serves only sm_90a */
}
