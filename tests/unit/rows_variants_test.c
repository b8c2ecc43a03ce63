/* The memory-bound GPU variants of compiler/variant_rows.c: rows_vec16 (layernorm,
 * rmsnorm, softmax) and elementwise_vec16 (add, mul, relu, gelu, silu).
 *  - which keys they serve (align a multiple of the 16-byte vector; others stay simple)
 *  - every variant compiles with nvrtc (sm_90, sm_80) and hiprtc (gfx90a wave64, gfx1030
 *    wave32), reports registers and uses no scratch (spills); skip() when a toolchain
 *    does not load
 *  - launch dims cover odd rows and cols (checked against the macros in the generated
 *    source, so a drift between launch and template fails here)
 * No kernel runs here: numerics and speed are checked on a device (bench/rows). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_variant.h"
#include "hkc.h"

static const hkc_gpu_arch_t *arch(const char *name) {
  const hkc_gpu_arch_t *a = hkc_gpu_arch_find(name);
  assert_non_null(a);
  return a;
}

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

static long long source_macro(const char *src, const char *name) {
  char pat[64];
  snprintf(pat, sizeof pat, "#define %s ", name);
  const char *p = strstr(src, pat);
  assert_non_null(p);
  return atoll(p + strlen(pat));
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
          const hkc_gpu_variant_t *v = hkc_gpu_variant_for(arch(archs[a]), &key);
          if (align >= vec) {
            assert_non_null(v);
            assert_string_equal(v->name, is_row_op(op) ? "rows_vec16" : "elementwise_vec16");
          } else {
            assert_true(v == NULL || (strcmp(v->name, "rows_vec16") != 0 && strcmp(v->name, "elementwise_vec16") != 0));
          }
        }
      }
  /* gemm and attention are not ours */
  hkc_kernel_key_t g = {.op = HK_OP_GEMM, .dtype = HK_DTYPE_F16, .align = 8};
  const hkc_gpu_variant_t *v = hkc_gpu_variant_for(arch("sm_90"), &g);
  assert_true(v == NULL || strcmp(v->name, "rows_vec16") != 0);
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
        char *s1 = hkc_codegen_gpu(arch(archs[a]), &k), *s2 = hkc_codegen_gpu(arch(archs[a]), &k);
        assert_non_null(s1);
        assert_non_null(s2);
        assert_string_equal(s1, s2);
        assert_null(strstr(s1, "#include"));
        assert_non_null(strstr(s1, is_row_op(op) ? "/* variant rows_vec16 */" : "/* variant elementwise_vec16 */"));
        assert_non_null(strstr(s1, is_row_op(op) ? "templates/gpu/rows_fast.hip" : "templates/gpu/elementwise_fast.hip"));
        assert_int_equal(source_macro(s1, "HK_VEC"), k_dtypes[d] == HK_DTYPE_F32 ? 4 : 8);
        const long long t = source_macro(s1, "HK_THREADS");
        assert_true(t % 64 == 0 && t <= 1024);
        free(s1);
        free(s2);
      }
}

/* ---- compiles -------------------------------------------------------------------------- */
typedef int (*compile_fn_t)(const char *source, const char *name, const char *arch, hkc_rtc_result_t *out);

static int compile_all(const char *const *archs, size_t n_archs, compile_fn_t compile) {
  static const unsigned char elf[4] = {0x7f, 'E', 'L', 'F'};
  int failures = 0, n = 0;
  for (size_t a = 0; a < n_archs; a++)
    for (size_t d = 0; d < 3; d++)
      for (size_t o = 0; o < 8; o++) {
        const hk_op_t op = o < 3 ? k_row_ops[o] : k_ew_ops[o - 3];
        hkc_kernel_out_t k = kernel_for(op, k_dtypes[d], 8);
        char *src = hkc_codegen_gpu(arch(archs[a]), &k);
        assert_non_null(src);
        hkc_rtc_result_t r;
        const int rc = compile(src, k.name, archs[a], &r);
        const char *problem = rc != 0 ? "compile failed"
                              : r.code_size < 4 || memcmp(r.code, elf, 4) != 0 ? "code object is not ELF"
                              : r.vgprs == 0 ? "no register count"
                              : r.scratch_bytes != 0 ? "uses scratch (spills)"
                                                     : NULL;
        printf("[ info     ] %-24s %-8s regs %3u scratch %u shared %u%s%s\n", k.name, archs[a], r.vgprs,
               r.scratch_bytes, r.shared_bytes, problem ? "  FAIL: " : "", problem ? problem : "");
        if (problem && r.log) printf("%.2000s\n", r.log);
        failures += problem != NULL;
        n++;
        hkc_rtc_result_free(&r);
        free(src);
      }
  printf("[ info     ] %d kernels compiled\n", n);
  return failures;
}

