/* SPDX-License-Identifier: Apache-2.0 */
/* ewchain: a fused chain of element-wise ops. out[i] = program(v = in0[i % n0]) for
 * i < n, where each step of the program (generated into HK_EW_PROGRAM from the kernel
 * key, see hkc_kernel_key_t.program) updates the f32 value v: v += in_j / v *= in_j
 * (element i % n_j of operand j, read through HK_EW_X(j)) or an activation. f32 math,
 * one rounding to the output type at the end.
 * Args: T out, I n, then per operand j < HK_EW_NIN: T in_j, I n_j.
 * A block is a chunk of HK_EW_CHUNK consecutive output elements. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  HK_T *out = (HK_T *)hk_arg_ptr(args, 0);
  const int64_t n = hk_arg_i64(args, 1);
  const HK_T *in[HK_EW_NIN];
  int64_t nj[HK_EW_NIN], ix[HK_EW_NIN];
  int full = 1; /* every operand has n elements: plain indexing (vectorizable) */
  for (int j = 0; j < HK_EW_NIN; j++) {
    in[j] = (const HK_T *)hk_arg_ptr(args, 2 + 2 * j);
    nj[j] = hk_arg_i64(args, 3 + 2 * j);
    full &= nj[j] == n;
  }
  const int64_t begin = (int64_t)block_begin * HK_EW_CHUNK;
  const int64_t end = hk_min_i64((int64_t)block_end * HK_EW_CHUNK, n);
  if (begin >= end) return;
  if (full) { /* chunks of 16 staged in a local array, as prelude.h's HK_MAP16 (vectorized) */
#define HK_EW_X(j) HK_LOAD(in[j][i])
    int64_t i0 = begin;
    for (; i0 + 16 <= end; i0 += 16) {
      float vv[16];
      for (int t = 0; t < 16; t++) {
        const int64_t i = i0 + t;
        float v = HK_EW_X(0);
        HK_EW_PROGRAM
        vv[t] = v;
      }
      for (int t = 0; t < 16; t++) out[i0 + t] = HK_STORE(vv[t]);
    }
    for (int64_t i = i0; i < end; i++) {
      float v = HK_EW_X(0);
      HK_EW_PROGRAM
      out[i] = HK_STORE(v);
    }
#undef HK_EW_X
    return;
  }
  for (int j = 0; j < HK_EW_NIN; j++) ix[j] = begin % nj[j]; /* running indices: no division per element */
#define HK_EW_X(j) HK_LOAD(in[j][ix[j]])
  for (int64_t i = begin; i < end; i++) {
    float v = HK_EW_X(0);
    HK_EW_PROGRAM
    out[i] = HK_STORE(v);
    for (int j = 0; j < HK_EW_NIN; j++)
      if (++ix[j] == nj[j]) ix[j] = 0;
  }
#undef HK_EW_X
}
