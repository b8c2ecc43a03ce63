/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session_internal.h -- what tests may observe of a session beyond the public API.
 *
 * Bucket states (see session.c) are built lazily and reused; these hooks let
 * tests/unit/loader_test.c check that without timing anything.
 */
#ifndef HK_SESSION_INTERNAL_H
#define HK_SESSION_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "hk/hkrt.h"

/* Bucket states the session has built since it was created (a rebuild counts again). */
uint32_t hk_session_debug_builds(const hk_session_t *session);
/* The workspace arena of the current bucket's state; NULL when that state is not built
 * (yet) or has no arena. */
const void *hk_session_debug_arena(const hk_session_t *session);
/* The u32 semaphores (format 1.3) of the current bucket's state; NULL when that state is not
 * built (yet) or its graph has none. */
const uint32_t *hk_session_debug_semaphores(const hk_session_t *session);
/* The bucket-sized staging buffer of application tensor `name` in the current bucket's
 * state, where padded runs copy its rows; NULL when there is none. */
const void *hk_session_debug_staging(const hk_session_t *session, const char *name);
/* The buffer bound to application tensor `index` (hk_session_tensor_info's index): the
 * weights' own bytes, a session-owned copy or the caller's; NULL when none or out of range. */
const void *hk_session_debug_bound(const hk_session_t *session, uint32_t index);

/* Claims (hold) or releases the session as a state-changing call would, so a test can
 * check the BUSY answer without racing threads. Claiming returns false when it was held. */
bool hk_session_debug_hold(hk_session_t *session, bool hold);

/* ---- for session_weights.c (hk_session_bind_weights) ---- */
/* Whether `bytes` (read-only host memory that outlives the binding) can be bound as it is:
 * the session runs the host target (its buffers are host memory) and the address has the
 * alignment hk_session_bind requires. Else a copy in memory the session owns is bound. */
bool hk_session_binds_in_place(const hk_session_t *session, const void *bytes);
/* Binds data[k] to app tensor index[k] (hk_session_tensor_info's index) for k < n, each
 * buffer already checked (16-byte aligned, the tensor's size); owned[k]: the buffer came
 * from the session's allocator (hk_session_alloc) and the session frees it when the tensor is
 * rebound or the session destroyed. Memory the tensors owned before is freed. Errors: BUSY
 * (nothing bound). */
hk_status_t hk_session_bind_many(hk_session_t *session, uint32_t n, const uint32_t *index, void *const *data,
                                 const bool *owned);
/* Tensor parallelism: the shard record of app tensor `index` (NULL: whole on every rank), the
 * session's rank and the pack's ranks, and in *out_source the app index of the tensor whose
 * whole (checkpoint) tensor it slices (itself, or the param a `_shard` copy comes from). */
const hk_shard_rec_t *hk_session_tensor_shard(const hk_session_t *session, uint32_t index, uint32_t *out_rank,
                                              uint32_t *out_ranks, uint32_t *out_source);
/* ---- for generate.c ---- */
/* The pack a session runs and the allocator its memory comes from (the pack's). */
hk_pack_t *hk_session_pack(const hk_session_t *session);
const hk_allocator_t *hk_session_allocator(const hk_session_t *session);
/* Copies this thread's last error into the session's own message (hk_session_error). */
void hk_session_note_error(hk_session_t *session);

#endif /* HK_SESSION_INTERNAL_H */
