/* SPDX-License-Identifier: Apache-2.0 */
/* attention: out = softmax(q k^T * scale, causal mask) v per (batch, head), like
 * torch.nn.functional.scaled_dot_product_attention on head-split tensors.
 * Args: T q, T k, T v, T out, I batch, I seq_q, I seq_kv, I heads, I kv_heads, I dh,
 *       I ld_q, I ld_kv, I q_col, I k_col, I v_col, I causal, F scale.
 * Row r of q starts at q + r*ld_q; head h reads columns q_col + h*dh .. + dh (k and v
 * likewise with ld_kv and k_col/v_col), so a packed qkv tensor is passed three times.
 * Grouped-query: q head h reads kv head h / (heads / kv_heads). out is [.., heads*dh].
 * Causal masks key j > query i with both positions counted from 0, also when
 * seq_q != seq_kv (top-left aligned, as SDPA's is_causal); key 0 is never masked.
 * Masked ABI (HK_ATTN_LENGTHS or HK_ATTN_MASK): three more args, I32 lengths (or null),
 * T mask (or null), I mask_heads. Keys j >= lengths[b] (clamped to 0..seq_kv) are masked
 * for every query row; mask[b, h or 0, i, j] is added to the scaled score. A row with no
 * key left (length 0, or a mask of -inf everywhere) outputs zeros.
 *
 * A block is a tile of HK_ATTN_QT query rows of one head: block = (b * heads + h) * q_tiles +
 * t, q_tiles = ceil(seq_q / HK_ATTN_QT) (codegen_host.c's launch). Flash-attention style, no
 * score matrix beyond one chunk: per chunk of HK_ATTN_KB keys, S = Q K^T (the tile's rows
 * against the chunk's keys), an online softmax per row (one rescale of the row's output per
 * chunk), then O += P V; O / l is rounded once into out. The two products run through sgemm
 * where libhkrt bound OpenBLAS (prelude.h's hk_blas), else through prelude.h's hk_mm_nt /
 * hk_mm_nn loops; f32 operands are read in place, f16 and bf16 ones converted into f32
 * copies first. The f32 copies and sums live on the heap (one allocation per call); where it
 * cannot be had, each query row runs alone with its state on the stack (hk_attn_row below). */
#ifndef HK_ATTN_LENGTHS
#define HK_ATTN_LENGTHS 0
#endif
#ifndef HK_ATTN_MASK
#define HK_ATTN_MASK 0
#endif
#define HK_ATTN_CAT2(a, b) a##b
#define HK_ATTN_CAT(a, b) HK_ATTN_CAT2(a, b)

/* Query row qr (one head) against keys [0, n_keys) of kb / vb into yr: the fallback, state
 * on the stack (HK_ATTN_KB scores, HK_ATTN_DC output columns at a time; scores recomputed
 * per column chunk when dh > HK_ATTN_DC). mr: the row's additive mask, or NULL. */
