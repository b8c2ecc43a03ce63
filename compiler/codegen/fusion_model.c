/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fusion_model.c -- the fusion planner's clock: the estimated time of one launch of a node
 * on a target, from the cost model's bytes and FLOPs (lower/cost.c) and the target
 * table's figures (targets.c). `auto` fusion (frontend/fusion.c) asks it whether one fused
 * launch beats the launches it replaces, per target and batch bucket.
 *
 *   t = launch + max(bytes / BW, matrix FLOPs / matrix rate, issue / lane rate) + epilogue
 *
 * launch    a node of a captured graph: ~1.2 us of launch plus ~1 us of dependent start
 *           on the H200 (docs/BENCHMARKS.md "Launch overhead"); taken for every GPU.
 * BW        85% of the datasheet HBM bandwidth (what the row kernels reach on the H200).
 * matrix    70% of the datasheet dense f16/bf16 rate (the GEMMs' large-shape figure).
 * issue     per-element instruction counts of the element-wise and row work (below, the
 *           counts of templates/gpu's 16-bit code paths), at the lane rate: the FP32
 *           lane-instruction rate, derived from the matrix rate by the ratio of the
 *           architecture family (lane_rate).
 * epilogue  a GEMM's per-element work after its main loop (store, bias, activation,
 *           multiplier, residual) does not overlap the matrix work and runs at the GEMM's
 *           occupancy: EPILOGUE_SHARE of the lane rate. Measured on the H200: bert's ffn
 *           up at batch 128 (16384 x 3072) takes ~57 us longer with bias and gelu in its
 *           epilogue (docs/BENCHMARKS.md "GEMM"; the degree-9 gelu of then), and a
 *           gelu kernel of its own costs about as much (2026-12-02: whole graphs within 2%
 *           either way at batch 32 and 128, the fused form 3-5 us faster at 1 and 8).
 *
 * It ranks forms of the same work; it is not a predictor of absolute times (hkc run
 * --profile measures those). The host target has nominal figures (a few cores).
 */
#include <math.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"

#define LAUNCH_S 2.0e-6
#define BW_SHARE 0.85
#define MATRIX_SHARE 0.70
#define EPILOGUE_SHARE 0.66
/* A folded rmsnorm (norm_a): lane-instructions per A element per column tile of NORM_A_TILE
 * (unpack, square-accumulate, gamma, pack, the 16-byte loads and stores shared), not
 * overlapped with the MMAs. Measured on the H200 (docs/BENCHMARKS.md "Tuning"): Llama's
 * dual SwiGLU gemm with the ffn norm folded 3782 us against 2533 us unfolded at 8192 x
 * 14336 x 4096 (this term: ~1.1 ms), the q|k|v projection 788 against 558 us. */
#define NORM_A_INSTR 6.0
#define NORM_A_TILE 128
/* A layernorm epilogue (norm_c): gemm_tma's default tile for BERT's rows (cooperative 128
 * rows, bn 192), one block each, no split of K, one cluster per row tile (variant_gemm_nv.c):
 * the blocks run in waves of LN_RESIDENT of the SMs (the GPCs hold whole clusters only: 30
 * clusters of 4 = 120 of the H200's 132 SMs, ncu), each tile's main loop at the GEMMs' matrix
 * share of one SM plus LN_TILE_S that nothing overlaps (pipeline fill, the epilogue, the
 * read-back, the cluster barrier, the statistics). Fitted on the H200 (session 12, call 3):
 * bert's out_proj + ln1 12.5 / 24.6 / 85.2 us and ffn_down + ln2 22.7 / 47.1 / 170.4 us at
 * batch 1 / 32 / 128, against 12.9 / 22.8 / 64.0 and 15.1 / 39.3 / 137.4 us apart. */
#define LN_TILE_M 128.0
#define LN_TILE_N 192.0
#define LN_RESIDENT 0.9
#define LN_TILE_S 4.0e-6

/* Host: nominal figures of a few cores (bytes/s, FLOP/s, lane-instructions/s). */
#define HOST_BW 20.0e9
#define HOST_MATRIX 2.0e11
#define HOST_LANES 5.0e10
#define HOST_LAUNCH_S 2.0e-6

/* Lane-instructions per element (16-bit data: load and convert, store count in BASE). */
#define INSTR_BASE 3   /* load, convert, store of one element */
#define INSTR_OPERAND 2 /* one more operand: load and convert */
static double act_instr(hk_act_t act) {
  switch (act) {
  case HK_ACT_RELU: return 1;
  case HK_ACT_GELU: return 18; /* common.h hk_act_gelu16: ~16, 2 of them MUFU (rcp, ex2) */
  case HK_ACT_GELU_TANH: return 14;
  case HK_ACT_SILU: return 8;
  default: return 0;
  }
}

/* One ewchain step letter (fusion.c step_letter) or element-wise op. */
static double step_instr(char letter) {
  switch (letter) {
  case 'a':
  case 'm': return 1 + INSTR_OPERAND;
  case 'r': return act_instr(HK_ACT_RELU);
  case 'g': return act_instr(HK_ACT_GELU);
  case 't': return act_instr(HK_ACT_GELU_TANH);
  case 's': return act_instr(HK_ACT_SILU);
  default: return 1;
  }
}

static double op_instr(hk_op_t op) {
  switch (op) {
  case HK_OP_ADD: return step_instr('a');
  case HK_OP_MUL: return step_instr('m');
  case HK_OP_RELU: return step_instr('r');
  case HK_OP_GELU: return step_instr('g');
  case HK_OP_GELU_TANH: return step_instr('t');
  case HK_OP_SILU: return step_instr('s');
  case HK_OP_TANH: return 12;
  case HK_OP_LAYERNORM: return 12; /* two reductions, normalise, gamma and beta */
  case HK_OP_RMSNORM: return 8;
  case HK_OP_SOFTMAX: return 10;
  case HK_OP_ROPE: return 8; /* two loads of the pair, the angle's sin/cos, two FMAs */
  case HK_OP_KV_APPEND:
  case HK_OP_TAKE_ROWS: return 1; /* copies (an index to read) */
  default: return 2;
  }
}

/* FP32 lane-instructions per second. NVIDIA: the dense f16 tensor rate is 16x the FP32
 * FLOP rate (H100/H200 989 vs 67 TFLOP/s, A100 312 vs 19.5) and an FMA is 2 FLOPs: /32;
 * CDNA: 8x (MI300X 1307 vs 163, MI250X 383 vs 48): /16; without matrix cores the table's
 * rate is packed FP16, 4 FLOPs per lane-instruction: /4. */
static double lane_rate(const hkc_gpu_arch_t *arch) {
  const double m = arch->matrix_tflops_f16 * 1e12;
  switch (arch->matrix) {
  case HKC_MATRIX_WGMMA:
  case HKC_MATRIX_MMA_SYNC: return m / 32.0;
  case HKC_MATRIX_MFMA: return m / 16.0;
  default: return m / 4.0;
  }
}

static double out_elems(const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch) {
  if (nd->out < 0) return 0.0;
  const int64_t n = hkc_tensor_elems(&spec->tensors[nd->out], batch);
  return n > 0 ? (double)n : 0.0;
}

/* Per-element work of a node that is not matrix work: lane-instructions per output element. */
static double node_instr(const hkc_node_t *nd) {
  if (nd->op == HK_OP_EWCHAIN) {
    double sum = INSTR_BASE;
    for (const char *p = nd->program; *p; p++)
      if (*p >= 'a' && *p <= 'z') sum += step_instr(*p);
    return sum;
  }
  double per = INSTR_BASE + op_instr(nd->op);
  if (nd->op == HK_OP_KV_APPEND && nd->rope) per += op_instr(HK_OP_ROPE); /* a folded rope */
  if ((nd->op == HK_OP_LAYERNORM || nd->op == HK_OP_RMSNORM) && nd->add_in != HKC_NONE)
    per += 1 + INSTR_OPERAND + (nd->sum_out != HKC_NONE ? 1 : 0);
  return per;
}

/* A GEMM's per-element epilogue: store, bias, activation, multiplier, residual; a dual
 * gemm's second product is multiplied in; a rope turns pairs (the rope op's count less its
 * load and store). */
static double gemm_epilogue_instr(const hkc_node_t *nd) {
  double per = INSTR_BASE + act_instr(nd->act);
  if (nd->bias != HKC_NONE) per += 1;
  if (nd->mul != HKC_NONE) per += 1 + INSTR_OPERAND;
  if (nd->residual != HKC_NONE) per += 1 + INSTR_OPERAND;
  if (nd->n_in == 3) per += 1;
  if (nd->rope) per += op_instr(HK_OP_ROPE);
  if (nd->norm_a) per += 1; /* the row's scale (A's transform: hkc_launch_seconds) */
  if (nd->norm_c) /* the tile read back, normalised, stored */
    per += INSTR_BASE + op_instr(nd->norm_c == HKC_NORM_C_RMSNORM ? HK_OP_RMSNORM : HK_OP_LAYERNORM);
  return per;
}

/* See codegen.h. */
double hkc_launch_seconds(const hkc_gpu_arch_t *arch, const hkc_spec_t *spec, const hkc_node_t *nd, int64_t batch) {
  hkc_cost_t c;
  hkc_node_cost_of(spec, nd, batch, &c);
  const double bw = arch ? arch->hbm_gbps * 1e9 * BW_SHARE : HOST_BW;
  const double matrix = arch ? arch->matrix_tflops_f16 * 1e12 * MATRIX_SHARE : HOST_MATRIX;
  const double lanes = arch ? lane_rate(arch) : HOST_LANES;
  const double launch = arch ? LAUNCH_S : HOST_LAUNCH_S;
  const double elems = out_elems(spec, nd, batch);
  double body = (double)c.bytes / bw, epilogue = 0.0;
  if (nd->op == HK_OP_GEMM || nd->op == HK_OP_ATTENTION) {
    const double mm = (double)c.flops / matrix;
    if (mm > body) body = mm;
    if (nd->op == HK_OP_GEMM) /* the host's epilogue runs on every thread */
      epilogue = elems * gemm_epilogue_instr(nd) / (lanes * (arch ? EPILOGUE_SHARE : 1.0));
    if (nd->op == HK_OP_GEMM && nd->norm_a && nd->out >= 0) { /* every column tile transforms all of A again */
      const hkc_tensor_t *o = &spec->tensors[nd->out];
      const double a = (double)hkc_tensor_elems(&spec->tensors[nd->in[0]], batch);
      const double n = o->rank ? (double)hkc_dim_value(o->dims[o->rank - 1], batch) : 1.0;
      const double tiles = n > NORM_A_TILE ? (n + NORM_A_TILE - 1) / NORM_A_TILE : 1.0;
      epilogue += a * tiles * NORM_A_INSTR / (lanes * (arch ? EPILOGUE_SHARE : 1.0));
    }
    if (nd->op == HK_OP_GEMM && nd->norm_c && arch && nd->out >= 0 && arch->compute_units > 0) {
      /* whole rows per cluster, a tile per block: waves of tiles (LN_TILE_*, above) */
      const hkc_tensor_t *o = &spec->tensors[nd->out];
      const double n = o->rank ? (double)hkc_dim_value(o->dims[o->rank - 1], batch) : 1.0;
      const double m = n > 0 ? elems / n : 0.0, k = m > 0 ? (double)c.flops / (2.0 * m * n) : 0.0;
      const double tiles = ceil(m / LN_TILE_M) * ceil(n / LN_TILE_N);
      const double waves = ceil(tiles / (arch->compute_units * LN_RESIDENT));
      const double tile_s = 2.0 * LN_TILE_M * LN_TILE_N * k / (matrix / arch->compute_units) + LN_TILE_S;
      if (waves * tile_s > body) body = waves * tile_s;
    }
  } else {
    /* kv_attention, argmax and sample work per element read (cost.c's FLOPs: a key's FMAs, a
     * compare, a logit's passes), the others per element written */
    const int per_read = nd->op == HK_OP_KV_ATTENTION || nd->op == HK_OP_ARGMAX || nd->op == HK_OP_SAMPLE;
    const double issue = per_read ? (double)c.flops * (nd->op == HK_OP_KV_ATTENTION ? 0.5 : 1.0) / lanes
                                  : elems * node_instr(nd) / lanes;
    if (issue > body) body = issue;
  }
  return launch + body + epilogue;
}

static double model_seconds(const hkc_fuse_model_t *m, size_t t, const hkc_spec_t *spec, const hkc_node_t *node,
                            int64_t batch) {
  return hkc_launch_seconds((const hkc_gpu_arch_t *)m->targets[t], spec, node, batch);
}

/* A candidate's key as lowering makes it (dtype, alignment, bias, head_dim, ...), then the
 * target's kernels (the host's clock stands for itself only when it is alone; it has every
 * form). */
static int model_kernel_ok(const hkc_fuse_model_t *m, size_t t, const hkc_spec_t *spec, const hkc_node_t *gemm) {
  hkc_kernel_key_t key;
  hkc_arg_t args[HKC_MAX_ARGS];
  if (spec->n_batch < 1 || hkc_lower_node_of(spec, gemm, spec->batch_sizes[0], &key, args) < 0) return 0;
  return hkc_gpu_fused_gemm_ok((const hkc_gpu_arch_t *)m->targets[t], (const hkc_kernel_options_t *)m->options, &key);
}

/* The rows of A up to which gemm node nd can read its 8-bit B itself on every target (lower.h,
 * hkc_gemm_folds_dequant): the host's GEMM at every M, gemm_skinny on sm_90a at M <= 8; 0 when
 * nd reads no dequant node's copy or a target has no such kernel for its key. */
static int64_t quant_fold_rows(const hkc_spec_t *spec, hkc_node_t *nd, const hkc_gpu_arch_t *const *archs, size_t n,
                               const hkc_kernel_options_t *options) {
  hkc_kernel_key_t key;
  hkc_arg_t args[HKC_MAX_ARGS];
  int64_t rows = INT64_MAX;
  nd->dequant_fold_rows = INT64_MAX; /* the folded key, as lowering makes it */
  if (spec->n_batch < 1 || !hkc_gemm_folds_dequant(spec, nd, spec->batch_sizes[0]) ||
      hkc_lower_node_of(spec, nd, spec->batch_sizes[0], &key, args) < 0 || !hkc_gemm_quant_b(&key))
    rows = 0;
  for (size_t i = 0; i < n && rows > 0; i++)
    if (archs[i]) rows = hkc_gpu_fused_gemm_ok(archs[i], options, &key) ? HKC_GEMM_FEW_ROWS : 0;
  nd->dequant_fold_rows = 0;
  return rows;
}

/* The rows up to which kv_attention node nd can do the kv_append before it itself on every target
 * (lower.h, hkc_kv_folded_append): one -- a launch of one row has no other row whose slot it could
 * read while that row appends (a prefill's rows share theirs) -- where the folded key has a kernel
 * on every target (the host's; kv_attention_warp on NVIDIA sm_80+, the portable kernel on the
 * other GPUs); 0 when nd reads no such append, at one row in no bucket,
 * under kv_fold=off, or under auto in a build with a GPU target: the H100 ran the first form of
 * the folded kernel 37 us slower a batch-1 Llama-3.2-1B step than the two launches (2026-12-07,
 * docs/BENCHMARKS.md, "Generation"), and the form of now has not run on a GPU yet. */
static int64_t append_fold_rows(const hkc_spec_t *spec, hkc_node_t *nd, const hkc_gpu_arch_t *const *archs, size_t n,
                                const hkc_kernel_options_t *options) {
  const hkc_switch_t fold = options ? options->kv_fold : HKC_SWITCH_AUTO;
  if (nd->op != HK_OP_KV_ATTENTION || spec->n_batch < 1 || fold == HKC_SWITCH_OFF) return 0;
  for (size_t i = 0; fold == HKC_SWITCH_AUTO && i < n; i++)
    if (archs[i]) return 0;
  hkc_kernel_key_t key;
  hkc_arg_t args[HKC_MAX_ARGS];
  const int64_t b0 = spec->batch_sizes[0]; /* the smallest bucket */
  nd->append_fold_rows = 1;
  int64_t rows = hkc_kv_folded_append(spec, nd, b0) && hkc_lower_node_of(spec, nd, b0, &key, args) >= 0 && key.append;
  for (size_t i = 0; i < n && rows > 0; i++)
    if (archs[i] && !hkc_variant_for_options(archs[i], options, &key)) rows = 0;
  nd->append_fold_rows = 0;
  return rows;
}

/* See codegen.h. */
int hkc_fuse_for_targets(hkc_spec_t *spec, int mode, const hkc_gpu_arch_t *const *archs, size_t n,
                         const hkc_kernel_options_t *options, FILE *report) {
  const hkc_gpu_arch_t *clock[HK_MAX_TARGETS];
  const char *names[HK_MAX_TARGETS];
  size_t n_clock = 0, gpus = 0;
  for (size_t i = 0; i < n; i++) {
    if (!hkc_gpu_dual_gemm_ok(archs[i])) spec->fusion_no_dual = 1;
    gpus += archs[i] != NULL;
  }
  for (size_t i = 0; i < n && n_clock < HK_MAX_TARGETS; i++) {
    if (gpus && !archs[i]) continue; /* the host is the CPU reference: GPUs decide when there are any */
    clock[n_clock] = archs[i];
    names[n_clock++] = archs[i] ? archs[i]->name : hkc_host_target_name();
  }
  /* gemm_norm=on, gemm_ln=on: those forms wherever a kernel has them, whatever the clock says */
  spec->fusion_norm_always = options && options->gemm_norm == HKC_SWITCH_ON;
  spec->fusion_ln_always = options && options->gemm_ln == HKC_SWITCH_ON;
  hkc_fuse_model_t model;
  hkc_fuse_model_init(&model, clock, names, n_clock, report);
  model.kernel_ok = model_kernel_ok;
  model.options = options;
  if (hkc_fuse_planned(spec, mode, &model) != 0) return -1;
  const hkc_switch_t quant = options ? options->gemm_quant : HKC_SWITCH_AUTO;
  for (size_t j = 0; j < spec->n_nodes; j++)
    spec->nodes[j].dequant_fold_rows =
        quant == HKC_SWITCH_ON || (quant == HKC_SWITCH_AUTO && !gpus) ? quant_fold_rows(spec, &spec->nodes[j], archs, n, options)
                                                                      : 0;
  for (size_t j = 0; j < spec->n_nodes; j++)
    spec->nodes[j].append_fold_rows = append_fold_rows(spec, &spec->nodes[j], archs, n, options);
  /* gemm_fp8=on: the gemms of fp8_e4m3 weights with a scale per output channel or tensor
   * multiply in FP8 (their A quantized per row), at every batch size; only the host has such a
   * kernel yet */
  const hkc_switch_t fp8 = options ? options->gemm_fp8 : HKC_SWITCH_AUTO;
  for (size_t j = 0; fp8 == HKC_SWITCH_ON && j < spec->n_nodes; j++) {
    hkc_node_t *nd = &spec->nodes[j];
    nd->fp8_act = 0;
    if (!hkc_gemm_fp8_eligible(spec, nd)) continue;
    for (size_t i = 0; i < n; i++)
      if (archs[i]) {
        hkc_error(nd->loc, "node '%s': gemm_fp8=on: target %s has no FP8 gemm kernel yet (the host has one); build "
                  "for the host alone, or leave gemm_fp8 off (8-bit weights then multiply in the spec's dtype)",
                  nd->name ? nd->name : "?", archs[i]->name);
        return -1;
      }
    nd->fp8_act = 1;
    nd->dequant_fold_rows = INT64_MAX;
  }
  return 0;
}

/* A folded rmsnorm's measured range (hkc_fuse_model_t.norm_fold_rows). On sm_90a the H200 ran
 * Llama-3.2-1B's decode step (2026-12-07, each launch alone) with the norms folded into the
 * one-row gemm_skinny launches 4 us faster per pair than apart, but folded into the tensor-core
 * gemms of 8 rows 4-6 us slower (q|k|v 26.7 us against 5.3 + 17.7; the SwiGLU pair 34.7 against
 * 5.5 + 23.4): up to gemm_skinny's rows (none with gemm_skinny=off). AMD CDNA (wave64) folds
 * by the same rule into gemm_skinny_amd (not measured: the launch it saves is the reason; the
 * MFMA kernels have no folded norm, so never beyond the skinny rows). The host folds wherever its
 * clock says; other GPUs: nowhere. */
static int64_t model_norm_fold_rows(const hkc_fuse_model_t *m, size_t t) {
  const hkc_gpu_arch_t *arch = (const hkc_gpu_arch_t *)m->targets[t];
  if (!arch) return INT64_MAX;
  const hkc_kernel_options_t *o = (const hkc_kernel_options_t *)m->options;
  const int amd_skinny = arch->kind == HK_TARGET_HIP && arch->matrix == HKC_MATRIX_MFMA &&
                         (arch->wave_size == 0 || arch->wave_size == 64);
  if ((arch->matrix != HKC_MATRIX_WGMMA && !amd_skinny) || (o && o->gemm_skinny == HKC_SWITCH_OFF)) return 0;
  return o && o->gemm_skinny == HKC_SWITCH_ON ? HKC_GEMM_FEW_ROWS : HKC_GEMM_SKINNY_AUTO_ROWS;
}

/* AMD CDNA: gemm_skinny_amd alone folds a norm, at the few rows it takes (hkc_fuse_model_t). */
static int model_norm_fold_limited(const hkc_fuse_model_t *m, size_t t) {
  const hkc_gpu_arch_t *arch = (const hkc_gpu_arch_t *)m->targets[t];
  return arch && arch->kind == HK_TARGET_HIP;
}

void hkc_fuse_model_init(hkc_fuse_model_t *model, const hkc_gpu_arch_t *const *archs, const char *const *names,
                         size_t n, FILE *report) {
  memset(model, 0, sizeof *model);
  model->seconds = model_seconds;
  model->norm_fold_rows = model_norm_fold_rows;
  model->norm_fold_limited = model_norm_fold_limited;
  model->targets = (const void *const *)archs;
  model->names = names;
  model->n_targets = n;
  model->report = report;
}
