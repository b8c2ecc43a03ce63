/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pack_write.c -- the artifact writer: compiler structs -> .hkpack bytes.
 *
 * The layout is defined in loader/include/hk/pack_format.h and explained in
 * docs/FORMAT.md. Output is deterministic: the same input gives the same bytes
 * (no timestamps; every padding byte is zero; strings deduplicated in first-use
 * order; zstd at a fixed level). Before returning, the writer runs the loader's
 * own verifier and its launch-extent check over the result, so an artifact hkc writes is one
 * libhkrt accepts.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>
#include <zstd.h>

#include "codegen/codegen.h"
#include "frontend/frontend.h"
#include "lower/lower.h"
#include "pack/pack.h"
#include "pack_internal.h" /* hk_pack_verify: self-check of the output */
#include "util/util.h"

#define HKC_PACK_DEFAULT_LEVEL 19
/* Table sections, in file order; CODE sections (one per target) follow, then PLAN when
 * the input has costs, PTX_INDEX and PTX, PARTS, WEIGHTS_INDEX and WEIGHTS, EXTENTS, and
 * SIGNATURE when signed. */
#define HKC_TABLE_SECTIONS 11

static const hkc_loc_t NOLOC = {0};

/* ---- string table: deduplicated, first-use order, ref 0 is "" ----------------------- */
typedef struct strtab {
  char *data;
  size_t len, cap;
  uint32_t *slots; /* open addressing: offset + 1, 0 = empty */
  size_t n_slots, n_used;
} strtab_t;

static int strtab_grow_slots(strtab_t *st) {
  size_t n = st->n_slots ? st->n_slots * 2 : 256;
  uint32_t *slots = calloc(n, sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < st->n_slots; i++) {
    if (!st->slots[i]) continue;
    const char *s = st->data + st->slots[i] - 1;
    size_t h = (size_t)XXH3_64bits(s, strlen(s)) & (n - 1);
    while (slots[h]) h = (h + 1) & (n - 1);
    slots[h] = st->slots[i];
  }
  free(st->slots);
  st->slots = slots;
  st->n_slots = n;
  return 0;
}

/* Adds s (NULL means "") and returns its ref in *out_ref. 0 / -1 (OOM or too large). */
static int strtab_add(strtab_t *st, const char *s, uint32_t *out_ref) {
  if (!s) s = "";
  size_t n = strlen(s);
  if ((st->n_used + 1) * 2 > st->n_slots && strtab_grow_slots(st) != 0) return -1;
  size_t h = (size_t)XXH3_64bits(s, n) & (st->n_slots - 1);
  while (st->slots[h]) {
    const char *have = st->data + st->slots[h] - 1;
    if (strcmp(have, s) == 0) {
      *out_ref = st->slots[h] - 1;
      return 0;
    }
    h = (h + 1) & (st->n_slots - 1);
  }
  if (st->len + n + 1 > HK_MAX_STRINGS_BYTES) return -1;
  if (hkc_reserve((void **)&st->data, &st->cap, st->len + n + 1, 1) != 0) return -1;
  memcpy(st->data + st->len, s, n + 1);
  *out_ref = (uint32_t)st->len;
  st->slots[h] = (uint32_t)st->len + 1;
  st->len += n + 1;
  st->n_used++;
  return 0;
}

/* ---- building ------------------------------------------------------------------------ */
typedef struct payload {
  uint32_t kind, flags, target;
  const void *data;
  size_t size;
  uint64_t raw_size;
} payload_t;

typedef struct builder {
  const hkc_pack_in_t *in;
  strtab_t strings;
  hk_manifest_t manifest;
  hk_target_rec_t *targets;
  hk_kernel_rec_t *kernels;
  hk_tensor_rec_t *tensors;
  hk_graph_rec_t *graphs;
  hk_node_rec_t *nodes;
  hk_arg_rec_t *args;
  uint32_t *deps;
  uint64_t *placements;
  uint8_t *plan; /* PLAN payload: hk_plan_graph_rec_t[n_graphs], hk_plan_node_rec_t[n_nodes]; NULL: none */
  size_t plan_size;
  int has_plan;  /* every graph carries costs */
  size_t n_kernels, n_graphs, n_nodes, n_args, n_deps, n_placements;
  char *provenance;
  size_t provenance_len;
  void **code;
  size_t *code_size;
  void **ptx;           /* per target: its compressed PTX payload; NULL: none */
  size_t *ptx_size;
  hk_ptx_rec_t *ptx_recs; /* PTX_INDEX: one per kernel of the targets with PTX */
  size_t n_ptx_recs;
  hk_weight_rec_t *weight_recs; /* WEIGHTS_INDEX: one per in->weights entry; NULL: none */
  uint64_t weights_size;        /* the WEIGHTS payload */
  hk_part_rec_t *parts; /* PARTS: the params' parts, tensor by tensor; NULL: none */
  size_t n_parts;
  uint64_t *extents;    /* EXTENTS: one per ARGS record */
  void *parallel;       /* PARALLEL: hk_parallel_rec_t, then its shard records; NULL: one rank */
  size_t parallel_size;
} builder_t;

static void builder_free(builder_t *b) {
  free(b->strings.data);
  free(b->strings.slots);
  free(b->targets);
  free(b->kernels);
  free(b->tensors);
  free(b->graphs);
  free(b->nodes);
  free(b->args);
  free(b->deps);
  free(b->placements);
  free(b->plan);
  free(b->provenance);
  if (b->code)
    for (size_t t = 0; t < b->in->n_targets; t++) free(b->code[t]);
  free(b->code);
  free(b->code_size);
  if (b->ptx)
    for (size_t t = 0; t < b->in->n_targets; t++) free(b->ptx[t]);
  free(b->ptx);
  free(b->ptx_size);
  free(b->ptx_recs);
  free(b->weight_recs);
  free(b->parts);
  free(b->extents);
  free(b->parallel);
}

static int name_ok(const char *what, const char *name) {
  if (name && strlen(name) > HK_MAX_NAME_LEN) {
    hkc_error(NOLOC, "cannot write the artifact: %s name \"%.40s...\" is longer than %u bytes", what, name,
              HK_MAX_NAME_LEN);
    return 0;
  }
  return 1;
}

#define ADD_STRING(b, s, out)                                                   \
  do {                                                                          \
    if (strtab_add(&(b)->strings, (s), (out)) != 0) {                           \
      hkc_error(NOLOC, "cannot write the artifact: out of memory (or over %u bytes of strings)", \
                HK_MAX_STRINGS_BYTES);                                          \
      return -1;                                                                \
    }                                                                           \
  } while (0)

