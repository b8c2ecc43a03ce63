/* SPDX-License-Identifier: Apache-2.0 */
/* The memory-bound GPU variants of compiler/variant_rows.c: rows_vec16 (layernorm,
 * rmsnorm -- also with the fused residual add (has_add, has_sum) -- and softmax) and
 * elementwise_vec16 (add, mul, relu, gelu, silu, ewchain programs).
 *  - which keys they serve (align a multiple of the 16-byte vector; others stay simple)
 *  - every variant compiles with nvrtc (sm_90, sm_80) and hiprtc (gfx90a wave64, gfx1030
 *    wave32), reports registers and uses no scratch (spills); skip() when a toolchain
 *    does not load
 *  - launch dims cover odd rows and cols (checked against the macros in the generated
 *    source, so a drift between launch and template fails here)
 * No kernel runs here: numerics and speed are checked on a device (bench/run.py rows). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "variant.h"
#include "hkc.h"
#include "test_util.h"

static const hk_op_t k_row_ops[] = {HK_OP_LAYERNORM, HK_OP_RMSNORM, HK_OP_SOFTMAX};
static const hk_op_t k_ew_ops[] = {HK_OP_ADD, HK_OP_MUL, HK_OP_RELU, HK_OP_GELU, HK_OP_SILU};
static const hk_dtype_t k_dtypes[] = {HK_DTYPE_F32, HK_DTYPE_F16, HK_DTYPE_BF16};

static int is_row_op(hk_op_t op) { return op == HK_OP_LAYERNORM || op == HK_OP_RMSNORM || op == HK_OP_SOFTMAX; }

static hkc_kernel_out_t kernel_for(hk_op_t op, hk_dtype_t dtype, int align) {
  hkc_kernel_out_t k;
  memset(&k, 0, sizeof k);
  k.key.op = op;
  k.key.dtype = dtype;
  k.key.align = align;
  hkc_kernel_key_name(&k.key, k.name, sizeof k.name);
  return k;
}

static hkc_kernel_out_t norm_kernel(hk_op_t op, hk_dtype_t dtype, int align, int add, int sum) {
  hkc_kernel_out_t k = kernel_for(op, dtype, align);
  k.key.has_add = add;
  k.key.has_sum = sum;
  hk_test_kernel_name(&k);
  return k;
}

static hkc_kernel_out_t ewchain_kernel(const char *program, hk_dtype_t dtype, int align) {
  hkc_kernel_out_t k = kernel_for(HK_OP_EWCHAIN, dtype, align);
  snprintf(k.key.program, sizeof k.key.program, "%s", program);
  hk_test_kernel_name(&k);
  return k;
}

/* ewchain programs compiled: every letter, 1 to 5 operands */
static const char *const k_programs[] = {"a1gm2", "m1a2a3a4rgst", "", "sm1", "ta1"};
#define N_PROGRAMS (sizeof k_programs / sizeof k_programs[0])

/* Every key this file compiles, of one dtype at align 8: the 8 plain ops, layernorm and
 * rmsnorm with add, add+sum and sum alone, the ewchain programs. Returns the count. */
static size_t vec_kernels(hk_dtype_t dtype, hkc_kernel_out_t out[32]) {
  size_t n = 0;
  for (size_t o = 0; o < 8; o++) out[n++] = kernel_for(o < 3 ? k_row_ops[o] : k_ew_ops[o - 3], dtype, 8);
  for (int op = HK_OP_LAYERNORM; op <= HK_OP_RMSNORM; op++)
    for (int f = 1; f < 4; f++) out[n++] = norm_kernel((hk_op_t)op, dtype, 8, f & 1, f >> 1);
  for (size_t p = 0; p < N_PROGRAMS; p++) out[n++] = ewchain_kernel(k_programs[p], dtype, 8);
  return n;
}

