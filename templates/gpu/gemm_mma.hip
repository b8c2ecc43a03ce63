/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_mma: C = act(A @ B + bias) * mul + residual on NVIDIA sm_80+ tensor cores (mma.sync
 * m16n8k16, f32 accumulation, one rounding at the end), f16/bf16, K % 8 == 0, N % 8 == 0,
 * 16-byte-aligned tensors (key align 8). Same ABI as gemm.hip.
 *
 * Macros (compiler/variant_gemm_nv.c): HK_TILE_M x HK_TILE_N block tile, HK_TILE_K = 64
 * (one 128-byte row of halves per shared row), HK_WARPS_M x HK_WARPS_N warps
 * (HK_THREADS = 32 * both), HK_STAGES-deep cp.async pipeline, HK_GROUP_M row tiles per
 * L2 raster group, HK_MMA / HK_PACK the dtype's mma and pack helpers (tile_nv.h), HK_SPLITK
 * the k slices per tile (1: no split-K).
 *
 * Shared memory (dynamic, 1024-byte aligned), per stage:
 *   A: HK_TILE_M rows (m) x 64 k, 128-byte rows, swizzled by hk_swz128
 *   B: HK_TRANS_B: HK_TILE_N rows (n) x 64 k, as A
 *      otherwise:  HK_TILE_N / 64 panels of 64 rows (k) x 64 n, each swizzled by hk_swz128
 * Global -> shared by 16-byte cp.async; chunks outside [0,M) x [0,K) (A) or [0,K) x
 * [0,N) (B) are zero-filled, so the K tail adds zeros and M/N tails compute garbage-free
 * zeros that the epilogue never stores. Fragments by ldmatrix (.trans for B [K, N]).
 * Each warp owns a (HK_TILE_M / HK_WARPS_M) x (HK_TILE_N / HK_WARPS_N) sub-tile.
 * Tiles are numbered along grid.x (grid-stride beyond it) and rasterized in groups of
 * HK_GROUP_M row tiles so that neighbouring blocks share A and B in L2.
 *
 * Split-K (HK_SPLITK = S > 1, for small-M / long-K shapes with too few tiles to fill the
 * GPU): work unit u = tile S + slice, slice s over k tiles [kt s / S, kt (s + 1) / S). The
 * kernel takes two more parameters: `part`, S f32 partial tiles per tile in the launch's
 * scratch (FORMAT.md, SCRATCH: slice s of tile t at (t S + s) bm bn floats, each thread's
 * fragment f at float4 f x threads + tid), and `sem`, one arrival counter per tile (SEMAPHORE,
 * zero when the launch starts). Every slice stores its partial and arrives (tile_nv.h, split
 * GEMMs); the last to arrive adds the S partials in slice order 0..S-1 -- the same bits
 * whichever block is last -- runs the epilogue and leaves the counter at 0. */
#define HK_GM_WM (HK_TILE_M / HK_WARPS_M)
#define HK_GM_WN (HK_TILE_N / HK_WARPS_N)
#define HK_GM_MI (HK_GM_WM / 16)
#define HK_GM_NI (HK_GM_WN / 8)
#define HK_GM_A_STAGE (HK_TILE_M * 64) /* halves */
#define HK_GM_B_STAGE (HK_TILE_N * 64)
#if HK_TILE_K != 64 || HK_THREADS != 32 * HK_WARPS_M * HK_WARPS_N || HK_GM_MI * 16 * HK_WARPS_M != HK_TILE_M || \
    HK_GM_NI * 8 * HK_WARPS_N != HK_TILE_N || HK_GM_NI % 2 != 0 || HK_TILE_N % 64 != 0 ||                        \
    (HK_TILE_M * 8) % HK_THREADS != 0 || (HK_TILE_N * 8) % HK_THREADS != 0 || HK_STAGES < 2 || HK_SPLITK < 1
#error "gemm_mma: bad tile configuration"
#endif

