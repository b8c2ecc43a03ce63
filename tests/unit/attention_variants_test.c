/* SPDX-License-Identifier: Apache-2.0 */
/* The "attention_mma" GPU variant (compiler/variant_attention_nv.c,
 * templates/gpu/attention_mma.hip): which keys it serves; that it compiles with nvrtc for
 * sm_80, sm_90 and sm_90a in f16 and bf16 with head dims 64 and 128, reports registers,
 * uses no local memory (spills) and fits its shared memory and registers on the arch;
 * and that its launches cover odd sequence lengths and grouped-query heads.
 * attention_tma (sm_90a, templates/gpu/attention_tma.hip): selection (the default on sm_90a for
 * f16/bf16, dh 64/128, align 8; sm_90 and sm_80 keep attention_mma; attn_tma=off gives the
 * previous kernels), legality of its configurations, every configuration of its space compiled
 * for sm_90a without spills or serialized wgmmas, launches with their three tensor maps.
 * Split-KV (kvs) and grouped-query row packing (gp): legality, launches, workspaces, compiles, and
 * the model's choice on decode and self-attention shapes.
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

/* ---- key lengths and additive masks (the masked ABI) ---------------------------------------- */
static hkc_kernel_key_t masked_key(hk_dtype_t dtype, int dh, int lengths, int mask) {
  hkc_kernel_key_t k = attn_key(dtype, dh, 8);
  k.has_lengths = lengths, k.has_mask = mask;
  return k;
}

/* The masked ABI (lengths, mask): attention_mma on every NVIDIA arch (sm_90a's TMA and
 * wgmma kernels do not take it), attention_mfma on CDNA; keys no fast kernel serves (f32,
 * RDNA) stay simple. */
static void test_masked_selection(void **state) {
  (void)state;
  static const char *const nv[] = {"sm_80", "sm_90", "sm_90a"};
  for (size_t a = 0; a < 3; a++)
    for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
      for (int dh = 64; dh <= 128; dh += 64) {
        assert_string_equal(hk_test_variant_name(nv[a], masked_key((hk_dtype_t)dt, dh, 1, 0)), "attention_mma");
        assert_string_equal(hk_test_variant_name(nv[a], masked_key((hk_dtype_t)dt, dh, 0, 1)), "attention_mma");
        assert_string_equal(hk_test_variant_name(nv[a], masked_key((hk_dtype_t)dt, dh, 1, 1)), "attention_mma");
      }
  assert_string_equal(hk_test_variant_name("sm_90a", masked_key(HK_DTYPE_F16, 64, 0, 0)), "attention_tma");
  assert_string_equal(hk_test_variant_name("gfx90a", masked_key(HK_DTYPE_F16, 64, 1, 0)), "attention_mfma");
  assert_string_equal(hk_test_variant_name("gfx908", masked_key(HK_DTYPE_BF16, 128, 1, 0)), "attention_mfma");
  assert_string_equal(hk_test_variant_name("gfx90a", masked_key(HK_DTYPE_F16, 64, 0, 1)), "attention_mfma");
  assert_string_equal(hk_test_variant_name("gfx908", masked_key(HK_DTYPE_BF16, 64, 1, 1)), "attention_mfma");
  assert_string_equal(hk_test_variant_name("gfx1030", masked_key(HK_DTYPE_F16, 64, 0, 1)), "simple");
  assert_string_equal(hk_test_variant_name("gfx1030", masked_key(HK_DTYPE_F16, 64, 1, 0)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90", masked_key(HK_DTYPE_F32, 64, 1, 0)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90a", masked_key(HK_DTYPE_F32, 64, 1, 1)), "simple");
  /* the masked ABI is in the kernel's name */
  hkc_kernel_out_t k = {.key = masked_key(HK_DTYPE_F16, 64, 1, 1)};
  hk_test_kernel_name(&k);
  assert_string_equal(k.name, "hk_attention_f16_len_mask_a8_d64");
}

/* The masked kernels compile without spills: attention_mma with lengths, a mask and both
 * (dh 64 and 128: both scale modes), the simple kernel with both (f32); on AMD
 * attention_mfma with lengths and with both, the simple kernel with a mask (gfx1030). */
