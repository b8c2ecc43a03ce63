/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA and HIP backends: (a) on a machine without the GPU or its runtime, named GPU
 * targets are UNAVAILABLE with the reason and automatic choice falls back to host;
 * (b) the target matching rules and the ISA-name scan as pure functions; (c) whole
 * sessions of the GPU core through each vendor's table, against a fake CUDA driver and a
 * fake HIP runtime installed through the symbol-table overrides (graph built once with
 * the stored edges, params refreshed only after a bind, stream launches asked for and as
 * the reported fallback, graph mode's error, profiling with events, copies, injected
 * driver errors, padded batches: staging zeroed and copied on the run's stream around the
 * graph launch; CUDA's v1 graph calls; TMA tensor map arguments: encoded from the bound,
 * staging and workspace addresses, the kernel parameter pointing at the map, re-encoded and
 * refreshed after a bind, a driver without the encoder refused at create; launch extents: a
 * launch whose arguments overrun a tensor refused before its code reaches the driver); (d) a
 * real device, skipped unless one is present. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend.h"
#include "gpu_internal.h"
#include "image_internal.h"
#include "hk/hkrt.h"
#include "pack_fixture.h"
#include "pack_internal.h"
#include "pack_refix.h"
#include "session_internal.h"
#include "test_util.h"

#if defined(__has_include)
#if __has_include(<hip/hip_runtime_api.h>)
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
#define HAVE_HIP_HEADER 1
#endif
#endif

/* ---- fixture: the pack_fixture pipeline for sm_90 / gfx90a / host ------------------------- */
#define ELF_SIZE 64
static uint8_t g_cubins[2 * ELF_SIZE]; /* two minimal ELF64 objects: enough for the fake driver */
static uint8_t g_amd_objects[2 * ELF_SIZE]; /* the same with e_machine AMDGPU (the loader checks it) */

typedef struct {
  fx_t fx;
  hkc_target_out_t targets[3];
  void *bytes;
  hk_pack_t *pack;
  char diag[4096];
} state_t;

static int setup(void **ts) {
  state_t *st = calloc(1, sizeof *st);
  *ts = st;
  hkc_diag_capture(st->diag, sizeof st->diag);
  static const char host_code[] = "host code: never loaded in these tests";
  fx_init(&st->fx, host_code, sizeof host_code, 1);
  for (int i = 0; i < 2; i++) {
    memset(g_cubins + i * ELF_SIZE, 0, ELF_SIZE);
    memcpy(g_cubins + i * ELF_SIZE, "\x7f" "ELF\x02\x01\x01", 7);
    g_cubins[i * ELF_SIZE + 18] = (uint8_t)HK_EM_CUDA;
    memcpy(g_amd_objects + i * ELF_SIZE, g_cubins + i * ELF_SIZE, ELF_SIZE);
    g_amd_objects[i * ELF_SIZE + 18] = (uint8_t)HK_EM_AMDGPU;
  }
  hkc_target_out_t *cuda = &st->targets[0], *hip = &st->targets[1], *host = &st->targets[2];
  *cuda = st->fx.targets[1];
  cuda->code = g_cubins;
  cuda->code_size = sizeof g_cubins;
  for (int k = 0; k < 2; k++) {
    st->fx.kernels_cuda[k].code_offset = (uint64_t)k * ELF_SIZE;
    st->fx.kernels_cuda[k].code_size = ELF_SIZE;
  }
  *hip = *cuda;
  snprintf(hip->name, sizeof hip->name, "gfx90a");
  hip->kind = HK_TARGET_HIP;
  hip->code = g_amd_objects;
  *host = st->fx.targets[0];
  st->fx.in.targets = st->targets;
  st->fx.in.n_targets = 3;
  return 0;
}

static int teardown(void **ts) {
  state_t *st = *ts;
  hk_pack_destroy(st->pack);
  free(st->bytes);
  hkc_diag_capture(NULL, 0);
  hk_cuda_override_symbols(NULL);
  hk_hip_override_symbols(NULL);
  hk_nccl_override_symbols(NULL);
  hk_rccl_override_symbols(NULL);
  free(st);
  return 0;
}

/* Writes st->fx.in (targets [first, first + n) of st->targets) and opens it as st->pack. */
static hk_pack_t *open_pack(state_t *st, uint32_t first, uint32_t n) {
  hk_pack_destroy(st->pack);
  free(st->bytes);
  st->pack = NULL;
  st->fx.in.targets = &st->targets[first];
  st->fx.in.n_targets = n;
  size_t size;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &st->bytes, &size), 0);
  assert_int_equal(hk_test_open_memory(st->bytes, size, NULL, &st->pack), HK_OK);
  return st->pack;
}

/* ---- (a) no GPU here ---------------------------------------------------------------------- */
static void test_gpu_targets_unavailable(void **ts) {
  state_t *st = *ts;
  if (hk_backend_cuda.available() || hk_backend_hip.available()) {
    fprintf(stderr, "a GPU runtime and device are present: this test is for machines without one\n");
    skip();
  }
  hk_pack_t *pack = open_pack(st, 0, 3);
  hk_session_t *s = NULL;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .target = "sm_90"), &s),
                   HK_STATUS_UNAVAILABLE);
  assert_null(s);
  const char *e = hk_last_error();
  assert_non_null(strstr(e, "target sm_90 cannot run on this machine: "));
  assert_true(strstr(e, "libcuda.so.1 not found") || strstr(e, "no NVIDIA GPU found") || strstr(e, "cuInit failed"));
  assert_non_null(strstr(e, "the artifact has [sm_90, gfx90a, " FX_HOST "]; this machine runs [" FX_HOST "]"));
  assert_non_null(strstr(hk_pack_error(pack), "sm_90 cannot run"));

  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .target = "gfx90a"), &s),
                   HK_STATUS_UNAVAILABLE);
  e = hk_last_error();
  assert_true(strstr(e, "no AMD GPU found: hipGetDeviceCount returned hipErrorNoDevice") ||
              strstr(e, "libamdhip64.so.5 and libamdhip64.so not found"));
  fprintf(stderr, "  gfx90a: %s\n", e);

  /* Automatic choice: host when the artifact has it ... */
  const char *name;
  assert_int_equal(hk_pack_select_target(pack, NULL, &name), HK_OK);
  assert_string_equal(name, FX_HOST);
  /* ... and both sides listed when it does not. */
  pack = open_pack(st, 0, 2);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_NO_COMPATIBLE_TARGET);
  assert_non_null(strstr(hk_last_error(), "no target of the artifact runs on this machine; the artifact has "
                                          "[sm_90, gfx90a]; this machine runs [" FX_HOST "]"));
  /* Backend-level: nothing runs, describe says nothing, the reason is kept. */
  assert_int_equal(hk_backend_hip.runs_target("gfx90a", "", 0), 0);
  assert_true(hk_backend_hip.unavailable_reason()[0] != '\0');
}

/* ---- (b) pure rules ------------------------------------------------------------------------ */
static void test_cuda_target_rank(void **ts) {
  (void)ts;
  assert_true(hk_cuda_target_rank("sm_80", "", 8, 6) > 0);  /* older minor, same major */
  assert_int_equal(hk_cuda_target_rank("sm_80", "", 9, 0), 0); /* cubins do not cross majors */
  assert_int_equal(hk_cuda_target_rank("sm_86", "", 8, 0), 0); /* nor run on an older minor */
  assert_int_equal(hk_cuda_target_rank("sm_90a", "", 9, 0), 3);
  assert_int_equal(hk_cuda_target_rank("sm_90", "", 9, 0), 2);
  assert_int_equal(hk_cuda_target_rank("sm_80", "", 8, 6), 1);
  assert_int_equal(hk_cuda_target_rank("sm_86a", "", 8, 9), 0); /* arch-specific: exact only */
  assert_int_equal(hk_cuda_target_rank("sm_90a", "", 10, 0), 0);
  assert_int_equal(hk_cuda_target_rank("sm_100", "", 10, 3), 1);
  assert_int_equal(hk_cuda_target_rank("sm_100f", "", 10, 3), 1);
  assert_int_equal(hk_cuda_target_rank("sm_120a", "", 12, 0), 3);
  assert_int_equal(hk_cuda_target_rank("sm_90", "", 10, 0), 0);
  /* malformed names and features never match */
  assert_int_equal(hk_cuda_target_rank("sm_9", "", 0, 9), 0);
  assert_int_equal(hk_cuda_target_rank("sm_90b", "", 9, 0), 0);
  assert_int_equal(hk_cuda_target_rank("sm_90aa", "", 9, 0), 0);
  assert_int_equal(hk_cuda_target_rank("gfx90a", "", 9, 0), 0);
  assert_int_equal(hk_cuda_target_rank("sm_90", "xnack-", 9, 0), 0);
  assert_int_equal(hk_cuda_target_rank("sm_", "", 9, 0), 0);
}

static void test_cuda_ptx_rank(void **ts) {
  (void)ts;
  assert_int_equal(hk_cuda_ptx_rank("sm_80", 9, 0), 80);  /* PTX runs on every later GPU */
  assert_int_equal(hk_cuda_ptx_rank("sm_80", 8, 0), 80);
  assert_int_equal(hk_cuda_ptx_rank("sm_80", 12, 1), 80);
  assert_int_equal(hk_cuda_ptx_rank("sm_86", 8, 0), 0);   /* not on an older one */
  assert_int_equal(hk_cuda_ptx_rank("sm_90", 8, 9), 0);
  assert_int_equal(hk_cuda_ptx_rank("sm_90a", 9, 0), 90); /* arch-specific: that GPU only */
  assert_int_equal(hk_cuda_ptx_rank("sm_90a", 10, 0), 0);
  assert_int_equal(hk_cuda_ptx_rank("sm_100f", 10, 3), 100); /* family: same major */
  assert_int_equal(hk_cuda_ptx_rank("sm_100f", 12, 0), 0);
  assert_int_equal(hk_cuda_ptx_rank("sm_100", 9, 0), 0);
  assert_int_equal(hk_cuda_ptx_rank("sm_9", 9, 0), 0);
  assert_int_equal(hk_cuda_ptx_rank("sm_90b", 9, 0), 0);
  assert_int_equal(hk_cuda_ptx_rank("gfx90a", 9, 0), 0);
  /* a PTX text is NUL-terminated at its end and nowhere else */
  const char *why = NULL;
  assert_true(hk_ptx_text_ok(".version 8.0\n", 14, &why));
  assert_false(hk_ptx_text_ok("", 1, &why));
  assert_false(hk_ptx_text_ok(".version 8.0\n", 13, &why));
  assert_string_equal(why, "PTX text is not NUL-terminated at the end of its range");
  assert_false(hk_ptx_text_ok(".vers\0on 8.0\n", 14, &why));
}

