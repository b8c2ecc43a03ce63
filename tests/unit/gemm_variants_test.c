/* SPDX-License-Identifier: Apache-2.0 */
/* The NVIDIA GEMM variants (compiler/variant_gemm_nv.c): which keys and archs they serve
 * (sm_90a: gemm_tma; kernel options gemm_tma=off: gemm_wgmma_ws, and with gemm_ws=off too:
 * gemm_wgmma), that they compile with nvrtc for their archs in f16/bf16 with every epilogue
 * (registers reported, no local-memory spills, no ptxas warnings such as serialized wgmma),
 * gemm_tma in a representative set of its configurations (ping-pong, two m64 blocks per
 * consumer, wgmma N 96/192, deep rings, split-K and multicast clusters), and that their
 * launches cover odd shapes with shared memory within the arch's limit and no less than
 * the template's stages need -- for gemm_tma: a persistent grid within the SMs (cm = 2:
 * whole clusters), a cluster of sk blocks per tile for split-K, and exactly the two tensor
 * maps the template reads. Kernels do not run here (no GPU); `bench/run.py gemm` checks
 * numerics and speed on the H200 (docs/BENCHMARKS.md, "GEMM"). */
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

/* the stream-K schedule gemm_tma's kernel compiles (simulated on the CPU below) */
#define HK_SK_FN static inline
#include "gpu/gemm_streamk.h"

static hkc_kernel_key_t gemm_key(hk_dtype_t dtype, int act, int trans_b, int bias, int res, int align) {
  return (hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = dtype, .act = (hk_act_t)act, .trans_b = trans_b,
                            .has_bias = bias, .has_residual = res, .align = align};
}

static hkc_kernel_key_t with_mul(hkc_kernel_key_t key) {
  key.has_mul = 1;
  return key;
}

/* The variant serving key on arch_name under kernel options (hk_test_options: "" = none). */
static const char *variant_name_with(const char *arch_name, const char *options, hkc_kernel_key_t key) {
  hkc_kernel_options_t o = {0};
  hk_test_options(&o, options);
  const hkc_variant_t *v = hkc_variant_for_options(hk_test_arch(arch_name), &o, &key);
  assert_non_null(v);
  return v->name;
}

/* key as a build under the options chooses it (the variant, and a forced configuration, in
 * the key as the tuner puts them); the options must be legal for it. */
static hkc_kernel_key_t key_with(const hkc_gpu_arch_t *arch, const char *options, hkc_kernel_key_t key) {
  hkc_kernel_options_t o = {0};
  hk_test_options(&o, options);
  if (hkc_tune_apply_options(&o, arch->name, arch, &key) < 0) fail_msg("options '%s' refused on %s", options, arch->name);
  return key;
}

static void test_selection(void **state) {
  (void)state;
  for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
    for (int tb = 0; tb < 2; tb++) {
      const hkc_kernel_key_t keys[] = {gemm_key((hk_dtype_t)dt, 0, tb, 0, 0, 8), gemm_key((hk_dtype_t)dt, 2, tb, 1, 1, 8),
                                       /* the epilogue multiply (SwiGLU gate) keeps every variant */
                                       with_mul(gemm_key((hk_dtype_t)dt, 3, tb, 0, 0, 8)),
                                       with_mul(gemm_key((hk_dtype_t)dt, 3, tb, 1, 1, 8))};
      for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const hkc_kernel_key_t key = keys[i];
        /* sm_90a: gemm_tma by default (and with gemm_tma=on) */
        assert_string_equal(hk_test_variant_name("sm_90a", key), "gemm_tma");
        assert_string_equal(variant_name_with("sm_90a", "gemm_tma=on", key), "gemm_tma");
        /* gemm_ws=off alone turns off gemm_wgmma_ws, not gemm_tma */
        assert_string_equal(variant_name_with("sm_90a", "gemm_ws=off", key), "gemm_tma");
        /* the previous sm_90a kernels, for A/B runs: gemm_tma=off gives gemm_wgmma_ws, and
         * with gemm_ws=off too gemm_wgmma */
        assert_string_equal(variant_name_with("sm_90a", "gemm_tma=off", key), "gemm_wgmma_ws");
        assert_string_equal(variant_name_with("sm_90a", "gemm_tma=off;gemm_ws=off", key), "gemm_wgmma");
        assert_string_equal(variant_name_with("sm_90a", "simple_kernels=1", key), "simple");
        /* sm_90 (no sm_90a features) and sm_80: gemm_mma, whatever gemm_tma says */
        assert_string_equal(hk_test_variant_name("sm_90", key), "gemm_mma");
        assert_string_equal(variant_name_with("sm_90", "gemm_tma=on", key), "gemm_mma");
        assert_string_equal(hk_test_variant_name("sm_80", key), "gemm_mma");
        assert_string_equal(hk_test_variant_name("gfx90a", key), "gemm_mfma");
        /* a tuned key names its variant: served where it applies, else the registry's choice */
        hkc_kernel_key_t named = key;
        snprintf(named.variant, sizeof named.variant, "gemm_wgmma_ws");
        assert_string_equal(hk_test_variant_name("sm_90a", named), "gemm_wgmma_ws");
        snprintf(named.variant, sizeof named.variant, "gemm_tma");
        assert_string_equal(hk_test_variant_name("sm_90a", named), "gemm_tma");
        assert_string_equal(hk_test_variant_name("sm_90", named), "gemm_mma");
      }
      /* alignment below 8 elements: the simple kernel; AMD CDNA: gemm_mfma (amd_variants_test) */
      assert_string_equal(hk_test_variant_name("sm_90a", gemm_key((hk_dtype_t)dt, 0, tb, 0, 0, 4)), "simple");
      assert_string_equal(hk_test_variant_name("sm_90", with_mul(gemm_key((hk_dtype_t)dt, 3, tb, 0, 1, 4))), "simple");
      assert_string_equal(hk_test_variant_name("sm_90", gemm_key((hk_dtype_t)dt, 0, tb, 0, 0, 2)), "simple");
    }
  /* f32: the simple kernel */
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
 * on sm_90a (gemm_tma, and gemm_wgmma_ws through gemm_tma=off), sm_90 and sm_80 when
 * HKC_TEST_FULL is set; otherwise, per dtype: for gemm_tma every flag combination with gelu
 * and the plain and full epilogues of every activation, each with and without mul; for
 * gemm_wgmma_ws and on sm_90 / sm_80 the plain and full epilogues with none and gelu, and
 * silu with mul alone and with everything (the SwiGLU gate). */
static const struct {
  const char *arch, *options, *variant;
} k_targets[] = {
    {"sm_90a", "", "gemm_tma"},
    {"sm_90a", "gemm_tma=off", "gemm_wgmma_ws"},
    {"sm_90", "", "gemm_mma"},
    {"sm_80", "", "gemm_mma"},
};
#define N_TARGETS (sizeof k_targets / sizeof k_targets[0])

