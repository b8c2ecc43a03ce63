/* SPDX-License-Identifier: Apache-2.0 */
/* row_best.h: one thread's best (value, index) of its share of a row under argmax's rule (the
 * first index of the largest value; NaN never taken; index -1: none) -- argmax.hip and
 * sample.hip's greedy rows, before their block reduction. A thread takes HK_ROW_VEC
 * consecutive elements per load (16 bytes where the key's alignment allows: variant_simple.c;
 * else 1) and has HK_ROW_ILP loads in flight at once (a vocabulary row is ~128k elements for a
 * block's few hundred threads). A thread visits its elements in increasing index and takes a
 * value only when it is larger, so the first of equal values stays. */
#define HK_ROW_ILP 8 /* loads in flight per thread (16 measured no faster on the H100, 2026-12-07) */

HK_DEVICE void row_best_take(float v, long long c, float *best, int *at) {
  if (v == v && (*at < 0 || v > *best)) {
    *best = v;
    *at = (int)c;
  }
}

#if HK_ROW_VEC > 1
/* HK_ROW_VEC elements in one 16-byte load */
struct __attribute__((aligned(16))) row_vec {
  HK_T e[HK_ROW_VEC];
};
#endif

HK_DEVICE void row_best_scan(const HK_T *xr, long long cols, float *best, int *at) {
  *best = 0.0f;
  *at = -1;
  long long c0 = 0; /* the scalar pass's first column */
#if HK_ROW_VEC > 1
  const long long nv = cols / HK_ROW_VEC; /* whole vectors; the rest in the scalar pass */
  long long v = HK_TID;
  for (; v + (HK_ROW_ILP - 1) * HK_THREADS < nv; v += HK_ROW_ILP * HK_THREADS) {
    row_vec pk[HK_ROW_ILP];
#pragma unroll
    for (int i = 0; i < HK_ROW_ILP; i++) pk[i] = *(const row_vec *)(xr + (v + i * HK_THREADS) * HK_ROW_VEC);
#pragma unroll
    for (int i = 0; i < HK_ROW_ILP; i++)
#pragma unroll
      for (int j = 0; j < HK_ROW_VEC; j++)
        row_best_take(HK_LOAD(pk[i].e[j]), (v + i * HK_THREADS) * HK_ROW_VEC + j, best, at);
  }
  for (; v < nv; v += HK_THREADS) {
    const row_vec pk = *(const row_vec *)(xr + v * HK_ROW_VEC);
#pragma unroll
    for (int j = 0; j < HK_ROW_VEC; j++) row_best_take(HK_LOAD(pk.e[j]), v * HK_ROW_VEC + j, best, at);
  }
  c0 = nv * HK_ROW_VEC;
#endif
  long long c = c0 + HK_TID;
  for (; c + (HK_ROW_ILP - 1) * HK_THREADS < cols; c += HK_ROW_ILP * HK_THREADS) {
    float x[HK_ROW_ILP];
#pragma unroll
    for (int i = 0; i < HK_ROW_ILP; i++) x[i] = HK_LOAD(xr[c + i * HK_THREADS]);
#pragma unroll
    for (int i = 0; i < HK_ROW_ILP; i++) row_best_take(x[i], c + i * HK_THREADS, best, at);
  }
  for (; c < cols; c += HK_THREADS) row_best_take(HK_LOAD(xr[c]), c, best, at);
}
