/* SPDX-License-Identifier: Apache-2.0 */
/*
 * templates/gpu/gemm_streamk.h -- the stream-K schedule of a persistent GEMM (gemm_tma with
 * skm > 0): which block computes which k steps of which output tile. Plain C that both sides
 * compile -- the kernel (after prelude_cuda.h, HK_SK_FN = HK_DEVICE) and hkc (the variant's
 * launch and workspace, the tuning model and the unit tests, HK_SK_FN = static inline) -- so
 * the grid, the scratch and the counters hkc reserves are the ones the kernel uses.
 *
 * The work is `tiles` output tiles of `k_tiles` k steps each, on a persistent grid of `grid`
 * blocks (at most one per SM: hk_sk_grid). As CUTLASS's "data-parallel + stream-K" schedule:
 *   - when the tiles fill whole waves of the grid, every block takes whole tiles b, b + grid,
 *     ... (data-parallel) -- the tiles [0, dp_tiles);
 *   - the rest, the last partial wave plus one full wave before it (so that each block's
 *     share is at least one tile's k steps: no slivers), or every tile when there are fewer
 *     tiles than blocks, is stream-K: its sk_iters = (tiles - dp_tiles) k_tiles iterations,
 *     numbered tile-major, are cut into sk_blocks = min(grid, sk_iters) contiguous, near-equal
 *     ranges, block b's [sk_iters b / sk_blocks, sk_iters (b + 1) / sk_blocks).
 * A block walks its data-parallel tiles, then its range, one unit (a tile, k steps [kt0, kt1))
 * per tile the range touches. Since a range is shorter than two tiles' k steps, only its
 * first and last units can be parts of a tile ("split": kt0 > 0 or kt1 < k_tiles); the others
 * are whole tiles.
 *
 * A split tile's pieces are the units of consecutive blocks first..last (hk_sk_pieces), in
 * k order. Each stores its f32 partial tile in the launch's scratch -- in slot 2 b when it is
 * the block's first unit, 2 b + 1 when its last (a block has at most one of each; only the
 * tile's first piece can be a block's last unit) -- and arrives on the tile's counter (one
 * per stream-K tile); the last to arrive adds the pieces' partials in block order and runs
 * the epilogue (tile_nv.h, split GEMMs: no block waits for another). So a launch needs
 * hk_sk_slots partial tiles of scratch and hk_sk_counters counters. Divisions happen in
 * hk_sk_plan, hk_sk_start, hk_sk_next and hk_sk_pieces only, which a kernel calls while no
 * accumulators are live (a 64-bit division is a call on NVIDIA GPUs).
 */
#ifndef HK_GEMM_STREAMK_H
#define HK_GEMM_STREAMK_H
#ifndef HK_SK_FN
#define HK_SK_FN HK_DEVICE /* in a kernel (hkc defines it before including) */
#endif

typedef struct hk_sk_plan {
  long long tiles, k_tiles, grid;
  long long dp_tiles;  /* tiles [0, dp_tiles) are data-parallel: a multiple of grid */
  long long sk_iters;  /* k steps of the stream-K tiles [dp_tiles, tiles) */
  long long sk_blocks; /* blocks [0, sk_blocks) have stream-K work, at least one k step each */
} hk_sk_plan_t;

/* One unit of a block's work: k steps [kt0, kt1) of tile `tile`. */
typedef struct hk_sk_unit {
  long long tile;
  long long kt0, kt1;
} hk_sk_unit_t;

/* The pieces of a split tile: blocks [first, last] in k order; first_late: the first piece is
 * its block's last unit (that block's range began in an earlier tile). */
typedef struct hk_sk_pieces {
  long long first, last;
  int first_late;
} hk_sk_pieces_t;

/* A block's place in its work: the next data-parallel tile, the stream-K steps left. */
typedef struct hk_sk_iter {
  long long dp_next;
  long long x, x_end;
} hk_sk_iter_t;

/* The grid of a launch over `units` SMs, each block with at least min_steps k steps: every
 * SM when the tiles fill them; else as many blocks as give each min_steps steps, at least
 * one per tile and at most one per SM. */
HK_SK_FN long long hk_sk_grid(long long tiles, long long k_tiles, long long units, long long min_steps) {
  if (units < 1) units = 1;
  if (min_steps < 1) min_steps = 1;
  if (tiles >= units) return units;
  long long g = tiles * k_tiles / min_steps;
  if (g < tiles) g = tiles;
  if (g > units) g = units;
  return g > 0 ? g : 1;
}

