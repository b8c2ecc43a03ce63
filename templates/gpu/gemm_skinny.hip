/* SPDX-License-Identifier: Apache-2.0 */
/* gemm for a few rows of A (decode steps: M = the step's token rows), NVIDIA sm_90a, f16/bf16,
 * B stored [N, K] (HK_TRANS_B, the checkpoints' layout), K % 8 == 0 (align 8): the weight
 * matrix is read once, in 16-byte loads that bypass L1, by every SM at once -- the launch is
 * bound by that read, so the kernel is built for bytes in flight, not for the tensor cores.
 * Semantics: templates/gpu/gemm.hip's (C = act(A @ B + bias) * mul + residual; HK_DUAL:
 * act(A @ B + bias) * (A @ B2) + residual), f32 accumulation, one rounding at the store.
 * HK_NORM_A (fusion's folded rmsnorm, as gemm_tma has it): A is rmsnorm(A) with the arguments
 * gamma [K] and eps -- each element of A times gamma, rounded to 16 bits as the norm's output
 * would be, and each row of sums times rsqrt(mean(A row^2) + eps) before the epilogue.
 *
 * Work: a warp owns HK_SK_NW consecutive columns (rows of B, and of B2) and HK_SK_MB rows of A
 * (an m tile; M > HK_SK_MB takes several). Lane l reads elements [8 l + 256 j, + 8) of each
 * of its B rows for j = 0, 1, ...: HK_SK_U such 16-byte loads per row in flight before it
 * uses them; A's matching 16 bytes come through L1 (every warp of the SM reads the same few
 * rows). The lanes' partial sums meet by butterfly shuffles; lane (m HK_SK_NW + r) stores
 * output (m, r). Warps are numbered column-group-major over the blocks (grid-stride beyond
 * the grid).
 * Programmatic dependent launch: before griddepcontrol.wait a block only prefetches its B
 * rows into L2 (weights: nothing earlier writes them) and triggers its dependents; every
 * thread waits before it reads A or writes C.
 * Args: gemm's (T A [M, K], T B [N, K], T bias [N] or NULL, T residual [M, N] or NULL,
 *       T C [M, N], I M, I N, I K, T mul [M, N] or NULL), then T B2 (HK_DUAL), then
 *       T gamma [K], F eps (HK_NORM_A).
 * Grid: ceil(warps / HK_SK_WARPS) blocks of HK_SK_WARPS * 32 threads, warps = ceil(N /
 * HK_SK_NW) * ceil(M / HK_SK_MB). */
#if !HK_TRANS_B || HK_ROPE || HK_NORM_C
#error "gemm_skinny: B stored [N, K], no rope or norm epilogue"
#endif
#if HK_SK_MB * HK_SK_NW > 32
#error "gemm_skinny: a lane stores each output of a warp (HK_SK_MB * HK_SK_NW <= 32)"
#endif
#define SK_NB (1 + HK_DUAL) /* B matrices */

HK_DEVICE uint4 hk_sk_ld_stream(const HK_T *p) { /* 16 bytes of a weight row, not kept in L1 */
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

HK_DEVICE void hk_sk_unpack(uint4 u, float *f) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = HK_LOAD((HK_T)(w[i] & 0xffffu));
    f[2 * i + 1] = HK_LOAD((HK_T)(w[i] >> 16));
  }
}

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *A, const HK_T *B, const HK_T *bias, const HK_T *residual, HK_T *C, long long M, long long N,
        long long K, const HK_T *mul
#if HK_DUAL
        , const HK_T *B2
#endif
#if HK_NORM_A
        , const HK_T *norm_gamma, float norm_eps
