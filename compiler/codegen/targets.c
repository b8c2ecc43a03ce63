/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU target table and an occupancy model over it.
 *
 * AMD model (per CU: simds_per_cu SIMDs, each holding up to max_waves_per_simd waves):
 *  - VGPRs: a wave's allocation is its register count rounded up to vgpr_granule. On
 *    gfx90a/gfx942/gfx950 VGPRs and AGPRs share one 512-per-lane file: the arch VGPRs
 *    are rounded up to 4 (AGPRs start 4-aligned), the AGPRs appended, and the sum rounded
 *    to the granule (8). On gfx908 the two files are separate (256 + 256 per lane): the
 *    larger of the two counts, rounded, against half the file.
 *  - SGPRs (gfx9 only; RDNA gives every wave its SGPRs): 800 per SIMD, granule 16.
 *  - LDS: per CU, shared by the workgroups resident on it; allocation granule 512 bytes.
 *  - A workgroup's waves all live on one CU, spread over its SIMDs: workgroups per CU =
 *    floor(simds * waves-per-SIMD limit / waves per workgroup).
 *  Result: waves per SIMD = resident waves of the CU / simds (rounded down, >= 1 if any).
 *
 * NVIDIA model (per SM): registers are allocated per warp in 256-register units from a
 * 65536-register file; shared memory per block is its static+dynamic size plus 1 KB the
 * runtime reserves (sm_80+), 128-byte granule; warps per SM and blocks per SM capped.
 * Result: blocks per SM.
 *
 * The limiter is the resource that binds; on a tie with a hardware cap the cap is named
 * ("waves"/"blocks"), since shrinking the resource would not raise occupancy. */
#include <string.h>

#include "codegen/codegen.h"

/* AGPRs of a unified register file start at a 4-register boundary. */
#define AMD_AGPR_ALIGN 4
/* SGPRs are allocated in blocks of 16 on gfx9 (CDNA) SIMDs. */
#define AMD_SGPR_GRANULE 16
/* LDS is allocated to workgroups in blocks of 128 dwords. */
#define AMD_LDS_GRANULE 512
/* The CUDA runtime reserves 1 KB of shared memory per resident block on sm_80 and later. */
#define NV_SMEM_RESERVED 1024
/* Shared memory is allocated to blocks in 128-byte units. */
#define NV_SMEM_GRANULE 128
/* Registers are allocated per warp in units of 256 (8 per thread). */
#define NV_WARP_SIZE 32

