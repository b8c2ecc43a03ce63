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
 * reported as FILE:LINE:COL and parsing stops.
 *
 * This file holds the entry points and the builder (top-level keys, declarations, the graph,
 * outputs, fusion); the YAML tree, `repeat:`, graph nodes and the checks have files of their
 * own (spec_internal.h lists them). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "frontend/spec_internal.h"
#include "util/util.h"

/* ---- the builder ---------------------------------------------------------------------------- */
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
  t->scale = HKC_NONE;
  t->loc = loc;
  return (int)(s->n_tensors - 1);
}

/* A shape list: 1..HK_MAX_RANK expressions over the dims. */
static int parse_shape(spec_ctx_t *c, const ynode_t *n, const char *what, hkc_tensor_t *t) {
  if (hkc_spec_expect_kind(n, Y_SEQ, "a shape list like [batch, seq, hidden]", what) != 0) return -1;
  if (n->n < 1 || n->n > HK_MAX_RANK) {
    hkc_error(n->loc, "shape of '%s' must have 1 to %u dims, got %zu", what, HK_MAX_RANK, n->n);
    return -1;
  }
  for (size_t i = 0; i < n->n; i++) {
    const ynode_t *d = n->kids[i];
    if (hkc_spec_expect_kind(d, Y_SCALAR, "a dimension (integer or expression)", what) != 0) return -1;
    if (hkc_dimexpr_eval(d->text, c->spec->dims, c->spec->n_dims, hkc_spec_scalar_text_loc(d), &t->dims[i]) != 0) return -1;
  }
  t->rank = (uint32_t)n->n;
  return 0;
}

static int parse_version(spec_ctx_t *c, const ynode_t *ver) {
  int64_t v;
  if (hkc_spec_parse_int(ver, "hkc", INT32_MIN, INT32_MAX, &v) != 0) return -1;
  if (v != HKC_SPEC_VERSION) {
    hkc_error(ver->loc, "unsupported spec format version %lld (this hkc reads version %d)", (long long)v,
              HKC_SPEC_VERSION);
    return -1;
  }
  c->spec->version = (int)v;
  return 0;
}

