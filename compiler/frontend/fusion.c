/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fusion.c -- the fusion plan: groups of spec nodes become one node each.
 *
 * Three fused forms, exactly what the IR and the kernel ABI (lower/lower.h) can express:
 *   gemm epilogue   out = act(A @ B + bias) * mul + residual, absorbing the add / relu /
 *                   gelu / silu / mul nodes that follow a gemm, in that order;
 *   add + norm      norm(a + b) -> a layernorm/rmsnorm node with add_in (and sum_out when
 *                   the sum is needed elsewhere);
 *   ewchain         a chain of add, mul, relu, gelu, silu -> HK_OP_EWCHAIN and its program;
 *   dual gemm       (auto only) act(A @ Bg + bias) * (A @ Bu) + residual: a gemm whose fused
 *                   mul is another gemm's plain product over the same A (SwiGLU's gate and
 *                   up projections) -> one gemm node with in = {A, Bg, Bu}.
 *   rope epilogue   a gemm (+ bias) then a rope of its output (positions row % seq + offset,
 *                   unscaled: no ctx, no scaling) -> the gemm with rope set;
 *   norm into gemm  (auto only) an rmsnorm whose output is only a gemm's A -> the gemm with
 *                   norm_a: it normalises the norm's input as its A tiles arrive;
 *   norm epilogue   (auto only) a layernorm or rmsnorm of a gemm's (fused) output -> the
 *                   gemm with norm_c: its epilogue normalises whole rows (and stores the
 *                   output it normalised too, as sum_out, when something else reads it).
 *   rope + append   a packed rope with ctx whose output only a kv_append of the same ctx reads
 *                   -> the kv_append with rope set: it rotates the q and k heads as it moves
 *                   them (every target has the kernel).
 * The last three only where every target of the build has such a kernel (the model's
 * kernel_ok).
 *
 * `auto` considers them in that priority (the gemm epilogue saves the most traffic) and
 * takes each legal step that pays on the planner's clock (hkc_fuse_model_t: the fused
 * launch against the launches it replaces, every target and batch bucket; a chain grows
 * one node at a time, each step weighed); without a model every legal step is taken.
 * Explicit groups are checked member by member with the same rules, so an error names
 * the node that breaks a group and why. The work happens on a copy of the
 * nodes ("slots", one per spec node); the spec is rewritten only when everything
 * succeeded: fused nodes take their last member's slot, nodes are re-sorted
 * topologically (stable), eliminated intermediates leave the tensor table and every
 * index is compacted.
 */
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "util/util.h"

/* Reasons are one sentence; the group's names are printed apart from them. */
#define FUSE_WHY 384
/* The most tensors one node reads: its inputs (ewchain's operands, gemm's A, B, B2) and the
 * attribute tensors node_reads lists. */
#define FUSE_MAX_READS (HKC_MAX_NODE_IN + 13)

typedef struct fuse_ctx {
  hkc_spec_t *spec;
  const hkc_fuse_model_t *model; /* auto's clock; NULL: every legal fusion pays */
  size_t n;               /* spec nodes = slots */
  hkc_node_t *slot;       /* working copy; slot[i] is valid while alive[i] */
  unsigned char *alive;   /* slot holds a node (original or fused) */
  unsigned char *refused; /* slot holds a node built here (owns its fused_names) */
  int *anchor;            /* slot -> original node whose name the slot uses */
  int *reads;             /* tensor -> number of reads by alive slots (each operand counts) */
  int *reader;            /* tensor -> a slot that reads it (exact when reads == 1, checked) */
  int *producer;          /* tensor -> slot writing it (out or sum_out), -1 for inputs/params */
  unsigned char *dead;    /* tensor eliminated */
  int generation;         /* a generation graph (KV caches): every bucket must pay (above) */
} fuse_ctx_t;

/* ---- small helpers ---------------------------------------------------------------------- */
static size_t node_reads(const hkc_node_t *n, int out[FUSE_MAX_READS]) {
  size_t k = 0;
  for (int i = 0; i < n->n_in; i++) out[k++] = n->in[i];
  const int extra[] = {n->bias, n->residual, n->mul, n->gamma,   n->beta,    n->add_in, n->lengths,
                       n->mask, n->pos,      n->ctx, n->slot,    n->k_cache, n->v_cache};
  _Static_assert(HKC_MAX_NODE_IN + sizeof extra / sizeof extra[0] <= FUSE_MAX_READS, "FUSE_MAX_READS");
  for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
    if (extra[i] != HKC_NONE) out[k++] = extra[i];
  return k;
}

static int reads_tensor(const hkc_node_t *n, int t) {
  int r[FUSE_MAX_READS];
  size_t nr = node_reads(n, r);
  for (size_t i = 0; i < nr; i++)
    if (r[i] == t) return 1;
  return 0;
}

/* tanh has no epilogue act nor ewchain step: it runs alone. */
static int is_unary(hk_op_t op) {
  return op == HK_OP_RELU || op == HK_OP_GELU || op == HK_OP_SILU || op == HK_OP_GELU_TANH;
}

static int is_elementwise(hk_op_t op) {
  return op == HK_OP_ADD || op == HK_OP_MUL || is_unary(op);
}


static int is_norm(hk_op_t op) { return op == HK_OP_LAYERNORM || op == HK_OP_RMSNORM; }

static hk_act_t unary_act(hk_op_t op) {
  return op == HK_OP_RELU ? HK_ACT_RELU : op == HK_OP_GELU ? HK_ACT_GELU : op == HK_OP_GELU_TANH ? HK_ACT_GELU_TANH : HK_ACT_SILU;
}

static int same_shape(const hkc_tensor_t *a, const hkc_tensor_t *b) {
  if (a->rank != b->rank) return 0;
  for (uint32_t i = 0; i < a->rank; i++)
    if (!hkc_dim_equal(a->dims[i], b->dims[i])) return 0;
  return 1;
}

/* "[batch, 16, 64]" into buf (size >= 96). */
static const char *shape_text(const hkc_tensor_t *t, char *buf, size_t size) {
  size_t len = 0;
  buf[len++] = '[';
  for (uint32_t i = 0; i < t->rank && len + 40 < size; i++) {
    hkc_dim_t d = t->dims[i];
    int n;
    if (d.mul == 0) n = snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)d.add);
    else if (d.mul == 1 && d.add == 0) n = snprintf(buf + len, size - len, "%sbatch", i ? ", " : "");
    else n = snprintf(buf + len, size - len, "%s%lld*batch%+lld", i ? ", " : "", (long long)d.mul, (long long)d.add);
    if (n > 0) len += (size_t)n;
  }
  if (len + 2 > size) len = size - 2;
  buf[len++] = ']';
  buf[len] = '\0';
  return buf;
}

static const char *node_label(const hkc_node_t *n) { return n->fused_names ? n->fused_names : n->name; }

static void why_set(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void why_set(char *why, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, FUSE_WHY, fmt, ap);
  va_end(ap);
}

/* The slot that reads t, when exactly one operand of one alive slot does; else -1. */
static int sole_reader(const fuse_ctx_t *f, int t) {
  if (f->reads[t] != 1) return -1;
  int r = f->reader[t];
  if (r >= 0 && f->alive[r] && reads_tensor(&f->slot[r], t)) return r;
  for (size_t i = 0; i < f->n; i++)
    if (f->alive[i] && reads_tensor(&f->slot[i], t)) return (int)i;
  return -1;
}

/* Another alive slot (not `except`) that reads t, for messages; -1 when none. */
static int other_reader(const fuse_ctx_t *f, int t, int except) {
  for (size_t i = 0; i < f->n; i++)
    if ((int)i != except && f->alive[i] && reads_tensor(&f->slot[i], t)) return (int)i;
  return -1;
}

/* Whether t (written by the group so far) may disappear once node c joins: c must be its
 * only reader, reading it once, and t must not be a graph output. */
