/* SPDX-License-Identifier: Apache-2.0 */
/* rmsnorm over the last axis: x / sqrt(mean(x^2) + eps) * gamma, statistics in f32, as
 * templates/host/rmsnorm.c. Args: T x, T gamma, T out, I rows, I cols, F eps, T add, T sum.
 * HK_HAS_ADD (fused residual add): the row normalised is v = x + add, kept in f32 (the
 * statistics and the output come from the f32 sum); HK_HAS_SUM also stores v rounded to
 * the dtype into sum (in the first pass). add / sum are NULL otherwise.
 * Block: HK_THREADS threads (a multiple of 32, at most 1024) per row; rows beyond
 * grid.x are taken by a grid-stride loop. */
#if HK_HAS_ADD
#define RN_V(c) (HK_LOAD(xr[c]) + HK_LOAD(ar[c]))
#else
#define RN_V(c) HK_LOAD(xr[c])
#endif

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *x, const HK_T *gamma, HK_T *out, long long rows, long long cols, float eps, const HK_T *add,
        HK_T *sum) {
  HK_PDL_ENTRY(); /* a pdl variant (variant_simple.c): nothing is touched before it */
  HK_SHARED float red[HK_RED_GROUP];
  (void)add;
  (void)sum;
  for (long long r = HK_BID; r < rows; r += HK_NBLOCKS) {
    const HK_T *xr = x + r * cols;
#if HK_HAS_ADD
    const HK_T *ar = add + r * cols;
#endif
    HK_T *yr = out + r * cols;
    float q = 0.0f;
    for (long long c = HK_TID; c < cols; c += HK_THREADS) {
      const float v = RN_V(c);
#if HK_HAS_SUM
      sum[r * cols + c] = HK_STORE(v);
#endif
      q += v * v;
    }
    const float rstd = 1.0f / sqrtf(hk_block_sum(q, red) / (float)cols + eps);
    for (long long c = HK_TID; c < cols; c += HK_THREADS) yr[c] = HK_STORE(RN_V(c) * rstd * HK_LOAD(gamma[c]));
  }
}