static void test_nvrtc(void **state) {
  (void)state;
  char why[512];
  if (hkc_nvrtc_available(why, sizeof why) != 0) {
    printf("[ SKIP     ] nvrtc: %s\n", why);
    skip();
  }
  printf("[ info     ] %s\n", hkc_nvrtc_version());
  const char *const archs[] = {"sm_90", "sm_80"};
  assert_int_equal(compile_all(archs, 2, hkc_nvrtc_compile), 0);
}

static void test_hiprtc(void **state) {
  (void)state;
  char why[512];
  if (hkc_hiprtc_available(why, sizeof why) != 0) {
    printf("[ SKIP     ] hiprtc: %s\n", why);
    skip();
  }
  printf("[ info     ] %s\n", hkc_hiprtc_version());
  const char *const archs[] = {"gfx90a", "gfx1030"};
  assert_int_equal(compile_all(archs, 2, hkc_hiprtc_compile), 0);
}

/* ---- launch dims ----------------------------------------------------------------------- */
#define I64(v) ((hkc_arg_t){.kind = HK_ARG_I64, .i = (v)})
#define TENSOR(v) ((hkc_arg_t){.kind = HK_ARG_TENSOR, .i = (v)})
#define F32(v) ((hkc_arg_t){.kind = HK_ARG_F32, .f = (v)})

