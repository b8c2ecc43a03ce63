/* SPDX-License-Identifier: Apache-2.0 */
/* dequant: out[r][c] = q[r][c] * scale[r / block_rows][c / block_cols] (lower.h); q [rows, cols]
 * int8 (HK_DQ_FP8 0) or fp8_e4m3 (1), scale f32 [scale_rows, scale_cols], out [rows, cols] of
 * HK_T, rounded once. Args: const unsigned char *q, const float *scale, T out, I rows, I cols,
 * I scale_rows, I scale_cols, I block_rows, I block_cols. A block is HK_THREADS consecutive
 * columns of one row (blocks row-major: row, column chunk; grid-stride beyond grid.x), a thread
 * one element. */
/* fp8_e4m3 values: common.h's hk_fp8_e4m3_to_f32 */

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const unsigned char *q, const float *scale, HK_T *out, long long rows, long long cols, long long scale_rows,
        long long scale_cols, long long block_rows, long long block_cols) {
  (void)scale_rows;
  const long long chunks = (cols + HK_THREADS - 1) / HK_THREADS;
  for (long long b = HK_BID; b < rows * chunks; b += HK_NBLOCKS) {
    const long long r = b / chunks, c = b % chunks * HK_THREADS + HK_TID;
    if (c >= cols) continue;
    const float s = scale[r / block_rows * scale_cols + c / block_cols];
#if HK_DQ_FP8
    out[r * cols + c] = HK_STORE(hk_fp8_e4m3_to_f32(q[r * cols + c]) * s);
#else
    out[r * cols + c] = HK_STORE((float)(signed char)q[r * cols + c] * s);
#endif
  }
}