static int can_eliminate(const fuse_ctx_t *f, int t, int c, char *why) {
  const hkc_tensor_t *T = &f->spec->tensors[t];
  if (T->role == HK_ROLE_OUTPUT) {
    why_set(why, "tensor '%s' is a graph output, so it must be stored and cannot stay inside a fused node", T->name);
    return 0;
  }
  if (f->reads[t] != 1 || sole_reader(f, t) != c) {
    int o = other_reader(f, t, c);
    if (o >= 0)
      why_set(why, "tensor '%s' is also read by node '%s', so it must be stored and cannot stay inside a fused node",
              T->name, node_label(&f->slot[o]));
    else
      why_set(why, "it reads tensor '%s' twice; a fused node can only pass it on once", T->name);
    return 0;
  }
  return 1;
}

/* The operand of binary node c that is not t (c reads t); HKC_NONE with why when c reads
 * t twice. */
static int other_operand(const fuse_ctx_t *f, const hkc_node_t *c, int t, char *why) {
  if (c->in[0] == t && c->in[1] == t) {
    why_set(why, "it reads tensor '%s' as both operands", f->spec->tensors[t].name);
    return HKC_NONE;
  }
  return c->in[0] == t ? c->in[1] : c->in[0];
}

static int dtype_ok(const fuse_ctx_t *f, hk_dtype_t dtype, int t, char *why) {
  const hkc_tensor_t *T = &f->spec->tensors[t];
  if (T->dtype == dtype) return 1;
  why_set(why, "tensor '%s' is %s, the group is %s (a fused node has one dtype)", T->name, hkc_dtype_name(T->dtype),
          hkc_dtype_name(dtype));
  return 0;
}

/* ---- gemm epilogue ---------------------------------------------------------------------- */
static const char k_epilogue_order[] = "(epilogue order: bias, act, mul, residual; or bias, rope)";

/* What the epilogue already holds past a stage, for "X after the Y" messages. */
static const char *latest_stage(const hkc_node_t *g, int past_act) {
  if (g->rope) return "the rope";
  if (g->residual != HKC_NONE) return "the residual add";
  if (g->mul != HKC_NONE) return "the mul";
  if (past_act && g->act != HK_ACT_NONE) return "the activation";
  return NULL;
}

/* Whether every target of the model has a kernel for candidate n (a form only some targets
 * run: a rope epilogue, a folded norm); no model: yes. */
static int targets_have_kernel(const fuse_ctx_t *f, const hkc_node_t *n) {
  const hkc_fuse_model_t *m = f->model;
  for (size_t t = 0; m && m->kernel_ok && t < m->n_targets; t++)
    if (!m->kernel_ok(m, t, f->spec, n)) return 0;
  return 1;
}

/* Absorbs rope node c, which reads g's output, into the epilogue of gemm g: out =
 * rope(A @ B + bias). The rotation comes last and only after a bias: the kernels rotate the
 * f32 accumulators (plus bias) before the rest of their epilogue, which is then a store. */
static int rope_absorb(const fuse_ctx_t *f, hkc_node_t *g, int c_slot, char *why) {
  const hkc_tensor_t *T = f->spec->tensors;
  const hkc_node_t *c = &f->slot[c_slot];
  const int t = g->out;
  const char *after = latest_stage(g, 1);
  if (g->n_in != 2) {
    why_set(why, "a rope cannot be fused into the dual gemm '%s'", g->name);
    return -1;
  }
  if (c->ctx != HKC_NONE || c->rope_scaling != HKC_ROPE_SCALING_NONE) {
    why_set(why, "rope '%s' has %s, which a gemm's rope epilogue does not take (its positions are row %% seq + "
                 "offset, its frequencies unscaled)",
            c->name, c->ctx != HKC_NONE ? "positions from ctx" : "scaled frequencies");
    return -1;
  }
  if (after) {
    why_set(why, "a rope after %s cannot be fused into gemm '%s' %s", after, g->name, k_epilogue_order);
    return -1;
  }
  const int64_t dh = hkc_rope_head_dim(c, &T[t]);
  if (dh <= 0 || dh % 16 != 0 || dh > HKC_ROPE_EPILOGUE_MAX_DH) {
    why_set(why, "a gemm's rope epilogue takes head_dim 16..%d in steps of 16, and rope '%s' has %lld",
            HKC_ROPE_EPILOGUE_MAX_DH, c->name, (long long)dh);
    return -1;
  }
  if (!can_eliminate(f, t, c_slot, why)) return -1;
  if (!dtype_ok(f, T[t].dtype, c->out, why)) return -1;
  hkc_node_t n = *g;
  n.rope = 1;
  n.heads = c->heads;
  n.kv_heads = c->kv_heads;
  n.packed = c->packed;
  n.theta = c->theta;
  n.pos_offset = c->pos_offset;
  n.out = c->out;
  if (f->spec->fusion_no_rope || !targets_have_kernel(f, &n)) {
    f->spec->fusion_rope_blocked = 1; /* recorded (provenance fusion_rope=off) */
    why_set(why, "a target of this build has no gemm kernel with a rope epilogue for it (sm_90a's gemm_tma has one: "
                 "f16/bf16, K and N multiples of 8)");
    return -1;
  }
  *g = n;
  return 0;
}

/* Absorbs node c, which must read g's output, into the epilogue of the gemm chain g.
 * 0 with g updated, or -1 with why (g unchanged). */
static int gemm_absorb(const fuse_ctx_t *f, hkc_node_t *g, int c_slot, char *why) {
  const hkc_tensor_t *T = f->spec->tensors;
  const hkc_node_t *c = &f->slot[c_slot];
  const int t = g->out;
  const char *gname = g->name;
  char s1[96], s2[96];
  if (!reads_tensor(c, t)) {
    why_set(why, "it does not read '%s', the output of the group so far (a fused group is a chain: each node reads "
                 "the previous one's output)", T[t].name);
    return -1;
  }
  if (c->op == HK_OP_ROPE && c->n_fused == 1) return rope_absorb(f, g, c_slot, why);
  if (!is_elementwise(c->op) || c->n_fused > 1) {
    why_set(why, "op '%s' cannot be fused into gemm '%s' (its epilogue takes add, mul, relu, gelu, silu: bias, act, "
                 "mul, residual; then rope)", hkc_op_name(c->op), gname);
    return -1;
  }
  if (g->rope) {
    why_set(why, "nothing can be fused into gemm '%s' after its rope %s", gname, k_epilogue_order);
    return -1;
  }
  if (!can_eliminate(f, t, c_slot, why)) return -1;
  if (!dtype_ok(f, T[t].dtype, c->out, why)) return -1;
  hkc_node_t n = *g;
  if (is_unary(c->op)) {
    const char *after = latest_stage(g, 0);
    if (after) {
      why_set(why, "activation after %s cannot be fused into gemm '%s' %s", after, gname, k_epilogue_order);
      return -1;
    }
    if (g->act != HK_ACT_NONE) {
      why_set(why, "a second activation cannot be fused into gemm '%s' (it already applies %s)", gname,
              hkc_act_name(g->act));
      return -1;
    }
    n.act = unary_act(c->op);
  } else {
    int o = other_operand(f, c, t, why);
    if (o == HKC_NONE) return -1;
    if (!dtype_ok(f, T[t].dtype, o, why)) return -1;
    const hkc_tensor_t *out = &T[t], *opd = &T[o];
    const hkc_dim_t n_dim = out->dims[out->rank - 1];
    const int bias_like = opd->rank == 1 && hkc_dim_equal(opd->dims[0], n_dim);
    const int out_like = same_shape(opd, out);
    if (c->op == HK_OP_MUL) {
      if (!out_like) {
        why_set(why, "mul operand '%s' %s is not shaped like the output of gemm '%s' %s (a fused mul is element by "
                     "element)", opd->name, shape_text(opd, s1, sizeof s1), gname, shape_text(out, s2, sizeof s2));
        return -1;
      }
      if (g->residual != HKC_NONE) {
        why_set(why, "mul after the residual add cannot be fused into gemm '%s' %s", gname, k_epilogue_order);
        return -1;
      }
      if (g->mul != HKC_NONE) {
        why_set(why, "a second mul cannot be fused into gemm '%s' (it already multiplies by '%s')", gname,
                T[g->mul].name);
        return -1;
      }
      n.mul = o;
    } else if (bias_like && g->bias == HKC_NONE && !latest_stage(g, 1)) {
      n.bias = o;
    } else if (out_like) {
      if (g->residual != HKC_NONE) {
        why_set(why, "a second residual add cannot be fused into gemm '%s' (it already adds '%s')", gname,
                T[g->residual].name);
        return -1;
      }
      n.residual = o;
    } else if (bias_like) {
      const char *after = latest_stage(g, 1);
      if (after)
        why_set(why, "bias add after %s cannot be fused into gemm '%s' %s", after, gname, k_epilogue_order);
      else
        why_set(why, "a second bias add cannot be fused into gemm '%s' (it already adds '%s')", gname, T[g->bias].name);
      return -1;
    } else {
      why_set(why, "add operand '%s' %s is neither [N] (a bias) nor shaped like the output of gemm '%s' %s (a "
                   "residual)", opd->name, shape_text(opd, s1, sizeof s1), gname, shape_text(out, s2, sizeof s2));
      return -1;
    }
  }
  if (!same_shape(&T[c->out], &T[t])) { /* implied by the cases above; kept as a guard */
    why_set(why, "its output '%s' is not shaped like the output of gemm '%s'", T[c->out].name, gname);
    return -1;
  }
  n.out = c->out;
  *g = n;
  return 0;
}

