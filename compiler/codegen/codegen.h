/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/codegen/codegen.h -- kernel source for each target, and what a target is.
 *
 *   targets.c        the GPU target table (figures per architecture) and occupancy
 *   codegen_host.c   host kernels: one C translation unit from templates/host
 *   codegen_gpu.c    one GPU kernel's source from templates/gpu (HIP dialect for both vendors)
 *   tile_cfg.c       kernel configurations' parameter strings
 *   kernel_options.c kernel options (`hkc build --kernel-option`): parsed, checked, recorded
 *   variants/        the variant registry: every kernel a key can become, per target (variants/variant.h)
 *
 * Uses lower/, frontend/ and util/. Tuning (tune/) chooses among the configurations that
 * codegen and its variants enumerate; codegen never calls tuning.
 */
#ifndef HKC_CODEGEN_H
#define HKC_CODEGEN_H

#include <stddef.h>
#include <stdint.h>

#include "lower/lower.h"

struct hkc_kernel_options; /* below */

/* ---- compiled kernels ------------------------------------------------------------------------ */
typedef struct hkc_kernel_out {
  char name[96];           /* symbol */
  hkc_kernel_key_t key;
  char params[160];        /* human-readable parameters, stored in the pack */
  uint32_t vgprs, agprs, sgprs, shared_bytes, scratch_bytes, wave_size, max_block, occupancy;
  uint64_t source_hash;
  uint64_t code_offset;    /* range of this kernel's code object in hkc_target_out_t.code */
  uint64_t code_size;
  uint64_t ptx_offset;     /* range of its PTX text (NUL included) in hkc_target_out_t.ptx */
  uint64_t ptx_size;
} hkc_kernel_out_t;

/* Host code generation: the full C translation unit for the given kernels (prelude
 * + one function per kernel, named kernels[i].name, and where hkc_host_variants_enabled() each
 * one's AVX2 variant, named kernels[i].name HKC_HOST_VARIANT_SUFFIX). Caller frees. NULL on
 * OOM. */
char *hkc_codegen_host(const hkc_kernel_out_t *kernels, size_t n_kernels);
/* The same with the variants chosen by the caller (0: none). */
char *hkc_codegen_host_variants(const hkc_kernel_out_t *kernels, size_t n_kernels, int variants);
/* Whether host builds carry the AVX2 variants: on x86-64, unless $HKC_HOST_VARIANTS=baseline. */
int hkc_host_variants_enabled(void);
/* The suffix of a kernel's AVX2 variant in a host code object (libhkrt's backend_host.c looks
 * for it). */
#define HKC_HOST_VARIANT_SUFFIX "__avx2"
/* Launch dimensions of a host kernel for the given args (grid.x = independent blocks). */
void hkc_host_launch_dims(const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                          uint32_t out_grid[3], uint32_t out_block[3]);
/* The host target's name for this machine: "host-<arch>" (e.g. host-x86_64). */
const char *hkc_host_target_name(void);

/* ---- GPU targets: the target table ------------------------------------------------------
 * Figures per architecture for occupancy, legality (LDS / shared memory, registers) and
 * rooflines. Each entry cites its source. AMD: per SIMD / CU; NVIDIA: per SM. */
typedef enum hkc_matrix_path {
  HKC_MATRIX_FMA = 0,      /* no matrix cores (gfx1030, anything unknown) */
  HKC_MATRIX_MFMA = 1,     /* CDNA: gfx908, gfx90a, gfx942, gfx950 */
  HKC_MATRIX_MMA_SYNC = 2, /* NVIDIA sm_80+ warp-level mma.sync */
  HKC_MATRIX_WGMMA = 3,    /* NVIDIA sm_90a warpgroup wgmma */
} hkc_matrix_path_t;

