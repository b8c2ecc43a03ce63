/* SPDX-License-Identifier: Apache-2.0 */
/* kv_attention: one query row per token over its slot's cached keys, as lower.h says:
 *   q [rows, heads dh]; k_cache, v_cache [layers, slots, max_seq, kv_heads dh]; row t is valid
 *   when 1 <= ctx[t] <= max_seq and 0 <= slot[t] < slots, and then attends to the keys
 *   [max(0, ctx[t] - window), ctx[t]) (window 0: from 0) of cache[layer, slot[t]], q head h
 *   reading kv head h / (heads / kv_heads): out[t, h] = softmax(q k^T scale) v, in f32. An
 *   invalid row outputs zeros (and reads no cache).
 * Args: T q, T k_cache, T v_cache, const int *ctx, const int *slot, T out, I rows, I heads,
 *       I kv_heads, I dh, I layer, I slots, I max_seq, I window, F scale.
 *
 * A block is one (row, q head) (grid-stride beyond grid.x). The keys go by in tiles of
 * HK_THREADS with an online softmax, so any number of keys runs in fixed shared memory:
 *   1. thread i scores key j0 + i: its dot product with q in f32 (q staged in shared memory
 *      as f32, HK_KV_DC columns at a time), times scale; keys past the end score -inf;
 *   2. the tile's max updates the running max m (alpha = exp(m_old - m) rescales what was
 *      summed so far), p_i = exp(s_i - m), and the running sum l = l alpha + the tile's sum;
 *   3. thread d accumulates output columns d + k HK_THREADS (k < HK_KV_RD):
 *      acc = acc alpha + sum_i p_i v[j0 + i][d] (consecutive threads, consecutive columns).
 * Output columns go HK_THREADS x HK_KV_RD at a time: one pass when dh is at most that, the
 * scores recomputed per column chunk beyond. The max is subtracted before every exp, so
 * nothing overflows; out = acc / l, one rounding to the dtype. Cache offsets are 64-bit. */
#define KV_OC (HK_THREADS * HK_KV_RD) /* output columns per pass */
#if HK_THREADS % HK_RED_GROUP != 0 || HK_THREADS > HK_RED_GROUP * HK_RED_GROUP
#error "kv_attention: HK_THREADS must be a multiple of HK_RED_GROUP, at most HK_RED_GROUP^2 (common.h's reductions)"
#endif

#if HK_KV_FP8 /* fp8_e4m3 caches (unsigned char), read back exactly (common.h) */
typedef unsigned char kv_t;
#define KV_LOAD(x) hk_fp8_e4m3_to_f32(x)
#else
typedef HK_T kv_t;
#define KV_LOAD(x) HK_LOAD(x)
#endif

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *q, const kv_t *k_cache, const kv_t *v_cache, const int *ctx, const int *slot, HK_T *out,
        long long rows, long long heads, long long kv_heads, long long dh, long long layer, long long slots,
        long long max_seq, long long window, float scale) {
  HK_PDL_ENTRY(); /* a pdl variant (variant_simple.c): nothing is touched before it */
  HK_SHARED float qs[HK_KV_DC];
  HK_SHARED float ps[HK_THREADS];
  HK_SHARED float red[HK_RED_GROUP];
  const int tid = HK_TID;
  const long long group = kv_heads > 0 && heads >= kv_heads ? heads / kv_heads : 1;
  const long long ld = kv_heads * dh; /* a cache row: every kv head of one position */
  for (long long b = HK_BID; b < rows * heads; b += HK_NBLOCKS) {
    const long long t = b / heads, h = b % heads;
    const HK_T *qr = q + (t * heads + h) * dh;
    HK_T *o = out + (t * heads + h) * dh;
    const long long n = ctx[t], s = slot[t];
    if (n < 1 || n > max_seq || s < 0 || s >= slots) {
      for (long long d = tid; d < dh; d += HK_THREADS) o[d] = HK_STORE(0.0f);
      continue;
    }
    const long long lo = window > 0 && n > window ? n - window : 0;
    const long long base = (layer * slots + s) * max_seq * ld + h / group * dh;
    const kv_t *kb = k_cache + base, *vb = v_cache + base;
    for (long long o0 = 0; o0 < dh; o0 += KV_OC) {
      float acc[HK_KV_RD];
#pragma unroll
      for (int r = 0; r < HK_KV_RD; r++) acc[r] = 0.0f;
      float m = -hk_inf(), l = 0.0f;
      for (long long j0 = lo; j0 < n; j0 += HK_THREADS) {
        /* 1. scores */
        const long long j = j0 + tid;
        float sc = 0.0f;
        for (long long d0 = 0; d0 < dh; d0 += HK_KV_DC) {
          const int dc = (int)hk_min_ll(HK_KV_DC, dh - d0);
          if (dh > HK_KV_DC || (o0 == 0 && j0 == lo)) { /* q's chunk (all of q once when it fits) */
            HK_SYNC(); /* the previous chunk's readers are done */
            for (int c = tid; c < dc; c += HK_THREADS) qs[c] = HK_LOAD(qr[d0 + c]);
            HK_SYNC();
          }
          if (j < n) {
            const kv_t *kr = kb + j * ld + d0;
            for (int c = 0; c < dc; c++) sc += qs[c] * KV_LOAD(kr[c]);
          }
        }
        sc = j < n ? sc * scale : -hk_inf();
        /* 2. online softmax; m stays -inf only while every score so far is -inf (infinite
         *    inputs): then alpha 1 and p 0 */
        const float m_new = fmaxf(m, hk_block_max(sc, red));
        const int none = m_new == -hk_inf();
        const float alpha = none ? 1.0f : expf(m - m_new);
        const float p = none ? 0.0f : expf(sc - m_new);
        l = l * alpha + hk_block_sum(p, red);
        m = m_new;
        ps[tid] = p;
        HK_SYNC();
        /* 3. acc = acc alpha + P V */
        const int nk = (int)hk_min_ll(HK_THREADS, n - j0);
#pragma unroll
        for (int r = 0; r < HK_KV_RD; r++) acc[r] *= alpha;
        for (int i = 0; i < nk; i++) {
          const float pi = ps[i];
          const kv_t *vr = vb + (j0 + i) * ld + o0;
#pragma unroll
          for (int r = 0; r < HK_KV_RD; r++) {
            const long long d = tid + r * HK_THREADS;
            if (o0 + d < dh) acc[r] += pi * KV_LOAD(vr[d]);
          }
        }
        HK_SYNC(); /* ps is rewritten by the next tile */
      }
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
#pragma unroll
      for (int r = 0; r < HK_KV_RD; r++) {
        const long long d = tid + r * HK_THREADS;
        if (o0 + d < dh) o[o0 + d] = HK_STORE(acc[r] * inv);
      }
    }
  }
}
