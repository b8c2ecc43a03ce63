/* SPDX-License-Identifier: Apache-2.0 */
/* embedding: out[t] = table[clamp(ids[t], 0, vocab - 1)] (+ pos[t % seq] with HK_HAS_ADD),
 * as templates/host/embedding.c. Args: T table, const int *ids, T pos (or null), T out,
 * I tokens, I seq, I vocab, I hidden; with HK_HAS_CTX then const int *ctx [tokens], I max_pos:
 * the position row is clamp(ctx[t] - 1, 0, max_pos - 1) of pos [max_pos, hidden] (seq
 * unused). Out-of-range ids and positions are clamped: no read outside the tables. A block is
 * one token (grid-stride beyond grid.x); HK_THREADS threads stride over the hidden dim. */
#ifndef HK_HAS_CTX
#define HK_HAS_CTX 0
#endif

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
    for (long long d = HK_TID; d < hidden; d += HK_THREADS) o[d] = HK_STORE(HK_LOAD(row[d]) + HK_LOAD(p[d]));
#else
#if HK_HAS_CTX
    (void)ctx, (void)max_pos;
#endif
    (void)pos, (void)seq;
    for (long long d = HK_TID; d < hidden; d += HK_THREADS) o[d] = row[d];
#endif
  }
}
