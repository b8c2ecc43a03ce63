/* SPDX-License-Identifier: Apache-2.0 */
/* attention_mfma: flash attention on AMD matrix cores (v_mfma_f32_32x32x8 f16 / bf16_1k)
 * with an online softmax -- the semantics of attention.hip and templates/host/attention.c,
 * same ABI:
 *   T q, T k, T v, T out, I batch, I seq_q, I seq_kv, I heads, I kv_heads, I dh,
 *   I ld_q, I ld_kv, I q_col, I k_col, I v_col, I causal, F scale.
 * Row r of q starts at q + r*ld_q, head h reads columns q_col + h*dh .. + dh (k, v with
 * ld_kv and k_col / v_col; a packed qkv tensor is passed three times); grouped-query:
 * q head h reads kv head h / (heads / kv_heads); out is [.., heads*dh]; causal masks key
 * j > query i (top-left aligned).
 * The masked ABI (HK_ATTN_LENGTHS or HK_ATTN_MASK, as attention.hip: three more args,
 * const int *lengths, const T *mask, I mask_heads): batch entry b has lengths[b] keys
 * (clamped to 0..seq_kv) in place of seq_kv, 0 keys store zeros; mask[b, h or 0, i, j]
 * (times log2 e) is added to each unmasked scaled score; a row with no finite score
 * stores zeros.
 * Requires (variant_amd.c): f16/bf16, align 8 (ld_q, ld_kv, the column offsets and dh
 * multiples of 8; tensors 16-byte aligned), dh == HK_ATTN_DH (64 or 128, the key's
 * head_dim), wave64.
 *
 * A block is HK_ATTN_BQ = 32 * 4 query rows of one (batch, head): block = (b * heads +
 * h) * q_tiles + query_tile along grid.x (grid-stride beyond grid.x), as attention.hip.
 * Wave w owns queries i0 + 32w .. +31; lane l the query i0 + 32w + l % 32 (lanes l and
 * l + 32 share it). Per key tile of HK_ATTN_BKV = 64 keys (K rows and V transposed in
 * LDS, zero past the last key):
 *   1. S^T = K Q^T with 32x32x8 MFMAs: A = K tile rows (keys) x d, B = Q^T (d x queries),
 *      Q held in registers for the whole block (B operand: lane l has Q[query l%32]
 *      [8s + 4(l/32) + j]). C value r of lane l is S[query l%32][key 8(r/4) + 4(l/32) +
 *      r%4] (tile_amd.h layout), so every lane holds scores of its own query only.
 *   2. masking (key past n_keys, causal), scale (folded with log2 e, exp2), online
 *      softmax: max/sum over the lane's 16 values per 32-key fragment, then one xor-32
 *      shuffle with the lane sharing the query.
 *   3. O^T += V^T P^T with 32x32x8 MFMAs: A = V^T (d x keys) from the transposed V tile,
 *      B = P^T (keys x queries): for the k block of keys 8s..8s+7, lane l must supply
 *      P[query l%32][8s + 4(l/32) + j], j = 0..3, which is exactly its own S values
 *      r = 4s + j -- no data moves between lanes. C value r of lane l is O[query l%32]
 *      [d = 32 dt + 8(r/4) + 4(l/32) + r%4], so the rescale by alpha is per lane.
 * The output is O / l, four consecutive d (r%4) per 8-byte store, queries < seq_q only.
 */
#define HK_ATTN_WAVES 4
#define HK_ATTN_BQ (32 * HK_ATTN_WAVES)
#ifndef HK_ATTN_BKV
#define HK_ATTN_BKV 64
#endif
#define HK_ATTN_KP (HK_ATTN_DH + HK_LDS_PAD)  /* K tile pitch: [key][d] */
#define HK_ATTN_VP (HK_ATTN_BKV + HK_LDS_PAD) /* V^T tile pitch: [d][key] */
#define HK_ATTN_SF (HK_ATTN_BKV / 32)         /* 32-key score fragments */
#define HK_ATTN_OF (HK_ATTN_DH / 32)          /* 32-wide output fragments */
#define HK_ATTN_DS (HK_ATTN_DH / 8)           /* k blocks of Q K^T */
#define HK_ATTN_CH (HK_ATTN_BKV * HK_ATTN_DH / 8 / HK_THREADS) /* 16-byte chunks per thread of a K or V tile */
#if HK_THREADS != 32 * 2 * HK_ATTN_WAVES || HK_ATTN_DH % 32 != 0 || HK_ATTN_BKV % 32 != 0 || \
    HK_ATTN_CH * HK_THREADS * 8 != HK_ATTN_BKV * HK_ATTN_DH || HK_ATTN_CH < 1
