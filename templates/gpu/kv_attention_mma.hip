/* SPDX-License-Identifier: Apache-2.0 */
/* kv_attention on NVIDIA tensor cores (mma.sync m16n8k16, sm_80 and later), f16/bf16,
 * head_dim HK_HEAD_DIM = 64 or 128, rows aligned to 8 elements: the launches of many token
 * rows -- prefill steps, where consecutive rows are consecutive positions of one sequence and
 * share its cached keys. The semantics are lower.h's (templates/gpu/kv_attention.hip is the
 * portable form):
 *   row t is valid when 1 <= ctx[t] <= max_seq and 0 <= slot[t] < slots; it attends to the
 *   keys [max(0, ctx - window), ctx) (window 0: from 0) of cache[layer, slot]; an invalid
 *   row writes zeros.
 * Tiles: (group of token rows, kv head, round of up to 4 of its q heads). A warp's 16 matrix
 * rows are (token row, q head) pairs, head-minor: with g4 = min(group, 4) heads per round, a
 * warp takes 16 / g4 token rows, a block of KVM_WARPS warps KVM_WARPS * (16 / g4) of them, so
 * every key the block loads serves up to 16 * KVM_WARPS matrix rows. The block walks the keys
 * of one slot at a time (a tile whose rows belong to several sequences -- a prompt boundary
 * -- takes one pass per slot, each row computed in its own slot's pass) in chunks of KVM_KEYS:
 * keys and values into shared memory (rows past the pass's last key read that key again:
 * written, finite, masked), S = Q K^T on the tensor cores (Q's fragments from global memory,
 * once), each row's mask, an online softmax in f32 (exp2, scale * log2 e applied to S), P
 * rounded to the dtype as the A operand of O += P V. f32 accumulation; O / l rounded once at
 * the store. The same bits every run (no atomics, a fixed order).
 * Args: kv_attention_warp's (T q, T k_cache, T v_cache, I32 ctx, I32 slot, T out, I rows,
 *       I heads, I kv_heads, I dh, I layer, I slots, I max_seq, I window, F scale).
 * Grid: ceil(rows / (KVM_WARPS * (16 / g4))) * kv_heads * rounds blocks (variant_kv_nv.c),
 * KVM_WARPS * 32 threads. */
#define KVM_WARPS 4
#define KVM_KEYS 64                  /* keys per chunk */
#define KVM_LD (HK_HEAD_DIM + 8)     /* shared row stride, elements: rows 16 bytes apart in banks */
#define KVM_KS (HK_HEAD_DIM / 16)    /* k-steps of S = Q K^T */
#define KVM_DT (HK_HEAD_DIM / 8)     /* 8-column tiles of O */
#define KVM_NT (KVM_KEYS / 8)        /* 8-key tiles of S */
#define KVM_NONE 0x7fffffff          /* no slot left */

#if HK_KVM_BF16
#define KVM_MMA hk_mma_16816_bf16
#define KVM_PACK hk_pack_bf16x2
#else
#define KVM_MMA hk_mma_16816_f16
#define KVM_PACK hk_pack_f16x2
#endif

