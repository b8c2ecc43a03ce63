/* SPDX-License-Identifier: Apache-2.0 */
/* spec_yaml.c -- the spec's YAML (spec_internal.h): libyaml's events into a small tree of maps,
 * lists and scalars, each with its 1-based line:col (aliases, several documents and deep
 * nesting refused), and typed access to the tree's nodes that reports FILE:LINE:COL. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "frontend/frontend.h"
#include "frontend/spec_internal.h"
#include "util/util.h"

/* ---- the YAML tree ------------------------------------------------------------ */
void hkc_spec_ynode_free(ynode_t *n) {
  if (!n) return;
  for (size_t i = 0; i < n->n; i++) hkc_spec_ynode_free(n->kids[i]);
  free(n->kids);
  free(n->text);
  free(n);
}

static hkc_loc_t mark_loc(const char *file, yaml_mark_t m) {
  hkc_loc_t loc = {file, m.line < INT32_MAX ? (int)m.line + 1 : INT32_MAX,
                   m.column < INT32_MAX ? (int)m.column + 1 : INT32_MAX};
  return loc;
}

/* FILE:LINE:COL of a byte offset: libyaml's reader errors (invalid UTF-8, control
 * characters) come with an offset, not a mark. The column counts characters (UTF-8 lead
 * bytes), as libyaml's marks do. */
static hkc_loc_t offset_loc(const char *file, const char *data, size_t size, size_t offset) {
  hkc_loc_t loc = {file, 1, 1};
  for (size_t i = 0; i < offset && i < size; i++) {
    if (data[i] == '\n') {
      loc.line += loc.line < INT32_MAX;
      loc.col = 1;
    } else if (((unsigned char)data[i] & 0xc0) != 0x80) {
      loc.col += loc.col < INT32_MAX;
    }
  }
  return loc;
}

static void report_yaml_error(const char *file, const char *data, size_t size, const yaml_parser_t *p) {
  const char *problem = p->problem ? p->problem : "unknown problem";
  if (p->error == YAML_MEMORY_ERROR) {
    hkc_error((hkc_loc_t){file, 0, 0}, "out of memory while reading YAML");
  } else if (p->error == YAML_READER_ERROR) {
    hkc_error(offset_loc(file, data, size, p->problem_offset), "YAML error: %s (byte %zu; a spec is UTF-8 text)",
              problem, p->problem_offset);
  } else if (p->context) {
    hkc_error(mark_loc(file, p->problem_mark), "YAML syntax error: %s (%s at %d:%d)", problem, p->context,
              (int)p->context_mark.line + 1, (int)p->context_mark.column + 1);
  } else {
    hkc_error(mark_loc(file, p->problem_mark), "YAML syntax error: %s", problem);
  }
}

ynode_t *hkc_spec_ynode_new(ykind_t kind, hkc_loc_t loc) {
  ynode_t *n = calloc(1, sizeof *n);
  if (n) {
    n->kind = kind;
    n->loc = loc;
  }
  return n;
}

/* Whether s holds a control byte (0x01..0x1f, 0x7f): YAML's quoted escapes ("\e", "\x1b",
 * "\n") make them, and no spec value has a use for one; every later message that quotes a
 * spec string may then print it as it is. */
static int has_control(const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p < 0x20 || *p == 0x7f) return 1;
  return 0;
}

/* Parses the bytes into a tree. *out_root is NULL for an empty document. 0 / -1
 * (reported). The caller frees the tree. */
