/* SPDX-License-Identifier: Apache-2.0 */
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
 *   HK_ROW_TARGET     vectors per thread the group size aims at (<= HK_ROW_CACHE)
 *   HK_ROW_MIN_BLOCKS blocks per SM asked of ptxas (NVIDIA __launch_bounds__)
 *   HK_ROW_PREFETCH   1: the next row's vectors are loaded before this row's reductions
 *   HK_ROW_GRID_PER_CU blocks per CU/SM the launch makes at most (persistent grid)
 *   HK_ROW_UNITS      the target's SMs / CUs (rf_group widens groups of few rows to cover them)
 *   HK_ROW_FAST_EXP   softmax: exp(x - m) as exp2f(x*log2e - m*log2e) (f16/bf16 outputs)
 *   HK_WAVE           lanes per warp / wavefront (32 NVIDIA and RDNA, 64 CDNA)
 *   HK_HAS_ADD, HK_HAS_SUM  layernorm / rmsnorm with the fused residual add (args
 *                     ..., T add, T sum): the row normalised is v = x + add in f32 (statistics
 *                     and output from the f32 sum), with HK_HAS_SUM also stored, rounded to
 *                     the dtype, into sum (16-byte stores). The variant then halves
 *                     HK_ROW_CACHE / HK_ROW_TARGET (two input rows per thread: same bytes in
 *                     flight, and the f32 sums take the registers of the 16-bit pairs).
 *                     HK_HAS_SUM alone stores a copy of x.
 *
 * Work split. A row of nvec = cols / HK_VEC vectors belongs to a group of g lanes, g the
 * smallest power of two >= ceil(nvec / HK_ROW_TARGET), doubled while the rows would not
 * cover the SMs (up to one vector per lane), at most HK_THREADS (rf_group; the launch in
 * variant_rows.c uses the same rule). A block holds HK_THREADS / g rows (a
 * "tile"); blocks stride over tiles (the grid is persistent: at most HK_ROW_GRID_PER_CU
 * blocks per CU), so any grid covers every row. Group lane l owns the vectors l, l + g,
 * l + 2g, ... of its row (each k-th load of a group is one contiguous, coalesced span).
 *  - cached path, nvec <= g * HK_ROW_CACHE: the row's vectors are loaded once into
 *    registers, all issued before any math; statistics come from the registers
 *    (layernorm: mean, then the centred sum of squares: no cancellation; softmax: each
 *    lane's max and its sum of exp relative to it, one joint (max, sum) reduction); the
 *    output is written once: one read, one write. With HK_ROW_PREFETCH the loads of the
 *    group's next row are issued at the top of each iteration, before this row's math and
 *    reductions (software pipelining across rows; two register copies of a row).
 *  - streaming path (only when g == HK_THREADS, one row per block, very long rows): the
 *    same statistics in passes over memory (layernorm 3 reads, rmsnorm and softmax 2);
 *    each thread touches only its own vectors in every pass, so out may alias x.
 * Reductions: xor shuffles inside groups of up to HK_WAVE lanes (a whole warp or
 * wavefront: no shared memory, no barrier), then shared memory across the waves of groups
 * larger than one wave. Every thread of the block takes part in every reduction (rows
 * past the end are computed on nothing and not stored; the tile loop is uniform over the
 * block), so shuffles see full warps and barriers are uniform. Statistics in f32. */

#if defined(__CUDA_ARCH__)
#define HK_ROW_BOUNDS __launch_bounds__(HK_THREADS, HK_ROW_MIN_BLOCKS)
#else
#define HK_ROW_BOUNDS HK_LAUNCH_BOUNDS(HK_THREADS)
#endif

#ifndef HK_ROW_PREFETCH
#define HK_ROW_PREFETCH 0
#endif
#define RF_C HK_ROW_CACHE
#if HK_ROW_OP != 3 && defined(HK_HAS_ADD) && HK_HAS_ADD
#define RF_ADD 1
#else
#define RF_ADD 0
#endif
#if HK_ROW_OP != 3 && defined(HK_HAS_SUM) && HK_HAS_SUM
#define RF_SUM 1
#else
#define RF_SUM 0
#endif
#define RF_W HK_WAVE /* lanes one shuffle reduction spans */
#if HK_THREADS % RF_W != 0 || RF_W > 64 || (RF_W & (RF_W - 1)) != 0
#error "rows_fast.hip: HK_THREADS must be a multiple of the wave, a power of two <= 64"
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

/* The row values the cached path computes on: the loaded vectors themselves, or with
 * RF_ADD the f32 sums x + add (rf_fold). rf_cget reads element e of either. */
struct rf_fvec {
  float f[HK_VEC];
};
HK_DEVICE float rf_cget(const rf_vec &v, int e) { return rf_get(v, e); }
HK_DEVICE float rf_cget(const rf_fvec &v, int e) { return v.f[e]; }
#if RF_ADD
typedef rf_fvec rf_cvec;
#else
typedef rf_vec rf_cvec;
#endif

/* Group size for rows of nvec vectors (variant_rows.c: rows_group mirrors it): the smallest
 * power of two >= ceil(nvec / HK_ROW_TARGET); then, while the blocks (HK_THREADS / g rows
 * each) would not cover HK_ROW_UNITS SMs / CUs, twice as many lanes per row (fewer vectors
 * each), up to one vector per lane -- a few rows (128 x 768 at batch 1) run on 64 SMs with
 * short per-lane chains instead of on 8 with long ones. */
HK_DEVICE int rf_group(long long nvec, long long rows) {
  const long long want = (nvec + HK_ROW_TARGET - 1) / HK_ROW_TARGET;
  int g = 1;
  while (g < HK_THREADS && g < want) g <<= 1;
  /* ceil(rows / (HK_THREADS / g)) < HK_ROW_UNITS, without a division */
  while (g < HK_THREADS && g < nvec && rows <= (long long)(HK_THREADS / g) * (HK_ROW_UNITS - 1)) g <<= 1;
  return g;
}

#define RF_LOG2E 1.4426950408889634f
#if HK_ROW_FAST_EXP
/* exp(v - m) with ml = m * log2e: one fma and the hardware exp2 (2 ulp); for 16-bit outputs */
#define RF_EXP(v, m, ml) exp2f(fmaf((v), RF_LOG2E, -(ml)))
#else
#define RF_EXP(v, m, ml) expf((v) - (m))
#endif

/* Sum / max over the g lanes of this thread's group (g a power of two <= HK_THREADS,
 * uniform over the block; G: g when known at compile time, else 0). red: at least
 * 2 * HK_THREADS / RF_W floats; back-to-back calls are ordered by the leading barrier. */
template <int G>
HK_DEVICE float rf_group_sum(float v, float *red, int g) {
  if (G) g = G;
  const int lim = g < RF_W ? g : RF_W;
#pragma unroll
  for (int o = RF_W >> 1; o > 0; o >>= 1)
    if (o < lim) v += hk_shfl_xor(v, o);
  if (g <= RF_W) return v;
  HK_SYNC();
  if ((HK_TID & (RF_W - 1)) == 0) red[HK_TID / RF_W] = v;
  HK_SYNC();
  const int base = (HK_TID & ~(g - 1)) / RF_W;
  float s = 0.0f;
  for (int i = 0; i < g / RF_W; i++) s += red[base + i];
  return s;
}

template <int G>
HK_DEVICE float rf_group_max(float v, float *red, int g) {
  if (G) g = G;
  const int lim = g < RF_W ? g : RF_W;
#pragma unroll
  for (int o = RF_W >> 1; o > 0; o >>= 1)
    if (o < lim) v = fmaxf(v, hk_shfl_xor(v, o));
  if (g <= RF_W) return v;
  HK_SYNC();
  if ((HK_TID & (RF_W - 1)) == 0) red[HK_TID / RF_W] = v;
  HK_SYNC();
  const int base = (HK_TID & ~(g - 1)) / RF_W;
  float m = -hk_inf();
  for (int i = 0; i < g / RF_W; i++) m = fmaxf(m, red[base + i]);
  return m;
}

/* s * exp(m - M) for a partial softmax sum s taken relative to m (M >= m the new max);
 * s == 0 (nothing seen, or only -inf) stays 0 instead of 0 * exp(-inf - -inf) = NaN. */
HK_DEVICE float rf_rescale(float s, float m, float M) { return s == 0.0f ? 0.0f : s * RF_EXP(m, M, M * RF_LOG2E); }

/* Joint (max, sum of exp relative to the max) over the group: m, s in/out. The combine is
 * commutative (fmaxf; a + b), so every lane of a group ends with the same bits. */
template <int G>
HK_DEVICE void rf_group_maxsum(float &m, float &s, float *red, int g) {
  if (G) g = G;
  const int lim = g < RF_W ? g : RF_W;
#pragma unroll
  for (int o = RF_W >> 1; o > 0; o >>= 1)
    if (o < lim) {
      const float mo = hk_shfl_xor(m, o), so = hk_shfl_xor(s, o);
      const float M = fmaxf(m, mo);
      s = rf_rescale(s, m, M) + rf_rescale(so, mo, M);
      m = M;
    }
  if (g <= RF_W) return;
  const int nw = HK_THREADS / RF_W;
  HK_SYNC();
  if ((HK_TID & (RF_W - 1)) == 0) {
    red[HK_TID / RF_W] = m;
    red[nw + HK_TID / RF_W] = s;
  }
  HK_SYNC();
  const int base = (HK_TID & ~(g - 1)) / RF_W;
  float M = -hk_inf();
  for (int i = 0; i < g / RF_W; i++) M = fmaxf(M, red[base + i]);
  float S = 0.0f;
  for (int i = 0; i < g / RF_W; i++) S += rf_rescale(red[nw + base + i], red[base + i], M);
  m = M;
  s = S;
}

/* This lane's vectors of row r (lane + k*g < n; zero where not live or past the row). */
HK_DEVICE void rf_load_row(rf_vec (&c)[RF_C], const rf_vec *xv, long long r, long long nvec, int lane, int g,
                           bool live) {
  const rf_vec *xr = xv + (live ? r : 0) * nvec;
#pragma unroll
  for (int k = 0; k < RF_C; k++) {
    const int j = lane + k * g;
    if (live && j < nvec) c[k] = xr[j];
    else c[k].w[0] = c[k].w[1] = c[k].w[2] = c[k].w[3] = 0u;
  }
}

/* RF_ADD: v = x + add per element, in f32. */
HK_DEVICE void rf_fold(rf_fvec (&v)[RF_C], const rf_vec (&c)[RF_C], const rf_vec (&ca)[RF_C]) {
#pragma unroll
  for (int k = 0; k < RF_C; k++)
#pragma unroll
    for (int e = 0; e < HK_VEC; e++) v[k].f[e] = rf_get(c[k], e) + rf_get(ca[k], e);
}

/* RF_SUM: stores this lane's values of row r, rounded to the dtype, into sum. */
HK_DEVICE void rf_vset(rf_vec &o, const rf_vec &v) { o = v; }
HK_DEVICE void rf_vset(rf_vec &o, const rf_fvec &v) { rf_set(o, v.f); }
HK_DEVICE void rf_store_sum(rf_vec *sv, const rf_cvec (&v)[RF_C], long long r, int n, int lane, int g, bool live) {
  rf_vec *sr = sv + (live ? r : 0) * n;
#pragma unroll
  for (int k = 0; k < RF_C; k++) {
    const int j = lane + k * g;
    if (live && j < n) {
      rf_vec o;
      rf_vset(o, v[k]);
      sr[j] = o;
    }
  }
}

/* ---- cached path: one read, one write per element ------------------------------------ */
/* Sum of HK_VEC partial sums, pairwise. */
HK_DEVICE float rf_add(const float (&a)[HK_VEC]) {
#if HK_VEC == 8
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
#else
  return (a[0] + a[1]) + (a[2] + a[3]);
#endif
}

template <int G>
HK_DEVICE void rf_cached(const HK_T *x, const HK_T *gamma, const HK_T *beta, HK_T *out, const HK_T *add, HK_T *sum,
                         long long rows, long long nvec, float fcols, float eps, int g, float *red) {
  if (G) g = G;
  const int n = (int)nvec;
  const int lane = HK_TID & (g - 1);
  const int gi = HK_TID / g;
  const int rpb = HK_THREADS / g;
  const long long tiles = (rows + rpb - 1) / rpb;
  const rf_vec *xv = (const rf_vec *)x;
  rf_vec *ov = (rf_vec *)out;
  const rf_vec *gv = (const rf_vec *)gamma;
  const rf_vec *bv = (const rf_vec *)beta;
  const rf_vec *av = (const rf_vec *)add;
  rf_vec *sv = (rf_vec *)sum;
  (void)gv;
  (void)bv;
  (void)av;
  (void)sv;
  (void)eps;
  rf_vec c[RF_C];
#if RF_ADD
  rf_vec ca[RF_C];
#endif
#if HK_ROW_PREFETCH
  rf_vec nx[RF_C];
#if RF_ADD
  rf_vec na[RF_C];
#endif
  {
    const long long r0 = HK_BID * rpb + gi;
    rf_load_row(nx, xv, r0, nvec, lane, g, HK_BID < tiles && r0 < rows);
#if RF_ADD
    rf_load_row(na, av, r0, nvec, lane, g, HK_BID < tiles && r0 < rows);
#endif
  }
#endif
  for (long long t = HK_BID; t < tiles; t += HK_NBLOCKS) {
    const long long r = t * rpb + gi;
    const bool live = r < rows;
#if HK_ROW_PREFETCH
#pragma unroll
    for (int k = 0; k < RF_C; k++) c[k] = nx[k];
#if RF_ADD
#pragma unroll
    for (int k = 0; k < RF_C; k++) ca[k] = na[k];
#endif
    {
      const long long t2 = t + HK_NBLOCKS, r2 = t2 * rpb + gi;
      rf_load_row(nx, xv, r2, nvec, lane, g, t2 < tiles && r2 < rows);
#if RF_ADD
      rf_load_row(na, av, r2, nvec, lane, g, t2 < tiles && r2 < rows);
#endif
    }
#else
    rf_load_row(c, xv, r, nvec, lane, g, live);
#if RF_ADD
    rf_load_row(ca, av, r, nvec, lane, g, live);
#endif
#endif
#if RF_ADD
    rf_fvec cv[RF_C];
    rf_fold(cv, c, ca);
#else
    const rf_vec(&cv)[RF_C] = c;
#endif
#if RF_SUM
    rf_store_sum(sv, cv, r, n, lane, g, live);
#endif
    rf_vec *yr = ov + (live ? r : 0) * nvec;
#if HK_ROW_OP == 1
    float a[HK_VEC]; /* HK_VEC independent accumulators: short dependency chains */
#pragma unroll
    for (int e = 0; e < HK_VEC; e++) a[e] = 0.0f;
#pragma unroll
    for (int k = 0; k < RF_C; k++)
      if (live && lane + k * g < n)
#pragma unroll
        for (int e = 0; e < HK_VEC; e++) a[e] += rf_cget(cv[k], e);
    const float mean = rf_group_sum<G>(rf_add(a), red, g) / fcols;
#pragma unroll
    for (int e = 0; e < HK_VEC; e++) a[e] = 0.0f;
#pragma unroll
    for (int k = 0; k < RF_C; k++)
      if (live && lane + k * g < n)
#pragma unroll
        for (int e = 0; e < HK_VEC; e++) {
          const float d = rf_cget(cv[k], e) - mean;
          a[e] = fmaf(d, d, a[e]);
        }
    const float rstd = 1.0f / sqrtf(rf_group_sum<G>(rf_add(a), red, g) / fcols + eps);
#pragma unroll
    for (int k = 0; k < RF_C; k++) {
      const int j = lane + k * g;
      if (live && j < n) {
        const rf_vec gk = gv[j], bk = bv[j];
        float o[HK_VEC];
#pragma unroll
        for (int e = 0; e < HK_VEC; e++) o[e] = (rf_cget(cv[k], e) - mean) * rstd * rf_get(gk, e) + rf_get(bk, e);
        rf_vec v;
        rf_set(v, o);
        yr[j] = v;
      }
    }
#elif HK_ROW_OP == 2
    float a[HK_VEC]; /* HK_VEC independent accumulators: short dependency chains */
#pragma unroll
    for (int e = 0; e < HK_VEC; e++) a[e] = 0.0f;
#pragma unroll
    for (int k = 0; k < RF_C; k++)
      if (live && lane + k * g < n)
#pragma unroll
        for (int e = 0; e < HK_VEC; e++) {
          const float v = rf_cget(cv[k], e);
          a[e] = fmaf(v, v, a[e]);
        }
    const float rstd = 1.0f / sqrtf(rf_group_sum<G>(rf_add(a), red, g) / fcols + eps);
#pragma unroll
    for (int k = 0; k < RF_C; k++) {
      const int j = lane + k * g;
      if (live && j < n) {
        const rf_vec gk = gv[j];
        float o[HK_VEC];
#pragma unroll
        for (int e = 0; e < HK_VEC; e++) o[e] = rf_cget(cv[k], e) * rstd * rf_get(gk, e);
        rf_vec v;
        rf_set(v, o);
        yr[j] = v;
      }
    }
#else
    /* this lane's max, its sum of exp relative to it, then one joint reduction */
    float a[HK_VEC]; /* HK_VEC independent accumulators: short dependency chains */
#pragma unroll
    for (int e = 0; e < HK_VEC; e++) a[e] = -hk_inf();
#pragma unroll
    for (int k = 0; k < RF_C; k++)
      if (live && lane + k * g < n)
#pragma unroll
        for (int e = 0; e < HK_VEC; e++) a[e] = fmaxf(a[e], rf_cget(cv[k], e));
    float m = a[0];
#pragma unroll
    for (int e = 1; e < HK_VEC; e++) m = fmaxf(m, a[e]);
    float s = 0.0f;
    if (m != -hk_inf()) { /* a lane of only -inf (or nothing) adds 0, not exp(-inf + inf) */
      const float ml = m * RF_LOG2E;
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) a[e] = 0.0f;
#pragma unroll
      for (int k = 0; k < RF_C; k++)
        if (live && lane + k * g < n)
#pragma unroll
          for (int e = 0; e < HK_VEC; e++) a[e] += RF_EXP(rf_cget(cv[k], e), m, ml);
      s = rf_add(a);
    }
    rf_group_maxsum<G>(m, s, red, g);
    const float inv = 1.0f / s, ml = m * RF_LOG2E;
#pragma unroll
    for (int k = 0; k < RF_C; k++) {
      const int j = lane + k * g;
      if (live && j < n) {
        float o[HK_VEC];
#pragma unroll
        for (int e = 0; e < HK_VEC; e++) o[e] = RF_EXP(rf_cget(cv[k], e), m, ml) * inv;
        rf_vec v;
        rf_set(v, o);
        yr[j] = v;
      }
    }
#endif
  }
}

