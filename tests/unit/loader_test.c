/* libhkrt sessions on the host backend, with a real kernel .so compiled at test time:
 * numerics at two batch sizes, binding errors, target and batch selection, bad code
 * objects, and an allocator that fails the Nth allocation. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend.h"
#include "hk/hkrt.h"
#include "pack_fixture.h"
#include "pack_internal.h"
#include "pack_refix.h"

typedef struct {
  void *code; /* the compiled kernels */
  size_t code_size;
  fx_t fx;
  void *pack_bytes;
  size_t pack_size;
  hk_pack_t *pack;
  char diag[4096];
} state_t;

static void *g_code;
static size_t g_code_size;

static int group_setup(void **ts) {
  (void)ts;
  if (fx_compile_kernels(&g_code, &g_code_size) != 0) g_code = NULL; /* tests skip */
  return 0;
}

static int group_teardown(void **ts) {
  (void)ts;
  free(g_code);
  return 0;
}

/* Writes the fixture (host + fake sm_90 target) and opens it. */
static int setup(void **ts) {
  state_t *st = calloc(1, sizeof *st);
  *ts = st;
  if (!g_code) return 0;
  fx_init(&st->fx, g_code, g_code_size, 1);
  hkc_diag_capture(st->diag, sizeof st->diag);
  if (hkc_pack_write_memory(&st->fx.in, &st->pack_bytes, &st->pack_size) != 0) return -1;
  if (hk_pack_open_memory(st->pack_bytes, st->pack_size, NULL, &st->pack) != HK_OK) return -1;
  return 0;
}

static int teardown(void **ts) {
  state_t *st = *ts;
  hkc_diag_capture(NULL, 0);
  hk_pack_destroy(st->pack);
  free(st->pack_bytes);
  free(st);
  return 0;
}

#define NEED_CC(st)                                                      \
  do {                                                                   \
    if (!g_code) {                                                       \
      fprintf(stderr, "no C compiler: cannot build the test kernels\n"); \
      skip();                                                            \
    }                                                                    \
  } while (0)

/* Opens a fresh pack from a modified fixture; NULL when it does not open. */
static hk_pack_t *open_variant(state_t *st, void **out_bytes) {
  size_t size;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, out_bytes, &size), 0);
  hk_pack_t *pack = NULL;
  assert_int_equal(hk_pack_open_memory(*out_bytes, size, NULL, &pack), HK_OK);
  return pack;
}

/* Runs the pipeline at `batch` on random inputs and compares with a double reference. */
static void run_and_check(hk_session_t *s, int64_t batch, uint64_t seed) {
  size_t n = (size_t)batch * FX_COLS;
  float *x = malloc(n * 4), *y = malloc(n * 4), w[FX_COLS];
  hk_test_rng_t rng;
  hk_test_rng_seed(&rng, seed);
  for (size_t i = 0; i < n; i++) x[i] = (float)hk_test_uniform(&rng, -2, 2);
  for (size_t i = 0; i < FX_COLS; i++) w[i] = (float)hk_test_uniform(&rng, -3, 3);
  for (size_t i = 0; i < n; i++) y[i] = NAN; /* poison: an unwritten element fails */
  assert_int_equal(hk_session_bind(s, "x", x, n * 4), HK_OK);
  assert_int_equal(hk_session_bind(s, "w", w, sizeof w), HK_OK);
  assert_int_equal(hk_session_bind(s, "y", y, n * 4), HK_OK);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  for (size_t i = 0; i < n; i++) {
    double ref = ((double)x[i] + 1.5) * (double)w[i % FX_COLS];
    if (!(fabs((double)y[i] - ref) <= 1e-5 * (1 + fabs(ref))))
      fail_msg("batch %lld: y[%zu] = %g, expected %g", (long long)batch, i, (double)y[i], ref);
  }
  free(x);
  free(y);
}

