/* The NVIDIA GEMM variants (compiler/variant_gemm_nv.c): which keys and archs they serve,
 * that they compile with nvrtc for their archs in f16/bf16 with every epilogue (registers
 * reported, no local-memory spills, no ptxas warnings such as serialized wgmma), and that
 * their launches cover odd shapes with shared memory within the arch's limit and no less
 * than the template's stages need. Kernels do not run here (no GPU); bench/gemm_check.md
 * says how numerics and speed are checked on the H200. */
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

static hkc_kernel_key_t gemm_key(hk_dtype_t dtype, int act, int trans_b, int bias, int res, int align) {
  return (hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = dtype, .act = (hk_act_t)act, .trans_b = trans_b,
                            .has_bias = bias, .has_residual = res, .align = align};
}

static hkc_kernel_key_t with_mul(hkc_kernel_key_t key) {
  key.has_mul = 1;
  return key;
}

/* The key's name, with "_mul" when the canonical name does not show has_mul (yet). */


/* Under the kernel option gemm_ws=off (the previous sm_90a kernel, for A/B runs). */
static const char *variant_name_ws_off(const char *arch_name, hkc_kernel_key_t key) {
  const hkc_kernel_options_t o = {.gemm_ws = HKC_SWITCH_OFF};
  const hkc_variant_t *v = hkc_variant_for_options(hk_test_arch(arch_name), &o, &key);
  assert_non_null(v);
  return v->name;
}

