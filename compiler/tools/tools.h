/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/tools/tools.h -- the commands of the hkc binary that are more than a build.
 *
 *   main.c       the CLI (not in hkc_core): the general usage, the command table, dispatch
 *   cli.c        option parsing shared by the commands (getopt_long), JSON output, and what
 *                several commands do alike (their help's footer, the compile workers, ...)
 *   cmd_build.c  `hkc build` (the build itself: driver/build.c)
 *   cmd_tune.c   `hkc tune`'s options
 *   cmd_run.c    `hkc run`
 *   cmd_generate.c  `hkc generate`
 *   run_common.c what run and generate share: tensors from files or a seeded generator,
 *                session options, --weights, the --profile table
 *   cmd_inspect.c, cmd_targets.c  `hkc inspect`, `hkc targets`: their options
 *   cmd_sign.c   `hkc keygen`, `hkc sign`
 *   cmd_merge.c  `hkc merge`
 *   user_key.c   the user's signing key: where it lives, created on first use, trusted by default
 *   cache_cmd.c  `hkc cache stats | clean`
 *   inspect.c    `hkc inspect`: report, --plan, --disasm of a verified artifact
 *   probe.c      `hkc targets`: what this machine's toolchains build
 *   tune_run.c   `hkc tune`: measures candidates through libhkrt and writes a database
 *   npy.c        .npy files for `hkc run`
 *   weights_map.c  name map files for `hkc run --weights-map` (docs/WEIGHTS.md)
 *   npz.c        .npz archives for `hkc run --weights` (libzip)
 *   import.c     `hkc import`: runs the importer script installed next to hkc
 *
 * The top stage: may use every other stage; none uses it.
 */
#ifndef HKC_TOOLS_H
#define HKC_TOOLS_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "codegen/codegen.h"
#include "hk/hkrt.h"
#include "hk/pack_format.h"
#include "pack/pack.h"
#include "util/util.h"

/* ---- the command line (cli.c) ----------------------------------------------------------------- */
/* Every command parses its options with getopt_long through hkc_cli_next, which also takes
 * the options every command has: -q/--quiet, -v/--verbose (repeatable), -h/--help and, for
 * the commands that have it (json_ok), --json. A usage error prints one line naming the
 * problem, the command's synopsis and "try 'hkc CMD --help'", and the command exits 2. */
typedef struct hkc_cli {
  const char *cmd;      /* "build" */
  const char *synopsis; /* "hkc build SPEC -o OUT [options]" */
  void (*help)(void);   /* prints the full help to stdout */
  int json_ok;          /* --json is an option of this command */
  int quiet, verbose, json;
  int rc;               /* after HKC_CLI_STOP: the exit status (0 after --help, 2 after a usage error) */
} hkc_cli_t;
#define HKC_CLI_STOP 0x10000 /* hkc_cli_next: stop parsing and return cli->rc */
#define HKC_OPT_JSON 0x10001 /* the value of --json in a command's struct option table */
#define HKC_OPT_BASE 0x10100 /* the first value a command may give its long-only options */
/* Resets getopt for a new parse. */
void hkc_cli_init(hkc_cli_t *cli, const char *cmd, const char *synopsis, void (*help)(void), int json_ok);
/* The next option of the command (getopt_long's value; optarg holds its value), -1 after the
 * last (the operands are then argv[optind..argc), in order), or HKC_CLI_STOP. shortopts are
 * the command's own, without the common q, v, h. */
int hkc_cli_next(hkc_cli_t *cli, int argc, char **argv, const char *shortopts, const struct option *longopts);
/* Reports a usage error (printf format); sets cli->rc = 2 and returns HKC_CLI_STOP. */
int hkc_cli_usage(hkc_cli_t *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses an integer option value in [lo, hi]; a usage error otherwise (0 / -1). */
int hkc_cli_count(hkc_cli_t *cli, const char *opt, const char *text, long long lo, long long hi, long long *out);
/* Parses a size: bytes, or with a binary suffix K, M, G or T (500M = 500 MiB; KiB, MB, ...
 * accepted too). 0 / -1. */
int hkc_cli_size(const char *text, uint64_t *out);
/* The progress mode for the command's flags and stderr: -q off, -v verbose, else one line on
 * a terminal, plain lines on a file or pipe. */
int hkc_cli_progress(const hkc_cli_t *cli);

/* JSON output (docs/CLI.md has every document's keys). The version of the documents' layout:
 * raised when a key changes meaning or type or goes away (new keys do not raise it). */
#define HKC_JSON_SCHEMA 1
struct cJSON;
/* A new document {"schema": 1, "command": COMMAND, "hkc": VERSION}; NULL on OOM. */
struct cJSON *hkc_json_begin(const char *command);
/* Writes the document to out (one JSON value and a newline) and frees it. 0 / -1. */
int hkc_json_end(struct cJSON *root, FILE *out);

/* ---- the commands (cmd_*.c) and what they share (cli.c, run_common.c) ----------------------- */
/* Each command takes its arguments with argv[0] = its name ("build") and returns the exit
 * status: 0, 1 (failed) or 2 (usage error). */
int hkc_cmd_build(int argc, char **argv);
int hkc_cmd_tune(int argc, char **argv);
int hkc_cmd_run(int argc, char **argv);
int hkc_cmd_generate(int argc, char **argv);
int hkc_cmd_inspect(int argc, char **argv);
int hkc_cmd_targets(int argc, char **argv);
int hkc_cmd_keygen(int argc, char **argv);
int hkc_cmd_sign(int argc, char **argv);
int hkc_cmd_merge(int argc, char **argv);
/* `hkc cache` (cache_cmd.c). */
int hkc_cmd_cache(int argc, char **argv);
int hkc_cmd_quantize(int argc, char **argv);

/* The options of every command (hkc_cli_next takes -q, -v, -h and --json). */
#define COMMON_LONG_OPTIONS                                                                          \
  {"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'}
#define JSON_LONG_OPTION {"json", no_argument, NULL, HKC_OPT_JSON}

/* Long-only options of the commands: getopt_long's values above the short options'. */
enum {
  OPT_TUNE = HKC_OPT_BASE, OPT_TUNING_DB, OPT_TUNE_VERIFY, OPT_MERGE_TARGETS, OPT_ZSTD_LEVEL, OPT_COMPILE_TIMEOUT,
  OPT_NO_CACHE, OPT_WERROR_SPILLS, OPT_NO_PDL, OPT_NO_PTX, OPT_PTX, OPT_SIGN, OPT_FUSION, OPT_FUSION_REPORT, OPT_TENSOR_PARALLEL, OPT_KERNEL_OPTION,
  OPT_HOST_THREADS, OPT_CACHE_MAX_SIZE, OPT_MERGE, OPT_REPORT, OPT_TOP, OPT_RUNS, OPT_WARMUP, OPT_DRY_RUN,
  OPT_BATCH, OPT_SEED, OPT_INPUT, OPT_PARAM, OPT_SAVE_OUTPUTS, OPT_REPEATS, OPT_TRUST, OPT_WEIGHTS,
  OPT_WEIGHTS_MAP, OPT_PROFILE, OPT_PREFER_PTX, OPT_REQUIRE_SIGNATURE, OPT_ALLOW_UNSIGNED_NATIVE,
  OPT_RANDOM_PARAMS, OPT_PLAN, OPT_DISASM, OPT_KEY, OPT_NO_PROBE, OPT_IDS, OPT_STOP, OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_SAMPLE_SEED,
  OPT_NO_SIGN, OPT_ALLOW_UNSIGNED, OPT_ALLOW_UNSIGNED_INPUTS, OPT_NO_USER_KEY, OPT_QUANT_DTYPE, OPT_MATCH, OPT_BLOCK, OPT_NO_LM_HEAD,
};

/* The AMD compile workers' limit per compile, seconds (hkc build --compile-timeout). */
#define HKC_DEFAULT_COMPILE_TIMEOUT_S 600

/* One NAME=FILE of hkc run's --input / --param. */
typedef struct {
  const char *name;
  const char *path;
} hkc_named_file_t;

/* The help's footer: the options every command takes, and -v / --json where it has them. */
void hkc_cli_common_help(int verbose, int json);
/* Starts the AMD compile workers: at most jobs (0: one per core), each compile limited to
 * timeout_s. 0 / -1 (printed). */
int hkc_cli_start_workers(int jobs, int timeout_s);
int hkc_cli_host_threads_env(void);
int hkc_cli_kernel_option(hkc_cli_t *cli, int c, const char *v, hkc_kernel_options_t *ko, int *host_threads);
int hkc_cli_cache_cap_env(hkc_cli_t *cli, uint64_t *out);
void hkc_cli_apply_cache_cap(const hkc_cli_t *cli, uint64_t cap);

/* run_common.c (hkc run and hkc generate; each function's contract is beside it) */
size_t hkc_run_info_count(const hk_tensor_info_t *info);
void hkc_run_format_shape(const hk_tensor_info_t *info, char *out, size_t size);
int hkc_run_fill_tensor(const hk_tensor_info_t *info, void *buf, const char *npy_path, uint64_t seed);
double hkc_run_now_ms(void);
int hkc_run_cmp_double(const void *a, const void *b);
const char *hkc_run_find_named(const hkc_named_file_t *files, int n, const char *name);
int hkc_run_print_profile(hk_session_t *session, uint32_t repeats, double graph_us, struct cJSON *json);
int hkc_run_options_from_env(hk_session_options_t *so);
int hkc_run_check_params_given(hk_session_t *session, const hkc_named_file_t *files, int n_files, int random_params);

/* ---- hkc import (import.c) -------------------------------------------------------------------- */
/* Runs `hkc-import ARGS...` (python/hkc_import.py, installed next to this binary) with
 * $HKC_PYTHON or python3; does not return when it starts. 1 when it cannot be started
 * (printed), 2 on a usage error. */
int hkc_tool_import(int argc, char **argv);

/* ---- hkc inspect (inspect.c), hkc targets (probe.c) ------------------------------------------ */
/* Opens and verifies the pack at path, prints the report to out. 0 / -1 (error printed). */
int hkc_inspect(const char *path, FILE *out);
/* The same, and the signature line says whether its key is one of `trusted` (n_trusted public
 * keys; hkrt.h). Packs are opened metadata_only: inspect never loads code. */
int hkc_inspect_trusted(const char *path, const uint8_t (*trusted)[HK_PUBLIC_KEY_BYTES], uint32_t n_trusted,
                        FILE *out);
/* Reads a public key file (KEY.pub, hkc keygen) into out_key. 0 / -1 (error printed). */
int hkc_public_key_load(const char *path, uint8_t out_key[HK_PUBLIC_KEY_BYTES]);
/* The trust options of run, generate, merge and inspect: --trust KEY.pub (repeatable), and one
 * slot more for the user's own key (user_key.c). */
#define HKC_MAX_TRUSTED_KEYS 16
typedef struct hkc_trust_opts {
  uint8_t keys[HKC_MAX_TRUSTED_KEYS + 1][HK_PUBLIC_KEY_BYTES];
  uint32_t n;
} hkc_trust_opts_t;
/* Reads one --trust value (hkc run, generate, merge, inspect) into t. 0, or 2 (usage error,
 * printed). */
int hkc_trusted_key_add(const char *cmd, hkc_trust_opts_t *t, const char *path);

/* ---- the user's signing key (user_key.c; docs/CLI.md, "Signing") ------------------------------ */
/* Where the user's secret key lives: $HKC_KEY, else $XDG_CONFIG_HOME/hkc/key, else
 * $HOME/.config/hkc/key (only absolute XDG_CONFIG_HOME and HOME count); its public half is the
 * same path with ".pub". *out_explicit: 1 when HKC_KEY named it. 0, or -1 when no variable
 * names a place (or the path is too long). */
int hkc_user_key_path(char *out, size_t size, int *out_explicit);
/* The user's secret key for signing (hkc build, hkc merge), created on first use (with its
 * directory, mode 0700, unless HKC_KEY named it; the key mode 0600, exclusively: concurrent
 * first uses agree on one key) and its public half written when it is missing or not this
 * key's. Says on stderr that it created the key, unless quiet. 0 / -1 (printed, naming what
 * to do: --sign KEY, --no-sign, HKC_KEY). The caller wipes the seed. */
int hkc_user_key_load(const char *cmd, int quiet, uint8_t out_seed[HKC_KEY_SEED_BYTES]);
/* Adds the user's public key to t when there is one (hkc run, generate, merge trust it besides
 * --trust); no key is not an error, and a malformed one is a warning (printed). 0. */
int hkc_user_key_trust(const char *cmd, hkc_trust_opts_t *t);
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
/* `hkc targets`: probes the toolchains and prints what this machine can build. probe 0
 * (--no-probe): a toolchain's list is taken as it is, without a test compile per target (AMD:
 * comgr lists ISAs a given hiprtc may not build). 0 / -1. */
int hkc_print_targets(FILE *out, int probe);
/* The same as one JSON document (docs/CLI.md, "targets"). 0 / -1. */
int hkc_targets_json(FILE *out, int probe);
/* `hkc inspect --json`: the report of hkc_inspect_trusted as one JSON document (docs/CLI.md,
 * "inspect"). 0 / -1 (error printed). */
int hkc_inspect_json(const char *path, const uint8_t (*trusted)[HK_PUBLIC_KEY_BYTES], uint32_t n_trusted, FILE *out);
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
  int json;                /* the result as one JSON document on stdout instead of the table (docs/CLI.md) */
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
/* An array read from NumPy's .npy format (little-endian f2, f4, f8, i4 or i8, or i1 / u1; C order). */
typedef struct hkc_npy {
  uint32_t rank;
  int64_t dims[HK_MAX_RANK];
  size_t count;
  float *data;    /* owned; converted to f32 */
  int32_t *ints;  /* owned; the exact values of an integer file (int64 values must fit in int32),
                     NULL for a float file */
} hkc_npy_t;
/* Largest .npy header dict read (NumPy itself caps headers far below this). */
#define HKC_NPY_MAX_HEADER (1u << 20)
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

/* ---- .npz archives (npz.c; hkc run --weights) ----------------------------------------------- */
/* An .npz (a zip of NAME.npy members: numpy.savez, savez_compressed), read through libzip.
 * Open checks the zip's directory and every member name (NAME.npy, NAME 1 to 1024 bytes of
 * 0x21-0x7e, each once); members are decompressed only by hkc_npz_read. Errors are printed
 * (hkc_error) naming the archive, and the member where there is one. */
typedef struct hkc_npz hkc_npz_t;
/* A regular file (a FIFO or device is refused unread); read in place, not into memory. 0 / -1. */
int hkc_npz_open_file(const char *path, hkc_npz_t **out_npz);
/* Caller memory (not copied: it must outlive the archive); label names it in messages. 0 / -1. */
int hkc_npz_open_memory(const char *label, const void *data, size_t size, hkc_npz_t **out_npz);
void hkc_npz_destroy(hkc_npz_t *npz); /* NULL: nothing */
uint32_t hkc_npz_count(const hkc_npz_t *npz);
/* Member index's NAME (without ".npy"; members sorted by name), borrowed; NULL past the end. */
const char *hkc_npz_name(const hkc_npz_t *npz, uint32_t index);
/* The index of member NAME.npy: 0, or -1 when there is none (nothing printed). */
int hkc_npz_find(const hkc_npz_t *npz, const char *name, uint32_t *out_index);
/* The most bytes a .npy of count elements can need: the header limit plus count f64 values.
 * hkc_npz_read refuses a larger member without inflating it (no zip bombs). */
size_t hkc_npz_member_limit(size_t count);
/* Decompresses member index (at most max_bytes; its CRC checked) and parses it as --param
 * parses a .npy file. 0 / -1. */
int hkc_npz_read(hkc_npz_t *npz, uint32_t index, size_t max_bytes, hkc_npy_t *out);
/* The params of session that the archive gives (under map's name, else their own: the rules
 * of hk_session_bind_weights), each member read with its param's limit, its shape checked
 * (exactly the param's), its values converted to the param's dtype as --param does, laid
 * out as a safetensors image for hk_weights_open_memory: *out_data (malloc'd, *out_size
 * bytes) must outlive the weights opened over it. Members no param takes are not read.
 * 0 / -1 (printed). */
int hkc_npz_checkpoint(hkc_npz_t *npz, hk_session_t *session, const hkc_weights_map_t *map, void **out_data,
                       size_t *out_size);

/* What `hkc run --weights FILE` holds, told by its first bytes: a zip (PK\3\4, or PK\5\6: an
 * empty one) is an .npz; a u64 then '{' a safetensors checkpoint. Failing both, the extension
 * decides (.npz, .safetensors: the reader's own error then says what is wrong), else neither. */
typedef enum { HKC_WEIGHTS_UNKNOWN, HKC_WEIGHTS_SAFETENSORS, HKC_WEIGHTS_NPZ } hkc_weights_format_t;
hkc_weights_format_t hkc_weights_format(const unsigned char *head, size_t n, const char *path);
/* The same from the file's first bytes (npz.c); a file that cannot be read is left to the
 * reader its extension names, which then says why. */
hkc_weights_format_t hkc_weights_file_format(const char *path);
/* hkc run / generate --weights FILE [--weights-map MAP] bound to the session (run_common.c). */
int hkc_run_bind_weights_file(hk_session_t *session, const char *path, const char *map_path, hk_weights_t **out_weights,
                              void **out_image, hkc_weights_map_t *map, int quiet, struct cJSON *json);

/* hkc run / generate on a tensor-parallel pack (hk_pack_tensor_ranks N >= 1): one communicator
 * per rank for the target a session would pick, rank r's session on device r. The host target:
 * one hk_host_group_t of N ranks (comm[r] = the group); CUDA / HIP: ncclCommInitAll over devices
 * 0 .. N-1 of libnccl.so.2 / librccl.so.1 (dlopened; this machine needs N GPUs). abort makes every rank's
 * waiting or later collective fail (a failing rank calls it). run_common.c. */
#define HKC_TP_MAX_RANKS 64
typedef struct hkc_tp {
  uint32_t ranks;
  int cuda;                       /* the ranks run on GPUs (CUDA: NCCL; HIP: RCCL), else the host */
  hk_host_group_t *group;
  void *comm[HKC_TP_MAX_RANKS];   /* hk_session_options_t comm of each rank */
  void *nccl;                     /* dlopen handle */
} hkc_tp_t;
/* 0, or -1 with the reason printed (prefix "hkc CMD: "). */
int hkc_tp_open(hkc_tp_t *tp, hk_pack_t *pack, const char *target, const char *cmd);
void hkc_tp_abort(hkc_tp_t *tp);
void hkc_tp_close(hkc_tp_t *tp); /* after every session of it */
/* --weights of a tensor-parallel rank: `path` with "{rank}" replaced by the rank (a checkpoint
 * split ahead of time, one file per rank), else path itself (every rank slices the whole one). */
const char *hkc_tp_rank_path(const char *path, uint32_t rank, char *buf, size_t size);
/* The session of a rank other than 0 and the --weights it binds (path with "{rank}" replaced:
 * hkc_tp_rank_path). open: 0 / -1 (hk_last_error says why; close it anyway). fail: keeps the
 * error in error[size] and aborts every rank's collectives (tp), for a rank thread that stops. */
typedef struct hkc_tp_rank {
  hk_session_t *session;
  hk_weights_t *weights;
  void *image;
  hkc_weights_map_t map;
} hkc_tp_rank_t;
int hkc_tp_rank_open(hkc_tp_rank_t *r, hk_pack_t *pack, const hk_session_options_t *so, const char *weights_path,
                     const char *map_path);
void hkc_tp_rank_close(hkc_tp_rank_t *r);
void hkc_tp_rank_fail(hkc_tp_t *tp, char *error, size_t size);
/* What a rank other than 0 does after its own work, in step with rank 0: `runs` runs of its
 * graph, then (repeats > 0) hk_session_profile over `repeats`, whose collectives pair with rank
 * 0's. 0 / -1 (hk_last_error says why). */
int hkc_tp_follow(hk_session_t *session, long long runs, uint32_t repeats);
/* Fills rank r's communicator, rank and device into so. */
void hkc_tp_options(const hkc_tp_t *tp, uint32_t r, hk_session_options_t *so);

#endif /* HKC_TOOLS_H */
