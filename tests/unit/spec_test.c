/* SPDX-License-Identifier: Apache-2.0 */
/* hkc_spec_parse / hkc_spec_load: the example specs, inferred shapes, roles, order and
 * defaults; then one test per error class, each checking FILE:LINE:COL and the words
 * of the message. */
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

static hkc_spec_t *parse(const char *text) {
  hkc_spec_t *spec = (hkc_spec_t *)(uintptr_t)1; /* must be overwritten */
  hkc_diag_capture(diag, sizeof diag);
  int rc = hkc_spec_parse("t.yaml", text, strlen(text), &spec);
  hkc_diag_capture(NULL, 0);
  assert_true(rc == 0 ? spec != NULL : spec == NULL);
  return spec;
}

/* The spec must be rejected with a message at t.yaml:LINE:COL containing every word. */
static void expect_error_at(const char *text, int line, int col, const char *w1, const char *w2) {
  hkc_spec_t *spec = parse(text);
  if (spec) {
    hkc_spec_destroy(spec);
    fail_msg("spec accepted, expected an error at %d:%d (%s):\n%s", line, col, w1, text);
  }
  char where[64];
  snprintf(where, sizeof where, "t.yaml:%d:%d: ", line, col);
  if (strncmp(diag, where, strlen(where)) != 0 || !strstr(diag, w1) || (w2 && !strstr(diag, w2)))
    fail_msg("expected '%s' with '%s'%s%s%s, got:\n%s", where, w1, w2 ? " and '" : "", w2 ? w2 : "", w2 ? "'" : "",
             diag);
}

/* Same, with the column given as the place of `token` on that line: the first match
 * of the token with any '|' removed; the column is at the '|' (or the token's start). */
static void expect_error_on(const char *text, int line, const char *token, const char *w1, const char *w2) {
  const char *p = text;
  for (int l = 1; l < line; l++) {
    p = strchr(p, '\n');
    assert_non_null(p);
    p++;
  }
  const char *eol = strchr(p, '\n');
  size_t len = eol ? (size_t)(eol - p) : strlen(p);
  char needle[128], row[1024];
  const char *bar = strchr(token, '|');
  size_t off = bar ? (size_t)(bar - token) : 0;
  snprintf(needle, sizeof needle, "%.*s%s", (int)off, token, bar ? bar + 1 : token + off);
  snprintf(row, sizeof row, "%.*s", (int)len, p);
  const char *hit = strstr(row, needle);
  if (!hit) fail_msg("test bug: '%s' not on line %d", needle, line);
  expect_error_at(text, line, (int)(hit - row + off) + 1, w1, w2);
}

static int64_t dim_at(const hkc_tensor_t *t, uint32_t i, int64_t batch) { return hkc_dim_value(t->dims[i], batch); }

static const hkc_tensor_t *tensor(const hkc_spec_t *s, const char *name) {
  int i = hkc_tensor_find(s, name);
  if (i == HKC_NONE) fail_msg("no tensor '%s'", name);
  return &s->tensors[i];
}

/* Lines 1-6 of the inline specs. */
#define BASE                                   \
  "hkc: 1\n"                                   \
  "name: t\n"                                  \
  "batch_sizes: [4, 1, 4, 2]\n"                \
  "dims: {d: 8, h: 2}\n"                       \
  "inputs: {x: [batch, d]}\n"                  \
  "params: {w: [d, 16], v: [4, 16], bias: [16], g: [d]}\n"
#define RELU_GRAPH "graph:\n  - {name: a, op: relu, in: [x], out: y}\noutputs: [y]\n"

/* ---- valid specs --------------------------------------------------------------------- */
static void test_mlp_spec(void **state) {
  (void)state;
  hkc_spec_t *s = NULL;
  const char *path = hk_test_source_path("specs/mlp.yaml");
  hkc_diag_capture(diag, sizeof diag);
  int rc = hkc_spec_load(path, &s);
  hkc_diag_capture(NULL, 0);
  if (rc != 0) fail_msg("%s", diag);
  assert_string_equal(diag, ""); /* no warnings either */
  assert_string_equal(s->name, "mlp");
  assert_string_equal(s->path, path);
  assert_int_equal(s->version, 1);
  assert_int_equal(s->dtype, HK_DTYPE_F32);
  assert_int_equal(s->n_batch, 2);
  assert_int_equal(s->batch_sizes[0], 1);
  assert_int_equal(s->batch_sizes[1], 4);
  assert_int_equal(s->n_targets, 1);
  assert_string_equal(s->targets[0], "host");
  assert_int_equal(s->fusion, HKC_FUSION_AUTO);
  char *bytes;
  size_t size;
  assert_int_equal(hkc_read_file(path, &bytes, &size), 0);
  assert_true(s->hash == hkc_hash64(bytes, size));
  free(bytes);

  assert_int_equal(s->n_tensors, 11); /* x, 6 params, h y0 y1 y */
  assert_int_equal(s->tensors[0].role, HK_ROLE_INPUT);
  assert_string_equal(s->tensors[0].name, "x");
  for (int i = 1; i <= 6; i++) assert_int_equal(s->tensors[i].role, HK_ROLE_PARAM);
  const hkc_tensor_t *h = tensor(s, "h"), *y = tensor(s, "y"), *w1 = tensor(s, "w1");
  assert_int_equal(h->role, HK_ROLE_INTERMEDIATE);
  assert_int_equal(y->role, HK_ROLE_OUTPUT);
  assert_int_equal(h->rank, 3);
  assert_true(h->dims[0].mul == 1 && h->dims[0].add == 0);
  assert_int_equal(dim_at(h, 1, 4), 16);
  assert_int_equal(dim_at(h, 2, 4), 256);
  assert_int_equal(hkc_tensor_elems(h, 4), 4 * 16 * 256);
  assert_int_equal(hkc_tensor_elems(y, 1), 16 * 64);
  assert_int_equal(w1->rank, 2);
  assert_int_equal(hkc_tensor_elems(w1, 4), 64 * 256); /* params do not scale with batch */
  assert_int_equal(w1->loc.line, 12);
  assert_int_equal(w1->loc.col, 3);

  assert_int_equal(s->n_nodes, 4);
  const char *names[] = {"fc1", "fc2", "res", "ln"};
  const hk_op_t ops[] = {HK_OP_GEMM, HK_OP_GEMM, HK_OP_ADD, HK_OP_LAYERNORM};
  for (int i = 0; i < 4; i++) {
    assert_string_equal(s->nodes[i].name, names[i]);
    assert_int_equal(s->nodes[i].op, ops[i]);
    assert_int_equal(s->tensors[s->nodes[i].out].producer, i);
  }
  const hkc_node_t *fc1 = &s->nodes[0], *ln = &s->nodes[3];
  assert_int_equal(fc1->n_in, 2);
  assert_int_equal(fc1->in[0], hkc_tensor_find(s, "x"));
  assert_int_equal(fc1->in[1], hkc_tensor_find(s, "w1"));
  assert_int_equal(fc1->bias, hkc_tensor_find(s, "b1"));
  assert_int_equal(fc1->residual, HKC_NONE);
  assert_int_equal(fc1->act, HK_ACT_GELU);
  assert_int_equal(fc1->trans_b, 0);
  assert_int_equal(ln->gamma, hkc_tensor_find(s, "g"));
  assert_int_equal(ln->beta, hkc_tensor_find(s, "b"));
  assert_float_equal(ln->eps, 1e-5f, 1e-12f);
  assert_int_equal(s->n_outputs, 1);
  assert_int_equal(s->outputs[0], hkc_tensor_find(s, "y"));
  hkc_spec_destroy(s);
}

static void test_bert_layer_spec(void **state) {
  (void)state;
  hkc_spec_t *s = NULL;
  hkc_diag_capture(diag, sizeof diag);
  int rc = hkc_spec_load(hk_test_source_path("specs/bert_layer.yaml"), &s);
  hkc_diag_capture(NULL, 0);
  if (rc != 0) fail_msg("%s", diag);
  assert_string_equal(diag, "");
  assert_int_equal(s->dtype, HK_DTYPE_BF16);
  assert_int_equal(s->n_batch, 4);
  assert_int_equal(s->batch_sizes[2], 32);
  assert_int_equal(s->batch_sizes[3], 128);
  assert_int_equal(s->n_targets, 2);
  assert_string_equal(s->targets[1], "sm_90");
  assert_int_equal(s->n_dims, 4);
  assert_string_equal(s->dims[1].name, "hidden");
  assert_int_equal(s->dims[1].value, 768);
  for (size_t i = 0; i < s->n_tensors; i++) assert_int_equal(s->tensors[i].dtype, HK_DTYPE_BF16);
  const hkc_tensor_t *qkv = tensor(s, "qkv"), *ctx = tensor(s, "ctx"), *f = tensor(s, "f");
  assert_int_equal(dim_at(qkv, 2, 8), 3 * 768);
  assert_int_equal(dim_at(tensor(s, "w_qkv"), 1, 8), 3 * 768);
  assert_int_equal(ctx->rank, 3);
  assert_int_equal(dim_at(ctx, 0, 8), 8);
  assert_int_equal(dim_at(ctx, 1, 8), 128);
  assert_int_equal(dim_at(ctx, 2, 8), 768);
  assert_int_equal(dim_at(f, 2, 1), 3072);
  assert_int_equal(hkc_tensor_elems(tensor(s, "y"), 128), 128 * 128 * 768);
  assert_int_equal(s->n_nodes, 10); /* one node per operation: fusion happens later */
  const hkc_node_t *attn = &s->nodes[1];
  assert_int_equal(attn->op, HK_OP_ATTENTION);
  assert_int_equal(attn->n_in, 1);
  assert_int_equal(attn->heads, 12);
  assert_int_equal(attn->kv_heads, 12);
  assert_int_equal(attn->causal, 0);
  assert_int_equal(attn->has_scale, 0);
  assert_float_equal(attn->scale, 0.125f, 1e-7f); /* 1/sqrt(768/12) */
  assert_int_equal(s->nodes[3].op, HK_OP_ADD);
  assert_int_equal(s->nodes[3].in[1], hkc_tensor_find(s, "x"));
  assert_int_equal(s->nodes[6].op, HK_OP_GELU);
  assert_int_equal(s->nodes[8].in[1], hkc_tensor_find(s, "h1"));
  assert_float_equal(s->nodes[4].eps, 1e-12f, 1e-18f);
  assert_int_equal(tensor(s, "y")->role, HK_ROLE_OUTPUT);
  assert_int_equal(tensor(s, "h1")->role, HK_ROLE_INTERMEDIATE);
  hkc_spec_destroy(s);
}

static const hkc_node_t *node(const hkc_spec_t *s, const char *name) {
  for (size_t i = 0; i < s->n_nodes; i++)
    if (!strcmp(s->nodes[i].name, name)) return &s->nodes[i];
  fail_msg("no node '%s'", name);
  return NULL;
}

static void test_llama_block_spec(void **state) {
  (void)state;
  hkc_spec_t *s = NULL;
  hkc_diag_capture(diag, sizeof diag);
  int rc = hkc_spec_load(hk_test_source_path("specs/llama_block.yaml"), &s);
  hkc_diag_capture(NULL, 0);
  if (rc != 0) fail_msg("%s", diag);
  assert_string_equal(diag, "");
  assert_int_equal(s->dtype, HK_DTYPE_BF16);
  assert_int_equal(s->n_batch, 3);
  assert_int_equal(s->batch_sizes[0], 1);
  assert_int_equal(s->batch_sizes[2], 16);
  assert_int_equal(s->n_nodes, 12);
  assert_int_equal(s->fusion, HKC_FUSION_AUTO);
  /* one q|k|v projection: 32 q heads, 8 k and 8 v heads of 128 */
  assert_int_equal(dim_at(tensor(s, "wqkv"), 0, 1), 4096);
  assert_int_equal(dim_at(tensor(s, "wqkv"), 1, 1), (32 + 2 * 8) * 128);
  assert_int_equal(dim_at(tensor(s, "qkv"), 2, 1), 6144);
  assert_int_equal(dim_at(tensor(s, "qkv_rot"), 1, 4), 512);
  assert_int_equal(dim_at(tensor(s, "qkv_rot"), 2, 4), 6144);
  assert_int_equal(dim_at(tensor(s, "gate"), 2, 1), 14336);
  assert_int_equal(hkc_tensor_elems(tensor(s, "y"), 16), 16 * 512 * 4096);
  const hkc_node_t *r = node(s, "qk_rope"), *at = node(s, "attn");
  assert_int_equal(r->op, HK_OP_ROPE);
  assert_int_equal(r->packed, 1);
  assert_int_equal(r->heads, 32);
  assert_int_equal(r->kv_heads, 8);
  assert_true(r->theta == 500000.0f);
  assert_int_equal(r->pos_offset, 0);
  assert_int_equal(r->in[0], hkc_tensor_find(s, "qkv"));
  assert_int_equal(at->heads, 32);
  assert_int_equal(at->kv_heads, 8);
  assert_int_equal(at->causal, 1);
  assert_float_equal(at->scale, 1.0f / sqrtf(128.0f), 1e-7f);
  assert_int_equal(at->n_in, 1); /* packed */
  assert_int_equal(at->in[0], hkc_tensor_find(s, "qkv_rot"));
  assert_int_equal(node(s, "gate_proj")->act, HK_ACT_SILU);
  assert_int_equal(node(s, "swiglu")->op, HK_OP_MUL);
  assert_int_equal(node(s, "ffn_res")->in[1], hkc_tensor_find(s, "h"));
  assert_int_equal(s->n_outputs, 1);
  assert_int_equal(s->outputs[0], hkc_tensor_find(s, "y"));
  hkc_spec_destroy(s);
}

static void test_defaults_and_sorting_of_batch_sizes(void **state) {
  (void)state;
  hkc_spec_t *s = hk_test_spec_parse(BASE RELU_GRAPH);
  assert_int_equal(s->dtype, HK_DTYPE_F32); /* dtype absent: f32 */
  assert_int_equal(s->n_targets, 1);        /* targets absent: [host] */
  assert_string_equal(s->targets[0], "host");
  assert_int_equal(s->fusion, HKC_FUSION_AUTO);
  assert_int_equal(s->batch_policy, HK_BATCH_POLICY_REC_PAD); /* batch_policy absent: pad */
  assert_int_equal(s->n_batch, 3); /* [4, 1, 4, 2] -> [1, 2, 4] */
  assert_int_equal(s->batch_sizes[0], 1);
  assert_int_equal(s->batch_sizes[1], 2);
  assert_int_equal(s->batch_sizes[2], 4);
  /* The unused params are warnings, not errors. */
  assert_non_null(strstr(hk_test_spec_diag(), "t.yaml:6:10: warning: tensor 'w' is never used"));
  hkc_spec_destroy(s);
}

