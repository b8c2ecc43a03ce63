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
 * HK_ROPE_JC frequencies at a time and reused by every head. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 1);
  const int64_t rows = hk_arg_i64(args, 2), seq = hk_arg_i64(args, 3), heads = hk_arg_i64(args, 4);
  const int64_t dh = hk_arg_i64(args, 5), pos_offset = hk_arg_i64(args, 6);
  const float theta = hk_arg_f32(args, 7);
  const int64_t pass = hk_arg_i64(args, 8);
  const int64_t half = dh / 2, width = (heads + pass) * dh;
  float cs[HK_ROPE_JC], sn[HK_ROPE_JC];
  if (seq <= 0) return;

  for (int64_t r = block_begin; r < (int64_t)block_end && r < rows; r++) {
    const float pos = (float)(r % seq + pos_offset);
    const HK_T *xr = x + r * width;
    HK_T *yr = out + r * width;
    for (int64_t j0 = 0; j0 < half; j0 += HK_ROPE_JC) {
      const int64_t jc = hk_min_i64(HK_ROPE_JC, half - j0);
      for (int64_t j = 0; j < jc; j++) hk_rope_cos_sin(pos, j0 + j, dh, theta, &cs[j], &sn[j]);
      for (int64_t h = 0; h < heads; h++) {
        const HK_T *a = xr + h * dh + j0, *b = a + half;
        HK_T *ya = yr + h * dh + j0, *yb = ya + half;
        for (int64_t j = 0; j < jc; j++) {
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
