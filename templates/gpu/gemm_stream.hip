/* SPDX-License-Identifier: Apache-2.0 */
/* gemm for a few rows of A (decode steps: M <= 8), NVIDIA sm_90a, f16/bf16, B stored [N, K]
 * (HK_TRANS_B), K % 8 == 0 (align 8), B 16-bit. A launch is bound by the read of B, and a
 * kernel that multiplies on the CUDA cores spends some 30 instructions on each 16 bytes of B
 * (converts, FMAs): at a few warps per SM that, not the memory, sets the time. Here B streams
 * into shared memory through the bulk copy engine (cp.async.bulk, 1-D, completing on
 * mbarriers: the bytes in flight cost no registers) and the tensor cores multiply it: one
 * ldmatrix and one mma per 256 bytes of B.
 * Semantics: templates/gpu/gemm_skinny.hip's (C = act(A @ B + bias) * mul + residual; HK_DUAL:
 * act(A @ B + bias) * (A @ B2) + residual; HK_NORM_A: A is rmsnorm(A) with gamma [K] and eps:
 * each element of A times gamma rounded to 16 bits, each row's sums times rsqrt(mean(A row^2)
 * + eps) before the epilogue), products exact and summed in f32, one rounding at the store.
 *
 * Work: a unit is 8 consecutive rows of B (of B and B2), the n side of an m16n8k16 mma whose m
 * side holds A's M rows (the other rows zero); warps take units in turn (warp w of the grid:
 * units w, w + warps, ...) and walk each unit's k in chunks of HK_GS_SEG. A chunk lands in a
 * stage of the warp's own ring of HK_GS_STAGES (8 row copies per matrix, rows padded by 16
 * bytes so ldmatrix's 8 rows fall in different banks), one mbarrier per stage: the warp keeps
 * HK_GS_STAGES chunks in flight and refills a stage as soon as it has read it. A (M rows,
 * normalised with HK_NORM_A) is staged once per block in shared memory (rows padded by 8
 * elements: the fragment loads of 8 rows fall in different banks), zero beyond K up to a whole
 * 32-element step; columns of a chunk's last step past K multiply zeros (their B registers
 * cleared: shared memory there holds whatever was last copied).
 * A chunk's fragments are all loaded before its mmas, which alternate over GS_ACC accumulator
 * sets (summed in a fixed order when the unit ends): a single chain would cost 16 mma latencies
 * a chunk, and the ordered asm of ldmatrix would wait for each mma before the next load.
 * Lane l's accumulators c0, c1 are output (l / 4, n0 + 2 (l % 4) + {0, 1}) when l / 4 < M; its
 * epilogue operands are loaded when the unit begins, so their latency hides under its chunks.
 * Rows of a unit past N copy row N - 1 (finite) and store nothing. B's copies carry an L2
 * evict-first hint (a weight is read once per step; the next launch's prefetched lines stay).
 * Programmatic dependent launch: before griddepcontrol.wait a warp only initialises its
 * mbarriers and sends the start of its units' rows towards L2 (cp.async.bulk.prefetch, at most
 * HK_GS_PREFETCH bytes: B may be an activation in a general graph, so its copies into shared
 * memory wait), then the block lets its dependents start.
 * Args: gemm's (T A [M, K], T B [N, K], T bias [N] or NULL, T residual [M, N] or NULL,
 *       T C [M, N], I M, I N, I K, T mul [M, N] or NULL), then T B2 (HK_DUAL), then
 *       T gamma [K], F eps (HK_NORM_A). M <= HK_SK_MB <= 8.
 * Grid: min(2 SMs, ceil(units / HK_GS_WARPS)) blocks of HK_GS_WARPS * 32 threads; dynamic shared
 * memory: the rings, then A (variant_skinny_nv.c, gs_launch). */
#if !HK_TRANS_B || HK_ROPE || HK_NORM_C || HK_QB
#error "gemm_stream: 16-bit B stored [N, K], no rope or norm epilogue"
#endif
#if HK_SK_MB > 8 || HK_GS_SEG % 32 != 0
#error "gemm_stream: at most 8 rows of A (one mma's half); chunks of whole 32-element steps"
#endif
#if HK_GS_BF16
#define GS_MMA hk_mma_16816_bf16
#else
#define GS_MMA hk_mma_16816_f16
#endif
#define GS_NB (1 + HK_DUAL)                                   /* B matrices */
#define GS_ROW_BYTES (HK_GS_SEG * 2 + 16)                     /* a chunk's row in shared memory */
#define GS_STAGE_BYTES (GS_NB * 8 * GS_ROW_BYTES)             /* a chunk: 8 rows of B, then of B2 */
#define GS_RING_BYTES (HK_GS_STAGES * GS_STAGE_BYTES)         /* a warp's ring */
#define GS_AV 8                                               /* A's 16-byte loads in flight per thread */
#define GS_ITERS (HK_GS_SEG / 32)                             /* 32-column steps of a chunk */
#define GS_ACC 4                                              /* independent accumulators per matrix */

