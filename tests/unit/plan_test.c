/* plan.c: the workspace arena (liveness sharing, no overlap between tensors alive at
 * the same time, alignment) and graph dependencies (every conflicting pair ordered,
 * independent branches left parallel), on hand-written and random graphs. */
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

static hkc_spec_t *parse_ok(const char *text) {
  hkc_spec_t *spec = NULL;
  hkc_diag_capture(diag, sizeof diag);
  int rc = hkc_spec_parse("t.yaml", text, strlen(text), &spec);
  hkc_diag_capture(NULL, 0);
  if (rc != 0) fail_msg("spec rejected:\n%s\n%s", text, diag);
  return spec;
}

static uint64_t tensor_bytes(const hkc_spec_t *s, int t, int64_t batch) {
  return (uint64_t)hkc_tensor_elems(&s->tensors[t], batch) * hkc_dtype_size(s->tensors[t].dtype);
}

/* Lifetime of an intermediate: [producer, last reader]. */
static void lifetime(const hkc_spec_t *s, int t, size_t *first, size_t *last) {
  *first = *last = (size_t)s->tensors[t].producer;
  for (size_t j = 0; j < s->n_nodes; j++) {
    const hkc_node_t *n = &s->nodes[j];
    int reads[7], nr = 0;
    for (int r = 0; r < n->n_in; r++) reads[nr++] = n->in[r];
    reads[nr++] = n->bias;
    reads[nr++] = n->residual;
    reads[nr++] = n->gamma;
    reads[nr++] = n->beta;
    for (int r = 0; r < nr; r++)
      if (reads[r] == t && j > *last) *last = j;
  }
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
  hkc_spec_t *s = parse_ok("hkc: 1\nname: chain\ndtype: f32\nbatch_sizes: [1, 4]\n"
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
    assert_int_equal(hkc_plan_memory(s, batch, off, &arena), 0);
    uint64_t sum = check_plan(s, batch, off, arena);
    uint64_t one = (uint64_t)(batch * 1000 * 4 + 255) / 256 * 256;
    /* a, b, c, d: only two are ever alive at once */
    assert_int_equal(arena, 2 * one);
    assert_true(sum > arena);
  }
  /* deps form the chain */
  uint64_t arena;
  hkc_plan_memory(s, 1, off, &arena);
  hkc_deps_t deps;
  assert_int_equal(hkc_plan_deps(s, 1, off, &deps), 0);
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
  hkc_spec_t *s = parse_ok("hkc: 1\nname: fan\ndtype: f16\nbatch_sizes: [2]\n"
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
  assert_int_equal(hkc_plan_memory(s, 2, off, &arena), 0);
  check_plan(s, 2, off, arena);
  hkc_deps_t deps;
  assert_int_equal(hkc_plan_deps(s, 2, off, &deps), 0);
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
    assert_int_equal(hkc_plan_memory(s, 3, off, &arena), 0);
    check_plan(s, 3, off, arena);
    hkc_deps_t deps;
    assert_int_equal(hkc_plan_deps(s, 3, off, &deps), 0);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chain_reuses_memory),
      cmocka_unit_test(test_branches_stay_parallel),
      cmocka_unit_test(test_random_graphs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
