/* rmsnorm over the last axis: x / sqrt(mean(x^2) + eps) * gamma, statistics in f32.
 * Args: T x, T gamma, T out, I rows, I cols, F eps. A block is one row. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  const HK_T *gamma = (const HK_T *)hk_arg_ptr(args, 1);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 2);
  const int64_t rows = hk_arg_i64(args, 3), cols = hk_arg_i64(args, 4);
  const float eps = hk_arg_f32(args, 5);
  for (int64_t r = block_begin; r < (int64_t)block_end && r < rows; r++) {
    const HK_T *xr = x + r * cols;
    HK_T *yr = out + r * cols;
    float lane[8] = {0}; /* 8 partial sums: shorter rounding chains, more ILP */
    for (int64_t c = 0; c < cols; c++) {
      const float v = HK_LOAD(xr[c]);
      lane[c & 7] += v * v;
    }
    const float rstd = 1.0f / sqrtf(hk_sum8(lane) / (float)cols + eps);
    for (int64_t c = 0; c < cols; c++) yr[c] = HK_STORE(HK_LOAD(xr[c]) * rstd * HK_LOAD(gamma[c]));
  }
}
