/* SPDX-License-Identifier: Apache-2.0 */
/*
 * util_internal.h -- overflow-safe arithmetic and the allocator hooks.
 *
 * Every offset, length and count read from an artifact goes through the checked
 * helpers below before it is used. All loader memory comes from hk_alloc/hk_free,
 * which call the application's hk_allocator_t or, when it is zero, libc.
 */
#ifndef HK_UTIL_INTERNAL_H
#define HK_UTIL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hk/hkrt.h"

static inline bool hk_add_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool hk_mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }

/* True when [offset, offset + length) lies within [0, limit). */
static inline bool hk_range_ok(uint64_t offset, uint64_t length, uint64_t limit) {
  uint64_t end;
  return hk_add_u64(offset, length, &end) && end <= limit;
}

/* NULL on failure (or when size is 0 and the allocator says so). */
void *hk_alloc(const hk_allocator_t *allocator, size_t size);
/* Zeroed array of count elements; NULL on overflow or failure. */
void *hk_calloc(const hk_allocator_t *allocator, size_t count, size_t size);
void hk_free(const hk_allocator_t *allocator, void *ptr);

/* Reads exactly size bytes of fd into dst (EINTR retried); a read error or a file that ends
 * early is an HK_STATUS_IO naming path (the pack and weights readers). */
hk_status_t hk_read_exact(int fd, void *dst, size_t size, const char *path);

/* ---- files (file.c) ---- */
/* Opens path for reading without blocking (O_NONBLOCK | O_CLOEXEC: a FIFO opens at once),
 * refuses it unless fstat of that descriptor says it is a regular file, then clears
 * O_NONBLOCK. *out_fd (the caller closes it) and *out_size, or HK_STATUS_IO with the message
 * "cannot open PATH: not a regular file (a FIFO)" (a directory, a device, a socket), or the
 * open's own reason. */
hk_status_t hk_file_open_input(const char *path, int *out_fd, uint64_t *out_size);
/* The text of an errno value; never "Unknown error N" (an unknown value is "unexpected error
 * code N"). Thread-safe. */
const char *hk_errno_text(int err);

#endif /* HK_UTIL_INTERNAL_H */
