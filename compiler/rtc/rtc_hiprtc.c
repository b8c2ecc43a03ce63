/* SPDX-License-Identifier: Apache-2.0 */
/* hiprtc, dlopen'ed: HIP source -> AMDGPU code object, offline (no GPU needed), with the
 * kernel's resources read back through comgr (rtc_comgr.c).
 *
 * Checked with ROCm 5.2.3 (hiprtc inside libamdhip64.so.5): `--offload-arch=gfx90a` and
 * `--offload-arch=gfx90a:xnack-` both work (so does --gpu-architecture=); without an arch
 * option the compile fails. hiprtcGetCode returns a raw AMDGPU ELF (e_machine 224), not a
 * clang offload bundle; bundles (as other ROCm versions may return) are unpacked to the
 * arch's ELF by bundle_extract below. hiprtcVersion reports 9.0 on 5.2, so the version
 * string comes from the loaded library's file name instead. */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtc/rtc.h"
#include "rtc/rtc_amd_internal.h"
#include "util/util.h"

typedef int hiprtc_status_t; /* HIPRTC_SUCCESS = 0, HIPRTC_ERROR_COMPILATION = 6 */
typedef void *hiprtc_program_t;
#define HIPRTC_SUCCESS 0

#define HIPRTC_SYMBOLS(X)                                                                                \
  X(hiprtc_status_t, hiprtcCreateProgram,                                                                \
    (hiprtc_program_t *, const char *, const char *, int, const char **, const char **))                 \
  X(hiprtc_status_t, hiprtcCompileProgram, (hiprtc_program_t, int, const char **))                      \
  X(hiprtc_status_t, hiprtcGetProgramLogSize, (hiprtc_program_t, size_t *))                             \
  X(hiprtc_status_t, hiprtcGetProgramLog, (hiprtc_program_t, char *))                                   \
  X(hiprtc_status_t, hiprtcGetCodeSize, (hiprtc_program_t, size_t *))                                   \
  X(hiprtc_status_t, hiprtcGetCode, (hiprtc_program_t, char *))                                         \
  X(hiprtc_status_t, hiprtcDestroyProgram, (hiprtc_program_t *))                                        \
  X(const char *, hiprtcGetErrorString, (hiprtc_status_t))                                              \
  X(hiprtc_status_t, hiprtcVersion, (int *, int *))

typedef struct hiprtc_api {
#define HIPRTC_MEMBER(ret, name, args) ret(*name) args;
  HIPRTC_SYMBOLS(HIPRTC_MEMBER)
#undef HIPRTC_MEMBER
} hiprtc_api_t;

/* ROCm >= 6 ships hiprtc as its own library; ROCm 5 has it inside libamdhip64. */
static const char *const k_hiprtc_libs[] = {"libhiprtc.so.6", "libhiprtc.so", "libamdhip64.so.6",
                                            "libamdhip64.so.5", "libamdhip64.so"};
#define HIPRTC_WHY_MAX 768    /* load failure message: library list, package, dlerror */
#define HIPRTC_ARCH_MAX 64    /* "gfx90a:sramecc+:xnack-" and room to spare */
#define HIPRTC_LOG_MAX (1 << 20) /* a compile log larger than this is cut (runaway template errors) */
#define EM_AMDGPU_MACHINE 224 /* ELF e_machine of AMDGPU code objects */

/* Not safe on threads: see rtc_worker.h. This file is the in-process compile; callers reach
 * it through rtc_amd_worker.c, which runs it in worker processes (or serialized). */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static hiprtc_api_t g_api;
static int g_ok;
static char g_why[HIPRTC_WHY_MAX];
static char g_version[96];
static pthread_once_t g_isa_once = PTHREAD_ONCE_INIT;
static char **g_isas; /* comgr's ISA names, loaded once by the first local compile */
static size_t g_n_isas;
static char g_isa_why[512];