HK_GLOBAL void HK_LAUNCH_BOUNDS(KVM_WARPS * 32)
HK_NAME(const HK_T *q, const HK_T *k_cache, const HK_T *v_cache, const int *ctx, const int *slot, HK_T *out,
        long long rows, long long heads, long long kv_heads, long long dh, long long layer, long long slots,
        long long max_seq, long long window, float scale) {
  HK_PDL_ENTRY(); /* a pdl variant: nothing is touched before it */
  __shared__ __align__(16) unsigned short ks[KVM_KEYS][KVM_LD], vs[KVM_KEYS][KVM_LD];
  __shared__ int pass_slot, pass_lo, pass_hi;
  (void)dh;
  const int warp = HK_TID / 32, lane = HK_TID % 32, gid = lane / 4, tig = lane % 4;
  const int group = (int)(heads / kv_heads), rounds = (group + 3) / 4;
  const int g4 = group < 4 ? group : 4, rpw = 16 / g4, qr = KVM_WARPS * rpw;
  const long long tiles = (rows + qr - 1) / qr * kv_heads * rounds;
  const long long kv_width = kv_heads * HK_HEAD_DIM;
  const float sl2 = scale * 1.44269504088896341f;
  for (long long u = HK_BID; u < tiles; u += HK_NBLOCKS) {
    const long long h = u / rounds % kv_heads, t0 = u / (rounds * kv_heads) * qr;
    const int g0 = (int)(u % rounds) * 4, gn = group - g0 < 4 ? group - g0 : 4;
    /* this lane's two matrix rows (gid, gid + 8): token row, q head, context, slot, first key */
    long long rt[2];
    int rg[2], rc[2], rs[2], rlo[2];
    bool rv[2]; /* a matrix row of this tile whose token row is valid */
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int r = gid + 8 * i, tq = r / g4;
      rg[i] = r % g4;
      rt[i] = t0 + warp * rpw + tq;
      const bool in = tq < rpw && rg[i] < gn && rt[i] < rows;
      rc[i] = in ? ctx[rt[i]] : 0;
      rs[i] = in ? slot[rt[i]] : -1;
      rv[i] = in && rc[i] >= 1 && rc[i] <= max_seq && rs[i] >= 0 && rs[i] < slots;
      rlo[i] = window > 0 && rc[i] > window ? (int)(rc[i] - window) : 0;
    }
    /* Q as the A operand: k-step s holds columns [16 s, 16 s + 16) of rows gid, gid + 8 */
    unsigned qa[KVM_KS][4];
#pragma unroll
    for (int s = 0; s < KVM_KS; s++)
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const int i = j & 1, c = 16 * s + 2 * tig + 8 * (j >> 1);
        qa[s][j] = rv[i] ? *(const unsigned *)(q + rt[i] * heads * HK_HEAD_DIM +
                                               (h * group + g0 + rg[i]) * HK_HEAD_DIM + c)
                         : 0u;
      }
    float o[KVM_DT][4], m[2], l[2];