static void test_nvrtc_variants(void **state) {
  (void)state;
  HK_TEST_NEED_NVRTC();
  const char *env = getenv("HKC_TEST_FULL");
  const int full = env && *env && strcmp(env, "0") != 0;
  hk_test_compile_job_t *jobs = calloc(N_TARGETS * 2 * 80, sizeof *jobs);
  size_t *target_of = calloc(N_TARGETS * 2 * 80, sizeof *target_of);
  assert_true(jobs && target_of);
  size_t n = 0;
  for (size_t a = 0; a < N_TARGETS; a++)
    for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++)
      for (int act = 0; act < HK_ACT_COUNT_; act++)
        for (int flags = 0; flags < 16; flags++) {
          const int tb = flags & 1, res = (flags >> 1) & 1, bias = (flags >> 2) & 1, mul = flags >> 3;
          const int ends = (flags & 7) == 0 || (flags & 7) == 7, gelu = act == HK_ACT_GELU;
          const int swiglu = act == HK_ACT_SILU && mul && ((flags & 7) == 0 || (flags & 7) == 7);
          /* the sm_90a default (gemm_tma) gets the wide set; the others, gemm_wgmma_ws (kept
           * for A/B runs) and the mma.sync kernels, the plain and full epilogues and SwiGLU */
          const int wide = strcmp(k_targets[a].variant, "gemm_tma") == 0;
          const int pick = full || (wide && (ends || (gelu && !mul))) ||
                           (!wide && ((ends && !mul && (act == 0 || gelu)) || swiglu));
          if (!pick) continue;
          hk_test_compile_job_t *j = &jobs[n];
          target_of[n++] = a;
          j->arch = hk_test_arch(k_targets[a].arch);
          hkc_kernel_key_t key = gemm_key((hk_dtype_t)dt, act, tb, bias, res, 8);
          key.has_mul = mul;
          j->kernel.key = key_with(j->arch, k_targets[a].options, key);
          hk_test_kernel_name(&j->kernel);
          assert_string_equal(hkc_variant_for(j->arch, &j->kernel.key)->name, k_targets[a].variant);
        }
  printf("[ info     ] %zu variant compiles%s\n", n, full ? "" : " (HKC_TEST_FULL=1 compiles every epilogue)");
  hk_test_compile_all(jobs, n, hkc_nvrtc_compile, 2, HK_TEST_COMPILE_NO_WARNINGS | HK_TEST_COMPILE_SAMPLED);
  const int failures = hk_test_compile_failures(jobs, n);
  uint32_t max_regs[N_TARGETS] = {0};
  for (size_t i = 0; i < n; i++)
    if (jobs[i].regs > max_regs[target_of[i]]) max_regs[target_of[i]] = jobs[i].regs;
  for (size_t a = 0; a < N_TARGETS; a++) {
    printf("[ info     ] %s %s%s%s: at most %u registers\n", k_targets[a].arch, k_targets[a].variant,
           k_targets[a].options[0] ? " " : "", k_targets[a].options, max_regs[a]);
    /* gemm_tma, gemm_wgmma_ws: ptxas reports the entry budget of 384 threads (<= 168); the
     * consumer warpgroups raise theirs to 232 with setmaxnreg (gemm_tma split-K: 224; a
     * problem there would be a spill or a C7508 warning, both failures above) */
    if (strcmp(k_targets[a].arch, "sm_90a") == 0) assert_true(max_regs[a] <= 232);
  }
  free(jobs);
  free(target_of);
  assert_int_equal(failures, 0);
}

/* The other sm_90a configurations, bf16 unless said: gemm_wgmma (gemm_tma=off, gemm_ws=off)
 * and gemm_wgmma_ws with BN 128 (gemm_tma=off, gemm_ws_cfg), plain and full epilogues (bias,
 * residual and mul, gelu), both B layouts; gemm_tma (gemm_tma_cfg) in the configurations
 * below, each with the plain epilogue in f16 and the full one in bf16 (gelu for [K][N] B,
 * silu for trans_b), both B layouts where legal. The options set the key as the tuner does.
 * Each configuration's first job always, its others in the sampled set (hk_test_sampled_out). */
static const struct {
  const char *options, *variant, *cfg; /* cfg: gemm_tma's canonical configuration */
  int tb_only;                         /* bn 96: trans_b keys only (B tile = one K-major box) */
} k_configs[] = {
    {"gemm_tma=off;gemm_ws=off", "gemm_wgmma", NULL, 0},
    {"gemm_tma=off;gemm_ws_cfg=128,6,0", "gemm_wgmma_ws", NULL, 0},
    {"gemm_tma_cfg=0,1,256,4", "gemm_tma", "pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=0", 0}, /* the default */
    {"gemm_tma_cfg=1,1,256,5", "gemm_tma", "pp=1,mw=1,bn=256,st=5,sk=1,cm=1,ts=0", 0},
    {"gemm_tma_cfg=1,2,128,6", "gemm_tma", "pp=1,mw=2,bn=128,st=6,sk=1,cm=1,ts=0", 0},
    {"gemm_tma_cfg=1,1,96,10", "gemm_tma", "pp=1,mw=1,bn=96,st=10,sk=1,cm=1,ts=0", 1},
    {"gemm_tma_cfg=0,1,192,4", "gemm_tma", "pp=0,mw=1,bn=192,st=4,sk=1,cm=1,ts=0", 0},
    {"gemm_tma_cfg=1,1,64,8,4", "gemm_tma", "pp=1,mw=1,bn=64,st=8,sk=4,cm=1,ts=0", 0},
    {"gemm_tma_cfg=0,1,128,5,4", "gemm_tma", "pp=0,mw=1,bn=128,st=5,sk=4,cm=1,ts=0", 0},
    {"gemm_tma_cfg=0,1,256,4,1,2", "gemm_tma", "pp=0,mw=1,bn=256,st=4,sk=1,cm=2,ts=0", 0},
    {"gemm_tma_cfg=1,1,64,8,1,2", "gemm_tma", "pp=1,mw=1,bn=64,st=8,sk=1,cm=2,ts=0", 0},
    {"gemm_tma_cfg=0,1,256,3,1,1,1", "gemm_tma", "pp=0,mw=1,bn=256,st=3,sk=1,cm=1,ts=1", 0}, /* C by TMA stores */
    {"gemm_tma_cfg=0,1,192,3,1,1,1", "gemm_tma", "pp=0,mw=1,bn=192,st=3,sk=1,cm=1,ts=1", 0},
    {"gemm_tma_cfg=1,1,128,7,1,1,1", "gemm_tma", "pp=1,mw=1,bn=128,st=7,sk=1,cm=1,ts=1", 0},
};
#define N_CONFIGS (sizeof k_configs / sizeof k_configs[0])
#define TMA_DEFAULT "pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=0"

/* Known spills of gemm_tma, to be fixed in the kernel: each is allowed here up to its size,
 * for its configuration and activation only; every other compile must use no local memory,
 * and a known spill that is gone is printed, so that its entry can be dropped. Found with
 * this machine's nvrtc: split-K over 4 blocks with 64 accumulators per thread (mw bn = 128)
 * spills 8 bytes with silu (sk 2 and 8 do not). Configurations of the tuning space spill 8
 * bytes as well (pp=0,mw=2,bn=64,st=5,sk=4, pp=1,mw=1,bn=128,st=8,sk=4 and
 * pp=1,mw=2,bn=64,st=8,sk=4 with the full trans_b epilogue and any activation;
 * pp=0,mw=2,bn=128,st=4,cm=2 with none or relu); the tuner drops spilling candidates
 * (tune.c), and a build forcing one warns. */
static const struct {
  const char *cfg;
  int act;
  uint32_t max_scratch;
} k_known_spills[] = {
    {"pp=0,mw=1,bn=128,st=5,sk=4,cm=1,ts=0", HK_ACT_SILU, 8},
};

