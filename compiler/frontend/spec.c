/* SPDX-License-Identifier: Apache-2.0 */
/* spec.c -- YAML pipeline spec (format v1) -> validated hkc_spec_t.
 *
 * Two steps. libyaml's event parser builds a small tree of maps, lists and scalars,
 * each with its 1-based line:col; aliases, several documents and deep nesting are
 * refused there. Then the tree is checked against the schema (docs/SPEC.md) in a
 * fixed order -- version, name, dtype, batch sizes, batch policy, dims, targets, inputs,
 * params, state, graph, outputs, fusion -- so that dims exist before shapes use them. Graph
 * nodes may be written in any order: they are sorted topologically (producers first, written
 * order kept where possible) before shapes are inferred. The first problem is
 * reported as FILE:LINE:COL and parsing stops. */
#include <assert.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "frontend/frontend.h"
#include "util/util.h"

/* Nesting bound for the YAML tree: a spec needs 4 levels (graph > node > in > name);
 * the bound keeps the recursive walks shallow on hostile input. */
#define HKC_SPEC_MAX_DEPTH 64
/* Nodes per spec. Name lookups are linear, so this also bounds the quadratic work. */
#define HKC_SPEC_MAX_NODES 16384u
/* Batch sizes end up in launch dimensions (uint32). */
#define HKC_SPEC_MAX_BATCH INT32_MAX
/* One tensor's bytes at the largest batch size: far above any device memory, low
 * enough that later stages can add and align sizes without overflow. */
#define HKC_SPEC_MAX_TENSOR_BYTES (INT64_C(1) << 48)
/* hkc_target_out_t.name holds 64 bytes. */
#define HKC_SPEC_MAX_TARGET_LEN 63u
#define HKC_SPEC_DEFAULT_EPS 1e-5f
/* rope converts positions to f32 for the angle: up to 2^24 every position is exact,
 * beyond it neighbouring positions would share an angle. offset + seq stays at most this. */
#define HKC_SPEC_MAX_ROPE_POSITIONS (INT64_C(1) << 24)
#define HKC_SPEC_VERSION 1

/* ---- the YAML tree ------------------------------------------------------------ */
typedef enum ykind { Y_SCALAR, Y_SEQ, Y_MAP } ykind_t;

typedef struct ynode {
  ykind_t kind;
  hkc_loc_t loc;          /* start mark, 1-based */
  char *text;             /* scalar: NUL-terminated, no embedded NUL */
  int quoted;             /* scalar written in '...' or "..." */
  int plain;              /* scalar written without quotes or block indicators */
  struct ynode **kids;    /* list items, or map key/value pairs interleaved */
  size_t n, cap;
} ynode_t;

