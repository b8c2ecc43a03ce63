/* SPDX-License-Identifier: Apache-2.0 */
/* relu, gelu (erf form), silu, gelu_tanh, tanh: out[i] = HK_UNARY(x[i]) for i < n. Args: T x, T out, I n.
 * A block is a chunk of HK_EW_CHUNK consecutive elements. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 1);
  const int64_t n = hk_arg_i64(args, 2);
  const int64_t begin = (int64_t)block_begin * HK_EW_CHUNK;
  const int64_t end = hk_min_i64((int64_t)block_end * HK_EW_CHUNK, n);
  HK_MAP16(out, i, begin, end, HK_UNARY(HK_LOAD(x[i])));
}
