/* SPDX-License-Identifier: Apache-2.0 */
/* gemm: C = act(A @ B + bias) * mul + residual (DESIGN "Op semantics"; mul is the fused
 * element-wise multiply of a SwiGLU gate), f32 accumulation and epilogue, one rounding
 * to the output type at the end. HK_DUAL (fusion's dual gemm, B2 = args[9]):
 * C = act(A @ B + bias) * (A @ B2) + residual, the second product a second pass over K.
 * Args: T A [M, K], T B [K, N] ([N, K] when HK_TRANS_B), T bias [N] or NULL,
 *       T residual [M, N] or NULL, T C [M, N], I M, I N, I K, T mul [M, N] or NULL.
 * A block is a tile of HK_GEMM_BM rows x HK_GEMM_BN columns, numbered row-tile-major
 * (block = row_tile * col_tiles + col_tile); edge tiles are masked. Per K step a panel of
 * B is converted to f32 once and reused by every row of the tile; the inner loop runs
 * contiguously over columns (i-k-j order); full tiles take loops with constant trip
 * counts, which -O2's cheap vectorizer cost model accepts (tails take scalar loops).
 * Stack: (BM + BK) * BN floats (48 KiB with the default sizes), BM * BN more with HK_DUAL.
 * HK_ROPE (fusion's rope epilogue; args[9..12] = I seq, I rot_cols, I pos_offset, F theta):
 * C = rope(A @ B + bias) as templates/host/rope.c rotates, on the f32 sums before their one
 * rounding; BN is a multiple of HK_ROPE_DH (codegen_host.c), so a tile holds whole heads.
 * HK_NORM_A (fusion's folded rmsnorm; args[HK_NORM_ARG] = T gamma [K], then F eps): A is
 * rmsnorm(A): each element is taken as A * gamma rounded to T (as the GPU kernel stores it in
 * its A tiles) and each row's sums are scaled by 1 / sqrt(mean(A^2) + eps) (f32, as
 * templates/host/rmsnorm.c), before the bias.
 * HK_NORM_C (fusion's norm epilogue, 1 layernorm / 2 rmsnorm; args[9..12] = T gamma [N],
 * T beta [N] or NULL, F eps, T sum or NULL): a block is a row tile over every column tile, and
 * once its rows are stored (rounded to T, as a norm node would read them; in sum with
 * HK_HAS_SUM, else in C) they are normalised into C as templates/host/layernorm.c and
 * rmsnorm.c do.
 * HK_QB (1 int8, 2 fp8_e4m3: a dequant folded into the gemm; args[HK_QB_ARG..] = S scale,
 * S scale2 or NULL, I b_rows, I scale_rows, I scale_cols, I block_rows, I block_cols, lower.h):
 * B (and B2) are 8-bit as stored, each element taken as q * scale rounded to T -- the value the
 * dequant node would have stored, so the result is the unfolded pair's -- as B's panels and f32
 * copies are made.
 * HK_QA (with HK_QB 2: the FP8 product, the kernel option gemm_fp8): each row of A (after a
 * folded rmsnorm's gamma, before its row scale) is quantized to fp8_e4m3 with its own scale
 * sa = absmax / 448 (1 for a zero row), q = e4m3(a / sa) to nearest even; B's 8-bit values are
 * taken as they are; the f32 sums of q_a * q_b (each product exact) are scaled by sa and B's
 * scale for the column (constant along K: per output channel or per tensor, lowering's rule)
 * before the epilogue.
 * BLAS (prelude.h's hk_blas, set by libhkrt where OpenBLAS is installed): the products come from
 * sgemm instead of the loops below, over the largest spans a block range covers (whole row tiles
 * merged into one call), and the same epilogue runs on the f32 sums. An f32 plain gemm (no dual,
 * rope or folded norm) writes its sums into C and finishes them in place; every other form
 * (_span) works on f32 copies made per span (A by HK_GEMM_LP_RB rows when 16-bit or normed,
 * B and B2 by HK_GEMM_NC columns when 16-bit) and f32 sums, rounded once into C. Only the order
 * of the f32 additions changes. The loops run when C overlaps an operand, the sizes exceed int
 * or the copies cannot be allocated. */
