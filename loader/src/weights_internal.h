/* SPDX-License-Identifier: Apache-2.0 */
/*
 * weights_internal.h -- what session_weights.c (binding) needs of a weights object beyond
 * the public accessors.
 */
#ifndef HK_WEIGHTS_INTERNAL_H
#define HK_WEIGHTS_INTERNAL_H

#include "hk/hkrt.h"

/* The allocator the weights were opened with (libc when zero). */
const hk_allocator_t *hk_weights_allocator(const hk_weights_t *weights);
/* "F32", "BF16", ...; "?" outside the enum. */
const char *hk_weights_dtype_name(hk_weights_dtype_t dtype);

#endif /* HK_WEIGHTS_INTERNAL_H */
