/* SPDX-License-Identifier: Apache-2.0 */
/* The 16-bit outputs' activations of templates/gpu/common.h (hk_act_gelu16, hk_act_silu16:
 * the element-wise kernels and the GEMM epilogues use them) on the CPU: their source, cut
 * from the template hkc embeds, compiled by the system C compiler with IEEE single-precision
 * stand-ins for the GPU's approximate reciprocal and exp2, and run over every 1/16384 step of
 * [-16, 16] and a few points beyond against double-precision references from libm (gelu = x erfc(-x /
 * sqrt 2) / 2, silu = x / (1 + e^-x)). The bound, 1e-4 relative wherever the result is a
 * normal number, is ~5x below an f16 half-ulp and ~20x below a bf16 one: what "as accurate as
 * the result's rounding needs" promises. Special values as the erff form: gelu(inf) = inf,
 * gelu(-inf) and NaN give NaN, silu(-inf) = -0 or NaN is not promised (only finite here).
 * The GPU's own instructions are checked by the device harness. Skipped, saying why, without
 * a C compiler. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hkc.h"
#include "test_util.h"

/* The text of `HK_DEVICE float NAME(...) { ... }` in src, up to its closing brace at the
 * start of a line; fails the test when absent. Caller frees. */
static char *cut_function(const char *src, const char *name) {
  char head[128];
  snprintf(head, sizeof head, "HK_DEVICE float %s(", name);
  const char *a = strstr(src, head);
  if (!a) fail_msg("common.h has no %s", head);
  const char *b = strstr(a, "\n}");
  if (!b) fail_msg("%s has no closing brace at the start of a line", name);
  size_t len = (size_t)(b + 2 - a);
  char *out = malloc(len + 2);
  memcpy(out, a, len);
  out[len] = '\n';
  out[len + 1] = '\0';
  return out;
}

static const char k_main[] =
    "#include <math.h>\n"
    "#include <stdio.h>\n"
    "static double ref_gelu(double x) { return 0.5 * x * erfc(-x / sqrt(2.0)); }\n"
    "static double ref_silu(double x) { return x / (1.0 + exp(-x)); }\n"
    "static void worst(float (*f)(float), double (*ref)(double), const char *name) {\n"
    "  double w = 0.0, at = 0.0;\n"
    "  for (long i = -16 * 4096L * 4; i <= 16 * 4096L * 4; i++) {\n"
    "    float x = (float)i / 16384.0f;\n"
    "    double r = ref((double)x), y = (double)f(x);\n"
    "    if (fabs(r) < 1e-37) continue; /* results below the normal range */\n"
    "    double e = fabs(y - r) / fabs(r);\n"
    "    if (!(e <= w)) w = e, at = x;\n"
    "  }\n"
    "  const float big[] = {20.0f, 40.0f, 1e4f, -20.0f, -30.0f};\n"
    "  for (int i = 0; i < 5; i++) {\n"
    "    double r = ref((double)big[i]);\n"
    "    if (fabs(r) < 1e-37) continue;\n"
    "    double e = fabs((double)f(big[i]) - r) / fabs(r);\n"
    "    if (!(e <= w)) w = e, at = big[i];\n"
    "  }\n"
    "  printf(\"%s %.3e %g\\n\", name, w, at);\n"
    "}\n"
    "int main(void) {\n"
    "  worst(hk_act_gelu16, ref_gelu, \"gelu16\");\n"
    "  worst(hk_act_silu16, ref_silu, \"silu16\");\n"
    "  float inf = INFINITY;\n"
    "  printf(\"special %d %d %d %g\\n\", isinf(hk_act_gelu16(inf)) && hk_act_gelu16(inf) > 0,\n"
    "         isnan(hk_act_gelu16(-inf)), isnan(hk_act_gelu16(NAN)), (double)hk_act_gelu16(0.0f));\n"
    "  return 0;\n"
    "}\n";

static void test_act16_accuracy(void **state) {
  (void)state;
  char out[4096];
  if (hk_test_run("cc --version", out, sizeof out) != 0) {
    printf("[ SKIP     ] no C compiler (cc): the 16-bit activations are not checked on the CPU (%s)\n", out);
    skip();
  }
  size_t size = 0;
  const char *common = hkc_template("gpu/common.h", &size);
  assert_non_null(common);
  char *gelu = cut_function(common, "hk_act_gelu16"), *silu = cut_function(common, "hk_act_silu16");
  char *dir = hk_test_tmpdir();
  char src[512], exe[512], cmd[2048];
  snprintf(src, sizeof src, "%s/act16.c", dir);
  snprintf(exe, sizeof exe, "%s/act16", dir);
  FILE *f = fopen(src, "w");
  assert_non_null(f);
  /* the GPU's rcp.approx / ex2.approx (a few ulp) as correctly rounded f32 operations */
  fprintf(f, "#include <math.h>\n#define HK_DEVICE static\n#define __fdividef(a, b) ((a) / (b))\n%s\n%s\n%s", gelu,
          silu, k_main);
  fclose(f);
  snprintf(cmd, sizeof cmd, "cc -std=c11 -O1 -ffp-contract=off '%s' -o '%s' -lm", src, exe);
  if (hk_test_run(cmd, out, sizeof out) != 0) fail_msg("%s\n%s", cmd, out);
  snprintf(cmd, sizeof cmd, "'%s'", exe);
  if (hk_test_run(cmd, out, sizeof out) != 0) fail_msg("%s\n%s", cmd, out);
  printf("%s", out);
  double e_gelu = 1.0, e_silu = 1.0, at = 0.0;
  int inf_ok = 0, ninf_nan = 0, nan_nan = 0;
  double zero = 1.0;
  const char *g = strstr(out, "gelu16 "), *s = strstr(out, "silu16 "), *sp = strstr(out, "special ");
  assert_non_null(g);
  assert_non_null(s);
  assert_non_null(sp);
  assert_int_equal(sscanf(g, "gelu16 %lf %lf", &e_gelu, &at), 2);
  assert_int_equal(sscanf(s, "silu16 %lf %lf", &e_silu, &at), 2);
  assert_int_equal(sscanf(sp, "special %d %d %d %lf", &inf_ok, &ninf_nan, &nan_nan, &zero), 4);
  assert_true(e_gelu < 1e-4);
  assert_true(e_silu < 1e-4);
  assert_true(inf_ok && ninf_nan && nan_nan);
  assert_true(zero == 0.0);
  free(gelu);
  free(silu);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_act16_accuracy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