static void test_hip_target_rank(void **ts) {
  (void)ts;
  static const struct {
    const char *name, *features, *device;
    int rank;
  } cases[] = {
      {"gfx90a", "sramecc+:xnack-", "gfx90a:sramecc+:xnack-", 2}, /* exact */
      {"gfx90a", "xnack-:sramecc+", "gfx90a:sramecc+:xnack-", 2}, /* order does not matter */
      {"gfx90a:sramecc+:xnack-", "", "gfx90a:sramecc+:xnack-", 2}, /* features in the name */
      {"gfx90a", "", "gfx90a:sramecc+:xnack-", 1},                /* "any": compatible */
      {"gfx90a", "", "gfx90a:sramecc+:xnack+", 1},
      {"gfx90a", "xnack-", "gfx90a:sramecc+:xnack-", 1},          /* sramecc any */
      {"gfx90a:xnack-", "", "gfx90a:sramecc+:xnack+", 0},         /* contradicts the device */
      {"gfx90a", "xnack+", "gfx90a:sramecc+:xnack-", 0},
      {"gfx90a", "", "gfx908:sramecc+:xnack-", 0},                /* other processor */
      {"gfx908", "", "gfx90a:sramecc+:xnack-", 0},
      {"gfx1030", "", "gfx1030", 2},                              /* no features at all */
      {"gfx1030", "xnack-", "gfx1030", 0},                        /* the device has no xnack */
      {"gfx90", "", "gfx90a:xnack-", 0},                          /* prefix is not a match */
      {"gfx90a", "xnack", "gfx90a:xnack-", 0},                    /* malformed feature */
      {"gfx90a", "xnack-:xnack+", "gfx90a:xnack-", 0},            /* duplicate */
      {"gfx90a", "", "", 0},                                      /* unknown device ISA */
      {"sm_90", "", "gfx90a", 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int r = hk_hip_target_rank(cases[i].name, cases[i].features, cases[i].device);
    if (r != cases[i].rank)
      fail_msg("case %zu: %s + \"%s\" on %s: rank %d, expected %d", i, cases[i].name, cases[i].features,
               cases[i].device, r, cases[i].rank);
  }
}

static void test_hip_arch_name_scan(void **ts) {
  (void)ts;
  char out[128];
  uint8_t *buf = calloc(1, HK_HIP_PROPS_BUFFER);
  assert_non_null(buf);
  /* Synthetic layout: a marketing name first, random-looking bytes, the ISA further on. */
  strcpy((char *)buf, "AMD Instinct MI210");
  memcpy(buf + 300, "\x13gfx9\x01\xff", 7); /* not NUL-terminated after a valid shape */
  strcpy((char *)buf + 1100, "gfx942:sramecc+:xnack-");
  assert_true(hk_hip_find_arch_name(buf, HK_HIP_PROPS_BUFFER, out, sizeof out));
  assert_string_equal(out, "gfx942:sramecc+:xnack-");
  /* The longest candidate wins (a name that is itself "gfx90a" loses to the full ISA). */
  memset(buf, 0, HK_HIP_PROPS_BUFFER);
  strcpy((char *)buf, "gfx90a");
  strcpy((char *)buf + 396, "gfx90a:sramecc+:xnack-");
  assert_true(hk_hip_find_arch_name(buf, HK_HIP_PROPS_BUFFER, out, sizeof out));
  assert_string_equal(out, "gfx90a:sramecc+:xnack-");
  memset(buf, 0, HK_HIP_PROPS_BUFFER);
  strcpy((char *)buf, "AMD Radeon gfxx");
  assert_false(hk_hip_find_arch_name(buf, HK_HIP_PROPS_BUFFER, out, sizeof out));
#ifdef HAVE_HIP_HEADER
  /* The installed ROCm's own layout. */
  hipDeviceProp_t *p = (hipDeviceProp_t *)buf;
  memset(buf, 0, HK_HIP_PROPS_BUFFER);
  assert_true(sizeof *p < HK_HIP_PROPS_BUFFER);
  strcpy(p->name, "AMD Instinct MI210");
  p->gcnArch = 910;
  p->totalGlobalMem = (size_t)64 << 30;
  p->major = 9;
  p->minor = 0;
  strcpy(p->gcnArchName, "gfx90a:sramecc+:xnack-");
  assert_true(hk_hip_find_arch_name(buf, HK_HIP_PROPS_BUFFER, out, sizeof out));
  assert_string_equal(out, "gfx90a:sramecc+:xnack-");
#else
  fprintf(stderr, "no ROCm header here: the installed hipDeviceProp_t layout is not checked\n");
#endif
  free(buf);
}

static void test_image_check(void **ts) {
  (void)ts;
  const char *why;
  uint8_t elf[256] = {0};
  memcpy(elf, "\x7f" "ELF\x02\x01\x01", 7);
  assert_true(hk_gpu_image_ok(elf, sizeof elf, false, 0, &why));
  assert_false(hk_gpu_image_ok(elf, 40, false, 0, &why));
  assert_non_null(strstr(why, "truncated"));
  /* one section header at 128 whose bytes run past the end */
  elf[40] = 128;              /* e_shoff */
  elf[58] = 64;               /* e_shentsize */
  elf[60] = 1;                /* e_shnum */
  elf[128 + 4] = 1;           /* sh_type PROGBITS */
  elf[128 + 24] = 200;        /* sh_offset */
  elf[128 + 32] = 100;        /* sh_size: 200 + 100 > 256 */
  assert_false(hk_gpu_image_ok(elf, sizeof elf, false, 0, &why));
  assert_non_null(strstr(why, "section"));
  elf[128 + 32] = 56;
  assert_true(hk_gpu_image_ok(elf, sizeof elf, false, 0, &why));
  elf[60] = 3; /* section table past the end */
  assert_false(hk_gpu_image_ok(elf, sizeof elf, false, 0, &why));
  assert_false(hk_gpu_image_ok("not a cubin, just bytes", 24, false, 0, &why));
  assert_non_null(strstr(why, "not an ELF cubin"));
  uint8_t bundle[64] = "__CLANG_OFFLOAD_BUNDLE__";
  bundle[24] = 1; /* one entry: offset 0 size 8, id of 200 bytes: out of range */
  bundle[48] = 200;
  assert_false(hk_gpu_image_ok(bundle, sizeof bundle, true, 0, &why));
  bundle[48] = 4;
  bundle[40] = 8;
  assert_true(hk_gpu_image_ok(bundle, sizeof bundle, true, 0, &why));
  assert_false(hk_gpu_image_ok(bundle, sizeof bundle, false, 0, &why));

  /* The object's machine must be the target's (not only its bounds). */
  elf[60] = 1;
  elf[18] = (uint8_t)HK_EM_AMDGPU;
  assert_true(hk_gpu_image_ok(elf, sizeof elf, true, HK_EM_AMDGPU, &why));
  assert_false(hk_gpu_image_ok(elf, sizeof elf, false, HK_EM_CUDA, &why));
  assert_non_null(strstr(why, "another machine"));
  elf[4] = 1; /* ELFCLASS32 */
  assert_false(hk_gpu_image_ok(elf, sizeof elf, true, HK_EM_AMDGPU, &why));
  assert_non_null(strstr(why, "64-bit"));
  elf[4] = 2;
  /* a loadable segment whose file bytes run past the end (a truncated object) */
  elf[32] = 64;   /* e_phoff */
  elf[54] = 56;   /* e_phentsize */
  elf[56] = 1;    /* e_phnum */
  elf[64] = 1;    /* p_type PT_LOAD */
  elf[64 + 8] = 0; /* p_offset */
  elf[64 + 32] = 255, elf[64 + 33] = 1; /* p_filesz 511 > 256 */
  elf[64 + 40] = 255, elf[64 + 41] = 1; /* p_memsz */
  assert_false(hk_gpu_image_ok(elf, sizeof elf, true, HK_EM_AMDGPU, &why));
  assert_non_null(strstr(why, "segment"));
  elf[64 + 33] = 0, elf[64 + 41] = 0;
  assert_true(hk_gpu_image_ok(elf, sizeof elf, true, HK_EM_AMDGPU, &why));
}

/* ---- (c) fake CUDA and HIP runtimes -------------------------------------------------------------
 * One fake device (F) behind two symbol tables: the CUDA driver's and the HIP runtime's,
 * installed through hk_cuda_override_symbols / hk_hip_override_symbols. Handles are small
 * integers; device memory is malloc. The session tests below run through each table (the
 * GPU core with each vendor's ops). Error codes have the same numbers in both APIs. */
#define FAKE_MAX_NODES 16
#define FAKE_OOM 2          /* CUDA_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory */
#define FAKE_NO_DEVICE 100  /* CUDA_ERROR_NO_DEVICE, hipErrorNoDevice */
#define FAKE_BAD_IMAGE 200  /* CUDA_ERROR_INVALID_IMAGE, hipErrorInvalidImage */
#define FAKE_NOT_FOUND 500  /* CUDA_ERROR_NOT_FOUND, hipErrorNotFound */
#define FAKE_UNKNOWN 999    /* CUDA_ERROR_UNKNOWN, hipErrorUnknown */
#define FAKE_FN(i) ((uintptr_t)0x100 + (uintptr_t)(i))
#define FAKE_NODE(i) ((uintptr_t)0x200 + (uintptr_t)(i))
#define FAKE_GRAPH ((uintptr_t)0x300)
#define FAKE_EXEC ((uintptr_t)0x400)
#define FAKE_CTX ((uintptr_t)0x500)
#define FAKE_EVENT(i) ((uintptr_t)0x900 + (uintptr_t)(i))

/* One cuLaunchKernelEx call as the fake driver saw it. */
typedef struct fake_ex {
  unsigned grid[3], block[3], shared, num_attrs;
  void *stream;
  int attr_id, attr_value;
  bool attr_rest_zero; /* the attribute's padding and the value's other 60 bytes */
  void *arg0;          /* value of the first (tensor) argument */
} fake_ex_t;

static struct {
  /* knobs */
  int device_count, major, minor;  /* CUDA: compute capability */
  const char *isa;                 /* HIP: the device's ISA name */
  int fail_alloc, fail_instantiate, fail_graph_create;
  const char *missing_kernel;
  /* counters */
  int ptx_loads; /* CUDA: images that were PTX text (also counted in loads) */
  int loads, unloads, retains, releases, allocs, frees, graph_creates, graph_destroys, exec_destroys;
  int instantiates, graph_launches, set_params, kernel_launches, device_syncs, stream_syncs;
  int v1_calls; /* CUDA: graph calls through the v1 node-parameter layout */
  /* the graph as built */
  int node_count;
  struct {
    uintptr_t func;
    int deps[4];
    size_t ndeps;
    unsigned grid_x;
    void *arg0; /* value of the first (tensor) argument at the last add/set */
  } nodes[FAKE_MAX_NODES];
  uintptr_t launched[FAKE_MAX_NODES];
  void *launched_arg0[FAKE_MAX_NODES];
  void *last_stream;
  /* events: a fake device clock that each kernel launch advances */
  double clock_ms;
  int events_created, events_destroyed, event_syncs, event_stream_mismatch;
  double event_ms[FAKE_MAX_NODES];
  /* stream operations in order: 'z' memset, 'c' device copy, 'g' graph launch */
  int ops;
  struct {
    char kind;
    void *dst;
    const void *src;
    size_t bytes;
    void *stream;
  } op[32];
  uintptr_t current; /* CUDA: the current context; HIP: the current device + 1 */
  /* TMA tensor maps (CUDA): cuTensorMapEncodeTiled's calls, and what launch 0 (hk_test_addc)
   * received as its argument tmap_arg (0: not watched) at the last graph node add/set or
   * stream launch */
  int fail_encode;
  int encodes;
  struct {
    int dtype, interleave, swizzle, l2, oob;
    uint32_t rank, box[2], estr[2];
    void *addr, *map;
    uint64_t dims[2], stride;
  } enc[16];
  int tmap_arg;
  const void *tmap_param; /* the parameter pointer */
  uint8_t tmap_bytes[128];  /* the 128 bytes it pointed at */
  /* programmatic dependent launch (CUDA): cuLaunchKernelEx's calls (each also a kernel
   * launch above, launched_ex[i] set) and cuGraphAddDependencies_v2's edges */
  int ex_launches;
  bool launched_ex[FAKE_MAX_NODES];
  fake_ex_t ex[FAKE_MAX_NODES];
  int fail_add_deps, add_deps_calls, n_edges;
  struct {
    int from, to;
    hk_cu_graph_edge_data_t data;
  } edges[FAKE_MAX_NODES];
} F;

static const char *fake_kernels[] = {"hk_test_addc", "hk_test_mul"};

static void fake_reset(void) {
  memset(&F, 0, sizeof F);
  F.device_count = 1;
  F.major = 9;
  F.minor = 0;
  F.isa = "gfx90a:sramecc+:xnack-";
}

static void fake_op(char kind, void *dst, const void *src, size_t bytes, void *stream) {
  if (F.ops < 32) {
    F.op[F.ops].kind = kind;
    F.op[F.ops].dst = dst;
    F.op[F.ops].src = src;
    F.op[F.ops].bytes = bytes;
    F.op[F.ops].stream = stream;
  }
  F.ops++;
}

/* What both APIs do, on plain values; the vendor functions below convert. */
static int dev_load(const void *image, uintptr_t *out) {
  if (memcmp(image, ".version", 8) == 0) F.ptx_loads++; /* PTX text: the driver JIT-compiles it */
  else if (memcmp(image, "\x7f" "ELF", 4) != 0) return FAKE_BAD_IMAGE;
  F.loads++;
  *out = 0x600 + (uintptr_t)F.loads;
  return 0;
}
static int dev_function(const char *name, uintptr_t *out) {
  if (F.missing_kernel && strcmp(name, F.missing_kernel) == 0) return FAKE_NOT_FOUND;
  for (int i = 0; i < 2; i++)
    if (strcmp(name, fake_kernels[i]) == 0) {
      *out = FAKE_FN(i);
      return 0;
    }
  return FAKE_NOT_FOUND;
}
static int dev_alloc(void **p, size_t bytes) {
  if (F.fail_alloc) return F.fail_alloc;
  if (!(*p = malloc(bytes))) return FAKE_OOM;
  F.allocs++;
  return 0;
}
static int dev_free(void *p) {
  F.frees++;
  free(p);
  return 0;
}
/* Launch 0's tensor map argument, as a launch or a graph node got it. */
static void watch_tmap(void **params) {
  if (!F.tmap_arg) return;
  F.tmap_param = params[F.tmap_arg];
  memcpy(F.tmap_bytes, F.tmap_param, sizeof F.tmap_bytes);
}
static int dev_launch(uintptr_t f, void **params, void *stream) {
  if (f == FAKE_FN(0)) watch_tmap(params);
  if (F.kernel_launches < FAKE_MAX_NODES) {
    F.launched[F.kernel_launches] = f;
    F.launched_arg0[F.kernel_launches] = *(void **)params[0];
  }
  F.kernel_launches++;
  F.last_stream = stream;
  F.clock_ms += 0.002 * (double)(f - FAKE_FN(0) + 1); /* kernel i takes 2*(i+1) us */
  return 0;
}
static int dev_graph_create(uintptr_t *g, unsigned flags) {
  if (F.fail_graph_create) return F.fail_graph_create;
  F.graph_creates++;
  F.node_count = 0;
  *g = flags == 0 ? FAKE_GRAPH : 0;
  return 0;
}
/* deps: the dependency handles, as the driver got them (read through the vendor's type). */
static int dev_add_node(uintptr_t *node, uintptr_t g, const uintptr_t *deps, size_t ndeps, uintptr_t func,
                        unsigned grid_x, void **params, bool extras_clear) {
  if (g != FAKE_GRAPH || F.node_count == FAKE_MAX_NODES || ndeps > 4) return 1;
  int i = F.node_count++;
  F.nodes[i].func = func;
  F.nodes[i].ndeps = ndeps;
  F.nodes[i].grid_x = grid_x;
  for (size_t d = 0; d < ndeps; d++) F.nodes[i].deps[d] = (int)(deps[d] - FAKE_NODE(0));
  F.nodes[i].arg0 = *(void **)params[0];
  if (func == FAKE_FN(0)) watch_tmap(params);
  *node = FAKE_NODE(i);
  return extras_clear ? 0 : 1;
}
static int dev_instantiate(uintptr_t *e, uintptr_t g) {
  F.instantiates++;
  if (F.fail_instantiate) return F.fail_instantiate;
  *e = g == FAKE_GRAPH ? FAKE_EXEC : 0;
  return 0;
}
static int dev_graph_launch(uintptr_t e, void *stream) {
  fake_op('g', NULL, NULL, 0, stream);
  F.graph_launches++;
  F.last_stream = stream;
  return e == FAKE_EXEC ? 0 : 1;
}
static int dev_set_params(uintptr_t e, uintptr_t n, uintptr_t func, void **params) {
  int i = (int)(n - FAKE_NODE(0));
  if (e != FAKE_EXEC || i < 0 || i >= F.node_count || F.nodes[i].func != func) return 1;
  F.set_params++;
  F.nodes[i].arg0 = *(void **)params[0];
  if (func == FAKE_FN(0)) watch_tmap(params);
  return 0;
}
static int dev_event_index(uintptr_t e) {
  int i = (int)(e - FAKE_EVENT(0));
  return i >= 0 && i < F.events_created ? i : -1;
}
static int dev_event_create(uintptr_t *e) {
  if (F.events_created == FAKE_MAX_NODES) return 1;
  *e = FAKE_EVENT(F.events_created++);
  return 0;
}
static int dev_event_record(uintptr_t e, void *stream) {
  int i = dev_event_index(e);
  if (i < 0) return 400;
  if (stream != F.last_stream && F.kernel_launches) F.event_stream_mismatch++;
  F.event_ms[i] = F.clock_ms;
  return 0;
}
static int dev_event_sync(uintptr_t e) {
  F.event_syncs++;
  return dev_event_index(e) < 0 ? 400 : 0;
}
static int dev_event_elapsed(float *ms, uintptr_t a, uintptr_t b) {
  int i = dev_event_index(a), j = dev_event_index(b);
  if (i < 0 || j < 0) return 400;
  *ms = (float)(F.event_ms[j] - F.event_ms[i]);
  return 0;
}
static int dev_event_destroy(uintptr_t e) {
  F.events_destroyed++;
  return dev_event_index(e) < 0 ? 400 : 0;
}
static const char *dev_error_string(int r) {
  return r == FAKE_OOM ? "out of memory" : r == FAKE_NOT_FOUND ? "named symbol not found" : "unknown error";
}

/* ---- the CUDA driver ---- */
#define U(h) ((uintptr_t)(h))
static hk_cu_result_t f_cuInit(unsigned int flags) { return flags == 0 ? 0 : 1; }
static hk_cu_result_t f_cuDeviceGetCount(int *n) { *n = F.device_count; return F.device_count ? 0 : FAKE_NO_DEVICE; }
static hk_cu_result_t f_cuDeviceGet(hk_cu_device_t *d, int i) { *d = i; return i < F.device_count ? 0 : 101; }
static hk_cu_result_t f_cuDeviceGetAttribute(int *v, int attr, hk_cu_device_t d) {
  (void)d;
  if (attr == HK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) *v = F.major;
  else if (attr == HK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR) *v = F.minor;
  else return 1;
  return 0;
}
static hk_cu_result_t f_cuDeviceGetName(char *name, int len, hk_cu_device_t d) {
  (void)d;
  snprintf(name, (size_t)len, "Fake H200");
  return 0;
}
static hk_cu_result_t f_cuDevicePrimaryCtxRetain(hk_cu_context_t *c, hk_cu_device_t d) {
  (void)d;
  F.retains++;
  *c = (hk_cu_context_t)FAKE_CTX;
  return 0;
}
static hk_cu_result_t f_cuDevicePrimaryCtxRelease(hk_cu_device_t d) { (void)d; F.releases++; return 0; }
static hk_cu_result_t f_cuCtxSetCurrent(hk_cu_context_t c) { F.current = U(c); return 0; }
static hk_cu_result_t f_cuCtxGetCurrent(hk_cu_context_t *c) { *c = (hk_cu_context_t)F.current; return 0; }
static hk_cu_result_t f_cuCtxSynchronize(void) { F.device_syncs++; return F.current == FAKE_CTX ? 0 : 201; }
static hk_cu_result_t f_cuModuleLoadData(hk_cu_module_t *m, const void *image) {
  uintptr_t h = 0;
  int r = dev_load(image, &h);
  *m = (hk_cu_module_t)h;
  return r;
}
static hk_cu_result_t f_cuModuleUnload(hk_cu_module_t m) { (void)m; F.unloads++; return 0; }
static hk_cu_result_t f_cuModuleGetFunction(hk_cu_function_t *fn, hk_cu_module_t m, const char *name) {
  (void)m;
  uintptr_t h = 0;
  int r = dev_function(name, &h);
  *fn = (hk_cu_function_t)h;
  return r;
}
static hk_cu_result_t f_cuMemAlloc(hk_cu_deviceptr_t *p, size_t bytes) {
  void *m = NULL;
  int r = dev_alloc(&m, bytes);
  if (r == 0) *p = (hk_cu_deviceptr_t)(uintptr_t)m;
  return r;
}
static hk_cu_result_t f_cuMemFree(hk_cu_deviceptr_t p) { return dev_free((void *)(uintptr_t)p); }
static hk_cu_result_t f_cuMemcpyHtoD(hk_cu_deviceptr_t d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); return 0; }
static hk_cu_result_t f_cuMemcpyDtoH(void *d, hk_cu_deviceptr_t s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); return 0; }
static hk_cu_result_t f_cuMemcpyDtoD(hk_cu_deviceptr_t d, hk_cu_deviceptr_t s, size_t n) {
  memcpy((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
  return 0;
}
static hk_cu_result_t f_cuMemcpyDtoDAsync(hk_cu_deviceptr_t d, hk_cu_deviceptr_t s, size_t n, hk_cu_stream_t stream) {
  fake_op('c', (void *)(uintptr_t)d, (const void *)(uintptr_t)s, n, stream);
  memcpy((void *)(uintptr_t)d, (void *)(uintptr_t)s, n);
  return 0;
}
static hk_cu_result_t f_cuMemsetD8Async(hk_cu_deviceptr_t d, unsigned char v, size_t n, hk_cu_stream_t stream) {
  fake_op('z', (void *)(uintptr_t)d, NULL, n, stream);
  memset((void *)(uintptr_t)d, v, n);
  return 0;
}
static hk_cu_result_t f_cuLaunchKernel(hk_cu_function_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                       unsigned bz, unsigned shared, hk_cu_stream_t stream, void **params, void **extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared;
  return extra ? 1 : dev_launch(U(f), params, stream);
}
/* Records the configuration and its one attribute, then launches like cuLaunchKernel. */
static hk_cu_result_t f_cuLaunchKernelEx(const hk_cu_launch_config_t *c, hk_cu_function_t f, void **params,
                                         void **extra) {
  if (extra || !c || (c->numAttrs && !c->attrs)) return 1;
  if (F.ex_launches < FAKE_MAX_NODES) {
    fake_ex_t *e = &F.ex[F.ex_launches];
    e->grid[0] = c->gridDimX, e->grid[1] = c->gridDimY, e->grid[2] = c->gridDimZ;
    e->block[0] = c->blockDimX, e->block[1] = c->blockDimY, e->block[2] = c->blockDimZ;
    e->shared = c->sharedMemBytes;
    e->stream = c->hStream;
    e->num_attrs = c->numAttrs;
    e->arg0 = *(void **)params[0];
    if (c->numAttrs) {
      const hk_cu_launch_attribute_t *a = &c->attrs[0];
      e->attr_id = a->id;
      e->attr_value = a->value.programmaticStreamSerializationAllowed;
      e->attr_rest_zero = a->pad[0] == 0 && a->pad[1] == 0 && a->pad[2] == 0 && a->pad[3] == 0;
      for (size_t i = sizeof(int); i < sizeof a->value.pad; i++) e->attr_rest_zero &= a->value.pad[i] == 0;
    }
  }
  F.ex_launches++;
  if (F.kernel_launches < FAKE_MAX_NODES) F.launched_ex[F.kernel_launches] = true;
  return dev_launch(U(f), params, c->hStream);
}
static hk_cu_result_t f_cuStreamSynchronize(hk_cu_stream_t s) { (void)s; F.stream_syncs++; return 0; }
static hk_cu_result_t f_cuGetErrorName(hk_cu_result_t r, const char **s) {
  switch (r) {
  case FAKE_OOM: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
  case FAKE_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return 0;
  case FAKE_UNKNOWN: *s = "CUDA_ERROR_UNKNOWN"; return 0;
  case FAKE_BAD_IMAGE: *s = "CUDA_ERROR_INVALID_IMAGE"; return 0;
  }
  *s = NULL;
  return 1;
}
static hk_cu_result_t f_cuGetErrorString(hk_cu_result_t r, const char **s) { *s = dev_error_string(r); return 0; }
static hk_cu_result_t f_cuGraphCreate(hk_cu_graph_t *g, unsigned flags) {
  uintptr_t h = 0;
  int r = dev_graph_create(&h, flags);
  *g = (hk_cu_graph_t)h;
  return r;
}
static uintptr_t *cu_deps(const hk_cu_graph_node_t *deps, size_t n, uintptr_t *out) {
  for (size_t d = 0; d < n && d < 4; d++) out[d] = U(deps[d]);
  return out;
}
static hk_cu_result_t f_cuGraphAddKernelNode_v2(hk_cu_graph_node_t *node, hk_cu_graph_t g, const hk_cu_graph_node_t *deps,
                                                size_t ndeps, const hk_cu_kernel_node_params_v2_t *p) {
  uintptr_t h = 0, d[4];
  int r = dev_add_node(&h, U(g), cu_deps(deps, ndeps, d), ndeps, U(p->func), p->gridDimX, p->kernelParams,
                       p->kern == NULL && p->ctx == NULL && p->extra == NULL);
  *node = (hk_cu_graph_node_t)h;
  return r;
}
static hk_cu_result_t f_cuGraphAddKernelNode(hk_cu_graph_node_t *node, hk_cu_graph_t g, const hk_cu_graph_node_t *deps,
                                             size_t ndeps, const hk_cu_kernel_node_params_v1_t *p) {
  uintptr_t h = 0, d[4];
  F.v1_calls++;
  int r = dev_add_node(&h, U(g), cu_deps(deps, ndeps, d), ndeps, U(p->func), p->gridDimX, p->kernelParams,
                       p->extra == NULL);
  *node = (hk_cu_graph_node_t)h;
  return r;
}
/* Records each edge (graph-local node indices and its data) and adds it to the downstream
 * node's dependencies, as cuGraphAddKernelNode's would be. */
static hk_cu_result_t f_cuGraphAddDependencies_v2(hk_cu_graph_t g, const hk_cu_graph_node_t *from,
                                                  const hk_cu_graph_node_t *to, const hk_cu_graph_edge_data_t *data,
                                                  size_t n) {
  F.add_deps_calls++;
  if (F.fail_add_deps) return F.fail_add_deps;
  if (U(g) != FAKE_GRAPH || !from || !to || !data) return 1;
  for (size_t i = 0; i < n; i++) {
    int a = (int)(U(from[i]) - FAKE_NODE(0)), b = (int)(U(to[i]) - FAKE_NODE(0));
    if (a < 0 || a >= F.node_count || b < 0 || b >= F.node_count || a >= b || F.nodes[b].ndeps == 4 ||
        F.n_edges == FAKE_MAX_NODES)
      return 1;
    F.edges[F.n_edges].from = a;
    F.edges[F.n_edges].to = b;
    F.edges[F.n_edges++].data = data[i];
    F.nodes[b].deps[F.nodes[b].ndeps++] = a;
  }
  return 0;
}
static hk_cu_result_t f_cuGraphInstantiateWithFlags(hk_cu_graph_exec_t *e, hk_cu_graph_t g, unsigned long long flags) {
  uintptr_t h = 0;
  int r = flags == 0 ? dev_instantiate(&h, U(g)) : 1;
  *e = (hk_cu_graph_exec_t)h;
  return r;
}
static hk_cu_result_t f_cuGraphInstantiate_v2(hk_cu_graph_exec_t *e, hk_cu_graph_t g, hk_cu_graph_node_t *error_node,
                                              char *log, size_t log_size) {
  uintptr_t h = 0;
  F.v1_calls++;
  int r = log && log_size ? dev_instantiate(&h, U(g)) : 1;
  (void)error_node;
  *e = (hk_cu_graph_exec_t)h;
  return r;
}
static hk_cu_result_t f_cuGraphLaunch(hk_cu_graph_exec_t e, hk_cu_stream_t s) { return dev_graph_launch(U(e), s); }
static hk_cu_result_t f_cuGraphExecKernelNodeSetParams_v2(hk_cu_graph_exec_t e, hk_cu_graph_node_t n,
                                                          const hk_cu_kernel_node_params_v2_t *p) {
  return dev_set_params(U(e), U(n), U(p->func), p->kernelParams);
}
static hk_cu_result_t f_cuGraphExecKernelNodeSetParams(hk_cu_graph_exec_t e, hk_cu_graph_node_t n,
                                                       const hk_cu_kernel_node_params_v1_t *p) {
  F.v1_calls++;
  return dev_set_params(U(e), U(n), U(p->func), p->kernelParams);
}
static hk_cu_result_t f_cuGraphExecDestroy(hk_cu_graph_exec_t e) { (void)e; F.exec_destroys++; return 0; }
static hk_cu_result_t f_cuGraphDestroy(hk_cu_graph_t g) { (void)g; F.graph_destroys++; return 0; }
static hk_cu_result_t f_cuEventCreate(hk_cu_event_t *e, unsigned flags) {
  uintptr_t h = 0;
  int r = flags == 0 ? dev_event_create(&h) : 1;
  *e = (hk_cu_event_t)h;
  return r;
}
static hk_cu_result_t f_cuEventRecord(hk_cu_event_t e, hk_cu_stream_t s) { return dev_event_record(U(e), s); }
static hk_cu_result_t f_cuEventSynchronize(hk_cu_event_t e) { return dev_event_sync(U(e)); }
static hk_cu_result_t f_cuEventElapsedTime(float *ms, hk_cu_event_t a, hk_cu_event_t b) {
  return dev_event_elapsed(ms, U(a), U(b));
}
static hk_cu_result_t f_cuEventDestroy(hk_cu_event_t e) { return dev_event_destroy(U(e)); }

/* Records its arguments and writes a recognizable map: the global address, then 0xa5. */
static hk_cu_result_t f_cuTensorMapEncodeTiled(hk_cu_tensor_map_t *map, int dtype, uint32_t rank, void *addr,
                                               const uint64_t *dims, const uint64_t *strides, const uint32_t *box,
                                               const uint32_t *estr, int interleave, int swizzle, int l2, int oob) {
  if (F.fail_encode) return F.fail_encode;
  if (F.encodes < 16) {
    F.enc[F.encodes].dtype = dtype;
    F.enc[F.encodes].rank = rank;
    F.enc[F.encodes].addr = addr;
    F.enc[F.encodes].map = map;
    memcpy(F.enc[F.encodes].dims, dims, 2 * sizeof *dims);
    F.enc[F.encodes].stride = strides[0];
    memcpy(F.enc[F.encodes].box, box, 2 * sizeof *box);
    memcpy(F.enc[F.encodes].estr, estr, 2 * sizeof *estr);
    F.enc[F.encodes].interleave = interleave;
    F.enc[F.encodes].swizzle = swizzle;
    F.enc[F.encodes].l2 = l2;
    F.enc[F.encodes].oob = oob;
  }
  F.encodes++;
  memset(map, 0xa5, sizeof *map);
  memcpy(map, &addr, sizeof addr);
  return 0;
}

static hk_cuda_symbols_t g_cu_table; /* the table installed last */

static void install_fake_cuda(void) {
  fake_reset();
  g_cu_table = (hk_cuda_symbols_t){
      .cuInit = f_cuInit,
      .cuDeviceGetCount = f_cuDeviceGetCount,
      .cuDeviceGet = f_cuDeviceGet,
      .cuDeviceGetAttribute = f_cuDeviceGetAttribute,
      .cuDeviceGetName = f_cuDeviceGetName,
      .cuDevicePrimaryCtxRetain = f_cuDevicePrimaryCtxRetain,
      .cuDevicePrimaryCtxRelease = f_cuDevicePrimaryCtxRelease,
      .cuCtxSetCurrent = f_cuCtxSetCurrent,
      .cuCtxGetCurrent = f_cuCtxGetCurrent,
      .cuCtxSynchronize = f_cuCtxSynchronize,
      .cuModuleLoadData = f_cuModuleLoadData,
      .cuModuleUnload = f_cuModuleUnload,
      .cuModuleGetFunction = f_cuModuleGetFunction,
      .cuMemAlloc = f_cuMemAlloc,
      .cuMemFree = f_cuMemFree,
      .cuMemcpyHtoD = f_cuMemcpyHtoD,
      .cuMemcpyDtoH = f_cuMemcpyDtoH,
      .cuMemcpyDtoD = f_cuMemcpyDtoD,
      .cuMemcpyDtoDAsync = f_cuMemcpyDtoDAsync,
      .cuMemsetD8Async = f_cuMemsetD8Async,
      .cuLaunchKernel = f_cuLaunchKernel,
      .cuStreamSynchronize = f_cuStreamSynchronize,
      .cuGetErrorName = f_cuGetErrorName,
      .cuGetErrorString = f_cuGetErrorString,
      .cuGraphCreate = f_cuGraphCreate,
      .cuGraphAddKernelNode_v2 = f_cuGraphAddKernelNode_v2,
      .cuGraphInstantiateWithFlags = f_cuGraphInstantiateWithFlags,
      .cuGraphLaunch = f_cuGraphLaunch,
      .cuGraphExecKernelNodeSetParams_v2 = f_cuGraphExecKernelNodeSetParams_v2,
      .cuGraphExecDestroy = f_cuGraphExecDestroy,
      .cuGraphDestroy = f_cuGraphDestroy,
  };
  hk_cuda_override_symbols(&g_cu_table);
}

static void cuda_add_events(void) {
  g_cu_table.cuEventCreate = f_cuEventCreate;
  g_cu_table.cuEventRecord = f_cuEventRecord;
  g_cu_table.cuEventSynchronize = f_cuEventSynchronize;
  g_cu_table.cuEventElapsedTime = f_cuEventElapsedTime;
  g_cu_table.cuEventDestroy = f_cuEventDestroy;
  hk_cuda_override_symbols(&g_cu_table);
}

static void cuda_drop_graphs(void) {
  g_cu_table.cuGraphInstantiateWithFlags = NULL; /* one missing piece is enough */
  hk_cuda_override_symbols(&g_cu_table);
}

/* ---- the HIP runtime ---- */
static hk_hip_error_t f_hipInit(unsigned int flags) { return flags == 0 ? 0 : 1; }
static hk_hip_error_t f_hipGetDeviceCount(int *n) { *n = F.device_count; return F.device_count ? 0 : FAKE_NO_DEVICE; }
static hk_hip_error_t f_hipSetDevice(int d) {
  if (d < 0 || d >= F.device_count) return 101;
  F.current = (uintptr_t)d + 1;
  return 0;
}
static hk_hip_error_t f_hipGetDevice(int *d) { *d = (int)F.current - 1; return 0; }
static hk_hip_error_t f_hipGetDeviceProperties(void *props, int d) {
  if (d < 0 || d >= F.device_count) return 101;
  strcpy((char *)props, "Fake MI210");
  strcpy((char *)props + 396, F.isa); /* somewhere in the struct */
  return 0;
}
static hk_hip_error_t f_hipModuleLoadData(hk_hip_module_t *m, const void *image) {
  uintptr_t h = 0;
  int r = dev_load(image, &h);
  *m = (hk_hip_module_t)h;
  return r;
}
static hk_hip_error_t f_hipModuleUnload(hk_hip_module_t m) { (void)m; F.unloads++; return 0; }
static hk_hip_error_t f_hipModuleGetFunction(hk_hip_function_t *fn, hk_hip_module_t m, const char *name) {
  (void)m;
  uintptr_t h = 0;
  int r = dev_function(name, &h);
  *fn = (hk_hip_function_t)h;
  return r;
}
static hk_hip_error_t f_hipMalloc(void **p, size_t bytes) { return dev_alloc(p, bytes); }
static hk_hip_error_t f_hipFree(void *p) { return dev_free(p); }
static hk_hip_error_t f_hipMemcpy(void *d, const void *s, size_t n, int kind) {
  if (kind < HK_HIP_MEMCPY_HOST_TO_DEVICE || kind > HK_HIP_MEMCPY_DEVICE_TO_DEVICE) return 1;
  memcpy(d, s, n);
  return 0;
}
static hk_hip_error_t f_hipMemcpyAsync(void *d, const void *s, size_t n, int kind, hk_hip_stream_t stream) {
  if (kind != HK_HIP_MEMCPY_DEVICE_TO_DEVICE) return 1;
  fake_op('c', d, s, n, stream);
  memcpy(d, s, n);
  return 0;
}
static hk_hip_error_t f_hipMemsetAsync(void *d, int v, size_t n, hk_hip_stream_t stream) {
  fake_op('z', d, NULL, n, stream);
  memset(d, v, n);
  return 0;
}
static hk_hip_error_t f_hipModuleLaunchKernel(hk_hip_function_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                              unsigned by, unsigned bz, unsigned shared, hk_hip_stream_t stream,
                                              void **params, void **extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared;
  return extra ? 1 : dev_launch(U(f), params, stream);
}
static hk_hip_error_t f_hipStreamSynchronize(hk_hip_stream_t s) { (void)s; F.stream_syncs++; return 0; }
static hk_hip_error_t f_hipDeviceSynchronize(void) { F.device_syncs++; return F.current ? 0 : 101; }
static const char *f_hipGetErrorName(hk_hip_error_t r) {
  switch (r) {
  case FAKE_OOM: return "hipErrorOutOfMemory";
  case FAKE_NO_DEVICE: return "hipErrorNoDevice";
  case FAKE_NOT_FOUND: return "hipErrorNotFound";
  case FAKE_UNKNOWN: return "hipErrorUnknown";
  case FAKE_BAD_IMAGE: return "hipErrorInvalidImage";
  }
  return NULL;
}
static const char *f_hipGetErrorString(hk_hip_error_t r) { return dev_error_string(r); }
static hk_hip_error_t f_hipGraphCreate(hk_hip_graph_t *g, unsigned flags) {
  uintptr_t h = 0;
  int r = dev_graph_create(&h, flags);
  *g = (hk_hip_graph_t)h;
  return r;
}
static hk_hip_error_t f_hipGraphAddKernelNode(hk_hip_graph_node_t *node, hk_hip_graph_t g, const hk_hip_graph_node_t *deps,
                                              size_t ndeps, const hk_hip_kernel_node_params_t *p) {
  uintptr_t h = 0, d[4];
  for (size_t i = 0; i < ndeps && i < 4; i++) d[i] = U(deps[i]);
  int r = dev_add_node(&h, U(g), d, ndeps, U(p->func), p->gridDim.x, p->kernelParams, p->extra == NULL);
  *node = (hk_hip_graph_node_t)h;
  return r;
}
static hk_hip_error_t f_hipGraphInstantiate(hk_hip_graph_exec_t *e, hk_hip_graph_t g, hk_hip_graph_node_t *error_node,
                                            char *log, size_t log_size) {
  uintptr_t h = 0;
  (void)error_node;
  int r = log && log_size ? dev_instantiate(&h, U(g)) : 1;
  *e = (hk_hip_graph_exec_t)h;
  return r;
}
static hk_hip_error_t f_hipGraphLaunch(hk_hip_graph_exec_t e, hk_hip_stream_t s) { return dev_graph_launch(U(e), s); }
static hk_hip_error_t f_hipGraphExecKernelNodeSetParams(hk_hip_graph_exec_t e, hk_hip_graph_node_t n,
                                                        const hk_hip_kernel_node_params_t *p) {
  return dev_set_params(U(e), U(n), U(p->func), p->kernelParams);
}
static hk_hip_error_t f_hipGraphExecDestroy(hk_hip_graph_exec_t e) { (void)e; F.exec_destroys++; return 0; }
static hk_hip_error_t f_hipGraphDestroy(hk_hip_graph_t g) { (void)g; F.graph_destroys++; return 0; }
static hk_hip_error_t f_hipEventCreate(hk_hip_event_t *e) {
  uintptr_t h = 0;
  int r = dev_event_create(&h);
  *e = (hk_hip_event_t)h;
  return r;
}
static hk_hip_error_t f_hipEventRecord(hk_hip_event_t e, hk_hip_stream_t s) { return dev_event_record(U(e), s); }
static hk_hip_error_t f_hipEventSynchronize(hk_hip_event_t e) { return dev_event_sync(U(e)); }
static hk_hip_error_t f_hipEventElapsedTime(float *ms, hk_hip_event_t a, hk_hip_event_t b) {
  return dev_event_elapsed(ms, U(a), U(b));
}
static hk_hip_error_t f_hipEventDestroy(hk_hip_event_t e) { return dev_event_destroy(U(e)); }

static hk_hip_symbols_t g_hip_table; /* the table installed last */

static void install_fake_hip(void) {
  fake_reset();
  g_hip_table = (hk_hip_symbols_t){
      .hipInit = f_hipInit,
      .hipGetDeviceCount = f_hipGetDeviceCount,
      .hipSetDevice = f_hipSetDevice,
      .hipGetDevice = f_hipGetDevice,
      .hipGetDeviceProperties = f_hipGetDeviceProperties,
      .hipModuleLoadData = f_hipModuleLoadData,
      .hipModuleUnload = f_hipModuleUnload,
      .hipModuleGetFunction = f_hipModuleGetFunction,
      .hipMalloc = f_hipMalloc,
      .hipFree = f_hipFree,
      .hipMemcpy = f_hipMemcpy,
      .hipMemcpyAsync = f_hipMemcpyAsync,
      .hipMemsetAsync = f_hipMemsetAsync,
      .hipModuleLaunchKernel = f_hipModuleLaunchKernel,
      .hipStreamSynchronize = f_hipStreamSynchronize,
      .hipDeviceSynchronize = f_hipDeviceSynchronize,
      .hipGetErrorName = f_hipGetErrorName,
      .hipGetErrorString = f_hipGetErrorString,
      .hipGraphCreate = f_hipGraphCreate,
      .hipGraphAddKernelNode = f_hipGraphAddKernelNode,
      .hipGraphInstantiate = f_hipGraphInstantiate,
      .hipGraphLaunch = f_hipGraphLaunch,
      .hipGraphExecKernelNodeSetParams = f_hipGraphExecKernelNodeSetParams,
      .hipGraphExecDestroy = f_hipGraphExecDestroy,
      .hipGraphDestroy = f_hipGraphDestroy,
  };
  hk_hip_override_symbols(&g_hip_table);
}

static void hip_add_events(void) {
  g_hip_table.hipEventCreate = f_hipEventCreate;
  g_hip_table.hipEventRecord = f_hipEventRecord;
  g_hip_table.hipEventSynchronize = f_hipEventSynchronize;
  g_hip_table.hipEventElapsedTime = f_hipEventElapsedTime;
  g_hip_table.hipEventDestroy = f_hipEventDestroy;
  hk_hip_override_symbols(&g_hip_table);
}

static void hip_drop_graphs(void) {
  g_hip_table.hipGraphExecKernelNodeSetParams = NULL;
  hk_hip_override_symbols(&g_hip_table);
}

/* ---- one vendor, as the session tests see it ---- */
typedef struct vendor {
  bool cuda;
  const char *target;   /* the fixture's target of this vendor */
  uint32_t first;       /* its index in state_t.targets */
  void (*install)(void); /* a fresh fake device; graph API, no events */
  void (*add_events)(void);
  void (*drop_graphs)(void);
  /* in messages */
  const char *alloc_call, *get_function_call, *graph_create_call, *instantiate_call;
  const char *oom, *unknown, *not_found; /* error names */
  const char *runs;     /* what this machine runs, as the error messages list it */
  const char *not_object; /* why a code range that is not an object is refused */
} vendor_t;

static const vendor_t k_cuda = {
    .cuda = true, .target = "sm_90", .first = 0,
    .install = install_fake_cuda, .add_events = cuda_add_events, .drop_graphs = cuda_drop_graphs,
    .alloc_call = "cuMemAlloc", .get_function_call = "cuModuleGetFunction", .graph_create_call = "cuGraphCreate",
    .instantiate_call = "cuGraphInstantiateWithFlags",
    .oom = "CUDA_ERROR_OUT_OF_MEMORY", .unknown = "CUDA_ERROR_UNKNOWN", .not_found = "CUDA_ERROR_NOT_FOUND",
    .runs = "sm_90, sm_90a on device 0 (Fake H200)", .not_object = "not an ELF cubin",
};

static const vendor_t k_hip = {
    .cuda = false, .target = "gfx90a", .first = 1,
    .install = install_fake_hip, .add_events = hip_add_events, .drop_graphs = hip_drop_graphs,
    .alloc_call = "hipMalloc", .get_function_call = "hipModuleGetFunction", .graph_create_call = "hipGraphCreate",
    .instantiate_call = "hipGraphInstantiate",
    .oom = "hipErrorOutOfMemory", .unknown = "hipErrorUnknown", .not_found = "hipErrorNotFound",
    .runs = "gfx90a:sramecc+:xnack- on device 0", .not_object = "not an ELF code object or offload bundle",
};

/* Defines test_<name>_cuda and test_<name>_hip, each running body(ts, vendor). */
#define FOR_BOTH_VENDORS(name)                                          \
  static void test_##name##_cuda(void **ts) { name(ts, &k_cuda); }      \
  static void test_##name##_hip(void **ts) { name(ts, &k_hip); }

static void assert_contains(const char *s, const char *part) {
  if (!strstr(s, part)) fail_msg("\"%s\" does not contain \"%s\"", s, part);
}

/* Allocates and binds x, w, y through the session (fake device memory = malloc). */
typedef struct {
  void *x, *w, *y;
} bufs_t;

static void bind_all(hk_session_t *s, uint64_t batch, bufs_t *b) {
  size_t n = (size_t)batch * FX_COLS * sizeof(float);
  assert_int_equal(hk_session_alloc(s, n, &b->x), HK_OK);
  assert_int_equal(hk_session_alloc(s, FX_COLS * sizeof(float), &b->w), HK_OK);
  assert_int_equal(hk_session_alloc(s, n, &b->y), HK_OK);
  assert_int_equal(hk_session_bind(s, "x", b->x, n), HK_OK);
  assert_int_equal(hk_session_bind(s, "w", b->w, FX_COLS * sizeof(float)), HK_OK);
  assert_int_equal(hk_session_bind(s, "y", b->y, n), HK_OK);
}

static void free_all(hk_session_t *s, bufs_t *b) {
  hk_session_free(s, b->x);
  hk_session_free(s, b->w);
  hk_session_free(s, b->y);
}

static void assert_launch_mode(const hk_session_t *s, const char *mode, const char *reason_part) {
  const char *reason = NULL;
  assert_string_equal(hk_session_launch_mode(s, &reason), mode);
  assert_non_null(reason);
  if (reason_part) assert_contains(reason, reason_part);
  else assert_string_equal(reason, "");
}

/* The graph: built once with the stored edges, parameters refreshed only after a bind;
 * memory and synchronization go to the runtime; a second session shares the module. */
static void graph_session(void **ts, const vendor_t *v) {
  state_t *st = *ts;
  v->install();
  hk_pack_t *pack = open_pack(st, v->first, 3 - v->first); /* this vendor's target, then the rest */
  const char *name;
  assert_int_equal(hk_pack_select_target(pack, NULL, &name), HK_OK);
  assert_string_equal(name, v->target); /* GPU before host */

  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  assert_string_equal(hk_session_target(s), v->target);
  /* the device's name as the driver gives it (the fake CUDA driver's; HIP's: none) */
  assert_string_equal(hk_session_device_name(s), v->cuda ? "Fake H200" : "");
  assert_launch_mode(s, "graph", NULL);
  assert_int_equal(hk_session_pdl_count(s), 0); /* no launch is marked PDL */
  if (v->cuda) assert_int_equal(F.retains, 1);
  assert_int_equal(F.loads, 2); /* two distinct code ranges */
  assert_int_equal(F.allocs, 1); /* the workspace */
  assert_int_equal(F.graph_creates, 1);
  assert_int_equal(F.instantiates, 1);
  assert_int_equal(F.node_count, 2);
  assert_true(F.nodes[0].func == FAKE_FN(0) && F.nodes[1].func == FAKE_FN(1));
  assert_int_equal(F.nodes[0].ndeps, 0);
  assert_int_equal(F.nodes[1].ndeps, 1); /* mul waits for add */
  assert_int_equal(F.nodes[1].deps[0], 0);
  assert_int_equal(F.nodes[0].grid_x, (2 * FX_COLS + FX_BLOCK - 1) / FX_BLOCK);

  assert_int_equal(hk_session_run(s, NULL), HK_STATUS_FAILED_PRECONDITION); /* unbound */
  bufs_t b;
  bind_all(s, 2, &b);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  assert_int_equal(F.graph_launches, 1);
  assert_int_equal(F.set_params, 2); /* first run: bound pointers and workspace reach the nodes */
  assert_ptr_equal(F.nodes[0].arg0, b.x);
  assert_non_null(F.nodes[1].arg0); /* t: in the workspace */
  void *stream = (void *)(uintptr_t)0x777;
  assert_int_equal(hk_session_run(s, stream), HK_OK);
  assert_int_equal(F.graph_launches, 2);
  assert_ptr_equal(F.last_stream, stream);
  assert_int_equal(F.set_params, 2); /* nothing rebound: no update */

  void *x2;
  assert_int_equal(hk_session_alloc(s, 2 * FX_COLS * sizeof(float), &x2), HK_OK);
  assert_int_equal(hk_session_bind(s, "x", x2, 2 * FX_COLS * sizeof(float)), HK_OK);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  assert_int_equal(F.set_params, 4);
  assert_ptr_equal(F.nodes[0].arg0, x2);
  assert_int_equal(F.graph_launches, 3);
  assert_int_equal(F.kernel_launches, 0);

  float host[4] = {1, 2, 3, 4}, back[4] = {0};
  assert_int_equal(hk_session_copy(s, x2, host, sizeof host, HK_COPY_HOST_TO_DEVICE), HK_OK);
  assert_int_equal(hk_session_copy(s, b.x, x2, sizeof host, HK_COPY_DEVICE_TO_DEVICE), HK_OK);
  assert_int_equal(hk_session_copy(s, back, b.x, sizeof back, HK_COPY_DEVICE_TO_HOST), HK_OK);
  assert_memory_equal(back, host, sizeof host);
  assert_int_equal(hk_session_synchronize(s, NULL), HK_OK);
  assert_int_equal(hk_session_synchronize(s, stream), HK_OK);
  assert_int_equal(F.device_syncs, 1);
  assert_int_equal(F.stream_syncs, 1);

  hk_session_t *s8;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 8), &s8), HK_OK);
  assert_int_equal(F.loads, 2);
  assert_int_equal(F.graph_creates, 2);
  hk_session_destroy(s8);

  hk_session_free(s, x2);
  free_all(s, &b);
  hk_session_destroy(s);
  assert_int_equal(F.exec_destroys, 2);
  assert_int_equal(F.graph_destroys, 2);
  assert_int_equal(F.frees, F.allocs);
  hk_pack_destroy(pack);
  st->pack = NULL;
  assert_int_equal(F.unloads, 2);
  if (v->cuda) assert_int_equal(F.releases, 1);
}
FOR_BOTH_VENDORS(graph_session)

