/* SPDX-License-Identifier: Apache-2.0 */
/* The toolchain table (toolchain.h): the list of entries and the lookups by kind, by GPU
 * target table entry and by target name. The entries live in their toolchains' files. */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "rtc/rtc.h"

static const hkc_toolchain_t *const k_toolchains[] = {&hkc_toolchain_host, &hkc_toolchain_hiprtc,
                                                      &hkc_toolchain_nvrtc};
#define N_TOOLCHAINS (sizeof k_toolchains / sizeof *k_toolchains)

const hkc_toolchain_t *const *hkc_toolchain_list(size_t *out_count) {
  *out_count = N_TOOLCHAINS;
  return k_toolchains;
}

const hkc_toolchain_t *hkc_toolchain_for_kind(hk_target_kind_t kind) {
  for (size_t i = 0; i < N_TOOLCHAINS; i++)
    if (k_toolchains[i]->kind == kind) return k_toolchains[i];
  return NULL;
}

const hkc_toolchain_t *hkc_toolchain_for_arch(const hkc_gpu_arch_t *arch) {
  return hkc_toolchain_for_kind(arch ? arch->kind : HK_TARGET_HOST);
}

void hkc_toolchain_known_targets(char *out, size_t size) {
  size_t n;
  const hkc_gpu_arch_t *list = hkc_gpu_arch_list(&n);
  int len = snprintf(out, size, "host (= %s)", hkc_host_target_name()); /* both spellings are accepted */
  for (size_t i = 0; i < n && len > 0 && (size_t)len < size; i++)
    len += snprintf(out + len, size - (size_t)len, ", %s", list[i].name);
}

const hkc_toolchain_t *hkc_toolchain_for_target(const char *target, const hkc_gpu_arch_t **out_arch, char *why,
                                                size_t why_size) {
  *out_arch = NULL;
  if (!target) target = "";
  if (strcmp(target, "host") == 0 || strcmp(target, hkc_host_target_name()) == 0)
    return hkc_toolchain_for_kind(HK_TARGET_HOST);
  if (strncmp(target, "host-", 5) == 0) { /* another CPU's host target: no cross-building yet */
    if (why && why_size) {
      char known[1024];
      hkc_toolchain_known_targets(known, sizeof known);
      snprintf(why, why_size,
               "target %s: the host target is built for the machine hkc runs on (%s), with its C compiler; "
               "cross-building host code for %s is not supported: run `hkc build --target host` on an %s "
               "machine and merge the packs (hkc merge) (hkc knows: %s)",
               target, hkc_host_target_name(), target + 5, target + 5, known);
    }
    return NULL;
  }
  const hkc_gpu_arch_t *arch = hkc_gpu_arch_find(target);
  const hkc_toolchain_t *tc = arch ? hkc_toolchain_for_arch(arch) : NULL;
  /* features follow the first ':' and only some toolchains take them ("gfx90a:xnack-") */
  if (tc && !tc->features && strcmp(target, arch->name) != 0) tc = NULL;
  if (!tc) {
    if (why && why_size) {
      char known[1024];
      hkc_toolchain_known_targets(known, sizeof known);
      if (arch)
        snprintf(why, why_size, "unknown target %s: %s targets take no ISA features (hkc knows: %s)", target,
                 arch->name, known);
      else
        snprintf(why, why_size, "unknown target %s (hkc knows: %s)", target, known);
    }
    return NULL;
  }
  *out_arch = arch;
  return tc;
}
