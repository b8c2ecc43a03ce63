/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/tune/tune.h -- choosing kernel parameters (docs/TUNING.md).
 *
 *   tune.c        candidate spaces, the per-launch choice the build makes (database,
 *                 then the model, then the defaults)
 *   tune_model.c  the analytical model: ranks configurations without a GPU
 *   tune_db.c     the tuning database: parse, lookup, write, merge
 *
 * Configurations and their parameter strings belong to codegen/ (codegen.h, hkc_tile_cfg_t),
 * the compile pool to rtc/; tuning uses both and neither calls it back. `hkc tune`, which
 * measures candidates through libhkrt and writes a database, is a tool (tools/tune_run.c).
 *
 * A launch class is what a choice depends on: the kernel key without its tuning, the
 * launch's sizes (gemm: M, N, K) and the target. A configuration is one variant plus its
 * canonical parameter string ("gemm_wgmma_ws" + "bn=128,st=4,p=1"), written into
 * hkc_kernel_key_t.variant / .tune.
 */
#ifndef HKC_TUNE_H
#define HKC_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "rtc/rtc.h"

/* ---- launch classes -------------------------------------------------------------------------- */
typedef struct hkc_tune_shape {
  int64_t m, n, k;         /* gemm: the kernel ABI's M, N, K; attention: seq_q, seq_kv, head_dim */
  int64_t batch, heads, kv_heads; /* attention: batch (leading dims flattened), query and kv heads; gemm: 0 */
  int causal;              /* attention */
} hkc_tune_shape_t;

/* Whether a launch of this key on arch (NULL: the host) can be tuned, and its sizes from the
 * launch arguments. 1 (tunable, *out filled), 0 (not). gemm on every target; attention where
 * the registry's variant for the key has model figures (hkc_tile_cfg_t.efficiency > 0:
 * attention_tma on sm_90a), so that the kernels the model cannot rank keep their defaults. */
int hkc_tune_shape_of(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                      hkc_tune_shape_t *out);
/* Whether two launches have the same sizes (every field). */
int hkc_tune_shape_equal(hkc_tune_shape_t a, hkc_tune_shape_t b);
/* The matrix FLOPs of a launch of key with these sizes (gemm 2 M N K; attention 4 B H Sq Skv dh,
 * halved when causal). */
double hkc_tune_shape_flops(const hkc_kernel_key_t *key, hkc_tune_shape_t shape);

/* Every legal configuration for key on a target (arch NULL: the host), over all variants
 * that apply to the key, in a fixed order: the default configuration first, then by
 * variant registry order and each variant's enumeration. Returns the count (<= max). */
int hkc_tune_candidates(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max);
/* Same under kernel options (codegen.h; NULL = the defaults): only the variants and
 * configurations the options allow (hkc_kernel_options_allow, _allow_cfg: split-K through the
 * workspace and stream-K only with gemm_split=on), the first of them the options' registry
 * choice; when that is not the default registry's first, no candidate is the default (each
 * names its variant in the key). hkc_tune_candidates: the defaults, so without those. */
int hkc_tune_candidates_for(const hkc_gpu_arch_t *arch, const hkc_kernel_options_t *options, const hkc_kernel_key_t *key,
                            hkc_tile_cfg_t *out, int max);
#define HKC_TUNE_MAX_CANDIDATES 256 /* largest space: sm_90a gemm (gemm_tma about 130, then the others) */

/* The configuration variant/params names for key on a target: 0 when it is legal (the
 * variant applies to key there and the parameters are canonical and within limits). */
int hkc_tune_lookup_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *variant,
                        const char *params, hkc_tile_cfg_t *out);

/* ---- the analytical model (tune_model.c) --------------------------------------------------- */
typedef struct hkc_model_est {
  double seconds;          /* the estimate; ranks candidates */
  double t_sm;             /* busiest SM/CU: main loops + per-tile overheads */
  double t_mem;            /* memory traffic bound */
  int64_t tiles;           /* C tiles */
  uint32_t per_cu;         /* blocks resident per SM/CU (occupancy) */
  const char *limiter;     /* what binds: "compute", "bandwidth" (L2 -> SM), "latency", "memory" (HBM) */
} hkc_model_est_t;

