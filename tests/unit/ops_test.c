/* SPDX-License-Identifier: Apache-2.0 */
/* Host kernels end to end: hkc_codegen_host -> hkc_rtc_host_compile -> dlopen -> the
 * kernel ABI, for every op, activation and dtype, and the fused forms (gemm epilogue
 * mul, norms with a residual add and a stored sum, element-wise chain programs), against
 * double-precision references written here (independent of the templates). Also: lowering of a hand-built spec,
 * kernel key names, the prelude's f16/bf16 conversions, and a -Wall -Wextra -Werror
 * build of the whole template set.
 *
 * Everything needed is compiled once, in the group setup, as one translation unit. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hkc.h"
#include "test_util.h"

typedef void (*kernel_fn_t)(void *const *args, uint32_t block_begin, uint32_t block_end);

#define N_DTYPES 3
static const hk_dtype_t k_dtypes[N_DTYPES] = {HK_DTYPE_F32, HK_DTYPE_F16, HK_DTYPE_BF16};
static const char *const k_dtype_names[N_DTYPES] = {"f32", "f16", "bf16"};
/* Relative tolerance per dtype: one output rounding (2^-11, 2^-8) plus f32 math. */
static const double k_tol[N_DTYPES] = {1e-5, 2e-3, 1.6e-2};
static double g_tol_mult = 1; /* a case with known f32 conditioning may loosen tolerance */

/* Extra functions appended to the generated source: the prelude's conversions. */
static const char k_conv_source[] =
    "\nHK_KERNEL void hkt_to_f16(const float *in, uint16_t *out, size_t n) {\n"
    "  for (size_t i = 0; i < n; i++) out[i] = hk_f32_to_f16(in[i]);\n}\n"
    "HK_KERNEL void hkt_to_bf16(const float *in, uint16_t *out, size_t n) {\n"
    "  for (size_t i = 0; i < n; i++) out[i] = hk_f32_to_bf16(in[i]);\n}\n"
    "HK_KERNEL void hkt_from_f16(const uint16_t *in, float *out, size_t n) {\n"
    "  for (size_t i = 0; i < n; i++) out[i] = hk_f16_to_f32(in[i]);\n}\n"
    "HK_KERNEL void hkt_from_bf16(const uint16_t *in, float *out, size_t n) {\n"
    "  for (size_t i = 0; i < n; i++) out[i] = hk_bf16_to_f32(in[i]);\n}\n"
    "HK_KERNEL void hkt_exp(const float *in, float *out, size_t n) {\n"
    "  for (size_t i = 0; i < n; i++) out[i] = hk_exp(in[i]);\n}\n"
    "HK_KERNEL void hkt_erf1p(const float *in, float *out, size_t n) {\n"
    "  for (size_t i = 0; i < n; i++) out[i] = hk_erf1p(in[i]);\n}\n";

static struct {
  hkc_kernel_out_t *kernels;
  size_t n_kernels;
  char *source;
  void *dl;
  char *dir;
  double compile_s;
} g_ops;

/* ---- the kernel set -------------------------------------------------------------- */
static void add_key(hkc_kernel_key_t key) {
  hkc_kernel_out_t *k = &g_ops.kernels[g_ops.n_kernels++];
  memset(k, 0, sizeof *k);
  k->key = key;
  hkc_kernel_key_name(&key, k->name, sizeof k->name);
}

/* gemm epilogue multiply: (act, trans_b, bias, residual) combinations compiled with mul. */
static const int k_mul_cases[][4] = {{HK_ACT_NONE, 0, 0, 0}, {HK_ACT_SILU, 0, 0, 0}, {HK_ACT_GELU, 1, 1, 1},
                                     {HK_ACT_SILU, 0, 1, 0}, {HK_ACT_NONE, 1, 0, 1}, {HK_ACT_RELU, 0, 1, 1}};
/* ewchain programs: every step kind, operand reuse, all 5 operands, the longest program. */
static const char *const k_programs[] = {"r", "a1", "m1ra2", "a1gm2m3a4", "st", "a1ra2sa3ga4ta1ra2sa3ga4tm1rm2sr"};

static const hk_op_t k_plain_ops[] = {HK_OP_ADD,       HK_OP_MUL,     HK_OP_RELU,    HK_OP_GELU,     HK_OP_SILU,
                                      HK_OP_LAYERNORM, HK_OP_RMSNORM, HK_OP_SOFTMAX, HK_OP_ATTENTION, HK_OP_ROPE,
                                      HK_OP_GELU_TANH, HK_OP_TANH, HK_OP_EMBEDDING, HK_OP_KV_APPEND,
                                      HK_OP_KV_ATTENTION, HK_OP_TAKE_ROWS, HK_OP_ARGMAX, HK_OP_SAMPLE};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int setup(void **state) {
  (void)state;
  g_ops.kernels = calloc(400, sizeof *g_ops.kernels);
  if (!g_ops.kernels) return -1;
  for (int d = 0; d < N_DTYPES; d++) {
    for (int act = 0; act < HK_ACT_COUNT_; act++)
      for (int flags = 0; flags < 8; flags++)
        add_key((hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = k_dtypes[d], .act = (hk_act_t)act,
                                   .trans_b = flags & 1, .has_bias = (flags >> 1) & 1,
                                   .has_residual = (flags >> 2) & 1});
    for (size_t o = 0; o < sizeof k_plain_ops / sizeof k_plain_ops[0]; o++)
      add_key((hkc_kernel_key_t){.op = k_plain_ops[o], .dtype = k_dtypes[d]});
    add_key((hkc_kernel_key_t){.op = HK_OP_EMBEDDING, .dtype = k_dtypes[d], .has_add = 1});
    add_key((hkc_kernel_key_t){.op = HK_OP_EMBEDDING, .dtype = k_dtypes[d], .has_add = 1, .has_ctx = 1});
    for (int f = 1; f < 6; f++) /* rope: positions from ctx and/or a scaling (f = 0 is the plain one) */
      add_key((hkc_kernel_key_t){.op = HK_OP_ROPE, .dtype = k_dtypes[d], .has_ctx = f & 1, .rope_scaling = f >> 1});
    for (int lm = 1; lm < 4; lm++)
      add_key((hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = k_dtypes[d], .has_lengths = lm & 1,
                                 .has_mask = lm >> 1});
    for (size_t m = 0; m < sizeof k_mul_cases / sizeof k_mul_cases[0]; m++)
      add_key((hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = k_dtypes[d], .act = (hk_act_t)k_mul_cases[m][0],
                                 .trans_b = k_mul_cases[m][1], .has_bias = k_mul_cases[m][2],
                                 .has_residual = k_mul_cases[m][3], .has_mul = 1});
    for (int rms = 0; rms < 2; rms++)
      for (int sum = 0; sum < 2; sum++)
        add_key((hkc_kernel_key_t){.op = rms ? HK_OP_RMSNORM : HK_OP_LAYERNORM, .dtype = k_dtypes[d], .has_add = 1,
                                   .has_sum = sum});
    for (size_t p = 0; p < sizeof k_programs / sizeof k_programs[0]; p++) {
      hkc_kernel_key_t key = {.op = HK_OP_EWCHAIN, .dtype = k_dtypes[d]};
      snprintf(key.program, sizeof key.program, "%s", k_programs[p]);
      add_key(key);
    }
  }
  char *src = hkc_codegen_host_variants(g_ops.kernels, g_ops.n_kernels, 0); /* variants: test_host_variants */
  if (!src) return -1;
  /* The masked attention kernels once more, named hkt_attn_noheap_DTYPE, compiled where malloc
   * returns NULL: their row-by-row fallback (templates/host/attention.c). */
  hkc_kernel_out_t noheap[N_DTYPES];
  memset(noheap, 0, sizeof noheap);
  for (int d = 0; d < N_DTYPES; d++) {
    noheap[d].key = (hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = k_dtypes[d], .has_lengths = 1, .has_mask = 1};
    snprintf(noheap[d].name, sizeof noheap[d].name, "hkt_attn_noheap_%s", k_dtype_names[d]);
  }
  char *nh_src = hkc_codegen_host_variants(noheap, N_DTYPES, 0);
  const char *nh = nh_src ? strstr(nh_src, "/* ---- hkt_attn_noheap_") : NULL;
  if (!nh) return -1;
  static const char nh_on[] = "\n#define malloc(n) ((void)(n), (void *)0)\n", nh_off[] = "#undef malloc\n";
  size_t n = strlen(src), n_nh = strlen(nh);
  g_ops.source = malloc(n + sizeof nh_on + n_nh + sizeof nh_off + sizeof k_conv_source);
  if (!g_ops.source) return -1;
  char *w = g_ops.source;
  memcpy(w, src, n), w += n;
  memcpy(w, nh_on, sizeof nh_on - 1), w += sizeof nh_on - 1;
  memcpy(w, nh, n_nh), w += n_nh;
  memcpy(w, nh_off, sizeof nh_off - 1), w += sizeof nh_off - 1;
  memcpy(w, k_conv_source, sizeof k_conv_source);
  free(src);
  free(nh_src);

  void *code = NULL;
  size_t size = 0;
  char version[160];
  double t0 = now_s();
  if (hkc_rtc_host_compile(g_ops.source, &code, &size, version, sizeof version) != 0) return -1;
  g_ops.compile_s = now_s() - t0;
  fprintf(stderr, "[ ops ] %zu kernels compiled in %.2f s (%zu bytes) by %s\n", g_ops.n_kernels, g_ops.compile_s, size,
          version);
  g_ops.dir = hk_test_tmpdir();
  if (!g_ops.dir) return -1;
  char path[4096];
  snprintf(path, sizeof path, "%s/kernels.so", g_ops.dir);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(code, 1, size, f) != size || fclose(f) != 0) return -1;
  free(code);
  g_ops.dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!g_ops.dl) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (g_ops.dl) dlclose(g_ops.dl);
  if (g_ops.dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/kernels.so", g_ops.dir);
    unlink(path);
    rmdir(g_ops.dir);
  }
  free(g_ops.dir);
  free(g_ops.source);
  free(g_ops.kernels);
  return 0;
}

static void *sym(const char *name) {
  void *s = dlsym(g_ops.dl, name);
  assert_non_null(s);
  return s;
}

static const char *g_lookup_name;     /* when set, lookup() returns this kernel whatever the key */
static void *g_lookup_dl;              /* when set, lookup() looks in this object instead */
static const char *g_lookup_suffix = ""; /* appended to the kernel's name (a variant's) */

static kernel_fn_t lookup(const hkc_kernel_key_t *key) {
  char name[128];
  hkc_kernel_key_name(key, name, sizeof name);
  if (g_lookup_name) snprintf(name, sizeof name, "%s", g_lookup_name);
  size_t len = strlen(name);
  snprintf(name + len, sizeof name - len, "%s", g_lookup_suffix);
  void *sym = dlsym(g_lookup_dl ? g_lookup_dl : g_ops.dl, name);
  if (!sym) fail_msg("kernel %s is not exported by the compiled object", name);
  kernel_fn_t fn;
  memcpy(&fn, &sym, sizeof fn);
  return fn;
}

/* ---- buffers: storage bits + the exact value the kernel sees ------------------------ */
#define GUARD 64 /* trailing elements checked for stray writes (the .so is not ASan'ed) */

typedef struct buf {
  int dt;      /* index into k_dtypes */
  size_t n;
  void *data;  /* n + GUARD elements */
  double *val; /* the value of each stored element */
} buf_t;

static size_t esize(int dt) { return dt == 0 ? 4 : 2; }

static buf_t buf_new(int dt, size_t n) {
  buf_t b = {dt, n, malloc((n + GUARD) * esize(dt)), malloc(n * sizeof(double))};
  assert_non_null(b.data);
  assert_non_null(b.val);
  memset((char *)b.data + n * esize(dt), 0xA5, GUARD * esize(dt));
  return b;
}

static void buf_free(buf_t *b) {
  free(b->data);
  free(b->val);
}

static double buf_get(const buf_t *b, size_t i) {
  if (b->dt == 0) return ((const float *)b->data)[i];
  uint16_t h = ((const uint16_t *)b->data)[i];
  return b->dt == 1 ? hk_test_f16_to_f32(h) : hk_test_bf16_to_f32(h);
}

static void buf_set(buf_t *b, size_t i, double v) {
  if (b->dt == 0) ((float *)b->data)[i] = (float)v;
  else if (b->dt == 1) ((uint16_t *)b->data)[i] = hk_test_f32_to_f16((float)v);
  else ((uint16_t *)b->data)[i] = hk_test_f32_to_bf16((float)v);
  b->val[i] = buf_get(b, i);
}

/* Uniform in [lo, hi), never zero (nor rounded to zero). */
static void buf_fill(buf_t *b, hk_test_rng_t *rng, double lo, double hi) {
  for (size_t i = 0; i < b->n; i++) {
    do buf_set(b, i, hk_test_uniform(rng, lo, hi));
    while (fabs(b->val[i]) < 1e-3 * (hi - lo));
  }
}

static buf_t buf_random(int dt, size_t n, hk_test_rng_t *rng, double lo, double hi) {
  buf_t b = buf_new(dt, n);
  buf_fill(&b, rng, lo, hi);
  return b;
}

static buf_t buf_poisoned(int dt, size_t n) {
  buf_t b = buf_new(dt, n);
  for (size_t i = 0; i < n; i++) {
    if (dt == 0) ((float *)b.data)[i] = NAN;
    else ((uint16_t *)b.data)[i] = dt == 1 ? 0x7e00 : 0x7fc0;
  }
  return b;
}

/* Worst |got - ref| / (tol * (|ref| + mag + floor)) over the buffer: <= 1 passes. NaN
 * (an unwritten element) counts as infinitely wrong. Also checks the guard. */
static double max_error(const buf_t *out, const double *ref, const double *mag, double floor, size_t *out_worst) {
  const unsigned char *guard = (const unsigned char *)out->data + out->n * esize(out->dt);
  for (size_t i = 0; i < GUARD * esize(out->dt); i++)
    if (guard[i] != 0xA5) fail_msg("kernel wrote past the end of its output (guard byte %zu)", i);
  double worst = 0;
  *out_worst = 0;
  for (size_t i = 0; i < out->n; i++) {
    double got = buf_get(out, i);
    double e = fabs(got - ref[i]) / (g_tol_mult * k_tol[out->dt] * (fabs(ref[i]) + (mag ? mag[i] : 0) + floor));
    if (isnan(e)) e = INFINITY;
    if (e > worst || (i == 0 && e >= worst)) {
      worst = e;
      *out_worst = i;
    }
  }
  return worst;
}

/* When set, check() appends the bytes of every output it checks here (test_host_variants). */
typedef struct capture {
  unsigned char *data;
  size_t len, cap;
} capture_t;
static capture_t *g_capture;

static void check(const char *what, const buf_t *out, const double *ref, const double *mag, double floor) {
  size_t i;
  if (g_capture) {
    const size_t n = out->n * esize(out->dt);
    if (g_capture->len + n > g_capture->cap) {
      g_capture->cap = 2 * (g_capture->len + n);
      g_capture->data = realloc(g_capture->data, g_capture->cap);
      assert_non_null(g_capture->data);
    }
    memcpy(g_capture->data + g_capture->len, out->data, n);
    g_capture->len += n;
  }
  double e = max_error(out, ref, mag, floor, &i);
  if (getenv("HK_OPS_VERBOSE")) fprintf(stderr, "  %-70s [%s] worst %.3f x tol\n", what, k_dtype_names[out->dt], e);
  if (!(e <= 1.0))
    fail_msg("%s [%s]: element %zu = %.9g, reference %.9g (error %.3g x tolerance)", what, k_dtype_names[out->dt],
             i, buf_get(out, i), ref[i], e);
}

/* ---- calling a kernel through the ABI --------------------------------------------------- */
typedef struct call {
  void *ptrs[HKC_MAX_ARGS];
  int64_t ints[HKC_MAX_ARGS];
  float floats[HKC_MAX_ARGS];
  void *args[HKC_MAX_ARGS];
  hkc_arg_t desc[HKC_MAX_ARGS];
  uint32_t n;
} call_t;

static void arg_tensor(call_t *c, const buf_t *b) {
  c->ptrs[c->n] = b ? b->data : NULL;
  c->args[c->n] = &c->ptrs[c->n];
  c->desc[c->n] = (hkc_arg_t){.kind = b ? HK_ARG_TENSOR : HK_ARG_NULL, .i = (int64_t)c->n};
  c->n++;
}

static void arg_ptr(call_t *c, void *p) {
  c->ptrs[c->n] = p;
  c->args[c->n] = &c->ptrs[c->n];
  c->desc[c->n] = (hkc_arg_t){.kind = p ? HK_ARG_TENSOR : HK_ARG_NULL, .i = (int64_t)c->n};
  c->n++;
}

static void arg_i64(call_t *c, int64_t v) {
  c->ints[c->n] = v;
  c->args[c->n] = &c->ints[c->n];
  c->desc[c->n] = (hkc_arg_t){.kind = HK_ARG_I64, .i = v};
  c->n++;
}

static void arg_f32(call_t *c, float v) {
  c->floats[c->n] = v;
  c->args[c->n] = &c->floats[c->n];
  c->desc[c->n] = (hkc_arg_t){.kind = HK_ARG_F32, .f = v};
  c->n++;
}

static size_t count_unwritten(const buf_t *out) {
  size_t u = 0;
  for (size_t i = 0; i < out->n; i++) u += isnan(buf_get(out, i));
  return u;
}

/* Runs every block of grid.x. Blocks partition the output, so with several blocks:
 * block 0 alone writes some but not all of it (block_end honoured), then the last
 * block alone writes more but, with three or more blocks, not the rest (block_begin
 * honoured). The middle blocks then run as uneven ranges in reverse order (blocks
 * are independent); empty and past-the-end ranges must write nothing (guard). out NULL
 * (an output that is not a float buf_t): the same ranges, the caller checks the writes. */
static void run(const hkc_kernel_key_t *key, call_t *c, const buf_t *out) {
  kernel_fn_t fn = lookup(key);
  uint32_t grid[3], block[3];
  hkc_host_launch_dims(key, c->desc, c->n, grid, block);
  assert_true(grid[0] >= 1);
  assert_int_equal(grid[1], 1);
  assert_int_equal(grid[2], 1);
  const uint32_t n = grid[0];
  fn(c->args, 0, 1);
  if (n >= 2 && !out) {
    fn(c->args, n - 1, n);
  } else if (n >= 2) {
    size_t u1 = count_unwritten(out);
    if (u1 == 0 || u1 == out->n) fail_msg("block 0 of %u wrote %zu of %zu elements", n, out->n - u1, out->n);
    fn(c->args, n - 1, n);
    size_t u2 = count_unwritten(out);
    if (u2 >= u1 || (n >= 3 && u2 == 0))
      fail_msg("block %u of %u: %zu then %zu of %zu elements unwritten", n - 1, n, u1, u2, out->n);
  }
  if (n >= 3) {
    uint32_t a = 1 + (n - 2) / 3, b = (n - 1) - (n - 2) / 4;
    fn(c->args, b, n - 1);
    fn(c->args, a, b);
    fn(c->args, 1, a);
  }
  fn(c->args, 1, 1);
  fn(c->args, n, n + 3);
}

