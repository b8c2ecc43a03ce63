/* SPDX-License-Identifier: Apache-2.0 */
/* hkc-generated attention source for one key (bench/lib/attention_mma/gen.sh): dump ARCH DTYPE(1 f16, 2 bf16) DH */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hkc.h"

/* The HKC_* kernel-option variables (as `hkc build` maps them) applied to the key the way
 * the build's tuner does (tune.h hkc_tune_apply_options). Exits on a bad value. */
static void apply_env_options(const hkc_gpu_arch_t *arch, hkc_kernel_key_t *key) {
  hkc_kernel_options_t o = {0};
  if (hkc_kernel_options_from_env(&o, "kernel options") != 0 || hkc_tune_apply_options(&o, arch->name, arch, key) < 0)
    exit(2);
}

int main(int argc, char **argv) {
  hkc_env_from_process(); /* HKC_TEMPLATE_DIR, CC, TMPDIR, ... as hkc maps them */
  const hkc_gpu_arch_t *a = hkc_gpu_arch_find(argv[1]);
  hkc_kernel_out_t k = {.name = "hk_attn", .key = {.op = HK_OP_ATTENTION, .dtype = atoi(argv[2]), .align = 8, .head_dim = atoi(argv[3])}};
  apply_env_options(a, &k.key); /* HKC_ATTN_TUNE etc. */
  char *s = hkc_codegen_gpu(a, &k);
  fputs(s, stdout);
  return 0;
}