/* Resident blocks per SM (NVIDIA) or workgroups per CU (AMD) of a configuration with the
 * given registers per thread (compiled or estimated; AMD: VGPRs incl. AGPRs), 0 when it
 * cannot run. */
uint32_t hkc_model_blocks_per_cu(const hkc_gpu_arch_t *arch, const hkc_tile_cfg_t *cfg, uint32_t regs,
                                 uint32_t agprs, uint32_t sgprs);
/* Occupancy floor of the static pruning: a configuration with fewer resident warps/waves
 * per SM/CU than the SM/CU has schedulers (one per SIMD / sub-partition) is dropped. */
int hkc_model_meets_floor(const hkc_gpu_arch_t *arch, const hkc_tile_cfg_t *cfg, uint32_t per_cu);
/* Estimated time of one launch. dtype: the element type; epilogue_tensors: [M, N] tensors the
 * epilogue reads besides C (residual, mul); has_bias. per_cu from hkc_model_blocks_per_cu
 * (>= 1). 0, or -1 for a configuration that cannot run (per_cu 0). */
int hkc_model_estimate(const hkc_gpu_arch_t *arch, const hkc_tile_cfg_t *cfg, hkc_tune_shape_t shape,
                       hk_dtype_t dtype, int epilogue_tensors, int has_bias, uint32_t per_cu,
                       hkc_model_est_t *out);

/* Estimated time of one attention launch (tune_model.c, docs/TUNING.md "Attention"): cfg's
 * bm / bn / bk are the query rows of a work tile, the keys per K/V tile and the head size;
 * shape an attention shape (hkc_tune_shape_of). 0, or -1 for a configuration without model
 * figures (efficiency 0) or that cannot run (per_cu 0). */
int hkc_model_estimate_attention(const hkc_gpu_arch_t *arch, const hkc_tile_cfg_t *cfg, hkc_tune_shape_t shape,
                                 hk_dtype_t dtype, uint32_t per_cu, hkc_model_est_t *out);

/* ---- the tuning database (tune_db.c; grammar in docs/TUNING.md) -------------------------------- */
typedef struct hkc_tune_entry {
  char *target;            /* "sm_90a", "gfx90a", "host-x86_64" */
  int units;               /* SMs / CUs of the target table entry; host: CPU threads */
  char *toolchain;         /* "nvrtc 13.0" */
  char *signature;         /* "gemm bf16 m=4096 n=2304 k=768 bias" */
  char *variant;           /* "gemm_wgmma_ws" */
  char *params;            /* "bn=128,st=4,p=1" */
  double time_us;          /* median measured time */
  const char *file;        /* where it was read (borrowed from the db), for messages */
  int line;
} hkc_tune_entry_t;

typedef struct hkc_tune_db {
  hkc_tune_entry_t *entries;
  size_t n, cap;
  char **files;            /* paths read, in order */
  size_t n_files, cap_files;
  uint64_t hash;           /* over the canonical text of every file read, in order */
} hkc_tune_db_t;

/* Reads one database file and appends its entries (a later file's entry never replaces an
 * earlier one: the first wins). Errors "FILE:LINE: what is wrong (expected ...)" through
 * hkc_error. 0 / -1. */
int hkc_tune_db_load(hkc_tune_db_t *db, const char *path);
/* Same over a buffer; name is used in messages. */
int hkc_tune_db_parse(hkc_tune_db_t *db, const char *name, const char *text, size_t size);
void hkc_tune_db_free(hkc_tune_db_t *db);
/* Adds an entry (copied). For an existing key: replace when `faster` and the new time is
 * smaller (merge), else keep the old one. Returns 1 added, 0 kept the old, 2 replaced, -1 OOM. */
int hkc_tune_db_put(hkc_tune_db_t *db, const hkc_tune_entry_t *entry, int faster);
/* The entry for exactly this key, else one for the same target, units, toolchain and
 * shape whose epilogue differs (the lowest in key order); NULL when none. *out_exact
 * says which. */
