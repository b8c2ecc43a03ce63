/* SPDX-License-Identifier: Apache-2.0 */
/* The AMD MFMA kernels' arithmetic on the CPU: generated sources of gemm_mfma_pp (every tile
 * width, both B layouts, f16, bf16 and gfx908's paired bf16 MFMAs, every epilogue piece), of
 * gemm_mfma and gemm_skinny_amd (wave64, few rows), and of attention_mfma_pp and attention_mfma,
 * compiled with clang++ against
 * tests/emu/amd_emu.h (a lane per coroutine, MFMA, shuffles and the buffer / LDS-copy
 * instructions emulated from the ISA documents' layouts) and run on odd shapes against a
 * double-precision reference (tests/emu/amd_emu_gemm.cpp: C poisoned and guarded, reads outside
 * A and B refused; tests/emu/amd_emu_attention.cpp: causal, GQA, packed qkv, key lengths,
 * additive mask, the output poisoned and guarded). Copies into LDS land either at once or only
 * when the issuing lane waits for them, and each case runs with both, so the ping-pong
 * schedules' barriers are exercised in both directions (a race shows only when an interleaving
 * exposes it: this checks index arithmetic, layouts and the schedules' data flow, not timing;
 * nothing here says anything about speed). Skipped, saying why, without clang++. The AMD builds
 * of these kernels are checked statically in amd_variants_test. */
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

/* A GEMM case: key flags, the variant and tile it forces ("" = the variant's default), and a
 * shape. */
typedef struct emu_case {
  const char *arch, *variant, *tune;
  hk_dtype_t dtype;
  int trans_b, bias, residual, mul;
  hk_act_t act;
  long long m, n, k;
  int norm_a; /* a folded rmsnorm of A (gemm_skinny_amd) */
} emu_case_t;

/* Writes the case's kernel source for the emulator: as hkc generates it, except that
 * gemm_mfma_pp's barrier is the plain builtin (gfx90a's inline-assembly s_barrier is the same
 * barrier; the host compiler cannot assemble it). The launch is the variant's. */
static void write_source(const emu_case_t *c, const char *path, uint32_t *out_grid, uint32_t *out_threads) {
  const hkc_gpu_arch_t *a = hk_test_arch(c->arch);
  hkc_kernel_out_t k;
  memset(&k, 0, sizeof k);
  k.key = (hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = c->dtype, .act = c->act, .trans_b = c->trans_b,
                             .has_bias = c->bias, .has_residual = c->residual, .has_mul = c->mul, .align = 8,
                             .norm_a = c->norm_a};
  snprintf(k.key.variant, sizeof k.key.variant, "%s", c->variant);
  snprintf(k.key.tune, sizeof k.key.tune, "%s", c->tune);
  assert_string_equal(hkc_variant_for(a, &k.key)->name, c->variant);
  hk_test_kernel_name(&k);
  char *src = hkc_codegen_gpu(a, &k);
  assert_non_null(src);
  char *async = strstr(src, "#define HK_PP_ASYNC_BARRIER 1");
  if (async) async[strlen("#define HK_PP_ASYNC_BARRIER ")] = '0';
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(src, f) >= 0);
  assert_int_equal(fclose(f), 0);
  free(src);
  hkc_arg_t args[8] = {{.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR},
                       {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_I64, .i = c->m},
                       {.kind = HK_ARG_I64, .i = c->n},            {.kind = HK_ARG_I64, .i = c->k}};
  uint32_t grid[3], block[3], shared;
  hkc_gpu_launch_dims(a, &k.key, args, 8, grid, block, &shared);
  *out_grid = grid[0];
  *out_threads = block[0];
}