static const hkc_gpu_arch_t k_archs[] = {
    /* GCN5 Vega 10, Radeon Instinct MI25: 64 CUs, 4 SIMD16 per CU running wave64, 10
     * waves/SIMD, 256 VGPRs per lane (no AGPRs), granule 4; 800 SGPRs/SIMD, 102 per wave;
     * 64 KiB LDS; 484 GB/s HBM2, no matrix cores, 24.6 TFLOP/s packed FP16 (AMD "Vega"
     * ISA reference guide; Radeon Instinct MI25 datasheet). */
    {"gfx900", HK_TARGET_HIP, "MI25", 64, 64, 4, 10, 256, 4, 256, 800, 102, 65536, 65536, 1024, 0,
     HKC_MATRIX_FMA, 484.0, 24.6, "AMD Vega ISA guide; AMD Radeon Instinct MI25 datasheet"},
    /* GCN5.1 Vega 20, Instinct MI50 (32 GB): 60 CUs (the MI60 has 64), per-CU figures as
     * gfx900; 1024 GB/s HBM2, no matrix cores, 26.5 TFLOP/s packed FP16 (AMD "Vega 7nm"
     * ISA reference guide; AMD Instinct MI50 datasheet). */
    {"gfx906", HK_TARGET_HIP, "MI50", 64, 60, 4, 10, 256, 4, 256, 800, 102, 65536, 65536, 1024, 0,
     HKC_MATRIX_FMA, 1024.0, 26.5, "AMD Vega 7nm ISA guide; AMD Instinct MI50 datasheet"},
    /* CDNA1 Instinct MI100: 120 CUs, 4 SIMD16 per CU running wave64, 10 waves/SIMD;
     * 256 arch VGPRs + 256 AGPRs per lane (separate files), VGPR granule 4 (AMD "CDNA1
     * ISA" reference guide, VGPR/AGPR sections); 800 SGPRs/SIMD, 102 per wave; 64 KiB LDS;
     * 1.2288 TB/s HBM2, 184.6 TFLOP/s FP16 matrix (AMD Instinct MI100 datasheet). */
    {"gfx908", HK_TARGET_HIP, "MI100", 64, 120, 4, 10, 512, 4, 256, 800, 102, 65536, 65536, 1024, 0,
     HKC_MATRIX_MFMA, 1228.8, 184.6, "AMD CDNA1 ISA guide; AMD Instinct MI100 datasheet"},
    /* CDNA2 MI250X, one GCD (the unit a process sees): 110 CUs (the MI210 has 104),
     * 8 waves/SIMD, unified 512-per-lane VGPR+AGPR file, granule 8; 64 KiB LDS; half
     * the card's 3.2768 TB/s and 383 TFLOP/s FP16 (AMD CDNA2 ISA guide; AMD CDNA2
     * white paper; MI250X datasheet). */
    {"gfx90a", HK_TARGET_HIP, "MI250X (one GCD)", 64, 110, 4, 8, 512, 8, 512, 800, 102, 65536, 65536, 1024, 0,
     HKC_MATRIX_MFMA, 1638.4, 191.5, "AMD CDNA2 ISA guide; AMD CDNA2 white paper; MI250X datasheet"},
    /* CDNA3 MI300X: 304 CUs, 8 waves/SIMD, unified 512 VGPR+AGPR, 64 KiB LDS; 5.3 TB/s
     * HBM3, 1307.4 TFLOP/s dense FP16/BF16 (AMD CDNA3 ISA guide; CDNA3 white paper;
     * MI300X datasheet). */
    {"gfx942", HK_TARGET_HIP, "MI300X", 64, 304, 4, 8, 512, 8, 512, 800, 102, 65536, 65536, 1024, 0,
     HKC_MATRIX_MFMA, 5300.0, 1307.4, "AMD CDNA3 ISA guide; AMD CDNA3 white paper; MI300X datasheet"},
    /* CDNA4 MI355X: 256 CUs, 160 KiB LDS per CU, unified 512 VGPR+AGPR; 8 TB/s HBM3E,
     * ~2.5 PFLOP/s dense FP16/BF16 (AMD CDNA4 ISA guide; CDNA4 white paper; MI355X
     * datasheet). */
    {"gfx950", HK_TARGET_HIP, "MI355X", 64, 256, 4, 8, 512, 8, 512, 800, 102, 163840, 163840, 1024, 0,
     HKC_MATRIX_MFMA, 8000.0, 2516.6, "AMD CDNA4 ISA guide; AMD CDNA4 white paper; MI355X datasheet"},
    /* RDNA2 RX 6800 XT / Radeon PRO W6800 class: 72 CUs (6800 XT), 2 SIMD32 per CU,
     * 16 waves/SIMD, wave32 (hiprtc's default here: .wavefront_size 32, checked), 1024
     * VGPRs per lane per SIMD in wave32 mode, granule 16 (gfx10.3 wave32), 256 per wave;
     * SGPRs not shared (0); 64 KiB LDS per CU; 512 GB/s GDDR6; no matrix cores, 41.5
     * TFLOP/s packed FP16 (AMD RDNA2 ISA guide; RX 6800 XT specifications). */
    {"gfx1030", HK_TARGET_HIP, "RX 6800 XT", 32, 72, 2, 16, 1024, 16, 256, 0, 106, 65536, 65536, 1024, 0,
     HKC_MATRIX_FMA, 512.0, 41.5, "AMD RDNA2 ISA guide; AMD Radeon RX 6800 XT specifications"},
    /* NVIDIA rows: per compute capability the per-SM limits of the CUDA C++ Programming
     * Guide's "Technical Specifications per Compute Capability" table (warps/SM, blocks/SM,
     * 64K registers/SM, 255 per thread, shared memory per SM and per block with opt-in);
     * SM count, bandwidth and the dense FP16 tensor rate (FP32 accumulate) of the product
     * named in the row, from its datasheet. The loader reads the device's SM count at run
     * time; these figures feed occupancy, legality and rooflines at build time.
     *
     * T4 (CC 7.5): 40 SMs, 32 warps/SM, 16 blocks/SM, 64 KB shared memory per SM and per
     * block; 320 GB/s GDDR6, 65 TFLOP/s FP16 tensor (T4 datasheet). hkc's mma.sync kernels
     * need sm_80 (bf16 mma, cp.async): FMA (the simple kernels) here. */
    {"sm_75", HK_TARGET_CUDA, "T4", 32, 40, 4, 8, 65536, 256, 255, 0, 0, 65536, 65536, 1024, 16,
     HKC_MATRIX_FMA, 320.0, 65.0, "CUDA C++ Programming Guide (CC 7.5); NVIDIA T4 datasheet"},
    /* A100 SXM (compute capability 8.0): 108 SMs, 4 sub-partitions, 64 warps/SM, 65536
     * registers/SM, 255 per thread, 164 KB shared memory/SM, 163 KB per block, 32 blocks
     * /SM (CUDA C++ Programming Guide, compute capability table); 2039 GB/s (80 GB),
     * 312 TFLOP/s dense FP16 (A100 datasheet). */
    {"sm_80", HK_TARGET_CUDA, "A100 SXM", 32, 108, 4, 16, 65536, 256, 255, 0, 0, 167936, 166912, 1024, 32,
     HKC_MATRIX_MMA_SYNC, 2039.0, 312.0, "CUDA C++ Programming Guide (CC 8.0); NVIDIA A100 datasheet"},
    /* A10 (CC 8.6): 72 SMs, 48 warps/SM, 16 blocks/SM, 100 KB shared memory per SM, 99 KB
     * per block; 600 GB/s GDDR6, 125 TFLOP/s dense FP16 tensor (A10 datasheet: 250 with
     * sparsity). */
    {"sm_86", HK_TARGET_CUDA, "A10", 32, 72, 4, 12, 65536, 256, 255, 0, 0, 102400, 101376, 1024, 16,
     HKC_MATRIX_MMA_SYNC, 600.0, 125.0, "CUDA C++ Programming Guide (CC 8.6); NVIDIA A10 datasheet"},
    /* Jetson AGX Orin 64GB (CC 8.7): 16 SMs, 48 warps/SM, 16 blocks/SM, 164 KB shared
     * memory per SM, 163 KB per block; 204.8 GB/s LPDDR5; 42.5 TFLOP/s dense FP16 tensor,
     * derived (not a datasheet figure): a quarter of the GPU's 170 sparse INT8 TOPS. */
    {"sm_87", HK_TARGET_CUDA, "Jetson AGX Orin 64GB", 32, 16, 4, 12, 65536, 256, 255, 0, 0, 167936, 166912, 1024, 16,
     HKC_MATRIX_MMA_SYNC, 204.8, 42.5, "CUDA C++ Programming Guide (CC 8.7); Jetson AGX Orin datasheet"},
    /* CC 8.8 (listed by nvrtc 13.0): no product or per-CC table row could be checked when
     * this was written; the row assumes the CC 8.6 limits and the A10's figures. */
    {"sm_88", HK_TARGET_CUDA, "CC 8.8 (A10 figures)", 32, 72, 4, 12, 65536, 256, 255, 0, 0, 102400, 101376, 1024, 16,
     HKC_MATRIX_MMA_SYNC, 600.0, 125.0, "assumed: CUDA C++ Programming Guide (CC 8.6); NVIDIA A10 datasheet"},
    /* L4 (CC 8.9): 58 SMs, 48 warps/SM, 24 blocks/SM, 100 KB shared memory per SM, 99 KB
     * per block; 300 GB/s GDDR6, 121 TFLOP/s dense FP16 tensor (L4 datasheet: 242 with
     * sparsity). */
    {"sm_89", HK_TARGET_CUDA, "L4", 32, 58, 4, 12, 65536, 256, 255, 0, 0, 102400, 101376, 1024, 24,
     HKC_MATRIX_MMA_SYNC, 300.0, 121.0, "CUDA C++ Programming Guide (CC 8.9); NVIDIA L4 datasheet"},
    /* H200 SXM (compute capability 9.0): 132 SMs, 64 warps/SM, 65536 registers/SM, 228 KB
     * shared memory/SM, 227 KB per block, 32 blocks/SM (CUDA C++ Programming Guide); 4.8
     * TB/s HBM3e, ~989 TFLOP/s dense BF16/FP16 (H200 datasheet). Plain sm_90 has no
     * wgmma (ptxas refuses it), so its matrix path is mma.sync. */
    {"sm_90", HK_TARGET_CUDA, "H200 SXM", 32, 132, 4, 16, 65536, 256, 255, 0, 0, 233472, 232448, 1024, 32,
     HKC_MATRIX_MMA_SYNC, 4800.0, 989.0, "CUDA C++ Programming Guide (CC 9.0); NVIDIA H200 datasheet"},
    /* The same part with the arch-specific features (wgmma, setmaxnreg). */
    {"sm_90a", HK_TARGET_CUDA, "H200 SXM", 32, 132, 4, 16, 65536, 256, 255, 0, 0, 233472, 232448, 1024, 32,
     HKC_MATRIX_WGMMA, 4800.0, 989.0, "CUDA C++ Programming Guide (CC 9.0); NVIDIA H200 datasheet"},    /* Blackwell has no wgmma (its tensor-core instructions, tcgen05, are sm_100a-only and
     * not used by hkc): the mma.sync kernels serve these rows.
     * B200 (CC 10.0): 148 SMs, 64 warps/SM, 32 blocks/SM, 228 KB shared memory per SM, 227
     * KB per block; 8 TB/s HBM3e, 2.25 PFLOP/s dense FP16/BF16 (HGX B200 datasheet, 4.5
     * with sparsity). mma.sync reaches a fraction of that rate. */
    {"sm_100", HK_TARGET_CUDA, "B200", 32, 148, 4, 16, 65536, 256, 255, 0, 0, 233472, 232448, 1024, 32,
     HKC_MATRIX_MMA_SYNC, 8000.0, 2250.0, "CUDA C++ Programming Guide (CC 10.0); NVIDIA HGX B200 datasheet"},
    /* B300 (CC 10.3): per-SM limits as CC 10.0; the SM count, bandwidth and rate are the
     * B200's (assumed, not checked against a B300 datasheet here). */
    {"sm_103", HK_TARGET_CUDA, "B300 (B200 figures)", 32, 148, 4, 16, 65536, 256, 255, 0, 0, 233472, 232448, 1024, 32,
     HKC_MATRIX_MMA_SYNC, 8000.0, 2250.0, "assumed: CUDA C++ Programming Guide (CC 10.0); NVIDIA HGX B200 datasheet"},
    /* Jetson AGX Thor (CC 11.0; 10.1 before CUDA 13): 20 SMs (2560 CUDA cores), per-SM
     * limits assumed as CC 10.0's; 273 GB/s LPDDR5X; 259 TFLOP/s dense FP16, derived (not
     * a datasheet figure): an eighth of the 2070 sparse FP4 TFLOP/s. */
    {"sm_110", HK_TARGET_CUDA, "Jetson AGX Thor", 32, 20, 4, 16, 65536, 256, 255, 0, 0, 233472, 232448, 1024, 32,
     HKC_MATRIX_MMA_SYNC, 273.0, 259.0, "assumed: CUDA C++ Programming Guide (CC 10.0); Jetson AGX Thor datasheet"},
    /* GeForce RTX 5090 (CC 12.0): 170 SMs, 48 warps/SM, 32 blocks/SM, 128 KB shared memory
     * per SM, 99 KB per block; 1792 GB/s GDDR7, 209.5 TFLOP/s dense FP16 tensor with FP32
     * accumulate (NVIDIA RTX Blackwell GPU architecture white paper). */
    {"sm_120", HK_TARGET_CUDA, "RTX 5090", 32, 170, 4, 12, 65536, 256, 255, 0, 0, 131072, 101376, 1024, 32,
     HKC_MATRIX_MMA_SYNC, 1792.0, 209.5, "CUDA C++ Programming Guide (CC 12.0); NVIDIA RTX Blackwell white paper"},
    /* DGX Spark GB10 (CC 12.1): 48 SMs (6144 CUDA cores), per-SM limits as CC 12.0; 273
     * GB/s LPDDR5X; 125 TFLOP/s dense FP16, derived (not a datasheet figure): an eighth of
     * the 1 PFLOP/s sparse FP4. */
    {"sm_121", HK_TARGET_CUDA, "DGX Spark GB10", 32, 48, 4, 12, 65536, 256, 255, 0, 0, 131072, 101376, 1024, 32,
     HKC_MATRIX_MMA_SYNC, 273.0, 125.0, "CUDA C++ Programming Guide (CC 12.0); NVIDIA DGX Spark datasheet"},
};

