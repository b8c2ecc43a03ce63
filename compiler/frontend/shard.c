/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shard.c -- tensor parallelism: the IR of one of `ranks` ranks (frontend.h, hkc_shard).
 *
 * Every tensor is, on each rank, one of:
 *   WHOLE   the same whole tensor on every rank;
 *   SPLIT   its last dim split over the ranks: segments (a packed q | k | v: three) of the whole
 *           last dim, each cut into pieces, rank r holding piece r * parts / ranks of each (parts
 *           below ranks: kv heads fewer than the ranks, each piece on ranks / parts ranks);
 *   PARTIAL this rank's share of a sum (a row-parallel gemm's C before its all_reduce).
 * The nodes are walked in order and rewritten into a new list: a column-parallel gemm turns WHOLE
 * A into SPLIT C (its B and bias sliced by output column), a row-parallel gemm SPLIT A into PARTIAL
 * C, which an all_reduce makes WHOLE before the gemm's bias and residual are added (two add nodes:
 * fusion folds them into what follows). Rope, kv_append, kv_attention and attention on a SPLIT
 * input take their rank's heads; element-wise ops keep SPLIT when every operand has the same
 * layout; take_rows keeps it; anything else needs WHOLE inputs, for which an all_gather is placed
 * before the first node that reads the SPLIT tensor (once per tensor). A graph output that would
 * be SPLIT is gathered into its own name. Params and state record how their rank's slice comes
 * from the whole tensor (hkc_tensor_t.shard); a param that is used whole and sliced (tied
 * embeddings: the table of the embedding and the LM head) gets a second param for the slice,
 * `<name>_shard`, whose record names the param it slices (source).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "util/util.h"

enum { WHOLE = 0, SPLIT = 1, PARTIAL = 2 };

typedef struct layout {
  int n_seg;
  int64_t size[HK_MAX_SHARD_SEGMENTS]; /* whole elements of each segment */
  int parts[HK_MAX_SHARD_SEGMENTS];
} layout_t;

typedef struct shard_ctx {
  hkc_spec_t *s;
  int ranks;
  size_t cap_tensors;
  int *state;        /* per tensor */
  layout_t *lay;     /* per tensor, SPLIT ones */
  int *whole;        /* per tensor: its WHOLE copy made by an all_gather, HKC_NONE */
  int *used_whole;   /* per tensor: some node reads it whole (params: then a slice is a copy) */
  int *slice;        /* per param: the param holding its slice (itself or its `_shard` copy), HKC_NONE */
  int *dq_param;     /* per tensor: a split gemm's dequantized B: the 8-bit param it copies (sliced along
                        dq_axis by lay[t]), HKC_NONE */
  int *dq_axis;
  hkc_node_t *nodes; /* the new list */
  size_t n_nodes, cap_nodes;
} shard_ctx_t;

static int64_t layout_local(const layout_t *l) {
  int64_t n = 0;
  for (int k = 0; k < l->n_seg; k++) n += l->size[k] / l->parts[k];
  return n;
}
static int64_t layout_whole(const layout_t *l) {
  int64_t n = 0;
  for (int k = 0; k < l->n_seg; k++) n += l->size[k];
  return n;
}
static int layout_equal(const layout_t *a, const layout_t *b) {
  if (a->n_seg != b->n_seg) return 0;
  for (int k = 0; k < a->n_seg; k++)
    if (a->size[k] != b->size[k] || a->parts[k] != b->parts[k]) return 0;
  return 1;
}
static layout_t layout_one(int64_t size, int parts) { return (layout_t){1, {size}, {parts}}; }

/* Pieces of `heads` heads over the ranks: every rank its own (heads a multiple of ranks), or
 * whole heads shared by ranks / heads ranks each (heads dividing ranks). 0 when neither. */
static int head_parts(int64_t heads, int ranks) {
  if (heads >= ranks) return heads % ranks == 0 ? ranks : 0;
  return ranks % heads == 0 ? (int)heads : 0;
}

static int oom(const shard_ctx_t *c) {
  hkc_error((hkc_loc_t){c->s->path, 0, 0}, "out of memory");
  return -1;
}

/* A new tensor like `like` (dtype, rank, dims) named name, role INTERMEDIATE unless given; the
 * context's per-tensor arrays grow with it. Returns its index or -1 (reported). */
