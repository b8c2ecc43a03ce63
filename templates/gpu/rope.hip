/* SPDX-License-Identifier: Apache-2.0 */
/* rope: rotary position embedding, rotate-half form (Hugging Face Llama), as
 * the host kernel. x [rows, heads*dh]; row r is at position p = r % seq + pos_offset
 * (HK_HAS_CTX: p = max(ctx[r] - 1, 0), seq and pos_offset unused); for each head and
 * j < dh/2: inv_freq = theta^(-2j/dh) (HK_ROPE_SCALING: then rewritten; rope_freq.h, emitted before this),
 * angle = p * inv_freq (f32, as HF's f32 inv_freq and position product), x1 = x[j],
 * x2 = x[j + dh/2] (inside the head),
 *   out[j] = x1 cos - x2 sin,   out[j + dh/2] = x2 cos + x1 sin.
 * Args: T x, T out, I rows, I seq, I heads, I dh, I pos_offset, F theta, I pass_heads: a row
 * holds heads + pass_heads heads, the last pass_heads copied unchanged (a packed q|k|v:
 * heads = the q and k heads, which share the angles, pass_heads = the v heads; 0 for a
 * plain rope); then with HK_HAS_CTX const int *ctx [rows], then with HK_ROPE_SCALING
 * F factor, F low_freq, F high_freq, F original_max (lower.h's tails, in that order).
 * dh is even (the compiler checks). inv_freq by the accurate powf (nvrtc and
 * hiprtc run without fast math); sin and cos of the f32 angle by hk_rope_sincos (common.h:
 * ~1 ulp, no local memory, the same code on both vendors). Each thread reads and then writes
 * only its own elements, so out may alias x.
 *
 * Work split. An item is V consecutive pairs j0 .. j0+V-1 (V = HK_ROPE_VEC when dh/2 is a
 * multiple of it and the items at V would fill a wave of HK_ROPE_UNITS blocks: 8-byte (16-bit)
 * or 16-byte (f32) loads of x1 and of x2; else V = 1) of
 * up to HK_ROPE_HEADS heads of one row (fewer when there are too few items to give every SM
 * a block: rope_group): the angles depend on the position and j only, so each
 * item computes V sines and cosines (and inverse frequencies) once for its heads, then
 * rotates them all -- on a Llama q projection (32 heads) a quarter of the sin/cos work per
 * element of one head per item, and its 2 x HK_ROPE_HEADS loads in flight together. Items are
 * row-major (row, head group, j); the 1-D grid strides over them (codegen: about
 * SIMPLE_ROPE_BLOCKS_PER_CU blocks per CU, fewer when there are fewer items), then over the
 * copy items of the pass heads (V pairs of one head: loads and stores, no math); consecutive
 * threads take consecutive j of one row, so each head's loads are contiguous spans.
 */
#ifndef HK_ROPE_VEC
#define HK_ROPE_VEC 4
#endif
#ifndef HK_ROPE_HEADS
#define HK_ROPE_HEADS 8 /* a power of two */
#endif
#ifndef HK_ROPE_UNITS
#define HK_ROPE_UNITS 132
#endif
#ifndef HK_HAS_CTX
#define HK_HAS_CTX 0
#endif
/* Row r's position: max(ctx[r] - 1, 0) with HK_HAS_CTX (a padding row, ctx 0, is rotated as
 * position 0; nothing uses its result), else r % seq + pos_offset. */
template <typename I>
HK_DEVICE float rope_position(const int *ctx, I r, I seq, long long pos_offset) {
#if HK_HAS_CTX
  (void)seq, (void)pos_offset;
  const int c = ctx[r];
  return (float)(c > 1 ? c - 1 : 0);
#else
  (void)ctx;
  return (float)((long long)(r % seq) + pos_offset);
#endif
}

struct __attribute__((aligned(HK_ROPE_VEC * sizeof(HK_T)))) rope_vec {
  HK_T e[HK_ROPE_VEC];
};

template <int V>
HK_DEVICE void rope_load(const HK_T *p, float (&f)[V]) {
  if (V == HK_ROPE_VEC) {
    const rope_vec v = *(const rope_vec *)p;
#pragma unroll
    for (int i = 0; i < V; i++) f[i] = HK_LOAD(v.e[i]);
  } else {
#pragma unroll
    for (int i = 0; i < V; i++) f[i] = HK_LOAD(p[i]);
  }
}

