/* SPDX-License-Identifier: Apache-2.0 */
/* Variant "attention_mma": flash-attention-2 style forward on NVIDIA tensor cores
 * (templates/gpu/attention_mma.hip over gpu/tile_nv.h): mma.sync m16n8k16 with f32
 * accumulation, cp.async double-buffered K/V tiles in XOR-swizzled shared memory, online
 * softmax in registers. Serves attention keys in f16/bf16 with align 8 and head_dim 64
 * or 128 on CUDA archs with sm_80+ matrix paths (sm_80, sm_90, sm_90a: mma.sync runs on
 * all three). Everything else keeps the simple kernel (templates/gpu/attention.hip).
 *
 * Tiling (the tuner's knobs; one table here, emitted as macros, read back by launch()):
 *   warps    HK_ATTN_WARPS; each owns 16 query rows: a block is BQ = 16 * warps rows of
 *            one (batch, head)
 *   bkv      keys per K/V tile (a multiple of 16)
 *   minb     __launch_bounds__ minimum blocks per SM (caps registers at 64K/(threads*minb))
 *   kvs      split-KV (flash-decoding): each (batch, head, query tile) in kvs pieces over
 *            contiguous ranges of its key tiles, partial O and row statistics in the launch's
 *            scratch, the last piece merges them (templates/gpu/attention_mma.hip); 1: none
 *   gp       grouped-query row packing: a tile holds the queries of the query heads that share a
 *            kv head (templates/gpu/attention_gp.h), so each K/V tile loaded serves the group
 *            (decode steps: 4 rows of one tile instead of 4 tiles of one row); 0: one head per tile
 * Dynamic shared memory: Q [BQ][dh] + 2 stages of K and of V [bkv][dh], f16/bf16. */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"

/* the packed tiles' geometry, as the kernel has it */
#define HK_GP_FN static inline
#include "gpu/attention_gp.h"

typedef struct attn_cfg {
  int warps, bkv, minb, kvs, gp;
} attn_cfg_t;

/* dh 64: 128-row tiles (8 warps), 48 KiB, two blocks per SM on sm_90 (registers capped
 * at 128; sm_80's ptxas needs a few more, so one there);
 * dh 128 on sm_90/sm_90a: 64-row tiles (4 warps), 80 KiB, two blocks per SM (measured on
 * the H200, batch 8 x 16 heads, seq 4096: 4,64,2 258 TFLOP/s full / 246 causal against
 * 238 / 229 for 8,64,1); sm_80 keeps 128-row tiles, 96 KiB, one block per SM.
 * params "w=W,kv=K,mb=M[,kvs=S][,gp=1]" (key->tune; the kernel options attn_mma_cfg and attn_kvs
 * force one): warps 4 or 8, bkv 32/64/128 as the template's checks allow, minb 1..4, kvs 1..16
 * (named only when > 1), gp 0/1 (named only when 1), so the configurations without them keep
 * their strings and kernel names. */
#define ATTN_MAX_KVS 16 /* pieces per tile: beyond, the merge's reads outweigh the pieces' key tiles */
static int sm_number(const hkc_gpu_arch_t *arch) {
  int cc = 0;
  return arch->name && sscanf(arch->name, "sm_%d", &cc) == 1 ? cc : 0;
}

static attn_cfg_t attn_default(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  /* sm_80's ptxas needs a few more registers than 128 for dh 64 (it spilled 20 bytes); so
   * does sm_90's with the masked ABI (lengths: 12 bytes): both take one block per SM there */
  const int sm90 = sm_number(arch) >= 90;
  const int masked = key->has_lengths || key->has_mask;
  return key->head_dim == 64 ? (attn_cfg_t){.warps = 8, .bkv = 64, .minb = sm90 && !masked ? 2 : 1, .kvs = 1, .gp = 0}
         : sm90              ? (attn_cfg_t){.warps = 4, .bkv = 64, .minb = 2, .kvs = 1, .gp = 0}
                             : (attn_cfg_t){.warps = 8, .bkv = 64, .minb = 1, .kvs = 1, .gp = 0};
}

/* The tile of the split configurations in the space (and of attn_kvs=N): 64 query rows (a
 * decode step has one to 64), 64 keys per tile, two blocks per SM (40 / 80 KiB of shared
 * memory at head_dim 64 / 128; no register cap below 256). */
static const attn_cfg_t k_attn_split_tile = {.warps = 4, .bkv = 64, .minb = 2, .kvs = 1, .gp = 0};

static uint32_t attn_smem(const hkc_kernel_key_t *key, const attn_cfg_t *c) {
  return (uint32_t)(16 * c->warps * key->head_dim * 2 + 4 * c->bkv * key->head_dim * 2);
}

static const char *const k_attn_names[] = {"w", "kv", "mb", "kvs", "gp"};
static const char *const k_attn_names_gp[] = {"w", "kv", "mb", "gp"}; /* kvs 1 with gp */
#define ATTN_NAMES_NO_KVS 3 /* the string without kvs and gp */

/* kvs > 1 needs 160 registers or more (the partial stores beside O: ptxas 13.0 spills 96 bytes
 * at dh 64 under the 128 of 8 warps x 2 blocks): warps x minb <= 8; so does gp (its per-row
 * indices and mask pointers beside O). */
