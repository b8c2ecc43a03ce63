/* SPDX-License-Identifier: Apache-2.0 */
/* add, mul: out[i] = a[i % na] HK_BINOP b[i % nb] for i < n (NumPy broadcasting over
 * trailing dims: a smaller operand repeats), as templates/host/binary.c.
 * Args: T a, T b, T out, I n, I na, I nb.
 * Block: HK_THREADS threads; grid-stride loop, so any grid.x covers every element (the
 * launch asks for ceil(n / (HK_THREADS * HK_EW_ITEMS)) blocks). */
HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *a, const HK_T *b, HK_T *out, long long n, long long na, long long nb) {
  const long long stride = HK_NBLOCKS * HK_THREADS;
  long long i = HK_BID * HK_THREADS + HK_TID;
  if (na == n && nb == n) {
    for (; i < n; i += stride) out[i] = HK_STORE(HK_BINOP(HK_LOAD(a[i]), HK_LOAD(b[i])));
  } else {
    for (; i < n; i += stride) out[i] = HK_STORE(HK_BINOP(HK_LOAD(a[i % na]), HK_LOAD(b[i % nb])));
  }
}
