/* The AMD matrix-core variants (compiler/variant_amd.c): which keys select gemm_mfma /
 * attention_mfma, their launches, and -- when hiprtc and comgr load (cmocka skip()
 * otherwise, with the reason printed) -- real compiles for gfx90a and gfx908 in f16 and
 * bf16 with epilogue combinations (incl. the epilogue multiply), checked statically: no
 * scratch (spills), LDS within 64 KiB, plausible VGPR/AGPR counts, v_mfma in the
 * disassembly, occupancy >= 1 wave per SIMD. gfx1030 (no matrix cores) must keep the simple kernels and still compile them.
 * Nothing runs: there is no AMD GPU; numerics are unverified on hardware. */
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

static hkc_kernel_key_t gemm_key(hk_dtype_t dt, hk_act_t act, int bias, int res, int tb, int align) {
  return (hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = dt, .act = act, .trans_b = tb, .has_bias = bias,
                            .has_residual = res, .align = align};
}
static hkc_kernel_key_t attn_key(hk_dtype_t dt, int dh, int align) {
  return (hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = dt, .align = align, .head_dim = dh};
}

/* ---- selection (no toolchain needed) ------------------------------------------------------ */
static void test_selection(void **state) {
  (void)state;
  static const char *const cdna[] = {"gfx90a", "gfx908", "gfx942", "gfx950"};
  for (size_t i = 0; i < 4; i++) {
    for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++) {
      assert_string_equal(hk_test_variant_name(cdna[i], gemm_key((hk_dtype_t)dt, HK_ACT_GELU, 1, 1, 0, 8)),
                          "gemm_mfma");
      assert_string_equal(hk_test_variant_name(cdna[i], gemm_key((hk_dtype_t)dt, HK_ACT_NONE, 0, 0, 1, 8)),
                          "gemm_mfma");
      hkc_kernel_key_t gate = gemm_key((hk_dtype_t)dt, HK_ACT_SILU, 1, 1, 0, 8);
      gate.has_mul = 1; /* the SwiGLU epilogue keeps the matrix cores */
      assert_string_equal(hk_test_variant_name(cdna[i], gate), "gemm_mfma");
      assert_string_equal(hk_test_variant_name(cdna[i], attn_key((hk_dtype_t)dt, 64, 8)), "attention_mfma");
      assert_string_equal(hk_test_variant_name(cdna[i], attn_key((hk_dtype_t)dt, 128, 8)), "attention_mfma");
      /* rows not 16-byte multiples, unsupported head dims: the simple kernels */
      assert_string_equal(hk_test_variant_name(cdna[i], gemm_key((hk_dtype_t)dt, HK_ACT_NONE, 0, 0, 0, 4)), "simple");
      assert_string_equal(hk_test_variant_name(cdna[i], gemm_key((hk_dtype_t)dt, HK_ACT_NONE, 0, 0, 0, 0)), "simple");
      assert_string_equal(hk_test_variant_name(cdna[i], attn_key((hk_dtype_t)dt, 64, 4)), "simple");
      assert_string_equal(hk_test_variant_name(cdna[i], attn_key((hk_dtype_t)dt, 96, 8)), "simple");
      assert_string_equal(hk_test_variant_name(cdna[i], attn_key((hk_dtype_t)dt, 0, 8)), "simple");
    }
    assert_string_equal(hk_test_variant_name(cdna[i], gemm_key(HK_DTYPE_F32, HK_ACT_NONE, 0, 0, 0, 8)), "simple");
    assert_string_equal(hk_test_variant_name(cdna[i], attn_key(HK_DTYPE_F32, 64, 8)), "simple");
  }
  /* no matrix cores: FMA path */
  assert_string_equal(hk_test_variant_name("gfx1030", gemm_key(HK_DTYPE_F16, HK_ACT_NONE, 1, 0, 0, 8)), "simple");
  assert_string_equal(hk_test_variant_name("gfx1030", attn_key(HK_DTYPE_BF16, 64, 8)), "simple");
  /* NVIDIA targets never get an AMD variant */
  assert_string_not_equal(hk_test_variant_name("sm_90", gemm_key(HK_DTYPE_F16, HK_ACT_NONE, 1, 0, 0, 8)), "gemm_mfma");
  assert_string_not_equal(hk_test_variant_name("sm_90", attn_key(HK_DTYPE_F16, 64, 8)), "attention_mfma");
}

