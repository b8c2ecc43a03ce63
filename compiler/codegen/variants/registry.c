/* SPDX-License-Identifier: Apache-2.0 */
/* The variant registry (see variant.h), in order of preference: the first variant that
 * serves the target and whose applies() accepts a key serves it. Each target's part ends
 * with its portable entries, so every valid key finds one. */
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"

extern const hkc_variant_t hkc_variant_gemm_tma, hkc_variant_gemm_wgmma_ws, hkc_variant_gemm_wgmma,
    hkc_variant_gemm_mma; /* variant_gemm_nv.c */
extern const hkc_variant_t hkc_variant_attention_tma, hkc_variant_attention_wgmma,
    hkc_variant_attention_mma; /* variant_attention_nv.c */
extern const hkc_variant_t hkc_variant_rows_vec16, hkc_variant_elementwise_vec16; /* variant_rows.c */
extern const hkc_variant_t hkc_variant_gemm_mfma, hkc_variant_gemm_mfma_pp,
    hkc_variant_attention_mfma, hkc_variant_attention_mfma_pp; /* variant_amd.c */
extern const hkc_variant_t hkc_variant_simple_gemm, hkc_variant_simple_binary, hkc_variant_simple_unary,
    hkc_variant_simple_layernorm, hkc_variant_simple_rmsnorm, hkc_variant_simple_softmax,
    hkc_variant_simple_attention, hkc_variant_simple_rope, hkc_variant_simple_ewchain,
    hkc_variant_simple_embedding, hkc_variant_simple_kv_append, hkc_variant_simple_kv_attention,
    hkc_variant_simple_take_rows, hkc_variant_simple_argmax, hkc_variant_simple_sample,
    hkc_variant_simple_dequant; /* variant_simple.c */
extern const hkc_variant_t hkc_variant_kv_attention_warp, hkc_variant_kv_attention_mma,
    hkc_variant_kv_attention_wave; /* variant_kv_nv.c */
extern const hkc_variant_t hkc_variant_gemm_skinny, hkc_variant_gemm_stream; /* variant_skinny_nv.c */
extern const hkc_variant_t hkc_variant_gemm_skinny_amd; /* variant_skinny_amd.c */
extern const hkc_variant_t hkc_variant_sample_split, hkc_variant_sample_split_wave; /* variant_sample_nv.c */
extern const hkc_variant_t hkc_variant_host_gemm, hkc_variant_host; /* variant_host.c */

