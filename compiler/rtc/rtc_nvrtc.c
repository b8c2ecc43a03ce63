/* SPDX-License-Identifier: Apache-2.0 */
/* nvrtc: NVIDIA kernel sources -> cubins, through a dlopen'ed libnvrtc (never linked).
 *
 * Library search: $HKC_CUDA_PATH/lib64/libnvrtc.so{.13,.12,}, then
 * /usr/local/cuda/lib64/libnvrtc.so.13 / .so.12 / libnvrtc.so, then libnvrtc.so.13 /
 * .so.12 / .so on the loader's default path. Loaded once (pthread_once); nvrtc documents
 * its API as safe to call from several threads on distinct programs, and each compile
 * here uses its own program, so hkc_nvrtc_compile is thread-safe. Nothing is printed. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rtc/rtc.h"
#include "util/util.h"

/* ---- the symbol table: X(name, return, params, required) ------------------------------ */
typedef int nvrtc_result_t; /* nvrtcResult; NVRTC_SUCCESS = 0 */
typedef struct nvrtc_program *nvrtc_program_t;

#define NVRTC_SYMBOLS(X)                                                                                      \
  X(nvrtcVersion, nvrtc_result_t, (int *major, int *minor), 1)                                               \
  X(nvrtcGetErrorString, const char *, (nvrtc_result_t result), 1)                                            \
  X(nvrtcCreateProgram, nvrtc_result_t,                                                                       \
    (nvrtc_program_t * prog, const char *src, const char *name, int num_headers, const char *const *headers, \
     const char *const *include_names),                                                                       \
    1)                                                                                                        \
  X(nvrtcCompileProgram, nvrtc_result_t, (nvrtc_program_t prog, int num_options, const char *const *options), 1) \
  X(nvrtcGetProgramLogSize, nvrtc_result_t, (nvrtc_program_t prog, size_t *size), 1)                          \
  X(nvrtcGetProgramLog, nvrtc_result_t, (nvrtc_program_t prog, char *log), 1)                                \
  X(nvrtcGetCUBINSize, nvrtc_result_t, (nvrtc_program_t prog, size_t *size), 1)                              \
  X(nvrtcGetCUBIN, nvrtc_result_t, (nvrtc_program_t prog, char *cubin), 1)                                   \
  X(nvrtcGetPTXSize, nvrtc_result_t, (nvrtc_program_t prog, size_t *size), 1)                                \
  X(nvrtcGetPTX, nvrtc_result_t, (nvrtc_program_t prog, char *ptx), 1)                                       \
  X(nvrtcDestroyProgram, nvrtc_result_t, (nvrtc_program_t * prog), 1)                                        \
  X(nvrtcGetNumSupportedArchs, nvrtc_result_t, (int *count), 0)                                               \
  X(nvrtcGetSupportedArchs, nvrtc_result_t, (int *archs), 0)

typedef struct nvrtc_lib {
  void *handle;
#define X(name, ret, params, required) ret(*name) params;
  NVRTC_SYMBOLS(X)
#undef X
  char version[32];  /* "nvrtc 13.0" */
  char why[512];     /* why loading failed */
} nvrtc_lib_t;

static nvrtc_lib_t g_nvrtc;
static pthread_once_t g_nvrtc_once = PTHREAD_ONCE_INIT;