static void test_topological_order(void **state) {
  (void)state;
  /* Written consumers-first: sorted so producers come first. */
  hkc_spec_t *s = hk_test_spec_parse(BASE "graph:\n"
                                          "  - {name: c, op: add, in: [y2, y1], out: y3}\n"
                                          "  - {name: b, op: silu, in: [y1], out: y2}\n"
                                          "  - {name: a, op: relu, in: [x], out: y1}\n"
                                          "  - {name: z, op: softmax, in: [x], out: y4}\n"
                                          "outputs: [y3, y4]\n");
  assert_int_equal(s->n_nodes, 4);
  const char *order[] = {"a", "b", "c", "z"};
  for (int i = 0; i < 4; i++) assert_string_equal(s->nodes[i].name, order[i]);
  for (size_t j = 0; j < s->n_nodes; j++) {
    const hkc_node_t *nd = &s->nodes[j];
    for (int k = 0; k < nd->n_in; k++) assert_true(s->tensors[nd->in[k]].producer < (int)j);
    assert_int_equal(s->tensors[nd->out].producer, (int)j);
  }
  /* Node outputs are stored after inputs and params, in node order. */
  assert_int_equal(hkc_tensor_find(s, "y1"), 5);
  assert_int_equal(hkc_tensor_find(s, "y4"), 8);
  assert_int_equal(s->n_outputs, 2);
  assert_int_equal(s->outputs[0], hkc_tensor_find(s, "y3"));
  assert_int_equal(tensor(s, "y4")->role, HK_ROLE_OUTPUT);
  assert_int_equal(tensor(s, "y1")->role, HK_ROLE_INTERMEDIATE);
  hkc_spec_destroy(s);

  /* An already sorted graph keeps its written order. */
  s = hk_test_spec_parse(BASE "graph:\n"
                              "  - {name: p, op: relu, in: [x], out: y1}\n"
                              "  - {name: q, op: gelu, in: [x], out: y2}\n"
                              "  - {name: r, op: mul, in: [y1, y2], out: y3}\n"
                              "outputs: [y3]\n");
  assert_string_equal(s->nodes[0].name, "p");
  assert_string_equal(s->nodes[1].name, "q");
  assert_string_equal(s->nodes[2].name, "r");
  hkc_spec_destroy(s);
}

static void test_expressions_broadcast_and_attributes(void **state) {
  (void)state;
  hkc_spec_t *s = hk_test_spec_parse("hkc: 1\nname: ops-1.0\ndtype: bf16\nbatch_sizes: [2]\n"
                                     "dims: {heads: 4, kvh: 2, dh: 8, hid: heads*dh, kvw: kvh*dh}\n"
                                     "targets: [host, gfx90a, 'gfx90a:xnack-', sm_90a]\n"
                                     "inputs: {x: [batch, 3, hid], m: [1, 1, hid], t: [\"batch*3\", hid]}\n"
                                     "params: {wk: [kvw, hid], wv: [kvw, hid], s: [hid], one: [1]}\n"
                                     "graph:\n"
                                     "  - {name: k, op: gemm, in: [x, wk], trans_b: true, out: kk}\n"
                                     "  - {name: v, op: gemm, in: [x, wv], trans_b: true, act: gelu_tanh, out: vv}\n"
                                     "  - {name: at, op: attention, in: [x, kk, vv], heads: heads, kv_heads: kvh,"
                                     " causal: true, scale: 0.5, out: o}\n"
                                     "  - {name: b1, op: add, in: [m, o], out: o1}\n"
                                     "  - {name: b2, op: mul, in: [s, o1], out: o2}\n"
                                     "  - {name: b3, op: mul, in: [o2, one], out: o3}\n"
                                     "  - {name: rn, op: rmsnorm, in: [o3], gamma: s, out: o4}\n"
                                     "  - {name: n2, op: add, in: [t, t], out: o5}\n"
                                     "outputs: [o4, o5]\n"
                                     "fusion: {groups: [[b2, b1], [rn]]}\n");
  assert_int_equal(s->dtype, HK_DTYPE_BF16);
  assert_int_equal(s->dims[3].value, 32); /* hid = heads*dh */
  assert_int_equal(s->n_targets, 4);
  assert_string_equal(s->targets[2], "gfx90a:xnack-");
  const hkc_tensor_t *kk = tensor(s, "kk"), *t = tensor(s, "t");
  assert_int_equal(dim_at(kk, 2, 2), 16); /* [N, K] weight: N = kvh*dh */
  assert_true(t->dims[0].mul == 3 && t->dims[0].add == 0);
  assert_int_equal(s->nodes[0].trans_b, 1);
  assert_int_equal(s->nodes[1].act, HK_ACT_GELU_TANH);
  const hkc_node_t *at = &s->nodes[2];
  assert_int_equal(at->n_in, 3);
  assert_int_equal(at->heads, 4);
  assert_int_equal(at->kv_heads, 2);
  assert_int_equal(at->causal, 1);
  assert_int_equal(at->has_scale, 1);
  assert_float_equal(at->scale, 0.5f, 0);
  assert_int_equal(dim_at(tensor(s, "o"), 2, 2), 32);
  /* Broadcasts: [1,1,hid] + [b,3,hid] -> [b,3,hid]; [hid] * that; [..] * [1] keeps rank 3. */
  const char *same[] = {"o1", "o2", "o3", "o4"};
  for (int i = 0; i < 4; i++) {
    const hkc_tensor_t *o = tensor(s, same[i]);
    assert_int_equal(o->rank, 3);
    assert_true(o->dims[0].mul == 1 && dim_at(o, 1, 2) == 3 && dim_at(o, 2, 2) == 32);
  }
  assert_int_equal(s->nodes[6].op, HK_OP_RMSNORM);
  assert_float_equal(s->nodes[6].eps, 1e-5f, 0); /* default */
  assert_int_equal(s->nodes[6].beta, HKC_NONE);
  assert_int_equal(s->fusion, HKC_FUSION_GROUPS);
  assert_int_equal(s->n_groups, 2);
  assert_int_equal(s->group_sizes[0], 2);
  assert_int_equal(s->groups[0][0], 4); /* b2, then b1: as written, as node indices */
  assert_int_equal(s->groups[0][1], 3);
  assert_int_equal(s->groups[1][0], 6);
  hkc_spec_destroy(s);

  /* A broadcast that pads the rank: [1, 1, 1, d] + [batch, d] -> [1, 1, batch, d]; batch
   * is then not leading, which only the exact batch policy accepts. */
  s = hk_test_spec_parse("hkc: 1\nname: t\nbatch_sizes: [3]\nbatch_policy: exact\n"
                         "inputs: {a: [1, 1, 1, 5], c: [batch, 5]}\n"
                         "graph:\n  - {name: n, op: add, in: [a, c], out: y}\noutputs: [y]\nfusion: none\n");
  assert_int_equal(s->batch_policy, HK_BATCH_POLICY_REC_EXACT);
  const hkc_tensor_t *y = tensor(s, "y");
  assert_int_equal(y->rank, 4);
  assert_int_equal(dim_at(y, 0, 3), 1);
  assert_int_equal(dim_at(y, 1, 3), 1);
  assert_int_equal(dim_at(y, 2, 3), 3);
  assert_int_equal(s->fusion, HKC_FUSION_NONE);
  hkc_spec_destroy(s);
}

static void test_helpers(void **state) {
  (void)state;
  assert_int_equal(hkc_dtype_size(HK_DTYPE_F32), 4);
  assert_int_equal(hkc_dtype_size(HK_DTYPE_F16), 2);
  assert_int_equal(hkc_dtype_size(HK_DTYPE_BF16), 2);
  assert_string_equal(hkc_dtype_name(HK_DTYPE_BF16), "bf16");
  assert_string_equal(hkc_op_name(HK_OP_ATTENTION), "attention");
  assert_string_equal(hkc_op_name(HK_OP_RMSNORM), "rmsnorm");
  assert_string_equal(hkc_op_name(HK_OP_COUNT_), "?");
  assert_string_equal(hkc_act_name(HK_ACT_GELU_TANH), "gelu_tanh");
  assert_string_equal(hkc_act_name(HK_ACT_NONE), "none");
  hkc_spec_destroy(NULL);
  hkc_spec_t *s = hk_test_spec_parse(BASE RELU_GRAPH);
  assert_int_equal(hkc_tensor_find(s, "nope"), HKC_NONE);
  assert_int_equal(hkc_tensor_find(s, "x"), 0);
  hkc_tensor_t big = {.rank = 2, .dims = {{0, INT64_MAX / 2}, {1, 0}}};
  assert_int_equal(hkc_tensor_elems(&big, 4), -1); /* overflow */
  hkc_spec_destroy(s);
}

/* ---- errors, one class at a time ------------------------------------------------------------ */
static void test_unknown_keys(void **state) {
  (void)state;
  expect_error_at(BASE "grph: 1\n" RELU_GRAPH, 7, 1, "unknown key 'grph'", "valid keys: hkc, name, dtype, batch_sizes");
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x], out: y, eps: 1}\noutputs: [y]\n", 8, "eps",
                  "unknown key 'eps' for op 'relu'", "(valid keys: name, op, in, out)");
  expect_error_on(BASE "graph:\n  - {name: a, op: gemm, in: [x, w], gamma: g, out: y}\noutputs: [y]\n", 8, "gamma",
                  "unknown key 'gamma' for op 'gemm'", "valid keys: name, op, in, out, bias, residual, act, trans_b");
  expect_error_on(BASE RELU_GRAPH "fusion: {group: [[a]]}\n", 10, "group", "unknown key 'group' in 'fusion'",
                  "valid keys: groups");
}

static void test_missing_keys(void **state) {
  (void)state;
  expect_error_at(BASE "graph:\n  - {name: a, op: relu, in: [x], out: y}\n", 1, 1, "missing required key 'outputs'",
                  NULL);
  expect_error_at("hkc: 1\nbatch_sizes: [1]\n", 1, 1, "missing required key 'name'", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x]}\noutputs: [y]\n", 8, "{",
                  "node 'a': missing required key 'out'", NULL);
  expect_error_on(BASE "graph:\n  - name: a\n    in: [x]\n    out: y\noutputs: [y]\n", 8, "name",
                  "node 'a': missing required key 'op'", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: attention, in: [x], out: y}\noutputs: [y]\n", 8, "{",
                  "missing required key 'heads'", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: layernorm, in: [x], gamma: g, out: y}\noutputs: [y]\n", 8, "{",
                  "missing required key 'beta'", NULL);
}

static void test_undefined_tensor(void **state) {
  (void)state;
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [nope], out: y}\noutputs: [y]\n", 8, "nope",
                  "undefined tensor 'nope'", "node 'a'");
  expect_error_on(BASE "graph:\n  - {name: a, op: gemm, in: [x, w], bias: bb, out: y}\noutputs: [y]\n", 8, "bb",
                  "undefined tensor 'bb' in 'bias'", NULL);
}

static void test_shape_mismatch(void **state) {
  (void)state;
  expect_error_on(BASE "graph:\n  - {name: a, op: gemm, in: [x, v], out: y}\noutputs: [y]\n", 8, "v]",
                  "shape mismatch: gemm A 'x' [batch, 8] and B 'v' [4, 16]", "K");
  expect_error_on(BASE "graph:\n  - {name: a, op: gemm, in: [x, w], trans_b: true, out: y}\noutputs: [y]\n", 8, "w]",
                  "B 'w' [8, 16] (trans_b)", "shape mismatch");
  expect_error_on(BASE "graph:\n  - {name: a, op: gemm, in: [x, bias], out: y}\noutputs: [y]\n", 8, "bias]",
                  "B 'bias' must be 2-D [K, N], got [16]", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: gemm, in: [x, w], bias: g, out: y}\noutputs: [y]\n", 8, "bias: |g",
                  "shape mismatch: bias 'g' is [8], expected [16]", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: gemm, in: [x, w], residual: x, out: y}\noutputs: [y]\n", 8,
                  "residual: |x", "residual 'x' is [batch, 8], the output is [batch, 16]", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: gemm, in: [x, w], mul: x, out: y}\noutputs: [y]\n", 8,
                  "mul: |x", "shape mismatch: mul 'x' is [batch, 8], the output is [batch, 16]", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x], mul: x, out: y}\noutputs: [y]\n", 8, "mul",
                  "unknown key 'mul' for op 'relu'", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: add, in: [x, w], out: y}\noutputs: [y]\n", 8, "w]",
                  "cannot broadcast 'x' [batch, 8] with 'w' [8, 16]", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: layernorm, in: [x], gamma: bias, beta: g, out: y}\noutputs: [y]\n",
                  8, "bias", "gamma 'bias' is [16], expected [8]", "last dim of 'x' [batch, 8]");
  expect_error_on(BASE "graph:\n  - {name: a, op: layernorm, in: [x], gamma: g, beta: bias, out: y}\noutputs: [y]\n",
                  8, "bias", "beta 'bias' is [16], expected [8]", NULL);
}

#define QKV "hkc: 1\nname: t\nbatch_sizes: [1]\ndims: {s: 4}\ninputs: {x: [batch, s, 24], q: [batch, s, 8]}\n"
static void test_attention_shapes(void **state) {
  (void)state;
#define ATT(in, extra) QKV "graph:\n  - {name: a, op: attention, in: " in ", heads: " extra ", out: y}\noutputs: [y]\n"
  expect_error_on(ATT("[x]", "5"), 7, "x]", "packed qkv 'x' [batch, 4, 24]",
                  "not divisible by heads + 2*kv_heads = 15");
  expect_error_on(ATT("[x, x, x]", "5"), 7, "x,", "q 'x' [batch, 4, 24]", "not divisible by heads = 5");
  expect_error_on(ATT("[x]", "4, kv_heads: 3"), 7, "3", "kv_heads (3) must divide heads (4)", NULL);
  expect_error_on(ATT("[x]", "0"), 7, "0", "must be positive", NULL);
  expect_error_on(ATT("[x]", "s*batch"), 7, "s*batch", "'heads' must be a positive integer", "not depend on batch");
  expect_error_on(ATT("[x, q, q]", "2"), 7, "q,", "k 'q' is [batch, 4, 8]", "kv_heads*head_dim = 2*12");
  expect_error_on(QKV "params: {w: [8, 8]}\ngraph:\n  - {name: a, op: attention, in: [x, w, x], heads: 1, out: y}\n"
                      "outputs: [y]\n",
                  8, "w,", "attention input 'w' must be 3-D", NULL);
  expect_error_on("hkc: 1\nname: t\nbatch_sizes: [1]\ninputs: {q: [batch, 4, 8], k: [batch, 6, 8], v: [batch, 5, 8]}\n"
                  "graph:\n  - {name: a, op: attention, in: [q, k, v], heads: 2, out: y}\noutputs: [y]\n",
                  6, "v]", "k 'k' [batch, 6, 8] and v 'v' [batch, 5, 8] have different lengths", NULL);
  expect_error_on("hkc: 1\nname: t\nbatch_sizes: [1]\ninputs: {q: [batch, 4, 8], k: [2, 6, 4], v: [2, 6, 4]}\n"
                  "graph:\n  - {name: a, op: attention, in: [q, k, v], heads: 2, out: y}\noutputs: [y]\n",
                  6, "k,", "batch dims differ", NULL);
  /* Packed qkv with grouped-query heads: 4 q heads + 2*2 kv heads of 3 = 24 columns. */
  hkc_spec_t *s = hk_test_spec_parse(ATT("[x]", "4, kv_heads: 2"));
  assert_int_equal(s->nodes[0].kv_heads, 2);
  assert_int_equal(hkc_dim_value(tensor(s, "y")->dims[2], 1), 12);
  assert_float_equal(s->nodes[0].scale, 1.0f / sqrtf(3.0f), 1e-6f);
  hkc_spec_destroy(s);
#undef ATT
}
#undef QKV

