/* SPDX-License-Identifier: Apache-2.0 */
/* rmsnorm over the last axis: x / sqrt(mean(x^2) + eps) * gamma, statistics in f32.
 * Args: T x, T gamma, T out, I rows, I cols, F eps, T add, T sum.
 * With HK_HAS_ADD the row normalised is x + add (a fused residual add, summed in f32 and
 * not rounded before normalising); with HK_HAS_SUM that sum is also stored, rounded
 * once, in sum. A block is one row. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  const HK_T *gamma = (const HK_T *)hk_arg_ptr(args, 1);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 2);
  const int64_t rows = hk_arg_i64(args, 3), cols = hk_arg_i64(args, 4);
  const float eps = hk_arg_f32(args, 5);
#if HK_HAS_ADD
  const HK_T *add = (const HK_T *)hk_arg_ptr(args, 6);
#define HK_ROW(c) (HK_LOAD(xr[c]) + HK_LOAD(ar[c]))
#else
#define HK_ROW(c) HK_LOAD(xr[c])
#endif
#if HK_HAS_SUM
  HK_T *sum = (HK_T *)hk_arg_ptr(args, 7);
#endif
  for (int64_t r = block_begin; r < (int64_t)block_end && r < rows; r++) {
    const HK_T *xr = x + r * cols;
#if HK_HAS_ADD
    const HK_T *ar = add + r * cols;
#endif
    HK_T *yr = out + r * cols;
    float lane[8] = {0}; /* 8 partial sums: shorter rounding chains, more ILP */
    HK_LANES8(lane, c, cols, HK_ROW(c) * HK_ROW(c));
    const float rstd = 1.0f / sqrtf(hk_sum8(lane) / (float)cols + eps);
#if HK_HAS_SUM
    HK_T *sr = sum + r * cols;
    for (int64_t c = 0; c < cols; c++) sr[c] = HK_STORE(HK_ROW(c));
#endif
    HK_MAP16(yr, c, 0, cols, HK_ROW(c) * rstd * HK_LOAD(gamma[c]));
  }
#undef HK_ROW
}
