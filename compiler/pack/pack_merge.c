/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pack_merge.c -- `hkc merge`: packs of one spec, built for different targets (one CI job per
 * target, possibly on different machines), into the pack a single build of all their targets
 * writes, byte for byte.
 *
 * Why the bytes can match: the writer's output depends only on the spec's manifest and
 * tensors, the targets in order (each one's kernels, graphs and code), and the provenance text
 * (pack_write.c). A build's provenance is lines that hold for every target (hkc version, spec
 * hash, fusion, tuning, kernel options, ...) followed by one `target.<name>=` line per target;
 * the writer appends one `toolchain.<name>=` line per target. Nothing records the time, a path
 * or the target list elsewhere. So the merge reads each verified input back into the writer's
 * structs, keeps each target's zstd frame as it is (the writer compressed it at the level in
 * provenance), requires the shared provenance lines to be equal, and writes again -- adding
 * one `merge.input.<i>=` line per input after the target lines (which targets it gave and its
 * signature, as the caller describes it), so that the merged pack says whose code it holds.
 * An input's own `merge.` lines (it was merged itself) are not carried: its signature, which
 * the new line records, vouches for them.
 *
 * The inputs are untrusted: they come verified (hk_pack_verify through hk_pack_open_file_ex),
 * every code payload is decompressed once here so a damaged frame is refused, and the result
 * is verified again by the writer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "lower/lower.h"
#include "pack/pack.h"
#include "pack_internal.h" /* hk_pack_view_t, hk_pack_code_load */
#include "util/util.h"

static const hkc_loc_t NOLOC = {0};

/* ---- provenance lines ------------------------------------------------------------------ */
typedef struct line {
  const char *p;
  size_t len; /* without the newline */
} line_t;

typedef struct prov {
  line_t *lines;
  size_t n;
} prov_t;

/* Splits provenance into lines (a missing final newline is tolerated). 0 / -1 (OOM). */
static int prov_split(const hk_pack_view_t *v, prov_t *out) {
  const char *p = v->provenance, *end = v->provenance + v->provenance_size;
  size_t cap = 0;
  out->lines = NULL;
  out->n = 0;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *e = nl ? nl : end;
    if (hkc_reserve((void **)&out->lines, &cap, out->n + 1, sizeof *out->lines) != 0) return -1;
    out->lines[out->n++] = (line_t){p, (size_t)(e - p)};
    p = nl ? nl + 1 : end;
  }
  return 0;
}

static int line_starts(const line_t *l, const char *prefix) {
  size_t n = strlen(prefix);
  return l->len >= n && memcmp(l->p, prefix, n) == 0;
}

/* Whether line l is "<kind>.<target>=..." for one of the pack's targets. */
static int is_target_line(const hk_pack_view_t *v, const line_t *l, const char *kind) {
  size_t k = strlen(kind);
  if (l->len <= k + 1 || memcmp(l->p, kind, k) != 0 || l->p[k] != '.') return 0;
  for (uint32_t t = 0; t < v->target_count; t++) {
    const char *name = hk_pack_string(v, v->targets[t].name);
    size_t n = strlen(name);
    if (l->len > k + 1 + n && memcmp(l->p + k + 1, name, n) == 0 && l->p[k + 1 + n] == '=') return 1;
  }
  return 0;
}

/* "merge.*": what a merge recorded about its inputs (hkc_pack_merge_memory). */
static int is_merge_line(const line_t *l) { return l->len > 6 && memcmp(l->p, "merge.", 6) == 0; }

static int is_shared_line(const hk_pack_view_t *v, const line_t *l) {
  return !is_target_line(v, l, "target") && !is_target_line(v, l, "toolchain") && !is_merge_line(l);
}

/* The key of a provenance line ("fusion" of "fusion=auto"), for messages. */
static int key_len(const line_t *l) {
  const char *eq = memchr(l->p, '=', l->len);
  return (int)(eq ? (size_t)(eq - l->p) : l->len);
}

/* Whether a shared line from index `from` on has the key of line l. */
static int has_key(const hk_pack_view_t *v, const prov_t *p, size_t from, const line_t *l) {
  const int k = key_len(l);
  for (size_t i = from; i < p->n; i++)
    if (is_shared_line(v, &p->lines[i]) && key_len(&p->lines[i]) == k && memcmp(p->lines[i].p, l->p, (size_t)k) == 0)
      return 1;
  return 0;
}

