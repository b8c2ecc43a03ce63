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
 * Work: a unit is HK_SK_NW consecutive columns (rows of B, and of B2) and HK_SK_MB rows of A
 * (an m tile; M > HK_SK_MB takes several), taken by HK_SK_KS warps of a block, each a slice of
 * K: slice s reads the 256-element chunks s, s + HK_SK_KS, ... of the unit's rows. Lane l
 * reads elements [8 l, + 8) of each chunk of each of its B rows, HK_SK_U chunks per row in
 * flight before it uses them; A's matching 16 bytes come through L1 (every warp of the SM reads
 * the same few rows). The lanes' partial sums meet by butterfly shuffles; with HK_SK_KS > 1 the
 * slices' sums meet in shared memory, added in slice order by the unit's first warp. Lane
 * (m HK_SK_NW + r) of that warp stores output (m, r). A block holds HK_SK_WARPS / HK_SK_KS
 * units, numbered column-group-major over the blocks (grid-stride beyond the grid, a block's
 * warps together: they meet at barriers).
 * Programmatic dependent launch: before griddepcontrol.wait a block only prefetches its B
 * rows into L2 (weights: nothing earlier writes them) and triggers its dependents; every
 * thread waits before it reads A or writes C.
 * HK_QB (1 int8, 2 fp8_e4m3; a dequant folded into the gemm, lower.h): B (and B2) are 8-bit
 * [N, K] with f32 scales in blocks; each element is taken as q * scale rounded to T, the value
 * the dequant node would have stored, so the products are the unfolded pair's. A lane then reads
 * 8 bytes (8 elements) of a B row per load, twice as many loads in flight (HK_SK_U is the
 * variant's doubled): the same 8 elements of k per lane and step as the 16-bit kernel. The
 * scale of a lane's 8 elements is read once per row when the scales are per row (scale_cols 1),
 * else once per 8 elements (per element where a block boundary falls inside them).
 * Args: gemm's (T A [M, K], T B [N, K], T bias [N] or NULL, T residual [M, N] or NULL,
 *       T C [M, N], I M, I N, I K, T mul [M, N] or NULL), then T B2 (HK_DUAL), then
 *       T gamma [K], F eps (HK_NORM_A), then (HK_QB) F32 scale, F32 scale2 or NULL, I b_rows,
 *       I scale_rows, I scale_cols, I block_rows, I block_cols; B and B2 then 8-bit.
 * Grid: ceil(units / (HK_SK_WARPS / HK_SK_KS)) blocks of HK_SK_WARPS * 32 threads, units =
 * ceil(N / HK_SK_NW) * ceil(M / HK_SK_MB). */
#if !HK_TRANS_B || HK_ROPE || HK_NORM_C
#error "gemm_skinny: B stored [N, K], no rope or norm epilogue"
#endif
#if HK_SK_MB * HK_SK_NW > 32
#error "gemm_skinny: a lane stores each output of a warp (HK_SK_MB * HK_SK_NW <= 32)"
#endif
#ifndef HK_SK_KS
#define HK_SK_KS 1
#endif
#if HK_SK_WARPS % HK_SK_KS != 0
#error "gemm_skinny: a block's warps are whole units (HK_SK_WARPS % HK_SK_KS == 0)"
#endif
#define SK_NB (1 + HK_DUAL)                 /* B matrices */
#define SK_UPB (HK_SK_WARPS / HK_SK_KS)     /* units per block */
#define SK_STEP (256LL * HK_SK_KS)          /* elements of K between a lane's chunks */
#define SK_SUMS (SK_NB * HK_SK_MB * HK_SK_NW) /* a unit's sums (and HK_SK_MB sums of squares, HK_NORM_A) */
#if HK_QB
typedef unsigned char sk_b_t; /* B's elements as stored */
typedef uint2 sk_load_t;      /* one load of a B row: 8 elements */
#else
typedef HK_T sk_b_t;
typedef uint4 sk_load_t;
#endif
#define SK_LINE (128 / (int)sizeof(sk_b_t)) /* elements of B in a 128-byte line */

HK_DEVICE uint4 hk_sk_ld_stream(const HK_T *p) { /* 16 bytes of a weight row, not kept in L1 */
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

#if HK_QB
HK_DEVICE uint2 hk_sk_ld_stream_q(const unsigned char *p) { /* 8 bytes of an 8-bit weight row, not kept in L1 */
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}

/* a and b rounded to T (to nearest even) and back: HK_LOAD(HK_STORE(x)) of each, the pair in one
 * conversion (cvt.rn.{bf16,f16}x2.f32: its first source to the upper half) */
HK_DEVICE void hk_sk_round2(float &a, float &b) {
  unsigned p;
#if HK_SK_BF16
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(p) : "f"(b), "f"(a));
#else
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(p) : "f"(b), "f"(a));
#endif
  a = HK_LOAD((HK_T)(p & 0xffffu));
  b = HK_LOAD((HK_T)(p >> 16));
}

