/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cold start of a pack in a fresh process, as an application sees it.
 *
 *   1. CUDA context, measured on its own: dlopen libcuda.so.1, cuInit, retain the device's
 *      primary context, make it current (what the CUDA runtime or PyTorch does at its first
 *      call). libhkrt later retains the same primary context (backend_cuda.c), so its own
 *      set-up finds the context made; this program checks that the context current after
 *      session create is still this one.
 *   2. First result, timed from here: hk_pack_open_file -> hk_session_create -> every tensor
 *      allocated with hk_session_alloc, filled (hk_session_copy from host data made
 *      beforehand, outside the timer; outputs NaN-poisoned) and bound -> hk_session_run ->
 *      hk_session_synchronize.
 *   3. One more run + synchronize (steady state, for comparison), then the outputs are read
 *      back: any non-finite element fails the program (exit 1).
 *
 * Prints the phases in words, then one JSON line (the last line of stdout) that
 * bench/lib/peers.py parses. Run it several times as separate processes for a median.
 *
 *   usage: hk_bench_cold PACK [--batch N] [--target T] [--device D]
 *
 * --target host* skips step 1 (no GPU needed: this is how the program is tested on a
 * machine without one). Uses only the public API (hk/hkrt.h) plus the driver entry points
 * of step 1, declared here as an application without cuda.h would.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "hk/hkrt.h"

typedef int cu_result_t;
typedef int cu_device_t;
typedef void *cu_context_t;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die_hk(const char *what) {
  fprintf(stderr, "hk_bench_cold: %s failed: %s\n", what, hk_last_error());
  exit(1);
}

/* float -> bf16 bits, round to nearest even (finite inputs only). */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* float -> IEEE half bits, round to nearest even; |f| here is < 2, so no overflow. */
static uint16_t to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  int32_t exp = (int32_t)((u >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = u & 0x7FFFFFu;
  if (exp <= 0) { /* subnormal half (or zero) */
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) half++;
    return (uint16_t)(sign | half);
  }
  uint32_t half = sign | ((uint32_t)exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) half++;
  return (uint16_t)half;
}

static int is_finite_elem(const unsigned char *p, hk_element_type_t t) {
  if (t == HK_ELEMENT_F32) {
    float f;
    memcpy(&f, p, 4);
    return isfinite(f);
  }
  uint16_t h;
  memcpy(&h, p, 2);
  if (t == HK_ELEMENT_BF16) return (h & 0x7F80u) != 0x7F80u;
  return (h & 0x7C00u) != 0x7C00u;
}

static size_t elem_size(hk_element_type_t t) { return t == HK_ELEMENT_F32 ? 4 : 2; }

/* Host data for one tensor: uniform [-1, 1) from a per-tensor LCG, times 1/sqrt(dims[0]) for
 * params of rank >= 2 (weights), so values stay in range through the layer; outputs all
 * ones-bits (NaN in f32, f16 and bf16). */
static unsigned char *host_data(const hk_tensor_info_t *info, uint32_t index) {
  unsigned char *h = malloc(info->bytes ? info->bytes : 1);
  if (!h) {
    fprintf(stderr, "hk_bench_cold: out of host memory (%zu bytes)\n", info->bytes);
    exit(1);
  }
  if (info->role == HK_TENSOR_OUTPUT) {
    memset(h, 0xFF, info->bytes);
    return h;
  }
  float scale = (info->role == HK_TENSOR_PARAM && info->rank >= 2 && info->dims[0] > 0)
                    ? 1.0f / sqrtf((float)info->dims[0]) : 1.0f;
  uint64_t state = 0x9E3779B97F4A7C15ull * (index + 1);
  size_t es = elem_size(info->element_type), n = info->bytes / es;
  for (size_t i = 0; i < n; i++) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    float v = ((float)(state >> 40) / (float)(1u << 24) * 2.0f - 1.0f) * scale;
    if (info->element_type == HK_ELEMENT_F32) {
      memcpy(h + i * 4, &v, 4);
    } else {
      uint16_t b = info->element_type == HK_ELEMENT_BF16 ? to_bf16(v) : to_f16(v);
      memcpy(h + i * 2, &b, 2);
    }
  }
  return h;
}

typedef cu_result_t (*cu_init_fn)(unsigned int);
typedef cu_result_t (*cu_device_get_fn)(cu_device_t *, int);
typedef cu_result_t (*cu_retain_fn)(cu_context_t *, cu_device_t);
typedef cu_result_t (*cu_set_current_fn)(cu_context_t);
typedef cu_result_t (*cu_get_current_fn)(cu_context_t *);

typedef struct {
  double dlopen_ms, init_ms, retain_ms, total_ms;
  cu_context_t ctx;
  cu_get_current_fn get_current;
} context_times_t;

