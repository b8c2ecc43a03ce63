/* rmsnorm over the last axis: x / sqrt(mean(x^2) + eps) * gamma, statistics in f32, as
 * templates/host/rmsnorm.c. Args: T x, T gamma, T out, I rows, I cols, F eps.
 * Block: HK_THREADS threads (a multiple of 32, at most 1024) per row; rows beyond
 * grid.x are taken by a grid-stride loop. */
HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *x, const HK_T *gamma, HK_T *out, long long rows, long long cols, float eps) {
  HK_SHARED float red[HK_RED_GROUP];
  for (long long r = HK_BID; r < rows; r += HK_NBLOCKS) {
    const HK_T *xr = x + r * cols;
    HK_T *yr = out + r * cols;
    float q = 0.0f;
    for (long long c = HK_TID; c < cols; c += HK_THREADS) {
      const float v = HK_LOAD(xr[c]);
      q += v * v;
    }
    const float rstd = 1.0f / sqrtf(hk_block_sum(q, red) / (float)cols + eps);
    for (long long c = HK_TID; c < cols; c += HK_THREADS) yr[c] = HK_STORE(HK_LOAD(xr[c]) * rstd * HK_LOAD(gamma[c]));
  }
}
