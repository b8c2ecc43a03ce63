/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/rtc/cache_remote.h -- the shared second level of the compile cache (cache_remote.c):
 * entries, byte for byte as the local cache stores them, in a Redis server that several
 * machines' builds share (HKC_CACHE_URL=redis://host[:port][/db]). Used by cache.c only.
 *
 * Never fails a build: every call is bounded by the timeout (connect and each command), and
 * the first failure of any kind (unreachable, refused, slow, a dropped connection, an error
 * reply) prints ONE warning and turns the remote off for the rest of the process, so a build
 * is never slower than a cold one by more than one timeout. The bytes it returns are
 * untrusted: cache.c checks them exactly as a local entry. Thread-safe (one connection,
 * locked). Without hiredis at build time, opening one warns and returns NULL.
 */
#ifndef HKC_CACHE_REMOTE_H
#define HKC_CACHE_REMOTE_H

#include <stddef.h>

#define HKC_REMOTE_TIMEOUT_MS_DEFAULT 200

typedef struct hkc_remote_cache hkc_remote_cache_t;

/* url NULL or "": NULL, silently. A URL that does not parse: one warning, NULL. Connects on
 * first use. timeout_ms <= 0: the default. */
hkc_remote_cache_t *hkc_remote_cache_open(const char *url, int timeout_ms);
void hkc_remote_cache_close(hkc_remote_cache_t *remote); /* NULL: no-op */
/* The entry stored under key (at most max bytes) into a malloc'd buffer: 0, or -1 (absent,
 * too large, or the remote is off). */
int hkc_remote_cache_get(hkc_remote_cache_t *remote, const char *key, size_t max, char **out_data,
                         size_t *out_size);
/* Stores the concatenation of parts under key. Best effort. */
void hkc_remote_cache_set(hkc_remote_cache_t *remote, const char *key, const void *const *parts,
                          const size_t *sizes, size_t n_parts);
/* The URL as given (for messages); "" for NULL. */
const char *hkc_remote_cache_url(const hkc_remote_cache_t *remote);

#endif /* HKC_CACHE_REMOTE_H */
