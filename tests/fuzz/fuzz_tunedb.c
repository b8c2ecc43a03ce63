/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the tuning-database parser (compiler/tune_db.c): arbitrary bytes
 * through hkc_tune_db_parse. A file that parses must format to a canonical text that
 * parses again to the same text (sorted, one entry per key), and every lookup of its own
 * keys must find the entry. Diagnostics go to a buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hkc.h"
#include "tune.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char diag[4096];
  hkc_tune_db_t db = {0}, again = {0};
  hkc_diag_capture(diag, sizeof diag);
  if (hkc_tune_db_parse(&db, "fuzz.db", (const char *)data, size) == 0) {
    for (size_t i = 0; i < db.n; i++) {
      const hkc_tune_entry_t *e = &db.entries[i];
      int exact = 0;
      if (hkc_tune_db_find(&db, e->target, e->units, e->toolchain, e->signature, &exact) != e || !exact) abort();
    }
    char *text = hkc_tune_db_format(&db);
    if (!text) abort();
    if (hkc_tune_db_parse(&again, "again.db", text, strlen(text)) != 0 || again.n != db.n) abort();
    char *text2 = hkc_tune_db_format(&again);
    if (!text2 || strcmp(text, text2) != 0) abort();
    free(text);
    free(text2);
  }
  hkc_diag_capture(NULL, 0);
  hkc_error_reset();
  hkc_tune_db_free(&db);
  hkc_tune_db_free(&again);
  return 0;
}
