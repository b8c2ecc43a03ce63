/* SPDX-License-Identifier: Apache-2.0 */
/* kv_attention_warp (templates/gpu/kv_attention_warp.hip): attention of token rows over a KV
 * cache on NVIDIA targets (warps of 32), f16/bf16, head_dim 64 or 128 with 16-byte rows
 * (align 8). A block of KVA_WARPS warps per (row, kv head, round of KVA_GROUP q heads, piece
 * of the keys) reads each cached key and value once for the whole round: decode steps read
 * the cache at the width of the group (the portable kernel reads it once per q head), and a
 * decode step's few rows split their keys into pieces (flash-decoding) so that every SM
 * streams; prefill rows, many, take one piece each. Other keys (f32, other head dims, AMD)
 * keep the portable kernel, and so does every key under the kernel option kv_warp=off
 * (registry.c). Checked against the portable kernel on the H100 (tests/device/kv_attention_check.py). */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"

#define KVA_WARPS 4      /* 128 threads, three blocks per SM (at most 168 registers): the next launch's
                            blocks fit beside them */
#define KVA_GROUP 4      /* q heads per round (Llama/Mistral 4; Qwen2.5-0.5B 7 and TinyLlama 8 take two
                            rounds, reading their keys twice): 8 would double a lane's q elements and
                            accumulators (32 + 32 registers at 4) */
#define KVA_MAX_SPLIT 32 /* pieces per tile, at most */
#define KVA_MIN_PIECE 64 /* keys per piece, at least (fewer pieces at run time for short contexts) */
#define KVA_BATCH_KEYS 16 /* keys a warp reads at once (head_dim 64: 4 steps of 4; 128: 4 of 2, rounded) */

/* Parameters (the kernel option kv_warp_cfg; no tuning space): "w=W,p=P,s=S" -- warps per block
 * (1, 2, 4 or 8), keys per piece at least (a multiple of 16, 16..1024) and pieces per tile at most
 * (1..64); every one optional, left out of the canonical string at its default. */
static const char *const k_kva_names[] = {"w", "p", "s"};

typedef struct kva_cfg {
  int w, p, s;
} kva_cfg_t;

/* Static shared memory of a block (the template's arrays), bytes. */
static int kva_shared_bytes(const hkc_kernel_key_t *key, const kva_cfg_t *c) {
  int b = c->w * KVA_GROUP * (2 + key->head_dim) * 4 + c->s * KVA_GROUP * 2 * 4 + KVA_GROUP * 4 + 4;
  if (key->append) b += key->head_dim * 4 + 2 * c->w * 4 * 32 * 8 * 2; /* angles; the first batch */
  return b;
}

/* params -> cfg ("" the defaults): the names in order, each optional; -1 when not canonical or
 * not legal for key */
static int kva_parse(const hkc_kernel_key_t *key, const char *params, kva_cfg_t *c) {
  *c = (kva_cfg_t){KVA_WARPS, KVA_MIN_PIECE, KVA_MAX_SPLIT};
  if (params[0]) {
    int vals[3], at = 0;
    const char *p = params;
    for (int j = 0; j < 3 && *p; j++) { /* each name at most once, in order */
      const size_t len = strlen(k_kva_names[j]);
      if (strncmp(p, k_kva_names[j], len) != 0 || p[len] != '=') continue;
      char one[32];
      const char *end = strchr(p, ',');
      const size_t n = end ? (size_t)(end - p) : strlen(p);
      if (n >= sizeof one) return -1;
      memcpy(one, p, n);
      one[n] = '\0';
      if (hkc_tune_params_parse(one, &k_kva_names[j], 1, &vals[j]) != 0) return -1;
      if (j == 0) c->w = vals[j];
      if (j == 1) c->p = vals[j];
      if (j == 2) c->s = vals[j];
      at++;
      p += n + (end ? 1 : 0);
      if (end && !*p) return -1; /* a trailing comma */
    }
    if (*p || !at) return -1;
  }
  if (c->w != 1 && c->w != 2 && c->w != 4 && c->w != 8) return -1;
  if (c->p < 16 || c->p > 1024 || c->p % KVA_BATCH_KEYS) return -1;
  if (c->s < 1 || c->s > 64) return -1;
  return kva_shared_bytes(key, c) <= 48 * 1024 ? 0 : -1; /* static shared memory */
}

