/* SPDX-License-Identifier: Apache-2.0 */
/* The cost model (cost.c) on hand-computed cases, fused forms included (set on the parsed
 * IR the way fusion sets them), and the PLAN section end to end: hkc_build -> verify ->
 * the records equal what the model says, and sessions report them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hk/hkrt.h"
#include "hkc.h"
#include "pack_internal.h"
#include "test_util.h"

static char diag[16384];

static size_t node(const hkc_spec_t *s, const char *name) {
  for (size_t i = 0; i < s->n_nodes; i++)
    if (strcmp(s->nodes[i].name, name) == 0) return i;
  fail_msg("no node '%s'", name);
  return 0;
}

static hkc_cost_t cost(const hkc_spec_t *s, const char *name, int64_t batch) {
  hkc_cost_t c;
  memset(&c, 0xa5, sizeof c); /* every field must be written */
  hkc_node_cost(s, node(s, name), batch, &c);
  return c;
}

#define EXPECT_COST(c, b, f, m)                    \
  do {                                             \
    hkc_cost_t c_ = (c);                           \
    assert_int_equal(c_.bytes, (uint64_t)(b));     \
    assert_int_equal(c_.flops, (uint64_t)(f));     \
    assert_int_equal(c_.matrix, (m));              \
  } while (0)

/* gemm 37x29x64 (M x N x K), f32, with bias and residual. */
static const char k_gemm[] =
    "hkc: 1\nname: t\ndtype: f32\nbatch_sizes: [1, 2]\ndims: {m: 37, n: 29, k: 64}\n"
    "inputs: {a: [batch, m, k], r: [batch, m, n]}\n"
    "params: {w: [k, n], b: [n], wt: [n, k]}\n"
    "graph:\n"
    "  - {name: g, op: gemm, in: [a, w], bias: b, residual: r, out: y}\n"
    "  - {name: gt, op: gemm, in: [a, wt], trans_b: true, out: yt}\n"
    "outputs: [y, yt]\n";

static void test_gemm_bias_residual(void **ts) {
  (void)ts;
  hkc_spec_t *s = hk_test_spec_parse(k_gemm);
  /* bytes: A 37*64 + B 64*29 + bias 29 + residual 37*29 + C 37*29 floats */
  /* flops: 2*37*29*64 matrix + 37*29 each for bias and residual */
  EXPECT_COST(cost(s, "g", 1), 4 * (37 * 64 + 64 * 29 + 29 + 37 * 29 + 37 * 29), 2 * 37 * 29 * 64 + 2 * 37 * 29, 1);
  EXPECT_COST(cost(s, "g", 2), 4 * (74 * 64 + 64 * 29 + 29 + 74 * 29 + 74 * 29), 2 * 74 * 29 * 64 + 2 * 74 * 29, 1);
  EXPECT_COST(cost(s, "g", 1), 25596, 139490, 1); /* the same, worked out by hand */
  /* trans_b: N is B's first dim; no epilogue */
  EXPECT_COST(cost(s, "gt", 1), 4 * (37 * 64 + 29 * 64 + 37 * 29), 2 * 37 * 29 * 64, 1);

  /* A fused SwiGLU-style epilogue: act + mul. mul is the residual tensor here, so it is
   * read once; the epilogue costs one FLOP per element per step (bias, act, mul, residual). */
  hkc_node_t *g = &s->nodes[node(s, "g")];
  g->act = HK_ACT_GELU;
  g->mul = hk_test_tensor(s, "r");
  EXPECT_COST(cost(s, "g", 1), 25596, 2 * 37 * 29 * 64 + 4 * 37 * 29, 1);
  hkc_spec_destroy(s);
}

