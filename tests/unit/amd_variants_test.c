/* SPDX-License-Identifier: Apache-2.0 */
/* The AMD matrix-core variants (compiler/codegen/variants/variant_amd.c): which keys select
 * gemm_mfma / gemm_mfma_pp / attention_mfma, their launches and defaults, and -- when hiprtc
 * and comgr load (cmocka skip() otherwise, with the reason printed) -- real compiles for
 * gfx90a and gfx908 (gfx942 when the toolchain builds it; skipped visibly with ROCm 5.2) in
 * f16 and bf16 with epilogue combinations (incl. the epilogue multiply), of every
 * configuration in both GEMM variants' tuning spaces, checked statically: no scratch
 * (spills), LDS within 64 KiB and as the variant computes it, plausible VGPR/AGPR counts,
 * v_mfma in the disassembly, occupancy >= 1 wave per SIMD; for the 8-wave ping-pong kernel
 * also its schedule in the machine code (every MFMA inside s_setprio 1 .. s_setprio 0,
 * copies straight into LDS, on gfx90a no drain of them before the memory phase's barrier).
 * gfx1030 (no matrix cores) must keep the simple kernels and still compile them.
 * Nothing runs: there is no AMD GPU; amd_emulate_test runs the GEMMs' index arithmetic on
 * the CPU. */
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

/* A compile's resources into the kernel record hkc_occupancy reads. */
static void take_resources(hkc_kernel_out_t *k, const hkc_rtc_result_t *r) {
  k->vgprs = r->vgprs;
  k->agprs = r->agprs;
  k->sgprs = r->sgprs;
  k->shared_bytes = r->shared_bytes;
  k->scratch_bytes = r->scratch_bytes;
  k->wave_size = r->wave_size;
  k->max_block = r->max_block;
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

/* ---- gemm_mfma_pp: selection, defaults, launch (no toolchain needed) -------------------------- */
static const hkc_variant_t *variant_named(const char *name) {
  const hkc_variant_t *const *list = hkc_variant_list();
  for (size_t i = 0; list[i]; i++)
    if (!strcmp(list[i]->name, name)) return list[i];
  fail_msg("no variant %s", name);
  return NULL;
}

static void test_pp_selection(void **state) {
  (void)state;
  const hkc_variant_t *pp = variant_named("gemm_mfma_pp");
  static const char *const cdna[] = {"gfx90a", "gfx908", "gfx942", "gfx950"};
  hkc_kernel_options_t on = {0}, off = {0};
  hk_test_options(&on, "gemm_mfma_pp=on");
  hk_test_options(&off, "gemm_mfma_pp=off");
  for (size_t i = 0; i < 4; i++) {
    const hkc_gpu_arch_t *a = hk_test_arch(cdna[i]);
    const hkc_kernel_key_t k = gemm_key(HK_DTYPE_BF16, HK_ACT_GELU, 1, 1, 0, 8);
    assert_true(hkc_variant_serves(pp, a, &k));
    assert_string_equal(hk_test_variant_name(cdna[i], k), "gemm_mfma"); /* untuned: the 4-wave kernel */
    assert_string_equal(hkc_variant_for_options(a, &on, &k)->name, "gemm_mfma_pp");
    assert_string_equal(hkc_variant_for_options(a, &off, &k)->name, "gemm_mfma");
    assert_false(hkc_variant_serves(pp, a, &(hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = HK_DTYPE_F32, .align = 8}));
    assert_false(hkc_variant_serves(pp, a, &(hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = HK_DTYPE_F16, .align = 4}));
  }
  const hkc_kernel_key_t k = gemm_key(HK_DTYPE_F16, HK_ACT_NONE, 0, 0, 1, 8);
  assert_string_equal(hkc_variant_for_options(hk_test_arch("gfx1030"), &on, &k)->name, "simple");
  assert_string_not_equal(hkc_variant_for_options(hk_test_arch("sm_90"), &on, &k)->name, "gemm_mfma_pp");
  /* defaults: the largest legal tile (gfx908: 128 accumulators leave no AGPRs to spare) */
  hkc_tile_cfg_t t;
  assert_int_equal(pp->tune_parse(hk_test_arch("gfx90a"), &k, "", &t), 0);
  assert_string_equal(t.tune, "bm=256,bn=256,bk=32");
  assert_true(t.threads == 512 && t.shared_bytes == 65536 && t.is_default);
  assert_int_equal(pp->tune_parse(hk_test_arch("gfx908"), &k, "", &t), 0);
  assert_string_equal(t.tune, "bm=256,bn=128,bk=32");
  assert_int_equal(pp->tune_parse(hk_test_arch("gfx908"), &k, "bm=256,bn=256,bk=32", &t), -1);
  /* the template's limits: bn >= 128 (4 wave columns of 32), LDS 4 (bm + bn) bk bytes */
  assert_int_equal(pp->tune_parse(hk_test_arch("gfx90a"), &k, "bm=128,bn=64,bk=32", &t), -1);
  assert_int_equal(pp->tune_parse(hk_test_arch("gfx90a"), &k, "bm=128,bn=256,bk=64", &t), -1);
  assert_int_equal(pp->tune_parse(hk_test_arch("gfx90a"), &k, "bm=128,bn=128,bk=64", &t), 0);
  assert_int_equal(t.shared_bytes, 65536);
}

static void test_pp_launch(void **state) {
  (void)state;
  uint32_t grid[3], block[3], shared = 99;
  hkc_kernel_key_t g = gemm_key(HK_DTYPE_F16, HK_ACT_NONE, 1, 0, 0, 8);
  snprintf(g.variant, sizeof g.variant, "gemm_mfma_pp");
  hkc_arg_t ga[8] = {{.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR},
                     {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_I64, .i = 1000},
                     {.kind = HK_ARG_I64, .i = 776}, {.kind = HK_ARG_I64, .i = 520}};
  hkc_gpu_launch_dims(hk_test_arch("gfx90a"), &g, ga, 8, grid, block, &shared);
  assert_int_equal(grid[0], 4 * 4); /* the default 256 x 256: ceil(1000/256) * ceil(776/256) */
  assert_int_equal(block[0], 512);
  assert_int_equal(shared, 0);
  snprintf(g.tune, sizeof g.tune, "bm=64,bn=128,bk=64");
  hkc_gpu_launch_dims(hk_test_arch("gfx908"), &g, ga, 8, grid, block, &shared);
  assert_int_equal(grid[0], 16 * 7);
  assert_int_equal(block[0], 512);
}

/* ---- real compiles ----------------------------------------------------------------------- */
/* Whether every v_mfma of the disassembly lies between an s_setprio 1 and the next
 * s_setprio 0 (gemm_mfma_pp's compute phases); counts the clusters. */
static int mfma_in_clusters(const char *text, int *out_clusters) {
  int inside = 0, ok = 1;
  *out_clusters = 0;
  for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    while (*l == ' ' || *l == '\t') l++;
    if (!strncmp(l, "s_setprio 1", 11)) inside = 1, ++*out_clusters;
    else if (!strncmp(l, "s_setprio 0", 11)) inside = 0;
    else if (!strncmp(l, "v_mfma", 6) && !inside) ok = 0;
  }
  return ok;
}

