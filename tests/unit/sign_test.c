/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sign_test: pack signatures and the open options' trust policy (hkrt.h, "packs: opening and
 * trust"; docs/FORMAT.md, "Signatures"), and the pack owning its bytes after open.
 *
 * Packs are the fixture (pack_fixture.h: host code compiled here, valid checksums), signed
 * with fixed seeds. The constructor test builds a host code object whose ELF constructor
 * writes a marker file: it must not run unless the policy lets the code load.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sodium.h>
#include <math.h>

#include "pack_fixture.h"
#include "pack_refix.h"
#include "pack_internal.h"
#include "sign_internal.h"

static void *g_code;
static size_t g_code_size;
static const uint8_t k_seed_a[HKC_KEY_SEED_BYTES] = {1, 2, 3};
static const uint8_t k_seed_b[HKC_KEY_SEED_BYTES] = {9, 8, 7};

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

#define NEED_CC()                                                        \
  do {                                                                   \
    if (!g_code) {                                                       \
      fprintf(stderr, "no C compiler: cannot build the test kernels\n"); \
      skip();                                                            \
    }                                                                    \
  } while (0)

/* The public key of a seed. */
static void public_key(const uint8_t seed[HKC_KEY_SEED_BYTES], uint8_t out[HK_PUBLIC_KEY_BYTES]) {
  uint8_t sk[64];
  assert_true(hk_crypto_init());
  crypto_sign_seed_keypair(out, sk, seed);
}

/* The fixture (host target only) over `code`, unsigned or signed with `seed`. */
static uint8_t *write_pack(const void *code, size_t code_size, const uint8_t *seed, size_t *out_size) {
  fx_t fx;
  fx_init(&fx, code, code_size, 0);
  fx.in.sign_seed = seed;
  void *data = NULL;
  assert_int_equal(hkc_pack_write_memory(&fx.in, &data, out_size), 0);
  return data;
}

/* Opens with `trusted` (NULL: no key) and the given flags; the status. */
static hk_status_t open_with(const uint8_t *data, size_t size, const uint8_t *trusted, uint32_t require,
                             uint32_t allow_native, hk_pack_t **out_pack) {
  hk_pack_open_options_t o = {.struct_size = sizeof o, .require_signature = require,
                              .allow_unsigned_native_code = allow_native,
                              .trusted_keys = (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])trusted,
                              .trusted_key_count = trusted ? 1 : 0};
  return hk_pack_open_memory_ex(data, size, &o, out_pack);
}

/* Runs the fixture's graph at batch 2 and checks y = (x + 1.5) * w. */
static void run_fixture(hk_pack_t *pack) {
  hk_session_t *s = NULL;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  _Alignas(16) float x[2 * FX_COLS], w[FX_COLS], y[2 * FX_COLS];
  for (int i = 0; i < 2 * FX_COLS; i++) x[i] = (float)i * 0.25f - 7.0f, y[i] = NAN;
  for (int i = 0; i < FX_COLS; i++) w[i] = 1.0f + (float)i / 64;
  assert_int_equal(hk_session_bind(s, "x", x, sizeof x), HK_OK);
  assert_int_equal(hk_session_bind(s, "w", w, sizeof w), HK_OK);
  assert_int_equal(hk_session_bind(s, "y", y, sizeof y), HK_OK);
  assert_int_equal(hk_session_run(s, NULL), HK_OK);
  for (int i = 0; i < 2 * FX_COLS; i++) {
    double ref = ((double)x[i] + 1.5) * (double)w[i % FX_COLS];
    if (!(fabs((double)y[i] - ref) <= 1e-5 * (1 + fabs(ref)))) fail_msg("y[%d] = %g, expected %g", i, (double)y[i], ref);
  }
  hk_session_destroy(s);
}

