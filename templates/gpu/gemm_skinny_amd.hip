/* SPDX-License-Identifier: Apache-2.0 */
/* gemm for a few rows of A on AMD CDNA (wave64: gfx908, gfx90a, gfx942): the decode steps of
 * text generation, M = the step's token rows. f16/bf16, B stored [N, K] (HK_TRANS_B, the
 * checkpoints' layout), K % 8 == 0 (align 8). The weight matrix is read once, in 16-byte
 * loads marked non-temporal (B is not read again in the launch), by every CU at once: the
 * launch is bound by that read, so the kernel is built for bytes in flight; the matrix cores
 * would idle at one row. Semantics: templates/gpu/gemm.hip's (C = act(A @ B + bias) * mul +
 * residual), f32 accumulation, one rounding at the store. The NVIDIA form is gemm_skinny.hip
 * (warps of 32, 256-element chunks, its dual and 8-bit B, PDL); this one has the plain
 * epilogues and the folded rmsnorm.
 * HK_NORM_A (fusion's folded rmsnorm, at the one-row buckets: lower.h): A is rmsnorm(A) with the
 * arguments gamma [K] and eps -- each element of A times gamma, rounded to 16 bits as the norm's
 * output would be, and each row of sums times rsqrt(mean(A row^2) + eps) before the epilogue (the
 * row's squares summed by the same lanes and shuffles as its products).
 *
 * Work: a unit is HK_SK_NW consecutive columns (rows of B) and HK_SK_MB rows of A (an m tile;
 * M > HK_SK_MB takes several), taken by HK_SK_KS waves of a block, each a slice of K: slice s
 * reads the 512-element chunks s, s + HK_SK_KS, ... of the unit's rows. Lane l reads elements
 * [8 l, + 8) of each chunk of each of its B rows, HK_SK_U chunks per row in flight before it
 * uses them; A's matching 16 bytes through the caches (every wave of the CU reads the same few
 * rows), issued with B's where they fit in registers (SKA_A_AHEAD). The lanes' partial sums
 * meet by butterfly shuffles over the wave; with HK_SK_KS > 1 the slices' sums meet in LDS,
 * added in slice order by the unit's first wave (the same bits whichever wave finishes first).
 * Lane (m HK_SK_NW + r) of that wave stores output (m, r). A block holds HK_SK_WARPS /
 * HK_SK_KS units, numbered column-group-major over the blocks (grid-stride beyond the grid, a
 * block's waves together: they meet at barriers).
 * Args: gemm's (T A [M, K], T B [N, K], T bias [N] or NULL, T residual [M, N] or NULL,
 *       T C [M, N], I M, I N, I K, T mul [M, N] or NULL), then T gamma [K], F eps (HK_NORM_A).
 * Grid: ceil(units / (HK_SK_WARPS / HK_SK_KS)) blocks of HK_SK_WARPS * 64 threads, units =
 * ceil(N / HK_SK_NW) * ceil(M / HK_SK_MB). */
#if !HK_TRANS_B || HK_ROPE || HK_NORM_C || HK_DUAL || HK_QB || HK_WAVE != 64
#error "gemm_skinny_amd: wave64, B stored [N, K], the plain epilogues and a folded rmsnorm only"
#endif
#if HK_SK_MB * HK_SK_NW > 64
#error "gemm_skinny_amd: a lane stores each output of a wave (HK_SK_MB * HK_SK_NW <= 64)"
#endif
#if HK_SK_WARPS % HK_SK_KS != 0
#error "gemm_skinny_amd: a block's waves are whole units (HK_SK_WARPS % HK_SK_KS == 0)"
#endif
#define SKA_UPB (HK_SK_WARPS / HK_SK_KS)         /* units per block */
#define SKA_CHUNK 512LL                          /* elements of K a wave reads per load: 64 lanes x 8 */
#define SKA_STEP (SKA_CHUNK * HK_SK_KS)          /* elements of K between a lane's chunks */
#define SKA_SUMS (HK_SK_MB * HK_SK_NW)           /* a unit's sums (and HK_SK_MB sums of squares, HK_NORM_A) */
/* A's loads of a step's chunks issued with B's (at most HK_SKA_AHEAD of them: 4 registers each;
 * the variant sets 8, gfx908's smaller register file 4), else each before its chunk's products
 * (more rows: their latency then adds up per chunk) */