int hkc_spec_yaml_tree_build(const char *file, const char *data, size_t size, ynode_t **out_root) {
  yaml_parser_t parser;
  ynode_t *stack[HKC_SPEC_MAX_DEPTH];
  int depth = 0, docs = 0, rc = -1;
  ynode_t *root = NULL;
  *out_root = NULL;
  if (!yaml_parser_initialize(&parser)) {
    hkc_error((hkc_loc_t){file, 0, 0}, "out of memory");
    return -1;
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)data, size);
  for (;;) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&parser, &ev)) {
      report_yaml_error(file, data, size, &parser);
      goto done;
    }
    hkc_loc_t loc = mark_loc(file, ev.start_mark);
    int stop = 0, bad = 0;
    ynode_t *node = NULL;
    switch (ev.type) {
    case YAML_STREAM_END_EVENT: stop = 1; break;
    case YAML_DOCUMENT_START_EVENT:
      if (++docs > 1) {
        hkc_error(loc, "a spec is one YAML document; found a second one here");
        bad = 1;
      }
      break;
    case YAML_ALIAS_EVENT:
      hkc_error(loc, "YAML aliases (*%s) are not supported in a spec", hkc_escaped((const char *)ev.data.alias.anchor));
      bad = 1;
      break;
    case YAML_SCALAR_EVENT:
      if (memchr(ev.data.scalar.value, 0, ev.data.scalar.length)) {
        hkc_error(loc, "NUL character in a string");
        bad = 1;
        break;
      }
      if (has_control((const char *)ev.data.scalar.value)) { /* "\e[2J" in quotes: never echoed raw */
        hkc_error(loc, "control character in the string \"%s\" (spec strings are names, numbers and expressions)",
                  hkc_escaped((const char *)ev.data.scalar.value));
        bad = 1;
        break;
      }
      node = hkc_spec_ynode_new(Y_SCALAR, loc);
      if (node) {
        node->text = hkc_strdup((const char *)ev.data.scalar.value);
        node->quoted = ev.data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                       ev.data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        node->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
      }
      break;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT:
      if (depth >= HKC_SPEC_MAX_DEPTH) {
        hkc_error(loc, "YAML nested too deeply (more than %d levels)", HKC_SPEC_MAX_DEPTH);
        bad = 1;
        break;
      }
      node = hkc_spec_ynode_new(ev.type == YAML_SEQUENCE_START_EVENT ? Y_SEQ : Y_MAP, loc);
      break;
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
      if (depth > 0) depth--;
      break;
    default: break;
    }
    int is_node = ev.type == YAML_SCALAR_EVENT || ev.type == YAML_SEQUENCE_START_EVENT ||
                  ev.type == YAML_MAPPING_START_EVENT;
    yaml_event_delete(&ev);
    if (bad) goto done;
    if (is_node) {
      if (!node || (node->kind == Y_SCALAR && !node->text)) {
        hkc_spec_ynode_free(node);
        hkc_error(loc, "out of memory");
        goto done;
      }
      if (depth == 0) {
        root = node; /* one document, one root */
      } else {
        ynode_t *parent = stack[depth - 1];
        if (hkc_reserve((void **)&parent->kids, &parent->cap, parent->n + 1, sizeof *parent->kids) != 0) {
          hkc_spec_ynode_free(node);
          hkc_error(loc, "out of memory");
          goto done;
        }
        parent->kids[parent->n++] = node;
      }
      if (node->kind != Y_SCALAR) stack[depth++] = node;
    }
    if (stop) break;
  }
  *out_root = root;
  root = NULL;
  rc = 0;
done:
  hkc_spec_ynode_free(root);
  yaml_parser_delete(&parser);
  return rc;
}

/* ---- typed access to tree nodes ---------------------------------------------------- */
int hkc_spec_ynode_is_null(const ynode_t *n) {
  return n->kind == Y_SCALAR && n->plain &&
         (n->text[0] == '\0' || !strcmp(n->text, "~") || !strcmp(n->text, "null") || !strcmp(n->text, "Null") ||
          !strcmp(n->text, "NULL"));
}

/* What a node is, for "expected X, got Y" messages (callers quote scalar text). */
const char *hkc_spec_ynode_desc(const ynode_t *n) {
  if (n->kind == Y_MAP) return "a map";
  if (n->kind == Y_SEQ) return "a list";
  if (hkc_spec_ynode_is_null(n)) return "nothing (null)";
  return "a scalar";
}

/* Checks the node kind; "what" names the key in the message. */
int hkc_spec_expect_kind(const ynode_t *n, ykind_t kind, const char *expected, const char *what) {
  if (n->kind == kind && !(kind == Y_SCALAR && hkc_spec_ynode_is_null(n))) return 0;
  if (n->kind == Y_SCALAR && !hkc_spec_ynode_is_null(n))
    hkc_error(n->loc, "expected %s for '%s', got '%.64s'", expected, what, n->text);
  else
    hkc_error(n->loc, "expected %s for '%s', got %s", expected, what, hkc_spec_ynode_desc(n));
  return -1;
}

/* The column where a scalar's text starts (after an opening quote). */
hkc_loc_t hkc_spec_scalar_text_loc(const ynode_t *n) {
  hkc_loc_t loc = n->loc;
  if (n->quoted) loc.col++;
  return loc;
}

int hkc_spec_parse_int(const ynode_t *n, const char *what, int64_t min, int64_t max, int64_t *out) {
  if (hkc_spec_expect_kind(n, Y_SCALAR, "an integer", what) != 0) return -1;
  const char *s = n->text;
  int neg = 0;
  if (*s == '-' || *s == '+') neg = *s++ == '-';
  int64_t v = 0;
  if (!*s) goto bad;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') goto bad;
    if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, neg ? -(*s - '0') : *s - '0', &v)) {
      hkc_error(n->loc, "'%s' is out of range (%lld to %lld)", what, (long long)min, (long long)max);
      return -1;
    }
  }
  if (v < min || v > max) {
    hkc_error(n->loc, "'%s' must be between %lld and %lld, got %lld", what, (long long)min, (long long)max,
              (long long)v);
    return -1;
  }
  *out = v;
  return 0;