/* Whether TMAP argument `value` of a launch of target `to` at `batch` follows the format's
 * rules (pack_format.h, docs/FORMAT.md), which the loader checks again: a CUDA target, a
 * tensor of the spec of a dtype TMA loads, a box of 1..256 whose inner row is a multiple of
 * 16 bytes within the swizzle's span, a row stride that is a multiple of 16 bytes. NULL, or
 * what is wrong. */
static const char *tmap_problem(const hkc_spec_t *spec, const hkc_target_out_t *to, int64_t batch, uint64_t value) {
  if (to->kind != HK_TARGET_CUDA) return "tensor maps are for CUDA targets only";
  if (value & HK_TMAP_RESERVED_MASK) return "reserved bits are set";
  if (hk_tmap_tensor(value) >= spec->n_tensors) return "its tensor index is out of range";
  const uint32_t inner = hk_tmap_box_inner(value), outer = hk_tmap_box_outer(value), swz = hk_tmap_swizzle(value);
  if (inner < 1 || inner > HK_TMAP_BOX_MAX || outer < 1 || outer > HK_TMAP_BOX_MAX) return "its box is not 1..256";
  const hkc_tensor_t *t = &spec->tensors[hk_tmap_tensor(value)];
  if (t->dtype != HK_DTYPE_F16 && t->dtype != HK_DTYPE_BF16 && t->dtype != HK_DTYPE_F32)
    return "its tensor's dtype is not f16, bf16 or f32";
  const int64_t esize = t->dtype == HK_DTYPE_F32 ? 4 : 2, cols = hkc_dim_value(t->dims[t->rank - 1], batch);
  if ((inner * esize) % 16 != 0 || (swz && (uint32_t)(inner * esize) > hk_tmap_swizzle_bytes(swz)))
    return "its box inner row is not a multiple of 16 bytes within the swizzle span";
  if (cols < 1 || (cols * esize) % 16 != 0) return "its tensor's row stride is not a multiple of 16 bytes";
  return NULL;
}

/* Whether SCRATCH or SEMAPHORE argument `value` of a launch of graph go follows the format's
 * rules (pack_format.h), which the loader checks again: a non-empty range inside the graph's
 * workspace or semaphores. NULL, or what is wrong. */
static const char *workspace_arg_problem(const hkc_graph_out_t *go, hk_arg_kind_t kind, uint64_t value) {
  if (kind == HK_ARG_SCRATCH) {
    const uint64_t offset = hk_scratch_offset(value), bytes = hk_scratch_bytes(value);
    return bytes > 0 && offset <= go->workspace_bytes && bytes <= go->workspace_bytes - offset
               ? NULL
               : "its scratch range is empty or outside the graph's workspace";
  }
  const uint64_t first = hk_semaphore_first(value), count = hk_semaphore_count(value);
  return count > 0 && first + count <= go->semaphore_count ? NULL : "its semaphores are empty or outside the graph's";
}

