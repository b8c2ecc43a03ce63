/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory plan and graph dependencies.
 *
 * Every intermediate tensor lives from the node that produces it to the last node
 * that reads it (node indices in the spec's topological order). A node reads its
 * inputs, bias, residual, mul, gamma, beta and add_in, and writes `out` and, for a norm
 * with a fused residual add, also `sum_out`. Tensors whose
 * lifetimes overlap get disjoint byte ranges of one workspace arena; the others may
 * share. Placement is greedy: largest tensor first, each at the lowest aligned offset
 * free of every already placed tensor that is alive at the same time. That is the
 * classic offline "interval colouring by size" heuristic; it is within a small factor
 * of optimal on layer graphs and deterministic.
 */
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "lower/lower.h"
#include "util/util.h"

typedef struct {
  int tensor;
  size_t first, last;  /* lifetime in node indices, inclusive */
  uint64_t bytes;
} interval_t;

/* Most tensors one node touches: ewchain's 5 operands, or gemm's A, B, bias, residual,
 * mul; plus the optional attribute tensors. */
#define PLAN_MAX_READS (HKC_MAX_NODE_IN + 6)

/* The tensors node n reads, into out; returns the count. */
static size_t node_reads(const hkc_node_t *n, int out[PLAN_MAX_READS]) {
  size_t k = 0;
  for (int i = 0; i < n->n_in && i < HKC_MAX_NODE_IN; i++) out[k++] = n->in[i];
  const int extra[] = {n->bias, n->residual, n->mul, n->gamma, n->beta, n->add_in};
  for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
    if (extra[i] != HKC_NONE) out[k++] = extra[i];
  return k;
}

/* The tensors node n writes: out, and sum_out when set. */
static size_t node_writes(const hkc_node_t *n, int out[2]) {
  size_t k = 0;
  out[k++] = n->out;
  if (n->sum_out != HKC_NONE) out[k++] = n->sum_out;
  return k;
}

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

static int cmp_interval(const void *pa, const void *pb) {
  const interval_t *a = pa, *b = pb;
  if (a->bytes != b->bytes) return a->bytes > b->bytes ? -1 : 1;
  return a->tensor - b->tensor; /* deterministic */
}

int hkc_plan_memory(const hkc_spec_t *spec, int64_t batch, uint64_t *out_offsets,
                    uint64_t *out_arena_bytes) {
  *out_arena_bytes = 0;
  for (size_t t = 0; t < spec->n_tensors; t++) out_offsets[t] = HK_PLACEMENT_NONE;

  interval_t *iv = calloc(spec->n_tensors ? spec->n_tensors : 1, sizeof *iv);
  size_t *placed = calloc(spec->n_tensors ? spec->n_tensors : 1, sizeof *placed);
  int *slot = malloc((spec->n_tensors ? spec->n_tensors : 1) * sizeof *slot); /* tensor -> iv index */
  if (!iv || !placed || !slot) {
    free(iv);
    free(placed);
    free(slot);
    return -1;
  }
  size_t n_iv = 0;
  for (size_t t = 0; t < spec->n_tensors; t++) {
    const hkc_tensor_t *tensor = &spec->tensors[t];
    slot[t] = -1;
    if (tensor->role != HK_ROLE_INTERMEDIATE) continue;
    slot[t] = (int)n_iv;
    interval_t *v = &iv[n_iv++];
    v->tensor = (int)t;
    v->first = SIZE_MAX;
    v->last = 0;
    v->bytes = align_up((uint64_t)hkc_tensor_elems(tensor, batch) * hkc_dtype_size(tensor->dtype),
                        HKC_ARENA_ALIGN);
  }
  /* Lifetimes from the nodes themselves: first write (out or sum_out) to last read. */
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
  for (size_t k = 0; k < n_iv; k++) /* never written (not produced by any node): alive throughout */
    if (iv[k].first == SIZE_MAX) iv[k].first = 0, iv[k].last = spec->n_nodes;
  free(slot);
  qsort(iv, n_iv, sizeof *iv, cmp_interval);

  /* Greedy placement. `placed` lists indices into iv already placed, kept sorted by
   * offset so the scan for the lowest gap is one pass. */
  size_t n_placed = 0;
  uint64_t arena = 0;
  for (size_t k = 0; k < n_iv; k++) {
    uint64_t offset = 0;
    for (size_t p = 0; p < n_placed; p++) {
      const interval_t *o = &iv[placed[p]];
      int alive_together = !(o->last < iv[k].first || iv[k].last < o->first);
      if (!alive_together) continue;
      uint64_t o_off = out_offsets[o->tensor];
      if (offset + iv[k].bytes <= o_off) break; /* fits in the gap below o */
      if (o_off + o->bytes > offset) offset = o_off + o->bytes;
    }
    out_offsets[iv[k].tensor] = offset;
    /* keep `placed` sorted by offset */
    size_t pos = 0;
    while (pos < n_placed && out_offsets[iv[placed[pos]].tensor] <= offset) pos++;
    memmove(&placed[pos + 1], &placed[pos], (n_placed - pos) * sizeof *placed);
    placed[pos] = k;
    n_placed++;
    if (offset + iv[k].bytes > arena) arena = offset + iv[k].bytes;
  }
  free(iv);
  free(placed);
  *out_arena_bytes = arena;
  return 0;
}

/* Whether tensors a and b may touch the same bytes under the plan. */
static int may_alias(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets, int a, int b) {
  if (a == b) return 1;
  if (offsets[a] == HK_PLACEMENT_NONE || offsets[b] == HK_PLACEMENT_NONE) return 0;
  uint64_t sa = (uint64_t)hkc_tensor_elems(&spec->tensors[a], batch) * hkc_dtype_size(spec->tensors[a].dtype);
  uint64_t sb = (uint64_t)hkc_tensor_elems(&spec->tensors[b], batch) * hkc_dtype_size(spec->tensors[b].dtype);
  return offsets[a] < offsets[b] + sb && offsets[b] < offsets[a] + sa;
}

/* Raw dependencies of node j on earlier nodes: read-after-write, and
 * write-after-read/write where the plan reuses bytes. Each node may write two tensors. */
static int node_conflicts(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets, size_t i,
                          size_t j) {
  const hkc_node_t *ni = &spec->nodes[i], *nj = &spec->nodes[j];
  int wi[2], wj[2], reads[PLAN_MAX_READS];
  size_t nwi = node_writes(ni, wi), nwj = node_writes(nj, wj);
  size_t nr = node_reads(nj, reads);
  for (size_t r = 0; r < nr; r++)
    for (size_t w = 0; w < nwi; w++)
      if (may_alias(spec, batch, offsets, reads[r], wi[w])) return 1;
  nr = node_reads(ni, reads);
  for (size_t w = 0; w < nwj; w++) {
    for (size_t r = 0; r < nr; r++)
      if (may_alias(spec, batch, offsets, wj[w], reads[r])) return 1;
    for (size_t v = 0; v < nwi; v++)
      if (may_alias(spec, batch, offsets, wj[w], wi[v])) return 1;
  }
  return 0;
}

/* Largest graph for which implied edges are removed (the ancestor bitsets take
 * n*n/8 bytes: 32 MiB here). Larger graphs keep every edge, which is still correct. */
#define HKC_REDUCE_MAX_NODES 16384

int hkc_plan_deps(const hkc_spec_t *spec, int64_t batch, const uint64_t *offsets, hkc_deps_t *out) {
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
      if (node_conflicts(spec, batch, offsets, i, j)) direct[nd++] = (uint32_t)i;
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
