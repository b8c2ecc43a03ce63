/* SPDX-License-Identifier: Apache-2.0 */
/* float16 / bfloat16 <-> float32 conversions (hkc run and hkc tune fill and read tensors
 * with them; hkc build --weights converts checkpoints through the loader's hk_convert). The
 * rounding is written once, in libhkrt (loader/src/convert.c), which binds checkpoints of
 * another dtype with it: these are its names on the compiler's side. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "convert_internal.h" /* loader/src: the compiler may use the loader's internals */
#include "util/util.h"

uint16_t hkc_f32_to_f16(float f) { return hk_f32_to_f16(f); }
float hkc_f16_to_f32(uint16_t h) { return hk_f16_to_f32(h); }
uint16_t hkc_f32_to_bf16(float f) { return hk_f32_to_bf16(f); }
float hkc_bf16_to_f32(uint16_t h) { return hk_bf16_to_f32(h); }
uint8_t hkc_f32_to_fp8_e4m3(float f) { return hk_f32_to_fp8_e4m3(f); }
float hkc_fp8_e4m3_to_f32(uint8_t b) { return hk_fp8_e4m3_to_f32(b); }

float hkc_load_elem(const void *buf, int type, size_t i) {
  if (type == 0) return ((const float *)buf)[i];
  if (type == 1) return hkc_f16_to_f32(((const uint16_t *)buf)[i]);
  if (type == 3) return (float)((const int32_t *)buf)[i]; /* i32 */
  if (type == 4) return (float)((const int8_t *)buf)[i]; /* int8 */
  if (type == 5) return hkc_fp8_e4m3_to_f32(((const uint8_t *)buf)[i]);
  return hkc_bf16_to_f32(((const uint16_t *)buf)[i]);
}

void hkc_store_elem(void *buf, int type, size_t i, float v) {
  if (type == 0) ((float *)buf)[i] = v;
  else if (type == 1) ((uint16_t *)buf)[i] = hkc_f32_to_f16(v);
  else if (type == 3) ((int32_t *)buf)[i] = v >= 2147483520.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)lrintf(v);
  else if (type == 4) ((int8_t *)buf)[i] = v >= 127.0f ? 127 : v <= -128.0f ? -128 : (int8_t)lrintf(v);
  else if (type == 5) ((uint8_t *)buf)[i] = hkc_f32_to_fp8_e4m3(v);
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