template <int V>
HK_DEVICE void rope_store(HK_T *p, const float (&f)[V]) {
  if (V == HK_ROPE_VEC) {
    rope_vec v;
#pragma unroll
    for (int i = 0; i < V; i++) v.e[i] = HK_STORE(f[i]);
    *(rope_vec *)p = v;
  } else {
#pragma unroll
    for (int i = 0; i < V; i++) p[i] = HK_STORE(f[i]);
  }
}

/* Rows r0, r0 + rstep, ... < rows of the thread's item q (if q < items). */
/* One item: V pairs j0 .. j0+V-1 of the heads h0 .. h0+HK_ROPE_HEADS-1 of row r. The angles
 * depend on (position, j) only, so their sin and cos are computed once for the item's heads;
 * every head's x1 / x2 loads are issued before any math (HK_ROPE_HEADS x 2 loads in flight). */
template <int V, typename I>
HK_DEVICE void rope_item(const HK_T *x, HK_T *out, const int *ctx, I r, I j0, I h0, I hend, I seq,
                         long long pos_offset, I half, I ld, float theta, const rope_scaling &sc) {
  const float p = rope_position<I>(ctx, r, seq, pos_offset);
  float sn[V], cs[V];
#pragma unroll
  for (int i = 0; i < V; i++)
    rope_angle(p, (long long)(j0 + i), 2 * (long long)half, theta, sc, &sn[i], &cs[i]);
  float x1[HK_ROPE_HEADS][V], x2[HK_ROPE_HEADS][V];
  const long long row = (long long)r * ld;
#pragma unroll
  for (int hh = 0; hh < HK_ROPE_HEADS; hh++)
    if (h0 + hh < hend) {
      const long long c1 = row + (long long)(h0 + hh) * 2 * half + j0;
      rope_load<V>(x + c1, x1[hh]);
      rope_load<V>(x + c1 + half, x2[hh]);
    }
#pragma unroll
  for (int hh = 0; hh < HK_ROPE_HEADS; hh++)
    if (h0 + hh < hend) {
      float o1[V], o2[V];
#pragma unroll
      for (int i = 0; i < V; i++) {
        o1[i] = x1[hh][i] * cs[i] - x2[hh][i] * sn[i];
        o2[i] = x2[hh][i] * cs[i] + x1[hh][i] * sn[i];
      }
      const long long c1 = row + (long long)(h0 + hh) * 2 * half + j0;
      rope_store<V>(out + c1, o1);
      rope_store<V>(out + c1 + half, o2);
    }
}

/* The copied heads (a packed q|k|v's v heads), after the rotated ones: items of V elements at j0
 * and at j0 + half of one head, row-major (row, head, j) over the grid, moved unchanged (through
 * f32, which holds every f16, bf16 and f32 value exactly, as rope_item loads and stores). Out of
 * line on NVIDIA: inlined into rope_run's 64-bit path, ptxas gave the whole kernel ~20 registers
 * more (bf16: 146, one block of 256 threads per SM instead of two), v heads or not. */
template <int V, typename I>
HK_DEVICE_OUTLINED void rope_copy(const HK_T *x, HK_T *out, I rows, I heads, I pass, I half, I ld) {
  const I per_head = half / V, per_row = pass * per_head, total = rows * per_row;
  const I step = (I)HK_NBLOCKS * (I)HK_THREADS;
  for (I t = (I)HK_BID * (I)HK_THREADS + (I)HK_TID; t < total; t += step) {
    const I r = t / per_row, q = t - r * per_row, h = q / per_head, j0 = (q - h * per_head) * V;
    const long long c1 = (long long)r * ld + (long long)(heads + h) * 2 * half + j0;
    float f1[V], f2[V];
    rope_load<V>(x + c1, f1);
    rope_load<V>(x + c1 + half, f2);
    rope_store<V>(out + c1, f1);
    rope_store<V>(out + c1 + half, f2);
  }
}

/* Heads per item: HK_ROPE_HEADS, halved (down to 1) while the rotation items would not give
 * every SM a block of HK_THREADS (few rows, few heads: parallelism first). codegen mirrors it. */