/* ---- selection ----------------------------------------------------------------------- */
static void test_selection(void **state) {
  (void)state;
  const char *const archs[] = {"sm_90", "sm_80", "gfx90a", "gfx1030"};
  for (size_t a = 0; a < 4; a++)
    for (size_t d = 0; d < 3; d++)
      for (int align = 0; align <= 8; align = align ? align * 2 : 1) {
        const int vec = k_dtypes[d] == HK_DTYPE_F32 ? 4 : 8;
        for (size_t o = 0; o < 8; o++) {
          const hk_op_t op = o < 3 ? k_row_ops[o] : k_ew_ops[o - 3];
          hkc_kernel_key_t key = {.op = op, .dtype = k_dtypes[d], .align = align};
          const hkc_variant_t *v = hkc_variant_for(hk_test_arch(archs[a]), &key);
          if (align >= vec) {
            assert_non_null(v);
            assert_string_equal(v->name, is_row_op(op) ? "rows_vec16" : "elementwise_vec16");
          } else {
            assert_non_null(v); /* never NULL: the simple kernel at the latest */
            assert_true(strcmp(v->name, "rows_vec16") != 0 && strcmp(v->name, "elementwise_vec16") != 0);
          }
        }
      }
  /* the fused keys: norms with add / sum stay rows_vec16, ewchain programs are
   * elementwise_vec16's; below the vector they keep the simple kernels */
  for (size_t a = 0; a < 4; a++)
    for (size_t d = 0; d < 3; d++)
      for (int align = 1; align <= 8; align *= 2) {
        const int vec = k_dtypes[d] == HK_DTYPE_F32 ? 4 : 8;
        for (int op = HK_OP_LAYERNORM; op <= HK_OP_RMSNORM; op++)
          for (int f = 1; f < 4; f++) {
            hkc_kernel_out_t k = norm_kernel((hk_op_t)op, k_dtypes[d], align, f & 1, f >> 1);
            const hkc_variant_t *v = hkc_variant_for(hk_test_arch(archs[a]), &k.key);
            assert_non_null(v);
            assert_string_equal(v->name, align >= vec ? "rows_vec16" : "simple");
          }
        for (size_t p = 0; p < N_PROGRAMS; p++) {
          hkc_kernel_out_t k = ewchain_kernel(k_programs[p], k_dtypes[d], align);
          const hkc_variant_t *v = hkc_variant_for(hk_test_arch(archs[a]), &k.key);
          assert_non_null(v);
          assert_string_equal(v->name, align >= vec ? "elementwise_vec16" : "simple");
        }
      }
  /* a malformed program is not the vector variant's: it reaches the simple kernel, whose
   * codegen refuses it */
  hkc_kernel_out_t badp = ewchain_kernel("a9", HK_DTYPE_BF16, 8);
  assert_string_equal(hkc_variant_for(hk_test_arch("sm_90"), &badp.key)->name, "simple");
  /* gemm and attention are not ours */
  hkc_kernel_key_t g = {.op = HK_OP_GEMM, .dtype = HK_DTYPE_F16, .align = 8};
  const hkc_variant_t *v = hkc_variant_for(hk_test_arch("sm_90"), &g);
  assert_non_null(v);
  assert_true(strcmp(v->name, "rows_vec16") != 0);
}

