/* SPDX-License-Identifier: Apache-2.0 */
/* plan.c: the workspace arena (liveness sharing, no overlap between tensors alive at
 * the same time, alignment) and graph dependencies (every conflicting pair ordered,
 * independent branches left parallel), on hand-written and random graphs -- also fused
 * ones, whose nodes read mul / add_in and may write two tensors (out and sum_out) -- and
 * the launches' own workspace (format 1.3): scratch alive during its node only (sharing bytes
 * with what is not alive then, and ordered against it), disjoint semaphore counters. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hkc.h"
#include "test_util.h"

static char diag[16384];

static uint64_t tensor_bytes(const hkc_spec_t *s, int t, int64_t batch) {
  return (uint64_t)hkc_tensor_elems(&s->tensors[t], batch) * hkc_dtype_size(s->tensors[t].dtype);
}

/* What node n reads and writes (HKC_NONE entries included; callers skip them). */
static int touched_reads(const hkc_node_t *n, int out[16]) {
  int k = 0;
  for (int r = 0; r < n->n_in; r++) out[k++] = n->in[r];
  out[k++] = n->bias;
  out[k++] = n->residual;
  out[k++] = n->mul;
  out[k++] = n->gamma;
  out[k++] = n->beta;
  out[k++] = n->add_in;
  return k;
}

static int touched_writes(const hkc_node_t *n, int out[2]) {
  out[0] = n->out;
  out[1] = n->sum_out;
  return 2;
}

/* Lifetime of an intermediate: [the node writing it, last reader], from the nodes
 * (not from `producer`). */
static void lifetime(const hkc_spec_t *s, int t, size_t *first, size_t *last) {
  *first = SIZE_MAX;
  *last = 0;
  for (size_t j = 0; j < s->n_nodes; j++) {
    int w[2], r[16];
    for (int k = 0, nw = touched_writes(&s->nodes[j], w); k < nw; k++)
      if (w[k] == t && j < *first) *first = j;
    for (int k = 0, nr = touched_reads(&s->nodes[j], r); k < nr; k++)
      if (r[k] == t && j > *last) *last = j;
  }
  assert_true(*first != SIZE_MAX);
  if (*last < *first) *last = *first;
}

/* Checks every invariant of a plan; returns the sum of intermediate sizes. */
static uint64_t check_plan(const hkc_spec_t *s, int64_t batch, const uint64_t *off, uint64_t arena) {
  uint64_t sum = 0;
  for (size_t a = 0; a < s->n_tensors; a++) {
    if (s->tensors[a].role != HK_ROLE_INTERMEDIATE) {
      assert_true(off[a] == HK_PLACEMENT_NONE);
      continue;
    }
    assert_true(off[a] % HKC_ARENA_ALIGN == 0);
    assert_true(off[a] + tensor_bytes(s, (int)a, batch) <= arena);
    sum += tensor_bytes(s, (int)a, batch);
    size_t fa, la;
    lifetime(s, (int)a, &fa, &la);
    for (size_t b = a + 1; b < s->n_tensors; b++) {
      if (s->tensors[b].role != HK_ROLE_INTERMEDIATE) continue;
      size_t fb, lb;
      lifetime(s, (int)b, &fb, &lb);
      int alive_together = !(la < fb || lb < fa);
      int overlap = off[a] < off[b] + tensor_bytes(s, (int)b, batch) && off[b] < off[a] + tensor_bytes(s, (int)a, batch);
      if (alive_together && overlap)
        fail_msg("tensors %s and %s are alive together but share bytes", s->tensors[a].name, s->tensors[b].name);
    }
  }
  return sum;
}

static void test_chain_reuses_memory(void **state) {
  (void)state;
  hkc_spec_t *s = hk_test_spec_parse("hkc: 1\nname: chain\ndtype: f32\nbatch_sizes: [1, 4]\n"
                                     "inputs: {x: [batch, 1000]}\n"
                                     "graph:\n"
                                     "  - {name: n0, op: relu, in: [x], out: a}\n"
                                     "  - {name: n1, op: relu, in: [a], out: b}\n"
                                     "  - {name: n2, op: relu, in: [b], out: c}\n"
                                     "  - {name: n3, op: relu, in: [c], out: d}\n"
                                     "  - {name: n4, op: relu, in: [d], out: y}\n"
                                     "outputs: [y]\n");
  uint64_t *off = calloc(s->n_tensors, sizeof *off);
  for (int64_t batch = 1; batch <= 4; batch += 3) {
    uint64_t arena = 0;
    uint32_t counters = 0;
    assert_int_equal(hkc_plan_memory(s, batch, NULL, off, &arena, &counters), 0);
    uint64_t sum = check_plan(s, batch, off, arena);
    uint64_t one = (uint64_t)(batch * 1000 * 4 + 255) / 256 * 256;
    /* a, b, c, d: only two are ever alive at once */
    assert_int_equal(arena, 2 * one);
    assert_true(sum > arena);
  }
  /* deps form the chain */
  uint64_t arena;
  uint32_t counters = 0;
  hkc_plan_memory(s, 1, NULL, off, &arena, &counters);
  hkc_deps_t deps;
  assert_int_equal(hkc_plan_deps(s, 1, off, NULL, &deps), 0);
  assert_int_equal(deps.start[0], 0);
  for (size_t j = 1; j < s->n_nodes; j++) {
    assert_int_equal(deps.start[j + 1] - deps.start[j], 1);
    assert_int_equal(deps.list[deps.start[j]], j - 1);
  }
  hkc_deps_free(&deps);
  free(off);
  hkc_spec_destroy(s);
}

