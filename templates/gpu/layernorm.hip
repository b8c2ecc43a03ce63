/* layernorm over the last axis: (x - mean) / sqrt(var + eps) * gamma + beta, biased
 * variance, statistics in f32, as templates/host/layernorm.c. Two passes over the row
 * (mean, then centred squares), so a large mean costs no precision in the variance.
 * Args: T x, T gamma, T beta, T out, I rows, I cols, F eps.
 * Block: HK_THREADS threads (a multiple of 32, at most 1024) per row; rows beyond
 * grid.x are taken by a grid-stride loop. */
HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *x, const HK_T *gamma, const HK_T *beta, HK_T *out, long long rows, long long cols,
        float eps) {
  HK_SHARED float red[HK_RED_GROUP];
  for (long long r = HK_BID; r < rows; r += HK_NBLOCKS) {
    const HK_T *xr = x + r * cols;
    HK_T *yr = out + r * cols;
    float s = 0.0f;
    for (long long c = HK_TID; c < cols; c += HK_THREADS) s += HK_LOAD(xr[c]);
    const float mean = hk_block_sum(s, red) / (float)cols;
    float q = 0.0f;
    for (long long c = HK_TID; c < cols; c += HK_THREADS) {
      const float d = HK_LOAD(xr[c]) - mean;
      q += d * d;
    }
    const float rstd = 1.0f / sqrtf(hk_block_sum(q, red) / (float)cols + eps);
    for (long long c = HK_TID; c < cols; c += HK_THREADS)
      yr[c] = HK_STORE((HK_LOAD(xr[c]) - mean) * rstd * HK_LOAD(gamma[c]) + HK_LOAD(beta[c]));
  }
}
