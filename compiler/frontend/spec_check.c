/* SPDX-License-Identifier: Apache-2.0 */
/* spec_check.c -- the spec's checks (spec_internal.h): each node's inputs checked and its
 * output's shape and dtype inferred, in topological order; state shapes; the whole spec's
 * tensors after the graph (sizes, layouts the batch policy can pad, unused tensors). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "frontend/spec_internal.h"
#include "util/util.h"

/* ---- shapes ---------------------------------------------------------------------------- */
static size_t dim_print(hkc_dim_t d, char *out, size_t size) {
  int n;
  if (d.mul == 0) n = snprintf(out, size, "%lld", (long long)d.add);
  else if (d.mul == 1 && d.add == 0) n = snprintf(out, size, "batch");
  else if (d.add == 0) n = snprintf(out, size, "%lld*batch", (long long)d.mul);
  else n = snprintf(out, size, "%lld*batch%+lld", (long long)d.mul, (long long)d.add);
  return n < 0 ? 0 : (size_t)n >= size ? size - 1 : (size_t)n;
}

/* "[batch, 128, 768]" into a caller buffer (HKC_SHAPE_STR bytes). */
static const char *shape_str(const hkc_dim_t *dims, uint32_t rank, char *buf) {
  size_t len = 0;
  buf[len++] = '[';
  for (uint32_t i = 0; i < rank && len < HKC_SHAPE_STR - 40; i++) {
    if (i) buf[len++] = ',', buf[len++] = ' ';
    len += dim_print(dims[i], buf + len, HKC_SHAPE_STR - 2 - len);
  }
  buf[len++] = ']';
  buf[len] = '\0';
  return buf;
}

const char *hkc_tensor_shape_str(const hkc_tensor_t *t, char *buf) { return shape_str(t->dims, t->rank, buf); }
#define tensor_shape_str hkc_tensor_shape_str

static int shape_equal(const hkc_dim_t *a, uint32_t ra, const hkc_dim_t *b, uint32_t rb) {
  if (ra != rb) return 0;
  for (uint32_t i = 0; i < ra; i++)
    if (!hkc_dim_equal(a[i], b[i])) return 0;
  return 1;
}

const char *const hkc_spec_ref_names[REF_COUNT] = {"in",    "in",   "in",      "bias", "residual", "mul",
                                                   "gamma", "beta", "lengths", "mask", "pos",      "ctx",
                                                   "slot",  "k_cache", "v_cache"};

/* A state tensor persists across runs of every batch size: its shape must not depend on batch. */
int hkc_spec_check_state_shape(const hkc_tensor_t *t) {
  char sh[HKC_SHAPE_STR];
  for (uint32_t d = 0; d < t->rank; d++)
    if (t->dims[d].mul != 0) {
      hkc_error(t->loc,
                "tensor '%s' %s: a state tensor must not depend on batch (dimension %u does): it persists across runs "
                "of every batch size (docs/GENERATE.md)",
                t->name, tensor_shape_str(t, sh), d);
      return -1;
    }
  return 0;
}

/* ---- shape inference ---------------------------------------------------------------------------- */
/* NumPy-style broadcast restricted to suffixes: after dropping leading 1s, one shape
 * must be a suffix of the other; the result has the longer operand's dims and the
 * larger rank. 0 / -1 (not broadcastable). */
static int broadcast(const hkc_tensor_t *a, const hkc_tensor_t *b, hkc_tensor_t *out) {
  for (int pass = 0; pass < 2; pass++) {
    const hkc_tensor_t *s = pass ? a : b, *l = pass ? b : a; /* try s as the short one */
    uint32_t skip = 0;
    while (skip < s->rank && s->dims[skip].mul == 0 && s->dims[skip].add == 1) skip++;
    uint32_t sr = s->rank - skip;
    if (sr > l->rank || !shape_equal(s->dims + skip, sr, l->dims + l->rank - sr, sr)) continue;
    uint32_t rank = a->rank > b->rank ? a->rank : b->rank, pad = rank - l->rank;
    for (uint32_t i = 0; i < pad; i++) out->dims[i] = (hkc_dim_t){0, 1};
    memcpy(out->dims + pad, l->dims, l->rank * sizeof l->dims[0]);
    out->rank = rank;
    return 0;
  }
  return -1;
}

