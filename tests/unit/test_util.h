/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the unit tests: independent float16/bfloat16 conversions and
 * activation references, a seeded random generator, temporary paths, specs from text,
 * the GPU target table, and a pool that compiles many kernels. Deliberately written apart
 * from the code under test, so a conversion bug there cannot hide here.
 *
 * Functions documented "fails the test" use cmocka's assertions: call them from inside a
 * running cmocka test. */
#ifndef HK_TEST_UTIL_H
#define HK_TEST_UTIL_H
#include <stddef.h>
#include <stdint.h>

#include "hk/hkrt.h"
#include "hkc.h"

float hk_test_f16_to_f32(uint16_t h);
uint16_t hk_test_f32_to_f16(float f);   /* round to nearest even */
float hk_test_bf16_to_f32(uint16_t h);
uint16_t hk_test_f32_to_bf16(float f);  /* round to nearest even */

/* xorshift64*; uniform in [lo, hi). */
typedef struct { uint64_t s; } hk_test_rng_t;
void hk_test_rng_seed(hk_test_rng_t *r, uint64_t seed);
double hk_test_uniform(hk_test_rng_t *r, double lo, double hi);

/* A fresh directory under $TMPDIR (or /tmp); caller frees the string. */
char *hk_test_tmpdir(void);
/* Runs a shell command, capturing stdout+stderr into out (truncated). Returns exit status. */
int hk_test_run(const char *cmd, char *out, size_t out_size);
/* Path to a source-tree file: $HK_SOURCE_DIR/rel. Static buffer. */
const char *hk_test_source_path(const char *rel);
/* Starts hkc's AMD compile workers (the hkc binary at $HKC_BIN, n processes; 0: one per
 * core), as `hkc build` does. 0, or -1 with a printed note when $HKC_BIN is unset (AMD
 * calls then run in this process, one at a time). */
int hk_test_start_amd_workers(int n);

/* hk_pack_open_memory / _file for packs the tests build themselves: allow_unsigned_code
 * (their code comes from the fixture; the trust policy has its own tests, sign_test.c). */
hk_status_t hk_test_open_memory(const void *data, size_t size, const hk_allocator_t *allocator, hk_pack_t **out_pack);
hk_status_t hk_test_open_file(const char *path, const hk_allocator_t *allocator, hk_pack_t **out_pack);

/* ---- the compiler's front end ------------------------------------------------------------
 * Parses text as the spec file "t.yaml" (diagnostics captured); a rejected spec fails the
 * test with the text and the diagnostics. Also checks the parser's contract: a spec exactly
 * when it returns 0. Caller destroys the spec. */
hkc_spec_t *hk_test_spec_parse(const char *text);
/* hkc_fuse(spec, mode) (diagnostics captured); a failure fails the test with them. */
void hk_test_spec_fuse(hkc_spec_t *spec, int mode);
/* The diagnostics the last of those two captured (an accepted spec's warnings too). */
const char *hk_test_spec_diag(void);
/* The index of the tensor named name; fails the test when there is none. */
int hk_test_tensor(const hkc_spec_t *spec, const char *name);

/* An activation (HK_ACT_*) in double precision: the reference the kernels are checked
 * against (gelu with erf, gelu_tanh, relu, silu; anything else is the identity). */
double hk_test_act_ref(int act, double x);
/* The activation an ewchain program's step letter names: r relu, g gelu, s silu, else
 * (t) gelu_tanh. */
int hk_test_ewchain_act(char letter);

/* ---- GPU targets and generated sources -------------------------------------------------------- */
/* The target table's entry for name ("sm_90", "gfx90a"); fails the test when there is none. */
const hkc_gpu_arch_t *hk_test_arch(const char *name);
/* The name of the variant that serves key on the arch named arch_name ("simple": the
 * simple kernels); fails the test when none does. */
const char *hk_test_variant_name(const char *arch_name, hkc_kernel_key_t key);
/* The integer of `#define NAME <value>` in generated source; fails the test when absent. */
long long hk_test_source_macro(const char *src, const char *name);
/* Sets k->name: the key's canonical name plus the flags it may not show (yet) -- _mul,
 * _add, _sum, the ewchain program -- so failures name the kernel. */
void hk_test_kernel_name(hkc_kernel_out_t *k);

