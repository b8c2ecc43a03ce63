/* SPDX-License-Identifier: Apache-2.0 */
/* spec_repeat.c -- `repeat:` (spec_internal.h): N copies of a layer, expanded in the YAML
 * tree before anything is checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "frontend/spec_internal.h"
#include "util/util.h"

/* ---- repeat: N copies of a layer --------------------------------------------------------------
 * A graph entry `- repeat: {count, var, in, out, params, body}` is expanded in the YAML tree,
 * before anything is checked, into count copies of body's nodes (and of params' declarations,
 * appended to the top-level params); everything after this step sees an ordinary spec.
 * Names in layer k:
 *  - `{var}` (default `{i}`) in any scalar of params and body becomes k;
 *  - a layer-local name -- a body node's name or out, a key of params -- becomes the name
 *    with `{var}` replaced, or NAME_k when it has no `{var}`; body references to it (in, bias,
 *    residual, mul, gamma, beta, ..., every key that names a tensor) are renamed the same way, and
 *    so is a quantized param's `scale:` naming a param of the repeat;
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
  ynode_t *c = hkc_spec_ynode_new(n->kind, loc);
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
      hkc_spec_ynode_free(c);
      return NULL;
    }
    c->n++;
  }
  return c;
oom:
  hkc_spec_ynode_free(c);
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
      else hkc_spec_ynode_free(v), c->kids[p + 1] = s;
    }
    if (rc != 0) {
      hkc_spec_ynode_free(c);
      return NULL;
    }
  }
  return c;
}

static int ynode_append(ynode_t *parent, ynode_t *kid) {
  if (hkc_reserve((void **)&parent->kids, &parent->cap, parent->n + 1, sizeof *parent->kids) != 0) {
    hkc_error(kid->loc, "out of memory");
    hkc_spec_ynode_free(kid);
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
  if (n->kind == Y_SCALAR && hkc_spec_is_identifier(n->text)) {
    const ynode_t *dims = root_value(root, "dims"), *d = NULL;
    for (size_t p = 0; dims && dims->kind == Y_MAP && p + 1 < dims->n; p += 2)
      if (dims->kids[p]->kind == Y_SCALAR && !strcmp(dims->kids[p]->text, n->text)) d = dims->kids[p + 1];
    if (!d) {
      hkc_error(n->loc, "repeat count '%.64s' is not a dim (give an integer, or a dim declared as one)", n->text);
      return -1;
    }
    n = d;
  }
  if (hkc_spec_parse_int(n, "count", 1, HKC_SPEC_MAX_REPEAT, &v) != 0) return -1;
  *out = (long)v;
  return 0;
}

/* Checks one repeat entry and fills r (names borrowed from the tree). */
static int repeat_parse(ynode_t *root, const ynode_t *entry, repeat_t *r) {
  const ynode_t *ek[1], *ev[1], *k[RK_N], *v[RK_N];
  if (hkc_spec_map_collect(entry, repeat_entry_keys, 1, 1u,
                           " beside 'repeat' (a repeat entry holds only repeat: {count, in, out, body, ...})", ek, ev) != 0)
    return -1;
  const ynode_t *rep = ev[RR_REPEAT];
  if (hkc_spec_expect_kind(rep, Y_MAP, "a map {count, var, in, out, params, body}", "repeat") != 0) return -1;
  if (hkc_spec_map_collect(rep, repeat_keys, RK_N, (1u << RK_N) - 1, " in repeat", k, v) != 0) return -1;
  static const int required[] = {RK_COUNT, RK_IN, RK_OUT, RK_BODY};
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
    if (!v[required[i]]) {
      hkc_error(rep->loc, "repeat: missing required key '%s'", repeat_keys[required[i]]);
      return -1;
    }
  }
  if (repeat_count(root, v[RK_COUNT], &r->count) != 0) return -1;
  const char *var = "i";
  if (v[RK_VAR] && hkc_spec_parse_name(v[RK_VAR], "repeat variable", &var) != 0) return -1;
  snprintf(r->pat, sizeof r->pat, "{%s}", var);
  if (hkc_spec_parse_name(v[RK_IN], "tensor", &r->in) != 0 || hkc_spec_parse_name(v[RK_OUT], "tensor", &r->out) != 0) return -1;
  if (!strcmp(r->in, r->out)) {
    hkc_error(v[RK_OUT]->loc, "repeat: 'out' must differ from 'in' ('%s')", r->in);
    return -1;
  }
  r->params = v[RK_PARAMS];
  if (r->params && hkc_spec_expect_kind(r->params, Y_MAP, "a map of tensor names to shapes", "params") != 0) return -1;
  r->body = v[RK_BODY];
  if (hkc_spec_expect_kind(r->body, Y_SEQ, "a list of nodes", "body") != 0) return -1;
  if (r->body->n == 0) {
    hkc_error(r->body->loc, "empty repeat body (give at least one node)");
    return -1;
  }
  /* Layer-local tensors: params' keys and the nodes' outs (the layer's out is not local). */
  size_t cap = 0;
  int writes_out = 0;
  for (size_t p = 0; r->params && p + 1 < r->params->n; p += 2) {
    const ynode_t *key = r->params->kids[p];
    if (hkc_spec_expect_kind(key, Y_SCALAR, "a name", "params") != 0) return -1;
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
    if (hkc_spec_expect_kind(node, Y_MAP, "a node map", "body") != 0) return -1;
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
int hkc_spec_repeat_expand(const char *file, ynode_t *root) {
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
  if (params && hkc_spec_ynode_is_null(params)) { /* `params:` with nothing: becomes the repeats' map */
    params->kind = Y_MAP;
    free(params->text);
    params->text = NULL;
  }
  ynode_t *out = hkc_spec_ynode_new(Y_SEQ, graph->loc);
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
      ynode_t *key = hkc_spec_ynode_new(Y_SCALAR, r.params->loc);
      params = hkc_spec_ynode_new(Y_MAP, r.params->loc);
      if (!key || !(key->text = hkc_strdup("params")) || !params) {
        hkc_spec_ynode_free(key);
        hkc_spec_ynode_free(params);
        hkc_error(e->loc, "out of memory");
        free(r.locals);
        goto done;
      }
      key->plain = 1;
      if (ynode_append(root, key) != 0 || ynode_append(root, params) != 0) {
        free(r.locals);
        goto done;
      }
    } else if (r.params && hkc_spec_expect_kind(params, Y_MAP, "a map of tensor names to shapes", "params") != 0) {
      free(r.locals);
      goto done;
    }
    int bad = 0;
    for (long k = 0; k < r.count && !bad; k++) {
      for (size_t p = 0; r.params && p + 1 < r.params->n && !bad; p += 2) {
        ynode_t *key = ynode_copy(&r, r.params->kids[p], k, 1), *val = NULL;
        bad = !key || rename_local(&r, key, k) != 0 || !(val = ynode_copy(&r, r.params->kids[p + 1], k, 0));
        if (bad) {
          hkc_spec_ynode_free(key);
          break;
        }
        const ynode_t *decl = r.params->kids[p + 1]; /* a quantized param's scale: one of the layer's params */
        for (size_t q = 0; decl->kind == Y_MAP && q + 1 < decl->n && q + 1 < val->n && !bad; q += 2) {
          const ynode_t *sk = decl->kids[q], *sv = decl->kids[q + 1];
          if (sk->kind != Y_SCALAR || strcmp(sk->text, "scale") || sv->kind != Y_SCALAR) continue;
          for (size_t i = 0; i < r.n_locals && !bad; i++)
            if (!strcmp(sv->text, r.locals[i]))
              bad = set_text(val->kids[q + 1], hkc_strdup(sv->text)) != 0 || rename_local(&r, val->kids[q + 1], k) != 0;
        }
        if (bad) {
          hkc_spec_ynode_free(key);
          hkc_spec_ynode_free(val);
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
  for (size_t j = 0; j < graph->n; j++) hkc_spec_ynode_free(graph->kids[j]);
  free(graph->kids);
  graph->kids = out->kids;
  graph->n = out->n;
  graph->cap = out->cap;
  out->kids = NULL;
  out->n = 0;
  rc = 0;
done:
  hkc_spec_ynode_free(out);
  return rc;
}
