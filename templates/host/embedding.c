/* SPDX-License-Identifier: Apache-2.0 */
/* embedding: out[t] = table[clamp(ids[t], 0, vocab - 1)] (+ pos[t % seq] with HK_HAS_ADD),
 * rows of `hidden` elements; f32 sum, one rounding. Out-of-range ids (negative, >= vocab)
 * are clamped: no read outside the table.
 * Args: T table, I32 ids, T pos (or null), T out, I tokens, I seq, I vocab, I hidden.
 * HK_HAS_CTX (with HK_HAS_ADD): two more, I32 ctx [tokens], I max_pos: the position row is
 * clamp(ctx[t] - 1, 0, max_pos - 1) instead of t % seq (a token row's position, GENERATE.md).
 * A block is one token. */
HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *table = (const HK_T *)hk_arg_ptr(args, 0);
  const int32_t *ids = (const int32_t *)hk_arg_ptr(args, 1);
  const HK_T *pos = (const HK_T *)hk_arg_ptr(args, 2);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 3);
  const int64_t tokens = hk_arg_i64(args, 4), seq = hk_arg_i64(args, 5), vocab = hk_arg_i64(args, 6);
  const int64_t hidden = hk_arg_i64(args, 7);
#if HK_HAS_CTX
  const int32_t *ctx = (const int32_t *)hk_arg_ptr(args, 8);
  const int64_t max_pos = hk_arg_i64(args, 9);
  (void)seq;
#endif
  (void)pos;
  for (int64_t t = block_begin; t < (int64_t)block_end && t < tokens; t++) {
    const int64_t id = ids[t] < 0 ? 0 : ids[t] >= vocab ? vocab - 1 : ids[t];
    const HK_T *row = table + id * hidden;
    HK_T *o = out + t * hidden;
#if HK_HAS_ADD
#if HK_HAS_CTX
    const int64_t at = (int64_t)ctx[t] - 1, p_row = at < 0 ? 0 : at >= max_pos ? max_pos - 1 : at;
#else
    const int64_t p_row = t % seq;
#endif
    const HK_T *p = pos + p_row * hidden;
    HK_MAP16(o, d, 0, hidden, HK_LOAD(row[d]) + HK_LOAD(p[d]));
#else
    (void)seq;
    for (int64_t d = 0; d < hidden; d++) o[d] = row[d];
#endif
  }
}
