/* SPDX-License-Identifier: Apache-2.0 */
/* The one place the compiler reads the process environment: the documented variables,
 * mapped onto the stages' settings (util.h, hkc_env_t). tools/main.c calls it first;
 * tests that want the same mapping call it too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

#include "tools/tools.h"
#include "util/util.h"

void hkc_env_from_process(void) {
  const char *cache = getenv("HKC_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char cache_dir[4096] = "";
  if (cache && *cache) snprintf(cache_dir, sizeof cache_dir, "%s", cache);
  else if (xdg && *xdg) snprintf(cache_dir, sizeof cache_dir, "%s/hkc", xdg);
  else if (home && *home) snprintf(cache_dir, sizeof cache_dir, "%s/.cache/hkc", home);
  const hkc_env_t env = {.tmp_dir = getenv("TMPDIR"),
                         .cc = getenv("CC"),
                         .cuda_path = getenv("HKC_CUDA_PATH"),
                         .cache_dir = cache_dir,
                         .template_dir = getenv("HKC_TEMPLATE_DIR")};
  hkc_env_set(&env);
}

int hkc_kernel_options_from_env(hkc_kernel_options_t *o, const char *cmd) {
  const char *name, *env, *help;
  for (size_t i = 0; hkc_kernel_options_describe(i, &name, &env, &help); i++) {
    const char *v = getenv(env);
    if (!v || !v[0]) continue;
    char err[1024];
    if ((strcmp(name, "simple_kernels") == 0 || strcmp(name, "ew_exact_act") == 0) && strcmp(v, "0") != 0) v = "1";
    if (hkc_kernel_options_set(o, name, v, err, sizeof err) != 0) {
      fprintf(stderr, "%s: environment variable %s: %s\n", cmd, env, err);
      return -1;
    }
  }
  return 0;
}
