/* SPDX-License-Identifier: Apache-2.0 */
/* attention_tma: FlashAttention-3-style forward on sm_90a: a producer warp loads Q and a
 * ring of K/V tiles with TMA (mbarrier transaction counts), consumer warpgroups run both
 * products on wgmma (S = Q K^T from shared memory; O += P V with P in registers) and the
 * online softmax in f32 registers, optionally in ping-pong and with the next Q K^T issued
 * before the current softmax. f16/bf16, head dim HK_DH (64 or 128), key align 8. Same ABI
 * and semantics as attention.hip / attention_mma.hip (q [B, Sq, ld_q], k/v [B, Skv, ld_kv],
 * query head h at column q_col + h dh, kv head h / (heads / kv_heads) at k_col / v_col,
 * out [B, Sq, heads dh], causal masks key j > query i, top-left aligned), then three tensor
 * maps that libhkrt builds at run time (pack argument kind TMAP, docs/FORMAT.md):
 *   tm_q  q as the matrix [B Sq][ld_q],  box 64 columns x HK_ATTN_BQ rows, 128-byte swizzle
 *   tm_k  k as [B Skv][ld_kv],           box 64 x HK_ATTN_BKV, 128-byte swizzle
 *   tm_v  v as [B Skv][ld_kv],           box 64 x HK_ATTN_BKV, 128-byte swizzle
 * A head is a column offset into the 2-D map (q_col + h dh + 64 p for its panel p), a
 * sequence a row offset (b Sq + i0): packed qkv and grouped-query heads are read in place
 * through the maps of the original tensors, no copy. TMA coordinates are 32-bit: B Sq, B Skv
 * and the column offsets must stay below 2^31 (a tensor of 2^31 rows of 64 half elements
 * would be 256 GiB).
 *
 * Rows past the end of a sequence. A tile's box may run past row b S + S - 1:
 *   - into the next sequence (b + 1 < B): Q rows there are computed and never stored; K
 *     rows there get S = -inf (assigned, so any value is masked); V rows there are
 *     overwritten with zeros by the producer warp before the consumers may read the tile
 *     (below: the aux barrier), so that 0 x V = 0 even when V there is not finite;
 *   - past the tensor (b = B - 1): TMA fills them with zeros.
 *
 * Macros (compiler/codegen/variants/variant_attention_nv.c): HK_THREADS = 128 (1 +
 * HK_AT_WGS); HK_AT_WGS consumer warpgroups (1..3), HK_ATTN_BQ = 64 HK_AT_WGS query rows
 * per work tile (consumer warpgroup c owns rows 64c .. 64c + 63), HK_ATTN_BKV keys per K/V
 * tile (64, 128 or 192), HK_AT_STAGES K/V ring slots, HK_AT_PP ping-pong, HK_AT_OV
 * intra-warpgroup overlap, HK_DH, HK_ATTN_BF16, HK_ATTN_MINB (__launch_bounds__),
 * HK_AT_QBUF Q buffers, HK_ATTN_SMEM (dynamic bytes, incl. 1024 for aligning the base),
 * HK_AT_PRODUCER_REGS /
 * HK_AT_CONSUMER_REGS (setmaxnreg budgets), HK_AT_S / HK_AT_O (tile_wgmma.h's ss m64n{BKV}
 * and rs m64n{DH} wrappers).
 *
 * Shared memory (dynamic, base aligned up to 1024 bytes; every tile below starts on a
 * 1024-byte boundary):
 *   Q      QBUF x [BQ][DH]   DH/64 panels of [BQ][64]  (panel p at p BQ 128 bytes)
 *   K ring STAGES x [BKV][DH] DH/64 panels of [BKV][64] (slot s at s BKV DH 2 bytes)
 *   V ring STAGES x [BKV][DH] likewise
 *   bars   q_full[QBUF], q_empty[QBUF], aux, k_full[S], k_empty[S], v_full[S], v_empty[S] (8
 *          bytes each)
 * HK_AT_QBUF (1 or 2, the variant's choice: 2 where shared memory allows) Q buffers: work tile lt
 * uses buffer lt % QBUF, so with two the producer loads the next tile's Q while this one's
 * last Q K^T is still to come (short sequences have one or two key tiles per work tile).
 * A panel holds R rows of 128 bytes; 16-byte chunk c of row r is stored at chunk c ^ (r & 7):
 * what TMA's 128-byte swizzle writes for a box of 64 columns and what wgmma's 128-byte
 * swizzle mode reads. The descriptors (re-derived from attention_wgmma.hip and gemm_tma.hip,
 * both correct on the H200; hk_at_desc: start >> 4, LBO >> 4 at bit 16, SBO 1024 >> 4 at bit
 * 32, mode 1 = 128B at bit 62, base offset 0 because every panel is 1024-aligned):
 *   S = Q K^T, m64n{BKV}k16, k-step kk (dh 16kk .. 16kk + 15), A and B K-major (TB 0):
 *     A = Q rows 64c .. 64c+63: panel kk/4 + 64c rows x 128 B + (kk % 4) x 32 B, SBO 1024
 *     B = K slot [BKV keys][dh]: panel kk/4 + (kk % 4) x 32 B, SBO 1024 (8 keys)
 *   O += P V, m64n{DH}k16, k-step kk (keys 16kk .. 16kk + 15):
 *     A = P in registers: S accumulator blocks 2kk, 2kk + 1 rounded to f16/bf16 (the m64nN
 *         accumulator layout -- warp w rows 16w + g, +8, columns 8j + 2t, +1 -- is the
 *         mma.sync C layout, and two n8 blocks are one A fragment)
 *     B = V slot [BKV keys][dh], N-major (TB 1): start + kk x 16 keys x 128 B, LBO = the
 *         panel stride BKV x 128 B (next 64 dh columns), SBO 1024 (next 8 keys)
 *
 * Work tiles. A work tile is (b, h, query tile qt) of BQ rows; T = B heads ceil(Sq / BQ).
 * Blocks take tiles blockIdx.x, + gridDim.x, ... (the variant launches min(T, SMs) blocks,
 * persistent, or T blocks). hk_at_decode orders them for L2 reuse and balance: in sections
 * of `hs` (b, h) pairs -- as many query heads as keep their K/V (divided among the heads of
 * a kv group) within HK_AT_L2_BYTES, rounded to whole kv groups -- query tiles outermost
 * (causal: the last, longest rows first), the (b, h) pairs inside, so the query heads of one
 * kv group are adjacent and the blocks running at once read the same K/V.
 *
 * Barriers (every mbarrier phase; "wait P" = mbarrier.try_wait.parity P, which passes once
 * the phase of parity P has completed, at once for the phase before a fresh barrier's):
 *   q_full[i]   count 1: the producer's arrive.expect_tx(Q bytes), then the Q copies. Work tile
 *            lt (this block's lt-th) uses buffer i = lt % QBUF and completes its phase lt / QBUF;
 *            consumers wait parity (lt / QBUF) & 1.
 *   q_empty[i]  count 4 WGS: lane 0 of every consumer warp, after its warpgroup's last Q K^T of
 *            the tile retired. The producer waits parity ((lt / QBUF) & 1) ^ 1 before loading
 *            tile lt's Q into buffer i.
 *   k_full[s], v_full[s]  count 1 (+ the slot's bytes); k_empty[s], v_empty[s] count 4 WGS.
 *            Ring use u (key tiles counted over every work tile of the block, in order,
 *            identically in producer and consumers) is slot u % S, phase parity (u / S) & 1:
 *            the producer waits empty parity ^ 1, arms full and copies; a consumer waits full
 *            parity and releases empty after its wgmmas reading the slot retired.
 *            Every consumer warpgroup waits for every use's full barrier before it releases
 *            the use, even for a key tile that is fully masked for its rows (whose wgmmas it
 *            skips): a release before the full wait could count toward the slot's previous
 *            use, which another warpgroup may still be reading.
 *   aux      count 1: the V copies of a tile whose rows run into the next sequence land here
 *            instead of on v_full[s]; the producer warp waits for them (parity: its count of
 *            such tiles), zeroes the rows past the sequence, fence.proxy.async, and lane 0
 *            arrives on v_full[s] (a plain arrival: that phase expects no bytes).
 *   named barriers 1 .. WGS (HK_AT_PP, 256 threads each): warpgroup c syncs on barrier 1 + c
 *            before its matrix burst (S_j and P_{j-1} V_{j-1}) and arrives on barrier 1 +
 *            (c + 1) % WGS after issuing it, so the bursts take turns: one warpgroup's softmax
 *            runs under the other's wgmmas. The last warpgroup arrives on barrier 1 once at
 *            the start (consumer 0 goes first); every warpgroup has the same number of
 *            bursts (the block's key tiles of each work tile), so at the end barrier 1 has one
 *            arrival more than syncs, which consumer 0 takes with one last sync.
 *
 * Consumer schedules:
 *   HK_AT_PP = HK_AT_OV = 0, the simple pipeline (for bisecting): per key tile j: S_j (wait),
 *     masks, softmax (O *= alpha at once), P_j, P_j V_j (wait).
 *   otherwise the lagged pipeline (FA3): iteration j = 0 .. n issues S_j (j < n) and then
 *     P_{j-1} V_{j-1} (j > 0; O *= alpha_{j-1} just before), as one burst (in turns with the
 *     other warpgroups when HK_AT_PP); HK_AT_OV waits only for S_j (wait_group 1), runs the
 *     softmax of S_j while P_{j-1} V_{j-1} is on the tensor cores, then waits for it
 *     (wait_group 0) before P_j overwrites the registers it reads; without HK_AT_OV both are
 *     waited for before the softmax.
 *   Causal: the block loads key tiles up to its last row; a warpgroup skips the wgmmas of key
 *   tiles past its own last row (still waiting and releasing them); masks only on tiles that
 *   cross a warp's diagonal or the sequence end. Online softmax in the log2 domain: S masked,
 *   row max over the lane quad, P = exp2(S scale log2(e) - max) (one FFMA and one ex2 per
 *   score when scale > 0), sums in f32; O is rescaled only when a row's max grew.
 * Epilogue: O / l rounded, 4-byte stores straight from the accumulator registers (rows <
 *   Sq); shared memory is not used, so the producer may already load the next tile's Q.
 * Programmatic dependent launch: barrier init and tensor-map prefetch run before
 * griddepcontrol.wait. */