typedef struct hkc_gpu_arch {
  const char *name;              /* "gfx90a", "sm_90", "sm_90a" */
  hk_target_kind_t kind;         /* HK_TARGET_HIP or HK_TARGET_CUDA */
  const char *product;           /* the part the figures describe: "MI250X (one GCD)", "H200 SXM" */
  uint32_t wave_size;            /* 64 (CDNA), 32 (RDNA wave32, NVIDIA warps) */
  uint32_t compute_units;        /* CUs / SMs of that product */
  uint32_t simds_per_cu;         /* AMD SIMDs per CU; NVIDIA SM sub-partitions (4) */
  uint32_t max_waves_per_simd;   /* AMD waves per SIMD; NVIDIA warps per SM / simds_per_cu */
  uint32_t vgprs_per_lane;       /* AMD: VGPR file per lane per SIMD (incl. AGPRs where unified);
                                    NVIDIA: 32-bit registers per SM */
  uint32_t vgpr_granule;         /* allocation granule (AMD per lane; NVIDIA per warp) */
  uint32_t max_vgprs_per_thread; /* 512 gfx90a (VGPR+AGPR), 255 NVIDIA */
  uint32_t sgprs_per_simd;       /* AMD; 0 on NVIDIA */
  uint32_t max_sgprs_per_wave;
  uint32_t lds_per_cu;           /* bytes of LDS per CU / shared memory per SM */
  uint32_t max_lds_per_block;    /* bytes a single block may use */
  uint32_t max_threads_per_block;
  uint32_t max_blocks_per_cu;    /* NVIDIA 32 (sm_90); AMD: 0 = limited by waves only */
  hkc_matrix_path_t matrix;
  double hbm_gbps;               /* datasheet peak memory bandwidth, GB/s */
  double matrix_tflops_f16;      /* datasheet dense f16/bf16 matrix rate, TFLOP/s */
  const char *source;            /* where the figures come from */
} hkc_gpu_arch_t;

/* ---- the fusion planner's clock (fusion_model.c) ----------------------------------------------
 * Estimated seconds of one launch of node (a spec node or a fused candidate over spec's
 * tensors) at batch on arch (NULL: the host): launch + max(memory, matrix, issue) + a
 * GEMM's epilogue. Ranks forms of the same work; not a predictor of measured times. */
double hkc_launch_seconds(const struct hkc_gpu_arch *arch, const hkc_spec_t *spec, const hkc_node_t *node,
                          int64_t batch);
/* A planner model over n targets (archs[i] NULL: the host) for hkc_fuse_planned; the arrays
 * are borrowed and must outlive the model. report: where auto's verdicts go (NULL: none). */
void hkc_fuse_model_init(hkc_fuse_model_t *model, const struct hkc_gpu_arch *const *archs, const char *const *names,
                         size_t n, FILE *report);
/* hkc_fuse_planned (mode as hkc_fuse's) for a build of these targets (NULL: the host) under
 * its kernel options (NULL: the defaults): SwiGLU stays two gemms when one of them has no
 * dual gemm kernel (hkc_gpu_dual_gemm_ok), a rope or an rmsnorm stays a node of its own when
 * one has no gemm kernel that takes it in (hkc_gpu_fused_gemm_ok), and auto
 * weighs each step on the GPU targets' clocks (the host's only when it is alone); report as
 * the model's. Then each gemm reading a dequant node's copy gets its dequant_fold_rows (the
 * kernel option gemm_quant; frontend.h), and each kv_attention reading a kv_append's q heads
 * its append_fold_rows (kv_fold). What hkc build and hkc tune both call. 0 / -1
 * (reported). */
int hkc_fuse_for_targets(hkc_spec_t *spec, int mode, const hkc_gpu_arch_t *const *archs, size_t n,
                         const struct hkc_kernel_options *options, FILE *report);

/* The entry for a target name; "gfx90a:xnack-" finds "gfx90a". NULL when unknown. */
const hkc_gpu_arch_t *hkc_gpu_arch_find(const char *name);
const hkc_gpu_arch_t *hkc_gpu_arch_list(size_t *out_count);
/* A GPU part's datasheet figures, for roofline floors on the device a run found (the target
 * table's figures are one part's per architecture: sm_90's are the H200's). */