/* Binds every symbol of an opened library; -1 (why filled) when a required one is missing. */
static int nvrtc_bind(nvrtc_lib_t *lib, const char *path) {
#define X(name, ret, params, required)                                                             \
  *(void **)&lib->name = dlsym(lib->handle, #name);                                                \
  if (!lib->name && (required)) {                                                                  \
    snprintf(lib->why, sizeof lib->why, "%.300s lacks symbol %s: install a CUDA toolkit >= 11.2 (nvrtc)", \
             path, #name);                                                                         \
    return -1;                                                                                     \
  }
  NVRTC_SYMBOLS(X)
#undef X
  return 0;
}

static void nvrtc_load(void) {
  static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  char tried[384] = "", path[512];
  size_t used = 0;
  const char *env = hkc_env_cuda_path();
  if (strcmp(env, "/usr/local/cuda") == 0) env = NULL; /* the second candidate already */
  /* candidates: $HKC_CUDA_PATH/lib64/<name> (hkc_env), /usr/local/cuda/lib64/<name>, <name> */
  for (int dir = 0; dir < 3 && !g_nvrtc.handle; dir++) {
    if (dir == 0 && (!env || !*env)) continue;
    for (size_t i = 0; i < sizeof names / sizeof names[0] && !g_nvrtc.handle; i++) {
      int n = dir == 0   ? snprintf(path, sizeof path, "%s/lib64/%s", env, names[i])
              : dir == 1 ? snprintf(path, sizeof path, "/usr/local/cuda/lib64/%s", names[i])
                         : snprintf(path, sizeof path, "%s", names[i]);
      if (n < 0 || (size_t)n >= sizeof path) continue;
      g_nvrtc.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (!g_nvrtc.handle && used < sizeof tried) {
        int w = snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", path);
        if (w > 0) used += (size_t)w;
      }
    }
  }
  if (!g_nvrtc.handle) {
    snprintf(g_nvrtc.why, sizeof g_nvrtc.why,
             "libnvrtc not found (tried %s): install the CUDA toolkit (nvrtc) or set HKC_CUDA_PATH", tried);
    return;
  }
  if (nvrtc_bind(&g_nvrtc, path) != 0) {
    dlclose(g_nvrtc.handle);
    g_nvrtc.handle = NULL;
    return;
  }
  int major = 0, minor = 0;
  if (g_nvrtc.nvrtcVersion(&major, &minor) == 0)
    snprintf(g_nvrtc.version, sizeof g_nvrtc.version, "nvrtc %d.%d", major, minor);
  else
    snprintf(g_nvrtc.version, sizeof g_nvrtc.version, "nvrtc (unknown version)");
}

static const nvrtc_lib_t *nvrtc_get(void) {
  pthread_once(&g_nvrtc_once, nvrtc_load);
  return g_nvrtc.handle ? &g_nvrtc : NULL;
}

int hkc_nvrtc_available(char *why, size_t why_size) {
  if (nvrtc_get()) return 0;
  if (why && why_size) snprintf(why, why_size, "%s", g_nvrtc.why);
  return -1;
}

const char *hkc_nvrtc_version(void) { return nvrtc_get() ? g_nvrtc.version : ""; }

int hkc_nvrtc_supported_archs(int **out_archs, size_t *out_count, char *why, size_t why_size) {
  *out_archs = NULL;
  *out_count = 0;
  const nvrtc_lib_t *lib = nvrtc_get();
  if (!lib) return hkc_nvrtc_available(why, why_size);
  int count = 0;
  if (!lib->nvrtcGetNumSupportedArchs || !lib->nvrtcGetSupportedArchs) {
    if (why && why_size) snprintf(why, why_size, "%s cannot list its architectures (needs nvrtc >= 11.2)", lib->version);
    return -1;
  }
  if (lib->nvrtcGetNumSupportedArchs(&count) != 0 || count <= 0 || count > 4096) {
    if (why && why_size) snprintf(why, why_size, "nvrtcGetNumSupportedArchs failed");
    return -1;
  }
  int *archs = malloc(sizeof *archs * (size_t)count);
  if (!archs) {
    if (why && why_size) snprintf(why, why_size, "out of memory");
    return -1;
  }
  if (lib->nvrtcGetSupportedArchs(archs) != 0) {
    free(archs);
    if (why && why_size) snprintf(why, why_size, "nvrtcGetSupportedArchs failed");
    return -1;
  }
  *out_archs = archs;
  *out_count = (size_t)count;
  return 0;
}

/* ---- ptxas' report ------------------------------------------------------------------------
 * With --ptxas-options=-v the program log carries, per entry function:
 *   ptxas info    : Compiling entry function 'NAME' for 'sm_90'
 *   ptxas info    : Function properties for NAME
 *       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
 *   ptxas info    : Used 40 registers, used 1 barriers, 8448 bytes smem, 400 bytes cmem[0]
 * Older ptxas also print "N bytes lmem" on the "Used" line. Reads the block of `name` up
 * to the next "Compiling entry function"; fields that are absent stay 0. */
static unsigned long parse_number_before(const char *text, const char *at) {
  const char *p = at;
  while (p > text && p[-1] == ' ') p--;
  const char *end = p;
  while (p > text && p[-1] >= '0' && p[-1] <= '9') p--;
  if (p == end) return 0;
  unsigned long v = 0;
  for (; p < end; p++) {
    if (v > 0xffffffffUL / 10) return 0xffffffffUL;
    v = v * 10 + (unsigned long)(*p - '0');
  }
  return v;
}

/* Value of the number written just before `label` inside [begin, end), 0 when absent. */
static unsigned long field_before(const char *begin, const char *end, const char *label) {
  size_t n = strlen(label);
  for (const char *p = begin; p + n <= end; p++)
    if (memcmp(p, label, n) == 0) return parse_number_before(begin, p);
  return 0;
}

static unsigned long field_after(const char *begin, const char *end, const char *label) {
  size_t n = strlen(label);
  for (const char *p = begin; p + n <= end; p++) {
    if (memcmp(p, label, n) != 0) continue;
    unsigned long v = 0;
    for (p += n; p < end && *p >= '0' && *p <= '9'; p++) {
      if (v > 0xffffffffUL / 10) return 0xffffffffUL;
      v = v * 10 + (unsigned long)(*p - '0');
    }
    return v;
  }
  return 0;
}

static void parse_ptxas(const char *log, const char *name, hkc_rtc_result_t *out) {
  static const char marker[] = "Compiling entry function '";
  const char *p = log;
  size_t name_len = strlen(name);
  while ((p = strstr(p, marker)) != NULL) {
    p += sizeof marker - 1;
    if (strncmp(p, name, name_len) != 0 || p[name_len] != '\'') continue;
    const char *end = strstr(p, marker);
    if (!end) end = p + strlen(p);
    out->vgprs = (uint32_t)field_after(p, end, "Used ");
    out->shared_bytes = (uint32_t)field_before(p, end, "bytes smem");
    unsigned long stack = field_before(p, end, "bytes stack frame");
    unsigned long spill = field_before(p, end, "bytes spill stores");
    unsigned long lmem = field_before(p, end, "bytes lmem");
    unsigned long local = stack > spill ? stack : spill;
    out->scratch_bytes = (uint32_t)(local > lmem ? local : lmem);
    return;
  }
}

/* The log and status text into out->log; returns -1 for the caller's convenience. */
static int fail_log(hkc_rtc_result_t *out, const char *fmt, const char *a, const char *b) {
  size_t n = strlen(fmt) + strlen(a) + strlen(b) + 1;
  char *msg = malloc(n);
  if (msg) snprintf(msg, n, fmt, a, b);
  if (out->log && msg) { /* keep the compiler's log after our line */
    size_t m = strlen(msg) + strlen(out->log) + 2;
    char *both = malloc(m);
    if (both) {
      snprintf(both, m, "%s\n%s", msg, out->log);
      free(msg);
      free(out->log);
      out->log = both;
      return -1;
    }
  }
  if (msg) {
    free(out->log);
    out->log = msg;
  }
  return -1;
}

int hkc_nvrtc_compile(const char *source, const char *name, const char *arch, hkc_rtc_result_t *out) {
  memset(out, 0, sizeof *out);
  const nvrtc_lib_t *lib = nvrtc_get();
  if (!lib) return fail_log(out, "%s%s", g_nvrtc.why, "");
  /* "compute_XY[a]": PTX for that virtual architecture (hkc_nvrtc_compile's contract) */
  const int ptx = strncmp(arch, "compute_", 8) == 0;
  if ((!ptx && strncmp(arch, "sm_", 3) != 0) || strlen(arch) > 16 || strlen(arch) < 5)
    return fail_log(out, "nvrtc: bad architecture '%s'%s (expected sm_XY, sm_XYa or compute_XY)", arch, "");

  char arch_opt[48];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
  const char *const options[] = {arch_opt, "--std=c++17", "--ptxas-options=-v"};
  const int n_options = ptx ? 2 : 3; /* no ptxas without a real architecture */
  nvrtc_program_t prog = NULL;
  nvrtc_result_t rc = lib->nvrtcCreateProgram(&prog, source, name, 0, NULL, NULL);
  if (rc != 0) return fail_log(out, "nvrtcCreateProgram: %s%s", lib->nvrtcGetErrorString(rc), "");
  nvrtc_result_t crc = lib->nvrtcCompileProgram(prog, n_options, options);

  size_t log_size = 0;
  if (lib->nvrtcGetProgramLogSize(prog, &log_size) == 0 && log_size > 1) {
    out->log = malloc(log_size + 1);
    if (out->log && lib->nvrtcGetProgramLog(prog, out->log) == 0) {
      out->log[log_size] = '\0';
    } else {
      free(out->log);
      out->log = NULL;
    }
  }
  if (crc != 0) {
    lib->nvrtcDestroyProgram(&prog);
    return fail_log(out, "nvrtc (%s): %s", arch, lib->nvrtcGetErrorString(crc));
  }

  size_t size = 0;
  if (ptx) {
    rc = lib->nvrtcGetPTXSize(prog, &size); /* includes the terminating NUL */
    out->code = rc == 0 && size > 1 ? malloc(size) : NULL;
    if (out->code && lib->nvrtcGetPTX(prog, out->code) == 0 && ((char *)out->code)[size - 1] == '\0') {
      lib->nvrtcDestroyProgram(&prog);
      out->code_size = size;
      out->wave_size = 32;
      return 0;
    }
    free(out->code);
    out->code = NULL;
    lib->nvrtcDestroyProgram(&prog);
    return fail_log(out, "nvrtcGetPTX (%s): %s", arch, rc ? lib->nvrtcGetErrorString(rc) : "no PTX text");
  }
  rc = lib->nvrtcGetCUBINSize(prog, &size);
  if (rc != 0 || size == 0) {
    lib->nvrtcDestroyProgram(&prog);
    return fail_log(out, "nvrtcGetCUBINSize (%s): %s", arch, rc ? lib->nvrtcGetErrorString(rc) : "no cubin");
  }
  out->code = malloc(size);
  if (!out->code) {
    lib->nvrtcDestroyProgram(&prog);
    return fail_log(out, "nvrtc: out of memory%s%s", "", "");
  }
  rc = lib->nvrtcGetCUBIN(prog, out->code);
  lib->nvrtcDestroyProgram(&prog);
  if (rc != 0) {
    free(out->code);
    out->code = NULL;
    return fail_log(out, "nvrtcGetCUBIN (%s): %s", arch, lib->nvrtcGetErrorString(rc));
  }
  out->code_size = size;
  out->wave_size = 32;
  if (out->log) parse_ptxas(out->log, name, out);
  return 0;
}

/* ---- the NVIDIA entry of the toolchain table (toolchain.h) ---------------------------------- */
/* nvdisasm on the cubin (the kernel's function), else cuobjdump -sass; from $HKC_CUDA_PATH/bin,
 * else /usr/local/cuda/bin. */
static int nvrtc_disassemble(const void *code, size_t size, const char *kernel, const char *target, char **out_text,
                             char *why, size_t why_size) {
  *out_text = NULL;
  char *path = hkc_rtc_temp_file(code, size, ".cubin");
  if (!path) {
    snprintf(why, why_size, "cannot write a temporary file for nvdisasm");
    return -1;
  }
  const char *cuda = hkc_env_cuda_path();
  char nvdisasm[4096], cuobjdump[4096];
  snprintf(nvdisasm, sizeof nvdisasm, "%s/bin/nvdisasm", cuda);
  snprintf(cuobjdump, sizeof cuobjdump, "%s/bin/cuobjdump", cuda);
  char *a1[] = {nvdisasm, "-c", "-fun", (char *)kernel, path, NULL};
  char *a2[] = {cuobjdump, "-sass", path, NULL};
  int rc = hkc_rtc_exec_capture(a1, out_text);
  if (rc != 0) {
    free(*out_text);
    rc = hkc_rtc_exec_capture(a2, out_text);
  }
  unlink(path);
  free(path);
  if (rc == 0) return 0;
  free(*out_text);
  *out_text = NULL;
  snprintf(why, why_size, "nvdisasm and cuobjdump failed or are missing (set HKC_CUDA_PATH)");
  return -1;
}

/* nvrtc's sm_XY as target names; sm_90a (wgmma, setmaxnreg) builds wherever sm_90 does. */
static int nvrtc_list_targets(char ***out_names, size_t *out_count, char *why, size_t why_size) {
  *out_names = NULL;
  *out_count = 0;
  int *archs = NULL;
  size_t n = 0;
  if (hkc_nvrtc_supported_archs(&archs, &n, why, why_size) != 0) return -1;
  char **names = calloc(2 * n + 1, sizeof *names);
  size_t count = 0;
  for (size_t i = 0; names && i < n; i++) {
    char name[32];
    snprintf(name, sizeof name, "sm_%d", archs[i]);
    names[count++] = hkc_strdup(name);
    if (archs[i] == 90) names[count++] = hkc_strdup("sm_90a");
  }
  free(archs);
  for (size_t i = 0; names && i < count; i++)
    if (!names[i]) {
      for (size_t j = 0; j < count; j++) free(names[j]);
      free(names);
      names = NULL;
    }
  if (!names) {
    snprintf(why, why_size, "out of memory");
    return -1;
  }
  *out_names = names;
  *out_count = count;
  return 0;
}

const hkc_toolchain_t hkc_toolchain_nvrtc = {
    .name = "nvrtc",
    .kind = HK_TARGET_CUDA,
    .vendor = "NVIDIA",
    .program = "nvrtc",
    .label = "NVIDIA (sm)",
    .spill_memory = "local",
    .compute_unit = "SM",
    .occupancy_unit = "blocks/SM",
    .available = hkc_nvrtc_available,
    .version = hkc_nvrtc_version,
    .codegen_kernel = hkc_codegen_gpu,
    .launch_dims = hkc_gpu_launch_dims,
    .launch_args = hkc_gpu_launch_args,
    .launch_workspace = hkc_gpu_launch_workspace,
    .launch_pdl = hkc_gpu_launch_pdl,
    .compile = hkc_nvrtc_compile,
    .disassemble = nvrtc_disassemble,
    .list_targets = nvrtc_list_targets,
};
