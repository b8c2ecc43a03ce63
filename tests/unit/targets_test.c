/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU target table and the occupancy model; every expected number is worked out by
 * hand in the comment next to it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hkc.h"

static void test_find(void **state) {
  const hkc_gpu_arch_t *a = hkc_gpu_arch_find("gfx90a:xnack-");
  assert_non_null(a);
  assert_string_equal(a->name, "gfx90a");
  assert_ptr_equal(hkc_gpu_arch_find("gfx90a:sramecc+:xnack-"), a);
  assert_ptr_equal(hkc_gpu_arch_find("gfx90a"), a);
  assert_string_equal(hkc_gpu_arch_find("sm_90a")->name, "sm_90a");
  assert_string_equal(hkc_gpu_arch_find("sm_90")->name, "sm_90");
  assert_int_equal(hkc_gpu_arch_find("sm_90a")->matrix, HKC_MATRIX_WGMMA);
  assert_int_equal(hkc_gpu_arch_find("sm_90")->matrix, HKC_MATRIX_MMA_SYNC);
  assert_int_equal(hkc_gpu_arch_find("gfx1030")->matrix, HKC_MATRIX_FMA);
  assert_int_equal(hkc_gpu_arch_find("gfx942")->compute_units, 304);
  assert_int_equal(hkc_gpu_arch_find("sm_90")->compute_units, 132);
  assert_int_equal(hkc_gpu_arch_find("sm_80")->compute_units, 108);
  assert_int_equal(hkc_gpu_arch_find("gfx90a")->compute_units, 110);
  assert_null(hkc_gpu_arch_find("gfx9"));
  assert_null(hkc_gpu_arch_find("gfx9999"));
  assert_null(hkc_gpu_arch_find("sm_9"));
  assert_null(hkc_gpu_arch_find(""));
  assert_null(hkc_gpu_arch_find(NULL));
}

