/* SPDX-License-Identifier: Apache-2.0 */
/*
 * templates/gpu/attention_gp.h -- the query tiles of attention_mma's grouped-query row packing
 * (`gp=1`, HK_ATTN_GP): which query heads and queries a tile of BQ rows holds. Plain C that both
 * sides compile -- the kernel (HK_GP_FN = HK_DEVICE) and hkc (the variant's launch and
 * workspace, the tuning model; HK_GP_FN = static inline) -- so the grid and the counters hkc
 * reserves are the kernel's.
 *
 * The `group` = heads / kv_heads query heads of a kv head read the same K/V. A packed tile holds
 * hg = min(group, BQ) of them (a head chunk; group > BQ gives ceil(group / hg) chunks per kv
 * head) times qc = min(seq_q, BQ / hg) consecutive queries: tile row r is query head
 * h0 + r / qc, query i0 + r % qc. A decode step (seq_q 1, group 4) fills rows 0..3; seq_q 16
 * with group 4 fills all 64 rows; longer seq_q takes ceil(seq_q / qc) query tiles, the last
 * with fewer queries (rows whose query is >= seq_q hold nothing). Tiles are numbered
 * ((b groups + kv head) hc + chunk) q_tiles + query tile, so one K/V stream serves every row.
 */
#ifndef HK_ATTENTION_GP_H
#define HK_ATTENTION_GP_H
#ifndef HK_GP_FN
#define HK_GP_FN HK_DEVICE /* in a kernel (hkc defines it before including) */
#endif

typedef struct hk_attn_gp {
  long long group;   /* query heads per kv head (1 without GQA) */
  long long groups;  /* kv heads in use: heads / group */
  long long hg;      /* query heads per tile: min(group, bq) */
  long long hc;      /* head chunks per kv head: ceil(group / hg) */
  long long qc;      /* queries per head in a tile: min(seq_q, bq / hg), at least 1 */
  long long q_tiles; /* query tiles per head chunk: ceil(seq_q / qc) (0 when seq_q is 0) */
} hk_attn_gp_t;

/* The packing of a launch (the kernel's group rule: heads / kv_heads when kv_heads divides
 * into heads, else 1). */
HK_GP_FN hk_attn_gp_t hk_attn_gp_geom(long long heads, long long kv_heads, long long seq_q, int bq) {
  hk_attn_gp_t g;
  g.group = kv_heads > 0 && heads >= kv_heads ? heads / kv_heads : 1;
  g.groups = heads / g.group;
  g.hg = g.group < bq ? g.group : bq;
  g.hc = (g.group + g.hg - 1) / g.hg;
  g.qc = bq / g.hg < seq_q ? bq / g.hg : seq_q;
  if (g.qc < 1) g.qc = 1;
  g.q_tiles = seq_q > 0 ? (seq_q + g.qc - 1) / g.qc : 0;
  return g;
}

/* Query tiles of a launch: batch groups hc q_tiles. */
HK_GP_FN long long hk_attn_gp_tiles(long long batch, long long heads, long long kv_heads, long long seq_q, int bq) {
  const hk_attn_gp_t g = hk_attn_gp_geom(heads, kv_heads, seq_q, bq);
  return batch * g.groups * g.hc * g.q_tiles;
}
#endif