static const hkc_variant_t *const k_variants[] = {
    /* GPU targets: the specialised kernels */
    &hkc_variant_gemm_tma,      /* NVIDIA sm_90a, TMA loads (kernel option gemm_tma=off) */
    &hkc_variant_gemm_wgmma_ws, /* NVIDIA sm_90a, warp-specialized, cp.async loads */
    &hkc_variant_gemm_wgmma,  /* NVIDIA sm_90a (kernel option gemm_ws=off) */
    &hkc_variant_gemm_mma,    /* NVIDIA sm_80+ */
    &hkc_variant_gemm_skinny, /* NVIDIA sm_90a, never first: the tuner names it for M <= 8 (gemm_skinny=off: never) */
    &hkc_variant_gemm_stream, /* NVIDIA sm_90a, never first: gemm_skinny's launches of a 16-bit B under gemm_stream=on */
    &hkc_variant_attention_tma,   /* NVIDIA sm_90a, TMA + warp-specialized (attn_tma=off: the two below) */
    &hkc_variant_attention_wgmma, /* NVIDIA sm_90a; head_dim 128 (64: attn_wgmma=on) */
    &hkc_variant_attention_mma,
    &hkc_variant_gemm_mfma,   /* AMD CDNA, 4 waves */
    &hkc_variant_gemm_mfma_pp, /* AMD CDNA, 8-wave ping-pong: chosen by tuning (kernel option gemm_mfma_pp) */
    &hkc_variant_gemm_skinny_amd, /* AMD CDNA, never first: the tuner names it for few rows (gemm_skinny=off: never) */
    &hkc_variant_attention_mfma,
    &hkc_variant_attention_mfma_pp, /* AMD CDNA, 8-wave ping-pong: kernel option attn_mfma_pp=on */
    &hkc_variant_kv_attention_warp, /* NVIDIA, f16/bf16, head_dim 64/128, split over the keys (kv_warp=off: not) */
    &hkc_variant_kv_attention_mma,  /* NVIDIA sm_80+, never first: the tuner names it for many rows (kv_mma=off: not) */
    &hkc_variant_kv_attention_wave, /* AMD CDNA: kv_attention_warp's template in waves of 64 (kv_warp=off: not) */
    &hkc_variant_sample_split,      /* NVIDIA: sample, greedy rows in pieces */
    &hkc_variant_sample_split_wave, /* AMD CDNA: the same */
    &hkc_variant_rows_vec16,  /* both vendors */
    &hkc_variant_elementwise_vec16,
    /* GPU targets, last: the simple kernels, one per template (every valid key of its ops) */
    &hkc_variant_simple_gemm,
    &hkc_variant_simple_binary,
    &hkc_variant_simple_unary,
    &hkc_variant_simple_layernorm,
    &hkc_variant_simple_rmsnorm,
    &hkc_variant_simple_softmax,
    &hkc_variant_simple_attention,
    &hkc_variant_simple_rope,
    &hkc_variant_simple_ewchain,
    &hkc_variant_simple_embedding,
    &hkc_variant_simple_kv_append,
    &hkc_variant_simple_kv_attention,
    &hkc_variant_simple_take_rows,
    &hkc_variant_simple_dequant,
    &hkc_variant_simple_argmax,
    &hkc_variant_simple_sample,
    /* the host target: the GEMM (tunable), then every other op */
    &hkc_variant_host_gemm,
    &hkc_variant_host,
    NULL, /* variants are listed above this line */
};

const hkc_variant_t *const *hkc_variant_list(void) { return k_variants; }

const hkc_variant_t *hkc_variant_named(const char *name) {
  for (size_t i = 0; k_variants[i]; i++)
    if (strcmp(k_variants[i]->name, name) == 0) return k_variants[i];
  return NULL;
}