/* Checks the input against the format's rules and counts the records. */
static int validate_and_count(builder_t *b) {
  const hkc_pack_in_t *in = b->in;
  const hkc_spec_t *spec = in->spec;
  if (!spec || !in->targets || in->n_targets == 0 || in->n_targets > HK_MAX_TARGETS) {
    hkc_error(NOLOC, "cannot write the artifact: need a spec and 1..%u targets", HK_MAX_TARGETS);
    return -1;
  }
  if (spec->n_batch < 1 || spec->n_batch > (int)HK_MAX_BATCH_BUCKETS || spec->n_tensors > HK_MAX_TENSORS) {
    hkc_error(NOLOC, "cannot write the artifact: %d batch sizes (1..%u), %zu tensors (max %u)", spec->n_batch,
              HK_MAX_BATCH_BUCKETS, spec->n_tensors, HK_MAX_TENSORS);
    return -1;
  }
  if (spec->batch_policy < 0 || spec->batch_policy >= (int)HK_BATCH_POLICY_REC_COUNT_) {
    hkc_error(NOLOC, "cannot write the artifact: unknown batch policy %d", spec->batch_policy);
    return -1;
  }
  if (!name_ok("spec", spec->name)) return -1;
  b->has_plan = 1;
  for (size_t t = 0; t < in->n_targets; t++)
    for (size_t g = 0; g < in->targets[t].n_graphs; g++)
      if (!in->targets[t].graphs[g].costs || !in->targets[t].graphs[g].fused_counts) b->has_plan = 0;
  for (size_t i = 0; i < spec->n_tensors; i++) {
    const hkc_tensor_t *t = &spec->tensors[i];
    if (!name_ok("tensor", t->name)) return -1;
    for (int g = 0; g < spec->n_batch; g++) { /* the format's bound, which the loader checks */
      const int64_t elems = hkc_tensor_elems(t, spec->batch_sizes[g]);
      if (elems < 0 || (uint64_t)elems >= HK_MAX_TENSOR_BYTES / hkc_dtype_size(t->dtype)) {
        hkc_error(NOLOC, "cannot write the artifact: tensor %s is 2^48 bytes or more at batch %lld (or a dim is not "
                  "positive)", t->name, (long long)spec->batch_sizes[g]);
        return -1;
      }
    }
  }
  for (size_t t = 0; t < in->n_targets; t++) {
    const hkc_target_out_t *to = &in->targets[t];
    if (!to->name[0] || (to->code_size && !to->code && !to->code_zstd) || (size_t)to->code_size > HK_MAX_CODE_BYTES) {
      hkc_error(NOLOC, "cannot write the artifact: target %zu has no name or a bad code object", t);
      return -1;
    }
    for (size_t u = 0; u < t; u++) {
      if (strcmp(in->targets[u].name, to->name) == 0) {
        hkc_error(NOLOC, "cannot write the artifact: target %s appears twice", to->name);
        return -1;
      }
    }
    if (to->n_graphs != (size_t)spec->n_batch) {
      hkc_error(NOLOC, "cannot write the artifact: target %s has %zu graphs for %d batch sizes", to->name,
                to->n_graphs, spec->n_batch);
      return -1;
    }
    for (size_t k = 0; k < to->n_kernels; k++)
      if (!name_ok("kernel", to->kernels[k].name)) return -1;
    b->n_kernels += to->n_kernels;
    for (size_t g = 0; g < to->n_graphs; g++) {
      const hkc_graph_out_t *go = &to->graphs[g];
      if (go->batch != spec->batch_sizes[g] || (spec->n_tensors && !go->placements)) {
        hkc_error(NOLOC, "cannot write the artifact: target %s graph %zu is for batch %lld, expected %lld", to->name,
                  g, (long long)go->batch, (long long)spec->batch_sizes[g]);
        return -1;
      }
      if (go->workspace_bytes >= HK_MAX_TENSOR_BYTES) {
        hkc_error(NOLOC, "cannot write the artifact: target %s batch %lld needs a workspace of %llu bytes, 2^48 or "
                  "more", to->name, (long long)go->batch, (unsigned long long)go->workspace_bytes);
        return -1;
      }
      if (go->semaphore_count > HK_MAX_SEMAPHORES) {
        hkc_error(NOLOC, "cannot write the artifact: target %s batch %lld needs %u semaphores, over the format's "
                  "limit of %u", to->name, (long long)go->batch, go->semaphore_count, HK_MAX_SEMAPHORES);
        return -1;
      }
      for (size_t j = 0; j < go->n_launches; j++) {
        const hkc_launch_t *l = &go->launches[j];
        if (l->kernel >= to->n_kernels || l->n_args > HKC_MAX_ARGS || l->n_deps > HK_MAX_DEPS_PER_NODE ||
            !name_ok("node", l->node_name)) {
          hkc_error(NOLOC, "cannot write the artifact: target %s batch %lld launch %zu: bad kernel index %u or "
                    "too many args/deps", to->name, (long long)go->batch, j, l->kernel);
          return -1;
        }
        if (l->pdl && to->kind != HK_TARGET_CUDA) {
          hkc_error(NOLOC, "cannot write the artifact: target %s batch %lld launch %zu is marked for programmatic "
                    "dependent launch, which the format allows on CUDA targets only", to->name, (long long)go->batch, j);
          return -1;
        }
        for (uint32_t a = 0; a < l->n_args; a++) {
          const hkc_arg_t *arg = &l->args[a];
          if ((unsigned)arg->kind >= HK_ARG_KIND_COUNT_ ||
              (arg->kind == HK_ARG_TENSOR && (arg->i < 0 || (uint64_t)arg->i >= spec->n_tensors))) {
            hkc_error(NOLOC, "cannot write the artifact: target %s launch %zu arg %u is not a valid argument",
                      to->name, j, a);
            return -1;
          }
          const char *problem = arg->kind == HK_ARG_TMAP ? tmap_problem(spec, to, go->batch, (uint64_t)arg->i) : NULL;
          if (problem) {
            hkc_error(NOLOC, "cannot write the artifact: target %s batch %lld launch %zu arg %u is a TMA tensor map "
                      "the format does not allow: %s", to->name, (long long)go->batch, j, a, problem);
            return -1;
          }
          if (arg->kind == HK_ARG_SCRATCH || arg->kind == HK_ARG_SEMAPHORE)
            problem = workspace_arg_problem(go, arg->kind, (uint64_t)arg->i);
          if (problem) {
            hkc_error(NOLOC, "cannot write the artifact: target %s batch %lld launch %zu arg %u: %s", to->name,
                      (long long)go->batch, j, a, problem);
            return -1;
          }
        }
        if (b->has_plan && go->fused_counts[j] < 1) {
          hkc_error(NOLOC, "cannot write the artifact: target %s batch %lld launch %zu computes %d spec nodes "
                    "(at least 1)", to->name, (long long)go->batch, j, go->fused_counts[j]);
          return -1;
        }
        for (uint32_t d = 0; d < l->n_deps; d++) {
          if (l->deps[d] >= j) {
            hkc_error(NOLOC, "cannot write the artifact: target %s launch %zu depends on %u, not an earlier launch",
                      to->name, j, l->deps[d]);
            return -1;
          }
        }
        b->n_args += l->n_args;
        b->n_deps += l->n_deps;
      }
      b->n_nodes += go->n_launches;
      b->n_graphs++;
    }
  }
  if (b->n_kernels > HK_MAX_KERNELS || b->n_graphs > HK_MAX_GRAPHS || b->n_nodes > HK_MAX_NODES) {
    hkc_error(NOLOC, "cannot write the artifact: %zu kernels, %zu graphs, %zu nodes exceed the format's limits",
              b->n_kernels, b->n_graphs, b->n_nodes);
    return -1;
  }
  b->n_placements = b->n_graphs * spec->n_tensors;
  return 0;
}

/* The stored weights' index (format 1.4): each in->weights entry a PARAM of the spec whose dims
 * do not depend on batch, ascending, exactly its byte size, at its predecessor's end rounded up
 * to HK_WEIGHTS_ALIGN (sizes and offsets checked for overflow). The bytes are copied in
 * assemble, straight from the caller's memory. */
static int build_weights(builder_t *b) {
  const hkc_pack_in_t *in = b->in;
  if (!in->n_weights) return 0;
  const hkc_spec_t *spec = in->spec;
  b->weight_recs = calloc(in->n_weights, sizeof *b->weight_recs);
  if (!b->weight_recs || in->n_weights > spec->n_tensors) {
    hkc_error(NOLOC, "cannot write the artifact: out of memory (or more weights than tensors)");
    return -1;
  }
  uint64_t end = 0;
  for (size_t i = 0; i < in->n_weights; i++) {
    const hkc_weight_in_t *w = &in->weights[i];
    const hkc_tensor_t *t = w->tensor < spec->n_tensors ? &spec->tensors[w->tensor] : NULL;
    uint64_t bytes = t ? hkc_dtype_size(t->dtype) : 0;
    int ok = t && t->role == HK_ROLE_PARAM && (i == 0 || w->tensor > in->weights[i - 1].tensor) && w->data;
    for (uint32_t d = 0; ok && d < t->rank; d++)
      ok = t->dims[d].mul == 0 && t->dims[d].add > 0 &&
           !__builtin_mul_overflow(bytes, (uint64_t)t->dims[d].add, &bytes);
    uint64_t at = 0;
    ok = ok && bytes == w->bytes && bytes <= (uint64_t)INT64_MAX &&
         !__builtin_add_overflow(end, (uint64_t)HK_WEIGHTS_ALIGN - 1, &at);
    at &= ~(uint64_t)(HK_WEIGHTS_ALIGN - 1);
    ok = ok && !__builtin_add_overflow(at, bytes, &end);
    if (!ok) {
      hkc_error(NOLOC, "cannot write the artifact: weights entry %zu (tensor %u) is not a param of the spec, not "
                "ascending, not of the param's size (%llu bytes given) or overflows", i, w->tensor,
                (unsigned long long)w->bytes);
      return -1;
    }
    b->weight_recs[i] = (hk_weight_rec_t){w->tensor, 0, at, bytes};
  }
  if (end > (uint64_t)SIZE_MAX / 2) {
    hkc_error(NOLOC, "cannot write the artifact: %llu bytes of weights do not fit in memory here",
              (unsigned long long)end);
    return -1;
  }
  b->weights_size = end;
  return 0;
}