/* ---- references (double precision) ------------------------------------------------------- */
static const char *const k_act_names[] = {"none", "relu", "gelu", "silu", "gelu_tanh"};

/* ---- gemm ---------------------------------------------------------------------------------- */
static void gemm_case_mul(int dt, hk_act_t act, int tb, int has_bias, int has_res, int has_mul, int64_t M, int64_t N,
                          int64_t K, hk_test_rng_t *rng) {
  buf_t A = buf_random(dt, (size_t)(M * K), rng, -1, 1);
  buf_t B = buf_random(dt, (size_t)(K * N), rng, -1, 1);
  buf_t bias = buf_random(dt, (size_t)N, rng, -1, 1);
  buf_t res = buf_random(dt, (size_t)(M * N), rng, -1, 1);
  buf_t mul = buf_random(dt, (size_t)(M * N), rng, -2, 2);
  buf_t C = buf_poisoned(dt, (size_t)(M * N));
  double *ref = malloc(sizeof(double) * (size_t)(M * N)), *mag = malloc(sizeof(double) * (size_t)(M * N));
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0, m = 0;
      for (int64_t k = 0; k < K; k++) {
        double p = A.val[i * K + k] * (tb ? B.val[j * K + k] : B.val[k * N + j]);
        s += p;
        m += fabs(p);
      }
      if (has_bias) s += bias.val[j], m += fabs(bias.val[j]);
      s = hk_test_act_ref(act, s);
      if (has_mul) s *= mul.val[i * N + j], m *= fabs(mul.val[i * N + j]);
      if (has_res) s += res.val[i * N + j], m += fabs(res.val[i * N + j]);
      ref[i * N + j] = s;
      mag[i * N + j] = m;
    }
  hkc_kernel_key_t key = {.op = HK_OP_GEMM, .dtype = k_dtypes[dt], .act = act, .trans_b = tb,
                          .has_bias = has_bias, .has_residual = has_res, .has_mul = has_mul};
  call_t c = {0};
  arg_tensor(&c, &A);
  arg_tensor(&c, &B);
  arg_tensor(&c, has_bias ? &bias : NULL);
  arg_tensor(&c, has_res ? &res : NULL);
  arg_tensor(&c, &C);
  arg_i64(&c, M);
  arg_i64(&c, N);
  arg_i64(&c, K);
  arg_tensor(&c, has_mul ? &mul : NULL);
  run(&key, &c, &C);
  char what[128];
  snprintf(what, sizeof what, "gemm %lldx%lldx%lld act=%s tb=%d bias=%d res=%d mul=%d", (long long)M, (long long)N,
           (long long)K, k_act_names[act], tb, has_bias, has_res, has_mul);
  check(what, &C, ref, mag, 1e-3);
  free(ref);
  free(mag);
  buf_free(&A);
  buf_free(&B);
  buf_free(&bias);
  buf_free(&res);
  buf_free(&mul);
  buf_free(&C);
}

static void gemm_case(int dt, hk_act_t act, int tb, int has_bias, int has_res, int64_t M, int64_t N, int64_t K,
                      hk_test_rng_t *rng) {
  gemm_case_mul(dt, act, tb, has_bias, has_res, 0, M, N, K, rng);
}

static void test_gemm(void **state) {
  (void)state;
  static const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {5, 9, 1}, {1, 300, 64}, {37, 260, 45}};
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 1);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (int act = 0; act < HK_ACT_COUNT_; act++)
      for (int flags = 0; flags < 8; flags++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
          gemm_case(dt, (hk_act_t)act, flags & 1, (flags >> 1) & 1, (flags >> 2) & 1, shapes[s][0], shapes[s][1],
                    shapes[s][2], &rng);
  /* Larger: several row and column tiles, K crossing many panels. */
  for (int dt = 0; dt < N_DTYPES; dt++) {
    gemm_case(dt, HK_ACT_GELU, 0, 1, 1, 70, 530, 200, &rng);
    gemm_case(dt, HK_ACT_SILU, 1, 1, 0, 33, 513, 97, &rng);
  }
}

/* The fused epilogue multiply (SwiGLU): act(A @ B + bias) * mul + residual, odd shapes,
 * several tiles. */
static void test_gemm_mul(void **state) {
  (void)state;
  static const int64_t shapes[][3] = {{1, 1, 1}, {37, 29, 13}, {5, 300, 64}, {70, 530, 45}};
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 11);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t m = 0; m < sizeof k_mul_cases / sizeof k_mul_cases[0]; m++)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        gemm_case_mul(dt, (hk_act_t)k_mul_cases[m][0], k_mul_cases[m][1], k_mul_cases[m][2], k_mul_cases[m][3], 1,
                      shapes[s][0], shapes[s][1], shapes[s][2], &rng);
}

/* ---- gemm through a BLAS: prelude.h's hk_host_set_blas ------------------------------------- */
typedef void (*sgemm_fn_t)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                           float *, int);
typedef struct blas_table { /* prelude.h's hk_host_blas_t */
  uint32_t struct_size, reserved;
  sgemm_fn_t sgemm;
} blas_table_t;
static sgemm_fn_t g_cblas_sgemm;
static int g_sgemm_calls;

static void counting_sgemm(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, float beta, float *c, int ldc) {
  g_sgemm_calls++;
  g_cblas_sgemm(order, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/* Every gemm epilogue form (act x trans_b x bias x residual, and the mul cases) on odd shapes,
 * in f32 with OpenBLAS's sgemm handed to the object and without it, and f16 / bf16 through it
 * (f32 copies of the operands), against the double reference; run() calls uneven block
 * ranges, so both merged row spans and single tiles reach sgemm. A counting sgemm proves which
 * path ran: every case with the table calls it, none without. Skipped when libopenblas.so.0
 * is not installed. */
static void test_gemm_blas(void **state) {
  (void)state;
  void *ob = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!ob) {
    fprintf(stderr, "SKIP gemm through OpenBLAS: libopenblas.so.0 is not installed (libopenblas0-pthread)\n");
    skip();
  }
  void *p = dlsym(ob, "cblas_sgemm"), *q = dlsym(ob, "openblas_set_num_threads");
  assert_non_null(p);
  assert_non_null(q);
  memcpy(&g_cblas_sgemm, &p, sizeof p);
  void (*set_threads)(int);
  memcpy(&set_threads, &q, sizeof q);
  set_threads(1);
  void (*set_blas)(const blas_table_t *);
  void *sb = sym("hk_host_set_blas");
  memcpy(&set_blas, &sb, sizeof sb);
  const blas_table_t table = {sizeof table, 0, counting_sgemm};
  static const int64_t shapes[][3] = {{1, 1, 1}, {7, 13, 5}, {5, 9, 1}, {37, 300, 203}, {70, 530, 45}, {33, 513, 97}};
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 21);
  for (int with = 1; with >= 0; with--) {
    set_blas(with ? &table : NULL);
    for (int act = 0; act < HK_ACT_COUNT_; act++)
      for (int flags = 0; flags < 8; flags++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
          if (!with && (act || s % 2 == 0)) continue; /* the C loops: test_gemm's; here only that sgemm stays out */
          const int before = g_sgemm_calls;
          gemm_case(0, (hk_act_t)act, flags & 1, (flags >> 1) & 1, (flags >> 2) & 1, shapes[s][0], shapes[s][1],
                    shapes[s][2], &rng);
          if (with ? g_sgemm_calls == before : g_sgemm_calls != before)
            fail_msg("gemm %lldx%lldx%lld act=%d flags=%d: sgemm called %d times %s the table",
                     (long long)shapes[s][0], (long long)shapes[s][1], (long long)shapes[s][2], act, flags,
                     g_sgemm_calls - before, with ? "with" : "without");
        }
    for (size_t m = 0; m < sizeof k_mul_cases / sizeof k_mul_cases[0]; m++)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int before = g_sgemm_calls;
        gemm_case_mul(0, (hk_act_t)k_mul_cases[m][0], k_mul_cases[m][1], k_mul_cases[m][2], k_mul_cases[m][3], 1,
                      shapes[s][0], shapes[s][1], shapes[s][2], &rng);
        assert_true(with ? g_sgemm_calls > before : g_sgemm_calls == before);
      }
  }
  set_blas(&table); /* 16-bit types through f32 copies of their operands (the odd shapes) */
  for (int dt = 1; dt < N_DTYPES; dt++)
    for (int flags = 0; flags < 8; flags++)
      for (size_t s = 1; s < sizeof shapes / sizeof shapes[0]; s += 2) {
        const int before16 = g_sgemm_calls;
        gemm_case(dt, flags & 1 ? HK_ACT_GELU : HK_ACT_SILU, flags & 1, (flags >> 1) & 1, (flags >> 2) & 1,
                  shapes[s][0], shapes[s][1], shapes[s][2], &rng);
        if (g_sgemm_calls == before16)
          fail_msg("%s gemm %lldx%lldx%lld flags=%d: sgemm not called", k_dtype_names[dt], (long long)shapes[s][0],
                   (long long)shapes[s][1], (long long)shapes[s][2], flags);
      }
  for (int dt = 1; dt < N_DTYPES; dt++)
    for (size_t m = 0; m < sizeof k_mul_cases / sizeof k_mul_cases[0]; m++) {
      const int before16 = g_sgemm_calls;
      gemm_case_mul(dt, (hk_act_t)k_mul_cases[m][0], k_mul_cases[m][1], k_mul_cases[m][2], k_mul_cases[m][3], 1, 37,
                    300, 203, &rng);
      assert_true(g_sgemm_calls > before16);
    }
  /* more columns than one converted chunk of B (prelude.h's HK_GEMM_LP_NC), both B layouts */
  for (int tb = 0; tb < 2; tb++) gemm_case(2, HK_ACT_NONE, tb, 1, 1, 19, 1100, 33, &rng);
  set_blas(NULL);
  const int before = g_sgemm_calls;
  /* a table too short for sgemm is not taken */
  const blas_table_t short_table = {sizeof(uint32_t) * 2, 0, counting_sgemm};
  set_blas(&short_table);
  gemm_case(0, HK_ACT_NONE, 0, 1, 0, 37, 300, 203, &rng);
  assert_int_equal(g_sgemm_calls, before);
  set_blas(NULL);
}

/* ---- element-wise chains ------------------------------------------------------------------ */
/* Operands of a program (1 + the largest operand number). */
static int program_operands(const char *p) {
  int n = 1;
  for (; *p; p++)
    if (*p >= '1' && *p <= '9' && *p - '0' + 1 > n) n = *p - '0' + 1;
  return n;
}

static void ewchain_case(int dt, const char *program, int64_t n, const int64_t *sizes, hk_test_rng_t *rng) {
  int nin = program_operands(program);
  buf_t in[HKC_MAX_NODE_IN];
  for (int j = 0; j < nin; j++) in[j] = buf_random(dt, (size_t)sizes[j], rng, -2, 2);
  buf_t out = buf_poisoned(dt, (size_t)n);
  double *ref = malloc(sizeof(double) * (size_t)n), *mag = malloc(sizeof(double) * (size_t)n);
  for (int64_t i = 0; i < n; i++) {
    double v = in[0].val[i % sizes[0]], m = fabs(v);
    for (const char *p = program; *p; p++) {
      if (*p == 'a' || *p == 'm') {
        int j = *++p - '0';
        double o = in[j].val[i % sizes[j]];
        if (p[-1] == 'a') v += o, m += fabs(o);
        else v *= o, m *= fabs(o);
      } else {
        v = hk_test_act_ref(hk_test_ewchain_act(*p), v);
        m = fabs(v) + m; /* 1 + erf / 1 + exp cancel for negative inputs */
      }
    }
    ref[i] = v;
    mag[i] = m;
  }
  hkc_kernel_key_t key = {.op = HK_OP_EWCHAIN, .dtype = k_dtypes[dt]};
  snprintf(key.program, sizeof key.program, "%s", program);
  call_t c = {0};
  arg_tensor(&c, &out);
  arg_i64(&c, n);
  for (int j = 0; j < nin; j++) {
    arg_tensor(&c, &in[j]);
    arg_i64(&c, sizes[j]);
  }
  run(&key, &c, &out);
  char what[128];
  snprintf(what, sizeof what, "ewchain %s n=%lld n0=%lld", program, (long long)n, (long long)sizes[0]);
  check(what, &out, ref, mag, 1e-3);
  for (int j = 0; j < nin; j++) buf_free(&in[j]);
  buf_free(&out);
  free(ref);
  free(mag);
}

static void test_ewchain(void **state) {
  (void)state;
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 12);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t p = 0; p < sizeof k_programs / sizeof k_programs[0]; p++) {
      /* all full (the vectorizable path, across chunks); broadcast rows and scalars in
       * any operand, the first included; a single element */
      const int64_t full[5] = {40000, 40000, 40000, 40000, 40000};
      const int64_t mixed[5] = {29, 37 * 29, 1, 29, 37 * 29};
      const int64_t big[5] = {35000, 7, 35000, 1, 5000};
      const int64_t one[5] = {1, 1, 1, 1, 1};
      ewchain_case(dt, k_programs[p], 40000, full, &rng);
      ewchain_case(dt, k_programs[p], 37 * 29, mixed, &rng);
      ewchain_case(dt, k_programs[p], 35000, big, &rng);
      ewchain_case(dt, k_programs[p], 1, one, &rng);
    }
}

/* ---- element-wise ----------------------------------------------------------------------- */
static void test_binary(void **state) {
  (void)state;
  /* n, na, nb: same shape (also across chunks), [rows, cols] op [cols] both ways, scalar. */
  static const int64_t shapes[][3] = {{1, 1, 1},          {7, 7, 7},      {40000, 40000, 40000},
                                      {3300, 3300, 100},  {3300, 100, 3300}, {35000, 35000, 1},
                                      {16384, 1, 16384}};
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 2);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (int mul = 0; mul < 2; mul++)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t n = shapes[s][0], na = shapes[s][1], nb = shapes[s][2];
        buf_t a = buf_random(dt, (size_t)na, &rng, -2, 2), b = buf_random(dt, (size_t)nb, &rng, -2, 2);
        buf_t out = buf_poisoned(dt, (size_t)n);
        double *ref = malloc(sizeof(double) * (size_t)n), *mag = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
          double x = a.val[i % na], y = b.val[i % nb];
          ref[i] = mul ? x * y : x + y;
          mag[i] = mul ? 0 : fabs(x) + fabs(y);
        }
        hkc_kernel_key_t key = {.op = mul ? HK_OP_MUL : HK_OP_ADD, .dtype = k_dtypes[dt]};
        call_t c = {0};
        arg_tensor(&c, &a);
        arg_tensor(&c, &b);
        arg_tensor(&c, &out);
        arg_i64(&c, n);
        arg_i64(&c, na);
        arg_i64(&c, nb);
        run(&key, &c, &out);
        char what[96];
        snprintf(what, sizeof what, "%s n=%lld na=%lld nb=%lld", mul ? "mul" : "add", (long long)n, (long long)na,
                 (long long)nb);
        check(what, &out, ref, mag, 0);
        free(ref);
        free(mag);
        buf_free(&a);
        buf_free(&b);
        buf_free(&out);
      }
}

static void test_unary(void **state) {
  (void)state;
  static const hk_op_t ops[] = {HK_OP_RELU, HK_OP_GELU, HK_OP_SILU, HK_OP_GELU_TANH, HK_OP_TANH};
  static const hk_act_t acts[] = {HK_ACT_RELU, HK_ACT_GELU, HK_ACT_SILU, HK_ACT_GELU_TANH, HK_ACT_NONE}; /* none: tanh */
  static const int64_t sizes[] = {1, 7, 40000};
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 3);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (int o = 0; o < 5; o++)
      for (int s = 0; s < 3; s++) {
        int64_t n = sizes[s];
        buf_t x = buf_random(dt, (size_t)n, &rng, -5, 5), out = buf_poisoned(dt, (size_t)n);
        double *ref = malloc(sizeof(double) * (size_t)n), *mag = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) {
          ref[i] = ops[o] == HK_OP_TANH ? tanh(x.val[i]) : hk_test_act_ref(acts[o], x.val[i]);
          mag[i] = fabs(x.val[i]); /* 1 + erf and 1 + exp cancel for negative x */
        }
        hkc_kernel_key_t key = {.op = ops[o], .dtype = k_dtypes[dt]};
        call_t c = {0};
        arg_tensor(&c, &x);
        arg_tensor(&c, &out);
        arg_i64(&c, n);
        run(&key, &c, &out);
        char what[64];
        snprintf(what, sizeof what, "%s n=%lld", hkc_op_name(ops[o]), (long long)n);
        check(what, &out, ref, mag, 0);
        free(ref);
        free(mag);
        buf_free(&x);
        buf_free(&out);
      }
}

/* ---- norms and softmax ---------------------------------------------------------------- */
/* has_add: the row normalised is x + add (fused residual add); has_sum: that sum is also
 * stored, and checked. */
