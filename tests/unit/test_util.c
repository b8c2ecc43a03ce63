#include "hkc.h"
#include "test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

float hk_test_f16_to_f32(uint16_t h) {
  int sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v;
  if (exp == 0) v = ldexp((double)man, -24);
  else if (exp == 31) v = man ? NAN : INFINITY;
  else v = ldexp((double)(man | 0x400), exp - 25);
  return (float)(sign ? -v : v);
}

uint16_t hk_test_f32_to_f16(float f) {
  /* Search-free exact rounding through double arithmetic. */
  uint16_t sign = signbit(f) ? 0x8000 : 0;
  double a = fabs((double)f);
  if (isnan(f)) return 0x7e00;
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < ldexp(1.0, -14)) { /* subnormal: units of 2^-24 */
    double q = nearbyint(a * ldexp(1.0, 24)); /* default rounding mode: nearest even */
    return sign | (uint16_t)q;
  }
  int e;
  frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
  double q = nearbyint(ldexp(a, 11 - e)); /* 11 significant bits */
  if (q >= 2048.0) { q /= 2; e++; }
  int exp = e - 1 + 15;
  if (exp >= 31) return sign | 0x7c00;
  return sign | (uint16_t)(exp << 10) | (uint16_t)((uint32_t)q & 0x3ff);
}

float hk_test_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

uint16_t hk_test_f32_to_bf16(float f) {
  if (isnan(f)) return 0x7fc0;
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t lsb = (u >> 16) & 1;
  u += 0x7fff + lsb;
  return (uint16_t)(u >> 16);
}

void hk_test_rng_seed(hk_test_rng_t *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 1; }

double hk_test_uniform(hk_test_rng_t *r, double lo, double hi) {
  r->s ^= r->s >> 12;
  r->s ^= r->s << 25;
  r->s ^= r->s >> 27;
  uint64_t x = r->s * 0x2545F4914F6CDD1Dull;
  return lo + (hi - lo) * (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

char *hk_test_tmpdir(void) {
  const char *base = getenv("TMPDIR");
  char tmpl[4096];
  snprintf(tmpl, sizeof tmpl, "%s/hktest.XXXXXX", base && *base ? base : "/tmp");
  char *d = mkdtemp(tmpl);
  return d ? strdup(d) : NULL;
}

int hk_test_run(const char *cmd, char *out, size_t out_size) {
  char full[8192];
  snprintf(full, sizeof full, "(%s) 2>&1", cmd);
  FILE *p = popen(full, "r");
  if (!p) return -1;
  size_t len = 0;
  if (out_size) out[0] = '\0';
  char buf[4096];
  size_t got;
  while ((got = fread(buf, 1, sizeof buf, p)) > 0) {
    if (out_size && len + 1 < out_size) {
      size_t take = got < out_size - 1 - len ? got : out_size - 1 - len;
      memcpy(out + len, buf, take);
      len += take;
      out[len] = '\0';
    }
  }
  int st = pclose(p);
  return (st >= 0 && (st & 0x7f) == 0) ? (st >> 8) & 0xff : 128 + (st & 0x7f);
}

const char *hk_test_source_path(const char *rel) {
  static char path[4096];
  const char *root = getenv("HK_SOURCE_DIR");
  snprintf(path, sizeof path, "%s/%s", root ? root : ".", rel);
  return path;
}

int hk_test_start_amd_workers(int n) {
  const char *bin = getenv("HKC_BIN");
  if (!bin || !*bin) {
    printf("note: HKC_BIN is unset: AMD compiles run in this process, one at a time\n");
    return -1;
  }
  if (n <= 0) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    n = cores > 0 ? (int)cores : 1;
  }
  return hkc_amd_workers_start(bin, n, 600);
}