/* EXTENTS (format 1.6), parallel to ARGS: for each tensor argument the bytes its launch may
 * touch of the tensor (lower.h, hkc_launch_extents, from the kernel's key; hkc merge passes an
 * input's record), at least one element and at most the tensor's size at the graph's batch; 0
 * for every other argument. A launch that would overrun a tensor is a compiler bug, refused
 * here rather than by libhkrt at run time. */
static int build_extents(builder_t *b) {
  const hkc_pack_in_t *in = b->in;
  const hkc_spec_t *spec = in->spec;
  b->extents = calloc(b->n_args + 1, sizeof *b->extents);
  if (!b->extents) {
    hkc_error(NOLOC, "cannot write the artifact: out of memory");
    return -1;
  }
  size_t at = 0;
  for (size_t t = 0; t < in->n_targets; t++) {
    const hkc_target_out_t *to = &in->targets[t];
    for (size_t g = 0; g < to->n_graphs; g++) {
      const hkc_graph_out_t *go = &to->graphs[g];
      for (size_t j = 0; j < go->n_launches; j++) {
        const hkc_launch_t *l = &go->launches[j];
        const hkc_kernel_out_t *k = &to->kernels[l->kernel];
        uint64_t *ext = &b->extents[at];
        at += l->n_args;
        if (l->extents) {
          memcpy(ext, l->extents, l->n_args * sizeof *ext);
        } else if (hkc_launch_extents(&k->key, l->args, l->n_args, ext) != 0) {
          hkc_error(NOLOC, "cannot write the artifact: target %s batch %lld launch %zu (%s, kernel %s): its %u "
                    "arguments are not those the kernel's op takes (lower.h's argument layouts)", to->name,
                    (long long)go->batch, j, l->node_name, k->name, l->n_args);
          return -1;
        }
        for (uint32_t a = 0; a < l->n_args; a++) {
          const hkc_arg_t *arg = &l->args[a];
          const hkc_tensor_t *tensor = arg->kind == HK_ARG_TENSOR ? &spec->tensors[arg->i] : NULL;
          const int64_t elems = tensor ? hkc_tensor_elems(tensor, go->batch) : 0; /* -1: overflows */
          uint64_t size = 0;
          if (elems > 0 && __builtin_mul_overflow((uint64_t)elems, (uint64_t)hkc_dtype_size(tensor->dtype), &size))
            size = 0;
          if (tensor ? ext[a] == 0 || ext[a] > size : ext[a] != 0) {
            hkc_error(NOLOC, "cannot write the artifact: target %s batch %lld launch %zu (%s, kernel %s) argument %u "
                      "may touch %llu bytes of %s%s (%llu bytes)", to->name, (long long)go->batch, j, l->node_name,
                      k->name, a, (unsigned long long)ext[a], tensor ? "tensor " : "an argument that is not a tensor",
                      tensor ? tensor->name : "", (unsigned long long)size);
            return -1;
          }
        }
      }
    }
  }
  return 0;
}

/* The PLAN payload: per graph the unfused totals, per node (parallel to NODES) its cost. */
static int build_plan(builder_t *b) {
  if (!b->has_plan) return 0;
  const hkc_pack_in_t *in = b->in;
  b->plan_size = b->n_graphs * sizeof(hk_plan_graph_rec_t) + b->n_nodes * sizeof(hk_plan_node_rec_t);
  b->plan = calloc(b->plan_size ? b->plan_size : 1, 1);
  if (!b->plan) {
    hkc_error(NOLOC, "cannot write the artifact: out of memory");
    return -1;
  }
  hk_plan_graph_rec_t *graphs = (hk_plan_graph_rec_t *)b->plan;
  hk_plan_node_rec_t *nodes = (hk_plan_node_rec_t *)(b->plan + b->n_graphs * sizeof *graphs);
  size_t graph_at = 0, node_at = 0;
  for (size_t t = 0; t < in->n_targets; t++) {
    for (size_t g = 0; g < in->targets[t].n_graphs; g++) {
      const hkc_graph_out_t *go = &in->targets[t].graphs[g];
      hk_plan_graph_rec_t *gr = &graphs[graph_at++];
      gr->unfused_bytes = go->unfused.bytes;
      gr->unfused_flops = go->unfused.flops;
      gr->unfused_nodes = go->unfused_nodes;
      for (size_t j = 0; j < go->n_launches; j++) {
        hk_plan_node_rec_t *nr = &nodes[node_at++];
        nr->bytes = go->costs[j].bytes;
        nr->flops = go->costs[j].flops;
        nr->fused_nodes = (uint32_t)go->fused_counts[j];
        nr->flags = go->costs[j].matrix ? HK_PLAN_MATRIX : 0;
      }
    }
  }
  return 0;
}