/* ---- sources ------------------------------------------------------------------------- */
static void test_sources(void **state) {
  (void)state;
  const char *const archs[] = {"sm_90", "gfx90a", "gfx1030"};
  for (size_t a = 0; a < 3; a++)
    for (size_t d = 0; d < 3; d++)
      for (size_t o = 0; o < 8; o++) {
        const hk_op_t op = o < 3 ? k_row_ops[o] : k_ew_ops[o - 3];
        hkc_kernel_out_t k = kernel_for(op, k_dtypes[d], 8);
        char *s1 = hkc_codegen_gpu(hk_test_arch(archs[a]), &k), *s2 = hkc_codegen_gpu(hk_test_arch(archs[a]), &k);
        assert_non_null(s1);
        assert_non_null(s2);
        assert_string_equal(s1, s2);
        assert_null(strstr(s1, "#include"));
        assert_non_null(strstr(s1, is_row_op(op) ? "/* variant rows_vec16 */" : "/* variant elementwise_vec16 */"));
        assert_non_null(strstr(s1, is_row_op(op) ? "templates/gpu/rows_fast.hip" : "templates/gpu/elementwise_fast.hip"));
        assert_int_equal(hk_test_source_macro(s1, "HK_VEC"), k_dtypes[d] == HK_DTYPE_F32 ? 4 : 8);
        const long long t = hk_test_source_macro(s1, "HK_THREADS");
        assert_true(t % 64 == 0 && t <= 1024);
        if (op == HK_OP_LAYERNORM || op == HK_OP_RMSNORM) {
          /* with the residual add (or sum alone): half the vectors per lane, flags set */
          hkc_kernel_out_t ka = norm_kernel(op, k_dtypes[d], 8, 1, 1);
          char *sa = hkc_codegen_gpu(hk_test_arch(archs[a]), &ka);
          assert_non_null(sa);
          const long long c = hk_test_source_macro(s1, "HK_ROW_CACHE"), ca = hk_test_source_macro(sa, "HK_ROW_CACHE");
          assert_int_equal(ca, c > 1 ? c / 2 : 1);
          const long long target = hk_test_source_macro(s1, "HK_ROW_TARGET");
          assert_int_equal(hk_test_source_macro(sa, "HK_ROW_TARGET"), target > 1 ? target / 2 : 1);
          assert_int_equal(hk_test_source_macro(sa, "HK_HAS_ADD"), 1);
          assert_int_equal(hk_test_source_macro(sa, "HK_HAS_SUM"), 1);
          assert_int_equal(hk_test_source_macro(s1, "HK_HAS_ADD"), 0);
          free(sa);
          ka = norm_kernel(op, k_dtypes[d], 8, 0, 1);
          sa = hkc_codegen_gpu(hk_test_arch(archs[a]), &ka);
          assert_int_equal(hk_test_source_macro(sa, "HK_ROW_CACHE"), c > 1 ? c / 2 : 1);
          free(sa);
        }
        free(s1);
        free(s2);
      }
  /* ewchain: the chain mode of elementwise_fast.hip, about unroll * 2 vectors in flight
   * over all operands; 16-bit outputs take the fast gelu / silu */
  for (size_t d = 0; d < 3; d++)
    for (size_t p = 0; p < N_PROGRAMS; p++) {
      hkc_kernel_out_t k = ewchain_kernel(k_programs[p], k_dtypes[d], 8);
      char *src = hkc_codegen_gpu(hk_test_arch("sm_90"), &k);
      assert_non_null(src);
      assert_non_null(strstr(src, "/* variant elementwise_vec16 */"));
      assert_int_equal(hk_test_source_macro(src, "HK_EW_CHAIN"), 1);
      const long long ops = hkc_variant_ew_operands(k_programs[p]);
      assert_int_equal(hk_test_source_macro(src, "HK_EW_NOPS"), ops);
      const long long u = 4 * 2 / ops;
      assert_int_equal(hk_test_source_macro(src, "HK_EW_UNROLL"), u > 1 ? u : 1);
      assert_int_equal(hk_test_source_macro(src, "HK_EW_FAST_ACT"), k_dtypes[d] == HK_DTYPE_F32 ? 0 : 3);
      free(src);
    }
}

/* ---- compiles -------------------------------------------------------------------------- */
/* Compiles vec_kernels of every dtype for archs[0] and of bf16 for the others (the same
 * source per vendor; bf16 has the most conversions; HKC_TEST_FULL=1: every dtype there too)
 * on n_threads threads (0: this one), prints each kernel's resources, and returns how many
 * failed (not compiled, not ELF, no register count, scratch). */