/* Runs one batch-2 session of `pack` with `mode`, binding and running it once; returns
 * with the session destroyed. Checks the launch mode it reports. */
static void run_once(hk_pack_t *pack, hk_launch_mode_t mode, const char *expect_mode, const char *reason_part) {
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .launch_mode = mode), &s), HK_OK);
  assert_launch_mode(s, expect_mode, reason_part);
  bufs_t b;
  bind_all(s, 2, &b);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  free_all(s, &b);
  hk_session_destroy(s);
}

/* Stream launches: asked for (no graph at all), and as the fallback when the graph cannot
 * be built, the reason kept; graph mode makes that an error. */
static void stream_fallback(void **ts, const vendor_t *v) {
  state_t *st = *ts;
  v->install();
  hk_pack_t *pack = open_pack(st, v->first, 1);
  run_once(pack, HK_LAUNCH_MODE_STREAM, "stream", NULL);
  assert_int_equal(F.graph_creates, 0);
  assert_int_equal(F.kernel_launches, 2);
  assert_true(F.launched[0] == FAKE_FN(0) && F.launched[1] == FAKE_FN(1)); /* stored order */
  assert_non_null(F.launched_arg0[0]);
  assert_int_equal(F.graph_launches, 0);

  /* A failing instantiation falls back to stream launches, leaving nothing behind. */
  F.fail_instantiate = FAKE_UNKNOWN;
  char reason[128];
  snprintf(reason, sizeof reason, "%s failed: %s (unknown error)", v->instantiate_call, v->unknown);
  run_once(pack, HK_LAUNCH_MODE_AUTO, "stream", reason);
  assert_int_equal(F.graph_creates, 1);
  assert_int_equal(F.graph_destroys, 1);
  assert_int_equal(F.kernel_launches, 4);
  assert_int_equal(F.graph_launches, 0);
  assert_string_equal(hk_last_error(), ""); /* not an error of create */

  /* Asked for a graph: the same failure is the session's error. */
  hk_session_t *s = NULL;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .launch_mode = HK_LAUNCH_MODE_GRAPH), &s),
                   HK_STATUS_DRIVER);
  assert_null(s);
  assert_contains(hk_last_error(), "graph launch mode asked for, but the graph cannot be built: ");
  assert_contains(hk_last_error(), reason);

  /* So does a failing graph creation. */
  F.fail_instantiate = 0;
  F.fail_graph_create = FAKE_UNKNOWN;
  snprintf(reason, sizeof reason, "%s failed: %s", v->graph_create_call, v->unknown);
  run_once(pack, HK_LAUNCH_MODE_AUTO, "stream", reason);
  assert_int_equal(F.kernel_launches, 6);
  assert_int_equal(F.frees, F.allocs);
  hk_pack_destroy(pack);
  st->pack = NULL;

  /* A runtime without (part of) the graph API. */
  v->drop_graphs();
  pack = open_pack(st, v->first, 1);
  F.fail_graph_create = 0;
  int creates = F.graph_creates;
  run_once(pack, HK_LAUNCH_MODE_AUTO, "stream", "lacks the graph API");
  assert_int_equal(F.graph_creates, creates); /* the driver was not asked */
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .launch_mode = HK_LAUNCH_MODE_GRAPH), &s),
                   HK_STATUS_UNAVAILABLE);
  assert_contains(hk_last_error(), "lacks the graph API");
}
FOR_BOTH_VENDORS(stream_fallback)