static void test_masked_compiles(void **state) {
  (void)state;
  static const struct {
    const char *arch;
    hk_dtype_t dtype;
    int dh, lengths, mask;
  } nv[] = {{"sm_80", HK_DTYPE_F16, 64, 1, 0}, {"sm_90", HK_DTYPE_BF16, 64, 1, 0}, {"sm_90a", HK_DTYPE_F16, 128, 0, 1},
            {"sm_90a", HK_DTYPE_BF16, 64, 1, 1}, {"sm_90", HK_DTYPE_F32, 64, 1, 1}},
    amd[] = {{"gfx90a", HK_DTYPE_F16, 64, 1, 0}, {"gfx90a", HK_DTYPE_BF16, 128, 1, 1}, {"gfx1030", HK_DTYPE_F16, 64, 0, 1}};
  char why[512];
  for (int vendor = 0; vendor < 2; vendor++) {
    const int n = vendor == 0 ? 5 : 3;
    if (vendor == 0 ? hkc_nvrtc_available(why, sizeof why) != 0 : hkc_hiprtc_available(why, sizeof why) != 0) {
      printf("[ SKIP     ] %s: %s\n", vendor == 0 ? "nvrtc" : "hiprtc", why);
      continue;
    }
    hk_test_compile_job_t jobs[5];
    memset(jobs, 0, sizeof jobs);
    for (int i = 0; i < n; i++) {
      jobs[i].arch = hk_test_arch(vendor == 0 ? nv[i].arch : amd[i].arch);
      jobs[i].kernel.key = vendor == 0 ? masked_key(nv[i].dtype, nv[i].dh, nv[i].lengths, nv[i].mask)
                                       : masked_key(amd[i].dtype, amd[i].dh, amd[i].lengths, amd[i].mask);
      hk_test_kernel_name(&jobs[i].kernel);
    }
    if (vendor == 0) {
      hk_test_compile_all(jobs, (size_t)n, hkc_nvrtc_compile, 2, HK_TEST_COMPILE_NO_WARNINGS);
    } else {
      const int workers = hk_test_start_amd_workers(2) == 0;
      hk_test_compile_all(jobs, (size_t)n, hkc_hiprtc_compile, workers ? 2 : 0, HK_TEST_COMPILE_ELF);
      hkc_amd_workers_stop();
    }
    assert_int_equal(hk_test_compile_failures(jobs, (size_t)n), 0);
  }
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

/* ---- attention_wgmma (sm_90a with attn_tma=off: default for dh 128; dh 64 with
 * attn_wgmma=on; off with off) ---------------------------------------------------------------- */
static void test_wgmma_selection(void **state) {
  (void)state;
  hkc_kernel_options_t o = {.attn_tma = HKC_SWITCH_OFF};
  assert_string_equal(variant_name_opt("sm_90a", &o, attn_key(HK_DTYPE_BF16, 128, 8)), "attention_wgmma");
  assert_string_equal(variant_name_opt("sm_90a", &o, attn_key(HK_DTYPE_BF16, 64, 8)), "attention_mma");
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
        hkc_kernel_options_t o = {.attn_wgmma = HKC_SWITCH_ON, .attn_tma = HKC_SWITCH_OFF};
        char err[512];
        assert_int_equal(hkc_kernel_options_set(&o, "attn_wgmma_cfg", cfg, err, sizeof err), 0);
        hkc_kernel_out_t k = {.key = attn_key((hk_dtype_t)dt, dh, 8)};
        assert_true(hkc_tune_apply_options(&o, "sm_90a", ar, &k.key) >= 0); /* dh 128 default: nothing to name */
        assert_string_equal(hkc_variant_for(ar, &k.key)->name, "attention_wgmma");
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


/* ---- attention_tma (sm_90a, the default; attn_tma=off: the previous kernels) ---------------- */
/* A key naming attention_tma, as attn_tma=on (or a tuning database) makes it; params NULL: its
 * defaults. */
static hkc_kernel_key_t tma_key(hk_dtype_t dtype, int dh, const char *params) {
  hkc_kernel_key_t k = attn_key(dtype, dh, 8);
  snprintf(k.variant, sizeof k.variant, "attention_tma");
  snprintf(k.tune, sizeof k.tune, "%s", params ? params : "");
  return k;
}

static void test_tma_selection(void **state) {
  (void)state;
  for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
    for (int dh = 64; dh <= 128; dh += 64) {
      const hkc_kernel_key_t k = attn_key((hk_dtype_t)dt, dh, 8);
      const char *const old = dh == 128 ? "attention_wgmma" : "attention_mma";
      assert_string_equal(hk_test_variant_name("sm_90a", k), "attention_tma"); /* the default */
      /* sm_90 (no wgmma, no setmaxnreg in nvrtc's sm_90) and sm_80 keep the mma.sync kernel */
      assert_string_equal(hk_test_variant_name("sm_90", k), "attention_mma");
      assert_string_equal(hk_test_variant_name("sm_80", k), "attention_mma");
      hkc_kernel_options_t o = {0};
      hk_test_options(&o, "attn_tma=off"); /* the previous kernels */
      assert_string_equal(variant_name_opt("sm_90a", &o, k), old);
      hkc_kernel_key_t named = k; /* off: the previous kernel named in the key */
      assert_int_equal(hkc_tune_apply_options(&o, "sm_90a", hk_test_arch("sm_90a"), &named), 1);
      assert_string_equal(named.variant, old);
      hk_test_options(&o, "attn_tma=on"); /* the default already: the key stays untouched */
      assert_string_equal(variant_name_opt("sm_90a", &o, k), "attention_tma");
      named = k;
      assert_int_equal(hkc_tune_apply_options(&o, "sm_90a", hk_test_arch("sm_90a"), &named), 0);
      assert_string_equal(named.variant, "");
      assert_string_equal(hkc_variant_for(hk_test_arch("sm_90a"), &named)->name, "attention_tma");
      hk_test_options(&o, "simple_kernels=1");
      assert_string_equal(variant_name_opt("sm_90a", &o, k), "simple");
    }
  /* what falls back: f32, align < 8, other head sizes */
  assert_string_equal(hk_test_variant_name("sm_90a", attn_key(HK_DTYPE_F32, 64, 8)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90a", attn_key(HK_DTYPE_F16, 64, 4)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90a", attn_key(HK_DTYPE_BF16, 32, 8)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90a", attn_key(HK_DTYPE_BF16, 96, 8)), "simple");
  assert_string_equal(hk_test_variant_name("sm_90a", attn_key(HK_DTYPE_BF16, 256, 8)), "simple");
  /* attn_tma=on leaves attention_tma alone in the tuner's candidates where it applies */
  hkc_kernel_options_t on = {0};
  hk_test_options(&on, "attn_tma=on");
  hkc_tile_cfg_t cands[HKC_TUNE_MAX_CANDIDATES];
  const int n_on = hkc_tune_candidates_for(hk_test_arch("sm_90a"), &on, &(hkc_kernel_key_t){.op = HK_OP_ATTENTION,
      .dtype = HK_DTYPE_BF16, .align = 8, .head_dim = 128}, cands, HKC_TUNE_MAX_CANDIDATES);
  assert_true(n_on > 1);
  for (int i = 0; i < n_on; i++) assert_string_equal(cands[i].variant, "attention_tma");
}

/* tune_parse: legal configurations, canonical; refused ones (registers, shared memory, rules) */
static void test_tma_legality(void **state) {
  (void)state;
  const hkc_gpu_arch_t *ar = hk_test_arch("sm_90a");
  const hkc_kernel_key_t named = tma_key(HK_DTYPE_BF16, 128, NULL);
  const hkc_variant_t *v = hkc_variant_for(ar, &named);
  assert_string_equal(v->name, "attention_tma");
  hkc_tile_cfg_t t;
  static const struct {
    int dh;
    const char *params;
    int legal;
  } cases[] = {
      {128, "wg=2,kv=128,st=3,pp=1,ov=1,p=1", 1}, /* the default at dh 128 (225 KiB) */
      {64, "wg=2,kv=128,st=2,pp=1,ov=1,p=1", 1},  /* the default at dh 64 */
      {128, "wg=2,kv=128,st=2,pp=1,ov=1,p=1", 1},
      {128, "wg=2,kv=128,st=3,pp=0,ov=1,p=0", 1}, /* overlap without ping-pong */
      {128, "wg=2,kv=128,st=2,pp=0,ov=0,p=1", 1}, /* the simple pipeline */
      {128, "wg=3,kv=64,st=2,pp=1,ov=1,p=1", 1},
      {128, "wg=1,kv=64,st=2,pp=0,ov=1,p=1", 1},
      {64, "wg=3,kv=128,st=2,pp=1,ov=1,p=1", 1},  /* 160 registers: O 32 + S 64 + P 32 + 32 */
      {64, "wg=2,kv=192,st=2,pp=1,ov=1,p=1", 1},
      {64, "wg=1,kv=192,st=2,pp=0,ov=1,p=1", 1},
      {128, "wg=2,kv=128,st=4,pp=1,ov=1,p=1", 0}, /* 288 KiB */
      {128, "wg=2,kv=192,st=2,pp=1,ov=1,p=1", 0}, /* registers: 64 + 96 + 48 + 32 > 232 (ptxas spills) */
      {128, "wg=3,kv=128,st=2,pp=1,ov=1,p=1", 0}, /* registers: 64 + 64 + 32 + 32 > 160 (ptxas spills) */
      {64, "wg=3,kv=192,st=2,pp=1,ov=1,p=1", 0},
      {128, "wg=1,kv=128,st=2,pp=0,ov=1,p=1", 0}, /* two blocks of 145 KiB do not fit an SM */
      {128, "wg=1,kv=64,st=2,pp=1,ov=1,p=1", 0},  /* ping-pong needs two consumers */
      {128, "wg=4,kv=64,st=2,pp=1,ov=1,p=1", 0},
      {128, "wg=2,kv=256,st=2,pp=1,ov=1,p=1", 0},
      {128, "wg=2,kv=96,st=2,pp=1,ov=1,p=1", 0},
      {64, "wg=2,kv=64,st=1,pp=1,ov=1,p=1", 0},
      {64, "wg=2,kv=64,st=7,pp=1,ov=1,p=1", 0},
      {64, "wg=2,kv=64,st=2,pp=2,ov=1,p=1", 0},
      {64, "wg=2,kv=64,st=2,pp=1,ov=1,p=2", 0},
      {64, "wg=2,kv=64,st=2,pp=1,ov=1", 0}, /* not canonical */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const hkc_kernel_key_t k = tma_key(HK_DTYPE_BF16, cases[i].dh, NULL);
    const int rc = v->tune_parse(ar, &k, cases[i].params, &t);
    if ((rc == 0) != cases[i].legal) fail_msg("dh %d %s: tune_parse %d", cases[i].dh, cases[i].params, rc);
    if (rc == 0) {
      assert_string_equal(t.tune, cases[i].params);
      assert_int_equal(t.is_default, strcmp(cases[i].params, cases[i].dh == 128 ? "wg=2,kv=128,st=3,pp=1,ov=1,p=1"
                                                                                 : "wg=2,kv=128,st=2,pp=1,ov=1,p=1") == 0);
      assert_true(t.shared_bytes <= ar->max_lds_per_block);
    }
  }
  /* the space: default first, every entry legal and distinct, 64-row tiles for short sequences */
  for (int dh = 64; dh <= 128; dh += 64) {
    hkc_tile_cfg_t space[64];
    const hkc_kernel_key_t k = tma_key(HK_DTYPE_BF16, dh, NULL);
    const int n = v->tune_space(ar, &k, space, 64);
    assert_true(n >= 6 && n < 64);
    assert_true(space[0].is_default);
    int wg1 = 0;
    for (int i = 0; i < n; i++) {
      assert_int_equal(v->tune_parse(ar, &k, space[i].tune, &t), 0);
      assert_true(i == 0 || !space[i].is_default);
      for (int j = 0; j < i; j++) assert_string_not_equal(space[i].tune, space[j].tune);
      wg1 += space[i].bm == 64;
    }
    assert_true(wg1 > 0);
  }
}

/* Every configuration of the space (bf16; p does not change the code, so p=1 only), the
 * simpler schedules and the defaults in f16: compiles with nvrtc for sm_90a, no local memory,
 * no ptxas warning, no serialized wgmmas (ptxas's C7510..C7520 notes), the entry register
 * budget of the block size (the consumers' setmaxnreg budget is checked by ptxas: a region
 * over it would spill). The defaults and the f16 set always; the rest of the space is a sampled
 * set (hk_test_sampled_out). */
static void test_tma_nvrtc(void **state) {
  (void)state;
  HK_TEST_NEED_NVRTC();
  const hkc_gpu_arch_t *ar = hk_test_arch("sm_90a");
  const hkc_variant_t *v = hkc_variant_for(ar, &(hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = HK_DTYPE_BF16,
                                                                   .align = 8, .head_dim = 64});
  hk_test_compile_job_t jobs[96];
  size_t n = 0;
  for (int dh = 64; dh <= 128; dh += 64) {
    hkc_tile_cfg_t space[64];
    const int m = v->tune_space(ar, &(hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = HK_DTYPE_BF16, .align = 8,
                                                        .head_dim = dh}, space, 64);
    for (int i = 0; i < m; i++) {
      if (!strstr(space[i].tune, ",p=1")) continue;
      memset(&jobs[n], 0, sizeof jobs[n]);
      jobs[n].arch = ar;
      jobs[n].kernel.key = tma_key(HK_DTYPE_BF16, dh, space[i].is_default ? NULL : space[i].tune);
      jobs[n].always = space[i].is_default; /* the rest of the space: the sampled set */
      hk_test_kernel_name(&jobs[n++].kernel);
    }
    static const char *const more[] = {NULL, "wg=2,kv=128,st=2,pp=0,ov=0,p=1", "wg=2,kv=128,st=2,pp=1,ov=0,p=1",
                                       "wg=2,kv=128,st=2,pp=0,ov=1,p=1", "wg=3,kv=64,st=2,pp=0,ov=0,p=1"};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
      memset(&jobs[n], 0, sizeof jobs[n]);
      jobs[n].arch = ar;
      jobs[n].kernel.key = tma_key(HK_DTYPE_F16, dh, more[i]);
      jobs[n].always = 1;
      hk_test_kernel_name(&jobs[n++].kernel);
    }
  }
  assert_true(n <= sizeof jobs / sizeof jobs[0]);
  hk_test_compile_all(jobs, n, hkc_nvrtc_compile, 2,
                      HK_TEST_COMPILE_NO_WARNINGS | HK_TEST_COMPILE_NO_WGMMA_SERIAL | HK_TEST_COMPILE_SAMPLED);
  int failures = hk_test_compile_failures(jobs, n);
  for (size_t i = 0; i < n; i++) {
    char *src = hkc_codegen_gpu(ar, &jobs[i].kernel);
    assert_non_null(src);
    assert_non_null(strstr(src, "/* variant attention_tma */"));
    const long long threads = hk_test_source_macro(src, "HK_THREADS"), minb = hk_test_source_macro(src, "HK_ATTN_MINB");
    const long long smem = hk_test_source_macro(src, "HK_ATTN_SMEM");
    const long long budget = 65536 / (threads * minb) / 8 * 8;
    printf("[ info     ] %-34s %-32s threads %3lld x %lld  regs %3u (entry budget %lld)  smem %6lld  local %u\n",
           jobs[i].kernel.name, jobs[i].kernel.key.tune[0] ? jobs[i].kernel.key.tune : "default", threads, minb,
           jobs[i].regs, budget, smem, jobs[i].scratch);
    if (jobs[i].ok && !jobs[i].sampled_out && (jobs[i].regs > budget || (jobs[i].shared + smem) * minb > ar->lds_per_cu ||
                       jobs[i].shared + smem > ar->max_lds_per_block)) {
      printf("[ FAIL     ] %s: registers or shared memory over the limits\n", jobs[i].kernel.name);
      failures++;
    }
    free(src);
  }
  assert_int_equal(failures, 0);
}

/* Launches: grid (persistent: at most the SMs x blocks per SM; else one block per work tile),
 * block, shared memory, and the three tensor maps after the ABI's 17 arguments. */
static void test_tma_launch(void **state) {
  (void)state;
  const hkc_gpu_arch_t *ar = hk_test_arch("sm_90a");
  /* batch, seq_q, seq_kv, heads, kv_heads */
  static const long long shapes[][5] = {{1, 77, 77, 4, 2},       {2, 1, 1, 3, 3},  {1, 128, 128, 12, 12},
                                        {8, 1024, 1024, 16, 16}, {3, 77, 50, 4, 4}, {16, 512, 512, 32, 8},
                                        {8, 4096, 4096, 16, 16}};
  static const char *const cfgs[] = {NULL, "wg=2,kv=128,st=2,pp=1,ov=1,p=0", "wg=1,kv=64,st=2,pp=0,ov=1,p=1",
                                     "wg=3,kv=64,st=2,pp=1,ov=1,p=1"};
  for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++)
    for (int dh = 64; dh <= 128; dh += 64)
      for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++) {
        const long long B = shapes[sh][0], Sq = shapes[sh][1], Skv = shapes[sh][2], H = shapes[sh][3],
                        Hkv = shapes[sh][4];
        hkc_kernel_out_t k = {.name = "hk_x", .key = tma_key(HK_DTYPE_BF16, dh, cfgs[c])};
        assert_string_equal(hkc_variant_for(ar, &k.key)->name, "attention_tma");
        hkc_arg_t args[HKC_MAX_ARGS] = {TENSOR(5), TENSOR(6),    TENSOR(7),     TENSOR(8), I64(B),      I64(Sq),
                                        I64(Skv),  I64(H),       I64(Hkv),      I64(dh),   I64(H * dh), I64(Hkv * dh),
                                        I64(0),    I64(0),       I64(0),        I64(1),    F32(0.125f)};
        uint32_t grid[3], block[3], shared = 0;
        hkc_gpu_launch_dims(ar, &k.key, args, 17, grid, block, &shared);
        const uint32_t n_args = hkc_gpu_launch_args(ar, &k.key, args, 17, HKC_MAX_ARGS);
        char *src = hkc_codegen_gpu(ar, &k);
        assert_non_null(src);
        const long long bq = hk_test_source_macro(src, "HK_ATTN_BQ"), bkv = hk_test_source_macro(src, "HK_ATTN_BKV");
        const long long threads = hk_test_source_macro(src, "HK_THREADS"), minb = hk_test_source_macro(src, "HK_ATTN_MINB");
        const int persistent = !cfgs[c] || strstr(cfgs[c], ",p=1") != NULL;
        assert_int_equal(block[0], threads);
        assert_int_equal(threads, 128 + 2 * bq);
        assert_int_equal(grid[1] * grid[2] * block[1] * block[2], 1);
        assert_int_equal(shared, hk_test_source_macro(src, "HK_ATTN_SMEM"));
        const long long tiles = B * H * ((Sq + bq - 1) / bq);
        const long long want = persistent && tiles > 132 * minb ? 132 * minb : tiles;
        assert_int_equal((long long)grid[0], want);
        assert_int_equal(n_args, 20);
        const int64_t tensors[3] = {5, 6, 7};
        const long long outer[3] = {bq, bkv, bkv};
        for (int m = 0; m < 3; m++) {
          const uint64_t tv = (uint64_t)args[17 + m].i;
          assert_int_equal(args[17 + m].kind, HK_ARG_TMAP);
          assert_int_equal(hk_tmap_tensor(tv), tensors[m]);
          assert_int_equal(hk_tmap_box_inner(tv), 64);
          assert_int_equal(hk_tmap_box_outer(tv), outer[m]);
          assert_int_equal(hk_tmap_swizzle(tv), HK_TMAP_SWIZZLE_128B);
        }
        free(src);
      }
  /* the older kernels take no tensor maps */
  hkc_kernel_key_t old = mma_key(HK_DTYPE_BF16, 64, 8);
  hkc_arg_t args[HKC_MAX_ARGS] = {TENSOR(5), TENSOR(6), TENSOR(7), TENSOR(8), I64(1), I64(77), I64(77), I64(4), I64(4),
                                  I64(64),   I64(256),  I64(256),  I64(0),    I64(0), I64(0),  I64(0),  F32(0.125f)};
  assert_int_equal(hkc_gpu_launch_args(ar, &old, args, 17, HKC_MAX_ARGS), 17);
  assert_int_equal(hkc_gpu_launch_args(hk_test_arch("sm_90"), &old, args, 17, HKC_MAX_ARGS), 17);
}

/* ---- split-KV (attention_mma kvs > 1; flash-decoding) ---------------------------------------- */
/* A key naming attention_mma with params (NULL: its defaults). */
static hkc_kernel_key_t mma_cfg_key(hk_dtype_t dtype, int dh, const char *params) {
  hkc_kernel_key_t k = mma_key(dtype, dh, 8);
  snprintf(k.tune, sizeof k.tune, "%s", params ? params : "");
  return k;
}

/* tune_parse (kvs optional, named only when > 1, 1..16), the space, the launch (kvs blocks per
 * tile) and the workspace (B H Sq kvs (dh + 2) f32, a counter per tile; none unsplit). */
static void test_split_legality_workspace(void **state) {
  (void)state;
  static const char *const archs[] = {"sm_80", "sm_90", "sm_90a"};
  for (size_t a = 0; a < 3; a++) {
    const hkc_gpu_arch_t *ar = hk_test_arch(archs[a]);
    const hkc_kernel_key_t named = mma_key(HK_DTYPE_BF16, 128, 8);
    const hkc_variant_t *v = hkc_variant_for(ar, &named);
    assert_string_equal(v->name, "attention_mma");
    hkc_tile_cfg_t t;
    static const struct {
      const char *params, *canonical;
    } ok[] = {{"w=4,kv=64,mb=2,kvs=8", "w=4,kv=64,mb=2,kvs=8"}, {"w=4,kv=64,mb=2,kvs=1", "w=4,kv=64,mb=2"},
              {"w=8,kv=64,mb=1,kvs=16", "w=8,kv=64,mb=1,kvs=16"}, {"w=4,kv=32,mb=2,kvs=3", "w=4,kv=32,mb=2,kvs=3"},
              {"w=4,kv=64,mb=2", "w=4,kv=64,mb=2"}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
      assert_int_equal(v->tune_parse(ar, &named, ok[i].params, &t), 0);
      assert_string_equal(t.tune, ok[i].canonical);
      assert_true(t.split_kv >= 1);
    }
    static const char *const bad[] = {"w=4,kv=64,mb=2,kvs=0", "w=4,kv=64,mb=2,kvs=17", "w=4,kv=64,kvs=2",
                                      "w=3,kv=64,mb=2,kvs=2", "w=8,kv=64,mb=2,kvs=2" /* registers: w mb <= 8 */};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_equal(v->tune_parse(ar, &named, bad[i], &t), -1);
    /* the space: the default first, split 2..16 on the split tile, all distinct and legal */
    for (int dh = 64; dh <= 128; dh += 64) {
      hkc_tile_cfg_t space[64];
      const hkc_kernel_key_t k = mma_key(HK_DTYPE_BF16, dh, 8);
      const int n = v->tune_space(ar, &k, space, 64);
      assert_true(space[0].is_default);
      int kvs_seen = 0;
      for (int i = 0; i < n; i++) {
        assert_int_equal(v->tune_parse(ar, &k, space[i].tune, &t), 0);
        for (int j = 0; j < i; j++) assert_string_not_equal(space[i].tune, space[j].tune);
        if (strstr(space[i].tune, "w=4,kv=64,mb=2,kvs=")) kvs_seen |= space[i].split_kv;
      }
      assert_int_equal(kvs_seen, 2 | 4 | 8 | 16);
    }
    /* launches and workspaces: batch, seq_q, seq_kv, heads, kv_heads */
    static const long long shapes[][5] = {{1, 1, 4097, 32, 8}, {8, 16, 16384, 32, 32}, {4, 64, 1000, 32, 8},
                                          {2, 77, 333, 4, 4},  {3, 129, 50, 2, 1}};
    static const int kvss[] = {1, 2, 4, 8, 16};
    for (int dh = 64; dh <= 128; dh += 64)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t q = 0; q < 5; q++) {
          const long long B = shapes[s][0], Sq = shapes[s][1], Skv = shapes[s][2], H = shapes[s][3], Hkv = shapes[s][4];
          char params[HKC_TUNE_MAX];
          snprintf(params, sizeof params, "w=4,kv=64,mb=2,kvs=%d", kvss[q]);
          hkc_kernel_out_t k = {.name = "hk_x", .key = mma_cfg_key(HK_DTYPE_F16, dh, params)};
          hkc_arg_t args[17] = {TENSOR(0), TENSOR(1), TENSOR(2), TENSOR(3),   I64(B),        I64(Sq),
                                I64(Skv),  I64(H),    I64(Hkv),  I64(dh),     I64(H * dh),   I64(Hkv * dh),
                                I64(0),    I64(0),    I64(0),    I64(s & 1),  F32(0.125f)};
          uint32_t grid[3], block[3], shared = 0;
          hkc_gpu_launch_dims(ar, &k.key, args, 17, grid, block, &shared);
          const long long tiles = B * H * ((Sq + 63) / 64);
          assert_int_equal((long long)grid[0], tiles * kvss[q]);
          assert_int_equal(block[0], 128);
          hkc_node_workspace_t ws = {0};
          const int has = hkc_gpu_launch_workspace(ar, &k.key, args, 17, &ws);
          char *src = hkc_codegen_gpu(ar, &k);
          assert_non_null(src);
          assert_int_equal(hk_test_source_macro(src, "HK_ATTN_KVS"), kvss[q]);
          free(src);
          if (kvss[q] == 1) {
            assert_int_equal(has, 0);
            assert_int_equal(ws.scratch_bytes, 0);
            continue;
          }
          assert_int_equal(has, 1);
          assert_int_equal(ws.scratch_bytes, (uint64_t)(B * H * Sq * kvss[q] * (dh + 2) * 4));
          assert_int_equal(ws.counters, (uint32_t)tiles);
        }
  }
  /* the kernel options: attn_mma_cfg's optional fourth value, attn_kvs (on sm_90a instead of
   * attention_tma, the tile of attn_mma_cfg or the default; 0 gives the choice back) */
  hkc_kernel_options_t o = {0};
  char err[512];
  assert_int_equal(hkc_kernel_options_set(&o, "attn_mma_cfg", "4,64,2,8", err, sizeof err), 0);
  assert_string_equal(o.cfg[HKC_KOPT_ATTN_MMA_CFG], "w=4,kv=64,mb=2,kvs=8");
  assert_int_equal(hkc_kernel_options_set(&o, "attn_mma_cfg", "4,64,2", err, sizeof err), 0);
  assert_string_equal(o.cfg[HKC_KOPT_ATTN_MMA_CFG], "w=4,kv=64,mb=2");
  assert_int_equal(hkc_kernel_options_set(&o, "attn_kvs", "17", err, sizeof err), -1);
  assert_int_equal(hkc_kernel_options_set(&o, "attn_kvs", "x", err, sizeof err), -1);
  assert_int_equal(hkc_kernel_options_set(&o, "attn_kvs", "4", err, sizeof err), 0);
  char text[256];
  hkc_kernel_options_format(&o, text, sizeof text);
  assert_string_equal(text, "attn_kvs=4;attn_mma_cfg=w=4,kv=64,mb=2");
  for (int dh = 64; dh <= 128; dh += 64) {
    hkc_kernel_key_t k = attn_key(HK_DTYPE_BF16, dh, 8);
    assert_int_equal(hkc_tune_apply_options(&o, "sm_90a", hk_test_arch("sm_90a"), &k), 2);
    assert_string_equal(k.variant, "attention_mma");
    assert_string_equal(k.tune, "w=4,kv=64,mb=2,kvs=4");
    k = attn_key(HK_DTYPE_F16, dh, 8);
    assert_int_equal(hkc_tune_apply_options(&o, "sm_80", hk_test_arch("sm_80"), &k), 2);
    assert_string_equal(k.tune, "w=4,kv=64,mb=2,kvs=4");
  }
  hkc_kernel_options_t d = {0};
  hk_test_options(&d, "attn_kvs=2");
  hkc_kernel_key_t k = attn_key(HK_DTYPE_BF16, 64, 8);
  assert_int_equal(hkc_tune_apply_options(&d, "sm_90a", hk_test_arch("sm_90a"), &k), 2);
  assert_string_equal(k.tune, "w=4,kv=64,mb=2,kvs=2"); /* the split tile */
  hk_test_options(&d, "attn_kvs=1");
  k = attn_key(HK_DTYPE_BF16, 128, 8);
  assert_int_equal(hkc_tune_apply_options(&d, "sm_90a", hk_test_arch("sm_90a"), &k), 2);
  assert_string_equal(k.variant, "attention_mma");
  assert_string_equal(k.tune, "w=4,kv=64,mb=2");
  k = attn_key(HK_DTYPE_F32, 128, 8); /* not attention_mma's: untouched */
  assert_int_equal(hkc_tune_apply_options(&d, "sm_90a", hk_test_arch("sm_90a"), &k), 0);
}

