/* SPDX-License-Identifier: Apache-2.0 */
/* rope: rotary position embedding, rotate-half form (Hugging Face Llama), as
 * the host kernel. x [rows, heads*dh]; row r is at position p = r % seq + pos_offset;
 * for each head and j < dh/2: inv_freq = theta^(-2j/dh), angle = p * inv_freq (f32, as
 * HF's f32 inv_freq and position product), x1 = x[j], x2 = x[j + dh/2] (inside the head),
 *   out[j] = x1 cos - x2 sin,   out[j + dh/2] = x2 cos + x1 sin.
 * Args: T x, T out, I rows, I seq, I heads, I dh, I pos_offset, F theta. dh is even (the
 * compiler checks). inv_freq by the accurate powf (nvrtc and hiprtc run without fast
 * math); sin and cos of the f32 angle by rope_sincos (below: ~1 ulp, no local memory,
 * the same code on both vendors). Each thread reads and then writes only its own
 * elements, so out may alias x.
 *
 * Work split. A row has heads * dh/2 rotation pairs; a thread item is V consecutive pairs
 * j0 .. j0+V-1 of one head (V = HK_ROPE_VEC when dh/2 is a multiple of it: 8-byte (16-bit)
 * or 16-byte (f32) loads of x1 and of x2; else V = 1). Items of a row are spread over
 * CB = ceil(items / HK_THREADS) column blocks. With grid >= CB (the launch,
 * codegen_gpu.c, makes grid = CB x row groups) block b owns column block b % CB and the
 * rows b / CB, + RB, + 2 RB, ... (RB = grid / CB; blocks beyond RB * CB idle): a thread's
 * (head, j0) and its inv_freq stay fixed, only the position moves (advanced by RB mod seq
 * without a division). A grid smaller than CB (only when clamped) strides over column
 * blocks and walks every row. */
#ifndef HK_ROPE_VEC
#define HK_ROPE_VEC 4
#endif

struct __attribute__((aligned(HK_ROPE_VEC * sizeof(HK_T)))) rope_vec {
  HK_T e[HK_ROPE_VEC];
};

/* sin and cos of a float angle a, accurate for every |a| a position can reach: a is reduced
 * by the nearest multiple k of pi/2 in double precision (a has 24 significant bits and
 * k < 2^31 for |a| < 3e9, so r = a - k*pi/2 with pi/2 in two doubles is within ~1e-16 * k of
 * the true remainder), then Cephes' sinf / cosf minimax polynomials on r in [-pi/4, pi/4]
 * (~1 ulp) and the quadrant k mod 4. CUDA's sincosf would do as well but keeps a local-
 * memory array for its |a| > 105615 path (a stack frame in every rope kernel). */
HK_DEVICE void rope_sincos(float a, float *out_s, float *out_c) {
  const double ad = (double)a;
  const double k = rint(ad * 0.63661977236758134308);
  double rd = fma(-k, 1.5707963267948965580e+00, ad);
  rd = fma(-k, 6.1232339957367658e-17, rd);
  const float r = (float)rd, r2 = r * r;
  const long long q = (long long)k;
  float s = fmaf(fmaf(fmaf(-1.9515295891e-4f, r2, 8.3321608736e-3f), r2, -1.6666654611e-1f), r2 * r, r);
  float c = fmaf(fmaf(fmaf(fmaf(2.443315711809948e-5f, r2, -1.388731625493765e-3f), r2, 4.166664568298827e-2f), r2,
                      -0.5f), r2, 1.0f);
  if (q & 1) {
    const float t = s;
    s = c;
    c = -t;
  }
  if (q & 2) {
    s = -s;
    c = -c;
  }
  *out_s = s;
  *out_c = c;
}

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
template <int V>
HK_DEVICE void rope_item(const HK_T *x, HK_T *out, long long rows, long long seq, long long pos_offset,
                         long long half, long long ld, long long items, long long q, long long r0, long long rstep,
                         float theta) {
  if (q >= items) return;
  const long long per_head = half / V;
  const long long h = q / per_head, j0 = (q - h * per_head) * V;
  const long long c1 = h * 2 * half + j0, c2 = c1 + half;
  const float dh = (float)(2 * half);
  float inv_freq[V];
#pragma unroll
  for (int i = 0; i < V; i++) inv_freq[i] = powf(theta, -(float)(2 * (j0 + i)) / dh);
  long long pos = r0 % seq;
  const long long pstep = rstep % seq;
  for (long long r = r0; r < rows; r += rstep) {
    const float p = (float)(pos + pos_offset);
    float x1[V], x2[V], o1[V], o2[V];
    rope_load<V>(x + r * ld + c1, x1);
    rope_load<V>(x + r * ld + c2, x2);
#pragma unroll
    for (int i = 0; i < V; i++) {
      float s, c;
      rope_sincos(p * inv_freq[i], &s, &c);
      o1[i] = x1[i] * c - x2[i] * s;
      o2[i] = x2[i] * c + x1[i] * s;
    }
    rope_store<V>(out + r * ld + c1, o1);
    rope_store<V>(out + r * ld + c2, o2);
    pos += pstep;
    if (pos >= seq) pos -= seq;
  }
}

template <int V>
HK_DEVICE void rope_run(const HK_T *x, HK_T *out, long long rows, long long seq, long long heads, long long half,
                        long long pos_offset, float theta) {
  const long long ld = heads * 2 * half, items = heads * (half / V);
  const long long cb_count = (items + HK_THREADS - 1) / HK_THREADS;
  if (HK_NBLOCKS >= cb_count) {
    const long long rb = HK_NBLOCKS / cb_count;
    if (HK_BID >= rb * cb_count) return;
    const long long q = HK_BID % cb_count * HK_THREADS + HK_TID;
    rope_item<V>(x, out, rows, seq, pos_offset, half, ld, items, q, HK_BID / cb_count, rb, theta);
  } else {
    for (long long cb = HK_BID; cb < cb_count; cb += HK_NBLOCKS)
      rope_item<V>(x, out, rows, seq, pos_offset, half, ld, items, cb * HK_THREADS + HK_TID, 0, 1, theta);
  }
}

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *x, HK_T *out, long long rows, long long seq, long long heads, long long dh, long long pos_offset,
        float theta) {
  const long long half = dh / 2;
  if (rows <= 0 || seq <= 0 || heads <= 0 || half <= 0) return;
  if (half % HK_ROPE_VEC == 0) rope_run<HK_ROPE_VEC>(x, out, rows, seq, heads, half, pos_offset, theta);
  else rope_run<1>(x, out, rows, seq, heads, half, pos_offset, theta);
}