static int compile_all(const char *const *archs, size_t n_archs, hk_test_compile_fn compile, int n_threads) {
  hk_test_compile_job_t *jobs = calloc(n_archs * 3 * 32, sizeof *jobs);
  assert_non_null(jobs);
  const char *env = getenv("HKC_TEST_FULL");
  const int full = env && *env && strcmp(env, "0") != 0;
  size_t n = 0;
  for (size_t a = 0; a < n_archs; a++)
    for (size_t d = 0; d < 3; d++) {
      if (a > 0 && !full && k_dtypes[d] != HK_DTYPE_BF16) continue;
      hkc_kernel_out_t ks[32];
      const size_t nk = vec_kernels(k_dtypes[d], ks);
      for (size_t i = 0; i < nk; i++)
        jobs[n++] = (hk_test_compile_job_t){.arch = hk_test_arch(archs[a]), .kernel = ks[i]};
    }
  hk_test_compile_all(jobs, n, compile, n_threads, HK_TEST_COMPILE_ELF | HK_TEST_COMPILE_SAMPLED);
  for (size_t i = 0; i < n; i++)
    printf("[ info     ] %-36s %-8s regs %3u scratch %u shared %u\n", jobs[i].kernel.name, jobs[i].arch->name,
           jobs[i].regs, jobs[i].scratch, jobs[i].shared);
  printf("[ info     ] %zu kernels compiled\n", n);
  const int failures = hk_test_compile_failures(jobs, n);
  free(jobs);
  return failures;
}

static void test_nvrtc(void **state) {
  (void)state;
  HK_TEST_NEED_NVRTC();
  printf("[ info     ] %s\n", hkc_nvrtc_version());
  const char *const archs[] = {"sm_90", "sm_80"};
  assert_int_equal(compile_all(archs, 2, hkc_nvrtc_compile, 2), 0);
}

static void test_hiprtc(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  printf("[ info     ] %s\n", hkc_hiprtc_version());
  const char *const archs[] = {"gfx90a", "gfx1030"};
  /* hiprtc is not safe on threads: two worker processes, as hkc build runs it */
  const int workers = hk_test_start_amd_workers(2) == 0;
  const int failures = compile_all(archs, 2, hkc_hiprtc_compile, workers ? 2 : 0);
  hkc_amd_workers_stop();
  assert_int_equal(failures, 0);
}

/* ---- launch dims ----------------------------------------------------------------------- */
#define I64(v) ((hkc_arg_t){.kind = HK_ARG_I64, .i = (v)})
#define TENSOR(v) ((hkc_arg_t){.kind = HK_ARG_TENSOR, .i = (v)})
#define F32(v) ((hkc_arg_t){.kind = HK_ARG_F32, .f = (v)})

static void dims(const char *a, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n, uint32_t grid[3],
                 uint32_t block[3]) {
  uint32_t shared = 99;
  hkc_gpu_launch_dims(hk_test_arch(a), key, args, n, grid, block, &shared);
  assert_int_equal(shared, 0);
  assert_true(grid[0] >= 1 && grid[0] <= 0x7fffffffu);
  assert_int_equal(grid[1], 1);
  assert_int_equal(grid[2], 1);
  assert_int_equal(block[1], 1);
  assert_int_equal(block[2], 1);
}

/* Rows: the template's group rule, recomputed here from the source's macros; a block holds
 * HK_THREADS / g rows (a tile); the grid is one block per tile, capped at
 * HK_ROW_GRID_PER_CU blocks per CU (persistent: blocks stride over tiles); rows that fit
 * the register cache are the cached path's, and longer ones get g == HK_THREADS (the
 * streaming path's precondition). */