#pragma unroll
    for (int d = 0; d < KVM_DT; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
    m[0] = m[1] = -hk_inf();
    l[0] = l[1] = 0.0f;
    int prev = -1; /* passes go through the tile's slots in increasing order */
    for (;;) {
      HK_SYNC(); /* the last pass's (or unit's) readers of pass_* and the tiles are done */
      if (HK_TID == 0) { /* the next slot of the tile, its keys [lo, hi) over its rows */
        int s_next = KVM_NONE, lo = KVM_NONE, hi = 0;
        const long long tend = t0 + qr < rows ? t0 + qr : rows;
        for (long long t = t0; t < tend; t++) {
          const int c = ctx[t], s = slot[t];
          if (c < 1 || c > max_seq || s < 0 || s >= slots || s <= prev || s > s_next) continue;
          const int l0 = window > 0 && c > window ? (int)(c - window) : 0;
          if (s < s_next) s_next = s, lo = l0, hi = c;
          else lo = l0 < lo ? l0 : lo, hi = c > hi ? c : hi;
        }
        pass_slot = s_next, pass_lo = lo, pass_hi = hi;
      }
      HK_SYNC();
      const int ps = pass_slot, klo = pass_lo, khi = pass_hi;
      if (ps == KVM_NONE) break;
      prev = ps;
      const bool act[2] = {rv[0] && rs[0] == ps, rv[1] && rs[1] == ps};
      const HK_T *kb = k_cache + (layer * slots + ps) * max_seq * kv_width + h * HK_HEAD_DIM;
      const HK_T *vb = v_cache + (layer * slots + ps) * max_seq * kv_width + h * HK_HEAD_DIM;
      for (int kc = klo / 8 * 8; kc < khi; kc += KVM_KEYS) {
        HK_SYNC(); /* every warp is done with the previous chunk */
        for (int e = HK_TID; e < KVM_KEYS * (HK_HEAD_DIM / 8); e += KVM_WARPS * 32) {
          const int key = e / (HK_HEAD_DIM / 8), c8 = e % (HK_HEAD_DIM / 8) * 8;
          const long long j = kc + key < khi ? kc + key : khi - 1;
          *(uint4 *)&ks[key][c8] = *(const uint4 *)(kb + j * kv_width + c8);
          *(uint4 *)&vs[key][c8] = *(const uint4 *)(vb + j * kv_width + c8);
        }
        HK_SYNC();
        /* a warp none of whose rows is in this pass skips the chunk (mma.sync needs the whole warp) */
        if (!__any_sync(0xffffffffu, act[0] || act[1])) continue;
        /* S = Q K^T: B fragment of key tile n, k-step s: key 8 n + gid, columns 16 s + 2 tig (+ 8) */
        float sc[KVM_NT][4];
#pragma unroll
        for (int n = 0; n < KVM_NT; n++) {
          sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
#pragma unroll
          for (int s = 0; s < KVM_KS; s++) {
            const unsigned b[2] = {*(const unsigned *)&ks[8 * n + gid][16 * s + 2 * tig],
                                   *(const unsigned *)&ks[8 * n + gid][16 * s + 2 * tig + 8]};
            KVM_MMA(sc[n], qa[s], b);
          }
        }
        /* masks, the chunk's row maxima (a row's 4 lanes: tig), the running max, the weights */
        float cm[2] = {-hk_inf(), -hk_inf()};
#pragma unroll
        for (int n = 0; n < KVM_NT; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            const int i = e >> 1, j = kc + 8 * n + 2 * tig + (e & 1);
            sc[n][e] = act[i] && j >= rlo[i] && j < rc[i] ? sc[n][e] * sl2 : -hk_inf();
            cm[i] = fmaxf(cm[i], sc[n][e]);
          }
        float corr[2];
#pragma unroll
        for (int i = 0; i < 2; i++) {
          cm[i] = fmaxf(cm[i], hk_shfl_xor(cm[i], 1));
          cm[i] = fmaxf(cm[i], hk_shfl_xor(cm[i], 2));
          const float mn = fmaxf(m[i], cm[i]);
          corr[i] = mn == -hk_inf() ? 1.0f : exp2f(m[i] - mn); /* m = -inf: 0 (nothing to rescale) */
          m[i] = mn;
        }
        float ls[2] = {0.0f, 0.0f};
#pragma unroll
        for (int n = 0; n < KVM_NT; n++)
#pragma unroll
          for (int e = 0; e < 4; e++) {
            const int i = e >> 1;
            sc[n][e] = sc[n][e] == -hk_inf() ? 0.0f : exp2f(sc[n][e] - m[i]);
            ls[i] += sc[n][e];
          }
#pragma unroll
        for (int i = 0; i < 2; i++) l[i] = l[i] * corr[i] + ls[i];
#pragma unroll
        for (int d = 0; d < KVM_DT; d++) {
          o[d][0] *= corr[0], o[d][1] *= corr[0];
          o[d][2] *= corr[1], o[d][3] *= corr[1];
        }
        /* O += P V: P's k-step s (keys 16 s ..) is S's key tiles 2 s, 2 s + 1; V's B fragment of
         * column tile d: keys 16 s + 2 tig (+1, +8, +9), column 8 d + gid */
#pragma unroll
        for (int s = 0; s < KVM_KEYS / 16; s++) {
          const unsigned pa[4] = {KVM_PACK(sc[2 * s][0], sc[2 * s][1]), KVM_PACK(sc[2 * s][2], sc[2 * s][3]),
                                  KVM_PACK(sc[2 * s + 1][0], sc[2 * s + 1][1]),
                                  KVM_PACK(sc[2 * s + 1][2], sc[2 * s + 1][3])};
          const int k0 = 16 * s + 2 * tig;
#pragma unroll
          for (int d = 0; d < KVM_DT; d++) {
            const int c = 8 * d + gid;
            const unsigned b[2] = {(unsigned)vs[k0][c] | (unsigned)vs[k0 + 1][c] << 16,
                                   (unsigned)vs[k0 + 8][c] | (unsigned)vs[k0 + 9][c] << 16};
            KVM_MMA(o[d], pa, b);
          }
        }
      }
    }
    /* the sums of a row's 4 lanes, then O / l; an invalid row's outputs are zeros */
#pragma unroll
    for (int i = 0; i < 2; i++) {
      l[i] += hk_shfl_xor(l[i], 1);
      l[i] += hk_shfl_xor(l[i], 2);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
      const int tq = (gid + 8 * i) / g4;
      if (tq >= rpw || rg[i] >= gn || rt[i] >= rows) continue;
      HK_T *orow = out + rt[i] * heads * HK_HEAD_DIM + (h * group + g0 + rg[i]) * HK_HEAD_DIM;
      const float inv = rv[i] && l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
#pragma unroll
      for (int d = 0; d < KVM_DT; d++) {
        const int c = 8 * d + 2 * tig;
        *(unsigned *)(orow + c) = KVM_PACK(o[d][2 * i] * inv, o[d][2 * i + 1] * inv);
      }
    }
  }
}
