/* SPDX-License-Identifier: Apache-2.0 */
/* spec_node.c -- one graph node of the spec (spec_internal.h): its keys and attributes per
 * op, its tensor names resolved, and the topological sort of the nodes. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "frontend/spec_internal.h"
#include "util/util.h"

/* A count such as `heads`: a positive integer or an expression over the dims. */
static int parse_count(spec_ctx_t *c, const ynode_t *n, const char *what, int64_t *out) {
  if (hkc_spec_expect_kind(n, Y_SCALAR, "a positive integer", what) != 0) return -1;
  hkc_dim_t d;
  if (hkc_dimexpr_eval(n->text, c->spec->dims, c->spec->n_dims, hkc_spec_scalar_text_loc(n), &d) != 0) return -1;
  if (d.mul != 0 || d.add > INT32_MAX) {
    hkc_error(n->loc, "'%s' must be a positive integer below 2^31 that does not depend on batch", what);
    return -1;
  }
  *out = d.add;
  return 0;
}

/* ---- graph nodes ------------------------------------------------------------------------------ */
enum {
  NK_NAME, NK_OP, NK_IN, NK_OUT, NK_BIAS, NK_RESIDUAL, NK_ACT, NK_TRANS_B, NK_GAMMA, NK_BETA, NK_EPS,
  NK_HEADS, NK_KV_HEADS, NK_CAUSAL, NK_SCALE, NK_THETA, NK_OFFSET, NK_MUL, NK_LENGTHS, NK_MASK, NK_POS, NK_PACKED,
  NK_CTX, NK_SLOT, NK_K_CACHE, NK_V_CACHE, NK_LAYER, NK_WINDOW, NK_SCALING, NK_FACTOR, NK_LOW_FREQ, NK_HIGH_FREQ,
  NK_ORIGINAL_MAX, NK_SHARD, NK_COUNT
};
static const char *const node_keys[NK_COUNT] = {"name",  "op",   "in",  "out",   "bias",     "residual",
                                                "act",   "trans_b", "gamma", "beta", "eps", "heads",
                                                "kv_heads", "causal", "scale", "theta", "offset", "mul",
                                                "lengths", "mask", "pos", "packed", "ctx", "slot",
                                                "k_cache", "v_cache", "layer", "window", "scaling", "factor",
                                                "low_freq_factor", "high_freq_factor", "original_max", "shard"};
_Static_assert(NK_COUNT <= 64, "hkc_spec_map_collect's mask has a bit per key");
#define NKB(k) (UINT64_C(1) << (k))
#define NK_COMMON (NKB(NK_NAME) | NKB(NK_OP) | NKB(NK_IN) | NKB(NK_OUT))
#define NK_ROPE_SCALING (NKB(NK_SCALING) | NKB(NK_FACTOR) | NKB(NK_LOW_FREQ) | NKB(NK_HIGH_FREQ) | NKB(NK_ORIGINAL_MAX))
/* kv_append's keys, all but layer and kv_heads required; kv_attention adds scale and window */
#define NK_KV (NKB(NK_HEADS) | NKB(NK_K_CACHE) | NKB(NK_V_CACHE) | NKB(NK_CTX) | NKB(NK_SLOT))