static int attn_legal(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const attn_cfg_t *c) {
  return (c->warps == 4 || c->warps == 8) && (c->bkv == 32 || c->bkv == 64 || c->bkv == 128) && c->minb >= 1 &&
         c->minb <= 4 && attn_smem(key, c) <= arch->max_lds_per_block && c->kvs >= 1 && c->kvs <= ATTN_MAX_KVS &&
         (c->kvs == 1 || c->warps * c->minb <= 8) && (c->gp == 0 || (c->gp == 1 && c->warps * c->minb <= 8));
}

/* params -> c (not checked for legality): w,kv,mb[,kvs][,gp] (kvs 1, gp 0 when left out). 0 / -1. */
static int attn_parse(const char *params, attn_cfg_t *c) {
  int v[5] = {0, 0, 0, 1, 0}, w[4] = {0, 0, 0, 0};
  if (hkc_tune_params_parse(params, k_attn_names_gp, 4, w) == 0) {
    v[0] = w[0], v[1] = w[1], v[2] = w[2], v[4] = w[3];
  } else if (hkc_tune_params_parse(params, k_attn_names, 5, v) != 0 &&
             hkc_tune_params_parse(params, k_attn_names, 4, v) != 0 &&
             hkc_tune_params_parse(params, k_attn_names, ATTN_NAMES_NO_KVS, v) != 0) {
    return -1;
  }
  *c = (attn_cfg_t){.warps = v[0], .bkv = v[1], .minb = v[2], .kvs = v[3], .gp = v[4]};
  return 0;
}

/* The variant's own parameters of a key: key->tune when key->variant names it. */
static const char *tuned_params(const char *variant, const hkc_kernel_key_t *key) {
  return key->variant[0] && strncmp(key->variant, variant, HKC_TUNE_VARIANT_MAX) == 0 ? key->tune : NULL;
}

static attn_cfg_t attn_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  attn_cfg_t c = attn_default(arch, key), e;
  const char *params = tuned_params("attention_mma", key);
  if (params && params[0] && attn_parse(params, &e) == 0 && attn_legal(arch, key, &e)) c = e;
  return c;
}

/* Model efficiency of attention_mma (fraction of the SM's matrix peak on long unmasked rows),
 * measured on the H200 (docs/BENCHMARKS.md): 236 TFLOP/s at head_dim 64 (the `old` kernel of
 * bar_s4096_d64_full, 2329 us) and 258 at 128 (4,64,2, batch 8 x 16 heads, seq 4096) of 989:
 * 0.25. Only the default tile and the split configurations carry it (the other tiles stay for
 * the kernel option, unmodelled), and on sm_90a, where attention_tma serves the unmasked keys
 * and is 1.5-2x faster, only the split ones: there attention_mma competes where splitting the
 * keys fills the SMs that attention_tma's few work tiles leave idle. */
static double attn_efficiency(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const attn_cfg_t *c) {
  const attn_cfg_t d = attn_default(arch, key);
  const int tile_default = c->warps == d.warps && c->bkv == d.bkv && c->minb == d.minb;
  const int tile_split = c->warps == k_attn_split_tile.warps && c->bkv == k_attn_split_tile.bkv &&
                         c->minb == k_attn_split_tile.minb;
  if (c->kvs > 1 || c->gp) return tile_split || tile_default ? 0.25 : 0.0;
  const int tma_serves = arch->matrix == HKC_MATRIX_WGMMA && !key->has_lengths && !key->has_mask;
  return tile_default && !tma_serves ? 0.25 : 0.0;
}

/* Tile figures (no model for attention yet: threads and shared memory only). */
static void attn_tile(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const attn_cfg_t *c, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "attention_mma");
  const int len = snprintf(t->tune, sizeof t->tune, "w=%d,kv=%d,mb=%d", c->warps, c->bkv, c->minb);
  if (c->kvs > 1 && len > 0) snprintf(t->tune + len, sizeof t->tune - (size_t)len, ",kvs=%d", c->kvs);
  if (c->gp) snprintf(t->tune + strlen(t->tune), sizeof t->tune - strlen(t->tune), ",gp=1");
  t->bm = 16 * c->warps;
  t->bn = c->bkv;
  t->bk = key->head_dim;
  t->threads = 32 * c->warps;
  t->inflight = 1;
  t->split_kv = c->kvs;
  t->gqa_pack = c->gp;
  t->shared_bytes = attn_smem(key, c);
  /* registers: O (dh/2), S (kv/2), Q's fragments (dh/4) and 80 more (ptxas 13.0: 166 at dh 64, 220
   * at 128 for the split tile), within __launch_bounds__'s cap */
  const uint32_t cap = (uint32_t)(65536 / (t->threads * c->minb) / 8 * 8);
  t->regs = (uint32_t)(key->head_dim / 2 + c->bkv / 2 + key->head_dim / 4 + 80);
  if (t->regs > cap) t->regs = cap;
  if (t->regs > 255) t->regs = 255;
  t->efficiency = attn_efficiency(arch, key, c);
  const attn_cfg_t d = attn_default(arch, key);
  t->is_default = d.warps == c->warps && d.bkv == c->bkv && d.minb == c->minb && d.kvs == c->kvs && d.gp == c->gp;
}

