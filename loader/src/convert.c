/* SPDX-License-Identifier: Apache-2.0 */
/*
 * convert.c -- float32 / float16 / bfloat16 conversions, round to nearest even
 * (convert_internal.h). Bit manipulation only: no dependence on the FPU's rounding mode,
 * flush-to-zero or the host's half-precision support.
 */
#include <math.h>
#include <string.h>

#include "convert_internal.h"

static uint32_t f32_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  return x;
}

static float bits_f32(uint32_t x) {
  float f;
  memcpy(&f, &x, 4);
  return f;
}

uint16_t hk_f32_to_f16(float f) {
  const uint32_t x = f32_bits(f);
  const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  const uint32_t exp = (x >> 23) & 0xffu;
  uint32_t man = x & 0x7fffffu;
  if (exp == 0xff) return sign | 0x7c00u | (man ? 0x200u : 0); /* inf / quiet NaN */
  const int e = (int)exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00u;
  if (e <= 0) { /* a subnormal half, or zero */
    if (e < -10) return sign; /* below half the smallest subnormal (f32 subnormals too) */
    man |= 0x800000u;
    const int shift = 14 - e; /* the 24-bit significand down to the 10-bit subnormal field */
    uint32_t half = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++; /* may carry into the smallest normal */
    return sign | (uint16_t)half;
  }
  uint32_t half = ((uint32_t)e << 10) | (man >> 13);
  const uint32_t rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) half++; /* may carry into inf: correct */
  return sign | (uint16_t)half;
}

float hk_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13));
  if (exp) return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
  if (!man) return bits_f32(sign);
  uint32_t e = 113; /* a subnormal: normalise */
  while (!(man & 0x400u)) man <<= 1, e--;
  return bits_f32(sign | (e << 23) | ((man & 0x3ffu) << 13));
}

uint16_t hk_f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* NaN stays a (quiet) NaN */
  x += 0x7fffu + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

float hk_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* e4m3fn: value (8 + m) 2^(e - 10) for exponent field e in 1..15, m 2^-9 for e = 0 (subnormal);
 * S.1111.111 is NaN. Both directions are exact in float. */
float hk_fp8_e4m3_to_f32(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  const float a = e == 15 && m == 7 ? NAN : e == 0 ? ldexpf((float)m, -9) : ldexpf((float)(8 + m), e - 10);
  return b & 0x80 ? -a : a;
}

uint8_t hk_f32_to_fp8_e4m3(float f) {
  if (isnan(f)) return 0x7f;
  const uint8_t sign = signbit(f) ? 0x80 : 0;
  const float a = fabsf(f);
  if (a >= 448.0f) return sign | 0x7e; /* saturates: the largest finite value */
  if (a < 0x1p-6f) /* subnormal: m 2^-9, m = 8 rounding up is the smallest normal's bits (0x08) */
    return sign | (uint8_t)rintf(a * 512.0f);
  int ex;
  (void)frexpf(a, &ex);                 /* a = fr 2^ex, fr in [0.5, 1): 8 <= a 2^(4 - ex) < 16 */
  int q = (int)rintf(ldexpf(a, 4 - ex)); /* 8..16, to nearest even (the default rounding mode) */
  int e = ex + 6;                       /* 1..15 */
  if (q == 16) q = 8, e++;
  if (e > 15 || (e == 15 && q > 14)) return sign | 0x7e; /* rounded past 448 */
  return sign | (uint8_t)(e << 3 | (q - 8));
}

static bool is_float(hk_element_type_t t) {
  return t == HK_ELEMENT_F32 || t == HK_ELEMENT_F16 || t == HK_ELEMENT_BF16;
}

bool hk_convert_supported(hk_element_type_t from, hk_element_type_t to) { return is_float(from) && is_float(to); }

float hk_convert_load(const void *src, hk_element_type_t type, size_t i) {
  if (type == HK_ELEMENT_F32) {
    float f;
    memcpy(&f, (const uint8_t *)src + 4 * i, 4);
    return f;
  }
  uint16_t h;
  memcpy(&h, (const uint8_t *)src + 2 * i, 2);
  return type == HK_ELEMENT_F16 ? hk_f16_to_f32(h) : hk_bf16_to_f32(h);
}

static void store(void *dst, hk_element_type_t type, size_t i, float v) {
  if (type == HK_ELEMENT_F32) {
    memcpy((uint8_t *)dst + 4 * i, &v, 4);
    return;
  }
  const uint16_t h = type == HK_ELEMENT_F16 ? hk_f32_to_f16(v) : hk_f32_to_bf16(v);
  memcpy((uint8_t *)dst + 2 * i, &h, 2);
}

void hk_convert(void *dst, hk_element_type_t to, const void *src, hk_element_type_t from, size_t count) {
  if (from == to) {
    memcpy(dst, src, count * (from == HK_ELEMENT_F32 ? 4 : 2));
    return;
  }
  for (size_t i = 0; i < count; i++) store(dst, to, i, hk_convert_load(src, from, i));
}

size_t hk_convert_find_overflow(const void *src, hk_element_type_t from, hk_element_type_t to, size_t count) {
  /* f32 holds f16 and bf16, and bf16 holds every f16: only f32 -> f16 / bf16 and bf16 -> f16
   * can overflow */
  if (to == HK_ELEMENT_F32 || from == to || (from == HK_ELEMENT_F16 && to == HK_ELEMENT_BF16)) return count;
  for (size_t i = 0; i < count; i++) {
    const uint32_t x = f32_bits(hk_convert_load(src, from, i));
    if ((x & 0x7f800000u) == 0x7f800000u) continue; /* inf or NaN already */
    const uint16_t h = to == HK_ELEMENT_F16 ? hk_f32_to_f16(bits_f32(x)) : hk_f32_to_bf16(bits_f32(x));
    if ((h & 0x7fffu) == (to == HK_ELEMENT_F16 ? 0x7c00u : 0x7f80u)) return i;
  }
  return count;
}