#define ROPE_HDR                                                       \
  "hkc: 1\nname: t\nbatch_sizes: [1]\ndims: {s: 5, h: 3}\n" \
  "inputs: {x: [batch, s, 24], r: [24], b: [batch, 24]}\n"
static void test_rope(void **state) {
  (void)state;
#define ROPE(in, extra) ROPE_HDR "graph:\n  - {name: a, op: rope, in: " in ", " extra ", out: y}\noutputs: [y]\n"
  hkc_spec_t *s = hk_test_spec_parse(ROPE("[x]", "heads: 3"));
  const hkc_node_t *nd = &s->nodes[0];
  assert_int_equal(nd->op, HK_OP_ROPE);
  assert_int_equal(nd->heads, 3);
  assert_true(nd->theta == 10000.0f); /* defaults */
  assert_int_equal(nd->pos_offset, 0);
  const hkc_tensor_t *y = tensor(s, "y");
  assert_int_equal(y->rank, 3);
  assert_int_equal(dim_at(y, 0, 4), 4);
  assert_int_equal(dim_at(y, 1, 4), 5);
  assert_int_equal(dim_at(y, 2, 4), 24);
  hkc_spec_destroy(s);
  s = hk_test_spec_parse(ROPE("[x]", "heads: h+1, theta: 500000.0, offset: 7")); /* dh 6: even is enough */
  assert_int_equal(s->nodes[0].heads, 4);
  assert_true(s->nodes[0].theta == 500000.0f);
  assert_int_equal(s->nodes[0].pos_offset, 7);
  hkc_spec_destroy(s);

  expect_error_on(ROPE("[x]", "heads: 5"), 7, "x]", "rope input 'x' [batch, 5, 24]",
                  "last dim 24 is not divisible by heads = 5");
  expect_error_on(ROPE("[x]", "heads: 8"), 7, "x]", "head_dim = 24/8 = 3 must be even", NULL);
  expect_error_on(ROPE("[x]", "heads: 0"), 7, "0", "must be positive", NULL);
  expect_error_on(ROPE("[x]", "heads: 3, offset: -1"), 7, "-1", "'offset' must be between 0 and 16777215, got -1",
                  NULL);
  expect_error_on(ROPE("[x]", "heads: 3, offset: 2.5"), 7, "2.5", "expected an integer for 'offset', got '2.5'",
                  NULL);
  expect_error_on(ROPE("[x]", "heads: 3, offset: s"), 7, "s,", "expected an integer for 'offset'", NULL);
  expect_error_on(ROPE("[x]", "heads: 3, offset: 16777212"), 7, "16777212",
                  "rope positions reach offset + seq = 16777212 + 5, above 2^24", NULL);
  expect_error_on(ROPE("[x]", "heads: 3, theta: 0"), 7, "0,", "'theta' must be positive, got 0", NULL);
  expect_error_on(ROPE("[x]", "heads: 3, theta: -1.0e4"), 7, "-1.0e4", "'theta' must be positive", NULL);
  expect_error_on(ROPE("[x]", "heads: 3, theta: .inf"), 7, ".inf", "expected a finite number for 'theta'", NULL);
  expect_error_on(ROPE("[r]", "heads: 3"), 7, "r]", "rope input 'r' must have rank >= 2", "got [24]");
  expect_error_on(ROPE("[b]", "heads: 3"), 7, "b]", "rope input 'b' [batch, 24]", "must not depend on batch");
  expect_error_on(ROPE("[x, x]", "heads: 3"), 7, "[x, x]", "op 'rope' takes 1 input in 'in', got 2", NULL);
  expect_error_on(ROPE("[x]", "heads: 3, scale: 1.0"), 7, "scale", "unknown key 'scale' for op 'rope'",
                  "valid keys: name, op, in, out, heads, kv_heads, theta, offset, packed");

  /* packed q|k|v: heads + 2*kv_heads heads of head_dim; q and k rotated, v passed on */
  s = hk_test_spec_parse(ROPE("[x]", "heads: 2, kv_heads: 1, packed: true")); /* 4 heads of 6 */
  assert_int_equal(s->nodes[0].packed, 1);
  assert_int_equal(s->nodes[0].heads, 2);
  assert_int_equal(s->nodes[0].kv_heads, 1);
  assert_int_equal(dim_at(tensor(s, "y"), 2, 1), 24);
  hkc_spec_destroy(s);
  s = hk_test_spec_parse(ROPE("[x]", "heads: h-1, packed: True")); /* kv_heads = heads: 6 heads of 4 */
  assert_int_equal(s->nodes[0].packed, 1);
  assert_int_equal(s->nodes[0].kv_heads, 2);
  hkc_spec_destroy(s);
  s = hk_test_spec_parse(ROPE("[x]", "heads: 3, packed: false"));
  assert_int_equal(s->nodes[0].packed, 0);
  hkc_spec_destroy(s);
  expect_error_on(ROPE("[x]", "heads: 3, packed: true"), 7, "x]", "packed rope input 'x' [batch, 5, 24]",
                  "last dim 24 is not divisible by heads + 2*kv_heads = 9");
  expect_error_on(ROPE("[x]", "heads: 4, kv_heads: 2, packed: true"), 7, "x]",
                  "packed rope input 'x' [batch, 5, 24]: head_dim = 24/8 = 3 must be even", NULL);
  expect_error_on(ROPE("[x]", "heads: 3, kv_heads: 2, packed: true"), 7, "kv_heads: |2",
                  "node 'a': kv_heads (2) must divide heads (3)", NULL);
  expect_error_on(ROPE("[x]", "heads: 3, kv_heads: 1"), 7, "kv_heads: |1",
                  "node 'a': 'kv_heads' is valid only with 'packed: true'", NULL);
  expect_error_on(ROPE("[x]", "heads: 3, kv_heads: 1, packed: false"), 7, "kv_heads: |1",
                  "'kv_heads' is valid only with 'packed: true'", NULL);
  expect_error_on(ROPE("[x]", "heads: 2, kv_heads: 0, packed: true"), 7, "kv_heads: |0", "must be positive", NULL);
  expect_error_on(ROPE("[x]", "heads: 2, packed: yes"), 7, "yes", "expected true or false for 'packed', got 'yes'",
                  NULL);
  expect_error_on(ROPE_HDR "graph:\n  - {name: a, op: rope, in: [x], out: y}\noutputs: [y]\n", 7, "{",
                  "node 'a': missing required key 'heads'", NULL);
#undef ROPE
}
#undef ROPE_HDR

static void test_cycles(void **state) {
  (void)state;
  expect_error_on(BASE "graph:\n  - {name: a, op: add, in: [x, z], out: y}\n  - {name: b, op: relu, in: [y], out: z}\n"
                       "outputs: [y]\n",
                  8, "{", "graph has a cycle through node 'a'", "(a -> b -> a;");
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [y], out: y}\noutputs: [y]\n", 8, "{",
                  "cycle through node 'a' (a -> a;", NULL);
  /* A node downstream of a cycle is not named as being in it. */
  expect_error_on(BASE "graph:\n  - {name: d, op: relu, in: [p], out: q}\n  - {name: b, op: relu, in: [r], out: p}\n"
                       "  - {name: c, op: relu, in: [p], out: r}\noutputs: [q]\n",
                  9, "{", "cycle through node 'b' (b -> c -> b;", NULL);
}

static void test_duplicates(void **state) {
  (void)state;
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x], out: y}\n  - {name: a, op: relu, in: [y], out: z}\n"
                       "outputs: [z]\n",
                  9, "a,", "duplicate node name 'a' (first at 8:12)", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x], out: x}\noutputs: [x]\n", 8, "x}",
                  "duplicate tensor name 'x'", "declared at 5:10");
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x], out: y}\n  - {name: b, op: relu, in: [x], out: y}\n"
                       "outputs: [y]\n",
                  9, "y}", "duplicate tensor name 'y': also written by node 'a' at 8:39", NULL);
  expect_error_on("hkc: 1\nname: t\nbatch_sizes: [1]\ninputs: {x: [4]}\nparams: {x: [4]}\n" RELU_GRAPH, 5, "x",
                  "duplicate tensor name 'x' (first declared at 4:10)", NULL);
  expect_error_at("hkc: 1\nname: t\nname: u\n", 3, 1, "duplicate key 'name' (first given at 2:1)", NULL);
  expect_error_on("hkc: 1\nname: t\nbatch_sizes: [1]\ndims: {d: 1, d: 2}\n", 4, ", |d", "duplicate dim 'd'",
                  "(first declared at 4:8)");
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x], out: y, out: z}\noutputs: [y]\n", 8, "out: z",
                  "duplicate key 'out' (first given at 8:34)", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x], out: y}\noutputs: [y, y]\n", 9, ", |y",
                  "duplicate output 'y'", NULL);
  expect_error_on(BASE "targets: [host, host]\n" RELU_GRAPH, 7, ", |host", "duplicate target 'host'", NULL);
}

#define HEAD3 "hkc: 1\nname: t\nbatch_sizes: [1]\n"
#define TAIL_X "graph:\n  - {name: a, op: relu, in: [x], out: y}\noutputs: [y]\n"
static void test_bad_dims(void **state) {
  (void)state;
  expect_error_on(HEAD3 "dims: {d: 0}\n", 4, "0", "must be positive", NULL);
  expect_error_on(HEAD3 "dims: {d: -3}\n", 4, "-3", "must be positive", NULL);
  expect_error_on(HEAD3 "dims: {d: 2.5}\n", 4, "2.5", "not an integer", NULL);
  expect_error_on(HEAD3 "dims: {d: batch}\n", 4, "batch", "dim 'd' must not depend on batch", NULL);
  expect_error_on(HEAD3 "dims: {batch: 2}\n", 4, "batch", "'batch' is the symbolic batch size", NULL);
  expect_error_on(HEAD3 "dims: {2d: 2}\n", 4, "2d", "'2d' is not a valid dim name", NULL);
  expect_error_on(HEAD3 "dims: {a: b, b: 2}\n", 4, "b,", "unknown dim 'b'", NULL); /* only earlier dims */
  expect_error_on(HEAD3 "dims: {d: 8}\ninputs: {x: [batch, d/3]}\n" TAIL_X, 5, "d|/3",
                  "inexact division: 8 is not divisible by 3", NULL);
  /* In a quoted scalar the column still points into the expression. */
  expect_error_on(HEAD3 "dims: {d: 8}\ninputs: {x: [batch, \"d/3\"]}\n" TAIL_X, 5, "d|/3", "inexact division", NULL);
  expect_error_on(HEAD3 "inputs: {x: [batch, e]}\n" TAIL_X, 4, "e]", "unknown dim 'e'", NULL);
  expect_error_on(HEAD3 "inputs: {x: []}\n" TAIL_X, 4, "[]", "must have 1 to 6 dims, got 0", NULL);
  expect_error_on(HEAD3 "inputs: {x: [1,2,3,4,5,6,7]}\n" TAIL_X, 4, "[1", "must have 1 to 6 dims, got 7", NULL);
  expect_error_on(HEAD3 "inputs: {x: [batch*1000000000, 1000000000]}\n" TAIL_X, 4, "x", "too large at batch 1",
                  NULL);
  /* below 2^48 bytes, as docs/SPEC.md says: 2^46 f32 elements are refused, one fewer are not */
  expect_error_on(HEAD3 "inputs: {x: [batch*65536, 1073741824]}\n" TAIL_X, 4, "x", "too large at batch 1",
                  "must stay below 281474976710656");
  hkc_spec_destroy(hk_test_spec_parse(HEAD3 "inputs: {x: [batch, 70368744177663]}\n" TAIL_X));
}

static void test_bad_values(void **state) {
  (void)state;
  expect_error_on("hkc: 1\nname: t\ndtype: f64\n", 3, "f64", "unknown dtype 'f64' (expected f32, f16 or bf16)", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: conv, in: [x], out: y}\noutputs: [y]\n", 8, "conv",
                  "unknown op 'conv'", "gemm, add");
  expect_error_on(BASE "graph:\n  - {name: a, op: gemm, in: [x, w], act: tanh, out: y}\noutputs: [y]\n", 8, "tanh",
                  "unknown act 'tanh'", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: gemm, in: [x, w], trans_b: yes, out: y}\noutputs: [y]\n", 8, "yes",
                  "expected true or false for 'trans_b', got 'yes'", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: rmsnorm, in: [x], gamma: g, eps: tiny, out: y}\noutputs: [y]\n", 8,
                  "tiny", "expected a finite number for 'eps'", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: rmsnorm, in: [x], gamma: g, eps: -1, out: y}\noutputs: [y]\n", 8,
                  "-1", "'eps' must not be negative", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: gemm, in: [x], out: y}\noutputs: [y]\n", 8, "[x]",
                  "op 'gemm' takes 2 inputs in 'in', got 1", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: attention, in: [x, x], heads: 1, out: y}\noutputs: [y]\n", 8, "[x",
                  "takes 1 (packed qkv) or 3 (q, k, v) inputs", NULL);
  expect_error_on("hkc: 2\n", 1, "2", "unsupported spec format version 2 (this hkc reads version 1)", NULL);
  expect_error_on("hkc: one\n", 1, "one", "expected an integer for 'hkc', got 'one'", NULL);
  expect_error_on("hkc: 1\nname: t\nbatch_sizes: [1, 0]\n", 3, "0", "'batch_sizes' must be between 1 and", NULL);
  expect_error_on("hkc: 1\nname: t\nbatch_sizes: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1, 17]\n", 3,
                  "17", "too many batch sizes (at most 16)", NULL);
  expect_error_on("hkc: 1\nname: t\nbatch_sizes: []\n", 3, "[]", "'batch_sizes' is empty", NULL);
  expect_error_on("hkc: 1\nname: a b\n", 2, "a b", "invalid spec name 'a b'", NULL);
  expect_error_on(BASE "graph:\n  - {name: a-b, op: relu, in: [x], out: y}\noutputs: [y]\n", 8, "a-b",
                  "'a-b' is not a valid node name", NULL);
  expect_error_on(BASE "targets: [\"cuda 12\"]\n" RELU_GRAPH, 7, "\"cuda", "invalid target name 'cuda 12'", NULL);
  expect_error_on(BASE "targets: []\n" RELU_GRAPH, 7, "[]", "'targets' is empty", NULL);
  expect_error_on(BASE RELU_GRAPH "fusion: greedy\n", 10, "greedy", "unknown fusion mode 'greedy'", NULL);
  expect_error_on("hkc: 1\nname: t\nbatch_sizes: [1]\nbatch_policy: round\n", 4, "round",
                  "unknown batch policy 'round' (expected pad or exact)", NULL);
  expect_error_on("hkc: 1\nname: t\nbatch_sizes: [1]\nbatch_policy: [pad]\n", 4, "[pad]",
                  "expected pad or exact for 'batch_policy', got a list", NULL);
}