typedef struct hkc_gpu_part {
  const char *product;     /* "H100 SXM" */
  double hbm_gbps;         /* memory bandwidth, GB/s */
  double matrix_tflops_f16;/* dense f16/bf16 matrix rate, TFLOP/s */
} hkc_gpu_part_t;
/* The part a driver's device name names ("NVIDIA H100 80GB HBM3" -> H100 SXM, "NVIDIA H100
 * PCIe" -> H100 PCIe, "NVIDIA H200" -> H200 SXM); NULL when unknown (and for NULL / ""). */
const hkc_gpu_part_t *hkc_gpu_part_for_device(const char *device_name);
/* Occupancy of a kernel launched with block_threads threads per block: AMD waves per
 * SIMD, NVIDIA blocks per SM (limited by registers, SGPRs, LDS/shared memory, block
 * size and the wave/block caps). out_percent: resident waves/warps over the maximum.
 * out_limiter (may be NULL): "vgprs", "sgprs", "lds", "waves", "blocks". */
uint32_t hkc_occupancy(const hkc_gpu_arch_t *arch, const hkc_kernel_out_t *kernel, uint32_t block_threads,
                       double *out_percent, const char **out_limiter);

/* ---- GPU code generation (templates/gpu/, HIP dialect for both vendors) -------------------
 * One kernel's complete source for a GPU target: the vendor prelude, then the op template
 * specialised by the key, defining `extern "C" __global__ void <kernel->name>(...)` with
 * the parameters of the kernel ABI above (tensor -> pointer, I64 -> long long,
 * F32 -> float). No standard or vendor headers. Caller frees. NULL on OOM. */
char *hkc_codegen_gpu(const hkc_gpu_arch_t *arch, const hkc_kernel_out_t *kernel);
/* Grid, block and dynamic shared memory of a GPU launch for these args. */
void hkc_gpu_launch_dims(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                         uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared);
/* The launch's full argument list: the kernel's variant appends its extra arguments (e.g.
 * HK_ARG_TMAP tensor maps; variants/variant.h, launch_args) after the op ABI's args[0,
 * n_args); returns the new count (<= max_args), n_args when the variant adds none. */
uint32_t hkc_gpu_launch_args(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_arg_t *args,
                             uint32_t n_args, uint32_t max_args);
/* The workspace (scratch bytes and semaphore counters; lower.h) a launch of key with these
 * args (the op ABI's) needs: 1 and *out's scratch_bytes and counters (both >= 1) when the
 * variant's kernel takes them (variants/variant.h, workspace), else 0 with both zero. */
int hkc_gpu_launch_workspace(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                             uint32_t n_args, hkc_node_workspace_t *out);
/* 1 when the launches of key's variant on arch may be programmatic dependent launches (the
 * variant's pdl, variants/variant.h: the kernel waits with griddepcontrol.wait before it
 * touches earlier launches' data), so the build marks them HK_NODE_FLAG_PDL; 0 otherwise,
 * and always 0 on targets other than CUDA. */
int hkc_gpu_launch_pdl(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key);
/* 1 when a target of this architecture (NULL: the host) has a dual gemm kernel (fusion's
 * SwiGLU) that is not the simple one; if any target of a build lacks one, SwiGLU stays two
 * gemms for every target (spec->fusion_no_dual). */
int hkc_gpu_dual_gemm_ok(const hkc_gpu_arch_t *arch);
/* 1 when a target of this architecture (NULL: the host) has a kernel for `key`, a fused gemm
 * of a form only some variants serve (a rope epilogue, a folded rmsnorm: variant.h's rope,
 * norm_a), under the kernel options o (NULL: the defaults): the fusion planner asks it for
 * every candidate of those forms on every target (fusion_model.c). */
/* gemm_skinny serves launches of at most this many rows of A (decode steps; tune.c's
 * skinny_choose), and so folds a dequant into those only. */
#define HKC_GEMM_FEW_ROWS 8
/* ... and by default (gemm_skinny=auto) those of at most this many rows of a 16-bit B (tune.c) */
#define HKC_GEMM_SKINNY_AUTO_ROWS 1
/* gemm_stream stages A (its mb rows, mb the smallest of 1, 2, 4, 8 >= M) in shared memory: it
 * takes gemm_skinny's launches of a 16-bit B whose A fits in this many bytes (tune.c). */
