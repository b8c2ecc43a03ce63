/* SPDX-License-Identifier: Apache-2.0 */
/*
 * templates/host/prelude.h -- shared helpers of the host (CPU fallback) kernels.
 *
 * The code generator emits, in this order: the block-size constants (HK_GEMM_BM,
 * HK_GEMM_BN, HK_GEMM_BK, HK_EW_CHUNK, HK_ATTN_KB, HK_ATTN_DC, HK_ROPE_JC, HK_ATTN_QT), this prelude once,
 * then for each kernel the parameter macros followed by one template from
 * templates/host/<op>.c, and #undef's of those macros. Everything here is static
 * inline so many kernel instances share one translation unit.
 *
 * Host kernel ABI (the loader's contract):
 *   void NAME(void *const *args, uint32_t block_begin, uint32_t block_end)
 * args[i] points to argument i, like CUDA kernelParams: for a tensor, to a void*
 * holding the buffer address (NULL for an absent optional tensor); for I64, to an
 * int64_t; for F32, to a float. A call processes blocks [block_begin, block_end)
 * of grid.x; blocks are independent and may run concurrently on other threads. A launch's
 * blocks are cut into 4 chunks per thread, or into the number an optional export
 * `const uint32_t NAME__chunks` (1..64) asks for (GEMMs that convert their operands: 1).
 *
 * Storage types: f32 is float; f16 and bf16 are uint16_t bit patterns converted
 * here with round-to-nearest-even (subnormals, infinities and NaN handled), so no
 * compiler support for _Float16 is needed. All arithmetic is in f32.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if !defined(HK_GEMM_BM) || !defined(HK_GEMM_BN) || !defined(HK_GEMM_BK) || !defined(HK_EW_CHUNK) || \
    !defined(HK_ATTN_KB) || !defined(HK_ATTN_DC) || !defined(HK_ROPE_JC) || !defined(HK_ATTN_QT)
#error "block-size constants must be defined by the code generator before the prelude"
#endif

#define HK_KERNEL __attribute__((visibility("default")))
/* for the math below: inlined into the loops that call it, so that they vectorize */
#define HK_ALWAYS_INLINE static inline __attribute__((always_inline))

/* ---- BLAS, bound at run time (optional) ---------------------------------------------
 * libhkrt dlopens OpenBLAS where it is installed and, on every thread that runs a launch of a
 * session using it, hands the object this table through hk_host_set_blas (NULL: the C loops
 * run). The layout is libhkrt's hk_host_blas_t (loader/src/backend_host.c); it grows at its
 * end, and struct_size says which entries the loader filled. A loader that predates this
 * export never calls it: the C loops run. */
typedef struct hk_host_blas {
  uint32_t struct_size;
  uint32_t reserved;
  /* cblas_sgemm: C = alpha * op(A) @ op(B) + beta * C; order 101 = row-major, trans 111 = no,
   * 112 = transposed; called with OpenBLAS single-threaded, from the session's threads */
  void (*sgemm)(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc);
} hk_host_blas_t;

static _Thread_local const hk_host_blas_t *hk_blas; /* this thread's table, or NULL */

HK_KERNEL void hk_host_set_blas(const hk_host_blas_t *blas) {
  hk_blas = blas && blas->struct_size >= offsetof(hk_host_blas_t, sgemm) + sizeof blas->sgemm && blas->sgemm ? blas
                                                                                                          : NULL;
}

/* A 16-bit GEMM through sgemm converts its operands to f32 copies of at most this many rows of
 * A and columns of B at a time (templates/host/gemm.c). */
#define HK_GEMM_LP_RB 256
#define HK_GEMM_LP_NC 1024

/* Whether a GEMM of these sizes fits cblas's int arguments (lda/ldb/ldc up to K and N). */
static inline int hk_blas_fits(int64_t M, int64_t N, int64_t K) {
  return M >= 1 && N >= 1 && K >= 1 && M <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX;
}