static void test_branches_stay_parallel(void **state) {
  (void)state;
  /* q, k, v projections read x only: they must not wait for each other. */
  hkc_spec_t *s = hk_test_spec_parse("hkc: 1\nname: fan\ndtype: f16\nbatch_sizes: [2]\n"
                                     "inputs: {x: [batch, 64]}\n"
                                     "params: {wq: [64, 64], wk: [64, 64], wv: [64, 64]}\n"
                                     "graph:\n"
                                     "  - {name: q, op: gemm, in: [x, wq], out: tq}\n"
                                     "  - {name: k, op: gemm, in: [x, wk], out: tk}\n"
                                     "  - {name: v, op: gemm, in: [x, wv], out: tv}\n"
                                     "  - {name: s1, op: add, in: [tq, tk], out: u}\n"
                                     "  - {name: s2, op: add, in: [u, tv], out: y}\n"
                                     "outputs: [y]\n");
  uint64_t *off = calloc(s->n_tensors, sizeof *off), arena;
  uint32_t counters = 0;
  assert_int_equal(hkc_plan_memory(s, 2, NULL, off, &arena, &counters), 0);
  check_plan(s, 2, off, arena);
  hkc_deps_t deps;
  assert_int_equal(hkc_plan_deps(s, 2, off, NULL, &deps), 0);
  int q = -1, k = -1, v = -1, s1 = -1, s2 = -1;
  for (size_t j = 0; j < s->n_nodes; j++) {
    const char *n = s->nodes[j].name;
    if (!strcmp(n, "q")) q = (int)j;
    if (!strcmp(n, "k")) k = (int)j;
    if (!strcmp(n, "v")) v = (int)j;
    if (!strcmp(n, "s1")) s1 = (int)j;
    if (!strcmp(n, "s2")) s2 = (int)j;
  }
  assert_true(q >= 0 && k >= 0 && v >= 0 && s1 >= 0 && s2 >= 0);
  assert_int_equal(deps.start[q + 1] - deps.start[q], 0);
  assert_int_equal(deps.start[k + 1] - deps.start[k], 0);
  assert_int_equal(deps.start[v + 1] - deps.start[v], 0);
  assert_int_equal(deps.start[s1 + 1] - deps.start[s1], 2); /* q and k */
  free(off);
  hkc_deps_free(&deps);
  hkc_spec_destroy(s);
}

/* Random DAGs: every node reads one or two earlier tensors (same shape) with relu/add/mul.
 * Checks the arena invariants, and that every pair of nodes that touch the same bytes
 * (RAW, WAR, WAW under the plan) is ordered by the dependency edges, transitively. */
static void test_random_graphs(void **state) {
  (void)state;
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 12345);
  for (int trial = 0; trial < 60; trial++) {
    int n = 2 + (int)hk_test_uniform(&rng, 0, 30);
    char *text = malloc(65536);
    int len = sprintf(text, "hkc: 1\nname: r\ndtype: f32\nbatch_sizes: [3]\ninputs: {x: [batch, %d]}\ngraph:\n",
                      1 + (int)hk_test_uniform(&rng, 0, 300));
    for (int i = 0; i < n; i++) {
      int a = (int)floor(hk_test_uniform(&rng, -1, i)), b = (int)floor(hk_test_uniform(&rng, -1, i));
      char ta[16], tb[16];
      snprintf(ta, sizeof ta, a < 0 ? "x" : "t%d", a);
      snprintf(tb, sizeof tb, b < 0 ? "x" : "t%d", b);
      int kind = (int)hk_test_uniform(&rng, 0, 3);
      if (kind == 0) len += sprintf(text + len, "  - {name: n%d, op: relu, in: [%s], out: t%d}\n", i, ta, i);
      else len += sprintf(text + len, "  - {name: n%d, op: %s, in: [%s, %s], out: t%d}\n", i, kind == 1 ? "add" : "mul", ta, tb, i);
    }
    /* every tensor is used: make the last node's output and all unused ones outputs */
    len += sprintf(text + len, "outputs: [t%d]\n", n - 1);
    hkc_spec_t *s = NULL;
    hkc_diag_capture(diag, sizeof diag);
    int rc = hkc_spec_parse("r.yaml", text, (size_t)len, &s);
    hkc_diag_capture(NULL, 0);
    if (rc != 0) fail_msg("random spec rejected: %s\n%s", diag, text);
    uint64_t *off = calloc(s->n_tensors, sizeof *off), arena;
    uint32_t counters = 0;
    assert_int_equal(hkc_plan_memory(s, 3, NULL, off, &arena, &counters), 0);
    check_plan(s, 3, off, arena);
    hkc_deps_t deps;
    assert_int_equal(hkc_plan_deps(s, 3, off, NULL, &deps), 0);
    /* reach[j][i]: j transitively waits for i */
    size_t nn = s->n_nodes;
    unsigned char *reach = calloc(nn * nn, 1);
    for (size_t j = 0; j < nn; j++)
      for (uint32_t e = deps.start[j]; e < deps.start[j + 1]; e++) {
        uint32_t i = deps.list[e];
        assert_true(i < j);
        reach[j * nn + i] = 1;
        for (size_t k = 0; k < nn; k++)
          if (reach[i * nn + k]) reach[j * nn + k] = 1;
      }
    for (size_t j = 0; j < nn; j++)
      for (size_t i = 0; i < j; i++) {
        const hkc_node_t *ni = &s->nodes[i], *nj = &s->nodes[j];
        int conflict = 0;
        for (int r = 0; r < nj->n_in; r++) conflict |= nj->in[r] == ni->out;
        /* WAR / WAW through arena reuse */
        int touched_i[3] = {ni->out, ni->in[0], ni->n_in > 1 ? ni->in[1] : ni->in[0]};
        for (int r = 0; r < 3; r++) {
          int t = touched_i[r], u = nj->out;
          if (off[t] == HK_PLACEMENT_NONE || off[u] == HK_PLACEMENT_NONE) continue;
          conflict |= off[t] < off[u] + tensor_bytes(s, u, 3) && off[u] < off[t] + tensor_bytes(s, t, 3);
        }
        if (conflict && !reach[j * nn + i]) fail_msg("node %zu touches bytes of node %zu but does not wait for it", j, i);
      }
    free(reach);
    free(off);
    hkc_deps_free(&deps);
    hkc_spec_destroy(s);
    free(text);
  }
}

