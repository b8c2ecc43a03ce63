/* The registry of specialised GPU kernels (see gpu_variant.h), in order of preference:
 * the first variant whose applies() accepts a key serves it. */
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/gpu_variant.h"

extern const hkc_gpu_variant_t hkc_variant_gemm_wgmma_ws, hkc_variant_gemm_wgmma,
    hkc_variant_gemm_mma; /* variant_gemm_nv.c */
extern const hkc_gpu_variant_t hkc_variant_attention_wgmma, hkc_variant_attention_mma; /* variant_attention_nv.c */
extern const hkc_gpu_variant_t hkc_variant_rows_vec16, hkc_variant_elementwise_vec16; /* variant_rows.c */
extern const hkc_gpu_variant_t hkc_variant_gemm_mfma, hkc_variant_attention_mfma; /* variant_amd.c */

static const hkc_gpu_variant_t *const k_variants[] = {
    &hkc_variant_gemm_wgmma_ws, /* NVIDIA sm_90a, warp-specialized */
    &hkc_variant_gemm_wgmma,  /* NVIDIA sm_90a (HKC_GEMM_WS=0) */
    &hkc_variant_gemm_mma,    /* NVIDIA sm_80+ */
    &hkc_variant_attention_wgmma, /* NVIDIA sm_90a; opt-in (HKC_ATTN_WGMMA=1) until measured */
    &hkc_variant_attention_mma,
    &hkc_variant_gemm_mfma,   /* AMD CDNA */
    &hkc_variant_attention_mfma,
    &hkc_variant_rows_vec16,  /* both vendors */
    &hkc_variant_elementwise_vec16,
    NULL, /* variants are listed above this line */
};

const hkc_gpu_variant_t *const *hkc_gpu_variant_list(void) { return k_variants; }

const hkc_gpu_variant_t *hkc_gpu_variant_for(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  if (getenv("HKC_SIMPLE_KERNELS")) return NULL; /* A/B checks against the simple kernels */
  if (key->variant[0]) /* a tuned key: the variant the tuner chose (tune.c checked it applies) */
    for (size_t i = 0; k_variants[i]; i++)
      if (strncmp(k_variants[i]->name, key->variant, HKC_TUNE_VARIANT_MAX) == 0 && k_variants[i]->applies(arch, key))
        return k_variants[i];
  for (size_t i = 0; k_variants[i]; i++)
    if (k_variants[i]->applies(arch, key)) return k_variants[i];
  return NULL;
}
