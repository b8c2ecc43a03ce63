/* SPDX-License-Identifier: Apache-2.0 */
/* Lowering: a spec node at one batch size -> kernel key + argument list (the kernel
 * ABI documented above HKC_MAX_ARGS in lower.h). Target-independent. */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "frontend/frontend.h"
#include "lower/lower.h"
#include "util/util.h"

/* Local helpers; ir.c owns the public hkc_tensor_* / hkc_*_name ones. Element counts are
 * ir.c's hkc_tensor_elems (overflow-checked): hkc_lower_node checks every tensor of the
 * node first, so the counts used below are positive and exact. */
#define tensor_elems hkc_tensor_elems

static int64_t tensor_dim(const hkc_tensor_t *t, uint32_t d, int64_t batch) {
  return d < t->rank ? hkc_dim_value(t->dims[d], batch) : 1;
}

static int64_t last_dim(const hkc_tensor_t *t, int64_t batch) {
  return t->rank ? tensor_dim(t, t->rank - 1, batch) : 1;
}

typedef struct arg_list {
  hkc_arg_t *args;
  int n;
} arg_list_t;

/* push_*: appends the argument that lands at index `at` of the op's layout (lower.h,
 * HKC_<OP>_ARG_*): the names say which argument each push is, the assert that the order
 * matches them. */
static void push_tensor(arg_list_t *l, int at, int tensor) {
  assert(at == l->n);
  (void)at;
  hkc_arg_t a = {.kind = tensor == HKC_NONE ? HK_ARG_NULL : HK_ARG_TENSOR, .i = tensor == HKC_NONE ? 0 : tensor};
  l->args[l->n++] = a;
}

static void push_i64(arg_list_t *l, int at, int64_t v) {
  assert(at == l->n);
  (void)at;
  l->args[l->n++] = (hkc_arg_t){.kind = HK_ARG_I64, .i = v};
}

/* Largest of 8, 4, 2, 1 dividing every value (see hkc_kernel_key_t.align). */
static int align_of(const int64_t *values, int n) {
  int a = 8;
  for (int i = 0; i < n; i++)
    while (a > 1 && values[i] % a != 0) a /= 2;
  return a;
}
int hkc_ew_program_operands(const char *p) {
  size_t len = strnlen(p, HKC_EW_PROGRAM_MAX);
  int nin = 1;
  if (len == 0 || len >= HKC_EW_PROGRAM_MAX) return -1;
  for (size_t i = 0; i < len; i++) {
    if (p[i] == 'a' || p[i] == 'm') {
      int j = p[++i] - '0';
      if (j < 1 || j >= HKC_MAX_NODE_IN) return -1;
      if (j + 1 > nin) nin = j + 1;
    } else if (!strchr("rgst", p[i])) {
      return -1;
    }
  }
  return nin;
}

static void push_f32(arg_list_t *l, int at, float v) {
  assert(at == l->n);
  (void)at;
  l->args[l->n++] = (hkc_arg_t){.kind = HK_ARG_F32, .f = v};
}

/* kv_append and kv_attention share their first 13 arguments (lower.h): the row tensor, the
 * caches [layers, slots, max_seq, kv_heads*dh], ctx, slot, out and the sizes; kv_attention
 * adds window (0: none) and scale. dh comes from the caches' width. n_args, or -1 when the
 * node's shapes are not the parser's (a hand-built IR). */
/* A rope folded into a kv_append (rope node rn's numbers) as the launch's tail from `at`: F theta,
 * then with rope_scaling its four (llama3's numbers, a linear one's 0). 0, or -1 when it cannot. */
static int push_kv_rope(arg_list_t *l, int at, const hkc_node_t *rn, int64_t dh, hkc_kernel_key_t *out_key) {
  if (dh % 2 != 0 || (unsigned)rn->rope_scaling > HKC_ROPE_SCALING_LLAMA3) return -1;
  push_f32(l, at, rn->theta);
  out_key->rope = 1;
  out_key->rope_scaling = rn->rope_scaling;
  if (rn->rope_scaling != HKC_ROPE_SCALING_NONE) {
    const int l3 = rn->rope_scaling == HKC_ROPE_SCALING_LLAMA3;
    push_f32(l, at + 1 + HKC_ROPE_SCALING_ARG_FACTOR, rn->rope_factor);
    push_f32(l, at + 1 + HKC_ROPE_SCALING_ARG_LOW, l3 ? rn->rope_low_freq : 0.0f);
    push_f32(l, at + 1 + HKC_ROPE_SCALING_ARG_HIGH, l3 ? rn->rope_high_freq : 0.0f);
    push_f32(l, at + 1 + HKC_ROPE_SCALING_ARG_ORIG, l3 ? (float)rn->rope_original_max : 0.0f);
  }
  return 0;
}