static int attn_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                           hkc_tile_cfg_t *out) {
  attn_cfg_t c = attn_default(arch, key);
  if (params && params[0] && attn_parse(params, &c) != 0) return -1;
  if (!attn_legal(arch, key, &c)) return -1;
  attn_tile(arch, key, &c, out);
  return 0;
}

/* The space (default first): the tiles (warps 8 / 4, 64 / 32 / 128 keys, one or two blocks
 * per SM), then split-KV 2, 4, 8 and 16 on the split tile (k_attn_split_tile) and, where it
 * differs, on the default tile; then grouped-query row packing (gp) on the split tile, unsplit
 * and split 2..16 (the model ranks it only where heads share kv heads). */
static int attn_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  static const int warps[] = {8, 4}, bkvs[] = {64, 32, 128};
  int n = 0;
  if (max > 0 && attn_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (size_t i = 0; i < 2; i++)
    for (size_t j = 0; j < 3; j++)
      for (int mb = 1; mb <= 2; mb++) {
        const attn_cfg_t c = {.warps = warps[i], .bkv = bkvs[j], .minb = mb, .kvs = 1};
        if (!attn_legal(arch, key, &c) || n >= max) continue;
        attn_tile(arch, key, &c, &out[n]);
        if (!out[n].is_default) n++;
      }
  const attn_cfg_t d = attn_default(arch, key);
  const int same = d.warps == k_attn_split_tile.warps && d.bkv == k_attn_split_tile.bkv &&
                   d.minb == k_attn_split_tile.minb;
  for (int tile = 0; tile < (same ? 1 : 2); tile++)
    for (int kvs = 2; kvs <= ATTN_MAX_KVS; kvs *= 2) {
      attn_cfg_t c = tile == 0 ? k_attn_split_tile : d;
      c.kvs = kvs;
      if (!attn_legal(arch, key, &c) || n >= max) continue;
      attn_tile(arch, key, &c, &out[n++]);
    }
  for (int kvs = 1; kvs <= ATTN_MAX_KVS; kvs *= 2) {
    attn_cfg_t c = k_attn_split_tile;
    c.kvs = kvs;
    c.gp = 1;
    if (!attn_legal(arch, key, &c) || n >= max) continue;
    attn_tile(arch, key, &c, &out[n++]);
  }
  return n;
}


static int attn_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  if (arch->kind != HK_TARGET_CUDA || sm_number(arch) < 80 /* cp.async, bf16 mma.sync */) return 0;
  if (arch->matrix != HKC_MATRIX_MMA_SYNC && arch->matrix != HKC_MATRIX_WGMMA) return 0;
  if (key->op != HK_OP_ATTENTION || (key->dtype != HK_DTYPE_F16 && key->dtype != HK_DTYPE_BF16)) return 0;
  if (key->align != 8 || (key->head_dim != 64 && key->head_dim != 128)) return 0;
  const attn_cfg_t c = attn_cfg(arch, key); /* the masked ABI (lengths, mask) is served */
  return attn_smem(key, &c) <= arch->max_lds_per_block;
}

static void attn_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const attn_cfg_t c = attn_cfg(arch, key);
  const size_t len = strlen(out);
  snprintf(out + len, size - len,
           "#define HK_THREADS %d\n#define HK_ATTN_WARPS %d\n#define HK_ATTN_BQ %d\n#define HK_ATTN_BKV %d\n"
           "#define HK_ATTN_MINB %d\n#define HK_DH %d\n#define HK_ATTN_BF16 %d\n#define HK_ATTN_SMEM %u\n"
           "#define HK_ATTN_KVS %d\n#define HK_ATTN_GP %d\n",
           32 * c.warps, c.warps, 16 * c.warps, c.bkv, c.minb, key->head_dim, key->dtype == HK_DTYPE_BF16 ? 1 : 0,
           attn_smem(key, &c), c.kvs, c.gp);
}

/* (batch, head, query tile) tiles of a launch; packed (gp): (batch, kv head, head chunk, query
 * tile), attention_gp.h. */
static int64_t attn_tiles(const attn_cfg_t *c, const hkc_arg_t *args, uint32_t n_args) {
  if (c->gp)
    return hk_attn_gp_tiles(hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH),
                            hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS),
                            hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_KV_HEADS),
                            hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q), 16 * c->warps);
  return hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH) *
         hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS) *
         hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q), 16 * c->warps);
}

/* One block per (batch, head, query tile) -- and KV piece: kvs per tile --, 1-D grid clamped to
 * 2^31 - 1 (the kernel strides over the rest). */
static void attn_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                        uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const attn_cfg_t c = attn_cfg(arch, key);
  hkc_variant_launch_1d(attn_tiles(&c, args, n_args) * c.kvs, (uint32_t)(32 * c.warps), attn_smem(key, &c), out_grid,
                        out_block, out_shared);
}

/* Split-KV's workspace: per (batch, head, piece, query row) dh + 2 floats (O, m, l), one arrival
 * counter per tile. */
static int attn_workspace(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                          uint32_t n_args, hkc_node_workspace_t *out) {
  const attn_cfg_t c = attn_cfg(arch, key);
  if (c.kvs == 1) return 0;
  const int64_t tiles = attn_tiles(&c, args, n_args);
  const int64_t rows = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH) *
                       hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS) *
                       hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q);
  out->scratch_bytes = (uint64_t)(rows > 0 ? rows : 1) * (uint64_t)c.kvs * (uint64_t)(key->head_dim + 2) * 4u;
  out->counters = tiles > 0 && tiles < UINT32_MAX ? (uint32_t)tiles : UINT32_MAX; /* the plan refuses too many */
  return 1;
}

