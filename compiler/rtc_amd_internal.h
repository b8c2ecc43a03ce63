/* compiler/rtc_amd_internal.h -- what rtc_hiprtc.c needs from rtc_comgr.c beyond hkc.h. */
#ifndef HKC_RTC_AMD_INTERNAL_H
#define HKC_RTC_AMD_INTERNAL_H

#include <stddef.h>

#include "hkc.h"

/* 0 when comgr loads; else -1 and why names the library and its package. */
int hkc_comgr_available(char *why, size_t why_size);
/* "comgr 2.4" (static string; "" when unavailable). */
const char *hkc_comgr_version(void);
/* Reads the resources of kernel `name` (its ".name" in amdhsa.kernels) from the metadata
 * of an AMDGPU executable code object into out's vgprs/agprs/sgprs/shared_bytes/
 * scratch_bytes/wave_size/max_block (absent keys stay 0). 0 / -1 (why filled, e.g. no
 * such kernel: the message lists the kernels present). */
int hkc_comgr_kernel_resources(const void *code, size_t size, const char *name, hkc_rtc_result_t *out,
                               char *why, size_t why_size);

#endif /* HKC_RTC_AMD_INTERNAL_H */