static int infer_gemm(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *T = c->spec->tensors, *A = &T[nd->in[0]], *B = &T[nd->in[1]];
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (B->rank != 2) {
    hkc_error(pn->ref[REF_IN1]->loc, "node '%s': gemm B '%s' must be 2-D %s, got %s", nm, B->name,
              nd->trans_b ? "[N, K]" : "[K, N]", tensor_shape_str(B, s1));
    return -1;
  }
  hkc_dim_t k = A->dims[A->rank - 1], kb = B->dims[nd->trans_b ? 1 : 0], n = B->dims[nd->trans_b ? 0 : 1];
  if (!hkc_dim_equal(k, kb)) {
    hkc_error(pn->ref[REF_IN1]->loc,
              "node '%s': shape mismatch: gemm A '%s' %s and B '%s' %s%s disagree on K (the last dim of A must equal "
              "B's %s dim)",
              nm, A->name, tensor_shape_str(A, s1), B->name, tensor_shape_str(B, s2),
              nd->trans_b ? " (trans_b)" : "", nd->trans_b ? "second" : "first");
    return -1;
  }
  out->rank = A->rank;
  memcpy(out->dims, A->dims, A->rank * sizeof A->dims[0]);
  out->dims[A->rank - 1] = n;
  if (nd->bias != HKC_NONE) {
    const hkc_tensor_t *bias = &T[nd->bias];
    if (!shape_equal(bias->dims, bias->rank, &n, 1)) {
      hkc_error(pn->ref[REF_BIAS]->loc, "node '%s': shape mismatch: bias '%s' is %s, expected %s ([N])", nm, bias->name,
                tensor_shape_str(bias, s1), shape_str(&n, 1, s2));
      return -1;
    }
  }
  static const int like_out[][2] = {{REF_RESIDUAL, 0}, {REF_MUL, 1}};
  for (int i = 0; i < 2; i++) {
    int t = like_out[i][1] ? nd->mul : nd->residual;
    if (t == HKC_NONE) continue;
    const hkc_tensor_t *r = &T[t];
    if (!shape_equal(r->dims, r->rank, out->dims, out->rank)) {
      hkc_error(pn->ref[like_out[i][0]]->loc, "node '%s': shape mismatch: %s '%s' is %s, the output is %s", nm,
                hkc_spec_ref_names[like_out[i][0]], r->name, tensor_shape_str(r, s1), tensor_shape_str(out, s2));
      return -1;
    }
  }
  return 0;
}

static int infer_norm(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *T = c->spec->tensors, *x = &T[nd->in[0]];
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR], s3[HKC_SHAPE_STR];
  const hkc_dim_t *last = &x->dims[x->rank - 1];
  int which[2] = {REF_GAMMA, REF_BETA};
  int idx[2] = {nd->gamma, nd->beta};
  for (int i = 0; i < 2; i++) {
    if (idx[i] == HKC_NONE) continue;
    const hkc_tensor_t *g = &T[idx[i]];
    if (!shape_equal(g->dims, g->rank, last, 1)) {
      hkc_error(pn->ref[which[i]]->loc, "node '%s': shape mismatch: %s '%s' is %s, expected %s (the last dim of '%s' %s)",
                nd->name, hkc_spec_ref_names[which[i]], g->name, tensor_shape_str(g, s1), shape_str(last, 1, s2), x->name,
                tensor_shape_str(x, s3));
      return -1;
    }
  }
  *out = (hkc_tensor_t){.rank = x->rank};
  memcpy(out->dims, x->dims, sizeof x->dims);
  return 0;
}

