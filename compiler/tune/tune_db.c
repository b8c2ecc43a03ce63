/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tuning database (docs/TUNING.md has the grammar): a text file, one entry per line,
 *
 *   target | units | toolchain | signature | variant | params | time
 *   sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=4096 n=2304 k=768 bias | gemm_wgmma_ws | bn=128,st=4,p=1 | 61.23 us
 *
 * fields separated by " | " (or tabs), '#' comments and blank lines ignored, entries
 * sorted by key (the first four fields) so that files diff and merge line by line. A
 * malformed line is an error "FILE:LINE: what is wrong (expected ...)".
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frontend/frontend.h"
#include "tune/tune.h"
#include "util/util.h"

#define DB_FIELDS 7
#define DB_MAX_LINE 1024 /* longer lines are malformed: no field needs more than ~200 bytes */

static const char k_header[] =
    "# hkc tuning database (docs/TUNING.md), sorted by key; one entry per line:\n"
    "# target | units | toolchain | signature | variant | params | time\n";

void hkc_tune_db_free(hkc_tune_db_t *db) {
  if (!db) return;
  for (size_t i = 0; i < db->n; i++) {
    free(db->entries[i].target);
    free(db->entries[i].toolchain);
    free(db->entries[i].signature);
    free(db->entries[i].variant);
    free(db->entries[i].params);
  }
  free(db->entries);
  for (size_t i = 0; i < db->n_files; i++) free(db->files[i]);
  free(db->files);
  memset(db, 0, sizeof *db);
}

/* strcmp over the key fields (target, units, toolchain, signature). */
static int key_cmp(const hkc_tune_entry_t *a, const hkc_tune_entry_t *b) {
  int c = strcmp(a->target, b->target);
  if (c) return c;
  if (a->units != b->units) return a->units < b->units ? -1 : 1;
  c = strcmp(a->toolchain, b->toolchain);
  return c ? c : strcmp(a->signature, b->signature);
}

static int entry_copy(hkc_tune_entry_t *dst, const hkc_tune_entry_t *src) {
  *dst = *src;
  dst->target = hkc_strdup(src->target);
  dst->toolchain = hkc_strdup(src->toolchain);
  dst->signature = hkc_strdup(src->signature);
  dst->variant = hkc_strdup(src->variant);
  dst->params = hkc_strdup(src->params);
  return dst->target && dst->toolchain && dst->signature && dst->variant && dst->params ? 0 : -1;
}

static void entry_free(hkc_tune_entry_t *e) {
  free(e->target);
  free(e->toolchain);
  free(e->signature);
  free(e->variant);
  free(e->params);
}

int hkc_tune_db_put(hkc_tune_db_t *db, const hkc_tune_entry_t *entry, int faster) {
  for (size_t i = 0; i < db->n; i++) {
    hkc_tune_entry_t *e = &db->entries[i];
    if (key_cmp(e, entry) != 0) continue;
    if (!faster || !(entry->time_us < e->time_us)) return 0;
    hkc_tune_entry_t copy;
    if (entry_copy(&copy, entry) != 0) {
      entry_free(&copy);
      return -1;
    }
    entry_free(e);
    *e = copy;
    return 2;
  }
  if (hkc_reserve((void **)&db->entries, &db->cap, db->n + 1, sizeof *db->entries) != 0) return -1;
  if (entry_copy(&db->entries[db->n], entry) != 0) {
    entry_free(&db->entries[db->n]);
    return -1;
  }
  db->n++;
  return 1;
}

/* ---- parsing ---------------------------------------------------------------------------------- */
static char *trim(char *s) {
  while (*s == ' ') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\r')) s[--n] = '\0';
  return s;
}

static int parse_int(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi || s[0] == '+' || s[0] == ' ') return -1;
  *out = v;
  return 0;
}

static int name_chars(const char *s, const char *extra) {
  if (!*s) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr(extra, *s)))
      return 0;
  return 1;
}

