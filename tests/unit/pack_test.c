/* SPDX-License-Identifier: Apache-2.0 */
/* The artifact format: writer round trips, determinism, atomic writes, and the
 * verifier's answer to truncated, flipped and patched files (every one a clean
 * status and message, never a crash: these tests run under ASan+UBSan). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "hk/hkrt.h"
#include "pack_fixture.h"
#include "pack_internal.h"
#include "pack_refix.h"
#include "gpu_internal.h"  /* hk_ptx_text_ok */
#include "util_internal.h" /* hk_free */

static const char fake_host_code[] = "\x7f" "ELF pretend shared object: the format tests never load it";

typedef struct {
  fx_t fx;
  uint8_t *pack; /* a valid artifact with both targets */
  size_t size;
  char diag[4096];
} state_t;

static int setup(void **ts) {
  state_t *st = calloc(1, sizeof *st);
  fx_init(&st->fx, fake_host_code, sizeof fake_host_code, 1);
  hkc_diag_capture(st->diag, sizeof st->diag);
  void *data;
  if (hkc_pack_write_memory(&st->fx.in, &data, &st->size) != 0) {
    fprintf(stderr, "%s", st->diag);
    return -1;
  }
  st->pack = data;
  *ts = st;
  return 0;
}

static int teardown(void **ts) {
  state_t *st = *ts;
  hkc_diag_capture(NULL, 0);
  free(st->pack);
  free(st);
  return 0;
}

/* Opens an exact-size copy of buf; returns the status and leaves the message in hk_last_error(). */
static hk_status_t open_copy(const uint8_t *buf, size_t size) {
  uint8_t *copy = fx_copy(buf, size);
  hk_pack_t *pack = NULL;
  hk_status_t s = hk_test_open_memory(copy, size, NULL, &pack);
  if (s == HK_OK) assert_non_null(pack);
  else assert_null(pack);
  hk_pack_destroy(pack);
  free(copy);
  return s;
}

static void expect_open(const uint8_t *buf, size_t size, hk_status_t code, const char *needle, int line) {
  hk_status_t s = open_copy(buf, size);
  if (s != code || (needle && !strstr(hk_last_error(), needle)))
    fail_msg("line %d: expected %s containing \"%s\", got %s: %s", line, hk_status_string(code), needle ? needle : "",
             hk_status_string(s), hk_last_error());
}
#define EXPECT_OPEN(buf, size, code, needle) expect_open((buf), (size), (code), (needle), __LINE__)

static void test_roundtrip_memory(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_memory(st->pack, st->size, NULL, &pack), HK_OK);
  assert_string_equal(hk_pack_name(pack), "fixture");
  assert_int_equal(hk_pack_target_count(pack), 2);
  assert_string_equal(hk_pack_target_name(pack, 0), FX_HOST);
  assert_string_equal(hk_pack_target_name(pack, 1), "sm_90");
  assert_null(hk_pack_target_name(pack, 2));
  assert_int_equal(hk_pack_batch_count(pack), 2);
  assert_int_equal(hk_pack_batch_size(pack, 0), 2);
  assert_int_equal(hk_pack_batch_size(pack, 1), 8);
  assert_int_equal(hk_pack_batch_size(pack, 2), 0);

  const hk_pack_view_t *v = hk_pack_view(pack);
  assert_int_equal(v->target_count, 2);
  assert_int_equal(v->kernel_count, 4);
  assert_int_equal(v->tensor_count, 4);
  assert_int_equal(v->graph_count, 4);
  assert_int_equal(v->node_count, 8);
  assert_int_equal(v->arg_count, 56);
  assert_int_equal(v->dep_count, 4);
  assert_int_equal(v->placement_count, 16);
  assert_int_equal(v->section_count, 14);
  assert_int_equal(v->manifest->spec_hash, 0x1234abcdull);
  assert_int_equal(v->manifest->batch_policy, HK_BATCH_POLICY_REC_PAD);
  assert_int_equal(hk_pack_batch_policy(pack), HK_BATCH_POLICY_PAD);
  /* The second target's kernels and nodes are renumbered globally. */
  assert_int_equal(v->targets[1].kernel_first, 2);
  assert_int_equal(v->graphs[3].batch, 8);
  assert_int_equal(v->nodes[v->graphs[3].node_first + 1].kernel, 3);
  assert_string_equal(hk_pack_string(v, v->kernels[3].name), "hk_test_mul");
  assert_string_equal(hk_pack_string(v, v->kernels[0].params), "c=1.5");
  assert_string_equal(hk_pack_string(v, v->nodes[1].name), "mul");
  assert_int_equal(v->tensors[2].role, HK_ROLE_INTERMEDIATE);
  assert_int_equal(v->tensors[0].dims[1].add, FX_COLS);
  const hk_arg_rec_t *a = &v->args[v->nodes[0].arg_first];
  assert_int_equal(a[3].kind, HK_ARG_I64);
  assert_int_equal(a[3].value, 2);
  assert_int_equal(a[4].value, FX_COLS);
  assert_int_equal(a[6].kind, HK_ARG_NULL);
  float f;
  uint32_t bits = (uint32_t)a[5].value;
  memcpy(&f, &bits, 4);
  assert_true(f == 1.5f);
  assert_int_equal(v->deps[v->nodes[1].dep_first], 0);
  assert_int_equal(v->placements[2], 0);
  assert_true(v->placements[0] == HK_PLACEMENT_NONE);
  /* Strings are deduplicated: both targets' kernels share one "hk_test_addc". */
  assert_int_equal(v->kernels[0].name, v->kernels[2].name);
  char prov[512];
  snprintf(prov, sizeof prov, "%.*s", (int)v->provenance_size, v->provenance);
  assert_non_null(strstr(prov, "hkc=" HKC_VERSION_STRING "\n"));
  assert_non_null(strstr(prov, "toolchain." FX_HOST "=cc: test\n"));

  for (uint32_t t = 0; t < 2; t++) {
    void *code;
    size_t size;
    assert_int_equal(hk_pack_code_load(v, t, NULL, &code, &size), HK_OK);
    assert_int_equal(size, st->fx.targets[t].code_size);
    assert_memory_equal(code, st->fx.targets[t].code, size);
    free(code);
    const hk_section_t *cs = &v->sections[v->targets[t].code_section];
    assert_int_equal(cs->flags & HK_SECTION_FLAG_ZSTD, HK_SECTION_FLAG_ZSTD);
  }
  for (uint32_t i = 0; i < v->section_count; i++) assert_int_equal(v->sections[i].offset % HK_SECTION_ALIGN, 0);
  hk_pack_destroy(pack);
  hk_pack_destroy(NULL);
}

static void test_unaligned_memory_is_copied(void **ts) {
  state_t *st = *ts;
  uint8_t *buf = malloc(st->size + 1);
  memcpy(buf + 1, st->pack, st->size);
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_memory(buf + 1, st->size, NULL, &pack), HK_OK);
  assert_string_equal(hk_pack_target_name(pack, 1), "sm_90");
  hk_pack_destroy(pack);
  free(buf);
}

static void test_deterministic(void **ts) {
  state_t *st = *ts;
  void *again;
  size_t size;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &again, &size), 0);
  assert_int_equal(size, st->size);
  assert_memory_equal(again, st->pack, size);
  free(again);
  /* Default level (19) is deterministic too and still opens. */
  st->fx.in.compression_level = 0;
  void *a, *b;
  size_t sa, sb;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &a, &sa), 0);
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &b, &sb), 0);
  st->fx.in.compression_level = 3;
  assert_int_equal(sa, sb);
  assert_memory_equal(a, b, sa);
  EXPECT_OPEN(a, sa, HK_OK, NULL);
  free(a);
  free(b);
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static void test_write_file(void **ts) {
  state_t *st = *ts;
  char *dir = hk_test_tmpdir();
  char path[4200];
  snprintf(path, sizeof path, "%s/model.hkpack", dir);
  assert_int_equal(hkc_pack_write(&st->fx.in, path), 0);
  assert_int_equal(count_entries(dir), 1); /* no temp file left behind */
  char *data;
  size_t size;
  assert_int_equal(hkc_read_file(path, &data, &size), 0);
  assert_int_equal(size, st->size);
  assert_memory_equal(data, st->pack, size);
  free(data);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal(sb.st_mode & 0777, 0644);

  hk_pack_t *pack;
  assert_int_equal(hk_test_open_file(path, NULL, &pack), HK_OK);
  assert_string_equal(hk_pack_name(pack), "fixture");
  hk_pack_destroy(pack);

  /* A file that does not verify names the path. */
  assert_int_equal(truncate(path, (off_t)(st->size - 10)), 0);
  assert_int_equal(hk_test_open_file(path, NULL, &pack), HK_STATUS_CORRUPT);
  assert_null(pack);
  assert_non_null(strstr(hk_last_error(), path));
  assert_non_null(strstr(hk_last_error(), "truncated"));
  assert_int_equal(truncate(path, 0), 0);
  assert_int_equal(hk_test_open_file(path, NULL, &pack), HK_STATUS_CORRUPT);
  unlink(path);
  assert_int_equal(hk_test_open_file(path, NULL, &pack), HK_STATUS_IO);
  assert_non_null(strstr(hk_last_error(), "No such file"));
  assert_int_equal(hk_test_open_file(dir, NULL, &pack), HK_STATUS_IO);
  rmdir(dir);
  free(dir);
}

static void test_atomic_write(void **ts) {
  state_t *st = *ts;
  char *dir = hk_test_tmpdir();
  char path[4200];
  /* Destination directory does not exist: fails, creates nothing. */
  snprintf(path, sizeof path, "%s/missing/model.hkpack", dir);
  assert_int_equal(hkc_pack_write(&st->fx.in, path), -1);
  assert_non_null(strstr(st->diag, "cannot write"));
  assert_int_equal(count_entries(dir), 0);

  /* An existing artifact survives a failed write (invalid input). */
  snprintf(path, sizeof path, "%s/model.hkpack", dir);
  FILE *f = fopen(path, "w");
  fputs("OLD", f);
  fclose(f);
  st->fx.launches[1][1].kernel = 99;
  assert_int_equal(hkc_pack_write(&st->fx.in, path), -1);
  st->fx.launches[1][1].kernel = 1;
  char *data;
  size_t size;
  assert_int_equal(hkc_read_file(path, &data, &size), 0);
  assert_string_equal(data, "OLD");
  free(data);
  assert_int_equal(count_entries(dir), 1);

  /* The destination is a directory: refused before anything is written (util.h, "files"). */
  char sub[4100];
  snprintf(sub, sizeof sub, "%s/adir", dir);
  assert_int_equal(mkdir(sub, 0755), 0);
  snprintf(path, sizeof path, "%.4100s/keep", sub);
  f = fopen(path, "w");
  fclose(f);
  assert_int_equal(hkc_pack_write(&st->fx.in, sub), -1);
  assert_non_null(strstr(st->diag, "is not a regular file (a directory): refusing to replace it"));
  assert_int_equal(count_entries(dir), 2);
  assert_int_equal(count_entries(sub), 1);
  unlink(path);
  rmdir(sub);
  snprintf(path, sizeof path, "%s/model.hkpack", dir);
  /* And a good write replaces the old file. */
  assert_int_equal(hkc_pack_write(&st->fx.in, path), 0);
  EXPECT_OPEN(st->pack, st->size, HK_OK, NULL);
  assert_int_equal(hkc_read_file(path, &data, &size), 0);
  assert_int_equal(size, st->size);
  free(data);
  unlink(path);
  rmdir(dir);
  free(dir);
}

static void test_writer_rejects_bad_input(void **ts) {
  state_t *st = *ts;
  void *data;
  size_t size;
  char long_name[300];
  memset(long_name, 'n', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  st->fx.launches[0][1].node_name = long_name;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), -1);
  assert_null(data);
  assert_non_null(strstr(st->diag, "longer than 255"));
  st->fx.launches[0][1].node_name = "mul";

  uint32_t dep = 1;
  st->fx.launches[0][1].deps = &dep; /* itself */
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), -1);
  assert_non_null(strstr(st->diag, "not an earlier launch"));
  st->fx.launches[0][1].deps = &st->fx.dep0;

  st->fx.launches[0][0].args[0].i = 4; /* tensor index out of range */
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), -1);
  st->fx.launches[0][0].args[0].i = 0;

  st->fx.placements[0][2] = 100000; /* does not fit the workspace: caught by the self-verify */
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), -1);
  assert_non_null(strstr(st->diag, "does not verify"));
  st->fx.placements[0][2] = 0;

  st->fx.graphs[1].batch = 9;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), -1);
  st->fx.graphs[1].batch = 8;

  /* the format's 2^48 bound on a tensor's bytes and a workspace (w is [100] f32) */
  st->fx.tensors[1].dims[0].add = INT64_C(1) << 46;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), -1);
  assert_non_null(strstr(st->diag, "tensor w is 2^48 bytes or more at batch 2"));
  st->fx.tensors[1].dims[0].add = FX_COLS;
  st->fx.graphs[1].workspace_bytes = UINT64_C(1) << 48;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), -1);
  assert_non_null(strstr(st->diag, "batch 8 needs a workspace of 281474976710656 bytes, 2^48 or more"));
  st->fx.graphs[1].workspace_bytes = (uint64_t)((8 * FX_COLS * 4 + 255) / 256 * 256);
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), 0);
  free(data);
}

static void test_truncation(void **ts) {
  state_t *st = *ts;
  for (size_t len = 0; len < st->size; len = len < 256 ? len + 1 : len + 37) {
    hk_status_t s = open_copy(st->pack, len);
    assert_int_equal(s, HK_STATUS_CORRUPT);
    assert_true(strlen(hk_last_error()) > 0);
    if (len >= 8) assert_non_null(strstr(hk_last_error(), "truncated"));
  }
  EXPECT_OPEN(st->pack, st->size, HK_OK, NULL);
  /* Extra bytes after the declared end are refused too. */
  uint8_t *longer = calloc(1, st->size + 8);
  memcpy(longer, st->pack, st->size);
  EXPECT_OPEN(longer, st->size + 8, HK_STATUS_CORRUPT, "trailing bytes");
  free(longer);
}

/* Every single-byte change anywhere in the file is detected (checksums, zero padding). */
static void test_flip_every_byte(void **ts) {
  state_t *st = *ts;
  uint8_t *buf = fx_copy(st->pack, st->size);
  for (size_t i = 0; i < st->size; i++) {
    buf[i] ^= 0x20;
    hk_status_t s = open_copy(buf, st->size);
    if (s != HK_STATUS_CORRUPT && s != HK_STATUS_UNSUPPORTED_VERSION)
      fail_msg("flipping byte %zu: %s (%s)", i, hk_status_string(s), hk_last_error());
    assert_true(strlen(hk_last_error()) > 0);
    buf[i] ^= 0x20;
  }
  free(buf);
}

static void test_flip_messages(void **ts) {
  state_t *st = *ts;
  uint8_t *buf = fx_copy(st->pack, st->size);
  buf[1] = 'h';
  EXPECT_OPEN(buf, st->size, HK_STATUS_CORRUPT, "bad magic");
  buf[1] = 'H';
  buf[40] ^= 1; /* file_size */
  EXPECT_OPEN(buf, st->size, HK_STATUS_CORRUPT, "header checksum");
  buf[40] ^= 1;
  buf[64 + 3 * 48 + 8] ^= 1; /* an entry of the section table */
  EXPECT_OPEN(buf, st->size, HK_STATUS_CORRUPT, "section table checksum");
  buf[64 + 3 * 48 + 8] ^= 1;
  static const char *const kinds[] = {"STRINGS", "MANIFEST", "TARGETS", "KERNELS", "TENSORS", "GRAPHS", "NODES",
                                      "ARGS", "DEPS", "PLACEMENTS", "PROVENANCE", "CODE", "CODE"};
  for (uint32_t i = 0; i < 13; i++) {
    hk_section_t *s = fx_section(buf, i);
    buf[s->offset + s->size / 2] ^= 0x80;
    char needle[64];
    snprintf(needle, sizeof needle, "section %u (%s): checksum mismatch", i, kinds[i]);
    EXPECT_OPEN(buf, st->size, HK_STATUS_CORRUPT, needle);
    buf[s->offset + s->size / 2] ^= 0x80;
  }
  /* A CR LF -> LF conversion is recognized in the message. */
  uint8_t *lf = malloc(st->size - 1);
  memcpy(lf, st->pack, 4);
  memcpy(lf + 4, st->pack + 5, st->size - 5);
  EXPECT_OPEN(lf, st->size - 1, HK_STATUS_CORRUPT, "line-ending conversion");
  free(lf);
  free(buf);
}