static void test_run_two_batches(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  for (int b = 0; b < 2; b++) {
    int64_t batch = b ? 8 : 2;
    hk_session_t *s;
    assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.batch = (uint64_t)batch}, &s), HK_OK);
    assert_string_equal(hk_session_target(s), FX_HOST);
    assert_int_equal(hk_session_tensor_count(s), 3); /* x, w, y: not the intermediate */
    hk_tensor_info_t info;
    assert_int_equal(hk_session_tensor_info(s, 0, &info), HK_OK);
    assert_string_equal(info.name, "x");
    assert_int_equal(info.role, HK_TENSOR_INPUT);
    assert_int_equal(info.element_type, HK_ELEMENT_F32);
    assert_int_equal(info.rank, 2);
    assert_int_equal(info.dims[0], batch);
    assert_int_equal(info.dims[1], FX_COLS);
    assert_int_equal(info.bytes, (size_t)batch * FX_COLS * 4);
    assert_int_equal(hk_session_tensor_info(s, 1, &info), HK_OK);
    assert_string_equal(info.name, "w");
    assert_int_equal(info.role, HK_TENSOR_PARAM);
    assert_int_equal(info.bytes, FX_COLS * 4);
    assert_int_equal(hk_session_tensor_info(s, 2, &info), HK_OK);
    assert_int_equal(info.role, HK_TENSOR_OUTPUT);
    assert_int_equal(hk_session_tensor_info(s, 3, &info), HK_STATUS_NOT_FOUND);
    run_and_check(s, batch, 1 + (uint64_t)b);
    run_and_check(s, batch, 10 + (uint64_t)b); /* rebinding new buffers */
    hk_session_destroy(s);
  }
}

static void test_sessions_share_module(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  hk_session_t *a, *b;
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.batch = 2}, &a), HK_OK);
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.batch = 8, .target = FX_HOST}, &b), HK_OK);
  hk_module_t *m1, *m2;
  assert_int_equal(hk_pack_module(st->pack, 0, &m1), HK_OK);
  assert_int_equal(hk_pack_module(st->pack, 0, &m2), HK_OK);
  assert_ptr_equal(m1, m2);
  run_and_check(b, 8, 3);
  run_and_check(a, 2, 4);
  hk_session_destroy(a);
  hk_session_destroy(b);
}

static void test_bind_errors(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  hk_session_t *s;
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.batch = 2}, &s), HK_OK);
  _Alignas(16) float buf[804];
  assert_int_equal(hk_session_bind(s, "z", buf, 800), HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_last_error(), "no tensor named \"z\""));
  assert_non_null(strstr(hk_last_error(), "x, w, y"));
  assert_string_equal(hk_session_error(s), hk_last_error());
  assert_int_equal(hk_session_bind(s, "t", buf, 800), HK_STATUS_NOT_FOUND); /* intermediates are internal */
  assert_int_equal(hk_session_bind(s, "x", buf, 1000), HK_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(hk_last_error(), "tensor x expects 800 bytes (f32 [2,100]), got 1000"));
  assert_int_equal(hk_session_bind(s, "x", NULL, 800), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_session_bind(s, "x", buf + 1, 800), HK_STATUS_INVALID_ARGUMENT); /* 4 bytes off */
  assert_non_null(strstr(hk_last_error(), "is not 16-byte aligned"));
  assert_int_equal(hk_session_bind(s, "x", buf, 800), HK_OK);
  assert_int_equal(hk_session_bind(s, "w", buf, 400), HK_OK);
  assert_int_equal(hk_session_run(s, NULL), HK_STATUS_FAILED_PRECONDITION);
  assert_non_null(strstr(hk_last_error(), "unbound y"));
  assert_non_null(strstr(hk_session_error(s), "unbound y"));
  assert_int_equal(hk_session_bind(NULL, "x", buf, 800), HK_STATUS_INVALID_ARGUMENT);
  assert_int_equal(hk_session_run(NULL, NULL), HK_STATUS_INVALID_ARGUMENT);
  hk_session_destroy(s);
  hk_session_destroy(NULL);
  assert_string_equal(hk_session_error(NULL), "");
}

