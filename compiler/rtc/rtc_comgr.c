/* SPDX-License-Identifier: Apache-2.0 */
/* AMD code-object manager (comgr), dlopen'ed: the ISAs this toolchain knows, kernel
 * resources from a code object's metadata, and disassembly. Types and enum values are
 * declared here from amd_comgr.h (comgr 2.x ABI) so the build needs no ROCm headers. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtc/rtc.h"
#include "rtc/rtc_amd_internal.h"
#include "util/util.h"

/* ---- the slice of the comgr ABI we use (values from amd_comgr.h, comgr 2.4) ---- */
typedef int comgr_status_t; /* AMD_COMGR_STATUS_SUCCESS = 0 */
typedef struct { uint64_t handle; } comgr_data_t;
typedef struct { uint64_t handle; } comgr_data_set_t;
typedef struct { uint64_t handle; } comgr_action_info_t;
typedef struct { uint64_t handle; } comgr_metadata_t;

enum {
  COMGR_SUCCESS = 0,
  COMGR_DATA_KIND_SOURCE = 0x1,
  COMGR_DATA_KIND_EXECUTABLE = 0x8,
  COMGR_ACTION_DISASSEMBLE_EXECUTABLE_TO_SOURCE = 0xC,
  COMGR_METADATA_KIND_STRING = 0x1,
  COMGR_METADATA_KIND_MAP = 0x2,
  COMGR_METADATA_KIND_LIST = 0x3,
};

/* Symbols, expanded once into the table and once into the dlsym loop. */
#define COMGR_SYMBOLS(X)                                                                                  \
  X(void, amd_comgr_get_version, (size_t *, size_t *))                                                    \
  X(comgr_status_t, amd_comgr_status_string, (comgr_status_t, const char **))                            \
  X(comgr_status_t, amd_comgr_get_isa_count, (size_t *))                                                 \
  X(comgr_status_t, amd_comgr_get_isa_name, (size_t, const char **))                                     \
  X(comgr_status_t, amd_comgr_create_data, (int, comgr_data_t *))                                        \
  X(comgr_status_t, amd_comgr_release_data, (comgr_data_t))                                              \
  X(comgr_status_t, amd_comgr_set_data, (comgr_data_t, size_t, const char *))                            \
  X(comgr_status_t, amd_comgr_set_data_name, (comgr_data_t, const char *))                               \
  X(comgr_status_t, amd_comgr_get_data, (comgr_data_t, size_t *, char *))                                \
  X(comgr_status_t, amd_comgr_get_data_metadata, (comgr_data_t, comgr_metadata_t *))                     \
  X(comgr_status_t, amd_comgr_destroy_metadata, (comgr_metadata_t))                                      \
  X(comgr_status_t, amd_comgr_create_data_set, (comgr_data_set_t *))                                     \
  X(comgr_status_t, amd_comgr_destroy_data_set, (comgr_data_set_t))                                      \
  X(comgr_status_t, amd_comgr_data_set_add, (comgr_data_set_t, comgr_data_t))                            \
  X(comgr_status_t, amd_comgr_action_data_count, (comgr_data_set_t, int, size_t *))                      \
  X(comgr_status_t, amd_comgr_action_data_get_data, (comgr_data_set_t, int, size_t, comgr_data_t *))     \
  X(comgr_status_t, amd_comgr_create_action_info, (comgr_action_info_t *))                               \
  X(comgr_status_t, amd_comgr_destroy_action_info, (comgr_action_info_t))                                \
  X(comgr_status_t, amd_comgr_action_info_set_isa_name, (comgr_action_info_t, const char *))             \
  X(comgr_status_t, amd_comgr_do_action, (int, comgr_action_info_t, comgr_data_set_t, comgr_data_set_t)) \
  X(comgr_status_t, amd_comgr_get_metadata_kind, (comgr_metadata_t, int *))                              \
  X(comgr_status_t, amd_comgr_get_metadata_string, (comgr_metadata_t, size_t *, char *))                 \
  X(comgr_status_t, amd_comgr_metadata_lookup, (comgr_metadata_t, const char *, comgr_metadata_t *))     \
  X(comgr_status_t, amd_comgr_get_metadata_list_size, (comgr_metadata_t, size_t *))                      \
  X(comgr_status_t, amd_comgr_index_list_metadata, (comgr_metadata_t, size_t, comgr_metadata_t *))

