/* SPDX-License-Identifier: Apache-2.0 */
/* compiler/rtc/rtc_amd_internal.h -- what the AMD toolchain files (rtc_hiprtc.c, rtc_comgr.c,
 * rtc_amd_worker.c) share beyond rtc.h. */
#ifndef HKC_RTC_AMD_INTERNAL_H
#define HKC_RTC_AMD_INTERNAL_H

#include <stddef.h>

#include "rtc/rtc.h"

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

/* The in-process toolchain calls behind rtc.h's hkc_hiprtc_compile, hkc_comgr_isa_list and
 * hkc_comgr_disassemble (same contracts). Not safe on threads (rtc_worker.h says why): a worker
 * process runs them one at a time, and without workers the public calls serialize them. */
int hkc_hiprtc_compile_local(const char *source, const char *name, const char *arch, hkc_rtc_result_t *out);
int hkc_comgr_isa_list_local(char ***out_names, size_t *out_count, char *why, size_t why_size);
int hkc_comgr_disassemble_local(const void *code, size_t size, const char *arch, char **out_text, char *why,
                                size_t why_size);
/* Sets out->log to a formatted message (replacing any). */
void hkc_rtc_set_log(hkc_rtc_result_t *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* HKC_RTC_AMD_INTERNAL_H */
