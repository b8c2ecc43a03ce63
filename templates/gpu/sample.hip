/* SPDX-License-Identifier: Apache-2.0 */
/* sample: out[r] = an index of row r drawn with its params {seed, top_k, temperature, top_p}
 * (lower.h gives the definition step by step; docs/GENERATE.md "sample"; templates/host/
 * sample.c is the same definition on the CPU). Args: T x, const int *params (i32 [rows, 4]),
 * int *out (i32), I rows, I cols; with HK_SAMPLE_SPLIT > 1 (sample_split on NVIDIA, sample_split_wave
 * on AMD CDNA: variant_sample_nv.c)
 * the launch workspace: float *part, unsigned *sem (one counter per row, zero at the start and
 * left at zero).
 *
 * Greedy rows with HK_SAMPLE_SPLIT > 1: the row's columns in HK_SAMPLE_SPLIT pieces, a block
 * each (a decode step has a few rows, and one block per row reads a vocabulary in many round
 * trips); each piece's (value, index) to `part`, the last piece to arrive on the row's counter
 * (hk_split_arrive: tile_nv.h, split_amd.h) takes the best of them in piece order: argmax's rule, the same
 * index whichever arrives last. A row that samples is drawn by its piece 0 as below.
 *
 * A block is one row (grid-stride beyond grid.x); HK_THREADS >= 256, a thread per bin of the
 * radix selects. Each pass reads the row again (from L2 at a vocabulary's size) and recomputes
 * z = x / T, so nothing of the row is staged:
 *   1. the greedy rows (T not > 0 or not finite, top_k 1): argmax's pass and reduction;
 *   2. m = max z and whether the row has a number, and with a top_k the counts of the keys'
 *      top byte (the first pass of tau_k's select);
 *   3. tau_k: the other three bytes, 8 bits a pass, each a histogram of the keys that match
 *      the bytes chosen so far;
 *   4. tau_p (top_p < 1): four passes over S_k whose histograms weigh each key by its mass
 *      W_j (the first one's total is Wk, which sets the target P);
 *   5. the Gumbel-max draw over S, a (value, index) block reduction.
 * Histograms are uint64 in shared memory, one per group of HK_RED_GROUP lanes (fewer lanes on
 * one address: logits crowd a few top-byte bins), filled with integer atomics and summed over
 * the groups in a fixed order: integer sums, so the result does not depend on the order in
 * which threads run. A select walks the bins from the top with a suffix scan (a thread per
 * bin): the bin where the running total first reaches the rank holds the selected key. */

#ifndef HK_SAMPLE_SPLIT
#define HK_SAMPLE_SPLIT 1
#endif
#define SAMPLE_BINS 256
#define SAMPLE_GROUPS (HK_THREADS / HK_RED_GROUP)
static_assert(HK_THREADS >= SAMPLE_BINS && HK_THREADS % HK_RED_GROUP == 0, "sample: a thread per bin");

/* What a block shares: the groups' histograms, the bins' suffix sums, the selected bin
 * (SAMPLE_BINS: none) with the rank left inside it, and the (value, index) reduction's groups. */
struct sample_shared {
  unsigned long long hist[SAMPLE_GROUPS][SAMPLE_BINS];
  unsigned long long scan[SAMPLE_BINS];
  unsigned long long sel_rank;
  int sel_bin;
  float red_v[HK_RED_GROUP];
  int red_i[HK_RED_GROUP];
};