static void norm_case_add(int dt, int rms, int has_add, int has_sum, int64_t rows, int64_t cols, double offset,
                          hk_test_rng_t *rng) {
  const float eps = 1e-5f;
  size_t n = (size_t)(rows * cols);
  buf_t x = buf_random(dt, n, rng, offset - 1, offset + 1);
  buf_t add = buf_random(dt, n, rng, -1, 1);
  buf_t gamma = buf_random(dt, (size_t)cols, rng, -1.5, 1.5), beta = buf_random(dt, (size_t)cols, rng, -1, 1);
  buf_t out = buf_poisoned(dt, n), sum = buf_poisoned(dt, n);
  double *ref = malloc(sizeof(double) * n), *mag = malloc(sizeof(double) * n);
  double *ref_sum = malloc(sizeof(double) * n), *mag_sum = malloc(sizeof(double) * n);
  double *row = malloc(sizeof(double) * (size_t)cols);
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t c = 0; c < cols; c++) {
      row[c] = x.val[r * cols + c] + (has_add ? add.val[r * cols + c] : 0);
      ref_sum[r * cols + c] = row[c];
      mag_sum[r * cols + c] = fabs(x.val[r * cols + c]) + fabs(add.val[r * cols + c]);
    }
    const double *xr = row;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; c++) mean += xr[c];
    mean = rms ? 0 : mean / (double)cols;
    for (int64_t c = 0; c < cols; c++) var += (xr[c] - mean) * (xr[c] - mean);
    double rstd = 1 / sqrt(var / (double)cols + (double)eps);
    for (int64_t c = 0; c < cols; c++) {
      double xh = (xr[c] - mean) * rstd;
      ref[r * cols + c] = xh * gamma.val[c] + (rms ? 0 : beta.val[c]);
      mag[r * cols + c] = fabs(gamma.val[c]) * (fabs(xh) + 1) + (rms ? 0 : fabs(beta.val[c]));
    }
  }
  hkc_kernel_key_t key = {.op = rms ? HK_OP_RMSNORM : HK_OP_LAYERNORM, .dtype = k_dtypes[dt], .has_add = has_add,
                          .has_sum = has_sum};
  call_t c = {0};
  arg_tensor(&c, &x);
  arg_tensor(&c, &gamma);
  if (!rms) arg_tensor(&c, &beta);
  arg_tensor(&c, &out);
  arg_i64(&c, rows);
  arg_i64(&c, cols);
  arg_f32(&c, eps);
  arg_tensor(&c, has_add ? &add : NULL);
  arg_tensor(&c, has_sum ? &sum : NULL);
  run(&key, &c, &out);
  char what[96];
  snprintf(what, sizeof what, "%s%s%s %lldx%lld offset %g", rms ? "rmsnorm" : "layernorm", has_add ? " +add" : "",
           has_sum ? " +sum" : "", (long long)rows, (long long)cols, offset);
  check(what, &out, ref, mag, 0);
  if (has_sum) {
    strcat(what, " (stored sum)");
    check(what, &sum, ref_sum, mag_sum, 0);
  } else {
    assert_int_equal(count_unwritten(&sum), n); /* no sum requested: nothing written there */
  }
  free(ref);
  free(mag);
  free(ref_sum);
  free(mag_sum);
  free(row);
  buf_free(&x);
  buf_free(&add);
  buf_free(&gamma);
  buf_free(&beta);
  buf_free(&out);
  buf_free(&sum);
}

static void norm_case(int dt, int rms, int64_t rows, int64_t cols, double offset, hk_test_rng_t *rng) {
  norm_case_add(dt, rms, 0, 0, rows, cols, offset, rng);
}

/* The fused residual add + norm, with and without the stored sum. */
static void test_norms_add(void **state) {
  (void)state;
  static const int64_t shapes[][2] = {{1, 1}, {3, 7}, {9, 768}, {2, 1001}};
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 13);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (int rms = 0; rms < 2; rms++)
      for (int sum = 0; sum < 2; sum++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
          norm_case_add(dt, rms, 1, sum, shapes[s][0], shapes[s][1], rms ? 0.5 : 20, &rng);
}

static void test_norms(void **state) {
  (void)state;
  static const int64_t shapes[][2] = {{1, 1}, {5, 1}, {3, 7}, {1, 768}, {9, 768}, {2, 1001}};
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 4);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (int rms = 0; rms < 2; rms++)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        norm_case(dt, rms, shapes[s][0], shapes[s][1], rms ? 0.5 : 20, &rng);
  /* Mean 1700 x the spread: the f32 mean alone costs ~5e-5 relative, but a one-pass
   * E[x^2] - E[x]^2 variance is off by tens of percent (or NaN). */
  g_tol_mult = 100;
  norm_case(0, 0, 4, 768, 1000, &rng);
  g_tol_mult = 1;
}

static void test_softmax(void **state) {
  (void)state;
  static const int64_t shapes[][2] = {{1, 1}, {4, 7}, {3, 768}, {2, 1000}};
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 5);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (int big = 0; big < 2; big++)
      for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)(rows * cols);
        /* big: exp(150) overflows f32, so only a max-subtracted softmax survives. */
        buf_t x = buf_random(dt, n, &rng, big ? -150 : -3, big ? 150 : 3), out = buf_poisoned(dt, n);
        double *ref = malloc(sizeof(double) * n);
        for (int64_t r = 0; r < rows; r++) {
          const double *xr = x.val + r * cols;
          double mx = -INFINITY, sum = 0;
          for (int64_t c = 0; c < cols; c++) mx = fmax(mx, xr[c]);
          for (int64_t c = 0; c < cols; c++) sum += exp(xr[c] - mx);
          for (int64_t c = 0; c < cols; c++) ref[r * cols + c] = exp(xr[c] - mx) / sum;
        }
        hkc_kernel_key_t key = {.op = HK_OP_SOFTMAX, .dtype = k_dtypes[dt]};
        call_t c = {0};
        arg_tensor(&c, &x);
        arg_tensor(&c, &out);
        arg_i64(&c, rows);
        arg_i64(&c, cols);
        run(&key, &c, &out);
        char what[64];
        snprintf(what, sizeof what, "softmax %lldx%lld%s", (long long)rows, (long long)cols, big ? " large" : "");
        check(what, &out, ref, NULL, 1e-4); /* floor: f32 exp underflow, f16 subnormals */
        free(ref);
        buf_free(&x);
        buf_free(&out);
      }
}

/* ---- attention ---------------------------------------------------------------------------- */
typedef struct attn_case {
  int64_t batch, seq_q, seq_kv, heads, kv_heads, dh;
  int causal, packed;
  float scale; /* 0: default 1/sqrt(dh) */
  double qrange;
  int lengths;    /* masked ABI: key lengths per batch entry, k_attn_lengths[b % 5] */
  int mask_heads; /* masked ABI: an additive mask [B, mask_heads, seq_q, seq_kv] (0: none) */
} attn_case_t;

/* Key lengths of the masked cases (seq_kv - 1 and seq_kv + 5 as given: the kernel clamps
 * 0..seq_kv): full, one key, none (zeros out), over-long, one short. */
static int32_t attn_length(int64_t b, int64_t seq_kv) {
  const int64_t pick[5] = {seq_kv, 1, 0, seq_kv + 5, seq_kv - 1};
  return (int32_t)pick[b % 5];
}

static void attention_case(int dt, const attn_case_t *t, hk_test_rng_t *rng) {
  const int64_t H = t->heads, Hkv = t->kv_heads, dh = t->dh, B = t->batch;
  const int64_t ld_q = t->packed ? (H + 2 * Hkv) * dh : H * dh, ld_kv = t->packed ? ld_q : Hkv * dh;
  const int64_t q_col = 0, k_col = t->packed ? H * dh : 0, v_col = t->packed ? (H + Hkv) * dh : 0;
  const float scale = t->scale != 0 ? t->scale : (float)(1 / sqrt((double)dh));
  assert_true(!t->packed || t->seq_q == t->seq_kv);
  buf_t q = buf_random(dt, (size_t)(B * t->seq_q * ld_q), rng, -t->qrange, t->qrange);
  buf_t k = t->packed ? q : buf_random(dt, (size_t)(B * t->seq_kv * ld_kv), rng, -1, 1);
  buf_t v = t->packed ? q : buf_random(dt, (size_t)(B * t->seq_kv * ld_kv), rng, -1, 1);
  size_t n_out = (size_t)(B * t->seq_q * H * dh);
  buf_t out = buf_poisoned(dt, n_out);
  double *ref = malloc(sizeof(double) * n_out), *mag = malloc(sizeof(double) * n_out);
  double *p = malloc(sizeof(double) * (size_t)t->seq_kv);
  int32_t *lens = malloc(sizeof(int32_t) * (size_t)B);
  for (int64_t b = 0; b < B; b++) lens[b] = attn_length(b, t->seq_kv);
  const int masked = t->lengths || t->mask_heads;
  buf_t mask = {0};
  if (t->mask_heads) { /* -inf in some places: such keys drop out (a row of them: zeros) */
    mask = buf_random(dt, (size_t)(B * t->mask_heads * t->seq_q * t->seq_kv), rng, -3, 3);
    for (size_t e = 0; e < mask.n; e += 7) {
      if (dt == 0) ((float *)mask.data)[e] = -INFINITY;
      else ((uint16_t *)mask.data)[e] = dt == 1 ? 0xfc00 : 0xff80;
      mask.val[e] = -INFINITY;
    }
  }
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < t->seq_q; i++) {
        int64_t g = h / (H / Hkv);
        const double *qr = q.val + (b * t->seq_q + i) * ld_q + q_col + h * dh;
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < t->seq_kv; j++) {
          if ((t->causal && j > i) || (t->lengths && j >= lens[b])) {
            p[j] = -INFINITY;
            continue;
          }
          const double *kr = k.val + (b * t->seq_kv + j) * ld_kv + k_col + g * dh;
          double s = 0;
          for (int64_t d = 0; d < dh; d++) s += qr[d] * kr[d];
          p[j] = s * scale;
          if (t->mask_heads)
            p[j] += mask.val[((b * t->mask_heads + (t->mask_heads > 1 ? h : 0)) * t->seq_q + i) * t->seq_kv + j];
          mx = fmax(mx, p[j]);
        }
        for (int64_t j = 0; j < t->seq_kv; j++) sum += (p[j] = mx == -INFINITY ? 0 : exp(p[j] - mx));
        if (sum == 0) sum = INFINITY; /* no key: zeros */
        for (int64_t d = 0; d < dh; d++) {
          double o = 0, m = 0;
          for (int64_t j = 0; j < t->seq_kv; j++) {
            double vv = v.val[(b * t->seq_kv + j) * ld_kv + v_col + g * dh + d];
            o += p[j] * vv;
            m += p[j] * fabs(vv);
          }
          size_t idx = (size_t)((b * t->seq_q + i) * H * dh + h * dh + d);
          ref[idx] = o / sum;
          mag[idx] = m / sum;
        }
      }
  hkc_kernel_key_t key = {.op = HK_OP_ATTENTION, .dtype = k_dtypes[dt], .has_lengths = t->lengths,
                          .has_mask = t->mask_heads > 0};
  call_t c = {0};
  arg_tensor(&c, &q);
  arg_tensor(&c, &k);
  arg_tensor(&c, &v);
  arg_tensor(&c, &out);
  int64_t ints[] = {B, t->seq_q, t->seq_kv, H, Hkv, dh, ld_q, ld_kv, q_col, k_col, v_col, t->causal};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) arg_i64(&c, ints[i]);
  arg_f32(&c, scale);
  if (masked) {
    arg_ptr(&c, t->lengths ? lens : NULL);
    arg_tensor(&c, t->mask_heads ? &mask : NULL);
    arg_i64(&c, t->mask_heads);
  }
  run(&key, &c, &out);
  char what[200];
  snprintf(what, sizeof what,
           "attention b=%lld sq=%lld skv=%lld h=%lld kvh=%lld dh=%lld causal=%d packed=%d lengths=%d mask_heads=%d",
           (long long)B, (long long)t->seq_q, (long long)t->seq_kv, (long long)H, (long long)Hkv, (long long)dh,
           t->causal, t->packed, t->lengths, t->mask_heads);
  check(what, &out, ref, mag, 1e-2);
  if (t->mask_heads) buf_free(&mask);
  free(lens);
  free(p);
  free(ref);
  free(mag);
  buf_free(&q);
  if (!t->packed) {
    buf_free(&k);
    buf_free(&v);
  }
  buf_free(&out);
}

static void test_attention(void **state) {
  (void)state;
  static const attn_case_t cases[] = {
      {2, 77, 77, 2, 2, 8, 0, 0, 0, 1, 0, 0}, /* plain, several key chunks */
      {1, 77, 77, 4, 2, 64, 1, 0, 0, 1, 0, 0}, /* causal, grouped-query 4/2 */
      {2, 1, 1, 4, 1, 8, 1, 0, 0, 1, 0, 0}, /* seq 1, multi-query 4/1 */
      {1, 1, 77, 4, 4, 8, 0, 0, 0, 1, 0, 0}, /* one query, many keys */
      {1, 5, 77, 4, 1, 64, 1, 0, 0, 1, 0, 0}, /* seq_q < seq_kv, causal: j > i masked */
      {1, 77, 13, 2, 1, 16, 1, 0, 0, 1, 0, 0}, /* seq_q > seq_kv, causal */
      {2, 33, 33, 4, 2, 16, 1, 1, 0, 1, 0, 0}, /* packed qkv, grouped-query */
      {1, 20, 20, 3, 3, 8, 0, 1, 0.3f, 1, 0, 0}, /* packed, explicit scale */
      {1, 3, 130, 2, 2, 300, 0, 0, 0, 1, 0, 0}, /* dh > 256: head dim in two column chunks */
      {1, 70, 70, 2, 1, 32, 1, 0, 0, 6, 0, 0}, /* sharp scores: online-softmax rescaling */
      /* masked ABI: lengths (full, 1, 0, over-long, one short), additive masks with -inf */
      {5, 7, 37, 4, 2, 8, 0, 0, 0, 1, 1, 0},  /* lengths, several key chunks */
      {5, 37, 37, 2, 1, 16, 1, 1, 0, 1, 1, 0}, /* lengths, causal, packed */
      {2, 9, 21, 4, 2, 8, 0, 0, 0, 1, 0, 4},  /* mask per head */
      {3, 21, 21, 2, 2, 8, 1, 0, 0, 1, 1, 1}, /* mask shared by heads, lengths, causal */
  };
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 6);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) attention_case(dt, &cases[i], &rng);
}

/* The attention cases through OpenBLAS's sgemm (counted: every dtype must call it), and through
 * the row-by-row fallback that runs when the kernel's heap allocation fails (the noheap
 * instances; sgemm never called). Skipped without libopenblas.so.0. */
static void test_attention_blas(void **state) {
  (void)state;
  static const attn_case_t cases[] = {
      {2, 77, 77, 2, 2, 8, 0, 0, 0, 1, 0, 0},   {1, 77, 77, 4, 2, 64, 1, 0, 0, 1, 0, 0},
      {2, 1, 1, 4, 1, 8, 1, 0, 0, 1, 0, 0},     {1, 5, 300, 4, 1, 64, 1, 0, 0, 1, 0, 0},
      {1, 77, 13, 2, 1, 16, 1, 0, 0, 1, 0, 0},  {2, 33, 33, 4, 2, 16, 1, 1, 0, 1, 0, 0},
      {1, 3, 130, 2, 2, 300, 0, 0, 0, 1, 0, 0}, {1, 70, 270, 2, 1, 32, 1, 0, 0, 6, 0, 0},
      {5, 37, 37, 2, 1, 16, 1, 1, 0, 1, 1, 0},  {3, 21, 140, 2, 2, 8, 1, 0, 0, 1, 1, 1},
  };
  void *ob = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!ob) {
    fprintf(stderr, "SKIP attention through OpenBLAS: libopenblas.so.0 is not installed (libopenblas0-pthread)\n");
    skip();
  }
  void *p = dlsym(ob, "cblas_sgemm");
  assert_non_null(p);
  memcpy(&g_cblas_sgemm, &p, sizeof p);
  void (*set_blas)(const blas_table_t *);
  void *sb = sym("hk_host_set_blas");
  memcpy(&set_blas, &sb, sizeof sb);
  const blas_table_t table = {sizeof table, 0, counting_sgemm};
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 16);
  set_blas(&table);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      const int before = g_sgemm_calls;
      attention_case(dt, &cases[i], &rng);
      if (g_sgemm_calls == before) fail_msg("%s attention case %zu: sgemm not called", k_dtype_names[dt], i);
    }
  for (int dt = 0; dt < N_DTYPES; dt++) {
    char name[64];
    snprintf(name, sizeof name, "hkt_attn_noheap_%s", k_dtype_names[dt]);
    g_lookup_name = name;
    const int before = g_sgemm_calls;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      attn_case_t c = cases[i];
      c.lengths = 1;                             /* the noheap instances take the masked ABI */
      c.mask_heads = i % 2 ? (int)c.heads : 0;
      attention_case(dt, &c, &rng);
    }
    g_lookup_name = NULL;
    assert_int_equal(g_sgemm_calls, before);
  }
  set_blas(NULL);
}

/* The AVX2 variants (hkc_codegen_host_variants: every kernel once more under
 * HKC_HOST_VARIANT_SUFFIX, compiled for AVX2 + FMA): a set of gemm, attention, norm and softmax
 * kernels in f32 and bf16 with their variants, checked against the double references through the
 * variant symbols, and bit for bit against the baseline symbols of the same object on the same
 * inputs (the variants change the ISA, not the arithmetic). Skipped on a CPU without AVX2 and
 * FMA. */
static void run_variant_cases(const char *suffix, hk_test_rng_t *rng) {
  static const attn_case_t attn[] = {{2, 77, 77, 4, 2, 64, 1, 0, 0, 1, 0, 0}, {5, 37, 37, 2, 1, 16, 1, 1, 0, 1, 1, 0}};
  g_lookup_suffix = suffix;
  for (int dt = 0; dt < N_DTYPES; dt += 2) { /* f32, bf16 */
    for (int act = 0; act < HK_ACT_COUNT_; act++) gemm_case(dt, (hk_act_t)act, act & 1, 1, act & 2 ? 1 : 0, 37, 300, 203, rng);
    for (size_t i = 0; i < sizeof attn / sizeof attn[0]; i++) attention_case(dt, &attn[i], rng);
  }
  g_lookup_suffix = "";
}

static void test_host_variants(void **state) {
  (void)state;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    fprintf(stderr, "SKIP the AVX2 variants: this CPU lacks AVX2 or FMA\n");
    skip();
  }
#else
  fprintf(stderr, "SKIP the AVX2 variants: not an x86-64 build\n");
  skip();
