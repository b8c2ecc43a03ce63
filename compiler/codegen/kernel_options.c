/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel options (codegen.h): the table of options, their parsing into hkc_kernel_options_t,
 * the canonical text recorded in provenance, and the configuration they force on a variant
 * (checked by that variant's tune_parse, the tuner's own legality rules). */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"
#include "util/util.h"

typedef enum { KOPT_BOOL, KOPT_SWITCH, KOPT_CFG, KOPT_INT } kopt_kind_t;

typedef struct kopt {
  const char *name;
  const char *env;          /* the environment variable the CLI maps onto it */
  kopt_kind_t kind;
  int cfg;                  /* KOPT_CFG: index into hkc_kernel_options_t.cfg */
  const char *variant;      /* KOPT_CFG: whose tune_parse checks it */
  const char *positional;   /* KOPT_CFG: the environment variable's value order */
  int n_required;           /* KOPT_CFG: positional values that must be given */
  const char *fill;         /* KOPT_CFG: values the positional form leaves out ("bm=128") */
  const char *help;
} kopt_t;

/* Table order is the order of the provenance text. */
static const kopt_t k_opts[] = {
    {"simple_kernels", "HKC_SIMPLE_KERNELS", KOPT_BOOL, 0, NULL, NULL, 0, NULL,
     "0|1: every GPU kernel from its simple template (A/B checks)"},
    {"gemm_tma", "HKC_GEMM_TMA", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: gemm_tma on sm_90a (on: no other GEMM variant where it applies, e.g. in hkc tune's space; "
     "off: gemm_wgmma_ws, or gemm_wgmma with gemm_ws=off)"},
    {"gemm_ws", "HKC_GEMM_WS", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: gemm_wgmma_ws on sm_90a (off: gemm_wgmma)"},
    {"attn_wgmma", "HKC_ATTN_WGMMA", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: attention_wgmma on sm_90a (auto: head_dim 128; on: 64 too)"},
    {"attn_tma", "HKC_ATTN_TMA", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: attention_tma on sm_90a (auto: the default where it applies; on: also alone in hkc tune's "
     "space; off: attention_wgmma at head_dim 128, attention_mma at 64)"},
    {"gemm_mfma_pp", "HKC_GEMM_MFMA_PP", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: the 8-wave ping-pong gemm_mfma_pp on AMD CDNA (auto: when tuning chooses it; on: instead "
     "of gemm_mfma)"},
    {"attn_mfma_pp", "HKC_ATTN_MFMA_PP", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: the 8-wave ping-pong attention_mfma_pp on AMD CDNA (auto, off: attention_mfma, as nothing "
     "is measured; on: instead of attention_mfma where it serves the key)"},
    {"gemm_split", "HKC_GEMM_SPLIT", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: split-K through the launch workspace (gemm_mma sk > 1, sm_80/sm_90; auto, on: in the model's "
     "and hkc tune's space) and stream-K (gemm_tma skm > 0, sm_90a; on only: measured slower than unsplit); off: "
     "neither (a forced configuration or a tuning database entry applies either way)"},
    {"gemm_rope", "HKC_GEMM_ROPE", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: rope in a GEMM's epilogue where fusion finds gemm -> rope and every target has such a kernel "
     "(gemm_tma on sm_90a, the host); off: every rope a kernel of its own"},
    {"gemm_norm", "HKC_GEMM_NORM", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: an rmsnorm folded into the GEMM that reads it (A scaled by gamma as its tiles arrive, rows "
     "by their rsqrt(mean square) in the epilogue) where every target has such a kernel (gemm_tma on sm_90a, "
     "the host): auto where the fusion planner's clock says it pays (small GEMMs: every column tile transforms "
     "A again), on wherever a kernel has it; off: every rmsnorm a kernel of its own"},
    {"gemm_ln", "HKC_GEMM_LN", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: a layernorm or rmsnorm in the epilogue of the GEMM whose output it normalises, a cluster of blocks "
     "sharing each row's statistics through distributed shared memory (gemm_tma on sm_90a, the host); auto: "
     "where the clock says it pays, on: wherever every target has such a kernel, off: never"},
    {"gemm_skinny", "HKC_GEMM_SKINNY", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: gemm_skinny on sm_90a (gemm_skinny_amd on AMD CDNA), GEMMs of a few rows of A that stream "
     "B at the memory's bandwidth (decode steps): auto: for the launches of one row it serves (a 16-bit B; an "
     "8-bit B read by the gemm itself: M <= 8); on: M <= 8; off: the tensor-core kernels there too"},
    {"gemm_stream", "HKC_GEMM_STREAM", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: on: gemm_stream on sm_90a in gemm_skinny's place for a 16-bit B (the launches gemm_skinny "
     "takes: B streamed into shared memory by the bulk copy engine, multiplied on the tensor cores); auto, off: "
     "gemm_skinny (the H100 measured gemm_stream slower on the whole decode step)"},
    {"gemm_quant", "HKC_GEMM_QUANT", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: a gemm whose B is an 8-bit param reads the 8-bit bytes and their scales itself, "
     "dequantizing as it loads, in the launches where a kernel of every target does (the host: every M; "
     "gemm_skinny on sm_90a: M <= 8, decode steps), instead of after a dequant launch; auto: builds "
     "for the host alone (opt-in on GPUs until it has run on one); off: never"},
    {"gemm_fp8", "HKC_GEMM_FP8", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: the gemms of fp8_e4m3 weights (a scale per output channel or tensor) multiply in FP8, "
     "their A quantized per row to fp8 (absmax / 448), at every batch size; on: where every target has such "
     "a kernel (the host; an error naming the target otherwise); auto, off: weight-only (A stays in the spec's "
     "dtype)"},
    {"kv_warp", "HKC_KV_WARP", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: kv_attention_warp on NVIDIA, kv_attention_wave on AMD CDNA (f16/bf16, head_dim 64/128: a "
     "block per row, kv head and piece of the keys, split over the keys for decode steps) where it serves the "
     "key; off: the portable kv_attention"},
    {"kv_mma", "HKC_KV_MMA", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: kv_attention_mma on NVIDIA sm_80+ for the kv_attention launches of 64 or more token rows "
     "(prefill: tensor cores, a block per 16 to 64 rows sharing each cached key) where it serves the key; "
     "off: the kernel the other launches get"},
    {"kv_fold", "HKC_KV_FOLD", KOPT_SWITCH, 0, NULL, NULL, 0, NULL,
     "auto|on|off: a kv_attention does the kv_append before it (and its rope) in the launches of one token "
     "row (a batch-1 decode step: one launch a layer fewer), where every target has such a kernel (the host; "
     "kv_attention_warp on NVIDIA sm_80+, the portable kernel elsewhere); auto: builds for the host alone (opt-in on GPUs until its form "
     "of now has run faster on one); off: the two launches apart"},
    {"ew_exact_act", "HKC_EW_EXACT_ACT", KOPT_BOOL, 0, NULL, NULL, 0, NULL,
     "0|1: 16-bit gelu/silu/ewchain through erff/expf"},
    {"attn_kvs", "HKC_ATTN_KVS", KOPT_INT, 0, NULL, NULL, 0, NULL,
     "0..16: split-KV attention (flash-decoding): attention_mma with N KV pieces per query tile wherever it "
     "serves the key, on sm_90a instead of attention_tma (1: unsplit; its tile from attn_mma_cfg, else the "
     "default; 0: the model decides)"},
    {"gemm_mma_cfg", "HKC_GEMM_MMA_CFG", KOPT_CFG, HKC_KOPT_GEMM_MMA_CFG, "gemm_mma", "bm,bn,wm,wn,st,sk", 5, "sk=1",
     "gemm_mma tile: bm=,bn=,wm=,wn=,st=[,sk=] or BM,BN,WARPS_M,WARPS_N,STAGES[,SPLIT_K]"},
    {"gemm_wgmma_cfg", "HKC_GEMM_WGMMA_CFG", KOPT_CFG, HKC_KOPT_GEMM_WGMMA_CFG, "gemm_wgmma", "bn,st", 2, "bm=128",
     "gemm_wgmma tile: bm=,bn=,st= or BN,STAGES (bm 128)"},
    {"gemm_ws_cfg", "HKC_GEMM_WS_CFG", KOPT_CFG, HKC_KOPT_GEMM_WS_CFG, "gemm_wgmma_ws", "bn,st,p", 2, "p=1",
     "gemm_wgmma_ws tile: bn=,st=,p= or BN,STAGES[,PERSISTENT]"},
    {"gemm_tma_cfg", "HKC_GEMM_TMA_CFG", KOPT_CFG, HKC_KOPT_GEMM_TMA_CFG, "gemm_tma", "pp,mw,bn,st,sk,cm,ts,skm", 4,
     "sk=1,cm=1,ts=0,skm=0",
     "gemm_tma tile: pp=,mw=,bn=,st=,sk=,cm=,ts=[,skm=] or "
     "PINGPONG,MW,BN,STAGES[,SPLIT_K[,CLUSTER_M[,TMA_STORE[,STREAM_K]]]]"},
    {"attn_mma_cfg", "HKC_ATTN_TUNE", KOPT_CFG, HKC_KOPT_ATTN_MMA_CFG, "attention_mma", "w,kv,mb,kvs,gp", 3,
     "kvs=1,gp=0",
     "attention_mma tile: w=,kv=,mb=[,kvs=][,gp=] or WARPS,BKV,MIN_BLOCKS[,KV_SPLITS[,GQA_PACK]]"},
    {"attn_wgmma_cfg", "HKC_ATTN_WGMMA_CFG", KOPT_CFG, HKC_KOPT_ATTN_WGMMA_CFG, "attention_wgmma", "wg,kv,mb", 3, "",
     "attention_wgmma tile: wg=,kv=,mb= or WGS,BKV,MIN_BLOCKS"},
    {"attn_tma_cfg", "HKC_ATTN_TMA_CFG", KOPT_CFG, HKC_KOPT_ATTN_TMA_CFG, "attention_tma", "wg,kv,st,pp,ov,p", 3,
     "pp=1,ov=1,p=1",
     "attention_tma tile: wg=,kv=,st=,pp=,ov=,p= or WGS,BKV,STAGES[,PINGPONG[,OVERLAP[,PERSISTENT]]] (pp=0,ov=0: the "
     "simple pipeline)"},
    {"rows_cfg", "HKC_ROWS_CFG", KOPT_CFG, HKC_KOPT_ROWS_CFG, "rows_vec16", "t,c,tg,mb,pf,g", 6, "",
     "rows_vec16: t=,c=,tg=,mb=,pf=,g= or THREADS,CACHE,TARGET,MIN_BLOCKS,PREFETCH,GRID_PER_CU"},
    {"rows_cfg_f32", "HKC_ROWS_CFG_F32", KOPT_CFG, HKC_KOPT_ROWS_CFG_F32, "rows_vec16", "t,c,tg,mb,pf,g", 6, "",
     "rows_vec16, f32 keys only (wins over rows_cfg)"},
    {"rows_cfg_16", "HKC_ROWS_CFG_16", KOPT_CFG, HKC_KOPT_ROWS_CFG_16, "rows_vec16", "t,c,tg,mb,pf,g", 6, "",
     "rows_vec16, f16/bf16 keys only (wins over rows_cfg)"},
    {"gemm_mfma_cfg", "HKC_GEMM_MFMA_CFG", KOPT_CFG, HKC_KOPT_GEMM_MFMA_CFG, "gemm_mfma", "bm,bn,bk", 3, "",
     "gemm_mfma tile: bm=,bn=,bk= or BM,BN,BK"},
    {"gemm_mfma_pp_cfg", "HKC_GEMM_MFMA_PP_CFG", KOPT_CFG, HKC_KOPT_GEMM_MFMA_PP_CFG, "gemm_mfma_pp", "bm,bn,bk", 3, "",
     "gemm_mfma_pp tile: bm=,bn=,bk= or BM,BN,BK"},
    {"ew_cfg", "HKC_EW_CFG", KOPT_CFG, HKC_KOPT_EW_CFG, "elementwise_vec16", "t,u,mb,w", 4, "x=0",
     "elementwise_vec16: t=,u=,mb=,w=[,x=] or THREADS,UNROLL,MIN_BLOCKS,WAVES"},
    {"gemm_skinny_cfg", "HKC_GEMM_SKINNY_CFG", KOPT_CFG, HKC_KOPT_GEMM_SKINNY_CFG, "gemm_skinny", "ks,u,nw,w", 1,
     "mb=8,ks=1,u=0,nw=2,w=4",
     "gemm_skinny: ks=,u=,nw=,w= or KSLICES[,U[,COLUMNS[,WARPS]]] -- warps sharing a unit's K, loads per B row in "
     "flight (0: the default), columns per unit, warps per block; every launch gemm_skinny takes (mb follows each "
     "launch's rows)"},
    {"kv_warp_cfg", "HKC_KV_WARP_CFG", KOPT_CFG, HKC_KOPT_KV_WARP_CFG, "kv_attention_warp", "w,p,s", 1, "w=4,p=64,s=32",
     "kv_attention_warp (decode attention over the KV cache): w=,p=,s= or WARPS[,PIECE[,SPLIT]] -- warps per "
     "block, keys per piece at least, pieces per tile at most"},
};
#define N_OPTS (sizeof k_opts / sizeof k_opts[0])

/* attn_kvs's largest value (attention_mma's kvs: variant_attention_nv.c ATTN_MAX_KVS), and the
 * tile it splits without attn_mma_cfg: the model's split tile (k_attn_split_tile there; 64 query
 * rows for decode steps, legal with kvs > 1 on every arch and head size). */
#define KOPT_MAX_KVS 16
#define KOPT_KVS_TILE "w=4,kv=64,mb=2"

/* Longest list of parameters a configuration has (rows_vec16: 6). */
#define KOPT_MAX_PARAMS 8

int hkc_kernel_options_describe(size_t i, const char **out_name, const char **out_env, const char **out_help) {
  if (i >= N_OPTS) {
    *out_name = *out_env = *out_help = NULL;
    return 0;
  }
  *out_name = k_opts[i].name;
  *out_env = k_opts[i].env;
  *out_help = k_opts[i].help;
  return 1;
}

/* The field of switch option `name`. */
static hkc_switch_t *switch_field(hkc_kernel_options_t *o, const char *name) {
  if (strcmp(name, "gemm_tma") == 0) return &o->gemm_tma;
  if (strcmp(name, "gemm_ws") == 0) return &o->gemm_ws;
  if (strcmp(name, "attn_tma") == 0) return &o->attn_tma;
  if (strcmp(name, "gemm_mfma_pp") == 0) return &o->gemm_mfma_pp;
  if (strcmp(name, "attn_mfma_pp") == 0) return &o->attn_mfma_pp;
  if (strcmp(name, "gemm_split") == 0) return &o->gemm_split;
  if (strcmp(name, "gemm_rope") == 0) return &o->gemm_rope;
  if (strcmp(name, "gemm_norm") == 0) return &o->gemm_norm;
  if (strcmp(name, "gemm_ln") == 0) return &o->gemm_ln;
  if (strcmp(name, "gemm_skinny") == 0) return &o->gemm_skinny;
  if (strcmp(name, "gemm_stream") == 0) return &o->gemm_stream;
  if (strcmp(name, "gemm_quant") == 0) return &o->gemm_quant;
  if (strcmp(name, "gemm_fp8") == 0) return &o->gemm_fp8;
  if (strcmp(name, "kv_warp") == 0) return &o->kv_warp;
  if (strcmp(name, "kv_mma") == 0) return &o->kv_mma;
  if (strcmp(name, "kv_fold") == 0) return &o->kv_fold;
  return &o->attn_wgmma;
}

/* The value of switch option `name`. */
static hkc_switch_t switch_value(const hkc_kernel_options_t *o, const char *name) {
  if (strcmp(name, "gemm_tma") == 0) return o->gemm_tma;
  if (strcmp(name, "gemm_ws") == 0) return o->gemm_ws;
  if (strcmp(name, "attn_tma") == 0) return o->attn_tma;
  if (strcmp(name, "gemm_mfma_pp") == 0) return o->gemm_mfma_pp;
  if (strcmp(name, "attn_mfma_pp") == 0) return o->attn_mfma_pp;
  if (strcmp(name, "gemm_split") == 0) return o->gemm_split;
  if (strcmp(name, "gemm_rope") == 0) return o->gemm_rope;
  if (strcmp(name, "gemm_norm") == 0) return o->gemm_norm;
  if (strcmp(name, "gemm_ln") == 0) return o->gemm_ln;
  if (strcmp(name, "gemm_skinny") == 0) return o->gemm_skinny;
  if (strcmp(name, "gemm_stream") == 0) return o->gemm_stream;
  if (strcmp(name, "gemm_quant") == 0) return o->gemm_quant;
  if (strcmp(name, "gemm_fp8") == 0) return o->gemm_fp8;
  if (strcmp(name, "kv_warp") == 0) return o->kv_warp;
  if (strcmp(name, "kv_mma") == 0) return o->kv_mma;
  if (strcmp(name, "kv_fold") == 0) return o->kv_fold;
  return o->attn_wgmma;
}

/* A decimal integer in [0, 2^20] (the range hkc_tune_params_parse accepts). */
static int parse_uint(const char *s, size_t len, int *out) {
  long v = 0;
  if (len == 0) return -1;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
    if (v > (1 << 20)) return -1;
  }
  *out = (int)v;
  return 0;
}

/* The value option k's fill gives parameter j of v, or -1 when it gives none. */
static int fill_value(const kopt_t *k, const hkc_variant_t *v, int j) {
  const size_t len = strlen(v->params[j]);
  for (const char *p = k->fill; *p;) {
    int value;
    const size_t item = strcspn(p, ",");
    if (item > len + 1 && strncmp(p, v->params[j], len) == 0 && p[len] == '=' &&
        parse_uint(p + len + 1, item - len - 1, &value) == 0)
      return value;
    p += item + (p[item] == ',');
  }
  return -1;
}

/* value ("bn=128,st=5" or "128,5") -> the variant's canonical string in out. */
static int parse_cfg(const kopt_t *k, const char *value, char *out, size_t size, char *err, size_t err_size) {
  const hkc_variant_t *v = hkc_variant_named(k->variant);
  if (!v || !v->params || v->n_params > KOPT_MAX_PARAMS) {
    snprintf(err, err_size, "%s: variant %s has no parameters", k->name, k->variant);
    return -1;
  }
  int vals[KOPT_MAX_PARAMS], have[KOPT_MAX_PARAMS] = {0};
  const int named = strchr(value, '=') != NULL;
  int n_values = 0;
  for (const char *p = value;; n_values++) {
    size_t len = strcspn(p, ",");
    const char *eq = named ? memchr(p, '=', len) : NULL;
    const char *name = named ? p : NULL;
    size_t name_len = eq ? (size_t)(eq - p) : 0;
    if (!named) { /* positional: the environment variable's order */
      const char *q = k->positional;
      for (int j = 0; j < n_values && *q; j++) q += strcspn(q, ",") + (q[strcspn(q, ",")] == ',');
      if (!*q) {
        snprintf(err, err_size, "%s=%s: too many values (expected %s)", k->name, value, k->help);
        return -1;
      }
      name = q;
      name_len = strcspn(q, ",");
    } else if (!eq) {
      snprintf(err, err_size, "%s=%s: '%.*s' is not NAME=VALUE (expected %s)", k->name, value, (int)len, p, k->help);
      return -1;
    }
    int idx = -1;
    for (int j = 0; j < v->n_params; j++)
      if (strlen(v->params[j]) == name_len && strncmp(v->params[j], name, name_len) == 0) idx = j;
    if (idx < 0) {
      snprintf(err, err_size, "%s=%s: unknown parameter '%.*s' (%s has:", k->name, value, (int)name_len, name, v->name);
      for (int j = 0; j < v->n_params; j++) {
        size_t l = strlen(err);
        snprintf(err + l, err_size > l ? err_size - l : 0, " %s", v->params[j]);
      }
      size_t l = strlen(err);
      snprintf(err + l, err_size > l ? err_size - l : 0, ")");
      return -1;
    }
    const char *num = named ? eq + 1 : p;
    const size_t num_len = named ? len - name_len - 1 : len;
    if (have[idx] || parse_uint(num, num_len, &vals[idx]) != 0) {
      snprintf(err, err_size, "%s=%s: %s %.*s (expected %s, each value an integer 0..1048576 given once)", k->name,
               value, have[idx] ? "repeated" : "bad value", (int)name_len, name, k->help);
      return -1;
    }
    have[idx] = 1;
    p += len;
    if (!*p) {
      n_values++;
      break;
    }
    p++;
  }
  if (!named && n_values < k->n_required) {
    snprintf(err, err_size, "%s=%s: too few values (expected %s)", k->name, value, k->help);
    return -1;
  }
  /* what the positional form leaves out */
  for (const char *p = k->fill; *p;) {
    size_t len = strcspn(p, ",");
    const char *eq = memchr(p, '=', len);
    int idx = -1;
    for (int j = 0; eq && j < v->n_params; j++)
      if (strlen(v->params[j]) == (size_t)(eq - p) && strncmp(v->params[j], p, (size_t)(eq - p)) == 0) idx = j;
    if (idx >= 0 && !have[idx] && parse_uint(eq + 1, len - (size_t)(eq - p) - 1, &vals[idx]) == 0) have[idx] = 1;
    p += len;
    if (*p) p++;
  }
  size_t at = 0;
  /* the variant's optional parameters (variant.h) at their default (the fill) are left out */
  const int required = v->n_required_params ? v->n_required_params : v->n_params;
  int n_named = v->n_params;
  while (n_named > required && have[n_named - 1] && vals[n_named - 1] == fill_value(k, v, n_named - 1)) n_named--;
  for (int j = 0; j < v->n_params; j++) {
    if (!have[j]) {
      snprintf(err, err_size, "%s=%s: missing %s (expected %s)", k->name, value, v->params[j], k->help);
      return -1;
    }
    if (j >= n_named) continue;
    int n = snprintf(out + at, size > at ? size - at : 0, "%s%s=%d", j ? "," : "", v->params[j], vals[j]);
    at += n > 0 ? (size_t)n : 0;
  }
  if (at >= size) {
    snprintf(err, err_size, "%s=%s: too long", k->name, value);
    return -1;
  }
  assert(hkc_tune_params_parse(out, v->params, n_named, vals) == 0);
  return 0;
}

int hkc_kernel_options_set(hkc_kernel_options_t *o, const char *name, const char *value, char *err, size_t err_size) {
  const kopt_t *k = NULL;
  for (size_t i = 0; i < N_OPTS && !k; i++)
    if (strcmp(k_opts[i].name, name) == 0) k = &k_opts[i];
  if (!k) {
    snprintf(err, err_size, "unknown kernel option '%s' (known:", name);
    for (size_t i = 0; i < N_OPTS; i++) {
      size_t l = strlen(err);
      snprintf(err + l, err_size > l ? err_size - l : 0, " %s", k_opts[i].name);
    }
    size_t l = strlen(err);
    snprintf(err + l, err_size > l ? err_size - l : 0, ")");
    return -1;
  }
  const int on = strcmp(value, "1") == 0 || strcmp(value, "on") == 0 || strcmp(value, "true") == 0;
  const int off = strcmp(value, "0") == 0 || strcmp(value, "off") == 0 || strcmp(value, "false") == 0;
  switch (k->kind) {
  case KOPT_BOOL:
    if (!on && !off) break;
    if (strcmp(k->name, "simple_kernels") == 0) o->simple_kernels = on;
    else o->ew_exact_act = on;
    return 0;
  case KOPT_SWITCH: {
    const int autov = strcmp(value, "auto") == 0;
    if (!on && !off && !autov) break;
    hkc_switch_t *s = switch_field(o, k->name);
    *s = on ? HKC_SWITCH_ON : off ? HKC_SWITCH_OFF : HKC_SWITCH_AUTO;
    return 0;
  }
  case KOPT_INT: { /* attn_kvs */
    int n;
    if (parse_uint(value, strlen(value), &n) != 0 || n > KOPT_MAX_KVS) break;
    o->attn_kvs = n;
    return 0;
  }
  case KOPT_CFG:
    if (!value[0]) { /* empty: not forced */
      o->cfg[k->cfg][0] = '\0';
      return 0;
    }
    return parse_cfg(k, value, o->cfg[k->cfg], sizeof o->cfg[k->cfg], err, err_size);
  }
  snprintf(err, err_size, "%s=%s: expected %s", name, value, k->help);
  return -1;
}

int hkc_kernel_options_set_arg(hkc_kernel_options_t *o, const char *arg, char *err, size_t err_size) {
  const char *eq = strchr(arg, '=');
  char name[64];
  if (!eq || (size_t)(eq - arg) >= sizeof name) {
    snprintf(err, err_size, "'%s' is not NAME=VALUE", arg);
    return -1;
  }
  snprintf(name, sizeof name, "%.*s", (int)(eq - arg), arg);
  return hkc_kernel_options_set(o, name, eq + 1, err, err_size);
}

void hkc_kernel_options_format(const hkc_kernel_options_t *o, char *out, size_t size) {
  static const char *const k_switch[] = {"auto", "off", "on"};
  size_t at = 0;
  if (size) out[0] = '\0';
  for (size_t i = 0; i < N_OPTS; i++) {
    const kopt_t *k = &k_opts[i];
    char value[HKC_TUNE_MAX + 8] = "";
    if (k->kind == KOPT_BOOL) {
      const int on = strcmp(k->name, "simple_kernels") == 0 ? o->simple_kernels : o->ew_exact_act;
      if (on) snprintf(value, sizeof value, "1");
    } else if (k->kind == KOPT_INT) {
      if (o->attn_kvs > 0) snprintf(value, sizeof value, "%d", o->attn_kvs);
    } else if (k->kind == KOPT_SWITCH) {
      const hkc_switch_t s = switch_value(o, k->name);
      if (s != HKC_SWITCH_AUTO && (unsigned)s < 3) snprintf(value, sizeof value, "%s", k_switch[s]);
    } else {
      snprintf(value, sizeof value, "%.*s", HKC_TUNE_MAX, o->cfg[k->cfg]);
    }
    if (!value[0]) continue;
    int n = snprintf(out + at, size > at ? size - at : 0, "%s%s=%s", at ? ";" : "", k->name, value);
    at += n > 0 ? (size_t)n : 0;
  }
  if (at == 0) snprintf(out, size, "none");
}

int hkc_kernel_options_is_default(const hkc_kernel_options_t *o) {
  char text[16];
  hkc_kernel_options_format(o, text, sizeof text);
  return strcmp(text, "none") == 0;
}

/* ew_exact_act: the keys whose code it changes (elementwise_vec16's HK_EW_FAST_ACT). */
static int ew_fast_act(const hkc_kernel_key_t *key) {
  return key->dtype != HK_DTYPE_F32 && (key->op == HK_OP_GELU || key->op == HK_OP_SILU || key->op == HK_OP_EWCHAIN);
}

int hkc_kernel_options_force(const hkc_kernel_options_t *o, const char *target, const hkc_gpu_arch_t *arch,
                             const hkc_variant_t *v, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out) {
  if (!o || !v || !v->tune_parse) return 0;
  const kopt_t *k = NULL;
  for (size_t i = 0; i < N_OPTS; i++) {
    const kopt_t *c = &k_opts[i];
    if (c->kind != KOPT_CFG || strcmp(c->variant, v->name) != 0 || !o->cfg[c->cfg][0]) continue;
    if (c->cfg == HKC_KOPT_ROWS_CFG_F32 && key->dtype != HK_DTYPE_F32) continue;
    if (c->cfg == HKC_KOPT_ROWS_CFG_16 && key->dtype == HK_DTYPE_F32) continue;
    if (!k || c->cfg == HKC_KOPT_ROWS_CFG_F32 || c->cfg == HKC_KOPT_ROWS_CFG_16) k = c; /* per dtype wins */
  }
  const int exact = o->ew_exact_act && strcmp(v->name, "elementwise_vec16") == 0 && ew_fast_act(key);
  const int kvs = o->attn_kvs > 0 && strcmp(v->name, "attention_mma") == 0 ? o->attn_kvs : 0;
  if (!k && !exact && !kvs) return 0;
  char params[HKC_TUNE_MAX];
  snprintf(params, sizeof params, "%s", k ? o->cfg[k->cfg] : "");
  int rc = v->tune_parse(arch, key, params, out);
  if (rc == 0 && kvs) { /* attn_mma_cfg's tile (else KOPT_KVS_TILE) with attn_kvs's pieces (and its gp) */
    const int gp = strstr(out->tune, ",gp=1") != NULL;
    char *at = strstr(out->tune, ",kvs=");
    if (!at) at = strstr(out->tune, ",gp=");
    if (at) *at = '\0';
    snprintf(params, sizeof params, "%s", k || kvs == 1 ? out->tune : KOPT_KVS_TILE);
    size_t len = strlen(params);
    if (kvs > 1) snprintf(params + len, sizeof params > len ? sizeof params - len : 0, ",kvs=%d", kvs);
    len = strlen(params);
    if (gp) snprintf(params + len, sizeof params > len ? sizeof params - len : 0, ",gp=1");
    rc = v->tune_parse(arch, key, params, out);
  }
  if (rc == 0 && exact) { /* the same configuration with x=1 */
    char *x = strstr(out->tune, "x=0");
    if (x) {
      x[2] = '1';
      snprintf(params, sizeof params, "%s", out->tune);
      rc = v->tune_parse(arch, key, params, out);
    }
  }
  if (rc != 0) {
    char kname[96];
    hkc_kernel_key_name(key, kname, sizeof kname);
    char kv[16];
    snprintf(kv, sizeof kv, "%d", kvs);
    hkc_error((hkc_loc_t){0}, "kernel option %s=%s%s%s is not legal for kernel %s on %s (%s: %s)",
              k ? k->name : kvs ? "attn_kvs" : "ew_exact_act", k ? o->cfg[k->cfg] : kvs ? kv : "1",
              k && kvs ? " with attn_kvs=" : "", k && kvs ? kv : "", kname, target, v->name,
              v->rules ? v->rules : "see its tune_parse");
    return -1;
  }
  return 1;
}