#define SKA_A_AHEAD (HK_SK_MB * HK_SK_U <= HK_SKA_AHEAD)

/* 16 bytes of a weight row, marked non-temporal (nothing in the launch reads them again) */
HK_DEVICE hk_v16_t hk_ska_ld_stream(const HK_T *p) { return __builtin_nontemporal_load((const hk_v16_t *)p); }

HK_DEVICE void hk_ska_unpack(hk_v16_t u, float *f) {
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = HK_LOAD((HK_T)(u[i] & 0xffffu));
    f[2 * i + 1] = HK_LOAD((HK_T)(u[i] >> 16));
  }
}

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *A, const HK_T *B, const HK_T *bias, const HK_T *residual, HK_T *C, long long M, long long N,
        long long K, const HK_T *mul
#if HK_NORM_A
        , const HK_T *norm_gamma, float norm_eps
#endif
        ) {
  const int wave = HK_TID / 64, lane = HK_TID % 64, slice = wave % HK_SK_KS;
  const long long groups = (N + HK_SK_NW - 1) / HK_SK_NW, m_tiles = (M + HK_SK_MB - 1) / HK_SK_MB;
  const long long units = groups * m_tiles;
#if HK_SK_KS > 1
  __shared__ float ska_red[HK_SK_WARPS][SKA_SUMS + HK_NORM_A * HK_SK_MB]; /* each slice's sums */
#endif
  for (long long bu = HK_BID; bu * SKA_UPB < units; bu += HK_NBLOCKS) { /* the same trips for a block's waves */
    const long long w = bu * SKA_UPB + wave / HK_SK_KS;
    const bool active = w < units;
    const long long n0 = (active ? w : 0) % groups * HK_SK_NW, m0 = (active ? w : 0) / groups * HK_SK_MB;
    const int mn = (int)hk_min_ll(HK_SK_MB, M - m0);
    const HK_T *brow[HK_SK_NW]; /* rows past N read row N - 1; their sums are never stored */
#pragma unroll
    for (int r = 0; r < HK_SK_NW; r++) brow[r] = B + (n0 + r < N ? n0 + r : N - 1) * K;
    float acc[HK_SK_MB][HK_SK_NW];
#pragma unroll
    for (int m = 0; m < HK_SK_MB; m++)
#pragma unroll
      for (int r = 0; r < HK_SK_NW; r++) acc[m][r] = 0.0f;
#if HK_NORM_A
    float ss[HK_SK_MB]; /* each row's sum of squares over this lane's elements */
#pragma unroll
    for (int m = 0; m < HK_SK_MB; m++) ss[m] = 0.0f;
#endif
    for (long long k0 = 8 * lane + SKA_CHUNK * slice; active && k0 - 8 * lane < K; k0 += SKA_STEP * HK_SK_U) {
      hk_v16_t wv[HK_SK_NW][HK_SK_U];
#if SKA_A_AHEAD
      hk_v16_t av[HK_SK_MB][HK_SK_U]; /* A's 16 bytes of every step, loaded before B's */
#pragma unroll
      for (int u = 0; u < HK_SK_U; u++)
#pragma unroll
        for (int m = 0; m < HK_SK_MB; m++) {
          const long long k = k0 + SKA_STEP * u;
          av[m][u] = m < mn && k < K ? *(const hk_v16_t *)(A + (m0 + m) * K + k) : (hk_v16_t)0u;
        }
#endif
#pragma unroll
      for (int u = 0; u < HK_SK_U; u++) /* every load of the step in flight first; a lane past K reads zeros */
#pragma unroll
        for (int r = 0; r < HK_SK_NW; r++) {
          const long long k = k0 + SKA_STEP * u;
          if (k < K) {
            wv[r][u] = hk_ska_ld_stream(brow[r] + k);
          } else {
            wv[r][u] = (hk_v16_t)0u;
          }
        }
#pragma unroll
      for (int u = 0; u < HK_SK_U; u++) {
        const long long k = k0 + SKA_STEP * u;
        if (k >= K) continue; /* this lane's chunk is past K (another lane's may not be) */
        float wf[HK_SK_NW][8];
#pragma unroll
        for (int r = 0; r < HK_SK_NW; r++) hk_ska_unpack(wv[r][u], wf[r]);
#if HK_NORM_A
        float g[8];
        hk_ska_unpack(*(const hk_v16_t *)(norm_gamma + k), g);
#endif
#pragma unroll
        for (int m = 0; m < HK_SK_MB; m++) { /* a predicate, not a break: the loop unrolls, acc stays in registers */
          if (m < mn) {
            float a[8];
#if SKA_A_AHEAD
            hk_ska_unpack(av[m][u], a);
#else
            hk_ska_unpack(*(const hk_v16_t *)(A + (m0 + m) * K + k), a);
#endif
#if HK_NORM_A
#pragma unroll
            for (int e = 0; e < 8; e++) {
              ss[m] = fmaf(a[e], a[e], ss[m]);
              a[e] = HK_LOAD(HK_STORE(a[e] * g[e])); /* the norm's 16-bit output, before its row scale */
            }
#endif
#pragma unroll
            for (int r = 0; r < HK_SK_NW; r++)
#pragma unroll
              for (int e = 0; e < 8; e++) acc[m][r] = fmaf(a[e], wf[r][e], acc[m][r]);
          }
        }
      }
    }
    /* every lane gets every sum (butterfly), in the same order on every lane */
#pragma unroll
    for (int m = 0; m < HK_SK_MB; m++) {
#if HK_NORM_A
      for (int off = 32; off > 0; off >>= 1) ss[m] += hk_shfl_xor(ss[m], off);
#endif
#pragma unroll
      for (int r = 0; r < HK_SK_NW; r++)
        for (int off = 32; off > 0; off >>= 1) acc[m][r] += hk_shfl_xor(acc[m][r], off);
    }
#if HK_SK_KS > 1
    /* the slices' sums meet: each wave's to LDS, the unit's first wave adds them in slice order */
    HK_SYNC(); /* the previous trip's sums are read */
    if (lane == 0) {
#pragma unroll
      for (int m = 0; m < HK_SK_MB; m++) {
#pragma unroll
        for (int r = 0; r < HK_SK_NW; r++) ska_red[wave][m * HK_SK_NW + r] = acc[m][r];
#if HK_NORM_A
        ska_red[wave][SKA_SUMS + m] = ss[m];
#endif
      }
    }
    HK_SYNC();
    if (slice != 0 || !active) continue;
#pragma unroll
    for (int m = 0; m < HK_SK_MB; m++) {
#pragma unroll
      for (int r = 0; r < HK_SK_NW; r++) {
        float v = ska_red[wave][m * HK_SK_NW + r];
#pragma unroll
        for (int s = 1; s < HK_SK_KS; s++) v += ska_red[wave + s][m * HK_SK_NW + r];
        acc[m][r] = v;
      }
#if HK_NORM_A
      float v = ska_red[wave][SKA_SUMS + m];
#pragma unroll
      for (int s = 1; s < HK_SK_KS; s++) v += ska_red[wave + s][SKA_SUMS + m];
      ss[m] = v;
#endif
    }
#else
    if (!active) continue;
#endif
#if HK_NORM_A
#pragma unroll
    for (int m = 0; m < HK_SK_MB; m++) {
      const float scale = rsqrtf(ss[m] / (float)K + norm_eps);
#pragma unroll
      for (int r = 0; r < HK_SK_NW; r++) acc[m][r] *= scale;
    }
#endif
#pragma unroll
    for (int m = 0; m < HK_SK_MB; m++)
#pragma unroll
      for (int r = 0; r < HK_SK_NW; r++) {
        const long long gm = m0 + m, gn = n0 + r;
        if (lane != m * HK_SK_NW + r || m >= mn || gn >= N) continue;
        float v = acc[m][r];
#if HK_HAS_BIAS
        v += HK_LOAD(bias[gn]);
#endif
        v = HK_ACT(v);
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