/* Compares the shared lines of two inputs; reports the first difference. 0 / -1. */
static int prov_compare(const hk_pack_view_t *va, const prov_t *a, const char *name_a, const hk_pack_view_t *vb,
                        const prov_t *b, const char *name_b) {
  size_t i = 0, j = 0;
  for (;;) {
    while (i < a->n && !is_shared_line(va, &a->lines[i])) i++;
    while (j < b->n && !is_shared_line(vb, &b->lines[j])) j++;
    if (i == a->n && j == b->n) return 0;
    const line_t *la = i < a->n ? &a->lines[i] : NULL, *lb = j < b->n ? &b->lines[j] : NULL;
    if (la && lb && la->len == lb->len && memcmp(la->p, lb->p, la->len) == 0) {
      i++, j++;
      continue;
    }
    /* a line only one side has (pdl=off, fusion_dual=off, ...): name that one */
    if (la && lb && (key_len(la) != key_len(lb) || memcmp(la->p, lb->p, (size_t)key_len(la)) != 0)) {
      if (!has_key(va, a, i, lb)) la = NULL;
      else if (!has_key(vb, b, j, la)) lb = NULL;
    }
    /* the fusion lines depend on a build's whole target list: say how to build the parts */
    const line_t *l = la ? la : lb;
    const int fusion =
        line_starts(l, "fusion_apart=") || line_starts(l, "fusion_dual=") || line_starts(l, "fusion_rope=") ||
        line_starts(l, "fusion_norm=") || line_starts(l, "fusion_ln=");
    const char *how = line_starts(l, "fusion_apart=")
                          ? "auto fusion weighs each step on the build's targets; build each part with "
                            "--merge-targets LIST naming all the targets"
                      : line_starts(l, "fusion_dual=")
                          ? "a target without a dual gemm kernel keeps SwiGLU as two gemms for every target of a "
                            "build; build each part with --merge-targets LIST naming all the targets"
                      : line_starts(l, "fusion_rope=") || line_starts(l, "fusion_norm=") || line_starts(l, "fusion_ln=")
                          ? "a target without a rope epilogue, a folded rmsnorm or a norm epilogue keeps those nodes apart for every "
                            "target of a build; build each part with --merge-targets LIST naming all the targets"
                          : "build every target with the same hkc, spec and options";
    const char *what = fusion ? "fused" : "built";
    if (la && lb && key_len(la) == key_len(lb) && memcmp(la->p, lb->p, (size_t)key_len(la)) == 0)
      hkc_error(NOLOC, "cannot merge: %s and %s were %s differently: %.*s in %s, %.*s in %s (%s)", name_a, name_b,
                what, (int)la->len, la->p, name_a, (int)lb->len, lb->p, name_b, how);
    else if (la && lb)
      hkc_error(NOLOC, "cannot merge: %s and %s were built differently: %s has \"%.*s\" where %s has \"%.*s\" "
                "(build every target with the same hkc, spec and options)", name_a, name_b, name_a, (int)la->len,
                la->p, name_b, (int)lb->len, lb->p);
    else
      hkc_error(NOLOC, "cannot merge: %s and %s were %s differently: only %s records \"%.*s\" (%s)", name_a, name_b,
                what, la ? name_a : name_b, (int)l->len, l->p, how);
    return -1;
  }
}

