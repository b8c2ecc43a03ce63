/* SPDX-License-Identifier: Apache-2.0 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "variant.h"
#include "hkc.h"
#include "test_util.h"

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

/* ---- the compiler's front end ------------------------------------------------------------ */
static char spec_diag[16384]; /* the helpers' captured diagnostics (tests run one at a time) */

hkc_spec_t *hk_test_spec_parse(const char *text) {
  hkc_spec_t *spec = (hkc_spec_t *)(uintptr_t)1; /* must be overwritten */
  hkc_diag_capture(spec_diag, sizeof spec_diag);
  int rc = hkc_spec_parse("t.yaml", text, strlen(text), &spec);
  hkc_diag_capture(NULL, 0);
  assert_true(rc == 0 ? spec != NULL : spec == NULL);
  if (rc != 0) fail_msg("spec rejected:\n%s\n--- diagnostics:\n%s", text, spec_diag);
  return spec;
}

void hk_test_spec_fuse(hkc_spec_t *spec, int mode) {
  hkc_diag_capture(spec_diag, sizeof spec_diag);
  int rc = hkc_fuse(spec, mode);
  hkc_diag_capture(NULL, 0);
  if (rc != 0) fail_msg("hkc_fuse failed:\n%s", spec_diag);
}

const char *hk_test_spec_diag(void) { return spec_diag; }

int hk_test_tensor(const hkc_spec_t *spec, const char *name) {
  int t = hkc_tensor_find(spec, name);
  if (t == HKC_NONE) fail_msg("no tensor '%s'", name);
  return t;
}

double hk_test_act_ref(int act, double x) {
  switch (act) {
  case HK_ACT_RELU: return x > 0 ? x : 0;
  case HK_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
  case HK_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  case HK_ACT_SILU: return x / (1 + exp(-x));
  default: return x;
  }
}

int hk_test_ewchain_act(char letter) {
  return letter == 'r' ? HK_ACT_RELU : letter == 'g' ? HK_ACT_GELU : letter == 's' ? HK_ACT_SILU : HK_ACT_GELU_TANH;
}

/* ---- GPU targets and generated sources -------------------------------------------------------- */
const hkc_gpu_arch_t *hk_test_arch(const char *name) {
  const hkc_gpu_arch_t *a = hkc_gpu_arch_find(name);
  assert_non_null(a);
  return a;
}

const char *hk_test_variant_name(const char *arch_name, hkc_kernel_key_t key) {
  const hkc_variant_t *v = hkc_variant_for(hk_test_arch(arch_name), &key);
  assert_non_null(v); /* every valid key has one: "simple" when nothing better applies */
  return v->name;
}

long long hk_test_source_macro(const char *src, const char *name) {
  char pat[64];
  snprintf(pat, sizeof pat, "#define %s ", name);
  const char *p = strstr(src, pat);
  assert_non_null(p);
  return atoll(p + strlen(pat));
}

void hk_test_kernel_name(hkc_kernel_out_t *k) {
  hkc_kernel_key_name(&k->key, k->name, sizeof k->name);
  size_t len = strlen(k->name);
  const struct {
    int on;
    const char *tag;
  } flags[] = {{k->key.has_mul, "_mul"}, {k->key.has_add, "_add"}, {k->key.has_sum, "_sum"}};
  for (size_t i = 0; i < 3; i++)
    if (flags[i].on && !strstr(k->name, flags[i].tag))
      len += (size_t)snprintf(k->name + len, sizeof k->name - len, "%s", flags[i].tag);
  if (k->key.program[0] && !strstr(k->name, k->key.program))
    snprintf(k->name + len, sizeof k->name - len, "_%s", k->key.program);
}

void hk_test_options(hkc_kernel_options_t *o, const char *list) {
  char item[512], err[1024];
  for (const char *p = list; *p;) {
    const size_t len = strcspn(p, ";");
    assert_true(len < sizeof item);
    snprintf(item, sizeof item, "%.*s", (int)len, p);
    err[0] = '\0';
    if (hkc_kernel_options_set_arg(o, item, err, sizeof err) != 0) fail_msg("kernel option %s: %s", item, err);
    p += len;
    if (*p) p++;
  }
}

int hk_test_need_nvrtc(void) {
  char why[768];
  if (hkc_nvrtc_available(why, sizeof why) == 0) return 0;
  printf("[ SKIP     ] nvrtc: %s\n", why);
  return -1;
}

int hk_test_need_hiprtc(void) {
  char why[768];
  if (hkc_hiprtc_available(why, sizeof why) == 0) return 0;
  printf("[ SKIP     ] hiprtc: %s\n", why);
  return -1;
}

/* ---- the compile pool ---------------------------------------------------------------------------- */
int hk_test_full(void) {
  const char *env = getenv("HKC_TEST_FULL");
  return env && *env && strcmp(env, "0") != 0;
}

static uint64_t fnv1a(uint64_t h, const char *s) {
  for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return (h ^ 0xff) * 1099511628211ull; /* a separator: ("ab", "c") and ("a", "bc") differ */
}

int hk_test_sampled_out(const char *arch, const char *kernel_name, const char *source) {
  if (hk_test_full()) return 0;
  const char *env = getenv("HKC_TEST_SAMPLE");
  const long div = env && *env ? strtol(env, NULL, 10) : 16;
  if (div <= 1) return 0;
  const uint64_t h = fnv1a(fnv1a(fnv1a(14695981039346656037ull, arch), kernel_name), source);
  return (h >> 17) % (uint64_t)div != 0;
}