static int infer_attention(spec_ctx_t *c, const pnode_t *pn, hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *T = c->spec->tensors;
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  for (int i = 0; i < nd->n_in; i++) {
    const hkc_tensor_t *t = &T[nd->in[i]];
    if (t->rank != 3) {
      hkc_error(pn->ref[REF_IN0 + i]->loc, "node '%s': attention input '%s' must be 3-D [batch, seq, features], got %s",
                nm, t->name, tensor_shape_str(t, s1));
      return -1;
    }
    if (t->dims[2].mul != 0) {
      hkc_error(pn->ref[REF_IN0 + i]->loc, "node '%s': the last dim of attention input '%s' %s must not depend on batch",
                nm, t->name, tensor_shape_str(t, s1));
      return -1;
    }
  }
  const hkc_tensor_t *q = &T[nd->in[0]];
  int64_t h = nd->heads, hkv = nd->kv_heads, dh;
  if (nd->n_in == 1) {
    int64_t parts = h + 2 * hkv;
    if (q->dims[2].add % parts != 0) {
      hkc_error(pn->ref[REF_IN0]->loc,
                "node '%s': packed qkv '%s' %s: last dim %lld is not divisible by heads + 2*kv_heads = %lld", nm,
                q->name, tensor_shape_str(q, s1), (long long)q->dims[2].add, (long long)parts);
      return -1;
    }
    dh = q->dims[2].add / parts;
  } else {
    if (q->dims[2].add % h != 0) {
      hkc_error(pn->ref[REF_IN0]->loc, "node '%s': q '%s' %s: last dim %lld is not divisible by heads = %lld", nm,
                q->name, tensor_shape_str(q, s1), (long long)q->dims[2].add, (long long)h);
      return -1;
    }
    dh = q->dims[2].add / h;
    const hkc_tensor_t *k = &T[nd->in[1]], *v = &T[nd->in[2]];
    hkc_dim_t want = {0, hkv * dh};
    for (int i = 1; i < 3; i++) {
      const hkc_tensor_t *t = i == 1 ? k : v;
      const char *role = i == 1 ? "k" : "v";
      const ynode_t *where = pn->ref[REF_IN0 + i];
      if (!hkc_dim_equal(t->dims[0], q->dims[0])) {
        hkc_error(where->loc, "node '%s': shape mismatch: batch dims differ: q '%s' %s, %s '%s' %s", nm, q->name,
                  tensor_shape_str(q, s1), role, t->name, tensor_shape_str(t, s2));
        return -1;
      }
      if (!hkc_dim_equal(t->dims[2], want)) {
        hkc_error(where->loc,
                  "node '%s': shape mismatch: %s '%s' is %s, its last dim must be kv_heads*head_dim = %lld*%lld "
                  "(q '%s' is %s)",
                  nm, role, t->name, tensor_shape_str(t, s1), (long long)hkv, (long long)dh, q->name,
                  tensor_shape_str(q, s2));
        return -1;
      }
    }
    if (!hkc_dim_equal(k->dims[1], v->dims[1])) {
      hkc_error(pn->ref[REF_IN2]->loc, "node '%s': shape mismatch: k '%s' %s and v '%s' %s have different lengths", nm,
                k->name, tensor_shape_str(k, s1), v->name, tensor_shape_str(v, s2));
      return -1;
    }
  }
  char s3[HKC_SHAPE_STR];
  if (nd->lengths != HKC_NONE) {
    const hkc_tensor_t *len = &T[nd->lengths];
    if (len->rank != 1 || !hkc_dim_equal(len->dims[0], q->dims[0])) {
      char d0[64];
      dim_print(q->dims[0], d0, sizeof d0);
      hkc_error(pn->ref[REF_LENGTHS]->loc,
                "node '%s': lengths '%s' is %s, expected [%s] (one key length per batch entry of q '%s' %s)", nm,
                len->name, tensor_shape_str(len, s1), d0, q->name, tensor_shape_str(q, s2));
      return -1;
    }
  }
  if (nd->mask != HKC_NONE) {
    const hkc_tensor_t *mk = &T[nd->mask], *k = nd->n_in == 1 ? q : &T[nd->in[1]];
    int ok = mk->rank == 4 && hkc_dim_equal(mk->dims[0], q->dims[0]) && mk->dims[1].mul == 0 &&
             (mk->dims[1].add == 1 || mk->dims[1].add == h) && hkc_dim_equal(mk->dims[2], q->dims[1]) &&
             hkc_dim_equal(mk->dims[3], k->dims[1]);
    if (!ok) {
      hkc_error(pn->ref[REF_MASK]->loc,
                "node '%s': mask '%s' is %s, expected [batch, 1 or heads (%lld), seq_q, seq_kv] as q '%s' %s and k %s",
                nm, mk->name, tensor_shape_str(mk, s1), (long long)h, q->name, tensor_shape_str(q, s2),
                tensor_shape_str(k, s3));
      return -1;
    }
  }
  out->rank = 3;
  out->dims[0] = q->dims[0];
  out->dims[1] = q->dims[1];
  out->dims[2] = (hkc_dim_t){0, h * dh};
  if (!nd->has_scale) nd->scale = (float)(1.0 / sqrt((double)dh));
  return 0;
}

/* An i32 index tensor (ctx, slot: checked by check_refs) of reference r must have the shape
 * want (rank want_rank): one entry per row of `of`. */
static int check_index_shape(const pnode_t *pn, const hkc_node_t *nd, int r, const hkc_tensor_t *t,
                             const hkc_dim_t *want, uint32_t want_rank, const hkc_tensor_t *of) {
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR], s3[HKC_SHAPE_STR];
  if (shape_equal(t->dims, t->rank, want, want_rank)) return 0;
  hkc_error(pn->ref[r]->loc, "node '%s': %s '%s' is %s, expected %s (one per row of '%s' %s)", nd->name,
            hkc_spec_ref_names[r], t->name, tensor_shape_str(t, s1), shape_str(want, want_rank, s2), of->name,
            tensor_shape_str(of, s3));
  return -1;
}

/* embedding: ids [..., seq] (i32, checked by check_refs), table [vocab, hidden] and the
 * optional position table pos [max_pos, hidden], neither depending on batch; output ids'
 * shape + [hidden]. Without ctx, row s of pos is added at sequence position s, so max_pos >=
 * seq; with ctx (shaped like ids) the row is clamp(ctx - 1, 0, max_pos - 1), any max_pos. */