static void test_nvrtc_sm90a_configurations(void **state) {
  (void)state;
  HK_TEST_NEED_NVRTC();
  const hkc_gpu_arch_t *arch = hk_test_arch("sm_90a");
  hk_test_compile_job_t *jobs = calloc(N_CONFIGS * 4, sizeof *jobs);
  size_t *config_of = calloc(N_CONFIGS * 4, sizeof *config_of);
  assert_true(jobs && config_of);
  /* the full epilogue (the registers and spills this test watches) in both B layouts; the
   * plain one for the first two configurations only, unless HKC_TEST_FULL (CI time) */
  const char *env = getenv("HKC_TEST_FULL");
  const int every = env && *env && strcmp(env, "0") != 0;
  size_t n = 0;
  for (size_t c = 0; c < N_CONFIGS; c++)
    for (int tb = k_configs[c].tb_only; tb < 2; tb++)
      for (int full = every || c < 2 || (c == 2 && tb == 0) ? 0 : 1; full < 2; full++) {
        const int tma = k_configs[c].cfg != NULL;
        const hk_dtype_t dt = tma && !full ? HK_DTYPE_F16 : HK_DTYPE_BF16;
        const int act = !full ? 0 : tma && tb ? HK_ACT_SILU : HK_ACT_GELU;
        hkc_kernel_key_t key = gemm_key(dt, act, tb, full, full, 8);
        key.has_mul = full;
        hk_test_compile_job_t *j = &jobs[n];
        config_of[n++] = c;
        j->arch = arch;
        j->always = n == 1 || config_of[n - 2] != c; /* each configuration's first job; the rest sampled */
        j->kernel.key = key_with(arch, k_configs[c].options, key);
        hk_test_kernel_name(&j->kernel);
        assert_string_equal(hkc_variant_for(arch, &j->kernel.key)->name, k_configs[c].variant);
        if (tma) { /* the forced configuration is the key's (the default: the untuned key) */
          const int is_default = strcmp(k_configs[c].cfg, TMA_DEFAULT) == 0;
          assert_string_equal(j->kernel.key.tune, is_default ? "" : k_configs[c].cfg);
          assert_string_equal(j->kernel.key.variant, is_default ? "" : "gemm_tma");
        }
      }
  hk_test_compile_all(jobs, n, hkc_nvrtc_compile, 2, HK_TEST_COMPILE_NO_WARNINGS | HK_TEST_COMPILE_SAMPLED);
  int failures = 0;
  for (size_t i = 0; i < n; i++) {
    const hk_test_compile_job_t *j = &jobs[i];
    if (j->sampled_out) continue;
    const char *cfg = k_configs[config_of[i]].cfg;
    printf("[ info     ] %s %s: regs %u, scratch %u%s%s\n", k_configs[config_of[i]].options, j->kernel.name, j->regs,
           j->scratch, j->ok ? "" : ", ", j->ok ? "" : j->error);
    int known = -1;
    for (size_t e = 0; cfg && e < sizeof k_known_spills / sizeof k_known_spills[0]; e++)
      if (!strcmp(cfg, k_known_spills[e].cfg) && j->kernel.key.act == (hk_act_t)k_known_spills[e].act) known = (int)e;
    if (known >= 0 && j->ok && j->scratch == 0)
      printf("[ NOTE     ] %s no longer spills: drop its k_known_spills entry\n", j->kernel.name);
    if (known >= 0 && j->ok && j->scratch > 0 && j->scratch <= k_known_spills[known].max_scratch) {
      printf("[ KNOWN    ] %s (%s) spills %u bytes (known: k_known_spills)\n", j->kernel.name, cfg, j->scratch);
      continue;
    }
    if (!j->ok || j->regs == 0 || j->scratch != 0 || j->regs > 232) { /* 232: the consumers' setmaxnreg budget */
      printf("[ FAIL     ] %s (%s): %s (regs %u, scratch %u)\n", j->kernel.name, k_configs[config_of[i]].options,
             !j->ok ? j->error : j->regs == 0 ? "no register count" : j->scratch ? "uses local memory (spills)" : "registers",
             j->regs, j->scratch);
      failures++;
    }
  }
  free(jobs);
  free(config_of);
  assert_int_equal(failures, 0);
}

/* ---- launches -------------------------------------------------------------------------- */
#define I64(v) ((hkc_arg_t){.kind = HK_ARG_I64, .i = (v)})
#define TENSOR(v) ((hkc_arg_t){.kind = HK_ARG_TENSOR, .i = (v)})
#define NUL ((hkc_arg_t){.kind = HK_ARG_NULL})
/* The gemm ABI's args (lower.h: A, B, bias, residual, C, M, N, K, mul) with distinct tensor
 * numbers, so the tensor maps' tensors can be told apart. */
#define GEMM_ARGS(M, N, K) {TENSOR(3), TENSOR(5), TENSOR(7), NUL, TENSOR(9), I64(M), I64(N), I64(K), TENSOR(11)}
enum { TENSOR_A = 3, TENSOR_B = 5, TENSOR_C = 9 };

static const long long k_ms[] = {1, 77, 128, 4097, 8192};
static const long long k_ns[] = {8, 136, 256, 4104, 14336};

/* ---- the layernorm epilogue (norm_c) ------------------------------------------------------ */
/* A gemm key with a layernorm epilogue over rows of `cols` columns. */
static hkc_kernel_key_t ln_key(int cols, int act, int tb) {
  hkc_kernel_key_t key = gemm_key(HK_DTYPE_BF16, act, tb, 1, 1, 8);
  key.norm_c = 1;
  key.norm_cols = cols;
  return key;
}

/* Only gemm_tma serves it, in the cooperative schedule with bn 64, 128 or 192 dividing the
 * row into a cluster of at most 8 (rows of up to 1536); the default bn is the first of 192,
 * 128, 64 that fits, with 5 stages; the launch is a cluster per row tile (not persistent:
 * the GPCs hold fewer clusters than SMs / cluster); the kernel's macros say so; each
 * legal configuration of a few compiles with nvrtc without spills. */
