/* SPDX-License-Identifier: Apache-2.0 */
/*
 * templates/gpu/common.h -- helpers shared by every GPU op template, after the vendor
 * prelude (which supplies HK_DEVICE, HK_SYNC, hk_shfl_xor, hk_inf and the conversions).
 */

/* ---- activations (DESIGN "Op semantics"), the same formulas as templates/host ----------- */
HK_DEVICE float hk_act_none(float x) { return x; }
HK_DEVICE float hk_act_relu(float x) { return x > 0.0f ? x : 0.0f; }
/* Exact erf form, torch.nn.functional.gelu's default. */
HK_DEVICE float hk_act_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
HK_DEVICE float hk_act_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
HK_DEVICE float hk_act_silu(float x) { return x / (1.0f + expf(-x)); }

/* The 16-bit outputs' gelu and silu: as accurate as the result's rounding needs, cheaper to
 * issue. Used where the result is stored as f16/bf16 (elementwise_fast.hip unless exact
 * activations are asked for; gemm_tma's epilogue). */
/* gelu(x) = x * Phi(x) in the erf form, Phi(x) = erfc(-x / sqrt 2) / 2. erfc(z) = t *
 * exp(-z^2 + P(t)) with t = 1 / (1 + z/2), z >= 0 (the form of Numerical Recipes' erfcc);
 * here in log2 units with the 1/2 folded into the constant term: h = Phi(-|x|) = t *
 * exp2(-x^2 log2e / 2 + P2(t)), Phi(x) = x < 0 ? h : 1 - h. P2 is a degree-5 minimax fit
 * of (ln(erfcx(z) / t) - ln 2) log2e over t in (0, 1] (every z; least squares reweighted
 * toward minimax, fitted for hkc): its error is
 * an error of the exponent, so h keeps a relative error below 5.1e-5 everywhere, the far
 * negative tail included (no cancellation, unlike 0.5x(1 + erff(x/sqrt 2))). Max relative
 * error of the result 5.7e-5 in f32 (tests/unit/act16_test.c checks < 1e-4 on the CPU),
 * ~9x below a f16 half-ulp, ~35x below bf16's. ~16 operations (2 of them MUFU: rcp, ex2)
 * against ~31 for erff and ~20 for the degree-9 fit used before (on the H200, 2026-12-02:
 * bert's ffn up with bias and gelu in its epilogue 53.1 -> 49.8 us at 4096 rows, 206.1 ->
 * 200.5 us at 16384; docs/BENCHMARKS.md): gelu on 16-bit data is issue-bound otherwise
 * (element-wise kernels; the GEMM epilogue, where it is most of the work). inf -> inf,
 * -inf -> NaN, NaN -> NaN, as the erff form. */
HK_DEVICE float hk_act_gelu16(float x) {
  const float ax = fabsf(x);
  const float t = __fdividef(1.0f, fmaf(ax, 0.353553390593f, 1.0f));
  float p = 0.259365588f;
  p = fmaf(p, t, -0.824806273f);
  p = fmaf(p, t, 0.478593290f);
  p = fmaf(p, t, 0.463985920f);
  p = fmaf(p, t, 1.44860959f);
  p = fmaf(p, t, -2.82582164f);
  const float h = t * exp2f(fmaf(x * x, -0.721347520444f, p));
  return x * (x < 0.0f ? h : 1.0f - h);
}

/* silu(x) = x * sigmoid(x), sigmoid from e = exp(-|x|) in (0, 1] (no overflow):
 * s = 1 / (1 + e), sigmoid = x >= 0 ? s : e * s; hardware exp2 and reciprocal (a few f32
 * ulp, far below f16/bf16 rounding). Tiny results stay (no flush through 1/inf). */
HK_DEVICE float hk_act_silu16(float x) {
  const float e = exp2f(fabsf(x) * -1.44269504089f);
  const float s = __fdividef(1.0f, 1.0f + e);
  return x * (x >= 0.0f ? s : e * s);
}

HK_DEVICE long long hk_min_ll(long long a, long long b) { return a < b ? a : b; }

/* ---- block reductions ------------------------------------------------------------------------
 * Lanes are reduced in groups of HK_RED_GROUP = 32 with xor shuffles (offsets < 32 stay
 * inside a group on wave32 and wave64 alike), then the group results through shared
 * memory. Requirements: blockDim.x is a multiple of 32 and at most 32 * HK_RED_GROUP, and
 * every thread of the block calls (barriers inside). Every thread gets the same result:
 * all add the group partials in the same order. `red` is HK_RED_GROUP floats of shared
 * memory; calls may reuse it back to back (the leading barrier orders them). */