/* The split tile (kvs 2 and 16) and 128-row tiles split (also with the masked ABI): compiles for
 * sm_80, sm_90 and sm_90a without spills or warnings, within __launch_bounds__. */
/* HKC_TEST_FULL set (not "0"): the split and gp compiles on every NVIDIA arch; else on sm_80 and
 * sm_90a (split) and sm_90a (gp) -- sm_90 builds the same mma.sync code as sm_90a. */
static int test_full(void) {
  const char *env = getenv("HKC_TEST_FULL");
  return env && *env && strcmp(env, "0") != 0;
}

static void test_split_nvrtc(void **state) {
  (void)state;
  HK_TEST_NEED_NVRTC();
  static const char *const all_archs[] = {"sm_80", "sm_90", "sm_90a"}, *const few_archs[] = {"sm_80", "sm_90a"};
  const char *const *archs = test_full() ? all_archs : few_archs;
  const size_t n_archs = test_full() ? 3 : 2;
  static const char *const cfgs[] = {"w=4,kv=64,mb=2,kvs=2", "w=4,kv=64,mb=2,kvs=16", "w=8,kv=64,mb=1,kvs=4"};
  hk_test_compile_job_t jobs[64];
  size_t n = 0;
  for (size_t a = 0; a < n_archs; a++)
    for (int dh = 64; dh <= 128; dh += 64)
      for (size_t c = 0; c < 3; c++)
        for (int masked = 0; masked <= 1; masked++) {
          if (masked && c != 2) continue;
          const hkc_gpu_arch_t *ar = hk_test_arch(archs[a]);
          const hk_dtype_t dt = (a + c + (size_t)dh / 64) % 2 ? HK_DTYPE_BF16 : HK_DTYPE_F16;
          hkc_kernel_key_t key = mma_key(dt, dh, 8);
          key.has_lengths = key.has_mask = masked;
          snprintf(key.tune, sizeof key.tune, "%s", cfgs[c]);
          memset(&jobs[n], 0, sizeof jobs[n]);
          jobs[n].arch = ar;
          jobs[n].kernel.key = key;
          hk_test_kernel_name(&jobs[n++].kernel);
        }
  assert_true(n <= sizeof jobs / sizeof jobs[0]);
  hk_test_compile_all(jobs, n, hkc_nvrtc_compile, 2, HK_TEST_COMPILE_NO_WARNINGS | HK_TEST_COMPILE_SAMPLED);
  int failures = hk_test_compile_failures(jobs, n);
  for (size_t i = 0; i < n; i++) {
    char *src = hkc_codegen_gpu(jobs[i].arch, &jobs[i].kernel);
    assert_non_null(src);
    const long long threads = hk_test_source_macro(src, "HK_THREADS"), minb = hk_test_source_macro(src, "HK_ATTN_MINB");
    assert_true(hk_test_source_macro(src, "HK_ATTN_KVS") > 1);
    printf("[ info     ] %-40s %-6s %-24s regs %3u  local %u\n", jobs[i].kernel.name, jobs[i].arch->name,
           jobs[i].kernel.key.tune, jobs[i].regs, jobs[i].scratch);
    if (jobs[i].ok && (long long)jobs[i].regs * threads * minb > (long long)jobs[i].arch->vgprs_per_lane) {
      printf("[ FAIL     ] %s: registers miss __launch_bounds__\n", jobs[i].kernel.name);
      failures++;
    }
    free(src);
  }
  assert_int_equal(failures, 0);
}

