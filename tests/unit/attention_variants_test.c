/* The "attention_mma" GPU variant (compiler/variant_attention_nv.c,
 * templates/gpu/attention_mma.hip): which keys it serves; that it compiles with nvrtc for
 * sm_80, sm_90 and sm_90a in f16 and bf16 with head dims 64 and 128, reports registers,
 * uses no local memory (spills) and fits its shared memory and registers on the arch;
 * and that its launches cover odd sequence lengths and grouped-query heads.
 * (cmocka skip() when nvrtc does not load.) Numerics are checked on the device. */
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

static hkc_kernel_key_t attn_key(hk_dtype_t dtype, int dh, int align) {
  return (hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = dtype, .align = align, .head_dim = dh};
}

/* attention_mma named in the key (as the kernel option attn_wgmma=off makes the tuner do on
 * sm_90a, where attention_wgmma is the default at head_dim 128); other archs ignore the name
 * when the variant does not apply. */
static hkc_kernel_key_t mma_key(hk_dtype_t dtype, int dh, int align) {
  hkc_kernel_key_t k = attn_key(dtype, dh, align);
  snprintf(k.variant, sizeof k.variant, "attention_mma");
  return k;
}


/* The variant the registry picks under kernel options (untuned key). */
static const char *variant_name_opt(const char *arch_name, const hkc_kernel_options_t *o, hkc_kernel_key_t key) {
  const hkc_variant_t *v = hkc_variant_for_options(hk_test_arch(arch_name), o, &key);
  assert_non_null(v);
  return v->name;
}