/* Whether the byte ranges [a, a + na) and [b, b + nb) overlap (NULL never does). */
static inline int hk_overlaps(const void *a, size_t na, const void *b, size_t nb) {
  const uintptr_t pa = (uintptr_t)a, pb = (uintptr_t)b;
  return a && b && pa < pb + nb && pb < pa + na;
}

/* ---- arguments ------------------------------------------------------------------ */
static inline void *hk_arg_ptr(void *const *args, int i) { return *(void *const *)args[i]; }
static inline int64_t hk_arg_i64(void *const *args, int i) { return *(const int64_t *)args[i]; }
static inline float hk_arg_f32(void *const *args, int i) { return *(const float *)args[i]; }

/* ---- element conversions ------------------------------------------------------------ */
static inline uint32_t hk_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static inline float hk_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

static inline float hk_f32_load(float x) { return x; }
static inline float hk_f32_store(float x) { return x; }

/* Branch-free (selects only) so that loops converting arrays vectorize. Subnormals go
 * through an exact int -> float conversion, never through f32 denormals, so the result
 * is right even when the process runs with denormals-are-zero. */
static inline float hk_f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  const uint32_t normal = sign | ((exp + 112u) << 23) | (man << 13);
  const uint32_t special = sign | 0x7f800000u | (man << 13); /* inf, NaN */
  const uint32_t subnormal = sign | hk_f32_bits((float)man * 0x1p-24f);
  return hk_bits_f32(exp == 0 ? subnormal : exp == 0x1fu ? special : normal);
}

static inline uint16_t hk_f32_to_f16(float f) {
  uint32_t u = hk_f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet NaN */
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
  if (a >= 0x38800000u) {                                    /* normal f16: >= 2^-14 */
    a += 0xfffu + ((a >> 13) & 1u);                          /* round to nearest even */
    return (uint16_t)(sign | ((a - 0x38000000u) >> 13));     /* rebias 127 -> 15 */
  }
  if (a <= 0x33000000u) return (uint16_t)sign; /* <= 2^-25: ties to even give zero */
  /* Subnormal f16: count units of 2^-24. a's exponent field is 102..112 here. */
  uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - e; /* 14..24 */
  uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (q & 1u))) q++;
  return (uint16_t)(sign | q);
}

static inline float hk_bf16_to_f32(uint16_t h) { return hk_bits_f32((uint32_t)h << 16); }
/* float8 e4m3fn: (8 + m) 2^(e - 10) for exponent field e in 1..15, m 2^-9 for e = 0; S.1111.111 is
 * NaN. Built as float bits: a normal's exponent is rebiased (e - 7 + 127), a subnormal is the
 * integer m times 2^-9. */
static inline float hk_fp8_e4m3_to_f32(uint8_t b) {
  const uint32_t e = (b >> 3) & 15u, m = b & 7u, sign = (uint32_t)(b & 0x80u) << 24;
  if (e == 15u && m == 7u) return hk_bits_f32(sign | 0x7fc00000u);
  if (e == 0u) return hk_bits_f32(sign | hk_f32_bits((float)m * 0x1p-9f));
  return hk_bits_f32(sign | (e + 120u) << 23 | m << 20);
}

/* f32 to float8 e4m3fn, to nearest even, saturating at +-448 (no infinities; NaN stays NaN):
 * what an FP8 KV cache stores (kv_append); the same rounding as libhkrt's conversion. */
static inline uint8_t hk_f32_to_fp8_e4m3(float f) {
  if (f != f) return 0x7f;
  const uint8_t sign = signbit(f) ? 0x80 : 0;
  const float a = fabsf(f);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0x1p-6f) return sign | (uint8_t)rintf(a * 512.0f); /* subnormal m 2^-9; 8 is the smallest normal */
  int ex;
  (void)frexpf(a, &ex);                  /* a = fr 2^ex, fr in [0.5, 1): 8 <= a 2^(4 - ex) < 16 */
  int q = (int)rintf(ldexpf(a, 4 - ex)); /* 8..16 */
  int e = ex + 6;                        /* 1..15 */
  if (q == 16) q = 8, e++;
  if (e > 15 || (e == 15 && q > 14)) return sign | 0x7e;
  return sign | (uint8_t)(e << 3 | (q - 8));
}