#define HKC_GEMM_STREAM_A_BYTES (64 * 1024)
int hkc_gemm_stream_fits(int64_t m, int64_t k);
/* gemm_skinny's parameters for a launch of key with shape (m, n, k): mb from m, the others
 * from `forced` (gemm_skinny_cfg's string; NULL or "": the shape's defaults). 0, or -1 when
 * forced is not legal for key. variant_skinny_nv.c. */
int hkc_gemm_skinny_params(const hkc_kernel_key_t *key, const char *forced, int64_t m, int64_t n, int64_t k, char *out,
                           size_t size);
/* gemm_skinny_amd's parameters for a launch of m rows (variant_skinny_amd.c): its defaults at mb =
 * the smallest of 1, 2, 4, 8 that is >= m (gemm_skinny_cfg is gemm_skinny's alone). 0 / -1. */
int hkc_gemm_skinny_amd_params(int64_t m, char *out, size_t size);
int hkc_gpu_fused_gemm_ok(const hkc_gpu_arch_t *arch, const struct hkc_kernel_options *o, const hkc_kernel_key_t *key);
/* The token rows from which a kv_attention launch runs kv_attention_mma on NVIDIA (sm_80+):
 * a prefill bucket; below, a decode step's rows, one per sequence, keep kv_attention_warp. */
#define HKC_KV_MMA_MIN_ROWS 64

/* ---- kernel options (kernel_options.c) ------------------------------------------------------
 * Inputs that change which GPU kernels a build makes, beyond the spec and the tuning: variant
 * switches and forced configurations for experiments and A/B runs. A build gets them from its
 * options (the CLI maps `--kernel-option NAME=VALUE` and the documented HKC_* environment
 * variables onto them); no compiler stage reads the environment. They act through the kernel
 * key only: tune/ turns them into each launch's key->variant / key->tune (legality-checked by
 * the variant's tune_parse), so every option that changes a kernel's code changes its name
 * (the tuning hash) and its source, hence its compile-cache key; they are recorded in the
 * pack's provenance (`kernel_options=`). Default-initialised ({0}) options change nothing. */
typedef enum hkc_switch { HKC_SWITCH_AUTO = 0, HKC_SWITCH_OFF = 1, HKC_SWITCH_ON = 2 } hkc_switch_t;

/* Forced configurations, one per option; the string is the variant's canonical parameter
 * string (its tune_parse syntax), "" = not forced. */
typedef enum hkc_kopt_cfg {
  HKC_KOPT_GEMM_MMA_CFG,    /* gemm_mma */
  HKC_KOPT_GEMM_WGMMA_CFG,  /* gemm_wgmma */
  HKC_KOPT_GEMM_WS_CFG,     /* gemm_wgmma_ws */
  HKC_KOPT_GEMM_TMA_CFG,    /* gemm_tma */
  HKC_KOPT_ATTN_MMA_CFG,    /* attention_mma */
  HKC_KOPT_ATTN_WGMMA_CFG,  /* attention_wgmma */
  HKC_KOPT_ATTN_TMA_CFG,    /* attention_tma */
  HKC_KOPT_ROWS_CFG,        /* rows_vec16, every dtype */
  HKC_KOPT_ROWS_CFG_F32,    /* rows_vec16, f32 keys (wins over rows_cfg) */
  HKC_KOPT_ROWS_CFG_16,     /* rows_vec16, f16/bf16 keys (wins over rows_cfg) */
  HKC_KOPT_EW_CFG,          /* elementwise_vec16 */
  HKC_KOPT_GEMM_MFMA_CFG,   /* gemm_mfma */
  HKC_KOPT_GEMM_MFMA_PP_CFG, /* gemm_mfma_pp */
  HKC_KOPT_GEMM_SKINNY_CFG, /* gemm_skinny (all but mb, which each launch's M sets) */
  HKC_KOPT_KV_WARP_CFG,     /* kv_attention_warp */
  HKC_KOPT_N_CFG
} hkc_kopt_cfg_t;

