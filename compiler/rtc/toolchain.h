/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/rtc/toolchain.h -- the toolchain table: what the compiler does differently per
 * toolchain, one static const entry of figures and function pointers each (the compiler's
 * counterpart of the loader's hk_backend_t, loader/src/backend.h). Included by rtc/rtc.h.
 *
 *   hkc_toolchain_host     rtc_host.c         the system C compiler: the host target
 *   hkc_toolchain_hiprtc   rtc_amd_worker.c   hiprtc + comgr: AMD gfx targets (calls in worker processes)
 *   hkc_toolchain_nvrtc    rtc_nvrtc.c        nvrtc: NVIDIA sm targets
 *   toolchain.c            the list (host first, then the GPU toolchains) and the lookups
 *   rtc_exec.c             running a toolchain's command-line programs (objdump, nvdisasm)
 *
 * Adding a target of an existing kind: a row in the GPU target table (codegen/targets.c).
 * Adding a toolchain: its entry (in its own rtc_<name>.c) and a line in toolchain.c's list;
 * the build, the compile pool, the tuner and the tools only call through the table.
 * Properties of the hardware (wave size, matrix path, occupancy model) stay in the target
 * table; the entry holds what belongs to the compiler that builds for it.
 */
#ifndef HKC_RTC_TOOLCHAIN_H
#define HKC_RTC_TOOLCHAIN_H

#include <stddef.h>
#include <stdint.h>

#include "codegen/codegen.h"

typedef struct hkc_rtc_result hkc_rtc_result_t; /* rtc.h */

typedef struct hkc_toolchain {
  const char *name;           /* "host", "hiprtc", "nvrtc" */
  hk_target_kind_t kind;      /* the kind of target it builds (the loader backend that runs it) */
  const char *vendor;         /* in messages: "AMD targets need hiprtc" ("host", "AMD", "NVIDIA") */
  const char *program;        /* what they need, in the same messages: "hiprtc", "nvrtc", "a C compiler" */
  const char *label;          /* `hkc targets`' heading ("AMD (gfx)") */
  const char *features;       /* NULL: target names are bare; else they may carry ISA features after
                                 ':' ("gfx90a:xnack-"), and this line of `hkc targets` says which */
  const char *probe_compile;  /* NULL: list_targets names only targets the compiler builds; else it
                                 may name others (comgr lists ISAs ROCm 5.2's hiprtc rejects), so
                                 `hkc targets` compiles a probe kernel for each and heads the
                                 rejected ones with this text */
  const char *spill_memory;   /* where a kernel's spills go, in warnings: "scratch", "local" */
  const char *compute_unit;   /* "CU", "SM" (GPU targets' compute_units count these) */
  const char *occupancy_unit; /* what hkc_occupancy counts for its targets: "waves/SIMD", "blocks/SM" */

  /* 0 when the toolchain can run here; else -1 and why names the missing library or
   * program and its package. Cheap after the first call; thread-safe. */
  int (*available)(char *why, size_t why_size);
  /* One line naming the toolchain and its version ("nvrtc 13.0"; "" or "unknown" when
   * unavailable). Part of compile-cache keys, pack provenance and tuning-database keys.
   * Static string; thread-safe. */
  const char *(*version)(void);
  /* Kernel source. A toolchain has exactly one of the two hooks:
   * codegen_kernel: one kernel per compile (GPU: the compile pool, one code object each);
   * codegen_unit: every kernel of a target in one translation unit, compiled once (host; the
   * kernels' code is one shared object). Caller frees; NULL after reporting. */
  char *(*codegen_kernel)(const hkc_gpu_arch_t *arch, const hkc_kernel_out_t *kernel);
  char *(*codegen_unit)(const hkc_kernel_out_t *kernels, size_t n_kernels);
  /* Grid, block and dynamic shared memory of one launch (arch NULL for the host). */
  void (*launch_dims)(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                      uint32_t n_args, uint32_t out_grid[3], uint32_t out_block[3], uint32_t *out_shared);
  /* Optional (NULL: a launch passes the op ABI's arguments only): the launch's full argument
   * list, the kernel's extra arguments appended after the ABI's args[0, n_args); returns the
   * new count (<= max_args). nvrtc: hkc_gpu_launch_args (TMA tensor maps of sm_90a variants);
   * NULL for the host and hiprtc, whose loader backends build no tensor maps. */
  uint32_t (*launch_args)(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, hkc_arg_t *args, uint32_t n_args,
                          uint32_t max_args);
  /* Optional (NULL: never): the workspace (scratch and semaphore counters, lower.h) a launch
   * needs besides its tensors, 1 when its kernel takes it (then the build plans it and appends
   * its two arguments last), 0 otherwise. nvrtc: hkc_gpu_launch_workspace (the split GEMMs);
   * NULL for the host and hiprtc, whose kernels take none. */
  int (*launch_workspace)(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key, const hkc_arg_t *args,
                          uint32_t n_args, hkc_node_workspace_t *out);
  /* Optional (NULL: never): 1 when a launch of key on arch may be a programmatic dependent
   * launch (the build marks its node HK_NODE_FLAG_PDL). nvrtc: hkc_gpu_launch_pdl (the
   * variant's pdl); NULL for the host and hiprtc, since only CUDA kernels wait with
   * griddepcontrol and only CUDA targets may carry the flag. */
  int (*launch_pdl)(const hkc_gpu_arch_t *arch, const hkc_kernel_key_t *key);
  /* Compiles source for target (as requested: "gfx90a:xnack-", "sm_90a"; ignored by the host)
   * into out->code; resources of kernel `name` (NULL for a translation unit) in out. 0 / -1.
   * GPU toolchains never print: problems come back in out->log; they may be called from
   * several threads (AMD calls go to the worker processes, rtc.h). The host compile reports
   * its errors through hkc_error (out->log stays NULL) and runs on the build's thread. */
  int (*compile)(const char *source, const char *name, const char *target, hkc_rtc_result_t *out);
  /* Machine code of one compiled kernel (its own code object; for the host the shared object,
   * kernel selects the function) as text (malloc'd, caller frees). 0 / -1 (why filled: which
   * program failed or is missing). AMD through comgr, NVIDIA nvdisasm or cuobjdump
   * ($HKC_CUDA_PATH/bin, else /usr/local/cuda/bin), host objdump. */
  int (*disassemble)(const void *code, size_t size, const char *kernel, const char *target, char **out_text,
                     char *why, size_t why_size);
  /* The target names the installed toolchain says it builds (host: this machine's; AMD:
   * comgr's ISAs, feature variants included; NVIDIA: nvrtc's sm_XY, and sm_90a after sm_90).
   * Caller frees each string and the array. 0 / -1 (why filled: it cannot tell). */
  int (*list_targets)(char ***out_names, size_t *out_count, char *why, size_t why_size);
} hkc_toolchain_t;

extern const hkc_toolchain_t hkc_toolchain_host;
extern const hkc_toolchain_t hkc_toolchain_hiprtc;
extern const hkc_toolchain_t hkc_toolchain_nvrtc;

/* Every toolchain, host first (the order `hkc targets` prints them in). */
const hkc_toolchain_t *const *hkc_toolchain_list(size_t *out_count);
/* The toolchain building targets of this kind; NULL when none does. */
const hkc_toolchain_t *hkc_toolchain_for_kind(hk_target_kind_t kind);
/* The toolchain of a GPU target table entry; arch NULL means the host. */
const hkc_toolchain_t *hkc_toolchain_for_arch(const hkc_gpu_arch_t *arch);
/* The toolchain for a target name as a user writes it: "host" or this machine's host name
 * ("host-x86_64"; *out_arch = NULL), or a GPU target table name with ISA features where
 * that toolchain takes them ("gfx90a:xnack-"; *out_arch = its row). NULL when hkc does
 * not know the name: why (may be NULL) says so and lists the names it knows. */
const hkc_toolchain_t *hkc_toolchain_for_target(const char *target, const hkc_gpu_arch_t **out_arch, char *why,
                                                size_t why_size);
/* "host, gfx908, gfx90a, ..." -- every target name the lookup knows. */
void hkc_toolchain_known_targets(char *out, size_t size);

/* ---- for the entries: running a toolchain's programs (rtc_exec.c) ------------------------- */
/* Runs argv (no shell; argv[0] found on $PATH) with stdin from /dev/null, stderr inherited,
 * and its stdout captured into *out_text (malloc'd, NUL-terminated; also on failure, may
 * be NULL). Returns the exit status, or -1 when the program could not be started. */
int hkc_rtc_exec_capture(char *const argv[], char **out_text);
/* Writes bytes to a fresh temporary file named with suffix; its path (malloc'd) or NULL. */
char *hkc_rtc_temp_file(const void *data, size_t size, const char *suffix);

#endif /* HKC_RTC_TOOLCHAIN_H */