static void test_ln_epilogue(void **state) {
  (void)state;
  const hkc_gpu_arch_t *ar = hk_test_arch("sm_90a");
  static const struct {
    int cols, bn; /* the default's bn; 0: no configuration (refused) */
  } widths[] = {{768, 192}, {512, 128}, {320, 64}, {384, 192}, {256, 128}, {1024, 128}, {1536, 192}, {2048, 0}, {800, 0}, {72, 0}};
  for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++) {
    const hkc_kernel_key_t key = ln_key(widths[i].cols, HK_ACT_GELU, 0);
    hkc_tile_cfg_t cfg;
    const hkc_variant_t *v = hkc_variant_for(ar, &key);
    assert_non_null(v);
    assert_string_equal(v->name, "gemm_tma");
    assert_int_equal(hkc_gpu_fused_gemm_ok(ar, NULL, &key), widths[i].bn > 0);
    if (!widths[i].bn) {
      assert_int_equal(v->tune_parse(ar, &key, "", &cfg), -1);
      continue;
    }
    assert_int_equal(v->tune_parse(ar, &key, "", &cfg), 0);
    assert_int_equal(cfg.bn, widths[i].bn);
    assert_int_equal(cfg.inflight, 4); /* 5 stages */
    /* other schedules are refused for it: ping-pong, split-K, pairs, TMA stores, stream-K, bn 96, 256 */
    static const char *const bad[] = {"pp=1,mw=1,bn=128,st=5,sk=1,cm=1,ts=0", "pp=0,mw=1,bn=128,st=5,sk=2,cm=1,ts=0",
                                      "pp=0,mw=1,bn=128,st=4,sk=1,cm=2,ts=0", "pp=0,mw=1,bn=128,st=3,sk=1,cm=1,ts=1",
                                      "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0,skm=4", "pp=0,mw=1,bn=96,st=4,sk=1,cm=1,ts=0",
                                      "pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=0"};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) assert_int_equal(v->tune_parse(ar, &key, bad[b], &cfg), -1);
    /* the tuning space: legal entries only, the default first */
    hkc_tile_cfg_t space[HKC_TUNE_MAX_CANDIDATES];
    const int n = v->tune_space(ar, &key, space, HKC_TUNE_MAX_CANDIDATES);
    assert_true(n >= 2);
    assert_true(space[0].is_default);
    for (int c = 0; c < n; c++) {
      int pp, mw, bn, st, sk, cm, ts;
      assert_int_equal(sscanf(space[c].tune, "pp=%d,mw=%d,bn=%d,st=%d,sk=%d,cm=%d,ts=%d", &pp, &mw, &bn, &st, &sk, &cm, &ts), 7);
      assert_true(pp == 0 && sk == 1 && cm == 1 && ts == 0 && space[c].stream_k == 0);
      assert_true((bn == 64 || bn == 128 || bn == 192) && widths[i].cols % bn == 0 && widths[i].cols / bn <= 8);
      /* launches: whole clusters of cols / bn blocks, one row tile each, within the SMs */
      hkc_kernel_key_t k = key;
      hkc_tune_apply(ar, &k, &space[c]);
      hkc_kernel_out_t out = {.name = "hk_x", .key = k};
      char *src = hkc_codegen_gpu(ar, &out);
      assert_non_null(src);
      assert_int_equal(hk_test_source_macro(src, "HK_NORM_C"), 1);
      assert_int_equal(hk_test_source_macro(src, "HK_NORM_C_N"), widths[i].cols);
      assert_int_equal(hk_test_source_macro(src, "HK_TILE_N"), bn);
      free(src);
      const long long cluster = widths[i].cols / bn, rows = 128LL * mw;
      for (size_t mi = 0; mi < sizeof k_ms / sizeof k_ms[0]; mi++) {
        const long long M = k_ms[mi];
        hkc_arg_t args[16] = {TENSOR(3), TENSOR(5), TENSOR(7), TENSOR(8), TENSOR(9), I64(M), I64(widths[i].cols),
                              I64(200), NUL, TENSOR(12), TENSOR(13), {.kind = HK_ARG_F32, .f = 1e-5f}};
        uint32_t grid[3], block[3], shared = 0;
        hkc_gpu_launch_dims(ar, &k, args, HKC_GEMM_N_ARGS_LN, grid, block, &shared);
        const long long units = (M + rows - 1) / rows;
        assert_int_equal(grid[0], units * cluster);
        assert_true(shared > 0 && shared <= ar->max_lds_per_block);
        /* the two tensor maps after the three arguments of the layernorm */
        assert_int_equal(hkc_gpu_launch_args(ar, &k, args, HKC_GEMM_N_ARGS_LN, 16), HKC_GEMM_N_ARGS_LN + 2);
        assert_int_equal(args[HKC_GEMM_N_ARGS_LN].kind, HK_ARG_TMAP);
      }
    }
  }
  /* gemm_ln=off: no kernel for it */
  hkc_kernel_options_t off = {0};
  hk_test_options(&off, "gemm_ln=off");
  const hkc_kernel_key_t k768 = ln_key(768, 0, 0);
  assert_int_equal(hkc_gpu_fused_gemm_ok(ar, &off, &k768), 0);
  /* sm_90 and the AMD targets have none */
  assert_null(hkc_variant_for(hk_test_arch("sm_90"), &k768));
  assert_null(hkc_variant_for(hk_test_arch("gfx90a"), &k768));

  /* nvrtc: the default and narrower tiles, both B layouts, a full epilogue (bias, gelu,
   * residual), no spills within the consumers' registers */
  HK_TEST_NEED_NVRTC();
  static const struct {
    int cols, tb, act;
    const char *tune;
  } compiles[] = {{768, 0, HK_ACT_GELU, ""}, {768, 1, HK_ACT_GELU, "pp=0,mw=1,bn=128,st=5,sk=1,cm=1,ts=0"},
                  {512, 0, HK_ACT_GELU, "pp=0,mw=2,bn=128,st=3,sk=1,cm=1,ts=0"}, {320, 1, HK_ACT_GELU, ""},
                  {512, 0, HK_ACT_GELU, "pp=0,mw=2,bn=64,st=4,sk=1,cm=1,ts=0"}, {1024, 0, HK_ACT_NONE, ""},
                  {768, 0, HK_ACT_GELU, "pp=0,mw=1,bn=128,st=5,sk=1,cm=1,ts=0"}, {1536, 1, HK_ACT_SILU, ""},
                  {256, 1, HK_ACT_RELU, "pp=0,mw=2,bn=128,st=4,sk=1,cm=1,ts=0"}};
  hk_test_compile_job_t jobs[sizeof compiles / sizeof compiles[0]];
  memset(jobs, 0, sizeof jobs);
  const size_t nj = sizeof compiles / sizeof compiles[0];
  for (size_t i = 0; i < nj; i++) {
    hkc_kernel_key_t key = ln_key(compiles[i].cols, compiles[i].act, compiles[i].tb);
    if (i % 2) { /* every other one an rmsnorm that keeps its input (a pre-norm layer's residual stream) */
      key.norm_c = HKC_NORM_C_RMSNORM;
      key.has_sum = 1;
    }
    if (compiles[i].tune[0]) {
      snprintf(key.variant, sizeof key.variant, "gemm_tma");
      snprintf(key.tune, sizeof key.tune, "%s", compiles[i].tune);
    }
    jobs[i].arch = ar;
    jobs[i].kernel.key = key;
    hk_test_kernel_name(&jobs[i].kernel);
  }
  hk_test_compile_all(jobs, nj, hkc_nvrtc_compile, 2, HK_TEST_COMPILE_NO_WARNINGS);
  int failures = 0;
  for (size_t i = 0; i < nj; i++) {
    printf("[ info     ] %s (%s): regs %u, scratch %u%s%s\n", jobs[i].kernel.name,
           compiles[i].tune[0] ? compiles[i].tune : "default", jobs[i].regs, jobs[i].scratch, jobs[i].ok ? "" : ", ",
           jobs[i].ok ? "" : jobs[i].error);
    failures += !jobs[i].ok || jobs[i].regs == 0 || jobs[i].scratch != 0 || jobs[i].regs > 232;
  }
  assert_int_equal(failures, 0);
}

static void test_launch_covers_odd_shapes(void **state) {
  (void)state;
  /* the grid-per-tile and persistent variants; gemm_tma: test_tma_launch */
  static const struct {
    const char *arch, *options, *variant, *template_path;
    int persistent; /* one block per SM at most (gemm_wgmma_ws, p=1) */
  } targets[] = {
      {"sm_90a", "gemm_tma=off", "gemm_wgmma_ws", "gemm_wgmma_ws.hip", 1},
      {"sm_90a", "gemm_tma=off;gemm_ws=off", "gemm_wgmma", "gemm_wgmma.hip", 0},
      {"sm_90", "", "gemm_mma", "gemm_mma.hip", 0},
      {"sm_80", "", "gemm_mma", "gemm_mma.hip", 0},
  };
  for (size_t a = 0; a < sizeof targets / sizeof targets[0]; a++)
    for (int tb = 0; tb < 2; tb++) {
      const hkc_gpu_arch_t *ar = hk_test_arch(targets[a].arch);
      hkc_kernel_out_t k = {.name = "hk_x"};
      k.key = key_with(ar, targets[a].options, with_mul(gemm_key(HK_DTYPE_BF16, 2, tb, 1, 1, 8)));
      assert_string_equal(hkc_variant_for(ar, &k.key)->name, targets[a].variant);
      char *src = hkc_codegen_gpu(ar, &k);
      assert_non_null(src);
      const long long tm = hk_test_source_macro(src, "HK_TILE_M"), tn = hk_test_source_macro(src, "HK_TILE_N");
      const long long threads = hk_test_source_macro(src, "HK_THREADS");
      const long long stages = hk_test_source_macro(src, "HK_STAGES");
      assert_non_null(strstr(src, targets[a].template_path));
      free(src);
      for (size_t i = 0; i < sizeof k_ms / sizeof k_ms[0]; i++)
        for (size_t j = 0; j < sizeof k_ns / sizeof k_ns[0]; j++) {
          const long long M = k_ms[i], N = k_ns[j], K = 72;
          hkc_arg_t args[12] = GEMM_ARGS(M, N, K);
          uint32_t grid[3], block[3], shared = 0;
          hkc_gpu_launch_dims(ar, &k.key, args, 9, grid, block, &shared);
          assert_int_equal(grid[1], 1);
          assert_int_equal(grid[2], 1);
          assert_int_equal(block[1], 1);
          assert_int_equal(block[2], 1);
          assert_int_equal(block[0], (uint32_t)threads);
          /* one block per tile (the kernel strides beyond grid.x); persistent: one block
           * per SM at most */
          const long long tiles = ((M + tm - 1) / tm) * ((N + tn - 1) / tn);
          if (targets[a].persistent)
            assert_true((long long)grid[0] == (tiles < ar->compute_units ? tiles : (long long)ar->compute_units));
          else
            assert_true((long long)grid[0] >= tiles);
          /* the stages' tiles fit; within the arch's per-block limit */
          assert_true((long long)shared >= stages * (tm + tn) * 64 * 2);
          assert_true(shared <= ar->max_lds_per_block);
          /* the gemm ABI's arguments only */
          assert_int_equal(hkc_gpu_launch_args(ar, &k.key, args, 9, 11), 9);
        }
    }
}