static void test_selection(void **state) {
  (void)state;
  for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++) {
    assert_string_equal(hk_test_variant_name("sm_90a", gemm_key((hk_dtype_t)dt, 0, 0, 0, 0, 8)), "gemm_wgmma_ws");
    assert_string_equal(hk_test_variant_name("sm_90a", gemm_key((hk_dtype_t)dt, 2, 1, 1, 1, 8)), "gemm_wgmma_ws");
    /* the epilogue multiply (SwiGLU gate) keeps every variant */
    assert_string_equal(hk_test_variant_name("sm_90a", with_mul(gemm_key((hk_dtype_t)dt, 3, 0, 0, 0, 8))), "gemm_wgmma_ws");
    assert_string_equal(hk_test_variant_name("sm_90", with_mul(gemm_key((hk_dtype_t)dt, 3, 1, 1, 1, 8))), "gemm_mma");
    assert_string_equal(hk_test_variant_name("sm_80", with_mul(gemm_key((hk_dtype_t)dt, 0, 0, 0, 1, 8))), "gemm_mma");
    assert_string_equal(hk_test_variant_name("gfx90a", with_mul(gemm_key((hk_dtype_t)dt, 3, 0, 1, 0, 8))), "gemm_mfma");
    assert_string_equal(variant_name_ws_off("sm_90a", with_mul(gemm_key((hk_dtype_t)dt, 3, 1, 0, 1, 8))), "gemm_wgmma");
    assert_string_equal(hk_test_variant_name("sm_90", with_mul(gemm_key((hk_dtype_t)dt, 3, 1, 0, 1, 4))), "simple");
    /* gemm_ws=off: the previous sm_90a kernel, for A/B runs */
    assert_string_equal(variant_name_ws_off("sm_90a", gemm_key((hk_dtype_t)dt, 2, 1, 1, 1, 8)), "gemm_wgmma");
    assert_string_equal(hk_test_variant_name("sm_90", gemm_key((hk_dtype_t)dt, 0, 1, 0, 0, 8)), "gemm_mma");
    assert_string_equal(hk_test_variant_name("sm_80", gemm_key((hk_dtype_t)dt, 0, 0, 1, 0, 8)), "gemm_mma");
    /* alignment below 8 elements, f32: the simple kernel; AMD CDNA: gemm_mfma (amd_variants_test) */
    assert_string_equal(hk_test_variant_name("sm_90a", gemm_key((hk_dtype_t)dt, 0, 0, 0, 0, 4)), "simple");
    assert_string_equal(hk_test_variant_name("sm_90", gemm_key((hk_dtype_t)dt, 0, 0, 0, 0, 2)), "simple");
    assert_string_equal(hk_test_variant_name("gfx90a", gemm_key((hk_dtype_t)dt, 0, 0, 0, 0, 8)), "gemm_mfma");
  }
  assert_string_equal(hk_test_variant_name("sm_90a", gemm_key(HK_DTYPE_F32, 0, 0, 0, 0, 8)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90", gemm_key(HK_DTYPE_F32, 0, 0, 0, 0, 8)), "simple");
  /* a non-gemm key is not taken by a gemm variant (element-wise ones may serve it) */
  hkc_kernel_key_t add = {.op = HK_OP_ADD, .dtype = HK_DTYPE_F16, .align = 8};
  const hkc_variant_t *v = hkc_variant_for(hk_test_arch("sm_90a"), &add);
  assert_non_null(v);
  assert_true(strncmp(v->name, "gemm", 4) != 0);
}

/* ---- nvrtc compiles ---------------------------------------------------------------------- */
/* Every epilogue (5 activations x bias x residual x mul x both B layouts) in f16 and bf16
 * on sm_90a, sm_90 and sm_80 when HKC_TEST_FULL is set; otherwise, per dtype: on sm_90a
 * every flag combination with gelu and the plain and full epilogues of every activation,
 * each with and without mul; on sm_90 / sm_80 the plain and full epilogues with none and
 * gelu, and silu with mul alone and with everything (the SwiGLU gate). */
static void test_nvrtc_variants(void **state) {
  (void)state;
  HK_TEST_NEED_NVRTC();
  const char *env = getenv("HKC_TEST_FULL");
  const int full = env && *env && strcmp(env, "0") != 0;
  static const char *const archs[] = {"sm_90a", "sm_90", "sm_80"};
  static const char *const expect[] = {"gemm_wgmma_ws", "gemm_mma", "gemm_mma"};
  hk_test_compile_job_t *jobs = calloc(3 * 2 * 80, sizeof *jobs);
  assert_non_null(jobs);
  size_t n = 0;
  for (size_t a = 0; a < 3; a++)
    for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
      for (int act = 0; act < HK_ACT_COUNT_; act++)
        for (int flags = 0; flags < 16; flags++) {
          const int tb = flags & 1, res = (flags >> 1) & 1, bias = (flags >> 2) & 1, mul = flags >> 3;
          const int ends = (flags & 7) == 0 || (flags & 7) == 7, gelu = act == HK_ACT_GELU;
          const int swiglu = act == HK_ACT_SILU && mul && ((flags & 7) == 0 || (flags & 7) == 7);
          const int pick = full || (a == 0 && (ends || (gelu && !mul))) ||
                           (a > 0 && ((ends && !mul && (act == 0 || gelu)) || swiglu));
          if (!pick) continue;
          hk_test_compile_job_t *j = &jobs[n++];
          j->arch = hk_test_arch(archs[a]);
          j->kernel.key = gemm_key((hk_dtype_t)dt, act, tb, bias, res, 8);
          j->kernel.key.has_mul = mul;
          hk_test_kernel_name(&j->kernel);
          assert_string_equal(hkc_variant_for(j->arch, &j->kernel.key)->name, expect[a]);
        }
  printf("[ info     ] %zu variant compiles%s\n", n, full ? "" : " (HKC_TEST_FULL=1 compiles every epilogue)");
  hk_test_compile_all(jobs, n, hkc_nvrtc_compile, 2, HK_TEST_COMPILE_NO_WARNINGS);
  const int failures = hk_test_compile_failures(jobs, n);
  uint32_t max_regs[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    const hk_test_compile_job_t *j = &jobs[i];
    const size_t a = strcmp(j->arch->name, "sm_90a") == 0 ? 0 : strcmp(j->arch->name, "sm_90") == 0 ? 1 : 2;
    if (j->regs > max_regs[a]) max_regs[a] = j->regs;
  }
  for (size_t a = 0; a < 3; a++) printf("[ info     ] %s: at most %u registers\n", archs[a], max_regs[a]);
  /* gemm_wgmma_ws: ptxas reports the entry budget of 384 threads (<= 168); the consumer
   * warpgroups raise theirs to 232 with setmaxnreg (a problem there would be a spill or a
   * C7508 warning, both failures above) */
  assert_true(max_regs[0] <= 232);
  free(jobs);
  assert_int_equal(failures, 0);
}

/* The other sm_90a configurations: gemm_wgmma (kernel option gemm_ws=off) and gemm_wgmma_ws
 * with BN 128 (gemm_ws_cfg), plain and full epilogues (bias, residual and mul), both B
 * layouts, bf16. The options set the key as the tuner does. */
static void compile_one(const char *option, const char *expect, int act, int tb, int full) {
  hkc_kernel_options_t o = {0};
  char err[512];
  assert_int_equal(hkc_kernel_options_set_arg(&o, option, err, sizeof err), 0);
  hk_test_compile_job_t j = {.arch = hk_test_arch("sm_90a")};
  j.kernel.key = gemm_key(HK_DTYPE_BF16, act, tb, full, full, 8);
  j.kernel.key.has_mul = full;
  assert_true(hkc_tune_apply_options(&o, "sm_90a", j.arch, &j.kernel.key) > 0);
  hk_test_kernel_name(&j.kernel);
  assert_string_equal(hkc_variant_for(j.arch, &j.kernel.key)->name, expect);
  hk_test_compile_one(&j, hkc_nvrtc_compile, HK_TEST_COMPILE_NO_WARNINGS);
  printf("[ info     ] %s %s: regs %u, scratch %u%s%s\n", option, j.kernel.name, j.regs, j.scratch,
         j.ok ? "" : ", ", j.ok ? "" : j.error);
  assert_true(j.ok);
  assert_int_equal(j.scratch, 0);
  assert_true(j.regs > 0);
}

static void test_nvrtc_sm90a_alternatives(void **state) {
  (void)state;
  HK_TEST_NEED_NVRTC();
  for (int tb = 0; tb < 2; tb++)
    for (int full = 0; full < 2; full++) {
      compile_one("gemm_ws=off", "gemm_wgmma", full ? HK_ACT_GELU : 0, tb, full);
      compile_one("gemm_ws_cfg=128,6,0", "gemm_wgmma_ws", full ? HK_ACT_GELU : 0, tb, full);
    }
}

/* ---- launches -------------------------------------------------------------------------- */
#define I64(v) ((hkc_arg_t){.kind = HK_ARG_I64, .i = (v)})
#define TENSOR(v) ((hkc_arg_t){.kind = HK_ARG_TENSOR, .i = (v)})
#define NUL ((hkc_arg_t){.kind = HK_ARG_NULL})

static void test_launch_covers_odd_shapes(void **state) {
  (void)state;
  static const char *const archs[] = {"sm_90a", "sm_90", "sm_80"};
  static const long long ms[] = {1, 77, 128, 4097, 8192};
  static const long long ns[] = {8, 136, 256, 4104, 14336};
  for (size_t a = 0; a < 3; a++)
    for (int tb = 0; tb < 2; tb++) {
      const hkc_gpu_arch_t *ar = hk_test_arch(archs[a]);
      hkc_kernel_out_t k = {.name = "hk_x", .key = with_mul(gemm_key(HK_DTYPE_BF16, 2, tb, 1, 1, 8))};
      char *src = hkc_codegen_gpu(ar, &k);
      assert_non_null(src);
      const long long tm = hk_test_source_macro(src, "HK_TILE_M"), tn = hk_test_source_macro(src, "HK_TILE_N");
      const long long threads = hk_test_source_macro(src, "HK_THREADS");
      const long long stages = hk_test_source_macro(src, "HK_STAGES");
      assert_non_null(strstr(src, a == 0 ? "gemm_wgmma_ws.hip" : "gemm_mma.hip"));
      free(src);
      for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
          const long long M = ms[i], N = ns[j], K = 72;
          hkc_arg_t args[9] = {TENSOR(0), TENSOR(1), TENSOR(2), NUL, TENSOR(3), I64(M), I64(N), I64(K), TENSOR(4)};
          uint32_t grid[3], block[3], shared = 0;
          hkc_gpu_launch_dims(ar, &k.key, args, 9, grid, block, &shared);
          assert_int_equal(grid[1], 1);
          assert_int_equal(grid[2], 1);
          assert_int_equal(block[1], 1);
          assert_int_equal(block[2], 1);
          assert_int_equal(block[0], (uint32_t)threads);
          /* one block per tile (the kernel strides beyond grid.x); sm_90a (gemm_wgmma_ws):
           * persistent, one block per SM at most */
          const long long tiles = ((M + tm - 1) / tm) * ((N + tn - 1) / tn);
          if (a == 0)
            assert_true((long long)grid[0] == (tiles < ar->compute_units ? tiles : (long long)ar->compute_units));
          else
            assert_true((long long)grid[0] >= tiles);
          /* the stages' tiles fit; within the arch's per-block limit */
          assert_true((long long)shared >= stages * (tm + tn) * 64 * 2);
          assert_true(shared <= ar->max_lds_per_block);
        }
    }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_selection),
      cmocka_unit_test(test_launch_covers_odd_shapes),
      cmocka_unit_test(test_nvrtc_variants),
      cmocka_unit_test(test_nvrtc_sm90a_alternatives),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