static int add_tensor(shard_ctx_t *c, const char *name, int like, hk_role_t role) {
  hkc_spec_t *s = c->s;
  if (hkc_tensor_find(s, name) != HKC_NONE) {
    hkc_error(s->tensors[like].loc, "tensor '%s': the name is taken by what tensor parallelism makes of '%s'; rename it",
              name, s->tensors[like].name);
    return -1;
  }
  if (s->n_tensors >= HK_MAX_TENSORS) {
    hkc_error(s->tensors[like].loc, "too many tensors (at most %u)", HK_MAX_TENSORS);
    return -1;
  }
  const size_t n = s->n_tensors + 1;
  if (hkc_reserve((void **)&s->tensors, &c->cap_tensors, n, sizeof *s->tensors) != 0) return oom(c);
  int *st = realloc(c->state, n * sizeof *st), *wh, *uw, *sl;
  if (st) c->state = st;
  wh = st ? realloc(c->whole, n * sizeof *wh) : NULL;
  if (wh) c->whole = wh;
  uw = wh ? realloc(c->used_whole, n * sizeof *uw) : NULL;
  if (uw) c->used_whole = uw;
  sl = uw ? realloc(c->slice, n * sizeof *sl) : NULL;
  if (sl) c->slice = sl;
  int *dp = sl ? realloc(c->dq_param, n * sizeof *dp) : NULL, *da;
  if (dp) c->dq_param = dp;
  da = dp ? realloc(c->dq_axis, n * sizeof *da) : NULL;
  if (da) c->dq_axis = da;
  layout_t *ly = da ? realloc(c->lay, n * sizeof *ly) : NULL;
  if (!ly) return oom(c);
  c->lay = ly;
  hkc_tensor_t *t = &s->tensors[n - 1];
  *t = s->tensors[like];
  t->name = hkc_strdup(name);
  if (!t->name) return oom(c);
  t->role = role;
  t->producer = HKC_NONE;
  t->parts = NULL;
  t->n_parts = 0;
  memset(&t->shard, 0, sizeof t->shard);
  c->state[n - 1] = WHOLE, c->whole[n - 1] = HKC_NONE, c->used_whole[n - 1] = 0, c->slice[n - 1] = HKC_NONE;
  c->dq_param[n - 1] = HKC_NONE, c->dq_axis[n - 1] = 0;
  memset(&c->lay[n - 1], 0, sizeof c->lay[n - 1]);
  s->n_tensors = n;
  return (int)(n - 1);
}

static hkc_node_t *push_node(shard_ctx_t *c, const hkc_node_t *nd) {
  if (hkc_reserve((void **)&c->nodes, &c->cap_nodes, c->n_nodes + 1, sizeof *c->nodes) != 0) return oom(c), NULL;
  hkc_node_t *out = &c->nodes[c->n_nodes++];
  *out = *nd;
  if (out->out != HKC_NONE) c->s->tensors[out->out].producer = (int)(c->n_nodes - 1);
  return out;
}

/* A node of op made here (a collective, an add), named name, at where's location. */
static hkc_node_t *new_node(shard_ctx_t *c, hk_op_t op, const char *name, const hkc_node_t *where, int in0, int in1,
                            int out) {
  hkc_node_t nd;
  memset(&nd, 0, sizeof nd);
  for (int i = 0; i < HKC_MAX_NODE_IN; i++) nd.in[i] = HKC_NONE;
  nd.bias = nd.residual = nd.mul = nd.gamma = nd.beta = nd.add_in = nd.sum_out = HKC_NONE;
  nd.lengths = nd.mask = nd.pos = nd.ctx = nd.slot = nd.k_cache = nd.v_cache = HKC_NONE;
  nd.op = op;
  nd.loc = where->loc;
  nd.in[0] = in0;
  nd.in[1] = in1;
  nd.n_in = in1 == HKC_NONE ? 1 : 2;
  nd.out = out;
  nd.n_fused = 1;
  nd.ranks = c->ranks;
  if (!(nd.name = hkc_strdup(name))) return oom(c), NULL;
  for (size_t j = 0; j < c->s->n_nodes; j++)
    if (c->s->nodes[j].name && !strcmp(c->s->nodes[j].name, name)) {
      free(nd.name);
      hkc_error(c->s->nodes[j].loc, "node '%s': the name is taken by a node tensor parallelism places; rename it",
                name);
      return NULL;
    }
  return push_node(c, &nd);
}

