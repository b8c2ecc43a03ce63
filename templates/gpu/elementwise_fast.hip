/* SPDX-License-Identifier: Apache-2.0 */
/* Element-wise ops with 16-byte vectors: add, mul (HK_EW_BINARY 1; args T a, T b, T out,
 * I n, I na, I nb: out[i] = a[i % na] HK_BINOP b[i % nb]), relu, gelu, silu, gelu_tanh, tanh
 * (HK_EW_BINARY 0; args T x, T out, I n: out[i] = HK_UNARY(x[i])) and ewchain
 * (HK_EW_CHAIN 1; args T out, I n, then T in_j, I n_j per operand: out[i] =
 * HK_EW_PROGRAM over in_j[i % n_j], see ewchain.hip), the same results as binary.hip /
 * unary.hip / ewchain.hip. Served by the variant "elementwise_vec16" (variant_rows.c) when
 * n and every operand's length are multiples of HK_VEC (key.align: the operands' last
 * dims are) and tensors are 16-byte aligned.
 *
 * Macros from the variant: HK_THREADS (block), HK_VEC (4 f32, 8 f16/bf16), HK_EW_UNROLL
 * (vectors per thread and operand per step, loaded before any is used), HK_EW_MIN_BLOCKS
 * (NVIDIA), HK_EW_FAST_ACT (1 gelu, 2 silu, 3 both (ewchain's g and s steps) through exp2
 * / reciprocal approximations, for 16-bit outputs only: see ew_gelu16 / ew_silu16; 0 the
 * common.h functions).
 *
 * Vector j of out covers elements j*V .. j*V+V-1; as na is a multiple of V, those are
 * a's elements (j % (na/V))*V .. +V-1: vector j of out reads vector j % (na/V) of a.
 * The grid is sized to the device (a few waves of resident blocks; launch in
 * variant_rows.c); blocks stride over the vectors. A broadcast operand's vector index is
 * kept per unrolled slot and advanced by (stride mod na/V) with one conditional
 * subtraction per step: no 64-bit division inside the loop. */

#if HK_VEC == 8
struct __attribute__((aligned(16))) ew_vec {
  unsigned int w[4];
};
HK_DEVICE float ew_get(const ew_vec &v, int e) { return HK_LOAD((unsigned short)(v.w[e >> 1] >> ((e & 1) * 16))); }
HK_DEVICE void ew_set(ew_vec &v, const float *f) {
#pragma unroll
  for (int i = 0; i < 4; i++)
    v.w[i] = (unsigned)HK_STORE(f[2 * i]) | ((unsigned)HK_STORE(f[2 * i + 1]) << 16);
}
#elif HK_VEC == 4
struct __attribute__((aligned(16))) ew_vec {
  unsigned int w[4];
};
HK_DEVICE float ew_get(const ew_vec &v, int e) { return __uint_as_float(v.w[e]); }
HK_DEVICE void ew_set(ew_vec &v, const float *f) {
#pragma unroll
  for (int i = 0; i < 4; i++) v.w[i] = __float_as_uint(f[i]);
}
#else
#error "elementwise_fast.hip: HK_VEC must be 4 (f32) or 8 (f16/bf16)"
#endif

#define EW_U HK_EW_UNROLL

#ifndef HK_EW_FAST_ACT
#define HK_EW_FAST_ACT 0
#endif
#ifndef HK_EW_CHAIN
#define HK_EW_CHAIN 0
#endif
/* ew_gelu16 / ew_silu16: common.h's hk_act_gelu16 / hk_act_silu16 (the GEMM epilogues use them too). */
#define ew_gelu16 hk_act_gelu16
#define ew_silu16 hk_act_silu16

