/* SPDX-License-Identifier: Apache-2.0 */
/* Tuning (compiler/tune*.c, docs/TUNING.md): parameter strings, candidate spaces and their
 * legality against the target table, the tuning choice in the kernel key (name, equality,
 * the variants' macros and launches), the analytical model's behaviour on the shapes the
 * issue names, the database (grammar, errors with line numbers, sorting, lookup with the
 * epilogue fallback, merge) and the build-time choice from a database. Nothing runs on a
 * GPU here; tests/integration/tune.sh drives `hkc tune` on the host target. */
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
#include "tune.h"

static hkc_kernel_key_t gemm_key(hk_dtype_t dt, int bias, int act, int res, int tb) {
  return (hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = dt, .act = (hk_act_t)act, .has_bias = bias,
                            .has_residual = res, .trans_b = tb, .align = 8};
}

/* ---- parameter strings -------------------------------------------------------------------- */
static void test_params_parse(void **state) {
  (void)state;
  static const char *const names[] = {"bn", "st", "p"};
  int v[3];
  assert_int_equal(hkc_tune_params_parse("bn=128,st=4,p=1", names, 3, v), 0);
  assert_int_equal(v[0], 128);
  assert_int_equal(v[1], 4);
  assert_int_equal(v[2], 1);
  assert_int_equal(hkc_tune_params_parse("bn=128,st=4,p=0", names, 3, v), 0);
  assert_int_equal(v[2], 0);
  /* not canonical: order, missing or extra names, signs, leading zeros, blanks, junk */
  static const char *const bad[] = {"st=4,bn=128,p=1", "bn=128,st=4", "bn=128,st=4,p=1,x=2", "bn=+128,st=4,p=1",
                                    "bn=0128,st=4,p=1", "bn=128, st=4,p=1", "bn=128,st=4,p=1 ", "bn=,st=4,p=1",
                                    "bn=128;st=4;p=1", "", "bn=99999999,st=4,p=1"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (hkc_tune_params_parse(bad[i], names, 3, v) == 0) fail_msg("accepted '%s'", bad[i]);
}

/* ---- candidate spaces ------------------------------------------------------------------------ */
static void check_space(const hkc_gpu_arch_t *a, hkc_kernel_key_t key, const char *default_variant,
                        const char *default_params, int min_count) {
  hkc_tile_cfg_t *c = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *c);
  assert_non_null(c);
  int n = hkc_tune_candidates(a, &key, c, HKC_TUNE_MAX_CANDIDATES);
  printf("[ info     ] %s: %d candidates\n", a ? a->name : "host", n);
  assert_true(n >= min_count && n < HKC_TUNE_MAX_CANDIDATES);
  { /* the whole space fits: a larger buffer gets no more */
    hkc_tile_cfg_t *all = calloc(4 * HKC_TUNE_MAX_CANDIDATES, sizeof *all);
    assert_non_null(all);
    assert_int_equal(hkc_tune_candidates(a, &key, all, 4 * HKC_TUNE_MAX_CANDIDATES), n);
    free(all);
  }
  assert_string_equal(c[0].variant, default_variant);
  assert_string_equal(c[0].tune, default_params);
  assert_true(c[0].is_default);
  for (int i = 0; i < n; i++) {
    assert_true(i == 0 || !c[i].is_default);
    for (int j = 0; j < i; j++)
      if (!strcmp(c[i].variant, c[j].variant) && !strcmp(c[i].tune, c[j].tune))
        fail_msg("%s %s listed twice", c[i].variant, c[i].tune);
    /* within the target's limits, and what the variant parses back */
    assert_true(c[i].bm > 0 && c[i].bn > 0 && c[i].bk > 0 && c[i].threads > 0 && c[i].inflight >= 1);
    assert_true(!a || (c[i].efficiency > 0 && c[i].efficiency < 1));
    hkc_tile_cfg_t back;
    assert_int_equal(hkc_tune_lookup_cfg(a, &key, c[i].variant, c[i].tune, &back), 0);
    assert_string_equal(back.tune, c[i].tune);
    if (a) {
      assert_true(c[i].shared_bytes <= a->max_lds_per_block);
      assert_true((uint32_t)c[i].threads <= a->max_threads_per_block);
      assert_true(hkc_model_blocks_per_cu(a, &c[i], c[i].regs, 0, 0) >= 1);
    }
  }
  free(c);
}

/* The configurations of variant in key's candidates on a (options: hkc_tune_candidates_for's). */
static int count_variant(const hkc_gpu_arch_t *a, const hkc_kernel_options_t *o, hkc_kernel_key_t key,
                         const char *variant, const char *tune_part) {
  hkc_tile_cfg_t *c = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *c);
  assert_non_null(c);
  const int n = hkc_tune_candidates_for(a, o, &key, c, HKC_TUNE_MAX_CANDIDATES);
  int count = 0;
  for (int i = 0; i < n; i++)
    count += (!variant || !strcmp(c[i].variant, variant)) && (!tune_part || strstr(c[i].tune, tune_part));
  free(c);
  return count;
}

#define TMA_DEFAULT "pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=0"

