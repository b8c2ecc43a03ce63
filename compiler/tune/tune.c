/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tuning (docs/TUNING.md): candidate spaces, the static pruning and ranking of
 * candidates, and the per-launch choice a build makes.
 *
 * A build chooses per launch (spec node x batch bucket), because the best tile depends on
 * M, which changes with the bucket: one spec node may become different kernels in
 * different buckets. For each tunable launch, in order:
 *   1. a tuning-database entry for (target, units, toolchain, signature) -- exact, else the
 *      same shape with another epilogue -- whose configuration is legal here;
 *   2. --tune model: the model ranks the candidates with estimated resources, the top
 *      `verify` (3) of each launch are compiled (in parallel, through the compile cache),
 *      those that fail, spill, exceed the register file or shared memory / LDS, or fall under
 *      the occupancy floor are dropped, and the survivors are ranked again with their real
 *      resources; the best wins (the default configuration when none survives);
 *   3. --tune default: the variant's defaults.
 * The registry's default configuration leaves the key's variant/tune empty, so a build that
 * chooses the defaults everywhere is byte-identical to an untuned one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "hk/hkrt.h" /* HK_HOST_MAX_THREADS */
#include "codegen/variants/variant.h"
#include "frontend/frontend.h"
#include "lower/lower.h"
#include "rtc/rtc.h"
#include "tune/tune.h"
#include "util/util.h"

const char *hkc_tune_source_name(hkc_tune_source_t source) {
  return source == HKC_TUNE_SRC_OPTION ? "option" : source == HKC_TUNE_SRC_DB ? "db"
         : source == HKC_TUNE_SRC_MODEL ? "model" : "default";
}

int hkc_tune_shape_of(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                      hkc_tune_shape_t *out) {
  memset(out, 0, sizeof *out);
  if (key->op == HK_OP_ATTENTION && arch && n_args >= HKC_ATTENTION_N_ARGS) {
    hkc_kernel_key_t base = *key; /* the variant the key names (attn_tma=on), else the default one */
    base.tune[0] = '\0';
    const hkc_variant_t *v = hkc_variant_for(arch, &base);
    hkc_tile_cfg_t cfg;
    if (!v || !v->tune_parse || v->tune_parse(arch, &base, "", &cfg) != 0 || cfg.efficiency <= 0) return 0;
    out->m = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q);
    out->n = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_KV);
    out->k = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_DH);
    out->batch = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH);
    out->heads = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS);
    out->kv_heads = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_KV_HEADS);
    out->causal = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_CAUSAL) != 0;
    return out->m > 0 && out->n > 0 && out->k > 0 && out->batch > 0 && out->heads > 0 && out->kv_heads > 0;
  }
  if (key->op == HK_OP_KV_ATTENTION && n_args > HKC_KV_ATTENTION_ARG_KV_HEADS) {
    /* not tunable; its rows and heads for kv_mma_choose */
    out->m = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_ROWS);
    out->heads = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_HEADS);
    out->kv_heads = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_KV_HEADS);
    return 0;
  }
  if (key->op != HK_OP_GEMM || n_args <= HKC_GEMM_ARG_K) return 0;
  out->m = args[HKC_GEMM_ARG_M].kind == HK_ARG_I64 ? args[HKC_GEMM_ARG_M].i : 0;
  out->n = args[HKC_GEMM_ARG_N].kind == HK_ARG_I64 ? args[HKC_GEMM_ARG_N].i : 0;
  out->k = args[HKC_GEMM_ARG_K].kind == HK_ARG_I64 ? args[HKC_GEMM_ARG_K].i : 0;
  return out->m > 0 && out->n > 0 && out->k > 0;
}

int hkc_tune_shape_equal(hkc_tune_shape_t a, hkc_tune_shape_t b) {
  return a.m == b.m && a.n == b.n && a.k == b.k && a.batch == b.batch && a.heads == b.heads &&
         a.kv_heads == b.kv_heads && a.causal == b.causal;
}

double hkc_tune_shape_flops(const hkc_kernel_key_t *key, hkc_tune_shape_t shape) {
  if (key->op == HK_OP_ATTENTION)
    return 4.0 * (double)shape.batch * (double)shape.heads * (double)shape.m * (double)shape.n * (double)shape.k /
           (shape.causal ? 2.0 : 1.0);
  return 2.0 * (double)shape.m * (double)shape.n * (double)shape.k;
}

