/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/util/util.h -- what every stage uses: diagnostics, growable arrays and strings,
 * hashing, the embedded templates, whole-file reads, float16/bfloat16 conversions.
 *
 *   util.c     diagnostics, allocation and string helpers, hashing, templates
 *   progress.c the progress of long commands on stderr
 *   fileio.c   whole-file reads and atomic writes, through a replaceable write layer
 *   half.c     float16 / bfloat16 <-> float32
 *
 * The lowest stage: it includes no other stage's header.
 */
#ifndef HKC_UTIL_H
#define HKC_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h> /* ssize_t */

#define HKC_VERSION_STRING "0.1.0"

/* ---- diagnostics ----------------------------------------------------------- */
/* Every stage reports errors through hkc_error(): "FILE:LINE:COL: message" when a
 * location is known, "hkc: message" otherwise. Printed to the diag stream (stderr by
 * default; tests capture it with hkc_diag_capture). */
typedef struct hkc_loc {
  const char *file; /* borrowed; NULL when not from a file */
  int line;         /* 1-based; 0 = unknown */
  int col;          /* 1-based; 0 = unknown */
} hkc_loc_t;

void hkc_error(hkc_loc_t loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hkc_warning(hkc_loc_t loc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Redirects diagnostics into buf (NUL-terminated, truncated) until called with NULL. */
void hkc_diag_capture(char *buf, size_t size);
/* Number of errors reported since the last reset. */
int hkc_error_count(void);
void hkc_error_reset(void);
/* Calls before(arg) ahead of every diagnostic printed to stderr and after(arg) once it is
 * out (a progress line on a terminal clears itself and holds its lock meanwhile: progress.c).
 * NULL removes them. Not thread-safe: set before starting work. */
void hkc_diag_set_hooks(void (*before)(void *), void (*after)(void *), void *arg);

/* ---- progress (progress.c) --------------------------------------------------------------------
 * What a long command (hkc build, hkc tune) reports on stderr while it works. The work is
 * split into phases ("tune sm_90a", "compile sm_90a", "compile host", "pack"), each begun
 * with its number of items before any of them is done, so that every count is known when it
 * is shown; items are counted as they finish, from any thread. The command line chooses the
 * mode from -q, -v and whether stderr is a terminal. */
typedef enum hkc_progress {
  HKC_PROGRESS_OFF = 0,     /* nothing */
  HKC_PROGRESS_TTY = 1,     /* one line "[done/total] phase: item" rewritten in place, cut to the
                               terminal's width (only when stderr is a terminal, else OFF) */
  HKC_PROGRESS_LINES = 2,   /* plain lines: a phase's total when it begins, the notes (stderr
                               is a file or a pipe) */
  HKC_PROGRESS_VERBOSE = 3, /* LINES, plus "[done/total] phase: item" for every item */
} hkc_progress_t;
typedef struct hkc_reporter hkc_reporter_t;
/* A reporter in mode (hkc_progress_t) whose plain lines start with "WHO: " (who is copied).
 * Every function below takes NULL (no reporter: nothing printed), which is also what create
 * returns for OFF or when out of memory. In TTY mode diagnostics clear the line first. */
hkc_reporter_t *hkc_reporter_create(int mode, const char *who);
/* Clears the line on a terminal and frees the reporter. */
void hkc_reporter_destroy(hkc_reporter_t *r);
/* Begins a phase of total items (name: at most 63 bytes, copied). LINES and VERBOSE print
 * "WHO: NAME: TOTAL WHAT" (what: a printf format, e.g. "kernel(s) (2 from the cache)"); TTY
 * shows "[0/TOTAL] NAME" unless total is 0. Returns the phase's id for hkc_reporter_item (any
 * number on NULL or out of memory: items of an unknown phase are not shown). Phases may run
 * at the same time. Thread-safe. */
int hkc_reporter_begin(hkc_reporter_t *r, const char *name, size_t total, const char *what, ...)
    __attribute__((format(printf, 4, 5)));
/* One item of the phase done: "[DONE/TOTAL] NAME: ITEM" (item: a printf format), a line of
 * its own in VERBOSE, the line rewritten in TTY. A phase never counts past its total.
 * Thread-safe. */
void hkc_reporter_item(hkc_reporter_t *r, int phase, const char *item, ...) __attribute__((format(printf, 3, 4)));
/* A plain line "WHO: TEXT" in LINES and VERBOSE (summaries); nothing in TTY. Thread-safe. */
void hkc_reporter_note(hkc_reporter_t *r, const char *text, ...) __attribute__((format(printf, 2, 3)));
/* The reporter's mode (HKC_PROGRESS_OFF for NULL). */
int hkc_reporter_mode(const hkc_reporter_t *r);

/* Growable-array helper: ensures *items has room for need elements. 0 / -1 on OOM. */
int hkc_reserve(void **items, size_t *cap, size_t need, size_t elem_size);
char *hkc_strdup(const char *s);
/* A growable NUL-terminated string for code generation. Appends after an allocation
 * failure (or a single hkc_sb_printf piece over 511 bytes) are dropped and set `failed`;
 * the owner frees `data`. */
typedef struct hkc_strbuf {
  char *data;
  size_t len, cap;
  int failed;
} hkc_strbuf_t;
void hkc_sb_append(hkc_strbuf_t *sb, const char *text, size_t n);
void hkc_sb_printf(hkc_strbuf_t *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* XXH3-64 of bytes. */
uint64_t hkc_hash64(const void *data, size_t size);
/* Names to indices in constant time (a graph of 16384 nodes looks each name up several
 * times): an open-addressing hash table over borrowed keys, which must outlive it and not
 * change. Zero-initialised means empty; hkc_names_free releases it. */
typedef struct hkc_names {
  const char **keys;
  int *values;
  size_t cap, n; /* cap: a power of two, or 0 */
} hkc_names_t;
/* Adds key -> value (value >= 0); a key already present keeps its value. 0 / -1 (OOM). */
int hkc_names_put(hkc_names_t *names, const char *key, int value);
/* The value of key, or -1 when absent. */
int hkc_names_get(const hkc_names_t *names, const char *key);
void hkc_names_free(hkc_names_t *names);
/* A file under templates/, embedded at build time (path relative to templates/,
 * e.g. "host/gemm.c"), or read from $HKC_TEMPLATE_DIR/<path> when that variable is set
 * and the file exists there. NULL when absent. Thread-safe. */
const char *hkc_template(const char *path, size_t *out_size);

/* ---- text from files in messages (util.c) -------------------------------------------------
 * Bytes a file holds (checkpoint and map names, spec strings, a pack's provenance) reach
 * terminals and logs only escaped: printable ASCII as it is, every other byte (control bytes,
 * DEL, bytes >= 0x80) and the backslash as \xNN, so an escape sequence, a bell or a forged line
 * never arrives raw, and what was there can still be read. The one escaping of hkc's messages. */
/* Escapes len bytes of s into out (size bytes, NUL-terminated); what does not fit is cut, and
 * then out ends in "...". Returns out. */
char *hkc_escape_into(const char *s, size_t len, char *out, size_t size);
/* The longest text hkc_escaped returns (a longer one is cut, ending in "..."). */
#define HKC_ESCAPED_MAX 512
/* hkc_escape_into of a NUL-terminated string (NULL: "") into one of 8 thread-local buffers
 * used in turn, so one message may show up to 8 names: for printf arguments only (the text
 * is overwritten 8 calls later). */
const char *hkc_escaped(const char *s);

/* ---- files (fileio.c) --------------------------------------------------------------------
 * Inputs are regular files below a size cap; outputs replace only regular files, all at
 * once (a temporary file next to the destination, fsync, rename), with the umask deciding
 * their mode. */
/* errno values beyond the system's: the path is not a regular file. hkc_strerror names them
 * ("not a regular file (a FIFO)"); a directory is EISDIR. */
#define HKC_ENOTREG 0x4b43        /* a socket or another special file */
#define HKC_ENOTREG_FIFO 0x4b44   /* a FIFO (named pipe) */
#define HKC_ENOTREG_DEVICE 0x4b45 /* a character or block device */
/* The text of an errno value, never "Unknown error N": hkc's own values above by name, a value
 * the C library does not know as "unexpected error code N". Thread-safe. */
const char *hkc_strerror(int err);
/* The cap of hkc_read_file: larger files are no input of hkc's (specs, tuning databases,
 * cache entries, test inputs are far below it). */
#define HKC_READ_MAX ((size_t)1 << 30)
/* Opens an input file for reading, without blocking: O_RDONLY | O_NONBLOCK | O_CLOEXEC (a FIFO
 * opens at once, whether or not a writer exists), then fstat on the descriptor, so what is
 * checked is what is read: a regular file (links followed) of at most max bytes, else refused.
 * O_NONBLOCK is then cleared. The descriptor, with its stat in *out_st (may be NULL), or -1
 * with errno: the open's, EISDIR, HKC_ENOTREG_FIFO / _DEVICE / HKC_ENOTREG, EFBIG (over max). */
struct stat;
int hkc_open_input(const char *path, uint64_t max, struct stat *out_st);
/* Reads a whole regular file of at most max bytes into a NUL-terminated malloc'd buffer,
 * through hkc_open_input (a device or FIFO is never read, so /dev/zero fails at once).
 * 0 / -1 with errno: hkc_open_input's, ENOMEM. */
int hkc_read_file_max(const char *path, size_t max, char **out_data, size_t *out_size);
int hkc_read_file(const char *path, char **out_data, size_t *out_size); /* max HKC_READ_MAX */
/* hkc_read_file_max with the file's stat (of the descriptor read) in *out_st: the caller
 * judges who owns what it read (the compile cache). */
int hkc_read_file_stat(const char *path, size_t max, char **out_data, size_t *out_size, struct stat *out_st);
/* The checks of hkc_open_input for a file another reader opens (packs, through libhkrt),
 * without opening it: a regular file (links followed) of at most max bytes. 0 / -1 with errno
 * as above. */
int hkc_input_check(const char *path, uint64_t max);

/* Whether path may be written: absent, or a regular file. -1 with the reason in err ("cannot
 * write PATH: it exists and is not a regular file (a device): refusing to replace it"). */
int hkc_output_check(const char *path, char *err, size_t err_size);
/* Bytes written in order. */
typedef struct hkc_chunk {
  const void *data;
  size_t size;
} hkc_chunk_t;
/* Writes the chunks to a new temporary file next to path (created with `mode` less the
 * umask: 0666 for everything but secrets), fsynced; *out_tmp (malloc'd) names it, for
 * hkc_file_commit or hkc_file_discard. On failure nothing is left and err says which step
 * failed and why. 0 / -1. */
int hkc_file_stage(const char *path, const hkc_chunk_t *chunks, size_t n, unsigned mode, char **out_tmp, char *err,
                   size_t err_size);
/* Renames a staged temporary over path (checked again: absent or regular) and frees tmp;
 * on failure the temporary is removed and path keeps its old bytes. 0 / -1. */
int hkc_file_commit(char *tmp, const char *path, char *err, size_t err_size);
/* Removes a staged temporary that will not be committed and frees tmp (NULL: nothing). */
void hkc_file_discard(char *tmp);
/* hkc_file_stage + hkc_file_commit. */
int hkc_file_replace(const char *path, const hkc_chunk_t *chunks, size_t n, unsigned mode, char *err,
                     size_t err_size);
/* The calls every write above goes through. Tests replace them (fault injection: each call
 * failing in turn, short writes); NULL restores the system's. Not thread-safe: set before
 * starting work. */
typedef struct hkc_io_ops {
  ssize_t (*write)(int fd, const void *data, size_t size);
  int (*fsync)(int fd);
  int (*rename)(const char *from, const char *to);
} hkc_io_ops_t;
void hkc_io_set_ops(const hkc_io_ops_t *ops);

/* ---- the process environment, as the CLI maps it (tools/env.c, util.c) -------------------
 * The stages read these settings, never the environment: `hkc` (tools/main.c) maps the
 * documented variables once, before any stage runs; a program embedding hkc_core sets what
 * it wants (or nothing: the defaults). hkc_env_set copies the strings; NULL or "" selects
 * the default. Not thread-safe: set it before starting work. */
typedef struct hkc_env {
  const char *tmp_dir;      /* temporary files and directories; default /tmp          ($TMPDIR) */
  const char *cc;           /* the host target's C compiler command; default "cc"       ($CC) */
  const char *cuda_path;    /* CUDA toolkit (nvrtc, nvdisasm); default /usr/local/cuda  ($HKC_CUDA_PATH) */
  const char *cache_dir;    /* the compile cache when a build names none; default none
                               ($HKC_CACHE_DIR, else $XDG_CACHE_HOME/hkc, else $HOME/.cache/hkc) */
  const char *template_dir; /* kernel templates read from here first; default none ($HKC_TEMPLATE_DIR) */
  const char *cache_url;    /* the shared second level of the compile cache, redis://host[:port][/db];
                               default none ($HKC_CACHE_URL) */
  int cache_timeout_ms;     /* its connect and command timeout; 0: 200 ms ($HKC_CACHE_TIMEOUT_MS) */
} hkc_env_t;
void hkc_env_set(const hkc_env_t *env);
const char *hkc_env_tmp_dir(void);      /* never NULL */
const char *hkc_env_cc(void);           /* never NULL */
const char *hkc_env_cuda_path(void);    /* never NULL */
const char *hkc_env_cache_dir(void);    /* NULL when unset */
const char *hkc_env_template_dir(void); /* NULL when unset */
const char *hkc_env_cache_url(void);    /* NULL when unset */
int hkc_env_cache_timeout_ms(void);     /* 0 when unset: the default */

/* ---- element conversion (half.c: libhkrt's, loader/src/convert.c) ----------------------- */
uint16_t hkc_f32_to_f16(float f);   /* round to nearest even; overflow (|f| >= 65520) -> inf */
float hkc_f16_to_f32(uint16_t h);
uint16_t hkc_f32_to_bf16(float f);  /* round to nearest even */
float hkc_bf16_to_f32(uint16_t h);
uint8_t hkc_f32_to_fp8_e4m3(float f); /* nearest even, saturating to +-448 (convert_internal.h) */
float hkc_fp8_e4m3_to_f32(uint8_t b);
/* Element i of a buffer of element type `type` (0 f32, 1 f16, 2 bf16, 3 i32, 4 int8 (stored
 * rounded and clamped to -128..127), 5 fp8_e4m3: hk_dtype_t and the
 * loader's hk_element_type_t share these values) as f32 / stored from f32 (rounded). */
float hkc_load_elem(const void *buf, int type, size_t i);
void hkc_store_elem(void *buf, int type, size_t i, float v);
/* splitmix64: the next value of a 64-bit seed stream (test inputs of hkc run and hkc tune). */
uint64_t hkc_splitmix64(uint64_t *state);
/* Uniform in [-scale, scale) from the stream. */
double hkc_uniform_pm(uint64_t *state, double scale);

#endif /* HKC_UTIL_H */