/* Streaming path: the values of vector j of a row (x, or with RF_ADD x + add in f32);
 * store: with RF_SUM also write them, rounded, to the sum row (first pass only). */
HK_DEVICE void rf_stream_vals(const rf_vec *xr, const rf_vec *ar, rf_vec *sr, long long j, bool store,
                              float (&v)[HK_VEC]) {
  const rf_vec xv = xr[j];
#if RF_ADD
  const rf_vec av = ar[j];
#pragma unroll
  for (int e = 0; e < HK_VEC; e++) v[e] = rf_get(xv, e) + rf_get(av, e);
#else
  (void)ar;
#pragma unroll
  for (int e = 0; e < HK_VEC; e++) v[e] = rf_get(xv, e);
#endif
#if RF_SUM
  if (store) {
    rf_vec o;
    rf_set(o, v);
    sr[j] = o;
  }
#else
  (void)sr;
  (void)store;
#endif
}

#if HK_ROW_OP == 1
HK_GLOBAL void HK_ROW_BOUNDS HK_NAME(const HK_T *x, const HK_T *gamma, const HK_T *beta, HK_T *out,
                                     long long rows, long long cols, float eps, const HK_T *add, HK_T *sum) {
#elif HK_ROW_OP == 2
HK_GLOBAL void HK_ROW_BOUNDS HK_NAME(const HK_T *x, const HK_T *gamma, HK_T *out, long long rows, long long cols,
                                     float eps, const HK_T *add, HK_T *sum) {
  const HK_T *beta = gamma; /* unused */
#elif HK_ROW_OP == 3
HK_GLOBAL void HK_ROW_BOUNDS HK_NAME(const HK_T *x, HK_T *out, long long rows, long long cols) {
  const HK_T *gamma = x, *beta = x; /* unused */
  const HK_T *add = x; /* unused */
  HK_T *sum = out;     /* unused */
  const float eps = 0.0f;
#else
#error "rows_fast.hip: HK_ROW_OP must be 1, 2 or 3"
#endif
  HK_PDL_ENTRY(); /* rows_vec16 is a pdl variant: nothing is touched before it */
  HK_SHARED float red[2 * HK_THREADS / RF_W];
  const long long nvec = cols / HK_VEC;
  const int g = rf_group(nvec, rows);
  const float fcols = (float)cols;

  if (nvec <= (long long)g * RF_C) {
    /* one warp / wavefront per row: every shuffle and index known at compile time */
    if (g == RF_W) rf_cached<RF_W>(x, gamma, beta, out, add, sum, rows, nvec, fcols, eps, g, red);
    else rf_cached<0>(x, gamma, beta, out, add, sum, rows, nvec, fcols, eps, g, red);
    return;
  }
#if HK_ROW_OP != 3
  const rf_vec *gv = (const rf_vec *)gamma;
#endif
#if HK_ROW_OP == 1
  const rf_vec *bv = (const rf_vec *)beta;
#endif

  /* ---- streaming path: g == HK_THREADS, one row per block ------------------------------- */
  for (long long r = HK_BID; r < rows; r += HK_NBLOCKS) {
    const rf_vec *xr = (const rf_vec *)(x + r * cols);
    rf_vec *yr = (rf_vec *)(out + r * cols);
#if HK_ROW_OP != 3
    const rf_vec *ar = (const rf_vec *)(add + (RF_ADD ? r * cols : 0));
    rf_vec *sr = (rf_vec *)(sum + (RF_SUM ? r * cols : 0));
    (void)ar;
    (void)sr;
#endif
#if HK_ROW_OP == 1
    float s = 0.0f;
#pragma unroll 4
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      float v[HK_VEC];
      rf_stream_vals(xr, ar, sr, j, true, v);
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) s += v[e];
    }
    const float mean = rf_group_sum<HK_THREADS>(s, red, HK_THREADS) / fcols;
    float q = 0.0f;
#pragma unroll 4
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      float v[HK_VEC];
      rf_stream_vals(xr, ar, sr, j, false, v);
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) {
        const float d = v[e] - mean;
        q += d * d;
      }
    }
    const float rstd = 1.0f / sqrtf(rf_group_sum<HK_THREADS>(q, red, HK_THREADS) / fcols + eps);
