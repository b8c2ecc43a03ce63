/* SPDX-License-Identifier: Apache-2.0 */
/* hiprtc + comgr: real compiles for gfx90a / gfx908 / gfx1030 (no GPU needed), once in this
 * process (no workers started) and once through hkc's worker processes ($HKC_BIN), as
 * `hkc build` runs them. Every test skips visibly when the ROCm toolchain is not installed. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "hkc.h"
#include "test_util.h"

static const char k_saxpy[] =
    "extern \"C\" __global__ void saxpy(float a, const float* x, float* y, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

/* 4 KiB of LDS: 1024 floats. */
static const char k_lds[] =
    "extern \"C\" __global__ void __launch_bounds__(256) rev(const float* x, float* y) {\n"
    "  __shared__ float tile[1024];\n"
    "  int t = threadIdx.x;\n"
    "  for (int k = 0; k < 4; k++) tile[t + 256 * k] = x[blockIdx.x * 1024 + t + 256 * k];\n"
    "  __syncthreads();\n"
    "  for (int k = 0; k < 4; k++) y[blockIdx.x * 1024 + t + 256 * k] = tile[1023 - t - 256 * k];\n"
    "}\n";

/* A dynamically indexed private array that cannot live in registers -> scratch. */
static const char k_spill[] =
    "extern \"C\" __global__ void spill(const int* idx, float* y) {\n"
    "  float a[512];\n"
    "  for (int k = 0; k < 512; k++) a[k] = y[k] * 2.0f;\n"
    "  y[threadIdx.x] = a[idx[threadIdx.x] & 511];\n"
    "}\n";

static const char k_mfma[] =
    "typedef _Float16 half4 __attribute__((ext_vector_type(4)));\n"
    "typedef float float4v __attribute__((ext_vector_type(4)));\n"
    "extern \"C\" __global__ void mm(const half4* a, const half4* b, float4v* c) {\n"
    "  int t = threadIdx.x;\n"
    "  c[t] = __builtin_amdgcn_mfma_f32_16x16x16f16(a[t], b[t], c[t], 0, 0, 0);\n"
    "}\n";

static const char k_syntax[] =
    "extern \"C\" __global__ void broken(float* y) {\n"
    "  y[0] = 1.0f\n"
    "  y[1] = 2.0f;\n"
    "}\n";

static void check_elf(const hkc_rtc_result_t *r) {
  assert_non_null(r->code);
  assert_true(r->code_size > 64);
  const unsigned char *p = r->code;
  assert_memory_equal(p, "\177ELF\2\1", 6);
  assert_int_equal(p[18] | p[19] << 8, 224); /* EM_AMDGPU */
}

static void compile_ok(const char *src, const char *name, const char *arch, hkc_rtc_result_t *r) {
  int rc = hkc_hiprtc_compile(src, name, arch, r);
  if (rc != 0) print_message("compile %s for %s failed:\n%s\n", name, arch, r->log ? r->log : "(no log)");
  assert_int_equal(rc, 0);
  check_elf(r);
}

static void test_version(void **state) {
  HK_TEST_NEED_HIPRTC();
  const char *v = hkc_hiprtc_version();
  printf("%s\n", v);
  assert_true(strncmp(v, "hiprtc ", 7) == 0);
  assert_non_null(strstr(v, "comgr "));
}

static void test_isa_list(void **state) {
  HK_TEST_NEED_HIPRTC();
  char **names = NULL;
  size_t n = 0;
  char why[256];
  assert_int_equal(hkc_comgr_isa_list(&names, &n, why, sizeof why), 0);
  int has90a = 0;
  for (size_t i = 0; i < n; i++) {
    assert_true(strncmp(names[i], "gfx", 3) == 0);
    has90a |= strcmp(names[i], "gfx90a") == 0;
    free(names[i]);
  }
  free(names);
  assert_true(has90a);
}

