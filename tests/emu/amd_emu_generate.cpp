/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/emu/amd_emu_generate.cpp -- runs one generated simple kernel of text generation
 * (docs/GENERATE.md: kv_append, kv_attention, take_rows, argmax, sample, and rope / embedding
 * with their ctx and scaling tails) on the CPU through amd_emu.h, against a reference on
 * random inputs with the edge cases lower.h names (padding rows, ctx and slot out of range,
 * rows out of range, NaN, ties).
 *
 *   clang++ -std=c++17 -O1 -DHK_EMU_OP=<hk_op_t> -DHK_EMU_SOURCE='"kernel.hip"' amd_emu_generate.cpp
 *   ./a.out GRID THREADS SEED SIZES...
 *
 * SIZES per op (HK_EMU_OP):
 *   15 kv_append     ROWS HEADS KV_HEADS DH LAYERS SLOTS MAX_SEQ LAYER
 *   16 kv_attention  ROWS HEADS KV_HEADS DH LAYERS SLOTS MAX_SEQ LAYER WINDOW
 *   17 take_rows     X_ROWS N_OUT WIDTH
 *   18 argmax        ROWS COLS
 *   19 sample        ROWS COLS
 *   10 rope          ROWS HEADS PASS_HEADS DH SEQ POS_OFFSET (ctx and scaling: the source's
 *                    HK_HAS_CTX and HK_ROPE_SCALING)
 *   14 embedding     TOKENS VOCAB HIDDEN MAX_POS (positions: HK_HAS_ADD; ctx: HK_HAS_CTX)
 *   20 dequant       ROWS COLS SCALE_ROWS SCALE_COLS BLOCK_ROWS BLOCK_COLS (int8 or fp8_e4m3:
 *                    the source's HK_DQ_FP8)
 * kv_append and kv_attention with the source's HK_KV_FP8: fp8_e4m3 caches (one byte an
 * element), kv_append's stores checked bit for bit against a nearest-value search over the 256
 * codes (ties to the even code), kv_attention's reads against a table decode.
 * Every output (and each cache) is guarded on both sides; outputs start poisoned. Copies
 * (kv_append, take_rows, embedding) and dequant (an exact product rounded once on both sides)
 * must match bit for bit; kv_attention matches a double
 * reference within the dtype's rounding; sample draws exactly the index of a reference that
 * sorts the keys instead of selecting them by radix (the same libm, so the same floats); rope
 * matches a reference that computes the frequencies and angles in f32 as Hugging Face does
 * (the documented formula, written apart from the kernel's) and the rotation in double. Exit 0
 * when everything matches, 1 otherwise with the first mismatches printed.
 */
#include "amd_emu.h"
#include HK_EMU_SOURCE

#include <vector>

#define HK_EMU_STR1(x) #x
#define HK_EMU_STR(x) HK_EMU_STR1(x)

static uint64_t rng_state;
static double uniform(void) { /* xorshift64*, in [-1, 1) */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static long long below(long long n) { /* uniform in [0, n) */
  const long long v = (long long)((uniform() + 1.0) / 2.0 * (double)n);
  return v < n ? v : n - 1;
}

/* A tensor of n elements with `guard` elements on each side (64 unless said), all bytes 0xa5
 * at first (not a value any kernel writes: NaN in f16, bf16 and f32). */
template <typename E>
struct guarded {
  size_t guard;
  std::vector<E> v;
  explicit guarded(size_t n, size_t g = 64) : guard(g), v(n + 2 * g) { memset(v.data(), 0xa5, v.size() * sizeof(E)); }
  E *data() { return v.data() + guard; }
  E &operator[](size_t i) { return v[guard + i]; }
  size_t size() const { return v.size() - 2 * guard; }
  int guards_intact() const {
    const unsigned char *b = (const unsigned char *)v.data();
    const size_t g = guard * sizeof(E), all = v.size() * sizeof(E);
    for (size_t i = 0; i < g; i++)
      if (b[i] != 0xa5 || b[all - 1 - i] != 0xa5) return 0;
    return 1;
  }
};
static void random_fill(HK_T *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = HK_STORE((float)uniform());
}
static int same_bits(const void *a, const void *b, size_t n) { return memcmp(a, b, n) == 0; }

/* The dtype's rounding unit: 2^-k for the smallest k at which 1 + 2^-k rounds to 1, doubled. */
static double rounding_unit(void) {
  for (int k = 1; k < 40; k++)
    if (HK_LOAD(HK_STORE((float)(1.0 + ldexp(1.0, -k)))) == 1.0f) return ldexp(1.0, -(k - 1));
  return 1e-7;
}

static long long bad;
static void mismatch(const char *what, long long i, double got, double want) {
  if (bad++ < 8) fprintf(stderr, "%s[%lld] = %.9g, want %.9g\n", what, i, got, want);
}

/* the launch of main's arguments: blocks one after another, lanes in a seeded order */
static unsigned g_grid, g_threads;
static uint64_t g_seed;
static void run(hk_emu_body_t body, void *ctx) { hk_emu_launch(g_grid, g_threads, g_seed, body, ctx); }

#if (HK_EMU_OP == 15 || HK_EMU_OP == 16) && HK_KV_FP8
/* fp8_e4m3 written apart from the kernel's bit arithmetic: code -> value from the format's
 * definition, value -> code the nearest finite code (ties: the even one), saturating at 448. */
typedef unsigned char kv_elem;
static double fp8_value(unsigned b) {
  const unsigned e = (b >> 3) & 15u, m = b & 7u;
  const double a = e == 15 && m == 7 ? NAN : e == 0 ? ldexp((double)m, -9) : ldexp(8.0 + m, (int)e - 10);
  return b & 0x80u ? -a : a;
}
static unsigned char fp8_nearest(double x) {
  const double a = fabs(x) > 448 ? 448 : fabs(x);
  unsigned best = 0;
  double bd = INFINITY;
  for (unsigned b = 0; b < 0x7fu; b++) { /* the finite non-negative codes, ascending */
    const double d = fabs(fp8_value(b) - a);
    if (d < bd || (d == bd && (b & 1u) == 0)) best = b, bd = d; /* a tie: the even code */
  }
  return (unsigned char)((signbit(x) ? 0x80u : 0u) | best);
}
static double kv_load(kv_elem e) { return fp8_value(e); }
static void kv_fill(kv_elem *p, size_t n) { /* every finite code, NaN excluded */
  for (size_t i = 0; i < n; i++) {
    unsigned b = (unsigned)below(256);
    if ((b & 0x7fu) == 0x7fu) b ^= 1u;
    p[i] = (kv_elem)b;
  }
}
#elif HK_EMU_OP == 15 || HK_EMU_OP == 16
typedef HK_T kv_elem;
static double kv_load(kv_elem e) { return HK_LOAD(e); }
static void kv_fill(kv_elem *p, size_t n) { random_fill(p, n); }
#endif

#if HK_EMU_OP == 15 || HK_EMU_OP == 16
/* ctx and slot of rows: row 0 a padding row (ctx 0), row 1 the last position, row 2 past it
 * in the last slot, row 3 a negative ctx in slot 0, row 4 a negative slot, row 5 a slot past
 * the last: a kernel that took one of the invalid rows would write just outside the layer's
 * slots (another layer's rows, which no row writes, or the caches' guards). The rest valid at
 * random, their (slot, position) pairs distinct (unique_pairs: two rows never write one cache
 * row, as the generator never makes them). */
static void cache_rows(long long rows, long long slots, long long max_seq, int unique_pairs, std::vector<int> &ctx,
                       std::vector<int> &slot) {
  ctx.assign((size_t)rows, 0);
  slot.assign((size_t)rows, 0);
  std::vector<char> used((size_t)(slots * max_seq), 0);
  for (long long t = 0; t < rows; t++) {
    long long c = 1 + below(max_seq), s = below(slots);
    switch (t) {
    case 0: c = 0; break;
    case 1: c = max_seq; break;
    case 2: c = max_seq + 1, s = slots - 1; break;
    case 3: c = -3, s = 0; break;
    case 4: s = -1; break;
    case 5: s = slots; break;
    default:
      for (int tries = 0; unique_pairs && used[(size_t)(s * max_seq + c - 1)] && tries < 1000; tries++)
        c = 1 + below(max_seq), s = below(slots);
      break;
    }
    if (c >= 1 && c <= max_seq && s >= 0 && s < slots) {
      if (unique_pairs && used[(size_t)(s * max_seq + c - 1)]) c = 0; /* no free pair: a padding row */
      else used[(size_t)(s * max_seq + c - 1)] = 1;
    }
    ctx[(size_t)t] = (int)c;
    slot[(size_t)t] = (int)s;
  }
}
static int row_valid(long long c, long long s, long long slots, long long max_seq) {
  return c >= 1 && c <= max_seq && s >= 0 && s < slots;
}
#endif

#if HK_EMU_OP == 10 || HK_EMU_OP == 15 || (HK_EMU_OP == 16 && HK_KV_APPEND)
#ifndef HK_ROPE_SCALING
#define HK_ROPE_SCALING 0
#endif
/* Pair j's frequency as transformers computes it in f32 (modeling_rope_utils: the default
 * inv_freq, then _compute_linear_scaling_rope_parameters' inv_freq / factor or
 * _compute_llama3_parameters' bands); torch evaluates 2 pi / x and c / x as reciprocal(x) * c,
 * and compares with Python doubles rounded to f32. The default inv_freq is the kernel's own
 * expression (the same libm here). */
static float hf_inv_freq(float theta, long long j, long long dh, float factor, float low, float high, float orig) {
  const float inv = powf(theta, -(float)(2 * j) / (float)dh);
  if (HK_ROPE_SCALING == 1) return inv / factor;
  if (HK_ROPE_SCALING != 2) return inv;
  volatile float w = 1.0f / inv; /* volatile: each f32 step rounded, as torch's kernels do */
  w = w * (float)6.283185307179586; /* f32(2 pi) */
  const float low_wavelen = (float)((double)orig / low), high_wavelen = (float)((double)orig / high);
  const float llama = w > low_wavelen ? inv / factor : inv;
  volatile float smooth = 1.0f / w;
  smooth = smooth * orig;
  smooth = smooth - low;
  smooth = smooth / (float)((double)high - (double)low);
  volatile float a = 1.0f - smooth;
  a = a * llama;
  a = a / factor;
  volatile float b = smooth * llama;
  const float smoothed = a + b;
  const int medium = !(w < high_wavelen) && !(w > low_wavelen);
  return medium ? smoothed : llama;
}
/* Llama 3's constants at a small original length, so that positions cross every band */
static const float k_theta = 500000.0f, k_factor = HK_ROPE_SCALING == 1 ? 4.0f : 8.0f, k_low = 1.0f, k_high = 4.0f,
                   k_orig = 512.0f;
/* A rotated pair at position pos in double: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin), the
 * angle in f32 as Hugging Face's */
static void hf_rotate(long long pos, long long j, long long dh, double x1, double x2, double *w1, double *w2) {
  const float angle = (float)pos * hf_inv_freq(k_theta, j, dh, k_factor, k_low, k_high, k_orig);
  *w1 = x1 * cos((double)angle) - x2 * sin((double)angle);
  *w2 = x2 * cos((double)angle) + x1 * sin((double)angle);
}
#endif

#if HK_EMU_OP == 15 /* ---- kv_append ------------------------------------------------------- */
struct op_args {
  const HK_T *qkv;
  kv_elem *k, *v;
  const int *ctx, *slot;
  HK_T *out;
  long long rows, heads, kv_heads, dh, layer, slots, max_seq;
};
static void body(void *p) {
  const op_args *a = (const op_args *)p;
  HK_NAME(a->qkv, a->k, a->v, a->ctx, a->slot, a->out, a->rows, a->heads, a->kv_heads, a->dh, a->layer, a->slots,
          a->max_seq
#if HK_ROPE
          , k_theta
#if HK_ROPE_SCALING
          , k_factor, k_low, k_high, k_orig
#endif
#endif
  );
}
#if HK_ROPE
/* A rotated element (rope + append) against hf_rotate's double, within the output's rounding
 * and a few f32 ulp of sin / cos (the rope test's bound); FP8 caches within half a code's step
 * of that value (the cache holds the rotated T value rounded to e4m3). */
static int near(double got, double want, int fp8) {
  const double unit = rounding_unit();
  if (!fp8) return fabs(got - want) <= unit * fabs(want) + 2e-6;
  return fabs(got - want) <= (unit + 0.0625) * fabs(want) + 0x1p-9;
}
#endif
static int test(char **sz, int n) {
  if (n != 8) return 2;
  const long long R = atoll(sz[0]), H = atoll(sz[1]), KH = atoll(sz[2]), D = atoll(sz[3]), L = atoll(sz[4]),
                  S = atoll(sz[5]), M = atoll(sz[6]), layer = atoll(sz[7]);
  const long long width = (H + 2 * KH) * D, kvw = KH * D;
  std::vector<HK_T> qkv((size_t)(R * width));
  random_fill(qkv.data(), qkv.size());
  std::vector<int> ctx, slot;
  cache_rows(R, S, M, 1, ctx, slot);
  /* guards as long as a slot and then some: the stray writes an invalid row would make */
  const size_t cache = (size_t)(L * S * M * kvw), cache_guard = (size_t)((M + 8) * kvw);
  guarded<kv_elem> kc(cache, cache_guard), vc(cache, cache_guard);
  guarded<HK_T> out((size_t)(R * H * D));
  kv_fill(kc.data(), kc.size());
  kv_fill(vc.data(), vc.size());
  const std::vector<kv_elem> k0(kc.data(), kc.data() + kc.size()), v0(vc.data(), vc.data() + vc.size());
  op_args a = {qkv.data(), kc.data(), vc.data(), ctx.data(), slot.data(), out.data(), R, H, KH, D, layer, S, M};
  run(body, &a);
  std::vector<kv_elem> k1 = k0, v1 = v0; /* what the caches must hold after */
#if HK_ROPE
  std::vector<char> k_turned(k1.size(), 0); /* cache elements checked against a rotation */
  std::vector<double> k_want(k1.size(), 0.0);
#endif
  for (long long t = 0; t < R; t++) {
#if HK_ROPE /* the q and k heads rotated at max(ctx - 1, 0) */
    const long long pos = ctx[(size_t)t] > 1 ? ctx[(size_t)t] - 1 : 0, half = D / 2;
    std::vector<double> rot((size_t)((H + KH) * D));
    for (long long h = 0; h < H + KH; h++)
      for (long long j = 0; j < half; j++) {
        const size_t i1 = (size_t)(t * width + h * D + j);
        hf_rotate(pos, j, D, HK_LOAD(qkv[i1]), HK_LOAD(qkv[i1 + (size_t)half]), &rot[(size_t)(h * D + j)],
                  &rot[(size_t)(h * D + j + half)]);
      }
    for (long long c = 0; c < H * D; c++) {
      const double g = HK_LOAD(out[(size_t)(t * H * D + c)]);
      if (!near(g, rot[(size_t)c], 0)) mismatch("out (rotated q)", t * H * D + c, g, rot[(size_t)c]);
    }
#else
    if (!same_bits(&out[(size_t)(t * H * D)], &qkv[(size_t)(t * width)], (size_t)(H * D) * sizeof(HK_T)))
      mismatch("out row", t, 0, 0);
#endif
    if (!row_valid(ctx[(size_t)t], slot[(size_t)t], S, M)) continue;
    const size_t at = (size_t)(((layer * S + slot[(size_t)t]) * M + ctx[(size_t)t] - 1) * kvw);
#if HK_ROPE
    for (long long c = 0; c < kvw; c++) {
      k_turned[at + (size_t)c] = 1;
      k_want[at + (size_t)c] = rot[(size_t)(H * D + c)];
    }
#endif
#if HK_KV_FP8
    for (long long c = 0; c < kvw; c++) {
      k1[at + (size_t)c] = fp8_nearest(HK_LOAD(qkv[(size_t)(t * width + H * D + c)]));
      v1[at + (size_t)c] = fp8_nearest(HK_LOAD(qkv[(size_t)(t * width + H * D + kvw + c)]));
    }
#else
    memcpy(&k1[at], &qkv[(size_t)(t * width + H * D)], (size_t)kvw * sizeof(HK_T));
    memcpy(&v1[at], &qkv[(size_t)(t * width + H * D + kvw)], (size_t)kvw * sizeof(HK_T));
#endif
  }
  for (size_t i = 0; i < k1.size(); i++) {
#if HK_ROPE
    if (k_turned[i]) {
      if (!near(kv_load(kc[i]), k_want[i], HK_KV_FP8)) mismatch("k_cache (rotated)", (long long)i, kv_load(kc[i]), k_want[i]);
    } else
#endif
    if (!same_bits(&kc[i], &k1[i], sizeof(kv_elem))) mismatch("k_cache", (long long)i, kv_load(kc[i]), kv_load(k1[i]));
    if (!same_bits(&vc[i], &v1[i], sizeof(kv_elem))) mismatch("v_cache", (long long)i, kv_load(vc[i]), kv_load(v1[i]));
  }
  if (!kc.guards_intact() || !vc.guards_intact() || !out.guards_intact()) mismatch("guards", 0, 0, 1);
  printf("rows %lld heads %lld/%lld dh %lld layer %lld/%lld slots %lld max_seq %lld%s vec %d rope %d scaling %d", R, H,
         KH, D, layer, L, S, M, HK_KV_FP8 ? " fp8 caches" : "", HK_KV_VEC, HK_ROPE, HK_ROPE_SCALING);
  return 0;
}

#elif HK_EMU_OP == 16 /* ---- kv_attention (and with its kv_append folded in: HK_KV_APPEND) ---- */
/* Head h of row t against a double reference: q (the head's dh values) over the keys [lo, hi) of
 * the caches from element base (rows kvw apart), softmax(q k^T scale) v; out's head within
 * `units` of the dtype's rounding (relative) + 4e-5. p: scratch of at least hi elements. */
static void check_head(const double *q, const kv_elem *kc, const kv_elem *vc, size_t base, long long kvw, long long lo,
                       long long hi, long long D, double scale, const HK_T *out, size_t at, double units, double *p) {
  const double unit = rounding_unit();
  double mx = -INFINITY, l = 0;
  for (long long j = lo; j < hi; j++) {
    double d = 0;
    for (long long e = 0; e < D; e++) d += q[e] * kv_load(kc[base + (size_t)(j * kvw + e)]);
    p[j] = d * scale;
    mx = p[j] > mx ? p[j] : mx;
  }
  for (long long j = lo; j < hi; j++) l += (p[j] = exp(p[j] - mx));
  for (long long e = 0; e < D; e++) {
    double o = 0;
    for (long long j = lo; j < hi; j++) o += p[j] * kv_load(vc[base + (size_t)(j * kvw + e)]);
    const double want = hi > lo ? o / l : 0.0, got = HK_LOAD(out[at + (size_t)e]);
    if (!(fabs(got - want) <= units * unit * fabs(want) + 4e-5)) mismatch("out", (long long)(at + (size_t)e), got, want);
  }
}

#if HK_KV_APPEND

struct op_args {
  const HK_T *qkv;
  kv_elem *k, *v;
  const int *ctx, *slot;
  HK_T *out;
  long long rows, heads, kv_heads, dh, layer, slots, max_seq, window;
  float scale;
};
static void body(void *p) {
  const op_args *a = (const op_args *)p;
  HK_NAME(a->qkv, a->k, a->v, a->ctx, a->slot, a->out, a->rows, a->heads, a->kv_heads, a->dh, a->layer, a->slots,
          a->max_seq, a->window, a->scale, 1
#if HK_ROPE
          , k_theta
#if HK_ROPE_SCALING
          , k_factor, k_low, k_high, k_orig
#endif
#endif
  );
}
/* The unfolded pair's result: each valid row's k and v heads appended at ctx - 1 (the k heads
 * turned, HK_ROPE, at ctx - 1 as kv_append turns them), then each q head (turned and rounded
 * to T, as kv_append outputs it) over the keys [max(0, ctx - window), ctx) of the caches as the
 * launch left them, in double. The rows' slots differ (the fold's rule): a row whose slot an
 * earlier valid row has becomes a padding row. Turned cache elements within the rounding of a
 * rotation; every other cache element, bit for bit, unchanged or the row's v head. */
static int test(char **sz, int n) {
  if (n != 9) return 2;
  const long long R = atoll(sz[0]), H = atoll(sz[1]), KH = atoll(sz[2]), D = atoll(sz[3]), L = atoll(sz[4]),
                  S = atoll(sz[5]), M = atoll(sz[6]), layer = atoll(sz[7]), W = atoll(sz[8]);
  const long long width = (H + 2 * KH) * D, kvw = KH * D, group = H / KH;
  std::vector<HK_T> qkv((size_t)(R * width));
  random_fill(qkv.data(), qkv.size());
  std::vector<int> ctx, slot;
  cache_rows(R, S, M, 1, ctx, slot);
  std::vector<char> taken((size_t)S, 0);
  for (long long t = 0; t < R; t++) {
    if (!row_valid(ctx[(size_t)t], slot[(size_t)t], S, M)) continue;
    if (taken[(size_t)slot[(size_t)t]]) ctx[(size_t)t] = 0;
    else taken[(size_t)slot[(size_t)t]] = 1;
  }
  const size_t cache = (size_t)(L * S * M * kvw), cache_guard = (size_t)((M + 8) * kvw);
  guarded<kv_elem> kc(cache, cache_guard), vc(cache, cache_guard);
  guarded<HK_T> out((size_t)(R * H * D));
  kv_fill(kc.data(), kc.size());
  kv_fill(vc.data(), vc.size());
  const std::vector<kv_elem> k0(kc.data(), kc.data() + kc.size()), v0(vc.data(), vc.data() + vc.size());
  const float scale = (float)(2.0 / sqrt((double)D));
  op_args a = {qkv.data(), kc.data(), vc.data(), ctx.data(), slot.data(), out.data(), R, H, KH, D, layer, S, M, W,
               scale};
  run(body, &a);
  const double unit = rounding_unit();
  std::vector<char> appended(k0.size(), 0);
  std::vector<double> q_want((size_t)D), p((size_t)M);
  for (long long t = 0; t < R; t++) {
    const long long c = ctx[(size_t)t], s = slot[(size_t)t];
    const int valid = row_valid(c, s, S, M);
    const HK_T *row = &qkv[(size_t)(t * width)];
    if (valid) { /* the append */
      const size_t at = (size_t)(((layer * S + s) * M + c - 1) * kvw);
      for (long long e = 0; e < kvw; e++) {
        const long long hd = e / D, j = e % D, half = D / 2;
        double want = HK_LOAD(row[H * D + e]);
#if HK_ROPE
        const long long jp = j < half ? j : j - half;
        double w1, w2;
        hf_rotate(c - 1, jp, D, HK_LOAD(row[H * D + hd * D + jp]), HK_LOAD(row[H * D + hd * D + jp + half]), &w1, &w2);
        want = j < half ? w1 : w2;
        if (!(fabs(kv_load(kc[at + (size_t)e]) - want) <= unit * fabs(want) + 2e-6))
          mismatch("k_cache (appended, turned)", (long long)(at + (size_t)e), kv_load(kc[at + (size_t)e]), want);
#else
        (void)hd, (void)j, (void)half;
        if (!same_bits(&kc[at + (size_t)e], &row[H * D + e], sizeof(HK_T)))
          mismatch("k_cache (appended)", (long long)(at + (size_t)e), kv_load(kc[at + (size_t)e]), want);
#endif
        if (!same_bits(&vc[at + (size_t)e], &row[H * D + kvw + e], sizeof(HK_T)))
          mismatch("v_cache (appended)", (long long)(at + (size_t)e), kv_load(vc[at + (size_t)e]), HK_LOAD(row[H * D + kvw + e]));
        appended[at + (size_t)e] = 1;
      }
    }
    for (long long h = 0; h < H; h++) {
      for (long long e = 0; e < D; e++) { /* the q head as kv_append outputs it */
        double w = HK_LOAD(row[h * D + e]);
#if HK_ROPE
        const long long half = D / 2, jp = e < half ? e : e - half;
        double w1, w2;
        hf_rotate(c > 1 ? c - 1 : 0, jp, D, HK_LOAD(row[h * D + jp]), HK_LOAD(row[h * D + jp + half]), &w1, &w2);
        w = HK_LOAD(HK_STORE((float)(e < half ? w1 : w2)));
#endif
        q_want[(size_t)e] = w;
      }
      const long long lo = valid ? (W > 0 && c > W ? c - W : 0) : 0, hi = valid ? c : 0;
      const size_t base = (size_t)((layer * S + (valid ? s : 0)) * M * kvw + h / group * D);
      check_head(q_want.data(), kc.data(), vc.data(), base, kvw, lo, hi, D, scale, out.data(), (size_t)((t * H + h) * D),
                 2, p.data());
    }
  }
  for (size_t i = 0; i < k0.size(); i++) /* nothing else written */
    if (!appended[i] && (!same_bits(&kc[i], &k0[i], sizeof(kv_elem)) || !same_bits(&vc[i], &v0[i], sizeof(kv_elem))))
      mismatch("cache (not appended)", (long long)i, kv_load(kc[i]), kv_load(k0[i]));
  if (!kc.guards_intact() || !vc.guards_intact() || !out.guards_intact()) mismatch("guards", 0, 0, 1);
  printf("rows %lld heads %lld/%lld dh %lld layer %lld/%lld slots %lld max_seq %lld window %lld append rope %d scaling %d",
         R, H, KH, D, layer, L, S, M, W, HK_ROPE, HK_ROPE_SCALING);
  return 0;
}

#else /* ---- kv_attention ------------------------------------------------------------------- */
struct op_args {
  const HK_T *q;
  const kv_elem *k, *v;
  const int *ctx, *slot;
  HK_T *out;
  long long rows, heads, kv_heads, dh, layer, slots, max_seq, window;
  float scale;
};
#ifndef HK_KVA_WARPS
#define HK_KVA_WARPS 0 /* the portable kernel: no workspace */
#endif
/* kv_attention_wave (HK_KVA_WARPS): the launch workspace -- a partial per block, a counter per
 * tile (zero at the start, and the kernel leaves them at zero) */
static std::vector<float> g_part;
static std::vector<unsigned> g_sem;
static void body(void *p) {
  const op_args *a = (const op_args *)p;
#if HK_KVA_WARPS
  HK_NAME(a->q, a->k, a->v, a->ctx, a->slot, a->out, a->rows, a->heads, a->kv_heads, a->dh, a->layer, a->slots,
          a->max_seq, a->window, a->scale, g_part.data(), g_sem.data());
#else
  HK_NAME(a->q, a->k, a->v, a->ctx, a->slot, a->out, a->rows, a->heads, a->kv_heads, a->dh, a->layer, a->slots,
          a->max_seq, a->window, a->scale);
#endif
}
static int test(char **sz, int n) {
  if (n != 9) return 2;
  const long long R = atoll(sz[0]), H = atoll(sz[1]), KH = atoll(sz[2]), D = atoll(sz[3]), L = atoll(sz[4]),
                  S = atoll(sz[5]), M = atoll(sz[6]), layer = atoll(sz[7]), W = atoll(sz[8]);
  const long long kvw = KH * D;
  std::vector<HK_T> q((size_t)(R * H * D));
  std::vector<kv_elem> kc((size_t)(L * S * M * kvw)), vc((size_t)(L * S * M * kvw));
  random_fill(q.data(), q.size());
  kv_fill(kc.data(), kc.size());
  kv_fill(vc.data(), vc.size());
  std::vector<int> ctx, slot;
  cache_rows(R, S, M, 0, ctx, slot);
  guarded<HK_T> out((size_t)(R * H * D));
  const float scale = (float)(2.0 / sqrt((double)D)); /* scores spread: the softmax is not flat */
  op_args a = {q.data(), kc.data(), vc.data(), ctx.data(), slot.data(), out.data(), R, H, KH, D, layer, S, M, W,
               scale};
#if HK_KVA_WARPS
  const long long tiles = R * KH * ((H / KH + HK_KVA_GROUP - 1) / HK_KVA_GROUP);
  g_part.assign((size_t)g_grid * HK_KVA_GROUP * (size_t)(D + 2), NAN);
  g_sem.assign((size_t)tiles, 0u);
#endif
  run(body, &a);
#if HK_KVA_WARPS
  for (size_t i = 0; i < g_sem.size(); i++)
    if (g_sem[i] != 0) mismatch("sem (left non-zero)", (long long)i, g_sem[i], 0);
#endif
  const long long group = H / KH;
  std::vector<double> p((size_t)M), qd((size_t)D);
  for (long long t = 0; t < R; t++)
    for (long long h = 0; h < H; h++) {
      const long long c = ctx[(size_t)t], s = slot[(size_t)t];
      const int valid = row_valid(c, s, S, M);
      const long long lo = valid ? (W > 0 && c > W ? c - W : 0) : 0, hi = valid ? c : 0;
      const size_t base = (size_t)((layer * S + (valid ? s : 0)) * M * kvw + h / group * D);
      for (long long e = 0; e < D; e++) qd[(size_t)e] = HK_LOAD(q[(size_t)((t * H + h) * D + e)]);
      check_head(qd.data(), kc.data(), vc.data(), base, kvw, lo, hi, D, scale, out.data(), (size_t)((t * H + h) * D), 1,
                 p.data());
    }
  if (!out.guards_intact()) mismatch("guards", 0, 0, 1);
  printf("rows %lld heads %lld/%lld dh %lld layer %lld/%lld slots %lld max_seq %lld window %lld%s", R, H, KH, D, layer,
         L, S, M, W, HK_KV_FP8 ? " fp8 caches" : "");
  return 0;
}

#endif /* HK_KV_APPEND */

#elif HK_EMU_OP == 17 /* ---- take_rows ----------------------------------------------------- */
struct op_args {
  const HK_T *x;
  const int *rows;
  HK_T *out;
  long long x_rows, n_out, width;
};
static void body(void *p) {
  const op_args *a = (const op_args *)p;
  HK_NAME(a->x, a->rows, a->out, a->x_rows, a->n_out, a->width);
}
static int test(char **sz, int n) {
  if (n != 3) return 2;
  const long long X = atoll(sz[0]), N = atoll(sz[1]), W = atoll(sz[2]);
  std::vector<HK_T> x((size_t)(X * W));
  random_fill(x.data(), x.size());
  std::vector<int> rows((size_t)N);
  for (long long r = 0; r < N; r++) /* out of range both ways, the last row, then any */
    rows[(size_t)r] = r == 0 ? -1 : r == 1 ? (int)X : r == 2 ? (int)X - 1 : (int)below(X);
  guarded<HK_T> out((size_t)(N * W));
  op_args a = {x.data(), rows.data(), out.data(), X, N, W};
  run(body, &a);
  const HK_T zero = HK_STORE(0.0f);
  for (long long r = 0; r < N; r++)
    for (long long c = 0; c < W; c++) {
      const long long src = rows[(size_t)r];
      const HK_T want = src >= 0 && src < X ? x[(size_t)(src * W + c)] : zero;
      const size_t i = (size_t)(r * W + c);
      if (!same_bits(&out[i], &want, sizeof(HK_T))) mismatch("out", (long long)i, HK_LOAD(out[i]), HK_LOAD(want));
    }
  if (!out.guards_intact()) mismatch("guards", 0, 0, 1);
  printf("x_rows %lld n_out %lld width %lld", X, N, W);
  return 0;
}

#elif HK_EMU_OP == 18 /* ---- argmax -------------------------------------------------------- */
struct op_args {
  const HK_T *x;
  int *out;
  long long rows, cols;
};
static void body(void *p) {
  const op_args *a = (const op_args *)p;
  HK_NAME(a->x, a->out, a->rows, a->cols);
}
/* Rows: 0 all NaN, 1 its largest value twice (the first index wins), 2 NaN first and
 * a NaN after the largest, 3 all -inf, 4 +inf after a NaN, 5 the largest value last, the rest
 * random (16-bit rounding makes ties). */
static int test(char **sz, int n) {
  if (n != 2) return 2;
  const long long R = atoll(sz[0]), C = atoll(sz[1]);
  std::vector<HK_T> x((size_t)(R * C));
  random_fill(x.data(), x.size());
  const HK_T nan = HK_STORE(NAN), big = HK_STORE(7.0f), ninf = HK_STORE(-INFINITY), pinf = HK_STORE(INFINITY);
  for (long long r = 0; r < R && r < 6; r++) {
    HK_T *xr = &x[(size_t)(r * C)];
    switch (r) {
    case 0: for (long long c = 0; c < C; c++) xr[c] = nan; break;
    case 1: xr[C / 3] = xr[C - 1 - C / 5] = big; break;
    case 2: xr[0] = nan, xr[C / 2] = big, xr[C - 1] = nan; break;
    case 3: for (long long c = 0; c < C; c++) xr[c] = ninf; break;
    case 4: xr[C / 4] = nan, xr[C / 2] = pinf; break;
    default: xr[C - 1] = big; break;
    }
  }
  guarded<int> out((size_t)R);
  op_args a = {x.data(), out.data(), R, C};
  run(body, &a);
  for (long long r = 0; r < R; r++) {
    long long want = -1;
    float best = 0;
    for (long long c = 0; c < C; c++) {
      const float v = HK_LOAD(x[(size_t)(r * C + c)]);
      if (v == v && (want < 0 || v > best)) best = v, want = c;
    }
    if (want < 0) want = 0;
    if (out[(size_t)r] != want) mismatch("out", r, out[(size_t)r], (double)want);
  }
  if (!out.guards_intact()) mismatch("guards", 0, 0, 1);
  printf("rows %lld cols %lld", R, C);
  return 0;
}

#elif HK_EMU_OP == 19 /* ---- sample -------------------------------------------------------- */
#include <algorithm>
struct op_args {
  const HK_T *x;
  const int *params;
  int *out;
  long long rows, cols;
};
#ifndef HK_SAMPLE_SPLIT
#define HK_SAMPLE_SPLIT 1
#endif
/* sample_split_wave (HK_SAMPLE_SPLIT > 1): the launch workspace -- a (value, index) pair per
 * piece, a counter per row (zero at the start; the kernel leaves them at zero) */
static std::vector<float> g_part;
static std::vector<unsigned> g_sem;
static void body(void *p) {
  const op_args *a = (const op_args *)p;
#if HK_SAMPLE_SPLIT > 1
  HK_NAME(a->x, a->params, a->out, a->rows, a->cols, g_part.data(), g_sem.data());
#else
  HK_NAME(a->x, a->params, a->out, a->rows, a->cols);
#endif
}
static unsigned ref_key(float z) {
  unsigned u;
  memcpy(&u, &z, 4);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
/* The definition of lower.h, written apart from the kernel: the keys sorted (not radix
 * selects), tau_k by rank, tau_p by walking the distinct keys from the top. */
static int ref_sample(const HK_T *xr, long long n, const int *pr) {
  float t, p;
  memcpy(&t, &pr[2], 4);
  memcpy(&p, &pr[3], 4);
  const int seed = pr[0], top_k = pr[1];
  long long at = -1;
  if (!(t > 0.0f && t < INFINITY) || top_k == 1) { /* argmax */
    for (long long j = 0; j < n; j++) {
      const float v = HK_LOAD(xr[j]);
      if (v == v && (at < 0 || v > HK_LOAD(xr[at]))) at = j;
    }
    return at < 0 ? 0 : (int)at;
  }
  std::vector<float> z((size_t)n);
  std::vector<std::pair<unsigned, long long>> keys; /* (key, j) of the numbers, sorted by key below */
  float m = -INFINITY;
  for (long long j = 0; j < n; j++) {
    z[(size_t)j] = HK_LOAD(xr[j]) / t;
    if (z[(size_t)j] != z[(size_t)j]) continue;
    keys.push_back({ref_key(z[(size_t)j]), j});
    if (keys.size() == 1 || z[(size_t)j] > m) m = z[(size_t)j];
  }
  if (keys.empty()) return 0;
  typedef std::pair<unsigned, long long> key_at;
  std::stable_sort(keys.begin(), keys.end(), [](const key_at &a, const key_at &b) { return a.first > b.first; });
  const long long count = (long long)keys.size();
  const unsigned tau_k = top_k > 0 && top_k < count ? keys[(size_t)top_k - 1].first : 0u;
  unsigned tau = tau_k;
  if (p > 0.0f && p < 1.0f) {
    auto mass = [&](long long j) {
      const float w = z[(size_t)j] == m ? 1.0f : expf(z[(size_t)j] - m);
      return (unsigned long long)(w * 4294967296.0f);
    };
    unsigned long long wk = 0, run = 0;
    for (const auto &k : keys)
      if (k.first >= tau_k) wk += mass(k.second);
    unsigned long long want = (unsigned long long)((double)p * (double)wk);
    if (want < 1) want = 1;
    for (size_t i = 0; i < keys.size(); i++) {
      run += mass(keys[i].second);
      if (run >= want && (i + 1 == keys.size() || keys[i + 1].first != keys[i].first)) {
        tau = keys[i].first;
        break;
      }
    }
  }
  float best = 0.0f;
  for (long long j = 0; j < n; j++) {
    if (z[(size_t)j] != z[(size_t)j] || ref_key(z[(size_t)j]) < tau) continue;
    const unsigned long long v = ((unsigned long long)(unsigned)seed << 32) | (unsigned long long)j;
    unsigned long long h = v + 0x9e3779b97f4a7c15ull;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
    h = (h ^ (h >> 31)) >> 41;
    const float u = ((float)h + 0.5f) / 8388608.0f;
    const float s = z[(size_t)j] + -logf(-logf(u));
    if (at < 0 || s > best) best = s, at = j;
  }
  return (int)at;
}
/* Rows (cycling past 16): logits of a bell of spread ~2 with 16-bit ties; row 0 all NaN, 1
 * NaN at every third column, 2 -inf but one, 3 a tie at the top_k-th value, 9 its largest value
 * twice (a greedy row: the first wins), 13 +inf twice (drawn: the first wins); the params take
 * top_k alone, top_p alone, both (where the nucleus of S_k is smaller than S_k), k beyond the
 * numbers, p at both ends, a tiny temperature, and each greedy form (top_k 1, T 0, NaN, inf). */
static int test(char **sz, int n) {
  if (n != 2) return 2;
  const long long R = atoll(sz[0]), C = atoll(sz[1]);
  enum { KINDS = 16 };
  static const struct {
    long long k; /* C + k - 1000 for k >= 999 */
    float t, p;
  } rows[KINDS] = {{0, 1.0f, 1.0f},   {5, 2.0f, 0.5f},     {50, 0.7f, 0.5f},   {5, 1.0f, 1.0f},
                   {0, 1.0f, 0.9f},   {2, 1.5f, 0.99f},    {1000, 1.0f, NAN},  {999, 0.5f, 0.05f},
                   {1, 1.0f, 0.9f},   {40, 0.0f, 1.0f},    {-1, NAN, 0.5f},    {50, 1e-3f, 0.7f},
                   {7, INFINITY, 1.0f}, {0, 0.6f, 0.0f},   {10, 3.0f, 0.3f},   {5, 2.0f, 0.5f}};
  std::vector<HK_T> x((size_t)(R * C));
  for (size_t i = 0; i < x.size(); i++) x[i] = HK_STORE((float)(2.0 * (uniform() + uniform() + uniform())));
  std::vector<int> params((size_t)(R * 4));
  for (long long r = 0; r < R; r++) {
    int *pr = &params[(size_t)(r * 4)];
    const long long k = rows[r % KINDS].k >= 999 ? C + rows[r % KINDS].k - 1000 : rows[r % KINDS].k;
    pr[0] = (int)(uint32_t)((uniform() + 1.0) * 2147483648.0);
    pr[1] = (int)k;
    memcpy(&pr[2], &rows[r % KINDS].t, 4);
    memcpy(&pr[3], &rows[r % KINDS].p, 4);
    HK_T *xr = &x[(size_t)(r * C)];
    if (r == 0)
      for (long long c = 0; c < C; c++) xr[c] = HK_STORE(NAN);
    if (r == 1)
      for (long long c = 0; c < C; c += 3) xr[c] = HK_STORE(NAN);
    if (r == 2)
      for (long long c = 0; c < C; c++) xr[c] = HK_STORE(c == C / 2 ? 0.5f : -INFINITY);
    if (r == 3 && C > 8) { /* the 6th largest value becomes the 5th's */
      std::vector<float> sorted((size_t)C);
      for (long long c = 0; c < C; c++) sorted[(size_t)c] = HK_LOAD(xr[c]);
      std::sort(sorted.begin(), sorted.end(), [](float a, float b) { return a > b; });
      for (long long c = 0; c < C; c++)
        if (HK_LOAD(xr[c]) == sorted[5]) xr[c] = HK_STORE(sorted[4]);
    }
    if (r == 9 || r == 13) { /* twice the largest value (+inf in row 13), in two threads' columns */
      const HK_T big = HK_STORE(r == 9 ? 100.0f : INFINITY);
      xr[C / 4] = xr[C - 1 - C / 5] = big;
    }
  }
  guarded<int> out((size_t)R);
  op_args a = {x.data(), params.data(), out.data(), R, C};
#if HK_SAMPLE_SPLIT > 1
  g_part.assign((size_t)(R * HK_SAMPLE_SPLIT * 2), NAN);
  g_sem.assign((size_t)R, 0u);
#endif
  run(body, &a);
#if HK_SAMPLE_SPLIT > 1
  for (size_t i = 0; i < g_sem.size(); i++)
    if (g_sem[i] != 0) mismatch("sem (left non-zero)", (long long)i, g_sem[i], 0);
#endif
  for (long long r = 0; r < R; r++) {
    const int want = ref_sample(&x[(size_t)(r * C)], C, &params[(size_t)(r * 4)]);
    if (out[(size_t)r] != want) mismatch("out", r, out[(size_t)r], (double)want);
  }
  if (!out.guards_intact()) mismatch("guards", 0, 0, 1);
  printf("rows %lld cols %lld", R, C);
  return 0;
}

#elif HK_EMU_OP == 10 /* ---- rope ---------------------------------------------------------- */
struct op_args {
  const HK_T *x;
  HK_T *out;
  long long rows, seq, heads, dh, pos_offset;
  float theta;
  long long pass;
  const int *ctx;
  float factor, low, high, orig;
};
static void body(void *p) {
  const op_args *a = (const op_args *)p;
  HK_NAME(a->x, a->out, a->rows, a->seq, a->heads, a->dh, a->pos_offset, a->theta, a->pass
#if HK_HAS_CTX
          , a->ctx
#endif
#if HK_ROPE_SCALING
          , a->factor, a->low, a->high, a->orig
#endif
  );
}
static int test(char **sz, int n) {
  if (n != 6) return 2;
  const long long R = atoll(sz[0]), H = atoll(sz[1]), P = atoll(sz[2]), D = atoll(sz[3]), SEQ = atoll(sz[4]),
                  OFF = atoll(sz[5]);
  const long long ld = (H + P) * D, half = D / 2;
  const float theta = k_theta, factor = k_factor, low = k_low, high = k_high, orig = k_orig;
  std::vector<HK_T> x((size_t)(R * ld));
  random_fill(x.data(), x.size());
  std::vector<int> ctx((size_t)R);
  for (long long r = 0; r < R; r++) ctx[(size_t)r] = r == 0 ? 0 : r == 1 ? 1 : r == 2 ? -4 : (int)below(8192);
  guarded<HK_T> out((size_t)(R * ld));
  op_args a = {x.data(), out.data(), R, SEQ, H, D, OFF, theta, P, ctx.data(), factor, low, high, orig};
  run(body, &a);
  const double unit = rounding_unit();
  for (long long r = 0; r < R; r++) {
    const long long pos = HK_HAS_CTX ? (ctx[(size_t)r] > 1 ? ctx[(size_t)r] - 1 : 0) : r % SEQ + OFF;
    for (long long h = 0; h < H + P; h++)
      for (long long j = 0; j < half; j++) {
        const size_t i1 = (size_t)(r * ld + h * D + j), i2 = i1 + (size_t)half;
        const double x1 = HK_LOAD(x[i1]), x2 = HK_LOAD(x[i2]);
        double w1 = x1, w2 = x2;
        if (h < H) {
          const float angle = (float)pos * hf_inv_freq(theta, j, D, factor, low, high, orig);
          w1 = x1 * cos((double)angle) - x2 * sin((double)angle);
          w2 = x2 * cos((double)angle) + x1 * sin((double)angle);
        }
        const double g1 = HK_LOAD(out[i1]), g2 = HK_LOAD(out[i2]);
        /* the output's rounding, and sin / cos to a few f32 ulp of the reduced angle */
        if (!(fabs(g1 - w1) <= unit * fabs(w1) + 2e-6)) mismatch("out", (long long)i1, g1, w1);
        if (!(fabs(g2 - w2) <= unit * fabs(w2) + 2e-6)) mismatch("out", (long long)i2, g2, w2);
      }
  }
  if (!out.guards_intact()) mismatch("guards", 0, 0, 1);
  printf("rows %lld heads %lld+%lld dh %lld ctx %d scaling %d", R, H, P, D, HK_HAS_CTX, HK_ROPE_SCALING);
  return 0;
}

#elif HK_EMU_OP == 14 /* ---- embedding ----------------------------------------------------- */
struct op_args {
  const HK_T *table;
  const int *ids;
  const HK_T *pos;
  HK_T *out;
  long long tokens, seq, vocab, hidden;
  const int *ctx;
  long long max_pos;
};
static void body(void *p) {
  const op_args *a = (const op_args *)p;
  HK_NAME(a->table, a->ids, a->pos, a->out, a->tokens, a->seq, a->vocab, a->hidden
#if HK_HAS_CTX
          , a->ctx, a->max_pos
#endif
  );
}
static int test(char **sz, int n) {
  if (n != 4) return 2;
  const long long T = atoll(sz[0]), V = atoll(sz[1]), E = atoll(sz[2]), MP = atoll(sz[3]);
  std::vector<HK_T> table((size_t)(V * E)), pos((size_t)(MP * E));
  random_fill(table.data(), table.size());
  random_fill(pos.data(), pos.size());
  std::vector<int> ids((size_t)T), ctx((size_t)T);
  for (long long t = 0; t < T; t++) {
    ids[(size_t)t] = t == 0 ? -2 : t == 1 ? (int)V : (int)below(V);
    ctx[(size_t)t] = t == 0 ? 0 : t == 1 ? (int)MP + 5 : t == 2 ? (int)MP : t == 3 ? -7 : (int)(1 + below(MP));
  }
  guarded<HK_T> out((size_t)(T * E));
  const long long seq = 3; /* positions t % seq without ctx */
  op_args a = {table.data(), ids.data(), HK_HAS_ADD ? pos.data() : NULL, out.data(), T, seq, V, E, ctx.data(), MP};
  run(body, &a);
  for (long long t = 0; t < T; t++) {
    const long long id = ids[(size_t)t] < 0 ? 0 : ids[(size_t)t] >= V ? V - 1 : ids[(size_t)t];
    const long long c = (long long)ctx[(size_t)t] - 1;
    const long long prow = HK_HAS_CTX ? (c < 0 ? 0 : c >= MP ? MP - 1 : c) : t % seq;
    for (long long e = 0; e < E; e++) {
      const HK_T tv = table[(size_t)(id * E + e)];
      const HK_T want = HK_HAS_ADD ? HK_STORE(HK_LOAD(tv) + HK_LOAD(pos[(size_t)(prow * E + e)])) : tv;
      const size_t i = (size_t)(t * E + e);
      if (!same_bits(&out[i], &want, sizeof(HK_T))) mismatch("out", (long long)i, HK_LOAD(out[i]), HK_LOAD(want));
    }
  }
  if (!out.guards_intact()) mismatch("guards", 0, 0, 1);
  printf("tokens %lld vocab %lld hidden %lld max_pos %lld add %d ctx %d", T, V, E, MP, HK_HAS_ADD, HK_HAS_CTX);
  return 0;
}
#elif HK_EMU_OP == 20 /* ---- dequant ------------------------------------------------------- */
struct op_args {
  const unsigned char *q;
  const float *scale;
  HK_T *out;
  long long rows, cols, srows, scols, brows, bcols;
};
static void body(void *p) {
  const op_args *a = (const op_args *)p;
  HK_NAME(a->q, a->scale, a->out, a->rows, a->cols, a->srows, a->scols, a->brows, a->bcols);
}
/* the stored byte's value: two's complement, or e4m3fn (8 + m) 2^(e - 10), m 2^-9 (e = 0) */
static double q_value(unsigned char b) {
  if (!HK_DQ_FP8) return (double)(signed char)b;
  const int e = (b >> 3) & 15, m = b & 7;
  const double a = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
  return b & 0x80 ? -a : a;
}
static int test(char **sz, int n) {
  if (n != 6) return 2;
  const long long R = atoll(sz[0]), C = atoll(sz[1]), SR = atoll(sz[2]), SC = atoll(sz[3]), BR = atoll(sz[4]),
                  BC = atoll(sz[5]);
  std::vector<unsigned char> q((size_t)(R * C));
  for (size_t i = 0; i < q.size(); i++) { /* every code but fp8's NaNs; the extremes first */
    unsigned char b = i == 0 ? 0x7e : i == 1 ? 0xfe : i == 2 ? 0x01 : i == 3 ? 0x80 : (unsigned char)below(256);
    if (HK_DQ_FP8 && (b & 0x7f) == 0x7f) b = 0x7e;
    q[i] = b;
  }
  std::vector<float> s((size_t)(SR * SC));
  for (size_t i = 0; i < s.size(); i++) s[i] = (float)(uniform() * 0.01);
  guarded<HK_T> out((size_t)(R * C));
  op_args a = {q.data(), s.data(), out.data(), R, C, SR, SC, BR, BC};
  run(body, &a);
  for (long long r = 0; r < R; r++)
    for (long long c = 0; c < C; c++) {
      const size_t i = (size_t)(r * C + c);
      const HK_T want = HK_STORE((float)(q_value(q[i]) * (double)s[(size_t)(r / BR * SC + c / BC)]));
      if (!same_bits(&out[i], &want, sizeof(HK_T))) mismatch("out", (long long)i, HK_LOAD(out[i]), HK_LOAD(want));
    }
  if (!out.guards_intact()) mismatch("guards", 0, 0, 1);
  printf("%s %lld x %lld, scales %lld x %lld, blocks %lld x %lld", HK_DQ_FP8 ? "fp8_e4m3" : "int8", R, C, SR, SC, BR,
         BC);
  return 0;
}
#else
#error "HK_EMU_OP: an op this harness does not run"
#endif

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s GRID THREADS SEED SIZES...\n", argv[0]);
    return 2;
  }
  g_grid = (unsigned)atoi(argv[1]);
  g_threads = (unsigned)atoi(argv[2]);
  g_seed = (uint64_t)atoll(argv[3]);
  rng_state = g_seed * 0x9E3779B97F4A7C15ull + 1;
  if (test(argv + 4, argc - 4) == 2) {
    fprintf(stderr, "%s: wrong number of sizes for op %d\n", argv[0], HK_EMU_OP);
    return 2;
  }
  printf(" %s grid %u x %u: %lld bad\n", HK_EMU_STR(HK_NAME), g_grid, g_threads, bad);
  return bad ? 1 : 0;
}