/* Step 1: the application's CUDA context (the device's primary context, current). */
static context_times_t make_context(int device) {
  context_times_t c = {0};
  double t0 = now_ms();
  void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    fprintf(stderr, "hk_bench_cold: dlopen libcuda.so.1 failed (%s); use --target host on a machine without a GPU\n",
            dlerror());
    exit(1);
  }
  double t1 = now_ms();
  cu_init_fn cu_init = (cu_init_fn)dlsym(dl, "cuInit");
  cu_device_get_fn cu_device_get = (cu_device_get_fn)dlsym(dl, "cuDeviceGet");
  cu_retain_fn cu_retain = (cu_retain_fn)dlsym(dl, "cuDevicePrimaryCtxRetain");
  cu_set_current_fn cu_set_current = (cu_set_current_fn)dlsym(dl, "cuCtxSetCurrent");
  c.get_current = (cu_get_current_fn)dlsym(dl, "cuCtxGetCurrent");
  if (!cu_init || !cu_device_get || !cu_retain || !cu_set_current || !c.get_current) {
    fprintf(stderr, "hk_bench_cold: libcuda.so.1 lacks a driver entry point\n");
    exit(1);
  }
  cu_result_t r = cu_init(0);
  double t2 = now_ms();
  cu_device_t dev = 0;
  if (r == 0) r = cu_device_get(&dev, device);
  if (r == 0) r = cu_retain(&c.ctx, dev);
  if (r == 0) r = cu_set_current(c.ctx);
  double t3 = now_ms();
  if (r != 0) {
    fprintf(stderr, "hk_bench_cold: CUDA context creation failed: CUDA error %d\n", r);
    exit(1);
  }
  c.dlopen_ms = t1 - t0;
  c.init_ms = t2 - t1;
  c.retain_ms = t3 - t2;
  c.total_ms = t3 - t0;
  return c; /* the library handle and the context stay until exit, as in an application */
}

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: %s PACK [--batch N] [--target T] [--device D]\n", argv[0]);
    return 2;
  }
  const char *path = argv[1], *target = NULL;
  uint64_t batch = 1;
  int device = 0;
  for (int i = 2; i < argc; i++) {
    if (i + 1 >= argc) {
      fprintf(stderr, "hk_bench_cold: %s needs a value\n", argv[i]);
      return 2;
    }
    if (!strcmp(argv[i], "--batch")) batch = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--target")) target = argv[++i];
    else if (!strcmp(argv[i], "--device")) device = atoi(argv[++i]);
    else {
      fprintf(stderr, "hk_bench_cold: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  int host = target && strncmp(target, "host", 4) == 0;
  context_times_t ctx = {0};
  if (!host) ctx = make_context(device);

  /* step 2: open -> create -> alloc + fill + bind -> run -> synchronize */
  double t_open = now_ms();
  hk_pack_t *pack;
  /* the benchmark's own pack: unsigned, host code allowed (hkrt.h, trust) */
  const hk_pack_open_options_t oo = {.struct_size = sizeof oo, .allow_unsigned_native_code = 1};
  if (hk_pack_open_file_ex(path, &oo, &pack) != HK_OK) die_hk("hk_pack_open_file_ex");
  double t_create = now_ms();
  hk_session_t *s;
  if (hk_session_create(pack, &(hk_session_options_t){.struct_size = sizeof(hk_session_options_t), .batch = batch, .target = target,
                                                  .device = device}, &s) != HK_OK)
    die_hk("hk_session_create");
  double t_created = now_ms();
  int same_context = -1; /* unknown on the host target */
  if (!host) {
    cu_context_t cur = NULL;
    same_context = ctx.get_current(&cur) == 0 && cur == ctx.ctx;
  }
  uint32_t n = hk_session_tensor_count(s);
  hk_tensor_info_t *info = calloc(n ? n : 1, sizeof *info);
  unsigned char **hostbuf = calloc(n ? n : 1, sizeof *hostbuf);
  void **dev = calloc(n ? n : 1, sizeof *dev);
  if (!info || !hostbuf || !dev) {
    fprintf(stderr, "hk_bench_cold: out of host memory\n");
    return 1;
  }
  size_t uploaded = 0;
  double prep_ms = 0, upload_ms = 0;
  for (uint32_t t = 0; t < n; t++) {
    if (hk_session_tensor_info(s, t, &info[t]) != HK_OK) die_hk("hk_session_tensor_info");
    double p0 = now_ms();
    hostbuf[t] = host_data(&info[t], t); /* the application's data: not the loader's cost */
    double p1 = now_ms();
    if (hk_session_alloc(s, info[t].bytes, &dev[t]) != HK_OK) die_hk("hk_session_alloc");
    if (hk_session_copy(s, dev[t], hostbuf[t], info[t].bytes, HK_COPY_HOST_TO_DEVICE) != HK_OK)
      die_hk("hk_session_copy");
    if (hk_session_bind(s, info[t].name, dev[t], info[t].bytes) != HK_OK) die_hk("hk_session_bind");
    double p2 = now_ms();
    prep_ms += p1 - p0;
    upload_ms += p2 - p1;
    uploaded += info[t].bytes;
  }
  double t_run = now_ms();
  if (hk_session_run(s, NULL) != HK_OK) die_hk("hk_session_run");
  double t_sync = now_ms();
  if (hk_session_synchronize(s, NULL) != HK_OK) die_hk("hk_session_synchronize");
  double t_done = now_ms();
  double first_ms = (t_done - t_open) - prep_ms;

  /* step 3: steady state, then the outputs */
  double t2 = now_ms();
  if (hk_session_run(s, NULL) != HK_OK) die_hk("hk_session_run (second)");
  if (hk_session_synchronize(s, NULL) != HK_OK) die_hk("hk_session_synchronize (second)");
  double second_ms = now_ms() - t2;
  size_t bad = 0, checked = 0;
  for (uint32_t t = 0; t < n; t++) {
    if (info[t].role != HK_TENSOR_OUTPUT) continue;
    if (hk_session_copy(s, hostbuf[t], dev[t], info[t].bytes, HK_COPY_DEVICE_TO_HOST) != HK_OK)
      die_hk("hk_session_copy (read back)");
    size_t es = elem_size(info[t].element_type);
    for (size_t i = 0; i < info[t].bytes / es; i++, checked++) bad += !is_finite_elem(hostbuf[t] + i * es, info[t].element_type);
  }
  struct stat st;
  long long pack_bytes = stat(path, &st) == 0 ? (long long)st.st_size : -1;
  const char *chosen = hk_session_target(s);

  printf("pack %s (%lld bytes), target %s, batch %llu, %u tensors, %zu bytes uploaded\n", path, pack_bytes, chosen,
         (unsigned long long)batch, n, uploaded);
  if (host)
    printf("  CUDA context          skipped (host target)\n");
  else
    printf("  CUDA context       %9.3f ms  (dlopen %.3f, cuInit %.3f, primary context retain + set current %.3f)\n",
           ctx.total_ms, ctx.dlopen_ms, ctx.init_ms, ctx.retain_ms);
  printf("  hk_pack_open_file  %9.3f ms\n", t_create - t_open);
  printf("  hk_session_create  %9.3f ms\n", t_created - t_create);
  printf("  alloc + upload + bind %6.3f ms  (host data made outside the timer: %.3f ms)\n", upload_ms, prep_ms);
  printf("  run (enqueue)      %9.3f ms\n", t_sync - t_run);
  printf("  synchronize        %9.3f ms\n", t_done - t_sync);
  printf("  FIRST RESULT       %9.3f ms after opening the pack (%.3f ms without the upload)\n", first_ms,
         first_ms - upload_ms);
  printf("  second run + sync  %9.3f ms\n", second_ms);
  if (!host && !same_context)
    printf("  WARNING: the context current after hk_session_create is not the primary context made in step 1\n");
  printf("  outputs: %zu elements, %zu non-finite\n", checked, bad);
  printf("{\"pack\": \"%s\", \"pack_bytes\": %lld, \"target\": \"%s\", \"batch\": %llu, \"tensors\": %u, "
         "\"uploaded_bytes\": %zu, \"ctx_ms\": %.4f, \"dlopen_ms\": %.4f, \"cuinit_ms\": %.4f, \"ctx_retain_ms\": %.4f, "
         "\"open_ms\": %.4f, \"create_ms\": %.4f, \"upload_ms\": %.4f, \"host_prep_ms\": %.4f, \"run_ms\": %.4f, "
         "\"sync_ms\": %.4f, \"first_result_ms\": %.4f, \"first_result_no_upload_ms\": %.4f, \"second_run_ms\": %.4f, "
         "\"same_context\": %s, \"output_elements\": %zu, \"nonfinite\": %zu}\n",
         path, pack_bytes, chosen, (unsigned long long)batch, n, uploaded, ctx.total_ms, ctx.dlopen_ms, ctx.init_ms,
         ctx.retain_ms, t_create - t_open, t_created - t_create, upload_ms, prep_ms, t_sync - t_run, t_done - t_sync,
         first_ms, first_ms - upload_ms, second_ms, same_context < 0 ? "null" : same_context ? "true" : "false",
         checked, bad);
  for (uint32_t t = 0; t < n; t++) {
    hk_session_free(s, dev[t]);
    free(hostbuf[t]);
  }
  free(dev);
  free(hostbuf);
  free(info);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  return bad || !checked ? 1 : 0;
}
