/* The registry of specialised GPU kernels (see gpu_variant.h), in order of preference:
 * the first variant whose applies() accepts a key serves it. */
#include <stdlib.h>

#include "gpu_variant.h"

extern const hkc_gpu_variant_t hkc_variant_gemm_mfma, hkc_variant_attention_mfma;

static const hkc_gpu_variant_t *const k_variants[] = {
    &hkc_variant_gemm_mfma, &hkc_variant_attention_mfma, /* AMD CDNA (variant_amd.c) */
    NULL, /* variants are listed above this line */
};

const hkc_gpu_variant_t *hkc_gpu_variant_for(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  if (getenv("HKC_SIMPLE_KERNELS")) return NULL; /* A/B checks against the simple kernels */
  for (size_t i = 0; k_variants[i]; i++)
    if (k_variants[i]->applies(arch, key)) return k_variants[i];
  return NULL;
}