/* ---- which keys ---------------------------------------------------------------------- */
static void test_variant_selection(void **state) {
  (void)state;
  static const char *const archs[] = {"sm_80", "sm_90", "sm_90a"};
  for (size_t a = 0; a < 3; a++)
    for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
      for (int dh = 64; dh <= 128; dh += 64)
        assert_string_equal(hk_test_variant_name(archs[a], mma_key((hk_dtype_t)dt, dh, 8)), "attention_mma");
  /* everything else keeps the simple kernel */
  assert_string_equal(hk_test_variant_name("sm_90", mma_key(HK_DTYPE_F32, 64, 8)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90", mma_key(HK_DTYPE_F16, 64, 4)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90", mma_key(HK_DTYPE_F16, 64, 0)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90", mma_key(HK_DTYPE_F16, 32, 8)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90", mma_key(HK_DTYPE_BF16, 96, 8)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90", mma_key(HK_DTYPE_BF16, 256, 8)), "simple");
  assert_string_equal(hk_test_variant_name("gfx90a", mma_key(HK_DTYPE_F16, 64, 8)), "attention_mfma"); /* CDNA */
  assert_string_equal(hk_test_variant_name("gfx1030", mma_key(HK_DTYPE_F16, 64, 8)), "simple");
  hkc_kernel_key_t gemm = mma_key(HK_DTYPE_F16, 64, 8);
  gemm.op = HK_OP_GEMM;
  const hkc_variant_t *v = hkc_variant_for(hk_test_arch("sm_90"), &gemm);
  assert_non_null(v);
  assert_true(strcmp(v->name, "attention_mma") != 0);
}

/* ---- nvrtc -------------------------------------------------------------------------- */
static void test_nvrtc_compiles_without_spills(void **state) {
  (void)state;
  char why[512];
  if (hkc_nvrtc_available(why, sizeof why) != 0) {
    printf("[ SKIP     ] nvrtc: %s\n", why);
    skip();
  }
  printf("[ info     ] %s\n", hkc_nvrtc_version());
  static const char *const archs[] = {"sm_80", "sm_90", "sm_90a"};
  int failures = 0;
  for (size_t a = 0; a < 3; a++)
    for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
      for (int dh = 64; dh <= 128; dh += 64) {
        const hkc_gpu_arch_t *ar = hk_test_arch(archs[a]);
        hkc_kernel_out_t k = {.key = mma_key((hk_dtype_t)dt, dh, 8)};
        snprintf(k.name, sizeof k.name, "hk_attention_%s_d%d", dt == HK_DTYPE_F16 ? "f16" : "bf16", dh);
        char *src = hkc_codegen_gpu(ar, &k);
        assert_non_null(src);
        assert_non_null(strstr(src, "/* variant attention_mma */"));
        assert_non_null(strstr(src, "templates/gpu/tile_nv.h"));
        assert_null(strstr(src, "#include"));
        const long long threads = hk_test_source_macro(src, "HK_THREADS");
        const long long smem = hk_test_source_macro(src, "HK_ATTN_SMEM");
        const long long minb = hk_test_source_macro(src, "HK_ATTN_MINB");
        hkc_rtc_result_t r;
        const int rc = hkc_nvrtc_compile(src, k.name, ar->name, &r);
        printf("[ info     ] %-24s %-6s regs %3u  static smem %u  dynamic smem %lld  local %u  threads %lld\n",
               k.name, ar->name, r.vgprs, r.shared_bytes, smem, r.scratch_bytes, threads);
        const char *problem = rc != 0                                 ? "compile failed"
                              : r.vgprs == 0                          ? "no register count reported"
                              : r.scratch_bytes != 0                  ? "uses local memory (spills)"
                              : r.shared_bytes + smem > ar->max_lds_per_block ? "shared memory over the block limit"
                              : r.vgprs * threads * minb > ar->vgprs_per_lane ? "registers miss __launch_bounds__"
                                                                             : NULL;
        if (problem) {
          printf("[ FAIL     ] %s for %s: %s\n%.2000s\n", k.name, ar->name, problem, r.log ? r.log : "");
          failures++;
        }
        hkc_rtc_result_free(&r);
        free(src);
      }
  assert_int_equal(failures, 0);
}

/* ---- launches -------------------------------------------------------------------------- */
#define I64(v) ((hkc_arg_t){.kind = HK_ARG_I64, .i = (v)})
#define TENSOR(v) ((hkc_arg_t){.kind = HK_ARG_TENSOR, .i = (v)})
#define F32(v) ((hkc_arg_t){.kind = HK_ARG_F32, .f = (v)})

static void test_launch_dims(void **state) {
  (void)state;
  /* batch, seq_q, seq_kv, heads, kv_heads */
  static const long long shapes[][5] = {{1, 77, 77, 4, 2},  {2, 1, 1, 3, 3},        {1, 4097, 4097, 16, 4},
                                        {8, 1024, 1024, 16, 16}, {3, 77, 50, 4, 4}, {1, 129, 1, 2, 1},
                                        {8, 4096, 4096, 16, 16}};
  static const char *const archs[] = {"sm_80", "sm_90", "sm_90a"};
  for (size_t a = 0; a < 3; a++)
    for (int dh = 64; dh <= 128; dh += 64)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const long long B = shapes[s][0], Sq = shapes[s][1], Skv = shapes[s][2], H = shapes[s][3],
                        Hkv = shapes[s][4];
        const hkc_gpu_arch_t *ar = hk_test_arch(archs[a]);
        hkc_kernel_out_t k = {.name = "hk_x", .key = mma_key(HK_DTYPE_BF16, dh, 8)};
        hkc_arg_t args[17] = {TENSOR(0), TENSOR(1),   TENSOR(2),     TENSOR(3), I64(B),      I64(Sq),
                              I64(Skv),  I64(H),      I64(Hkv),      I64(dh),   I64(H * dh), I64(Hkv * dh),
                              I64(0),    I64(0),      I64(0),        I64(1),    F32(0.125f)};
        uint32_t grid[3], block[3], shared = 0;
        hkc_gpu_launch_dims(ar, &k.key, args, 17, grid, block, &shared);
        char *src = hkc_codegen_gpu(ar, &k);
        assert_non_null(src);
        const long long bq = hk_test_source_macro(src, "HK_ATTN_BQ"), threads = hk_test_source_macro(src, "HK_THREADS");
        assert_int_equal(bq, 16 * hk_test_source_macro(src, "HK_ATTN_WARPS"));
        assert_int_equal(threads, 32 * hk_test_source_macro(src, "HK_ATTN_WARPS"));
        assert_int_equal(block[0], threads);
        assert_int_equal(block[1], 1);
        assert_int_equal(block[2], 1);
        assert_int_equal(grid[1], 1);
        assert_int_equal(grid[2], 1);
        assert_int_equal(shared, hk_test_source_macro(src, "HK_ATTN_SMEM"));
        assert_true(shared <= ar->max_lds_per_block);
        /* one block per (batch, head, query tile): every query row is covered */
        const long long tiles = (Sq + bq - 1) / bq;
        assert_int_equal((long long)grid[0], B * H * tiles);
        assert_true(tiles * bq >= Sq);
        free(src);
      }
}

/* ---- attention_wgmma (sm_90a: default for dh 128; dh 64 with attn_wgmma=on; off with off) - */
static void test_wgmma_selection(void **state) {
  (void)state;
  hkc_kernel_options_t o = {0};
  assert_string_equal(hk_test_variant_name("sm_90a", attn_key(HK_DTYPE_BF16, 128, 8)), "attention_wgmma"); /* default */
  assert_string_equal(hk_test_variant_name("sm_90a", attn_key(HK_DTYPE_BF16, 64, 8)), "attention_mma");
  assert_string_equal(variant_name_opt("sm_90a", &o, attn_key(HK_DTYPE_BF16, 128, 8)), "attention_wgmma");
  o.attn_wgmma = HKC_SWITCH_OFF;
  assert_string_equal(variant_name_opt("sm_90a", &o, attn_key(HK_DTYPE_BF16, 128, 8)), "attention_mma");
  o.attn_wgmma = HKC_SWITCH_ON;
  for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
    for (int dh = 64; dh <= 128; dh += 64) {
      assert_string_equal(variant_name_opt("sm_90a", &o, attn_key((hk_dtype_t)dt, dh, 8)), "attention_wgmma");
      assert_string_equal(variant_name_opt("sm_90", &o, attn_key((hk_dtype_t)dt, dh, 8)), "attention_mma");
      assert_string_equal(variant_name_opt("sm_80", &o, attn_key((hk_dtype_t)dt, dh, 8)), "attention_mma");
    }
  assert_string_equal(variant_name_opt("sm_90a", &o, attn_key(HK_DTYPE_F16, 64, 4)), "simple");
  assert_string_equal(variant_name_opt("sm_90a", &o, attn_key(HK_DTYPE_BF16, 96, 8)), "simple");
  /* what the tuner does with them: dh 64 names attention_wgmma; simple_kernels "simple" */
  hkc_kernel_key_t k = attn_key(HK_DTYPE_BF16, 64, 8);
  assert_int_equal(hkc_tune_apply_options(&o, "sm_90a", hk_test_arch("sm_90a"), &k), 1);
  assert_string_equal(k.variant, "attention_wgmma");
  assert_string_equal(hk_test_variant_name("sm_90a", k), "attention_wgmma");
  o.simple_kernels = 1;
  assert_int_equal(hkc_tune_apply_options(&o, "sm_90a", hk_test_arch("sm_90a"), &k), 2);
  assert_string_equal(hk_test_variant_name("sm_90a", k), "simple");
}

static void test_wgmma_nvrtc(void **state) {
  (void)state;
  char why[512];
  if (hkc_nvrtc_available(why, sizeof why) != 0) {
    printf("[ SKIP     ] nvrtc: %s\n", why);
    skip();
  }
  /* the defaults ("") and the spill-free configurations to sweep (per dh: "-" skips) */
  static const char *const cfgs[][2] = {{"", ""}, {"2,64,1", "2,64,1"}, {"3,64,1", "-"}, {"2,128,1", "-"}, {"1,128,2", "-"}};
  const hkc_gpu_arch_t *ar = hk_test_arch("sm_90a");
  int failures = 0;
  for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++)
    for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
      for (int dh = 64; dh <= 128; dh += 64) {
        const char *cfg = cfgs[ci][dh == 128];
        if (!strcmp(cfg, "-")) continue;
        hkc_kernel_options_t o = {.attn_wgmma = HKC_SWITCH_ON};
        char err[512];
        assert_int_equal(hkc_kernel_options_set(&o, "attn_wgmma_cfg", cfg, err, sizeof err), 0);
        hkc_kernel_out_t k = {.key = attn_key((hk_dtype_t)dt, dh, 8)};
        assert_true(hkc_tune_apply_options(&o, "sm_90a", ar, &k.key) > 0 || (dh == 128 && !cfg[0]));
        snprintf(k.name, sizeof k.name, "hk_attnwg_%s_d%d", dt == HK_DTYPE_F16 ? "f16" : "bf16", dh);
        char *src = hkc_codegen_gpu(ar, &k);
        assert_non_null(src);
        assert_non_null(strstr(src, "/* variant attention_wgmma */"));
        assert_non_null(strstr(src, "templates/gpu/tile_wgmma.h"));
        const long long threads = hk_test_source_macro(src, "HK_THREADS");
        const long long smem = hk_test_source_macro(src, "HK_ATTN_SMEM");
        const long long minb = hk_test_source_macro(src, "HK_ATTN_MINB");
        const long long bkv = hk_test_source_macro(src, "HK_ATTN_BKV");
        hkc_rtc_result_t r;
        const int rc = hkc_nvrtc_compile(src, k.name, ar->name, &r);
        printf("[ info     ] %-20s cfg %-8s bkv %3lld threads %3lld minb %lld  regs %3u  dynamic smem %6lld  local %u\n",
               k.name, cfg[0] ? cfg : "default", bkv, threads, minb, r.vgprs, smem, r.scratch_bytes);
        const char *problem = rc != 0                                 ? "compile failed"
                              : r.vgprs == 0                          ? "no register count reported"
                              : r.scratch_bytes != 0                  ? "uses local memory (spills)"
                              : (r.shared_bytes + smem) * minb > ar->max_lds_per_block ? "shared memory over the limit"
                              : r.vgprs * threads * minb > ar->vgprs_per_lane ? "registers miss __launch_bounds__"
                              : r.log && (strstr(r.log, "warning") || strstr(r.log, "C7512")) ? "ptxas warning or wgmma serialized (C7512)"
                                                                             : NULL;
        if (problem) {
          printf("[ FAIL     ] %s (%s): %s\n%.3000s\n", k.name, cfg, problem, r.log ? r.log : "");
          failures++;
        }
        hkc_rtc_result_free(&r);
        free(src);
      }
  assert_int_equal(failures, 0);
}

int main(void) {
  /* The attention_mma tests cover every arch, sm_90a included: their keys name attention_mma
   * (mma_key); the wgmma tests use kernel options. */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_variant_selection),
      cmocka_unit_test(test_launch_dims),
      cmocka_unit_test(test_nvrtc_compiles_without_spills),
      cmocka_unit_test(test_wgmma_selection),
      cmocka_unit_test(test_wgmma_nvrtc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
