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
 * recomputed per chunk only when dh > DC), as templates/host/attention.c.
 * HK_KV_APPEND (a kv_append folded in, lower.h; never with HK_KV_FP8): q is the packed q|k|v
 * rows [rows, (heads + 2 kv_heads) dh] and the launch appends too; I append (1) follows scale,
 * and HK_ROPE then adds F theta
 * (and with HK_ROPE_SCALING the four numbers), the q and k heads turned at max(ctx[t] - 1, 0)
 * as host/kv_append.c turns them, each element rounded to T once. A block attends with its
 * turned q head and takes key ctx[t] - 1 of its kv head from the row itself (the value the
 * append stores), and the first block of each kv head (h % group == 0) stores that key and
 * value in the caches: no block reads a slot's row ctx[t] - 1 from the caches, so the blocks
 * need no order -- as long as no two rows share a slot (the build folds at one row only). */
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
#if HK_KV_APPEND
  const int64_t q_width = (heads + 2 * kv_heads) * dh; /* the packed rows' */
  HK_T *turned = malloc((size_t)(dh > 0 ? dh : 1) * 2 * sizeof *turned); /* the q head, the new key */
  float *cs = malloc((size_t)(dh > 1 ? dh / 2 : 1) * 2 * sizeof *cs), *sn = cs + (dh > 1 ? dh / 2 : 1);
  if (!turned || !cs) { /* a kernel cannot fail: nothing stored, the poisoned outputs show it */
    free(turned);
    free(cs);
    return;
  }
#if HK_ROPE
  const float theta = hk_arg_f32(args, 16); /* after I append (15) */
#if HK_ROPE_SCALING
  const float factor = hk_arg_f32(args, 17), low = hk_arg_f32(args, 18);
  const float high = hk_arg_f32(args, 19), orig = hk_arg_f32(args, 20);
#endif
#endif
#else
  const int64_t q_width = heads * dh;
#endif

  for (int64_t blk = block_begin; blk < (int64_t)block_end && blk < rows * heads; blk++) {
    const int64_t t = blk / heads, h = blk % heads, n = ctx[t], sl = slot[t];
    const HK_T *qr = q + t * q_width + h * dh;
    HK_T *yr = out + (t * heads + h) * dh;
    if (n < 1 || n > max_seq || sl < 0 || sl >= slots) { /* a padding row, or out of range */
      for (int64_t d = 0; d < dh; d++) yr[d] = HK_STORE(0.0f);
      continue;
    }
    const int64_t first = window > 0 && n > window ? n - window : 0;
    const int64_t base = (layer * slots + sl) * max_seq * kv_cols + h / group * dh;
    const kv_t *kb = k_cache + base, *vb = v_cache + base;
#if HK_KV_APPEND
    /* the q head and the new key (row n - 1) as the append would store them; the new value as stored */
    const HK_T *kr_new = q + t * q_width + heads * dh + h / group * dh, *vr_new = kr_new + kv_cols;
#if HK_ROPE
    const int64_t half = dh / 2;
    for (int64_t j = 0; j < half; j++) {
#if HK_ROPE_SCALING
      hk_rope_cos_sin_at((float)(n - 1), hk_rope_scale_inv_freq(hk_rope_inv_freq(j, dh, theta), HK_ROPE_SCALING, factor,
                                                                 low, high, orig), &cs[j], &sn[j]);
#else
      hk_rope_cos_sin((float)(n - 1), j, dh, theta, &cs[j], &sn[j]);
#endif
    }
    for (int64_t v = 0; v < 2; v++) {
      const HK_T *src = v ? kr_new : qr;
      HK_T *dst = turned + v * dh;
      for (int64_t j = 0; j < half; j++) {
        const float x1 = HK_LOAD(src[j]), x2 = HK_LOAD(src[j + half]);
        dst[j] = HK_STORE(x1 * cs[j] - x2 * sn[j]);
        dst[j + half] = HK_STORE(x2 * cs[j] + x1 * sn[j]);
      }
    }
#else
    memcpy(turned, qr, (size_t)dh * sizeof *qr);
    memcpy(turned + dh, kr_new, (size_t)dh * sizeof *qr);
#endif
    qr = turned;
    const HK_T *const k_new = turned + dh;
    if (h % group == 0) { /* the kv head's first block appends */
      memcpy(k_cache + base + (n - 1) * kv_cols, k_new, (size_t)dh * sizeof *k_new);
      memcpy(v_cache + base + (n - 1) * kv_cols, vr_new, (size_t)dh * sizeof *vr_new);
    }
#define HK_KEY_ROW(j) ((j) == n - 1 ? k_new : kb + (j) * kv_cols)
#define HK_VALUE_ROW(j) ((j) == n - 1 ? vr_new : vb + (j) * kv_cols)
#else
#define HK_KEY_ROW(j) (kb + (j) * kv_cols)
#define HK_VALUE_ROW(j) (vb + (j) * kv_cols)
#endif
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
          const kv_t *kr = HK_KEY_ROW(j0 + jj);
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
          const kv_t *vr = HK_VALUE_ROW(j0 + jj) + d0;
          l += p;
          for (int64_t d = 0; d < dc; d++) acc[d] += p * HK_KV_LOAD(vr[d]);
        }
      }
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      for (int64_t d = 0; d < dc; d++) yr[d0 + d] = HK_STORE(acc[d] * inv);
    }
#undef HK_KEY_ROW
#undef HK_VALUE_ROW
  }
#if HK_KV_APPEND
  free(turned);
  free(cs);
#endif
}
#undef HK_KV_LOAD