/* A gemm's 8-bit B as stored (lower.h, enum hkc_gemm_quant_arg): element (r, c) stands for
 * q[r * cols + c] * s[(r / brows) * scols + c / bcols]; the gemm rounds that to its type, as a
 * dequant node would have stored it. */
typedef struct hk_qb {
  const uint8_t *q;
  const float *s;
  int64_t cols, scols, brows, bcols;
} hk_qb_t;

static inline uint16_t hk_f32_to_bf16(float f) {
  uint32_t u = hk_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflow carries into inf */
  return (uint16_t)(u >> 16);
}

/* ---- exp and erf without libm ------------------------------------------------------------
 * Selects only, no branches and no calls, so loops over arrays of them vectorize at -O2, and
 * the same bits on every machine whatever its C library. Checked against double precision by
 * tests/unit/ops_test.c (test_math). */

/* exp(x): x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts, so n ln2 is exact), e^r by its
 * Taylor polynomial of degree 7, times 2^(n-1) * 2 (n - 1 stays a normal exponent). Within
 * 2 ulp for x in [-86.5, 88.72]; 0 below (exp < 2.7e-38 there), inf above, NaN kept. */
HK_ALWAYS_INLINE float hk_exp(float x) {
  const float lo = -86.5f, hi = 88.7228394f;
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc; /* NaN fails both tests and stays NaN */
  const float shifter = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
  const float t = xc * 1.44269504f + shifter, fn = t - shifter;
  const int32_t n = (int32_t)(hk_f32_bits(t) - hk_f32_bits(shifter));
  const float r = (xc - fn * 0.693145751953125f) - fn * 1.42860677e-06f;
  float p = 1.98412698e-04f; /* 1/7! */
  p = p * r + 1.38888889e-03f;
  p = p * r + 8.33333333e-03f;
  p = p * r + 4.16666667e-02f;
  p = p * r + 1.66666667e-01f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float y = p * hk_bits_f32((uint32_t)(n + 126) << 23) * 2.0f;
  return x < lo ? 0.0f : x > hi ? INFINITY : y;
}

/* 1 + erf(x), without cancellation for negative x: |x| < 0.84: 1 + x P(x^2); else
 * erfc(|x|) = exp(-x^2) R(1 / (1 + |x|)), and 1 + erf(x) = erfc(-x) = erfc(|x|) for x < 0,
 * 2 - erfc(x) for x > 0. P and R are least-squares fits (in f32) of erf(x)/x on x^2 in
 * [0, 0.84^2] and of erfc(x) e^(x^2) on 1/(1+x) for x in [0.84, 9.2]. Relative error within
 * 7e-7 up to |x| = 4 (beyond, erfc < 1.6e-8 and the rounding of x^2 grows it to 4e-6). */
HK_ALWAYS_INLINE float hk_erf1p(float x) {
  const float a = fabsf(x), z = x * x, v = 1.0f / (1.0f + a);
  float p = 8.917121158e-05f;
  p = p * z - 8.260552422e-04f;
  p = p * z + 5.210520234e-03f;
  p = p * z - 2.686290257e-02f;
  p = p * z + 1.128375381e-01f;
  p = p * z - 3.761263788e-01f;
  p = p * z + 1.128379226e+00f;
  float r = -2.807424784e+00f;
  r = r * v + 9.456356049e+00f;
  r = r * v - 1.309159756e+01f;
  r = r * v + 8.819298744e+00f;
  r = r * v - 2.139851332e+00f;
  r = r * v - 3.587222695e-01f;
  r = r * v - 3.184122741e-01f;
  r = r * v + 2.839920819e-01f;
  r = r * v + 5.641956925e-01f;
  r = r * v + 5.641838312e-01f;
  r = r * v + 1.983636508e-07f;
  const float erfc_a = hk_exp(-z) * r;
  return a < 0.84f ? 1.0f + x * p : x < 0.0f ? erfc_a : 2.0f - erfc_a;
}