static void ynode_free(ynode_t *n) {
  if (!n) return;
  for (size_t i = 0; i < n->n; i++) ynode_free(n->kids[i]);
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

static ynode_t *ynode_new(ykind_t kind, hkc_loc_t loc) {
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
static int yaml_tree_build(const char *file, const char *data, size_t size, ynode_t **out_root) {
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
      node = ynode_new(Y_SCALAR, loc);
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
      node = ynode_new(ev.type == YAML_SEQUENCE_START_EVENT ? Y_SEQ : Y_MAP, loc);
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
        ynode_free(node);
        hkc_error(loc, "out of memory");
        goto done;
      }
      if (depth == 0) {
        root = node; /* one document, one root */
      } else {
        ynode_t *parent = stack[depth - 1];
        if (hkc_reserve((void **)&parent->kids, &parent->cap, parent->n + 1, sizeof *parent->kids) != 0) {
          ynode_free(node);
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
  ynode_free(root);
  yaml_parser_delete(&parser);
  return rc;
}

/* ---- typed access to tree nodes ---------------------------------------------------- */
static int ynode_is_null(const ynode_t *n) {
  return n->kind == Y_SCALAR && n->plain &&
         (n->text[0] == '\0' || !strcmp(n->text, "~") || !strcmp(n->text, "null") || !strcmp(n->text, "Null") ||
          !strcmp(n->text, "NULL"));
}

/* What a node is, for "expected X, got Y" messages (callers quote scalar text). */
static const char *ynode_desc(const ynode_t *n) {
  if (n->kind == Y_MAP) return "a map";
  if (n->kind == Y_SEQ) return "a list";
  if (ynode_is_null(n)) return "nothing (null)";
  return "a scalar";
}

/* Checks the node kind; "what" names the key in the message. */
static int expect_kind(const ynode_t *n, ykind_t kind, const char *expected, const char *what) {
  if (n->kind == kind && !(kind == Y_SCALAR && ynode_is_null(n))) return 0;
  if (n->kind == Y_SCALAR && !ynode_is_null(n))
    hkc_error(n->loc, "expected %s for '%s', got '%.64s'", expected, what, n->text);
  else
    hkc_error(n->loc, "expected %s for '%s', got %s", expected, what, ynode_desc(n));
  return -1;
}

/* The column where a scalar's text starts (after an opening quote). */
static hkc_loc_t scalar_text_loc(const ynode_t *n) {
  hkc_loc_t loc = n->loc;
  if (n->quoted) loc.col++;
  return loc;
}

static int parse_int(const ynode_t *n, const char *what, int64_t min, int64_t max, int64_t *out) {
  if (expect_kind(n, Y_SCALAR, "an integer", what) != 0) return -1;
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

static int parse_float(const ynode_t *n, const char *what, float *out) {
  if (expect_kind(n, Y_SCALAR, "a number", what) != 0) return -1;
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

static int parse_bool(const ynode_t *n, const char *what, int *out) {
  if (expect_kind(n, Y_SCALAR, "true or false", what) != 0) return -1;
  static const char *const yes[] = {"true", "True", "TRUE"}, *const no[] = {"false", "False", "FALSE"};
  for (int i = 0; i < 3; i++) {
    if (!strcmp(n->text, yes[i])) return *out = 1, 0;
    if (!strcmp(n->text, no[i])) return *out = 0, 0;
  }
  hkc_error(n->loc, "expected true or false for '%s', got '%.64s'", what, n->text);
  return -1;
}

static int is_identifier(const char *s) {
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_')) return 0;
  for (s++; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_')) return 0;
  return 1;
}

/* A tensor, node or dim name: an identifier of at most HK_MAX_NAME_LEN bytes. */
static int parse_name(const ynode_t *n, const char *what, const char **out) {
  if (expect_kind(n, Y_SCALAR, "a name", what) != 0) return -1;
  if (!is_identifier(n->text) || strlen(n->text) > HK_MAX_NAME_LEN) {
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
static int map_collect(const ynode_t *map, const char *const *valid, size_t n_valid, uint64_t mask,
                       const char *context, const ynode_t **keys, const ynode_t **values) {
  for (size_t i = 0; i < n_valid; i++) keys[i] = values[i] = NULL;
  for (size_t p = 0; p + 1 < map->n; p += 2) {
    const ynode_t *k = map->kids[p];
    if (k->kind != Y_SCALAR) {
      hkc_error(k->loc, "map keys must be strings, got %s", ynode_desc(k));
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

/* ---- shapes ---------------------------------------------------------------------------- */
static size_t dim_print(hkc_dim_t d, char *out, size_t size) {
  int n;
  if (d.mul == 0) n = snprintf(out, size, "%lld", (long long)d.add);
  else if (d.mul == 1 && d.add == 0) n = snprintf(out, size, "batch");
  else if (d.add == 0) n = snprintf(out, size, "%lld*batch", (long long)d.mul);
  else n = snprintf(out, size, "%lld*batch%+lld", (long long)d.mul, (long long)d.add);
  return n < 0 ? 0 : (size_t)n >= size ? size - 1 : (size_t)n;
}

/* "[batch, 128, 768]" into a caller buffer (HKC_SHAPE_STR bytes). */
#define HKC_SHAPE_STR 192
static const char *shape_str(const hkc_dim_t *dims, uint32_t rank, char *buf) {
  size_t len = 0;
  buf[len++] = '[';
  for (uint32_t i = 0; i < rank && len < HKC_SHAPE_STR - 40; i++) {
    if (i) buf[len++] = ',', buf[len++] = ' ';
    len += dim_print(dims[i], buf + len, HKC_SHAPE_STR - 2 - len);
  }
  buf[len++] = ']';
  buf[len] = '\0';
  return buf;
}

static const char *tensor_shape_str(const hkc_tensor_t *t, char *buf) { return shape_str(t->dims, t->rank, buf); }

static int shape_equal(const hkc_dim_t *a, uint32_t ra, const hkc_dim_t *b, uint32_t rb) {
  if (ra != rb) return 0;
  for (uint32_t i = 0; i < ra; i++)
    if (!hkc_dim_equal(a[i], b[i])) return 0;
  return 1;
}

/* ---- the builder ---------------------------------------------------------------------------- */
enum {
  REF_IN0, REF_IN1, REF_IN2, REF_BIAS, REF_RESIDUAL, REF_MUL, REF_GAMMA, REF_BETA, REF_LENGTHS, REF_MASK, REF_POS,
  REF_CTX, REF_SLOT, REF_K_CACHE, REF_V_CACHE, REF_COUNT
};
static const char *const ref_names[REF_COUNT] = {"in",    "in",   "in",      "bias", "residual", "mul",
                                                 "gamma", "beta", "lengths", "mask", "pos",      "ctx",
                                                 "slot",  "k_cache", "v_cache"};

/* A graph node between parsing and sorting: names not yet resolved. */
typedef struct pnode {
  const ynode_t *map, *name, *out;
  const ynode_t *ref[REF_COUNT]; /* NULL when absent */
  int ref_val[REF_COUNT];        /* >= 0: declared tensor; <= -2: output of pnode -(v+2) */
  hkc_node_t node;               /* attributes; tensor fields filled after sorting */
} pnode_t;

typedef struct spec_ctx {
  hkc_spec_t *spec;
  const char *file;
  size_t cap_dims, cap_targets, cap_tensors;
  size_t n_decl; /* inputs + params: tensors[0, n_decl) */
  pnode_t *pn;
  size_t n_pn;
  /* name lookups in constant time: a 16384-node graph would otherwise spend minutes comparing
   * every name with every other (keys borrowed from the tensors and the YAML tree) */
  hkc_names_t tensor_names; /* tensor name -> index in spec->tensors */
  hkc_names_t node_names;   /* graph node name -> pnode index */
  hkc_names_t out_names;    /* node output name -> pnode index */
} spec_ctx_t;

static int add_tensor(spec_ctx_t *c, const char *name, hk_role_t role, hkc_loc_t loc) {
  hkc_spec_t *s = c->spec;
  const int dup = hkc_names_get(&c->tensor_names, name);
  if (dup >= 0) {
    hkc_error(loc, "duplicate tensor name '%s' (first declared at %d:%d)", name, s->tensors[dup].loc.line,
              s->tensors[dup].loc.col);
    return -1;
  }
  if (s->n_tensors >= HK_MAX_TENSORS) {
    hkc_error(loc, "too many tensors (at most %u)", HK_MAX_TENSORS);
    return -1;
  }
  if (hkc_reserve((void **)&s->tensors, &c->cap_tensors, s->n_tensors + 1, sizeof *s->tensors) != 0) {
    hkc_error(loc, "out of memory");
    return -1;
  }
  hkc_tensor_t *t = &s->tensors[s->n_tensors];
  memset(t, 0, sizeof *t);
  t->name = hkc_strdup(name);
  if (!t->name || hkc_names_put(&c->tensor_names, t->name, (int)s->n_tensors) != 0) {
    free(t->name);
    t->name = NULL;
    hkc_error(loc, "out of memory");
    return -1;
  }
  s->n_tensors++;
  t->role = role;
  t->dtype = s->dtype;
  t->producer = HKC_NONE;
  t->loc = loc;
  return (int)(s->n_tensors - 1);
}

/* A shape list: 1..HK_MAX_RANK expressions over the dims. */
static int parse_shape(spec_ctx_t *c, const ynode_t *n, const char *what, hkc_tensor_t *t) {
  if (expect_kind(n, Y_SEQ, "a shape list like [batch, seq, hidden]", what) != 0) return -1;
  if (n->n < 1 || n->n > HK_MAX_RANK) {
    hkc_error(n->loc, "shape of '%s' must have 1 to %u dims, got %zu", what, HK_MAX_RANK, n->n);
    return -1;
  }
  for (size_t i = 0; i < n->n; i++) {
    const ynode_t *d = n->kids[i];
    if (expect_kind(d, Y_SCALAR, "a dimension (integer or expression)", what) != 0) return -1;
    if (hkc_dimexpr_eval(d->text, c->spec->dims, c->spec->n_dims, scalar_text_loc(d), &t->dims[i]) != 0) return -1;
  }
  t->rank = (uint32_t)n->n;
  return 0;
}

static int parse_version(spec_ctx_t *c, const ynode_t *ver) {
  int64_t v;
  if (parse_int(ver, "hkc", INT32_MIN, INT32_MAX, &v) != 0) return -1;
  if (v != HKC_SPEC_VERSION) {
    hkc_error(ver->loc, "unsupported spec format version %lld (this hkc reads version %d)", (long long)v,
              HKC_SPEC_VERSION);
    return -1;
  }
  c->spec->version = (int)v;
  return 0;
}

static int parse_spec_name(spec_ctx_t *c, const ynode_t *name) {
  if (expect_kind(name, Y_SCALAR, "a string", "name") != 0) return -1;
  size_t len = strlen(name->text);
  int ok = len > 0 && len <= HK_MAX_NAME_LEN;
  for (const char *p = name->text; ok && *p; p++)
    ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
         *p == '-' || *p == '.';
  if (!ok) {
    hkc_error(name->loc, "invalid spec name '%.64s' (letters, digits, '_', '-' and '.', at most %u bytes)", name->text,
              HK_MAX_NAME_LEN);
    return -1;
  }
  return (c->spec->name = hkc_strdup(name->text)) ? 0 : -1;
}

/* dtype: f32 when absent. */
static int parse_dtype(spec_ctx_t *c, const ynode_t *dtype) {
  hkc_spec_t *s = c->spec;
  s->dtype = HK_DTYPE_F32;
  if (dtype) {
    if (expect_kind(dtype, Y_SCALAR, "a dtype", "dtype") != 0) return -1;
    int found = 0;
    for (int d = 0; d < HK_DTYPE_FLOAT_COUNT; d++)
      if (!strcmp(dtype->text, hkc_dtype_name((hk_dtype_t)d))) s->dtype = (hk_dtype_t)d, found = 1;
    if (!found) {
      hkc_error(dtype->loc, "unknown dtype '%.64s' (expected f32, f16 or bf16)", dtype->text);
      return -1;
    }
  }
  return 0;
}

static int parse_batch_sizes(spec_ctx_t *c, const ynode_t *n) {
  hkc_spec_t *s = c->spec;
  if (expect_kind(n, Y_SEQ, "a list of batch sizes", "batch_sizes") != 0) return -1;
  if (n->n == 0) {
    hkc_error(n->loc, "'batch_sizes' is empty (give at least one batch size)");
    return -1;
  }
  for (size_t i = 0; i < n->n; i++) {
    int64_t b;
    if (parse_int(n->kids[i], "batch_sizes", 1, HKC_SPEC_MAX_BATCH, &b) != 0) return -1;
    int at = 0;
    while (at < s->n_batch && s->batch_sizes[at] < b) at++;
    if (at < s->n_batch && s->batch_sizes[at] == b) continue; /* duplicates collapse */
    if (s->n_batch >= (int)HK_MAX_BATCH_BUCKETS) {
      hkc_error(n->kids[i]->loc, "too many batch sizes (at most %u)", HK_MAX_BATCH_BUCKETS);
      return -1;
    }
    memmove(&s->batch_sizes[at + 1], &s->batch_sizes[at], (size_t)(s->n_batch - at) * sizeof s->batch_sizes[0]);
    s->batch_sizes[at] = b;
    s->n_batch++;
  }
  return 0;
}

/* batch_policy: pad (default) | exact. */
static int parse_batch_policy(spec_ctx_t *c, const ynode_t *n) {
  c->spec->batch_policy = HK_BATCH_POLICY_REC_PAD;
  if (!n) return 0;
  if (expect_kind(n, Y_SCALAR, "pad or exact", "batch_policy") != 0) return -1;
  if (!strcmp(n->text, "pad")) return 0;
  if (!strcmp(n->text, "exact")) return c->spec->batch_policy = HK_BATCH_POLICY_REC_EXACT, 0;
  hkc_error(n->loc, "unknown batch policy '%.64s' (expected pad or exact)", n->text);
  return -1;
}

/* dims: name -> positive integer, or an expression over the dims above it. */
static int parse_dims(spec_ctx_t *c, const ynode_t *n) {
  hkc_spec_t *s = c->spec;
  if (expect_kind(n, Y_MAP, "a map of dim names to sizes", "dims") != 0) return -1;
  for (size_t p = 0; p + 1 < n->n; p += 2) {
    const ynode_t *k = n->kids[p], *v = n->kids[p + 1];
    const char *name;
    if (parse_name(k, "dim", &name) != 0) return -1;
    if (!strcmp(name, "batch")) {
      hkc_error(k->loc, "'batch' is the symbolic batch size and cannot be declared as a dim");
      return -1;
    }
    for (size_t i = 0; i < s->n_dims; i++) {
      if (!strcmp(s->dims[i].name, name)) {
        hkc_error(k->loc, "duplicate dim '%s' (first declared at %d:%d)", name, s->dims[i].loc.line,
                  s->dims[i].loc.col);
        return -1;
      }
    }
    if (expect_kind(v, Y_SCALAR, "a positive integer", name) != 0) return -1;
    hkc_dim_t d;
    if (hkc_dimexpr_eval(v->text, s->dims, s->n_dims, scalar_text_loc(v), &d) != 0) return -1;
    if (d.mul != 0) {
      hkc_error(v->loc, "dim '%s' must not depend on batch", name);
      return -1;
    }
    if (hkc_reserve((void **)&s->dims, &c->cap_dims, s->n_dims + 1, sizeof *s->dims) != 0) return -1;
    hkc_named_dim_t *nd = &s->dims[s->n_dims];
    if (!(nd->name = hkc_strdup(name))) return -1;
    nd->value = d.add;
    nd->loc = k->loc;
    s->n_dims++;
  }
  return 0;
}

static int add_target(spec_ctx_t *c, const char *name, hkc_loc_t loc) {
  hkc_spec_t *s = c->spec;
  if (hkc_reserve((void **)&s->targets, &c->cap_targets, s->n_targets + 1, sizeof *s->targets) != 0) return -1;
  if (!(s->targets[s->n_targets] = hkc_strdup(name))) return -1;
  s->n_targets++;
  return 0;
}

/* targets: names as written ("host", "gfx90a:xnack-", "sm_90"); checked by the build. */
static int parse_targets(spec_ctx_t *c, const ynode_t *n) {
  hkc_spec_t *s = c->spec;
  if (!n) return add_target(c, "host", (hkc_loc_t){c->file, 0, 0});
  if (expect_kind(n, Y_SEQ, "a list of target names", "targets") != 0) return -1;
  if (n->n == 0) {
    hkc_error(n->loc, "'targets' is empty (leave the key out for the default [host])");
    return -1;
  }
  if (n->n > HK_MAX_TARGETS) {
    hkc_error(n->loc, "too many targets (at most %u)", HK_MAX_TARGETS);
    return -1;
  }
  for (size_t i = 0; i < n->n; i++) {
    const ynode_t *t = n->kids[i];
    if (expect_kind(t, Y_SCALAR, "a target name", "targets") != 0) return -1;
    size_t len = strlen(t->text);
    int ok = len > 0 && len <= HKC_SPEC_MAX_TARGET_LEN;
    for (const char *p = t->text; ok && *p; p++)
      ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("_-.:+", *p);
    if (!ok) {
      hkc_error(t->loc, "invalid target name '%.64s' (like host, gfx90a, gfx90a:xnack-, sm_90; at most %u bytes)",
                t->text, HKC_SPEC_MAX_TARGET_LEN);
      return -1;
    }
    for (size_t j = 0; j < s->n_targets; j++) {
      if (!strcmp(s->targets[j], t->text)) {
        hkc_error(t->loc, "duplicate target '%s'", t->text);
        return -1;
      }
    }
    if (add_target(c, t->text, t->loc) != 0) return -1;
  }
  return 0;
}

/* A part's name (a checkpoint tensor's): the pack's tensor-name characters [A-Za-z0-9_.-], not
 * starting with '.' or '-' (the loader's rule for names that reach terminals and file names),
 * 1..HK_MAX_NAME_LEN bytes. Hugging Face names ("encoder.layer.0.attention.self.query.weight")
 * fit. */
static int part_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > HK_MAX_NAME_LEN || s[0] == '.' || s[0] == '-') return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
          *s == '.' || *s == '-'))
      return 0;
  return 1;
}

/* `parts: [name, ...]` of param `name`: 1..HK_MAX_PARTS distinct checkpoint names, kept in t. */
static int parse_parts(const ynode_t *v, const char *name, hkc_tensor_t *t) {
  if (expect_kind(v, Y_SEQ, "a list of checkpoint tensor names", "parts") != 0) return -1;
  if (v->n == 0 || v->n > HK_MAX_PARTS) {
    hkc_error(v->loc, "tensor '%s': 'parts' must list 1 to %u checkpoint tensors, got %zu", name, HK_MAX_PARTS, v->n);
    return -1;
  }
  t->parts = calloc(v->n, sizeof *t->parts);
  if (!t->parts) return hkc_error(v->loc, "out of memory"), -1;
  for (size_t i = 0; i < v->n; i++) {
    const ynode_t *e = v->kids[i];
    if (expect_kind(e, Y_SCALAR, "a checkpoint tensor name", "parts") != 0) return -1;
    if (!part_name_ok(e->text)) {
      hkc_error(e->loc,
                "tensor '%s': part '%.64s%s' is not a valid checkpoint tensor name (letters, digits, '_', '.' and '-', "
                "not starting with '.' or '-', 1 to %u bytes)",
                name, e->text, strlen(e->text) > 64 ? "..." : "", HK_MAX_NAME_LEN);
      return -1;
    }
    for (size_t j = 0; j < i; j++)
      if (!strcmp(v->kids[j]->text, e->text)) {
        hkc_error(e->loc, "tensor '%s': part '%s' is listed twice (first at %d:%d)", name, e->text,
                  v->kids[j]->loc.line, v->kids[j]->loc.col);
        return -1;
      }
    if (!(t->parts[i] = hkc_strdup(e->text))) return hkc_error(e->loc, "out of memory"), -1;
    t->n_parts = (uint32_t)i + 1;
  }
  return 0;
}

/* One declaration's value: a shape list, or {shape: [...], dtype: T, parts: [...]} where T is
 * the spec's dtype or, for an input, i32 (token ids, sequence lengths, ctx, slot), and parts
 * (params only) the checkpoint tensors the param concatenates along axis 0. */
static int parse_decl(spec_ctx_t *c, const ynode_t *v, const char *name, hk_role_t role, hkc_tensor_t *t) {
  if (v->kind != Y_MAP) return parse_shape(c, v, name, t);
  static const char *const keys[] = {"shape", "dtype", "parts"};
  const ynode_t *k[3], *val[3];
  char context[300];
  snprintf(context, sizeof context, " for tensor '%s'", name);
  for (size_t p = 0; role != HK_ROLE_PARAM && p + 1 < v->n; p += 2)
    if (v->kids[p]->kind == Y_SCALAR && !strcmp(v->kids[p]->text, "parts")) {
      hkc_error(v->kids[p]->loc,
                "tensor '%s': only params may have 'parts' (the checkpoint tensors a param is bound from)", name);
      return -1;
    }
  if (map_collect(v, keys, 3, role == HK_ROLE_PARAM ? 7u : 3u, context, k, val) != 0) return -1;
  if (!val[0]) {
    hkc_error(v->loc, "tensor '%s': missing required key 'shape'", name);
    return -1;
  }
  if (parse_shape(c, val[0], name, t) != 0) return -1;
  if (val[2]) {
    for (uint32_t d = 0; d < t->rank; d++)
      if (t->dims[d].mul != 0) {
        hkc_error(val[2]->loc, "tensor '%s': a param with 'parts' must not depend on batch (dimension %u does)", name,
                  d);
        return -1;
      }
    if (parse_parts(val[2], name, t) != 0) return -1;
  }
  if (!val[1]) return 0;
  if (expect_kind(val[1], Y_SCALAR, "a dtype", "dtype") != 0) return -1;
  if (!strcmp(val[1]->text, "i32")) {
    if (role != HK_ROLE_INPUT) {
      hkc_error(val[1]->loc,
                "tensor '%s': only inputs may be i32 (ids, lengths, ctx, slot); %s have the spec's dtype %s", name,
                role == HK_ROLE_STATE ? "state tensors" : "params", hkc_dtype_name(c->spec->dtype));
      return -1;
    }
    t->dtype = HK_DTYPE_I32;
  } else if (strcmp(val[1]->text, hkc_dtype_name(c->spec->dtype)) != 0) {
    hkc_error(val[1]->loc, "tensor '%s': dtype '%.64s' (expected the spec's dtype %s, or i32 for an input)", name,
              val[1]->text, hkc_dtype_name(c->spec->dtype));
    return -1;
  }
  return 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static const ynode_t *map_value(const ynode_t *map, const char *key);

/* No part may be named like a declared tensor (an input or a param): binding would give that
 * checkpoint tensor to both. Declared names are sorted once, so the check is O(P log N). */
static int check_part_names(spec_ctx_t *c, const ynode_t *params) {
  const hkc_spec_t *s = c->spec;
  size_t n = s->n_tensors, any = 0;
  for (size_t i = 0; i < n; i++) any += s->tensors[i].n_parts;
  if (!any) return 0;
  char **names = malloc(n * sizeof *names);
  if (!names) return hkc_error(params->loc, "out of memory"), -1;
  for (size_t i = 0; i < n; i++) names[i] = s->tensors[i].name;
  qsort(names, n, sizeof *names, cmp_name);
  int rc = 0;
  for (size_t p = 0; p + 1 < params->n && rc == 0; p += 2) {
    const ynode_t *v = params->kids[p + 1];
    const ynode_t *parts = v->kind == Y_MAP ? map_value(v, "parts") : NULL;
    for (size_t i = 0; parts && i < parts->n && rc == 0; i++) {
      const ynode_t *e = parts->kids[i];
      if (!bsearch(&e->text, names, n, sizeof *names, cmp_name)) continue;
      const hkc_tensor_t *t = &s->tensors[hkc_tensor_find(s, e->text)];
      hkc_error(e->loc,
                "tensor '%s': part '%s' is the name of %s '%s' (declared at %d:%d); a part must name a checkpoint "
                "tensor that no input or param is named after",
                params->kids[p]->text, e->text, t->role == HK_ROLE_INPUT ? "input" : "param", t->name, t->loc.line,
                t->loc.col);
      rc = -1;
    }
  }
  free(names);
  return rc;
}

/* A state tensor persists across runs of every batch size: its shape must not depend on batch. */
static int check_state_shape(const hkc_tensor_t *t) {
  char sh[HKC_SHAPE_STR];
  for (uint32_t d = 0; d < t->rank; d++)
    if (t->dims[d].mul != 0) {
      hkc_error(t->loc,
                "tensor '%s' %s: a state tensor must not depend on batch (dimension %u does): it persists across runs "
                "of every batch size (docs/GENERATE.md)",
                t->name, tensor_shape_str(t, sh), d);
      return -1;
    }
  return 0;
}

/* inputs / params / state: name -> shape, or name -> {shape, dtype[, parts]}. */
static int parse_decls(spec_ctx_t *c, const ynode_t *n, const char *what, hk_role_t role) {
  if (expect_kind(n, Y_MAP, "a map of tensor names to shapes", what) != 0) return -1;
  if (role == HK_ROLE_INPUT && n->n == 0) {
    hkc_error(n->loc, "'inputs' is empty (a graph needs at least one input)");
    return -1;
  }
  for (size_t p = 0; p + 1 < n->n; p += 2) {
    const char *name;
    if (parse_name(n->kids[p], "tensor", &name) != 0) return -1;
    int t = add_tensor(c, name, role, n->kids[p]->loc);
    if (t < 0) return -1;
    if (parse_decl(c, n->kids[p + 1], name, role, &c->spec->tensors[t]) != 0) return -1;
    if (role == HK_ROLE_STATE && check_state_shape(&c->spec->tensors[t]) != 0) return -1;
  }
  return role == HK_ROLE_PARAM ? check_part_names(c, n) : 0;
}

/* A count such as `heads`: a positive integer or an expression over the dims. */
static int parse_count(spec_ctx_t *c, const ynode_t *n, const char *what, int64_t *out) {
  if (expect_kind(n, Y_SCALAR, "a positive integer", what) != 0) return -1;
  hkc_dim_t d;
  if (hkc_dimexpr_eval(n->text, c->spec->dims, c->spec->n_dims, scalar_text_loc(n), &d) != 0) return -1;
  if (d.mul != 0 || d.add > INT32_MAX) {
    hkc_error(n->loc, "'%s' must be a positive integer below 2^31 that does not depend on batch", what);
    return -1;
  }
  *out = d.add;
  return 0;
}

/* ---- graph nodes ------------------------------------------------------------------------------ */
enum {
  NK_NAME, NK_OP, NK_IN, NK_OUT, NK_BIAS, NK_RESIDUAL, NK_ACT, NK_TRANS_B, NK_GAMMA, NK_BETA, NK_EPS,
  NK_HEADS, NK_KV_HEADS, NK_CAUSAL, NK_SCALE, NK_THETA, NK_OFFSET, NK_MUL, NK_LENGTHS, NK_MASK, NK_POS, NK_PACKED,
  NK_CTX, NK_SLOT, NK_K_CACHE, NK_V_CACHE, NK_LAYER, NK_WINDOW, NK_SCALING, NK_FACTOR, NK_LOW_FREQ, NK_HIGH_FREQ,
  NK_ORIGINAL_MAX, NK_COUNT
};
static const char *const node_keys[NK_COUNT] = {"name",  "op",   "in",  "out",   "bias",     "residual",
                                                "act",   "trans_b", "gamma", "beta", "eps", "heads",
                                                "kv_heads", "causal", "scale", "theta", "offset", "mul",
                                                "lengths", "mask", "pos", "packed", "ctx", "slot",
                                                "k_cache", "v_cache", "layer", "window", "scaling", "factor",
                                                "low_freq_factor", "high_freq_factor", "original_max"};
_Static_assert(NK_COUNT <= 64, "map_collect's mask has a bit per key");
#define NKB(k) (UINT64_C(1) << (k))
#define NK_COMMON (NKB(NK_NAME) | NKB(NK_OP) | NKB(NK_IN) | NKB(NK_OUT))
#define NK_ROPE_SCALING (NKB(NK_SCALING) | NKB(NK_FACTOR) | NKB(NK_LOW_FREQ) | NKB(NK_HIGH_FREQ) | NKB(NK_ORIGINAL_MAX))
/* kv_append's keys, all but layer and kv_heads required; kv_attention adds scale and window */
#define NK_KV (NKB(NK_HEADS) | NKB(NK_K_CACHE) | NKB(NK_V_CACHE) | NKB(NK_CTX) | NKB(NK_SLOT))

/* Keys each op accepts, and how many inputs `in` takes (min..max). */
static const struct op_info {
  uint64_t keys, required;
  int min_in, max_in;
} op_info[HK_OP_COUNT_] = {
    [HK_OP_GEMM] = {NK_COMMON | NKB(NK_BIAS) | NKB(NK_RESIDUAL) | NKB(NK_MUL) | NKB(NK_ACT) | NKB(NK_TRANS_B),
                    NK_COMMON, 2, 2},
    [HK_OP_ADD] = {NK_COMMON, NK_COMMON, 2, 2},
    [HK_OP_MUL] = {NK_COMMON, NK_COMMON, 2, 2},
    [HK_OP_RELU] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_GELU] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_SILU] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_GELU_TANH] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_TANH] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_EMBEDDING] = {NK_COMMON | NKB(NK_POS) | NKB(NK_CTX), NK_COMMON, 2, 2},
    [HK_OP_LAYERNORM] = {NK_COMMON | NKB(NK_GAMMA) | NKB(NK_BETA) | NKB(NK_EPS), NK_COMMON | NKB(NK_GAMMA) | NKB(NK_BETA),
                         1, 1},
    [HK_OP_RMSNORM] = {NK_COMMON | NKB(NK_GAMMA) | NKB(NK_EPS), NK_COMMON | NKB(NK_GAMMA), 1, 1},
    [HK_OP_SOFTMAX] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_ATTENTION] = {NK_COMMON | NKB(NK_HEADS) | NKB(NK_KV_HEADS) | NKB(NK_CAUSAL) | NKB(NK_SCALE) |
                             NKB(NK_LENGTHS) | NKB(NK_MASK),
                         NK_COMMON | NKB(NK_HEADS), 1, 3},
    [HK_OP_ROPE] = {NK_COMMON | NKB(NK_HEADS) | NKB(NK_KV_HEADS) | NKB(NK_THETA) | NKB(NK_OFFSET) | NKB(NK_PACKED) |
                        NKB(NK_CTX) | NK_ROPE_SCALING,
                    NK_COMMON | NKB(NK_HEADS), 1, 1},
    [HK_OP_KV_APPEND] = {NK_COMMON | NK_KV | NKB(NK_KV_HEADS) | NKB(NK_LAYER), NK_COMMON | NK_KV, 1, 1},
    [HK_OP_KV_ATTENTION] = {NK_COMMON | NK_KV | NKB(NK_KV_HEADS) | NKB(NK_LAYER) | NKB(NK_SCALE) | NKB(NK_WINDOW),
                            NK_COMMON | NK_KV, 1, 1},
    [HK_OP_TAKE_ROWS] = {NK_COMMON, NK_COMMON, 2, 2},
    [HK_OP_ARGMAX] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_SAMPLE] = {NK_COMMON, NK_COMMON, 2, 2},
};

/* heads and kv_heads (default heads), which must divide heads. */
static int parse_heads(spec_ctx_t *c, const ynode_t *const *v, const char *nm, hkc_node_t *nd) {
  int64_t h, kvh;
  if (parse_count(c, v[NK_HEADS], "heads", &h) != 0) return -1;
  kvh = h;
  if (v[NK_KV_HEADS] && parse_count(c, v[NK_KV_HEADS], "kv_heads", &kvh) != 0) return -1;
  if (h % kvh != 0) {
    hkc_error(v[NK_KV_HEADS]->loc, "node '%s': kv_heads (%lld) must divide heads (%lld)", nm, (long long)kvh,
              (long long)h);
    return -1;
  }
  nd->heads = (int)h;
  nd->kv_heads = (int)kvh;
  return 0;
}

/* A number that must be > 0 (rope scaling's factors). */
static int parse_positive(const ynode_t *n, const char *what, const char *nm, float *out) {
  if (parse_float(n, what, out) != 0) return -1;
  if (!(*out > 0)) {
    hkc_error(n->loc, "node '%s': '%s' must be positive, got %g", nm, what, (double)*out);
    return -1;
  }
  return 0;
}

/* rope's `scaling: none | linear | llama3` and its numbers (Hugging Face's rope_scaling):
 * linear takes `factor` > 0; llama3 also 0 < `low_freq_factor` < `high_freq_factor` and the
 * integer `original_max` (original_max_position_embeddings). A kind's numbers are required
 * with it and refused without it. */
static int parse_rope_scaling(const ynode_t *const *v, const char *nm, hkc_node_t *nd) {
  static const char *const kinds[] = {[HKC_ROPE_SCALING_NONE] = "none", [HKC_ROPE_SCALING_LINEAR] = "linear",
                                      [HKC_ROPE_SCALING_LLAMA3] = "llama3"};
  static const int llama3_keys[] = {NK_LOW_FREQ, NK_HIGH_FREQ, NK_ORIGINAL_MAX};
  nd->rope_scaling = HKC_ROPE_SCALING_NONE;
  if (v[NK_SCALING]) {
    if (expect_kind(v[NK_SCALING], Y_SCALAR, "none, linear or llama3", "scaling") != 0) return -1;
    int kind = -1;
    for (int k = 0; k < 3; k++)
      if (!strcmp(v[NK_SCALING]->text, kinds[k])) kind = k;
    if (kind < 0) {
      hkc_error(v[NK_SCALING]->loc, "node '%s': unknown rope scaling '%.64s' (expected none, linear or llama3)", nm,
                v[NK_SCALING]->text);
      return -1;
    }
    nd->rope_scaling = kind;
  }
  const int llama3 = nd->rope_scaling == HKC_ROPE_SCALING_LLAMA3;
  if (v[NK_FACTOR] && nd->rope_scaling == HKC_ROPE_SCALING_NONE) {
    hkc_error(v[NK_FACTOR]->loc, "node '%s': 'factor' is valid only with 'scaling: linear' or 'scaling: llama3'", nm);
    return -1;
  }
  int missing = nd->rope_scaling != HKC_ROPE_SCALING_NONE && !v[NK_FACTOR];
  for (size_t i = 0; i < 3; i++) {
    const int k = llama3_keys[i];
    if (v[k] && !llama3) {
      hkc_error(v[k]->loc, "node '%s': '%s' is valid only with 'scaling: llama3'", nm, node_keys[k]);
      return -1;
    }
    missing |= llama3 && !v[k];
  }
  if (missing) {
    hkc_error(v[NK_SCALING]->loc, "node '%s': 'scaling: %s' needs %s", nm, kinds[nd->rope_scaling],
              llama3 ? "'factor', 'low_freq_factor', 'high_freq_factor' and 'original_max'" : "'factor'");
    return -1;
  }
  if (nd->rope_scaling == HKC_ROPE_SCALING_NONE) return 0;
  if (parse_positive(v[NK_FACTOR], "factor", nm, &nd->rope_factor) != 0) return -1;
  if (!llama3) return 0;
  if (parse_positive(v[NK_LOW_FREQ], "low_freq_factor", nm, &nd->rope_low_freq) != 0 ||
      parse_float(v[NK_HIGH_FREQ], "high_freq_factor", &nd->rope_high_freq) != 0)
    return -1;
  if (!(nd->rope_high_freq > nd->rope_low_freq)) {
    hkc_error(v[NK_HIGH_FREQ]->loc, "node '%s': 'high_freq_factor' (%g) must be greater than 'low_freq_factor' (%g)",
              nm, (double)nd->rope_high_freq, (double)nd->rope_low_freq);
    return -1;
  }
  return parse_int(v[NK_ORIGINAL_MAX], "original_max", 1, HKC_SPEC_MAX_ROPE_POSITIONS, &nd->rope_original_max);
}

/* kv_append / kv_attention: heads, kv_heads, layer (default 0; the caches' layers are
 * checked with their shapes), and kv_attention's scale and window. */
static int parse_kv_attrs(spec_ctx_t *c, const ynode_t *const *v, const char *nm, hkc_node_t *nd) {
  int64_t layer = 0, window = 0;
  if (parse_heads(c, v, nm, nd) != 0) return -1;
  if (v[NK_LAYER] && parse_int(v[NK_LAYER], "layer", 0, INT32_MAX, &layer) != 0) return -1;
  if (v[NK_WINDOW] && parse_int(v[NK_WINDOW], "window", 1, INT32_MAX, &window) != 0) return -1;
  nd->layer = (int)layer;
  nd->window = (int)window;
  if (v[NK_SCALE]) {
    if (parse_float(v[NK_SCALE], "scale", &nd->scale) != 0) return -1;
    nd->has_scale = 1;
  }
  return 0;
}

/* Parses one node map: keys, attributes and tensor names (unresolved). */
static int parse_node(spec_ctx_t *c, const ynode_t *map, pnode_t *pn) {
  memset(pn, 0, sizeof *pn);
  pn->map = map;
  hkc_node_t *nd = &pn->node;
  nd->bias = nd->residual = nd->mul = nd->gamma = nd->beta = nd->add_in = nd->sum_out = nd->out = HKC_NONE;
  nd->lengths = nd->mask = nd->pos = nd->ctx = nd->slot = nd->k_cache = nd->v_cache = HKC_NONE;
  for (int i = 0; i < HKC_MAX_NODE_IN; i++) nd->in[i] = HKC_NONE;
  nd->n_fused = 1;
  nd->theta = 10000.0f;
  nd->loc = map->loc;
  if (expect_kind(map, Y_MAP, "a node map {name, op, in, out, ...}", "graph") != 0) return -1;

  const ynode_t *opv = NULL, *namev = NULL;
  for (size_t p = 0; p + 1 < map->n; p += 2) {
    const ynode_t *k = map->kids[p];
    if (k->kind != Y_SCALAR) continue;
    if (!opv && !strcmp(k->text, "op")) opv = map->kids[p + 1];
    if (!namev && !strcmp(k->text, "name") && map->kids[p + 1]->kind == Y_SCALAR) namev = map->kids[p + 1];
  }
  if (!opv) {
    if (namev)
      hkc_error(map->loc, "node '%.64s': missing required key 'op'", namev->text);
    else
      hkc_error(map->loc, "node: missing required key 'op'");
    return -1;
  }
  if (expect_kind(opv, Y_SCALAR, "an op name", "op") != 0) return -1;
  int op = -1;
  for (int o = 0; o < HK_OP_COUNT_; o++)
    if (op_info[o].keys && !strcmp(opv->text, hkc_op_name((hk_op_t)o))) op = o; /* ewchain: fusion only */
  if (op < 0) {
    hkc_error(opv->loc,
              "unknown op '%.64s' (ops: gemm, add, mul, relu, gelu, silu, gelu_tanh, tanh, layernorm, rmsnorm, softmax, "
              "attention, rope, embedding, kv_append, kv_attention, take_rows, argmax, sample)",
              opv->text);
    return -1;
  }
  nd->op = (hk_op_t)op;
  const struct op_info *info = &op_info[op];
  const ynode_t *keys[NK_COUNT], *v[NK_COUNT];
  char context[64];
  snprintf(context, sizeof context, " for op '%s'", hkc_op_name(nd->op));
  if (map_collect(map, node_keys, NK_COUNT, info->keys, context, keys, v) != 0) return -1;
  const char *tmp;
  if (v[NK_NAME] && parse_name(v[NK_NAME], "node", &tmp) != 0) return -1;
  for (int k = 0; k < NK_COUNT; k++) {
    if ((info->required >> k & 1u) && !v[k]) {
      if (v[NK_NAME])
        hkc_error(map->loc, "node '%s': missing required key '%s'", v[NK_NAME]->text, node_keys[k]);
      else
        hkc_error(map->loc, "node: missing required key '%s'", node_keys[k]);
      return -1;
    }
  }
  pn->name = v[NK_NAME];
  const char *nm = pn->name->text;

  if (expect_kind(v[NK_IN], Y_SEQ, "a list of tensor names", "in") != 0) return -1;
  const ynode_t *in = v[NK_IN];
  if ((int)in->n < info->min_in || (int)in->n > info->max_in) {
    if (info->min_in == info->max_in)
      hkc_error(in->loc, "node '%s': op '%s' takes %d input%s in 'in', got %zu", nm, hkc_op_name(nd->op),
                info->min_in, info->min_in == 1 ? "" : "s", in->n);
    else
      hkc_error(in->loc, "node '%s': op 'attention' takes 1 (packed qkv) or 3 (q, k, v) inputs in 'in', got %zu", nm,
                in->n);
    return -1;
  }
  if (nd->op == HK_OP_ATTENTION && in->n == 2) {
    hkc_error(in->loc, "node '%s': op 'attention' takes 1 (packed qkv) or 3 (q, k, v) inputs in 'in', got 2", nm);
    return -1;
  }
  nd->n_in = (int)in->n;
  for (size_t i = 0; i < in->n; i++) {
    if (parse_name(in->kids[i], "tensor", &tmp) != 0) return -1;
    pn->ref[REF_IN0 + i] = in->kids[i];
  }
  if (parse_name(v[NK_OUT], "tensor", &tmp) != 0) return -1;
  pn->out = v[NK_OUT];
  static const int ref_keys[][2] = {
      {NK_BIAS, REF_BIAS}, {NK_RESIDUAL, REF_RESIDUAL}, {NK_MUL, REF_MUL},     {NK_GAMMA, REF_GAMMA},
      {NK_BETA, REF_BETA}, {NK_LENGTHS, REF_LENGTHS},   {NK_MASK, REF_MASK}, {NK_POS, REF_POS},
      {NK_CTX, REF_CTX},   {NK_SLOT, REF_SLOT},         {NK_K_CACHE, REF_K_CACHE}, {NK_V_CACHE, REF_V_CACHE}};
  for (size_t i = 0; i < sizeof ref_keys / sizeof ref_keys[0]; i++) {
    const ynode_t *r = v[ref_keys[i][0]];
    if (!r) continue;
    if (parse_name(r, "tensor", &tmp) != 0) return -1;
    pn->ref[ref_keys[i][1]] = r;
  }

  nd->act = HK_ACT_NONE;
  if (v[NK_ACT]) {
    if (expect_kind(v[NK_ACT], Y_SCALAR, "an activation", "act") != 0) return -1;
    int act = -1;
    for (int a = 0; a < HK_ACT_COUNT_; a++)
      if (!strcmp(v[NK_ACT]->text, hkc_act_name((hk_act_t)a))) act = a;
    if (act < 0) {
      hkc_error(v[NK_ACT]->loc, "unknown act '%.64s' (expected none, relu, gelu, silu or gelu_tanh)", v[NK_ACT]->text);
      return -1;
    }
    nd->act = (hk_act_t)act;
  }
  if (v[NK_TRANS_B] && parse_bool(v[NK_TRANS_B], "trans_b", &nd->trans_b) != 0) return -1;
  if (nd->op == HK_OP_LAYERNORM || nd->op == HK_OP_RMSNORM) {
    nd->eps = HKC_SPEC_DEFAULT_EPS;
    if (v[NK_EPS]) {
      if (parse_float(v[NK_EPS], "eps", &nd->eps) != 0) return -1;
      if (nd->eps < 0) {
        hkc_error(v[NK_EPS]->loc, "'eps' must not be negative, got %g", (double)nd->eps);
        return -1;
      }
    }
  }
  if (nd->op == HK_OP_KV_APPEND || nd->op == HK_OP_KV_ATTENTION) return parse_kv_attrs(c, v, nm, nd);
  if (nd->op == HK_OP_EMBEDDING && v[NK_CTX] && !v[NK_POS]) {
    hkc_error(v[NK_CTX]->loc, "node '%s': 'ctx' is valid only with 'pos' (it picks each token's position row)", nm);
    return -1;
  }
  if (nd->op == HK_OP_ATTENTION) {
    if (parse_heads(c, v, nm, nd) != 0) return -1;
    if (v[NK_CAUSAL] && parse_bool(v[NK_CAUSAL], "causal", &nd->causal) != 0) return -1;
    if (v[NK_SCALE]) {
      if (parse_float(v[NK_SCALE], "scale", &nd->scale) != 0) return -1;
      nd->has_scale = 1;
    }
  }
  if (nd->op == HK_OP_ROPE) {
    if (v[NK_PACKED] && parse_bool(v[NK_PACKED], "packed", &nd->packed) != 0) return -1;
    if (v[NK_KV_HEADS] && !nd->packed) {
      hkc_error(v[NK_KV_HEADS]->loc,
                "node '%s': 'kv_heads' is valid only with 'packed: true' (a packed q|k|v input; a rope of "
                "separate k heads takes heads: kv_heads)", nm);
      return -1;
    }
    if (parse_heads(c, v, nm, nd) != 0) return -1;
    if (!nd->packed) nd->kv_heads = 0;
    if (v[NK_THETA]) {
      if (parse_float(v[NK_THETA], "theta", &nd->theta) != 0) return -1;
      if (!(nd->theta > 0)) {
        hkc_error(v[NK_THETA]->loc, "node '%s': 'theta' must be positive, got %g", nm, (double)nd->theta);
        return -1;
      }
    }
    if (v[NK_OFFSET] && v[NK_CTX]) {
      hkc_error(v[NK_OFFSET]->loc, "node '%s': 'offset' is not valid with 'ctx' (row t is at position ctx[t] - 1)", nm);
      return -1;
    }
    if (v[NK_OFFSET] &&
        parse_int(v[NK_OFFSET], "offset", 0, HKC_SPEC_MAX_ROPE_POSITIONS - 1, &nd->pos_offset) != 0)
      return -1;
    if (parse_rope_scaling(v, nm, nd) != 0) return -1;
  }
  return 0;
}

/* Resolves a tensor name to a declared tensor (>= 0) or a node output (-(k+2)). */
static int resolve_ref(spec_ctx_t *c, const char *name, int *out) {
  const int t = hkc_names_get(&c->tensor_names, name); /* only the declarations so far */
  if (t >= 0 && (size_t)t < c->n_decl) return *out = t, 0;
  const int k = hkc_names_get(&c->out_names, name);
  if (k >= 0) return *out = -k - 2, 0;
  return -1;
}

/* Depth-first topological sort, iterative (long chains must not recurse). Visiting
 * nodes in written order and emitting each after its producers keeps an already
 * sorted graph unchanged. A back edge is a cycle: reported with its path. */
static int topo_sort(spec_ctx_t *c, size_t *order) {
  size_t n = c->n_pn, n_order = 0;
  unsigned char *state = calloc(n ? n : 1, 1); /* 0 new, 1 on the stack, 2 done */
  size_t *stack = malloc((n ? n : 1) * sizeof *stack), *next = malloc((n ? n : 1) * sizeof *next);
  int rc = -1;
  if (!state || !stack || !next) {
    hkc_error((hkc_loc_t){c->file, 0, 0}, "out of memory");
    goto done;
  }
  for (size_t root = 0; root < n; root++) {
    if (state[root]) continue;
    size_t sp = 0;
    stack[sp] = root, next[sp] = 0, sp++;
    state[root] = 1;
    while (sp) {
      size_t v = stack[sp - 1];
      if (next[sp - 1] < REF_COUNT) {
        int r = c->pn[v].ref_val[next[sp - 1]++];
        if (!c->pn[v].ref[next[sp - 1] - 1] || r >= 0) continue;
        size_t d = (size_t)(-r - 2);
        if (state[d] == 0) {
          state[d] = 1;
          stack[sp] = d, next[sp] = 0, sp++;
        } else if (state[d] == 1) {
          char path[512];
          size_t len = 0, from = 0;
          while (stack[from] != d) from++;
          /* stack[from..sp) is the chain d <- ... <- v: each reads the next one's output */
          for (size_t i = from; i < sp && len < sizeof path; i++)
            len += (size_t)snprintf(path + len, sizeof path - len, "%s -> ", c->pn[stack[i]].name->text);
          if (len < sizeof path) snprintf(path + len, sizeof path - len, "%s", c->pn[d].name->text);
          hkc_error(c->pn[d].map->loc, "graph has a cycle through node '%s' (%s; each reads the next one's output)",
                    c->pn[d].name->text, path);
          goto done;
        }
      } else {
        state[v] = 2;
        order[n_order++] = v;
        sp--;
      }
    }
  }
  assert(n_order == n);
  rc = 0;
done:
  free(state);
  free(stack);
  free(next);
  return rc;
}

/* ---- shape inference ---------------------------------------------------------------------------- */
/* NumPy-style broadcast restricted to suffixes: after dropping leading 1s, one shape
 * must be a suffix of the other; the result has the longer operand's dims and the
 * larger rank. 0 / -1 (not broadcastable). */
static int broadcast(const hkc_tensor_t *a, const hkc_tensor_t *b, hkc_tensor_t *out) {
  for (int pass = 0; pass < 2; pass++) {
    const hkc_tensor_t *s = pass ? a : b, *l = pass ? b : a; /* try s as the short one */
    uint32_t skip = 0;
    while (skip < s->rank && s->dims[skip].mul == 0 && s->dims[skip].add == 1) skip++;
    uint32_t sr = s->rank - skip;
    if (sr > l->rank || !shape_equal(s->dims + skip, sr, l->dims + l->rank - sr, sr)) continue;
    uint32_t rank = a->rank > b->rank ? a->rank : b->rank, pad = rank - l->rank;
    for (uint32_t i = 0; i < pad; i++) out->dims[i] = (hkc_dim_t){0, 1};
    memcpy(out->dims + pad, l->dims, l->rank * sizeof l->dims[0]);
    out->rank = rank;
    return 0;
  }
  return -1;
}

static int infer_gemm(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *T = c->spec->tensors, *A = &T[nd->in[0]], *B = &T[nd->in[1]];
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (B->rank != 2) {
    hkc_error(pn->ref[REF_IN1]->loc, "node '%s': gemm B '%s' must be 2-D %s, got %s", nm, B->name,
              nd->trans_b ? "[N, K]" : "[K, N]", tensor_shape_str(B, s1));
    return -1;
  }
  hkc_dim_t k = A->dims[A->rank - 1], kb = B->dims[nd->trans_b ? 1 : 0], n = B->dims[nd->trans_b ? 0 : 1];
  if (!hkc_dim_equal(k, kb)) {
    hkc_error(pn->ref[REF_IN1]->loc,
              "node '%s': shape mismatch: gemm A '%s' %s and B '%s' %s%s disagree on K (the last dim of A must equal "
              "B's %s dim)",
              nm, A->name, tensor_shape_str(A, s1), B->name, tensor_shape_str(B, s2),
              nd->trans_b ? " (trans_b)" : "", nd->trans_b ? "second" : "first");
    return -1;
  }
  out->rank = A->rank;
  memcpy(out->dims, A->dims, A->rank * sizeof A->dims[0]);
  out->dims[A->rank - 1] = n;
  if (nd->bias != HKC_NONE) {
    const hkc_tensor_t *bias = &T[nd->bias];
    if (!shape_equal(bias->dims, bias->rank, &n, 1)) {
      hkc_error(pn->ref[REF_BIAS]->loc, "node '%s': shape mismatch: bias '%s' is %s, expected %s ([N])", nm, bias->name,
                tensor_shape_str(bias, s1), shape_str(&n, 1, s2));
      return -1;
    }
  }
  static const int like_out[][2] = {{REF_RESIDUAL, 0}, {REF_MUL, 1}};
  for (int i = 0; i < 2; i++) {
    int t = like_out[i][1] ? nd->mul : nd->residual;
    if (t == HKC_NONE) continue;
    const hkc_tensor_t *r = &T[t];
    if (!shape_equal(r->dims, r->rank, out->dims, out->rank)) {
      hkc_error(pn->ref[like_out[i][0]]->loc, "node '%s': shape mismatch: %s '%s' is %s, the output is %s", nm,
                ref_names[like_out[i][0]], r->name, tensor_shape_str(r, s1), tensor_shape_str(out, s2));
      return -1;
    }
  }
  return 0;
}

static int infer_norm(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *T = c->spec->tensors, *x = &T[nd->in[0]];
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR], s3[HKC_SHAPE_STR];
  const hkc_dim_t *last = &x->dims[x->rank - 1];
  int which[2] = {REF_GAMMA, REF_BETA};
  int idx[2] = {nd->gamma, nd->beta};
  for (int i = 0; i < 2; i++) {
    if (idx[i] == HKC_NONE) continue;
    const hkc_tensor_t *g = &T[idx[i]];
    if (!shape_equal(g->dims, g->rank, last, 1)) {
      hkc_error(pn->ref[which[i]]->loc, "node '%s': shape mismatch: %s '%s' is %s, expected %s (the last dim of '%s' %s)",
                nd->name, ref_names[which[i]], g->name, tensor_shape_str(g, s1), shape_str(last, 1, s2), x->name,
                tensor_shape_str(x, s3));
      return -1;
    }
  }
  *out = (hkc_tensor_t){.rank = x->rank};
  memcpy(out->dims, x->dims, sizeof x->dims);
  return 0;
}

