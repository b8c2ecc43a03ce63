/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/pack/pack.h -- what a build produced, and the artifact writer (pack_write.c; the
 * format is defined in loader/include/hk/pack_format.h, which the loader owns).
 *
 * Uses codegen/ (compiled kernels), lower/ (arguments, costs), frontend/ and util/.
 */
#ifndef HKC_PACK_H
#define HKC_PACK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "codegen/codegen.h"

struct hk_pack_view; /* loader/src/pack_internal.h: a verified pack */
typedef struct hk_pack_view hk_pack_view_t;

/* ---- built targets ------------------------------------------------------------------------- */
typedef struct hkc_launch {
  uint32_t kernel;         /* index into the target's kernels */
  const char *node_name;   /* borrowed from the spec, or owned_name */
  char *owned_name;        /* a name the build composed (an rmsnorm folded at this bucket:
                              "norm,gemm"), freed with the launch; NULL otherwise */
  uint32_t grid[3], block[3], shared_bytes;
  hkc_arg_t args[HKC_MAX_ARGS];
  uint32_t n_args;
  uint32_t *deps;          /* graph-local indices of earlier launches */
  uint32_t n_deps;
  int pdl;                 /* 1: programmatic dependent launch (HK_NODE_FLAG_PDL; CUDA targets
                              only, the writer refuses it elsewhere) */
  const uint64_t *extents; /* n_args launch extents (format 1.6, EXTENTS), borrowed: hkc merge
                              passes an input's record; NULL: the writer computes them from the
                              kernel's key (lower.h, hkc_launch_extents) */
} hkc_launch_t;

typedef struct hkc_graph_out {
  int64_t batch;
  uint64_t workspace_bytes;
  uint32_t semaphore_count;/* u32 counters of the launches' SEMAPHORE arguments (format 1.3) */
  uint64_t *placements;    /* spec->n_tensors entries */
  hkc_launch_t *launches;
  size_t n_launches;
  hkc_cost_t *costs;       /* per launch (n_launches), from hkc_node_cost */
  int *fused_counts;       /* per launch: spec nodes it computes */
  hkc_cost_t unfused;      /* the spec without fusion: sums over its nodes */
  uint32_t unfused_nodes;
} hkc_graph_out_t;

typedef struct hkc_target_out {
  char name[64];           /* "host-x86_64", "gfx90a", "sm_90" */
  hk_target_kind_t kind;
  char features[64];
  void *code;              /* code object(s), concatenated (uncompressed), owned; each
                              kernel names its object's range (8-byte aligned offsets) */
  size_t code_size;
  const void *code_zstd;   /* set: the CODE payload as it is stored, one zstd frame of code_size
                              bytes (hkc merge keeps an input's frame byte for byte); code may
                              then be NULL. Borrowed. NULL: the writer compresses code */
  size_t code_zstd_size;
  void *ptx;               /* CUDA: the kernels' PTX texts, concatenated, owned (each kernel
                              names its range); NULL: the target stores no PTX */
  size_t ptx_size;
  const void *ptx_zstd;    /* set: the PTX payload as stored, one zstd frame of ptx_size bytes
                              (hkc merge, as code_zstd); ptx may then be NULL. Borrowed */
  size_t ptx_zstd_size;
  char toolchain[160];     /* e.g. "cc: gcc (Debian 12.2.0-14) 12.2.0" -> provenance */
  hkc_kernel_out_t *kernels;
  size_t n_kernels;
  hkc_graph_out_t *graphs; /* one per spec batch size, same order */
  size_t n_graphs;
} hkc_target_out_t;

/* ---- stored weights (format 1.4; pack_weights.c) ------------------------------------------ */
/* The bytes of one param stored in the pack (WEIGHTS): spec tensor `tensor` (a PARAM whose
 * dims do not depend on batch), `bytes` bytes (its size) at data, borrowed -- or, for a param
 * assembled from its `parts:` or converted from another dtype, owned: data == owned, freed by
 * hkc_pack_weights_free. */
typedef struct hkc_weight_in {
  uint32_t tensor;
  const void *data;
  uint64_t bytes;
  void *owned;
} hkc_weight_in_t;

struct hk_weights;            /* libhkrt's safetensors checkpoint (hk/hkrt.h) */
struct hk_weights_name;
/* Every param of spec takes the checkpoint tensor its name map entry (names[n_names]) names,
 * else the one of its own name, of exactly its shape and of its dtype -- or of another float
 * dtype, converted (round to nearest even, as libhkrt binds) -- else its parts: *out (malloc'd,
 * ascending by tensor; data borrowed from w unless converted or assembled) gets one entry per
 * param. Inputs are never stored. Refuses (reported, naming every missing param, each mismatch
 * with both shapes, a map entry naming a tensor that is no param or a checkpoint tensor the
 * file lacks, a param whose shape depends on batch, a value that would overflow to infinity in
 * the param's dtype) with -1; `label` names the file in messages. The conversions are noted on
 * `notes` in one line ("hkc build: weights: converting 147 tensors of LABEL from F32 to BF16");
 * NULL: not noted. */
int hkc_pack_weights_match(const hkc_spec_t *spec, const struct hk_weights *w, const struct hk_weights_name *names,
                           size_t n_names, const char *label, FILE *notes, hkc_weight_in_t **out, size_t *out_n);
/* Frees a list hkc_pack_weights_match returned (and the bytes it assembled). NULL: nothing. */
void hkc_pack_weights_free(hkc_weight_in_t *list, size_t n);