/* ---- grouped-query row packing (attention_mma gp=1) ----------------------------------------- */
/* tune_parse (gp optional, named only when 1, after kvs; w mb <= 8), the space (gp on the split
 * tile, unsplit and kvs 2..16), the launch (packed tiles: batch (heads / group) ceil(group / hg)
 * ceil(seq_q / qc), times kvs) and the workspace (the unpacked scratch, a counter per packed
 * tile), the kernel options (attn_mma_cfg's fifth value, kept under attn_kvs). */
static void test_gqa_pack_legality_launch(void **state) {
  (void)state;
  static const char *const archs[] = {"sm_80", "sm_90", "sm_90a"};
  for (size_t a = 0; a < 3; a++) {
    const hkc_gpu_arch_t *ar = hk_test_arch(archs[a]);
    const hkc_kernel_key_t named = mma_key(HK_DTYPE_BF16, 128, 8);
    const hkc_variant_t *v = hkc_variant_for(ar, &named);
    hkc_tile_cfg_t t;
    static const struct {
      const char *params, *canonical;
      int kvs, gp;
    } ok[] = {{"w=4,kv=64,mb=2,gp=1", "w=4,kv=64,mb=2,gp=1", 1, 1},
              {"w=4,kv=64,mb=2,kvs=1,gp=1", "w=4,kv=64,mb=2,gp=1", 1, 1},
              {"w=4,kv=64,mb=2,kvs=8,gp=1", "w=4,kv=64,mb=2,kvs=8,gp=1", 8, 1},
              {"w=4,kv=64,mb=2,kvs=8,gp=0", "w=4,kv=64,mb=2,kvs=8", 8, 0},
              {"w=8,kv=64,mb=1,gp=1", "w=8,kv=64,mb=1,gp=1", 1, 1},
              {"w=4,kv=64,mb=2,gp=0", "w=4,kv=64,mb=2", 1, 0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
      assert_int_equal(v->tune_parse(ar, &named, ok[i].params, &t), 0);
      assert_string_equal(t.tune, ok[i].canonical);
      assert_int_equal(t.split_kv, ok[i].kvs);
      assert_int_equal(t.gqa_pack, ok[i].gp);
    }
    static const char *const bad[] = {"w=4,kv=64,mb=2,gp=2", "w=4,kv=64,mb=2,gp=1,kvs=2", "w=8,kv=64,mb=2,gp=1",
                                      "w=4,kv=64,gp=1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_equal(v->tune_parse(ar, &named, bad[i], &t), -1);
    for (int dh = 64; dh <= 128; dh += 64) {
      hkc_tile_cfg_t space[64];
      const hkc_kernel_key_t k = mma_key(HK_DTYPE_BF16, dh, 8);
      const int n = v->tune_space(ar, &k, space, 64);
      int gp_seen = 0;
      for (int i = 0; i < n; i++)
        if (space[i].gqa_pack) {
          assert_non_null(strstr(space[i].tune, "w=4,kv=64,mb=2"));
          gp_seen |= space[i].split_kv;
        }
      assert_int_equal(gp_seen, 1 | 2 | 4 | 8 | 16);
    }
    /* batch, seq_q, seq_kv, heads, kv_heads; expected packed tiles of 64 rows */
    static const long long shapes[][6] = {{4, 1, 16384, 32, 8, 4 * 8},       {8, 16, 4097, 32, 8, 8 * 8},
                                          {2, 77, 1000, 32, 8, 2 * 8 * 5},   {3, 1, 50, 4, 4, 3 * 4},
                                          {1, 2, 99, 128, 1, 4 /* 2 chunks of 64 heads x 1 query, 2 query tiles */},
                                          {2, 5, 64, 12, 2, 2 * 2 * 1},      {1, 0, 64, 32, 8, 0}};
    for (int dh = 64; dh <= 128; dh += 64)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int kvs = 1; kvs <= 4; kvs *= 4) {
          const long long B = shapes[s][0], Sq = shapes[s][1], Skv = shapes[s][2], H = shapes[s][3], Hkv = shapes[s][4];
          char params[HKC_TUNE_MAX];
          snprintf(params, sizeof params, kvs > 1 ? "w=4,kv=64,mb=2,kvs=%d,gp=1" : "w=4,kv=64,mb=2,gp=1", kvs);
          hkc_kernel_out_t k = {.name = "hk_x", .key = mma_cfg_key(HK_DTYPE_F16, dh, params)};
          hkc_arg_t args[17] = {TENSOR(0), TENSOR(1), TENSOR(2), TENSOR(3),  I64(B),      I64(Sq),
                                I64(Skv),  I64(H),    I64(Hkv),  I64(dh),    I64(H * dh), I64(Hkv * dh),
                                I64(0),    I64(0),    I64(0),    I64(s & 1), F32(0.125f)};
          uint32_t grid[3], block[3], shared = 0;
          hkc_gpu_launch_dims(ar, &k.key, args, 17, grid, block, &shared);
          const long long tiles = shapes[s][5];
          if (tiles > 0) assert_int_equal((long long)grid[0], tiles * kvs);
          assert_int_equal(block[0], 128);
          char *src = hkc_codegen_gpu(ar, &k);
          assert_non_null(src);
          assert_int_equal(hk_test_source_macro(src, "HK_ATTN_GP"), 1);
          assert_non_null(strstr(src, "templates/gpu/attention_gp.h"));
          free(src);
          hkc_node_workspace_t ws = {0};
          const int has = hkc_gpu_launch_workspace(ar, &k.key, args, 17, &ws);
          assert_int_equal(has, kvs > 1);
          if (kvs > 1 && tiles > 0) {
            assert_int_equal(ws.scratch_bytes, (uint64_t)(B * H * Sq * kvs * (dh + 2) * 4));
            assert_int_equal(ws.counters, (uint32_t)tiles);
          }
        }
  }
  /* the kernel options: attn_mma_cfg's fifth value; attn_kvs keeps it */
  hkc_kernel_options_t o = {0};
  char err[512];
  assert_int_equal(hkc_kernel_options_set(&o, "attn_mma_cfg", "4,64,2,1,1", err, sizeof err), 0);
  assert_string_equal(o.cfg[HKC_KOPT_ATTN_MMA_CFG], "w=4,kv=64,mb=2,kvs=1,gp=1");
  assert_int_equal(hkc_kernel_options_set(&o, "attn_mma_cfg", "4,64,2,8", err, sizeof err), 0);
  assert_string_equal(o.cfg[HKC_KOPT_ATTN_MMA_CFG], "w=4,kv=64,mb=2,kvs=8");
  hkc_kernel_options_t d = {0};
  hk_test_options(&d, "attn_kvs=8;attn_mma_cfg=4,64,2,1,1");
  hkc_kernel_key_t k = attn_key(HK_DTYPE_BF16, 128, 8);
  assert_int_equal(hkc_tune_apply_options(&d, "sm_90a", hk_test_arch("sm_90a"), &k), 2);
  assert_string_equal(k.variant, "attention_mma");
  assert_string_equal(k.tune, "w=4,kv=64,mb=2,kvs=8,gp=1");
  hk_test_options(&d, "attn_kvs=1;attn_mma_cfg=4,64,2,4,1");
  k = attn_key(HK_DTYPE_F16, 64, 8);
  assert_int_equal(hkc_tune_apply_options(&d, "sm_90a", hk_test_arch("sm_90a"), &k), 2);
  assert_string_equal(k.tune, "w=4,kv=64,mb=2,gp=1");
  hk_test_options(&d, "attn_mma_cfg=w=4,kv=64,mb=2,gp=1");
  k = attn_key(HK_DTYPE_F16, 64, 8);
  assert_int_equal(hkc_tune_apply_options(&d, "sm_80", hk_test_arch("sm_80"), &k), 2);
  assert_string_equal(k.tune, "w=4,kv=64,mb=2,gp=1");
}

/* Packed kernels (unsplit, kvs 2 and 16; lengths, mask, both; the 128-row tile) compile for
 * sm_80, sm_90 and sm_90a in f16 and bf16 at dh 64 and 128 without spills or warnings, within
 * __launch_bounds__. */
static void test_gqa_pack_nvrtc(void **state) {
  (void)state;
  HK_TEST_NEED_NVRTC();
  static const char *const all_archs[] = {"sm_90a", "sm_80", "sm_90"};
  const char *const *archs = all_archs;
  const size_t n_archs = test_full() ? 3 : 1; /* sm_90a alone unless HKC_TEST_FULL */
  static const struct {
    const char *cfg;
    int lengths, mask;
  } cfgs[] = {{"w=4,kv=64,mb=2,gp=1", 0, 0},        {"w=4,kv=64,mb=2,kvs=2,gp=1", 0, 0},
              {"w=4,kv=64,mb=2,kvs=16,gp=1", 1, 0}, {"w=4,kv=64,mb=2,kvs=8,gp=1", 0, 1},
              {"w=4,kv=64,mb=2,gp=1", 1, 1},        {"w=8,kv=64,mb=1,kvs=4,gp=1", 1, 1}};
  hk_test_compile_job_t jobs[80];
  size_t n = 0;
  for (size_t a = 0; a < n_archs; a++)
    for (int dh = 64; dh <= 128; dh += 64)
      for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
        const hk_dtype_t dt = (a + c + (size_t)dh / 64) % 2 ? HK_DTYPE_BF16 : HK_DTYPE_F16;
        hkc_kernel_key_t key = mma_key(dt, dh, 8);
        key.has_lengths = cfgs[c].lengths;
        key.has_mask = cfgs[c].mask;
        snprintf(key.tune, sizeof key.tune, "%s", cfgs[c].cfg);
        memset(&jobs[n], 0, sizeof jobs[n]);
        jobs[n].arch = hk_test_arch(archs[a]);
        jobs[n].kernel.key = key;
        hk_test_kernel_name(&jobs[n++].kernel);
      }
  assert_true(n <= sizeof jobs / sizeof jobs[0]);
  hk_test_compile_all(jobs, n, hkc_nvrtc_compile, 2, HK_TEST_COMPILE_NO_WARNINGS | HK_TEST_COMPILE_SAMPLED);
  int failures = hk_test_compile_failures(jobs, n);
  for (size_t i = 0; i < n; i++) {
    char *src = hkc_codegen_gpu(jobs[i].arch, &jobs[i].kernel);
    assert_non_null(src);
    const long long threads = hk_test_source_macro(src, "HK_THREADS"), minb = hk_test_source_macro(src, "HK_ATTN_MINB");
    assert_int_equal(hk_test_source_macro(src, "HK_ATTN_GP"), 1);
    printf("[ info     ] %-40s %-6s %-28s%s%s regs %3u  local %u\n", jobs[i].kernel.name, jobs[i].arch->name,
           jobs[i].kernel.key.tune, jobs[i].kernel.key.has_lengths ? " len" : "",
           jobs[i].kernel.key.has_mask ? " mask" : "", jobs[i].regs, jobs[i].scratch);
    if (jobs[i].ok && (long long)jobs[i].regs * threads * minb > (long long)jobs[i].arch->vgprs_per_lane) {
      printf("[ FAIL     ] %s: registers miss __launch_bounds__\n", jobs[i].kernel.name);
      failures++;
    }
    free(src);
  }
  assert_int_equal(failures, 0);
}