const hkc_tune_entry_t *hkc_tune_db_find(const hkc_tune_db_t *db, const char *target, int units,
                                         const char *toolchain, const char *signature, int *out_exact);
/* Canonical text: a header comment, then one line per entry sorted by key. Caller frees. */
char *hkc_tune_db_format(const hkc_tune_db_t *db);
/* Writes the canonical text to path atomically (temporary file + rename). 0 / -1. */
int hkc_tune_db_write(const hkc_tune_db_t *db, const char *path);
/* `hkc tune --merge`: the union of the files; a key in several keeps the fastest entry
 * (the first file's on a tie), each conflict reported on stderr. 0 / -1. */
int hkc_tune_db_merge(const char *const *paths, size_t n, const char *out_path, int quiet);

/* Signature of a launch class: "gemm bf16 m=4096 n=2304 k=768 tb bias act=gelu res mul"
 * (flags only when set, in this order); attention: "attention bf16 b=8 h=32 kvh=8 sq=512
 * skv=512 d=128 causal" (causal only when set). */
void hkc_tune_signature(const hkc_kernel_key_t *key, hkc_tune_shape_t shape, char *out, size_t size);

/* ---- the per-launch choice of a build (tune.c) ------------------------------------------------ */
typedef enum hkc_tune_mode { HKC_TUNE_MODEL = 0, HKC_TUNE_DEFAULT = 1 } hkc_tune_mode_t;
typedef enum hkc_tune_source {
  HKC_TUNE_SRC_DEFAULT = 0,
  HKC_TUNE_SRC_MODEL = 1,
  HKC_TUNE_SRC_DB = 2,
  HKC_TUNE_SRC_OPTION = 3, /* a kernel option (codegen.h) fixed the variant or its configuration */
} hkc_tune_source_t;
const char *hkc_tune_source_name(hkc_tune_source_t source); /* "default" | "model" | "db" | "option" */

typedef struct hkc_tuner hkc_tuner_t;
/* jobs, no_cache, cache_dir: as for the build's compile pool (the model compiles its top
 * candidates to check their real resources). db may be NULL. Borrowed until destroy. */
hkc_tuner_t *hkc_tuner_create(hkc_tune_mode_t mode, const hkc_tune_db_t *db, int verify, int jobs, int no_cache,
                              const char *cache_dir);
void hkc_tuner_destroy(hkc_tuner_t *tuner);
/* The build's kernel options (borrowed until destroy; NULL = the defaults) and the host
 * backend's threads the database keys of the host target use (0: the online CPUs). With
 * options, every GPU launch (tunable or not) first gets the options' choice: "simple" under
 * simple_kernels, a forced configuration (checked by the variant's tune_parse: an illegal
 * one is an error) or the variant a switch selects; the database and the model then choose
 * only among the variants the options allow, and never replace a forced configuration. */
void hkc_tuner_set_options(hkc_tuner_t *tuner, const hkc_kernel_options_t *options, int host_threads);
/* The options' choice for one lowered GPU key (what the tuner does first for each launch;
 * key->variant / tune are reset): 2 the options fixed variant and configuration, 1 they
 * chose the variant (named in the key, its defaults; tuning may still choose its
 * configuration), 0 nothing to do (NULL options or arch: the host), -1 an illegal forced
 * configuration (reported through hkc_error). */
int hkc_tune_apply_options(const hkc_kernel_options_t *o, const char *target, const hkc_gpu_arch_t *arch,
                           hkc_kernel_key_t *key);

/* One launch to choose for. */
typedef struct hkc_tune_launch {
  hkc_kernel_key_t key;    /* in: lowered (variant/tune empty); out: with the choice */
  hkc_tune_shape_t shape;
  int tunable;             /* hkc_tune_shape_of said yes */
  hkc_tune_source_t source;/* out */
} hkc_tune_launch_t;

/* Chooses the configuration of every launch for one target (target: the requested name,
 * "gfx90a:xnack-" / "sm_90a" / "host"; arch NULL for the host). Launches that are not
 * tunable are left alone. Database entries for this target first (checked for legality;
 * an unusable entry is a warning), then the mode. 0 / -1 (reported). */