static int build_tables(builder_t *b) {
  const hkc_pack_in_t *in = b->in;
  const hkc_spec_t *spec = in->spec;
  size_t nt = in->n_targets;
  b->targets = calloc(nt, sizeof *b->targets);
  b->kernels = calloc(b->n_kernels + 1, sizeof *b->kernels);
  b->tensors = calloc(spec->n_tensors + 1, sizeof *b->tensors);
  b->graphs = calloc(b->n_graphs + 1, sizeof *b->graphs);
  b->nodes = calloc(b->n_nodes + 1, sizeof *b->nodes);
  b->args = calloc(b->n_args + 1, sizeof *b->args);
  b->deps = calloc(b->n_deps + 1, sizeof *b->deps);
  b->placements = calloc(b->n_placements + 1, sizeof *b->placements);
  if (!b->targets || !b->kernels || !b->tensors || !b->graphs || !b->nodes || !b->args || !b->deps ||
      !b->placements) {
    hkc_error(NOLOC, "cannot write the artifact: out of memory");
    return -1;
  }
  uint32_t empty;
  ADD_STRING(b, "", &empty);

  hk_manifest_t *m = &b->manifest;
  ADD_STRING(b, spec->name, &m->name);
  m->dtype = (uint32_t)spec->dtype;
  m->target_count = (uint32_t)nt;
  m->tensor_count = (uint32_t)spec->n_tensors;
  m->batch_count = (uint32_t)spec->n_batch;
  m->batch_policy = (uint32_t)spec->batch_policy;
  m->spec_hash = spec->hash;
  for (int i = 0; i < spec->n_batch; i++) m->batch_sizes[i] = (uint64_t)spec->batch_sizes[i];

  for (size_t i = 0; i < spec->n_tensors; i++) {
    const hkc_tensor_t *t = &spec->tensors[i];
    hk_tensor_rec_t *r = &b->tensors[i];
    ADD_STRING(b, t->name, &r->name);
    r->role = (uint32_t)t->role;
    r->dtype = (uint32_t)t->dtype;
    r->rank = t->rank;
    for (uint32_t d = 0; d < t->rank && d < HK_MAX_RANK; d++) {
      r->dims[d].mul = t->dims[d].mul;
      r->dims[d].add = t->dims[d].add;
    }
  }

  for (size_t i = 0; i < spec->n_tensors; i++) b->n_parts += spec->tensors[i].n_parts;
  if (b->n_parts > HK_MAX_PART_RECORDS) {
    hkc_error(NOLOC, "cannot write the artifact: %zu parts in all (the format's limit is %u)", b->n_parts,
              HK_MAX_PART_RECORDS);
    return -1;
  }
  if (b->n_parts && !(b->parts = calloc(b->n_parts, sizeof *b->parts))) {
    hkc_error(NOLOC, "cannot write the artifact: out of memory");
    return -1;
  }
  for (size_t i = 0, at = 0; i < spec->n_tensors; i++)
    for (uint32_t p = 0; p < spec->tensors[i].n_parts; p++) {
      if (!name_ok("part", spec->tensors[i].parts[p])) return -1;
      b->parts[at].tensor = (uint32_t)i;
      ADD_STRING(b, spec->tensors[i].parts[p], &b->parts[at].name);
      at++;
    }

  if (spec->sharded_ranks) { /* PARALLEL: the ranks, then each sliced tensor's record */
    size_t n_shards = 0;
    for (size_t i = 0; i < spec->n_tensors; i++) n_shards += spec->tensors[i].shard.n_seg > 0;
    b->parallel_size = sizeof(hk_parallel_rec_t) + n_shards * sizeof(hk_shard_rec_t);
    if (!(b->parallel = calloc(1, b->parallel_size))) {
      hkc_error(NOLOC, "cannot write the artifact: out of memory");
      return -1;
    }
    hk_parallel_rec_t *pr = b->parallel;
    pr->tensor_ranks = (uint32_t)spec->sharded_ranks;
    pr->shard_count = (uint32_t)n_shards;
    hk_shard_rec_t *sr = (hk_shard_rec_t *)(pr + 1);
    for (size_t i = 0; i < spec->n_tensors; i++) {
      const hkc_shard_t *sh = &spec->tensors[i].shard;
      if (!sh->n_seg) continue;
      sr->tensor = (uint32_t)i;
      sr->axis = (uint32_t)sh->axis;
      sr->segment_count = (uint32_t)sh->n_seg;
      sr->source = (uint32_t)sh->source;
      for (int k = 0; k < sh->n_seg; k++) {
        sr->seg_size[k] = (uint64_t)sh->seg_size[k];
        sr->seg_parts[k] = (uint32_t)sh->seg_parts[k];
      }
      sr++;
    }
  }

  size_t kernel_at = 0, graph_at = 0, node_at = 0, arg_at = 0, dep_at = 0, place_at = 0;
  for (size_t t = 0; t < nt; t++) {
    const hkc_target_out_t *to = &in->targets[t];
    hk_target_rec_t *tr = &b->targets[t];
    ADD_STRING(b, to->name, &tr->name);
    ADD_STRING(b, to->features, &tr->features);
    tr->kind = (uint32_t)to->kind;
    tr->code_section = (uint32_t)(HKC_TABLE_SECTIONS + t);
    tr->kernel_first = (uint32_t)kernel_at;
    tr->kernel_count = (uint32_t)to->n_kernels;
    tr->graph_first = (uint32_t)graph_at;
    tr->graph_count = (uint32_t)to->n_graphs;
    for (size_t k = 0; k < to->n_kernels; k++) {
      const hkc_kernel_out_t *ko = &to->kernels[k];
      hk_kernel_rec_t *kr = &b->kernels[kernel_at + k];
      ADD_STRING(b, ko->name, &kr->name);
      ADD_STRING(b, ko->params, &kr->params);
      kr->op = (uint32_t)ko->key.op;
      kr->target = (uint32_t)t;
      kr->vgprs = ko->vgprs;
      kr->agprs = ko->agprs;
      kr->sgprs = ko->sgprs;
      kr->shared_bytes = ko->shared_bytes;
      kr->scratch_bytes = ko->scratch_bytes;
      kr->wave_size = ko->wave_size;
      kr->max_block = ko->max_block;
      kr->occupancy = ko->occupancy;
      kr->source_hash = ko->source_hash;
      kr->code_offset = ko->code_offset;
      kr->code_size = ko->code_size;
    }
    for (size_t g = 0; g < to->n_graphs; g++) {
      const hkc_graph_out_t *go = &to->graphs[g];
      hk_graph_rec_t *gr = &b->graphs[graph_at++];
      gr->target = (uint32_t)t;
      gr->node_first = (uint32_t)node_at;
      gr->node_count = (uint32_t)go->n_launches;
      gr->batch = (uint64_t)go->batch;
      gr->workspace_bytes = go->workspace_bytes;
      gr->semaphore_count = go->semaphore_count;
      gr->placement_first = place_at;
      if (spec->n_tensors) memcpy(&b->placements[place_at], go->placements, spec->n_tensors * sizeof(uint64_t));
      place_at += spec->n_tensors;
      for (size_t j = 0; j < go->n_launches; j++) {
        const hkc_launch_t *l = &go->launches[j];
        hk_node_rec_t *nr = &b->nodes[node_at++];
        nr->kernel = (uint32_t)kernel_at + l->kernel;
        ADD_STRING(b, l->node_name, &nr->name);
        memcpy(nr->grid, l->grid, sizeof nr->grid);
        memcpy(nr->block, l->block, sizeof nr->block);
        nr->shared_bytes = l->shared_bytes;
        nr->arg_first = (uint32_t)arg_at;
        nr->arg_count = l->n_args;
        nr->dep_first = (uint32_t)dep_at;
        nr->dep_count = l->n_deps;
        nr->flags = l->pdl ? HK_NODE_FLAG_PDL : 0;
        for (uint32_t a = 0; a < l->n_args; a++) {
          const hkc_arg_t *arg = &l->args[a];
          hk_arg_rec_t *ar = &b->args[arg_at++];
          ar->kind = (uint32_t)arg->kind;
          if (arg->kind != HK_ARG_F32 && arg->kind != HK_ARG_NULL) {
            ar->value = (uint64_t)arg->i; /* TMAP, SCRATCH, SEMAPHORE: the packed fields (pack_format.h) */
          } else if (arg->kind == HK_ARG_F32) {
            uint32_t bits;
            memcpy(&bits, &arg->f, sizeof bits);
            ar->value = bits;
          }
        }
        if (l->n_deps) memcpy(&b->deps[dep_at], l->deps, l->n_deps * sizeof(uint32_t));
        dep_at += l->n_deps;
      }
    }
    kernel_at += to->n_kernels;
  }
  return 0;
}

