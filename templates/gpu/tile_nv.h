/* SPDX-License-Identifier: Apache-2.0 */
/*
 * templates/gpu/tile_nv.h -- NVIDIA tile primitives (sm_80+): shared-memory addresses,
 * cp.async, ldmatrix, mma.sync m16n8k16, packing, the shared-tile swizzle; and, for
 * sm_90a only, the warpgroup MMA (wgmma) helpers. Inline PTX only, no headers. Emitted
 * by a variant's `includes` after prelude_cuda.h and common.h.
 *
 * Fragment layouts of mma.sync.m16n8k16 (PTX ISA "Matrix Fragments for mma.m16n8k16"),
 * lane = threadIdx.x % 32, g = lane >> 2 (group), t = lane & 3 (thread in group):
 *   A (16x16, row-major), 4 regs of 2 halves: a0 (row g,   k 2t..2t+1), a1 (row g+8, k 2t..),
 *                                              a2 (row g,   k 2t+8..),   a3 (row g+8, k 2t+8..)
 *   B (16x8, "col"),      2 regs of 2 halves: b0 (k 2t..2t+1, col g),   b1 (k 2t+8.., col g)
 *   C/D (16x8, f32),      4 floats:           c0,c1 (row g, col 2t, 2t+1), c2,c3 (row g+8, ...)
 * The low half of each register is the lower k (or column) index.
 *
 * ldmatrix .x4: lanes 8q..8q+7 give the 8 row addresses (16 bytes each) of matrix q;
 * register q of every lane receives matrix q's (row g, cols 2t, 2t+1); with .trans it
 * receives (rows 2t, 2t+1, col g) instead, i.e. the transposed 8x8 matrix.
 */
#ifndef HK_TILE_NV_H
#define HK_TILE_NV_H

/* Shared-window address of a generic pointer to shared memory (for PTX .shared operands). */
HK_DEVICE unsigned hk_smem_u32(const void *p) {
  unsigned r;
  asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(r) : "l"(p));
  return r;
}

/* ---- cp.async (sm_80+) ----------------------------------------------------------------- */
/* 16 bytes global -> shared, L2 only (.cg); when !pred nothing is read and the 16 shared
 * bytes are zero-filled (src-size 0). Callers pass an in-bounds gmem even when !pred
 * (e.g. the tensor base): nothing is read then, but it keeps the address well-formed. */
HK_DEVICE void hk_cp_async16(void *smem, const void *gmem, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(hk_smem_u32(smem)), "l"(gmem),
               "r"(pred ? 16 : 0)
               : "memory");
}
HK_DEVICE void hk_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* Waits until at most n (an integer constant) of this thread's committed groups are pending. */
#define HK_CP_ASYNC_WAIT(n) asm volatile("cp.async.wait_group %0;\n" ::"n"(n) : "memory")

/* ---- ldmatrix (sm_75+) ----------------------------------------------------------------- */
HK_DEVICE void hk_ldmatrix_x4(unsigned r[4], const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(hk_smem_u32(smem)));
}
HK_DEVICE void hk_ldmatrix_x4_trans(unsigned r[4], const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(hk_smem_u32(smem)));
}
HK_DEVICE void hk_ldmatrix_x2(unsigned r[2], const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(hk_smem_u32(smem)));
}
HK_DEVICE void hk_ldmatrix_x2_trans(unsigned r[2], const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(hk_smem_u32(smem)));
}