static int infer_attention(spec_ctx_t *c, const pnode_t *pn, hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *T = c->spec->tensors;
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  for (int i = 0; i < nd->n_in; i++) {
    const hkc_tensor_t *t = &T[nd->in[i]];
    if (t->rank != 3) {
      hkc_error(pn->ref[REF_IN0 + i]->loc, "node '%s': attention input '%s' must be 3-D [batch, seq, features], got %s",
                nm, t->name, tensor_shape_str(t, s1));
      return -1;
    }
    if (t->dims[2].mul != 0) {
      hkc_error(pn->ref[REF_IN0 + i]->loc, "node '%s': the last dim of attention input '%s' %s must not depend on batch",
                nm, t->name, tensor_shape_str(t, s1));
      return -1;
    }
  }
  const hkc_tensor_t *q = &T[nd->in[0]];
  int64_t h = nd->heads, hkv = nd->kv_heads, dh;
  if (nd->n_in == 1) {
    int64_t parts = h + 2 * hkv;
    if (q->dims[2].add % parts != 0) {
      hkc_error(pn->ref[REF_IN0]->loc,
                "node '%s': packed qkv '%s' %s: last dim %lld is not divisible by heads + 2*kv_heads = %lld", nm,
                q->name, tensor_shape_str(q, s1), (long long)q->dims[2].add, (long long)parts);
      return -1;
    }
    dh = q->dims[2].add / parts;
  } else {
    if (q->dims[2].add % h != 0) {
      hkc_error(pn->ref[REF_IN0]->loc, "node '%s': q '%s' %s: last dim %lld is not divisible by heads = %lld", nm,
                q->name, tensor_shape_str(q, s1), (long long)q->dims[2].add, (long long)h);
      return -1;
    }
    dh = q->dims[2].add / h;
    const hkc_tensor_t *k = &T[nd->in[1]], *v = &T[nd->in[2]];
    hkc_dim_t want = {0, hkv * dh};
    for (int i = 1; i < 3; i++) {
      const hkc_tensor_t *t = i == 1 ? k : v;
      const char *role = i == 1 ? "k" : "v";
      const ynode_t *where = pn->ref[REF_IN0 + i];
      if (!hkc_dim_equal(t->dims[0], q->dims[0])) {
        hkc_error(where->loc, "node '%s': shape mismatch: batch dims differ: q '%s' %s, %s '%s' %s", nm, q->name,
                  tensor_shape_str(q, s1), role, t->name, tensor_shape_str(t, s2));
        return -1;
      }
      if (!hkc_dim_equal(t->dims[2], want)) {
        hkc_error(where->loc,
                  "node '%s': shape mismatch: %s '%s' is %s, its last dim must be kv_heads*head_dim = %lld*%lld "
                  "(q '%s' is %s)",
                  nm, role, t->name, tensor_shape_str(t, s1), (long long)hkv, (long long)dh, q->name,
                  tensor_shape_str(q, s2));
        return -1;
      }
    }
    if (!hkc_dim_equal(k->dims[1], v->dims[1])) {
      hkc_error(pn->ref[REF_IN2]->loc, "node '%s': shape mismatch: k '%s' %s and v '%s' %s have different lengths", nm,
                k->name, tensor_shape_str(k, s1), v->name, tensor_shape_str(v, s2));
      return -1;
    }
  }
  char s3[HKC_SHAPE_STR];
  if (nd->lengths != HKC_NONE) {
    const hkc_tensor_t *len = &T[nd->lengths];
    if (len->rank != 1 || !hkc_dim_equal(len->dims[0], q->dims[0])) {
      char d0[64];
      dim_print(q->dims[0], d0, sizeof d0);
      hkc_error(pn->ref[REF_LENGTHS]->loc,
                "node '%s': lengths '%s' is %s, expected [%s] (one key length per batch entry of q '%s' %s)", nm,
                len->name, tensor_shape_str(len, s1), d0, q->name, tensor_shape_str(q, s2));
      return -1;
    }
  }
  if (nd->mask != HKC_NONE) {
    const hkc_tensor_t *mk = &T[nd->mask], *k = nd->n_in == 1 ? q : &T[nd->in[1]];
    int ok = mk->rank == 4 && hkc_dim_equal(mk->dims[0], q->dims[0]) && mk->dims[1].mul == 0 &&
             (mk->dims[1].add == 1 || mk->dims[1].add == h) && hkc_dim_equal(mk->dims[2], q->dims[1]) &&
             hkc_dim_equal(mk->dims[3], k->dims[1]);
    if (!ok) {
      hkc_error(pn->ref[REF_MASK]->loc,
                "node '%s': mask '%s' is %s, expected [batch, 1 or heads (%lld), seq_q, seq_kv] as q '%s' %s and k %s",
                nm, mk->name, tensor_shape_str(mk, s1), (long long)h, q->name, tensor_shape_str(q, s2),
                tensor_shape_str(k, s3));
      return -1;
    }
  }
  out->rank = 3;
  out->dims[0] = q->dims[0];
  out->dims[1] = q->dims[1];
  out->dims[2] = (hkc_dim_t){0, h * dh};
  if (!nd->has_scale) nd->scale = (float)(1.0 / sqrt((double)dh));
  return 0;
}