/* The model's choice (estimated resources, as a build starts): split-KV on decode steps (few
 * query tiles over long keys) on sm_90a (attention_mma instead of attention_tma) and sm_90;
 * never on the self-attention of bert_layer / llama_block at their batch sizes. */
static const hkc_tune_cand_t *split_model_pick(const char *arch, hkc_kernel_key_t key, hkc_tune_shape_t shape,
                                               hkc_tune_cand_t *c) {
  int order[HKC_TUNE_MAX_CANDIDATES];
  const hkc_gpu_arch_t *ar = hk_test_arch(arch);
  const int n = hkc_tune_cands_for(ar, NULL, &key, c, HKC_TUNE_MAX_CANDIDATES);
  const int m = hkc_tune_rank(ar, &key, shape, c, n, order);
  assert_true(m > 0);
  const hkc_tune_cand_t *p = &c[order[0]];
  printf("[ info     ] %-6s b=%-3lld h=%lld/%lld sq=%-4lld skv=%-5lld d=%lld%s%s: %s %s, %.2f us (%s)\n", arch,
         (long long)shape.batch, (long long)shape.heads, (long long)shape.kv_heads, (long long)shape.m,
         (long long)shape.n, (long long)shape.k, shape.causal ? " causal" : "", key.has_lengths ? " len" : "",
         p->cfg.variant, p->cfg.tune, p->est.seconds * 1e6, p->est.limiter);
  if (p->cfg.gqa_pack) /* what packing beat: the best unpacked split and attention_tma */
    for (int kind = 0; kind < 2; kind++)
      for (int i = 1; i < m; i++) {
        const hkc_tune_cand_t *q = &c[order[i]];
        if (kind == 0 ? q->cfg.split_kv <= 0 || q->cfg.gqa_pack : strcmp(q->cfg.variant, "attention_tma") != 0) continue;
        printf("[ info     ]        then %s %s, %.2f us (%s)\n", q->cfg.variant, q->cfg.tune, q->est.seconds * 1e6,
               q->est.limiter);
        break;
      }
  return p;
}

