/* SPDX-License-Identifier: Apache-2.0 */
/* softmax over the last axis, max-subtracted so large inputs do not overflow expf.
 * Args: T x, T out, I rows, I cols. A block is one row. The exponentials are
 * recomputed in the last pass instead of staged, so out may alias x. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 1);
  const int64_t rows = hk_arg_i64(args, 2), cols = hk_arg_i64(args, 3);
  for (int64_t r = block_begin; r < (int64_t)block_end && r < rows; r++) {
    const HK_T *xr = x + r * cols;
    HK_T *yr = out + r * cols;
    float mx = -INFINITY;
    for (int64_t c = 0; c < cols; c++) mx = fmaxf(mx, HK_LOAD(xr[c]));
    float lane[8] = {0};
    for (int64_t c = 0; c < cols; c++) lane[c & 7] += expf(HK_LOAD(xr[c]) - mx);
    const float inv = 1.0f / hk_sum8(lane);
    for (int64_t c = 0; c < cols; c++) yr[c] = HK_STORE(expf(HK_LOAD(xr[c]) - mx) * inv);
  }
}