static void test_spaces(void **state) {
  (void)state;
  /* sm_90a: gemm_tma's default first, then its space and the other sm_90a variants' */
  const hkc_gpu_arch_t *h200 = hk_test_arch("sm_90a");
  check_space(h200, gemm_key(HK_DTYPE_BF16, 1, 0, 0, 0), "gemm_tma", TMA_DEFAULT, 90);
  check_space(h200, gemm_key(HK_DTYPE_F16, 1, 2, 1, 1), "gemm_tma", TMA_DEFAULT, 100); /* trans_b: bn 96 too */
  { /* gemm_tma=on: gemm_tma's space alone (how specs/tuning/h200.db was measured) */
    const hkc_kernel_key_t k = gemm_key(HK_DTYPE_BF16, 1, 0, 0, 1);
    hkc_kernel_options_t on = {0};
    hk_test_options(&on, "gemm_tma=on");
    const int all = count_variant(h200, &on, k, NULL, NULL), tma = count_variant(h200, &on, k, "gemm_tma", NULL);
    assert_true(tma >= 25);
    assert_int_equal(all, tma);
    /* a dual gemm (fusion's SwiGLU): two accumulator sets, so 128 x 128 by default and no split-K */
    hkc_kernel_key_t d = k;
    d.dual = 1;
    hkc_tile_cfg_t c[HKC_TUNE_MAX_CANDIDATES];
    const int n = hkc_tune_candidates_for(h200, &on, &d, c, HKC_TUNE_MAX_CANDIDATES);
    assert_true(n >= 5);
    assert_string_equal(c[0].tune, "pp=0,mw=1,bn=128,st=4,sk=1,cm=1,ts=0");
    for (int i = 0; i < n; i++) assert_true(strstr(c[i].tune, ",sk=1,cm=1") != NULL && c[i].bn <= 128);
  }
  {
    const hkc_kernel_key_t k = gemm_key(HK_DTYPE_BF16, 1, 0, 0, 0), tk = gemm_key(HK_DTYPE_BF16, 1, 0, 0, 1);
    static const char *const variants[] = {"gemm_tma", "gemm_wgmma_ws", "gemm_wgmma", "gemm_mma"};
    for (size_t i = 0; i < 4; i++) assert_true(count_variant(h200, NULL, k, variants[i], NULL) > 0);
    /* split-K (2, 4, 8) and multicast pairs; wgmma N 96 for trans_b only */
    assert_true(count_variant(h200, NULL, k, "gemm_tma", ",sk=2,") > 0 && count_variant(h200, NULL, k, "gemm_tma", ",sk=4,") > 0 &&
                count_variant(h200, NULL, k, "gemm_tma", ",sk=8,") > 0 && count_variant(h200, NULL, k, "gemm_tma", ",cm=2") > 0);
    assert_int_equal(count_variant(h200, NULL, k, "gemm_tma", ",bn=96,"), 0);
    assert_true(count_variant(h200, NULL, tk, "gemm_tma", ",bn=96,") > 0);
    assert_int_equal(count_variant(h200, NULL, k, "gemm_tma", "sk=2,cm=2"), 0);
    /* gemm_tma=off: no gemm_tma candidate; gemm_wgmma_ws's default first, named in the key
     * (not the registry's default); with gemm_ws=off too, gemm_wgmma's */
    hkc_kernel_options_t off = {0}, off2 = {0};
    hk_test_options(&off, "gemm_tma=off");
    hk_test_options(&off2, "gemm_tma=off;gemm_ws=off");
    assert_int_equal(count_variant(h200, &off, k, "gemm_tma", NULL), 0);
    assert_true(count_variant(h200, &off, k, "gemm_wgmma_ws", NULL) > 0);
    assert_int_equal(count_variant(h200, &off2, k, "gemm_wgmma_ws", NULL), 0);
    hkc_tile_cfg_t c[HKC_TUNE_MAX_CANDIDATES];
    const int n = hkc_tune_candidates_for(h200, &off, &k, c, HKC_TUNE_MAX_CANDIDATES);
    assert_true(n > 0);
    assert_string_equal(c[0].variant, "gemm_wgmma_ws");
    assert_string_equal(c[0].tune, "bn=256,st=3,p=1");
    for (int i = 0; i < n; i++) assert_false(c[i].is_default);
    assert_true(hkc_tune_candidates_for(h200, &off2, &k, c, HKC_TUNE_MAX_CANDIDATES) > 0);
    assert_string_equal(c[0].variant, "gemm_wgmma");
    assert_string_equal(c[0].tune, "bm=128,bn=256,st=4");
  }
  check_space(hk_test_arch("sm_90"), gemm_key(HK_DTYPE_F16, 1, 2, 1, 1), "gemm_mma", "bm=128,bn=128,wm=2,wn=4,st=4",
              10);
  check_space(hk_test_arch("sm_80"), gemm_key(HK_DTYPE_BF16, 0, 0, 0, 0), "gemm_mma", "bm=128,bn=128,wm=2,wn=4,st=4",
              8);
  check_space(hk_test_arch("gfx90a"), gemm_key(HK_DTYPE_F16, 1, 0, 0, 0), "gemm_mfma", "bm=128,bn=128,bk=32", 6);
  check_space(hk_test_arch("gfx942"), gemm_key(HK_DTYPE_BF16, 1, 0, 1, 1), "gemm_mfma", "bm=128,bn=128,bk=32", 6);
  check_space(NULL, gemm_key(HK_DTYPE_F32, 1, 0, 0, 0), "host_gemm", "bm=16,bn=256,bk=32", 8);
  /* the host's candidates are its registry entry's space, as on every target; other host ops
   * resolve to the untunable "host" entry */
  {
    const hkc_kernel_key_t hk = gemm_key(HK_DTYPE_F32, 1, 0, 0, 0);
    const hkc_variant_t *hv = hkc_variant_for(NULL, &hk);
    assert_non_null(hv);
    assert_string_equal(hv->name, "host_gemm");
    assert_true(hv->host && hv->portable && hv->tune_space && hv->tune_parse);
    hkc_tile_cfg_t *space = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *space);
    hkc_tile_cfg_t *cands = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *cands);
    assert_true(space && cands);
    const int ns = hv->tune_space(NULL, &hk, space, HKC_TUNE_MAX_CANDIDATES);
    assert_true(ns >= 8);
    assert_int_equal(hkc_tune_candidates(NULL, &hk, cands, HKC_TUNE_MAX_CANDIDATES), ns);
    for (int i = 0; i < ns; i++) assert_string_equal(cands[i].tune, space[i].tune);
    const hkc_kernel_key_t ln = {.op = HK_OP_LAYERNORM, .dtype = HK_DTYPE_F32};
    assert_string_equal(hkc_variant_for(NULL, &ln)->name, "host");
    assert_int_equal(hkc_tune_candidates(NULL, &ln, cands, HKC_TUNE_MAX_CANDIDATES), 0);
    /* a GPU variant's name is no host configuration, and the host's none on a GPU */
    hkc_tile_cfg_t t;
    assert_int_equal(hkc_tune_lookup_cfg(NULL, &hk, "gemm_mma", "", &t), -1);
    assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &hk, "host_gemm", "", &t), -1);
    free(space);
    free(cands);
  }
  /* nothing to tune: f32 on a GPU (simple kernel), gfx1030 (no matrix cores); other ops have
   * spaces (parse + legality for kernel options) but no launch of theirs is tunable yet */
  hkc_tile_cfg_t c[4];
  assert_int_equal(hkc_tune_candidates(hk_test_arch("sm_90a"), &(hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = HK_DTYPE_F32,
                                                                            .align = 8}, c, 4), 0);
  assert_int_equal(hkc_tune_candidates(hk_test_arch("gfx1030"), &(hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = HK_DTYPE_F16,
                                                                             .align = 8}, c, 4), 0);
  assert_int_equal(hkc_tune_candidates(hk_test_arch("sm_90a"), &(hkc_kernel_key_t){.op = HK_OP_LAYERNORM,
                                                                            .dtype = HK_DTYPE_BF16, .align = 8}, c, 4), 4);
  assert_string_equal(c[0].variant, "rows_vec16");
  assert_string_equal(c[0].tune, "t=256,c=4,tg=4,mb=4,pf=0,g=4"); /* the default (H200, 2026-12-02) */
  assert_string_equal(c[2].tune, "t=256,c=8,tg=8,mb=3,pf=0,g=3"); /* the previous one, an alternative */
  assert_true(c[0].is_default && !c[1].is_default);
  hkc_tune_shape_t shape;
  const hkc_arg_t rows_args[4] = {{.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_I64, .i = 8},
                                  {.kind = HK_ARG_I64, .i = 768}};
  assert_int_equal(hkc_tune_shape_of(hk_test_arch("sm_90a"), &(hkc_kernel_key_t){.op = HK_OP_LAYERNORM}, rows_args, 4,
                                     &shape), 0);
  /* illegal configurations are refused: over shared memory, unknown wgmma N, LDS of the MFMA template */
  hkc_tile_cfg_t t;
  hkc_kernel_key_t k = gemm_key(HK_DTYPE_BF16, 0, 0, 0, 0);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &k, "gemm_wgmma_ws", "bn=256,st=5,p=1", &t), -1);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &k, "gemm_wgmma_ws", "bn=192,st=3,p=1", &t), -1);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &k, "gemm_wgmma", "bm=128,bn=256,st=6", &t), -1);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90"), &k, "gemm_wgmma", "bm=128,bn=256,st=4", &t), -1);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("gfx90a"), &k, "gemm_mfma", "bm=256,bn=256,bk=32", &t), -1);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("gfx90a"), &k, "gemm_mfma", "bm=128,bn=128,bk=64", &t), -1);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("gfx90a"), &k, "gemm_nope", "bm=128", &t), -1);
  assert_int_equal(hkc_tune_lookup_cfg(NULL, &k, "host_gemm", "bm=128,bn=1024,bk=256", &t), -1);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &k, "gemm_mma", "bm=64,bn=64,wm=2,wn=2,st=3", &t), 0);
  assert_false(t.is_default); /* gemm_mma is not sm_90a's default variant */
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &k, "gemm_wgmma_ws", "bn=256,st=3,p=1", &t), 0);
  assert_false(t.is_default); /* nor is gemm_wgmma_ws any more */
  /* gemm_tma: its default ("" or in full), legal configurations, and the refused ones */
  hkc_kernel_key_t tk = gemm_key(HK_DTYPE_BF16, 0, 0, 0, 1);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &k, "gemm_tma", "", &t), 0);
  assert_string_equal(t.tune, TMA_DEFAULT);
  assert_true(t.is_default && t.split_k == 1 && t.persistent && t.bm == 128 && t.bn == 256 && t.threads == 384);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &k, "gemm_tma", TMA_DEFAULT, &t), 0);
  assert_true(t.is_default);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &k, "gemm_tma", "pp=1,mw=1,bn=64,st=8,sk=4,cm=1", &t), 0);
  assert_true(!t.is_default && t.split_k == 4 && !t.persistent && t.bm == 64 && t.bn == 64);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &k, "gemm_tma", "pp=0,mw=2,bn=128,st=4,sk=1,cm=2", &t), 0);
  assert_true(t.split_k == 1 && t.persistent && t.bm == 256 && t.bn == 128);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &tk, "gemm_tma", "pp=1,mw=1,bn=96,st=10,sk=1,cm=1", &t), 0);
  static const char *const tma_bad[] = {
      "pp=1,mw=1,bn=96,st=10,sk=1,cm=1", /* bn 96: trans_b only (k is not) */
      "pp=0,mw=1,bn=256,st=4,sk=2,cm=1", /* split-K: mw bn <= 128 */
      "pp=1,mw=2,bn=128,st=6,sk=4,cm=1",
      "pp=1,mw=1,bn=64,st=8,sk=2,cm=2",  /* multicast pairs without split-K */
      "pp=0,mw=1,bn=256,st=5,sk=1,cm=1", /* over shared memory */
      "pp=0,mw=2,bn=256,st=3,sk=1,cm=1", /* 256 accumulators */
      "pp=0,mw=1,bn=160,st=4,sk=1,cm=1", /* no such wgmma N here */
      "pp=0,mw=1,bn=64,st=4,sk=9,cm=1",
      "pp=0,mw=1,bn=256,st=4",           /* not canonical */
  };
  for (size_t i = 0; i < sizeof tma_bad / sizeof tma_bad[0]; i++)
    if (hkc_tune_lookup_cfg(hk_test_arch("sm_90a"), &k, "gemm_tma", tma_bad[i], &t) != -1) fail_msg("accepted %s", tma_bad[i]);
  assert_int_equal(hkc_tune_lookup_cfg(hk_test_arch("sm_90"), &k, "gemm_tma", "", &t), -1); /* sm_90a only */
}

