/* SPDX-License-Identifier: Apache-2.0 */
/* The toolchain table (compiler/rtc/toolchain.h): every target name of the GPU target table
 * and "host" find their toolchain, unknown names fail with a message that lists the known
 * ones, every entry is complete, only nvrtc marks launches for programmatic dependent launch
 * (and only for variants whose kernels wait), and a small kernel compiles (and
 * disassembles) through each toolchain installed here, called only through the table. A
 * missing toolchain or disassembler skips its test, saying why. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_util.h"
#include "variant.h"

/* ---- lookups ------------------------------------------------------------------------------ */
static void test_every_target_finds_its_toolchain(void **state) {
  size_t n;
  const hkc_gpu_arch_t *list = hkc_gpu_arch_list(&n);
  assert_true(n > 0);
  for (size_t i = 0; i < n; i++) {
    const hkc_gpu_arch_t *arch = NULL;
    char why[256] = "";
    const hkc_toolchain_t *tc = hkc_toolchain_for_target(list[i].name, &arch, why, sizeof why);
    if (!tc) fail_msg("%s: %s", list[i].name, why);
    assert_ptr_equal(arch, &list[i]);
    assert_int_equal(tc->kind, list[i].kind);
    assert_ptr_equal(hkc_toolchain_for_arch(&list[i]), tc);
    assert_ptr_equal(hkc_toolchain_for_kind(list[i].kind), tc);
  }
  const hkc_gpu_arch_t *arch = &list[0];
  assert_ptr_equal(hkc_toolchain_for_target("host", &arch, NULL, 0), &hkc_toolchain_host);
  assert_null(arch); /* the host has no target table row */
  assert_ptr_equal(hkc_toolchain_for_target(hkc_host_target_name(), &arch, NULL, 0), &hkc_toolchain_host);
  assert_null(arch);
  assert_ptr_equal(hkc_toolchain_for_arch(NULL), &hkc_toolchain_host);
  /* AMD ISA features are part of the name */
  assert_ptr_equal(hkc_toolchain_for_target("gfx90a:xnack-", &arch, NULL, 0), &hkc_toolchain_hiprtc);
  assert_string_equal(arch->name, "gfx90a");
  assert_ptr_equal(hkc_toolchain_for_target("sm_90a", &arch, NULL, 0), &hkc_toolchain_nvrtc);
  assert_string_equal(arch->name, "sm_90a");
}

static void expect_unknown(const char *name, const char *want) {
  const hkc_gpu_arch_t *arch = hk_test_arch("gfx90a");
  char why[1024] = "";
  assert_null(hkc_toolchain_for_target(name, &arch, why, sizeof why));
  assert_null(arch);
  if (!strstr(why, want) || !strstr(why, "hkc knows: host (= host-")) fail_msg("%s: unclear message: %s", name, why);
  /* why may be NULL */
  assert_null(hkc_toolchain_for_target(name, &arch, NULL, 0));
}

static void test_unknown_names_fail_clearly(void **state) {
  expect_unknown("gfx9000x", "unknown target gfx9000x (");
  expect_unknown("", "unknown target  (");
  expect_unknown(NULL, "unknown target  (");
  expect_unknown("hostile", "unknown target hostile (");
  expect_unknown("sm_90:xnack-", "sm_90 targets take no ISA features");
  /* another CPU's host target: refused, saying why and what to do */
  const char *other = strcmp(hkc_host_target_name(), "host-aarch64") == 0 ? "host-x86_64" : "host-aarch64";
  expect_unknown(other, "cross-building host code for");
  expect_unknown(other, "run `hkc build --target host` on a");
  char known[1024];
  hkc_toolchain_known_targets(known, sizeof known);
  size_t n;
  const hkc_gpu_arch_t *list = hkc_gpu_arch_list(&n);
  for (size_t i = 0; i < n; i++) assert_non_null(strstr(known, list[i].name));
  assert_null(hkc_toolchain_for_kind((hk_target_kind_t)99));
}

