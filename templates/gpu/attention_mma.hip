/* SPDX-License-Identifier: Apache-2.0 */
/* attention_mma: flash-attention-2 style forward on NVIDIA tensor cores (mma.sync
 * m16n8k16, sm_80+), f16/bf16, head dim HK_DH (64 or 128) fixed at build time, every
 * stride, column offset and dh a multiple of 8 elements and the tensors 16-byte aligned
 * (kernel key align 8). Same ABI and semantics as attention.hip (see there and
 * templates/host/attention.c): q [B, Sq, ld_q], k/v [B, Skv, ld_kv], head h at column
 * q_col + h*dh (kv head h / (heads / kv_heads) at k_col/v_col), out [B, Sq, heads*dh],
 * causal masks key j > query i (top-left aligned).
 *
 * Macros from the variant (compiler/variant_attention_nv.c): HK_THREADS = 32 *
 * HK_ATTN_WARPS, HK_ATTN_BQ = 16 * HK_ATTN_WARPS, HK_DH, HK_ATTN_BKV (keys per tile, 64), HK_ATTN_BF16 (0/1),
 * HK_ATTN_MINB (min blocks per SM for __launch_bounds__), HK_ATTN_SMEM (dynamic shared
 * bytes, from launch()).
 *
 * A block is one (batch, head, query tile of HK_ATTN_BQ = 16 * HK_ATTN_WARPS rows);
 * warp w owns query rows 16w .. 16w+15 of the tile. Blocks are numbered (b*heads + h) *
 * q_tiles + tile, so blocks of one head run together and share its K/V in L2; with causal
 * the tiles of a head go heaviest (last) first. grid.x may be smaller than the block
 * count: blocks stride by gridDim.x.
 *
 * Per block:
 *   shared memory: Q [BQ][DH], K [2][BKV][DH], V [2][BKV][DH] (dynamic), each row made
 *     of DH/8 16-byte chunks, chunk c of row r stored at c ^ (r & 7) (XOR swizzle:
 *     ldmatrix and cp.async are conflict-free);
 *   Q fragments (A operand) go to registers once (ldmatrix);
 *   key tiles stream through cp.async double buffers: K[j+1] loads while S = Q K[j]^T
 *     and the softmax run, V[j+1] while O += P V[j] runs;
 *   S = Q K^T with mma.sync (B fragments of K by ldmatrix), online softmax in registers
 *     in the log2 domain (scores times scale*log2(e), ex2.approx), row max/sum across
 *     the lane quad that holds a row; P rounded to f16/bf16 in registers becomes the A
 *     operand of P V (B fragments of V by ldmatrix.trans); O in f32 registers;
 *   masking only where needed: keys >= seq_kv get -inf (tail tile), causal masks only
 *     tiles crossing the warp's diagonal, and key tiles past the diagonal of the whole
 *     query tile are never loaded (per warp: never computed);
 *   epilogue: O / l rounded to HK_T, staged in the warp's own Q rows of shared memory,
 *     stored with 16-byte coalesced writes; rows >= seq_q are not stored.
 *
 * The masked ABI (HK_ATTN_LENGTHS or HK_ATTN_MASK, as attention.hip: three more args,
 * const int *lengths, const T *mask, I mask_heads):
 *   lengths: batch entry b has kv_len = lengths[b] clamped to 0..seq_kv keys, which take
 *     the place of seq_kv in the tile count and the tail mask; kv_len 0 runs no tile and
 *     stores zeros (l = 0);
 *   mask: every tile goes through the masking loop, which adds mask[b, h or 0, i, j] to
 *     the raw score of each unmasked (i < seq_q, j < kv_len) element, times log2(e) / sl2
 *     so that the exponent s * sl2 gains mask * log2(e) in both scale modes (scale 0 in
 *     the dh-64 mode, sl2 = 0: the mask is ignored). A row left with no finite score
 *     stores zeros.
 *
 * Split-KV (HK_ATTN_KVS = S > 1; flash-decoding, for few query tiles over long keys): work
 * unit u = tile S + piece, piece p over the tile's key tiles [n p / S, n (p + 1) / S) (n: the
 * tile's key tiles after causal / lengths, so every piece of a tile agrees). Two more
 * parameters, last: `part`, the launch's scratch (FORMAT.md, SCRATCH), and `sem`, one arrival
 * counter per (batch, head, query tile) (SEMAPHORE, zero at the start, left at zero). A piece
 * stores, for each of its rows < seq_q, the unnormalised f32 O (dh floats at
 * part[((bh S + p) seq_q + i) dh]) and its row max m (log2 domain) and row sum l (two floats
 * at part[B H S seq_q dh + ((bh S + p) seq_q + i) 2]); a row none of the piece's keys reaches
 * stores m = -inf, l = 0, O = 0. Then it arrives on the tile's counter (tile_nv.h, split
 * GEMMs); the last piece merges in piece order 0..S-1 -- M = max m_p, L = sum l_p 2^(m_p - M),
 * O = sum O_p 2^(m_p - M), out = O / L (L = 0: zeros) -- reading every piece, its own
 * included, from scratch: the same bytes whichever piece is last. Warps whose rows are all
 * >= seq_q skip their matrix work (decode: one query row in a 64-row tile).
 *
 * Grouped-query row packing (HK_ATTN_GP = 1, `gp=1`; templates/gpu/attention_gp.h): a tile holds
 * the queries of several query heads of one kv head -- row r is query head h0 + r / qc, query
 * i0 + r % qc -- so each K/V tile loaded serves the whole group (a decode step with 32 query
 * heads over 8 kv heads: 4 rows of one tile instead of 4 tiles of one row each). Each lane keeps
 * its two rows' query indices (-1: a row that holds nothing) for the causal and tail masks,
 * a row pointer into the mask, and the warp's smallest and largest query for the tile-level
 * tests (diagonal, active); Q rows are gathered per row, outputs and the split-KV partials are
 * stored at their (head, query) -- the scratch layout and its merge are the unpacked kernel's,
 * the counters one per packed tile. Warps without a row skip their matrix work.
 */
