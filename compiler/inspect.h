/* hkc inspect: a human-readable report of a verified artifact. */
#ifndef HKC_INSPECT_H
#define HKC_INSPECT_H
#include <stdio.h>
/* Opens and verifies the pack at path, prints the report to out. 0 / -1 (error printed). */
int hkc_inspect(const char *path, FILE *out);
#endif