/* batch_policy: pad (the default) needs batch in the leading dim only, of every tensor:
 * inputs, params and what nodes produce; exact accepts the same specs. */
static void test_pad_layouts(void **state) {
  (void)state;
#define PAD_HEAD "hkc: 1\nname: t\nbatch_sizes: [1, 8, 32]\n"
  static const char *const bad[][3] = {
      /* spec body, the token the error points at (line 4), the shape in the message */
      {"inputs: {x: [4, batch]}\n" RELU_GRAPH, "x", "'x' [4, batch]"},
      {"inputs: {x: [batch]}\n" RELU_GRAPH, "x", "'x' [batch]"},
      {"inputs: {x: [\"batch+1\", 8]}\n" RELU_GRAPH, "x", "'x' [1*batch+1, 8]"},
      {"inputs: {x: [batch, batch]}\n" RELU_GRAPH, "x", "'x' [batch, batch]"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, PAD_HEAD "%s", bad[i][0]);
    expect_error_on(text, 4, bad[i][1], bad[i][2], "cannot be padded");
    assert_non_null(strstr(diag, "use batch_policy: exact"));
    snprintf(text, sizeof text, PAD_HEAD "batch_policy: exact\n%s", bad[i][0]);
    hkc_spec_destroy(hk_test_spec_parse(text));
  }
  /* A param that depends on batch. */
  expect_error_on(PAD_HEAD "inputs: {x: [batch, 8]}\nparams: {p: [8, batch]}\n"
                  "graph:\n  - {name: a, op: add, in: [x, x], out: y}\noutputs: [y]\n",
                  5, "{|p:", "tensor 'p' [8, batch] cannot be padded", NULL);
  /* Leading inputs, but a node output with batch in its last dim (x @ x^T mixes rows):
   * reported where the node writes it. */
  expect_error_on(PAD_HEAD "inputs: {x: [batch, 8]}\n"
                  "graph:\n  - {name: s, op: gemm, in: [x, x], trans_b: true, out: sc}\n"
                  "  - {name: p, op: gemm, in: [sc, x], out: y}\noutputs: [y]\n",
                  6, "sc}", "tensor 'sc' [batch, batch] cannot be padded", NULL);
  /* Leading batch with a multiplier is fine, as are tensors that do not depend on batch. */
  hkc_spec_t *s = hk_test_spec_parse(PAD_HEAD "dims: {s: 3}\ninputs: {x: [\"s*batch\", 8], c: [8]}\n"
                                     "graph:\n  - {name: a, op: add, in: [x, c], out: y}\noutputs: [y]\n");
  assert_int_equal(s->batch_policy, HK_BATCH_POLICY_REC_PAD);
  hkc_spec_destroy(s);
#undef PAD_HEAD
}

static void test_empty_graph(void **state) {
  (void)state;
  expect_error_on(BASE "graph: []\noutputs: []\n", 7, "[]", "empty graph", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x], out: y}\noutputs: []\n", 9, "[]",
                  "'outputs' is empty", NULL);
  expect_error_on(HEAD3 "inputs: {}\n", 4, "{}", "'inputs' is empty", NULL);
}

static void test_outputs(void **state) {
  (void)state;
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x], out: y}\noutputs: [y, zz]\n", 9, "zz",
                  "output 'zz' is never produced", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x], out: y}\noutputs: [x]\n", 9, "x",
                  "graph input 'x' cannot be a graph output", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [x], out: y}\noutputs: [w]\n", 9, "w",
                  "param 'w' cannot be a graph output", NULL);
}

/* Quantized params: int8 / fp8_e4m3 with f32 scales, blocks, a dequant node per param before
 * its first gemm (the graph's node indices, producers and groups follow), and the errors. */
#define QHEAD "hkc: 1\nname: t\ndtype: bf16\nbatch_sizes: [1, 3]\ndims: {k: 80, n: 72}\ninputs: {x: [batch, k]}\n"
#define QGRAPH "graph:\n  - {name: r, op: relu, in: [x], out: xr}\n  - {name: g, op: gemm, in: [xr, w], out: y}\n" \
               "  - {name: h, op: gemm, in: [xr, w], out: z}\noutputs: [y, z]\n"
static void test_quantized_params(void **state) {
  (void)state;
  hkc_spec_t *s = parse(QHEAD "params:\n  w: {shape: [k, n], dtype: fp8_e4m3, scale: ws, block: [32, 32]}\n"
                              "  ws: {shape: [3, 3], dtype: f32}\n" QGRAPH
                              "fusion: {groups: [[g], [h]]}\n");
  assert_non_null(s);
  const hkc_tensor_t *w = tensor(s, "w"), *dq = tensor(s, "w_dequant");
  assert_int_equal(w->dtype, HK_DTYPE_FP8_E4M3);
  assert_int_equal(w->scale, hkc_tensor_find(s, "ws"));
  assert_int_equal(tensor(s, "ws")->dtype, HK_DTYPE_F32);
  assert_int_equal(w->block[0], 32);
  assert_int_equal(w->block[1], 32);
  assert_int_equal(dq->dtype, HK_DTYPE_BF16);
  assert_int_equal(dq->role, HK_ROLE_INTERMEDIATE);
  /* r, then the dequant node just before g, then g and h (both read the one copy) */
  assert_int_equal(s->n_nodes, 4);
  assert_string_equal(s->nodes[0].name, "r");
  assert_int_equal(s->nodes[1].op, HK_OP_DEQUANT);
  assert_int_equal(s->nodes[1].in[0], hkc_tensor_find(s, "w"));
  assert_int_equal(s->nodes[1].out, hkc_tensor_find(s, "w_dequant"));
  assert_int_equal(dq->producer, 1);
  for (int j = 2; j < 4; j++) {
    assert_int_equal(s->nodes[j].in[1], hkc_tensor_find(s, "w_dequant"));
    assert_int_equal(tensor(s, j == 2 ? "y" : "z")->producer, j);
  }
  assert_int_equal(tensor(s, "xr")->producer, 0);
  assert_int_equal(s->n_groups, 2);
  assert_int_equal(s->groups[0][0], 2);
  assert_int_equal(s->groups[1][0], 3);
  hkc_spec_destroy(s);
  /* default blocks: rows / scale_rows x cols / scale_cols; one scale */
  s = parse(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: ws}\n  ws: {shape: [1, n], dtype: f32}\n" QGRAPH);
  assert_non_null(s);
  assert_int_equal(tensor(s, "w")->block[0], 80);
  assert_int_equal(tensor(s, "w")->block[1], 1);
  hkc_spec_destroy(s);
  s = parse(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: ws}\n  ws: {shape: [1], dtype: f32}\n" QGRAPH);
  assert_non_null(s);
  assert_int_equal(tensor(s, "w")->block[0], 80);
  assert_int_equal(tensor(s, "w")->block[1], 72);
  hkc_spec_destroy(s);
  /* errors */
  expect_error_on(QHEAD "params:\n  w: {shape: [k, n], dtype: int8}\n" QGRAPH, 8, "int8",
                  "tensor 'w': dtype int8 needs 'scale: <the f32 param of its scales>'", NULL);
  expect_error_on(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: v}\n  v: [n]\n" QGRAPH, 8, "v}",
                  "tensor 'w': scale 'v' is not an f32 param", NULL);
  expect_error_on(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: ws}\n  ws: {shape: [7, n], dtype: f32}\n"
                  QGRAPH, 8, "ws}", "its scales 'ws' [7, 72] do not divide it evenly", "'block: [rows, cols]'");
  expect_error_on(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: ws, block: [32, 32]}\n"
                  "  ws: {shape: [2, 3], dtype: f32}\n" QGRAPH, 8, "ws,",
                  "tensor 'w' [80, 72] in blocks of 32 x 32 needs 3 x 3 scales; 'ws' is [2, 3]", NULL);
  expect_error_on(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: ws}\n  ws: {shape: [n], dtype: f32}\n"
                  QGRAPH, 8, "ws}", "expected [scale_rows, scale_cols] of positive sizes not depending on batch, or [1]", NULL);
  expect_error_on(QHEAD "params:\n  w: {shape: [k, n], scale: ws}\n  ws: {shape: [1], dtype: f32}\n" QGRAPH, 8,
                  "ws}", "tensor 'w': 'scale' belongs to a quantized param", NULL);
  expect_error_on(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: ws}\n  ws: {shape: [1], dtype: f32}\n"
                  "  u: {shape: [n], dtype: f32}\n" QGRAPH, 10, "u",
                  "tensor 'u': an f32 param in a bf16 spec must be the scales of a quantized param", NULL);
  expect_error_on(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: ws}\n  ws: {shape: [1], dtype: f32}\n"
                  "graph:\n  - {name: r, op: relu, in: [w], out: y}\noutputs: [y]\n", 11, "w]",
                  "node 'r': 'w' is a quantized (int8) param, which op 'relu' cannot take in 'in'", NULL);
  expect_error_on(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: ws}\n  ws: {shape: [1], dtype: f32}\n"
                  "graph:\n  - {name: g, op: gemm, in: [x, ws], out: y}\noutputs: [y]\n", 11, "ws]",
                  "node 'g': 'ws' is an f32 param, the scales of a quantized param, which no node reads", NULL);
  expect_error_on(QHEAD "params:\n  w: {shape: [batch, n], dtype: int8, scale: ws}\n  ws: {shape: [1], dtype: f32}\n"
                  QGRAPH, 8, "w:", "a quantized param is a matrix [rows, cols] of positive sizes that do not depend on batch", NULL);
  expect_error_on(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: ws}\n  ws: {shape: [1], dtype: f32}\n"
                  "graph:\n  - {name: g, op: gemm, in: [x, w], out: w_dequant}\noutputs: [w_dequant]\n", 11, "w_dequant}",
                  "tensor 'w_dequant': the name is taken by the dequantized copy of param 'w'", NULL);
  /* a huge quantized param: the block arithmetic does not overflow */
  expect_error_on(QHEAD "params:\n  w: {shape: [9223372036854775807, n], dtype: int8, scale: ws, block: [2, 72]}\n"
                  "  ws: {shape: [1], dtype: f32}\n" QGRAPH, 8, "ws,", "needs 4611686018427387904 x 1 scales", NULL);
  /* parts: scales per row only (a block may not straddle two parts) */
  s = parse(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: ws, parts: [a, b]}\n"
                  "  ws: {shape: [k, 1], dtype: f32, parts: [a_s, b_s]}\n" QGRAPH);
  assert_non_null(s);
  assert_int_equal(tensor(s, "w")->n_parts, 2);
  assert_int_equal(tensor(s, "ws")->n_parts, 2);
  hkc_spec_destroy(s);
  expect_error_on(QHEAD "params:\n  w: {shape: [k, n], dtype: int8, scale: ws, parts: [a, b]}\n"
                  "  ws: {shape: [10, 1], dtype: f32}\n" QGRAPH, 8, "ws,",
                  "a quantized param made of parts takes a scale per row", "not blocks of 8 rows");
}

/* Per-tensor dtype: {shape, dtype} declarations, i32 inputs only where an op takes them. */
#define I32HEAD "hkc: 1\nname: t\nbatch_sizes: [1, 3]\ndims: {s: 5}\n"
static void test_i32_inputs(void **state) {
  (void)state;
  hkc_spec_t *s = parse(I32HEAD "inputs: {x: {shape: [batch, s], dtype: f32}, ids: {shape: [batch], dtype: i32}}\n"
                                "graph:\n  - {name: a, op: relu, in: [x], out: y}\noutputs: [y]\n");
  assert_non_null(s);
  assert_int_equal(tensor(s, "x")->dtype, HK_DTYPE_F32);
  assert_int_equal(tensor(s, "ids")->dtype, HK_DTYPE_I32); /* [batch] is fine under pad: i32 */
  assert_int_equal(tensor(s, "ids")->rank, 1);
  assert_int_equal(hkc_dtype_size(HK_DTYPE_I32), 4);
  assert_string_equal(hkc_dtype_name(HK_DTYPE_I32), "i32");
  hkc_spec_destroy(s);
  expect_error_on(I32HEAD "inputs: {x: [batch, s], ids: {shape: [batch, s], dtype: i32}}\n"
                          "graph:\n  - {name: a, op: add, in: [x, ids], out: y}\noutputs: [y]\n",
                  7, "ids]", "node 'a': 'ids' is an i32 tensor, which op 'add' cannot take in 'in'", NULL);
  expect_error_on(I32HEAD "inputs: {x: [batch, s]}\nparams: {p: {shape: [s], dtype: i32}}\n"
                          "graph:\n  - {name: a, op: add, in: [x, p], out: y}\noutputs: [y]\n",
                  6, "i32", "tensor 'p': only inputs may be i32", NULL);
  expect_error_on(I32HEAD "inputs: {x: {shape: [batch, s], dtype: f16}}\n"
                          "graph:\n  - {name: a, op: relu, in: [x], out: y}\noutputs: [y]\n",
                  5, "f16", "tensor 'x': dtype 'f16' (expected the spec's dtype f32, i32 for an input", NULL);
  expect_error_on(I32HEAD "inputs: {x: {dtype: i32}}\ngraph:\n  - {name: a, op: relu, in: [x], out: y}\noutputs: [y]\n",
                  5, "{dtype", "tensor 'x': missing required key 'shape'", NULL);
  /* embedding: i32 ids, [vocab, hidden] table, positions covering the sequence */
  s = parse(I32HEAD "inputs: {ids: {shape: [batch, s], dtype: i32}}\nparams: {t: [11, 6], p: [5, 6]}\n"
                    "graph:\n  - {name: e, op: embedding, in: [ids, t], pos: p, out: y}\noutputs: [y]\n");
  assert_non_null(s);
  assert_int_equal(s->nodes[0].op, HK_OP_EMBEDDING);
  assert_int_equal(s->nodes[0].pos, hkc_tensor_find(s, "p"));
  assert_int_equal(tensor(s, "y")->rank, 3);
  assert_int_equal(dim_at(tensor(s, "y"), 2, 1), 6);
  hkc_spec_destroy(s);
  expect_error_on(I32HEAD "inputs: {x: [batch, s]}\nparams: {t: [11, 6]}\n"
                          "graph:\n  - {name: e, op: embedding, in: [x, t], out: y}\noutputs: [y]\n",
                  8, "x,", "node 'e': 'x' must be an i32 tensor", NULL);
  expect_error_on(I32HEAD "inputs: {ids: {shape: [batch, s], dtype: i32}}\nparams: {t: [11, 6], p: [4, 6]}\n"
                          "graph:\n  - {name: e, op: embedding, in: [ids, t], pos: p, out: y}\noutputs: [y]\n",
                  8, "p,", "position table 'p' is [4, 6], expected [max_pos, 6] with max_pos >= the sequence length", NULL);
  /* attention lengths [batch] i32, mask [batch, 1|heads, s, skv] */
  s = parse(I32HEAD "inputs: {q: [batch, s, 8], l: {shape: [batch], dtype: i32}, m: [batch, 2, s, s]}\n"
                    "graph:\n  - {name: a, op: attention, in: [q, q, q], heads: 2, lengths: l, mask: m, out: y}\n"
                    "outputs: [y]\n");
  assert_non_null(s);
  assert_int_equal(s->nodes[0].lengths, hkc_tensor_find(s, "l"));
  assert_int_equal(s->nodes[0].mask, hkc_tensor_find(s, "m"));
  hkc_spec_destroy(s);
  expect_error_on(I32HEAD "inputs: {q: [batch, s, 8], l: {shape: [batch, s], dtype: i32}}\n"
                          "graph:\n  - {name: a, op: attention, in: [q, q, q], heads: 2, lengths: l, out: y}\noutputs: [y]\n",
                  7, "l,", "node 'a': lengths 'l' is [batch, 5], expected [batch]", NULL);
  expect_error_on(I32HEAD "inputs: {q: [batch, s, 8], l: [batch]}\nbatch_policy: exact\n"
                          "graph:\n  - {name: a, op: attention, in: [q, q, q], heads: 2, lengths: l, out: y}\noutputs: [y]\n",
                  8, "l,", "node 'a': 'l' must be an i32 tensor", NULL);
  expect_error_on(I32HEAD "inputs: {q: [batch, s, 8], m: [batch, 3, s, s]}\n"
                          "graph:\n  - {name: a, op: attention, in: [q, q, q], heads: 2, mask: m, out: y}\noutputs: [y]\n",
                  7, "m,", "node 'a': mask 'm' is [batch, 3, 5, 5], expected [batch, 1 or heads (2), seq_q, seq_kv]", NULL);
  expect_error_on(I32HEAD "inputs: {x: [batch, s, 8], l: {shape: [batch], dtype: i32}}\n"
                          "graph:\n  - {name: a, op: relu, in: [x], lengths: l, out: y}\noutputs: [y]\n",
                  7, "lengths", "unknown key 'lengths' for op 'relu'", NULL);
  expect_error_on(I32HEAD "inputs: {x: {shape: [s], dtyp: i32}}\ngraph:\n  - {name: a, op: relu, in: [x], out: y}\n"
                          "outputs: [y]\n",
                  5, "dtyp", "unknown key 'dtyp' for tensor 'x' (valid keys: shape, dtype)", NULL);
}