/* ---- mma.sync m16n8k16, f32 accumulate in place (sm_80+) ------------------------------- */
HK_DEVICE void hk_mma_16816_f16(float c[4], const unsigned a[4], const unsigned b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
HK_DEVICE void hk_mma_16816_bf16(float c[4], const unsigned a[4], const unsigned b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* ---- packing two floats, round to nearest even; lo -> bits 0..15 ----------------------- */
/* cvt.rn.{f16,bf16}x2.f32 d, a, b puts a in the upper half and b in the lower half. */
HK_DEVICE unsigned hk_pack_f16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
HK_DEVICE unsigned hk_pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

/* ---- split GEMMs: f32 partial sums in global scratch, arrival counters (sm_70+) ------------
 * A tile computed in `arrivals` pieces (split-K slices, stream-K segments), each by a group of
 * threads of one block, is finished by the piece that arrives last:
 *   1. every thread of the group stores its partial sums to its piece's place in the launch's
 *      scratch (hk_st_cg4: cached in L2, not in the SM's L1);
 *   2. a barrier over the group: its stores happen before what one thread does next (CTA
 *      scope);
 *   3. one thread of the group calls hk_split_arrive: a fetch-add on the tile's counter with
 *      acq_rel semantics at GPU scope. The release half makes the group's stores (ordered
 *      before it by the barrier; release is cumulative) visible to any thread that later
 *      acquires the counter; the acquire half makes every earlier piece's stores visible to
 *      this one. The piece that sees arrivals - 1 is the last; it sets the counter back to 0
 *      (every piece has arrived, so nothing else touches it in this launch, and the launch's
 *      completion orders the store before the next launch or a dependent's
 *      griddepcontrol.wait): counters are zero whenever no launch runs (FORMAT.md,
 *      SEMAPHORE);
 *   4. that thread tells the group through shared memory and a second barrier, which also
 *      orders the group's loads after the acquire; in the last piece every thread then reads
 *      the other pieces' partials (hk_ld_cg4: from L2, never a stale L1 line) and adds them in
 *      a fixed order -- the same bits whichever piece arrives last.
 * No block ever waits for another, so no deadlock, whatever the grid and the scheduling. */
HK_DEVICE void hk_st_cg4(float *p, float a, float b, float c, float d) {
  asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}
HK_DEVICE float4 hk_ld_cg4(const float *p) {
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
/* One float of a partial each way (split kernels with scalar partials: kv_attention_warp, sample's
 * greedy pieces): the same L2 path as hk_st_cg4 / hk_ld_cg4. HK_SPLIT_PUBLISH: nothing to do here
 * (the barrier and the release of step 3 cover the block's stores); split_amd.h's fences. */
#define HK_SPLIT_PUBLISH() ((void)0)
HK_DEVICE void hk_st_part(float *p, float v) { __stcg(p, v); }
HK_DEVICE float hk_ld_part(const float *p) { return __ldcg(p); }
/* Step 3 above: 1 when this is the last of `arrivals` pieces (the counter is then 0 again). */
HK_DEVICE int hk_split_arrive(unsigned *counter, unsigned arrivals) {
  unsigned prev;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n" : "=r"(prev) : "l"(counter) : "memory");
  if (prev + 1 != arrivals) return 0;
  asm volatile("st.relaxed.gpu.global.u32 [%0], 0;\n" ::"l"(counter) : "memory");
  return 1;
}

/* ---- shared-tile swizzle -----------------------------------------------------------------
 * A shared tile is stored as rows of 64 or 128 bytes, each made of 16-byte chunks (8
 * halves). Logical chunk c of row r is stored at physical chunk
 *   128-byte rows (8 chunks):  c ^ (r & 7)
 *    64-byte rows (4 chunks):  c ^ ((r >> 1) & 3)
 * so any 8 consecutive rows' chunk c land in 8 different 16-byte bank groups of a
 * 128-byte line: ldmatrix (8 row addresses per matrix) and the 16-byte cp.async stores
 * are conflict-free. With the tile base 1024-byte aligned these are exactly the 128B and
 * 64B swizzle modes of wgmma's matrix descriptors (address bits [4,7) ^= bits [7,10),
 * resp. bits [4,6) ^= bits [7,9)). The helpers return the offset in halves of (row,
 * element e) with e the element index inside the row. */
HK_DEVICE int hk_swz128(int row, int e) { return row * 64 + ((((e >> 3) ^ row) & 7) << 3) + (e & 7); }
HK_DEVICE int hk_swz64(int row, int e) { return row * 32 + ((((e >> 3) ^ (row >> 1)) & 3) << 3) + (e & 7); }

/* ---- warpgroup MMA (sm_90a only: nvrtc refuses wgmma for plain sm_90) ------------------- */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* Shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): bits 0-13 start
 * address >> 4, 16-29 leading-dimension byte offset >> 4, 32-45 stride-dimension byte
 * offset >> 4, 49-51 base offset (0: tiles 1024-byte aligned), 62-63 swizzle mode
 * (1 = 128B, 2 = 64B, 3 = 32B, 0 = none). */
HK_DEVICE unsigned long long hk_wgmma_desc(const void *smem, unsigned lbo_bytes, unsigned sbo_bytes) {
  const unsigned long long a = hk_smem_u32(smem);
  return ((a & 0x3FFFFull) >> 4) | ((unsigned long long)((lbo_bytes >> 4) & 0x3FFF) << 16) |
         ((unsigned long long)((sbo_bytes >> 4) & 0x3FFF) << 32) | (1ull << 62);
}
HK_DEVICE void hk_wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
HK_DEVICE void hk_wgmma_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
#define HK_WGMMA_WAIT(n) asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(n) : "memory")
/* Orders generic-proxy shared writes (ld/st, cp.async) before async-proxy reads (wgmma). */
HK_DEVICE void hk_fence_proxy_async(void) { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
/* Keeps the compiler from moving accumulator registers across a wgmma in flight. */
#define HK_WGMMA_FENCE_REG(x) asm volatile("" : "+f"(x)::"memory")

/* ---- mbarriers, producer/consumer pipelines (sm_90a kernels) -----------------------------
 * A 64-bit mbarrier in shared memory (PTX ISA "Parallel Synchronization and Communication
 * Instructions: mbarrier"): init sets phase 0 and the expected arrival count; a phase
 * completes when that many arrivals happened, then the next phase starts. try_wait.parity
 * P returns true once the phase of parity P has completed -- with P the parity of the
 * phase before the current one it returns true at once (so a producer waiting on "empty"
 * with parity 1 passes a fresh barrier). `bar` is a shared-window address (hk_smem_u32). */
HK_DEVICE void hk_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
HK_DEVICE void hk_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile("{\n.reg .pred p;\nHK_MBAR_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra HK_MBAR_WAIT;\n}\n" ::"r"(bar),
               "r"(parity)
               : "memory");
}
/* One arrival (release semantics: this thread's prior memory accesses are ordered before it). */
HK_DEVICE void hk_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
/* One arrival, made by the hardware once all of this thread's prior cp.async copies have
 * landed (.noinc: it counts toward the expected count given to init). */
HK_DEVICE void hk_cp_async_mbar_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(bar) : "memory");
}
/* Named barrier `id` (1..15; 0 is __syncthreads) over `count` threads (a multiple of 32). */
HK_DEVICE void hk_named_sync(int id, int count) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory"); }
/* Arrives on named barrier `id` without waiting (the producer side of an ordering: the
 * barrier's phase completes when `count` threads have arrived or synced). */
