/* SPDX-License-Identifier: Apache-2.0 */
/* attention_mfma_pp: flash attention on AMD matrix cores with 8 waves in a ping-pong
 * schedule (after HipKittens' 8-wave attention, fitted to the 64 KiB of LDS of CDNA1/2).
 * Semantics and ABI of attention_mfma.hip (and attention.hip, templates/host/attention.c):
 *   T q, T k, T v, T out, I batch, I seq_q, I seq_kv, I heads, I kv_heads, I dh,
 *   I ld_q, I ld_kv, I q_col, I k_col, I v_col, I causal, F scale
 *   [, const int *lengths, const T *mask, I mask_heads   (HK_ATTN_LENGTHS or HK_ATTN_MASK)]
 * (causal top-left aligned, grouped-query, packed qkv through the column offsets, key
 * padding lengths, an additive mask; a row with no finite score stores zeros).
 * Requires (variant_amd.c): f16/bf16, align 8, dh == HK_ATTN_DH (64 or 128), wave64,
 * HK_THREADS 512, and the rows of k and v below 2^23 elements apart (ld_kv: the copies'
 * and loads' 32-bit offsets; the kernel traps beyond).
 *
 * ---- waves and the math ---------------------------------------------------------------------
 * A block is HK_ATTN_BQ = 256 query rows of one (batch, head), 8 waves of 32 queries: wave w
 * owns queries i0 + 32w .. +31, lane l the query i0 + 32w + l % 32 -- the arithmetic of
 * attention_mfma.hip, per key tile of HK_ATTN_BKV = 32 keys (the variant's choice; 64 would
 * fit LDS at dh 64 but spill there, and at dh 128 need 68 KiB):
 *   S^T = K Q^T (A = K rows from LDS, B = Q^T in registers for the block), mask, scale
 *   folded with log2 e, online softmax in f32 with exp2 (max / sum in-lane, one xor-32
 *   shuffle), O^T = alpha O^T + V^T P^T with P^T = the lane's own S values (no data moves
 *   between lanes; tile_amd.h's 32x32x8 layouts).
 * Waves 0-3 are group 0, waves 4-7 group 1; every wave reads the whole K and V tile.
 *
 * ---- schedule --------------------------------------------------------------------------------
 * A wave's work is split into two kinds of phase (T = ceil(n_keys / BKV) key tiles):
 *   M(t), memory and softmax: mask / scale / online softmax of S_t -> P_t and alpha_t (not
 *         for t < 0); read the operands of C(t+1) -- K_{t+1} (0 <= t+1 < T) and V_t
 *         (t >= 0) -- from LDS into registers and wait for them (lgkmcnt(0));
 *   C(t+1), compute at s_setprio 1: S_{t+1} = K_{t+1} Q^T, O = alpha_t O + V_t P_t: MFMAs
 *         (and 16-32 multiplies) on registers only.
 * Every wave runs M(t), C(t+1) for t = -2 .. T-1, each phase ended by an s_barrier; group
 * 1 passes one extra barrier first and group 0 one last, so group 1 runs one phase behind.
 * Number the slots between barriers from 0; round t (t = -2 .. T-1) is slots 2t+4, 2t+5:
 *   first slot of round t:  group 0 M(t),   group 1 C(t)  (C(-2) is nothing);
 *   second slot of round t: group 0 C(t+1), group 1 M(t);
 * group 1's C(T) has a slot of its own, with group 0's extra barrier. So on each SIMD (CDNA
 * places a block's waves on the CU's 4 SIMDs in turn: one wave of each group per SIMD;
 * placement matters for speed only) one wave multiplies at raised priority while the other
 * computes its softmax and reads LDS.
 * Copies (all 8 waves share each tile, 1/8 apiece): in the first slot of round t every wave
 * issues K_{t+2}'s rows straight into LDS buffer t % 2 (buffer_load_dword ... lds) and its
 * buffer loads of V_{t+1} into registers; in the second slot it waits for them (vmcnt(0)),
 * writes V_{t+1} transposed into V buffer (t+1) % 2 and waits for the writes (lgkmcnt(0)).
 * (Group 0 issues before M(t) and lands after C(t+1), group 1 issues before C(t) and
 * lands after M(t): the only group-dependent code. A wave whose 32 queries all lie past
 * seq_q skips its M and C phases but copies and passes the barriers like the others.)
 * Why this is race-free (slots are ordered by the barriers; a wave's LDS reads are done
 * before the barrier ending their slot, its copies and V writes before the barrier ending
 * the round):
 *   - In round t LDS is written only in K buffer t % 2 (copies land anywhere between issue
 *     and wait: both slots) and V buffer (t+1) % 2 (second slot), and read only by M(t):
 *     K buffer (t+1) % 2 and V buffer t % 2. Disjoint.
 *   - WAR: K buffer t % 2 last held K_t, read by M(t-1); V buffer (t+1) % 2 held V_{t-1},
 *     read by M(t-1): both in round t-1, before round t's first slot.
 *   - RAW: K_{t+2} and V_{t+1} are read by M(t+1) (K_{t+2}) and M(t+1) (V_{t+1}), in round
 *     t+1, after the barrier that ends round t.
 *   - Across blocks (the grid-stride loop): a block's last LDS reads are in round T-1; the
 *     next block's first copies follow the barrier of group 1's C(T) slot.
 * Round -2 copies K_0 (its phases M(-2), C(-1) have nothing to read); round -1 copies K_1
 * and V_0 and M(-1) reads K_0. C(-1) and the PV half of C(0) multiply zero P and V operands
 * (initialised so; kept unconditional so that the compiler keeps the accumulators in
 * place). Every wave passes 2 (T + 2) + 1 barriers per block (T is block-uniform).
 * The barrier (tile_amd.h HK_PP_BARRIER): gfx90a issues s_barrier itself so the copies stay
 * in flight across it; gfx908 keeps the compiler's, which drains them at every barrier.
 * MFMAs are held inside the s_setprio bracket by __builtin_amdgcn_sched_barrier(0) (the
 * operand pins of gemm_mfma_pp.hip cost copies and spills here).
 *
 * ---- LDS ----------------------------------------------------------------------------------------
 * K: Ks[2][BKV][KP]. dh 64: two rows per 256-byte copy, so rows are unpadded (KP = 64) and
 *    the 16-byte chunk c of key row r is stored at chunk c ^ (r % 8): an MFMA operand (4 d
 *    of one key, 8 bytes) read by 8 consecutive keys falls on 8 different 16-byte bank
 *    groups. dh 128: one row per copy, so rows are padded instead (KP = 136, 16 bytes).
 *    Keys past n_keys read zeros (each copy's resource ends there).
 * V: Vt[2][DH][BKV + 8], transposed [d][key] (an operand is 4 keys of one d), padded rows;
 *    keys past n_keys are zeros (the loads' resource ends there).
 * 18 KiB at dh 64, 37 KiB at dh 128.
 */