static void check_row_dims(void) {
  static const long long rows_list[] = {1, 2, 3, 7, 37, 513, 1000, 16384, 3 * 65537};
  static const long long cols_per_vec[] = {1, 2, 3, 7, 8, 33, 64, 127, 128, 129, 512, 1024, 1536, 4095, 5000, 100000};
  const char *const archs[] = {"sm_90", "gfx90a", "gfx1030"};
  for (size_t a = 0; a < 3; a++)
    for (size_t o = 0; o < 5; o++) /* softmax, and layernorm / rmsnorm without and with add */
      for (size_t d = 0; d < 3; d++) {
        hkc_kernel_out_t k = o < 3 ? kernel_for(k_row_ops[o], k_dtypes[d], 8)
                                   : norm_kernel(k_row_ops[o - 3], k_dtypes[d], 8, 1, 1);
        const hk_op_t op = k.key.op;
        char *src = hkc_codegen_gpu(hk_test_arch(archs[a]), &k);
        const long long threads = hk_test_source_macro(src, "HK_THREADS"), vec = hk_test_source_macro(src, "HK_VEC");
        const long long target = hk_test_source_macro(src, "HK_ROW_TARGET");
        const long long cache = hk_test_source_macro(src, "HK_ROW_CACHE");
        const long long per_cu = hk_test_source_macro(src, "HK_ROW_GRID_PER_CU");
        const long long prefetch = hk_test_source_macro(src, "HK_ROW_PREFETCH");
        const long long units = hk_test_source_macro(src, "HK_ROW_UNITS");
        free(src);
        assert_int_equal(units, (long long)hk_test_arch(archs[a])->compute_units);
        assert_true(target >= 1 && target <= cache && per_cu >= 1 && (prefetch == 0 || prefetch == 1));
        const long long cap = (long long)hk_test_arch(archs[a])->compute_units * per_cu;
        for (size_t r = 0; r < sizeof rows_list / sizeof rows_list[0]; r++)
          for (size_t c = 0; c < sizeof cols_per_vec / sizeof cols_per_vec[0]; c++) {
            const long long rows = rows_list[r], nvec = cols_per_vec[c], cols = nvec * vec;
            hkc_arg_t args[9];
            uint32_t n = 0;
            args[n++] = TENSOR(0);
            if (op != HK_OP_SOFTMAX) args[n++] = TENSOR(1);
            if (op == HK_OP_LAYERNORM) args[n++] = TENSOR(2);
            args[n++] = TENSOR(3);
            args[n++] = I64(rows);
            args[n++] = I64(cols);
            if (op != HK_OP_SOFTMAX) {
              args[n++] = F32(1e-5f);
              args[n++] = k.key.has_add ? TENSOR(4) : (hkc_arg_t){.kind = HK_ARG_NULL};
              args[n++] = k.key.has_sum ? TENSOR(5) : (hkc_arg_t){.kind = HK_ARG_NULL};
            }
            uint32_t grid[3], block[3];
            dims(archs[a], &k.key, args, n, grid, block);
            assert_int_equal(block[0], (uint32_t)threads);
            long long g = 1;
            while (g < threads && g < (nvec + target - 1) / target) g <<= 1;
            /* few rows: wider groups until the blocks cover the SMs (HK_ROW_UNITS), at most one
             * vector per lane */
            while (g < threads && g < nvec && (rows + threads / g - 1) / (threads / g) < units) g <<= 1;
            const long long rpb = threads / g, tiles = (rows + rpb - 1) / rpb;
            assert_int_equal((long long)grid[0], tiles < cap ? tiles : cap); /* blocks stride over tiles */
            assert_true(((long long)grid[0] - 1) * rpb < rows);               /* no empty block */
            assert_true(nvec <= g * cache || g == threads);                   /* streaming only at full block */
          }
      }
}

static void test_row_dims(void **state) {
  (void)state;
  check_row_dims();
}

/* Kernel options rows_cfg / ew_cfg / ew_exact_act: the key the tuner makes from them names
 * the configuration, the source's macros follow it (the launch rule is then checked against
 * them); an illegal configuration is refused (by the variant's tune_parse), never ignored. */
