/* SPDX-License-Identifier: Apache-2.0 */
/* attention: out = softmax(q k^T * scale, causal mask) v per (batch, head), like
 * torch.nn.functional.scaled_dot_product_attention on head-split tensors, as
 * templates/host/attention.c.
 * Args: T q, T k, T v, T out, I batch, I seq_q, I seq_kv, I heads, I kv_heads, I dh,
 *       I ld_q, I ld_kv, I q_col, I k_col, I v_col, I causal, F scale.
 * Row r of q starts at q + r*ld_q; head h reads columns q_col + h*dh .. + dh (k and v
 * likewise with ld_kv and k_col/v_col), so a packed qkv tensor is passed three times.
 * Grouped-query: q head h reads kv head h / (heads / kv_heads). out is [.., heads*dh]
 * (row stride heads*dh). Causal masks key j > query i, both counted from 0 (top-left
 * aligned, as SDPA's is_causal).
 *
 * Simple flash-style kernel (matrix-core kernels come later). A block is HK_ATTN_BQ query
 * rows of one (batch, head): block = (b * heads + h) * q_tiles + query_tile along grid.x
 * (grid-stride beyond grid.x). Keys go by in tiles of HK_ATTN_BKV with an online softmax:
 *   1. scores S = Q K^T: the head dim in chunks of HK_ATTN_DC staged in shared memory
 *      (Q stays resident when dh <= HK_ATTN_DC); each thread owns HK_ATTN_RS scores;
 *   2. masking (key past the end, causal), then one thread per query row updates the
 *      running max m and sum l and turns the scores into probabilities P;
 *   3. O = O * alpha + P V on a V tile in shared memory; each thread owns HK_ATTN_RD
 *      output columns of one query row (HK_ATTN_LR threads per row) in registers.
 * Output columns are produced HK_ATTN_DC at a time (one pass when dh <= HK_ATTN_DC; for
 * larger dh the scores are recomputed per column chunk), so any dh works.
 *
 * Masked ABI (HK_ATTN_LENGTHS or HK_ATTN_MASK, as templates/host/attention.c): three more
 * args, const int *lengths (or null), const T *mask (or null), I mask_heads. Keys
 * j >= lengths[b] (clamped to 0..seq_kv) are masked for every query row (the key loop
 * stops there); mask[b, h or 0, i, j] is added to the scaled score. A row with no key left
 * outputs zeros. */
#ifndef HK_ATTN_LENGTHS
#define HK_ATTN_LENGTHS 0
#endif
#ifndef HK_ATTN_MASK
#define HK_ATTN_MASK 0
#endif
#define HK_ATTN_LR (HK_THREADS / HK_ATTN_BQ)              /* threads per query row */
#define HK_ATTN_RD (HK_ATTN_DC / HK_ATTN_LR)              /* output columns per thread */
#define HK_ATTN_RS (HK_ATTN_BQ * HK_ATTN_BKV / HK_THREADS) /* scores per thread */
#if HK_ATTN_LR * HK_ATTN_BQ != HK_THREADS || HK_ATTN_RD * HK_ATTN_LR != HK_ATTN_DC || \
    HK_ATTN_RS * HK_THREADS != HK_ATTN_BQ * HK_ATTN_BKV || HK_ATTN_BQ > HK_THREADS
#error "attention: HK_ATTN_BQ must divide HK_THREADS, which must divide HK_ATTN_BQ * HK_ATTN_BKV"
#endif

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *q, const HK_T *k, const HK_T *v, HK_T *out, long long batch, long long seq_q,
        long long seq_kv, long long heads, long long kv_heads, long long dh, long long ld_q, long long ld_kv,
        long long q_col, long long k_col, long long v_col, long long causal, float scale
#if HK_ATTN_LENGTHS || HK_ATTN_MASK
        , const int *lengths, const HK_T *mask, long long mask_heads