#pragma unroll 2
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      const rf_vec gk = gv[j], bk = bv[j];
      float v[HK_VEC], o[HK_VEC];
      rf_stream_vals(xr, ar, sr, j, false, v);
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) o[e] = (v[e] - mean) * rstd * rf_get(gk, e) + rf_get(bk, e);
      rf_vec ov;
      rf_set(ov, o);
      yr[j] = ov;
    }
#elif HK_ROW_OP == 2
    float q = 0.0f;
#pragma unroll 4
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      float v[HK_VEC];
      rf_stream_vals(xr, ar, sr, j, true, v);
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) q += v[e] * v[e];
    }
    const float rstd = 1.0f / sqrtf(rf_group_sum<HK_THREADS>(q, red, HK_THREADS) / fcols + eps);
#pragma unroll 2
    for (long long j = HK_TID; j < nvec; j += HK_THREADS) {
      const rf_vec gk = gv[j];
      float v[HK_VEC], o[HK_VEC];
      rf_stream_vals(xr, ar, sr, j, false, v);
#pragma unroll
      for (int e = 0; e < HK_VEC; e++) o[e] = v[e] * rstd * rf_get(gk, e);
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
    const float mx = rf_group_max<HK_THREADS>(m, red, HK_THREADS);
    /* this thread's sum relative to the row max (threads that saw nothing have s = 0) */
    const float sc = s == 0.0f ? 0.0f : s * expf(m - mx);
    const float inv = 1.0f / rf_group_sum<HK_THREADS>(sc, red, HK_THREADS);
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