/* An i32 index tensor (ctx, slot: checked by check_refs) of reference r must have the shape
 * want (rank want_rank): one entry per row of `of`. */
static int check_index_shape(const pnode_t *pn, const hkc_node_t *nd, int r, const hkc_tensor_t *t,
                             const hkc_dim_t *want, uint32_t want_rank, const hkc_tensor_t *of) {
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR], s3[HKC_SHAPE_STR];
  if (shape_equal(t->dims, t->rank, want, want_rank)) return 0;
  hkc_error(pn->ref[r]->loc, "node '%s': %s '%s' is %s, expected %s (one per row of '%s' %s)", nd->name, ref_names[r],
            t->name, tensor_shape_str(t, s1), shape_str(want, want_rank, s2), of->name, tensor_shape_str(of, s3));
  return -1;
}

/* embedding: ids [..., seq] (i32, checked by check_refs), table [vocab, hidden] and the
 * optional position table pos [max_pos, hidden], neither depending on batch; output ids'
 * shape + [hidden]. Without ctx, row s of pos is added at sequence position s, so max_pos >=
 * seq; with ctx (shaped like ids) the row is clamp(ctx - 1, 0, max_pos - 1), any max_pos. */
static int infer_embedding(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *T = c->spec->tensors, *ids = &T[nd->in[0]], *table = &T[nd->in[1]];
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (ids->rank >= HK_MAX_RANK) {
    hkc_error(pn->ref[REF_IN0]->loc, "node '%s': ids '%s' %s: at most %u dims (the output adds one)", nm, ids->name,
              tensor_shape_str(ids, s1), HK_MAX_RANK - 1);
    return -1;
  }
  if (table->rank != 2 || table->dims[0].mul != 0 || table->dims[1].mul != 0) {
    hkc_error(pn->ref[REF_IN1]->loc, "node '%s': embedding table '%s' is %s, expected 2-D [vocab, hidden] not depending on batch",
              nm, table->name, tensor_shape_str(table, s1));
    return -1;
  }
  if (nd->ctx != HKC_NONE && check_index_shape(pn, nd, REF_CTX, &T[nd->ctx], ids->dims, ids->rank, ids) != 0)
    return -1;
  if (nd->pos != HKC_NONE && nd->ctx != HKC_NONE) {
    const hkc_tensor_t *pos = &T[nd->pos];
    if (pos->rank != 2 || pos->dims[0].mul != 0 || !hkc_dim_equal(pos->dims[1], table->dims[1])) {
      hkc_error(pn->ref[REF_POS]->loc,
                "node '%s': position table '%s' is %s, expected [max_pos, %lld] not depending on batch", nm,
                pos->name, tensor_shape_str(pos, s1), (long long)table->dims[1].add);
      return -1;
    }
  } else if (nd->pos != HKC_NONE) {
    const hkc_tensor_t *pos = &T[nd->pos];
    const hkc_dim_t seq = ids->dims[ids->rank - 1];
    if (pos->rank != 2 || pos->dims[0].mul != 0 || !hkc_dim_equal(pos->dims[1], table->dims[1]) || seq.mul != 0 ||
        pos->dims[0].add < seq.add) {
      hkc_error(pn->ref[REF_POS]->loc,
                "node '%s': position table '%s' is %s, expected [max_pos, %lld] with max_pos >= the sequence length "
                "(the last dim of ids '%s' %s, which must not depend on batch)",
                nm, pos->name, tensor_shape_str(pos, s1), (long long)table->dims[1].add, ids->name,
                tensor_shape_str(ids, s2));
      return -1;
    }
  }
  out->rank = ids->rank + 1;
  memcpy(out->dims, ids->dims, sizeof(hkc_dim_t) * ids->rank);
  out->dims[ids->rank] = table->dims[1];
  return 0;
}