/* Provenance: the caller's lines, then "toolchain.<target>=<toolchain>" per target. */
static int build_provenance(builder_t *b) {
  const hkc_pack_in_t *in = b->in;
  size_t cap = 0, len = 0;
  char *p = NULL;
  const char *base = in->provenance ? in->provenance : "";
  size_t need = strlen(base) + 2;
  for (size_t t = 0; t < in->n_targets; t++)
    need += strlen(in->targets[t].name) + strlen(in->targets[t].toolchain) + 16;
  if (hkc_reserve((void **)&p, &cap, need, 1) != 0) {
    hkc_error(NOLOC, "cannot write the artifact: out of memory");
    return -1;
  }
  len = (size_t)snprintf(p, cap, "%s", base);
  if (len && p[len - 1] != '\n') p[len++] = '\n';
  for (size_t t = 0; t < in->n_targets; t++) {
    if (!in->targets[t].toolchain[0]) continue;
    len += (size_t)snprintf(p + len, cap - len, "toolchain.%s=%s\n", in->targets[t].name, in->targets[t].toolchain);
  }
  b->provenance = p;
  b->provenance_len = len;
  return 0;
}

/* One zstd frame of data[0, size) at level, with its content size and a content checksum, so
 * that damage inside the compressed payload is caught at decompression, before the object is
 * loaded. *out: malloc'd. 0 / -1 (reported, naming target). */
static int compress_payload(const void *data, size_t size, int level, const char *target, void **out,
                            size_t *out_size) {
  size_t bound = ZSTD_compressBound(size);
  *out = malloc(bound);
  if (!*out) {
    hkc_error(NOLOC, "cannot write the artifact: out of memory compressing target %s", target);
    return -1;
  }
  ZSTD_CCtx *cctx = ZSTD_createCCtx();
  size_t n = cctx ? ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level) : (size_t)-1;
  if (!ZSTD_isError(n)) n = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  if (!ZSTD_isError(n)) n = ZSTD_compress2(cctx, *out, bound, size ? data : "", size);
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) {
    hkc_error(NOLOC, "cannot write the artifact: zstd failed on target %s: %s", target, ZSTD_getErrorName(n));
    return -1;
  }
  *out_size = n;
  return 0;
}

/* The PTX of the CUDA targets that carry it: a compressed payload per target and the index
 * records (kernel order, which is target order). */
static int compress_ptx(builder_t *b, int level) {
  const hkc_pack_in_t *in = b->in;
  b->ptx = calloc(in->n_targets ? in->n_targets : 1, sizeof *b->ptx);
  b->ptx_size = calloc(in->n_targets ? in->n_targets : 1, sizeof *b->ptx_size);
  b->ptx_recs = calloc(b->n_kernels ? b->n_kernels : 1, sizeof *b->ptx_recs);
  if (!b->ptx || !b->ptx_size || !b->ptx_recs) {
    hkc_error(NOLOC, "cannot write the artifact: out of memory");
    return -1;
  }
  size_t kernel_at = 0;
  for (size_t t = 0; t < in->n_targets; t++) {
    const hkc_target_out_t *to = &in->targets[t];
    if (to->ptx || to->ptx_zstd) {
      if (to->kind != HK_TARGET_CUDA) {
        hkc_error(NOLOC, "cannot write the artifact: target %s carries PTX but is not a CUDA target", to->name);
        return -1;
      }
      if (to->ptx_zstd) { /* stored as given (hkc merge) */
        b->ptx[t] = malloc(to->ptx_zstd_size ? to->ptx_zstd_size : 1);
        if (!b->ptx[t]) {
          hkc_error(NOLOC, "cannot write the artifact: out of memory copying the PTX of target %s", to->name);
          return -1;
        }
        memcpy(b->ptx[t], to->ptx_zstd, to->ptx_zstd_size);
        b->ptx_size[t] = to->ptx_zstd_size;
      } else if (compress_payload(to->ptx, to->ptx_size, level, to->name, &b->ptx[t], &b->ptx_size[t]) != 0) {
        return -1;
      }
      for (size_t k = 0; k < to->n_kernels; k++) {
        const hkc_kernel_out_t *ko = &to->kernels[k];
        assert(ko->ptx_size > 0 && ko->ptx_offset + ko->ptx_size <= to->ptx_size);
        b->ptx_recs[b->n_ptx_recs++] = (hk_ptx_rec_t){(uint32_t)(kernel_at + k), 0, ko->ptx_offset, ko->ptx_size};
      }
    }
    kernel_at += to->n_kernels;
  }
  return 0;
}

static int compress_code(builder_t *b) {
  const hkc_pack_in_t *in = b->in;
  int level = in->compression_level ? in->compression_level : HKC_PACK_DEFAULT_LEVEL;
  b->code = calloc(in->n_targets, sizeof *b->code);
  b->code_size = calloc(in->n_targets, sizeof *b->code_size);
  if (!b->code || !b->code_size) {
    hkc_error(NOLOC, "cannot write the artifact: out of memory");
    return -1;
  }
  for (size_t t = 0; t < in->n_targets; t++) {
    const hkc_target_out_t *to = &in->targets[t];
    if (to->code_zstd) { /* stored as given (hkc merge): the frame the input's build wrote */
      b->code[t] = malloc(to->code_zstd_size ? to->code_zstd_size : 1);
      if (!b->code[t]) {
        hkc_error(NOLOC, "cannot write the artifact: out of memory copying target %s", to->name);
        return -1;
      }
      memcpy(b->code[t], to->code_zstd, to->code_zstd_size);
      b->code_size[t] = to->code_zstd_size;
      continue;
    }
    if (compress_payload(to->code, to->code_size, level, to->name, &b->code[t], &b->code_size[t]) != 0) return -1;
  }
  return compress_ptx(b, level);
}