static void test_signed_round_trip(void **ts) {
  (void)ts;
  NEED_CC();
  size_t size;
  uint8_t *data = write_pack(g_code, g_code_size, k_seed_a, &size), pk[HK_PUBLIC_KEY_BYTES];
  public_key(k_seed_a, pk);
  hk_pack_t *pack = NULL;
  assert_int_equal(open_with(data, size, pk, 1, 0, &pack), HK_OK);
  const char *id = NULL;
  assert_int_equal(hk_pack_signature(pack, &id), HK_SIGNATURE_TRUSTED);
  char want[HK_KEY_ID_HEX_SIZE];
  hk_key_id_hex(pk, want);
  assert_string_equal(id, want);
  assert_int_equal(strlen(id), 16);
  run_fixture(pack);
  hk_pack_destroy(pack);
  /* Signing again replaces the signature in place: same size, same bytes (Ed25519 is
   * deterministic), and a signed pack re-signed with another key verifies under that one. */
  void *again = NULL, *other = NULL;
  size_t again_size, other_size;
  assert_int_equal(hkc_pack_sign_memory(data, size, k_seed_a, &again, &again_size), 0);
  assert_int_equal(again_size, size);
  assert_memory_equal(again, data, size);
  assert_int_equal(hkc_pack_sign_memory(data, size, k_seed_b, &other, &other_size), 0);
  assert_int_equal(open_with(other, other_size, pk, 0, 0, &pack), HK_STATUS_UNTRUSTED);
  free(again);
  free(other);
  free(data);
}

/* Every signed byte, flipped with the checksums fixed up: never accepted, and a flip that
 * passes the structural checks is refused because the signature does not verify. */
static void test_tamper_after_sign(void **ts) {
  (void)ts;
  NEED_CC();
  size_t size;
  uint8_t *data = write_pack(g_code, g_code_size, k_seed_a, &size), pk[HK_PUBLIC_KEY_BYTES];
  public_key(k_seed_a, pk);
  hk_pack_view_t v;
  assert_int_equal(hk_pack_verify(data, size, NULL, &v), HK_OK);
  uint32_t sig = fx_find_section(data, HK_SECTION_SIGNATURE);
  assert_int_not_equal(sig, UINT32_MAX);
  const uint64_t entry = v.header->section_table_offset + sig * sizeof(hk_section_t);
  const uint64_t payload = fx_section(data, sig)->offset;
  size_t by_signature = 0, step = size > 20000 ? 7 : 1;
  for (size_t at = 0; at < size; at += step) {
    const bool hole = (at >= offsetof(hk_pack_header_t, table_checksum) && at < sizeof(hk_pack_header_t)) ||
                      (at >= entry + offsetof(hk_section_t, checksum) && at < entry + offsetof(hk_section_t, target)) ||
                      (at >= payload && at < payload + sizeof(hk_signature_rec_t));
    if (hole) continue;
    uint8_t *copy = fx_copy(data, size);
    copy[at] ^= 0x20;
    hk_test_refix(copy, size);
    if (memcmp(copy, data, size) == 0) { /* a checksum field: the refix undid the flip */
      free(copy);
      continue;
    }
    hk_pack_t *pack = NULL;
    hk_status_t st = open_with(copy, size, pk, 0, 0, &pack);
    if (st == HK_OK) fail_msg("byte %zu flipped: the pack still opens", at);
    if (st == HK_STATUS_UNTRUSTED) { /* or the SIGNATURE entry's kind changed: now unsigned */
      if (strstr(hk_last_error(), "does not verify")) by_signature++;
      else if (!strstr(hk_last_error(), "not signed") && !strstr(hk_last_error(), "signature by key")) fail_msg("byte %zu: %s", at, hk_last_error());
    }
    free(copy);
  }
  /* Most bytes (code, strings, padding...) are only caught by the signature. */
  assert_true(by_signature > size / step / 4);
  /* The signature itself, flipped: refused, with the key named. */
  uint8_t *copy = fx_copy(data, size);
  copy[payload + offsetof(hk_signature_rec_t, signature) + 5] ^= 1;
  hk_test_refix(copy, size);
  hk_pack_t *pack = NULL;
  assert_int_equal(open_with(copy, size, pk, 0, 1, &pack), HK_STATUS_UNTRUSTED);
  assert_non_null(strstr(hk_last_error(), "does not verify"));
  /* ... and a metadata-only open reports it instead. */
  hk_pack_open_options_t meta = {.struct_size = sizeof meta, .metadata_only = 1};
  assert_int_equal(hk_pack_open_memory_ex(copy, size, &meta, &pack), HK_OK);
  assert_int_equal(hk_pack_signature(pack, NULL), HK_SIGNATURE_INVALID);
  hk_pack_destroy(pack);
  free(copy);
  free(data);
}

