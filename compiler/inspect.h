/* hkc inspect: a human-readable report of a verified artifact. */
#ifndef HKC_INSPECT_H
#define HKC_INSPECT_H
#include <stdint.h>
#include <stdio.h>
/* Opens and verifies the pack at path, prints the report to out. 0 / -1 (error printed). */
int hkc_inspect(const char *path, FILE *out);
/* Prints the machine code of one kernel of the pack (target NULL: the first target that
 * has it). AMD through comgr; NVIDIA through nvdisasm or cuobjdump; host through objdump.
 * 0 / -1 (error printed). */
/* `--plan`: per batch bucket (batch 0: all; else that bucket), the launches of one target
 * (target NULL: the first GPU target, else the first) with their nodes, kernel, estimated
 * bytes and FLOPs from the PLAN section, and the roofline floor on MI250X, MI300X, H200
 * and every other GPU target of the pack; totals before and after fusion. 0 / -1 (error
 * printed; a pack without PLAN is an error). */
int hkc_inspect_plan(const char *path, uint64_t batch, const char *target, FILE *out);
int hkc_inspect_disasm(const char *path, const char *kernel, const char *target, FILE *out);
/* `hkc targets`: probes the toolchains and prints what this machine can build. 0 / -1. */
int hkc_print_targets(FILE *out);
#endif