/* gfx90a's memory phase ends with a barrier the copies stay in flight across: the instruction
 * before each barrier that opens a compute phase is no s_waitcnt vmcnt(0). */
static int copies_cross_barrier(const char *text) {
  const char *prev = NULL, *cur = NULL;
  for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
    while (*l == ' ' || *l == '\t') l++;
    if (!strncmp(l, "s_setprio 1", 11) && cur && !strncmp(cur, "s_barrier", 9) && prev &&
        !strncmp(prev, "s_waitcnt vmcnt(0)", 18))
      return 0;
    if (*l && *l != '\n' && *l != '/') prev = cur, cur = l;
  }
  return 1;
}

/* The pp kernel's machine code: its schedule. */
static void check_pp_disassembly(const char *arch_name, const char *kname, const char *text) {
  int clusters = 0;
  if (!mfma_in_clusters(text, &clusters)) fail_msg("%s for %s: a v_mfma outside s_setprio 1 .. 0", kname, arch_name);
  assert_true(clusters >= 1);
  assert_non_null(strstr(text, " lds")); /* buffer_load_dword ... lds: A copied straight into LDS */
  assert_non_null(strstr(text, "s_barrier"));
  if (strcmp(arch_name, "gfx908") != 0 && !copies_cross_barrier(text))
    fail_msg("%s for %s: copies drained before the memory phase's barrier", kname, arch_name);
}

/* Generates and compiles key for arch; checks the variant's static properties. sampled: one of a
 * matrix's jobs beyond its representative, compiled only when hk_test_sampled_out keeps it (every
 * one with HKC_TEST_FULL; docs/TESTING.md); its source is generated and checked either way. */
