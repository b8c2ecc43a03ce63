/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel options (compiler/codegen/kernel_options.c, tune.c hkc_tune_apply_options):
 *  - the parser: every option, good values in both spellings, bad names and values, each
 *    error naming the option and what was expected; canonical text for provenance
 *  - legality: a forced configuration the variant's tune_parse refuses on a target is an
 *    error (never silently replaced by the defaults) quoting the variant's rules; a forced
 *    configuration of a variant that does not serve the key there changes nothing (sm_90a:
 *    gemm_tma unless gemm_tma=off, then gemm_wgmma_ws unless gemm_ws=off)
 *  - identity: different option sets give different kernel names (the symbol) and sources
 *    (the compile-cache key); the defaults give exactly today's keys
 *  - provenance: `hkc build --kernel-option` records kernel_options= (host target, no GPU
 *    toolchain needed). */
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

static const hkc_gpu_arch_t *arch(const char *name) {
  const hkc_gpu_arch_t *a = hkc_gpu_arch_find(name);
  assert_non_null(a);
  return a;
}

static hkc_kernel_key_t gemm_key(void) {
  return (hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = HK_DTYPE_BF16, .has_bias = 1, .align = 8};
}

static void set_ok(hkc_kernel_options_t *o, const char *arg) {
  char err[1024] = "";
  if (hkc_kernel_options_set_arg(o, arg, err, sizeof err) != 0) fail_msg("%s: %s", arg, err);
}

static void set_bad(const char *arg, const char *expect_in_error) {
  hkc_kernel_options_t o = {0};
  char err[1024] = "";
  assert_int_equal(hkc_kernel_options_set_arg(&o, arg, err, sizeof err), -1);
  if (!strstr(err, expect_in_error)) fail_msg("%s: error '%s' lacks '%s'", arg, err, expect_in_error);
}

