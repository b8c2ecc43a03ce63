/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/tools/tools.h -- the commands of the hkc binary that are more than a build.
 *
 *   main.c       the CLI (not in hkc_core)
 *   inspect.c    `hkc inspect`: report, --plan, --disasm of a verified artifact
 *   probe.c      `hkc targets`: what this machine's toolchains build
 *   tune_run.c   `hkc tune`: measures candidates through libhkrt and writes a database
 *   npy.c        .npy files for `hkc run`
 *   weights_map.c  name map files for `hkc run --weights-map` (docs/WEIGHTS.md)
 *
 * The top stage: may use every other stage; none uses it.
 */
#ifndef HKC_TOOLS_H
#define HKC_TOOLS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "codegen/codegen.h"
#include "hk/hkrt.h"
#include "hk/pack_format.h"
#include "util/util.h"

/* ---- hkc inspect (inspect.c), hkc targets (probe.c) ------------------------------------------ */
/* Opens and verifies the pack at path, prints the report to out. 0 / -1 (error printed). */
int hkc_inspect(const char *path, FILE *out);
/* The same, and the signature line says whether its key is one of `trusted` (n_trusted public
 * keys; hkrt.h). Packs are opened metadata_only: inspect never loads code. */
int hkc_inspect_trusted(const char *path, const uint8_t (*trusted)[HK_PUBLIC_KEY_BYTES], uint32_t n_trusted,
                        FILE *out);
/* Reads a public key file (KEY.pub, hkc keygen) into out_key. 0 / -1 (error printed). */
int hkc_public_key_load(const char *path, uint8_t out_key[HK_PUBLIC_KEY_BYTES]);
/* `--plan`: per batch bucket (batch 0: all; else that bucket), the launches of one target
 * (target NULL: the first GPU target, else the first) with their nodes, kernel, estimated
 * bytes and FLOPs from the PLAN section, and the roofline floor on MI250X, MI300X, H200
 * and every other GPU target of the pack; totals before and after fusion. 0 / -1 (error
 * printed; a pack without PLAN is an error). */
int hkc_inspect_plan(const char *path, uint64_t batch, const char *target, FILE *out);
/* Prints the machine code of one kernel of the pack (target NULL: the first target that
 * has it). AMD through comgr; NVIDIA through nvdisasm or cuobjdump; host through objdump.
 * 0 / -1 (error printed). */
int hkc_inspect_disasm(const char *path, const char *kernel, const char *target, FILE *out);
/* `hkc targets`: probes the toolchains and prints what this machine can build. 0 / -1. */
int hkc_print_targets(FILE *out);
/* Maps the documented environment variables (TMPDIR, CC, HKC_CUDA_PATH, HKC_CACHE_DIR /
 * XDG_CACHE_HOME / HOME, HKC_TEMPLATE_DIR, HKC_CACHE_URL, HKC_CACHE_TIMEOUT_MS) onto hkc_env_set
 * (util.h); env.c. */
void hkc_env_from_process(void);
/* The documented HKC_* kernel-knob variables mapped onto kernel options (the stages never
 * read them): boolean ones "set and not 0" = 1, as they always meant. 0, or -1 after
 * printing "CMD: environment variable NAME: why" to stderr. env.c. */
int hkc_kernel_options_from_env(hkc_kernel_options_t *o, const char *cmd);

/* ---- `hkc tune` (tune_run.c) ----------------------------------------------------------------- */
typedef struct hkc_tune_run_options {
  const char *spec_path;
  const char *target;      /* one target; must run on this machine */
  const char *out_path;    /* database to write */
  const char *report_path; /* optional: a Markdown table default / model / measured per shape */
  int top;                 /* candidates measured per launch class (0 = 12), plus the default
                              and the model's choice */
  int runs;                /* timed samples (0 = 15) */
  int warmup;              /* untimed runs (0 = 3, -1 = 1: the output check needs one) */
  int jobs, no_cache;
  const char *cache_dir;
  int quiet;
  int dry_run;             /* compile, prune and rank only: print the model's ranking, no runs, no database */
  const hkc_kernel_options_t *kernel_options; /* NULL: the defaults (candidates of variants they turn off are left out) */
  int host_threads;        /* host target's threads (0: the online CPUs) */
} hkc_tune_run_options_t;
int hkc_tune_run(const hkc_tune_run_options_t *options);

