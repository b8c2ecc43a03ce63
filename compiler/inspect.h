/* hkc inspect: a human-readable report of a verified artifact. */
#ifndef HKC_INSPECT_H
#define HKC_INSPECT_H
#include <stdio.h>
/* Opens and verifies the pack at path, prints the report to out. 0 / -1 (error printed). */
int hkc_inspect(const char *path, FILE *out);
/* Prints the machine code of one kernel of the pack (target NULL: the first target that
 * has it). AMD through comgr; NVIDIA through nvdisasm or cuobjdump; host through objdump.
 * 0 / -1 (error printed). */
int hkc_inspect_disasm(const char *path, const char *kernel, const char *target, FILE *out);
/* `hkc targets`: probes the toolchains and prints what this machine can build. 0 / -1. */
int hkc_print_targets(FILE *out);
#endif