/* The stream-K schedule as the test sees it: the grid, tiles and k tiles of a launch. */
static hk_sk_plan_t sk_plan_of(const hkc_gpu_arch_t *ar, long long M, long long N, long long K, long long rows, int bn,
                               int skm) {
  const long long tiles = ((M + rows - 1) / rows) * ((N + bn - 1) / bn), k_tiles = (K + 63) / 64;
  long long grid = tiles >= ar->compute_units ? ar->compute_units : tiles * k_tiles / skm;
  if (grid < tiles) grid = tiles;
  if (grid > ar->compute_units) grid = ar->compute_units;
  return hk_sk_plan(tiles, k_tiles, grid);
}

/* One gemm_tma key (its configuration in key->tune, or the defaults): macros, launches over
 * odd shapes, tensor maps, and stream-K's grid and workspace. */
static void check_tma_key(const hkc_gpu_arch_t *ar, const hkc_kernel_key_t *key) {
  const char *tune = key->tune[0] ? key->tune : TMA_DEFAULT;
  int pp, mw, bn, st, sk, cm, ts, skm = 0, used = 0;
  if (sscanf(tune, "pp=%d,mw=%d,bn=%d,st=%d,sk=%d,cm=%d,ts=%d%n", &pp, &mw, &bn, &st, &sk, &cm, &ts, &used) != 7 ||
      (tune[used] != '\0' && (sscanf(tune + used, ",skm=%d", &skm) != 1 || skm <= 0)))
    fail_msg("gemm_tma configuration '%s' is not pp=,mw=,bn=,st=,sk=,cm=,ts=[,skm= > 0]", tune);
  assert_string_equal(hkc_variant_for(ar, key)->name, "gemm_tma");
  /* the rules (sk > 1: mw bn <= 128; cm 2 only without split-K; bn 96 only for trans_b;
   * stream-K: sk 1, cm 1, mw bn <= 128) */
  assert_true(sk == 1 || mw * bn <= 128);
  assert_true(cm == 1 || (cm == 2 && sk == 1));
  assert_true(bn % 64 == 0 || key->trans_b);
  assert_true(skm == 0 || (sk == 1 && cm == 1 && mw * bn <= 128 && skm <= 64));
  const long long rows = (2 - pp) * 64LL * mw; /* C rows per block tile (ping-pong: per consumer) */
  /* the kernel's macros say the same configuration */
  hkc_kernel_out_t k = {.name = "hk_x", .key = *key};
  char *src = hkc_codegen_gpu(ar, &k);
  assert_non_null(src);
  assert_non_null(strstr(src, "gemm_tma.hip"));
  assert_int_equal(hk_test_source_macro(src, "HK_THREADS"), 384);
  assert_int_equal(hk_test_source_macro(src, "HK_PINGPONG"), pp);
  assert_int_equal(hk_test_source_macro(src, "HK_MW"), mw);
  assert_int_equal(hk_test_source_macro(src, "HK_TILE_N"), bn);
  assert_int_equal(hk_test_source_macro(src, "HK_STAGES"), st);
  assert_int_equal(hk_test_source_macro(src, "HK_SPLITK"), sk);
  assert_int_equal(hk_test_source_macro(src, "HK_CM"), cm);
  assert_int_equal(hk_test_source_macro(src, "HK_STREAMK"), skm);
  assert_true(skm == 0 || strstr(src, "gemm_streamk.h") != NULL);
  assert_int_equal(hk_test_source_macro(src, "HK_TMA_STORE"), ts);
  free(src);
  const long long sms = ar->compute_units;
  for (size_t i = 0; i < sizeof k_ms / sizeof k_ms[0]; i++)
    for (size_t j = 0; j < sizeof k_ns / sizeof k_ns[0]; j++) {
      const long long M = k_ms[i], N = k_ns[j], K = 72;
      hkc_arg_t args[12] = GEMM_ARGS(M, N, K);
      uint32_t grid[3], block[3], shared = 0;
      hkc_gpu_launch_dims(ar, key, args, 9, grid, block, &shared);
      assert_int_equal(grid[1], 1);
      assert_int_equal(grid[2], 1);
      assert_int_equal(block[0], 384);
      assert_int_equal(block[1], 1);
      assert_int_equal(block[2], 1);
      const long long g = grid[0], tiles_m = (M + rows - 1) / rows, tiles_n = (N + bn - 1) / bn;
      const long long tiles = tiles_m * tiles_n;
      hkc_node_workspace_t ws;
      const int takes = hkc_gpu_launch_workspace(ar, key, args, 9, &ws);
      assert_int_equal(takes, skm > 0);
      if (skm) { /* persistent, within the SMs, and at least one block per tile; the schedule's workspace */
        const hk_sk_plan_t p = sk_plan_of(ar, M, N, K, rows, bn, skm);
        if (g != p.grid || g > sms || (g < tiles && g != sms))
          fail_msg("%s M=%lld N=%lld: grid %lld, expected %lld", tune, M, N, g, p.grid);
        assert_int_equal(ws.scratch_bytes, (uint64_t)hk_sk_slots(&p) * (uint64_t)(rows * bn * 4));
        assert_int_equal(ws.counters, hk_sk_counters(&p));
      } else if (sk > 1) { /* a cluster of sk blocks per tile, no persistence */
        if (g != tiles * sk) fail_msg("%s M=%lld N=%lld: grid %lld, expected %lld tiles x sk %d", tune, M, N, g, tiles, sk);
      } else { /* persistent: within the SMs, whole clusters (cm = 2: pairs of row tiles) */
        const long long clusters = cm == 2 ? (tiles_m + 1) / 2 * tiles_n : tiles;
        const long long want = clusters * cm < sms / cm * cm ? clusters * cm : sms / cm * cm;
        if (g != want || g > sms || g % cm != 0)
          fail_msg("%s M=%lld N=%lld: grid %lld, expected %lld (<= %lld SMs, a multiple of cm %d)", tune, M, N, g, want,
                   sms, cm);
      }
      /* the ring of (rows + bn) x 64 halves per slot and the 16 KiB epilogue staging fit;
       * split-K partial sums (rows x bn f32) fit in the ring */
      assert_true((long long)shared >= st * (rows + bn) * 128 + 2 * 64 * 32 * 4 + ts * 4 * 64 * 32 * 2);
      assert_true(shared <= ar->max_lds_per_block);
      assert_true(sk == 1 || st * (rows + bn) * 128 >= rows * bn * 4);
      /* exactly two tensor maps after the ABI's arguments: A [M][K] in 64 x rows boxes, B
       * [N][K] (trans_b) in 64 x bn / cm boxes (a cluster's blocks multicast halves) or
       * [K][N] in 64 x 64 panels; 128-byte swizzle = the 64-element (128-byte) inner box;
       * ts 1: a third, C [M][N] in unswizzled 32 x 64 boxes (one epilogue round) */
      hkc_arg_t before[12];
      memcpy(before, args, sizeof args);
      assert_int_equal(hkc_gpu_launch_args(ar, key, args, 9, 10 + ts), 9); /* no room: nothing appended */
      assert_int_equal(hkc_gpu_launch_args(ar, key, args, 9, 12), 11 + ts);
      if (ts) {
        const uint64_t v = (uint64_t)args[11].i;
        assert_int_equal(args[11].kind, HK_ARG_TMAP);
        assert_int_equal(hk_tmap_tensor(v), TENSOR_C);
        assert_int_equal(hk_tmap_box_inner(v), 32);
        assert_int_equal(hk_tmap_box_outer(v), 64);
        assert_int_equal(hk_tmap_swizzle(v), HK_TMAP_SWIZZLE_NONE);
      }
      assert_memory_equal(args, before, 9 * sizeof args[0]);
      const uint32_t box_outer[2] = {(uint32_t)rows, key->trans_b ? (uint32_t)(bn / cm) : 64u};
      const int tensor[2] = {TENSOR_A, TENSOR_B};
      for (int t = 0; t < 2; t++) {
        const uint64_t v = (uint64_t)args[9 + t].i;
        assert_int_equal(args[9 + t].kind, HK_ARG_TMAP);
        assert_int_equal(hk_tmap_tensor(v), tensor[t]);
        assert_int_equal(hk_tmap_box_inner(v), 64);
        assert_int_equal(hk_tmap_box_outer(v), box_outer[t]);
        assert_true(hk_tmap_box_outer(v) >= 1 && hk_tmap_box_outer(v) <= HK_TMAP_BOX_MAX);
        assert_int_equal(hk_tmap_swizzle(v), HK_TMAP_SWIZZLE_128B);
        assert_int_equal(hk_tmap_swizzle_bytes(hk_tmap_swizzle(v)), 64 * 2);
      }
    }
}

