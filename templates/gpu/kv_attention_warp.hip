/* SPDX-License-Identifier: Apache-2.0 */
/* kv_attention on NVIDIA (warps of 32: kv_attention_warp) and AMD CDNA (waves of 64:
 * kv_attention_wave, HK_KVA_AMD; no folded append), f16/bf16, head_dim HK_HEAD_DIM = 64 or 128,
 * rows aligned to 8 elements: the decode steps' kernel (kv_attention_mma takes prefill launches
 * of many rows on NVIDIA). "Warp" below is a wave on AMD, and 32 lanes its KVA_WAVE. A block per (token row, kv head, round of HK_KVA_GROUP q heads, piece of the
 * keys) computes the q heads that read that kv head, so each cached key and value is read once
 * per row (per round of a larger group). The semantics are lower.h's
 * (templates/gpu/kv_attention.hip is the portable form):
 *   row t is valid when 1 <= ctx[t] <= max_seq and 0 <= slot[t] < slots; it attends to the
 *   keys [max(0, ctx - window), ctx) (window 0: from 0) of cache[layer, slot]; an invalid
 *   row writes zeros.
 * Pieces (flash-decoding: a decode step has a few rows, and without the split a few blocks
 * would read the whole cache): the launch has `split` blocks per tile (row, kv head, round):
 * gridDim.x / tiles, 1..HK_KVA_MAX_SPLIT (variant_kv_nv.c sizes the grid). At run time a
 * tile's n keys go to pieces of `per` = max(HK_KVA_MIN_PIECE, n / split) keys (a whole number of
 * batches): `used` = ceil(n / per) pieces read keys; the blocks of the others leave at once.
 * Work: lane l of a warp reads elements [8 (l % LPK), + 8) of key l / LPK of each step (LPK =
 * HK_HEAD_DIM / 8 lanes per key, KPW = 32 / LPK keys per step: 16-byte loads, a row per
 * LPK lanes), its key row and value row at once; KVA_U steps (a batch of KPW * KVA_U keys) in
 * flight before any arithmetic. Each lane holds its 8 elements of every q head of the round
 * (scaled by scale * log2 e: the softmax runs in exp2); a score is the LPK lanes' partial dots
 * met by xor shuffles. Each key group of a warp (lanes with the same l / LPK) keeps a running
 * max, sum and output per head over its keys (online softmax, one correction per batch); the
 * warps take the piece's batches in turn. At the end the key groups meet by shuffles, the
 * warps in shared memory in warp order, f32 throughout, one rounding to the dtype at the store.
 * Split (used > 1): each piece stores its unnormalised output and (max, sum) per head in the
 * launch's scratch `part` (HK_KVA_GROUP (HK_HEAD_DIM + 2) floats per unit) and arrives on the
 * tile's counter in `sem` (tile_nv.h, split GEMMs; `used` arrivals); the last piece merges the
 * pieces in piece order (the same bits whichever arrives last). Pieces of an invalid row skip,
 * piece 0 writing the zeros.
 * HK_KV_APPEND (a kv_append folded in, lower.h; the build folds it at one row only): q is the
 * packed q|k|v rows [rows, (heads + 2 kv_heads) dh] and the launch appends them too. A lane
 * turns its 8 elements of each q head and of its kv head's new key (row ctx - 1) by the rope
 * (HK_ROPE: rope_freq.h's angles at ctx - 1, the partner element from lane dl ^ LPK / 2, each
 * turned element rounded to T once, as kv_append stores it); the piece holding key ctx - 1
 * takes it and its value from the row, not the caches, and piece 0 of the first round stores
 * both in the caches (warp 0's first key group). No block reads a cache row that the launch
 * writes, so the pieces need no order; two rows of one slot would (prefill: never folded).
 * Args: T q, T k_cache, T v_cache, I32 ctx, I32 slot, T out, I rows, I heads, I kv_heads, I dh,
 *       I layer, I slots, I max_seq, I window, F scale; with HK_KV_APPEND then I append (1),
 *       and with HK_ROPE F theta (and with HK_ROPE_SCALING F factor, F low_freq, F high_freq, F original_max);
 *       then the workspace: float *part, unsigned *sem (one counter per tile, zero at the start
 *       and left at zero).
 * Grid: tiles * split blocks (tiles alone, grid-stride, when split is 1), HK_KVA_WARPS * 32 threads. */