#ifndef HK_DH
#error "attention_tma: HK_DH (head dim) must be defined"
#endif
#define HK_AT_NS (HK_ATTN_BKV / 2) /* S accumulators per thread (m64n{BKV}) */
#define HK_AT_NO (HK_DH / 2)       /* O accumulators per thread (m64n{DH}) */
#define HK_AT_Q_BYTES (HK_ATTN_BQ * HK_DH * 2)
#define HK_AT_KV_BYTES (HK_ATTN_BKV * HK_DH * 2)
#define HK_AT_LAG (HK_AT_PP || HK_AT_OV)
/* The K/V bytes a section of work tiles may keep in L2 (the H200 has 50 MiB; half of it
 * leaves room for the Q and O streams and the other blocks' tails). */
#define HK_AT_L2_BYTES (24ll << 20)
#if (HK_DH != 64 && HK_DH != 128) || (HK_ATTN_BKV != 64 && HK_ATTN_BKV != 128 && HK_ATTN_BKV != 192) ||          \
    HK_AT_WGS < 1 || HK_AT_WGS > 3 || HK_ATTN_BQ != 64 * HK_AT_WGS || HK_THREADS != 128 * (1 + HK_AT_WGS) ||       \
    HK_AT_STAGES < 2 || (HK_AT_PP && HK_AT_WGS < 2) ||                                                             \
    (HK_AT_QBUF != 1 && HK_AT_QBUF != 2) ||                                                                       \
    HK_ATTN_SMEM != HK_AT_QBUF * HK_AT_Q_BYTES + 2 * HK_AT_STAGES * HK_AT_KV_BYTES +                               \
                        8 * (2 * HK_AT_QBUF + 1 + 4 * HK_AT_STAGES) + 1024