/* gemm_tma: the defaults, every configuration of its tuning space (both B layouts) and the
 * forced ones above outside it. */
static void test_tma_launch(void **state) {
  (void)state;
  const hkc_gpu_arch_t *ar = hk_test_arch("sm_90a");
  assert_true(ar->compute_units > 0 && ar->compute_units % 2 == 0); /* 132 SMs on the H200 */
  const hkc_variant_t *tma = NULL;
  for (const hkc_variant_t *const *v = hkc_variant_list(); *v; v++)
    if (strcmp((*v)->name, "gemm_tma") == 0) tma = *v;
  assert_non_null(tma);
  hkc_tile_cfg_t *space = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *space);
  assert_non_null(space);
  size_t checked = 0;
  for (int tb = 0; tb < 2; tb++) {
    const hkc_kernel_key_t key = with_mul(gemm_key(HK_DTYPE_BF16, 2, tb, 1, 1, 8));
    check_tma_key(ar, &key); /* untuned: the defaults */
    const int n = tma->tune_space(ar, &key, space, HKC_TUNE_MAX_CANDIDATES);
    assert_true(n > 1 && n < HKC_TUNE_MAX_CANDIDATES);
    assert_string_equal(space[0].tune, TMA_DEFAULT);
    int split = 0, pairs = 0, narrow = 0;
    for (int i = 0; i < n; i++) {
      hkc_kernel_key_t k = key;
      hkc_tune_apply(ar, &k, &space[i]);
      check_tma_key(ar, &k);
      split += space[i].split_k > 1;
      pairs += strstr(space[i].tune, ",cm=2") != NULL;
      narrow += strstr(space[i].tune, ",bn=96,") != NULL;
      checked++;
    }
    /* the space has split-K, multicast pairs and stream-K; wgmma N 96 for trans_b keys only */
    assert_true(split > 0 && pairs > 0);
    int streamk = 0;
    for (int i = 0; i < n; i++) streamk += space[i].stream_k > 0;
    assert_true(streamk >= 4);
    assert_true(tb ? narrow > 0 : narrow == 0);
    for (size_t c = 0; c < N_CONFIGS; c++) {
      if (!k_configs[c].cfg || (k_configs[c].tb_only && !tb)) continue;
      const hkc_kernel_key_t k = key_with(ar, k_configs[c].options, key);
      check_tma_key(ar, &k);
      checked++;
    }
  }
  printf("[ info     ] %zu gemm_tma configurations' launches checked\n", checked);
  free(space);
}

/* ---- stream-K's schedule ---------------------------------------------------------------------
 * The kernel's schedule (gemm_streamk.h), run for every block of a launch on the CPU: every k
 * tile of every output tile is computed by exactly one unit; data-parallel tiles are whole and
 * come first; a block has at most two split units (its first and its last) and at least one
 * k tile when it has stream-K work; a split tile's pieces are exactly the blocks that produce
 * a split unit of it, in k order, their scratch slots distinct and within hk_sk_slots, the
 * counter within hk_sk_counters; and the busiest block's k tiles stay within one of the even
 * share (the point of stream-K). Shapes: the bars' small-M GEMMs and odd ones, on 132 and on
 * fewer SMs, with several least shares. */
static void check_streamk_schedule(long long tiles, long long k_tiles, long long units, long long skm) {
  const long long grid = hk_sk_grid(tiles, k_tiles, units, skm);
  assert_true(grid >= 1 && grid <= units && (grid >= tiles || grid == units));
  const hk_sk_plan_t p = hk_sk_plan(tiles, k_tiles, grid);
  assert_true(p.dp_tiles % grid == 0 && p.dp_tiles <= tiles);
  unsigned char *done = calloc((size_t)(tiles * k_tiles), 1);
  long long *piece_of = calloc((size_t)(tiles * grid), sizeof *piece_of); /* [tile][block]: slot + 1 of its split unit */
  long long most = 0;
  assert_true(done && piece_of);
  for (long long b = 0; b < grid; b++) {
    hk_sk_iter_t it;
    hk_sk_unit_t u;
    hk_sk_start(&p, b, &it);
    long long steps = 0, units_sk = 0, splits = 0, slots[2] = {-1, -1};
    int seen_sk = 0;
    while (hk_sk_next(&p, &it, &u)) {
      assert_true(u.tile >= 0 && u.tile < tiles && u.kt0 >= 0 && u.kt0 < u.kt1 && u.kt1 <= k_tiles);
      if (u.tile < p.dp_tiles) {
        assert_false(seen_sk); /* data-parallel first, whole tiles */
        assert_false(hk_sk_split(&p, &u));
      } else {
        seen_sk = 1;
        units_sk++;
      }
      for (long long kt = u.kt0; kt < u.kt1; kt++) {
        if (done[u.tile * k_tiles + kt]++) fail_msg("tile %lld k tile %lld computed twice", u.tile, kt);
      }
      steps += u.kt1 - u.kt0;
      if (!hk_sk_split(&p, &u)) continue;
      splits++;
      const hk_sk_pieces_t q = hk_sk_pieces(&p, u.tile);
      assert_true(q.first <= b && b <= q.last && q.first < q.last);
      assert_true(u.kt0 == 0 ? b == q.first : b > q.first); /* the first piece holds k tile 0 */
      const long long slot = hk_sk_slot(&q, b);
      assert_true(slot >= 0 && slot < hk_sk_slots(&p) && slot / 2 == b);
      assert_true(splits > 2 || slot != slots[0]); /* the block's two partials never share a slot */
      slots[(splits - 1) & 1] = slot;
      assert_true(hk_sk_counter(&p, u.tile) >= 0 && hk_sk_counter(&p, u.tile) < hk_sk_counters(&p));
      piece_of[u.tile * grid + b] = slot + 1;
    }
    assert_true(splits <= 2);
    assert_true(b >= p.sk_blocks || units_sk > 0);
    if (steps > most) most = steps;
  }
  for (long long i = 0; i < tiles * k_tiles; i++)
    if (!done[i]) fail_msg("tile %lld k tile %lld not computed", i / k_tiles, i % k_tiles);
  /* a split tile's pieces: the blocks that produced one, all of them, distinct slots */
  for (long long t = p.dp_tiles; t < tiles; t++) {
    long long pieces = 0;
    for (long long b = 0; b < grid; b++) pieces += piece_of[t * grid + b] != 0;
    if (pieces == 0) continue;
    const hk_sk_pieces_t q = hk_sk_pieces(&p, t);
    assert_int_equal(pieces, q.last - q.first + 1);
    for (long long b = q.first; b <= q.last; b++) {
      assert_true(piece_of[t * grid + b] != 0);
      for (long long c = q.first; c < b; c++) assert_true(piece_of[t * grid + b] != piece_of[t * grid + c]);
    }
  }
  const long long even = (tiles * k_tiles + grid - 1) / grid;
  if (most > even + k_tiles) fail_msg("tiles %lld k %lld grid %lld: a block has %lld k tiles, the even share %lld",
                                      tiles, k_tiles, grid, most, even);
  free(done);
  free(piece_of);
}