static void compile_checked_s(const char *arch_name, hkc_kernel_key_t key, const char *want_variant, int sampled) {
  const hkc_gpu_arch_t *a = hk_test_arch(arch_name);
  hkc_kernel_out_t k;
  memset(&k, 0, sizeof k);
  k.key = key;
  hk_test_kernel_name(&k);
  char *src = hkc_codegen_gpu(a, &k);
  assert_non_null(src);
  const int mfma = want_variant != NULL,
            pp = mfma && (!strcmp(want_variant, "gemm_mfma_pp") || !strcmp(want_variant, "attention_mfma_pp"));
  assert_true((strstr(src, "templates/gpu/tile_amd.h") != NULL) == mfma);
  assert_string_equal(hk_test_variant_name(arch_name, key), mfma ? want_variant : "simple");
  if (sampled && hk_test_sampled_out(arch_name, k.name, src)) {
    printf("[ info     ] %-8s %-30s %-13s %-20s sampled out (generated, not compiled)\n", arch_name, k.name,
           want_variant ? want_variant : "simple", key.tune[0] ? key.tune : "(default)");
    free(src);
    return;
  }
  hkc_rtc_result_t r;
  int rc = hkc_hiprtc_compile(src, k.name, arch_name, &r);
  if (rc != 0) print_message("%s for %s did not compile:\n%s\n", k.name, arch_name, r.log ? r.log : "(no log)");
  assert_int_equal(rc, 0);
  free(src);
  const char *dump = getenv("HK_TEST_DUMP"); /* a folder: each kernel's disassembly, for reading */
  if (dump && *dump && r.code) {
    char *text = NULL, why[256], path[1024];
    if (hkc_comgr_disassemble(r.code, r.code_size, arch_name, &text, why, sizeof why) == 0) {
      snprintf(path, sizeof path, "%s/%s.%s.s", dump, k.name, arch_name);
      FILE *f = fopen(path, "w");
      if (f) fputs(text, f), fclose(f);
    }
    free(text);
  }
  take_resources(&k, &r);
  uint32_t grid[3], block[3], dyn = 0;
  hkc_arg_t none[1] = {{.kind = HK_ARG_I64, .i = 0}};
  hkc_gpu_launch_dims(a, &key, none, 0, grid, block, &dyn);
  double pct = 0;
  const char *limiter = "";
  const uint32_t occ = hkc_occupancy(a, &k, block[0], &pct, &limiter);
  printf("[ info     ] %-8s %-30s %-13s %-20s vgpr %3u agpr %3u sgpr %3u lds %5u scratch %u block %u occ %u "
         "waves/SIMD (%.0f%%, %s)\n",
         arch_name, k.name, want_variant ? want_variant : "simple", key.tune[0] ? key.tune : "(default)", r.vgprs, r.agprs,
         r.sgprs, r.shared_bytes, r.scratch_bytes, block[0], occ, pct, limiter ? limiter : "-");
  assert_int_equal(r.scratch_bytes, 0);
  assert_true(r.shared_bytes <= 65536);
  assert_true(r.vgprs > 0 && r.vgprs <= 512);
  assert_true(occ >= 1);
  if (mfma) {
    hkc_tile_cfg_t cfg;
    if (key.op == HK_OP_GEMM) { /* the LDS the variant's rules count */
      assert_int_equal(hkc_tune_lookup_cfg(a, &key, want_variant, key.tune, &cfg), 0);
      assert_int_equal(r.shared_bytes, cfg.shared_bytes);
    } else if (pp) { /* attention_mfma_pp: K [2][bkv][dh] + V^T [2][dh][bkv + 8], 16-bit */
      const uint32_t bkv = 32;
      const uint32_t kp = key.head_dim == 128 ? 136 : 64; /* dh 128: padded K rows */
      assert_int_equal(r.shared_bytes, 2 * (bkv * kp + key.head_dim * (bkv + 8)) * 2);
    }
    assert_int_equal(r.wave_size, 64);
    assert_int_equal(block[0], pp ? 512 : 256);
    assert_int_equal(r.max_block, block[0]);
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
    if (pp) check_pp_disassembly(arch_name, k.name, text);
    free(text);
  }
  hkc_rtc_result_free(&r);
}

/* gemm_skinny_amd (the few-row GEMM, wave64): every m tile the tuner names (mb 1..8) with the
 * heaviest epilogue, K split over 2 waves, f16 and bf16, each also with the folded rmsnorm (mb=1
 * always, the others sampled unless HKC_TEST_FULL) -- compiled, no scratch, 16-byte global loads and no matrix instruction in the machine code, at
 * least 2 waves per SIMD (its loads in flight come from many waves; gfx908's 8-row form with the
 * norm, opt-in, 1); selection: the registry never picks it (gemm_mfma serves its keys
 * first), a key that names it gets it, the fused forms it does not serve keep gemm_mfma. */