static const char *const attn_includes[] = {"gpu/tile_nv.h", "gpu/attention_gp.h", NULL};

const hkc_variant_t hkc_variant_attention_mma = {
    .name = "attention_mma",
    .template_path = "gpu/attention_mma.hip",
    .includes = attn_includes,
    .applies = attn_applies,
    .defines = attn_defines,
    .launch = attn_launch,
    .workspace = attn_workspace,
    .tune_space = attn_tune_space,
    .tune_parse = attn_tune_parse,
    .params = k_attn_names,
    .n_params = 5,
    .n_required_params = ATTN_NAMES_NO_KVS,
    .rules = "w (warps) 4 or 8; kv 32, 64 or 128; mb 1..4; (16 w + 4 kv) head_dim 2 bytes of shared memory "
             "within the block limit; kvs 1..16 (> 1: split-KV, kvs pieces per query tile, batch heads seq_q kvs "
             "(head_dim + 2) f32 in the workspace; w mb <= 8); gp 0 or 1 (1: the query heads of a kv head share "
             "a tile; w mb <= 8)",
};

/* ---- attention_wgmma (sm_90a, HKC_MATRIX_WGMMA) -------------------------------------------
 * templates/gpu/attention_wgmma.hip: wgmma for S = Q K^T (both operands from swizzled
 * shared memory) and O += P V (P from registers), 64 query rows per warpgroup.
 *   wgs   warpgroups per block (1..3): BQ = 64 * wgs query rows, 128 * wgs threads
 *   bkv   keys per K/V tile (64 or 128)
 *   minb  __launch_bounds__ minimum blocks per SM
 * Shared: Q [BQ][dh] + 2 stages of K and V [bkv][dh] + 1 KiB to align the base to 1024.
 * Defaults (unmeasured; the largest tiles ptxas 13.0 fits without spilling): dh 128: 2
 * warpgroups, 64 keys (228 registers, 97 KiB); dh 64: 3 warpgroups, 64 keys (154
 * registers, 57 KiB). Spill-free sweeps: dh 128 "2,64,1"; dh 64 "2,64,1", "3,64,1",
 * "2,128,1" (223 registers), "1,128,2" (238). Spilling (valid but slow): dh 128 with 128
 * keys or 3 warpgroups, dh 64 "3,128,1", and anything with minb 2 at 256 threads.
 * params "wg=W,kv=K,mb=M" (key->tune; the kernel option attn_wgmma_cfg forces one). Which
 * keys it serves by default: registry.c (head_dim 128; the option attn_wgmma). */
typedef struct attn_wg_cfg {
  int wgs, bkv, minb;
} attn_wg_cfg_t;

static uint32_t attn_wg_smem(const hkc_kernel_key_t *key, const attn_wg_cfg_t *c) {
  return (uint32_t)(64 * c->wgs * key->head_dim * 2 + 4 * c->bkv * key->head_dim * 2 + 1024);
}

static attn_wg_cfg_t attn_wg_default(const hkc_kernel_key_t *key) {
  return key->head_dim == 128 ? (attn_wg_cfg_t){.wgs = 2, .bkv = 64, .minb = 1}
                              : (attn_wg_cfg_t){.wgs = 3, .bkv = 64, .minb = 1};
}

static const char *const k_attn_wg_names[] = {"wg", "kv", "mb"};

static int attn_wg_legal(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const attn_wg_cfg_t *c) {
  return c->wgs >= 1 && c->wgs <= 3 && (c->bkv == 64 || c->bkv == 128) && c->minb >= 1 && c->minb <= 2 &&
         (uint64_t)attn_wg_smem(key, c) * (uint64_t)c->minb <= arch->max_lds_per_block;
}

static attn_wg_cfg_t attn_wg_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  attn_wg_cfg_t c = attn_wg_default(key);
  const char *params = tuned_params("attention_wgmma", key);
  int v[3];
  if (params && params[0] && hkc_tune_params_parse(params, k_attn_wg_names, 3, v) == 0) {
    const attn_wg_cfg_t e = {.wgs = v[0], .bkv = v[1], .minb = v[2]};
    if (attn_wg_legal(arch, key, &e)) c = e;
  }
  return c;
}

static void attn_wg_tile(const hkc_kernel_key_t *key, const attn_wg_cfg_t *c, hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "attention_wgmma");
  snprintf(t->tune, sizeof t->tune, "wg=%d,kv=%d,mb=%d", c->wgs, c->bkv, c->minb);
  t->bm = 64 * c->wgs;
  t->bn = c->bkv;
  t->bk = key->head_dim;
  t->threads = 128 * c->wgs;
  t->inflight = 1;
  t->shared_bytes = attn_wg_smem(key, c);
  const attn_wg_cfg_t d = attn_wg_default(key);
  t->is_default = d.wgs == c->wgs && d.bkv == c->bkv && d.minb == c->minb;
}