static int overlap(const hkc_spec_t *s, const uint64_t *off, int64_t batch, int a, int b) {
  if (a == HKC_NONE || b == HKC_NONE) return 0;
  if (a == b) return 1;
  if (off[a] == HK_PLACEMENT_NONE || off[b] == HK_PLACEMENT_NONE) return 0;
  return off[a] < off[b] + tensor_bytes(s, b, batch) && off[b] < off[a] + tensor_bytes(s, a, batch);
}

/* Whether node i's scratch (ws, may be NULL) shares bytes with tensor t, or with node j's scratch. */
static int scratch_overlaps_tensor(const hkc_spec_t *s, const uint64_t *off, int64_t batch,
                                   const hkc_node_workspace_t *ws, size_t i, int t) {
  if (!ws || !ws[i].scratch_bytes || t == HKC_NONE || off[t] == HK_PLACEMENT_NONE) return 0;
  return ws[i].scratch_offset < off[t] + tensor_bytes(s, t, batch) &&
         off[t] < ws[i].scratch_offset + ws[i].scratch_bytes;
}
static int scratches_overlap(const hkc_node_workspace_t *ws, size_t i, size_t j) {
  if (!ws || !ws[i].scratch_bytes || !ws[j].scratch_bytes) return 0;
  return ws[i].scratch_offset < ws[j].scratch_offset + ws[j].scratch_bytes &&
         ws[j].scratch_offset < ws[i].scratch_offset + ws[i].scratch_bytes;
}

/* Every pair i < j where j writes bytes i reads or writes, or reads bytes i writes, is
 * ordered by the dependency edges (transitively); a node's scratch (ws, may be NULL) counts
 * as bytes it writes. */
static void check_deps(const hkc_spec_t *s, const uint64_t *off, int64_t batch, const hkc_node_workspace_t *ws,
                       const hkc_deps_t *deps) {
  size_t nn = s->n_nodes;
  unsigned char *reach = calloc(nn * nn + 1, 1);
  for (size_t j = 0; j < nn; j++)
    for (uint32_t e = deps->start[j]; e < deps->start[j + 1]; e++) {
      uint32_t i = deps->list[e];
      assert_true(i < j);
      reach[j * nn + i] = 1;
      for (size_t k = 0; k < nn; k++)
        if (reach[i * nn + k]) reach[j * nn + k] = 1;
    }
  for (size_t j = 0; j < nn; j++)
    for (size_t i = 0; i < j; i++) {
      int ri[16], rj[16], wi[2], wj[2];
      int nri = touched_reads(&s->nodes[i], ri), nrj = touched_reads(&s->nodes[j], rj);
      touched_writes(&s->nodes[i], wi);
      touched_writes(&s->nodes[j], wj);
      int conflict = 0;
      for (int a = 0; a < 2; a++) {
        for (int b = 0; b < nrj; b++) conflict |= overlap(s, off, batch, wi[a], rj[b]); /* RAW */
        for (int b = 0; b < nri; b++) conflict |= overlap(s, off, batch, wj[a], ri[b]); /* WAR */
        for (int b = 0; b < 2; b++) conflict |= overlap(s, off, batch, wj[a], wi[b]);   /* WAW */
      }
      for (int b = 0; b < nri; b++) conflict |= scratch_overlaps_tensor(s, off, batch, ws, j, ri[b]);
      for (int b = 0; b < nrj; b++) conflict |= scratch_overlaps_tensor(s, off, batch, ws, i, rj[b]);
      for (int b = 0; b < 2; b++)
        conflict |= scratch_overlaps_tensor(s, off, batch, ws, j, wi[b]) ||
                    scratch_overlaps_tensor(s, off, batch, ws, i, wj[b]);
      conflict |= scratches_overlap(ws, i, j);
      if (conflict && !reach[j * nn + i])
        fail_msg("node %zu (%s) touches bytes of node %zu (%s) but does not wait for it", j, s->nodes[j].name, i,
                 s->nodes[i].name);
    }
  free(reach);
}