static void dims(const char *a, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n, uint32_t grid[3],
                 uint32_t block[3]) {
  uint32_t shared = 99;
  hkc_gpu_launch_dims(arch(a), key, args, n, grid, block, &shared);
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
    for (size_t o = 0; o < 3; o++)
      for (size_t d = 0; d < 3; d++) {
        hkc_kernel_out_t k = kernel_for(k_row_ops[o], k_dtypes[d], 8);
        char *src = hkc_codegen_gpu(arch(archs[a]), &k);
        const long long threads = source_macro(src, "HK_THREADS"), vec = source_macro(src, "HK_VEC");
        const long long target = source_macro(src, "HK_ROW_TARGET"), cache = source_macro(src, "HK_ROW_CACHE");
        const long long per_cu = source_macro(src, "HK_ROW_GRID_PER_CU");
        const long long prefetch = source_macro(src, "HK_ROW_PREFETCH");
        free(src);
        assert_true(target >= 1 && target <= cache && per_cu >= 1 && (prefetch == 0 || prefetch == 1));
        const long long cap = (long long)arch(archs[a])->compute_units * per_cu;
        for (size_t r = 0; r < sizeof rows_list / sizeof rows_list[0]; r++)
          for (size_t c = 0; c < sizeof cols_per_vec / sizeof cols_per_vec[0]; c++) {
            const long long rows = rows_list[r], nvec = cols_per_vec[c], cols = nvec * vec;
            hkc_arg_t args[7];
            uint32_t n = 0;
            args[n++] = TENSOR(0);
            if (k_row_ops[o] != HK_OP_SOFTMAX) args[n++] = TENSOR(1);
            if (k_row_ops[o] == HK_OP_LAYERNORM) args[n++] = TENSOR(2);
            args[n++] = TENSOR(3);
            args[n++] = I64(rows);
            args[n++] = I64(cols);
            if (k_row_ops[o] != HK_OP_SOFTMAX) args[n++] = F32(1e-5f);
            uint32_t grid[3], block[3];
            dims(archs[a], &k.key, args, n, grid, block);
            assert_int_equal(block[0], (uint32_t)threads);
            long long g = 1;
            while (g < threads && g < (nvec + target - 1) / target) g <<= 1;
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

/* HKC_ROWS_CFG / HKC_EW_CFG: the source's macros follow the override (the launch rule is
 * then checked against them), invalid strings leave the defaults. */
static void test_cfg_env(void **state) {
  (void)state;
  hkc_kernel_out_t k = kernel_for(HK_OP_LAYERNORM, HK_DTYPE_BF16, 8);
  char *def = hkc_codegen_gpu(arch("sm_90"), &k);
  setenv("HKC_ROWS_CFG", "512,8,4,2,1,3", 1);
  char *src = hkc_codegen_gpu(arch("sm_90"), &k);
  assert_int_equal(source_macro(src, "HK_THREADS"), 512);
  assert_int_equal(source_macro(src, "HK_ROW_CACHE"), 8);
  assert_int_equal(source_macro(src, "HK_ROW_TARGET"), 4);
  assert_int_equal(source_macro(src, "HK_ROW_MIN_BLOCKS"), 2);
  assert_int_equal(source_macro(src, "HK_ROW_PREFETCH"), 1);
  assert_int_equal(source_macro(src, "HK_ROW_GRID_PER_CU"), 3);
  free(src);
  check_row_dims();
  setenv("HKC_ROWS_CFG", "500,8,4,2,1,3", 1); /* not a power of two: ignored */
  src = hkc_codegen_gpu(arch("sm_90"), &k);
  assert_string_equal(src, def);
  free(src);
  unsetenv("HKC_ROWS_CFG");
  free(def);
  hkc_kernel_out_t e = kernel_for(HK_OP_GELU, HK_DTYPE_BF16, 8);
  setenv("HKC_EW_CFG", "128,8,2,3", 1);
  src = hkc_codegen_gpu(arch("sm_90"), &e);
  assert_int_equal(source_macro(src, "HK_THREADS"), 128);
  assert_int_equal(source_macro(src, "HK_EW_UNROLL"), 8);
  assert_int_equal(source_macro(src, "HK_EW_MIN_BLOCKS"), 2);
  assert_int_equal(source_macro(src, "HK_EW_WAVES"), 3);
  assert_int_equal(source_macro(src, "HK_EW_FAST_ACT"), 1);
  free(src);
  unsetenv("HKC_EW_CFG");
}

/* Element-wise: block = HK_THREADS; the grid either covers all vectors in one pass or is
 * capped at a few waves of resident blocks (the kernel strides beyond). */
static void test_elementwise_dims(void **state) {
  (void)state;
  static const long long sizes[] = {8, 16, 264, 792, 8 * 1001, 1 << 20, 16384LL * 4096, 3000000008LL};
  const char *const archs[] = {"sm_90", "gfx90a", "gfx1030"};
  for (size_t a = 0; a < 3; a++)
    for (size_t o = 0; o < 5; o++)
      for (size_t d = 0; d < 3; d++) {
        hkc_kernel_out_t k = kernel_for(k_ew_ops[o], k_dtypes[d], 8);
        char *src = hkc_codegen_gpu(arch(archs[a]), &k);
        const long long threads = source_macro(src, "HK_THREADS"), vec = source_macro(src, "HK_VEC");
        const long long unroll = source_macro(src, "HK_EW_UNROLL"), waves = source_macro(src, "HK_EW_WAVES");
        free(src);
        const hkc_gpu_arch_t *ar = arch(archs[a]);
        const long long resident = (long long)ar->compute_units * ar->simds_per_cu * ar->max_waves_per_simd *
                                   ar->wave_size / threads;
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
          const long long n = sizes[s];
          uint32_t grid[3], block[3];
          if (k_ew_ops[o] == HK_OP_ADD || k_ew_ops[o] == HK_OP_MUL) {
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
      cmocka_unit_test(test_cfg_env),          cmocka_unit_test(test_nvrtc),
      cmocka_unit_test(test_hiprtc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