static void test_saxpy_archs(void **state) {
  HK_TEST_NEED_HIPRTC();
  static const struct { const char *arch; uint32_t wave; } cases[] = {
      {"gfx90a", 64}, {"gfx90a:xnack-", 64}, {"gfx908", 64}, {"gfx1030", 32}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    hkc_rtc_result_t r;
    compile_ok(k_saxpy, "saxpy", cases[i].arch, &r);
    printf("%-14s saxpy: %zu bytes, vgprs %u agprs %u sgprs %u lds %u scratch %u wave %u max_block %u\n",
           cases[i].arch, r.code_size, r.vgprs, r.agprs, r.sgprs, r.shared_bytes, r.scratch_bytes, r.wave_size,
           r.max_block);
    assert_true(r.vgprs > 0 && r.vgprs < 64);
    assert_true(r.sgprs > 0);
    assert_int_equal(r.shared_bytes, 0);
    assert_int_equal(r.scratch_bytes, 0);
    assert_int_equal(r.wave_size, cases[i].wave);
    assert_int_equal(r.max_block, 1024);
    hkc_rtc_result_free(&r);
  }
}

static void test_lds_and_bounds(void **state) {
  HK_TEST_NEED_HIPRTC();
  hkc_rtc_result_t r;
  compile_ok(k_lds, "rev", "gfx90a", &r);
  assert_int_equal(r.shared_bytes, 1024 * sizeof(float));
  assert_int_equal(r.max_block, 256);
  hkc_rtc_result_free(&r);
}

static void test_spill_scratch(void **state) {
  HK_TEST_NEED_HIPRTC();
  hkc_rtc_result_t r;
  compile_ok(k_spill, "spill", "gfx90a", &r);
  printf("spill: scratch %u bytes\n", r.scratch_bytes);
  assert_true(r.scratch_bytes >= 512 * sizeof(float));
  hkc_rtc_result_free(&r);
}

static void test_mfma_disassembly(void **state) {
  HK_TEST_NEED_HIPRTC();
  static const char *const archs[] = {"gfx90a", "gfx908"};
  for (size_t i = 0; i < 2; i++) {
    hkc_rtc_result_t r;
    compile_ok(k_mfma, "mm", archs[i], &r);
    char *text = NULL;
    char why[512];
    int rc = hkc_comgr_disassemble(r.code, r.code_size, archs[i], &text, why, sizeof why);
    if (rc != 0) print_message("disassemble: %s\n", why);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(text, "v_mfma_f32_16x16x16f16"));
    if (i == 0) assert_non_null(strstr(text, "s_endpgm"));
    free(text);
    hkc_rtc_result_free(&r);
  }
}

static void test_mfma_refused_on_rdna(void **state) {
  HK_TEST_NEED_HIPRTC();
  hkc_rtc_result_t r;
  assert_int_equal(hkc_hiprtc_compile(k_mfma, "mm", "gfx1030", &r), -1);
  assert_non_null(r.log);
  assert_null(r.code);
  hkc_rtc_result_free(&r);
}

static void test_syntax_error(void **state) {
  HK_TEST_NEED_HIPRTC();
  hkc_rtc_result_t r;
  assert_int_equal(hkc_hiprtc_compile(k_syntax, "broken", "gfx90a", &r), -1);
  assert_null(r.code);
  assert_non_null(r.log);
  printf("log: %s\n", r.log);
  assert_non_null(strstr(r.log, ":2:")); /* the missing ';' is on line 2 */
  assert_non_null(strstr(r.log, "error"));
  hkc_rtc_result_free(&r);
}

static void test_missing_kernel(void **state) {
  HK_TEST_NEED_HIPRTC();
  hkc_rtc_result_t r;
  assert_int_equal(hkc_hiprtc_compile(k_saxpy, "nosuch", "gfx90a", &r), -1);
  assert_null(r.code);
  assert_non_null(strstr(r.log, "saxpy"));
  hkc_rtc_result_free(&r);
}

