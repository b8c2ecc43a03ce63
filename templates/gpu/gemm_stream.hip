/* SPDX-License-Identifier: Apache-2.0 */
/* gemm for a few rows of A (decode steps), NVIDIA sm_90a, f16/bf16, B stored [N, K]
 * (HK_TRANS_B), K % 8 == 0 (align 8), B 16-bit: the weight matrix streams into shared memory
 * through the bulk copy engine (cp.async.bulk, 1-D, completing on mbarriers), so the bytes in
 * flight cost no registers and the stream does not stop between rows or k steps.
 * Semantics: templates/gpu/gemm_skinny.hip's (C = act(A @ B + bias) * mul + residual; HK_DUAL:
 * act(A @ B + bias) * (A @ B2) + residual; HK_NORM_A: A is rmsnorm(A) with gamma [K] and eps),
 * f32 accumulation in the same order per lane, one rounding at the store.
 *
 * Work: a warp owns a contiguous range of B's rows (N split evenly over every warp of the
 * grid: one block of HK_GS_WARPS warps per SM) and walks chunks c = (m tile, row, k segment)
 * in that order; a chunk is HK_GS_SEG elements of the row (of B, then of B2 behind it in the
 * same stage). Each warp has its own ring of HK_GS_STAGES stages in dynamic shared memory and
 * one mbarrier per stage: lane 0 issues chunk c + HK_GS_STAGES into stage c % HK_GS_STAGES as
 * soon as the warp has read chunk c out of it, so every warp keeps HK_GS_STAGES chunks in
 * flight from its first wait to its last row. Lane l multiplies elements [8 l + 256 i, + 8)
 * of the chunk (16-byte shared loads, conflict-free) with A's matching 16 bytes (through L1:
 * every warp reads the same few rows); at a row's last chunk the lanes' sums meet by
 * butterfly shuffles and lane m stores output (m, n), its epilogue operands (bias, mul,
 * residual) loaded when the row began so their latency hides under the row's chunks.
 * B's copies carry an L2 evict-first hint: a weight is read once per step, and the lines the
 * next launch prefetched should stay.
 * Programmatic dependent launch: before griddepcontrol.wait a warp only initialises its
 * mbarriers and prefetches the start of its rows into L2 (cp.async.bulk.prefetch, at most
 * HK_GS_PREFETCH bytes a warp: B may be an activation in a general graph, so its copies into
 * shared memory wait), then the block lets its dependents start.
 * Args: gemm's (T A [M, K], T B [N, K], T bias [N] or NULL, T residual [M, N] or NULL,
 *       T C [M, N], I M, I N, I K, T mul [M, N] or NULL), then T B2 (HK_DUAL), then
 *       T gamma [K], F eps (HK_NORM_A).
 * Grid: min(SMs, ceil(N / HK_GS_WARPS)) blocks of HK_GS_WARPS * 32 threads, HK_GS_WARPS *
 * HK_GS_STAGES * (1 + HK_DUAL) * HK_GS_SEG * sizeof(T) bytes of dynamic shared memory. */
#if !HK_TRANS_B || HK_ROPE || HK_NORM_C || HK_QB
#error "gemm_stream: 16-bit B stored [N, K], no rope or norm epilogue"
#endif
#if HK_SK_MB > 32 || HK_GS_SEG % 256 != 0
#error "gemm_stream: a lane stores each output row of a warp (HK_SK_MB <= 32); segments of whole 256-element steps"
#endif
#define GS_NB (1 + HK_DUAL)                                         /* B matrices */
#define GS_STAGE_BYTES (GS_NB * HK_GS_SEG * (int)sizeof(HK_T))      /* one chunk, B's then B2's */
#define GS_STEPS (HK_GS_SEG / 256)                                  /* 16-byte vectors per lane per chunk */

/* `bytes` of global memory at src into shared memory at dst, completing on the mbarrier at bar
 * (whose expected transaction count the issuing thread raised), with L2 policy `policy`. */
HK_DEVICE void hk_gs_bulk_load(unsigned dst, const void *src, unsigned bytes, unsigned bar,
                               unsigned long long policy) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;\n"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(bar), "l"(policy)
               : "memory");
}

HK_DEVICE void hk_gs_prefetch_l2(const void *src, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(src), "r"(bytes) : "memory");
}

HK_DEVICE void hk_gs_unpack(uint4 u, float *f) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = HK_LOAD((HK_T)(w[i] & 0xffffu));
    f[2 * i + 1] = HK_LOAD((HK_T)(w[i] >> 16));
  }
}