#endif
        ) {
  const int warp = HK_TID / 32, lane = HK_TID % 32;
  const long long groups = (N + HK_SK_NW - 1) / HK_SK_NW, m_tiles = (M + HK_SK_MB - 1) / HK_SK_MB;
  const long long first = HK_BID * HK_SK_WARPS + warp, stride = HK_NBLOCKS * HK_SK_WARPS;
  /* before the wait: this warp's first B rows towards L2 (one 128-byte line per lane per step) */
  if (first < groups * m_tiles) {
    const long long n0 = first % groups * HK_SK_NW;
#pragma unroll
    for (int r = 0; r < HK_SK_NW; r++) {
      const long long n = n0 + r < N ? n0 + r : N - 1;
      for (long long k = 64 * lane; k < K; k += 64 * 32) {
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(B + n * K + k));
#if HK_DUAL
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(B2 + n * K + k));
#endif
      }
    }
  }
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  for (long long w = first; w < groups * m_tiles; w += stride) {
    const long long n0 = w % groups * HK_SK_NW, m0 = w / groups * HK_SK_MB;
    const int mn = (int)hk_min_ll(HK_SK_MB, M - m0);
    const HK_T *brow[SK_NB][HK_SK_NW]; /* rows past N read row N - 1; their sums are never stored */
#pragma unroll
    for (int r = 0; r < HK_SK_NW; r++) {
      const long long n = n0 + r < N ? n0 + r : N - 1;
      brow[0][r] = B + n * K;
#if HK_DUAL
      brow[1][r] = B2 + n * K;
#endif
    }
    float acc[SK_NB][HK_SK_MB][HK_SK_NW];
#pragma unroll
    for (int b = 0; b < SK_NB; b++)
#pragma unroll
      for (int m = 0; m < HK_SK_MB; m++)
#pragma unroll
        for (int r = 0; r < HK_SK_NW; r++) acc[b][m][r] = 0.0f;
#if HK_NORM_A
    float ss[HK_SK_MB];
#pragma unroll
    for (int m = 0; m < HK_SK_MB; m++) ss[m] = 0.0f;
#endif
    for (long long k0 = 8 * lane; k0 < K; k0 += 256 * HK_SK_U) {
      uint4 wv[SK_NB][HK_SK_NW][HK_SK_U];
#pragma unroll
      for (int u = 0; u < HK_SK_U; u++) /* every load of the step in flight first */
#pragma unroll
        for (int b = 0; b < SK_NB; b++)
#pragma unroll
          for (int r = 0; r < HK_SK_NW; r++)
            wv[b][r][u] = k0 + 256 * u < K ? hk_sk_ld_stream(brow[b][r] + k0 + 256 * u) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
      for (int u = 0; u < HK_SK_U; u++) {
        const long long k = k0 + 256 * u;
        if (k >= K) break;
#if HK_NORM_A
        float g[8];
        hk_sk_unpack(__ldg((const uint4 *)(norm_gamma + k)), g);
#endif
        float wf[SK_NB][HK_SK_NW][8];
#pragma unroll
        for (int b = 0; b < SK_NB; b++)
#pragma unroll
          for (int r = 0; r < HK_SK_NW; r++) hk_sk_unpack(wv[b][r][u], wf[b][r]);
#pragma unroll
        for (int m = 0; m < HK_SK_MB; m++) {
          if (m >= mn) break;
          float a[8];
          hk_sk_unpack(__ldg((const uint4 *)(A + (m0 + m) * K + k)), a);
#if HK_NORM_A
#pragma unroll
          for (int e = 0; e < 8; e++) {
            ss[m] = fmaf(a[e], a[e], ss[m]);
            a[e] = HK_LOAD(HK_STORE(a[e] * g[e])); /* the norm's 16-bit output, before its row scale */
          }
#endif
#pragma unroll
          for (int b = 0; b < SK_NB; b++)
#pragma unroll
            for (int r = 0; r < HK_SK_NW; r++)
#pragma unroll
              for (int e = 0; e < 8; e++) acc[b][m][r] = fmaf(a[e], wf[b][r][e], acc[b][m][r]);
        }
      }
    }
    /* every lane gets every sum (butterfly), in the same order on every lane */
#pragma unroll
    for (int m = 0; m < HK_SK_MB; m++) {
#if HK_NORM_A
      for (int off = 16; off > 0; off >>= 1) ss[m] += hk_shfl_xor(ss[m], off);
      const float scale = rsqrtf(ss[m] / (float)K + norm_eps);
#endif
#pragma unroll
      for (int b = 0; b < SK_NB; b++)
#pragma unroll
        for (int r = 0; r < HK_SK_NW; r++) {
          for (int off = 16; off > 0; off >>= 1) acc[b][m][r] += hk_shfl_xor(acc[b][m][r], off);
#if HK_NORM_A
          acc[b][m][r] *= scale;
#endif
        }
    }
#pragma unroll
    for (int m = 0; m < HK_SK_MB; m++)
#pragma unroll
      for (int r = 0; r < HK_SK_NW; r++) {
        const long long gm = m0 + m, gn = n0 + r;
        if (lane != m * HK_SK_NW + r || m >= mn || gn >= N) continue;
        float v = acc[0][m][r];
#if HK_HAS_BIAS
        v += HK_LOAD(bias[gn]);
#endif
        v = HK_ACT(v);
#if HK_DUAL
        v *= acc[1][m][r];
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