static int lower_kv(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch, hkc_kernel_key_t *out_key,
                    arg_list_t *l) {
  const int append = nd->op == HK_OP_KV_APPEND;
  /* a kv_append folded into this kv_attention at this bucket: its q|k|v rows come in */
  const hkc_node_t *ap = append ? NULL : hkc_kv_folded_append(spec, nd, batch);
  const int row_tensor = ap ? ap->in[0] : nd->in[0], packed = append || ap;
  const hkc_tensor_t *T = spec->tensors, *x = &T[row_tensor];
  if (nd->k_cache == HKC_NONE || nd->v_cache == HKC_NONE || nd->ctx == HKC_NONE || nd->slot == HKC_NONE) return -1;
  const hkc_tensor_t *kc = &T[nd->k_cache];
  const int64_t heads = nd->heads, kv_heads = nd->kv_heads, width = last_dim(kc, batch);
  if (kc->rank != 4 || x->rank != 2 || heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 || width % kv_heads != 0)
    return -1;
  const int64_t dh = width / kv_heads, rows = tensor_dim(x, 0, batch);
  if (last_dim(x, batch) != (packed ? heads + 2 * kv_heads : heads) * dh || nd->layer < 0 ||
      nd->layer >= tensor_dim(kc, 0, batch) || dh > INT32_MAX)
    return -1;
  /* the two layouts agree up to max_seq (lower.h) */
  _Static_assert((int)HKC_KV_APPEND_ARG_MAX_SEQ == (int)HKC_KV_ATTENTION_ARG_MAX_SEQ, "shared kv argument prefix");
  push_tensor(l, HKC_KV_APPEND_ARG_QKV, row_tensor);
  push_tensor(l, HKC_KV_APPEND_ARG_K_CACHE, nd->k_cache);
  push_tensor(l, HKC_KV_APPEND_ARG_V_CACHE, nd->v_cache);
  push_tensor(l, HKC_KV_APPEND_ARG_CTX, nd->ctx);
  push_tensor(l, HKC_KV_APPEND_ARG_SLOT, nd->slot);
  push_tensor(l, HKC_KV_APPEND_ARG_OUT, nd->out);
  push_i64(l, HKC_KV_APPEND_ARG_ROWS, rows);
  push_i64(l, HKC_KV_APPEND_ARG_HEADS, heads);
  push_i64(l, HKC_KV_APPEND_ARG_KV_HEADS, kv_heads);
  push_i64(l, HKC_KV_APPEND_ARG_DH, dh);
  push_i64(l, HKC_KV_APPEND_ARG_LAYER, nd->layer);
  push_i64(l, HKC_KV_APPEND_ARG_SLOTS, tensor_dim(kc, 1, batch));
  push_i64(l, HKC_KV_APPEND_ARG_MAX_SEQ, tensor_dim(kc, 2, batch));
  assert(l->n == HKC_KV_APPEND_N_ARGS);
  /* rope + append: the q and k heads rotated at ctx - 1 */
  if (append && nd->rope && push_kv_rope(l, HKC_KV_APPEND_ARG_THETA, nd, dh, out_key) != 0) return -1;
  if (!append) {
    push_i64(l, HKC_KV_ATTENTION_ARG_WINDOW, nd->window);
    push_f32(l, HKC_KV_ATTENTION_ARG_SCALE, nd->has_scale ? nd->scale : (float)(1.0 / sqrt((double)dh)));
    assert(l->n == HKC_KV_ATTENTION_N_ARGS);
    out_key->append = ap != NULL;
    if (ap) push_i64(l, HKC_KV_ATTENTION_ARG_APPEND, 1);
    if (ap && ap->rope && push_kv_rope(l, HKC_KV_ATTENTION_ARG_THETA, ap, dh, out_key) != 0) return -1;
  }
  /* row strides and column offsets in elements: the q | k | v heads, the caches' rows */
  out_key->align = align_of((int64_t[]){last_dim(x, batch), heads * dh, width, dh}, 4);
  out_key->head_dim = (int)dh;
  if (kc->dtype == HK_DTYPE_FP8_E4M3) snprintf(out_key->program, sizeof out_key->program, "e4m3"); /* FP8 caches */
  return l->n;
}

/* The dequant node whose copy tensor t is, or NULL. */
static const hkc_node_t *dequant_of(const hkc_spec_t *spec, int t) {
  if (t < 0 || (size_t)t >= spec->n_tensors) return NULL;
  const int p = spec->tensors[t].producer;
  if (p < 0 || (size_t)p >= spec->n_nodes || spec->nodes[p].op != HK_OP_DEQUANT) return NULL;
  return &spec->nodes[p];
}

/* Two quantized params with the same type, scale shape and blocks. */
static int same_quant(const hkc_spec_t *spec, const hkc_tensor_t *a, const hkc_tensor_t *b) {
  if (a->dtype != b->dtype || a->scale == HKC_NONE || b->scale == HKC_NONE || a->block[0] != b->block[0] ||
      a->block[1] != b->block[1])
    return 0;
  const hkc_tensor_t *sa = &spec->tensors[a->scale], *sb = &spec->tensors[b->scale];
  if (sa->rank != sb->rank) return 0;
  for (uint32_t d = 0; d < sa->rank; d++)
    if (!hkc_dim_equal(sa->dims[d], sb->dims[d])) return 0;
  return 1;
}

int hkc_gemm_folds_dequant(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch) {
  if (nd->op != HK_OP_GEMM || nd->dequant_fold_rows <= 0 || nd->n_in < 2) return 0;
  const hkc_node_t *dq = dequant_of(spec, nd->in[1]);
  if (!dq) return 0;
  const hkc_tensor_t *q = &spec->tensors[dq->in[0]];
  if (nd->n_in == 3) {
    const hkc_node_t *dq2 = dequant_of(spec, nd->in[2]);
    if (!dq2 || !same_quant(spec, q, &spec->tensors[dq2->in[0]])) return 0;
  }
  const hkc_tensor_t *a = &spec->tensors[nd->in[0]];
  const int64_t k = last_dim(a, batch);
  if (q->rank != 2 || hkc_dim_value(q->dims[0], batch) > INT32_MAX || hkc_dim_value(q->dims[1], batch) > INT32_MAX)
    return 0; /* the kernels index B's rows, columns and blocks in 32 bits */
  if (nd->fp8_act) return 1; /* the FP8 product reads B as stored at every batch size */
  return k > 0 && tensor_elems(a, batch) / k <= nd->dequant_fold_rows;
}

int hkc_gemm_fp8_eligible(const hkc_spec_t *spec, const hkc_node_t *nd) {
  if (nd->op != HK_OP_GEMM || nd->n_in < 2) return 0;
  for (int i = 1; i < nd->n_in && i <= 2; i++) {
    const hkc_node_t *dq = dequant_of(spec, nd->in[i]);
    if (!dq) return 0;
    const hkc_tensor_t *q = &spec->tensors[dq->in[0]];
    if (q->dtype != HK_DTYPE_FP8_E4M3 || q->scale == HKC_NONE || q->rank != 2) return 0;
    /* K runs along B's columns with trans_b, else along its rows: one block must span it */
    const hkc_dim_t kdim = q->dims[nd->trans_b ? 1 : 0];
    if (kdim.mul != 0 || q->block[nd->trans_b ? 1 : 0] < kdim.add) return 0;
  }
  return 1;
}

const hkc_node_t *hkc_gemm_folded_norm(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch) {
  if (nd->op != HK_OP_GEMM || nd->norm_fold_rows <= 0 || nd->norm_a || nd->n_in < 2) return NULL;
  const int a = nd->in[0];
  if (a < 0 || (size_t)a >= spec->n_tensors) return NULL;
  const int p = spec->tensors[a].producer;
  if (p < 0 || (size_t)p >= spec->n_nodes) return NULL;
  const hkc_node_t *nm = &spec->nodes[p];
  if (nm->op != HK_OP_RMSNORM || nm->add_in != HKC_NONE || nm->sum_out != HKC_NONE || nm->gamma == HKC_NONE)
    return NULL;
  const int64_t k = last_dim(&spec->tensors[a], batch);
  return k > 0 && tensor_elems(&spec->tensors[a], batch) / k <= nd->norm_fold_rows ? nm : NULL;
}

/* How many times node n reads tensor t (every operand and attribute tensor). */
static int reads_of(const hkc_node_t *n, int t) {
  int reads = 0;
  for (int i = 0; i < n->n_in && i < HKC_MAX_NODE_IN; i++) reads += n->in[i] == t;
  const int extra[] = {n->bias, n->residual, n->mul, n->gamma, n->beta,    n->add_in,  n->lengths,
                       n->mask, n->pos,      n->ctx, n->slot,  n->k_cache, n->v_cache};
  for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) reads += extra[i] == t;
  return reads;
}