/* "5.2.21153" from the loaded library's real file name (libamdhip64.so.5.2.21153). */
static void version_from_file(void *lib, char *out, size_t size) {
  struct link_map *lm = NULL;
  char real[PATH_MAX];
  out[0] = '\0';
  if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name || !realpath(lm->l_name, real)) return;
  const char *so = strstr(real, ".so.");
  if (so) snprintf(out, size, "%s", so + 4);
}

static void hiprtc_load(void) {
  void *lib = NULL;
  const char *err = "";
  for (size_t i = 0; i < sizeof k_hiprtc_libs / sizeof *k_hiprtc_libs && !lib; i++) {
    lib = dlopen(k_hiprtc_libs[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) err = dlerror();
  }
  if (!lib) {
    snprintf(g_why, sizeof g_why,
             "hiprtc not found (tried libhiprtc.so.6, libhiprtc.so, libamdhip64.so.6, libamdhip64.so.5, "
             "libamdhip64.so: %s): install the Debian package libamdhip64-5 (or ROCm >= 6)",
             err ? err : "");
    return;
  }
#define HIPRTC_LOAD(ret, name, args)                                                                  \
  *(void **)&g_api.name = dlsym(lib, #name);                                                          \
  if (!g_api.name) {                                                                                  \
    snprintf(g_why, sizeof g_why, "the loaded hiprtc lacks %s: install libamdhip64-5 (or ROCm >= 6)", \
             #name);                                                                                  \
    return;                                                                                           \
  }
  HIPRTC_SYMBOLS(HIPRTC_LOAD)
#undef HIPRTC_LOAD
  char why[512];
  if (hkc_comgr_available(why, sizeof why) != 0) {
    snprintf(g_why, sizeof g_why, "hiprtc loads but %s", why);
    return;
  }
  char file_version[32];
  version_from_file(lib, file_version, sizeof file_version);
  if (!file_version[0]) {
    int major = 0, minor = 0;
    g_api.hiprtcVersion(&major, &minor);
    snprintf(file_version, sizeof file_version, "%d.%d", major, minor);
  }
  snprintf(g_version, sizeof g_version, "hiprtc %s, %s", file_version, hkc_comgr_version());
  g_ok = 1;
}

int hkc_hiprtc_available(char *why, size_t why_size) {
  pthread_once(&g_once, hiprtc_load);
  if (g_ok) return 0;
  if (why && why_size) snprintf(why, why_size, "%s", g_why);
  return -1;
}

const char *hkc_hiprtc_version(void) {
  pthread_once(&g_once, hiprtc_load);
  return g_ok ? g_version : "";
}

void hkc_rtc_result_free(hkc_rtc_result_t *result) {
  if (!result) return;
  free(result->code);
  free(result->log);
  memset(result, 0, sizeof *result);
}

void hkc_rtc_set_log(hkc_rtc_result_t *out, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  free(out->log);
  out->log = hkc_strdup(msg);
}

/* The processor ("gfx90a") is one comgr lists, and every feature is "name+" / "name-".
 * Without this check hiprtc 5.2 crashes on processors it half-knows (gfx940). */
static int arch_buildable(const char *arch) {
  size_t base = strcspn(arch, ":");
  int found = 0;
  for (size_t i = 0; i < g_n_isas && !found; i++)
    found = strlen(g_isas[i]) == base && strncmp(g_isas[i], arch, base) == 0;
  if (!found) return 0;
  for (const char *p = arch + base; *p == ':'; ) {
    p++;
    size_t n = strcspn(p, ":");
    if (n < 2 || (p[n - 1] != '+' && p[n - 1] != '-')) return 0;
    for (size_t k = 0; k + 1 < n; k++)
      if (!(p[k] >= 'a' && p[k] <= 'z') && !(p[k] >= '0' && p[k] <= '9')) return 0;
    p += n;
  }
  return 1;
}

static void list_buildable(char *out, size_t size) {
  size_t used = 0;
  out[0] = '\0';
  for (size_t i = 0; i < g_n_isas && used + 1 < size; i++) {
    if (strchr(g_isas[i], ':')) continue;
    int n = snprintf(out + used, size - used, "%s%s", used ? " " : "", g_isas[i]);
    if (n < 0) break;
    used += (size_t)n;
  }
}

static uint64_t rd64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* A clang offload bundle ("__CLANG_OFFLOAD_BUNDLE__", u64 count, then per entry u64
 * offset, u64 size, u64 triple length, triple; little-endian) -> the range of the entry
 * for arch ("...amdgcn-amd-amdhsa--gfx90a[:features]"): exact triple suffix first, else
 * the same processor. Every field is bounds-checked against size. 0 / -1. */
static int bundle_extract(const unsigned char *data, size_t size, const char *arch, size_t *out_off,
                          size_t *out_size) {
  static const char magic[] = "__CLANG_OFFLOAD_BUNDLE__";
  const size_t mlen = sizeof magic - 1;
  if (size < mlen + 8 || memcmp(data, magic, mlen) != 0) return -1;
  uint64_t count = rd64(data + mlen);
  size_t pos = mlen + 8, base = strcspn(arch, ":");
  int best = 0; /* 2 exact, 1 same processor */
  for (uint64_t i = 0; i < count; i++) {
    if (size - pos < 24) return -1;
    uint64_t off = rd64(data + pos), len = rd64(data + pos + 8), tlen = rd64(data + pos + 16);
    pos += 24;
    if (tlen > size - pos) return -1;
    const char *triple = (const char *)data + pos;
    pos += (size_t)tlen;
    if (off > size || len > size - off) return -1;
    const char *dd = NULL;
    for (size_t k = 0; k + 2 <= tlen; k++)
      if (triple[k] == '-' && triple[k + 1] == '-') dd = triple + k + 2;
    if (!dd || len == 0) continue;
    size_t plen = (size_t)(triple + tlen - dd);
    int score = (plen == strlen(arch) && memcmp(dd, arch, plen) == 0) ? 2
                : (plen >= base && memcmp(dd, arch, base) == 0 && (plen == base || dd[base] == ':')) ? 1
                                                                                                    : 0;
    if (score > best) {
      best = score;
      *out_off = (size_t)off;
      *out_size = (size_t)len;
    }
  }
  return best ? 0 : -1;
}

/* Copies the program log into out->log (NULL when empty). */
static void take_log(hiprtc_program_t prog, hkc_rtc_result_t *out) {
  size_t n = 0;
  if (g_api.hiprtcGetProgramLogSize(prog, &n) != HIPRTC_SUCCESS || n <= 1) return;
  if (n > HIPRTC_LOG_MAX) n = HIPRTC_LOG_MAX;
  char *log = calloc(1, n + 1);
  if (!log) return;
  size_t full = 0;
  g_api.hiprtcGetProgramLogSize(prog, &full);
  if (full > n) { /* the API has no bounded read: fetch all, then cut */
    char *big = calloc(1, full + 1);
    if (big && g_api.hiprtcGetProgramLog(prog, big) == HIPRTC_SUCCESS) memcpy(log, big, n);
    free(big);
  } else if (g_api.hiprtcGetProgramLog(prog, log) != HIPRTC_SUCCESS) {
    log[0] = '\0';
  }
  log[n] = '\0';
  out->log = log;
}

static int compile_one(const char *source, const char *name, const char *arch, hkc_rtc_result_t *out) {
  char opt_arch[HIPRTC_ARCH_MAX + 32];
  snprintf(opt_arch, sizeof opt_arch, "--offload-arch=%s", arch);
  const char *opts[] = {opt_arch, "-O3"};
  hiprtc_program_t prog = NULL;
  hiprtc_status_t st = g_api.hiprtcCreateProgram(&prog, source, "hkc_kernel.hip", 0, NULL, NULL);
  if (st != HIPRTC_SUCCESS) {
    hkc_rtc_set_log(out, "hiprtcCreateProgram: %s", g_api.hiprtcGetErrorString(st));
    return -1;
  }
  st = g_api.hiprtcCompileProgram(prog, (int)(sizeof opts / sizeof *opts), opts);
  take_log(prog, out);
  int rc = -1;
  if (st != HIPRTC_SUCCESS) {
    if (!out->log || !out->log[0])
      hkc_rtc_set_log(out, "hiprtc compile for %s failed: %s", arch, g_api.hiprtcGetErrorString(st));
    goto done;
  }
  size_t size = 0;
  if (g_api.hiprtcGetCodeSize(prog, &size) != HIPRTC_SUCCESS || size == 0 || !(out->code = malloc(size)) ||
      g_api.hiprtcGetCode(prog, out->code) != HIPRTC_SUCCESS) {
    hkc_rtc_set_log(out, "hiprtc produced no code for %s", arch);
    goto done;
  }
  out->code_size = size;
  rc = 0;
done:
  g_api.hiprtcDestroyProgram(&prog);
  return rc;
}

static void isa_load(void) {
  if (hkc_comgr_isa_list_local(&g_isas, &g_n_isas, g_isa_why, sizeof g_isa_why) != 0) g_n_isas = 0;
  else g_isa_why[0] = '\0';
}

/* Contract in rtc.h (hkc_hiprtc_compile). On failure out->log says why (compiler diagnostics,
 * an arch this toolchain cannot build with the list of those it can, a missing kernel). */
int hkc_hiprtc_compile_local(const char *source, const char *name, const char *arch, hkc_rtc_result_t *out) {
  memset(out, 0, sizeof *out);
  char why[HIPRTC_WHY_MAX];
  if (hkc_hiprtc_available(why, sizeof why) != 0) {
    hkc_rtc_set_log(out, "%s", why);
    return -1;
  }
  pthread_once(&g_isa_once, isa_load);
  if (g_isa_why[0]) {
    hkc_rtc_set_log(out, "hiprtc loads but comgr cannot list its ISAs: %s", g_isa_why);
    return -1;
  }
  if (strlen(arch) >= HIPRTC_ARCH_MAX || !arch_buildable(arch)) {
    char list[512];
    list_buildable(list, sizeof list);
    hkc_rtc_set_log(out, "%s: this hiprtc (%s) cannot build for '%s'; buildable targets: %s (newer GPUs need ROCm >= 6)",
            arch, g_version, arch, list);
    return -1;
  }
  if (compile_one(source, name, arch, out) != 0) return -1;

  const unsigned char *bytes = out->code;
  size_t off = 0, len = out->code_size;
  if (len >= 24 && memcmp(bytes, "__CLANG_OFFLOAD_BUNDLE__", 24) == 0) {
    if (bundle_extract(bytes, out->code_size, arch, &off, &len) != 0) {
      hkc_rtc_set_log(out, "hiprtc returned an offload bundle without a valid code object for %s", arch);
      goto fail;
    }
    memmove(out->code, bytes + off, len);
    out->code_size = len;
  } else if (len >= 4 && memcmp(bytes, "CCOB", 4) == 0) {
    hkc_rtc_set_log(out, "hiprtc returned a compressed offload bundle (CCOB), which hkc does not read yet");
    goto fail;
  }
  /* ELF64, little-endian, e_machine at offset 18 */
  if (out->code_size < 64 || memcmp(out->code, "\177ELF\2\1", 6) != 0 ||
      (((const unsigned char *)out->code)[18] | ((const unsigned char *)out->code)[19] << 8) != EM_AMDGPU_MACHINE) {
    hkc_rtc_set_log(out, "hiprtc output for %s is not an AMDGPU ELF code object", arch);
    goto fail;
  }
  if (hkc_comgr_kernel_resources(out->code, out->code_size, name, out, why, sizeof why) != 0) {
    hkc_rtc_set_log(out, "%s", why);
    goto fail;
  }
  return 0;
fail:
  free(out->code);
  out->code = NULL;
  out->code_size = 0;
  return -1;
}