static void test_unused_tensor_warning(void **state) {
  (void)state;
  hkc_spec_t *s = hk_test_spec_parse(BASE "graph:\n  - {name: a, op: relu, in: [x], out: y}\n"
                                          "  - {name: b, op: gelu, in: [x], out: z}\noutputs: [y]\n");
  assert_non_null(strstr(hk_test_spec_diag(), "t.yaml:9:39: warning: tensor 'z' is never used and is not an output"));
  assert_null(strstr(hk_test_spec_diag(), "tensor 'y' is never used"));
  assert_int_equal(tensor(s, "z")->role, HK_ROLE_INTERMEDIATE);
  hkc_spec_destroy(s);
}

static void test_fusion_groups(void **state) {
  (void)state;
#define TWO BASE "graph:\n  - {name: a, op: relu, in: [x], out: y}\n  - {name: b, op: gelu, in: [y], out: z}\noutputs: [z]\n"
  expect_error_on(TWO "fusion: {groups: [[a, c]]}\n", 11, "c]", "fusion group names unknown node 'c'", NULL);
  expect_error_on(TWO "fusion: {groups: [[a, b], [b]]}\n", 11, "[|b]]",
                  "node 'b' is in more than one fusion group (first at 11:23)", NULL);
  expect_error_on(TWO "fusion: {groups: [[]]}\n", 11, "[|[]", "empty fusion group", NULL);
  expect_error_on(TWO "fusion: {groups: [a, b]}\n", 11, "a,", "expected a list of node names for 'groups', got 'a'",
                  NULL);
  expect_error_on(TWO "fusion: {}\n", 11, "{}", "fusion: missing required key 'groups'", NULL);
#undef TWO
}

/* gemm's `mul:` (the epilogue multiply, shaped like the output) and group locations. */
static void test_gemm_mul_and_group_locations(void **state) {
  (void)state;
  hkc_spec_t *s = hk_test_spec_parse("hkc: 1\nname: t\nbatch_sizes: [2]\ninputs: {x: [batch, 4], m: [batch, 6]}\n"
                                     "params: {w: [4, 6]}\n"
                                     "graph:\n"
                                     "  - {name: g, op: gemm, in: [x, w], act: silu, mul: m, out: y}\n"
                                     "  - {name: r, op: relu, in: [y], out: z}\n"
                                     "outputs: [z]\n"
                                     "fusion:\n  groups:\n    - [g]\n    - [r]\n");
  assert_int_equal(s->nodes[0].mul, hkc_tensor_find(s, "m"));
  assert_int_equal(s->nodes[0].act, HK_ACT_SILU);
  assert_int_equal(s->nodes[1].mul, HKC_NONE);
  assert_int_equal(s->n_groups, 2);
  assert_non_null(s->group_locs);
  assert_string_equal(s->group_locs[1].file, "t.yaml");
  assert_int_equal(s->group_locs[0].line, 12);
  assert_int_equal(s->group_locs[0].col, 7);
  assert_int_equal(s->group_locs[1].line, 13);
  hkc_spec_destroy(s);
}

static void test_yaml_syntax_error(void **state) {
  (void)state;
  expect_error_at("hkc: 1\nname: [unclosed\n", 3, 1, "YAML syntax error: did not find expected ',' or ']'",
                  "while parsing a flow sequence at 2:7");
  expect_error_on("hkc: 1\n  name: t\n", 2, ":", "YAML syntax error: mapping values are not allowed", NULL);
  expect_error_on("hkc: 1\nname: \"t\\q\"\n", 2, "\\q", "YAML syntax error", "escape");
  expect_error_on("a: &x 1\nb: *x\n", 2, "*x", "YAML aliases (*x) are not supported", NULL);
  expect_error_at("hkc: 1\n---\nhkc: 1\n", 2, 1, "one YAML document", NULL);
  expect_error_on("hkc: 1\nname: \"a\\0b\"\n", 2, "\"", "NUL character", NULL);
  /* Invalid UTF-8 is a reader error: libyaml gives a byte offset, reported as FILE:LINE:COL
   * (columns count characters, as libyaml's marks do). */
  expect_error_at("hkc: 1\nname: \xff\n", 2, 7, "YAML error: invalid leading UTF-8 octet (byte 13", NULL);
  expect_error_at("hkc: 1\nname: \xc3\xa9\xff\n", 2, 8, "invalid leading UTF-8 octet", NULL);
  /* Deep nesting stops at the tree's depth limit (64 levels). */
  char deep[300];
  memset(deep, '[', 200);
  deep[200] = '\0';
  expect_error_at(deep, 1, 65, "YAML nested too deeply", NULL);
}

static void test_wrong_node_types(void **state) {
  (void)state;
  expect_error_on("hkc: 1\nname: t\nbatch_sizes: {a: 1}\n", 3, "{",
                  "expected a list of batch sizes for 'batch_sizes', got a map", NULL);
  expect_error_on("hkc: 1\nname: [t]\n", 2, "[", "expected a string for 'name', got a list", NULL);
  expect_error_at("hkc: 1\nname:\nbatch_sizes: [1]\n", 2, 6, "expected a string for 'name', got nothing (null)", NULL);
  expect_error_on(BASE "graph: {a: 1}\n", 7, "{", "expected a list of nodes for 'graph', got a map", NULL);
  expect_error_on(BASE "graph:\n  - relu\n", 8, "relu", "expected a node map", "got 'relu'");
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: x, out: y}\noutputs: [y]\n", 8, "x,",
                  "expected a list of tensor names for 'in', got 'x'", NULL);
  expect_error_on(BASE "graph:\n  - {name: a, op: relu, in: [[x]], out: y}\noutputs: [y]\n", 8, "[|[x]",
                  "expected a name for 'tensor', got a list", NULL);
  expect_error_on(HEAD3 "inputs: {x: batch}\n", 4, "batch", "expected a shape list", NULL);
  expect_error_on(HEAD3 "inputs: {x: [[1]]}\n", 4, "[|[1]", "expected a dimension", NULL);
  expect_error_on(HEAD3 "inputs: [x]\n", 4, "[", "expected a map of tensor names to shapes", NULL);
  expect_error_at("hkc: 1\n[a]: 1\n", 2, 1, "map keys must be strings, got a list", NULL);
  expect_error_at("- 1\n", 1, 1, "a spec must be a map", NULL);
  hkc_spec_t *s = parse("# nothing here\n");
  assert_null(s);
  assert_non_null(strstr(diag, "t.yaml: empty spec"));
}

static void test_missing_file(void **state) {
  (void)state;
  hkc_spec_t *s = (hkc_spec_t *)(uintptr_t)1;
  hkc_diag_capture(diag, sizeof diag);
  assert_int_equal(hkc_spec_load("/nonexistent/dir/m.yaml", &s), -1);
  hkc_diag_capture(NULL, 0);
  assert_null(s);
  assert_string_equal(diag, "/nonexistent/dir/m.yaml: No such file or directory\n");
}

/* ---- repeat: -------------------------------------------------------------------------- */
/* Lines 1-5, then `graph:` on line 6; repeats below start on line 7. */
#define RBASE                                  \
  "hkc: 1\n"                                   \
  "name: t\n"                                  \
  "batch_sizes: [1]\n"                         \
  "dims: {d: 8, n: 3}\n"                       \
  "inputs: {x: [batch, d]}\n"                  \
  "graph:\n"

static void test_repeat_expansion(void **state) {
  (void)state;
  hkc_spec_t *s = parse(RBASE
                        "  - repeat:\n"                                                   /* 7 */
                        "      count: n\n"                                                /* 8 */
                        "      in: h\n"                                                   /* 9 */
                        "      out: y\n"                                                  /* 10 */
                        "      params: {\"l{i}_w\": [d, d], g: [d]}\n"                    /* 11 */
                        "      body:\n"                                                   /* 12 */
                        "        - {name: nrm, op: rmsnorm, in: [h], gamma: g, out: t}\n" /* 13 */
                        "        - {name: 'fc{i}', op: gemm, in: [t, 'l{i}_w'], residual: h, out: y}\n"
                        "  - {name: pre, op: relu, in: [x], out: h}\n"
                        "  - {name: post, op: relu, in: [y], out: z}\n"
                        "outputs: [z]\n");
  if (!s) fail_msg("%s", diag);
  assert_string_equal(diag, "");
  /* params: per layer, in layer order, named by {i} or NAME_k */
  assert_int_equal(s->n_tensors, 1 + 6 + 1 + 6 + 1);
  const char *params[] = {"l0_w", "g_0", "l1_w", "g_1", "l2_w", "g_2"};
  for (int i = 0; i < 6; i++) {
    assert_string_equal(s->tensors[1 + i].name, params[i]);
    assert_int_equal(s->tensors[1 + i].role, HK_ROLE_PARAM);
  }
  assert_int_equal(tensor(s, "l1_w")->loc.line, 11); /* the declaration in the repeat */
  assert_int_equal(s->n_nodes, 2 + 3 * 2);
  /* the chain: pre -> layer 0 reads h -> y_0 -> layer 1 -> y_1 -> layer 2 writes y -> post */
  const char *nodes[] = {"pre", "nrm_0", "fc0", "nrm_1", "fc1", "nrm_2", "fc2", "post"};
  for (int i = 0; i < 8; i++) assert_string_equal(s->nodes[i].name, nodes[i]);
  assert_int_equal(s->nodes[1].in[0], hkc_tensor_find(s, "h"));
  assert_int_equal(s->nodes[1].gamma, hkc_tensor_find(s, "g_0"));
  assert_int_equal(s->nodes[2].in[0], hkc_tensor_find(s, "t_0"));
  assert_int_equal(s->nodes[2].in[1], hkc_tensor_find(s, "l0_w"));
  assert_int_equal(s->nodes[2].residual, hkc_tensor_find(s, "h"));
  assert_int_equal(s->nodes[2].out, hkc_tensor_find(s, "y_0"));
  assert_int_equal(s->nodes[3].in[0], hkc_tensor_find(s, "y_0"));
  assert_int_equal(s->nodes[4].residual, hkc_tensor_find(s, "y_0"));
  assert_int_equal(s->nodes[4].out, hkc_tensor_find(s, "y_1"));
  assert_int_equal(s->nodes[6].in[1], hkc_tensor_find(s, "l2_w"));
  assert_int_equal(s->nodes[6].out, hkc_tensor_find(s, "y"));
  assert_int_equal(s->nodes[7].in[0], hkc_tensor_find(s, "y"));
  /* every copy keeps the body's location */
  assert_int_equal(s->nodes[5].loc.line, 13);
  assert_int_equal(s->nodes[1].loc.line, 13);
  assert_int_equal(tensor(s, "t_2")->loc.line, 13);
  hkc_spec_destroy(s);

  /* count 1, a custom variable, params added to an existing map, attribute values substituted */
  s = parse(RBASE
            "  - repeat:\n"
            "      count: 1\n"
            "      var: layer\n"
            "      in: x\n"
            "      out: y\n"
            "      params: {'w{layer}': [d, d]}\n"
            "      body: [{name: fc, op: gemm, in: [x, 'w{layer}'], out: y}]\n"
            "params: {b: [d]}\n"
            "outputs: [y]\n");
  if (!s) fail_msg("%s", diag);
  assert_string_equal(s->tensors[1].name, "b");
  assert_string_equal(s->tensors[2].name, "w0");
  assert_string_equal(s->nodes[0].name, "fc_0");
  assert_int_equal(s->nodes[0].out, hkc_tensor_find(s, "y"));
  hkc_spec_destroy(s);
}

