/* SPDX-License-Identifier: Apache-2.0 */
/* kv_append: a packed q|k|v row's k and v heads into the KV caches, its q heads out, as
 * lower.h says:
 *   qkv [rows, (heads + 2 kv_heads) dh]; k_cache, v_cache [layers, slots, max_seq, kv_heads dh];
 *   row t with 1 <= ctx[t] <= max_seq and 0 <= slot[t] < slots stores its k heads at
 *   k_cache[layer, slot[t], ctx[t] - 1] and its v heads at v_cache[layer, slot[t], ctx[t] - 1];
 *   any other row (a padding row has ctx 0) stores nothing in either cache, so no write
 *   leaves the cache whatever ctx and slot hold; out[t] = the q heads of row t, every row.
 * Args: T qkv, T k_cache, T v_cache, const int *ctx, const int *slot, T out, I rows, I heads,
 *       I kv_heads, I dh, I layer, I slots, I max_seq; with HK_ROPE (a rope folded in) F theta,
 *       then with HK_ROPE_SCALING F factor, F low_freq, F high_freq, F original_max.
 * A block is HK_THREADS * HK_KV_VEC consecutive columns of one row (blocks row-major: row,
 * column chunk; grid-stride beyond grid.x), a thread HK_KV_VEC consecutive elements (8 where
 * every row, head and part is a multiple of 8 elements: key align 8, one 16-byte load of a
 * 16-bit row; else 1), inside one head, copied as stored (no conversion), or with HK_KV_FP8
 * (fp8_e4m3 caches, unsigned char) rounded to e4m3 (common.h). Cache offsets are 64-bit: a
 * cache may hold more than 2^31 elements.
 * HK_ROPE: the q and k heads are rotated first, as the rope kernel does (rope.hip, rotate-half
 * form) at position max(ctx[t] - 1, 0) with rope_freq.h's angles, each rotated element rounded
 * to T once (a k element to e4m3 from that value, as the unfused pair stores it); the v heads
 * are copied. A block's row shares its angles: with dh / 2 <= HK_THREADS the block's threads
 * compute the dh / 2 sines and cosines once into shared memory (after issuing their loads),
 * else each thread its own. */
#ifndef HK_KV_VEC
#define HK_KV_VEC 1
#endif
#if HK_KV_FP8
typedef unsigned char kv_t;
#define KV_STORE(e) hk_f32_to_fp8_e4m3(HK_LOAD(e))
#else
typedef HK_T kv_t;
#define KV_STORE(e) (e)
#endif

struct __attribute__((aligned(HK_KV_VEC * sizeof(HK_T)))) kv_vec {
  HK_T e[HK_KV_VEC];
};

/* HK_KV_VEC elements from p (aligned to them) */
HK_DEVICE kv_vec kv_load(const HK_T *p) { return *(const kv_vec *)p; }

/* The thread's elements to dst (the caches: kv_t each; out: T) */
HK_DEVICE void kv_store_out(HK_T *p, const kv_vec &v) { *(kv_vec *)p = v; }
HK_DEVICE void kv_store_cache(kv_t *p, const kv_vec &v) {
#if HK_KV_FP8
#pragma unroll
  for (int i = 0; i < HK_KV_VEC; i++) p[i] = KV_STORE(v.e[i]);
#else
  *(kv_vec *)p = v;
#endif
}

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *qkv, kv_t *k_cache, kv_t *v_cache, const int *ctx, const int *slot, HK_T *out, long long rows,
        long long heads, long long kv_heads, long long dh, long long layer, long long slots, long long max_seq
#if HK_ROPE
        , float theta
#if HK_ROPE_SCALING
        , float factor, float low_freq, float high_freq, float original_max
#endif
#endif
) {
  HK_PDL_ENTRY(); /* a pdl variant (variant_simple.c): nothing is touched before it */
  const long long q_cols = heads * dh, kv_cols = kv_heads * dh, width = q_cols + 2 * kv_cols;
  const long long per_block = (long long)HK_THREADS * HK_KV_VEC, chunks = (width + per_block - 1) / per_block;
#if HK_ROPE
#if HK_ROPE_SCALING
  const rope_scaling sc = {factor, low_freq, high_freq, original_max};
#else
  const rope_scaling sc = {1.0f, 1.0f, 1.0f, 1.0f};
#endif
  const long long half = dh / 2, rot_cols = q_cols + kv_cols; /* the q and k heads turn */
  const bool table = half <= HK_THREADS;                        /* the same for every block */
  const bool side_vec = half % HK_KV_VEC == 0; /* a thread's elements all on one side of their pairs */
  __shared__ float tab_sn[HK_THREADS], tab_cs[HK_THREADS];
#endif
  for (long long b = HK_BID; b < rows * chunks; b += HK_NBLOCKS) { /* b is the block's: syncs agree */
    const long long t = b / chunks, c0 = b % chunks * per_block + (long long)HK_TID * HK_KV_VEC;
    const bool live = c0 < width; /* width is a multiple of HK_KV_VEC */
    const HK_T *row = qkv + t * width;
    kv_vec v;
    if (live) v = kv_load(row + c0);
#if HK_ROPE
    const bool turn = live && c0 < rot_cols;
    const long long j0 = c0 % dh; /* c0 and dh are multiples of HK_KV_VEC: one head */
    kv_vec w;                     /* the partners, when on one side */
    if (turn && side_vec) w = kv_load(row + c0 + (j0 < half ? half : -half));
    const int pc = ctx[t];
    const float p = (float)(pc > 1 ? pc - 1 : 0);
    if (table) {
      __syncthreads(); /* the previous row's angles are used up */
      if ((long long)HK_TID < half) rope_angle(p, (long long)HK_TID, dh, theta, sc, &tab_sn[HK_TID], &tab_cs[HK_TID]);
      __syncthreads();
    }
    if (turn) {
#pragma unroll
      for (int i = 0; i < HK_KV_VEC; i++) {
        const long long j = j0 + i, lo = j < half, jp = lo ? j : j - half;
        const float x = HK_LOAD(v.e[i]);
        const float y = side_vec ? HK_LOAD(w.e[i]) : HK_LOAD(row[c0 + i + (lo ? half : -half)]);
        float sn, cs;
        if (table) sn = tab_sn[jp], cs = tab_cs[jp];
        else rope_angle(p, jp, dh, theta, sc, &sn, &cs);
        /* rope.hip's o1 = x1 cos - x2 sin, o2 = x2 cos + x1 sin (rope_freq.h's one form) */
        v.e[i] = HK_STORE(rope_turn(x, y, cs, sn, lo != 0));
      }
    }
#endif
    if (!live) continue;
    if (c0 < q_cols) {
      kv_store_out(out + t * q_cols + c0, v);
      continue;
    }
    const long long pos = (long long)ctx[t] - 1, s = slot[t];
    if (pos < 0 || pos >= max_seq || s < 0 || s >= slots) continue;
    const long long kc = c0 - q_cols, at = ((layer * slots + s) * max_seq + pos) * kv_cols;
    if (kc < kv_cols) kv_store_cache(k_cache + at + kc, v);
    else kv_store_cache(v_cache + at + kc - kv_cols, v);
  }
}