#define HK_GEMM_CAT2(a, b) a##b
#define HK_GEMM_CAT(a, b) HK_GEMM_CAT2(a, b)
#if HK_QB
/* Element (r, c) of 8-bit B as stored, as T would hold it (as f32) */
static inline float HK_GEMM_CAT(HK_NAME, _qb_at)(const hk_qb_t *b, int64_t r, int64_t c) {
  const uint8_t v = b->q[r * b->cols + c];
  const float sc = b->s[(r / b->brows) * b->scols + c / b->bcols];
  return HK_LOAD(HK_STORE((HK_QB == 2 ? hk_fp8_e4m3_to_f32(v) : (float)(int8_t)v) * sc));
}
/* dst[0, n) = row r of 8-bit B as stored, columns [c0, c0 + n), as T would hold them */
__attribute__((unused)) static void HK_GEMM_CAT(HK_NAME, _qb_row)(float *dst, const hk_qb_t *b, int64_t r, int64_t c0,
                                                                  int64_t n) {
  const uint8_t *q = b->q + r * b->cols;
  const float *s = b->s + (r / b->brows) * b->scols;
  for (int64_t c = c0; c < c0 + n;) { /* one scale per column block */
    const int64_t blk = c / b->bcols, end = hk_min_i64((blk + 1) * b->bcols, c0 + n);
    const float sc = s[blk];
    for (; c < end; c++) *dst++ = HK_LOAD(HK_STORE((HK_QB == 2 ? hk_fp8_e4m3_to_f32(q[c]) : (float)(int8_t)q[c]) * sc));
  }
}
#if HK_QA
/* B's scale for output column n (its scales do not vary along K) */
static inline float HK_GEMM_CAT(HK_NAME, _qb_col_scale)(const hk_qb_t *b, int64_t n) {
  return HK_TRANS_B ? b->s[(n / b->brows) * b->scols] : b->s[n / b->bcols];
}
/* dst[0, n) = row r of 8-bit B as stored, columns [c0, c0 + n): the 8-bit values, unscaled */
static void HK_GEMM_CAT(HK_NAME, _qb_row_raw)(float *dst, const hk_qb_t *b, int64_t r, int64_t c0, int64_t n) {
  const uint8_t *q = b->q + r * b->cols + c0;
  for (int64_t c = 0; c < n; c++) dst[c] = HK_QB == 2 ? hk_fp8_e4m3_to_f32(q[c]) : (float)(int8_t)q[c];
}
/* Quantizes the row f[0, k) to fp8_e4m3 in place (the values it stands for, unscaled); returns
 * its scale absmax / 448 (1 for a zero row) */
static float HK_GEMM_CAT(HK_NAME, _qa_row)(float *f, int64_t k) {
  float amax = 0.0f;
  for (int64_t i = 0; i < k; i++) amax = fmaxf(amax, fabsf(f[i]));
  const float s = amax > 0.0f ? amax / 448.0f : 1.0f;
  for (int64_t i = 0; i < k; i++) f[i] = hk_fp8_e4m3_to_f32(hk_f32_to_fp8_e4m3(f[i] / s));
  return s;
}
#define HK_QB_ROW HK_GEMM_CAT(HK_NAME, _qb_row_raw)
#else
#define HK_QB_ROW HK_GEMM_CAT(HK_NAME, _qb_row)
#endif
/* B's (which = 0) or B2's (1) view from the launch's arguments */
static inline hk_qb_t HK_GEMM_CAT(HK_NAME, _qb)(void *const *args, int which) {
  const int64_t rows = hk_arg_i64(args, HK_QB_ARG + 2);
  const int64_t cols = hk_arg_i64(args, 6) * hk_arg_i64(args, 7) / rows; /* N K / rows */
  return (hk_qb_t){(const uint8_t *)hk_arg_ptr(args, which ? 9 : 1), (const float *)hk_arg_ptr(args, HK_QB_ARG + which),
                   cols, hk_arg_i64(args, HK_QB_ARG + 4), hk_arg_i64(args, HK_QB_ARG + 5),
                   hk_arg_i64(args, HK_QB_ARG + 6)};
}
#endif
#if HK_NORM_C
/* Rows [i0, i0 + mb) of H, stored and whole, normalised into C (layernorm.c / rmsnorm.c). */
static void HK_GEMM_CAT(HK_NAME, _norm_rows)(const HK_T *H, HK_T *C, int64_t i0, int64_t mb, int64_t N,
                                             const HK_T *ln_gamma, const HK_T *ln_beta, float ln_eps) {
  (void)ln_beta;
  for (int64_t i = 0; i < mb; i++) {
    const HK_T *h_row = H + (i0 + i) * N;
    HK_T *y_row = C + (i0 + i) * N;
    float lane[8] = {0}, mean = 0.0f;
#if HK_NORM_C == 1
    const float shift = HK_LOAD(h_row[0]);
    for (int64_t c = 0; c < N; c++) lane[c & 7] += HK_LOAD(h_row[c]) - shift;
    mean = shift + hk_sum8(lane) / (float)N;
    memset(lane, 0, sizeof lane);
#endif
    for (int64_t c = 0; c < N; c++) {
      const float d = HK_LOAD(h_row[c]) - mean;
      lane[c & 7] += d * d;
    }
    const float rstd = 1.0f / sqrtf(hk_sum8(lane) / (float)N + ln_eps);
    for (int64_t c = 0; c < N; c++)
#if HK_NORM_C == 1
      y_row[c] = HK_STORE((HK_LOAD(h_row[c]) - mean) * rstd * HK_LOAD(ln_gamma[c]) + HK_LOAD(ln_beta[c]));
#else
      y_row[c] = HK_STORE(HK_LOAD(h_row[c]) * rstd * HK_LOAD(ln_gamma[c]));
#endif
  }
}
#endif
/* ---- the BLAS path (prelude.h's hk_blas) ---------------------------------------------------- */
/* The element-wise epilogue of the plain form on f32 sums s: bias, act, mul, residual, rounded
 * into o (o may be s itself: f32 in place). One call per 64 columns, its loop alone in the
 * function, so that -O2 vectorizes it; n < 64 for a tail. */