#error "attention_tma: unsupported tile configuration"
#endif

#if HK_ATTN_BF16
#define HK_AT_PACK hk_pack_bf16x2
#else
#define HK_AT_PACK hk_pack_f16x2
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
HK_DEVICE float hk_at_exp2(float x) { /* ex2.approx: -inf -> +0 */
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* Matrix descriptors (128-byte swizzle), as attention_wgmma.hip builds them: a low word
 * made opaque once per use (so that ptxas does not keep every 64-bit descriptor of every
 * slot in registers across the loop) plus a constant byte offset; low word = (address >> 4)
 * | (LBO >> 4) << 16 with the address < 256 KiB, so adding offset >> 4 never carries out of
 * the 14-bit start field. High word: SBO 1024 >> 4, swizzle mode 1 at bit 62. */
HK_DEVICE unsigned hk_at_desc_lo(unsigned smem_addr, unsigned lbo_bytes) {
  unsigned lo = ((smem_addr & 0x3FFFFu) >> 4) | (((lbo_bytes >> 4) & 0x3FFFu) << 16), r;
  asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(lo));
  return r;
}
HK_DEVICE unsigned long long hk_at_desc(unsigned lo, int off_bytes) {
  return ((unsigned long long)((1024u >> 4) | (1u << 30)) << 32) | (unsigned long long)(lo + (unsigned)(off_bytes >> 4));
}

/* Keeps the compiler from moving a register across a wgmma in flight (P fragments). */
#define HK_AT_FENCE_U32(x) asm volatile("" : "+r"(x)::"memory")

/* One work tile: batch b, query head h, query tile qt. */
struct hk_at_tile {
  int b, h, qt;
};

/* Work tile t (0 .. bh q_tiles - 1) in the order described above: sections of hs (b, h)
 * pairs, query tiles outermost inside a section (causal: descending), pairs innermost.
 * 32-bit: the tile count is below 2^31 for any q that fits in memory (B H Sq dh elements
 * over 64 rows x 64 columns per tile), and 32-bit division keeps the producer within its
 * 40 registers. */
HK_DEVICE hk_at_tile hk_at_decode(int t, int q_tiles, int bh, int heads, int hs, bool causal) {
  const int per = hs * q_tiles;
  const int sec = t / per, r = t - sec * per;
  const int first = sec * hs, n = bh - first < hs ? bh - first : hs;
  const int qi = r / n, pair = first + (r - qi * n);
  hk_at_tile w;
  w.b = pair / heads;
  w.h = pair - w.b * heads;
  w.qt = causal ? q_tiles - 1 - qi : qi;
  return w;
}

/* Key tiles a work tile loads: up to its last row when causal, all Skv keys otherwise (>= 1
 * since Skv >= 1). */
HK_DEVICE int hk_at_key_tiles(int i0, int seq_kv, bool causal) {
  const int n_keys = causal && i0 + HK_ATTN_BQ < seq_kv ? i0 + HK_ATTN_BQ : seq_kv;
  return (n_keys + HK_ATTN_BKV - 1) / HK_ATTN_BKV;
}

/* Masks, online softmax and the row statistics of one key tile j0 .. j0 + BKV - 1 for this
 * lane's rows a (s[4n], s[4n+1]) and b (s[4n+2], s[4n+3]), key j0 + 8n + 2t + (e & 1): s
 * (raw Q K^T) becomes P = exp2(S scale log2(e) - max) in f32; m_* the running max (log2
 * domain), l_* this lane's running sums, alpha_* the factor O must be multiplied by before
 * P V is added (exp2(old max - new max); 0 while the old max is -inf). `masked`: the tile
 * crosses the sequence end or (causal) this warp's diagonal (warp-uniform).
 * kFold (sl2 > 0, every real attention): the row max is taken on the raw scores (scaling by
 * a positive factor keeps the order) and the scale is folded into the exponent's one FFMA;
 * otherwise the scores are scaled first (one FMUL more per score). */
template <bool kFold>
HK_DEVICE void hk_at_softmax(float (&s)[HK_AT_NS], float sl2, bool masked, int j0, int seq_kv, bool causal, int row_a,
                             int t, float &m_a, float &m_b, float &l_a, float &l_b, float &alpha_a, float &alpha_b) {
  if (!kFold) {
#pragma unroll
    for (int i = 0; i < HK_AT_NS; i++) s[i] *= sl2; /* before masking: -inf stays -inf for any scale */
  }
  if (masked) {
    /* key j0 + jr is kept in row a (b) when jr < lim_a (lim_b): 32-bit, in [0, BKV] */
    const int end = min(seq_kv - j0, HK_ATTN_BKV);
    const int lim_a = causal ? min(end, max(row_a - j0 + 1, 0)) : end;
    const int lim_b = causal ? min(end, max(row_a + 8 - j0 + 1, 0)) : end;
#pragma unroll
    for (int n = 0; n < HK_ATTN_BKV / 8; n++)
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int jr = 8 * n + 2 * t + (e & 1);
        if (jr >= (e < 2 ? lim_a : lim_b)) s[4 * n + e] = -hk_inf();
      }
  }
  float mx_a = -hk_inf(), mx_b = -hk_inf();