static void test_parse(void **state) {
  (void)state;
  hkc_kernel_options_t o = {0};
  char text[1024];
  hkc_kernel_options_format(&o, text, sizeof text);
  assert_string_equal(text, "none");
  assert_true(hkc_kernel_options_is_default(&o));
  set_ok(&o, "simple_kernels=1");
  set_ok(&o, "gemm_tma=off");
  set_ok(&o, "gemm_ws=off");
  set_ok(&o, "attn_wgmma=on");
  set_ok(&o, "attn_tma=off");
  set_ok(&o, "ew_exact_act=true");
  set_ok(&o, "gemm_mma_cfg=128,256,2,4,3");
  set_ok(&o, "gemm_wgmma_cfg=128,4"); /* BN,STAGES: bm 128 filled in */
  set_ok(&o, "gemm_ws_cfg=128,5");    /* persistent defaults to 1 */
  set_ok(&o, "gemm_tma_cfg=1,2,64,8"); /* PINGPONG,MW,BN,STAGES: sk 1 and cm 1 filled in */
  set_ok(&o, "attn_mma_cfg=w=4,kv=64,mb=2");
  set_ok(&o, "attn_wgmma_cfg=2,64,1");
  set_ok(&o, "attn_tma_cfg=2,64,3"); /* WGS,BKV,STAGES: pp 1, ov 1, p 1 filled in */
  set_ok(&o, "rows_cfg=256,16,16,2,0,2");
  set_ok(&o, "ew_cfg=mb=2,t=128,u=8,w=3"); /* named, any order; x filled in */
  assert_int_equal(o.simple_kernels, 1);
  assert_int_equal(o.gemm_tma, HKC_SWITCH_OFF);
  assert_int_equal(o.gemm_ws, HKC_SWITCH_OFF);
  assert_int_equal(o.attn_wgmma, HKC_SWITCH_ON);
  assert_int_equal(o.attn_tma, HKC_SWITCH_OFF);
  assert_int_equal(o.ew_exact_act, 1);
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_MMA_CFG], "bm=128,bn=256,wm=2,wn=4,st=3");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_WGMMA_CFG], "bm=128,bn=128,st=4");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_WS_CFG], "bn=128,st=5,p=1");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_TMA_CFG], "pp=1,mw=2,bn=64,st=8,sk=1,cm=1,ts=0");
  assert_string_equal(o.cfg[HKC_KOPT_ATTN_MMA_CFG], "w=4,kv=64,mb=2");
  assert_string_equal(o.cfg[HKC_KOPT_ATTN_WGMMA_CFG], "wg=2,kv=64,mb=1");
  assert_string_equal(o.cfg[HKC_KOPT_ATTN_TMA_CFG], "wg=2,kv=64,st=3,pp=1,ov=1,p=1");
  assert_string_equal(o.cfg[HKC_KOPT_EW_CFG], "t=128,u=8,mb=2,w=3,x=0");
  hkc_kernel_options_format(&o, text, sizeof text);
  assert_string_equal(text, "simple_kernels=1;gemm_tma=off;gemm_ws=off;attn_wgmma=on;attn_tma=off;ew_exact_act=1;"
                            "gemm_mma_cfg=bm=128,bn=256,wm=2,wn=4,st=3;gemm_wgmma_cfg=bm=128,bn=128,st=4;"
                            "gemm_ws_cfg=bn=128,st=5,p=1;gemm_tma_cfg=pp=1,mw=2,bn=64,st=8,sk=1,cm=1,ts=0;"
                            "attn_mma_cfg=w=4,kv=64,mb=2;attn_wgmma_cfg=wg=2,kv=64,mb=1;"
                            "attn_tma_cfg=wg=2,kv=64,st=3,pp=1,ov=1,p=1;"
                            "rows_cfg=t=256,c=16,tg=16,mb=2,pf=0,g=2;ew_cfg=t=128,u=8,mb=2,w=3,x=0");
  /* gemm_tma_cfg: the optional SPLIT_K, CLUSTER_M and TMA_STORE positions, and the named form */
  set_ok(&o, "gemm_tma_cfg=0,1,128,5,4");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_TMA_CFG], "pp=0,mw=1,bn=128,st=5,sk=4,cm=1,ts=0");
  set_ok(&o, "gemm_tma_cfg=1,1,64,8,1,2");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_TMA_CFG], "pp=1,mw=1,bn=64,st=8,sk=1,cm=2,ts=0");
  set_ok(&o, "gemm_tma_cfg=cm=2,bn=256,st=4,pp=0,mw=1,sk=1");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_TMA_CFG], "pp=0,mw=1,bn=256,st=4,sk=1,cm=2,ts=0");
  set_ok(&o, "gemm_tma_cfg=1,1,128,7,1,1,1");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_TMA_CFG], "pp=1,mw=1,bn=128,st=7,sk=1,cm=1,ts=1");
  /* the optional last parameters (stream-K's skm, gemm_mma's split-K sk): named only when
   * not at their default, so strings without them keep their form */
  set_ok(&o, "gemm_tma_cfg=0,1,128,6,1,1,0,4");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_TMA_CFG], "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0,skm=4");
  set_ok(&o, "gemm_tma_cfg=pp=0,mw=1,bn=128,st=6,sk=1,cm=1,skm=0");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_TMA_CFG], "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0");
  set_ok(&o, "gemm_tma_cfg=skm=8,pp=0,mw=1,bn=128,st=6");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_TMA_CFG], "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0,skm=8");
  set_ok(&o, "gemm_mma_cfg=64,64,2,2,4,8");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_MMA_CFG], "bm=64,bn=64,wm=2,wn=2,st=4,sk=8");
  set_ok(&o, "gemm_mma_cfg=sk=1,bm=64,bn=64,wm=2,wn=2,st=4");
  assert_string_equal(o.cfg[HKC_KOPT_GEMM_MMA_CFG], "bm=64,bn=64,wm=2,wn=2,st=4");
  set_ok(&o, "gemm_tma=on");
  assert_int_equal(o.gemm_tma, HKC_SWITCH_ON);
  /* attn_tma_cfg: the simple pipeline (PINGPONG, OVERLAP given) and the named form */
  set_ok(&o, "attn_tma_cfg=2,128,2,0,0");
  assert_string_equal(o.cfg[HKC_KOPT_ATTN_TMA_CFG], "wg=2,kv=128,st=2,pp=0,ov=0,p=1");
  set_ok(&o, "attn_tma_cfg=p=0,wg=1,kv=64,st=2,pp=0,ov=1");
  assert_string_equal(o.cfg[HKC_KOPT_ATTN_TMA_CFG], "wg=1,kv=64,st=2,pp=0,ov=1,p=0");
  set_ok(&o, "attn_tma=on");
  assert_int_equal(o.attn_tma, HKC_SWITCH_ON);
  /* gemm_split: auto (the default, like off: no split through the workspace in the model's
   * space) is not recorded; on and off are */
  {
    hkc_kernel_options_t g = {0};
    char gtext[64];
    assert_true(hkc_kernel_options_is_default(&g));
    set_ok(&g, "gemm_split=on");
    assert_int_equal(g.gemm_split, HKC_SWITCH_ON);
    hkc_kernel_options_format(&g, gtext, sizeof gtext);
    assert_string_equal(gtext, "gemm_split=on");
    set_ok(&g, "gemm_split=auto");
    assert_true(hkc_kernel_options_is_default(&g));
    set_bad("gemm_split=2", "gemm_split=2: expected auto|on|off");
  }
  /* back to the defaults */
  set_ok(&o, "simple_kernels=0");
  set_ok(&o, "gemm_tma=auto");
  set_ok(&o, "gemm_ws=auto");
  set_ok(&o, "attn_wgmma=auto");
  set_ok(&o, "attn_tma=auto");
  set_ok(&o, "ew_exact_act=off");
  for (int i = 0; i < HKC_KOPT_N_CFG; i++) o.cfg[i][0] = '\0';
  assert_true(hkc_kernel_options_is_default(&o));
  /* every option is described, with its environment variable */
  const char *name, *env, *help;
  size_t n = 0;
  int tma = 0, tma_cfg = 0, attn_tma = 0, attn_tma_cfg = 0, attn_kvs = 0, rope = 0, norm = 0, ln = 0, quant = 0, kv_mma = 0,
      stream = 0, skinny_cfg = 0;
  while (hkc_kernel_options_describe(n, &name, &env, &help)) {
    assert_non_null(strstr(env, "HKC_"));
    if (!strcmp(name, "attn_kvs")) attn_kvs = !strcmp(env, "HKC_ATTN_KVS");
    if (!strcmp(name, "gemm_tma")) tma = !strcmp(env, "HKC_GEMM_TMA");
    if (!strcmp(name, "gemm_tma_cfg")) tma_cfg = !strcmp(env, "HKC_GEMM_TMA_CFG");
    if (!strcmp(name, "attn_tma")) attn_tma = !strcmp(env, "HKC_ATTN_TMA");
    if (!strcmp(name, "attn_tma_cfg")) attn_tma_cfg = !strcmp(env, "HKC_ATTN_TMA_CFG");
    if (!strcmp(name, "gemm_rope")) rope = !strcmp(env, "HKC_GEMM_ROPE");
    if (!strcmp(name, "gemm_norm")) norm = !strcmp(env, "HKC_GEMM_NORM");
    if (!strcmp(name, "gemm_ln")) ln = !strcmp(env, "HKC_GEMM_LN");
    if (!strcmp(name, "gemm_quant")) quant = !strcmp(env, "HKC_GEMM_QUANT");
    if (!strcmp(name, "kv_mma")) kv_mma = !strcmp(env, "HKC_KV_MMA");
    if (!strcmp(name, "gemm_stream")) stream = !strcmp(env, "HKC_GEMM_STREAM");
    if (!strcmp(name, "gemm_skinny_cfg")) skinny_cfg = !strcmp(env, "HKC_GEMM_SKINNY_CFG");
    n++;
  }
  assert_int_equal(n, 35);
  assert_true(tma && tma_cfg && attn_tma && attn_tma_cfg && attn_kvs && rope && norm && ln && quant && kv_mma && stream &&
              skinny_cfg);
  /* gemm_skinny_cfg: named or positional (ks, u, nw, w); mb filled (each launch's M sets it),
   * trailing defaults left out; the variant's rules refuse the rest */
  hkc_kernel_options_t sk = {0};
  set_ok(&sk, "gemm_skinny_cfg=ks=4");
  assert_string_equal(sk.cfg[HKC_KOPT_GEMM_SKINNY_CFG], "mb=8,ks=4");
  set_ok(&sk, "gemm_skinny_cfg=2,4,1,8");
  assert_string_equal(sk.cfg[HKC_KOPT_GEMM_SKINNY_CFG], "mb=8,ks=2,u=4,nw=1,w=8");
  hkc_kernel_options_format(&sk, text, sizeof text);
  assert_string_equal(text, "gemm_skinny_cfg=mb=8,ks=2,u=4,nw=1,w=8");
  set_bad("gemm_skinny_cfg=ks=2,x=1", "unknown parameter 'x' (gemm_skinny has: mb ks u nw w)");
  /* kv_warp_cfg: named or positional (w, p, s); each filled at its default (the canonical string
   * kv_attention_warp names, e.g. "p=32" for w=4, reads back), trailing defaults left out */
  hkc_kernel_options_t kw = {0};
  set_ok(&kw, "kv_warp_cfg=2");
  assert_string_equal(kw.cfg[HKC_KOPT_KV_WARP_CFG], "w=2");
  set_ok(&kw, "kv_warp_cfg=w=8,p=128,s=16");
  assert_string_equal(kw.cfg[HKC_KOPT_KV_WARP_CFG], "w=8,p=128,s=16");
  set_ok(&kw, "kv_warp_cfg=p=32");
  assert_string_equal(kw.cfg[HKC_KOPT_KV_WARP_CFG], "w=4,p=32");
  set_bad("kv_warp_cfg=w=2,q=1", "unknown parameter 'q'");
  hkc_kernel_options_t mma = {0}; /* a switch: off reaches the struct */
  set_ok(&mma, "kv_mma=off");
  assert_int_equal(mma.kv_mma, HKC_SWITCH_OFF);
  set_ok(&mma, "gemm_stream=off");
  assert_int_equal(mma.gemm_stream, HKC_SWITCH_OFF);
  set_ok(&mma, "kv_fold=off");
  assert_int_equal(mma.kv_fold, HKC_SWITCH_OFF);
  /* attn_kvs: 0..16, in the provenance text when set */
  hkc_kernel_options_t kv = {0};
  set_ok(&kv, "attn_kvs=8");
  assert_int_equal(kv.attn_kvs, 8);
  char kv_text[64];
  hkc_kernel_options_format(&kv, kv_text, sizeof kv_text);
  assert_string_equal(kv_text, "attn_kvs=8");
  set_ok(&kv, "attn_kvs=0");
  assert_true(hkc_kernel_options_is_default(&kv));
  /* the AMD GEMM options: the 8-wave switch and both variants' tiles */
  hkc_kernel_options_t m = {0};
  set_ok(&m, "gemm_mfma_pp=on");
  set_ok(&m, "gemm_mfma_cfg=256,128,32");
  set_ok(&m, "gemm_mfma_pp_cfg=bk=32,bm=128,bn=256");
  assert_int_equal(m.gemm_mfma_pp, HKC_SWITCH_ON);
  assert_string_equal(m.cfg[HKC_KOPT_GEMM_MFMA_CFG], "bm=256,bn=128,bk=32");
  assert_string_equal(m.cfg[HKC_KOPT_GEMM_MFMA_PP_CFG], "bm=128,bn=256,bk=32");
  hkc_kernel_options_format(&m, text, sizeof text);
  assert_string_equal(text, "gemm_mfma_pp=on;gemm_mfma_cfg=bm=256,bn=128,bk=32;gemm_mfma_pp_cfg=bm=128,bn=256,bk=32");
  set_bad("gemm_mfma_pp=8", "gemm_mfma_pp=8: expected auto|on|off");
  hkc_kernel_options_t am = {0}; /* the 8-wave attention switch */
  set_ok(&am, "attn_mfma_pp=on");
  assert_int_equal(am.attn_mfma_pp, HKC_SWITCH_ON);
  hkc_kernel_options_format(&am, text, sizeof text);
  assert_string_equal(text, "attn_mfma_pp=on");
  set_bad("attn_mfma_pp=2", "attn_mfma_pp=2: expected auto|on|off");
  set_bad("gemm_mfma_pp_cfg=256,256", "too few values");
  set_bad("gemm_mfma_cfg=bm=128,bn=128,bk=32,w=8", "unknown parameter 'w' (gemm_mfma has: bm bn bk)");
}