static void test_cfg_options(void **state) {
  (void)state;
  char err[512];
  hkc_kernel_out_t k = kernel_for(HK_OP_LAYERNORM, HK_DTYPE_BF16, 8);
  char *def = hkc_codegen_gpu(hk_test_arch("sm_90"), &k);
  hkc_kernel_options_t o = {0};
  assert_int_equal(hkc_kernel_options_set(&o, "rows_cfg", "512,8,4,2,1,3", err, sizeof err), 0);
  assert_string_equal(o.cfg[HKC_KOPT_ROWS_CFG], "t=512,c=8,tg=4,mb=2,pf=1,g=3");
  assert_int_equal(hkc_tune_apply_options(&o, "sm_90", hk_test_arch("sm_90"), &k.key), 2);
  assert_string_equal(k.key.variant, "rows_vec16");
  hkc_kernel_key_name(&k.key, k.name, sizeof k.name);
  char *src = hkc_codegen_gpu(hk_test_arch("sm_90"), &k);
  assert_int_equal(hk_test_source_macro(src, "HK_THREADS"), 512);
  assert_int_equal(hk_test_source_macro(src, "HK_ROW_CACHE"), 8);
  assert_int_equal(hk_test_source_macro(src, "HK_ROW_TARGET"), 4);
  assert_int_equal(hk_test_source_macro(src, "HK_ROW_MIN_BLOCKS"), 2);
  assert_int_equal(hk_test_source_macro(src, "HK_ROW_PREFETCH"), 1);
  assert_int_equal(hk_test_source_macro(src, "HK_ROW_GRID_PER_CU"), 3);
  assert_string_not_equal(src, def);
  free(src);
  free(def);
  /* not a power of two: parses, but the variant refuses it (an error, not the defaults) */
  assert_int_equal(hkc_kernel_options_set(&o, "rows_cfg", "500,8,4,2,1,3", err, sizeof err), 0);
  k = kernel_for(HK_OP_LAYERNORM, HK_DTYPE_BF16, 8);
  assert_int_equal(hkc_tune_apply_options(&o, "sm_90", hk_test_arch("sm_90"), &k.key), -1);
  /* per dtype: rows_cfg_f32 applies to f32 keys only */
  hkc_kernel_options_t o2 = {0};
  assert_int_equal(hkc_kernel_options_set(&o2, "rows_cfg_f32", "t=128,c=4,tg=4,mb=1,pf=0,g=2", err, sizeof err), 0);
  k = kernel_for(HK_OP_SOFTMAX, HK_DTYPE_BF16, 8);
  assert_int_equal(hkc_tune_apply_options(&o2, "sm_90", hk_test_arch("sm_90"), &k.key), 0);
  k = kernel_for(HK_OP_SOFTMAX, HK_DTYPE_F32, 4);
  assert_int_equal(hkc_tune_apply_options(&o2, "sm_90", hk_test_arch("sm_90"), &k.key), 2);
  assert_string_equal(k.key.tune, "t=128,c=4,tg=4,mb=1,pf=0,g=2");
  /* element-wise */
  hkc_kernel_out_t e = kernel_for(HK_OP_GELU, HK_DTYPE_BF16, 8);
  hkc_kernel_options_t oe = {0};
  assert_int_equal(hkc_kernel_options_set(&oe, "ew_cfg", "128,8,2,3", err, sizeof err), 0);
  assert_string_equal(oe.cfg[HKC_KOPT_EW_CFG], "t=128,u=8,mb=2,w=3,x=0");
  assert_int_equal(hkc_tune_apply_options(&oe, "sm_90", hk_test_arch("sm_90"), &e.key), 2);
  hkc_kernel_key_name(&e.key, e.name, sizeof e.name);
  src = hkc_codegen_gpu(hk_test_arch("sm_90"), &e);
  assert_int_equal(hk_test_source_macro(src, "HK_THREADS"), 128);
  assert_int_equal(hk_test_source_macro(src, "HK_EW_UNROLL"), 8);
  assert_int_equal(hk_test_source_macro(src, "HK_EW_MIN_BLOCKS"), 2);
  assert_int_equal(hk_test_source_macro(src, "HK_EW_WAVES"), 3);
  assert_int_equal(hk_test_source_macro(src, "HK_EW_FAST_ACT"), 1);
  free(src);
  /* ew_exact_act: the same configuration with x=1, fast activations off; f32 keys untouched */
  oe.ew_exact_act = 1;
  e = kernel_for(HK_OP_GELU, HK_DTYPE_BF16, 8);
  assert_int_equal(hkc_tune_apply_options(&oe, "sm_90", hk_test_arch("sm_90"), &e.key), 2);
  assert_string_equal(e.key.tune, "t=128,u=8,mb=2,w=3,x=1");
  hkc_kernel_key_name(&e.key, e.name, sizeof e.name);
  src = hkc_codegen_gpu(hk_test_arch("sm_90"), &e);
  assert_int_equal(hk_test_source_macro(src, "HK_EW_FAST_ACT"), 0);
  free(src);
  hkc_kernel_options_t ox = {.ew_exact_act = 1};
  e = kernel_for(HK_OP_GELU, HK_DTYPE_F32, 4);
  assert_int_equal(hkc_tune_apply_options(&ox, "sm_90", hk_test_arch("sm_90"), &e.key), 0);
}