/* ---- the inputs must describe one build --------------------------------------------------- */
static int same_spec(const hk_pack_view_t *a, const char *name_a, const hk_pack_view_t *b, const char *name_b) {
  const hk_manifest_t *ma = a->manifest, *mb = b->manifest;
#define DIFFER(...)                                                                          \
  do {                                                                                       \
    char what_[512];                                                                         \
    snprintf(what_, sizeof what_, __VA_ARGS__);                                              \
    hkc_error(NOLOC, "cannot merge %s and %s: %s", name_a, name_b, what_);                   \
    return -1;                                                                               \
  } while (0)
  if (strcmp(hk_pack_string(a, ma->name), hk_pack_string(b, mb->name)) != 0)
    DIFFER("different spec names (%s vs %s)", hk_pack_string(a, ma->name), hk_pack_string(b, mb->name));
  if (ma->dtype != mb->dtype) DIFFER("different default dtypes");
  if (ma->batch_policy != mb->batch_policy) DIFFER("different batch policies (%u vs %u)", ma->batch_policy, mb->batch_policy);
  int buckets_differ = ma->batch_count != mb->batch_count;
  for (uint32_t i = 0; !buckets_differ && i < ma->batch_count; i++)
    buckets_differ = ma->batch_sizes[i] != mb->batch_sizes[i];
  if (buckets_differ) DIFFER("different batch buckets (%u vs %u buckets, or other sizes)", ma->batch_count, mb->batch_count);
  if (a->tensor_count != b->tensor_count)
    DIFFER("different tensor tables (%u vs %u tensors)", a->tensor_count, b->tensor_count);
  for (uint32_t i = 0; i < a->tensor_count; i++) {
    const hk_tensor_rec_t *ta = &a->tensors[i], *tb = &b->tensors[i];
    const char *na = hk_pack_string(a, ta->name), *nb = hk_pack_string(b, tb->name);
    if (strcmp(na, nb) != 0) DIFFER("different tensor tables (tensor %u is %s vs %s)", i, na, nb);
    int dims_differ = ta->rank != tb->rank;
    for (uint32_t d = 0; !dims_differ && d < ta->rank; d++)
      dims_differ = ta->dims[d].mul != tb->dims[d].mul || ta->dims[d].add != tb->dims[d].add;
    if (ta->role != tb->role || ta->dtype != tb->dtype || dims_differ)
      DIFFER("different tensor tables (tensor %s has another role, dtype or shape)", na);
    uint32_t fa, ca, fb, cb;
    hk_pack_tensor_parts(a, i, &fa, &ca);
    hk_pack_tensor_parts(b, i, &fb, &cb);
    int parts_differ = ca != cb;
    for (uint32_t p = 0; !parts_differ && p < ca; p++)
      parts_differ = strcmp(hk_pack_string(a, a->parts[fa + p].name), hk_pack_string(b, b->parts[fb + p].name)) != 0;
    if (parts_differ) DIFFER("different tensor tables (tensor %s has other parts)", na);
  }
  if ((a->plan_graphs == NULL) != (b->plan_graphs == NULL))
    DIFFER("only %s has a PLAN section (built by another hkc?)", a->plan_graphs ? name_a : name_b);
  /* stored weights (format 1.4): the same params and bytes in every part, kept once */
  if (a->weight_count != b->weight_count || a->weights_size != b->weights_size ||
      (a->weight_count && (memcmp(a->weight_recs, b->weight_recs, a->weight_count * sizeof *a->weight_recs) != 0 ||
                           memcmp(a->weights, b->weights, (size_t)a->weights_size) != 0)))
    DIFFER("different stored weights (%u vs %u params; build every part with the same --weights)", a->weight_count,
           b->weight_count);
#undef DIFFER
  return 0;
}

/* ---- reading a verified pack back into the writer's structs ------------------------------- */
typedef struct merge {
  hkc_spec_t spec;
  hkc_target_out_t *targets;
  size_t n_targets;
  void **raw_code; /* per target: decompressed code when its section is not zstd (handed to the writer) */
  char *provenance;
  hkc_weight_in_t *weights; /* the stored params, borrowed from the first input's view */
} merge_t;

static void merge_free(merge_t *m) {
  free(m->weights);
  for (size_t t = 0; m->targets && t < m->n_targets; t++) {
    hkc_target_out_t *to = &m->targets[t];
    free(to->kernels);
    free(to->ptx); /* owned only when the input stored its PTX raw */
    for (size_t g = 0; g < to->n_graphs; g++) {
      hkc_graph_out_t *go = &to->graphs[g];
      free(go->placements);
      free(go->costs);
      free(go->fused_counts);
      for (size_t l = 0; l < go->n_launches; l++) free(go->launches[l].deps);
      free(go->launches);
    }
    free(to->graphs);
    if (m->raw_code) free(m->raw_code[t]);
  }
  free(m->targets);
  free(m->raw_code);
  for (size_t i = 0; m->spec.tensors && i < m->spec.n_tensors; i++) free(m->spec.tensors[i].parts);
  free(m->spec.tensors);
  free(m->provenance);
}

