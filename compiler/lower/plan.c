/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory plan and graph dependencies.
 *
 * Every intermediate tensor lives from the node that produces it to the last node
 * that reads it (node indices in the spec's topological order). A node reads its
 * inputs, bias, residual, mul, gamma, beta, add_in, lengths, mask, pos, ctx, slot and KV
 * caches, and writes `out` and, for a norm with a fused residual add, also `sum_out`;
 * kv_append also writes its KV caches. Those are state tensors: bound to the session like
 * params, never in the arena, but their reads and writes order the nodes like any other
 * tensor's. A node's scratch (hkc_node_workspace_t: a split
 * GEMM's partial sums) lives during that node only. Byte ranges whose lifetimes overlap get
 * disjoint ranges of one workspace arena; the others may share. Placement is greedy: largest
 * first, each at the lowest aligned offset free of every already placed range that is alive
 * at the same time. That is the classic offline "interval colouring by size" heuristic; it
 * is within a small factor of optimal on layer graphs and deterministic. Semaphore counters
 * are not reused: each node's come after the previous nodes' (a few per GEMM tile).
 *
 * Dependencies follow from the plan: a node waits for the earlier nodes whose bytes it reads,
 * or whose bytes (read or written) it overwrites, less those another wait already implies.
 * They are found by one scan that keeps, per tensor and per arena segment, the last writer and
 * the readers since (hkc_plan_deps), not by comparing every pair of nodes.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "lower/lower.h"
#include "util/util.h"

/* One range to place: an intermediate tensor, or a node's scratch. */
typedef struct {
  int tensor;          /* its tensor, or -1 for scratch */
  size_t node;         /* scratch: its node */
  size_t first, last;  /* lifetime in node indices, inclusive */
  uint64_t bytes;
  uint64_t offset;     /* out */
} interval_t;

/* Most tensors one node reads: ewchain's 5 operands, or gemm's A, B, bias, residual,
 * mul; plus the optional attribute tensors (node_reads). */
#define PLAN_MAX_READS (HKC_MAX_NODE_IN + 14) /* + a folded norm's gamma */
/* Most tensors one node writes: out, and sum_out or (kv_append) the two caches. */
#define PLAN_MAX_WRITES 3

/* The tensors node j reads at `batch`, into out; returns the count. A node left out at this
 * batch reads nothing; a gemm that folds its dequant nodes reads their 8-bit params instead of
 * their copies, one that folds an rmsnorm the norm's input and gamma instead of its output, a
 * kv_attention that folds its kv_append that append's q|k|v rows instead of its q (lower.h,
 * hkc_node_left_out, hkc_gemm_folds_dequant, hkc_gemm_folded_norm, hkc_kv_folded_append). */
static size_t node_reads(const hkc_spec_t *spec, size_t j, int64_t batch, int out[PLAN_MAX_READS]) {
  const hkc_node_t *n = &spec->nodes[j];
  size_t k = 0;
  if (hkc_node_left_out(spec, j, batch)) return 0;
  const int folds = hkc_gemm_folds_dequant(spec, n, batch);
  const hkc_node_t *nm = hkc_gemm_folded_norm(spec, n, batch), *ap = hkc_kv_folded_append(spec, n, batch);
  for (int i = 0; i < n->n_in && i < HKC_MAX_NODE_IN; i++)
    out[k++] = folds && (i == 1 || i == 2) ? spec->nodes[spec->tensors[n->in[i]].producer].in[0]
               : nm && i == 0              ? nm->in[0]
               : ap && i == 0              ? ap->in[0]
                                           : n->in[i];
  if (nm) out[k++] = nm->gamma; /* n->gamma is unset: a gemm with norm_fold_rows has no norm_a */
  const int extra[] = {n->bias, n->residual, n->mul, n->gamma,   n->beta,    n->add_in, n->lengths,
                       n->mask, n->pos,      n->ctx, n->slot,    n->k_cache, n->v_cache};
  _Static_assert(HKC_MAX_NODE_IN + sizeof extra / sizeof extra[0] <= PLAN_MAX_READS, "PLAN_MAX_READS");
  for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
    if (extra[i] != HKC_NONE) out[k++] = extra[i];
  return k;
}

/* The tensors node j writes at `batch`: out, sum_out when set, and kv_append's caches, or a
 * kv_attention's that folds its kv_append at this batch (none when it is left out). */
static size_t node_writes(const hkc_spec_t *spec, size_t j, int64_t batch, int out[PLAN_MAX_WRITES]) {
  const hkc_node_t *n = &spec->nodes[j];
  size_t k = 0;
  if (hkc_node_left_out(spec, j, batch)) return 0;
  out[k++] = n->out;
  if (n->sum_out != HKC_NONE) out[k++] = n->sum_out;
  if (n->op == HK_OP_KV_APPEND || hkc_kv_folded_append(spec, n, batch)) out[k++] = n->k_cache, out[k++] = n->v_cache;
  assert(k <= PLAN_MAX_WRITES);
  return k;
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/* Largest first; ties: tensors by index, then scratch by node (deterministic). */
static int cmp_interval(const void *pa, const void *pb) {
  const interval_t *a = pa, *b = pb;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  if ((a->tensor < 0) != (b->tensor < 0)) return a->tensor < 0 ? 1 : -1;
  if (a->tensor != b->tensor) return a->tensor - b->tensor;
  return a->node < b->node ? -1 : a->node > b->node;
}

/* The intervals of the intermediates (lifetimes from the nodes: first write, out or
 * sum_out, to last read; one never written is alive throughout) and of the nodes' scratch,
 * into iv; returns their count. */
static size_t collect_intervals(const hkc_spec_t *spec, int64_t batch, const hkc_node_workspace_t *nodes,
                                interval_t *iv, int *slot) {
  size_t n_iv = 0;
  for (size_t t = 0; t < spec->n_tensors; t++) {
    const hkc_tensor_t *tensor = &spec->tensors[t];
    slot[t] = -1;
    if (tensor->role != HK_ROLE_INTERMEDIATE) continue;
    if (tensor->producer >= 0 && hkc_node_left_out(spec, (size_t)tensor->producer, batch)) continue; /* never made */
    slot[t] = (int)n_iv;
    const uint64_t bytes = (uint64_t)hkc_tensor_elems(tensor, batch) * hkc_dtype_size(tensor->dtype);
    iv[n_iv++] = (interval_t){.tensor = (int)t, .first = SIZE_MAX, .last = 0, .bytes = align_up(bytes, HKC_ARENA_ALIGN)};
  }
  for (size_t j = 0; j < spec->n_nodes; j++) {
    int ts[PLAN_MAX_READS];
    size_t n = node_writes(spec, j, batch, ts);
    for (size_t r = 0; r < n; r++) {
      interval_t *v = slot[ts[r]] >= 0 ? &iv[slot[ts[r]]] : NULL;
      if (v && v->first > j) v->first = j;
      if (v && v->last < j) v->last = j;
    }
    n = node_reads(spec, j, batch, ts);
    for (size_t r = 0; r < n; r++) {
      interval_t *v = slot[ts[r]] >= 0 ? &iv[slot[ts[r]]] : NULL;
      if (v && v->last < j) v->last = j;
    }
  }
  for (size_t k = 0; k < n_iv; k++)
    if (iv[k].first == SIZE_MAX) iv[k].first = 0, iv[k].last = spec->n_nodes;
  for (size_t j = 0; nodes && j < spec->n_nodes; j++)
    if (nodes[j].scratch_bytes)
      iv[n_iv++] = (interval_t){.tensor = -1, .node = j, .first = j, .last = j,
                                .bytes = align_up(nodes[j].scratch_bytes, HKC_ARENA_ALIGN)};
  return n_iv;
}

/* Greedy placement of iv (sorted largest first); returns the arena size. `placed` lists
 * indices into iv already placed, kept sorted by offset so the scan for the lowest gap is
 * one pass. */
static uint64_t place_intervals(interval_t *iv, size_t n_iv, size_t *placed) {
  size_t n_placed = 0;
  uint64_t arena = 0;
  for (size_t k = 0; k < n_iv; k++) {
    uint64_t offset = 0;
    for (size_t p = 0; p < n_placed; p++) {
      const interval_t *o = &iv[placed[p]];
      int alive_together = !(o->last < iv[k].first || iv[k].last < o->first);
      if (!alive_together) continue;
      if (offset + iv[k].bytes <= o->offset) break; /* fits in the gap below o */
      if (o->offset + o->bytes > offset) offset = o->offset + o->bytes;
    }
    iv[k].offset = offset;
    size_t pos = 0;
    while (pos < n_placed && iv[placed[pos]].offset <= offset) pos++;
    memmove(&placed[pos + 1], &placed[pos], (n_placed - pos) * sizeof *placed);
    placed[pos] = k;
    n_placed++;
    if (offset + iv[k].bytes > arena) arena = offset + iv[k].bytes;
  }
  return arena;
}

/* Each node's counters after the previous nodes'; the total, or -1 past the format's limit
 * (reported). */
static int64_t assign_counters(const hkc_spec_t *spec, int64_t batch, hkc_node_workspace_t *nodes) {
  uint64_t total = 0;
  for (size_t j = 0; nodes && j < spec->n_nodes; j++) {
    nodes[j].first_counter = (uint32_t)total;
    total += nodes[j].counters;
    if (total > HK_MAX_SEMAPHORES) {
      hkc_error(spec->nodes[j].loc, "node '%s' at batch %lld: the graph's launches need more than %u semaphore "
                "counters (the format's limit)", spec->nodes[j].name ? spec->nodes[j].name : "?", (long long)batch,
                HK_MAX_SEMAPHORES);
      return -1;
    }
  }
  return (int64_t)total;
}

int hkc_plan_memory(const hkc_spec_t *spec, int64_t batch, hkc_node_workspace_t *nodes, uint64_t *out_offsets,
                    uint64_t *out_arena_bytes, uint32_t *out_counters) {
  *out_arena_bytes = 0;
  *out_counters = 0;
  for (size_t t = 0; t < spec->n_tensors; t++) out_offsets[t] = HK_PLACEMENT_NONE;
  for (size_t j = 0; nodes && j < spec->n_nodes; j++) nodes[j].scratch_offset = HK_PLACEMENT_NONE;
  const int64_t counters = assign_counters(spec, batch, nodes);
  if (counters < 0) return -1;
  const size_t cap = spec->n_tensors + (nodes ? spec->n_nodes : 0) + 1;
  interval_t *iv = calloc(cap, sizeof *iv);
  size_t *placed = calloc(cap, sizeof *placed);
  int *slot = malloc((spec->n_tensors ? spec->n_tensors : 1) * sizeof *slot); /* tensor -> iv index */
  if (!iv || !placed || !slot) {
    free(iv);
    free(placed);
    free(slot);
    return -1;
  }
  const size_t n_iv = collect_intervals(spec, batch, nodes, iv, slot);
  free(slot);
  qsort(iv, n_iv, sizeof *iv, cmp_interval);
  *out_arena_bytes = place_intervals(iv, n_iv, placed);
  for (size_t k = 0; k < n_iv; k++) {
    if (iv[k].tensor >= 0) out_offsets[iv[k].tensor] = iv[k].offset;
    else nodes[iv[k].node].scratch_offset = iv[k].offset;
  }
  *out_counters = (uint32_t)counters;
  free(iv);
  free(placed);
  return 0;
}

uint32_t hkc_plan_workspace_args(const hkc_node_workspace_t *ws, hkc_arg_t *args, uint32_t n_args, uint32_t max_args) {
  if (!ws->scratch_bytes) return n_args;
  assert(n_args + 2 <= max_args && ws->counters > 0 && ws->scratch_offset % HK_SCRATCH_UNIT == 0);
  (void)max_args;
  const uint64_t units = (ws->scratch_bytes + HK_SCRATCH_UNIT - 1) / HK_SCRATCH_UNIT;
  const uint64_t scratch = hk_scratch_pack(ws->scratch_offset / HK_SCRATCH_UNIT, units);
  args[n_args++] = (hkc_arg_t){.kind = HK_ARG_SCRATCH, .i = (int64_t)scratch};
  args[n_args++] = (hkc_arg_t){.kind = HK_ARG_SEMAPHORE, .i = (int64_t)hk_semaphore_pack(ws->first_counter, ws->counters)};
  return n_args;
}

/* Bytes a node touches: a tensor (one the application binds is told apart by its index only,
 * an intermediate by its arena range) or the node's scratch (tensor -1). */
typedef struct {
  int tensor;
  uint64_t offset, bytes; /* offset HK_PLACEMENT_NONE: bound by the application */
} span_t;

static span_t tensor_span(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets, int t) {
  const hkc_tensor_t *tensor = &spec->tensors[t];
  return (span_t){t, offsets[t], (uint64_t)hkc_tensor_elems(tensor, batch) * hkc_dtype_size(tensor->dtype)};
}

/* The spans node j reads (into out; returns the count). */
static size_t read_spans(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets, size_t j,
                         span_t out[PLAN_MAX_READS]) {
  int ts[PLAN_MAX_READS];
  const size_t n = node_reads(spec, j, batch, ts);
  for (size_t r = 0; r < n; r++) out[r] = tensor_span(spec, batch, offsets, ts[r]);
  return n;
}

/* The spans node j writes: its outputs, and its scratch (into out; returns the count). */
static size_t write_spans(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets,
                          const hkc_node_workspace_t *nodes, size_t j, span_t out[PLAN_MAX_WRITES + 1]) {
  int ts[PLAN_MAX_WRITES];
  size_t n = node_writes(spec, j, batch, ts);
  for (size_t w = 0; w < n; w++) out[w] = tensor_span(spec, batch, offsets, ts[w]);
  if (nodes && nodes[j].scratch_bytes) out[n++] = (span_t){-1, nodes[j].scratch_offset, nodes[j].scratch_bytes};
  return n;
}

/* Largest graph for which implied edges are removed (the ancestor bitsets take
 * n*n/8 bytes: 32 MiB here). Larger graphs keep every edge found, which is still correct. */
#define HKC_REDUCE_MAX_NODES 16384

/* Dependency planning, near-linear in the graph (a chain of 16384 nodes whose intermediates
 * share a few arena slots plans in well under a second; comparing every pair of nodes, and
 * then every pair of a node's conflicts, took minutes).
 *
 * Two spans touch the same bytes when they are the same tensor, or when both lie in the arena
 * and their byte ranges overlap (a bound tensor has no offset: it is told apart by its index
 * only). So nodes access "resources": each tensor, and each elementary segment of the arena
 * (the arena cut at every span's first and end byte, so that two arena spans overlap exactly
 * when they share a segment). Per resource the scan keeps its last writer and its readers
 * since that write. Node j's candidates: the last writer of everything it reads or writes,
 * and the readers since of everything it writes. Every other earlier node that conflicts with
 * j is an ancestor of a candidate (a writer or reader before the last write is waited for by
 * that write), so the candidates not implied by another candidate -- found from the largest
 * index down against the union of the kept ones' ancestor sets -- are exactly the conflicts
 * not implied by another conflict: the edges the plain pairwise definition keeps. */
typedef struct {
  int32_t writer;   /* last node that wrote it, or -1 */
  uint32_t readers; /* its readers since that write: a chain in the reader pool, UINT32_MAX when none */
} resource_t;

typedef struct {
  uint32_t node, next;
} reader_t;

typedef struct {
  const hkc_spec_t *spec;
  size_t n_tensors, n_bounds;
  uint64_t *bounds;     /* sorted distinct arena span boundaries: segment k is [bounds[k], bounds[k+1]) */
  resource_t *res;      /* n_tensors tensors, then the segments */
  reader_t *pool;
  size_t pool_len, pool_cap;
  uint32_t *cand;       /* node j's candidates */
  size_t n_cand, cand_cap;
  uint32_t *mark;       /* mark[i] == j + 1: i is already a candidate of j */
} deps_scan_t;

static int cmp_u64(const void *pa, const void *pb) {
  const uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a < b ? -1 : a > b;
}

static int cmp_u32_desc(const void *pa, const void *pb) {
  const uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
  return a > b ? -1 : a < b;
}

/* The first segment at or after byte x (the index of the first boundary >= x). */
static size_t segment_at(const deps_scan_t *d, uint64_t x) {
  size_t lo = 0, hi = d->n_bounds;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (d->bounds[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* The arena segments a span covers, [*first, *end): none for a bound tensor or an empty span
 * (its tensor is a resource of its own, spans_visit). */
static void span_resources(const deps_scan_t *d, const span_t *sp, size_t *first, size_t *end) {
  *first = *end = 0;
  if (sp->offset == HK_PLACEMENT_NONE || sp->bytes == 0) return;
  *first = segment_at(d, sp->offset);
  *end = segment_at(d, sp->offset + sp->bytes); /* both bounds are in the table */
}

static int add_cand(deps_scan_t *d, size_t j, int32_t i) {
  if (i < 0 || d->mark[i] == j + 1) return 0;
  d->mark[i] = (uint32_t)(j + 1);
  if (hkc_reserve((void **)&d->cand, &d->cand_cap, d->n_cand + 1, sizeof *d->cand) != 0) return -1;
  d->cand[d->n_cand++] = (uint32_t)i;
  return 0;
}

/* Candidates of node j from one resource: its last writer, and for a write its readers. */
static int resource_cands(deps_scan_t *d, size_t j, resource_t *r, int write) {
  if (add_cand(d, j, r->writer) != 0) return -1;
  for (uint32_t k = write ? r->readers : UINT32_MAX; k != UINT32_MAX; k = d->pool[k].next)
    if (add_cand(d, j, (int32_t)d->pool[k].node) != 0) return -1;
  return 0;
}

/* Records node j's access to one resource (after its candidates are taken). */
static int resource_touch(deps_scan_t *d, size_t j, resource_t *r, int write) {
  if (write) {
    r->writer = (int32_t)j;
    r->readers = UINT32_MAX;
    return 0;
  }
  if (r->readers != UINT32_MAX && d->pool[r->readers].node == j) return 0; /* read twice */
  if (hkc_reserve((void **)&d->pool, &d->pool_cap, d->pool_len + 1, sizeof *d->pool) != 0) return -1;
  d->pool[d->pool_len] = (reader_t){(uint32_t)j, r->readers};
  r->readers = (uint32_t)d->pool_len++;
  return 0;
}

/* Applies fn (resource_cands or resource_touch) to every resource of spans sp[0, n). */
static int spans_visit(deps_scan_t *d, size_t j, const span_t *sp, size_t n, int write,
                       int (*fn)(deps_scan_t *, size_t, resource_t *, int)) {
  for (size_t x = 0; x < n; x++) {
    if (sp[x].tensor >= 0 && fn(d, j, &d->res[sp[x].tensor], write) != 0) return -1;
    size_t first, end;
    span_resources(d, &sp[x], &first, &end);
    for (size_t k = first; k < end; k++)
      if (fn(d, j, &d->res[d->n_tensors + k], write) != 0) return -1;
  }
  return 0;
}

/* The sorted distinct boundaries of every arena span of the graph. 0 / -1 (OOM). */
static int collect_bounds(deps_scan_t *d, int64_t batch, const uint64_t *offsets, const hkc_node_workspace_t *nodes) {
  size_t cap = 0, n = 0;
  for (size_t j = 0; j < d->spec->n_nodes; j++) {
    span_t sp[PLAN_MAX_READS + PLAN_MAX_WRITES + 1];
    size_t ns = read_spans(d->spec, batch, offsets, j, sp);
    ns += write_spans(d->spec, batch, offsets, nodes, j, sp + ns);
    for (size_t x = 0; x < ns; x++) {
      if (sp[x].offset == HK_PLACEMENT_NONE || sp[x].bytes == 0) continue;
      if (hkc_reserve((void **)&d->bounds, &cap, n + 2, sizeof *d->bounds) != 0) return -1;
      d->bounds[n++] = sp[x].offset;
      d->bounds[n++] = sp[x].offset + sp[x].bytes;
    }
  }
  if (n > 1) qsort(d->bounds, n, sizeof *d->bounds, cmp_u64);
  size_t u = 0;
  for (size_t k = 0; k < n; k++)
    if (u == 0 || d->bounds[u - 1] != d->bounds[k]) d->bounds[u++] = d->bounds[k];
  d->n_bounds = u;
  return 0;
}

int hkc_plan_deps(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets, const hkc_node_workspace_t *nodes,
                  hkc_deps_t *out) {
  const size_t n = spec->n_nodes, words = (n + 63) / 64;
  memset(out, 0, sizeof *out);
  deps_scan_t d = {.spec = spec, .n_tensors = spec->n_tensors};
  size_t cap = 0, len = 0;
  uint64_t *anc = n <= HKC_REDUCE_MAX_NODES ? calloc(n * words + 1, sizeof *anc) : NULL;
  out->start = calloc(n + 1, sizeof *out->start);
  d.mark = calloc(n ? n : 1, sizeof *d.mark);
  if (!out->start || !d.mark || (n <= HKC_REDUCE_MAX_NODES && !anc) || collect_bounds(&d, batch, offsets, nodes) != 0)
    goto oom;
  const size_t n_res = d.n_tensors + (d.n_bounds ? d.n_bounds - 1 : 0);
  if (!(d.res = malloc((n_res ? n_res : 1) * sizeof *d.res))) goto oom;
  for (size_t r = 0; r < n_res; r++) d.res[r] = (resource_t){-1, UINT32_MAX};
  for (size_t j = 0; j < n; j++) {
    span_t rs[PLAN_MAX_READS], ws[PLAN_MAX_WRITES + 1];
    const size_t nr = read_spans(spec, batch, offsets, j, rs), nw = write_spans(spec, batch, offsets, nodes, j, ws);
    d.n_cand = 0;
    if (spans_visit(&d, j, rs, nr, 0, resource_cands) != 0 || spans_visit(&d, j, ws, nw, 1, resource_cands) != 0 ||
        spans_visit(&d, j, rs, nr, 0, resource_touch) != 0 || spans_visit(&d, j, ws, nw, 1, resource_touch) != 0)
      goto oom;
    if (d.n_cand > 1) qsort(d.cand, d.n_cand, sizeof *d.cand, cmp_u32_desc);
    size_t kept = 0; /* d.cand[0, kept): the candidates no other one implies, largest first */
    for (size_t c = 0; c < d.n_cand; c++) {
      const uint32_t a = d.cand[c];
      if (anc) {
        uint64_t *dst = &anc[j * words];
        if ((dst[a / 64] >> (a % 64)) & 1) continue; /* an ancestor of a kept candidate */
        const uint64_t *src = &anc[(size_t)a * words];
        for (size_t w = 0; w <= a / 64; w++) dst[w] |= src[w]; /* a's ancestors are below a */
        dst[a / 64] |= 1ull << (a % 64);
      }
      d.cand[kept++] = a;
    }
    out->start[j] = (uint32_t)len;
    if (hkc_reserve((void **)&out->list, &cap, len + kept, sizeof *out->list) != 0) goto oom;
    while (kept > 0) out->list[len++] = d.cand[--kept]; /* in ascending order */
  }
  out->start[n] = (uint32_t)len;
  free(anc);
  free(d.bounds);
  free(d.res);
  free(d.pool);
  free(d.cand);
  free(d.mark);
  return 0;
oom:
  free(anc);
  free(d.bounds);
  free(d.res);
  free(d.pool);
  free(d.cand);
  free(d.mark);
  hkc_deps_free(out);
  return -1;
}

void hkc_deps_free(hkc_deps_t *deps) {
  if (!deps) return;
  free(deps->start);
  free(deps->list);
  deps->start = deps->list = NULL;
}