/* *t as a whole tensor for node `at`: itself, or its all_gather (made once). 0 / -1 (reported). */
static int whole_of(shard_ctx_t *c, int *t, const hkc_node_t *at) {
  if (*t == HKC_NONE || c->state[*t] == WHOLE) return 0;
  if (c->whole[*t] != HKC_NONE) {
    *t = c->whole[*t];
    return 0;
  }
  hkc_spec_t *s = c->s;
  const layout_t *l = &c->lay[*t];
  if (c->state[*t] != SPLIT || l->n_seg != 1 || l->parts[0] != c->ranks) {
    hkc_error(at->loc, "node '%s' reads '%s' whole, but its columns are split over the ranks in pieces that an "
              "all_gather cannot put back in order (a packed q|k|v, or kv heads shared by ranks); read it through the "
              "node that splits its heads", at->name, s->tensors[*t].name);
    return -1;
  }
  char name[HK_MAX_NAME_LEN + 16];
  snprintf(name, sizeof name, "%s_whole", s->tensors[*t].name);
  const int g = add_tensor(c, name, *t, HK_ROLE_INTERMEDIATE);
  if (g < 0) return -1;
  s->tensors[g].dims[s->tensors[g].rank - 1].add = layout_whole(l);
  snprintf(name, sizeof name, "%s_all_gather", s->tensors[*t].name);
  if (!new_node(c, HK_OP_ALL_GATHER, name, at, *t, HKC_NONE, g)) return -1;
  c->whole[*t] = g;
  *t = g;
  return 0;
}

static int slice_tensor(shard_ctx_t *c, int p, int axis, const layout_t *l, const hkc_node_t *at);
static int column_layout(shard_ctx_t *c, size_t j, int64_t n, layout_t *out);

/* An 8-bit param q just sliced along axis by layout l: its scales [rows / block rows, cols / block
 * cols] follow, by blocks (a block along axis that spans the whole dim: the scales are whole on
 * every rank, one per row or column they do not split). Every piece must be whole blocks. */
static int slice_scale(shard_ctx_t *c, int q, int axis, const layout_t *l, const hkc_node_t *at) {
  hkc_spec_t *s = c->s;
  const int64_t block = s->tensors[q].block[axis];
  if (block >= layout_whole(l)) return 0; /* one scale across the axis: every rank's */
  layout_t sl = *l;
  for (int k = 0; k < l->n_seg; k++) {
    if (block <= 0 || (l->size[k] / l->parts[k]) % block != 0) {
      hkc_error(at->loc, "node '%s': param '%s' has a scale per %lld elements along axis %d, and its pieces of %lld "
                "do not hold whole blocks", at->name, s->tensors[q].name, (long long)block, axis,
                (long long)(l->size[k] / l->parts[k]));
      return -1;
    }
    sl.size[k] = l->size[k] / block;
  }
  const int sc = s->tensors[q].scale;
  if (s->tensors[sc].rank != 2) return 0; /* [1]: one scale for the tensor */
  const int held = slice_tensor(c, sc, axis, &sl, at);
  if (held < 0) return -1;
  s->tensors[q].scale = held;
  return 0;
}

/* A dequant node whose copy a split gemm reads as B: the 8-bit param (and its scales) sliced as
 * that gemm would slice B, the copy shaped like the slice (dq_param, dq_axis and lay record how).
 * Every gemm that reads the copy must split the same way (slice_b checks). 1: done; 0: no split
 * gemm reads it (a node like any other); -1 (reported). */
static int shard_dequant(shard_ctx_t *c, size_t j, hkc_node_t *nd) {
  hkc_spec_t *s = c->s;
  for (size_t k = j + 1; k < s->n_nodes; k++) {
    const hkc_node_t *g = &s->nodes[k];
    if (g->op != HK_OP_GEMM || g->n_in < 2 || g->in[1] != nd->out) continue;
    if (g->shard == HKC_SHARD_NONE) return 0;
    const hkc_tensor_t *q = &s->tensors[nd->in[0]];
    const int n_axis = g->trans_b ? 0 : 1, axis = g->shard == HKC_SHARD_COLUMN ? n_axis : 1 - n_axis;
    layout_t l;
    if (q->rank != 2) return 0;
    if (g->shard == HKC_SHARD_COLUMN) {
      if (column_layout(c, k, q->dims[n_axis].add, &l) != 0) return -1;
    } else {
      if (c->state[g->in[0]] != SPLIT) return 0; /* shard_gemm reports it */
      l = c->lay[g->in[0]];
    }
    const int held = slice_tensor(c, nd->in[0], axis, &l, g);
    if (held < 0) return -1;
    nd->in[0] = held;
    hkc_tensor_t *copy = &s->tensors[nd->out];
    copy->dims[axis].add = layout_local(&l);
    c->dq_param[nd->out] = held;
    c->dq_axis[nd->out] = axis;
    c->lay[nd->out] = l;
    return push_node(c, nd) ? 1 : -1;
  }
  return 0;
}