/* The launches' workspace under a plan: each scratch aligned, inside the arena and sharing no
 * byte with a tensor alive at its node (what the node reads and writes included); counter
 * ranges in node order, disjoint, totalling *counters. */
static void check_workspace(const hkc_spec_t *s, int64_t batch, const uint64_t *off, uint64_t arena,
                            const hkc_node_workspace_t *ws, uint32_t counters) {
  uint64_t next = 0;
  for (size_t j = 0; j < s->n_nodes; j++) {
    assert_int_equal(ws[j].first_counter, next);
    next += ws[j].counters;
    if (!ws[j].scratch_bytes) {
      assert_true(ws[j].scratch_offset == HK_PLACEMENT_NONE);
      continue;
    }
    assert_true(ws[j].scratch_offset % HKC_ARENA_ALIGN == 0);
    assert_true(ws[j].scratch_offset + ws[j].scratch_bytes <= arena);
    for (size_t t = 0; t < s->n_tensors; t++) {
      if (s->tensors[t].role != HK_ROLE_INTERMEDIATE) continue;
      size_t first, last;
      lifetime(s, (int)t, &first, &last);
      if (first <= j && j <= last && scratch_overlaps_tensor(s, off, batch, ws, j, (int)t))
        fail_msg("node %zu's scratch shares bytes with %s, alive at that node", j, s->tensors[t].name);
    }
  }
  assert_int_equal(counters, next);
}

/* Random graphs with random workspace on about half the nodes: the arena and dependencies
 * as without, the scratch and counters above, and scratch of different nodes sharing bytes
 * somewhere (it lives during its node only). */
static void test_random_workspace(void **state) {
  (void)state;
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 4242);
  int shared = 0;
  for (int trial = 0; trial < 40; trial++) {
    const int n = 3 + (int)hk_test_uniform(&rng, 0, 12);
    char text[8192];
    int len = sprintf(text, "hkc: 1\nname: w\ndtype: f16\nbatch_sizes: [2]\ninputs: {x: [batch, 64]}\n"
                            "params: {w: [64, 64]}\ngraph:\n");
    for (int i = 0; i < n; i++) {
      const int a = (int)floor(hk_test_uniform(&rng, -1, i));
      char in[16];
      snprintf(in, sizeof in, a < 0 ? "x" : "t%d", a);
      len += sprintf(text + len, "  - {name: n%d, op: gemm, in: [%s, w], out: t%d}\n", i, in, i);
    }
    sprintf(text + len, "outputs: [t%d]\n", n - 1);
    hkc_spec_t *s = hk_test_spec_parse(text);
    hkc_node_workspace_t *ws = calloc(s->n_nodes, sizeof *ws);
    for (size_t j = 0; j < s->n_nodes; j++)
      if (hk_test_uniform(&rng, 0, 1) < 0.5) {
        ws[j].scratch_bytes = 1 + (uint64_t)hk_test_uniform(&rng, 0, 3000);
        ws[j].counters = 1 + (uint32_t)hk_test_uniform(&rng, 0, 9);
      }
    uint64_t *off = calloc(s->n_tensors, sizeof *off), arena;
    uint32_t counters = 0;
    assert_int_equal(hkc_plan_memory(s, 2, ws, off, &arena, &counters), 0);
    check_plan(s, 2, off, arena);
    check_workspace(s, 2, off, arena, ws, counters);
    for (size_t i = 0; i < s->n_nodes; i++)
      for (size_t j = i + 1; j < s->n_nodes; j++) shared += scratches_overlap(ws, i, j);
    hkc_deps_t deps;
    assert_int_equal(hkc_plan_deps(s, 2, off, ws, &deps), 0);
    check_deps(s, off, 2, ws, &deps);
    hkc_deps_free(&deps);
    free(off);
    free(ws);
    hkc_spec_destroy(s);
  }
  assert_true(shared > 0);
}

/* q, k and v read x only (test_branches_stay_parallel): with scratch on q and k, which are
 * never alive together, the two share bytes and k waits for q (and whatever reuses those
 * bytes later waits for k: check_deps). Counters: q's [0, 3), k's [3, 8). A scratch argument
 * names its range in 256-byte units. */
