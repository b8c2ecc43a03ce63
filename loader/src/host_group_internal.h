/* SPDX-License-Identifier: Apache-2.0 */
/*
 * host_group_internal.h -- the collectives of the host target's communicator (host_group.c;
 * hkrt.h has the group's public calls). Each rank of the group calls each collective with its
 * own buffers, in the same order on every rank.
 */
#ifndef HK_HOST_GROUP_INTERNAL_H
#define HK_HOST_GROUP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "hk/hkrt.h"
#include "hk/pack_format.h"

/* out[i] = the sum over ranks of in_r[i], i < n, dtype f32 / f16 / bf16 (16-bit: summed in f32 in
 * rank order, rounded once). Errors: DRIVER (aborted, or the timeout ran out). */
hk_status_t hk_host_group_all_reduce(hk_host_group_t *group, uint32_t rank, uint32_t dtype, const void *in, void *out,
                                     uint64_t n);
/* out [rows, ranks * cols]: rank r's in [rows, cols] at columns r * cols ... Errors: as above. */
hk_status_t hk_host_group_all_gather(hk_host_group_t *group, uint32_t rank, size_t elem_bytes, const void *in,
                                     void *out, uint64_t rows, uint64_t cols);
uint32_t hk_host_group_ranks(const hk_host_group_t *group);

#endif /* HK_HOST_GROUP_INTERNAL_H */
