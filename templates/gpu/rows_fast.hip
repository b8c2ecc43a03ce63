/* Row-wise ops with 16-byte vectors: layernorm, rmsnorm, softmax over the last axis
 * (DESIGN "Op semantics"; the same results as layernorm.hip / rmsnorm.hip / softmax.hip).
 * Served by the variant "rows_vec16" (compiler/variant_rows.c) when every row length is a
 * multiple of HK_VEC elements (key.align) and tensors are 16-byte aligned.
 *
 * Macros from the variant:
 *   HK_THREADS        threads per block (a multiple of 64, <= 1024)
 *   HK_VEC            elements per 16-byte vector: 4 (f32) or 8 (f16, bf16)
 *   HK_ROW_OP         1 layernorm, 2 rmsnorm, 3 softmax
 *   HK_ROW_CACHE      vectors per thread a row may keep in registers
 *   HK_ROW_TARGET     vectors per thread the group size aims at
 *   HK_ROW_MIN_BLOCKS blocks per SM asked of ptxas (NVIDIA __launch_bounds__)
 *   HK_ROW_FAST_EXP   softmax: exp(x - m) as exp2f(x*log2e - m*log2e) (f16/bf16 outputs)
 *
 * Work split. A row of nvec = cols / HK_VEC vectors belongs to a group of g threads, g the
 * smallest power of two >= ceil(nvec / HK_ROW_TARGET), at most HK_THREADS (rf_group; the
 * launch in variant_rows.c uses the same rule). A block holds HK_THREADS / g rows (a
 * "tile"); blocks stride over tiles, so any grid covers every row. Group lane l owns the
 * vectors l, l + g, l + 2g, ... of its row.
 *  - cached path, nvec <= g * HK_ROW_CACHE: the row's vectors are loaded once into
 *    registers, statistics come from them (layernorm: mean, then the centred sum of
 *    squares: no cancellation), the output is written once: one read, one write.
 *  - streaming path (only when g == HK_THREADS, one row per block, very long rows): the
 *    same statistics in passes over memory (layernorm 3 reads, rmsnorm and softmax 2);
 *    each thread touches only its own vectors in every pass, so out may alias x.
 * Reductions: xor shuffles inside groups of up to 32 lanes (offsets < 32 stay inside a
 * 32-lane half on wave64 too), then shared memory across the 32-lane pieces of groups
 * larger than 32. Every thread of the block takes part in every reduction (rows past the
 * end are computed on nothing and not stored), so the barriers are uniform.
 * Statistics in f32. */

#if defined(__CUDA_ARCH__)
#define HK_ROW_BOUNDS __launch_bounds__(HK_THREADS, HK_ROW_MIN_BLOCKS)
#else
#define HK_ROW_BOUNDS HK_LAUNCH_BOUNDS(HK_THREADS)
#endif

struct __attribute__((aligned(16))) rf_vec {
  unsigned int w[4];
};

#if HK_VEC == 8
HK_DEVICE float rf_get(const rf_vec &v, int e) { return HK_LOAD((unsigned short)(v.w[e >> 1] >> ((e & 1) * 16))); }
HK_DEVICE void rf_set(rf_vec &v, const float *f) {
#pragma unroll
  for (int i = 0; i < 4; i++)
    v.w[i] = (unsigned)HK_STORE(f[2 * i]) | ((unsigned)HK_STORE(f[2 * i + 1]) << 16);
}
#elif HK_VEC == 4
HK_DEVICE float rf_get(const rf_vec &v, int e) { return __uint_as_float(v.w[e]); }
HK_DEVICE void rf_set(rf_vec &v, const float *f) {
#pragma unroll
  for (int i = 0; i < 4; i++) v.w[i] = __float_as_uint(f[i]);
}
#else
#error "rows_fast.hip: HK_VEC must be 4 (f32) or 8 (f16/bf16)"
#endif

/* Group size for rows of nvec vectors (variant_rows.c: rows_group mirrors it). */
HK_DEVICE int rf_group(long long nvec) {
  const long long want = (nvec + HK_ROW_TARGET - 1) / HK_ROW_TARGET;
  int g = 1;
  while (g < HK_THREADS && g < want) g <<= 1;
  return g;
}

/* Sum / max over the g lanes of this thread's group (g a power of two <= HK_THREADS,
 * uniform over the block). red: HK_THREADS / 32 floats; back-to-back calls are ordered
 * by the leading barrier. */
HK_DEVICE float rf_group_sum(float v, float *red, int g) {
  const int lim = g < 32 ? g : 32;
  for (int o = lim >> 1; o > 0; o >>= 1) v += hk_shfl_xor(v, o);
  if (g <= 32) return v;
  HK_SYNC();
  if ((HK_TID & 31) == 0) red[HK_TID >> 5] = v;
  HK_SYNC();
  const int base = (HK_TID & ~(g - 1)) >> 5;
  float s = 0.0f;
  for (int i = 0; i < (g >> 5); i++) s += red[base + i];
  return s;
}

