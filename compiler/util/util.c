/* SPDX-License-Identifier: Apache-2.0 */
/* Diagnostics, small allocation helpers, hashing and embedded templates. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "util/util.h"

static char *g_capture;      /* NULL: print to stderr */
static size_t g_capture_size;
static int g_errors;
static void (*g_before)(void *), (*g_after)(void *); /* hkc_diag_set_hooks */
static void *g_hook_arg;

void hkc_diag_set_hooks(void (*before)(void *), void (*after)(void *), void *arg) {
  g_before = before;
  g_after = after;
  g_hook_arg = arg;
}

static void diag_emit(const char *kind, hkc_loc_t loc, const char *fmt, va_list ap) {
  char msg[2048];
  int n = 0;
  if (loc.file && loc.line > 0)
    n = snprintf(msg, sizeof msg, "%s:%d:%d: %s", loc.file, loc.line, loc.col > 0 ? loc.col : 1, kind);
  else if (loc.file)
    n = snprintf(msg, sizeof msg, "%s: %s", loc.file, kind);
  else
    n = snprintf(msg, sizeof msg, "hkc: %s", kind);
  if (n < 0 || (size_t)n >= sizeof msg) n = (int)strlen(msg);
  vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  if (g_capture) {
    size_t used = strlen(g_capture);
    if (used + 1 < g_capture_size) snprintf(g_capture + used, g_capture_size - used, "%s\n", msg);
  } else {
    if (g_before) g_before(g_hook_arg);
    fprintf(stderr, "%s\n", msg);
    if (g_after) g_after(g_hook_arg);
  }
}

void hkc_error(hkc_loc_t loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_emit("", loc, fmt, ap);
  va_end(ap);
  g_errors++;
}

void hkc_warning(hkc_loc_t loc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_emit("warning: ", loc, fmt, ap);
  va_end(ap);
}

void hkc_diag_capture(char *buf, size_t size) {
  g_capture = buf;
  g_capture_size = size;
  if (buf && size) buf[0] = '\0';
}

int hkc_error_count(void) { return g_errors; }
void hkc_error_reset(void) { g_errors = 0; }

int hkc_reserve(void **items, size_t *cap, size_t need, size_t elem_size) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 8;
  while (n < need) {
    if (n > SIZE_MAX / 2) return -1;
    n *= 2;
  }
  if (n > SIZE_MAX / elem_size) return -1;
  void *p = realloc(*items, n * elem_size);
  if (!p) return -1;
  *items = p;
  *cap = n;
  return 0;
}

char *hkc_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p) memcpy(p, s, n);
  return p;
}

uint64_t hkc_hash64(const void *data, size_t size) { return XXH3_64bits(data, size); }

/* Bytes one byte of text takes escaped: 1, or 4 for \xNN. */
static size_t escaped_width(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '\\' ? 1 : 4; }

char *hkc_escape_into(const char *s, size_t len, char *out, size_t size) {
  if (!size) return out;
  size_t total = 0;
  for (size_t i = 0; i < len; i++) total += escaped_width((unsigned char)s[i]);
  const size_t room = total + 1 <= size ? size : size > 4 ? size - 3 : 1; /* cut: "..." after */
  size_t o = 0;
  for (size_t i = 0; i < len; i++) {
    const unsigned char c = (unsigned char)s[i];
    if (o + escaped_width(c) + 1 > room) break; /* whole pieces only: never half an \xNN */
    if (escaped_width(c) == 1) out[o++] = (char)c;
    else o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
  }
  if (total + 1 > size && size > 4) {
    memcpy(out + o, "...", 3);
    o += 3;
  }
  out[o] = '\0';
  return out;
}

const char *hkc_escaped(const char *s) {
  static _Thread_local char bufs[8][HKC_ESCAPED_MAX + 1];
  static _Thread_local unsigned next;
  char *out = bufs[next++ % 8];
  if (!s) s = "";
  return hkc_escape_into(s, strlen(s), out, HKC_ESCAPED_MAX + 1);
}

/* The slot of key in a table of cap slots (cap a power of two, at most half full): its own, or
 * the empty one where it would go. */
static size_t names_slot(const char **keys, size_t cap, const char *key) {
  size_t i = (size_t)hkc_hash64(key, strlen(key)) & (cap - 1);
  while (keys[i] && strcmp(keys[i], key) != 0) i = (i + 1) & (cap - 1);
  return i;
}

int hkc_names_put(hkc_names_t *names, const char *key, int value) {
  if (2 * (names->n + 1) > names->cap) { /* at most half full: short probes */
    const size_t cap = names->cap ? 2 * names->cap : 64;
    const char **keys = calloc(cap, sizeof *keys);
    int *values = malloc(cap * sizeof *values);
    if (!keys || !values) {
      free(keys);
      free(values);
      return -1;
    }
    for (size_t i = 0; i < names->cap; i++)
      if (names->keys[i]) {
        const size_t k = names_slot(keys, cap, names->keys[i]);
        keys[k] = names->keys[i];
        values[k] = names->values[i];
      }
    free(names->keys);
    free(names->values);
    names->keys = keys;
    names->values = values;
    names->cap = cap;
  }
  const size_t k = names_slot(names->keys, names->cap, key);
  if (names->keys[k]) return 0;
  names->keys[k] = key;
  names->values[k] = value;
  names->n++;
  return 0;
}