/* ---- activations (DESIGN "Op semantics") ------------------------------------------- */
static inline float hk_act_none(float x) { return x; }
static inline float hk_act_relu(float x) { return x > 0.0f ? x : 0.0f; }
/* Exact erf form, torch.nn.functional.gelu's default. */
HK_ALWAYS_INLINE float hk_act_gelu(float x) { return 0.5f * x * hk_erf1p(x * 0.70710678118654752f); }
/* 0.5 x (1 + tanh(y)) = x / (1 + e^(-2y)), y = sqrt(2/pi) (x + 0.044715 x^3) */
HK_ALWAYS_INLINE float hk_act_gelu_tanh(float x) {
  return x / (1.0f + hk_exp(-1.59576912160573072f * (x + 0.044715f * x * x * x)));
}
HK_ALWAYS_INLINE float hk_act_silu(float x) { return x / (1.0f + hk_exp(-x)); }

/* Pairwise sum of 8 partial sums (the lanes of a reduction). */
static inline float hk_sum8(const float *l) {
  return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}

static inline int64_t hk_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Rope (rotate-half, Hugging Face Llama): the inverse frequency of pair j of a head of dh,
 * 1 / theta^(2j/dh), in f32 as Hugging Face computes it. */
static inline float hk_rope_inv_freq(int64_t j, int64_t dh, float theta) {
  return 1.0f / powf(theta, (float)(2 * j) / (float)dh);
}

/* cos and sin of the angle pos * inv_freq, rounded to f32 as Hugging Face computes it. */
static inline void hk_rope_cos_sin_at(float pos, float inv_freq, float *cs, float *sn) {
  const float angle = pos * inv_freq;
  *cs = cosf(angle);
  *sn = sinf(angle);
}

/* The same at pair j's unscaled frequency (templates/host/rope.c, and gemm.c's rope epilogue). */
static inline void hk_rope_cos_sin(float pos, int64_t j, int64_t dh, float theta, float *cs, float *sn) {
  hk_rope_cos_sin_at(pos, hk_rope_inv_freq(j, dh, theta), cs, sn);
}

/* inv_freq rewritten by a rope scaling (frontend.h HKC_ROPE_SCALING_*: 1 linear, 2 llama3), in
 * f32 step by step as transformers' _compute_linear_scaling_rope_parameters and
 * _compute_llama3_parameters compute it: a Python scalar over a tensor is the tensor's
 * reciprocal times the scalar, and the bounds orig / low, orig / high and the divisor
 * high - low are Python doubles rounded to f32. linear divides by factor; llama3 keeps
 * wavelengths below orig / high, divides those above orig / low by factor and blends the
 * ones between. */
static inline float hk_rope_scale_inv_freq(float inv, int kind, float factor, float low, float high, float orig) {
  if (kind == 1) return inv / factor;
  if (kind != 2) return inv;
  const float wavelen = (1.0f / inv) * 6.28318548f; /* 2 pi in f32 */
  if (wavelen < (float)((double)orig / (double)high)) return inv;
  if (wavelen > (float)((double)orig / (double)low)) return inv / factor;
  const float s = ((1.0f / wavelen) * orig - low) / (float)((double)high - (double)low);
  return (1.0f - s) * inv / factor + s * inv;
}

/* ---- loops that -O2 vectorizes -------------------------------------------------------------
 * GCC's -O2 vectorizes a loop only when its trip count is a known multiple of the vector width
 * and nothing it stores may alias what it loads (no runtime checks). HK_MAP16 runs
 * dst[i] = HK_STORE(EXPR) for i in [b, e), EXPR an f32 expression of i: in chunks of 16 whose
 * values go to a local array first (a constant trip count; the loads and the stores in separate
 * loops, so dst may alias the inputs), then a scalar tail. Every element's arithmetic is the
 * scalar loop's. */