static uint64_t align_up(uint64_t x) { return (x + HK_SECTION_ALIGN - 1) & ~(uint64_t)(HK_SECTION_ALIGN - 1); }

/* Lays out header, table and payloads into one zeroed buffer and fills the checksums. */
static int assemble(builder_t *b, void **out_data, size_t *out_size) {
  const hkc_pack_in_t *in = b->in;
  size_t n_ptx = 0;
  for (size_t t = 0; t < in->n_targets; t++) n_ptx += b->ptx[t] != NULL;
  size_t n_sections = HKC_TABLE_SECTIONS + in->n_targets + (b->has_plan ? 1 : 0) + (n_ptx ? 1 + n_ptx : 0) +
                      (b->n_parts ? 1 : 0) + (b->weight_recs ? 2 : 0) + 1 + (b->parallel ? 1 : 0) +
                      (in->sign_seed ? 1 : 0);
  payload_t pl[HKC_TABLE_SECTIONS + HK_MAX_TARGETS + 1 + 1 + HK_MAX_TARGETS + 1 + 2 + 1 + 1 + 1];
  const payload_t tables[HKC_TABLE_SECTIONS] = {
      {HK_SECTION_STRINGS, 0, UINT32_MAX, b->strings.data, b->strings.len, 0},
      {HK_SECTION_MANIFEST, 0, UINT32_MAX, &b->manifest, sizeof b->manifest, 0},
      {HK_SECTION_TARGETS, 0, UINT32_MAX, b->targets, in->n_targets * sizeof *b->targets, 0},
      {HK_SECTION_KERNELS, 0, UINT32_MAX, b->kernels, b->n_kernels * sizeof *b->kernels, 0},
      {HK_SECTION_TENSORS, 0, UINT32_MAX, b->tensors, in->spec->n_tensors * sizeof *b->tensors, 0},
      {HK_SECTION_GRAPHS, 0, UINT32_MAX, b->graphs, b->n_graphs * sizeof *b->graphs, 0},
      {HK_SECTION_NODES, 0, UINT32_MAX, b->nodes, b->n_nodes * sizeof *b->nodes, 0},
      {HK_SECTION_ARGS, 0, UINT32_MAX, b->args, b->n_args * sizeof *b->args, 0},
      {HK_SECTION_DEPS, 0, UINT32_MAX, b->deps, b->n_deps * sizeof *b->deps, 0},
      {HK_SECTION_PLACEMENTS, 0, UINT32_MAX, b->placements, b->n_placements * sizeof *b->placements, 0},
      {HK_SECTION_PROVENANCE, 0, UINT32_MAX, b->provenance, b->provenance_len, 0},
  };
  memcpy(pl, tables, sizeof tables);
  for (size_t i = 0; i < HKC_TABLE_SECTIONS; i++) pl[i].raw_size = pl[i].size;
  for (size_t t = 0; t < in->n_targets; t++)
    pl[HKC_TABLE_SECTIONS + t] = (payload_t){HK_SECTION_CODE, HK_SECTION_FLAG_ZSTD, (uint32_t)t, b->code[t],
                                             b->code_size[t], in->targets[t].code_size};
  if (b->has_plan) /* last, so that the CODE sections keep their table indices */
    pl[HKC_TABLE_SECTIONS + in->n_targets] =
        (payload_t){HK_SECTION_PLAN, HK_SECTION_FLAG_OPTIONAL, UINT32_MAX, b->plan, b->plan_size, b->plan_size};
  if (n_ptx) { /* after everything a 1.2 reader knows: PTX_INDEX, then each target's PTX */
    size_t at_pl = HKC_TABLE_SECTIONS + in->n_targets + (b->has_plan ? 1 : 0);
    size_t index_bytes = b->n_ptx_recs * sizeof *b->ptx_recs;
    pl[at_pl++] = (payload_t){HK_SECTION_PTX_INDEX, HK_SECTION_FLAG_OPTIONAL, UINT32_MAX, b->ptx_recs, index_bytes,
                              index_bytes};
    for (size_t t = 0; t < in->n_targets; t++)
      if (b->ptx[t])
        pl[at_pl++] = (payload_t){HK_SECTION_PTX, HK_SECTION_FLAG_OPTIONAL | HK_SECTION_FLAG_ZSTD, (uint32_t)t,
                                  b->ptx[t], b->ptx_size[t], in->targets[t].ptx_size};
  }
  size_t at_pl = HKC_TABLE_SECTIONS + in->n_targets + (b->has_plan ? 1 : 0) + (n_ptx ? 1 + n_ptx : 0);
  if (b->n_parts) /* after everything a 1.3 reader knows */
    pl[at_pl++] = (payload_t){HK_SECTION_PARTS, HK_SECTION_FLAG_OPTIONAL, UINT32_MAX, b->parts,
                              b->n_parts * sizeof *b->parts, b->n_parts * sizeof *b->parts};
  if (b->weight_recs) { /* after everything a 1.3 reader knows; WEIGHTS's bytes are copied below */
    size_t index_bytes = in->n_weights * sizeof *b->weight_recs;
    pl[at_pl++] = (payload_t){HK_SECTION_WEIGHTS_INDEX, HK_SECTION_FLAG_OPTIONAL, UINT32_MAX, b->weight_recs,
                              index_bytes, index_bytes};
    pl[at_pl++] = (payload_t){HK_SECTION_WEIGHTS, HK_SECTION_FLAG_OPTIONAL, UINT32_MAX, NULL,
                              (size_t)b->weights_size, b->weights_size};
  }
  const size_t extents_bytes = b->n_args * sizeof *b->extents; /* after everything a 1.5 reader knows */
  pl[at_pl++] = (payload_t){HK_SECTION_EXTENTS, HK_SECTION_FLAG_OPTIONAL, UINT32_MAX, b->extents, extents_bytes,
                            extents_bytes};
  if (b->parallel) /* required: a reader that skipped it would run one rank as the whole model */
    pl[at_pl++] = (payload_t){HK_SECTION_PARALLEL, 0, UINT32_MAX, b->parallel, b->parallel_size, b->parallel_size};
  static const hk_signature_rec_t no_signature; /* filled in place by hkc_pack_sign_in_place */
  if (in->sign_seed) /* last, where hkc sign appends it: the same bytes as build, then sign */
    pl[at_pl++] = (payload_t){HK_SECTION_SIGNATURE, HK_SECTION_FLAG_OPTIONAL, UINT32_MAX, &no_signature,
                              sizeof no_signature, sizeof no_signature};
  assert(at_pl == n_sections);

  uint64_t table_offset = sizeof(hk_pack_header_t);
  uint64_t at = align_up(table_offset + n_sections * sizeof(hk_section_t));
  hk_section_t table[sizeof pl / sizeof *pl];
  memset(table, 0, sizeof table);
  for (size_t i = 0; i < n_sections; i++) {
    table[i].kind = pl[i].kind;
    table[i].flags = pl[i].flags;
    table[i].offset = at;
    table[i].size = pl[i].size;
    table[i].raw_size = pl[i].raw_size;
    if (pl[i].data || !pl[i].size) table[i].checksum = XXH3_64bits(pl[i].size ? pl[i].data : "", pl[i].size);
    table[i].target = pl[i].target;
    at = (i + 1 < n_sections) ? align_up(at + pl[i].size) : at + pl[i].size;
  }
  uint64_t file_size = at;
  uint8_t *data = calloc(1, (size_t)file_size);
  if (!data) {
    hkc_error(NOLOC, "cannot write the artifact: out of memory (%llu bytes)", (unsigned long long)file_size);
    return -1;
  }
  for (size_t i = 0; i < n_sections; i++) {
    if (pl[i].size && pl[i].data) memcpy(data + table[i].offset, pl[i].data, pl[i].size);
    if (pl[i].data || !pl[i].size) continue;
    /* WEIGHTS: each param's bytes from the caller's memory (one copy, no staging), then the
     * checksum over the section as stored */
    assert(pl[i].kind == HK_SECTION_WEIGHTS);
    for (size_t w = 0; w < in->n_weights; w++)
      memcpy(data + table[i].offset + b->weight_recs[w].offset, in->weights[w].data, (size_t)b->weight_recs[w].size);
    table[i].checksum = XXH3_64bits(data + table[i].offset, pl[i].size);
  }
  memcpy(data + table_offset, table, n_sections * sizeof(hk_section_t));

  hk_pack_header_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, HK_PACK_MAGIC, HK_PACK_MAGIC_SIZE);
  h.version_major = HK_PACK_VERSION_MAJOR;
  h.version_minor = HK_PACK_VERSION_MINOR;
  h.endian_tag = HK_PACK_ENDIAN_TAG;
  h.header_size = sizeof h;
  h.section_entry_size = sizeof(hk_section_t);
  h.section_count = (uint32_t)n_sections;
  h.file_size = file_size;
  h.section_table_offset = table_offset;
  h.table_checksum = XXH3_64bits(data + table_offset, n_sections * sizeof(hk_section_t));
  h.header_checksum = 0;
  h.header_checksum = XXH3_64bits(&h, sizeof h);
  memcpy(data, &h, sizeof h);
  *out_data = data;
  *out_size = (size_t)file_size;
  return 0;
}