static void test_scratch_shares_and_orders(void **state) {
  (void)state;
  hkc_spec_t *s = hk_test_spec_parse("hkc: 1\nname: fan\ndtype: f16\nbatch_sizes: [2]\n"
                                     "inputs: {x: [batch, 64]}\n"
                                     "params: {wq: [64, 64], wk: [64, 64], wv: [64, 64]}\n"
                                     "graph:\n"
                                     "  - {name: q, op: gemm, in: [x, wq], out: tq}\n"
                                     "  - {name: k, op: gemm, in: [x, wk], out: tk}\n"
                                     "  - {name: v, op: gemm, in: [x, wv], out: tv}\n"
                                     "  - {name: s1, op: add, in: [tq, tk], out: u}\n"
                                     "  - {name: s2, op: add, in: [u, tv], out: y}\n"
                                     "outputs: [y]\n");
  hkc_node_workspace_t ws[5] = {{.scratch_bytes = 5000, .counters = 3}, {.scratch_bytes = 4000, .counters = 5}};
  uint64_t *off = calloc(s->n_tensors, sizeof *off), arena, base;
  uint32_t counters = 0;
  assert_int_equal(hkc_plan_memory(s, 2, NULL, off, &base, &counters), 0);
  assert_int_equal(counters, 0);
  assert_int_equal(hkc_plan_memory(s, 2, ws, off, &arena, &counters), 0);
  check_plan(s, 2, off, arena);
  check_workspace(s, 2, off, arena, ws, counters);
  assert_int_equal(ws[0].scratch_offset, ws[1].scratch_offset); /* shared */
  assert_true(arena <= base + 5120);                              /* the larger one only, aligned */
  assert_int_equal(ws[0].first_counter, 0);
  assert_int_equal(ws[1].first_counter, 3);
  assert_int_equal(counters, 8);
  assert_true(ws[2].scratch_offset == HK_PLACEMENT_NONE);
  hkc_deps_t deps;
  assert_int_equal(hkc_plan_deps(s, 2, off, ws, &deps), 0);
  check_deps(s, off, 2, ws, &deps);
  assert_int_equal(deps.start[2] - deps.start[1], 1); /* k waits for q: their scratch shares bytes */
  assert_int_equal(deps.list[deps.start[1]], 0);
  hkc_deps_free(&deps);
  /* the arguments: scratch then semaphores, after the others */
  hkc_arg_t args[HKC_MAX_ARGS] = {{.kind = HK_ARG_I64, .i = 7}};
  assert_int_equal(hkc_plan_workspace_args(&ws[2], args, 1, HKC_MAX_ARGS), 1); /* none */
  assert_int_equal(hkc_plan_workspace_args(&ws[1], args, 1, HKC_MAX_ARGS), 3);
  assert_int_equal(args[1].kind, HK_ARG_SCRATCH);
  assert_int_equal(hk_scratch_offset((uint64_t)args[1].i), ws[1].scratch_offset);
  assert_int_equal(hk_scratch_bytes((uint64_t)args[1].i), 4096); /* 4000 rounded up to the unit */
  assert_int_equal(args[2].kind, HK_ARG_SEMAPHORE);
  assert_int_equal(hk_semaphore_first((uint64_t)args[2].i), 3);
  assert_int_equal(hk_semaphore_count((uint64_t)args[2].i), 5);
  /* more counters than the format allows: refused, naming the node */
  ws[1].counters = HK_MAX_SEMAPHORES;
  hkc_diag_capture(diag, sizeof diag);
  assert_int_equal(hkc_plan_memory(s, 2, ws, off, &arena, &counters), -1);
  hkc_diag_capture(NULL, 0);
  assert_non_null(strstr(diag, "node 'k' at batch 2: the graph's launches need more than 16777216 semaphore counters"));
  free(off);
  hkc_spec_destroy(s);
}

/* Random graphs of adds, muls, norms and gemms, fused (auto): norms with a fused residual
 * add write the sum too when something else reads it, gemms read mul operands. Checks the
 * arena and every RAW / WAR / WAW pair, including both outputs of a node. */
