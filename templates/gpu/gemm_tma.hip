/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_tma: C = act(A @ B + bias) * mul + residual on sm_90a, warp-specialized, operands
 * loaded by TMA. One producer warp issues cp.async.bulk.tensor copies of A and B k tiles
 * into a shared-memory ring (mbarrier transaction counts); two consumer warpgroups run
 * wgmma m64nNk16 on it (f32 accumulators in registers, one rounding at the end) and write
 * C through a fused epilogue. f16/bf16, K % 8 == 0, N % 8 == 0, 16-byte-aligned tensors
 * (key align 8). Same ABI as gemm.hip, then two tensor maps that libhkrt builds at run time
 * (pack argument kind TMAP, docs/FORMAT.md): tm_a of A as [M][K], box 64 x HK_BM_STAGE,
 * and tm_b of B: HK_TRANS_B: [N][K], box 64 x HK_TILE_N; else [K][N], box 64 x 64; both
 * with the 128-byte swizzle. Rows and columns past the matrix arrive as zeros, so tails
 * need no masking until the epilogue.
 *
 * HK_TMA_STORE (param ts): C leaves through a third (fourth, dual) tensor map tm_c, box 32 x
 * 64, no swizzle, one TMA store per 64 x 32 round of the epilogue (gemm_epilogue_wgmma.h).
 *
 * HK_ROPE (fusion's rope epilogue): C = rope(A @ B + bias), then four arguments after mul:
 * seq, rot_cols, pos0, theta (lower.h). Columns come in heads of HK_ROPE_DH and every tile
 * holds whole heads (HK_TILE_N a multiple of HK_ROPE_DH), so column j < HK_ROPE_DH / 2 of a
 * head and its partner j + HK_ROPE_DH / 2 sit in the same thread's accumulators, HK_ROPE_DH / 16
 * fragments apart; heads at columns < rot_cols turn by the angle (row % seq + pos0) *
 * theta^(-2j / HK_ROPE_DH) (hk_tma_rope: the rope op's formulas, on the f32 sums before their
 * one rounding), the others (a packed q|k|v's v) pass. Shared memory: 3 HK_ROPE_DH / 2 floats
 * of per-column constants after the barriers (hk_tma_rope_table).
 *
 * HK_NORM_A (fusion's folded rmsnorm): A is rmsnorm(A) with the arguments gamma [K] and eps
 * (after mul, B2 and the rope's). The consumers transform each A k tile in shared memory
 * before their wgmmas read it, while the tensor cores still run the previous k tile's group:
 * the unit's threads (256 cooperative, a consumer's 128 ping-pong) take 4 HK_MW 16-byte
 * chunks each -- thread i: chunks 4 (i & 1) .. + 3 of rows i / 2 + (threads / 2) q -- multiply
 * them by gamma (rounded to 16 bits, as the norm's output would be) and sum the squares of
 * the raw values over the unit's k tiles; fence.proxy.async, then a named barrier of the
 * unit's threads (5; 5 + consumer ping-pong) before the first wgmma of the k tile. After the
 * last k tile the two threads of a row add their sums (shuffle), store rsqrt(sum / K + eps)
 * in shared memory (rscale: [HK_BM_STAGE] per consumer), and after the barrier every thread
 * multiplies its accumulators (both sets, dual) by its rows' scales before the epilogue.
 * Needs every k tile of a row in one block: no split-K, no stream-K.
 *
 * HK_NORM_C (fusion's norm epilogue; 1 layernorm, 2 rmsnorm): C = norm(h) over rows of
 * HK_NORM_C_N (= N) columns, h = act(A @ B + bias) * mul + residual rounded to 16 bits (as a
 * norm node reads it), with the arguments gamma [N], beta [N] (layernorm) and eps after mul,
 * then sum: with HK_HAS_SUM h is stored there (the residual stream a pre-norm layer keeps),
 * else in C before it is normalised over itself. The HK_LN_CLUSTER = N /
 * HK_TILE_N blocks of a cluster take the column tiles of one row tile (cluster rank = column
 * tile; clusters stride over row tiles -- the variant launches one cluster per row tile: a
 * persistent grid of clusters would outnumber those the GPCs hold at once and leave the rest
 * for a second wave), cooperative schedule only. Each consumer warpgroup
 * stores h through the plain epilogue, reads its rows of it back (16 bytes per lane, whole
 * lanes per row: HK_TILE_N 64, 128, 192 -- 24 of 32 lanes -- or 256), and writes each row's mean and centred sum of
 * squares (an rmsnorm: its sum of squares) over its columns to shared memory (stats: [2][HK_BM_STAGE] float2, by row tile
 * parity); after a cluster barrier every thread combines the cluster's pairs for its rows
 * from distributed shared memory (Chan et al.'s pairwise formula: no cancellation between
 * blocks), normalises its values and stores them over h (hk_tma_ln). Every thread of every
 * block takes part in one cluster barrier per row tile (the producer thread arrives after
 * issuing the tile's loads and waits one tile later, so its next tile's loads go out under
 * this epilogue) and in one before it exits (no block leaves while a peer may read its
 * statistics). The double buffer makes one barrier per tile enough: a block writes a buffer
 * again two tiles on, after the barrier that every peer passes only once done reading it.
 *
 * HK_DUAL (fusion's dual gemm, SwiGLU): C = act(A @ B + bias) * (A @ B2) + residual, B2 a
 * third tensor map tm_b2 (as tm_b) after tm_b and the pointer B2 after mul; each ring slot
 * holds a B2 tile next to the B tile, each consumer a second set of accumulators, and the
 * epilogue starts from act(acc + bias) * acc2 (hk_tma_dual_combine).
 *
 * Schedules (HK_PINGPONG):
 *   0 cooperative: the block's tile is 128 HK_MW rows x HK_TILE_N; consumer warpgroup c
 *     owns rows [64 HK_MW c, 64 HK_MW (c + 1)) of every k tile in the ring.
 *   1 ping-pong: the block's tiles alternate between the two consumers (local tile i goes
 *     to consumer i % 2), each tile 64 HK_MW x HK_TILE_N; one consumer's epilogue runs
 *     while the other's MMAs use the tensor cores.
 * HK_MW (1 or 2): m64 row blocks per consumer; accumulators per thread HK_MW HK_TILE_N / 2.
 *
 * Macros (compiler/codegen/variants/variant_gemm_nv.c): HK_THREADS = 384, HK_PINGPONG,
 * HK_MW, HK_TILE_N (the wgmma N: 64, 96, 128, 192 or 256, a multiple of 64 unless
 * HK_TRANS_B; HK_WGMMA the matching tile_wgmma.h
 * wrapper), HK_STAGES ring slots, HK_GROUP_M row tiles per L2 raster group, HK_PACK,
 * HK_PRODUCER_REGS / HK_CONSUMER_REGS the setmaxnreg budgets, HK_SPLITK / HK_CM the cluster
 * kinds, HK_STREAMK stream-K's least k tiles per block (0: off).
 *
 * Shared memory (dynamic; base aligned up to 1024 bytes here, launch() asks 1 KiB extra):
 *   A ring  HK_STAGES x [HK_BM_STAGE][64] K-major, 128-byte swizzle (= wgmma's), SBO 1024
 *   B ring  HK_STAGES x (HK_TRANS_B: [HK_TILE_N][64] K-major, as A;
 *                        else HK_TILE_N / 64 panels of [64 k][64 n], N-major, LBO 8192)
 *   E       2 x [64][32] f32: each consumer's epilogue staging (gemm_epilogue_wgmma.h)
 *   S       HK_TMA_STORE only: 2 x 2 x [64][32] halves, each consumer's two output buffers
 *   bars    full[HK_STAGES], empty[HK_STAGES], done[2] (ping-pong order, below)
 *   flags   stream-K only: 2 u32, each consumer's "last piece" answer (hk_tma_sk_finish)
 *   rope    HK_ROPE only: 3 HK_ROPE_DH / 2 f32, the rope's per-column constants
 *   norm    HK_NORM_A only: rscale[2][HK_BM_STAGE] f32, the rows' norm scales (per consumer)
 *   stats   HK_NORM_C only: [2][HK_BM_STAGE] float2, the rows' (mean, centred sum of squares);
 *           an rmsnorm's (sum of squares, 0)
 * TMA writes exactly the layout the wgmma descriptors read (row r of a box at r * 128
 * bytes, 16-byte chunk j at j ^ (r & 7)), as gemm_wgmma_ws's cp.async copies do by hand.
 *
 * Pipeline. Ring use u (k tiles counted over every tile this block loads, in load order,
 * identically in producer and consumers) goes to slot u % S with phase parity (u / S) & 1.
 *   producer (thread 0): wait empty[s] for parity ph ^ 1 (a fresh barrier passes); arrive
 *     on full[s] expecting the stage's bytes; issue the A and B copies on full[s].
 *   consumers: wait full[s] for parity ph; wgmma.fence; 4 x (HK_MW wgmma k16); commit;
 *     wgmma.wait_group 1 -- the previous k tile's group has retired, so lane 0 of each
 *     warp arrives on empty[previous slot] (empty[s] expects 4 arrivals per consumer that
 *     reads the slot: 8 cooperative, 4 ping-pong). After the last k tile: wait_group 0,
 *     release the last slot, then the epilogue.
 *   epilogue: the first round's residual/mul/bias loads issue before the last wait_group;
 *     per 64 rows and 32 columns, accumulators -> E (float2), a warpgroup barrier,
 *     then each thread takes 8 consecutive columns of a row: bias, activation, mul,
 *     residual, one 16-byte store (rows >= M and columns >= N skipped; N % 8 == 0).
 * Tiles: grid-stride (persistent grid, min(tiles, SMs) blocks) in grouped raster order.
 * Work is a sequence of units (a tile and k tiles [kt0, kt1) of it), the same in the producer
 * and the consumers (hk_tma_next): every tile over all of K; split-K clusters: the cluster
 * rank's k range of each tile; stream-K (HK_STREAMK = the least k tiles per block, > 0): the
 * block's data-parallel tiles, then its contiguous range of the remaining tiles' k tiles
 * (gemm_streamk.h). A stream-K unit that is part of a tile stores its f32 partial sums in the
 * launch's scratch (`part`, after the tensor maps) and arrives on the tile's counter (`sem`);
 * the last piece to arrive adds the pieces' partials in k order -- the same bits whichever
 * block is last -- and runs the epilogue (hk_tma_sk_finish; protocol and memory ordering in
 * tile_nv.h, split GEMMs). No block waits for another.
 * Programmatic dependent launch: the prologue (barrier init, tensor map prefetch) runs
 * before griddepcontrol.wait, so a PDL launch overlaps it with the previous kernel. */
#define HK_BM_STAGE ((2 - HK_PINGPONG) * 64 * HK_MW) /* rows of A per ring slot */
#define HK_TMA_A_STAGE (HK_BM_STAGE * 64)            /* halves */
#define HK_TMA_B_STAGE (HK_TILE_N * 64)
#define HK_TMA_NB (1 + HK_DUAL) /* B tiles per ring slot */
#define HK_TMA_NACC (HK_TILE_N / 2)
#define HK_TMA_E_FLOATS (64 * 32)
/* Epilogue reads issued before the last wait_group: where there are some (gemm_epilogue_wgmma.h's
 * hk_epi_in) and the registers are not taken by split-K's or stream-K's reduction. */
#define HK_TMA_EPI_EARLY (HK_SPLITK == 1 && !HK_STREAMK && (HK_HAS_RESIDUAL || (HK_HAS_BIAS && !HK_EPI_PRE)))
/* Where the plain epilogue stores h: a norm epilogue's sum when it keeps one, else C. */
#if HK_NORM_C && HK_HAS_SUM
#define HK_TMA_H ln_sum
#else
#define HK_TMA_H C
#endif
#if HK_TMA_STORE
#define HK_TMA_C_MAP (&tm_c)
#else
#define HK_TMA_C_MAP ((const hk_tmap_t *)0)
#endif
#if HK_THREADS != 384 || (HK_MW != 1 && HK_MW != 2) || (HK_PINGPONG != 0 && HK_PINGPONG != 1) || \
    (HK_TILE_N != 64 && HK_TILE_N != 96 && HK_TILE_N != 128 && HK_TILE_N != 192 && HK_TILE_N != 256) ||        \
    HK_MW * HK_TILE_N * (1 + HK_DUAL) > 256 || HK_STAGES < 2 || (!HK_TRANS_B && HK_TILE_N % 64 != 0) ||            \
    (HK_DUAL && (HK_SPLITK > 1 || HK_CM > 1)) || (HK_STREAMK && (HK_SPLITK > 1 || HK_CM > 1 || HK_DUAL))
#error "gemm_tma: bad tile configuration"
#endif
#ifndef HK_NORM_A
#define HK_NORM_A 0
#endif
#if HK_NORM_A && (HK_SPLITK > 1 || HK_STREAMK)
#error "gemm_tma: a folded norm needs whole rows of A in each block (no split-K, no stream-K)"
#endif
#define HK_NORM_THREADS (HK_PINGPONG ? 128 : 256) /* the threads of a unit */
#if HK_ROPE
#define HK_TMA_ROPE_BYTES (4 * 3 * (HK_ROPE_DH / 2)) /* hk_tma_rope_table's constants */
#else
#define HK_TMA_ROPE_BYTES 0
#endif
#ifndef HK_NORM_C
#define HK_NORM_C 0
#endif
#if HK_NORM_C
#define HK_LN_CLUSTER (HK_NORM_C_N / HK_TILE_N)
#if HK_PINGPONG || HK_SPLITK > 1 || HK_CM > 1 || HK_STREAMK || HK_TMA_STORE || HK_DUAL || HK_ROPE || HK_NORM_A || \
    (HK_TILE_N % 64 != 0) || HK_NORM_C_N % HK_TILE_N != 0 ||                                                       \
    HK_LN_CLUSTER < 1 || HK_LN_CLUSTER > 8
#error "gemm_tma: a norm epilogue needs the cooperative schedule, plain loads and stores, and N in 1..8 tiles of 64, 128, 192 or 256"
#endif
#endif
#if HK_ROPE && (HK_DUAL || HK_ROPE_DH % 16 != 0 || HK_TILE_N % HK_ROPE_DH != 0)
#error "gemm_tma: a rope epilogue needs tiles of whole heads (HK_TILE_N a multiple of HK_ROPE_DH, itself of 16)"
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* Thread-block clusters (split-K): this block's rank, a cluster-wide barrier (every thread
 * of every block of the cluster; release/acquire orders shared-memory writes before it with
 * reads after it, in any block of the cluster), and a 16-byte load from the shared memory of
 * block `rank` at the address that corresponds to local address `addr`. */
HK_DEVICE unsigned hk_cluster_rank(void) {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
HK_DEVICE void hk_cluster_sync(void) {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
/* The barrier's two halves (a thread alternates them; hk_cluster_sync is both at once). */
HK_DEVICE void hk_cluster_arrive(void) { asm volatile("barrier.cluster.arrive.release;\n" ::: "memory"); }
HK_DEVICE void hk_cluster_wait(void) { asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory"); }
HK_DEVICE float4 hk_cluster_ld4(unsigned addr, unsigned rank) {
  unsigned remote;
  float4 v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

/* Tile number -> (m0, n0): groups of HK_GROUP_M row tiles x all column tiles, column-major
 * inside a group. 32-bit: TMA coordinates are 32-bit, and so M, N < 2^31 (launch checks). */
HK_DEVICE void hk_tma_tile(int tile, int tiles_m, int tiles_n, int *m0, int *n0) {
  const int group = HK_GROUP_M * tiles_n;
  const int first_m = tile / group * HK_GROUP_M;
  const int gsize = min(tiles_m - first_m, HK_GROUP_M);
  const int in_group = tile % group;
  *m0 = (first_m + in_group % gsize) * HK_BM_STAGE;
  *n0 = in_group / gsize * HK_TILE_N;
}

/* The block's work: units (tile, k tiles [kt0, kt1)) in the same order in the producer and
 * the consumers, each of which walks its own copy. Without stream-K, tiles next, next +
 * stride, ... below n_tiles, each over [kt0, kt1) (split-K: the cluster rank's range). */
typedef struct hk_tma_sched {
#if HK_STREAMK
  hk_sk_plan_t plan;
  hk_sk_iter_t it;
#else
  int next, stride, n_tiles, kt0, kt1;
#endif
} hk_tma_sched_t;

/* The next unit into *w: 1, or 0 when the block's work is done. */
HK_DEVICE int hk_tma_next(hk_tma_sched_t *s, hk_sk_unit_t *w) {
#if HK_STREAMK
  return hk_sk_next(&s->plan, &s->it, w);
#else
  if (s->next >= s->n_tiles) return 0;
  w->tile = s->next;
  w->kt0 = s->kt0;
  w->kt1 = s->kt1;
  s->next += s->stride;
  return 1;
#endif
}

#if HK_STREAMK
#define HK_TMA_GROUP (HK_PINGPONG ? 128 : 256) /* consumer threads of a unit */
#define HK_TMA_PART_FLOATS (HK_BM_STAGE * HK_TILE_N) /* one partial tile */
#define HK_TMA_SK_BATCH 8 /* partial loads in flight before their sums */
/* Stream-K: this block's piece of a split tile, whose pieces are *q, stores its partial sums
 * (consumer cw's accumulators) in its scratch slot and arrives on the tile's `counter`
 * (tile_nv.h, split GEMMs); returns 1 in the piece that arrives last, with acc = the pieces'
 * partials added in block order (= k order): from the registers for the first piece when it
 * is this block's, else from scratch. Every thread of the unit's group calls it (both
 * consumers cooperative, consumer cw ping-pong); the group's barrier is named barrier 4
 * cooperative, 1 + cw ping-pong (as the epilogue's); `flag` is this consumer's shared word.
 * Partial layout: float4 (w (HK_TMA_NACC / 4) + i) HK_TMA_GROUP + thread of the group. */
HK_DEVICE int hk_tma_sk_finish(float (*acc)[HK_TMA_NACC], float *part, unsigned *counter, const hk_sk_pieces_t *q,
                               int cw, int lt, volatile unsigned *flag) {
  const int gt = HK_PINGPONG ? lt : cw * 128 + lt, bar = HK_PINGPONG ? 1 + cw : 4;
  const long long me = blockIdx.x, first = q->first, last = q->last;
  float *const mine = part + hk_sk_slot(q, me) * HK_TMA_PART_FLOATS;
#pragma unroll
  for (int w = 0; w < HK_MW; w++)
#pragma unroll
    for (int i = 0; i < HK_TMA_NACC / 4; i++)
      hk_st_cg4(mine + ((long long)(w * (HK_TMA_NACC / 4) + i) * HK_TMA_GROUP + gt) * 4, acc[w][4 * i],
                acc[w][4 * i + 1], acc[w][4 * i + 2], acc[w][4 * i + 3]);
  hk_named_sync(bar, HK_TMA_GROUP); /* the group's partial is stored */
  if (gt == 0) *flag = (unsigned)hk_split_arrive(counter, (unsigned)(last - first + 1));
  hk_named_sync(bar, HK_TMA_GROUP); /* the answer is in; the loads below come after the acquire */
  if (!*flag) return 0;
#pragma unroll 1
  for (long long b = first; b <= last; b++) {
    if (b == first && b == me) continue; /* acc is the first piece */
    const float *src = part + hk_sk_slot(q, b) * HK_TMA_PART_FLOATS;
#pragma unroll
    for (int w = 0; w < HK_MW; w++)
#pragma unroll
      for (int i0 = 0; i0 < HK_TMA_NACC / 4; i0 += HK_TMA_SK_BATCH) {
        float4 v[HK_TMA_SK_BATCH];
#pragma unroll
        for (int i = 0; i < HK_TMA_SK_BATCH; i++)
          if (i0 + i < HK_TMA_NACC / 4)
            v[i] = hk_ld_cg4(src + ((long long)(w * (HK_TMA_NACC / 4) + i0 + i) * HK_TMA_GROUP + gt) * 4);
#pragma unroll
        for (int i = 0; i < HK_TMA_SK_BATCH; i++)
          if (i0 + i < HK_TMA_NACC / 4) {
            float *a = &acc[w][4 * (i0 + i)];
            a[0] = b == first ? v[i].x : a[0] + v[i].x;
            a[1] = b == first ? v[i].y : a[1] + v[i].y;
            a[2] = b == first ? v[i].z : a[2] + v[i].z;
            a[3] = b == first ? v[i].w : a[3] + v[i].w;
          }
      }
  }
  return 1;
}
#endif

#if HK_DUAL
/* acc = act(acc + bias) * acc2 over one m64 block's fragments: acc[4j + 2h + e] is column
 * n0 + 8j + 2t + e (tile_wgmma.h's layout); columns >= N are never stored. */
HK_DEVICE void hk_tma_dual_combine(float *acc, const float *acc2, const HK_T *bias, long long n0, long long N, int lt) {
  const int t = lt & 3;
  (void)bias;
  (void)N;
#pragma unroll
  for (int j = 0; j < HK_TMA_NACC / 4; j++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      float b = 0.0f;
#if HK_HAS_BIAS
      const long long col = n0 + 8 * j + 2 * t + e;
      if (col < N) b = HK_LOAD(bias[col]);
#endif
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int i = 4 * j + 2 * h + e;
        acc[i] = HK_ACT(acc[i] + b) * acc2[i];
      }
    }
}
#endif

#if HK_NORM_A
/* This thread's part of one k tile of A in slot `as` ([HK_BM_STAGE][64] halves, 128-byte
 * swizzle: logical chunk c of row r at chunk c ^ (r & 7)), times gamma[k0 ..] in place;
 * ss[q] += the squares of row gt / 2 + (HK_NORM_THREADS / 2) q's raw values in those
 * chunks. gt: the thread in the unit's group. Columns >= K hold zeros (TMA) and take gamma 0. */
HK_DEVICE void hk_tma_norm_tile(unsigned short *as, const HK_T *gamma, long long k0, long long K, int gt,
                                float (&ss)[HK_MW]) {
  uint4 gw[4];
#pragma unroll
  for (int c = 0; c < 4; c++) { /* gamma first: four loads in flight */
    const long long k = k0 + 8 * (4 * (gt & 1) + c);
    gw[c] = k < K ? __ldg((const uint4 *)(gamma + k)) : make_uint4(0u, 0u, 0u, 0u); /* K % 8 == 0 */
  }
#pragma unroll
  for (int q = 0; q < HK_MW; q++) {
    const int r = (gt >> 1) + (HK_NORM_THREADS / 2) * q;
    uint4 w[4];
#pragma unroll
    for (int c = 0; c < 4; c++) w[c] = *((const uint4 *)(as + r * 64) + ((4 * (gt & 1) + c) ^ (r & 7)));
#pragma unroll
    for (int c = 0; c < 4; c++) {
      const unsigned x[4] = {w[c].x, w[c].y, w[c].z, w[c].w}, g[4] = {gw[c].x, gw[c].y, gw[c].z, gw[c].w};
      unsigned y[4];
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float lo = HK_LOAD((unsigned short)(x[e] & 0xffffu)), hi = HK_LOAD((unsigned short)(x[e] >> 16));
        ss[q] = fmaf(lo, lo, fmaf(hi, hi, ss[q]));
        y[e] = HK_PACK(lo * HK_LOAD((unsigned short)(g[e] & 0xffffu)), hi * HK_LOAD((unsigned short)(g[e] >> 16)));
      }
      *((uint4 *)(as + r * 64) + ((4 * (gt & 1) + c) ^ (r & 7))) = make_uint4(y[0], y[1], y[2], y[3]);
    }
  }
}

/* acc (and a dual's acc2) rows times their norm scale: acc[4j + 2h + e] is row 16 wq + g + 8h
 * of the m64 block, whose scale is rs[h]. */
HK_DEVICE void hk_tma_norm_scale(float *acc, const float (&rs)[2]) {
#pragma unroll
  for (int i = 0; i < HK_TMA_NACC; i++) acc[i] *= rs[(i >> 1) & 1];
}
#endif

#if HK_NORM_C
/* A 64-bit load from the shared memory of block `rank` at local address `addr`. */
HK_DEVICE float2 hk_cluster_ld2(unsigned addr, unsigned rank) {
  unsigned remote;
  float2 v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(remote) : "memory");
  return v;
}

/* The norm epilogue of one consumer warpgroup (HK_NORM_C, above): rows row0 .. row0 +
 * 64 HK_MW - 1, columns n0 .. n0 + HK_TILE_N - 1 of h, which its plain epilogue has stored in
 * H (the kept sum, or C; that epilogue ends with the warpgroup's named barrier: the stores come
 * before the loads here); the normalised rows go to C.
 * Warp w takes rows 16 HK_MW w .., HK_LN_R rows per step, HK_LN_L lanes per row, the first
 * HK_TILE_N / 8 of which hold 8 columns each (bn 192: 24 of 32 lanes; the others hold
 * nothing). stats: this tile's buffer; srow0: the warpgroup's first row in it; E, bar: the
 * warpgroup's staging (here: its rows' mean and rstd) and named barrier. */
#define HK_LN_L (HK_TILE_N == 192 ? 32 : HK_TILE_N / 8)
#define HK_LN_R (32 / HK_LN_L)
#define HK_LN_STEPS (16 * HK_MW / HK_LN_R)
#define HK_LN_CH (HK_LN_STEPS < 8 ? HK_LN_STEPS : 8)
HK_DEVICE void hk_tma_ln(HK_T *C, const HK_T *H, const HK_T *gamma, const HK_T *beta, float eps, float2 *stats,
                         int srow0, float *E, int bar, long long row0, long long n0, long long M, long long N, int lt) {
  const int warp = lt >> 5, lane = lt & 31, sub = lane / HK_LN_L, col = n0 + 8 * (lane % HK_LN_L);
  const bool holds = lane % HK_LN_L < HK_TILE_N / 8; /* bn 192: lanes 24.. hold nothing */
  uint4 v[HK_LN_STEPS];
  const HK_T *const c_base = H + col; /* h: in sum (HK_HAS_SUM) or in C */
#pragma unroll
  for (int s = 0; s < HK_LN_STEPS; s++) {
    const long long row = row0 + 16 * HK_MW * warp + HK_LN_R * s + sub;
    v[s] = holds && row < M ? *(const uint4 *)(c_base + row * N) : make_uint4(0u, 0u, 0u, 0u);
  }
  /* this block's columns: the mean, then the centred sum of squares (two passes in registers),
   * HK_LN_CH rows at a time (their shuffles in flight together) */
#pragma unroll
  for (int s0 = 0; s0 < HK_LN_STEPS; s0 += HK_LN_CH) {
    float mean[HK_LN_CH], m2[HK_LN_CH];
#pragma unroll
    for (int c = 0; c < HK_LN_CH; c++) {
      const unsigned w[4] = {v[s0 + c].x, v[s0 + c].y, v[s0 + c].z, v[s0 + c].w};
      float sum = 0.0f;
#pragma unroll
      for (int e = 0; e < 4; e++) sum += HK_LOAD((unsigned short)(w[e] & 0xffffu)) + HK_LOAD((unsigned short)(w[e] >> 16));
      mean[c] = sum;
    }
#pragma unroll
    for (int o = HK_LN_L / 2; o > 0; o >>= 1)
#pragma unroll
      for (int c = 0; c < HK_LN_CH; c++)
        if (HK_NORM_C != 2) mean[c] += __shfl_xor_sync(0xffffffffu, mean[c], o);
#pragma unroll
    for (int c = 0; c < HK_LN_CH; c++) {
      mean[c] = HK_NORM_C == 2 ? 0.0f : mean[c] * (1.0f / (float)HK_TILE_N); /* an rmsnorm: squares about 0 */
      const unsigned w[4] = {v[s0 + c].x, v[s0 + c].y, v[s0 + c].z, v[s0 + c].w};
      float q = 0.0f;
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float lo = HK_LOAD((unsigned short)(w[e] & 0xffffu)) - mean[c],
                    hi = HK_LOAD((unsigned short)(w[e] >> 16)) - mean[c];
        q = fmaf(lo, lo, fmaf(hi, hi, q));
      }
      m2[c] = holds ? q : 0.0f;
    }
#pragma unroll
    for (int o = HK_LN_L / 2; o > 0; o >>= 1)
#pragma unroll
      for (int c = 0; c < HK_LN_CH; c++) m2[c] += __shfl_xor_sync(0xffffffffu, m2[c], o);
    if (lane % HK_LN_L == 0)
#pragma unroll
      for (int c = 0; c < HK_LN_CH; c++)
        stats[srow0 + 16 * HK_MW * warp + HK_LN_R * (s0 + c) + sub] = make_float2(mean[c], m2[c]);
  }
  hk_cluster_arrive(); /* every block's statistics of these rows are in */
  hk_cluster_wait();
  /* Thread lt < 64 HK_MW combines row lt's pairs from every block of the cluster (their
   * loads all in flight: one round trip of distributed shared memory, not one per row) into
   * (mean, rstd) in E, free after the epilogue. */
  if (lt < 64 * HK_MW) {
    float2 p[HK_LN_CLUSTER];
#pragma unroll
    for (int k = 0; k < HK_LN_CLUSTER; k++) p[k] = hk_cluster_ld2(hk_smem_u32(stats + srow0 + lt), (unsigned)k);
    float mu = 0.0f;
#pragma unroll
    for (int k = 0; k < HK_LN_CLUSTER; k++) mu += p[k].x;
    mu *= 1.0f / (float)HK_LN_CLUSTER; /* equal counts: the mean of the blocks' means (an rmsnorm's: 0) */
    float ss = 0.0f, dd = 0.0f;
#pragma unroll
    for (int k = 0; k < HK_LN_CLUSTER; k++) {
      const float d = p[k].x - mu;
      ss += p[k].y;
      dd = fmaf(d, d, dd);
    }
    ((float2 *)E)[lt] = make_float2(mu, rsqrtf((ss + (float)HK_TILE_N * dd) * (1.0f / (float)HK_NORM_C_N) + eps));
  }
  hk_named_sync(bar, 128);
  /* gamma and beta of this lane's 8 columns, packed (unpacked per use: registers) */
  const uint4 gw = holds ? *(const uint4 *)(gamma + col) : make_uint4(0u, 0u, 0u, 0u), /* N % 8 == 0 */
      bw = holds && HK_NORM_C != 2 ? *(const uint4 *)(beta + col) : make_uint4(0u, 0u, 0u, 0u);
  const unsigned gs[4] = {gw.x, gw.y, gw.z, gw.w}, bs[4] = {bw.x, bw.y, bw.z, bw.w};
#pragma unroll
  for (int s = 0; s < HK_LN_STEPS; s++) {
    const int r = 16 * HK_MW * warp + HK_LN_R * s + sub;
    const float2 mr = ((const float2 *)E)[r];
    const float mu = mr.x, rstd = mr.y;
    const long long row = row0 + r;
    const unsigned w[4] = {v[s].x, v[s].y, v[s].z, v[s].w};
    unsigned y[4];
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const float lo = HK_LOAD((unsigned short)(w[e] & 0xffffu)), hi = HK_LOAD((unsigned short)(w[e] >> 16));
#if HK_NORM_C == 2 /* rmsnorm: x rstd gamma (no mean, no beta) */
      y[e] = HK_PACK(lo * rstd * HK_LOAD((unsigned short)(gs[e] & 0xffffu)),
                     hi * rstd * HK_LOAD((unsigned short)(gs[e] >> 16)));
#else
      y[e] = HK_PACK((lo - mu) * rstd * HK_LOAD((unsigned short)(gs[e] & 0xffffu)) + HK_LOAD((unsigned short)(bs[e] & 0xffffu)),
                     (hi - mu) * rstd * HK_LOAD((unsigned short)(gs[e] >> 16)) + HK_LOAD((unsigned short)(bs[e] >> 16)));
#endif
    }
    if (holds && row < M) *(uint4 *)(C + row * N + col) = make_uint4(y[0], y[1], y[2], y[3]);
  }
  hk_named_sync(bar, 128); /* E is the next tile's epilogue staging */
}
#endif

#if HK_ROPE
/* The rope's per-column constants, in shared memory for the whole launch (filled once per
 * block before the tiles, hk_tma_rope_table): for j < HK_ROPE_DH / 2, inv_freq[j] =
 * theta^(-2j / HK_ROPE_DH) (the rope op's powf), then cos and sin of 8 inv_freq[j] (the turn
 * from a thread's row to its row + 8). */
HK_DEVICE void hk_tma_rope_table(float *tab, float theta, int tid) {
  const float dh = (float)HK_ROPE_DH;
  for (int j = tid; j < HK_ROPE_DH / 2; j += HK_THREADS) {
    const float inv_freq = powf(theta, -(float)(2 * j) / dh);
    float s8, c8;
    hk_rope_sincos(8.0f * inv_freq, &s8, &c8);
    tab[j] = inv_freq;
    tab[HK_ROPE_DH / 2 + j] = c8;
    tab[HK_ROPE_DH + j] = s8;
  }
}

/* acc = rope(acc + bias) over one m64 block (rows row0.., columns n0.., n0 a multiple of
 * HK_ROPE_DH): acc[4j + 2h + e] is row row0 + 16 wq + g + 8h, column n0 + 8j + 2t + e
 * (tile_wgmma.h). The angles depend on the row's position and the column within the head
 * only: per column of its half heads a thread takes sin and cos of its first row's angle
 * (p inv_freq, rounded to f32 as the rope op's) and turns them by 8 inv_freq for its second
 * row (8 positions on, unless a sequence starts between them), then turns the pair in every
 * rotated head of the tile (columns < rot_cols, a multiple of HK_ROPE_DH). Columns >= N and
 * rows >= M hold zeros or sums that are never stored. */
HK_DEVICE void hk_tma_rope(float *acc, const HK_T *bias, const float *tab, long long row0, long long n0, long long N,
                           long long seq, long long rot_cols, long long pos0, int lt) {
  const int lane = lt & 31, wq = lt >> 5, g = lane >> 2, t = lane & 3;
  (void)bias;
  (void)N;
#if HK_HAS_BIAS
#pragma unroll
  for (int j = 0; j < HK_TMA_NACC / 4; j++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const long long col = n0 + 8 * j + 2 * t + e;
      const float b = col < N ? HK_LOAD(bias[col]) : 0.0f;
      acc[4 * j + e] += b;
      acc[4 * j + 2 + e] += b;
    }
#endif
  if (n0 >= rot_cols) return; /* v heads (or past N): stored as they are */
  const long long p0 = (row0 + 16 * wq + g) % seq + pos0, p1 = (row0 + 16 * wq + g + 8) % seq + pos0;
  const bool next = p1 == p0 + 8; /* the second row is 8 positions on */
#pragma unroll
  for (int jj = 0; jj < HK_ROPE_DH / 16; jj++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const int jc = 8 * jj + 2 * t + e;
      const float inv_freq = tab[jc];
      float sn[2], cs[2];
      hk_rope_sincos((float)p0 * inv_freq, &sn[0], &cs[0]);
      if (next) {
        const float c8 = tab[HK_ROPE_DH / 2 + jc], s8 = tab[HK_ROPE_DH + jc];
        cs[1] = cs[0] * c8 - sn[0] * s8;
        sn[1] = sn[0] * c8 + cs[0] * s8;
      } else {
        hk_rope_sincos((float)p1 * inv_freq, &sn[1], &cs[1]);
      }
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int hd = 0; hd < HK_TILE_N / HK_ROPE_DH; hd++)
          if (n0 + hd * HK_ROPE_DH < rot_cols) {
            const int i1 = 4 * (hd * (HK_ROPE_DH / 8) + jj) + 2 * h + e, i2 = i1 + 4 * (HK_ROPE_DH / 16);
            const float x1 = acc[i1], x2 = acc[i2];
            acc[i1] = x1 * cs[h] - x2 * sn[h];
            acc[i2] = x2 * cs[h] + x1 * sn[h];
          }
    }
}
#endif

#endif

#if HK_SPLITK > 1 && HK_CM > 1
#error "gemm_tma: split-K and multicast clusters are exclusive"
#elif HK_SPLITK > 1
#define HK_TMA_CLUSTER __cluster_dims__(HK_SPLITK, 1, 1)
#elif HK_CM > 1
#define HK_TMA_CLUSTER __cluster_dims__(HK_CM, 1, 1)
#elif HK_NORM_C
#define HK_TMA_CLUSTER __cluster_dims__(HK_LN_CLUSTER, 1, 1)
#else
#define HK_TMA_CLUSTER
#endif
HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS) HK_TMA_CLUSTER
HK_NAME(const HK_T *A, const HK_T *B, const HK_T *bias, const HK_T *residual, HK_T *C, long long M, long long N,
        long long K, const HK_T *mul,
#if HK_DUAL
        const HK_T *B2,
#endif
#if HK_ROPE
        long long rope_seq, long long rope_cols, long long rope_pos0, float rope_theta,
#endif
#if HK_NORM_A
        const HK_T *norm_gamma, float norm_eps,
#endif
#if HK_NORM_C
        const HK_T *ln_gamma, const HK_T *ln_beta, float ln_eps, HK_T *ln_sum,
#endif
        const __grid_constant__ hk_tmap_t tm_a, const __grid_constant__ hk_tmap_t tm_b
#if HK_DUAL
        , const __grid_constant__ hk_tmap_t tm_b2
#endif
#if HK_TMA_STORE
        , const __grid_constant__ hk_tmap_t tm_c
#endif
#if HK_STREAMK
        , float *part, unsigned *sem
#endif
        ) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char hk_smem_raw[];
  unsigned short *const As = (unsigned short *)(hk_smem_raw + ((1024u - (hk_smem_u32(hk_smem_raw) & 1023u)) & 1023u));
  unsigned short *const Bs = As + HK_STAGES * HK_TMA_A_STAGE; /* slot s: B tile, then (dual) the B2 tile */
  float *const Es = (float *)(Bs + HK_STAGES * HK_TMA_NB * HK_TMA_B_STAGE);
  unsigned short *const Ss = (unsigned short *)(Es + 2 * HK_TMA_E_FLOATS); /* HK_TMA_STORE: 2 x 2 output buffers */
  const unsigned bars = hk_smem_u32(Ss + HK_TMA_STORE * 4 * HK_EPI_S_HALVES);
#define HK_TMA_FULL(s) (bars + 8u * (unsigned)(s))
#define HK_TMA_EMPTY(s) (bars + 8u * (unsigned)(HK_STAGES + (s)))
#define HK_TMA_DONE(c) (bars + 8u * (unsigned)(2 * HK_STAGES + (c))) /* ping-pong: consumer c's mainloops */
#if HK_STREAMK
  volatile unsigned *const sk_flags = /* after the barriers */
      (volatile unsigned *)(Ss + HK_TMA_STORE * 4 * HK_EPI_S_HALVES) + 2 * (2 * HK_STAGES + 2);
#endif
#if HK_ROPE /* after the barriers (and stream-K's flags) */
  float *const rope_tab =
      (float *)(Ss + HK_TMA_STORE * 4 * HK_EPI_S_HALVES) + 2 * (2 * HK_STAGES + 2) + (HK_STREAMK ? 2 : 0);
  hk_tma_rope_table(rope_tab, rope_theta, HK_TID); /* read after the block's first barrier */
#endif
#if HK_NORM_A /* after those: rscale[2][HK_BM_STAGE] */
  float *const rscale = (float *)((unsigned char *)(Ss + HK_TMA_STORE * 4 * HK_EPI_S_HALVES) + 8 * (2 * HK_STAGES + 2) +
                                  (HK_STREAMK ? 8 : 0) + HK_TMA_ROPE_BYTES);
#endif
#if HK_NORM_C /* directly after the barriers (no stream-K, rope or folded norm with it) */
  float2 *const ln_stats = (float2 *)((unsigned char *)(Ss + HK_TMA_STORE * 4 * HK_EPI_S_HALVES) + 8 * (2 * HK_STAGES + 2));
#endif
  const int tid = HK_TID, wg = tid >> 7;
  /* Multicast clusters (HK_CM = 2): the two blocks of a cluster take row tiles 2 i and
   * 2 i + 1 of the same column tile (hk_tma_tile counts row-tile pairs; a pair's second tile
   * past M computes zeros that the epilogue masks) and share B: each loads half of the B
   * tile into both blocks' rings. */
  /* A norm epilogue's cluster takes whole rows: its blocks' column tiles by rank, so the
   * work is row tiles only (tiles_n 1; n0 = rank x HK_TILE_N below). */
  const int tiles_m = (int)((M + HK_BM_STAGE * HK_CM - 1) / (HK_BM_STAGE * HK_CM)),
            tiles_n = HK_NORM_C ? 1 : (int)((N + HK_TILE_N - 1) / HK_TILE_N);
  const int n_tiles = tiles_m * tiles_n;
  /* Work: tiles from `first` by `stride`, each over k tiles [kt0, kt1). Split-K: cluster
   * rank r of the cluster for tile blockIdx.x / S takes the r-th of S near-equal k ranges. */
#if HK_SPLITK > 1
  const unsigned rank = hk_cluster_rank();
  const int first = blockIdx.x / HK_SPLITK, stride = gridDim.x / HK_SPLITK;
  const int k_all = (int)((K + 63) / 64);
  const int kt0 = (int)((long long)k_all * rank / HK_SPLITK), kt1 = (int)((long long)k_all * (rank + 1) / HK_SPLITK);
#elif HK_CM > 1
  const unsigned rank = hk_cluster_rank();
  const int first = blockIdx.x / HK_CM, stride = gridDim.x / HK_CM;
  const int kt0 = 0, kt1 = (int)((K + 63) / 64);
#elif HK_NORM_C
  const unsigned rank = hk_cluster_rank();
  const int first = blockIdx.x / HK_LN_CLUSTER, stride = gridDim.x / HK_LN_CLUSTER;
  const int kt0 = 0, kt1 = (int)((K + 63) / 64);
#else
  const unsigned rank = 0;
  const int first = blockIdx.x, stride = gridDim.x;
  const int kt0 = 0, kt1 = (int)((K + 63) / 64);
#endif
#if HK_STREAMK
  hk_tma_sched_t sched0;
  sched0.plan = hk_sk_plan(n_tiles, kt1, gridDim.x);
  hk_sk_start(&sched0.plan, blockIdx.x, &sched0.it);
  (void)first;
  (void)stride;
#else
  const hk_tma_sched_t sched0 = {first, stride, n_tiles, kt0, kt1};
#endif
  (void)A;
  (void)B;

  if (tid == 0) {
    hk_tma_prefetch_map(&tm_a);
    hk_tma_prefetch_map(&tm_b);
#if HK_DUAL
    hk_tma_prefetch_map(&tm_b2);
#endif
#pragma unroll
    for (int s = 0; s < HK_STAGES; s++) {
      hk_mbar_init(HK_TMA_FULL(s), 1u);                      /* the producer's expect_tx arrival */
      hk_mbar_init(HK_TMA_EMPTY(s), (HK_PINGPONG ? 4u : 8u) * HK_CM); /* lane 0 of each reading consumer warp,
                                                                        of every block the slot's B goes to */
    }
    hk_mbar_init(HK_TMA_DONE(0), 4u); /* lane 0 of each of the consumer's warps */
    hk_mbar_init(HK_TMA_DONE(1), 4u);
    hk_mbar_init_fence();
  }
  HK_SYNC(); /* the barriers are initialised before anyone uses them */
  /* PDL: the next kernel may start its prologue; this one's prologue (above: barriers, tensor
   * map prefetch) ran under the previous kernel's tail, and nothing of global memory is read
   * or written before the wait. */
  hk_pdl_launch_dependents();
  hk_pdl_wait();
#if HK_CM > 1
  hk_cluster_sync(); /* ... in both blocks of the cluster (multicast copies and remote arrivals) */
#endif

  if (wg == 0) {
    /* ---- producer: one thread issues every copy ---- */
    HK_SETMAXNREG_DEC(HK_PRODUCER_REGS);
    if (tid == 0) {
      unsigned u = 0;
      const unsigned a_ring = hk_smem_u32(As), b_ring = hk_smem_u32(Bs);
      hk_tma_sched_t sched = sched0;
      hk_sk_unit_t work;
#if HK_NORM_C
      int ln_tiles = 0; /* row tiles whose loads have gone out */
#endif
      while (hk_tma_next(&sched, &work)) {
        int m0, n0;
        hk_tma_tile((int)work.tile, tiles_m, tiles_n, &m0, &n0);
        m0 = m0 * HK_CM + (HK_CM > 1 ? (int)rank * HK_BM_STAGE : 0); /* split-K ranks share the tile */
        if (HK_NORM_C) n0 = (int)rank * HK_TILE_N;
        for (int kt = (int)work.kt0; kt < (int)work.kt1; kt++, u++) {
          const unsigned s = u % HK_STAGES, ph = (u / HK_STAGES) & 1u;
          hk_mbar_wait(HK_TMA_EMPTY(s), ph ^ 1u); /* the consumers released this slot's previous use */
          hk_mbar_expect_tx(HK_TMA_FULL(s), (unsigned)(HK_TMA_A_STAGE + HK_TMA_NB * HK_TMA_B_STAGE) * 2u);
          const int k0 = kt * 64;
          hk_tma_load_2d(a_ring + s * (HK_TMA_A_STAGE * 2), &tm_a, k0, m0, HK_TMA_FULL(s));
#if HK_CM > 1 && HK_TRANS_B /* rows [rank B / 2, (rank + 1) B / 2) of the B tile, to both blocks */
          hk_tma_load_2d_mc(b_ring + s * (HK_TMA_NB * HK_TMA_B_STAGE * 2) + rank * (HK_TILE_N / 2) * 128, &tm_b, k0,
                            n0 + (int)rank * (HK_TILE_N / 2), HK_TMA_FULL(s), 3);
#elif HK_CM > 1 /* panels rank, rank + 2, ... of the B tile, to both blocks */
          for (int p = (int)rank; p < HK_TILE_N / 64; p += 2)
            hk_tma_load_2d_mc(b_ring + s * (HK_TMA_NB * HK_TMA_B_STAGE * 2) + p * 8192, &tm_b, n0 + 64 * p, k0, HK_TMA_FULL(s), 3);
#elif HK_TRANS_B
          hk_tma_load_2d(b_ring + s * (HK_TMA_NB * HK_TMA_B_STAGE * 2), &tm_b, k0, n0, HK_TMA_FULL(s));
#if HK_DUAL
          hk_tma_load_2d(b_ring + s * (HK_TMA_NB * HK_TMA_B_STAGE * 2) + HK_TMA_B_STAGE * 2, &tm_b2, k0, n0, HK_TMA_FULL(s));
#endif
#else
#pragma unroll
          for (int p = 0; p < HK_TILE_N / 64; p++) {
            hk_tma_load_2d(b_ring + s * (HK_TMA_NB * HK_TMA_B_STAGE * 2) + p * 8192, &tm_b, n0 + 64 * p, k0, HK_TMA_FULL(s));
#if HK_DUAL
            hk_tma_load_2d(b_ring + s * (HK_TMA_NB * HK_TMA_B_STAGE * 2) + HK_TMA_B_STAGE * 2 + p * 8192, &tm_b2,
                           n0 + 64 * p, k0, HK_TMA_FULL(s));
#endif
          }
#endif
        }
#if HK_SPLITK > 1
        hk_cluster_sync(); /* the consumers' two cluster barriers of this tile (below) */
        hk_cluster_sync();
#elif HK_NORM_C
        /* the row tile's statistics barrier (hk_tma_ln): arrive now, wait after the next
         * tile's loads have gone out */
        if (ln_tiles++ > 0) hk_cluster_wait();
        hk_cluster_arrive();
#endif
      }
#if HK_NORM_C
      if (ln_tiles > 0) hk_cluster_wait();
#endif
    }
#if HK_SPLITK > 1 || HK_NORM_C
    else {
      hk_tma_sched_t sched = sched0;
      hk_sk_unit_t work;
      while (hk_tma_next(&sched, &work)) { /* the other producer threads, likewise */
        hk_cluster_sync();
        if (HK_SPLITK > 1) hk_cluster_sync();
      }
    }
#endif
  } else {
    /* ---- consumers ---- */
    HK_SETMAXNREG_INC(HK_CONSUMER_REGS);
    const int cw = wg - 1, lt = tid & 127, lane = tid & 31;
    float *const E = Es + cw * HK_TMA_E_FLOATS;
    unsigned short *const S = Ss + cw * 2 * HK_EPI_S_HALVES;
    (void)S;
    unsigned u = 0;
    unsigned local = 0; /* this block's unit count so far */
    hk_tma_sched_t sched = sched0;
    hk_sk_unit_t work;
    for (; hk_tma_next(&sched, &work); local++) {
      const int k_tiles = (int)(work.kt1 - work.kt0);
      if (HK_PINGPONG && (local & 1) != cw) { /* the other consumer's unit: skip its ring uses */
        u += (unsigned)k_tiles;
#if HK_SPLITK > 1
        hk_cluster_sync(); /* ... and take part in its two cluster barriers */
        hk_cluster_sync();
#endif
        continue;
      }
      /* Ping-pong order: this tile's mainloop starts when the other consumer's mainloop of
       * the block's previous tile has finished (its phase local / 2 - 1 + cw of DONE). That
       * keeps the two mainloops apart -- one consumer's epilogue runs under the other's
       * MMAs -- and the ring uses in order, so no consumer waits on a slot more than one
       * phase ahead of it (mbarrier parity would alias). */
      if (HK_PINGPONG && local > 0) hk_mbar_wait(HK_TMA_DONE(1 - cw), ((local - 1) >> 1) & 1u);
      int m0, n0;
      hk_tma_tile((int)work.tile, tiles_m, tiles_n, &m0, &n0);
      m0 = m0 * HK_CM + (HK_CM > 1 ? (int)rank * HK_BM_STAGE : 0); /* split-K ranks share the tile */
      if (HK_NORM_C) n0 = (int)rank * HK_TILE_N; /* the cluster's blocks: a row tile's column tiles */
#if HK_STREAMK /* a split tile's pieces: computed before the accumulators are live (divisions) */
      const int split = hk_sk_split(&sched.plan, &work);
      const hk_sk_pieces_t pieces = split ? hk_sk_pieces(&sched.plan, work.tile) : hk_sk_pieces_t{0, 0, 0};
#endif

      float acc[HK_MW][HK_TMA_NACC];
#pragma unroll
      for (int w = 0; w < HK_MW; w++)
#pragma unroll
        for (int i = 0; i < HK_TMA_NACC; i++) acc[w][i] = 0.0f; /* also the sum of an empty k range (split-K) */
#if HK_DUAL
      float acc2[HK_MW][HK_TMA_NACC]; /* A @ B2 */
#pragma unroll
      for (int w = 0; w < HK_MW; w++)
#pragma unroll
        for (int i = 0; i < HK_TMA_NACC; i++) acc2[w][i] = 0.0f;
#define HK_TMA_FENCE_ACC()                                                                                             \
  do {                                                                                                                 \
    _Pragma("unroll") for (int w = 0; w < HK_MW; w++) _Pragma("unroll") for (int i = 0; i < HK_TMA_NACC; i++) {        \
      HK_WGMMA_FENCE_REG(acc[w][i]);                                                                                   \
      HK_WGMMA_FENCE_REG(acc2[w][i]);                                                                                  \
    }                                                                                                                  \
  } while (0)
#else
#define HK_TMA_FENCE_ACC()                                                                                             \
  do {                                                                                                                 \
    _Pragma("unroll") for (int w = 0; w < HK_MW; w++) _Pragma("unroll") for (int i = 0; i < HK_TMA_NACC; i++)          \
        HK_WGMMA_FENCE_REG(acc[w][i]);                                                                                 \
  } while (0)
#endif

      unsigned prev = 0;
#if HK_NORM_A
      const int norm_gt = HK_PINGPONG ? lt : cw * 128 + lt, norm_bar = 5 + (HK_PINGPONG ? cw : 0);
      float norm_ss[HK_MW];
#pragma unroll
      for (int q = 0; q < HK_MW; q++) norm_ss[q] = 0.0f;
#endif
      for (int kt = 0; kt < k_tiles; kt++, u++) {
        const unsigned s = u % HK_STAGES, ph = (u / HK_STAGES) & 1u;
        hk_mbar_wait(HK_TMA_FULL(s), ph);
#if HK_NORM_A /* under the previous k tile's wgmmas */
        hk_tma_norm_tile(As + s * HK_TMA_A_STAGE, norm_gamma, (long long)(work.kt0 + kt) * 64, K, norm_gt, norm_ss);
        hk_fence_proxy_async(); /* the tile's generic writes, before the wgmmas (async proxy) read them */
        hk_named_sync(norm_bar, HK_NORM_THREADS);
#endif
        const unsigned short *as = As + s * HK_TMA_A_STAGE + (HK_PINGPONG ? 0 : cw * HK_MW * 64 * 64);
        const unsigned short *bs = Bs + s * HK_TMA_NB * HK_TMA_B_STAGE;
        HK_TMA_FENCE_ACC();
        hk_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
#if HK_TRANS_B
          const unsigned long long db = hk_wgmma_desc(bs + kk * 16, 16, 1024);
#if HK_DUAL
          const unsigned long long db2 = hk_wgmma_desc(bs + HK_TMA_B_STAGE + kk * 16, 16, 1024);
#endif
#else
          const unsigned long long db = hk_wgmma_desc(bs + kk * 16 * 64, 8192, 1024);
#if HK_DUAL
          const unsigned long long db2 = hk_wgmma_desc(bs + HK_TMA_B_STAGE + kk * 16 * 64, 8192, 1024);
#endif
#endif
#pragma unroll
          for (int w = 0; w < HK_MW; w++) {
            const unsigned long long da = hk_wgmma_desc(as + w * 64 * 64 + kk * 16, 16, 1024);
            HK_WGMMA(acc[w], da, db, 1, HK_TRANS_B ? 0 : 1);
#if HK_DUAL
            HK_WGMMA(acc2[w], da, db2, 1, HK_TRANS_B ? 0 : 1); /* the B2 tile */
#endif
          }
        }
        hk_wgmma_commit();
        HK_TMA_FENCE_ACC();
        HK_WGMMA_WAIT(1); /* the group of k tile kt - 1 has retired: its slot may be refilled */
        if (kt > 0 && lane == 0) {
          hk_mbar_arrive(HK_TMA_EMPTY(prev));
#if HK_CM > 1
          hk_mbar_arrive_cluster(HK_TMA_EMPTY(prev), rank ^ 1u); /* the peer's producer writes our slot too */
#endif
        }
        prev = s;
      }
#if HK_TMA_EPI_EARLY /* the epilogue's first global reads go out under the last MMAs */
      const hk_epi_in first =
          hk_epi_fetch((long long)m0 + (HK_PINGPONG ? 0 : cw * HK_MW * 64), n0, 0, M, N, bias, residual, mul, lt);
#endif
      HK_WGMMA_WAIT(0);
      HK_TMA_FENCE_ACC();
#undef HK_TMA_FENCE_ACC
      if (k_tiles > 0 && lane == 0) {
        hk_mbar_arrive(HK_TMA_EMPTY(prev));
#if HK_CM > 1
        hk_mbar_arrive_cluster(HK_TMA_EMPTY(prev), rank ^ 1u);
#endif
      }
      if (HK_PINGPONG && lane == 0) hk_mbar_arrive(HK_TMA_DONE(cw));

#if HK_SPLITK > 1
      /* Split-K: ranks 1.. leave their f32 partial sums in their own shared memory (over the
       * ring, idle now: both consumers are past their last wgmma, named barrier 3); rank 0
       * adds them to its accumulators in rank order -- the same sum every run -- through
       * distributed shared memory, then runs the epilogue. The second cluster barrier keeps
       * every block's shared memory alive until rank 0 has read it. Partial layout: per
       * consumer, m64 block and group of 4 accumulators, 128 threads x float4. */
      float4 *const part = (float4 *)As + (cw * HK_MW) * (HK_TMA_NACC / 4) * 128;
      if (rank > 0) {
        if (!HK_PINGPONG) hk_named_sync(3, 256);
#pragma unroll
        for (int w = 0; w < HK_MW; w++)
#pragma unroll
          for (int i = 0; i < HK_TMA_NACC / 4; i++)
            part[(w * (HK_TMA_NACC / 4) + i) * 128 + lt] =
                make_float4(acc[w][4 * i], acc[w][4 * i + 1], acc[w][4 * i + 2], acc[w][4 * i + 3]);
      }
      hk_cluster_sync();
      if (rank == 0) {
        /* 8 remote loads in flight before their sums (one at a time, each would wait out the
         * distributed-shared-memory latency) */
        for (unsigned r = 1; r < HK_SPLITK; r++)
#pragma unroll
          for (int w = 0; w < HK_MW; w++)
#pragma unroll
            for (int i0 = 0; i0 < HK_TMA_NACC / 4; i0 += 8) {
              float4 v[8];
#pragma unroll
              for (int i = 0; i < 8; i++)
                if (i0 + i < HK_TMA_NACC / 4)
                  v[i] = hk_cluster_ld4(hk_smem_u32(part + (w * (HK_TMA_NACC / 4) + i0 + i) * 128 + lt), r);
#pragma unroll
              for (int i = 0; i < 8; i++)
                if (i0 + i < HK_TMA_NACC / 4) {
                  acc[w][4 * (i0 + i)] += v[i].x;
                  acc[w][4 * (i0 + i) + 1] += v[i].y;
                  acc[w][4 * (i0 + i) + 2] += v[i].z;
                  acc[w][4 * (i0 + i) + 3] += v[i].w;
                }
            }
      }
#endif
#if HK_STREAMK
      if (split && !hk_tma_sk_finish(acc, part, sem + hk_sk_counter(&sched.plan, work.tile), &pieces, cw, lt,
                                     sk_flags + (HK_PINGPONG ? cw : 0)))
        continue; /* another piece finishes the tile */
#endif
      const long long row0 = (long long)m0 + (HK_PINGPONG ? 0 : cw * HK_MW * 64);
#if HK_NORM_A
      /* the rows' scales: the two threads of a row add their sums; one stores it */
      float *const rsc = rscale + (HK_PINGPONG ? cw : 0) * HK_BM_STAGE;
#pragma unroll
      for (int q = 0; q < HK_MW; q++) {
        const float ss = norm_ss[q] + __shfl_xor_sync(0xffffffffu, norm_ss[q], 1);
        if ((norm_gt & 1) == 0) rsc[(norm_gt >> 1) + (HK_NORM_THREADS / 2) * q] = rsqrtf(ss / (float)K + norm_eps);
      }
      hk_named_sync(norm_bar, HK_NORM_THREADS);
#pragma unroll
      for (int w = 0; w < HK_MW; w++) {
        float rs[2];
#pragma unroll
        for (int h = 0; h < 2; h++)
          rs[h] = rsc[(HK_PINGPONG ? 0 : cw * HK_MW * 64) + 64 * w + 16 * (lt >> 5) + ((lt & 31) >> 2) + 8 * h];
        hk_tma_norm_scale(acc[w], rs);
#if HK_DUAL
        hk_tma_norm_scale(acc2[w], rs);
#endif
      }
#endif
#if HK_DUAL
#pragma unroll
      for (int w = 0; w < HK_MW; w++) hk_tma_dual_combine(acc[w], acc2[w], bias, n0, N, lt);
#endif
#if HK_ROPE
#pragma unroll
      for (int w = 0; w < HK_MW; w++)
        hk_tma_rope(acc[w], bias, rope_tab, row0 + 64 * w, n0, N, rope_seq, rope_cols, rope_pos0, lt);
#endif
      if (HK_SPLITK == 1 || rank == 0) {
#pragma unroll
        for (int w = 0; w < HK_MW; w++)
#if HK_TMA_EPI_EARLY
          hk_wgmma_epilogue_from(acc[w], E, row0 + 64 * w, n0, M, N, bias, residual, mul, HK_TMA_H, lt, 1 + cw,
                                 w == 0 ? first : hk_epi_fetch(row0 + 64 * w, n0, 0, M, N, bias, residual, mul, lt),
                                 HK_TMA_C_MAP, S);
#else
          hk_wgmma_epilogue_from(acc[w], E, row0 + 64 * w, n0, M, N, bias, residual, mul, HK_TMA_H, lt, 1 + cw,
                                 hk_epi_fetch(row0 + 64 * w, n0, 0, M, N, bias, residual, mul, lt), HK_TMA_C_MAP, S);
#endif
      }
#if HK_NORM_C
      hk_tma_ln(C, HK_TMA_H, ln_gamma, ln_beta, ln_eps, ln_stats + (local & 1) * HK_BM_STAGE, cw * HK_MW * 64, E, 1 + cw,
                row0, n0, M, N, lt);
#endif
#if HK_SPLITK > 1
      hk_cluster_sync();
#endif
    }
  }
#if HK_TMA_STORE
  if (wg > 0 && (tid & 127) == 0) HK_TMA_STORE_WAIT_ALL(); /* C is written before the grid completes */
#endif
#if HK_CM > 1 || HK_NORM_C
  hk_cluster_sync(); /* no block leaves while its peer may still write to it, arrive on its barriers or
                        read its statistics */
#endif
#undef HK_TMA_FULL
#undef HK_TMA_EMPTY
#undef HK_TMA_DONE
#endif /* sm_90a; the variant serves only sm_90a */
}