/* ---- dual gemm (SwiGLU) ------------------------------------------------------------------------ */
/* Gemm slot g multiplies its activated product by `mul`; when `mul` is the plain product of
 * another gemm u over the same A (same layout of B, no epilogue of its own, read by g
 * alone and not a spec output), g and u become one dual gemm: in = {A, B_g, B_u},
 * out = act(A @ B_g + bias) * (A @ B_u) + residual (frontend.h). 0 with *out and *u_slot,
 * -1 when the pattern does not hold. */
static int dual_build(const fuse_ctx_t *f, int g_slot, hkc_node_t *out, int *u_slot) {
  const hkc_tensor_t *T = f->spec->tensors;
  const hkc_node_t *g = &f->slot[g_slot];
  if (g->n_in != 2) return -1;
  const int u = f->producer[g->mul];
  if (u < 0 || !f->alive[u]) return -1;
  const hkc_node_t *up = &f->slot[u];
  if (up->op != HK_OP_GEMM || up->n_in != 2 || up->in[0] != g->in[0] || up->trans_b != g->trans_b ||
      up->bias != HKC_NONE || up->residual != HKC_NONE || up->mul != HKC_NONE || up->act != HK_ACT_NONE)
    return -1;
  if (f->reads[up->out] != 1 || T[up->out].role == HK_ROLE_OUTPUT) return -1;
  if (!same_shape(&T[up->in[1]], &T[g->in[1]]) || T[up->in[1]].dtype != T[g->in[1]].dtype) return -1;
  hkc_node_t d = *g;
  d.in[2] = up->in[1];
  d.n_in = 3;
  d.mul = HKC_NONE;
  *out = d;
  *u_slot = u;
  return 0;
}

/* ---- rmsnorm folded into the gemm that reads it ---------------------------------------------------- */
/* rmsnorm slot nm whose output is A of gemm slot g and nothing else: one gemm that normalises
 * its A tiles as they arrive (frontend.h, norm_a): in[0] = the norm's input, gamma, eps.
 * 0 with *out, -1 when the pattern does not hold. */
static int norm_fold_build(const fuse_ctx_t *f, int nm_slot, hkc_node_t *out, int *g_slot) {
  const hkc_tensor_t *T = f->spec->tensors;
  const hkc_node_t *nm = &f->slot[nm_slot];
  if (nm->op != HK_OP_RMSNORM || nm->add_in != HKC_NONE || nm->sum_out != HKC_NONE || nm->n_fused > 1) return -1;
  const int t = nm->out, g = sole_reader(f, t);
  if (g < 0 || T[t].role == HK_ROLE_OUTPUT) return -1;
  const hkc_node_t *gm = &f->slot[g];
  if (gm->op != HK_OP_GEMM || gm->norm_a || gm->in[0] != t || T[nm->in[0]].dtype != T[t].dtype) return -1;
  if (!same_shape(&T[nm->in[0]], &T[t])) return -1;
  hkc_node_t n = *gm;
  n.in[0] = nm->in[0];
  n.gamma = nm->gamma;
  n.eps = nm->eps;
  n.norm_a = 1;
  *out = n;
  *g_slot = g;
  return 0;
}

/* ---- a decode step's rope folded into the kv_append after it ------------------------------------- */
/* kv_append slot app whose q|k|v input is the output of a packed rope with the same ctx (positions
 * ctx - 1), heads and kv_heads, read by nothing else: one kv_append that rotates the q and k heads
 * as it moves them (frontend.h, rope on kv_append). 0 with *out and *rope_slot, -1 with why when
 * the pattern does not hold. */
static int rope_append_build(const fuse_ctx_t *f, int app_slot, hkc_node_t *out, int *rope_slot, char *why) {
  const hkc_tensor_t *T = f->spec->tensors;
  const hkc_node_t *app = &f->slot[app_slot];
  why_set(why, "only a packed rope with ctx, read by nothing else, joins the kv_append after it");
  if (app->op != HK_OP_KV_APPEND || app->rope || app->n_fused > 1 || app->k_cache == HKC_NONE) return -1;
  const int t = app->in[0], r = f->producer[t];
  if (r < 0 || !f->alive[r] || sole_reader(f, t) != app_slot || T[t].role == HK_ROLE_OUTPUT) return -1;
  const hkc_node_t *rp = &f->slot[r];
  if (rp->op != HK_OP_ROPE || rp->n_fused > 1 || !rp->packed || rp->ctx == HKC_NONE || rp->ctx != app->ctx ||
      rp->heads != app->heads || rp->kv_heads != app->kv_heads || rp->pos_offset != 0)
    return -1;
  const hkc_tensor_t *kc = &T[app->k_cache];
  const int64_t dh = hkc_rope_head_dim(rp, &T[t]);
  if (dh <= 0 || dh % 2 != 0 || kc->rank != 4 || kc->dims[3].mul != 0 || kc->dims[3].add != dh * app->kv_heads ||
      T[rp->in[0]].dtype != T[t].dtype || !same_shape(&T[rp->in[0]], &T[t]))
    return -1;
  hkc_node_t n = *app;
  n.in[0] = rp->in[0];
  n.rope = 1;
  n.theta = rp->theta;
  n.rope_scaling = rp->rope_scaling;
  n.rope_factor = rp->rope_factor;
  n.rope_low_freq = rp->rope_low_freq;
  n.rope_high_freq = rp->rope_high_freq;
  n.rope_original_max = rp->rope_original_max;
  *out = n;
  *rope_slot = r;
  return 0;
}

/* ---- a norm in the epilogue of the gemm before it ---------------------------------------------- */
/* layernorm or rmsnorm slot nm (no fused add) whose input is the output of gemm slot *g_slot:
 * one gemm whose epilogue ends with the norm (frontend.h, norm_c); the gemm's output stays
 * stored (sum_out) when something else reads it or it is a graph output (a pre-norm layer's
 * residual stream). 0 with *out, -1 when the pattern does not hold. */