/* ---- patched records: checksums fixed up so the deeper checks are reached ---------- */
typedef void (*patch_fn)(uint8_t *buf, size_t size);

static void expect_patched_in(const uint8_t *pack, size_t size, patch_fn patch, hk_status_t code, const char *needle,
                              int line) {
  uint8_t *buf = fx_copy(pack, size);
  patch(buf, size);
  hk_test_refix(buf, size);
  hk_status_t s = open_copy(buf, size);
  if (s != code || (needle && !strstr(hk_last_error(), needle)))
    fail_msg("line %d: expected %s containing \"%s\", got %s: %s", line, hk_status_string(code), needle ? needle : "",
             hk_status_string(s), hk_last_error());
  free(buf);
}
#define PATCHED(fn, code, needle) expect_patched_in(st->pack, st->size, fn, code, needle, __LINE__)

static hk_pack_header_t *hdr(uint8_t *b) { return (hk_pack_header_t *)b; }
static hk_manifest_t *man(uint8_t *b) { return fx_payload(b, HK_SECTION_MANIFEST); }
static hk_target_rec_t *tgt(uint8_t *b) { return fx_payload(b, HK_SECTION_TARGETS); }
static hk_kernel_rec_t *krn(uint8_t *b) { return fx_payload(b, HK_SECTION_KERNELS); }
static hk_tensor_rec_t *tns(uint8_t *b) { return fx_payload(b, HK_SECTION_TENSORS); }
static hk_graph_rec_t *grf(uint8_t *b) { return fx_payload(b, HK_SECTION_GRAPHS); }
static hk_node_rec_t *nod(uint8_t *b) { return fx_payload(b, HK_SECTION_NODES); }
static hk_arg_rec_t *arg(uint8_t *b) { return fx_payload(b, HK_SECTION_ARGS); }
static uint32_t *dep(uint8_t *b) { return fx_payload(b, HK_SECTION_DEPS); }
static uint64_t *plc(uint8_t *b) { return fx_payload(b, HK_SECTION_PLACEMENTS); }
static hk_section_t *sec(uint8_t *b, uint32_t kind) { return fx_section(b, fx_find_section(b, kind)); }

static void p_major(uint8_t *b, size_t n) { hdr(b)->version_major = 2; }
static void p_minor(uint8_t *b, size_t n) { hdr(b)->version_minor = 7; }
static void p_endian(uint8_t *b, size_t n) { hdr(b)->endian_tag = __builtin_bswap32(HK_PACK_ENDIAN_TAG); }
static void p_header_size(uint8_t *b, size_t n) { hdr(b)->header_size = 72; }
static void p_file_size(uint8_t *b, size_t n) { hdr(b)->file_size += 64; }
static void p_section_count0(uint8_t *b, size_t n) { hdr(b)->section_count = 0; }
static void p_section_count_big(uint8_t *b, size_t n) { hdr(b)->section_count = 100000; }
static void p_table_offset(uint8_t *b, size_t n) { hdr(b)->section_table_offset = n - 8; }
static void p_off_past_end(uint8_t *b, size_t n) { sec(b, HK_SECTION_DEPS)->offset = (n + 64) & ~63ull; }
static void p_off_huge(uint8_t *b, size_t n) { sec(b, HK_SECTION_DEPS)->size = UINT64_MAX - 10; }
static void p_overlap(uint8_t *b, size_t n) { sec(b, HK_SECTION_DEPS)->offset = sec(b, HK_SECTION_ARGS)->offset; }
static void p_unaligned(uint8_t *b, size_t n) { sec(b, HK_SECTION_DEPS)->offset += 8; }
static void p_over_table(uint8_t *b, size_t n) { fx_section(b, 0)->offset = 64; }
static void p_unknown_kind(uint8_t *b, size_t n) { sec(b, HK_SECTION_PROVENANCE)->kind = 99; }
static void p_unknown_optional(uint8_t *b, size_t n) {
  hk_section_t *s = sec(b, HK_SECTION_PROVENANCE);
  s->kind = 99;
  s->flags = HK_SECTION_FLAG_OPTIONAL;
}
static void p_duplicate(uint8_t *b, size_t n) { sec(b, HK_SECTION_PROVENANCE)->kind = HK_SECTION_STRINGS; }
static void p_bad_flags(uint8_t *b, size_t n) { sec(b, HK_SECTION_NODES)->flags = 0x80; }
static void p_zstd_table(uint8_t *b, size_t n) { sec(b, HK_SECTION_NODES)->flags = HK_SECTION_FLAG_ZSTD; }
static void p_record_size(uint8_t *b, size_t n) {
  sec(b, HK_SECTION_TARGETS)->size -= 1;
  sec(b, HK_SECTION_TARGETS)->raw_size -= 1;
}
static void p_manifest_targets(uint8_t *b, size_t n) { man(b)->target_count = 3; }
static void p_manifest_batches(uint8_t *b, size_t n) { man(b)->batch_count = 17; }
static void p_manifest_order(uint8_t *b, size_t n) { man(b)->batch_sizes[1] = 1; }
static void p_manifest_dtype(uint8_t *b, size_t n) { man(b)->dtype = 3; }
static void p_manifest_policy(uint8_t *b, size_t n) { man(b)->batch_policy = 2; }
static void p_string_ref(uint8_t *b, size_t n) { man(b)->name = 1u << 30; }
static void p_unterminated(uint8_t *b, size_t n) {
  hk_section_t *s = sec(b, HK_SECTION_STRINGS);
  b[s->offset + s->size - 1] = 'x'; /* the last string loses its NUL */
}
static void p_target_kind(uint8_t *b, size_t n) { tgt(b)[1].kind = 7; }
static void p_target_code(uint8_t *b, size_t n) { tgt(b)[0].code_section = 0; }
static void p_target_code_range(uint8_t *b, size_t n) { tgt(b)[0].code_section = 5000; }
static void p_target_dup(uint8_t *b, size_t n) { tgt(b)[1].name = tgt(b)[0].name; }
static void p_target_kernels(uint8_t *b, size_t n) { tgt(b)[1].kernel_count = 0xfffffff0u; }
static void p_target_graphs(uint8_t *b, size_t n) { tgt(b)[1].graph_count = 1; }
static void p_kernel_op(uint8_t *b, size_t n) { krn(b)[1].op = 99; }
static void p_kernel_target(uint8_t *b, size_t n) { krn(b)[1].target = 1; }
static void p_tensor_rank0(uint8_t *b, size_t n) { tns(b)[0].rank = 0; }
static void p_tensor_rank7(uint8_t *b, size_t n) { tns(b)[0].rank = 7; }
static void p_tensor_dtype(uint8_t *b, size_t n) { tns(b)[1].dtype = 6; }
static void p_tensor_input_i8(uint8_t *b, size_t n) { tns(b)[0].dtype = HK_DTYPE_I8; }
static void p_tensor_role(uint8_t *b, size_t n) { tns(b)[1].role = 5; }
/* format 1.5: a STATE tensor (a KV cache) never depends on batch, and is never i32 (nor is a param) */
static void p_tensor_state_batched(uint8_t *b, size_t n) { tns(b)[0].role = HK_ROLE_STATE; }
static void p_tensor_state_i32(uint8_t *b, size_t n) { tns(b)[1].role = HK_ROLE_STATE, tns(b)[1].dtype = HK_DTYPE_I32; }
static void p_tensor_param_i32(uint8_t *b, size_t n) { tns(b)[1].role = HK_ROLE_PARAM, tns(b)[1].dtype = HK_DTYPE_I32; }
static void p_tensor_dim(uint8_t *b, size_t n) { tns(b)[0].dims[0].mul = -1; }
static void p_tensor_overflow(uint8_t *b, size_t n) { tns(b)[0].dims[1].add = INT64_MAX / 2; }
/* the bound FORMAT.md states: a tensor's bytes and a workspace below 2^48 (w is [100] f32) */
static void p_tensor_2e48(uint8_t *b, size_t n) { tns(b)[1].dims[0].add = INT64_C(1) << 46; }
static void p_tensor_below_2e48(uint8_t *b, size_t n) { tns(b)[1].dims[0].add = (INT64_C(1) << 46) - 1; }
static void p_workspace_2e48(uint8_t *b, size_t n) { grf(b)[1].workspace_bytes = UINT64_C(1) << 48; }
static void p_workspace_below_2e48(uint8_t *b, size_t n) { grf(b)[1].workspace_bytes = (UINT64_C(1) << 48) - 1; }
static void p_graph_batch(uint8_t *b, size_t n) { grf(b)[1].batch = 9; }
static void p_graph_nodes(uint8_t *b, size_t n) { grf(b)[0].node_count = 100; }
static void p_graph_placements(uint8_t *b, size_t n) { grf(b)[3].placement_first = 14; }
static void p_node_kernel(uint8_t *b, size_t n) { nod(b)[0].kernel = 999; }
static void p_node_kernel_other(uint8_t *b, size_t n) { nod(b)[0].kernel = 2; }
static void p_node_grid(uint8_t *b, size_t n) { nod(b)[0].grid[1] = 2; }
static void p_node_grid0(uint8_t *b, size_t n) { nod(b)[0].grid[0] = 0; }
static void p_node_args(uint8_t *b, size_t n) { nod(b)[0].arg_count = 65; }
static void p_node_arg_range(uint8_t *b, size_t n) { /* 6 arguments from 2 before the end of ARGS */
  nod(b)[7].arg_first = (uint32_t)(sec(b, HK_SECTION_ARGS)->size / sizeof(hk_arg_rec_t)) - 2;
}
static void p_node_dep_range(uint8_t *b, size_t n) { nod(b)[1].dep_first = 0xffffffffu; }
static void p_node_name(uint8_t *b, size_t n) { nod(b)[1].name = 0xfffffff0u; }
static void p_arg_kind(uint8_t *b, size_t n) { arg(b)[1].kind = 9; }
static void p_arg_tensor(uint8_t *b, size_t n) { arg(b)[1].value = 77; }
static void p_dep_self(uint8_t *b, size_t n) { dep(b)[0] = 1; }
static void p_placement_fit(uint8_t *b, size_t n) { plc(b)[2] = 256; }
static void p_placement_align(uint8_t *b, size_t n) { plc(b)[2] = 8; }
static void p_placement_app(uint8_t *b, size_t n) { plc(b)[0] = 0; }
static void p_placement_none(uint8_t *b, size_t n) { plc(b)[2] = HK_PLACEMENT_NONE; }
static void p_code_raw(uint8_t *b, size_t n) { sec(b, HK_SECTION_CODE)->raw_size += 1; }
static void p_code_limit(uint8_t *b, size_t n) { sec(b, HK_SECTION_CODE)->raw_size = HK_MAX_CODE_BYTES + 1; }
static void p_code_target(uint8_t *b, size_t n) { sec(b, HK_SECTION_CODE)->target = 1; }
static void p_code_frame(uint8_t *b, size_t n) { b[sec(b, HK_SECTION_CODE)->offset] ^= 0xff; }
static void p_code_raw_flag(uint8_t *b, size_t n) { sec(b, HK_SECTION_CODE)->flags = 0; }

static uint8_t *write_with_plan(state_t *st, size_t *out_size);

/* ---- verification: every record checked once, kernel ranges bounded by their own target, names,
 * frame checksums, limits ----------------------------------------------------------------- */
/* Offset in STRINGS of the string `text` (the fixture's strings are distinct). */
static uint32_t str_ref(uint8_t *b, const char *text) {
  const hk_section_t *s = sec(b, HK_SECTION_STRINGS);
  const char *p = (const char *)b + s->offset;
  for (uint64_t at = 0; at < s->size; at += strlen(p + at) + 1)
    if (strcmp(p + at, text) == 0) return (uint32_t)at;
  fail_msg("string %s not in the fixture", text);
  return 0;
}
/* Rewrites the 7-byte string "bcast=w" (kernel 1's params) in place; returns its ref. */
static uint32_t put_str7(uint8_t *b, const char text[8]) {
  uint32_t ref = str_ref(b, "bcast=w");
  memcpy(b + sec(b, HK_SECTION_STRINGS)->offset + ref, text, 7);
  return ref;
}
/* The last graph's last node, referenced by no graph, with a string ref outside STRINGS
 * (verify_plan printed its name: a segfault in hk_pack_open_*). */
static void p_node_unreferenced(uint8_t *b, size_t n) {
  grf(b)[3].node_count = 1;
  nod(b)[7].name = 0xfffffff0u;
}
/* sm_90's kernel range reaches over the host's kernels (each record still lies in its owner's
 * range): inspect --disasm and the CUDA loader used host code ranges against sm_90's code. */
static void p_kernel_range_foreign(uint8_t *b, size_t n) {
  tgt(b)[1].kernel_first = 0;
  tgt(b)[1].kernel_count = 4;
}
/* Two nodes share one dependency list: ranges must tile DEPS (20000 nodes x 4096 shared deps
 * made inspect verify for 7 s and print 2.65 GB from a small file). */
static void p_dep_shared(uint8_t *b, size_t n) { nod(b)[3].dep_first = nod(b)[1].dep_first; }
static void p_args_shared(uint8_t *b, size_t n) { nod(b)[2].arg_first = 0; }
static void p_tensor_path(uint8_t *b, size_t n) { tns(b)[3].name = put_str7(b, "../y_ab"); }
static void p_tensor_dot(uint8_t *b, size_t n) { tns(b)[3].name = put_str7(b, ".hidden"); }
static void p_params_escape(uint8_t *b, size_t n) { (void)put_str7(b, "\x1b[31mxy"); }
static void p_node_slash(uint8_t *b, size_t n) { nod(b)[0].name = put_str7(b, "a/b c=1"); }
/* A zstd frame without its content checksum (FHD bit 2 cleared, the 4 checksum bytes cut). */
static void p_frame_no_checksum(uint8_t *b, size_t n) {
  hk_section_t *s = sec(b, HK_SECTION_CODE);
  b[s->offset + 4] &= (uint8_t)~0x04u;
  s->size -= 4;
  memset(b + s->offset + s->size, 0, 4);
}

static void test_verify_records(void **ts) {
  state_t *st = *ts;
  PATCHED(p_node_unreferenced, HK_STATUS_CORRUPT, "graphs reference 7 of 8 nodes");
  PATCHED(p_kernel_range_foreign, HK_STATUS_CORRUPT, "kernel 0 in its kernel range belongs to target 0");
  PATCHED(p_dep_shared, HK_STATUS_CORRUPT, "node 3: args at 22 and deps at 0, expected 22 and 1");
  PATCHED(p_args_shared, HK_STATUS_CORRUPT, "node 2: args at 0");
  PATCHED(p_tensor_path, HK_STATUS_CORRUPT, "tensor 3: name byte 2 is 0x2f");
  PATCHED(p_tensor_dot, HK_STATUS_CORRUPT, "starts with '.'");
  PATCHED(p_params_escape, HK_STATUS_CORRUPT, "kernel 1: name byte 0 is 0x1b");
  PATCHED(p_node_slash, HK_STATUS_CORRUPT, "node 0: name byte 1 is 0x2f");
  PATCHED(p_frame_no_checksum, HK_STATUS_CORRUPT, "no content checksum");
  /* The same unreferenced node with a PLAN section: verify_plan no longer reads it unchecked. */
  size_t size;
  uint8_t *plan = write_with_plan(st, &size);
  expect_patched_in(plan, size, p_node_unreferenced, HK_STATUS_CORRUPT, "graphs reference 7 of 8 nodes", __LINE__);
  free(plan);
  /* Error messages never carry control bytes (the path is quoted in them). */
  hk_pack_t *pack;
  assert_int_equal(hk_pack_open_file("/nonexistent/\x1b[2J\n", NULL, &pack), HK_STATUS_IO);
  for (const char *p = hk_last_error(); *p; p++) assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
}