HK_DEVICE void hk_named_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}
/* Per-warpgroup register budget (all 4 warps of a warpgroup execute it; needs a register
 * cap at kernel entry, i.e. __launch_bounds__(threads, 1)). */
#define HK_SETMAXNREG_DEC(n) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(n))
#define HK_SETMAXNREG_INC(n) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(n))

/* ---- TMA (sm_90a kernels) ------------------------------------------------------------------
 * A tensor map is a 128-byte CUtensorMap that libhkrt builds at run time (pack argument
 * kind TMAP, docs/FORMAT.md) and passes as a `const __grid_constant__` kernel parameter;
 * its generic address is what cp.async.bulk.tensor takes. The copy lands in shared memory
 * (out-of-bounds elements as zeros) and completes `bytes` transactions on an mbarrier whose
 * expected count the issuing thread raised with hk_mbar_expect_tx. */
struct __align__(64) hk_tmap_t {
  unsigned long long bits[16];
};
/* Orders the barrier inits before their use by the async proxy (TMA) and other threads;
 * then a block-wide barrier. */
HK_DEVICE void hk_mbar_init_fence(void) { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
/* One arrival that also expects `bytes` more transactions in the current phase. */
HK_DEVICE void hk_mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/* 2-D tile (c0 along the inner dim, c1 the row) of the map into shared memory at dst. */
HK_DEVICE void hk_tma_load_2d(unsigned dst, const hk_tmap_t *map, int c0, int c1, unsigned bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
               ::"r"(dst), "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar)
               : "memory");
}
/* The same tile written to the same offset of the shared memory of every block of the
 * cluster in `mask` (bit r: rank r), completing `bytes` on each one's mbarrier at `bar`'s
 * offset. */
HK_DEVICE void hk_tma_load_2d_mc(unsigned dst, const hk_tmap_t *map, int c0, int c1, unsigned bar, unsigned short mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%2, %3}], [%4], %5;\n"
               ::"r"(dst), "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar), "h"(mask)
               : "memory");
}
/* One arrival on the mbarrier at local address `bar`'s offset in block `rank` of the
 * cluster (the default semantics, release at CTA scope: what a consumer releasing a ring
 * slot needs -- its reads of the slot are complete -- without the cost of a cluster-scope
 * fence on every k tile). */
HK_DEVICE void hk_mbar_arrive_cluster(unsigned bar, unsigned rank) {
  asm volatile("{\n.reg .b32 r;\nmapa.shared::cluster.u32 r, %0, %1;\n"
               "mbarrier.arrive.shared::cluster.b64 _, [r];\n}\n" ::"r"(bar), "r"(rank)
               : "memory");
}
/* TMA store: the 2-D box of the map at (c0, c1) from shared memory at src, in a bulk group
 * of the issuing thread (elements outside the matrix are not written). Before: the writes
 * to src by other threads are ordered to the async proxy (fence.proxy.async, then a barrier).
 * wait_read<n>: at most n of this thread's groups may still be reading their shared memory
 * (a buffer of an older group may be rewritten); wait_all: every group's writes are done. */
HK_DEVICE void hk_tma_store_2d(const hk_tmap_t *map, int c0, int c1, unsigned src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
               ::"l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(src)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
#define HK_TMA_STORE_WAIT_READ(n) asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(n) : "memory")
#define HK_TMA_STORE_WAIT_ALL() asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory")
/* Programmatic dependent launch (a launch flagged PDL in the pack: libhkrt lets it start
 * while the kernels before it finish). launch_dependents: the kernels after this one may
 * start their own prologues now; wait: blocks until every kernel this one depends on has
 * completed and its memory is visible -- every thread executes it before touching global
 * memory an earlier kernel may write or read. Both are no-ops in a launch without PDL. */
HK_DEVICE void hk_pdl_launch_dependents(void) { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
HK_DEVICE void hk_pdl_wait(void) { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
HK_DEVICE void hk_tma_prefetch_map(const hk_tmap_t *map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"((unsigned long long)map) : "memory");
}
#endif

#endif /* HK_TILE_NV_H */