static void test_split_model(void **state) {
  (void)state;
  hkc_tune_cand_t *c = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *c);
  assert_non_null(c);
  static const char *const archs[] = {"sm_90a", "sm_90"};
  for (size_t a = 0; a < 2; a++) {
    /* decode: batch 1 / 8, 32 query heads (GQA 32/8 too), 1 or 16 queries, 4096 / 16384 keys */
    static const long long decode[][5] = {{1, 1, 16384, 32, 32}, {1, 1, 4096, 32, 8}, {8, 1, 16384, 32, 8},
                                          {1, 16, 16384, 32, 32}, {2, 64, 16384, 32, 8}, {4, 1, 16384, 32, 8}};
    for (int dh = 64; dh <= 128; dh += 64)
      for (size_t i = 0; i < sizeof decode / sizeof decode[0]; i++)
        for (int len = 0; len <= 1; len++) {
          hkc_kernel_key_t key = attn_key(HK_DTYPE_BF16, dh, 8);
          key.has_lengths = len;
          const hkc_tune_shape_t s = {.m = decode[i][1], .n = decode[i][2], .k = dh, .batch = decode[i][0],
                                      .heads = decode[i][3], .kv_heads = decode[i][4]};
          const hkc_tune_cand_t *p = split_model_pick(archs[a], key, s, c);
          assert_string_equal(p->cfg.variant, "attention_mma");
          assert_true(p->cfg.split_kv > 1);
          /* grouped-query row packing on the GQA steps of one query (bench dec_b4 / dec_b8: K/V
           * read once per kv head instead of once per query head); never without GQA */
          assert_int_equal(p->cfg.gqa_pack, decode[i][1] == 1 && decode[i][3] > decode[i][4]);
        }
    /* bert_layer (batch 1..128, 128 tokens, 12 heads of 64) and llama_block (batch 1..16, 512
     * tokens, 32/8 heads of 128, causal): no split */
    for (long long b = 1; b <= 128; b *= 2) {
      const hkc_tune_shape_t s = {.m = 128, .n = 128, .k = 64, .batch = b, .heads = 12, .kv_heads = 12};
      const hkc_tune_cand_t *p = split_model_pick(archs[a], attn_key(HK_DTYPE_BF16, 64, 8), s, c);
      assert_true(p->cfg.split_kv <= 1);
      assert_int_equal(p->cfg.gqa_pack, 0);
      assert_string_equal(p->cfg.variant, a == 0 ? "attention_tma" : "attention_mma");
    }
    for (long long b = 1; b <= 16; b *= 2) {
      const hkc_tune_shape_t s = {.m = 512, .n = 512, .k = 128, .batch = b, .heads = 32, .kv_heads = 8, .causal = 1};
      const hkc_tune_cand_t *p = split_model_pick(archs[a], attn_key(HK_DTYPE_BF16, 128, 8), s, c);
      assert_true(p->cfg.split_kv <= 1);
      assert_int_equal(p->cfg.gqa_pack, 0);
      assert_string_equal(p->cfg.variant, a == 0 ? "attention_tma" : "attention_mma");
    }
  }
  free(c);
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
      cmocka_unit_test(test_tma_selection),
      cmocka_unit_test(test_tma_legality),
      cmocka_unit_test(test_tma_nvrtc),
      cmocka_unit_test(test_tma_launch),
      cmocka_unit_test(test_masked_selection),
      cmocka_unit_test(test_masked_compiles),
      cmocka_unit_test(test_split_legality_workspace),
      cmocka_unit_test(test_split_nvrtc),
      cmocka_unit_test(test_split_model),
      cmocka_unit_test(test_gqa_pack_legality_launch),
      cmocka_unit_test(test_gqa_pack_nvrtc),
  };
  if (getenv("HK_TEST_FILTER")) cmocka_set_test_filter(getenv("HK_TEST_FILTER")); /* one test by hand */
  return cmocka_run_group_tests(tests, NULL, NULL);
}