/* Sets param or state p's shard along axis to layout l (its dim there must be l's whole; the
 * dim becomes the rank's). A param that is also read whole, or already sliced another way, is
 * sliced as its `_shard` copy. Returns the tensor that holds the slice, or -1 (reported). */
static int slice_tensor(shard_ctx_t *c, int p, int axis, const layout_t *l, const hkc_node_t *at) {
  hkc_spec_t *s = c->s;
  hkc_tensor_t *t = &s->tensors[p];
  if (t->role != HK_ROLE_PARAM && t->role != HK_ROLE_STATE) {
    hkc_error(at->loc, "node '%s': tensor parallelism slices '%s', which is not a param or state (a %s split gemm "
              "reads its B and bias from params)", at->name, t->name, at->shard == HKC_SHARD_ROW ? "row" : "column");
    return -1;
  }
  const hkc_shard_t want = {.axis = axis,
                            .n_seg = l->n_seg,
                            .seg_size = {l->size[0], l->size[1], l->size[2]},
                            .seg_parts = {l->parts[0], l->parts[1], l->parts[2]},
                            .source = p};
  if (c->slice[p] != HKC_NONE) { /* sliced before: the same way, or an error */
    const hkc_shard_t *had = &s->tensors[c->slice[p]].shard;
    if (had->axis == axis && had->n_seg == l->n_seg &&
        !memcmp(had->seg_size, want.seg_size, sizeof want.seg_size) &&
        !memcmp(had->seg_parts, want.seg_parts, sizeof want.seg_parts))
      return c->slice[p];
    hkc_error(at->loc, "node '%s': '%s' is split one way here and another way by an earlier node; give each its "
              "own param", at->name, t->name);
    return -1;
  }
  if (t->dims[axis].mul != 0 || t->dims[axis].add != layout_whole(l)) {
    hkc_error(at->loc, "node '%s': '%s' has %lld elements along axis %d, where the split needs %lld", at->name,
              t->name, (long long)t->dims[axis].add, axis, (long long)layout_whole(l));
    return -1;
  }
  int holder = p;
  if (c->used_whole[p]) { /* read whole elsewhere: the slice is a param of its own */
    if (t->role != HK_ROLE_PARAM) {
      hkc_error(at->loc, "node '%s': state '%s' is read whole by one node and split by another", at->name, t->name);
      return -1;
    }
    char name[HK_MAX_NAME_LEN + 16];
    snprintf(name, sizeof name, "%s_shard", t->name);
    if ((holder = add_tensor(c, name, p, HK_ROLE_PARAM)) < 0) return -1;
    t = &s->tensors[p]; /* the table may have moved */
    hkc_tensor_t *h = &s->tensors[holder];
    if (t->n_parts) { /* the same checkpoint tensors */
      if (!(h->parts = calloc(t->n_parts, sizeof *h->parts))) return oom(c);
      for (uint32_t k = 0; k < t->n_parts; k++)
        if (!(h->parts[k] = hkc_strdup(t->parts[k]))) return oom(c);
      h->n_parts = t->n_parts;
    }
  }
  hkc_tensor_t *h = &s->tensors[holder];
  h->shard = want;
  h->dims[axis].add = layout_local(l);
  c->slice[p] = holder;
  if (h->scale != HKC_NONE && slice_scale(c, holder, axis, l, at) != 0) return -1;
  return holder;
}

/* A split gemm's B: its param sliced along axis by l, or (an 8-bit param's dequantized copy) the
 * copy its dequant node made of the slice, which must have been sliced the same way. */
static int slice_b(shard_ctx_t *c, int b, int axis, const layout_t *l, const hkc_node_t *at) {
  if (c->dq_param[b] == HKC_NONE) return slice_tensor(c, b, axis, l, at);
  if (c->dq_axis[b] != axis || !layout_equal(&c->lay[b], l)) {
    hkc_error(at->loc, "node '%s': its 8-bit B '%s' is read by gemms split in different ways; give each its own param",
              at->name, c->s->tensors[b].name);
    return -1;
  }
  return b;
}

/* The layout of a column-parallel gemm's C from what reads it: a packed q | k | v (rope packed,
 * kv_append, attention of one input) splits by heads, segment by segment; a rope or attention of
 * separate heads by heads; anything else by columns. 0 / -1 (reported). */
