/* SPDX-License-Identifier: Apache-2.0 */
/*
 * status_internal.h -- how the loader reports errors.
 *
 * A failing function records a message in a thread-local buffer (hk_last_error())
 * and returns a status code. Objects copy that message into their own buffer when
 * a call on them fails (hk_pack_error(), hk_session_error()). Debug builds append
 * the loader's file:line to every message.
 *
 *   HK_FAIL_IF(cond, CODE, fmt, ...)   if cond: record the message, return CODE
 *   HK_RETURN_IF_ERROR(expr)           propagate a non-OK status (message already set)
 *   HK_ERROR(CODE, fmt, ...)           record the message, evaluate to CODE (for goto-cleanup paths)
 */
#ifndef HK_STATUS_INTERNAL_H
#define HK_STATUS_INTERNAL_H

#include <stddef.h>

#include "hk/hkrt.h"

/* Longest message kept; lists of names are cut to fit (with "..."). */
#define HK_ERROR_MAX 1024

hk_status_t hk_error_set_at(hk_status_t code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Prepends "prefix: " to the current thread's message. */
void hk_error_prefix(const char *prefix);
/* Copies the current thread's message into dst (an object's own error buffer). */
void hk_error_copy(char *dst, size_t size);
/* Clears the current thread's message (start of a public call that may fail). */
void hk_error_clear(void);

#define HK_ERROR(code, ...) hk_error_set_at((code), __FILE__, __LINE__, __VA_ARGS__)

#define HK_FAIL_IF(cond, code, ...)                                  \
  do {                                                               \
    if (cond) return hk_error_set_at((code), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define HK_RETURN_IF_ERROR(expr)          \
  do {                                    \
    hk_status_t hk_status_ = (expr);      \
    if (hk_status_ != HK_OK) return hk_status_; \
  } while (0)

#endif /* HK_STATUS_INTERNAL_H */