/* The largest pack file the tools open: a few targets of at most HK_MAX_CODE_BYTES (1 GiB)
 * of code each, compressed. */
#define HKC_PACK_FILE_MAX ((uint64_t)4 << 30)
/* hk_pack_open_file_ex (options) for the tools, after hkc_input_check (a device or FIFO is refused at
 * once, not mapped or waited on); errors printed as "hkc TOOL: PATH: why". HK_OK or the status. */
hk_status_t hkc_tool_open_pack(const char *tool, const char *path, const hk_pack_open_options_t *options,
                               hk_pack_t **out_pack);

/* ---- .npy files (npy.c; hkc run) ------------------------------------------------------------ */
/* An array read from NumPy's .npy format (little-endian f2, f4, f8, i4 or i8; C order). */
typedef struct hkc_npy {
  uint32_t rank;
  int64_t dims[HK_MAX_RANK];
  size_t count;
  float *data;    /* owned; converted to f32 */
  int32_t *ints;  /* owned; the exact values of an integer file (i8 values must fit in int32),
                     NULL for a float file */
} hkc_npy_t;
/* Reads and bounds-checks a .npy file. Errors name the file and what was wrong. 0 / -1. */
int hkc_npy_read(const char *path, hkc_npy_t *out);
/* Parses .npy bytes already in memory (the fuzzable core of hkc_npy_read). */
int hkc_npy_parse(const char *name, const unsigned char *bytes, size_t size, hkc_npy_t *out);
void hkc_npy_free(hkc_npy_t *npy);
/* Writes f32 data as .npy (format 1.0), atomically (util.h, "files"). 0 / -1. */
int hkc_npy_write_f32(const char *path, const float *data, const int64_t *dims, uint32_t rank);
/* Several .npy files written all or nothing (hkc run --save-outputs): each add writes a
 * temporary file next to DIR/NAME.npy; commit renames them all, and when one rename fails
 * removes the ones already renamed; free removes what was not committed. NAME must be a
 * plain file name (no '/', no "..", no leading '.', no control characters): it comes from
 * an untrusted pack. Errors are reported; 0 / -1. */
#define HKC_NPY_SET_MAX 256
typedef struct hkc_npy_set {
  size_t n;
  char *paths[HKC_NPY_SET_MAX];
  char *tmps[HKC_NPY_SET_MAX]; /* NULL once committed */
} hkc_npy_set_t;
int hkc_npy_set_add(hkc_npy_set_t *set, const char *dir, const char *name, const float *data, const int64_t *dims,
                    uint32_t rank);
int hkc_npy_set_commit(hkc_npy_set_t *set);
void hkc_npy_set_free(hkc_npy_set_t *set);

/* ---- name maps (weights_map.c; hkc run --weights-map) ---------------------------------------- */
/* A name map file (docs/WEIGHTS.md): one "PACK_NAME CHECKPOINT_NAME" pair per line, separated
 * by spaces or tabs; blank lines and lines whose first non-blank character is '#' are skipped.
 * names[] point into text (owned). */
typedef struct hkc_weights_map {
  hk_weights_name_t *names;
  uint32_t count;
  char *text;
} hkc_weights_map_t;
/* Parses map text (a copy is kept); errors print "NAME:LINE: what is wrong". 0 / -1. */
int hkc_weights_map_parse(const char *name, const char *text, size_t size, hkc_weights_map_t *out);
/* Reads and parses a map file. 0 / -1 (printed). */
int hkc_weights_map_read(const char *path, hkc_weights_map_t *out);
void hkc_weights_map_free(hkc_weights_map_t *map);

#endif /* HKC_TOOLS_H */