#endif
  hkc_kernel_out_t ks[2 * HK_ACT_COUNT_ * 2 + 8];
  size_t n = 0;
  memset(ks, 0, sizeof ks);
  for (int dt = 0; dt < N_DTYPES; dt += 2) {
    for (int act = 0; act < HK_ACT_COUNT_; act++)
      ks[n++].key = (hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = k_dtypes[dt], .act = (hk_act_t)act, .trans_b = act & 1,
                                       .has_bias = 1, .has_residual = act & 2 ? 1 : 0};
    ks[n++].key = (hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = k_dtypes[dt]};
    ks[n++].key = (hkc_kernel_key_t){.op = HK_OP_ATTENTION, .dtype = k_dtypes[dt], .has_lengths = 1};
  }
  for (size_t i = 0; i < n; i++) hkc_kernel_key_name(&ks[i].key, ks[i].name, sizeof ks[i].name);
  char *src = hkc_codegen_host_variants(ks, n, 1);
  assert_non_null(src);
  assert_non_null(strstr(src, "#pragma GCC target(\"avx2,fma\")"));
  void *code = NULL;
  size_t size = 0;
  char version[160], path[4096];
  assert_int_equal(hkc_rtc_host_compile(src, &code, &size, version, sizeof version), 0);
  free(src);
  snprintf(path, sizeof path, "%s/variants.so", g_ops.dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(code, 1, size, f), size);
  assert_int_equal(fclose(f), 0);
  free(code);
  void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  unlink(path);
  assert_non_null(dl);
  for (size_t i = 0; i < n; i++) {
    char vname[128];
    snprintf(vname, sizeof vname, "%.96s" HKC_HOST_VARIANT_SUFFIX, ks[i].name);
    if (!dlsym(dl, ks[i].name) || !dlsym(dl, vname)) fail_msg("%s or %s missing from the object", ks[i].name, vname);
  }
  capture_t base = {0}, var = {0};
  g_lookup_dl = dl;
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 41);
  g_capture = &base;
  run_variant_cases("", &rng);
  hk_test_rng_seed(&rng, 41);
  g_capture = &var;
  run_variant_cases(HKC_HOST_VARIANT_SUFFIX, &rng);
  g_capture = NULL;
  g_lookup_dl = NULL;
  assert_true(base.len > 0);
  assert_int_equal(base.len, var.len);
  if (memcmp(base.data, var.data, base.len) != 0) fail_msg("the AVX2 variants' outputs differ from the baseline's");
  free(base.data);
  free(var.data);
  dlclose(dl);
}

/* ---- embedding -------------------------------------------------------------------------------- */
/* ids: random rows, some out of range (clamped to 0 .. vocab-1); with a position table,
 * row t % seq of it is added (f32 sum, one rounding). */
static void test_embedding(void **state) {
  (void)state;
  static const int64_t cases[][4] = {{3, 7, 11, 37}, {1, 1, 1, 5}, {4, 33, 50, 300}}; /* batch, seq, vocab, hidden */
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 9);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
      for (int with_pos = 0; with_pos < 2; with_pos++) {
        const int64_t B = cases[ci][0], S = cases[ci][1], V = cases[ci][2], H = cases[ci][3], T = B * S;
        buf_t table = buf_random(dt, (size_t)(V * H), &rng, -2, 2), pos = buf_random(dt, (size_t)((S + 2) * H), &rng, -2, 2);
        buf_t out = buf_poisoned(dt, (size_t)(T * H));
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)T);
        double *ref = malloc(sizeof(double) * (size_t)(T * H)), *mag = malloc(sizeof(double) * (size_t)(T * H));
        for (int64_t t = 0; t < T; t++) {
          ids[t] = (int32_t)floor(hk_test_uniform(&rng, -2, (double)V + 2)); /* -2 .. V+1 */
          if (t == 0) ids[t] = INT32_MIN;
          if (t == T - 1 && T > 1) ids[t] = INT32_MAX;
          const int64_t id = ids[t] < 0 ? 0 : ids[t] >= V ? V - 1 : ids[t];
          for (int64_t d = 0; d < H; d++) {
            const double p = with_pos ? pos.val[(t % S) * H + d] : 0;
            ref[t * H + d] = table.val[id * H + d] + p;
            mag[t * H + d] = fabs(table.val[id * H + d]) + fabs(p);
          }
        }
        hkc_kernel_key_t key = {.op = HK_OP_EMBEDDING, .dtype = k_dtypes[dt], .has_add = with_pos};
        call_t c = {0};
        arg_tensor(&c, &table);
        arg_ptr(&c, ids);
        arg_tensor(&c, with_pos ? &pos : NULL);
        arg_tensor(&c, &out);
        arg_i64(&c, T), arg_i64(&c, S), arg_i64(&c, V), arg_i64(&c, H);
        run(&key, &c, &out);
        char what[128];
        snprintf(what, sizeof what, "embedding tokens=%lld seq=%lld vocab=%lld hidden=%lld pos=%d", (long long)T,
                 (long long)S, (long long)V, (long long)H, with_pos);
        check(what, &out, ref, mag, 0);
        free(ids), free(ref), free(mag);
        buf_free(&table), buf_free(&pos), buf_free(&out);
      }
}

/* ---- rope -------------------------------------------------------------------------------------- */
typedef struct rope_case {
  int64_t rows, seq, heads, dh, offset;
  float theta;
  int64_t pass; /* heads copied after the rotated ones (a packed q|k|v's v heads) */
} rope_case_t;

/* Reference: the DESIGN/SPEC semantics in double, except inv_freq = 1 / theta^(2j/dh)
 * and the angle, which the op defines in f32 (as Hugging Face computes them): taken
 * here with libm's powf, since an ulp of inv_freq moves an angle of 100 rad by ~1e-5,
 * the whole f32 tolerance. The pass heads must come out bit for bit as they went in. */
static void rope_case(int dt, const rope_case_t *t, hk_test_rng_t *rng) {
  const int64_t width = (t->heads + t->pass) * t->dh, half = t->dh / 2;
  const size_t n = (size_t)(t->rows * width);
  buf_t x = buf_random(dt, n, rng, -2, 2), out = buf_poisoned(dt, n);
  double *ref = malloc(sizeof(double) * n), *mag = malloc(sizeof(double) * n);
  for (int64_t r = 0; r < t->rows; r++)
    for (int64_t i = t->heads * t->dh; i < width; i++) {
      ref[r * width + i] = x.val[r * width + i];
      mag[r * width + i] = 0;
    }
  for (int64_t r = 0; r < t->rows; r++)
    for (int64_t j = 0; j < half; j++) {
      const float inv_freq = 1.0f / powf(t->theta, (float)(2 * j) / (float)t->dh);
      const double angle = (float)((float)(r % t->seq + t->offset) * inv_freq);
      const double c = cos(angle), s = sin(angle);
      for (int64_t h = 0; h < t->heads; h++) {
        const size_t i1 = (size_t)(r * width + h * t->dh + j), i2 = i1 + (size_t)half;
        const double x1 = x.val[i1], x2 = x.val[i2];
        ref[i1] = x1 * c - x2 * s;
        ref[i2] = x2 * c + x1 * s;
        mag[i1] = mag[i2] = fabs(x1) + fabs(x2);
      }
    }
  hkc_kernel_key_t key = {.op = HK_OP_ROPE, .dtype = k_dtypes[dt]};
  call_t c = {0};
  arg_tensor(&c, &x);
  arg_tensor(&c, &out);
  int64_t ints[] = {t->rows, t->seq, t->heads, t->dh, t->offset};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) arg_i64(&c, ints[i]);
  arg_f32(&c, t->theta);
  arg_i64(&c, t->pass);
  run(&key, &c, &out);
  char what[160];
  snprintf(what, sizeof what, "rope rows=%lld seq=%lld heads=%lld dh=%lld offset=%lld theta=%g pass=%lld",
           (long long)t->rows, (long long)t->seq, (long long)t->heads, (long long)t->dh, (long long)t->offset,
           (double)t->theta, (long long)t->pass);
  check(what, &out, ref, mag, 0);
  const size_t es = esize(dt), rot = (size_t)(t->heads * t->dh) * es, row = (size_t)width * es;
  for (int64_t r = 0; r < t->rows; r++)
    if (memcmp((const char *)out.data + (size_t)r * row + rot, (const char *)x.data + (size_t)r * row + rot, row - rot))
      fail_msg("%s [%s]: row %lld: the pass heads are not an exact copy", what, k_dtype_names[dt], (long long)r);
  free(ref);
  free(mag);
  buf_free(&x);
  buf_free(&out);
}

static void test_rope(void **state) {
  (void)state;
  static const rope_case_t cases[] = {
      {2 * 37, 37, 3, 64, 5, 10000.0f, 0},   /* odd seq, two sequences, offset */
      {5, 5, 2, 6, 0, 500000.0f, 0},         /* dh/2 = 3 */
      {3, 1, 1, 2, 1000, 10000.0f, 0},       /* seq 1: every row at the offset; dh 2 */
      {2 * 130, 130, 2, 260, 0, 10000.0f, 0}, /* dh/2 = 130: three frequency chunks */
      {4 * 16, 16, 32, 128, 3, 500000.0f, 0}, /* Llama-3 q heads */
      /* packed q|k|v: heads = q + k heads (rotated), pass = v heads (copied) */
      {2 * 37, 37, 4 + 2, 64, 5, 10000.0f, 2},     /* GQA 4 over 2, odd seq, offset */
      {3 * 5, 5, 8 + 1, 6, 0, 500000.0f, 1},       /* multi-query, dh/2 = 3 */
      {2 * 16, 16, 32 + 8, 128, 3, 500000.0f, 8},  /* Llama-3: 32 q heads over 8 kv heads */
  };
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 8);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) rope_case(dt, &cases[i], &rng);
}

/* ---- generation: rope and embedding positions from ctx, rope scaling -------------------------- */
/* The position of row r with ctx (the op's max(ctx - 1, 0)), in the test's own words. */
static int64_t ctx_position(int32_t ctx) { return ctx >= 1 ? (int64_t)ctx - 1 : 0; }

/* Pair j's inverse frequency after a scaling (sc: factor, low_freq, high_freq, original_max),
 * from Hugging Face's formulas (_compute_linear_scaling_rope_parameters,
 * _compute_llama3_parameters) in double, rounded to f32 as the op computes in f32; the
 * unscaled one with libm's powf as rope_case takes it. */
static float ref_inv_freq(int64_t j, int64_t dh, float theta, int scaling, const float sc[4]) {
  const float inv = 1.0f / powf(theta, (float)(2 * j) / (float)dh);
  if (scaling == HKC_ROPE_SCALING_LINEAR) return (float)((double)inv / sc[0]);
  if (scaling != HKC_ROPE_SCALING_LLAMA3) return inv;
  const double factor = sc[0], low = sc[1], high = sc[2], orig = sc[3], wavelen = 2 * M_PI / inv;
  if (wavelen < orig / high) return inv; /* high frequencies kept */
  if (wavelen > orig / low) return (float)(inv / factor);
  const double smooth = (orig / wavelen - low) / (high - low);
  return (float)((1 - smooth) * inv / factor + smooth * inv);
}

typedef struct rope_gen_case {
  int64_t rows, seq, heads, pass, dh, offset; /* seq, offset: without ctx */
  float theta;
  int has_ctx, scaling;
} rope_gen_case_t;

static void rope_gen_case(int dt, const rope_gen_case_t *t, hk_test_rng_t *rng) {
  static const float sc[4] = {32.0f, 1.0f, 4.0f, 8192.0f}; /* Llama 3.1/3.2's rope_scaling */
  const float *scale = t->scaling == HKC_ROPE_SCALING_LINEAR ? (const float[4]){8.0f, 0, 0, 0} : sc;
  const int64_t width = (t->heads + t->pass) * t->dh, half = t->dh / 2;
  const size_t n = (size_t)(t->rows * width);
  buf_t x = buf_random(dt, n, rng, -2, 2), out = buf_poisoned(dt, n);
  int32_t *ctx = malloc(sizeof(int32_t) * (size_t)t->rows);
  static const int32_t picks[] = {0, 1, 2, 17, 2048, 4096, 8191, 9000, 40000, -7, INT32_MIN, 130000};
  for (int64_t r = 0; r < t->rows; r++) ctx[r] = picks[r % (int64_t)(sizeof picks / sizeof picks[0])];
  double *ref = malloc(sizeof(double) * n), *mag = malloc(sizeof(double) * n);
  for (int64_t r = 0; r < t->rows; r++) {
    const float pos = (float)(t->has_ctx ? ctx_position(ctx[r]) : r % t->seq + t->offset);
    for (int64_t i = t->heads * t->dh; i < width; i++) {
      ref[r * width + i] = x.val[r * width + i];
      mag[r * width + i] = 0;
    }
    for (int64_t j = 0; j < half; j++) {
      const double angle = (float)(pos * ref_inv_freq(j, t->dh, t->theta, t->scaling, scale));
      const double c = cos(angle), sn = sin(angle);
      for (int64_t h = 0; h < t->heads; h++) {
        const size_t i1 = (size_t)(r * width + h * t->dh + j), i2 = i1 + (size_t)half;
        ref[i1] = x.val[i1] * c - x.val[i2] * sn;
        ref[i2] = x.val[i2] * c + x.val[i1] * sn;
        mag[i1] = mag[i2] = fabs(x.val[i1]) + fabs(x.val[i2]);
      }
    }
  }
  hkc_kernel_key_t key = {.op = HK_OP_ROPE, .dtype = k_dtypes[dt], .has_ctx = t->has_ctx, .rope_scaling = t->scaling};
  call_t c = {0};
  arg_tensor(&c, &x);
  arg_tensor(&c, &out);
  const int64_t ints[] = {t->rows, t->has_ctx ? 1 : t->seq, t->heads, t->dh, t->has_ctx ? 0 : t->offset};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) arg_i64(&c, ints[i]);
  arg_f32(&c, t->theta);
  arg_i64(&c, t->pass);
  if (t->has_ctx) arg_ptr(&c, ctx);
  if (t->scaling) {
    const int l3 = t->scaling == HKC_ROPE_SCALING_LLAMA3;
    arg_f32(&c, scale[0]);
    for (int i = 1; i < HKC_ROPE_SCALING_N_ARGS; i++) arg_f32(&c, l3 ? scale[i] : 0); /* linear: zeros */
  }
  assert_int_equal(c.n, HKC_ROPE_N_ARGS + (t->has_ctx ? 1 : 0) + (t->scaling ? HKC_ROPE_SCALING_N_ARGS : 0));
  run(&key, &c, &out);
  char what[160];
  snprintf(what, sizeof what, "rope rows=%lld heads=%lld+%lld dh=%lld theta=%g ctx=%d scaling=%d", (long long)t->rows,
           (long long)t->heads, (long long)t->pass, (long long)t->dh, (double)t->theta, t->has_ctx, t->scaling);
  check(what, &out, ref, mag, 0);
  free(ctx), free(ref), free(mag);
  buf_free(&x), buf_free(&out);
}

static void test_rope_ctx_scaling(void **state) {
  (void)state;
  /* the reference's llama3 frequencies against values worked out by hand from Hugging Face's
   * formulas (theta 500000, head_dim 64, factor 32, low 1, high 4, original 8192): pair 10
   * (wavelength 379) is kept, pair 16 (wavelength 4443) blended with smooth 0.281283, pair 31
   * (wavelength 2.08e6) divided by 32 */
  static const float sc[4] = {32.0f, 1.0f, 4.0f, 8192.0f};
  const int l3 = HKC_ROPE_SCALING_LLAMA3;
  assert_true(fabs(ref_inv_freq(10, 64, 500000.0f, l3, sc) / 0.016560440080994446 - 1) < 1e-6);
  assert_true(fabs(ref_inv_freq(16, 64, 500000.0f, l3, sc) / 0.00042955679655936815 - 1) < 1e-6);
  assert_true(fabs(ref_inv_freq(31, 64, 500000.0f, l3, sc) / 9.418306725434909e-08 - 1) < 1e-6);
  static const rope_gen_case_t cases[] = {
      {24, 0, 2 + 1, 1, 64, 0, 500000.0f, 1, HKC_ROPE_SCALING_LLAMA3}, /* packed GQA, ctx: Llama 3.2 */
      {12, 0, 3, 0, 6, 0, 10000.0f, 1, HKC_ROPE_SCALING_NONE},          /* ctx only, dh/2 = 3 */
      {2 * 37, 37, 2, 0, 128, 5, 500000.0f, 0, HKC_ROPE_SCALING_LLAMA3}, /* scaling with seq and offset */
      {2 * 5, 5, 2, 0, 260, 0, 10000.0f, 0, HKC_ROPE_SCALING_LINEAR},   /* three frequency chunks */
      {13, 0, 4, 2, 16, 0, 10000.0f, 1, HKC_ROPE_SCALING_LINEAR},       /* ctx and linear */
  };
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 10);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) rope_gen_case(dt, &cases[i], &rng);
}

/* embedding with ctx: the position row is clamp(ctx - 1, 0, max_pos - 1), whatever seq is */
static void test_embedding_ctx(void **state) {
  (void)state;
  /* tokens, vocab, hidden, max_pos */
  static const int64_t cases[][4] = {{13, 11, 37, 9}, {1, 3, 5, 1}, {40, 50, 300, 64}};
  static const int32_t picks[] = {0, 1, 2, 9, 10, 64, 65, -3, INT32_MAX, INT32_MIN, 5, 33};
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 11);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
      const int64_t T = cases[ci][0], V = cases[ci][1], H = cases[ci][2], P = cases[ci][3];
      buf_t table = buf_random(dt, (size_t)(V * H), &rng, -2, 2), pos = buf_random(dt, (size_t)(P * H), &rng, -2, 2);
      buf_t out = buf_poisoned(dt, (size_t)(T * H));
      int32_t *ids = malloc(sizeof(int32_t) * (size_t)T), *ctx = malloc(sizeof(int32_t) * (size_t)T);
      double *ref = malloc(sizeof(double) * (size_t)(T * H)), *mag = malloc(sizeof(double) * (size_t)(T * H));
      for (int64_t t = 0; t < T; t++) {
        ids[t] = (int32_t)floor(hk_test_uniform(&rng, 0, (double)V));
        ctx[t] = picks[t % (int64_t)(sizeof picks / sizeof picks[0])];
        const int64_t p = ctx[t] <= 1 ? 0 : (int64_t)ctx[t] - 1 >= P ? P - 1 : (int64_t)ctx[t] - 1;
        for (int64_t d = 0; d < H; d++) {
          ref[t * H + d] = table.val[ids[t] * H + d] + pos.val[p * H + d];
          mag[t * H + d] = fabs(table.val[ids[t] * H + d]) + fabs(pos.val[p * H + d]);
        }
      }
      hkc_kernel_key_t key = {.op = HK_OP_EMBEDDING, .dtype = k_dtypes[dt], .has_add = 1, .has_ctx = 1};
      call_t c = {0};
      arg_tensor(&c, &table);
      arg_ptr(&c, ids);
      arg_tensor(&c, &pos);
      arg_tensor(&c, &out);
      arg_i64(&c, T), arg_i64(&c, 1), arg_i64(&c, V), arg_i64(&c, H); /* seq 1: unused with ctx */
      arg_ptr(&c, ctx);
      arg_i64(&c, P);
      assert_int_equal(c.n, HKC_EMBEDDING_N_ARGS_CTX);
      run(&key, &c, &out);
      char what[128];
      snprintf(what, sizeof what, "embedding ctx tokens=%lld vocab=%lld hidden=%lld max_pos=%lld", (long long)T,
               (long long)V, (long long)H, (long long)P);
      check(what, &out, ref, mag, 0);
      free(ids), free(ctx), free(ref), free(mag);
      buf_free(&table), buf_free(&pos), buf_free(&out);
    }
}