#define HK_GEMM_EPI_BODY(o, s, b, r, m, j)                                                               \
  do {                                                                                                   \
    float v_ = (s)[j];                                                                                   \
    if (HK_HAS_BIAS && !HK_ROPE) v_ += HK_LOAD((b)[j]); /* a rope gemm's bias is in s */              \
    v_ = HK_ACT(v_);                                                                                     \
    if (HK_HAS_MUL) v_ *= HK_LOAD((m)[j]);                                                               \
    if (HK_HAS_RESIDUAL) v_ += HK_LOAD((r)[j]);                                                          \
    (o)[j] = HK_STORE(v_);                                                                               \
  } while (0)
__attribute__((noinline, unused)) static void HK_GEMM_CAT(HK_NAME, _epi64)(HK_T *restrict o, const float *restrict s,
                                                                          const HK_T *restrict b,
                                                                          const HK_T *restrict r,
                                                                          const HK_T *restrict m) {
  for (int j = 0; j < 64; j++) HK_GEMM_EPI_BODY(o, s, b, r, m, j);
}
__attribute__((noinline, unused)) static void HK_GEMM_CAT(HK_NAME, _epi64_inplace)(float *restrict d,
                                                                                  const HK_T *restrict b,
                                                                                  const HK_T *restrict r,
                                                                                  const HK_T *restrict m) {
  for (int j = 0; j < 64; j++) HK_GEMM_EPI_BODY(d, d, b, r, m, j);
}
/* One row of n columns: o[j] = epilogue(s[j]); o == s for f32 in place */
static void HK_GEMM_CAT(HK_NAME, _epi_row)(HK_T *o, const float *s, const HK_T *b, const HK_T *r, const HK_T *m,
                                           int64_t n) {
  int64_t j = 0;
  if ((const void *)o == (const void *)s)
    for (; j + 64 <= n; j += 64)
      HK_GEMM_CAT(HK_NAME, _epi64_inplace)((float *)(void *)o + j, b ? b + j : NULL, r ? r + j : NULL,
                                           m ? m + j : NULL);
  else
    for (; j + 64 <= n; j += 64)
      HK_GEMM_CAT(HK_NAME, _epi64)(o + j, s + j, b ? b + j : NULL, r ? r + j : NULL, m ? m + j : NULL);
  for (; j < n; j++) HK_GEMM_EPI_BODY(o, s, b, r, m, j);
}
#undef HK_GEMM_EPI_BODY

/* Column chunk of a span: HK_GEMM_LP_NC columns, whole heads for a rope epilogue. */
#if HK_ROPE
#define HK_GEMM_NC (HK_GEMM_LP_NC / HK_ROPE_DH > 0 ? HK_GEMM_LP_NC / HK_ROPE_DH * HK_ROPE_DH : HK_ROPE_DH)
#else
#define HK_GEMM_NC HK_GEMM_LP_NC
#endif
/* Whether a span takes f32 copies of A's rows: 16-bit types, and a folded norm (A * gamma) */
#define HK_GEMM_COPY_A (sizeof(HK_T) != sizeof(float) || HK_NORM_A || HK_QA)
#define HK_GEMM_COPY_B (sizeof(HK_T) != sizeof(float) || HK_QB)

/* Rows [i0, i0 + mb) x columns [j0, j0 + nb) of C (D: C, or the sum a norm epilogue reads)
 * through sgemm, for every form but f32 plain (which the kernel runs in place): B's columns in
 * chunks of HK_GEMM_NC, as f32 copies in bf (and B2's in bf2) when 16-bit ([K][nc], or [nc][K]
 * when HK_TRANS_B); A's rows in chunks of HK_GEMM_LP_RB, as f32 copies in af when 16-bit or
 * normed (A * gamma rounded to T, the row scales in rs); the products into df (and df2); then
 * the epilogue on those f32 sums, rounded once into D. */