static int attn_wg_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                              hkc_tile_cfg_t *out) {
  attn_wg_cfg_t c = attn_wg_default(key);
  int v[3];
  if (params && params[0]) {
    if (hkc_tune_params_parse(params, k_attn_wg_names, 3, v) != 0) return -1;
    c = (attn_wg_cfg_t){.wgs = v[0], .bkv = v[1], .minb = v[2]};
  }
  if (!attn_wg_legal(arch, key, &c)) return -1;
  attn_wg_tile(key, &c, out);
  return 0;
}

static int attn_wg_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  int n = 0;
  if (max > 0 && attn_wg_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (int wgs = 3; wgs >= 1; wgs--)
    for (int kv = 64; kv <= 128; kv += 64)
      for (int mb = 1; mb <= 2; mb++) {
        const attn_wg_cfg_t c = {.wgs = wgs, .bkv = kv, .minb = mb};
        if (!attn_wg_legal(arch, key, &c) || n >= max) continue;
        attn_wg_tile(key, &c, &out[n]);
        if (!out[n].is_default) n++;
      }
  return n;
}

static int attn_wg_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  /* Measured on the H200 (2026-11-30, docs/device-runs/2026-11-30-ops-final/; numerics: awg.log):
   * correct on every odd case, faster than attention_mma at dh 128 on every benchmark case
   * (seq 4096: 325 vs 263 TFLOP/s full, 307 vs 247 causal), mixed at dh 64 (slower at seq
   * 1024). So: default for dh 128 (registry.c); dh 64 when named (kernel option
   * attn_wgmma=on). */
  if (arch->kind != HK_TARGET_CUDA || arch->matrix != HKC_MATRIX_WGMMA) return 0;
  if (key->op != HK_OP_ATTENTION || (key->dtype != HK_DTYPE_F16 && key->dtype != HK_DTYPE_BF16)) return 0;
  if (key->align != 8 || (key->head_dim != 64 && key->head_dim != 128)) return 0;
  if (key->has_lengths || key->has_mask) return 0; /* the masked ABI: attention_mma */
  const attn_wg_cfg_t c = attn_wg_cfg(arch, key);
  return attn_wg_smem(key, &c) <= arch->max_lds_per_block;
}

static void attn_wg_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const attn_wg_cfg_t c = attn_wg_cfg(arch, key);
  const char *ty = key->dtype == HK_DTYPE_BF16 ? "bf16" : "f16";
  const size_t len = strlen(out);
  snprintf(out + len, size - len,
           "#define HK_THREADS %d\n#define HK_AW_WGS %d\n#define HK_ATTN_BQ %d\n#define HK_ATTN_BKV %d\n"
           "#define HK_ATTN_MINB %d\n#define HK_DH %d\n#define HK_ATTN_BF16 %d\n#define HK_ATTN_SMEM %u\n"
           "#define HK_AW_S hk_wgmma_m64n%dk16_%s\n#define HK_AW_O hk_wgmma_rs_m64n%dk16_%s\n",
           128 * c.wgs, c.wgs, 64 * c.wgs, c.bkv, c.minb, key->head_dim, key->dtype == HK_DTYPE_BF16 ? 1 : 0,
           attn_wg_smem(key, &c), c.bkv, ty, key->head_dim, ty);
}

static void attn_wg_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                           uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const attn_wg_cfg_t c = attn_wg_cfg(arch, key);
  int64_t blocks = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH) * hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS) *
                   hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q), 64 * c.wgs);
  hkc_variant_launch_1d(blocks, (uint32_t)(128 * c.wgs), attn_wg_smem(key, &c), out_grid, out_block,
                        out_shared);
}

static const char *const attn_wg_includes[] = {"gpu/tile_nv.h", "gpu/tile_wgmma.h", NULL};

const hkc_variant_t hkc_variant_attention_wgmma = {
    .name = "attention_wgmma",
    .template_path = "gpu/attention_wgmma.hip",
    .includes = attn_wg_includes,
    .applies = attn_wg_applies,
    .defines = attn_wg_defines,
    .launch = attn_wg_launch,
    .tune_space = attn_wg_tune_space,
    .tune_parse = attn_wg_tune_parse,
    .params = k_attn_wg_names,
    .n_params = 3,
    .rules = "wg (warpgroups) 1..3; kv 64 or 128; mb 1 or 2; mb x ((64 wg + 4 kv) head_dim 2 + 1024) bytes of "
             "shared memory within the block limit",
};

