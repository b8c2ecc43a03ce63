/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pack_internal.h -- the verified view of an artifact, for the loader and for tools.
 *
 * hk_pack_verify() checks every byte of an artifact that the loader will ever read
 * (the rules are listed in docs/FORMAT.md, "Verification") and fills an
 * hk_pack_view_t: typed pointers into the verified bytes (the pack's own copy of a file) plus
 * record counts. After it returns
 * HK_OK, code may index these tables without further checks:
 *   - every string ref is inside STRINGS and NUL-terminated within HK_MAX_NAME_LEN+1 bytes;
 *   - every index (target, kernel, graph, node, arg/dep/placement range, tensor in an
 *     arg, code section) is in range, every enum is in range, tensor ranks are 1..6;
 *   - every record is checked, referenced or not: each target's kernel range holds only its
 *     own kernels (so a kernel's code range lies in its target's code), graphs' node ranges
 *     tile NODES and nodes' arg and dep ranges tile ARGS and DEPS, in order;
 *   - names hold only safe characters (hk_name_ok), kernel params printable ASCII;
 *   - each target has one graph per manifest batch bucket, in manifest order;
 *   - every TMAP argument is in a graph of a CUDA target, names a f16/bf16/f32 tensor and a
 *     box, swizzle and matrix view (rows, cols at the graph's batch) that TMA accepts;
 *   - every intermediate tensor placement fits the graph's workspace;
 *   - PLAN, when present, holds exactly one record per graph and per node, each node's
 *     fused_nodes >= 1 and only known flags;
 *   - stored weights (1.4), when present: one record per stored param, ascending, each range
 *     inside WEIGHTS, HK_WEIGHTS_ALIGN-aligned, of exactly the param's byte size;
 *   - EXTENTS (1.6), present in every file of 1.6 or later: one entry per ARGS record, 0 for
 *     every argument that is not a tensor. Whether a launch's arguments fit its tensors is not
 *     verify's: hk_graph_check_extents checks it before a target's code loads.
 *
 * Tools (hkc inspect) open a pack with hk_pack_open_file() and read it through
 * hk_pack_view(); the view lives as long as the pack. Nothing here allocates
 * except hk_pack_code_load().
 */
#ifndef HK_PACK_INTERNAL_H
#define HK_PACK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hk/hkrt.h"
#include "hk/pack_format.h"

typedef struct hk_pack_view {
  const uint8_t *base;                /* file start */
  uint64_t size;                      /* file bytes */
  const hk_pack_header_t *header;
  const hk_section_t *sections;       /* header->section_count entries, ascending offsets */
  uint32_t section_count;
  const char *strings;                /* STRINGS payload */
  uint64_t strings_size;
  const hk_manifest_t *manifest;
  const hk_target_rec_t *targets;     uint32_t target_count;
  const hk_kernel_rec_t *kernels;     uint32_t kernel_count;
  const hk_tensor_rec_t *tensors;     uint32_t tensor_count;
  const hk_graph_rec_t *graphs;       uint32_t graph_count;
  const hk_node_rec_t *nodes;         uint32_t node_count;
  const hk_arg_rec_t *args;           uint32_t arg_count;
  const uint32_t *deps;               uint32_t dep_count;
  const uint64_t *placements;         uint64_t placement_count;
  const char *provenance;             /* not NUL-terminated: provenance_size bytes */
  uint64_t provenance_size;
  /* The optional PLAN section, parallel to GRAPHS (graph_count records) and NODES
   * (node_count records); both NULL when the pack has none (format 1.0, older hkc). */
  const hk_plan_graph_rec_t *plan_graphs;
  const hk_plan_node_rec_t *plan_nodes;
  /* The optional PTX (format 1.3): records by kernel (ptx_count; NULL when none); per target
   * the section index of its PTX payload (UINT32_MAX: none) and the index of the record of
   * its first kernel (its kernels' records follow in order). */
  const hk_ptx_rec_t *ptx_recs;
  uint32_t ptx_count;
  uint32_t ptx_section[HK_MAX_TARGETS];
  uint32_t ptx_first[HK_MAX_TARGETS];
  /* The optional stored weights (format 1.4): records by tensor (weight_count; NULL when the
   * pack stores none) and the WEIGHTS payload they index (weights_size bytes). */
  const hk_weight_rec_t *weight_recs;
  uint32_t weight_count;
  const uint8_t *weights;
  uint64_t weights_size;
  /* The optional PARTS (format 1.4): part_count records grouped by tensor; NULL when none. */
  const hk_part_rec_t *parts;
  uint32_t part_count;
  /* EXTENTS (format 1.6; every file of 1.6 or later has one): arg_count entries parallel to ARGS,
   * 0 for every argument that is not a tensor; NULL in older files. */
  const uint64_t *extents;
  /* PARALLEL (format 1.9): the ranks (0 when the pack is whole: no section) and the shard
   * records, ascending by tensor (shard_count; NULL when none). */
  uint32_t tensor_ranks;
  const hk_shard_rec_t *shards;
  uint32_t shard_count;
} hk_pack_view_t;

/* Tensor `tensor`'s shard record (pack_format.h, hk_shard_rec_t), NULL when it is whole on every
 * rank. */
const hk_shard_rec_t *hk_pack_tensor_shard(const hk_pack_view_t *view, uint32_t tensor);
/* Whether an op is a collective (a kernel record without code, run by the communicator). */
static inline bool hk_op_collective(uint32_t op) { return op == HK_OP_ALL_REDUCE || op == HK_OP_ALL_GATHER; }

/* The limits verify applies, resolved from hk_pack_open_options_t (0 there: the default). */
typedef struct hk_pack_limits {
  uint64_t max_code_bytes; /* 0: proportionate (HK_CODE_RATIO_MAX x stored + slack), <= HK_MAX_CODE_BYTES */
  uint32_t max_nodes;      /* <= HK_MAX_NODES */
  uint32_t max_deps;       /* <= HK_MAX_DEPS */
} hk_pack_limits_t;

/* The limits of open options already read (pack.c: zero past the caller's struct_size, checked);
 * NULL: the defaults. */
void hk_pack_limits_from(const hk_pack_open_options_t *options, hk_pack_limits_t *out_limits);

/* Verifies data[0, size) as an artifact and fills out_view. data must be 8-byte
 * aligned; limits NULL: the defaults. Errors: CORRUPT (with what and where),
 * UNSUPPORTED_VERSION. No allocation. */
hk_status_t hk_pack_verify(const void *data, size_t size, const hk_pack_limits_t *limits, hk_pack_view_t *out_view);

/* The parts of tensor `tensor` (pack_format.h, hk_part_rec_t): records [*out_first, +*out_count)
 * of view->parts, in concatenation order; *out_count 0 when it has none. */
void hk_pack_tensor_parts(const hk_pack_view_t *view, uint32_t tensor, uint32_t *out_first, uint32_t *out_count);

/* Launch extents (extent.c; pack_format.h, "Launch extents"): the bytes launch `local` (graph-local)
 * of graph `graph` may touch of the tensor each of its arguments points at, derived from the
 * launch's own arguments by its op's argument layout (lower.h's), in out_bytes[0, arg_count):
 * 0 for an argument that is not a tensor. Errors: CORRUPT, naming the graph, the launch (node,
 * kernel, op) and the argument, when the arguments do not follow the layout, a size is out of
 * range or a tensor is not of the layout's element type. */
hk_status_t hk_launch_extents(const hk_pack_view_t *view, uint32_t graph, uint32_t local,
                              uint64_t out_bytes[HK_MAX_ARGS_PER_NODE]);
/* Every launch of graph `graph`: its extents (hk_launch_extents) fit each tensor at the graph's
 * batch and equal the pack's EXTENTS record where the pack has one (format 1.6). Errors:
 * CORRUPT, naming the launch, the argument, the tensor and both numbers. Work in proportion to
 * the graph's arguments; no allocation. */
hk_status_t hk_graph_check_extents(const hk_pack_view_t *view, uint32_t graph);

/* The verified view of an open pack (borrowed). */
const hk_pack_view_t *hk_pack_view(const hk_pack_t *pack);

/* A string by ref; only valid for refs that verify checked (every ref in a record). */
static inline const char *hk_pack_string(const hk_pack_view_t *view, uint32_t ref) {
  return view->strings + ref;
}

/* Size in bytes of one element of a verified dtype. */
static inline uint64_t hk_dtype_bytes(uint32_t dtype) {
  return dtype == HK_DTYPE_F32 || dtype == HK_DTYPE_I32 ? 4 : dtype == HK_DTYPE_I8 || dtype == HK_DTYPE_FP8_E4M3 ? 1 : 2;
}
const char *hk_dtype_label(uint32_t dtype); /* "f32" | "f16" | "bf16" | "i32" | "int8" | "fp8_e4m3" | "?" */

/* Resolves a tensor's dims at `batch` (value = mul*batch + add) and its byte size.
 * False when a dim is <= 0, anything overflows or the size is HK_MAX_TENSOR_BYTES or more
 * (verify guarantees true for every tensor at every manifest batch size). */
bool hk_tensor_shape(const hk_tensor_rec_t *tensor, uint64_t batch, int64_t out_dims[HK_MAX_RANK],
                     uint64_t *out_bytes);

/* The code object of target `target`: decompressed into memory from `allocator`
 * (owned by the caller, release with hk_free), or when the section is stored raw,
 * a copy as well, so the result is always owned. Checks that the decompressed size
 * equals the declared raw_size. Errors: CORRUPT, OUT_OF_MEMORY. */
hk_status_t hk_pack_code_load(const hk_pack_view_t *view, uint32_t target, const hk_allocator_t *allocator,
                              void **out_code, size_t *out_size);

/* Index of the graph of `target` planned for `batch`; false when none. */
bool hk_pack_find_graph(const hk_pack_view_t *view, uint32_t target, uint64_t batch, uint32_t *out_graph);

/* Picks a target as hk_pack_select_target does, returning its index: the named one, or
 * the best one of the most preferred backend that runs here. Errors: NOT_FOUND (name not
 * in the pack), UNAVAILABLE (its runtime or device is missing; the message says which),
 * NO_COMPATIBLE_TARGET (both sides listed), for GPU ordinal `device`. */
hk_status_t hk_pack_select_target_on(hk_pack_t *pack, const char *requested, int device, uint32_t *out_index);
/* The same, also choosing the code: *out_ptx true when the target runs through its PTX (JIT;
 * pack_format.h, hk_ptx_rec_t). Order: exact code objects, compatible code objects, then PTX
 * of the closest older-or-equal architecture; prefer_ptx puts PTX first wherever it runs. */
hk_status_t hk_pack_select_code_on(hk_pack_t *pack, const char *requested, int device, bool prefer_ptx,
                                   uint32_t *out_index, bool *out_ptx);
/* The decompressed PTX payload of a target that stores one (hk_pack_code_load's rules).
 * Errors: NOT_FOUND (no PTX), CORRUPT, OUT_OF_MEMORY. */
hk_status_t hk_pack_ptx_load(const hk_pack_view_t *view, uint32_t target, const hk_allocator_t *allocator,
                             void **out_ptx, size_t *out_size);

/* The loaded module of a target, loaded on first use and cached in the pack (shared by
 * every session of that target; unloaded by hk_pack_destroy). Thread-safe. A failed load
 * is not cached. */
struct hk_module;
hk_status_t hk_pack_module(hk_pack_t *pack, uint32_t target, struct hk_module **out_module);
/* The same for GPU ordinal `device` (one module per target and device). */
hk_status_t hk_pack_module_on(hk_pack_t *pack, uint32_t target, int device, struct hk_module **out_module);
/* The same with the code chosen by hk_pack_select_code_on (ptx: the target's PTX, JIT). */
hk_status_t hk_pack_module_code_on(hk_pack_t *pack, uint32_t target, int device, bool ptx,
                                   struct hk_module **out_module);
const hk_allocator_t *hk_pack_allocator(const hk_pack_t *pack);
/* Copies the thread's last error into the pack's own message buffer. */
void hk_pack_note_error(hk_pack_t *pack);

#endif /* HK_PACK_INTERNAL_H */