#define HK_RED_GROUP 32

HK_DEVICE float hk_block_sum(float v, float *red) {
  for (int o = HK_RED_GROUP / 2; o > 0; o >>= 1) v += hk_shfl_xor(v, o);
  HK_SYNC();
  if ((HK_TID & (HK_RED_GROUP - 1)) == 0) red[HK_TID / HK_RED_GROUP] = v;
  HK_SYNC();
  float s = 0.0f;
  for (int g = 0; g < HK_NTHREADS / HK_RED_GROUP; g++) s += red[g];
  return s;
}

HK_DEVICE float hk_block_max(float v, float *red) {
  for (int o = HK_RED_GROUP / 2; o > 0; o >>= 1) v = fmaxf(v, hk_shfl_xor(v, o));
  HK_SYNC();
  if ((HK_TID & (HK_RED_GROUP - 1)) == 0) red[HK_TID / HK_RED_GROUP] = v;
  HK_SYNC();
  float m = -hk_inf();
  for (int g = 0; g < HK_NTHREADS / HK_RED_GROUP; g++) m = fmaxf(m, red[g]);
  return m;
}

/* ---- rope ------------------------------------------------------------------------------- */
/* sin and cos of a float angle a, accurate for every |a| a position can reach: a is reduced
 * by the nearest multiple k of pi/2 in double precision (a has 24 significant bits and
 * k < 2^31 for |a| < 3e9, so r = a - k*pi/2 with pi/2 in two doubles is within ~1e-16 * k of
 * the true remainder), then Cephes' sinf / cosf minimax polynomials on r in [-pi/4, pi/4]
 * (~1 ulp) and the quadrant k mod 4. CUDA's sincosf would do as well but keeps a local-
 * memory array for its |a| > 105615 path (a stack frame in every rope kernel). */
HK_DEVICE void hk_rope_sincos(float a, float *out_s, float *out_c) {
  const double ad = (double)a;
  const double k = rint(ad * 0.63661977236758134308);
  double rd = fma(-k, 1.5707963267948965580e+00, ad);
  rd = fma(-k, 6.1232339957367658e-17, rd);
  const float r = (float)rd, r2 = r * r;
  const long long q = (long long)k;
  float s = fmaf(fmaf(fmaf(-1.9515295891e-4f, r2, 8.3321608736e-3f), r2, -1.6666654611e-1f), r2 * r, r);
  float c = fmaf(fmaf(fmaf(fmaf(2.443315711809948e-5f, r2, -1.388731625493765e-3f), r2, 4.166664568298827e-2f), r2,
                      -0.5f), r2, 1.0f);
  if (q & 1) {
    const float t = s;
    s = c;
    c = -t;
  }
  if (q & 2) {
    s = -s;
    c = -c;
  }
  *out_s = s;
  *out_c = c;
}

/* ---- float8 e4m3fn (quantized weights, FP8 KV caches) ----------------------------------------
 * Value (8 + m) 2^(e - 10) for exponent field e in 1..15, m 2^-9 for e = 0; S.1111.111 is NaN;
 * no infinities. The same conversions as templates/host/prelude.h's and libhkrt's. */
HK_DEVICE float hk_fp8_e4m3_to_f32(unsigned int b) {
  const unsigned int e = (b >> 3) & 15u, m = b & 7u;
  const float a = e == 15u && m == 7u ? __int_as_float(0x7fc00000) : e == 0u ? (float)m * 0x1p-9f
                                                                             : __int_as_float((int)((e + 120u) << 23 | m << 20));
  return b & 0x80u ? -a : a;
}
/* To nearest even, saturating at +-448 (infinities too); NaN stays NaN. */
HK_DEVICE unsigned char hk_f32_to_fp8_e4m3(float f) {
  const unsigned int u = __float_as_uint(f), sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned char)(sign | 0x7fu);  /* NaN */
  if (a >= 0x43e00000u) return (unsigned char)(sign | 0x7eu); /* >= 448: the largest finite */
  if (a < 0x3c800000u) /* below 2^-6: a subnormal m 2^-9 (m = 8 is the smallest normal's bits) */
    return (unsigned char)(sign | (unsigned int)rintf(__uint_as_float(a) * 512.0f));
  const unsigned int r = (a + 0x7ffffu + ((a >> 20) & 1u)) >> 20; /* exponent and 3 mantissa bits, rounded */
  const unsigned int v = r - (120u << 3);                          /* rebiased: 127 - 7 */
  return (unsigned char)(sign | (v > 0x7eu ? 0x7eu : v));
}