static int column_layout(shard_ctx_t *c, size_t j, int64_t n, layout_t *out) {
  const hkc_spec_t *s = c->s;
  const hkc_node_t *g = &s->nodes[j];
  const int out_t = g->out;
  for (size_t k = j + 1; k < s->n_nodes; k++) {
    const hkc_node_t *r = &s->nodes[k];
    if (r->n_in < 1 || r->in[0] != out_t) continue;
    const int packed = (r->op == HK_OP_ROPE && r->packed) || r->op == HK_OP_KV_APPEND ||
                       (r->op == HK_OP_ATTENTION && r->n_in == 1);
    if (!packed && r->op != HK_OP_ROPE && r->op != HK_OP_ATTENTION && r->op != HK_OP_KV_ATTENTION) continue;
    const int64_t h = r->heads, kvh = packed ? r->kv_heads : 0, all = h + 2 * kvh;
    const int hp = head_parts(h, c->ranks), kp = kvh ? head_parts(kvh, c->ranks) : c->ranks;
    if (hp != c->ranks || !kp || all <= 0 || n % all != 0) {
      hkc_error(g->loc, "node '%s': %lld heads%s cannot be split over %d ranks (heads must be a multiple of the ranks; "
                "kv heads a multiple or a divisor)", g->name, (long long)h,
                kvh ? " and their kv heads" : "", c->ranks);
      return -1;
    }
    const int64_t dh = n / all;
    if (!packed) {
      *out = layout_one(n, c->ranks);
      return 0;
    }
    *out = (layout_t){3, {h * dh, kvh * dh, kvh * dh}, {c->ranks, kp, kp}};
    return 0;
  }
  if (n % c->ranks != 0) {
    hkc_error(g->loc, "node '%s': its %lld output columns cannot be split over %d ranks", g->name, (long long)n,
              c->ranks);
    return -1;
  }
  *out = layout_one(n, c->ranks);
  return 0;
}

/* Marks SPLIT tensor t of layout l, its last dim now the rank's. */
static void set_split(shard_ctx_t *c, int t, const layout_t *l) {
  c->state[t] = SPLIT;
  c->lay[t] = *l;
  hkc_tensor_t *x = &c->s->tensors[t];
  x->dims[x->rank - 1].add = layout_local(l);
}

/* Pushes nd, whose output is SPLIT by layout l. When that output is a graph output, nd writes
 * `<name>_local` instead, and an all_gather the output itself. 0 / -1 (reported). */
static int split_output(shard_ctx_t *c, hkc_node_t *nd, const layout_t *l) {
  hkc_spec_t *s = c->s;
  const int o = nd->out;
  if (s->tensors[o].role != HK_ROLE_OUTPUT) {
    set_split(c, o, l);
    return push_node(c, nd) ? 0 : -1;
  }
  if (l->n_seg != 1 || l->parts[0] != c->ranks) {
    hkc_error(nd->loc, "node '%s': graph output '%s' would be split over the ranks in pieces that an all_gather "
              "cannot put back in order", nd->name, s->tensors[o].name);
    return -1;
  }
  char name[HK_MAX_NAME_LEN + 16];
  snprintf(name, sizeof name, "%s_local", s->tensors[o].name);
  const int local = add_tensor(c, name, o, HK_ROLE_INTERMEDIATE);
  if (local < 0) return -1;
  nd->out = local;
  set_split(c, local, l);
  if (!push_node(c, nd)) return -1;
  snprintf(name, sizeof name, "%s_all_gather", s->tensors[o].name);
  if (!new_node(c, HK_OP_ALL_GATHER, name, nd, local, HKC_NONE, o)) return -1;
  c->whole[local] = o;
  return 0;
}