/* Sets the kernel options a ';'-separated list of NAME=VALUE names ("gemm_tma=off;gemm_ws=off";
 * "" sets none) on top of *o; a rejected one fails the test with the parser's message. */
void hk_test_options(hkc_kernel_options_t *o, const char *list);

/* 0 when the toolchain loads; else prints "[ SKIP     ] nvrtc: why" and returns -1. */
int hk_test_need_nvrtc(void);
int hk_test_need_hiprtc(void);
/* Skips the running test (cmocka skip()) when the toolchain does not load, saying why. */
#define HK_TEST_NEED_NVRTC()              \
  do {                                    \
    if (hk_test_need_nvrtc() != 0) skip(); \
  } while (0)
#define HK_TEST_NEED_HIPRTC()              \
  do {                                     \
    if (hk_test_need_hiprtc() != 0) skip(); \
  } while (0)

/* ---- the compile pool: many generated kernels on a few threads -------------------------------- */
typedef int (*hk_test_compile_fn)(const char *source, const char *name, const char *arch, hkc_rtc_result_t *out);

/* One kernel for one arch: the caller fills arch and kernel (key and name); the pool fills
 * the rest from hkc_codegen_gpu and the toolchain. */
typedef struct hk_test_compile_job {
  const hkc_gpu_arch_t *arch;
  hkc_kernel_out_t kernel;
  int ok;                         /* generated, compiled, and passed the flags' checks */
  int always;                     /* a representative job: HK_TEST_COMPILE_SAMPLED compiles it */
  int sampled_out;                /* HK_TEST_COMPILE_SAMPLED: generated, not compiled (ok is 1) */
  uint32_t regs, scratch, shared; /* as the toolchain reports them (also when not ok) */
  char error[600];                /* why not ok */
} hk_test_compile_job_t;

/* Checks of a compile beyond its success (hk_test_compile_* flags). */
enum {
  HK_TEST_COMPILE_ELF = 1,         /* the code object must be an ELF file */
  HK_TEST_COMPILE_NO_WARNINGS = 2, /* a "warning" in the compiler's log fails the job */
  HK_TEST_COMPILE_NO_WGMMA_SERIAL = 4, /* ptxas's note that it serialized wgmmas (C7510..C7520, "info"
                                          lines, not warnings) fails the job */
  HK_TEST_COMPILE_SAMPLED = 8,     /* a matrix the test suite samples: see hk_test_sampled_out */
};

/* The kernel matrices' two sets. HKC_TEST_FULL set (not "0"): every compile of every matrix (the
 * release set, docs/TESTING.md). Otherwise (CI, every change) each matrix keeps its hand-picked
 * representative jobs, and those compiled with HK_TEST_COMPILE_SAMPLED are sampled further (but for
 * the ones marked `always`, a matrix's defaults and the configurations it exists for): a job
 * is compiled when a hash of its target, kernel name and generated source is 0 modulo
 * HKC_TEST_SAMPLE (default 16, a subset of what any divisor of 16 keeps; 1 compiles them all). Every job is still generated; the sample is
 * the same from run to run and moves only when the kernel's source changes. */
int hk_test_full(void);
int hk_test_sampled_out(const char *arch, const char *kernel_name, const char *source);

/* The most threads one pool starts (callers ask for the build machines' 2 cores). */
#define HK_TEST_COMPILE_MAX_THREADS 8

/* Generates and compiles one job on this thread. */
void hk_test_compile_one(hk_test_compile_job_t *job, hk_test_compile_fn compile, unsigned flags);
/* Compiles every job on up to n_threads threads (0, or none starting: on this thread --
 * for toolchains that are not safe on threads) and prints the count and the time. Asserts
 * nothing: see hk_test_compile_failures. */
void hk_test_compile_all(hk_test_compile_job_t *jobs, size_t n_jobs, hk_test_compile_fn compile, int n_threads,
                         unsigned flags);
/* Prints a FAIL line for each job that is not ok, reports no registers or uses scratch
 * (spills); returns how many. */
int hk_test_compile_failures(const hk_test_compile_job_t *jobs, size_t n_jobs);

/* Session options with struct_size set, the fields given by name:
 * hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .target = "sm_90"), &s). */
#define HK_TEST_OPTIONS(...) (&(hk_session_options_t){.struct_size = sizeof(hk_session_options_t), __VA_ARGS__})
#endif