#ifndef HK_ATTN_LENGTHS
#define HK_ATTN_LENGTHS 0
#endif
#ifndef HK_ATTN_MASK
#define HK_ATTN_MASK 0
#endif
#define HK_ATTN_MASKED (HK_ATTN_LENGTHS || HK_ATTN_MASK)
#ifndef HK_ATTN_KVS
#define HK_ATTN_KVS 1
#endif
#ifndef HK_ATTN_GP
#define HK_ATTN_GP 0
#endif
#ifndef HK_DH
#error "attention_mma: HK_DH (head dim) must be defined"
#endif
#define HK_ATTN_CH (HK_DH / 8)  /* 16-byte chunks per row */
#define HK_ATTN_KS (HK_DH / 16) /* k-steps of Q K^T */
#define HK_ATTN_NT (HK_ATTN_BKV / 8) /* 8-key column tiles of S */
#define HK_ATTN_OT (HK_DH / 8)  /* 8-column tiles of O */
#define HK_ATTN_Q_BYTES (HK_ATTN_BQ * HK_DH * 2)
#define HK_ATTN_KV_BYTES (HK_ATTN_BKV * HK_DH * 2)
#if (HK_DH != 64 && HK_DH != 128) || HK_ATTN_BQ != 16 * HK_ATTN_WARPS || HK_THREADS % (8 * HK_ATTN_CH) != 0 || \
    HK_ATTN_BKV % 16 != 0 || HK_THREADS != 32 * HK_ATTN_WARPS || \
    (HK_ATTN_BQ * HK_ATTN_CH) % HK_THREADS != 0 || (HK_ATTN_BKV * HK_ATTN_CH) % HK_THREADS != 0 || \
    HK_ATTN_SMEM != HK_ATTN_Q_BYTES + 4 * HK_ATTN_KV_BYTES || HK_ATTN_KVS < 1
#error "attention_mma: unsupported tile configuration"
#endif

/* rescale O only when a row's max changed: pays for its vote at dh 128 (64 FMULs per
 * tile); at dh 64 it costs the register that makes ptxas spill under the 128 cap */
#define HK_ATTN_SKIP_RESCALE (HK_DH == 128)
/* p = exp2(fma(s, sl2, -m)) instead of s *= sl2 then exp2(s - m): one FMUL less per score
 * at dh 128; at dh 64 ptxas spills 20 bytes with it under the 128-register cap */
#define HK_ATTN_FOLD_SCALE (HK_DH == 128)

#if HK_ATTN_BF16
#define HK_ATTN_MMA hk_mma_16816_bf16
#define HK_ATTN_PACK hk_pack_bf16x2
#else
#define HK_ATTN_MMA hk_mma_16816_f16
#define HK_ATTN_PACK hk_pack_f16x2
#endif

/* Byte offset of chunk c (8 elements) of row r in a swizzled [rows][HK_DH] tile. */
HK_DEVICE int hk_attn_swz(int r, int c) { return (r * HK_ATTN_CH + (c ^ (r & 7))) * 16; }

