/* SPDX-License-Identifier: Apache-2.0 */
/* hkc_dimexpr_eval: values, linearity in batch, and every error at its column. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hkc.h"

static char diag[4096];
static const hkc_named_dim_t dims[] = {
    {"seq", 128, {NULL, 0, 0}}, {"hidden", 768, {NULL, 0, 0}}, {"heads", 12, {NULL, 0, 0}}, {"big", INT64_MAX / 2, {NULL, 0, 0}}};
static const size_t n_dims = sizeof dims / sizeof dims[0];
static const hkc_loc_t loc = {"s.yaml", 3, 10}; /* the expression starts at column 10 */

static int eval(const char *text, hkc_dim_t *out) {
  hkc_diag_capture(diag, sizeof diag);
  int rc = hkc_dimexpr_eval(text, dims, n_dims, loc, out);
  hkc_diag_capture(NULL, 0);
  return rc;
}

static void check_value(const char *text, int64_t mul, int64_t add) {
  hkc_dim_t d = {-7, -7};
  if (eval(text, &d) != 0) fail_msg("'%s' failed: %s", text, diag);
  if (d.mul != mul || d.add != add)
    fail_msg("'%s' = %lld*batch + %lld, expected %lld*batch + %lld", text, (long long)d.mul, (long long)d.add,
             (long long)mul, (long long)add);
  assert_string_equal(diag, "");
}

/* The error must be reported once, at s.yaml:3:<col>, and mention `words`. */
static void check_error(const char *text, int col, const char *words) {
  hkc_dim_t d = {-7, -7};
  assert_int_equal(eval(text, &d), -1);
  char where[64];
  snprintf(where, sizeof where, "s.yaml:3:%d: ", col);
  if (strncmp(diag, where, strlen(where)) != 0 || !strstr(diag, words))
    fail_msg("'%s': expected '%s ... %s', got: %s", text, where, words, diag);
  assert_int_equal(d.mul, -7); /* untouched on error */
  assert_ptr_equal(strchr(diag, '\n'), diag + strlen(diag) - 1); /* exactly one line */
}

static void test_constants_and_names(void **state) {
  (void)state;
  check_value("64", 0, 64);
  check_value("hidden", 0, 768);
  check_value("3*hidden", 0, 2304);
  check_value("hidden/heads", 0, 64);
  check_value("  hidden / heads  ", 0, 64);
  check_value("2+3*4", 0, 14);
  check_value("(2+3)*4", 0, 20);
  check_value("20-4-6", 0, 10);           /* left associative */
  check_value("64/4/2", 0, 8);            /* left associative */
  check_value("-2+10", 0, 8);
  check_value("10 - -2", 0, 12);
  check_value("((((seq))))", 0, 128);
}

static void test_linear_in_batch(void **state) {
  (void)state;
  check_value("batch", 1, 0);
  check_value("batch*seq", 128, 0);
  check_value("seq*batch", 128, 0);
  check_value("(batch+1)*2", 2, 2);
  check_value("batch*seq/2", 64, 0);      /* exact for every batch */
  check_value("2*batch - batch", 1, 0);
  check_value("batch + seq - 1", 1, 127);
}

static void test_errors_at_column(void **state) {
  (void)state;
  check_error("batch*batch", 10 + 5, "batch times batch");
  check_error("seq*(batch+1)*batch", 10 + 13, "batch times batch");
  check_error("seq/batch", 10 + 3, "batch-dependent");
  check_error("hidden/5", 10 + 6, "inexact division");
  check_error("(batch+1)/2", 10 + 9, "inexact division");
  check_error("seq/(heads-12)", 10 + 3, "division by zero");
  check_error("hiden*2", 10 + 0, "unknown dim 'hiden'");
  check_error("2*hiden", 10 + 2, "known: batch, seq, hidden");
  check_error("", 10, "empty");
  check_error("seq*", 10 + 4, "expected a number");
  check_error("1.5", 10, "not an integer");
  check_error("seq 2", 10 + 4, "unexpected '2'");
  check_error("(seq", 10 + 4, "expected ')'");
  check_error("seq)", 10 + 3, "unbalanced ')'");
  check_error("seq % 2", 10 + 4, "unexpected '%'");
  check_error("99999999999999999999", 10, "too large");
  check_error("big*4", 10 + 3, "overflow");
  check_error("big+big+big", 10 + 7, "overflow");
  check_error("0", 10, "positive");
  check_error("seq-128", 10, "positive");
  check_error("batch-1", 10, "positive");  /* zero at batch 1 */
  check_error("1-batch", 10, "positive");  /* shrinks with batch */
}

static void test_deep_nesting_is_refused(void **state) {
  (void)state;
  char text[512];
  size_t n = 0;
  for (int i = 0; i < 200; i++) text[n++] = '(';
  text[n++] = '1';
  for (int i = 0; i < 200; i++) text[n++] = ')';
  text[n] = '\0';
  hkc_dim_t d;
  assert_int_equal(eval(text, &d), -1);
  assert_non_null(strstr(diag, "nested too deeply"));
  /* Long unary chains are iterative, not recursive. */
  memset(text, '-', 400);
  strcpy(text + 400, "7");
  assert_int_equal(eval(text, &d), 0);
  assert_int_equal(d.add, 7);
}

static void test_no_location(void **state) {
  (void)state;
  hkc_dim_t d;
  hkc_diag_capture(diag, sizeof diag);
  assert_int_equal(hkc_dimexpr_eval("nope", NULL, 0, (hkc_loc_t){NULL, 0, 0}, &d), -1);
  hkc_diag_capture(NULL, 0);
  assert_non_null(strstr(diag, "hkc: in shape expression 'nope': unknown dim 'nope' (known: batch)"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_constants_and_names), cmocka_unit_test(test_linear_in_batch),
      cmocka_unit_test(test_errors_at_column),    cmocka_unit_test(test_deep_nesting_is_refused),
      cmocka_unit_test(test_no_location),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