/* hk_session_profile: each launch on the stream alone between two events (not through the
 * graph), one warm-up pass, medians; the events are released. */
static void profile(void **ts, const vendor_t *v) {
  state_t *st = *ts;
  v->install();
  hk_pack_t *pack = open_pack(st, v->first, 1);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  bufs_t b;
  bind_all(s, 2, &b);
  double us[2];
  assert_int_equal(hk_session_profile(s, NULL, 3, us), HK_STATUS_UNAVAILABLE); /* no event API yet */
  assert_contains(hk_last_error(), "lacks the event API");
  free_all(s, &b);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  st->pack = NULL;

  v->install();
  v->add_events();
  pack = open_pack(st, v->first, 1);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  bind_all(s, 2, &b);
  void *stream = (void *)(uintptr_t)0x777;
  assert_int_equal(hk_session_profile(s, stream, 4, us), HK_OK);
  assert_int_equal(F.kernel_launches, 2 * 5); /* one warm-up pass + 4 */
  assert_int_equal(F.graph_launches, 1);      /* profile starts with one normal run */
  assert_true(F.launched[0] == FAKE_FN(0) && F.launched[1] == FAKE_FN(1));
  assert_ptr_equal(F.last_stream, stream);
  assert_int_equal(F.event_stream_mismatch, 0);
  assert_int_equal(F.event_syncs, 5); /* once per pass */
  assert_int_equal(F.events_created, 4);
  assert_int_equal(F.events_destroyed, 4);
  assert_true(fabs(us[0] - 2.0) < 1e-3 && fabs(us[1] - 4.0) < 1e-3);
  assert_int_equal(hk_session_run(s, stream), HK_OK); /* the graph still runs afterwards */
  assert_int_equal(F.graph_launches, 2);
  free_all(s, &b);
  hk_session_destroy(s);
}
FOR_BOTH_VENDORS(profile)

