/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/rtc/rtc.h -- the toolchains: runtime compilers, their worker processes, the compile
 * cache and the GPU compile pool.
 *
 *   rtc_nvrtc.c        nvrtc (NVIDIA), on the calling thread
 *   rtc_hiprtc.c, rtc_comgr.c   hiprtc + comgr (AMD), in-process calls (rtc_amd_internal.h)
 *   rtc_amd_worker.c   the AMD calls in worker processes; rtc_worker.c the process pool and
 *                      its protocol (rtc_worker.h)
 *   rtc_host.c         the system C compiler for the host target
 *   cache.c            the content-addressed compile cache
 *   compile_pool.c     GPU kernels compiled on threads through the cache (build and tuner)
 *   toolchain.c, rtc_exec.c   the toolchain table (toolchain.h): one entry per toolchain, what
 *                      the build, the pool, the tuner and the tools call
 *
 * Uses codegen/ (the pool generates each kernel's source) and the stages below it.
 */
#ifndef HKC_RTC_H
#define HKC_RTC_H

#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"
#include "rtc/toolchain.h"

/* ---- runtime compilers: hiprtc (+comgr) for gfx, nvrtc for sm ------------------------------
 * Vendor libraries are dlopen'ed on first use. These functions never print: problems come
 * back in the result's log / the why buffer, and the caller reports them. They may be called
 * from several threads. nvrtc is thread-safe and runs on the caller's thread. hiprtc and
 * comgr are NOT (ROCm 5.2: LLVM's global option registry; rtc_worker.h): their calls run in
 * worker processes once hkc_amd_workers_start has been called, else one at a time in this
 * process. */
typedef struct hkc_rtc_result {
  void *code;           /* code object: AMDGPU ELF or cubin; malloc'd */
  size_t code_size;
  char *log;            /* compiler log (errors, warnings); malloc'd, may be NULL */
  /* resources of the named kernel as the toolchain reports them (0 = unknown) */
  uint32_t vgprs, agprs, sgprs, shared_bytes, scratch_bytes, wave_size, max_block;
} hkc_rtc_result_t;
void hkc_rtc_result_free(hkc_rtc_result_t *result);

/* 0 when the toolchain loads; else -1 and why names the missing library and the package. */
int hkc_hiprtc_available(char *why, size_t why_size);
/* "hiprtc 5.2.21153, comgr 2.4" (static string; "" when unavailable). */
const char *hkc_hiprtc_version(void);
/* Compiles one kernel's source for an AMD arch ("gfx90a", or with features "gfx90a:xnack-")
 * into a code object; resources of kernel `name` read through comgr's metadata. 0 / -1. */
int hkc_hiprtc_compile(const char *source, const char *name, const char *arch, hkc_rtc_result_t *out);
/* ISAs comgr knows, as hkc target names ("gfx90a", "gfx90a:xnack-", ...). Caller frees
 * each string and the array. 0 / -1 (why filled). */
int hkc_comgr_isa_list(char ***out_names, size_t *out_count, char *why, size_t why_size);
/* Disassembly of an AMDGPU code object (text, malloc'd). 0 / -1 (why filled). */
int hkc_comgr_disassemble(const void *code, size_t size, const char *arch, char **out_text, char *why,
                          size_t why_size);

/* AMD toolchain calls go to up to max_workers processes `exe --rtc-worker` (exe: an hkc
 * binary; /proc/self/exe from hkc itself); a call running longer than timeout_s (0: no
 * limit) kills its worker. A worker that dies is replaced and the call retried once. 0 / -1. */
int hkc_amd_workers_start(const char *exe, int max_workers, int timeout_s);
void hkc_amd_workers_stop(void); /* ends the workers; later calls run in-process */
void hkc_amd_workers_counts(unsigned *out_started, unsigned *out_replaced);
/* The worker's side: serves jobs on fd 3 until its parent closes it; returns an exit status. */
int hkc_amd_worker_main(void);

int hkc_nvrtc_available(char *why, size_t why_size);
const char *hkc_nvrtc_version(void);  /* "nvrtc 13.0" */
/* Compiles one kernel's source for "sm_80", "sm_90", "sm_90a" into a cubin; registers,
 * shared and local (spill) memory of kernel `name` from ptxas' report. For "compute_80",
 * "compute_90a": the PTX text of that virtual architecture instead, NUL included in
 * code_size, no resources (ptxas does not run). 0 / -1. */
int hkc_nvrtc_compile(const char *source, const char *name, const char *arch, hkc_rtc_result_t *out);
/* sm_XY numbers nvrtc can build (e.g. 75, 80, 86, 89, 90, 100, ...); caller frees. */
int hkc_nvrtc_supported_archs(int **out_archs, size_t *out_count, char *why, size_t why_size);

/* ---- compile cache ---------------------------------------------------------------------------
 * Content-addressed: the key hashes kernel source, options, target and toolchain version.
 * Entries are self-checking files written atomically; a corrupt entry is a miss (and is
 * replaced), never trusted. With hkc_env_cache_url() (HKC_CACHE_URL) a shared Redis is a
 * second level behind the directory (read-through, write-back; cache_remote.h): used only
 * with a usable directory, and never a reason for a build to fail. Thread-safe. */
typedef struct hkc_cache hkc_cache_t;
/* dir NULL: hkc_env_cache_dir() (the CLI maps $HKC_CACHE_DIR, else $XDG_CACHE_HOME/hkc, else
 * ~/.cache/hkc onto it). NULL, with one warning saying why, when there is none or it cannot be used:
 * not creatable, not writable, not owned by this user, or writable by group or others
 * (whoever writes entries chooses the code hkc packs). The build then runs uncached. */
hkc_cache_t *hkc_cache_open(const char *dir);
void hkc_cache_close(hkc_cache_t *cache);
void hkc_cache_key(const char *source, const char *options, const char *target, const char *toolchain,
                   char out_hex[33]);
/* What a compile is keyed by. An entry records it: a read needs the recorded request and
 * key to equal the caller's (the key recomputed from it), so an entry never serves
 * another request, whatever its checksum says. */
typedef struct hkc_cache_request {
  const char *source, *options, *target, *toolchain;
} hkc_cache_request_t;
/* With verbose, a miss for an entry that is not this user's alone (below) is said once, on
 * stderr (hkc build -v). */
void hkc_cache_set_verbose(hkc_cache_t *cache, int verbose);
/* 0 on a hit in the directory, 1 on a hit in the shared cache (HKC_CACHE_URL: cache_remote.h;
 * the entry, checked as a local one, is now in the directory too) -- result filled, owned by
 * the caller -- and -1 on a miss. An entry file that another user owns, or that group or others
 * may write, is a miss (compiled again, then replaced): whoever can write it chooses the code. */
int hkc_cache_get(hkc_cache_t *cache, const hkc_cache_request_t *request, hkc_rtc_result_t *out);
/* Stores the entry in the directory and, with a shared cache, there too. Best effort. */
void hkc_cache_put(hkc_cache_t *cache, const hkc_cache_request_t *request, const hkc_rtc_result_t *result);

/* Size and cleaning (hkc cache). Entries are least recently used by their modification time:
 * a hit touches its entry. */
typedef struct hkc_cache_stats {
  uint64_t entries, bytes;      /* complete entries (<key>.hkcc) and their file sizes */
  uint64_t temporary, temporary_bytes; /* temporary files of writers (and stale ones) */
} hkc_cache_stats_t;
/* A temporary file younger than this may belong to a writer at work: cleaning leaves it. */
#define HKC_CACHE_TMP_AGE_S 60
/* Counts the directory's files (dir NULL: hkc_env_cache_dir()); a missing directory is empty.
 * 0 / -1 (errno set; an unreadable directory). */
int hkc_cache_stats(const char *dir, hkc_cache_stats_t *out);
/* Removes entries, least recently used first, until the rest take at most max_bytes
 * (UINT64_MAX: none removed, 0: all), and temporary files older than HKC_CACHE_TMP_AGE_S.
 * Each entry is one file removed by one unlink, so a concurrent hkc sees it whole or not at
 * all (a reader that has it open still reads it whole); only regular files with the cache's
 * names that are this user's alone (owned, not writable by group or others: those hkc_cache_get
 * would use) are touched, and nothing in a directory another user owns (-1, EPERM).
 * out_removed (may be NULL): what was removed. 0 / -1 (errno set; what could be removed was). */
int hkc_cache_trim(const char *dir, uint64_t max_bytes, hkc_cache_stats_t *out_removed);

/* ---- the host C compiler (rtc_host.c) ---------------------------------------------------------- */
/* Compiles C source with $CC (else cc) -O2 -shared -fPIC into a shared object held in
 * memory. Errors (with the compiler's output) are reported through hkc_error. 0 / -1.
 * out_version receives the first line of `cc --version`. */
int hkc_rtc_host_compile(const char *source, void **out_code, size_t *out_size, char *out_version,
                         size_t version_size);
/* The C compiler's version line (rtc_host.c), as hkc_rtc_host_compile reports it;
 * "unknown" when it cannot be run. Static; thread-safe. */
const char *hkc_rtc_host_version(void);

typedef struct hkc_compile_item hkc_compile_item_t;
/* ---- the GPU compile pool (compile_pool.c; used by the build and the tuner) ------------------- */
struct hkc_compile_item {
  const char *target;              /* as requested ("gfx90a:xnack-", "sm_90a") */
  const hkc_gpu_arch_t *arch;
  hkc_kernel_out_t *kernel;        /* name and key in; source_hash out */
  hkc_rtc_result_t result;         /* out: code, log and resources; the caller frees */
  int rc;                          /* 0 compiled, -1 failed (result.log says why) */
  int cached;                      /* out: 0 compiled, 1 from the cache directory, 2 from the
                                      shared cache (HKC_CACHE_URL) */
  int phase;                       /* in: the progress phase this item counts in
                                      (hkc_reporter_begin's id; unused without a reporter) */
};
/* Compiles GPU kernels on a pool of `jobs` threads (0: cores) through the compile cache
 * (unless no_cache). Results land in items[i] whatever the completion order. Each finished
 * item, compiled, from the cache or failed, counts in its phase of progress (util.h; NULL:
 * nothing shown). Returns the number of failures; *out_threads (NULL: not wanted) the
 * number of threads that compiled (0 when n is 0). */
size_t hkc_compile_gpu_items(hkc_compile_item_t *items, size_t n, int jobs, int no_cache, const char *cache_dir,
                             hkc_reporter_t *progress, int *out_threads);
/* The same in two steps, so that the caller can work meanwhile (the build compiles the host
 * target): start returns at once with the threads compiling (NULL on OOM: nothing started);
 * finish waits for every item (compiling on the calling thread when no thread started),
 * frees the pool and returns the number of threads that compiled (the calling thread counts
 * as one when it did; 0 for no items). */
typedef struct hkc_compile_pool hkc_compile_pool_t;
hkc_compile_pool_t *hkc_compile_pool_start(hkc_compile_item_t *items, size_t n, int jobs, int no_cache,
                                           const char *cache_dir, hkc_reporter_t *progress);
int hkc_compile_pool_finish(hkc_compile_pool_t *pool);

#endif /* HKC_RTC_H */