static void skinny_on(const char *arch_name) {
  const hkc_gpu_arch_t *a = hk_test_arch(arch_name);
  hkc_kernel_key_t plain = gemm_key(HK_DTYPE_BF16, HK_ACT_NONE, 0, 0, 1, 8);
  assert_string_equal(hkc_variant_for(a, &plain)->name, "gemm_mfma");
  snprintf(plain.variant, sizeof plain.variant, "gemm_skinny_amd");
  assert_string_equal(hkc_variant_for(a, &plain)->name, "gemm_skinny_amd");
  hkc_kernel_key_t nn = plain; /* B stored [K, N]: not served */
  nn.trans_b = 0;
  assert_string_not_equal(hkc_variant_for(a, &nn)->name, "gemm_skinny_amd");
  hkc_kernel_key_t folded = plain; /* a folded rmsnorm: gemm_skinny_amd alone serves it */
  folded.variant[0] = '\0';
  folded.norm_a = 1;
  assert_string_equal(hkc_variant_for(a, &folded)->name != NULL ? "named" : "", "named");
  assert_string_not_equal(hkc_variant_for(a, &folded)->name, "gemm_mfma");
  static const char *const tunes[] = {"mb=1", "mb=2", "mb=4", "mb=8", "mb=1,ks=2"};
  for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
    for (size_t i = 0; i < 2 * sizeof tunes / sizeof *tunes; i++) { /* each tile plain, then with the norm */
      hkc_kernel_out_t k;
      memset(&k, 0, sizeof k);
      k.key = gemm_key((hk_dtype_t)dt, HK_ACT_SILU, 1, 1, 1, 8);
      k.key.has_mul = 1;
      k.key.norm_a = i >= sizeof tunes / sizeof *tunes;
      snprintf(k.key.variant, sizeof k.key.variant, "gemm_skinny_amd");
      snprintf(k.key.tune, sizeof k.key.tune, "%s", tunes[i % (sizeof tunes / sizeof *tunes)]);
      hk_test_kernel_name(&k);
      char *src = hkc_codegen_gpu(a, &k);
      assert_non_null(src);
      assert_non_null(strstr(src, "variant gemm_skinny_amd"));
      /* mb=1 plain and with the norm (the default launches) always; the others sampled (docs/TESTING.md) */
      if (i % (sizeof tunes / sizeof *tunes) != 0 && hk_test_sampled_out(arch_name, k.name, src)) {
        printf("[ info     ] %-8s %-40s %-10s sampled out (generated, not compiled)\n", arch_name, k.name, k.key.tune);
        free(src);
        continue;
      }
      hkc_rtc_result_t r;
      const int rc = hkc_hiprtc_compile(src, k.name, arch_name, &r);
      if (rc != 0) print_message("%s for %s did not compile:\n%s\n", k.name, arch_name, r.log ? r.log : "(no log)");
      assert_int_equal(rc, 0);
      free(src);
      take_resources(&k, &r);
      uint32_t grid[3], block[3], dyn = 0;
      hkc_arg_t args[8] = {{.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR},
                           {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_TENSOR}, {.kind = HK_ARG_I64, .i = 1},
                           {.kind = HK_ARG_I64, .i = 3072},            {.kind = HK_ARG_I64, .i = 2048}};
      hkc_gpu_launch_dims(a, &k.key, args, 8, grid, block, &dyn);
      double pct = 0;
      const char *limiter = "";
      const uint32_t occ = hkc_occupancy(a, &k, block[0], &pct, &limiter);
      printf("[ info     ] %-8s %-40s %-10s vgpr %3u sgpr %3u lds %4u scratch %u grid %u x %u occ %u waves/SIMD (%s)\n",
             arch_name, k.name, k.key.tune, r.vgprs, r.sgprs, r.shared_bytes, r.scratch_bytes, grid[0], block[0], occ,
             limiter ? limiter : "-");
      assert_int_equal(r.scratch_bytes, 0);
      assert_int_equal(r.wave_size, 64);
      assert_int_equal(block[0], 256);
      /* at least 2 waves per SIMD, but the opt-in 8-row form with the norm on gfx908 (133 VGPRs of 256: 1) */
      assert_true(occ >= (strstr(k.key.tune, "mb=8") && k.key.norm_a && !strcmp(arch_name, "gfx908") ? 1u : 2u));
      char *text = NULL;
      char why[512];
      assert_int_equal(hkc_comgr_disassemble(r.code, r.code_size, arch_name, &text, why, sizeof why), 0);
      const char *dump = getenv("HK_TEST_DUMP"); /* a folder: each kernel's disassembly, for reading */
      if (dump && *dump) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.%s.s", dump, k.name, arch_name);
        FILE *f = fopen(path, "w");
        if (f) fputs(text, f), fclose(f);
      }
      assert_non_null(strstr(text, "global_load_dwordx4"));
      assert_null(strstr(text, "v_mfma"));
      assert_null(strstr(text, "scratch_"));
      free(text);
      hkc_rtc_result_free(&r);
    }
}