/* ---- names from the file in messages, and unique tensor names ---------------------------- */
/* put_str7 for a string only a tensor will name: the kernels' "bcast=w" params first moved to
 * "c=1.5" (kernels are verified before tensors, and would fail first). */
static uint32_t put_tensor_str7(uint8_t *b, const char text[8]) {
  const uint32_t ref = str_ref(b, "bcast=w"), other = str_ref(b, "c=1.5");
  const uint64_t n_kernels = sec(b, HK_SECTION_KERNELS)->raw_size / sizeof(hk_kernel_rec_t);
  for (uint64_t k = 0; k < n_kernels; k++)
    if (krn(b)[k].params == ref) krn(b)[k].params = other;
  return put_str7(b, text);
}
static void p_tensor_escape(uint8_t *b, size_t n) { tns(b)[3].name = put_tensor_str7(b, "\x1b[2Jy_a"); }
static void p_tensor_dup_ref(uint8_t *b, size_t n) { tns(b)[3].name = tns(b)[2].name; }
/* two refs, one text: the string "y" written a second time in STRINGS */
static void p_tensor_dup_text(uint8_t *b, size_t n) { tns(b)[2].name = put_tensor_str7(b, "y\0\0\0\0\0\0"); }

/* The patched pack in a file, through the real `hkc inspect` and `hkc run`: exit 1 (not a
 * crash) with a message holding needle, and no control byte in anything printed. */
static void expect_cli_refuses(state_t *st, patch_fn patch, const char *needle) {
  uint8_t *buf = fx_copy(st->pack, st->size);
  patch(buf, st->size);
  hk_test_refix(buf, st->size);
  char *dir = hk_test_tmpdir(), path[4200], cmd[8500], out[8192];
  snprintf(path, sizeof path, "%s/patched.hkpack", dir);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(buf, 1, st->size, f), st->size);
  fclose(f);
  const char *hkc = getenv("HKC_BIN");
  if (!hkc) fail_msg("HKC_BIN is not set (ctest sets it)");
  for (int run = 0; run < 2; run++) {
    snprintf(cmd, sizeof cmd, "'%s' %s '%s'", hkc, run ? "run --allow-unsigned-native" : "inspect", path);
    const int rc = hk_test_run(cmd, out, sizeof out);
    if (rc != 1 || !strstr(out, needle)) fail_msg("%s: exit %d, expected 1 and \"%s\": %s", cmd, rc, needle, out);
    for (const unsigned char *p = (const unsigned char *)out; *p; p++)
      if ((*p < 0x20 && *p != '\n') || *p == 0x7f) fail_msg("%s printed control byte 0x%02x: %s", cmd, *p, out);
  }
  unlink(path);
  rmdir(dir);
  free(dir);
  free(buf);
}

static void test_names_from_the_file(void **ts) {
  state_t *st = *ts;
  /* an ESC sequence in a tensor name: refused, the byte shown as hex, never raw */
  PATCHED(p_tensor_escape, HK_STATUS_CORRUPT, "tensor 3: name byte 0 is 0x1b");
  for (const char *p = hk_last_error(); *p; p++) assert_true((unsigned char)*p >= 0x20 && *p != 0x7f);
  expect_cli_refuses(st, p_tensor_escape, "tensor 3: name byte 0 is 0x1b");
  /* two tensors of one name, by one string ref or by two */
  PATCHED(p_tensor_dup_ref, HK_STATUS_CORRUPT, "tensors 2 and 3 have the same name \"t\" (tensor names are unique)");
  PATCHED(p_tensor_dup_text, HK_STATUS_CORRUPT, "tensors 2 and 3 have the same name \"y\"");
  expect_cli_refuses(st, p_tensor_dup_text, "tensors 2 and 3 have the same name \"y\"");
  /* every message escapes what it quotes: a path with an ESC sequence and a newline */
  hk_pack_t *pack;
  assert_int_equal(hk_pack_open_file("/nonexistent/\x1b[2J\nx\x7f", NULL, &pack), HK_STATUS_IO);
  /* (debug builds end the message with the failing line, which may cut the strerror text) */
  if (!strstr(hk_last_error(), "cannot open /nonexistent/\\x1b[2J\\x0ax\\x7f: No such file"))
    fail_msg("message not escaped: %s", hk_last_error());
}

/* Limits: node and dep counts from the open options; a code object's decompressed size in
 * proportion to its stored size by default (a 37 KB pack decompressed 1 GiB before failing). */
static void test_verify_limits(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack;
  /* the fixture has a host target: its own unsigned code (hkrt.h, trust) */
  hk_pack_open_options_t o = {.struct_size = sizeof o, .allow_unsigned_native_code = 1, .max_nodes = 4};
  assert_int_equal(hk_pack_open_memory_ex(st->pack, st->size, &o, &pack), HK_STATUS_CORRUPT);
  assert_non_null(strstr(hk_last_error(), "NODES: 8 records exceed the limit 4"));
  o = (hk_pack_open_options_t){.struct_size = sizeof o, .allow_unsigned_native_code = 1, .max_deps = 3};
  assert_int_equal(hk_pack_open_memory_ex(st->pack, st->size, &o, &pack), HK_STATUS_CORRUPT);
  assert_non_null(strstr(hk_last_error(), "DEPS: 4 records exceed the limit 3"));
  o.max_deps = 4;
  assert_int_equal(hk_pack_open_memory_ex(st->pack, st->size, &o, &pack), HK_OK);
  hk_pack_destroy(pack);
  o.struct_size = sizeof o + 8;
  assert_int_equal(hk_pack_open_memory_ex(st->pack, st->size, &o, &pack), HK_STATUS_INVALID_ARGUMENT);
  o = (hk_pack_open_options_t){.struct_size = sizeof o, .allow_unsigned_native_code = 1, .reserved0 = 1};
  assert_int_equal(hk_pack_open_memory_ex(st->pack, st->size, &o, &pack), HK_STATUS_INVALID_ARGUMENT);

  /* 4 MiB of zeros compress to a few hundred bytes: over 128 x stored + 1 MiB. */
  size_t big = 4u << 20, size;
  uint8_t *zeros = calloc(1, big);
  memcpy(zeros, "\x7f" "ELF", 4);
  st->fx.targets[0].code = zeros;
  st->fx.targets[0].code_size = big;
  for (int k = 0; k < 2; k++) st->fx.kernels[k].code_size = big;
  void *data;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), 0);
  assert_true(size < 64 * 1024);
  assert_int_equal(hk_pack_open_memory(data, size, NULL, &pack), HK_STATUS_CORRUPT);
  assert_non_null(strstr(hk_last_error(), "exceeds the limit"));
  o = (hk_pack_open_options_t){.struct_size = sizeof o, .allow_unsigned_native_code = 1, .max_code_bytes = 8u << 20};
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_OK);
  hk_pack_destroy(pack);
  o.max_code_bytes = 1u << 20;
  assert_int_equal(hk_pack_open_memory_ex(data, size, &o, &pack), HK_STATUS_CORRUPT);
  free(data);
  free(zeros);
}

/* hkc inspect: provenance (free text) is printed with its control bytes escaped, and the
 * disassembly path refuses a code object that is not one for its target before a
 * disassembler reads it (the fixture's sm_90 code is plain text). */
static void test_verify_inspect(void **ts) {
  state_t *st = *ts;
  st->fx.in.provenance = "hkc=test\nnote=\x1b]0;pwned\x07\x1b[2J\n";
  char *dir = hk_test_tmpdir(), path[4200];
  snprintf(path, sizeof path, "%s/esc.hkpack", dir);
  assert_int_equal(hkc_pack_write(&st->fx.in, path), 0);
  char *text = NULL;
  size_t text_size = 0;
  FILE *out = open_memstream(&text, &text_size);
  assert_int_equal(hkc_inspect(path, out), 0);
  fclose(out);
  assert_null(memchr(text, 0x1b, text_size));
  assert_null(memchr(text, 0x07, text_size));
  if (!strstr(text, "  note=\\x1b]0;pwned\\x07\\x1b[2J\n")) fail_msg("provenance not escaped:\n%s", text);
  /* the fixture's host code is not an ELF object: its variants are not read, and it says so */
  if (!strstr(text, "; isa unknown (the code object is not a valid shared object)"))
    fail_msg("host target's isa not reported as unknown:\n%s", text);
  free(text);
  text = NULL;
  out = open_memstream(&text, &text_size);
  assert_int_equal(hkc_inspect_disasm(path, "hk_test_addc", "sm_90", out), -1);
  fclose(out);
  free(text);
  unlink(path);
  rmdir(dir);
  free(dir);
}

static void test_patched_records(void **ts) {
  state_t *st = *ts;
  {
    char msg[80];
    snprintf(msg, sizeof msg, "artifact format 2.x (2.%d); this loader reads 1.x", HK_PACK_VERSION_MINOR);
    PATCHED(p_major, HK_STATUS_UNSUPPORTED_VERSION, msg);
  }
  PATCHED(p_minor, HK_OK, NULL); /* newer minor, no unknown sections: readable */
  PATCHED(p_endian, HK_STATUS_CORRUPT, "byte order");
  PATCHED(p_header_size, HK_STATUS_CORRUPT, "header_size");
  PATCHED(p_file_size, HK_STATUS_CORRUPT, "truncated: header says");
  PATCHED(p_section_count0, HK_STATUS_CORRUPT, "section_count 0");
  PATCHED(p_section_count_big, HK_STATUS_CORRUPT, "section_count 100000");
  PATCHED(p_table_offset, HK_STATUS_CORRUPT, "section table");
  PATCHED(p_off_past_end, HK_STATUS_CORRUPT, "outside the file");
  PATCHED(p_off_huge, HK_STATUS_CORRUPT, "outside the file");
  PATCHED(p_overlap, HK_STATUS_CORRUPT, "overlaps");
  PATCHED(p_unaligned, HK_STATUS_CORRUPT, "not a multiple of 64");
  PATCHED(p_over_table, HK_STATUS_CORRUPT, "overlaps");
  PATCHED(p_unknown_kind, HK_STATUS_CORRUPT, "unknown kind 99 and is not flagged optional");
  PATCHED(p_unknown_optional, HK_STATUS_CORRUPT, "required section PROVENANCE is missing");
  PATCHED(p_duplicate, HK_STATUS_CORRUPT, "STRINGS appears more than once");
  PATCHED(p_bad_flags, HK_STATUS_CORRUPT, "unknown flags");
  PATCHED(p_zstd_table, HK_STATUS_CORRUPT, "stored uncompressed");
  PATCHED(p_record_size, HK_STATUS_CORRUPT, "not a multiple of the record size");
  PATCHED(p_manifest_targets, HK_STATUS_CORRUPT, "target_count 3");
  PATCHED(p_manifest_batches, HK_STATUS_CORRUPT, "batch_count 17");
  PATCHED(p_manifest_order, HK_STATUS_CORRUPT, "ascending");
  PATCHED(p_manifest_dtype, HK_STATUS_CORRUPT, "dtype 3");
  PATCHED(p_manifest_policy, HK_STATUS_CORRUPT, "unknown batch policy 2");
  PATCHED(p_string_ref, HK_STATUS_CORRUPT, "outside STRINGS");
  PATCHED(p_unterminated, HK_STATUS_CORRUPT, "not NUL-terminated");
  PATCHED(p_target_kind, HK_STATUS_CORRUPT, "unknown kind 7");
  PATCHED(p_target_code, HK_STATUS_CORRUPT, "code_section 0");
  PATCHED(p_target_code_range, HK_STATUS_CORRUPT, "code_section 5000");
  PATCHED(p_target_dup, HK_STATUS_CORRUPT, "duplicate name");
  PATCHED(p_target_kernels, HK_STATUS_CORRUPT, "outside KERNELS");
  PATCHED(p_target_graphs, HK_STATUS_CORRUPT, "1 graphs");
  PATCHED(p_kernel_op, HK_STATUS_CORRUPT, "unknown op 99");
  PATCHED(p_kernel_target, HK_STATUS_CORRUPT, "belongs to target 1");
  PATCHED(p_tensor_rank0, HK_STATUS_CORRUPT, "rank 0");
  PATCHED(p_tensor_rank7, HK_STATUS_CORRUPT, "rank 7");
  PATCHED(p_tensor_dtype, HK_STATUS_CORRUPT, "unknown dtype 6");
  PATCHED(p_tensor_input_i8, HK_STATUS_CORRUPT, "tensor 0 (x): an 8-bit (int8) tensor that is not a param");
  PATCHED(p_tensor_role, HK_STATUS_CORRUPT, "unknown role 5");
  PATCHED(p_tensor_state_batched, HK_STATUS_CORRUPT, "a state tensor whose shape depends on batch");
  PATCHED(p_tensor_state_i32, HK_STATUS_CORRUPT, "an i32 state tensor");
  PATCHED(p_tensor_param_i32, HK_STATUS_CORRUPT, "an i32 param");
  PATCHED(p_tensor_dim, HK_STATUS_CORRUPT, "dimension is <= 0");
  PATCHED(p_tensor_overflow, HK_STATUS_CORRUPT, "overflows");
  PATCHED(p_tensor_2e48, HK_STATUS_CORRUPT, "tensor 1 (w): a dimension is <= 0, or its size overflows or is 2^48 "
                                            "bytes or more, at batch 2");
  PATCHED(p_tensor_below_2e48, HK_OK, NULL);
  PATCHED(p_workspace_2e48, HK_STATUS_CORRUPT, "graph 1: workspace_bytes 281474976710656 is 2^48 or more");
  PATCHED(p_workspace_below_2e48, HK_OK, NULL);
  PATCHED(p_graph_batch, HK_STATUS_CORRUPT, "not its graph for batch 8");
  PATCHED(p_graph_nodes, HK_STATUS_CORRUPT, "outside NODES");
  PATCHED(p_graph_placements, HK_STATUS_CORRUPT, "outside PLACEMENTS");
  PATCHED(p_node_kernel, HK_STATUS_CORRUPT, "kernel 999");
  PATCHED(p_node_kernel_other, HK_STATUS_CORRUPT, "not a kernel of the graph's target");
  PATCHED(p_node_grid, HK_STATUS_CORRUPT, "grid.y");
  PATCHED(p_node_grid0, HK_STATUS_CORRUPT, ">= 1");
  PATCHED(p_node_args, HK_STATUS_CORRUPT, "65 args");
  PATCHED(p_node_arg_range, HK_STATUS_CORRUPT, "outside ARGS");
  PATCHED(p_node_dep_range, HK_STATUS_CORRUPT, "outside DEPS");
  PATCHED(p_node_name, HK_STATUS_CORRUPT, "outside STRINGS");
  PATCHED(p_arg_kind, HK_STATUS_CORRUPT, "unknown kind 9");
  PATCHED(p_arg_tensor, HK_STATUS_CORRUPT, "tensor index 77");
  PATCHED(p_dep_self, HK_STATUS_CORRUPT, "not an earlier node");
  PATCHED(p_placement_fit, HK_STATUS_CORRUPT, "does not fit");
  PATCHED(p_placement_align, HK_STATUS_CORRUPT, "does not fit");
  PATCHED(p_placement_app, HK_STATUS_CORRUPT, "has a placement");
  PATCHED(p_placement_none, HK_STATUS_CORRUPT, "intermediate tensor 2 (t) has no placement in graph 0");
  PATCHED(p_code_raw, HK_STATUS_CORRUPT, "raw_size");
  PATCHED(p_code_limit, HK_STATUS_CORRUPT, "exceeds the limit");
  PATCHED(p_code_target, HK_STATUS_CORRUPT, "code_section 11 is not this target's CODE section");
  PATCHED(p_code_frame, HK_STATUS_CORRUPT, "zstd frame");
  PATCHED(p_code_raw_flag, HK_STATUS_CORRUPT, "stored raw");
}