/* ---- the choice in the key ------------------------------------------------------------------------ */
static void test_key_identity(void **state) {
  (void)state;
  const hkc_gpu_arch_t *a = hk_test_arch("sm_90a");
  hkc_kernel_key_t base = gemm_key(HK_DTYPE_BF16, 1, 0, 0, 0), k1 = base, k2 = base;
  char n0[96], n1[96], n2[96];
  hkc_kernel_key_name(&base, n0, sizeof n0);
  assert_string_equal(n0, "hk_gemm_bf16_bias_a8");
  hkc_tile_cfg_t c;
  assert_int_equal(hkc_tune_lookup_cfg(a, &base, "gemm_wgmma_ws", "bn=128,st=4,p=1", &c), 0);
  hkc_tune_apply(a, &k1, &c);
  assert_string_equal(k1.variant, "gemm_wgmma_ws");
  assert_string_equal(k1.tune, "bn=128,st=4,p=1");
  assert_int_equal(hkc_tune_lookup_cfg(a, &base, "gemm_wgmma_ws", "bn=128,st=5,p=1", &c), 0);
  hkc_tune_apply(a, &k2, &c);
  hkc_kernel_key_name(&k1, n1, sizeof n1);
  hkc_kernel_key_name(&k2, n2, sizeof n2);
  assert_true(strncmp(n1, "hk_gemm_bf16_bias_a8_t", 22) == 0 && strlen(n1) == 22 + 8);
  assert_string_not_equal(n1, n2);
  assert_false(hkc_kernel_key_equal(&base, &k1));
  assert_false(hkc_kernel_key_equal(&k1, &k2));
  assert_true(hkc_kernel_key_equal(&k1, &k1));
  /* the registry default in full is the untuned key: same name, same kernel */
  hkc_kernel_key_t k3 = base;
  assert_int_equal(hkc_tune_lookup_cfg(a, &base, "gemm_tma", "pp=0,mw=1,bn=256,st=4,sk=1,cm=1", &c), 0);
  hkc_tune_apply(a, &k3, &c);
  assert_true(hkc_kernel_key_equal(&base, &k3));
  /* gemm_wgmma_ws's default is no longer the registry's: a tuned key that names it */
  k3 = base;
  assert_int_equal(hkc_tune_lookup_cfg(a, &base, "gemm_wgmma_ws", "bn=256,st=3,p=1", &c), 0);
  hkc_tune_apply(a, &k3, &c);
  assert_false(hkc_kernel_key_equal(&base, &k3));
  assert_string_equal(k3.variant, "gemm_wgmma_ws");
  /* gemm_tma configurations: each its own name */
  hkc_kernel_key_t k5 = base, k6 = base;
  assert_int_equal(hkc_tune_lookup_cfg(a, &base, "gemm_tma", "pp=1,mw=1,bn=64,st=8,sk=4,cm=1", &c), 0);
  hkc_tune_apply(a, &k5, &c);
  assert_int_equal(hkc_tune_lookup_cfg(a, &base, "gemm_tma", "pp=1,mw=1,bn=64,st=8,sk=1,cm=2", &c), 0);
  hkc_tune_apply(a, &k6, &c);
  char n5[96], n6[96];
  hkc_kernel_key_name(&k5, n5, sizeof n5);
  hkc_kernel_key_name(&k6, n6, sizeof n6);
  assert_true(strncmp(n5, "hk_gemm_bf16_bias_a8_t", 22) == 0 && strlen(n5) == 22 + 8);
  assert_string_not_equal(n5, n6);
  assert_false(hkc_kernel_key_equal(&k5, &k6));
  /* a stable hash: the name is part of the ABI of packs and caches */
  hkc_kernel_key_t k4 = base;
  snprintf(k4.variant, sizeof k4.variant, "gemm_wgmma_ws");
  snprintf(k4.tune, sizeof k4.tune, "bn=128,st=4,p=1");
  hkc_kernel_key_name(&k4, n2, sizeof n2);
  assert_string_equal(n1, n2);
}

static int has_line(const char *src, const char *line) { return strstr(src, line) != NULL; }

static void test_variant_macros_and_launch(void **state) {
  (void)state;
  const hkc_gpu_arch_t *a = hk_test_arch("sm_90a");
  hkc_kernel_out_t k;
  memset(&k, 0, sizeof k);
  k.key = gemm_key(HK_DTYPE_BF16, 1, 0, 0, 0);
  hkc_tile_cfg_t c;
  hkc_arg_t args[8] = {{.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR},
                       {.kind = HK_ARG_NULL},   {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_I64, .i = 4096},
                       {.kind = HK_ARG_I64, .i = 768}, {.kind = HK_ARG_I64, .i = 768}};
  uint32_t grid[3], block[3], shared;
  /* untuned: gemm_tma's defaults (cooperative 128 x 256 tiles, 4 stages, no split-K or
   * clusters), persistent: min(32 x 3 tiles, 132 SMs) */
  hkc_kernel_key_name(&k.key, k.name, sizeof k.name);
  char *src = hkc_codegen_gpu(a, &k);
  assert_non_null(src);
  assert_true(has_line(src, "gemm_tma.hip") && has_line(src, "#define HK_PINGPONG 0\n") && has_line(src, "#define HK_MW 1\n") &&
              has_line(src, "#define HK_TILE_N 256\n") && has_line(src, "#define HK_STAGES 4\n") &&
              has_line(src, "#define HK_SPLITK 1\n") && has_line(src, "#define HK_CM 1\n") &&
              has_line(src, "hk_wgmma_m64n256k16_bf16"));
  free(src);
  hkc_gpu_launch_dims(a, &k.key, args, 8, grid, block, &shared);
  assert_int_equal(grid[0], 32 * 3);
  assert_int_equal(block[0], 384);
  assert_int_equal(hkc_tune_lookup_cfg(a, &k.key, "gemm_tma", "", &c), 0);
  assert_int_equal(shared, c.shared_bytes);
  /* forced configurations (kernel options) go through the key */
  {
    static const struct {
      const char *options, *tune;
      uint32_t grid;
    } forced[] = {
        {"gemm_tma=off;gemm_ws_cfg=128,5,0", "bn=128,st=5,p=0", 32 * 6}, /* one block per 128x128 tile */
        /* gemm_tma, split-K: a cluster of sk blocks per tile (64 x 12 tiles of 64x64; 32 x 6 of 128x128) */
        {"gemm_tma_cfg=1,1,64,8,4", "pp=1,mw=1,bn=64,st=8,sk=4,cm=1,ts=0", 64 * 12 * 4},
        {"gemm_tma_cfg=0,1,128,5,2", "pp=0,mw=1,bn=128,st=5,sk=2,cm=1,ts=0", 32 * 6 * 2},
        /* persistent: 192 tiles of 128x128 (ping-pong, 2 m64 blocks per consumer) on 132 SMs */
        {"gemm_tma_cfg=1,2,128,6", "pp=1,mw=2,bn=128,st=6,sk=1,cm=1,ts=0", 132},
        /* multicast pairs: 8 pairs of 256-row tiles x 6 columns = 96 blocks; 32 pairs x 12
         * of 64x64 tiles = 768 blocks: the 132 SMs (an even count: whole clusters) */
        {"gemm_tma_cfg=0,2,128,4,1,2", "pp=0,mw=2,bn=128,st=4,sk=1,cm=2,ts=0", 16 * 6},
        {"gemm_tma_cfg=1,1,64,8,1,2", "pp=1,mw=1,bn=64,st=8,sk=1,cm=2,ts=0", 132},
    };
    for (size_t i = 0; i < sizeof forced / sizeof forced[0]; i++) {
      hkc_kernel_options_t o = {0};
      hk_test_options(&o, forced[i].options);
      hkc_kernel_key_t fk = k.key;
      assert_int_equal(hkc_tune_apply_options(&o, "sm_90a", a, &fk), 2);
      assert_string_equal(fk.tune, forced[i].tune);
      hkc_gpu_launch_dims(a, &fk, args, 8, grid, block, &shared);
      if (grid[0] != forced[i].grid) fail_msg("%s: grid %u, expected %u", forced[i].options, grid[0], forced[i].grid);
      assert_int_equal(block[0], 384);
    }
  }
  /* tuned */
  assert_int_equal(hkc_tune_lookup_cfg(a, &k.key, "gemm_wgmma_ws", "bn=128,st=4,p=1", &c), 0);
  hkc_tune_apply(a, &k.key, &c);
  hkc_kernel_key_name(&k.key, k.name, sizeof k.name);
  src = hkc_codegen_gpu(a, &k);
  assert_non_null(src);
  assert_true(has_line(src, "#define HK_TILE_N 128\n") && has_line(src, "#define HK_STAGES 4\n"));
  free(src);
  hkc_gpu_launch_dims(a, &k.key, args, 8, grid, block, &shared);
  assert_int_equal(grid[0], 132); /* persistent: min(192 tiles, 132 SMs) */
  assert_int_equal(block[0], 384);
  assert_int_equal(shared, c.shared_bytes);
  /* another variant chosen on sm_90a: gemm_wgmma with one warpgroup */
  k.key = gemm_key(HK_DTYPE_BF16, 1, 0, 0, 0);
  assert_int_equal(hkc_tune_lookup_cfg(a, &k.key, "gemm_wgmma", "bm=64,bn=128,st=4", &c), 0);
  hkc_tune_apply(a, &k.key, &c);
  assert_string_equal(hkc_variant_for(a, &k.key)->name, "gemm_wgmma");
  hkc_kernel_key_name(&k.key, k.name, sizeof k.name);
  src = hkc_codegen_gpu(a, &k);
  assert_non_null(src);
  assert_true(has_line(src, "#define HK_WGS 1\n") && has_line(src, "#define HK_TILE_M 64\n") &&
              has_line(src, "hk_wgmma_m64n128k16_bf16"));
  free(src);
  hkc_gpu_launch_dims(a, &k.key, args, 8, grid, block, &shared);
  assert_int_equal(grid[0], 64 * 6);
  assert_int_equal(block[0], 128);
  /* AMD */
  const hkc_gpu_arch_t *g = hk_test_arch("gfx90a");
  k.key = gemm_key(HK_DTYPE_F16, 1, 0, 0, 0);
  assert_int_equal(hkc_tune_lookup_cfg(g, &k.key, "gemm_mfma", "bm=64,bn=128,bk=64", &c), 0);
  hkc_tune_apply(g, &k.key, &c);
  hkc_kernel_key_name(&k.key, k.name, sizeof k.name);
  src = hkc_codegen_gpu(g, &k);
  assert_non_null(src);
  assert_true(has_line(src, "#define HK_BM 64\n") && has_line(src, "#define HK_BN 128\n") && has_line(src, "#define HK_BK 64\n"));
  free(src);
  hkc_gpu_launch_dims(g, &k.key, args, 8, grid, block, &shared);
  assert_int_equal(grid[0], 64 * 6);
  /* host */
  k.key = (hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = HK_DTYPE_F32, .has_bias = 1};
  assert_int_equal(hkc_tune_lookup_cfg(NULL, &k.key, "host_gemm", "bm=32,bn=128,bk=64", &c), 0);
  hkc_tune_apply(NULL, &k.key, &c);
  hkc_kernel_key_name(&k.key, k.name, sizeof k.name);
  src = hkc_codegen_host(&k, 1);
  assert_non_null(src);
  assert_true(has_line(src, "#define HK_GEMM_BM 32\n#define HK_GEMM_BN 128\n#define HK_GEMM_BK 64\n"));
  free(src);
  hkc_host_launch_dims(&k.key, args, 8, grid, block);
  assert_int_equal(grid[0], 128 * 6);
}

