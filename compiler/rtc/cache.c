/* SPDX-License-Identifier: Apache-2.0 */
/* The compile cache: one self-checking file per entry, <dir>/<key>.hkcc.
 *
 * Entry layout (native byte order: a cache belongs to one machine):
 *   header  (cache_header_t below: magic with trap bytes, format version, header size,
 *            the key echoed, payload sizes, the resource fields, XXH3-64 checksum)
 *   request request_size bytes: the four fields the key hashes, each length-prefixed
 *   code    code_size bytes
 *   log     log_size bytes (no NUL)
 * The checksum covers the header (checksum field zeroed) and the payload, so a torn or
 * altered file of any kind is detected. An entry is bound to its request: a read
 * recomputes the key from the caller's request and needs the recorded key and the
 * recorded request to match it, so an entry copied under another key's name -- with the
 * key field rewritten and the checksum recomputed -- is still a miss (it records the other
 * request). The checksum is not a signature: the directory's permissions (hkc_cache_open)
 * keep other users from writing entries at all. Writers create a unique temporary file in the
 * cache directory and rename it over the entry: readers see the old entry, the new one
 * or none, never a half-written one, even with concurrent builds. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "rtc/rtc.h"
#include "util/util.h"

#define CACHE_MAGIC "HKCC\r\n\x1a\n" /* trap bytes catch text-mode and truncating transfers */
#define CACHE_VERSION 2u /* 2: the request recorded */
#define CACHE_KEY_HEX 32 /* XXH3-128 as hex */
/* An entry larger than this is not ours (the biggest code objects are a few MB). */
#define CACHE_MAX_PAYLOAD ((uint64_t)1 << 30)
#define CACHE_DIR_MAX 4000                 /* the cache directory's path */
#define CACHE_PATH_MAX (CACHE_DIR_MAX + 64) /* a file in it: "/<key>.hkcc.tmp.XXXXXX" */

typedef struct cache_header {
  char magic[8];
  uint32_t version;
  uint32_t header_size;
  char key[CACHE_KEY_HEX];
  uint64_t request_size;
  uint64_t code_size;
  uint64_t log_size;
  uint32_t vgprs, agprs, sgprs, shared_bytes, scratch_bytes, wave_size, max_block, reserved;
  uint64_t checksum;
} cache_header_t;

struct hkc_cache {
  char dir[CACHE_DIR_MAX];
};

/* mkdir -p path with mode 0700 for what it creates. 0 / -1 (errno). */
static int mkdir_p(const char *path) {
  char buf[CACHE_PATH_MAX];
  size_t n = strlen(path);
  if (n == 0 || n >= sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  memcpy(buf, path, n + 1);
  for (size_t i = 1; i <= n; i++) {
    if (buf[i] != '/' && buf[i] != '\0') continue;
    char c = buf[i];
    buf[i] = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return -1;
    buf[i] = c;
  }
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return -1;
  }
  return 0;
}

/* Whether the cache directory is the user's alone: owned by this user and not writable by
 * group or others. Anyone who can write entries chooses the code hkc packs (an entry's
 * checksum is no signature), so another's directory is not used; warns once per call. */
static int dir_private(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    hkc_warning((hkc_loc_t){0}, "compile cache %s: %s; building without it", path, strerror(errno));
    return 0;
  }
  if (st.st_uid != geteuid()) {
    hkc_warning((hkc_loc_t){0},
                "compile cache %s is owned by uid %u, not by this user (uid %u): not used, building without it",
                path, (unsigned)st.st_uid, (unsigned)geteuid());
    return 0;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    hkc_warning((hkc_loc_t){0},
                "compile cache %s is writable by %s (mode %03o): not used, building without it (chmod go-w it)",
                path, (st.st_mode & S_IWOTH) ? "others" : "its group", (unsigned)(st.st_mode & 0777));
    return 0;
  }
  return 1;
}

/* Contract in rtc.h. The directory is created if needed and must be writable (a probe
 * file is created and removed). */
