/* SPDX-License-Identifier: Apache-2.0 */
/* relu, gelu (erf form), silu, gelu_tanh, tanh: out[i] = HK_UNARY(x[i]) for i < n, as
 * templates/host/unary.c. Args: T x, T out, I n.
 * Block: HK_THREADS threads; grid-stride loop, so any grid.x covers every element. */
HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS) HK_NAME(const HK_T *x, HK_T *out, long long n) {
  const long long stride = HK_NBLOCKS * HK_THREADS;
  for (long long i = HK_BID * HK_THREADS + HK_TID; i < n; i += stride) out[i] = HK_STORE(HK_UNARY(HK_LOAD(x[i])));
}