/* Checks a signature against the grammar; NULL when fine, else what was expected. */
static const char *check_signature(const char *sig) {
  char buf[256];
  if (strlen(sig) >= sizeof buf) return "a signature under 256 bytes";
  snprintf(buf, sizeof buf, "%s", sig);
  char *save = NULL, *tok = strtok_r(buf, " ", &save);
  int known = 0;
  for (int op = 0; tok && op < HK_OP_COUNT_; op++) known |= hkc_op_name((hk_op_t)op) && strcmp(tok, hkc_op_name((hk_op_t)op)) == 0;
  if (!known) return "an op name first (gemm, ...)";
  const int attention = strcmp(buf, "attention") == 0;
  tok = strtok_r(NULL, " ", &save);
  if (!tok || (strcmp(tok, "f32") && strcmp(tok, "f16") && strcmp(tok, "bf16"))) return "a dtype second (f32, f16, bf16)";
  if (attention) { /* attention <dtype> b= h= kvh= sq= skv= d= [causal] [len] [mask] */
    static const char *const adims[] = {"b=", "h=", "kvh=", "sq=", "skv=", "d="};
    for (int d = 0; d < 6; d++) {
      tok = strtok_r(NULL, " ", &save);
      const size_t len = strlen(adims[d]);
      long v;
      if (!tok || strncmp(tok, adims[d], len) != 0 || parse_int(tok + len, 1, LONG_MAX / 2, &v) != 0)
        return "b=<batch> h=<heads> kvh=<kv heads> sq=<queries> skv=<keys> d=<head dim> after the dtype";
    }
    static const char *const flags[] = {"causal", "len", "mask"};
    int f = 0;
    for (tok = strtok_r(NULL, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
      while (f < 3 && strcmp(tok, flags[f]) != 0) f++;
      if (f++ == 3) return "nothing but causal, len, mask (in this order) after d=";
    }
    return NULL;
  }
  static const char *const dims[] = {"m=", "n=", "k="};
  for (int d = 0; d < 3; d++) {
    tok = strtok_r(NULL, " ", &save);
    long v;
    if (!tok || strncmp(tok, dims[d], 2) != 0 || parse_int(tok + 2, 1, LONG_MAX / 2, &v) != 0)
      return "m=<rows> n=<cols> k=<depth> after the dtype";
  }
  /* flags: tb, bias, act=<name>, res, mul, dual, rope=d<head_dim>, norm, ln, rms -- each at most once, in this order */
  static const char *const flags[] = {"tb", "bias", "act=", "res", "mul", "dual", "rope=d", "norm", "ln", "rms"};
  int next = 0;
  while ((tok = strtok_r(NULL, " ", &save))) {
    int f = next;
    while (f < 10 && (f == 2 || f == 6 ? strncmp(tok, flags[f], strlen(flags[f])) != 0 : strcmp(tok, flags[f]) != 0)) f++;
    if (f == 10)
      return "flags among tb, bias, act=<activation>, res, mul, dual, rope=d<head_dim>, norm, ln, rms, in this order";
    long dh;
    if (f == 6 && (parse_int(tok + 6, 2, HKC_ROPE_EPILOGUE_MAX_DH, &dh) != 0 || dh % 2 != 0))
      return "rope=d<head_dim>: an even head_dim";
    if (f == 2) {
      int ok = 0;
      for (int a = 1; a < HK_ACT_COUNT_; a++) ok |= strcmp(tok + 4, hkc_act_name((hk_act_t)a)) == 0;
      if (!ok) return "act=relu | gelu | silu | gelu_tanh";
    }
    next = f + 1;
  }
  return NULL;
}

/* Splits a line into fields on '|' (when it has one) or tabs; cols[i]: 1-based column of
 * field i in the line. Returns the field count. */
static int split_fields(char *line, char **fields, int *cols, int max) {
  const char sep = strchr(line, '|') ? '|' : '\t';
  int n = 0;
  char *p = line;
  for (;;) {
    char *q = strchr(p, sep);
    if (q) *q = '\0';
    if (n < max) {
      fields[n] = trim(p);
      cols[n] = (int)(fields[n] - line) + 1;
    }
    n++;
    if (!q) break;
    p = q + 1;
    if (sep == '\t')
      while (*p == '\t') p++; /* tabs: runs of tabs are one separator (column alignment) */
  }
  return n;
}

/* line: the text of line line_no from column col0 on. Errors point at the field. */
static int parse_line(hkc_tune_db_t *db, const char *name, int line_no, int col0, char *line) {
  hkc_loc_t loc = {name, line_no, col0};
  char *f[DB_FIELDS];
  int cols[DB_FIELDS];
  int n = split_fields(line, f, cols, DB_FIELDS);
  if (n != DB_FIELDS) {
    hkc_error(loc, "expected %d fields separated by ' | ' or tabs (target | units | toolchain | signature | variant | "
              "params | time), got %d", DB_FIELDS, n);
    return -1;
  }
  long units;
  char *end;
  const char *problem = NULL;
  int field = 0;
  if (!name_chars(f[0], "_-:+.")) problem = "target: an ISA name such as sm_90a, gfx90a or host-x86_64";
  else if (field = 1, parse_int(f[1], 1, 1 << 20, &units) != 0) problem = "units: the SM / CU count, a positive integer";
  else if (field = 2, !f[2][0]) problem = "toolchain: a version such as 'nvrtc 13.0'";
  else if (field = 3, (problem = check_signature(f[3])) != NULL) {
  } else if (field = 4, !name_chars(f[4], "_") || strlen(f[4]) >= HKC_TUNE_VARIANT_MAX)
    problem = "variant: a variant name such as gemm_wgmma_ws";
  else if (field = 5, !name_chars(f[5], "=,") || strlen(f[5]) >= HKC_TUNE_MAX || !strchr(f[5], '='))
    problem = "params: name=value pairs separated by commas, such as bn=128,st=4,p=1";
  if (problem) {
    loc.col = col0 + cols[field] - 1;
    hkc_error(loc, "bad entry (expected %s)", problem);
    return -1;
  }
  errno = 0;
  double t = strtod(f[6], &end);
  while (*end == ' ') end++;
  if (errno || end == f[6] || !(t > 0) || t > 1e12 || (*end && strcmp(end, "us") != 0)) {
    loc.col = col0 + cols[6] - 1;
    hkc_error(loc, "bad time '%s' (expected the measured median in microseconds, such as '61.23 us')", f[6]);
    return -1;
  }
  hkc_tune_entry_t e = {.target = f[0], .units = (int)units, .toolchain = f[2], .signature = f[3], .variant = f[4],
                        .params = f[5], .time_us = t, .file = name, .line = line_no};
  for (size_t i = 0; i < db->n; i++) {
    const hkc_tune_entry_t *o = &db->entries[i];
    if (o->file == name && key_cmp(o, &e) == 0) {
      hkc_error(loc, "duplicate key (first at line %d): one entry per target, units, toolchain and signature", o->line);
      return -1;
    }
  }
  int rc = hkc_tune_db_put(db, &e, 0);
  if (rc < 0) {
    hkc_error(loc, "out of memory");
    return -1;
  }
  if (rc == 1) { /* entry_copy copied the borrowed file name pointer; keep it */
    db->entries[db->n - 1].file = name;
    db->entries[db->n - 1].line = line_no;
  }
  return 0;
}

int hkc_tune_db_parse(hkc_tune_db_t *db, const char *name, const char *text, size_t size) {
  if (hkc_reserve((void **)&db->files, &db->cap_files, db->n_files + 1, sizeof *db->files) != 0) return -1;
  char *stored = hkc_strdup(name);
  if (!stored) return -1;
  db->files[db->n_files++] = stored;
  /* the hash chains every file read, in order */
  uint64_t h = hkc_hash64(text, size);
  uint64_t pair[2] = {db->hash, h};
  db->hash = db->n_files == 1 ? h : hkc_hash64(pair, sizeof pair);
  int rc = 0, line_no = 0;
  size_t at = 0;
  char buf[DB_MAX_LINE + 2];
  while (at < size) {
    const char *nl = memchr(text + at, '\n', size - at);
    size_t len = nl ? (size_t)(nl - (text + at)) : size - at;
    line_no++;
    if (len > DB_MAX_LINE) {
      hkc_error((hkc_loc_t){stored, line_no, 1}, "line longer than %d bytes", DB_MAX_LINE);
      rc = -1;
    } else if (memchr(text + at, '\0', len)) {
      hkc_error((hkc_loc_t){stored, line_no, 1}, "NUL byte in a text file");
      rc = -1;
    } else {
      memcpy(buf, text + at, len);
      buf[len] = '\0';
      char *s = buf;
      while (*s == ' ' || *s == '\t') s++;
      trim(s);
      if (*s && *s != '#' && parse_line(db, stored, line_no, (int)(s - buf) + 1, s) != 0) rc = -1;
    }
    at += len + 1;
  }
  return rc;
}

int hkc_tune_db_load(hkc_tune_db_t *db, const char *path) {
  char *data = NULL;
  size_t size = 0;
  if (hkc_read_file(path, &data, &size) != 0) {
    hkc_error((hkc_loc_t){0}, "cannot read tuning database %s: %s", path, hkc_strerror(errno));
    return -1;
  }
  int rc = hkc_tune_db_parse(db, path, data, size);
  free(data);
  return rc;
}

/* ---- lookup ------------------------------------------------------------------------------------ */
/* The signature without its epilogue flags (bias, act=, res, mul) into out. */
static void signature_base(const char *sig, char *out, size_t size) {
  size_t len = 0;
  out[0] = '\0';
  char buf[256];
  snprintf(buf, sizeof buf, "%s", sig);
  char *save = NULL;
  for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    if (!strcmp(tok, "bias") || !strncmp(tok, "act=", 4) || !strcmp(tok, "res") || !strcmp(tok, "mul")) continue;
    int n = snprintf(out + len, size - len, "%s%s", len ? " " : "", tok);
    if (n < 0 || (size_t)n >= size - len) break;
    len += (size_t)n;
  }
}