static void HK_ATTN_CAT(HK_NAME, _row)(const HK_T *qr, const HK_T *kb, const HK_T *vb, HK_T *yr, int64_t n_keys,
                                       int64_t dh, int64_t ld_kv, float scale, const HK_T *mr) {
  const int q_buffered = dh <= HK_ATTN_DC;
  float qf[HK_ATTN_DC], s[HK_ATTN_KB], acc[HK_ATTN_DC];
  (void)mr;
  if (q_buffered)
    for (int64_t d = 0; d < dh; d++) qf[d] = HK_LOAD(qr[d]);
  for (int64_t d0 = 0; d0 < dh; d0 += HK_ATTN_DC) {
    const int64_t dc = hk_min_i64(HK_ATTN_DC, dh - d0);
    float m = -INFINITY, l = 0.0f;
    for (int64_t d = 0; d < dc; d++) acc[d] = 0.0f;
    for (int64_t j0 = 0; j0 < n_keys; j0 += HK_ATTN_KB) {
      const int64_t jb = hk_min_i64(HK_ATTN_KB, n_keys - j0);
      float cm = -INFINITY;
      for (int64_t jj = 0; jj < jb; jj++) {
        const HK_T *kr = kb + (j0 + jj) * ld_kv;
        float dot = 0.0f;
        if (q_buffered)
          for (int64_t d = 0; d < dh; d++) dot += qf[d] * HK_LOAD(kr[d]);
        else
          for (int64_t d = 0; d < dh; d++) dot += HK_LOAD(qr[d]) * HK_LOAD(kr[d]);
        s[jj] = dot * scale;
#if HK_ATTN_MASK
        if (mr) s[jj] += HK_LOAD(mr[j0 + jj]);
#endif
        cm = fmaxf(cm, s[jj]);
      }
      if (cm > m) { /* new running max: rescale what was accumulated so far */
        const float r = hk_exp(m - cm);
        l *= r;
        for (int64_t d = 0; d < dc; d++) acc[d] *= r;
        m = cm;
      }
      for (int64_t jj = 0; jj < jb; jj++) {
        const float p = m == -INFINITY ? 0.0f : hk_exp(s[jj] - m); /* nothing unmasked yet */
        const HK_T *vr = vb + (j0 + jj) * ld_kv + d0;
        l += p;
        for (int64_t d = 0; d < dc; d++) acc[d] += p * HK_LOAD(vr[d]);
      }
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f; /* no key: zeros */
    for (int64_t d = 0; d < dc; d++) yr[d0 + d] = HK_STORE(acc[d] * inv);
  }
}

/* rows x dh elements of src (row stride ld) as f32 into dst (row stride dh) */
static void HK_ATTN_CAT(HK_NAME, _load)(float *restrict dst, const HK_T *restrict src, int64_t rows, int64_t dh,
                                        int64_t ld) {
  for (int64_t r = 0; r < rows; r++) HK_LOAD_ROW16(dst + r * dh, src + r * ld, dh);
}

HK_KERNEL void HK_NAME(void *const *args, uint32_t block_begin, uint32_t block_end) {
  const HK_T *q = (const HK_T *)hk_arg_ptr(args, 0);
  const HK_T *k = (const HK_T *)hk_arg_ptr(args, 1);
  const HK_T *v = (const HK_T *)hk_arg_ptr(args, 2);
  HK_T *out = (HK_T *)hk_arg_ptr(args, 3);
  const int64_t batch = hk_arg_i64(args, 4), seq_q = hk_arg_i64(args, 5), seq_kv = hk_arg_i64(args, 6);
  const int64_t heads = hk_arg_i64(args, 7), kv_heads = hk_arg_i64(args, 8), dh = hk_arg_i64(args, 9);
  const int64_t ld_q = hk_arg_i64(args, 10), ld_kv = hk_arg_i64(args, 11);
  const int64_t q_col = hk_arg_i64(args, 12), k_col = hk_arg_i64(args, 13), v_col = hk_arg_i64(args, 14);
  const int causal = hk_arg_i64(args, 15) != 0;
  const float scale = hk_arg_f32(args, 16);
#if HK_ATTN_LENGTHS || HK_ATTN_MASK
  const int32_t *lengths = (const int32_t *)hk_arg_ptr(args, 17);
  const HK_T *mask = (const HK_T *)hk_arg_ptr(args, 18);
  const int64_t mask_heads = hk_arg_i64(args, 19);
  (void)lengths, (void)mask, (void)mask_heads; /* the flags say which are read */
#endif
  const int64_t group = kv_heads > 0 && heads >= kv_heads ? heads / kv_heads : 1;
  const int64_t q_tiles = (seq_q + HK_ATTN_QT - 1) / HK_ATTN_QT;
  const int64_t n_blocks = batch * heads * q_tiles;
  if (dh < 1 || (int64_t)block_begin >= n_blocks) return;
  /* f32 operands are read where they lie; others are converted into copies (qf, kf, vf) */
  const int copies = sizeof(HK_T) != sizeof(float);
  const size_t n_floats = (size_t)HK_ATTN_QT * (size_t)HK_ATTN_KB + 2 * (size_t)HK_ATTN_QT +
                          (size_t)(HK_ATTN_QT + (copies ? HK_ATTN_QT + 2 * HK_ATTN_KB : 0)) * (size_t)dh;
  float *const work = dh <= (INT32_MAX / 4) / HK_ATTN_KB ? (float *)malloc(n_floats * sizeof(float)) : NULL;
  /* scores [QT][KB], running max and sum [QT], output sums [QT][dh], then the copies of a
   * query tile [QT][dh] and of a chunk's keys and values [KB][dh] */
  float *sc = NULL, *m = NULL, *l = NULL, *o = NULL, *qf = NULL, *kf = NULL, *vf = NULL;
  if (work) {
    sc = work;
    memset(sc, 0, (size_t)HK_ATTN_QT * HK_ATTN_KB * sizeof(float)); /* every score finite before its first use */
    m = sc + HK_ATTN_QT * HK_ATTN_KB;
    l = m + HK_ATTN_QT;
    o = l + HK_ATTN_QT;
    if (copies) {
      qf = o + HK_ATTN_QT * dh;
      kf = qf + HK_ATTN_QT * dh;
      vf = kf + HK_ATTN_KB * dh;
    }
  }

  for (int64_t blk = block_begin; blk < (int64_t)block_end && blk < n_blocks; blk++) {
    const int64_t i0 = blk % q_tiles * HK_ATTN_QT, h = blk / q_tiles % heads, b = blk / q_tiles / heads;
    const int64_t qt = hk_min_i64(HK_ATTN_QT, seq_q - i0);
    const HK_T *qt_ptr = q + (b * seq_q + i0) * ld_q + q_col + h * dh;
    const HK_T *kb = k + b * seq_kv * ld_kv + k_col + h / group * dh;
    const HK_T *vb = v + b * seq_kv * ld_kv + v_col + h / group * dh;
    HK_T *yt = out + (b * seq_q + i0) * heads * dh + h * dh;
    int64_t kv_len = seq_kv;
#if HK_ATTN_LENGTHS
    if (lengths) kv_len = lengths[b] < 0 ? 0 : hk_min_i64(lengths[b], seq_kv);
#endif
#if HK_ATTN_MASK
    const HK_T *mt = mask ? mask + ((b * mask_heads + (mask_heads > 1 ? h : 0)) * seq_q + i0) * seq_kv : NULL;
#else
    const HK_T *mt = NULL;
#endif
    if (!work) { /* no heap: row by row */
      for (int64_t i = 0; i < qt; i++)
        HK_ATTN_CAT(HK_NAME, _row)(qt_ptr + i * ld_q, kb, vb, yt + i * heads * dh,
                                   causal ? hk_min_i64(kv_len, i0 + i + 1) : kv_len, dh, ld_kv, scale,
                                   mt ? mt + i * seq_kv : NULL);
      continue;
    }
    /* keys any row of the tile sees */
    const int64_t n_keys = causal ? hk_min_i64(kv_len, i0 + qt) : kv_len;
    const float *qs = (const float *)(const void *)qt_ptr;
    int64_t ldqs = ld_q;
    if (copies) {
      HK_ATTN_CAT(HK_NAME, _load)(qf, qt_ptr, qt, dh, ld_q);
      qs = qf;
      ldqs = dh;
    }
    for (int64_t i = 0; i < qt; i++) {
      m[i] = -INFINITY;
      l[i] = 0.0f;
    }
    memset(o, 0, (size_t)qt * (size_t)dh * sizeof(float));
    for (int64_t j0 = 0; j0 < n_keys; j0 += HK_ATTN_KB) {
      const int64_t jb = hk_min_i64(HK_ATTN_KB, n_keys - j0);
      const float *ks = (const float *)(const void *)(kb + j0 * ld_kv);
      const float *vs = (const float *)(const void *)(vb + j0 * ld_kv);
      int64_t ldkv = ld_kv;
      if (copies) {
        HK_ATTN_CAT(HK_NAME, _load)(kf, kb + j0 * ld_kv, jb, dh, ld_kv);
        HK_ATTN_CAT(HK_NAME, _load)(vf, vb + j0 * ld_kv, jb, dh, ld_kv);
        ks = kf;
        vs = vf;
        ldkv = dh;
      }
      hk_mm_nt(qt, jb, dh, qs, ldqs, ks, ldkv, sc, HK_ATTN_KB); /* S = Q K^T */
      for (int64_t i = 0; i < qt; i++) {
        float *restrict s = sc + i * HK_ATTN_KB;
        /* keys of row i: [0, limit); the row's scores past them (and past jb: stale but finite)
         * become -inf, so that the loops below run over all HK_ATTN_KB columns */
        const int64_t limit = causal ? hk_min_i64(kv_len, i0 + i + 1) : kv_len;
        const int64_t live = hk_min_i64(jb, limit - j0); /* may be <= 0 */
        for (int j = 0; j < HK_ATTN_KB; j++) s[j] = j < live ? s[j] * scale : -INFINITY;
#if HK_ATTN_MASK
        if (mt)
          for (int64_t j = 0; j < live; j++) s[j] += HK_LOAD(mt[i * seq_kv + j0 + j]);
#endif
        float lane[8];
        for (int t = 0; t < 8; t++) lane[t] = -INFINITY;
        for (int j = 0; j < HK_ATTN_KB; j += 8)
          for (int t = 0; t < 8; t++) lane[t] = s[j + t] > lane[t] ? s[j + t] : lane[t]; /* NaN: skipped */
        float cm = lane[0];
        for (int t = 1; t < 8; t++) cm = lane[t] > cm ? lane[t] : cm;
        float *restrict orow = o + i * dh;
        if (cm > m[i]) { /* new running max: rescale the row's output so far */
          const float r = hk_exp(m[i] - cm);
          l[i] *= r;
          for (int64_t d = 0; d < dh; d++) orow[d] *= r;
          m[i] = cm;
        }
        if (m[i] == -INFINITY) { /* nothing unmasked yet */
          memset(s, 0, HK_ATTN_KB * sizeof(float));
          continue;
        }
        const float mi = m[i];
        for (int t = 0; t < 8; t++) lane[t] = 0.0f;
        for (int j = 0; j < HK_ATTN_KB; j += 8)
          for (int t = 0; t < 8; t++) {
            const float p = hk_exp(s[j + t] - mi);
            s[j + t] = p;
            lane[t] += p;
          }
        l[i] += hk_sum8(lane);
      }
      hk_mm_nn_acc(qt, dh, jb, sc, HK_ATTN_KB, vs, ldkv, o, dh); /* O += P V */
    }
    for (int64_t i = 0; i < qt; i++) {
      const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f; /* no key: zeros */
      const float *restrict orow = o + i * dh;
      HK_T *restrict yr = yt + i * heads * dh;
      for (int64_t d = 0; d < dh; d++) yr[d] = HK_STORE(orow[d] * inv);
    }
  }
  free(work);
}
#undef HK_ATTN_CAT
#undef HK_ATTN_CAT2
