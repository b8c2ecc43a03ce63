/* SPDX-License-Identifier: Apache-2.0 */
/* argmax: out[r] = the first index of row r's largest value (lower.h): NaN never wins, and a
 * row without a number (all NaN) gives 0. Args: T x, I32 out, I rows, I cols. A block is
 * one row. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  int32_t *out = (int32_t *)hk_arg_ptr(args, 1);
  const int64_t rows = hk_arg_i64(args, 2), cols = hk_arg_i64(args, 3);
  for (int64_t r = block_begin; r < (int64_t)block_end && r < rows; r++) {
    const HK_T *xr = x + r * cols;
    float best = 0.0f;
    int64_t at = -1;
    for (int64_t c = 0; c < cols; c++) {
      const float v = HK_LOAD(xr[c]);
      if (v == v && (at < 0 || v > best)) { /* strictly larger: the first of equal values stays */
        best = v;
        at = c;
      }
    }
    out[r] = at < 0 ? 0 : (int32_t)at;
  }
}
