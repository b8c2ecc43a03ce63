/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_mfma: C = act(A @ B + bias) * mul + residual on AMD matrix cores (v_mfma_f32_32x32x8
 * f16 / bf16_1k), f32 accumulation, one rounding at the end -- the semantics of gemm.hip
 * and templates/host/gemm.c, same ABI:
 *   T A [M, K], T B [K, N] ([N, K] when HK_TRANS_B), T bias [N] or NULL,
 *   T residual [M, N] or NULL, T C [M, N], I M, I N, I K, T mul [M, N] or NULL.
 * Requires (variant_amd.c): f16/bf16, align 8 (K % 8 == 0 and N % 8 == 0, tensors
 * 16-byte aligned), wave64. M is arbitrary.
 *
 * Tiling (macros from the variant; the tuner will drive them):
 *   HK_BM x HK_BN  C tile of a block (multiples of 64), HK_THREADS = 256 = 4 waves in a
 *                  2 x 2 grid, each wave an (HK_BM/2) x (HK_BN/2) sub-tile made of
 *                  HK_FM x HK_FN MFMA 32x32 fragments (16 f32 each per lane);
 *   HK_BK = 32     K step: 4 MFMAs of k = 8 per fragment and step.
 * Blocks are numbered row-tile-major along grid.x (block = row_tile * col_tiles +
 * col_tile), grid-stride beyond grid.x, as gemm.hip.
 *
 * Pipeline: LDS is double buffered (As/Bs[2]); step t+1 is fetched from global memory
 * into registers (16-byte loads) before the MFMAs of step t, then written into the other
 * LDS buffer; one barrier per K step. LDS tiles are k-contiguous with padded rows
 * (tile_amd.h): As[m][k], Bs[n][k] (B transposed on its way into LDS when it is stored
 * [K, N]).
 * Epilogue: gemm_epilogue_mfma.h.
 * Masking: with K % 8 == 0 and N % 8 == 0 every 8-element chunk is either wholly inside
 * or wholly outside the matrix, so chunks past M (rows of A), N (rows of Bs) or K are
 * zero-filled and contribute nothing; the epilogue writes only rows < M, columns < N.
 */
#ifndef HK_BK
#define HK_BK 32
#endif
#define HK_LDK (HK_BK + HK_LDS_PAD)  /* LDS row pitch, elements */
#define HK_WM (HK_BM / 2)            /* wave sub-tile */
#define HK_WN (HK_BN / 2)
#define HK_FM (HK_WM / 32)           /* 32x32 fragments per wave */
#define HK_FN (HK_WN / 32)
#define HK_KC (HK_BK / 8)            /* 8-element chunks per row of a K step */
#define HK_A_CH (HK_BM * HK_KC / HK_THREADS) /* 16-byte chunks per thread and step */
#define HK_B_CH (HK_BN * HK_KC / HK_THREADS)
#if HK_THREADS != 256 || HK_BM % 64 != 0 || HK_BN % 64 != 0 || HK_BK % 8 != 0 || \
    HK_A_CH * HK_THREADS != HK_BM * HK_KC || HK_B_CH * HK_THREADS != HK_BN * HK_KC || HK_A_CH < 1 || HK_B_CH < 1
#error "gemm_mfma: HK_THREADS must be 256, HK_BM/HK_BN multiples of 64, HK_BK a multiple of 8 (chunks per thread whole)"
#endif
#if 2 * (HK_BM + HK_BN) * HK_LDK * 2 > 65536
#error "gemm_mfma: LDS tiles exceed 64 KiB"
#endif
#if !HK_TRANS_B && (HK_BK * HK_BN / 8) % HK_THREADS != 0
#error "gemm_mfma: B chunks must divide over the threads"
#endif

/* Chunk c of a step's B tile: (n row of Bs, k column) and its global element. */
HK_DEVICE void hk_gemm_load(const unsigned short *A, const unsigned short *B, long long M, long long N, long long K,
                            long long m0, long long n0, long long k0, hk_u16x8 ra[HK_A_CH], hk_u16x8 rb[HK_B_CH]) {
#pragma unroll
  for (int i = 0; i < HK_A_CH; i++) {
    const int c = HK_TID + i * HK_THREADS, r = c / HK_KC, kc = c % HK_KC * 8;
    const long long gm = m0 + r, gk = k0 + kc;
    ra[i] = hk_load16_masked(A + gm * K + gk, gm < M && gk < K);
  }
#pragma unroll
  for (int i = 0; i < HK_B_CH; i++) {
    const int c = HK_TID + i * HK_THREADS;
#if HK_TRANS_B
    /* B [N, K]: chunk = 8 consecutive k of row n */
    const int n = c / HK_KC, kc = c % HK_KC * 8;
    const long long gn = n0 + n, gk = k0 + kc;
    rb[i] = hk_load16_masked(B + gn * K + gk, gn < N && gk < K);
#else
    /* B [K, N]: chunk = 8 consecutive n of row k */
    const int kr = c / (HK_BN / 8), nc = c % (HK_BN / 8) * 8;
    const long long gk = k0 + kr, gn = n0 + nc;
    rb[i] = hk_load16_masked(B + gk * N + gn, gk < K && gn < N);
#endif
  }
}

