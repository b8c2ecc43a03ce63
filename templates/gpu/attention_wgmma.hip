/* SPDX-License-Identifier: Apache-2.0 */
/* attention_wgmma: flash-attention forward on sm_90a with warpgroup MMA (wgmma), f16/bf16,
 * head dim HK_DH (64 or 128), key align 8 (every stride, column offset and dh a multiple
 * of 8 elements, tensors 16-byte aligned). Same ABI and semantics as attention_mma.hip /
 * attention.hip: q [B, Sq, ld_q], k/v [B, Skv, ld_kv], head h at column q_col + h*dh (kv
 * head h / (heads / kv_heads) at k_col/v_col), out [B, Sq, heads*dh], causal masks key
 * j > query i (top-left aligned).
 *
 * Macros (compiler/variant_attention_nv.c): HK_THREADS = 128 * HK_AW_WGS, HK_ATTN_BQ =
 * 64 * HK_AW_WGS query rows per block, HK_ATTN_BKV keys per K/V tile (64 or 128), HK_DH,
 * HK_ATTN_BF16, HK_ATTN_MINB (__launch_bounds__), HK_ATTN_SMEM (dynamic bytes, including
 * 1024 for aligning the base), HK_AW_S / HK_AW_O (the ss / rs wgmma wrappers of
 * tile_wgmma.h for m64n{BKV} and m64n{DH}).
 *
 * A block is one (batch, head, query tile of BQ rows); warpgroup wg owns rows 64wg ..
 * 64wg+63 of the tile, its warp wq rows 64wg + 16wq .. +15. Blocks are numbered as in
 * attention_mma (causal: heaviest tiles first), grid-stride beyond gridDim.x.
 *
 * Shared memory (base aligned to 1024 bytes): Q [BQ][DH], K [2][BKV][DH], V [2][BKV][DH].
 * Each [R][DH] tile is DH/64 panels of [R][64] (R rows of 128 bytes), element (r, e) of
 * panel p = e / 64 at halves p*R*64 + hk_swz128(r, e % 64): 16-byte chunk c of a row
 * stored at c ^ (r & 7). Every panel starts on a 1024-byte boundary, so this is wgmma's
 * 128-byte swizzle; the descriptors (as in gemm_wgmma, which runs on the H200):
 *   S = Q K^T, m64n{BKV}k16, k-step kk (dh 16kk .. 16kk+15), both operands K-major:
 *     A = Q rows of the warpgroup: panel kk/4 + 64wg rows * 128 B + (kk%4) * 32 B, SBO 1024
 *     B = K tile [BKV keys][dh]: panel kk/4 + (kk%4) * 32 B, SBO 1024 (8 keys), TB 0
 *   O += P V, m64n{DH}k16, k-step kk (keys 16kk .. 16kk+15):
 *     A = P from registers: the f32 S accumulator blocks 2kk, 2kk+1 rounded to f16/bf16
 *         (the accumulator layout of m64nN -- warp wq rows 16wq + g, +8, columns 8j + 2t,
 *         +1 -- is the mma.sync C layout, and two n8 blocks make the A fragment)
 *     B = V tile [BKV keys][dh] read N-major (TB 1): start + kk * 16 keys * 128 B, LBO =
 *         the panel stride BKV * 128 B (next 64 dh columns), SBO 1024 (next 8 keys)
 *
 * Pipeline (first version: every thread copies, cp.async double buffer as attention_mma):
 *   Q, K[0] (group), V[0] (group); per key tile jt:
 *     wait K[jt]; fence.proxy.async; barrier; cp.async K[jt+1] (other stage); commit
 *     S = Q K[jt]^T (DH/16 wgmmas, one commit, wait 0); masks; online softmax (log2
 *     domain, f32 statistics, row max/sum across the lane quad); O *= alpha only when a
 *     row max of the warp changed; P packed to f16/bf16
 *     wait V[jt]; fence.proxy.async; barrier; cp.async V[jt+1]; commit
 *     O += P V[jt] (BKV/16 wgmmas, one commit, wait 0)
 *   The barrier before each prefetch also orders it after every warpgroup's wgmma reads
 *   of that stage (each waited for its wgmmas with wait_group 0 before arriving).
 * Causal: key tiles past the block's last row are never loaded; a warpgroup whose rows
 * all lie before a tile skips its wgmmas (warpgroup-uniform), masks only on tiles that
 * cross a warp's diagonal or the sequence end.
 * Epilogue: O / l rounded, staged in the warp's own 16 Q rows (its warpgroup's wgmmas
 * have all completed), 16-byte stores of rows < seq_q. */