/* ---- attention_tma (sm_90a, HKC_MATRIX_WGMMA) ---------------------------------------------
 * templates/gpu/attention_tma.hip: FlashAttention-3-style forward. A producer warpgroup (one
 * warp: TMA copies of Q and of a ring of K/V tiles, mbarrier transaction counts) and 1..3
 * consumer warpgroups (wgmma for S = Q K^T and O += P V, P in registers; online softmax in
 * f32), ping-pong between consumers on named barriers and the next Q K^T issued before the
 * current softmax. Three tensor maps after the ABI's arguments (q, k, v: 2-D maps of the
 * original tensors, heads and sequences by column and row offsets; packed qkv passes one
 * tensor three times).
 *   wg   consumer warpgroups: BQ = 64 wg query rows per work tile, 128 (1 + wg) threads
 *   kv   keys per K/V tile (64, 128, 192: the S wgmma's N)
 *   st   K/V ring slots (2..6)
 *   pp   1: ping-pong (named barriers; wg >= 2); ov 1: intra-warpgroup overlap. pp = ov = 0
 *        is the simple pipeline (S, softmax, P V, one tile at a time), for bisecting
 *   p    1: persistent grid (min(tiles, SMs x blocks per SM)), 0: one block per work tile
 * Shared memory: qbuf x Q [BQ][dh] + st x (K + V) [kv][dh] + 8 (2 qbuf + 1 + 4 st) bytes of
 * barriers + 1 KiB to align the base; qbuf = 2 Q buffers where they fit (the next work tile's
 * Q loads during this one's last key tiles), else 1. One block per SM for wg >= 2; wg 1 asks two (__launch_bounds__ min 2),
 * so that short sequences and small batches (64-row tiles) still fill the SMs.
 * Registers (setmaxnreg): producer 40 / consumers 232 at wg 2 (384 threads, entry 168);
 * 32 / 160 at wg 3 (512 threads, entry 128); 40 / 216 at wg 1 (256 threads x 2 blocks,
 * entry 128). A consumer holds O (dh/2), S (kv/2) and P (kv/4) registers.
 * Defaults (FlashAttention-3's tiles for these head sizes, within our register budgets):
 * 128 x 128 tiles (wg 2, kv 128), ping-pong + overlap, persistent; 2 ring slots at head_dim
 * 64, 3 at 128 (measured on the H200, docs/BENCHMARKS.md "Attention": 3 slots were faster in
 * 6 of the 8 head-dim-128 cases, by up to 2%). Kernel options: attn_tma=off (the previous
 * kernels: attention_wgmma at dh 128, attention_mma at dh 64), attn_tma_cfg=... */
typedef struct attn_tma_cfg {
  int wgs, bkv, stages, pp, ov, persistent;
} attn_tma_cfg_t;

static const char *const k_attn_tma_names[] = {"wg", "kv", "st", "pp", "ov", "p"};
static attn_tma_cfg_t attn_tma_default(const hkc_kernel_key_t *key) {
  return (attn_tma_cfg_t){.wgs = 2, .bkv = 128, .stages = key->head_dim == 128 ? 3 : 2, .pp = 1, .ov = 1,
                          .persistent = 1};
}

/* Registers a consumer thread needs beyond O, S and P: descriptors, indices, the row
 * statistics, loop state (ptxas 13.0 on the default configurations; an estimate for the
 * legality rule only: the compile test checks every configuration of the space). */
#define ATTN_TMA_REGS_OVERHEAD 32

/* Shared memory with qbuf Q buffers (1 KiB to align the base included). */
static uint32_t attn_tma_smem_q(const hkc_kernel_key_t *key, const attn_tma_cfg_t *c, int qbuf) {
  return (uint32_t)(qbuf * 64 * c->wgs * key->head_dim * 2 + 2 * c->stages * c->bkv * key->head_dim * 2 +
                    8 * (2 * qbuf + 1 + 4 * c->stages) + 1024);
}

/* Blocks per SM the kernel asks for (__launch_bounds__): 2 for one consumer warpgroup. */
static int attn_tma_minb(const attn_tma_cfg_t *c) { return c->wgs == 1 ? 2 : 1; }

/* Whether shared memory of `bytes` per block fits the block limit and minb blocks per SM. */
static int attn_tma_fits(const hkc_gpu_arch_t *arch, const attn_tma_cfg_t *c, uint64_t bytes) {
  return bytes <= arch->max_lds_per_block && (uint64_t)attn_tma_minb(c) * (bytes + 1024) <= arch->lds_per_cu;
}

/* Q buffers: two (the next work tile's Q loads while this one finishes) where they fit beside
 * the ring, else one; one at wg 3, whose producer's 32 registers do not hold the buffer index
 * (ptxas 13.0 spills 8-20 bytes). Decided by the configuration alone, so kernel and launch
 * agree. */
static int attn_tma_qbuf(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const attn_tma_cfg_t *c) {
  return c->wgs < 3 && attn_tma_fits(arch, c, attn_tma_smem_q(key, c, 2)) ? 2 : 1;
}

static uint32_t attn_tma_smem(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const attn_tma_cfg_t *c) {
  return attn_tma_smem_q(key, c, attn_tma_qbuf(arch, key, c));
}

/* setmaxnreg budgets: the entry budget 65536 / (threads x minb) split so that the block's
 * pool is not exceeded: 128 producer x P + 128 wg x C <= threads x entry. */
static int attn_tma_consumer_regs(const attn_tma_cfg_t *c) { return c->wgs == 1 ? 216 : c->wgs == 2 ? 232 : 160; }
static int attn_tma_producer_regs(const attn_tma_cfg_t *c) { return c->wgs == 3 ? 32 : 40; }

static int attn_tma_legal(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const attn_tma_cfg_t *c) {
  if (c->wgs < 1 || c->wgs > 3 || (c->bkv != 64 && c->bkv != 128 && c->bkv != 192) || c->stages < 2 ||
      c->stages > 6 || (c->pp != 0 && c->pp != 1) || (c->ov != 0 && c->ov != 1) ||
      (c->persistent != 0 && c->persistent != 1) || (c->pp && c->wgs < 2))
    return 0;
  const int regs = key->head_dim / 2 + c->bkv / 2 + c->bkv / 4 + ATTN_TMA_REGS_OVERHEAD;
  return regs <= attn_tma_consumer_regs(c) && attn_tma_fits(arch, c, attn_tma_smem_q(key, c, 1));
}