/* ---- entries ------------------------------------------------------------------------------ */
static void test_entries_are_complete(void **state) {
  size_t n;
  const hkc_toolchain_t *const *tcs = hkc_toolchain_list(&n);
  assert_int_equal(n, 3);
  assert_ptr_equal(tcs[0], &hkc_toolchain_host); /* `hkc targets` prints the host first */
  for (size_t i = 0; i < n; i++) {
    const hkc_toolchain_t *tc = tcs[i];
    print_message("[ info     ] %-6s %s: version %s\n", tc->name, tc->label, tc->version());
    assert_non_null(tc->name);
    assert_non_null(tc->vendor);
    assert_non_null(tc->program);
    assert_non_null(tc->label);
    assert_non_null(tc->spill_memory);
    assert_non_null(tc->compute_unit);
    assert_non_null(tc->occupancy_unit);
    assert_non_null(tc->available);
    assert_non_null(tc->version);
    assert_non_null(tc->version());
    assert_true((tc->codegen_kernel != NULL) != (tc->codegen_unit != NULL)); /* exactly one */
    assert_non_null(tc->launch_dims);
    assert_non_null(tc->compile);
    assert_non_null(tc->disassemble);
    assert_non_null(tc->list_targets);
    assert_ptr_equal(hkc_toolchain_for_kind(tc->kind), tc); /* one toolchain per kind */
    for (size_t j = 0; j < i; j++) assert_string_not_equal(tcs[j]->name, tc->name);
  }
  assert_string_equal(hkc_toolchain_host.name, "host");
  assert_string_equal(hkc_toolchain_hiprtc.name, "hiprtc");
  assert_string_equal(hkc_toolchain_nvrtc.name, "nvrtc");
  assert_string_equal(hkc_toolchain_hiprtc.spill_memory, "scratch");
  assert_string_equal(hkc_toolchain_nvrtc.spill_memory, "local");
}

/* ---- programmatic dependent launch ------------------------------------------------------------
 * Only nvrtc marks launches (launch_pdl); a launch is marked exactly when its variant says
 * so, on CUDA targets of sm_90 and later only (griddepcontrol is sm_90 PTX); and a variant
 * may say so only when its source contains griddepcontrol.wait or HK_PDL_ENTRY(); (the
 * CUDA prelude's wait, checked here too) (necessary, not sufficient: a
 * marked kernel that does not wait before touching its predecessors' data races with them;
 * the device harness checks the numbers). */

static int cuda_sm(const hkc_gpu_arch_t *arch) {
  return arch->kind == HK_TARGET_CUDA ? atoi(arch->name + 3) : 0;
}

