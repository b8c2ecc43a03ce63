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
 * keep other users from writing entries at all, and an entry is used only when the file read
 * is this user's and writable by no one else (entry_private), which an entry planted before
 * the directory was locked down, or copied in with another owner, is not. Entries are written
 * with mode 0644 whatever the umask allows beyond it (0666 under umask 002 would make every
 * entry group-writable, and so never used). Writers create a unique temporary file in the
 * cache directory and rename it over the entry: readers see the old entry, the new one
 * or none, never a half-written one, even with concurrent builds.
 *
 * Second level (cache_remote.c, HKC_CACHE_URL): the same entry bytes in a shared Redis under
 * "hkc:cc<version>:<key>". Read-through: a local miss asks the remote, checks the answer with
 * entry_ok exactly as a local file (a bad one is ignored with a warning, then replaced after
 * the compile), stores it locally and serves it. Write-back: every entry put locally is also
 * set remotely. The remote never fails a build (cache_remote.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "rtc/cache_remote.h"
#include "rtc/rtc.h"
#include "util/util.h"

#define CACHE_MAGIC "HKCC\r\n\x1a\n" /* trap bytes catch text-mode and truncating transfers */
#define CACHE_VERSION 2u /* 2: the request recorded */
#define CACHE_KEY_HEX 32 /* XXH3-128 as hex */
/* An entry larger than this is not ours (the biggest code objects are a few MB). */
#define CACHE_MAX_PAYLOAD ((uint64_t)1 << 30)
#define CACHE_DIR_MAX 4000                 /* the cache directory's path */
#define CACHE_ENTRY_MODE 0644              /* never writable by group or others (entry_private) */
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
  hkc_remote_cache_t *remote; /* NULL: none (or it failed at open) */
  int verbose;                /* hkc_cache_set_verbose */
  atomic_int foreign_said;    /* an entry not used for its owner or mode was reported */
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
    hkc_warning((hkc_loc_t){0}, "compile cache %s: %s; building without it", path, hkc_strerror(errno));
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
    hkc_warning((hkc_loc_t){0}, "compile cache %s: cannot create it: %s; building without it", path, hkc_strerror(errno));
    return NULL;
  }
  if (!dir_private(path)) return NULL;
  char probe[CACHE_PATH_MAX];
  snprintf(probe, sizeof probe, "%s/.probe.XXXXXX", path);
  int fd = mkstemp(probe);
  if (fd < 0) {
    hkc_warning((hkc_loc_t){0}, "compile cache %s: not writable: %s; building without it", path, hkc_strerror(errno));
    return NULL;
  }
  close(fd);
  unlink(probe);
  hkc_cache_t *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  memcpy(c->dir, path, (size_t)n + 1);
  c->remote = hkc_remote_cache_open(hkc_env_cache_url(), hkc_env_cache_timeout_ms()); /* NULL: none, or warned */
  return c;
}

void hkc_cache_set_verbose(hkc_cache_t *cache, int verbose) {
  if (cache) cache->verbose = verbose;
}

/* Whether a file in the cache directory is one this user wrote and no one else can change:
 * owned by this user and not writable by group or others, as the directory itself must be. */
