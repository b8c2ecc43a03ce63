/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/frontend/spec_internal.h -- what the files of the spec parser share (frontend.h has
 * its entry points, hkc_spec_parse and hkc_spec_load):
 *
 *   spec.c         the entry points and the builder: top-level keys, declarations, the graph,
 *                  outputs, fusion, in dependency order
 *   spec_yaml.c    the YAML tree with its line:col marks, typed access to its nodes
 *   spec_repeat.c  `repeat:` expanded in the tree
 *   spec_node.c    one graph node: keys, attributes, names; the topological sort
 *   spec_check.c   shape inference and checks per node, whole-spec checks
 *
 * spec.c uses the others; spec_node.c, spec_check.c and spec_repeat.c use spec_yaml.c; none
 * calls back. Functions shared between these files carry the hkc_spec_ prefix; their
 * contracts are beside their definitions.
 */
#ifndef HKC_SPEC_INTERNAL_H
#define HKC_SPEC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "frontend/frontend.h"
#include "util/util.h"

/* Nesting bound for the YAML tree: a spec needs 4 levels (graph > node > in > name);
 * the bound keeps the recursive walks shallow on hostile input. */
#define HKC_SPEC_MAX_DEPTH 64
/* Nodes per spec. Name lookups are linear, so this also bounds the quadratic work. */
#define HKC_SPEC_MAX_NODES 16384u
/* Batch sizes end up in launch dimensions (uint32). */
#define HKC_SPEC_MAX_BATCH INT32_MAX
/* One tensor's bytes at the largest batch size stay below this: far above any device memory,
 * low enough that later stages can add and align sizes without overflow; the pack format's
 * bound (pack_format.h), which libhkrt checks again. */
#define HKC_SPEC_MAX_TENSOR_BYTES ((int64_t)HK_MAX_TENSOR_BYTES)
/* hkc_target_out_t.name holds 64 bytes. */
#define HKC_SPEC_MAX_TARGET_LEN 63u
#define HKC_SPEC_DEFAULT_EPS 1e-5f
/* rope converts positions to f32 for the angle: up to 2^24 every position is exact,
 * beyond it neighbouring positions would share an angle. offset + seq stays at most this. */
#define HKC_SPEC_MAX_ROPE_POSITIONS (INT64_C(1) << 24)
#define HKC_SPEC_VERSION 1

/* ---- the YAML tree (spec_yaml.c) ------------------------------------------------------------ */
typedef enum ykind { Y_SCALAR, Y_SEQ, Y_MAP } ykind_t;

typedef struct ynode {
  ykind_t kind;
  hkc_loc_t loc;          /* start mark, 1-based */
  char *text;             /* scalar: NUL-terminated, no embedded NUL */
  int quoted;             /* scalar written in '...' or "..." */
  int plain;              /* scalar written without quotes or block indicators */
  struct ynode **kids;    /* list items, or map key/value pairs interleaved */
  size_t n, cap;
} ynode_t;

void hkc_spec_ynode_free(ynode_t *n);
ynode_t *hkc_spec_ynode_new(ykind_t kind, hkc_loc_t loc);
int hkc_spec_yaml_tree_build(const char *file, const char *data, size_t size, ynode_t **out_root);
int hkc_spec_ynode_is_null(const ynode_t *n);
const char *hkc_spec_ynode_desc(const ynode_t *n);
int hkc_spec_expect_kind(const ynode_t *n, ykind_t kind, const char *expected, const char *what);
hkc_loc_t hkc_spec_scalar_text_loc(const ynode_t *n);
int hkc_spec_parse_int(const ynode_t *n, const char *what, int64_t min, int64_t max, int64_t *out);
int hkc_spec_parse_float(const ynode_t *n, const char *what, float *out);
int hkc_spec_parse_bool(const ynode_t *n, const char *what, int *out);
int hkc_spec_is_identifier(const char *s);
int hkc_spec_parse_name(const ynode_t *n, const char *what, const char **out);
int hkc_spec_map_collect(const ynode_t *map, const char *const *valid, size_t n_valid, uint64_t mask,
                         const char *context, const ynode_t **keys, const ynode_t **values);
const ynode_t *hkc_spec_map_value(const ynode_t *map, const char *key);

/* ---- the builder's state (spec.c) --------------------------------------------------------- */
enum {
  REF_IN0, REF_IN1, REF_IN2, REF_BIAS, REF_RESIDUAL, REF_MUL, REF_GAMMA, REF_BETA, REF_LENGTHS, REF_MASK, REF_POS,
  REF_CTX, REF_SLOT, REF_K_CACHE, REF_V_CACHE, REF_COUNT
};
extern const char *const hkc_spec_ref_names[REF_COUNT]; /* spec_check.c: the keys, for messages */

/* A graph node between parsing and sorting: names not yet resolved. */
typedef struct pnode {
  const ynode_t *map, *name, *out;
  const ynode_t *ref[REF_COUNT]; /* NULL when absent */
  int ref_val[REF_COUNT];        /* >= 0: declared tensor; <= -2: output of pnode -(v+2) */
  hkc_node_t node;               /* attributes; tensor fields filled after sorting */
} pnode_t;

typedef struct spec_ctx {
  hkc_spec_t *spec;
  const char *file;
  size_t cap_dims, cap_targets, cap_tensors;
  size_t n_decl; /* inputs + params: tensors[0, n_decl) */
  pnode_t *pn;
  size_t n_pn;
  /* name lookups in constant time: a 16384-node graph would otherwise spend minutes comparing
   * every name with every other (keys borrowed from the tensors and the YAML tree) */
  hkc_names_t tensor_names; /* tensor name -> index in spec->tensors */
  hkc_names_t node_names;   /* graph node name -> pnode index */
  hkc_names_t out_names;    /* node output name -> pnode index */
} spec_ctx_t;

/* ---- graph nodes (spec_node.c) -------------------------------------------------------------- */
int hkc_spec_parse_node(spec_ctx_t *c, const ynode_t *map, pnode_t *pn);
int hkc_spec_resolve_ref(spec_ctx_t *c, const char *name, int *out);
int hkc_spec_topo_sort(spec_ctx_t *c, size_t *order);

/* ---- checks (spec_check.c) ----------------------------------------------------------------- */
int hkc_spec_check_state_shape(const hkc_tensor_t *t);
/* "[batch, 128, 768]" into a caller buffer of HKC_SHAPE_STR bytes; returns it. */
#define HKC_SHAPE_STR 192
const char *hkc_tensor_shape_str(const hkc_tensor_t *t, char *buf);
int hkc_spec_infer_node(spec_ctx_t *c, const pnode_t *pn, hkc_node_t *nd);
int hkc_spec_check_tensors(spec_ctx_t *c);

/* ---- repeat: (spec_repeat.c) --------------------------------------------------------------- */
int hkc_spec_repeat_expand(const char *file, ynode_t *root);

#endif /* HKC_SPEC_INTERNAL_H */