static int infer_embedding(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *T = c->spec->tensors, *ids = &T[nd->in[0]], *table = &T[nd->in[1]];
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (ids->rank >= HK_MAX_RANK) {
    hkc_error(pn->ref[REF_IN0]->loc, "node '%s': ids '%s' %s: at most %u dims (the output adds one)", nm, ids->name,
              tensor_shape_str(ids, s1), HK_MAX_RANK - 1);
    return -1;
  }
  if (table->rank != 2 || table->dims[0].mul != 0 || table->dims[1].mul != 0) {
    hkc_error(pn->ref[REF_IN1]->loc, "node '%s': embedding table '%s' is %s, expected 2-D [vocab, hidden] not depending on batch",
              nm, table->name, tensor_shape_str(table, s1));
    return -1;
  }
  if (nd->ctx != HKC_NONE && check_index_shape(pn, nd, REF_CTX, &T[nd->ctx], ids->dims, ids->rank, ids) != 0)
    return -1;
  if (nd->pos != HKC_NONE && nd->ctx != HKC_NONE) {
    const hkc_tensor_t *pos = &T[nd->pos];
    if (pos->rank != 2 || pos->dims[0].mul != 0 || !hkc_dim_equal(pos->dims[1], table->dims[1])) {
      hkc_error(pn->ref[REF_POS]->loc,
                "node '%s': position table '%s' is %s, expected [max_pos, %lld] not depending on batch", nm,
                pos->name, tensor_shape_str(pos, s1), (long long)table->dims[1].add);
      return -1;
    }
  } else if (nd->pos != HKC_NONE) {
    const hkc_tensor_t *pos = &T[nd->pos];
    const hkc_dim_t seq = ids->dims[ids->rank - 1];
    if (pos->rank != 2 || pos->dims[0].mul != 0 || !hkc_dim_equal(pos->dims[1], table->dims[1]) || seq.mul != 0 ||
        pos->dims[0].add < seq.add) {
      hkc_error(pn->ref[REF_POS]->loc,
                "node '%s': position table '%s' is %s, expected [max_pos, %lld] with max_pos >= the sequence length "
                "(the last dim of ids '%s' %s, which must not depend on batch)",
                nm, pos->name, tensor_shape_str(pos, s1), (long long)table->dims[1].add, ids->name,
                tensor_shape_str(ids, s2));
      return -1;
    }
  }
  out->rank = ids->rank + 1;
  memcpy(out->dims, ids->dims, sizeof(hkc_dim_t) * ids->rank);
  out->dims[ids->rank] = table->dims[1];
  return 0;
}

/* rope: x [..., seq, heads*head_dim] with an even head_dim; output shaped like x. The
 * sequence and feature dims must not depend on batch: positions restart every seq rows.
 * With ctx (an i32 tensor shaped like x without its last dim: a position per row) there is
 * no sequence dim, only the feature dim must not depend on batch. */
static int infer_rope(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *x = &c->spec->tensors[nd->in[0]];
  const int has_ctx = nd->ctx != HKC_NONE;
  const hkc_loc_t at = pn->ref[REF_IN0]->loc;
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR];
  if (x->rank < 2) {
    hkc_error(at, "node '%s': rope input '%s' must have rank >= 2 ([..., seq, heads*head_dim]), got %s", nm, x->name,
              tensor_shape_str(x, s1));
    return -1;
  }
  hkc_dim_t seq = x->dims[x->rank - 2], width = x->dims[x->rank - 1];
  if (has_ctx && width.mul != 0) {
    hkc_error(at, "node '%s': rope input '%s' %s: its last dim (heads*head_dim) must not depend on batch", nm, x->name,
              tensor_shape_str(x, s1));
    return -1;
  }
  if (!has_ctx && (width.mul != 0 || seq.mul != 0)) {
    hkc_error(at,
              "node '%s': rope input '%s' %s: its last two dims (seq, heads*head_dim) must not depend on batch "
              "(positions restart every seq rows; write [batch, seq, heads*head_dim])",
              nm, x->name, tensor_shape_str(x, s1));
    return -1;
  }
  /* packed: q | k | v along the last axis, heads + 2*kv_heads heads of head_dim */
  const int64_t all = nd->packed ? (int64_t)nd->heads + 2 * (int64_t)nd->kv_heads : nd->heads;
  if (width.add % all != 0) {
    if (nd->packed)
      hkc_error(at,
                "node '%s': packed rope input '%s' %s: last dim %lld is not divisible by heads + 2*kv_heads = %lld "
                "(q | k | v along the last axis)",
                nm, x->name, tensor_shape_str(x, s1), (long long)width.add, (long long)all);
    else
      hkc_error(at, "node '%s': rope input '%s' %s: last dim %lld is not divisible by heads = %d", nm, x->name,
                tensor_shape_str(x, s1), (long long)width.add, nd->heads);
    return -1;
  }
  int64_t dh = width.add / all;
  if (dh % 2 != 0) {
    hkc_error(at,
              "node '%s': %srope input '%s' %s: head_dim = %lld/%lld = %lld must be even (rotate-half pairs element j "
              "with j + head_dim/2)",
              nm, nd->packed ? "packed " : "", x->name, tensor_shape_str(x, s1), (long long)width.add,
              (long long)all, (long long)dh);
    return -1;
  }
  if (has_ctx) {
    if (check_index_shape(pn, nd, REF_CTX, &c->spec->tensors[nd->ctx], x->dims, x->rank - 1, x) != 0) return -1;
  } else if (nd->pos_offset > HKC_SPEC_MAX_ROPE_POSITIONS - seq.add) {
    const ynode_t *off = hkc_spec_map_value(pn->map, "offset");
    hkc_error(off ? off->loc : at,
              "node '%s': rope positions reach offset + seq = %lld + %lld, above 2^24 (f32 positions)", nm,
              (long long)nd->pos_offset, (long long)seq.add);
    return -1;
  }
  *out = (hkc_tensor_t){.rank = x->rank};
  memcpy(out->dims, x->dims, sizeof x->dims);
  return 0;
}

