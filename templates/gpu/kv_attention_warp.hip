/* SPDX-License-Identifier: Apache-2.0 */
/* kv_attention on NVIDIA (warps of 32), f16/bf16, head_dim HK_HEAD_DIM = 64 or 128, rows
 * aligned to 8 elements: a block per (token row, kv head) computes the q heads that read
 * that kv head (the group: heads / kv_heads of them, HK_KVA_GROUP at a time), so each cached
 * key and value is read once per row (per HK_KVA_GROUP heads of a larger group). The semantics are
 * lower.h's (templates/gpu/kv_attention.hip is the portable form):
 *   row t is valid when 1 <= ctx[t] <= max_seq and 0 <= slot[t] < slots; it attends to the
 *   keys [max(0, ctx - window), ctx) (window 0: from 0) of cache[layer, slot]; an invalid
 *   row writes zeros.
 * Units: (row, kv head, round of HK_KVA_GROUP q heads, piece): a tile (row, kv head, round)
 * splits its keys into `split` pieces of whole 32-key chunks (flash-decoding: a decode step
 * has a few rows, and without the split a few blocks would read the whole cache). split is
 * the launch's: gridDim.x / tiles, 1..HK_KVA_MAX_SPLIT (variant_kv_nv.c sizes the grid so).
 * Work: the block's HK_KVA_WARPS warps take chunks of 32 keys in turn. In a chunk, lane i
 * scores key base + i against every q head of the group (the key's row in 16-byte loads, q
 * from shared memory, scaled by scale * log2 e so the softmax runs in exp2), the warp keeps
 * a running max and sum per head (online softmax), puts its probabilities in shared memory,
 * and then every lane accumulates its HK_HEAD_DIM / 32 columns of each value row (a warp reads
 * a row in one coalesced access). A lane issues its key loads and then all 32 of the chunk's
 * value loads before it does any arithmetic (the values do not depend on the scores): the
 * chunk costs about one memory latency, not one per key. At the end the warps' (max, sum,
 * output) triples are combined in shared memory, in warp order (the same bits every run). f32
 * throughout, one rounding to the dtype at the store.
 * Split (> 1): each piece stores its unnormalised output and (max, sum) per head in the
 * launch's scratch `part` (HK_KVA_GROUP (HK_HEAD_DIM + 2) floats per unit) and arrives on the
 * tile's counter in `sem` (tile_nv.h, split GEMMs); the last piece merges every piece in
 * piece order (the same bits whichever arrives last): the pieces' (max, sum) pairs into shared
 * memory in one parallel load, their weights per head from there, then each output element
 * as the weighted sum of the pieces' partials (loads unrolled, in flight together). Pieces of
 * an invalid row skip, piece 0 writing the zeros.
 * Args: T q, T k_cache, T v_cache, I32 ctx, I32 slot, T out, I rows, I heads, I kv_heads, I dh,
 *       I layer, I slots, I max_seq, I window, F scale; then the workspace: float *part,
 *       unsigned *sem (one counter per tile, zero at the start and left at zero).
 * Grid: tiles * split blocks (tiles alone, grid-stride, when split is 1), HK_KVA_WARPS * 32 threads. */
#define KVA_DPL (HK_HEAD_DIM / 32) /* value columns per lane */
#define KVA_THREADS (HK_KVA_WARPS * 32)
#define KVA_PART (HK_KVA_GROUP * (HK_HEAD_DIM + 2)) /* floats of one piece's partial */

HK_DEVICE void kva_unpack8(uint4 u, float *f) { /* 8 contiguous elements of one 16-byte load */
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = HK_LOAD((HK_T)(w[i] & 0xffffu));
    f[2 * i + 1] = HK_LOAD((HK_T)(w[i] >> 16));
  }
}

#if KVA_DPL == 2
typedef unsigned kva_v_t; /* a lane's columns of one value row */
#else
typedef uint2 kva_v_t;
#endif