#ifndef HK_KVA_AMD
#define HK_KVA_AMD 0 /* 1: AMD CDNA, waves of 64 (kv_attention_wave: variant_kv_nv.c) */
#endif
#if HK_KVA_AMD && HK_KV_APPEND
#error "kv_attention_wave: no folded append (its first keys come by cp.async)"
#endif
#define KVA_WAVE HK_WAVE                  /* lanes of a warp (a wave on AMD) */
#define KVA_THREADS (HK_KVA_WARPS * KVA_WAVE)
#define KVA_LPK (HK_HEAD_DIM / 8)         /* lanes per key */
#define KVA_KPW (KVA_WAVE / KVA_LPK)      /* keys of a warp step */
#define KVA_U 4                     /* steps in flight */
#define KVA_BATCH (KVA_KPW * KVA_U) /* keys a warp reads at once */
#define KVA_PART (HK_KVA_GROUP * (HK_HEAD_DIM + 2)) /* floats of one piece's partial */

/* 16 bytes as 4 words; the split's partials and arrivals: tile_nv.h / split_amd.h */
#if HK_KVA_AMD
typedef hk_v16_t kva_v16_t; /* an ext_vector */
HK_DEVICE unsigned kva_word(kva_v16_t u, int i) { return u[i]; }
#else
typedef uint4 kva_v16_t;
HK_DEVICE unsigned kva_word(kva_v16_t u, int i) { return i == 0 ? u.x : i == 1 ? u.y : i == 2 ? u.z : u.w; }
#endif

HK_DEVICE void kva_unpack8(kva_v16_t u, float *f) { /* 8 contiguous elements of one 16-byte load */
  const unsigned w[4] = {kva_word(u, 0), kva_word(u, 1), kva_word(u, 2), kva_word(u, 3)};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    f[2 * i] = HK_LOAD((HK_T)(w[i] & 0xffffu));
    f[2 * i + 1] = HK_LOAD((HK_T)(w[i] >> 16));
  }
}

/* (m, l, acc) of another key group folded into this lane's: the same arithmetic on both
 * lanes of a pair, so the pair ends with equal states */
HK_DEVICE void kva_fold(float *m, float *l, float *acc, float mo, float lo_, const float *acco) {
  const float mx = fmaxf(*m, mo);
  if (mx == -hk_inf()) return; /* neither saw a key */
  const float f = exp2f(*m - mx), fo = exp2f(mo - mx);
  *l = *l * f + lo_ * fo;
#pragma unroll
  for (int d = 0; d < 8; d++) acc[d] = acc[d] * f + acco[d] * fo;
  *m = mx;
}

#if HK_KV_APPEND
typedef HK_T kva_cache_t; /* the launch appends */
#else
typedef const HK_T kva_cache_t;
#endif

#if HK_KV_APPEND
/* Lane dl's 8 elements [8 dl, + 8) of a head, as the append stores them: turned by the rope
 * (HK_ROPE: the angles of pair j at tab_sn[j], tab_cs[j]; the partner elements from lane
 * dl ^ LPK / 2) and rounded to T */
HK_DEVICE uint4 kva_turn8(uint4 raw, const float *tab_sn, const float *tab_cs, int dl) {
#if HK_ROPE
  const bool lo = dl < KVA_LPK / 2; /* the first half: the partner is + dh / 2 */
  float x[8], y[8], sn[8], cs[8];
  kva_unpack8(raw, x);
#pragma unroll
  for (int d = 0; d < 8; d++) {
    y[d] = hk_shfl_xor(x[d], KVA_LPK / 2);
    sn[d] = tab_sn[(8 * dl + d) % (HK_HEAD_DIM / 2)], cs[d] = tab_cs[(8 * dl + d) % (HK_HEAD_DIM / 2)];
  }
  union {
    uint4 u;
    HK_T e[8];
  } out;
#pragma unroll
  for (int d = 0; d < 8; d++) out.e[d] = HK_STORE(rope_turn(x[d], y[d], cs[d], sn[d], lo));
  return out.u;
#else
  (void)tab_sn, (void)tab_cs, (void)dl;
  return raw;
#endif
}
#endif

