/* SPDX-License-Identifier: Apache-2.0 */
/* rope: rotary position embedding, rotate-half form (Hugging Face Llama). Row r of
 * x [rows, heads*dh] is at position p = r % seq + pos_offset; for each head and
 * j < dh/2, with inv_freq = 1 / theta^(2j/dh) and angle = p * inv_freq (both rounded to
 * f32, as Hugging Face computes them):
 *   out[j]        = x[j] * cos(angle) - x[j + dh/2] * sin(angle)
 *   out[j + dh/2] = x[j + dh/2] * cos(angle) + x[j] * sin(angle)
 * f32 math, one rounding to the output type. Args: T x, T out, I rows, I seq, I heads,
 * I dh, I pos_offset, F theta, I pass_heads: a row holds heads + pass_heads heads; the last
 * pass_heads are copied unchanged (a packed q|k|v: heads = q and k heads, pass_heads = the
 * v heads). A block is one row. cos/sin depend on (p, j) only: they are computed for
 * HK_ROPE_JC frequencies at a time and reused by every head.
 * HK_HAS_CTX: one argument more, I32 ctx [rows]: row r is at position max(ctx[r] - 1, 0)
 * (seq and pos_offset unused). HK_ROPE_SCALING (1 linear, 2 llama3): four more from
 * HK_ROPE_SCALING_ARG, F factor, F low_freq, F high_freq, F original_max, which rewrite
 * inv_freq (hk_rope_scale_inv_freq) before the angle. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 1);
  const int64_t rows = hk_arg_i64(args, 2), seq = hk_arg_i64(args, 3), heads = hk_arg_i64(args, 4);
  const int64_t dh = hk_arg_i64(args, 5), pos_offset = hk_arg_i64(args, 6);
  const float theta = hk_arg_f32(args, 7);
  const int64_t pass = hk_arg_i64(args, 8);
  const int64_t half = dh / 2, width = (heads + pass) * dh;
#if HK_HAS_CTX
  const int32_t *ctx = (const int32_t *)hk_arg_ptr(args, 9);
  (void)pos_offset;
#endif
#if HK_ROPE_SCALING
  const float factor = hk_arg_f32(args, HK_ROPE_SCALING_ARG), low = hk_arg_f32(args, HK_ROPE_SCALING_ARG + 1);
  const float high = hk_arg_f32(args, HK_ROPE_SCALING_ARG + 2), orig = hk_arg_f32(args, HK_ROPE_SCALING_ARG + 3);
#endif
  float cs[HK_ROPE_JC], sn[HK_ROPE_JC];
  if (seq <= 0) return;

  for (int64_t r = block_begin; r < (int64_t)block_end && r < rows; r++) {
#if HK_HAS_CTX
    const float pos = (float)(ctx[r] > 1 ? (int64_t)ctx[r] - 1 : 0);
#else
    const float pos = (float)(r % seq + pos_offset);
#endif
    const HK_T *xr = x + r * width;
    HK_T *yr = out + r * width;
    for (int64_t j0 = 0; j0 < half; j0 += HK_ROPE_JC) {
      const int64_t jc = hk_min_i64(HK_ROPE_JC, half - j0);
      for (int64_t j = 0; j < jc; j++) {
#if HK_ROPE_SCALING
        const float inv = hk_rope_inv_freq(j0 + j, dh, theta);
        hk_rope_cos_sin_at(pos, hk_rope_scale_inv_freq(inv, HK_ROPE_SCALING, factor, low, high, orig), &cs[j], &sn[j]);
#else
        hk_rope_cos_sin(pos, j0 + j, dh, theta, &cs[j], &sn[j]);
#endif
      }
      for (int64_t h = 0; h < heads; h++) {
        const HK_T *a = xr + h * dh + j0, *b = a + half;
        HK_T *ya = yr + h * dh + j0, *yb = ya + half;
        int64_t j = 0;
        for (; j + 16 <= jc; j += 16) { /* staged in local arrays, as prelude.h's HK_MAP16 (vectorized) */
          float va[16], vb[16];
          for (int t = 0; t < 16; t++) {
            const float x1 = HK_LOAD(a[j + t]), x2 = HK_LOAD(b[j + t]);
            va[t] = x1 * cs[j + t] - x2 * sn[j + t];
            vb[t] = x2 * cs[j + t] + x1 * sn[j + t];
          }
          for (int t = 0; t < 16; t++) {
            ya[j + t] = HK_STORE(va[t]);
            yb[j + t] = HK_STORE(vb[t]);
          }
        }
        for (; j < jc; j++) {
          const float x1 = HK_LOAD(a[j]), x2 = HK_LOAD(b[j]);
          ya[j] = HK_STORE(x1 * cs[j] - x2 * sn[j]);
          yb[j] = HK_STORE(x2 * cs[j] + x1 * sn[j]);
        }
      }
    }
    if (yr != xr)
      for (int64_t i = heads * dh; i < width; i++) yr[i] = xr[i];
  }
}