/* kv_append / kv_attention: x must be a 2-D row tensor [rows, width] (one token per row) whose
 * width does not depend on batch; layout describes that width in the message. */
static int check_token_rows(const pnode_t *pn, const hkc_node_t *nd, const hkc_tensor_t *x, const char *layout) {
  char s1[HKC_SHAPE_STR];
  if (x->rank == 2 && x->dims[1].mul == 0) return 0;
  hkc_error(pn->ref[REF_IN0]->loc,
            "node '%s': %s input '%s' is %s, expected 2-D [rows, %s] (one token per row; the last dim must not "
            "depend on batch)",
            nd->name, hkc_op_name(nd->op), x->name, tensor_shape_str(x, s1), layout);
  return -1;
}

/* The KV caches of kv_append / kv_attention (state tensors, checked by check_refs): k_cache
 * [layers, slots, max_seq, width] and v_cache of the same shape and dtype (the spec's, or both
 * fp8_e4m3), with layer < layers; ctx and slot one per row of x. */
static int check_caches(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, const hkc_tensor_t *x) {
  const hkc_tensor_t *T = c->spec->tensors, *k = &T[nd->k_cache], *v = &T[nd->v_cache];
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (k->rank != 4) {
    hkc_error(pn->ref[REF_K_CACHE]->loc,
              "node '%s': k_cache '%s' is %s, expected 4-D [layers, slots, max_seq, kv_heads*head_dim]", nm, k->name,
              tensor_shape_str(k, s1));
    return -1;
  }
  if (!shape_equal(k->dims, k->rank, v->dims, v->rank)) {
    hkc_error(pn->ref[REF_V_CACHE]->loc, "node '%s': v_cache '%s' %s and k_cache '%s' %s must have the same shape", nm,
              v->name, tensor_shape_str(v, s1), k->name, tensor_shape_str(k, s2));
    return -1;
  }
  if (k->dtype != v->dtype) { /* the spec's dtype, or both FP8 */
    hkc_error(pn->ref[REF_V_CACHE]->loc, "node '%s': v_cache '%s' is %s and k_cache '%s' %s: the caches share a dtype", nm,
              v->name, hkc_dtype_name(v->dtype), k->name, hkc_dtype_name(k->dtype));
    return -1;
  }
  if (nd->layer >= k->dims[0].add) {
    const ynode_t *at = hkc_spec_map_value(pn->map, "layer");
    hkc_error(at ? at->loc : nd->loc, "node '%s': layer %d is out of range: k_cache '%s' %s holds %lld layers", nm,
              nd->layer, k->name, tensor_shape_str(k, s1), (long long)k->dims[0].add);
    return -1;
  }
  if (check_index_shape(pn, nd, REF_CTX, &T[nd->ctx], x->dims, 1, x) != 0) return -1;
  return check_index_shape(pn, nd, REF_SLOT, &T[nd->slot], x->dims, 1, x);
}

/* kv_append: qkv [rows, (heads + 2*kv_heads)*dh] with dh even and caches of width
 * kv_heads*dh; output the q heads [rows, heads*dh]. */
static int infer_kv_append(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *x = &c->spec->tensors[nd->in[0]], *k = &c->spec->tensors[nd->k_cache];
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (check_token_rows(pn, nd, x, "(heads + 2*kv_heads)*head_dim") != 0) return -1;
  const int64_t all = (int64_t)nd->heads + 2 * (int64_t)nd->kv_heads, width = x->dims[1].add;
  if (width % all != 0 || width / all % 2 != 0) {
    hkc_error(pn->ref[REF_IN0]->loc,
              "node '%s': kv_append input '%s' %s: last dim %lld must be (heads + 2*kv_heads) = %lld heads of an even "
              "head_dim (q | k | v along the last axis, as rope pairs them)",
              nm, x->name, tensor_shape_str(x, s1), (long long)width, (long long)all);
    return -1;
  }
  const int64_t dh = width / all;
  if (check_caches(c, pn, nd, x) != 0) return -1;
  if (!hkc_dim_equal(k->dims[3], (hkc_dim_t){0, nd->kv_heads * dh})) {
    hkc_error(pn->ref[REF_K_CACHE]->loc,
              "node '%s': k_cache '%s' is %s, its last dim must be kv_heads*head_dim = %d*%lld (qkv '%s' is %s)", nm,
              k->name, tensor_shape_str(k, s1), nd->kv_heads, (long long)dh, x->name, tensor_shape_str(x, s2));
    return -1;
  }
  out->rank = 2;
  out->dims[0] = x->dims[0];
  out->dims[1] = (hkc_dim_t){0, nd->heads * dh};
  return 0;
}

/* kv_attention: q [rows, heads*dh] with dh the caches' width / kv_heads; output shaped like q.
 * scale defaults to 1/sqrt(dh). */
