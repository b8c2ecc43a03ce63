/* SPDX-License-Identifier: Apache-2.0 */
/* dequant: out[r][c] = q[r][c] * scale[r / block_rows][c / block_cols] (lower.h); q [rows, cols]
 * int8 (HK_DQ_FP8 0) or fp8_e4m3 (1), scale f32 [scale_rows, scale_cols], out [rows, cols] of
 * HK_T, rounded once. Args: Q q, S scale, T out, I rows, I cols, I scale_rows, I scale_cols,
 * I block_rows, I block_cols. A block is one row. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const uint8_t *q = (const uint8_t *)hk_arg_ptr(args, 0);
  const float *scale = (const float *)hk_arg_ptr(args, 1);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 2);
  const int64_t rows = hk_arg_i64(args, 3), cols = hk_arg_i64(args, 4), scale_cols = hk_arg_i64(args, 6);
  const int64_t block_rows = hk_arg_i64(args, 7), block_cols = hk_arg_i64(args, 8);
  for (int64_t r = block_begin; r < (int64_t)block_end && r < rows; r++) {
    const float *s = scale + (r / block_rows) * scale_cols;
    const uint8_t *qr = q + r * cols;
    HK_T *o = out + r * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += block_cols) { /* one scale per column block */
      const float sc = s[c0 / block_cols];
      const int64_t c1 = c0 + block_cols < cols ? c0 + block_cols : cols;
#if HK_DQ_FP8
      for (int64_t c = c0; c < c1; c++) o[c] = HK_STORE(hk_fp8_e4m3_to_f32(qr[c]) * sc);
#else
      for (int64_t c = c0; c < c1; c++) o[c] = HK_STORE((float)(int8_t)qr[c] * sc);
#endif
    }
  }
}