/* Compiles and runs one case, both landing orders of the copies; fails on any mismatch. */
static void emulate(const emu_case_t *c, int seed) {
  char src[4200], exe[4200], cmd[18000], out[8192];
  snprintf(src, sizeof src, "%s/k%d.hip", g_dir, seed);
  snprintf(exe, sizeof exe, "%s/k%d", g_dir, seed);
  uint32_t grid, threads;
  write_source(c, src, &grid, &threads);
  char emu_dir[4200]; /* hk_test_source_path's buffer is static */
  snprintf(emu_dir, sizeof emu_dir, "%s", hk_test_source_path("tests/emu"));
  snprintf(cmd, sizeof cmd, "clang++ -std=c++17 -O1 -w -I'%s' -DHK_EMU_SOURCE='\"%s\"' '%s/amd_emu_gemm.cpp' -o '%s'",
           emu_dir, src, emu_dir, exe);
  if (hk_test_run(cmd, out, sizeof out) != 0) fail_msg("%s\n%s", cmd, out);
  /* fewer blocks than tiles where there are several: the grid-stride loop runs too */
  const uint32_t blocks = grid > 2 ? grid / 2 + 1 : grid;
  for (int late = 0; late <= 1; late++) {
    snprintf(cmd, sizeof cmd, "'%s' %lld %lld %lld %u %u %d %d", exe, c->m, c->n, c->k, blocks, threads, seed, late);
    const int rc = hk_test_run(cmd, out, sizeof out);
    printf("[ info     ] %s %s %s: %s", c->arch, c->variant, c->tune[0] ? c->tune : "(default)", out);
    if (rc != 0) fail_msg("%s: exit %d", cmd, rc);
  }
}

static int have_clang(void) {
  char out[512];
  if (hk_test_run("clang++ --version", out, sizeof out) == 0) return 1;
  printf("[ SKIP     ] clang++ not found: the AMD kernels are not emulated (%s)\n", out);
  return 0;
}

/* gemm_mfma_pp: 8 waves, ping-pong, copies straight into swizzled LDS. Shapes cross tile
 * edges in M, N and K (K % 32 != 0), one is smaller than a K step and an 8-column B. */
