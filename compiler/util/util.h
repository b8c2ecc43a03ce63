/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/util/util.h -- what every stage uses: diagnostics, growable arrays and strings,
 * hashing, the embedded templates, whole-file reads, float16/bfloat16 conversions.
 *
 *   util.c   diagnostics, allocation and string helpers, hashing, templates
 *   fileio.c whole-file reads and atomic writes, through a replaceable write layer
 *   half.c   float16 / bfloat16 <-> float32
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
/* How a long stage (the build's compiles) reports progress on stderr; the command line
 * chooses from -q, -v and whether stderr is a terminal. */
typedef enum hkc_progress {
  HKC_PROGRESS_OFF = 0,     /* nothing */
  HKC_PROGRESS_TTY = 1,     /* one status line rewritten in place (only when stderr is a terminal) */
  HKC_PROGRESS_LINES = 2,   /* a few plain lines per build (stderr is a file or a pipe) */
  HKC_PROGRESS_VERBOSE = 3, /* plain lines, one per compiled kernel too */
} hkc_progress_t;

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
/* A file under templates/, embedded at build time (path relative to templates/,
 * e.g. "host/gemm.c"), or read from $HKC_TEMPLATE_DIR/<path> when that variable is set
 * and the file exists there. NULL when absent. Thread-safe. */
const char *hkc_template(const char *path, size_t *out_size);

/* ---- files (fileio.c) --------------------------------------------------------------------
 * Inputs are regular files below a size cap; outputs replace only regular files, all at
 * once (a temporary file next to the destination, fsync, rename), with the umask deciding
 * their mode. */
/* errno beyond the system's: the path is a device, FIFO or socket (directories: EISDIR).
 * hkc_strerror names it. */
#define HKC_ENOTREG 0x4b43
const char *hkc_strerror(int err);
/* The cap of hkc_read_file: larger files are no input of hkc's (specs, tuning databases,
 * cache entries, test inputs are far below it). */
#define HKC_READ_MAX ((size_t)1 << 30)
/* Reads a whole regular file of at most max bytes into a NUL-terminated malloc'd buffer.
 * 0 / -1 with errno: the open's, EISDIR, HKC_ENOTREG (not a regular file: never read, so
 * /dev/zero fails at once), EFBIG (over max), ENOMEM. */
int hkc_read_file_max(const char *path, size_t max, char **out_data, size_t *out_size);
int hkc_read_file(const char *path, char **out_data, size_t *out_size); /* max HKC_READ_MAX */
/* The checks of hkc_read_file_max for a file another reader opens (packs, through libhkrt):
 * a regular file (links followed) of at most max bytes. 0 / -1 with errno as above. */
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
/* Element i of a buffer of element type `type` (0 f32, 1 f16, 2 bf16, 3 i32: hk_dtype_t and the
 * loader's hk_element_type_t share these values) as f32 / stored from f32 (rounded). */
float hkc_load_elem(const void *buf, int type, size_t i);
void hkc_store_elem(void *buf, int type, size_t i, float v);
/* splitmix64: the next value of a 64-bit seed stream (test inputs of hkc run and hkc tune). */
uint64_t hkc_splitmix64(uint64_t *state);
/* Uniform in [-scale, scale) from the stream. */
double hkc_uniform_pm(uint64_t *state, double scale);

#endif /* HKC_UTIL_H */
