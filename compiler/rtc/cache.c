/* The compile cache: one self-checking file per entry, <dir>/<key>.hkcc.
 *
 * Entry layout (native byte order: a cache belongs to one machine):
 *   header  (cache_header_t below: magic with trap bytes, format version, header size,
 *            the key echoed, payload sizes, the resource fields, XXH3-64 checksum)
 *   code    code_size bytes
 *   log     log_size bytes (no NUL)
 * The checksum covers the header (checksum field zeroed) and the payload, so a torn or
 * altered file of any kind is detected. Writers create a unique temporary file in the
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
#define CACHE_VERSION 1u
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

/* Contract in rtc.h. The directory is created if needed and must be writable (a probe
 * file is created and removed). */
hkc_cache_t *hkc_cache_open(const char *dir) {
  char path[CACHE_DIR_MAX];
  int n;
  if (!dir) dir = hkc_env_cache_dir(); /* the CLI's $HKC_CACHE_DIR / $XDG_CACHE_HOME / $HOME mapping */
  if (!dir) return NULL;
  n = snprintf(path, sizeof path, "%s", dir);
  if (n < 0 || (size_t)n >= sizeof path) return NULL;
  while (n > 1 && path[n - 1] == '/') path[--n] = '\0';
  if (mkdir_p(path) != 0) return NULL;
  char probe[CACHE_PATH_MAX];
  snprintf(probe, sizeof probe, "%s/.probe.XXXXXX", path);
  int fd = mkstemp(probe);
  if (fd < 0) return NULL;
  close(fd);
  unlink(probe);
  hkc_cache_t *c = calloc(1, sizeof *c);
  if (c) memcpy(c->dir, path, (size_t)n + 1);
  return c;
}

void hkc_cache_close(hkc_cache_t *cache) { free(cache); }

static void hash_field(XXH3_state_t *st, const char *s) {
  uint64_t len = s ? strlen(s) : UINT64_MAX; /* NULL and "" hash differently */
  XXH3_128bits_update(st, &len, sizeof len);
  if (s) XXH3_128bits_update(st, s, (size_t)len);
}

/* XXH3-128 over the four fields, each prefixed by its length, so ("ab","c") and
 * ("a","bc") give different keys. */
void hkc_cache_key(const char *source, const char *options, const char *target, const char *toolchain,
                   char out_hex[33]) {
  XXH3_state_t st;
  XXH3_128bits_reset(&st);
  static const char domain[] = "hkc-cache-key-v1";
  XXH3_128bits_update(&st, domain, sizeof domain - 1);
  hash_field(&st, source);
  hash_field(&st, options);
  hash_field(&st, target);
  hash_field(&st, toolchain);
  XXH128_hash_t h = XXH3_128bits_digest(&st);
  snprintf(out_hex, 33, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
}

/* Keys name files: only 32 lowercase hex digits are accepted. */
static int key_valid(const char *key) {
  if (!key || strlen(key) != CACHE_KEY_HEX) return 0;
  for (size_t i = 0; i < CACHE_KEY_HEX; i++)
    if (!((key[i] >= '0' && key[i] <= '9') || (key[i] >= 'a' && key[i] <= 'f'))) return 0;
  return 1;
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

/* Contract in rtc.h. Any mismatch (size, magic, version, key, checksum) is a miss, and
 * the bad file is removed so the next put replaces it. */
int hkc_cache_get(hkc_cache_t *cache, const char *key_hex, hkc_rtc_result_t *out) {
  memset(out, 0, sizeof *out);
  if (!cache || !key_valid(key_hex)) return -1;
  char path[CACHE_PATH_MAX];
  snprintf(path, sizeof path, "%s/%.32s.hkcc", cache->dir, key_hex);
  char *data = NULL;
  size_t size = 0;
  if (hkc_read_file(path, &data, &size) != 0) return -1; /* absent: a plain miss */
  cache_header_t h;
  int ok = size >= sizeof h;
  if (ok) {
    memcpy(&h, data, sizeof h);
    size_t payload = size - sizeof h;
    ok = memcmp(h.magic, CACHE_MAGIC, sizeof h.magic) == 0 && h.version == CACHE_VERSION &&
         h.header_size == sizeof h && memcmp(h.key, key_hex, CACHE_KEY_HEX) == 0 &&
         h.code_size <= CACHE_MAX_PAYLOAD && h.log_size <= CACHE_MAX_PAYLOAD &&
         h.code_size + h.log_size == payload && h.code_size > 0 &&
         entry_checksum(&h, data + sizeof h, payload) == h.checksum;
  }
  if (!ok) {
    free(data);
    unlink(path);
    return -1;
  }
  out->code = malloc((size_t)h.code_size);
  out->log = h.log_size ? malloc((size_t)h.log_size + 1) : NULL;
  if (!out->code || (h.log_size && !out->log)) {
    free(data);
    hkc_rtc_result_free(out);
    return -1;
  }
  memcpy(out->code, data + sizeof h, (size_t)h.code_size);
  out->code_size = (size_t)h.code_size;
  if (out->log) {
    memcpy(out->log, data + sizeof h + h.code_size, (size_t)h.log_size);
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
void hkc_cache_put(hkc_cache_t *cache, const char *key_hex, const hkc_rtc_result_t *result) {
  if (!cache || !key_valid(key_hex) || !result || !result->code || result->code_size == 0 ||
      result->code_size > CACHE_MAX_PAYLOAD)
    return;
  size_t log_size = result->log ? strlen(result->log) : 0;
  if (log_size > CACHE_MAX_PAYLOAD) log_size = 0;
  size_t payload = result->code_size + log_size;
  char *buf = malloc(payload ? payload : 1);
  if (!buf) return;
  memcpy(buf, result->code, result->code_size);
  if (log_size) memcpy(buf + result->code_size, result->log, log_size);

  cache_header_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, CACHE_MAGIC, sizeof h.magic);
  h.version = CACHE_VERSION;
  h.header_size = sizeof h;
  memcpy(h.key, key_hex, CACHE_KEY_HEX);
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
  snprintf(path, sizeof path, "%s/%.32s.hkcc", cache->dir, key_hex);
  hkc_chunk_t chunks[2] = {{&h, sizeof h}, {buf, payload}};
  (void)hkc_file_replace(path, chunks, 2, 0666, NULL, 0); /* best effort: a failure leaves no entry */
  free(buf);
}