typedef struct comgr_api {
#define COMGR_MEMBER(ret, name, args) ret(*name) args;
  COMGR_SYMBOLS(COMGR_MEMBER)
#undef COMGR_MEMBER
} comgr_api_t;

static const char *const k_comgr_libs[] = {"libamd_comgr.so.2", "libamd_comgr.so.3", "libamd_comgr.so"};
#define COMGR_PACKAGE "libamd-comgr2 (Debian; or ROCm >= 6)"
#define COMGR_WHY_MAX 512 /* the load failure message: library list + package + dlerror */

/* Longest ISA name we accept ("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-" is 41). */
#define COMGR_ISA_NAME_MAX 128
/* A metadata string longer than this is not a kernel name or a number we want. */
#define COMGR_META_STRING_MAX 4096

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static comgr_api_t g_api;
static int g_ok;
static char g_why[COMGR_WHY_MAX];
static char g_version[32];

static void comgr_load(void) {
  void *lib = NULL;
  const char *err = "";
  for (size_t i = 0; i < sizeof k_comgr_libs / sizeof *k_comgr_libs && !lib; i++) {
    lib = dlopen(k_comgr_libs[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) err = dlerror();
  }
  if (!lib) {
    snprintf(g_why, sizeof g_why,
             "comgr not found (tried libamd_comgr.so.2, libamd_comgr.so.3, libamd_comgr.so: %s): "
             "install the package " COMGR_PACKAGE,
             err ? err : "");
    return;
  }
#define COMGR_LOAD(ret, name, args)                                                              \
  *(void **)&g_api.name = dlsym(lib, #name);                                                     \
  if (!g_api.name) {                                                                             \
    snprintf(g_why, sizeof g_why, "comgr lacks %s (comgr >= 2.0 needed): install " COMGR_PACKAGE, \
             #name);                                                                             \
    return;                                                                                      \
  }
  COMGR_SYMBOLS(COMGR_LOAD)
#undef COMGR_LOAD
  size_t major = 0, minor = 0;
  g_api.amd_comgr_get_version(&major, &minor);
  snprintf(g_version, sizeof g_version, "comgr %zu.%zu", major, minor);
  g_ok = 1; /* the library stays loaded for the life of the process */
}

int hkc_comgr_available(char *why, size_t why_size) {
  pthread_once(&g_once, comgr_load);
  if (g_ok) return 0;
  if (why && why_size) snprintf(why, why_size, "%s", g_why);
  return -1;
}

const char *hkc_comgr_version(void) {
  pthread_once(&g_once, comgr_load);
  return g_ok ? g_version : "";
}

static const char *status_name(comgr_status_t st) {
  const char *s = NULL;
  if (g_api.amd_comgr_status_string(st, &s) != COMGR_SUCCESS || !s) return "unknown comgr status";
  return s;
}

/* Appends s to the growing list of names (dedup), 0 / -1 on OOM. */
static int names_add(char ***names, size_t *count, size_t *cap, const char *s) {
  for (size_t i = 0; i < *count; i++)
    if (strcmp((*names)[i], s) == 0) return 0;
  if (hkc_reserve((void **)names, cap, *count + 1, sizeof **names) != 0) return -1;
  char *d = hkc_strdup(s);
  if (!d) return -1;
  (*names)[(*count)++] = d;
  return 0;
}

/* Every ISA comgr lists, as "gfx90a:sramecc+:xnack-" (the "amdgcn-amd-amdhsa--" prefix
 * removed), plus the bare processor name "gfx90a" once. */
int hkc_comgr_isa_list_local(char ***out_names, size_t *out_count, char *why, size_t why_size) {
  *out_names = NULL;
  *out_count = 0;
  if (hkc_comgr_available(why, why_size) != 0) return -1;
  static const char prefix[] = "amdgcn-amd-amdhsa--";
  size_t n = 0, count = 0, cap = 0;
  char **names = NULL;
  comgr_status_t st = g_api.amd_comgr_get_isa_count(&n);
  if (st != COMGR_SUCCESS) {
    snprintf(why, why_size, "amd_comgr_get_isa_count: %s", status_name(st));
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    const char *isa = NULL;
    if (g_api.amd_comgr_get_isa_name(i, &isa) != COMGR_SUCCESS || !isa) continue;
    if (strncmp(isa, prefix, sizeof prefix - 1) != 0) continue; /* only amdhsa targets build HIP */
    const char *full = isa + sizeof prefix - 1;
    char base[COMGR_ISA_NAME_MAX];
    size_t blen = strcspn(full, ":");
    if (blen == 0 || blen >= sizeof base || strlen(full) >= COMGR_ISA_NAME_MAX) continue;
    memcpy(base, full, blen);
    base[blen] = '\0';
    if (names_add(&names, &count, &cap, base) != 0 || names_add(&names, &count, &cap, full) != 0) {
      for (size_t k = 0; k < count; k++) free(names[k]);
      free(names);
      snprintf(why, why_size, "out of memory listing comgr ISAs");
      return -1;
    }
  }
  *out_names = names;
  *out_count = count;
  return 0;
}

/* A metadata string node's value, malloc'd; NULL when not a string (or too long). */
static char *meta_string(comgr_metadata_t node) {
  int kind = 0;
  size_t size = 0;
  if (g_api.amd_comgr_get_metadata_kind(node, &kind) != COMGR_SUCCESS || kind != COMGR_METADATA_KIND_STRING)
    return NULL;
  if (g_api.amd_comgr_get_metadata_string(node, &size, NULL) != COMGR_SUCCESS || size == 0 ||
      size > COMGR_META_STRING_MAX)
    return NULL;
  char *s = calloc(1, size + 1);
  if (s && g_api.amd_comgr_get_metadata_string(node, &size, s) != COMGR_SUCCESS) {
    free(s);
    return NULL;
  }
  return s;
}

/* The string under key in map, malloc'd, or NULL when absent. */
static char *meta_lookup_string(comgr_metadata_t map, const char *key) {
  comgr_metadata_t v;
  if (g_api.amd_comgr_metadata_lookup(map, key, &v) != COMGR_SUCCESS) return NULL;
  char *s = meta_string(v);
  g_api.amd_comgr_destroy_metadata(v);
  return s;
}

/* A numeric entry (comgr renders msgpack integers as decimal strings); 0 when absent. */
static uint32_t meta_lookup_u32(comgr_metadata_t map, const char *key) {
  char *s = meta_lookup_string(map, key);
  if (!s) return 0;
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 0);
  uint32_t r = (end != s && v <= UINT32_MAX) ? (uint32_t)v : 0;
  free(s);
  return r;
}

static int exec_data(const void *code, size_t size, comgr_data_t *out, char *why, size_t why_size) {
  comgr_status_t st = g_api.amd_comgr_create_data(COMGR_DATA_KIND_EXECUTABLE, out);
  if (st == COMGR_SUCCESS) {
    st = g_api.amd_comgr_set_data(*out, size, code);
    if (st == COMGR_SUCCESS) st = g_api.amd_comgr_set_data_name(*out, "hkc.co");
    if (st != COMGR_SUCCESS) g_api.amd_comgr_release_data(*out);
  }
  if (st != COMGR_SUCCESS) snprintf(why, why_size, "comgr cannot take the code object: %s", status_name(st));
  return st == COMGR_SUCCESS ? 0 : -1;
}

int hkc_comgr_kernel_resources(const void *code, size_t size, const char *name, hkc_rtc_result_t *out,
                               char *why, size_t why_size) {
  if (hkc_comgr_available(why, why_size) != 0) return -1;
  comgr_data_t data;
  if (exec_data(code, size, &data, why, why_size) != 0) return -1;
  comgr_metadata_t root, kernels;
  comgr_status_t st = g_api.amd_comgr_get_data_metadata(data, &root);
  if (st != COMGR_SUCCESS) {
    snprintf(why, why_size, "comgr cannot read the code object's metadata: %s", status_name(st));
    g_api.amd_comgr_release_data(data);
    return -1;
  }
  int rc = -1;
  size_t n = 0;
  char seen[256] = "";
  if (g_api.amd_comgr_metadata_lookup(root, "amdhsa.kernels", &kernels) != COMGR_SUCCESS) {
    snprintf(why, why_size, "code object metadata has no amdhsa.kernels (code object v2?)");
    goto done_root;
  }
  g_api.amd_comgr_get_metadata_list_size(kernels, &n);
  for (size_t i = 0; i < n && rc != 0; i++) {
    comgr_metadata_t k;
    if (g_api.amd_comgr_index_list_metadata(kernels, i, &k) != COMGR_SUCCESS) continue;
    char *kname = meta_lookup_string(k, ".name");
    if (kname && strcmp(kname, name) == 0) {
      out->vgprs = meta_lookup_u32(k, ".vgpr_count");
      out->agprs = meta_lookup_u32(k, ".agpr_count"); /* gfx90a+ only; absent -> 0 */
      out->sgprs = meta_lookup_u32(k, ".sgpr_count");
      out->shared_bytes = meta_lookup_u32(k, ".group_segment_fixed_size");
      out->scratch_bytes = meta_lookup_u32(k, ".private_segment_fixed_size");
      out->wave_size = meta_lookup_u32(k, ".wavefront_size");
      out->max_block = meta_lookup_u32(k, ".max_flat_workgroup_size");
      rc = 0;
    } else if (kname) {
      size_t used = strlen(seen);
      snprintf(seen + used, sizeof seen - used, "%s%s", used ? ", " : "", kname);
    }
    free(kname);
    g_api.amd_comgr_destroy_metadata(k);
  }
  if (rc != 0)
    snprintf(why, why_size, "kernel '%s' not in the code object (it has: %s); is it extern \"C\"?", name,
             seen[0] ? seen : "no kernels");
  g_api.amd_comgr_destroy_metadata(kernels);
done_root:
  g_api.amd_comgr_destroy_metadata(root);
  g_api.amd_comgr_release_data(data);
  return rc;
}

/* Disassembles through DISASSEMBLE_EXECUTABLE_TO_SOURCE for "amdgcn-amd-amdhsa--<arch>". */
int hkc_comgr_disassemble_local(const void *code, size_t size, const char *arch, char **out_text, char *why,
                                size_t why_size) {
  *out_text = NULL;
  if (hkc_comgr_available(why, why_size) != 0) return -1;
  char isa[COMGR_ISA_NAME_MAX];
  if (snprintf(isa, sizeof isa, "amdgcn-amd-amdhsa--%s", arch) >= (int)sizeof isa) {
    snprintf(why, why_size, "arch name too long: %s", arch);
    return -1;
  }
  comgr_data_t data;
  if (exec_data(code, size, &data, why, why_size) != 0) return -1;
  comgr_data_set_t in = {0}, outset = {0};
  comgr_action_info_t info = {0};
  int have_in = 0, have_out = 0, have_info = 0, rc = -1;
  comgr_status_t st = g_api.amd_comgr_create_data_set(&in);
  have_in = st == COMGR_SUCCESS;
  if (st == COMGR_SUCCESS) st = g_api.amd_comgr_data_set_add(in, data);
  if (st == COMGR_SUCCESS) st = g_api.amd_comgr_create_data_set(&outset);
  have_out = have_in && st == COMGR_SUCCESS;
  if (st == COMGR_SUCCESS) st = g_api.amd_comgr_create_action_info(&info);
  have_info = have_out && st == COMGR_SUCCESS;
  if (st == COMGR_SUCCESS) st = g_api.amd_comgr_action_info_set_isa_name(info, isa);
  if (st == COMGR_SUCCESS)
    st = g_api.amd_comgr_do_action(COMGR_ACTION_DISASSEMBLE_EXECUTABLE_TO_SOURCE, info, in, outset);
  if (st != COMGR_SUCCESS) {
    snprintf(why, why_size, "comgr disassembly for %s failed: %s", isa, status_name(st));
  } else {
    size_t count = 0;
    comgr_data_t text;
    if (g_api.amd_comgr_action_data_count(outset, COMGR_DATA_KIND_SOURCE, &count) != COMGR_SUCCESS ||
        count == 0 ||
        g_api.amd_comgr_action_data_get_data(outset, COMGR_DATA_KIND_SOURCE, 0, &text) != COMGR_SUCCESS) {
      snprintf(why, why_size, "comgr disassembly for %s produced no text", isa);
    } else {
      size_t len = 0;
      char *buf = NULL;
      if (g_api.amd_comgr_get_data(text, &len, NULL) == COMGR_SUCCESS && (buf = malloc(len + 1)) &&
          g_api.amd_comgr_get_data(text, &len, buf) == COMGR_SUCCESS) {
        buf[len] = '\0';
        *out_text = buf;
        rc = 0;
      } else {
        free(buf);
        snprintf(why, why_size, "cannot read comgr's disassembly (out of memory?)");
      }
      g_api.amd_comgr_release_data(text);
    }
  }
  if (have_info) g_api.amd_comgr_destroy_action_info(info);
  if (have_out) g_api.amd_comgr_destroy_data_set(outset);
  if (have_in) g_api.amd_comgr_destroy_data_set(in);
  g_api.amd_comgr_release_data(data);
  return rc;
}