/* 8 elements of an 8-bit B row as T holds q * scale (as f32): sc[e] is element e's scale.
 * int8: byte q of a word becomes the f32 2^23 + (q + 128) by one byte permute (the word's signs
 * flipped first: q + 128 in 0..255), exactly q after subtracting 2^23 + 128 -- the integer
 * conversion unit (a quarter of the ALUs' rate) is not used; the products are rounded to T a
 * pair at a time. The same values as (float)q * sc rounded to T one at a time. */
HK_DEVICE void hk_sk_unpack_q(uint2 u, const float *sc, float *f) {
  const unsigned w[2] = {u.x, u.y};
#pragma unroll
  for (int i = 0; i < 2; i++) {
#if HK_QB == 2
#pragma unroll
    for (int h = 0; h < 2; h++) { /* two e4m3 -> two f16 (the upper byte to the upper half), exact */
      const unsigned short pair = (unsigned short)(w[i] >> (16 * h));
      unsigned int h2;
      asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h2) : "h"(pair));
      float lo, hi;
      asm("cvt.f32.f16 %0, %1;\n" : "=f"(lo) : "h"((unsigned short)(h2 & 0xffffu)));
      asm("cvt.f32.f16 %0, %1;\n" : "=f"(hi) : "h"((unsigned short)(h2 >> 16)));
      f[4 * i + 2 * h] = lo;
      f[4 * i + 2 * h + 1] = hi;
    }
#else
    const unsigned x = w[i] ^ 0x80808080u; /* each byte q + 128 */
#pragma unroll
    for (int b = 0; b < 4; b++) f[4 * i + b] = __uint_as_float(__byte_perm(x, 0x4B000000u, 0x7440u | b)) - 8388736.0f;
#endif
  }
#pragma unroll
  for (int e = 0; e < 8; e += 2) { /* the dequant node's rounding */
    f[e] *= sc[e], f[e + 1] *= sc[e + 1];
    hk_sk_round2(f[e], f[e + 1]);
  }
}

/* The scales of elements [k, k + 8) of a row whose scales start at srow */
HK_DEVICE void hk_sk_scales(const float *srow, long long scols, unsigned k, unsigned bcols, float *sc) {
  if (scols == 1) {
    const float s = __ldg(srow);
#pragma unroll
    for (int e = 0; e < 8; e++) sc[e] = s;
  } else if (k / bcols == (k + 7u) / bcols) {
    const float s = __ldg(srow + k / bcols);
#pragma unroll
    for (int e = 0; e < 8; e++) sc[e] = s;
  } else {
#pragma unroll
    for (int e = 0; e < 8; e++) sc[e] = __ldg(srow + (k + (unsigned)e) / bcols);
  }
}
#endif

HK_DEVICE void hk_sk_unpack(uint4 u, float *f) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = HK_LOAD((HK_T)(w[i] & 0xffffu));
    f[2 * i + 1] = HK_LOAD((HK_T)(w[i] >> 16));
  }
}

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *A, const sk_b_t *B, const HK_T *bias, const HK_T *residual, HK_T *C, long long M, long long N,
        long long K, const HK_T *mul
#if HK_DUAL
        , const sk_b_t *B2
#endif
#if HK_NORM_A
        , const HK_T *norm_gamma, float norm_eps
#endif
#if HK_QB
        , const float *qb_scale, const float *qb_scale2, long long qb_rows, long long qb_scale_rows,
        long long qb_scale_cols, long long qb_block_rows, long long qb_block_cols