#pragma unroll
  for (int n = 0; n < HK_ATTN_BKV / 8; n++) {
    mx_a = fmaxf(mx_a, fmaxf(s[4 * n + 0], s[4 * n + 1]));
    mx_b = fmaxf(mx_b, fmaxf(s[4 * n + 2], s[4 * n + 3]));
  }
  /* the 4 lanes of a quad hold one row's columns */
  mx_a = fmaxf(mx_a, hk_shfl_xor(mx_a, 1));
  mx_a = fmaxf(mx_a, hk_shfl_xor(mx_a, 2));
  mx_b = fmaxf(mx_b, hk_shfl_xor(mx_b, 1));
  mx_b = fmaxf(mx_b, hk_shfl_xor(mx_b, 2));
  if (kFold) { /* to the log2 domain (-inf stays -inf: sl2 > 0) */
    mx_a *= sl2;
    mx_b *= sl2;
  }
  mx_a = fmaxf(mx_a, m_a);
  mx_b = fmaxf(mx_b, m_b);
  /* a row with no unmasked key yet keeps max -inf: subtract 0 (p = 0, alpha = 0) */
  const float base_a = mx_a == -hk_inf() ? 0.0f : mx_a;
  const float base_b = mx_b == -hk_inf() ? 0.0f : mx_b;
  alpha_a = hk_at_exp2(m_a - base_a);
  alpha_b = hk_at_exp2(m_b - base_b);
  m_a = mx_a;
  m_b = mx_b;
  float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
  for (int n = 0; n < HK_ATTN_BKV / 8; n++) {
    if (kFold) {
      s[4 * n + 0] = hk_at_exp2(fmaf(s[4 * n + 0], sl2, -base_a));
      s[4 * n + 1] = hk_at_exp2(fmaf(s[4 * n + 1], sl2, -base_a));
      s[4 * n + 2] = hk_at_exp2(fmaf(s[4 * n + 2], sl2, -base_b));
      s[4 * n + 3] = hk_at_exp2(fmaf(s[4 * n + 3], sl2, -base_b));
    } else {
      s[4 * n + 0] = hk_at_exp2(s[4 * n + 0] - base_a);
      s[4 * n + 1] = hk_at_exp2(s[4 * n + 1] - base_a);
      s[4 * n + 2] = hk_at_exp2(s[4 * n + 2] - base_b);
      s[4 * n + 3] = hk_at_exp2(s[4 * n + 3] - base_b);
    }
    sum_a += s[4 * n + 0] + s[4 * n + 1];
    sum_b += s[4 * n + 2] + s[4 * n + 3];
  }
  l_a = fmaf(l_a, alpha_a, sum_a);
  l_b = fmaf(l_b, alpha_b, sum_b);
}

/* hk_at_softmax with the scale folded where it may be (sl2 > 0: warp-uniform) */
HK_DEVICE void hk_at_softmax_any(float (&s)[HK_AT_NS], float sl2, bool masked, int j0, int seq_kv, bool causal,
                                 int row_a, int t, float &m_a, float &m_b, float &l_a, float &l_b, float &alpha_a,
                                 float &alpha_b) {
  if (sl2 > 0.0f)
    hk_at_softmax<true>(s, sl2, masked, j0, seq_kv, causal, row_a, t, m_a, m_b, l_a, l_b, alpha_a, alpha_b);
  else
    hk_at_softmax<false>(s, sl2, masked, j0, seq_kv, causal, row_a, t, m_a, m_b, l_a, l_b, alpha_a, alpha_b);
}

/* P as the A fragments of the k-steps of P V: k-step kk = keys 16kk .. 16kk + 15 =
 * accumulator blocks 2kk (a0: row a, a1: row b) and 2kk + 1 (a2: row a, a3: row b). */
HK_DEVICE void hk_at_pack_p(const float (&s)[HK_AT_NS], unsigned (&p)[HK_ATTN_BKV / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < HK_ATTN_BKV / 16; kk++) {
    p[kk][0] = HK_AT_PACK(s[8 * kk + 0], s[8 * kk + 1]);
    p[kk][1] = HK_AT_PACK(s[8 * kk + 2], s[8 * kk + 3]);
    p[kk][2] = HK_AT_PACK(s[8 * kk + 4], s[8 * kk + 5]);
    p[kk][3] = HK_AT_PACK(s[8 * kk + 6], s[8 * kk + 7]);
  }
}

/* O *= alpha per row (a: o[4n], o[4n+1]; b: o[4n+2], o[4n+3]); nothing when the whole warp's
 * factors are 1 (no row's max grew: most key tiles of a long row). */
HK_DEVICE void hk_at_rescale(float (&o)[HK_AT_NO], float alpha_a, float alpha_b) {
  if (__all_sync(0xffffffffu, alpha_a == 1.0f && alpha_b == 1.0f)) return;
#pragma unroll
  for (int n = 0; n < HK_DH / 8; n++) {
    o[4 * n + 0] *= alpha_a;
    o[4 * n + 1] *= alpha_a;
    o[4 * n + 2] *= alpha_b;
    o[4 * n + 3] *= alpha_b;
  }
}

/* Issues S = Q K^T (DH/16 wgmmas, one commit group) into s; q_lo / k_lo: descriptor low words
 * of the warpgroup's Q rows and of the K slot. */
HK_DEVICE void hk_at_issue_s(float (&s)[HK_AT_NS], unsigned q_lo, unsigned k_lo) {
  hk_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < HK_DH / 16; kk++) {
    const unsigned long long da = hk_at_desc(q_lo, (kk >> 2) * HK_ATTN_BQ * 128 + (kk & 3) * 32);
    const unsigned long long db = hk_at_desc(k_lo, (kk >> 2) * HK_ATTN_BKV * 128 + (kk & 3) * 32);
    HK_AT_S<0>(s, da, db, kk > 0); /* the first k-step overwrites s (scale_d 0) */
  }
  hk_wgmma_commit();
}