static const char k_attention[] =
    "hkc: 1\nname: t\ndtype: f16\nbatch_sizes: [1, 2]\ndims: {s: 77, skv: 50}\n"
    "inputs:\n"
    "  qkv: [batch, s, 9*32]\n"
    "  q: [batch, s, 4*64]\n"
    "  kv: [batch, skv, 4*64]\n"
    "graph:\n"
    "  - {name: packed_causal, op: attention, in: [qkv], heads: 3, causal: true, out: y1}\n"
    "  - {name: packed, op: attention, in: [qkv], heads: 3, out: y2}\n"
    "  - {name: cross, op: attention, in: [q, kv, kv], heads: 4, out: y3}\n"
    "outputs: [y1, y2, y3]\n";

static void test_attention(void **ts) {
  (void)ts;
  hkc_spec_t *s = hk_test_spec_parse(k_attention);
  /* packed: dh = 288 / (3 + 2*3) = 32; qkv read once (not three times), out [b, 77, 96] */
  const uint64_t packed_bytes = 2 * (2 * 77 * 288) + 2 * (2 * 77 * 96); /* 118272 at batch 2 */
  const uint64_t full = 4ull * 2 * 3 * 77 * 77 * 32;                   /* 4*b*heads*sq*skv*dh */
  EXPECT_COST(cost(s, "packed", 2), packed_bytes, full, 1);
  EXPECT_COST(cost(s, "packed_causal", 2), 118272, 2276736, 1); /* causal: half */
  EXPECT_COST(cost(s, "packed_causal", 1), packed_bytes / 2, full / 4, 1);
  /* cross attention with k and v the same tensor: it counts once */
  EXPECT_COST(cost(s, "cross", 1), 2 * (77 * 256 + 50 * 256 + 77 * 256), 4ull * 4 * 77 * 50 * 64, 1);
  hkc_spec_destroy(s);
}

static const char k_rows[] =
    "hkc: 1\nname: t\ndtype: f32\nbatch_sizes: [1, 2]\ndims: {s: 3, h: 10}\n"
    "inputs: {x: [batch, s, h], r: [batch, s, h]}\n"
    "params: {g: [h], b: [h]}\n"
    "graph:\n"
    "  - {name: res, op: add, in: [x, r], out: s1}\n"
    "  - {name: ln, op: layernorm, in: [s1], gamma: g, beta: b, out: y}\n"
    "  - {name: rms, op: rmsnorm, in: [x], gamma: g, out: z}\n"
    "  - {name: sm, op: softmax, in: [x], out: p}\n"
    "  - {name: bias, op: add, in: [x, b], out: xb}\n"
    "  - {name: scale, op: mul, in: [g, x], out: xg}\n"
    "  - {name: act, op: gelu, in: [x], out: xa}\n"
    "outputs: [y, z, p, xb, xg, xa, s1]\n";