/* ---- the optional PLAN section ----------------------------------------------------------- */
/* The fixture with cost figures: 14 sections, PLAN last. Caller frees. */
static uint8_t *write_with_plan(state_t *st, size_t *out_size) {
  fx_add_plan(&st->fx);
  void *data;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, out_size), 0);
  return data;
}

static hk_plan_graph_rec_t *plan_graphs(uint8_t *b) { return fx_payload(b, HK_SECTION_PLAN); }
static hk_plan_node_rec_t *plan_nodes(uint8_t *b) {
  return (hk_plan_node_rec_t *)((uint8_t *)fx_payload(b, HK_SECTION_PLAN) + 4 * sizeof(hk_plan_graph_rec_t));
}

static void test_plan_absent(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_memory(st->pack, st->size, NULL, &pack), HK_OK);
  const hk_pack_view_t *v = hk_pack_view(pack);
  assert_null(v->plan_graphs); /* a pack without costs (as before format 1.1) */
  assert_null(v->plan_nodes);
  assert_int_equal(fx_find_section(st->pack, HK_SECTION_PLAN), UINT32_MAX);
  hk_pack_destroy(pack);
}

static void test_plan_roundtrip(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_plan(st, &size);
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_memory(buf, size, NULL, &pack), HK_OK);
  const hk_pack_view_t *v = hk_pack_view(pack);
  assert_int_equal(v->section_count, 15);
  const hk_section_t *ps = &v->sections[13];
  assert_int_equal(ps->kind, HK_SECTION_PLAN);
  assert_int_equal(ps->flags, HK_SECTION_FLAG_OPTIONAL);
  assert_int_equal(ps->size, 4 * 24 + 8 * 24);
  assert_non_null(v->plan_graphs);
  for (uint32_t g = 0; g < v->graph_count; g++) { /* two targets x batches 2, 8 */
    uint32_t b = g % 2;
    assert_int_equal(v->plan_graphs[g].unfused_bytes, 5000u * (b + 1));
    assert_int_equal(v->plan_graphs[g].unfused_flops, 50u * (b + 1));
    assert_int_equal(v->plan_graphs[g].unfused_nodes, 3);
    for (uint32_t j = 0; j < 2; j++) {
      const hk_plan_node_rec_t *n = &v->plan_nodes[v->graphs[g].node_first + j];
      assert_int_equal(n->bytes, 1000u * (b + 1) + j);
      assert_int_equal(n->flops, 10u * (b + 1) + j);
      assert_int_equal(n->fused_nodes, j + 1);
      assert_int_equal(n->flags, j == 1 ? HK_PLAN_MATRIX : 0);
    }
  }
  /* Every other section is that of the pack without PLAN, byte for byte. */
  for (uint32_t i = 0; i < 13; i++) {
    const hk_section_t *a = fx_section(buf, i), *b = fx_section(st->pack, i);
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->size, b->size);
    assert_memory_equal(buf + a->offset, st->pack + b->offset, (size_t)a->size);
  }
  hk_pack_destroy(pack);

  /* Every byte of the section is covered by its checksum. */
  uint8_t *flip = fx_copy(buf, size);
  flip[ps->offset + 30] ^= 0x04;
  EXPECT_OPEN(flip, size, HK_STATUS_CORRUPT, "section 13 (PLAN): checksum mismatch");
  free(flip);
  free(buf);
}

static void p_plan_short(uint8_t *b, size_t n) {
  hk_section_t *s = sec(b, HK_SECTION_PLAN);
  s->size -= 24;
  s->raw_size -= 24;
  memset(b + s->offset + s->size, 0, 24); /* no longer inside a section: zero padding */
}
static void p_plan_odd(uint8_t *b, size_t n) {
  hk_section_t *s = sec(b, HK_SECTION_PLAN);
  s->size -= 1;
  s->raw_size -= 1;
  b[s->offset + s->size] = 0;
}
static void p_plan_fused0(uint8_t *b, size_t n) { plan_nodes(b)[5].fused_nodes = 0; }
static void p_plan_flags(uint8_t *b, size_t n) { plan_nodes(b)[1].flags = 0x5; }
static void p_plan_reserved(uint8_t *b, size_t n) { plan_graphs(b)[1].reserved0 = 7; }
static void p_plan_required(uint8_t *b, size_t n) { sec(b, HK_SECTION_PLAN)->flags = 0; }
static void p_plan_zstd(uint8_t *b, size_t n) { sec(b, HK_SECTION_PLAN)->flags |= HK_SECTION_FLAG_ZSTD; }
static void p_plan_target(uint8_t *b, size_t n) { sec(b, HK_SECTION_PLAN)->target = 0; }
static void p_plan_twice(uint8_t *b, size_t n) {
  hk_section_t *s = sec(b, HK_SECTION_PROVENANCE);
  s->kind = HK_SECTION_PLAN;
  s->flags = HK_SECTION_FLAG_OPTIONAL;
}
/* What a reader that does not know the kind sees: an optional section it skips. */
static void p_plan_unknown(uint8_t *b, size_t n) { sec(b, HK_SECTION_PLAN)->kind = 99; }

static void test_plan_corrupt(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_plan(st, &size);
#define PLAN_PATCHED(fn, code, needle) expect_patched_in(buf, size, fn, code, needle, __LINE__)
  PLAN_PATCHED(p_plan_short, HK_STATUS_CORRUPT, "section PLAN: size 264, expected 288 (24 bytes per graph x 4 graphs "
                                                "+ 24 per node x 8 nodes)");
  PLAN_PATCHED(p_plan_odd, HK_STATUS_CORRUPT, "section PLAN: size 287, expected 288");
  PLAN_PATCHED(p_plan_fused0, HK_STATUS_CORRUPT, "PLAN node 5 (mul): fused_nodes is 0");
  PLAN_PATCHED(p_plan_flags, HK_STATUS_CORRUPT, "PLAN node 1 (mul): unknown flags 0x5");
  PLAN_PATCHED(p_plan_reserved, HK_STATUS_CORRUPT, "PLAN graph 1: reserved field is not zero");
  PLAN_PATCHED(p_plan_required, HK_STATUS_CORRUPT,
               "section 13 (PLAN): must be stored uncompressed and flagged optional");
  PLAN_PATCHED(p_plan_zstd, HK_STATUS_CORRUPT, "flagged optional (flags 0x3");
  PLAN_PATCHED(p_plan_target, HK_STATUS_CORRUPT, "section 13 (PLAN): target field must be 0xffffffff");
  PLAN_PATCHED(p_plan_twice, HK_STATUS_CORRUPT, "section PLAN appears more than once (sections 10 and 13)");
  PLAN_PATCHED(p_plan_unknown, HK_OK, NULL);
#undef PLAN_PATCHED
  /* The writer refuses a launch that computes no spec node. */
  st->fx.fused[1][0] = 0;
  void *data;
  size_t n;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), -1);
  assert_non_null(strstr(st->diag, "launch 0 computes 0 spec nodes"));
  free(buf);
}

/* ---- TMA tensor map arguments (format 1.2) ----------------------------------------------- */
/* x is f32 [batch, 100]: 400-byte rows. Launch 0 (add) of the sm_90 target maps x in boxes
 * of 32 x 2 (128-byte rows, the 128-byte swizzle's span), launch 1 (mul) maps t unswizzled. */
#define TMAP_X hk_tmap_pack(0, 32, 2, HK_TMAP_SWIZZLE_128B)
#define TMAP_T hk_tmap_pack(2, 4, 256, HK_TMAP_SWIZZLE_NONE)

static uint8_t *write_with_tmaps(state_t *st, size_t *out_size) {
  fx_add_tmap(&st->fx, 0, TMAP_X);
  fx_add_tmap(&st->fx, 1, TMAP_T);
  void *data;
  if (hkc_pack_write_memory(&st->fx.in, &data, out_size) != 0) fail_msg("writing: %s", st->diag);
  return data;
}

static void test_tmap_fields(void **ts) {
  (void)ts;
  uint64_t v = hk_tmap_pack(0xfffffffeu, 256, 1, HK_TMAP_SWIZZLE_64B);
  assert_int_equal(hk_tmap_tensor(v), 0xfffffffeu);
  assert_int_equal(hk_tmap_box_inner(v), 256);
  assert_int_equal(hk_tmap_box_outer(v), 1);
  assert_int_equal(hk_tmap_swizzle(v), HK_TMAP_SWIZZLE_64B);
  assert_int_equal(v & HK_TMAP_RESERVED_MASK, 0);
  /* the documented bit positions */
  assert_int_equal(hk_tmap_pack(7, 1, 0, 0), (1ull << 32) | 7);
  assert_int_equal(hk_tmap_pack(0, 0, 1, 0), 1ull << 41);
  assert_int_equal(hk_tmap_pack(0, 0, 0, 3), 3ull << 50);
  assert_int_equal(hk_tmap_box_outer(0x1ffull << 41), 511);
  assert_int_equal(hk_tmap_swizzle_bytes(HK_TMAP_SWIZZLE_NONE), 0);
  assert_int_equal(hk_tmap_swizzle_bytes(HK_TMAP_SWIZZLE_32B), 32);
  assert_int_equal(hk_tmap_swizzle_bytes(HK_TMAP_SWIZZLE_128B), 128);
}

/* hkc's writer -> libhkrt's reader: the packed field survives, the current version, host untouched. */
static void test_tmap_roundtrip(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_tmaps(st, &size);
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_memory(buf, size, NULL, &pack), HK_OK);
  const hk_pack_view_t *v = hk_pack_view(pack);
  assert_int_equal(v->header->version_major, 1);
  assert_int_equal(v->header->version_minor, HK_PACK_VERSION_MINOR);
  assert_int_equal(v->arg_count, 56 + 4); /* one more argument per sm_90 launch */
  for (uint32_t g = 0; g < v->graph_count; g++) {
    const hk_graph_rec_t *gr = &v->graphs[g];
    int cuda = v->targets[gr->target].kind == HK_TARGET_CUDA;
    const hk_node_rec_t *n0 = &v->nodes[gr->node_first], *n1 = n0 + 1;
    assert_int_equal(n0->arg_count, cuda ? 9 : 8);
    assert_int_equal(n1->arg_count, cuda ? 7 : 6);
    if (!cuda) continue;
    const hk_arg_rec_t *a0 = &v->args[n0->arg_first + 8], *a1 = &v->args[n1->arg_first + 6];
    assert_int_equal(a0->kind, HK_ARG_TMAP);
    assert_int_equal(a0->value, TMAP_X);
    assert_int_equal(hk_tmap_tensor(a0->value), 0);
    assert_int_equal(hk_tmap_box_inner(a0->value), 32);
    assert_int_equal(hk_tmap_box_outer(a0->value), 2);
    assert_int_equal(hk_tmap_swizzle(a0->value), HK_TMAP_SWIZZLE_128B);
    assert_int_equal(a1->kind, HK_ARG_TMAP);
    assert_int_equal(a1->value, TMAP_T);
    assert_int_equal(v->args[n1->arg_first + 5].kind, HK_ARG_I64); /* the ABI's arguments come first */
  }
  hk_pack_destroy(pack);
  free(buf);

  /* hkc inspect lists them under their launch, for the sm_90 target only. */
  char *dir = hk_test_tmpdir();
  char path[4200];
  snprintf(path, sizeof path, "%s/tmap.hkpack", dir);
  assert_int_equal(hkc_pack_write(&st->fx.in, path), 0);
  char *text = NULL;
  size_t text_size = 0;
  FILE *out = open_memstream(&text, &text_size);
  assert_int_equal(hkc_inspect(path, out), 0);
  fclose(out);
  const char *line = "      tensor maps: arg 8 tmap(x, box 32x2, swz128)\n";
  const char *first = strstr(text, line);
  if (!first) fail_msg("no \"%s\" in:\n%s", line, text);
  assert_non_null(strstr(text, "      tensor maps: arg 6 tmap(t, box 4x256, none)\n"));
  assert_true(first > strstr(text, "graph sm_90, batch 2")); /* not under the host's graphs */
  assert_non_null(strstr(first + 1, line)); /* batch 8 too */
  free(text);
  unlink(path);
  rmdir(dir);
  free(dir);
}

/* The first TMAP argument of the ARGS section. */
static hk_arg_rec_t *tmap_arg(uint8_t *b) {
  hk_arg_rec_t *a = arg(b);
  uint64_t n = sec(b, HK_SECTION_ARGS)->size / sizeof *a;
  for (uint64_t i = 0; i < n; i++)
    if (a[i].kind == HK_ARG_TMAP) return &a[i];
  fail_msg("no TMAP argument in the pack");
  return NULL;
}
static void p_tmap_tensor(uint8_t *b, size_t n) { tmap_arg(b)->value = hk_tmap_pack(77, 32, 2, 3); }
static void p_tmap_inner0(uint8_t *b, size_t n) { tmap_arg(b)->value = hk_tmap_pack(0, 0, 2, 0); }
static void p_tmap_outer(uint8_t *b, size_t n) { tmap_arg(b)->value = hk_tmap_pack(0, 32, 300, 0); }
static void p_tmap_reserved(uint8_t *b, size_t n) { tmap_arg(b)->value = TMAP_X | 1ull << 60; }
static void p_tmap_host(uint8_t *b, size_t n) { /* a host launch's tensor argument t becomes a map of x */
  arg(b)[1].kind = HK_ARG_TMAP;
  arg(b)[1].value = TMAP_X;
}
static void p_tmap_box16(uint8_t *b, size_t n) { tmap_arg(b)->value = hk_tmap_pack(0, 3, 2, 0); } /* 12 bytes */
static void p_tmap_span(uint8_t *b, size_t n) { tmap_arg(b)->value = hk_tmap_pack(0, 32, 2, HK_TMAP_SWIZZLE_32B); }
static void p_tmap_stride16(uint8_t *b, size_t n) { tns(b)[0].dims[1].add = 101; } /* 404-byte rows */
static void p_tmap_stride40(uint8_t *b, size_t n) { tns(b)[0].dims[1].add = 1ll << 38; } /* 2^40-byte rows */
static void p_tmap_rows(uint8_t *b, size_t n) { tns(b)[0].dims[0].mul = 1ll << 30; } /* 2^33 rows at batch 8 */
static void p_tmap_cols(uint8_t *b, size_t n) { tns(b)[0].dims[1].add = (1ll << 32) + 4; }

/* Every rule of FORMAT.md's verification step 12 for TMAP arguments (the dtype rule cannot
 * be broken: every dtype of the format is one TMA loads). */