#error "attention_mfma: HK_THREADS must be 256, HK_ATTN_DH and HK_ATTN_BKV multiples of 32"
#endif
#if (HK_ATTN_BKV * HK_ATTN_KP + HK_ATTN_DH * HK_ATTN_VP) * 2 > 65536
#error "attention_mfma: LDS tiles exceed 64 KiB"
#endif

#ifndef HK_ATTN_LENGTHS
#define HK_ATTN_LENGTHS 0
#endif
#ifndef HK_ATTN_MASK
#define HK_ATTN_MASK 0
#endif

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *q, const HK_T *k, const HK_T *v, HK_T *out, long long batch, long long seq_q,
        long long seq_kv, long long heads, long long kv_heads, long long dh, long long ld_q, long long ld_kv,
        long long q_col, long long k_col, long long v_col, long long causal, float scale
#if HK_ATTN_LENGTHS || HK_ATTN_MASK
        , const int *lengths, const HK_T *mask, long long mask_heads
#endif
) {
  __shared__ __attribute__((aligned(16))) unsigned short Ks[HK_ATTN_BKV * HK_ATTN_KP];
  __shared__ __attribute__((aligned(16))) unsigned short Vt[HK_ATTN_DH * HK_ATTN_VP];
  const int lane = HK_TID % 64, wave = HK_TID / 64;
  const int lr = lane % 32, lk = 4 * (lane / 32);
  const long long group = kv_heads > 0 && heads >= kv_heads ? heads / kv_heads : 1;
  const long long q_tiles = (seq_q + HK_ATTN_BQ - 1) / HK_ATTN_BQ;
  const long long n_blocks = batch * heads * q_tiles;
  const long long ld_o = heads * dh;
  const float scale2 = scale * 1.44269504088896341f; /* exp(x) = exp2(x log2 e) */
  (void)dh;                                          /* == HK_ATTN_DH (the key's head_dim) */

  for (long long blk = HK_BID; blk < n_blocks; blk += HK_NBLOCKS) {
    const long long i0 = blk % q_tiles * HK_ATTN_BQ, h = blk / q_tiles % heads, b = blk / q_tiles / heads;
    const HK_T *qb = q + b * seq_q * ld_q + q_col + h * HK_ATTN_DH;
    const HK_T *kb = k + b * seq_kv * ld_kv + k_col + h / group * HK_ATTN_DH;
    const HK_T *vb = v + b * seq_kv * ld_kv + v_col + h / group * HK_ATTN_DH;
    HK_T *ob = out + b * seq_q * ld_o + h * HK_ATTN_DH;
    const long long q_last = hk_min_ll(i0 + HK_ATTN_BQ, seq_q) - 1;
#if HK_ATTN_LENGTHS
    const long long kv_len = !lengths ? seq_kv : lengths[b] < 0 ? 0 : hk_min_ll((long long)lengths[b], seq_kv);
#else
    const long long kv_len = seq_kv;
#endif
#if HK_ATTN_MASK
    const HK_T *mrow = mask ? mask + (b * mask_heads + (mask_heads > 1 ? h : 0)) * seq_q * seq_kv : nullptr;
#elif HK_ATTN_LENGTHS
    (void)mask, (void)mask_heads;
#endif
    const long long n_keys = causal ? hk_min_ll(kv_len, q_last + 1) : kv_len;
    const long long qi = i0 + 32 * wave + lr; /* this lane's query */

    /* Q^T operands for the whole block: qf[s] = Q[qi][8s + lk .. +3] (zero past seq_q) */
    hk_u16x4 qf[HK_ATTN_DS];
#pragma unroll
    for (int s = 0; s < HK_ATTN_DS; s++) {
      if (qi < seq_q)
        qf[s] = hk_load8(qb + qi * ld_q + 8 * s + lk);
      else
        qf[s] = (unsigned short)0;
    }
    hk_f32x16 o[HK_ATTN_OF];
#pragma unroll
    for (int f = 0; f < HK_ATTN_OF; f++) o[f] = hk_zero_f32x16();
    float m_run = -hk_inf(), l_run = 0.0f; /* log2-domain running max, running sum */

    for (long long j0 = 0; j0 < n_keys; j0 += HK_ATTN_BKV) {
      HK_SYNC(); /* the previous tile's readers are done */
#pragma unroll
      for (int i = 0; i < HK_ATTN_CH; i++) {
        const int c = HK_TID + i * HK_THREADS, key = c / (HK_ATTN_DH / 8), d = c % (HK_ATTN_DH / 8) * 8;
        const bool ok = j0 + key < n_keys;
        const long long row = (j0 + key) * ld_kv + d;
        hk_lds_store_row8(Ks, HK_ATTN_KP, key, d, hk_load16_masked(kb + row, ok));
        hk_lds_store_col8(Vt, HK_ATTN_VP, d, key, hk_load16_masked(vb + row, ok));
      }
      HK_SYNC();

      /* 1. S^T = K Q^T */
      hk_f32x16 st[HK_ATTN_SF];
#pragma unroll
      for (int f = 0; f < HK_ATTN_SF; f++) {
        st[f] = hk_zero_f32x16();
#pragma unroll
        for (int s = 0; s < HK_ATTN_DS; s++)
          st[f] = hk_mfma_32x32x8(hk_lds_load4(Ks, HK_ATTN_KP, 32 * f + lr, 8 * s + lk), qf[s], st[f]);
      }

      /* 2. mask, scale, online softmax (lane-local, then the lane sharing the query) */
      float mx = -hk_inf();
#pragma unroll
      for (int f = 0; f < HK_ATTN_SF; f++)
#pragma unroll
        for (int r = 0; r < 16; r++) {
          const long long j = j0 + 32 * f + hk_mfma32_c_row(lane, r);
          const bool valid = j < n_keys && !(causal && j > qi);
#if HK_ATTN_MASK
          const float x = !valid ? -hk_inf()
                          : mrow && qi < seq_q
                              ? fmaf(HK_LOAD(mrow[qi * seq_kv + j]), 1.44269504088896341f, st[f][r] * scale2)
                              : st[f][r] * scale2;
#else
          const float x = valid ? st[f][r] * scale2 : -hk_inf();
#endif
          st[f][r] = x;
          mx = fmaxf(mx, x);
        }
      mx = fmaxf(mx, __shfl_xor(mx, 32));
      const float m_new = fmaxf(m_run, mx);
      /* a query with no unmasked key so far keeps m = -inf: alpha 1, probabilities 0 */
      const bool none = m_new == -hk_inf();
      const float alpha = none ? 1.0f : exp2f(m_run - m_new);
      float sum = 0.0f;
#pragma unroll
      for (int f = 0; f < HK_ATTN_SF; f++)
#pragma unroll
        for (int r = 0; r < 16; r++) {
          const float p = none ? 0.0f : exp2f(st[f][r] - m_new);
          st[f][r] = p;
          sum += p;
        }
      sum += __shfl_xor(sum, 32);
      l_run = l_run * alpha + sum;
      m_run = m_new;

      /* 3. O^T = O^T * alpha + V^T P^T */
#pragma unroll
      for (int f = 0; f < HK_ATTN_OF; f++) o[f] *= alpha;
#pragma unroll
      for (int f = 0; f < HK_ATTN_SF; f++)
#pragma unroll
        for (int s = 0; s < 4; s++) {
          const hk_u16x4 p = hk_pack4(st[f][4 * s], st[f][4 * s + 1], st[f][4 * s + 2], st[f][4 * s + 3]);
#pragma unroll
          for (int dt = 0; dt < HK_ATTN_OF; dt++)
            o[dt] = hk_mfma_32x32x8(hk_lds_load4(Vt, HK_ATTN_VP, 32 * dt + lr, 32 * f + 8 * s + lk), p, o[dt]);
        }
    }

    if (qi < seq_q) {
      const float inv = l_run > 0.0f ? 1.0f / l_run : 0.0f;
      HK_T *orow = ob + qi * ld_o;
#pragma unroll
      for (int dt = 0; dt < HK_ATTN_OF; dt++)
#pragma unroll
        for (int g = 0; g < 4; g++) {
          const int d = 32 * dt + 8 * g + lk; /* values r = 4g .. 4g+3: d .. d+3 */
          *(hk_u16x4 *)(orow + d) =
              hk_pack4(o[dt][4 * g] * inv, o[dt][4 * g + 1] * inv, o[dt][4 * g + 2] * inv, o[dt][4 * g + 3] * inv);
        }
    }
  }
}