static void test_unknown_arch(void **state) {
  HK_TEST_NEED_HIPRTC();
  char **names = NULL;
  size_t n = 0;
  char why[256];
  assert_int_equal(hkc_comgr_isa_list(&names, &n, why, sizeof why), 0);
  int has942 = 0;
  for (size_t i = 0; i < n; i++) {
    has942 |= strcmp(names[i], "gfx942") == 0;
    free(names[i]);
  }
  free(names);
  static const char *const bad[] = {"gfx9999", "gfx942", "gfx90a:bogus", "sm_90", ""};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    if (i == 1 && has942) continue; /* a newer ROCm builds gfx942 */
    hkc_rtc_result_t r;
    assert_int_equal(hkc_hiprtc_compile(k_saxpy, "saxpy", bad[i], &r), -1);
    assert_null(r.code);
    assert_non_null(r.log);
    assert_non_null(strstr(r.log, "buildable targets"));
    assert_non_null(strstr(r.log, "gfx90a"));
    hkc_rtc_result_free(&r);
  }
}

typedef struct {
  const char *arch;
  int rc;
  uint32_t vgprs;
} thread_job_t;

static void *compile_thread(void *arg) {
  thread_job_t *job = arg;
  hkc_rtc_result_t r;
  job->rc = hkc_hiprtc_compile(k_mfma, "mm", job->arch, &r);
  job->vgprs = r.vgprs;
  hkc_rtc_result_free(&r);
  return NULL;
}

static void test_two_threads(void **state) {
  HK_TEST_NEED_HIPRTC();
  thread_job_t jobs[4] = {{"gfx90a", -1, 0}, {"gfx908", -1, 0}, {"gfx90a", -1, 0}, {"gfx908", -1, 0}};
  pthread_t th[4];
  for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, compile_thread, &jobs[i]), 0);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) {
    assert_int_equal(jobs[i].rc, 0);
    assert_true(jobs[i].vgprs > 0);
  }
  assert_int_equal(jobs[0].vgprs, jobs[2].vgprs);
  assert_int_equal(jobs[1].vgprs, jobs[3].vgprs);
}

/* The same bytes through 4 threads on the workers as one at a time in this process. */
typedef struct {
  const char *arch;
  hkc_rtc_result_t r;
  int rc;
} code_job_t;

static void *code_thread(void *arg) {
  code_job_t *job = arg;
  job->rc = hkc_hiprtc_compile(k_lds, "rev", job->arch, &job->r);
  return NULL;
}

static void test_workers_match_in_process(void **state) {
  HK_TEST_NEED_HIPRTC();
  if (hk_test_start_amd_workers(2) != 0) skip();
  code_job_t jobs[6] = {{.arch = "gfx90a"}, {.arch = "gfx908"}, {.arch = "gfx1030"},
                        {.arch = "gfx90a"}, {.arch = "gfx908"}, {.arch = "gfx1030"}};
  pthread_t th[6];
  for (int i = 0; i < 6; i++) assert_int_equal(pthread_create(&th[i], NULL, code_thread, &jobs[i]), 0);
  for (int i = 0; i < 6; i++) pthread_join(th[i], NULL);
  unsigned started, replaced;
  hkc_amd_workers_counts(&started, &replaced);
  assert_true(started >= 1 && started <= 2);
  assert_int_equal(replaced, 0);
  hkc_amd_workers_stop(); /* from here on: in this process */
  for (int i = 0; i < 6; i++) {
    assert_int_equal(jobs[i].rc, 0);
    hkc_rtc_result_t local;
    compile_ok(k_lds, "rev", jobs[i].arch, &local);
    assert_int_equal(local.code_size, jobs[i].r.code_size);
    assert_memory_equal(local.code, jobs[i].r.code, local.code_size);
    assert_int_equal(local.vgprs, jobs[i].r.vgprs);
    assert_int_equal(local.shared_bytes, jobs[i].r.shared_bytes);
    hkc_rtc_result_free(&local);
    hkc_rtc_result_free(&jobs[i].r);
  }
}

/* A worker that dies on every job: the compile fails (after one retry) with a log naming
 * the kernel, the target and the signal; the caller survives. */
