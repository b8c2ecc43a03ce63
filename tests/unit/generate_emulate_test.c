/* SPDX-License-Identifier: Apache-2.0 */
/* The simple GPU kernels of text generation (docs/GENERATE.md) on the CPU: kv_append,
 * kv_attention, take_rows, argmax, sample, and rope / embedding with their ctx and scaling
 * tails, and dequant (quantized weights), as hkc_codegen_gpu writes them for gfx90a, compiled with clang++ against tests/emu/amd_emu.h
 * (a coroutine per lane, blocks one after another) and run by tests/emu/amd_emu_generate.cpp
 * on odd shapes against a reference: padding rows, ctx and slot out of range in both
 * directions, a sliding window, GQA, head dims beyond one output pass, rows out of range,
 * NaN and ties, positions in every llama3 band. Outputs and caches are poisoned and guarded:
 * a write outside them, or an output left unwritten, fails. The grid is smaller than the
 * launch's where it can be, so the grid-stride loops run too. This checks index arithmetic
 * and semantics, not timing. Skipped, saying why, without clang++; the nvrtc and hiprtc
 * builds of the same kernels are gpu_codegen_test's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "variant.h"
#include "hkc.h"
#include "test_util.h"

static char *g_dir;

static int setup(void **state) {
  (void)state;
  g_dir = hk_test_tmpdir();
  return g_dir ? 0 : -1;
}
static int teardown(void **state) {
  (void)state;
  char cmd[4200], out[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  hk_test_run(cmd, out, sizeof out);
  free(g_dir);
  return 0;
}

static int have_clang(void) {
  char out[512];
  if (hk_test_run("clang++ --version", out, sizeof out) == 0) return 1;
  printf("[ SKIP     ] clang++ not found: the generation kernels are not emulated (%s)\n", out);
  return 0;
}

#define MAX_SIZES 10

/* A case: the key (op, dtype, tails) and the harness's sizes for the op (amd_emu_generate.cpp). */
typedef struct gen_case {
  hk_op_t op;
  hk_dtype_t dtype;
  int has_ctx, scaling, has_add;
  int n_sizes;
  long long sizes[MAX_SIZES];
  int rope, align; /* kv_append: a folded rope (key.rope, its scaling `scaling`); key.align (8: vectors) */
  int append;      /* kv_attention: its kv_append folded in (key.append; rope: that append's) */
} gen_case_t;

#define TENSOR(v) ((hkc_arg_t){.kind = HK_ARG_TENSOR, .i = (v)})
#define I64(v) ((hkc_arg_t){.kind = HK_ARG_I64, .i = (v)})
#define F32(v) ((hkc_arg_t){.kind = HK_ARG_F32, .f = (v)})