#endif
        ) {
#if HK_QB
  (void)qb_rows, (void)qb_scale_rows;
  const unsigned qb_bcols = (unsigned)qb_block_cols; /* K < 2^31: lower.h's fold rule */
#endif
  const int warp = HK_TID / 32, lane = HK_TID % 32, slice = warp % HK_SK_KS;
  const long long groups = (N + HK_SK_NW - 1) / HK_SK_NW, m_tiles = (M + HK_SK_MB - 1) / HK_SK_MB;
  const long long units = groups * m_tiles, first = HK_BID * SK_UPB + warp / HK_SK_KS;
#if HK_SK_KS > 1
  __shared__ float sk_red[HK_SK_WARPS][SK_SUMS + HK_NORM_A * HK_SK_MB]; /* each slice's sums */
#endif
  /* before the wait: this warp's first B rows towards L2 (one 128-byte line per lane per step;
   * the unit's slices take turns of 32 lines) */
  if (first < units) {
    const long long n0 = first % groups * HK_SK_NW;
#pragma unroll
    for (int r = 0; r < HK_SK_NW; r++) {
      const long long n = n0 + r < N ? n0 + r : N - 1;
      for (long long k = SK_LINE * (lane + 32LL * slice); k < K; k += SK_LINE * 32LL * HK_SK_KS) {
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(B + n * K + k));
#if HK_DUAL
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(B2 + n * K + k));
#endif
      }
    }
  }
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  for (long long bu = HK_BID; bu * SK_UPB < units; bu += HK_NBLOCKS) { /* the same trips for a block's warps */
    const long long w = bu * SK_UPB + warp / HK_SK_KS;
    const bool active = w < units;
    const long long n0 = (active ? w : 0) % groups * HK_SK_NW, m0 = (active ? w : 0) / groups * HK_SK_MB;
    const int mn = (int)hk_min_ll(HK_SK_MB, M - m0);
    const sk_b_t *brow[SK_NB][HK_SK_NW]; /* rows past N read row N - 1; their sums are never stored */
#if HK_QB
    const float *srow[SK_NB][HK_SK_NW]; /* the rows' scales */
#endif
#pragma unroll
    for (int r = 0; r < HK_SK_NW; r++) {
      const long long n = n0 + r < N ? n0 + r : N - 1;
      brow[0][r] = B + n * K;
#if HK_DUAL
      brow[1][r] = B2 + n * K;
#endif
#if HK_QB
      srow[0][r] = qb_scale + n / qb_block_rows * qb_scale_cols;
#if HK_DUAL
      srow[1][r] = qb_scale2 + n / qb_block_rows * qb_scale_cols;
#endif
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
    for (long long k0 = 8 * lane + 256LL * slice; active && k0 < K; k0 += SK_STEP * HK_SK_U) {
      sk_load_t wv[SK_NB][HK_SK_NW][HK_SK_U];
#pragma unroll
      for (int u = 0; u < HK_SK_U; u++) /* every load of the step in flight first */
#pragma unroll
        for (int b = 0; b < SK_NB; b++)
#pragma unroll
          for (int r = 0; r < HK_SK_NW; r++)
#if HK_QB
            wv[b][r][u] = k0 + SK_STEP * u < K ? hk_sk_ld_stream_q(brow[b][r] + k0 + SK_STEP * u) : make_uint2(0u, 0u);
#else
            wv[b][r][u] = k0 + SK_STEP * u < K ? hk_sk_ld_stream(brow[b][r] + k0 + SK_STEP * u) : make_uint4(0u, 0u, 0u, 0u);
#endif
#pragma unroll
      for (int u = 0; u < HK_SK_U; u++) {
        const long long k = k0 + SK_STEP * u;
        if (k >= K) break;
#if HK_NORM_A
        float g[8];
        hk_sk_unpack(__ldg((const uint4 *)(norm_gamma + k)), g);
#endif
        float wf[SK_NB][HK_SK_NW][8];
#pragma unroll
        for (int b = 0; b < SK_NB; b++)
#pragma unroll
          for (int r = 0; r < HK_SK_NW; r++) {
#if HK_QB
            float sc[8];
            hk_sk_scales(srow[b][r], qb_scale_cols, (unsigned)k, qb_bcols, sc);
            hk_sk_unpack_q(wv[b][r][u], sc, wf[b][r]);
#else
            hk_sk_unpack(wv[b][r][u], wf[b][r]);
#endif
          }
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
#endif
#pragma unroll
      for (int b = 0; b < SK_NB; b++)
#pragma unroll
        for (int r = 0; r < HK_SK_NW; r++)
          for (int off = 16; off > 0; off >>= 1) acc[b][m][r] += hk_shfl_xor(acc[b][m][r], off);
    }
#if HK_SK_KS > 1
    /* the slices' sums meet: each warp's to shared memory, the unit's first warp adds them in
     * slice order (the same bits whichever warp finishes first) */
    HK_SYNC(); /* the previous trip's sums are read */
    if (lane == 0) {
#pragma unroll
      for (int m = 0; m < HK_SK_MB; m++) {
#pragma unroll
        for (int b = 0; b < SK_NB; b++)
#pragma unroll
          for (int r = 0; r < HK_SK_NW; r++) sk_red[warp][(b * HK_SK_MB + m) * HK_SK_NW + r] = acc[b][m][r];
#if HK_NORM_A
        sk_red[warp][SK_SUMS + m] = ss[m];
#endif
      }
    }
    HK_SYNC();
    if (slice != 0 || !active) continue;
#pragma unroll
    for (int m = 0; m < HK_SK_MB; m++) {
#pragma unroll
      for (int b = 0; b < SK_NB; b++)
#pragma unroll
        for (int r = 0; r < HK_SK_NW; r++) {
          float v = sk_red[warp][(b * HK_SK_MB + m) * HK_SK_NW + r];
#pragma unroll
          for (int s = 1; s < HK_SK_KS; s++) v += sk_red[warp + s][(b * HK_SK_MB + m) * HK_SK_NW + r];
          acc[b][m][r] = v;
        }
#if HK_NORM_A
      float v = sk_red[warp][SK_SUMS + m];
#pragma unroll
      for (int s = 1; s < HK_SK_KS; s++) v += sk_red[warp + s][SK_SUMS + m];
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
      for (int b = 0; b < SK_NB; b++)
#pragma unroll
        for (int r = 0; r < HK_SK_NW; r++) acc[b][m][r] *= scale;
    }
#endif
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