/* Keys each op accepts, and how many inputs `in` takes (min..max). */
static const struct op_info {
  uint64_t keys, required;
  int min_in, max_in;
} op_info[HK_OP_COUNT_] = {
    [HK_OP_GEMM] = {NK_COMMON | NKB(NK_BIAS) | NKB(NK_RESIDUAL) | NKB(NK_MUL) | NKB(NK_ACT) | NKB(NK_TRANS_B) |
                        NKB(NK_SHARD),
                    NK_COMMON, 2, 2},
    [HK_OP_ADD] = {NK_COMMON, NK_COMMON, 2, 2},
    [HK_OP_MUL] = {NK_COMMON, NK_COMMON, 2, 2},
    [HK_OP_RELU] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_GELU] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_SILU] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_GELU_TANH] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_TANH] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_EMBEDDING] = {NK_COMMON | NKB(NK_POS) | NKB(NK_CTX), NK_COMMON, 2, 2},
    [HK_OP_LAYERNORM] = {NK_COMMON | NKB(NK_GAMMA) | NKB(NK_BETA) | NKB(NK_EPS), NK_COMMON | NKB(NK_GAMMA) | NKB(NK_BETA),
                         1, 1},
    [HK_OP_RMSNORM] = {NK_COMMON | NKB(NK_GAMMA) | NKB(NK_EPS), NK_COMMON | NKB(NK_GAMMA), 1, 1},
    [HK_OP_SOFTMAX] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_ATTENTION] = {NK_COMMON | NKB(NK_HEADS) | NKB(NK_KV_HEADS) | NKB(NK_CAUSAL) | NKB(NK_SCALE) |
                             NKB(NK_LENGTHS) | NKB(NK_MASK),
                         NK_COMMON | NKB(NK_HEADS), 1, 3},
    [HK_OP_ROPE] = {NK_COMMON | NKB(NK_HEADS) | NKB(NK_KV_HEADS) | NKB(NK_THETA) | NKB(NK_OFFSET) | NKB(NK_PACKED) |
                        NKB(NK_CTX) | NK_ROPE_SCALING,
                    NK_COMMON | NKB(NK_HEADS), 1, 1},
    [HK_OP_KV_APPEND] = {NK_COMMON | NK_KV | NKB(NK_KV_HEADS) | NKB(NK_LAYER), NK_COMMON | NK_KV, 1, 1},
    [HK_OP_KV_ATTENTION] = {NK_COMMON | NK_KV | NKB(NK_KV_HEADS) | NKB(NK_LAYER) | NKB(NK_SCALE) | NKB(NK_WINDOW),
                            NK_COMMON | NK_KV, 1, 1},
    [HK_OP_TAKE_ROWS] = {NK_COMMON, NK_COMMON, 2, 2},
    [HK_OP_ARGMAX] = {NK_COMMON, NK_COMMON, 1, 1},
    [HK_OP_SAMPLE] = {NK_COMMON, NK_COMMON, 2, 2},
};

/* heads and kv_heads (default heads), which must divide heads. */
static int parse_heads(spec_ctx_t *c, const ynode_t *const *v, const char *nm, hkc_node_t *nd) {
  int64_t h, kvh;
  if (parse_count(c, v[NK_HEADS], "heads", &h) != 0) return -1;
  kvh = h;
  if (v[NK_KV_HEADS] && parse_count(c, v[NK_KV_HEADS], "kv_heads", &kvh) != 0) return -1;
  if (h % kvh != 0) {
    hkc_error(v[NK_KV_HEADS]->loc, "node '%s': kv_heads (%lld) must divide heads (%lld)", nm, (long long)kvh,
              (long long)h);
    return -1;
  }
  nd->heads = (int)h;
  nd->kv_heads = (int)kvh;
  return 0;
}

/* A number that must be > 0 (rope scaling's factors). */
static int parse_positive(const ynode_t *n, const char *what, const char *nm, float *out) {
  if (hkc_spec_parse_float(n, what, out) != 0) return -1;
  if (!(*out > 0)) {
    hkc_error(n->loc, "node '%s': '%s' must be positive, got %g", nm, what, (double)*out);
    return -1;
  }
  return 0;
}

/* rope's `scaling: none | linear | llama3` and its numbers (Hugging Face's rope_scaling):
 * linear takes `factor` > 0; llama3 also 0 < `low_freq_factor` < `high_freq_factor` and the
 * integer `original_max` (original_max_position_embeddings). A kind's numbers are required
 * with it and refused without it. */