static int ln_epilogue_build(const fuse_ctx_t *f, int nm_slot, hkc_node_t *out, int *g_slot) {
  const hkc_tensor_t *T = f->spec->tensors;
  const hkc_node_t *nm = &f->slot[nm_slot];
  const int ln = nm->op == HK_OP_LAYERNORM;
  if ((!ln && nm->op != HK_OP_RMSNORM) || nm->add_in != HKC_NONE || nm->sum_out != HKC_NONE || nm->n_fused > 1 ||
      nm->gamma == HKC_NONE || (ln && nm->beta == HKC_NONE))
    return -1;
  const int t = nm->in[0], g = f->producer[t];
  if (g < 0 || !f->alive[g]) return -1;
  const hkc_node_t *gm = &f->slot[g];
  if (gm->op != HK_OP_GEMM || gm->n_in == 3 || gm->rope || gm->norm_a || gm->norm_c) return -1;
  if (!same_shape(&T[t], &T[nm->out]) || T[t].dtype != T[nm->out].dtype) return -1;
  const int keep = T[t].role == HK_ROLE_OUTPUT || f->reads[t] != 1 || sole_reader(f, t) != nm_slot;
  hkc_node_t n = *gm;
  n.out = nm->out;
  n.sum_out = keep ? t : HKC_NONE;
  n.gamma = nm->gamma;
  n.beta = ln ? nm->beta : HKC_NONE;
  n.eps = nm->eps;
  n.norm_c = ln ? HKC_NORM_C_LAYERNORM : HKC_NORM_C_RMSNORM;
  *out = n;
  *g_slot = g;
  return 0;
}

/* ---- residual add + norm ----------------------------------------------------------------------- */
/* Fuses add node p into norm node `nm` (which reads p's sum): 0 with *out the fused
 * node, or -1 with why. */
static int norm_absorb(const fuse_ctx_t *f, int p_slot, int n_slot, hkc_node_t *out, char *why) {
  const hkc_tensor_t *T = f->spec->tensors;
  const hkc_node_t *p = &f->slot[p_slot], *nm = &f->slot[n_slot];
  char s1[96], s2[96];
  if (p->op != HK_OP_ADD || p->n_fused > 1) {
    why_set(why, "only a residual add can be fused into %s '%s' (add + norm), not op '%s'", hkc_op_name(nm->op),
            nm->name, hkc_op_name(p->op));
    return -1;
  }
  const int s = p->out;
  if (nm->in[0] != s) {
    why_set(why, "%s '%s' does not normalise '%s', the output of add '%s' (add + norm fuses norm(a + b))",
            hkc_op_name(nm->op), nm->name, T[s].name, p->name);
    return -1;
  }
  if (nm->add_in != HKC_NONE) {
    why_set(why, "%s '%s' already adds '%s'", hkc_op_name(nm->op), nm->name, T[nm->add_in].name);
    return -1;
  }
  if (nm->gamma == s || nm->beta == s) {
    why_set(why, "%s '%s' reads the sum '%s' as a parameter", hkc_op_name(nm->op), nm->name, T[s].name);
    return -1;
  }
  for (int i = 0; i < 2; i++) {
    const hkc_tensor_t *opd = &T[p->in[i]];
    if (!same_shape(opd, &T[s])) {
      why_set(why, "add operand '%s' %s is broadcast; add + norm needs both operands shaped like the sum '%s' %s",
              opd->name, shape_text(opd, s1, sizeof s1), T[s].name, shape_text(&T[s], s2, sizeof s2));
      return -1;
    }
    if (!dtype_ok(f, T[s].dtype, p->in[i], why)) return -1;
  }
  if (!dtype_ok(f, T[s].dtype, nm->out, why)) return -1;
  /* The sum stays stored when anything but the norm reads it (or it is an output). */
  const int keep_sum = T[s].role == HK_ROLE_OUTPUT || f->reads[s] != 1 || sole_reader(f, s) != n_slot;
  if (keep_sum) {
    /* The fused node runs no earlier than the norm did; the sum's other readers may then
     * move after it, which needs gamma and beta not to depend on the sum. */
    const int params[2] = {nm->gamma, nm->beta};
    for (int i = 0; i < 2; i++)
      if (params[i] != HKC_NONE && f->producer[params[i]] > p_slot) {
        why_set(why, "the sum '%s' is also needed elsewhere, and '%s' is computed after it", T[s].name,
                T[params[i]].name);
        return -1;
      }
  }
  *out = *nm;
  out->in[0] = p->in[0];
  out->add_in = p->in[1];
  out->sum_out = keep_sum ? s : HKC_NONE;
  return 0;
}

/* ---- element-wise chains ------------------------------------------------------------------------ */
static char step_letter(hk_op_t op) {
  switch (op) {
  case HK_OP_ADD: return 'a';
  case HK_OP_MUL: return 'm';
  case HK_OP_RELU: return 'r';
  case HK_OP_GELU: return 'g';
  case HK_OP_GELU_TANH: return 't';
  default: return 's';
  }
}

/* Appends "<letter>[<operand>]" to the chain's program; operand o is reused when the
 * chain already reads it (as operand 1..4), else added. 0 / -1 with why. */
static int chain_step(const fuse_ctx_t *f, hkc_node_t *ch, hk_op_t op, int o, char *why) {
  size_t len = strlen(ch->program);
  char step[3] = {step_letter(op), 0, 0};
  if (o != HKC_NONE) {
    int j = 1;
    while (j < ch->n_in && ch->in[j] != o) j++;
    if (j == ch->n_in) {
      if (ch->n_in >= HKC_MAX_NODE_IN) {
        why_set(why, "the chain would read more than %d tensors (adding '%s')", HKC_MAX_NODE_IN,
                f->spec->tensors[o].name);
        return -1;
      }
      ch->in[ch->n_in++] = o;
    }
    step[1] = (char)('0' + j);
  }
  if (len + strlen(step) >= HKC_EW_PROGRAM_MAX) {
    why_set(why, "the chain's program would exceed %d characters", HKC_EW_PROGRAM_MAX - 1);
    return -1;
  }
  memcpy(ch->program + len, step, strlen(step) + 1);
  return 0;
}

/* A chain of one element-wise node h (not yet an ewchain: committed only with >= 2). */
static void chain_start(const fuse_ctx_t *f, const hkc_node_t *h, hkc_node_t *ch) {
  *ch = *h;
  ch->op = HK_OP_EWCHAIN;
  ch->program[0] = '\0';
  ch->n_in = 1;
  for (int i = 1; i < HKC_MAX_NODE_IN; i++) ch->in[i] = HKC_NONE;
  char why[FUSE_WHY];
  int rc = chain_step(f, ch, h->op, is_unary(h->op) ? HKC_NONE : h->in[1], why);
  assert(rc == 0);
  (void)rc;
}

static int chain_absorb(const fuse_ctx_t *f, hkc_node_t *ch, int c_slot, char *why) {
  const hkc_tensor_t *T = f->spec->tensors;
  const hkc_node_t *c = &f->slot[c_slot];
  const int t = ch->out;
  if (!reads_tensor(c, t)) {
    why_set(why, "it does not read '%s', the output of the group so far (a fused group is a chain: each node reads "
                 "the previous one's output)", T[t].name);
    return -1;
  }
  if (!is_elementwise(c->op) || c->n_fused > 1) {
    why_set(why, "op '%s' cannot join an element-wise chain (add, mul, relu, gelu, silu)", hkc_op_name(c->op));
    return -1;
  }
  if (!can_eliminate(f, t, c_slot, why)) return -1;
  if (!dtype_ok(f, T[t].dtype, c->out, why)) return -1;
  hkc_node_t n = *ch;
  int o = HKC_NONE;
  if (!is_unary(c->op)) {
    if ((o = other_operand(f, c, t, why)) == HKC_NONE) return -1;
    if (!dtype_ok(f, T[t].dtype, o, why)) return -1;
  }
  if (chain_step(f, &n, c->op, o, why) != 0) return -1;
  n.out = c->out;
  *ch = n;
  return 0;
}

/* ---- committing a group ------------------------------------------------------------------------ */
/* Replaces the member slots (in topological order, the last one last) by `fused`, which
 * takes the last member's slot. Eliminated tensors: every member output but the last,
 * except a kept sum_out. Keeps reads/reader/producer exact. 0 / -1 on OOM. */