static void test_list(void **state) {
  size_t n = 0;
  const hkc_gpu_arch_t *list = hkc_gpu_arch_list(&n);
  assert_true(n >= 8);
  static const char *const required[] = {"gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "sm_80", "sm_90", "sm_90a"};
  for (size_t r = 0; r < sizeof required / sizeof *required; r++) assert_non_null(hkc_gpu_arch_find(required[r]));
  for (size_t i = 0; i < n; i++) {
    const hkc_gpu_arch_t *a = &list[i];
    assert_true(a->kind == HK_TARGET_HIP || a->kind == HK_TARGET_CUDA);
    assert_true(a->wave_size == 32 || a->wave_size == 64);
    assert_true(a->compute_units > 0 && a->simds_per_cu > 0 && a->max_waves_per_simd > 0);
    assert_true(a->max_lds_per_block <= a->lds_per_cu);
    assert_true(a->hbm_gbps > 0 && a->matrix_tflops_f16 > 0);
    assert_non_null(a->source);
    assert_true(strlen(a->source) > 10);
    for (size_t j = 0; j < i; j++) assert_string_not_equal(a->name, list[j].name);
  }
}

typedef struct {
  const char *arch;
  uint32_t vgprs, agprs, sgprs, shared, threads;
  uint32_t expect;
  const char *limiter;
  double percent;
} occ_case_t;

static const occ_case_t k_cases[] = {
    /* gfx90a: 512 / 64 = 8 waves = the cap (tie -> "waves"); 4 waves per 256-thread WG */
    {"gfx90a", 64, 0, 16, 0, 256, 8, "waves", 100.0},
    /* 512 / 128 = 4 */
    {"gfx90a", 128, 0, 16, 0, 256, 4, "vgprs", 50.0},
    /* 65 -> granule 8 -> 72; 512 / 72 = 7 */
    {"gfx90a", 65, 0, 16, 0, 256, 7, "vgprs", 87.5},
    /* unified file, comgr's inclusive count: 128 VGPRs of which 64 AGPRs -> 4 */
    {"gfx90a", 128, 64, 16, 0, 256, 4, "vgprs", 50.0},
    /* inclusive 66 (62 arch -> 64, + 2 AGPRs) -> granule 8 -> 72; 512 / 72 = 7 */
    {"gfx90a", 66, 2, 16, 0, 256, 7, "vgprs", 87.5},
    /* a count below the AGPRs is not inclusive: 40 -> 40 + 64 = 104 -> 512 / 104 = 4 */
    {"gfx90a", 40, 64, 16, 0, 256, 4, "vgprs", 50.0},
    /* LDS: 64 KiB / 32 KiB = 2 WGs of 4 waves over 4 SIMDs -> 2 waves per SIMD */
    {"gfx90a", 32, 0, 16, 32768, 256, 2, "lds", 25.0},
    /* LDS granule 512: 20000 -> 20480; 65536 / 20480 = 3 WGs -> 3 waves per SIMD */
    {"gfx90a", 32, 0, 16, 20000, 256, 3, "lds", 37.5},
    /* SGPRs: 102 -> 112; 800 / 112 = 7 */
    {"gfx90a", 32, 0, 102, 0, 256, 7, "sgprs", 87.5},
    /* 1024-thread WG = 16 waves, 128 VGPRs -> 4 per SIMD -> 16 slots -> 1 WG -> 4 per SIMD */
    {"gfx90a", 128, 0, 16, 0, 1024, 4, "vgprs", 50.0},
    /* 256 VGPRs -> 2 per SIMD = 8 slots < 16 waves: cannot launch */
    {"gfx90a", 256, 0, 16, 0, 1024, 0, "vgprs", 0.0},
    /* 64-thread WGs (1 wave): 8 waves per SIMD, 32 WGs per CU */
    {"gfx90a", 64, 0, 16, 0, 64, 8, "waves", 100.0},
    /* more than 512 registers in all: cannot launch */
    {"gfx90a", 520, 264, 16, 0, 64, 0, "vgprs", 0.0},
    /* gfx908: separate files, max(40, 128) = 128 of 256 -> 2 waves */
    {"gfx908", 40, 128, 16, 0, 256, 2, "vgprs", 20.0},
    /* gfx908: 24 VGPRs -> 256 / 24 = 10 = the cap */
    {"gfx908", 24, 0, 16, 0, 256, 10, "waves", 100.0},
    /* gfx1030 wave32: 256 threads = 8 waves; 64 VGPRs (granule 16) -> 1024 / 64 = 16 = cap */
    {"gfx1030", 64, 0, 106, 0, 256, 16, "waves", 100.0},
    /* gfx1030: 72 -> 80; 1024 / 80 = 12 per SIMD -> 24 slots / 8 = 3 WGs -> 12 per SIMD */
    {"gfx1030", 72, 0, 106, 0, 256, 12, "vgprs", 75.0},
    /* too much LDS for one workgroup */
    {"gfx90a", 32, 0, 16, 65537, 256, 0, "lds", 0.0},
    /* sm_90: 255 regs x 32 = 8160 -> 8192 per warp; 65536 / 8192 = 8 warps = 1 block of 8 */
    {"sm_90", 255, 0, 0, 0, 256, 1, "vgprs", 12.5},
    /* 32 regs -> 1024 per warp -> 64 warps; 128 threads = 4 warps -> 16 blocks; 2048
     * threads allow 16 as well (tie -> "waves") */
    {"sm_90", 32, 0, 0, 0, 128, 16, "waves", 100.0},
    /* 64 threads, 32 regs: 32 blocks by warps and by the block cap -> "blocks" */
    {"sm_90", 32, 0, 0, 0, 64, 32, "blocks", 100.0},
    /* 100 KB + 1 KB reserved = 103424; 233472 / 103424 = 2 */
    {"sm_90", 32, 0, 0, 102400, 128, 2, "lds", 12.5},
    /* 227 KB: the largest block fits once (227 + 1 = 228 KB) */
    {"sm_90", 32, 0, 0, 232448, 128, 1, "lds", 6.25},
    /* 227 KB + 1 byte: cannot launch */
    {"sm_90", 32, 0, 0, 232449, 128, 0, "lds", 0.0},
    /* too many threads */
    {"sm_90", 32, 0, 0, 0, 1025, 0, "waves", 0.0},
    /* 64 regs x 256 threads: 2048 per warp -> 32 warps -> 4 blocks */
    {"sm_80", 64, 0, 0, 0, 256, 4, "vgprs", 50.0},
    /* sm_80: 163 KB + 1 KB = 164 KB = the SM: 1 block */
    {"sm_80", 32, 0, 0, 166912, 128, 1, "lds", 6.25},
};

static void test_occupancy(void **state) {
  for (size_t i = 0; i < sizeof k_cases / sizeof *k_cases; i++) {
    const occ_case_t *c = &k_cases[i];
    const hkc_gpu_arch_t *a = hkc_gpu_arch_find(c->arch);
    assert_non_null(a);
    hkc_kernel_out_t k;
    memset(&k, 0, sizeof k);
    k.vgprs = c->vgprs;
    k.agprs = c->agprs;
    k.sgprs = c->sgprs;
    k.shared_bytes = c->shared;
    double pct = -1;
    const char *lim = NULL;
    uint32_t got = hkc_occupancy(a, &k, c->threads, &pct, &lim);
    if (got != c->expect || strcmp(lim, c->limiter) != 0 || pct < c->percent - 1e-9 || pct > c->percent + 1e-9)
      print_message("case %zu (%s v%u a%u s%u lds%u t%u): got %u %s %.2f%%, want %u %s %.2f%%\n", i, c->arch,
                    c->vgprs, c->agprs, c->sgprs, c->shared, c->threads, got, lim, pct, c->expect, c->limiter,
                    c->percent);
    assert_int_equal(got, c->expect);
    assert_string_equal(lim, c->limiter);
    assert_true(pct > c->percent - 1e-9 && pct < c->percent + 1e-9);
  }
  /* NULL outputs are allowed */
  hkc_kernel_out_t k;
  memset(&k, 0, sizeof k);
  k.vgprs = 32;
  assert_int_equal(hkc_occupancy(hkc_gpu_arch_find("gfx90a"), &k, 256, NULL, NULL), 8);
  assert_int_equal(hkc_occupancy(hkc_gpu_arch_find("gfx90a"), &k, 0, NULL, NULL), 0);
}

/* The parts behind the drivers' device names: the specific forms before the general one. */
static void test_parts(void **state) {
  (void)state;
  static const struct {
    const char *device, *product;
    double gbps;
  } cases[] = {{"NVIDIA H100 80GB HBM3", "H100 SXM", 3350.0}, {"NVIDIA H100 PCIe", "H100 PCIe", 2000.0},
               {"NVIDIA H100 NVL", "H100 NVL", 3900.0},       {"NVIDIA H200", "H200 SXM", 4800.0},
               {"NVIDIA A100-SXM4-80GB", "A100 80GB SXM", 2039.0}, {"NVIDIA A100 80GB PCIe", "A100 80GB PCIe", 1935.0}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const hkc_gpu_part_t *p = hkc_gpu_part_for_device(cases[i].device);
    assert_non_null(p);
    assert_string_equal(p->product, cases[i].product);
    assert_true(p->hbm_gbps == cases[i].gbps && p->matrix_tflops_f16 > 0);
  }
  assert_null(hkc_gpu_part_for_device("Fake GPU"));
  assert_null(hkc_gpu_part_for_device(""));
  assert_null(hkc_gpu_part_for_device(NULL));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_find),
      cmocka_unit_test(test_parts),
      cmocka_unit_test(test_list),
      cmocka_unit_test(test_occupancy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