/* kv_attention_wave (AMD's decode attention, kv_attention_warp's template in waves of 64): the
 * registry's pick for f16/bf16 caches of head_dim 64 and 128 on CDNA, not for the folded append,
 * fp8 caches or other head dims (the portable kernel), nor under kv_warp=off; compiled for the four
 * forms with no scratch, its LDS as the template declares, at least 2 waves per SIMD (gfx908, whose
 * register file is half gfx90a's: 1). */
static void kv_wave_on(const char *arch_name) {
  const hkc_gpu_arch_t *a = hk_test_arch(arch_name);
  hkc_kernel_key_t key = {.op = HK_OP_KV_ATTENTION, .dtype = HK_DTYPE_BF16, .align = 8, .head_dim = 64};
  assert_string_equal(hkc_variant_for(a, &key)->name, "kv_attention_wave");
  hkc_kernel_options_t off = {0};
  off.kv_warp = HKC_SWITCH_OFF;
  assert_string_equal(hkc_variant_for_options(a, &off, &key)->name, "simple");
  hkc_kernel_key_t other = key;
  other.append = 1;
  assert_string_equal(hkc_variant_for(a, &other)->name, "simple");
  other = key;
  other.head_dim = 96;
  assert_string_equal(hkc_variant_for(a, &other)->name, "simple");
  assert_string_equal(hkc_variant_for(hk_test_arch("gfx1030"), &key)->name, "simple");
  for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
    for (int dh = 64; dh <= 128; dh += 64) {
      hkc_kernel_out_t k;
      memset(&k, 0, sizeof k);
      k.key = key;
      k.key.dtype = (hk_dtype_t)dt;
      k.key.head_dim = dh;
      hk_test_kernel_name(&k);
      char *src = hkc_codegen_gpu(a, &k);
      assert_non_null(src);
      assert_non_null(strstr(src, "#define HK_KVA_AMD 1"));
      hkc_rtc_result_t r;
      const int rc = hkc_hiprtc_compile(src, k.name, arch_name, &r);
      if (rc != 0) print_message("%s for %s did not compile:\n%s\n", k.name, arch_name, r.log ? r.log : "(no log)");
      assert_int_equal(rc, 0);
      free(src);
      take_resources(&k, &r);
      hkc_arg_t args[HKC_KV_ATTENTION_N_ARGS];
      memset(args, 0, sizeof args);
      args[HKC_KV_ATTENTION_ARG_ROWS] = (hkc_arg_t){HK_ARG_I64, 1, 0};
      args[HKC_KV_ATTENTION_ARG_HEADS] = (hkc_arg_t){HK_ARG_I64, 32, 0};
      args[HKC_KV_ATTENTION_ARG_KV_HEADS] = (hkc_arg_t){HK_ARG_I64, 8, 0};
      args[HKC_KV_ATTENTION_ARG_MAX_SEQ] = (hkc_arg_t){HK_ARG_I64, 4224, 0};
      uint32_t grid[3], block[3], dyn = 0;
      hkc_gpu_launch_dims(a, &k.key, args, HKC_KV_ATTENTION_N_ARGS, grid, block, &dyn);
      double pct = 0;
      const char *limiter = "";
      const uint32_t occ = hkc_occupancy(a, &k, block[0], &pct, &limiter);
      printf("[ info     ] %-8s %-32s vgpr %3u sgpr %3u lds %5u scratch %u grid %u x %u (batch 1, 8 kv heads) occ %u "
             "waves/SIMD (%s)\n",
             arch_name, k.name, r.vgprs, r.sgprs, r.shared_bytes, r.scratch_bytes, grid[0], block[0], occ,
             limiter ? limiter : "-");
      assert_int_equal(r.scratch_bytes, 0);
      assert_int_equal(r.wave_size, 64);
      assert_int_equal(block[0], 256);
      /* om, ol, oacc per wave; pm, pl per piece; tot; last (kv_attention_warp.hip) */
      assert_int_equal(r.shared_bytes, 4 * 4 * (2 + dh) * 4 + 32 * 4 * 2 * 4 + 4 * 4 + 4);
      assert_true(occ >= (strcmp(arch_name, "gfx908") == 0 ? 1u : 2u)); /* gfx908: 256 VGPRs, 167 of them */
      hkc_rtc_result_free(&r);
    }
}

/* sample_split_wave (AMD's sample: greedy rows in 8 pieces): the registry's pick on CDNA for
 * every sample key, not on gfx1030 nor under simple_kernels; compiled in f16 and bf16 without
 * scratch, 8 blocks a row. */
