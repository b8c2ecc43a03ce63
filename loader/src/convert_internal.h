/* SPDX-License-Identifier: Apache-2.0 */
/*
 * convert_internal.h -- float32 / float16 / bfloat16 element conversions (convert.c), rounding
 * to nearest even. The one copy in the code base: libhkrt converts checkpoint tensors of
 * another float dtype when it binds them (session_weights.c) and widens logits (generate.c);
 * hkc reaches them through compiler/util/half.c (the compiler includes loader internals, never
 * the other way round), so the loader and the compiler round the same way.
 */
#ifndef HK_CONVERT_INTERNAL_H
#define HK_CONVERT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hk/hkrt.h"

/* IEEE binary16. A finite value of magnitude 65520 or more becomes inf (65504 is the largest
 * finite half; round to nearest even takes (65504, 65520) down to it); below the smallest
 * subnormal (2^-24) it rounds to a signed zero through the subnormals; NaN stays a quiet NaN
 * (its payload is dropped), inf stays inf. */
uint16_t hk_f32_to_f16(float f);
float hk_f16_to_f32(uint16_t h); /* exact */
/* bfloat16: float32's exponent range, 8 significant bits. A finite value of magnitude
 * 0x1.ffp127 (3.3961e38) or more becomes inf; subnormals round like any other value; NaN stays a
 * quiet NaN with its sign and top payload bits. */
uint16_t hk_f32_to_bf16(float f);
float hk_bf16_to_f32(uint16_t h); /* exact */
/* float8 e4m3fn (HK_ELEMENT_FP8_E4M3): 4 exponent bits of bias 7, 3 mantissa bits, no infinities,
 * S.1111.111 NaN; largest finite 448, smallest subnormal 2^-9. To fp8: round to nearest even,
 * magnitudes from 448 up (infinity included) saturate to +-448, NaN becomes 0x7f. */
uint8_t hk_f32_to_fp8_e4m3(float f);
float hk_fp8_e4m3_to_f32(uint8_t b); /* exact */

/* Whether elements of type `from` convert to `to`: both f32, f16 or bf16 (the same type too). */
bool hk_convert_supported(hk_element_type_t from, hk_element_type_t to);
/* dst (count elements of `to`) from src (count elements of `from`), as the functions above
 * round: f16 <-> bf16 goes through f32, which holds both exactly, so each element is rounded
 * once. Any alignment; dst and src must not overlap. */
void hk_convert(void *dst, hk_element_type_t to, const void *src, hk_element_type_t from, size_t count);
/* The index of the first element of src (count elements of `from`) that is finite but becomes
 * infinite in `to` (too large for it), or count when there is none. */
size_t hk_convert_find_overflow(const void *src, hk_element_type_t from, hk_element_type_t to, size_t count);
/* Element i of src, of type f32, f16 or bf16, as a float (for messages). */
float hk_convert_load(const void *src, hk_element_type_t type, size_t i);

#endif /* HK_CONVERT_INTERNAL_H */