#define HK_ATTN_WAVES 8
#define HK_ATTN_BQ (32 * HK_ATTN_WAVES)
#ifndef HK_ATTN_BKV
#define HK_ATTN_BKV 32
#endif
#define HK_ATTN_VP (HK_ATTN_BKV + HK_LDS_PAD) /* V^T tile pitch: [d][key] */
/* K tile pitch: a row of dh 128 is one whole copy (256 bytes), so its rows can be padded;
 * dh 64 rows (two per copy) are contiguous and swizzled instead */
#define HK_ATTN_KP (HK_ATTN_DH == 128 ? HK_ATTN_DH + HK_LDS_PAD : HK_ATTN_DH)
#define HK_ATTN_SF (HK_ATTN_BKV / 32)         /* 32-key score fragments */
#define HK_ATTN_OF (HK_ATTN_DH / 32)          /* 32-wide output fragments */
#define HK_ATTN_DS (HK_ATTN_DH / 8)           /* k blocks of Q K^T */
#define HK_ATTN_KROWS (HK_ATTN_BKV / HK_ATTN_WAVES) /* K rows each wave copies per tile */
#define HK_ATTN_RPI (128 / HK_ATTN_DH)              /* K rows per 256-byte copy */
#define HK_ATTN_VC (HK_ATTN_BKV * HK_ATTN_DH / 8)             /* V: 16-byte chunks of a tile */
#define HK_ATTN_CH ((HK_ATTN_VC + HK_THREADS - 1) / HK_THREADS) /* ... per thread (whole waves idle past VC) */
#define HK_ATTN_MAX_LD (1LL << 23) /* ld_kv below it: a tile's offsets (BKV rows) below 2^31 bytes */
#if HK_THREADS != 64 * HK_ATTN_WAVES || (HK_ATTN_DH != 64 && HK_ATTN_DH != 128) || HK_ATTN_BKV % 32 != 0 || \
    HK_ATTN_VC % 64 != 0 || HK_ATTN_KROWS % HK_ATTN_RPI != 0