/* The case's arguments in the kernel ABI (lower.h), for its launch. */
static uint32_t case_args(const gen_case_t *c, hkc_arg_t *a) {
  const long long *s = c->sizes;
  switch (c->op) {
  case HK_OP_KV_APPEND: { /* rows heads kv_heads dh layers slots max_seq layer */
    const hkc_arg_t v[] = {TENSOR(0), TENSOR(1), TENSOR(2), TENSOR(3), TENSOR(4), TENSOR(5), I64(s[0]),
                           I64(s[1]),  I64(s[2]),  I64(s[3]),  I64(s[7]),  I64(s[5]),  I64(s[6])};
    memcpy(a, v, sizeof v);
    uint32_t n = HKC_KV_APPEND_N_ARGS;
    if (c->rope) a[n++] = F32(500000.0f); /* theta, then a scaled rope's four (the harness passes its own) */
    for (int i = 0; c->rope && c->scaling && i < HKC_ROPE_SCALING_N_ARGS; i++) a[n++] = F32(1.0f);
    return n;
  }
  case HK_OP_KV_ATTENTION: { /* ... window */
    const hkc_arg_t v[] = {TENSOR(0), TENSOR(1), TENSOR(2), TENSOR(3), TENSOR(4), TENSOR(5), I64(s[0]), I64(s[1]),
                           I64(s[2]),  I64(s[3]),  I64(s[7]),  I64(s[5]),  I64(s[6]),  I64(s[8]),  F32(0.125f)};
    memcpy(a, v, sizeof v);
    uint32_t n = HKC_KV_ATTENTION_N_ARGS;
    if (c->append) a[n++] = I64(1);
    if (c->append && c->rope) a[n++] = F32(500000.0f); /* theta, then a scaled rope's four (the harness's own) */
    for (int i = 0; c->append && c->rope && c->scaling && i < HKC_ROPE_SCALING_N_ARGS; i++) a[n++] = F32(1.0f);
    return n;
  }
  case HK_OP_TAKE_ROWS: { /* x_rows n_out width */
    const hkc_arg_t v[] = {TENSOR(0), TENSOR(1), TENSOR(2), I64(s[0]), I64(s[1]), I64(s[2])};
    memcpy(a, v, sizeof v);
    return HKC_TAKE_ROWS_N_ARGS;
  }
  case HK_OP_DEQUANT: { /* rows cols scale_rows scale_cols block_rows block_cols */
    const hkc_arg_t v[] = {TENSOR(0), TENSOR(1), TENSOR(2), I64(s[0]), I64(s[1]), I64(s[2]), I64(s[3]), I64(s[4]), I64(s[5])};
    memcpy(a, v, sizeof v);
    return HKC_DEQUANT_N_ARGS;
  }
  case HK_OP_ARGMAX: { /* rows cols */
    const hkc_arg_t v[] = {TENSOR(0), TENSOR(1), I64(s[0]), I64(s[1])};
    memcpy(a, v, sizeof v);
    return HKC_ARGMAX_N_ARGS;
  }
  case HK_OP_SAMPLE: { /* rows cols */
    const hkc_arg_t v[] = {TENSOR(0), TENSOR(1), TENSOR(2), I64(s[0]), I64(s[1])};
    memcpy(a, v, sizeof v);
    return HKC_SAMPLE_N_ARGS;
  }
  case HK_OP_ROPE: { /* rows heads pass_heads dh seq pos_offset; then the tails */
    const hkc_arg_t v[] = {TENSOR(0), TENSOR(1), I64(s[0]), I64(s[4]), I64(s[1]),
                           I64(s[3]), I64(s[5]), F32(500000.0f), I64(s[2])};
    memcpy(a, v, sizeof v);
    uint32_t n = HKC_ROPE_N_ARGS;
    if (c->has_ctx) a[n++] = TENSOR(2);
    for (int i = 0; c->scaling && i < HKC_ROPE_SCALING_N_ARGS; i++) a[n++] = F32(1.0f);
    return n;
  }
  default: { /* embedding: tokens vocab hidden max_pos */
    const hkc_arg_t v[] = {TENSOR(0), TENSOR(1), TENSOR(2), TENSOR(3), I64(s[0]),
                           I64(3),    I64(s[1]), I64(s[2]), TENSOR(4), I64(s[3])};
    memcpy(a, v, sizeof v);
    return c->has_ctx ? HKC_EMBEDDING_N_ARGS_CTX : HKC_EMBEDDING_N_ARGS;
  }
  }
}

/* Generates the case's kernel for gfx90a (key.program `program`, key.head_dim `head_dim`; the
 * registry must pick `variant` for it), compiles it with the harness and runs it with about half
 * the variant's grid, and with full_grid also with the whole grid. */