void hkc_tune_signature(const hkc_kernel_key_t *key, hkc_tune_shape_t shape, char *out, size_t size) {
  if (key->op == HK_OP_ATTENTION) {
    snprintf(out, size, "attention %s b=%lld h=%lld kvh=%lld sq=%lld skv=%lld d=%lld%s%s%s", hkc_dtype_name(key->dtype),
             (long long)shape.batch, (long long)shape.heads, (long long)shape.kv_heads, (long long)shape.m,
             (long long)shape.n, (long long)shape.k, shape.causal ? " causal" : "", key->has_lengths ? " len" : "",
             key->has_mask ? " mask" : "");
    return;
  }
  char rope[24] = "";
  if (key->rope) snprintf(rope, sizeof rope, " rope=d%d", key->head_dim);
  snprintf(out, size, "%s %s m=%lld n=%lld k=%lld%s%s%s%s%s%s%s%s%s%s", hkc_op_name(key->op), hkc_dtype_name(key->dtype),
           (long long)shape.m, (long long)shape.n, (long long)shape.k, key->trans_b ? " tb" : "",
           key->has_bias ? " bias" : "", key->act != HK_ACT_NONE ? " act=" : "",
           key->act != HK_ACT_NONE ? hkc_act_name(key->act) : "", key->has_residual ? " res" : "",
           key->has_mul ? " mul" : "", key->dual ? " dual" : "", rope, key->norm_a ? " norm" : "",
           key->norm_c == HKC_NORM_C_RMSNORM ? " rms" : key->norm_c ? " ln" : "");
}

int hkc_tune_units(const hkc_gpu_arch_t *arch, int host_threads) {
  if (arch) return (int)arch->compute_units;
  /* the host backend's threads: as given (the CLI maps HK_HOST_THREADS, as the loader's
   * backend_host.c reads it), else the online CPUs; capped as the loader caps them */
  long n = host_threads > 0 ? host_threads : sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > HK_HOST_MAX_THREADS ? HK_HOST_MAX_THREADS : (int)n;
}

void hkc_tune_toolchain(const hkc_gpu_arch_t *arch, char *out, size_t size) {
  const hkc_toolchain_t *tc = hkc_toolchain_for_arch(arch);
  const char *v = tc ? tc->version() : "";
  snprintf(out, size, "%s", v && *v ? v : "unknown");
  for (char *c = out; *c; c++)
    if (*c == '|' || *c == '\t' || *c == '\n' || *c == '\r') *c = ' ';
}

/* ---- candidates ------------------------------------------------------------------------------ */
/* Drops from out[0, n) what the options keep out of the space (gemm_split); the new count. */
static int allowed_cfgs(const hkc_kernel_options_t *options, hkc_tile_cfg_t *out, int n) {
  int kept = 0;
  for (int j = 0; j < n; j++)
    if (hkc_kernel_options_allow_cfg(options, &out[j])) out[kept++] = out[j];
  return kept;
}

int hkc_tune_candidates_for(const hkc_gpu_arch_t *arch, const hkc_kernel_options_t *options, const hkc_kernel_key_t *key,
                            hkc_tile_cfg_t *out, int max) {
  hkc_kernel_key_t base = *key;
  base.variant[0] = base.tune[0] = '\0';
  const hkc_variant_t *first = hkc_variant_for_options(arch, options, &base);
  if (!first || !first->tune_space) return 0; /* an invalid key; a kernel without parameters */
  /* the default variant's default first */
  int n = allowed_cfgs(options, out, first->tune_space(arch, &base, out, max));
  if (first != hkc_variant_for(arch, &base)) /* options chose another variant: named in every key */
    for (int j = 0; j < n; j++) out[j].is_default = 0;
  const hkc_variant_t *const *list = hkc_variant_list();
  for (size_t i = 0; list[i] && n < max; i++) {
    if (list[i] == first || !list[i]->tune_space || !hkc_variant_serves(list[i], arch, &base)) continue;
    if (options && !hkc_kernel_options_allow(options, arch, list[i], &base)) continue;
    int m = allowed_cfgs(options, out + n, list[i]->tune_space(arch, &base, out + n, max - n));
    for (int j = 0; j < m; j++) out[n + j].is_default = 0; /* only the registry's first is the default */
    n += m;
  }
  return n;
}

int hkc_tune_candidates(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  return hkc_tune_candidates_for(arch, NULL, key, out, max);
}

int hkc_tune_lookup_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *variant,
                        const char *params, hkc_tile_cfg_t *out) {
  hkc_kernel_key_t base = *key;
  base.variant[0] = base.tune[0] = '\0';
  const hkc_variant_t *first = hkc_variant_for(arch, &base);
  const hkc_variant_t *const *list = hkc_variant_list();
  for (size_t i = 0; list[i]; i++) {
    if (strcmp(list[i]->name, variant) != 0 || (arch ? list[i]->host : !list[i]->host)) continue;
    if (!list[i]->tune_parse || !list[i]->applies(arch, &base) || list[i]->tune_parse(arch, &base, params, out) != 0)
      return -1;
    /* the db may spell the default as "" or in full; either way the canonical string */
    if (list[i] != first) out->is_default = 0;
    return 0;
  }
  return -1;
}

void hkc_tune_apply(const hkc_gpu_arch_t *arch, hkc_kernel_key_t *key, const hkc_tile_cfg_t *cfg) {
  (void)arch;
  key->variant[0] = key->tune[0] = '\0';
  if (cfg->is_default) return; /* the registry's choice with its defaults: an untuned key */
  snprintf(key->variant, sizeof key->variant, "%s", cfg->variant);
  snprintf(key->tune, sizeof key->tune, "%s", cfg->tune);
}