/* ---- generation: the KV-cache ops ---------------------------------------------------------------- */
typedef struct kv_case {
  int64_t heads, kv_heads, dh, layers, slots, max_seq, layer, window;
  float scale; /* 0: 1/sqrt(dh) */
  int n_rows;
  int32_t ctx[12], slot[12]; /* per row; invalid ones: ctx 0 or > max_seq, slot < 0 or >= slots */
} kv_case_t;

static int kv_row_valid(const kv_case_t *t, int r) {
  return t->ctx[r] >= 1 && t->ctx[r] <= t->max_seq && t->slot[r] >= 0 && t->slot[r] < t->slots;
}

static size_t kv_cache_elems(const kv_case_t *t) {
  return (size_t)(t->layers * t->slots * t->max_seq * t->kv_heads * t->dh);
}

/* The offset of cache row (layer, slot, position), in elements. */
static size_t kv_at(const kv_case_t *t, int64_t slot, int64_t pos) {
  return (size_t)(((t->layer * t->slots + slot) * t->max_seq + pos) * t->kv_heads * t->dh);
}

/* kv_append: the q heads out (every row), the k and v heads into the caches at (layer, slot,
 * ctx - 1) for valid rows; every other cache element (other rows, other layers, the guard)
 * keeps its bits. */
static void kv_append_case(int dt, const kv_case_t *t, hk_test_rng_t *rng) {
  const int64_t R = t->n_rows, q_cols = t->heads * t->dh, kv_cols = t->kv_heads * t->dh;
  const int64_t width = q_cols + 2 * kv_cols;
  const size_t es = esize(dt), n_cache = kv_cache_elems(t);
  buf_t qkv = buf_random(dt, (size_t)(R * width), rng, -2, 2), out = buf_poisoned(dt, (size_t)(R * q_cols));
  buf_t kc = buf_random(dt, n_cache, rng, -1, 1), vc = buf_random(dt, n_cache, rng, -1, 1);
  char *want_k = malloc((n_cache + GUARD) * es), *want_v = malloc((n_cache + GUARD) * es);
  memcpy(want_k, kc.data, (n_cache + GUARD) * es);
  memcpy(want_v, vc.data, (n_cache + GUARD) * es);
  for (int r = 0; r < R; r++) {
    if (!kv_row_valid(t, r)) continue;
    const size_t at = kv_at(t, t->slot[r], t->ctx[r] - 1) * es, row = (size_t)(r * width) * es;
    memcpy(want_k + at, (const char *)qkv.data + row + (size_t)q_cols * es, (size_t)kv_cols * es);
    memcpy(want_v + at, (const char *)qkv.data + row + (size_t)(q_cols + kv_cols) * es, (size_t)kv_cols * es);
  }
  hkc_kernel_key_t key = {.op = HK_OP_KV_APPEND, .dtype = k_dtypes[dt]};
  call_t c = {0};
  arg_tensor(&c, &qkv), arg_tensor(&c, &kc), arg_tensor(&c, &vc);
  arg_ptr(&c, (void *)t->ctx), arg_ptr(&c, (void *)t->slot);
  arg_tensor(&c, &out);
  const int64_t ints[] = {R, t->heads, t->kv_heads, t->dh, t->layer, t->slots, t->max_seq};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) arg_i64(&c, ints[i]);
  assert_int_equal(c.n, HKC_KV_APPEND_N_ARGS);
  run(&key, &c, &out);
  for (int r = 0; r < R; r++)
    if (memcmp((const char *)out.data + (size_t)(r * q_cols) * es, (const char *)qkv.data + (size_t)(r * width) * es,
               (size_t)q_cols * es))
      fail_msg("kv_append [%s]: row %d: the q heads are not an exact copy", k_dtype_names[dt], r);
  for (size_t i = 0; i < (n_cache + GUARD) * es; i++)
    if (((const char *)kc.data)[i] != want_k[i] || ((const char *)vc.data)[i] != want_v[i])
      fail_msg("kv_append [%s] heads=%lld/%lld dh=%lld: cache byte %zu differs from the expected write",
               k_dtype_names[dt], (long long)t->heads, (long long)t->kv_heads, (long long)t->dh, i);
  free(want_k), free(want_v);
  buf_free(&qkv), buf_free(&out), buf_free(&kc), buf_free(&vc);
}

/* kv_attention against a double-precision reference over the caches as given; invalid rows
 * must be exact zeros. */
static void kv_attention_case(int dt, const kv_case_t *t, hk_test_rng_t *rng) {
  const int64_t R = t->n_rows, H = t->heads, dh = t->dh, kv_cols = t->kv_heads * dh, group = H / t->kv_heads;
  const float scale = t->scale != 0 ? t->scale : (float)(1 / sqrt((double)dh));
  const size_t n_cache = kv_cache_elems(t), n_out = (size_t)(R * H * dh);
  buf_t q = buf_random(dt, n_out, rng, -1, 1), out = buf_poisoned(dt, n_out);
  buf_t kc = buf_random(dt, n_cache, rng, -1, 1), vc = buf_random(dt, n_cache, rng, -1, 1);
  double *ref = calloc(n_out, sizeof(double)), *mag = calloc(n_out, sizeof(double));
  double *p = malloc(sizeof(double) * (size_t)t->max_seq);
  for (int r = 0; r < R; r++) {
    if (!kv_row_valid(t, r)) continue; /* zeros */
    const int64_t n = t->ctx[r], first = t->window > 0 && n > t->window ? n - t->window : 0;
    for (int64_t h = 0; h < H; h++) {
      const double *qr = q.val + (r * H + h) * dh;
      const size_t base = kv_at(t, t->slot[r], 0) + (size_t)(h / group * dh);
      double mx = -INFINITY, sum = 0;
      for (int64_t j = first; j < n; j++) {
        double dot = 0;
        for (int64_t d = 0; d < dh; d++) dot += qr[d] * kc.val[base + (size_t)(j * kv_cols + d)];
        mx = fmax(mx, p[j] = dot * scale);
      }
      for (int64_t j = first; j < n; j++) sum += (p[j] = exp(p[j] - mx));
      for (int64_t d = 0; d < dh; d++) {
        double o = 0, m = 0;
        for (int64_t j = first; j < n; j++) {
          const double v = vc.val[base + (size_t)(j * kv_cols + d)];
          o += p[j] * v;
          m += p[j] * fabs(v);
        }
        ref[(r * H + h) * dh + d] = o / sum;
        mag[(r * H + h) * dh + d] = m / sum;
      }
    }
  }
  hkc_kernel_key_t key = {.op = HK_OP_KV_ATTENTION, .dtype = k_dtypes[dt]};
  call_t c = {0};
  arg_tensor(&c, &q), arg_tensor(&c, &kc), arg_tensor(&c, &vc);
  arg_ptr(&c, (void *)t->ctx), arg_ptr(&c, (void *)t->slot);
  arg_tensor(&c, &out);
  const int64_t ints[] = {R, H, t->kv_heads, dh, t->layer, t->slots, t->max_seq, t->window};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) arg_i64(&c, ints[i]);
  arg_f32(&c, scale);
  assert_int_equal(c.n, HKC_KV_ATTENTION_N_ARGS);
  run(&key, &c, &out);
  char what[160];
  snprintf(what, sizeof what, "kv_attention heads=%lld/%lld dh=%lld max_seq=%lld window=%lld rows=%lld", (long long)H,
           (long long)t->kv_heads, (long long)dh, (long long)t->max_seq, (long long)t->window, (long long)R);
  check(what, &out, ref, mag, 1e-2);
  for (int r = 0; r < R; r++)
    for (int64_t i = 0; !kv_row_valid(t, r) && i < H * dh; i++)
      if (buf_get(&out, (size_t)(r * H * dh + i)) != 0.0)
        fail_msg("%s [%s]: invalid row %d (ctx %d, slot %d) is not zeros", what, k_dtype_names[dt], r, t->ctx[r],
                 t->slot[r]);
  free(ref), free(mag), free(p);
  buf_free(&q), buf_free(&out), buf_free(&kc), buf_free(&vc);
}

static const kv_case_t k_kv_cases[] = {
    /* GQA 4/2, two layers (the second written/read), keys in two chunks of 64: a cache filled to
     * max_seq (ctx 77 in slot 2), a first token, padding (ctx 0), ctx past max_seq, slots out of range */
    {4, 2, 16, 2, 3, 77, 1, 0, 0, 9, {1, 5, 77, 0, 78, 30, 40, 12, 60}, {0, 1, 2, 1, 0, -1, 3, 2, 0}},
    /* a sliding window of 10 keys around its edge, explicit scale */
    {2, 1, 8, 1, 2, 100, 0, 10, 0.3f, 8, {1, 9, 10, 11, 100, 50, INT32_MAX, -5}, {0, 1, 0, 1, 1, 0, 0, 1}},
    /* dh 300: the output columns in two chunks; INT32_MIN slot */
    {2, 2, 300, 1, 2, 5, 0, 0, 0, 3, {5, 3, 2}, {1, 0, INT32_MIN}},
    /* multi-query 8/1 with a window wider than a chunk */
    {8, 1, 64, 3, 2, 130, 2, 70, 0, 5, {130, 70, 71, 2, 129}, {1, 0, 1, 0, 0}},
};

static void test_kv_append(void **state) {
  (void)state;
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 12);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t i = 0; i < sizeof k_kv_cases / sizeof k_kv_cases[0]; i++) kv_append_case(dt, &k_kv_cases[i], &rng);
}

static void test_kv_attention(void **state) {
  (void)state;
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 13);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t i = 0; i < sizeof k_kv_cases / sizeof k_kv_cases[0]; i++) kv_attention_case(dt, &k_kv_cases[i], &rng);
}

/* take_rows: exact copies of the rows taken, zeros for indices outside 0 .. x_rows-1 */
static void test_take_rows(void **state) {
  (void)state;
  static const int32_t picks[] = {3, 0, -1, 6, 7, INT32_MIN, 2, 2, INT32_MAX};
  static const int64_t cases[][2] = {{7, 37}, {1, 1}, {7, 300}}; /* x_rows, width */
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 14);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
      const int64_t N = cases[ci][0], W = cases[ci][1], R = sizeof picks / sizeof picks[0];
      buf_t x = buf_random(dt, (size_t)(N * W), &rng, -2, 2), out = buf_poisoned(dt, (size_t)(R * W));
      double *ref = malloc(sizeof(double) * (size_t)(R * W));
      for (int64_t r = 0; r < R; r++)
        for (int64_t d = 0; d < W; d++) ref[r * W + d] = picks[r] >= 0 && picks[r] < N ? x.val[picks[r] * W + d] : 0;
      hkc_kernel_key_t key = {.op = HK_OP_TAKE_ROWS, .dtype = k_dtypes[dt]};
      call_t c = {0};
      arg_tensor(&c, &x);
      arg_ptr(&c, (void *)picks);
      arg_tensor(&c, &out);
      arg_i64(&c, N), arg_i64(&c, R), arg_i64(&c, W);
      assert_int_equal(c.n, HKC_TAKE_ROWS_N_ARGS);
      run(&key, &c, &out);
      for (int64_t i = 0; i < R * W; i++)
        if (buf_get(&out, (size_t)i) != ref[i]) /* copies: exact */
          fail_msg("take_rows [%s] x_rows=%lld width=%lld: element %lld = %g, expected %g", k_dtype_names[dt],
                   (long long)N, (long long)W, (long long)i, buf_get(&out, (size_t)i), ref[i]);
      size_t worst;
      assert_true(max_error(&out, ref, NULL, 1, &worst) == 0); /* the guard */
      free(ref);
      buf_free(&x), buf_free(&out);
    }
}

/* argmax: the first index of each row's largest value; ties, NaN (never wins), an all-NaN row
 * (0), infinities; the i32 output poisoned first. */
static void test_argmax(void **state) {
  (void)state;
  static const int64_t cases[][2] = {{9, 37}, {3, 1}, {6, 1000}}; /* rows, cols */
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 15);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
      const int64_t R = cases[ci][0], C = cases[ci][1];
      buf_t x = buf_random(dt, (size_t)(R * C), &rng, -4, 4);
      for (int64_t r = 0; r < R; r++) { /* row r % 5: 0 plain, 1 a tie, 2 NaN first, 3 all NaN, 4 infinities */
        const size_t row = (size_t)(r * C);
        if (r % 5 == 1 && C > 2) buf_set(&x, row + (size_t)C / 3, 9), buf_set(&x, row + (size_t)C - 1, 9);
        if (r % 5 == 2) buf_set(&x, row, NAN);
        if (r % 5 == 3)
          for (int64_t i = 0; i < C; i++) buf_set(&x, row + (size_t)i, NAN);
        if (r % 5 == 4) buf_set(&x, row, -INFINITY), buf_set(&x, row + (size_t)C / 2, INFINITY);
      }
      int32_t *out = malloc(sizeof(int32_t) * (size_t)(R + GUARD));
      for (int64_t i = 0; i < R + GUARD; i++) out[i] = INT32_MIN;
      hkc_kernel_key_t key = {.op = HK_OP_ARGMAX, .dtype = k_dtypes[dt]};
      call_t c = {0};
      arg_tensor(&c, &x);
      arg_ptr(&c, out);
      arg_i64(&c, R), arg_i64(&c, C);
      assert_int_equal(c.n, HKC_ARGMAX_N_ARGS);
      run(&key, &c, NULL);
      for (int64_t r = 0; r < R; r++) {
        int64_t want = -1;
        for (int64_t i = 0; i < C; i++) {
          const double v = x.val[r * C + i];
          if (!isnan(v) && (want < 0 || v > x.val[r * C + want])) want = i;
        }
        if (out[r] != (want < 0 ? 0 : want))
          fail_msg("argmax [%s] rows=%lld cols=%lld: row %lld gave %d, expected %lld", k_dtype_names[dt], (long long)R,
                   (long long)C, (long long)r, out[r], (long long)(want < 0 ? 0 : want));
      }
      for (int64_t i = R; i < R + GUARD; i++)
        if (out[i] != INT32_MIN) fail_msg("argmax wrote past the end of its output");
      free(out);
      buf_free(&x);
    }
}

/* ---- sample ----------------------------------------------------------------------------------
 * The draw's definition is in lower.h; the expectations below are computed here from the
 * stored logits (sorting, double-precision softmax), never from the kernel's radix passes. */

/* One row's params: seed, top_k, then the temperature and top_p as f32 bits. */
static void sample_params(int32_t *p, int32_t seed, int32_t top_k, float temperature, float top_p) {
  p[HK_SAMPLE_SEED] = seed;
  p[HK_SAMPLE_TOP_K] = top_k;
  memcpy(&p[HK_SAMPLE_TEMPERATURE], &temperature, sizeof temperature);
  memcpy(&p[HK_SAMPLE_TOP_P], &top_p, sizeof top_p);
}

/* Runs the sample kernel of x's dtype over x [R, C] with params [R, 4] into out [R] (poisoned
 * first, and a guard after it); every index must be in 0 .. C-1. */
static void sample_call(const buf_t *x, const int32_t *params, int64_t R, int64_t C, int32_t *out) {
  for (int64_t i = 0; i < R + GUARD; i++) out[i] = INT32_MIN;
  hkc_kernel_key_t key = {.op = HK_OP_SAMPLE, .dtype = k_dtypes[x->dt]};
  call_t c = {0};
  arg_tensor(&c, x);
  arg_ptr(&c, (void *)params);
  arg_ptr(&c, out);
  arg_i64(&c, R), arg_i64(&c, C);
  assert_int_equal(c.n, HKC_SAMPLE_N_ARGS);
  run(&key, &c, NULL);
  for (int64_t r = 0; r < R; r++)
    if (out[r] < 0 || out[r] >= C)
      fail_msg("sample [%s] rows=%lld cols=%lld: row %lld gave %d", k_dtype_names[x->dt], (long long)R, (long long)C,
               (long long)r, out[r]);
  for (int64_t i = R; i < R + GUARD; i++)
    if (out[i] != INT32_MIN) fail_msg("sample wrote past the end of its output");
}

/* z = x / T as the definition rounds it (f32) */
static float sample_z(double x, float t) { return (float)x / t; }

static int cmp_float_desc(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return (x < y) - (x > y);
}

/* The candidates S of one row of n logits (doubles as stored), by sorting: S_k = the numbers
 * >= the k-th largest z (ties in; all of them for k <= 0 or k >= their count), then, for
 * 0 < p < 1, the largest z of S_k from which down the softmax mass (in double) reaches p of
 * S_k's, ties in. NaN is never a candidate. Marks in_s[j]; returns |S|. */
static int64_t sample_ref_set(const double *x, int64_t n, int32_t top_k, float t, float p, int *in_s) {
  float *z = malloc(sizeof(float) * (size_t)n);
  int64_t count = 0;
  float m = -INFINITY;
  for (int64_t j = 0; j < n; j++) {
    const float v = sample_z(x[j], t);
    if (v == v) z[count++] = v, m = fmaxf(m, v);
  }
  qsort(z, (size_t)count, sizeof *z, cmp_float_desc);
  float lo = count ? z[count - 1] : 0;
  if (top_k > 0 && top_k < count) lo = z[top_k - 1];
  if (p > 0 && p < 1) {
    double total = 0, run = 0;
    for (int64_t i = 0; i < count && z[i] >= lo; i++) total += exp((double)z[i] - m);
    for (int64_t i = 0; i < count && z[i] >= lo; i++) {
      run += exp((double)z[i] - m);
      if (run >= p * total && (i + 1 == count || z[i + 1] != z[i])) { /* the whole tie group */
        lo = z[i];
        break;
      }
    }
  }
  int64_t size = 0;
  for (int64_t j = 0; j < n; j++) {
    const float v = sample_z(x[j], t);
    in_s[j] = v == v && v >= lo;
    size += in_s[j];
  }
  free(z);
  return size;
}

/* The greedy rows: a temperature that is not a finite positive number, or top_k 1, give
 * argmax's index (the first of the largest; NaN never wins; 0 without a number), whatever
 * the other params say. Rows as test_argmax's: ties, NaN first, all NaN, infinities. */