/* The canonical string of c: parameters at their defaults left out */
static void kva_format(const kva_cfg_t *c, char *out, size_t size) {
  const int vals[3] = {c->w, c->p, c->s}, defaults[3] = {KVA_WARPS, KVA_MIN_PIECE, KVA_MAX_SPLIT};
  size_t at = 0;
  out[0] = '\0';
  for (int j = 0; j < 3 && at < size; j++) {
    if (vals[j] == defaults[j]) continue;
    const int len = snprintf(out + at, size - at, "%s%s=%d", at ? "," : "", k_kva_names[j], vals[j]);
    at += len > 0 ? (size_t)len : 0;
  }
}

/* The key's configuration: its tune string's when the key names kv_attention_warp, else the defaults */
static kva_cfg_t kva_key_cfg(const hkc_kernel_key_t *key) {
  kva_cfg_t c = {KVA_WARPS, KVA_MIN_PIECE, KVA_MAX_SPLIT};
  if (strncmp(key->variant, "kv_attention_warp", HKC_TUNE_VARIANT_MAX) == 0 && key->tune[0] &&
      kva_parse(key, key->tune, &c) != 0)
    c = (kva_cfg_t){KVA_WARPS, KVA_MIN_PIECE, KVA_MAX_SPLIT};
  return c;
}

static int kva_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) { /* NVIDIA */
  return arch->kind == HK_TARGET_CUDA && arch->wave_size == 32 && key->op == HK_OP_KV_ATTENTION && !hkc_kv_fp8(key) &&
         (key->dtype == HK_DTYPE_F16 || key->dtype == HK_DTYPE_BF16) && key->align >= 8 &&
         (key->head_dim == 64 || key->head_dim == 128) &&
         (!key->rope || (key->append && key->rope_scaling >= HKC_ROPE_SCALING_NONE &&
                         key->rope_scaling <= HKC_ROPE_SCALING_LLAMA3)) &&
         /* a folded append copies its first keys with cp.async before the wait: sm_80+ */
         (!key->append || arch->matrix == HKC_MATRIX_MMA_SYNC || arch->matrix == HKC_MATRIX_WGMMA);
}

/* Lanes of a warp: 32 on NVIDIA, a wave of 64 on AMD CDNA (kv_attention_wave). */
static int kva_lanes(const hkc_gpu_arch_t *arch) {
  return arch->wave_size ? (int)arch->wave_size : arch->kind == HK_TARGET_HIP ? 64 : 32;
}

static void kva_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const kva_cfg_t c = kva_key_cfg(key);
  const int amd = arch->kind == HK_TARGET_HIP;
  /* NVIDIA registers: three blocks of four warps per SM (168 a thread); fewer warps, more blocks.
   * AMD's second bound is waves per SIMD at least: 1, no cap beyond the register file */
  const int min_blocks = amd ? 1 : c.w >= 8 ? 1 : 12 / c.w > 8 ? 8 : 12 / c.w;
  snprintf(out, size,
           "#define HK_THREADS %d\n#define HK_KVA_WARPS %d\n#define HK_KVA_GROUP %d\n#define HK_HEAD_DIM %d\n"
           "#define HK_KVA_MAX_SPLIT %d\n#define HK_KVA_MIN_PIECE %d\n#define HK_ROPE_SCALING %d\n"
           "#define HK_KVA_MIN_BLOCKS %d\n#define HK_KVA_AMD %d\n",
           c.w * kva_lanes(arch), c.w, KVA_GROUP, key->head_dim, c.s, c.p, key->rope_scaling, min_blocks, amd);
}