bad:
  hkc_error(n->loc, "expected an integer for '%s', got '%.64s'", what, n->text);
  return -1;
}

int hkc_spec_parse_float(const ynode_t *n, const char *what, float *out) {
  if (hkc_spec_expect_kind(n, Y_SCALAR, "a number", what) != 0) return -1;
  errno = 0;
  char *end = NULL;
  double v = strtod(n->text, &end);
  if (end == n->text || *end != '\0' || errno == ERANGE || !isfinite(v) || fabs(v) > FLT_MAX) {
    hkc_error(n->loc, "expected a finite number for '%s', got '%.64s'", what, n->text);
    return -1;
  }
  *out = (float)v;
  return 0;
}

int hkc_spec_parse_bool(const ynode_t *n, const char *what, int *out) {
  if (hkc_spec_expect_kind(n, Y_SCALAR, "true or false", what) != 0) return -1;
  static const char *const yes[] = {"true", "True", "TRUE"}, *const no[] = {"false", "False", "FALSE"};
  for (int i = 0; i < 3; i++) {
    if (!strcmp(n->text, yes[i])) return *out = 1, 0;
    if (!strcmp(n->text, no[i])) return *out = 0, 0;
  }
  hkc_error(n->loc, "expected true or false for '%s', got '%.64s'", what, n->text);
  return -1;
}

int hkc_spec_is_identifier(const char *s) {
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
  for (s++; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
  return 1;
}

/* A tensor, node or dim name: an identifier of at most HK_MAX_NAME_LEN bytes. */
int hkc_spec_parse_name(const ynode_t *n, const char *what, const char **out) {
  if (hkc_spec_expect_kind(n, Y_SCALAR, "a name", what) != 0) return -1;
  if (!hkc_spec_is_identifier(n->text) || strlen(n->text) > HK_MAX_NAME_LEN) {
    hkc_error(n->loc,
              "'%.64s' is not a valid %s name (letters, digits and '_', not starting with a digit, at most %u bytes)",
              n->text, what, HK_MAX_NAME_LEN);
    return -1;
  }
  *out = n->text;
  return 0;
}

/* Sorts a map's pairs into slots by key. Keys outside `valid` (or outside `mask`, a
 * bit per valid index) are "unknown key" errors naming the valid keys; a key given
 * twice is a "duplicate key" error. values[i] / keys[i] stay NULL for absent keys. */
int hkc_spec_map_collect(const ynode_t *map, const char *const *valid, size_t n_valid, uint64_t mask,
                         const char *context, const ynode_t **keys, const ynode_t **values) {
  for (size_t i = 0; i < n_valid; i++) keys[i] = values[i] = NULL;
  for (size_t p = 0; p + 1 < map->n; p += 2) {
    const ynode_t *k = map->kids[p];
    if (k->kind != Y_SCALAR) {
      hkc_error(k->loc, "map keys must be strings, got %s", hkc_spec_ynode_desc(k));
      return -1;
    }
    size_t idx = n_valid;
    for (size_t i = 0; i < n_valid; i++)
      if ((mask >> i & 1u) && !strcmp(valid[i], k->text)) idx = i;
    if (idx == n_valid) {
      char list[512];
      size_t len = 0;
      list[0] = '\0';
      for (size_t i = 0; i < n_valid; i++)
        if ((mask >> i & 1u) && len < sizeof list)
          len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", valid[i]);
      hkc_error(k->loc, "unknown key '%.64s'%s (valid keys: %s)", k->text, context, list);
      return -1;
    }
    if (keys[idx]) {
      hkc_error(k->loc, "duplicate key '%s' (first given at %d:%d)", k->text, keys[idx]->loc.line,
                keys[idx]->loc.col);
      return -1;
    }
    keys[idx] = k;
    values[idx] = map->kids[p + 1];
  }
  return 0;
}

/* The value of `key` in a node map (already validated by hkc_spec_map_collect), or NULL. */
const ynode_t *hkc_spec_map_value(const ynode_t *map, const char *key) {
  for (size_t p = 0; p + 1 < map->n; p += 2)
    if (map->kids[p]->kind == Y_SCALAR && !strcmp(map->kids[p]->text, key)) return map->kids[p + 1];
  return NULL;
}