int hkc_tune_cands_for(const hkc_gpu_arch_t *arch, const hkc_kernel_options_t *options, const hkc_kernel_key_t *key,
                       hkc_tune_cand_t *cands, int max) {
  hkc_tile_cfg_t *cfgs = calloc((size_t)(max > 0 ? max : 1), sizeof *cfgs);
  if (!cfgs) return 0;
  int n = hkc_tune_candidates_for(arch, options, key, cfgs, max);
  for (int i = 0; i < n; i++) {
    hkc_tune_cand_t *c = &cands[i];
    memset(c, 0, sizeof *c);
    c->cfg = cfgs[i];
    c->key = *key;
    hkc_tune_apply(arch, &c->key, &cfgs[i]);
    c->regs = cfgs[i].regs;
    c->shared = cfgs[i].shared_bytes;
  }
  free(cfgs);
  return n;
}

int hkc_tune_cands(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tune_cand_t *cands, int max) {
  return hkc_tune_cands_for(arch, NULL, key, cands, max);
}

void hkc_tune_cand_resources(const hkc_gpu_arch_t *arch, hkc_tune_cand_t *cand, const hkc_compile_item_t *item) {
  cand->compiled = 1;
  if (item->rc != 0) {
    cand->pruned = "compile";
    return;
  }
  const hkc_rtc_result_t *r = &item->result;
  if (r->scratch_bytes) {
    cand->pruned = "spills";
    return;
  }
  cand->regs = r->vgprs ? r->vgprs : cand->cfg.regs;
  cand->agprs = r->agprs;
  cand->sgprs = r->sgprs;
  /* static shared memory as reported, or the dynamic amount the launch asks, whichever is
   * larger (the build records the same in the pack) */
  cand->shared = r->shared_bytes > cand->cfg.shared_bytes ? r->shared_bytes : cand->cfg.shared_bytes;
  if (arch) {
    hkc_tile_cfg_t cfg = cand->cfg;
    cfg.shared_bytes = cand->shared;
    cand->per_cu = hkc_model_blocks_per_cu(arch, &cfg, cand->regs, cand->agprs, cand->sgprs);
    if (cand->per_cu == 0) cand->pruned = "registers/shared";
    else if (!hkc_model_meets_floor(arch, &cfg, cand->per_cu)) cand->pruned = "occupancy";
  }
}

/* How much faster (estimated) than the default a candidate must be to replace it. */
#define HKC_MODEL_DEFAULT_MARGIN 0.05

static int epilogue_tensors(const hkc_kernel_key_t *key) { return (key->has_residual ? 1 : 0) + (key->has_mul ? 1 : 0); }

static int better(const hkc_tune_cand_t *a, int ia, const hkc_tune_cand_t *b, int ib) {
  if (a->est.seconds != b->est.seconds) return a->est.seconds < b->est.seconds;
  if (a->shared != b->shared) return a->shared < b->shared;
  if (a->cfg.threads != b->cfg.threads) return a->cfg.threads < b->cfg.threads;
  return ia < ib;
}

int hkc_tune_rank(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tune_shape_t shape, hkc_tune_cand_t *cands,
                  int n, int *order) {
  int m = 0;
  /* attention: only the configurations with model figures are ranked (attention_tma's); when
   * none has them (kernel options chose another variant), the first candidate -- the choice
   * the options or the registry make -- is kept as it is */
  int modelled = 0;
  for (int i = 0; key->op == HK_OP_ATTENTION && i < n; i++) modelled |= cands[i].cfg.efficiency > 0;
  for (int i = 0; i < n; i++) {
    hkc_tune_cand_t *c = &cands[i];
    if (c->pruned) continue;
    if (key->op == HK_OP_ATTENTION && (modelled ? c->cfg.efficiency <= 0 : i > 0)) continue;
    if (key->op == HK_OP_ATTENTION && !modelled) {
      memset(&c->est, 0, sizeof c->est);
      order[m++] = i;
      continue;
    }
    if (arch) {
      hkc_tile_cfg_t cfg = c->cfg;
      cfg.shared_bytes = c->shared;
      if (!c->compiled) {
        c->per_cu = hkc_model_blocks_per_cu(arch, &cfg, c->regs, 0, 0);
        if (c->per_cu == 0 || !hkc_model_meets_floor(arch, &cfg, c->per_cu)) continue; /* estimated: skip, not pruned */
      }
      const int rc = key->op == HK_OP_ATTENTION
                         ? hkc_model_estimate_attention(arch, &cfg, shape, key->dtype, c->per_cu, &c->est)
                         : hkc_model_estimate(arch, &cfg, shape, key->dtype, epilogue_tensors(key), key->has_bias,
                                              c->per_cu, &c->est);
      if (rc != 0) continue;
    }
    /* insertion into order by `better` (stable, n is small) */
    int at = m;
    while (at > 0 && arch && better(c, i, &cands[order[at - 1]], order[at - 1])) {
      order[at] = order[at - 1];
      at--;
    }
    order[at] = i;
    m++;
  }
  /* The default configuration is the one whose speed was measured when it was made the
   * default; the model is about 5% off on measured shapes (docs/TUNING.md). So the default
   * keeps first place unless a candidate is estimated at least HKC_MODEL_DEFAULT_MARGIN
   * faster: a switch to an unmeasured configuration must be worth more than the error. */
  for (int r = 1; arch && r < m; r++) {
    const hkc_tune_cand_t *d = &cands[order[r]];
    if (!d->cfg.is_default) continue;
    if (d->est.seconds <= cands[order[0]].est.seconds * (1.0 + HKC_MODEL_DEFAULT_MARGIN)) {
      const int keep = order[r];
      memmove(&order[1], &order[0], (size_t)r * sizeof *order);
      order[0] = keep;
    }
    break;
  }
  return m;
}

