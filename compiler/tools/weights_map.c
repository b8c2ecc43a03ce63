/* SPDX-License-Identifier: Apache-2.0 */
/*
 * weights_map.c -- name map files of `hkc run --weights-map` (docs/WEIGHTS.md): which
 * checkpoint tensor each pack tensor takes when their names differ.
 *
 *   # pack name        checkpoint name
 *   w_qkv              encoder.layer.0.attention.qkv.weight
 *
 * One pair per line, two fields separated by spaces or tabs; blank lines and lines whose
 * first non-blank character is '#' are skipped. The parse splits a private copy of the text
 * in place, so names[] point into it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"

/* Most entries of one map: above any model's tensor count (a 70B Llama has ~700), and small
 * enough that the quadratic duplicate check stays instant. */
#define HKC_WEIGHTS_MAP_MAX 16384u

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* The next field of line at *p (advanced past it), NUL-terminated in place; NULL at the end. */
static char *next_field(char **p) {
  char *s = *p;
  while (*s && is_blank(*s)) s++;
  if (!*s) return NULL;
  char *start = s;
  while (*s && !is_blank(*s)) s++;
  if (*s) *s++ = '\0';
  *p = s;
  return start;
}

int hkc_weights_map_parse(const char *name, const char *text, size_t size, hkc_weights_map_t *out) {
  memset(out, 0, sizeof *out);
  if (memchr(text, '\0', size)) {
    fprintf(stderr, "%s: contains a NUL byte (a name map is text)\n", name);
    return -1;
  }
  out->text = malloc(size + 1);
  if (!out->text) return -1;
  memcpy(out->text, text, size);
  out->text[size] = '\0';
  uint32_t cap = 0, line_no = 0;
  for (char *line = out->text; line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    line_no++;
    char *p = line, *tensor = next_field(&p);
    line = nl ? nl + 1 : NULL;
    if (!tensor || tensor[0] == '#') continue;
    char *weights = next_field(&p), *extra = weights ? next_field(&p) : NULL;
    if (!weights || extra) {
      fprintf(stderr, "%s:%u: expected two names, \"PACK_NAME CHECKPOINT_NAME\"\n", name, line_no);
      goto fail;
    }
    for (uint32_t i = 0; i < out->count; i++)
      if (strcmp(out->names[i].tensor, tensor) == 0) {
        fprintf(stderr, "%s:%u: %s is mapped twice\n", name, line_no, hkc_escaped(tensor));
        goto fail;
      }
    if (out->count == cap) {
      if (cap >= HKC_WEIGHTS_MAP_MAX) {
        fprintf(stderr, "%s:%u: more than %u entries\n", name, line_no, HKC_WEIGHTS_MAP_MAX);
        goto fail;
      }
      cap = cap ? cap * 2 : 16;
      hk_weights_name_t *grown = realloc(out->names, cap * sizeof *grown);
      if (!grown) goto fail;
      out->names = grown;
    }
    out->names[out->count++] = (hk_weights_name_t){tensor, weights};
  }
  return 0;
fail:
  hkc_weights_map_free(out);
  return -1;
}

int hkc_weights_map_read(const char *path, hkc_weights_map_t *out) {
  memset(out, 0, sizeof *out);
  char *text;
  size_t size;
  if (hkc_read_file(path, &text, &size) != 0) {
    fprintf(stderr, "cannot read %s: %s\n", path, hkc_strerror(errno));
    return -1;
  }
  int rc = hkc_weights_map_parse(path, text, size, out);
  free(text);
  return rc;
}

void hkc_weights_map_free(hkc_weights_map_t *map) {
  free(map->names);
  free(map->text);
  memset(map, 0, sizeof *map);
}