static void test_random_fused_two_outputs(void **state) {
  (void)state;
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 777);
  int two_outputs = 0, muls = 0;
  for (int trial = 0; trial < 60; trial++) {
    int n = 4 + (int)hk_test_uniform(&rng, 0, 26);
    int width = 1 + (int)hk_test_uniform(&rng, 0, 200);
    char *text = malloc(65536);
    int len = sprintf(text,
                      "hkc: 1\nname: r\ndtype: f16\nbatch_sizes: [3]\ninputs: {x: [batch, %d]}\n"
                      "params: {g: [%d], b: [%d], w: [%d, %d]}\ngraph:\n",
                      width, width, width, width, width);
    char outs[1024];
    int olen = 0;
    for (int i = 0; i < n; i++) {
      int a = hk_test_uniform(&rng, 0, 1) < 0.5 ? i - 1 : (int)floor(hk_test_uniform(&rng, -1, i));
      int c = (int)floor(hk_test_uniform(&rng, -1, i));
      char ta[16], tc[16];
      snprintf(ta, sizeof ta, a < 0 ? "x" : "t%d", a);
      snprintf(tc, sizeof tc, c < 0 ? "x" : "t%d", c);
      int kind = (int)hk_test_uniform(&rng, 0, 6);
      if (kind == 0) len += sprintf(text + len, "  - {name: n%d, op: add, in: [%s, %s], out: t%d}\n", i, ta, tc, i);
      else if (kind == 1)
        len += sprintf(text + len, "  - {name: n%d, op: layernorm, in: [%s], gamma: g, beta: b, out: t%d}\n", i, ta, i);
      else if (kind == 2) len += sprintf(text + len, "  - {name: n%d, op: rmsnorm, in: [%s], gamma: g, out: t%d}\n", i, ta, i);
      else if (kind == 3) len += sprintf(text + len, "  - {name: n%d, op: gemm, in: [%s, w], out: t%d}\n", i, ta, i);
      else if (kind == 4) len += sprintf(text + len, "  - {name: n%d, op: mul, in: [%s, %s], out: t%d}\n", i, tc, ta, i);
      else len += sprintf(text + len, "  - {name: n%d, op: silu, in: [%s], out: t%d}\n", i, ta, i);
      if (i == n - 1 || hk_test_uniform(&rng, 0, 1) < 0.1)
        olen += snprintf(outs + olen, sizeof outs - (size_t)olen, "%st%d", olen ? ", " : "", i);
    }
    sprintf(text + len, "outputs: [%s]\n", outs);
    hkc_spec_t *s = NULL;
    hkc_diag_capture(diag, sizeof diag);
    int rc = hkc_spec_parse("r.yaml", text, strlen(text), &s);
    if (rc == 0) rc = hkc_fuse(s, HKC_FUSION_AUTO);
    hkc_diag_capture(NULL, 0);
    if (rc != 0) fail_msg("random spec rejected: %s\n%s", diag, text);
    for (size_t j = 0; j < s->n_nodes; j++) {
      two_outputs += s->nodes[j].sum_out != HKC_NONE;
      muls += s->nodes[j].mul != HKC_NONE;
    }
    uint64_t *off = calloc(s->n_tensors, sizeof *off), arena;
    uint32_t counters = 0;
    assert_int_equal(hkc_plan_memory(s, 3, NULL, off, &arena, &counters), 0);
    check_plan(s, 3, off, arena);
    hkc_deps_t deps;
    assert_int_equal(hkc_plan_deps(s, 3, off, NULL, &deps), 0);
    check_deps(s, off, 3, NULL, &deps);
    hkc_deps_free(&deps);
    free(off);
    hkc_spec_destroy(s);
    free(text);
  }
  assert_true(two_outputs >= 10); /* the generator does exercise sum_out */
  assert_true(muls >= 5);
}

/* A hand-made two-output node: the sum it stores is read later and its bytes must not
 * be shared with anything alive meanwhile; the reader waits for the fused node. */
static void test_sum_out_lifetime(void **state) {
  (void)state;
  hkc_spec_t *s = hk_test_spec_parse("hkc: 1\nname: t\ndtype: f32\nbatch_sizes: [2]\n"
                                     "inputs: {x: [batch, 64], z: [batch, 64]}\nparams: {g: [64]}\n"
                                     "graph:\n"
                                     "  - {name: a0, op: relu, in: [x], out: p}\n"
                                     "  - {name: a1, op: silu, in: [z], out: q}\n"
                                     "  - {name: s, op: add, in: [p, q], out: r}\n"
                                     "  - {name: n, op: rmsnorm, in: [r], gamma: g, out: y0}\n"
                                     "  - {name: u, op: relu, in: [y0], out: y1}\n"
                                     "  - {name: v, op: gelu, in: [y1], out: y2}\n"
                                     "  - {name: late, op: softmax, in: [r], out: y3}\n"
                                     "outputs: [y2, y3]\n");
  hkc_diag_capture(diag, sizeof diag);
  int rc = hkc_fuse(s, HKC_FUSION_AUTO);
  hkc_diag_capture(NULL, 0);
  assert_int_equal(rc, 0);
  int fused = -1, late = -1, r = hkc_tensor_find(s, "r");
  for (size_t j = 0; j < s->n_nodes; j++) {
    if (s->nodes[j].sum_out != HKC_NONE) fused = (int)j;
    if (!strcmp(s->nodes[j].name, "late")) late = (int)j;
  }
  assert_true(fused >= 0 && late > fused);
  assert_int_equal(s->nodes[fused].sum_out, r);
  uint64_t *off = calloc(s->n_tensors, sizeof *off), arena;
  uint32_t counters = 0;
  assert_int_equal(hkc_plan_memory(s, 2, NULL, off, &arena, &counters), 0);
  check_plan(s, 2, off, arena);
  /* r lives from the fused norm to `late`: y0 and y1 (the chain between) may not share it */
  for (size_t t = 0; t < s->n_tensors; t++)
    if ((int)t != r && s->tensors[t].role == HK_ROLE_INTERMEDIATE && s->tensors[t].producer > fused &&
        s->tensors[t].producer < late)
      assert_false(overlap(s, off, 2, (int)t, r));
  hkc_deps_t deps;
  assert_int_equal(hkc_plan_deps(s, 2, off, NULL, &deps), 0);
  check_deps(s, off, 2, NULL, &deps);
  hkc_deps_free(&deps);
  free(off);
  hkc_spec_destroy(s);
}

/* A gemm with norm_fold_rows (a generation graph's planner: frontend.h): at the buckets of at most
 * that many rows it reads the rmsnorm's input with norm_a (gamma, eps), the norm has no launch, its
 * output is never placed, and the gemm depends on the norm's producer, not the norm; above it,
 * the two launches as written. A norm with another reader still runs. */