static int parse_rope_scaling(const ynode_t *const *v, const char *nm, hkc_node_t *nd) {
  static const char *const kinds[] = {[HKC_ROPE_SCALING_NONE] = "none", [HKC_ROPE_SCALING_LINEAR] = "linear",
                                      [HKC_ROPE_SCALING_LLAMA3] = "llama3"};
  static const int llama3_keys[] = {NK_LOW_FREQ, NK_HIGH_FREQ, NK_ORIGINAL_MAX};
  nd->rope_scaling = HKC_ROPE_SCALING_NONE;
  if (v[NK_SCALING]) {
    if (hkc_spec_expect_kind(v[NK_SCALING], Y_SCALAR, "none, linear or llama3", "scaling") != 0) return -1;
    int kind = -1;
    for (int k = 0; k < 3; k++)
      if (!strcmp(v[NK_SCALING]->text, kinds[k])) kind = k;
    if (kind < 0) {
      hkc_error(v[NK_SCALING]->loc, "node '%s': unknown rope scaling '%.64s' (expected none, linear or llama3)", nm,
                v[NK_SCALING]->text);
      return -1;
    }
    nd->rope_scaling = kind;
  }
  const int llama3 = nd->rope_scaling == HKC_ROPE_SCALING_LLAMA3;
  if (v[NK_FACTOR] && nd->rope_scaling == HKC_ROPE_SCALING_NONE) {
    hkc_error(v[NK_FACTOR]->loc, "node '%s': 'factor' is valid only with 'scaling: linear' or 'scaling: llama3'", nm);
    return -1;
  }
  int missing = nd->rope_scaling != HKC_ROPE_SCALING_NONE && !v[NK_FACTOR];
  for (size_t i = 0; i < 3; i++) {
    const int k = llama3_keys[i];
    if (v[k] && !llama3) {
      hkc_error(v[k]->loc, "node '%s': '%s' is valid only with 'scaling: llama3'", nm, node_keys[k]);
      return -1;
    }
    missing |= llama3 && !v[k];
  }
  if (missing) {
    hkc_error(v[NK_SCALING]->loc, "node '%s': 'scaling: %s' needs %s", nm, kinds[nd->rope_scaling],
              llama3 ? "'factor', 'low_freq_factor', 'high_freq_factor' and 'original_max'" : "'factor'");
    return -1;
  }
  if (nd->rope_scaling == HKC_ROPE_SCALING_NONE) return 0;
  if (parse_positive(v[NK_FACTOR], "factor", nm, &nd->rope_factor) != 0) return -1;
  if (!llama3) return 0;
  if (parse_positive(v[NK_LOW_FREQ], "low_freq_factor", nm, &nd->rope_low_freq) != 0 ||
      hkc_spec_parse_float(v[NK_HIGH_FREQ], "high_freq_factor", &nd->rope_high_freq) != 0)
    return -1;
  if (!(nd->rope_high_freq > nd->rope_low_freq)) {
    hkc_error(v[NK_HIGH_FREQ]->loc, "node '%s': 'high_freq_factor' (%g) must be greater than 'low_freq_factor' (%g)",
              nm, (double)nd->rope_high_freq, (double)nd->rope_low_freq);
    return -1;
  }
  return hkc_spec_parse_int(v[NK_ORIGINAL_MAX], "original_max", 1, HKC_SPEC_MAX_ROPE_POSITIONS, &nd->rope_original_max);
}

/* kv_append / kv_attention: heads, kv_heads, layer (default 0; the caches' layers are
 * checked with their shapes), and kv_attention's scale and window. */
static int parse_kv_attrs(spec_ctx_t *c, const ynode_t *const *v, const char *nm, hkc_node_t *nd) {
  int64_t layer = 0, window = 0;
  if (parse_heads(c, v, nm, nd) != 0) return -1;
  if (v[NK_LAYER] && hkc_spec_parse_int(v[NK_LAYER], "layer", 0, INT32_MAX, &layer) != 0) return -1;
  if (v[NK_WINDOW] && hkc_spec_parse_int(v[NK_WINDOW], "window", 1, INT32_MAX, &window) != 0) return -1;
  nd->layer = (int)layer;
  nd->window = (int)window;
  if (v[NK_SCALE]) {
    if (hkc_spec_parse_float(v[NK_SCALE], "scale", &nd->scale) != 0) return -1;
    nd->has_scale = 1;
  }
  return 0;
}

