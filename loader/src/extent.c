/* SPDX-License-Identifier: Apache-2.0 */
/*
 * extent.c -- launch extents: how many bytes each launch of a graph may read or write of the
 * tensors its arguments point at, and whether they fit.
 *
 * A kernel of op X takes X's argument layout (compiler/lower/lower.h documents them; hkc's
 * kernels follow them on every target, the GPU variants appending only TMA tensor maps and
 * then scratch and semaphores). Its sizes are arguments too (rows, cols, M/N/K, strides,
 * column offsets), so from a launch's own arguments this file derives, for each tensor
 * argument, the elements the layout lets the kernel reach -- op by op, in the formulas below
 * -- and from the pack's element type (or i32 where the layout says) the bytes. A launch is
 * refused when its arguments do not follow its op's layout, a size is out of range (zero
 * rows, a divisor of 0), a tensor is of another element type, a tensor is smaller than what
 * the launch may touch at the graph's batch, or (format 1.6) the pack's EXTENTS record, which
 * hkc computed from the kernel's key, says otherwise. So a damaged or miscompiled pack fails
 * here, before its code loads, instead of overrunning host or device memory at its first run.
 *
 * What it cannot see: what a kernel compiled in (its head_dim, row alignment, tile sizes, a
 * split count that follows the grid), which the pack does not describe; the EXTENTS record
 * covers those that change an extent, and only as long as the record itself is undamaged. It
 * is a robustness check, not a security boundary: a pack's code runs in the process, and what
 * may run is decided by the signature (hkrt.h, "packs: opening and trust").
 *
 * Each launch is checked in time proportional to its arguments; no allocation.
 */
#include <stdio.h>
#include <string.h>

#include "pack_internal.h"
#include "status_internal.h"

/* A layout is a string of "K:name" tokens, one per argument, separated by spaces. K says what
 * the argument must be: T a tensor of the pack's element type, t the same or a null pointer,
 * J an i32 tensor, j the same or a null pointer, Q an 8-bit tensor (int8 or fp8_e4m3: the kernel's
 * key, which the pack does not describe, says which; both are one byte, so the extents agree), S
 * an f32 tensor, s the same or a null pointer, K a KV cache (the pack's element type, or
 * fp8_e4m3: one byte an element; both caches of a launch alike), I an integer, F a float. */
#define MAX_TAILS 8 /* the most optional tails an op has: gemm's 7 (none, dual, rope, norms ...) */

typedef struct op_layout {
  const char *name;                 /* the op, for messages */
  const char *base;                 /* what every launch of the op takes */
  const char *tails[MAX_TAILS];     /* what the key's flags may append: exactly one follows base
                                       (NULL-terminated; none: only base) */
  const char *quant;                /* gemm: what may follow the tail when the kernel reads 8-bit
                                       B (and B2) itself -- they are then Q, not T (format 1.8) */
} op_layout_t;

