/* SPDX-License-Identifier: Apache-2.0 */
/* sample_split (templates/gpu/sample.hip with HK_SAMPLE_SPLIT): the sample op on NVIDIA targets
 * (warps of 32), its greedy rows in pieces. A decode step's few rows of logits are each a
 * vocabulary (Llama 3: 128256 columns); the portable kernel reads a row with one block, a few
 * dozen 16-byte round trips per thread, while the rest of the GPU idles. Here a greedy row is
 * SS_SPLIT blocks, each a piece of the columns in one or two round trips, and the last piece to
 * arrive takes the best in piece order (the launch workspace: a (value, index) pair per piece,
 * a counter per row). A row that samples (temperature > 0, top_k != 1) is drawn by its first
 * piece's block as the portable kernel draws it. The same outputs as the portable kernel, bit
 * for bit: the greedy rule has one answer. Every NVIDIA key of the op; sample_split_wave is the
 * same on AMD CDNA (waves of 64; the split's protocol from split_amd.h), checked in the AMD
 * emulator, not on a GPU. */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "lower/lower.h"

#define SS_THREADS 256 /* the portable kernel's (a thread per bin of its radix selects) */
#define SS_SPLIT 8     /* pieces per row: 128256 columns -> 16032 a piece, 8 16-byte loads a thread */

static int ss_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return arch->kind == HK_TARGET_CUDA && arch->wave_size == 32 && key->op == HK_OP_SAMPLE;
}
static int ssw_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  return arch->kind == HK_TARGET_HIP && arch->matrix == HKC_MATRIX_MFMA && (arch->wave_size == 0 || arch->wave_size == 64) &&
         key->op == HK_OP_SAMPLE;
}

static void ss_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  (void)arch;
  snprintf(out, size, "#define HK_THREADS %d\n#define HK_ROW_VEC %d\n#define HK_SAMPLE_SPLIT %d\n", SS_THREADS,
           hkc_variant_row_vec(key), SS_SPLIT);
}

static void ss_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args, uint32_t n_args,
                      uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)arch, (void)key;
  const int64_t rows = hkc_variant_arg_i64(args, n_args, HKC_SAMPLE_ARG_ROWS);
  hkc_variant_launch_1d((rows > 0 ? rows : 1) * SS_SPLIT, SS_THREADS, 0, out_grid, out_block, out_shared);
}

/* a (value, index) pair per piece, a counter per row */
static int ss_workspace(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                        uint32_t n_args, hkc_node_workspace_t *out) {
  (void)arch, (void)key;
  const int64_t rows = hkc_variant_arg_i64(args, n_args, HKC_SAMPLE_ARG_ROWS);
  const uint64_t r = rows > 0 ? (uint64_t)rows : 1u;
  out->scratch_bytes = r * SS_SPLIT * 8u;
  out->counters = r < UINT32_MAX ? (uint32_t)r : UINT32_MAX; /* the plan refuses too many */
  return 1;
}

static const char *const ss_includes[] = {"gpu/row_best.h", "gpu/tile_nv.h", NULL};

const hkc_variant_t hkc_variant_sample_split = {
    .name = "sample_split",
    .template_path = "gpu/sample.hip",
    .includes = ss_includes,
    .applies = ss_applies,
    .defines = ss_defines,
    .launch = ss_launch,
    .workspace = ss_workspace,
    .pdl = 1, /* the kernel begins with HK_PDL_ENTRY() */
};

static const char *const ssw_includes[] = {"gpu/row_best.h", "gpu/split_amd.h", NULL};

const hkc_variant_t hkc_variant_sample_split_wave = {
    .name = "sample_split_wave",
    .template_path = "gpu/sample.hip",
    .includes = ssw_includes,
    .applies = ssw_applies,
    .defines = ss_defines,
    .launch = ss_launch,
    .workspace = ss_workspace,
};