static void test_sample_greedy(void **state) {
  (void)state;
  static const int64_t cols[] = {1, 7, 1000};
  const float temps[] = {0.0f, -1.0f, NAN, INFINITY, -INFINITY, 1.0f, 0.7f};
  enum { R = 14 };
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 31);
  int32_t params[R * 4], *out = malloc(sizeof(int32_t) * (R + GUARD));
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
      const int64_t C = cols[ci];
      buf_t x = buf_random(dt, (size_t)(R * C), &rng, -4, 4);
      for (int64_t r = 0; r < R; r++) {
        const size_t row = (size_t)(r * C);
        if (r % 5 == 1 && C > 2) buf_set(&x, row + (size_t)C / 3, 9), buf_set(&x, row + (size_t)C - 1, 9);
        if (r % 5 == 2) buf_set(&x, row, NAN);
        if (r % 5 == 3)
          for (int64_t i = 0; i < C; i++) buf_set(&x, row + (size_t)i, NAN);
        if (r % 5 == 4) buf_set(&x, row, -INFINITY), buf_set(&x, row + (size_t)C / 2, INFINITY);
        /* rows 0..4: each greedy temperature, top_k other than 1; rows 5..13: top_k 1 at every
         * temperature (rows 5, 6, 12, 13 sampling ones), top_p 0.5 or 1 */
        const float t = temps[r % 7];
        const int32_t k = r >= 5 ? 1 : (int32_t)(r * 7) - 3;
        sample_params(&params[r * 4], (int32_t)(r * 7919 + 1), k, t, r % 2 ? 0.5f : 1.0f);
      }
      sample_call(&x, params, R, C, out);
      for (int64_t r = 0; r < R; r++) {
        int64_t want = -1;
        for (int64_t i = 0; i < C; i++) {
          const double v = x.val[r * C + i];
          if (!isnan(v) && (want < 0 || v > x.val[r * C + want])) want = i;
        }
        if (out[r] != (want < 0 ? 0 : want))
          fail_msg("sample greedy [%s] cols=%lld: row %lld gave %d, expected argmax %lld", k_dtype_names[dt],
                   (long long)C, (long long)r, out[r], (long long)(want < 0 ? 0 : want));
      }
      buf_free(&x);
    }
  free(out);
}

/* Draws `seeds` times (one row each, seeds 1000 + i) from one row of logits with the given
 * params; counts[j] gets how often j came. Fails on an index outside the reference's S. */
static void sample_draws(int dt, const double *row, int64_t C, int32_t top_k, float t, float p, int seeds,
                         int64_t *counts, const char *what) {
  buf_t x = buf_new(dt, (size_t)(seeds * C));
  for (int s = 0; s < seeds; s++)
    for (int64_t j = 0; j < C; j++) buf_set(&x, (size_t)(s * C + j), row[j]);
  int32_t *params = malloc(sizeof(int32_t) * 4 * (size_t)seeds);
  int32_t *out = malloc(sizeof(int32_t) * (size_t)(seeds + GUARD));
  int *in_s = malloc(sizeof(int) * (size_t)C);
  for (int s = 0; s < seeds; s++) sample_params(&params[s * 4], 1000 + s, top_k, t, p);
  sample_call(&x, params, seeds, C, out);
  sample_ref_set(x.val, C, top_k, t, p, in_s);
  memset(counts, 0, sizeof(int64_t) * (size_t)C);
  for (int s = 0; s < seeds; s++) {
    if (!in_s[out[s]])
      fail_msg("sample %s [%s]: seed %d drew %d (logit %g), outside the candidates", what, k_dtype_names[dt],
               1000 + s, out[s], x.val[out[s]]);
    counts[out[s]]++;
  }
  /* the same seed on the same logits draws the same index, whatever the row */
  for (int s = 0; s < seeds; s++) params[s * 4] = 1000 + seeds - 1 - s;
  int32_t *again = malloc(sizeof(int32_t) * (size_t)(seeds + GUARD));
  sample_call(&x, params, seeds, C, again);
  for (int s = 0; s < seeds; s++)
    if (again[s] != out[seeds - 1 - s])
      fail_msg("sample %s [%s]: seed %d drew %d in row %d but %d in row %d", what, k_dtype_names[dt], 1000 + s,
               out[s], s, again[seeds - 1 - s], seeds - 1 - s);
  free(again), free(in_s), free(params), free(out);
  buf_free(&x);
}

/* Every candidate of S but -inf (chance 0) must come in the draws (the cases keep each one's
 * chance high). Returns |S|. */
static int64_t expect_all_drawn(const double *row, int64_t C, int32_t top_k, float t, float p, const int64_t *counts,
                                int dt, const char *what) {
  int *in_s = malloc(sizeof(int) * (size_t)C);
  buf_t x = buf_new(dt, (size_t)C);
  for (int64_t j = 0; j < C; j++) buf_set(&x, (size_t)j, row[j]);
  const int64_t size = sample_ref_set(x.val, C, top_k, t, p, in_s);
  for (int64_t j = 0; j < C; j++)
    if (in_s[j] && counts[j] == 0 && x.val[j] != -INFINITY)
      fail_msg("sample %s [%s]: candidate %lld (logit %g, one of %lld) never drawn", what, k_dtype_names[dt],
               (long long)j, x.val[j], (long long)size);
  free(in_s);
  buf_free(&x);
  return size;
}

/* top_k: only the k largest logits come, and each of them does; a tie at the k-th value lets
 * both in; k <= 0 or >= n: every logit. */
static void test_sample_top_k(void **state) {
  (void)state;
  enum { C = 37, SEEDS = 400 };
  static const int32_t ks[] = {5, 5, 0, -2, 1000, 36};
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 32);
  double row[C];
  int64_t counts[C];
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
      /* narrow logits: every candidate has a fair chance (>= 1/3 of the mean) */
      for (int64_t j = 0; j < C; j++) row[j] = hk_test_uniform(&rng, 0.5, 1.0);
      if (i == 1) { /* the 5th and 6th largest equal */
        int64_t order[C];
        for (int64_t j = 0; j < C; j++) order[j] = j;
        for (int64_t a = 0; a < 6; a++) /* partial selection sort, descending */
          for (int64_t b = a + 1; b < C; b++)
            if (row[order[b]] > row[order[a]]) {
              const int64_t s = order[a];
              order[a] = order[b], order[b] = s;
            }
        row[order[5]] = row[order[4]];
      }
      char what[64];
      snprintf(what, sizeof what, "top_k=%d%s", ks[i], i == 1 ? " (tie at the k-th)" : "");
      const float t = i % 2 ? 0.8f : 1.0f;
      sample_draws(dt, row, C, ks[i], t, 1.0f, SEEDS, counts, what);
      const int64_t size = expect_all_drawn(row, C, ks[i], t, 1.0f, counts, dt, what);
      /* S holds the k largest, more only where 16-bit rounding or the tie above makes ties */
      const int64_t k = ks[i] <= 0 || ks[i] >= C ? C : ks[i] + (i == 1);
      if (size < k || (dt == 0 && size != k))
        fail_msg("sample %s [%s]: the reference keeps %lld, expected %lld", what, k_dtype_names[dt], (long long)size,
                 (long long)k);
    }
}

/* top_p: softmax masses 0.5, 0.3, 0.15, 0.04 and five of 0.002 (scrambled; T = 2 on twice the
 * log-masses): p = 0.45 keeps the top one, 0.75 two, 0.9 three, 0.97 four; with top_k 3, p =
 * 0.6 of the top three's 0.95 keeps two; p = 1, NaN or <= 0: no nucleus. */
static void test_sample_top_p(void **state) {
  (void)state;
  enum { C = 9, SEEDS = 400 };
  static const double mass[C] = {0.15, 0.002, 0.002, 0.5, 0.002, 0.04, 0.002, 0.3, 0.002};
  static const struct {
    int32_t k;
    float p;
    int size; /* |S| */
  } cases[] = {{0, 0.45f, 1}, {0, 0.75f, 2}, {0, 0.9f, 3}, {0, 0.97f, 4}, {3, 0.6f, 2},
               {0, 1.0f, 9}, {0, NAN, 9},    {0, 0.0f, 9}, {0, -0.5f, 9}, {4, 2.0f, 4}};
  double row[C];
  int64_t counts[C];
  for (int64_t j = 0; j < C; j++) row[j] = 2.0 * log(mass[j]);
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      char what[64];
      snprintf(what, sizeof what, "top_p=%g top_k=%d", (double)cases[i].p, cases[i].k);
      int in_s[C];
      buf_t x = buf_new(dt, C);
      for (int64_t j = 0; j < C; j++) buf_set(&x, (size_t)j, row[j]);
      const int64_t size = sample_ref_set(x.val, C, cases[i].k, 2.0f, cases[i].p, in_s);
      buf_free(&x);
      if (size != cases[i].size) fail_msg("sample %s: the reference keeps %lld, not %d", what, (long long)size,
                                          cases[i].size);
      sample_draws(dt, row, C, cases[i].k, 2.0f, cases[i].p, cases[i].size > 4 ? SEEDS * 2 : SEEDS, counts, what);
      if (cases[i].size <= 4) expect_all_drawn(row, C, cases[i].k, 2.0f, cases[i].p, counts, dt, what);
      for (int64_t j = 0; j < C; j++) /* no nucleus: the masses of 0.04 and more all come, not only the top */
        if (cases[i].size == C && mass[j] >= 0.04 && counts[j] == 0)
          fail_msg("sample %s [%s]: index %lld (mass %g) never drawn", what, k_dtype_names[dt], (long long)j, mass[j]);
    }
}

/* The draw's distribution: over 4000 seeds each index comes about N softmax(z)_j times (S's
 * softmax: all of the row, then the top 3), within 5 standard deviations and one draw. */
static void test_sample_distribution(void **state) {
  (void)state;
  enum { C = 5, SEEDS = 4000 };
  static const double row[C] = {1.2, 0.4, -0.3, -1.1, 2.0};
  static const struct {
    int32_t k;
    float t;
  } cases[] = {{0, 1.0f}, {0, 0.5f}, {3, 1.0f}};
  int64_t counts[C];
  for (int dt = 0; dt < N_DTYPES; dt++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      char what[64];
      snprintf(what, sizeof what, "distribution T=%g top_k=%d", (double)cases[i].t, cases[i].k);
      sample_draws(dt, row, C, cases[i].k, cases[i].t, 1.0f, SEEDS, counts, what);
      buf_t x = buf_new(dt, C);
      for (int64_t j = 0; j < C; j++) buf_set(&x, (size_t)j, row[j]);
      int in_s[C];
      sample_ref_set(x.val, C, cases[i].k, cases[i].t, 1.0f, in_s);
      double sum = 0, prob[C];
      for (int64_t j = 0; j < C; j++) sum += (prob[j] = in_s[j] ? exp((double)sample_z(x.val[j], cases[i].t)) : 0);
      int64_t distinct = 0;
      for (int64_t j = 0; j < C; j++) {
        const double want = SEEDS * prob[j] / sum, sd = sqrt(want * (1 - prob[j] / sum));
        if (fabs((double)counts[j] - want) > 5 * sd + 1)
          fail_msg("sample %s [%s]: index %lld drawn %lld times in %d, expected %.1f +- %.1f", what,
                   k_dtype_names[dt], (long long)j, (long long)counts[j], SEEDS, want, sd);
        distinct += counts[j] > 0;
      }
      if (distinct < 2) fail_msg("sample %s: different seeds never draw different indices", what);
      buf_free(&x);
    }
}

/* NaN logits are never drawn (nor counted in top_k: k between the numbers' count and n keeps
 * every number); -inf never beats a number; a row of -inf draws its first; +inf always wins;
 * a row without a number gives 0; a single column gives 0. */
static void test_sample_nan_inf(void **state) {
  (void)state;
  enum { C = 50, SEEDS = 800 };
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 33);
  double row[C];
  int64_t counts[C];
  for (int dt = 0; dt < N_DTYPES; dt++) {
    for (int64_t j = 0; j < C; j++) row[j] = j % 5 == 1 ? NAN : j == 7 ? -INFINITY : hk_test_uniform(&rng, -0.3, 0.3);
    static const struct {
      int32_t k;
      float p;
    } cases[] = {{0, 1.0f}, {3, 1.0f}, {45, 1.0f}, {0, 0.8f}, {45, 0.5f}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      char what[64];
      snprintf(what, sizeof what, "with NaN top_k=%d top_p=%g", cases[i].k, (double)cases[i].p);
      sample_draws(dt, row, C, cases[i].k, 1.0f, cases[i].p, SEEDS, counts, what);
      for (int64_t j = 0; j < C; j++)
        if (counts[j] && (isnan(row[j]) || isinf(row[j]))) fail_msg("sample %s: drew %lld", what, (long long)j);
      if (cases[i].k == 45 && cases[i].p == 1.0f) expect_all_drawn(row, C, 45, 1.0f, 1.0f, counts, dt, what);
    }
    /* rows: [NaN, -inf, -inf, NaN] -> 1; [1, +inf, 2, +inf] -> 1; all NaN -> 0; [x] -> 0 */
    static const double special[3][4] = {
        {NAN, -INFINITY, -INFINITY, NAN}, {1, INFINITY, 2, INFINITY}, {NAN, NAN, NAN, NAN}};
    buf_t x = buf_new(dt, 12);
    int32_t params[3 * 4], out[3 + GUARD];
    for (int r = 0; r < 3; r++) {
      for (int j = 0; j < 4; j++) buf_set(&x, (size_t)(r * 4 + j), special[r][j]);
      sample_params(&params[r * 4], r + 5, r == 1 ? 2 : 0, 1.0f, 0.9f);
    }
    for (int seed = 0; seed < 20; seed++) {
      for (int r = 0; r < 3; r++) params[r * 4] = seed * 3 + r;
      sample_call(&x, params, 3, 4, out);
      if (out[0] != 1 || out[1] != 1 || out[2] != 0)
        fail_msg("sample [%s] seed %d: -inf row %d, +inf row %d, NaN row %d (expected 1, 1, 0)", k_dtype_names[dt],
                 seed, out[0], out[1], out[2]);
      sample_call(&x, params, 3, 1, out); /* one column: 0 whatever it holds */
      if (out[0] != 0 || out[1] != 0 || out[2] != 0)
        fail_msg("sample [%s]: a single column did not give 0", k_dtype_names[dt]);
    }
    buf_free(&x);
  }
}

/* The checker must fail a wrong result: gelu output against a relu reference. */
static void test_checker_catches_errors(void **state) {
  (void)state;
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 7);
  for (int dt = 0; dt < N_DTYPES; dt++) {
    buf_t x = buf_random(dt, 64, &rng, -3, 3), out = buf_poisoned(dt, 64);
    double ref[64], mag[64];
    for (int i = 0; i < 64; i++) {
      ref[i] = hk_test_act_ref(HK_ACT_RELU, x.val[i]);
      mag[i] = fabs(x.val[i]);
    }
    size_t worst;
    assert_true(isinf(max_error(&out, ref, mag, 0, &worst))); /* poisoned = unwritten */
    hkc_kernel_key_t key = {.op = HK_OP_GELU, .dtype = k_dtypes[dt]};
    call_t c = {0};
    arg_tensor(&c, &x);
    arg_tensor(&c, &out);
    arg_i64(&c, 64);
    run(&key, &c, &out);
    assert_true(max_error(&out, ref, mag, 0, &worst) > 1.0);
    buf_free(&x);
    buf_free(&out);
  }
}

/* ---- the prelude's conversions against test_util's independent ones --------------------- */
typedef void (*to16_fn_t)(const float *, uint16_t *, size_t);
typedef void (*from16_fn_t)(const uint16_t *, float *, size_t);


static int same_float(float a, float b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return memcmp(&a, &b, sizeof a) == 0;
}

/* prelude.h's hk_exp and hk_erf1p against double precision: every 1/64 of the range plus random
 * points, the ends of the ranges and the special values; the bounds are the ones prelude.h
 * documents. */
typedef void (*math_fn_t)(const float *, float *, size_t);
static void test_math(void **state) {
  (void)state;
  math_fn_t f_exp, f_erf1p;
  void *p = sym("hkt_exp"), *q = sym("hkt_erf1p");
  memcpy(&f_exp, &p, sizeof p);
  memcpy(&f_erf1p, &q, sizeof q);
  enum { N = 40000 };
  static float x[N], y[N];
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, 31);
  /* exp: within 2 ulp on [-86.5, 88.72] */
  size_t n = 0;
  for (int i = -86 * 64; i <= 88 * 64 && n < N / 2; i++) x[n++] = (float)i / 64.0f;
  while (n < N) x[n++] = (float)hk_test_uniform(&rng, -86.5, 88.7);
  f_exp(x, y, N);
  double worst = 0;
  for (size_t i = 0; i < N; i++) {
    const double ref = exp((double)x[i]), err = fabs((double)y[i] - ref) / ref;
    if (err > worst) worst = err;
    if (err > 2.4e-7) fail_msg("hk_exp(%.9g) = %.9g, exp = %.9g: relative error %.3g", x[i], y[i], ref, err);
  }
  fprintf(stderr, "[ math ] hk_exp: worst relative error %.3g (%.2f ulp)\n", worst, worst / 0x1p-24);
  const float special[] = {-86.5f, 88.72f, -86.6f, -200.0f, -INFINITY, 88.73f, 1000.0f, INFINITY, NAN, 0.0f};
  float ys[sizeof special / sizeof special[0]];
  f_exp(special, ys, sizeof special / sizeof special[0]);
  assert_true(fabs(ys[0] / exp(-86.5) - 1) < 2.4e-7);
  assert_true(fabs(ys[1] / exp((double)88.72f) - 1) < 2.4e-7 && isfinite(ys[1]));
  for (int i = 2; i < 5; i++) assert_true(ys[i] == 0.0f);
  for (int i = 5; i < 8; i++) assert_true(isinf(ys[i]) && ys[i] > 0);
  assert_true(isnan(ys[8]));
  assert_true(ys[9] == 1.0f);
  /* 1 + erf: 7e-7 to |x| = 4, 4e-6 beyond */
  n = 0;
  for (int i = -9 * 256; i <= 9 * 256 && n < N / 2; i++) x[n++] = (float)i / 256.0f;
  while (n < N) x[n++] = (float)hk_test_uniform(&rng, -9, 9);
  f_erf1p(x, y, N);
  worst = 0;
  for (size_t i = 0; i < N; i++) {
    const double a = fabs((double)x[i]), ref = x[i] < 0 ? erfc(a) : 1 + erf(a);
    const double err = fabs((double)y[i] - ref) / ref, bound = a <= 4 ? 7e-7 : 4e-6;
    if (a <= 4 && err > worst) worst = err;
    if (err > bound) fail_msg("hk_erf1p(%.9g) = %.9g, 1 + erf = %.9g: relative error %.3g", x[i], y[i], ref, err);
  }
  fprintf(stderr, "[ math ] hk_erf1p: worst relative error %.3g for |x| <= 4\n", worst);
  const float se[] = {-INFINITY, INFINITY, NAN, 0.0f, -30.0f, 30.0f};
  float ye[sizeof se / sizeof se[0]];
  f_erf1p(se, ye, sizeof se / sizeof se[0]);
  assert_true(ye[0] == 0.0f && ye[1] == 2.0f && isnan(ye[2]) && ye[3] == 1.0f && ye[4] == 0.0f && ye[5] == 2.0f);
}