const hkc_tune_entry_t *hkc_tune_db_find(const hkc_tune_db_t *db, const char *target, int units,
                                         const char *toolchain, const char *signature, int *out_exact) {
  const hkc_tune_entry_t *best = NULL;
  char want[256], have[256];
  *out_exact = 0;
  if (!db) return NULL;
  signature_base(signature, want, sizeof want);
  for (size_t i = 0; i < db->n; i++) {
    const hkc_tune_entry_t *e = &db->entries[i];
    if (e->units != units || strcmp(e->target, target) || strcmp(e->toolchain, toolchain)) continue;
    if (strcmp(e->signature, signature) == 0) {
      *out_exact = 1;
      return e; /* the first file's entry: parse kept the first of each key */
    }
    signature_base(e->signature, have, sizeof have);
    if (strcmp(have, want) == 0 && (!best || strcmp(e->signature, best->signature) < 0)) best = e;
  }
  return best;
}

/* ---- writing ----------------------------------------------------------------------------------- */
static int entry_order(const void *a, const void *b) {
  const hkc_tune_entry_t *x = *(const hkc_tune_entry_t *const *)a, *y = *(const hkc_tune_entry_t *const *)b;
  int c = key_cmp(x, y);
  return c ? c : (x < y ? -1 : x > y);
}