#if HK_EW_FAST_ACT == 1
#undef HK_UNARY
#define HK_UNARY(x) ew_gelu16(x)
#elif HK_EW_FAST_ACT == 2
#undef HK_UNARY
#define HK_UNARY(x) ew_silu16(x)
#elif HK_EW_FAST_ACT == 3
#define HK_EW_GELU(x) ew_gelu16(x)
#define HK_EW_SILU(x) ew_silu16(x)
#endif
#ifndef HK_EW_GELU
#define HK_EW_GELU(x) hk_act_gelu(x)
#endif
#ifndef HK_EW_SILU
#define HK_EW_SILU(x) hk_act_silu(x)
#endif

/* NVIDIA: ask ptxas for HK_EW_MIN_BLOCKS resident blocks (register cap 65536 / (threads x that)) */
#if defined(__CUDA_ARCH__)
#define HK_EW_BOUNDS __launch_bounds__(HK_THREADS, HK_EW_MIN_BLOCKS)
#else
#define HK_EW_BOUNDS HK_LAUNCH_BOUNDS(HK_THREADS)
#endif

#if HK_EW_CHAIN
/* Operand j's vector for out vector i: src[j][i] when it is as long as out, else
 * src[j][i % nvs[j]], kept per unrolled slot in idx[j][k] and advanced by stride mod
 * nvs[j] with one conditional subtraction (bc[j], uniform over the grid). */
#define EW_PARAM(j) , const HK_T *in##j, long long n##j
#define EW_SETUP(j)                  \
  src[j] = (const ew_vec *)in##j;    \
  nvs[j] = n##j / HK_VEC;
#define EW_X(j) ew_get(va[j][k], e)

HK_GLOBAL void HK_EW_BOUNDS HK_NAME(HK_T *out, long long n, const HK_T *in0, long long n0 HK_EW_EACH(EW_PARAM)) {
  const ew_vec *src[HK_EW_NOPS];
  long long nvs[HK_EW_NOPS];
  src[0] = (const ew_vec *)in0;
  nvs[0] = n0 / HK_VEC;
  HK_EW_EACH(EW_SETUP)
  const long long nv = n / HK_VEC;
  if (nv <= 0) return;
  const long long stride = HK_NBLOCKS * HK_THREADS * EW_U;
  long long i0 = HK_BID * HK_THREADS * EW_U + HK_TID;
  bool bc[HK_EW_NOPS];
  long long step[HK_EW_NOPS], idx[HK_EW_NOPS][EW_U];
#pragma unroll
  for (int j = 0; j < HK_EW_NOPS; j++) {
    if (nvs[j] <= 0) return;
    bc[j] = nvs[j] < nv;
    step[j] = bc[j] ? stride % nvs[j] : 0;
#pragma unroll
    for (int k = 0; k < EW_U; k++) idx[j][k] = bc[j] ? (i0 + (long long)k * HK_THREADS) % nvs[j] : 0;
  }
  ew_vec *o = (ew_vec *)out;
  for (; i0 < nv; i0 += stride) {
    ew_vec va[HK_EW_NOPS][EW_U];
#pragma unroll
    for (int k = 0; k < EW_U; k++) {
      const long long i = i0 + (long long)k * HK_THREADS;
      if (i < nv)
#pragma unroll
        for (int j = 0; j < HK_EW_NOPS; j++) va[j][k] = src[j][bc[j] ? idx[j][k] : i];
    }
#pragma unroll
    for (int k = 0; k < EW_U; k++) {
      const long long i = i0 + (long long)k * HK_THREADS;
      if (i < nv) {
        float r[HK_VEC];
#pragma unroll
        for (int e = 0; e < HK_VEC; e++) {
          float v = ew_get(va[0][k], e);
          HK_EW_PROGRAM(v, EW_X)
          r[e] = v;
        }
        ew_vec vo;
        ew_set(vo, r);
        o[i] = vo;
      }
#pragma unroll
      for (int j = 0; j < HK_EW_NOPS; j++)
        if (bc[j]) {
          idx[j][k] += step[j];
          if (idx[j][k] >= nvs[j]) idx[j][k] -= nvs[j];
        }
    }
  }
}