static void test_repeat_errors(void **state) {
  (void)state;
#define R1(body) RBASE "  - repeat: {count: 2, in: x, out: y, body: [" body "]}\noutputs: [y]\n"
  expect_error_on(RBASE "  - repeat: {count: 0, in: x, out: y, body: [{name: a, op: relu, in: [x], out: y}]}\n"
                        "outputs: [y]\n",
                  7, "0,", "'count' must be between 1 and 4096", NULL);
  expect_error_on(RBASE "  - repeat: {count: 5000, in: x, out: y, body: [{name: a, op: relu, in: [x], out: y}]}\n"
                        "outputs: [y]\n",
                  7, "5000", "'count' must be between", NULL);
  expect_error_on(RBASE "  - repeat: {count: q, in: x, out: y, body: [{name: a, op: relu, in: [x], out: y}]}\n"
                        "outputs: [y]\n",
                  7, "q,", "repeat count 'q' is not a dim", NULL);
  expect_error_on(RBASE "  - repeat: {count: 2, in: x, out: y, body: [{name: 'a{j}', op: relu, in: [x], out: y}]}\n"
                        "outputs: [y]\n",
                  7, "'a{j}'", "'{j}' in 'a{j}' is not this repeat's variable", "{i}");
  expect_error_on(R1("{name: a, op: relu, in: ['x{i'], out: y}"), 7, "'x{i'", "'{i' in 'x{i'", NULL);
  expect_error_on(R1("{repeat: {count: 2}}"), 7, "repeat: {count: 2}}]", "a repeat inside a repeat body is not supported",
                  NULL);
  expect_error_on(R1("{name: a, op: relu, in: [x], out: q}"), 7, "[{name", "no node of the repeat body writes out: y",
                  NULL);
  expect_error_on(R1("{name: a, op: relu, in: [x], out: x}"), 7, "x}]", "writes 'x', the repeat's in", NULL);
  expect_error_on(RBASE "  - repeat: {count: 2, in: x, body: [{name: a, op: relu, in: [x], out: y}]}\noutputs: [y]\n",
                  7, "{count", "repeat: missing required key 'out'", NULL);
  expect_error_on(RBASE "  - repeat: {count: 2, in: x, out: x, body: [{name: a, op: relu, in: [x], out: y}]}\n"
                        "outputs: [y]\n",
                  7, "x, body", "'out' must differ from 'in'", NULL);
  expect_error_on(RBASE "  - repeat: {count: 2, in: x, out: y, times: 3, body: [{name: a, op: relu, in: [x], out: y}]}\n"
                        "outputs: [y]\n",
                  7, "times", "unknown key 'times' in repeat", "count, var, in, out, params, body");
  expect_error_on(RBASE "  - {repeat: {count: 2, in: x, out: y, body: [{name: a, op: relu, in: [x], out: y}]}, op: relu}\n"
                        "outputs: [y]\n",
                  7, "op: relu}", "unknown key 'op' beside 'repeat'", NULL);
  expect_error_on(R1(""), 7, "[]", "empty repeat body", NULL);
  /* errors inside a copy point at the body; the names say which layer */
  expect_error_on(R1("{name: a, op: gemm, in: [x, nope], out: y}"), 7, "nope]", "node 'a_0': undefined tensor 'nope'",
                  NULL);
  expect_error_on(R1("{name: a, op: relu, in: [x], out: t}, {name: b, op: gemm, in: [t, t], out: y}"), 7,
                  "[t, |t]", "node 'b_0'", "'t_0'");
  /* a per-layer param without {i} is renamed NAME_k: here it collides with a top-level param */
  expect_error_on(RBASE "  - repeat: {count: 2, in: x, out: y, params: {w: [d, d]},"
                        " body: [{name: a, op: gemm, in: [x, w], out: y}]}\n"
                        "outputs: [y]\n"
                        "params: {w_1: [d, d]}\n",
                  7, "w: [d, d]}", "duplicate tensor name 'w_1'", NULL);
#undef R1
}

/* ---- parts: -------------------------------------------------------------------------------- */
/* Lines 1-5; params on line 6 and 7. */
#define PBASE                                  \
  "hkc: 1\n"                                   \
  "name: t\n"                                  \
  "batch_sizes: [1]\n"                         \
  "dims: {d: 8}\n"                             \
  "inputs: {x: [batch, d]}\n"
#define P(w_decl)                                                                                    \
  PBASE "params:\n  w: " w_decl "\ngraph:\n  - {name: p, op: gemm, in: [x, w], trans_b: true, out: y}\n" \
        "outputs: [y]\n"

static void test_parts(void **state) {
  (void)state;
  hkc_spec_t *s = parse(PBASE "params:\n"
                              "  w: {shape: [3*d, d], parts: [l.q.weight, l.k.weight, l.v.weight]}\n"
                              "  b: {shape: [3*d], parts: [l.q.bias, l.k.bias, l.v.bias], dtype: f32}\n"
                              "graph:\n"
                              "  - {name: p, op: gemm, in: [x, w], trans_b: true, bias: b, out: y}\n"
                              "outputs: [y]\n");
  if (!s) fail_msg("%s", diag);
  const hkc_tensor_t *w = tensor(s, "w"), *b = tensor(s, "b");
  assert_int_equal(w->n_parts, 3);
  assert_string_equal(w->parts[0], "l.q.weight");
  assert_string_equal(w->parts[1], "l.k.weight");
  assert_string_equal(w->parts[2], "l.v.weight");
  assert_int_equal(dim_at(w, 0, 1), 24);
  assert_int_equal(b->n_parts, 3);
  assert_string_equal(b->parts[2], "l.v.bias");
  assert_int_equal(tensor(s, "x")->n_parts, 0);
  assert_null(tensor(s, "x")->parts);
  hkc_spec_destroy(s);

  /* in a repeat: {i} in the part names is the layer number */
  s = parse(RBASE "  - repeat:\n"
                  "      count: 2\n"
                  "      in: x\n"
                  "      out: y\n"
                  "      params: {w: {shape: [d, d], parts: [\"m.{i}.a\", \"m.{i}.b\"]}}\n"
                  "      body: [{name: a, op: gemm, in: [x, w], trans_b: true, out: y}]\n"
                  "outputs: [y]\n");
  if (!s) fail_msg("%s", diag);
  const char *want[2][2] = {{"m.0.a", "m.0.b"}, {"m.1.a", "m.1.b"}};
  for (int k = 0; k < 2; k++) {
    const hkc_tensor_t *t = tensor(s, k ? "w_1" : "w_0");
    assert_int_equal(t->n_parts, 2);
    assert_string_equal(t->parts[0], want[k][0]);
    assert_string_equal(t->parts[1], want[k][1]);
  }
  hkc_spec_destroy(s);

  /* errors, at the place in the file */
  expect_error_on(P("{shape: [3*d, d], parts: []}"), 7, "[]", "tensor 'w': 'parts' must list 1 to 64", "got 0");
  expect_error_on(P("{shape: [batch, d], parts: [a.q, a.k]}"), 7, "[a.q", "tensor 'w': a param with 'parts' must not "
                  "depend on batch", "dimension 0");
  expect_error_on(P("{shape: [3*d, d], parts: [a.q, a.k, a.q]}"), 7, "a.q]", "part 'a.q' is listed twice",
                  "first at 7:32");
  expect_error_on(P("{shape: [3*d, d], parts: [a.q, x]}"), 7, "x]", "part 'x' is the name of input 'x'", NULL);
  expect_error_on(P("{shape: [3*d, d], parts: [w]}"), 7, "w]", "part 'w' is the name of param 'w'", NULL);
  expect_error_on(P("{shape: [3*d, d], parts: [a/b]}"), 7, "a/b", "part 'a/b' is not a valid checkpoint tensor name",
                  NULL);
  expect_error_on(P("{shape: [3*d, d], parts: [.a]}"), 7, ".a]", "not a valid checkpoint tensor name", NULL);
  expect_error_on(P("{shape: [3*d, d], parts: a.q}"), 7, "a.q}", "expected a list of checkpoint tensor names",
                  "'parts'");
  expect_error_on(P("{shape: [3*d, d], part: [a.q]}"), 7, "part:", "unknown key 'part'",
                  "valid keys: shape, dtype, parts");
  expect_error_on("hkc: 1\nname: t\nbatch_sizes: [1]\ndims: {d: 8}\n"
                  "inputs: {x: {shape: [batch, d], parts: [a.x]}}\n"
                  "graph:\n  - {name: p, op: relu, in: [x], out: y}\noutputs: [y]\n",
                  5, "parts", "tensor 'x': only params may have 'parts'", NULL);
  /* a name too long (256 bytes) and too many parts (65) */
  char text[8192], list[2048];
  char long_name[300];
  memset(long_name, 'a', 256);
  long_name[256] = '\0';
  snprintf(text, sizeof text, P("{shape: [3*d, d], parts: [%s]}"), long_name);
  expect_error_at(text, 7, 32, "is not a valid checkpoint tensor name", "1 to 255 bytes");
  size_t used = 0;
  for (int i = 0; i < 65; i++) used += (size_t)snprintf(list + used, sizeof list - used, "%sp%d", i ? ", " : "", i);
  snprintf(text, sizeof text, P("{shape: [3*d, d], parts: [%s]}"), list);
  expect_error_at(text, 7, 31, "'parts' must list 1 to 64 checkpoint tensors", "got 65");
  /* 64 is fine */
  used = 0;
  for (int i = 0; i < 64; i++) used += (size_t)snprintf(list + used, sizeof list - used, "%sp%d", i ? ", " : "", i);
  snprintf(text, sizeof text, P("{shape: [3*d, d], parts: [%s]}"), list);
  s = parse(text);
  if (!s) fail_msg("%s", diag);
  assert_int_equal(tensor(s, "w")->n_parts, 64);
  assert_string_equal(tensor(s, "w")->parts[63], "p63");
  hkc_spec_destroy(s);
}
#undef P

/* ---- generation: state, the KV-cache ops, take_rows, argmax, rope/embedding ctx ---------------
 * Lines 1-5 of these specs, then `state` on line 6, "graph:" on 7, nodes from line 8. */
#define GEN_HEAD                                                                                            \
  "hkc: 1\nname: g\nbatch_sizes: [1, 8]\ndims: {l: 2, s: 3, m: 16}\n"                                        \
  "inputs: {qkv: [batch, 32], x3: [batch, 2, 32], f1: [8], ctx: {shape: [batch], dtype: i32}, "            \
  "slot: {shape: [batch], dtype: i32}, rows: {shape: [s], dtype: i32}, c2: {shape: [batch, 2], dtype: i32}}\n"
#define GEN_STATE "state: {kc: [l, s, m, 8], vc: [l, s, m, 8]}\n"
#define GEN(state, graph, outputs) GEN_HEAD state "graph:\n" graph "outputs: " outputs "\n"
#define KV_KEYS "heads: 2, kv_heads: 1, k_cache: kc, v_cache: vc, ctx: ctx, slot: slot"
#define KVA(in, keys) "  - {name: a, op: kv_append, in: [" in "], " keys ", out: q}\n"
#define KVT(in, keys) "  - {name: b, op: kv_attention, in: [" in "], " keys ", out: o}\n"
#define APPEND(extra) KVA("qkv", KV_KEYS extra)
#define ATTEND(in, extra) KVT(in, KV_KEYS extra)

static void test_state(void **state) {
  (void)state;
  hkc_spec_t *s = parse(GEN("state: {kc: [l, s, m, 8], vc: {shape: [l, s, m, 8], dtype: f32}}\n",
                            APPEND("") ATTEND("q", ""), "[o]"));
  if (!s) fail_msg("%s", diag);
  /* inputs, then state, then node outputs */
  assert_int_equal(hkc_tensor_find(s, "kc"), 7);
  assert_int_equal(hkc_tensor_find(s, "vc"), 8);
  assert_int_equal(hkc_tensor_find(s, "q"), 9);
  const hkc_tensor_t *kc = tensor(s, "kc");
  assert_int_equal(kc->role, HK_ROLE_STATE);
  assert_int_equal(tensor(s, "vc")->role, HK_ROLE_STATE);
  assert_int_equal(kc->dtype, HK_DTYPE_F32);
  assert_int_equal(kc->producer, HKC_NONE);
  assert_int_equal(kc->rank, 4);
  assert_int_equal(dim_at(kc, 0, 8), 2);
  assert_int_equal(dim_at(kc, 2, 8), 16);
  assert_int_equal(kc->loc.line, 6);
  assert_null(strstr(diag, "tensor 'kc' is never used"));
  hkc_spec_destroy(s);
  /* a state tensor no node reads warns like an unused param */
  s = parse(GEN("state: {kc: [l, s, m, 8], vc: [l, s, m, 8], spare: [4]}\n", APPEND(""), "[q]"));
  if (!s) fail_msg("%s", diag);
  assert_non_null(strstr(diag, "warning: tensor 'spare' is never used"));
  hkc_spec_destroy(s);

  expect_error_on(GEN("state: {kc: [batch, s, m, 8], vc: [l, s, m, 8]}\n", APPEND(""), "[q]"), 6, "kc",
                  "tensor 'kc' [batch, 3, 16, 8]: a state tensor must not depend on batch (dimension 0 does)", NULL);
  expect_error_on(GEN("state: {kc: {shape: [l, s, m, 8], dtype: i32}, vc: [l, s, m, 8]}\n", APPEND(""), "[q]"), 6,
                  "i32", "tensor 'kc': only inputs may be i32", "state tensors have the spec's dtype f32");
  expect_error_on(GEN("state: {kc: {shape: [l, s, m, 8], dtype: f16}, vc: [l, s, m, 8]}\n", APPEND(""), "[q]"), 6,
                  "f16", "tensor 'kc': dtype 'f16' (expected the spec's dtype f32", NULL);
  /* FP8 KV caches: fp8_e4m3 state, both caches alike; int8 is a param's only */
  s = parse(GEN("state: {kc: {shape: [l, s, m, 8], dtype: fp8_e4m3}, vc: {shape: [l, s, m, 8], dtype: fp8_e4m3}}\n",
                APPEND("") ATTEND("q", ""), "[o]"));
  if (!s) fail_msg("%s", diag);
  assert_int_equal(tensor(s, "kc")->dtype, HK_DTYPE_FP8_E4M3);
  {
    hkc_kernel_key_t key;
    hkc_arg_t args[HKC_MAX_ARGS];
    for (size_t j = 0; j < 2; j++) { /* kv_append and kv_attention keys say so */
      assert_true(hkc_lower_node(s, j, 8, &key, args) > 0);
      assert_true(hkc_kv_fp8(&key));
    }
  }
  hkc_spec_destroy(s);
  expect_error_on(GEN("state: {kc: {shape: [l, s, m, 8], dtype: fp8_e4m3}, vc: [l, s, m, 8]}\n", APPEND(""), "[q]"), 8,
                  "v_cache: |vc", "node 'a': v_cache 'vc' is f32 and k_cache 'kc' fp8_e4m3: the caches share a dtype",
                  NULL);
  expect_error_on(GEN("state: {kc: {shape: [l, s, m, 8], dtype: int8}, vc: [l, s, m, 8]}\n", APPEND(""), "[q]"), 6,
                  "int8", "tensor 'kc': dtype 'int8' (expected the spec's dtype f32", "fp8_e4m3 for a state tensor");
  expect_error_on(GEN("state: {kc: {shape: [l, s, m, 8], parts: [a.b]}, vc: [l, s, m, 8]}\n", APPEND(""), "[q]"), 6,
                  "parts", "tensor 'kc': only params may have 'parts'", NULL);
  expect_error_on(GEN("state: [kc]\n", APPEND(""), "[q]"), 6, "[kc]",
                  "expected a map of tensor names to shapes for 'state'", NULL);
  expect_error_on(GEN("state: {qkv: [4]}\n", APPEND(""), "[q]"), 6, "qkv", "duplicate tensor name 'qkv'", NULL);
  expect_error_on(GEN(GEN_STATE, APPEND(""), "[q, kc]"), 9, "kc", "state tensor 'kc' cannot be a graph output", NULL);
  /* state goes only to kv_append's and kv_attention's caches, which take only state */
  expect_error_on(GEN(GEN_STATE, "  - {name: r, op: relu, in: [kc], out: y}\n", "[y]"), 8, "kc]",
                  "node 'r': 'kc' is a state tensor, which op 'relu' cannot take in 'in'", "only kv_append and kv_attention");
  expect_error_on(GEN(GEN_STATE, KVA("qkv", "heads: 2, kv_heads: 1, k_cache: qkv, v_cache: vc, ctx: ctx, slot: slot"),
                      "[q]"),
                  8, "k_cache: |qkv", "node 'a': k_cache 'qkv' must be a state tensor", "under 'state:'");
  expect_error_on(GEN(GEN_STATE, KVA("qkv", "heads: 2, k_cache: kc, v_cache: vc, ctx: ctx"), "[q]"), 8, "{",
                  "node 'a': missing required key 'slot'", NULL);
}