/* A signed pack that stores its param (format 1.4): it runs without binding w, and a flipped
 * weight byte with every checksum fixed up is refused because the signature does not verify
 * (the weights are signed bytes like any other). */
static void test_weights_signed(void **ts) {
  (void)ts;
  NEED_CC();
  fx_t fx;
  fx_init(&fx, g_code, g_code_size, 0);
  fx_add_weights(&fx, 0.5f);
  fx.in.sign_seed = k_seed_a;
  void *data = NULL;
  size_t size;
  assert_int_equal(hkc_pack_write_memory(&fx.in, &data, &size), 0);
  uint8_t pk[HK_PUBLIC_KEY_BYTES];
  public_key(k_seed_a, pk);
  hk_pack_t *pack = NULL;
  assert_int_equal(open_with(data, size, pk, 1, 0, &pack), HK_OK);
  hk_session_t *s = NULL;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  _Alignas(16) float x[2 * FX_COLS], y[2 * FX_COLS];
  for (int i = 0; i < 2 * FX_COLS; i++) x[i] = (float)i * 0.25f - 7.0f, y[i] = NAN;
  assert_int_equal(hk_session_bind(s, "x", x, sizeof x), HK_OK);
  assert_int_equal(hk_session_bind(s, "y", y, sizeof y), HK_OK);
  assert_int_equal(hk_session_run(s, NULL), HK_OK); /* w from the pack */
  for (int i = 0; i < 2 * FX_COLS; i++) {
    double ref = ((double)x[i] + 1.5) * (double)fx.weight_values[i % FX_COLS];
    if (!(fabs((double)y[i] - ref) <= 1e-5 * (1 + fabs(ref))))
      fail_msg("y[%d] = %g, expected %g", i, (double)y[i], ref);
  }
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  const hk_section_t *w = fx_section(data, fx_find_section(data, HK_SECTION_WEIGHTS));
  for (uint64_t at = w->offset; at < w->offset + w->size; at += 37) {
    uint8_t *copy = fx_copy(data, size);
    copy[at] ^= 0x01;
    hk_test_refix(copy, size);
    assert_int_equal(open_with(copy, size, pk, 0, 1, &pack), HK_STATUS_UNTRUSTED);
    assert_non_null(strstr(hk_last_error(), "does not verify"));
    free(copy);
  }
  free(data);
}