static int commit(fuse_ctx_t *f, const int *members, size_t n_members, hkc_node_t fused, int anchor) {
  size_t len = 1;
  int count = 0;
  assert(n_members >= 2);
  for (size_t m = 0; m < n_members; m++) {
    len += strlen(node_label(&f->slot[members[m]])) + 1;
    count += f->slot[members[m]].n_fused;
  }
  char *names = malloc(len);
  if (!names) {
    hkc_error((hkc_loc_t){f->spec->path, 0, 0}, "out of memory while fusing");
    return -1;
  }
  names[0] = '\0';
  for (size_t m = 0; m < n_members; m++) {
    if (m) strcat(names, ",");
    strcat(names, node_label(&f->slot[members[m]]));
  }
  const int last = members[n_members - 1];
  int r[FUSE_MAX_READS];
  for (size_t m = 0; m < n_members; m++) {
    const hkc_node_t *mn = &f->slot[members[m]];
    size_t nr = node_reads(mn, r);
    for (size_t i = 0; i < nr; i++) f->reads[r[i]]--;
    if (m + 1 < n_members && mn->out != fused.sum_out) f->dead[mn->out] = 1;
    if (f->refused[members[m]]) free(f->slot[members[m]].fused_names);
    f->alive[members[m]] = 0;
    f->refused[members[m]] = 0;
  }
  fused.fused_names = names;
  fused.n_fused = count;
  fused.name = f->spec->nodes[anchor].name;
  f->slot[last] = fused;
  f->alive[last] = 1;
  f->refused[last] = 1;
  f->anchor[last] = anchor;
  size_t nr = node_reads(&fused, r);
  for (size_t i = 0; i < nr; i++) {
    f->reads[r[i]]++;
    f->reader[r[i]] = last;
  }
  f->producer[fused.out] = last;
  if (fused.sum_out != HKC_NONE) f->producer[fused.sum_out] = last;
  return 0;
}

/* ---- auto ---------------------------------------------------------------------------------------- */
/* Whether the graph is a generation graph: a node reads or writes a KV cache. There both a
 * prompt's prefill (the time to its first token) and each decode step are latency a user waits
 * on, and one plan serves both: a step pays only where it pays at every batch size (the worst
 * fused / apart decides). The H100 measured the mean's choice there (an rmsnorm folded into each
 * gemm that reads it: fused / apart 0.72-0.90 at a decode step, 1.33-1.46 at a 1024-token
 * prefill) at 1.19x the time to first token of the unfused plan for 32 prompts of 1024 tokens
 * (docs/BENCHMARKS.md, "Generation"). */
static int is_generation(const hkc_spec_t *s) {
  for (size_t i = 0; i < s->n_nodes; i++)
    if (s->nodes[i].k_cache != HKC_NONE) return 1;
  return 0;
}

/* t(fused) / (t(a) + t(b)) on target t's clock at `batch`; NAN when a time is not finite and
 * positive (the sample counts for nothing). */
static double ratio_at(const fuse_ctx_t *f, const hkc_node_t *a, const hkc_node_t *b, const hkc_node_t *fused,
                       size_t t, int64_t batch) {
  const hkc_fuse_model_t *m = f->model;
  const double apart = m->seconds(m, t, f->spec, a, batch) + m->seconds(m, t, f->spec, b, batch);
  const double one = m->seconds(m, t, f->spec, fused, batch);
  return apart > 0.0 && one > 0.0 && apart < HUGE_VAL && one < HUGE_VAL ? one / apart : NAN;
}

/* The mean over targets and batch buckets of t(fused) / (t(a) + t(b)) on the model's clock (a
 * generation graph: the largest of them); samples that are not finite and positive count for
 * nothing (1 when none is). With
 * `report`, also writes each sample: " sm_90a b1 0.65 (3.8/5.9 us) ...". */
static double mean_ratio(const fuse_ctx_t *f, const hkc_node_t *a, const hkc_node_t *b, const hkc_node_t *fused,
                         FILE *report) {
  const hkc_fuse_model_t *m = f->model;
  const hkc_spec_t *s = f->spec;
  double sum = 0.0, count = 0.0, worst = 0.0;
  for (size_t t = 0; t < m->n_targets; t++) {
    if (report) fprintf(report, " %s", m->names ? m->names[t] : "?");
    for (int bi = 0; bi < s->n_batch; bi++) {
      const int64_t batch = s->batch_sizes[bi];
      const double r = ratio_at(f, a, b, fused, t, batch);
      const int valid = !isnan(r);
      if (valid) sum += r, count += 1.0, worst = r > worst ? r : worst;
      if (report && valid) {
        const double one = m->seconds(m, t, s, fused, batch);
        fprintf(report, " b%lld %.2f (%.1f/%.1f us)", (long long)batch, r, one * 1e6, one / r * 1e6);
      }
      else if (report)
        fprintf(report, " b%lld -", (long long)batch);
    }
  }
  if (count == 0.0) return 1.0;
  return f->generation ? worst : sum / count;
}

/* Whether one launch of `fused` instead of the launches of a (labelled a_label: a chain
 * grown so far) and b pays on the model's clock: mean_ratio at most 1. No model: every
 * legal step pays. A refused step is appended to spec->fusion_apart; with model->report,
 * every verdict is written there. 0 / 1, -1 on OOM. */
static int pays(const fuse_ctx_t *f, const hkc_node_t *a, const char *a_label, const hkc_node_t *b,
                const hkc_node_t *fused, const char *form) {
  const hkc_fuse_model_t *m = f->model;
  if (!m || m->n_targets == 0) return 1;
  const double mean = mean_ratio(f, a, b, fused, NULL);
  const int yes = mean <= 1.0;
  if (m->report) {
    fprintf(m->report, "fusion: %s %s + %s (%s): fused/apart", yes ? "fuse" : "keep apart", a_label, node_label(b),
            form);
    mean_ratio(f, a, b, fused, m->report);
    fprintf(m->report, "; %s %.3f\n", f->generation ? "worst" : "mean", mean);
  }
  if (!yes) {
    hkc_spec_t *s = f->spec;
    size_t old = s->fusion_apart ? strlen(s->fusion_apart) : 0;
    size_t add = strlen(a_label) + strlen(node_label(b)) + strlen(form) + 16;
    char *grown = realloc(s->fusion_apart, old + add);
    if (!grown) {
      hkc_error((hkc_loc_t){s->path, 0, 0}, "out of memory while fusing");
      return -1;
    }
    snprintf(grown + old, add, "%s%s + %s (%s)", old ? "; " : "", a_label, node_label(b), form);
    s->fusion_apart = grown;
  }
  return yes;
}

/* The label of a chain grown so far: its members' labels joined by ',' (as commit names
 * the fused node), cut to size. */
static const char *chain_label(const fuse_ctx_t *f, const int *members, int n, char *buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < n && len + 1 < size; i++) {
    int w = snprintf(buf + len, size - len, "%s%s", i ? "," : "", node_label(&f->slot[members[i]]));
    if (w < 0) break;
    len = len + (size_t)w < size ? len + (size_t)w : size - 1;
  }
  return buf;
}

/* Grows a chain from slot `head` through sole readers while `absorb` accepts them and
 * each step pays. The number of members, or -1 on OOM. */
typedef int (*absorb_fn_t)(const fuse_ctx_t *, hkc_node_t *, int, char *);

static int grow_chain(fuse_ctx_t *f, int head, hkc_node_t *state, absorb_fn_t absorb, int *members,
                      const char *form) {
  char why[FUSE_WHY], label[512];
  int n = 1;
  members[0] = head;
  for (;;) {
    int c = sole_reader(f, state->out);
    if (c < 0 || f->spec->tensors[state->out].role == HK_ROLE_OUTPUT || (size_t)n >= f->n) break;
    const hkc_node_t before = *state;
    if (absorb(f, state, c, why) != 0) break;
    const int ok = pays(f, &before, chain_label(f, members, n, label, sizeof label), &f->slot[c], state, form);
    if (ok < 0) return -1;
    if (!ok) {
      *state = before; /* the absorb wrote the refused step into state */
      break;
    }
    members[n++] = c;
  }
  return n;
}

