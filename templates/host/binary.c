/* SPDX-License-Identifier: Apache-2.0 */
/* add, mul: out[i] = a[i % na] HK_BINOP b[i % nb] for i < n (NumPy broadcasting over
 * trailing dims: a smaller operand repeats). Args: T a, T b, T out, I n, I na, I nb.
 * A block is a chunk of HK_EW_CHUNK consecutive output elements. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *a = (const HK_T *)hk_arg_ptr(args, 0);
  const HK_T *b = (const HK_T *)hk_arg_ptr(args, 1);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 2);
  const int64_t n = hk_arg_i64(args, 3), na = hk_arg_i64(args, 4), nb = hk_arg_i64(args, 5);
  const int64_t begin = (int64_t)block_begin * HK_EW_CHUNK;
  const int64_t end = hk_min_i64((int64_t)block_end * HK_EW_CHUNK, n);
  if (begin >= end) return;
  if (na == n && nb == n) {
    for (int64_t i = begin; i < end; i++) out[i] = HK_STORE(HK_BINOP(HK_LOAD(a[i]), HK_LOAD(b[i])));
    return;
  }
  int64_t ia = begin % na, ib = begin % nb; /* running indices: no division per element */
  for (int64_t i = begin; i < end; i++) {
    out[i] = HK_STORE(HK_BINOP(HK_LOAD(a[ia]), HK_LOAD(b[ib])));
    if (++ia == na) ia = 0;
    if (++ib == nb) ib = 0;
  }
}