const hkc_gpu_arch_t *hkc_gpu_arch_list(size_t *out_count) {
  *out_count = sizeof k_archs / sizeof *k_archs;
  return k_archs;
}

/* Exact name, or "gfx90a:xnack-" -> "gfx90a" (features follow the first ':'). */
/* NVIDIA's datasheets (dense, no sparsity); the first entry whose every word the device name
 * contains wins, so the specific forms come before the general one. */
static const struct {
  const char *words[3];
  hkc_gpu_part_t part;
} k_parts[] = {
    {{"H100", "PCIe", NULL}, {"H100 PCIe", 2000.0, 756.0}},
    {{"H100", "NVL", NULL}, {"H100 NVL", 3900.0, 835.0}},
    {{"H100", NULL, NULL}, {"H100 SXM", 3350.0, 989.0}},
    {{"H800", NULL, NULL}, {"H800 SXM", 3350.0, 989.0}},
    {{"H200", "NVL", NULL}, {"H200 NVL", 4800.0, 835.0}},
    {{"H200", NULL, NULL}, {"H200 SXM", 4800.0, 989.0}},
    {{"A100", "80GB", "PCIe"}, {"A100 80GB PCIe", 1935.0, 312.0}},
    {{"A100", "80GB", NULL}, {"A100 80GB SXM", 2039.0, 312.0}},
    {{"A100", NULL, NULL}, {"A100 40GB", 1555.0, 312.0}},
};