char *hkc_tune_db_format(const hkc_tune_db_t *db) {
  const hkc_tune_entry_t **sorted = calloc(db->n ? db->n : 1, sizeof *sorted);
  if (!sorted) return NULL;
  for (size_t i = 0; i < db->n; i++) sorted[i] = &db->entries[i];
  qsort(sorted, db->n, sizeof *sorted, entry_order);
  hkc_strbuf_t sb = {0};
  hkc_sb_append(&sb, k_header, sizeof k_header - 1);
  for (size_t i = 0; i < db->n; i++) {
    const hkc_tune_entry_t *e = sorted[i];
    /* fields appended whole (hkc_sb_printf formats at most 511 bytes; a parsed field may be longer) */
    const char *const fields[] = {e->target, NULL, e->toolchain, e->signature, e->variant, e->params};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
      if (fields[f]) hkc_sb_append(&sb, fields[f], strlen(fields[f]));
      else hkc_sb_printf(&sb, "%d", e->units);
      hkc_sb_append(&sb, " | ", 3);
    }
    /* two decimals (diff-friendly); %g below 0.01 us, which two decimals would turn into 0 */
    hkc_sb_printf(&sb, e->time_us >= 0.01 ? "%.2f us\n" : "%g us\n", e->time_us);
  }
  free(sorted);
  if (sb.failed) {
    free(sb.data);
    return NULL;
  }
  return sb.data;
}