static void test_parse_errors(void **state) {
  (void)state;
  set_bad("bogus=1", "unknown kernel option 'bogus'");
  set_bad("simple_kernels", "not NAME=VALUE");
  set_bad("simple_kernels=2", "simple_kernels=2: expected 0|1");
  set_bad("gemm_ws=maybe", "expected auto|on|off");
  set_bad("gemm_tma=maybe", "gemm_tma=maybe: expected auto|on|off");
  set_bad("gemm_tma_cfg=0,1,256", "too few values");
  set_bad("gemm_tma_cfg=0,1,256,4,1,1,0,4,9", "too many values");
  set_bad("gemm_tma_cfg=pp=0,mw=1,bn=256,st=4,sk=1,cm=1,x=2", "unknown parameter 'x' (gemm_tma has: pp mw bn st sk cm ts skm)");
  set_bad("gemm_mma_cfg=64,64,2,2,4,8,1", "too many values");
  set_bad("gemm_tma_cfg=pp=0,mw=1,bn=256", "missing st");
  set_bad("gemm_tma_cfg=0,1,256,-4", "bad value st");
  set_bad("gemm_ws_cfg=256", "too few values");
  set_bad("gemm_ws_cfg=256,3,1,7", "too many values");
  set_bad("gemm_ws_cfg=256,-3", "bad value st");
  set_bad("gemm_ws_cfg=256,x", "bad value st");
  set_bad("gemm_ws_cfg=bn=256,st=3,q=1", "unknown parameter 'q' (gemm_wgmma_ws has: bn st p)");
  set_bad("gemm_ws_cfg=bn=256,bn=128,st=3", "repeated bn");
  set_bad("gemm_mma_cfg=bm=128,bn=128", "missing wm");
  set_bad("rows_cfg=256,8,8,1,0,99999999", "bad value g");
}