#error "attention_mfma_pp: HK_THREADS 512, HK_ATTN_DH 64 or 128, HK_ATTN_BKV a multiple of 32"
#endif
#if 2 * (HK_ATTN_BKV * HK_ATTN_KP + HK_ATTN_DH * HK_ATTN_VP) * 2 > 65536
#error "attention_mfma_pp: LDS tiles exceed 64 KiB"
#endif

#ifndef HK_ATTN_LENGTHS
#define HK_ATTN_LENGTHS 0
#endif
#ifndef HK_ATTN_MASK
#define HK_ATTN_MASK 0
#endif

/* Block-uniform facts of one (batch, head, query tile) and the lane's query. */
typedef struct hk_ap_blk {
  const unsigned short *kb, *vb; /* key / value row 0 of the kv head, at its first column */
  long long ld_kv, n_keys, qi, causal;
  float scale2;
#if HK_ATTN_MASK
  const unsigned short *mrow; /* mask[b, h or 0] or NULL */
  long long seq_q, seq_kv;
#endif
} hk_ap_blk_t;

/* The wave's registers (arrays indexed by constants only, so they stay in registers). */
typedef struct hk_ap_regs {
  hk_u16x4 qf[HK_ATTN_DS];                                /* Q^T operands, for the block */
  hk_u16x4 ka[HK_ATTN_DS][HK_ATTN_SF];                    /* K operands of the next C phase */
  hk_u16x4 va[HK_ATTN_SF][4][HK_ATTN_OF];                 /* V^T operands of the next C phase */
  hk_u16x4 p[HK_ATTN_SF][4];                              /* P^T operands of the next C phase */
  hk_f32x16 st[HK_ATTN_SF];                               /* S^T of the last C phase */
  hk_f32x16 o[HK_ATTN_OF];                                /* O^T */
  hk_u16x8 rv[HK_ATTN_CH];                                /* V chunks on their way to LDS */
  float m_run, l_run;                                     /* log2-domain running max, sum */
  float alpha;                                            /* O's rescale by the next C phase */
} hk_ap_regs_t;

/* Key row `row`'s chunk swizzle (the K layout above). */
HK_DEVICE int hk_ap_swz(int row) { return HK_ATTN_KP == HK_ATTN_DH ? row % 8 : 0; }

/* The copies issued at the start of round t: this wave's K rows of tile t + 2 straight into
 * Ks[t % 2], its V chunks of tile t + 1 into registers. Keys >= n_keys read zeros (each
 * copy's and the V loads' resource ends at n_keys). */