int hkc_tune_db_write(const hkc_tune_db_t *db, const char *path) {
  char *text = hkc_tune_db_format(db);
  if (!text) {
    hkc_error((hkc_loc_t){0}, "cannot write %s: out of memory", path);
    return -1;
  }
  char err[4200];
  hkc_chunk_t chunk = {text, strlen(text)};
  int rc = hkc_file_replace(path, &chunk, 1, 0666, err, sizeof err); /* atomic; the umask decides the mode */
  if (rc != 0) hkc_error((hkc_loc_t){0}, "%s", err);
  free(text);
  return rc;
}

int hkc_tune_db_merge(const char *const *paths, size_t n, const char *out_path, int quiet) {
  hkc_tune_db_t out = {0};
  int rc = 0;
  size_t conflicts = 0;
  for (size_t f = 0; f < n && rc == 0; f++) {
    hkc_tune_db_t one = {0};
    if (hkc_tune_db_load(&one, paths[f]) != 0) {
      hkc_tune_db_free(&one);
      rc = -1;
      break;
    }
    for (size_t i = 0; i < one.n && rc == 0; i++) {
      const hkc_tune_entry_t *e = &one.entries[i];
      const hkc_tune_entry_t *old = NULL;
      for (size_t j = 0; j < out.n && !old; j++)
        if (key_cmp(&out.entries[j], e) == 0) old = &out.entries[j];
      if (old && !quiet)
        fprintf(stderr, "hkc tune --merge: %s | %d | %s | %s: kept %s:%d (%s %s, %.2f us) over %s:%d (%s %s, %.2f us)\n",
                e->target, e->units, e->toolchain, e->signature, e->time_us < old->time_us ? paths[f] : old->file,
                e->time_us < old->time_us ? e->line : old->line, e->time_us < old->time_us ? e->variant : old->variant,
                e->time_us < old->time_us ? e->params : old->params,
                e->time_us < old->time_us ? e->time_us : old->time_us, e->time_us < old->time_us ? old->file : paths[f],
                e->time_us < old->time_us ? old->line : e->line, e->time_us < old->time_us ? old->variant : e->variant,
                e->time_us < old->time_us ? old->params : e->params,
                e->time_us < old->time_us ? old->time_us : e->time_us);
      conflicts += old != NULL;
      int put = hkc_tune_db_put(&out, e, 1);
      if (put < 0) rc = -1;
      /* file names of kept entries point at paths[], which outlive this call */
      for (size_t j = 0; j < out.n; j++)
        if (out.entries[j].file == one.files[0]) out.entries[j].file = paths[f];
    }
    hkc_tune_db_free(&one);
  }
  if (rc == 0) rc = hkc_tune_db_write(&out, out_path);
  if (rc == 0 && !quiet)
    printf("merged %zu file(s) into %s: %zu entr%s, %zu conflict(s) resolved by the faster time\n", n, out_path, out.n,
           out.n == 1 ? "y" : "ies", conflicts);
  hkc_tune_db_free(&out);
  return rc;
}
