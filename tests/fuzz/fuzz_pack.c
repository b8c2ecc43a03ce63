/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_pack: artifact verification (hk_pack_open_memory) on arbitrary bytes.
 *
 * Each input is opened twice: as given (exercises the magic/version/size/checksum
 * checks), then as a copy whose file_size and checksums the harness fixes up, so the
 * mutated records reach verify's deeper checks (ranges, indices, enums, shapes).
 * When a pack opens, every accessor and every record of the verified view (node flags,
 * scratch and semaphore ranges, the optional PLAN section's records, PARTS and the stored
 * weights' bytes included) is walked, every graph's launch extents are checked (refused with
 * a message, or each fits its tensor and agrees with the EXTENTS record),
 * and code sections are decompressed (small ones only), so ASan proves that what
 * verify accepted is safe to read. Code objects are never loaded: that would run
 * fuzzed machine code.
 *
 * Seeds in corpus/pack/ come from `HK_WRITE_FUZZ_CORPUS=DIR build/tests/pack_test`.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../unit/pack_refix.h"
#include "hk/hkrt.h"
#include "pack_internal.h"
#include "status_internal.h" /* hk_error_clear */

/* Decompressing a declared-huge object would only test malloc. */
#define FUZZ_MAX_CODE (4u << 20)

static volatile uint64_t sink;

static void walk(hk_pack_t *pack) {
  const char *name;
  sink += strlen(hk_pack_name(pack));
  for (uint32_t t = 0; t < hk_pack_target_count(pack); t++) {
    sink += strlen(hk_pack_target_name(pack, t));
    if (hk_pack_select_target(pack, hk_pack_target_name(pack, t), &name) == HK_OK) sink += strlen(name);
  }
  if (hk_pack_select_target(pack, NULL, &name) == HK_OK) sink += strlen(name);
  for (uint32_t b = 0; b < hk_pack_batch_count(pack); b++) sink += hk_pack_batch_size(pack, b);

  const hk_pack_view_t *v = hk_pack_view(pack);
  for (uint32_t i = 0; i < v->kernel_count; i++)
    sink += strlen(hk_pack_string(v, v->kernels[i].name)) + strlen(hk_pack_string(v, v->kernels[i].params));
  for (uint32_t i = 0; i < v->tensor_count; i++) {
    sink += strlen(hk_pack_string(v, v->tensors[i].name));
    for (uint32_t b = 0; b < v->manifest->batch_count; b++) {
      int64_t dims[HK_MAX_RANK];
      uint64_t bytes;
      if (!hk_tensor_shape(&v->tensors[i], v->manifest->batch_sizes[b], dims, &bytes)) abort(); /* verified */
      sink += bytes;
    }
  }
  for (uint32_t g = 0; g < v->graph_count; g++) {
    const hk_graph_rec_t *gr = &v->graphs[g];
    for (uint32_t j = 0; j < gr->node_count; j++) {
      const hk_node_rec_t *n = &v->nodes[gr->node_first + j];
      sink += strlen(hk_pack_string(v, n->name)) + v->kernels[n->kernel].op;
      if ((n->flags & ~HK_NODE_FLAGS_KNOWN) ||
          ((n->flags & HK_NODE_FLAG_PDL) && v->targets[gr->target].kind != HK_TARGET_CUDA))
        abort(); /* verified: known flags only, PDL on CUDA targets */
      for (uint32_t a = 0; a < n->arg_count; a++) {
        const hk_arg_rec_t *arg = &v->args[n->arg_first + a];
        if (arg->kind == HK_ARG_TENSOR) sink += v->tensors[arg->value].rank;
        if (arg->kind == HK_ARG_TMAP) { /* verified: tensor in range, box 1..256, no reserved bits */
          if (hk_tmap_box_inner(arg->value) - 1 >= HK_TMAP_BOX_MAX || hk_tmap_box_outer(arg->value) - 1 >= HK_TMAP_BOX_MAX ||
              (arg->value & HK_TMAP_RESERVED_MASK) || v->targets[gr->target].kind != HK_TARGET_CUDA)
            abort();
          sink += v->tensors[hk_tmap_tensor(arg->value)].rank;
        }
        if (arg->kind == HK_ARG_SCRATCH && /* verified: a non-empty range inside the workspace */
            (hk_scratch_bytes(arg->value) == 0 ||
             hk_scratch_offset(arg->value) + hk_scratch_bytes(arg->value) > gr->workspace_bytes))
          abort();
        if (arg->kind == HK_ARG_SEMAPHORE && /* verified: a non-empty range of the graph's counters */
            (hk_semaphore_count(arg->value) == 0 ||
             (uint64_t)hk_semaphore_first(arg->value) + hk_semaphore_count(arg->value) > gr->semaphore_count))
          abort();
      }
      for (uint32_t d = 0; d < n->dep_count; d++)
        if (v->deps[n->dep_first + d] >= j) abort(); /* verified */
    }
    for (uint32_t i = 0; i < v->tensor_count; i++) sink += v->placements[gr->placement_first + i];
    /* launch extents: refused as CORRUPT with a message, or every tensor argument's fits */
    hk_error_clear();
    const hk_status_t ext = hk_graph_check_extents(v, g);
    if (ext != HK_OK && (ext != HK_STATUS_CORRUPT || hk_last_error()[0] == '\0')) abort();
    for (uint32_t j = 0; ext == HK_OK && j < gr->node_count; j++) {
      const hk_node_rec_t *n = &v->nodes[gr->node_first + j];
      uint64_t bytes[HK_MAX_ARGS_PER_NODE], size = 0;
      if (hk_launch_extents(v, g, j, bytes) != HK_OK) abort(); /* what the check derived */
      for (uint32_t a = 0; a < n->arg_count; a++) {
        const hk_arg_rec_t *arg = &v->args[n->arg_first + a];
        if (arg->kind != HK_ARG_TENSOR) {
          if (bytes[a] != 0) abort();
          continue;
        }
        if (!hk_tensor_shape(&v->tensors[arg->value], gr->batch, NULL, &size) || bytes[a] > size ||
            (v->extents && v->extents[n->arg_first + a] != bytes[a]))
          abort();
        sink += bytes[a];
      }
    }
  }
  for (uint32_t i = 0; i < v->tensor_count; i++) { /* PARTS (format 1.4) */
    uint32_t first, count;
    hk_pack_tensor_parts(v, i, &first, &count);
    if (count > HK_MAX_PARTS || (count && v->tensors[i].role != HK_ROLE_PARAM)) abort(); /* verified */
    for (uint32_t p = 0; p < count; p++) sink += strlen(hk_pack_string(v, v->parts[first + p].name));
  }
  if ((v->plan_graphs == NULL) != (v->plan_nodes == NULL)) abort(); /* both or neither */
  if (v->plan_graphs) {
    for (uint32_t g = 0; g < v->graph_count; g++)
      sink += v->plan_graphs[g].unfused_bytes + v->plan_graphs[g].unfused_flops + v->plan_graphs[g].unfused_nodes;
    for (uint32_t n = 0; n < v->node_count; n++) {
      if (v->plan_nodes[n].fused_nodes < 1 || (v->plan_nodes[n].flags & ~HK_PLAN_MATRIX)) abort(); /* verified */
      sink += v->plan_nodes[n].bytes + v->plan_nodes[n].flops;
    }
  }
  /* stored weights (format 1.4): every record's bytes, as a session would bind them */
  if ((v->weight_recs == NULL) != (v->weights == NULL) || hk_pack_weight_count(pack) != v->weight_count) abort();
  for (uint32_t r = 0; r < v->weight_count; r++) {
    const hk_weight_rec_t *w = &v->weight_recs[r];
    if (w->tensor >= v->tensor_count || v->tensors[w->tensor].role != HK_ROLE_PARAM || w->offset % HK_WEIGHTS_ALIGN ||
        w->offset > v->weights_size || w->size > v->weights_size - w->offset)
      abort(); /* verified */
    for (uint64_t b = 0; b < w->size; b += 61) sink += v->weights[w->offset + b];
    if (w->size) sink += v->weights[w->offset + w->size - 1];
  }
  for (uint64_t i = 0; i < v->provenance_size; i++) sink += (uint8_t)v->provenance[i];
  for (uint32_t t = 0; t < v->target_count; t++) {
    if (v->sections[v->targets[t].code_section].raw_size > FUZZ_MAX_CODE) continue;
    void *code;
    size_t size;
    if (hk_pack_code_load(v, t, NULL, &code, &size) == HK_OK) {
      if (size) sink += ((uint8_t *)code)[size - 1];
      free(code);
    }
  }
}

static void try_open(const uint8_t *data, size_t size) {
  hk_pack_t *pack = NULL;
  /* metadata_only: the signature is checked (and a bad one reported, not refused), no
   * trust rule applies, and no code can load. */
  hk_pack_open_options_t o = {.struct_size = sizeof o, .metadata_only = 1};
  hk_status_t s = hk_pack_open_memory_ex(data, size, &o, &pack);
  if (s != HK_OK) {
    if (pack || hk_last_error()[0] == '\0') abort(); /* a failure always says why */
    return;
  }
  walk(pack);
  const char *key_id;
  hk_signature_state_t sig = hk_pack_signature(pack, &key_id);
  if (sig > HK_SIGNATURE_INVALID || (sig == HK_SIGNATURE_NONE) != (key_id[0] == '\0')) abort();
  hk_pack_destroy(pack);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try_open(data, size);
  if (size >= sizeof(hk_pack_header_t)) {
    uint8_t *copy = malloc(size);
    if (!copy) return 0;
    memcpy(copy, data, size);
    hk_pack_header_t h;
    memcpy(&h, copy, sizeof h);
    h.file_size = size;
    memcpy(copy, &h, sizeof h);
    hk_test_refix(copy, size);
    try_open(copy, size);
    free(copy);
  }
  return 0;
}