HK_DEVICE void hk_ap_issue(const hk_ap_blk_t *bk, long long t, long long n_tiles,
                           unsigned short (*Ks)[HK_ATTN_BKV * HK_ATTN_KP], int wave, unsigned lane, hk_ap_regs_t *r) {
  if (t + 2 < n_tiles) {
    const long long j0 = (t + 2) * HK_ATTN_BKV;
    const int r0 = wave * HK_ATTN_KROWS;
    const int dr = (int)(2u * lane / HK_ATTN_DH), e = (int)(2u * lane % HK_ATTN_DH); /* row in the copy, LDS column */
    const unsigned row_bytes = (unsigned)bk->ld_kv * 2u;                           /* < 2^24 */
#pragma unroll
    for (int c = 0; c < HK_ATTN_KROWS; c += HK_ATTN_RPI) {
      const long long first = j0 + r0 + c, left = bk->n_keys - first; /* keys of k from this copy's row on */
      const unsigned bytes = left <= 0 ? 0u : (unsigned)(left < HK_ATTN_RPI ? left : HK_ATTN_RPI) * row_bytes;
      const int d = ((e / 8) ^ hk_ap_swz(r0 + c + dr)) * 8 + e % 8;
      hk_lds_dma4(bk->kb + first * bk->ld_kv, bytes, &Ks[t & 1][(r0 + c) * HK_ATTN_KP],
                  (unsigned)dr * row_bytes + 2u * (unsigned)d);
    }
  }
  if (t + 1 >= 0 && t + 1 < n_tiles) {
    /* V rows j0 .. through a resource that ends at n_keys: keys past it read zeros */
    const long long j0 = (t + 1) * HK_ATTN_BKV, left = bk->n_keys - j0;
    const unsigned bytes = (unsigned)(left < HK_ATTN_BKV ? left : HK_ATTN_BKV) * (unsigned)bk->ld_kv * 2u;
#pragma unroll
    for (int i = 0; i < HK_ATTN_CH; i++) {
      const int c = HK_TID + i * HK_THREADS, key = c / (HK_ATTN_DH / 8), d = c % (HK_ATTN_DH / 8) * 8;
      if (HK_ATTN_VC % HK_THREADS != 0 && c >= HK_ATTN_VC) break;
      const unsigned off = ((unsigned)key * (unsigned)bk->ld_kv + (unsigned)d) * 2u;
      r->rv[i] = hk_buffer_load16(bk->vb + j0 * bk->ld_kv, bytes, off);
    }
  }
}

/* The end of round t: this wave's copies have landed, its V chunks are in Vt[(t + 1) % 2]. */
HK_DEVICE void hk_ap_land(long long t, long long n_tiles, unsigned short (*Vt)[HK_ATTN_DH * HK_ATTN_VP],
                          hk_ap_regs_t *r) {
  HK_WAIT_VMCNT0();
  if (t + 1 >= 0 && t + 1 < n_tiles) {
#pragma unroll
    for (int i = 0; i < HK_ATTN_CH; i++) {
      const int c = HK_TID + i * HK_THREADS, key = c / (HK_ATTN_DH / 8), d = c % (HK_ATTN_DH / 8) * 8;
      if (HK_ATTN_VC % HK_THREADS != 0 && c >= HK_ATTN_VC) break;
      hk_lds_store_col8(Vt[(t + 1) & 1], HK_ATTN_VP, d, key, r->rv[i]);
    }
  }
  HK_WAIT_LGKMCNT0();
}

/* C(t + 1): S_{t+1} = K_{t+1} Q^T, then O = alpha O + V_t P_t, at raised priority. The
 * scheduling barriers keep the MFMAs between the s_setprio instructions (the compiler moved
 * them out otherwise); the empty asm uses (HK_PIN_USE) keep IR passes from sinking them
 * past s_setprio 0. */
HK_DEVICE void hk_ap_compute(hk_ap_regs_t *r) {
  __builtin_amdgcn_s_setprio(1);
  __builtin_amdgcn_sched_barrier(0);
#pragma unroll
  for (int f = 0; f < HK_ATTN_SF; f++) {
    r->st[f] = hk_zero_f32x16();
#pragma unroll
    for (int s = 0; s < HK_ATTN_DS; s++) r->st[f] = hk_mfma_32x32x8(r->ka[s][f], r->qf[s], r->st[f]);
  }
#pragma unroll
  for (int dt = 0; dt < HK_ATTN_OF; dt++) r->o[dt] *= r->alpha; /* M(t-1)'s alpha (1 before any) */
#pragma unroll
  for (int f = 0; f < HK_ATTN_SF; f++)
#pragma unroll
    for (int s = 0; s < 4; s++)
#pragma unroll
      for (int dt = 0; dt < HK_ATTN_OF; dt++) r->o[dt] = hk_mfma_32x32x8(r->va[f][s][dt], r->p[f][s], r->o[dt]);
#pragma unroll
  for (int f = 0; f < HK_ATTN_SF; f++) HK_PIN_USE(r->st[f][0]);
#pragma unroll
  for (int dt = 0; dt < HK_ATTN_OF; dt++) HK_PIN_USE(r->o[dt][0]);
  __builtin_amdgcn_sched_barrier(0);
  __builtin_amdgcn_s_setprio(0);
}

