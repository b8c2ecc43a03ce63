/* SPDX-License-Identifier: Apache-2.0 */
/* embedding: out[t] = table[clamp(ids[t], 0, vocab - 1)] (+ pos[t % seq] with HK_HAS_ADD),
 * as templates/host/embedding.c. Args: T table, const int *ids, T pos (or null), T out,
 * I tokens, I seq, I vocab, I hidden. Out-of-range ids are clamped: no read outside the
 * table. A block is one token (grid-stride beyond grid.x); HK_THREADS threads stride over
 * the hidden dim. */
HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *table, const int *ids, const HK_T *pos, HK_T *out, long long tokens, long long seq,
        long long vocab, long long hidden) {
  for (long long t = HK_BID; t < tokens; t += HK_NBLOCKS) {
    const long long raw = ids[t];
    const long long id = raw < 0 ? 0 : raw >= vocab ? vocab - 1 : raw;
    const HK_T *row = table + id * hidden;
    HK_T *o = out + t * hidden;
#if HK_HAS_ADD
    const HK_T *p = pos + t % seq * hidden;
    for (long long d = HK_TID; d < hidden; d += HK_THREADS) o[d] = HK_STORE(HK_LOAD(row[d]) + HK_LOAD(p[d]));
#else
    (void)pos, (void)seq;
    for (long long d = HK_TID; d < hidden; d += HK_THREADS) o[d] = row[d];
#endif
  }
}