static void emulate_variant(const gen_case_t *c, int seed, const char *program, const char *variant, int head_dim,
                            int full_grid) {
  const hkc_gpu_arch_t *a = hk_test_arch("gfx90a");
  hkc_kernel_out_t k;
  memset(&k, 0, sizeof k);
  k.key = (hkc_kernel_key_t){.op = c->op, .dtype = c->dtype, .has_ctx = c->has_ctx, .rope_scaling = c->scaling,
                             .has_add = c->has_add, .rope = c->rope, .align = c->align, .append = c->append,
                             .head_dim = head_dim};
  if (program) snprintf(k.key.program, sizeof k.key.program, "%s", program);
  if (!strcmp(variant, "simple")) /* the portable kernel, also where the registry has a specialised one */
    snprintf(k.key.variant, sizeof k.key.variant, "simple");
  assert_string_equal(hkc_variant_for(a, &k.key)->name, variant);
  hk_test_kernel_name(&k);
  char *src = hkc_codegen_gpu(a, &k);
  assert_non_null(src);
  char path[4200], exe[4200], cmd[18000], out[8192];
  snprintf(path, sizeof path, "%s/g%d.hip", g_dir, seed);
  snprintf(exe, sizeof exe, "%s/g%d", g_dir, seed);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(src, f) >= 0);
  assert_int_equal(fclose(f), 0);
  free(src);
  hkc_arg_t args[HKC_MAX_ARGS];
  const uint32_t n_args = case_args(c, args);
  uint32_t grid[3], block[3], shared;
  hkc_gpu_launch_dims(a, &k.key, args, n_args, grid, block, &shared);
  char emu_dir[4200]; /* hk_test_source_path's buffer is static */
  snprintf(emu_dir, sizeof emu_dir, "%s", hk_test_source_path("tests/emu"));
  snprintf(cmd, sizeof cmd,
           "clang++ -std=c++17 -O1 -w -I'%s' -DHK_EMU_OP=%d -DHK_EMU_SOURCE='\"%s\"' '%s/amd_emu_generate.cpp' -o '%s'",
           emu_dir, (int)c->op, path, emu_dir, exe);
  if (hk_test_run(cmd, out, sizeof out) != 0) fail_msg("%s\n%s", cmd, out);
  /* fewer blocks than the grid (the grid-stride loop too); then, with full_grid, the variant's own
   * grid from the same binary */
  for (int full = 0; full <= full_grid; full++) {
    const uint32_t blocks = full || grid[0] <= 2 ? grid[0] : grid[0] / 2 + 1;
    int len = snprintf(cmd, sizeof cmd, "'%s' %u %u %d", exe, blocks, block[0], seed);
    for (int i = 0; i < c->n_sizes; i++) len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %lld", c->sizes[i]);
    const int rc = hk_test_run(cmd, out, sizeof out);
    printf("[ info     ] %s: %s", k.name, out);
    if (rc != 0) fail_msg("%s: exit %d", cmd, rc);
  }
}

/* The simple (portable) kernel of the case (with key.program `program`: dequant's "i8" or "e4m3";
 * NULL for the other ops). */
static void emulate_program(const gen_case_t *c, int seed, const char *program) {
  emulate_variant(c, seed, program, "simple", 0, 0);
}
static void emulate(const gen_case_t *c, int seed) { emulate_program(c, seed, NULL); }


#define BF16 HK_DTYPE_BF16
#define F16 HK_DTYPE_F16

/* kv_append and kv_attention with fp8_e4m3 caches (key.program "e4m3": --kv-cache fp8_e4m3):
 * the stores rounded as a nearest-code search says, the reads decoded exactly; GQA, a layer > 0,
 * a window, a head dim beyond one output pass. */