#define COPY_NAME(dst, src, what)                                                                  \
  do {                                                                                            \
    if (strlen(src) >= sizeof(dst)) {                                                             \
      hkc_error(NOLOC, "cannot merge %s: %s \"%.40s...\" is longer than hkc writes", in_name, what, src); \
      return -1;                                                                                  \
    }                                                                                             \
    memcpy(dst, src, strlen(src) + 1);                                                            \
  } while (0)

/* Target `t` of view v (input `in_name`) into *to; code and strings stay borrowed from v. */
static int read_target(const hk_pack_view_t *v, uint32_t t, const prov_t *prov, const char *in_name,
                       hkc_target_out_t *to, void **out_raw) {
  const hk_target_rec_t *tr = &v->targets[t];
  const char *name = hk_pack_string(v, tr->name);
  COPY_NAME(to->name, name, "target name");
  COPY_NAME(to->features, hk_pack_string(v, tr->features), "ISA feature string");
  to->kind = (hk_target_kind_t)tr->kind;
  /* the toolchain: the writer's "toolchain.<name>=<version>" line */
  for (size_t i = 0; i < prov->n; i++) {
    const line_t *l = &prov->lines[i];
    size_t n = strlen(name);
    if (line_starts(l, "toolchain.") && l->len > 10 + n && memcmp(l->p + 10, name, n) == 0 && l->p[10 + n] == '=') {
      size_t len = l->len - 11 - n;
      if (len >= sizeof to->toolchain) {
        hkc_error(NOLOC, "cannot merge %s: the toolchain line of target %s is longer than hkc writes", in_name, name);
        return -1;
      }
      memcpy(to->toolchain, l->p + 11 + n, len);
      to->toolchain[len] = '\0';
      break;
    }
  }
  /* code: decompressed once, so that a damaged frame is refused here, not by a loader later */
  const hk_section_t *cs = &v->sections[tr->code_section];
  void *code = NULL;
  size_t code_size = 0;
  if (hk_pack_code_load(v, t, NULL, &code, &code_size) != HK_OK) {
    hkc_error(NOLOC, "cannot merge %s: target %s: %s", in_name, name, hk_last_error());
    return -1;
  }
  to->code_size = code_size;
  if (cs->flags & HK_SECTION_FLAG_ZSTD) {
    free(code);
    to->code_zstd = v->base + cs->offset;
    to->code_zstd_size = (size_t)cs->size;
  } else {
    to->code = code; /* compressed by the writer */
    *out_raw = code;
  }
  /* PTX (format 1.3): checked by decompressing it once too, its frame kept as it is */
  if (t < HK_MAX_TARGETS && v->ptx_section[t] != UINT32_MAX) {
    const hk_section_t *ps = &v->sections[v->ptx_section[t]];
    void *ptx = NULL;
    size_t ptx_size = 0;
    if (hk_pack_ptx_load(v, t, NULL, &ptx, &ptx_size) != HK_OK) {
      hkc_error(NOLOC, "cannot merge %s: target %s: %s", in_name, name, hk_last_error());
      return -1;
    }
    free(ptx);
    to->ptx_size = ptx_size;
    if (ps->flags & HK_SECTION_FLAG_ZSTD) {
      to->ptx_zstd = v->base + ps->offset;
      to->ptx_zstd_size = (size_t)ps->size;
    } else {
      to->ptx_zstd = NULL; /* stored raw: hkc writes PTX compressed; the writer compresses it */
      to->ptx = malloc(ptx_size ? ptx_size : 1);
      if (!to->ptx) goto oom;
      memcpy(to->ptx, v->base + ps->offset, ptx_size);
    }
  }
  to->n_kernels = tr->kernel_count;
  to->kernels = calloc(tr->kernel_count + 1, sizeof *to->kernels);
  to->n_graphs = tr->graph_count;
  to->graphs = calloc(tr->graph_count + 1, sizeof *to->graphs);
  if (!to->kernels || !to->graphs) goto oom;
  for (uint32_t k = 0; k < tr->kernel_count; k++) {
    const hk_kernel_rec_t *kr = &v->kernels[tr->kernel_first + k];
    hkc_kernel_out_t *ko = &to->kernels[k];
    COPY_NAME(ko->name, hk_pack_string(v, kr->name), "kernel name");
    COPY_NAME(ko->params, hk_pack_string(v, kr->params), "kernel parameter text");
    ko->key.op = (hk_op_t)kr->op;
    ko->vgprs = kr->vgprs;
    ko->agprs = kr->agprs;
    ko->sgprs = kr->sgprs;
    ko->shared_bytes = kr->shared_bytes;
    ko->scratch_bytes = kr->scratch_bytes;
    ko->wave_size = kr->wave_size;
    ko->max_block = kr->max_block;
    ko->occupancy = kr->occupancy;
    ko->source_hash = kr->source_hash;
    ko->code_offset = kr->code_offset;
    ko->code_size = kr->code_size;
    if (to->ptx_size) { /* verify: one record per kernel of a target with PTX, in order */
      const hk_ptx_rec_t *pr = &v->ptx_recs[v->ptx_first[t] + k];
      ko->ptx_offset = pr->offset;
      ko->ptx_size = pr->size;
    }
  }
  for (uint32_t g = 0; g < tr->graph_count; g++) {
    const uint32_t gi = tr->graph_first + g;
    const hk_graph_rec_t *gr = &v->graphs[gi];
    hkc_graph_out_t *go = &to->graphs[g];
    go->batch = (int64_t)gr->batch;
    go->workspace_bytes = gr->workspace_bytes;
    go->placements = calloc(v->tensor_count + 1, sizeof *go->placements);
    go->n_launches = gr->node_count;
    go->launches = calloc(gr->node_count + 1, sizeof *go->launches);
    if (!go->placements || !go->launches) goto oom;
    if (v->tensor_count) memcpy(go->placements, &v->placements[gr->placement_first], v->tensor_count * sizeof(uint64_t));
    if (v->plan_graphs) {
      go->costs = calloc(gr->node_count + 1, sizeof *go->costs);
      go->fused_counts = calloc(gr->node_count + 1, sizeof *go->fused_counts);
      if (!go->costs || !go->fused_counts) goto oom;
      go->unfused.bytes = v->plan_graphs[gi].unfused_bytes;
      go->unfused.flops = v->plan_graphs[gi].unfused_flops;
      go->unfused_nodes = v->plan_graphs[gi].unfused_nodes;
    }
    for (uint32_t j = 0; j < gr->node_count; j++) {
      const hk_node_rec_t *nr = &v->nodes[gr->node_first + j];
      hkc_launch_t *l = &go->launches[j];
      l->kernel = nr->kernel - tr->kernel_first; /* verify: a kernel of the graph's target */
      l->node_name = hk_pack_string(v, nr->name);
      memcpy(l->grid, nr->grid, sizeof l->grid);
      memcpy(l->block, nr->block, sizeof l->block);
      l->shared_bytes = nr->shared_bytes;
      l->pdl = (nr->flags & HK_NODE_FLAG_PDL) != 0;
      if (nr->arg_count > HKC_MAX_ARGS) {
        hkc_error(NOLOC, "cannot merge %s: a launch of target %s has %u arguments (hkc writes at most %d)", in_name,
                  name, nr->arg_count, HKC_MAX_ARGS);
        return -1;
      }
      l->n_args = nr->arg_count;
      for (uint32_t a = 0; a < nr->arg_count; a++) {
        const hk_arg_rec_t *ar = &v->args[nr->arg_first + a];
        hkc_arg_t *arg = &l->args[a];
        arg->kind = (hk_arg_kind_t)ar->kind;
        if (ar->kind == HK_ARG_F32) {
          uint32_t bits = (uint32_t)ar->value;
          memcpy(&arg->f, &bits, sizeof bits);
        } else {
          arg->i = (int64_t)ar->value;
        }
      }
      l->extents = v->extents ? v->extents + nr->arg_first : NULL; /* format 1.6: always there */
      l->n_deps = nr->dep_count;
      l->deps = calloc(nr->dep_count + 1, sizeof *l->deps);
      if (!l->deps) goto oom;
      if (nr->dep_count) memcpy(l->deps, &v->deps[nr->dep_first], nr->dep_count * sizeof(uint32_t));
      if (v->plan_nodes) {
        const hk_plan_node_rec_t *pn = &v->plan_nodes[gr->node_first + j];
        go->costs[j].bytes = pn->bytes;
        go->costs[j].flops = pn->flops;
        go->costs[j].matrix = (pn->flags & HK_PLAN_MATRIX) != 0;
        go->fused_counts[j] = (int)pn->fused_nodes;
      }
    }
  }
  return 0;
oom:
  hkc_error(NOLOC, "cannot merge %s: out of memory", in_name);
  return -1;
}