/* z's order-preserving key: the sign bit flipped for +0 and above, every bit for -0 and below. */
HK_DEVICE unsigned sample_key(float z) {
  const unsigned u = __float_as_uint(z);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

HK_DEVICE unsigned long long sample_splitmix64(unsigned long long v) {
  v += 0x9e3779b97f4a7c15ull;
  v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
  v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
  return v ^ (v >> 31);
}

/* g_j = -log(-log(u)), u = (h + 0.5) / 2^23 from the top 23 bits h of the hash of (seed, j):
 * exact in f32 and inside (0, 1), so g is finite. */
HK_DEVICE float sample_gumbel(int seed, long long j) {
  const unsigned long long h =
      sample_splitmix64(((unsigned long long)(unsigned)seed << 32) | (unsigned long long)j) >> 41;
  const float u = ((float)h + 0.5f) * 1.1920928955078125e-7f; /* 2^-23 */
  return -logf(-logf(u));
}

/* W_j = (uint64)(w * 2^32), w = exp(z - m) and 1 where z == m (an infinite m too). */
HK_DEVICE unsigned long long sample_mass(float z, float m) {
  const float w = z == m ? 1.0f : expf(z - m);
  return (unsigned long long)(w * 4294967296.0f);
}

/* Whether candidate (v2, i2) beats (v, i); index -1: no candidate. */
HK_DEVICE int sample_better(float v, int i, float v2, int i2) {
  return i2 >= 0 && (i < 0 || v2 > v || (v2 == v && i2 < i));
}

/* The block's best (value, index) pair, the smaller index of equal values, to every thread:
 * xor shuffles within the groups (the index travels as a float's bits), then each thread
 * walks the groups' results in group order. */
HK_DEVICE void sample_block_best(float *v, int *i, sample_shared *sm) {
  float best = *v;
  int at = *i;
  for (int o = HK_RED_GROUP / 2; o > 0; o >>= 1) {
    const float v2 = hk_shfl_xor(best, o);
    const int i2 = (int)__float_as_uint(hk_shfl_xor(__uint_as_float((unsigned)at), o));
    if (sample_better(best, at, v2, i2)) {
      best = v2;
      at = i2;
    }
  }
  HK_SYNC(); /* the previous reduction's groups are read */
  if ((HK_TID & (HK_RED_GROUP - 1)) == 0) {
    sm->red_v[HK_TID / HK_RED_GROUP] = best;
    sm->red_i[HK_TID / HK_RED_GROUP] = at;
  }
  HK_SYNC();
  best = sm->red_v[0];
  at = sm->red_i[0];
  for (int g = 1; g < SAMPLE_GROUPS; g++)
    if (sample_better(best, at, sm->red_v[g], sm->red_i[g])) {
      best = sm->red_v[g];
      at = sm->red_i[g];
    }
  *v = best;
  *i = at;
}

HK_DEVICE void sample_clear(sample_shared *sm) {
  for (int b = HK_TID; b < SAMPLE_GROUPS * SAMPLE_BINS; b += HK_THREADS) sm->hist[b / SAMPLE_BINS][b % SAMPLE_BINS] = 0;
}

/* After a histogram pass: the bin b where the total from the top first reaches *rank (the
 * bins' suffix sums s: s[b] >= rank > s[b + 1]); *rank becomes what is left of it inside b.
 * top_p >= 0 (the first pass of tau_p's select): the rank is first set from the total, Wk:
 * max(1, (uint64)(top_p * Wk)). Returns b, or SAMPLE_BINS when the total stays below the
 * rank (top_k beyond the numbers of the row). */
HK_DEVICE int sample_select(sample_shared *sm, unsigned long long *rank, float top_p) {
  const int b = HK_TID;
  if (b == 0) sm->sel_bin = SAMPLE_BINS;
  HK_SYNC(); /* the histograms are complete */
  if (b < SAMPLE_BINS) {
    unsigned long long t = 0;
    for (int g = 0; g < SAMPLE_GROUPS; g++) t += sm->hist[g][b];
    sm->scan[b] = t;
  }
  for (int o = 1; o < SAMPLE_BINS; o <<= 1) { /* inclusive suffix sums, Hillis-Steele */
    HK_SYNC();
    const unsigned long long s = b < SAMPLE_BINS ? sm->scan[b] + (b + o < SAMPLE_BINS ? sm->scan[b + o] : 0ull) : 0ull;
    HK_SYNC();
    if (b < SAMPLE_BINS) sm->scan[b] = s;
  }
  HK_SYNC();
  unsigned long long want = *rank;
  if (top_p >= 0.0f) {
    want = (unsigned long long)((double)top_p * (double)sm->scan[0]);
    if (want < 1) want = 1;
  }
  if (b < SAMPLE_BINS) {
    const unsigned long long above = b + 1 < SAMPLE_BINS ? sm->scan[b + 1] : 0ull;
    if (sm->scan[b] >= want && above < want) {
      sm->sel_bin = b;
      sm->sel_rank = want - above;
    }
  }
  HK_SYNC();
  *rank = sm->sel_rank;
  return sm->sel_bin;
}

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *x, const int *params, int *out, long long rows, long long cols
#if HK_SAMPLE_SPLIT > 1
        , float *part, unsigned *sem
#endif
) {
  HK_PDL_ENTRY(); /* a pdl variant (variant_simple.c): nothing is touched before it */
  HK_SHARED sample_shared sm;
  const int g = HK_TID / HK_RED_GROUP;
  /* a greedy row's piece: whole 16-byte vectors (row_best.h), the last piece the rest */
  const long long chunk = ((cols + HK_SAMPLE_SPLIT - 1) / HK_SAMPLE_SPLIT + 7) / 8 * 8;
  for (long long u = HK_BID; u < rows * HK_SAMPLE_SPLIT; u += HK_NBLOCKS) { /* (row, piece) */
    const long long r = u / HK_SAMPLE_SPLIT, piece = u % HK_SAMPLE_SPLIT;
    const HK_T *xr = x + r * cols;
    const int seed = params[r * 4], top_k = params[r * 4 + 1];
    const float t = __uint_as_float((unsigned)params[r * 4 + 2]), top_p = __uint_as_float((unsigned)params[r * 4 + 3]);
    float best = 0.0f;
    int at = -1;
    if (!(t > 0.0f && t < hk_inf()) || top_k == 1) { /* greedy: argmax's rule */
#if HK_SAMPLE_SPLIT > 1
      const long long c0 = piece * chunk, c1 = hk_min_ll(cols, c0 + chunk);
      if (c0 < c1) {
        row_best_scan(xr + c0, c1 - c0, &best, &at); /* row_best.h */
        if (at >= 0) at += (int)c0;
      }
      sample_block_best(&best, &at, &sm);
      if (HK_TID != 0) continue; /* thread 0 holds the piece's best: it alone goes on */
      float *pp = part + 2 * (r * HK_SAMPLE_SPLIT + piece);
      hk_st_part(pp, best); /* tile_nv.h / split_amd.h: thread 0 stores, arrives and merges alone */
      hk_st_part(pp + 1, __int_as_float(at));
      if (!hk_split_arrive(sem + r, HK_SAMPLE_SPLIT)) continue;
      best = 0.0f;
      at = -1;
      for (int q = 0; q < HK_SAMPLE_SPLIT; q++) { /* piece order: ranges in increasing index */
        const float v2 = hk_ld_part(part + 2 * (r * HK_SAMPLE_SPLIT + q));
        const int i2 = __float_as_int(hk_ld_part(part + 2 * (r * HK_SAMPLE_SPLIT + q) + 1));
        if (sample_better(best, at, v2, i2)) best = v2, at = i2;
      }
      out[r] = at < 0 ? 0 : at;
#else
      (void)chunk, (void)piece;
      row_best_scan(xr, cols, &best, &at); /* row_best.h */
      sample_block_best(&best, &at, &sm);
      if (HK_TID == 0) out[r] = at < 0 ? 0 : at;
#endif
      continue;
    }
    if (piece != 0) continue; /* a row that samples: its piece 0 draws it */
    /* m, and the top byte of the keys when there is a top_k */
    const int by_k = top_k > 1 && top_k < cols;
    if (by_k) sample_clear(&sm);
    HK_SYNC();
    for (long long c = HK_TID; c < cols; c += HK_THREADS) {
      const float z = HK_LOAD(xr[c]) / t;
      if (z != z) continue;
      if (at < 0 || z > best) {
        best = z;
        at = (int)c;
      }
      if (by_k) atomicAdd(&sm.hist[g][sample_key(z) >> 24], 1ull);
    }
    sample_block_best(&best, &at, &sm);
    if (at < 0) { /* no number */
      if (HK_TID == 0) out[r] = 0;
      continue;
    }
    const float m = best;
    /* tau_k: the k-th largest key, a byte a pass */
    unsigned tau_k = 0;
    if (by_k) {
      unsigned long long rank = (unsigned long long)top_k;
      for (int shift = 24; shift >= 0; shift -= 8) {
        if (shift < 24) {
          const unsigned hi = 0xffffffffu << (shift + 8);
          sample_clear(&sm);
          HK_SYNC();
          for (long long c = HK_TID; c < cols; c += HK_THREADS) {
            const float z = HK_LOAD(xr[c]) / t;
            if (z != z) continue;
            const unsigned key = sample_key(z);
            if ((key & hi) == tau_k) atomicAdd(&sm.hist[g][(key >> shift) & 0xffu], 1ull);
          }
        }
        const int bin = sample_select(&sm, &rank, -1.0f);
        if (bin == SAMPLE_BINS) break; /* k at least the row's numbers (first pass only): all of them, tau_k 0 */
        tau_k |= (unsigned)bin << shift;
      }
    }
    /* tau_p: the largest key of S_k whose mass from the top reaches P, a byte a pass */
    unsigned tau = tau_k;
    if (top_p > 0.0f && top_p < 1.0f) {
      unsigned long long rank = 0;
      unsigned prefix = 0;
      for (int shift = 24; shift >= 0; shift -= 8) {
        const unsigned hi = shift < 24 ? 0xffffffffu << (shift + 8) : 0u;
        sample_clear(&sm);
        HK_SYNC();
        for (long long c = HK_TID; c < cols; c += HK_THREADS) {
          const float z = HK_LOAD(xr[c]) / t;
          if (z != z) continue;
          const unsigned key = sample_key(z);
          if (key >= tau_k && (key & hi) == prefix)
            atomicAdd(&sm.hist[g][(key >> shift) & 0xffu], sample_mass(z, m));
        }
        prefix |= (unsigned)sample_select(&sm, &rank, shift == 24 ? top_p : -1.0f) << shift;
      }
      tau = prefix > tau_k ? prefix : tau_k;
    }
    /* the Gumbel-max draw over S */
    best = 0.0f;
    at = -1;
    for (long long c = HK_TID; c < cols; c += HK_THREADS) {
      const float z = HK_LOAD(xr[c]) / t;
      if (z != z || sample_key(z) < tau) continue;
      const float s = z + sample_gumbel(seed, c);
      if (at < 0 || s > best) {
        best = s;
        at = (int)c;
      }
    }
    sample_block_best(&best, &at, &sm);
    if (HK_TID == 0) out[r] = at;
  }
}