/* ---- launches cover tails ------------------------------------------------------------------- */
static void test_launch(void **state) {
  (void)state;
  uint32_t grid[3], block[3], shared = 99;
  hkc_kernel_key_t g = gemm_key(HK_DTYPE_F16, HK_ACT_NONE, 1, 0, 0, 8);
  hkc_arg_t ga[8] = {{.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR},
                     {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_I64, .i = 1000},
                     {.kind = HK_ARG_I64, .i = 776}, {.kind = HK_ARG_I64, .i = 520}};
  hkc_gpu_launch_dims(hk_test_arch("gfx90a"), &g, ga, 8, grid, block, &shared);
  assert_int_equal(grid[0], 8 * 7); /* ceil(1000/128) * ceil(776/128) */
  assert_int_equal(block[0], 256);
  assert_int_equal(grid[1] * grid[2] * block[1] * block[2], 1);
  assert_int_equal(shared, 0);
  ga[5].i = 1; /* M = 1: one row tile */
  hkc_gpu_launch_dims(hk_test_arch("gfx908"), &g, ga, 8, grid, block, &shared);
  assert_int_equal(grid[0], 7);

  hkc_kernel_key_t a = attn_key(HK_DTYPE_BF16, 64, 8);
  hkc_arg_t aa[17];
  memset(aa, 0, sizeof aa);
  for (int i = 0; i < 4; i++) aa[i].kind = HK_ARG_TENSOR;
  const int64_t iv[] = {2, 300, 300, 12, 4, 64, 3 * 768, 3 * 768, 0, 768, 1536, 1};
  for (int i = 0; i < 12; i++) aa[4 + i] = (hkc_arg_t){.kind = HK_ARG_I64, .i = iv[i]};
  aa[16].kind = HK_ARG_F32;
  hkc_gpu_launch_dims(hk_test_arch("gfx90a"), &a, aa, 17, grid, block, &shared);
  assert_int_equal(grid[0], 2 * 12 * 3); /* batch * heads * ceil(300 / 128) */
  assert_int_equal(block[0], 256);
  assert_int_equal(shared, 0);
}

/* ---- real compiles ----------------------------------------------------------------------- */
/* Generates and compiles key for arch; checks the variant's static properties. */
static void compile_checked(const char *arch_name, hkc_kernel_key_t key, const char *want_variant) {
  const hkc_gpu_arch_t *a = hk_test_arch(arch_name);
  hkc_kernel_out_t k;
  memset(&k, 0, sizeof k);
  k.key = key;
  hk_test_kernel_name(&k);
  char *src = hkc_codegen_gpu(a, &k);
  assert_non_null(src);
  const int mfma = want_variant != NULL;
  assert_true((strstr(src, "templates/gpu/tile_amd.h") != NULL) == mfma);
  assert_string_equal(hk_test_variant_name(arch_name, key), mfma ? want_variant : "simple");
  hkc_rtc_result_t r;
  int rc = hkc_hiprtc_compile(src, k.name, arch_name, &r);
  if (rc != 0) print_message("%s for %s did not compile:\n%s\n", k.name, arch_name, r.log ? r.log : "(no log)");
  assert_int_equal(rc, 0);
  free(src);
  k.vgprs = r.vgprs;
  k.agprs = r.agprs;
  k.sgprs = r.sgprs;
  k.shared_bytes = r.shared_bytes;
  k.scratch_bytes = r.scratch_bytes;
  k.wave_size = r.wave_size;
  k.max_block = r.max_block;
  uint32_t grid[3], block[3], dyn = 0;
  hkc_arg_t none[1] = {{.kind = HK_ARG_I64, .i = 0}};
  hkc_gpu_launch_dims(a, &key, none, 0, grid, block, &dyn);
  double pct = 0;
  const char *limiter = "";
  const uint32_t occ = hkc_occupancy(a, &k, block[0], &pct, &limiter);
  printf("[ info     ] %-8s %-30s %-14s vgpr %3u agpr %3u sgpr %3u lds %5u scratch %u wave %u block %u occ %u/SIMD "
         "(%.0f%%, %s)\n",
         arch_name, k.name, want_variant ? want_variant : "simple", r.vgprs, r.agprs, r.sgprs, r.shared_bytes,
         r.scratch_bytes, r.wave_size, block[0], occ, pct, limiter ? limiter : "-");
  assert_int_equal(r.scratch_bytes, 0);
  assert_true(r.shared_bytes <= 65536);
  assert_true(r.vgprs > 0 && r.vgprs <= 512);
  assert_true(occ >= 1);
  if (mfma) {
    assert_int_equal(r.wave_size, 64);
    assert_int_equal(block[0], 256);
    assert_int_equal(r.max_block, 256);
    assert_true(r.shared_bytes > 0);
    /* gfx908: separate 256 VGPR + 256 AGPR files; gfx90a: one 512 file, and comgr's
     * .vgpr_count there is the unified total (arch VGPRs rounded to 4, plus AGPRs) */
    assert_true(r.agprs <= 256);
    assert_true(strcmp(arch_name, "gfx908") == 0 ? r.vgprs <= 256 : r.vgprs <= 512 && r.vgprs >= r.agprs);
    char *text = NULL;
    char why[512];
    rc = hkc_comgr_disassemble(r.code, r.code_size, arch_name, &text, why, sizeof why);
    if (rc != 0) print_message("disassemble: %s\n", why);
    assert_int_equal(rc, 0);
    const char *want = key.dtype != HK_DTYPE_BF16        ? "v_mfma_f32_32x32x8f16"
                       : strcmp(arch_name, "gfx908") == 0 ? "v_mfma_f32_32x32x4bf16"
                                                          : "v_mfma_f32_32x32x8bf16_1k";
    if (!strstr(text, want)) print_message("%s for %s: no %s in the disassembly\n", k.name, arch_name, want);
    assert_non_null(strstr(text, want));
    assert_null(strstr(text, "scratch_"));
    assert_null(strstr(text, "buffer_store_dword v")); /* no spill stores through buffers either */
    free(text);
  }
  hkc_rtc_result_free(&r);
}

