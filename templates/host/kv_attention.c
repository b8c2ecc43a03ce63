/* SPDX-License-Identifier: Apache-2.0 */
/* kv_attention: one query row per token over its slot's cached keys (lower.h,
 * docs/GENERATE.md). q [rows, heads dh]; k_cache, v_cache [layers, slots, max_seq, kv_heads dh].
 * Row t is valid when 1 <= ctx[t] <= max_seq and 0 <= slot[t] < slots; it attends to the keys
 * [max(0, ctx[t] - window), ctx[t]) of cache[layer, slot[t]] (window 0: from 0), q head h to
 * kv head h / (heads / kv_heads): out = softmax(q k^T * scale) v in f32, one rounding. An
 * invalid row outputs zeros; nothing outside the caches is read.
 * Args: T q, T k_cache, T v_cache, I32 ctx, I32 slot, T out, I rows, I heads, I kv_heads,
 * I dh, I layer, I slots, I max_seq, I window, F scale (HK_KV_FP8: the caches fp8_e4m3,
 * uint8_t, read back exactly).
 * A block is one row of one head: block = t * heads + h. Softmax is online over chunks of
 * HK_ATTN_KB keys (one rescale per chunk), output columns in chunks of HK_ATTN_DC (scores
 * recomputed per chunk only when dh > DC), as templates/host/attention.c. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
#if HK_KV_FP8
  typedef uint8_t kv_t;
#define HK_KV_LOAD(x) hk_fp8_e4m3_to_f32(x)
#else
  typedef HK_T kv_t;
#define HK_KV_LOAD(x) HK_LOAD(x)
#endif
  const HK_T *q = (const HK_T *)hk_arg_ptr(args, 0);
  const kv_t *k_cache = (const kv_t *)hk_arg_ptr(args, 1);
  const kv_t *v_cache = (const kv_t *)hk_arg_ptr(args, 2);
  const int32_t *ctx = (const int32_t *)hk_arg_ptr(args, 3);
  const int32_t *slot = (const int32_t *)hk_arg_ptr(args, 4);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 5);
  const int64_t rows = hk_arg_i64(args, 6), heads = hk_arg_i64(args, 7), kv_heads = hk_arg_i64(args, 8);
  const int64_t dh = hk_arg_i64(args, 9), layer = hk_arg_i64(args, 10), slots = hk_arg_i64(args, 11);
  const int64_t max_seq = hk_arg_i64(args, 12), window = hk_arg_i64(args, 13);
  const float scale = hk_arg_f32(args, 14);
  const int64_t group = kv_heads > 0 && heads >= kv_heads ? heads / kv_heads : 1, kv_cols = kv_heads * dh;
  const int q_buffered = dh <= HK_ATTN_DC;
  float qf[HK_ATTN_DC], s[HK_ATTN_KB], acc[HK_ATTN_DC];

  for (int64_t blk = block_begin; blk < (int64_t)block_end && blk < rows * heads; blk++) {
    const int64_t t = blk / heads, h = blk % heads, n = ctx[t], sl = slot[t];
    const HK_T *qr = q + (t * heads + h) * dh;
    HK_T *yr = out + (t * heads + h) * dh;
    if (n < 1 || n > max_seq || sl < 0 || sl >= slots) { /* a padding row, or out of range */
      for (int64_t d = 0; d < dh; d++) yr[d] = HK_STORE(0.0f);
      continue;
    }
    const int64_t first = window > 0 && n > window ? n - window : 0;
    const int64_t base = (layer * slots + sl) * max_seq * kv_cols + h / group * dh;
    const kv_t *kb = k_cache + base, *vb = v_cache + base;
    if (q_buffered)
      for (int64_t d = 0; d < dh; d++) qf[d] = HK_LOAD(qr[d]);

    for (int64_t d0 = 0; d0 < dh; d0 += HK_ATTN_DC) {
      const int64_t dc = hk_min_i64(HK_ATTN_DC, dh - d0);
      float m = -INFINITY, l = 0.0f;
      for (int64_t d = 0; d < dc; d++) acc[d] = 0.0f;
      for (int64_t j0 = first; j0 < n; j0 += HK_ATTN_KB) {
        const int64_t jb = hk_min_i64(HK_ATTN_KB, n - j0);
        float cm = -INFINITY;
        for (int64_t jj = 0; jj < jb; jj++) {
          const kv_t *kr = kb + (j0 + jj) * kv_cols;
          float dot = 0.0f;
          if (q_buffered)
            for (int64_t d = 0; d < dh; d++) dot += qf[d] * HK_KV_LOAD(kr[d]);
          else
            for (int64_t d = 0; d < dh; d++) dot += HK_LOAD(qr[d]) * HK_KV_LOAD(kr[d]);
          s[jj] = dot * scale;
          cm = fmaxf(cm, s[jj]);
        }
        if (cm > m) { /* new running max: rescale what was accumulated so far */
          const float r = expf(m - cm);
          l *= r;
          for (int64_t d = 0; d < dc; d++) acc[d] *= r;
          m = cm;
        }
        for (int64_t jj = 0; jj < jb; jj++) {
          const float p = expf(s[jj] - m);
          const kv_t *vr = vb + (j0 + jj) * kv_cols + d0;
          l += p;
          for (int64_t d = 0; d < dc; d++) acc[d] += p * HK_KV_LOAD(vr[d]);
        }
      }
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      for (int64_t d = 0; d < dc; d++) yr[d0 + d] = HK_STORE(acc[d] * inv);
    }
  }
}
#undef HK_KV_LOAD