void hk_test_compile_one(hk_test_compile_job_t *j, hk_test_compile_fn compile, unsigned flags) {
  static const unsigned char elf[4] = {0x7f, 'E', 'L', 'F'};
  char *src = hkc_codegen_gpu(j->arch, &j->kernel);
  if (!src) {
    snprintf(j->error, sizeof j->error, "codegen failed");
    return;
  }
  if ((flags & HK_TEST_COMPILE_SAMPLED) && !j->always && hk_test_sampled_out(j->arch->name, j->kernel.name, src)) {
    j->sampled_out = j->ok = 1; /* generated (the codegen is checked for every job), not compiled */
    free(src);
    return;
  }
  hkc_rtc_result_t r;
  if (compile(src, j->kernel.name, j->arch->name, &r) != 0)
    snprintf(j->error, sizeof j->error, "compile failed: %.560s", r.log ? r.log : "(no log)");
  else if ((flags & HK_TEST_COMPILE_ELF) && (r.code_size < 4 || memcmp(r.code, elf, 4) != 0))
    snprintf(j->error, sizeof j->error, "code object is not ELF (%zu bytes)", r.code_size);
  else if ((flags & HK_TEST_COMPILE_NO_WARNINGS) && r.log && strstr(r.log, "warning"))
    snprintf(j->error, sizeof j->error, "compiler warning: %.560s", strstr(r.log, "warning"));
  else if ((flags & HK_TEST_COMPILE_NO_WGMMA_SERIAL) && r.log && strstr(r.log, "wgmma.mma_async instructions are serialized"))
    snprintf(j->error, sizeof j->error, "ptxas serialized the wgmmas: %.560s",
             strstr(r.log, "wgmma.mma_async instructions are serialized"));
  else
    j->ok = 1;
  j->regs = r.vgprs;
  j->scratch = r.scratch_bytes;
  j->shared = r.shared_bytes;
  hkc_rtc_result_free(&r);
  free(src);
}

typedef struct compile_pool {
  hk_test_compile_job_t *jobs;
  size_t n_jobs, next;
  hk_test_compile_fn compile;
  unsigned flags;
  pthread_mutex_t lock;
} compile_pool_t;

static void *compile_worker(void *arg) {
  compile_pool_t *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->lock);
    size_t i = p->next++;
    pthread_mutex_unlock(&p->lock);
    if (i >= p->n_jobs) return NULL;
    hk_test_compile_one(&p->jobs[i], p->compile, p->flags);
  }
}

void hk_test_compile_all(hk_test_compile_job_t *jobs, size_t n_jobs, hk_test_compile_fn compile, int n_threads,
                         unsigned flags) {
  compile_pool_t p = {.jobs = jobs, .n_jobs = n_jobs, .compile = compile, .flags = flags};
  pthread_t threads[HK_TEST_COMPILE_MAX_THREADS];
  pthread_mutex_init(&p.lock, NULL);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int started = 0;
  for (int t = 0; t < n_threads && t < HK_TEST_COMPILE_MAX_THREADS; t++)
    if (pthread_create(&threads[t], NULL, compile_worker, &p) == 0) started++;
  if (started == 0) compile_worker(&p);
  for (int t = 0; t < started; t++) pthread_join(threads[t], NULL);
  pthread_mutex_destroy(&p.lock);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  size_t sampled_out = 0;
  for (size_t i = 0; i < n_jobs; i++) sampled_out += jobs[i].sampled_out != 0;
  if (sampled_out)
    printf("[ info     ] %zu compiles in %.1f s; %zu more generated, not compiled (sampled set; HKC_TEST_FULL=1 "
           "compiles them)\n", n_jobs - sampled_out,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec), sampled_out);
  else
    printf("[ info     ] %zu compiles in %.1f s\n", n_jobs,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
}

int hk_test_compile_failures(const hk_test_compile_job_t *jobs, size_t n_jobs) {
  int failures = 0;
  for (size_t i = 0; i < n_jobs; i++) {
    const hk_test_compile_job_t *j = &jobs[i];
    if (j->sampled_out) continue;
    const char *problem = !j->ok ? j->error : j->regs == 0 ? "no register count reported"
                                          : j->scratch != 0 ? "uses scratch / local memory (spills)"
                                                            : NULL;
    if (problem) {
      printf("[ FAIL     ] %s for %s: %s (regs %u, scratch %u)\n", j->kernel.name, j->arch->name, problem, j->regs,
             j->scratch);
      failures++;
    }
  }
  return failures;
}

hk_status_t hk_test_open_memory(const void *data, size_t size, const hk_allocator_t *allocator, hk_pack_t **out_pack) {
  hk_pack_open_options_t o = {.struct_size = sizeof o, .allocator = allocator, .allow_unsigned_code = 1};
  return hk_pack_open_memory_ex(data, size, &o, out_pack);
}

hk_status_t hk_test_open_file(const char *path, const hk_allocator_t *allocator, hk_pack_t **out_pack) {
  hk_pack_open_options_t o = {.struct_size = sizeof o, .allocator = allocator, .allow_unsigned_code = 1};
  return hk_pack_open_file_ex(path, &o, out_pack);
}