static int attn_tma_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                          attn_tma_cfg_t *out) {
  int v[6];
  if (hkc_tune_params_parse(params, k_attn_tma_names, 6, v) != 0) return -1;
  const attn_tma_cfg_t c = {.wgs = v[0], .bkv = v[1], .stages = v[2], .pp = v[3], .ov = v[4], .persistent = v[5]};
  if (!attn_tma_legal(arch, key, &c)) return -1;
  *out = c;
  return 0;
}

static attn_tma_cfg_t attn_tma_cfg(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  attn_tma_cfg_t c = attn_tma_default(key);
  const char *params = tuned_params("attention_tma", key);
  if (params && params[0]) (void)attn_tma_parse(arch, key, params, &c);
  return c;
}

/* Model figures (hkc_model_estimate_attention, compiler/tune/tune_model.c): bm = BQ, bn =
 * BKV, bk = dh. Efficiency (fraction of the SM's matrix peak on long, unmasked rows), not
 * measured yet: FlashAttention-3 reports 0.61-0.75 of the H100's peak at head dim 128 and
 * 0.50-0.55 at 64 (its paper, forward, seq 4k-16k); ours starts lower -- 0.55 / 0.45 for
 * the full schedule, less without ping-pong or overlap, less for 64-key tiles (twice the
 * softmax bookkeeping per FLOP) -- until bench/attn_device.sh measures them. */
static double attn_tma_efficiency(const hkc_kernel_key_t *key, const attn_tma_cfg_t *c) {
  double e = key->head_dim == 128 ? 0.55 : 0.45;
  if (!c->pp) e *= 0.85;
  if (!c->ov) e *= 0.85;
  if (c->bkv == 64) e *= 0.9;
  return e;
}

static void attn_tma_tile(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const attn_tma_cfg_t *c,
                          hkc_tile_cfg_t *t) {
  memset(t, 0, sizeof *t);
  snprintf(t->variant, sizeof t->variant, "attention_tma");
  snprintf(t->tune, sizeof t->tune, "wg=%d,kv=%d,st=%d,pp=%d,ov=%d,p=%d", c->wgs, c->bkv, c->stages, c->pp, c->ov,
           c->persistent);
  t->bm = 64 * c->wgs;
  t->bn = c->bkv;
  t->bk = key->head_dim;
  t->threads = 128 * (1 + c->wgs);
  t->inflight = c->stages - 1;
  t->persistent = c->persistent;
  t->shared_bytes = attn_tma_smem(arch, key, c);
  t->regs = (uint32_t)(65536 / (t->threads * attn_tma_minb(c)) / 8 * 8); /* the entry budget ptxas reports */
  t->efficiency = attn_tma_efficiency(key, c);
  const attn_tma_cfg_t d = attn_tma_default(key);
  t->is_default = memcmp(c, &d, sizeof *c) == 0;
}

static int attn_tma_tune_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                               hkc_tile_cfg_t *out) {
  attn_tma_cfg_t c = attn_tma_default(key);
  if (params && params[0] && attn_tma_parse(arch, key, params, &c) != 0) return -1;
  if (!attn_tma_legal(arch, key, &c)) return -1;
  attn_tma_tile(arch, key, &c, out);
  return 0;
}

/* The space (default first): 128-row tiles (wg 2) and 192-row tiles (wg 3) with overlap,
 * with and without ping-pong (without was faster at head_dim 128 over 4096 keys on the H200),
 * 64-row tiles (wg 1, two blocks per SM: short sequences, small batches) with overlap;
 * 64/128/192 keys; 2 or 3 ring slots; persistent or one block per tile. What does not fit
 * (registers, shared memory) drops out. The simple pipeline (ov 0) is for the kernel option
 * only. */
static int attn_tma_tune_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  static const int wgs[] = {2, 3, 1}, bkvs[] = {128, 64, 192};
  int n = 0;
  if (max > 0 && attn_tma_tune_parse(arch, key, "", &out[0]) == 0) n = 1;
  for (size_t w = 0; w < 3; w++)
    for (int pp = wgs[w] >= 2; pp >= 0; pp--)
      for (size_t b = 0; b < 3; b++)
        for (int st = 2; st <= 3; st++)
          for (int p = 1; p >= 0; p--) {
            const attn_tma_cfg_t c = {.wgs = wgs[w], .bkv = bkvs[b], .stages = st, .pp = pp, .ov = 1, .persistent = p};
            if (!attn_tma_legal(arch, key, &c) || n >= max) continue;
            attn_tma_tile(arch, key, &c, &out[n]);
            if (!out[n].is_default) n++;
          }
  return n;
}