hkc_cache_t *hkc_cache_open(const char *dir) {
  char path[CACHE_DIR_MAX];
  int n;
  if (!dir) dir = hkc_env_cache_dir(); /* the CLI's $HKC_CACHE_DIR / $XDG_CACHE_HOME / $HOME mapping */
  if (!dir) {
    hkc_warning((hkc_loc_t){0}, "no compile cache directory (set HKC_CACHE_DIR or HOME); building without it");
    return NULL;
  }
  n = snprintf(path, sizeof path, "%s", dir);
  if (n < 0 || (size_t)n >= sizeof path) {
    hkc_warning((hkc_loc_t){0}, "compile cache path too long; building without it");
    return NULL;
  }
  while (n > 1 && path[n - 1] == '/') path[--n] = '\0';
  if (mkdir_p(path) != 0) {
    hkc_warning((hkc_loc_t){0}, "compile cache %s: cannot create it: %s; building without it", path, strerror(errno));
    return NULL;
  }
  if (!dir_private(path)) return NULL;
  char probe[CACHE_PATH_MAX];
  snprintf(probe, sizeof probe, "%s/.probe.XXXXXX", path);
  int fd = mkstemp(probe);
  if (fd < 0) {
    hkc_warning((hkc_loc_t){0}, "compile cache %s: not writable: %s; building without it", path, strerror(errno));
    return NULL;
  }
  close(fd);
  unlink(probe);
  hkc_cache_t *c = calloc(1, sizeof *c);
  if (c) memcpy(c->dir, path, (size_t)n + 1);
  return c;
}

void hkc_cache_close(hkc_cache_t *cache) { free(cache); }

/* Appends one field, prefixed by its length (UINT64_MAX for NULL, so NULL and "" differ), to
 * buf (NULL: only counts). Returns the bytes it takes. */
static size_t put_field(char *buf, const char *s) {
  uint64_t len = s ? strlen(s) : UINT64_MAX;
  if (buf) {
    memcpy(buf, &len, sizeof len);
    if (s) memcpy(buf + sizeof len, s, (size_t)len);
  }
  return sizeof len + (s ? (size_t)len : 0);
}

/* The request's four fields, each length-prefixed, so ("ab","c") and ("a","bc") differ:
 * what the key hashes and what an entry records. malloc'd; NULL on OOM. */
static char *request_blob(const hkc_cache_request_t *r, size_t *out_size) {
  const char *f[4] = {r->source, r->options, r->target, r->toolchain};
  size_t size = 0;
  for (int i = 0; i < 4; i++) size += put_field(NULL, f[i]);
  char *buf = malloc(size);
  if (!buf) return NULL;
  for (size_t i = 0, at = 0; i < 4; i++) at += put_field(buf + at, f[i]);
  *out_size = size;
  return buf;
}

static const char k_key_domain[] = "hkc-cache-key-v1";