/* One pass of a two-node form of a norm and a gemm over every norm slot: build makes the
 * fused node and names the gemm's slot (-1: no such pair); norm_first: the norm precedes the
 * gemm (folded into its A) rather than follows it (its epilogue). A target without such a
 * kernel, or `no`, keeps the pair apart and sets *blocked; `always` takes every pair without
 * asking the clock. 0, -1 on OOM. */
typedef int (*norm_form_fn_t)(const fuse_ctx_t *, int, hkc_node_t *, int *);
/* The targets' measured range of a folded rmsnorm (hkc_fuse_model_t.norm_fold_rows): the least. */
static int64_t fold_cap(const hkc_fuse_model_t *m) {
  int64_t cap = INT64_MAX;
  for (size_t t = 0; m->norm_fold_rows && t < m->n_targets; t++) {
    const int64_t r = m->norm_fold_rows(m, t);
    cap = r < cap ? r : cap;
  }
  return cap;
}

/* Whether a target folds a norm only at the few rows of its norm_fold_rows (the model's
 * norm_fold_limited). */
static int fold_limited(const hkc_fuse_model_t *m) {
  for (size_t t = 0; m->norm_fold_limited && t < m->n_targets; t++)
    if (m->norm_fold_limited(m, t)) return 1;
  return 0;
}

/* The rows of A that gemm b reads at `batch` (0 when A has no columns). */
static int64_t rows_at(const hkc_spec_t *s, const hkc_node_t *b, int64_t batch) {
  const hkc_tensor_t *x = &s->tensors[b->in[0]];
  const int64_t k = x->rank ? hkc_dim_value(x->dims[x->rank - 1], batch) : 0;
  return k > 0 ? hkc_tensor_elems(x, batch) / k : 0;
}

/* The most rows of A that gemm b reads at a bucket of the spec. */
static int64_t max_rows(const hkc_spec_t *s, const hkc_node_t *b) {
  int64_t most = 0;
  for (int bi = 0; bi < s->n_batch; bi++) {
    const int64_t r = rows_at(s, b, s->batch_sizes[bi]);
    most = r > most ? r : most;
  }
  return most;
}

/* A generation graph's norm fold refused for the plan as a whole (it does not pay at every
 * bucket): the rows of A up to which it pays at every bucket and on every target, within the
 * targets' measured range (the model's norm_fold_rows), which the gemm then takes as
 * norm_fold_rows (lowering folds the norm at those buckets only); 0 when it pays at none.
 * Buckets ascend (the spec's batch_sizes). */
static int64_t fold_rows(const fuse_ctx_t *f, const hkc_node_t *a, const hkc_node_t *b, const hkc_node_t *fused) {
  const hkc_spec_t *s = f->spec;
  const int64_t cap = fold_cap(f->model);
  int64_t rows = 0;
  for (int bi = 0; bi < s->n_batch; bi++) {
    const int64_t batch = s->batch_sizes[bi], r = rows_at(s, b, batch);
    if (r <= 0 || r > cap) return rows;
    for (size_t t = 0; t < f->model->n_targets; t++)
      if (!(ratio_at(f, a, b, fused, t, batch) <= 1.0)) return rows; /* NAN: not known to pay */
    rows = r;
  }
  return rows;
}

static int norm_form_pass(fuse_ctx_t *f, int *members, norm_form_fn_t build, int norm_first, int no, int always,
                          int *blocked, const char *form) {
  for (size_t i = 0; i < f->n; i++) {
    if (!f->alive[i] || !is_norm(f->slot[i].op)) continue;
    hkc_node_t fused;
    int g;
    if (build(f, (int)i, &fused, &g) != 0) continue;
    if (no || !targets_have_kernel(f, &fused)) {
      *blocked = 1;
      continue;
    }
    const int a = norm_first ? (int)i : g, b = norm_first ? g : (int)i;
    int pay = always ? 1 : pays(f, &f->slot[a], node_label(&f->slot[a]), &f->slot[b], &fused, form);
    if (pay < 0) return -1;
    /* a target whose folded-norm gemm serves a few rows only: never for the whole plan beyond them
     * (a generation graph folds per bucket below; any other graph keeps the pair apart) */
    if (pay && norm_first && f->model && fold_limited(f->model) &&
        (!f->generation || max_rows(f->spec, &f->slot[b]) > fold_cap(f->model))) {
      pay = 0;
      if (!f->generation) *blocked = 1;
      if (f->model->report)
        fprintf(f->model->report, "fusion: keep apart %s + %s (%s): a target folds it at a few rows only%s\n",
                node_label(&f->slot[a]), node_label(&f->slot[b]), form, f->generation ? " (per bucket, below)" : "");
    }
    /* a generation graph folds for the whole plan only within the targets' measured range */
    if (pay && !always && f->generation && norm_first && f->model && max_rows(f->spec, &f->slot[b]) > fold_cap(f->model)) {
      pay = 0;
      if (f->model->report)
        fprintf(f->model->report, "fusion: keep apart %s + %s (%s): its buckets pass the targets' measured range\n",
                node_label(&f->slot[a]), node_label(&f->slot[b]), form);
    }
    if (!pay && f->generation && norm_first && f->model && f->model->n_targets) {
      /* the buckets where it pays fold it at lowering (frontend.h, norm_fold_rows) */
      const int64_t rows = fold_rows(f, &f->slot[a], &f->slot[b], &fused);
      f->slot[b].norm_fold_rows = rows;
      if (rows > 0 && f->model->report)
        fprintf(f->model->report, "fusion: fold %s into %s at the buckets of <= %lld rows (lowering)\n",
                node_label(&f->slot[a]), node_label(&f->slot[b]), (long long)rows);
    }
    if (!pay) continue;
    members[0] = a, members[1] = b;
    if (commit(f, members, 2, fused, f->anchor[g]) != 0) return -1;
  }
  return 0;
}