int hkc_names_get(const hkc_names_t *names, const char *key) {
  if (!names->cap) return -1;
  const size_t k = names_slot(names->keys, names->cap, key);
  return names->keys[k] ? names->values[k] : -1;
}

void hkc_names_free(hkc_names_t *names) {
  free(names->keys);
  free(names->values);
  memset(names, 0, sizeof *names);
}

void hkc_sb_append(hkc_strbuf_t *sb, const char *text, size_t n) {
  if (sb->failed) return;
  if (hkc_reserve((void **)&sb->data, &sb->cap, sb->len + n + 1, 1) != 0) {
    sb->failed = 1;
    return;
  }
  memcpy(sb->data + sb->len, text, n);
  sb->len += n;
  sb->data[sb->len] = '\0';
}

void hkc_sb_printf(hkc_strbuf_t *sb, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof buf) {
    sb->failed = 1;
    return;
  }
  hkc_sb_append(sb, buf, (size_t)n);
}

typedef struct { const char *path; const char *text; size_t size; } hkc_template_t;
extern const hkc_template_t hkc_templates[];

/* Templates read from $HKC_TEMPLATE_DIR, kept for the life of the process (reachable
 * from this list, so they are not leaks). Guarded: code generation runs on the compile
 * pool's threads. */
typedef struct disk_template {
  struct disk_template *next;
  char *path, *text;
  size_t size;
} disk_template_t;
static disk_template_t *g_disk_templates;
static pthread_mutex_t g_template_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *disk_template(const char *dir, const char *path, size_t *out_size) {
  pthread_mutex_lock(&g_template_lock);
  disk_template_t *t = g_disk_templates;
  while (t && strcmp(t->path, path) != 0) t = t->next;
  if (!t) {
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", dir, path);
    char *text;
    size_t size;
    if (hkc_read_file(full, &text, &size) == 0 && (t = calloc(1, sizeof *t)) != NULL) {
      t->path = hkc_strdup(path);
      t->text = text;
      t->size = size;
      t->next = g_disk_templates;
      g_disk_templates = t;
    }
  }
  pthread_mutex_unlock(&g_template_lock);
  if (t && out_size) *out_size = t->size;
  return t ? t->text : NULL;
}

const char *hkc_template(const char *path, size_t *out_size) {
  /* Template developers point HKC_TEMPLATE_DIR (hkc_env) at a templates/ tree to try kernel changes
   * without rebuilding hkc; files missing there fall back to the embedded copies. */
  const char *dir = hkc_env_template_dir();
  if (dir) {
    const char *text = disk_template(dir, path, out_size);
    if (text) return text;
  }
  for (const hkc_template_t *t = hkc_templates; t->path; t++) {
    if (strcmp(t->path, path) == 0) {
      if (out_size) *out_size = t->size;
      return t->text;
    }
  }
  return NULL;
}

/* ---- settings from the environment (util.h) ------------------------------------------------ */
static struct {
  char *tmp_dir, *cc, *cuda_path, *cache_dir, *template_dir, *cache_url;
  int cache_timeout_ms;
} g_env;

static void env_field(char **slot, const char *value) {
  free(*slot);
  *slot = value && *value ? hkc_strdup(value) : NULL;
}

void hkc_env_set(const hkc_env_t *env) {
  env_field(&g_env.tmp_dir, env ? env->tmp_dir : NULL);
  env_field(&g_env.cc, env ? env->cc : NULL);
  env_field(&g_env.cuda_path, env ? env->cuda_path : NULL);
  env_field(&g_env.cache_dir, env ? env->cache_dir : NULL);
  env_field(&g_env.template_dir, env ? env->template_dir : NULL);
  env_field(&g_env.cache_url, env ? env->cache_url : NULL);
  g_env.cache_timeout_ms = env && env->cache_timeout_ms > 0 ? env->cache_timeout_ms : 0;
}

const char *hkc_env_tmp_dir(void) { return g_env.tmp_dir ? g_env.tmp_dir : "/tmp"; }
const char *hkc_env_cc(void) { return g_env.cc ? g_env.cc : "cc"; }
const char *hkc_env_cuda_path(void) { return g_env.cuda_path ? g_env.cuda_path : "/usr/local/cuda"; }
const char *hkc_env_cache_dir(void) { return g_env.cache_dir; }
const char *hkc_env_template_dir(void) { return g_env.template_dir; }
const char *hkc_env_cache_url(void) { return g_env.cache_url; }
int hkc_env_cache_timeout_ms(void) { return g_env.cache_timeout_ms; }
