/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/driver/driver.h -- the build driver (build.c): spec -> fusion -> per target the
 * kernels (tuned), their code and one graph per batch bucket -> the artifact.
 *
 * Uses every stage below it: frontend, lower, codegen, rtc, tune, pack.
 */
#ifndef HKC_DRIVER_H
#define HKC_DRIVER_H

#include <stddef.h>

#include "codegen/codegen.h"

/* ---- the build driver --------------------------------------------------------------- */
typedef struct hkc_build_options {
  const char *spec_path;
  const char *out_path;
  const char *targets;     /* comma-separated; NULL: the spec's `targets` */
  const char *merge_targets; /* comma-separated; NULL: `targets`. The build is one part of
                              `hkc merge`: decisions that depend on the whole target list (dual
                              gemm fusion) are made for these targets, so that the parts equal
                              one build of them all. Must include every target built */
  int compression_level;   /* zstd level; 0 = default */
  int quiet;               /* no summary on stdout */
  int jobs;                /* parallel kernel compiles; 0 = number of cores */
  int no_cache;            /* bypass the compile cache */
  int werror_spills;       /* a kernel that spills to scratch/local memory is an error */
  int fusion;              /* -1: the spec's `fusion:`; else HKC_FUSION_AUTO / HKC_FUSION_NONE */
  int tensor_parallel;     /* ranks to split the graph over (hkc_shard); 0: the spec's `parallel:` */
  const char *cache_dir;   /* NULL: hkc_cache_open's default */
  /* tuning (compiler/tune/tune.h): how kernel parameters are chosen for launches no database
   * entry covers (HKC_TUNE_MODEL, the default, or HKC_TUNE_DEFAULT), and the databases
   * (`--tuning-db`, several allowed: the first that has a launch wins) */
  int tune_mode;
  const char *const *tuning_dbs;
  size_t n_tuning_dbs;
  int tune_verify;         /* model: compiled candidates per launch to check (0 = 3) */
  /* kernel options (codegen.h; NULL = the defaults): recorded in provenance as
   * kernel_options=, applied per launch by the tuner (tune.h hkc_tuner_set_options) */
  const hkc_kernel_options_t *kernel_options;
  int host_threads;        /* host target's threads for tuning-database keys (0: online CPUs) */
  int no_pdl;              /* 1: mark no launch for programmatic dependent launch (HK_NODE_FLAG_PDL),
                              whatever its variant allows; recorded in provenance as pdl=off */
  const uint8_t *sign_seed;/* an Ed25519 secret key (pack.h, hkc_key_load): sign the artifact;
                              NULL: unsigned */
  const char *ptx;         /* CUDA targets that also store their kernels' PTX (docs/FORMAT.md,
                              "PTX"), comma-separated; NULL: the newest NVIDIA target of the
                              build without an arch-specific suffix (sm_90a's PTX runs on sm_90
                              GPUs only); "": none (--no-ptx). Recorded in provenance as ptx= */
  /* stored weights (format 1.4; hkc build --weights): every param of the spec is matched to a
   * tensor of this checkpoint (libhkrt's reader; borrowed, outlives the build) through the name
   * map names[n_weights_names] and stored in the pack; NULL: the pack stores none.
   * weights_label names the file in messages */
  const struct hk_weights *weights;
  const struct hk_weights_name *weights_names;
  size_t n_weights_names;
  const char *weights_label;
  int fusion_report;       /* 1: auto fusion's verdicts, one line per candidate, on stderr */
  int progress;            /* hkc_progress_t (util.h): progress lines on stderr; 0: none */
  struct hkc_build_stats *out_stats; /* NULL, or filled by a build that succeeds */
} hkc_build_options_t;

/* What a build did, beyond the pack itself (hkc build --json reads the rest from the pack). */
typedef struct hkc_build_stats {
  size_t gpu_kernels;     /* GPU kernels of the pack (the same kernel on two targets counts twice)
                             = from_tuning + cached + compiled */
  size_t from_tuning;     /* of them: the tuner's compile of the kernel (counted in tune_*) */
  size_t cached;          /* of them: from the compile cache */
  size_t shared_cached;   /* of those: from the shared cache (HKC_CACHE_URL) */
  size_t compiled;        /* of them: compiled by the build */
  size_t ptx_compiles;    /* PTX compiles (docs/FORMAT.md, "PTX") */
  size_t ptx_cached;
  int threads;            /* threads the build's kernel and PTX compiles ran on (0: none to do) */
  size_t tune_compiles;   /* the tuner's candidate kernels over every target */
  size_t tune_cached;     /* of them: from the compile cache */
  size_t tune_shared_cached; /* of those: from the shared cache */
  size_t tune_failed;     /* of them: did not compile (dropped) */
  int tune_threads;       /* the most threads one target's candidate compiles ran on */
  double seconds;         /* wall time of the whole build */
} hkc_build_stats_t;

/* spec -> IR -> per target: kernels, code, one graph per batch bucket -> artifact.
 * Errors are reported through hkc_error; nothing is written unless every stage
 * succeeds. Returns 0 / -1. */
int hkc_build(const hkc_build_options_t *options);

#endif /* HKC_DRIVER_H */