static void test_launch_pdl(void **state) {
  assert_null(hkc_toolchain_host.launch_pdl);
  assert_null(hkc_toolchain_hiprtc.launch_pdl);
  assert_ptr_equal(hkc_toolchain_nvrtc.launch_pdl, hkc_gpu_launch_pdl);
  for (const hkc_variant_t *const *v = hkc_variant_list(); *v; v++) {
    if (!(*v)->pdl) continue;
    assert_false((*v)->host);
    size_t size = 0;
    const char *text = (*v)->template_path ? hkc_template((*v)->template_path, &size) : NULL;
    /* in the template or a header before it */
    int waits = text && (strstr(text, "griddepcontrol.wait") || strstr(text, "HK_PDL_ENTRY();"));
    for (const char *const *inc = (*v)->includes; inc && *inc && !waits; inc++)
      waits = (text = hkc_template(*inc, &size)) != NULL && strstr(text, "griddepcontrol.wait");
    if (!waits)
      fail_msg("variant %s has pdl = 1, but neither its template %s nor its includes wait "
               "(griddepcontrol.wait, HK_PDL_ENTRY())",
               (*v)->name, (*v)->template_path ? (*v)->template_path : "(none)");
  }
  size_t size = 0; /* HK_PDL_ENTRY() waits on sm_90 and later */
  const char *prelude = hkc_template("gpu/prelude_cuda.h", &size);
  assert_non_null(prelude);
  const char *entry = strstr(prelude, "#define HK_PDL_ENTRY() asm volatile(\"griddepcontrol.wait;");
  assert_non_null(entry);
  size_t n;
  const hkc_gpu_arch_t *list = hkc_gpu_arch_list(&n);
  int tma = 0;
  for (size_t i = 0; i < n; i++) {
    for (int dt = HK_DTYPE_F16; dt <= HK_DTYPE_BF16; dt++) {
      hkc_kernel_key_t key = {.op = HK_OP_GEMM, .dtype = (hk_dtype_t)dt, .trans_b = 1, .align = 8};
      for (int named = 0; named < 2; named++) {
        if (named) snprintf(key.variant, sizeof key.variant, "gemm_tma"); /* as a tuned key names it */
        const hkc_variant_t *v = hkc_variant_for(&list[i], &key);
        assert_non_null(v);
        tma += strcmp(v->name, "gemm_tma") == 0;
        assert_int_equal(hkc_gpu_launch_pdl(&list[i], &key), cuda_sm(&list[i]) >= 90 && v->pdl);
      }
    }
  }
  assert_true(tma > 0); /* sm_90a's TMA GEMM was among them */
  /* the sm_90 guard itself: sm_90a's row under another name before sm_90 marks nothing, even
   * for a variant that sets pdl (no variant serving a real pre-sm_90 row does) */
  hkc_gpu_arch_t renamed = *hkc_gpu_arch_find("sm_90a");
  hkc_kernel_key_t gemm = {.op = HK_OP_GEMM, .dtype = HK_DTYPE_BF16, .trans_b = 1, .align = 8};
  assert_int_equal(hkc_gpu_launch_pdl(&renamed, &gemm), 1);
  renamed.name = "sm_89";
  assert_int_equal(hkc_gpu_launch_pdl(&renamed, &gemm), 0);
  renamed.name = "sm_100";
  assert_int_equal(hkc_gpu_launch_pdl(&renamed, &gemm), 1);
  hkc_kernel_key_t relu = {.op = HK_OP_RELU, .dtype = HK_DTYPE_F32};
  assert_int_equal(hkc_gpu_launch_pdl(NULL, &relu), 0); /* the host */
}

/* ---- a kernel through each toolchain ---------------------------------------------------------- */
/* The toolchain of state, skipped (with why) when it does not run here. */
static const hkc_toolchain_t *need(void **state) {
  const hkc_toolchain_t *tc = *state;
  char why[512];
  if (tc->available(why, sizeof why) != 0) {
    print_message("[ SKIP     ] %s: %s\n", tc->name, why);
    skip();
  }
  return tc;
}

/* A target of the toolchain: the host's, else its first row in the target table. */
static const char *target_of(const hkc_toolchain_t *tc, const hkc_gpu_arch_t **out_arch) {
  *out_arch = NULL;
  size_t n;
  const hkc_gpu_arch_t *list = hkc_gpu_arch_list(&n);
  for (size_t i = 0; i < n; i++)
    if (hkc_toolchain_for_arch(&list[i]) == tc) {
      *out_arch = &list[i];
      return list[i].name;
    }
  return hkc_host_target_name();
}

/* Generates and compiles an f32 relu through the table only; the result is an ELF file. */
static void compile_relu(const hkc_toolchain_t *tc, hkc_kernel_out_t *k, const char **out_target,
                         hkc_rtc_result_t *out) {
  const hkc_gpu_arch_t *arch;
  *out_target = target_of(tc, &arch);
  memset(k, 0, sizeof *k);
  k->key.op = HK_OP_RELU;
  k->key.dtype = HK_DTYPE_F32;
  hk_test_kernel_name(k);
  char *src = tc->codegen_kernel ? tc->codegen_kernel(arch, k) : tc->codegen_unit(k, 1);
  assert_non_null(src);
  memset(out, 0, sizeof *out);
  const int rc = tc->compile(src, tc->codegen_kernel ? k->name : NULL, *out_target, out);
  free(src);
  if (rc != 0) fail_msg("%s for %s through %s did not compile:\n%s", k->name, *out_target, tc->name,
                        out->log ? out->log : "(no log)");
  assert_non_null(out->code);
  assert_true(out->code_size > 4);
  assert_memory_equal(out->code, "\177ELF", 4);
}

