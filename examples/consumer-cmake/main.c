/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An application outside hkc's tree that embeds libhkrt, as tests/integration/install.sh
 * builds it from an installed hkc (find_package(hkrt) or pkg-config): opens the pack of
 * tests/specs/op_elementwise.yaml built for the host target, runs it once at batch 5 on
 * random inputs and checks two of its outputs against a double-precision reference:
 *   t = ((x + z) + row) * row * one;  y_relu = max(t, 0);  y_silu = t / (1 + exp(-t))
 * Exit status 0 when every element matches, 1 otherwise (the first mismatch is printed).
 *
 *   consumer PACK
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk/hkrt.h"

#define BATCH 5
#define S 3
#define C 1001

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(void) { /* [-1, 1) */
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng >> 40) / (double)(1ull << 24) * 2.0 - 1.0);
}

/* A buffer for tensor `name`, 64-byte aligned, of the size the session expects, bound. */
static float *bind_new(hk_session_t *s, const char *name, size_t count) {
  for (uint32_t i = 0; i < hk_session_tensor_count(s); i++) {
    hk_tensor_info_t info;
    if (hk_session_tensor_info(s, i, &info) != HK_OK || strcmp(info.name, name) != 0) continue;
    if (info.element_type != HK_ELEMENT_F32 || info.bytes != count * sizeof(float)) {
      fprintf(stderr, "%s: %zu bytes, expected %zu f32\n", name, info.bytes, count);
      return NULL;
    }
    float *p = aligned_alloc(64, (info.bytes + 63) / 64 * 64);
    if (!p) return NULL;
    if (hk_session_bind(s, name, p, info.bytes) != HK_OK) {
      fprintf(stderr, "bind %s: %s\n", name, hk_last_error());
      free(p);
      return NULL;
    }
    return p;
  }
  fprintf(stderr, "the pack has no tensor %s\n", name);
  return NULL;
}

static int check(const char *name, const float *got, const double *want, size_t n) {
  for (size_t i = 0; i < n; i++) {
    double err = fabs((double)got[i] - want[i]);
    if (!(err <= 1e-5 + 1e-5 * fabs(want[i]))) { /* NaN (an unwritten element) fails too */
      fprintf(stderr, "%s[%zu] = %.9g, expected %.9g\n", name, i, got[i], want[i]);
      return 1;
    }
  }
  printf("%s: %zu elements match\n", name, n);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PACK\n", argv[0]);
    return 2;
  }
  /* The header this was compiled with and the library it runs with come from one install. */
  if (strcmp(hk_version(), HKRT_VERSION_STRING) != 0 || hk_version_number() != HKRT_VERSION_NUMBER) {
    fprintf(stderr, "libhkrt %s, header %s\n", hk_version(), HKRT_VERSION_STRING);
    return 1;
  }
  /* A pack that we built ourselves, unsigned: opened by explicit opt-in. */
  hk_pack_open_options_t po = {.struct_size = sizeof po, .allow_unsigned_code = 1};
  hk_pack_t *pack = NULL;
  hk_session_t *s = NULL;
  if (hk_pack_open_file_ex(argv[1], &po, &pack) != HK_OK) {
    fprintf(stderr, "open: %s\n", hk_last_error());
    return 1;
  }
  hk_session_options_t so = {.struct_size = sizeof so, .batch = BATCH};
  if (hk_session_create(pack, &so, &s) != HK_OK) {
    fprintf(stderr, "session: %s\n", hk_last_error());
    hk_pack_destroy(pack);
    return 1;
  }
  /* A checkpoint without tensors binds nothing; it also makes static links pull in the
   * weights code and its JSON parser (the dependency lists must name cJSON). */
  static const char empty[] = "\x02\0\0\0\0\0\0\0{}";
  hk_weights_t *weights = NULL;
  uint32_t bound = 1;
  if (hk_weights_open_memory(empty, sizeof empty - 1, NULL, &weights) != HK_OK ||
      hk_session_bind_weights(s, weights, NULL, &bound) != HK_OK || bound != 0) {
    fprintf(stderr, "weights: %s\n", hk_last_error());
    hk_weights_destroy(weights);
    hk_session_destroy(s);
    hk_pack_destroy(pack);
    return 1;
  }
  hk_weights_destroy(weights);
  const size_t n = (size_t)BATCH * S * C;
  float *x = bind_new(s, "x", n), *z = bind_new(s, "z", n), *row = bind_new(s, "row", C);
  float *one = bind_new(s, "one", 1), *relu = bind_new(s, "y_relu", n), *silu = bind_new(s, "y_silu", n);
  float *gelu = bind_new(s, "y_gelu", n);
  double *want_relu = malloc(n * sizeof(double)), *want_silu = malloc(n * sizeof(double));
  int rc = 1;
  if (!x || !z || !row || !one || !relu || !silu || !gelu || !want_relu || !want_silu) goto done;
  for (size_t i = 0; i < n; i++) x[i] = uniform(), z[i] = uniform();
  for (size_t i = 0; i < C; i++) row[i] = uniform();
  one[0] = 1.5f;
  for (size_t i = 0; i < n; i++) relu[i] = silu[i] = gelu[i] = NAN; /* poison */
  if (hk_session_run(s, NULL) != HK_OK) {
    fprintf(stderr, "run: %s\n", hk_last_error());
    goto done;
  }
  for (size_t i = 0; i < n; i++) {
    double r = row[i % C];
    double t = (((double)x[i] + z[i]) + r) * r * one[0];
    want_relu[i] = t > 0 ? t : 0;
    want_silu[i] = t / (1 + exp(-t));
  }
  rc = check("y_relu", relu, want_relu, n) | check("y_silu", silu, want_silu, n);
  if (rc == 0) printf("ok: libhkrt %s, target %s\n", hk_version(), hk_session_target(s));
done:
  free(x), free(z), free(row), free(one), free(relu), free(silu), free(gelu);
  free(want_relu), free(want_silu);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  return rc;
}