/* The softmax part of M(t): mask and scale S_t (keys t BKV ..), update the running max and
 * sum, alpha (O's rescale, applied by the next C phase), P_t as the next PV operands (as
 * attention_mfma.hip). */
HK_DEVICE void hk_ap_softmax(const hk_ap_blk_t *bk, long long t, unsigned lane, hk_ap_regs_t *r) {
  const long long j0 = t * HK_ATTN_BKV;
  /* Value i of fragment f is key j0 + 32 f + c_i + lk (c_i = 8 (i / 4) + i % 4, a constant):
   * valid while c < n_keys - j0 and, causal, c <= qi - j0 -- two lane-dependent bounds in
   * 32 bits (clamped to the tile), compared with constants. */
  const int lk = (int)(4u * (lane / 32u));
  const long long kl = bk->n_keys - j0, ql = bk->causal ? bk->qi - j0 : (long long)HK_ATTN_BKV;
  const int lim = (int)(kl < HK_ATTN_BKV ? kl : HK_ATTN_BKV) - lk;                    /* c < lim */
  const int cmax = (int)(ql < -1 ? -1 : ql > HK_ATTN_BKV ? HK_ATTN_BKV : ql) - lk; /* c <= cmax */
#if HK_ATTN_MASK
  /* mask[b, h, qi, j0 + lk + c] (only for a query < seq_q) */
  const unsigned short *mq = bk->mrow && bk->qi < bk->seq_q ? bk->mrow + bk->qi * bk->seq_kv + j0 + lk : nullptr;
#endif
  float mx = -hk_inf(), xs[HK_ATTN_SF][16]; /* not back into st: each phase writes its own registers */
#pragma unroll
  for (int f = 0; f < HK_ATTN_SF; f++)
#pragma unroll
    for (int i = 0; i < 16; i++) {
      const int c = 32 * f + 8 * (i / 4) + i % 4;
      const bool valid = c < lim && c <= cmax;
#if HK_ATTN_MASK
      const float x = !valid ? -hk_inf()
                      : mq ? fmaf(HK_LOAD(mq[c]), 1.44269504088896341f, r->st[f][i] * bk->scale2)
                           : r->st[f][i] * bk->scale2;
#else
      const float x = valid ? r->st[f][i] * bk->scale2 : -hk_inf();
#endif
      xs[f][i] = x;
      mx = fmaxf(mx, x);
    }
  mx = fmaxf(mx, __shfl_xor(mx, 32));
  const float m_new = fmaxf(r->m_run, mx);
  /* a query with no finite score so far keeps m = -inf: alpha 1, probabilities 0 */
  const bool none = m_new == -hk_inf();
  const float alpha = none ? 1.0f : exp2f(r->m_run - m_new);
  float sum = 0.0f;
#pragma unroll
  for (int f = 0; f < HK_ATTN_SF; f++)
#pragma unroll
    for (int s = 0; s < 4; s++) {
      float pv[4];
#pragma unroll
      for (int j = 0; j < 4; j++) {
        pv[j] = none ? 0.0f : exp2f(xs[f][4 * s + j] - m_new);
        sum += pv[j];
      }
      r->p[f][s] = hk_pack4(pv[0], pv[1], pv[2], pv[3]);
    }
  sum += __shfl_xor(sum, 32);
  r->l_run = r->l_run * alpha + sum;
  r->m_run = m_new;
  r->alpha = alpha;
}

/* M(t): the softmax of S_t (t >= 0), then the operands of C(t + 1) -- K_{t+1} (when there
 * is one) and V_t -- from LDS into registers; every LDS read done before returning. */