/* Unit u's tile (row t, kv head h, round from q head g0, gn heads of it), piece and keys [kb, ke)
 * of its row's ctx c and slot s; live: the row is valid and the piece has keys (used of them).
 * 32-bit arithmetic: units, rows, heads and positions are below 2^31 (the launch's grid, a
 * bucket's rows, max_seq), and a 64-bit division is a long subroutine on the GPU -- this runs
 * before the first load of every block. */
struct kva_unit {
  int tile, piece, t, h, c, s, kb, ke, used;
  int g0, gn;
  bool valid, live;
};

HK_DEVICE kva_unit kva_unit_at(int u, int split, int kv_heads, int group, int rounds, const int *ctx,
                               const int *slot, long long slots, long long max_seq, long long window) {
  kva_unit k;
  k.tile = u / split, k.piece = u % split;
  k.t = k.tile / (kv_heads * rounds), k.h = k.tile / rounds % kv_heads;
  k.g0 = k.tile % rounds * HK_KVA_GROUP;
  k.gn = group - k.g0 < HK_KVA_GROUP ? group - k.g0 : HK_KVA_GROUP;
  k.c = ctx[k.t], k.s = slot[k.t];
  k.valid = k.c >= 1 && k.c <= max_seq && k.s >= 0 && k.s < slots;
  const int lo = window > 0 && k.c > window ? k.c - (int)window : 0, n = k.valid ? k.c - lo : 0;
  int per = (n + split - 1) / split;
  if (per < HK_KVA_MIN_PIECE) per = HK_KVA_MIN_PIECE;
  per = (per + KVA_BATCH - 1) / KVA_BATCH * KVA_BATCH;
  k.used = k.valid ? (n + per - 1) / per : 0; /* pieces with keys: the arrivals the merge waits for */
  k.live = k.valid && k.piece < k.used;
  k.kb = lo + k.piece * per, k.ke = k.kb + per < k.c ? k.kb + per : k.c; /* this piece's keys [kb, ke) */
  return k;
}

#if HK_KV_APPEND && HK_ROPE
/* The angles of a head's dh / 2 pairs at position p into tab_sn, tab_cs: a pair a thread (a
 * block of one warp and dh 128 has fewer threads than pairs: those take two) */
HK_DEVICE void kva_angles(float p, float theta, const rope_scaling &sc, float *tab_sn, float *tab_cs) {
  for (int j = HK_TID; j < HK_HEAD_DIM / 2; j += KVA_THREADS) rope_angle(p, j, HK_HEAD_DIM, theta, sc, &tab_sn[j], &tab_cs[j]);
}
#endif