/* Issues O += P V (BKV/16 wgmmas, one commit group); v_lo: descriptor low word of the V slot
 * (LBO = the panel stride). */
HK_DEVICE void hk_at_issue_pv(float (&o)[HK_AT_NO], unsigned (&p)[HK_ATTN_BKV / 16][4], unsigned v_lo) {
#pragma unroll
  for (int i = 0; i < HK_AT_NO; i++) HK_WGMMA_FENCE_REG(o[i]);
  hk_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < HK_ATTN_BKV / 16; kk++) HK_AT_O<1>(o, p[kk], hk_at_desc(v_lo, kk * 16 * 128), 1);
  hk_wgmma_commit();
}
#endif

HK_GLOBAL void __launch_bounds__(HK_THREADS, HK_ATTN_MINB)
HK_NAME(const HK_T *q, const HK_T *k, const HK_T *v, HK_T *out, long long batch, long long seq_q,
        long long seq_kv, long long heads, long long kv_heads, long long dh, long long ld_q, long long ld_kv,
        long long q_col, long long k_col, long long v_col, long long causal, float scale,
        const __grid_constant__ hk_tmap_t tm_q, const __grid_constant__ hk_tmap_t tm_k,
        const __grid_constant__ hk_tmap_t tm_v) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char hk_at_raw[];
  unsigned char *const sq = hk_at_raw + ((1024u - (hk_smem_u32(hk_at_raw) & 1023u)) & 1023u);
  unsigned char *const sk = sq + HK_AT_QBUF * HK_AT_Q_BYTES;        /* HK_AT_STAGES slots */
  unsigned char *const sv = sk + HK_AT_STAGES * HK_AT_KV_BYTES;     /* HK_AT_STAGES slots */
  const unsigned bars = hk_smem_u32(sv + HK_AT_STAGES * HK_AT_KV_BYTES);