static void test_dying_worker_is_reported(void **state) {
  HK_TEST_NEED_HIPRTC();
  char *dir = hk_test_tmpdir(), script[512];
  snprintf(script, sizeof script, "%s/dies.sh", dir);
  FILE *f = fopen(script, "w");
  assert_non_null(f);
  fputs("#!/bin/sh\nkill -SEGV $$\n", f);
  fclose(f);
  assert_int_equal(chmod(script, 0755), 0);
  assert_int_equal(hkc_amd_workers_start(script, 1, 60), 0);
  hkc_rtc_result_t r;
  assert_int_equal(hkc_hiprtc_compile(k_saxpy, "saxpy", "gfx90a", &r), -1);
  assert_null(r.code);
  assert_non_null(r.log);
  printf("log: %s\n", r.log);
  assert_non_null(strstr(r.log, "saxpy"));
  assert_non_null(strstr(r.log, "gfx90a"));
  assert_non_null(strstr(r.log, "signal 11"));
  assert_non_null(strstr(r.log, "retried once"));
  hkc_rtc_result_free(&r);
  char **names = NULL;
  size_t n = 0;
  char why[512];
  assert_int_equal(hkc_comgr_isa_list(&names, &n, why, sizeof why), -1);
  assert_non_null(strstr(why, "signal 11"));
  hkc_amd_workers_stop();
  unlink(script);
  rmdir(dir);
  free(dir);
}

/* Damaged gfx90a objects (one byte flipped at a time; one such flip made comgr abort on an
 * assertion inside `hkc inspect --disasm`): on the workers each disassembly returns, text or
 * an error, and this process survives whatever comgr does with them. */
static void test_damaged_object_disassembly(void **state) {
  HK_TEST_NEED_HIPRTC();
  if (hk_test_start_amd_workers(1) != 0) skip();
  hkc_rtc_result_t r;
  compile_ok(k_mfma, "mm", "gfx90a", &r);
  unsigned char *copy = malloc(r.code_size);
  int ok = 0, failed = 0;
  for (size_t at = 17; at < r.code_size; at += r.code_size / 12 + 1) {
    memcpy(copy, r.code, r.code_size);
    copy[at] ^= 0xff;
    char *text = NULL, why[512];
    int rc = hkc_comgr_disassemble(copy, r.code_size, "gfx90a", &text, why, sizeof why);
    assert_true(rc == 0 || rc == -1);
    if (rc == 0) assert_non_null(text), ok++;
    else failed++;
    free(text);
  }
  unsigned started, replaced;
  hkc_amd_workers_counts(&started, &replaced);
  printf("damaged objects: %d disassembled, %d refused; workers started %u, replaced %u\n", ok, failed, started,
         replaced);
  free(copy);
  hkc_rtc_result_free(&r);
  hkc_amd_workers_stop();
}

static int in_process(void **state) {
  hkc_amd_workers_stop();
  return 0;
}

static int on_workers(void **state) {
  if (hk_test_start_amd_workers(2) != 0) printf("note: the worker group runs in this process\n");
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_version),         cmocka_unit_test(test_isa_list),
      cmocka_unit_test(test_saxpy_archs),     cmocka_unit_test(test_lds_and_bounds),
      cmocka_unit_test(test_spill_scratch),   cmocka_unit_test(test_mfma_disassembly),
      cmocka_unit_test(test_mfma_refused_on_rdna), cmocka_unit_test(test_syntax_error),
      cmocka_unit_test(test_missing_kernel),  cmocka_unit_test(test_unknown_arch),
      cmocka_unit_test(test_two_threads),
  };
  const struct CMUnitTest own[] = {
      cmocka_unit_test(test_workers_match_in_process),
      cmocka_unit_test(test_dying_worker_is_reported),
      cmocka_unit_test(test_damaged_object_disassembly),
  };
  int failed = cmocka_run_group_tests_name("in_process", tests, in_process, NULL);
  failed += cmocka_run_group_tests_name("workers", tests, on_workers, in_process);
  failed += cmocka_run_group_tests_name("worker_failures", own, NULL, in_process);
  return failed;
}
