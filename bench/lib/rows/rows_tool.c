/* SPDX-License-Identifier: Apache-2.0 */
/* Developer tool for the memory-bound variants (CMake target hk_rows_tool; bench/run.py rows):
 *   rows_tool src  ARCH OP DTYPE ALIGN NAME        generated source on stdout
 *   rows_tool res  ARCH OP DTYPE ALIGN             compile (nvrtc/hiprtc), print regs/scratch
 *   rows_tool dims ARCH OP DTYPE ALIGN I64...      grid and block for these integer args
 * OP: add mul relu gelu silu layernorm rmsnorm softmax; DTYPE: f32 f16 bf16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "variant.h"
#include "hkc.h"

static hk_op_t op_of(const char *s) {
  for (int op = 0; op < HK_OP_COUNT_; op++)
    if (strcmp(hkc_op_name((hk_op_t)op), s) == 0) return (hk_op_t)op;
  fprintf(stderr, "unknown op %s\n", s);
  exit(2);
}
static hk_dtype_t dtype_of(const char *s) {
  for (int d = 0; d < HK_DTYPE_COUNT_; d++)
    if (strcmp(hkc_dtype_name((hk_dtype_t)d), s) == 0) return (hk_dtype_t)d;
  fprintf(stderr, "unknown dtype %s\n", s);
  exit(2);
}

/* The HKC_* kernel-option variables (as `hkc build` maps them) applied to the key the way
 * the build's tuner does (tune.h hkc_tune_apply_options). Exits on a bad value. */
static void apply_env_options(const hkc_gpu_arch_t *arch, hkc_kernel_key_t *key) {
  hkc_kernel_options_t o = {0};
  if (hkc_kernel_options_from_env(&o, "kernel options") != 0 || hkc_tune_apply_options(&o, arch->name, arch, key) < 0)
    exit(2);
}

int main(int argc, char **argv) {
  hkc_env_from_process(); /* HKC_TEMPLATE_DIR, CC, TMPDIR, ... as hkc maps them */
  if (argc < 6) {
    fprintf(stderr, "usage: see the header of rows_tool.c\n");
    return 2;
  }
  const hkc_gpu_arch_t *arch = hkc_gpu_arch_find(argv[2]);
  if (!arch) return 2;
  hkc_kernel_out_t k;
  memset(&k, 0, sizeof k);
  k.key.op = op_of(argv[3]);
  k.key.dtype = dtype_of(argv[4]);
  k.key.align = atoi(argv[5]);
  apply_env_options(arch, &k.key); /* HKC_ROWS_CFG, HKC_EW_CFG, ... */
  snprintf(k.name, sizeof k.name, "%s", argc > 6 && strcmp(argv[1], "src") == 0 ? argv[6] : "hk_kernel");
  if (strcmp(argv[1], "dims") == 0) {
    hkc_arg_t args[HKC_MAX_ARGS];
    const int ntens = k.key.op == HK_OP_ADD || k.key.op == HK_OP_MUL ? 3
                      : k.key.op == HK_OP_LAYERNORM ? 4 : k.key.op == HK_OP_RMSNORM ? 3 : 2;
    uint32_t n = 0;
    for (int i = 0; i < ntens; i++) args[n++] = (hkc_arg_t){.kind = HK_ARG_TENSOR, .i = i};
    for (int i = 6; i < argc; i++) args[n++] = (hkc_arg_t){.kind = HK_ARG_I64, .i = atoll(argv[i])};
    uint32_t grid[3], block[3], shared;
    hkc_gpu_launch_dims(arch, &k.key, args, n, grid, block, &shared);
    printf("%u %u %u\n", grid[0], block[0], shared);
    return 0;
  }
  char *src = hkc_codegen_gpu(arch, &k);
  if (!src) return 1;
  if (strcmp(argv[1], "src") == 0) {
    fputs(src, stdout);
    return 0;
  }
  hkc_rtc_result_t r;
  int rc = arch->kind == HK_TARGET_CUDA ? hkc_nvrtc_compile(src, k.name, arch->name, &r)
                                        : hkc_hiprtc_compile(src, k.name, arch->name, &r);
  const hkc_variant_t *v = hkc_variant_for(arch, &k.key);
  printf("%s %s %s a%d %s: rc %d regs %u scratch %u shared %u\n", arch->name, argv[3], argv[4], k.key.align,
         v ? v->name : "simple", rc, r.vgprs, r.scratch_bytes, r.shared_bytes);
  if (rc != 0 && r.log) fputs(r.log, stdout);
  return rc != 0;
}