static void test_compile(void **state) {
  const hkc_toolchain_t *tc = need(state);
  hkc_kernel_out_t k;
  const char *target;
  hkc_rtc_result_t r;
  compile_relu(tc, &k, &target, &r);
  print_message("[ info     ] %s: %s for %s, %zu bytes\n", tc->name, k.name, target, r.code_size);
  hkc_rtc_result_free(&r);
  /* and the toolchain says it builds that target */
  char **names = NULL, why[512];
  size_t n = 0;
  if (tc->list_targets(&names, &n, why, sizeof why) != 0) fail_msg("%s cannot list its targets: %s", tc->name, why);
  int found = 0;
  for (size_t i = 0; i < n; i++) {
    found |= strcmp(names[i], target) == 0;
    free(names[i]);
  }
  free(names);
  if (!found) fail_msg("%s does not list %s", tc->name, target);
}

/* A failing compile fails: -1, with the reason in the log (GPU) or reported (host). */
static void test_compile_error(void **state) {
  const hkc_toolchain_t *tc = need(state);
  const hkc_gpu_arch_t *arch;
  const char *target = target_of(tc, &arch);
  hkc_rtc_result_t r;
  memset(&r, 0, sizeof r);
  char diag[4096] = "";
  hkc_diag_capture(diag, sizeof diag);
  const int rc = tc->compile("#define HK_NAME hk_broken\nthis is not a kernel;\n", "hk_broken", target, &r);
  hkc_diag_capture(NULL, 0);
  assert_int_equal(rc, -1);
  if (!(r.log && r.log[0]) && !diag[0]) fail_msg("%s: a failed compile says nothing", tc->name);
  hkc_rtc_result_free(&r);
}

static void test_disassemble(void **state) {
  const hkc_toolchain_t *tc = need(state);
  hkc_kernel_out_t k;
  const char *target;
  hkc_rtc_result_t r;
  compile_relu(tc, &k, &target, &r);
  char *text = NULL, why[512] = "";
  const int rc = tc->disassemble(r.code, r.code_size, k.name, target, &text, why, sizeof why);
  hkc_rtc_result_free(&r);
  if (rc != 0 && tc->kind == HK_TARGET_CUDA) { /* nvdisasm and cuobjdump come with the full toolkit only */
    print_message("[ SKIP     ] %s disassembly: %s\n", tc->name, why);
    skip();
  }
  if (rc != 0) fail_msg("%s cannot disassemble %s: %s", tc->name, k.name, why);
  assert_non_null(text);
  if (!strstr(text, k.name)) fail_msg("%s's disassembly does not name %s:\n%.2000s", tc->name, k.name, text);
  free(text);
}

static int start_workers(void **state) {
  hk_test_start_amd_workers(1); /* the AMD entry's calls then go to a worker process, as in hkc */
  return 0;
}

static int stop_workers(void **state) {
  hkc_amd_workers_stop();
  return 0;
}

/* One test per toolchain, named "fn/toolchain" (cmocka's CMUnitTest: name, function, setup,
 * teardown, initial state). */
#define PER_TOOLCHAIN(fn)                                                 \
  {#fn "/host", fn, NULL, NULL, (void *)&hkc_toolchain_host},             \
      {#fn "/hiprtc", fn, NULL, NULL, (void *)&hkc_toolchain_hiprtc},     \
      {#fn "/nvrtc", fn, NULL, NULL, (void *)&hkc_toolchain_nvrtc}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_target_finds_its_toolchain),
      cmocka_unit_test(test_unknown_names_fail_clearly),
      cmocka_unit_test(test_entries_are_complete),
      cmocka_unit_test(test_launch_pdl),
      PER_TOOLCHAIN(test_compile),
      PER_TOOLCHAIN(test_compile_error),
      PER_TOOLCHAIN(test_disassemble),
  };
  return cmocka_run_group_tests(tests, start_workers, stop_workers);
}
