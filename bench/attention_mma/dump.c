/* hkc-generated attention source for one key (bench/attention_mma/gen.sh): dump ARCH DTYPE(1 f16, 2 bf16) DH */
#include <stdio.h>
#include <stdlib.h>
#include "hkc.h"
int main(int argc, char **argv) {
  const hkc_gpu_arch_t *a = hkc_gpu_arch_find(argv[1]);
  hkc_kernel_out_t k = {.name = "hk_attn", .key = {.op = HK_OP_ATTENTION, .dtype = atoi(argv[2]), .align = 8, .head_dim = atoi(argv[3])}};
  char *s = hkc_codegen_gpu(a, &k);
  fputs(s, stdout);
  return 0;
}
