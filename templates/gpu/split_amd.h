/* SPDX-License-Identifier: Apache-2.0 */
/* The split kernels' arrival protocol on AMD (tile_nv.h has NVIDIA's, under the same names): a
 * result computed in `arrivals` pieces, each by one block, is finished by the piece that arrives
 * last on the result's counter in the launch's workspace.
 *   1. every thread stores its share of the piece's partial with hk_st_part (non-temporal: past
 *      the CU's L1, which other CUs do not see) and then HK_SPLIT_PUBLISH(): an agent-scope fence
 *      that orders its stores before anything it or its block does next;
 *   2. a barrier over the block;
 *   3. one thread calls hk_split_arrive: a fence (its own stores, for a thread that stored alone),
 *      an atomicAdd on the counter; the one that sees arrivals - 1 is last, fences again (the
 *      other pieces' partials are read after it) and sets the counter back to 0 -- every piece
 *      has arrived, so nothing else touches it in this launch: counters are zero whenever no
 *      launch runs (FORMAT.md, SEMAPHORE);
 *   4. that thread tells the block through shared memory and a barrier; the block then reads the
 *      partials with hk_ld_part (non-temporal: from L2, never a stale L1 line) in a fixed order.
 * No block ever waits for another. */
#define HK_SPLIT_PUBLISH() __threadfence()
HK_DEVICE void hk_st_part(float *p, float v) { __builtin_nontemporal_store(v, p); }
HK_DEVICE float hk_ld_part(const float *p) { return __builtin_nontemporal_load(p); }
/* Step 3 above: 1 when this is the last of `arrivals` pieces (the counter is then 0 again). */
HK_DEVICE int hk_split_arrive(unsigned *counter, unsigned arrivals) {
  __threadfence();
  const unsigned prev = atomicAdd(counter, 1u);
  if (prev + 1 != arrivals) return 0;
  __threadfence();
  atomicExch(counter, 0u);
  return 1;
}