/* ---- the model ------------------------------------------------------------------------------------ */
/* The model's ranking (estimated resources, as `hkc build --tune model` starts with) under
 * kernel options o (NULL: the defaults). */
static int model_pick_for(const hkc_gpu_arch_t *a, const hkc_kernel_options_t *o, hkc_kernel_key_t key,
                          hkc_tune_shape_t shape, hkc_tune_cand_t *c, int *n_out) {
  int order[HKC_TUNE_MAX_CANDIDATES];
  int n = hkc_tune_cands_for(a, o, &key, c, HKC_TUNE_MAX_CANDIDATES);
  int m = hkc_tune_rank(a, &key, shape, c, n, order);
  assert_true(m > 0);
  *n_out = n;
  return order[0];
}

static int model_pick(const hkc_gpu_arch_t *a, hkc_kernel_key_t key, hkc_tune_shape_t shape, hkc_tune_cand_t *c,
                      int *n_out) {
  return model_pick_for(a, NULL, key, shape, c, n_out);
}

/* The model on the launch workspace's kernels (with gemm_split=on: without it, the defaults,
 * none is a candidate and nothing splits): on sm_90 and sm_80 a small-M, long-K GEMM (128 x
 * 768 x 3072: 6 tiles of the default 128 x 128 for 132 SMs) picks gemm_mma with split-K and
 * expects it at least twice as fast as the default, while a GEMM with tiles for every SM
 * (4096^3) does not split; on sm_90a stream-K evens out a ragged last wave -- 1024 x 2304 x K
 * has 144 tiles of 128 x 128 for 132 SMs, two rounds for one and a tenth of work -- and is
 * estimated faster than the same tile without it (by little at K = 768, where the partial
 * sums' traffic costs about what the second round does; by a third at K = 4096), and no
 * slower where the tiles fill whole waves (4096 x 4224 x 4096: 8 x 132 tiles, data-parallel). */