HK_DEVICE int rope_group(long long rows, long long heads, long long per_head) {
  int gh = HK_ROPE_HEADS;
  while (gh > 1 && rows * ((heads + gh - 1) / gh) * per_head < (long long)HK_ROPE_UNITS * HK_THREADS) gh >>= 1;
  return gh;
}

/* Items, row-major: row r, head group g (gh heads), pair vector j (half / V per head); the
 * grid strides over them (32-bit index arithmetic when they fit), then over the copy items. */
template <int V, typename I>
HK_DEVICE void rope_run(const HK_T *x, HK_T *out, const int *ctx, I rows, I seq, I heads, I pass, I half,
                        long long pos_offset, float theta, const rope_scaling &sc, I gh) {
  const I per_head = half / V, groups = (heads + gh - 1) / gh;
  const I per_row = groups * per_head, total = rows * per_row, ld = (heads + pass) * 2 * half;
  const I step = (I)HK_NBLOCKS * (I)HK_THREADS;
  for (I t = (I)HK_BID * (I)HK_THREADS + (I)HK_TID; t < total; t += step) {
    const I r = t / per_row, q = t - r * per_row;
    const I g = q / per_head, j0 = (q - g * per_head) * V;
    const I h0 = g * gh, hend = h0 + gh < heads ? h0 + gh : heads;
    rope_item<V, I>(x, out, ctx, r, j0, h0, hend, seq, pos_offset, half, ld, theta, sc);
  }
  if (pass > 0) rope_copy<V, I>(x, out, rows, heads, pass, half, ld);
}

template <int V>
HK_DEVICE void rope_dispatch(const HK_T *x, HK_T *out, const int *ctx, long long rows, long long seq, long long heads,
                             long long pass, long long half, long long pos_offset, float theta,
                             const rope_scaling &sc) {
  const int gh = rope_group(rows, heads, half / V);
  const long long total = rows * ((heads + gh - 1) / gh + pass) * (half / V); /* rotation and copy items */
  /* 32-bit items when every index (and the grid stride past the last) fits */
  if (total + (long long)HK_NBLOCKS * HK_THREADS < 2147483647LL && (heads + pass) * 2 * half < 2147483647LL)
    rope_run<V, int>(x, out, ctx, (int)rows, (int)seq, (int)heads, (int)pass, (int)half, pos_offset, theta, sc, gh);
  else
    rope_run<V, long long>(x, out, ctx, rows, seq, heads, pass, half, pos_offset, theta, sc, (long long)gh);
}

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *x, HK_T *out, long long rows, long long seq, long long heads, long long dh, long long pos_offset,
        float theta, long long pass_heads
#if HK_HAS_CTX
        , const int *ctx
#endif
#if HK_ROPE_SCALING
        , float factor, float low_freq, float high_freq, float original_max
#endif
) {
  HK_PDL_ENTRY(); /* a pdl variant (variant_simple.c): nothing is touched before it */
#if !HK_HAS_CTX
  const int *ctx = nullptr;
#endif
#if HK_ROPE_SCALING
  const rope_scaling sc = {factor, low_freq, high_freq, original_max};
#else
  const rope_scaling sc = {1.0f, 1.0f, 1.0f, 1.0f};
#endif
  const long long half = dh / 2;
  /* positions from ctx need no seq */
  if (rows <= 0 || (!HK_HAS_CTX && seq <= 0) || heads <= 0 || half <= 0 || pass_heads < 0) return;
  /* V pairs a thread where dh/2 allows and there are items for a wave of every SM at V; fewer
   * (a decode step's few rows): a pair a thread, so that each thread's one pass runs a quarter
   * of the vector path's instructions (sin, cos and the frequency are unrolled per pair) over
   * four times the threads */
  if (half % HK_ROPE_VEC == 0 && rows * heads * (half / HK_ROPE_VEC) >= (long long)HK_ROPE_UNITS * HK_THREADS)
    rope_dispatch<HK_ROPE_VEC>(x, out, ctx, rows, seq, heads, pass_heads, half, pos_offset, theta, sc);
  else
    rope_dispatch<1>(x, out, ctx, rows, seq, heads, pass_heads, half, pos_offset, theta, sc);
}