static int shard_gemm(shard_ctx_t *c, size_t j, hkc_node_t *nd) {
  hkc_spec_t *s = c->s;
  const int B = nd->in[1];
  if (B != HKC_NONE && s->tensors[B].producer != HKC_NONE && c->dq_param[B] == HKC_NONE &&
      nd->shard != HKC_SHARD_NONE) {
    hkc_error(nd->loc, "node '%s': its B '%s' is made by a node; tensor parallelism splits gemms of param B (or of an "
              "8-bit param's dequantized copy) only", nd->name, s->tensors[B].name);
    return -1;
  }
  const hkc_tensor_t *b = &s->tensors[B];
  const int n_axis = nd->trans_b ? 0 : 1, k_axis = 1 - n_axis;
  if (nd->shard == HKC_SHARD_COLUMN) {
    if (whole_of(c, &nd->in[0], nd) != 0) return -1;
    if (nd->residual != HKC_NONE || nd->mul != HKC_NONE) {
      hkc_error(nd->loc, "node '%s': a column-parallel gemm takes no %s (its C is split over the ranks); add it in "
                "a node of its own", nd->name, nd->residual != HKC_NONE ? "residual" : "mul");
      return -1;
    }
    layout_t l;
    const int64_t n = c->dq_param[B] != HKC_NONE ? layout_whole(&c->lay[B]) : b->dims[n_axis].add;
    if (b->rank != 2 || column_layout(c, j, n, &l) != 0) return -1;
    if ((nd->in[1] = slice_b(c, B, n_axis, &l, nd)) < 0) return -1;
    if (nd->bias != HKC_NONE && (nd->bias = slice_tensor(c, nd->bias, s->tensors[nd->bias].rank - 1, &l, nd)) < 0)
      return -1;
    return split_output(c, nd, &l);
  }
  if (nd->shard == HKC_SHARD_ROW) {
    const int a = nd->in[0];
    if (c->state[a] != SPLIT) {
      hkc_error(nd->loc, "node '%s': a row-parallel gemm reads A split by columns over the ranks, and '%s' is whole "
                "on every rank (make the gemm that produces it column-parallel)", nd->name, s->tensors[a].name);
      return -1;
    }
    if (nd->act != HK_ACT_NONE || nd->mul != HKC_NONE) {
      hkc_error(nd->loc, "node '%s': a row-parallel gemm's C is a partial sum until its all_reduce, so it takes no "
                "act or mul (apply them in a node after it)", nd->name);
      return -1;
    }
    layout_t l = c->lay[a];
    if (b->rank != 2 || (nd->in[1] = slice_b(c, B, k_axis, &l, nd)) < 0) return -1;
    const int out = nd->out, bias = nd->bias, residual = nd->residual;
    char name[HK_MAX_NAME_LEN + 24];
    snprintf(name, sizeof name, "%s_partial", s->tensors[out].name);
    const int partial = add_tensor(c, name, out, HK_ROLE_INTERMEDIATE);
    if (partial < 0) return -1;
    c->state[partial] = PARTIAL;
    nd->out = partial;
    nd->bias = nd->residual = HKC_NONE;
    const char *base = nd->name;
    if (!push_node(c, nd)) return -1;
    /* all_reduce, then + bias, then + residual: each step's output the next one's input */
    int cur = partial;
    const int steps[2] = {bias, residual};
    const char *suffix[3] = {"_reduced", "_biased", ""};
    int last_step = -1;
    for (int k = 0; k < 2; k++)
      if (steps[k] != HKC_NONE) last_step = k;
    for (int k = -1; k < 2; k++) {
      if (k >= 0 && steps[k] == HKC_NONE) continue;
      int next = out;
      if (k < last_step) {
        snprintf(name, sizeof name, "%s%s", s->tensors[out].name, suffix[k + 1]);
        if ((next = add_tensor(c, name, out, HK_ROLE_INTERMEDIATE)) < 0) return -1;
      }
      int step = k >= 0 ? steps[k] : HKC_NONE;
      if (whole_of(c, &step, nd) != 0) return -1;
      snprintf(name, sizeof name, "%s_%s", base, k < 0 ? "all_reduce" : k == 0 ? "bias" : "residual");
      if (!new_node(c, k < 0 ? HK_OP_ALL_REDUCE : HK_OP_ADD, name, nd, cur, step, next))
        return -1;
      cur = next;
    }
    return 0;
  }
  int *refs[] = {&nd->in[0], &nd->in[1], &nd->bias, &nd->residual, &nd->mul};
  for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++)
    if (whole_of(c, refs[k], nd) != 0) return -1;
  return push_node(c, nd) ? 0 : -1;
}

