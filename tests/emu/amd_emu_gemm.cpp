/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/emu/amd_emu_gemm.cpp -- runs one generated AMD GEMM kernel (gemm_mfma.hip,
 * gemm_mfma_pp.hip or gemm_skinny_amd.hip, as hkc_codegen_gpu wrote it for a key and
 * configuration) on the CPU
 * through amd_emu.h, against a double-precision reference on random inputs.
 *
 *   clang++ -std=c++17 -O1 -DHK_EMU_SOURCE='"kernel.hip"' amd_emu_gemm.cpp
 *   ./a.out M N K GRID THREADS SEED LATE
 *
 * GRID and THREADS are the launch the variant computed (hkc_gpu_launch_dims). The key's
 * flags come from the source's own macros (HK_TRANS_B, HK_HAS_BIAS, ...). C is poisoned with
 * NaN and guarded on both sides; exit 0 when every element matches, 1 otherwise, with the
 * first mismatches printed.
 */
#include "amd_emu.h"
#include HK_EMU_SOURCE

#include <vector>

#define HK_EMU_STR1(x) #x
#define HK_EMU_STR(x) HK_EMU_STR1(x)

#ifndef HK_NORM_A
#define HK_NORM_A 0
#endif
struct gemm_args {
  const HK_T *A, *B, *bias, *residual;
  HK_T *C;
  long long M, N, K;
  const HK_T *mul, *gamma;
  float eps;
};
static void kernel_body(void *p) {
  const gemm_args *g = (const gemm_args *)p;
#if HK_NORM_A /* a folded rmsnorm of A (gemm_skinny_amd): gamma [K], eps */
  HK_NAME(g->A, g->B, g->bias, g->residual, g->C, g->M, g->N, g->K, g->mul, g->gamma, g->eps);
#else
  HK_NAME(g->A, g->B, g->bias, g->residual, g->C, g->M, g->N, g->K, g->mul);
#endif
}

static uint64_t rng_state;
static double uniform(void) { /* xorshift64*, in [-1, 1) */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static std::vector<HK_T> random_tensor(size_t n) {
  std::vector<HK_T> v(n);
  for (size_t i = 0; i < n; i++) v[i] = HK_STORE((float)uniform());
  return v;
}

int main(int argc, char **argv) {
  if (argc != 8) {
    fprintf(stderr, "usage: %s M N K GRID THREADS SEED LATE\n", argv[0]);
    return 2;
  }
  const long long M = atoll(argv[1]), N = atoll(argv[2]), K = atoll(argv[3]);
  const unsigned grid = (unsigned)atoi(argv[4]), threads = (unsigned)atoi(argv[5]);
  rng_state = (uint64_t)atoll(argv[6]) * 0x9E3779B97F4A7C15ull + 1;
  hk_emu_late = atoi(argv[7]);
  const std::vector<HK_T> A = random_tensor((size_t)(M * K)), B = random_tensor((size_t)(K * N)),
                          bias = random_tensor((size_t)N), residual = random_tensor((size_t)(M * N)),
                          mul = random_tensor((size_t)(M * N)), gamma = random_tensor((size_t)K);
  const float eps = 1e-5f;
  const size_t guard = 64;
  const HK_T poison = (HK_T)0x7fff; /* NaN in f16 and bf16 */
  std::vector<HK_T> C((size_t)(M * N) + 2 * guard, poison);
  hk_emu_register(A.data(), A.size() * sizeof(HK_T));
  hk_emu_register(B.data(), B.size() * sizeof(HK_T));
  gemm_args g = {A.data(), B.data(), HK_HAS_BIAS ? bias.data() : NULL, HK_HAS_RESIDUAL ? residual.data() : NULL,
                 C.data() + guard, M, N, K, HK_HAS_MUL ? mul.data() : NULL, gamma.data(), eps};
  hk_emu_launch(grid, threads, (uint64_t)atoll(argv[6]), kernel_body, &g);

  /* reference: double sums of the rounded inputs, then the epilogue in f32 as the kernels do */
  /* the output's rounding unit: bf16 (8 bits of significand) cannot hold 1 + 2^-9, f16 can */
  const double unit = HK_STORE(1.0f + 1.0f / 512) == HK_STORE(1.0f) ? 1.0 / 256 : 1.0 / 2048;
  long long bad = 0;
  for (size_t i = 0; i < guard; i++)
    if (C[i] != poison || C[C.size() - 1 - i] != poison) bad++;
  if (bad) fprintf(stderr, "writes outside C\n");
  for (long long m = 0; m < M; m++) {
    /* HK_NORM_A: A's row as the rmsnorm would store it (x gamma, 16-bit), its 1 / rms after the sums */
    double ss = 0;
    for (long long k = 0; k < K; k++) ss += (double)HK_LOAD(A[(size_t)(m * K + k)]) * HK_LOAD(A[(size_t)(m * K + k)]);
    const double row_scale = HK_NORM_A ? 1.0 / sqrt(ss / (double)K + eps) : 1.0;
    for (long long n = 0; n < N; n++) {
      double s = 0;
      for (long long k = 0; k < K; k++) {
        const float b = HK_TRANS_B ? HK_LOAD(B[(size_t)(n * K + k)]) : HK_LOAD(B[(size_t)(k * N + n)]);
        const float a = HK_LOAD(A[(size_t)(m * K + k)]);
        s += (double)(HK_NORM_A ? HK_LOAD(HK_STORE(a * HK_LOAD(gamma[(size_t)k]))) : a) * b;
      }
      s *= row_scale;
      float v = HK_ACT((float)s + (HK_HAS_BIAS ? HK_LOAD(bias[(size_t)n]) : 0.0f));
      if (HK_HAS_MUL) v *= HK_LOAD(mul[(size_t)(m * N + n)]);
      if (HK_HAS_RESIDUAL) v += HK_LOAD(residual[(size_t)(m * N + n)]);
      const float got = HK_LOAD(C[guard + (size_t)(m * N + n)]);
      if (!(fabs((double)got - v) <= 2 * unit * (fabs(v) + 1.0))) {
        if (bad++ < 5) fprintf(stderr, "C[%lld][%lld] = %g, want %g\n", m, n, got, v);
      }
    }
  }
  printf("%s M=%lld N=%lld K=%lld grid %u x %u late=%d: %lld bad\n", HK_EMU_STR(HK_NAME), M, N, K, grid, threads,
         hk_emu_late, bad);
  return bad ? 1 : 0;
}