static void errors(void **ts, const vendor_t *v) {
  state_t *st = *ts;
  v->install();
  hk_pack_t *pack = open_pack(st, v->first, 1);
  hk_session_t *s = NULL;
  char msg[256];

  F.fail_alloc = FAKE_OOM;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_OUT_OF_MEMORY);
  assert_null(s);
  snprintf(msg, sizeof msg, "-byte workspace: %s failed: %s (out of memory)", v->alloc_call, v->oom);
  assert_contains(hk_last_error(), msg);
  F.fail_alloc = FAKE_UNKNOWN;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_DRIVER);
  snprintf(msg, sizeof msg, "%s failed: %s (unknown error)", v->alloc_call, v->unknown);
  assert_contains(hk_last_error(), msg);
  assert_int_equal(F.graph_creates, 0);
  F.fail_alloc = 0;

  /* Device ordinal past the devices: nothing runs there. */
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .target = v->target, .device = 1), &s),
                   HK_STATUS_NO_COMPATIBLE_TARGET);
  assert_contains(hk_last_error(), "(device 1)");
  snprintf(msg, sizeof msg, "this machine runs [%s", v->runs);
  assert_contains(hk_last_error(), msg);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .device = -1), &s), HK_STATUS_INVALID_ARGUMENT);
  hk_pack_destroy(pack);
  st->pack = NULL;

  /* A device of another architecture cannot run the target. */
  v->install();
  F.major = 8;
  F.minor = 6;
  F.isa = "gfx908:sramecc+:xnack-";
  pack = open_pack(st, v->first, 1);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_NO_COMPATIBLE_TARGET);
  snprintf(msg, sizeof msg, "the artifact has [%s]; this machine runs [%s", v->target,
           v->cuda ? "sm_80..sm_86, sm_86a on device 0 (Fake H200)" : "gfx908:sramecc+:xnack- on device 0");
  assert_contains(hk_last_error(), msg);

  /* A kernel missing from its object: CORRUPT, naming it, with the runtime's name. */
  v->install();
  F.missing_kernel = "hk_test_mul";
  pack = open_pack(st, v->first, 1);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_CORRUPT);
  snprintf(msg, sizeof msg, "target %s: kernel symbol \"hk_test_mul\" is missing from its code object: %s failed: %s "
           "(named symbol not found)", v->target, v->get_function_call, v->not_found);
  assert_contains(hk_last_error(), msg);
  assert_int_equal(F.unloads, F.loads); /* the half-loaded module is released */
  if (v->cuda) assert_int_equal(F.releases, F.retains);
  /* not cached: it fails again the same way */
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 8), &s), HK_STATUS_CORRUPT);

  /* A code range that is not a code object never reaches the runtime. */
  v->install();
  memcpy(g_cubins + ELF_SIZE, "garbage!", 8);
  memcpy(g_amd_objects + ELF_SIZE, "garbage!", 8);
  pack = open_pack(st, v->first, 1);
  int loads = F.loads;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_CORRUPT);
  snprintf(msg, sizeof msg, "the code object of kernel hk_test_mul (bytes [64, +64)) is invalid: %s", v->not_object);
  assert_contains(hk_last_error(), msg);
  assert_int_equal(F.loads, loads + 1); /* only the first object was loaded */
}
FOR_BOTH_VENDORS(errors)

/* A batch between buckets: one arena (workspace + staging), the graph reads the staging
 * buffers, and each run enqueues on its stream: the zeroing of the staging area (first
 * run only), the input's real rows in, the graph, the output's real rows out. A batch
 * that is a bucket binds directly and copies nothing. */
static void expect_op(int i, char kind, const void *dst, const void *src, size_t bytes, void *stream) {
  if (F.op[i].kind != kind || F.op[i].dst != dst || F.op[i].src != src || F.op[i].bytes != bytes ||
      F.op[i].stream != stream)
    fail_msg("stream op %d: '%c' %p <- %p, %zu bytes on %p; expected '%c' %p <- %p, %zu bytes on %p", i, F.op[i].kind,
             F.op[i].dst, F.op[i].src, F.op[i].bytes, F.op[i].stream, kind, dst, src, bytes, stream);
}