/* Issues the cp.async copies of k tile kt into stage slot s (no commit). */
HK_DEVICE void hk_gm_load(unsigned short *As, unsigned short *Bs, const HK_T *A, const HK_T *B, long long M,
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

#if HK_SPLITK > 1
/* Split-K: stores this slice's partial sums (acc) and arrives on the tile's counter; returns
 * 1 in the block that arrives last, with acc = slice 0 + slice 1 + ... + slice S - 1, added in
 * that order (the protocol and its memory ordering: tile_nv.h, split GEMMs). Every thread of
 * the block calls it (two block barriers). */
#define HK_GM_FRAGS (HK_GM_MI * HK_GM_NI)
#define HK_GM_BATCH 8 /* partial loads in flight before their sums: few registers, latency hidden */
HK_DEVICE int hk_gm_split_finish(float (*acc)[HK_GM_NI][4], float *part, unsigned *sem, long long tile, int slice,
                                 int tid) {
  HK_SHARED unsigned last;
  float *const tile_part = part + tile * HK_SPLITK * (long long)(HK_TILE_M * HK_TILE_N);
  float *const mine = tile_part + (long long)slice * (HK_TILE_M * HK_TILE_N);
#pragma unroll
  for (int f = 0; f < HK_GM_FRAGS; f++) {
    const float *a = acc[f / HK_GM_NI][f % HK_GM_NI];
    hk_st_cg4(mine + ((long long)f * HK_THREADS + tid) * 4, a[0], a[1], a[2], a[3]);
  }
  HK_SYNC(); /* the block's partial is stored */
  if (tid == 0) last = (unsigned)hk_split_arrive(sem + tile, HK_SPLITK);
  HK_SYNC(); /* `last` is set; the loads below come after thread 0's acquire */
  if (!last) return 0;
  /* Slice 0 first: from the registers when this block computed it (the same bits it stored),
   * else from scratch, overwriting this block's own partial, which is read back in its turn. */
#pragma unroll 1 /* one slice's loads at a time: unrolled, the loads of every slice compete for registers */
  for (int s = 0; s < HK_SPLITK; s++) {
    if (s == 0 && slice == 0) continue;
    const float *p = tile_part + (long long)s * (HK_TILE_M * HK_TILE_N);
#pragma unroll
    for (int f0 = 0; f0 < HK_GM_FRAGS; f0 += HK_GM_BATCH) {
      float4 v[HK_GM_BATCH];
#pragma unroll
      for (int f = 0; f < HK_GM_BATCH; f++)
        if (f0 + f < HK_GM_FRAGS) v[f] = hk_ld_cg4(p + ((long long)(f0 + f) * HK_THREADS + tid) * 4);
#pragma unroll
      for (int f = 0; f < HK_GM_BATCH; f++)
        if (f0 + f < HK_GM_FRAGS) {
          float *a = acc[(f0 + f) / HK_GM_NI][(f0 + f) % HK_GM_NI];
          a[0] = s == 0 ? v[f].x : a[0] + v[f].x;
          a[1] = s == 0 ? v[f].y : a[1] + v[f].y;
          a[2] = s == 0 ? v[f].z : a[2] + v[f].z;
          a[3] = s == 0 ? v[f].w : a[3] + v[f].w;
        }
    }
  }
  return 1;
}
#define HK_GM_SPLIT_PARAMS , float *part, unsigned *sem
#else
#define HK_GM_SPLIT_PARAMS
#endif

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *A, const HK_T *B, const HK_T *bias, const HK_T *residual, HK_T *C, long long M, long long N,
        long long K, const HK_T *mul HK_GM_SPLIT_PARAMS) {
  extern __shared__ __align__(1024) unsigned short hk_smem[];
  unsigned short *const As = hk_smem, *const Bs = hk_smem + HK_STAGES * HK_GM_A_STAGE;
  const int tid = HK_TID, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % HK_WARPS_M, wn = warp / HK_WARPS_M;
  const long long tiles_m = (M + HK_TILE_M - 1) / HK_TILE_M, tiles_n = (N + HK_TILE_N - 1) / HK_TILE_N;
  const long long n_tiles = tiles_m * tiles_n, k_tiles = (K + 63) / 64;
  const long long group = (long long)HK_GROUP_M * tiles_n;

  for (long long unit = HK_BID; unit < n_tiles * HK_SPLITK; unit += HK_NBLOCKS) {
    /* this unit's tile and its k tiles [kt0, kt1) (all of them without split-K) */
    const long long tile = unit / HK_SPLITK;
    const int slice = (int)(unit % HK_SPLITK);
    const long long kt0 = k_tiles * slice / HK_SPLITK, kt1 = k_tiles * (slice + 1) / HK_SPLITK;
    /* raster: HK_GROUP_M row tiles x all column tiles per group, column-major inside */
    const long long first_m = tile / group * HK_GROUP_M;
    const long long gsize = hk_min_ll(tiles_m - first_m, HK_GROUP_M);
    const long long in_group = tile % group;
    const long long m0 = (first_m + in_group % gsize) * HK_TILE_M, n0 = in_group / gsize * HK_TILE_N;

    float acc[HK_GM_MI][HK_GM_NI][4];
#pragma unroll
    for (int i = 0; i < HK_GM_MI; i++)
#pragma unroll
      for (int j = 0; j < HK_GM_NI; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[i][j][e] = 0.0f;

    /* k tile kt goes to slot (kt - kt0) % stages */
#pragma unroll
    for (int s = 0; s < HK_STAGES - 1; s++) {
      if (kt0 + s < kt1) hk_gm_load(As + s * HK_GM_A_STAGE, Bs + s * HK_GM_B_STAGE, A, B, M, N, K, m0, n0, kt0 + s, tid);
      hk_cp_async_commit();
    }

    for (long long kt = kt0; kt < kt1; kt++) {
      HK_CP_ASYNC_WAIT(HK_STAGES - 2); /* this thread's copies of tile kt have landed */
      HK_SYNC();                       /* ... everyone's; and the previous slot is free */
      {
        const long long nk = kt + HK_STAGES - 1;
        const int ns = (int)((nk - kt0) % HK_STAGES);
        if (nk < kt1) hk_gm_load(As + ns * HK_GM_A_STAGE, Bs + ns * HK_GM_B_STAGE, A, B, M, N, K, m0, n0, nk, tid);
        hk_cp_async_commit();
      }
      const int s = (int)((kt - kt0) % HK_STAGES);
      const unsigned short *as = As + s * HK_GM_A_STAGE, *bs = Bs + s * HK_GM_B_STAGE;
#pragma unroll
      for (int kk = 0; kk < 4; kk++) {
        unsigned a[HK_GM_MI][4], b[HK_GM_NI][2];
#pragma unroll
        for (int i = 0; i < HK_GM_MI; i++)
          hk_ldmatrix_x4(a[i], as + hk_swz128(wm * HK_GM_WM + i * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8));
#pragma unroll
        for (int j = 0; j < HK_GM_NI / 2; j++) {
          unsigned r[4];
#if HK_TRANS_B
          hk_ldmatrix_x4(r, bs + hk_swz128(wn * HK_GM_WN + j * 16 + (lane & 7) + (lane >> 4) * 8,
                                           kk * 16 + ((lane >> 3) & 1) * 8));
#else
          const int n = wn * HK_GM_WN + j * 16 + (lane >> 4) * 8;
          hk_ldmatrix_x4_trans(r, bs + (n >> 6) * 4096 + hk_swz128(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, n & 63));
#endif
          b[2 * j][0] = r[0];
          b[2 * j][1] = r[1];
          b[2 * j + 1][0] = r[2];
          b[2 * j + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < HK_GM_MI; i++)
#pragma unroll
          for (int j = 0; j < HK_GM_NI; j++) HK_MMA(acc[i][j], a[i], b[j]);
      }
    }
    HK_CP_ASYNC_WAIT(0); /* only empty groups can be pending; keep the next tile's slots clean */
#if HK_SPLITK > 1
    /* its barriers also keep the next unit's loads off slots others may still read */
    if (!hk_gm_split_finish(acc, part, sem, tile, slice, tid)) continue;
#endif

    /* epilogue: thread holds (row g / g+8, cols 2t, 2t+1) of every 16x8 fragment */
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < HK_GM_NI; j++) {
      const long long gn = n0 + wn * HK_GM_WN + j * 8 + 2 * t; /* N even: gn < N => gn + 1 < N */
      if (gn >= N) continue;
#if HK_HAS_BIAS
      const float b0 = HK_LOAD(bias[gn]), b1 = HK_LOAD(bias[gn + 1]);
#endif
#pragma unroll
      for (int i = 0; i < HK_GM_MI; i++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
          const long long gm = m0 + wm * HK_GM_WM + i * 16 + g + h * 8;
          if (gm >= M) continue;
          float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
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
}
