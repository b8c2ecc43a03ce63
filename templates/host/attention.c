/* SPDX-License-Identifier: Apache-2.0 */
/* attention: out = softmax(q k^T * scale, causal mask) v per (batch, head), like
 * torch.nn.functional.scaled_dot_product_attention on head-split tensors.
 * Args: T q, T k, T v, T out, I batch, I seq_q, I seq_kv, I heads, I kv_heads, I dh,
 *       I ld_q, I ld_kv, I q_col, I k_col, I v_col, I causal, F scale.
 * Row r of q starts at q + r*ld_q; head h reads columns q_col + h*dh .. + dh (k and v
 * likewise with ld_kv and k_col/v_col), so a packed qkv tensor is passed three times.
 * Grouped-query: q head h reads kv head h / (heads / kv_heads). out is [.., heads*dh].
 * Causal masks key j > query i with both positions counted from 0, also when
 * seq_q != seq_kv (top-left aligned, as SDPA's is_causal); key 0 is never masked.
 * A block is one query row of one head: block = (b * heads + h) * seq_q + i.
 * Softmax is online over chunks of HK_ATTN_KB keys (one rescale per chunk), output
 * columns in chunks of HK_ATTN_DC (scores recomputed per chunk only when dh > DC).
 * Masked ABI (HK_ATTN_LENGTHS or HK_ATTN_MASK): three more args, I32 lengths (or null),
 * T mask (or null), I mask_heads. Keys j >= lengths[b] (clamped to 0..seq_kv) are masked
 * for every query row; mask[b, h or 0, i, j] is added to the scaled score. A row with no
 * key left (length 0, or a mask of -inf everywhere) outputs zeros. */
#ifndef HK_ATTN_LENGTHS
#define HK_ATTN_LENGTHS 0
#endif
#ifndef HK_ATTN_MASK
#define HK_ATTN_MASK 0
#endif
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *q = (const HK_T *)hk_arg_ptr(args, 0);
  const HK_T *k = (const HK_T *)hk_arg_ptr(args, 1);
  const HK_T *v = (const HK_T *)hk_arg_ptr(args, 2);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 3);
  const int64_t batch = hk_arg_i64(args, 4), seq_q = hk_arg_i64(args, 5), seq_kv = hk_arg_i64(args, 6);
  const int64_t heads = hk_arg_i64(args, 7), kv_heads = hk_arg_i64(args, 8), dh = hk_arg_i64(args, 9);
  const int64_t ld_q = hk_arg_i64(args, 10), ld_kv = hk_arg_i64(args, 11);
  const int64_t q_col = hk_arg_i64(args, 12), k_col = hk_arg_i64(args, 13), v_col = hk_arg_i64(args, 14);
  const int causal = hk_arg_i64(args, 15) != 0;
  const float scale = hk_arg_f32(args, 16);
#if HK_ATTN_LENGTHS || HK_ATTN_MASK
  const int32_t *lengths = (const int32_t *)hk_arg_ptr(args, 17);
  const HK_T *mask = (const HK_T *)hk_arg_ptr(args, 18);
  const int64_t mask_heads = hk_arg_i64(args, 19);
  (void)lengths, (void)mask, (void)mask_heads; /* the flags say which are read */
#endif
  const int64_t group = kv_heads > 0 && heads >= kv_heads ? heads / kv_heads : 1;
  const int64_t n_blocks = batch * heads * seq_q;
  const int q_buffered = dh <= HK_ATTN_DC;
  float qf[HK_ATTN_DC], s[HK_ATTN_KB], acc[HK_ATTN_DC];

  for (int64_t blk = block_begin; blk < (int64_t)block_end && blk < n_blocks; blk++) {
    const int64_t i = blk % seq_q, h = blk / seq_q % heads, b = blk / seq_q / heads;
    const HK_T *qr = q + (b * seq_q + i) * ld_q + q_col + h * dh;
    const HK_T *kb = k + b * seq_kv * ld_kv + k_col + h / group * dh;
    const HK_T *vb = v + b * seq_kv * ld_kv + v_col + h / group * dh;
    HK_T *yr = out + (b * seq_q + i) * heads * dh + h * dh;
    int64_t kv_len = seq_kv;
#if HK_ATTN_LENGTHS
    if (lengths) kv_len = lengths[b] < 0 ? 0 : hk_min_i64(lengths[b], seq_kv);
#endif
#if HK_ATTN_MASK
    const HK_T *mr = mask ? mask + ((b * mask_heads + (mask_heads > 1 ? h : 0)) * seq_q + i) * seq_kv : NULL;
#endif
    const int64_t n_keys = causal ? hk_min_i64(kv_len, i + 1) : kv_len;
    if (q_buffered)
      for (int64_t d = 0; d < dh; d++) qf[d] = HK_LOAD(qr[d]);

    for (int64_t d0 = 0; d0 < dh; d0 += HK_ATTN_DC) {
      const int64_t dc = hk_min_i64(HK_ATTN_DC, dh - d0);
      float m = -INFINITY, l = 0.0f;
      for (int64_t d = 0; d < dc; d++) acc[d] = 0.0f;
      for (int64_t j0 = 0; j0 < n_keys; j0 += HK_ATTN_KB) {
        const int64_t jb = hk_min_i64(HK_ATTN_KB, n_keys - j0);
        float cm = -INFINITY;
        for (int64_t jj = 0; jj < jb; jj++) {
          const HK_T *kr = kb + (j0 + jj) * ld_kv;
          float dot = 0.0f;
          if (q_buffered)
            for (int64_t d = 0; d < dh; d++) dot += qf[d] * HK_LOAD(kr[d]);
          else
            for (int64_t d = 0; d < dh; d++) dot += HK_LOAD(qr[d]) * HK_LOAD(kr[d]);
          s[jj] = dot * scale;
#if HK_ATTN_MASK
          if (mr) s[jj] += HK_LOAD(mr[j0 + jj]);
#endif
          cm = fmaxf(cm, s[jj]);
        }
        if (cm > m) { /* new running max: rescale what was accumulated so far */
          const float r = expf(m - cm);
          l *= r;
          for (int64_t d = 0; d < dc; d++) acc[d] *= r;
          m = cm;
        }
        for (int64_t jj = 0; jj < jb; jj++) {
          const float p = m == -INFINITY ? 0.0f : expf(s[jj] - m); /* nothing unmasked yet */
          const HK_T *vr = vb + (j0 + jj) * ld_kv + d0;
          l += p;
          for (int64_t d = 0; d < dc; d++) acc[d] += p * HK_LOAD(vr[d]);
        }
      }
      const float inv = l > 0.0f ? 1.0f / l : 0.0f; /* no key: zeros */
      for (int64_t d = 0; d < dc; d++) yr[d0 + d] = HK_STORE(acc[d] * inv);
    }
  }
}