static void padded_session(void **ts, const vendor_t *v) {
  state_t *st = *ts;
  v->install();
  hk_pack_t *pack = open_pack(st, v->first, 1); /* buckets 2 and 8 */
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 5), &s), HK_OK);
  assert_int_equal(hk_session_bucket(s), 8);
  assert_int_equal(F.allocs, 1); /* workspace and staging: one allocation */
  assert_int_equal(F.graph_creates, 1);
  const size_t row = FX_COLS * sizeof(float), ws = 8 * row;
  char *xs = (char *)(uintptr_t)hk_session_debug_staging(s, "x"), *ys = (char *)(uintptr_t)hk_session_debug_staging(s, "y");
  char *arena = (char *)(uintptr_t)hk_session_debug_arena(s);
  assert_ptr_equal(xs, arena + (ws + 255) / 256 * 256); /* after the workspace, 256-aligned */
  assert_ptr_equal(ys, xs + (ws + 255) / 256 * 256);
  bufs_t b;
  bind_all(s, 5, &b);
  for (size_t i = 0; i < 5 * FX_COLS; i++) ((float *)b.x)[i] = (float)i + 1;
  memset(xs, 0x7f, 8 * row); /* what an allocation might hold */
  void *stream = (void *)(uintptr_t)0x777;
  assert_int_equal(hk_session_run(s, stream), HK_OK);
  assert_int_equal(F.ops, 4);
  expect_op(0, 'z', xs, NULL, 2 * ((ws + 255) / 256 * 256), stream); /* both staging buffers, once */
  expect_op(1, 'c', xs, b.x, 5 * row, stream);
  expect_op(2, 'g', NULL, NULL, 0, stream);
  expect_op(3, 'c', b.y, ys, 5 * row, stream);
  assert_ptr_equal(F.nodes[0].arg0, xs); /* the graph reads the staging buffer */
  assert_memory_equal(xs, b.x, 5 * row);
  for (size_t i = 5 * row; i < 8 * row; i++) assert_int_equal(xs[i], 0);
  int set_params = F.set_params;
  assert_int_equal(hk_session_run(s, stream), HK_OK); /* no zeroing, no parameter update */
  assert_int_equal(F.ops, 7);
  expect_op(4, 'c', xs, b.x, 5 * row, stream);
  expect_op(6, 'c', b.y, ys, 5 * row, stream);
  assert_int_equal(F.set_params, set_params);

  /* 7, then 5 again: the rows 5..6 that batch 7 copied in are zeroed before the copy. */
  bufs_t b7, b5;
  assert_int_equal(hk_session_set_batch(s, 7), HK_OK);
  bind_all(s, 7, &b7);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  assert_int_equal(F.ops, 10);
  expect_op(7, 'c', xs, b7.x, 7 * row, NULL);
  assert_int_equal(hk_session_set_batch(s, 5), HK_OK);
  bind_all(s, 5, &b5);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  assert_int_equal(F.ops, 14);
  expect_op(10, 'z', xs + 5 * row, NULL, 2 * row, NULL);
  expect_op(11, 'c', xs, b5.x, 5 * row, NULL);
  expect_op(13, 'c', b5.y, ys, 5 * row, NULL);

  /* The bucket's own batch: direct binding, the graph's parameters follow, no copies. */
  bufs_t b8;
  assert_int_equal(hk_session_set_batch(s, 8), HK_OK);
  bind_all(s, 8, &b8);
  assert_int_equal(hk_session_run(s, stream), HK_OK);
  assert_int_equal(F.ops, 15);
  expect_op(14, 'g', NULL, NULL, 0, stream);
  assert_ptr_equal(F.nodes[0].arg0, b8.x);
  assert_int_equal(F.graph_creates, 1);
  assert_int_equal(F.allocs - 1 - 3 * 4, 0); /* the arena + 4 x bind_all's 3 buffers */

  assert_int_equal(hk_session_set_batch(s, 9), HK_STATUS_NOT_FOUND);
  free_all(s, &b);
  free_all(s, &b7);
  free_all(s, &b5);
  free_all(s, &b8);
  hk_session_destroy(s);
  assert_int_equal(F.frees, F.allocs);
  assert_int_equal(F.exec_destroys, 1);
  hk_pack_destroy(pack);
  st->pack = NULL;
}
FOR_BOTH_VENDORS(padded_session)

/* Kernels sharing one code range: the object is loaded once. */
static void shared_object(void **ts, const vendor_t *v) {
  state_t *st = *ts;
  v->install();
  st->fx.kernels_cuda[1].code_offset = 0;
  hk_pack_t *pack = open_pack(st, v->first, 1);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  assert_int_equal(F.loads, 1);
  hk_session_destroy(s);
}
FOR_BOTH_VENDORS(shared_object)

/* Launch extents (format 1.6): the vendor's target alone in a pack whose bytes `forge` changed
 * (node indices 0 and 1: the launches of its batch-2 graph), checksums fixed up, so that it
 * opens (well formed) and only the launch check can refuse it. */
static hk_pack_t *open_forged(state_t *st, const vendor_t *v, void (*forge)(uint8_t *buf)) {
  hk_pack_destroy(st->pack);
  free(st->bytes);
  st->pack = NULL;
  st->fx.in.targets = &st->targets[v->first];
  st->fx.in.n_targets = 1;
  size_t size;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &st->bytes, &size), 0);
  forge(st->bytes);
  hk_test_refix(st->bytes, size);
  assert_int_equal(hk_test_open_memory(st->bytes, size, NULL, &st->pack), HK_OK);
  return st->pack;
}

/* mul (launch 1 of the batch-2 graph) writes its 200 floats into w, a 100-float param */
static void forge_out_into_param(uint8_t *b) {
  hk_arg_rec_t *args = fx_payload(b, HK_SECTION_ARGS);
  const hk_node_rec_t *nodes = fx_payload(b, HK_SECTION_NODES);
  args[nodes[1].arg_first + 2].value = 1;
}

/* add (launch 0) claims 65536 rows of x and t in 4096 blocks, the record forged to agree */
static void forge_rows(uint8_t *b) {
  hk_arg_rec_t *args = fx_payload(b, HK_SECTION_ARGS);
  hk_node_rec_t *nodes = fx_payload(b, HK_SECTION_NODES);
  uint64_t *ext = fx_payload(b, HK_SECTION_EXTENTS);
  nodes[0].grid[0] = 4096;
  args[nodes[0].arg_first + 3].value = 65536;
  ext[nodes[0].arg_first] = ext[nodes[0].arg_first + 2] = 65536ull * FX_COLS * sizeof(float);
}

/* A GPU pack whose launch would write past a tensor in device memory opens, but no session of
 * its target is created (CORRUPT, naming the launch, the argument, the tensor and both sizes)
 * and its code is never handed to the driver. */
static void forged_launch(void **ts, const vendor_t *v) {
  state_t *st = *ts;
  v->install();
  hk_session_t *s = (hk_session_t *)1;
  hk_pack_t *pack = open_forged(st, v, forge_out_into_param);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .target = v->target), &s), HK_STATUS_CORRUPT);
  assert_null(s);
  char want[256];
  snprintf(want, sizeof want, "graph 0 (target %s, batch 2) launch 1 (node mul, kernel hk_test_mul, op mul): "
           "argument 2 (out) may touch 800 bytes of tensor w, which has 400 bytes at batch 2", v->target);
  assert_contains(hk_pack_error(pack), want);
  assert_int_equal(F.loads, 0); /* refused before the code reached the driver */
  assert_int_equal(F.allocs, 0);
  /* and again: a refusal is not cached as a success */
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 8, .target = v->target), &s), HK_STATUS_CORRUPT);
  assert_int_equal(F.loads, 0);

  v->install();
  pack = open_forged(st, v, forge_rows);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .target = v->target), &s), HK_STATUS_CORRUPT);
  snprintf(want, sizeof want, "launch 0 (node add, kernel hk_test_addc, op rmsnorm): argument 0 (x) may touch "
           "26214400 bytes of tensor x, which has 800 bytes at batch 2");
  assert_contains(hk_pack_error(pack), want);
  assert_int_equal(F.loads, 0);
}
FOR_BOTH_VENDORS(forged_launch)

/* CUDA drivers before 12 have only the v1 node-parameter calls: the same graph through
 * cuGraphAddKernelNode, cuGraphInstantiate_v2 and cuGraphExecKernelNodeSetParams. */
static void test_fake_cuda_v1_graph_api(void **ts) {
  state_t *st = *ts;
  install_fake_cuda();
  g_cu_table.cuGraphAddKernelNode_v2 = NULL;
  g_cu_table.cuGraphInstantiateWithFlags = NULL;
  g_cu_table.cuGraphExecKernelNodeSetParams_v2 = NULL;
  g_cu_table.cuGraphAddKernelNode = f_cuGraphAddKernelNode;
  g_cu_table.cuGraphInstantiate_v2 = f_cuGraphInstantiate_v2;
  g_cu_table.cuGraphExecKernelNodeSetParams = f_cuGraphExecKernelNodeSetParams;
  hk_cuda_override_symbols(&g_cu_table);
  hk_pack_t *pack = open_pack(st, 0, 1);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  assert_launch_mode(s, "graph", NULL);
  assert_int_equal(F.node_count, 2);
  assert_int_equal(F.nodes[1].deps[0], 0);
  bufs_t b;
  bind_all(s, 2, &b);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  assert_ptr_equal(F.nodes[0].arg0, b.x);
  assert_int_equal(F.v1_calls, 2 + 1 + 2); /* two nodes, one instantiation, two refreshes */
  assert_int_equal(F.graph_launches, 1);
  free_all(s, &b);
  hk_session_destroy(s);
}

/* ---- TMA tensor maps (CUDA) ---------------------------------------------------------------------
 * The fixture's sm_90 launches with tensor map arguments: launch 0 (add) maps the input x
 * (f32 [batch, 100]) in 32 x 2 boxes with the 128-byte swizzle, launch 1 (mul) the
 * intermediate t in 4 x 256 boxes. */
#define TMAP_X hk_tmap_pack(0, 32, 2, HK_TMAP_SWIZZLE_128B)
#define TMAP_T hk_tmap_pack(2, 4, 256, HK_TMAP_SWIZZLE_NONE)

static hk_pack_t *open_tmap_pack(state_t *st, bool with_encoder) {
  install_fake_cuda();
  if (with_encoder) {
    g_cu_table.cuTensorMapEncodeTiled = f_cuTensorMapEncodeTiled;
    hk_cuda_override_symbols(&g_cu_table);
  }
  fx_add_tmap(&st->fx, 0, TMAP_X);
  fx_add_tmap(&st->fx, 1, TMAP_T);
  st->targets[0].graphs = st->fx.graphs_cuda; /* the sm_90 target, copied by setup */
  F.tmap_arg = 8;                             /* after hk_test_addc's eight ABI arguments */
  return open_pack(st, 0, 1);
}

/* Checks encode call i: x's or t's matrix at `rows` rows over `addr`, and what the launch
 * or graph node of launch 0 last got: x's map, 64-byte aligned, holding the fake's pattern
 * for x_addr. */
static void expect_encode(int i, bool x, uint64_t rows, const void *addr) {
  assert_true(i < F.encodes);
  assert_int_equal(F.enc[i].dtype, HK_CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  assert_int_equal(F.enc[i].rank, 2);
  assert_ptr_equal(F.enc[i].addr, addr);
  assert_int_equal(F.enc[i].dims[0], FX_COLS); /* innermost first */
  assert_int_equal(F.enc[i].dims[1], rows);
  assert_int_equal(F.enc[i].stride, FX_COLS * sizeof(float));
  assert_int_equal(F.enc[i].box[0], x ? 32 : 4);
  assert_int_equal(F.enc[i].box[1], x ? 2 : 256);
  assert_true(F.enc[i].estr[0] == 1 && F.enc[i].estr[1] == 1);
  assert_int_equal(F.enc[i].interleave, 0);
  assert_int_equal(F.enc[i].swizzle, x ? 3 : 0);
  assert_int_equal(F.enc[i].l2, HK_CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  assert_int_equal(F.enc[i].oob, 0);
  assert_int_equal((uintptr_t)F.enc[i].map % 64, 0);
}

static void expect_x_param(const void *x_addr) {
  uint8_t want[128];
  memset(want, 0xa5, sizeof want);
  memcpy(want, &x_addr, sizeof x_addr);
  assert_non_null(F.tmap_param);
  assert_int_equal((uintptr_t)F.tmap_param % 64, 0);
  assert_memory_equal(F.tmap_bytes, want, sizeof want);
}

/* Graph mode: maps built at the first run from the bound input and the workspace, the
 * kernel's parameter is the map; rebinding re-encodes and refreshes the node parameters
 * (no new graph); nothing is re-encoded while nothing moves. */
static void test_fake_cuda_tmap_graph(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack = open_tmap_pack(st, true);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  assert_launch_mode(s, "graph", NULL);
  assert_int_equal(F.encodes, 0); /* inputs are not bound yet */
  bufs_t b;
  bind_all(s, 2, &b);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  assert_int_equal(F.encodes, 2);
  expect_encode(0, true, 2, b.x);
  expect_encode(1, false, 2, hk_session_debug_arena(s)); /* t: placed at 0 in the workspace */
  assert_int_equal(F.set_params, 2);
  expect_x_param(b.x);
  assert_ptr_equal(F.tmap_param, F.enc[0].map);

  assert_int_equal(hk_session_run(s, NULL), HK_OK); /* nothing moved */
  assert_int_equal(F.encodes, 2);
  assert_int_equal(F.set_params, 2);

  void *x2;
  assert_int_equal(hk_session_alloc(s, 2 * FX_COLS * sizeof(float), &x2), HK_OK);
  assert_int_equal(hk_session_bind(s, "x", x2, 2 * FX_COLS * sizeof(float)), HK_OK);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  assert_int_equal(F.encodes, 4);
  expect_encode(2, true, 2, x2);
  assert_int_equal(F.set_params, 4); /* refreshed ... */
  assert_int_equal(F.graph_creates, 1); /* ... not rebuilt */
  assert_int_equal(F.instantiates, 1);
  expect_x_param(x2);

  /* A driver error while encoding names the launch and the tensor; the next run retries. */
  assert_int_equal(hk_session_bind(s, "x", b.x, 2 * FX_COLS * sizeof(float)), HK_OK);
  F.fail_encode = FAKE_UNKNOWN;
  assert_int_equal(hk_session_run(s, NULL), HK_STATUS_DRIVER);
  assert_contains(hk_session_error(s), "kernel hk_test_addc (launch 0, add): building the tensor map of x [2 x 100, "
                                       "box 32x2]: cuTensorMapEncodeTiled failed: CUDA_ERROR_UNKNOWN");
  int launches = F.graph_launches;
  F.fail_encode = 0;
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  assert_int_equal(F.graph_launches, launches + 1);
  expect_encode(F.encodes - 2, true, 2, b.x);
  expect_x_param(b.x);

  hk_session_free(s, x2);
  free_all(s, &b);
  hk_session_destroy(s);
  assert_int_equal(F.frees, F.allocs);
}

/* Stream launches read the maps directly; a padded batch maps the input's staging buffer
 * at the bucket's rows. */
static void test_fake_cuda_tmap_stream_padded(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack = open_tmap_pack(st, true);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 5, .launch_mode = HK_LAUNCH_MODE_STREAM), &s),
                   HK_OK);
  assert_int_equal(hk_session_bucket(s), 8);
  bufs_t b;
  bind_all(s, 5, &b);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  const void *xs = hk_session_debug_staging(s, "x");
  assert_non_null(xs);
  assert_int_equal(F.encodes, 2);
  expect_encode(0, true, 8, xs);
  expect_encode(1, false, 8, hk_session_debug_arena(s));
  assert_int_equal(F.kernel_launches, 2);
  expect_x_param(xs);
  /* batch 8 binds directly: the map follows the bound buffer */
  bufs_t b8;
  assert_int_equal(hk_session_set_batch(s, 8), HK_OK);
  bind_all(s, 8, &b8);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  assert_int_equal(F.encodes, 4);
  expect_encode(2, true, 8, b8.x);
  expect_x_param(b8.x);
  free_all(s, &b);
  free_all(s, &b8);
  hk_session_destroy(s);
}