/* options (hk_test_options) applied to key on target: hkc_tune_apply_options' result, with its
 * diagnostics in diag. */
static int apply(const char *options, const char *target, hkc_kernel_key_t *key, char *diag, size_t diag_size) {
  hkc_kernel_options_t o = {0};
  hk_test_options(&o, options);
  diag[0] = '\0';
  hkc_diag_capture(diag, diag_size);
  const int r = hkc_tune_apply_options(&o, target, arch(target), key);
  hkc_diag_capture(NULL, 0);
  return r;
}

/* A forced gemm_tma configuration refused on sm_90a: -1 and one error naming the option in
 * canonical form, the kernel, the target and gemm_tma's rules. */
static void tma_refused(const char *options, const char *canonical, hkc_kernel_key_t k) {
  char diag[2048], kname[96], want[256];
  hkc_error_reset();
  hkc_kernel_key_name(&k, kname, sizeof kname);
  if (apply(options, "sm_90a", &k, diag, sizeof diag) != -1) fail_msg("%s accepted for %s", options, kname);
  assert_int_equal(hkc_error_count(), 1);
  snprintf(want, sizeof want, "kernel option gemm_tma_cfg=%s is not legal for kernel %s on sm_90a (gemm_tma: pp 0 or 1;",
           canonical, kname);
  if (!strstr(diag, want) || !strstr(diag, "96 (trans_b only)") || !strstr(diag, "sk > 1: mw bn <= 128") ||
      !strstr(diag, "cm 1 or 2"))
    fail_msg("%s: diagnostic '%s' lacks '%s' or the rules", options, diag, want);
  hkc_error_reset();
}

