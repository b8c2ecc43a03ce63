/* SPDX-License-Identifier: Apache-2.0 */
/* Status names, the thread-local error message, allocator hooks and exact reads. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "status_internal.h"
#include "util_internal.h"

static _Thread_local char tls_error[HK_ERROR_MAX];

HK_API const char *hk_status_string(hk_status_t status) {
  switch (status) {
  case HK_OK: return "OK";
  case HK_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
  case HK_STATUS_NOT_FOUND: return "NOT_FOUND";
  case HK_STATUS_CORRUPT: return "CORRUPT";
  case HK_STATUS_UNSUPPORTED_VERSION: return "UNSUPPORTED_VERSION";
  case HK_STATUS_UNAVAILABLE: return "UNAVAILABLE";
  case HK_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
  case HK_STATUS_IO: return "IO";
  case HK_STATUS_NO_COMPATIBLE_TARGET: return "NO_COMPATIBLE_TARGET";
  case HK_STATUS_DRIVER: return "DRIVER";
  case HK_STATUS_FAILED_PRECONDITION: return "FAILED_PRECONDITION";
  case HK_STATUS_INTERNAL: return "INTERNAL";
  case HK_STATUS_BUSY: return "BUSY";
  case HK_STATUS_UNTRUSTED: return "UNTRUSTED";
  case HK_STATUS_COUNT_: break;
  }
  return "UNKNOWN_STATUS";
}

HK_API const char *hk_last_error(void) { return tls_error; }

/* The one escaping of libhkrt's messages. They quote bytes from untrusted files (names in a
 * checkpoint, map entries, paths) and end up on terminals and in logs: every control byte (an
 * ESC sequence, a newline that forges a log line, DEL) is written as \xNN, so the message shows
 * what the file holds and a terminal acts on none of it. In place, cut to the buffer (size
 * bytes with the NUL). */
static void escape_message(char *msg, size_t size) {
  char tmp[HK_ERROR_MAX];
  size_t o = 0;
  for (const unsigned char *p = (const unsigned char *)msg; *p && o + 1 < sizeof tmp; p++) {
    if (*p >= 0x20 && *p != 0x7f) tmp[o++] = (char)*p;
    else if (o + 5 < sizeof tmp) o += (size_t)snprintf(tmp + o, sizeof tmp - o, "\\x%02x", *p);
    else break;
  }
  tmp[o] = '\0';
  snprintf(msg, size, "%s", tmp);
}

hk_status_t hk_error_set_at(hk_status_t code, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tls_error, sizeof tls_error, fmt, ap);
  va_end(ap);
  escape_message(tls_error, sizeof tls_error);
#ifndef NDEBUG
  if (n >= 0 && (size_t)n < sizeof tls_error) {
    const char *base = strrchr(file, '/');
    snprintf(tls_error + n, sizeof tls_error - (size_t)n, " [%s:%d]", base ? base + 1 : file, line);
  }
#else
  (void)n;
  (void)file;
  (void)line;
#endif
  return code;
}

void hk_error_prefix(const char *prefix) {
  char tmp[HK_ERROR_MAX];
  if (snprintf(tmp, sizeof tmp, "%s: %s", prefix, tls_error) < 0) return; /* truncation is fine */
  memcpy(tls_error, tmp, sizeof tls_error);
  escape_message(tls_error, sizeof tls_error);
}

void hk_error_copy(char *dst, size_t size) {
  if (size == 0) return;
  snprintf(dst, size, "%s", tls_error);
}

void hk_error_clear(void) { tls_error[0] = '\0'; }

void *hk_alloc(const hk_allocator_t *allocator, size_t size) {
  if (allocator && allocator->alloc) return allocator->alloc(allocator->ctx, size);
  return malloc(size);
}

void *hk_calloc(const hk_allocator_t *allocator, size_t count, size_t size) {
  uint64_t total;
  if (!hk_mul_u64(count, size, &total) || total > SIZE_MAX) return NULL;
  void *p = hk_alloc(allocator, total ? (size_t)total : 1);
  if (p) memset(p, 0, total ? (size_t)total : 1);
  return p;
}

void hk_free(const hk_allocator_t *allocator, void *ptr) {
  if (!ptr) return;
  if (allocator && allocator->alloc) allocator->free(allocator->ctx, ptr);
  else free(ptr);
}

hk_status_t hk_read_exact(int fd, void *dst, size_t size, const char *path) {
  for (size_t got = 0; got < size;) {
    ssize_t n = read(fd, (char *)dst + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    HK_FAIL_IF(n < 0, HK_STATUS_IO, "cannot read %s: %s", path, hk_errno_text(errno));
    HK_FAIL_IF(n == 0, HK_STATUS_IO, "cannot read %s: it shrank while being read (%zu of %zu bytes)", path, got,
               size);
    got += (size_t)n;
  }
  return HK_OK;
}
