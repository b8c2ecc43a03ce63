/* SPDX-License-Identifier: Apache-2.0 */
/* softmax over the last axis, max-subtracted so large inputs do not overflow the exponential
 * (prelude.h's hk_exp).
 * Args: T x, T out, I rows, I cols. A block is one row. The exponentials are
 * recomputed in the last pass instead of staged, so out may alias x. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 1);
  const int64_t rows = hk_arg_i64(args, 2), cols = hk_arg_i64(args, 3);
  for (int64_t r = block_begin; r < (int64_t)block_end && r < rows; r++) {
    const HK_T *xr = x + r * cols;
    HK_T *yr = out + r * cols;
    float lane[8];
    for (int t = 0; t < 8; t++) lane[t] = -INFINITY;
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8)
      for (int t = 0; t < 8; t++) {
        const float v = HK_LOAD(xr[c + t]);
        lane[t] = v > lane[t] ? v : lane[t]; /* NaN: skipped */
      }
    for (; c < cols; c++) lane[c & 7] = fmaxf(lane[c & 7], HK_LOAD(xr[c]));
    float mx = lane[0];
    for (int t = 1; t < 8; t++) mx = lane[t] > mx ? lane[t] : mx;
    for (int t = 0; t < 8; t++) lane[t] = 0.0f;
    for (c = 0; c + 8 <= cols; c += 8)
      for (int t = 0; t < 8; t++) lane[t] += hk_exp(HK_LOAD(xr[c + t]) - mx);
    for (; c < cols; c++) lane[c & 7] += hk_exp(HK_LOAD(xr[c]) - mx);
    const float inv = 1.0f / hk_sum8(lane);
    for (c = 0; c + 8 <= cols; c += 8)
      for (int t = 0; t < 8; t++) yr[c + t] = HK_STORE(hk_exp(HK_LOAD(xr[c + t]) - mx) * inv);
    for (; c < cols; c++) yr[c] = HK_STORE(hk_exp(HK_LOAD(xr[c]) - mx) * inv);
  }
}