static int auto_fuse(fuse_ctx_t *f, int *members) {
  /* 1. gemm epilogues (a chain committed here took its slot's place and stopped for good:
   * not grown again) */
  for (size_t i = 0; i < f->n; i++) {
    if (!f->alive[i] || f->slot[i].op != HK_OP_GEMM || f->refused[i]) continue;
    hkc_node_t g = f->slot[i];
    int n = grow_chain(f, (int)i, &g, gemm_absorb, members, "gemm epilogue");
    if (n < 0) return -1;
    if (n > 1 && commit(f, members, (size_t)n, g, f->anchor[i]) != 0) return -1;
  }
  /* 1b. SwiGLU: a gemm whose fused mul operand is the output of another gemm over the same
   * A becomes one dual gemm (both products share the A tiles) */
  for (size_t i = 0; i < f->n; i++) {
    if (!f->alive[i] || f->slot[i].op != HK_OP_GEMM || f->slot[i].mul == HKC_NONE) continue;
    hkc_node_t d;
    int u;
    if (dual_build(f, (int)i, &d, &u) != 0) continue;
    if (f->spec->fusion_no_dual) { /* a target cannot run it: recorded (provenance fusion_dual=off) */
      f->spec->fusion_dual_blocked = 1;
      continue;
    }
    const int ok = pays(f, &f->slot[u], node_label(&f->slot[u]), &f->slot[i], &d, "dual gemm");
    if (ok < 0) return -1;
    if (!ok) continue;
    members[0] = u, members[1] = (int)i;
    if (commit(f, members, 2, d, f->anchor[i]) != 0) return -1;
  }
  /* 2. residual add + norm */
  for (size_t i = 0; i < f->n; i++) {
    if (!f->alive[i] || !is_norm(f->slot[i].op) || f->slot[i].add_in != HKC_NONE) continue;
    int p = f->producer[f->slot[i].in[0]];
    if (p < 0 || !f->alive[p]) continue;
    hkc_node_t fused;
    char why[FUSE_WHY];
    if (norm_absorb(f, p, (int)i, &fused, why) != 0) continue;
    const int ok = pays(f, &f->slot[p], node_label(&f->slot[p]), &f->slot[i], &fused, "add + norm");
    if (ok < 0) return -1;
    if (!ok) continue;
    members[0] = p, members[1] = (int)i;
    if (commit(f, members, 2, fused, f->anchor[i]) != 0) return -1;
  }
  /* 2b. rmsnorm folded into the gemm that reads it (after the dual gemm: SwiGLU's two
   * gemms read the norm as one); where every target has such a kernel (provenance
   * fusion_norm=off records a refusal) */
  hkc_spec_t *s = f->spec;
  if (norm_form_pass(f, members, norm_fold_build, 1, s->fusion_no_norm, s->fusion_norm_always, &s->fusion_norm_blocked,
                     "norm into gemm") != 0)
    return -1;
  /* 2c. a norm into the epilogue of the gemm whose output it normalises (after the gemm's
   * chain: the norm reads the residual sum; after the rmsnorm folded into the next gemm,
   * which takes priority); where every target has such a kernel (fusion_ln=off) */
  if (norm_form_pass(f, members, ln_epilogue_build, 0, s->fusion_no_ln, s->fusion_ln_always, &s->fusion_ln_blocked,
                     "norm epilogue") != 0)
    return -1;
  /* 2d. a decode step's rope into the kv_append that moves its output (the rope's own launch
   * and a pass over the q|k|v rows saved) */
  for (size_t i = 0; i < f->n; i++) {
    if (!f->alive[i] || f->slot[i].op != HK_OP_KV_APPEND) continue;
    hkc_node_t fused;
    int r;
    char why[FUSE_WHY];
    if (rope_append_build(f, (int)i, &fused, &r, why) != 0) continue;
    const int ok = pays(f, &f->slot[r], node_label(&f->slot[r]), &f->slot[i], &fused, "rope + append");
    if (ok < 0) return -1;
    if (!ok) continue;
    members[0] = r, members[1] = (int)i;
    if (commit(f, members, 2, fused, f->anchor[i]) != 0) return -1;
  }
  /* 3. element-wise chains */
  for (size_t i = 0; i < f->n; i++) {
    if (!f->alive[i] || !is_elementwise(f->slot[i].op) || f->slot[i].n_fused > 1) continue;
    hkc_node_t ch;
    chain_start(f, &f->slot[i], &ch);
    int n = grow_chain(f, (int)i, &ch, chain_absorb, members, "element-wise chain");
    if (n < 0) return -1;
    if (n > 1 && commit(f, members, (size_t)n, ch, f->anchor[i]) != 0) return -1;
  }
  return 0;
}

/* ---- explicit groups --------------------------------------------------------------------------- */
static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* Builds the fused node of one explicit group (members sorted). 0, or -1 with *bad the
 * member that breaks it and why. */
static int group_build(const fuse_ctx_t *f, const int *m, size_t k, hkc_node_t *out, int *anchor, int *bad,
                       char *why) {
  const hkc_node_t *S = f->slot;
  int gemm = -1, norm = -1;
  if (k == 2 && S[m[0]].op == HK_OP_ROPE && S[m[1]].op == HK_OP_KV_APPEND) { /* rope + append */
    int r = -1;
    *bad = m[1];
    if (rope_append_build(f, m[1], out, &r, why) != 0) return -1;
    if (r != m[0]) {
      *bad = m[0];
      why_set(why, "the kv_append does not read this rope's output");
      return -1;
    }
    *anchor = f->anchor[m[1]];
    return 0;
  }
  for (size_t i = 0; i < k; i++) {
    const hkc_node_t *n = &S[m[i]];
    *bad = m[i];
    if (n->op == HK_OP_GEMM) {
      if (gemm >= 0) {
        why_set(why, "a fused group holds one gemm, and '%s' is already in it (SwiGLU: group the mul with one of "
                     "the two gemms; the other's output becomes the mul operand)", S[gemm].name);
        return -1;
      }
      gemm = m[i];
    } else if (is_norm(n->op)) {
      if (norm >= 0) {
        why_set(why, "a fused group holds one norm, and '%s' is already in it", S[norm].name);
        return -1;
      }
      norm = m[i];
    } else if (!is_elementwise(n->op) && n->op != HK_OP_ROPE) {
      why_set(why, "op '%s' cannot be fused with other nodes (it runs as a kernel of its own)", hkc_op_name(n->op));
      return -1;
    }
  }
  if (gemm >= 0) {
    if (gemm != m[0]) {
      *bad = m[0];
      why_set(why, "it runs before gemm '%s'; only nodes that consume the gemm's output can join its epilogue",
              S[gemm].name);
      return -1;
    }
    *out = S[gemm];
    for (size_t i = 1; i < k; i++) {
      *bad = m[i];
      if (gemm_absorb(f, out, m[i], why) != 0) return -1;
    }
    *anchor = f->anchor[gemm];
    return 0;
  }
  if (norm >= 0) {
    if (norm != m[k - 1]) {
      *bad = m[k - 1];
      why_set(why, "it comes after %s '%s'; nothing can be fused after a norm", hkc_op_name(S[norm].op), S[norm].name);
      return -1;
    }
    if (k != 2) {
      *bad = m[0];
      why_set(why, "add + norm fuses exactly one residual add into %s '%s' (this group has %zu nodes)",
              hkc_op_name(S[norm].op), S[norm].name, k);
      return -1;
    }
    *bad = m[0];
    if (norm_absorb(f, m[0], norm, out, why) != 0) return -1;
    *anchor = f->anchor[norm];
    return 0;
  }
  chain_start(f, &S[m[0]], out);
  for (size_t i = 1; i < k; i++) {
    *bad = m[i];
    if (chain_absorb(f, out, m[i], why) != 0) return -1;
  }
  *anchor = f->anchor[m[0]];
  return 0;
}

static int groups_fuse(fuse_ctx_t *f, int *members) {
  const hkc_spec_t *s = f->spec;
  for (size_t g = 0; g < s->n_groups; g++) {
    size_t k = s->group_sizes[g];
    memcpy(members, s->groups[g], k * sizeof *members);
    qsort(members, k, sizeof *members, cmp_int);
    if (k < 2) continue;
    hkc_node_t fused;
    int anchor = -1, bad = -1;
    char why[FUSE_WHY];
    if (group_build(f, members, k, &fused, &anchor, &bad, why) != 0) {
      char list[512];
      size_t len = 0;
      list[0] = '\0';
      for (size_t i = 0; i < s->group_sizes[g] && len + 8 < sizeof list; i++) {
        int n = snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", s->nodes[s->groups[g][i]].name);
        if (n > 0) len = len + (size_t)n < sizeof list ? len + (size_t)n : sizeof list - 1;
      }
      hkc_loc_t loc = s->group_locs ? s->group_locs[g] : (hkc_loc_t){s->path, 0, 0};
      hkc_error(loc, "fusion group [%s] cannot be one kernel: node '%s': %s", list, s->nodes[bad].name, why);
      return -1;
    }
    if (commit(f, members, k, fused, anchor) != 0) return -1;
  }
  return 0;
}

/* ---- rewriting the spec --------------------------------------------------------------------------- */
/* Stable topological order of the alive slots (producers first, slot order kept where
 * possible), as in spec.c: iterative DFS over producers. -1 on a cycle (a bug). */