static void test_batch_not_found(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  hk_session_t *s = (hk_session_t *)1;
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.batch = 9}, &s), HK_STATUS_NOT_FOUND);
  assert_null(s);
  assert_non_null(strstr(hk_last_error(), "batch size 9 is larger than the largest batch size built into the artifact"));
  assert_non_null(strstr(hk_last_error(), "batch sizes: 2, 8"));
  assert_non_null(strstr(hk_pack_error(st->pack), "batch sizes: 2, 8"));
  assert_int_equal(hk_session_create(st->pack, NULL, &s), HK_STATUS_INVALID_ARGUMENT);
}

static void test_target_selection(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  const char *name;
  assert_int_equal(hk_pack_select_target(st->pack, NULL, &name), HK_OK);
  assert_string_equal(name, FX_HOST);
  assert_int_equal(hk_pack_select_target(st->pack, FX_HOST, &name), HK_OK);
  assert_string_equal(name, FX_HOST);

  hk_session_t *s;
  assert_int_equal(hk_session_create(st->pack, &(hk_session_options_t){.batch = 2, .target = "gfx90a"}, &s),
                   HK_STATUS_NOT_FOUND);
  assert_non_null(strstr(hk_last_error(), "target gfx90a is not in the artifact (it has: " FX_HOST ", sm_90)"));
  /* No CUDA driver or device here: the named target is UNAVAILABLE, and says why. */
  assert_int_equal(hk_pack_select_target(st->pack, "sm_90", &name), HK_STATUS_UNAVAILABLE);
  assert_null(name);
  assert_non_null(strstr(hk_last_error(), "sm_90 cannot run on this machine"));
  assert_non_null(strstr(hk_last_error(), "this machine runs [" FX_HOST "]"));
  assert_non_null(strstr(hk_pack_error(st->pack), "sm_90 cannot run"));

  /* A pack whose only target is a GPU: automatic choice fails, listing both sides. */
  st->fx.in.targets = &st->fx.targets[1];
  st->fx.in.n_targets = 1;
  void *bytes;
  hk_pack_t *gpu_only = open_variant(st, &bytes);
  assert_int_equal(hk_session_create(gpu_only, &(hk_session_options_t){.batch = 2}, &s),
                   HK_STATUS_NO_COMPATIBLE_TARGET);
  assert_non_null(strstr(hk_last_error(), "the artifact has [sm_90]; this machine runs [" FX_HOST "]"));
  hk_pack_destroy(gpu_only);
  free(bytes);
}

static void test_missing_symbol(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  snprintf(st->fx.kernels[1].name, sizeof st->fx.kernels[1].name, "hk_test_nope");
  void *bytes;
  hk_pack_t *pack = open_variant(st, &bytes);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, &(hk_session_options_t){.batch = 2}, &s), HK_STATUS_CORRUPT);
  assert_non_null(strstr(hk_last_error(), "kernel symbol \"hk_test_nope\" is missing"));
  /* A failed load is not cached: the next attempt fails the same way. */
  assert_int_equal(hk_session_create(pack, &(hk_session_options_t){.batch = 8}, &s), HK_STATUS_CORRUPT);
  hk_pack_destroy(pack);
  free(bytes);
}

static void test_bad_code_object(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  st->fx.targets[0].code = "this is not an ELF file";
  st->fx.targets[0].code_size = 23;
  for (int k = 0; k < 2; k++) st->fx.kernels[k].code_size = 23;
  void *bytes;
  hk_pack_t *pack = open_variant(st, &bytes);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, &(hk_session_options_t){.batch = 2}, &s), HK_STATUS_CORRUPT);
  assert_non_null(strstr(hk_last_error(), "the code object does not load"));
  hk_pack_destroy(pack);
  free(bytes);
}

/* Damage inside the zstd payload (checksums fixed up, so verify passes): the lazy
 * decompression at session creation catches it, or the object fails to load. */