/* A driver before CUDA 12.0 has no cuTensorMapEncodeTiled: the session is refused when it is
 * created, naming the kernel. */
static void test_fake_cuda_tmap_no_encoder(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack = open_tmap_pack(st, false);
  hk_session_t *s = NULL;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_UNAVAILABLE);
  assert_null(s);
  assert_contains(hk_last_error(), "kernel hk_test_addc (launch 0, add, batch size 2) takes a TMA tensor map: the "
                                   "NVIDIA driver lacks cuTensorMapEncodeTiled (CUDA 12.0+): update the driver");
  assert_int_equal(F.allocs, F.frees); /* nothing kept */
  assert_int_equal(F.graph_creates, 0);
}

/* ---- programmatic dependent launch (CUDA) -------------------------------------------------------
 * The fixture's sm_90 launch 1 (mul, after add) marked PDL (with `first_too`, launch 0 as
 * well), with a geometry of its own so that cuLaunchKernelEx's configuration is checked field
 * by field: grid [blocks, 3, 2], block [32, 2, 1], 4096 bytes of dynamic shared memory. `ex`
 * and `edges` give the fake driver cuLaunchKernelEx and cuGraphAddDependencies_v2. */
#define PDL_BLOCKS(batch) (((batch) * FX_COLS + FX_BLOCK - 1) / FX_BLOCK)

static hk_pack_t *open_pdl_pack(state_t *st, bool ex, bool edges, bool first_too) {
  install_fake_cuda();
  if (ex) g_cu_table.cuLaunchKernelEx = f_cuLaunchKernelEx;
  if (edges) g_cu_table.cuGraphAddDependencies_v2 = f_cuGraphAddDependencies_v2;
  hk_cuda_override_symbols(&g_cu_table);
  fx_add_pdl(&st->fx, 1);
  if (first_too) fx_add_pdl(&st->fx, 0);
  for (int g = 0; g < st->fx.spec.n_batch; g++) {
    hkc_launch_t *l = &st->fx.launches_cuda[g][1];
    l->grid[1] = 3;
    l->grid[2] = 2;
    l->block[0] = 32;
    l->block[1] = 2;
    l->shared_bytes = 4096;
  }
  st->targets[0].graphs = st->fx.graphs_cuda; /* the sm_90 target, copied by setup */
  return open_pack(st, 0, 1);
}

/* Creates a batch-2 session with `options`, binds it and runs it once on `stream`. */
static hk_session_t *pdl_session(hk_pack_t *pack, const hk_session_options_t *options, bufs_t *b, void *stream) {
  hk_session_t *s = NULL;
  assert_int_equal(hk_session_create(pack, options, &s), HK_OK);
  bind_all(s, 2, b);
  assert_int_equal(hk_session_run(s, stream), HK_OK);
  return s;
}

static void close_session(hk_session_t *s, bufs_t *b) {
  free_all(s, b);
  hk_session_destroy(s);
}

/* Graph mode: the PDL launch goes in without dependencies, then its edge from add with
 * programmatic edge data; add (no dependencies) gets no edge even when marked. */
static void test_fake_cuda_pdl_graph(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack = open_pdl_pack(st, true, true, false);
  bufs_t b;
  hk_session_t *s = pdl_session(pack, HK_TEST_OPTIONS(.batch = 2), &b, NULL);
  assert_launch_mode(s, "graph", NULL);
  assert_int_equal(hk_session_pdl_count(s), 1);
  assert_int_equal(F.node_count, 2);
  assert_int_equal(F.nodes[0].ndeps, 0);
  assert_int_equal(F.add_deps_calls, 1);
  assert_int_equal(F.n_edges, 1);
  assert_int_equal(F.edges[0].from, 0);
  assert_int_equal(F.edges[0].to, 1);
  assert_int_equal(F.edges[0].data.from_port, HK_CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC);
  assert_int_equal(F.edges[0].data.to_port, 0);
  assert_int_equal(F.edges[0].data.type, HK_CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC);
  static const unsigned char zero[5] = {0};
  assert_memory_equal(F.edges[0].data.reserved, zero, sizeof zero);
  assert_int_equal(F.nodes[1].ndeps, 1); /* only through the programmatic edge */
  assert_int_equal(F.nodes[1].deps[0], 0);
  assert_int_equal(F.graph_launches, 1);
  assert_int_equal(F.kernel_launches, 0);
  assert_int_equal(F.ex_launches, 0);
  assert_int_equal(F.set_params, 2);
  assert_ptr_equal(F.nodes[0].arg0, b.x);
  close_session(s, &b);
  assert_int_equal(F.frees, F.allocs);

  pack = open_pdl_pack(st, true, true, true);
  s = pdl_session(pack, HK_TEST_OPTIONS(.batch = 2), &b, NULL);
  assert_int_equal(hk_session_pdl_count(s), 1);
  assert_int_equal(F.add_deps_calls, 1);
  assert_int_equal(F.n_edges, 1);
  assert_int_equal(F.nodes[0].ndeps, 0);
  close_session(s, &b);
}

/* Stream launches: the PDL launch through cuLaunchKernelEx with programmatic stream
 * serialization and its own configuration, the other through cuLaunchKernel; a run's
 * first launch goes the ordinary way even when marked. */
static void test_fake_cuda_pdl_stream(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack = open_pdl_pack(st, true, true, false);
  void *stream = (void *)(uintptr_t)0x777;
  bufs_t b;
  hk_session_t *s = pdl_session(pack, HK_TEST_OPTIONS(.batch = 2, .launch_mode = HK_LAUNCH_MODE_STREAM), &b, stream);
  assert_launch_mode(s, "stream", NULL);
  assert_int_equal(hk_session_pdl_count(s), 1);
  assert_int_equal(F.graph_creates, 0);
  assert_int_equal(F.kernel_launches, 2);
  assert_true(F.launched[0] == FAKE_FN(0) && !F.launched_ex[0]);
  assert_true(F.launched[1] == FAKE_FN(1) && F.launched_ex[1]);
  assert_int_equal(F.ex_launches, 1);
  const fake_ex_t *e = &F.ex[0];
  assert_int_equal(e->grid[0], PDL_BLOCKS(2));
  assert_int_equal(e->grid[1], 3);
  assert_int_equal(e->grid[2], 2);
  assert_true(e->block[0] == 32 && e->block[1] == 2 && e->block[2] == 1);
  assert_int_equal(e->shared, 4096);
  assert_ptr_equal(e->stream, stream);
  assert_int_equal(e->num_attrs, 1);
  assert_int_equal(e->attr_id, HK_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  assert_int_equal(e->attr_value, 1);
  assert_true(e->attr_rest_zero);
  assert_ptr_equal(e->arg0, hk_session_debug_arena(s)); /* mul reads t, placed at 0 in the workspace */
  assert_ptr_equal(F.launched_arg0[0], b.x);
  assert_int_equal(hk_session_run(s, stream), HK_OK); /* every run */
  assert_int_equal(F.ex_launches, 2);
  assert_true(!F.launched_ex[2] && F.launched_ex[3]);
  close_session(s, &b);

  pack = open_pdl_pack(st, true, true, true);
  s = pdl_session(pack, HK_TEST_OPTIONS(.batch = 2, .launch_mode = HK_LAUNCH_MODE_STREAM), &b, NULL);
  assert_int_equal(hk_session_pdl_count(s), 1);
  assert_true(!F.launched_ex[0] && F.launched_ex[1]); /* add: the run's first launch */
  close_session(s, &b);
}

/* Drivers without the calls launch everything the ordinary way, and it still runs:
 * neither call; only cuLaunchKernelEx (CUDA 12.0 to 12.2); only programmatic edges. */
static void test_fake_cuda_pdl_old_driver(void **ts) {
  state_t *st = *ts;
  for (int variant = 0; variant < 3; variant++) {
    const bool ex = variant == 1, edges = variant == 2;
    hk_pack_t *pack = open_pdl_pack(st, ex, edges, false);
    bufs_t b;
    hk_session_t *s = pdl_session(pack, HK_TEST_OPTIONS(.batch = 2), &b, NULL);
    assert_launch_mode(s, "graph", NULL);
    assert_int_equal(hk_session_pdl_count(s), edges ? 1 : 0);
    assert_int_equal(F.add_deps_calls, edges ? 1 : 0);
    assert_int_equal(F.nodes[1].ndeps, 1); /* a plain edge when not programmatic */
    assert_int_equal(F.nodes[1].deps[0], 0);
    assert_int_equal(F.graph_launches, 1);
    close_session(s, &b);

    s = pdl_session(pack, HK_TEST_OPTIONS(.batch = 2, .launch_mode = HK_LAUNCH_MODE_STREAM), &b, NULL);
    assert_int_equal(hk_session_pdl_count(s), ex ? 1 : 0);
    assert_int_equal(F.kernel_launches, 2);
    assert_int_equal(F.ex_launches, ex ? 1 : 0);
    assert_true(F.launched[1] == FAKE_FN(1) && F.launched_ex[1] == ex);
    close_session(s, &b);
  }
}

/* Session option no_pdl: plain edges and launches although the driver has both calls. */
static void test_fake_cuda_pdl_option_off(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack = open_pdl_pack(st, true, true, true);
  bufs_t b;
  hk_session_t *s = pdl_session(pack, HK_TEST_OPTIONS(.batch = 2, .no_pdl = 1), &b, NULL);
  assert_launch_mode(s, "graph", NULL);
  assert_int_equal(hk_session_pdl_count(s), 0);
  assert_int_equal(F.add_deps_calls, 0);
  assert_int_equal(F.nodes[1].ndeps, 1);
  close_session(s, &b);
  s = pdl_session(pack, HK_TEST_OPTIONS(.batch = 2, .launch_mode = HK_LAUNCH_MODE_STREAM, .no_pdl = 1), &b, NULL);
  assert_int_equal(hk_session_pdl_count(s), 0);
  assert_int_equal(F.kernel_launches, 2);
  assert_int_equal(F.ex_launches, 0);
  close_session(s, &b);
}

/* hk_session_profile times each launch alone: never through cuLaunchKernelEx (the stream
 * session's one normal run before it is the only programmatic launch). */
static void test_fake_cuda_pdl_profile(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack = open_pdl_pack(st, true, true, false);
  cuda_add_events();
  double us[2];
  for (int stream_mode = 0; stream_mode < 2; stream_mode++) {
    hk_session_t *s = NULL;
    assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .launch_mode = stream_mode ?
                                                             HK_LAUNCH_MODE_STREAM : HK_LAUNCH_MODE_AUTO), &s),
                     HK_OK);
    assert_int_equal(hk_session_pdl_count(s), 1);
    bufs_t b;
    bind_all(s, 2, &b);
    const int launches = F.kernel_launches, ex = F.ex_launches;
    assert_int_equal(hk_session_profile(s, NULL, 4, us), HK_OK);
    const int normal = stream_mode ? 2 : 0; /* the run before the passes */
    assert_int_equal(F.kernel_launches - launches, normal + 2 * 5);
    assert_int_equal(F.ex_launches - ex, stream_mode ? 1 : 0);
    for (int i = launches + normal; i < F.kernel_launches && i < FAKE_MAX_NODES; i++) assert_false(F.launched_ex[i]);
    assert_true(fabs(us[0] - 2.0) < 1e-3 && fabs(us[1] - 4.0) < 1e-3);
    close_session(s, &b);
  }
}

/* A driver that refuses the programmatic edge: auto mode falls back to stream launches with
 * the driver's reason (and launches programmatically there); graph mode is an error. */
static void test_fake_cuda_pdl_edge_error(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack = open_pdl_pack(st, true, true, false);
  F.fail_add_deps = FAKE_UNKNOWN;
  bufs_t b;
  hk_session_t *s = pdl_session(pack, HK_TEST_OPTIONS(.batch = 2), &b, NULL);
  assert_launch_mode(s, "stream", "cuGraphAddDependencies_v2 failed: CUDA_ERROR_UNKNOWN (unknown error)");
  assert_int_equal(hk_session_pdl_count(s), 1);
  assert_int_equal(F.graph_destroys, F.graph_creates); /* nothing of the graph left */
  assert_int_equal(F.ex_launches, 1);
  close_session(s, &b);
  s = NULL;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .launch_mode = HK_LAUNCH_MODE_GRAPH), &s),
                   HK_STATUS_DRIVER);
  assert_null(s);
  assert_contains(hk_last_error(), "graph launch mode asked for, but the graph cannot be built: ");
  assert_contains(hk_last_error(), "cuGraphAddDependencies_v2 failed");
}

/* ---- (d) a real device ------------------------------------------------------------------------- */
/* ---- tensor parallelism: collectives through a fake NCCL, graphs by stream capture ---------- */
#define FAKE_COMM ((void *)(uintptr_t)0xC0)
#define FAKE_CAPTURE_STREAM ((uintptr_t)0xCA)
static struct {
  int count, rank;          /* what the communicator says */
  int reduces, gathers;
  const void *send;
  void *recv;
  size_t n;
  int dtype, op, launches_before;
  void *comm, *stream;
  int streams, stream_destroys, begins, ends, mode;
  bool capturing;
} N;
static hk_nccl_result_t n_all_reduce(const void *send, void *recv, size_t n, int dtype, int op, void *comm,
                                     void *stream) {
  N.reduces++, N.send = send, N.recv = recv, N.n = n, N.dtype = dtype, N.op = op, N.comm = comm, N.stream = stream;
  N.launches_before = F.kernel_launches;
  return 0;
}
static hk_nccl_result_t n_all_gather(const void *send, void *recv, size_t n, int dtype, void *comm, void *stream) {
  (void)send, (void)recv, (void)n, (void)dtype, (void)comm, (void)stream;
  N.gathers++;
  return 0;
}
static hk_nccl_result_t n_count(const void *comm, int *count) { return comm == FAKE_COMM ? (*count = N.count, 0) : 4; }
static hk_nccl_result_t n_rank(const void *comm, int *rank) { return comm == FAKE_COMM ? (*rank = N.rank, 0) : 4; }
static const char *n_error(hk_nccl_result_t r) { return r == 4 ? "invalid argument" : "?"; }
static hk_cu_result_t f_cuStreamCreate(hk_cu_stream_t *s, unsigned flags) {
  N.streams++;
  *s = (hk_cu_stream_t)FAKE_CAPTURE_STREAM;
  return flags == HK_CU_STREAM_NON_BLOCKING ? 0 : 1;
}
static hk_cu_result_t f_cuStreamDestroy(hk_cu_stream_t s) { return N.stream_destroys++, U(s) == FAKE_CAPTURE_STREAM ? 0 : 1; }
static hk_cu_result_t f_cuStreamBeginCapture(hk_cu_stream_t s, int mode) {
  N.begins++, N.mode = mode, N.capturing = true;
  return U(s) == FAKE_CAPTURE_STREAM ? 0 : 1;
}
static hk_cu_result_t f_cuStreamEndCapture(hk_cu_stream_t s, hk_cu_graph_t *g) {
  N.ends++, N.capturing = false;
  *g = (hk_cu_graph_t)FAKE_GRAPH;
  return U(s) == FAKE_CAPTURE_STREAM ? 0 : 1;
}

