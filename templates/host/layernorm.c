/* SPDX-License-Identifier: Apache-2.0 */
/* layernorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta, biased
 * variance, statistics in f32 (two passes: mean, then centred squares).
 * Args: T x, T gamma, T beta, T out, I rows, I cols, F eps, T add, T sum.
 * With HK_HAS_ADD the row normalised is x + add (a fused residual add, summed in f32 and
 * not rounded before normalising); with HK_HAS_SUM that sum is also stored, rounded
 * once, in sum. A block is one row. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  const HK_T *gamma = (const HK_T *)hk_arg_ptr(args, 1);
  const HK_T *beta = (const HK_T *)hk_arg_ptr(args, 2);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 3);
  const int64_t rows = hk_arg_i64(args, 4), cols = hk_arg_i64(args, 5);
  const float eps = hk_arg_f32(args, 6);
#if HK_HAS_ADD
  const HK_T *add = (const HK_T *)hk_arg_ptr(args, 7);
#define HK_ROW(c) (HK_LOAD(xr[c]) + HK_LOAD(ar[c]))
#else
#define HK_ROW(c) HK_LOAD(xr[c])
#endif
#if HK_HAS_SUM
  HK_T *sum = (HK_T *)hk_arg_ptr(args, 8);
#endif
  for (int64_t r = block_begin; r < (int64_t)block_end && r < rows; r++) {
    const HK_T *xr = x + r * cols;
#if HK_HAS_ADD
    const HK_T *ar = add + r * cols;
#endif
    HK_T *yr = out + r * cols;
    /* Sums of x - x[0]: the mean's rounding error scales with the spread of the row,
     * not with its magnitude. 8 partial sums: shorter rounding chains, more ILP. */
    const float shift = HK_ROW(0);
    float lane[8] = {0};
    HK_LANES8(lane, c, cols, HK_ROW(c) - shift);
    const float mean = shift + hk_sum8(lane) / (float)cols;
    memset(lane, 0, sizeof lane);
    HK_LANES8(lane, c, cols, (HK_ROW(c) - mean) * (HK_ROW(c) - mean));
    const float rstd = 1.0f / sqrtf(hk_sum8(lane) / (float)cols + eps);
#if HK_HAS_SUM
    HK_T *sr = sum + r * cols;
    for (int64_t c = 0; c < cols; c++) sr[c] = HK_STORE(HK_ROW(c));
#endif
    HK_MAP16(yr, c, 0, cols, (HK_ROW(c) - mean) * rstd * HK_LOAD(gamma[c]) + HK_LOAD(beta[c]));
  }
#undef HK_ROW
}