static void model_split_and_stream_k(hkc_tune_cand_t *c) {
  const hkc_kernel_key_t key = gemm_key(HK_DTYPE_BF16, 0, 1, 0, 0);
  static const char *const archs[] = {"sm_90", "sm_80"};
  hkc_kernel_options_t split = {0}, off = {0};
  char err[256];
  assert_int_equal(hkc_kernel_options_set(&split, "gemm_split", "on", err, sizeof err), 0);
  assert_int_equal(hkc_kernel_options_set(&off, "gemm_split", "off", err, sizeof err), 0);
  int n;
  for (size_t a = 0; a < 2; a++) {
    const hkc_gpu_arch_t *ar = hk_test_arch(archs[a]);
    /* gemm_split=off: no candidate splits through the workspace */
    int p = model_pick_for(ar, &off, key, (hkc_tune_shape_t){.m = 128, .n = 768, .k = 3072}, c, &n);
    for (int i = 0; i < n; i++) assert_true(!c[i].cfg.split_global && c[i].cfg.stream_k == 0);
    assert_true(c[p].cfg.split_k <= 1);
    /* the defaults (auto) and on: split-K in the space, chosen for 12 tiles over K = 3072 */
    p = model_pick(ar, key, (hkc_tune_shape_t){.m = 128, .n = 768, .k = 3072}, c, &n);
    assert_true(c[p].cfg.split_k > 1 && c[p].cfg.split_global);
    p = model_pick_for(ar, &split, key, (hkc_tune_shape_t){.m = 128, .n = 768, .k = 3072}, c, &n);
    int def = -1;
    for (int i = 0; i < n; i++)
      if (c[i].cfg.is_default) def = i;
    printf("[ info     ] %s 128x768x3072: %s %s %.1f us (default %.1f us)\n", archs[a], c[p].cfg.variant, c[p].cfg.tune,
           c[p].est.seconds * 1e6, c[def].est.seconds * 1e6);
    assert_string_equal(c[p].cfg.variant, "gemm_mma");
    assert_true(c[p].cfg.split_k > 1 && c[p].cfg.split_global);
    assert_true(c[p].est.seconds < c[def].est.seconds / 2);
    p = model_pick_for(ar, &split, key, (hkc_tune_shape_t){.m = 4096, .n = 4096, .k = 4096}, c, &n);
    assert_int_equal(c[p].cfg.split_k, 1);
  }
  const hkc_gpu_arch_t *h200 = hk_test_arch("sm_90a");
  /* sm_90a's space: stream-K only with gemm_split=on (measured slower than unsplit) */
  int defaults = 0, with_split = 0;
  n = hkc_tune_cands(h200, &key, c, HKC_TUNE_MAX_CANDIDATES);
  for (int i = 0; i < n; i++) defaults += c[i].cfg.stream_k > 0;
  n = hkc_tune_cands_for(h200, &split, &key, c, HKC_TUNE_MAX_CANDIDATES);
  for (int i = 0; i < n; i++) with_split += c[i].cfg.stream_k > 0;
  assert_int_equal(defaults, 0);
  assert_true(with_split >= 4);
  hkc_tile_cfg_t plain, streamk;
  hkc_model_est_t ep, es;
  assert_int_equal(hkc_tune_lookup_cfg(h200, &key, "gemm_tma", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1", &plain), 0);
  assert_int_equal(hkc_tune_lookup_cfg(h200, &key, "gemm_tma", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0,skm=4", &streamk), 0);
  const hkc_tune_shape_t ragged = {.m = 1024, .n = 2304, .k = 768}, ragged_k = {.m = 1024, .n = 2304, .k = 4096},
                         waves = {.m = 4096, .n = 4224, .k = 4096};
  assert_int_equal(hkc_model_estimate(h200, &plain, ragged, HK_DTYPE_BF16, 0, 0, 1, &ep), 0);
  assert_int_equal(hkc_model_estimate(h200, &streamk, ragged, HK_DTYPE_BF16, 0, 0, 1, &es), 0);
  printf("[ info     ] sm_90a 1024x2304x768 128x128: %.1f us, stream-K %.1f us\n", ep.seconds * 1e6, es.seconds * 1e6);
  assert_true(es.seconds < ep.seconds);
  assert_int_equal(hkc_model_estimate(h200, &plain, ragged_k, HK_DTYPE_BF16, 0, 0, 1, &ep), 0);
  assert_int_equal(hkc_model_estimate(h200, &streamk, ragged_k, HK_DTYPE_BF16, 0, 0, 1, &es), 0);
  printf("[ info     ] sm_90a 1024x2304x4096 128x128: %.1f us, stream-K %.1f us\n", ep.seconds * 1e6, es.seconds * 1e6);
  assert_true(es.seconds < 0.7 * ep.seconds);
  assert_int_equal(hkc_model_estimate(h200, &plain, waves, HK_DTYPE_BF16, 0, 0, 1, &ep), 0);
  assert_int_equal(hkc_model_estimate(h200, &streamk, waves, HK_DTYPE_BF16, 0, 0, 1, &es), 0);
  assert_true(es.seconds <= ep.seconds * 1.001);
}

static void test_model(void **state) {
  (void)state;
  const hkc_gpu_arch_t *h200 = hk_test_arch("sm_90a");
  hkc_kernel_key_t key = gemm_key(HK_DTYPE_BF16, 1, 0, 0, 0);
  hkc_tune_cand_t *c = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *c);
  assert_non_null(c);
  int n;
  /* large shapes: 128-row gemm_tma tiles with the widest wgmma N (192 or 256), persistent,
   * no split-K, compute-bound, at a rate close to what gemm_tma 128x256 measured on the H200
   * (docs/device-runs/2026-12-01-gemm-tma: 680-740 TFLOP/s at 8192^3 bf16; the model's efficiency 0.75) */
  int p = model_pick(h200, key, (hkc_tune_shape_t){.m = 8192, .n = 14336, .k = 4096}, c, &n);
  printf("[ info     ] sm_90a 8192x14336x4096: %s %s\n", c[p].cfg.variant, c[p].cfg.tune);
  assert_string_equal(c[p].cfg.variant, "gemm_tma");
  assert_true(c[p].cfg.bm == 128 && c[p].cfg.bn >= 192 && c[p].cfg.split_k == 1 && c[p].cfg.persistent);
  assert_string_equal(c[p].est.limiter, "compute");
  p = model_pick(h200, key, (hkc_tune_shape_t){.m = 8192, .n = 8192, .k = 8192}, c, &n);
  double tflops = 2.0 * 8192 * 8192 * 8192 / c[p].est.seconds / 1e12;
  printf("[ info     ] sm_90a 8192^3: %s %s, %.0f TFLOP/s estimated\n", c[p].cfg.variant, c[p].cfg.tune, tflops);
  assert_string_equal(c[p].cfg.variant, "gemm_tma");
  assert_true(tflops > 650 && tflops < 0.76 * 989);
  /* gemm_tma=off: the measured best of gemm_wgmma_ws (128x256, 3 stages, persistent) and a
   * rate close to what it measured (464.7 TFLOP/s at 8192^3) */
  {
    hkc_kernel_options_t off = {0};
    hk_test_options(&off, "gemm_tma=off");
    int order[HKC_TUNE_MAX_CANDIDATES];
    static const hkc_tune_shape_t shapes[] = {{.m = 8192, .n = 14336, .k = 4096}, {.m = 8192, .n = 8192, .k = 8192}};
    for (size_t i = 0; i < 2; i++) {
      const int m = hkc_tune_cands_for(h200, &off, &key, c, HKC_TUNE_MAX_CANDIDATES);
      assert_true(hkc_tune_rank(h200, &key, shapes[i], c, m, order) > 0);
      p = order[0];
      assert_string_equal(c[p].cfg.variant, "gemm_wgmma_ws");
      assert_string_equal(c[p].cfg.tune, "bn=256,st=3,p=1");
      assert_string_equal(c[p].est.limiter, "compute");
    }
    tflops = 2.0 * 8192 * 8192 * 8192 / c[p].est.seconds / 1e12;
    printf("[ info     ] sm_90a 8192^3, gemm_tma=off: %s %s, %.0f TFLOP/s estimated\n", c[p].cfg.variant, c[p].cfg.tune,
           tflops);
    assert_true(tflops > 420 && tflops < 510);
  }
  /* wave quantization: bert batch 1 (M = 128, N = K = 768) has 3 tiles of 128x256 for 132
   * SMs; the model takes smaller tiles, more of them, and expects it to be faster */
  p = model_pick(h200, key, (hkc_tune_shape_t){.m = 128, .n = 768, .k = 768}, c, &n);
  int def = -1;
  for (int i = 0; i < n; i++)
    if (c[i].cfg.is_default) def = i;
  assert_true(def >= 0);
  printf("[ info     ] sm_90a 128x768x768: %s %s, %lld tiles (default %lld)\n", c[p].cfg.variant, c[p].cfg.tune,
         (long long)c[p].est.tiles, (long long)c[def].est.tiles);
  assert_true(c[p].est.tiles >= 4 * c[def].est.tiles);
  assert_true(c[p].est.seconds < c[def].est.seconds / 2);
  /* llama batch 1, M = 512: 4 x 16 tiles of 128x256 leave half of the SMs idle */
  p = model_pick(h200, key, (hkc_tune_shape_t){.m = 512, .n = 4096, .k = 4096}, c, &n);
  assert_true(c[p].est.tiles >= 128);
  /* split-K (hkc_tile_cfg_t.split_k): few tiles and a long K -- 128 x 768 x 8192 has 6
   * tiles of 128x128 for 132 SMs -- run faster split 4 ways over clusters; with tiles for
   * every SM (4096^3: 1024 tiles) the split only adds the reduction */
  {
    hkc_tile_cfg_t s1, s4;
    hkc_model_est_t e1, e4;
    assert_int_equal(hkc_tune_lookup_cfg(h200, &key, "gemm_tma", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1", &s1), 0);
    assert_int_equal(hkc_tune_lookup_cfg(h200, &key, "gemm_tma", "pp=0,mw=1,bn=128,st=6,sk=4,cm=1", &s4), 0);
    assert_true(s1.split_k == 1 && s4.split_k == 4);
    const hkc_tune_shape_t thin = {.m = 128, .n = 768, .k = 8192}, square = {.m = 4096, .n = 4096, .k = 4096};
    assert_int_equal(hkc_model_estimate(h200, &s1, thin, HK_DTYPE_BF16, 0, 1, 1, &e1), 0);
    assert_int_equal(hkc_model_estimate(h200, &s4, thin, HK_DTYPE_BF16, 0, 1, 1, &e4), 0);
    printf("[ info     ] sm_90a 128x768x8192: sk=1 %.1f us, sk=4 %.1f us\n", e1.seconds * 1e6, e4.seconds * 1e6);
    assert_true(e4.seconds < e1.seconds / 2);
    assert_int_equal(hkc_model_estimate(h200, &s1, square, HK_DTYPE_BF16, 0, 1, 1, &e1), 0);
    assert_int_equal(hkc_model_estimate(h200, &s4, square, HK_DTYPE_BF16, 0, 1, 1, &e4), 0);
    assert_true(e4.seconds > e1.seconds);
  }
  /* split-K through scratch (gemm_mma, sm_80 / sm_90) and stream-K (gemm_tma) */
  model_split_and_stream_k(c);
  /* pipeline depth: a 2-slot ring leaves the k loop latency-bound where 3 slots do not */
  hkc_tile_cfg_t s2, s3;
  assert_int_equal(hkc_tune_lookup_cfg(h200, &key, "gemm_wgmma_ws", "bn=256,st=2,p=1", &s2), 0);
  assert_int_equal(hkc_tune_lookup_cfg(h200, &key, "gemm_wgmma_ws", "bn=256,st=3,p=1", &s3), 0);
  hkc_model_est_t e2, e3, e3k;
  const hkc_tune_shape_t big = {.m = 4096, .n = 4096, .k = 4096}, bigk = {.m = 4096, .n = 4096, .k = 8192};
  assert_int_equal(hkc_model_estimate(h200, &s2, big, HK_DTYPE_BF16, 0, 1, 1, &e2), 0);
  assert_int_equal(hkc_model_estimate(h200, &s3, big, HK_DTYPE_BF16, 0, 1, 1, &e3), 0);
  assert_string_equal(e2.limiter, "latency");
  assert_true(e2.seconds > e3.seconds);
  /* twice the K: about twice the time */
  assert_int_equal(hkc_model_estimate(h200, &s3, bigk, HK_DTYPE_BF16, 0, 1, 1, &e3k), 0);
  assert_true(e3k.seconds > 1.9 * e3.seconds && e3k.seconds < 2.05 * e3.seconds);
  /* a configuration that cannot run has no estimate */
  assert_int_equal(hkc_model_estimate(h200, &s3, big, HK_DTYPE_BF16, 0, 1, 0, &e2), -1);
  /* AMD: MI300X (304 CUs) and MI250X (110): small M takes small tiles, large shapes large ones */
  const hkc_gpu_arch_t *gfx = hk_test_arch("gfx942");
  key = gemm_key(HK_DTYPE_BF16, 1, 0, 0, 0);
  p = model_pick(gfx, key, (hkc_tune_shape_t){.m = 128, .n = 768, .k = 768}, c, &n);
  assert_true(c[p].cfg.bm * c[p].cfg.bn <= 128 * 64);
  p = model_pick(gfx, key, (hkc_tune_shape_t){.m = 8192, .n = 14336, .k = 4096}, c, &n);
  assert_true(c[p].cfg.bm * c[p].cfg.bn >= 128 * 128);
  p = model_pick(hk_test_arch("gfx90a"), key, (hkc_tune_shape_t){.m = 4096, .n = 4096, .k = 4096}, c, &n);
  printf("[ info     ] gfx90a 4096^3: %s %s, %s-bound\n", c[p].cfg.variant, c[p].cfg.tune, c[p].est.limiter);
  assert_string_equal(c[p].est.limiter, "compute");
  /* 4 waves or 8: gemm_mfma's single wave per SIMD waits for its own LDS reads and barriers
   * between MFMAs, gemm_mfma_pp's other group hides them -- so large GEMMs take the 8-wave
   * kernel (on both CDNA1 and CDNA2, within their registers), while the smallest tiles of the
   * 4-wave kernel still win where M is small (its 64-row, 64-column tiles spread over more CUs) */
  static const char *const cdna[] = {"gfx90a", "gfx908"};
  for (size_t i = 0; i < 2; i++) {
    const hkc_gpu_arch_t *g = hk_test_arch(cdna[i]);
    p = model_pick(g, key, (hkc_tune_shape_t){.m = 4096, .n = 4096, .k = 4096}, c, &n);
    assert_string_equal(c[p].cfg.variant, "gemm_mfma_pp");
    assert_int_equal(c[p].cfg.threads, 512);
    int best4 = -1;
    for (int j = 0; j < n; j++)
      if (!strcmp(c[j].cfg.variant, "gemm_mfma") && c[j].est.seconds > 0 &&
          (best4 < 0 || c[j].est.seconds < c[best4].est.seconds))
        best4 = j;
    assert_true(best4 >= 0 && c[p].est.seconds < c[best4].est.seconds);
    printf("[ info     ] %s 4096^3: %s %s %.0f us, best 4-wave %s %.0f us\n", cdna[i], c[p].cfg.variant, c[p].cfg.tune,
           c[p].est.seconds * 1e6, c[best4].cfg.tune, c[best4].est.seconds * 1e6);
    p = model_pick(g, key, (hkc_tune_shape_t){.m = 8, .n = 4096, .k = 4096}, c, &n);
    printf("[ info     ] %s 8x4096x4096: %s %s\n", cdna[i], c[p].cfg.variant, c[p].cfg.tune);
    assert_string_equal(c[p].cfg.variant, "gemm_mfma");
    assert_int_equal(c[p].cfg.bm, 64);
  }
  free(c);
}

/* The occupancy floor and resources from a compile: spills and over-budget kernels drop. */
static void test_pruning(void **state) {
  (void)state;
  const hkc_gpu_arch_t *a = hk_test_arch("gfx90a");
  hkc_kernel_key_t key = gemm_key(HK_DTYPE_F16, 1, 0, 0, 0);
  hkc_tune_cand_t c[4];
  assert_true(hkc_tune_cands(a, &key, c, 4) >= 1);
  hkc_kernel_out_t ko = {0};
  hkc_compile_item_t item = {.rc = 0, .kernel = &ko};
  item.result.vgprs = 252;
  item.result.agprs = 80;
  item.result.sgprs = 70;
  item.result.shared_bytes = 40960;
  hkc_tune_cand_t ok = c[0];
  hkc_tune_cand_resources(a, &ok, &item);
  assert_null(ok.pruned);
  assert_int_equal(ok.per_cu, 1);
  hkc_tune_cand_t spill = c[0];
  item.result.scratch_bytes = 16;
  hkc_tune_cand_resources(a, &spill, &item);
  assert_string_equal(spill.pruned, "spills");
  hkc_tune_cand_t big = c[0];
  item.result.scratch_bytes = 0;
  item.result.vgprs = 600; /* over the 512-register file */
  hkc_tune_cand_resources(a, &big, &item);
  assert_string_equal(big.pruned, "registers/shared");
  hkc_tune_cand_t failed = c[0];
  item.rc = -1;
  hkc_tune_cand_resources(a, &failed, &item);
  assert_string_equal(failed.pruned, "compile");
  /* floor: a 64-thread block alone on an SM (2 warps for 4 schedulers) */
  hkc_tile_cfg_t tiny = c[0].cfg;
  tiny.threads = 64;
  assert_false(hkc_model_meets_floor(hk_test_arch("sm_90a"), &tiny, 1));
  assert_true(hkc_model_meets_floor(hk_test_arch("sm_90a"), &tiny, 2));
}

/* ---- the database ---------------------------------------------------------------------------------- */
static const char k_db[] =
    "# a comment\n"
    "\n"
    "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=4096 n=768 k=768 bias res | gemm_wgmma | bm=64,bn=128,st=4 | 30.5 us\n"
    "sm_90a\t132\tnvrtc 13.0\tgemm bf16 m=128 n=2304 k=768 bias\tgemm_wgmma\tbm=64,bn=64,st=6\t6.25\n"
    "   # indented comment\n"
    "gfx90a | 110 | hiprtc 5.2.21153, comgr 2.4 | gemm f16 m=4096 n=4096 k=4096 tb bias act=gelu res | gemm_mfma | bm=128,bn=256,bk=32 | 1234 us\n";

/* Attention (attention_tma on sm_90a, attention_mma's split-KV everywhere): the signature; the model's picks --
 * the default 128-row tiles on long sequences, 64-row tiles (two blocks per SM) where the
 * 128-row tiles leave most SMs idle (BERT, batch 1); causal about half the full time. */
static void test_attention_model(void **state) {
  (void)state;
  const hkc_gpu_arch_t *h200 = hk_test_arch("sm_90a");
  /* attention_tma is the default (a plain key has its shape); attn_tma=on names it in the key */
  const hkc_kernel_key_t plain = {.op = HK_OP_ATTENTION, .dtype = HK_DTYPE_BF16, .align = 8, .head_dim = 64};
  hkc_kernel_key_t key = plain;
  snprintf(key.variant, sizeof key.variant, "attention_tma");
  /* batch 1, 128 queries and keys, 12 heads of 64 */
  hkc_arg_t args[HKC_ATTENTION_N_ARGS] = {{.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR},
                                          {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_I64, .i = 1},
                                          {.kind = HK_ARG_I64, .i = 128}, {.kind = HK_ARG_I64, .i = 128},
                                          {.kind = HK_ARG_I64, .i = 12}, {.kind = HK_ARG_I64, .i = 12},
                                          {.kind = HK_ARG_I64, .i = 64}, {.kind = HK_ARG_I64, .i = 2304},
                                          {.kind = HK_ARG_I64, .i = 2304}, {.kind = HK_ARG_I64, .i = 0},
                                          {.kind = HK_ARG_I64, .i = 768}, {.kind = HK_ARG_I64, .i = 1536},
                                          {.kind = HK_ARG_I64, .i = 0}, {.kind = HK_ARG_F32}};
  hkc_tune_shape_t shape;
  assert_int_equal(hkc_tune_shape_of(h200, &plain, args, HKC_ATTENTION_N_ARGS, &shape), 1);
  assert_int_equal(hkc_tune_shape_of(h200, &key, args, HKC_ATTENTION_N_ARGS, &shape), 1);
  assert_true(shape.m == 128 && shape.n == 128 && shape.k == 64 && shape.batch == 1 && shape.heads == 12 &&
              shape.kv_heads == 12 && !shape.causal);
  /* sm_90 / sm_80: attention_mma, whose split-KV (kvs) the model chooses */
  assert_int_equal(hkc_tune_shape_of(hk_test_arch("sm_90"), &key, args, HKC_ATTENTION_N_ARGS, &shape), 1);
  assert_int_equal(hkc_tune_shape_of(hk_test_arch("sm_80"), &key, args, HKC_ATTENTION_N_ARGS, &shape), 1);
  assert_int_equal(hkc_tune_shape_of(NULL, &key, args, HKC_ATTENTION_N_ARGS, &shape), 0);
  char sig[160];
  hkc_tune_signature(&key, (hkc_tune_shape_t){.m = 512, .n = 512, .k = 128, .batch = 4, .heads = 32, .kv_heads = 8, .causal = 1}, sig, sizeof sig);
  assert_string_equal(sig, "attention bf16 b=4 h=32 kvh=8 sq=512 skv=512 d=128 causal");
  {
    /* a gemm with a rope epilogue and a folded norm: the flags in the database's order */
    const hkc_kernel_key_t fused = {.op = HK_OP_GEMM, .dtype = HK_DTYPE_BF16, .has_bias = 1, .rope = 1, .head_dim = 128,
                                    .norm_a = 1, .align = 8};
    hkc_tune_signature(&fused, (hkc_tune_shape_t){.m = 512, .n = 6144, .k = 4096}, sig, sizeof sig);
    assert_string_equal(sig, "gemm bf16 m=512 n=6144 k=4096 bias rope=d128 norm");
    /* a gemm with a layernorm epilogue */
    const hkc_kernel_key_t ln = {.op = HK_OP_GEMM, .dtype = HK_DTYPE_BF16, .has_bias = 1, .has_residual = 1,
                                 .norm_c = 1, .norm_cols = 768, .align = 8};
    hkc_tune_signature(&ln, (hkc_tune_shape_t){.m = 16384, .n = 768, .k = 3072}, sig, sizeof sig);
    assert_string_equal(sig, "gemm bf16 m=16384 n=768 k=3072 bias res ln");
  }
  assert_true(hkc_tune_shape_flops(&key, (hkc_tune_shape_t){.m = 512, .n = 512, .k = 128, .batch = 4, .heads = 32, .kv_heads = 8, .causal = 1}) == 2.0 * 4 * 32 * 512 * 512 * 128);
  hkc_tune_cand_t *c = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *c);
  assert_non_null(c);
  int n;
  /* BERT, batch 1: 12 tiles of 128 rows for 132 SMs; 64-row tiles double the SMs in use */
  const hkc_tune_shape_t bert1 = {.m = 128, .n = 128, .k = 64, .batch = 1, .heads = 12, .kv_heads = 12};
  int p = model_pick(h200, key, bert1, c, &n);
  printf("[ info     ] attention b1 s128 h12 d64: %s %s, %.2f us (%s)\n", c[p].cfg.variant, c[p].cfg.tune,
         c[p].est.seconds * 1e6, c[p].est.limiter);
  assert_string_equal(c[p].cfg.variant, "attention_tma");
  assert_int_equal(c[p].cfg.bm, 64);
  int order[HKC_TUNE_MAX_CANDIDATES];
  const int m = hkc_tune_rank(h200, &key, bert1, c, n, order);
  assert_true(m > 1 && m < n);
  for (int i = 0; i < m; i++) /* the others: no model; attention_mma's split-KV configurations compete */
    assert_true(strcmp(c[order[i]].cfg.variant, "attention_tma") == 0 ||
                (strcmp(c[order[i]].cfg.variant, "attention_mma") == 0 && c[order[i]].cfg.split_kv > 1));
  /* batch 8, 16 heads, seq 4096, dh 128: the default (128 x 128, ping-pong + overlap) */
  hkc_kernel_key_t k128 = key;
  k128.head_dim = 128;
  p = model_pick(h200, k128, (hkc_tune_shape_t){.m = 4096, .n = 4096, .k = 128, .batch = 8, .heads = 16, .kv_heads = 16, .causal = 0}, c, &n);
  printf("[ info     ] attention b8 s4096 h16 d128: %s %s, %.1f us, %.0f TFLOP/s (%s)\n", c[p].cfg.variant, c[p].cfg.tune,
         c[p].est.seconds * 1e6, 4.0 * 8 * 16 * 4096.0 * 4096 * 128 / c[p].est.seconds / 1e12, c[p].est.limiter);
  assert_string_equal(c[p].cfg.tune, "wg=2,kv=128,st=3,pp=1,ov=1,p=1"); /* attention_tma's defaults at dh 128 */
  assert_string_equal(c[p].est.limiter, "compute");
  /* causal: about half the work, a little more than half the time (diagonal tiles, balance) */
  hkc_model_est_t full, causal;
  assert_int_equal(hkc_model_estimate_attention(h200, &c[p].cfg, (hkc_tune_shape_t){.m = 4096, .n = 4096, .k = 128, .batch = 8, .heads = 16, .kv_heads = 16, .causal = 0},
                                                HK_DTYPE_BF16, 1, &full), 0);
  assert_int_equal(hkc_model_estimate_attention(h200, &c[p].cfg, (hkc_tune_shape_t){.m = 4096, .n = 4096, .k = 128, .batch = 8, .heads = 16, .kv_heads = 16, .causal = 1},
                                                HK_DTYPE_BF16, 1, &causal), 0);
  printf("[ info     ] attention b8 s4096 h16 d128: full %.1f us, causal %.1f us\n", full.seconds * 1e6, causal.seconds * 1e6);
  assert_true(causal.seconds > 0.5 * full.seconds && causal.seconds < 0.6 * full.seconds);
  /* a configuration without model figures has no estimate */
  hkc_tile_cfg_t none = c[p].cfg;
  none.efficiency = 0;
  assert_int_equal(hkc_model_estimate_attention(h200, &none, (hkc_tune_shape_t){.m = 4096, .n = 4096, .k = 128, .batch = 8, .heads = 16, .kv_heads = 16, .causal = 0},
                                                HK_DTYPE_BF16, 1, &full), -1);
  free(c);
}

static void test_db_parse_format(void **state) {
  (void)state;
  hkc_tune_db_t db = {0};
  /* the rope and folded-norm flags parse (a rope gemm's, a dual gemm with a folded norm) */
  static const char fused[] =
      "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=512 n=6144 k=4096 bias rope=d128 norm | gemm_tma | pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=0 | 47.9 us\n"
      "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=512 n=14336 k=4096 act=silu dual norm | gemm_tma | pp=0,mw=1,bn=128,st=3,sk=1,cm=1,ts=0 | 283 us\n"
      "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=16384 n=768 k=3072 bias res ln | gemm_tma | pp=0,mw=1,bn=128,st=5,sk=1,cm=1,ts=0 | 120 us\n";
  assert_int_equal(hkc_tune_db_parse(&db, "f.db", fused, sizeof fused - 1), 0);
  assert_int_equal(db.n, 3);
  hkc_tune_db_free(&db);
  memset(&db, 0, sizeof db);
  assert_int_equal(hkc_tune_db_parse(&db, "a.db", k_db, sizeof k_db - 1), 0);
  assert_int_equal(db.n, 3);
  assert_int_equal(db.entries[1].line, 4);
  assert_string_equal(db.entries[1].params, "bm=64,bn=64,st=6");
  assert_true(db.entries[1].time_us == 6.25);
  char *text = hkc_tune_db_format(&db);
  assert_non_null(text);
  /* sorted by key, " | " separators, two decimals, the header first */
  const char *want =
      "gfx90a | 110 | hiprtc 5.2.21153, comgr 2.4 | gemm f16 m=4096 n=4096 k=4096 tb bias act=gelu res | gemm_mfma | "
      "bm=128,bn=256,bk=32 | 1234.00 us\n"
      "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=128 n=2304 k=768 bias | gemm_wgmma | bm=64,bn=64,st=6 | 6.25 us\n"
      "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=4096 n=768 k=768 bias res | gemm_wgmma | bm=64,bn=128,st=4 | 30.50 us\n";
  const char *body = strstr(text, "gfx90a");
  assert_non_null(body);
  assert_string_equal(body, want);
  assert_true(text[0] == '#');
  /* the canonical text parses back to the same text */
  hkc_tune_db_t again = {0};
  assert_int_equal(hkc_tune_db_parse(&again, "b.db", text, strlen(text)), 0);
  char *text2 = hkc_tune_db_format(&again);
  assert_string_equal(text, text2);
  assert_true(db.hash != 0 && again.hash != db.hash);
  free(text);
  free(text2);
  hkc_tune_db_free(&again);

  /* lookup: exact, then the same shape with another epilogue, else nothing */
  int exact = 0;
  const hkc_tune_entry_t *e =
      hkc_tune_db_find(&db, "sm_90a", 132, "nvrtc 13.0", "gemm bf16 m=4096 n=768 k=768 bias res", &exact);
  assert_non_null(e);
  assert_true(exact);
  e = hkc_tune_db_find(&db, "sm_90a", 132, "nvrtc 13.0", "gemm bf16 m=4096 n=768 k=768 act=gelu", &exact);
  assert_non_null(e);
  assert_false(exact);
  assert_string_equal(e->params, "bm=64,bn=128,st=4");
  assert_null(hkc_tune_db_find(&db, "sm_90a", 132, "nvrtc 13.0", "gemm bf16 m=4096 n=768 k=768 tb", &exact));
  assert_null(hkc_tune_db_find(&db, "sm_90a", 114, "nvrtc 13.0", "gemm bf16 m=4096 n=768 k=768 bias res", &exact));
  assert_null(hkc_tune_db_find(&db, "sm_90a", 132, "nvrtc 13.1", "gemm bf16 m=4096 n=768 k=768 bias res", &exact));
  hkc_tune_db_free(&db);
  /* attention entries (their own signature grammar) */
  static const char k_attn[] =
      "sm_90a | 132 | nvrtc 13.0 | attention bf16 b=4 h=32 kvh=8 sq=512 skv=512 d=128 causal | attention_tma | "
      "wg=2,kv=128,st=2,pp=1,ov=1,p=1 | 41.00 us\n"
      "sm_90a | 132 | nvrtc 13.0 | attention bf16 b=1 h=12 kvh=12 sq=128 skv=128 d=64 | attention_tma | "
      "wg=1,kv=128,st=2,pp=0,ov=1,p=1 | 4.00 us\n";
  assert_int_equal(hkc_tune_db_parse(&db, "c.db", k_attn, sizeof k_attn - 1), 0);
  assert_int_equal(db.n, 2);
  e = hkc_tune_db_find(&db, "sm_90a", 132, "nvrtc 13.0", "attention bf16 b=4 h=32 kvh=8 sq=512 skv=512 d=128 causal", &exact);
  assert_non_null(e);
  assert_true(exact);
  assert_null(hkc_tune_db_find(&db, "sm_90a", 132, "nvrtc 13.0", "attention bf16 b=4 h=32 kvh=8 sq=512 skv=512 d=128",
                               &exact));
  hkc_tune_db_free(&db);
}

static void test_db_errors(void **state) {
  (void)state;
  static const struct {
    const char *text;
    const char *want; /* "FILE:LINE: ..." and a word of the message */
  } bad[] = {
      {"# ok\nsm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 | gemm_wgmma | bm=64,bn=64,st=3\n", "t.db:2:1: expected 7"},
      {"sm_90a | x | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 | gemm_wgmma | bm=64,bn=64,st=3 | 1 us\n", "t.db:1:10: bad entry (expected units"},
      {"  sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 | gemm_wgmma | bm=64,bn=64,st=3 | 1 ms\n", "t.db:1:87: bad time"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf17 m=1 n=8 k=8 | gemm_wgmma | bm=64,bn=64,st=3 | 1 us\n", "dtype"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 k=8 n=8 | gemm_wgmma | bm=64,bn=64,st=3 | 1 us\n", "m=<rows>"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 res bias | gemm_wgmma | bm=64,bn=64,st=3 | 1 us\n", "flags"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 act=swish | gemm_wgmma | bm=64,bn=64,st=3 | 1 us\n", "act="},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 | gemm wgmma | bm=64,bn=64,st=3 | 1 us\n", "variant"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 | gemm_wgmma | bm 64 | 1 us\n", "params"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 | gemm_wgmma | bm=64,bn=64,st=3 | fast\n", "time"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 | gemm_wgmma | bm=64,bn=64,st=3 | -1 us\n", "time"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 | gemm_wgmma | bm=64,bn=64,st=3 | 1 us\n\n"
       "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 | gemm_mma | bm=64,bn=64,wm=2,wn=2,st=3 | 2 us\n",
       "t.db:3:1: duplicate key (first at line 1)"},
      {"s m | 132 | nvrtc | gemm bf16 m=1 n=8 k=8 | gemm_wgmma | bm=64,bn=64,st=3 | 1 us\n", "target"},
      {"sm_90a | 132 | nvrtc 13.0 | attention bf16 b=1 h=12 sq=128 skv=128 d=64 | attention_tma | wg=1 | 1 us\n", "kvh="},
      {"sm_90a | 132 | nvrtc 13.0 | attention bf16 b=1 h=12 kvh=12 sq=128 skv=128 d=64 tb | attention_tma | wg=1 | 1 us\n",
       "causal"},
      {"sm_90a | 132 | nvrtc 13.0 | attention bf16 m=1 n=8 k=8 | attention_tma | wg=1 | 1 us\n", "b=<batch>"},
      /* rope=d<head_dim> (even, up to 256) then norm, after dual */
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 norm rope=d128 | gemm_tma | pp=0 | 1 us\n", "flags"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 ln norm | gemm_tma | pp=0 | 1 us\n", "flags"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 rope=d7 | gemm_tma | pp=0 | 1 us\n", "even head_dim"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 rope=d512 | gemm_tma | pp=0 | 1 us\n", "even head_dim"},
      {"sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=1 n=8 k=8 rope=128 | gemm_tma | pp=0 | 1 us\n", "flags"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    char diag[1024];
    hkc_tune_db_t db = {0};
    hkc_error_reset();
    hkc_diag_capture(diag, sizeof diag);
    int rc = hkc_tune_db_parse(&db, "t.db", bad[i].text, strlen(bad[i].text));
    hkc_diag_capture(NULL, 0);
    hkc_tune_db_free(&db);
    if (rc == 0 || strncmp(diag, "t.db:", 5) != 0 || !strstr(diag, bad[i].want))
      fail_msg("case %zu: rc %d, diagnostic '%s' (wanted '%s')", i, rc, diag, bad[i].want);
  }
  hkc_error_reset();
}

static char *write_tmp(const char *dir, const char *name, const char *text) {
  char *path = malloc(strlen(dir) + strlen(name) + 2);
  assert_non_null(path);
  sprintf(path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  return path;
}

static void test_db_merge(void **state) {
  (void)state;
  char *dir = hk_test_tmpdir();
  char *a = write_tmp(dir, "a.db",
                      "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=128 n=768 k=768 | gemm_wgmma | bm=64,bn=64,st=6 | 5.00 us\n"
                      "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=512 n=768 k=768 | gemm_wgmma | bm=64,bn=64,st=6 | 9.00 us\n");
  char *b = write_tmp(dir, "b.db",
                      "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=512 n=768 k=768 | gemm_wgmma | bm=64,bn=128,st=4 | 8.00 us\n"
                      "host-x86_64 | 4 | cc 12 | gemm f32 m=16 n=64 k=64 | host_gemm | bm=16,bn=256,bk=32 | 3.00 us\n"
                      "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=128 n=768 k=768 | gemm_mma | bm=64,bn=64,wm=2,wn=2,st=4 | 5.50 us\n");
  char out[4096];
  snprintf(out, sizeof out, "%s/c.db", dir);
  const char *paths[] = {a, b};
  assert_int_equal(hkc_tune_db_merge(paths, 2, out, 1), 0);
  hkc_tune_db_t db = {0};
  assert_int_equal(hkc_tune_db_load(&db, out), 0);
  assert_int_equal(db.n, 3);
  char *text = hkc_tune_db_format(&db);
  const char *want = "host-x86_64 | 4 | cc 12 | gemm f32 m=16 n=64 k=64 | host_gemm | bm=16,bn=256,bk=32 | 3.00 us\n"
                     "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=128 n=768 k=768 | gemm_wgmma | bm=64,bn=64,st=6 | 5.00 us\n"
                     "sm_90a | 132 | nvrtc 13.0 | gemm bf16 m=512 n=768 k=768 | gemm_wgmma | bm=64,bn=128,st=4 | 8.00 us\n";
  assert_string_equal(strstr(text, "host-"), want); /* the faster of each conflict, sorted */
  free(text);
  hkc_tune_db_free(&db);
  /* a malformed input: an error, no output */
  char *bad = write_tmp(dir, "bad.db", "sm_90a | 132\n");
  char out2[4096];
  snprintf(out2, sizeof out2, "%s/d.db", dir);
  const char *paths2[] = {a, bad};
  char diag[512];
  hkc_diag_capture(diag, sizeof diag);
  assert_int_equal(hkc_tune_db_merge(paths2, 2, out2, 1), -1);
  hkc_diag_capture(NULL, 0);
  hkc_error_reset();
  assert_non_null(strstr(diag, "bad.db:1:"));
  FILE *f = fopen(out2, "r");
  assert_null(f);
  free(a);
  free(b);
  free(bad);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  free(dir);
}

/* ---- the build's choice ------------------------------------------------------------------------------ */
static void test_tuner_db_choice(void **state) {
  (void)state;
  const hkc_gpu_arch_t *a = hk_test_arch("sm_90a");
  char toolchain[160], text[1024];
  hkc_tune_toolchain(a, toolchain, sizeof toolchain);
  snprintf(text, sizeof text,
           "sm_90a | 132 | %s | gemm bf16 m=4096 n=768 k=768 bias | gemm_wgmma | bm=64,bn=128,st=4 | 30 us\n"
           "sm_90a | 132 | %s | gemm bf16 m=128 n=768 k=768 bias | gemm_wgmma_ws | bn=256,st=9,p=1 | 30 us\n",
           toolchain, toolchain);
  hkc_tune_db_t db = {0};
  assert_int_equal(hkc_tune_db_parse(&db, "x.db", text, strlen(text)), 0);
  hkc_tuner_t *t = hkc_tuner_create(HKC_TUNE_DEFAULT, &db, 0, 1, 1, NULL);
  assert_non_null(t);
  hkc_tune_launch_t l[3];
  memset(l, 0, sizeof l);
  for (int i = 0; i < 3; i++) {
    l[i].key = gemm_key(HK_DTYPE_BF16, 1, i == 1 ? HK_ACT_GELU : 0, 0, 0);
    l[i].tunable = 1;
    l[i].shape = (hkc_tune_shape_t){.m = i == 2 ? 128 : 4096, .n = 768, .k = 768};
  }
  char diag[1024];
  hkc_diag_capture(diag, sizeof diag);
  assert_int_equal(hkc_tuner_choose(t, "sm_90a", a, l, 3), 0);
  hkc_diag_capture(NULL, 0);
  /* exact entry */
  assert_int_equal(l[0].source, HKC_TUNE_SRC_DB);
  assert_string_equal(l[0].key.variant, "gemm_wgmma");
  assert_string_equal(l[0].key.tune, "bm=64,bn=128,st=4");
  /* another epilogue, same shape: the entry still serves */
  assert_int_equal(l[1].source, HKC_TUNE_SRC_DB);
  assert_string_equal(l[1].key.tune, "bm=64,bn=128,st=4");
  /* an illegal configuration (9 stages of 48 KiB): a warning at its line, then the mode's choice */
  assert_int_equal(l[2].source, HKC_TUNE_SRC_DEFAULT);
  assert_string_equal(l[2].key.variant, "");
  assert_non_null(strstr(diag, "x.db:2:"));
  hkc_tuner_destroy(t);
  hkc_tune_db_free(&db);
  hkc_error_reset();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_params_parse),   cmocka_unit_test(test_spaces),
      cmocka_unit_test(test_key_identity),   cmocka_unit_test(test_variant_macros_and_launch),
      cmocka_unit_test(test_model),          cmocka_unit_test(test_attention_model), cmocka_unit_test(test_pruning),
      cmocka_unit_test(test_db_parse_format), cmocka_unit_test(test_db_errors),
      cmocka_unit_test(test_db_merge),       cmocka_unit_test(test_tuner_db_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
