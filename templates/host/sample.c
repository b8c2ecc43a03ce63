/* SPDX-License-Identifier: Apache-2.0 */
/* sample: out[r] = an index of row r drawn with its params {seed, top_k, temperature, top_p}
 * (lower.h gives the definition step by step; docs/GENERATE.md "sample"; templates/gpu/
 * sample.hip is the same definition on GPUs). Args: T x, I32 params [rows, 4], I32 out,
 * I rows, I cols. A block is one row. The thresholds are found as on the GPU, by radix
 * selects over the keys a byte at a time (256-bin histograms on the stack, counts for tau_k,
 * uint64 masses for tau_p), so nothing of the row is staged and no memory is allocated; each
 * pass recomputes z = x / T. */
#ifndef HK_SAMPLE_COMMON
#define HK_SAMPLE_COMMON /* the helpers, once for every dtype's instance */

/* z's order-preserving key: the sign bit flipped for +0 and above, every bit for -0 and below. */
static inline uint32_t hk_sample_key(float z) {
  const uint32_t u = hk_f32_bits(z);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

static inline uint64_t hk_sample_splitmix64(uint64_t v) {
  v += 0x9e3779b97f4a7c15ull;
  v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
  v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
  return v ^ (v >> 31);
}

/* g_j = -log(-log(u)), u = (h + 0.5) / 2^23 from the top 23 bits h of the hash of (seed, j):
 * exact in f32 and inside (0, 1), so g is finite. */
static inline float hk_sample_gumbel(int32_t seed, int64_t j) {
  const uint64_t h = hk_sample_splitmix64((uint64_t)(uint32_t)seed << 32 | (uint64_t)j) >> 41;
  const float u = ((float)h + 0.5f) * 0x1p-23f;
  return -logf(-logf(u));
}

/* W_j = (uint64)(w * 2^32), w = exp(z - m) and 1 where z == m (an infinite m too). */
static inline uint64_t hk_sample_mass(float z, float m) {
  const float w = z == m ? 1.0f : expf(z - m);
  return (uint64_t)(w * 0x1p32f);
}

/* The bin where the total from the top first reaches *rank (>= 1); *rank becomes what is left
 * of it inside the bin. -1 when the total stays below it. */
static inline int hk_sample_select(const uint64_t hist[256], uint64_t *rank) {
  for (int b = 255; b >= 0; b--) {
    if (*rank <= hist[b]) return b;
    *rank -= hist[b];
  }
  return -1;
}
#endif

HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *x = (const HK_T *)hk_arg_ptr(args, 0);
  const int32_t *params = (const int32_t *)hk_arg_ptr(args, 1);
  int32_t *out = (int32_t *)hk_arg_ptr(args, 2);
  const int64_t rows = hk_arg_i64(args, 3), cols = hk_arg_i64(args, 4);
  for (int64_t r = block_begin; r < (int64_t)block_end && r < rows; r++) {
    const HK_T *xr = x + r * cols;
    const int32_t *pr = params + r * 4, seed = pr[0], top_k = pr[1];
    const float t = hk_bits_f32((uint32_t)pr[2]), top_p = hk_bits_f32((uint32_t)pr[3]);
    float best = 0.0f;
    int64_t at = -1;
    if (!(t > 0.0f && t < INFINITY) || top_k == 1) { /* greedy: argmax's rule */
      for (int64_t c = 0; c < cols; c++) {
        const float v = HK_LOAD(xr[c]);
        if (v == v && (at < 0 || v > best)) {
          best = v;
          at = c;
        }
      }
      out[r] = at < 0 ? 0 : (int32_t)at;
      continue;
    }
    for (int64_t c = 0; c < cols; c++) { /* m = max z */
      const float z = HK_LOAD(xr[c]) / t;
      if (z == z && (at < 0 || z > best)) {
        best = z;
        at = c;
      }
    }
    if (at < 0) { /* no number */
      out[r] = 0;
      continue;
    }
    const float m = best;
    /* tau_k: the k-th largest key, a byte a pass (0 when k is at least the row's numbers) */
    uint32_t tau_k = 0;
    if (top_k > 1 && top_k < cols) {
      uint64_t rank = (uint64_t)top_k;
      for (int shift = 24; shift >= 0; shift -= 8) {
        const uint32_t hi = shift < 24 ? 0xffffffffu << (shift + 8) : 0u;
        uint64_t hist[256] = {0};
        for (int64_t c = 0; c < cols; c++) {
          const float z = HK_LOAD(xr[c]) / t;
          if (z != z) continue;
          const uint32_t key = hk_sample_key(z);
          if ((key & hi) == tau_k) hist[(key >> shift) & 0xffu]++;
        }
        const int bin = hk_sample_select(hist, &rank);
        if (bin < 0) break; /* k at least the row's numbers (first pass only): all of them, tau_k 0 */
        tau_k |= (uint32_t)bin << shift;
      }
    }
    /* tau_p: the largest key of S_k whose mass from the top reaches P, a byte a pass */
    uint32_t tau = tau_k;
    if (top_p > 0.0f && top_p < 1.0f) {
      uint64_t rank = 0;
      uint32_t prefix = 0;
      for (int shift = 24; shift >= 0; shift -= 8) {
        const uint32_t hi = shift < 24 ? 0xffffffffu << (shift + 8) : 0u;
        uint64_t hist[256] = {0};
        for (int64_t c = 0; c < cols; c++) {
          const float z = HK_LOAD(xr[c]) / t;
          if (z != z) continue;
          const uint32_t key = hk_sample_key(z);
          if (key >= tau_k && (key & hi) == prefix) hist[(key >> shift) & 0xffu] += hk_sample_mass(z, m);
        }
        if (shift == 24) { /* P from Wk, the whole of S_k's mass */
          uint64_t wk = 0;
          for (int b = 0; b < 256; b++) wk += hist[b];
          rank = (uint64_t)((double)top_p * (double)wk);
          if (rank < 1) rank = 1;
        }
        prefix |= (uint32_t)hk_sample_select(hist, &rank) << shift; /* rank <= the prefix's mass: found */
      }
      tau = prefix > tau_k ? prefix : tau_k;
    }
    /* the Gumbel-max draw over S */
    at = -1;
    for (int64_t c = 0; c < cols; c++) {
      const float z = HK_LOAD(xr[c]) / t;
      if (z != z || hk_sample_key(z) < tau) continue;
      const float s = z + hk_sample_gumbel(seed, c);
      if (at < 0 || s > best) {
        best = s;
        at = c;
      }
    }
    out[r] = (int32_t)at;
  }
}