static void test_pp(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const emu_case_t cases[] = {
      {"gfx90a", "gemm_mfma_pp", "", HK_DTYPE_F16, 1, 1, 1, 0, HK_ACT_GELU, 300, 264, 200, 0},
      {"gfx90a", "gemm_mfma_pp", "", HK_DTYPE_BF16, 0, 1, 0, 1, HK_ACT_SILU, 257, 392, 72, 0},
      {"gfx908", "gemm_mfma_pp", "", HK_DTYPE_BF16, 0, 0, 1, 0, HK_ACT_NONE, 130, 136, 40, 0},
      {"gfx908", "gemm_mfma_pp", "bm=128,bn=256,bk=32", HK_DTYPE_BF16, 1, 1, 0, 0, HK_ACT_RELU, 129, 520, 96, 0},
      {"gfx90a", "gemm_mfma_pp", "bm=128,bn=128,bk=64", HK_DTYPE_F16, 0, 1, 1, 1, HK_ACT_GELU_TANH, 1, 8, 8, 0},
      {"gfx90a", "gemm_mfma_pp", "bm=64,bn=128,bk=64", HK_DTYPE_BF16, 1, 0, 0, 0, HK_ACT_NONE, 65, 264, 136, 0},
      {"gfx90a", "gemm_mfma_pp", "bm=64,bn=256,bk=32", HK_DTYPE_F16, 0, 1, 0, 0, HK_ACT_NONE, 70, 300 / 8 * 8, 24, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate(&cases[i], (int)i + 1);
}

/* gemm_mfma (4 waves, register-staged, padded LDS) on the same footing. */
static void test_4wave(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const emu_case_t cases[] = {
      {"gfx90a", "gemm_mfma", "", HK_DTYPE_F16, 0, 1, 1, 0, HK_ACT_GELU, 300, 264, 200, 0},
      {"gfx908", "gemm_mfma", "bm=64,bn=256,bk=32", HK_DTYPE_BF16, 1, 0, 0, 1, HK_ACT_SILU, 70, 264, 40, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate(&cases[i], (int)i + 101);
}

/* gemm_skinny_amd (wave64, a few rows of A, B [N, K]): every mb, K split over waves, the
 * column tail (N odd: a unit's second column past N), K tails that leave some lanes of a chunk
 * past K (K % 512 != 0) and a K shorter than one chunk, M beyond one m tile (passes), every
 * epilogue piece, the folded rmsnorm, more units than blocks (the grid-stride loop). */
static void test_skinny(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const emu_case_t cases[] = {
      {"gfx90a", "gemm_skinny_amd", "mb=1", HK_DTYPE_BF16, 1, 0, 1, 0, HK_ACT_NONE, 1, 67, 2056, 0},
      {"gfx90a", "gemm_skinny_amd", "mb=1,ks=2", HK_DTYPE_BF16, 1, 1, 0, 1, HK_ACT_SILU, 1, 130, 1544, 0},
      {"gfx90a", "gemm_skinny_amd", "mb=2,ks=4,u=2,nw=1,w=8", HK_DTYPE_F16, 1, 1, 1, 0, HK_ACT_GELU, 2, 33, 4104, 0},
      {"gfx908", "gemm_skinny_amd", "mb=4,ks=1,u=1,nw=4", HK_DTYPE_BF16, 1, 0, 0, 0, HK_ACT_RELU, 3, 41, 40, 0},
      {"gfx90a", "gemm_skinny_amd", "mb=8,ks=2,u=8,nw=3", HK_DTYPE_F16, 1, 1, 1, 1, HK_ACT_GELU_TANH, 19, 50, 1032, 0},
      /* the rmsnorm folded in (the one-row buckets' q|k|v and SwiGLU gemms): K split, a K tail */
      {"gfx90a", "gemm_skinny_amd", "mb=1,ks=2", HK_DTYPE_BF16, 1, 0, 0, 0, HK_ACT_NONE, 1, 70, 2056, 1},
      {"gfx908", "gemm_skinny_amd", "mb=2", HK_DTYPE_F16, 1, 1, 1, 1, HK_ACT_SILU, 2, 37, 1160, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate(&cases[i], (int)i + 201);
}

/* ---- attention ------------------------------------------------------------------------------
 * An attention case: the variant, key flags, a shape and the layout of the inputs. */
typedef struct emu_attn_case {
  const char *arch, *variant;
  hk_dtype_t dtype;
  int dh, lengths, mask;
  long long batch, seq_q, seq_kv, heads, kv_heads, causal, packed, mask_heads;
} emu_attn_case_t;

/* Compiles one attention case's generated source against tests/emu/amd_emu_attention.cpp
 * and runs it with both landing orders of the copies. */
static void emulate_attention(const emu_attn_case_t *c, int seed) {
  const hkc_gpu_arch_t *a = hk_test_arch(c->arch);
  hkc_kernel_out_t k;
  memset(&k, 0, sizeof k);
  k.key = (hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = c->dtype, .align = 8, .head_dim = c->dh,
                             .has_lengths = c->lengths, .has_mask = c->mask};
  snprintf(k.key.variant, sizeof k.key.variant, "%s", c->variant);
  assert_string_equal(hkc_variant_for(a, &k.key)->name, c->variant);
  hk_test_kernel_name(&k);
  char *src = hkc_codegen_gpu(a, &k);
  assert_non_null(src);
  char *async = strstr(src, "#define HK_PP_ASYNC_BARRIER 1"); /* the host cannot assemble s_barrier */
  if (async) async[strlen("#define HK_PP_ASYNC_BARRIER ")] = '0';
  char path[4200], exe[4200], cmd[18000], out[8192];
  snprintf(path, sizeof path, "%s/a%d.hip", g_dir, seed);
  snprintf(exe, sizeof exe, "%s/a%d", g_dir, seed);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(src, f) >= 0);
  assert_int_equal(fclose(f), 0);
  free(src);
  hkc_arg_t args[20];
  memset(args, 0, sizeof args);
  for (int i = 0; i < 4; i++) args[i].kind = HK_ARG_TENSOR;
  const int64_t iv[] = {c->batch, c->seq_q, c->seq_kv, c->heads, c->kv_heads, c->dh};
  for (int i = 0; i < 6; i++) args[4 + i] = (hkc_arg_t){.kind = HK_ARG_I64, .i = iv[i]};
  uint32_t grid[3], block[3], shared;
  hkc_gpu_launch_dims(a, &k.key, args, 17, grid, block, &shared);
  char emu_dir[4200];
  snprintf(emu_dir, sizeof emu_dir, "%s", hk_test_source_path("tests/emu"));
  snprintf(cmd, sizeof cmd,
           "clang++ -std=c++17 -O1 -w -I'%s' -DHK_EMU_SOURCE='\"%s\"' '%s/amd_emu_attention.cpp' -o '%s'", emu_dir,
           path, emu_dir, exe);
  if (hk_test_run(cmd, out, sizeof out) != 0) fail_msg("%s\n%s", cmd, out);
  const uint32_t blocks = grid[0] > 2 ? grid[0] / 2 + 1 : grid[0]; /* the grid-stride loop too */
  for (int late = 0; late <= 1; late++) {
    snprintf(cmd, sizeof cmd, "'%s' %lld %lld %lld %lld %lld %lld %lld %lld %u %u %d %d", exe, c->batch, c->seq_q,
             c->seq_kv, c->heads, c->kv_heads, c->causal, c->packed, c->mask_heads, blocks, block[0], seed, late);
    const int rc = hk_test_run(cmd, out, sizeof out);
    printf("[ info     ] %s %s d%d%s%s: %s", c->arch, c->variant, c->dh, c->lengths ? " lengths" : "",
           c->mask ? " mask" : "", out);
    if (rc != 0) fail_msg("%s: exit %d", cmd, rc);
  }
}

/* attention_mfma_pp: odd sequence lengths (key tails inside a 32-key tile, query tails inside
 * a wave and a block), more keys than queries and fewer, causal, GQA 4/2, packed qkv, key
 * lengths (an entry with none), an additive mask with -inf (a row wholly masked), head dims
 * 64 and 128, f16 / bf16 / gfx908's paired bf16 MFMAs. */
static void test_attention_pp(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const emu_attn_case_t cases[] = {
      {"gfx90a", "attention_mfma_pp", HK_DTYPE_F16, 64, 0, 0, 1, 77, 77, 2, 2, 1, 0, 1},
      {"gfx90a", "attention_mfma_pp", HK_DTYPE_BF16, 128, 0, 0, 2, 130, 77, 4, 2, 0, 0, 1},
      {"gfx90a", "attention_mfma_pp", HK_DTYPE_F16, 128, 1, 0, 3, 45, 130, 2, 1, 1, 0, 1},
      {"gfx90a", "attention_mfma_pp", HK_DTYPE_BF16, 64, 0, 1, 2, 77, 100, 4, 2, 0, 0, 4},
      {"gfx90a", "attention_mfma_pp", HK_DTYPE_F16, 64, 1, 1, 2, 130, 130, 2, 2, 1, 1, 1},
      {"gfx908", "attention_mfma_pp", HK_DTYPE_BF16, 64, 0, 0, 1, 300, 300, 1, 1, 1, 1, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate_attention(&cases[i], (int)i + 201);
}

/* attention_mfma (4 waves) on the same footing: its arithmetic had only been derived by hand. */
static void test_attention_4wave(void **state) {
  (void)state;
  if (!have_clang()) skip();
  static const emu_attn_case_t cases[] = {
      {"gfx90a", "attention_mfma", HK_DTYPE_F16, 128, 1, 1, 2, 77, 130, 4, 2, 1, 0, 4},
      {"gfx908", "attention_mfma", HK_DTYPE_BF16, 64, 0, 0, 1, 130, 130, 2, 2, 0, 1, 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) emulate_attention(&cases[i], (int)i + 301);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pp),
      cmocka_unit_test(test_4wave),
      cmocka_unit_test(test_skinny),
      cmocka_unit_test(test_attention_pp),
      cmocka_unit_test(test_attention_4wave),
  };
  const char *filter = getenv("HK_TEST_FILTER"); /* e.g. "test_attention*": run only those */
  if (filter && *filter) cmocka_set_test_filter(filter);
  return cmocka_run_group_tests(tests, setup, teardown);
}