static int entry_private(const struct stat *st) {
  return st->st_uid == geteuid() && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* Says once per cache (with -v) that an entry was not used for its owner or mode. */
static void say_foreign(hkc_cache_t *cache, const char *path, const struct stat *st) {
  if (!cache->verbose || atomic_exchange(&cache->foreign_said, 1)) return;
  if (st->st_uid != geteuid())
    hkc_warning((hkc_loc_t){0}, "compile cache entry %s is owned by uid %u, not by this user (uid %u): not used, "
                "compiling (said once)", path, (unsigned)st->st_uid, (unsigned)geteuid());
  else
    hkc_warning((hkc_loc_t){0}, "compile cache entry %s is writable by %s (mode %03o): not used, compiling (said once)",
                path, (st->st_mode & S_IWOTH) ? "others" : "its group", (unsigned)(st->st_mode & 0777));
}

void hkc_cache_close(hkc_cache_t *cache) {
  if (!cache) return;
  hkc_remote_cache_close(cache->remote);
  free(cache);
}

/* The remote key of an entry: the version keeps entries of other layouts apart. */
static void remote_key(const char *key, char out[64]) { snprintf(out, 64, "hkc:cc%u:%.32s", CACHE_VERSION, key); }

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

static int entry_result(char *data, const cache_header_t *h, hkc_rtc_result_t *out);
static int remote_get(hkc_cache_t *cache, const char *key, const char *blob, size_t blob_size, const char *path,
                      hkc_rtc_result_t *out);

/* Contract in rtc.h. Any mismatch (size, magic, version, key, request, checksum) is a local
 * miss, and the bad file is removed so the next put replaces it; a local miss asks the remote. */
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
  struct stat st; /* of the file read */
  /* absent: a plain miss; no entry is near the cap (a device or FIFO here is refused) */
  if (hkc_read_file_stat(path, sizeof h + blob_size + 2 * CACHE_MAX_PAYLOAD, &data, &size, &st) != 0) {
    int rc = cache->remote ? remote_get(cache, key, blob, blob_size, path, out) : -1;
    free(blob);
    return rc;
  }
  if (!entry_private(&st)) { /* not ours alone: a miss, and the put after the compile replaces it */
    say_foreign(cache, path, &st);
    free(data);
    free(blob);
    return -1;
  }
  int ok = entry_ok(data, size, key, blob, blob_size, &h);
  if (!ok) {
    free(data);
    unlink(path);
    int rc = cache->remote ? remote_get(cache, key, blob, blob_size, path, out) : -1;
    free(blob);
    return rc;
  }
  free(blob);
  (void)utimensat(AT_FDCWD, path, NULL, 0); /* recently used (hkc_cache_trim); best effort */
  return entry_result(data, &h, out) == 0 ? 0 : -1;
}

/* A local miss: the remote's entry, checked as a local one, stored locally and served. 1 on a
 * hit, -1 on a miss. */
static int remote_get(hkc_cache_t *cache, const char *key, const char *blob, size_t blob_size, const char *path,
                      hkc_rtc_result_t *out) {
  char rkey[64], *data = NULL;
  size_t size = 0;
  cache_header_t h;
  remote_key(key, rkey);
  if (hkc_remote_cache_get(cache->remote, rkey, sizeof h + blob_size + 2 * CACHE_MAX_PAYLOAD, &data, &size) != 0)
    return -1;
  if (!entry_ok(data, size, key, blob, blob_size, &h)) {
    hkc_warning((hkc_loc_t){0}, "shared compile cache %s: entry %s is damaged or not for this compile (%zu bytes); "
                "ignored, compiling", hkc_remote_cache_url(cache->remote), rkey, size);
    free(data);
    return -1;
  }
  const hkc_chunk_t chunk = {data, size};
  (void)hkc_file_replace(path, &chunk, 1, CACHE_ENTRY_MODE, NULL, 0); /* best effort, as put */
  return entry_result(data, &h, out) == 0 ? 1 : -1;
}

/* Fills out from a checked entry and frees data. 0 / -1 (OOM). */
static int entry_result(char *data, const cache_header_t *hp, hkc_rtc_result_t *out) {
  const cache_header_t h = *hp;
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
  (void)hkc_file_replace(path, chunks, 2, CACHE_ENTRY_MODE, NULL, 0); /* best effort: a failure leaves no entry */
  if (cache->remote) {
    char rkey[64];
    remote_key(key, rkey);
    const void *parts[2] = {&h, buf};
    const size_t sizes[2] = {sizeof h, payload};
    hkc_remote_cache_set(cache->remote, rkey, parts, sizes, 2);
  }
  free(buf);
}

/* ---- size and cleaning (hkc cache) ------------------------------------------------------------ */
/* What a directory entry is: 1 a complete entry "<32 hex>.hkcc", 2 a writer's temporary file
 * (".<entry>.tmp.*", fileio.c) or a left-over probe (".probe.*"), 0 anything else (never touched). */
static int file_kind(const char *name) {
  size_t n = strlen(name);
  if (n == CACHE_KEY_HEX + 5 && strcmp(name + CACHE_KEY_HEX, ".hkcc") == 0) {
    for (size_t i = 0; i < CACHE_KEY_HEX; i++)
      if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return 0;
    return 1;
  }
  if (name[0] == '.' && strstr(name, ".hkcc.tmp.") == name + 1 + CACHE_KEY_HEX) return 2;
  if (strncmp(name, ".probe.", 7) == 0) return 2;
  return 0;
}

typedef struct cache_file {
  char name[CACHE_KEY_HEX + 8];
  uint64_t bytes;
  struct timespec mtime;
} cache_file_t;

static int older_first(const void *a, const void *b) {
  const cache_file_t *x = a, *y = b;
  if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
  if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
  return strcmp(x->name, y->name);
}

