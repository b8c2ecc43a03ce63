/* layernorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta, biased
 * variance, statistics in f32 (two passes: mean, then centred squares).
 * Args: T x, T gamma, T beta, T out, I rows, I cols, F eps. A block is one row. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  const HK_T *gamma = (const HK_T *)hk_arg_ptr(args, 1);
  const HK_T *beta = (const HK_T *)hk_arg_ptr(args, 2);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 3);
  const int64_t rows = hk_arg_i64(args, 4), cols = hk_arg_i64(args, 5);
  const float eps = hk_arg_f32(args, 6);
  for (int64_t r = block_begin; r < (int64_t)block_end && r < rows; r++) {
    const HK_T *xr = x + r * cols;
    HK_T *yr = out + r * cols;
    float sum = 0.0f;
    for (int64_t c = 0; c < cols; c++) sum += HK_LOAD(xr[c]);
    const float mean = sum / (float)cols;
    float sq = 0.0f;
    for (int64_t c = 0; c < cols; c++) {
      const float d = HK_LOAD(xr[c]) - mean;
      sq += d * d;
    }
    const float rstd = 1.0f / sqrtf(sq / (float)cols + eps);
    for (int64_t c = 0; c < cols; c++)
      yr[c] = HK_STORE((HK_LOAD(xr[c]) - mean) * rstd * HK_LOAD(gamma[c]) + HK_LOAD(beta[c]));
  }
}