const hkc_node_t *hkc_kv_folded_append(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch) {
  if (nd->op != HK_OP_KV_ATTENTION || nd->append_fold_rows <= 0 || nd->n_in < 1) return NULL;
  const int q = nd->in[0];
  if (q < 0 || (size_t)q >= spec->n_tensors || spec->tensors[q].role == HK_ROLE_OUTPUT) return NULL;
  const int p = spec->tensors[q].producer;
  if (p < 0 || (size_t)p >= spec->n_nodes) return NULL;
  const hkc_node_t *ap = &spec->nodes[p];
  if (ap->op != HK_OP_KV_APPEND || ap->out != q || ap->sum_out != HKC_NONE || ap->n_in < 1 ||
      ap->k_cache != nd->k_cache || ap->v_cache != nd->v_cache || ap->ctx != nd->ctx || ap->slot != nd->slot ||
      ap->layer != nd->layer || ap->heads != nd->heads || ap->kv_heads != nd->kv_heads || ap->k_cache < 0 ||
      ap->v_cache < 0 || ap->in[0] < 0 || (size_t)ap->in[0] >= spec->n_tensors)
    return NULL;
  const hk_dtype_t dt = spec->tensors[q].dtype;
  if (spec->tensors[ap->k_cache].dtype != dt || spec->tensors[ap->v_cache].dtype != dt ||
      spec->tensors[ap->in[0]].dtype != dt)
    return NULL; /* FP8 caches stay apart */
  int reads = 0; /* nd's one read as q, nothing else's */
  for (size_t j = 0; j < spec->n_nodes; j++) reads += reads_of(&spec->nodes[j], q);
  if (reads != 1 || reads_of(nd, q) != 1) return NULL;
  const hkc_tensor_t *x = &spec->tensors[q];
  return x->rank == 2 && tensor_dim(x, 0, batch) <= nd->append_fold_rows ? ap : NULL;
}

/* Whether kv_append node `node` is left out at `batch`: the kv_attention that reads its output
 * folds it (hkc_kv_folded_append). */
static int append_left_out(const hkc_spec_t *spec, size_t node, int64_t batch) {
  const hkc_node_t *ap = &spec->nodes[node];
  for (size_t j = node + 1; j < spec->n_nodes; j++) /* readers come after their producer */
    if (reads_of(&spec->nodes[j], ap->out)) return hkc_kv_folded_append(spec, &spec->nodes[j], batch) == ap;
  return 0;
}

/* Whether rmsnorm node `node` is left out at `batch`: every reader of its output is a gemm that
 * reads it as A only and folds it there, and the output is no graph output. */
static int norm_left_out(const hkc_spec_t *spec, size_t node, int64_t batch) {
  const hkc_node_t *nm = &spec->nodes[node];
  if (spec->tensors[nm->out].role == HK_ROLE_OUTPUT) return 0;
  int readers = 0;
  for (size_t j = node + 1; j < spec->n_nodes; j++) { /* readers come after their producer */
    const hkc_node_t *nd = &spec->nodes[j];
    const int reads = reads_of(nd, nm->out);
    if (!reads) continue;
    if (reads != 1 || nd->in[0] != nm->out || hkc_gemm_folded_norm(spec, nd, batch) != nm) return 0;
    readers++;
  }
  return readers > 0;
}

int hkc_node_left_out(const hkc_spec_t *spec, size_t node, int64_t batch) {
  const hkc_node_t *dq = &spec->nodes[node];
  if (dq->op == HK_OP_RMSNORM) return norm_left_out(spec, node, batch);
  if (dq->op == HK_OP_KV_APPEND) return append_left_out(spec, node, batch);
  if (dq->op != HK_OP_DEQUANT) return 0;
  int readers = 0;
  for (size_t j = node + 1; j < spec->n_nodes; j++) { /* readers come after their producer */
    const hkc_node_t *nd = &spec->nodes[j];
    int reads = 0, as_b = 0;
    for (int i = 0; i < nd->n_in && i < HKC_MAX_NODE_IN; i++)
      if (nd->in[i] == dq->out) reads++, as_b += nd->op == HK_OP_GEMM && (i == 1 || i == 2);
    const int extra[] = {nd->bias, nd->residual, nd->mul, nd->gamma, nd->beta, nd->add_in};
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) reads += extra[i] == dq->out;
    if (!reads) continue;
    if (reads != as_b || !hkc_gemm_folds_dequant(spec, nd, batch)) return 0;
    readers++;
  }
  return readers > 0;
}

/* Returns the number of arguments, or -1 (reported at the node) for a node whose
 * sizes cannot be lowered. The key's flags that an op does not use stay zero, so
 * equal kernels get equal keys. */
int hkc_lower_node(const hkc_spec_t *spec, size_t node, int64_t batch, hkc_kernel_key_t *out_key,
                   hkc_arg_t out_args[HKC_MAX_ARGS]) {
  return hkc_lower_node_of(spec, &spec->nodes[node], batch, out_key, out_args);
}