HK_DEVICE float rf_group_max(float v, float *red, int g) {
  const int lim = g < 32 ? g : 32;
  for (int o = lim >> 1; o > 0; o >>= 1) v = fmaxf(v, hk_shfl_xor(v, o));
  if (g <= 32) return v;
  HK_SYNC();
  if ((HK_TID & 31) == 0) red[HK_TID >> 5] = v;
  HK_SYNC();
  const int base = (HK_TID & ~(g - 1)) >> 5;
  float m = -hk_inf();
  for (int i = 0; i < (g >> 5); i++) m = fmaxf(m, red[base + i]);
  return m;
}

#define RF_LOG2E 1.4426950408889634f
#if HK_ROW_FAST_EXP
/* exp(v - m) with ml = m * log2e: one fma and the hardware exp2 (2 ulp); for 16-bit outputs */
#define RF_EXP(v, m, ml) exp2f(fmaf((v), RF_LOG2E, -(ml)))
#else
#define RF_EXP(v, m, ml) expf((v) - (m))
#endif

#if HK_ROW_OP == 1
HK_GLOBAL void HK_ROW_BOUNDS HK_NAME(const HK_T *x, const HK_T *gamma, const HK_T *beta, HK_T *out,
                                     long long rows, long long cols, float eps) {
#elif HK_ROW_OP == 2
HK_GLOBAL void HK_ROW_BOUNDS HK_NAME(const HK_T *x, const HK_T *gamma, HK_T *out, long long rows, long long cols,
                                     float eps) {
#elif HK_ROW_OP == 3
HK_GLOBAL void HK_ROW_BOUNDS HK_NAME(const HK_T *x, HK_T *out, long long rows, long long cols) {
#else
#error "rows_fast.hip: HK_ROW_OP must be 1, 2 or 3"
#endif
  HK_SHARED float red[HK_THREADS / 32];
  const long long nvec = cols / HK_VEC;
  const int g = rf_group(nvec);
  const int lane = HK_TID & (g - 1);
  const int rpb = HK_THREADS / g;
  const long long tiles = (rows + rpb - 1) / rpb;
  const float fcols = (float)cols;
#if HK_ROW_OP != 3
  const rf_vec *gv = (const rf_vec *)gamma;
#endif
#if HK_ROW_OP == 1
  const rf_vec *bv = (const rf_vec *)beta;
#endif

  if (nvec <= (long long)g * HK_ROW_CACHE) {
    /* ---- cached path: one read, one write --------------------------------------------- */
    const int n = (int)nvec;
    for (long long t = HK_BID; t < tiles; t += HK_NBLOCKS) {
      const long long r = t * rpb + HK_TID / g;
      const bool live = r < rows;
      const rf_vec *xr = (const rf_vec *)(x + (live ? r : 0) * cols);
      rf_vec *yr = (rf_vec *)(out + (live ? r : 0) * cols);
      rf_vec c[HK_ROW_CACHE];
#pragma unroll
      for (int k = 0; k < HK_ROW_CACHE; k++) {
        const int j = lane + k * g;
        if (live && j < n) c[k] = xr[j];
        else c[k].w[0] = c[k].w[1] = c[k].w[2] = c[k].w[3] = 0u;
      }
#if HK_ROW_OP == 1
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < HK_ROW_CACHE; k++)
        if (live && lane + k * g < n)
#pragma unroll
          for (int e = 0; e < HK_VEC; e++) s += rf_get(c[k], e);
      const float mean = rf_group_sum(s, red, g) / fcols;
      float q = 0.0f;
#pragma unroll
      for (int k = 0; k < HK_ROW_CACHE; k++)
        if (live && lane + k * g < n)
#pragma unroll
          for (int e = 0; e < HK_VEC; e++) {
            const float d = rf_get(c[k], e) - mean;
            q += d * d;
          }
      const float rstd = 1.0f / sqrtf(rf_group_sum(q, red, g) / fcols + eps);
#pragma unroll
      for (int k = 0; k < HK_ROW_CACHE; k++) {
        const int j = lane + k * g;
        if (live && j < n) {
          const rf_vec gk = gv[j], bk = bv[j];
          float o[HK_VEC];
#pragma unroll
          for (int e = 0; e < HK_VEC; e++) o[e] = (rf_get(c[k], e) - mean) * rstd * rf_get(gk, e) + rf_get(bk, e);
          rf_vec ov;
          rf_set(ov, o);
          yr[j] = ov;
        }
      }
#elif HK_ROW_OP == 2
      float q = 0.0f;
#pragma unroll
      for (int k = 0; k < HK_ROW_CACHE; k++)
        if (live && lane + k * g < n)
#pragma unroll
          for (int e = 0; e < HK_VEC; e++) {
            const float v = rf_get(c[k], e);
            q += v * v;
          }
      const float rstd = 1.0f / sqrtf(rf_group_sum(q, red, g) / fcols + eps);
#pragma unroll
      for (int k = 0; k < HK_ROW_CACHE; k++) {
        const int j = lane + k * g;
        if (live && j < n) {
          const rf_vec gk = gv[j];
          float o[HK_VEC];
#pragma unroll
          for (int e = 0; e < HK_VEC; e++) o[e] = rf_get(c[k], e) * rstd * rf_get(gk, e);
          rf_vec ov;
          rf_set(ov, o);
          yr[j] = ov;
        }
      }
#else
      float m = -hk_inf();
#pragma unroll
      for (int k = 0; k < HK_ROW_CACHE; k++)
        if (live && lane + k * g < n)
#pragma unroll
          for (int e = 0; e < HK_VEC; e++) m = fmaxf(m, rf_get(c[k], e));
      const float mx = rf_group_max(m, red, g);
      const float ml = mx * RF_LOG2E;
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < HK_ROW_CACHE; k++)
        if (live && lane + k * g < n)
#pragma unroll
          for (int e = 0; e < HK_VEC; e++) s += RF_EXP(rf_get(c[k], e), mx, ml);
      const float inv = 1.0f / rf_group_sum(s, red, g);
#pragma unroll
      for (int k = 0; k < HK_ROW_CACHE; k++) {
        const int j = lane + k * g;
        if (live && j < n) {
          float o[HK_VEC];
#pragma unroll
          for (int e = 0; e < HK_VEC; e++) o[e] = RF_EXP(rf_get(c[k], e), mx, ml) * inv;
          rf_vec ov;
          rf_set(ov, o);
          yr[j] = ov;
        }
      }
#endif
    }
    return;
  }

  /* ---- streaming path: g == HK_THREADS, one row per block ------------------------------- */
  for (long long r = HK_BID; r < rows; r += HK_NBLOCKS) {
    const rf_vec *xr = (const rf_vec *)(x + r * cols);
    rf_vec *yr = (rf_vec *)(out + r * cols);
#if HK_ROW_OP == 1
    float s = 0.0f;
#pragma unroll 4
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      const rf_vec v = xr[j];
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) s += rf_get(v, e);
    }
    const float mean = rf_group_sum(s, red, HK_THREADS) / fcols;
    float q = 0.0f;
