/* SPDX-License-Identifier: Apache-2.0 */
/* The list of compiled-in backends, in order of preference. */
#include <stddef.h>

#include "backend.h"

const hk_backend_t *const hk_backends[] = {
    &hk_backend_cuda,
    &hk_backend_hip,
    &hk_backend_host,
    NULL,
};

const hk_backend_t *hk_backend_for_kind(hk_target_kind_t kind) {
  for (const hk_backend_t *const *b = hk_backends; *b; b++)
    if ((*b)->kind == kind) return *b;
  return NULL;
}