int hkc_kernel_options_allow(const hkc_kernel_options_t *o, const hkc_gpu_arch_t *arch, const hkc_variant_t *v,
                             const hkc_kernel_key_t *key) {
  if (v->portable) return 1; /* what every key falls back to */
  if (v == &hkc_variant_attention_wgmma) { /* default for head_dim 128 only (measured, variant_attention_nv.c) */
    const hkc_switch_t s = o ? o->attn_wgmma : HKC_SWITCH_AUTO;
    if (s == HKC_SWITCH_OFF) return 0;
    if (s != HKC_SWITCH_ON && key->head_dim != 128) return 0;
  }
  /* kv_attention_warp: the default where it serves the key (kv_warp=off: the portable kernel);
   * kv_attention_mma only where the tuner names it (launches of many rows: kv_mma_choose) and
   * kv_mma is not off. Both checked against the portable kernel and Hugging Face on the H100
   * (tests/device/kv_attention_check.py, bench/gen_device.py check; docs/BENCHMARKS.md) */
  if ((v == &hkc_variant_kv_attention_warp || v == &hkc_variant_kv_attention_wave) && o && o->kv_warp == HKC_SWITCH_OFF)
    return 0;
  if (v == &hkc_variant_kv_attention_mma &&
      ((o && o->kv_mma == HKC_SWITCH_OFF) || strncmp(key->variant, "kv_attention_mma", HKC_TUNE_VARIANT_MAX) != 0))
    return 0;
  /* attention_tma: the default where it serves the key (proven on the H200: docs/BENCHMARKS.md) */
  if (v == &hkc_variant_attention_tma && o && o->attn_tma == HKC_SWITCH_OFF) return 0;
  if (!o) return 1;
  if (o->simple_kernels) return 0; /* A/B checks against the simple kernels */
  if (v == &hkc_variant_gemm_tma && o->gemm_tma == HKC_SWITCH_OFF) return 0;     /* gemm_wgmma_ws instead */
  /* gemm_tma=on: no other GEMM variant where gemm_tma serves the key (tuning measures it alone) */
  if (o->gemm_tma == HKC_SWITCH_ON && v != &hkc_variant_gemm_tma && key->op == HK_OP_GEMM &&
      hkc_variant_serves(&hkc_variant_gemm_tma, arch, key))
    return 0;
  if (v == &hkc_variant_gemm_wgmma_ws && o->gemm_ws == HKC_SWITCH_OFF) return 0; /* gemm_wgmma instead */
  /* attn_tma=on: no other attention variant where attention_tma serves the key */
  if (o->attn_tma == HKC_SWITCH_ON && !o->attn_kvs && v != &hkc_variant_attention_tma && key->op == HK_OP_ATTENTION &&
      hkc_variant_serves(&hkc_variant_attention_tma, arch, key))
    return 0;
  /* attn_kvs=N: attention_mma (split-KV) wherever it serves the key, so not the sm_90a kernels */
  if (o->attn_kvs > 0 && (v == &hkc_variant_attention_tma || v == &hkc_variant_attention_wgmma) &&
      hkc_variant_serves(&hkc_variant_attention_mma, arch, key))
    return 0;
  if (v == &hkc_variant_gemm_mfma_pp && o->gemm_mfma_pp == HKC_SWITCH_OFF) return 0;
  /* attention_mfma_pp: never the registry's pick under auto (after attention_mfma, which
   * serves the same keys); attn_mfma_pp=on puts it in attention_mfma's place */
  if (v == &hkc_variant_attention_mfma_pp && o->attn_mfma_pp == HKC_SWITCH_OFF) return 0;
  if (v == &hkc_variant_attention_mfma && o->attn_mfma_pp == HKC_SWITCH_ON &&
      hkc_variant_serves(&hkc_variant_attention_mfma_pp, arch, key))
    return 0;
  /* gemm_mfma_pp=on: it replaces gemm_mfma wherever it serves the key */
  if (v == &hkc_variant_gemm_mfma && o->gemm_mfma_pp == HKC_SWITCH_ON &&
      hkc_variant_serves(&hkc_variant_gemm_mfma_pp, arch, key))
    return 0;
  return 1;
}

int hkc_kernel_options_allow_cfg(const hkc_kernel_options_t *o, const hkc_tile_cfg_t *cfg) {
  /* split-K through the workspace (gemm_mma, sm_80/sm_90): in the space unless gemm_split=off
   * (proven on the H200, docs/BENCHMARKS.md "Split-K"); stream-K (gemm_tma, sm_90a): only with
   * gemm_split=on (correct there, and slower than the unsplit kernel on every shape measured) */
  const hkc_switch_t s = o ? o->gemm_split : HKC_SWITCH_AUTO;
  if (cfg->stream_k > 0) return s == HKC_SWITCH_ON;
  if (cfg->split_global && cfg->split_k > 1) return s != HKC_SWITCH_OFF;
  return 1;
}

const hkc_variant_t *hkc_variant_for_options(const hkc_gpu_arch_t *arch, const hkc_kernel_options_t *o,
                                             const hkc_kernel_key_t *key) {
  if (key->variant[0]) /* a tuned key: the variant the tuner chose (tune.c checked it applies) */
    for (size_t i = 0; k_variants[i]; i++)
      if (strncmp(k_variants[i]->name, key->variant, HKC_TUNE_VARIANT_MAX) == 0 &&
          hkc_variant_serves(k_variants[i], arch, key))
        return k_variants[i];
  for (size_t i = 0; k_variants[i]; i++)
    if (hkc_variant_serves(k_variants[i], arch, key) && hkc_kernel_options_allow(o, arch, k_variants[i], key))
      return k_variants[i];
  return NULL;
}

const hkc_variant_t *hkc_variant_for(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return hkc_variant_for_options(arch, NULL, key);
}
