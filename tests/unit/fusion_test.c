/* SPDX-License-Identifier: Apache-2.0 */
/* fusion.c: `fusion: auto` on BERT- and Llama-like snippets (gemm epilogues, SwiGLU,
 * residual add + norm with and without a stored sum, element-wise chains with
 * broadcasting), what must not fuse (graph outputs, a chain in the wrong epilogue order,
 * attention), explicit groups and their errors (FILE:LINE:COL of the group, the node
 * that breaks it, why), the compacted tensor table, and on random graphs that the fused
 * spec computes what the unfused one does (a double-precision interpreter of the IR
 * written here, independent of the kernels). */
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

/* The node computing exactly these spec nodes ("fc2,res" or "fc1"). */
static const hkc_node_t *N(const hkc_spec_t *s, const char *label) {
  for (size_t i = 0; i < s->n_nodes; i++) {
    const hkc_node_t *n = &s->nodes[i];
    if (!strcmp(n->fused_names ? n->fused_names : n->name, label)) return n;
  }
  char all[2048] = "";
  for (size_t i = 0; i < s->n_nodes; i++) {
    const hkc_node_t *n = &s->nodes[i];
    strncat(all, n->fused_names ? n->fused_names : n->name, sizeof all - strlen(all) - 3);
    strcat(all, " | ");
  }
  fail_msg("no node '%s' (nodes: %s)", label, all);
  return NULL;
}

static size_t node_reads(const hkc_node_t *n, int out[16]) {
  size_t k = 0;
  for (int i = 0; i < n->n_in; i++) out[k++] = n->in[i];
  const int extra[] = {n->bias, n->residual, n->mul,  n->gamma,   n->beta,
                       n->add_in, n->ctx,   n->slot, n->k_cache, n->v_cache};
  for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
    if (extra[i] != HKC_NONE) out[k++] = extra[i];
  return k;
}

/* Every invariant of a (fused) spec: indices in range, one writer per node-written
 * tensor and `producer` naming it, producers before readers, outputs keep their role,
 * inputs/params/state unproduced, n_fused matching fused_names. */
static void check_consistent(const hkc_spec_t *s) {
  int *writer = malloc((s->n_tensors + 1) * sizeof *writer);
  for (size_t t = 0; t < s->n_tensors; t++) writer[t] = -1;
  for (size_t j = 0; j < s->n_nodes; j++) {
    const hkc_node_t *n = &s->nodes[j];
    int w[2] = {n->out, n->sum_out};
    for (int k = 0; k < 2; k++) {
      if (w[k] == HKC_NONE) continue;
      assert_true(w[k] >= 0 && (size_t)w[k] < s->n_tensors);
      if (writer[w[k]] >= 0) fail_msg("tensor %s written twice", s->tensors[w[k]].name);
      writer[w[k]] = (int)j;
    }
    if (n->sum_out != HKC_NONE) assert_true(n->add_in != HKC_NONE || n->norm_c);
    int n_commas = 0;
    if (n->fused_names)
      for (const char *p = n->fused_names; *p; p++) n_commas += *p == ',';
    assert_int_equal(n->n_fused, n->fused_names ? n_commas + 1 : 1);
    if (n->fused_names) assert_true(n->n_fused >= 2);
  }
  for (size_t j = 0; j < s->n_nodes; j++) {
    int r[16];
    size_t nr = node_reads(&s->nodes[j], r);
    for (size_t k = 0; k < nr; k++) {
      assert_true(r[k] >= 0 && (size_t)r[k] < s->n_tensors);
      const hkc_tensor_t *t = &s->tensors[r[k]];
      if (t->role == HK_ROLE_INPUT || t->role == HK_ROLE_PARAM || t->role == HK_ROLE_STATE) continue;
      if (writer[r[k]] < 0 || (size_t)writer[r[k]] >= j)
        fail_msg("node %zu reads %s before it is written", j, t->name);
    }
  }
  for (size_t t = 0; t < s->n_tensors; t++) {
    const hkc_tensor_t *x = &s->tensors[t];
    if (x->role == HK_ROLE_INPUT || x->role == HK_ROLE_PARAM || x->role == HK_ROLE_STATE) {
      assert_int_equal(x->producer, HKC_NONE);
      assert_int_equal(writer[t], -1);
    } else {
      if (writer[t] < 0) fail_msg("tensor %s is never written", x->name);
      assert_int_equal(x->producer, writer[t]);
    }
  }
  for (size_t o = 0; o < s->n_outputs; o++) {
    assert_true(s->outputs[o] >= 0 && (size_t)s->outputs[o] < s->n_tensors);
    assert_int_equal(s->tensors[s->outputs[o]].role, HK_ROLE_OUTPUT);
  }
  free(writer);
}