/* rope, kv_append, kv_attention, attention of SPLIT inputs: the rank's heads. */
static int shard_heads(shard_ctx_t *c, hkc_node_t *nd) {
  hkc_spec_t *s = c->s;
  const int x = nd->in[0];
  const layout_t *l = &c->lay[x];
  const int packed = (nd->op == HK_OP_ROPE && nd->packed) || nd->op == HK_OP_KV_APPEND ||
                     (nd->op == HK_OP_ATTENTION && nd->n_in == 1);
  const int hp = head_parts(nd->heads, c->ranks), kp = head_parts(nd->kv_heads, c->ranks);
  if (hp != c->ranks || !kp || (packed && l->n_seg != 3) || (!packed && l->n_seg != 1)) {
    hkc_error(nd->loc, "node '%s': its input '%s' is split over %d ranks in a way that does not match its %d heads "
              "and %d kv heads%s", nd->name, s->tensors[x].name, c->ranks, nd->heads, nd->kv_heads,
              packed ? " (a packed q|k|v: make the gemm that produces it column-parallel)" : "");
    return -1;
  }
  const int64_t dh = l->size[0] / nd->heads;
  const int kv_local = nd->kv_heads / kp;
  if (nd->op == HK_OP_KV_APPEND || nd->op == HK_OP_KV_ATTENTION) { /* the caches: by kv head */
    const layout_t cl = layout_one(nd->kv_heads * dh, kp);
    int *caches[2] = {&nd->k_cache, &nd->v_cache};
    for (int k = 0; k < 2; k++) {
      const hkc_tensor_t *t = &s->tensors[*caches[k]];
      if ((*caches[k] = slice_tensor(c, *caches[k], (int)t->rank - 1, &cl, nd)) < 0) return -1;
    }
  }
  if (nd->op == HK_OP_ATTENTION && nd->n_in == 3)
    for (int k = 1; k < 3; k++)
      if (c->state[nd->in[k]] != SPLIT || c->lay[nd->in[k]].n_seg != 1 || c->lay[nd->in[k]].parts[0] != kp) {
        hkc_error(nd->loc, "node '%s': q is split over the ranks by heads, and '%s' is not split by its kv heads",
                  nd->name, s->tensors[nd->in[k]].name);
        return -1;
      }
  if (nd->mask != HKC_NONE && s->tensors[nd->mask].rank == 4 && s->tensors[nd->mask].dims[1].add != 1) {
    hkc_error(nd->loc, "node '%s': a mask per head cannot be split over the ranks yet", nd->name);
    return -1;
  }
  int *refs[] = {&nd->mask, &nd->lengths, &nd->ctx, &nd->slot};
  for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++)
    if (whole_of(c, refs[k], nd) != 0) return -1;
  nd->heads /= c->ranks;
  nd->kv_heads = kv_local;
  layout_t out = *l; /* rope: as it came; the others: the q heads */
  if (nd->op != HK_OP_ROPE) out = layout_one(l->size[0], c->ranks);
  return split_output(c, nd, &out);
}

/* Element-wise ops: SPLIT when every operand is, alike; else every operand whole. */
static int shard_elementwise(shard_ctx_t *c, hkc_node_t *nd) {
  int all_split = 1;
  for (int i = 0; i < nd->n_in; i++) {
    const int t = nd->in[i];
    all_split = all_split && c->state[t] == SPLIT && layout_equal(&c->lay[t], &c->lay[nd->in[0]]) &&
                c->s->tensors[t].rank == c->s->tensors[nd->in[0]].rank &&
                hkc_dim_equal(c->s->tensors[t].dims[0], c->s->tensors[nd->in[0]].dims[0]);
  }
  if (all_split) return split_output(c, nd, &c->lay[nd->in[0]]);
  for (int i = 0; i < nd->n_in; i++)
    if (whole_of(c, &nd->in[i], nd) != 0) return -1;
  return push_node(c, nd) ? 0 : -1;
}

/* Every tensor a node reads, as pointers into it. */
static int node_refs(hkc_node_t *nd, int **out) {
  int n = 0;
  for (int i = 0; i < nd->n_in; i++) out[n++] = &nd->in[i];
  int *more[] = {&nd->bias, &nd->residual, &nd->mul, &nd->gamma, &nd->beta, &nd->add_in, &nd->lengths,
                 &nd->mask, &nd->pos, &nd->ctx, &nd->slot, &nd->k_cache, &nd->v_cache};
  for (size_t k = 0; k < sizeof more / sizeof more[0]; k++)
    if (*more[k] != HKC_NONE) out[n++] = more[k];
  return n;
}

/* Which params some node reads whole (not as a split gemm's B or bias). */
static void mark_whole_uses(shard_ctx_t *c) {
  const hkc_spec_t *s = c->s;
  for (size_t j = 0; j < s->n_nodes; j++) {
    hkc_node_t nd = s->nodes[j];
    int *refs[HKC_MAX_NODE_IN + 13];
    const int n = node_refs(&nd, refs);
    for (int k = 0; k < n; k++) {
      const int t = *refs[k];
      const int sliced = nd.op == HK_OP_GEMM && nd.shard != HKC_SHARD_NONE && (refs[k] == &nd.in[1] || refs[k] == &nd.bias);
      const int cache = refs[k] == &nd.k_cache || refs[k] == &nd.v_cache;
      const int dequant = nd.op == HK_OP_DEQUANT; /* shard_dequant: sliced with its gemm's B */
      if (!sliced && !cache && !dequant) c->used_whole[t] = 1;
    }
  }
}

