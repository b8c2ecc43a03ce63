/* SPDX-License-Identifier: Apache-2.0 */
/* argmax: out[r] = the first index of row r's largest value (lower.h): NaN never wins, and a
 * row without a number (all NaN, or no columns) gives 0. Args: T x, int *out (i32), I rows,
 * I cols. A block is one row (grid-stride beyond grid.x): each thread keeps the best of its
 * strided columns (row_best.h: 16-byte loads, several in flight; taking a value only when it is
 * larger, so the first of equal values stays), then the block reduces the (value, index) pairs: in groups of HK_RED_GROUP lanes with xor
 * shuffles (the index travels as the bits of a float), then the groups' results through
 * shared memory, in group order. Ties go to the smaller index, so the result does not depend
 * on the order of the reduction. */

/* Whether candidate (v2, i2) beats (v, i); index -1: no candidate (NaN was never taken). */
HK_DEVICE int argmax_better(float v, int i, float v2, int i2) {
  return i2 >= 0 && (i < 0 || v2 > v || (v2 == v && i2 < i));
}

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS) HK_NAME(const HK_T *x, int *out, long long rows, long long cols) {
  HK_PDL_ENTRY(); /* a pdl variant (variant_simple.c): nothing is touched before it */
  HK_SHARED float red_v[HK_RED_GROUP];
  HK_SHARED int red_i[HK_RED_GROUP];
  for (long long r = HK_BID; r < rows; r += HK_NBLOCKS) {
    const HK_T *xr = x + r * cols;
    float best;
    int at;
    row_best_scan(xr, cols, &best, &at); /* row_best.h */
    for (int o = HK_RED_GROUP / 2; o > 0; o >>= 1) {
      const float v2 = hk_shfl_xor(best, o);
      const int i2 = (int)__float_as_uint(hk_shfl_xor(__uint_as_float((unsigned)at), o));
      if (argmax_better(best, at, v2, i2)) {
        best = v2;
        at = i2;
      }
    }
    HK_SYNC(); /* the previous row's red_v / red_i are read */
    if ((HK_TID & (HK_RED_GROUP - 1)) == 0) {
      red_v[HK_TID / HK_RED_GROUP] = best;
      red_i[HK_TID / HK_RED_GROUP] = at;
    }
    HK_SYNC();
    if (HK_TID == 0) {
      for (int g = 1; g < HK_THREADS / HK_RED_GROUP; g++)
        if (argmax_better(best, at, red_v[g], red_i[g])) {
          best = red_v[g];
          at = red_i[g];
        }
      out[r] = at < 0 ? 0 : at;
    }
  }
}
