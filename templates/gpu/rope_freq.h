/* SPDX-License-Identifier: Apache-2.0 */
/* rope_freq.h: a rope's angles, shared by the rope kernel (rope.hip) and the kv_append that a
 * rope was folded into (kv_append.hip): pair j of a head of dh at position p turns by
 * p * inv_freq(j), inv_freq = theta^(-2j/dh) rewritten by HK_ROPE_SCALING (0 none, 1 linear,
 * 2 llama3: frontend.h's HKC_ROPE_SCALING_*), all in f32 as Hugging Face computes them; sin
 * and cos by hk_rope_sincos (common.h). */
#ifndef HK_ROPE_SCALING
#define HK_ROPE_SCALING 0 /* HKC_ROPE_SCALING_*: 0 none, 1 linear, 2 llama3 */
#endif

/* The frequency rewrite's arguments (HK_ROPE_SCALING; unused without it). */
struct rope_scaling {
  float factor, low_freq, high_freq, original_max;
};

/* A product Hugging Face's f32 torch code rounds on its own: never contracted into an fma
 * (nvrtc contracts a * b + c by default; clang is told not to where this is used). */
#ifdef __CUDACC_RTC__
#define ROPE_MUL(a, b) __fmul_rn(a, b)
#else
#define ROPE_MUL(a, b) ((a) * (b))
#endif

/* A pair's inv_freq rewritten as HK_ROPE_SCALING says (frontend.h's
 * HKC_ROPE_SCALING_*), in f32 step by step as transformers computes it on the CPU:
 *   linear  inv / factor
 *   llama3  (_compute_llama3_parameters) wavelength w = 2 pi / inv, which torch evaluates as
 *           reciprocal(inv) * f32(2 pi); the bounds original_max / low_freq and / high_freq are
 *           Python doubles compared in f32; w < the high bound: inv; w > the low bound:
 *           inv / factor; between, s = (original_max / w - low_freq) / (high_freq - low_freq)
 *           (original_max / w again as reciprocal(w) * original_max, the divisor a double)
 *           and (1 - s) inv / factor + s inv. */
HK_DEVICE float rope_scaled_freq(float inv, const rope_scaling &sc) {
#if HK_ROPE_SCALING == 2 && !defined(__CUDACC_RTC__)
#pragma clang fp contract(off)
#endif
#if HK_ROPE_SCALING == 1
  return inv / sc.factor;
#elif HK_ROPE_SCALING == 2
  const float w = ROPE_MUL(1.0f / inv, 6.28318530717958648f);
  const float high_w = (float)((double)sc.original_max / (double)sc.high_freq);
  const float low_w = (float)((double)sc.original_max / (double)sc.low_freq);
  if (w < high_w) return inv;
  if (w > low_w) return inv / sc.factor;
  const float s = (ROPE_MUL(1.0f / w, sc.original_max) - sc.low_freq) /
                  (float)((double)sc.high_freq - (double)sc.low_freq);
  return ROPE_MUL(1.0f - s, inv) / sc.factor + ROPE_MUL(s, inv);
#else
  (void)sc;
  return inv;
#endif
}

/* Element x of a head turned against its partner y (x + dh / 2 when lo, the first half; else
 * x - dh / 2): x cos - y sin when lo, else x cos + y sin. One explicit form (no contraction left
 * to the compiler), so every kernel that turns a row the way kv_append does gets its bits. */
HK_DEVICE float rope_turn(float x, float y, float cs, float sn, bool lo) {
  const float ys = ROPE_MUL(y, sn);
  return fmaf(x, cs, lo ? -ys : ys);
}

/* The sine and cosine of pair j's angle at position p (a head of dh elements). */
HK_DEVICE void rope_angle(float p, long long j, long long dh, float theta, const rope_scaling &sc, float *sn, float *cs) {
  hk_rope_sincos(p * rope_scaled_freq(powf(theta, -(float)(2 * j) / (float)dh), sc), sn, cs);
}

