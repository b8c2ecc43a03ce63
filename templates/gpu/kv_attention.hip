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
 * nothing overflows; out = acc / l, one rounding to the dtype. Cache offsets are 64-bit.
 * HK_KV_APPEND (a kv_append folded in, lower.h; the build folds it at one row only, never with
 * HK_KV_FP8): q is the packed q|k|v rows [rows, (heads + 2 kv_heads) dh]; after scale come
 * I append (1) and, with HK_ROPE, F theta (and HK_ROPE_SCALING's four). The q head and the new
 * key (row ctx - 1 of the block's kv head) are what kv_append would store: turned by the rope
 * at ctx - 1 (rope_freq.h; each element rounded to T once), q staged as before, the new key's
 * chunk staged beside it; the score and value of key ctx - 1 come from them and the row's v
 * head, not the caches, and the kv head's first block (h % group == 0) stores that key and
 * value there. No block reads a cache row the launch writes: two rows of one slot would. */
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

#if HK_KV_APPEND
#if HK_KV_FP8
#error "kv_attention: a folded append writes caches of the row's dtype"
#endif
typedef HK_T kv_store_t; /* the launch appends */
/* Element d of a head (head: its first element) as the append stores it: turned by the rope at
 * position p against its partner d +- dh / 2 (HK_ROPE), rounded to T once; else as stored */
HK_DEVICE float kv_turned(const HK_T *head, long long d, long long dh, float p, float theta, const rope_scaling &sc) {
#if HK_ROPE
  const long long half = dh / 2, lo = d < half, jp = lo ? d : d - half;
  float sn, cs;
  rope_angle(p, jp, dh, theta, sc, &sn, &cs);
  return HK_LOAD(HK_STORE(rope_turn(HK_LOAD(head[d]), HK_LOAD(head[lo ? d + half : d - half]), cs, sn, lo != 0)));
#else
  (void)dh, (void)p, (void)theta, (void)sc;
  return HK_LOAD(head[d]);
#endif
}
#else
typedef const kv_t kv_store_t;
#endif

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *q, kv_store_t *k_cache, kv_store_t *v_cache, const int *ctx, const int *slot, HK_T *out,
        long long rows, long long heads, long long kv_heads, long long dh, long long layer, long long slots,
        long long max_seq, long long window, float scale
#if HK_KV_APPEND
        , long long append /* 1 */
#if HK_ROPE
        , float theta
#if HK_ROPE_SCALING
        , float factor, float low_freq, float high_freq, float original_max
#endif
#endif
#endif
) {
  HK_PDL_ENTRY(); /* a pdl variant (variant_simple.c): nothing is touched before it */
  HK_SHARED float qs[HK_KV_DC];
  HK_SHARED float ps[HK_THREADS];
  HK_SHARED float red[HK_RED_GROUP];
  const int tid = HK_TID;
  const long long group = kv_heads > 0 && heads >= kv_heads ? heads / kv_heads : 1;
  const long long ld = kv_heads * dh; /* a cache row: every kv head of one position */
#if HK_KV_APPEND
  (void)append;
  HK_SHARED float kns[HK_KV_DC]; /* the new key's chunk, as the append stores it */
  const long long q_width = (heads + 2 * kv_heads) * dh;
#if HK_ROPE && HK_ROPE_SCALING
  const rope_scaling rsc = {factor, low_freq, high_freq, original_max};
#elif HK_ROPE
  const rope_scaling rsc = {1.0f, 1.0f, 1.0f, 1.0f};
#else
  const rope_scaling rsc = {1.0f, 1.0f, 1.0f, 1.0f};
  const float theta = 0.0f;
#endif
#else
  const long long q_width = heads * dh;
#endif
  for (long long b = HK_BID; b < rows * heads; b += HK_NBLOCKS) {
    const long long t = b / heads, h = b % heads;
    const HK_T *qr = q + t * q_width + h * dh;
    HK_T *o = out + (t * heads + h) * dh;
    const long long n = ctx[t], s = slot[t];
    if (n < 1 || n > max_seq || s < 0 || s >= slots) {
      for (long long d = tid; d < dh; d += HK_THREADS) o[d] = HK_STORE(0.0f);
      continue;
    }
    const long long lo = window > 0 && n > window ? n - window : 0;
    const long long base = (layer * slots + s) * max_seq * ld + h / group * dh;
    const kv_t *kb = k_cache + base, *vb = v_cache + base;
#if HK_KV_APPEND
    const float pos = (float)(n - 1);
    const HK_T *kr_new = q + t * q_width + heads * dh + h / group * dh, *vr_new = kr_new + ld; /* the row's heads */
    if (h % group == 0) /* the kv head's first block appends (row n - 1: no block reads it from the caches) */
      for (long long d = tid; d < dh; d += HK_THREADS) {
        k_cache[base + (n - 1) * ld + d] = HK_STORE(kv_turned(kr_new, d, dh, pos, theta, rsc));
        v_cache[base + (n - 1) * ld + d] = vr_new[d];
      }
#define KV_Q(d) kv_turned(qr, (d), dh, pos, theta, rsc)
#else
#define KV_Q(d) HK_LOAD(qr[(d)])
#endif
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
            for (int c = tid; c < dc; c += HK_THREADS) {
              qs[c] = KV_Q(d0 + c);
#if HK_KV_APPEND
              kns[c] = kv_turned(kr_new, d0 + c, dh, pos, theta, rsc);
#endif
            }
            HK_SYNC();
          }
#if HK_KV_APPEND
          if (j == n - 1) { /* the appended key */
            for (int c = 0; c < dc; c++) sc += qs[c] * kns[c];
          } else
#endif
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
#if HK_KV_APPEND
          const kv_t *vr = (j0 + i == n - 1 ? vr_new : vb + (j0 + i) * ld) + o0; /* the appended value: the row's */
#else
          const kv_t *vr = vb + (j0 + i) * ld + o0;
#endif
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
#undef KV_Q
  }
}