static void test_tmap_corrupt(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_tmaps(st, &size);
#define TMAP_PATCHED(fn, needle) expect_patched_in(buf, size, fn, HK_STATUS_CORRUPT, needle, __LINE__)
  TMAP_PATCHED(p_tmap_tensor, "graph 2 node 4 (add) arg 8: tensor map of tensor index 77 out of range (4 tensors)");
  TMAP_PATCHED(p_tmap_inner0, "graph 2 node 4 (add) arg 8: tensor map of x has box 0x2 (inner x outer); each must "
                              "be 1..256");
  TMAP_PATCHED(p_tmap_outer, "tensor map of x has box 32x300");
  TMAP_PATCHED(p_tmap_reserved, "graph 2 node 4 (add) arg 8: tensor map reserved bits are set");
  TMAP_PATCHED(p_tmap_host, "graph 0 node 0 (add) arg 1: a TMA tensor map argument in a graph of target " FX_HOST
                            ", which is not a CUDA target");
  TMAP_PATCHED(p_tmap_box16, "tensor map of x: box inner 3 x 4 bytes is not a multiple of 16 bytes");
  TMAP_PATCHED(p_tmap_span, "tensor map of x: box inner 32 x 4 bytes exceeds the 32-byte swizzle span");
  TMAP_PATCHED(p_tmap_stride16, "tensor map of x: row stride 101 x 4 bytes is not a multiple of 16 bytes below 2^40");
  TMAP_PATCHED(p_tmap_stride40, "row stride 274877906944 x 4 bytes is not a multiple of 16 bytes below 2^40");
  TMAP_PATCHED(p_tmap_rows, "graph 3 node 6 (add) arg 8: tensor map of x: matrix [8589934592, 100] at batch 8 "
                            "exceeds TMA's 2^32 elements per dim");
  TMAP_PATCHED(p_tmap_cols, "matrix [2, 4294967300] at batch 2 exceeds TMA's 2^32 elements per dim");
#undef TMAP_PATCHED
  free(buf);
}

/* Older minor versions are read as before (a 1.2 file's graphs have a zero semaphore_count,
 * its former reserved field). */
static void p_minor0(uint8_t *b, size_t n) { hdr(b)->version_minor = 0; }
static void p_minor1(uint8_t *b, size_t n) { hdr(b)->version_minor = 1; }
static void p_minor2(uint8_t *b, size_t n) { hdr(b)->version_minor = 2; }
static void test_older_minor(void **ts) {
  state_t *st = *ts;
  assert_int_equal(hdr(st->pack)->version_minor, HK_PACK_VERSION_MINOR);
  assert_int_equal(HK_PACK_VERSION_MINOR, 11);
  PATCHED(p_minor0, HK_OK, NULL);
  PATCHED(p_minor1, HK_OK, NULL);
  PATCHED(p_minor2, HK_OK, NULL);
}

/* ---- PTX (format 1.3) ------------------------------------------------------------------------ */
static const char k_ptx[] = ".version 8.0 // kernel 0\0\0\0\0\0\0\0\0.version 8.0 // kernel 1";
#define PTX0_SIZE 25u /* ".version 8.0 // kernel 0" and its NUL */
#define PTX1_AT 32u

/* The fixture with PTX for the sm_90 target's two kernels. */
static uint8_t *write_with_ptx(state_t *st, size_t *out_size) {
  hkc_target_out_t *cuda = &st->fx.targets[1];
  cuda->ptx = (void *)k_ptx;
  cuda->ptx_size = sizeof k_ptx;
  st->fx.kernels_cuda[0].ptx_offset = 0;
  st->fx.kernels_cuda[0].ptx_size = PTX0_SIZE;
  st->fx.kernels_cuda[1].ptx_offset = PTX1_AT;
  st->fx.kernels_cuda[1].ptx_size = sizeof k_ptx - PTX1_AT;
  void *data;
  if (hkc_pack_write_memory(&st->fx.in, &data, out_size) != 0) fail_msg("writing: %s", st->diag);
  cuda->ptx = NULL;
  cuda->ptx_size = 0;
  return data;
}

/* hkc's writer -> libhkrt's reader: the PTX sections come after every section a 1.2 reader
 * knows, flagged optional (so that it skips them), and read back byte for byte. */
static void test_ptx_roundtrip(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_ptx(st, &size);
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_memory(buf, size, NULL, &pack), HK_OK);
  const hk_pack_view_t *v = hk_pack_view(pack);
  assert_int_equal(v->ptx_section[0], UINT32_MAX); /* the host target has none */
  assert_int_not_equal(v->ptx_section[1], UINT32_MAX);
  assert_int_equal(v->ptx_count, 2);
  assert_int_equal(v->ptx_first[1], 0);
  assert_int_equal(v->ptx_recs[0].kernel, v->targets[1].kernel_first);
  assert_int_equal(v->ptx_recs[1].offset, PTX1_AT);
  uint32_t n_plain = hdr(st->pack)->section_count; /* the last one EXTENTS (format 1.6) */
  assert_int_equal(v->section_count, n_plain + 2);
  for (uint32_t i = n_plain - 1; i < v->section_count - 1; i++) {
    assert_true(v->sections[i].flags & HK_SECTION_FLAG_OPTIONAL);
    assert_true(v->sections[i].kind == HK_SECTION_PTX_INDEX || v->sections[i].kind == HK_SECTION_PTX);
  }
  assert_int_equal(v->sections[v->section_count - 1].kind, HK_SECTION_EXTENTS);
  void *text;
  size_t text_size;
  assert_int_equal(hk_pack_ptx_load(v, 1, NULL, &text, &text_size), HK_OK);
  assert_int_equal(text_size, sizeof k_ptx);
  assert_memory_equal(text, k_ptx, sizeof k_ptx);
  const char *why;
  for (uint32_t k = 0; k < 2; k++) /* each range is one NUL-terminated text */
    assert_true(hk_ptx_text_ok((const char *)text + v->ptx_recs[k].offset, (size_t)v->ptx_recs[k].size, &why));
  hk_free(NULL, text);
  assert_int_equal(hk_pack_ptx_load(v, 0, NULL, &text, &text_size), HK_STATUS_NOT_FOUND);
  hk_pack_destroy(pack);
  free(buf);
}

static hk_ptx_rec_t *ptx_recs(uint8_t *b) { return fx_payload(b, HK_SECTION_PTX_INDEX); }
static void p_ptx_kernel(uint8_t *b, size_t n) { ptx_recs(b)[1].kernel = 99; }
static void p_ptx_order(uint8_t *b, size_t n) { ptx_recs(b)[1].kernel = ptx_recs(b)[0].kernel; }
static void p_ptx_range(uint8_t *b, size_t n) { ptx_recs(b)[1].size = 4096; }
static void p_ptx_empty(uint8_t *b, size_t n) { ptx_recs(b)[0].size = 0; }
static void p_ptx_reserved(uint8_t *b, size_t n) { ptx_recs(b)[0].reserved0 = 1; }
static void p_ptx_host(uint8_t *b, size_t n) { ptx_recs(b)[0].kernel = 0; } /* a host kernel */
/* Shortens the index to `size` bytes, zeroing what it drops (padding must be zero). */
static void ptx_index_cut(uint8_t *b, uint64_t size) {
  hk_section_t *s = sec(b, HK_SECTION_PTX_INDEX);
  memset(b + s->offset + size, 0, (size_t)(s->size - size));
  s->size = s->raw_size = size;
}
static void p_ptx_count(uint8_t *b, size_t n) { ptx_index_cut(b, sizeof(hk_ptx_rec_t)); }
static void p_ptx_partial(uint8_t *b, size_t n) { ptx_index_cut(b, 5); }
static void p_ptx_no_index(uint8_t *b, size_t n) { sec(b, HK_SECTION_PTX_INDEX)->kind = 99; }
static void p_ptx_index_zstd(uint8_t *b, size_t n) { sec(b, HK_SECTION_PTX_INDEX)->flags |= HK_SECTION_FLAG_ZSTD; }
static void p_ptx_required(uint8_t *b, size_t n) { sec(b, HK_SECTION_PTX)->flags &= ~HK_SECTION_FLAG_OPTIONAL; }
static void p_ptx_on_host(uint8_t *b, size_t n) { sec(b, HK_SECTION_PTX)->target = 0; }
static void p_ptx_target(uint8_t *b, size_t n) { sec(b, HK_SECTION_PTX)->target = 7; }
static void p_ptx_raw(uint8_t *b, size_t n) { sec(b, HK_SECTION_PTX)->raw_size += 1; }
static void p_ptx_twice(uint8_t *b, size_t n) { /* the index's kind on the PTX section too */
  sec(b, HK_SECTION_PTX)->kind = HK_SECTION_PTX_INDEX;
}
static void test_ptx_corrupt(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_ptx(st, &size);
#define PTX_PATCHED(fn, needle) expect_patched_in(buf, size, fn, HK_STATUS_CORRUPT, needle, __LINE__)
  PTX_PATCHED(p_ptx_kernel, "PTX record 1: kernel 99 out of range (4 kernels)");
  PTX_PATCHED(p_ptx_order, "PTX record 1: kernel 2 does not ascend");
  PTX_PATCHED(p_ptx_range, "PTX record 1 (kernel 3): range [32, +4096) is not inside its target's 57 PTX bytes");
  PTX_PATCHED(p_ptx_empty, "PTX record 0 (kernel 2): range [0, +0)");
  PTX_PATCHED(p_ptx_reserved, "PTX record 0: reserved field is not zero");
  PTX_PATCHED(p_ptx_host, "PTX record 0: kernel 0's target 0 has no PTX section");
  PTX_PATCHED(p_ptx_count, "target 1 (sm_90): 1 PTX records for its 2 kernels");
  PTX_PATCHED(p_ptx_partial, "section 13 (PTX_INDEX): size 5 is not a multiple of 24 bytes");
  PTX_PATCHED(p_ptx_no_index, "PTX sections without a PTX_INDEX section");
  PTX_PATCHED(p_ptx_index_zstd, "(PTX_INDEX): must be stored uncompressed and flagged optional");
  PTX_PATCHED(p_ptx_required, "(PTX): not flagged optional");
  PTX_PATCHED(p_ptx_on_host, "(PTX): target 0 (" FX_HOST ") is not a CUDA target");
  PTX_PATCHED(p_ptx_target, "(PTX): target 7 out of range (2 targets)");
  PTX_PATCHED(p_ptx_raw, "(PTX): zstd frame holds 57 bytes, raw_size says 58");
  PTX_PATCHED(p_ptx_twice, "section PTX_INDEX appears more than once");
#undef PTX_PATCHED
  free(buf);
}

/* ---- PARTS (format 1.4) ----------------------------------------------------------------------- */
static const char *k_parts[2] = {"m.w.a", "m.w.b"};

/* The fixture with param w (tensor 1) made of two checkpoint tensors. */
static uint8_t *write_with_parts(state_t *st, size_t *out_size) {
  st->fx.tensors[1].parts = (char **)k_parts;
  st->fx.tensors[1].n_parts = 2;
  void *data;
  if (hkc_pack_write_memory(&st->fx.in, &data, out_size) != 0) fail_msg("writing: %s", st->diag);
  st->fx.tensors[1].parts = NULL;
  st->fx.tensors[1].n_parts = 0;
  return data;
}

/* hkc's writer -> libhkrt's reader: one optional PARTS section after the rest, w's parts in order. */
static void test_parts_roundtrip(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_parts(st, &size);
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_memory(buf, size, NULL, &pack), HK_OK);
  const hk_pack_view_t *v = hk_pack_view(pack);
  assert_int_equal(v->header->version_minor, HK_PACK_VERSION_MINOR);
  assert_int_equal(v->section_count, hdr(st->pack)->section_count + 1);
  const hk_section_t *last = &v->sections[v->section_count - 2]; /* before EXTENTS (format 1.6) */
  assert_int_equal(last->kind, HK_SECTION_PARTS);
  assert_int_equal(last->flags, HK_SECTION_FLAG_OPTIONAL);
  assert_int_equal(v->part_count, 2);
  uint32_t first, count;
  hk_pack_tensor_parts(v, 1, &first, &count);
  assert_int_equal(count, 2);
  assert_string_equal(hk_pack_string(v, v->parts[first].name), "m.w.a");
  assert_string_equal(hk_pack_string(v, v->parts[first + 1].name), "m.w.b");
  for (uint32_t t = 0; t < v->tensor_count; t++) {
    hk_pack_tensor_parts(v, t, &first, &count);
    assert_int_equal(count, t == 1 ? 2 : 0);
  }
  hk_pack_destroy(pack);
  free(buf);
  /* without parts: no section */
  assert_int_equal(fx_find_section(st->pack, HK_SECTION_PARTS), UINT32_MAX);
}

static hk_part_rec_t *part_recs(uint8_t *b) { return fx_payload(b, HK_SECTION_PARTS); }
static void p_parts_tensor(uint8_t *b, size_t n) { part_recs(b)[1].tensor = 99; }
static void p_parts_role(uint8_t *b, size_t n) { part_recs(b)[0].tensor = part_recs(b)[1].tensor = 0; }
static void p_parts_order(uint8_t *b, size_t n) { part_recs(b)[1].tensor = 0; }
static void p_parts_dup(uint8_t *b, size_t n) { part_recs(b)[1].name = part_recs(b)[0].name; }
static void p_parts_empty(uint8_t *b, size_t n) { part_recs(b)[0].name = 0; } /* "" */
static void p_parts_ref(uint8_t *b, size_t n) { part_recs(b)[0].name = 0xffffff; }
static void p_parts_zstd(uint8_t *b, size_t n) { sec(b, HK_SECTION_PARTS)->flags |= HK_SECTION_FLAG_ZSTD; }
static void p_parts_target(uint8_t *b, size_t n) { sec(b, HK_SECTION_PARTS)->target = 0; }
static void p_parts_partial(uint8_t *b, size_t n) {
  hk_section_t *s = sec(b, HK_SECTION_PARTS);
  memset(b + s->offset + 5, 0, (size_t)(s->size - 5));
  s->size = s->raw_size = 5;
}
static void test_parts_corrupt(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_parts(st, &size);
#define PARTS_PATCHED(fn, needle) expect_patched_in(buf, size, fn, HK_STATUS_CORRUPT, needle, __LINE__)
  PARTS_PATCHED(p_parts_tensor, "PARTS record 1: tensor 99 out of range (4 tensors)");
  PARTS_PATCHED(p_parts_role, "PARTS record 0: tensor 0 (x) is not a param");
  PARTS_PATCHED(p_parts_order, "PARTS record 1: tensor 0 (x) does not ascend");
  PARTS_PATCHED(p_parts_dup, "PARTS: tensor 1 (w) names part \"m.w.a\" twice");
  PARTS_PATCHED(p_parts_empty, "PARTS record 0: name \"\" is empty");
  PARTS_PATCHED(p_parts_ref, "PARTS record 0: string ref 16777215 is outside STRINGS");
  PARTS_PATCHED(p_parts_zstd, "(PARTS): must be stored uncompressed and flagged optional");
  PARTS_PATCHED(p_parts_target, "(PARTS): target field must be 0xffffffff");
  PARTS_PATCHED(p_parts_partial, "(PARTS): size 5 is not a multiple of 8 bytes");
#undef PARTS_PATCHED
  free(buf);
  /* more than HK_MAX_PARTS parts: the writer's own verification refuses the pack */
  char names[HK_MAX_PARTS + 1][8];
  char *list[HK_MAX_PARTS + 1];
  for (uint32_t p = 0; p <= HK_MAX_PARTS; p++) snprintf(names[p], sizeof names[p], "p%u", p), list[p] = names[p];
  st->fx.tensors[1].parts = list;
  st->fx.tensors[1].n_parts = HK_MAX_PARTS + 1;
  void *data = NULL;
  assert_int_not_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), 0);
  assert_null(data);
  assert_non_null(strstr(st->diag, "tensor 1 (w) has more than 64 parts"));
  st->fx.tensors[1].n_parts = HK_MAX_PARTS;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), 0);
  free(data);
  st->fx.tensors[1].parts = NULL;
  st->fx.tensors[1].n_parts = 0;
}