HK_DEVICE void hk_ap_memory(const hk_ap_blk_t *bk, long long t, long long n_tiles,
                            const unsigned short (*Ks)[HK_ATTN_BKV * HK_ATTN_KP],
                            const unsigned short (*Vt)[HK_ATTN_DH * HK_ATTN_VP], unsigned lane, hk_ap_regs_t *r) {
  const int lr = (int)(lane % 32u), lk = (int)(4u * (lane / 32u));
  if (t >= 0) hk_ap_softmax(bk, t, lane, r);
  if (t + 1 >= 0 && t + 1 < n_tiles) {
    /* K operand (s, f): key 32 f + lr, d = 8 s + lk: logical chunk s at s ^ swz(lr) */
    const unsigned short *kp = Ks[(t + 1) & 1] + lr * HK_ATTN_KP + lk;
    const int sw = hk_ap_swz(lr);
#pragma unroll
    for (int s = 0; s < HK_ATTN_DS; s++)
#pragma unroll
      for (int f = 0; f < HK_ATTN_SF; f++)
        r->ka[s][f] = *(const hk_u16x4 *)(kp + 32 * f * HK_ATTN_KP + (s ^ sw) * 8);
  }
  if (t >= 0) {
#pragma unroll
    for (int f = 0; f < HK_ATTN_SF; f++)
#pragma unroll
      for (int s = 0; s < 4; s++)
#pragma unroll
        for (int dt = 0; dt < HK_ATTN_OF; dt++)
          r->va[f][s][dt] = hk_lds_load4(Vt[t & 1], HK_ATTN_VP, 32 * dt + lr, 32 * f + 8 * s + lk);
  }
  HK_WAIT_LGKMCNT0();
}

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *q, const HK_T *k, const HK_T *v, HK_T *out, long long batch, long long seq_q,
        long long seq_kv, long long heads, long long kv_heads, long long dh, long long ld_q, long long ld_kv,
        long long q_col, long long k_col, long long v_col, long long causal, float scale
#if HK_ATTN_LENGTHS || HK_ATTN_MASK
        , const int *lengths, const HK_T *mask, long long mask_heads
