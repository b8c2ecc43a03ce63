/* SPDX-License-Identifier: Apache-2.0 */
/* gemm: C = act(A @ B + bias) * mul + residual (DESIGN "Op semantics"; mul is the fused
 * SwiGLU gate), f32 accumulation and epilogue, one rounding to the output type at the end,
 * as templates/host/gemm.c. HK_DUAL (fusion's dual gemm): C = act(A @ B + bias) * (A @ B2)
 * + residual -- a second pass over K with B2 in place of B.
 * Args: T A [M, K], T B [K, N] ([N, K] when HK_TRANS_B), T bias [N] or NULL,
 *       T residual [M, N] or NULL, T C [M, N], I M, I N, I K, T mul [M, N] or NULL
 *       (read only when HK_HAS_MUL; bias / residual when HK_HAS_BIAS / HK_HAS_RESIDUAL),
 *       and with HK_DUAL T B2 shaped like B.
 *
 * A simple shared-memory tiled FMA GEMM (matrix-core kernels come later). A block owns
 * an HK_TILE_M x HK_TILE_N tile of C; blocks are numbered row-tile-major along grid.x
 * (block = row_tile * col_tiles + col_tile; grid-stride beyond grid.x). HK_THREADS
 * threads stand in a HK_GEMM_TY x HK_GEMM_TX grid; thread (ty, tx) accumulates rows
 * ty + i*TY and columns tx + j*TX of the tile (HK_GEMM_RM x HK_GEMM_RN values), so
 * shared-memory reads of B are consecutive across a warp and reads of A are broadcasts.
 * Per K step, HK_TILE_K columns of A and rows of B are converted to f32 into shared
 * memory; everything outside [0, M) x [0, K) x [0, N) reads as zero and is never
 * written, so every M, N, K >= 1 works. */
#define HK_GEMM_TY (HK_THREADS / HK_GEMM_TX)
#define HK_GEMM_RM (HK_TILE_M / HK_GEMM_TY)
#define HK_GEMM_RN (HK_TILE_N / HK_GEMM_TX)
#if HK_GEMM_TY * HK_GEMM_TX != HK_THREADS || HK_GEMM_RM * HK_GEMM_TY != HK_TILE_M || \
    HK_GEMM_RN * HK_GEMM_TX != HK_TILE_N
#error "gemm: HK_THREADS / HK_GEMM_TX must divide HK_TILE_M and HK_GEMM_TX must divide HK_TILE_N"
#endif

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *A, const HK_T *B, const HK_T *bias, const HK_T *residual, HK_T *C, long long M, long long N,
        long long K, const HK_T *mul
#if HK_DUAL
        , const HK_T *B2
