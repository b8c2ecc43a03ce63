/* SPDX-License-Identifier: Apache-2.0 */
/* take_rows: out[r] = x[rows[r]] for 0 <= rows[r] < x_rows, else zeros (lower.h); x
 * [x_rows, width], out [n_out, width]. Args: T x, const int *rows, T out, I x_rows, I n_out,
 * I width. A block is HK_THREADS consecutive columns of one output row (blocks row-major:
 * row, column chunk; grid-stride beyond grid.x), a thread one element, copied as stored. */
HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *x, const int *rows, HK_T *out, long long x_rows, long long n_out, long long width) {
  HK_PDL_ENTRY(); /* a pdl variant (variant_simple.c): nothing is touched before it */
  const long long chunks = (width + HK_THREADS - 1) / HK_THREADS;
  for (long long b = HK_BID; b < n_out * chunks; b += HK_NBLOCKS) {
    const long long r = b / chunks, c = b % chunks * HK_THREADS + HK_TID;
    if (c >= width) continue;
    const long long src = rows[r];
    out[r * width + c] = src >= 0 && src < x_rows ? x[src * width + c] : HK_STORE(0.0f);
  }
}