static void sample_wave_on(const char *arch_name) {
  const hkc_gpu_arch_t *a = hk_test_arch(arch_name);
  const hkc_kernel_key_t key = {.op = HK_OP_SAMPLE, .dtype = HK_DTYPE_BF16, .align = 8};
  assert_string_equal(hkc_variant_for(a, &key)->name, "sample_split_wave");
  assert_string_equal(hkc_variant_for(hk_test_arch("gfx1030"), &key)->name, "simple");
  for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++) {
    hkc_kernel_out_t k;
    memset(&k, 0, sizeof k);
    k.key = key;
    k.key.dtype = (hk_dtype_t)dt;
    hk_test_kernel_name(&k);
    char *src = hkc_codegen_gpu(a, &k);
    assert_non_null(src);
    assert_non_null(strstr(src, "#define HK_SAMPLE_SPLIT 8"));
    hkc_rtc_result_t r;
    const int rc = hkc_hiprtc_compile(src, k.name, arch_name, &r);
    if (rc != 0) print_message("%s for %s did not compile:\n%s\n", k.name, arch_name, r.log ? r.log : "(no log)");
    assert_int_equal(rc, 0);
    free(src);
    hkc_arg_t args[HKC_SAMPLE_N_ARGS];
    memset(args, 0, sizeof args);
    args[HKC_SAMPLE_ARG_ROWS] = (hkc_arg_t){HK_ARG_I64, 3, 0};
    uint32_t grid[3], block[3], dyn = 0;
    hkc_gpu_launch_dims(a, &k.key, args, HKC_SAMPLE_N_ARGS, grid, block, &dyn);
    printf("[ info     ] %-8s %-28s vgpr %3u sgpr %3u lds %5u scratch %u grid %u x %u (3 rows)\n", arch_name, k.name,
           r.vgprs, r.sgprs, r.shared_bytes, r.scratch_bytes, grid[0], block[0]);
    assert_int_equal(r.scratch_bytes, 0);
    assert_int_equal(grid[0], 3 * 8);
    hkc_rtc_result_free(&r);
  }
}

static void test_kv_wave_gfx90a(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  kv_wave_on("gfx90a");
  sample_wave_on("gfx90a");
}
static void test_kv_wave_gfx908(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  kv_wave_on("gfx908");
}

static void test_skinny_gfx90a(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  skinny_on("gfx90a");
}
static void test_skinny_gfx908(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  skinny_on("gfx908");
}

static void compile_checked(const char *arch_name, hkc_kernel_key_t key, const char *want_variant) {
  compile_checked_s(arch_name, key, want_variant, 0);
}

/* mul: the epilogue multiply act(acc + bias) * mul (+ residual), the SwiGLU gate */
static const struct {
  hk_act_t act;
  int bias, res, tb, mul;
} k_epilogues[] = {
    {HK_ACT_NONE, 0, 0, 0, 0}, {HK_ACT_GELU, 1, 1, 1, 0}, {HK_ACT_RELU, 1, 0, 0, 0}, {HK_ACT_SILU, 0, 1, 1, 0},
    {HK_ACT_GELU_TANH, 1, 1, 0, 0}, {HK_ACT_SILU, 0, 0, 0, 1}, {HK_ACT_SILU, 1, 1, 1, 1},
};

/* Every epilogue in f16 and bf16; with only_bf16 (gfx908, unless HKC_TEST_FULL) bf16 alone,
 * the dtype whose MFMA differs there (32x32x4bf16, no _1k). */
static int test_full(void) {
  const char *env = getenv("HKC_TEST_FULL");
  return env && *env && strcmp(env, "0") != 0;
}