static const op_layout_t k_layouts[HK_OP_COUNT_] = {
    [HK_OP_GEMM] = {"gemm", "T:A T:B t:bias t:residual T:C I:M I:N I:K t:mul",
                    {"", "T:B2", "T:gamma F:eps", "T:B2 T:gamma F:eps", "I:seq I:rot_cols I:pos_offset F:theta",
                     "I:seq I:rot_cols I:pos_offset F:theta T:gamma F:eps", "T:gamma t:beta F:eps t:sum"},
                    "S:scale_b s:scale_b2 I:b_rows I:scale_rows I:scale_cols I:block_rows I:block_cols"},
    [HK_OP_ADD] = {"add", "T:a T:b T:out I:n I:na I:nb", {NULL}},
    [HK_OP_MUL] = {"mul", "T:a T:b T:out I:n I:na I:nb", {NULL}},
    [HK_OP_RELU] = {"relu", "T:x T:out I:n", {NULL}},
    [HK_OP_GELU] = {"gelu", "T:x T:out I:n", {NULL}},
    [HK_OP_SILU] = {"silu", "T:x T:out I:n", {NULL}},
    [HK_OP_GELU_TANH] = {"gelu_tanh", "T:x T:out I:n", {NULL}},
    [HK_OP_TANH] = {"tanh", "T:x T:out I:n", {NULL}},
    [HK_OP_LAYERNORM] = {"layernorm", "T:x T:gamma T:beta T:out I:rows I:cols F:eps t:add t:sum", {NULL}},
    [HK_OP_RMSNORM] = {"rmsnorm", "T:x T:gamma T:out I:rows I:cols F:eps t:add t:sum", {NULL}},
    [HK_OP_SOFTMAX] = {"softmax", "T:x T:out I:rows I:cols", {NULL}},
    [HK_OP_ATTENTION] = {"attention",
                         "T:q T:k T:v T:out I:batch I:seq_q I:seq_kv I:heads I:kv_heads I:dh I:ld_q I:ld_kv I:q_col "
                         "I:k_col I:v_col I:causal F:scale",
                         {"", "j:lengths t:mask I:mask_heads"}},
    [HK_OP_ROPE] = {"rope", "T:x T:out I:rows I:seq I:heads I:dh I:pos_offset F:theta I:pass_heads",
                    {"", "J:ctx", "F:factor F:low_freq F:high_freq F:original_max",
                     "J:ctx F:factor F:low_freq F:high_freq F:original_max"}},
    [HK_OP_EWCHAIN] = {"ewchain", "T:out I:n",
                       {"T:in0 I:n0", "T:in0 I:n0 T:in1 I:n1", "T:in0 I:n0 T:in1 I:n1 T:in2 I:n2",
                        "T:in0 I:n0 T:in1 I:n1 T:in2 I:n2 T:in3 I:n3",
                        "T:in0 I:n0 T:in1 I:n1 T:in2 I:n2 T:in3 I:n3 T:in4 I:n4"}},
    [HK_OP_EMBEDDING] = {"embedding", "T:table J:ids t:pos T:out I:tokens I:seq I:vocab I:hidden",
                         {"", "J:ctx I:max_pos"}},
    [HK_OP_KV_APPEND] = {"kv_append",
                         "T:qkv K:k_cache K:v_cache J:ctx J:slot T:out I:rows I:heads I:kv_heads I:dh I:layer I:slots "
                         "I:max_seq",
                         {"", "F:theta", "F:theta F:factor F:low_freq F:high_freq F:original_max"}}, /* rope (1.10) */
    [HK_OP_KV_ATTENTION] = {"kv_attention",
                            "T:q K:k_cache K:v_cache J:ctx J:slot T:out I:rows I:heads I:kv_heads I:dh I:layer "
                            "I:slots I:max_seq I:window F:scale",
                            {"", "I:append", "I:append F:theta", /* a kv_append folded in (1.11) */
                             "I:append F:theta F:factor F:low_freq F:high_freq F:original_max"}},
    [HK_OP_TAKE_ROWS] = {"take_rows", "T:x J:rows T:out I:x_rows I:n_out I:width", {NULL}},
    [HK_OP_ARGMAX] = {"argmax", "T:x J:out I:rows I:cols", {NULL}},
    [HK_OP_SAMPLE] = {"sample", "T:x J:params J:out I:rows I:cols", {NULL}},
    [HK_OP_DEQUANT] = {"dequant", "Q:q S:scale T:out I:rows I:cols I:scale_rows I:scale_cols I:block_rows I:block_cols",
                       {NULL}},
    [HK_OP_ALL_REDUCE] = {"all_reduce", "T:in T:out I:n", {NULL}},
    [HK_OP_ALL_GATHER] = {"all_gather", "T:in T:out I:rows I:cols I:ranks", {NULL}},
};

/* One launch being checked. */
typedef struct launch {
  const hk_pack_view_t *v;
  uint32_t graph, local;              /* graph index, graph-local launch index */
  const hk_node_rec_t *node;
  const hk_arg_rec_t *args;           /* the node's arguments */
  uint32_t n;                         /* those of the op's layout (the variant's extra ones excluded) */
  const op_layout_t *op;
  uint32_t tail;                      /* which of op->tails follows the base (0 without tails) */
  bool quant;                         /* op->quant follows the tail */
  char kinds[HK_MAX_ARGS_PER_NODE];   /* the layout's K per argument (0 past n) */
  const char *names[HK_MAX_ARGS_PER_NODE]; /* and its name ("rows"), names_len[a] bytes */
  int names_len[HK_MAX_ARGS_PER_NODE];
  uint64_t elems[HK_MAX_ARGS_PER_NODE]; /* elements each tensor argument may touch */
} launch_t;

/* "graph 1 (target sm_90, batch 8) launch 3 (node fc1, kernel hk_gemm_f16..., op gemm)": the
 * start of every message about a launch. */