static void test_streamk_schedule(void **state) {
  (void)state;
  static const long long tiles[] = {1, 2, 4, 6, 7, 12, 24, 64, 128, 131, 132, 133, 144, 263, 264, 265, 396, 1000};
  static const long long ks[] = {1, 3, 12, 16, 48, 64, 224};
  static const long long units[] = {132, 114, 7, 1};
  static const long long skms[] = {1, 4, 8, 64};
  size_t n = 0;
  for (size_t t = 0; t < sizeof tiles / sizeof *tiles; t++)
    for (size_t k = 0; k < sizeof ks / sizeof *ks; k++)
      for (size_t u = 0; u < sizeof units / sizeof *units; u++)
        for (size_t m = 0; m < sizeof skms / sizeof *skms; m++, n++)
          check_streamk_schedule(tiles[t], ks[k], units[u], skms[m]);
  /* 4 tiles of 16 k tiles (77 x 776 x 1000 in 128 x 256 tiles), 4 per block: 16 blocks,
   * each tile in 4 pieces */
  const hk_sk_plan_t p = hk_sk_plan(4, 16, hk_sk_grid(4, 16, 132, 4));
  assert_int_equal(p.grid, 16);
  assert_int_equal(p.dp_tiles, 0);
  const hk_sk_pieces_t q = hk_sk_pieces(&p, 2);
  assert_int_equal(q.first, 8);
  assert_int_equal(q.last, 11);
  /* 264 tiles on 132 SMs: whole waves, data-parallel; 265: the last two waves' tiles stream-K */
  assert_int_equal(hk_sk_plan(264, 16, 132).dp_tiles, 264);
  assert_int_equal(hk_sk_plan(265, 16, 132).dp_tiles, 132);
  printf("[ info     ] %zu stream-K schedules checked\n", n);
}

/* ---- gemm_mma split-K ---------------------------------------------------------------------------
 * sm_80 / sm_90: the space holds split-K 2, 4, 8 on three small-M tiles (canonical strings
 * naming sk only when > 1); a split launch runs sk blocks per tile, and takes sk f32 partial
 * tiles per tile of scratch and one counter per tile; sk 1 takes none; the macros say it. */
static void test_mma_split(void **state) {
  (void)state;
  static const char *const archs[] = {"sm_80", "sm_90"};
  hkc_tile_cfg_t *space = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *space);
  assert_non_null(space);
  const hkc_variant_t *mma = NULL;
  for (const hkc_variant_t *const *v = hkc_variant_list(); *v; v++)
    if (strcmp((*v)->name, "gemm_mma") == 0) mma = *v;
  assert_non_null(mma);
  for (size_t a = 0; a < 2; a++) {
    const hkc_gpu_arch_t *ar = hk_test_arch(archs[a]);
    const hkc_kernel_key_t key = with_mul(gemm_key(HK_DTYPE_BF16, 2, 1, 1, 1, 8));
    const int n = mma->tune_space(ar, &key, space, HKC_TUNE_MAX_CANDIDATES);
    int splits = 0;
    for (int i = 0; i < n; i++) {
      const char *sk = strstr(space[i].tune, ",sk=");
      assert_true(space[i].split_k == 1 ? sk == NULL : sk != NULL && atoi(sk + 4) == space[i].split_k);
      if (space[i].split_k == 1) continue;
      splits++;
      assert_true(space[i].split_global);
      hkc_kernel_key_t k = key;
      hkc_tune_apply(ar, &k, &space[i]);
      hkc_kernel_out_t ko = {.name = "hk_x", .key = k};
      char *src = hkc_codegen_gpu(ar, &ko);
      assert_non_null(src);
      assert_int_equal(hk_test_source_macro(src, "HK_SPLITK"), space[i].split_k);
      free(src);
      for (size_t mi = 0; mi < sizeof k_ms / sizeof k_ms[0]; mi++)
        for (size_t ni = 0; ni < sizeof k_ns / sizeof k_ns[0]; ni++) {
          const long long M = k_ms[mi], N = k_ns[ni], K = 1000;
          hkc_arg_t args[11] = GEMM_ARGS(M, N, K);
          uint32_t grid[3], block[3], shared;
          hkc_gpu_launch_dims(ar, &k, args, 9, grid, block, &shared);
          const long long tiles = ((M + space[i].bm - 1) / space[i].bm) * ((N + space[i].bn - 1) / space[i].bn);
          assert_int_equal(grid[0], tiles * space[i].split_k);
          hkc_node_workspace_t ws;
          assert_int_equal(hkc_gpu_launch_workspace(ar, &k, args, 9, &ws), 1);
          assert_int_equal(ws.scratch_bytes, (uint64_t)(tiles * space[i].split_k * space[i].bm * space[i].bn * 4));
          assert_int_equal(ws.counters, tiles);
          assert_int_equal(hkc_gpu_launch_args(ar, &k, args, 9, 11), 9); /* no tensor maps */
        }
    }
    assert_int_equal(splits, 9);
    /* the defaults: no split, no workspace */
    hkc_arg_t args[11] = GEMM_ARGS(128, 768, 3072);
    hkc_node_workspace_t ws;
    assert_int_equal(hkc_gpu_launch_workspace(ar, &key, args, 9, &ws), 0);
    assert_int_equal(ws.scratch_bytes, 0);
    /* tuning-database strings of either form; sk 1 spelled out is the same configuration */
    hkc_tile_cfg_t t;
    assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_mma", "bm=64,bn=64,wm=2,wn=2,st=4,sk=8", &t), 0);
    assert_string_equal(t.tune, "bm=64,bn=64,wm=2,wn=2,st=4,sk=8");
    assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_mma", "bm=64,bn=64,wm=2,wn=2,st=4,sk=1", &t), 0);
    assert_string_equal(t.tune, "bm=64,bn=64,wm=2,wn=2,st=4");
    assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_mma", "bm=64,bn=64,wm=2,wn=2,st=4,sk=9", &t), -1);
    assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_mma", "bm=64,bn=64,wm=2,wn=2,st=4,sk=0", &t), -1);
  }
  /* gemm_tma: a string without skm (every tuning entry before stream-K) is the same
   * configuration as with skm=0; skm is named only when > 0, after ts; a string with skm but
   * without ts (the split-K branch's, before ts) parses as ts=0 */
  const hkc_gpu_arch_t *ar = hk_test_arch("sm_90a");
  const hkc_kernel_key_t key = gemm_key(HK_DTYPE_BF16, 0, 1, 0, 0, 8);
  hkc_tile_cfg_t t;
  assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_tma", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0,skm=0", &t), 0);
  assert_string_equal(t.tune, "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0");
  assert_int_equal(t.stream_k, 0);
  assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_tma", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,skm=0", &t), 0);
  assert_string_equal(t.tune, "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0");
  assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_tma", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1", &t), 0);
  assert_string_equal(t.tune, "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0");
  assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_tma", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,skm=8", &t), 0);
  assert_string_equal(t.tune, "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0,skm=8");
  assert_int_equal(t.stream_k, 8);
  assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_tma", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=1,skm=8", &t), 0);
  assert_string_equal(t.tune, "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=1,skm=8");
  assert_int_equal(t.stream_k, 8);
  assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_tma", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,skm=8,ts=0", &t), -1);
  assert_true(t.persistent);
  free(space);
}

/* Every new configuration compiles without spills or warnings: gemm_mma split-K (the nine of
 * its space) on sm_80 and sm_90, gemm_tma stream-K (its space's, and the two mw = 2 tiles) on
 * sm_90a; each with the full epilogue (bias, gelu, residual, mul) in bf16 with trans_b, the
 * first of each target also with the plain one in f16 and [K][N] B (the other B layout). Each
 * target's first two jobs always, the others in the sampled set (hk_test_sampled_out). */