#endif
) {
  __shared__ __attribute__((aligned(16))) unsigned short Ks[2][HK_ATTN_BKV * HK_ATTN_KP];
  __shared__ __attribute__((aligned(16))) unsigned short Vt[2][HK_ATTN_DH * HK_ATTN_VP];
  if (ld_kv >= HK_ATTN_MAX_LD) __builtin_trap(); /* the copies' offsets would not fit */
  const unsigned lane = (unsigned)HK_TID % 64u;
  /* wave-uniform in an SGPR, so that the group's choice of phase is a scalar branch */
  const int wave = __builtin_amdgcn_readfirstlane(HK_TID / 64), grp = wave / 4;
  const int lr = (int)(lane % 32u), lk = (int)(4u * (lane / 32u));
  const long long group = kv_heads > 0 && heads >= kv_heads ? heads / kv_heads : 1;
  const long long q_tiles = (seq_q + HK_ATTN_BQ - 1) / HK_ATTN_BQ;
  const long long n_blocks = batch * heads * q_tiles;
  const long long ld_o = heads * dh;
  (void)dh; /* == HK_ATTN_DH (the key's head_dim) */

  for (long long blk = HK_BID; blk < n_blocks; blk += HK_NBLOCKS) {
    const long long i0 = blk % q_tiles * HK_ATTN_BQ, h = blk / q_tiles % heads, b = blk / q_tiles / heads;
    const HK_T *qb = q + b * seq_q * ld_q + q_col + h * HK_ATTN_DH;
    HK_T *ob = out + b * seq_q * ld_o + h * HK_ATTN_DH;
    const long long q_last = hk_min_ll(i0 + HK_ATTN_BQ, seq_q) - 1;
#if HK_ATTN_LENGTHS
    const long long kv_len = !lengths ? seq_kv : lengths[b] < 0 ? 0 : hk_min_ll((long long)lengths[b], seq_kv);
#else
    const long long kv_len = seq_kv;
#endif
    hk_ap_blk_t bk;
    bk.kb = k + b * seq_kv * ld_kv + k_col + h / group * HK_ATTN_DH;
    bk.vb = v + b * seq_kv * ld_kv + v_col + h / group * HK_ATTN_DH;
    bk.ld_kv = ld_kv;
    bk.n_keys = causal ? hk_min_ll(kv_len, q_last + 1) : kv_len;
    bk.qi = i0 + 32 * wave + lr;
    bk.causal = causal;
    bk.scale2 = scale * 1.44269504088896341f; /* exp(x) = exp2(x log2 e) */
#if HK_ATTN_MASK
    bk.mrow = mask ? mask + (b * mask_heads + (mask_heads > 1 ? h : 0)) * seq_q * seq_kv : nullptr;
    bk.seq_q = seq_q;
    bk.seq_kv = seq_kv;
#elif HK_ATTN_LENGTHS
    (void)mask, (void)mask_heads;
#endif
    /* the number of key tiles, block-uniform: every wave passes the same barriers */
    const long long n_tiles = hk_uniform_i64((bk.n_keys + HK_ATTN_BKV - 1) / HK_ATTN_BKV);
    /* a wave whose 32 queries all lie past seq_q (the block's tail) only copies and passes
     * the barriers: its MFMA slots go to the other group's wave on the SIMD */
    const bool active = i0 + 32 * wave < seq_q;

    hk_ap_regs_t r;
#pragma unroll
    for (int s = 0; s < HK_ATTN_DS; s++) {
      if (bk.qi < seq_q)
        r.qf[s] = hk_load8(qb + bk.qi * ld_q + 8 * s + lk);
      else
        r.qf[s] = (unsigned short)0;
#pragma unroll
      for (int f = 0; f < HK_ATTN_SF; f++) r.ka[s][f] = (unsigned short)0;
    }
    /* zero P and V operands: the first C phase (C(0) / group 1's C(-1)) adds nothing */
#pragma unroll
    for (int f = 0; f < HK_ATTN_SF; f++) {
      r.st[f] = hk_zero_f32x16();
#pragma unroll
      for (int s = 0; s < 4; s++) {
        r.p[f][s] = (unsigned short)0;
#pragma unroll
        for (int dt = 0; dt < HK_ATTN_OF; dt++) r.va[f][s][dt] = (unsigned short)0;
      }
    }
#pragma unroll
    for (int dt = 0; dt < HK_ATTN_OF; dt++) r.o[dt] = hk_zero_f32x16();
    r.m_run = -hk_inf();
    r.l_run = 0.0f;
    r.alpha = 1.0f;

    if (n_tiles > 0) {
      /* Both groups run the same phases, M(t) then C(t + 1) for t = -2 .. T-1, group 1 one
       * slot behind (one extra barrier first; group 0 one extra last). Only where a wave
       * issues and lands the copies of round t depends on its group: group 0 issues them
       * before M(t) and lands them after C(t + 1), group 1 issues round t + 1's before
       * C(t + 1) and lands round t's after M(t). */
      if (grp == 1) {
        hk_ap_issue(&bk, -2, n_tiles, Ks, wave, lane, &r);
        HK_PP_BARRIER();
      }
      for (long long t = -2; t < n_tiles; t++) {
        if (grp == 0) hk_ap_issue(&bk, t, n_tiles, Ks, wave, lane, &r);
        if (active) hk_ap_memory(&bk, t, n_tiles, Ks, Vt, lane, &r); /* M(t) */
        if (grp == 1) hk_ap_land(t, n_tiles, Vt, &r);
        HK_PP_BARRIER();
        if (grp == 1) hk_ap_issue(&bk, t + 1, n_tiles, Ks, wave, lane, &r);
        if (active) hk_ap_compute(&r); /* C(t + 1) */
        if (grp == 0) hk_ap_land(t, n_tiles, Vt, &r);
        HK_PP_BARRIER();
      }
      if (grp == 0) HK_PP_BARRIER();
    }

    if (bk.qi < seq_q) {
      const float inv = r.l_run > 0.0f ? 1.0f / r.l_run : 0.0f;
      HK_T *orow = ob + bk.qi * ld_o;
#pragma unroll
      for (int dt = 0; dt < HK_ATTN_OF; dt++)
#pragma unroll
        for (int g = 0; g < 4; g++) {
          const int d = 32 * dt + 8 * g + lk; /* values r = 4g .. 4g+3: d .. d+3 */
          *(hk_u16x4 *)(orow + d) = hk_pack4(r.o[dt][4 * g] * inv, r.o[dt][4 * g + 1] * inv,
                                             r.o[dt][4 * g + 2] * inv, r.o[dt][4 * g + 3] * inv);
        }
    }
  }
}