#elif HK_EW_BINARY
/* BA / BB: operand a / b is broadcast (fewer vectors than out). */
template <int BA, int BB>
HK_DEVICE void ew_binary(const ew_vec *a, const ew_vec *b, ew_vec *o, long long nv, long long nva, long long nvb) {
  const long long stride = HK_NBLOCKS * HK_THREADS * EW_U;
  long long i0 = HK_BID * HK_THREADS * EW_U + HK_TID;
  const long long step_a = BA ? stride % nva : 0, step_b = BB ? stride % nvb : 0;
  long long ia[EW_U], ib[EW_U];
#pragma unroll
  for (int k = 0; k < EW_U; k++) {
    ia[k] = BA ? (i0 + (long long)k * HK_THREADS) % nva : 0;
    ib[k] = BB ? (i0 + (long long)k * HK_THREADS) % nvb : 0;
  }
  for (; i0 < nv; i0 += stride) {
    ew_vec va[EW_U], vb[EW_U];
#pragma unroll
    for (int k = 0; k < EW_U; k++) {
      const long long i = i0 + (long long)k * HK_THREADS;
      if (i < nv) {
        va[k] = a[BA ? ia[k] : i];
        vb[k] = b[BB ? ib[k] : i];
      }
    }
#pragma unroll
    for (int k = 0; k < EW_U; k++) {
      const long long i = i0 + (long long)k * HK_THREADS;
      if (i < nv) {
        float r[HK_VEC];
#pragma unroll
        for (int e = 0; e < HK_VEC; e++) r[e] = HK_BINOP(ew_get(va[k], e), ew_get(vb[k], e));
        ew_vec vo;
        ew_set(vo, r);
        o[i] = vo;
      }
      if (BA) {
        ia[k] += step_a;
        if (ia[k] >= nva) ia[k] -= nva;
      }
      if (BB) {
        ib[k] += step_b;
        if (ib[k] >= nvb) ib[k] -= nvb;
      }
    }
  }
}

HK_GLOBAL void HK_EW_BOUNDS
HK_NAME(const HK_T *a, const HK_T *b, HK_T *out, long long n, long long na, long long nb) {
  const long long nv = n / HK_VEC, nva = na / HK_VEC, nvb = nb / HK_VEC;
  if (nv <= 0 || nva <= 0 || nvb <= 0) return;
  const ew_vec *va = (const ew_vec *)a, *vb = (const ew_vec *)b;
  ew_vec *vo = (ew_vec *)out;
  if (nva >= nv && nvb >= nv) ew_binary<0, 0>(va, vb, vo, nv, nva, nvb);
  else if (nva >= nv) ew_binary<0, 1>(va, vb, vo, nv, nva, nvb);
  else if (nvb >= nv) ew_binary<1, 0>(va, vb, vo, nv, nva, nvb);
  else ew_binary<1, 1>(va, vb, vo, nv, nva, nvb);
}

#else

HK_GLOBAL void HK_EW_BOUNDS HK_NAME(const HK_T *x, HK_T *out, long long n) {
  const long long nv = n / HK_VEC;
  const ew_vec *vx = (const ew_vec *)x;
  ew_vec *vo = (ew_vec *)out;
  const long long stride = HK_NBLOCKS * HK_THREADS * EW_U;
  for (long long i0 = HK_BID * HK_THREADS * EW_U + HK_TID; i0 < nv; i0 += stride) {
    ew_vec v[EW_U];
#pragma unroll
    for (int k = 0; k < EW_U; k++) {
      const long long i = i0 + (long long)k * HK_THREADS;
      if (i < nv) v[k] = vx[i];
    }
#pragma unroll
    for (int k = 0; k < EW_U; k++) {
      const long long i = i0 + (long long)k * HK_THREADS;
      if (i < nv) {
        float r[HK_VEC];
#pragma unroll
        for (int e = 0; e < HK_VEC; e++) r[e] = HK_UNARY(ew_get(v[k], e));
        ew_vec vo1;
        ew_set(vo1, r);
        vo[i] = vo1;
      }
    }
  }
}

#endif
