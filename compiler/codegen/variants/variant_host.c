/* SPDX-License-Identifier: Apache-2.0 */
/* The host target's entries of the registry (variant.h): the host GEMM with its tuning
 * space, then every other op's host kernel. Their source is not a variant's: all host
 * kernels are one C translation unit (codegen_host.c, templates/host), whose GEMM reads
 * key->tune; these entries carry the per-kernel choice and the tuning space only. */
#include "codegen/codegen.h"
#include "codegen/variants/variant.h"

static int host_gemm_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  (void)arch;
  return key->op == HK_OP_GEMM && (unsigned)key->dtype < HK_DTYPE_FLOAT_COUNT && (unsigned)key->act < HK_ACT_COUNT_;
}

static int host_gemm_space(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_tile_cfg_t *out, int max) {
  (void)arch;
  return hkc_host_tune_space(key, out, max);
}

static int host_gemm_parse(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const char *params,
                           hkc_tile_cfg_t *out) {
  (void)arch;
  return hkc_host_tune_parse(key, params, out);
}

static const char *const k_host_gemm_params[] = {"bm", "bn", "bk"};

const hkc_variant_t hkc_variant_host_gemm = {
    .name = "host_gemm",
    .template_path = "host/gemm.c",
    .host = 1,
    .portable = 1,
    .rope = 1,
    .norm_a = 1,
    .norm_c = 1,
    .quant_b = 1,
    .applies = host_gemm_applies,
    .tune_space = host_gemm_space,
    .tune_parse = host_gemm_parse,
    .params = k_host_gemm_params,
    .n_params = 3,
    .rules = "bm 1..128, bn 64..1024 a multiple of 64, bk 8..256, (bm + bk) * bn * 4 bytes <= 128 KiB",
};

/* Every other op the host templates serve (no parameters). */
static int host_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  (void)arch;
  return key->op != HK_OP_GEMM && (unsigned)key->op < HK_OP_COUNT_ && (unsigned)key->dtype < HK_DTYPE_FLOAT_COUNT &&
         (unsigned)key->act < HK_ACT_COUNT_;
}

const hkc_variant_t hkc_variant_host = {
    .name = "host",
    .host = 1,
    .portable = 1,
    .applies = host_applies,
};