#define HK_MAP16(dst, i, b, e, EXPR)                                                                \
  do {                                                                                              \
    int64_t i##0_ = (b);                                                                            \
    for (; i##0_ + 16 <= (e); i##0_ += 16) {                                                        \
      float v16_[16];                                                                               \
      for (int t16_ = 0; t16_ < 16; t16_++) {                                                       \
        const int64_t i = i##0_ + t16_;                                                             \
        v16_[t16_] = (EXPR);                                                                        \
      }                                                                                             \
      for (int t16_ = 0; t16_ < 16; t16_++) (dst)[i##0_ + t16_] = HK_STORE(v16_[t16_]);             \
    }                                                                                               \
    for (int64_t i = i##0_; i < (e); i++) (dst)[i] = HK_STORE(EXPR);                                \
  } while (0)
/* dst[0, n) = HK_LOAD(src[0, n)): a row of the kernel's type as f32, in chunks of 16 (vectorized) */
#define HK_LOAD_ROW16(dst, src, n)                                                                  \
  do {                                                                                              \
    int64_t q16_ = 0;                                                                               \
    for (; q16_ + 16 <= (n); q16_ += 16)                                                            \
      for (int t16_ = 0; t16_ < 16; t16_++) (dst)[q16_ + t16_] = HK_LOAD((src)[q16_ + t16_]);       \
    for (; q16_ < (n); q16_++) (dst)[q16_] = HK_LOAD((src)[q16_]);                                  \
  } while (0)
/* lane[i & 7] += EXPR for i in [0, n), in the same order, in chunks of 8 (vectorized) */
#define HK_LANES8(lane, i, n, EXPR)                                                                 \
  do {                                                                                              \
    int64_t i##0_ = 0;                                                                              \
    for (; i##0_ + 8 <= (n); i##0_ += 8)                                                            \
      for (int t8_ = 0; t8_ < 8; t8_++) {                                                           \
        const int64_t i = i##0_ + t8_;                                                              \
        (lane)[t8_] += (EXPR);                                                                      \
      }                                                                                             \
    for (int64_t i = i##0_; i < (n); i++) (lane)[i & 7] += (EXPR);                                  \
  } while (0)

/* ---- small f32 matrix products (templates/host/attention.c) -----------------------------------
 * Row-major, leading dimensions in elements; M, N and K within int. Through sgemm where the
 * thread has hk_blas, else loops in fixed-width chunks (vectorized at -O2) whose sums are in a
 * fixed order. */
/* C[M][N] = A[M][K] B[N][K]^T */
static inline void hk_mm_nt(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                            int64_t ldb, float *C, int64_t ldc) {
  if (hk_blas && hk_blas_fits(lda, ldb, ldc)) {
    hk_blas->sgemm(101, 111, 112, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, 0.0f, C, (int)ldc);
    return;
  }
  for (int64_t i = 0; i < M; i++) {
    const float *restrict a = A + i * lda;
    for (int64_t j = 0; j < N; j++) {
      const float *restrict b = B + j * ldb;
      float lane[8] = {0};
      int64_t k = 0;
      for (; k + 8 <= K; k += 8)
        for (int t = 0; t < 8; t++) lane[t] += a[k + t] * b[k + t];
      for (; k < K; k++) lane[k & 7] += a[k] * b[k];
      C[i * ldc + j] = hk_sum8(lane);
    }
  }
}

/* C[M][N] += A[M][K] B[K][N] */
static inline void hk_mm_nn_acc(int64_t M, int64_t N, int64_t K, const float *A, int64_t lda, const float *B,
                                int64_t ldb, float *C, int64_t ldc) {
  if (hk_blas && hk_blas_fits(lda, ldb, ldc)) {
    hk_blas->sgemm(101, 111, 111, (int)M, (int)N, (int)K, 1.0f, A, (int)lda, B, (int)ldb, 1.0f, C, (int)ldc);
    return;
  }
  for (int64_t i = 0; i < M; i++) {
    float *restrict c = C + i * ldc;
    for (int64_t k = 0; k < K; k++) {
      const float a = A[i * lda + k];
      const float *restrict b = B + k * ldb;
      int64_t j = 0;
      for (; j + 16 <= N; j += 16)
        for (int t = 0; t < 16; t++) c[j + t] += a * b[j + t];
      for (; j < N; j++) c[j] += a * b[j];
    }
  }
}
