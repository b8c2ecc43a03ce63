/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/codegen/variants/variant.h -- the variant registry: every kernel a key can become,
 * on every target, in order of preference.
 *
 * A variant serves some kernel keys on some targets (e.g. a wgmma GEMM for f16/bf16 with
 * align 8 on sm_90a). A GPU variant names its template and the tile-library headers that go
 * before it, writes its own macros (tile sizes, threads: what the tuner will choose), and
 * computes its launch (and, optionally, extra launch arguments such as TMA tensor maps, and
 * whether its launches may be programmatic dependents: pdl).
 * hkc_variant_for() returns the first variant in the registry
 * (registry.c) that serves the target and accepts the key. Each target's part of the
 * registry ends with its portable entries, which accept every valid key of their ops: the
 * simple GPU kernels (variant_simple.c, templates/gpu/<op>.hip, all named "simple") and the
 * host kernels (variant_host.c: "host_gemm" with its tuning space, "host" for the other
 * ops; their source is codegen_host.c's one translation unit). So every valid key resolves
 * to a variant on every target. A variant must be correct for every shape its applies()
 * accepts (tails masked).
 */
#ifndef HKC_VARIANT_H
#define HKC_VARIANT_H

#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"

typedef struct hkc_variant {
  const char *name;                 /* shown in the kernel's params: "gemm_wgmma" */
  const char *template_path;        /* "gpu/gemm_wgmma.hip"; the host entries' is informative (may be NULL) */
  int host;                         /* 1: serves the host target (arch NULL in every hook); 0: GPU targets */
  int portable;                     /* 1: a portable kernel ending its target's part of the registry (the
                                       simple GPU kernels, the host kernels): no "variant" comment in
                                       its source, always allowed by the kernel options */
  const char *const *includes;      /* templates emitted before it (tile library), NULL-terminated; may be NULL */
  /* Whether this variant computes `key` on `arch` (all shapes the key allows). Called only
   * for a target the variant serves (`host`). */
  int (*applies)(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key);
  /* GPU variants: appends the variant's "#define ...\n" lines (must include HK_THREADS) to out. */
  void (*defines)(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size);
  /* GPU variants: grid, block and dynamic shared memory bytes for these args (the kernel ABI's). */
  void (*launch)(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                 uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared);
  /* GPU variants, optional (NULL: the kernel takes the op ABI's arguments only): appends the
   * kernel's extra arguments after the op ABI's args[0, n_args) -- e.g. TMA tensor maps
   * (hkc_variant_arg_tmap) of the tensors args[HKC_GEMM_ARG_A].i and args[HKC_GEMM_ARG_B].i,
   * which the kernel declares as `const __grid_constant__ CUtensorMap` parameters after the
   * ABI's, in the same order -- and returns the new count, n_args <= count <= max_args.
   * Called once per launch (codegen.h's hkc_gpu_launch_args), after launch() and with the
   * same key (tuning included), so the boxes can follow the tile configuration. The pack
   * writer and the loader check tensor maps against the format's rules (FORMAT.md, ARGS). */
  uint32_t (*launch_args)(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_arg_t *args, uint32_t n_args,
                          uint32_t max_args);
  /* GPU variants, optional (NULL: never): the workspace one launch of key with these args (the
   * op ABI's) needs besides its tensors (lower.h, hkc_node_workspace_t: scratch_bytes and
   * counters, both >= 1) -- 1 when the kernel takes it, as its last two parameters after the
   * op ABI's and launch_args' (a pointer to its scratch bytes, a pointer to its u32
   * counters, which it finds at zero and leaves at zero), 0 when it takes none (out
   * untouched). Whether it takes them depends on the key's configuration only (the
   * kernel's parameters do), the amounts on the launch's sizes too; the memory plan places
   * them (plan.c) and the build appends the two arguments (hkc_plan_workspace_args). */
  int (*workspace)(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                   hkc_node_workspace_t *out);
  /* CUDA variants: 1 when the kernel executes griddepcontrol.wait before it reads or writes
   * anything an earlier launch touches, in every block (a launch must not finish before its
   * predecessors: the planner's dependencies leave out implied edges), and may execute
   * griddepcontrol.launch_dependents: its launches are marked HK_NODE_FLAG_PDL (programmatic
   * dependent launch, FORMAT.md), so libhkrt may start it while the kernels it depends on are
   * finishing. Before the wait the kernel may only read what no launch writes (params, e.g.
   * weights) and its own arguments, and write nothing; a wrong 1 is a data race. 0 (the
   * default): launched the ordinary way.
   * codegen.h's hkc_gpu_launch_pdl reads it (0 on other vendors); `hkc build --no-pdl`
   * ignores it. */
  int pdl;
  /* 1: its gemm kernel applies a rope epilogue (key.rope, lower.h). Only such variants serve a
   * rope key (hkc_variant_serves); codegen.h's hkc_gpu_fused_gemm_ok asks for one. */
  int rope;
  /* 1: its gemm kernel folds an rmsnorm of A (key.norm_a); only such variants serve those keys. */
  int norm_a;
  /* 1: its gemm kernel normalises C's rows by a layernorm (key.norm_c); only such variants serve those keys. */
  int norm_c;
  /* 1: its gemm kernel reads 8-bit B (and B2) and their scales itself (lower.h, hkc_gemm_quant_b);
   * only such variants serve those keys. */
  int quant_b;
  /* Tuning (codegen.h's hkc_tile_cfg_t; tune/ chooses; both NULL for a variant without
   * parameters). tune_space writes the legal configurations for key on arch (shared memory /
   * LDS, threads, registers within the arch's limits; this variant's default first) and
   * returns how many (<= max).
   * tune_parse fills the configuration that params names ("" = the default); 0, or -1 when
   * params is not a canonical, legal configuration here. defines() and launch() use
   * key->tune when key->variant names the variant, else the defaults. */
  int (*tune_space)(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max);
  int (*tune_parse)(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params, hkc_tile_cfg_t *out);
  /* The parameter names of tune_parse's canonical string, in order (n_params of them), and
   * its legality rules in words (kernel options quote them when a forced one is refused).
   * n_required_params (0: all): the first ones, which every canonical string names; the
   * later ones are optional, named only when not at their default (a parameter added to a
   * variant keeps the strings, kernel names and tuning entries of the configurations without
   * it; the kernel option's `fill` gives the default). */
  const char *const *params;
  int n_params;
  int n_required_params;
  const char *rules;
} hkc_variant_t;

/* The variant serving key on arch (NULL: the host target): the one key->variant names when
 * it applies, else the registry's first that applies. NULL only for an invalid key (an op,
 * dtype or activation the kernel ABI does not define). */
const hkc_variant_t *hkc_variant_for(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key);
/* Same under kernel options (codegen.h; NULL = the defaults): for an untuned key, the
 * registry's first variant that applies and that the options allow. */
const hkc_variant_t *hkc_variant_for_options(const hkc_gpu_arch_t *arch, const hkc_kernel_options_t *o,
                                             const hkc_kernel_key_t *key);
/* Whether the options let the registry pick v for key on arch (simple_kernels, gemm_tma,
 * gemm_ws, attn_wgmma, gemm_mfma_pp, attn_mfma_pp). The defaults allow everything except attention_wgmma at
 * head_dim 64; gemm_tma=on leaves no other GEMM variant where gemm_tma serves the key, and
 * gemm_mfma_pp=on none but gemm_mfma_pp (attn_mfma_pp=on: attention_mfma_pp); portable entries are always
 * allowed. */
int hkc_kernel_options_allow(const hkc_kernel_options_t *o, const hkc_gpu_arch_t *arch, const hkc_variant_t *v,
                             const hkc_kernel_key_t *key);
/* Whether the options let the model or the tuner choose cfg (gemm_split): 0 for a split-K
 * configuration through the launch workspace (split_global) or a stream-K one (stream_k > 0)
 * unless gemm_split=on (o NULL: the defaults, which do not); 1 for every other. A forced
 * configuration or a tuning database entry is not asked. */
int hkc_kernel_options_allow_cfg(const hkc_kernel_options_t *o, const hkc_tile_cfg_t *cfg);
/* The configuration the options force on variant v for key on arch (target names it in
 * messages): 1 and *out (v's tune_parse of it: canonical, is_default relative to v's
 * defaults), 0 when nothing is forced, -1 when the forced configuration is not legal here
 * (reported through hkc_error: the option, its value, kernel, target and v's rules). */
int hkc_kernel_options_force(const hkc_kernel_options_t *o, const char *target, const hkc_gpu_arch_t *arch,
                             const hkc_variant_t *v, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out);
/* The registry, NULL-terminated, in order of preference (tune.c enumerates it): the GPU
 * entries, then the host's. */
const hkc_variant_t *const *hkc_variant_list(void);
/* The registry's first entry named `name` (a specialised variant's name is its own; "simple"
 * names one entry per template); NULL when none is. */
const hkc_variant_t *hkc_variant_named(const char *name);
/* Whether v serves the target of arch (NULL: the host) and accepts key there. */
static inline int hkc_variant_serves(const hkc_variant_t *v, const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return (arch ? !v->host : v->host) && (!key->rope || v->rope) && (!key->norm_a || v->norm_a) &&
         (!key->norm_c || v->norm_c) && (!hkc_gemm_quant_b(key) || v->quant_b) && v->applies(arch, key);
}

/* Helpers for variants. */
static inline int64_t hkc_variant_arg_i64(const hkc_arg_t *args, uint32_t n_args, uint32_t i) {
  return i < n_args && args[i].kind == HK_ARG_I64 ? args[i].i : 0;
}
static inline int64_t hkc_variant_ceil_div(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }
/* Elements per 16-byte vector where key's rows are whole vectors at 16-byte offsets (its align),
 * else 1: templates/gpu/row_best.h's HK_ROW_VEC (argmax, sample) and the embedding's copy. */
static inline int hkc_variant_row_vec(const hkc_kernel_key_t *key) {
  const size_t size = hkc_dtype_size(key->dtype);
  return key->align > 0 && size > 0 && size <= 16 && (size_t)key->align * size >= 16 ? (int)(16 / size) : 1;
}
/* A TMA tensor map argument (HK_ARG_TMAP) of spec tensor `tensor` (an args[...].i of kind
 * TENSOR): boxes of box_inner elements along its last dim x box_outer rows, swizzle an
 * hk_tmap_swizzle_t (box 1..256; the inner row a multiple of 16 bytes within the swizzle's
 * span). */
static inline hkc_arg_t hkc_variant_arg_tmap(int64_t tensor, uint32_t box_inner, uint32_t box_outer,
                                             hk_tmap_swizzle_t swizzle) {
  hkc_arg_t a = {.kind = HK_ARG_TMAP, .i = (int64_t)hk_tmap_pack((uint32_t)tensor, box_inner, box_outer, swizzle)};
  return a;
}
/* A 1-D launch: `blocks` clamped to [1, 2^31 - 1] (kernels stride over the rest), `threads`
 * per block, `shared` bytes of dynamic shared memory. */
static inline void hkc_variant_launch_1d(int64_t blocks, uint32_t threads, uint32_t shared, uint32_t out_grid[3],
                                         uint32_t out_block[3], uint32_t *out_shared) {
  if (blocks < 1) blocks = 1;
  if (blocks > 0x7fffffffLL) blocks = 0x7fffffffLL;
  out_grid[0] = (uint32_t)blocks;
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = threads;
  out_block[1] = out_block[2] = 1;
  *out_shared = shared;
}

/* ewchain (hkc_kernel_key_t.program): the number of operands the kernel takes, 1 + the
 * largest operand number the program names (operand 0 is always read), or -1 when the
 * program is not a sequence of a<1-4>, m<1-4>, r, g, s, t. */
static inline int hkc_variant_ew_operands(const char *program) {
  int ops = 1;
  for (size_t i = 0; i < HKC_EW_PROGRAM_MAX && program[i]; i++) {
    const char c = program[i];
    if (c == 'a' || c == 'm') {
      if (i + 1 >= HKC_EW_PROGRAM_MAX) return -1;
      const char d = program[++i];
      if (d < '1' || d > '4') return -1;
      if (d - '0' + 1 > ops) ops = d - '0' + 1;
    } else if (c != 'r' && c != 'g' && c != 's' && c != 't') {
      return -1;
    }
  }
  return ops;
}

#endif /* HKC_VARIANT_H */