int hkc_tune_model_choice(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tune_shape_t shape,
                          const hkc_tune_cand_t *cands, int n, int verify) {
  if (n <= 0) return -1;
  hkc_tune_cand_t *est = calloc((size_t)n, sizeof *est), *sub = calloc((size_t)n, sizeof *sub);
  int *order = calloc((size_t)n, sizeof *order), *sub_order = calloc((size_t)n, sizeof *sub_order);
  int *map = calloc((size_t)n, sizeof *map);
  int pick = -1;
  if (est && sub && order && sub_order && map) {
    for (int i = 0; i < n; i++) { /* as the build starts: estimated resources */
      est[i] = cands[i];
      est[i].compiled = 0;
      est[i].pruned = NULL;
      est[i].regs = cands[i].cfg.regs;
      est[i].agprs = est[i].sgprs = 0;
      est[i].shared = cands[i].cfg.shared_bytes;
    }
    int m = hkc_tune_rank(arch, key, shape, est, n, order);
    int k = 0;
    for (int r = 0; r < m && r < (verify > 0 ? verify : 3); r++) {
      map[k] = order[r];
      sub[k++] = cands[order[r]]; /* then their compiled resources */
    }
    m = hkc_tune_rank(arch, key, shape, sub, k, sub_order);
    if (m > 0) pick = map[sub_order[0]];
  }
  free(est);
  free(sub);
  free(order);
  free(sub_order);
  free(map);
  return pick;
}

/* ---- the tuner: per-launch choices of a build -------------------------------------------------- */
/* A compiled candidate kept for the build (hkc_tuner_take). */
typedef struct kept_code {
  char target[64];
  hkc_kernel_out_t kernel;   /* name, key, source_hash */
  hkc_rtc_result_t result;
  int cached;
} kept_code_t;

struct hkc_tuner {
  hkc_tune_mode_t mode;
  const hkc_tune_db_t *db;
  int verify, jobs, no_cache;
  const char *cache_dir;
  const hkc_kernel_options_t *options; /* NULL: the defaults */
  int host_threads;
  const hkc_tune_entry_t **warned; /* database entries already reported unusable */
  size_t n_warned, cap_warned;
  kept_code_t *kept;               /* the model's compiles, for the build to take */
  size_t n_kept, cap_kept;
  hkc_reporter_t *progress;        /* borrowed; NULL: nothing shown */
  hkc_tune_stats_t stats;
};

hkc_tuner_t *hkc_tuner_create(hkc_tune_mode_t mode, const hkc_tune_db_t *db, int verify, int jobs, int no_cache,
                              const char *cache_dir) {
  hkc_tuner_t *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->mode = mode;
  t->db = db;
  t->verify = verify > 0 ? verify : 3;
  t->jobs = jobs;
  t->no_cache = no_cache;
  t->cache_dir = cache_dir;
  return t;
}

void hkc_tuner_set_options(hkc_tuner_t *tuner, const hkc_kernel_options_t *options, int host_threads) {
  tuner->options = options;
  tuner->host_threads = host_threads;
}

void hkc_tuner_set_progress(hkc_tuner_t *tuner, hkc_reporter_t *progress) { tuner->progress = progress; }

hkc_tune_stats_t hkc_tuner_stats(const hkc_tuner_t *tuner) {
  const hkc_tune_stats_t none = {0};
  return tuner ? tuner->stats : none;
}

void hkc_tuner_destroy(hkc_tuner_t *tuner) {
  if (!tuner) return;
  for (size_t i = 0; i < tuner->n_kept; i++) hkc_rtc_result_free(&tuner->kept[i].result);
  free(tuner->kept);
  free(tuner->warned);
  free(tuner);
}

int hkc_tuner_take(hkc_tuner_t *tuner, const char *target, hkc_kernel_out_t *kernel, hkc_rtc_result_t *out_result,
                   int *out_cached) {
  for (size_t i = 0; tuner && i < tuner->n_kept; i++) {
    kept_code_t *k = &tuner->kept[i];
    if (!k->result.code || strcmp(k->target, target) != 0 || !hkc_kernel_key_equal(&k->kernel.key, &kernel->key))
      continue;
    *out_result = k->result;
    memset(&k->result, 0, sizeof k->result);
    *out_cached = k->cached;
    kernel->source_hash = k->kernel.source_hash;
    return 1;
  }
  return 0;
}

