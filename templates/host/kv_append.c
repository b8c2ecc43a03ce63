/* SPDX-License-Identifier: Apache-2.0 */
/* kv_append: a packed q|k|v row's k and v heads into the KV caches, its q heads out
 * (lower.h, docs/GENERATE.md). qkv [rows, (heads + 2 kv_heads) dh]; k_cache, v_cache
 * [layers, slots, max_seq, kv_heads dh]. Row t with 1 <= ctx[t] <= max_seq and
 * 0 <= slot[t] < slots stores its k heads at k_cache[layer, slot[t], ctx[t] - 1] and its v
 * heads at v_cache[the same]; any other row (a padding row has ctx 0) stores nothing, so no
 * write leaves the caches whatever ctx and slot hold. out[t] = the q heads of row t, every
 * row. Elements are copied as stored (no rounding), or with HK_KV_FP8 (fp8_e4m3 caches) each
 * k and v element rounded to e4m3 (to nearest even, saturating at +-448).
 * Args: T qkv, T k_cache, T v_cache, I32 ctx, I32 slot, T out, I rows, I heads, I kv_heads,
 * I dh, I layer, I slots, I max_seq (the caches uint8_t with HK_KV_FP8). A block is one row.
 * HK_ROPE (a rope folded in): F theta, then with HK_ROPE_SCALING F factor, F low_freq,
 * F high_freq, F original_max; the q and k heads are rotated first, as host/rope.c does, at
 * position max(ctx[t] - 1, 0), each element rounded to T once (a k element to e4m3 from that
 * value): the values the rope and kv_append pair would store. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *qkv = (const HK_T *)hk_arg_ptr(args, 0);
#if HK_KV_FP8
  uint8_t *k_cache = (uint8_t *)hk_arg_ptr(args, 1);
  uint8_t *v_cache = (uint8_t *)hk_arg_ptr(args, 2);
#else
  HK_T *k_cache = (HK_T *)hk_arg_ptr(args, 1);
  HK_T *v_cache = (HK_T *)hk_arg_ptr(args, 2);
#endif
  const int32_t *ctx = (const int32_t *)hk_arg_ptr(args, 3);
  const int32_t *slot = (const int32_t *)hk_arg_ptr(args, 4);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 5);
  const int64_t rows = hk_arg_i64(args, 6), heads = hk_arg_i64(args, 7), kv_heads = hk_arg_i64(args, 8);
  const int64_t dh = hk_arg_i64(args, 9), layer = hk_arg_i64(args, 10), slots = hk_arg_i64(args, 11);
  const int64_t max_seq = hk_arg_i64(args, 12);
  const int64_t q_cols = heads * dh, kv_cols = kv_heads * dh, width = q_cols + 2 * kv_cols;
#if HK_ROPE
  const float theta = hk_arg_f32(args, 13);
#if HK_ROPE_SCALING
  const float factor = hk_arg_f32(args, 14), low = hk_arg_f32(args, 15);
  const float high = hk_arg_f32(args, 16), orig = hk_arg_f32(args, 17);
#endif
  const int64_t half = dh / 2;
  HK_T *rot = malloc((size_t)(q_cols + kv_cols) * sizeof *rot); /* a row's q and k heads, turned */
  float *cs = malloc((size_t)(half > 0 ? half : 1) * 2 * sizeof *cs), *sn = cs + (half > 0 ? half : 1);
  if (!rot || !cs) { /* a kernel cannot fail: nothing stored, the poisoned outputs show it */
    free(rot);
    free(cs);
    return;
  }
#endif
  for (int64_t t = block_begin; t < (int64_t)block_end && t < rows; t++) {
    const HK_T *row = qkv + t * width, *qk = row; /* the q and k heads as stored: qk, the v heads: row */
#if HK_ROPE
    const float pos = (float)(ctx[t] > 1 ? (int64_t)ctx[t] - 1 : 0);
    for (int64_t j = 0; j < half; j++) {
#if HK_ROPE_SCALING
      hk_rope_cos_sin_at(pos, hk_rope_scale_inv_freq(hk_rope_inv_freq(j, dh, theta), HK_ROPE_SCALING, factor, low, high, orig),
                         &cs[j], &sn[j]);
#else
      hk_rope_cos_sin(pos, j, dh, theta, &cs[j], &sn[j]);
#endif
    }
    for (int64_t h = 0; h < heads + kv_heads; h++)
      for (int64_t j = 0; j < half; j++) {
        const int64_t i1 = h * dh + j, i2 = i1 + half;
        const float x1 = HK_LOAD(row[i1]), x2 = HK_LOAD(row[i2]);
        rot[i1] = HK_STORE(x1 * cs[j] - x2 * sn[j]);
        rot[i2] = HK_STORE(x2 * cs[j] + x1 * sn[j]);
      }
    qk = rot;
#endif
    memcpy(out + t * q_cols, qk, (size_t)q_cols * sizeof *qk);
    const int64_t pos_row = (int64_t)ctx[t] - 1, s = slot[t];
    if (pos_row < 0 || pos_row >= max_seq || s < 0 || s >= slots) continue;
    const int64_t at = ((layer * slots + s) * max_seq + pos_row) * kv_cols;
#if HK_KV_FP8
    for (int64_t c = 0; c < kv_cols; c++) {
      k_cache[at + c] = hk_f32_to_fp8_e4m3(HK_LOAD(qk[q_cols + c]));
      v_cache[at + c] = hk_f32_to_fp8_e4m3(HK_LOAD(row[q_cols + kv_cols + c]));
    }
#else
    memcpy(k_cache + at, qk + q_cols, (size_t)kv_cols * sizeof *qk);
    memcpy(v_cache + at, row + q_cols + kv_cols, (size_t)kv_cols * sizeof *row);
#endif
  }
#if HK_ROPE
  free(rot);
  free(cs);
#endif
}