#ifndef HK_DH
#error "attention_wgmma: HK_DH (head dim) must be defined"
#endif
#define HK_AW_CH (HK_DH / 8)            /* 16-byte chunks per row */
#define HK_AW_NS (HK_ATTN_BKV / 2)      /* S accumulators per thread (m64n{BKV}) */
#define HK_AW_NO (HK_DH / 2)            /* O accumulators per thread (m64n{DH}) */
#define HK_AW_Q_BYTES (HK_ATTN_BQ * HK_DH * 2)
#define HK_AW_KV_BYTES (HK_ATTN_BKV * HK_DH * 2)
#if (HK_DH != 64 && HK_DH != 128) || (HK_ATTN_BKV != 64 && HK_ATTN_BKV != 128) || HK_AW_WGS < 1 || \
    HK_AW_WGS > 3 || HK_ATTN_BQ != 64 * HK_AW_WGS || HK_THREADS != 128 * HK_AW_WGS || \
    HK_ATTN_SMEM != HK_AW_Q_BYTES + 4 * HK_AW_KV_BYTES + 1024
#error "attention_wgmma: unsupported tile configuration"
#endif

#if HK_ATTN_BF16
#define HK_AW_PACK hk_pack_bf16x2
#else
#define HK_AW_PACK hk_pack_f16x2
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
HK_DEVICE float hk_aw_exp2(float x) { /* ex2.approx: -inf -> +0 */
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* Matrix descriptors as in tile_nv.h hk_wgmma_desc (128-byte swizzle), built from a low
 * word made opaque once per key tile (so that ptxas does not hoist the DH/16 + BKV/16
 * 64-bit descriptors of both stages out of the loop into registers) plus a constant
 * offset: low word = (address >> 4) | (LBO >> 4) << 16, the address < 256 KiB, so adding
 * offset >> 4 never carries out of the 14-bit start field. High word: SBO 1024 >> 4 and
 * the swizzle mode 1 at bit 62. */
HK_DEVICE unsigned hk_aw_desc_lo(const void *smem, unsigned lbo_bytes) {
  unsigned lo = ((hk_smem_u32(smem) & 0x3FFFFu) >> 4) | (((lbo_bytes >> 4) & 0x3FFFu) << 16), r;
  asm volatile("mov.b32 %0, %1;" : "=r"(r) : "r"(lo));
  return r;
}
HK_DEVICE unsigned long long hk_aw_desc(unsigned lo, int off_bytes) {
  return ((unsigned long long)((1024u >> 4) | (1u << 30)) << 32) | (unsigned long long)(lo + (unsigned)(off_bytes >> 4));
}

HK_DEVICE long long hk_aw_pos(long long x) { return x > 0 ? x : 0; }

struct __align__(16) hk_aw_u4 {
  unsigned x, y, z, w;
};

/* Byte offset of 16-byte chunk c (0 .. DH/8-1) of row r in a [R][DH] panelled tile. */
template <int R>
HK_DEVICE int hk_aw_off(int r, int c) {
  return (c >> 3) * (R * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
}

/* cp.async rows row0 .. row0+R-1 of a [n_rows][ld] matrix (columns 0 .. DH-1 from src)
 * into a panelled tile; rows >= n_rows are zero-filled (nothing read). No commit. */
template <int R>
HK_DEVICE void hk_aw_load(unsigned char *dst, const HK_T *src, long long ld, long long row0, long long n_rows,
                          int tid) {
#pragma unroll
  for (int it = 0; it < (R * HK_AW_CH + HK_THREADS - 1) / HK_THREADS; it++) {
    const int i = tid + it * HK_THREADS;
    if ((R * HK_AW_CH) % HK_THREADS == 0 || i < R * HK_AW_CH) {
      const int r = i / HK_AW_CH, c = i % HK_AW_CH;
      const long long row = row0 + r;
      const bool ok = row < n_rows;
      hk_cp_async16(dst + hk_aw_off<R>(r, c), src + (ok ? row * ld + c * 8 : 0), ok);
    }
  }
}
#endif

extern "C" __global__ void __launch_bounds__(HK_THREADS, HK_ATTN_MINB)
HK_NAME(const HK_T *q, const HK_T *k, const HK_T *v, HK_T *out, long long batch, long long seq_q,
        long long seq_kv, long long heads, long long kv_heads, long long dh, long long ld_q, long long ld_kv,
        long long q_col, long long k_col, long long v_col, long long causal, float scale) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char hk_aw_raw[];
  unsigned char *const sq = hk_aw_raw + ((1024u - (hk_smem_u32(hk_aw_raw) & 1023u)) & 1023u);
  unsigned char *const sk = sq + HK_AW_Q_BYTES;     /* 2 stages */
  unsigned char *const sv = sk + 2 * HK_AW_KV_BYTES; /* 2 stages */
  const int tid = HK_TID, lane = tid & 31, wg = tid >> 7, wq = (tid >> 5) & 3;
  const int g = lane >> 2, t = lane & 3;
  const long long group = kv_heads > 0 && heads >= kv_heads ? heads / kv_heads : 1;
  const long long q_tiles = (seq_q + HK_ATTN_BQ - 1) / HK_ATTN_BQ;
  const long long n_blocks = batch * heads * q_tiles;
  const long long ld_o = heads * HK_DH;
  const float sl2 = scale * 1.4426950408889634f; /* scores to the log2 domain */
  (void)dh;                                        /* == HK_DH (the kernel key's head_dim) */

  float o[HK_AW_NO];

  for (long long blk = HK_BID; blk < n_blocks; blk += HK_NBLOCKS) {
    const long long bh = blk / q_tiles, h = bh % heads, b = bh / heads;
    const long long qt = causal ? q_tiles - 1 - blk % q_tiles : blk % q_tiles;
    const long long i0 = qt * HK_ATTN_BQ;
    const HK_T *qb = q + b * seq_q * ld_q + q_col + h * HK_DH;
    const HK_T *kb = k + b * seq_kv * ld_kv + k_col + h / group * HK_DH;
    const HK_T *vb = v + b * seq_kv * ld_kv + v_col + h / group * HK_DH;
    const long long n_keys = causal ? hk_min_ll(seq_kv, i0 + HK_ATTN_BQ) : seq_kv;
    const int n_tiles = (int)((n_keys + HK_ATTN_BKV - 1) / HK_ATTN_BKV);
    const long long g_row0 = i0 + 64 * wg;               /* first query row of the warpgroup */
    const long long w_row0 = g_row0 + 16 * wq;           /* ... of the warp */
    const long long row_a = w_row0 + g, row_b = row_a + 8; /* this lane's two rows */

    HK_SYNC(); /* the previous block's readers of shared memory are done */
    hk_aw_load<HK_ATTN_BQ>(sq, qb, ld_q, i0, seq_q, tid);
    hk_aw_load<HK_ATTN_BKV>(sk, kb, ld_kv, 0LL, n_keys, tid);
    hk_cp_async_commit();
    hk_aw_load<HK_ATTN_BKV>(sv, vb, ld_kv, 0LL, n_keys, tid);
    hk_cp_async_commit();

#pragma unroll
    for (int i = 0; i < HK_AW_NO; i++) o[i] = 0.0f;
    float m_a = -hk_inf(), m_b = -hk_inf(); /* running max (log2 domain) of rows a, b */
    float l_a = 0.0f, l_b = 0.0f;           /* running sums: this lane's columns only */
    const unsigned char *const q_wg = sq + 64 * wg * 128; /* this warpgroup's Q rows, panel 0 */

    for (int jt = 0; jt < n_tiles; jt++) {
      const int st = jt & 1;
      const long long j0 = (long long)jt * HK_ATTN_BKV;
      const unsigned char *const kt = sk + st * HK_AW_KV_BYTES, *const vt = sv + st * HK_AW_KV_BYTES;
      /* the warpgroup has an unmasked key in this tile (causal: its last row reaches j0) */
      const bool active = !causal || j0 <= g_row0 + 63;

      HK_CP_ASYNC_WAIT(1);    /* K[jt] (and before it everything but V[jt]) has landed */
      hk_fence_proxy_async(); /* ... visible to wgmma */
      HK_SYNC();              /* ... for every thread; and S(jt-1) is done with the other K stage */
      if (jt + 1 < n_tiles)
        hk_aw_load<HK_ATTN_BKV>(sk + (st ^ 1) * HK_AW_KV_BYTES, kb, ld_kv, j0 + HK_ATTN_BKV, n_keys, tid);
      hk_cp_async_commit(); /* (possibly empty: keeps the group count uniform) */

      unsigned p[HK_ATTN_BKV / 16][4];
      if (active) {
        /* S = Q K^T; the first k-step overwrites s (scale_d 0): its prior value is dead,
         * so s is not live across the loop */
        float s[HK_AW_NS];
        const unsigned qd = hk_aw_desc_lo(q_wg, 16), kd = hk_aw_desc_lo(kt, 16);
        hk_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HK_DH / 16; kk++) {
          const unsigned long long da = hk_aw_desc(qd, (kk >> 2) * HK_ATTN_BQ * 128 + (kk & 3) * 32);
          const unsigned long long db = hk_aw_desc(kd, (kk >> 2) * HK_ATTN_BKV * 128 + (kk & 3) * 32);
          HK_AW_S<0>(s, da, db, kk > 0);
        }
        hk_wgmma_commit();
        HK_WGMMA_WAIT(0);
#pragma unroll
        for (int i = 0; i < HK_AW_NS; i++) HK_WGMMA_FENCE_REG(s[i]);

        /* masks: keys past the end; causal keys past the row (only on tiles crossing
         * this warp's diagonal). s[4n + e]: row e < 2 ? a : b, key j0 + 8n + 2t + (e & 1) */
        const bool tail = j0 + HK_ATTN_BKV > seq_kv;
        const bool diag = causal && j0 + HK_ATTN_BKV - 1 > w_row0;
        if (tail || diag) {
          /* key j0 + jr is kept in row a (b) when jr < lim_a (lim_b): 32-bit, in [0, BKV] */
          const long long end = hk_min_ll(seq_kv - j0, HK_ATTN_BKV);
          const int lim_a = (int)(causal ? hk_min_ll(end, hk_aw_pos(row_a - j0 + 1)) : end);
          const int lim_b = (int)(causal ? hk_min_ll(end, hk_aw_pos(row_b - j0 + 1)) : end);
#pragma unroll
          for (int n = 0; n < HK_ATTN_BKV / 8; n++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
              const int jr = 8 * n + 2 * t + (e & 1);
              if (jr >= (e < 2 ? lim_a : lim_b)) s[4 * n + e] = -hk_inf();
            }
          }
        }
        /* online softmax in the log2 domain */
        float mx_a = m_a, mx_b = m_b;
#pragma unroll
        for (int n = 0; n < HK_ATTN_BKV / 8; n++) {
          s[4 * n + 0] *= sl2;
          s[4 * n + 1] *= sl2;
          s[4 * n + 2] *= sl2;
          s[4 * n + 3] *= sl2;
          mx_a = fmaxf(mx_a, fmaxf(s[4 * n + 0], s[4 * n + 1]));
          mx_b = fmaxf(mx_b, fmaxf(s[4 * n + 2], s[4 * n + 3]));
        }
        /* the 4 lanes of a quad hold one row's BKV/4 ... columns */
        mx_a = fmaxf(mx_a, hk_shfl_xor(mx_a, 1));
        mx_a = fmaxf(mx_a, hk_shfl_xor(mx_a, 2));
        mx_b = fmaxf(mx_b, hk_shfl_xor(mx_b, 1));
        mx_b = fmaxf(mx_b, hk_shfl_xor(mx_b, 2));
        /* a row with no unmasked key yet keeps max -inf: subtract 0 (p = 0, alpha = 0) */
        const float base_a = mx_a == -hk_inf() ? 0.0f : mx_a;
        const float base_b = mx_b == -hk_inf() ? 0.0f : mx_b;
        const float alpha_a = hk_aw_exp2(m_a - base_a), alpha_b = hk_aw_exp2(m_b - base_b);
        m_a = mx_a;
        m_b = mx_b;
        float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
        for (int n = 0; n < HK_ATTN_BKV / 8; n++) {
          s[4 * n + 0] = hk_aw_exp2(s[4 * n + 0] - base_a);
          s[4 * n + 1] = hk_aw_exp2(s[4 * n + 1] - base_a);
          s[4 * n + 2] = hk_aw_exp2(s[4 * n + 2] - base_b);
          s[4 * n + 3] = hk_aw_exp2(s[4 * n + 3] - base_b);
          sum_a += s[4 * n + 0] + s[4 * n + 1];
          sum_b += s[4 * n + 2] + s[4 * n + 3];
        }
        l_a = fmaf(l_a, alpha_a, sum_a);
        l_b = fmaf(l_b, alpha_b, sum_b);
        /* O *= alpha only when a row of the warp changed its max (warp-uniform branch;
         * alpha == 1 exactly when the max stayed) */
        if (__any_sync(0xffffffffu, alpha_a != 1.0f || alpha_b != 1.0f)) {
#pragma unroll
          for (int n = 0; n < HK_DH / 8; n++) {
            o[4 * n + 0] *= alpha_a;
            o[4 * n + 1] *= alpha_a;
            o[4 * n + 2] *= alpha_b;
            o[4 * n + 3] *= alpha_b;
          }
        }
        /* P as the A fragments of the k-steps of P V: k-step kk = keys 16kk .. 16kk+15 =
         * accumulator blocks 2kk (a0: row a, a1: row b) and 2kk+1 (a2: row a, a3: row b) */
#pragma unroll
        for (int kk = 0; kk < HK_ATTN_BKV / 16; kk++) {
          p[kk][0] = HK_AW_PACK(s[8 * kk + 0], s[8 * kk + 1]);
          p[kk][1] = HK_AW_PACK(s[8 * kk + 2], s[8 * kk + 3]);
          p[kk][2] = HK_AW_PACK(s[8 * kk + 4], s[8 * kk + 5]);
          p[kk][3] = HK_AW_PACK(s[8 * kk + 6], s[8 * kk + 7]);
        }
      }

      HK_CP_ASYNC_WAIT(1);    /* V[jt] has landed (K[jt+1] may be in flight) */
      hk_fence_proxy_async();
      HK_SYNC();              /* ... for every thread; and P V(jt-1) is done with the other V stage */
      if (jt + 1 < n_tiles)
        hk_aw_load<HK_ATTN_BKV>(sv + (st ^ 1) * HK_AW_KV_BYTES, vb, ld_kv, j0 + HK_ATTN_BKV, n_keys, tid);
      hk_cp_async_commit();

      if (active) {
        /* O += P V */
#pragma unroll
        for (int i = 0; i < HK_AW_NO; i++) HK_WGMMA_FENCE_REG(o[i]);
        const unsigned vd = hk_aw_desc_lo(vt, HK_ATTN_BKV * 128);
        hk_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < HK_ATTN_BKV / 16; kk++) {
          const unsigned long long db = hk_aw_desc(vd, kk * 16 * 128);
          HK_AW_O<1>(o, p[kk], db, 1);
        }
        hk_wgmma_commit();
        HK_WGMMA_WAIT(0);
#pragma unroll
        for (int i = 0; i < HK_AW_NO; i++) HK_WGMMA_FENCE_REG(o[i]);
      }
    }
    HK_CP_ASYNC_WAIT(0); /* no copy in flight into the tiles (the last groups are empty) */

    /* epilogue: full row sums across the quad, O / l, staged in this warp's own 16 Q rows
     * (only this warp's warpgroup read them, by wgmmas that have completed), then 16-byte
     * stores of the rows < seq_q */
    l_a += hk_shfl_xor(l_a, 1);
    l_a += hk_shfl_xor(l_a, 2);
    l_b += hk_shfl_xor(l_b, 1);
    l_b += hk_shfl_xor(l_b, 2);
    const float inv_a = 1.0f / l_a, inv_b = 1.0f / l_b;
    const int r_a = 64 * wg + 16 * wq + g; /* rows in the tile */
#pragma unroll
    for (int n = 0; n < HK_DH / 8; n++) {
      *(unsigned *)(sq + hk_aw_off<HK_ATTN_BQ>(r_a, n) + 4 * t) = HK_AW_PACK(o[4 * n + 0] * inv_a, o[4 * n + 1] * inv_a);
      *(unsigned *)(sq + hk_aw_off<HK_ATTN_BQ>(r_a + 8, n) + 4 * t) =
          HK_AW_PACK(o[4 * n + 2] * inv_b, o[4 * n + 3] * inv_b);
    }
    __syncwarp();
    HK_T *ob = out + (b * seq_q + w_row0) * ld_o + h * HK_DH;
#pragma unroll
    for (int it = 0; it < 16 * HK_AW_CH / 32; it++) {
      const int e = lane + 32 * it, r = e / HK_AW_CH, c = e % HK_AW_CH;
      if (w_row0 + r < seq_q)
        *(hk_aw_u4 *)(ob + r * ld_o + c * 8) = *(const hk_aw_u4 *)(sq + hk_aw_off<HK_ATTN_BQ>(64 * wg + 16 * wq + r, c));
    }
  }
#endif /* sm_90a; the variant serves only sm_90a */
}
