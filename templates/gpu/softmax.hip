/* SPDX-License-Identifier: Apache-2.0 */
/* softmax over the last axis, max-subtracted, as templates/host/softmax.c.
 * Args: T x, T out, I rows, I cols. The exponentials are recomputed in the last pass
 * (each thread rewrites only the columns it read), so out may alias x.
 * Block: HK_THREADS threads (a multiple of 32, at most 1024) per row; rows beyond
 * grid.x are taken by a grid-stride loop. */
HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS) HK_NAME(const HK_T *x, HK_T *out, long long rows, long long cols) {
  HK_SHARED float red[HK_RED_GROUP];
  for (long long r = HK_BID; r < rows; r += HK_NBLOCKS) {
    const HK_T *xr = x + r * cols;
    HK_T *yr = out + r * cols;
    float m = -hk_inf();
    for (long long c = HK_TID; c < cols; c += HK_THREADS) m = fmaxf(m, HK_LOAD(xr[c]));
    const float mx = hk_block_max(m, red);
    float s = 0.0f;
    for (long long c = HK_TID; c < cols; c += HK_THREADS) s += expf(HK_LOAD(xr[c]) - mx);
    const float inv = 1.0f / hk_block_sum(s, red);
    for (long long c = HK_TID; c < cols; c += HK_THREADS) yr[c] = HK_STORE(expf(HK_LOAD(xr[c]) - mx) * inv);
  }
}