static int attn_tma_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  /* TMA (cp.async.bulk.tensor), wgmma and setmaxnreg: sm_90a only (the loader builds the
   * tensor maps on CUDA only). align 8: every row stride and column offset a multiple of 8
   * elements -- the maps' 16-byte stride rule -- and 16-byte-aligned tensors. */
  if (arch->kind != HK_TARGET_CUDA || arch->matrix != HKC_MATRIX_WGMMA) return 0;
  if (key->op != HK_OP_ATTENTION || (key->dtype != HK_DTYPE_F16 && key->dtype != HK_DTYPE_BF16)) return 0;
  if (key->align != 8 || (key->head_dim != 64 && key->head_dim != 128)) return 0;
  if (key->has_lengths || key->has_mask) return 0; /* the masked ABI: attention_mma */
  const attn_tma_cfg_t c = attn_tma_cfg(arch, key);
  return attn_tma_legal(arch, key, &c);
}

static void attn_tma_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  const attn_tma_cfg_t c = attn_tma_cfg(arch, key);
  const char *ty = key->dtype == HK_DTYPE_BF16 ? "bf16" : "f16";
  const size_t len = strlen(out);
  snprintf(out + len, size > len ? size - len : 0,
           "#define HK_THREADS %d\n#define HK_AT_WGS %d\n#define HK_ATTN_BQ %d\n#define HK_ATTN_BKV %d\n"
           "#define HK_AT_STAGES %d\n#define HK_AT_PP %d\n#define HK_AT_OV %d\n#define HK_ATTN_MINB %d\n"
           "#define HK_AT_QBUF %d\n#define HK_DH %d\n#define HK_ATTN_BF16 %d\n#define HK_ATTN_SMEM %u\n"
           "#define HK_AT_PRODUCER_REGS %d\n#define HK_AT_CONSUMER_REGS %d\n"
           "#define HK_AT_S hk_wgmma_m64n%dk16_%s\n#define HK_AT_O hk_wgmma_rs_m64n%dk16_%s\n",
           128 * (1 + c.wgs), c.wgs, 64 * c.wgs, c.bkv, c.stages, c.pp, c.ov, attn_tma_minb(&c),
           attn_tma_qbuf(arch, key, &c), key->head_dim, key->dtype == HK_DTYPE_BF16 ? 1 : 0,
           attn_tma_smem(arch, key, &c), attn_tma_producer_regs(&c),
           attn_tma_consumer_regs(&c), c.bkv, ty, key->head_dim, ty);
}

/* Work tiles = batch x heads x ceil(seq_q / BQ); persistent: at most SMs x blocks per SM
 * (the kernel strides over the rest), else one block per tile (clamped to 2^31 - 1). */
static void attn_tma_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                            uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const attn_tma_cfg_t c = attn_tma_cfg(arch, key);
  int64_t blocks = hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_BATCH) *
                   hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_HEADS) *
                   hkc_variant_ceil_div(hkc_variant_arg_i64(args, n_args, HKC_ATTENTION_ARG_SEQ_Q), 64 * c.wgs);
  const int64_t resident = (int64_t)arch->compute_units * attn_tma_minb(&c);
  if (c.persistent && resident > 0 && blocks > resident) blocks = resident;
  hkc_variant_launch_1d(blocks, (uint32_t)(128 * (1 + c.wgs)), attn_tma_smem(arch, key, &c), out_grid, out_block,
                        out_shared);
}

/* The three tensor maps after the attention ABI: q with a 64 x BQ box, k and v with 64 x BKV
 * boxes, 128-byte swizzle (each box is one 64-column panel of a tile). */
static uint32_t attn_tma_launch_args(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_arg_t *args,
                                     uint32_t n_args, uint32_t max_args) {
  const attn_tma_cfg_t c = attn_tma_cfg(arch, key);
  if (n_args != HKC_ATTENTION_N_ARGS || n_args + 3 > max_args) return n_args; /* not the ABI: codegen reports */
  args[n_args++] = hkc_variant_arg_tmap(args[HKC_ATTENTION_ARG_Q].i, 64, (uint32_t)(64 * c.wgs), HK_TMAP_SWIZZLE_128B);
  args[n_args++] = hkc_variant_arg_tmap(args[HKC_ATTENTION_ARG_K].i, 64, (uint32_t)c.bkv, HK_TMAP_SWIZZLE_128B);
  args[n_args++] = hkc_variant_arg_tmap(args[HKC_ATTENTION_ARG_V].i, 64, (uint32_t)c.bkv, HK_TMAP_SWIZZLE_128B);
  return n_args;
}

const hkc_variant_t hkc_variant_attention_tma = {
    .name = "attention_tma",
    .template_path = "gpu/attention_tma.hip",
    .includes = attn_wg_includes,
    .applies = attn_tma_applies,
    .defines = attn_tma_defines,
    .launch = attn_tma_launch,
    .launch_args = attn_tma_launch_args,
    .pdl = 1, /* every thread executes griddepcontrol.wait after the prologue, before any global access */
    .tune_space = attn_tma_tune_space,
    .tune_parse = attn_tma_tune_parse,
    .params = k_attn_tma_names,
    .n_params = 6,
    .rules = "wg (consumer warpgroups) 1..3; kv 64, 128 or 192; st 2..6; pp 0 or 1 (1 needs wg >= 2); ov 0 or 1; "
             "p 0 or 1; head_dim/2 + kv/2 + kv/4 + 32 registers within the consumers' budget (232 at wg 2, 160 at "
             "wg 3, 216 at wg 1); 64 wg head_dim 2 + st kv head_dim 4 + barriers + 1 KiB of shared memory within the "
             "block limit (wg 1: two blocks per SM)",
};
