/* SPDX-License-Identifier: Apache-2.0 */
/*
 * templates/gpu/gemm_epilogue_mfma.h -- the epilogue of the AMD MFMA GEMMs (gemm_mfma.hip,
 * gemm_mfma_pp.hip), after tile_amd.h: one 32x32x8 accumulator fragment from registers to
 * C with the semantics of gemm.hip and templates/host/gemm.c,
 *   C = act(acc + bias) * mul + residual, one rounding (HK_STORE),
 * mul (the fused SwiGLU gate) and residual read with the same per-lane 2-byte loads.
 */

/* Stores fragment `acc` of lane `lane` whose rows start at global row `row0`: value r of the
 * lane is C[row0 + hk_mfma32_c_row(lane, r)][gn], gn = its column (the caller's, from
 * hk_mfma32_c_col, already checked < N; bv = bias[gn] or 0). Rows >= M are skipped.
 * hk_mfma32_c_row(lane, r) = 4 (lane / 32) + 8 (r / 4) + r % 4: one lane-dependent row and
 * constant steps, so the compiler keeps one row per lane instead of sixteen. */
HK_DEVICE void hk_mfma_store_frag32(const hk_f32x16 acc, long long row0, long long gn, float bv, long long M,
                                    long long N, const HK_T *residual, const HK_T *mul, HK_T *C, int lane) {
  const long long rl = row0 + 4 * (lane >> 5); /* the lane's first row */
  const long long at = rl * N + gn;
#pragma unroll
  for (int r = 0; r < 16; r++) {
    const int dr = 8 * (r >> 2) + (r & 3); /* hk_mfma32_c_row(lane, r) - 4 (lane / 32) */
    if (rl + dr < M) {
      const long long x = at + dr * N;
      float v = HK_ACT(acc[r] + bv);
#if HK_HAS_MUL
      v *= HK_LOAD(mul[x]);
#endif
#if HK_HAS_RESIDUAL
      v += HK_LOAD(residual[x]);
#endif
      C[x] = HK_STORE(v);
    }
  }
}

/* bias[gn] as f32, or 0 without a bias. */
HK_DEVICE float hk_mfma_bias(const HK_T *bias, long long gn) {
#if HK_HAS_BIAS
  return HK_LOAD(bias[gn]);
#else
  (void)bias;
  (void)gn;
  return 0.0f;
#endif
}