typedef struct hkc_kernel_options {
  int simple_kernels;       /* 1: every GPU kernel uses its simple template (no variants) */
  hkc_switch_t gemm_tma;    /* gemm_tma on sm_90a: auto/on = used, off = gemm_wgmma_ws (or gemm_ws's choice) */
  hkc_switch_t gemm_ws;     /* gemm_wgmma_ws on sm_90a: auto/on = used, off = gemm_wgmma instead */
  hkc_switch_t attn_wgmma;  /* attention_wgmma: auto = head_dim 128 only, on = 64 too, off = never */
  hkc_switch_t attn_tma;    /* attention_tma on sm_90a: on = used (alone in the tuner's space); auto/off =
                               attention_wgmma / attention_mma (opt-in until proven on the H200) */
  hkc_switch_t gemm_mfma_pp; /* gemm_mfma_pp on CDNA: auto = tuning may choose it, on = instead of
                                gemm_mfma, off = never */
  hkc_switch_t attn_mfma_pp; /* attention_mfma_pp on CDNA: on = instead of attention_mfma where it
                                serves the key; auto/off = attention_mfma (unmeasured) */
  hkc_switch_t gemm_split;  /* split-K through the launch workspace (gemm_mma sk > 1) and stream-K
                               (gemm_tma skm > 0): on = in the tuner's space; auto/off = not (opt-in
                               until proven on the H200); forced configurations apply either way */
  hkc_switch_t gemm_rope;   /* rope epilogues of GEMMs (fusion): auto/on = where every target has one,
                               off = never (every rope a kernel of its own) */
  hkc_switch_t gemm_norm;   /* rmsnorm folded into the GEMM reading it (fusion), where every target has
                               such a kernel: auto = where the clock says it pays, on = always,
                               off = never */
  hkc_switch_t gemm_ln;     /* a layernorm or rmsnorm in the epilogue of the GEMM whose output it reads (fusion),
                               where every target has such a kernel: auto = where the clock says it
                               pays, on = always, off = never */
  hkc_switch_t gemm_skinny; /* gemm_skinny on sm_90a (few-row GEMMs streaming B): auto/on = the launches
                               of M <= 8 it serves; off = never */
  hkc_switch_t gemm_stream; /* gemm_stream in gemm_skinny's place for a 16-bit B (B through the bulk copy
                               engine into shared memory, the tensor cores): on = yes; auto/off =
                               gemm_skinny (measured slower on the whole, 2026-12-07) */
  hkc_switch_t gemm_quant;  /* gemms read 8-bit B themselves (dequant folded in): on = wherever every target
                               has such a kernel, auto = host-only builds, off = never */
  hkc_switch_t gemm_fp8;    /* gemms of fp8_e4m3 weights multiply in FP8 (A quantized per row): on = where
                               every target has such a kernel (the host), auto/off = weight-only */
  hkc_switch_t kv_warp;     /* kv_attention_warp on NVIDIA (split over the keys): auto/on = where it serves
                               the key; off = the portable kv_attention */
  hkc_switch_t kv_mma;      /* kv_attention_mma for the kv_attention launches of >= HKC_KV_MMA_MIN_ROWS
                               token rows (NVIDIA sm_80+): auto/on = where it serves; off = never */
  hkc_switch_t kv_fold;     /* a kv_attention does the kv_append before it in the launches of one row:
                               on = where every target has such a kernel, auto = host-only builds,
                               off = never */
  int ew_exact_act;         /* 1: 16-bit gelu/silu/ewchain through erff/expf (elementwise_vec16 x=1) */
  int attn_kvs;             /* > 0: attention through attention_mma with this many KV pieces (split-KV;
                               1: unsplit) wherever attention_mma serves the key -- on sm_90a instead of
                               attention_tma / attention_wgmma; 0: the model / tuning decides */
  char cfg[HKC_KOPT_N_CFG][HKC_TUNE_MAX];
} hkc_kernel_options_t;

/* Sets option `name` from its text value: booleans 0/1 (also off/on, false/true), switches
 * auto/off/on (also 0/1), configurations in the variant's canonical form ("bn=128,st=5,p=0")
 * or the documented positional form of the environment variable ("128,5,0"), stored
 * canonical after a syntax check (names, integers; per-target legality is checked where the
 * option is applied, by the variant's tune_parse). 0, or -1 with a message naming the option
 * and what was expected in err. */