#endif
) {
  /* +1 column: score threads walk down the rows of KVs */
  HK_SHARED float Qs[HK_ATTN_BQ][HK_ATTN_DC + 1];
  HK_SHARED float KVs[HK_ATTN_BKV][HK_ATTN_DC + 1];
  HK_SHARED float Ps[HK_ATTN_BQ][HK_ATTN_BKV + 1];
  HK_SHARED float alpha_s[HK_ATTN_BQ];
  HK_SHARED float l_s[HK_ATTN_BQ];
  const int tid = HK_TID, row = tid / HK_ATTN_LR, lane = tid % HK_ATTN_LR;
  const long long group = kv_heads > 0 && heads >= kv_heads ? heads / kv_heads : 1;
  const long long q_tiles = (seq_q + HK_ATTN_BQ - 1) / HK_ATTN_BQ;
  const long long n_blocks = batch * heads * q_tiles;
  const long long ld_o = heads * dh;

  for (long long blk = HK_BID; blk < n_blocks; blk += HK_NBLOCKS) {
    const long long i0 = blk % q_tiles * HK_ATTN_BQ, h = blk / q_tiles % heads, b = blk / q_tiles / heads;
    const HK_T *qb = q + b * seq_q * ld_q + q_col + h * dh;
    const HK_T *kb = k + b * seq_kv * ld_kv + k_col + h / group * dh;
    const HK_T *vb = v + b * seq_kv * ld_kv + v_col + h / group * dh;
    HK_T *ob = out + b * seq_q * ld_o + h * dh;
    const long long q_last = hk_min_ll(i0 + HK_ATTN_BQ, seq_q) - 1;
    long long kv_len = seq_kv;
#if HK_ATTN_LENGTHS
    if (lengths) kv_len = lengths[b] < 0 ? 0 : hk_min_ll((long long)lengths[b], seq_kv);
#endif
#if HK_ATTN_MASK
    const HK_T *mb = mask ? mask + (b * mask_heads + (mask_heads > 1 ? h : 0)) * seq_q * seq_kv : nullptr;
#endif
    const long long n_keys = causal ? hk_min_ll(kv_len, q_last + 1) : kv_len;

    for (long long o0 = 0; o0 < dh; o0 += HK_ATTN_DC) {
      const long long dc = hk_min_ll(HK_ATTN_DC, dh - o0);
      float acc[HK_ATTN_RD];
#pragma unroll
      for (int r = 0; r < HK_ATTN_RD; r++) acc[r] = 0.0f;
      float m_run = -hk_inf(), l_run = 0.0f; /* row `tid` (threads tid < BQ) */

      for (long long j0 = 0; j0 < n_keys; j0 += HK_ATTN_BKV) {
        /* 1. scores */
        float s[HK_ATTN_RS];
#pragma unroll
        for (int r = 0; r < HK_ATTN_RS; r++) s[r] = 0.0f;
        for (long long d0 = 0; d0 < dh; d0 += HK_ATTN_DC) {
          const int dq = (int)hk_min_ll(HK_ATTN_DC, dh - d0);
          if (dh > HK_ATTN_DC || (o0 == 0 && j0 == 0)) {
            for (int e = tid; e < HK_ATTN_BQ * dq; e += HK_THREADS) {
              const int r = e / dq, c = e - r * dq;
              Qs[r][c] = i0 + r < seq_q ? HK_LOAD(qb[(i0 + r) * ld_q + d0 + c]) : 0.0f;
            }
          }
          for (int e = tid; e < HK_ATTN_BKV * dq; e += HK_THREADS) {
            const int r = e / dq, c = e - r * dq;
            KVs[r][c] = j0 + r < n_keys ? HK_LOAD(kb[(j0 + r) * ld_kv + d0 + c]) : 0.0f;
          }
          HK_SYNC();
#pragma unroll
          for (int r = 0; r < HK_ATTN_RS; r++) {
            const int e = tid + r * HK_THREADS, qi = e / HK_ATTN_BKV, kj = e % HK_ATTN_BKV;
            float dot = s[r];
            for (int c = 0; c < dq; c++) dot += Qs[qi][c] * KVs[kj][c];
            s[r] = dot;
          }
          HK_SYNC(); /* KVs (and Qs when dh > DC) are overwritten next */
        }

        /* 2. mask into Ps; V tile into KVs (zero past the last key and column) */
#pragma unroll
        for (int r = 0; r < HK_ATTN_RS; r++) {
          const int e = tid + r * HK_THREADS, qi = e / HK_ATTN_BKV, kj = e % HK_ATTN_BKV;
          const long long i = i0 + qi, j = j0 + kj;
          const int valid = j < n_keys && !(causal && j > i);
          float sc = s[r] * scale;
#if HK_ATTN_MASK
          if (mb && valid && i < seq_q) sc += HK_LOAD(mb[i * seq_kv + j]);
#endif
          Ps[qi][kj] = valid ? sc : -hk_inf();
        }
        for (int e = tid; e < HK_ATTN_BKV * HK_ATTN_DC; e += HK_THREADS) {
          const int r = e / HK_ATTN_DC, c = e % HK_ATTN_DC;
          KVs[r][c] = j0 + r < n_keys && c < dc ? HK_LOAD(vb[(j0 + r) * ld_kv + o0 + c]) : 0.0f;
        }
        HK_SYNC();
        if (tid < HK_ATTN_BQ) {
          float cm = -hk_inf();
          for (int j = 0; j < HK_ATTN_BKV; j++) cm = fmaxf(cm, Ps[tid][j]);
          const float m_new = fmaxf(m_run, cm);
          /* a row with no unmasked key so far keeps m = -inf: alpha 1, probabilities 0 */
          const int none = m_new == -hk_inf();
          const float alpha = none ? 1.0f : expf(m_run - m_new);
          float sum = 0.0f;
          for (int j = 0; j < HK_ATTN_BKV; j++) {
            const float p = none ? 0.0f : expf(Ps[tid][j] - m_new);
            Ps[tid][j] = p;
            sum += p;
          }
          l_run = l_run * alpha + sum;
          m_run = m_new;
          alpha_s[tid] = alpha;
        }
        HK_SYNC();

        /* 3. O = O * alpha + P V */
        const float alpha = alpha_s[row];
#pragma unroll
        for (int r = 0; r < HK_ATTN_RD; r++) acc[r] *= alpha;
        for (int j = 0; j < HK_ATTN_BKV; j++) {
          const float p = Ps[row][j];
#pragma unroll
          for (int r = 0; r < HK_ATTN_RD; r++) acc[r] += p * KVs[j][lane + r * HK_ATTN_LR];
        }
        HK_SYNC(); /* Ps, KVs and alpha_s are overwritten by the next key tile */
      }

      if (tid < HK_ATTN_BQ) l_s[tid] = l_run;
      HK_SYNC();
      const float inv = l_s[row] > 0.0f ? 1.0f / l_s[row] : 0.0f; /* no key left: zeros */
      const long long i = i0 + row;
      if (i < seq_q) {
#pragma unroll
        for (int r = 0; r < HK_ATTN_RD; r++) {
          const int d = lane + r * HK_ATTN_LR;
          if (d < dc) ob[i * ld_o + o0 + d] = HK_STORE(acc[r] * inv);
        }
      }
      HK_SYNC(); /* l_s (and Qs when dh > DC) are rewritten by the next column chunk */
    }
  }
}