static int infer_kv_attention(spec_ctx_t *c, const pnode_t *pn, hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *q = &c->spec->tensors[nd->in[0]], *k = &c->spec->tensors[nd->k_cache];
  const char *nm = nd->name;
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (check_token_rows(pn, nd, q, "heads*head_dim") != 0 || check_caches(c, pn, nd, q) != 0) return -1;
  const int64_t width = k->dims[3].add;
  if (width % nd->kv_heads != 0) {
    hkc_error(pn->ref[REF_K_CACHE]->loc, "node '%s': k_cache '%s' %s: last dim %lld is not divisible by kv_heads = %d",
              nm, k->name, tensor_shape_str(k, s1), (long long)width, nd->kv_heads);
    return -1;
  }
  const int64_t dh = width / nd->kv_heads;
  if (q->dims[1].add != nd->heads * dh) {
    hkc_error(pn->ref[REF_IN0]->loc,
              "node '%s': q '%s' is %s, its last dim must be heads*head_dim = %d*%lld (head_dim: the last dim of "
              "k_cache '%s' %s over kv_heads = %d)",
              nm, q->name, tensor_shape_str(q, s1), nd->heads, (long long)dh, k->name, tensor_shape_str(k, s2),
              nd->kv_heads);
    return -1;
  }
  *out = (hkc_tensor_t){.rank = 2};
  memcpy(out->dims, q->dims, sizeof q->dims);
  if (!nd->has_scale) nd->scale = (float)(1.0 / sqrt((double)dh));
  return 0;
}

/* take_rows: x [n, width], rows (i32) [r] -> [r, width]. */
static int infer_take_rows(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *x = &c->spec->tensors[nd->in[0]], *rows = &c->spec->tensors[nd->in[1]];
  char s1[HKC_SHAPE_STR];
  if (x->rank != 2) {
    hkc_error(pn->ref[REF_IN0]->loc, "node '%s': take_rows input '%s' is %s, expected 2-D [rows, width]", nd->name,
              x->name, tensor_shape_str(x, s1));
    return -1;
  }
  if (rows->rank != 1) {
    hkc_error(pn->ref[REF_IN1]->loc, "node '%s': row indices '%s' are %s, expected 1-D [n] (the rows to take)",
              nd->name, rows->name, tensor_shape_str(rows, s1));
    return -1;
  }
  out->rank = 2;
  out->dims[0] = rows->dims[0];
  out->dims[1] = x->dims[1];
  return 0;
}

/* argmax: x [..., n] -> i32 [...] (an index per row). */
static int infer_argmax(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *x = &c->spec->tensors[nd->in[0]];
  char s1[HKC_SHAPE_STR];
  if (x->rank < 2) {
    hkc_error(pn->ref[REF_IN0]->loc,
              "node '%s': argmax input '%s' is %s, expected rank >= 2 ([..., n]: an index per row)", nd->name,
              x->name, tensor_shape_str(x, s1));
    return -1;
  }
  out->rank = x->rank - 1;
  memcpy(out->dims, x->dims, sizeof(hkc_dim_t) * out->rank);
  return 0;
}

/* sample: x [R, n] logits, params (i32) [R, 4] -> i32 [R] (an index drawn per row). R may
 * depend on batch, n may not (and is an int32: the index); params' rows must be x's. */
static int infer_sample(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd, hkc_tensor_t *out) {
  const hkc_tensor_t *x = &c->spec->tensors[nd->in[0]], *p = &c->spec->tensors[nd->in[1]];
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (x->rank != 2 || x->dims[1].mul != 0 || x->dims[1].add > INT32_MAX) {
    hkc_error(pn->ref[REF_IN0]->loc,
              "node '%s': sample input '%s' is %s, expected 2-D [rows, n] (a row of n logits; n not depending on "
              "batch, at most 2^31 - 1)",
              nd->name, x->name, tensor_shape_str(x, s1));
    return -1;
  }
  if (p->rank != 2 || !hkc_dim_equal(p->dims[0], x->dims[0]) ||
      !hkc_dim_equal(p->dims[1], (hkc_dim_t){0, HK_SAMPLE_PARAMS})) {
    hkc_error(pn->ref[REF_IN1]->loc,
              "node '%s': sample params '%s' are %s, expected [rows, 4] with the rows of '%s' %s (per row: seed, "
              "top_k, temperature and top_p as f32 bits)",
              nd->name, p->name, tensor_shape_str(p, s1), x->name, tensor_shape_str(x, s2));
    return -1;
  }
  out->rank = 1;
  out->dims[0] = x->dims[0];
  return 0;
}

/* The tensor a node's reference r names after resolution (HKC_NONE when absent). */
static int ref_tensor(const hkc_node_t *nd, int r) {
  switch (r) {
  case REF_IN0:
  case REF_IN1:
  case REF_IN2: return r - REF_IN0 < nd->n_in ? nd->in[r - REF_IN0] : HKC_NONE;
  case REF_BIAS: return nd->bias;
  case REF_RESIDUAL: return nd->residual;
  case REF_MUL: return nd->mul;
  case REF_GAMMA: return nd->gamma;
  case REF_BETA: return nd->beta;
  case REF_LENGTHS: return nd->lengths;
  case REF_MASK: return nd->mask;
  case REF_POS: return nd->pos;
  case REF_CTX: return nd->ctx;
  case REF_SLOT: return nd->slot;
  case REF_K_CACHE: return nd->k_cache;
  case REF_V_CACHE: return nd->v_cache;
  default: return HKC_NONE;
  }
}