/* The value of `key` in a node map (already validated by map_collect), or NULL. */
static const ynode_t *map_value(const ynode_t *map, const char *key) {
  for (size_t p = 0; p + 1 < map->n; p += 2)
    if (map->kids[p]->kind == Y_SCALAR && !strcmp(map->kids[p]->text, key)) return map->kids[p + 1];
  return NULL;
}

/* rope: x [..., seq, heads*head_dim] with an even head_dim; output shaped like x. The
 * sequence and feature dims must not depend on batch: positions restart every seq rows.
 * With ctx (an i32 tensor shaped like x without its last dim: a position per row) there is
 * no sequence dim, only the feature dim must not depend on batch. */
static int infer_rope(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *x = &c->spec->tensors[nd->in[0]];
  const int has_ctx = nd->ctx != HKC_NONE;
  const hkc_loc_t at = pn->ref[REF_IN0]->loc;
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR];
  if (x->rank < 2) {
    hkc_error(at, "node '%s': rope input '%s' must have rank >= 2 ([..., seq, heads*head_dim]), got %s", nm, x->name,
              tensor_shape_str(x, s1));
    return -1;
  }
  hkc_dim_t seq = x->dims[x->rank - 2], width = x->dims[x->rank - 1];
  if (has_ctx && width.mul != 0) {
    hkc_error(at, "node '%s': rope input '%s' %s: its last dim (heads*head_dim) must not depend on batch", nm, x->name,
              tensor_shape_str(x, s1));
    return -1;
  }
  if (!has_ctx && (width.mul != 0 || seq.mul != 0)) {
    hkc_error(at,
              "node '%s': rope input '%s' %s: its last two dims (seq, heads*head_dim) must not depend on batch "
              "(positions restart every seq rows; write [batch, seq, heads*head_dim])",
              nm, x->name, tensor_shape_str(x, s1));
    return -1;
  }
  /* packed: q | k | v along the last axis, heads + 2*kv_heads heads of head_dim */
  const int64_t all = nd->packed ? (int64_t)nd->heads + 2 * (int64_t)nd->kv_heads : nd->heads;
  if (width.add % all != 0) {
    if (nd->packed)
      hkc_error(at,
                "node '%s': packed rope input '%s' %s: last dim %lld is not divisible by heads + 2*kv_heads = %lld "
                "(q | k | v along the last axis)",
                nm, x->name, tensor_shape_str(x, s1), (long long)width.add, (long long)all);
    else
      hkc_error(at, "node '%s': rope input '%s' %s: last dim %lld is not divisible by heads = %d", nm, x->name,
                tensor_shape_str(x, s1), (long long)width.add, nd->heads);
    return -1;
  }
  int64_t dh = width.add / all;
  if (dh % 2 != 0) {
    hkc_error(at,
              "node '%s': %srope input '%s' %s: head_dim = %lld/%lld = %lld must be even (rotate-half pairs element j "
              "with j + head_dim/2)",
              nm, nd->packed ? "packed " : "", x->name, tensor_shape_str(x, s1), (long long)width.add,
              (long long)all, (long long)dh);
    return -1;
  }
  if (has_ctx) {
    if (check_index_shape(pn, nd, REF_CTX, &c->spec->tensors[nd->ctx], x->dims, x->rank - 1, x) != 0) return -1;
  } else if (nd->pos_offset > HKC_SPEC_MAX_ROPE_POSITIONS - seq.add) {
    const ynode_t *off = map_value(pn->map, "offset");
    hkc_error(off ? off->loc : at,
              "node '%s': rope positions reach offset + seq = %lld + %lld, above 2^24 (f32 positions)", nm,
              (long long)nd->pos_offset, (long long)seq.add);
    return -1;
  }
  *out = (hkc_tensor_t){.rank = x->rank};
  memcpy(out->dims, x->dims, sizeof x->dims);
  return 0;
}

/* kv_append / kv_attention: x must be a 2-D row tensor [rows, width] (one token per row) whose
 * width does not depend on batch; layout describes that width in the message. */
static int check_token_rows(const pnode_t *pn, const hkc_node_t *nd, const hkc_tensor_t *x, const char *layout) {
  char s1[HKC_SHAPE_STR];
  if (x->rank == 2 && x->dims[1].mul == 0) return 0;
  hkc_error(pn->ref[REF_IN0]->loc,
            "node '%s': %s input '%s' is %s, expected 2-D [rows, %s] (one token per row; the last dim must not "
            "depend on batch)",
            nd->name, hkc_op_name(nd->op), x->name, tensor_shape_str(x, s1), layout);
  return -1;
}

/* The KV caches of kv_append / kv_attention (state tensors, checked by check_refs): k_cache
 * [layers, slots, max_seq, width] and v_cache of the same shape, with layer < layers; ctx and
 * slot one per row of x. */
static int check_caches(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, const hkc_tensor_t *x) {
  const hkc_tensor_t *T = c->spec->tensors, *k = &T[nd->k_cache], *v = &T[nd->v_cache];
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (k->rank != 4) {
    hkc_error(pn->ref[REF_K_CACHE]->loc,
              "node '%s': k_cache '%s' is %s, expected 4-D [layers, slots, max_seq, kv_heads*head_dim]", nm, k->name,
              tensor_shape_str(k, s1));
    return -1;
  }
  if (!shape_equal(k->dims, k->rank, v->dims, v->rank)) {
    hkc_error(pn->ref[REF_V_CACHE]->loc, "node '%s': v_cache '%s' %s and k_cache '%s' %s must have the same shape", nm,
              v->name, tensor_shape_str(v, s1), k->name, tensor_shape_str(k, s2));
    return -1;
  }
  if (nd->layer >= k->dims[0].add) {
    const ynode_t *at = map_value(pn->map, "layer");
    hkc_error(at ? at->loc : nd->loc, "node '%s': layer %d is out of range: k_cache '%s' %s holds %lld layers", nm,
              nd->layer, k->name, tensor_shape_str(k, s1), (long long)k->dims[0].add);
    return -1;
  }
  if (check_index_shape(pn, nd, REF_CTX, &T[nd->ctx], x->dims, 1, x) != 0) return -1;
  return check_index_shape(pn, nd, REF_SLOT, &T[nd->slot], x->dims, 1, x);
}

/* kv_append: qkv [rows, (heads + 2*kv_heads)*dh] with dh even and caches of width
 * kv_heads*dh; output the q heads [rows, heads*dh]. */
static int infer_kv_append(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *x = &c->spec->tensors[nd->in[0]], *k = &c->spec->tensors[nd->k_cache];
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (check_token_rows(pn, nd, x, "(heads + 2*kv_heads)*head_dim") != 0) return -1;
  const int64_t all = (int64_t)nd->heads + 2 * (int64_t)nd->kv_heads, width = x->dims[1].add;
  if (width % all != 0 || width / all % 2 != 0) {
    hkc_error(pn->ref[REF_IN0]->loc,
              "node '%s': kv_append input '%s' %s: last dim %lld must be (heads + 2*kv_heads) = %lld heads of an even "
              "head_dim (q | k | v along the last axis, as rope pairs them)",
              nm, x->name, tensor_shape_str(x, s1), (long long)width, (long long)all);
    return -1;
  }
  const int64_t dh = width / all;
  if (check_caches(c, pn, nd, x) != 0) return -1;
  if (!hkc_dim_equal(k->dims[3], (hkc_dim_t){0, nd->kv_heads * dh})) {
    hkc_error(pn->ref[REF_K_CACHE]->loc,
              "node '%s': k_cache '%s' is %s, its last dim must be kv_heads*head_dim = %d*%lld (qkv '%s' is %s)", nm,
              k->name, tensor_shape_str(k, s1), nd->kv_heads, (long long)dh, x->name, tensor_shape_str(x, s2));
    return -1;
  }
  out->rank = 2;
  out->dims[0] = x->dims[0];
  out->dims[1] = (hkc_dim_t){0, nd->heads * dh};
  return 0;
}

/* kv_attention: q [rows, heads*dh] with dh the caches' width / kv_heads; output shaped like q.
 * scale defaults to 1/sqrt(dh). */
static int infer_kv_attention(spec_ctx_t *c, const pnode_t *pn, hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *q = &c->spec->tensors[nd->in[0]], *k = &c->spec->tensors[nd->k_cache];
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (check_token_rows(pn, nd, q, "heads*head_dim") != 0 || check_caches(c, pn, nd, q) != 0) return -1;
  const int64_t width = k->dims[3].add;
  if (width % nd->kv_heads != 0) {
    hkc_error(pn->ref[REF_K_CACHE]->loc, "node '%s': k_cache '%s' %s: last dim %lld is not divisible by kv_heads = %d",
              nm, k->name, tensor_shape_str(k, s1), (long long)width, nd->kv_heads);
    return -1;
  }
  const int64_t dh = width / nd->kv_heads;
  if (q->dims[1].add != nd->heads * dh) {
    hkc_error(pn->ref[REF_IN0]->loc,
              "node '%s': q '%s' is %s, its last dim must be heads*head_dim = %d*%lld (head_dim: the last dim of "
              "k_cache '%s' %s over kv_heads = %d)",
              nm, q->name, tensor_shape_str(q, s1), nd->heads, (long long)dh, k->name, tensor_shape_str(k, s2),
              nd->kv_heads);
    return -1;
  }
  *out = (hkc_tensor_t){.rank = 2};
  memcpy(out->dims, q->dims, sizeof q->dims);
  if (!nd->has_scale) nd->scale = (float)(1.0 / sqrt((double)dh));
  return 0;
}

/* take_rows: x [n, width], rows (i32) [r] -> [r, width]. */
static int infer_take_rows(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *x = &c->spec->tensors[nd->in[0]], *rows = &c->spec->tensors[nd->in[1]];
  char s1[HKC_SHAPE_STR];
  if (x->rank != 2) {
    hkc_error(pn->ref[REF_IN0]->loc, "node '%s': take_rows input '%s' is %s, expected 2-D [rows, width]", nd->name,
              x->name, tensor_shape_str(x, s1));
    return -1;
  }
  if (rows->rank != 1) {
    hkc_error(pn->ref[REF_IN1]->loc, "node '%s': row indices '%s' are %s, expected 1-D [n] (the rows to take)",
              nd->name, rows->name, tensor_shape_str(rows, s1));
    return -1;
  }
  out->rank = 2;
  out->dims[0] = rows->dims[0];
  out->dims[1] = x->dims[1];
  return 0;
}