static void gemm_on(const char *arch_name, int only_bf16) {
  for (int dt = only_bf16 && !test_full() ? HK_DTYPE_BF16 : HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
    for (size_t e = 0; e < sizeof k_epilogues / sizeof *k_epilogues; e++) {
      hkc_kernel_key_t key = gemm_key((hk_dtype_t)dt, k_epilogues[e].act, k_epilogues[e].bias, k_epilogues[e].res,
                                      k_epilogues[e].tb, 8);
      key.has_mul = k_epilogues[e].mul;
      compile_checked_s(arch_name, key, "gemm_mfma", e > 0); /* the first epilogue of each dtype always */
    }
}
static void attention_on(const char *arch_name) {
  for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
    for (int dh = 64; dh <= 128; dh += 64)
      compile_checked(arch_name, attn_key((hk_dtype_t)dt, dh, 8), "attention_mfma");
}

/* Every configuration of both GEMM variants' spaces on arch: bf16, B [K, N] (staged through
 * registers), silu + bias + mul, the most registers; gemm_mfma_pp's also f16, B [N, K] (copied
 * straight into LDS), gelu + bias + residual. (gemm_mfma's default has its own 14 keys.) */
static void gemm_space_on(const char *arch_name, int heavy_only) {
  const hkc_gpu_arch_t *a = hk_test_arch(arch_name);
  hkc_tile_cfg_t *c = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *c);
  assert_non_null(c);
  hkc_kernel_key_t heavy = gemm_key(HK_DTYPE_BF16, HK_ACT_SILU, 1, 0, 0, 8);
  heavy.has_mul = 1;
  const hkc_kernel_key_t light = gemm_key(HK_DTYPE_F16, HK_ACT_GELU, 1, 1, 1, 8);
  const int n = hkc_tune_candidates(a, &heavy, c, HKC_TUNE_MAX_CANDIDATES);
  assert_true(n >= 8);
  int pp_configs = 0;
  for (int i = 0; i < n; i++) {
    const int pp = !strcmp(c[i].variant, "gemm_mfma_pp");
    hkc_kernel_key_t key = heavy;
    hkc_tune_apply(a, &key, &c[i]);
    compile_checked_s(arch_name, key, c[i].variant, i > 0); /* the first configuration always */
    if (!pp) continue;
    pp_configs++;
    if (heavy_only && !test_full()) continue; /* gfx908: the heavy key alone (HKC_TEST_FULL: both) */
    key = light;
    hkc_tune_apply(a, &key, &c[i]);
    compile_checked_s(arch_name, key, c[i].variant, pp_configs > 1); /* the first pp configuration always */
  }
  assert_true(pp_configs >= 7); /* 8 tiles on gfx90a, 7 on gfx908 */
  free(c);
}

static void test_gemm_gfx90a(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  gemm_on("gfx90a", 0);
}
static void test_gemm_gfx908(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  gemm_on("gfx908", 1);
}
static void test_gemm_space_gfx90a(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  gemm_space_on("gfx90a", 0);
}
static void test_gemm_space_gfx908(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  gemm_space_on("gfx908", 1);
}
/* gfx942 (MI300X) needs ROCm >= 6: compiled when this toolchain lists it, skipped (saying so)
 * otherwise. */