static void test_norm_fold_rows(void **state) {
  (void)state;
  /* the graph, then (other = 1) a second reader of n, then the outputs */
  static const char text[] = "hkc: 1\nname: t\ndtype: bf16\nbatch_sizes: [1, 3]\n"
                             "inputs: {x: [batch, 64]}\nparams: {g: [64], w: [32, 64]}\n"
                             "graph:\n"
                             "  - {name: pre, op: relu, in: [x], out: h}\n"
                             "  - {name: nm, op: rmsnorm, in: [h], gamma: g, eps: 1.0e-6, out: n}\n"
                             "  - {name: mm, op: gemm, in: [n, w], trans_b: true, out: y0}\n"
                             "  - {name: post, op: relu, in: [y0], out: y}\n"
                             "%s";
  for (int other = 0; other < 2; other++) {
    char buf[1024];
    snprintf(buf, sizeof buf, text,
             other ? "  - {name: side, op: relu, in: [n], out: z}\noutputs: [y, z]\n" : "outputs: [y]\n");
    hkc_spec_t *s = hk_test_spec_parse(buf);
    size_t inm = 0, imm = 0;
    for (size_t j = 0; j < s->n_nodes; j++) {
      if (!strcmp(s->nodes[j].name, "nm")) inm = j;
      if (!strcmp(s->nodes[j].name, "mm")) imm = j;
    }
    s->nodes[imm].norm_fold_rows = 2;
    const int x = hkc_tensor_find(s, "h"), n = hkc_tensor_find(s, "n"), g = hkc_tensor_find(s, "g");
    assert_ptr_equal(hkc_gemm_folded_norm(s, &s->nodes[imm], 1), &s->nodes[inm]);
    assert_null(hkc_gemm_folded_norm(s, &s->nodes[imm], 3)); /* 3 rows > 2 */
    assert_int_equal(hkc_node_left_out(s, inm, 1), !other);
    assert_int_equal(hkc_node_left_out(s, inm, 3), 0);
    hkc_kernel_key_t key;
    hkc_arg_t args[HKC_MAX_ARGS];
    assert_true(hkc_lower_node(s, imm, 1, &key, args) > 0);
    assert_true(key.norm_a);
    assert_int_equal(args[HKC_GEMM_ARG_A].i, x);
    const uint32_t at = hkc_gemm_norm_arg(0, 0);
    assert_int_equal(args[at].kind, HK_ARG_TENSOR);
    assert_int_equal(args[at].i, g);
    assert_true(fabsf(args[at + 1].f - 1.0e-6f) < 1e-12f);
    assert_true(hkc_lower_node(s, imm, 3, &key, args) > 0);
    assert_false(key.norm_a);
    assert_int_equal(args[HKC_GEMM_ARG_A].i, n);
    uint64_t *off = calloc(s->n_tensors, sizeof *off), arena;
    uint32_t counters = 0;
    assert_int_equal(hkc_plan_memory(s, 1, NULL, off, &arena, &counters), 0);
    assert_true(other ? off[n] != HK_PLACEMENT_NONE : off[n] == HK_PLACEMENT_NONE);
    hkc_deps_t deps;
    assert_int_equal(hkc_plan_deps(s, 1, off, NULL, &deps), 0);
    int on_pre = 0, on_norm = 0;
    for (uint32_t d = deps.start[imm]; d < deps.start[imm + 1]; d++) {
      on_pre += deps.list[d] == 0; /* pre writes h, which the folded gemm reads */
      on_norm += deps.list[d] == (uint32_t)inm;
    }
    assert_true(on_pre && !on_norm);
    if (!other) assert_int_equal(deps.start[inm + 1], deps.start[inm]); /* no launch, no edges */
    hkc_deps_free(&deps);
    assert_int_equal(hkc_plan_memory(s, 3, NULL, off, &arena, &counters), 0);
    assert_true(off[n] != HK_PLACEMENT_NONE);
    assert_int_equal(hkc_plan_deps(s, 3, off, NULL, &deps), 0);
    on_norm = 0;
    for (uint32_t d = deps.start[imm]; d < deps.start[imm + 1]; d++) on_norm += deps.list[d] == (uint32_t)inm;
    assert_true(on_norm);
    hkc_deps_free(&deps);
    free(off);
    hkc_spec_destroy(s);
  }
}

/* A kv_attention with append_fold_rows (the build's: frontend.h): at the buckets of at most that
 * many rows it takes the kv_append's packed q|k|v rows (I append = 1, then the append's rope
 * numbers), the kv_append has no launch, its q heads are never placed, the attention writes the
 * caches and depends on the q|k|v producer, not the append; above it, the two launches as
 * written. A q with another reader keeps them apart at every bucket. */