static void test_norms_and_elementwise(void **ts) {
  (void)ts;
  hkc_spec_t *s = hk_test_spec_parse(k_rows);
  const uint64_t n = 2 * 3 * 10; /* elements of x at batch 2 */
  EXPECT_COST(cost(s, "ln", 2), 4 * (n + 10 + 10 + n), 8 * n, 0);
  EXPECT_COST(cost(s, "rms", 2), 4 * (n + 10 + n), 4 * n, 0);
  EXPECT_COST(cost(s, "sm", 2), 4 * (n + n), 5 * n, 0);
  EXPECT_COST(cost(s, "res", 2), 4 * (n + n + n), n, 0);
  /* broadcast operands count their own size, in either position */
  EXPECT_COST(cost(s, "bias", 2), 4 * (n + 10 + n), n, 0);
  EXPECT_COST(cost(s, "bias", 1), 280, 30, 0);
  EXPECT_COST(cost(s, "scale", 2), 4 * (10 + n + n), n, 0);
  EXPECT_COST(cost(s, "act", 2), 4 * (n + n), n, 0);

  /* The fused residual add + layernorm: normalises x + r, stores the sum in s1 too. Same
   * FLOPs as the two nodes apart; the sum is written but not read back. */
  hkc_cost_t add = cost(s, "res", 2), ln = cost(s, "ln", 2);
  hkc_node_t *nd = &s->nodes[node(s, "ln")];
  nd->in[0] = hk_test_tensor(s, "x");
  nd->add_in = hk_test_tensor(s, "r");
  nd->sum_out = hk_test_tensor(s, "s1");
  nd->fused_names = hkc_strdup("res,ln");
  nd->n_fused = 2;
  hkc_cost_t fused = cost(s, "ln", 2);
  EXPECT_COST(fused, 4 * (n + n + 10 + 10 + n + n), 9 * n, 0);
  assert_int_equal(fused.flops, add.flops + ln.flops);
  assert_true(fused.bytes < add.bytes + ln.bytes);
  nd->sum_out = HKC_NONE;
  EXPECT_COST(cost(s, "ln", 2), 4 * (n + n + 10 + 10 + n), 9 * n, 0);

  /* ewchain "a1gm2" = gelu(x + b) * r: operands read once each, 3 steps per element */
  nd = &s->nodes[node(s, "act")];
  nd->op = HK_OP_EWCHAIN;
  nd->in[0] = hk_test_tensor(s, "x");
  nd->in[1] = hk_test_tensor(s, "b");
  nd->in[2] = hk_test_tensor(s, "r");
  nd->n_in = 3;
  snprintf(nd->program, sizeof nd->program, "a1gm2");
  EXPECT_COST(cost(s, "act", 2), 4 * (n + 10 + n + n), 3 * n, 0);
  nd->in[2] = hk_test_tensor(s, "x"); /* "a1gm2" over (x, b, x): x once */
  EXPECT_COST(cost(s, "act", 2), 4 * (n + 10 + n), 3 * n, 0);

  /* rope over x: 3 FLOPs per element */
  nd = &s->nodes[node(s, "sm")];
  nd->op = HK_OP_ROPE;
  nd->heads = 2;
  EXPECT_COST(cost(s, "sm", 2), 4 * (n + n), 3 * n, 0);
  /* packed q|k|v of 3 + 1 + 1 heads of 2: the q and k heads rotated (4 of 5), v copied */
  nd->heads = 3, nd->kv_heads = 1, nd->packed = 1;
  EXPECT_COST(cost(s, "sm", 2), 4 * (n + n), 3 * n / 5 * 4, 0);
  hkc_spec_destroy(s);
}

/* embedding reads a table row per token (and a position row), not the tables: a decode step's
 * 128k-row table counts the rows its tokens take */
static void test_embedding_rows(void **ts) {
  (void)ts;
  hkc_spec_t *s = hk_test_spec_parse("hkc: 1\nname: e\ndtype: f32\nbatch_sizes: [4]\n"
                                     "inputs: {ids: {shape: [batch, 8], dtype: i32}}\n"
                                     "params: {table: [1000, 64], pos: [512, 64]}\n"
                                     "graph:\n"
                                     "  - {name: emb, op: embedding, in: [ids, table], out: y}\n"
                                     "  - {name: embp, op: embedding, in: [ids, table], pos: pos, out: z}\n"
                                     "outputs: [y, z]\n");
  const uint64_t tokens = 4 * 8, rows = tokens * 64 * 4; /* 32 tokens of 64 f32 */
  EXPECT_COST(cost(s, "emb", 4), 4 * tokens + rows + rows, 0, 0);
  EXPECT_COST(cost(s, "embp", 4), 4 * tokens + 2 * rows + rows, tokens * 64, 0);
  hkc_spec_destroy(s);
}

