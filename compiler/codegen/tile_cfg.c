/* SPDX-License-Identifier: Apache-2.0 */
/* Kernel configurations (hkc_tile_cfg_t): the parameter strings ("bn=128,st=4,p=1") that
 * the GPU variants and the host GEMM parse when they enumerate or apply a configuration.
 * Below tuning: codegen reads a tuned key's parameters without calling into tune.c. */
#include <string.h>

#include "codegen/codegen.h"

int hkc_tune_params_parse(const char *params, const char *const *names, int n, int *out_values) {
  const char *p = params;
  if (!p) return -1;
  for (int i = 0; i < n; i++) {
    size_t len = strlen(names[i]);
    if (strncmp(p, names[i], len) != 0 || p[len] != '=') return -1;
    p += len + 1;
    if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9')) return -1; /* canonical: no sign, no leading 0 */
    long v = 0;
    while (*p >= '0' && *p <= '9') {
      v = v * 10 + (*p++ - '0');
      if (v > (1 << 20)) return -1;
    }
    out_values[i] = (int)v;
    if (i + 1 < n && *p++ != ',') return -1;
  }
  return *p == '\0' ? 0 : -1;
}