static void test_kv_fp8(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const gen_case_t cases[] = {
      {HK_OP_KV_APPEND, BF16, 0, 0, 0, 8, {9, 4, 2, 40, 2, 3, 5, 1}, 0, 0, 0},
      {HK_OP_KV_APPEND, F16, 0, 0, 0, 8, {7, 3, 1, 100, 1, 2, 8, 0}, 0, 0, 0},
      {HK_OP_KV_APPEND, BF16, 0, HKC_ROPE_SCALING_LLAMA3, 0, 8, {9, 4, 2, 64, 2, 3, 300, 1}, 1, 8, 0},
      {HK_OP_KV_ATTENTION, BF16, 0, 0, 0, 9, {8, 4, 2, 40, 2, 3, 300, 1, 0}, 0, 0, 0},
      {HK_OP_KV_ATTENTION, F16, 0, 0, 0, 9, {6, 2, 2, 300, 1, 2, 140, 0, 70}, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate_program(&cases[i], (int)i + 401, "e4m3");
}

/* kv_append: q|k|v rows wider than a block (two column chunks), GQA, a layer > 0; every
 * invalid kind of row; a thread an element (align 1) and 8 (align 8: 16-byte vectors). With a
 * folded rope (rope + append): llama3, linear and plain angles at positions up to 299 against
 * Hugging Face's formula in double; halves of a multiple of 8 (vector partners) and not (20:
 * each partner loaded alone), a tiny head (dh 6), angles from shared memory and (dh / 2 = 136
 * > the block's 128 threads) each thread's own; fp8_e4m3 caches. */
static void test_kv_append(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const gen_case_t cases[] = {
      {HK_OP_KV_APPEND, BF16, 0, 0, 0, 8, {9, 4, 2, 40, 2, 3, 5, 1}, 0, 0, 0},
      {HK_OP_KV_APPEND, F16, 0, 0, 0, 8, {7, 3, 1, 100, 1, 2, 8, 0}, 0, 0, 0},
      {HK_OP_KV_APPEND, BF16, 0, 0, 0, 8, {9, 4, 2, 64, 2, 3, 5, 1}, 0, 8, 0},
      {HK_OP_KV_APPEND, BF16, 0, HKC_ROPE_SCALING_LLAMA3, 0, 8, {9, 8, 2, 64, 2, 3, 300, 1}, 1, 8, 0},
      {HK_OP_KV_APPEND, F16, 0, 0, 0, 8, {7, 3, 1, 40, 1, 2, 300, 0}, 1, 8, 0},
      {HK_OP_KV_APPEND, BF16, 0, HKC_ROPE_SCALING_LINEAR, 0, 8, {6, 2, 1, 6, 1, 2, 9, 0}, 1, 0, 0},
      {HK_OP_KV_APPEND, F16, 0, 0, 0, 8, {7, 2, 1, 272, 1, 2, 200, 0}, 1, 8, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate(&cases[i], (int)i + 1);
}

/* kv_attention: several key tiles, GQA 2 and 1, a sliding window, a head dim beyond one
 * output pass (300: q restaged per chunk, scores recomputed), a layer > 0. */
static void test_kv_attention(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const gen_case_t cases[] = {
      {HK_OP_KV_ATTENTION, F16, 0, 0, 0, 9, {8, 4, 2, 40, 2, 3, 300, 1, 0}, 0, 0, 0},
      {HK_OP_KV_ATTENTION, BF16, 0, 0, 0, 9, {7, 2, 1, 64, 1, 2, 200, 0, 150}, 0, 0, 0},
      {HK_OP_KV_ATTENTION, BF16, 0, 0, 0, 9, {6, 2, 2, 300, 1, 2, 140, 0, 0}, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate(&cases[i], (int)i + 101);
}

/* kv_attention_wave (AMD CDNA's decode attention: kv_attention_warp's template in waves of 64,
 * split over the keys, the pieces merged by the last to arrive): head_dim 64 and 128, GQA 4, 2
 * and 1 (Qwen2.5-0.5B's 7 takes two rounds of q heads), contexts of up to 300 keys (several
 * pieces of 64 and a tail), a sliding window, invalid rows (ctx 0, past max_seq, a slot out of
 * range: zeros), a layer > 0, with the variant's grid (up to 4 pieces a tile) and with fewer
 * blocks (2 pieces, or none: grid-stride); each checked against the double reference, the tile
 * counters left at zero. The emulator runs blocks one after another: the merge's memory ordering
 * on a GPU is not what this checks (split_amd.h gives its argument). */
static void test_kv_attention_wave(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const gen_case_t cases[] = {
      {HK_OP_KV_ATTENTION, BF16, 0, 0, 0, 9, {8, 8, 2, 64, 2, 3, 300, 1, 0}, 0, 8, 0},
      {HK_OP_KV_ATTENTION, F16, 0, 0, 0, 9, {7, 2, 1, 128, 1, 2, 260, 0, 150}, 0, 8, 0},
      {HK_OP_KV_ATTENTION, BF16, 0, 0, 0, 9, {6, 14, 2, 64, 1, 2, 200, 0, 0}, 0, 8, 0},
      {HK_OP_KV_ATTENTION, F16, 0, 0, 0, 9, {7, 3, 3, 128, 2, 4, 90, 1, 0}, 0, 8, 0},
  };
  static const int dh[] = {64, 128, 64, 128};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) /* fewer blocks, then the variant's split */
    emulate_variant(&cases[i], (int)i + 121, NULL, "kv_attention_wave", dh[i], 1);
}

/* kv_attention with its kv_append folded in (kv_fold: a row's append and attention in one
 * launch, rows of distinct slots): the llama3 rope with GQA 2 and a layer > 0 (padding rows, a
 * slot taken twice, ctx at max_seq); no rope, a head dim beyond one staged chunk (300: the new
 * key restaged with q) and a sliding window; a linear rope without GQA. */
static void test_kv_attention_append(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const gen_case_t cases[] = {
      {HK_OP_KV_ATTENTION, BF16, 0, HKC_ROPE_SCALING_LLAMA3, 0, 9, {8, 4, 2, 64, 2, 6, 300, 1, 0}, 1, 0, 1},
      {HK_OP_KV_ATTENTION, F16, 0, 0, 0, 9, {6, 2, 1, 300, 1, 4, 140, 0, 100}, 0, 0, 1},
      {HK_OP_KV_ATTENTION, BF16, 0, HKC_ROPE_SCALING_LINEAR, 0, 9, {5, 3, 3, 40, 1, 5, 200, 0, 0}, 1, 0, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate(&cases[i], (int)i + 111);
}

/* take_rows (rows out of range both ways) and argmax (NaN, ties, -inf, +inf; fewer columns
 * than threads). */
static void test_take_rows_argmax(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const gen_case_t cases[] = {
      {HK_OP_TAKE_ROWS, F16, 0, 0, 0, 3, {5, 7, 300}, 0, 0, 0},
      {HK_OP_ARGMAX, BF16, 0, 0, 0, 2, {9, 1000}, 0, 0, 0},
      {HK_OP_ARGMAX, F16, 0, 0, 0, 2, {7, 3}, 0, 0, 0},
      /* 16-byte loads (row_best.h): a tail of single vectors, then the loop of 8 in flight first */
      {HK_OP_ARGMAX, BF16, 0, 0, 0, 2, {4, 1000}, 0, 8, 0},
      {HK_OP_ARGMAX, BF16, 0, 0, 0, 2, {3, 40008}, 0, 8, 0},
      {HK_OP_ARGMAX, HK_DTYPE_F32, 0, 0, 0, 2, {3, 20004}, 0, 4, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate(&cases[i], (int)i + 201);
}

/* dequant (quantized weights: docs/SPEC.md): int8 and fp8_e4m3, per column, per row, in blocks
 * with partial blocks at both edges, one scale; rows wider than a block's threads; every fp8
 * code but NaN, the largest and smallest first. */
static void test_dequant(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const gen_case_t cases[] = {
      {HK_OP_DEQUANT, BF16, 0, 0, 0, 6, {37, 300, 1, 300, 37, 1}, 0, 0, 0},
      {HK_OP_DEQUANT, F16, 0, 0, 0, 6, {45, 70, 45, 1, 1, 70}, 0, 0, 0},
      {HK_OP_DEQUANT, BF16, 0, 0, 0, 6, {77, 300, 3, 3, 32, 128}, 0, 0, 0},
      {HK_OP_DEQUANT, HK_DTYPE_F32, 0, 0, 0, 6, {9, 13, 1, 1, 9, 13}, 0, 0, 0},
  };
  static const char *const programs[] = {"i8", "e4m3", "e4m3", "i8"};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate_program(&cases[i], (int)i + 301, programs[i]);
}

/* sample against a reference that sorts the keys (amd_emu_generate.cpp): the greedy forms and
 * their ties, top_k (a tie at the k-th value; k beyond the numbers), top_p, both, NaN, -inf,
 * +inf twice, an all-NaN row; a vocabulary of 1000 over 256 threads (two rows per block: the
 * grid-stride loop), and 37 columns (fewer than a block's threads). The same libm on both
 * sides, so the ids must be equal. */
static void test_sample(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const gen_case_t cases[] = {
      {HK_OP_SAMPLE, BF16, 0, 0, 0, 2, {32, 1000}, 0, 0, 0},
      {HK_OP_SAMPLE, F16, 0, 0, 0, 2, {16, 37}, 0, 0, 0},
      {HK_OP_SAMPLE, BF16, 0, 0, 0, 2, {16, 40008}, 0, 8, 0}, /* greedy rows in 16-byte loads */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate(&cases[i], (int)i + 401);
  /* sample_split_wave (the registry's on AMD CDNA): greedy rows in 8 pieces, the last to arrive
   * merging them in piece order (pieces past 37 columns empty), the sampled rows drawn by piece
   * 0; the same ids, the row counters back at zero */
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    emulate_variant(&cases[i], (int)i + 411, NULL, "sample_split_wave", 0, 1);
}

/* rope with ctx and llama3 (a packed q|k|v's copied v head), linear without ctx (row % seq +
 * offset), ctx alone at a head dim of 6 (one pair per item) -- few rows: a pair a thread --
 * and enough rows for vectors of 4 pairs a thread (ctx, llama3); embedding with ctx, with and
 * without positions. */
static void test_rope_embedding_tails(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const gen_case_t cases[] = {
      {HK_OP_ROPE, BF16, 1, HKC_ROPE_SCALING_LLAMA3, 0, 6, {9, 3, 1, 64, 1, 0}, 0, 0, 0},
      {HK_OP_ROPE, F16, 0, HKC_ROPE_SCALING_LINEAR, 0, 6, {6, 2, 0, 128, 4, 100}, 0, 0, 0},
      {HK_OP_ROPE, F16, 1, 0, 0, 6, {5, 2, 1, 6, 1, 0}, 0, 0, 0},
      {HK_OP_ROPE, BF16, 1, HKC_ROPE_SCALING_LLAMA3, 0, 6, {1024, 8, 2, 64, 1, 0}, 0, 0, 0},
      {HK_OP_EMBEDDING, BF16, 1, 0, 1, 4, {9, 11, 70, 6}, 0, 0, 0},
      {HK_OP_EMBEDDING, F16, 1, 0, 0, 4, {5, 7, 33, 4}, 0, 0, 0},
      /* 16-byte copies, 4 in flight a thread: one pass, then a pass with a partial tail */
      {HK_OP_EMBEDDING, BF16, 1, 0, 0, 4, {3, 7, 64, 4}, 0, 8, 0},
      {HK_OP_EMBEDDING, BF16, 1, 0, 0, 4, {2, 5, 4104, 4}, 0, 8, 0},
      {HK_OP_EMBEDDING, BF16, 1, 0, 1, 4, {2, 5, 4104, 4}, 0, 8, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate(&cases[i], (int)i + 301);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_kv_append),
      cmocka_unit_test(test_kv_attention),
      cmocka_unit_test(test_kv_attention_append),
      cmocka_unit_test(test_kv_attention_wave),
      cmocka_unit_test(test_take_rows_argmax),
      cmocka_unit_test(test_sample),
      cmocka_unit_test(test_dequant),
      cmocka_unit_test(test_kv_fp8),
      cmocka_unit_test(test_rope_embedding_tails),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