/* Parses one node map: keys, attributes and tensor names (unresolved). */
int hkc_spec_parse_node(spec_ctx_t *c, const ynode_t *map, pnode_t *pn) {
  memset(pn, 0, sizeof *pn);
  pn->map = map;
  hkc_node_t *nd = &pn->node;
  nd->bias = nd->residual = nd->mul = nd->gamma = nd->beta = nd->add_in = nd->sum_out = nd->out = HKC_NONE;
  nd->lengths = nd->mask = nd->pos = nd->ctx = nd->slot = nd->k_cache = nd->v_cache = HKC_NONE;
  for (int i = 0; i < HKC_MAX_NODE_IN; i++) nd->in[i] = HKC_NONE;
  nd->n_fused = 1;
  nd->theta = 10000.0f;
  nd->loc = map->loc;
  if (hkc_spec_expect_kind(map, Y_MAP, "a node map {name, op, in, out, ...}", "graph") != 0) return -1;

  const ynode_t *opv = NULL, *namev = NULL;
  for (size_t p = 0; p + 1 < map->n; p += 2) {
    const ynode_t *k = map->kids[p];
    if (k->kind != Y_SCALAR) continue;
    if (!opv && !strcmp(k->text, "op")) opv = map->kids[p + 1];
    if (!namev && !strcmp(k->text, "name") && map->kids[p + 1]->kind == Y_SCALAR) namev = map->kids[p + 1];
  }
  if (!opv) {
    if (namev)
      hkc_error(map->loc, "node '%.64s': missing required key 'op'", namev->text);
    else
      hkc_error(map->loc, "node: missing required key 'op'");
    return -1;
  }
  if (hkc_spec_expect_kind(opv, Y_SCALAR, "an op name", "op") != 0) return -1;
  int op = -1;
  for (int o = 0; o < HK_OP_COUNT_; o++)
    if (op_info[o].keys && !strcmp(opv->text, hkc_op_name((hk_op_t)o))) op = o; /* ewchain: fusion only */
  if (op < 0) {
    hkc_error(opv->loc,
              "unknown op '%.64s' (ops: gemm, add, mul, relu, gelu, silu, gelu_tanh, tanh, layernorm, rmsnorm, softmax, "
              "attention, rope, embedding, kv_append, kv_attention, take_rows, argmax, sample)",
              opv->text);
    return -1;
  }
  nd->op = (hk_op_t)op;
  const struct op_info *info = &op_info[op];
  const ynode_t *keys[NK_COUNT], *v[NK_COUNT];
  char context[64];
  snprintf(context, sizeof context, " for op '%s'", hkc_op_name(nd->op));
  if (hkc_spec_map_collect(map, node_keys, NK_COUNT, info->keys, context, keys, v) != 0) return -1;
  const char *tmp;
  if (v[NK_NAME] && hkc_spec_parse_name(v[NK_NAME], "node", &tmp) != 0) return -1;
  for (int k = 0; k < NK_COUNT; k++) {
    if ((info->required >> k & 1u) && !v[k]) {
      if (v[NK_NAME])
        hkc_error(map->loc, "node '%s': missing required key '%s'", v[NK_NAME]->text, node_keys[k]);
      else
        hkc_error(map->loc, "node: missing required key '%s'", node_keys[k]);
      return -1;
    }
  }
  pn->name = v[NK_NAME];
  const char *nm = pn->name->text;

  if (hkc_spec_expect_kind(v[NK_IN], Y_SEQ, "a list of tensor names", "in") != 0) return -1;
  const ynode_t *in = v[NK_IN];
  if ((int)in->n < info->min_in || (int)in->n > info->max_in) {
    if (info->min_in == info->max_in)
      hkc_error(in->loc, "node '%s': op '%s' takes %d input%s in 'in', got %zu", nm, hkc_op_name(nd->op),
                info->min_in, info->min_in == 1 ? "" : "s", in->n);
    else
      hkc_error(in->loc, "node '%s': op 'attention' takes 1 (packed qkv) or 3 (q, k, v) inputs in 'in', got %zu", nm,
                in->n);
    return -1;
  }
  if (nd->op == HK_OP_ATTENTION && in->n == 2) {
    hkc_error(in->loc, "node '%s': op 'attention' takes 1 (packed qkv) or 3 (q, k, v) inputs in 'in', got 2", nm);
    return -1;
  }
  nd->n_in = (int)in->n;
  for (size_t i = 0; i < in->n; i++) {
    if (hkc_spec_parse_name(in->kids[i], "tensor", &tmp) != 0) return -1;
    pn->ref[REF_IN0 + i] = in->kids[i];
  }
  if (hkc_spec_parse_name(v[NK_OUT], "tensor", &tmp) != 0) return -1;
  pn->out = v[NK_OUT];
  static const int ref_keys[][2] = {
      {NK_BIAS, REF_BIAS}, {NK_RESIDUAL, REF_RESIDUAL}, {NK_MUL, REF_MUL},     {NK_GAMMA, REF_GAMMA},
      {NK_BETA, REF_BETA}, {NK_LENGTHS, REF_LENGTHS},   {NK_MASK, REF_MASK}, {NK_POS, REF_POS},
      {NK_CTX, REF_CTX},   {NK_SLOT, REF_SLOT},         {NK_K_CACHE, REF_K_CACHE}, {NK_V_CACHE, REF_V_CACHE}};
  for (size_t i = 0; i < sizeof ref_keys / sizeof ref_keys[0]; i++) {
    const ynode_t *r = v[ref_keys[i][0]];
    if (!r) continue;
    if (hkc_spec_parse_name(r, "tensor", &tmp) != 0) return -1;
    pn->ref[ref_keys[i][1]] = r;
  }

  nd->act = HK_ACT_NONE;
  if (v[NK_ACT]) {
    if (hkc_spec_expect_kind(v[NK_ACT], Y_SCALAR, "an activation", "act") != 0) return -1;
    int act = -1;
    for (int a = 0; a < HK_ACT_COUNT_; a++)
      if (!strcmp(v[NK_ACT]->text, hkc_act_name((hk_act_t)a))) act = a;
    if (act < 0) {
      hkc_error(v[NK_ACT]->loc, "unknown act '%.64s' (expected none, relu, gelu, silu or gelu_tanh)", v[NK_ACT]->text);
      return -1;
    }
    nd->act = (hk_act_t)act;
  }
  if (v[NK_TRANS_B] && hkc_spec_parse_bool(v[NK_TRANS_B], "trans_b", &nd->trans_b) != 0) return -1;
  if (v[NK_SHARD]) { /* tensor parallelism (shard.c): column | row | none */
    if (hkc_spec_expect_kind(v[NK_SHARD], Y_SCALAR, "column, row or none", "shard") != 0) return -1;
    const char *t = v[NK_SHARD]->text;
    nd->shard = !strcmp(t, "column") ? HKC_SHARD_COLUMN : !strcmp(t, "row") ? HKC_SHARD_ROW
                : !strcmp(t, "none") ? HKC_SHARD_NONE : -1;
    if (nd->shard < 0) {
      hkc_error(v[NK_SHARD]->loc, "node '%s': unknown shard '%.64s' (expected column, row or none)", nm, t);
      return -1;
    }
  }
  if (nd->op == HK_OP_LAYERNORM || nd->op == HK_OP_RMSNORM) {
    nd->eps = HKC_SPEC_DEFAULT_EPS;
    if (v[NK_EPS]) {
      if (hkc_spec_parse_float(v[NK_EPS], "eps", &nd->eps) != 0) return -1;
      if (nd->eps < 0) {
        hkc_error(v[NK_EPS]->loc, "'eps' must not be negative, got %g", (double)nd->eps);
        return -1;
      }
    }
  }
  if (nd->op == HK_OP_KV_APPEND || nd->op == HK_OP_KV_ATTENTION) return parse_kv_attrs(c, v, nm, nd);
  if (nd->op == HK_OP_EMBEDDING && v[NK_CTX] && !v[NK_POS]) {
    hkc_error(v[NK_CTX]->loc, "node '%s': 'ctx' is valid only with 'pos' (it picks each token's position row)", nm);
    return -1;
  }
  if (nd->op == HK_OP_ATTENTION) {
    if (parse_heads(c, v, nm, nd) != 0) return -1;
    if (v[NK_CAUSAL] && hkc_spec_parse_bool(v[NK_CAUSAL], "causal", &nd->causal) != 0) return -1;
    if (v[NK_SCALE]) {
      if (hkc_spec_parse_float(v[NK_SCALE], "scale", &nd->scale) != 0) return -1;
      nd->has_scale = 1;
    }
  }
  if (nd->op == HK_OP_ROPE) {
    if (v[NK_PACKED] && hkc_spec_parse_bool(v[NK_PACKED], "packed", &nd->packed) != 0) return -1;
    if (v[NK_KV_HEADS] && !nd->packed) {
      hkc_error(v[NK_KV_HEADS]->loc,
                "node '%s': 'kv_heads' is valid only with 'packed: true' (a packed q|k|v input; a rope of "
                "separate k heads takes heads: kv_heads)", nm);
      return -1;
    }
    if (parse_heads(c, v, nm, nd) != 0) return -1;
    if (!nd->packed) nd->kv_heads = 0;
    if (v[NK_THETA]) {
      if (hkc_spec_parse_float(v[NK_THETA], "theta", &nd->theta) != 0) return -1;
      if (!(nd->theta > 0)) {
        hkc_error(v[NK_THETA]->loc, "node '%s': 'theta' must be positive, got %g", nm, (double)nd->theta);
        return -1;
      }
    }
    if (v[NK_OFFSET] && v[NK_CTX]) {
      hkc_error(v[NK_OFFSET]->loc, "node '%s': 'offset' is not valid with 'ctx' (row t is at position ctx[t] - 1)", nm);
      return -1;
    }
    if (v[NK_OFFSET] &&
        hkc_spec_parse_int(v[NK_OFFSET], "offset", 0, HKC_SPEC_MAX_ROPE_POSITIONS - 1, &nd->pos_offset) != 0)
      return -1;
    if (parse_rope_scaling(v, nm, nd) != 0) return -1;
  }
  return 0;
}