/* ---- a double-precision interpreter of the IR ---------------------------------------- */
static uint64_t name_seed(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The rope op's rotation of y [rows, width] in place (a rope node's fields; also a rope
 * gemm's): rows at position r % seq + pos_offset, heads of dh, the rotated ones first. */
static void rope_rows(const hkc_node_t *nd, const hkc_tensor_t *t, double *y, int64_t n) {
  const int64_t dh = hkc_rope_head_dim(nd, t), width = hkc_dim_value(t->dims[t->rank - 1], 1);
  const int64_t seq = hkc_dim_value(t->dims[t->rank - 2], 1), rot = hkc_rope_rotated_heads(nd);
  assert_true(dh > 0);
  for (int64_t r = 0; r < n / width; r++)
    for (int64_t h = 0; h < rot; h++)
      for (int64_t j = 0; j < dh / 2; j++) {
        const double a = (double)(r % seq + nd->pos_offset) * pow(nd->theta, -2.0 * (double)j / (double)dh);
        double *x1 = &y[r * width + h * dh + j], *x2 = x1 + dh / 2;
        const double u = *x1, w = *x2;
        *x1 = u * cos(a) - w * sin(a);
        *x2 = w * cos(a) + u * sin(a);
      }
}

/* Runs the spec at `batch` on inputs and params drawn from their names; returns the
 * values of every tensor (caller frees each and the array). */
static double **interpret(const hkc_spec_t *s, int64_t batch) {
  double **v = calloc(s->n_tensors, sizeof *v);
  for (size_t t = 0; t < s->n_tensors; t++) {
    const hkc_tensor_t *x = &s->tensors[t];
    int64_t n = hkc_tensor_elems(x, batch);
    v[t] = calloc((size_t)n, sizeof **v);
    if (x->role != HK_ROLE_INPUT && x->role != HK_ROLE_PARAM) {
      for (int64_t i = 0; i < n; i++) v[t][i] = NAN; /* unwritten shows */
      continue;
    }
    hk_test_rng_t rng;
    hk_test_rng_seed(&rng, name_seed(x->name));
    double scale = x->rank == 2 ? 1 / sqrt((double)hkc_dim_value(x->dims[0], batch)) : 1;
    for (int64_t i = 0; i < n; i++) v[t][i] = hk_test_uniform(&rng, -1, 1) * scale;
  }
  for (size_t j = 0; j < s->n_nodes; j++) {
    const hkc_node_t *nd = &s->nodes[j];
    const hkc_tensor_t *out = &s->tensors[nd->out];
    int64_t n = hkc_tensor_elems(out, batch);
    double *y = v[nd->out];
    switch (nd->op) {
    case HK_OP_GEMM: {
      const hkc_tensor_t *a = &s->tensors[nd->in[0]], *b = &s->tensors[nd->in[1]];
      int64_t K = hkc_dim_value(a->dims[a->rank - 1], batch);
      int64_t N = hkc_dim_value(b->dims[nd->trans_b ? 0 : 1], batch), M = n / N;
      double *A = v[nd->in[0]];
      if (nd->norm_a) { /* a folded rmsnorm: A = rmsnorm(in[0]) */
        A = malloc((size_t)(M * K) * sizeof *A);
        for (int64_t i = 0; i < M; i++) {
          double ms = 0;
          for (int64_t k = 0; k < K; k++) ms += v[nd->in[0]][i * K + k] * v[nd->in[0]][i * K + k];
          const double rstd = 1 / sqrt(ms / (double)K + nd->eps);
          for (int64_t k = 0; k < K; k++) A[i * K + k] = v[nd->in[0]][i * K + k] * rstd * v[nd->gamma][k];
        }
      }
      for (int64_t i = 0; i < M; i++)
        for (int64_t c = 0; c < N; c++) {
          double acc = 0;
          for (int64_t k = 0; k < K; k++)
            acc += A[i * K + k] * (nd->trans_b ? v[nd->in[1]][c * K + k] : v[nd->in[1]][k * N + c]);
          if (nd->bias != HKC_NONE) acc += v[nd->bias][c];
          acc = hk_test_act_ref(nd->act, acc);
          if (nd->mul != HKC_NONE) acc *= v[nd->mul][i * N + c];
          if (nd->n_in == 3) { /* dual gemm: times the second product */
            double acc2 = 0;
            for (int64_t k = 0; k < K; k++)
              acc2 += A[i * K + k] * (nd->trans_b ? v[nd->in[2]][c * K + k] : v[nd->in[2]][k * N + c]);
            acc *= acc2;
          }
          if (nd->residual != HKC_NONE) acc += v[nd->residual][i * N + c];
          y[i * N + c] = acc;
        }
      if (nd->rope) rope_rows(nd, out, y, n);
      if (nd->norm_c) /* a norm epilogue: each row of N normalised (h kept in sum_out) */
        for (int64_t i = 0; i < M; i++) {
          const int ln = nd->norm_c == HKC_NORM_C_LAYERNORM;
          double mean = 0, var = 0;
          if (nd->sum_out != HKC_NONE) memcpy(v[nd->sum_out] + i * N, y + i * N, (size_t)N * sizeof *y);
          for (int64_t c = 0; c < N && ln; c++) mean += y[i * N + c];
          mean /= (double)N;
          for (int64_t c = 0; c < N; c++) var += (y[i * N + c] - mean) * (y[i * N + c] - mean);
          const double rstd = 1 / sqrt(var / (double)N + nd->eps);
          for (int64_t c = 0; c < N; c++)
            y[i * N + c] = (y[i * N + c] - mean) * rstd * v[nd->gamma][c] + (ln ? v[nd->beta][c] : 0);
        }
      if (A != v[nd->in[0]]) free(A);
      break;
    }
    case HK_OP_ROPE:
      memcpy(y, v[nd->in[0]], (size_t)n * sizeof *y);
      rope_rows(nd, out, y, n);
      break;
    case HK_OP_ADD:
    case HK_OP_MUL: {
      int64_t na = hkc_tensor_elems(&s->tensors[nd->in[0]], batch), nb = hkc_tensor_elems(&s->tensors[nd->in[1]], batch);
      for (int64_t i = 0; i < n; i++) {
        double a = v[nd->in[0]][i % na], b = v[nd->in[1]][i % nb];
        y[i] = nd->op == HK_OP_ADD ? a + b : a * b;
      }
      break;
    }
    case HK_OP_RELU:
    case HK_OP_GELU:
    case HK_OP_SILU: {
      int act = nd->op == HK_OP_RELU ? HK_ACT_RELU : nd->op == HK_OP_GELU ? HK_ACT_GELU : HK_ACT_SILU;
      for (int64_t i = 0; i < n; i++) y[i] = hk_test_act_ref(act, v[nd->in[0]][i]);
      break;
    }
    case HK_OP_LAYERNORM:
    case HK_OP_RMSNORM: {
      int64_t cols = hkc_dim_value(out->dims[out->rank - 1], batch), rows = n / cols;
      double *row = malloc((size_t)cols * sizeof *row);
      for (int64_t r = 0; r < rows; r++) {
        double mean = 0, var = 0;
        for (int64_t c = 0; c < cols; c++) {
          row[c] = v[nd->in[0]][r * cols + c] + (nd->add_in != HKC_NONE ? v[nd->add_in][r * cols + c] : 0);
          if (nd->sum_out != HKC_NONE) v[nd->sum_out][r * cols + c] = row[c];
          mean += row[c];
        }
        mean = nd->op == HK_OP_RMSNORM ? 0 : mean / (double)cols;
        for (int64_t c = 0; c < cols; c++) var += (row[c] - mean) * (row[c] - mean);
        double rstd = 1 / sqrt(var / (double)cols + nd->eps);
        for (int64_t c = 0; c < cols; c++)
          y[r * cols + c] = (row[c] - mean) * rstd * v[nd->gamma][c] + (nd->beta != HKC_NONE ? v[nd->beta][c] : 0);
      }
      free(row);
      break;
    }
    case HK_OP_SOFTMAX: {
      int64_t cols = hkc_dim_value(out->dims[out->rank - 1], batch), rows = n / cols;
      for (int64_t r = 0; r < rows; r++) {
        const double *x = v[nd->in[0]] + r * cols;
        double mx = -INFINITY, sum = 0;
        for (int64_t c = 0; c < cols; c++) mx = fmax(mx, x[c]);
        for (int64_t c = 0; c < cols; c++) sum += exp(x[c] - mx);
        for (int64_t c = 0; c < cols; c++) y[r * cols + c] = exp(x[c] - mx) / sum;
      }
      break;
    }
    case HK_OP_EWCHAIN: {
      int64_t nj[HKC_MAX_NODE_IN];
      for (int k = 0; k < nd->n_in; k++) nj[k] = hkc_tensor_elems(&s->tensors[nd->in[k]], batch);
      for (int64_t i = 0; i < n; i++) {
        double x = v[nd->in[0]][i % nj[0]];
        for (const char *p = nd->program; *p; p++) {
          if (*p == 'a' || *p == 'm') {
            int k = *++p - '0';
            assert_true(k >= 1 && k < nd->n_in);
            double o = v[nd->in[k]][i % nj[k]];
            x = p[-1] == 'a' ? x + o : x * o;
          } else {
            x = hk_test_act_ref(hk_test_ewchain_act(*p), x);
          }
        }
        y[i] = x;
      }
      break;
    }
    default: fail_msg("interpreter: op %d", (int)nd->op);
    }
  }
  return v;
}

static void free_values(const hkc_spec_t *s, double **v) {
  for (size_t t = 0; t < s->n_tensors; t++) free(v[t]);
  free(v);
}

/* Fused and unfused specs give the same outputs (bit-equal up to reassociation: none). */
static void expect_same_function(const hkc_spec_t *unfused, const hkc_spec_t *fused, int64_t batch) {
  double **a = interpret(unfused, batch), **b = interpret(fused, batch);
  assert_int_equal(unfused->n_outputs, fused->n_outputs);
  for (size_t o = 0; o < unfused->n_outputs; o++) {
    const hkc_tensor_t *ta = &unfused->tensors[unfused->outputs[o]];
    int tb = hkc_tensor_find(fused, ta->name);
    assert_int_equal(tb, fused->outputs[o]);
    int64_t n = hkc_tensor_elems(ta, batch);
    assert_int_equal(n, hkc_tensor_elems(&fused->tensors[tb], batch));
    for (int64_t i = 0; i < n; i++) {
      double x = a[unfused->outputs[o]][i], y = b[tb][i];
      if (!(fabs(x - y) <= 1e-12 * (1 + fabs(x))))
        fail_msg("output %s element %lld: unfused %.17g, fused %.17g", ta->name, (long long)i, x, y);
    }
  }
  free_values(unfused, a);
  free_values(fused, b);
}

/* ---- auto: BERT-like ------------------------------------------------------------------ */
#define HEADER "hkc: 1\nname: t\ndtype: f16\nbatch_sizes: [1, 3]\ndims: {s: 5, h: 8, f: 12}\n"

static const char k_bert[] = HEADER
    "inputs: {x: [batch, s, h]}\n"
    "params: {wqkv: [h, 3*h], bqkv: [3*h], wo: [h, h], bo: [h], g1: [h], b1: [h],\n"
    "         w1: [h, f], bf1: [f], w2: [f, h], bf2: [h], g2: [h], b2: [h]}\n"
    "graph:\n"
    "  - {name: qkv_proj, op: gemm, in: [x, wqkv], bias: bqkv, out: qkv}\n"
    "  - {name: attn, op: attention, in: [qkv], heads: 2, out: ctx}\n"
    "  - {name: out_proj, op: gemm, in: [ctx, wo], out: o0}\n"
    "  - {name: out_bias, op: add, in: [o0, bo], out: o1}\n"
    "  - {name: res1, op: add, in: [x, o1], out: h0}\n"
    "  - {name: ln1, op: layernorm, in: [h0], gamma: g1, beta: b1, out: h1}\n"
    "  - {name: up, op: gemm, in: [h1, w1], bias: bf1, out: u0}\n"
    "  - {name: act, op: gelu, in: [u0], out: u1}\n"
    "  - {name: down, op: gemm, in: [u1, w2], bias: bf2, out: d0}\n"
    "  - {name: res2, op: add, in: [d0, h1], out: h2}\n"
    "  - {name: ln2, op: layernorm, in: [h2], gamma: g2, beta: b2, out: y}\n"
    "outputs: [y]\n";

static void test_auto_bert(void **state) {
  (void)state;
  hkc_spec_t *s = hk_test_spec_parse(k_bert);
  size_t tensors_before = s->n_tensors;
  s->fusion_no_ln = 1; /* as a build with a target without a norm epilogue (the form: test_auto_llama_swiglu) */
  hk_test_spec_fuse(s, HKC_FUSION_AUTO);
  check_consistent(s);
  assert_true(s->fusion_ln_blocked);
  assert_int_equal(s->fusion, HKC_FUSION_AUTO);
  assert_int_equal(s->n_nodes, 7);
  const hkc_node_t *op = N(s, "out_proj,out_bias,res1");
  assert_int_equal(op->op, HK_OP_GEMM);
  assert_string_equal(op->name, "out_proj");
  assert_int_equal(op->n_fused, 3);
  assert_int_equal(op->bias, hk_test_tensor(s, "bo"));
  assert_int_equal(op->residual, hk_test_tensor(s, "x")); /* the gemm output was the second operand */
  assert_int_equal(op->act, HK_ACT_NONE);
  assert_int_equal(op->mul, HKC_NONE);
  assert_int_equal(op->out, hk_test_tensor(s, "h0"));
  const hkc_node_t *up = N(s, "up,act");
  assert_int_equal(up->act, HK_ACT_GELU);
  assert_int_equal(up->bias, hk_test_tensor(s, "bf1"));
  assert_int_equal(up->out, hk_test_tensor(s, "u1"));
  const hkc_node_t *down = N(s, "down,res2");
  assert_int_equal(down->residual, hk_test_tensor(s, "h1"));
  assert_int_equal(down->in[0], hk_test_tensor(s, "u1"));
  /* norms and attention stay; the norms read what the gemms now write */
  assert_int_equal(N(s, "ln1")->in[0], hk_test_tensor(s, "h0"));
  assert_int_equal(N(s, "ln1")->add_in, HKC_NONE);
  assert_int_equal(N(s, "ln2")->in[0], hk_test_tensor(s, "h2"));
  assert_int_equal(N(s, "attn")->op, HK_OP_ATTENTION);
  /* eliminated: o0, o1, u0, d0 */
  assert_int_equal(s->n_tensors, tensors_before - 4);
  const char *gone[] = {"o0", "o1", "u0", "d0"};
  for (int i = 0; i < 4; i++) assert_int_equal(hkc_tensor_find(s, gone[i]), HKC_NONE);
  /* the order is still topological, in the written order */
  static const char *const order[] = {"qkv_proj", "attn", "out_proj", "ln1", "up", "down", "ln2"};
  for (int i = 0; i < 7; i++) assert_string_equal(s->nodes[i].name, order[i]);
  /* lowering: the fused gemm's key and arguments */
  hkc_kernel_key_t key;
  hkc_arg_t args[HKC_MAX_ARGS];
  assert_int_equal(hkc_lower_node(s, (size_t)(op - s->nodes), 3, &key, args), 9);
  assert_true(key.has_bias && key.has_residual && !key.has_mul);
  assert_int_equal(args[3].kind, HK_ARG_TENSOR);
  assert_int_equal(args[3].i, hk_test_tensor(s, "x"));
  assert_int_equal(args[8].kind, HK_ARG_NULL);
  char name[96];
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_gemm_f16_bias_res_a8");
  hkc_spec_destroy(s);
}

/* ---- auto: Llama-like ------------------------------------------------------------------- */
static const char k_llama[] = HEADER
    "inputs: {x: [batch, s, h]}\n"
    "params: {g1: [h], wq: [h, h], wo: [h, h], g2: [h], wg: [h, f], wu: [h, f], wd: [f, h]}\n"
    "graph:\n"
    "  - {name: n1, op: rmsnorm, in: [x], gamma: g1, out: xn}\n"
    "  - {name: q, op: gemm, in: [xn, wq], out: qv}\n"
    "  - {name: sm, op: softmax, in: [qv], out: p}\n"
    "  - {name: o, op: gemm, in: [p, wo], out: o0}\n"
    "  - {name: r1, op: add, in: [x, o0], out: h}\n"
    "  - {name: n2, op: rmsnorm, in: [h], gamma: g2, out: hn}\n"
    "  - {name: gate, op: gemm, in: [hn, wg], out: gt}\n"
    "  - {name: up, op: gemm, in: [hn, wu], out: ut}\n"
    "  - {name: sg, op: silu, in: [gt], out: ga}\n"
    "  - {name: glu, op: mul, in: [ga, ut], out: m}\n"
    "  - {name: down, op: gemm, in: [m, wd], out: d}\n"
    "  - {name: r2, op: add, in: [h, d], out: y}\n"
    "outputs: [y]\n";

static void test_auto_llama_swiglu(void **state) {
  (void)state;
  /* the norms folded into the gemms that read them: the q projection and the dual gemm */
  hkc_spec_t *ref = hk_test_spec_parse(k_llama), *s = hk_test_spec_parse(k_llama);
  hk_test_spec_fuse(s, HKC_FUSION_AUTO);
  check_consistent(s);
  assert_int_equal(s->n_nodes, 5);
  const hkc_node_t *q = N(s, "n1,q"), *d = N(s, "n2,up,gate,sg,glu");
  assert_true(q->norm_a && d->norm_a && d->n_in == 3);
  assert_int_equal(q->in[0], hk_test_tensor(s, "x"));
  assert_int_equal(q->gamma, hk_test_tensor(s, "g1"));
  assert_int_equal(d->in[0], hk_test_tensor(s, "h"));
  assert_int_equal(d->gamma, hk_test_tensor(s, "g2"));
  assert_int_equal(hkc_tensor_find(s, "xn"), HKC_NONE);
  assert_int_equal(hkc_tensor_find(s, "hn"), HKC_NONE);
  assert_false(s->fusion_norm_blocked);
  {
    hkc_kernel_key_t key;
    hkc_arg_t args[HKC_MAX_ARGS];
    assert_int_equal(hkc_lower_node(s, (size_t)(d - s->nodes), 3, &key, args), HKC_GEMM_N_ARGS_DUAL + 2);
    assert_true(key.dual && key.norm_a);
    assert_int_equal(hkc_gemm_norm_arg(1, 0), HKC_GEMM_ARG_B2 + 1);
    assert_int_equal(args[HKC_GEMM_ARG_B2 + 1].kind, HK_ARG_TENSOR);
    assert_int_equal(args[HKC_GEMM_ARG_B2 + 1].i, hk_test_tensor(s, "g2"));
    assert_int_equal(args[HKC_GEMM_ARG_B2 + 2].kind, HK_ARG_F32);
    char name[96];
    hkc_kernel_key_name(&key, name, sizeof name);
    assert_string_equal(name, "hk_gemm_f16_silu_dual_nrm_a4");
  }
  expect_same_function(ref, s, 1);
  expect_same_function(ref, s, 3);
  hkc_spec_destroy(s);

  /* without the fold (a target without such a kernel: fusion_no_norm), but with norm
   * epilogues: the ffn norm joins o's epilogue (o + r1 + n2), which also keeps the residual
   * stream h for down's residual (sum_out); n1 reads an input: apart */
  s = hk_test_spec_parse(k_llama);
  s->fusion_no_norm = 1;
  hk_test_spec_fuse(s, HKC_FUSION_AUTO);
  check_consistent(s);
  {
    const hkc_node_t *on = N(s, "o,r1,n2");
    assert_int_equal(on->norm_c, HKC_NORM_C_RMSNORM);
    assert_int_equal(on->out, hk_test_tensor(s, "hn"));
    assert_int_equal(on->sum_out, hk_test_tensor(s, "h"));
    assert_int_equal(on->gamma, hk_test_tensor(s, "g2"));
    assert_int_equal(on->beta, HKC_NONE);
    assert_int_equal(N(s, "down,r2")->residual, hk_test_tensor(s, "h"));
    hkc_kernel_key_t key;
    hkc_arg_t args[HKC_MAX_ARGS];
    assert_int_equal(hkc_lower_node(s, (size_t)(on - s->nodes), 3, &key, args), HKC_GEMM_N_ARGS_LN);
    assert_true(key.norm_c == HKC_NORM_C_RMSNORM && key.has_sum && key.has_residual && key.norm_cols == 8);
    assert_int_equal(args[HKC_GEMM_ARG_LN_BETA].kind, HK_ARG_NULL);
    assert_int_equal(args[HKC_GEMM_ARG_LN_SUM].i, hk_test_tensor(s, "h"));
    char name[96];
    hkc_kernel_key_name(&key, name, sizeof name);
    assert_string_equal(name, "hk_gemm_f16_res_rms8_sum_a8");
    expect_same_function(ref, s, 1);
    expect_same_function(ref, s, 3);
  }
  hkc_spec_destroy(s);
  /* neither (fusion_no_ln as well) */
  s = hk_test_spec_parse(k_llama);
  s->fusion_no_norm = 1;
  s->fusion_no_ln = 1;
  hk_test_spec_fuse(s, HKC_FUSION_AUTO);
  check_consistent(s);
  assert_true(s->fusion_norm_blocked && s->fusion_ln_blocked);
  assert_int_equal(s->n_nodes, 7);
  /* gate + silu + mul by up's product over the same A: one dual gemm, up's output gone */
  const hkc_node_t *gate = N(s, "up,gate,sg,glu");
  assert_int_equal(gate->op, HK_OP_GEMM);
  assert_int_equal(gate->act, HK_ACT_SILU);
  assert_int_equal(gate->n_in, 3);
  assert_int_equal(gate->in[0], hk_test_tensor(s, "hn"));
  assert_int_equal(gate->in[1], hk_test_tensor(s, "wg"));
  assert_int_equal(gate->in[2], hk_test_tensor(s, "wu"));
  assert_int_equal(gate->mul, HKC_NONE);
  assert_int_equal(gate->out, hk_test_tensor(s, "m"));
  assert_int_equal(hkc_tensor_find(s, "ut"), HKC_NONE);
  const hkc_node_t *o = N(s, "o,r1");
  assert_int_equal(o->residual, hk_test_tensor(s, "x"));
  assert_int_equal(o->out, hk_test_tensor(s, "h"));
  assert_int_equal(N(s, "down,r2")->residual, hk_test_tensor(s, "h"));
  assert_int_equal(N(s, "sm")->op, HK_OP_SOFTMAX);
  hkc_kernel_key_t key;
  hkc_arg_t args[HKC_MAX_ARGS];
  assert_int_equal(hkc_lower_node(s, (size_t)(gate - s->nodes), 1, &key, args), HKC_GEMM_N_ARGS_DUAL);
  assert_true(key.dual && !key.has_mul && !key.has_bias && !key.has_residual);
  assert_int_equal(args[HKC_GEMM_ARG_MUL].kind, HK_ARG_NULL);
  assert_int_equal(args[HKC_GEMM_ARG_B2].kind, HK_ARG_TENSOR);
  assert_int_equal(args[HKC_GEMM_ARG_B2].i, hk_test_tensor(s, "wu"));
  char name[96];
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_gemm_f16_silu_dual_a4"); /* N = 12 */
  expect_same_function(ref, s, 1);
  expect_same_function(ref, s, 3);
  hkc_spec_destroy(ref);
  hkc_spec_destroy(s);

  /* A build with a target that has no dual kernel (hkc_build sets fusion_no_dual: sm_80,
   * sm_90, AMD) keeps the gate gemm with up's output as its fused mul. */
  s = hk_test_spec_parse(k_llama);
  s->fusion_no_dual = 1;
  s->fusion_no_norm = 1;
  s->fusion_no_ln = 1;
  hk_test_spec_fuse(s, HKC_FUSION_AUTO);
  check_consistent(s);
  assert_int_equal(s->n_nodes, 8);
  gate = N(s, "gate,sg,glu");
  assert_int_equal(gate->n_in, 2);
  assert_int_equal(gate->mul, hk_test_tensor(s, "ut"));
  assert_int_equal(N(s, "up")->op, HK_OP_GEMM);
  assert_true(N(s, "up") < gate);
  hkc_spec_destroy(s);

  /* SwiGLU written with act: silu on the gate gemm, up listed first. */
  static const char swiglu[] = HEADER
      "inputs: {x: [batch, s, h]}\n"
      "params: {wg: [h, f], wu: [h, f], wd: [f, h]}\n"
      "graph:\n"
      "  - {name: up, op: gemm, in: [x, wu], out: ut}\n"
      "  - {name: gate, op: gemm, in: [x, wg], act: silu, out: gt}\n"
      "  - {name: glu, op: mul, in: [gt, ut], out: m}\n"
      "  - {name: down, op: gemm, in: [m, wd], out: y}\n"
      "outputs: [y]\n";
  ref = hk_test_spec_parse(swiglu), s = hk_test_spec_parse(swiglu);
  hk_test_spec_fuse(s, -1);
  check_consistent(s);
  assert_int_equal(s->n_nodes, 3);
  const hkc_node_t *f = N(s, "up,glu"); /* the first gemm in order takes the mul */
  assert_int_equal(f->mul, hk_test_tensor(s, "gt"));
  assert_int_equal(f->act, HK_ACT_NONE);
  assert_true(N(s, "gate") < f);
  expect_same_function(ref, s, 3);
  hkc_spec_destroy(ref);
  hkc_spec_destroy(s);
}

/* ---- auto: rope in a gemm's epilogue ---------------------------------------------------------- */
static void test_auto_rope(void **state) {
  (void)state;
  /* a packed q|k|v of 2 + 1 + 1 heads of 16 (v passes), after a bias, positions from 3 */
  static const char text[] = HEADER
      "inputs: {x: [batch, s, h]}\n"
      "params: {wq: [h, 64], bq: [64], w8: [h, 32]}\n"
      "graph:\n"
      "  - {name: q, op: gemm, in: [x, wq], out: q0}\n"
      "  - {name: qb, op: add, in: [q0, bq], out: q1}\n"
      "  - {name: qr, op: rope, in: [q1], heads: 2, kv_heads: 1, packed: true, theta: 10000.0, offset: 3, out: y}\n"
      "  - {name: g, op: gemm, in: [x, wq], act: gelu, out: g0}\n"
      "  - {name: gr, op: rope, in: [g0], heads: 4, out: y2}\n"
      "  - {name: e, op: gemm, in: [x, w8], out: e0}\n"
      "  - {name: er, op: rope, in: [e0], heads: 4, out: y3}\n"
      "outputs: [y, y2, y3]\n";
  hkc_spec_t *ref = hk_test_spec_parse(text), *s = hk_test_spec_parse(text);
  hk_test_spec_fuse(s, -1);
  check_consistent(s);
  /* q + bias + rope: one node; after an activation (gr) or with head_dim 8 (er): apart */
  assert_int_equal(s->n_nodes, 5);
  const hkc_node_t *q = N(s, "q,qb,qr");
  assert_true(q->rope && q->packed);
  assert_int_equal(q->bias, hk_test_tensor(s, "bq"));
  assert_int_equal(q->heads, 2);
  assert_int_equal(q->kv_heads, 1);
  assert_int_equal(q->pos_offset, 3);
  assert_int_equal(N(s, "gr")->op, HK_OP_ROPE);
  assert_int_equal(N(s, "er")->op, HK_OP_ROPE);
  assert_false(N(s, "g")->rope || N(s, "e")->rope);
  assert_false(s->fusion_rope_blocked);
  hkc_kernel_key_t key;
  hkc_arg_t args[HKC_MAX_ARGS];
  assert_int_equal(hkc_lower_node(s, (size_t)(q - s->nodes), 3, &key, args), HKC_GEMM_N_ARGS_ROPE);
  assert_true(key.rope && key.has_bias && !key.dual && !key.has_mul && key.head_dim == 16);
  assert_int_equal(args[HKC_GEMM_ARG_M].i, 15);
  assert_int_equal(args[HKC_GEMM_ARG_ROPE_SEQ].i, 5);
  assert_int_equal(args[HKC_GEMM_ARG_ROPE_COLS].i, 48); /* q and k heads */
  assert_int_equal(args[HKC_GEMM_ARG_ROPE_POS0].i, 3);
  assert_true(args[HKC_GEMM_ARG_ROPE_THETA].kind == HK_ARG_F32 && args[HKC_GEMM_ARG_ROPE_THETA].f == 10000.0f);
  char name[96];
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_gemm_f16_bias_rope_a8_d16");
  expect_same_function(ref, s, 1);
  expect_same_function(ref, s, 3);
  hkc_spec_destroy(s);

  /* a target without a rope epilogue (hkc_fuse_for_targets sets fusion_no_rope): apart, and
   * recorded for the provenance */
  s = hk_test_spec_parse(text);
  s->fusion_no_rope = 1;
  hk_test_spec_fuse(s, -1);
  check_consistent(s);
  assert_int_equal(s->n_nodes, 6);
  assert_true(N(s, "q,qb")->bias != HKC_NONE && !N(s, "q,qb")->rope);
  assert_int_equal(N(s, "qr")->op, HK_OP_ROPE);
  assert_true(s->fusion_rope_blocked);
  expect_same_function(ref, s, 3);
  hkc_spec_destroy(s);
  hkc_spec_destroy(ref);
}

/* ---- auto: add + norm --------------------------------------------------------------------- */
static void test_auto_add_norm(void **state) {
  (void)state;
  /* r is read by the norm and by `side` (which comes between them): sum_out keeps it,
   * and `side` moves after the fused norm. r2 is only the norm's: eliminated. */
  static const char text[] = HEADER
      "inputs: {a: [batch, s, h], b: [batch, s, h], c: [batch, s, h]}\n"
      "params: {g: [h], be: [h]}\n"
      "graph:\n"
      "  - {name: add1, op: add, in: [a, b], out: r}\n"
      "  - {name: side, op: softmax, in: [r], out: y2}\n"
      "  - {name: ln, op: layernorm, in: [r], gamma: g, beta: be, eps: 1.0e-3, out: y1}\n"
      "  - {name: add2, op: add, in: [y1, c], out: r2}\n"
      "  - {name: rms, op: rmsnorm, in: [r2], gamma: g, out: y3}\n"
      "outputs: [y1, y2, y3]\n";
  hkc_spec_t *ref = hk_test_spec_parse(text), *s = hk_test_spec_parse(text);
  hk_test_spec_fuse(s, HKC_FUSION_AUTO);
  check_consistent(s);
  assert_int_equal(s->n_nodes, 3);
  const hkc_node_t *ln = N(s, "add1,ln");
  assert_int_equal(ln->op, HK_OP_LAYERNORM);
  assert_int_equal(ln->in[0], hk_test_tensor(s, "a"));
  assert_int_equal(ln->add_in, hk_test_tensor(s, "b"));
  assert_int_equal(ln->sum_out, hk_test_tensor(s, "r"));
  assert_int_equal(ln->out, hk_test_tensor(s, "y1"));
  assert_true(ln->eps == 1.0e-3f);
  assert_int_equal(s->tensors[hk_test_tensor(s, "r")].producer, (int)(ln - s->nodes));
  assert_true(N(s, "side") > ln);
  const hkc_node_t *rms = N(s, "add2,rms");
  assert_int_equal(rms->in[0], hk_test_tensor(s, "y1"));
  assert_int_equal(rms->add_in, hk_test_tensor(s, "c"));
  assert_int_equal(rms->sum_out, HKC_NONE);
  assert_int_equal(hkc_tensor_find(s, "r2"), HKC_NONE);
  hkc_kernel_key_t key;
  hkc_arg_t args[HKC_MAX_ARGS];
  char name[96];
  assert_int_equal(hkc_lower_node(s, (size_t)(ln - s->nodes), 3, &key, args), 9);
  assert_true(key.has_add && key.has_sum);
  assert_int_equal(args[7].i, hk_test_tensor(s, "b"));
  assert_int_equal(args[8].kind, HK_ARG_TENSOR);
  assert_int_equal(args[8].i, hk_test_tensor(s, "r"));
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_layernorm_f16_add_sum_a8");
  assert_int_equal(hkc_lower_node(s, (size_t)(rms - s->nodes), 3, &key, args), 8);
  assert_true(key.has_add && !key.has_sum);
  assert_int_equal(args[7].kind, HK_ARG_NULL);
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_rmsnorm_f16_add_a8");
  expect_same_function(ref, s, 3);
  hkc_spec_destroy(ref);
  hkc_spec_destroy(s);

  /* The sum is a graph output: kept through sum_out. A broadcast add is not fused. */
  static const char out_sum[] = HEADER
      "inputs: {a: [batch, s, h], b: [batch, s, h]}\n"
      "params: {g: [h]}\n"
      "graph:\n"
      "  - {name: add1, op: add, in: [a, b], out: r}\n"
      "  - {name: n1, op: rmsnorm, in: [r], gamma: g, out: y}\n"
      "  - {name: add2, op: add, in: [y, g], out: r3}\n"
      "  - {name: n2, op: rmsnorm, in: [r3], gamma: g, out: y3}\n"
      "outputs: [y, r, y3]\n";
  ref = hk_test_spec_parse(out_sum), s = hk_test_spec_parse(out_sum);
  hk_test_spec_fuse(s, HKC_FUSION_AUTO);
  check_consistent(s);
  assert_int_equal(N(s, "add1,n1")->sum_out, hk_test_tensor(s, "r"));
  assert_int_equal(s->tensors[hk_test_tensor(s, "r")].role, HK_ROLE_OUTPUT);
  assert_int_equal(N(s, "n2")->add_in, HKC_NONE); /* add2 broadcasts g: stays */
  assert_int_equal(N(s, "add2")->op, HK_OP_ADD);
  expect_same_function(ref, s, 1);
  hkc_spec_destroy(ref);
  hkc_spec_destroy(s);
}

/* ---- auto: element-wise chains ------------------------------------------------------------- */
static void test_auto_ewchain(void **state) {
  (void)state;
  static const char text[] =
      "hkc: 1\nname: t\ndtype: f32\nbatch_sizes: [1, 4]\ndims: {s: 3, c: 7}\n"
      "inputs: {x: [batch, s, c], z: [batch, s, c]}\n"
      "params: {row: [c], one: [1], mat: [s, c]}\n"
      "graph:\n"
      "  - {name: e1, op: add, in: [row, x], out: t1}\n"
      "  - {name: e2, op: gelu, in: [t1], out: t2}\n"
      "  - {name: e3, op: mul, in: [z, t2], out: t3}\n"
      "  - {name: e4, op: mul, in: [t3, one], out: t4}\n"
      "  - {name: e5, op: add, in: [t4, row], out: y}\n"
      "  - {name: f1, op: mul, in: [mat, row], out: u1}\n"
      "  - {name: f2, op: relu, in: [u1], out: u2}\n"
      "  - {name: f3, op: add, in: [u2, x], out: y2}\n"
      "outputs: [y, y2]\n";
  hkc_spec_t *ref = hk_test_spec_parse(text), *s = hk_test_spec_parse(text);
  hk_test_spec_fuse(s, HKC_FUSION_AUTO);
  check_consistent(s);
  assert_int_equal(s->n_nodes, 2);
  const hkc_node_t *c = N(s, "e1,e2,e3,e4,e5");
  assert_int_equal(c->op, HK_OP_EWCHAIN);
  assert_string_equal(c->name, "e1");
  /* row is in0 (the first add's first operand); the last add reads it again as a new
   * operand: steps only name operands 1..4 */
  assert_string_equal(c->program, "a1gm2m3a4");
  assert_int_equal(c->n_in, 5);
  assert_int_equal(c->in[0], hk_test_tensor(s, "row"));
  assert_int_equal(c->in[1], hk_test_tensor(s, "x"));
  assert_int_equal(c->in[2], hk_test_tensor(s, "z"));
  assert_int_equal(c->in[3], hk_test_tensor(s, "one"));
  assert_int_equal(c->in[4], hk_test_tensor(s, "row"));
  const hkc_node_t *d = N(s, "f1,f2,f3");
  assert_string_equal(d->program, "m1ra2");
  assert_int_equal(d->in[0], hk_test_tensor(s, "mat"));
  for (int i = 0; i < 4; i++) assert_int_equal(hkc_tensor_find(s, (const char *[]){"t1", "t2", "t3", "t4"}[i]), HKC_NONE);
  /* lowering: out, n, then each operand and its element count (broadcast by i % n_j) */
  hkc_kernel_key_t key;
  hkc_arg_t args[HKC_MAX_ARGS];
  int n = hkc_lower_node(s, (size_t)(d - s->nodes), 4, &key, args);
  assert_int_equal(n, 2 + 2 * 3);
  assert_int_equal(key.op, HK_OP_EWCHAIN);
  assert_string_equal(key.program, "m1ra2");
  assert_int_equal(key.align, 1); /* c = 7 */
  assert_int_equal(args[0].i, hk_test_tensor(s, "y2"));
  assert_int_equal(args[1].i, 4 * 3 * 7);
  assert_int_equal(args[2].i, hk_test_tensor(s, "mat"));
  assert_int_equal(args[3].i, 3 * 7);
  assert_int_equal(args[4].i, hk_test_tensor(s, "row"));
  assert_int_equal(args[5].i, 7);
  assert_int_equal(args[6].i, hk_test_tensor(s, "x"));
  assert_int_equal(args[7].i, 4 * 3 * 7);
  char name[96];
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_ewchain_f32_m1ra2");
  expect_same_function(ref, s, 1);
  expect_same_function(ref, s, 4);
  hkc_spec_destroy(ref);
  hkc_spec_destroy(s);
}

/* A chain longer than 5 operands splits; the first ewchain stops where it must. */
static void test_auto_ewchain_limits(void **state) {
  (void)state;
  char text[4096];
  int len = sprintf(text, "hkc: 1\nname: t\ndtype: f32\nbatch_sizes: [2]\ninputs: {x: [batch, 6]}\nparams: {");
  for (int i = 0; i < 8; i++) len += sprintf(text + len, "%sp%d: [6]", i ? ", " : "", i);
  len += sprintf(text + len, "}\ngraph:\n");
  for (int i = 0; i < 8; i++) {
    char prev[8];
    snprintf(prev, sizeof prev, i ? "t%d" : "x", i - 1);
    len += sprintf(text + len, "  - {name: n%d, op: add, in: [%s, p%d], out: t%d}\n", i, prev, i, i);
  }
  sprintf(text + len, "outputs: [t7]\n");
  hkc_spec_t *ref = hk_test_spec_parse(text), *s = hk_test_spec_parse(text);
  hk_test_spec_fuse(s, HKC_FUSION_AUTO);
  check_consistent(s);
  assert_int_equal(s->n_nodes, 2);
  const hkc_node_t *a = N(s, "n0,n1,n2,n3"), *b = N(s, "n4,n5,n6,n7");
  assert_string_equal(a->program, "a1a2a3a4");
  assert_int_equal(a->n_in, 5);
  assert_int_equal(b->in[0], hk_test_tensor(s, "t3"));
  expect_same_function(ref, s, 2);
  hkc_spec_destroy(ref);
  hkc_spec_destroy(s);
}

/* ---- what auto must leave alone ------------------------------------------------------------ */
static void test_auto_stops(void **state) {
  (void)state;
  /* h is a graph output: the gemm chain stops before it; hr is read twice: stays. The
   * residual comes before the activation: the epilogue takes the residual, not the
   * act, and the chain stops there (gelu stays its own node). */
  static const char text[] = HEADER
      "inputs: {x: [batch, s, h]}\n"
      "params: {w: [h, h], w2: [h, h], w3: [h, h], bb: [h]}\n"
      "graph:\n"
      "  - {name: fc, op: gemm, in: [x, w], out: h0}\n"
      "  - {name: act, op: relu, in: [h0], out: hr}\n"
      "  - {name: twice, op: add, in: [hr, hr], out: hh}\n"
      "  - {name: fc2, op: gemm, in: [hh, w2], out: k0}\n"
      "  - {name: res, op: add, in: [k0, x], out: k1}\n"
      "  - {name: late, op: gelu, in: [k1], out: k2}\n"
      "  - {name: lateb, op: add, in: [k2, bb], out: k3}\n"
      "  - {name: fc3, op: gemm, in: [k3, w3], out: o0}\n"
      "  - {name: tail, op: silu, in: [o0], out: y}\n"
      "outputs: [y, h0]\n";
  hkc_spec_t *ref = hk_test_spec_parse(text), *s = hk_test_spec_parse(text);
  hk_test_spec_fuse(s, HKC_FUSION_AUTO);
  check_consistent(s);
  assert_int_equal(N(s, "fc")->act, HK_ACT_NONE); /* h0 is an output */
  assert_int_equal(s->tensors[hk_test_tensor(s, "h0")].role, HK_ROLE_OUTPUT);
  /* relu -> add(hr, hr): hr read twice, so no chain through it */
  assert_int_equal(N(s, "act")->op, HK_OP_RELU);
  assert_int_equal(N(s, "twice")->op, HK_OP_ADD);
  const hkc_node_t *f2 = N(s, "fc2,res");
  assert_int_equal(f2->residual, hk_test_tensor(s, "x"));
  assert_int_equal(f2->act, HK_ACT_NONE);
  /* gelu then a bias-shaped add: an element-wise chain, not part of fc2 */
  const hkc_node_t *ch = N(s, "late,lateb");
  assert_int_equal(ch->op, HK_OP_EWCHAIN);
  assert_string_equal(ch->program, "ga1");
  assert_int_equal(N(s, "fc3,tail")->act, HK_ACT_SILU);
  expect_same_function(ref, s, 3);
  hkc_spec_destroy(ref);
  hkc_spec_destroy(s);

  /* fusion: none leaves every node and tensor as it was. */
  s = hk_test_spec_parse(text);
  size_t nn = s->n_nodes, nt = s->n_tensors;
  hk_test_spec_fuse(s, HKC_FUSION_NONE);
  assert_int_equal(s->n_nodes, nn);
  assert_int_equal(s->n_tensors, nt);
  for (size_t i = 0; i < nn; i++) assert_null(s->nodes[i].fused_names);
  assert_int_equal(s->fusion, HKC_FUSION_NONE);
  hkc_spec_destroy(s);

  /* a spec that says `fusion: none` is kept unfused when no mode is forced */
  char none[sizeof text + 32];
  snprintf(none, sizeof none, "%sfusion: none\n", text);
  s = hk_test_spec_parse(none);
  hk_test_spec_fuse(s, -1);
  assert_int_equal(s->n_nodes, nn);
  hkc_spec_destroy(s);
}

/* ---- explicit groups ------------------------------------------------------------------------- */
static const char k_groups_base[] = HEADER
    "inputs: {x: [batch, s, h], z: [batch, s, h]}\n"
    "params: {w: [h, h], w2: [h, h], bb: [h], g: [h], be: [h]}\n"
    "graph:\n"
    "  - {name: fc, op: gemm, in: [x, w], out: h0}\n"
    "  - {name: fb, op: add, in: [h0, bb], out: h1}\n"
    "  - {name: res, op: add, in: [h1, z], out: h2}\n"
    "  - {name: act, op: gelu, in: [h2], out: h3}\n"
    "  - {name: ln, op: layernorm, in: [h3], gamma: g, beta: be, out: h4}\n"
    "  - {name: fc2, op: gemm, in: [h4, w2], out: h5}\n"
    "  - {name: at, op: attention, in: [h5, h5, h5], heads: 2, out: h6}\n"
    "  - {name: r2, op: add, in: [h6, h4], out: h7}\n"
    "  - {name: n2, op: rmsnorm, in: [h7], gamma: g, out: y}\n"
    "outputs: [y]\n";

/* Parses base + `fusion: <fusion>` (line 19) and expects hkc_fuse to fail at the place
 * of `group` in that line, with every word, leaving the spec untouched. */
static void expect_group_error(const char *fusion, const char *group, const char *w1, const char *w2) {
  char text[4096];
  snprintf(text, sizeof text, "%sfusion: %s\n", k_groups_base, fusion);
  const char *at = strstr(fusion, group);
  assert_non_null(at);
  int col = 9 + (int)(at - fusion);
  hkc_spec_t *s = hk_test_spec_parse(text);
  size_t nn = s->n_nodes, nt = s->n_tensors;
  hkc_diag_capture(diag, sizeof diag);
  int rc = hkc_fuse(s, -1);
  hkc_diag_capture(NULL, 0);
  char where[64];
  snprintf(where, sizeof where, "t.yaml:19:%d: ", col);
  if (rc != -1 || strncmp(diag, where, strlen(where)) != 0 || !strstr(diag, w1) || (w2 && !strstr(diag, w2)))
    fail_msg("fusion '%s': expected an error at %s with '%s' and '%s', got rc %d:\n%s", fusion, where, w1,
             w2 ? w2 : "", rc, diag);
  assert_int_equal(s->n_nodes, nn);
  assert_int_equal(s->n_tensors, nt);
  for (size_t i = 0; i < nn; i++) assert_null(s->nodes[i].fused_names);
  hkc_spec_destroy(s);
}

static void test_group_errors(void **state) {
  (void)state;
  expect_group_error("{groups: [[fc, fb, res, act]]}", "[fc,",
                     "fusion group [fc, fb, res, act] cannot be one kernel: node 'act': activation after the residual "
                     "add cannot be fused into gemm 'fc' (epilogue order: bias, act, mul, residual; or bias, rope)",
                     NULL);
  expect_group_error("{groups: [[fc], [fc2, at]]}", "[fc2", "node 'at': op 'attention' cannot be fused",
                     "kernel of its own");
  expect_group_error("{groups: [[fc, fb, fc2]]}", "[fc,", "node 'fc2': a fused group holds one gemm", "SwiGLU");
  expect_group_error("{groups: [[fc, res]]}", "[fc,", "node 'res': it does not read 'h0'", "chain");
  expect_group_error("{groups: [[res, act, ln]]}", "[res", "node 'res'", "exactly one residual add");
  expect_group_error("{groups: [[act, ln]]}", "[act", "node 'act': only a residual add can be fused into layernorm 'ln'",
                     NULL);
  expect_group_error("{groups: [[ln, fc2]]}", "[ln", "node 'ln': it runs before gemm 'fc2'", NULL);
  expect_group_error("{groups: [[at, r2, n2]]}", "[at", "node 'at': op 'attention'", NULL);
}

static void test_group_errors_more(void **state) {
  (void)state;
  /* an intermediate read outside the group, or a graph output, must stay: error */
  static const char text[] = HEADER
      "inputs: {x: [batch, s, h]}\n"
      "params: {w: [h, h], g: [h]}\n"
      "graph:\n"
      "  - {name: fc, op: gemm, in: [x, w], out: h0}\n"
      "  - {name: a1, op: relu, in: [h0], out: h1}\n"
      "  - {name: a2, op: silu, in: [h0], out: h2}\n"
      "  - {name: m, op: mul, in: [h1, h2], out: y}\n"
      "  - {name: sq, op: mul, in: [y, y], out: y2}\n"
      "outputs: [y2, h1]\n";
  struct {
    const char *groups;
    const char *w1, *w2;
  } cases[] = {
      {"[[fc, a1]]", "node 'a1': tensor 'h0' is also read by node 'a2'", "must be stored"},
      {"[[a1, m]]", "node 'm': tensor 'h1' is a graph output", NULL},
      {"[[m, sq]]", "node 'sq': it reads tensor 'y' twice", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char t[2048];
    snprintf(t, sizeof t, "%sfusion:\n  groups: %s\n", text, cases[i].groups);
    hkc_spec_t *s = hk_test_spec_parse(t);
    hkc_diag_capture(diag, sizeof diag);
    int rc = hkc_fuse(s, -1);
    hkc_diag_capture(NULL, 0);
    if (rc != -1 || strncmp(diag, "t.yaml:16:12: ", 14) != 0 || !strstr(diag, cases[i].w1) ||
        (cases[i].w2 && !strstr(diag, cases[i].w2)))
      fail_msg("groups %s: expected t.yaml:16:12 '%s', got rc %d:\n%s", cases[i].groups, cases[i].w1, rc, diag);
    hkc_spec_destroy(s);
  }
}

static void test_groups_ok(void **state) {
  (void)state;
  char text[4096];
  snprintf(text, sizeof text, "%sfusion: {groups: [[fc, fb, res], [r2, n2], [fc2]]}\n", k_groups_base);
  hkc_spec_t *s = hk_test_spec_parse(text);
  size_t nt = s->n_tensors;
  hk_test_spec_fuse(s, -1);
  check_consistent(s);
  assert_int_equal(s->fusion, HKC_FUSION_GROUPS);
  assert_int_equal(s->n_groups, 0); /* consumed */
  assert_int_equal(s->n_nodes, 6);
  const hkc_node_t *g = N(s, "fc,fb,res");
  assert_int_equal(g->bias, hk_test_tensor(s, "bb"));
  assert_int_equal(g->residual, hk_test_tensor(s, "z"));
  assert_int_equal(g->out, hk_test_tensor(s, "h2"));
  const hkc_node_t *n = N(s, "r2,n2");
  assert_int_equal(n->op, HK_OP_RMSNORM);
  assert_int_equal(n->in[0], hk_test_tensor(s, "h6"));
  assert_int_equal(n->add_in, hk_test_tensor(s, "h4"));
  /* outside the groups nothing fuses, even when auto would (act) */
  assert_int_equal(N(s, "act")->op, HK_OP_GELU);
  assert_int_equal(N(s, "fc2")->n_fused, 1);
  assert_int_equal(s->n_tensors, nt - 3); /* h0, h1, h7 */
  hkc_spec_destroy(s);

  /* --fusion auto overrides explicit groups; --fusion none drops them */
  s = hk_test_spec_parse(text);
  hk_test_spec_fuse(s, HKC_FUSION_AUTO);
  check_consistent(s);
  assert_int_equal(s->fusion, HKC_FUSION_AUTO);
  assert_int_equal(N(s, "fc,fb,res")->residual, hk_test_tensor(s, "z"));
  hkc_spec_destroy(s);
}

/* ---- random graphs: the fused spec computes the same function ------------------------------------ */
static void test_random_same_function(void **state) {
  (void)state;
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 4242);
  int fused_total = 0, kinds_seen = 0;
  for (int trial = 0; trial < 80; trial++) {
    char *text = malloc(1 << 16);
    int len = sprintf(text,
                      "hkc: 1\nname: r\ndtype: f32\nbatch_sizes: [2]\ndims: {s: 3, n: 5}\n"
                      "inputs: {x: [batch, s, n], z: [batch, s, n]}\n"
                      "params: {w0: [n, n], w1: [n, n], bv: [n], g: [n], be: [n], sc: [1]}\n"
                      "graph:\n");
    int n = 3 + (int)hk_test_uniform(&rng, 0, 22);
    char outs[512];
    int olen = 0;
    for (int i = 0; i < n; i++) {
      char a[16], b[16];
      int pa = hk_test_uniform(&rng, 0, 1) < 0.6 ? i - 1 : (int)floor(hk_test_uniform(&rng, -2, i));
      int pb = (int)floor(hk_test_uniform(&rng, -2, i));
      snprintf(a, sizeof a, pa == -2 ? "z" : pa < 0 ? "x" : "t%d", pa);
      snprintf(b, sizeof b, pb == -2 ? "z" : pb < 0 ? "x" : "t%d", pb);
      int kind = (int)hk_test_uniform(&rng, 0, 10);
      static const char *const un[] = {"relu", "gelu", "silu"};
      switch (kind) {
      case 0:
      case 1:
        len += sprintf(text + len, "  - {name: n%d, op: gemm, in: [%s, w%d]%s, out: t%d}\n", i, a, i % 2,
                       i % 3 == 0 ? ", bias: bv" : "", i);
        break;
      case 2: len += sprintf(text + len, "  - {name: n%d, op: add, in: [%s, %s], out: t%d}\n", i, a, b, i); break;
      case 3: len += sprintf(text + len, "  - {name: n%d, op: add, in: [bv, %s], out: t%d}\n", i, a, i); break;
      case 4: len += sprintf(text + len, "  - {name: n%d, op: mul, in: [%s, %s], out: t%d}\n", i, b, a, i); break;
      case 5: len += sprintf(text + len, "  - {name: n%d, op: mul, in: [%s, sc], out: t%d}\n", i, a, i); break;
      case 6:
      case 7:
        len += sprintf(text + len, "  - {name: n%d, op: %s, in: [%s], out: t%d}\n", i, un[i % 3], a, i);
        break;
      case 8:
        len += sprintf(text + len, "  - {name: n%d, op: layernorm, in: [%s], gamma: g, beta: be, out: t%d}\n", i, a, i);
        break;
      default:
        if (i % 2)
          len += sprintf(text + len, "  - {name: n%d, op: rmsnorm, in: [%s], gamma: g, out: t%d}\n", i, a, i);
        else
          len += sprintf(text + len, "  - {name: n%d, op: softmax, in: [%s], out: t%d}\n", i, a, i);
        break;
      }
      if (i == n - 1 || hk_test_uniform(&rng, 0, 1) < 0.12)
        olen += snprintf(outs + olen, sizeof outs - (size_t)olen, "%st%d", olen ? ", " : "", i);
    }
    sprintf(text + len, "outputs: [%s]\n", outs);
    hkc_spec_t *ref = hk_test_spec_parse(text), *s = hk_test_spec_parse(text);
    hk_test_spec_fuse(s, HKC_FUSION_AUTO);
    check_consistent(s);
    fused_total += (int)(ref->n_nodes - s->n_nodes);
    for (size_t j = 0; j < s->n_nodes; j++) {
      const hkc_node_t *nd = &s->nodes[j];
      kinds_seen |= (nd->op == HK_OP_EWCHAIN) << 0 | (nd->sum_out != HKC_NONE) << 1 | (nd->mul != HKC_NONE) << 2 |
                    (nd->add_in != HKC_NONE && nd->sum_out == HKC_NONE) << 3 | (nd->residual != HKC_NONE) << 4 |
                    (nd->norm_c == HKC_NORM_C_LAYERNORM) << 5 | (nd->norm_c == HKC_NORM_C_RMSNORM) << 6 |
                    (nd->norm_c && nd->sum_out != HKC_NONE) << 7;
      hkc_kernel_key_t key;
      hkc_arg_t args[HKC_MAX_ARGS];
      if (hkc_lower_node(s, j, 2, &key, args) < 0) fail_msg("node %zu does not lower:\n%s", j, text);
    }
    expect_same_function(ref, s, 2);
    hkc_spec_destroy(ref);
    hkc_spec_destroy(s);
    free(text);
  }
  /* the generator must actually exercise every fused form */
  assert_true(fused_total > 80);
  assert_int_equal(kinds_seen, 255);
}

/* ---- generation: the cache ops and sample run alone; a rope with ctx or scaling stays out of the gemm */
static void test_generation_apart(void **state) {
  (void)state;
  static const char text[] = HEADER
      "inputs: {x: [batch, h], ctx: {shape: [batch], dtype: i32}, x3: [batch, s, h],\n"
      "         sp: {shape: [batch, 4], dtype: i32}}\n"
      "params: {w: [h, 64], b: [64]}\n"
      "state: {kc: [1, 2, 8, 16], vc: [1, 2, 8, 16]}\n"
      "graph:\n"
      "  - {name: g, op: gemm, in: [x, w], out: g0}\n"
      "  - {name: gb, op: add, in: [g0, b], out: g1}\n"
      "  - {name: m, op: argmax, in: [x], out: sl}\n"
      "  - {name: r, op: rope, in: [g1], heads: 2, kv_heads: 1, packed: true, ctx: ctx, out: g2}\n"
      "  - {name: a, op: kv_append, in: [g2], heads: 2, kv_heads: 1, k_cache: kc, v_cache: vc, ctx: ctx, slot: sl, "
      "out: q}\n"
      "  - {name: t, op: kv_attention, in: [q], heads: 2, kv_heads: 1, k_cache: kc, v_cache: vc, ctx: ctx, slot: sl, "
      "out: o}\n"
      "  - {name: act, op: relu, in: [o], out: y}\n"
      "  - {name: sm, op: sample, in: [y, sp], out: tok}\n"
      "  - {name: p, op: gemm, in: [x3, w], out: s0}\n"
      "  - {name: sr, op: rope, in: [s0], heads: 4, scaling: linear, factor: 2, out: ys}\n"
      "outputs: [y, ys, tok]\n";
  hkc_spec_t *s = hk_test_spec_parse(text);
  hk_test_spec_fuse(s, -1);
  check_consistent(s);
  /* the bias joins its gemm and the packed rope with ctx the kv_append after it: the other
   * rope, the cache read, the relu after it and sample stay */
  assert_int_equal(s->n_nodes, 8);
  assert_true(N(s, "g,gb")->bias != HKC_NONE && !N(s, "g,gb")->rope);
  assert_false(N(s, "p")->rope);
  int ropes = 0;
  for (size_t i = 0; i < s->n_nodes; i++) ropes += s->nodes[i].op == HK_OP_ROPE;
  assert_int_equal(ropes, 1); /* sr; r is no node of its own */
  const hkc_node_t *a = N(s, "r,a"), *t = N(s, "t");
  assert_int_equal(a->op, HK_OP_KV_APPEND);
  assert_true(a->rope);
  assert_true(a->theta == 10000.0f); /* the rope's default, carried over */
  assert_int_equal(a->rope_scaling, HKC_ROPE_SCALING_NONE);
  assert_int_equal(a->in[0], hk_test_tensor(s, "g1")); /* the rope's input: g2 is gone */
  assert_int_equal(hkc_tensor_find(s, "g2"), HKC_NONE);
  assert_int_equal(N(s, "sr")->rope_scaling, HKC_ROPE_SCALING_LINEAR);
  assert_int_equal(N(s, "act")->op, HK_OP_RELU);
  assert_false(s->fusion_rope_blocked); /* not a target's limit */
  /* the eliminated g0 came before sl: every tensor field was renumbered */
  assert_int_equal(a->slot, hk_test_tensor(s, "sl"));
  assert_int_equal(t->slot, hk_test_tensor(s, "sl"));
  assert_int_equal(a->ctx, hk_test_tensor(s, "ctx"));
  assert_int_equal(a->k_cache, hk_test_tensor(s, "kc"));
  assert_int_equal(t->v_cache, hk_test_tensor(s, "vc"));
  assert_int_equal(t->in[0], hk_test_tensor(s, "q"));
  assert_int_equal(N(s, "sm")->op, HK_OP_SAMPLE);
  assert_int_equal(N(s, "sm")->in[0], hk_test_tensor(s, "y"));
  assert_int_equal(N(s, "sm")->in[1], hk_test_tensor(s, "sp"));
  hkc_spec_destroy(s);

  static const struct {
    const char *groups, *w1;
  } cases[] = {
      {"[[g, gb, r]]", "node 'r': rope 'r' has positions from ctx, which a gemm's rope epilogue does not take"},
      {"[[p, sr]]", "node 'sr': rope 'sr' has scaled frequencies, which a gemm's rope epilogue does not take"},
      {"[[t, act]]", "node 't': op 'kv_attention' cannot be fused with other nodes"},
      {"[[act, sm]]", "node 'sm': op 'sample' cannot be fused with other nodes"},
      {"[[a, t]]", "node 'a': op 'kv_append' cannot be fused with other nodes"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char text2[4096];
    snprintf(text2, sizeof text2, "%sfusion:\n  groups: %s\n", text, cases[i].groups);
    s = hk_test_spec_parse(text2);
    hkc_diag_capture(diag, sizeof diag);
    int rc = hkc_fuse(s, -1);
    hkc_diag_capture(NULL, 0);
    if (rc != -1 || strncmp(diag, "t.yaml:23:12: ", 14) != 0 || !strstr(diag, cases[i].w1))
      fail_msg("groups %s: expected t.yaml:23:12 '%s', got rc %d:\n%s", cases[i].groups, cases[i].w1, rc, diag);
    hkc_spec_destroy(s);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_auto_bert),
      cmocka_unit_test(test_auto_llama_swiglu),
      cmocka_unit_test(test_auto_rope),
      cmocka_unit_test(test_auto_add_norm),
      cmocka_unit_test(test_auto_ewchain),
      cmocka_unit_test(test_auto_ewchain_limits),
      cmocka_unit_test(test_auto_stops),
      cmocka_unit_test(test_group_errors),
      cmocka_unit_test(test_group_errors_more),
      cmocka_unit_test(test_groups_ok),
      cmocka_unit_test(test_random_same_function),
      cmocka_unit_test(test_generation_apart),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