__attribute__((unused)) static void HK_GEMM_CAT(HK_NAME, _span)(void *const *args, HK_T *D, int64_t i0, int64_t j0,
                                                                int64_t mb, int64_t nb, int64_t N, int64_t K,
                                                                float *bf, float *bf2, float *af, float *df,
                                                                float *df2, float *rs) {
  const HK_T *const A = (const HK_T *)hk_arg_ptr(args, 0), *const B = (const HK_T *)hk_arg_ptr(args, 1);
  const HK_T *const bias = HK_HAS_BIAS ? (const HK_T *)hk_arg_ptr(args, 2) : NULL;
  const HK_T *const residual = HK_HAS_RESIDUAL ? (const HK_T *)hk_arg_ptr(args, 3) : NULL;
  const HK_T *const mul = HK_HAS_MUL ? (const HK_T *)hk_arg_ptr(args, 8) : NULL;
  (void)bf2, (void)df2, (void)rs;
#if HK_DUAL
  const HK_T *const B2 = (const HK_T *)hk_arg_ptr(args, 9);
#endif
#if HK_NORM_A
  const HK_T *const gamma = (const HK_T *)hk_arg_ptr(args, HK_NORM_ARG);
  const float eps = hk_arg_f32(args, HK_NORM_ARG + 1);
#endif
#if HK_ROPE
  const int64_t rope_seq = hk_arg_i64(args, 9), rope_cols = hk_arg_i64(args, 10), rope_pos0 = hk_arg_i64(args, 11);
  const float rope_theta = hk_arg_f32(args, 12);
#endif
  for (int64_t c0 = 0; c0 < nb; c0 += HK_GEMM_NC) {
    const int64_t nc = hk_min_i64(HK_GEMM_NC, nb - c0), jc = j0 + c0;
    /* the chunk's B (and B2) as sgemm reads it: copies, or in place */
    const float *bs = (const float *)(const void *)(HK_TRANS_B ? B + jc * K : B + jc);
    int ldb = (int)(HK_TRANS_B ? K : N);
#if HK_DUAL
    const float *bs2 = (const float *)(const void *)(HK_TRANS_B ? B2 + jc * K : B2 + jc);
#endif
    if (HK_GEMM_COPY_B) {
#if HK_QB
      const hk_qb_t qb = HK_GEMM_CAT(HK_NAME, _qb)(args, 0);
#if HK_TRANS_B
      for (int64_t j = 0; j < nc; j++) HK_QB_ROW(bf + j * K, &qb, jc + j, 0, K);
#else
      for (int64_t k = 0; k < K; k++) HK_QB_ROW(bf + k * nc, &qb, k, jc, nc);
#endif
#if HK_DUAL
      const hk_qb_t qb2 = HK_GEMM_CAT(HK_NAME, _qb)(args, 1);
#if HK_TRANS_B
      for (int64_t j = 0; j < nc; j++) HK_QB_ROW(bf2 + j * K, &qb2, jc + j, 0, K);
#else
      for (int64_t k = 0; k < K; k++) HK_QB_ROW(bf2 + k * nc, &qb2, k, jc, nc);
#endif
#endif
#elif HK_TRANS_B
      for (int64_t j = 0; j < nc; j++) HK_LOAD_ROW16(bf + j * K, B + (jc + j) * K, K);
#if HK_DUAL
      for (int64_t j = 0; j < nc; j++) HK_LOAD_ROW16(bf2 + j * K, B2 + (jc + j) * K, K);
#endif
#else
      for (int64_t k = 0; k < K; k++) HK_LOAD_ROW16(bf + k * nc, B + k * N + jc, nc);
#if HK_DUAL
      for (int64_t k = 0; k < K; k++) HK_LOAD_ROW16(bf2 + k * nc, B2 + k * N + jc, nc);
#endif
#endif
      bs = bf;
      ldb = (int)(HK_TRANS_B ? K : nc);
#if HK_DUAL
      bs2 = bf2;
#endif
    }
    for (int64_t r0 = 0; r0 < mb; r0 += HK_GEMM_LP_RB) {
      const int64_t rb = hk_min_i64(HK_GEMM_LP_RB, mb - r0), ir = i0 + r0;
      const float *as = (const float *)(const void *)(A + ir * K);
      if (HK_GEMM_COPY_A) {
        for (int64_t i = 0; i < rb; i++) {
          const HK_T *a_row = A + (ir + i) * K;
          float *restrict f_row = af + i * K;
#if HK_NORM_A /* the row's scale from A as stored; its elements as A * gamma rounded to T */
          float lane[8] = {0};
          for (int64_t k = 0; k < K; k++) {
            const float v = HK_LOAD(a_row[k]);
            lane[k & 7] += v * v;
          }
          rs[i] = 1.0f / sqrtf(hk_sum8(lane) / (float)K + eps);
          for (int64_t k = 0; k < K; k++) f_row[k] = HK_LOAD(HK_STORE(HK_LOAD(a_row[k]) * HK_LOAD(gamma[k])));
#else
          HK_LOAD_ROW16(f_row, a_row, K);
#endif
#if HK_QA
          rs[HK_GEMM_LP_RB + i] = HK_GEMM_CAT(HK_NAME, _qa_row)(f_row, K);
#endif
        }
        as = af;
      }
      hk_blas->sgemm(101, 111, HK_TRANS_B ? 112 : 111, (int)rb, (int)nc, (int)K, 1.0f, as, (int)K, bs, ldb, 0.0f, df,
                     (int)nc);
#if HK_DUAL
      hk_blas->sgemm(101, 111, HK_TRANS_B ? 112 : 111, (int)rb, (int)nc, (int)K, 1.0f, as, (int)K, bs2, ldb, 0.0f,
                     df2, (int)nc);
#endif
      for (int64_t i = 0; i < rb; i++) {
        float *restrict s_row = df + i * nc;
        HK_T *o_row = D + (ir + i) * N + jc;
#if HK_QA /* the FP8 sums times A's row scale and B's column scales */
        {
          const hk_qb_t qs = HK_GEMM_CAT(HK_NAME, _qb)(args, 0);
          for (int64_t j = 0; j < nc; j++) s_row[j] *= rs[HK_GEMM_LP_RB + i] * HK_GEMM_CAT(HK_NAME, _qb_col_scale)(&qs, jc + j);
        }
#endif
#if HK_NORM_A
        for (int64_t j = 0; j < nc; j++) s_row[j] *= rs[i];
#endif
#if HK_DUAL /* act(A B + bias) * (A B2), then mul and residual */
        float *restrict s2_row = df2 + i * nc;
#if HK_QA
        {
          const hk_qb_t qs2 = HK_GEMM_CAT(HK_NAME, _qb)(args, 1);
          for (int64_t j = 0; j < nc; j++)
            s2_row[j] *= rs[HK_GEMM_LP_RB + i] * HK_GEMM_CAT(HK_NAME, _qb_col_scale)(&qs2, jc + j);
        }
#endif
#if HK_NORM_A
        for (int64_t j = 0; j < nc; j++) s2_row[j] *= rs[i];
#endif
        for (int64_t j = 0; j < nc; j++) {
          float v = s_row[j];
          if (HK_HAS_BIAS) v += HK_LOAD(bias[jc + j]);
          v = HK_ACT(v) * s2_row[j];
          if (HK_HAS_MUL) v *= HK_LOAD(mul[(ir + i) * N + jc + j]);
          if (HK_HAS_RESIDUAL) v += HK_LOAD(residual[(ir + i) * N + jc + j]);
          o_row[j] = HK_STORE(v);
        }
#else
#if HK_ROPE /* bias, then each rotated head's pairs (j, j + dh/2) at the row's position */
        if (HK_HAS_BIAS)
          for (int64_t j = 0; j < nc; j++) s_row[j] += HK_LOAD(bias[jc + j]);
        if (jc < rope_cols) {
          const float pos = (float)((ir + i) % rope_seq + rope_pos0);
          for (int j = 0; j < HK_ROPE_DH / 2; j++) {
            float cs, sn;
            hk_rope_cos_sin(pos, j, HK_ROPE_DH, rope_theta, &cs, &sn);
            for (int64_t h0 = 0; h0 + HK_ROPE_DH <= nc && jc + h0 < rope_cols; h0 += HK_ROPE_DH) {
              const float x1 = s_row[h0 + j], x2 = s_row[h0 + j + HK_ROPE_DH / 2];
              s_row[h0 + j] = x1 * cs - x2 * sn;
              s_row[h0 + j + HK_ROPE_DH / 2] = x2 * cs + x1 * sn;
            }
          }
        }
        HK_GEMM_CAT(HK_NAME, _epi_row)(o_row, s_row, NULL, residual ? residual + (ir + i) * N + jc : NULL,
                                       mul ? mul + (ir + i) * N + jc : NULL, nc);
#else
        HK_GEMM_CAT(HK_NAME, _epi_row)(o_row, s_row, bias ? bias + jc : NULL,
                                       residual ? residual + (ir + i) * N + jc : NULL,
                                       mul ? mul + (ir + i) * N + jc : NULL, nc);
#endif
#endif
      }
    }
  }
}

HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *A = (const HK_T *)hk_arg_ptr(args, 0);
  const HK_T *B = (const HK_T *)hk_arg_ptr(args, 1);
  const HK_T *bias = HK_HAS_BIAS ? (const HK_T *)hk_arg_ptr(args, 2) : NULL;
  const HK_T *residual = HK_HAS_RESIDUAL ? (const HK_T *)hk_arg_ptr(args, 3) : NULL;
  const HK_T *mul = HK_HAS_MUL ? (const HK_T *)hk_arg_ptr(args, 8) : NULL;
  (void)bias, (void)residual, (void)mul;
  HK_T *C = (HK_T *)hk_arg_ptr(args, 4);
#if HK_DUAL
  const HK_T *B2 = (const HK_T *)hk_arg_ptr(args, 9);
  float gate[HK_GEMM_BM][HK_GEMM_BN]; /* the first product, activated (on the stack as acc) */
#endif
  const int64_t M = hk_arg_i64(args, 5), N = hk_arg_i64(args, 6), K = hk_arg_i64(args, 7);
#if HK_ROPE
#if HK_GEMM_BN % HK_ROPE_DH != 0
#error "host gemm: a rope epilogue needs column tiles of whole heads"
#endif
  const int64_t rope_seq = hk_arg_i64(args, 9), rope_cols = hk_arg_i64(args, 10), rope_pos0 = hk_arg_i64(args, 11);
  const float rope_theta = hk_arg_f32(args, 12);
#endif
#if HK_NORM_A
  const HK_T *norm_gamma = (const HK_T *)hk_arg_ptr(args, HK_NORM_ARG);
  const float norm_eps = hk_arg_f32(args, HK_NORM_ARG + 1);
  float rscale[HK_GEMM_BM];