int hkc_lower_node_of(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch, hkc_kernel_key_t *out_key,
                      hkc_arg_t out_args[HKC_MAX_ARGS]) {
  const hkc_tensor_t *out = &spec->tensors[nd->out];
  const hkc_tensor_t *x = &spec->tensors[nd->in[0]];
  arg_list_t l = {out_args, 0};
  memset(out_key, 0, sizeof *out_key);
  memset(out_args, 0, sizeof(hkc_arg_t) * HKC_MAX_ARGS);
  out_key->op = nd->op;
  /* argmax and sample write i32: keyed by what they read */
  out_key->dtype = nd->op == HK_OP_ARGMAX || nd->op == HK_OP_SAMPLE ? x->dtype : out->dtype;
  out_key->act = HK_ACT_NONE;
  const int operands[] = {nd->out,  nd->bias,   nd->residual, nd->mul,  nd->gamma, nd->beta,   nd->add_in,
                          nd->lengths, nd->mask, nd->pos,   nd->ctx,  nd->slot,  nd->k_cache, nd->v_cache};
  for (int i = -HKC_MAX_NODE_IN; i < (int)(sizeof operands / sizeof *operands); i++) {
    const int t = i < 0 ? (HKC_MAX_NODE_IN + i < nd->n_in ? nd->in[HKC_MAX_NODE_IN + i] : HKC_NONE) : operands[i];
    if (t == HKC_NONE || t < 0 || (size_t)t >= spec->n_tensors) continue;
    if (hkc_tensor_elems(&spec->tensors[t], batch) <= 0) {
      hkc_error(nd->loc, "node '%s': tensor '%s' at batch %lld has a non-positive dimension or more than 2^63 "
                "elements", nd->name ? nd->name : "?", spec->tensors[t].name, (long long)batch);
      return -1;
    }
  }

  switch (nd->op) {
  case HK_OP_GEMM: {
    const hkc_tensor_t *b = &spec->tensors[nd->in[1]];
    int64_t k = last_dim(x, batch);
    int64_t n = nd->trans_b ? tensor_dim(b, 0, batch) : last_dim(b, batch);
    if (k <= 0) break;
    out_key->act = nd->act;
    out_key->trans_b = nd->trans_b != 0;
    out_key->has_bias = nd->bias != HKC_NONE;
    out_key->has_residual = nd->residual != HKC_NONE;
    out_key->has_mul = nd->mul != HKC_NONE;
    /* folded dequant: B (and B2) are the 8-bit params the dequant nodes read */
    const hkc_node_t *dq = hkc_gemm_folds_dequant(spec, nd, batch) ? dequant_of(spec, nd->in[1]) : NULL;
    const hkc_node_t *dq2 = dq && nd->n_in == 3 ? dequant_of(spec, nd->in[2]) : NULL;
    /* an rmsnorm folded at this batch: A is the norm's input, normalised as norm_a does */
    const hkc_node_t *nm = hkc_gemm_folded_norm(spec, nd, batch);
    push_tensor(&l, HKC_GEMM_ARG_A, nm ? nm->in[0] : nd->in[0]);
    push_tensor(&l, HKC_GEMM_ARG_B, dq ? dq->in[0] : nd->in[1]);
    push_tensor(&l, HKC_GEMM_ARG_BIAS, nd->bias);
    push_tensor(&l, HKC_GEMM_ARG_RESIDUAL, nd->residual);
    push_tensor(&l, HKC_GEMM_ARG_C, nd->out);
    push_i64(&l, HKC_GEMM_ARG_M, tensor_elems(x, batch) / k);
    push_i64(&l, HKC_GEMM_ARG_N, n);
    push_i64(&l, HKC_GEMM_ARG_K, k);
    push_tensor(&l, HKC_GEMM_ARG_MUL, nd->mul);
    assert(l.n == HKC_GEMM_N_ARGS);
    if (nd->n_in == 3) { /* dual gemm (fusion): B2 shaped like B */
      out_key->dual = 1;
      push_tensor(&l, HKC_GEMM_ARG_B2, dq2 ? dq2->in[0] : nd->in[2]);
    } else if (nd->rope) { /* rope epilogue (fusion): out [.., seq, heads*dh] */
      const int64_t dh = hkc_rope_head_dim(nd, out), seq = out->rank >= 2 ? tensor_dim(out, out->rank - 2, batch) : 0;
      if (dh <= 0 || dh > INT32_MAX || seq <= 0) break;
      out_key->rope = 1;
      out_key->head_dim = (int)dh;
      push_i64(&l, HKC_GEMM_ARG_ROPE_SEQ, seq);
      push_i64(&l, HKC_GEMM_ARG_ROPE_COLS, hkc_rope_rotated_heads(nd) * dh);
      push_i64(&l, HKC_GEMM_ARG_ROPE_POS0, nd->pos_offset);
      push_f32(&l, HKC_GEMM_ARG_ROPE_THETA, nd->theta);
      assert(l.n == HKC_GEMM_N_ARGS_ROPE);
    }
    if (nd->norm_a || nm) { /* folded rmsnorm (fusion, or this batch's fold): gamma [K] */
      const int gamma = nm ? nm->gamma : nd->gamma;
      const hkc_tensor_t *g = gamma != HKC_NONE ? &spec->tensors[gamma] : NULL;
      if (!g || g->rank != 1 || tensor_dim(g, 0, batch) != k) break;
      out_key->norm_a = 1;
      const uint32_t at = hkc_gemm_norm_arg(out_key->dual, out_key->rope);
      push_tensor(&l, (int)at, gamma);
      push_f32(&l, (int)at + 1, nm ? nm->eps : nd->eps);
    }
    if (nd->norm_c) { /* norm epilogue (fusion): gamma (and a layernorm's beta) [N], the kept sum */
      const int ln = nd->norm_c == HKC_NORM_C_LAYERNORM;
      const hkc_tensor_t *g = nd->gamma != HKC_NONE ? &spec->tensors[nd->gamma] : NULL;
      const hkc_tensor_t *be = nd->beta != HKC_NONE ? &spec->tensors[nd->beta] : NULL;
      if ((nd->norm_c != HKC_NORM_C_LAYERNORM && nd->norm_c != HKC_NORM_C_RMSNORM) || !g || g->rank != 1 ||
          tensor_dim(g, 0, batch) != n || (ln && (!be || be->rank != 1 || tensor_dim(be, 0, batch) != n)) ||
          (!ln && be) || n > INT32_MAX || nd->n_in == 3 || nd->rope || nd->norm_a)
        break;
      out_key->norm_c = nd->norm_c;
      out_key->norm_cols = (int)n;
      out_key->has_sum = nd->sum_out != HKC_NONE;
      push_tensor(&l, HKC_GEMM_ARG_LN_GAMMA, nd->gamma);
      push_tensor(&l, HKC_GEMM_ARG_LN_BETA, ln ? nd->beta : HKC_NONE);
      push_f32(&l, HKC_GEMM_ARG_LN_EPS, nd->eps);
      push_tensor(&l, HKC_GEMM_ARG_LN_SUM, nd->sum_out);
      assert(l.n == HKC_GEMM_N_ARGS_LN);
    }
    if (dq) { /* the scales and their layout (lower.h, enum hkc_gemm_quant_arg) */
      const hkc_tensor_t *q = &spec->tensors[dq->in[0]], *sc = &spec->tensors[q->scale];
      const int64_t scols = sc->rank == 2 ? last_dim(sc, batch) : 1, srows = tensor_elems(sc, batch) / scols;
      const uint32_t at = hkc_gemm_quant_arg(out_key);
      assert(at == (uint32_t)l.n);
      push_tensor(&l, (int)at + HKC_GEMM_QB_SCALE, q->scale);
      push_tensor(&l, (int)at + HKC_GEMM_QB_SCALE2, dq2 ? spec->tensors[dq2->in[0]].scale : HKC_NONE);
      push_i64(&l, (int)at + HKC_GEMM_QB_ROWS, tensor_dim(q, 0, batch));
      push_i64(&l, (int)at + HKC_GEMM_QB_SCALE_ROWS, srows);
      push_i64(&l, (int)at + HKC_GEMM_QB_SCALE_COLS, scols);
      push_i64(&l, (int)at + HKC_GEMM_QB_BLOCK_ROWS, q->block[0]);
      push_i64(&l, (int)at + HKC_GEMM_QB_BLOCK_COLS, q->block[1]);
      snprintf(out_key->program, sizeof out_key->program, "%s",
               q->dtype == HK_DTYPE_I8 ? "i8" : nd->fp8_act ? "e4m3a" : "e4m3");
    }
    out_key->align = align_of((int64_t[]){k, n}, 2);
    return l.n;
  }
  case HK_OP_ADD:
  case HK_OP_MUL:
    push_tensor(&l, HKC_BINARY_ARG_A, nd->in[0]);
    push_tensor(&l, HKC_BINARY_ARG_B, nd->in[1]);
    push_tensor(&l, HKC_BINARY_ARG_OUT, nd->out);
    push_i64(&l, HKC_BINARY_ARG_N, tensor_elems(out, batch));
    push_i64(&l, HKC_BINARY_ARG_NA, tensor_elems(x, batch));
    push_i64(&l, HKC_BINARY_ARG_NB, tensor_elems(&spec->tensors[nd->in[1]], batch));
    assert(l.n == HKC_BINARY_N_ARGS);
    out_key->align = align_of((int64_t[]){last_dim(out, batch), last_dim(x, batch),
                                          last_dim(&spec->tensors[nd->in[1]], batch)}, 3);
    return l.n;
  case HK_OP_RELU:
  case HK_OP_GELU:
  case HK_OP_GELU_TANH:
  case HK_OP_TANH:
  case HK_OP_SILU:
    push_tensor(&l, HKC_UNARY_ARG_X, nd->in[0]);
    push_tensor(&l, HKC_UNARY_ARG_OUT, nd->out);
    push_i64(&l, HKC_UNARY_ARG_N, tensor_elems(out, batch));
    assert(l.n == HKC_UNARY_N_ARGS);
    out_key->align = align_of((int64_t[]){last_dim(out, batch)}, 1);
    return l.n;
  case HK_OP_LAYERNORM:
  case HK_OP_RMSNORM:
  case HK_OP_SOFTMAX: {
    int64_t cols = last_dim(x, batch);
    if (cols <= 0) break;
    /* the three layouts share their order: layernorm's, less beta (rmsnorm), less gamma,
     * eps, add and sum (softmax) */
    const int ln = nd->op == HK_OP_LAYERNORM, rms = nd->op == HK_OP_RMSNORM;
#define ROW_ARG(name) (ln ? HKC_LAYERNORM_ARG_##name : rms ? HKC_RMSNORM_ARG_##name : HKC_SOFTMAX_ARG_##name)
#define NORM_ARG(name) (ln ? HKC_LAYERNORM_ARG_##name : HKC_RMSNORM_ARG_##name)
    push_tensor(&l, ROW_ARG(X), nd->in[0]);
    if (nd->op != HK_OP_SOFTMAX) push_tensor(&l, NORM_ARG(GAMMA), nd->gamma);
    if (nd->op == HK_OP_LAYERNORM) push_tensor(&l, HKC_LAYERNORM_ARG_BETA, nd->beta);
    push_tensor(&l, ROW_ARG(OUT), nd->out);
    push_i64(&l, ROW_ARG(ROWS), tensor_elems(x, batch) / cols);
    push_i64(&l, ROW_ARG(COLS), cols);
    if (nd->op != HK_OP_SOFTMAX) {
      push_f32(&l, NORM_ARG(EPS), nd->eps);
      /* fused residual add: normalises x + add, optionally storing the sum */
      out_key->has_add = nd->add_in != HKC_NONE;
      out_key->has_sum = nd->add_in != HKC_NONE && nd->sum_out != HKC_NONE;
      push_tensor(&l, NORM_ARG(ADD), out_key->has_add ? nd->add_in : HKC_NONE);
      push_tensor(&l, NORM_ARG(SUM), out_key->has_sum ? nd->sum_out : HKC_NONE);
    }
    assert(l.n == (ln ? HKC_LAYERNORM_N_ARGS : rms ? HKC_RMSNORM_N_ARGS : HKC_SOFTMAX_N_ARGS));
#undef ROW_ARG
#undef NORM_ARG
    out_key->align = align_of(&cols, 1);
    return l.n;
  }
  case HK_OP_EWCHAIN: {
    /* out[i] = program over in_j[i % n_j]; the program names operands 1..n_in-1. */
    if (nd->n_in < 1 || nd->n_in > HKC_MAX_NODE_IN || hkc_ew_program_operands(nd->program) != nd->n_in) break;
    int64_t lasts[HKC_MAX_NODE_IN + 1];
    push_tensor(&l, HKC_EWCHAIN_ARG_OUT, nd->out);
    push_i64(&l, HKC_EWCHAIN_ARG_N, tensor_elems(out, batch));
    lasts[0] = last_dim(out, batch);
    for (int j = 0; j < nd->n_in; j++) {
      const hkc_tensor_t *t = &spec->tensors[nd->in[j]];
      push_tensor(&l, HKC_EWCHAIN_ARG_IN(j), nd->in[j]);
      push_i64(&l, HKC_EWCHAIN_ARG_N_IN(j), tensor_elems(t, batch));
      lasts[j + 1] = last_dim(t, batch);
    }
    assert(l.n == HKC_EWCHAIN_ARG_IN(nd->n_in));
    memcpy(out_key->program, nd->program, sizeof out_key->program);
    out_key->align = align_of(lasts, nd->n_in + 1);
    return l.n;
  }
  case HK_OP_ATTENTION: {
    /* q [.., seq_q, heads*dh] (leading dims flattened into batch), k and v
     * [.., seq_kv, kv_heads*dh]; packed: one [.., seq, (heads + 2*kv_heads)*dh]. */
    const int packed = nd->n_in == 1;
    const hkc_tensor_t *k = packed ? x : &spec->tensors[nd->in[1]];
    int64_t heads = nd->heads, kv_heads = nd->kv_heads > 0 ? nd->kv_heads : nd->heads;
    if (heads <= 0 || x->rank < 2 || k->rank < 2 || heads % kv_heads != 0) break;
    int64_t ld_q = last_dim(x, batch), ld_kv = last_dim(k, batch);
    int64_t dh = packed ? ld_q / (heads + 2 * kv_heads) : ld_q / heads;
    int64_t seq_q = tensor_dim(x, x->rank - 2, batch), seq_kv = tensor_dim(k, k->rank - 2, batch);
    if (dh <= 0 || seq_q <= 0) break;
    push_tensor(&l, HKC_ATTENTION_ARG_Q, nd->in[0]);
    push_tensor(&l, HKC_ATTENTION_ARG_K, packed ? nd->in[0] : nd->in[1]);
    push_tensor(&l, HKC_ATTENTION_ARG_V, packed ? nd->in[0] : nd->in[2]);
    push_tensor(&l, HKC_ATTENTION_ARG_OUT, nd->out);
    push_i64(&l, HKC_ATTENTION_ARG_BATCH, tensor_elems(x, batch) / (seq_q * ld_q));
    push_i64(&l, HKC_ATTENTION_ARG_SEQ_Q, seq_q);
    push_i64(&l, HKC_ATTENTION_ARG_SEQ_KV, seq_kv);
    push_i64(&l, HKC_ATTENTION_ARG_HEADS, heads);
    push_i64(&l, HKC_ATTENTION_ARG_KV_HEADS, kv_heads);
    push_i64(&l, HKC_ATTENTION_ARG_DH, dh);
    push_i64(&l, HKC_ATTENTION_ARG_LD_Q, ld_q);
    push_i64(&l, HKC_ATTENTION_ARG_LD_KV, ld_kv);
    push_i64(&l, HKC_ATTENTION_ARG_Q_COL, 0);
    push_i64(&l, HKC_ATTENTION_ARG_K_COL, packed ? heads * dh : 0);
    push_i64(&l, HKC_ATTENTION_ARG_V_COL, packed ? (heads + kv_heads) * dh : 0);
    push_i64(&l, HKC_ATTENTION_ARG_CAUSAL, nd->causal ? 1 : 0);
    push_f32(&l, HKC_ATTENTION_ARG_SCALE, nd->has_scale ? nd->scale : (float)(1.0 / sqrt((double)dh)));
    assert(l.n == HKC_ATTENTION_N_ARGS);
    out_key->has_lengths = nd->lengths != HKC_NONE;
    out_key->has_mask = nd->mask != HKC_NONE;
    if (out_key->has_lengths || out_key->has_mask) {
      push_tensor(&l, HKC_ATTENTION_ARG_LENGTHS, nd->lengths);
      push_tensor(&l, HKC_ATTENTION_ARG_MASK, nd->mask);
      push_i64(&l, HKC_ATTENTION_ARG_MASK_HEADS,
               nd->mask != HKC_NONE ? tensor_dim(&spec->tensors[nd->mask], 1, batch) : 0);
      assert(l.n == HKC_ATTENTION_MASKED_N_ARGS);
    }
    out_key->align = align_of((int64_t[]){ld_q, ld_kv, heads * dh, (heads + kv_heads) * dh, dh}, 5);
    out_key->head_dim = dh <= INT32_MAX ? (int)dh : 0;
    return l.n;
  }
  case HK_OP_EMBEDDING: {
    /* ids [.., seq] (i32), table [vocab, hidden] -> out [.., seq, hidden] */
    const hkc_tensor_t *table = &spec->tensors[nd->in[1]];
    const int64_t seq = last_dim(x, batch), vocab = tensor_dim(table, 0, batch), hidden = last_dim(table, batch);
    if (seq <= 0 || vocab <= 0 || hidden <= 0 || table->rank != 2) break;
    push_tensor(&l, HKC_EMBEDDING_ARG_TABLE, nd->in[1]);
    push_tensor(&l, HKC_EMBEDDING_ARG_IDS, nd->in[0]);
    push_tensor(&l, HKC_EMBEDDING_ARG_POS, nd->pos);
    push_tensor(&l, HKC_EMBEDDING_ARG_OUT, nd->out);
    push_i64(&l, HKC_EMBEDDING_ARG_TOKENS, tensor_elems(x, batch));
    push_i64(&l, HKC_EMBEDDING_ARG_SEQ, seq);
    push_i64(&l, HKC_EMBEDDING_ARG_VOCAB, vocab);
    push_i64(&l, HKC_EMBEDDING_ARG_HIDDEN, hidden);
    assert(l.n == HKC_EMBEDDING_N_ARGS);
    out_key->has_add = nd->pos != HKC_NONE;
    if (nd->ctx != HKC_NONE) { /* positions from ctx: the position table's rows are all reachable */
      if (nd->pos == HKC_NONE) break;
      out_key->has_ctx = 1;
      push_tensor(&l, HKC_EMBEDDING_ARG_CTX, nd->ctx);
      push_i64(&l, HKC_EMBEDDING_ARG_MAX_POS, tensor_dim(&spec->tensors[nd->pos], 0, batch));
      assert(l.n == HKC_EMBEDDING_N_ARGS_CTX);
    }
    out_key->align = align_of((int64_t[]){hidden}, 1);
    return l.n;
  }
  case HK_OP_ROPE: {
    /* x [.., seq, heads*dh]: rows flattened; element j of a head pairs with j + dh/2. A packed
     * q|k|v [.., (H + 2*Hkv)*dh] rotates its first H + Hkv heads (q, then k: the same angles)
     * and copies the last Hkv (v). */
    const int64_t width = last_dim(x, batch), pass = nd->packed ? nd->kv_heads : 0, heads = nd->heads + pass;
    if (nd->heads <= 0 || pass < 0 || x->rank < 2 || width % (heads + pass) != 0 || width / (heads + pass) % 2 != 0)
      break;
    /* with ctx, positions come from it: seq 1 and offset 0 are placeholders the kernels ignore */
    const int has_ctx = nd->ctx != HKC_NONE;
    int64_t dh = width / (heads + pass), seq = has_ctx ? 1 : tensor_dim(x, x->rank - 2, batch);
    if (seq <= 0 || (unsigned)nd->rope_scaling > HKC_ROPE_SCALING_LLAMA3) break;
    push_tensor(&l, HKC_ROPE_ARG_X, nd->in[0]);
    push_tensor(&l, HKC_ROPE_ARG_OUT, nd->out);
    push_i64(&l, HKC_ROPE_ARG_ROWS, tensor_elems(x, batch) / width);
    push_i64(&l, HKC_ROPE_ARG_SEQ, seq);
    push_i64(&l, HKC_ROPE_ARG_HEADS, heads);
    push_i64(&l, HKC_ROPE_ARG_DH, dh);
    push_i64(&l, HKC_ROPE_ARG_POS_OFFSET, has_ctx ? 0 : nd->pos_offset);
    push_f32(&l, HKC_ROPE_ARG_THETA, nd->theta);
    push_i64(&l, HKC_ROPE_ARG_PASS_HEADS, pass);
    assert(l.n == HKC_ROPE_N_ARGS);
    out_key->has_ctx = has_ctx;
    if (has_ctx) push_tensor(&l, (int)hkc_rope_ctx_arg(), nd->ctx);
    out_key->rope_scaling = nd->rope_scaling;
    if (nd->rope_scaling != HKC_ROPE_SCALING_NONE) { /* llama3's numbers; a linear one's are 0 */
      const int at = (int)hkc_rope_scaling_arg(has_ctx), l3 = nd->rope_scaling == HKC_ROPE_SCALING_LLAMA3;
      push_f32(&l, at + HKC_ROPE_SCALING_ARG_FACTOR, nd->rope_factor);
      push_f32(&l, at + HKC_ROPE_SCALING_ARG_LOW, l3 ? nd->rope_low_freq : 0.0f);
      push_f32(&l, at + HKC_ROPE_SCALING_ARG_HIGH, l3 ? nd->rope_high_freq : 0.0f);
      push_f32(&l, at + HKC_ROPE_SCALING_ARG_ORIG, l3 ? (float)nd->rope_original_max : 0.0f);
    }
    out_key->align = align_of((int64_t[]){width, dh, dh / 2}, 3);
    out_key->head_dim = dh <= INT32_MAX ? (int)dh : 0;
    return l.n;
  }
  case HK_OP_KV_APPEND:
  case HK_OP_KV_ATTENTION: {
    const int n = lower_kv(spec, nd, batch, out_key, &l);
    if (n < 0) break;
    return n;
  }
  case HK_OP_TAKE_ROWS: {
    /* x [x_rows, width], rows (i32) [n_out] -> out [n_out, width] */
    const int64_t width = last_dim(x, batch);
    if (x->rank != 2 || width <= 0) break;
    push_tensor(&l, HKC_TAKE_ROWS_ARG_X, nd->in[0]);
    push_tensor(&l, HKC_TAKE_ROWS_ARG_ROWS, nd->in[1]);
    push_tensor(&l, HKC_TAKE_ROWS_ARG_OUT, nd->out);
    push_i64(&l, HKC_TAKE_ROWS_ARG_X_ROWS, tensor_dim(x, 0, batch));
    push_i64(&l, HKC_TAKE_ROWS_ARG_N_OUT, tensor_elems(&spec->tensors[nd->in[1]], batch));
    push_i64(&l, HKC_TAKE_ROWS_ARG_WIDTH, width);
    assert(l.n == HKC_TAKE_ROWS_N_ARGS);
    out_key->align = align_of(&width, 1);
    return l.n;
  }
  case HK_OP_DEQUANT: {
    /* q [rows, cols] (8-bit), its scales (f32) -> out [rows, cols] of the spec's dtype */
    const int64_t rows = tensor_dim(x, 0, batch), cols = last_dim(x, batch);
    if (x->rank != 2 || x->scale == HKC_NONE || rows <= 0 || cols <= 0 || x->block[0] <= 0 || x->block[1] <= 0) break;
    const hkc_tensor_t *sc = &spec->tensors[x->scale];
    const int64_t scols = sc->rank == 2 ? last_dim(sc, batch) : 1, srows = tensor_elems(sc, batch) / scols;
    push_tensor(&l, HKC_DEQUANT_ARG_Q, nd->in[0]);
    push_tensor(&l, HKC_DEQUANT_ARG_SCALE, x->scale);
    push_tensor(&l, HKC_DEQUANT_ARG_OUT, nd->out);
    push_i64(&l, HKC_DEQUANT_ARG_ROWS, rows);
    push_i64(&l, HKC_DEQUANT_ARG_COLS, cols);
    push_i64(&l, HKC_DEQUANT_ARG_SCALE_ROWS, srows);
    push_i64(&l, HKC_DEQUANT_ARG_SCALE_COLS, scols);
    push_i64(&l, HKC_DEQUANT_ARG_BLOCK_ROWS, x->block[0]);
    push_i64(&l, HKC_DEQUANT_ARG_BLOCK_COLS, x->block[1]);
    assert(l.n == HKC_DEQUANT_N_ARGS);
    snprintf(out_key->program, sizeof out_key->program, "%s", x->dtype == HK_DTYPE_I8 ? "i8" : "e4m3");
    out_key->align = align_of(&cols, 1);
    return l.n;
  }
  case HK_OP_ARGMAX: {
    /* x [.., cols] -> out (i32) [..]: rows flattened */
    const int64_t cols = last_dim(x, batch);
    if (cols <= 0 || x->rank < 2) break;
    push_tensor(&l, HKC_ARGMAX_ARG_X, nd->in[0]);
    push_tensor(&l, HKC_ARGMAX_ARG_OUT, nd->out);
    push_i64(&l, HKC_ARGMAX_ARG_ROWS, tensor_elems(x, batch) / cols);
    push_i64(&l, HKC_ARGMAX_ARG_COLS, cols);
    assert(l.n == HKC_ARGMAX_N_ARGS);
    out_key->align = align_of(&cols, 1);
    return l.n;
  }
  case HK_OP_SAMPLE: {
    /* x [rows, cols], params (i32) [rows, 4] -> out (i32) [rows]; an index is an int32 */
    const int64_t cols = last_dim(x, batch), rows = tensor_dim(x, 0, batch);
    if (cols <= 0 || cols > INT32_MAX || x->rank != 2) break;
    push_tensor(&l, HKC_SAMPLE_ARG_X, nd->in[0]);
    push_tensor(&l, HKC_SAMPLE_ARG_PARAMS, nd->in[1]);
    push_tensor(&l, HKC_SAMPLE_ARG_OUT, nd->out);
    push_i64(&l, HKC_SAMPLE_ARG_ROWS, rows);
    push_i64(&l, HKC_SAMPLE_ARG_COLS, cols);
    assert(l.n == HKC_SAMPLE_N_ARGS);
    out_key->align = align_of(&cols, 1);
    return l.n;
  }
  case HK_OP_ALL_REDUCE: {
    /* this rank's partial sums -> their sum over the ranks, the same shape */
    const int64_t n = tensor_elems(x, batch);
    if (n <= 0 || n != tensor_elems(&spec->tensors[nd->out], batch)) break;
    push_tensor(&l, HKC_ALL_REDUCE_ARG_IN, nd->in[0]);
    push_tensor(&l, HKC_ALL_REDUCE_ARG_OUT, nd->out);
    push_i64(&l, HKC_ALL_REDUCE_ARG_N, n);
    assert(l.n == HKC_ALL_REDUCE_N_ARGS);
    return l.n;
  }
  case HK_OP_ALL_GATHER: {
    /* x [.., cols] -> out [.., ranks * cols]: rows flattened */
    const int64_t cols = last_dim(x, batch);
    if (cols <= 0 || nd->ranks < 1 || last_dim(&spec->tensors[nd->out], batch) != cols * nd->ranks) break;
    push_tensor(&l, HKC_ALL_GATHER_ARG_IN, nd->in[0]);
    push_tensor(&l, HKC_ALL_GATHER_ARG_OUT, nd->out);
    push_i64(&l, HKC_ALL_GATHER_ARG_ROWS, tensor_elems(x, batch) / cols);
    push_i64(&l, HKC_ALL_GATHER_ARG_COLS, cols);
    push_i64(&l, HKC_ALL_GATHER_ARG_RANKS, nd->ranks);
    assert(l.n == HKC_ALL_GATHER_N_ARGS);
    return l.n;
  }
  default: break;
  }
  hkc_error(nd->loc, "node '%s': cannot lower op %d at batch %lld (bad sizes)", nd->name ? nd->name : "?",
            (int)nd->op, (long long)batch);
  return -1;
}