int hkc_tuner_choose(hkc_tuner_t *tuner, const char *target, const hkc_gpu_arch_t *arch, hkc_tune_launch_t *launches,
                     size_t n);

/* Where the model's candidate compiles are counted (util.h: one phase per target, "tune
 * TARGET"; borrowed until destroy; NULL: not shown). */
void hkc_tuner_set_progress(hkc_tuner_t *tuner, hkc_reporter_t *progress);
/* What the model compiled so far, over every target: candidate kernels (each distinct key
 * once per target); of them from the compile cache (shared_cached: of those, from
 * HKC_CACHE_URL) and failed (dropped); the most compile threads one target's compiles ran on. */
typedef struct hkc_tune_stats {
  size_t compiles, cached, shared_cached, failed;
  int threads;
} hkc_tune_stats_t;
hkc_tune_stats_t hkc_tuner_stats(const hkc_tuner_t *tuner);

/* The build takes the model's compile of a kernel it needs (same target and key) instead
 * of compiling it again: 1 (out_result moved to the caller, source_hash set) or 0. */
int hkc_tuner_take(hkc_tuner_t *tuner, const char *target, hkc_kernel_out_t *kernel, hkc_rtc_result_t *out_result,
                   int *out_cached);

/* Units (SMs/CUs, or host CPU threads: host_threads, else the online CPUs) and toolchain
 * version the database keys use for a target; the toolchain string has no '|' or tab. */
int hkc_tune_units(const hkc_gpu_arch_t *arch, int host_threads);
void hkc_tune_toolchain(const hkc_gpu_arch_t *arch, char *out, size_t size);

/* ---- candidates of a launch class (tune.c; used by the build and by `hkc tune`) ---------------- */
typedef struct hkc_tune_cand {
  hkc_tile_cfg_t cfg;
  hkc_kernel_key_t key;    /* the class's key with this configuration applied (canonical: empty
                              variant/tune for the registry's default configuration) */
  int compiled;            /* the resources below are the toolchain's, else estimates */
  const char *pruned;      /* why it was dropped ("compile", "spills", "registers/shared",
                              "occupancy"), NULL when it survives */
  uint32_t regs, agprs, sgprs, shared;
  uint32_t per_cu;         /* resident blocks per SM/CU */
  hkc_model_est_t est;
} hkc_tune_cand_t;

/* Applies a configuration to a lowered key (canonical form, see hkc_tune_cand_t.key). */
void hkc_tune_apply(const hkc_gpu_arch_t *arch, hkc_kernel_key_t *key, const hkc_tile_cfg_t *cfg);
/* Fills cands (<= HKC_TUNE_MAX_CANDIDATES) for key on a target; estimates resources. */
int hkc_tune_cands(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tune_cand_t *cands, int max);
/* Same under kernel options (hkc_tune_candidates_for). */
int hkc_tune_cands_for(const hkc_gpu_arch_t *arch, const hkc_kernel_options_t *options, const hkc_kernel_key_t *key,
                       hkc_tune_cand_t *cands, int max);
/* Records the compiled resources of a candidate (result of compiling cand->key) and prunes
 * it: failed compile, spills, over the register file / shared memory, occupancy floor. */
void hkc_tune_cand_resources(const hkc_gpu_arch_t *arch, hkc_tune_cand_t *cand, const hkc_compile_item_t *item);
/* Estimates every surviving candidate for a launch and writes their indices into order
 * (best first: time, then less shared memory, fewer threads, enumeration order). Host
 * targets (arch NULL) keep enumeration order. Returns the number ranked. */
int hkc_tune_rank(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tune_shape_t shape, hkc_tune_cand_t *cands,
                  int n, int *order);
/* The choice `hkc build --tune model` makes for a launch, from every candidate's compiled
 * resources (cands as hkc_tune_cand_resources left them): the top `verify` (0 = 3) by
 * estimated resources, ranked again with their compiled ones. Index into cands, or -1. */
int hkc_tune_model_choice(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tune_shape_t shape,
                          const hkc_tune_cand_t *cands, int n, int verify);

#endif /* HKC_TUNE_H */
