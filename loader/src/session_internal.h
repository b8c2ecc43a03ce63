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

/* Claims (hold) or releases the session as a state-changing call would, so a test can
 * check the BUSY answer without racing threads. Claiming returns false when it was held. */
bool hk_session_debug_hold(hk_session_t *session, bool hold);

#endif /* HK_SESSION_INTERNAL_H */