static hk_hip_error_t f_hipStreamCreateWithFlags(hk_hip_stream_t *s, unsigned flags) {
  return f_cuStreamCreate((hk_cu_stream_t *)s, flags);
}
static hk_hip_error_t f_hipStreamDestroy(hk_hip_stream_t s) { return f_cuStreamDestroy((hk_cu_stream_t)s); }
static hk_hip_error_t f_hipStreamBeginCapture(hk_hip_stream_t s, int mode) {
  return f_cuStreamBeginCapture((hk_cu_stream_t)s, mode);
}
static hk_hip_error_t f_hipStreamEndCapture(hk_hip_stream_t s, hk_hip_graph_t *g) {
  return f_cuStreamEndCapture((hk_cu_stream_t)s, (hk_cu_graph_t *)g);
}

/* vendor v's target of a 2-rank pack: add, mul, then an all_reduce of y into t (a kernel record
 * without code), in every graph; the fake NCCL (CUDA) or RCCL (HIP) installed. */
static hk_pack_t *open_tp_pack(state_t *st, const vendor_t *v) {
  v->install();
  if (v->cuda) {
    g_cu_table.cuStreamCreate = f_cuStreamCreate;
    g_cu_table.cuStreamDestroy = f_cuStreamDestroy;
    g_cu_table.cuStreamBeginCapture = f_cuStreamBeginCapture;
    g_cu_table.cuStreamEndCapture = f_cuStreamEndCapture;
    hk_cuda_override_symbols(&g_cu_table);
  } else {
    g_hip_table.hipStreamCreateWithFlags = f_hipStreamCreateWithFlags;
    g_hip_table.hipStreamDestroy = f_hipStreamDestroy;
    g_hip_table.hipStreamBeginCapture = f_hipStreamBeginCapture;
    g_hip_table.hipStreamEndCapture = f_hipStreamEndCapture;
    hk_hip_override_symbols(&g_hip_table);
  }
  memset(&N, 0, sizeof N);
  N.count = 2;
  N.rank = 1;
  static const hk_nccl_symbols_t nccl = {.ncclAllReduce = n_all_reduce, .ncclAllGather = n_all_gather,
                                         .ncclCommCount = n_count, .ncclCommUserRank = n_rank,
                                         .ncclGetErrorString = n_error};
  if (v->cuda) hk_nccl_override_symbols(&nccl);
  else hk_rccl_override_symbols(&nccl);
  static hkc_kernel_out_t kernels[3];
  static hkc_launch_t launches[FX_MAX_GRAPHS][3];
  static hkc_graph_out_t graphs[FX_MAX_GRAPHS];
  static uint32_t dep1 = 1;
  memcpy(kernels, st->fx.kernels_cuda, 2 * sizeof *kernels);
  memset(&kernels[2], 0, sizeof kernels[2]);
  snprintf(kernels[2].name, sizeof kernels[2].name, "hk_all_reduce_f32");
  snprintf(kernels[2].params, sizeof kernels[2].params, "op=all_reduce");
  kernels[2].key.op = HK_OP_ALL_REDUCE;
  for (int g = 0; g < st->fx.spec.n_batch; g++) {
    memcpy(launches[g], st->fx.launches[g], 2 * sizeof launches[g][0]);
    hkc_launch_t *l = &launches[g][2];
    memset(l, 0, sizeof *l);
    l->kernel = 2;
    l->node_name = "mul_all_reduce";
    l->grid[0] = l->grid[1] = l->grid[2] = l->block[0] = l->block[1] = l->block[2] = 1;
    l->args[0] = (hkc_arg_t){HK_ARG_TENSOR, 3, 0};                          /* in: y */
    l->args[1] = (hkc_arg_t){HK_ARG_TENSOR, 2, 0};                          /* out: t */
    l->args[2] = (hkc_arg_t){HK_ARG_I64, st->fx.spec.batch_sizes[g] * FX_COLS, 0}; /* n */
    l->n_args = 3;
    l->deps = &dep1;
    l->n_deps = 1;
    graphs[g] = st->fx.graphs[g];
    graphs[g].launches = launches[g];
    graphs[g].n_launches = 3;
  }
  st->targets[v->first].kernels = kernels;
  st->targets[v->first].n_kernels = 3;
  st->targets[v->first].graphs = graphs;
  st->fx.spec.sharded_ranks = 2;
  return open_pack(st, v->first, 1);
}

/* A rank's session: refused without a communicator or with one of another rank; stream launches
 * run the kernels, then ncclAllReduce of y into t on the run's stream; a graph is captured from
 * the session's own stream (the all_reduce inside it) and captured again after a bind. */
static void collectives(void **ts, const vendor_t *v) {
  state_t *st = *ts;
  hk_pack_t *pack = open_tp_pack(st, v);
  assert_int_equal(hk_pack_tensor_ranks(pack), 2);
  hk_session_t *s = NULL;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_FAILED_PRECONDITION);
  assert_contains(hk_last_error(), "one of 2 tensor-parallel ranks");
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .comm = FAKE_COMM, .tensor_rank = 0), &s),
                   HK_STATUS_INVALID_ARGUMENT);
  assert_contains(hk_last_error(), v->cuda ? "the NCCL communicator has 2 ranks and is rank 1; the session is rank 0"
                                           : "the RCCL communicator has 2 ranks and is rank 1; the session is rank 0");
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .comm = FAKE_COMM, .tensor_rank = 2), &s),
                   HK_STATUS_INVALID_ARGUMENT);

  void *stream = (void *)(uintptr_t)0x777;
  bufs_t b;
  s = pdl_session(pack, HK_TEST_OPTIONS(.batch = 2, .launch_mode = HK_LAUNCH_MODE_STREAM, .comm = FAKE_COMM,
                                        .tensor_rank = 1), &b, stream);
  assert_launch_mode(s, "stream", NULL);
  assert_int_equal(N.reduces, 1);
  assert_int_equal(N.launches_before, 2); /* after add and mul */
  assert_ptr_equal(N.send, b.y);
  assert_ptr_equal(N.recv, hk_session_debug_arena(s)); /* t, placed at 0 */
  assert_int_equal(N.n, 2 * FX_COLS);
  assert_int_equal(N.dtype, HK_NCCL_FLOAT32);
  assert_int_equal(N.op, HK_NCCL_SUM);
  assert_ptr_equal(N.comm, FAKE_COMM);
  assert_ptr_equal(N.stream, stream);
  assert_int_equal(N.begins, 0);
  close_session(s, &b);

  memset(&N, 0, sizeof N);
  N.count = 2, N.rank = 1;
  s = pdl_session(pack, HK_TEST_OPTIONS(.batch = 2, .comm = FAKE_COMM, .tensor_rank = 1), &b, stream);
  assert_launch_mode(s, "graph", NULL);
  assert_int_equal(N.streams, 1);
  assert_int_equal(N.mode, HK_CU_STREAM_CAPTURE_MODE_RELAXED);
  assert_true(N.begins >= 1 && N.ends == N.begins && !N.capturing);
  const int captures = N.begins; /* at create; the first run may capture again (bindings) */
  assert_int_equal(N.reduces, captures);
  assert_ptr_equal(N.stream, (void *)FAKE_CAPTURE_STREAM);
  assert_ptr_equal(N.send, b.y);
  assert_int_equal(F.graph_launches, 1);
  assert_int_equal(hk_session_run(s, stream), HK_OK); /* no bind since: the same graph */
  assert_int_equal(N.begins, captures);
  assert_int_equal(F.graph_launches, 2);
  void *y2 = NULL;
  assert_int_equal(hk_session_alloc(s, 2 * FX_COLS * sizeof(float), &y2), HK_OK);
  assert_int_equal(hk_session_bind(s, "y", y2, 2 * FX_COLS * sizeof(float)), HK_OK);
  assert_int_equal(hk_session_run(s, stream), HK_OK); /* y moved: captured again, reading y2 */
  assert_int_equal(N.begins, captures + 1);
  assert_ptr_equal(N.send, y2);
  assert_int_equal(F.graph_launches, 3);
  hk_session_free(s, y2);
  close_session(s, &b);
  assert_int_equal(N.stream_destroys, 1);
  assert_int_equal(F.frees, F.allocs);
}

FOR_BOTH_VENDORS(collectives)

static void test_real_cuda_device(void **ts) {
  (void)ts;
  hk_cuda_override_symbols(NULL);
  if (!hk_backend_cuda.available()) {
    fprintf(stderr, "no CUDA device: %s\n", hk_backend_cuda.unavailable_reason());
    skip();
  }
  char d[256];
  hk_backend_cuda.describe(d, sizeof d);
  fprintf(stderr, "CUDA here: %s; running real cubins is left to the device harness\n", d);
  assert_true(d[0] != '\0');
  skip();
}

/* The code a CUDA session runs when its target stores PTX: exact or compatible cubins first,
 * PTX (JIT) where no cubin runs, PTX first with prefer_ptx; an sm_90a target's PTX only on
 * 9.0. The fake driver counts the images that were PTX text. */
static void test_cuda_ptx_choice(void **ts) {
  state_t *st = *ts;
  static const char ptx[] = ".version 8.0 // hk_test_addc\0\0\0\0.version 8.0 // hk_test_mul";
  hkc_target_out_t *cuda = &st->targets[0];
  snprintf(cuda->name, sizeof cuda->name, "sm_80");
  cuda->ptx = (void *)ptx;
  cuda->ptx_size = sizeof ptx;
  st->fx.kernels_cuda[0].ptx_offset = 0;
  st->fx.kernels_cuda[0].ptx_size = 29;
  st->fx.kernels_cuda[1].ptx_offset = 32;
  st->fx.kernels_cuda[1].ptx_size = sizeof ptx - 32;
  static const struct {
    int major, minor, prefer;
    hk_status_t status;
    hk_code_kind_t kind;
  } cases[] = {
      {8, 0, 0, HK_OK, HK_CODE_NATIVE}, /* exact cubin */
      {8, 6, 0, HK_OK, HK_CODE_NATIVE}, /* compatible cubin beats PTX */
      {8, 6, 1, HK_OK, HK_CODE_PTX},    /* unless PTX is preferred */
      {9, 0, 0, HK_OK, HK_CODE_PTX},    /* no cubin runs on 9.0: the driver JITs the PTX */
      {12, 0, 0, HK_OK, HK_CODE_PTX},
      {7, 5, 0, HK_STATUS_NO_COMPATIBLE_TARGET, HK_CODE_NATIVE}, /* neither runs on an older GPU */
      {7, 5, 1, HK_STATUS_NO_COMPATIBLE_TARGET, HK_CODE_NATIVE},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    install_fake_cuda();
    F.major = cases[i].major;
    F.minor = cases[i].minor;
    hk_pack_t *pack = open_pack(st, 0, 1);
    hk_session_t *s = NULL;
    hk_status_t got = hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .prefer_ptx = (uint32_t)cases[i].prefer), &s);
    if (got != cases[i].status)
      fail_msg("case %zu (%d.%d, prefer %d): %s: %s", i, cases[i].major, cases[i].minor, cases[i].prefer,
               hk_status_string(got), hk_last_error());
    if (got == HK_OK) {
      assert_int_equal(hk_session_code_kind(s), cases[i].kind);
      assert_int_equal(F.ptx_loads, cases[i].kind == HK_CODE_PTX ? 2 : 0);
      /* the named target chooses its code the same way */
      hk_session_t *named = NULL;
      assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .target = "sm_80",
                                                               .prefer_ptx = (uint32_t)cases[i].prefer), &named),
                       HK_OK);
      assert_int_equal(hk_session_code_kind(named), cases[i].kind);
      hk_session_destroy(named);
    }
    hk_session_destroy(s);
  }
  /* an arch-specific target's PTX is for that GPU only */
  snprintf(cuda->name, sizeof cuda->name, "sm_90a");
  install_fake_cuda();
  F.major = 10;
  hk_pack_t *pack = open_pack(st, 0, 1);
  hk_session_t *s = NULL;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_NO_COMPATIBLE_TARGET);
  install_fake_cuda();
  pack = open_pack(st, 0, 1);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .prefer_ptx = 1), &s), HK_OK);
  assert_int_equal(hk_session_code_kind(s), HK_CODE_PTX);
  hk_session_destroy(s);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .prefer_ptx = 2), &s),
                   HK_STATUS_INVALID_ARGUMENT);
  /* PTX of a target without: NATIVE, the module without PTX */
  cuda->ptx = NULL;
  cuda->ptx_size = 0;
  install_fake_cuda();
  pack = open_pack(st, 0, 1);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .prefer_ptx = 1), &s), HK_OK);
  assert_int_equal(hk_session_code_kind(s), HK_CODE_NATIVE);
  assert_int_equal(F.ptx_loads, 0);
  hk_session_destroy(s);
  assert_int_equal(hk_session_code_kind(NULL), HK_CODE_NATIVE);
}

int main(void) {
#define BOTH(name)                                                              \
  cmocka_unit_test_setup_teardown(test_##name##_cuda, setup, teardown),         \
      cmocka_unit_test_setup_teardown(test_##name##_hip, setup, teardown)
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_gpu_targets_unavailable, setup, teardown),
      cmocka_unit_test(test_cuda_target_rank),
      cmocka_unit_test(test_cuda_ptx_rank),
      cmocka_unit_test_setup_teardown(test_cuda_ptx_choice, setup, teardown),
      cmocka_unit_test(test_hip_target_rank),
      cmocka_unit_test(test_hip_arch_name_scan),
      cmocka_unit_test(test_image_check),
      BOTH(graph_session),
      BOTH(stream_fallback),
      BOTH(profile),
      BOTH(errors),
      BOTH(shared_object),
      BOTH(forged_launch),
      BOTH(padded_session),
      cmocka_unit_test_setup_teardown(test_fake_cuda_v1_graph_api, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_cuda_tmap_graph, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_cuda_tmap_stream_padded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_cuda_tmap_no_encoder, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_cuda_pdl_graph, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_cuda_pdl_stream, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_cuda_pdl_old_driver, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_cuda_pdl_option_off, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_cuda_pdl_profile, setup, teardown),
      cmocka_unit_test_setup_teardown(test_fake_cuda_pdl_edge_error, setup, teardown),
      BOTH(collectives),
      cmocka_unit_test_setup_teardown(test_real_cuda_device, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