/* ---- the artifact ------------------------------------------------------------------ */
typedef struct hkc_pack_in {
  const hkc_spec_t *spec;
  const hkc_target_out_t *targets;
  size_t n_targets;
  const char *provenance;  /* "key=value\n" lines */
  int compression_level;   /* zstd level; 0 = default (19) */
  const uint8_t *sign_seed;/* HKC_KEY_SEED_BYTES of an Ed25519 secret key (hkc_key_load):
                              the artifact is signed (pack_sign.c); NULL: unsigned */
  const hkc_weight_in_t *weights; /* n_weights params stored in the pack (WEIGHTS_INDEX and
                              WEIGHTS, format 1.4), ascending by tensor; NULL: none */
  size_t n_weights;
} hkc_pack_in_t;

/* Writes the artifact atomically: a temporary file in the destination directory,
 * fsync, rename. On failure nothing is left at `path` (an existing file is kept). */
int hkc_pack_write(const hkc_pack_in_t *in, const char *path);
/* Same, into a malloc'd buffer (tests, fuzz seeds). */
int hkc_pack_write_memory(const hkc_pack_in_t *in, void **out_data, size_t *out_size);
/* Writes data atomically to path, as hkc_pack_write does (temporary file, fsync, rename). */
int hkc_pack_write_bytes(const void *data, size_t size, const char *path);

/* ---- signatures (pack_sign.c; docs/FORMAT.md, "Signatures") -------------------------------- */
#define HKC_KEY_SEED_BYTES 32 /* an Ed25519 secret key is stored as its seed */
/* Creates a key pair: `path` (the secret key, mode 0600) and `path`.pub (the public key).
 * Refuses to replace either file. Prints the key id on stdout unless quiet. Returns 0 / -1. */
int hkc_key_generate(const char *path, int quiet);
/* Creates the secret key file `path` (mode 0600) holding a new random key, exclusively and
 * whole: the key is written to a temporary file next to path, then linked to it, so that of
 * concurrent creators one wins and the others find its complete key. *out_created: 1 when
 * this call created it, 0 when path existed (nothing is written then). The public half is not
 * written (hkc_key_write_public). 0 / -1 (reported). */
int hkc_key_create_exclusive(const char *path, int *out_created);
/* The Ed25519 public key of a secret key's seed. */
#define HKC_KEY_PUBLIC_BYTES 32 /* an Ed25519 public key: hkrt.h, HK_PUBLIC_KEY_BYTES */
void hkc_key_public(const uint8_t seed[HKC_KEY_SEED_BYTES], uint8_t out_key[HKC_KEY_PUBLIC_BYTES]);
/* Writes the public key file (what hkc keygen writes as KEY.pub) of seed to path, atomically
 * (a temporary file renamed over it), mode 0644. 0 / -1 (reported). */
int hkc_key_write_public(const char *path, const uint8_t seed[HKC_KEY_SEED_BYTES]);
/* Reads a secret key file written by hkc_key_generate (a regular file: hkc_read_file), warning
 * when others may read it. Returns 0 / -1 (reported). */
int hkc_key_load(const char *path, uint8_t out_seed[HKC_KEY_SEED_BYTES]);
/* The secret key in text (size bytes, untrusted; label names it in the message): the prefix,
 * 64 hex digits, then only blanks. 0, or -1 (reported; out_seed zeroed). */
int hkc_key_parse(const char *label, const char *text, size_t size, uint8_t out_seed[HKC_KEY_SEED_BYTES]);
/* The key id (16 hex digits and a NUL; docs/FORMAT.md) of a secret key's public half. */
#define HKC_KEY_ID_HEX_BYTES 17
void hkc_key_id(const uint8_t seed[HKC_KEY_SEED_BYTES], char out_hex[HKC_KEY_ID_HEX_BYTES]);
/* Zeroes secret bytes in a way the compiler cannot drop. */
void hkc_key_wipe(void *data, size_t size);
/* Signs an artifact in memory: a copy of data laid out again with a SIGNATURE section (an
 * existing one is replaced in place; nothing else changes but offsets and checksums), into a
 * malloc'd buffer. The input must verify. Returns 0 / -1 (reported). */
int hkc_pack_sign_memory(const void *data, size_t size, const uint8_t seed[HKC_KEY_SEED_BYTES], void **out_data,
                         size_t *out_size);

/* Signs, in place, an artifact that verifies and already has its SIGNATURE section (whose record
 * it overwrites): the bytes hkc_pack_sign_memory gives for the same pack without that section.
 * Returns 0 / -1 (reported). */
int hkc_pack_sign_in_place(void *data, size_t size, const uint8_t seed[HKC_KEY_SEED_BYTES]);

/* ---- merging (pack_merge.c; docs/CLI.md, "hkc merge") ---------------------------------------- */
/* Combines verified packs of one spec built for different targets into the pack one build of
 * all their targets writes: targets in input order, the inputs' provenance lines that are not
 * per target (hkc version, spec hash, fusion, tuning, kernel options, ...) once, per-target
 * lines and code as they are; with notes (NULL: none; n one-line texts, the caller's word on
 * each input: its signature), one "merge.input.<i>=targets A,B; <notes[i]>" line per input
 * after the target lines -- with notes NULL the bytes are exactly one build's. The inputs'
 * own "merge." lines are dropped. Refuses (reported, naming both inputs and what differs)
 * inputs of another format version, spec, tensor table, batch buckets or build options, a
 * target found twice, and more targets than the format holds. Input signatures are not
 * carried over (whether to trust an input is the caller's decision); sign_seed (NULL:
 * unsigned) signs the result. `views` are borrowed (hk_pack_view of packs opened by the
 * caller), `names` label them in messages. Returns 0 / -1. */
int hkc_pack_merge_memory(const hk_pack_view_t *const *views, const char *const *names, size_t n,
                          const char *const *notes, const uint8_t *sign_seed, void **out_data, size_t *out_size);

#endif /* HKC_PACK_H */