static void test_kv_ops(void **state) {
  (void)state;
  hkc_spec_t *s = parse(GEN(GEN_STATE,
                APPEND("") ATTEND("q", ", layer: 1, window: 4, scale: 0.5")
                "  - {name: b2, op: kv_attention, in: [q], " KV_KEYS ", out: o2}\n",
                "[o, o2]"));
  if (!s) fail_msg("%s", diag);
  const hkc_node_t *a = &s->nodes[0], *b = &s->nodes[1], *b2 = &s->nodes[2];
  assert_int_equal(a->op, HK_OP_KV_APPEND);
  assert_int_equal(a->heads, 2);
  assert_int_equal(a->kv_heads, 1);
  assert_int_equal(a->layer, 0); /* default */
  assert_int_equal(a->k_cache, hkc_tensor_find(s, "kc"));
  assert_int_equal(a->v_cache, hkc_tensor_find(s, "vc"));
  assert_int_equal(a->ctx, hkc_tensor_find(s, "ctx"));
  assert_int_equal(a->slot, hkc_tensor_find(s, "slot"));
  const hkc_tensor_t *q = tensor(s, "q"), *o = tensor(s, "o");
  assert_int_equal(q->rank, 2);
  assert_true(q->dims[0].mul == 1 && q->dims[0].add == 0);
  assert_int_equal(dim_at(q, 1, 1), 16); /* the q heads: 2 of 8 */
  assert_int_equal(b->op, HK_OP_KV_ATTENTION);
  assert_int_equal(b->layer, 1);
  assert_int_equal(b->window, 4);
  assert_true(b->has_scale && b->scale == 0.5f);
  assert_int_equal(b2->window, 0);
  assert_false(b2->has_scale);
  assert_true(fabsf(b2->scale - 1.0f / sqrtf(8.0f)) < 1e-7f); /* 1/sqrt(head_dim) */
  assert_int_equal(o->rank, 2);
  assert_int_equal(dim_at(o, 1, 1), 16);
  hkc_spec_destroy(s);
  /* kv_heads defaults to heads: 2 + 2*2 = 6 heads, which do not divide the 32 columns */
  expect_error_on(GEN(GEN_STATE, KVA("qkv", "heads: 2, k_cache: kc, v_cache: vc, ctx: ctx, slot: slot"), "[q]"), 8,
                  "qkv]", "kv_append input 'qkv' [batch, 32]: last dim 32 must be (heads + 2*kv_heads) = 6 heads",
                  NULL);

  /* kv_append */
  expect_error_on(GEN(GEN_STATE, KVA("x3", KV_KEYS), "[q]"), 8, "x3]",
                  "node 'a': kv_append input 'x3' is [batch, 2, 32], expected 2-D [rows, (heads + 2*kv_heads)*head_dim]",
                  NULL);
  expect_error_on(GEN(GEN_STATE, KVA("qkv", "heads: 30, kv_heads: 1, k_cache: kc, v_cache: vc, ctx: ctx, slot: slot"),
                      "[q]"),
                  8, "qkv]", "last dim 32 must be (heads + 2*kv_heads) = 32 heads of an even head_dim", NULL);
  expect_error_on(GEN(GEN_STATE, KVA("qkv", "heads: 2, kv_heads: 3, k_cache: kc, v_cache: vc, ctx: ctx, slot: slot"),
                      "[q]"),
                  8, "kv_heads: |3", "node 'a': kv_heads (3) must divide heads (2)", NULL);
  expect_error_on(GEN("state: {kc: [l, s, 128], vc: [l, s, 128]}\n", APPEND(""), "[q]"), 8, "k_cache: |kc",
                  "node 'a': k_cache 'kc' is [2, 3, 128], expected 4-D [layers, slots, max_seq, kv_heads*head_dim]",
                  NULL);
  expect_error_on(GEN("state: {kc: [l, s, m, 8], vc: [l, s, 8, 8]}\n", APPEND(""), "[q]"), 8, "v_cache: |vc",
                  "node 'a': v_cache 'vc' [2, 3, 8, 8] and k_cache 'kc' [2, 3, 16, 8] must have the same shape", NULL);
  expect_error_on(GEN(GEN_STATE, APPEND(", layer: 2"), "[q]"), 8, "layer: |2",
                  "node 'a': layer 2 is out of range: k_cache 'kc' [2, 3, 16, 8] holds 2 layers", NULL);
  expect_error_on(GEN(GEN_STATE, APPEND(", layer: -1"), "[q]"), 8, "-1", "'layer' must be between 0 and", NULL);
  expect_error_on(GEN("state: {kc: [l, s, m, 16], vc: [l, s, m, 16]}\n", APPEND(""), "[q]"), 8, "k_cache: |kc",
                  "node 'a': k_cache 'kc' is [2, 3, 16, 16], its last dim must be kv_heads*head_dim = 1*8", NULL);
  expect_error_on(GEN(GEN_STATE, KVA("qkv", "heads: 2, kv_heads: 1, k_cache: kc, v_cache: vc, ctx: c2, slot: slot"),
                      "[q]"),
                  8, "ctx: |c2", "node 'a': ctx 'c2' is [batch, 2], expected [batch] (one per row of 'qkv' [batch, 32])",
                  NULL);
  expect_error_on(GEN(GEN_STATE, KVA("qkv", "heads: 2, kv_heads: 1, k_cache: kc, v_cache: vc, ctx: qkv, slot: slot"),
                      "[q]"),
                  8, "ctx: |qkv", "node 'a': 'qkv' must be an i32 tensor", NULL);
  expect_error_on(GEN(GEN_STATE, KVA("qkv", "heads: 2, kv_heads: 1, k_cache: kc, v_cache: vc, ctx: ctx, slot: rows"),
                      "[q]"),
                  8, "slot: |rows", "node 'a': slot 'rows' is [3], expected [batch]", NULL);
  expect_error_on(GEN(GEN_STATE, APPEND(", window: 4"), "[q]"), 8, "window", "unknown key 'window' for op 'kv_append'",
                  "layer");
  /* kv_attention */
  expect_error_on(GEN(GEN_STATE, APPEND("") ATTEND("qkv", ""), "[o]"), 9, "qkv]",
                  "node 'b': q 'qkv' is [batch, 32], its last dim must be heads*head_dim = 2*8", NULL);
  expect_error_on(GEN(GEN_STATE, APPEND("") ATTEND("x3", ""), "[o]"), 9, "x3]",
                  "node 'b': kv_attention input 'x3' is [batch, 2, 32], expected 2-D [rows, heads*head_dim]", NULL);
  expect_error_on(GEN(GEN_STATE, APPEND("")
                      KVT("q", "heads: 3, kv_heads: 3, k_cache: kc, v_cache: vc, ctx: ctx, slot: slot"), "[o]"),
                  9, "k_cache: |kc", "node 'b': k_cache 'kc' [2, 3, 16, 8]: last dim 8 is not divisible by kv_heads = 3",
                  NULL);
  expect_error_on(GEN(GEN_STATE, APPEND("") ATTEND("q", ", window: 0"), "[o]"), 9, "window: |0",
                  "'window' must be between 1 and 2147483647, got 0", NULL);
  expect_error_on(GEN(GEN_STATE, APPEND("") ATTEND("q", ", scale: x"), "[o]"), 9, "scale: |x",
                  "expected a finite number for 'scale'", NULL);
}

static void test_take_rows_argmax(void **state) {
  (void)state;
  hkc_spec_t *s = parse(GEN(GEN_STATE,
                            APPEND("") ATTEND("q", "")
                            "  - {name: t, op: take_rows, in: [o, rows], out: last}\n"
                            "  - {name: m, op: argmax, in: [last], out: next}\n"
                            "  - {name: m2, op: argmax, in: [x3], out: pick}\n",
                            "[last, next, pick]"));
  if (!s) fail_msg("%s", diag);
  const hkc_tensor_t *last = tensor(s, "last"), *next = tensor(s, "next"), *pick = tensor(s, "pick");
  assert_int_equal(last->dtype, HK_DTYPE_F32);
  assert_int_equal(last->rank, 2);
  assert_int_equal(dim_at(last, 0, 8), 3); /* [slots, width]: no batch */
  assert_int_equal(dim_at(last, 1, 8), 16);
  assert_int_equal(next->dtype, HK_DTYPE_I32); /* argmax: the one node output of dtype i32 */
  assert_int_equal(next->role, HK_ROLE_OUTPUT);
  assert_int_equal(next->rank, 1);
  assert_int_equal(dim_at(next, 0, 8), 3);
  assert_int_equal(pick->dtype, HK_DTYPE_I32); /* [batch, 2]: padded like any i32 tensor */
  assert_int_equal(pick->rank, 2);
  assert_int_equal(s->batch_policy, HK_BATCH_POLICY_REC_PAD);
  hkc_spec_destroy(s);
  /* an i32 node output goes where i32 is taken: argmax's [batch] as kv_append's slot */
  s = parse(GEN(GEN_STATE, "  - {name: m, op: argmax, in: [qkv], out: sl}\n"
                KVA("qkv", "heads: 2, kv_heads: 1, k_cache: kc, v_cache: vc, ctx: ctx, slot: sl"), "[q]"));
  if (!s) fail_msg("%s", diag);
  assert_int_equal(tensor(s, "sl")->dtype, HK_DTYPE_I32);
  assert_int_equal(tensor(s, "sl")->rank, 1); /* [batch] i32: allowed under pad */
  assert_int_equal(s->nodes[1].slot, hkc_tensor_find(s, "sl"));
  hkc_spec_destroy(s);

  expect_error_on(GEN("state: {}\n", "  - {name: t, op: take_rows, in: [qkv, qkv], out: y}\n", "[y]"), 8, "qkv]",
                  "node 't': 'qkv' must be an i32 tensor", NULL);
  expect_error_on(GEN("state: {}\n", "  - {name: t, op: take_rows, in: [x3, rows], out: y}\n", "[y]"), 8, "x3,",
                  "node 't': take_rows input 'x3' is [batch, 2, 32], expected 2-D [rows, width]", NULL);
  expect_error_on(GEN("state: {}\n", "  - {name: t, op: take_rows, in: [qkv, c2], out: y}\n", "[y]"), 8, "c2]",
                  "node 't': row indices 'c2' are [batch, 2], expected 1-D [n]", NULL);
  expect_error_on(GEN("state: {}\n", "  - {name: t, op: take_rows, in: [rows], out: y}\n", "[y]"), 8, "[rows]",
                  "op 'take_rows' takes 2 inputs in 'in', got 1", NULL);
  expect_error_on(GEN("state: {}\n", "  - {name: m, op: argmax, in: [f1], out: y}\n", "[y]"), 8, "f1]",
                  "node 'm': argmax input 'f1' is [8], expected rank >= 2", NULL);
  expect_error_on(GEN("state: {}\n", "  - {name: m, op: argmax, in: [ctx], out: y}\n", "[y]"), 8, "ctx]",
                  "node 'm': 'ctx' is an i32 tensor, which op 'argmax' cannot take in 'in'", NULL);
  expect_error_on(GEN("state: {}\n",
                      "  - {name: m, op: argmax, in: [qkv], out: n}\n  - {name: z, op: add, in: [qkv, n], out: y}\n",
                      "[y]"),
                  9, "n]", "node 'z': 'n' is an i32 tensor, which op 'add' cannot take in 'in'", NULL);
  expect_error_on(GEN("state: {}\n", "  - {name: m, op: argmax, in: [qkv], heads: 2, out: y}\n", "[y]"), 8, "heads",
                  "unknown key 'heads' for op 'argmax'", NULL);
}

/* sample: logits x [R, n] and i32 params [R, 4] (seed, top_k, temperature, top_p) -> i32 [R]:
 * R with batch or fixed; the params' shape, dtype and rows, x's rank and dtype, checked at the
 * reference. Lines 1-5 of these specs, "graph:" on 6, nodes from line 7. */
#define SAMPLE_HEAD                                                                                          \
  "hkc: 1\nname: g\nbatch_sizes: [1, 8]\ndims: {s: 3}\n"                                                    \
  "inputs: {x: [batch, 50], xs: [s, 50], x3: [batch, 2, 50], f4: [batch, 4], sp: {shape: [batch, 4], "      \
  "dtype: i32}, ss: {shape: [s, 4], dtype: i32}, s3: {shape: [batch, 3], dtype: i32}, s1: {shape: [batch], " \
  "dtype: i32}}\n"
#define SAMPLE(graph, outputs) SAMPLE_HEAD "graph:\n" graph "outputs: " outputs "\n"
#define SAMPLE_NODE(x, params) "  - {name: d, op: sample, in: [" x ", " params "], out: tok}\n"