/* Whether reference r of an op takes an i32 tensor (and only then). */
static int i32_slot(hk_op_t op, int r) {
  return (op == HK_OP_ATTENTION && r == REF_LENGTHS) || (op == HK_OP_EMBEDDING && r == REF_IN0) || r == REF_CTX ||
         r == REF_SLOT || ((op == HK_OP_TAKE_ROWS || op == HK_OP_SAMPLE) && r == REF_IN1);
}

/* i32 tensors go where an op takes them and nowhere else; state tensors (the KV caches) are
 * read only as kv_append's and kv_attention's k_cache and v_cache, which take nothing else. */
static int check_refs(spec_ctx_t *c, const pnode_t *pn, const hkc_node_t *nd) {
  const hkc_tensor_t *T = c->spec->tensors;
  for (int r = 0; r < REF_COUNT; r++) {
    int t = pn->ref[r] ? ref_tensor(nd, r) : HKC_NONE;
    if (t == HKC_NONE) continue;
    const int cache = r == REF_K_CACHE || r == REF_V_CACHE, state = T[t].role == HK_ROLE_STATE;
    if (cache != state) {
      if (state)
        hkc_error(pn->ref[r]->loc,
                  "node '%s': '%s' is a state tensor, which op '%s' cannot take in '%s' (state tensors are KV caches: "
                  "only kv_append and kv_attention read them, as k_cache and v_cache)",
                  nd->name, T[t].name, hkc_op_name(nd->op), hkc_spec_ref_names[r]);
      else
        hkc_error(pn->ref[r]->loc, "node '%s': %s '%s' must be a state tensor (declare the KV caches under 'state:')",
                  nd->name, hkc_spec_ref_names[r], T[t].name);
      return -1;
    }
    if (hkc_dtype_quantized(T[t].dtype) && !state && !(nd->op == HK_OP_GEMM && r == REF_IN1)) {
      hkc_error(pn->ref[r]->loc,
                "node '%s': '%s' is a quantized (%s) param, which op '%s' cannot take in '%s' (a quantized param is a "
                "gemm's B)",
                nd->name, T[t].name, hkc_dtype_name(T[t].dtype), hkc_op_name(nd->op), hkc_spec_ref_names[r]);
      return -1;
    }
    if (T[t].dtype == HK_DTYPE_F32 && c->spec->dtype != HK_DTYPE_F32) {
      hkc_error(pn->ref[r]->loc,
                "node '%s': '%s' is an f32 param, the scales of a quantized param, which no node reads (its param's "
                "gemm applies them)",
                nd->name, T[t].name);
      return -1;
    }
    int want = i32_slot(nd->op, r), is = T[t].dtype == HK_DTYPE_I32;
    if (want == is) continue;
    if (is)
      hkc_error(pn->ref[r]->loc,
                "node '%s': '%s' is an i32 tensor, which op '%s' cannot take in '%s' (i32 tensors go to attention's "
                "'lengths', embedding's ids, 'ctx', 'slot', take_rows' row indices and sample's params)",
                nd->name, T[t].name, hkc_op_name(nd->op), hkc_spec_ref_names[r]);
    else
      hkc_error(pn->ref[r]->loc, "node '%s': '%s' must be an i32 tensor (declare it {shape: [...], dtype: i32}), got %s",
                nd->name, T[t].name, hkc_dtype_name(T[t].dtype));
    return -1;
  }
  return 0;
}