HK_DEVICE void hk_gemm_stage(unsigned short *As, unsigned short *Bs, const hk_u16x8 ra[HK_A_CH],
                             const hk_u16x8 rb[HK_B_CH]) {
#pragma unroll
  for (int i = 0; i < HK_A_CH; i++) {
    const int c = HK_TID + i * HK_THREADS;
    hk_lds_store_row8(As, HK_LDK, c / HK_KC, c % HK_KC * 8, ra[i]);
  }
#pragma unroll
  for (int i = 0; i < HK_B_CH; i++) {
    const int c = HK_TID + i * HK_THREADS;
#if HK_TRANS_B
    hk_lds_store_row8(Bs, HK_LDK, c / HK_KC, c % HK_KC * 8, rb[i]);
#else
    /* rows n..n+7 of Bs, column k: transposed */
    hk_lds_store_col8(Bs, HK_LDK, c % (HK_BN / 8) * 8, c / (HK_BN / 8), rb[i]);
#endif
  }
}

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *A, const HK_T *B, const HK_T *bias, const HK_T *residual, HK_T *C, long long M, long long N,
        long long K, const HK_T *mul) {
  __shared__ __attribute__((aligned(16))) unsigned short As[2][HK_BM * HK_LDK];
  __shared__ __attribute__((aligned(16))) unsigned short Bs[2][HK_BN * HK_LDK];
  const int lane = HK_TID % 64, wave = HK_TID / 64;
  const int wm0 = wave / 2 * HK_WM, wn0 = wave % 2 * HK_WN;
  const int lr = lane % 32, lk = 4 * (lane / 32); /* operand row, k offset within an 8-k block */
  const long long col_tiles = (N + HK_BN - 1) / HK_BN;
  const long long n_tiles = (M + HK_BM - 1) / HK_BM * col_tiles;
  const long long n_steps = (K + HK_BK - 1) / HK_BK;

  for (long long tile = HK_BID; tile < n_tiles; tile += HK_NBLOCKS) {
    const long long m0 = tile / col_tiles * HK_BM, n0 = tile % col_tiles * HK_BN;
    hk_f32x16 acc[HK_FM][HK_FN];
#pragma unroll
    for (int i = 0; i < HK_FM; i++)
#pragma unroll
      for (int j = 0; j < HK_FN; j++) acc[i][j] = hk_zero_f32x16();

    hk_u16x8 ra[HK_A_CH], rb[HK_B_CH];
    if (n_steps > 0) {
      hk_gemm_load(A, B, M, N, K, m0, n0, 0, ra, rb);
      hk_gemm_stage(As[0], Bs[0], ra, rb);
    }
    HK_SYNC();
    for (long long t = 0; t < n_steps; t++) {
      const int cur = (int)(t & 1);
      const bool more = t + 1 < n_steps;
      if (more) hk_gemm_load(A, B, M, N, K, m0, n0, (t + 1) * HK_BK, ra, rb);
      const unsigned short *as = As[cur], *bs = Bs[cur];
#pragma unroll
      for (int kk = 0; kk < HK_BK; kk += 8) {
        hk_u16x4 a[HK_FM], b[HK_FN];
#pragma unroll
        for (int i = 0; i < HK_FM; i++) a[i] = hk_lds_load4(as, HK_LDK, wm0 + i * 32 + lr, kk + lk);
#pragma unroll
        for (int j = 0; j < HK_FN; j++) b[j] = hk_lds_load4(bs, HK_LDK, wn0 + j * 32 + lr, kk + lk);
#pragma unroll
        for (int i = 0; i < HK_FM; i++)
#pragma unroll
          for (int j = 0; j < HK_FN; j++) acc[i][j] = hk_mfma_32x32x8(a[i], b[j], acc[i][j]);
      }
      /* the other buffer was last read in step t-1, before that step's barrier */
      if (more) hk_gemm_stage(As[cur ^ 1], Bs[cur ^ 1], ra, rb);
      HK_SYNC();
    }

    /* epilogue: fragment (i, j) starts at row wm0 + 32i, column wn0 + 32j (gemm_epilogue_mfma.h) */
#pragma unroll
    for (int j = 0; j < HK_FN; j++) {
      const long long gn = n0 + wn0 + j * 32 + hk_mfma32_c_col(lane);
      if (gn >= N) continue;
      const float bv = hk_mfma_bias(bias, gn);
#pragma unroll
      for (int i = 0; i < HK_FM; i++)
        hk_mfma_store_frag32(acc[i][j], m0 + wm0 + i * 32, gn, bv, M, N, residual, mul, C, lane);
    }
  }
}