/* A forced configuration is checked on each target by the variant's tune_parse. */
static void test_legality(void **state) {
  (void)state;
  char diag[2048];
  hkc_kernel_key_t k = gemm_key(), tk = gemm_key();
  tk.trans_b = 1;
  /* gemm_wgmma_ws, reached with gemm_tma=off */
  k = gemm_key();
  assert_int_equal(apply("gemm_tma=off;gemm_ws_cfg=256,12,1", "sm_90a", &k, diag, sizeof diag), -1); /* 12 stages of 48 KiB: over sm_90a's 227 KiB */
  assert_true(hkc_error_count() > 0);
  assert_non_null(strstr(diag, "kernel option gemm_ws_cfg=bn=256,st=12,p=1 is not legal for kernel hk_gemm_bf16_bias_a8 on sm_90a (gemm_wgmma_ws: "));
  hkc_error_reset();
  k = gemm_key();
  assert_int_equal(apply("gemm_tma=off;gemm_ws_cfg=128,4,1", "sm_90a", &k, diag, sizeof diag), 2);
  assert_string_equal(k.variant, "gemm_wgmma_ws");
  assert_string_equal(k.tune, "bn=128,st=4,p=1");
  /* gemm_tma serves sm_90a by default: gemm_ws_cfg alone forces nothing (no error either) */
  k = gemm_key();
  assert_int_equal(apply("gemm_ws_cfg=256,12,1", "sm_90a", &k, diag, sizeof diag), 0);
  assert_string_equal(k.variant, "");
  assert_int_equal(hkc_error_count(), 0);
  /* gemm_tma=off alone: gemm_wgmma_ws with its defaults, named in the key; with gemm_ws=off too:
   * gemm_wgmma; gemm_tma=on / gemm_ws=off alone: the default kernel, an untouched key */
  k = gemm_key();
  assert_int_equal(apply("gemm_tma=off", "sm_90a", &k, diag, sizeof diag), 1);
  assert_string_equal(k.variant, "gemm_wgmma_ws");
  assert_string_equal(k.tune, "");
  k = gemm_key();
  assert_int_equal(apply("gemm_tma=off;gemm_ws=off", "sm_90a", &k, diag, sizeof diag), 1);
  assert_string_equal(k.variant, "gemm_wgmma");
  k = gemm_key();
  assert_int_equal(apply("gemm_tma=on", "sm_90a", &k, diag, sizeof diag), 0);
  assert_int_equal(apply("gemm_ws=off", "sm_90a", &k, diag, sizeof diag), 0);
  assert_string_equal(k.variant, "");
  /* gemm_tma: forced configurations go into the key, canonical */
  static const struct {
    const char *options, *canonical;
    int trans_b;
  } legal[] = {
      {"gemm_tma_cfg=1,1,256,5", "pp=1,mw=1,bn=256,st=5,sk=1,cm=1,ts=0", 0},
      {"gemm_tma_cfg=1,2,128,6", "pp=1,mw=2,bn=128,st=6,sk=1,cm=1,ts=0", 0},
      {"gemm_tma_cfg=1,1,96,10", "pp=1,mw=1,bn=96,st=10,sk=1,cm=1,ts=0", 1}, /* bn 96: trans_b */
      {"gemm_tma_cfg=0,1,192,4", "pp=0,mw=1,bn=192,st=4,sk=1,cm=1,ts=0", 0},
      {"gemm_tma_cfg=1,1,64,8,4", "pp=1,mw=1,bn=64,st=8,sk=4,cm=1,ts=0", 0},
      {"gemm_tma_cfg=0,1,128,5,4", "pp=0,mw=1,bn=128,st=5,sk=4,cm=1,ts=0", 0}, /* mw bn = 128 */
      {"gemm_tma_cfg=0,2,64,5,8", "pp=0,mw=2,bn=64,st=5,sk=8,cm=1,ts=0", 0},
      {"gemm_tma_cfg=0,1,256,4,1,2", "pp=0,mw=1,bn=256,st=4,sk=1,cm=2,ts=0", 0},
      {"gemm_tma_cfg=1,1,64,8,1,2", "pp=1,mw=1,bn=64,st=8,sk=1,cm=2,ts=0", 1},
      {"gemm_tma_cfg=pp=1,mw=1,bn=128,st=7,ts=1,sk=1,cm=1", "pp=1,mw=1,bn=128,st=7,sk=1,cm=1,ts=1", 0},
      {"gemm_tma_cfg=0,1,128,6,1,1,0,4", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0,skm=4", 0}, /* stream-K */
      {"gemm_tma_cfg=1,2,64,8,1,1,0,64", "pp=1,mw=2,bn=64,st=8,sk=1,cm=1,ts=0,skm=64", 1},
      {"gemm_tma_cfg=0,1,128,6,1,1,1,4", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=1,skm=4", 0}, /* with ts */
  };
  for (size_t i = 0; i < sizeof legal / sizeof legal[0]; i++) {
    k = legal[i].trans_b ? tk : gemm_key();
    if (apply(legal[i].options, "sm_90a", &k, diag, sizeof diag) != 2) fail_msg("%s refused: %s", legal[i].options, diag);
    assert_string_equal(k.variant, "gemm_tma");
    assert_string_equal(k.tune, legal[i].canonical);
  }
  /* gemm_tma's default, forced: the untuned key (the same kernel) */
  k = gemm_key();
  assert_int_equal(apply("gemm_tma_cfg=0,1,256,4", "sm_90a", &k, diag, sizeof diag), 2);
  assert_string_equal(k.variant, "");
  assert_string_equal(k.tune, "");
  /* refused, with the rules: bn 96 for [K][N] B; split-K with mw bn > 128 (the reduction's
   * registers); multicast pairs with split-K; the ring over shared memory; out of range */
  tma_refused("gemm_tma_cfg=1,1,96,10", "pp=1,mw=1,bn=96,st=10,sk=1,cm=1,ts=0", gemm_key());
  tma_refused("gemm_tma_cfg=0,1,96,4", "pp=0,mw=1,bn=96,st=4,sk=1,cm=1,ts=0", gemm_key());
  tma_refused("gemm_tma_cfg=0,1,256,4,2", "pp=0,mw=1,bn=256,st=4,sk=2,cm=1,ts=0", gemm_key());
  tma_refused("gemm_tma_cfg=1,1,192,6,4", "pp=1,mw=1,bn=192,st=6,sk=4,cm=1,ts=0", tk);
  tma_refused("gemm_tma_cfg=1,2,128,6,2", "pp=1,mw=2,bn=128,st=6,sk=2,cm=1,ts=0", gemm_key());
  tma_refused("gemm_tma_cfg=1,2,96,6,2", "pp=1,mw=2,bn=96,st=6,sk=2,cm=1,ts=0", tk);
  tma_refused("gemm_tma_cfg=1,1,64,8,4,2", "pp=1,mw=1,bn=64,st=8,sk=4,cm=2,ts=0", gemm_key());
  tma_refused("gemm_tma_cfg=0,1,128,5,2,2", "pp=0,mw=1,bn=128,st=5,sk=2,cm=2,ts=0", tk);
  tma_refused("gemm_tma_cfg=0,1,256,5", "pp=0,mw=1,bn=256,st=5,sk=1,cm=1,ts=0", gemm_key()); /* 5 x 48 KiB */
  tma_refused("gemm_tma_cfg=0,1,256,4,1,3", "pp=0,mw=1,bn=256,st=4,sk=1,cm=3,ts=0", gemm_key());
  tma_refused("gemm_tma_cfg=0,1,64,4,16", "pp=0,mw=1,bn=64,st=4,sk=16,cm=1,ts=0", gemm_key());
  tma_refused("gemm_tma_cfg=0,1,64,17", "pp=0,mw=1,bn=64,st=17,sk=1,cm=1,ts=0", gemm_key());
  tma_refused("gemm_tma_cfg=0,2,256,3", "pp=0,mw=2,bn=256,st=3,sk=1,cm=1,ts=0", gemm_key()); /* 256 accumulators */
  tma_refused("gemm_tma_cfg=2,1,128,4", "pp=2,mw=1,bn=128,st=4,sk=1,cm=1,ts=0", gemm_key());
  /* stream-K: 64 accumulators per thread at most (its reduction's registers), neither split-K
   * nor multicast clusters, 1..64 k tiles per block */
  tma_refused("gemm_tma_cfg=0,1,256,4,1,1,0,4", "pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=0,skm=4", gemm_key());
  tma_refused("gemm_tma_cfg=0,1,128,5,2,1,0,4", "pp=0,mw=1,bn=128,st=5,sk=2,cm=1,ts=0,skm=4", gemm_key());
  tma_refused("gemm_tma_cfg=1,1,64,8,1,2,0,4", "pp=1,mw=1,bn=64,st=8,sk=1,cm=2,ts=0,skm=4", gemm_key());
  tma_refused("gemm_tma_cfg=0,1,128,6,1,1,0,65", "pp=0,mw=1,bn=128,st=6,sk=1,cm=1,ts=0,skm=65", gemm_key());
  /* gemm_mma split-K: 1..8 slices; sk 1 is the string without it */
  hkc_kernel_options_t ms = {0};
  set_ok(&ms, "gemm_mma_cfg=64,64,2,2,4,8");
  k = gemm_key();
  assert_int_equal(hkc_tune_apply_options(&ms, "sm_80", arch("sm_80"), &k), 2);
  assert_string_equal(k.tune, "bm=64,bn=64,wm=2,wn=2,st=4,sk=8");
  k = gemm_key();
  assert_int_equal(apply("gemm_mma_cfg=64,64,2,2,4,9", "sm_90", &k, diag, sizeof diag), -1);
  assert_non_null(strstr(diag, "gemm_mma_cfg=bm=64,bn=64,wm=2,wn=2,st=4,sk=9 is not legal"));
  assert_non_null(strstr(diag, "sk 1..8"));
  hkc_error_reset();
  /* gemm_tma_cfg where gemm_tma does not serve: nothing forced (gemm_tma=off; sm_90) */
  k = gemm_key();
  assert_int_equal(apply("gemm_tma=off;gemm_tma_cfg=0,1,96,4", "sm_90a", &k, diag, sizeof diag), 1);
  assert_string_equal(k.variant, "gemm_wgmma_ws");
  k = gemm_key();
  assert_int_equal(apply("gemm_tma_cfg=0,1,96,4", "sm_90", &k, diag, sizeof diag), 0);
  assert_int_equal(hkc_error_count(), 0);
  /* gemm_mma: HKC_GEMM_MMA_CFG used to skip the register and thread rules; now refused */
  hkc_kernel_options_t m = {0};
  set_ok(&m, "gemm_mma_cfg=256,256,4,8,3"); /* 1024 threads */
  k = gemm_key();
  assert_int_equal(hkc_tune_apply_options(&m, "sm_90", arch("sm_90"), &k), -1);
  hkc_error_reset();
  /* not the variant serving the key there: no effect (sm_90a uses gemm_tma) */
  k = gemm_key();
  assert_int_equal(hkc_tune_apply_options(&m, "sm_90a", arch("sm_90a"), &k), 0);
  /* the host target: options are GPU-only */
  assert_int_equal(hkc_tune_apply_options(&m, "host", NULL, &k), 0);
  /* AMD: gemm_mfma serves CDNA keys; gemm_mfma_pp=on puts the 8-wave kernel in its place
   * with its largest legal tile (gfx90a 256 x 256, gfx908 256 x 128: the key names the
   * variant, the tile stays its default); forced tiles are checked per target */
  k = gemm_key();
  assert_int_equal(apply("gemm_mfma_pp=on", "gfx90a", &k, diag, sizeof diag), 1);
  assert_string_equal(k.variant, "gemm_mfma_pp");
  assert_string_equal(k.tune, "");
  k = gemm_key();
  assert_int_equal(apply("gemm_mfma_pp=off;gemm_mfma_pp_cfg=128,128,32", "gfx90a", &k, diag, sizeof diag), 0);
  assert_string_equal(k.variant, ""); /* off, and gemm_mfma serves: nothing forced */
  k = gemm_key();
  assert_int_equal(apply("gemm_mfma_pp=on;gemm_mfma_pp_cfg=128,256,32", "gfx908", &k, diag, sizeof diag), 2);
  assert_string_equal(k.variant, "gemm_mfma_pp");
  assert_string_equal(k.tune, "bm=128,bn=256,bk=32");
  k = gemm_key();
  assert_int_equal(apply("gemm_mfma_pp=on;gemm_mfma_pp_cfg=256,256,32", "gfx908", &k, diag, sizeof diag), -1);
  assert_non_null(strstr(diag, "kernel option gemm_mfma_pp_cfg=bm=256,bn=256,bk=32 is not legal for kernel "
                               "hk_gemm_bf16_bias_a8 on gfx908 (gemm_mfma_pp: bm 64, 128 or 256;"));
  hkc_error_reset();
  k = gemm_key();
  assert_int_equal(apply("gemm_mfma_cfg=256,128,32", "gfx90a", &k, diag, sizeof diag), 2);
  assert_string_equal(k.variant, "gemm_mfma");
  assert_string_equal(k.tune, "bm=256,bn=128,bk=32");
  k = gemm_key();
  assert_int_equal(apply("gemm_mfma_cfg=256,256,32", "gfx90a", &k, diag, sizeof diag), -1); /* 80 KiB of LDS */
  assert_non_null(strstr(diag, "(gemm_mfma: bm, bn 64, 128 or 256;"));
  hkc_error_reset();
  k = gemm_key();
  assert_int_equal(apply("gemm_mfma_pp=on", "gfx1030", &k, diag, sizeof diag), 0); /* no matrix cores */
  assert_string_equal(k.variant, "");
  /* attn_mfma_pp=on: the 8-wave attention where it serves (not gfx908 at head_dim 128) */
  hkc_kernel_key_t pk = {.op = HK_OP_ATTENTION, .dtype = HK_DTYPE_F16, .align = 8, .head_dim = 128};
  assert_int_equal(apply("attn_mfma_pp=on", "gfx90a", &pk, diag, sizeof diag), 1);
  assert_string_equal(pk.variant, "attention_mfma_pp");
  pk = (hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = HK_DTYPE_F16, .align = 8, .head_dim = 128};
  assert_int_equal(apply("attn_mfma_pp=on", "gfx908", &pk, diag, sizeof diag), 0);
  assert_string_equal(pk.variant, "");
  pk = (hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = HK_DTYPE_F16, .align = 8, .head_dim = 64};
  assert_int_equal(apply("attn_mfma_pp=on", "gfx1030", &pk, diag, sizeof diag), 0); /* RDNA: simple kernel */
  assert_string_equal(pk.variant, "");
  /* attention: shared memory depends on the key (head_dim) */
  hkc_kernel_options_t a = {0};
  set_ok(&a, "attn_mma_cfg=8,128,1"); /* (128 + 512) x 128 x 2 = 160 KiB at dh 128: fits sm_90's 227 */
  hkc_kernel_key_t ak = {.op = HK_OP_ATTENTION, .dtype = HK_DTYPE_BF16, .align = 8, .head_dim = 128};
  assert_int_equal(hkc_tune_apply_options(&a, "sm_90", arch("sm_90"), &ak), 2);
  assert_string_equal(ak.tune, "w=8,kv=128,mb=1");
  set_ok(&a, "attn_mma_cfg=6,64,1"); /* parses; 6 warps is not a tile the template has */
  ak = (hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = HK_DTYPE_BF16, .align = 8, .head_dim = 128};
  assert_int_equal(hkc_tune_apply_options(&a, "sm_90", arch("sm_90"), &ak), -1);
  hkc_error_reset();
}

/* Names and sources (hence cache keys) of one GEMM on sm_90a under several option sets: the
 * sets of one group give the same kernel (name and source), sets of different groups
 * different ones. */
static void test_identity(void **state) {
  (void)state;
  static const struct {
    const char *options;
    int group;
  } sets[] = {
      {"", 0},
      {"gemm_tma=on", 0},                 /* gemm_tma is the default */
      {"gemm_ws=off", 0},                 /* gemm_ws=off alone: gemm_tma still serves */
      {"gemm_tma_cfg=0,1,256,4", 0},      /* gemm_tma's default, forced: the same kernel */
      {"gemm_tma_cfg=0,1,256,4,1,1", 0},
      {"gemm_tma=off", 1},                /* gemm_wgmma_ws */
      {"gemm_tma=off;gemm_ws=off", 2},    /* gemm_wgmma */
      {"gemm_tma=off;gemm_ws_cfg=128,5,0", 3},
      {"gemm_tma_cfg=1,1,64,8", 4},
      {"gemm_tma_cfg=1,1,64,8,4", 5},
      {"gemm_tma_cfg=1,1,64,8,1,2", 6},
      {"gemm_tma_cfg=0,1,256,4,1,2", 7},
      {"gemm_tma_cfg=0,1,192,4", 8},
      {"simple_kernels=1", 9},
  };
  enum { N = sizeof sets / sizeof sets[0] };
  char names[N][96], keys[N][33];
  const hkc_gpu_arch_t *a = arch("sm_90a");
  for (size_t i = 0; i < N; i++) {
    hkc_kernel_options_t o = {0};
    hk_test_options(&o, sets[i].options);
    hkc_kernel_out_t k;
    memset(&k, 0, sizeof k);
    k.key = gemm_key();
    assert_true(hkc_tune_apply_options(&o, "sm_90a", a, &k.key) >= 0);
    hkc_kernel_key_name(&k.key, k.name, sizeof k.name);
    snprintf(names[i], sizeof names[i], "%s", k.name);
    char *src = hkc_codegen_gpu(a, &k);
    assert_non_null(src);
    hkc_cache_key(src, "scheme", "sm_90a", "nvrtc x", keys[i]);
    free(src);
  }
  assert_string_equal(names[0], "hk_gemm_bf16_bias_a8"); /* the defaults: today's name */
  for (size_t i = 0; i < N; i++)
    for (size_t j = i + 1; j < N; j++) {
      const int same_name = !strcmp(names[i], names[j]), same_key = !strcmp(keys[i], keys[j]);
      if (sets[i].group == sets[j].group && (!same_name || !same_key))
        fail_msg("options '%s' and '%s' give different kernels (%s, %s)", sets[i].options, sets[j].options, names[i],
                 names[j]);
      if (sets[i].group != sets[j].group && (same_name || same_key))
        fail_msg("options '%s' and '%s' share a kernel name or cache key (%s)", sets[i].options, sets[j].options,
                 names[i]);
    }
}

/* `hkc build --kernel-option` records the options; an illegal value writes nothing. */
static void test_provenance(void **state) {
  (void)state;
  const char *bin = getenv("HKC_BIN");
  if (!bin) skip();
  char *dir = hk_test_tmpdir();
  char cmd[4096], out[16384];
  snprintf(cmd, sizeof cmd, "%s build %s --target host -q --kernel-option gemm_ws=off --kernel-option ew_cfg=128,8,2,3 "
           "--kernel-option gemm_tma_cfg=1,1,64,8,4 --kernel-option gemm_tma=off "
           "-o %s/a.hkpack && %s inspect %s/a.hkpack", bin, hk_test_source_path("specs/bert_layer.yaml"), dir, bin, dir);
  assert_int_equal(hk_test_run(cmd, out, sizeof out), 0);
  if (!strstr(out, "kernel_options=gemm_tma=off;gemm_ws=off;gemm_tma_cfg=pp=1,mw=1,bn=64,st=8,sk=4,cm=1,ts=0;"
                  "ew_cfg=t=128,u=8,mb=2,w=3,x=0\n"))
    fail_msg("%s", out);
  snprintf(cmd, sizeof cmd, "%s build %s --target host -q -o %s/b.hkpack && %s inspect %s/b.hkpack", bin,
           hk_test_source_path("specs/bert_layer.yaml"), dir, bin, dir);
  assert_int_equal(hk_test_run(cmd, out, sizeof out), 0);
  if (!strstr(out, "kernel_options=none\n")) fail_msg("%s", out);
  snprintf(cmd, sizeof cmd, "%s build %s --target host -q --kernel-option gemm_ws=sometimes -o %s/c.hkpack; test ! -e %s/c.hkpack",
           bin, hk_test_source_path("specs/bert_layer.yaml"), dir, dir);
  assert_int_equal(hk_test_run(cmd, out, sizeof out), 0);
  assert_non_null(strstr(out, "gemm_ws=sometimes: expected auto|on|off"));
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(hk_test_run(cmd, out, sizeof out), 0);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test(test_parse_errors),
      cmocka_unit_test(test_legality),
      cmocka_unit_test(test_identity),
      cmocka_unit_test(test_provenance),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