/* Element-wise: block = HK_THREADS; the grid either covers all vectors in one pass or is
 * capped at a few waves of resident blocks (the kernel strides beyond). */
static void test_elementwise_dims(void **state) {
  (void)state;
  static const long long sizes[] = {8, 16, 264, 792, 8 * 1001, 1 << 20, 16384LL * 4096, 3000000008LL};
  const char *const archs[] = {"sm_90", "gfx90a", "gfx1030"};
  for (size_t a = 0; a < 3; a++)
    for (size_t o = 0; o < 5 + N_PROGRAMS; o++)
      for (size_t d = 0; d < 3; d++) {
        hkc_kernel_out_t k =
            o < 5 ? kernel_for(k_ew_ops[o], k_dtypes[d], 8) : ewchain_kernel(k_programs[o - 5], k_dtypes[d], 8);
        char *src = hkc_codegen_gpu(hk_test_arch(archs[a]), &k);
        const long long threads = hk_test_source_macro(src, "HK_THREADS"), vec = hk_test_source_macro(src, "HK_VEC");
        const long long unroll = hk_test_source_macro(src, "HK_EW_UNROLL");
        const long long waves = hk_test_source_macro(src, "HK_EW_WAVES");
        free(src);
        const hkc_gpu_arch_t *ar = hk_test_arch(archs[a]);
        const long long resident = (long long)ar->compute_units * ar->simds_per_cu * ar->max_waves_per_simd *
                                   ar->wave_size / threads;
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
          const long long n = sizes[s];
          uint32_t grid[3], block[3];
          if (k.key.op == HK_OP_EWCHAIN) {
            /* out, n, then (in_j, n_j): a full-size operand 0 and broadcast ones */
            hkc_arg_t args[12] = {TENSOR(0), I64(n), TENSOR(1), I64(n)};
            for (uint32_t j = 1; j < 5; j++) {
              args[2 + 2 * j] = TENSOR(1 + j);
              args[3 + 2 * j] = I64(j == 1 ? n : 8);
            }
            dims(archs[a], &k.key, args, 2 + 2 * (uint32_t)hkc_variant_ew_operands(k.key.program), grid, block);
          } else if (k.key.op == HK_OP_ADD || k.key.op == HK_OP_MUL) {
            hkc_arg_t args[6] = {TENSOR(0), TENSOR(1), TENSOR(2), I64(n), I64(n), I64(8)};
            dims(archs[a], &k.key, args, 6, grid, block);
          } else {
            hkc_arg_t args[3] = {TENSOR(0), TENSOR(1), I64(n)};
            dims(archs[a], &k.key, args, 3, grid, block);
          }
          assert_int_equal(block[0], (uint32_t)threads);
          const long long per_block = threads * unroll * vec;
          const long long one_pass = (n / vec + threads * unroll - 1) / (threads * unroll);
          assert_true((long long)grid[0] == one_pass || (long long)grid[0] <= waves * resident);
          assert_true((long long)grid[0] <= one_pass || one_pass == 0);
          if ((long long)grid[0] < one_pass) assert_true((long long)grid[0] >= resident); /* a full device */
          (void)per_block;
        }
      }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_selection),        cmocka_unit_test(test_sources),
      cmocka_unit_test(test_row_dims),         cmocka_unit_test(test_elementwise_dims),
      cmocka_unit_test(test_cfg_options),          cmocka_unit_test(test_nvrtc),
      cmocka_unit_test(test_hiprtc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