static void describe_launch(const launch_t *L, char *out, size_t size) {
  const hk_pack_view_t *v = L->v;
  const hk_graph_rec_t *g = &v->graphs[L->graph];
  const uint32_t op = v->kernels[L->node->kernel].op; /* < HK_OP_COUNT_: verified */
  snprintf(out, size, "graph %u (target %s, batch %llu) launch %u (node %s, kernel %s, op %s)", L->graph,
           hk_pack_string(v, v->targets[g->target].name), (unsigned long long)g->batch, L->local,
           hk_pack_string(v, L->node->name), hk_pack_string(v, v->kernels[L->node->kernel].name),
           k_layouts[op].name ? k_layouts[op].name : "?");
}

#define LAUNCH_FAIL(L, ...)                                                        \
  do {                                                                             \
    char where_[HK_MAX_NAME_LEN * 4 + 160];                                        \
    describe_launch((L), where_, sizeof where_);                                   \
    hk_error_set_at(HK_STATUS_CORRUPT, __FILE__, __LINE__, __VA_ARGS__);           \
    hk_error_prefix(where_);                                                       \
    return HK_STATUS_CORRUPT;                                                      \
  } while (0)

static const char *kind_label(uint32_t kind) {
  switch (kind) {
  case HK_ARG_TENSOR: return "a tensor";
  case HK_ARG_NULL: return "a null pointer";
  case HK_ARG_I64: return "an integer";
  case HK_ARG_F32: return "a float";
  case HK_ARG_TMAP: return "a tensor map";
  case HK_ARG_SCRATCH: return "scratch";
  case HK_ARG_SEMAPHORE: return "semaphores";
  default: return "?";
  }
}

static const char *slot_label(char k) {
  switch (k) {
  case 'T': return "a tensor";
  case 't': return "a tensor or a null pointer";
  case 'J': return "an i32 tensor";
  case 'j': return "an i32 tensor or a null pointer";
  case 'Q': return "an 8-bit tensor";
  case 'S': return "an f32 tensor";
  case 's': return "an f32 tensor or a null pointer";
  case 'K': return "a KV cache tensor";
  case 'I': return "an integer";
  default: return "a float";
  }
}

static bool slot_accepts(char k, uint32_t kind) {
  switch (k) {
  case 'T':
  case 'J':
  case 'Q':
  case 'S':
  case 'K': return kind == HK_ARG_TENSOR;
  case 't':
  case 'j':
  case 's': return kind == HK_ARG_TENSOR || kind == HK_ARG_NULL;
  case 'I': return kind == HK_ARG_I64;
  default: return kind == HK_ARG_F32;
  }
}

/* Appends layout text's tokens to L's slots from index *at; false when it holds more than the
 * node's arguments or one does not accept its argument. Fills kinds and names either way up to
 * where it stopped; *at ends past the last token. */
static bool layout_take(launch_t *L, const char *text, uint32_t *at) {
  for (const char *p = text; *p;) {
    while (*p == ' ') p++;
    if (!*p) break;
    const char *name = p + 2, *end = strchr(name, ' ');
    if (!end) end = name + strlen(name);
    if (*at >= L->n) return false;
    L->kinds[*at] = p[0];
    L->names[*at] = name;
    L->names_len[*at] = (int)(end - name);
    if (!slot_accepts(p[0], L->args[*at].kind)) return false;
    (*at)++;
    p = end;
  }
  return true;
}

/* Matches L's arguments [0, n) against its op's base, one of its tails and, for a gemm, the
 * quantization arguments or none (the first that fits; no two fit the same arguments: each
 * count or kind differs). With them, B (and a dual's B2) are 8-bit (Q). Errors: CORRUPT naming
 * the first argument that does not fit the base layout, or the count. */
static hk_status_t match_layout(launch_t *L) {
  const op_layout_t *op = L->op;
  for (uint32_t t = 0; t == 0 || (t < MAX_TAILS && op->tails[t]); t++)
    for (int q = 0; q <= (op->quant != NULL); q++) {
      uint32_t at = 0;
      if (layout_take(L, op->base, &at) && layout_take(L, op->tails[t] ? op->tails[t] : "", &at) &&
          layout_take(L, q ? op->quant : "", &at) && at == L->n) {
        L->tail = t;
        L->quant = q;
        if (q) { /* gemm: B, and a dual's B2 (the tail that starts with it) */
          L->kinds[1] = 'Q';
          if (op->tails[t] && strncmp(op->tails[t], "T:B2", 4) == 0) L->kinds[9] = 'Q';
        }
        return HK_OK;
      }
    }
  uint32_t at = 0; /* say where the base layout stops fitting */
  memset(L->kinds, 0, sizeof L->kinds);
  if (!layout_take(L, op->base, &at) && at < L->n)
    LAUNCH_FAIL(L, "argument %u (%.*s) is %s, where the %s argument layout has %s", at, L->names_len[at],
                L->names[at], kind_label(L->args[at].kind), op->name, slot_label(L->kinds[at]));
  LAUNCH_FAIL(L, "%u argument(s) (%u before the variant's tensor maps, scratch and semaphores) do not follow the %s "
              "argument layout (%s, then one of its optional tails)", L->node->arg_count, L->n, op->name, op->base);
}