/* Resolves a tensor name to a declared tensor (>= 0) or a node output (-(k+2)). */
int hkc_spec_resolve_ref(spec_ctx_t *c, const char *name, int *out) {
  const int t = hkc_names_get(&c->tensor_names, name); /* only the declarations so far */
  if (t >= 0 && (size_t)t < c->n_decl) return *out = t, 0;
  const int k = hkc_names_get(&c->out_names, name);
  if (k >= 0) return *out = -k - 2, 0;
  return -1;
}

/* Depth-first topological sort, iterative (long chains must not recurse). Visiting
 * nodes in written order and emitting each after its producers keeps an already
 * sorted graph unchanged. A back edge is a cycle: reported with its path. */
int hkc_spec_topo_sort(spec_ctx_t *c, size_t *order) {
  size_t n = c->n_pn, n_order = 0;
  unsigned char *state = calloc(n ? n : 1, 1); /* 0 new, 1 on the stack, 2 done */
  size_t *stack = malloc((n ? n : 1) * sizeof *stack), *next = malloc((n ? n : 1) * sizeof *next);
  int rc = -1;
  if (!state || !stack || !next) {
    hkc_error((hkc_loc_t){c->file, 0, 0}, "out of memory");
    goto done;
  }
  for (size_t root = 0; root < n; root++) {
    if (state[root]) continue;
    size_t sp = 0;
    stack[sp] = root, next[sp] = 0, sp++;
    state[root] = 1;
    while (sp) {
      size_t v = stack[sp - 1];
      if (next[sp - 1] < REF_COUNT) {
        int r = c->pn[v].ref_val[next[sp - 1]++];
        if (!c->pn[v].ref[next[sp - 1] - 1] || r >= 0) continue;
        size_t d = (size_t)(-r - 2);
        if (state[d] == 0) {
          state[d] = 1;
          stack[sp] = d, next[sp] = 0, sp++;
        } else if (state[d] == 1) {
          char path[512];
          size_t len = 0, from = 0;
          while (stack[from] != d) from++;
          /* stack[from..sp) is the chain d <- ... <- v: each reads the next one's output */
          for (size_t i = from; i < sp && len < sizeof path; i++)
            len += (size_t)snprintf(path + len, sizeof path - len, "%s -> ", c->pn[stack[i]].name->text);
          if (len < sizeof path) snprintf(path + len, sizeof path - len, "%s", c->pn[d].name->text);
          hkc_error(c->pn[d].map->loc, "graph has a cycle through node '%s' (%s; each reads the next one's output)",
                    c->pn[d].name->text, path);
          goto done;
        }
      } else {
        state[v] = 2;
        order[n_order++] = v;
        sp--;
      }
    }
  }
  assert(n_order == n);
  rc = 0;
done:
  free(state);
  free(stack);
  free(next);
  return rc;
}