/* The spec fields the writer reads (manifest, tensor table and parts), borrowing v's strings
 * (the tensors' parts arrays are allocated: merge_free frees them). */
static int read_spec(const hk_pack_view_t *v, hkc_spec_t *s) {
  const hk_manifest_t *m = v->manifest;
  s->name = (char *)hk_pack_string(v, m->name);
  s->dtype = (hk_dtype_t)m->dtype;
  s->n_batch = (int)m->batch_count;
  for (uint32_t i = 0; i < m->batch_count; i++) s->batch_sizes[i] = (int64_t)m->batch_sizes[i];
  s->batch_policy = (int)m->batch_policy;
  s->hash = m->spec_hash;
  s->n_tensors = v->tensor_count;
  s->tensors = calloc(v->tensor_count + 1, sizeof *s->tensors);
  if (!s->tensors) return -1;
  for (uint32_t i = 0; i < v->tensor_count; i++) {
    const hk_tensor_rec_t *r = &v->tensors[i];
    hkc_tensor_t *t = &s->tensors[i];
    t->name = (char *)hk_pack_string(v, r->name);
    t->role = (hk_role_t)r->role;
    t->dtype = (hk_dtype_t)r->dtype;
    t->rank = r->rank;
    for (uint32_t d = 0; d < r->rank; d++) t->dims[d] = (hkc_dim_t){r->dims[d].mul, r->dims[d].add};
    t->producer = -1;
    uint32_t first, count; /* PARTS (format 1.4): the part names, borrowed too */
    hk_pack_tensor_parts(v, i, &first, &count);
    if (count && !(t->parts = calloc(count, sizeof *t->parts))) return -1;
    for (uint32_t p = 0; p < count; p++) t->parts[p] = (char *)hk_pack_string(v, v->parts[first + p].name);
    t->n_parts = count;
  }
  return 0;
}

