/* SPDX-License-Identifier: Apache-2.0 */
/* compiler/util/util.c: the one escaping of text from files in hkc's messages (every control
 * byte, DEL, byte >= 0x80 and backslash as \xNN; cut whole, ending in "..."), and the name
 * table the spec parser looks names up in (constant time; a 16384-node graph used to compare
 * every name with every other). */
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

static void test_escape(void **state) {
  (void)state;
  char out[64];
  assert_string_equal(hkc_escape_into("w_qkv.weight", 12, out, sizeof out), "w_qkv.weight");
  assert_string_equal(hkc_escape_into("a\x1b[2Jb", 6, out, sizeof out), "a\\x1b[2Jb");
  assert_string_equal(hkc_escape_into("x\ny\r\t\a\x7f", 7, out, sizeof out), "x\\x0ay\\x0d\\x09\\x07\\x7f");
  assert_string_equal(hkc_escape_into("a\\x1b", 5, out, sizeof out), "a\\x5cx1b"); /* never mistaken for an escape */
  assert_string_equal(hkc_escape_into("\xc3\xa9", 2, out, sizeof out), "\\xc3\\xa9");
  assert_string_equal(hkc_escape_into("a\0b", 3, out, sizeof out), "a\\x00b"); /* len, not the NUL, ends it */
  /* cut: whole pieces only, then "..." */
  assert_string_equal(hkc_escape_into("abcdefghij", 10, out, 11), "abcdefghij");
  assert_string_equal(hkc_escape_into("abcdefghij", 10, out, 10), "abcdef...");
  assert_string_equal(hkc_escape_into("abcde\x1b\x1b", 7, out, 12), "abcde...");
  assert_string_equal(hkc_escape_into("ab\x1b\x1b", 4, out, 10), "ab\\x1b...");
  assert_string_equal(hkc_escape_into("abc", 3, out, 1), "");
  /* for printf arguments: several in one message */
  char msg[128];
  snprintf(msg, sizeof msg, "%s -> %s", hkc_escaped("p\x1b"), hkc_escaped("q\n"));
  assert_string_equal(msg, "p\\x1b -> q\\x0a");
  assert_string_equal(hkc_escaped(NULL), "");
  char *longname = malloc(5000);
  memset(longname, '\x01', 4999);
  longname[4999] = '\0';
  const char *shown = hkc_escaped(longname);
  assert_true(strlen(shown) <= HKC_ESCAPED_MAX);
  assert_string_equal(shown + strlen(shown) - 7, "\\x01...");
  free(longname);
}

static void test_names(void **state) {
  (void)state;
  hkc_names_t names = {0};
  assert_int_equal(hkc_names_get(&names, "a"), -1);
  enum { N = 20000 };
  static char keys[N][16];
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "t_%d", i);
    assert_int_equal(hkc_names_put(&names, keys[i], i), 0);
  }
  for (int i = 0; i < N; i++) assert_int_equal(hkc_names_get(&names, keys[i]), i);
  assert_int_equal(hkc_names_get(&names, "t_20000"), -1);
  assert_int_equal(hkc_names_get(&names, ""), -1);
  assert_int_equal(hkc_names_put(&names, "t_7", 99), 0); /* present: keeps its value */
  assert_int_equal(hkc_names_get(&names, "t_7"), 7);
  assert_int_equal((int)names.n, N);
  hkc_names_free(&names);
  assert_int_equal(hkc_names_get(&names, "t_1"), -1);
  hkc_names_free(&names);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_escape),
      cmocka_unit_test(test_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