static int64_t ival(const launch_t *L, uint32_t a) { return (int64_t)L->args[a].value; }

/* Saturating arithmetic on element counts: a result that does not fit is UINT64_MAX, which no
 * tensor holds. */
static uint64_t mul(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}
static uint64_t add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}
static uint64_t min_u(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Integer argument a must be >= lo. Errors: CORRUPT naming it. */
static hk_status_t need(const launch_t *L, uint32_t a, int64_t lo) {
  if (ival(L, a) < lo)
    LAUNCH_FAIL(L, "argument %u (%.*s) is %lld; the %s argument layout needs %s", a, L->names_len[a], L->names[a],
                (long long)ival(L, a), L->op->name, lo ? "at least 1" : "at least 0");
  return HK_OK;
}

/* Sets the elements argument a may touch (kept only for a tensor: a null one touches none). */
static void touch(launch_t *L, uint32_t a, uint64_t elems) {
  if (L->args[a].kind == HK_ARG_TENSOR) L->elems[a] = elems;
}

#define NEED(a, lo) HK_RETURN_IF_ERROR(need(L, (a), (lo)))
#define U(a) ((uint64_t)ival(L, (a))) /* after NEED: >= 0 */

/* The extents of each op, in elements, from its integer arguments (lower.h's semantics; the
 * integers are checked first: a size below 1 would make a kernel divide by zero or index
 * backwards). */
static hk_status_t extents_gemm(launch_t *L) {
  NEED(5, 1); NEED(6, 1); NEED(7, 1);
  const uint64_t m = U(5), n = U(6), k = U(7);
  touch(L, 0, mul(m, k)), touch(L, 1, mul(k, n)), touch(L, 2, n), touch(L, 3, mul(m, n)), touch(L, 4, mul(m, n));
  touch(L, 8, mul(m, n));
  switch (L->tail) {
  case 1: touch(L, 9, mul(k, n)); break;                  /* dual: B2 like B */
  case 2: touch(L, 9, k); break;                          /* folded rmsnorm: gamma [K] */
  case 3: touch(L, 9, mul(k, n)), touch(L, 10, k); break; /* both */
  case 4:
  case 5: /* rope epilogue (then a folded rmsnorm's gamma): columns only, within C */
    NEED(9, 1); NEED(10, 0);
    if (ival(L, 10) > ival(L, 6))
      LAUNCH_FAIL(L, "argument 10 (rot_cols) is %lld, more than the %lld columns of C", (long long)ival(L, 10),
                  (long long)ival(L, 6));
    if (L->tail == 5) touch(L, 13, k);
    break;
  case 6: touch(L, 9, n), touch(L, 10, n), touch(L, 12, mul(m, n)); break; /* norm epilogue */
  default: break;
  }
  if (L->quant) { /* scales [scale_rows, scale_cols] in blocks over B as stored ([b_rows, K * N / b_rows]) */
    const uint32_t q = L->n - 7;
    for (uint32_t a = q + 2; a < L->n; a++) NEED(a, 1);
    const uint64_t rows = U(q + 2), cols = rows == k ? n : k;
    if (rows != k && rows != n)
      LAUNCH_FAIL(L, "argument %u (b_rows) is %llu, which is neither K (%llu) nor N (%llu)", q + 2,
                  (unsigned long long)rows, (unsigned long long)k, (unsigned long long)n);
    if ((rows - 1) / U(q + 5) >= U(q + 3) || (cols - 1) / U(q + 6) >= U(q + 4))
      LAUNCH_FAIL(L, "blocks of %llu x %llu over %llu x %llu elements of B need more scales than the %llu x %llu given",
                  (unsigned long long)U(q + 5), (unsigned long long)U(q + 6), (unsigned long long)rows,
                  (unsigned long long)cols, (unsigned long long)U(q + 3), (unsigned long long)U(q + 4));
    if (L->kinds[9] != 'Q' && L->args[q + 1].kind != HK_ARG_NULL)
      LAUNCH_FAIL(L, "argument %u (scale_b2) is a tensor, but the gemm has no B2", q + 1);
    touch(L, q, mul(U(q + 3), U(q + 4)));
    touch(L, q + 1, mul(U(q + 3), U(q + 4)));
  }
  return HK_OK;
}

static hk_status_t extents_binary(launch_t *L) {
  NEED(3, 1); NEED(4, 1); NEED(5, 1);
  const uint64_t n = U(3);
  touch(L, 0, min_u(U(4), n)), touch(L, 1, min_u(U(5), n)), touch(L, 2, n); /* a[i % na], b[i % nb], i < n */
  return HK_OK;
}

static hk_status_t extents_unary(launch_t *L) {
  NEED(2, 1);
  touch(L, 0, U(2)), touch(L, 1, U(2));
  return HK_OK;
}

/* layernorm, rmsnorm and softmax share their order: x, [gamma, [beta,]] out, rows, cols[, eps,
 * add, sum]; `norm` tensors are gamma and beta. */
static hk_status_t extents_rows(launch_t *L, uint32_t norm) {
  const uint32_t out = 1 + norm, rows = 2 + norm, cols = 3 + norm;
  NEED(rows, 1); NEED(cols, 1);
  const uint64_t rc = mul(U(rows), U(cols));
  touch(L, 0, rc), touch(L, out, rc);
  for (uint32_t a = 1; a <= norm; a++) touch(L, a, U(cols));
  if (norm) touch(L, cols + 2, rc), touch(L, cols + 3, rc); /* add, sum */
  return HK_OK;
}

static hk_status_t extents_attention(launch_t *L) {
  for (uint32_t a = 4; a <= 11; a++) NEED(a, 1); /* batch .. ld_kv */
  for (uint32_t a = 12; a <= 14; a++) NEED(a, 0); /* column offsets */
  const uint64_t batch = U(4), seq_q = U(5), seq_kv = U(6), heads = U(7), kv_heads = U(8), dh = U(9);
  if (heads % kv_heads != 0) /* q head h reads kv head h / (heads / kv_heads) */
    LAUNCH_FAIL(L, "argument 8 (kv_heads) is %llu, which does not divide heads (%llu)", (unsigned long long)kv_heads,
                (unsigned long long)heads);
  /* row r of q starts at r * ld_q; head h reads columns col + h * dh .. + dh */
  touch(L, 0, add(mul(mul(batch, seq_q) - 1, U(10)), add(U(12), mul(heads, dh))));
  touch(L, 1, add(mul(mul(batch, seq_kv) - 1, U(11)), add(U(13), mul(kv_heads, dh))));
  touch(L, 2, add(mul(mul(batch, seq_kv) - 1, U(11)), add(U(14), mul(kv_heads, dh))));
  touch(L, 3, mul(mul(batch, seq_q), mul(heads, dh)));
  if (L->tail == 1) { /* masked: lengths [batch], mask [batch, 1 or heads, seq_q, seq_kv] */
    touch(L, 17, batch);
    if (L->args[18].kind == HK_ARG_TENSOR) {
      if (ival(L, 19) != 1 && ival(L, 19) != (int64_t)heads)
        LAUNCH_FAIL(L, "argument 19 (mask_heads) is %lld; a mask has 1 or heads (%llu) heads", (long long)ival(L, 19),
                    (unsigned long long)heads);
      touch(L, 18, mul(mul(batch, U(19)), mul(seq_q, seq_kv)));
    }
  }
  return HK_OK;
}

static hk_status_t extents_rope(launch_t *L) {
  NEED(2, 1); NEED(3, 1); NEED(4, 1); NEED(5, 1); NEED(8, 0);
  if (ival(L, 5) % 2 != 0) /* element j of a head pairs with j + dh / 2 */
    LAUNCH_FAIL(L, "argument 5 (dh) is %lld, not even", (long long)ival(L, 5));
  const uint64_t x = mul(U(2), mul(add(U(4), U(8)), U(5))); /* rows x (heads + pass_heads) x dh */
  touch(L, 0, x), touch(L, 1, x);
  if (L->tail == 1 || L->tail == 3) touch(L, 9, U(2)); /* ctx [rows] */
  return HK_OK;
}

static hk_status_t extents_ewchain(launch_t *L) {
  NEED(1, 1);
  const uint64_t n = U(1);
  touch(L, 0, n);
  for (uint32_t j = 0; 2 + 2 * j < L->n; j++) { /* in_j[i % n_j], i < n */
    NEED(3 + 2 * j, 1);
    touch(L, 2 + 2 * j, min_u(U(3 + 2 * j), n));
  }
  return HK_OK;
}

static hk_status_t extents_embedding(launch_t *L) {
  for (uint32_t a = 4; a <= 7; a++) NEED(a, 1); /* tokens, seq, vocab, hidden */
  const uint64_t tokens = U(4), seq = U(5), vocab = U(6), hidden = U(7);
  touch(L, 0, mul(vocab, hidden)), touch(L, 1, tokens), touch(L, 3, mul(tokens, hidden));
  if (L->tail == 1) { /* positions from ctx: row clamp(ctx[t] - 1, 0, max_pos - 1) of pos */
    NEED(9, 1);
    if (L->args[2].kind != HK_ARG_TENSOR)
      LAUNCH_FAIL(L, "argument 2 (pos) is a null pointer, but the launch takes ctx, which picks rows of pos");
    touch(L, 2, mul(U(9), hidden)), touch(L, 8, tokens);
  } else { /* row t % seq of pos */
    touch(L, 2, mul(min_u(seq, tokens), hidden));
  }
  return HK_OK;
}

/* kv_append and kv_attention share their first 13 arguments; a kv_attention with a tail has its
 * kv_append folded in (I append = 1, then a rope's numbers). */
static hk_status_t extents_kv(launch_t *L, bool append) {
  for (uint32_t a = 6; a <= 12; a++) NEED(a, a == 10 ? 0 : 1); /* rows .. max_seq; layer >= 0 */
  if (!append) NEED(13, 0);                                    /* window */
  const bool packed = append || L->tail > 0; /* a kv_attention with its kv_append folded in reads q|k|v rows */
  if (!append && L->tail > 0) {
    NEED(15, 1);
    if (U(15) != 1) LAUNCH_FAIL(L, "argument 15 (append) is %llu, not 1", (unsigned long long)U(15));
  }
  const uint64_t rows = U(6), heads = U(7), kv_heads = U(8), dh = U(9);
  if (heads % kv_heads != 0)
    LAUNCH_FAIL(L, "argument 8 (kv_heads) is %llu, which does not divide heads (%llu)", (unsigned long long)kv_heads,
                (unsigned long long)heads);
  if ((append ? L->tail > 0 : L->tail > 1) && dh % 2 != 0) /* a rope: element j of a head pairs with j + dh / 2 */
    LAUNCH_FAIL(L, "argument 9 (dh) is %llu, not even, and the launch rotates its heads", (unsigned long long)dh);
  /* caches [layers, slots, max_seq, kv_heads dh]: the launch reaches layer `layer` */
  const uint64_t cache = mul(mul(add(U(10), 1), U(11)), mul(U(12), mul(kv_heads, dh)));
  touch(L, 0, mul(rows, mul(packed ? add(heads, mul(2, kv_heads)) : heads, dh)));
  touch(L, 1, cache), touch(L, 2, cache), touch(L, 3, rows), touch(L, 4, rows);
  touch(L, 5, mul(rows, mul(heads, dh)));
  return HK_OK;
}

static hk_status_t extents_take_rows(launch_t *L) {
  NEED(3, 1); NEED(4, 1); NEED(5, 1);
  touch(L, 0, mul(U(3), U(5))), touch(L, 1, U(4)), touch(L, 2, mul(U(4), U(5)));
  return HK_OK;
}

static hk_status_t extents_argmax(launch_t *L) {
  NEED(2, 1); NEED(3, 1);
  touch(L, 0, mul(U(2), U(3))), touch(L, 1, U(2));
  return HK_OK;
}

static hk_status_t extents_sample(launch_t *L) {
  NEED(3, 1); NEED(4, 1);
  if (ival(L, 4) > INT32_MAX) /* an index is an int32 */
    LAUNCH_FAIL(L, "argument 4 (cols) is %lld, more than an i32 index reaches", (long long)ival(L, 4));
  touch(L, 0, mul(U(3), U(4))), touch(L, 1, mul(U(3), HK_SAMPLE_PARAMS)), touch(L, 2, U(3));
  return HK_OK;
}
/* element (r, c) of q [rows, cols] is scaled by scale[(r / block_rows) * scale_cols + c / block_cols] */
static hk_status_t extents_dequant(launch_t *L) {
  for (uint32_t a = 3; a <= 8; a++) NEED(a, 1);
  if ((U(3) - 1) / U(7) >= U(5) || (U(4) - 1) / U(8) >= U(6))
    LAUNCH_FAIL(L, "blocks of %llu x %llu over %llu x %llu elements need more scales than the %llu x %llu given",
                (unsigned long long)U(7), (unsigned long long)U(8), (unsigned long long)U(3), (unsigned long long)U(4),
                (unsigned long long)U(5), (unsigned long long)U(6));
  const uint64_t n = mul(U(3), U(4));
  touch(L, 0, n), touch(L, 1, mul(U(5), U(6))), touch(L, 2, n);
  return HK_OK;
}
/* collectives: this rank's part; all_gather's out holds every rank's columns side by side */
static hk_status_t extents_all_reduce(launch_t *L) {
  NEED(2, 1);
  touch(L, 0, U(2)), touch(L, 1, U(2));
  return HK_OK;
}
static hk_status_t extents_all_gather(launch_t *L) {
  NEED(2, 1); NEED(3, 1); NEED(4, 1);
  if (ival(L, 4) > (int64_t)HK_MAX_TENSOR_RANKS)
    LAUNCH_FAIL(L, "argument 4 (ranks) is %lld, more than the format's %u", (long long)ival(L, 4), HK_MAX_TENSOR_RANKS);
  const uint64_t part = mul(U(2), U(3));
  touch(L, 0, part), touch(L, 1, mul(part, U(4)));
  return HK_OK;
}
#undef NEED
#undef U

static hk_status_t extents_of(launch_t *L, uint32_t op) {
  switch ((hk_op_t)op) {
  case HK_OP_GEMM: return extents_gemm(L);
  case HK_OP_ADD:
  case HK_OP_MUL: return extents_binary(L);
  case HK_OP_RELU:
  case HK_OP_GELU:
  case HK_OP_SILU:
  case HK_OP_GELU_TANH:
  case HK_OP_TANH: return extents_unary(L);
  case HK_OP_LAYERNORM: return extents_rows(L, 2);
  case HK_OP_RMSNORM: return extents_rows(L, 1);
  case HK_OP_SOFTMAX: return extents_rows(L, 0);
  case HK_OP_ATTENTION: return extents_attention(L);
  case HK_OP_ROPE: return extents_rope(L);
  case HK_OP_EWCHAIN: return extents_ewchain(L);
  case HK_OP_EMBEDDING: return extents_embedding(L);
  case HK_OP_KV_APPEND: return extents_kv(L, true);
  case HK_OP_KV_ATTENTION: return extents_kv(L, false);
  case HK_OP_TAKE_ROWS: return extents_take_rows(L);
  case HK_OP_ARGMAX: return extents_argmax(L);
  case HK_OP_SAMPLE: return extents_sample(L);
  case HK_OP_DEQUANT: return extents_dequant(L);
  case HK_OP_ALL_REDUCE: return extents_all_reduce(L);
  case HK_OP_ALL_GATHER: return extents_all_gather(L);
  case HK_OP_COUNT_: break;
  }
  return HK_OK; /* excluded by verify */
}

/* Derives L's extents in bytes into out_bytes (0 for arguments that are not tensors), checking
 * each tensor's element type against the layout's. */
static hk_status_t launch_derive(launch_t *L, uint64_t out_bytes[HK_MAX_ARGS_PER_NODE]) {
  const hk_pack_view_t *v = L->v;
  const uint32_t op = v->kernels[L->node->kernel].op;
  L->op = &k_layouts[op];
  /* the variant's extra arguments come last: tensor maps, then scratch and semaphores */
  uint32_t n = L->node->arg_count;
  if (n >= 2 && L->args[n - 2].kind == HK_ARG_SCRATCH && L->args[n - 1].kind == HK_ARG_SEMAPHORE) n -= 2;
  while (n > 0 && L->args[n - 1].kind == HK_ARG_TMAP) n--;
  L->n = n;
  for (uint32_t a = n; a < L->node->arg_count; a++) { /* named by kind in messages */
    L->names[a] = L->args[a].kind == HK_ARG_TMAP ? "tensor map" : L->args[a].kind == HK_ARG_SCRATCH ? "scratch"
                                                                                                     : "semaphores";
    L->names_len[a] = (int)strlen(L->names[a]);
  }
  HK_RETURN_IF_ERROR(match_layout(L));
  HK_RETURN_IF_ERROR(extents_of(L, op));
  for (uint32_t a = 0; a < L->node->arg_count; a++) {
    out_bytes[a] = 0;
    if (a >= L->n || L->args[a].kind != HK_ARG_TENSOR) continue;
    const bool i32 = L->kinds[a] == 'J' || L->kinds[a] == 'j';
    const bool f32 = L->kinds[a] == 'S' || L->kinds[a] == 's';
    const uint32_t want = i32 ? HK_DTYPE_I32 : f32 ? HK_DTYPE_F32 : v->manifest->dtype;
    const hk_tensor_rec_t *t = &v->tensors[L->args[a].value]; /* in range: verified */
    if (L->kinds[a] == 'K' && t->dtype == HK_DTYPE_FP8_E4M3) { /* an FP8 KV cache, both alike */
      const uint32_t other = a == 1 ? 2 : 1;
      if (v->tensors[L->args[other].value].dtype != HK_DTYPE_FP8_E4M3)
        LAUNCH_FAIL(L, "argument %u (%.*s) is tensor %s of dtype fp8_e4m3, argument %u tensor %s of dtype %s: the KV "
                    "caches share a dtype", a, L->names_len[a], L->names[a], hk_pack_string(v, t->name), other,
                    hk_pack_string(v, v->tensors[L->args[other].value].name),
                    hk_dtype_label(v->tensors[L->args[other].value].dtype));
      out_bytes[a] = L->elems[a];
      continue;
    }
    if (L->kinds[a] == 'Q') {
      if (t->dtype != HK_DTYPE_I8 && t->dtype != HK_DTYPE_FP8_E4M3)
        LAUNCH_FAIL(L, "argument %u (%.*s) is tensor %s of dtype %s; the %s argument layout reads int8 or fp8_e4m3 there",
                    a, L->names_len[a], L->names[a], hk_pack_string(v, t->name), hk_dtype_label(t->dtype), L->op->name);
      out_bytes[a] = L->elems[a];
      continue;
    }
    if (t->dtype != want)
      LAUNCH_FAIL(L, "argument %u (%.*s) is tensor %s of dtype %s; the %s argument layout reads %s there%s", a,
                  L->names_len[a], L->names[a], hk_pack_string(v, t->name), hk_dtype_label(t->dtype), L->op->name,
                  hk_dtype_label(want), i32 || f32 ? "" : " (the pack's element type)");
    out_bytes[a] = mul(L->elems[a], hk_dtype_bytes(want));
  }
  return HK_OK;
}

static void launch_init(launch_t *L, const hk_pack_view_t *v, uint32_t graph, uint32_t local) {
  memset(L, 0, sizeof *L);
  L->v = v;
  L->graph = graph;
  L->local = local;
  L->node = &v->nodes[v->graphs[graph].node_first + local];
  L->args = &v->args[L->node->arg_first];
}

hk_status_t hk_launch_extents(const hk_pack_view_t *v, uint32_t graph, uint32_t local,
                              uint64_t out_bytes[HK_MAX_ARGS_PER_NODE]) {
  launch_t L;
  launch_init(&L, v, graph, local);
  return launch_derive(&L, out_bytes);
}

hk_status_t hk_graph_check_extents(const hk_pack_view_t *v, uint32_t graph) {
  const hk_graph_rec_t *g = &v->graphs[graph];
  for (uint32_t j = 0; j < g->node_count; j++) {
    launch_t L;
    uint64_t bytes[HK_MAX_ARGS_PER_NODE];
    launch_init(&L, v, graph, j);
    HK_RETURN_IF_ERROR(launch_derive(&L, bytes));
    for (uint32_t a = 0; a < L.node->arg_count; a++) {
      const uint64_t recorded = v->extents ? v->extents[L.node->arg_first + a] : bytes[a];
      if (recorded != bytes[a]) /* verify: 0 for every argument that is not a tensor */
        LAUNCH_FAIL(&L, "argument %u (%.*s): the pack's EXTENTS record says %llu bytes, the launch's arguments give "
                    "%llu (the record and the arguments disagree)", a, L.names_len[a], L.names[a],
                    (unsigned long long)recorded, (unsigned long long)bytes[a]);
      if (L.args[a].kind != HK_ARG_TENSOR) continue;
      const hk_tensor_rec_t *t = &v->tensors[L.args[a].value];
      uint64_t size = 0;
      (void)hk_tensor_shape(t, g->batch, NULL, &size); /* true at every bucket: verified */
      if (bytes[a] > size)
        LAUNCH_FAIL(&L, "argument %u (%.*s) may touch %llu bytes of tensor %s, which has %llu bytes at batch %llu", a,
                    L.names_len[a], L.names[a], (unsigned long long)bytes[a], hk_pack_string(v, t->name),
                    (unsigned long long)size, (unsigned long long)g->batch);
    }
  }
  return HK_OK;
}
