/* hkc command line: placeholder until the CLI lands. */
#include <stdio.h>
#include "hkc.h"
int main(void) { printf("hkc %s\n", HKC_VERSION_STRING); return 0; }