/* Keeps the successful compiles of items for hkc_tuner_take (moves their results). */
static void keep_compiles(hkc_tuner_t *t, const char *target, hkc_compile_item_t *items, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (items[i].rc != 0 || strlen(target) >= sizeof t->kept->target) continue;
    if (hkc_reserve((void **)&t->kept, &t->cap_kept, t->n_kept + 1, sizeof *t->kept) != 0) return;
    kept_code_t *k = &t->kept[t->n_kept++];
    snprintf(k->target, sizeof k->target, "%s", target);
    k->kernel = *items[i].kernel;
    k->result = items[i].result;
    k->cached = items[i].cached;
    memset(&items[i].result, 0, sizeof items[i].result);
  }
}

/* One launch class of the model: its candidates, ranked. */
typedef struct model_class {
  size_t launch;           /* first launch of the class */
  hkc_tune_cand_t *cands;
  int n_cands;
  int *order;
  int n_order;
} model_class_t;

static int same_class(const hkc_tune_launch_t *a, const hkc_tune_launch_t *b) {
  return hkc_kernel_key_equal(&a->key, &b->key) && hkc_tune_shape_equal(a->shape, b->shape);
}


/* The model's choices for launches[idx[0..n)] (all tunable, not served by the database). */
static int model_choose(hkc_tuner_t *tuner, const char *target, const hkc_gpu_arch_t *arch, hkc_tune_launch_t *launches,
                        const size_t *idx, size_t n) {
  model_class_t *classes = calloc(n ? n : 1, sizeof *classes);
  size_t *class_of = calloc(n ? n : 1, sizeof *class_of);
  size_t n_classes = 0;
  int rc = -1;
  hkc_compile_item_t *items = NULL;
  hkc_kernel_out_t *kouts = NULL;
  size_t n_items = 0;
  if (!classes || !class_of) goto done;
  for (size_t i = 0; i < n; i++) {
    size_t c = 0;
    while (c < n_classes && !same_class(&launches[classes[c].launch], &launches[idx[i]])) c++;
    class_of[i] = c;
    if (c < n_classes) continue;
    model_class_t *mc = &classes[n_classes++];
    mc->launch = idx[i];
    mc->cands = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *mc->cands);
    mc->order = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *mc->order);
    if (!mc->cands || !mc->order) goto done;
    mc->n_cands = hkc_tune_cands_for(arch, tuner->options, &launches[idx[i]].key, mc->cands, HKC_TUNE_MAX_CANDIDATES);
    mc->n_order = hkc_tune_rank(arch, &launches[idx[i]].key, launches[idx[i]].shape, mc->cands, mc->n_cands, mc->order);
  }
  /* compile the top `verify` of every class (GPU targets; the host keeps its default) */
  size_t cap = n_classes * (size_t)tuner->verify;
  items = calloc(cap ? cap : 1, sizeof *items);
  kouts = calloc(cap ? cap : 1, sizeof *kouts);
  if (!items || !kouts) goto done;
  for (size_t c = 0; arch && c < n_classes; c++)
    for (int r = 0; r < classes[c].n_order && r < tuner->verify; r++) {
      const hkc_tune_cand_t *cand = &classes[c].cands[classes[c].order[r]];
      size_t k = 0;
      while (k < n_items && !hkc_kernel_key_equal(&kouts[k].key, &cand->key)) k++;
      if (k < n_items) continue;
      kouts[k].key = cand->key;
      hkc_kernel_key_name(&cand->key, kouts[k].name, sizeof kouts[k].name);
      items[k] = (hkc_compile_item_t){.target = target, .arch = arch, .kernel = &kouts[k]};
      n_items++;
    }
  if (n_items) {
    char phase[80];
    snprintf(phase, sizeof phase, "tune %s", target);
    const int id = hkc_reporter_begin(tuner->progress, phase, n_items, "candidate kernel(s) to compile (the model's top %d for each of %zu launch class(es))",
                                      tuner->verify, n_classes);
    for (size_t k = 0; k < n_items; k++) items[k].phase = id;
    int threads = 0;
    hkc_compile_gpu_items(items, n_items, tuner->jobs, tuner->no_cache, tuner->cache_dir, tuner->progress, &threads);
    tuner->stats.compiles += n_items;
    for (size_t k = 0; k < n_items; k++) {
      tuner->stats.cached += items[k].cached != 0;
      tuner->stats.shared_cached += items[k].cached == 2;
      tuner->stats.failed += items[k].rc != 0;
    }
    if (threads > tuner->stats.threads) tuner->stats.threads = threads;
  }
  for (size_t c = 0; c < n_classes; c++) {
    model_class_t *mc = &classes[c];
    const int top = mc->n_order < tuner->verify ? mc->n_order : tuner->verify;
    int checked[64];
    int n_checked = 0;
    for (int r = 0; arch && r < top && n_checked < 64; r++) {
      hkc_tune_cand_t *cand = &mc->cands[mc->order[r]];
      for (size_t k = 0; k < n_items; k++)
        if (hkc_kernel_key_equal(&kouts[k].key, &cand->key)) hkc_tune_cand_resources(arch, cand, &items[k]);
      checked[n_checked++] = mc->order[r];
    }
    /* re-rank the checked ones with their real resources */
    hkc_tune_cand_t *sub = calloc((size_t)(n_checked ? n_checked : 1), sizeof *sub);
    int *sub_order = calloc((size_t)(n_checked ? n_checked : 1), sizeof *sub_order);
    if (!sub || !sub_order) {
      free(sub);
      free(sub_order);
      goto done;
    }
    for (int j = 0; j < n_checked; j++) sub[j] = mc->cands[checked[j]];
    int m = hkc_tune_rank(arch, &launches[mc->launch].key, launches[mc->launch].shape, sub, n_checked, sub_order);
    const hkc_tune_cand_t *pick = arch && m > 0 ? &sub[sub_order[0]] : NULL;
    if (!arch && mc->n_order > 0) pick = &mc->cands[mc->order[0]]; /* host: the default */
    for (size_t i = 0; i < n; i++) {
      if (class_of[i] != c) continue;
      hkc_tune_launch_t *l = &launches[idx[i]];
      if (pick) {
        l->key = pick->key;
        l->source = HKC_TUNE_SRC_MODEL;
      }
    }
    if (!pick && arch && mc->n_cands > 0) { /* every candidate failed its checks */
      char sig[160];
      hkc_tune_signature(&launches[mc->launch].key, launches[mc->launch].shape, sig, sizeof sig);
      hkc_warning((hkc_loc_t){0}, "%s: no candidate of %s survived the checks; using the defaults", target, sig);
    }
    free(sub);
    free(sub_order);
  }
  keep_compiles(tuner, target, items, n_items);
  rc = 0;