#define HK_A_LOAD(p, k) HK_LOAD(HK_STORE(HK_LOAD(p) * HK_LOAD(norm_gamma[k])))
#else
#define HK_A_LOAD(p, k) HK_LOAD(p)
#endif
  const int64_t col_tiles = (N + HK_GEMM_BN - 1) / HK_GEMM_BN;
#if HK_NORM_C /* a block: a row tile, all of its column tiles (codegen_host.c's launch) */
  const HK_T *ln_gamma = (const HK_T *)hk_arg_ptr(args, 9), *ln_beta = (const HK_T *)hk_arg_ptr(args, 10);
  const float ln_eps = hk_arg_f32(args, 11);
  HK_T *const H = HK_HAS_SUM ? (HK_T *)hk_arg_ptr(args, 12) : C; /* where h is stored */
  const int64_t tiles_per_block = col_tiles;
#else
  const int64_t tiles_per_block = 1;
#endif
  const int64_t n_blocks = (M + HK_GEMM_BM - 1) / HK_GEMM_BM * col_tiles / tiles_per_block;
  {
#if HK_NORM_C
    HK_T *const D = H; /* where sgemm and the epilogue write */
#else
    HK_T *const D = C;
#endif
    const size_t mn = (size_t)M * (size_t)N * sizeof(HK_T);
    /* f32 plain: sgemm straight into D, the epilogue in place; every other form through _span,
     * with its f32 copies and sums in work */
    const int plain32 = sizeof(HK_T) == sizeof(float) && !HK_DUAL && !HK_ROPE && !HK_NORM_A && !HK_QB;
    const size_t b_bytes = (size_t)K * (size_t)N * (HK_QB ? 1 : sizeof(HK_T));
    const int fits = hk_blas && hk_blas_fits(M, N, K);
    const size_t nc = (size_t)hk_min_i64(N, HK_GEMM_NC), rb = (size_t)hk_min_i64(M, HK_GEMM_LP_RB);
    const size_t n_b = HK_GEMM_COPY_B ? (size_t)K * nc : 0, n_a = HK_GEMM_COPY_A ? rb * (size_t)K : 0;
    const size_t n_d = rb * nc, n_bd = HK_DUAL ? n_b : 0, n_dd = HK_DUAL ? n_d : 0, n_r = HK_QA ? 2 * (size_t)HK_GEMM_LP_RB : HK_NORM_A ? rb : 0;
    float *const work =
        fits && !plain32 ? (float *)malloc((n_b + n_bd + n_a + n_d + n_dd + n_r + 1) * sizeof(float)) : NULL;
    if (fits && (plain32 || work) && !hk_overlaps(D, mn, A, (size_t)M * (size_t)K * sizeof(HK_T)) &&
        !hk_overlaps(D, mn, B, b_bytes)
#if HK_DUAL
        && !hk_overlaps(D, mn, B2, b_bytes)
#endif
#if HK_NORM_A
        && !hk_overlaps(D, mn, norm_gamma, (size_t)K * sizeof(HK_T))
#endif
#if HK_HAS_BIAS
        && !hk_overlaps(D, mn, bias, (size_t)N * sizeof(HK_T))
#endif
#if HK_HAS_RESIDUAL
        && !hk_overlaps(D, mn, residual, mn)
#endif
#if HK_HAS_MUL
        && !hk_overlaps(D, mn, mul, mn)
#endif
    ) {
      float *const bf = work, *const bf2 = work ? bf + n_b : NULL, *const af = work ? bf2 + n_bd : NULL;
      float *const df = work ? af + n_a : NULL, *const df2 = work ? df + n_d : NULL;
      float *const rs = work ? df2 + n_dd : NULL;
      const int64_t b_end = hk_min_i64((int64_t)block_end, n_blocks);
      const int64_t t1 = b_end * tiles_per_block;
      /* spans of tiles in row-tile-major order: whole row tiles merged, else part of one */
      for (int64_t t = (int64_t)block_begin * tiles_per_block; t < t1;) {
        const int64_t r = t / col_tiles, c = t % col_tiles;
        int64_t rows = HK_GEMM_BM, c_end;
        if (c == 0 && t1 - t >= col_tiles) {
          rows = (t1 - t) / col_tiles * HK_GEMM_BM;
          c_end = col_tiles;
          t += rows / HK_GEMM_BM * col_tiles;
        } else {
          c_end = hk_min_i64(col_tiles, c + (t1 - t));
          t += c_end - c;
        }
        const int64_t i0 = r * HK_GEMM_BM, j0 = c * HK_GEMM_BN;
        const int64_t mb = hk_min_i64(rows, M - i0), nb = hk_min_i64(c_end * HK_GEMM_BN, N) - j0;
        if (!plain32) {
          HK_GEMM_CAT(HK_NAME, _span)(args, D, i0, j0, mb, nb, N, K, bf, bf2, af, df, df2, rs);
          continue;
        }
        float *const d = (float *)(void *)(D + i0 * N + j0);
        hk_blas->sgemm(101, 111, HK_TRANS_B ? 112 : 111, (int)mb, (int)nb, (int)K, 1.0f,
                       (const float *)(const void *)(A + i0 * K), (int)K,
                       (const float *)(const void *)(HK_TRANS_B ? B + j0 * K : B + j0), (int)(HK_TRANS_B ? K : N),
                       0.0f, d, (int)N);
        for (int64_t i = 0; i < mb; i++) /* the epilogue on the f32 sums, in place */
          HK_GEMM_CAT(HK_NAME, _epi_row)((HK_T *)(void *)(d + i * N), d + i * N, HK_HAS_BIAS ? bias + j0 : NULL,
                                         HK_HAS_RESIDUAL ? residual + (i0 + i) * N + j0 : NULL,
                                         HK_HAS_MUL ? mul + (i0 + i) * N + j0 : NULL, nb);
      }
#if HK_NORM_C /* a block is a row tile with all of its columns: every span was whole rows */
      if (b_end > (int64_t)block_begin) {
        const int64_t i0 = (int64_t)block_begin * HK_GEMM_BM;
        HK_GEMM_CAT(HK_NAME, _norm_rows)(H, C, i0, hk_min_i64(b_end * HK_GEMM_BM, M) - i0, N, ln_gamma, ln_beta,
                                         ln_eps);
      }
#endif
      free(work);
      return;
    }
    free(work); /* none, or the operands overlap C: the loops below */
  }
  float acc[HK_GEMM_BM][HK_GEMM_BN];
  float panel[HK_GEMM_BK][HK_GEMM_BN];

  for (int64_t blk = block_begin; blk < (int64_t)block_end && blk < n_blocks; blk++)
  for (int64_t sub = 0; sub < tiles_per_block; sub++) {
    const int64_t tile = blk * tiles_per_block + sub;
    const int64_t i0 = tile / col_tiles * HK_GEMM_BM, j0 = tile % col_tiles * HK_GEMM_BN;
    const int64_t mb = hk_min_i64(HK_GEMM_BM, M - i0), nb = hk_min_i64(HK_GEMM_BN, N - j0);
#if HK_NORM_A
    for (int64_t i = 0; i < mb; i++) {
      const HK_T *a_row = A + (i0 + i) * K;
      float lane[8] = {0};
      for (int64_t k = 0; k < K; k++) {
        const float v = HK_LOAD(a_row[k]);
        lane[k & 7] += v * v;
      }
      rscale[i] = 1.0f / sqrtf(hk_sum8(lane) / (float)K + norm_eps);
    }
#endif
#if HK_QA /* each row's fp8 scale: absmax / 448 of A as the product reads it */
    float qsa[HK_GEMM_BM];
    for (int64_t i = 0; i < mb; i++) {
      const HK_T *a_row = A + (i0 + i) * K;
      float amax = 0.0f;
      for (int64_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(HK_A_LOAD(a_row[k], k)));
      qsa[i] = amax > 0.0f ? amax / 448.0f : 1.0f;
    }
#endif
#if HK_DUAL
    for (int pass = 0; pass < 2; pass++) {
    const HK_T *const Bp = pass ? B2 : B;
#else
    const HK_T *const Bp = B;
#endif
    for (int64_t i = 0; i < mb; i++)
      for (int64_t j = 0; j < nb; j++) acc[i][j] = 0.0f;

    for (int64_t k0 = 0; k0 < K; k0 += HK_GEMM_BK) {
      const int64_t kb = hk_min_i64(HK_GEMM_BK, K - k0);
#if HK_QB
#if HK_DUAL
      const hk_qb_t qbp = HK_GEMM_CAT(HK_NAME, _qb)(args, pass);
#else
      const hk_qb_t qbp = HK_GEMM_CAT(HK_NAME, _qb)(args, 0);
#endif
#if HK_TRANS_B && HK_QA
      for (int64_t j = 0; j < nb; j++)
        for (int64_t kk = 0; kk < kb; kk++) {
          const uint8_t v = qbp.q[(j0 + j) * qbp.cols + k0 + kk];
          panel[kk][j] = HK_QB == 2 ? hk_fp8_e4m3_to_f32(v) : (float)(int8_t)v;
        }
#elif HK_TRANS_B
      for (int64_t j = 0; j < nb; j++)
        for (int64_t kk = 0; kk < kb; kk++) panel[kk][j] = HK_GEMM_CAT(HK_NAME, _qb_at)(&qbp, j0 + j, k0 + kk);
#else
      for (int64_t kk = 0; kk < kb; kk++) HK_QB_ROW(panel[kk], &qbp, k0 + kk, j0, nb);
#endif
      (void)Bp;
#elif HK_TRANS_B
      for (int64_t j = 0; j < nb; j++) {
        const HK_T *b_row = Bp + (j0 + j) * K + k0;
        if (kb == HK_GEMM_BK)
          for (int kk = 0; kk < HK_GEMM_BK; kk++) panel[kk][j] = HK_LOAD(b_row[kk]);
        else
          for (int64_t kk = 0; kk < kb; kk++) panel[kk][j] = HK_LOAD(b_row[kk]);
      }
#else
      for (int64_t kk = 0; kk < kb; kk++) {
        const HK_T *b_row = Bp + (k0 + kk) * N + j0;
        if (nb == HK_GEMM_BN)
          for (int j = 0; j < HK_GEMM_BN; j++) panel[kk][j] = HK_LOAD(b_row[j]);
        else
          for (int64_t j = 0; j < nb; j++) panel[kk][j] = HK_LOAD(b_row[j]);
      }
#endif
      for (int64_t i = 0; i < mb; i++) {
        const HK_T *a_row = A + (i0 + i) * K + k0;
        float *c = acc[i];
        for (int64_t kk = 0; kk < kb; kk++) {
#if HK_QA
          const float a = hk_fp8_e4m3_to_f32(hk_f32_to_fp8_e4m3(HK_A_LOAD(a_row[kk], k0 + kk) / qsa[i]));
#else
          const float a = HK_A_LOAD(a_row[kk], k0 + kk);
#endif
          const float *b = panel[kk];
          if (nb == HK_GEMM_BN) /* constant trip count: vectorized even by -O2's cheap model */
            for (int j = 0; j < HK_GEMM_BN; j++) c[j] += a * b[j];
          else
            for (int64_t j = 0; j < nb; j++) c[j] += a * b[j];
        }
      }
    }
#if HK_QA /* the FP8 sums times A's row scale and B's column scales */
    {
#if HK_DUAL
      const hk_qb_t qs = HK_GEMM_CAT(HK_NAME, _qb)(args, pass);
#else
      const hk_qb_t qs = HK_GEMM_CAT(HK_NAME, _qb)(args, 0);
#endif
      for (int64_t i = 0; i < mb; i++)
        for (int64_t j = 0; j < nb; j++) acc[i][j] *= qsa[i] * HK_GEMM_CAT(HK_NAME, _qb_col_scale)(&qs, j0 + j);
    }
#endif
#if HK_NORM_A
    for (int64_t i = 0; i < mb; i++)
      for (int64_t j = 0; j < nb; j++) acc[i][j] *= rscale[i];
#endif
#if HK_DUAL
    if (pass == 0)
      for (int64_t i = 0; i < mb; i++)
        for (int64_t j = 0; j < nb; j++) {
          float v = acc[i][j];
#if HK_HAS_BIAS
          v += HK_LOAD(bias[j0 + j]);
#endif
          gate[i][j] = HK_ACT(v);
        }
    } /* pass */
#endif

#if HK_ROPE
    /* bias, then each rotated head's pairs (j, j + dh/2) at the row's position */
    for (int64_t i = 0; i < mb; i++) {
#if HK_HAS_BIAS
      for (int64_t j = 0; j < nb; j++) acc[i][j] += HK_LOAD(bias[j0 + j]);
#endif
      if (j0 >= rope_cols) continue; /* v heads only */
      const float pos = (float)((i0 + i) % rope_seq + rope_pos0);
      for (int j = 0; j < HK_ROPE_DH / 2; j++) { /* one angle per pair, for every head of the tile */
        float cs, sn;
        hk_rope_cos_sin(pos, j, HK_ROPE_DH, rope_theta, &cs, &sn);
        for (int64_t h0 = 0; h0 + HK_ROPE_DH <= nb && j0 + h0 < rope_cols; h0 += HK_ROPE_DH) {
          const float x1 = acc[i][h0 + j], x2 = acc[i][h0 + j + HK_ROPE_DH / 2];
          acc[i][h0 + j] = x1 * cs - x2 * sn;
          acc[i][h0 + j + HK_ROPE_DH / 2] = x2 * cs + x1 * sn;
        }
      }
    }
#endif
    for (int64_t i = 0; i < mb; i++) {
#if HK_NORM_C
      HK_T *c_row = H + (i0 + i) * N + j0;
#else
      HK_T *c_row = C + (i0 + i) * N + j0;
#endif
#if HK_HAS_RESIDUAL
      const HK_T *r_row = residual + (i0 + i) * N + j0;
#endif
#if HK_HAS_MUL
      const HK_T *m_row = mul + (i0 + i) * N + j0;
#endif
      for (int64_t j = 0; j < nb; j++) {
#if HK_DUAL
        float v = gate[i][j] * acc[i][j];
#else
        float v = acc[i][j];
#if HK_HAS_BIAS && !HK_ROPE /* a rope gemm's bias is in acc */
        v += HK_LOAD(bias[j0 + j]);
#endif
        v = HK_ACT(v);
#endif
#if HK_HAS_MUL
        v *= HK_LOAD(m_row[j]);
#endif
#if HK_HAS_RESIDUAL
        v += HK_LOAD(r_row[j]);
#endif
        c_row[j] = HK_STORE(v);
      }
    }
#if HK_NORM_C
    if (sub == tiles_per_block - 1) /* the block's rows are whole: normalise them into C */
      HK_GEMM_CAT(HK_NAME, _norm_rows)(H, C, i0, mb, N, ln_gamma, ln_beta, ln_eps);
#endif
  }
}
#undef HK_A_LOAD
#undef HK_GEMM_CAT
#undef HK_GEMM_CAT2
#undef HK_QB_ROW