/* Provenance of the merged pack: the shared lines (equal in every input), then each input's
 * target lines in input order, as one build of all the targets writes them, then per input
 * "merge.input.<i>=targets <name>,...; <notes[i]>". */
static int build_provenance(const hk_pack_view_t *const *views, const prov_t *provs, size_t n,
                            const char *const *notes, char **out) {
  size_t cap = 1;
  for (size_t i = 0; i < n; i++) {
    cap += views[i]->provenance_size + 1 + 64 + (notes ? strlen(notes[i]) : 0);
    for (uint32_t t = 0; t < views[i]->target_count; t++)
      cap += strlen(hk_pack_string(views[i], views[i]->targets[t].name)) + 1;
  }
  char *p = malloc(cap), *at = p;
  if (!p) return -1;
  for (size_t i = 0; i < provs[0].n; i++) {
    const line_t *l = &provs[0].lines[i];
    if (!is_shared_line(views[0], l)) continue;
    memcpy(at, l->p, l->len);
    at += l->len;
    *at++ = '\n';
  }
  for (size_t k = 0; k < n; k++)
    for (size_t i = 0; i < provs[k].n; i++) {
      const line_t *l = &provs[k].lines[i];
      if (!is_target_line(views[k], l, "target")) continue;
      memcpy(at, l->p, l->len);
      at += l->len;
      *at++ = '\n';
    }
  for (size_t k = 0; notes && k < n; k++) {
    at += sprintf(at, "merge.input.%zu=targets ", k);
    for (uint32_t t = 0; t < views[k]->target_count; t++)
      at += sprintf(at, "%s%s", t ? "," : "", hk_pack_string(views[k], views[k]->targets[t].name));
    at += sprintf(at, "; %s\n", notes[k]);
  }
  *at = '\0';
  *out = p;
  return 0;
}