/* argmax: x [..., n] -> i32 [...] (an index per row). */
static int infer_argmax(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *x = &c->spec->tensors[nd->in[0]];
  char s1[HKC_SHAPE_STR];
  if (x->rank < 2) {
    hkc_error(pn->ref[REF_IN0]->loc,
              "node '%s': argmax input '%s' is %s, expected rank >= 2 ([..., n]: an index per row)", nd->name,
              x->name, tensor_shape_str(x, s1));
    return -1;
  }
  out->rank = x->rank - 1;
  memcpy(out->dims, x->dims, sizeof(hkc_dim_t) * out->rank);
  return 0;
}

/* sample: x [R, n] logits, params (i32) [R, 4] -> i32 [R] (an index drawn per row). R may
 * depend on batch, n may not (and is an int32: the index); params' rows must be x's. */
static int infer_sample(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *x = &c->spec->tensors[nd->in[0]], *p = &c->spec->tensors[nd->in[1]];
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (x->rank != 2 || x->dims[1].mul != 0 || x->dims[1].add > INT32_MAX) {
    hkc_error(pn->ref[REF_IN0]->loc,
              "node '%s': sample input '%s' is %s, expected 2-D [rows, n] (a row of n logits; n not depending on "
              "batch, at most 2^31 - 1)",
              nd->name, x->name, tensor_shape_str(x, s1));
    return -1;
  }
  if (p->rank != 2 || !hkc_dim_equal(p->dims[0], x->dims[0]) ||
      !hkc_dim_equal(p->dims[1], (hkc_dim_t){0, HK_SAMPLE_PARAMS})) {
    hkc_error(pn->ref[REF_IN1]->loc,
              "node '%s': sample params '%s' are %s, expected [rows, 4] with the rows of '%s' %s (per row: seed, "
              "top_k, temperature and top_p as f32 bits)",
              nd->name, p->name, tensor_shape_str(p, s1), x->name, tensor_shape_str(x, s2));
    return -1;
  }
  out->rank = 1;
  out->dims[0] = x->dims[0];
  return 0;
}

/* The tensor a node's reference r names after resolution (HKC_NONE when absent). */
static int ref_tensor(const hkc_node_t *nd, int r) {
  switch (r) {
  case REF_IN0:
  case REF_IN1:
  case REF_IN2: return r - REF_IN0 < nd->n_in ? nd->in[r - REF_IN0] : HKC_NONE;
  case REF_BIAS: return nd->bias;
  case REF_RESIDUAL: return nd->residual;
  case REF_MUL: return nd->mul;
  case REF_GAMMA: return nd->gamma;
  case REF_BETA: return nd->beta;
  case REF_LENGTHS: return nd->lengths;
  case REF_MASK: return nd->mask;
  case REF_POS: return nd->pos;
  case REF_CTX: return nd->ctx;
  case REF_SLOT: return nd->slot;
  case REF_K_CACHE: return nd->k_cache;
  case REF_V_CACHE: return nd->v_cache;
  default: return HKC_NONE;
  }
}

/* Whether reference r of an op takes an i32 tensor (and only then). */
static int i32_slot(hk_op_t op, int r) {
  return (op == HK_OP_ATTENTION && r == REF_LENGTHS) || (op == HK_OP_EMBEDDING && r == REF_IN0) || r == REF_CTX ||
         r == REF_SLOT || ((op == HK_OP_TAKE_ROWS || op == HK_OP_SAMPLE) && r == REF_IN1);
}

/* i32 tensors go where an op takes them and nowhere else; state tensors (the KV caches) are
 * read only as kv_append's and kv_attention's k_cache and v_cache, which take nothing else. */
static int check_refs(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd) {
  const hkc_tensor_t *T = c->spec->tensors;
  for (int r = 0; r < REF_COUNT; r++) {
    int t = pn->ref[r] ? ref_tensor(nd, r) : HKC_NONE;
    if (t == HKC_NONE) continue;
    const int cache = r == REF_K_CACHE || r == REF_V_CACHE, state = T[t].role == HK_ROLE_STATE;
    if (cache != state) {
      if (state)
        hkc_error(pn->ref[r]->loc,
                  "node '%s': '%s' is a state tensor, which op '%s' cannot take in '%s' (state tensors are KV caches: "
                  "only kv_append and kv_attention read them, as k_cache and v_cache)",
                  nd->name, T[t].name, hkc_op_name(nd->op), ref_names[r]);
      else
        hkc_error(pn->ref[r]->loc, "node '%s': %s '%s' must be a state tensor (declare the KV caches under 'state:')",
                  nd->name, ref_names[r], T[t].name);
      return -1;
    }
    int want = i32_slot(nd->op, r), is = T[t].dtype == HK_DTYPE_I32;
    if (want == is) continue;
    if (is)
      hkc_error(pn->ref[r]->loc,
                "node '%s': '%s' is an i32 tensor, which op '%s' cannot take in '%s' (i32 tensors go to attention's "
                "'lengths', embedding's ids, 'ctx', 'slot', take_rows' row indices and sample's params)",
                nd->name, T[t].name, hkc_op_name(nd->op), ref_names[r]);
    else
      hkc_error(pn->ref[r]->loc, "node '%s': '%s' must be an i32 tensor (declare it {shape: [...], dtype: i32}), got %s",
                nd->name, T[t].name, hkc_dtype_name(T[t].dtype));
    return -1;
  }
  return 0;
}