/* mul: the epilogue multiply act(acc + bias) * mul (+ residual), the SwiGLU gate */
static const struct {
  hk_act_t act;
  int bias, res, tb, mul;
} k_epilogues[] = {
    {HK_ACT_NONE, 0, 0, 0, 0}, {HK_ACT_GELU, 1, 1, 1, 0}, {HK_ACT_RELU, 1, 0, 0, 0}, {HK_ACT_SILU, 0, 1, 1, 0},
    {HK_ACT_GELU_TANH, 1, 1, 0, 0}, {HK_ACT_SILU, 0, 0, 0, 1}, {HK_ACT_SILU, 1, 1, 1, 1},
};

static void gemm_on(const char *arch_name) {
  for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
    for (size_t e = 0; e < sizeof k_epilogues / sizeof *k_epilogues; e++) {
      hkc_kernel_key_t key = gemm_key((hk_dtype_t)dt, k_epilogues[e].act, k_epilogues[e].bias, k_epilogues[e].res,
                                      k_epilogues[e].tb, 8);
      key.has_mul = k_epilogues[e].mul;
      compile_checked(arch_name, key, "gemm_mfma");
    }
}
static void attention_on(const char *arch_name) {
  for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
    for (int dh = 64; dh <= 128; dh += 64) compile_checked(arch_name, attn_key((hk_dtype_t)dt, dh, 8), "attention_mfma");
}

static void test_gemm_gfx90a(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  gemm_on("gfx90a");
}
static void test_gemm_gfx908(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  gemm_on("gfx908");
}
static void test_attention_gfx90a(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  attention_on("gfx90a");
}
static void test_attention_gfx908(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  attention_on("gfx908");
}

/* gfx1030 has no MFMA: the same keys build through the simple (FMA) kernels. */
static void test_gfx1030_simple(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  compile_checked("gfx1030", gemm_key(HK_DTYPE_F16, HK_ACT_GELU, 1, 1, 0, 8), NULL);
  compile_checked("gfx1030", gemm_key(HK_DTYPE_BF16, HK_ACT_NONE, 0, 0, 1, 8), NULL);
  hkc_kernel_key_t gate = gemm_key(HK_DTYPE_BF16, HK_ACT_SILU, 1, 1, 0, 8);
  gate.has_mul = 1;
  compile_checked("gfx1030", gate, NULL);
  compile_checked("gfx1030", attn_key(HK_DTYPE_F16, 64, 8), NULL);
  compile_checked("gfx1030", attn_key(HK_DTYPE_BF16, 128, 8), NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_selection),        cmocka_unit_test(test_launch),
      cmocka_unit_test(test_gemm_gfx90a),      cmocka_unit_test(test_gemm_gfx908),
      cmocka_unit_test(test_attention_gfx90a), cmocka_unit_test(test_attention_gfx908),
      cmocka_unit_test(test_gfx1030_simple),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