#define HK_AT_QFULL(i) (bars + 8u * (unsigned)(i))
#define HK_AT_QEMPTY(i) (bars + 8u * (unsigned)(HK_AT_QBUF + (i)))
#define HK_AT_AUX (bars + 16u * HK_AT_QBUF)
#define HK_AT_KBASE (bars + 16u * HK_AT_QBUF + 8u)
#define HK_AT_KFULL(s) (HK_AT_KBASE + 8u * (unsigned)(s))
#define HK_AT_KEMPTY(s) (HK_AT_KBASE + 8u * (unsigned)(HK_AT_STAGES + (s)))
#define HK_AT_VFULL(s) (HK_AT_KBASE + 8u * (unsigned)(2 * HK_AT_STAGES + (s)))
#define HK_AT_VEMPTY(s) (HK_AT_KBASE + 8u * (unsigned)(3 * HK_AT_STAGES + (s)))
#define HK_AT_BAR(c) (1 + (c)) /* named barrier of consumer warpgroup c (ping-pong) */
  const int tid = HK_TID, wg = tid >> 7;
  (void)q;
  (void)k;
  (void)v;
  (void)dh; /* == HK_DH (the kernel key's head_dim) */
  (void)ld_q;
  (void)ld_kv;
  /* 32-bit sizes: TMA coordinates are 32-bit, so B Sq and B Skv are below 2^31 */
  const int sq32 = (int)seq_q, skv32 = (int)seq_kv, heads32 = (int)heads;
  const bool is_causal = causal != 0;
  const int group = kv_heads > 0 && heads >= kv_heads ? (int)(heads / kv_heads) : 1;
  const int q_tiles = (sq32 + HK_ATTN_BQ - 1) / HK_ATTN_BQ, bh = (int)batch * heads32, n_work = bh * q_tiles;
  /* section size: (b, h) pairs whose K/V fit the L2 budget (a kv head's K and V, 4 Skv DH
   * bytes, shared by `group` query heads), whole kv groups, at least one pair */
  const long long kv_per_head = 4 * seq_kv * HK_DH / group;
  long long hs64 = HK_AT_L2_BYTES / (kv_per_head > 0 ? kv_per_head : 1);
  if (hs64 >= group) hs64 -= hs64 % group;
  const int hs = hs64 > bh ? bh : hs64 < 1 ? 1 : (int)hs64;

  if (tid == 0) {
    hk_tma_prefetch_map(&tm_q);
    hk_tma_prefetch_map(&tm_k);
    hk_tma_prefetch_map(&tm_v);
#pragma unroll
    for (int i = 0; i < HK_AT_QBUF; i++) {
      hk_mbar_init(HK_AT_QFULL(i), 1u);
      hk_mbar_init(HK_AT_QEMPTY(i), 4u * HK_AT_WGS);
    }
    hk_mbar_init(HK_AT_AUX, 1u);
#pragma unroll
    for (int s = 0; s < HK_AT_STAGES; s++) {
      hk_mbar_init(HK_AT_KFULL(s), 1u);
      hk_mbar_init(HK_AT_KEMPTY(s), 4u * HK_AT_WGS);
      hk_mbar_init(HK_AT_VFULL(s), 1u);
      hk_mbar_init(HK_AT_VEMPTY(s), 4u * HK_AT_WGS);
    }
    hk_mbar_init_fence();
  }
  HK_SYNC(); /* the barriers are initialised before anyone uses them */
  /* PDL: nothing of global memory is touched before the wait */
  hk_pdl_launch_dependents();
  hk_pdl_wait();

  if (wg == 0) {
    /* ---- producer: warp 0; lane 0 issues every copy, the warp zeroes V rows past a sequence ---- */
    HK_SETMAXNREG_DEC(HK_AT_PRODUCER_REGS);
    if (tid < 32) {
      const int lane = tid;
      const unsigned q_dst = hk_smem_u32(sq), k_dst = hk_smem_u32(sk), v_dst = hk_smem_u32(sv);
      unsigned u = 0, aux_uses = 0, lt = 0;
      for (int t = (int)blockIdx.x; t < n_work; t += (int)gridDim.x, lt++) {
        const hk_at_tile w = hk_at_decode(t, q_tiles, bh, heads32, hs, is_causal);
        const int i0 = w.qt * HK_ATTN_BQ, kvh = w.h / group;
        const int n = hk_at_key_tiles(i0, skv32, is_causal);
        const int qc = (int)q_col + w.h * HK_DH, kc = (int)k_col + kvh * HK_DH, vc = (int)v_col + kvh * HK_DH;
        const int q_row = w.b * sq32 + i0, kv_row = w.b * skv32;
        /* the key tile whose box runs into the next sequence (-1: none; the last sequence's
         * box runs past the tensor, where TMA reads zeros) */
        const int tail_j = w.b + 1 < (int)batch && skv32 % HK_ATTN_BKV != 0 ? skv32 / HK_ATTN_BKV : -1;
        for (int j = 0; j < n; j++, u++) {
          const unsigned s = u % HK_AT_STAGES, ph = (u / HK_AT_STAGES) & 1u;
          const int j0 = j * HK_ATTN_BKV;
          if (lane == 0) {
            hk_mbar_wait(HK_AT_KEMPTY(s), ph ^ 1u); /* the consumers released the slot's previous use */
            hk_mbar_expect_tx(HK_AT_KFULL(s), (unsigned)HK_AT_KV_BYTES);
#pragma unroll
            for (int p = 0; p < HK_DH / 64; p++)
              hk_tma_load_2d(k_dst + s * HK_AT_KV_BYTES + p * HK_ATTN_BKV * 128, &tm_k, kc + 64 * p, kv_row + j0,
                             HK_AT_KFULL(s));
            if (j == 0) { /* Q after the first K tile: that one is in flight while Q waits */
              const unsigned qb = lt % HK_AT_QBUF, qph = (lt / HK_AT_QBUF) & 1u;
              hk_mbar_wait(HK_AT_QEMPTY(qb), qph ^ 1u); /* the last Q K^T of the buffer's previous tile retired */
              hk_mbar_expect_tx(HK_AT_QFULL(qb), (unsigned)HK_AT_Q_BYTES);
#pragma unroll
              for (int p = 0; p < HK_DH / 64; p++)
                hk_tma_load_2d(q_dst + qb * HK_AT_Q_BYTES + p * HK_ATTN_BQ * 128, &tm_q, qc + 64 * p, q_row,
                               HK_AT_QFULL(qb));
            }
            hk_mbar_wait(HK_AT_VEMPTY(s), ph ^ 1u);
            const unsigned vbar = j == tail_j ? HK_AT_AUX : HK_AT_VFULL(s);
            hk_mbar_expect_tx(vbar, (unsigned)HK_AT_KV_BYTES);
#pragma unroll
            for (int p = 0; p < HK_DH / 64; p++)
              hk_tma_load_2d(v_dst + s * HK_AT_KV_BYTES + p * HK_ATTN_BKV * 128, &tm_v, vc + 64 * p, kv_row + j0, vbar);
          }
          if (j == tail_j) { /* warp-uniform */
            hk_mbar_wait(HK_AT_AUX, aux_uses & 1u); /* the copy landed (every lane sees it) */
            aux_uses++;
            /* rows Skv - j0 .. BKV - 1 of every panel: lane l writes chunk l % 8 of every 4th row */
            for (int r = skv32 - j0 + (lane >> 3); r < HK_ATTN_BKV; r += 4)
#pragma unroll
              for (int p = 0; p < HK_DH / 64; p++)
                *(uint4 *)(sv + s * HK_AT_KV_BYTES + p * HK_ATTN_BKV * 128 + r * 128 + (lane & 7) * 16) =
                    make_uint4(0u, 0u, 0u, 0u);
            hk_fence_proxy_async(); /* ... ordered before the consumers' wgmma reads (async proxy) */
            __syncwarp();
            if (lane == 0) hk_mbar_arrive(HK_AT_VFULL(s));
          }
          __syncwarp();
        }
      }
    }
  } else {
    /* ---- consumers ---- */
    HK_SETMAXNREG_INC(HK_AT_CONSUMER_REGS);
    const int cw = wg - 1, lane = tid & 31, wq = (tid >> 5) & 3, g = lane >> 2, t4 = lane & 3;
    const float sl2 = scale * 1.4426950408889634f; /* scores to the log2 domain */
    const unsigned q_addr = hk_smem_u32(sq) + 64u * (unsigned)cw * 128u; /* this warpgroup's Q rows, panel 0 */
    const unsigned k_addr = hk_smem_u32(sk), v_addr = hk_smem_u32(sv);
    const long long ld_o = heads * HK_DH;
    float o[HK_AT_NO];
    float s[HK_AT_NS];
    unsigned p[HK_ATTN_BKV / 16][4];
    unsigned u = 0, lt = 0;
#if HK_AT_PP
    if (cw == HK_AT_WGS - 1) hk_named_arrive(HK_AT_BAR(0), 256); /* consumer 0 takes the first turn */
#endif
    for (int t = (int)blockIdx.x; t < n_work; t += (int)gridDim.x, lt++) {
      const hk_at_tile w = hk_at_decode(t, q_tiles, bh, heads32, hs, is_causal);
      const int i0 = w.qt * HK_ATTN_BQ;
      const int n = hk_at_key_tiles(i0, skv32, is_causal);
      const int r0 = i0 + 64 * cw;             /* first query row of the warpgroup */
      const int w_row0 = r0 + 16 * wq;         /* ... of the warp */
      const int row_a = w_row0 + g;            /* this lane's rows: row_a, row_a + 8 */
      /* key tiles with a key <= the warpgroup's last row (>= 1: key 0 <= every row) */
      const int n_act = is_causal && (r0 + 63) / HK_ATTN_BKV + 1 < n ? (r0 + 63) / HK_ATTN_BKV + 1 : n;
      const unsigned qb = lt % HK_AT_QBUF, qph = (lt / HK_AT_QBUF) & 1u; /* Q buffer of this tile */
      const unsigned q_lo = hk_at_desc_lo(q_addr + qb * HK_AT_Q_BYTES, 16);
#pragma unroll
      for (int i = 0; i < HK_AT_NO; i++) o[i] = 0.0f;
      float m_a = -hk_inf(), m_b = -hk_inf(); /* running max (log2 domain) of rows a, b */
      float l_a = 0.0f, l_b = 0.0f;           /* running sums: this lane's columns only */
      float alpha_a = 1.0f, alpha_b = 1.0f;   /* O's pending factor (lagged pipeline) */
      hk_mbar_wait(HK_AT_QFULL(qb), qph);
#if !HK_AT_LAG
      /* ---- the simple pipeline: S_j, softmax, P_j V_j, one key tile at a time ---- */
      for (int j = 0; j < n; j++, u++) {
        const unsigned st = u % HK_AT_STAGES, ph = (u / HK_AT_STAGES) & 1u;
        const int j0 = j * HK_ATTN_BKV;
        const bool act = j < n_act;
        hk_mbar_wait(HK_AT_KFULL(st), ph);
        if (act) {
          hk_at_issue_s(s, q_lo, hk_at_desc_lo(k_addr + st * HK_AT_KV_BYTES, 16));
          HK_WGMMA_WAIT(0);
#pragma unroll
          for (int i = 0; i < HK_AT_NS; i++) HK_WGMMA_FENCE_REG(s[i]);
        }
        if (lane == 0) {
          hk_mbar_arrive(HK_AT_KEMPTY(st));
          if (j == n_act - 1) hk_mbar_arrive(HK_AT_QEMPTY(qb)); /* the tile's last Q K^T retired */
        }
        if (act) {
          const bool masked = j0 + HK_ATTN_BKV > skv32 || (is_causal && j0 + HK_ATTN_BKV - 1 > w_row0);
          hk_at_softmax_any(s, sl2, masked, j0, skv32, is_causal, row_a, t4, m_a, m_b, l_a, l_b, alpha_a, alpha_b);
          hk_at_rescale(o, alpha_a, alpha_b);
          hk_at_pack_p(s, p);
        }
        hk_mbar_wait(HK_AT_VFULL(st), ph);
        if (act) {
          hk_at_issue_pv(o, p, hk_at_desc_lo(v_addr + st * HK_AT_KV_BYTES, HK_ATTN_BKV * 128));
          HK_WGMMA_WAIT(0);
#pragma unroll
          for (int i = 0; i < HK_AT_NO; i++) HK_WGMMA_FENCE_REG(o[i]);
        }
        if (lane == 0) hk_mbar_arrive(HK_AT_VEMPTY(st));
      }
#else
      /* ---- the lagged pipeline. Burst j (j = 0 .. n_act - 1) issues S_j and, for j > 0,
       * P_{j-1} V_{j-1}; then the last P V; then the key tiles past the warpgroup's rows
       * (causal), waited for and released without wgmmas. Every wgmma and wait_group sits
       * on a path all of the warpgroup takes (ptxas serializes wgmmas under divergent
       * conditions, C7518). Ring use of key tile j: u0 + j for its K and its V. ---- */
      const unsigned u0 = u;
#define HK_AT_SLOT(j) ((u0 + (unsigned)(j)) % HK_AT_STAGES)
#define HK_AT_PHASE(j) (((u0 + (unsigned)(j)) / HK_AT_STAGES) & 1u)
      /* burst 0: S_0 alone */
      hk_mbar_wait(HK_AT_KFULL(HK_AT_SLOT(0)), HK_AT_PHASE(0));
#if HK_AT_PP
      hk_named_sync(HK_AT_BAR(cw), 256); /* our turn on the tensor cores */
#endif
      hk_at_issue_s(s, q_lo, hk_at_desc_lo(k_addr + HK_AT_SLOT(0) * HK_AT_KV_BYTES, 16));
#if HK_AT_PP
      hk_named_arrive(HK_AT_BAR((cw + 1) % HK_AT_WGS), 256); /* the next warpgroup's turn */
#endif
      HK_WGMMA_WAIT(0);
#pragma unroll
      for (int i = 0; i < HK_AT_NS; i++) HK_WGMMA_FENCE_REG(s[i]);
      if (lane == 0) {
        hk_mbar_arrive(HK_AT_KEMPTY(HK_AT_SLOT(0)));
        if (n_act == 1) hk_mbar_arrive(HK_AT_QEMPTY(qb)); /* the tile's last Q K^T retired */
      }
      {
        const bool masked = HK_ATTN_BKV > skv32 || (is_causal && HK_ATTN_BKV - 1 > w_row0);
        hk_at_softmax_any(s, sl2, masked, 0, skv32, is_causal, row_a, t4, m_a, m_b, l_a, l_b, alpha_a, alpha_b);
      }
      hk_at_pack_p(s, p);
      /* bursts 1 .. n_act - 1: S_j, then P_{j-1} V_{j-1} (O rescaled to tile j - 1's max) */
      for (int j = 1; j < n_act; j++) {
        const unsigned sk_ = HK_AT_SLOT(j), sv_ = HK_AT_SLOT(j - 1);
        hk_mbar_wait(HK_AT_KFULL(sk_), HK_AT_PHASE(j));
#if HK_AT_PP
        hk_named_sync(HK_AT_BAR(cw), 256);
#endif
        hk_at_issue_s(s, q_lo, hk_at_desc_lo(k_addr + sk_ * HK_AT_KV_BYTES, 16));
        hk_at_rescale(o, alpha_a, alpha_b);
        hk_mbar_wait(HK_AT_VFULL(sv_), HK_AT_PHASE(j - 1));
        hk_at_issue_pv(o, p, hk_at_desc_lo(v_addr + sv_ * HK_AT_KV_BYTES, HK_ATTN_BKV * 128));
#if HK_AT_PP
        hk_named_arrive(HK_AT_BAR((cw + 1) % HK_AT_WGS), 256);
#endif
#if HK_AT_OV
        HK_WGMMA_WAIT(1); /* S_j retired; P_{j-1} V_{j-1} runs on under the softmax */
#else
        HK_WGMMA_WAIT(0);
#endif
#pragma unroll
        for (int i = 0; i < HK_AT_NS; i++) HK_WGMMA_FENCE_REG(s[i]);
        if (lane == 0) {
          hk_mbar_arrive(HK_AT_KEMPTY(sk_));
          if (j == n_act - 1) hk_mbar_arrive(HK_AT_QEMPTY(qb));
        }
        const int j0 = j * HK_ATTN_BKV;
        const bool masked = j0 + HK_ATTN_BKV > skv32 || (is_causal && j0 + HK_ATTN_BKV - 1 > w_row0);
        hk_at_softmax_any(s, sl2, masked, j0, skv32, is_causal, row_a, t4, m_a, m_b, l_a, l_b, alpha_a, alpha_b);
#if HK_AT_OV
        HK_WGMMA_WAIT(0); /* P_{j-1} V_{j-1} retired: its V slot is free, p may take P_j */
#endif
#pragma unroll
        for (int i = 0; i < HK_AT_NO; i++) HK_WGMMA_FENCE_REG(o[i]);
#pragma unroll
        for (int kk = 0; kk < HK_ATTN_BKV / 16; kk++) {
          HK_AT_FENCE_U32(p[kk][0]);
          HK_AT_FENCE_U32(p[kk][1]);
          HK_AT_FENCE_U32(p[kk][2]);
          HK_AT_FENCE_U32(p[kk][3]);
        }
        if (lane == 0) hk_mbar_arrive(HK_AT_VEMPTY(sv_));
        hk_at_pack_p(s, p);
      }
      /* the last P V (outside the turns, as FlashAttention-3 issues it) */
      {
        const unsigned sv_ = HK_AT_SLOT(n_act - 1);
        hk_at_rescale(o, alpha_a, alpha_b);
        hk_mbar_wait(HK_AT_VFULL(sv_), HK_AT_PHASE(n_act - 1));
        hk_at_issue_pv(o, p, hk_at_desc_lo(v_addr + sv_ * HK_AT_KV_BYTES, HK_ATTN_BKV * 128));
        HK_WGMMA_WAIT(0);
#pragma unroll
        for (int i = 0; i < HK_AT_NO; i++) HK_WGMMA_FENCE_REG(o[i]);
        if (lane == 0) hk_mbar_arrive(HK_AT_VEMPTY(sv_));
      }
      /* key tiles past the warpgroup's last row (causal): their turns, waits and releases */
      for (int j = n_act; j < n; j++) {
        hk_mbar_wait(HK_AT_KFULL(HK_AT_SLOT(j)), HK_AT_PHASE(j));
#if HK_AT_PP
        hk_named_sync(HK_AT_BAR(cw), 256);
        hk_named_arrive(HK_AT_BAR((cw + 1) % HK_AT_WGS), 256);
#endif
        hk_mbar_wait(HK_AT_VFULL(HK_AT_SLOT(j)), HK_AT_PHASE(j));
        if (lane == 0) {
          hk_mbar_arrive(HK_AT_KEMPTY(HK_AT_SLOT(j)));
          hk_mbar_arrive(HK_AT_VEMPTY(HK_AT_SLOT(j)));
        }
      }
#undef HK_AT_SLOT
#undef HK_AT_PHASE
      u = u0 + (unsigned)n;
#endif
      /* epilogue: full row sums across the quad, O / l, 4-byte stores of rows < Sq */
      l_a += hk_shfl_xor(l_a, 1);
      l_a += hk_shfl_xor(l_a, 2);
      l_b += hk_shfl_xor(l_b, 1);
      l_b += hk_shfl_xor(l_b, 2);
      const float inv_a = 1.0f / l_a, inv_b = 1.0f / l_b;
      HK_T *const oa = out + (w.b * seq_q + row_a) * ld_o + w.h * HK_DH + 2 * t4;
      HK_T *const ob = oa + 8 * ld_o;
      if (row_a < seq_q) {
#pragma unroll
        for (int n8 = 0; n8 < HK_DH / 8; n8++)
          *(unsigned *)(oa + 8 * n8) = HK_AT_PACK(o[4 * n8 + 0] * inv_a, o[4 * n8 + 1] * inv_a);
      }
      if (row_a + 8 < seq_q) {
#pragma unroll
        for (int n8 = 0; n8 < HK_DH / 8; n8++)
          *(unsigned *)(ob + 8 * n8) = HK_AT_PACK(o[4 * n8 + 2] * inv_b, o[4 * n8 + 3] * inv_b);
      }
    }
#if HK_AT_PP
    if (cw == 0) hk_named_sync(HK_AT_BAR(0), 256); /* the last warpgroup's final arrival */
#endif
  }
#undef HK_AT_QFULL
#undef HK_AT_QEMPTY
#undef HK_AT_AUX
#undef HK_AT_KBASE
#undef HK_AT_KFULL
#undef HK_AT_KEMPTY
#undef HK_AT_VFULL
#undef HK_AT_VEMPTY
#undef HK_AT_BAR
#endif /* sm_90a; the variant serves only sm_90a */
}