HK_DEVICE void hk_gs_bulk_load(unsigned dst, const void *src, unsigned bytes, unsigned bar,
                               unsigned long long policy) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(policy)
               : "memory");
}

HK_DEVICE void hk_gs_prefetch_l2(const void *src, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}

/* A warp's place in its walk over chunks (unit, k segment), one step at a time. */
typedef struct {
  long long unit, seg; /* the unit (8 rows of B from 8 unit), its k segment */
  int slot;            /* stage of the ring */
} hk_gs_cursor_t;

HK_DEVICE void hk_gs_next(hk_gs_cursor_t *p, long long warps, long long segs) {
  if (++p->seg == segs) p->seg = 0, p->unit += warps;
  if (++p->slot == HK_GS_STAGES) p->slot = 0;
}

/* The chunk at cursor p into its stage of ring (shared-window address), completing on the
 * stage's mbarrier (bar0 + 8 slot). Every lane of the warp calls it: lane 0 raises the expected
 * bytes, then lanes 0 .. 8 GS_NB - 1 copy a row each. */
HK_DEVICE void hk_gs_issue(unsigned ring, unsigned bar0, const hk_gs_cursor_t *p, long long N, long long K,
                           const HK_T *B, const HK_T *B2, unsigned long long policy, int lane) {
  const long long k0 = p->seg * HK_GS_SEG;
  const unsigned bytes = (unsigned)(hk_min_ll(HK_GS_SEG, K - k0) * 2);
  const unsigned dst = ring + (unsigned)p->slot * GS_STAGE_BYTES, bar = bar0 + 8u * (unsigned)p->slot;
  if (lane == 0) hk_mbar_expect_tx(bar, bytes * 8u * GS_NB);
  __syncwarp();
  if (lane < 8 * GS_NB) {
    const int r = lane % 8;
    const long long n = hk_min_ll(p->unit * 8 + r, N - 1); /* past N: row N - 1, never stored */
#if HK_DUAL
    const HK_T *src = (lane < 8 ? B : B2) + n * K + k0;
#else
    (void)B2;
    const HK_T *src = B + n * K + k0;
#endif
    hk_gs_bulk_load(dst + (unsigned)(lane * GS_ROW_BYTES), src, bytes, bar, policy);
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
  extern __shared__ __align__(128) unsigned char gs_smem[];
  __shared__ __align__(8) unsigned long long gs_full[HK_GS_WARPS][HK_GS_STAGES];
#if HK_NORM_A
  __shared__ float gs_ss[HK_SK_MB][HK_GS_WARPS]; /* a row's sum of squares, per warp */
#endif
#if !HK_DUAL
  const HK_T *const B2 = NULL;
#endif
  const int warp = HK_TID / 32, lane = HK_TID % 32;
  const long long warps = HK_NBLOCKS * HK_GS_WARPS, gw = HK_BID * HK_GS_WARPS + warp;
  const long long units = (N + 7) / 8, segs = (K + HK_GS_SEG - 1) / HK_GS_SEG;
  const long long my_units = gw < units ? (units - gw + warps - 1) / warps : 0;
  const long long chunks = my_units * segs;
  const unsigned ring = hk_smem_u32(gs_smem) + (unsigned)(warp * GS_RING_BYTES);
  const unsigned bar0 = hk_smem_u32(&gs_full[warp][0]);
  const long long ka = (K + 31) / 32 * 32 + 8; /* A's row stride in shared memory */
  HK_T *const as = (HK_T *)(gs_smem + HK_GS_WARPS * GS_RING_BYTES);
  if (lane == 0 && chunks > 0) {
#pragma unroll
    for (int s = 0; s < HK_GS_STAGES; s++) hk_mbar_init(bar0 + 8u * (unsigned)s, 1);
    hk_mbar_init_fence();
    /* before the wait: the first units' rows (8 K contiguous elements each) towards L2 */
    long long left = HK_GS_PREFETCH / GS_NB;
    for (long long u = gw; u < units && left > 0; u += warps) {
      const long long rows = hk_min_ll(8, N - u * 8);
      for (long long o = 0; o < rows * K * 2 && left > 0; o += 16384, left -= 16384) {
        const unsigned bytes = (unsigned)hk_min_ll(16384, rows * K * 2 - o);
        hk_gs_prefetch_l2((const unsigned char *)(B + u * 8 * K) + o, bytes);
#if HK_DUAL
        hk_gs_prefetch_l2((const unsigned char *)(B2 + u * 8 * K) + o, bytes);
#endif
      }
    }
  }
  __syncwarp();
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  hk_gs_cursor_t ahead = {gw, 0, 0}; /* the next chunk to issue */
  for (long long c = 0; c < hk_min_ll(HK_GS_STAGES, chunks); c++) {
    hk_gs_issue(ring, bar0, &ahead, N, K, B, B2, policy, lane);
    hk_gs_next(&ahead, warps, segs);
  }
  /* A into shared memory, zero past K (and for rows past M), normalised with HK_NORM_A: 16-byte
   * vectors (K % 8 == 0: a vector is all inside K or all past it), GS_AV of a thread's loads in
   * flight before it converts and stores (one at a time, each load would be a round trip) */
  const int mn = (int)hk_min_ll(M, HK_SK_MB);
#if HK_NORM_A
  float ss[HK_SK_MB];
#pragma unroll
  for (int m = 0; m < HK_SK_MB; m++) ss[m] = 0.0f;
#endif
  const long long nv = ka / 8; /* vectors of an A row in shared memory */
#pragma unroll
  for (int m = 0; m < HK_SK_MB; m++)
    for (long long v0 = HK_TID; v0 < nv; v0 += GS_AV * HK_THREADS) {
      uint4 x[GS_AV];
#if HK_NORM_A
      uint4 gv[GS_AV];
#endif
#pragma unroll
      for (int i = 0; i < GS_AV; i++) {
        const long long v = v0 + i * HK_THREADS;
        const bool in = m < mn && v < nv && v * 8 < K;
        x[i] = in ? __ldg((const uint4 *)(A + m * K + v * 8)) : make_uint4(0u, 0u, 0u, 0u);
#if HK_NORM_A
        gv[i] = in ? __ldg((const uint4 *)(norm_gamma + v * 8)) : make_uint4(0u, 0u, 0u, 0u);
#endif
      }
#pragma unroll
      for (int i = 0; i < GS_AV; i++) {
        const long long v = v0 + i * HK_THREADS;
        if (v >= nv) break;
#if HK_NORM_A
        unsigned w[4] = {x[i].x, x[i].y, x[i].z, x[i].w};
        const unsigned gw4[4] = {gv[i].x, gv[i].y, gv[i].z, gv[i].w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
          float lo = HK_LOAD((HK_T)(w[j] & 0xffffu)), hi = HK_LOAD((HK_T)(w[j] >> 16));
          ss[m] = fmaf(lo, lo, ss[m]);
          ss[m] = fmaf(hi, hi, ss[m]);
          lo *= HK_LOAD((HK_T)(gw4[j] & 0xffffu));
          hi *= HK_LOAD((HK_T)(gw4[j] >> 16));
          w[j] = (unsigned)HK_STORE(lo) | ((unsigned)HK_STORE(hi) << 16);
        }
        x[i] = make_uint4(w[0], w[1], w[2], w[3]);
#endif
        *(uint4 *)(as + m * ka + v * 8) = x[i]; /* the 16-bit values as loaded (or normalised) */
      }
    }
#if HK_NORM_A
#pragma unroll
  for (int m = 0; m < HK_SK_MB; m++) {
    for (int off = 16; off > 0; off >>= 1) ss[m] += hk_shfl_xor(ss[m], off);
    if (lane == 0) gs_ss[m][warp] = ss[m];
  }
#endif
  HK_SYNC();
  const int g = lane / 4, q = lane % 4; /* the mma fragments' row and column pair */
#if HK_NORM_A
  float scale = 0.0f; /* of output row g */
  if (g < HK_SK_MB) {
    float t = 0.0f;
    for (int w = 0; w < HK_GS_WARPS; w++) t += gs_ss[g][w];
    scale = rsqrtf(t / (float)K + norm_eps);
  }
#endif
  const HK_T *const arow = as + (g < HK_SK_MB ? g : 0) * ka + 2 * q; /* this lane's A fragment column */
  const bool a_on = g < mn;
  /* ldmatrix x4: lane l gives the address of row l % 8 of matrix l / 8 (k + 8 (l / 8)) */
  const unsigned ld_off = (unsigned)((lane % 8) * GS_ROW_BYTES + (lane / 8) * 16);
  float acc[GS_NB][GS_ACC][4]; /* summed in a fixed order at the unit's end */
  float ep_bias[2], ep_mul[2], ep_res[2];
  hk_gs_cursor_t at = {gw, 0, 0};
  unsigned phase = 0;
  for (long long c = 0; c < chunks; c++) {
    const long long n0 = at.unit * 8, k0 = at.seg * HK_GS_SEG;
    if (at.seg == 0) { /* a unit begins */
#pragma unroll
      for (int b = 0; b < GS_NB; b++)
#pragma unroll
        for (int q2 = 0; q2 < GS_ACC; q2++)
#pragma unroll
          for (int i = 0; i < 4; i++) acc[b][q2][i] = 0.0f;
#pragma unroll
      for (int j = 0; j < 2; j++) {
        const long long n = n0 + 2 * q + j;
        const bool on = a_on && n < N;
        ep_bias[j] = 0.0f, ep_mul[j] = 1.0f, ep_res[j] = 0.0f;
#if HK_HAS_BIAS
        if (on) ep_bias[j] = HK_LOAD(bias[n]);
#endif
#if HK_HAS_MUL
        if (on) ep_mul[j] = HK_LOAD(mul[g * N + n]);
#endif
#if HK_HAS_RESIDUAL
        if (on) ep_res[j] = HK_LOAD(residual[g * N + n]);
#endif
        (void)on;
      }
    }
    hk_mbar_wait(bar0 + 8u * (unsigned)at.slot, phase);
    __syncwarp(); /* the lanes leave the wait's loop apart; ldmatrix and mma take them together */
    const unsigned stage = hk_smem_u32(gs_smem) + (unsigned)(warp * GS_RING_BYTES + at.slot * GS_STAGE_BYTES);
    const int len = (int)hk_min_ll(HK_GS_SEG, K - k0);
    /* every fragment of the chunk first (ldmatrix and the A loads are ordered asm: interleaved
     * with the mmas each would wait for the one before), then the mmas on GS_ACC independent
     * accumulators (one chain through a single one is 16 mma latencies a chunk) */
    unsigned af[GS_ITERS][2][2]; /* A's a0, a2 of the iteration's two k16 steps (a1 = a3 = 0: rows 8..15) */
    unsigned bf[GS_NB][GS_ITERS][4];
#pragma unroll
    for (int it = 0; it < GS_ITERS; it++) {
      const int kk = 32 * it;
#pragma unroll
      for (int s2 = 0; s2 < 2; s2++) {
        const HK_T *ap = arow + k0 + kk + 16 * s2;
        const bool on = a_on && kk < len;
        af[it][s2][0] = on ? *(const unsigned *)ap : 0u;
        af[it][s2][1] = on ? *(const unsigned *)(ap + 8) : 0u;
      }
#pragma unroll
      for (int b = 0; b < GS_NB; b++) {
        if (kk < len)
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                       : "=r"(bf[b][it][0]), "=r"(bf[b][it][1]), "=r"(bf[b][it][2]), "=r"(bf[b][it][3])
                       : "r"(stage + (unsigned)(b * 8 * GS_ROW_BYTES + kk * 2) + ld_off));
#pragma unroll
        for (int j = 0; j < 4; j++)
          if (kk + 8 * j >= len) bf[b][it][j] = 0u; /* past the chunk's columns: not copied */
      }
    }
#pragma unroll
    for (int it = 0; it < GS_ITERS; it++) {
      if (32 * it >= len) break;
#pragma unroll
      for (int s2 = 0; s2 < 2; s2++) {
        const unsigned a[4] = {af[it][s2][0], 0u, af[it][s2][1], 0u};
#pragma unroll
        for (int b = 0; b < GS_NB; b++) {
          const unsigned bb[2] = {bf[b][it][2 * s2], bf[b][it][2 * s2 + 1]};
          GS_MMA(acc[b][(2 * it + s2) % GS_ACC], a, bb);
        }
      }
    }
    __syncwarp(); /* every lane has read the stage: it may be refilled */
    if (c + HK_GS_STAGES < chunks) {
      hk_gs_issue(ring, bar0, &ahead, N, K, B, B2, policy, lane);
      hk_gs_next(&ahead, warps, segs);
    }
    hk_gs_next(&at, warps, segs);
    if (at.slot == 0) phase ^= 1u;
    if (at.seg != 0 || !a_on) continue; /* not the unit's last chunk, or no output row here */
    float sum[GS_NB][2]; /* c0, c1 of the accumulators, in a fixed order */
#pragma unroll
    for (int b = 0; b < GS_NB; b++)
#pragma unroll
      for (int j = 0; j < 2; j++) {
        float t = acc[b][0][j];
#pragma unroll
        for (int q2 = 1; q2 < GS_ACC; q2++) t += acc[b][q2][j];
        sum[b][j] = t;
      }
#pragma unroll
    for (int j = 0; j < 2; j++) {
      const long long n = n0 + 2 * q + j;
      if (n >= N) continue;
      float v = sum[0][j];
#if HK_NORM_A
      v *= scale;
#endif
#if HK_HAS_BIAS
      v += ep_bias[j];
#endif
      v = HK_ACT(v);
#if HK_DUAL
#if HK_NORM_A
      v *= sum[1][j] * scale;
#else
      v *= sum[1][j];
#endif
#endif
#if HK_HAS_MUL
      v *= ep_mul[j];
#endif
#if HK_HAS_RESIDUAL
      v += ep_res[j];
#endif
      C[g * N + n] = HK_STORE(v);
    }
  }
}