HK_SK_FN hk_sk_plan_t hk_sk_plan(long long tiles, long long k_tiles, long long grid) {
  hk_sk_plan_t p;
  p.tiles = tiles;
  p.k_tiles = k_tiles;
  p.grid = grid > 0 ? grid : 1;
  const long long rest = tiles % p.grid;
  p.dp_tiles = tiles < 2 * p.grid ? (rest == 0 ? tiles : 0) : tiles - rest - (rest ? p.grid : 0);
  p.sk_iters = (tiles - p.dp_tiles) * k_tiles;
  p.sk_blocks = p.sk_iters < p.grid ? p.sk_iters : p.grid;
  return p;
}

/* The first stream-K step of block b (b <= sk_blocks: the end of the last range). */
HK_SK_FN long long hk_sk_begin(const hk_sk_plan_t *p, long long b) { return p->sk_iters * b / p->sk_blocks; }

/* The block whose range holds stream-K step x. */
HK_SK_FN long long hk_sk_block_of(const hk_sk_plan_t *p, long long x) {
  return ((x + 1) * p->sk_blocks - 1) / p->sk_iters;
}

HK_SK_FN void hk_sk_start(const hk_sk_plan_t *p, long long b, hk_sk_iter_t *it) {
  it->dp_next = b;
  it->x = it->x_end = 0;
  if (b < p->sk_blocks) {
    it->x = hk_sk_begin(p, b);
    it->x_end = hk_sk_begin(p, b + 1);
  }
}

/* The block's next unit into *u: 1, or 0 when its work is done. */
HK_SK_FN int hk_sk_next(const hk_sk_plan_t *p, hk_sk_iter_t *it, hk_sk_unit_t *u) {
  if (it->dp_next < p->dp_tiles) {
    u->tile = it->dp_next;
    u->kt0 = 0;
    u->kt1 = p->k_tiles;
    it->dp_next += p->grid;
    return 1;
  }
  if (it->x >= it->x_end) return 0;
  const long long t = it->x / p->k_tiles;
  u->tile = p->dp_tiles + t;
  u->kt0 = it->x - t * p->k_tiles;
  u->kt1 = u->kt0 + (it->x_end - it->x) < p->k_tiles ? u->kt0 + (it->x_end - it->x) : p->k_tiles;
  it->x += u->kt1 - u->kt0;
  return 1;
}

/* Whether unit u is part of a tile (its partial sums go through scratch). */
HK_SK_FN int hk_sk_split(const hk_sk_plan_t *p, const hk_sk_unit_t *u) {
  return u->kt0 > 0 || u->kt1 < p->k_tiles;
}

/* The pieces of split stream-K tile `tile`. */
HK_SK_FN hk_sk_pieces_t hk_sk_pieces(const hk_sk_plan_t *p, long long tile) {
  const long long x0 = (tile - p->dp_tiles) * p->k_tiles;
  hk_sk_pieces_t q;
  q.first = hk_sk_block_of(p, x0);
  q.last = hk_sk_block_of(p, x0 + p->k_tiles - 1);
  q.first_late = hk_sk_begin(p, q.first) < x0;
  return q;
}

/* The scratch slot (in partial tiles) of block b's piece (first <= b <= last): 2 b for the
 * block's first unit, 2 b + 1 for its last. */
HK_SK_FN long long hk_sk_slot(const hk_sk_pieces_t *q, long long b) {
  return 2 * b + (b == q->first && q->first_late);
}

/* The counter of split tile `tile`: one per stream-K tile. */
HK_SK_FN long long hk_sk_counter(const hk_sk_plan_t *p, long long tile) { return tile - p->dp_tiles; }

/* Scratch slots and counters a launch needs (at least 1 each). */
HK_SK_FN long long hk_sk_slots(const hk_sk_plan_t *p) { return p->sk_blocks > 0 ? 2 * p->sk_blocks : 1; }
HK_SK_FN long long hk_sk_counters(const hk_sk_plan_t *p) { return p->tiles > p->dp_tiles ? p->tiles - p->dp_tiles : 1; }

#endif /* HK_GEMM_STREAMK_H */