/* ---- the PLAN section end to end ------------------------------------------------------------ */
static void test_plan_roundtrip(void **ts) {
  (void)ts;
  const char *spec_path = hk_test_source_path("specs/mlp.yaml");
  hkc_spec_t *spec = NULL;
  assert_int_equal(hkc_spec_load(spec_path, &spec), 0);
  char *dir = hk_test_tmpdir();
  char out[4200];
  snprintf(out, sizeof out, "%s/mlp.hkpack", dir);
  hkc_build_options_t opt = {.spec_path = spec_path, .out_path = out, .targets = "host", .quiet = 1, .no_cache = 1,
                             .fusion = HKC_FUSION_NONE}; /* one launch per spec node */
  hkc_diag_capture(diag, sizeof diag);
  int rc = hkc_build(&opt);
  hkc_diag_capture(NULL, 0);
  if (rc != 0) fail_msg("build failed: %s", diag);

  hk_pack_t *pack;
  assert_int_equal(hk_test_open_file(out, NULL, &pack), HK_OK);
  const hk_pack_view_t *v = hk_pack_view(pack);
  assert_non_null(v->plan_graphs);
  assert_non_null(v->plan_nodes);
  assert_int_equal(v->graph_count, (uint32_t)spec->n_batch);
  for (uint32_t g = 0; g < v->graph_count; g++) {
    const hk_graph_rec_t *gr = &v->graphs[g];
    const hk_plan_graph_rec_t *pg = &v->plan_graphs[g];
    uint64_t bytes = 0, flops = 0;
    assert_int_equal(gr->node_count, spec->n_nodes); /* built unfused: one launch per node */
    for (uint32_t j = 0; j < gr->node_count; j++) {
      const hk_plan_node_rec_t *pn = &v->plan_nodes[gr->node_first + j];
      hkc_cost_t c;
      hkc_node_cost(spec, j, (int64_t)gr->batch, &c);
      assert_int_equal(pn->bytes, c.bytes);
      assert_int_equal(pn->flops, c.flops);
      assert_int_equal(pn->flags, c.matrix ? HK_PLAN_MATRIX : 0);
      assert_int_equal(pn->fused_nodes, 1);
      assert_true(c.bytes > 0 && c.flops > 0);
      assert_string_equal(hk_pack_string(v, v->nodes[gr->node_first + j].name), spec->nodes[j].name);
      bytes += c.bytes;
      flops += c.flops;
    }
    /* unfused: the spec's nodes, each its own kernel */
    assert_int_equal(pg->unfused_nodes, spec->n_nodes);
    assert_int_equal(pg->unfused_bytes, bytes);
    assert_int_equal(pg->unfused_flops, flops);
    assert_int_equal(pg->reserved0, 0);
  }
  /* fc1 at batch 4: x [64, 64] @ w1 [64, 256] + b1, gelu; f32 */
  const hk_plan_node_rec_t *fc1 = &v->plan_nodes[v->graphs[1].node_first];
  assert_int_equal(fc1->bytes, 4 * (64 * 64 + 64 * 256 + 256 + 64 * 256));
  assert_int_equal(fc1->flops, 2 * 64 * 256 * 64 + 2 * 64 * 256);

  /* Sessions hand the same numbers out per launch. */
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 4), &s), HK_OK);
  assert_int_equal(hk_session_launch_count(s), spec->n_nodes);
  for (uint32_t j = 0; j < spec->n_nodes; j++) {
    hk_launch_info_t li;
    assert_int_equal(hk_session_launch_info(s, j, &li), HK_OK);
    hkc_cost_t c;
    hkc_node_cost(spec, j, 4, &c);
    assert_int_equal(li.bytes, c.bytes);
    assert_int_equal(li.flops, c.flops);
    assert_int_equal(li.matrix, c.matrix);
    assert_string_equal(li.nodes, spec->nodes[j].name);
    assert_non_null(strstr(li.kernel, hkc_op_name(spec->nodes[j].op)));
  }
  hk_launch_info_t li;
  assert_int_equal(hk_session_launch_info(s, spec->n_nodes, &li), HK_STATUS_NOT_FOUND);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  hkc_spec_destroy(spec);
  unlink(out);
  rmdir(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gemm_bias_residual),
      cmocka_unit_test(test_attention),
      cmocka_unit_test(test_norms_and_elementwise),
      cmocka_unit_test(test_embedding_rows),
      cmocka_unit_test(test_plan_roundtrip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