int hkc_kernel_options_set(hkc_kernel_options_t *o, const char *name, const char *value, char *err, size_t err_size);
/* Same with "NAME=VALUE". */
int hkc_kernel_options_set_arg(hkc_kernel_options_t *o, const char *arg, char *err, size_t err_size);
/* The documented environment variable of each option, for the CLI to map: the i-th option's
 * name, env variable and a one-line help; NULL name past the end. */
int hkc_kernel_options_describe(size_t i, const char **out_name, const char **out_env, const char **out_help);
/* Canonical text of the non-default options, "name=value" joined by ';' in table order,
 * "none" when all are defaults (the provenance value). */
void hkc_kernel_options_format(const hkc_kernel_options_t *o, char *out, size_t size);
int hkc_kernel_options_is_default(const hkc_kernel_options_t *o);

/* ---- kernel configurations (tile_cfg.c; the host GEMM's in codegen_host.c) ---------------------
 * One configuration of a tunable kernel and the figures the static pruning and the model
 * need. The GPU variants (variants/variant.h tune_space / tune_parse) and the host GEMM
 * enumerate and parse them; tune/ ranks and chooses. */
typedef struct hkc_tile_cfg {
  char variant[HKC_TUNE_VARIANT_MAX]; /* "gemm_wgmma_ws", "host_gemm" */
  char tune[HKC_TUNE_MAX];            /* canonical parameters ("bn=256,st=3,p=1") */
  int bm, bn, bk;          /* C tile of a block and its K step */
  int threads;             /* per block */
  int inflight;            /* k tiles a block has in flight ahead of the one it multiplies (>= 1) */
  int persistent;          /* grid = min(tiles, compute units); a block's next tile loads while it
                              finishes the current one */
  int split_k;             /* > 1: each tile's K is split over this many blocks, whose f32 partial sums
                              one block adds up before the epilogue; 0 or 1: none */
  int split_global;        /* split_k's partial sums go through the launch's scratch in global memory
                              (each block stores its partial, the last to arrive on the tile's counter
                              reads them all) rather than a cluster's distributed shared memory */
  int stream_k;            /* > 0: stream-K, a persistent grid whose blocks take near-equal ranges of
                              every tile's k steps, at least this many each (split tiles reduced as
                              split_global's are); 0: none */
  int split_kv;            /* attention_mma's family (the model's mma.sync attention): >= 1 pieces per
                              (batch, head, query tile), each over a contiguous range of its key
                              tiles, merged through the launch's scratch by the last (1: unsplit);
                              0: another attention kernel (attention_tma's model) */
  int gqa_pack;            /* attention_mma's gp: a query tile holds the query heads that share a kv
                              head (their K/V read once per tile); 0: one query head per tile */
  uint32_t shared_bytes;   /* static + dynamic shared memory / LDS per block */
  uint32_t regs;           /* registers per thread, estimated before compiling (accumulators,
                              fragments, addressing); the compiled count replaces it */
  double efficiency;       /* fraction of the per-SM/CU matrix peak the kernel reaches on full,
                              compute-bound tiles (each variant cites where its number is from) */
  int is_default;          /* the configuration `--tune default` uses */
} hkc_tile_cfg_t;

/* Parses a parameter string "a=1,b=2" whose names are exactly names[0..n) in this order,
 * each value a decimal integer in [0, 1 << 20]. 0 / -1. */
int hkc_tune_params_parse(const char *params, const char *const *names, int n, int *out_values);

/* Host GEMM (templates/host/gemm.c, variant name "host_gemm", params "bm=16,bn=256,bk=32"):
 * the space (default first) and one configuration; codegen_host.c. Same contracts as the
 * GPU variants' hooks; the registry's host_gemm entry (variants/variant_host.c) serves them. */
int hkc_host_tune_space(const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max);
int hkc_host_tune_parse(const hkc_kernel_key_t *key, const char *params, hkc_tile_cfg_t *out);

#endif /* HKC_CODEGEN_H */