#pragma unroll 4
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      const rf_vec v = xr[j];
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) {
        const float d = rf_get(v, e) - mean;
        q += d * d;
      }
    }
    const float rstd = 1.0f / sqrtf(rf_group_sum(q, red, HK_THREADS) / fcols + eps);
#pragma unroll 2
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      const rf_vec v = xr[j], gk = gv[j], bk = bv[j];
      float o[HK_VEC];
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) o[e] = (rf_get(v, e) - mean) * rstd * rf_get(gk, e) + rf_get(bk, e);
      rf_vec ov;
      rf_set(ov, o);
      yr[j] = ov;
    }
#elif HK_ROW_OP == 2
    float q = 0.0f;
#pragma unroll 4
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      const rf_vec v = xr[j];
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) {
        const float f = rf_get(v, e);
        q += f * f;
      }
    }
    const float rstd = 1.0f / sqrtf(rf_group_sum(q, red, HK_THREADS) / fcols + eps);
#pragma unroll 2
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      const rf_vec v = xr[j], gk = gv[j];
      float o[HK_VEC];
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) o[e] = rf_get(v, e) * rstd * rf_get(gk, e);
      rf_vec ov;
      rf_set(ov, o);
      yr[j] = ov;
    }
#else
    /* online max and rescaled sum in one pass, then one write pass */
    float m = -hk_inf(), s = 0.0f;
#pragma unroll 4
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      const rf_vec v = xr[j];
      float vm = m;
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) vm = fmaxf(vm, rf_get(v, e));
      if (vm > m) {
        s *= expf(m - vm); /* m = -inf: s is 0 and expf(-inf) = 0 */
        m = vm;
      }
      const float mlv = m * RF_LOG2E;
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) s += RF_EXP(rf_get(v, e), m, mlv);
    }
    const float mx = rf_group_max(m, red, HK_THREADS);
    /* this thread's sum relative to the row max (threads that saw nothing have s = 0) */
    const float sc = s == 0.0f ? 0.0f : s * expf(m - mx);
    const float inv = 1.0f / rf_group_sum(sc, red, HK_THREADS);
    const float ml = mx * RF_LOG2E;
#pragma unroll 2
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      const rf_vec v = xr[j];
      float o[HK_VEC];
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) o[e] = RF_EXP(rf_get(v, e), mx, ml) * inv;
      rf_vec ov;
      rf_set(ov, o);
      yr[j] = ov;
    }
#endif
  }
}