HK_GLOBAL void __launch_bounds__(KVA_THREADS, HK_KVA_MIN_BLOCKS) /* 4 warps: three blocks per SM, at most 168 registers */
HK_NAME(const HK_T *q, kva_cache_t *k_cache, kva_cache_t *v_cache, const int *ctx, const int *slot, HK_T *out,
        long long rows, long long heads, long long kv_heads, long long dh, long long layer, long long slots,
        long long max_seq, long long window, float scale,
#if HK_KV_APPEND
        long long append, /* 1 */
#endif
#if HK_KV_APPEND && HK_ROPE
        float theta,
#if HK_ROPE_SCALING
        float factor, float low_freq, float high_freq, float original_max,
#endif
#endif
        float *part, unsigned *sem) {
  __shared__ float om[HK_KVA_WARPS][HK_KVA_GROUP], ol[HK_KVA_WARPS][HK_KVA_GROUP];
  __shared__ float oacc[HK_KVA_WARPS][HK_KVA_GROUP][HK_HEAD_DIM];
  __shared__ float pm[HK_KVA_MAX_SPLIT][HK_KVA_GROUP], pl[HK_KVA_MAX_SPLIT][HK_KVA_GROUP], tot[HK_KVA_GROUP];
  __shared__ int last;
  (void)dh;
  const int warp = HK_TID / KVA_WAVE, lane = HK_TID % KVA_WAVE, kg = lane / KVA_LPK, dl = lane % KVA_LPK;
  const int group = (int)heads / (int)kv_heads;
  const int rounds = (group + HK_KVA_GROUP - 1) / HK_KVA_GROUP;
  const int tiles = (int)rows * (int)kv_heads * rounds; /* (row, kv head, round): one counter each */
  const int nblocks = (int)gridDim.x;
  int split = nblocks / tiles < HK_KVA_MAX_SPLIT ? nblocks / tiles : HK_KVA_MAX_SPLIT;
  if (split < 1) split = 1; /* a grid clamped below tiles: grid-stride, no split */
  const long long kv_width = kv_heads * HK_HEAD_DIM;
  const long long q_width = (HK_KV_APPEND ? heads + 2 * kv_heads : heads) * HK_HEAD_DIM; /* q's rows */
#if HK_KV_APPEND
  /* Before the wait, what no launch of this step writes: ctx and slot (inputs), the first unit's
   * angles and its warp's first batch of cached keys and values (rows below ctx - 1, earlier
   * steps'; row ctx - 1 comes from the q|k|v row after the wait) -- so the cache streams while
   * the q|k|v gemm runs */
  __shared__ float tab_sn[HK_HEAD_DIM / 2], tab_cs[HK_HEAD_DIM / 2]; /* the unit's angles */
  /* the first batch: lane l's 16 bytes of step i at [k or v][warp][i][8 l] */
  __shared__ __align__(16) HK_T pre_kv[2][HK_KVA_WARPS][KVA_U][KVA_WAVE * 8];
#if HK_ROPE
#if HK_ROPE_SCALING
  const rope_scaling rsc = {factor, low_freq, high_freq, original_max};
#else
  const rope_scaling rsc = {1.0f, 1.0f, 1.0f, 1.0f};
#endif
#endif
  const int pre_u = (int)blockIdx.x; /* whose angles and first batch the shared arrays hold, when pre_live */
  bool pre_live = false;
  if (pre_u < tiles * split) {
    const kva_unit k = kva_unit_at(pre_u, split, kv_heads, group, rounds, ctx, slot, slots, max_seq, window);
    pre_live = k.live;
    if (k.live) {
#if HK_ROPE
      kva_angles((float)(k.c - 1), theta, rsc, tab_sn, tab_cs);
#endif
      const long long base = (layer * slots + k.s) * max_seq * kv_width + k.h * HK_HEAD_DIM + 8 * dl;
#pragma unroll
      for (int i = 0; i < KVA_U; i++) {
        const int j = k.kb + warp * KVA_BATCH + i * KVA_KPW + kg, jr = j < k.ke ? j : k.ke - 1;
        const bool cached = jr != k.c - 1; /* row ctx - 1 comes after the wait (zeros here) */
        hk_cp_async16(&pre_kv[0][warp][i][8 * lane], k_cache + base + jr * kv_width, cached);
        hk_cp_async16(&pre_kv[1][warp][i][8 * lane], v_cache + base + jr * kv_width, cached);
      }
      hk_cp_async_commit();
    }
  }
#endif
  /* a pdl variant: waits for the launches before it, then lets the next one (the output
   * projection, whose blocks prefetch their weights before they wait for this launch) start */
  HK_PDL_ENTRY();
#if HK_KV_APPEND
  HK_SYNC(); /* the first unit's angles are in the table */
#endif
  for (int u = (int)blockIdx.x; u < tiles * split; u += nblocks) {
    const kva_unit k = kva_unit_at(u, split, (int)kv_heads, group, rounds, ctx, slot, slots, max_seq, window);
    const int piece = k.piece, c = k.c, used = k.used, kb = k.kb, ke = k.ke;
    const long long t = k.t, h = k.h, s = k.s, tile = k.tile; /* in 64-bit address arithmetic */
    const int g0 = k.g0, gn = k.gn;
    HK_T *og = out + t * heads * HK_HEAD_DIM + (h * group + g0) * HK_HEAD_DIM;
    if (!k.valid) { /* every piece skips; piece 0 writes the zeros */
      if (piece == 0)
        for (int i = HK_TID; i < gn * HK_HEAD_DIM; i += KVA_THREADS) og[i] = HK_STORE(0.0f);
      continue;
    }
    if (!k.live) continue;
    kva_cache_t *kc = k_cache + (layer * slots + s) * max_seq * kv_width + h * HK_HEAD_DIM + 8 * dl;
    kva_cache_t *vc = v_cache + (layer * slots + s) * max_seq * kv_width + h * HK_HEAD_DIM + 8 * dl;
    const HK_T *qr = q + t * q_width + (h * group + g0) * HK_HEAD_DIM + 8 * dl;
    float qf[HK_KVA_GROUP][8], m[HK_KVA_GROUP], l[HK_KVA_GROUP], acc[HK_KVA_GROUP][8];
#if HK_KV_APPEND
    /* the new key and value (row c - 1) as the append stores them, this lane's 8 elements */
    const bool pre = pre_live && u == pre_u; /* this unit's angles and first batch came before the wait */
#if HK_ROPE
    if (!pre) { /* a unit beyond the grid (block-uniform: the barriers agree) */
      HK_SYNC(); /* the previous unit's angles are used up */
      kva_angles((float)(c - 1), theta, rsc, tab_sn, tab_cs);
      HK_SYNC();
    }
#endif
    const HK_T *kn_row = q + t * q_width + heads * HK_HEAD_DIM + h * HK_HEAD_DIM + 8 * dl;
    const uint4 kn = kva_turn8(*(const uint4 *)kn_row, tab_sn, tab_cs, dl), vn = *(const uint4 *)(kn_row + kv_width);
    if (piece == 0 && g0 == 0 && warp == 0 && kg == 0) { /* the kv head's append */
      *(uint4 *)(kc + (c - 1) * kv_width) = kn;
      *(uint4 *)(vc + (c - 1) * kv_width) = vn;
    }
#endif
#pragma unroll
    for (int g = 0; g < HK_KVA_GROUP; g++) {
      if (g < gn) {
#if HK_KV_APPEND
        kva_unpack8(kva_turn8(*(const uint4 *)(qr + g * HK_HEAD_DIM), tab_sn, tab_cs, dl), qf[g]);
#else
        kva_unpack8(*(const kva_v16_t *)(qr + g * HK_HEAD_DIM), qf[g]);
#endif
      } else {
#pragma unroll
        for (int d = 0; d < 8; d++) qf[g][d] = 0.0f;
      }
#pragma unroll
      for (int d = 0; d < 8; d++) qf[g][d] *= scale * 1.44269504088896341f, acc[g][d] = 0.0f;
      m[g] = -hk_inf();
      l[g] = 0.0f;
    }
    for (int b = kb + warp * KVA_BATCH; b < ke; b += HK_KVA_WARPS * KVA_BATCH) {
      kva_v16_t kv[KVA_U], vv[KVA_U];
      bool valid[KVA_U];
#pragma unroll
      for (int i = 0; i < KVA_U; i++) { /* past the keys: the piece's last key (written, finite), weight 0 */
        const int j = b + i * KVA_KPW + kg;
        valid[i] = j < ke;
        const int jr = valid[i] ? j : ke - 1;
#if HK_KV_APPEND
        if (jr == c - 1) { /* the appended row: from the q|k|v row, not the caches */
          kv[i] = kn;
          vv[i] = vn;
          continue;
        }
        if (pre && b == kb + warp * KVA_BATCH) { /* copied before the wait (this lane's own bytes) */
          HK_CP_ASYNC_WAIT(0);
          kv[i] = *(const uint4 *)&pre_kv[0][warp][i][8 * lane];
          vv[i] = *(const uint4 *)&pre_kv[1][warp][i][8 * lane];
          continue;
        }
#endif
        kv[i] = *(const kva_v16_t *)(kc + jr * kv_width);
        vv[i] = *(const kva_v16_t *)(vc + jr * kv_width);
      }
      float sc[KVA_U][HK_KVA_GROUP];
#pragma unroll
      for (int i = 0; i < KVA_U; i++) {
        float kf[8];
        kva_unpack8(kv[i], kf);
#pragma unroll
        for (int g = 0; g < HK_KVA_GROUP; g++) {
          float acc_s = 0.0f;
#pragma unroll
          for (int d = 0; d < 8; d++) acc_s = fmaf(qf[g][d], kf[d], acc_s);
#pragma unroll
          for (int off = KVA_LPK / 2; off > 0; off >>= 1) acc_s += hk_shfl_xor(acc_s, off);
          sc[i][g] = valid[i] ? acc_s : -hk_inf();
        }
      }
#pragma unroll
      for (int g = 0; g < HK_KVA_GROUP; g++) {
        float mx = m[g];
#pragma unroll
        for (int i = 0; i < KVA_U; i++) mx = fmaxf(mx, sc[i][g]);
        if (mx == -hk_inf()) continue; /* no key yet for this key group */
        const float corr = exp2f(m[g] - mx);
        l[g] *= corr;
#pragma unroll
        for (int d = 0; d < 8; d++) acc[g][d] *= corr;
#pragma unroll
        for (int i = 0; i < KVA_U; i++) {
          const float p = exp2f(sc[i][g] - mx); /* 0 past the keys */
          float vf[8];
          kva_unpack8(vv[i], vf);
          l[g] += p;
#pragma unroll
          for (int d = 0; d < 8; d++) acc[g][d] = fmaf(p, vf[d], acc[g][d]);
        }
        m[g] = mx;
      }
    }
    /* the warp's key groups meet (lanes dl, dl + LPK, ...), then lanes < LPK hold the warp's state */
#pragma unroll
    for (int off = KVA_LPK; off < KVA_WAVE; off <<= 1)
#pragma unroll
      for (int g = 0; g < HK_KVA_GROUP; g++) {
        float acco[8];
#pragma unroll
        for (int d = 0; d < 8; d++) acco[d] = hk_shfl_xor(acc[g][d], off);
        const float mo = hk_shfl_xor(m[g], off), lo2 = hk_shfl_xor(l[g], off);
        kva_fold(&m[g], &l[g], acc[g], mo, lo2, acco);
      }
    HK_SYNC(); /* the previous unit's combine has read the shared arrays */
    if (lane < KVA_LPK)
#pragma unroll
      for (int g = 0; g < HK_KVA_GROUP; g++) {
        if (lane == 0) om[warp][g] = m[g], ol[warp][g] = l[g];
#pragma unroll
        for (int d = 0; d < 8; d++) oacc[warp][g][8 * dl + d] = acc[g][d];
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
      if (used == 1) {
        og[i] = HK_STORE(sum > 0.0f ? val / sum : 0.0f);
      } else {
        hk_st_part(pu + i, val);
        if (d == 0)
          hk_st_part(pu + HK_KVA_GROUP * HK_HEAD_DIM + 2 * g, mx), hk_st_part(pu + HK_KVA_GROUP * HK_HEAD_DIM + 2 * g + 1, sum);
      }
    }
    if (used == 1) continue;
    HK_SPLIT_PUBLISH(); /* this thread's partial stores, ordered before the barrier and the arrival */
    HK_SYNC(); /* the piece's partial is stored */
    if (HK_TID == 0) last = hk_split_arrive(sem + tile, (unsigned)used);
    HK_SYNC(); /* the flag is set; the loads below come after thread 0's acquire */
    if (!last) continue;
    const float *const pt = part + tile * split * KVA_PART; /* piece 0's */
    const int ns = (int)used;
    for (int i = HK_TID; i < ns * gn; i += KVA_THREADS) { /* every piece's (max, sum), at once */
      const int p = i / gn, g = i % gn;
      pm[p][g] = hk_ld_part(pt + p * KVA_PART + HK_KVA_GROUP * HK_HEAD_DIM + 2 * g);
      pl[p][g] = hk_ld_part(pt + p * KVA_PART + HK_KVA_GROUP * HK_HEAD_DIM + 2 * g + 1);
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
      for (int p = 0; p < ns; p++) val += hk_ld_part(pt + p * KVA_PART + i) * pm[p][g];
      og[i] = HK_STORE(tot[g] > 0.0f ? val / tot[g] : 0.0f);
    }
  }
}