done:
  for (size_t k = 0; k < n_items; k++) hkc_rtc_result_free(&items[k].result);
  free(items);
  free(kouts);
  for (size_t c = 0; classes && c < n_classes; c++) {
    free(classes[c].cands);
    free(classes[c].order);
  }
  free(classes);
  free(class_of);
  if (rc != 0) hkc_error((hkc_loc_t){0}, "out of memory while tuning for %s", target);
  return rc;
}

/* Whether the kernel options turn off the variant a database entry names. */
static int entry_disallowed(const hkc_tuner_t *t, const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key,
                            const hkc_tune_entry_t *e) {
  if (!t->options || !arch) return 0;
  const hkc_variant_t *const *list = hkc_variant_list();
  for (size_t i = 0; list[i]; i++)
    if (strcmp(list[i]->name, e->variant) == 0) return !hkc_kernel_options_allow(t->options, arch, list[i], key);
  return 0;
}

/* Reports a database entry that cannot be used here, once. */
static void warn_entry(hkc_tuner_t *t, const hkc_tune_entry_t *e, const char *why) {
  for (size_t i = 0; i < t->n_warned; i++)
    if (t->warned[i] == e) return;
  if (hkc_reserve((void **)&t->warned, &t->cap_warned, t->n_warned + 1, sizeof *t->warned) == 0)
    t->warned[t->n_warned++] = e;
  hkc_warning((hkc_loc_t){e->file, e->line, 0}, "tuning entry %s %s not used: %s", e->variant, e->params, why);
}

int hkc_tune_apply_options(const hkc_kernel_options_t *o, const char *target, const hkc_gpu_arch_t *arch,
                           hkc_kernel_key_t *key) {
  if (!o || !arch) return 0;
  key->variant[0] = key->tune[0] = '\0';
  const hkc_variant_t *plain = hkc_variant_for(arch, key);
  const hkc_variant_t *v = hkc_variant_for_options(arch, o, key);
  if (!v) return 0; /* an invalid key (codegen reports it) */
  if (v->portable) { /* the simple kernel: nothing to tune */
    if (v == plain) return 0;
    snprintf(key->variant, sizeof key->variant, "%s", v->name); /* simple_kernels=1: named in the key */
    return 2;
  }
  hkc_tile_cfg_t cfg;
  const int forced = hkc_kernel_options_force(o, target, arch, v, key, &cfg);
  if (forced < 0) return -1;
  if (forced > 0) {
    if (v != plain) cfg.is_default = 0;
    hkc_tune_apply(arch, key, &cfg);
    return 2;
  }
  if (v == plain) return 0;
  snprintf(key->variant, sizeof key->variant, "%s", v->name); /* its defaults, unless tuning chooses */
  return 1;
}

/* The kernel options' choice for one GPU launch: 1 when they fix it, 0 when the database /
 * model / defaults still choose, -1 on an illegal forced configuration (reported). */
static int options_choose(const hkc_tuner_t *tuner, const char *target, const hkc_gpu_arch_t *arch,
                          hkc_tune_launch_t *l) {
  const int r = hkc_tune_apply_options(tuner->options, target, arch, &l->key);
  if (r < 0) return -1;
  if (r > 0) l->source = HKC_TUNE_SRC_OPTION;
  return r == 2 || (r == 1 && !l->tunable);
}

