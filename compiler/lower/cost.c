/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cost.c -- the cost model behind `hkc inspect --plan` and `hkc run --profile`: the
 * least HBM traffic and the arithmetic of one kernel launch, from the node's tensors.
 *
 * Bytes: every distinct tensor the node reads, once (a packed qkv tensor that attention
 * reads as q, k and v counts once; a broadcast operand counts its own size, not the
 * output's), plus every tensor it writes. This is the floor a perfect kernel reaches:
 * caches never hold a whole operand twice, and nothing spills.
 *
 * FLOPs: a multiply-add is 2. Matrix work (gemm: 2*M*N*K, attention: 4*b*heads*
 * seq_q*seq_kv*dh, halved when causal) runs on matrix cores; the rest is counted per
 * output element with the nominal costs below (a transcendental counts as one), so that
 * fused and unfused forms of the same work add up to the same number. A gemm's epilogue
 * (bias, activation, mul, residual: one each per output element) is counted with its
 * matrix work and the whole node is marked `matrix`.
 *
 * The KV caches (state) hold every layer, slot and position, of which one launch touches a
 * few rows: kv_append counts the k and v rows it writes; kv_attention the keys and values it
 * may read, as if every row saw a full window (max_seq, or `window` keys) of its slot and the
 * step's rows spread over min(rows, slots) slots -- the distinct bytes at most, since the rows of
 * one sequence share its keys; its FLOPs (QK and PV, 4*dh per key and head) assume the same full
 * window. Actual ctx values are run-time data, so both are bounds, not estimates. take_rows
 * reads only the rows it takes, embedding a table row (and a position row) per token.
 */
#include <string.h>

#include "frontend/frontend.h"
#include "lower/lower.h"

/* Per-element FLOPs of the row-wise ops. */
#define COST_LAYERNORM 8 /* mean: add; variance: sub, mul, add; normalise: sub, mul; gamma mul; beta add */
#define COST_RMSNORM 4   /* square, sum, scale, gamma */
#define COST_NORM_ADD 1  /* the fused residual add of a norm (add_in) */
#define COST_SOFTMAX 5   /* max, subtract, exp, sum, scale by 1/sum */
#define COST_ROPE 3      /* x*cos + rotate_half(x)*sin */
/* sample, per logit: its divide and key in each of the up to 9 passes of the radix selects and
 * the draw, an exp (the top-p masses), the hash and two logs (the Gumbel noise) */
#define COST_SAMPLE 16

static int64_t dim_at(const hkc_tensor_t *t, uint32_t d, int64_t batch) {
  return d < t->rank ? hkc_dim_value(t->dims[d], batch) : 1;
}

static uint64_t elems(const hkc_spec_t *spec, int tensor, int64_t batch) {
  int64_t n = hkc_tensor_elems(&spec->tensors[tensor], batch);
  return n > 0 ? (uint64_t)n : 0;
}

static uint64_t tensor_bytes(const hkc_spec_t *spec, int tensor, int64_t batch) {
  return elems(spec, tensor, batch) * hkc_dtype_size(spec->tensors[tensor].dtype);
}

/* Adds tensor t to the set (ignoring HKC_NONE and repeats). */
static void set_add(int *set, int *n, int t) {
  if (t < 0) return;
  for (int i = 0; i < *n; i++)
    if (set[i] == t) return;
  set[(*n)++] = t;
}

/* Element-wise steps of an ewchain program ("a1gm2" = add, gelu, mul: 3). */
static uint64_t program_steps(const char *program) {
  uint64_t steps = 0;
  for (const char *p = program; *p; p++)
    if (*p >= 'a' && *p <= 'z') steps++;
  return steps;
}

/* kv_append's and kv_attention's cache traffic and kv_attention's FLOPs (see the top). */
static void kv_cost(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch, hkc_cost_t *out) {
  if (nd->k_cache < 0 || nd->in[0] < 0 || nd->kv_heads <= 0) return;
  const hkc_tensor_t *kc = &spec->tensors[nd->k_cache], *x = &spec->tensors[nd->in[0]];
  if (kc->rank != 4 || x->rank < 1) return;
  const int64_t rows = dim_at(x, 0, batch), slots = dim_at(kc, 1, batch), max_seq = dim_at(kc, 2, batch);
  const int64_t width = dim_at(kc, 3, batch), dh = width / nd->kv_heads;
  if (rows <= 0 || slots <= 0 || max_seq <= 0 || width <= 0) return;
  const uint64_t row_bytes = 2 * (uint64_t)width * hkc_dtype_size(kc->dtype); /* a k row and a v row */
  if (nd->op == HK_OP_KV_APPEND) {
    out->bytes += (uint64_t)rows * row_bytes;
    if (nd->rope) /* a folded rope turns the q and k heads */
      out->flops = COST_ROPE * (uint64_t)rows * (uint64_t)(nd->heads + nd->kv_heads) * (uint64_t)dh;
    return;
  }
  const int64_t keys = nd->window > 0 && nd->window < max_seq ? nd->window : max_seq;
  out->bytes += (uint64_t)(rows < slots ? rows : slots) * (uint64_t)keys * row_bytes;
  out->flops = 4 * (uint64_t)rows * (uint64_t)nd->heads * (uint64_t)keys * (uint64_t)dh;
  const hkc_node_t *ap = hkc_kv_folded_append(spec, nd, batch); /* its rows written here too */
  if (ap) out->bytes += (uint64_t)rows * row_bytes;
  if (ap && ap->rope) out->flops += COST_ROPE * (uint64_t)rows * (uint64_t)(nd->heads + nd->kv_heads) * (uint64_t)dh;
}

/* See lower.h. Pure: reads the spec, writes *out. */
void hkc_node_cost(const hkc_spec_t *spec, size_t node, int64_t batch, hkc_cost_t *out) {
  hkc_node_cost_of(spec, &spec->nodes[node], batch, out);
}

void hkc_node_cost_of(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch, hkc_cost_t *out) {
  memset(out, 0, sizeof *out);

  /* Traffic: the distinct tensors read, then those written (the caches and take_rows' x:
   * below). */
  int reads[HKC_MAX_NODE_IN + 11], n_reads = 0;
  for (int i = 0; i < nd->n_in && i < HKC_MAX_NODE_IN; i++)
    if ((nd->op != HK_OP_TAKE_ROWS || i != 0) && (nd->op != HK_OP_EMBEDDING || i != 1)) set_add(reads, &n_reads, nd->in[i]);
  set_add(reads, &n_reads, nd->bias);
  set_add(reads, &n_reads, nd->residual);
  set_add(reads, &n_reads, nd->mul);
  set_add(reads, &n_reads, nd->gamma);
  set_add(reads, &n_reads, nd->beta);
  set_add(reads, &n_reads, nd->add_in);
  set_add(reads, &n_reads, nd->lengths);
  set_add(reads, &n_reads, nd->mask);
  if (nd->op != HK_OP_EMBEDDING) set_add(reads, &n_reads, nd->pos);
  set_add(reads, &n_reads, nd->ctx);
  set_add(reads, &n_reads, nd->slot);
  int writes[2], n_writes = 0;
  set_add(writes, &n_writes, nd->out);
  set_add(writes, &n_writes, nd->sum_out);
  for (int i = 0; i < n_reads; i++) out->bytes += tensor_bytes(spec, reads[i], batch);
  for (int i = 0; i < n_writes; i++) out->bytes += tensor_bytes(spec, writes[i], batch);

  const uint64_t n_out = nd->out >= 0 ? elems(spec, nd->out, batch) : 0;
  switch (nd->op) {
  case HK_OP_GEMM: {
    const hkc_tensor_t *a = &spec->tensors[nd->in[0]], *b = &spec->tensors[nd->in[1]];
    int64_t k = dim_at(a, a->rank - 1, batch);
    int64_t n = nd->trans_b ? dim_at(b, 0, batch) : dim_at(b, b->rank - 1, batch);
    if (k <= 0 || n <= 0) break;
    uint64_t m = elems(spec, nd->in[0], batch) / (uint64_t)k;
    uint64_t epilogue = (uint64_t)(nd->bias != HKC_NONE) + (uint64_t)(nd->act != HK_ACT_NONE) +
                        (uint64_t)(nd->mul != HKC_NONE) + (uint64_t)(nd->residual != HKC_NONE);
    const uint64_t products = nd->n_in == 3 ? 2 : 1; /* a dual gemm (fusion's SwiGLU): two, and their product */
    out->flops = 2 * products * m * (uint64_t)n * (uint64_t)k + m * (uint64_t)n * (epilogue + products - 1);
    out->matrix = 1;
    break;
  }
  case HK_OP_ATTENTION: {
    const hkc_tensor_t *q = &spec->tensors[nd->in[0]];
    const int packed = nd->n_in == 1;
    const hkc_tensor_t *k = packed ? q : &spec->tensors[nd->in[1]];
    int64_t heads = nd->heads, kv_heads = nd->kv_heads > 0 ? nd->kv_heads : nd->heads;
    if (heads <= 0 || q->rank < 2 || k->rank < 2) break;
    int64_t ld_q = dim_at(q, q->rank - 1, batch);
    int64_t dh = packed ? ld_q / (heads + 2 * kv_heads) : ld_q / heads;
    int64_t seq_q = dim_at(q, q->rank - 2, batch), seq_kv = dim_at(k, k->rank - 2, batch);
    if (dh <= 0 || seq_q <= 0 || seq_kv <= 0) break;
    uint64_t b = elems(spec, nd->in[0], batch) / ((uint64_t)seq_q * (uint64_t)ld_q);
    /* QK^T and PV: 2 * dh each per (query, key) pair and head; causal masks half. */
    out->flops = 4 * b * (uint64_t)heads * (uint64_t)seq_q * (uint64_t)seq_kv * (uint64_t)dh;
    if (nd->causal) out->flops /= 2;
    out->matrix = 1;
    break;
  }
  case HK_OP_LAYERNORM:
  case HK_OP_RMSNORM: {
    uint64_t per = nd->op == HK_OP_LAYERNORM ? COST_LAYERNORM : COST_RMSNORM;
    if (nd->add_in != HKC_NONE) per += COST_NORM_ADD;
    out->flops = per * elems(spec, nd->in[0], batch);
    break;
  }
  case HK_OP_SOFTMAX: out->flops = COST_SOFTMAX * n_out; break;
  case HK_OP_ROPE:
    /* packed q|k|v: only the q and k heads are rotated (v is copied) */
    if (nd->packed && nd->heads > 0 && nd->kv_heads > 0)
      out->flops = COST_ROPE * n_out / (uint64_t)(nd->heads + 2 * nd->kv_heads) * (uint64_t)(nd->heads + nd->kv_heads);
    else
      out->flops = COST_ROPE * n_out;
    break;
  case HK_OP_EMBEDDING: /* a table row per token, and a position row with pos: the output's bytes each */
    out->flops = nd->pos != HKC_NONE ? n_out : 0;
    out->bytes += tensor_bytes(spec, nd->out, batch) * (nd->pos != HKC_NONE ? 2u : 1u);
    break;
  case HK_OP_KV_APPEND:
  case HK_OP_KV_ATTENTION: kv_cost(spec, nd, batch, out); break;
  case HK_OP_TAKE_ROWS: out->bytes += tensor_bytes(spec, nd->out, batch); break; /* the rows taken */
  case HK_OP_ARGMAX: out->flops = elems(spec, nd->in[0], batch); break;        /* a compare per element */
  case HK_OP_SAMPLE: out->flops = COST_SAMPLE * elems(spec, nd->in[0], batch); break;
  case HK_OP_EWCHAIN: out->flops = program_steps(nd->program) * n_out; break;
  case HK_OP_ADD:
  case HK_OP_MUL:
  case HK_OP_RELU:
  case HK_OP_GELU:
  case HK_OP_GELU_TANH:
  case HK_OP_TANH:
  case HK_OP_SILU: out->flops = n_out; break;
  default: break;
  }
}
