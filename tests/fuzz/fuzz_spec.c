/* libFuzzer target for the spec parser: arbitrary bytes through hkc_spec_parse.
 * Diagnostics go to a buffer (not printed); a parsed spec is checked for the
 * invariants later stages rely on, then destroyed. */
#include <stdint.h>
#include <stdlib.h>

#include "hkc.h"

static void check_invariants(const hkc_spec_t *s) {
  /* Nodes are in topological order and every index is in range. */
  for (size_t j = 0; j < s->n_nodes; j++) {
    const hkc_node_t *nd = &s->nodes[j];
    int refs[] = {nd->in[0], nd->in[1], nd->in[2], nd->bias, nd->residual, nd->gamma, nd->beta};
    for (size_t k = 0; k < sizeof refs / sizeof refs[0]; k++) {
      if (k < 3 && (int)k >= nd->n_in) continue;
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
  if (hkc_spec_parse("fuzz.yaml", (const char *)data, size, &spec) == 0) check_invariants(spec);
  hkc_diag_capture(NULL, 0);
  hkc_spec_destroy(spec);
  return 0;
}