/* Lists the directory: complete entries into *out_entries (malloc'd, *n_entries), and either
 * counts temporary files into stats or, with remove_tmp, removes those older than
 * HKC_CACHE_TMP_AGE_S. With remove_tmp (cleaning) the directory must be this user's (else -1,
 * EPERM: nothing is removed in another user's directory), and files that are not this
 * user's alone (entry_private: entries a build would not use) are neither listed nor removed.
 * *dfd_out: the open directory (the caller closes it), -1 when missing. */
static int scan_dir(const char *dir, int remove_tmp, cache_file_t **out_entries, size_t *n_entries,
                    hkc_cache_stats_t *stats, int *dfd_out) {
  *out_entries = NULL;
  *n_entries = 0;
  *dfd_out = -1;
  if (!dir) dir = hkc_env_cache_dir();
  if (!dir) {
    errno = ENOENT;
    return -1;
  }
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return errno == ENOENT ? 0 : -1;
  if (remove_tmp) { /* cleaning: only in this user's own directory */
    struct stat dst;
    const int e = fstat(dfd, &dst) != 0 ? errno : dst.st_uid != geteuid() ? EPERM : 0;
    if (e) {
      close(dfd);
      errno = e;
      return -1;
    }
  }
  int dup_fd = dup(dfd);
  DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
  if (!d) {
    if (dup_fd >= 0) close(dup_fd);
    close(dfd);
    return -1;
  }
  cache_file_t *list = NULL;
  size_t n = 0, cap = 0;
  const time_t now = time(NULL);
  struct dirent *e;
  int rc = 0;
  while ((e = readdir(d)) != NULL) {
    const int kind = file_kind(e->d_name);
    struct stat st;
    if (!kind || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (remove_tmp && !entry_private(&st)) continue; /* not ours alone: never touched */
    if (kind == 2) {
      if (remove_tmp && now - st.st_mtime >= HKC_CACHE_TMP_AGE_S) {
        if (unlinkat(dfd, e->d_name, 0) == 0) stats->temporary++, stats->temporary_bytes += (uint64_t)st.st_size;
      } else if (!remove_tmp) {
        stats->temporary++;
        stats->temporary_bytes += (uint64_t)st.st_size;
      }
      continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 256;
      cache_file_t *grown = realloc(list, cap * sizeof *list);
      if (!grown) {
        errno = ENOMEM;
        rc = -1;
        break;
      }
      list = grown;
    }
    snprintf(list[n].name, sizeof list[n].name, "%s", e->d_name);
    list[n].bytes = (uint64_t)st.st_size;
    list[n].mtime = st.st_mtim;
    n++;
  }
  closedir(d);
  if (rc != 0) {
    free(list);
    close(dfd);
    return -1;
  }
  *out_entries = list;
  *n_entries = n;
  *dfd_out = dfd;
  return 0;
}

int hkc_cache_stats(const char *dir, hkc_cache_stats_t *out) {
  memset(out, 0, sizeof *out);
  cache_file_t *list;
  size_t n;
  int dfd;
  if (scan_dir(dir, 0, &list, &n, out, &dfd) != 0) return -1;
  for (size_t i = 0; i < n; i++) out->entries++, out->bytes += list[i].bytes;
  free(list);
  if (dfd >= 0) close(dfd);
  return 0;
}

int hkc_cache_trim(const char *dir, uint64_t max_bytes, hkc_cache_stats_t *out_removed) {
  hkc_cache_stats_t removed = {0};
  cache_file_t *list;
  size_t n;
  int dfd;
  if (out_removed) memset(out_removed, 0, sizeof *out_removed);
  if (scan_dir(dir, 1, &list, &n, &removed, &dfd) != 0) return -1;
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) total += list[i].bytes;
  if (n > 1) qsort(list, n, sizeof *list, older_first); /* list may be NULL when n is 0 */
  int rc = 0;
  for (size_t i = 0; i < n && total > max_bytes; i++) {
    if (unlinkat(dfd, list[i].name, 0) != 0) {
      if (errno == ENOENT) { /* another hkc removed it first */
        total -= list[i].bytes;
        continue;
      }
      rc = -1;
      continue;
    }
    total -= list[i].bytes;
    removed.entries++;
    removed.bytes += list[i].bytes;
  }
  const int e = errno;
  free(list);
  if (dfd >= 0) close(dfd);
  if (out_removed) *out_removed = removed;
  errno = e;
  return rc;
}