HK_DEVICE void kva_unpack_v(kva_v_t v, float *f) {
#if KVA_DPL == 2
  f[0] = HK_LOAD((HK_T)(v & 0xffffu));
  f[1] = HK_LOAD((HK_T)(v >> 16));
#else
  f[0] = HK_LOAD((HK_T)(v.x & 0xffffu));
  f[1] = HK_LOAD((HK_T)(v.x >> 16));
  f[2] = HK_LOAD((HK_T)(v.y & 0xffffu));
  f[3] = HK_LOAD((HK_T)(v.y >> 16));
#endif
}

HK_GLOBAL void __launch_bounds__(KVA_THREADS, 2) /* two blocks per SM: at most 128 registers */
HK_NAME(const HK_T *q, const HK_T *k_cache, const HK_T *v_cache, const int *ctx, const int *slot, HK_T *out,
        long long rows, long long heads, long long kv_heads, long long dh, long long layer, long long slots,
        long long max_seq, long long window, float scale, float *part, unsigned *sem) {
  __shared__ float qs[HK_KVA_GROUP][HK_HEAD_DIM];
  __shared__ float ps[HK_KVA_WARPS][HK_KVA_GROUP][32];
  __shared__ float om[HK_KVA_WARPS][HK_KVA_GROUP], ol[HK_KVA_WARPS][HK_KVA_GROUP];
  __shared__ float oacc[HK_KVA_WARPS][HK_KVA_GROUP][HK_HEAD_DIM];
  __shared__ float pm[HK_KVA_MAX_SPLIT][HK_KVA_GROUP], pl[HK_KVA_MAX_SPLIT][HK_KVA_GROUP], tot[HK_KVA_GROUP];
  __shared__ int last;
  (void)dh;
  /* a pdl variant: waits for the launches before it, then lets the next one (the output
   * projection, whose blocks prefetch their weights before they wait for this launch) start */
  HK_PDL_ENTRY();
  const int warp = HK_TID / 32, lane = HK_TID % 32;
  const int group = (int)(heads / kv_heads);
  const int rounds = (group + HK_KVA_GROUP - 1) / HK_KVA_GROUP;
  const long long tiles = rows * kv_heads * rounds; /* (row, kv head, round): one counter each */
  long long split = hk_min_ll(HK_KVA_MAX_SPLIT, (long long)HK_NBLOCKS / tiles);
  if (split < 1) split = 1; /* a grid clamped below tiles: grid-stride, no split */
  const long long kv_width = kv_heads * HK_HEAD_DIM;
  for (long long u = HK_BID; u < tiles * split; u += HK_NBLOCKS) {
    const long long tile = u / split, piece = u % split;
    const long long t = tile / (kv_heads * rounds), h = tile / rounds % kv_heads;
    const int g0 = (int)(tile % rounds) * HK_KVA_GROUP;
    const int gn = group - g0 < HK_KVA_GROUP ? group - g0 : HK_KVA_GROUP;
    const long long c = ctx[t], s = slot[t];
    HK_T *og = out + t * heads * HK_HEAD_DIM + (h * group + g0) * HK_HEAD_DIM;
    if (c < 1 || c > max_seq || s < 0 || s >= slots) { /* every piece skips; piece 0 writes the zeros */
      if (piece == 0)
        for (int i = HK_TID; i < gn * HK_HEAD_DIM; i += KVA_THREADS) og[i] = HK_STORE(0.0f);
      continue;
    }
    const long long lo = window > 0 && c > window ? c - window : 0;
    const long long chunks = (c - lo + 31) / 32; /* the piece's chunks of 32 keys: [cb, ce) */
    const long long cb = chunks * piece / split, ce = chunks * (piece + 1) / split;
    const HK_T *kb = k_cache + (layer * slots + s) * max_seq * kv_width + h * HK_HEAD_DIM;
    const HK_T *vb = v_cache + (layer * slots + s) * max_seq * kv_width + h * HK_HEAD_DIM;
    const HK_T *qr = q + t * heads * HK_HEAD_DIM + (h * group + g0) * HK_HEAD_DIM;
    HK_SYNC(); /* the previous unit's combine has read the shared arrays */
    for (int i = HK_TID; i < gn * HK_HEAD_DIM; i += KVA_THREADS)
      qs[i / HK_HEAD_DIM][i % HK_HEAD_DIM] = HK_LOAD(qr[i]) * scale * 1.44269504088896341f;
    HK_SYNC();
    float m[HK_KVA_GROUP], l[HK_KVA_GROUP], acc[HK_KVA_GROUP][KVA_DPL];
#pragma unroll
    for (int g = 0; g < HK_KVA_GROUP; g++) {
      m[g] = -hk_inf();
      l[g] = 0.0f;
#pragma unroll
      for (int d = 0; d < KVA_DPL; d++) acc[g][d] = 0.0f;
    }
    for (long long ch = cb + warp; ch < ce; ch += HK_KVA_WARPS) {
      const long long base = lo + ch * 32, j = base + lane;
      const bool valid = j < c;
      const int n = (int)hk_min_ll(32, c - base); /* keys in this chunk, >= 1 */
      float sc[HK_KVA_GROUP];
#pragma unroll
      for (int g = 0; g < HK_KVA_GROUP; g++) sc[g] = 0.0f;
      uint4 kv[HK_HEAD_DIM / 8]; /* the key's row */
      if (valid) {
        const HK_T *kr = kb + j * kv_width;
#pragma unroll
        for (int d0 = 0; d0 < HK_HEAD_DIM / 8; d0++) kv[d0] = *(const uint4 *)(kr + 8 * d0);
      }
      /* the chunk's value rows; past the keys (jj >= n) the last key's row is read (written,
       * finite) and weighted by p = 0. head_dim 64: in flight with the keys; 128: after the
       * scores (both sets at once would not fit 128 registers) */
      kva_v_t vv[32];
#define KVA_LOAD_V()                                                                                                   \
  _Pragma("unroll") for (int jj = 0; jj < 32; jj++) vv[jj] =                                                          \
      *(const kva_v_t *)(vb + (base + (jj < n ? jj : n - 1)) * kv_width + lane * KVA_DPL)
#if HK_HEAD_DIM == 64
      KVA_LOAD_V();
#endif
      if (valid) {
#pragma unroll
        for (int d0 = 0; d0 < HK_HEAD_DIM / 8; d0++) {
          float kf[8];
          kva_unpack8(kv[d0], kf);
#pragma unroll
          for (int g = 0; g < HK_KVA_GROUP; g++)
            if (g < gn)
#pragma unroll
              for (int e = 0; e < 8; e++) sc[g] = fmaf(qs[g][8 * d0 + e], kf[e], sc[g]);
        }
      }
#pragma unroll
      for (int g = 0; g < HK_KVA_GROUP; g++) {
        if (g >= gn) continue;
        float cm = valid ? sc[g] : -hk_inf();
        for (int off = 16; off > 0; off >>= 1) cm = fmaxf(cm, hk_shfl_xor(cm, off));
        const float mn = fmaxf(m[g], cm), corr = exp2f(m[g] - mn);
        const float p = valid ? exp2f(sc[g] - mn) : 0.0f;
        float ls = p;
        for (int off = 16; off > 0; off >>= 1) ls += hk_shfl_xor(ls, off);
        l[g] = l[g] * corr + ls;
        m[g] = mn;
#pragma unroll
        for (int d = 0; d < KVA_DPL; d++) acc[g][d] *= corr;
        ps[warp][g][lane] = p; /* 0 past the chunk's keys */
      }
#if HK_HEAD_DIM != 64
      KVA_LOAD_V();
#endif
      __syncwarp();
#pragma unroll
      for (int jj = 0; jj < 32; jj++) {
        float vf[KVA_DPL];
        kva_unpack_v(vv[jj], vf);
#pragma unroll
        for (int g = 0; g < HK_KVA_GROUP; g++) {
          if (g >= gn) continue;
          const float p = ps[warp][g][jj];
#pragma unroll
          for (int d = 0; d < KVA_DPL; d++) acc[g][d] = fmaf(p, vf[d], acc[g][d]);
        }
      }
      __syncwarp();
    }
#pragma unroll
    for (int g = 0; g < HK_KVA_GROUP; g++) {
      if (g >= gn) continue;
      if (lane == 0) om[warp][g] = m[g], ol[warp][g] = l[g];
#pragma unroll
      for (int d = 0; d < KVA_DPL; d++) oacc[warp][g][lane * KVA_DPL + d] = acc[g][d];
    }
    HK_SYNC();
    /* the block's warps combined in warp order: (max, sum, unnormalised output) per head */
    float *const pu = part + u * KVA_PART; /* this piece's partial */
    for (int i = HK_TID; i < gn * HK_HEAD_DIM; i += KVA_THREADS) {
      const int g = i / HK_HEAD_DIM, d = i % HK_HEAD_DIM;
      float mx = -hk_inf();
      for (int w = 0; w < HK_KVA_WARPS; w++) mx = fmaxf(mx, om[w][g]);
      float sum = 0.0f, val = 0.0f;
      for (int w = 0; w < HK_KVA_WARPS; w++) {
        if (om[w][g] == -hk_inf()) continue; /* a warp that saw no key */
        const float f = exp2f(om[w][g] - mx);
        sum += ol[w][g] * f;
        val += oacc[w][g][d] * f;
      }
      if (split == 1) {
        og[i] = HK_STORE(sum > 0.0f ? val / sum : 0.0f);
      } else {
        __stcg(pu + i, val);
        if (d == 0) __stcg(pu + HK_KVA_GROUP * HK_HEAD_DIM + 2 * g, mx), __stcg(pu + HK_KVA_GROUP * HK_HEAD_DIM + 2 * g + 1, sum);
      }
    }
    if (split == 1) continue;
    HK_SYNC(); /* the piece's partial is stored */
    if (HK_TID == 0) last = hk_split_arrive(sem + tile, (unsigned)split);
    HK_SYNC(); /* the flag is set; the loads below come after thread 0's acquire */
    if (!last) continue;
    const float *const pt = part + tile * split * KVA_PART; /* piece 0's */
    const int ns = (int)split;
    for (int i = HK_TID; i < ns * gn; i += KVA_THREADS) { /* every piece's (max, sum), at once */
      const int p = i / gn, g = i % gn;
      pm[p][g] = __ldcg(pt + p * KVA_PART + HK_KVA_GROUP * HK_HEAD_DIM + 2 * g);
      pl[p][g] = __ldcg(pt + p * KVA_PART + HK_KVA_GROUP * HK_HEAD_DIM + 2 * g + 1);
    }
    HK_SYNC();
    if (HK_TID < gn) { /* each piece's weight per head (0: a piece that saw no key), in piece order */
      const int g = HK_TID;
      float mx = -hk_inf();
      for (int p = 0; p < ns; p++) mx = fmaxf(mx, pm[p][g]);
      float sum = 0.0f;
      for (int p = 0; p < ns; p++) {
        const float f = pm[p][g] == -hk_inf() ? 0.0f : exp2f(pm[p][g] - mx);
        pm[p][g] = f;
        sum += pl[p][g] * f;
      }
      tot[g] = sum;
    }
    HK_SYNC();
    for (int i = HK_TID; i < gn * HK_HEAD_DIM; i += KVA_THREADS) {
      const int g = i / HK_HEAD_DIM;
      float val = 0.0f;
#pragma unroll 8
      for (int p = 0; p < ns; p++) val += __ldcg(pt + p * KVA_PART + i) * pm[p][g];
      og[i] = HK_STORE(tot[g] > 0.0f ? val / tot[g] : 0.0f);
    }
  }
}