static void key_of_blob(const char *blob, size_t size, char out_hex[33]) {
  XXH3_state_t st;
  XXH3_128bits_reset(&st);
  XXH3_128bits_update(&st, k_key_domain, sizeof k_key_domain - 1);
  XXH3_128bits_update(&st, blob, size);
  XXH128_hash_t h = XXH3_128bits_digest(&st);
  snprintf(out_hex, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

/* XXH3-128 over a domain string and the request blob. */
void hkc_cache_key(const char *source, const char *options, const char *target, const char *toolchain,
                   char out_hex[33]) {
  hkc_cache_request_t r = {source, options, target, toolchain};
  size_t size;
  char *blob = request_blob(&r, &size);
  if (!blob) {
    memset(out_hex, '0', 32); /* never a valid entry: get and put refuse on OOM themselves */
    out_hex[32] = '\0';
    return;
  }
  key_of_blob(blob, size, out_hex);
  free(blob);
}

static uint64_t entry_checksum(const cache_header_t *h, const void *payload, size_t size) {
  cache_header_t copy = *h;
  copy.checksum = 0;
  XXH3_state_t st;
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, &copy, sizeof copy);
  XXH3_64bits_update(&st, payload, size);
  return XXH3_64bits_digest(&st);
}

/* Whether the entry in data (size bytes) is whole and bound to the request: magic,
 * version, sizes, the recorded key and request equal to the caller's, the checksum. */
static int entry_ok(const char *data, size_t size, const char *key, const char *blob, size_t blob_size,
                    cache_header_t *h) {
  if (size < sizeof *h) return 0;
  memcpy(h, data, sizeof *h);
  size_t payload = size - sizeof *h;
  return memcmp(h->magic, CACHE_MAGIC, sizeof h->magic) == 0 && h->version == CACHE_VERSION &&
         h->header_size == sizeof *h && memcmp(h->key, key, CACHE_KEY_HEX) == 0 &&
         h->request_size == blob_size && h->code_size <= CACHE_MAX_PAYLOAD && h->log_size <= CACHE_MAX_PAYLOAD &&
         h->request_size <= payload && h->code_size + h->log_size == payload - h->request_size &&
         h->code_size > 0 && memcmp(data + sizeof *h, blob, blob_size) == 0 &&
         entry_checksum(h, data + sizeof *h, payload) == h->checksum;
}

/* Contract in rtc.h. Any mismatch (size, magic, version, key, request, checksum) is a miss,
 * and the bad file is removed so the next put replaces it. */
int hkc_cache_get(hkc_cache_t *cache, const hkc_cache_request_t *request, hkc_rtc_result_t *out) {
  memset(out, 0, sizeof *out);
  if (!cache || !request) return -1;
  size_t blob_size;
  char *blob = request_blob(request, &blob_size), key[CACHE_KEY_HEX + 1];
  if (!blob) return -1;
  key_of_blob(blob, blob_size, key); /* the key always comes from the request */
  char path[CACHE_PATH_MAX];
  snprintf(path, sizeof path, "%s/%.32s.hkcc", cache->dir, key);
  char *data = NULL;
  size_t size = 0;
  cache_header_t h;
  /* absent: a plain miss; no entry is near the cap (a device or FIFO here is refused) */
  if (hkc_read_file_max(path, sizeof h + blob_size + 2 * CACHE_MAX_PAYLOAD, &data, &size) != 0) {
    free(blob);
    return -1;
  }
  int ok = entry_ok(data, size, key, blob, blob_size, &h);
  free(blob);
  if (!ok) {
    free(data);
    unlink(path);
    return -1;
  }
  const char *code = data + sizeof h + h.request_size;
  out->code = malloc((size_t)h.code_size);
  out->log = h.log_size ? malloc((size_t)h.log_size + 1) : NULL;
  if (!out->code || (h.log_size && !out->log)) {
    free(data);
    hkc_rtc_result_free(out);
    return -1;
  }
  memcpy(out->code, code, (size_t)h.code_size);
  out->code_size = (size_t)h.code_size;
  if (out->log) {
    memcpy(out->log, code + h.code_size, (size_t)h.log_size);
    out->log[h.log_size] = '\0';
  }
  out->vgprs = h.vgprs;
  out->agprs = h.agprs;
  out->sgprs = h.sgprs;
  out->shared_bytes = h.shared_bytes;
  out->scratch_bytes = h.scratch_bytes;
  out->wave_size = h.wave_size;
  out->max_block = h.max_block;
  free(data);
  return 0;
}

/* Contract in rtc.h. Best effort: a failed write leaves no entry (and no temporary). */
void hkc_cache_put(hkc_cache_t *cache, const hkc_cache_request_t *request, const hkc_rtc_result_t *result) {
  if (!cache || !request || !result || !result->code || result->code_size == 0 ||
      result->code_size > CACHE_MAX_PAYLOAD)
    return;
  size_t log_size = result->log ? strlen(result->log) : 0;
  if (log_size > CACHE_MAX_PAYLOAD) log_size = 0;
  size_t blob_size;
  char *blob = request_blob(request, &blob_size), key[CACHE_KEY_HEX + 1];
  if (!blob) return;
  key_of_blob(blob, blob_size, key);
  size_t payload = blob_size + result->code_size + log_size;
  char *buf = malloc(payload);
  if (!buf) {
    free(blob);
    return;
  }
  memcpy(buf, blob, blob_size);
  memcpy(buf + blob_size, result->code, result->code_size);
  if (log_size) memcpy(buf + blob_size + result->code_size, result->log, log_size);
  free(blob);

  cache_header_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, CACHE_MAGIC, sizeof h.magic);
  h.version = CACHE_VERSION;
  h.header_size = sizeof h;
  memcpy(h.key, key, CACHE_KEY_HEX);
  h.request_size = blob_size;
  h.code_size = result->code_size;
  h.log_size = log_size;
  h.vgprs = result->vgprs;
  h.agprs = result->agprs;
  h.sgprs = result->sgprs;
  h.shared_bytes = result->shared_bytes;
  h.scratch_bytes = result->scratch_bytes;
  h.wave_size = result->wave_size;
  h.max_block = result->max_block;
  h.checksum = entry_checksum(&h, buf, payload);

  char path[CACHE_PATH_MAX];
  snprintf(path, sizeof path, "%s/%.32s.hkcc", cache->dir, key);
  hkc_chunk_t chunks[2] = {{&h, sizeof h}, {buf, payload}};
  (void)hkc_file_replace(path, chunks, 2, 0666, NULL, 0); /* best effort: a failure leaves no entry */
  free(buf);
}