/* Infers the output shape (and dtype) of one node whose inputs all have shapes. */
static int infer_node(spec_ctx_t *c, const pnode_t *pn, hkc_node_t *nd) {
  hkc_tensor_t *T = c->spec->tensors, shape = {0};
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (check_refs(c, pn, nd) != 0) return -1;
  switch (nd->op) {
  case HK_OP_GEMM:
    if (infer_gemm(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_ADD:
  case HK_OP_MUL:
    if (broadcast(&T[nd->in[0]], &T[nd->in[1]], &shape) != 0) {
      hkc_error(pn->ref[REF_IN1]->loc,
                "node '%s': shape mismatch: cannot broadcast '%s' %s with '%s' %s (after dropping leading 1s, one shape "
                "must be a suffix of the other)",
                nd->name, T[nd->in[0]].name, tensor_shape_str(&T[nd->in[0]], s1), T[nd->in[1]].name,
                tensor_shape_str(&T[nd->in[1]], s2));
      return -1;
    }
    break;
  case HK_OP_LAYERNORM:
  case HK_OP_RMSNORM:
    if (infer_norm(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_ATTENTION:
    if (infer_attention(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_ROPE:
    if (infer_rope(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_EMBEDDING:
    if (infer_embedding(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_KV_APPEND:
    if (infer_kv_append(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_KV_ATTENTION:
    if (infer_kv_attention(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_TAKE_ROWS:
    if (infer_take_rows(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_ARGMAX:
    if (infer_argmax(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_SAMPLE:
    if (infer_sample(c, pn, nd, &shape) != 0) return -1;
    break;
  default: /* relu, gelu, silu, gelu_tanh, tanh, softmax: shape kept */
    shape.rank = T[nd->in[0]].rank;
    memcpy(shape.dims, T[nd->in[0]].dims, sizeof shape.dims);
    break;
  }
  hkc_tensor_t *o = &T[nd->out];
  if (nd->op == HK_OP_ARGMAX || nd->op == HK_OP_SAMPLE)
    o->dtype = HK_DTYPE_I32; /* the only node outputs that are not of the spec's dtype */
  o->rank = shape.rank;
  memcpy(o->dims, shape.dims, sizeof o->dims);
  return 0;
}

/* ---- the graph ------------------------------------------------------------------------------------- */
static int parse_graph(spec_ctx_t *c, const ynode_t *g) {
  hkc_spec_t *s = c->spec;
  if (expect_kind(g, Y_SEQ, "a list of nodes", "graph") != 0) return -1;
  if (g->n == 0) {
    hkc_error(g->loc, "empty graph (give at least one node)");
    return -1;
  }
  if (g->n > HKC_SPEC_MAX_NODES) {
    hkc_error(g->loc, "too many nodes (at most %u)", HKC_SPEC_MAX_NODES);
    return -1;
  }
  c->pn = calloc(g->n, sizeof *c->pn);
  size_t *order = calloc(g->n, sizeof *order);
  int rc = -1;
  if (!c->pn || !order) goto oom;
  for (size_t j = 0; j < g->n; j++) {
    pnode_t *pn = &c->pn[j];
    if (parse_node(c, g->kids[j], pn) != 0) goto done;
    const int k = hkc_names_get(&c->node_names, pn->name->text);
    if (k >= 0) {
      hkc_error(pn->name->loc, "duplicate node name '%s' (first at %d:%d)", pn->name->text, c->pn[k].name->loc.line,
                c->pn[k].name->loc.col);
      goto done;
    }
    /* Output names are new tensors: unique among declarations and earlier outputs. */
    const int i = hkc_names_get(&c->tensor_names, pn->out->text);
    if (i >= 0) {
      hkc_error(pn->out->loc, "duplicate tensor name '%s': node '%s' writes a tensor already declared at %d:%d",
                pn->out->text, pn->name->text, s->tensors[i].loc.line, s->tensors[i].loc.col);
      goto done;
    }
    const int w = hkc_names_get(&c->out_names, pn->out->text);
    if (w >= 0) {
      hkc_error(pn->out->loc, "duplicate tensor name '%s': also written by node '%s' at %d:%d", pn->out->text,
                c->pn[w].name->text, c->pn[w].out->loc.line, c->pn[w].out->loc.col);
      goto done;
    }
    if (hkc_names_put(&c->node_names, pn->name->text, (int)j) != 0 ||
        hkc_names_put(&c->out_names, pn->out->text, (int)j) != 0)
      goto oom;
    c->n_pn = j + 1;
  }
  for (size_t j = 0; j < c->n_pn; j++) {
    for (int r = 0; r < REF_COUNT; r++) {
      const ynode_t *ref = c->pn[j].ref[r];
      if (ref && resolve_ref(c, ref->text, &c->pn[j].ref_val[r]) != 0) {
        hkc_error(ref->loc, "node '%s': undefined tensor '%s' in '%s' (not an input, a param or a node output)",
                  c->pn[j].name->text, ref->text, ref_names[r]);
        goto done;
      }
    }
  }
  if (topo_sort(c, order) != 0) goto done;

  /* Nodes and their output tensors in sorted order. */
  if (!(s->nodes = calloc(c->n_pn, sizeof *s->nodes))) goto oom;
  int *out_of = calloc(c->n_pn, sizeof *out_of); /* pnode -> its output tensor */
  if (!out_of) goto oom;
  for (size_t i = 0; i < c->n_pn; i++) {
    pnode_t *pn = &c->pn[order[i]];
    int t = add_tensor(c, pn->out->text, HK_ROLE_INTERMEDIATE, pn->out->loc);
    if (t < 0) {
      free(out_of);
      goto done;
    }
    out_of[order[i]] = t;
    s->tensors[t].producer = (int)i;
    hkc_node_t *nd = &s->nodes[i];
    *nd = pn->node;
    nd->out = t;
    if (!(nd->name = hkc_strdup(pn->name->text))) {
      free(out_of);
      goto oom;
    }
    s->n_nodes = i + 1;
  }
  for (size_t i = 0; i < c->n_pn; i++) {
    const pnode_t *pn = &c->pn[order[i]];
    hkc_node_t *nd = &s->nodes[i];
    int val[REF_COUNT];
    for (int r = 0; r < REF_COUNT; r++)
      val[r] = !pn->ref[r] ? HKC_NONE : pn->ref_val[r] >= 0 ? pn->ref_val[r] : out_of[-pn->ref_val[r] - 2];
    for (int k = 0; k < nd->n_in; k++) nd->in[k] = val[REF_IN0 + k];
    nd->bias = val[REF_BIAS];
    nd->residual = val[REF_RESIDUAL];
    nd->mul = val[REF_MUL];
    nd->gamma = val[REF_GAMMA];
    nd->beta = val[REF_BETA];
    nd->lengths = val[REF_LENGTHS];
    nd->mask = val[REF_MASK];
    nd->pos = val[REF_POS];
    nd->ctx = val[REF_CTX];
    nd->slot = val[REF_SLOT];
    nd->k_cache = val[REF_K_CACHE];
    nd->v_cache = val[REF_V_CACHE];
  }
  free(out_of);
  for (size_t i = 0; i < c->n_pn; i++)
    if (infer_node(c, &c->pn[order[i]], &s->nodes[i]) != 0) goto done;
  rc = 0;
  goto done;
oom:
  hkc_error(g->loc, "out of memory");
done:
  free(order);
  return rc;
}

static int parse_outputs(spec_ctx_t *c, const ynode_t *n) {
  hkc_spec_t *s = c->spec;
  if (expect_kind(n, Y_SEQ, "a list of tensor names", "outputs") != 0) return -1;
  if (n->n == 0) {
    hkc_error(n->loc, "'outputs' is empty (a graph needs at least one output)");
    return -1;
  }
  if (!(s->outputs = calloc(n->n, sizeof *s->outputs))) return -1;
  for (size_t i = 0; i < n->n; i++) {
    const ynode_t *o = n->kids[i];
    const char *name;
    if (parse_name(o, "tensor", &name) != 0) return -1;
    int t = hkc_tensor_find(s, name);
    if (t == HKC_NONE) {
      hkc_error(o->loc, "output '%s' is never produced (no node has out: %s)", name, name);
      return -1;
    }
    const hk_role_t role = s->tensors[t].role;
    if (role == HK_ROLE_INPUT || role == HK_ROLE_PARAM || role == HK_ROLE_STATE) {
      hkc_error(o->loc, "%s '%s' cannot be a graph output (outputs are written by nodes%s)",
                role == HK_ROLE_INPUT ? "graph input" : role == HK_ROLE_PARAM ? "param" : "state tensor", name,
                role == HK_ROLE_STATE ? "; state persists in the session, which the application may bind" : "");
      return -1;
    }
    if (s->tensors[t].role == HK_ROLE_OUTPUT) {
      hkc_error(o->loc, "duplicate output '%s'", name);
      return -1;
    }
    s->tensors[t].role = HK_ROLE_OUTPUT;
    s->outputs[s->n_outputs++] = t;
  }
  return 0;
}

/* fusion: auto | none | {groups: [[node, ...], ...]} */
static int parse_fusion(spec_ctx_t *c, const ynode_t *n) {
  hkc_spec_t *s = c->spec;
  s->fusion = HKC_FUSION_AUTO;
  if (!n) return 0;
  if (n->kind == Y_SCALAR && !ynode_is_null(n)) {
    if (!strcmp(n->text, "auto")) return 0;
    if (!strcmp(n->text, "none")) return s->fusion = HKC_FUSION_NONE, 0;
    hkc_error(n->loc, "unknown fusion mode '%.64s' (expected auto, none or {groups: [[node, ...], ...]})", n->text);
    return -1;
  }
  if (expect_kind(n, Y_MAP, "auto, none or {groups: [[node, ...], ...]}", "fusion") != 0) return -1;
  static const char *const fusion_keys[] = {"groups"};
  const ynode_t *keys[1], *vals[1];
  if (map_collect(n, fusion_keys, 1, 1u, " in 'fusion'", keys, vals) != 0) return -1;
  if (!vals[0]) {
    hkc_error(n->loc, "fusion: missing required key 'groups'");
    return -1;
  }
  const ynode_t *g = vals[0];
  if (expect_kind(g, Y_SEQ, "a list of node-name lists", "groups") != 0) return -1;
  s->fusion = HKC_FUSION_GROUPS;
  const ynode_t **seen = calloc(s->n_nodes ? s->n_nodes : 1, sizeof *seen); /* node -> where grouped */
  int rc = -1;
  if (!seen) goto done;
  if (g->n && (!(s->groups = calloc(g->n, sizeof *s->groups)) || !(s->group_sizes = calloc(g->n, sizeof *s->group_sizes)) ||
               !(s->group_locs = calloc(g->n, sizeof *s->group_locs))))
    goto done;
  for (size_t i = 0; i < g->n; i++) {
    const ynode_t *grp = g->kids[i];
    if (expect_kind(grp, Y_SEQ, "a list of node names", "groups") != 0) goto done;
    if (grp->n == 0) {
      hkc_error(grp->loc, "empty fusion group");
      goto done;
    }
    if (!(s->groups[i] = calloc(grp->n, sizeof *s->groups[i]))) goto done;
    s->group_locs[i] = grp->loc;
    s->n_groups = i + 1;
    for (size_t k = 0; k < grp->n; k++) {
      const ynode_t *e = grp->kids[k];
      const char *name;
      if (parse_name(e, "node", &name) != 0) goto done;
      size_t j = 0;
      while (j < s->n_nodes && strcmp(s->nodes[j].name, name)) j++;
      if (j == s->n_nodes) {
        hkc_error(e->loc, "fusion group names unknown node '%s'", name);
        goto done;
      }
      if (seen[j]) {
        hkc_error(e->loc, "node '%s' is in more than one fusion group (first at %d:%d)", name, seen[j]->loc.line,
                  seen[j]->loc.col);
        goto done;
      }
      seen[j] = e;
      s->groups[i][s->group_sizes[i]++] = (int)j;
    }
  }
  rc = 0;
done:
  free(seen);
  return rc;
}

/* Under batch_policy: pad a batch between two buckets runs the larger bucket on padded
 * tensors, so the real rows must be a prefix of every batch-dependent tensor and no op
 * may mix rows: batch only in the leading dim (k*batch, no offset), and rank >= 2 (a 1-D
 * [batch] tensor's only dim is also the last one, which norms and softmax reduce) unless it
 * is i32 (lengths [batch]: no op reduces it; a padded row reads length 0). */
static int pad_layout_ok(const hkc_tensor_t *t) {
  int batched = 0;
  for (uint32_t d = 0; d < t->rank; d++) batched |= t->dims[d].mul != 0;
  if (!batched) return 1;
  if ((t->rank < 2 && t->dtype != HK_DTYPE_I32) || t->dims[0].mul <= 0 || t->dims[0].add != 0) return 0;
  for (uint32_t d = 1; d < t->rank; d++)
    if (t->dims[d].mul != 0) return 0;
  return 1;
}

/* Whole-spec checks after the graph: sizes at the largest batch, layouts the batch
 * policy can pad, unused tensors. */
static int check_tensors(spec_ctx_t *c) {
  hkc_spec_t *s = c->spec;
  int64_t max_batch = s->batch_sizes[s->n_batch - 1];
  for (size_t i = 0; i < s->n_tensors; i++) {
    const hkc_tensor_t *t = &s->tensors[i];
    int64_t elems = hkc_tensor_elems(t, max_batch);
    char sh[HKC_SHAPE_STR];
    if (elems < 0 || elems > HKC_SPEC_MAX_TENSOR_BYTES / (int64_t)hkc_dtype_size(t->dtype)) {
      hkc_error(t->loc, "tensor '%s' %s is too large at batch %lld (limit %lld bytes)", t->name,
                tensor_shape_str(t, sh), (long long)max_batch, (long long)HKC_SPEC_MAX_TENSOR_BYTES);
      return -1;
    }
    if (s->batch_policy == HK_BATCH_POLICY_REC_PAD && !pad_layout_ok(t)) {
      hkc_error(t->loc,
                "tensor '%s' %s cannot be padded: with batch_policy: pad (the default) a tensor that depends on "
                "batch must have it in its leading dim only, as [batch, ...] or [k*batch, ...] of rank >= 2, so "
                "that the rows of a smaller batch are a prefix; use batch_policy: exact to run only the built "
                "batch sizes",
                t->name, tensor_shape_str(t, sh));
      return -1;
    }
  }
  unsigned char *used = calloc(s->n_tensors, 1);
  if (!used) return -1;
  for (size_t j = 0; j < s->n_nodes; j++) {
    const hkc_node_t *nd = &s->nodes[j];
    for (int k = 0; k < nd->n_in; k++) used[nd->in[k]] = 1;
    const int extra[] = {nd->bias, nd->residual, nd->mul, nd->gamma, nd->beta, nd->lengths,
                         nd->mask, nd->pos,      nd->ctx, nd->slot,  nd->k_cache, nd->v_cache};
    for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++)
      if (extra[k] != HKC_NONE) used[extra[k]] = 1;
  }
  for (size_t i = 0; i < s->n_tensors; i++)
    if (!used[i] && s->tensors[i].role != HK_ROLE_OUTPUT)
      hkc_warning(s->tensors[i].loc, "tensor '%s' is never used%s", s->tensors[i].name,
                  s->tensors[i].role == HK_ROLE_INTERMEDIATE ? " and is not an output" : "");
  free(used);
  return 0;
}

/* ---- repeat: N copies of a layer --------------------------------------------------------------
 * A graph entry `- repeat: {count, var, in, out, params, body}` is expanded in the YAML tree,
 * before anything is checked, into count copies of body's nodes (and of params' declarations,
 * appended to the top-level params); everything after this step sees an ordinary spec.
 * Names in layer k:
 *  - `{var}` (default `{i}`) in any scalar of params and body becomes k;
 *  - a layer-local name -- a body node's name or out, a key of params -- becomes the name
 *    with `{var}` replaced, or NAME_k when it has no `{var}`; body references to it (in, bias,
 *    residual, mul, gamma, beta, ..., every key that names a tensor) are renamed the same way;
 *  - the repeat's `in` names the layer's input: the outer tensor for layer 0, the previous
 *    layer's output after; its `out` names the layer's output: OUT_k, and OUT for the last layer.
 * Each copy keeps the locations of the body, so an error inside a copy points at the body;
 * the names in its message (q_proj_3, l3_wq) carry the layer number. */

/* Copies per repeat: far above any model's layer count; the node limit bounds the total. */
#define HKC_SPEC_MAX_REPEAT 4096

enum { RK_COUNT, RK_VAR, RK_IN, RK_OUT, RK_PARAMS, RK_BODY, RK_N };
static const char *const repeat_keys[RK_N] = {"count", "var", "in", "out", "params", "body"};
enum { RR_REPEAT };
static const char *const repeat_entry_keys[1] = {"repeat"};

typedef struct repeat {
  const char *file;
  char pat[HK_MAX_NAME_LEN + 3]; /* "{i}" */
  const char *in, *out;
  const ynode_t *params, *body;
  const char **locals; /* layer-local tensor names, as written */
  size_t n_locals;
  long count;
} repeat_t;

/* text with every `pat` replaced by k (malloc'd), or NULL when out of memory. */
static char *subst_var(const char *text, const char *pat, long k) {
  char num[24];
  int nl = snprintf(num, sizeof num, "%ld", k);
  size_t pl = strlen(pat), hits = 0;
  for (const char *p = strstr(text, pat); p; p = strstr(p + pl, pat)) hits++;
  char *out = malloc(strlen(text) + hits * (size_t)nl + 1), *w = out;
  if (!out) return NULL;
  for (const char *p = text;;) {
    const char *h = strstr(p, pat);
    size_t n = h ? (size_t)(h - p) : strlen(p);
    memcpy(w, p, n);
    w += n;
    if (!h) break;
    memcpy(w, num, (size_t)nl);
    w += nl;
    p = h + pl;
  }
  *w = '\0';
  return out;
}

/* A `{...}` in a name other than the repeat's variable is an error at the scalar. */
static int check_placeholders(const repeat_t *r, const ynode_t *n) {
  const char *b = strchr(n->text, '{');
  while (b) {
    const char *e = strchr(b, '}');
    size_t len = e ? (size_t)(e - b) + 1 : strlen(b);
    if (!e || len != strlen(r->pat) || strncmp(b, r->pat, len) != 0) {
      hkc_error(n->loc, "'%.*s' in '%.64s' is not this repeat's variable (write %s for the layer number)", (int)len, b,
                n->text, r->pat);
      return -1;
    }
    b = strchr(e, '{');
  }
  return 0;
}

static int set_text(ynode_t *n, char *text) {
  if (!text) {
    hkc_error(n->loc, "out of memory");
    return -1;
  }
  free(n->text);
  n->text = text;
  return 0;
}

/* The name of layer-local NAME in layer k. */
static int rename_local(const repeat_t *r, ynode_t *n, long k) {
  if (check_placeholders(r, n) != 0) return -1;
  if (strstr(n->text, r->pat)) return set_text(n, subst_var(n->text, r->pat, k));
  char *t = malloc(strlen(n->text) + 24);
  if (t) sprintf(t, "%s_%ld", n->text, k);
  return set_text(n, t);
}

/* The layer's input / output tensor names in layer k. */
static char *layer_io_name(const repeat_t *r, long k, int input) {
  if (input && k == 0) return hkc_strdup(r->in);
  long layer = input ? k - 1 : k;
  if (layer == r->count - 1) return hkc_strdup(r->out);
  char *t = malloc(strlen(r->out) + 24);
  if (t) sprintf(t, "%s_%ld", r->out, layer);
  return t;
}

/* A tensor reference inside the body, in layer k. */
static int repeat_ref(const repeat_t *r, ynode_t *n, long k) {
  if (n->kind != Y_SCALAR) return 0; /* the schema check reports it */
  if (!strcmp(n->text, r->in)) return set_text(n, layer_io_name(r, k, 1));
  if (!strcmp(n->text, r->out)) return set_text(n, layer_io_name(r, k, 0));
  for (size_t i = 0; i < r->n_locals; i++)
    if (!strcmp(n->text, r->locals[i])) return rename_local(r, n, k);
  if (check_placeholders(r, n) != 0) return -1;
  return strstr(n->text, r->pat) ? set_text(n, subst_var(n->text, r->pat, k)) : 0;
}

/* Deep copy for layer k; `{var}` in every scalar replaced unless `keep` (names,
 * which the caller renames). NULL when out of memory (reported). */
static ynode_t *ynode_copy(const repeat_t *r, const ynode_t *n, long k, int keep) {
  hkc_loc_t loc = n->loc;
  ynode_t *c = ynode_new(n->kind, loc);
  if (!c) goto oom;
  c->quoted = n->quoted;
  c->plain = n->plain;
  if (n->kind == Y_SCALAR) {
    c->text = keep ? hkc_strdup(n->text) : subst_var(n->text, r->pat, k);
    if (!c->text) goto oom;
  }
  if (n->n && !(c->kids = calloc(n->n, sizeof *c->kids))) goto oom;
  c->cap = n->n;
  for (size_t i = 0; i < n->n; i++) {
    if (!(c->kids[i] = ynode_copy(r, n->kids[i], k, keep))) {
      ynode_free(c);
      return NULL;
    }
    c->n++;
  }
  return c;
oom:
  ynode_free(c);
  hkc_error(loc, "out of memory");
  return NULL;
}

/* Layer k's copy of one body node map. */
static ynode_t *body_node_copy(const repeat_t *r, const ynode_t *map, long k) {
  ynode_t *c = ynode_copy(r, map, k, 1);
  if (!c) return NULL;
  for (size_t p = 0; c->kind == Y_MAP && p + 1 < c->n; p += 2) {
    const ynode_t *key = c->kids[p];
    ynode_t *v = c->kids[p + 1];
    const char *kt = key->kind == Y_SCALAR ? key->text : "";
    int rc = 0;
    if (!strcmp(kt, "name") && v->kind == Y_SCALAR) {
      rc = rename_local(r, v, k);
    } else if (!strcmp(kt, "out") && v->kind == Y_SCALAR) {
      rc = !strcmp(v->text, r->out) ? set_text(v, layer_io_name(r, k, 0)) : rename_local(r, v, k);
    } else if (!strcmp(kt, "in") && v->kind == Y_SEQ) {
      for (size_t i = 0; i < v->n && rc == 0; i++) rc = repeat_ref(r, v->kids[i], k);
    } else if (!strcmp(kt, "in") || !strcmp(kt, "bias") || !strcmp(kt, "residual") || !strcmp(kt, "mul") ||
               !strcmp(kt, "gamma") || !strcmp(kt, "beta") || !strcmp(kt, "lengths") || !strcmp(kt, "mask") ||
               !strcmp(kt, "pos") || !strcmp(kt, "ctx") || !strcmp(kt, "slot") || !strcmp(kt, "k_cache") ||
               !strcmp(kt, "v_cache")) { /* every attribute that names a tensor */
      rc = repeat_ref(r, v, k);
    } else {
      ynode_t *s = ynode_copy(r, v, k, 0); /* `{var}` replaced in attribute values too */
      if (!s) rc = -1;
      else ynode_free(v), c->kids[p + 1] = s;
    }
    if (rc != 0) {
      ynode_free(c);
      return NULL;
    }
  }
  return c;
}

static int ynode_append(ynode_t *parent, ynode_t *kid) {
  if (hkc_reserve((void **)&parent->kids, &parent->cap, parent->n + 1, sizeof *parent->kids) != 0) {
    hkc_error(kid->loc, "out of memory");
    ynode_free(kid);
    return -1;
  }
  parent->kids[parent->n++] = kid;
  return 0;
}

/* Value of a top-level key of the root map (the first one; duplicates are reported later). */
static ynode_t *root_value(ynode_t *root, const char *key) {
  for (size_t p = 0; p + 1 < root->n; p += 2)
    if (root->kids[p]->kind == Y_SCALAR && !strcmp(root->kids[p]->text, key)) return root->kids[p + 1];
  return NULL;
}

/* count: an integer, or the name of a dim given as an integer in `dims`. */
static int repeat_count(ynode_t *root, const ynode_t *n, long *out) {
  int64_t v;
  if (n->kind == Y_SCALAR && is_identifier(n->text)) {
    const ynode_t *dims = root_value(root, "dims"), *d = NULL;
    for (size_t p = 0; dims && dims->kind == Y_MAP && p + 1 < dims->n; p += 2)
      if (dims->kids[p]->kind == Y_SCALAR && !strcmp(dims->kids[p]->text, n->text)) d = dims->kids[p + 1];
    if (!d) {
      hkc_error(n->loc, "repeat count '%.64s' is not a dim (give an integer, or a dim declared as one)", n->text);
      return -1;
    }
    n = d;
  }
  if (parse_int(n, "count", 1, HKC_SPEC_MAX_REPEAT, &v) != 0) return -1;
  *out = (long)v;
  return 0;
}

/* Checks one repeat entry and fills r (names borrowed from the tree). */
static int repeat_parse(ynode_t *root, const ynode_t *entry, repeat_t *r) {
  const ynode_t *ek[1], *ev[1], *k[RK_N], *v[RK_N];
  if (map_collect(entry, repeat_entry_keys, 1, 1u, " beside 'repeat' (a repeat entry holds only repeat: {count, in, out, body, ...})", ek, ev) != 0)
    return -1;
  const ynode_t *rep = ev[RR_REPEAT];
  if (expect_kind(rep, Y_MAP, "a map {count, var, in, out, params, body}", "repeat") != 0) return -1;
  if (map_collect(rep, repeat_keys, RK_N, (1u << RK_N) - 1, " in repeat", k, v) != 0) return -1;
  static const int required[] = {RK_COUNT, RK_IN, RK_OUT, RK_BODY};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    if (!v[required[i]]) {
      hkc_error(rep->loc, "repeat: missing required key '%s'", repeat_keys[required[i]]);
      return -1;
    }
  }
  if (repeat_count(root, v[RK_COUNT], &r->count) != 0) return -1;
  const char *var = "i";
  if (v[RK_VAR] && parse_name(v[RK_VAR], "repeat variable", &var) != 0) return -1;
  snprintf(r->pat, sizeof r->pat, "{%s}", var);
  if (parse_name(v[RK_IN], "tensor", &r->in) != 0 || parse_name(v[RK_OUT], "tensor", &r->out) != 0) return -1;
  if (!strcmp(r->in, r->out)) {
    hkc_error(v[RK_OUT]->loc, "repeat: 'out' must differ from 'in' ('%s')", r->in);
    return -1;
  }
  r->params = v[RK_PARAMS];
  if (r->params && expect_kind(r->params, Y_MAP, "a map of tensor names to shapes", "params") != 0) return -1;
  r->body = v[RK_BODY];
  if (expect_kind(r->body, Y_SEQ, "a list of nodes", "body") != 0) return -1;
  if (r->body->n == 0) {
    hkc_error(r->body->loc, "empty repeat body (give at least one node)");
    return -1;
  }
  /* Layer-local tensors: params' keys and the nodes' outs (the layer's out is not local). */
  size_t cap = 0;
  int writes_out = 0;
  for (size_t p = 0; r->params && p + 1 < r->params->n; p += 2) {
    const ynode_t *key = r->params->kids[p];
    if (expect_kind(key, Y_SCALAR, "a name", "params") != 0) return -1;
    if (!strcmp(key->text, r->in) || !strcmp(key->text, r->out)) {
      hkc_error(key->loc, "repeat param '%s' has the name of the repeat's %s", key->text,
                !strcmp(key->text, r->in) ? "in" : "out");
      return -1;
    }
    if (hkc_reserve((void **)&r->locals, &cap, r->n_locals + 1, sizeof *r->locals) != 0) return -1;
    r->locals[r->n_locals++] = key->text;
  }
  for (size_t j = 0; j < r->body->n; j++) {
    const ynode_t *node = r->body->kids[j];
    if (expect_kind(node, Y_MAP, "a node map", "body") != 0) return -1;
    for (size_t p = 0; p + 1 < node->n; p += 2) {
      const ynode_t *key = node->kids[p], *val = node->kids[p + 1];
      if (key->kind != Y_SCALAR) continue;
      if (!strcmp(key->text, "repeat")) {
        hkc_error(key->loc, "a repeat inside a repeat body is not supported (write the inner layers out, or "
                            "one repeat whose body holds them all)");
        return -1;
      }
      if (strcmp(key->text, "out") != 0 || val->kind != Y_SCALAR) continue;
      if (!strcmp(val->text, r->in)) {
        hkc_error(val->loc, "a body node writes '%s', the repeat's in (the layer reads it; write the layer's "
                            "result to the repeat's out '%s')", r->in, r->out);
        return -1;
      }
      if (!strcmp(val->text, r->out)) {
        writes_out = 1;
        continue;
      }
      if (hkc_reserve((void **)&r->locals, &cap, r->n_locals + 1, sizeof *r->locals) != 0) return -1;
      r->locals[r->n_locals++] = val->text;
    }
  }
  if (!writes_out) {
    hkc_error(r->body->loc, "no node of the repeat body writes out: %s (the layer's output, read by the next layer)",
              r->out);
    return -1;
  }
  return 0;
}

/* Expands every repeat entry of the root's graph in place (see above). 0, or -1 reported. */
static int repeat_expand(const char *file, ynode_t *root) {
  if (!root || root->kind != Y_MAP) return 0;
  ynode_t *graph = root_value(root, "graph");
  if (!graph || graph->kind != Y_SEQ) return 0;
  int any = 0;
  for (size_t j = 0; j < graph->n; j++) {
    const ynode_t *e = graph->kids[j];
    for (size_t p = 0; e->kind == Y_MAP && p + 1 < e->n; p += 2)
      if (e->kids[p]->kind == Y_SCALAR && !strcmp(e->kids[p]->text, "repeat")) any = 1;
  }
  if (!any) return 0;
  ynode_t *params = root_value(root, "params");
  if (params && ynode_is_null(params)) { /* `params:` with nothing: becomes the repeats' map */
    params->kind = Y_MAP;
    free(params->text);
    params->text = NULL;
  }
  ynode_t *out = ynode_new(Y_SEQ, graph->loc);
  if (!out) return hkc_error(graph->loc, "out of memory"), -1;
  int rc = -1;
  for (size_t j = 0; j < graph->n; j++) {
    ynode_t *e = graph->kids[j];
    int is_repeat = 0;
    for (size_t p = 0; e->kind == Y_MAP && p + 1 < e->n; p += 2)
      if (e->kids[p]->kind == Y_SCALAR && !strcmp(e->kids[p]->text, "repeat")) is_repeat = 1;
    if (!is_repeat) {
      graph->kids[j] = NULL;
      if (ynode_append(out, e) != 0) goto done;
      continue;
    }
    repeat_t r = {.file = file};
    if (repeat_parse(root, e, &r) != 0) {
      free(r.locals);
      goto done;
    }
    size_t total = out->n + (graph->n - j - 1) + (size_t)r.count * r.body->n;
    if (total > HKC_SPEC_MAX_NODES) {
      hkc_error(e->loc, "this repeat makes the graph %zu nodes (at most %u)", total, HKC_SPEC_MAX_NODES);
      free(r.locals);
      goto done;
    }
    size_t n_params = r.params ? r.params->n / 2 : 0;
    if (n_params && (params ? params->n / 2 : 0) + (size_t)r.count * n_params > HK_MAX_TENSORS) {
      hkc_error(e->loc, "this repeat declares %zu params (at most %u tensors in all)", (size_t)r.count * n_params,
                HK_MAX_TENSORS);
      free(r.locals);
      goto done;
    }
    if (r.params && !params) {
      ynode_t *key = ynode_new(Y_SCALAR, r.params->loc);
      params = ynode_new(Y_MAP, r.params->loc);
      if (!key || !(key->text = hkc_strdup("params")) || !params) {
        ynode_free(key);
        ynode_free(params);
        hkc_error(e->loc, "out of memory");
        free(r.locals);
        goto done;
      }
      key->plain = 1;
      if (ynode_append(root, key) != 0 || ynode_append(root, params) != 0) {
        free(r.locals);
        goto done;
      }
    } else if (r.params && expect_kind(params, Y_MAP, "a map of tensor names to shapes", "params") != 0) {
      free(r.locals);
      goto done;
    }
    int bad = 0;
    for (long k = 0; k < r.count && !bad; k++) {
      for (size_t p = 0; r.params && p + 1 < r.params->n && !bad; p += 2) {
        ynode_t *key = ynode_copy(&r, r.params->kids[p], k, 1), *val = NULL;
        bad = !key || rename_local(&r, key, k) != 0 || !(val = ynode_copy(&r, r.params->kids[p + 1], k, 0));
        if (bad) {
          ynode_free(key);
          break;
        }
        bad = ynode_append(params, key) != 0 || ynode_append(params, val) != 0;
      }
      for (size_t b = 0; b < r.body->n && !bad; b++) {
        ynode_t *c = body_node_copy(&r, r.body->kids[b], k);
        bad = !c || ynode_append(out, c) != 0;
      }
    }
    free(r.locals);
    if (bad) goto done;
  }
  /* Swap the expanded list in; the repeat entries go with the old one. */
  for (size_t j = 0; j < graph->n; j++) ynode_free(graph->kids[j]);
  free(graph->kids);
  graph->kids = out->kids;
  graph->n = out->n;
  graph->cap = out->cap;
  out->kids = NULL;
  out->n = 0;
  rc = 0;
done:
  ynode_free(out);
  return rc;
}

/* ---- entry points ------------------------------------------------------------------------------------ */
enum {
  K_HKC, K_NAME, K_DTYPE, K_BATCH, K_BATCH_POLICY, K_DIMS, K_TARGETS, K_INPUTS, K_PARAMS, K_STATE, K_GRAPH,
  K_OUTPUTS, K_FUSION, K_COUNT
};
static const char *const top_keys[K_COUNT] = {"hkc",    "name",    "dtype",  "batch_sizes", "batch_policy",
                                              "dims",   "targets", "inputs", "params",      "state",
                                              "graph",  "outputs", "fusion"};
#define TOP_REQUIRED ((1u << K_HKC) | (1u << K_NAME) | (1u << K_BATCH) | (1u << K_INPUTS) | (1u << K_GRAPH) | (1u << K_OUTPUTS))

static int spec_build(spec_ctx_t *c, const ynode_t *root) {
  if (!root) {
    hkc_error((hkc_loc_t){c->file, 0, 0}, "empty spec (expected a map with keys hkc, name, batch_sizes, inputs, graph, "
                                          "outputs)");
    return -1;
  }
  if (root->kind != Y_MAP) {
    hkc_error(root->loc, "a spec must be a map (keys hkc, name, batch_sizes, inputs, graph, outputs, ...), got %s",
              ynode_desc(root));
    return -1;
  }
  const ynode_t *keys[K_COUNT], *v[K_COUNT];
  if (map_collect(root, top_keys, K_COUNT, (1u << K_COUNT) - 1, "", keys, v) != 0) return -1;
  /* Sections in dependency order; a missing required key is reported when its turn
   * comes, so errors appear in the order a reader fixes them. */
  for (int k = 0; k < K_COUNT; k++) {
    if ((TOP_REQUIRED >> k & 1u) && !v[k]) {
      hkc_error(root->loc, "missing required key '%s'", top_keys[k]);
      return -1;
    }
    int rc = 0;
    switch (k) {
    case K_HKC: rc = parse_version(c, v[K_HKC]); break;
    case K_NAME: rc = parse_spec_name(c, v[K_NAME]); break;
    case K_DTYPE: rc = parse_dtype(c, v[K_DTYPE]); break;
    case K_BATCH: rc = parse_batch_sizes(c, v[K_BATCH]); break;
    case K_BATCH_POLICY: rc = parse_batch_policy(c, v[K_BATCH_POLICY]); break;
    case K_DIMS: rc = v[K_DIMS] ? parse_dims(c, v[K_DIMS]) : 0; break;
    case K_TARGETS: rc = parse_targets(c, v[K_TARGETS]); break;
    case K_INPUTS: rc = parse_decls(c, v[K_INPUTS], "inputs", HK_ROLE_INPUT); break;
    case K_PARAMS: rc = v[K_PARAMS] ? parse_decls(c, v[K_PARAMS], "params", HK_ROLE_PARAM) : 0; break;
    case K_STATE:
      rc = v[K_STATE] ? parse_decls(c, v[K_STATE], "state", HK_ROLE_STATE) : 0;
      c->n_decl = c->spec->n_tensors;
      break;
    case K_GRAPH: rc = parse_graph(c, v[K_GRAPH]); break;
    case K_OUTPUTS: rc = parse_outputs(c, v[K_OUTPUTS]); break;
    case K_FUSION: rc = parse_fusion(c, v[K_FUSION]); break;
    default: break;
    }
    if (rc != 0) return -1;
  }
  return check_tensors(c);
}

/* Contract in frontend.h. Every error is reported before returning -1; nothing is kept. */
int hkc_spec_parse(const char *path, const char *data, size_t size, hkc_spec_t **out_spec) {
  *out_spec = NULL;
  hkc_spec_t *spec = calloc(1, sizeof *spec);
  if (!spec || !(spec->path = hkc_strdup(path ? path : "<spec>"))) {
    free(spec);
    hkc_error((hkc_loc_t){path, 0, 0}, "out of memory");
    return -1;
  }
  spec->hash = hkc_hash64(data, size);
  int errors_before = hkc_error_count();
  spec_ctx_t c = {.spec = spec, .file = spec->path};
  ynode_t *root = NULL;
  int rc = yaml_tree_build(c.file, data, size, &root);
  if (rc == 0) rc = repeat_expand(c.file, root);
  if (rc == 0) rc = spec_build(&c, root);
  ynode_free(root);
  free(c.pn);
  hkc_names_free(&c.tensor_names);
  hkc_names_free(&c.node_names);
  hkc_names_free(&c.out_names);
  if (rc != 0 && hkc_error_count() == errors_before) hkc_error((hkc_loc_t){path, 0, 0}, "out of memory");
  if (rc != 0) {
    hkc_spec_destroy(spec);
    return -1;
  }
  *out_spec = spec;
  return 0;
}

/* A spec is a page or two of YAML; anything this large is not one (and reading it whole
 * would only delay the error). */
#define HKC_SPEC_MAX_BYTES ((size_t)16 << 20)

/* "-": the spec from standard input, at most HKC_SPEC_MAX_BYTES (errors name it "<stdin>"). */
static int read_stdin(char **out_data, size_t *out_size) {
  size_t cap = 1 << 16, size = 0;
  char *data = malloc(cap + 1);
  while (data) {
    if (size == cap) {
      if (cap >= HKC_SPEC_MAX_BYTES) {
        free(data);
        errno = EFBIG;
        return -1;
      }
      char *grown = realloc(data, 2 * cap + 1);
      if (!grown) break;
      data = grown;
      cap *= 2;
    }
    const size_t n = fread(data + size, 1, cap - size, stdin);
    size += n;
    if (n == 0) {
      if (ferror(stdin)) {
        free(data);
        errno = EIO;
        return -1;
      }
      data[size] = '\0';
      *out_data = data;
      *out_size = size;
      return 0;
    }
  }
  free(data);
  errno = ENOMEM;
  return -1;
}

int hkc_spec_load(const char *path, hkc_spec_t **out_spec) {
  *out_spec = NULL;
  char *data;
  size_t size;
  const int from_stdin = strcmp(path, "-") == 0;
  if (from_stdin) path = "<stdin>";
  if ((from_stdin ? read_stdin(&data, &size) : hkc_read_file_max(path, HKC_SPEC_MAX_BYTES, &data, &size)) != 0) {
    hkc_error((hkc_loc_t){path, 0, 0}, "%s", hkc_strerror(errno));
    return -1;
  }
  int rc = hkc_spec_parse(path, data, size, out_spec);
  free(data);
  return rc;
}