static void test_gemm_space_gfx942(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  char **names = NULL, why[256] = "";
  size_t n = 0;
  int listed = 0;
  if (hkc_comgr_isa_list(&names, &n, why, sizeof why) == 0)
    for (size_t i = 0; i < n; i++) {
      listed |= !strncmp(names[i], "gfx942", 6);
      free(names[i]);
    }
  free(names);
  if (!listed) {
    printf("[ SKIP     ] gfx942: this hiprtc (%s) cannot build it (ROCm >= 6 needed)\n", hkc_hiprtc_version());
    skip();
  }
  gemm_space_on("gfx942", 0);
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

/* ---- attention_mfma_pp ------------------------------------------------------------------- */
static void test_attn_pp_selection(void **state) {
  (void)state;
  const hkc_variant_t *pp = variant_named("attention_mfma_pp");
  hkc_kernel_options_t on = {0}, off = {0};
  hk_test_options(&on, "attn_mfma_pp=on");
  hk_test_options(&off, "attn_mfma_pp=off");
  static const char *const cdna[] = {"gfx90a", "gfx908", "gfx942", "gfx950"};
  for (size_t i = 0; i < 4; i++) {
    const hkc_gpu_arch_t *a = hk_test_arch(cdna[i]);
    for (int dh = 64; dh <= 128; dh += 64) {
      hkc_kernel_key_t k = attn_key(HK_DTYPE_BF16, dh, 8);
      k.has_mask = dh == 128;
      /* auto: the 4-wave kernel (docs/AMD_KERNELS.md: nothing measured) */
      assert_string_equal(hk_test_variant_name(cdna[i], k), "attention_mfma");
      assert_string_equal(hkc_variant_for_options(a, &off, &k)->name, "attention_mfma");
      /* gfx908 at head_dim 128: the registers of two waves per SIMD do not suffice */
      const int serves = !(i == 1 && dh == 128);
      assert_int_equal(hkc_variant_serves(pp, a, &k), serves);
      assert_string_equal(hkc_variant_for_options(a, &on, &k)->name, serves ? "attention_mfma_pp" : "attention_mfma");
    }
    assert_false(hkc_variant_serves(pp, a, &(hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = HK_DTYPE_F32,
                                                                 .align = 8, .head_dim = 64}));
    assert_false(hkc_variant_serves(pp, a, &(hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = HK_DTYPE_F16,
                                                                 .align = 8, .head_dim = 96}));
  }
  /* RDNA and NVIDIA: never */
  const hkc_kernel_key_t k = attn_key(HK_DTYPE_F16, 64, 8);
  assert_string_equal(hkc_variant_for_options(hk_test_arch("gfx1030"), &on, &k)->name, "simple");
  assert_string_not_equal(hkc_variant_for_options(hk_test_arch("sm_90"), &on, &k)->name, "attention_mfma_pp");
  /* launch: 256 queries per block of 512 threads */
  uint32_t grid[3], block[3], shared = 99;
  hkc_kernel_key_t a = attn_key(HK_DTYPE_BF16, 64, 8);
  snprintf(a.variant, sizeof a.variant, "attention_mfma_pp");
  hkc_arg_t aa[17];
  memset(aa, 0, sizeof aa);
  for (int i = 0; i < 4; i++) aa[i].kind = HK_ARG_TENSOR;
  const int64_t iv[] = {2, 300, 300, 12, 4, 64, 3 * 768, 3 * 768, 0, 768, 1536, 1};
  for (int i = 0; i < 12; i++) aa[4 + i] = (hkc_arg_t){.kind = HK_ARG_I64, .i = iv[i]};
  aa[16].kind = HK_ARG_F32;
  hkc_gpu_launch_dims(hk_test_arch("gfx90a"), &a, aa, 17, grid, block, &shared);
  assert_int_equal(grid[0], 2 * 12 * 2); /* batch * heads * ceil(300 / 256) */
  assert_int_equal(block[0], 512);
  assert_int_equal(shared, 0);
}

/* f16 and bf16, head_dim 64 and 128, plain / key lengths / additive mask (causal is a run-time
 * argument: the same code). Unless HKC_TEST_FULL: bf16 with every mask form at both head sizes
 * and f16 plain at 64 on gfx90a, bf16 plain at 64 on gfx908 (hiprtc compiles are slow; the
 * dtype changes only the MFMA opcode, which the bf16 / f16 pair still covers). */
static void attention_pp_on(const char *arch_name) {
  const int gfx908 = !strcmp(arch_name, "gfx908");
  for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
    for (int dh = 64; dh <= 128; dh += 64)
      for (int m = 0; m < 3; m++) {
        if (gfx908 && dh == 128) continue; /* not served (registers) */
        if (!test_full() && (gfx908 ? dt != HK_DTYPE_BF16 || m : dt == HK_DTYPE_F16 && (dh != 64 || m)))
          continue;
        hkc_kernel_key_t key = attn_key((hk_dtype_t)dt, dh, 8);
        key.has_lengths = m == 1;
        key.has_mask = m == 2;
        snprintf(key.variant, sizeof key.variant, "attention_mfma_pp");
        compile_checked(arch_name, key, "attention_mfma_pp");
      }
}
static void test_attn_pp_gfx90a(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  attention_pp_on("gfx90a");
}
static void test_attn_pp_gfx908(void **state) {
  (void)state;
  HK_TEST_NEED_HIPRTC();
  attention_pp_on("gfx908");
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
  /* no tuning candidates there: the 8-wave kernel can never be chosen */
  hkc_tile_cfg_t c[4];
  assert_int_equal(hkc_tune_candidates(hk_test_arch("gfx1030"), &(hkc_kernel_key_t){.op = HK_OP_GEMM,
                                       .dtype = HK_DTYPE_F16, .align = 8}, c, 4), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_selection),         cmocka_unit_test(test_launch),
      cmocka_unit_test(test_pp_selection),      cmocka_unit_test(test_pp_launch),
      cmocka_unit_test(test_gemm_gfx90a),       cmocka_unit_test(test_gemm_gfx908),
      cmocka_unit_test(test_gemm_space_gfx90a), cmocka_unit_test(test_gemm_space_gfx908),
      cmocka_unit_test(test_gemm_space_gfx942), cmocka_unit_test(test_attention_gfx90a),
      cmocka_unit_test(test_attention_gfx908),  cmocka_unit_test(test_gfx1030_simple),
      cmocka_unit_test(test_attn_pp_selection), cmocka_unit_test(test_attn_pp_gfx90a),
      cmocka_unit_test(test_attn_pp_gfx908),    cmocka_unit_test(test_skinny_gfx90a),
      cmocka_unit_test(test_skinny_gfx908),     cmocka_unit_test(test_kv_wave_gfx90a),
      cmocka_unit_test(test_kv_wave_gfx908),
  };
  const char *filter = getenv("HK_TEST_FILTER"); /* e.g. "test_attn_pp*": run only those */
  if (filter && *filter) cmocka_set_test_filter(filter);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
