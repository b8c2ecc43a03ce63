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

static int kva_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return arch->kind == HK_TARGET_CUDA && arch->wave_size == 32 && key->op == HK_OP_KV_ATTENTION && !hkc_kv_fp8(key) &&
         (key->dtype == HK_DTYPE_F16 || key->dtype == HK_DTYPE_BF16) && key->align >= 8 &&
         (key->head_dim == 64 || key->head_dim == 128) &&
         (!key->rope || (key->append && key->rope_scaling >= HKC_ROPE_SCALING_NONE &&
                         key->rope_scaling <= HKC_ROPE_SCALING_LLAMA3)) &&
         /* a folded append copies its first keys with cp.async before the wait: sm_80+ */
         (!key->append || arch->matrix == HKC_MATRIX_MMA_SYNC || arch->matrix == HKC_MATRIX_WGMMA);
}

static void kva_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  (void)arch;
  snprintf(out, size,
           "#define HK_THREADS %d\n#define HK_KVA_WARPS %d\n#define HK_KVA_GROUP %d\n#define HK_HEAD_DIM %d\n"
           "#define HK_KVA_MAX_SPLIT %d\n#define HK_KVA_MIN_PIECE %d\n#define HK_ROPE_SCALING %d\n",
           KVA_WARPS * 32, KVA_WARPS, KVA_GROUP, key->head_dim, KVA_MAX_SPLIT, KVA_MIN_PIECE, key->rope_scaling);
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
static int64_t kva_split(const hkc_gpu_arch_t *arch, const hkc_arg_t *args, uint32_t n_args) {
  const int64_t tiles = kva_tiles(args, n_args);
  const int64_t max_seq = hkc_variant_arg_i64(args, n_args, HKC_KV_ATTENTION_ARG_MAX_SEQ);
  int64_t split = hkc_variant_ceil_div(2 * (int64_t)(arch->compute_units ? arch->compute_units : 132), tiles);
  const int64_t by_len = max_seq / KVA_MIN_PIECE;
  if (split > by_len) split = by_len;
  if (split > KVA_MAX_SPLIT) split = KVA_MAX_SPLIT;
  return split < 1 ? 1 : split;
}

/* tiles * split blocks: the kernel reads split back as gridDim.x / tiles. */
static void kva_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                       uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)key;
  hkc_variant_launch_1d(kva_tiles(args, n_args) * kva_split(arch, args, n_args), KVA_WARPS * 32, 0, out_grid,
                        out_block, out_shared);
}

/* Always a workspace (the kernel's parameters do not depend on the bucket): KVA_GROUP
 * (head_dim + 2) floats per unit when split > 1, one counter per tile. */
static int kva_workspace(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                         uint32_t n_args, hkc_node_workspace_t *out) {
  const int64_t tiles = kva_tiles(args, n_args), split = kva_split(arch, args, n_args);
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