static int kva_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                          hkc_tile_cfg_t *out) {
  (void)arch;
  kva_cfg_t c;
  if (kva_parse(key, params, &c) != 0) return -1;
  memset(out, 0, sizeof *out);
  snprintf(out->variant, sizeof out->variant, "kv_attention_warp");
  kva_format(&c, out->tune, sizeof out->tune);
  out->threads = 32 * c.w;
  out->shared_bytes = (uint32_t)kva_shared_bytes(key, &c);
  out->is_default = !out->tune[0];
  return 0;
}

/* Tiles: (row, kv head, round of KVA_GROUP q heads). */
static int64_t kva_tiles(const hkc_arg_t *args, uint32_t n_args) {
  const int64_t rows = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_ROWS);
  const int64_t heads = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_HEADS);
  const int64_t kv_heads = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_KV_HEADS);
  if (rows < 1 || kv_heads < 1 || heads < kv_heads) return 1;
  return rows * kv_heads * hkc_variant_ceil_div(heads / kv_heads, KVA_GROUP);
}

/* Pieces per tile: enough blocks for two per SM, each piece at least KVA_MIN_PIECE keys of a
 * full cache. At run time a shorter context uses fewer pieces of at least KVA_MIN_PIECE keys
 * (the kernel's `used`; the other blocks leave at once). A prefill bucket has tiles enough: 1. */
static int64_t kva_split(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                         uint32_t n_args) {
  const kva_cfg_t c = kva_key_cfg(key);
  const int64_t tiles = kva_tiles(args, n_args);
  const int64_t max_seq = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_MAX_SEQ);
  int64_t split = hkc_variant_ceil_div(2 * (int64_t)(arch->compute_units ? arch->compute_units : 132), tiles);
  const int64_t by_len = max_seq / c.p;
  if (split > by_len) split = by_len;
  if (split > c.s) split = c.s;
  return split < 1 ? 1 : split;
}

/* tiles * split blocks: the kernel reads split back as gridDim.x / tiles. */
static void kva_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                       uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  hkc_variant_launch_1d(kva_tiles(args, n_args) * kva_split(arch, key, args, n_args),
                        kva_key_cfg(key).w * kva_lanes(arch), 0, out_grid, out_block, out_shared);
}

/* Always a workspace (the kernel's parameters do not depend on the bucket): KVA_GROUP
 * (head_dim + 2) floats per unit when split > 1, one counter per tile. */
static int kva_workspace(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                         uint32_t n_args, hkc_node_workspace_t *out) {
  const int64_t tiles = kva_tiles(args, n_args), split = kva_split(arch, key, args, n_args);
  out->scratch_bytes =
      split > 1 ? (uint64_t)tiles * (uint64_t)split * KVA_GROUP * (uint64_t)(key->head_dim + 2) * 4u : 4u;
  out->counters = tiles < UINT32_MAX ? (uint32_t)tiles : UINT32_MAX; /* the plan refuses too many */
  return 1;
}

static const char *const kva_includes[] = {"gpu/tile_nv.h", "gpu/rope_freq.h", NULL}; /* the rope of a folded append */

const hkc_variant_t hkc_variant_kv_attention_warp = {
    .name = "kv_attention_warp",
    .template_path = "gpu/kv_attention_warp.hip",
    .includes = kva_includes,
    .applies = kva_applies,
    .defines = kva_defines,
    .launch = kva_launch,
    .workspace = kva_workspace,
    .pdl = 1,  /* the kernel begins with HK_PDL_ENTRY() */
    .rope = 1, /* a kv_append folded in (key.append) brings its rope */
    .tune_parse = kva_tune_parse, /* kv_warp_cfg only: not tuned */
    .params = k_kva_names,
    .n_params = 3,
    .n_required_params = 1, /* w; p and s at their defaults are left out */
    .rules = "w (warps) 1, 2, 4 or 8; p (keys per piece, at least) a multiple of 16, 16..1024; s (pieces per "
             "tile, at most) 1..64; at most 48 KiB of static shared memory",
};

