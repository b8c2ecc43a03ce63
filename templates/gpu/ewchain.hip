/* SPDX-License-Identifier: Apache-2.0 */
/* ewchain: a fused chain of element-wise ops (hkc.h, hkc_kernel_key_t.program):
 * out[i] = program(in0[i % n0], in1[i % n1], ...) for i < n, every step in f32 and one
 * rounding at the end. Args: T out, I n, then per operand j: T in_j, I n_j (NumPy
 * broadcasting over trailing dims: a smaller operand repeats).
 * Macros from the code generator: HK_EW_NOPS, HK_EW_EACH(F) (F(1) .. F(NOPS-1)),
 * HK_EW_PROGRAM(v, X) (X(j): operand j's f32 value at element i).
 * Block: HK_THREADS threads; grid-stride loop, so any grid.x covers every element. An
 * operand as long as out is indexed by i itself (a uniform branch), others by i % n_j. */
#ifndef HK_EW_GELU
#define HK_EW_GELU(x) hk_act_gelu(x)
#endif
#ifndef HK_EW_SILU
#define HK_EW_SILU(x) hk_act_silu(x)
#endif

#define EW_PARAM(j) , const HK_T *in##j, long long n##j
#define EW_AT(p, nj) HK_LOAD((p)[(nj) == n ? i : i % (nj)])
#define EW_OPERAND(j) EW_AT(in##j, n##j)

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(HK_T *out, long long n, const HK_T *in0, long long n0 HK_EW_EACH(EW_PARAM)) {
  const long long stride = HK_NBLOCKS * HK_THREADS;
  for (long long i = HK_BID * HK_THREADS + HK_TID; i < n; i += stride) {
    float v = EW_AT(in0, n0);
    HK_EW_PROGRAM(v, EW_OPERAND)
    out[i] = HK_STORE(v);
  }
}
