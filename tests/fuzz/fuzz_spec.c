/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the spec parser and the fusion plan: arbitrary bytes through
 * hkc_spec_parse, then hkc_fuse (the spec's own plan, and auto when that was not it),
 * then auto on the planner's clock for the H200 and the host (every estimate finite and
 * positive: the clock reads the spec's shapes), and the spec split over 2 tensor-parallel ranks
 * (hkc_shard), then fused.
 * Diagnostics go to a buffer (not printed); a parsed and a fused spec are checked for
 * the invariants later stages rely on, then destroyed. */
#include <stdint.h>
#include <stdlib.h>

#include "hkc.h"

static void check_invariants(const hkc_spec_t *s) {
  /* Nodes are in topological order and every index is in range. */
  for (size_t j = 0; j < s->n_nodes; j++) {
    const hkc_node_t *nd = &s->nodes[j];
    if (nd->n_in < 1 || nd->n_in > HKC_MAX_NODE_IN) abort();
    int refs[] = {nd->in[0], nd->in[1], nd->in[2], nd->in[3], nd->in[4], nd->bias, nd->residual,
                  nd->mul,   nd->gamma, nd->beta,  nd->add_in};
    for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++) {
      if (k < HKC_MAX_NODE_IN && (int)k >= nd->n_in) continue;
      if (refs[k] == HKC_NONE) continue;
      if (refs[k] < 0 || (size_t)refs[k] >= s->n_tensors || s->tensors[refs[k]].producer >= (int)j) abort();
    }
    if (nd->out < 0 || (size_t)nd->out >= s->n_tensors || s->tensors[nd->out].producer != (int)j) abort();
    if (nd->op == HK_OP_ROPE) { /* what lowering and the kernels assume */
      const hkc_tensor_t *x = &s->tensors[nd->in[0]];
      int64_t width = x->dims[x->rank - 1].add;
      if (x->rank < 2 || nd->heads <= 0 || width % nd->heads != 0 || width / nd->heads % 2 != 0 ||
          nd->pos_offset < 0 || !(nd->theta > 0))
        abort();
    }
    if (nd->sum_out != HKC_NONE && ((nd->add_in == HKC_NONE && !nd->norm_c) || nd->sum_out < 0 ||
                                    (size_t)nd->sum_out >= s->n_tensors || s->tensors[nd->sum_out].producer != (int)j))
      abort();
    if (nd->n_fused < 1 || (nd->n_fused > 1) != (nd->fused_names != NULL)) abort();
  }
  for (size_t i = 0; i < s->n_tensors; i++) {
    const hkc_tensor_t *t = &s->tensors[i];
    if (t->rank < 1 || t->rank > HK_MAX_RANK) abort();
    for (int b = 0; b < s->n_batch; b++)
      if (hkc_tensor_elems(t, s->batch_sizes[b]) <= 0) abort();
  }
  for (int b = 1; b < s->n_batch; b++)
    if (s->batch_sizes[b] <= s->batch_sizes[b - 1]) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char diag[4096];
  hkc_spec_t *spec = NULL;
  hkc_diag_capture(diag, sizeof diag);
  if (hkc_spec_parse("fuzz.yaml", (const char *)data, size, &spec) == 0) {
    check_invariants(spec);
    int was_auto = spec->fusion == HKC_FUSION_AUTO;
    if (hkc_fuse(spec, -1) == 0) check_invariants(spec);
    hkc_spec_destroy(spec);
    spec = NULL;
    if (!was_auto && hkc_spec_parse("fuzz.yaml", (const char *)data, size, &spec) == 0 &&
        hkc_fuse(spec, HKC_FUSION_AUTO) == 0)
      check_invariants(spec);
    hkc_spec_destroy(spec);
    spec = NULL;
    const hkc_gpu_arch_t *archs[2] = {hkc_gpu_arch_find("sm_90a"), NULL};
    const char *names[2] = {"sm_90a", "host"};
    hkc_fuse_model_t model;
    hkc_fuse_model_init(&model, archs, names, 2, NULL);
    /* tensor parallelism: the spec split over 2 ranks (frontend/shard.c), then fused */
    if (hkc_spec_parse("fuzz.yaml", (const char *)data, size, &spec) == 0 && hkc_shard(spec, 2) == 0) {
      check_invariants(spec);
      for (size_t i = 0; i < spec->n_tensors; i++) { /* a slice's dim is its pieces' sum */
        const hkc_shard_t *sh = &spec->tensors[i].shard;
        int64_t local = 0;
        for (int k = 0; k < sh->n_seg; k++) local += sh->seg_size[k] / sh->seg_parts[k];
        if (sh->n_seg && (sh->axis < 0 || (uint32_t)sh->axis >= spec->tensors[i].rank ||
                          spec->tensors[i].dims[sh->axis].add != local))
          abort();
      }
      if (hkc_fuse(spec, HKC_FUSION_AUTO) == 0) check_invariants(spec);
    }
    hkc_spec_destroy(spec);
    spec = NULL;
    if (hkc_spec_parse("fuzz.yaml", (const char *)data, size, &spec) == 0) {
      for (size_t j = 0; j < spec->n_nodes; j++)
        for (int b = 0; b < spec->n_batch; b++)
          for (int t = 0; t < 2; t++) {
            const double sec = hkc_launch_seconds(archs[t], spec, &spec->nodes[j], spec->batch_sizes[b]);
            if (!(sec > 0.0) || sec != sec || sec > 1e30) abort();
          }
      if (hkc_fuse_planned(spec, HKC_FUSION_AUTO, &model) == 0) check_invariants(spec);
    }
  }
  hkc_diag_capture(NULL, 0);
  hkc_spec_destroy(spec);
  return 0;
}