static void test_append_fold_rows(void **state) {
  (void)state;
  static const char text[] = "hkc: 1\nname: t\ndtype: bf16\nbatch_sizes: [1, 4]\n"
                             "inputs: {x: [batch, 128], ctx: {shape: [batch], dtype: i32}, "
                             "slot: {shape: [batch], dtype: i32}}\n"
                             "state: {k_cache: [1, 2, 16, 32], v_cache: [1, 2, 16, 32]}\n"
                             "graph:\n"
                             "  - {name: pre, op: relu, in: [x], out: qkv}\n"
                             "  - {name: app, op: kv_append, in: [qkv], heads: 4, kv_heads: 2, k_cache: k_cache, "
                             "v_cache: v_cache, ctx: ctx, slot: slot, out: q}\n"
                             "  - {name: att, op: kv_attention, in: [q], heads: 4, kv_heads: 2, k_cache: k_cache, "
                             "v_cache: v_cache, ctx: ctx, slot: slot, out: o}\n"
                             "%s"
                             "fusion: none\n";
  for (int other = 0; other < 2; other++) {
    char buf[1024];
    snprintf(buf, sizeof buf, text,
             other ? "  - {name: side, op: relu, in: [q], out: z}\noutputs: [o, z]\n" : "outputs: [o]\n");
    hkc_spec_t *s = hk_test_spec_parse(buf);
    size_t iapp = 0, iatt = 0;
    for (size_t j = 0; j < s->n_nodes; j++) {
      if (!strcmp(s->nodes[j].name, "app")) iapp = j;
      if (!strcmp(s->nodes[j].name, "att")) iatt = j;
    }
    s->nodes[iatt].append_fold_rows = 1;
    const int qkv = hkc_tensor_find(s, "qkv"), q = hkc_tensor_find(s, "q");
    if (other) {
      assert_null(hkc_kv_folded_append(s, &s->nodes[iatt], 1));
      assert_int_equal(hkc_node_left_out(s, iapp, 1), 0);
      hkc_spec_destroy(s);
      continue;
    }
    assert_ptr_equal(hkc_kv_folded_append(s, &s->nodes[iatt], 1), &s->nodes[iapp]);
    assert_null(hkc_kv_folded_append(s, &s->nodes[iatt], 4)); /* 4 rows > 1 */
    assert_int_equal(hkc_node_left_out(s, iapp, 1), 1);
    assert_int_equal(hkc_node_left_out(s, iapp, 4), 0);
    hkc_kernel_key_t key;
    hkc_arg_t args[HKC_MAX_ARGS];
    assert_int_equal(hkc_lower_node(s, iatt, 1, &key, args), HKC_KV_ATTENTION_ARG_THETA);
    assert_true(key.append && !key.rope);
    assert_int_equal(args[HKC_KV_ATTENTION_ARG_Q].i, qkv);
    assert_int_equal(args[HKC_KV_ATTENTION_ARG_APPEND].i, 1);
    assert_int_equal(hkc_lower_node(s, iatt, 4, &key, args), HKC_KV_ATTENTION_N_ARGS);
    assert_false(key.append);
    assert_int_equal(args[HKC_KV_ATTENTION_ARG_Q].i, q);
    /* the append's rope comes along: theta after the flag */
    s->nodes[iapp].rope = 1;
    s->nodes[iapp].theta = 500000.0f;
    assert_int_equal(hkc_lower_node(s, iatt, 1, &key, args), HKC_KV_ATTENTION_ROPE_N_ARGS);
    assert_true(key.append && key.rope);
    assert_true(args[HKC_KV_ATTENTION_ARG_THETA].f == 500000.0f);
    char name[128];
    hkc_kernel_key_name(&key, name, sizeof name);
    assert_non_null(strstr(name, "_rope_app"));
    uint64_t *off = calloc(s->n_tensors, sizeof *off), arena;
    uint32_t counters = 0;
    assert_int_equal(hkc_plan_memory(s, 1, NULL, off, &arena, &counters), 0);
    assert_true(off[q] == HK_PLACEMENT_NONE);
    hkc_deps_t deps;
    assert_int_equal(hkc_plan_deps(s, 1, off, NULL, &deps), 0);
    int on_pre = 0, on_app = 0;
    for (uint32_t d = deps.start[iatt]; d < deps.start[iatt + 1]; d++) {
      on_pre += deps.list[d] == 0; /* pre writes qkv, which the folded attention reads */
      on_app += deps.list[d] == (uint32_t)iapp;
    }
    assert_true(on_pre && !on_app);
    assert_int_equal(deps.start[iapp + 1], deps.start[iapp]); /* no launch, no edges */
    hkc_deps_free(&deps);
    assert_int_equal(hkc_plan_memory(s, 4, NULL, off, &arena, &counters), 0);
    assert_true(off[q] != HK_PLACEMENT_NONE);
    assert_int_equal(hkc_plan_deps(s, 4, off, NULL, &deps), 0);
    on_app = 0;
    for (uint32_t d = deps.start[iatt]; d < deps.start[iatt + 1]; d++) on_app += deps.list[d] == (uint32_t)iapp;
    assert_true(on_app);
    hkc_deps_free(&deps);
    free(off);
    hkc_spec_destroy(s);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_reuses_memory),
      cmocka_unit_test(test_branches_stay_parallel),
      cmocka_unit_test(test_random_graphs),
      cmocka_unit_test(test_random_fused_two_outputs),
      cmocka_unit_test(test_sum_out_lifetime),
      cmocka_unit_test(test_random_workspace),
      cmocka_unit_test(test_scratch_shares_and_orders),
      cmocka_unit_test(test_norm_fold_rows),
      cmocka_unit_test(test_append_fold_rows),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