static void test_sample(void **state) {
  (void)state;
  hkc_spec_t *s = parse(SAMPLE(SAMPLE_NODE("x", "sp") "  - {name: e, op: sample, in: [xs, ss], out: tok2}\n",
                               "[tok, tok2]"));
  if (!s) fail_msg("%s", diag);
  const hkc_tensor_t *tok = tensor(s, "tok"), *tok2 = tensor(s, "tok2");
  assert_int_equal(tok->dtype, HK_DTYPE_I32); /* like argmax's: an i32 node output */
  assert_int_equal(tok->role, HK_ROLE_OUTPUT);
  assert_int_equal(tok->rank, 1);
  assert_int_equal(dim_at(tok, 0, 8), 8); /* [batch] */
  assert_int_equal(tok2->rank, 1);
  assert_int_equal(dim_at(tok2, 0, 8), 3); /* [s]: no batch */
  const hkc_node_t *d = &s->nodes[0];
  assert_int_equal(d->op, HK_OP_SAMPLE);
  assert_int_equal(d->n_in, 2);
  assert_int_equal(d->in[0], hkc_tensor_find(s, "x"));
  assert_int_equal(d->in[1], hkc_tensor_find(s, "sp"));
  assert_string_equal(hkc_op_name(HK_OP_SAMPLE), "sample");
  hkc_spec_destroy(s);

  expect_error_on(SAMPLE(SAMPLE_NODE("x", "f4"), "[tok]"), 7, "f4]",
                  "node 'd': 'f4' must be an i32 tensor (declare it {shape: [...], dtype: i32}), got f32", NULL);
  expect_error_on(SAMPLE(SAMPLE_NODE("sp", "sp"), "[tok]"), 7, "sp,",
                  "node 'd': 'sp' is an i32 tensor, which op 'sample' cannot take in 'in'", "sample's params");
  expect_error_on(SAMPLE(SAMPLE_NODE("x", "s3"), "[tok]"), 7, "s3]",
                  "node 'd': sample params 's3' are [batch, 3], expected [rows, 4] with the rows of 'x' [batch, 50]",
                  "seed, top_k, temperature and top_p");
  expect_error_on(SAMPLE(SAMPLE_NODE("x", "s1"), "[tok]"), 7, "s1]",
                  "node 'd': sample params 's1' are [batch], expected [rows, 4]", NULL);
  expect_error_on(SAMPLE(SAMPLE_NODE("x", "ss"), "[tok]"), 7, "ss]",
                  "node 'd': sample params 'ss' are [3, 4], expected [rows, 4] with the rows of 'x' [batch, 50]", NULL);
  expect_error_on(SAMPLE(SAMPLE_NODE("x3", "sp"), "[tok]"), 7, "x3,",
                  "node 'd': sample input 'x3' is [batch, 2, 50], expected 2-D [rows, n]", NULL);
  expect_error_on(SAMPLE("  - {name: d, op: sample, in: [x], out: tok}\n", "[tok]"), 7, "[x]",
                  "op 'sample' takes 2 inputs in 'in', got 1", NULL);
  expect_error_on(SAMPLE("  - {name: d, op: sample, in: [x, sp], top_k: 5, out: tok}\n", "[tok]"), 7, "top_k",
                  "unknown key 'top_k' for op 'sample'", NULL);
  expect_error_on(SAMPLE("  - {name: d, op: sampler, in: [x, sp], out: tok}\n", "[tok]"), 7, "sampler",
                  "unknown op 'sampler'", "take_rows, argmax, sample)");
  /* the drawn index is i32: where a float goes, it is refused */
  expect_error_on(SAMPLE(SAMPLE_NODE("x", "sp") "  - {name: z, op: relu, in: [tok], out: y}\n", "[y]"), 8, "tok]",
                  "node 'z': 'tok' is an i32 tensor, which op 'relu' cannot take in 'in'", NULL);
}

/* rope and embedding with positions from ctx; rope scaling */
static void test_ctx_positions_and_scaling(void **state) {
  (void)state;
#define ROPE(in, keys) GEN("state: {}\n", "  - {name: r, op: rope, in: [" in "], " keys ", out: y}\n", "[y]")
  hkc_spec_t *s = parse(ROPE("qkv", "heads: 2, kv_heads: 1, packed: true, ctx: ctx"));
  if (!s) fail_msg("%s", diag);
  assert_int_equal(s->nodes[0].ctx, hkc_tensor_find(s, "ctx"));
  assert_int_equal(s->nodes[0].rope_scaling, HKC_ROPE_SCALING_NONE);
  assert_int_equal(tensor(s, "y")->rank, 2); /* [batch, width]: no sequence dim with ctx */
  hkc_spec_destroy(s);
  s = parse(ROPE("x3", "heads: 4, ctx: c2, scaling: linear, factor: 8.0"));
  if (!s) fail_msg("%s", diag);
  assert_int_equal(s->nodes[0].ctx, hkc_tensor_find(s, "c2"));
  assert_int_equal(s->nodes[0].rope_scaling, HKC_ROPE_SCALING_LINEAR);
  assert_true(s->nodes[0].rope_factor == 8.0f);
  hkc_spec_destroy(s);
  s = parse(ROPE("x3", "heads: 4, theta: 500000.0, scaling: llama3, factor: 32, low_freq_factor: 1, "
                       "high_freq_factor: 4, original_max: 8192"));
  if (!s) fail_msg("%s", diag);
  const hkc_node_t *nd = &s->nodes[0];
  assert_int_equal(nd->ctx, HKC_NONE);
  assert_int_equal(nd->rope_scaling, HKC_ROPE_SCALING_LLAMA3);
  assert_true(nd->rope_factor == 32.0f && nd->rope_low_freq == 1.0f && nd->rope_high_freq == 4.0f);
  assert_int_equal(nd->rope_original_max, 8192);
  hkc_spec_destroy(s);
  s = parse(ROPE("x3", "heads: 4, scaling: none"));
  if (!s) fail_msg("%s", diag);
  assert_int_equal(s->nodes[0].rope_scaling, HKC_ROPE_SCALING_NONE);
  hkc_spec_destroy(s);

  expect_error_on(ROPE("x3", "heads: 4, ctx: ctx"), 8, "ctx: |ctx",
                  "node 'r': ctx 'ctx' is [batch], expected [batch, 2] (one per row of 'x3' [batch, 2, 32])", NULL);
  expect_error_on(ROPE("qkv", "heads: 4, ctx: ctx, offset: 3"), 8, "offset: |3",
                  "node 'r': 'offset' is not valid with 'ctx'", NULL);
  expect_error_on(ROPE("qkv", "heads: 4, ctx: qkv"), 8, "ctx: |qkv", "node 'r': 'qkv' must be an i32 tensor", NULL);
  expect_error_on(ROPE("qkv", "heads: 4"), 8, "qkv]", "must not depend on batch", NULL); /* no ctx: [batch, seq, ..] */
  expect_error_on(ROPE("x3", "heads: 4, scaling: yarn, factor: 2"), 8, "yarn",
                  "node 'r': unknown rope scaling 'yarn' (expected none, linear or llama3)", NULL);
  expect_error_on(ROPE("x3", "heads: 4, factor: 2.0"), 8, "factor: |2.0",
                  "node 'r': 'factor' is valid only with 'scaling: linear' or 'scaling: llama3'", NULL);
  expect_error_on(ROPE("x3", "heads: 4, scaling: none, factor: 2.0"), 8, "factor: |2.0", "'factor' is valid only",
                  NULL);
  expect_error_on(ROPE("x3", "heads: 4, scaling: linear, factor: 2, low_freq_factor: 1"), 8, "low_freq_factor: |1",
                  "node 'r': 'low_freq_factor' is valid only with 'scaling: llama3'", NULL);
  expect_error_on(ROPE("x3", "heads: 4, scaling: linear"), 8, "linear", "node 'r': 'scaling: linear' needs 'factor'",
                  NULL);
  expect_error_on(ROPE("x3", "heads: 4, scaling: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 4"), 8,
                  "llama3", "'scaling: llama3' needs 'factor', 'low_freq_factor', 'high_freq_factor' and 'original_max'",
                  NULL);
  expect_error_on(ROPE("x3", "heads: 4, scaling: linear, factor: 0"), 8, "factor: |0",
                  "node 'r': 'factor' must be positive, got 0", NULL);
  expect_error_on(ROPE("x3", "heads: 4, scaling: linear, factor: .nan"), 8, ".nan",
                  "expected a finite number for 'factor'", NULL);
  expect_error_on(ROPE("x3", "heads: 4, scaling: llama3, factor: 8, low_freq_factor: 0, high_freq_factor: 4, "
                             "original_max: 8192"),
                  8, "low_freq_factor: |0", "'low_freq_factor' must be positive", NULL);
  expect_error_on(ROPE("x3", "heads: 4, scaling: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 1, "
                             "original_max: 8192"),
                  8, "high_freq_factor: |1", "'high_freq_factor' (1) must be greater than 'low_freq_factor' (1)", NULL);
  expect_error_on(ROPE("x3", "heads: 4, scaling: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 4, "
                             "original_max: 0"),
                  8, "original_max: |0", "'original_max' must be between 1 and 16777216, got 0", NULL);
  expect_error_on(ROPE("x3", "heads: 4, scaling: llama3, factor: 8, low_freq_factor: 1, high_freq_factor: 4, "
                             "original_max: 2.5"),
                  8, "2.5", "expected an integer for 'original_max'", NULL);
#undef ROPE

  /* embedding: ctx picks the position row (any max_pos), only with pos, shaped like ids */
  s = parse(I32HEAD "inputs: {ids: {shape: [batch], dtype: i32}, c: {shape: [batch], dtype: i32}}\n"
                    "params: {t: [11, 6], p: [4, 6]}\n"
                    "graph:\n  - {name: e, op: embedding, in: [ids, t], pos: p, ctx: c, out: y}\noutputs: [y]\n");
  if (!s) fail_msg("%s", diag);
  assert_int_equal(s->nodes[0].ctx, hkc_tensor_find(s, "c"));
  assert_int_equal(tensor(s, "y")->rank, 2);
  hkc_spec_destroy(s);
  expect_error_on(I32HEAD "inputs: {ids: {shape: [batch], dtype: i32}, c: {shape: [batch], dtype: i32}}\n"
                          "params: {t: [11, 6], p: [4, 6]}\n"
                          "graph:\n  - {name: e, op: embedding, in: [ids, t], ctx: c, out: y}\noutputs: [y]\n",
                  8, "c,", "node 'e': 'ctx' is valid only with 'pos'", NULL);
  expect_error_on(I32HEAD "inputs: {ids: {shape: [batch, s], dtype: i32}, c: {shape: [batch], dtype: i32}}\n"
                          "params: {t: [11, 6], p: [4, 6]}\n"
                          "graph:\n  - {name: e, op: embedding, in: [ids, t], pos: p, ctx: c, out: y}\noutputs: [y]\n",
                  8, "ctx: |c", "node 'e': ctx 'c' is [batch], expected [batch, 5] (one per row of 'ids' [batch, 5])",
                  NULL);
  expect_error_on(I32HEAD "inputs: {ids: {shape: [batch], dtype: i32}, c: {shape: [batch], dtype: i32}}\n"
                          "params: {t: [11, 6], p: [4, 7]}\n"
                          "graph:\n  - {name: e, op: embedding, in: [ids, t], pos: p, ctx: c, out: y}\noutputs: [y]\n",
                  8, "pos: |p", "node 'e': position table 'p' is [4, 7], expected [max_pos, 6] not depending on batch",
                  NULL);
  expect_error_on(I32HEAD "inputs: {ids: {shape: [batch], dtype: i32}}\nparams: {t: [11, 6], p: [4, 6]}\n"
                          "graph:\n  - {name: e, op: embedding, in: [ids, t], pos: p, out: y}\noutputs: [y]\n",
                  8, "pos: |p", "position table 'p' is [4, 6], expected [max_pos, 6] with max_pos >= the sequence length",
                  NULL);
}

/* A repeat body's cache ops: k_cache, v_cache, ctx and slot name top-level tensors (kept as
 * written), and `layer: "{i}"` is the layer number. */
static void test_repeat_kv(void **state) {
  (void)state;
  hkc_spec_t *s = parse(GEN(GEN_STATE,
                            "  - repeat:\n"
                            "      count: l\n"
                            "      in: qkv\n"
                            "      out: h\n"
                            "      params: {w: [16, 32]}\n"
                            "      body:\n"
                            "        - " "{name: a, op: kv_append, in: [qkv], " KV_KEYS ", layer: \"{i}\", out: q}\n"
                            "        - " "{name: b, op: kv_attention, in: [q], " KV_KEYS ", layer: \"{i}\", out: o}\n"
                            "        - {name: p, op: gemm, in: [o, w], out: h}\n",
                            "[h]"));
  if (!s) fail_msg("%s", diag);
  assert_int_equal(s->n_nodes, 6);
  for (int k = 0; k < 2; k++) {
    const hkc_node_t *a = &s->nodes[3 * k], *b = &s->nodes[3 * k + 1];
    assert_int_equal(a->op, HK_OP_KV_APPEND);
    assert_int_equal(b->op, HK_OP_KV_ATTENTION);
    assert_int_equal(a->layer, k);
    assert_int_equal(b->layer, k);
    assert_int_equal(a->k_cache, hkc_tensor_find(s, "kc"));
    assert_int_equal(b->v_cache, hkc_tensor_find(s, "vc"));
    assert_int_equal(a->ctx, hkc_tensor_find(s, "ctx"));
    assert_int_equal(b->slot, hkc_tensor_find(s, "slot"));
  }
  assert_int_equal(s->nodes[4].in[0], hkc_tensor_find(s, "q_1"));
  hkc_spec_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mlp_spec),
      cmocka_unit_test(test_bert_layer_spec),
      cmocka_unit_test(test_llama_block_spec),
      cmocka_unit_test(test_defaults_and_sorting_of_batch_sizes),
      cmocka_unit_test(test_topological_order),
      cmocka_unit_test(test_expressions_broadcast_and_attributes),
      cmocka_unit_test(test_helpers),
      cmocka_unit_test(test_unknown_keys),
      cmocka_unit_test(test_missing_keys),
      cmocka_unit_test(test_undefined_tensor),
      cmocka_unit_test(test_shape_mismatch),
      cmocka_unit_test(test_attention_shapes),
      cmocka_unit_test(test_rope),
      cmocka_unit_test(test_cycles),
      cmocka_unit_test(test_duplicates),
      cmocka_unit_test(test_bad_dims),
      cmocka_unit_test(test_bad_values),
      cmocka_unit_test(test_pad_layouts),
      cmocka_unit_test(test_empty_graph),
      cmocka_unit_test(test_outputs),
      cmocka_unit_test(test_i32_inputs),
      cmocka_unit_test(test_quantized_params),
      cmocka_unit_test(test_unused_tensor_warning),
      cmocka_unit_test(test_fusion_groups),
      cmocka_unit_test(test_gemm_mul_and_group_locations),
      cmocka_unit_test(test_yaml_syntax_error),
      cmocka_unit_test(test_wrong_node_types),
      cmocka_unit_test(test_missing_file),
      cmocka_unit_test(test_repeat_expansion),
      cmocka_unit_test(test_repeat_errors),
      cmocka_unit_test(test_parts),
      cmocka_unit_test(test_state),
      cmocka_unit_test(test_kv_ops),
      cmocka_unit_test(test_take_rows_argmax),
      cmocka_unit_test(test_sample),
      cmocka_unit_test(test_ctx_positions_and_scaling),
      cmocka_unit_test(test_repeat_kv),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
