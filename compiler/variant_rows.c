/* Memory-bound GPU variants (see gpu_variant.h) with 16-byte vector access:
 *   rows_vec16        layernorm, rmsnorm, softmax   (templates/gpu/rows_fast.hip)
 *   elementwise_vec16 add, mul, relu, gelu, silu    (templates/gpu/elementwise_fast.hip)
 * Both serve a key when key.align is a multiple of the elements in 16 bytes (4 for f32,
 * 8 for f16/bf16): every row length (norms, softmax) or operand last dim (element-wise)
 * is a multiple of the vector, and tensors are 16-byte aligned (hk_session_bind checks
 * bound tensors; the arena aligns intermediates to 256). Any arch: the templates are
 * portable (wave32 and wave64). Other keys keep the simple kernels. */
#include <stdio.h>
#include <string.h>

#include "gpu_variant.h"

/* ---- shared choices -------------------------------------------------------------------- */
#define ROWS_THREADS 512   /* block of the row kernels */
#define ROWS_CACHE 8       /* 16-byte vectors per thread kept in registers (layernorm: 7, */
                           /* which keeps it within 64 registers without spills on sm_90) */
#define ROWS_TARGET 4      /* vectors per thread the group size aims at */
#define ROWS_MIN_BLOCKS 2  /* NVIDIA: 2 blocks of 512 per SM -> <= 64 registers */
#define EW_THREADS 256
#define EW_UNROLL 4
#define EW_MIN_BLOCKS 1    /* NVIDIA: no register cap (4 would cap at 64: f32 add spills) */
#define EW_WAVES 4         /* element-wise grid: this many rounds of resident blocks */

static int vec_elems(hk_dtype_t dtype) { return dtype == HK_DTYPE_F32 ? 4 : 8; }

static int vec_ok(const hkc_kernel_key_t *key) {
  return (key->dtype == HK_DTYPE_F32 || key->dtype == HK_DTYPE_F16 || key->dtype == HK_DTYPE_BF16) &&
         key->align > 0 && key->align % vec_elems(key->dtype) == 0;
}

/* Threads one CU/SM holds at most (waves per SIMD x SIMDs x wave size); 2048 if unknown. */
static int64_t threads_per_cu(const hkc_gpu_arch_t *arch) {
  int64_t t = (int64_t)arch->simds_per_cu * arch->max_waves_per_simd * arch->wave_size;
  return t > 0 ? t : 2048;
}

static int64_t cus(const hkc_gpu_arch_t *arch) { return arch->compute_units ? arch->compute_units : 80; }

static void set_1d(uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared, int64_t blocks,
                   int threads) {
  if (blocks < 1) blocks = 1;
  if (blocks > 0x7fffffffLL) blocks = 0x7fffffffLL;
  out_grid[0] = (uint32_t)blocks;
  out_grid[1] = out_grid[2] = 1;
  out_block[0] = (uint32_t)threads;
  out_block[1] = out_block[2] = 1;
  *out_shared = 0;
}

/* ---- rows_vec16 ------------------------------------------------------------------------- */
static int rows_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  (void)arch;
  return (key->op == HK_OP_LAYERNORM || key->op == HK_OP_RMSNORM || key->op == HK_OP_SOFTMAX) && vec_ok(key);
}

static void rows_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  (void)arch;
  const int op = key->op == HK_OP_LAYERNORM ? 1 : key->op == HK_OP_RMSNORM ? 2 : 3;
  size_t len = strlen(out);
  snprintf(out + len, size - len,
           "#define HK_THREADS %d\n#define HK_VEC %d\n#define HK_ROW_OP %d\n#define HK_ROW_CACHE %d\n"
           "#define HK_ROW_TARGET %d\n#define HK_ROW_MIN_BLOCKS %d\n#define HK_ROW_FAST_EXP %d\n",
           ROWS_THREADS, vec_elems(key->dtype), op, op == 1 ? ROWS_CACHE - 1 : ROWS_CACHE, ROWS_TARGET, ROWS_MIN_BLOCKS,
           key->dtype == HK_DTYPE_F32 ? 0 : 1);
}

/* The template's rf_group: threads per row. */
static int64_t rows_group(int64_t nvec) {
  const int64_t want = hkc_variant_ceil_div(nvec, ROWS_TARGET);
  int64_t g = 1;
  while (g < ROWS_THREADS && g < want) g <<= 1;
  return g;
}

/* One block per tile of ROWS_THREADS / g rows (blocks stride over tiles beyond the grid). */
static void rows_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                        uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  (void)arch;
  const uint32_t first_i64 = key->op == HK_OP_LAYERNORM ? 4 : key->op == HK_OP_RMSNORM ? 3 : 2;
  const int64_t rows = hkc_variant_arg_i64(args, n_args, first_i64);
  const int64_t cols = hkc_variant_arg_i64(args, n_args, first_i64 + 1);
  const int64_t rpb = ROWS_THREADS / rows_group(cols / vec_elems(key->dtype));
  set_1d(out_grid, out_block, out_shared, hkc_variant_ceil_div(rows, rpb), ROWS_THREADS);
}

const hkc_gpu_variant_t hkc_variant_rows_vec16 = {
    .name = "rows_vec16",
    .template_path = "gpu/rows_fast.hip",
    .includes = NULL,
    .applies = rows_applies,
    .defines = rows_defines,
    .launch = rows_launch,
};

/* ---- elementwise_vec16 ------------------------------------------------------------------ */
static int ew_binary(hk_op_t op) { return op == HK_OP_ADD || op == HK_OP_MUL; }

static int ew_applies(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key) {
  (void)arch;
  return (ew_binary(key->op) || key->op == HK_OP_RELU || key->op == HK_OP_GELU || key->op == HK_OP_SILU) &&
         vec_ok(key);
}

static void ew_defines(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, char *out, size_t size) {
  (void)arch;
  size_t len = strlen(out);
  snprintf(out + len, size - len, "#define HK_THREADS %d\n#define HK_VEC %d\n#define HK_EW_UNROLL %d\n#define HK_EW_BINARY %d\n"
           "#define HK_EW_MIN_BLOCKS %d\n",
           EW_THREADS, vec_elems(key->dtype), EW_UNROLL, ew_binary(key->op) ? 1 : 0, EW_MIN_BLOCKS);
}

/* Enough blocks for one pass of EW_UNROLL vectors per thread, at most EW_WAVES rounds of
 * the blocks the device holds at once (the kernel strides beyond). */
static void ew_launch(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                      uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared) {
  const int64_t n = hkc_variant_arg_i64(args, n_args, ew_binary(key->op) ? 3 : 2);
  int64_t blocks = hkc_variant_ceil_div(n / vec_elems(key->dtype), (int64_t)EW_THREADS * EW_UNROLL);
  const int64_t cap = cus(arch) * (threads_per_cu(arch) / EW_THREADS) * EW_WAVES;
  if (blocks > cap) blocks = cap;
  set_1d(out_grid, out_block, out_shared, blocks, EW_THREADS);
}

const hkc_gpu_variant_t hkc_variant_elementwise_vec16 = {
    .name = "elementwise_vec16",
    .template_path = "gpu/elementwise_fast.hip",
    .includes = NULL,
    .applies = ew_applies,
    .defines = ew_defines,
    .launch = ew_launch,
};