HK_DEVICE float hk_attn_exp2(float x) { /* ex2.approx: -inf -> +0 */
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

struct __align__(16) hk_attn_u4 {
  unsigned x, y, z, w;
};

/* cp.async of rows row0 .. row0+ROWS-1 of a [n_rows][ld] matrix (columns 0 .. HK_DH-1
 * from src) into a swizzled tile; rows >= n_rows are zero-filled (and read nothing).
 * HK_THREADS is a multiple of 8 * HK_ATTN_CH, so each thread copies one fixed chunk
 * column c of rows r, r + HK_THREADS / HK_ATTN_CH, ... (all with the same r & 7). */
#define HK_ATTN_RSTEP (HK_THREADS / HK_ATTN_CH)
#define HK_ATTN_LOAD_TILE(dst, src, ld, row0, n_rows, ROWS)                                        \
  do {                                                                                             \
    const int r_ = HK_TID / HK_ATTN_CH, c_ = HK_TID % HK_ATTN_CH;                                  \
    unsigned char *d_ = (dst) + hk_attn_swz(r_, c_);                                               \
    _Pragma("unroll") for (int it_ = 0; it_ < (ROWS) / HK_ATTN_RSTEP; it_++) {                     \
      const long long row_ = (row0) + r_ + it_ * HK_ATTN_RSTEP;                                    \
      const bool ok_ = row_ < (n_rows);                                                            \
      hk_cp_async16(d_ + it_ * HK_ATTN_RSTEP * HK_DH * 2, (src) + (ok_ ? row_ * (ld) + c_ * 8 : 0), ok_); \
    }                                                                                              \
  } while (0)

/* Byte offset (from the tile base) of logical chunk 2*i + (the lane's chunk bit) in a
 * swizzled tile, given lane_off = the offset of logical chunk (lane's chunk bit) of the
 * lane's row, whose row index r has r & 7 == lane & 7: the swizzle of chunk c is
 * c ^ (r & 7) on the low 3 bits, so the step to chunk pair i is an XOR of bits 5..6 with
 * (i & 3) and a plus of 128 * (i >> 2) bytes (dh 128). Keeps every ldmatrix address one
 * LOP3 (+ immediate) away from a per-stage base instead of a hoisted register each. */
HK_DEVICE int hk_attn_pair(int lane_off, int i) { return (lane_off ^ (32 * (i & 3))) + 128 * (i >> 2); }

#if HK_ATTN_KVS > 1
struct __align__(8) hk_attn_u2 {
  unsigned x, y;
};
HK_DEVICE void hk_attn_st_cg2(float *p, float a, float b) {
  asm volatile("st.global.cg.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
}
HK_DEVICE float2 hk_attn_ld_cg2(const float *p) {
  float2 v;
  asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "l"(p) : "memory");
  return v;
}

/* The split-KV epilogue (the protocol of tile_nv.h's split GEMMs; layout at the top): stores
 * this piece's rows -- O (this lane's columns 8 d + 2 t, 8 d + 2 t + 1 of its rows a and b,
 * unnormalised), m and the quad's full l -- at prow_a / prow_b (the row's index in piece 0:
 * (bh S) seq_q + i; -1: the row holds no query), arrives on the tile's counter, and in the last
 * piece merges the S pieces in order 0..S-1, each thread over (row, 4 columns) of the tile's
 * rows -- row r is head h0 + r / qc, query i0 + r % qc, nh heads of nq queries (unpacked: one
 * head, qc = BQ) -- and stores them rounded to HK_T. Every thread of the block calls it (two
 * block barriers); the block's shared memory is not touched. */
HK_DEVICE void hk_attn_split_finish(const float (*o)[4], float m_a, float m_b, float l_a, float l_b, float *part,
                                    unsigned *sem, HK_T *out, long long batch, long long seq_q, long long heads,
                                    long long blk, int piece, long long prow_a, long long prow_b, long long b,
                                    long long h0, int nh, int qc, long long i0, int nq, int t) {
  HK_SHARED unsigned hk_attn_last;
  HK_CP_ASYNC_WAIT(0); /* an empty piece's zero-fills land before the next unit's copies */
  const long long rows_all = batch * heads * HK_ATTN_KVS * seq_q;
  float *const po = part + (long long)piece * seq_q * HK_DH;
  float *const pml = part + rows_all * HK_DH + (long long)piece * seq_q * 2;
  if (prow_a >= 0) {
#pragma unroll
    for (int d = 0; d < HK_ATTN_OT; d++) hk_attn_st_cg2(po + prow_a * HK_DH + 8 * d + 2 * t, o[d][0], o[d][1]);
    if (t == 0) hk_attn_st_cg2(pml + prow_a * 2, m_a, l_a);
  }
  if (prow_b >= 0) {
#pragma unroll
    for (int d = 0; d < HK_ATTN_OT; d++) hk_attn_st_cg2(po + prow_b * HK_DH + 8 * d + 2 * t, o[d][2], o[d][3]);
    if (t == 0) hk_attn_st_cg2(pml + prow_b * 2, m_b, l_b);
  }
  HK_SYNC(); /* the block's partial is stored */
  if (HK_TID == 0) hk_attn_last = (unsigned)hk_split_arrive(sem + blk, HK_ATTN_KVS);
  HK_SYNC(); /* the flag is set; the loads below come after thread 0's acquire */
  if (!hk_attn_last) return;
  const long long ld_o = heads * HK_DH;
  for (int e = HK_TID; e < nh * qc * (HK_DH / 4); e += HK_THREADS) {
    const int tr = e / (HK_DH / 4), c = (e % (HK_DH / 4)) * 4; /* tile row, column */
    if (tr % qc >= nq) continue; /* a packed tile's last query tile: fewer queries */
    const long long h = h0 + tr / qc, i = i0 + tr % qc;
    const long long row0 = (b * heads + h) * HK_ATTN_KVS * seq_q + i; /* piece p: row0 + p seq_q */
    const float *const to = part + row0 * HK_DH;
    const float *const tml = part + rows_all * HK_DH + row0 * 2;
    float mx = -hk_inf();
#pragma unroll
    for (int p = 0; p < HK_ATTN_KVS; p++) mx = fmaxf(mx, hk_attn_ld_cg2(tml + p * seq_q * 2).x);
    const float base = mx == -hk_inf() ? 0.0f : mx; /* no piece has a key for the row: l = 0, zeros */
    float l = 0.0f, a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll 4
    for (int p = 0; p < HK_ATTN_KVS; p++) {
      const float2 ml = hk_attn_ld_cg2(tml + p * seq_q * 2);
      const float4 v = hk_ld_cg4(to + p * seq_q * HK_DH + c);
      const float w = hk_attn_exp2(ml.x - base); /* m = -inf (no key in the piece): 0 */
      l = fmaf(ml.y, w, l);
      a0 = fmaf(v.x, w, a0);
      a1 = fmaf(v.y, w, a1);
      a2 = fmaf(v.z, w, a2);
      a3 = fmaf(v.w, w, a3);
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    hk_attn_u2 r;
    r.x = HK_ATTN_PACK(a0 * inv, a1 * inv);
    r.y = HK_ATTN_PACK(a2 * inv, a3 * inv);
    *(hk_attn_u2 *)(out + (b * seq_q + i) * ld_o + h * HK_DH + c) = r;
  }
}
#endif

extern "C" __global__ void __launch_bounds__(HK_THREADS, HK_ATTN_MINB)
HK_NAME(const HK_T *q, const HK_T *k, const HK_T *v, HK_T *out, long long batch, long long seq_q,
        long long seq_kv, long long heads, long long kv_heads, long long dh, long long ld_q, long long ld_kv,
        long long q_col, long long k_col, long long v_col, long long causal, float scale
#if HK_ATTN_MASKED
        , const int *lengths, const HK_T *mask, long long mask_heads
#endif
#if HK_ATTN_KVS > 1
        , float *part, unsigned *sem
#endif
) {
  extern __shared__ __align__(128) unsigned char hk_attn_smem[];
  unsigned char *const sq = hk_attn_smem;
  unsigned char *const sk = sq + HK_ATTN_Q_BYTES;         /* 2 stages */
  unsigned char *const sv = sk + 2 * HK_ATTN_KV_BYTES;     /* 2 stages */
  const int warp = HK_TID >> 5, lane = HK_TID & 31;
  const int g = lane >> 2, t = lane & 3;
  /* ldmatrix row/chunk of this lane: Q (A, x4), K (B, x4: 2 key tiles x 2 k halves),
   * V (B via .trans, x4: 2 key halves x 2 column tiles) */
  const int q_lane = hk_attn_swz(16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4);
  const int k_lane = hk_attn_swz((lane & 7) + 8 * (lane >> 4), (lane >> 3) & 1);
  const int v_lane = hk_attn_swz((lane & 7) + 8 * ((lane >> 3) & 1), lane >> 4);
  const long long group = kv_heads > 0 && heads >= kv_heads ? heads / kv_heads : 1;
#if HK_ATTN_GP
  const hk_attn_gp_t gp = hk_attn_gp_geom(heads, kv_heads, seq_q, HK_ATTN_BQ);
  const long long q_tiles = gp.q_tiles;
  const long long n_blocks = batch * gp.groups * gp.hc * q_tiles;
  const int qc = (int)gp.qc; /* queries per head in a tile */
#else
  const long long q_tiles = (seq_q + HK_ATTN_BQ - 1) / HK_ATTN_BQ;
  const long long n_blocks = batch * heads * q_tiles;
#endif
  const long long ld_o = heads * HK_DH;
  /* scores to the log2 domain: p = exp2(s * sl2 - m) with one FFMA per score. sl2 is
   * kept positive so that the row max of the raw scores times sl2 is the max of the
   * scaled ones: a negative scale negates Q instead (exact in f16/bf16: the sign bit);
   * scale 0 becomes a tiny positive factor (all finite scores -> p = 1, masked -> 0). */
#if HK_ATTN_FOLD_SCALE
  const float sl2_signed = scale * 1.4426950408889634f;
  const unsigned q_neg = sl2_signed < 0.0f ? 0x80008000u : 0u;
  const float sl2 = fmaxf(fabsf(sl2_signed), 1e-30f);
#else
  const float sl2 = scale * 1.4426950408889634f;
#endif
  (void)dh;                                        /* == HK_DH (the kernel key's head_dim) */

#if HK_ATTN_KVS > 1
  for (long long unit = HK_BID; unit < n_blocks * HK_ATTN_KVS; unit += HK_NBLOCKS) {
    const long long blk = unit / HK_ATTN_KVS;
    const int piece = (int)(unit % HK_ATTN_KVS);
#else
  for (long long blk = HK_BID; blk < n_blocks; blk += HK_NBLOCKS) {
#endif
#if HK_ATTN_GP
    /* (batch, kv head, head chunk), query tile: heads h0 .. h0 + nh - 1, queries i0 .. i0 + nq - 1 */
    const long long bg = blk / q_tiles, b = bg / (gp.groups * gp.hc), gc = bg % (gp.groups * gp.hc);
    const long long h = gc / gp.hc * gp.group + gc % gp.hc * gp.hg; /* h0: its kv head is h / group */
    const int nh = (int)hk_min_ll(gp.hg, gp.group - gc % gp.hc * gp.hg);
    const long long qt = causal ? q_tiles - 1 - blk % q_tiles : blk % q_tiles;
    const long long i0 = qt * qc;
    const int nq = (int)hk_min_ll(qc, seq_q - i0);
    const long long q_span = qc; /* the tile's queries, for the causal key count */
    const HK_T *qb = q + b * seq_q * ld_q + q_col;
#else
    const long long bh = blk / q_tiles, h = bh % heads, b = bh / heads;
    const long long qt = causal ? q_tiles - 1 - blk % q_tiles : blk % q_tiles;
    const long long i0 = qt * HK_ATTN_BQ;
    const long long q_span = HK_ATTN_BQ;
    const HK_T *qb = q + b * seq_q * ld_q + q_col + h * HK_DH;
#endif
    const HK_T *kb = k + b * seq_kv * ld_kv + k_col + h / group * HK_DH;
    const HK_T *vb = v + b * seq_kv * ld_kv + v_col + h / group * HK_DH;
#if HK_ATTN_MASKED
    (void)mask, (void)mask_heads, (void)lengths;
    /* 32 bits (one register: sm_90's dh-64 tiles have none to spare); seq_kv < 2^31 */
    const int kv_len = !HK_ATTN_LENGTHS || !lengths ? (int)seq_kv
                       : lengths[b] < 0             ? 0
                                                    : (int)hk_min_ll((long long)lengths[b], seq_kv);
#else
    const long long kv_len = seq_kv;
#endif
#if HK_ATTN_MASK && !HK_ATTN_GP
    const HK_T *mrow = mask ? mask + (b * mask_heads + (mask_heads > 1 ? h : 0)) * seq_q * seq_kv : nullptr;
#endif
#if HK_ATTN_MASK
    const float mk = sl2 != 0.0f ? 1.4426950408889634f / sl2 : 0.0f;
#endif
    const long long n_keys = causal ? hk_min_ll(kv_len, i0 + q_span) : kv_len;
    const int n_tiles = (int)((n_keys + HK_ATTN_BKV - 1) / HK_ATTN_BKV);
#if HK_ATTN_KVS > 1
    const int jt_begin = (int)((long long)n_tiles * piece / HK_ATTN_KVS);
    const int jt_end = (int)((long long)n_tiles * (piece + 1) / HK_ATTN_KVS);
#else
    const int jt_begin = 0, jt_end = n_tiles;
#endif
#if HK_ATTN_GP
    /* this lane's two rows (tile rows 16 warp + g, + 8): query index, -1 when the row holds none;
     * the warp's smallest and largest query (INT_MAX / -1: no row) */
    const int ra = 16 * warp + g, rb = ra + 8;
    const int row_a = ra / qc < nh && ra % qc < nq ? (int)i0 + ra % qc : -1;
    const int row_b = rb / qc < nh && rb % qc < nq ? (int)i0 + rb % qc : -1;
    const int w_lo = __reduce_min_sync(0xffffffffu, min(row_a < 0 ? 0x7fffffff : row_a, row_b < 0 ? 0x7fffffff : row_b));
    const int w_hi = __reduce_max_sync(0xffffffffu, max(row_a, row_b));
#if HK_ATTN_MASK
    const HK_T *mrow_a = mask && row_a >= 0
                             ? mask + ((b * mask_heads + (mask_heads > 1 ? h + ra / qc : 0)) * seq_q + row_a) * seq_kv
                             : nullptr;
    const HK_T *mrow_b = mask && row_b >= 0
                             ? mask + ((b * mask_heads + (mask_heads > 1 ? h + rb / qc : 0)) * seq_q + row_b) * seq_kv
                             : nullptr;
#endif
#else
    const long long w_row0 = i0 + 16 * warp;              /* first query row of this warp */
    const long long row_a = w_row0 + g, row_b = row_a + 8; /* this lane's two rows */
#endif

    HK_SYNC(); /* the previous block's readers of shared memory are done */
#if HK_ATTN_GP
    { /* Q rows gathered: tile row r is head h + r / qc, query i0 + r % qc (zeros where none) */
      const int r_ = HK_TID / HK_ATTN_CH, c_ = HK_TID % HK_ATTN_CH;
      unsigned char *d_ = sq + hk_attn_swz(r_, c_);
#pragma unroll
      for (int it_ = 0; it_ < HK_ATTN_BQ / HK_ATTN_RSTEP; it_++) {
        const int r = r_ + it_ * HK_ATTN_RSTEP, hr = r / qc, ir = r - hr * qc;
        const bool ok_ = hr < nh && ir < nq;
        hk_cp_async16(d_ + it_ * HK_ATTN_RSTEP * HK_DH * 2,
                      qb + (ok_ ? (i0 + ir) * ld_q + (h + hr) * HK_DH + c_ * 8 : 0), ok_);
      }
    }
#else
    HK_ATTN_LOAD_TILE(sq, qb, ld_q, i0, seq_q, HK_ATTN_BQ);
#endif
    HK_ATTN_LOAD_TILE(sk, kb, ld_kv, (long long)jt_begin * HK_ATTN_BKV, n_keys, HK_ATTN_BKV);
    hk_cp_async_commit();
    HK_ATTN_LOAD_TILE(sv, vb, ld_kv, (long long)jt_begin * HK_ATTN_BKV, n_keys, HK_ATTN_BKV);
    hk_cp_async_commit();
    HK_CP_ASYNC_WAIT(1);
    HK_SYNC();

    unsigned qf[HK_ATTN_KS][4];
#pragma unroll
    for (int kk = 0; kk < HK_ATTN_KS; kk++) {
      hk_ldmatrix_x4(qf[kk], sq + hk_attn_pair(q_lane, kk));
#if HK_ATTN_FOLD_SCALE
      qf[kk][0] ^= q_neg;
      qf[kk][1] ^= q_neg;
      qf[kk][2] ^= q_neg;
      qf[kk][3] ^= q_neg;
#endif
    }

    float o[HK_ATTN_OT][4];
#pragma unroll
    for (int d = 0; d < HK_ATTN_OT; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0.0f;
    float m_a = -hk_inf(), m_b = -hk_inf(); /* running max (log2 domain) of rows a, b */
    float l_a = 0.0f, l_b = 0.0f;           /* running sums: this lane's columns only */

    for (int jt = jt_begin; jt < jt_end; jt++) {
      const int st = (jt - jt_begin) & 1;
      const long long j0 = (long long)jt * HK_ATTN_BKV;
      /* this lane's ldmatrix offsets in the current K and V stage (the stage offsets
       * are multiples of 1024, below the XORed bits) */
      const int k_off = (int)(sk - hk_attn_smem) + st * HK_ATTN_KV_BYTES + k_lane;
      const int v_off = (int)(sv - hk_attn_smem) + st * HK_ATTN_KV_BYTES + v_lane;
      /* the warp has an unmasked key in this tile (causal: its last row reaches j0) */
#if HK_ATTN_GP
      const bool active = (!causal || j0 <= w_hi) && w_hi >= 0; /* and it has a query row */
#elif HK_ATTN_KVS > 1
      const bool active = (!causal || j0 <= w_row0 + 15) && w_row0 < seq_q; /* and it has a query row */
#else
      const bool active = !causal || j0 <= w_row0 + 15;
#endif

      HK_CP_ASYNC_WAIT(1); /* K[jt] (and before it everything but V[jt]) has landed */
      HK_SYNC();           /* ... for every thread; and S(jt-1) is done with the other K stage */
      if (jt + 1 < jt_end)
        HK_ATTN_LOAD_TILE(sk + (st ^ 1) * HK_ATTN_KV_BYTES, kb, ld_kv, j0 + HK_ATTN_BKV, n_keys, HK_ATTN_BKV);
      hk_cp_async_commit(); /* (possibly empty: keeps the group count uniform) */

      float s[HK_ATTN_NT][4];
#pragma unroll
      for (int n = 0; n < HK_ATTN_NT; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      if (active) {
        /* S = Q K^T */
#pragma unroll
        for (int kk = 0; kk < HK_ATTN_KS; kk++) {
#pragma unroll
          for (int np = 0; np < HK_ATTN_NT / 2; np++) {
            unsigned kf[4];
            hk_ldmatrix_x4(kf, hk_attn_smem + hk_attn_pair(k_off, kk) + 16 * np * HK_DH * 2);
            HK_ATTN_MMA(s[2 * np], qf[kk], kf);
            HK_ATTN_MMA(s[2 * np + 1], qf[kk], kf + 2);
          }
        }
        /* masks: keys past the end; causal keys past the row (only on tiles crossing
         * this warp's diagonal) */
        const bool tail = j0 + HK_ATTN_BKV > kv_len;
#if HK_ATTN_GP
        const bool diag = causal && j0 + HK_ATTN_BKV - 1 > w_lo;
#else
        const bool diag = causal && j0 + HK_ATTN_BKV - 1 > w_row0;
#endif
#if HK_ATTN_MASK && HK_ATTN_GP
        if (tail || diag || mask) {
#elif HK_ATTN_MASK
        if (tail || diag || mrow) {
#else
        if (tail || diag) {
#endif
#pragma unroll
          for (int n = 0; n < HK_ATTN_NT; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
              const long long j = j0 + 8 * n + 2 * t + (e & 1);
              const long long i = e < 2 ? row_a : row_b;
              if (j >= kv_len || (causal && j > i)) s[n][e] = -hk_inf();
#if HK_ATTN_MASK && HK_ATTN_GP
              else if (const HK_T *mr = e < 2 ? mrow_a : mrow_b) s[n][e] = fmaf(HK_LOAD(mr[j]), mk, s[n][e]);
#elif HK_ATTN_MASK
              else if (mrow && i < seq_q) s[n][e] = fmaf(HK_LOAD(mrow[i * seq_kv + j]), mk, s[n][e]);
#endif
            }
          }
        }
        /* online softmax in the log2 domain: row max of the raw scores (sl2 > 0), m_*
         * the running max of the scaled ones */
#if HK_ATTN_FOLD_SCALE
        float mx_a = -hk_inf(), mx_b = -hk_inf();
#else
        float mx_a = m_a, mx_b = m_b; /* scaled in place: s *= sl2 */
#endif
#pragma unroll
        for (int n = 0; n < HK_ATTN_NT; n++) {
#if !HK_ATTN_FOLD_SCALE
          s[n][0] *= sl2;
          s[n][1] *= sl2;
          s[n][2] *= sl2;
          s[n][3] *= sl2;
#endif
          mx_a = fmaxf(mx_a, fmaxf(s[n][0], s[n][1]));
          mx_b = fmaxf(mx_b, fmaxf(s[n][2], s[n][3]));
        }
        /* the 4 lanes of a quad hold one row's 2*NT columns */
        mx_a = fmaxf(mx_a, hk_shfl_xor(mx_a, 1));
        mx_a = fmaxf(mx_a, hk_shfl_xor(mx_a, 2));
        mx_b = fmaxf(mx_b, hk_shfl_xor(mx_b, 1));
        mx_b = fmaxf(mx_b, hk_shfl_xor(mx_b, 2));
#if HK_ATTN_FOLD_SCALE
        mx_a = fmaxf(m_a, mx_a * sl2);
        mx_b = fmaxf(m_b, mx_b * sl2);
#define HK_ATTN_P(x, base) hk_attn_exp2(fmaf((x), sl2, -(base)))
#else
#define HK_ATTN_P(x, base) hk_attn_exp2((x) - (base))
#endif
        /* a row with no unmasked key yet keeps max -inf: subtract 0 (p = 0, alpha = 0) */
        const float base_a = mx_a == -hk_inf() ? 0.0f : mx_a;
        const float base_b = mx_b == -hk_inf() ? 0.0f : mx_b;
        /* alpha == 1 exactly when the max did not change (m - m = 0; -inf - 0 -> 0 when
         * the row is still empty, and then O and l are 0 anyway) */
        const float alpha_a = hk_attn_exp2(m_a - base_a), alpha_b = hk_attn_exp2(m_b - base_b);
        m_a = mx_a;
        m_b = mx_b;
        float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
        for (int n = 0; n < HK_ATTN_NT; n++) {
          s[n][0] = HK_ATTN_P(s[n][0], base_a);
          s[n][1] = HK_ATTN_P(s[n][1], base_a);
          s[n][2] = HK_ATTN_P(s[n][2], base_b);
          s[n][3] = HK_ATTN_P(s[n][3], base_b);
          sum_a += s[n][0] + s[n][1];
          sum_b += s[n][2] + s[n][3];
        }
        l_a = fmaf(l_a, alpha_a, sum_a);
        l_b = fmaf(l_b, alpha_b, sum_b);
        /* rescale O only when some row of the warp changed its max (warp-uniform branch) */
#if HK_ATTN_SKIP_RESCALE
        if (__any_sync(0xffffffffu, alpha_a != 1.0f || alpha_b != 1.0f))
#endif
        {
#pragma unroll
          for (int d = 0; d < HK_ATTN_OT; d++) {
            o[d][0] *= alpha_a;
            o[d][1] *= alpha_a;
            o[d][2] *= alpha_b;
            o[d][3] *= alpha_b;
          }
        }
      }

      HK_CP_ASYNC_WAIT(1); /* V[jt] has landed (K[jt+1] may be in flight) */
      HK_SYNC();           /* ... for every thread; and P V(jt-1) is done with the other V stage */
      if (jt + 1 < jt_end)
        HK_ATTN_LOAD_TILE(sv + (st ^ 1) * HK_ATTN_KV_BYTES, vb, ld_kv, j0 + HK_ATTN_BKV, n_keys, HK_ATTN_BKV);
      hk_cp_async_commit();

      if (active) {
        /* O += P V: P's C fragments of key tiles 2kk, 2kk+1 are the A fragment of k-step kk */
#pragma unroll
        for (int kk = 0; kk < HK_ATTN_BKV / 16; kk++) {
          unsigned pa[4];
          pa[0] = HK_ATTN_PACK(s[2 * kk][0], s[2 * kk][1]);
          pa[1] = HK_ATTN_PACK(s[2 * kk][2], s[2 * kk][3]);
          pa[2] = HK_ATTN_PACK(s[2 * kk + 1][0], s[2 * kk + 1][1]);
          pa[3] = HK_ATTN_PACK(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
          for (int dp = 0; dp < HK_ATTN_OT / 2; dp++) {
            unsigned vf[4];
            hk_ldmatrix_x4_trans(vf, hk_attn_smem + hk_attn_pair(v_off, dp) + 16 * kk * HK_DH * 2);
            HK_ATTN_MMA(o[2 * dp], pa, vf);
            HK_ATTN_MMA(o[2 * dp + 1], pa, vf + 2);
          }
        }
      }
    }

    /* epilogue: full row sums across the quad, O / l, staged in this warp's own Q rows
     * (only this warp read them), then 16-byte stores of the rows < seq_q */
    l_a += hk_shfl_xor(l_a, 1);
    l_a += hk_shfl_xor(l_a, 2);
    l_b += hk_shfl_xor(l_b, 1);
    l_b += hk_shfl_xor(l_b, 2);
#if HK_ATTN_KVS > 1 && HK_ATTN_GP
    const long long prow_a = row_a < 0 ? -1 : (b * heads + h + ra / qc) * HK_ATTN_KVS * seq_q + row_a;
    const long long prow_b = row_b < 0 ? -1 : (b * heads + h + rb / qc) * HK_ATTN_KVS * seq_q + row_b;
    hk_attn_split_finish(o, m_a, m_b, l_a, l_b, part, sem, out, batch, seq_q, heads, blk, piece, prow_a, prow_b, b, h,
                         nh, qc, i0, nq, t);
#elif HK_ATTN_KVS > 1
    const long long prow_a = row_a < seq_q ? bh * HK_ATTN_KVS * seq_q + row_a : -1;
    const long long prow_b = row_b < seq_q ? bh * HK_ATTN_KVS * seq_q + row_b : -1;
    hk_attn_split_finish(o, m_a, m_b, l_a, l_b, part, sem, out, batch, seq_q, heads, blk, piece, prow_a, prow_b, b, h,
                         1, HK_ATTN_BQ, i0, (int)hk_min_ll(HK_ATTN_BQ, seq_q - i0), t);
#else
#if HK_ATTN_MASKED
    const float inv_a = l_a > 0.0f ? 1.0f / l_a : 0.0f, inv_b = l_b > 0.0f ? 1.0f / l_b : 0.0f; /* no key: zeros */
#else
    const float inv_a = 1.0f / l_a, inv_b = 1.0f / l_b; /* every row has key 0 */
#endif
#pragma unroll
    for (int d = 0; d < HK_ATTN_OT; d++) {
      *(unsigned *)(sq + hk_attn_swz(16 * warp + g, d) + 4 * t) = HK_ATTN_PACK(o[d][0] * inv_a, o[d][1] * inv_a);
      *(unsigned *)(sq + hk_attn_swz(16 * warp + g + 8, d) + 4 * t) = HK_ATTN_PACK(o[d][2] * inv_b, o[d][3] * inv_b);
    }
    __syncwarp();
#if HK_ATTN_GP
#pragma unroll
    for (int it = 0; it < 16 * HK_ATTN_CH / 32; it++) { /* tile row 16 warp + r: head h + / qc, query i0 + % qc */
      const int e = lane + 32 * it, r = e / HK_ATTN_CH, c = e % HK_ATTN_CH, tr = 16 * warp + r;
      const int hr = tr / qc, ir = tr - hr * qc;
      if (hr < nh && ir < nq)
        *(hk_attn_u4 *)(out + (b * seq_q + i0 + ir) * ld_o + (h + hr) * HK_DH + c * 8) =
            *(const hk_attn_u4 *)(sq + hk_attn_swz(tr, c));
    }
#else
    HK_T *ob = out + (b * seq_q + w_row0) * ld_o + h * HK_DH;
#pragma unroll
    for (int it = 0; it < 16 * HK_ATTN_CH / 32; it++) {
      const int e = lane + 32 * it, r = e / HK_ATTN_CH, c = e % HK_ATTN_CH;
      if (w_row0 + r < seq_q)
        *(hk_attn_u4 *)(ob + r * ld_o + c * 8) = *(const hk_attn_u4 *)(sq + hk_attn_swz(16 * warp + r, c));
    }
#endif
#endif
  }
}
