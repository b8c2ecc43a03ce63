/* SPDX-License-Identifier: Apache-2.0 */
/* kv_append: a packed q|k|v row's k and v heads into the KV caches, its q heads out, as
 * lower.h says:
 *   qkv [rows, (heads + 2 kv_heads) dh]; k_cache, v_cache [layers, slots, max_seq, kv_heads dh];
 *   row t with 1 <= ctx[t] <= max_seq and 0 <= slot[t] < slots stores its k heads at
 *   k_cache[layer, slot[t], ctx[t] - 1] and its v heads at v_cache[layer, slot[t], ctx[t] - 1];
 *   any other row (a padding row has ctx 0) stores nothing in either cache, so no write
 *   leaves the cache whatever ctx and slot hold; out[t] = the q heads of row t, every row.
 * Args: T qkv, T k_cache, T v_cache, const int *ctx, const int *slot, T out, I rows, I heads,
 *       I kv_heads, I dh, I layer, I slots, I max_seq.
 * A block is HK_THREADS consecutive columns of one row (blocks row-major: row, column chunk;
 * grid-stride beyond grid.x), a thread one element, copied as stored (no conversion), or with
 * HK_KV_FP8 (fp8_e4m3 caches, unsigned char) rounded to e4m3 (common.h). Cache offsets are
 * 64-bit: a cache may hold more than 2^31 elements. */
#if HK_KV_FP8
typedef unsigned char kv_t;
#define KV_STORE(e) hk_f32_to_fp8_e4m3(HK_LOAD(e))
#else
typedef HK_T kv_t;
#define KV_STORE(e) (e)
#endif
HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *qkv, kv_t *k_cache, kv_t *v_cache, const int *ctx, const int *slot, HK_T *out, long long rows,
        long long heads, long long kv_heads, long long dh, long long layer, long long slots, long long max_seq) {
  HK_PDL_ENTRY(); /* a pdl variant (variant_simple.c): nothing is touched before it */
  const long long q_cols = heads * dh, kv_cols = kv_heads * dh, width = q_cols + 2 * kv_cols;
  const long long chunks = (width + HK_THREADS - 1) / HK_THREADS;
  for (long long b = HK_BID; b < rows * chunks; b += HK_NBLOCKS) {
    const long long t = b / chunks, c = b % chunks * HK_THREADS + HK_TID;
    if (c >= width) continue;
    const HK_T e = qkv[t * width + c];
    if (c < q_cols) {
      out[t * q_cols + c] = e;
      continue;
    }
    const long long pos = (long long)ctx[t] - 1, s = slot[t];
    if (pos < 0 || pos >= max_seq || s < 0 || s >= slots) continue;
    const long long kc = c - q_cols, row = ((layer * slots + s) * max_seq + pos) * kv_cols;
    if (kc < kv_cols) k_cache[row + kc] = KV_STORE(e);
    else v_cache[row + kc - kv_cols] = KV_STORE(e);
  }
}
