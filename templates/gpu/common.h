/*
 * templates/gpu/common.h -- helpers shared by every GPU op template, after the vendor
 * prelude (which supplies HK_DEVICE, HK_SYNC, hk_shfl_xor, hk_inf and the conversions).
 */

/* ---- activations (DESIGN "Op semantics"), the same formulas as templates/host ----------- */
HK_DEVICE float hk_act_none(float x) { return x; }
HK_DEVICE float hk_act_relu(float x) { return x > 0.0f ? x : 0.0f; }
/* Exact erf form, torch.nn.functional.gelu's default. */
HK_DEVICE float hk_act_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
HK_DEVICE float hk_act_gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
HK_DEVICE float hk_act_silu(float x) { return x / (1.0f + expf(-x)); }

HK_DEVICE long long hk_min_ll(long long a, long long b) { return a < b ? a : b; }

/* ---- block reductions ------------------------------------------------------------------------
 * Lanes are reduced in groups of HK_RED_GROUP = 32 with xor shuffles (offsets < 32 stay
 * inside a group on wave32 and wave64 alike), then the group results through shared
 * memory. Requirements: blockDim.x is a multiple of 32 and at most 32 * HK_RED_GROUP, and
 * every thread of the block calls (barriers inside). Every thread gets the same result:
 * all add the group partials in the same order. `red` is HK_RED_GROUP floats of shared
 * memory; calls may reuse it back to back (the leading barrier orders them). */
#define HK_RED_GROUP 32

HK_DEVICE float hk_block_sum(float v, float *red) {
  for (int o = HK_RED_GROUP / 2; o > 0; o >>= 1) v += hk_shfl_xor(v, o);
  HK_SYNC();
  if ((HK_TID & (HK_RED_GROUP - 1)) == 0) red[HK_TID / HK_RED_GROUP] = v;
  HK_SYNC();
  float s = 0.0f;
  for (int g = 0; g < HK_NTHREADS / HK_RED_GROUP; g++) s += red[g];
  return s;
}

HK_DEVICE float hk_block_max(float v, float *red) {
  for (int o = HK_RED_GROUP / 2; o > 0; o >>= 1) v = fmaxf(v, hk_shfl_xor(v, o));
  HK_SYNC();
  if ((HK_TID & (HK_RED_GROUP - 1)) == 0) red[HK_TID / HK_RED_GROUP] = v;
  HK_SYNC();
  float m = -hk_inf();
  for (int g = 0; g < HK_NTHREADS / HK_RED_GROUP; g++) m = fmaxf(m, red[g]);
  return m;
}