#endif
        ) {
  /* +1 column: the transposing stores (A always, B when HK_TRANS_B) avoid bank conflicts */
  HK_SHARED float As[HK_TILE_K][HK_TILE_M + 1];
  HK_SHARED float Bs[HK_TILE_K][HK_TILE_N + 1];
  const int tx = HK_TID % HK_GEMM_TX, ty = HK_TID / HK_GEMM_TX;
  const long long col_tiles = (N + HK_TILE_N - 1) / HK_TILE_N;
  const long long n_tiles = (M + HK_TILE_M - 1) / HK_TILE_M * col_tiles;

  for (long long tile = HK_BID; tile < n_tiles; tile += HK_NBLOCKS) {
    const long long m0 = tile / col_tiles * HK_TILE_M, n0 = tile % col_tiles * HK_TILE_N;
    float acc[HK_GEMM_RM][HK_GEMM_RN];
#if HK_DUAL
    float gate[HK_GEMM_RM][HK_GEMM_RN]; /* the first product, activated */
    for (int pass = 0; pass < 2; pass++) {
    const HK_T *const Bp = pass ? B2 : B;
#else
    const HK_T *const Bp = B;
#endif
#pragma unroll
    for (int i = 0; i < HK_GEMM_RM; i++)
#pragma unroll
      for (int j = 0; j < HK_GEMM_RN; j++) acc[i][j] = 0.0f;

    for (long long k0 = 0; k0 < K; k0 += HK_TILE_K) {
      /* A tile: element e = (row r, k c), read along k (row-major A), stored As[c][r] */
      for (int e = HK_TID; e < HK_TILE_M * HK_TILE_K; e += HK_THREADS) {
        const int r = e / HK_TILE_K, c = e % HK_TILE_K;
        const long long gm = m0 + r, gk = k0 + c;
        As[c][r] = gm < M && gk < K ? HK_LOAD(A[gm * K + gk]) : 0.0f;
      }
#if HK_TRANS_B
      /* B stored [N, K]: element e = (column n, k c), read along k, stored Bs[c][n] */
      for (int e = HK_TID; e < HK_TILE_N * HK_TILE_K; e += HK_THREADS) {
        const int n = e / HK_TILE_K, c = e % HK_TILE_K;
        const long long gn = n0 + n, gk = k0 + c;
        Bs[c][n] = gn < N && gk < K ? HK_LOAD(Bp[gn * K + gk]) : 0.0f;
      }
#else
      /* B stored [K, N]: element e = (k r, column n), read along n, stored Bs[r][n] */
      for (int e = HK_TID; e < HK_TILE_K * HK_TILE_N; e += HK_THREADS) {
        const int r = e / HK_TILE_N, n = e % HK_TILE_N;
        const long long gk = k0 + r, gn = n0 + n;
        Bs[r][n] = gk < K && gn < N ? HK_LOAD(Bp[gk * N + gn]) : 0.0f;
      }
#endif
      HK_SYNC();
#pragma unroll 4
      for (int kk = 0; kk < HK_TILE_K; kk++) {
        float a[HK_GEMM_RM], b[HK_GEMM_RN];
#pragma unroll
        for (int i = 0; i < HK_GEMM_RM; i++) a[i] = As[kk][ty + i * HK_GEMM_TY];
#pragma unroll
        for (int j = 0; j < HK_GEMM_RN; j++) b[j] = Bs[kk][tx + j * HK_GEMM_TX];
#pragma unroll
        for (int i = 0; i < HK_GEMM_RM; i++)
#pragma unroll
          for (int j = 0; j < HK_GEMM_RN; j++) acc[i][j] += a[i] * b[j];
      }
      HK_SYNC(); /* the next step overwrites As and Bs */
    }
#if HK_DUAL
    if (pass == 0) {
#pragma unroll
      for (int i = 0; i < HK_GEMM_RM; i++)
#pragma unroll
        for (int j = 0; j < HK_GEMM_RN; j++) {
          float v = acc[i][j];
#if HK_HAS_BIAS
          const long long gn = n0 + tx + j * HK_GEMM_TX;
          v += gn < N ? HK_LOAD(bias[gn]) : 0.0f;
#endif
          gate[i][j] = HK_ACT(v);
        }
    }
    } /* pass */
#endif

#pragma unroll
    for (int i = 0; i < HK_GEMM_RM; i++) {
      const long long gm = m0 + ty + i * HK_GEMM_TY;
#pragma unroll
      for (int j = 0; j < HK_GEMM_RN; j++) {
        const long long gn = n0 + tx + j * HK_GEMM_TX;
        if (gm < M && gn < N) {
#if HK_DUAL
          float v = gate[i][j] * acc[i][j];
#else
          float v = acc[i][j];
#if HK_HAS_BIAS
          v += HK_LOAD(bias[gn]);
#endif
          v = HK_ACT(v);
#endif
#if HK_HAS_MUL
          v *= HK_LOAD(mul[gm * N + gn]);
#endif
#if HK_HAS_RESIDUAL
          v += HK_LOAD(residual[gm * N + gn]);
#endif
          C[gm * N + gn] = HK_STORE(v);
        }
      }
    }
  }
}