static int parse_spec_name(spec_ctx_t *c, const ynode_t *name) {
  if (hkc_spec_expect_kind(name, Y_SCALAR, "a string", "name") != 0) return -1;
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
    if (hkc_spec_expect_kind(dtype, Y_SCALAR, "a dtype", "dtype") != 0) return -1;
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
  if (hkc_spec_expect_kind(n, Y_SEQ, "a list of batch sizes", "batch_sizes") != 0) return -1;
  if (n->n == 0) {
    hkc_error(n->loc, "'batch_sizes' is empty (give at least one batch size)");
    return -1;
  }
  for (size_t i = 0; i < n->n; i++) {
    int64_t b;
    if (hkc_spec_parse_int(n->kids[i], "batch_sizes", 1, HKC_SPEC_MAX_BATCH, &b) != 0) return -1;
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
  if (hkc_spec_expect_kind(n, Y_SCALAR, "pad or exact", "batch_policy") != 0) return -1;
  if (!strcmp(n->text, "pad")) return 0;
  if (!strcmp(n->text, "exact")) return c->spec->batch_policy = HK_BATCH_POLICY_REC_EXACT, 0;
  hkc_error(n->loc, "unknown batch policy '%.64s' (expected pad or exact)", n->text);
  return -1;
}

/* parallel: {tensor: N}, 1 <= N <= HK_MAX_TENSOR_RANKS: the ranks `hkc build` splits the graph
 * over (hkc_shard; `hkc build --tensor-parallel` overrides it). */
static int parse_parallel(spec_ctx_t *c, const ynode_t *n) {
  if (hkc_spec_expect_kind(n, Y_MAP, "a map {tensor: N}", "parallel") != 0) return -1;
  static const char *const keys[] = {"tensor"};
  const ynode_t *k[1], *v[1];
  if (hkc_spec_map_collect(n, keys, 1, 1u, "parallel", k, v) != 0) return -1;
  if (!v[0]) return 0;
  int64_t r;
  if (hkc_spec_parse_int(v[0], "tensor", 1, HK_MAX_TENSOR_RANKS, &r) != 0) return -1;
  c->spec->tensor_parallel = (int)r;
  return 0;
}

/* dims: name -> positive integer, or an expression over the dims above it. */
static int parse_dims(spec_ctx_t *c, const ynode_t *n) {
  hkc_spec_t *s = c->spec;
  if (hkc_spec_expect_kind(n, Y_MAP, "a map of dim names to sizes", "dims") != 0) return -1;
  for (size_t p = 0; p + 1 < n->n; p += 2) {
    const ynode_t *k = n->kids[p], *v = n->kids[p + 1];
    const char *name;
    if (hkc_spec_parse_name(k, "dim", &name) != 0) return -1;
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
    if (hkc_spec_expect_kind(v, Y_SCALAR, "a positive integer", name) != 0) return -1;
    hkc_dim_t d;
    if (hkc_dimexpr_eval(v->text, s->dims, s->n_dims, hkc_spec_scalar_text_loc(v), &d) != 0) return -1;
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
  if (hkc_spec_expect_kind(n, Y_SEQ, "a list of target names", "targets") != 0) return -1;
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
    if (hkc_spec_expect_kind(t, Y_SCALAR, "a target name", "targets") != 0) return -1;
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
  if (hkc_spec_expect_kind(v, Y_SEQ, "a list of checkpoint tensor names", "parts") != 0) return -1;
  if (v->n == 0 || v->n > HK_MAX_PARTS) {
    hkc_error(v->loc, "tensor '%s': 'parts' must list 1 to %u checkpoint tensors, got %zu", name, HK_MAX_PARTS, v->n);
    return -1;
  }
  t->parts = calloc(v->n, sizeof *t->parts);
  if (!t->parts) return hkc_error(v->loc, "out of memory"), -1;
  for (size_t i = 0; i < v->n; i++) {
    const ynode_t *e = v->kids[i];
    if (hkc_spec_expect_kind(e, Y_SCALAR, "a checkpoint tensor name", "parts") != 0) return -1;
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

/* A quantized param's `block: [rows, cols]`: two positive integers into t->block. */
static int parse_block(const ynode_t *v, const char *name, hkc_tensor_t *t) {
  if (hkc_spec_expect_kind(v, Y_SEQ, "a list [rows, cols]", "block") != 0) return -1;
  if (v->n != 2) {
    hkc_error(v->loc, "tensor '%s': 'block' is [rows, cols] (two integers), got %zu values", name, v->n);
    return -1;
  }
  for (int i = 0; i < 2; i++)
    if (hkc_spec_parse_int(v->kids[i], "block", 1, INT32_MAX, &t->block[i]) != 0) return -1;
  return 0;
}

/* One declaration's value: a shape list, or {shape: [...], dtype: T, parts: [...], scale: S,
 * block: [r, c]} where T is the spec's dtype or, for an input, i32 (token ids, sequence lengths,
 * ctx, slot), for a param int8 or fp8_e4m3 (quantized: with `scale` naming the f32 param of its
 * scales, checked by check_scales, and optionally `block`) or f32 (such a scale param); parts
 * (params only) the checkpoint tensors the param concatenates along axis 0. */
static int parse_decl(spec_ctx_t *c, const ynode_t *v, const char *name, hk_role_t role, hkc_tensor_t *t) {
  if (v->kind != Y_MAP) return parse_shape(c, v, name, t);
  static const char *const keys[] = {"shape", "dtype", "parts", "scale", "block"};
  const ynode_t *k[5], *val[5];
  char context[300];
  snprintf(context, sizeof context, " for tensor '%s'", name);
  for (size_t p = 0; role != HK_ROLE_PARAM && p + 1 < v->n; p += 2)
    if (v->kids[p]->kind == Y_SCALAR && !strcmp(v->kids[p]->text, "parts")) {
      hkc_error(v->kids[p]->loc,
                "tensor '%s': only params may have 'parts' (the checkpoint tensors a param is bound from)", name);
      return -1;
    }
  if (hkc_spec_map_collect(v, keys, 5, role == HK_ROLE_PARAM ? 31u : 3u, context, k, val) != 0) return -1;
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
  if (val[1] && hkc_spec_expect_kind(val[1], Y_SCALAR, "a dtype", "dtype") != 0) return -1;
  const int quantized = val[1] && (!strcmp(val[1]->text, "int8") || !strcmp(val[1]->text, "fp8_e4m3"));
  if ((val[3] || val[4]) && !quantized) {
    hkc_error((val[3] ? val[3] : val[4])->loc, "tensor '%s': '%s' belongs to a quantized param (dtype int8 or fp8_e4m3)",
              name, val[3] ? "scale" : "block");
    return -1;
  }
  if (!val[1]) return 0;
  if (role == HK_ROLE_PARAM && (quantized || !strcmp(val[1]->text, "f32"))) {
    if (quantized) {
      if (!val[3]) {
        hkc_error(val[1]->loc, "tensor '%s': dtype %s needs 'scale: <the f32 param of its scales>'", name, val[1]->text);
        return -1;
      }
      if (val[4] && parse_block(val[4], name, t) != 0) return -1;
      t->dtype = !strcmp(val[1]->text, "int8") ? HK_DTYPE_I8 : HK_DTYPE_FP8_E4M3;
    } else {
      t->dtype = HK_DTYPE_F32; /* the spec's, or a quantized param's scales: check_scales */
    }
    return 0;
  }
  if (role == HK_ROLE_STATE && !strcmp(val[1]->text, "fp8_e4m3")) { /* an FP8 KV cache */
    t->dtype = HK_DTYPE_FP8_E4M3;
    return 0;
  }
  if (!strcmp(val[1]->text, "i32")) {
    if (role != HK_ROLE_INPUT) {
      hkc_error(val[1]->loc,
                "tensor '%s': only inputs may be i32 (ids, lengths, ctx, slot); %s have the spec's dtype %s", name,
                role == HK_ROLE_STATE ? "state tensors" : "params", hkc_dtype_name(c->spec->dtype));
      return -1;
    }
    t->dtype = HK_DTYPE_I32;
  } else if (strcmp(val[1]->text, hkc_dtype_name(c->spec->dtype)) != 0) {
    hkc_error(val[1]->loc,
              "tensor '%s': dtype '%.64s' (expected the spec's dtype %s, i32 for an input, int8 or fp8_e4m3 for a "
              "quantized param, f32 for its scales, fp8_e4m3 for a state tensor: an FP8 KV cache)",
              name, val[1]->text, hkc_dtype_name(c->spec->dtype));
    return -1;
  }
  return 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

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
    const ynode_t *parts = v->kind == Y_MAP ? hkc_spec_map_value(v, "parts") : NULL;
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

/* The quantized params' scales: `scale` names an f32 param [scale_rows, scale_cols] (or [1]: one
 * scale) that covers the param [rows, cols] in blocks -- `block`, or by default rows / scale_rows
 * x cols / scale_cols, which must then divide -- with ceil(rows / block rows) = scale_rows and
 * likewise for the columns. An f32 param in a 16-bit spec must be some quantized param's scales. */
static int check_scales(spec_ctx_t *c, const ynode_t *params) {
  hkc_spec_t *s = c->spec;
  for (size_t p = 0; p + 1 < params->n; p += 2) {
    const ynode_t *v = params->kids[p + 1];
    const ynode_t *sv = v->kind == Y_MAP ? hkc_spec_map_value(v, "scale") : NULL;
    const int ti = hkc_tensor_find(s, params->kids[p]->text);
    if (!sv || ti < 0) continue;
    hkc_tensor_t *t = &s->tensors[ti];
    char sh[HKC_SHAPE_STR], ssh[HKC_SHAPE_STR];
    if (hkc_spec_expect_kind(sv, Y_SCALAR, "the name of an f32 param", "scale") != 0) return -1;
    const int si = hkc_tensor_find(s, sv->text);
    if (si < 0 || s->tensors[si].role != HK_ROLE_PARAM || s->tensors[si].dtype != HK_DTYPE_F32) {
      hkc_error(sv->loc, "tensor '%s': scale '%.64s' is not an f32 param (declare it {shape: [...], dtype: f32})",
                t->name, sv->text);
      return -1;
    }
    const hkc_tensor_t *sc = &s->tensors[si];
    if (t->rank != 2 || t->dims[0].mul || t->dims[1].mul || t->dims[0].add < 1 || t->dims[1].add < 1) {
      hkc_error(t->loc,
                "tensor '%s' %s: a quantized param is a matrix [rows, cols] of positive sizes that do not depend on "
                "batch",
                t->name, hkc_tensor_shape_str(t, sh));
      return -1;
    }
    const int64_t rows = t->dims[0].add, cols = t->dims[1].add;
    int64_t srows = 1, scols = 1;
    if (sc->rank == 2 && !sc->dims[0].mul && !sc->dims[1].mul && sc->dims[0].add >= 1 && sc->dims[1].add >= 1)
      srows = sc->dims[0].add, scols = sc->dims[1].add;
    else if (!(sc->rank == 1 && !sc->dims[0].mul && sc->dims[0].add == 1)) {
      hkc_error(sv->loc,
                "tensor '%s': scale '%s' is %s; expected [scale_rows, scale_cols] of positive sizes not depending on "
                "batch, or [1]",
                t->name, sc->name, hkc_tensor_shape_str(sc, ssh));
      return -1;
    }
    if (!t->block[0]) {
      if (rows % srows || cols % scols) {
        hkc_error(sv->loc,
                  "tensor '%s' %s: its scales '%s' %s do not divide it evenly; say the block each scale covers with "
                  "'block: [rows, cols]'",
                  t->name, hkc_tensor_shape_str(t, sh), sc->name, hkc_tensor_shape_str(sc, ssh));
        return -1;
      }
      t->block[0] = rows / srows, t->block[1] = cols / scols;
    }
    if (t->n_parts && t->block[0] != 1) { /* its parts' rows are not known here: a block may not straddle two */
      hkc_error(sv->loc,
                "tensor '%s': a quantized param made of parts takes a scale per row ([rows, 1] or [rows, cols / "
                "block]), not blocks of %lld rows",
                t->name, (long long)t->block[0]);
      return -1;
    }
    const int64_t need_rows = (rows - 1) / t->block[0] + 1, need_cols = (cols - 1) / t->block[1] + 1; /* ceil, no overflow */
    if (need_rows != srows || need_cols != scols) {
      hkc_error(sv->loc, "tensor '%s' %s in blocks of %lld x %lld needs %lld x %lld scales; '%s' is %s", t->name,
                hkc_tensor_shape_str(t, sh), (long long)t->block[0], (long long)t->block[1], (long long)need_rows,
                (long long)need_cols, sc->name, hkc_tensor_shape_str(sc, ssh));
      return -1;
    }
    t->scale = si;
  }
  for (size_t i = 0; s->dtype != HK_DTYPE_F32 && i < s->n_tensors; i++) {
    const hkc_tensor_t *t = &s->tensors[i];
    if (t->role != HK_ROLE_PARAM || t->dtype != HK_DTYPE_F32) continue;
    int is_scale = 0;
    for (size_t j = 0; j < s->n_tensors && !is_scale; j++) is_scale = s->tensors[j].scale == (int)i;
    if (!is_scale) {
      hkc_error(t->loc, "tensor '%s': an f32 param in a %s spec must be the scales of a quantized param (its 'scale:')",
                t->name, hkc_dtype_name(s->dtype));
      return -1;
    }
  }
  return 0;
}

/* inputs / params / state: name -> shape, or name -> {shape, dtype[, parts | scale, block]}. */
static int parse_decls(spec_ctx_t *c, const ynode_t *n, const char *what, hk_role_t role) {
  if (hkc_spec_expect_kind(n, Y_MAP, "a map of tensor names to shapes", what) != 0) return -1;
  if (role == HK_ROLE_INPUT && n->n == 0) {
    hkc_error(n->loc, "'inputs' is empty (a graph needs at least one input)");
    return -1;
  }
  for (size_t p = 0; p + 1 < n->n; p += 2) {
    const char *name;
    if (hkc_spec_parse_name(n->kids[p], "tensor", &name) != 0) return -1;
    int t = add_tensor(c, name, role, n->kids[p]->loc);
    if (t < 0) return -1;
    if (parse_decl(c, n->kids[p + 1], name, role, &c->spec->tensors[t]) != 0) return -1;
    if (role == HK_ROLE_STATE && hkc_spec_check_state_shape(&c->spec->tensors[t]) != 0) return -1;
  }
  return role == HK_ROLE_PARAM ? (check_part_names(c, n) == 0 && check_scales(c, n) == 0 ? 0 : -1) : 0;
}

/* ---- the graph ------------------------------------------------------------------------------------- */
static int parse_graph(spec_ctx_t *c, const ynode_t *g) {
  hkc_spec_t *s = c->spec;
  if (hkc_spec_expect_kind(g, Y_SEQ, "a list of nodes", "graph") != 0) return -1;
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
    if (hkc_spec_parse_node(c, g->kids[j], pn) != 0) goto done;
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
      if (ref && hkc_spec_resolve_ref(c, ref->text, &c->pn[j].ref_val[r]) != 0) {
        hkc_error(ref->loc, "node '%s': undefined tensor '%s' in '%s' (not an input, a param or a node output)",
                  c->pn[j].name->text, ref->text, hkc_spec_ref_names[r]);
        goto done;
      }
    }
  }
  if (hkc_spec_topo_sort(c, order) != 0) goto done;

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
    if (hkc_spec_infer_node(c, &c->pn[order[i]], &s->nodes[i]) != 0) goto done;
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
  if (hkc_spec_expect_kind(n, Y_SEQ, "a list of tensor names", "outputs") != 0) return -1;
  if (n->n == 0) {
    hkc_error(n->loc, "'outputs' is empty (a graph needs at least one output)");
    return -1;
  }
  if (!(s->outputs = calloc(n->n, sizeof *s->outputs))) return -1;
  for (size_t i = 0; i < n->n; i++) {
    const ynode_t *o = n->kids[i];
    const char *name;
    if (hkc_spec_parse_name(o, "tensor", &name) != 0) return -1;
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
  if (n->kind == Y_SCALAR && !hkc_spec_ynode_is_null(n)) {
    if (!strcmp(n->text, "auto")) return 0;
    if (!strcmp(n->text, "none")) return s->fusion = HKC_FUSION_NONE, 0;
    hkc_error(n->loc, "unknown fusion mode '%.64s' (expected auto, none or {groups: [[node, ...], ...]})", n->text);
    return -1;
  }
  if (hkc_spec_expect_kind(n, Y_MAP, "auto, none or {groups: [[node, ...], ...]}", "fusion") != 0) return -1;
  static const char *const fusion_keys[] = {"groups"};
  const ynode_t *keys[1], *vals[1];
  if (hkc_spec_map_collect(n, fusion_keys, 1, 1u, " in 'fusion'", keys, vals) != 0) return -1;
  if (!vals[0]) {
    hkc_error(n->loc, "fusion: missing required key 'groups'");
    return -1;
  }
  const ynode_t *g = vals[0];
  if (hkc_spec_expect_kind(g, Y_SEQ, "a list of node-name lists", "groups") != 0) return -1;
  s->fusion = HKC_FUSION_GROUPS;
  const ynode_t **seen = calloc(s->n_nodes ? s->n_nodes : 1, sizeof *seen); /* node -> where grouped */
  int rc = -1;
  if (!seen) goto done;
  if (g->n && (!(s->groups = calloc(g->n, sizeof *s->groups)) || !(s->group_sizes = calloc(g->n, sizeof *s->group_sizes)) ||
               !(s->group_locs = calloc(g->n, sizeof *s->group_locs))))
    goto done;
  for (size_t i = 0; i < g->n; i++) {
    const ynode_t *grp = g->kids[i];
    if (hkc_spec_expect_kind(grp, Y_SEQ, "a list of node names", "groups") != 0) goto done;
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
      if (hkc_spec_parse_name(e, "node", &name) != 0) goto done;
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

/* ---- entry points ------------------------------------------------------------------------------------ */
enum {
  K_HKC, K_NAME, K_DTYPE, K_BATCH, K_BATCH_POLICY, K_DIMS, K_TARGETS, K_INPUTS, K_PARAMS, K_STATE, K_GRAPH,
  K_OUTPUTS, K_FUSION, K_PARALLEL, K_COUNT
};
static const char *const top_keys[K_COUNT] = {"hkc",    "name",    "dtype",  "batch_sizes", "batch_policy",
                                              "dims",   "targets", "inputs", "params",      "state",
                                              "graph",  "outputs", "fusion",      "parallel"};
#define TOP_REQUIRED ((1u << K_HKC) | (1u << K_NAME) | (1u << K_BATCH) | (1u << K_INPUTS) | (1u << K_GRAPH) | (1u << K_OUTPUTS))

/* A gemm whose B is a quantized param reads it through a dequant node placed just before the
 * first gemm that does: `<param>_dequant`, a tensor of the spec's dtype (the arena holds it from
 * that node to its last reader, so a layer's weights at a time, not the model's). The nodes are
 * rebuilt in one pass; the producers and the fusion groups follow their nodes' new indices. */
static int insert_dequant(spec_ctx_t *c) {
  hkc_spec_t *s = c->spec;
  const size_t n_old = s->n_nodes, first_dq = s->n_tensors; /* the copies' tensors come after the others */
  int *dq_of = malloc(s->n_tensors * sizeof *dq_of), *moved = malloc((n_old ? n_old : 1) * sizeof *moved);
  size_t adds = 0;
  int rc = -1;
  if (!dq_of || !moved) goto oom;
  for (size_t i = 0; i < s->n_tensors; i++) dq_of[i] = HKC_NONE;
  for (size_t j = 0; j < n_old; j++) { /* the dequantized copies, in first-use order */
    const hkc_node_t *nd = &s->nodes[j];
    if (nd->op != HK_OP_GEMM || !hkc_dtype_quantized(s->tensors[nd->in[1]].dtype) || dq_of[nd->in[1]] != HKC_NONE)
      continue;
    const hkc_tensor_t *q = &s->tensors[nd->in[1]];
    char name[HK_MAX_NAME_LEN + 16];
    snprintf(name, sizeof name, "%s_dequant", q->name);
    const int taken = hkc_tensor_find(s, name);
    if (taken >= 0) {
      hkc_error(s->tensors[taken].loc, "tensor '%s': the name is taken by the dequantized copy of param '%s'; rename it",
                name, q->name);
      goto done;
    }
    for (size_t k = 0; k < n_old; k++)
      if (!strcmp(s->nodes[k].name, name)) {
        hkc_error(s->nodes[k].loc, "node '%s': the name is taken by the dequant node of param '%s'; rename it", name,
                  q->name);
        goto done;
      }
    const int q_index = nd->in[1], dq = add_tensor(c, name, HK_ROLE_INTERMEDIATE, q->loc);
    if (dq < 0) goto done;
    s->tensors[dq].rank = s->tensors[q_index].rank;
    memcpy(s->tensors[dq].dims, s->tensors[q_index].dims, sizeof s->tensors[dq].dims);
    int *grown = realloc(dq_of, s->n_tensors * sizeof *dq_of);
    if (!grown) goto oom;
    dq_of = grown;
    dq_of[dq] = HKC_NONE;
    dq_of[q_index] = dq;
    adds++;
  }
  if (!adds) {
    rc = 0;
    goto done;
  }
  hkc_node_t *nodes = calloc(n_old + adds, sizeof *nodes);
  if (!nodes) goto oom;
  size_t at = 0;
  for (size_t j = 0; j < n_old; j++) {
    hkc_node_t *nd = &s->nodes[j];
    const int q = nd->op == HK_OP_GEMM ? nd->in[1] : HKC_NONE;
    if (q != HKC_NONE && dq_of[q] != HKC_NONE && s->tensors[dq_of[q]].producer == HKC_NONE) {
      hkc_node_t *dn = &nodes[at];
      dn->bias = dn->residual = dn->mul = dn->gamma = dn->beta = dn->add_in = dn->sum_out = HKC_NONE;
      dn->lengths = dn->mask = dn->pos = dn->ctx = dn->slot = dn->k_cache = dn->v_cache = HKC_NONE;
      for (int i = 0; i < HKC_MAX_NODE_IN; i++) dn->in[i] = HKC_NONE;
      if (!(dn->name = hkc_strdup(s->tensors[dq_of[q]].name))) {
        free(nodes);
        goto oom;
      }
      dn->op = HK_OP_DEQUANT;
      dn->loc = nd->loc;
      dn->in[0] = q;
      dn->n_in = 1;
      dn->n_fused = 1;
      dn->out = dq_of[q];
      s->tensors[dq_of[q]].producer = (int)at++;
    }
    if (q != HKC_NONE && dq_of[q] != HKC_NONE) nd->in[1] = dq_of[q];
    moved[j] = (int)at;
    nodes[at++] = *nd;
  }
  for (size_t i = 0; i < first_dq; i++)
    if (s->tensors[i].producer != HKC_NONE) s->tensors[i].producer = moved[s->tensors[i].producer];
  for (size_t g = 0; g < s->n_groups; g++)
    for (size_t k = 0; k < s->group_sizes[g]; k++) s->groups[g][k] = moved[s->groups[g][k]];
  free(s->nodes);
  s->nodes = nodes;
  s->n_nodes = at;
  rc = 0;
  goto done;
oom:
  hkc_error((hkc_loc_t){c->file, 0, 0}, "out of memory");
done:
  free(dq_of);
  free(moved);
  return rc;
}

static int spec_build(spec_ctx_t *c, const ynode_t *root) {
  if (!root) {
    hkc_error((hkc_loc_t){c->file, 0, 0}, "empty spec (expected a map with keys hkc, name, batch_sizes, inputs, graph, "
                                          "outputs)");
    return -1;
  }
  if (root->kind != Y_MAP) {
    hkc_error(root->loc, "a spec must be a map (keys hkc, name, batch_sizes, inputs, graph, outputs, ...), got %s",
              hkc_spec_ynode_desc(root));
    return -1;
  }
  const ynode_t *keys[K_COUNT], *v[K_COUNT];
  if (hkc_spec_map_collect(root, top_keys, K_COUNT, (1u << K_COUNT) - 1, "", keys, v) != 0) return -1;
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
    case K_PARALLEL: rc = v[K_PARALLEL] ? parse_parallel(c, v[K_PARALLEL]) : 0; break;
    default: break;
    }
    if (rc != 0) return -1;
  }
  return hkc_spec_check_tensors(c) == 0 && insert_dequant(c) == 0 ? 0 : -1;
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
  int rc = hkc_spec_yaml_tree_build(c.file, data, size, &root);
  if (rc == 0) rc = hkc_spec_repeat_expand(c.file, root);
  if (rc == 0) rc = spec_build(&c, root);
  hkc_spec_ynode_free(root);
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