static void test_conversions(void **state) {
  (void)state;
  to16_fn_t to_f16, to_bf16;
  from16_fn_t from_f16, from_bf16;
  void *s;
  s = sym("hkt_to_f16"), memcpy(&to_f16, &s, sizeof s);
  s = sym("hkt_to_bf16"), memcpy(&to_bf16, &s, sizeof s);
  s = sym("hkt_from_f16"), memcpy(&from_f16, &s, sizeof s);
  s = sym("hkt_from_bf16"), memcpy(&from_bf16, &s, sizeof s);

  /* Every 16-bit pattern decodes exactly (subnormals, inf, NaN). */
  uint16_t *h = malloc(65536 * sizeof *h);
  float *f = malloc(65536 * sizeof *f);
  for (uint32_t i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  from_f16(h, f, 65536);
  size_t bad = 65536;
  for (uint32_t i = 0; i < 65536 && bad == 65536; i++)
    if (!same_float(f[i], hk_test_f16_to_f32((uint16_t)i))) bad = i;
  float got = bad < 65536 ? f[bad] : 0;
  if (bad == 65536) {
    from_bf16(h, f, 65536);
    for (uint32_t i = 0; i < 65536 && bad == 65536; i++)
      if (!same_float(f[i], hk_test_bf16_to_f32((uint16_t)i))) bad = 65536 + i, got = f[i];
  }
  free(h);
  free(f);
  if (bad < 65536) fail_msg("f16 0x%04zx decodes to %g", bad, got);
  if (bad > 65536) fail_msg("bf16 0x%04zx decodes to %g", bad - 65536, got);

  /* Encoding: a stride through all f32 bit patterns, plus every f16 value and the
   * midpoints to its neighbours (the ties) and values one f32 ulp either side. */
  enum { N = (1 << 20) + 65536 * 5 };
  float *in = malloc(N * sizeof *in);
  uint16_t *out16 = malloc(N * sizeof *out16);
  size_t n = 0;
  for (uint64_t u = 0; u < (1ull << 32); u += 4093) {
    uint32_t b = (uint32_t)u;
    memcpy(&in[n++], &b, 4);
  }
  for (uint32_t i = 0; i < 0x7c00; i++) {
    float lo = hk_test_f16_to_f32((uint16_t)i), hi = hk_test_f16_to_f32((uint16_t)(i + 1));
    float mid = (float)(((double)lo + (double)hi) / 2);
    in[n++] = mid;
    in[n++] = -mid;
    in[n++] = nextafterf(mid, INFINITY);
    in[n++] = nextafterf(mid, -INFINITY);
    in[n++] = lo;
  }
  assert_true(n <= N);
  to_f16(in, out16, n);
  for (size_t i = 0; i < n; i++) {
    uint16_t want = hk_test_f32_to_f16(in[i]);
    int ok = isnan(in[i]) ? (out16[i] & 0x7c00) == 0x7c00 && (out16[i] & 0x3ff) != 0 : out16[i] == want;
    if (!ok) fail_msg("f32 %a -> f16 0x%04x, expected 0x%04x", (double)in[i], out16[i], want);
  }
  to_bf16(in, out16, n);
  for (size_t i = 0; i < n; i++) {
    uint16_t want = hk_test_f32_to_bf16(in[i]);
    int ok = isnan(in[i]) ? (out16[i] & 0x7f80) == 0x7f80 && (out16[i] & 0x7f) != 0 : out16[i] == want;
    if (!ok) fail_msg("f32 %a -> bf16 0x%04x, expected 0x%04x", (double)in[i], out16[i], want);
  }
  free(in);
  free(out16);
}

/* ---- build hygiene ---------------------------------------------------------------------- */
static void test_templates_build_warning_free(void **state) {
  (void)state;
  char *dir = hk_test_tmpdir();
  assert_non_null(dir);
  char path[4096], cmd[8192], out[8192];
  snprintf(path, sizeof path, "%s/all.c", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  fputs(g_ops.source, f);
  fclose(f);
  const char *cc = getenv("CC");
  snprintf(cmd, sizeof cmd, "%s -std=c11 -fsyntax-only -Wall -Wextra -Wshadow -Wpedantic -Werror '%s'",
           cc && *cc ? cc : "cc", path);
  int st = hk_test_run(cmd, out, sizeof out);
  unlink(path);
  rmdir(dir);
  free(dir);
  if (st != 0) fail_msg("template set does not build warning-free (status %d):\n%s", st, out);
}

/* Same source -> same bytes; a broken source -> an error naming the kernels. */
static void test_rtc_deterministic_and_errors(void **state) {
  (void)state;
  char *src = hkc_codegen_host(g_ops.kernels, 2);
  assert_non_null(src);
  void *a = NULL, *b = NULL;
  size_t na = 0, nb = 0;
  char ver[160];
  assert_int_equal(hkc_rtc_host_compile(src, &a, &na, ver, sizeof ver), 0);
  assert_int_equal(hkc_rtc_host_compile(src, &b, &nb, ver, sizeof ver), 0);
  assert_true(na > 0);
  assert_true(na == nb && memcmp(a, b, na) == 0);
  assert_true(strlen(ver) > 0 && strcmp(ver, "unknown") != 0);
  assert_null(memmem(a, na, "hkc-rtc.", 8)); /* no temporary path inside */
  free(a);
  free(b);
  free(src);

  char diag[4096];
  hkc_diag_capture(diag, sizeof diag);
  int before = hkc_error_count();
  void *code = (void *)1;
  size_t size = 1;
  int rc = hkc_rtc_host_compile("#define HK_NAME hk_broken_kernel\nint x = ;\n", &code, &size, ver, sizeof ver);
  hkc_diag_capture(NULL, 0);
  assert_int_equal(rc, -1);
  assert_null(code);
  assert_int_equal(hkc_error_count(), before + 1);
  assert_non_null(strstr(diag, "hk_broken_kernel"));
  assert_non_null(strstr(diag, "error")); /* the compiler's own message */
}

/* ---- lowering ------------------------------------------------------------------------------ */
static hkc_dim_t D(int64_t v) { return (hkc_dim_t){0, v}; }
static const hkc_dim_t BATCH = {1, 0};

static int add_tensor(hkc_spec_t *s, const char *name, hk_role_t role, int rank, hkc_dim_t d0, hkc_dim_t d1,
                      hkc_dim_t d2) {
  hkc_tensor_t *t = &s->tensors[s->n_tensors];
  memset(t, 0, sizeof *t);
  t->name = (char *)name;
  t->role = role;
  t->dtype = HK_DTYPE_F16;
  t->rank = (uint32_t)rank;
  t->dims[0] = d0;
  t->dims[1] = d1;
  t->dims[2] = d2;
  t->producer = -1;
  return (int)s->n_tensors++;
}

static hkc_node_t *add_node(hkc_spec_t *s, const char *name, hk_op_t op, int in0, int out) {
  hkc_node_t *n = &s->nodes[s->n_nodes++];
  memset(n, 0, sizeof *n);
  n->name = (char *)name;
  n->op = op;
  n->in[0] = in0;
  n->in[1] = n->in[2] = HKC_NONE;
  n->n_in = 1;
  n->bias = n->residual = n->mul = n->gamma = n->beta = n->add_in = n->sum_out = HKC_NONE;
  n->lengths = n->mask = n->pos = n->ctx = n->slot = n->k_cache = n->v_cache = HKC_NONE;
  n->n_fused = 1;
  n->out = out;
  n->eps = 1e-5f;
  return n;
}

static void expect_ints(const hkc_arg_t *args, int first, const int64_t *want, int n, const char *what) {
  for (int i = 0; i < n; i++) {
    if (args[first + i].kind != HK_ARG_I64 || args[first + i].i != want[i])
      fail_msg("%s: arg %d is (%d, %lld), expected I64 %lld", what, first + i, (int)args[first + i].kind,
               (long long)args[first + i].i, (long long)want[i]);
  }
}

static void expect_tensor(const hkc_arg_t *a, int tensor) {
  if (tensor == HKC_NONE) {
    assert_int_equal(a->kind, HK_ARG_NULL);
  } else {
    assert_int_equal(a->kind, HK_ARG_TENSOR);
    assert_int_equal(a->i, tensor);
  }
}

static void test_lower_bert_like(void **state) {
  (void)state;
  enum { SEQ = 16, HID = 64, HEADS = 4 };
  hkc_tensor_t tensors[16];
  hkc_node_t nodes[8];
  hkc_spec_t s = {.dtype = HK_DTYPE_F16, .tensors = tensors, .nodes = nodes};
  int x = add_tensor(&s, "x", HK_ROLE_INPUT, 3, BATCH, D(SEQ), D(HID));
  int w = add_tensor(&s, "w", HK_ROLE_PARAM, 2, D(HID), D(3 * HID), D(0));
  int b = add_tensor(&s, "b", HK_ROLE_PARAM, 1, D(3 * HID), D(0), D(0));
  int qkv = add_tensor(&s, "qkv", HK_ROLE_INTERMEDIATE, 3, BATCH, D(SEQ), D(3 * HID));
  int a = add_tensor(&s, "a", HK_ROLE_INTERMEDIATE, 3, BATCH, D(SEQ), D(HID));
  int wo = add_tensor(&s, "wo", HK_ROLE_PARAM, 2, D(HID), D(HID), D(0)); /* [N, K] */
  int y = add_tensor(&s, "y", HK_ROLE_INTERMEDIATE, 3, BATCH, D(SEQ), D(HID));
  int gm = add_tensor(&s, "g", HK_ROLE_PARAM, 1, D(HID), D(0), D(0));
  int bt = add_tensor(&s, "beta", HK_ROLE_PARAM, 1, D(HID), D(0), D(0));
  int z = add_tensor(&s, "z", HK_ROLE_OUTPUT, 3, BATCH, D(SEQ), D(HID));
  int zb = add_tensor(&s, "zb", HK_ROLE_OUTPUT, 3, BATCH, D(SEQ), D(HID));
  int gq = add_tensor(&s, "gq", HK_ROLE_INTERMEDIATE, 3, BATCH, D(SEQ), D((HEADS + 2 * 2) * 16));
  int ag = add_tensor(&s, "ag", HK_ROLE_OUTPUT, 3, BATCH, D(SEQ), D(HID));

  hkc_node_t *fc = add_node(&s, "fc", HK_OP_GEMM, x, qkv);
  fc->in[1] = w, fc->n_in = 2, fc->bias = b, fc->act = HK_ACT_GELU;
  hkc_node_t *at = add_node(&s, "attn", HK_OP_ATTENTION, qkv, a);
  at->heads = HEADS, at->causal = 1;
  hkc_node_t *pj = add_node(&s, "proj", HK_OP_GEMM, a, y);
  pj->in[1] = wo, pj->n_in = 2, pj->trans_b = 1, pj->residual = x;
  hkc_node_t *ln = add_node(&s, "ln", HK_OP_LAYERNORM, y, z);
  ln->gamma = gm, ln->beta = bt;
  hkc_node_t *ad = add_node(&s, "add", HK_OP_ADD, z, zb);
  ad->in[1] = bt, ad->n_in = 2;
  hkc_node_t *ga = add_node(&s, "gqa", HK_OP_ATTENTION, gq, ag);
  ga->heads = HEADS, ga->kv_heads = 2, ga->has_scale = 1, ga->scale = 0.5f;

  static const int64_t batches[] = {1, 8};
  for (int bi = 0; bi < 2; bi++) {
    const int64_t B = batches[bi], M = B * SEQ;
    hkc_kernel_key_t key;
    hkc_arg_t args[HKC_MAX_ARGS];

    assert_int_equal(hkc_lower_node(&s, 0, B, &key, args), 9);
    assert_int_equal(key.op, HK_OP_GEMM);
    assert_false(key.has_mul);
    expect_tensor(&args[8], HKC_NONE);
    assert_int_equal(key.dtype, HK_DTYPE_F16);
    assert_int_equal(key.act, HK_ACT_GELU);
    assert_true(key.has_bias && !key.has_residual && !key.trans_b);
    expect_tensor(&args[0], x), expect_tensor(&args[1], w), expect_tensor(&args[2], b);
    expect_tensor(&args[3], HKC_NONE), expect_tensor(&args[4], qkv);
    expect_ints(args, 5, (int64_t[]){M, 3 * HID, HID}, 3, "fc");

    assert_int_equal(hkc_lower_node(&s, 1, B, &key, args), 17);
    assert_int_equal(key.op, HK_OP_ATTENTION);
    for (int i = 0; i < 3; i++) expect_tensor(&args[i], qkv);
    expect_tensor(&args[3], a);
    expect_ints(args, 4, (int64_t[]){B, SEQ, SEQ, HEADS, HEADS, 16, 3 * HID, 3 * HID, 0, HID, 2 * HID, 1}, 12,
                "attn");
    assert_int_equal(args[16].kind, HK_ARG_F32);
    assert_true(fabsf(args[16].f - 0.25f) < 1e-7f);

    assert_int_equal(hkc_lower_node(&s, 2, B, &key, args), 9);
    assert_true(key.trans_b && key.has_residual && !key.has_bias && key.act == HK_ACT_NONE);
    expect_tensor(&args[2], HKC_NONE), expect_tensor(&args[3], x);
    expect_ints(args, 5, (int64_t[]){M, HID, HID}, 3, "proj");

    assert_int_equal(hkc_lower_node(&s, 3, B, &key, args), 9);
    assert_int_equal(key.op, HK_OP_LAYERNORM);
    assert_true(!key.has_add && !key.has_sum);
    expect_tensor(&args[7], HKC_NONE), expect_tensor(&args[8], HKC_NONE);
    expect_tensor(&args[0], y), expect_tensor(&args[1], gm), expect_tensor(&args[2], bt), expect_tensor(&args[3], z);
    expect_ints(args, 4, (int64_t[]){M, HID}, 2, "ln");
    assert_int_equal(args[6].kind, HK_ARG_F32);
    assert_true(args[6].f == 1e-5f);

    assert_int_equal(hkc_lower_node(&s, 4, B, &key, args), 6);
    expect_ints(args, 3, (int64_t[]){M * HID, M * HID, HID}, 3, "add");

    assert_int_equal(hkc_lower_node(&s, 5, B, &key, args), 17);
    expect_ints(args, 4, (int64_t[]){B, SEQ, SEQ, HEADS, 2, 16, 128, 128, 0, 64, 96, 0}, 12, "gqa");
    assert_true(args[16].f == 0.5f);
  }
}

static void test_lower_rope(void **state) {
  (void)state;
  hkc_tensor_t tensors[6];
  hkc_node_t nodes[3];
  hkc_spec_t s = {.dtype = HK_DTYPE_F16, .tensors = tensors, .nodes = nodes};
  int x = add_tensor(&s, "x", HK_ROLE_INPUT, 3, BATCH, D(37), D(3 * 64));
  int y = add_tensor(&s, "y", HK_ROLE_OUTPUT, 3, BATCH, D(37), D(3 * 64));
  int t = add_tensor(&s, "t", HK_ROLE_INPUT, 2, D(37), D(12), D(0));
  int u = add_tensor(&s, "u", HK_ROLE_OUTPUT, 2, D(37), D(12), D(0));
  hkc_node_t *r1 = add_node(&s, "r1", HK_OP_ROPE, x, y);
  r1->heads = 3, r1->pos_offset = 5, r1->theta = 500000.0f;
  hkc_node_t *r2 = add_node(&s, "r2", HK_OP_ROPE, t, u);
  r2->heads = 2, r2->theta = 10000.0f;
  /* packed q|k|v: 8 q heads over 2 kv heads of 32 */
  int p = add_tensor(&s, "p", HK_ROLE_INPUT, 3, BATCH, D(45), D((8 + 2 * 2) * 32));
  int pr = add_tensor(&s, "pr", HK_ROLE_OUTPUT, 3, BATCH, D(45), D((8 + 2 * 2) * 32));
  hkc_node_t *r3 = add_node(&s, "r3", HK_OP_ROPE, p, pr);
  r3->heads = 8, r3->kv_heads = 2, r3->packed = 1, r3->theta = 500000.0f;
  hkc_kernel_key_t key;
  hkc_arg_t args[HKC_MAX_ARGS];
  char name[96];
  for (int64_t b = 1; b <= 4; b += 3) {
    assert_int_equal(hkc_lower_node(&s, 0, b, &key, args), 9);
    assert_int_equal(key.op, HK_OP_ROPE);
    assert_int_equal(key.dtype, HK_DTYPE_F16);
    assert_int_equal(key.head_dim, 64);
    assert_int_equal(key.align, 8); /* 192, 64 and 32 */
    expect_tensor(&args[0], x), expect_tensor(&args[1], y);
    expect_ints(args, 2, (int64_t[]){b * 37, 37, 3, 64, 5}, 5, "r1");
    assert_int_equal(args[7].kind, HK_ARG_F32);
    assert_true(args[7].f == 500000.0f);
    expect_ints(args, 8, (int64_t[]){0}, 1, "r1 pass_heads");
  }
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_rope_f16_a8_d64");
  assert_int_equal(hkc_lower_node(&s, 1, 2, &key, args), 9);
  assert_int_equal(key.align, 1); /* dh/2 = 3 */
  assert_int_equal(key.head_dim, 6);
  expect_ints(args, 2, (int64_t[]){37, 37, 2, 6, 0}, 5, "r2");
  assert_true(args[7].f == 10000.0f);
  /* packed: heads = q + k heads (rotated), pass_heads = v heads; the same kernel */
  assert_int_equal(hkc_lower_node(&s, 2, 3, &key, args), 9);
  expect_tensor(&args[0], p), expect_tensor(&args[1], pr);
  expect_ints(args, 2, (int64_t[]){3 * 45, 45, 8 + 2, 32, 0}, 5, "r3");
  expect_ints(args, 8, (int64_t[]){2}, 1, "r3 pass_heads");
  assert_int_equal(key.head_dim, 32);
  assert_int_equal(key.align, 8);
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_rope_f16_a8_d32");
  /* An odd head dim (a hand-built IR the parser would refuse) is reported, not lowered. */
  r2->heads = 4;
  char diag[512];
  hkc_diag_capture(diag, sizeof diag);
  assert_int_equal(hkc_lower_node(&s, 1, 1, &key, args), -1);
  hkc_diag_capture(NULL, 0);
  assert_non_null(strstr(diag, "node 'r2': cannot lower"));
}

/* The generation ops' layouts (lower.h), rope and embedding with ctx, rope scaling. */
static void test_lower_generation(void **state) {
  (void)state;
  enum { H = 2, KV = 1, DH = 16 };
  hkc_tensor_t tensors[20];
  hkc_node_t nodes[8];
  hkc_spec_t s = {.dtype = HK_DTYPE_F16, .tensors = tensors, .nodes = nodes};
  int qkv = add_tensor(&s, "qkv", HK_ROLE_INPUT, 2, BATCH, D((H + 2 * KV) * DH), D(0));
  int ctx = add_tensor(&s, "ctx", HK_ROLE_INPUT, 1, BATCH, D(0), D(0));
  int slot = add_tensor(&s, "slot", HK_ROLE_INPUT, 1, BATCH, D(0), D(0));
  int rows = add_tensor(&s, "rows", HK_ROLE_INPUT, 1, D(3), D(0), D(0));
  int ids = add_tensor(&s, "ids", HK_ROLE_INPUT, 1, BATCH, D(0), D(0));
  int table = add_tensor(&s, "table", HK_ROLE_PARAM, 2, D(11), D(6), D(0));
  int pos = add_tensor(&s, "pos", HK_ROLE_PARAM, 2, D(4), D(6), D(0));
  int kc = add_tensor(&s, "kc", HK_ROLE_STATE, 4, D(2), D(3), D(8));
  int vc = add_tensor(&s, "vc", HK_ROLE_STATE, 4, D(2), D(3), D(8));
  tensors[kc].dims[3] = tensors[vc].dims[3] = D(KV * DH);
  int q = add_tensor(&s, "q", HK_ROLE_INTERMEDIATE, 2, BATCH, D(H * DH), D(0));
  int o = add_tensor(&s, "o", HK_ROLE_INTERMEDIATE, 2, BATCH, D(H * DH), D(0));
  int last = add_tensor(&s, "last", HK_ROLE_OUTPUT, 2, D(3), D(H * DH), D(0));
  int next = add_tensor(&s, "next", HK_ROLE_OUTPUT, 1, D(3), D(0), D(0));
  int rot = add_tensor(&s, "rot", HK_ROLE_OUTPUT, 2, BATCH, D((H + 2 * KV) * DH), D(0));
  int e = add_tensor(&s, "e", HK_ROLE_OUTPUT, 2, BATCH, D(6), D(0));
  int sp_params = add_tensor(&s, "sp_params", HK_ROLE_INPUT, 2, D(3), D(4), D(0));
  int pick = add_tensor(&s, "pick", HK_ROLE_OUTPUT, 1, D(3), D(0), D(0));
  const int i32[] = {ctx, slot, rows, ids, next, sp_params, pick};
  for (size_t i = 0; i < sizeof i32 / sizeof i32[0]; i++) tensors[i32[i]].dtype = HK_DTYPE_I32;
  hkc_node_t *ap = add_node(&s, "ap", HK_OP_KV_APPEND, qkv, q);
  ap->heads = H, ap->kv_heads = KV, ap->k_cache = kc, ap->v_cache = vc, ap->ctx = ctx, ap->slot = slot, ap->layer = 1;
  hkc_node_t *at = add_node(&s, "at", HK_OP_KV_ATTENTION, q, o);
  *at = *ap;
  at->name = "at", at->op = HK_OP_KV_ATTENTION, at->in[0] = q, at->out = o, at->window = 4;
  hkc_node_t *tr = add_node(&s, "tr", HK_OP_TAKE_ROWS, o, last);
  tr->in[1] = rows, tr->n_in = 2;
  add_node(&s, "am", HK_OP_ARGMAX, last, next);
  hkc_node_t *rp = add_node(&s, "rp", HK_OP_ROPE, qkv, rot);
  rp->heads = H, rp->kv_heads = KV, rp->packed = 1, rp->ctx = ctx, rp->theta = 500000.0f;
  rp->rope_scaling = HKC_ROPE_SCALING_LLAMA3, rp->rope_factor = 32, rp->rope_low_freq = 1, rp->rope_high_freq = 4;
  rp->rope_original_max = 8192;
  hkc_node_t *em = add_node(&s, "em", HK_OP_EMBEDDING, ids, e);
  em->in[1] = table, em->n_in = 2, em->pos = pos, em->ctx = ctx;
  hkc_node_t *sp = add_node(&s, "sp", HK_OP_SAMPLE, last, pick);
  sp->in[1] = sp_params, sp->n_in = 2;

  hkc_kernel_key_t key;
  hkc_arg_t args[HKC_MAX_ARGS];
  char name[96];
  const int64_t B = 5;
  assert_int_equal(hkc_lower_node(&s, 0, B, &key, args), HKC_KV_APPEND_N_ARGS);
  const int kv_tensors[] = {qkv, kc, vc, ctx, slot, q};
  for (int i = 0; i < 6; i++) expect_tensor(&args[i], kv_tensors[i]);
  expect_ints(args, HKC_KV_APPEND_ARG_ROWS, (int64_t[]){B, H, KV, DH, 1, 3, 8}, 7, "kv_append");
  assert_int_equal(key.head_dim, DH);
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_kv_append_f16_a8_d16");
  assert_int_equal(hkc_lower_node(&s, 1, B, &key, args), HKC_KV_ATTENTION_N_ARGS);
  expect_tensor(&args[HKC_KV_ATTENTION_ARG_Q], q), expect_tensor(&args[HKC_KV_ATTENTION_ARG_OUT], o);
  expect_ints(args, HKC_KV_ATTENTION_ARG_ROWS, (int64_t[]){B, H, KV, DH, 1, 3, 8, 4}, 8, "kv_attention");
  assert_true(args[HKC_KV_ATTENTION_ARG_SCALE].kind == HK_ARG_F32 && args[HKC_KV_ATTENTION_ARG_SCALE].f == 0.25f);
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_kv_attention_f16_a8_d16");
  assert_int_equal(hkc_lower_node(&s, 2, B, &key, args), HKC_TAKE_ROWS_N_ARGS);
  expect_tensor(&args[0], o), expect_tensor(&args[1], rows), expect_tensor(&args[2], last);
  expect_ints(args, HKC_TAKE_ROWS_ARG_X_ROWS, (int64_t[]){B, 3, H * DH}, 3, "take_rows");
  assert_int_equal(hkc_lower_node(&s, 3, B, &key, args), HKC_ARGMAX_N_ARGS);
  assert_int_equal(key.dtype, HK_DTYPE_F16); /* what it reads; it writes i32 */
  expect_ints(args, HKC_ARGMAX_ARG_ROWS, (int64_t[]){3, H * DH}, 2, "argmax");
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_argmax_f16_a8");
  assert_int_equal(hkc_lower_node(&s, 6, B, &key, args), HKC_SAMPLE_N_ARGS);
  assert_int_equal(key.dtype, HK_DTYPE_F16); /* what it reads; it writes i32 */
  expect_tensor(&args[HKC_SAMPLE_ARG_X], last), expect_tensor(&args[HKC_SAMPLE_ARG_PARAMS], sp_params);
  expect_tensor(&args[HKC_SAMPLE_ARG_OUT], pick);
  expect_ints(args, HKC_SAMPLE_ARG_ROWS, (int64_t[]){3, H * DH}, 2, "sample");
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_sample_f16_a8");
  /* rope: ctx then the four scaling numbers after the plain layout; seq 1 and offset 0 */
  assert_int_equal(hkc_lower_node(&s, 4, B, &key, args), HKC_ROPE_N_ARGS + 1 + HKC_ROPE_SCALING_N_ARGS);
  assert_true(key.has_ctx && key.rope_scaling == HKC_ROPE_SCALING_LLAMA3);
  expect_ints(args, HKC_ROPE_ARG_ROWS, (int64_t[]){B, 1, H + KV, DH, 0}, 5, "rope");
  expect_tensor(&args[hkc_rope_ctx_arg()], ctx);
  const uint32_t at_sc = hkc_rope_scaling_arg(1);
  const float want_sc[] = {32, 1, 4, 8192};
  for (int i = 0; i < HKC_ROPE_SCALING_N_ARGS; i++)
    assert_true(args[at_sc + (uint32_t)i].kind == HK_ARG_F32 && args[at_sc + (uint32_t)i].f == want_sc[i]);
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_rope_f16_ctx_l3_a8_d16");
  /* without ctx: x [batch, 7, width], linear scaling (its llama3 numbers passed as zeros) */
  rp->ctx = HKC_NONE, rp->rope_scaling = HKC_ROPE_SCALING_LINEAR;
  for (int i = 0; i < 2; i++) {
    hkc_tensor_t *t = &tensors[i ? rot : qkv];
    t->rank = 3, t->dims[2] = t->dims[1], t->dims[1] = D(7);
  }
  assert_int_equal(hkc_lower_node(&s, 4, B, &key, args), HKC_ROPE_N_ARGS + HKC_ROPE_SCALING_N_ARGS);
  assert_true(args[hkc_rope_scaling_arg(0)].f == 32 && args[hkc_rope_scaling_arg(0) + 1].f == 0);
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_rope_f16_lin_a8_d16");
  /* embedding: ctx and max_pos after the plain layout */
  assert_int_equal(hkc_lower_node(&s, 5, B, &key, args), HKC_EMBEDDING_N_ARGS_CTX);
  expect_tensor(&args[HKC_EMBEDDING_ARG_CTX], ctx);
  expect_ints(args, HKC_EMBEDDING_ARG_MAX_POS, (int64_t[]){4}, 1, "embedding max_pos");
  assert_true(key.has_add && key.has_ctx);
  hkc_kernel_key_name(&key, name, sizeof name);
  assert_string_equal(name, "hk_embedding_f16_add_ctx_a2");
  /* a layer past the caches' (a hand-built IR the parser would refuse) is reported */
  ap->layer = 2;
  char diag[512];
  hkc_diag_capture(diag, sizeof diag);
  assert_int_equal(hkc_lower_node(&s, 0, 1, &key, args), -1);
  hkc_diag_capture(NULL, 0);
  assert_non_null(strstr(diag, "node 'ap': cannot lower"));
}

static int is_identifier(const char *s) {
  if (!(isalpha((unsigned char)s[0]) || s[0] == '_')) return 0;
  for (; *s; s++)
    if (!(isalnum((unsigned char)*s) || *s == '_')) return 0;
  return 1;
}

static void test_key_names_unique(void **state) {
  (void)state;
  enum {
    NPROG = 4,
    NGEN = 6, /* rope with ctx and/or scaling, embedding with ctx */
    MAXK = HK_OP_COUNT_ * HK_DTYPE_FLOAT_COUNT * HK_ACT_COUNT_ * 48 + (NPROG + NGEN) * HK_DTYPE_FLOAT_COUNT
  };
  static hkc_kernel_key_t keys[MAXK];
  static char names[MAXK][96];
  size_t n = 0;
  for (int op = 0; op < HK_OP_COUNT_; op++)
    for (int dt = 0; dt < HK_DTYPE_FLOAT_COUNT; dt++)
      for (int act = 0; act < HK_ACT_COUNT_; act++)
        for (int f = 0; f < 64; f++) {
          if ((f >> 5 & 1) && !(f >> 4 & 1)) continue; /* has_sum only with has_add */
          keys[n] = (hkc_kernel_key_t){.op = (hk_op_t)op, .dtype = (hk_dtype_t)dt, .act = (hk_act_t)act, .trans_b = f & 1, .has_bias = (f >> 1) & 1, .has_residual = (f >> 2) & 1,
                                       .has_mul = (f >> 3) & 1, .has_add = (f >> 4) & 1, .has_sum = (f >> 5) & 1};
          hkc_kernel_key_name(&keys[n], names[n], sizeof names[n]);
          if (!is_identifier(names[n]) || strncmp(names[n], "hk_", 3) != 0) fail_msg("bad name '%s'", names[n]);
          n++;
        }
  static const char *const programs[NPROG] = {"r", "a1", "a1gm2", "a1gm2r"};
  for (int p = 0; p < NPROG; p++)
    for (int dt = 0; dt < HK_DTYPE_FLOAT_COUNT; dt++) {
      keys[n] = (hkc_kernel_key_t){.op = HK_OP_EWCHAIN, .dtype = (hk_dtype_t)dt};
      snprintf(keys[n].program, sizeof keys[n].program, "%s", programs[p]);
      hkc_kernel_key_name(&keys[n], names[n], sizeof names[n]);
      if (!is_identifier(names[n])) fail_msg("bad name '%s'", names[n]);
      n++;
    }
  for (int dt = 0; dt < HK_DTYPE_FLOAT_COUNT; dt++) /* rope with ctx and/or a scaling; embedding with ctx */
    for (int g = 0; g < NGEN; g++) {
      keys[n] = g < NGEN - 1 ? (hkc_kernel_key_t){.op = HK_OP_ROPE, .dtype = (hk_dtype_t)dt, .has_ctx = (g + 1) & 1,
                                                  .rope_scaling = (g + 1) >> 1}
                             : (hkc_kernel_key_t){.op = HK_OP_EMBEDDING, .dtype = (hk_dtype_t)dt, .has_add = 1,
                                                  .has_ctx = 1};
      hkc_kernel_key_name(&keys[n], names[n], sizeof names[n]);
      if (!is_identifier(names[n])) fail_msg("bad name '%s'", names[n]);
      n++;
    }
  for (size_t i = 0; i < n; i++) {
    assert_true(hkc_kernel_key_equal(&keys[i], &keys[i]));
    for (size_t j = i + 1; j < n; j++) {
      assert_false(hkc_kernel_key_equal(&keys[i], &keys[j]));
      if (strcmp(names[i], names[j]) == 0) fail_msg("two keys share the name %s", names[i]);
    }
  }
  hkc_kernel_key_t k = {.op = HK_OP_GEMM, .dtype = HK_DTYPE_F16, .act = HK_ACT_GELU, .has_bias = 1, .has_residual = 1,
                        .trans_b = 1};
  char name[96];
  hkc_kernel_key_name(&k, name, sizeof name);
  assert_string_equal(name, "hk_gemm_f16_gelu_bias_res_tb");
  hkc_kernel_key_name(&(hkc_kernel_key_t){.op = HK_OP_SOFTMAX, .dtype = HK_DTYPE_BF16}, name, sizeof name);
  assert_string_equal(name, "hk_softmax_bf16");
  hkc_kernel_key_name(&(hkc_kernel_key_t){.op = HK_OP_GEMM, .dtype = HK_DTYPE_F16, .has_bias = 1, .has_mul = 1,
                                          .has_residual = 1},
                      name, sizeof name);
  assert_string_equal(name, "hk_gemm_f16_bias_mul_res");
  hkc_kernel_key_name(&(hkc_kernel_key_t){.op = HK_OP_LAYERNORM, .dtype = HK_DTYPE_F16, .has_add = 1, .has_sum = 1},
                      name, sizeof name);
  assert_string_equal(name, "hk_layernorm_f16_add_sum");
  hkc_kernel_key_t ew = {.op = HK_OP_EWCHAIN, .dtype = HK_DTYPE_F16, .align = 8};
  snprintf(ew.program, sizeof ew.program, "a1gm2");
  hkc_kernel_key_name(&ew, name, sizeof name);
  assert_string_equal(name, "hk_ewchain_f16_a1gm2_a8");
  hkc_kernel_key_name(&(hkc_kernel_key_t){.op = HK_OP_ROPE, .dtype = HK_DTYPE_F32}, name, sizeof name);
  assert_string_equal(name, "hk_rope_f32");
  hkc_kernel_key_name(&(hkc_kernel_key_t){.op = HK_OP_ROPE, .dtype = HK_DTYPE_BF16, .has_ctx = 1, .rope_scaling = 2},
                      name, sizeof name);
  assert_string_equal(name, "hk_rope_bf16_ctx_l3");
  hkc_kernel_key_name(&(hkc_kernel_key_t){.op = HK_OP_KV_ATTENTION, .dtype = HK_DTYPE_BF16, .align = 8, .head_dim = 64},
                      name, sizeof name);
  assert_string_equal(name, "hk_kv_attention_bf16_a8_d64");
}

static void test_host_target_name(void **state) {
  (void)state;
  const char *name = hkc_host_target_name();
  assert_non_null(name);
  assert_true(strncmp(name, "host-", 5) == 0);
#if defined(__x86_64__)
  assert_string_equal(name, "host-x86_64");
#elif defined(__aarch64__)
  assert_string_equal(name, "host-aarch64");
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_key_names_unique),
      cmocka_unit_test(test_lower_bert_like),
      cmocka_unit_test(test_lower_rope),
      cmocka_unit_test(test_lower_generation),
      cmocka_unit_test(test_host_target_name),
      cmocka_unit_test(test_conversions),
      cmocka_unit_test(test_math),
      cmocka_unit_test(test_checker_catches_errors),
      cmocka_unit_test(test_gemm),
      cmocka_unit_test(test_gemm_mul),
      cmocka_unit_test(test_gemm_blas),
      cmocka_unit_test(test_ewchain),
      cmocka_unit_test(test_norms_add),
      cmocka_unit_test(test_binary),
      cmocka_unit_test(test_unary),
      cmocka_unit_test(test_norms),
      cmocka_unit_test(test_softmax),
      cmocka_unit_test(test_attention),
      cmocka_unit_test(test_attention_blas),
      cmocka_unit_test(test_host_variants),
      cmocka_unit_test(test_rope),
      cmocka_unit_test(test_embedding),
      cmocka_unit_test(test_rope_ctx_scaling),
      cmocka_unit_test(test_embedding_ctx),
      cmocka_unit_test(test_kv_append),
      cmocka_unit_test(test_kv_attention),
      cmocka_unit_test(test_take_rows),
      cmocka_unit_test(test_argmax),
      cmocka_unit_test(test_sample_greedy),
      cmocka_unit_test(test_sample_top_k),
      cmocka_unit_test(test_sample_top_p),
      cmocka_unit_test(test_sample_distribution),
      cmocka_unit_test(test_sample_nan_inf),
      cmocka_unit_test(test_templates_build_warning_free),
      cmocka_unit_test(test_rtc_deterministic_and_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