const hkc_gpu_part_t *hkc_gpu_part_for_device(const char *device_name) {
  if (!device_name || !device_name[0]) return NULL;
  for (size_t i = 0; i < sizeof k_parts / sizeof *k_parts; i++) {
    int all = 1;
    for (size_t w = 0; w < 3 && k_parts[i].words[w] && all; w++) all = strstr(device_name, k_parts[i].words[w]) != NULL;
    if (all) return &k_parts[i].part;
  }
  return NULL;
}

const hkc_gpu_arch_t *hkc_gpu_arch_find(const char *name) {
  if (!name) return NULL;
  size_t len = strcspn(name, ":");
  for (size_t i = 0; i < sizeof k_archs / sizeof *k_archs; i++)
    if (strlen(k_archs[i].name) == len && strncmp(k_archs[i].name, name, len) == 0) return &k_archs[i];
  return NULL;
}

static uint32_t round_up(uint32_t v, uint32_t g) { return g ? (v + g - 1) / g * g : v; }
static uint32_t div_up(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

/* Picks the smallest of the per-resource block counts; caps win ties (see the top). */
typedef struct { uint32_t count; const char *name; } limit_t;
static limit_t pick(const limit_t *resources, size_t n_res, limit_t cap) {
  limit_t best = cap;
  for (size_t i = 0; i < n_res; i++)
    if (resources[i].count < best.count) best = resources[i];
  return best;
}

/* A launch that cannot run at all. */
static uint32_t reject(double *out_percent, const char **out_limiter, const char *why) {
  if (out_percent) *out_percent = 0.0;
  if (out_limiter) *out_limiter = why;
  return 0;
}

static uint32_t occupancy_amd(const hkc_gpu_arch_t *a, const hkc_kernel_out_t *k, uint32_t threads,
                              double *out_percent, const char **out_limiter) {
  if (threads == 0 || threads > a->max_threads_per_block) return reject(out_percent, out_limiter, "waves");
  uint32_t waves = div_up(threads, a->wave_size); /* per workgroup */
  uint32_t simds = a->simds_per_cu, maxw = a->max_waves_per_simd;
  int unified = a->max_vgprs_per_thread > 256; /* gfx90a+: one 512-per-lane VGPR+AGPR file */
  int split = strcmp(a->name, "gfx908") == 0;   /* 256 VGPRs + 256 AGPRs, separate files */
  /* On the unified file comgr's .vgpr_count already includes the AGPRs (seen with ROCm 5.2
   * on gfx90a: a kernel using v0-v171 and a0-a79 reports 252 = align4(172) + 80 VGPRs and
   * 80 AGPRs). A count below the AGPRs cannot be inclusive: then add them. */
  uint32_t unified_total = k->vgprs >= k->agprs ? k->vgprs : round_up(k->vgprs, AMD_AGPR_ALIGN) + k->agprs;
  if (unified ? unified_total > a->max_vgprs_per_thread
              : k->vgprs > a->max_vgprs_per_thread || k->agprs > (split ? a->max_vgprs_per_thread : 0))
    return reject(out_percent, out_limiter, "vgprs");
  if (k->shared_bytes > a->max_lds_per_block) return reject(out_percent, out_limiter, "lds");
  uint32_t regs, file;
  if (unified) {
    regs = round_up(unified_total, a->vgpr_granule);
    file = a->vgprs_per_lane;
  } else if (split) {
    regs = round_up(k->vgprs > k->agprs ? k->vgprs : k->agprs, a->vgpr_granule);
    file = a->vgprs_per_lane / 2;
  } else {
    regs = round_up(k->vgprs, a->vgpr_granule);
    file = a->vgprs_per_lane;
  }
  /* Per-SIMD wave limits, then workgroups per CU for each. */
  uint32_t w_vgpr = regs ? file / regs : maxw;
  uint32_t w_sgpr = (a->sgprs_per_simd && k->sgprs) ? a->sgprs_per_simd / round_up(k->sgprs, AMD_SGPR_GRANULE)
                                                    : maxw;
  uint32_t lds = round_up(k->shared_bytes, AMD_LDS_GRANULE);
  limit_t res[3] = {
      {simds * (w_vgpr < maxw ? w_vgpr : maxw) / waves, "vgprs"},
      {simds * (w_sgpr < maxw ? w_sgpr : maxw) / waves, "sgprs"},
      {lds ? a->lds_per_cu / lds : UINT32_MAX, "lds"},
  };
  limit_t cap = {simds * maxw / waves, "waves"};
  limit_t best = pick(res, 3, cap);
  uint32_t resident = best.count * waves; /* waves on the CU */
  uint32_t per_simd = resident / simds;
  if (resident && !per_simd) per_simd = 1;
  if (out_percent) *out_percent = 100.0 * resident / (double)(simds * maxw);
  if (out_limiter) *out_limiter = best.name;
  return per_simd;
}

static uint32_t occupancy_nv(const hkc_gpu_arch_t *a, const hkc_kernel_out_t *k, uint32_t threads,
                             double *out_percent, const char **out_limiter) {
  if (threads == 0 || threads > a->max_threads_per_block) return reject(out_percent, out_limiter, "waves");
  if (k->vgprs > a->max_vgprs_per_thread) return reject(out_percent, out_limiter, "vgprs");
  if (k->shared_bytes > a->max_lds_per_block) return reject(out_percent, out_limiter, "lds");
  uint32_t warps = div_up(threads, NV_WARP_SIZE);
  uint32_t max_warps = a->simds_per_cu * a->max_waves_per_simd;
  uint32_t warp_regs = round_up(k->vgprs * NV_WARP_SIZE, a->vgpr_granule);
  uint32_t smem = round_up(k->shared_bytes + NV_SMEM_RESERVED, NV_SMEM_GRANULE);
  limit_t res[2] = {
      {warp_regs ? (a->vgprs_per_lane / warp_regs) / warps : UINT32_MAX, "vgprs"},
      {a->lds_per_cu / smem, "lds"},
  };
  limit_t by_warps = {max_warps / warps, "waves"};
  limit_t cap = by_warps.count < a->max_blocks_per_cu ? by_warps : (limit_t){a->max_blocks_per_cu, "blocks"};
  limit_t best = pick(res, 2, cap);
  if (out_percent) *out_percent = 100.0 * best.count * warps / (double)max_warps;
  if (out_limiter) *out_limiter = best.name;
  return best.count;
}

/* Contract in codegen.h. A launch that cannot run at all (too many threads, registers or
 * shared bytes) returns 0 with the offending resource as the limiter. */
uint32_t hkc_occupancy(const hkc_gpu_arch_t *arch, const hkc_kernel_out_t *kernel, uint32_t block_threads,
                       double *out_percent, const char **out_limiter) {
  if (arch->kind == HK_TARGET_CUDA) return occupancy_nv(arch, kernel, block_threads, out_percent, out_limiter);
  return occupancy_amd(arch, kernel, block_threads, out_percent, out_limiter);
}
