/* Helpers shared by the unit tests: independent float16/bfloat16 conversions, a
 * seeded random generator, and temporary paths. Deliberately written apart from the
 * code under test, so a conversion bug there cannot hide here. */
#ifndef HK_TEST_UTIL_H
#define HK_TEST_UTIL_H
#include <stddef.h>
#include <stdint.h>

#include "hk/hkrt.h"

float hk_test_f16_to_f32(uint16_t h);
uint16_t hk_test_f32_to_f16(float f);   /* round to nearest even */
float hk_test_bf16_to_f32(uint16_t h);
uint16_t hk_test_f32_to_bf16(float f);  /* round to nearest even */

/* xorshift64*; uniform in [lo, hi). */
typedef struct { uint64_t s; } hk_test_rng_t;
void hk_test_rng_seed(hk_test_rng_t *r, uint64_t seed);
double hk_test_uniform(hk_test_rng_t *r, double lo, double hi);

/* A fresh directory under $TMPDIR (or /tmp); caller frees the string. */
char *hk_test_tmpdir(void);
/* Runs a shell command, capturing stdout+stderr into out (truncated). Returns exit status. */
int hk_test_run(const char *cmd, char *out, size_t out_size);
/* Path to a source-tree file: $HK_SOURCE_DIR/rel. Static buffer. */
const char *hk_test_source_path(const char *rel);
/* Starts hkc's AMD compile workers (the hkc binary at $HKC_BIN, n processes; 0: one per
 * core), as `hkc build` does. 0, or -1 with a printed note when $HKC_BIN is unset (AMD
 * calls then run in this process, one at a time). */
int hk_test_start_amd_workers(int n);

/* Session options with struct_size set, the fields given by name:
 * hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2, .target = "sm_90"), &s). */
#define HK_TEST_OPTIONS(...) (&(hk_session_options_t){.struct_size = sizeof(hk_session_options_t), __VA_ARGS__})
#endif
