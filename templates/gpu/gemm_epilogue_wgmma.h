/*
 * templates/gpu/gemm_epilogue_wgmma.h -- the epilogue of the sm_90a warp-specialized GEMMs
 * (gemm_tma.hip, gemm_wgmma_ws.hip): one consumer warpgroup's m64 block of wgmma
 * accumulators through a [64][32] f32 staging tile in shared memory to C, with the fused
 * bias, activation, multiplier and residual, 16-byte loads and stores. Goes after
 * tile_wgmma.h; needs the kernel's HK_T / HK_LOAD / HK_ACT / HK_PACK / HK_TILE_N and the
 * epilogue flags (HK_HAS_BIAS, HK_HAS_MUL, HK_HAS_RESIDUAL; HK_DUAL: bias and activation
 * already applied, see gemm_tma.hip).
 */
#ifndef HK_GEMM_EPILOGUE_WGMMA_H
#define HK_GEMM_EPILOGUE_WGMMA_H
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* Offset (floats) of (row, col) in a [64][32] f32 staging tile: 16-byte chunk col / 4 of the
 * row is stored at chunk (col / 4) ^ ((row & 3) << 1). Accumulator stores (a half warp
 * writes rows g = 0..3, chunks {2j, 2j+1}) and the row reads (2 rows x 4 chunk pairs per
 * 8 lanes, odd rows reading their odd chunk first) then hit 32 different banks. */
HK_DEVICE int hk_epi_e(int row, int col) { return row * 32 + ((((col >> 2) ^ ((row & 3) << 1)) & 7) << 2) + (col & 3); }

/* The epilogue of 64 rows (row0.. of C) x HK_TILE_N columns (n0..) from one m64 block of
 * accumulators, 32 columns per round through E (this consumer's staging tile). lt: thread
 * in the warpgroup; bar: its named barrier. */
HK_DEVICE void hk_wgmma_epilogue(const float *acc, float *E, long long row0, long long n0, long long M, long long N,
                               const HK_T *bias, const HK_T *residual, const HK_T *mul, HK_T *C, int lt, int bar) {
  const int lane = lt & 31, wq = lt >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int c = 0; c < HK_TILE_N / 32; c++) {
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
      if (gm < M && gn < N) {
#if HK_HAS_BIAS && !HK_DUAL /* a dual gemm's bias and activation are in acc already */
        const uint4 bb = *(const uint4 *)(bias + gn);
        const unsigned bw[4] = {bb.x, bb.y, bb.z, bb.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
          v[2 * e] += HK_LOAD((unsigned short)(bw[e] & 0xffffu));
          v[2 * e + 1] += HK_LOAD((unsigned short)(bw[e] >> 16));
        }
#endif
#if !HK_DUAL
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = HK_ACT(v[e]);
#endif
#if HK_HAS_MUL
        const uint4 mm = *(const uint4 *)(mul + gm * N + gn);
        const unsigned mw[4] = {mm.x, mm.y, mm.z, mm.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
          v[2 * e] *= HK_LOAD((unsigned short)(mw[e] & 0xffffu));
          v[2 * e + 1] *= HK_LOAD((unsigned short)(mw[e] >> 16));
        }
#endif
#if HK_HAS_RESIDUAL
        const uint4 rr = *(const uint4 *)(residual + gm * N + gn);
        const unsigned rw[4] = {rr.x, rr.y, rr.z, rr.w};
#pragma unroll
        for (int e = 0; e < 4; e++) {
          v[2 * e] += HK_LOAD((unsigned short)(rw[e] & 0xffffu));
          v[2 * e + 1] += HK_LOAD((unsigned short)(rw[e] >> 16));
        }
#endif
        *(uint4 *)(C + gm * N + gn) =
            make_uint4(HK_PACK(v[0], v[1]), HK_PACK(v[2], v[3]), HK_PACK(v[4], v[5]), HK_PACK(v[6], v[7]));
      }
    }
    hk_named_sync(bar, 128); /* E is rewritten by the next round */
  }
}

#endif /* sm_90a */
#endif /* HK_GEMM_EPILOGUE_WGMMA_H */