static void test_policy(void **ts) {
  (void)ts;
  NEED_CC();
  size_t size, signed_size;
  uint8_t *data = write_pack(g_code, g_code_size, NULL, &size), pk_a[32], pk_b[32];
  uint8_t *signed_data = write_pack(g_code, g_code_size, k_seed_a, &signed_size);
  public_key(k_seed_a, pk_a);
  public_key(k_seed_b, pk_b);
  hk_pack_t *pack = NULL;
  /* Host code, unsigned: refused by default (and by the legacy open), allowed by the opt-in. */
  assert_int_equal(open_with(data, size, NULL, 0, 0, &pack), HK_STATUS_UNTRUSTED);
  assert_null(pack);
  assert_non_null(strstr(hk_last_error(), "native host code"));
  assert_int_equal(hk_pack_open_memory(data, size, NULL, &pack), HK_STATUS_UNTRUSTED);
  assert_int_equal(open_with(data, size, pk_a, 0, 1, &pack), HK_OK);
  assert_int_equal(hk_pack_signature(pack, NULL), HK_SIGNATURE_NONE);
  hk_pack_destroy(pack);
  /* require_signature refuses unsigned, even with the opt-in. */
  assert_int_equal(open_with(data, size, pk_a, 1, 1, &pack), HK_STATUS_UNTRUSTED);
  assert_non_null(strstr(hk_last_error(), "not signed"));
  /* The wrong key: a valid signature that is not trusted. */
  assert_int_equal(open_with(signed_data, signed_size, pk_b, 0, 0, &pack), HK_STATUS_UNTRUSTED);
  assert_non_null(strstr(hk_last_error(), "not trusted"));
  assert_int_equal(open_with(signed_data, signed_size, pk_b, 1, 1, &pack), HK_STATUS_UNTRUSTED);
  assert_int_equal(open_with(signed_data, signed_size, pk_b, 0, 1, &pack), HK_OK);
  assert_int_equal(hk_pack_signature(pack, NULL), HK_SIGNATURE_VALID);
  hk_pack_destroy(pack);
  /* Options: NULL keys with a count, unknown sizes, flags other than 0/1. */
  hk_pack_open_options_t o = {.struct_size = sizeof o, .trusted_key_count = 1};
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_STATUS_INVALID_ARGUMENT);
  o = (hk_pack_open_options_t){.struct_size = sizeof o + 8};
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_STATUS_INVALID_ARGUMENT);
  o = (hk_pack_open_options_t){.struct_size = sizeof o, .allow_unsigned_native_code = 2};
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_STATUS_INVALID_ARGUMENT);
  /* Metadata only: opens anything that verifies, never loads code. */
  o = (hk_pack_open_options_t){.struct_size = sizeof o, .metadata_only = 1};
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_OK);
  hk_session_t *s = NULL;
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_STATUS_FAILED_PRECONDITION);
  hk_pack_destroy(pack);
  free(data);
  free(signed_data);
}

/* A pack of the fixture's sm_90 target alone (GPU code only, a fake code object: nothing here
 * loads it), unsigned or signed with `seed`. */
static uint8_t *write_gpu_pack(const uint8_t *seed, size_t *out_size) {
  fx_t fx;
  fx_init(&fx, NULL, 0, 1);
  fx.in.targets = &fx.targets[1];
  fx.in.n_targets = 1;
  fx.in.sign_seed = seed;
  void *data = NULL;
  assert_int_equal(hkc_pack_write_memory(&fx.in, &data, out_size), 0);
  return data;
}