/* The writer refuses PTX on a target other than CUDA. */
static void test_ptx_writer_rejects(void **ts) {
  state_t *st = *ts;
  hkc_target_out_t *host = &st->fx.targets[0];
  host->ptx = (void *)k_ptx;
  host->ptx_size = sizeof k_ptx;
  void *data = NULL;
  size_t size;
  assert_int_not_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), 0);
  assert_null(data);
  assert_non_null(strstr(st->diag, "carries PTX but is not a CUDA target"));
  host->ptx = NULL;
  host->ptx_size = 0;
}

/* The writer refuses tensor maps the loader would refuse. */
static void test_tmap_writer_rejects(void **ts) {
  state_t *st = *ts;
  void *data = NULL;
  size_t n;
  /* on the host target (the graphs both targets share) */
  hkc_launch_t *l = &st->fx.launches[0][0];
  l->args[l->n_args++] = (hkc_arg_t){HK_ARG_TMAP, (int64_t)TMAP_X, 0};
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), -1);
  assert_non_null(strstr(st->diag, "cannot write the artifact: target " FX_HOST " batch 2 launch 0 arg 8 is a TMA "
                                   "tensor map the format does not allow: tensor maps are for CUDA targets only"));
  l->n_args--;
  /* a box whose row exceeds the swizzle span, on the sm_90 target */
  fx_add_tmap(&st->fx, 0, hk_tmap_pack(0, 64, 2, HK_TMAP_SWIZZLE_128B));
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), -1);
  assert_non_null(strstr(st->diag, "target sm_90 batch 2 launch 0 arg 8 is a TMA tensor map the format does not "
                                   "allow: its box inner row is not a multiple of 16 bytes within the swizzle span"));
  st->fx.launches_cuda[0][0].args[8].i = (int64_t)hk_tmap_pack(9, 32, 2, 0);
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), -1);
  assert_non_null(strstr(st->diag, "its tensor index is out of range"));
  assert_null(data);
}

/* ---- node flags: programmatic dependent launch (format 1.2) ------------------------------- */
/* Launch 1 (mul, after add) of the sm_90 target is marked PDL; the host's are not. */
static uint8_t *write_with_pdl(state_t *st, size_t *out_size) {
  fx_add_pdl(&st->fx, 1);
  void *data;
  if (hkc_pack_write_memory(&st->fx.in, &data, out_size) != 0) fail_msg("writing: %s", st->diag);
  return data;
}

/* hkc's writer -> libhkrt's reader: the flag on the marked sm_90 nodes only; hkc inspect
 * shows it on their lines. */
static void test_pdl_roundtrip(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_pdl(st, &size);
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_memory(buf, size, NULL, &pack), HK_OK);
  const hk_pack_view_t *v = hk_pack_view(pack);
  assert_int_equal(v->header->version_minor, HK_PACK_VERSION_MINOR);
  int flagged = 0;
  for (uint32_t g = 0; g < v->graph_count; g++) {
    const hk_graph_rec_t *gr = &v->graphs[g];
    int cuda = v->targets[gr->target].kind == HK_TARGET_CUDA;
    const hk_node_rec_t *n0 = &v->nodes[gr->node_first], *n1 = n0 + 1;
    assert_int_equal(n0->flags, 0);
    assert_int_equal(n1->flags, cuda ? HK_NODE_FLAG_PDL : 0);
    assert_int_equal(n1->dep_count, 1); /* the flag changes nothing else */
    flagged += cuda;
  }
  assert_int_equal(flagged, 2); /* sm_90 at batch 2 and 8 */
  hk_pack_destroy(pack);
  /* Only the node records differ from the pack without the flag. */
  for (uint32_t i = 0; i < hdr(buf)->section_count; i++) {
    const hk_section_t *a = fx_section(buf, i), *b = fx_section(st->pack, i);
    assert_int_equal(a->size, b->size);
    if (a->kind != HK_SECTION_NODES) assert_memory_equal(buf + a->offset, st->pack + b->offset, (size_t)a->size);
  }
  free(buf);

  char *dir = hk_test_tmpdir();
  char path[4200];
  snprintf(path, sizeof path, "%s/pdl.hkpack", dir);
  assert_int_equal(hkc_pack_write(&st->fx.in, path), 0);
  char *text = NULL;
  size_t text_size = 0;
  FILE *out = open_memstream(&text, &text_size);
  assert_int_equal(hkc_inspect(path, out), 0);
  fclose(out);
  const char *cuda = strstr(text, "graph sm_90, batch 2");
  assert_non_null(cuda);
  const char *mul = strstr(cuda, "#1   mul");
  if (!mul) fail_msg("no sm_90 mul line in:\n%s", text);
  const char *eol = strchr(mul, '\n');
  const size_t tail = strlen("after [0] pdl");
  if ((size_t)(eol - mul) < tail || memcmp(eol - tail, "after [0] pdl", tail) != 0)
    fail_msg("the sm_90 mul line does not end with \"after [0] pdl\": %.*s", (int)(eol - mul), mul);
  /* one pdl per sm_90 graph, none under the host's graphs (which come first) */
  int count = 0;
  for (const char *p = text; (p = strstr(p, "] pdl\n")) != NULL; p++, count++) assert_true(p > cuda);
  assert_int_equal(count, 2);
  free(text);
  unlink(path);
  rmdir(dir);
  free(dir);
}

/* The NODES records of graph 2 (sm_90, batch 2): nodes 4 and 5; host graph 0: nodes 0 and 1. */
static void p_pdl_unknown_bit(uint8_t *b, size_t n) { nod(b)[5].flags = HK_NODE_FLAG_PDL | 0x4; }
static void p_pdl_high_bit(uint8_t *b, size_t n) { nod(b)[4].flags = 0x80000000u; }
static void p_pdl_host(uint8_t *b, size_t n) { nod(b)[1].flags = HK_NODE_FLAG_PDL; }
static void p_pdl_first(uint8_t *b, size_t n) { nod(b)[4].flags = HK_NODE_FLAG_PDL; } /* no deps: allowed */
static void p_pdl_clear(uint8_t *b, size_t n) { nod(b)[5].flags = 0; } /* a zero reserved field, as before */

/* FORMAT.md's node flag rules: unknown bits and PDL outside CUDA targets are refused. */
static void test_pdl_corrupt(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_pdl(st, &size);
#define PDL_PATCHED(fn, code, needle) expect_patched_in(buf, size, fn, code, needle, __LINE__)
  PDL_PATCHED(p_pdl_unknown_bit, HK_STATUS_CORRUPT, "node 5 (mul) of graph 2: unknown flags 0x4 (written by a newer "
                                                    "hkc?)");
  PDL_PATCHED(p_pdl_high_bit, HK_STATUS_CORRUPT, "node 4 (add) of graph 2: unknown flags 0x80000000");
  PDL_PATCHED(p_pdl_host, HK_STATUS_CORRUPT, "node 1 (mul) of graph 0: flagged for programmatic dependent launch "
                                             "(PDL) in a graph of target " FX_HOST ", which is not a CUDA target");
  PDL_PATCHED(p_pdl_first, HK_OK, NULL);
  PDL_PATCHED(p_pdl_clear, HK_OK, NULL);
#undef PDL_PATCHED
  free(buf);
}

/* The writer refuses the flag where the loader would. */
static void test_pdl_writer_rejects(void **ts) {
  state_t *st = *ts;
  void *data = NULL;
  size_t n;
  st->fx.launches[1][1].pdl = 1; /* the host target's graph for batch 8 */
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), -1);
  assert_non_null(strstr(st->diag, "cannot write the artifact: target " FX_HOST " batch 8 launch 1 is marked for "
                                   "programmatic dependent launch, which the format allows on CUDA targets only"));
  assert_null(data);
}

/* ---- scratch and semaphore arguments (format 1.3) --------------------------------------- */
/* Launch 1 (mul) of the sm_90 target takes bytes [256, 768) of its graph's workspace (1024
 * bytes at batch 2, 3328 at 8) and counters [1, 4) of the graph's 4. */
#define WS_SCRATCH hk_scratch_pack(1, 2)
#define WS_SEMAPHORE hk_semaphore_pack(1, 3)

static uint8_t *write_with_workspace(state_t *st, size_t *out_size) {
  fx_add_workspace(&st->fx, 1, WS_SCRATCH, WS_SEMAPHORE, 4);
  void *data;
  if (hkc_pack_write_memory(&st->fx.in, &data, out_size) != 0) fail_msg("writing: %s", st->diag);
  return data;
}

static void test_workspace_fields(void **ts) {
  (void)ts;
  const uint64_t s = hk_scratch_pack(0xfffffffeu, 3);
  assert_int_equal(hk_scratch_offset(s), 0xfffffffeull * HK_SCRATCH_UNIT);
  assert_int_equal(hk_scratch_bytes(s), 3 * HK_SCRATCH_UNIT);
  assert_int_equal(hk_scratch_pack(7, 1), (1ull << 32) | 7); /* the documented bit positions */
  const uint64_t m = hk_semaphore_pack(5, 0xffffffffu);
  assert_int_equal(hk_semaphore_first(m), 5);
  assert_int_equal(hk_semaphore_count(m), 0xffffffffu);
  assert_int_equal(hk_semaphore_pack(7, 1), (1ull << 32) | 7);
}

/* hkc's writer -> libhkrt's reader: the arguments and the graphs' counters survive on the
 * sm_90 target, the host's graphs have none; hkc inspect shows them. */
static void test_workspace_roundtrip(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_workspace(st, &size);
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_memory(buf, size, NULL, &pack), HK_OK);
  const hk_pack_view_t *v = hk_pack_view(pack);
  for (uint32_t g = 0; g < v->graph_count; g++) {
    const hk_graph_rec_t *gr = &v->graphs[g];
    const int cuda = v->targets[gr->target].kind == HK_TARGET_CUDA;
    const hk_node_rec_t *n1 = &v->nodes[gr->node_first + 1];
    assert_int_equal(gr->semaphore_count, cuda ? 4 : 0);
    assert_int_equal(n1->arg_count, cuda ? 8 : 6);
    if (!cuda) continue;
    assert_int_equal(v->args[n1->arg_first + 6].kind, HK_ARG_SCRATCH);
    assert_int_equal(v->args[n1->arg_first + 6].value, WS_SCRATCH);
    assert_int_equal(v->args[n1->arg_first + 7].kind, HK_ARG_SEMAPHORE);
    assert_int_equal(v->args[n1->arg_first + 7].value, WS_SEMAPHORE);
  }
  hk_pack_destroy(pack);
  free(buf);

  char *dir = hk_test_tmpdir();
  char path[4200];
  snprintf(path, sizeof path, "%s/ws.hkpack", dir);
  assert_int_equal(hkc_pack_write(&st->fx.in, path), 0);
  char *text = NULL;
  size_t text_size = 0;
  FILE *out = open_memstream(&text, &text_size);
  assert_int_equal(hkc_inspect(path, out), 0);
  fclose(out);
  const char *line = "      workspace: arg 6 scratch(512 B at 256 B), arg 7 semaphores(3 from 1)\n";
  const char *first = strstr(text, line);
  if (!first) fail_msg("no \"%s\" in:\n%s", line, text);
  assert_true(first > strstr(text, "graph sm_90, batch 2: 2 node(s), workspace 1.0 KiB, 4 semaphore(s)\n"));
  assert_non_null(strstr(text, "graph sm_90, batch 8: 2 node(s), workspace 3.2 KiB, 4 semaphore(s)\n"));
  assert_non_null(strstr(text, "graph " FX_HOST ", batch 2: 2 node(s), workspace 1.0 KiB\n"));
  free(text);
  unlink(path);
  rmdir(dir);
  free(dir);
}

/* The first argument of `kind` in the ARGS section. */
static hk_arg_rec_t *kind_arg(uint8_t *b, uint32_t kind) {
  hk_arg_rec_t *a = arg(b);
  uint64_t n = sec(b, HK_SECTION_ARGS)->size / sizeof *a;
  for (uint64_t i = 0; i < n; i++)
    if (a[i].kind == kind) return &a[i];
  fail_msg("no argument of kind %u in the pack", kind);
  return NULL;
}
static void p_ws_outside(uint8_t *b, size_t n) { kind_arg(b, HK_ARG_SCRATCH)->value = hk_scratch_pack(2, 3); }
static void p_ws_empty(uint8_t *b, size_t n) { kind_arg(b, HK_ARG_SCRATCH)->value = hk_scratch_pack(1, 0); }
static void p_ws_huge(uint8_t *b, size_t n) { /* offset + bytes past 2^40: no overflow in the check */
  kind_arg(b, HK_ARG_SCRATCH)->value = hk_scratch_pack(0xffffffffu, 0xffffffffu);
}
static void p_sem_outside(uint8_t *b, size_t n) { kind_arg(b, HK_ARG_SEMAPHORE)->value = hk_semaphore_pack(2, 3); }
static void p_sem_empty(uint8_t *b, size_t n) { kind_arg(b, HK_ARG_SEMAPHORE)->value = hk_semaphore_pack(0, 0); }
static void p_sem_wrap(uint8_t *b, size_t n) {
  kind_arg(b, HK_ARG_SEMAPHORE)->value = hk_semaphore_pack(0xffffffffu, 2);
}
static void p_sem_count(uint8_t *b, size_t n) { grf(b)[2].semaphore_count = HK_MAX_SEMAPHORES + 1; }
static void p_sem_host(uint8_t *b, size_t n) { /* a host graph without counters gets a semaphore argument */
  arg(b)[1].kind = HK_ARG_SEMAPHORE;
  arg(b)[1].value = WS_SEMAPHORE;
}
static void p_ws_host(uint8_t *b, size_t n) { /* scratch within a host graph's workspace is fine */
  arg(b)[1].kind = HK_ARG_SCRATCH;
  arg(b)[1].value = hk_scratch_pack(0, 4);
  ((uint64_t *)fx_payload(b, HK_SECTION_EXTENTS))[1] = 0; /* as for every argument but a tensor */
}

/* FORMAT.md's rules for scratch and semaphore arguments and the graphs' counters. */
static void test_workspace_corrupt(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_workspace(st, &size);
#define WS_PATCHED(fn, code, needle) expect_patched_in(buf, size, fn, code, needle, __LINE__)
  WS_PATCHED(p_ws_outside, HK_STATUS_CORRUPT, "graph 2 node 5 (mul) arg 6: scratch [512, +768 bytes) is empty or "
                                              "outside the 1024-byte workspace");
  WS_PATCHED(p_ws_empty, HK_STATUS_CORRUPT, "graph 2 node 5 (mul) arg 6: scratch [256, +0 bytes) is empty");
  WS_PATCHED(p_ws_huge, HK_STATUS_CORRUPT, "arg 6: scratch [1099511627520, +1099511627520 bytes) is empty or outside");
  WS_PATCHED(p_sem_outside, HK_STATUS_CORRUPT, "graph 2 node 5 (mul) arg 7: semaphores [2, +3) are empty or outside "
                                               "the graph's 4");
  WS_PATCHED(p_sem_empty, HK_STATUS_CORRUPT, "arg 7: semaphores [0, +0) are empty");
  WS_PATCHED(p_sem_wrap, HK_STATUS_CORRUPT, "arg 7: semaphores [4294967295, +2) are empty or outside");
  WS_PATCHED(p_sem_count, HK_STATUS_CORRUPT, "graph 2: 16777217 semaphores exceed the limit 16777216");
  WS_PATCHED(p_sem_host, HK_STATUS_CORRUPT, "graph 0 node 0 (add) arg 1: semaphores [1, +3) are empty or outside the "
                                            "graph's 0");
  WS_PATCHED(p_ws_host, HK_OK, NULL);
#undef WS_PATCHED
  free(buf);
}

