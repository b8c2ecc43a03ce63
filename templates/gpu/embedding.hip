/* SPDX-License-Identifier: Apache-2.0 */
/* embedding: out[t] = table[clamp(ids[t], 0, vocab - 1)] (+ pos[t % seq] with HK_HAS_ADD),
 * as templates/host/embedding.c. Args: T table, const int *ids, T pos (or null), T out,
 * I tokens, I seq, I vocab, I hidden; with HK_HAS_CTX then const int *ctx [tokens], I max_pos:
 * the position row is clamp(ctx[t] - 1, 0, max_pos - 1) of pos [max_pos, hidden] (seq
 * unused). Out-of-range ids and positions are clamped: no read outside the tables. A block is
 * one token (grid-stride beyond grid.x); HK_THREADS threads stride over the hidden dim, each
 * with EMB_ILP loads in flight before its stores (a decode step's one row is otherwise a chain
 * of dependent round trips to memory), of HK_ROW_VEC elements (16 bytes where the rows
 * allow: variant_simple.c) when no position row is added. */
#ifndef HK_HAS_CTX
#define HK_HAS_CTX 0
#endif
#ifndef HK_ROW_VEC
#define HK_ROW_VEC 1
#endif
#define EMB_ILP 4

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *table, const int *ids, const HK_T *pos, HK_T *out, long long tokens, long long seq,
        long long vocab, long long hidden
#if HK_HAS_CTX
        , const int *ctx, long long max_pos
#endif
) {
  HK_PDL_ENTRY(); /* a pdl variant (variant_simple.c): nothing is touched before it */
  for (long long t = HK_BID; t < tokens; t += HK_NBLOCKS) {
    const long long raw = ids[t];
    const long long id = raw < 0 ? 0 : raw >= vocab ? vocab - 1 : raw;
    const HK_T *row = table + id * hidden;
    HK_T *o = out + t * hidden;
#if HK_HAS_ADD
#if HK_HAS_CTX
    (void)seq;
    const long long at = (long long)ctx[t] - 1;
    const HK_T *p = pos + (at < 0 ? 0 : at >= max_pos ? max_pos - 1 : at) * hidden;
#else
    const HK_T *p = pos + t % seq * hidden;
#endif
    for (long long d0 = HK_TID; d0 < hidden; d0 += EMB_ILP * HK_THREADS) {
      float v[EMB_ILP];
#pragma unroll
      for (int i = 0; i < EMB_ILP; i++) {
        const long long d = d0 + i * HK_THREADS;
        v[i] = d < hidden ? HK_LOAD(row[d]) + HK_LOAD(p[d]) : 0.0f;
      }
#pragma unroll
      for (int i = 0; i < EMB_ILP; i++)
        if (d0 + i * HK_THREADS < hidden) o[d0 + i * HK_THREADS] = HK_STORE(v[i]);
    }
#else
#if HK_HAS_CTX
    (void)ctx, (void)max_pos;
#endif
    (void)pos, (void)seq;
#if HK_ROW_VEC > 1 /* rows of whole 16-byte vectors */
    typedef hk_v16_t emb_t;
    const long long n = hidden / HK_ROW_VEC;
    const emb_t *src = (const emb_t *)row;
    emb_t *dst = (emb_t *)o;
#else
    typedef HK_T emb_t;
    const long long n = hidden;
    const emb_t *src = row;
    emb_t *dst = o;
#endif
    for (long long d0 = HK_TID; d0 < n; d0 += EMB_ILP * HK_THREADS) { /* the bits as stored */
      emb_t v[EMB_ILP];
#pragma unroll
      for (int i = 0; i < EMB_ILP; i++) /* past the row: its last element again, not stored */
        v[i] = src[d0 + i * HK_THREADS < n ? d0 + i * HK_THREADS : n - 1];
#pragma unroll
      for (int i = 0; i < EMB_ILP; i++)
        if (d0 + i * HK_THREADS < n) dst[d0 + i * HK_THREADS] = v[i];
    }
#endif
  }
}
