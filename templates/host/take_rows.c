/* SPDX-License-Identifier: Apache-2.0 */
/* take_rows: out[r] = x[rows[r]] for 0 <= rows[r] < x_rows, else zeros (lower.h); x
 * [x_rows, width], out [n_out, width]; rows copied as stored. Args: T x, I32 rows, T out,
 * I x_rows, I n_out, I width. A block is one output row. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  const int32_t *rows = (const int32_t *)hk_arg_ptr(args, 1);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 2);
  const int64_t x_rows = hk_arg_i64(args, 3), n_out = hk_arg_i64(args, 4), width = hk_arg_i64(args, 5);
  for (int64_t r = block_begin; r < (int64_t)block_end && r < n_out; r++) {
    const int64_t src = rows[r];
    HK_T *o = out + r * width;
    if (src >= 0 && src < x_rows)
      memcpy(o, x + src * width, (size_t)width * sizeof *o);
    else
      for (int64_t d = 0; d < width; d++) o[d] = HK_STORE(0.0f);
  }
}