/* gemm_skinny for the few-row GEMMs of decode steps (variant_skinny_nv.c), unless
 * gemm_skinny=off (a gemm that reads 8-bit B itself takes it whatever): a launch of M <= 8
 * rows of A reads all of B for a few
 * rows of output, so its time is
 * the read of B at the memory's bandwidth, which gemm_skinny's stream of 16-byte loads from
 * every SM reaches and the tensor-core tiles (one block per 64-128 columns, a few dozen
 * blocks for a decode step's projections) do not. Before the database and the model, which
 * rank tile configurations of the tensor-core variants; mb = the smallest of 1, 2, 4, 8 that
 * is >= M (larger M: passes of 8 rows). Under auto a 16-bit B takes it at one row only
 * (HKC_GEMM_SKINNY_AUTO_ROWS): the H100 ran Llama-3.2-1B's decode step (2026-12-07, docs/BENCHMARKS.md)
 * at 1.59 ms with it at batch 1 against 1.87 with the tensor-core kernels, but at 3.99 against
 * 2.06 ms at batch 8 and 2.58 against 2.01 at batch 4 (its mb = 4 and 8 forms read B at 0.4-0.9
 * TB/s). gemm_skinny=on: every M <= 8. Its other parameters: gemm_skinny_cfg's, else the shape's
 * (hkc_gemm_skinny_params). AMD CDNA targets take gemm_skinny_amd (the wave64 form) by the same
 * rule, at its defaults (not measured on a GPU). 1 when it chose, -1 on an illegal gemm_skinny_cfg
 * (reported). */
static int skinny_choose(const hkc_kernel_options_t *o, const hkc_gpu_arch_t *arch, hkc_tune_launch_t *l) {
  /* a gemm that reads 8-bit B itself: gemm_skinny is its kernel on sm_90a (the build folds the
   * dequant only there, hkc_fuse_for_targets), whatever gemm_skinny says */
  const int quant = hkc_gemm_quant_b(&l->key) != 0;
  const int on = !(o && o->gemm_skinny == HKC_SWITCH_OFF) || quant;
  const int64_t rows = quant || (o && o->gemm_skinny == HKC_SWITCH_ON) ? HKC_GEMM_FEW_ROWS : HKC_GEMM_SKINNY_AUTO_ROWS;
  if (!arch || !on || l->key.op != HK_OP_GEMM || l->shape.m < 1 || l->shape.m > rows) return 0;
  const int amd = arch->kind == HK_TARGET_HIP; /* gemm_skinny_amd: the wave64 form, its defaults */
  const hkc_variant_t *v = hkc_variant_named(amd ? "gemm_skinny_amd" : "gemm_skinny");
  hkc_kernel_key_t key = l->key;
  key.variant[0] = key.tune[0] = '\0';
  if (!v || !hkc_variant_serves(v, arch, &key) || (o && !hkc_kernel_options_allow(o, arch, v, &key))) return 0;
  /* a 16-bit B under gemm_stream=on: gemm_stream (the bulk copy engine's stream, the tensor cores)
   * in its place. Opt-in: the H100 ran Llama-3.2-1B's batch-1 decode step (2026-12-07,
   * docs/BENCHMARKS.md) at 1.850 ms with it against 1.497 with gemm_skinny -- faster at the SwiGLU
   * pair (30.8 against 33.1 us), slower at q|k|v, o and down (18.3 / 12.9 / 34.4 against 14.0 /
   * 9.1 / 21.5). */
  const hkc_variant_t *stream = hkc_variant_named("gemm_stream");
  if (stream && o && o->gemm_stream == HKC_SWITCH_ON && hkc_gemm_stream_fits(l->shape.m, l->shape.k) &&
      hkc_variant_serves(stream, arch, &key) &&
      !(o && !hkc_kernel_options_allow(o, arch, stream, &key)))
    v = stream;
  char params[HKC_TUNE_MAX];
  if (v == stream) {
    snprintf(params, sizeof params, "mb=%d", l->shape.m <= 1 ? 1 : l->shape.m <= 2 ? 2 : l->shape.m <= 4 ? 4 : 8);
  } else if (amd) {
    if (hkc_gemm_skinny_amd_params(l->shape.m, params, sizeof params) != 0) return 0;
  } else {
    const char *forced = o ? o->cfg[HKC_KOPT_GEMM_SKINNY_CFG] : NULL;
    if (hkc_gemm_skinny_params(&key, forced, l->shape.m, l->shape.n, l->shape.k, params, sizeof params) != 0) {
      char kname[96];
      hkc_kernel_key_name(&key, kname, sizeof kname);
      hkc_error((hkc_loc_t){0}, "kernel option gemm_skinny_cfg=%s is not legal for kernel %s (gemm_skinny: %s)",
                forced, kname, v->rules);
      return -1;
    }
  }
  hkc_tile_cfg_t cfg;
  if (v->tune_parse(arch, &key, params, &cfg) != 0) return 0;
  l->key = key;
  hkc_tune_apply(arch, &l->key, &cfg);
  l->source = v != stream && !amd && o && o->cfg[HKC_KOPT_GEMM_SKINNY_CFG][0] ? HKC_TUNE_SRC_OPTION : HKC_TUNE_SRC_MODEL;
  return 1;
}

