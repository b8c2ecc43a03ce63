/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_mfma_pp: C = act(A @ B + bias) * mul + residual on AMD matrix cores with 8 waves in a
 * ping-pong schedule (after HipKittens' 8-wave GEMM, fitted to the 64 KiB of LDS of
 * CDNA1/2). Semantics and ABI of gemm_mfma.hip and gemm.hip:
 *   T A [M, K], T B [K, N] ([N, K] when HK_TRANS_B), T bias [N] or NULL,
 *   T residual [M, N] or NULL, T C [M, N], I M, I N, I K, T mul [M, N] or NULL.
 * Requires (variant_amd.c): f16/bf16, align 8 (K % 8 == 0 and N % 8 == 0, tensors 16-byte
 * aligned), wave64, and K, N < HK_PP_MAX_KN = 2^24 (the kernel traps beyond: the copies'
 * 32-bit offsets).
 *
 * ---- waves and tiles --------------------------------------------------------------------
 * HK_THREADS = 512: 8 waves, wave w = 4 wr + wc in a 2 x 4 grid. Wave (wr, wc) owns the C
 * rows [wr WM, wr WM + WM) and columns [wc WN, wc WN + WN) of the block's HK_BM x HK_BN tile
 * (WM = BM / 2, WN = BN / 4): FM x FN fragments of v_mfma_f32_32x32x8 (16 f32 per lane each).
 * Group = wr: waves 0-3 are group 0, waves 4-7 group 1. CDNA places the waves of a workgroup
 * on the CU's 4 SIMDs in turn, so each SIMD runs one wave of each group (placement is a
 * matter of speed only; the synchronisation below does not depend on it).
 *
 * ---- schedule (per K step s of T = ceil(K / BK) steps) ------------------------------------
 * M(s), memory phase: read the wave's MFMA operands of step s from LDS buffer s % 2 into
 *   registers, then start its share of the copies of a later step (below).
 * C(s), compute phase: the MFMAs of step s at raised priority (s_setprio 1), then wait for
 *   the wave's copies (s_waitcnt vmcnt(0); B stored [K, N]: write the staged registers to
 *   LDS and wait lgkmcnt(0)).
 * Every phase ends with an s_barrier (HK_PP_BARRIER, tile_amd.h). Group 1 passes one extra
 * barrier before its first phase and group 0 one after its last, so both pass as many
 * barriers per tile, and group 1 runs one phase behind group 0: number the slots between
 * barriers from 1 after the prologue's barrier; slot 2s+1 holds group 0's M(s) and group 1's
 * C(s-1), slot 2s+2 group 0's C(s) and group 1's M(s). So on each SIMD one wave issues MFMAs
 * while the other reads LDS and issues loads, and the priority keeps the matrix core fed.
 *
 * Copies (who loads what, `d` steps ahead): in M(s) wave w copies
 *   A: tile rows [w BM/8, w BM/8 + BM/8) of step s+1 -- rows of its own group's half, which
 *      no wave of the other group reads;
 *   B: rows n in [wc WN + wr WN/2, + WN/2) of the LDS B tile (half of the slice read by
 *      waves (0, wc) and (1, wc)) of step s+1 in group 0, of step s+2 in group 1.
 * Every wave copies BM/8 + BN/8 rows of each step.
 * Why this is race-free: a copy started in M(s) has landed by the end of C(s) (the wave
 * waits before that phase's barrier), so it is visible from two slots later.
 *   RAW. Group 0 starts in slot 2s+1: visible from 2s+3, group 0's M(s+1) (and 2s+4, group
 *   1's). Group 1 starts in slot 2s+2, visible from 2s+4: its A rows (step s+1) are read
 *   only by group 1, in M(s+1) = slot 2s+4; its B rows (step s+2) by group 0 in slot 2s+5
 *   and by group 1 in 2s+6.
 *   WAR. A step s+1 copy goes to buffer (s+1) % 2 over step s-1, which was read in slots
 *   2s-1 (group 0) and 2s (group 1), before both groups' copies start (2s+1, 2s+2). Group
 *   1's B rows of step s+2 go to buffer s % 2 in slot 2s+2, over step s's rows of its own
 *   slice: read by wave (0, wc) in slot 2s+1 and by the copying wave itself, which finishes
 *   its reads (lgkmcnt(0)) before it starts the copy.
 *   Prologue: the phases of steps -2 and -1 with nothing to read or multiply, so the same
 *   rules put step 0's rows and group 1's B rows of steps 0 and 1 in place before step 0 is
 *   read. After the last phase group 0's extra barrier meets group 1's last one, so the next
 *   tile's copies overwrite nothing still to be read.
 *
 * ---- LDS layout ---------------------------------------------------------------------------
 * As[2][BM][BK], Bs[2][BN][BK] (B transposed on its way in when stored [K, N]): k-contiguous
 * rows of BK elements (2 BK bytes) with no padding -- the copies need 256 contiguous bytes --
 * and the 16-byte chunks of a row XOR-swizzled instead: logical chunk c of row r is stored
 * at chunk c ^ swz(r), swz(r) = (r / (64 / BK)) % (BK / 8). An MFMA operand is 4 consecutive
 * k of one row (an 8-byte ds_read_b64 inside one chunk); the 8 rows r..r+7 (r % 8 == 0) that
 * 8 consecutive lanes read at the same logical chunk fall on 8 different 16-byte bank
 * groups of the 128-byte bank space, as the padded rows of gemm_mfma.hip do.
 * 2 buffers x (BM + BN) rows x 2 BK bytes: 64 KiB at 256 x 256 x 32.
 *
 * ---- copies into LDS ------------------------------------------------------------------------
 * A and B stored [N, K] (HK_TRANS_B) go straight from global memory to LDS (hk_lds_dma4): one
 * copy moves 256 bytes = RPI = 128 / BK rows of a tile; lane l fills LDS element 2l of
 * them, i.e. row 2l / BK, physical column e = 2l % BK, and so loads logical column
 * k = ((e / 8) ^ swz(row)) 8 + e % 8. Its source offset from the copy's first row is
 * (row offset) K + k elements, below 2^31 bytes for K < HK_PP_MAX_KN. Chunks past M (N) or K
 * (8-element chunks lie wholly inside or outside, K % 8 == 0) are masked: zeros.
 * B stored [K, N] cannot go straight (it must be transposed): 16-byte loads of 8 n of one k
 * into registers in M(s), written to LDS element by element at the end of C(s).
 */
#ifndef HK_BK
#define HK_BK 32
#endif
#define HK_WM (HK_BM / 2) /* wave sub-tile */
#define HK_WN (HK_BN / 4)
#define HK_FM (HK_WM / 32) /* 32x32 fragments per wave */
#define HK_FN (HK_WN / 32)
#define HK_KS (HK_BK / 8)   /* MFMA k-steps of 8 per K step */
#define HK_RPI (128 / HK_BK) /* tile rows per 256-byte copy */
#define HK_PP_MAX_KN (1LL << 24) /* K, N below it: every copy's and load's offsets below 2^31 bytes */
#if HK_THREADS != 512 || HK_BM % 64 != 0 || HK_BN % 128 != 0 || (HK_BK != 32 && HK_BK != 64) || \
    (HK_BM / 8) % HK_RPI != 0 || (HK_BN / 8) % HK_RPI != 0
#error "gemm_mfma_pp: HK_THREADS 512, HK_BM a multiple of 64, HK_BN of 128, HK_BK 32 or 64"
#endif
#if 2 * (HK_BM + HK_BN) * HK_BK * 2 > 65536
#error "gemm_mfma_pp: LDS tiles exceed 64 KiB"
#endif
#if HK_TRANS_B
#define HK_BCH 1 /* (unused: B goes straight to LDS) */
#else
#define HK_BCH (HK_WN * HK_BK / 1024) /* staged 16-byte chunks per lane: (WN/2 n x BK k) / 8 / 64 */
#if HK_BCH < 1 || HK_BCH * 1024 != HK_WN * HK_BK
#error "gemm_mfma_pp: B chunks must divide over a wave"
#endif
#endif

/* The chunk swizzle of tile row `row` (layout above): logical element (row, k) is stored at
 * row BK + ((k / 8) ^ swz(row)) 8 + k % 8. */
HK_DEVICE int hk_pp_swz(int row) { return row / (64 / HK_BK) % (HK_BK / 8); }

/* Copies tile rows [r0, r0 + rows) of one K step straight into `tile`: tile row r is row
 * g0 + r of the row-major X (ld = K elements per row, lim rows), columns k0 .. k0 + BK.
 * Each copy's resource ends at row lim (or RPI rows on), so its lanes past lim read zeros;
 * lanes at columns >= K are masked. r0 is a multiple of 8, the swizzle's period in rows, so
 * the lane's column depends on the copy's place in the run only (2 or 4 distinct values). */
HK_DEVICE void hk_pp_copy_rows(const unsigned short *X, long long g0, long long lim, long long ld, long long k0,
                               unsigned short *tile, int r0, int rows, unsigned lane) {
  const int dr = (int)(2u * lane / HK_BK), e = (int)(2u * lane % HK_BK); /* the lane's row in the copy, LDS column */
  const int kleft = ld - k0 < HK_BK ? (int)(ld - k0) : HK_BK; /* columns left in the step */
  const unsigned row_bytes = (unsigned)ld * 2;                 /* < 2^25: K < HK_PP_MAX_KN */
  const unsigned short *p = X + (g0 + r0) * ld + k0;
  long long left = lim - g0 - r0; /* rows of X from p on */
#pragma unroll
  for (int r = 0; r < rows; r += HK_RPI, p += HK_RPI * ld, left -= HK_RPI) {
    const int k = ((e / 8) ^ hk_pp_swz(r + dr)) * 8 + e % 8;
    const unsigned bytes = left <= 0 ? 0u : (unsigned)(left < HK_RPI ? left : HK_RPI) * row_bytes;
    hk_lds_dma4(p, bytes, tile + (r0 + r) * HK_BK, k < kleft ? dr * row_bytes + 2 * k : HK_DMA_MASKED);
  }
}

/* The wave's MFMA operands of one K step (tile_amd.h layouts): A rows wm0 + 32i + lane % 32,
 * B rows (n) wn0 + 32j + lane % 32, k = 8 kk + 4 (lane / 32) + 0..3. wm0, wn0 and 32i are
 * multiples of 8, so swz() of all of a lane's rows is swz(lane % 32): one offset per kk,
 * and the fragments i, j lie at constant distances (immediate offsets of ds_read_b64). */
HK_DEVICE void hk_pp_read(const unsigned short *as, const unsigned short *bs, int wm0, int wn0, unsigned lane,
                          hk_u16x4 a[HK_KS][HK_FM], hk_u16x4 b[HK_KS][HK_FN]) {
  const int lr = (int)(lane % 32u), lk = (int)(4u * (lane / 32u)), sw = hk_pp_swz(lr);
  const unsigned short *pa = as + (wm0 + lr) * HK_BK + lk, *pb = bs + (wn0 + lr) * HK_BK + lk;
#pragma unroll
  for (int kk = 0; kk < HK_KS; kk++) {
    const int c = (kk ^ sw) * 8; /* logical chunk kk's place in the row */
#pragma unroll
    for (int i = 0; i < HK_FM; i++) a[kk][i] = *(const hk_u16x4 *)(pa + c + 32 * i * HK_BK);
#pragma unroll
    for (int j = 0; j < HK_FN; j++) b[kk][j] = *(const hk_u16x4 *)(pb + c + 32 * j * HK_BK);
  }
}

/* The compute phase: the MFMAs of one K step at raised priority. MFMAs are pure arithmetic
 * to the compiler, which would otherwise move them across s_setprio and the barriers (it
 * did): empty asm statements after s_setprio 1 that "modify" every operand, and before
 * s_setprio 0 that "read" one value of every accumulator, hold them in between (on gfx908
 * the read is one v_accvgpr_read per fragment). */
HK_DEVICE void hk_pp_mfma(hk_u16x4 a[HK_KS][HK_FM], hk_u16x4 b[HK_KS][HK_FN], hk_f32x16 acc[HK_FM][HK_FN]) {
  __builtin_amdgcn_s_setprio(1);
#pragma unroll
  for (int kk = 0; kk < HK_KS; kk++) {
#pragma unroll
    for (int i = 0; i < HK_FM; i++) HK_PIN_DEF(a[kk][i]);
#pragma unroll
    for (int j = 0; j < HK_FN; j++) HK_PIN_DEF(b[kk][j]);
  }
#pragma unroll
  for (int kk = 0; kk < HK_KS; kk++)
#pragma unroll
    for (int i = 0; i < HK_FM; i++)
#pragma unroll
      for (int j = 0; j < HK_FN; j++) acc[i][j] = hk_mfma_32x32x8(a[kk][i], b[kk][j], acc[i][j]);
#pragma unroll
  for (int i = 0; i < HK_FM; i++)
#pragma unroll
    for (int j = 0; j < HK_FN; j++) HK_PIN_USE(acc[i][j][0]);
  __builtin_amdgcn_s_setprio(0);
}

#if !HK_TRANS_B
/* B [K, N]: rows (n) [nb, nb + WN/2) of the LDS B tile of a K step, in 16-byte chunks of 8 n
 * of one k: chunk ci = lane + 64 i is k row kr = ci / (WN/16), n = nb + 8 (ci % (WN/16)).
 * Loaded into registers through a resource that ends with the step's last row or with B,
 * whichever comes first (empty when the wave's first column lies past B's end): rows >= K
 * read zeros; a chunk past column N reads the next row's elements (or zeros after B's end),
 * which reach only C columns >= N (never stored). */
HK_DEVICE void hk_pp_chunk(unsigned lane, int i, unsigned *out_kr, unsigned *out_n) {
  const unsigned ci = lane + 64u * (unsigned)i;
  *out_kr = ci / (HK_WN / 16);
  *out_n = ci % (HK_WN / 16) * 8;
}
HK_DEVICE void hk_pp_load_b(const unsigned short *B, long long N, long long K, long long n0, long long k0, int nb,
                            unsigned lane, hk_u16x8 rb[HK_BCH]) {
  const long long rows = K - k0 < HK_BK ? K - k0 : HK_BK, to_end = K * N - (k0 * N + n0 + nb);
  /* < 2^31 (N < 2^24); none when the wave's columns all lie past N */
  const unsigned bytes = to_end <= 0 ? 0u : (unsigned)((rows * N < to_end ? rows * N : to_end) * 2);
  const unsigned short *p = B + k0 * N + n0 + nb;
#pragma unroll
  for (int i = 0; i < HK_BCH; i++) {
    unsigned kr, n;
    hk_pp_chunk(lane, i, &kr, &n);
    rb[i] = hk_buffer_load16(p, bytes, (unsigned)((kr * N + n) * 2));
  }
}
/* ... and written transposed: element e of the chunk to (row nb + n + e, column kr). nb + n
 * is a multiple of 8, so row nb + n + e has swizzle swz(e), and the element lies at
 * (nb + n + e) BK + (kr ^ 8 swz(e)): one lane-dependent address plus constants. */
HK_DEVICE void hk_pp_store_b(unsigned short *bs, int nb, unsigned lane, const hk_u16x8 rb[HK_BCH]) {
#pragma unroll
  for (int i = 0; i < HK_BCH; i++) {
    unsigned kr, n;
    hk_pp_chunk(lane, i, &kr, &n);
    unsigned short *row = bs + (nb + (int)n) * HK_BK;
#pragma unroll
    for (int e = 0; e < 8; e++) row[e * HK_BK + (int)(kr ^ (8u * (unsigned)hk_pp_swz(e)))] = rb[i][e];
  }
}
#endif

/* What one wave copies for one tile (the copy rules above). */
typedef struct hk_pp_job {
  const unsigned short *A, *B;
  long long M, N, K, m0, n0, n_steps;
  int ar0, br0; /* first A row, first B row (n) this wave copies */
  int bd;       /* B rows go this many steps ahead: 1 in group 0, 2 in group 1 */
  unsigned lane;
} hk_pp_job_t;

/* The copies of phase M(s): A rows of step s + 1, B rows of step s + bd (those within 0..T-1;
 * B stored [K, N]: into the registers rb). */
HK_DEVICE void hk_pp_copies(const hk_pp_job_t *j, long long s, unsigned short (*As)[HK_BM * HK_BK],
                            unsigned short (*Bs)[HK_BN * HK_BK], hk_u16x8 rb[HK_BCH]) {
  const long long sa = s + 1, sb = s + j->bd;
  if (sa >= 0 && sa < j->n_steps)
    hk_pp_copy_rows(j->A, j->m0, j->M, j->K, sa * HK_BK, As[sa & 1], j->ar0, HK_BM / 8, j->lane);
  if (sb >= 0 && sb < j->n_steps) {
#if HK_TRANS_B
    (void)rb;
    hk_pp_copy_rows(j->B, j->n0, j->N, j->K, sb * HK_BK, Bs[sb & 1], j->br0, HK_BN / 8, j->lane);
#else
    (void)Bs;
    hk_pp_load_b(j->B, j->N, j->K, j->n0, sb * HK_BK, j->br0, j->lane, rb);
#endif
  }
}

/* The end of C(s): this wave's copies of M(s) have landed (B stored [K, N]: written to LDS). */
HK_DEVICE void hk_pp_land(const hk_pp_job_t *j, long long s, unsigned short (*Bs)[HK_BN * HK_BK],
                          const hk_u16x8 rb[HK_BCH]) {
  HK_WAIT_VMCNT0();
#if HK_TRANS_B
  (void)j, (void)s, (void)Bs, (void)rb;
#else
  const long long sb = s + j->bd;
  if (sb >= 0 && sb < j->n_steps) hk_pp_store_b(Bs[sb & 1], j->br0, j->lane, rb);
  HK_WAIT_LGKMCNT0();
#endif
}

HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS)
HK_NAME(const HK_T *A, const HK_T *B, const HK_T *bias, const HK_T *residual, HK_T *C, long long M, long long N,
        long long K, const HK_T *mul) {
  __shared__ __attribute__((aligned(16))) unsigned short As[2][HK_BM * HK_BK];
  __shared__ __attribute__((aligned(16))) unsigned short Bs[2][HK_BN * HK_BK];
  if (K >= HK_PP_MAX_KN || N >= HK_PP_MAX_KN) __builtin_trap(); /* the copies' offsets would not fit */
  const unsigned lane = (unsigned)HK_TID % 64u;
  /* wave-uniform in an SGPR, so that the group's extra barriers are scalar branches */
  const int wave = __builtin_amdgcn_readfirstlane(HK_TID / 64);
  const int wr = wave / 4, wc = wave % 4;
  const int wm0 = wr * HK_WM, wn0 = wc * HK_WN;
  const long long col_tiles = (N + HK_BN - 1) / HK_BN;
  const long long n_tiles = (M + HK_BM - 1) / HK_BM * col_tiles;
  hk_pp_job_t job = {(const unsigned short *)A, (const unsigned short *)B, M, N, K, 0, 0, (K + HK_BK - 1) / HK_BK,
                     wave * (HK_BM / 8), wn0 + wr * (HK_WN / 2), 1 + wr, lane};

  for (long long tile = HK_BID; tile < n_tiles; tile += HK_NBLOCKS) {
    /* block-uniform, kept in SGPRs (the 64-bit division is done in vector registers) */
    job.m0 = hk_uniform_i64(tile / col_tiles * HK_BM);
    job.n0 = hk_uniform_i64(tile % col_tiles * HK_BN);
    hk_f32x16 acc[HK_FM][HK_FN];
#pragma unroll
    for (int i = 0; i < HK_FM; i++)
#pragma unroll
      for (int j = 0; j < HK_FN; j++) acc[i][j] = hk_zero_f32x16();
    hk_u16x4 a[HK_KS][HK_FM], b[HK_KS][HK_FN];
    hk_u16x8 rb[HK_BCH]; /* B stored [K, N]: staged on its way to LDS */

    if (wr == 1) HK_PP_BARRIER(); /* group 1 runs one phase behind */
    /* The prologue (steps -2 and -1: copies only). Kept out of the main loop: a conditional
     * MFMA there makes the compiler shuffle the accumulators between registers. */
    for (long long s = -2; s < 0; s++) {
      hk_pp_copies(&job, s, As, Bs, rb);
      HK_PP_BARRIER();
      hk_pp_land(&job, s, Bs, rb);
      HK_PP_BARRIER();
    }
    for (long long s = 0; s < job.n_steps; s++) {
      /* M(s) */
      hk_pp_read(As[s & 1], Bs[s & 1], wm0, wn0, lane, a, b);
      HK_WAIT_LGKMCNT0(); /* operands in registers: the rows may be overwritten now */
      hk_pp_copies(&job, s, As, Bs, rb);
      HK_PP_BARRIER();
      /* C(s) */
      hk_pp_mfma(a, b, acc);
      hk_pp_land(&job, s, Bs, rb);
      HK_PP_BARRIER();
    }
    if (wr == 0) HK_PP_BARRIER(); /* group 0 waits for group 1's last C phase */

    /* epilogue: fragment (i, j) starts at row wm0 + 32i, column wn0 + 32j (gemm_epilogue_mfma.h) */
#pragma unroll
    for (int j = 0; j < HK_FN; j++) {
      const long long gn = job.n0 + wn0 + j * 32 + hk_mfma32_c_col((int)lane);
      if (gn >= N) continue;
      const float bv = hk_mfma_bias(bias, gn);
#pragma unroll
      for (int i = 0; i < HK_FM; i++)
        hk_mfma_store_frag32(acc[i][j], job.m0 + wm0 + i * 32, gn, bv, M, N, residual, mul, C, (int)lane);
    }
  }
}