static void test_damaged_code_payload(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  st->fx.in.n_targets = 1;
  void *bytes;
  size_t size;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &bytes, &size), 0);
  uint8_t *b = bytes;
  hk_section_t *cs = fx_section(b, fx_find_section(b, HK_SECTION_CODE));
  int corrupt_seen = 0;
  for (uint64_t at = 20; at < cs->size; at += cs->size / 7) {
    uint8_t *copy = fx_copy(b, size);
    copy[cs->offset + at] ^= 0x5a;
    hk_test_refix(copy, size);
    hk_pack_t *pack;
    hk_status_t s = hk_pack_open_memory(copy, size, NULL, &pack);
    if (s == HK_OK) {
      hk_session_t *sess;
      s = hk_session_create(pack, &(hk_session_options_t){.batch = 2}, &sess);
      hk_session_destroy(sess);
      hk_pack_destroy(pack);
    }
    /* Either it still decodes to a loadable object (unlikely), or a clean CORRUPT. */
    if (s != HK_OK) {
      assert_int_equal(s, HK_STATUS_CORRUPT);
      corrupt_seen++;
    }
    free(copy);
  }
  assert_true(corrupt_seen > 0);
  free(bytes);
}

/* ---- an allocator that fails the Nth allocation and counts what is live ------------ */
typedef struct {
  long calls, fail_at, live;
} counting_t;

static void *counting_alloc(void *ctx, size_t size) {
  counting_t *c = ctx;
  if (c->calls++ == c->fail_at) return NULL;
  c->live++;
  return malloc(size);
}

static void counting_free(void *ctx, void *ptr) {
  counting_t *c = ctx;
  c->live--;
  free(ptr);
}

static void test_allocation_failures(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  int failures = 0;
  for (long n = 0;; n++) {
    counting_t c = {0, n, 0};
    hk_allocator_t a = {counting_alloc, counting_free, &c};
    hk_pack_t *pack = NULL;
    hk_session_t *s = NULL;
    hk_status_t st1 = hk_pack_open_memory(st->pack_bytes, st->pack_size, &a, &pack);
    if (st1 == HK_OK) st1 = hk_session_create(pack, &(hk_session_options_t){.batch = 8}, &s);
    if (st1 == HK_OK) run_and_check(s, 8, 5);
    hk_session_destroy(s);
    hk_pack_destroy(pack);
    assert_int_equal(c.live, 0);
    if (c.calls <= n) { /* nothing failed: every allocation point has been tried */
      assert_int_equal(st1, HK_OK);
      break;
    }
    if (st1 != HK_STATUS_OUT_OF_MEMORY)
      fail_msg("failing allocation %ld: %s (%s)", n, hk_status_string(st1), hk_last_error());
    failures++;
  }
  assert_true(failures >= 6); /* pack, zstd context, code, module, session tables, workspace */
}

static void test_open_file_and_run(void **ts) {
  state_t *st = *ts;
  NEED_CC(st);
  char *dir = hk_test_tmpdir();
  char path[4200];
  snprintf(path, sizeof path, "%s/m.hkpack", dir);
  assert_int_equal(hkc_pack_write(&st->fx.in, path), 0);
  hk_pack_t *pack;
  assert_int_equal(hk_pack_open_file(path, NULL, &pack), HK_OK);
  hk_session_t *s;
  assert_int_equal(hk_session_create(pack, &(hk_session_options_t){.batch = 2}, &s), HK_OK);
  run_and_check(s, 2, 7);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  remove(path);
  remove(dir);
  free(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_run_two_batches, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sessions_share_module, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bind_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_batch_not_found, setup, teardown),
      cmocka_unit_test_setup_teardown(test_target_selection, setup, teardown),
      cmocka_unit_test_setup_teardown(test_missing_symbol, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_code_object, setup, teardown),
      cmocka_unit_test_setup_teardown(test_damaged_code_payload, setup, teardown),
      cmocka_unit_test_setup_teardown(test_allocation_failures, setup, teardown),
      cmocka_unit_test_setup_teardown(test_open_file_and_run, setup, teardown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