static int order_slots(const fuse_ctx_t *f, int *order, size_t *out_n) {
  size_t n = f->n, n_order = 0;
  unsigned char *state = calloc(n ? n : 1, 1);
  int *stack = malloc((n ? n : 1) * sizeof *stack);
  size_t *next = malloc((n ? n : 1) * sizeof *next);
  int rc = -1;
  if (!state || !stack || !next) goto done;
  for (size_t root = 0; root < n; root++) {
    if (!f->alive[root] || state[root]) continue;
    size_t sp = 0;
    stack[sp] = (int)root, next[sp] = 0, sp++;
    state[root] = 1;
    while (sp) {
      int v = stack[sp - 1];
      int r[FUSE_MAX_READS];
      size_t nr = node_reads(&f->slot[v], r);
      if (next[sp - 1] < nr) {
        int p = f->producer[r[next[sp - 1]++]];
        if (p < 0 || p == v) continue;
        assert(f->alive[p]);
        if (state[p] == 1) goto done; /* cycle */
        if (state[p] == 0) {
          state[p] = 1;
          stack[sp] = p, next[sp] = 0, sp++;
        }
      } else {
        state[v] = 2;
        order[n_order++] = v;
        sp--;
      }
    }
  }
  *out_n = n_order;
  rc = 0;
done:
  free(state);
  free(stack);
  free(next);
  return rc;
}

static void remap(int *t, const int *map) {
  if (*t != HKC_NONE) *t = map[*t];
}

/* Installs the alive slots as the spec's nodes and drops eliminated tensors. */
static int rewrite_spec(fuse_ctx_t *f) {
  hkc_spec_t *s = f->spec;
  int *order = malloc((f->n ? f->n : 1) * sizeof *order);
  int *map = malloc((s->n_tensors ? s->n_tensors : 1) * sizeof *map);
  hkc_node_t *nodes = calloc(f->n ? f->n : 1, sizeof *nodes);
  unsigned char *keep_name = calloc(f->n ? f->n : 1, 1);
  size_t n_nodes = 0;
  int rc = -1;
  if (!order || !map || !nodes || !keep_name) {
    hkc_error((hkc_loc_t){s->path, 0, 0}, "out of memory while fusing");
    goto done;
  }
  if (order_slots(f, order, &n_nodes) != 0) {
    hkc_error((hkc_loc_t){s->path, 0, 0}, "internal error: fusion produced a cycle");
    goto done;
  }
  /* Tensor compaction. */
  size_t nt = 0;
  for (size_t t = 0; t < s->n_tensors; t++) {
    if (f->dead[t]) {
      hkc_tensor_free(&s->tensors[t]);
      map[t] = HKC_NONE;
      continue;
    }
    map[t] = (int)nt;
    s->tensors[nt++] = s->tensors[t];
  }
  s->n_tensors = nt;
  for (size_t t = 0; t < nt; t++) s->tensors[t].producer = HKC_NONE;
  for (size_t o = 0; o < s->n_outputs; o++) remap(&s->outputs[o], map);
  /* Nodes in their new order; names and fused_names change owners. */
  for (size_t j = 0; j < n_nodes; j++) {
    hkc_node_t *nd = &nodes[j];
    *nd = f->slot[order[j]];
    keep_name[f->anchor[order[j]]] = 1;
    for (int i = 0; i < nd->n_in; i++) remap(&nd->in[i], map);
    int *fields[] = {&nd->bias, &nd->residual, &nd->mul, &nd->gamma, &nd->beta,    &nd->add_in,  &nd->sum_out,
                     &nd->lengths, &nd->mask,  &nd->pos, &nd->ctx,   &nd->slot,    &nd->k_cache, &nd->v_cache,
                     &nd->out};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) remap(fields[i], map);
    s->tensors[nd->out].producer = (int)j;
    if (nd->sum_out != HKC_NONE) s->tensors[nd->sum_out].producer = (int)j;
  }
  for (size_t i = 0; i < f->n; i++) {
    if (!keep_name[i]) free(s->nodes[i].name);
    /* an original node's fused_names survives only in an untouched slot */
    if (!(f->alive[i] && !f->refused[i])) free(s->nodes[i].fused_names);
    f->refused[i] = 0; /* ownership passed to the spec */
  }
  free(s->nodes);
  s->nodes = nodes;
  s->n_nodes = n_nodes;
  nodes = NULL;
  rc = 0;
done:
  free(order);
  free(map);
  free(nodes);
  free(keep_name);
  return rc;
}

static void free_groups(hkc_spec_t *s) {
  for (size_t i = 0; i < s->n_groups; i++) free(s->groups[i]);
  free(s->groups);
  free(s->group_sizes);
  free(s->group_locs);
  s->groups = NULL;
  s->group_sizes = NULL;
  s->group_locs = NULL;
  s->n_groups = 0;
}

/* Contract in frontend.h. Works on copies: on error the spec is unchanged. Explicit groups
 * are consumed (their node indices would be stale after the rewrite). */
int hkc_fuse(hkc_spec_t *spec, int mode) { return hkc_fuse_planned(spec, mode, NULL); }

int hkc_fuse_planned(hkc_spec_t *spec, int mode, const hkc_fuse_model_t *model) {
  if (mode >= 0) {
    if (mode != HKC_FUSION_AUTO && mode != HKC_FUSION_NONE) {
      hkc_error((hkc_loc_t){spec->path, 0, 0}, "internal error: fusion mode %d", mode);
      return -1;
    }
    spec->fusion = (hkc_fusion_mode_t)mode;
  }
  if (spec->fusion == HKC_FUSION_NONE || spec->n_nodes == 0) {
    if (spec->fusion != HKC_FUSION_GROUPS) free_groups(spec);
    return 0;
  }
  free(spec->fusion_apart); /* auto's refusals of this run only */
  spec->fusion_apart = NULL;
  fuse_ctx_t f = {.spec = spec, .model = model, .n = spec->n_nodes, .generation = is_generation(spec)};
  size_t nt = spec->n_tensors ? spec->n_tensors : 1;
  f.slot = malloc(f.n * sizeof *f.slot);
  f.alive = malloc(f.n);
  f.refused = calloc(f.n, 1);
  f.anchor = malloc(f.n * sizeof *f.anchor);
  f.reads = calloc(nt, sizeof *f.reads);
  f.reader = malloc(nt * sizeof *f.reader);
  f.producer = malloc(nt * sizeof *f.producer);
  f.dead = calloc(nt, 1);
  int *members = malloc(f.n * sizeof *members);
  int rc = -1;
  if (!f.slot || !f.alive || !f.refused || !f.anchor || !f.reads || !f.reader || !f.producer || !f.dead || !members) {
    hkc_error((hkc_loc_t){spec->path, 0, 0}, "out of memory while fusing");
    goto done;
  }
  memcpy(f.slot, spec->nodes, f.n * sizeof *f.slot);
  memset(f.alive, 1, f.n);
  for (size_t t = 0; t < nt; t++) f.reader[t] = f.producer[t] = -1;
  for (size_t i = 0; i < f.n; i++) {
    f.anchor[i] = (int)i;
    int r[FUSE_MAX_READS];
    size_t nr = node_reads(&f.slot[i], r);
    for (size_t k = 0; k < nr; k++) {
      f.reads[r[k]]++;
      f.reader[r[k]] = (int)i;
    }
    f.producer[f.slot[i].out] = (int)i;
    if (f.slot[i].sum_out != HKC_NONE) f.producer[f.slot[i].sum_out] = (int)i;
  }
  /* Each step reports its own errors. */
  if ((spec->fusion == HKC_FUSION_GROUPS ? groups_fuse(&f, members) : auto_fuse(&f, members)) != 0) goto done;
  if (rewrite_spec(&f) != 0) goto done;
  free_groups(spec);
  rc = 0;
done:
  if (rc != 0) { /* the spec stays as it was */
    free(spec->fusion_apart);
    spec->fusion_apart = NULL;
  }
  for (size_t i = 0; f.refused && f.slot && i < f.n; i++)
    if (f.refused[i]) free(f.slot[i].fused_names);
  free(f.slot);
  free(f.alive);
  free(f.refused);
  free(f.anchor);
  free(f.reads);
  free(f.reader);
  free(f.producer);
  free(f.dead);
  free(members);
  return rc;
}