static const char *key_op_name(hk_op_t op) {
  static const char *const names[] = {"gemm",      "add",     "mul",     "relu",      "gelu", "silu",
                                      "layernorm", "rmsnorm", "softmax", "attention", "rope", "ewchain",
                                      "gelu_tanh", "tanh",    "embedding", "kv_append", "kv_attention",
                                      "take_rows", "argmax", "sample", "dequant", "all_reduce",
                                      "all_gather"};
  return (unsigned)op < sizeof names / sizeof names[0] ? names[op] : NULL;
}

static const char *key_dtype_name(hk_dtype_t t) {
  static const char *const names[] = {"f32", "f16", "bf16"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : NULL;
}

static const char *key_act_name(hk_act_t a) {
  static const char *const names[] = {"none", "relu", "gelu", "silu", "gelu_tanh"};
  return (unsigned)a < sizeof names / sizeof names[0] ? names[a] : NULL;
}

/* "hk_<op>_<dtype>[_<program>][_<act>][_bias][_mul|_dual|_rope][_res][_nrm][_ln<cols>|_rms<cols>][_tb][_add][_sum][_len][_mask][_ctx][_app][_lin|_l3][_a<align>][_d<dh>]":
 * a C identifier, one per distinct key (no flag name is a suffix of an act name; an
 * ewchain program is [a-z0-9] only and comes right after the dtype; out-of-range enums
 * print as numbers). */
void hkc_kernel_key_name(const hkc_kernel_key_t *key, char *out, size_t size) {
  char op[16], dt[16], act[16];
  const char *s;
  if ((s = key_op_name(key->op))) snprintf(op, sizeof op, "%s", s);
  else snprintf(op, sizeof op, "op%d", (int)key->op);
  if ((s = key_dtype_name(key->dtype))) snprintf(dt, sizeof dt, "%s", s);
  else snprintf(dt, sizeof dt, "dt%d", (int)key->dtype);
  if ((s = key_act_name(key->act))) snprintf(act, sizeof act, "%s", s);
  else snprintf(act, sizeof act, "act%d", (int)key->act);
  char shape[32] = "";
  int align = key->align > 1 ? key->align : 1;
  if (align > 1 && key->head_dim > 0) snprintf(shape, sizeof shape, "_a%d_d%d", align, key->head_dim);
  else if (align > 1) snprintf(shape, sizeof shape, "_a%d", align);
  else if (key->head_dim > 0) snprintf(shape, sizeof shape, "_d%d", key->head_dim);
  char program[HKC_EW_PROGRAM_MAX + 1] = "";
  size_t plen = strnlen(key->program, HKC_EW_PROGRAM_MAX - 1);
  if (plen) {
    program[0] = '_';
    for (size_t i = 0; i < plen; i++) { /* keep the name an identifier whatever the bytes */
      char c = key->program[i];
      program[i + 1] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : 'x';
    }
    program[plen + 1] = '\0';
  }
  /* tuning: "_t" + 8 hex digits of the hash of "variant:params" (none for the defaults) */
  char tune[16] = "";
  if (key->variant[0] || key->tune[0]) {
    char both[HKC_TUNE_VARIANT_MAX + HKC_TUNE_MAX + 2];
    int n = snprintf(both, sizeof both, "%.*s:%.*s", HKC_TUNE_VARIANT_MAX, key->variant, HKC_TUNE_MAX, key->tune);
    snprintf(tune, sizeof tune, "_t%08x", (unsigned)(hkc_hash64(both, (size_t)n) & 0xffffffffu));
  }
  char ln[24] = "";
  if (key->norm_c) snprintf(ln, sizeof ln, "_%s%d", key->norm_c == HKC_NORM_C_RMSNORM ? "rms" : "ln", key->norm_cols);
  char scaling[16] = "";
  if (key->rope_scaling == HKC_ROPE_SCALING_LINEAR) snprintf(scaling, sizeof scaling, "_lin");
  else if (key->rope_scaling == HKC_ROPE_SCALING_LLAMA3) snprintf(scaling, sizeof scaling, "_l3");
  else if (key->rope_scaling) snprintf(scaling, sizeof scaling, "_sc%d", key->rope_scaling);
  snprintf(out, size, "hk_%s_%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s%s", op, dt, program, key->act != HK_ACT_NONE ? "_" : "",
           key->act != HK_ACT_NONE ? act : "", key->has_bias ? "_bias" : "",
           key->dual ? "_dual" : key->has_mul ? "_mul" : key->rope ? "_rope" : "",
           key->has_residual ? "_res" : "", key->norm_a ? "_nrm" : "", ln, key->trans_b ? "_tb" : "", key->has_add ? "_add" : "",
           key->has_sum ? "_sum" : "", key->has_lengths ? "_len" : "", key->has_mask ? "_mask" : "",
           key->has_ctx ? "_ctx" : "", key->append ? "_app" : "", scaling, shape, tune);
}

int hkc_kernel_key_equal(const hkc_kernel_key_t *a, const hkc_kernel_key_t *b) {
  int align_a = a->align > 1 ? a->align : 1, align_b = b->align > 1 ? b->align : 1;
  return a->op == b->op && a->dtype == b->dtype && a->act == b->act && !a->trans_b == !b->trans_b &&
         !a->has_bias == !b->has_bias && !a->has_residual == !b->has_residual && !a->has_mul == !b->has_mul && !a->dual == !b->dual &&
         !a->rope == !b->rope && !a->norm_a == !b->norm_a && a->norm_c == b->norm_c &&
         (!a->norm_c || a->norm_cols == b->norm_cols) &&
         !a->has_add == !b->has_add && !a->has_sum == !b->has_sum && !a->has_lengths == !b->has_lengths &&
         !a->has_mask == !b->has_mask && !a->has_ctx == !b->has_ctx && !a->append == !b->append && a->rope_scaling == b->rope_scaling &&
         strncmp(a->program, b->program, HKC_EW_PROGRAM_MAX) == 0 && align_a == align_b &&
         a->head_dim == b->head_dim && strncmp(a->variant, b->variant, HKC_TUNE_VARIANT_MAX) == 0 &&
         strncmp(a->tune, b->tune, HKC_TUNE_MAX) == 0;
}
