/* SPDX-License-Identifier: Apache-2.0 */
/* float16 / bfloat16 <-> float32 conversions (hkc run and hkc tune fill and read tensors
 * with them). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "util/util.h"

uint16_t hkc_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  if (exp == 0xff) return sign | 0x7c00 | (man ? 0x200 : 0); /* inf / quiet NaN */
  int e = (int)exp - 127 + 15;
  if (e >= 31) return sign | 0x7c00;
  if (e <= 0) { /* subnormal or zero in f16 */
    if (e < -10) return sign;
    man |= 0x800000;
    int shift = 14 - e; /* 24-bit significand down to the 10-bit subnormal field */
    uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return sign | (uint16_t)half;
  }
  uint32_t half = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* may carry into inf: correct */
  return sign | (uint16_t)half;
}

float hkc_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, x;
  if (exp == 0x1f) x = sign | 0x7f800000 | (man << 13);
  else if (exp) x = sign | ((exp + 112) << 23) | (man << 13);
  else if (!man) x = sign;
  else { /* subnormal: normalise */
    int e = -1;
    do { man <<= 1; e++; } while (!(man & 0x400));
    x = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
  }
  float f;
  memcpy(&f, &x, 4);
  return f;
}

uint16_t hkc_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* NaN stays NaN */
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

float hkc_bf16_to_f32(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

float hkc_load_elem(const void *buf, int type, size_t i) {
  if (type == 0) return ((const float *)buf)[i];
  if (type == 1) return hkc_f16_to_f32(((const uint16_t *)buf)[i]);
  if (type == 3) return (float)((const int32_t *)buf)[i]; /* i32 */
  return hkc_bf16_to_f32(((const uint16_t *)buf)[i]);
}

void hkc_store_elem(void *buf, int type, size_t i, float v) {
  if (type == 0) ((float *)buf)[i] = v;
  else if (type == 1) ((uint16_t *)buf)[i] = hkc_f32_to_f16(v);
  else if (type == 3) ((int32_t *)buf)[i] = v >= 2147483520.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)lrintf(v);
  else ((uint16_t *)buf)[i] = hkc_f32_to_bf16(v);
}

uint64_t hkc_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double hkc_uniform_pm(uint64_t *state, double scale) {
  const double u = (double)(hkc_splitmix64(state) >> 11) * (1.0 / 9007199254740992.0); /* [0, 1) */
  return (2.0 * u - 1.0) * scale;
}