/* Infers the output shape (and dtype) of one node whose inputs all have shapes. */
int hkc_spec_infer_node(spec_ctx_t *c, const pnode_t *pn, hkc_node_t *nd) {
  hkc_tensor_t *T = c->spec->tensors, shape = {0};
  char s1[HKC_SHAPE_STR], s2[HKC_SHAPE_STR];
  if (check_refs(c, pn, nd) != 0) return -1;
  switch (nd->op) {
  case HK_OP_GEMM:
    if (infer_gemm(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_ADD:
  case HK_OP_MUL:
    if (broadcast(&T[nd->in[0]], &T[nd->in[1]], &shape) != 0) {
      hkc_error(pn->ref[REF_IN1]->loc,
                "node '%s': shape mismatch: cannot broadcast '%s' %s with '%s' %s (after dropping leading 1s, one shape "
                "must be a suffix of the other)",
                nd->name, T[nd->in[0]].name, tensor_shape_str(&T[nd->in[0]], s1), T[nd->in[1]].name,
                tensor_shape_str(&T[nd->in[1]], s2));
      return -1;
    }
    break;
  case HK_OP_LAYERNORM:
  case HK_OP_RMSNORM:
    if (infer_norm(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_ATTENTION:
    if (infer_attention(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_ROPE:
    if (infer_rope(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_EMBEDDING:
    if (infer_embedding(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_KV_APPEND:
    if (infer_kv_append(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_KV_ATTENTION:
    if (infer_kv_attention(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_TAKE_ROWS:
    if (infer_take_rows(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_ARGMAX:
    if (infer_argmax(c, pn, nd, &shape) != 0) return -1;
    break;
  case HK_OP_SAMPLE:
    if (infer_sample(c, pn, nd, &shape) != 0) return -1;
    break;
  default: /* relu, gelu, silu, gelu_tanh, tanh, softmax: shape kept */
    shape.rank = T[nd->in[0]].rank;
    memcpy(shape.dims, T[nd->in[0]].dims, sizeof shape.dims);
    break;
  }
  hkc_tensor_t *o = &T[nd->out];
  if (nd->op == HK_OP_ARGMAX || nd->op == HK_OP_SAMPLE)
    o->dtype = HK_DTYPE_I32; /* the only node outputs that are not of the spec's dtype */
  o->rank = shape.rank;
  memcpy(o->dims, shape.dims, sizeof o->dims);
  return 0;
}

/* Under batch_policy: pad a batch between two buckets runs the larger bucket on padded
 * tensors, so the real rows must be a prefix of every batch-dependent tensor and no op
 * may mix rows: batch only in the leading dim (k*batch, no offset), and rank >= 2 (a 1-D
 * [batch] tensor's only dim is also the last one, which norms and softmax reduce) unless it
 * is i32 (lengths [batch]: no op reduces it; a padded row reads length 0). */
static int pad_layout_ok(const hkc_tensor_t *t) {
  int batched = 0;
  for (uint32_t d = 0; d < t->rank; d++) batched |= t->dims[d].mul != 0;
  if (!batched) return 1;
  if ((t->rank < 2 && t->dtype != HK_DTYPE_I32) || t->dims[0].mul <= 0 || t->dims[0].add != 0) return 0;
  for (uint32_t d = 1; d < t->rank; d++)
    if (t->dims[d].mul != 0) return 0;
  return 1;
}

/* Whole-spec checks after the graph: sizes at the largest batch, layouts the batch
 * policy can pad, unused tensors. */
int hkc_spec_check_tensors(spec_ctx_t *c) {
  hkc_spec_t *s = c->spec;
  int64_t max_batch = s->batch_sizes[s->n_batch - 1];
  for (size_t i = 0; i < s->n_tensors; i++) {
    const hkc_tensor_t *t = &s->tensors[i];
    int64_t elems = hkc_tensor_elems(t, max_batch);
    char sh[HKC_SHAPE_STR];
    if (elems < 0 || elems >= HKC_SPEC_MAX_TENSOR_BYTES / (int64_t)hkc_dtype_size(t->dtype)) {
      hkc_error(t->loc, "tensor '%s' %s is too large at batch %lld (its bytes must stay below %lld, 2^48)", t->name,
                tensor_shape_str(t, sh), (long long)max_batch, (long long)HKC_SPEC_MAX_TENSOR_BYTES);
      return -1;
    }
    if (s->batch_policy == HK_BATCH_POLICY_REC_PAD && !pad_layout_ok(t)) {
      hkc_error(t->loc,
                "tensor '%s' %s cannot be padded: with batch_policy: pad (the default) a tensor that depends on "
                "batch must have it in its leading dim only, as [batch, ...] or [k*batch, ...] of rank >= 2, so "
                "that the rows of a smaller batch are a prefix; use batch_policy: exact to run only the built "
                "batch sizes",
                t->name, tensor_shape_str(t, sh));
      return -1;
    }
  }
  unsigned char *used = calloc(s->n_tensors, 1);
  if (!used) return -1;
  for (size_t j = 0; j < s->n_nodes; j++) {
    const hkc_node_t *nd = &s->nodes[j];
    for (int k = 0; k < nd->n_in; k++) used[nd->in[k]] = 1;
    const int extra[] = {nd->bias, nd->residual, nd->mul, nd->gamma, nd->beta, nd->lengths,
                         nd->mask, nd->pos,      nd->ctx, nd->slot,  nd->k_cache, nd->v_cache};
    for (size_t k = 0; k < sizeof extra / sizeof extra[0]; k++)
      if (extra[k] != HKC_NONE) used[extra[k]] = 1;
  }
  for (size_t i = 0; i < s->n_tensors; i++) /* a used quantized param's scales: its gemm reads them */
    if (used[i] && s->tensors[i].scale != HKC_NONE) used[s->tensors[i].scale] = 1;
  for (size_t i = 0; i < s->n_tensors; i++)
    if (!used[i] && s->tensors[i].role != HK_ROLE_OUTPUT)
      hkc_warning(s->tensors[i].loc, "tensor '%s' is never used%s", s->tensors[i].name,
                  s->tensors[i].role == HK_ROLE_INTERMEDIATE ? " and is not an output" : "");
  free(used);
  return 0;
}