/* The writer refuses what the loader would. */
static void test_workspace_writer_rejects(void **ts) {
  state_t *st = *ts;
  void *data = NULL;
  size_t n;
  fx_add_workspace(&st->fx, 1, hk_scratch_pack(4, 1), WS_SEMAPHORE, 4); /* [1024, 1280) of 1024 bytes at batch 2 */
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), -1);
  assert_non_null(strstr(st->diag, "cannot write the artifact: target sm_90 batch 2 launch 1 arg 6: its scratch range "
                                   "is empty or outside the graph's workspace"));
  st->fx.launches_cuda[0][1].args[6].i = (int64_t)WS_SCRATCH;
  st->fx.launches_cuda[1][1].args[6].i = (int64_t)WS_SCRATCH;
  st->fx.graphs_cuda[1].semaphore_count = 3;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), -1);
  assert_non_null(strstr(st->diag, "target sm_90 batch 8 launch 1 arg 7: its semaphores are empty or outside the "
                                   "graph's"));
  st->fx.graphs_cuda[1].semaphore_count = HK_MAX_SEMAPHORES + 1;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), -1);
  assert_non_null(strstr(st->diag, "target sm_90 batch 8 needs 16777217 semaphores, over the format's limit"));
  assert_null(data);
}

/* ---- launch extents (format 1.6) ------------------------------------------------------------
 * Nodes 0, 1: the host target's batch-2 launches (add: rmsnorm's layout, args [0, 8); mul, args
 * [8, 14)); node 5: the sm_90 target's batch-2 mul (graph 2). */
static uint64_t *ext(uint8_t *b) { return fx_payload(b, HK_SECTION_EXTENTS); }
#define ROWS_BYTES (65536ull * FX_COLS * sizeof(float))
static void p_ext_rows(uint8_t *b, size_t n) { /* 65536 rows of a 2-row tensor, in 4096 blocks */
  nod(b)[0].grid[0] = 4096;
  arg(b)[3].value = 65536;
}
static void p_ext_rows_record(uint8_t *b, size_t n) { /* ... and a record that agrees */
  p_ext_rows(b, n);
  ext(b)[0] = ext(b)[2] = ROWS_BYTES;
}
static void p_ext_out_param(uint8_t *b, size_t n) { arg(b)[8 + 2].value = 1; } /* mul's out: w */
static void p_ext_cuda(uint8_t *b, size_t n) { arg(b)[nod(b)[5].arg_first + 2].value = 1; }
static void p_ext_kind(uint8_t *b, size_t n) { arg(b)[3].kind = HK_ARG_F32; }
static void p_ext_null(uint8_t *b, size_t n) { /* x, a required tensor, becomes a null pointer */
  arg(b)[0].kind = HK_ARG_NULL;
  arg(b)[0].value = 0;
  ext(b)[0] = 0;
}
static void p_ext_count(uint8_t *b, size_t n) { /* add's last argument becomes mul's first */
  nod(b)[0].arg_count = 7;
  nod(b)[1].arg_first = 7;
  nod(b)[1].arg_count = 7;
}
static void p_ext_zero(uint8_t *b, size_t n) { arg(b)[3].value = 0; }
static void p_ext_negative(uint8_t *b, size_t n) { arg(b)[8 + 5].value = (uint64_t)-100; } /* mul's nb */
static void p_ext_dtype(uint8_t *b, size_t n) { tns(b)[1].dtype = HK_DTYPE_F16; }
static void p_ext_overflow(uint8_t *b, size_t n) { /* rows x cols wraps around 2^64 */
  arg(b)[3].value = 1ull << 40;
  arg(b)[4].value = 1ull << 40;
}
static void p_ext_old(uint8_t *b, size_t n) { /* format 1.5: no EXTENTS (a 1.5 reader skips it) */
  hdr(b)->version_minor = 5;
  sec(b, HK_SECTION_EXTENTS)->kind = 99;
}
static void p_ext_old_rows(uint8_t *b, size_t n) { p_ext_old(b, n), p_ext_rows(b, n); }
/* format-level damage, refused by verify at open */
static void p_ext_missing(uint8_t *b, size_t n) { sec(b, HK_SECTION_EXTENTS)->kind = 99; }
static void p_ext_not_tensor(uint8_t *b, size_t n) { ext(b)[3] = 8; }
static void p_ext_size(uint8_t *b, size_t n) { sec(b, HK_SECTION_EXTENTS)->size -= 8, sec(b, HK_SECTION_EXTENTS)->raw_size -= 8; }
static void p_ext_flags(uint8_t *b, size_t n) { sec(b, HK_SECTION_EXTENTS)->flags = 0; }
static void p_ext_target(uint8_t *b, size_t n) { sec(b, HK_SECTION_EXTENTS)->target = 0; }

/* Opens the fixture patched by `patch` (checksums fixed up; it must open) and checks the launch
 * extents of every graph: HK_OK, or the first failure with its message in hk_last_error() and
 * its graph in *out_graph. */
static hk_status_t extents_after(const uint8_t *pack, size_t size, patch_fn patch, uint32_t *out_graph) {
  uint8_t *buf = fx_copy(pack, size);
  if (patch) patch(buf, size);
  hk_test_refix(buf, size);
  hk_pack_t *p = NULL;
  if (hk_test_open_memory(buf, size, NULL, &p) != HK_OK) fail_msg("the patched pack does not open: %s", hk_last_error());
  const hk_pack_view_t *v = hk_pack_view(p);
  hk_status_t s = HK_OK;
  for (uint32_t g = 0; g < v->graph_count && s == HK_OK; g++) {
    s = hk_graph_check_extents(v, g);
    *out_graph = g;
  }
  hk_pack_destroy(p);
  free(buf);
  return s;
}

static void expect_extents(const uint8_t *pack, size_t size, patch_fn patch, uint32_t graph, const char *needle,
                           int line) {
  uint32_t g = UINT32_MAX;
  hk_status_t s = extents_after(pack, size, patch, &g);
  if (s != HK_STATUS_CORRUPT || g != graph || !strstr(hk_last_error(), needle))
    fail_msg("line %d: expected CORRUPT in graph %u containing \"%s\", got %s in graph %u: %s", line, graph, needle,
             hk_status_string(s), g, hk_last_error());
}
#define EXTENTS_REFUSED(fn, graph, needle) expect_extents(st->pack, st->size, fn, graph, needle, __LINE__)

/* What hkc records is what libhkrt derives from the arguments: elements x 4 bytes of each
 * tensor a launch touches, 0 for the rest; every graph of the fixture passes. */
static void test_extents_roundtrip(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack;
  assert_int_equal(hk_test_open_memory(st->pack, st->size, NULL, &pack), HK_OK);
  const hk_pack_view_t *v = hk_pack_view(pack);
  assert_int_equal(v->header->version_minor, 11);
  assert_non_null(v->extents);
  const hk_section_t *es = &v->sections[v->section_count - 1];
  assert_int_equal(es->kind, HK_SECTION_EXTENTS);
  assert_int_equal(es->flags, HK_SECTION_FLAG_OPTIONAL);
  assert_int_equal(es->size, v->arg_count * sizeof(uint64_t));
  for (uint32_t g = 0; g < v->graph_count; g++) {
    assert_int_equal(hk_graph_check_extents(v, g), HK_OK);
    const uint64_t rows = v->graphs[g].batch, t = rows * FX_COLS * 4; /* x, t, y: [batch, 100] f32 */
    const uint64_t add[8] = {t, FX_COLS * 4, t, 0, 0, 0, 0, 0}, mul[6] = {t, FX_COLS * 4, t, 0, 0, 0};
    for (uint32_t j = 0; j < 2; j++) {
      const hk_node_rec_t *nr = &v->nodes[v->graphs[g].node_first + j];
      uint64_t derived[HK_MAX_ARGS_PER_NODE];
      assert_int_equal(hk_launch_extents(v, g, j, derived), HK_OK);
      for (uint32_t a = 0; a < nr->arg_count; a++) {
        assert_int_equal(derived[a], j ? mul[a] : add[a]);
        assert_int_equal(v->extents[nr->arg_first + a], derived[a]);
      }
    }
  }
  hk_pack_destroy(pack);
  uint32_t g;
  assert_int_equal(extents_after(st->pack, st->size, p_ext_old, &g), HK_OK); /* a 1.5 pack: derived only */
}

/* A launch whose arguments would overrun a tensor opens (verify checks the layout, and these
 * bytes are well formed), and libhkrt's check refuses it naming the graph, the launch, the
 * argument, the tensor and both numbers -- for the host target and for the GPU one alike. */
static void test_extents_forged(void **ts) {
  state_t *st = *ts;
  const char *add = "graph 0 (target " FX_HOST ", batch 2) launch 0 (node add, kernel hk_test_addc, op rmsnorm): ";
  char want[512];
  snprintf(want, sizeof want, "%sargument 0 (x): the pack's EXTENTS record says 800 bytes, the launch's arguments "
           "give 26214400 (the record and the arguments disagree)", add);
  EXTENTS_REFUSED(p_ext_rows, 0, want);
  snprintf(want, sizeof want, "%sargument 0 (x) may touch 26214400 bytes of tensor x, which has 800 bytes at batch 2",
           add);
  EXTENTS_REFUSED(p_ext_rows_record, 0, want);
  EXTENTS_REFUSED(p_ext_old_rows, 0, want); /* no record in a 1.5 pack: the derivation alone */
  EXTENTS_REFUSED(p_ext_out_param, 0, "launch 1 (node mul, kernel hk_test_mul, op mul): argument 2 (out) may touch "
                                      "800 bytes of tensor w, which has 400 bytes at batch 2");
  EXTENTS_REFUSED(p_ext_cuda, 2, "graph 2 (target sm_90, batch 2) launch 1 (node mul, kernel hk_test_mul, op mul): "
                                 "argument 2 (out) may touch 800 bytes of tensor w, which has 400 bytes at batch 2");
  EXTENTS_REFUSED(p_ext_kind, 0, "argument 3 (rows) is a float, where the rmsnorm argument layout has an integer");
  EXTENTS_REFUSED(p_ext_null, 0, "argument 0 (x) is a null pointer, where the rmsnorm argument layout has a tensor");
  EXTENTS_REFUSED(p_ext_count, 0, "7 argument(s) (7 before the variant's tensor maps, scratch and semaphores) do not "
                                  "follow the rmsnorm argument layout");
  EXTENTS_REFUSED(p_ext_zero, 0, "argument 3 (rows) is 0; the rmsnorm argument layout needs at least 1");
  EXTENTS_REFUSED(p_ext_negative, 0, "launch 1 (node mul, kernel hk_test_mul, op mul): argument 5 (nb) is -100");
  EXTENTS_REFUSED(p_ext_dtype, 0, "argument 1 (gamma) is tensor w of dtype f16; the rmsnorm argument layout reads "
                                  "f32 there (the pack's element type)");
  EXTENTS_REFUSED(p_ext_overflow, 0, "argument 0 (x): the pack's EXTENTS record says 800 bytes, the launch's "
                                     "arguments give 18446744073709551615");
  PATCHED(p_ext_missing, HK_STATUS_CORRUPT, "required section EXTENTS is missing (a format 1.11 file records its "
                                            "launches' extents)");
  PATCHED(p_ext_not_tensor, HK_STATUS_CORRUPT, "EXTENTS entry 3 is 8, but argument 3 is not a tensor");
  PATCHED(p_ext_size, HK_STATUS_CORRUPT, "(EXTENTS): size 440, expected 448 (8 bytes for each of the 56 arguments)");
  PATCHED(p_ext_flags, HK_STATUS_CORRUPT, "(EXTENTS): must be stored uncompressed and flagged optional");
  PATCHED(p_ext_target, HK_STATUS_CORRUPT, "(EXTENTS): target field must be 0xffffffff");
}

/* hkc refuses to write what libhkrt would refuse: a launch whose extent exceeds its tensor,
 * arguments that are not those of the kernel's op, and a record (hkc merge's) that disagrees
 * with the arguments. */
static void test_extents_writer_rejects(void **ts) {
  state_t *st = *ts;
  void *data = NULL;
  size_t n;
  hkc_launch_t *mul = &st->fx.launches[0][1];
  mul->args[2].i = 1; /* out: w */
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), -1);
  assert_non_null(strstr(st->diag, "cannot write the artifact: target " FX_HOST " batch 2 launch 1 (mul, kernel "
                                   "hk_test_mul) argument 2 may touch 800 bytes of tensor w (400 bytes)"));
  mul->args[2].i = 3;
  mul->args[4].kind = HK_ARG_F32;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), -1);
  assert_non_null(strstr(st->diag, "launch 1 (mul, kernel hk_test_mul): its 6 arguments are not those the kernel's "
                                   "op takes"));
  mul->args[4].kind = HK_ARG_I64;
  const uint64_t wrong[6] = {800, 400, 796, 0, 0, 0}; /* fits y, but mul's arguments say 800 bytes */
  mul->extents = wrong;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), -1);
  assert_non_null(strstr(st->diag, "cannot write the artifact: libhkrt would refuse it: graph 0 (target " FX_HOST
                                   ", batch 2) launch 1 (node mul, kernel hk_test_mul, op mul): argument 2 (out): the "
                                   "pack's EXTENTS record says 796 bytes, the launch's arguments give 800"));
  assert_null(data);
  const uint64_t right[6] = {800, 400, 800, 0, 0, 0};
  mul->extents = right; /* a record that agrees (hkc merge's copy of an input's) is written as given */
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &n), 0);
  assert_int_equal(n, st->size);
  assert_memory_equal(data, st->pack, n);
  free(data);
}

static void test_open_arguments(void **ts) {
  state_t *st = *ts;
  hk_pack_t *pack = (hk_pack_t *)1;
  assert_int_equal(hk_pack_open_memory(NULL, 10, NULL, &pack), HK_STATUS_INVALID_ARGUMENT);
  assert_null(pack);
  assert_int_equal(hk_pack_open_memory(st->pack, st->size, NULL, NULL), HK_STATUS_INVALID_ARGUMENT);
  hk_allocator_t half = {.alloc = NULL, .free = NULL, .ctx = NULL};
  assert_int_equal(hk_test_open_memory(st->pack, st->size, &half, &pack), HK_OK); /* zero: libc */
  hk_pack_destroy(pack);
  assert_int_equal(hk_pack_open_file(NULL, NULL, &pack), HK_STATUS_INVALID_ARGUMENT);
  assert_string_equal(hk_status_string(HK_STATUS_CORRUPT), "CORRUPT");
  assert_string_equal(hk_status_string(HK_STATUS_NO_COMPATIBLE_TARGET), "NO_COMPATIBLE_TARGET");
  assert_string_equal(hk_status_string((hk_status_t)99), "UNKNOWN_STATUS");
}

/* Seeds of the verifier's hardening cases (checksums left stale: the harness fixes them up), from a
 * fresh fixture with PLAN, so every record kind the cases touch is in the corpus. */
static int write_verify_corpus(const char *dir) {
  static const struct { const char *name; patch_fn patch; } seeds[] = {
      {"unreferenced_node_plan", p_node_unreferenced}, {"kernel_range_foreign", p_kernel_range_foreign},
      {"deps_shared", p_dep_shared},                   {"tensor_name_path", p_tensor_path},
      {"params_escape", p_params_escape},              {"frame_no_checksum", p_frame_no_checksum},
  };
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    state_t *st;
    if (setup((void **)&st) != 0) return 1;
    size_t size;
    uint8_t *b = write_with_plan(st, &size);
    seeds[i].patch(b, size);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, seeds[i].name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, size, f) != size) return 1;
    fclose(f);
    free(b);
    teardown((void **)&st);
  }
  return 0;
}

/* ---- stored weights (format 1.4) ------------------------------------------------------------ */
static uint8_t *write_with_weights(state_t *st, size_t *out_size) {
  fx_add_weights(&st->fx, 0);
  void *data = NULL;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, out_size), 0);
  return data;
}
static hk_weight_rec_t *weight_recs(uint8_t *b) { return fx_payload(b, HK_SECTION_WEIGHTS_INDEX); }

