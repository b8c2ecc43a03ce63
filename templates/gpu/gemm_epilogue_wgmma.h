/* SPDX-License-Identifier: Apache-2.0 */
/*
 * templates/gpu/gemm_epilogue_wgmma.h -- the epilogue of the sm_90a warp-specialized GEMMs
 * (gemm_tma.hip, gemm_wgmma_ws.hip): one consumer warpgroup's m64 block of wgmma
 * accumulators through a [64][32] f32 staging tile in shared memory to C, with the fused
 * bias, activation, multiplier and residual, 16-byte loads and stores. Goes after
 * tile_wgmma.h; needs the kernel's HK_T / HK_LOAD / HK_ACT / HK_PACK / HK_TILE_N and the
 * epilogue flags (HK_HAS_BIAS, HK_HAS_MUL, HK_HAS_RESIDUAL; HK_DUAL, HK_ROPE: bias and
 * activation already applied, see gemm_tma.hip).
 */
#ifndef HK_GEMM_EPILOGUE_WGMMA_H
#define HK_GEMM_EPILOGUE_WGMMA_H
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* HK_TMA_STORE 1 (gemm_tma's `ts`): each round's 64 x 32 results go to a bf16/f16 staging
 * buffer in shared memory (two per consumer, alternating by round) and leave by one TMA
 * store of that box through the C tensor map, instead of 16-byte stores from every thread. */
#ifndef HK_TMA_STORE
#define HK_TMA_STORE 0
#endif
#define HK_EPI_S_HALVES (64 * 32)
/* Bias and activation already applied to the accumulators: a dual gemm's combine, a rope
 * gemm's rotation (gemm_tma.hip); the epilogue then multiplies, adds and stores. */
#ifndef HK_ROPE
#define HK_ROPE 0
#endif
#define HK_EPI_PRE (HK_DUAL || HK_ROPE)
/* HK_EPI_LOOKAHEAD 0: the reads of rounds 1.. where they are used instead of a round ahead
 * (fewer registers live; gemm_tma's split-K, whose reduction needs them). */
#ifndef HK_EPI_LOOKAHEAD
#define HK_EPI_LOOKAHEAD 1
#endif /* one staging buffer: [64 rows][32 columns], 64-byte rows */

/* Offset (floats) of (row, col) in a [64][32] f32 staging tile: 16-byte chunk col / 4 of the
 * row is stored at chunk (col / 4) ^ ((row & 3) << 1). Accumulator stores (a half warp
 * writes rows g = 0..3, chunks {2j, 2j+1}) and the row reads (2 rows x 4 chunk pairs per
 * 8 lanes, odd rows reading their odd chunk first) then hit 32 different banks. */
HK_DEVICE int hk_epi_e(int row, int col) { return row * 32 + ((((col >> 2) ^ ((row & 3) << 1)) & 7) << 2) + (col & 3); }

/* What one thread reads from global memory in one round (32 columns) of the epilogue: the
 * 16-byte chunks of bias and residual for its 8 columns of rows lt / 4 and lt / 4 + 32
 * (pass 0 and 1). The epilogue loads them a round ahead -- round c + 1's while round c
 * computes -- so their global-memory latency is paid once per m64 block instead of once
 * per round (4096^3 with bias, gelu and residual: 35 us of 212 before); the kernel can
 * take even that first load out of the critical path by fetching round 0 before it waits
 * for its last MMAs (hk_wgmma_epilogue_from). Chunks of rows >= M or columns >= N are not
 * read (they are never stored either). The multiplier (a gate's `mul` epilogue, which
 * sm_90a builds replace by the dual gemm) is read where it is used: two more chunks a
 * round ahead would spill the 128-accumulator configurations. */
struct hk_epi_in {
#if HK_HAS_BIAS && !HK_EPI_PRE /* a dual or rope gemm's bias is in acc already */
  uint4 bias;
#endif
#if HK_HAS_RESIDUAL
  uint4 res[2];
#endif
};

HK_DEVICE hk_epi_in hk_epi_fetch(long long row0, long long n0, int c, long long M, long long N, const HK_T *bias,
                                 const HK_T *residual, const HK_T *mul, int lt) {
  hk_epi_in in;
  const long long gn = n0 + c * 32 + (lt & 3) * 8;
  (void)bias;
  (void)residual;
  (void)mul;
  (void)row0;
  (void)N;
  (void)M;
#if HK_HAS_BIAS && !HK_EPI_PRE
  in.bias = gn < N ? *(const uint4 *)(bias + gn) : make_uint4(0u, 0u, 0u, 0u);
#endif
#pragma unroll
  for (int p = 0; p < 2; p++) {
    const long long gm = row0 + ((lt + 128 * p) >> 2);
    const bool inside = gm < M && gn < N;
    (void)inside;
    (void)gm;
#if HK_HAS_RESIDUAL
    in.res[p] = inside ? *(const uint4 *)(residual + gm * N + gn) : make_uint4(0u, 0u, 0u, 0u);
#endif
  }
  return in;
}

/* v[e] += (or *=) the 8 halves of chunk w. */
HK_DEVICE void hk_epi_add8(float *v, uint4 w) {
  const unsigned x[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int e = 0; e < 4; e++) {
    v[2 * e] += HK_LOAD((unsigned short)(x[e] & 0xffffu));
    v[2 * e + 1] += HK_LOAD((unsigned short)(x[e] >> 16));
  }
}
HK_DEVICE void hk_epi_mul8(float *v, uint4 w) {
  const unsigned x[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int e = 0; e < 4; e++) {
    v[2 * e] *= HK_LOAD((unsigned short)(x[e] & 0xffffu));
    v[2 * e + 1] *= HK_LOAD((unsigned short)(x[e] >> 16));
  }
}

/* The epilogue of 64 rows (row0.. of C) x HK_TILE_N columns (n0..) from one m64 block of
 * accumulators, 32 columns per round through E (this consumer's staging tile); `first` is
 * hk_epi_fetch's round 0 of this block. lt: thread in the warpgroup; bar: its named barrier.
 * HK_TMA_STORE: tm_c maps C with a 32 x 64 box, S is the consumer's two output buffers; thread
 * 0 of the warpgroup issues the stores and leaves with all of them done reading S. */
HK_DEVICE void hk_wgmma_epilogue_from(const float *acc, float *E, long long row0, long long n0, long long M,
                                      long long N, const HK_T *bias, const HK_T *residual, const HK_T *mul, HK_T *C,
                                      int lt, int bar, hk_epi_in first, const hk_tmap_t *tm_c, unsigned short *S) {
  (void)tm_c;
  (void)S;
  const int lane = lt & 31, wq = lt >> 5, g = lane >> 2, t = lane & 3;
  hk_epi_in cur = first;
#pragma unroll
  for (int c = 0; c < HK_TILE_N / 32; c++) {
    hk_epi_in next = cur;
#if HK_EPI_LOOKAHEAD
    if (c + 1 < HK_TILE_N / 32) next = hk_epi_fetch(row0, n0, c + 1, M, N, bias, residual, mul, lt);
#endif
#pragma unroll
    for (int jj = 0; jj < 4; jj++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int r = wq * 16 + g + 8 * h, col = jj * 8 + 2 * t;
        *(float2 *)(E + hk_epi_e(r, col)) = make_float2(acc[4 * (4 * c + jj) + 2 * h], acc[4 * (4 * c + jj) + 2 * h + 1]);
      }
    hk_named_sync(bar, 128);
#pragma unroll
    for (int p = 0; p < 2; p++) {
      const int i = lt + 128 * p, r = i >> 2, q = i & 3, odd = r & 1;
      const long long gm = row0 + r, gn = n0 + c * 32 + q * 8;
      const float4 x = *(const float4 *)(E + hk_epi_e(r, q * 8 + 4 * odd));
      const float4 y = *(const float4 *)(E + hk_epi_e(r, q * 8 + 4 - 4 * odd));
      const float4 lo = odd ? y : x, hi = odd ? x : y;
      float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      const bool inside = gm < M && gn < N;
      if (HK_TMA_STORE || inside) { /* TMA clips the box at the matrix's edges; no reads outside */
#if HK_HAS_BIAS && !HK_EPI_PRE
        hk_epi_add8(v, HK_EPI_LOOKAHEAD || c == 0 ? cur.bias : inside ? *(const uint4 *)(bias + gn) : make_uint4(0u, 0u, 0u, 0u));
#endif
#if !HK_EPI_PRE /* a dual gemm's activation is in acc already (a rope gemm has none) */
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = HK_ACT(v[e]);
#endif
#if HK_HAS_MUL
        hk_epi_mul8(v, inside ? *(const uint4 *)(mul + gm * N + gn) : make_uint4(0u, 0u, 0u, 0u));
#endif
#if HK_HAS_RESIDUAL
        hk_epi_add8(v, HK_EPI_LOOKAHEAD || c == 0 ? cur.res[p]
                       : inside ? *(const uint4 *)(residual + gm * N + gn) : make_uint4(0u, 0u, 0u, 0u));
#endif
        const uint4 out = make_uint4(HK_PACK(v[0], v[1]), HK_PACK(v[2], v[3]), HK_PACK(v[4], v[5]), HK_PACK(v[6], v[7]));
#if HK_TMA_STORE
        *(uint4 *)(S + (c & 1) * HK_EPI_S_HALVES + r * 32 + q * 8) = out; /* a quarter warp: 128 contiguous bytes */
#else
        *(uint4 *)(C + gm * N + gn) = out;
#endif
      }
    }
#if HK_TMA_STORE
    hk_fence_proxy_async(); /* the buffer's writes, before the async proxy reads them */
#endif
    hk_named_sync(bar, 128); /* E is rewritten by the next round; the buffer is complete */
#if HK_TMA_STORE
    if (lt == 0) {
      hk_tma_store_2d(tm_c, (int)(n0 + c * 32), (int)row0, hk_smem_u32(S + (c & 1) * HK_EPI_S_HALVES));
      /* the other buffer, rewritten next round, was read by the store before this one: thread 0
       * waits for it before it reaches next round's barrier, which the writers pass after it */
      if (c + 1 < HK_TILE_N / 32) HK_TMA_STORE_WAIT_READ(1);
      else HK_TMA_STORE_WAIT_READ(0); /* this call's buffers are free for the next epilogue */
    }
#endif
    cur = next;
  }
}

HK_DEVICE void hk_wgmma_epilogue(const float *acc, float *E, long long row0, long long n0, long long M, long long N,
                               const HK_T *bias, const HK_T *residual, const HK_T *mul, HK_T *C, int lt, int bar) {
  hk_wgmma_epilogue_from(acc, E, row0, n0, M, N, bias, residual, mul, C, lt, bar,
                         hk_epi_fetch(row0, n0, 0, M, N, bias, residual, mul, lt), (const hk_tmap_t *)0,
                         (unsigned short *)0);
}

#endif /* sm_90a */
#endif /* HK_GEMM_EPILOGUE_WGMMA_H */