/* Whether libhkrt accepts every launch of the written pack (hk_graph_check_extents: the
 * extents it derives from the arguments alone fit the tensors and equal the EXTENTS record);
 * reported when not. */
static int extents_accepted(const hk_pack_view_t *view) {
  for (uint32_t g = 0; g < view->graph_count; g++) {
    if (hk_graph_check_extents(view, g) != HK_OK) {
      hkc_error(NOLOC, "cannot write the artifact: libhkrt would refuse it: %s", hk_last_error());
      return 0;
    }
  }
  return 1;
}

int hkc_pack_write_memory(const hkc_pack_in_t *in, void **out_data, size_t *out_size) {
  *out_data = NULL;
  *out_size = 0;
  builder_t b;
  memset(&b, 0, sizeof b);
  b.in = in;
  void *data = NULL;
  size_t size = 0;
  int rc = -1;
  if (!in) {
    hkc_error(NOLOC, "cannot write the artifact: no input");
    return -1;
  }
  if (validate_and_count(&b) == 0 && build_tables(&b) == 0 && build_extents(&b) == 0 && build_plan(&b) == 0 &&
      build_weights(&b) == 0 && build_provenance(&b) == 0 && compress_code(&b) == 0 &&
      assemble(&b, &data, &size) == 0) {
    hk_pack_view_t view;
    /* The format's own limits: a loader's default limits (proportionate to the file) are a
     * policy of the app that opens the pack, which its open options can change. */
    const hk_pack_limits_t format = {HK_MAX_CODE_BYTES, HK_MAX_NODES, HK_MAX_DEPS};
    if (hk_pack_verify(data, size, &format, &view) != HK_OK) {
      hkc_error(NOLOC, "cannot write the artifact: the result does not verify: %s", hk_last_error());
      free(data);
    } else if (!extents_accepted(&view)) { /* libhkrt's own derivation agrees with the record */
      free(data);
    } else if (in->sign_seed) { /* in place: a pack of weights is not copied again */
      rc = hkc_pack_sign_in_place(data, size, in->sign_seed);
      if (rc == 0) {
        *out_data = data;
        *out_size = size;
      } else {
        free(data);
      }
    } else {
      *out_data = data;
      *out_size = size;
      rc = 0;
    }
  }
  builder_free(&b);
  return rc;
}

/* Through the write layer (util.h, "files"): atomic, a regular file or nothing at path,
 * the mode from the umask. */
int hkc_pack_write(const hkc_pack_in_t *in, const char *path) {
  char err[4200];
  if (hkc_output_check(path, err, sizeof err) != 0) { /* before compiling anything into memory */
    hkc_error(NOLOC, "%s", err);
    return -1;
  }
  void *data;
  size_t size;
  if (hkc_pack_write_memory(in, &data, &size) != 0) return -1;
  int rc = hkc_pack_write_bytes(data, size, path);
  free(data);
  return rc;
}

/* data's size bytes as the file at path, through the write layer as hkc_pack_write. */
int hkc_pack_write_bytes(const void *data, size_t size, const char *path) {
  char err[4200];
  const hkc_chunk_t chunk = {data, size};
  const int rc = hkc_file_replace(path, &chunk, 1, 0666, err, sizeof err);
  if (rc != 0) hkc_error(NOLOC, "%s", err);
  return rc;
}