static void test_weights_roundtrip(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_weights(st, &size);
  hk_pack_t *pack = NULL;
  assert_int_equal(hk_test_open_memory(buf, size, NULL, &pack), HK_OK);
  assert_int_equal(hk_pack_weight_count(pack), 1);
  const hk_pack_view_t *v = hk_pack_view(pack);
  assert_int_equal(v->header->version_minor, HK_PACK_VERSION_MINOR);
  assert_int_equal(v->weight_count, 1);
  assert_int_equal(v->weight_recs[0].tensor, 1); /* w */
  assert_int_equal(v->weight_recs[0].offset, 0);
  assert_int_equal(v->weight_recs[0].size, FX_COLS * 4);
  assert_int_equal(v->weights_size, FX_COLS * 4);
  assert_memory_equal(v->weights, st->fx.weight_values, FX_COLS * 4);
  assert_int_equal((uintptr_t)(v->weights - v->base) % HK_WEIGHTS_ALIGN, 0);
  const hk_section_t *si = sec(buf, HK_SECTION_WEIGHTS_INDEX), *sd = sec(buf, HK_SECTION_WEIGHTS);
  assert_int_equal(si->flags, HK_SECTION_FLAG_OPTIONAL);
  assert_int_equal(sd->flags, HK_SECTION_FLAG_OPTIONAL); /* raw: used in place */
  assert_true(sd->offset > si->offset);                  /* after everything a 1.3 reader knows */
  hk_pack_destroy(pack);
  /* A pack without weights has none, and the accessor is 0 for NULL. */
  assert_int_equal(hk_test_open_memory(st->pack, st->size, NULL, &pack), HK_OK);
  assert_int_equal(hk_pack_weight_count(pack), 0);
  assert_null(hk_pack_view(pack)->weight_recs);
  hk_pack_destroy(pack);
  assert_int_equal(hk_pack_weight_count(NULL), 0);
  /* A loader before 1.4 skips both sections: they are optional kinds it does not know. */
  uint8_t *copy = fx_copy(buf, size);
  sec(copy, HK_SECTION_WEIGHTS_INDEX)->kind = 98;
  sec(copy, HK_SECTION_WEIGHTS)->kind = 99;
  hk_test_refix(copy, size);
  EXPECT_OPEN(copy, size, HK_OK, NULL);
  free(copy);
  free(buf);
}

static void p_w_input(uint8_t *b, size_t n) { weight_recs(b)[0].tensor = 0; }
static void p_w_range(uint8_t *b, size_t n) { weight_recs(b)[0].tensor = 9; }
static void p_w_size(uint8_t *b, size_t n) { weight_recs(b)[0].size -= 4; }
static void p_w_offset(uint8_t *b, size_t n) { weight_recs(b)[0].offset = 64; }
static void p_w_reserved(uint8_t *b, size_t n) { weight_recs(b)[0].reserved0 = 1; }
static void p_w_no_data(uint8_t *b, size_t n) { sec(b, HK_SECTION_WEIGHTS)->kind = 99; }
static void p_w_no_index(uint8_t *b, size_t n) { sec(b, HK_SECTION_WEIGHTS_INDEX)->kind = 99; }
static void p_w_zstd(uint8_t *b, size_t n) { sec(b, HK_SECTION_WEIGHTS)->flags |= HK_SECTION_FLAG_ZSTD; }
static void p_w_required(uint8_t *b, size_t n) { sec(b, HK_SECTION_WEIGHTS_INDEX)->flags = 0; }
static void p_w_target(uint8_t *b, size_t n) { sec(b, HK_SECTION_WEIGHTS)->target = 0; }
static void p_w_twice(uint8_t *b, size_t n) { sec(b, HK_SECTION_WEIGHTS)->kind = HK_SECTION_WEIGHTS_INDEX; }
static void p_w_partial(uint8_t *b, size_t n) {
  sec(b, HK_SECTION_WEIGHTS_INDEX)->size = sec(b, HK_SECTION_WEIGHTS_INDEX)->raw_size = 25;
}
static void p_w_batched(uint8_t *b, size_t n) { tns(b)[1].dims[0] = (hk_dim_rec_t){1, 0}; }
static void p_w_raw(uint8_t *b, size_t n) { sec(b, HK_SECTION_WEIGHTS)->raw_size += 1; }
static void test_weights_corrupt(void **ts) {
  state_t *st = *ts;
  size_t size;
  uint8_t *buf = write_with_weights(st, &size);
#define W_PATCHED(fn, needle) expect_patched_in(buf, size, fn, HK_STATUS_CORRUPT, needle, __LINE__)
  W_PATCHED(p_w_input, "weights record 0: tensor 0 (x) is not a param");
  W_PATCHED(p_w_range, "weights record 0: tensor 9 out of range (4 tensors)");
  W_PATCHED(p_w_size, "weights record 0 (w): 396 bytes, the tensor has 400");
  W_PATCHED(p_w_offset, "weights record 0 (w): bytes [64, +400) are not at 0");
  W_PATCHED(p_w_reserved, "weights record 0: reserved field is not zero");
  W_PATCHED(p_w_no_data, "section WEIGHTS_INDEX without a WEIGHTS section");
  W_PATCHED(p_w_no_index, "section WEIGHTS without a WEIGHTS_INDEX section");
  W_PATCHED(p_w_zstd, "(WEIGHTS): must be stored uncompressed and flagged optional");
  W_PATCHED(p_w_required, "(WEIGHTS_INDEX): must be stored uncompressed and flagged optional");
  W_PATCHED(p_w_target, "(WEIGHTS): target field must be 0xffffffff");
  W_PATCHED(p_w_twice, "section WEIGHTS_INDEX appears more than once");
  W_PATCHED(p_w_partial, "section WEIGHTS_INDEX: size 25 is not a multiple of 24 bytes");
  W_PATCHED(p_w_batched, "weights record 0: param 1 (w) has a dimension that depends on batch");
  W_PATCHED(p_w_raw, "(WEIGHTS): must be stored uncompressed");
#undef W_PATCHED
  /* A flipped weight byte, checksums left as they are: the section's checksum names it. */
  uint8_t *copy = fx_copy(buf, size);
  copy[sec(copy, HK_SECTION_WEIGHTS)->offset + 123] ^= 0x04;
  EXPECT_OPEN(copy, size, HK_STATUS_CORRUPT, "(WEIGHTS): checksum mismatch");
  free(copy);
  free(buf);
}

/* The writer refuses weights that are not a param of the spec, of another size, or not
 * ascending. */
static void test_weights_writer_rejects(void **ts) {
  state_t *st = *ts;
  fx_add_weights(&st->fx, 0);
  void *data = NULL;
  size_t size;
  st->fx.weight.bytes = FX_COLS * 4 - 4;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), -1);
  assert_non_null(strstr(st->diag, "weights entry 0 (tensor 1)"));
  st->fx.weight.bytes = FX_COLS * 4;
  st->fx.weight.tensor = 0; /* x: an input */
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), -1);
  hkc_weight_in_t two[2] = {{1, st->fx.weight_values, FX_COLS * 4, NULL}, {1, st->fx.weight_values, FX_COLS * 4, NULL}};
  st->fx.in.weights = two;
  st->fx.in.n_weights = 2;
  assert_int_equal(hkc_pack_write_memory(&st->fx.in, &data, &size), -1);
  assert_null(data);
}

/* Seeds of launch extents (format 1.6; checksums left stale: the harness fixes them up): a
 * valid pack, and launches that open but that the check refuses. */
static int write_extents_corpus(const char *dir) {
  static const struct { const char *name; patch_fn patch; } seeds[] = {
      {"extents_valid", NULL},
      {"extents_rows_over", p_ext_rows_record},
      {"extents_record_disagrees", p_ext_rows},
      {"extents_out_into_param", p_ext_out_param},
      {"extents_sm90_out", p_ext_cuda},
      {"extents_layout_kind", p_ext_kind},
      {"extents_old_rows", p_ext_old_rows},
  };
  state_t *st;
  if (setup((void **)&st) != 0) return 1;
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    uint8_t *b = fx_copy(st->pack, st->size);
    if (seeds[i].patch) seeds[i].patch(b, st->size);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, seeds[i].name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, st->size, f) != st->size) return 1;
    fclose(f);
    free(b);
  }
  teardown((void **)&st);
  return 0;
}

/* Seed corpus for tests/fuzz/fuzz_pack: valid packs and damaged variants, written to
 * $HK_WRITE_FUZZ_CORPUS instead of running the tests. */
static int write_corpus(const char *dir) {
  state_t *st;
  if (setup((void **)&st) != 0) return 1;
  struct { const char *name; size_t cut; int flip; int one_target; int major; int plan; } seeds[] = {
      {"valid_two_targets", 0, -1, 0, 0, 0}, {"valid_host_only", 0, -1, 1, 0, 0}, {"truncated_100", 100, -1, 0, 0, 0},
      {"truncated_700", 700, -1, 0, 0, 0},   {"flipped_900", 0, 900, 0, 0, 0},    {"version_2", 0, -1, 0, 2, 0},
      /* PLAN: a valid one, and one the harness' checksum fix-up turns into a record error */
      {"valid_with_plan", 0, -1, 0, 0, 1},   {"plan_fused_zero", 0, -1, 0, 0, 2},
  };
  for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
    st->fx.in.n_targets = seeds[i].one_target ? 1 : 2;
    for (int g = 0; g < 2; g++) st->fx.graphs[g].costs = NULL, st->fx.graphs[g].fused_counts = NULL;
    if (seeds[i].plan) fx_add_plan(&st->fx);
    void *data;
    size_t size;
    if (hkc_pack_write_memory(&st->fx.in, &data, &size) != 0) return 1;
    uint8_t *b = data;
    if (seeds[i].plan == 2) plan_nodes(b)[3].fused_nodes = 0; /* checksum left stale on purpose */
    if (seeds[i].cut) size = seeds[i].cut;
    if (seeds[i].flip >= 0) b[seeds[i].flip] ^= 0x10;
    if (seeds[i].major) {
      ((hk_pack_header_t *)b)->version_major = (uint16_t)seeds[i].major;
      hk_test_refix(b, size);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, seeds[i].name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, size, f) != size) return 1;
    fclose(f);
    free(data);
  }
  /* TMAP arguments (format 1.2): a valid pack, and one whose box the harness' checksum fix-up
   * turns into a record error */
  st->fx.in.n_targets = 2;
  fx_add_tmap(&st->fx, 0, TMAP_X);
  fx_add_tmap(&st->fx, 1, TMAP_T);
  void *data;
  size_t size;
  if (hkc_pack_write_memory(&st->fx.in, &data, &size) != 0) return 1;
  for (int bad = 0; bad < 2; bad++) {
    if (bad) tmap_arg(data)->value = hk_tmap_pack(0, 32, 300, HK_TMAP_SWIZZLE_128B); /* checksum left stale */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, bad ? "tmap_box_300" : "valid_tmap");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size) return 1;
    fclose(f);
  }
  free(data);
  /* node flags (format 1.2): PDL on the sm_90 mul launches (with their tensor maps), and an
   * unknown flag bit the harness' checksum fix-up turns into a record error */
  fx_add_pdl(&st->fx, 1);
  if (hkc_pack_write_memory(&st->fx.in, &data, &size) != 0) return 1;
  for (int bad = 0; bad < 2; bad++) {
    if (bad) nod(data)[5].flags |= 0x4; /* checksum left stale */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, bad ? "pdl_flag_unknown" : "valid_pdl");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size) return 1;
    fclose(f);
  }
  free(data);
  /* PTX (format 1.3): a valid pack with the sm_90 target's PTX, and a record whose range the
   * harness' checksum fix-up turns into a record error */
  data = write_with_ptx(st, &size);
  for (int bad = 0; bad < 2; bad++) {
    if (bad) ptx_recs(data)[1].size = 4096; /* checksum left stale */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, bad ? "ptx_range_out" : "valid_ptx");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size) return 1;
    fclose(f);
  }
  free(data);
  /* scratch and semaphores (format 1.3) on the sm_90 mul launches, and a scratch range past
   * the workspace that the harness' checksum fix-up turns into a record error */
  fx_add_workspace(&st->fx, 1, WS_SCRATCH, WS_SEMAPHORE, 4);
  if (hkc_pack_write_memory(&st->fx.in, &data, &size) != 0) return 1;
  for (int bad = 0; bad < 2; bad++) {
    if (bad) kind_arg(data, HK_ARG_SCRATCH)->value = hk_scratch_pack(2, 3); /* checksum left stale */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, bad ? "scratch_outside" : "valid_workspace");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size) return 1;
    fclose(f);
  }
  free(data);
  /* stored weights (format 1.4): a valid pack with w in WEIGHTS, and a record whose offset the
   * harness' checksum fix-up turns into a record error */
  data = write_with_weights(st, &size);
  for (int bad = 0; bad < 2; bad++) {
    if (bad) weight_recs(data)[0].offset = 64; /* checksum left stale */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, bad ? "weights_offset_bad" : "valid_weights");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size) return 1;
    fclose(f);
  }
  free(data);
  teardown((void **)&st);
  /* PARTS (format 1.4): w made of two checkpoint tensors, and the same with a part named twice */
  if (setup((void **)&st) != 0) return 1;
  uint8_t *parts = write_with_parts(st, &size);
  for (int bad = 0; bad < 2; bad++) {
    if (bad) part_recs(parts)[1].name = part_recs(parts)[0].name; /* checksum left stale */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, bad ? "parts_named_twice" : "valid_parts");
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(parts, 1, size, f) != size) return 1;
    fclose(f);
  }
  free(parts);
  teardown((void **)&st);
  return write_verify_corpus(dir) || write_extents_corpus(dir);
}

int main(void) {
  if (getenv("HK_WRITE_FUZZ_CORPUS")) return write_corpus(getenv("HK_WRITE_FUZZ_CORPUS"));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_roundtrip_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unaligned_memory_is_copied, setup, teardown),
      cmocka_unit_test_setup_teardown(test_deterministic, setup, teardown),
      cmocka_unit_test_setup_teardown(test_write_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_atomic_write, setup, teardown),
      cmocka_unit_test_setup_teardown(test_writer_rejects_bad_input, setup, teardown),
      cmocka_unit_test_setup_teardown(test_truncation, setup, teardown),
      cmocka_unit_test_setup_teardown(test_flip_every_byte, setup, teardown),
      cmocka_unit_test_setup_teardown(test_flip_messages, setup, teardown),
      cmocka_unit_test_setup_teardown(test_patched_records, setup, teardown),
      cmocka_unit_test_setup_teardown(test_verify_records, setup, teardown),
      cmocka_unit_test_setup_teardown(test_verify_limits, setup, teardown),
      cmocka_unit_test_setup_teardown(test_verify_inspect, setup, teardown),
      cmocka_unit_test_setup_teardown(test_names_from_the_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plan_absent, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plan_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plan_corrupt, setup, teardown),
      cmocka_unit_test(test_tmap_fields),
      cmocka_unit_test_setup_teardown(test_tmap_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tmap_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tmap_writer_rejects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_older_minor, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ptx_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ptx_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ptx_writer_rejects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_weights_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_weights_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_weights_writer_rejects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_parts_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_parts_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pdl_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pdl_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pdl_writer_rejects, setup, teardown),
      cmocka_unit_test(test_workspace_fields),
      cmocka_unit_test_setup_teardown(test_workspace_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_workspace_corrupt, setup, teardown),
      cmocka_unit_test_setup_teardown(test_workspace_writer_rejects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_extents_roundtrip, setup, teardown),
      cmocka_unit_test_setup_teardown(test_extents_forged, setup, teardown),
      cmocka_unit_test_setup_teardown(test_extents_writer_rejects, setup, teardown),
      cmocka_unit_test_setup_teardown(test_open_arguments, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