int hkc_shard(hkc_spec_t *spec, int ranks) {
  if (ranks < 1) return 0;
  if (spec->sharded_ranks) {
    hkc_error((hkc_loc_t){spec->path, 0, 0}, "the spec is already split over %d ranks", spec->sharded_ranks);
    return -1;
  }
  if (ranks > (int)HK_MAX_TENSOR_RANKS) {
    hkc_error((hkc_loc_t){spec->path, 0, 0}, "tensor parallelism over %d ranks: at most %u", ranks,
              HK_MAX_TENSOR_RANKS);
    return -1;
  }
  if (spec->fusion == HKC_FUSION_GROUPS) { /* the groups name nodes by index, which the split renumbers */
    hkc_error((hkc_loc_t){spec->path, 0, 0}, "explicit fusion groups and tensor parallelism cannot be combined yet "
              "(use fusion: auto or none)");
    return -1;
  }
  shard_ctx_t c = {.s = spec, .ranks = ranks, .cap_tensors = spec->n_tensors};
  const size_t n = spec->n_tensors ? spec->n_tensors : 1;
  c.state = calloc(n, sizeof *c.state);
  c.whole = malloc(n * sizeof *c.whole);
  c.used_whole = calloc(n, sizeof *c.used_whole);
  c.slice = malloc(n * sizeof *c.slice);
  c.dq_param = malloc(n * sizeof *c.dq_param);
  c.dq_axis = calloc(n, sizeof *c.dq_axis);
  c.lay = calloc(n, sizeof *c.lay);
  int rc = -1, marked = 0;
  if (!c.state || !c.whole || !c.used_whole || !c.slice || !c.lay || !c.dq_param || !c.dq_axis) {
    oom(&c);
    goto done;
  }
  for (size_t t = 0; t < spec->n_tensors; t++) c.whole[t] = c.slice[t] = c.dq_param[t] = HKC_NONE;
  mark_whole_uses(&c);
  for (size_t j = 0; j < spec->n_nodes; j++) {
    hkc_node_t nd = spec->nodes[j];
    marked |= nd.shard != HKC_SHARD_NONE;
    int r;
    switch (nd.op) {
    case HK_OP_GEMM: r = shard_gemm(&c, j, &nd); break;
    case HK_OP_ROPE:
    case HK_OP_KV_APPEND:
    case HK_OP_KV_ATTENTION:
    case HK_OP_ATTENTION: r = c.state[nd.in[0]] == SPLIT ? shard_heads(&c, &nd) : -2; break;
    case HK_OP_ADD:
    case HK_OP_MUL:
    case HK_OP_RELU:
    case HK_OP_GELU:
    case HK_OP_SILU:
    case HK_OP_GELU_TANH:
    case HK_OP_TANH: r = shard_elementwise(&c, &nd); break;
    case HK_OP_DEQUANT: r = shard_dequant(&c, j, &nd) == 1 ? 0 : -2; break;
    case HK_OP_TAKE_ROWS:
      r = c.state[nd.in[0]] == SPLIT && c.lay[nd.in[0]].n_seg == 1 ? split_output(&c, &nd, &c.lay[nd.in[0]]) : -2;
      break;
    default: r = -2; break;
    }
    if (r == -2) { /* every input whole */
      int *refs[HKC_MAX_NODE_IN + 13];
      const int k_n = node_refs(&nd, refs);
      r = 0;
      for (int k = 0; k < k_n && r == 0; k++)
        r = whole_of(&c, refs[k], &nd);
      if (r == 0 && !push_node(&c, &nd)) r = -1;
    }
    if (r != 0) goto done;
  }
  if (!marked) {
    hkc_error((hkc_loc_t){spec->path, 0, 0}, "tensor parallelism over %d ranks, but no gemm is marked `shard: column` "
              "or `shard: row`: every rank would compute the whole graph (docs/SPEC.md, \"Tensor parallelism\")",
              ranks);
    goto done;
  }
  free(spec->nodes);
  spec->nodes = c.nodes;
  spec->n_nodes = c.n_nodes;
  c.nodes = NULL;
  spec->sharded_ranks = ranks;
  spec->tensor_parallel = ranks;
  rc = 0;
done: /* on failure the spec keeps its nodes: the new list shares their names, and owns only the
       * names of the nodes made here (new_node: ranks set) */
  for (size_t j = 0; rc != 0 && j < c.n_nodes; j++)
    if (c.nodes[j].ranks) free(c.nodes[j].name);
  free(c.nodes);
  free(c.state);
  free(c.whole);
  free(c.used_whole);
  free(c.slice);
  free(c.dq_param);
  free(c.dq_axis);
  free(c.lay);
  return rc;
}
