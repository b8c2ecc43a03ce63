/* SPDX-License-Identifier: Apache-2.0 */
/* The version of the running library (hkrt.h, "version"), compiled in from the header's
 * macros so that a program can tell the header it was built with from the library it loads. */
#include "hk/hkrt.h"

HK_API const char *hk_version(void) { return HKRT_VERSION_STRING; }

HK_API uint32_t hk_version_number(void) { return HKRT_VERSION_NUMBER; }
