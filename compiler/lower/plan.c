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
#define PLAN_MAX_READS (HKC_MAX_NODE_IN + 13)
/* Most tensors one node writes: out, and sum_out or (kv_append) the two caches. */
#define PLAN_MAX_WRITES 3

/* The tensors node n reads, into out; returns the count. */
static size_t node_reads(const hkc_node_t *n, int out[PLAN_MAX_READS]) {
  size_t k = 0;
  for (int i = 0; i < n->n_in && i < HKC_MAX_NODE_IN; i++) out[k++] = n->in[i];
  const int extra[] = {n->bias, n->residual, n->mul, n->gamma,   n->beta,    n->add_in, n->lengths,
                       n->mask, n->pos,      n->ctx, n->slot,    n->k_cache, n->v_cache};
  _Static_assert(HKC_MAX_NODE_IN + sizeof extra / sizeof extra[0] <= PLAN_MAX_READS, "PLAN_MAX_READS");
  for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
    if (extra[i] != HKC_NONE) out[k++] = extra[i];
  return k;
}

/* The tensors node n writes: out, sum_out when set, and kv_append's caches. */
static size_t node_writes(const hkc_node_t *n, int out[PLAN_MAX_WRITES]) {
  size_t k = 0;
  out[k++] = n->out;
  if (n->sum_out != HKC_NONE) out[k++] = n->sum_out;
  if (n->op == HK_OP_KV_APPEND) out[k++] = n->k_cache, out[k++] = n->v_cache;
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
    slot[t] = (int)n_iv;
    const uint64_t bytes = (uint64_t)hkc_tensor_elems(tensor, batch) * hkc_dtype_size(tensor->dtype);
    iv[n_iv++] = (interval_t){.tensor = (int)t, .first = SIZE_MAX, .last = 0, .bytes = align_up(bytes, HKC_ARENA_ALIGN)};
  }
  for (size_t j = 0; j < spec->n_nodes; j++) {
    int ts[PLAN_MAX_READS];
    size_t n = node_writes(&spec->nodes[j], ts);
    for (size_t r = 0; r < n; r++) {
      interval_t *v = slot[ts[r]] >= 0 ? &iv[slot[ts[r]]] : NULL;
      if (v && v->first > j) v->first = j;
      if (v && v->last < j) v->last = j;
    }
    n = node_reads(&spec->nodes[j], ts);
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

/* Whether spans a and b may touch the same bytes under the plan. */
static int spans_alias(const span_t *a, const span_t *b) {
  if (a->tensor >= 0 && a->tensor == b->tensor) return 1;
  if (a->offset == HK_PLACEMENT_NONE || b->offset == HK_PLACEMENT_NONE) return 0;
  return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

/* The spans node j reads (into out; returns the count). */
static size_t read_spans(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets, size_t j,
                         span_t out[PLAN_MAX_READS]) {
  int ts[PLAN_MAX_READS];
  const size_t n = node_reads(&spec->nodes[j], ts);
  for (size_t r = 0; r < n; r++) out[r] = tensor_span(spec, batch, offsets, ts[r]);
  return n;
}

/* The spans node j writes: its outputs, and its scratch (into out; returns the count). */
static size_t write_spans(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets,
                          const hkc_node_workspace_t *nodes, size_t j, span_t out[PLAN_MAX_WRITES + 1]) {
  int ts[PLAN_MAX_WRITES];
  size_t n = node_writes(&spec->nodes[j], ts);
  for (size_t w = 0; w < n; w++) out[w] = tensor_span(spec, batch, offsets, ts[w]);
  if (nodes && nodes[j].scratch_bytes) out[n++] = (span_t){-1, nodes[j].scratch_offset, nodes[j].scratch_bytes};
  return n;
}

/* Whether some span of a aliases some span of b. */
static int any_alias(const span_t *a, size_t na, const span_t *b, size_t nb) {
  for (size_t x = 0; x < na; x++)
    for (size_t y = 0; y < nb; y++)
      if (spans_alias(&a[x], &b[y])) return 1;
  return 0;
}

/* Raw dependencies of node j on earlier node i: read-after-write, and write-after-read/write
 * where the plan reuses bytes (scratch included). */
static int node_conflicts(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets,
                          const hkc_node_workspace_t *nodes, size_t i, size_t j) {
  span_t ri[PLAN_MAX_READS], rj[PLAN_MAX_READS], wi[PLAN_MAX_WRITES + 1], wj[PLAN_MAX_WRITES + 1];
  const size_t nri = read_spans(spec, batch, offsets, i, ri), nrj = read_spans(spec, batch, offsets, j, rj);
  const size_t nwi = write_spans(spec, batch, offsets, nodes, i, wi);
  const size_t nwj = write_spans(spec, batch, offsets, nodes, j, wj);
  return any_alias(rj, nrj, wi, nwi) || any_alias(wj, nwj, ri, nri) || any_alias(wj, nwj, wi, nwi);
}

/* Largest graph for which implied edges are removed (the ancestor bitsets take
 * n*n/8 bytes: 32 MiB here). Larger graphs keep every edge, which is still correct. */
#define HKC_REDUCE_MAX_NODES 16384

int hkc_plan_deps(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets, const hkc_node_workspace_t *nodes,
                  hkc_deps_t *out) {
  size_t n = spec->n_nodes;
  memset(out, 0, sizeof *out);
  out->start = calloc(n + 1, sizeof *out->start);
  size_t cap = 0, len = 0;
  size_t words = (n + 63) / 64;
  uint64_t *anc = n <= HKC_REDUCE_MAX_NODES ? calloc(n * words + 1, sizeof *anc) : NULL;
  uint32_t *direct = malloc((n ? n : 1) * sizeof *direct);
  if (!out->start || !direct || (n <= HKC_REDUCE_MAX_NODES && !anc)) goto oom;
  for (size_t j = 0; j < n; j++) {
    size_t nd = 0;
    for (size_t i = 0; i < j; i++)
      if (node_conflicts(spec, batch, offsets, nodes, i, j)) direct[nd++] = (uint32_t)i;
    out->start[j] = (uint32_t)len;
    for (size_t a = 0; a < nd; a++) {
      int redundant = 0;
      if (anc) /* implied when another direct dependency already waits for it */
        for (size_t b = 0; b < nd && !redundant; b++)
          redundant = b != a && (anc[direct[b] * words + direct[a] / 64] >> (direct[a] % 64)) & 1;
      if (redundant) continue;
      if (hkc_reserve((void **)&out->list, &cap, len + 1, sizeof *out->list) != 0) goto oom;
      out->list[len++] = direct[a];
    }
    if (anc)
      for (size_t a = 0; a < nd; a++) {
        uint64_t *dst = &anc[j * words];
        const uint64_t *src = &anc[direct[a] * words];
        for (size_t w = 0; w < words; w++) dst[w] |= src[w];
        dst[direct[a] / 64] |= 1ull << (direct[a] % 64);
      }
  }
  out->start[n] = (uint32_t)len;
  free(anc);
  free(direct);
  return 0;
oom:
  free(anc);
  free(direct);
  hkc_deps_free(out);
  return -1;
}

void hkc_deps_free(hkc_deps_t *deps) {
  if (!deps) return;
  free(deps->start);
  free(deps->list);
  deps->start = deps->list = NULL;
}
