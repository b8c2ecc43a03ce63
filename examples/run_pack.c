/* placeholder until the example lands */
#include "hk/hkrt.h"
int main(void) { return 0; }