/* kv_attention_wave: the same template on AMD CDNA (waves of 64: a key is still 8 or 16 lanes of
 * 16 bytes, a wave reads 8 or 4 keys a step), the decode steps' kv_attention there -- the
 * portable kernel reads each cached key once per q head, a block per (row, head), no split. The
 * pieces' partials bypass the CU's L1 (non-temporal stores and loads) and meet through an
 * atomicAdd with fences on both sides (split_amd.h). Not the folded append
 * (its first keys come by cp.async, an NVIDIA instruction): those keys keep the portable kernel.
 * Checked in the AMD emulator against a double reference and statically (amd_variants_test);
 * no AMD GPU has run it. */
static int kvw_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return arch->kind == HK_TARGET_HIP && arch->matrix == HKC_MATRIX_MFMA && (arch->wave_size == 0 || arch->wave_size == 64) &&
         key->op == HK_OP_KV_ATTENTION && !hkc_kv_fp8(key) &&
         (key->dtype == HK_DTYPE_F16 || key->dtype == HK_DTYPE_BF16) && key->align >= 8 &&
         (key->head_dim == 64 || key->head_dim == 128) && !key->append && !key->rope;
}

static const char *const kvw_includes[] = {"gpu/split_amd.h", NULL}; /* the split's protocol on AMD */

const hkc_variant_t hkc_variant_kv_attention_wave = {
    .name = "kv_attention_wave",
    .template_path = "gpu/kv_attention_warp.hip",
    .includes = kvw_includes,
    .applies = kvw_applies,
    .defines = kva_defines,
    .launch = kva_launch,
    .workspace = kva_workspace,
};

/* ---- kv_attention_mma (templates/gpu/kv_attention_mma.hip) ----------------------------------
 * The launches of many token rows (prefill steps) on the tensor cores, sm_80 and later: a block
 * of KVM_WARPS warps per (KVM_WARPS * 16 / g4 token rows, kv head, round of up to 4 q heads),
 * g4 = min(heads / kv_heads, 4), each key and value loaded once into shared memory for all of
 * them. Never the registry's pick: unless the kernel option kv_mma=off the tuner names it for the
 * launches of at least HKC_KV_MMA_MIN_ROWS rows (tune.c, kv_mma_choose); the decode steps keep
 * the registry's kernel. No workspace. */
#define KVM_WARPS 4

static int kvm_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return kva_applies(arch, key) && !key->append && (arch->matrix == HKC_MATRIX_MMA_SYNC || arch->matrix == HKC_MATRIX_WGMMA) &&
         strncmp(key->variant, "kv_attention_mma", HKC_TUNE_VARIANT_MAX) == 0;
}

static void kvm_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  (void)arch;
  snprintf(out, size, "#define HK_THREADS %d\n#define HK_HEAD_DIM %d\n#define HK_KVM_BF16 %d\n", KVM_WARPS * 32,
           key->head_dim, key->dtype == HK_DTYPE_BF16);
}

/* Tiles: (group of KVM_WARPS * 16 / g4 token rows, kv head, round of 4 q heads). */
static void kvm_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                       uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)arch, (void)key;
  const int64_t rows = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_ROWS);
  const int64_t heads = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_HEADS);
  const int64_t kv_heads = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_KV_HEADS);
  int64_t tiles = 1;
  if (rows >= 1 && kv_heads >= 1 && heads >= kv_heads) {
    const int64_t group = heads / kv_heads, g4 = group < 4 ? group : 4;
    tiles = hkc_variant_ceil_div(rows, KVM_WARPS * (16 / g4)) * kv_heads * hkc_variant_ceil_div(group, 4);
  }
  hkc_variant_launch_1d(tiles, KVM_WARPS * 32, 0, out_grid, out_block, out_shared);
}

static const char *const kvm_includes[] = {"gpu/tile_nv.h", NULL};

const hkc_variant_t hkc_variant_kv_attention_mma = {
    .name = "kv_attention_mma",
    .template_path = "gpu/kv_attention_mma.hip",
    .includes = kvm_includes,
    .applies = kvm_applies,
    .defines = kvm_defines,
    .launch = kvm_launch,
    .pdl = 1, /* the kernel begins with HK_PDL_ENTRY() */
};