int hkc_pack_merge_memory(const hk_pack_view_t *const *views, const char *const *names, size_t n,
                          const char *const *notes, const uint8_t *sign_seed, void **out_data, size_t *out_size) {
  *out_data = NULL;
  *out_size = 0;
  merge_t m;
  memset(&m, 0, sizeof m);
  prov_t *provs = calloc(n + 1, sizeof *provs);
  int rc = -1;
  if (!provs) goto oom;
  if (n == 0) {
    hkc_error(NOLOC, "cannot merge: no input packs");
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    const hk_pack_header_t *h = views[i]->header;
    if (h->version_major != HK_PACK_VERSION_MAJOR || h->version_minor != HK_PACK_VERSION_MINOR) {
      hkc_error(NOLOC, "cannot merge %s: it is format %u.%u; this hkc writes %d.%d (rebuild it with this hkc)",
                names[i], h->version_major, h->version_minor, HK_PACK_VERSION_MAJOR, HK_PACK_VERSION_MINOR);
      goto done;
    }
    if (prov_split(views[i], &provs[i]) != 0) goto oom;
    m.n_targets += views[i]->target_count;
  }
  /* the spec first, then how it was built (which explains a different tensor table), then
   * the tables themselves */
  for (size_t i = 1; i < n; i++) {
    if (views[0]->manifest->spec_hash != views[i]->manifest->spec_hash) {
      hkc_error(NOLOC, "cannot merge %s and %s: different specs (spec hash %016llx vs %016llx)", names[0], names[i],
                (unsigned long long)views[0]->manifest->spec_hash, (unsigned long long)views[i]->manifest->spec_hash);
      goto done;
    }
    if (prov_compare(views[0], &provs[0], names[0], views[i], &provs[i], names[i]) != 0) goto done;
    if (same_spec(views[0], names[0], views[i], names[i]) != 0) goto done;
  }
  /* each target once (the writer refuses duplicates too, but cannot name the inputs) */
  for (size_t i = 0; i < n; i++)
    for (uint32_t t = 0; t < views[i]->target_count; t++)
      for (size_t j = 0; j <= i; j++)
        for (uint32_t u = 0; u < (j == i ? t : views[j]->target_count); u++)
          if (strcmp(hk_pack_string(views[i], views[i]->targets[t].name),
                     hk_pack_string(views[j], views[j]->targets[u].name)) == 0) {
            hkc_error(NOLOC, "cannot merge: target %s is in %s%s%s", hk_pack_string(views[i], views[i]->targets[t].name),
                      names[j], i == j ? " twice" : " and in ", i == j ? "" : names[i]);
            goto done;
          }
  if (m.n_targets > HK_MAX_TARGETS) {
    hkc_error(NOLOC, "cannot merge: %zu targets; a pack holds at most %u", m.n_targets, HK_MAX_TARGETS);
    goto done;
  }
  m.targets = calloc(m.n_targets, sizeof *m.targets);
  m.raw_code = calloc(m.n_targets, sizeof *m.raw_code);
  if (!m.targets || !m.raw_code || read_spec(views[0], &m.spec) != 0) goto oom;
  size_t at = 0;
  for (size_t i = 0; i < n; i++)
    for (uint32_t t = 0; t < views[i]->target_count; t++, at++)
      if (read_target(views[i], t, &provs[i], names[i], &m.targets[at], &m.raw_code[at]) != 0) goto done;
  for (size_t i = 0; notes && i < n; i++)
    if (strchr(notes[i], '\n')) {
      hkc_error(NOLOC, "cannot merge: the note on %s holds a newline", names[i]);
      goto done;
    }
  if (build_provenance(views, provs, n, notes, &m.provenance) != 0) goto oom;
  const uint32_t n_weights = views[0]->weight_count; /* equal in every input (same_spec) */
  m.weights = calloc(n_weights ? n_weights : 1, sizeof *m.weights);
  if (!m.weights) goto oom;
  for (uint32_t w = 0; w < n_weights; w++) {
    const hk_weight_rec_t *r = &views[0]->weight_recs[w];
    m.weights[w] = (hkc_weight_in_t){r->tensor, views[0]->weights + r->offset, r->size, NULL};
  }
  const hkc_pack_in_t in = {.spec = &m.spec,
                            .targets = m.targets,
                            .n_targets = m.n_targets,
                            .provenance = m.provenance,
                            .compression_level = 0, /* unused: every CODE payload is kept as it is */
                            .sign_seed = sign_seed,
                            .weights = m.weights,
                            .n_weights = n_weights};
  rc = hkc_pack_write_memory(&in, out_data, out_size);
  goto done;
oom:
  hkc_error(NOLOC, "cannot merge: out of memory");
done:
  for (size_t i = 0; provs && i < n; i++) free(provs[i].lines);
  free(provs);
  merge_free(&m);
  return rc;
}