static void test_nvrtc_split_configs(void **state) {
  (void)state;
  HK_TEST_NEED_NVRTC();
  static const struct {
    const char *arch, *options;
  } cfgs[] = {
      {"sm_80", "gemm_mma_cfg=64,64,2,2,4,2"},     {"sm_80", "gemm_mma_cfg=64,64,2,2,4,4"},
      {"sm_80", "gemm_mma_cfg=64,64,2,2,4,8"},     {"sm_80", "gemm_mma_cfg=64,128,1,4,4,2"},
      {"sm_80", "gemm_mma_cfg=64,128,1,4,4,4"},    {"sm_80", "gemm_mma_cfg=64,128,1,4,4,8"},
      {"sm_80", "gemm_mma_cfg=128,128,2,4,3,2"},   {"sm_80", "gemm_mma_cfg=128,128,2,4,3,4"},
      {"sm_80", "gemm_mma_cfg=128,128,2,4,3,8"},   {"sm_90", "gemm_mma_cfg=64,64,2,2,4,2"},
      {"sm_90", "gemm_mma_cfg=64,64,2,2,4,4"},     {"sm_90", "gemm_mma_cfg=64,64,2,2,4,8"},
      {"sm_90", "gemm_mma_cfg=64,128,1,4,4,2"},    {"sm_90", "gemm_mma_cfg=64,128,1,4,4,4"},
      {"sm_90", "gemm_mma_cfg=64,128,1,4,4,8"},    {"sm_90", "gemm_mma_cfg=128,128,2,4,4,2"},
      {"sm_90", "gemm_mma_cfg=128,128,2,4,4,4"},   {"sm_90", "gemm_mma_cfg=128,128,2,4,4,8"},
      {"sm_90a", "gemm_tma_cfg=0,1,128,6,1,1,0,4"},  {"sm_90a", "gemm_tma_cfg=0,1,128,6,1,1,0,8"},
      {"sm_90a", "gemm_tma_cfg=1,1,128,7,1,1,0,4"},  {"sm_90a", "gemm_tma_cfg=1,1,128,7,1,1,0,8"},
      {"sm_90a", "gemm_tma_cfg=1,1,64,8,1,1,0,4"},   {"sm_90a", "gemm_tma_cfg=0,2,64,4,1,1,0,4"},
      {"sm_90a", "gemm_tma_cfg=1,2,64,8,1,1,0,4"},  {"sm_90a", "gemm_tma_cfg=0,1,128,6,1,1,1,4"}, /* with ts */
  };
  const size_t n_cfgs = sizeof cfgs / sizeof cfgs[0];
  hk_test_compile_job_t *jobs = calloc(n_cfgs * 2, sizeof *jobs);
  assert_non_null(jobs);
  size_t n = 0;
  for (size_t c = 0; c < n_cfgs; c++)
    for (int full = c > 0 && strcmp(cfgs[c].arch, cfgs[c - 1].arch) == 0; full < 2; full++) {
      hk_test_compile_job_t *j = &jobs[n++];
      j->arch = hk_test_arch(cfgs[c].arch);
      hkc_kernel_key_t key = gemm_key(full ? HK_DTYPE_BF16 : HK_DTYPE_F16, full ? HK_ACT_GELU : 0, full, full, full, 8);
      key.has_mul = full;
      j->kernel.key = key_with(j->arch, cfgs[c].options, key);
      assert_true(strstr(j->kernel.key.tune, ",sk=") || strstr(j->kernel.key.tune, ",skm="));
      hk_test_kernel_name(&j->kernel);
      j->always = !full || c == 0 || strcmp(cfgs[c].arch, cfgs[c - 1].arch) != 0; /* each target's first two */
    }
  hk_test_compile_all(jobs, n, hkc_nvrtc_compile, 2, HK_TEST_COMPILE_NO_WARNINGS | HK_TEST_COMPILE_SAMPLED);
  int failures = hk_test_compile_failures(jobs, n);
  for (size_t i = 0; i < n; i++) {
    printf("[ info     ] %s %s: regs %u, scratch %u\n", jobs[i].arch->name, jobs[i].kernel.key.tune, jobs[i].regs,
           jobs[i].scratch);
    if (jobs[i].ok && strcmp(jobs[i].arch->name, "sm_90a") == 0 && jobs[i].regs > 232) failures++;
  }
  free(jobs);
  assert_int_equal(failures, 0);
}

/* ---- dual gemm (fusion's SwiGLU form) -------------------------------------------------------
 * Selection: gemm_tma on sm_90a (its 128 x 128 default: two accumulator sets), the simple
 * kernel elsewhere (no other variant takes a dual key); launch: a third tensor map, of B2, like
 * B's; compiles: the default and a ping-pong 64 x 64 configuration, both B layouts, with bias
 * and silu, no spills. */
static void test_dual(void **state) {
  (void)state;
  const hkc_gpu_arch_t *ar = hk_test_arch("sm_90a");
  for (int tb = 0; tb < 2; tb++) {
    hkc_kernel_key_t key = gemm_key(HK_DTYPE_BF16, HK_ACT_SILU, tb, 1, 0, 8);
    key.dual = 1;
    assert_string_equal(hk_test_variant_name("sm_90a", key), "gemm_tma");
    assert_string_equal(hk_test_variant_name("sm_90", key), "simple");
    assert_string_equal(hk_test_variant_name("sm_80", key), "simple");
    assert_string_equal(hk_test_variant_name("gfx90a", key), "simple");
    char src[16384] = "";
    const hkc_variant_t *v = hkc_variant_for(ar, &key);
    v->defines(ar, &key, src, sizeof src);
    assert_int_equal(hk_test_source_macro(src, "HK_TILE_N"), 128);
    hkc_arg_t args[HKC_MAX_ARGS] = GEMM_ARGS(4096, 14336, 4096);
    args[HKC_GEMM_ARG_B2] = TENSOR(13);
    const uint32_t n = hkc_gpu_launch_args(ar, &key, args, HKC_GEMM_N_ARGS_DUAL, HKC_MAX_ARGS);
    assert_int_equal(n, HKC_GEMM_N_ARGS_DUAL + 3);
    assert_int_equal(args[n - 1].kind, HK_ARG_TMAP);
    assert_int_equal(hk_tmap_tensor((uint64_t)args[n - 1].i), 13);
    assert_int_equal(hk_tmap_box_outer((uint64_t)args[n - 1].i), hk_tmap_box_outer((uint64_t)args[n - 2].i));
    assert_int_equal(hk_tmap_tensor((uint64_t)args[n - 2].i), TENSOR_B);
    /* no room for the three maps: the ABI's arguments alone */
    assert_int_equal(hkc_gpu_launch_args(ar, &key, args, HKC_GEMM_N_ARGS_DUAL, HKC_GEMM_N_ARGS_DUAL + 2),
                     HKC_GEMM_N_ARGS_DUAL);
    /* two accumulator sets: 128 x 256 and split-K are refused */
    hkc_tile_cfg_t t;
    assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_tma", "pp=0,mw=1,bn=256,st=4,sk=1,cm=1", &t), -1);
    assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_tma", "pp=1,mw=1,bn=64,st=8,sk=4,cm=1", &t), -1);
    assert_int_equal(hkc_tune_lookup_cfg(ar, &key, "gemm_tma", "pp=1,mw=1,bn=64,st=8,sk=1,cm=1", &t), 0);
  }
  HK_TEST_NEED_NVRTC();
  hk_test_compile_job_t jobs[4];
  memset(jobs, 0, sizeof jobs);
  size_t n = 0;
  for (int tb = 0; tb < 2; tb++)
    for (int c = 0; c < 2; c++) {
      hkc_kernel_key_t key = gemm_key(HK_DTYPE_BF16, HK_ACT_SILU, tb, 1, 0, 8);
      key.dual = 1;
      jobs[n].arch = ar;
      jobs[n].kernel.key = c ? key_with(ar, "gemm_tma_cfg=1,1,64,8", key) : key;
      hk_test_kernel_name(&jobs[n].kernel);
      n++;
    }
  hk_test_compile_all(jobs, n, hkc_nvrtc_compile, 2, HK_TEST_COMPILE_NO_WARNINGS);
  for (size_t i = 0; i < n; i++) {
    printf("[ info     ] %s: regs %u, scratch %u%s%s\n", jobs[i].kernel.name, jobs[i].regs, jobs[i].scratch,
           jobs[i].ok ? "" : ", ", jobs[i].ok ? "" : jobs[i].error);
    assert_true(jobs[i].ok);
    assert_int_equal(jobs[i].scratch, 0);
    assert_true(jobs[i].regs > 0 && jobs[i].regs <= 232);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_selection),
      cmocka_unit_test(test_launch_covers_odd_shapes),
      cmocka_unit_test(test_tma_launch),
      cmocka_unit_test(test_dual),
      cmocka_unit_test(test_streamk_schedule),
      cmocka_unit_test(test_mma_split),
      cmocka_unit_test(test_nvrtc_variants),
      cmocka_unit_test(test_nvrtc_sm90a_configurations),
      cmocka_unit_test(test_nvrtc_split_configs),
      cmocka_unit_test(test_ln_epilogue),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
