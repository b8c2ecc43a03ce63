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
 * I dh, I layer, I slots, I max_seq (the caches uint8_t with HK_KV_FP8). A block is one row. */
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
  for (int64_t t = block_begin; t < (int64_t)block_end && t < rows; t++) {
    const HK_T *row = qkv + t * width;
    memcpy(out + t * q_cols, row, (size_t)q_cols * sizeof *row);
    const int64_t pos = (int64_t)ctx[t] - 1, s = slot[t];
    if (pos < 0 || pos >= max_seq || s < 0 || s >= slots) continue;
    const int64_t at = ((layer * slots + s) * max_seq + pos) * kv_cols;
#if HK_KV_FP8
    for (int64_t c = 0; c < kv_cols; c++) {
      k_cache[at + c] = hk_f32_to_fp8_e4m3(HK_LOAD(row[q_cols + c]));
      v_cache[at + c] = hk_f32_to_fp8_e4m3(HK_LOAD(row[q_cols + kv_cols + c]));
    }
#else
    memcpy(k_cache + at, row + q_cols, (size_t)kv_cols * sizeof *row);
    memcpy(v_cache + at, row + q_cols + kv_cols, (size_t)kv_cols * sizeof *row);
#endif
  }
}