/* GPU code is code: a pack without host code needs a trusted signature or the opt-in too. */
static void test_gpu_code_needs_trust(void **ts) {
  (void)ts;
  size_t size, signed_size;
  uint8_t *data = write_gpu_pack(NULL, &size), *signed_data = write_gpu_pack(k_seed_a, &signed_size);
  uint8_t pk_a[HK_PUBLIC_KEY_BYTES], pk_b[HK_PUBLIC_KEY_BYTES];
  public_key(k_seed_a, pk_a);
  public_key(k_seed_b, pk_b);
  hk_pack_t *pack = NULL;
  /* Unsigned: refused by default and by the legacy open, naming the GPU target and the way out. */
  assert_int_equal(open_with(data, size, NULL, 0, 0, &pack), HK_STATUS_UNTRUSTED);
  assert_null(pack);
  assert_non_null(strstr(hk_last_error(), "GPU code (target sm_90)"));
  assert_non_null(strstr(hk_last_error(), "allow_unsigned_code"));
  assert_int_equal(hk_pack_open_memory(data, size, NULL, &pack), HK_STATUS_UNTRUSTED);
  /* A key that did not sign it changes nothing. */
  assert_int_equal(open_with(data, size, pk_a, 0, 0, &pack), HK_STATUS_UNTRUSTED);
  /* The opt-in, by its name and by its older name. */
  hk_pack_open_options_t o = {.struct_size = sizeof o, .allow_unsigned_code = 1};
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_OK);
  assert_int_equal(hk_pack_signature(pack, NULL), HK_SIGNATURE_NONE);
  hk_pack_destroy(pack);
  assert_int_equal(open_with(data, size, NULL, 0, 1, &pack), HK_OK);
  hk_pack_destroy(pack);
  /* A caller built against the layout before allow_unsigned_code: the field lies past its
   * struct_size and reads as zero, whatever the bytes there hold. */
  o.struct_size = (uint32_t)offsetof(hk_pack_open_options_t, allow_unsigned_code);
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_STATUS_UNTRUSTED);
  /* require_signature wins over the opt-in. */
  o = (hk_pack_open_options_t){.struct_size = sizeof o, .allow_unsigned_code = 1, .require_signature = 1};
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_STATUS_UNTRUSTED);
  assert_non_null(strstr(hk_last_error(), "not signed"));
  /* Signed: trusted key opens; another key is refused, unless the opt-in. */
  assert_int_equal(open_with(signed_data, signed_size, pk_a, 1, 0, &pack), HK_OK);
  assert_int_equal(hk_pack_signature(pack, NULL), HK_SIGNATURE_TRUSTED);
  hk_pack_destroy(pack);
  assert_int_equal(open_with(signed_data, signed_size, pk_b, 0, 0, &pack), HK_STATUS_UNTRUSTED);
  assert_non_null(strstr(hk_last_error(), "not trusted"));
  o = (hk_pack_open_options_t){.struct_size = sizeof o, .allow_unsigned_code = 1,
                               .trusted_keys = (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])pk_b, .trusted_key_count = 1};
  assert_int_equal(hk_pack_open_memory_ex(signed_data, signed_size, &o, &pack), HK_OK);
  assert_int_equal(hk_pack_signature(pack, NULL), HK_SIGNATURE_VALID);
  hk_pack_destroy(pack);
  /* Metadata only opens it; bad flag values are refused. */
  o = (hk_pack_open_options_t){.struct_size = sizeof o, .metadata_only = 1};
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_OK);
  hk_pack_destroy(pack);
  o = (hk_pack_open_options_t){.struct_size = sizeof o, .allow_unsigned_code = 2};
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_STATUS_INVALID_ARGUMENT);
  o = (hk_pack_open_options_t){.struct_size = sizeof o, .allow_unsigned_code = 1, .reserved1 = 1};
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_STATUS_INVALID_ARGUMENT);
  free(data);
  free(signed_data);
}

/* Key files: hk_public_key_parse reads what hkc_key_generate writes. */
static void test_key_files(void **ts) {
  (void)ts;
  char *dir = hk_test_tmpdir(), path[4200], pub[4300];
  snprintf(path, sizeof path, "%s/k", dir);
  snprintf(pub, sizeof pub, "%s/k.pub", dir);
  assert_int_equal(hkc_key_generate(path, 1), 0);
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600);
  char diag[512];
  hkc_diag_capture(diag, sizeof diag);
  assert_int_equal(hkc_key_generate(path, 1), -1); /* never overwrites */
  hkc_diag_capture(NULL, 0);
  uint8_t seed[HKC_KEY_SEED_BYTES], pk[32], want[32];
  assert_int_equal(hkc_key_load(path, seed), 0);
  public_key(seed, want);
  char *text = NULL;
  size_t n = 0;
  assert_int_equal(hkc_read_file(pub, &text, &n), 0);
  assert_int_equal(hk_public_key_parse(text, n, pk), HK_OK);
  assert_memory_equal(pk, want, sizeof pk);
  assert_int_equal(hk_public_key_parse("hk-ed25519-public 12", 20, pk), HK_STATUS_INVALID_ARGUMENT);
  text[20] = 'x';
  assert_int_equal(hk_public_key_parse(text, n, pk), HK_STATUS_INVALID_ARGUMENT);
  free(text);
  remove(path);
  remove(pub);
  remove(dir);
  free(dir);
}