/* A warp's place in its walk over chunks (m tile, row, k segment), one step at a time (no
 * divisions in the loop). */
typedef struct {
  long long row, seg; /* row index in the warp's range, k segment */
  int slot;           /* stage of the ring */
} hk_gs_cursor_t;

HK_DEVICE void hk_gs_next(hk_gs_cursor_t *p, long long rows, long long segs) {
  if (++p->seg == segs) {
    p->seg = 0;
    if (++p->row == rows) p->row = 0; /* the next m tile */
  }
  if (++p->slot == HK_GS_STAGES) p->slot = 0;
}

/* The chunk at cursor p of a warp whose rows begin at r0 into its stage of ring, completing on
 * the stage's mbarrier (bar0 + 8 slot). Lane 0 only. */
HK_DEVICE void hk_gs_issue(unsigned ring, unsigned bar0, const hk_gs_cursor_t *p, long long r0, long long K,
                           const HK_T *B, const HK_T *B2, unsigned long long policy) {
  const long long n = r0 + p->row, k0 = p->seg * HK_GS_SEG;
  const unsigned bytes = (unsigned)(hk_min_ll(HK_GS_SEG, K - k0) * (long long)sizeof(HK_T));
  const unsigned dst = ring + (unsigned)p->slot * GS_STAGE_BYTES, bar = bar0 + 8u * (unsigned)p->slot;
  hk_mbar_expect_tx(bar, bytes * GS_NB);
  hk_gs_bulk_load(dst, B + n * K + k0, bytes, bar, policy);
#if HK_DUAL
  hk_gs_bulk_load(dst + HK_GS_SEG * (unsigned)sizeof(HK_T), B2 + n * K + k0, bytes, bar, policy);
#else
  (void)B2;
#endif
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
  extern __shared__ __align__(128) unsigned char gs_ring[];
  __shared__ __align__(8) unsigned long long gs_full[HK_GS_WARPS][HK_GS_STAGES];
#if !HK_DUAL
  const HK_T *const B2 = NULL;
#endif
  const int warp = HK_TID / 32, lane = HK_TID % 32;
  const long long warps = HK_NBLOCKS * HK_GS_WARPS, gw = HK_BID * HK_GS_WARPS + warp;
  const long long r0 = N * gw / warps, rows = N * (gw + 1) / warps - r0; /* this warp's rows of B */
  const long long segs = (K + HK_GS_SEG - 1) / HK_GS_SEG, m_tiles = (M + HK_SK_MB - 1) / HK_SK_MB;
  const long long chunks = rows * segs * m_tiles;
  const unsigned ring = hk_smem_u32(gs_ring) + (unsigned)(warp * HK_GS_STAGES * GS_STAGE_BYTES);
  const unsigned bar0 = hk_smem_u32(&gs_full[warp][0]);
  if (lane == 0 && rows > 0) {
#pragma unroll
    for (int s = 0; s < HK_GS_STAGES; s++) hk_mbar_init(bar0 + 8u * (unsigned)s, 1);
    hk_mbar_init_fence();
    /* before the wait: the start of this warp's rows (contiguous: [r0, r0 + rows) x K) towards L2 */
    const long long span = hk_min_ll(rows * K * (long long)sizeof(HK_T), HK_GS_PREFETCH / GS_NB);
    for (long long o = 0; o < span; o += 16384) {
      const unsigned bytes = (unsigned)hk_min_ll(16384, span - o);
      hk_gs_prefetch_l2((const unsigned char *)(B + r0 * K) + o, bytes);
#if HK_DUAL
      hk_gs_prefetch_l2((const unsigned char *)(B2 + r0 * K) + o, bytes);
#endif
    }
  }
  __syncwarp();
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (rows <= 0) return;
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  hk_gs_cursor_t ahead = {0, 0, 0}; /* lane 0: the next chunk to issue */
  if (lane == 0)
    for (long long c = 0; c < hk_min_ll(HK_GS_STAGES, chunks); c++) {
      hk_gs_issue(ring, bar0, &ahead, r0, K, B, B2, policy);
      hk_gs_next(&ahead, rows, segs);
    }
  float acc[GS_NB][HK_SK_MB];
#if HK_NORM_A
  float ss[HK_SK_MB];
#endif
  float ep_bias = 0.0f, ep_mul = 1.0f, ep_res = 0.0f; /* lane m's epilogue operands of output (m, n) */
  hk_gs_cursor_t at = {0, 0, 0};                    /* the chunk read now */
  long long m_next = 0; /* the m tile of the chunk read now */
  unsigned phase = 0; /* of the stages' mbarriers in this pass over the ring */
  for (long long c = 0; c < chunks; c++) {
    const long long n = r0 + at.row, k0 = at.seg * HK_GS_SEG, s = at.seg, m0 = m_next;
    const int mn = (int)hk_min_ll(HK_SK_MB, M - m0);
    if (s == 0) { /* a row begins */
#pragma unroll
      for (int m = 0; m < HK_SK_MB; m++) {
#pragma unroll
        for (int b = 0; b < GS_NB; b++) acc[b][m] = 0.0f;
#if HK_NORM_A
        ss[m] = 0.0f;
#endif
      }
      if (lane < mn) {
#if HK_HAS_BIAS
        ep_bias = HK_LOAD(bias[n]);
#endif
#if HK_HAS_MUL
        ep_mul = HK_LOAD(mul[(m0 + lane) * N + n]);
#endif
#if HK_HAS_RESIDUAL
        ep_res = HK_LOAD(residual[(m0 + lane) * N + n]);
#endif
      }
    }
    const int slot = at.slot;
    hk_mbar_wait(bar0 + 8u * (unsigned)slot, phase);
    const HK_T *const sb = (const HK_T *)(gs_ring + (warp * HK_GS_STAGES + slot) * GS_STAGE_BYTES);
    const int len = (int)hk_min_ll(HK_GS_SEG, K - k0);
#pragma unroll
    for (int i = 0; i < GS_STEPS; i++) {
      const int e = 8 * lane + 256 * i;
      if (e >= len) break;
      float wf[GS_NB][8];
#pragma unroll
      for (int b = 0; b < GS_NB; b++) hk_gs_unpack(*(const uint4 *)(sb + b * HK_GS_SEG + e), wf[b]);
#if HK_NORM_A
      float g[8];
      hk_gs_unpack(__ldg((const uint4 *)(norm_gamma + k0 + e)), g);
#endif
#pragma unroll
      for (int m = 0; m < HK_SK_MB; m++) {
        if (m >= mn) break;
        float a[8];
        hk_gs_unpack(__ldg((const uint4 *)(A + (m0 + m) * K + k0 + e)), a);
#if HK_NORM_A
#pragma unroll
        for (int j = 0; j < 8; j++) {
          ss[m] = fmaf(a[j], a[j], ss[m]);
          a[j] = HK_LOAD(HK_STORE(a[j] * g[j])); /* the norm's 16-bit output, before its row scale */
        }
#endif
#pragma unroll
        for (int b = 0; b < GS_NB; b++)
#pragma unroll
          for (int j = 0; j < 8; j++) acc[b][m] = fmaf(a[j], wf[b][j], acc[b][m]);
      }
    }
    __syncwarp(); /* every lane has read the stage: lane 0 may refill it */
    if (lane == 0 && c + HK_GS_STAGES < chunks) {
      hk_gs_issue(ring, bar0, &ahead, r0, K, B, B2, policy);
      hk_gs_next(&ahead, rows, segs);
    }
    hk_gs_next(&at, rows, segs);
    if (at.slot == 0) phase ^= 1u;
    if (at.seg != 0) continue; /* not the row's last chunk */
    if (at.row == 0) m_next += HK_SK_MB; /* after this row: the next m tile */
    /* the row's last chunk: every lane gets every sum (butterfly), in the same order on every lane */
    float out = 0.0f, out2 = 0.0f;
#pragma unroll
    for (int m = 0; m < HK_SK_MB; m++) {
#if HK_NORM_A
      for (int off = 16; off > 0; off >>= 1) ss[m] += hk_shfl_xor(ss[m], off);
      const float scale = rsqrtf(ss[m] / (float)K + norm_eps);
#endif
#pragma unroll
      for (int b = 0; b < GS_NB; b++) {
        for (int off = 16; off > 0; off >>= 1) acc[b][m] += hk_shfl_xor(acc[b][m], off);
#if HK_NORM_A
        acc[b][m] *= scale;
#endif
      }
      if (lane == m) out = acc[0][m], out2 = acc[GS_NB - 1][m];
    }
    if (lane < mn) {
      float v = out;
#if HK_HAS_BIAS
      v += ep_bias;
#endif
      v = HK_ACT(v);
#if HK_DUAL
      v *= out2;
#else
      (void)out2;
#endif
#if HK_HAS_MUL
      v *= ep_mul;
#endif
#if HK_HAS_RESIDUAL
      v += ep_res;
#endif
      C[(m0 + lane) * N + n] = HK_STORE(v);
    }
  }
}