/* kv_attention_mma (variant_kv_nv.c) for the kv_attention launches of at least
 * HKC_KV_MMA_MIN_ROWS token rows -- prefill steps, whose rows are runs of consecutive positions
 * of a sequence: a block shares each cached key among its rows on the tensor cores, where
 * kv_attention_warp reads the keys once per row (and the portable kernel once per head); not
 * with kv_mma=off. Fewer rows (decode steps: a row per sequence) keep the registry's kernel.
 * 1 when it chose. */
static int kv_mma_choose(const hkc_kernel_options_t *o, const hkc_gpu_arch_t *arch, hkc_tune_launch_t *l) {
  if (!arch || (o && o->kv_mma == HKC_SWITCH_OFF) || l->key.op != HK_OP_KV_ATTENTION ||
      l->shape.m < HKC_KV_MMA_MIN_ROWS)
    return 0;
  const hkc_variant_t *v = hkc_variant_named("kv_attention_mma");
  hkc_kernel_key_t key = l->key;
  snprintf(key.variant, sizeof key.variant, "kv_attention_mma");
  key.tune[0] = '\0';
  if (!v || !hkc_variant_serves(v, arch, &key) || (o && !hkc_kernel_options_allow(o, arch, v, &key))) return 0;
  l->key = key;
  l->source = HKC_TUNE_SRC_MODEL;
  return 1;
}

int hkc_tuner_choose(hkc_tuner_t *tuner, const char *target, const hkc_gpu_arch_t *arch, hkc_tune_launch_t *launches,
                     size_t n) {
  const char *db_target = arch ? arch->name : hkc_host_target_name();
  const int units = hkc_tune_units(arch, tuner->host_threads);
  char toolchain[160] = "";
  if (tuner->db) hkc_tune_toolchain(arch, toolchain, sizeof toolchain); /* the host's runs `cc --version` */
  size_t from_db = 0;
  size_t *pending = calloc(n ? n : 1, sizeof *pending);
  size_t n_pending = 0;
  if (!pending) {
    hkc_error((hkc_loc_t){0}, "out of memory while tuning for %s", target);
    return -1;
  }
  int bad_option = 0;
  for (size_t i = 0; i < n; i++) {
    hkc_tune_launch_t *l = &launches[i];
    l->source = HKC_TUNE_SRC_DEFAULT;
    l->key.variant[0] = l->key.tune[0] = '\0';
    if (hkc_op_collective(l->key.op)) continue; /* no kernel to tune: the runtime's communicator */
    const int fixed = options_choose(tuner, target, arch, l);
    if (fixed < 0) { /* reported: one error per build is enough (every launch of the variant has it) */
      bad_option = 1;
      break;
    }
    if (kv_mma_choose(tuner->options, arch, l)) continue; /* over kv_warp's kv_attention_warp */
    if (fixed || !l->tunable) continue;
    const int skinny = skinny_choose(tuner->options, arch, l);
    if (skinny < 0) {
      bad_option = 1;
      break;
    }
    if (skinny) continue;
    if (tuner->db) {
      char sig[160];
      int exact = 0;
      hkc_tune_signature(&l->key, l->shape, sig, sizeof sig);
      const hkc_tune_entry_t *e = hkc_tune_db_find(tuner->db, db_target, units, toolchain, sig, &exact);
      hkc_tile_cfg_t cfg;
      hkc_kernel_key_t base = l->key;
      base.variant[0] = base.tune[0] = '\0';
      if (e && hkc_tune_lookup_cfg(arch, &base, e->variant, e->params, &cfg) == 0 && !entry_disallowed(tuner, arch, &base, e)) {
        l->key = base;
        hkc_tune_apply(arch, &l->key, &cfg);
        l->source = HKC_TUNE_SRC_DB;
        from_db++;
        continue;
      }
      if (e) warn_entry(tuner, e, entry_disallowed(tuner, arch, &base, e) ? "its variant is off (kernel options)"
                                  : "the configuration is not legal for this kernel and target");
    }
    if (tuner->mode == HKC_TUNE_MODEL) pending[n_pending++] = i;
  }
  /* entries for this target that another toolchain or SM/CU count made are not used: say so */
  size_t other = 0;
  const hkc_tune_entry_t *example = NULL;
  for (size_t i = 0; tuner->db && !from_db && i < tuner->db->n; i++) {
    const hkc_tune_entry_t *e = &tuner->db->entries[i];
    if (strcmp(e->target, db_target) == 0 && (e->units != units || strcmp(e->toolchain, toolchain) != 0)) {
      other++;
      if (!example) example = e;
    }
  }
  if (other)
    hkc_warning((hkc_loc_t){0}, "%s: the tuning database has %zu entr%s made with %s on %d units (e.g. %s:%d); this "
                "build uses %s on %d: not used (tune again with this toolchain)", target, other, other == 1 ? "y" : "ies",
                example->toolchain, example->units, example->file, example->line, toolchain, units);
  int rc = bad_option ? -1 : 0;
  if (n_pending && rc == 0) rc = model_choose(tuner, target, arch, launches, pending, n_pending);
  free(pending);
  return rc;
}