/* A host code object with an ELF constructor (same kernels): it writes $marker when loaded. */
static void test_constructor_needs_trust(void **ts) {
  (void)ts;
  NEED_CC();
  char *dir = hk_test_tmpdir(), marker[4200], src[9000];
  snprintf(marker, sizeof marker, "%s/constructor-ran", dir);
  snprintf(src, sizeof src,
           "#include <stdio.h>\n"
           "__attribute__((constructor)) static void payload(void) {\n"
           "  FILE *f = fopen(\"%s\", \"w\"); if (f) fclose(f);\n"
           "}\n%s", marker, fx_kernel_source);
  void *code = NULL;
  size_t code_size = 0;
  assert_int_equal(fx_compile_source(src, &code, &code_size), 0);
  size_t size;
  uint8_t *data = write_pack(code, code_size, NULL, &size);
  hk_pack_t *pack = NULL;
  hk_session_t *s = NULL;
  /* Untrusted: refused at open; metadata-only: opens, but no session. */
  assert_int_equal(open_with(data, size, NULL, 0, 0, &pack), HK_STATUS_UNTRUSTED);
  hk_pack_open_options_t meta = {.struct_size = sizeof meta, .metadata_only = 1};
  assert_int_equal(hk_pack_open_memory_ex(data, size, &meta, &pack), HK_OK);
  assert_int_not_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  hk_pack_destroy(pack);
  assert_int_not_equal(access(marker, F_OK), 0);
  /* The control: with the opt-in the code loads and the constructor runs (so the checks
   * above could have failed). */
  assert_int_equal(open_with(data, size, NULL, 0, 1, &pack), HK_OK);
  assert_int_equal(hk_session_create(pack, HK_TEST_OPTIONS(.batch = 2), &s), HK_OK);
  assert_int_equal(access(marker, F_OK), 0);
  hk_session_destroy(s);
  hk_pack_destroy(pack);
  remove(marker);
  remove(dir);
  free(dir);
  free(code);
  free(data);
}

/* The file is read once: truncating it, then writing other bytes over it, after the open
 * changes nothing (a mapping would give SIGBUS, or run the other bytes). */
static void test_file_changes_after_open(void **ts) {
  (void)ts;
  NEED_CC();
  size_t size;
  uint8_t *data = write_pack(g_code, g_code_size, k_seed_a, &size), pk[32];
  public_key(k_seed_a, pk);
  char *dir = hk_test_tmpdir(), path[4200];
  snprintf(path, sizeof path, "%s/p.hkpack", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, size, f), size);
  fclose(f);
  hk_pack_open_options_t o = {.struct_size = sizeof o, .require_signature = 1,
                              .trusted_keys = (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])pk, .trusted_key_count = 1};
  hk_pack_t *pack = NULL;
  assert_int_equal(hk_pack_open_file_ex(path, &o, &pack), HK_OK);
  assert_int_equal(truncate(path, 0), 0); /* in place: the same inode */
  run_fixture(pack);                      /* the code loads now, from the pack's own copy */
  f = fopen(path, "r+b");
  assert_non_null(f);
  memset(data, 0xA5, size);
  assert_int_equal(fwrite(data, 1, size, f), size);
  fclose(f);
  run_fixture(pack);
  assert_string_equal(hk_pack_name(pack), "fixture");
  hk_pack_destroy(pack);
  remove(path);
  remove(dir);
  free(dir);
  free(data);
}

/* HK_WRITE_FUZZ_CORPUS=DIR: the signed fixture as a fuzz seed (tests/fuzz/corpus/pack). */
static void test_write_corpus(void **ts) {
  (void)ts;
  const char *dir = getenv("HK_WRITE_FUZZ_CORPUS");
  if (!dir || !g_code) skip();
  size_t size;
  uint8_t *data = write_pack(g_code, g_code_size, k_seed_a, &size);
  char path[4200];
  snprintf(path, sizeof path, "%s/valid_signed", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, size, f), size);
  fclose(f);
  free(data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_signed_round_trip),      cmocka_unit_test(test_tamper_after_sign),
      cmocka_unit_test(test_weights_signed),
      cmocka_unit_test(test_policy),                 cmocka_unit_test(test_gpu_code_needs_trust),
      cmocka_unit_test(test_key_files),
      cmocka_unit_test(test_constructor_needs_trust), cmocka_unit_test(test_file_changes_after_open),
      cmocka_unit_test(test_write_corpus),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
