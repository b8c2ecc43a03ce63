/* SPDX-License-Identifier: Apache-2.0 */
/*
 * verify.c -- checks an untrusted artifact before anything else reads it.
 *
 * Order: magic, endian tag, major version, header fields, header checksum, file size,
 * section table bounds + checksum, each section (alignment, bounds, order/overlap,
 * flags, checksum), required sections, record sizes and counts, then every record:
 * string refs, enums, index ranges, shapes, node flags and TMA tensor map arguments (format
 * 1.2), scratch and semaphore arguments (1.3), placements, code frame sizes, the optional
 * PLAN section's size, flags and reserved fields, the optional PARTS records and stored
 * weights (1.4), and the EXTENTS section (1.6). Every record is checked whether a graph
 * references it or not, and each once (ranges tile their tables), so the work is
 * proportionate to the file, under the open options' limits.
 * Names are restricted to safe characters: they reach terminals, logs and file names.
 * The first problem found is reported as CORRUPT (or UNSUPPORTED_VERSION) with what
 * and where.
 * No allocation: the view points into the caller's bytes.
 */
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_getFrameHeader: the content checksum flag */
#include <zstd.h>

#include "pack_internal.h"
#include "status_internal.h"
#include "util_internal.h"

#define CORRUPT(...) HK_ERROR(HK_STATUS_CORRUPT, __VA_ARGS__)
#define CHECK(cond, ...) HK_FAIL_IF(!(cond), HK_STATUS_CORRUPT, __VA_ARGS__)

static const char *section_kind_name(uint32_t kind) {
  if (kind == HK_SECTION_WEIGHTS_INDEX) return "WEIGHTS_INDEX";
  if (kind == HK_SECTION_WEIGHTS) return "WEIGHTS";
  if (kind == HK_SECTION_EXTENTS) return "EXTENTS";
  if (kind == HK_SECTION_PARALLEL) return "PARALLEL";
  static const char *const names[] = {"?", "STRINGS", "MANIFEST", "TARGETS", "KERNELS", "TENSORS", "GRAPHS",
                                      "NODES", "ARGS", "DEPS", "PLACEMENTS", "PROVENANCE", "CODE", "PLAN",
                                      "SIGNATURE", "PTX_INDEX", "PTX", "PARTS"};
  return kind <= HK_SECTION_PARTS ? names[kind] : "unknown";
}

const char *hk_dtype_label(uint32_t dtype) {
  switch (dtype) {
  case HK_DTYPE_F32: return "f32";
  case HK_DTYPE_F16: return "f16";
  case HK_DTYPE_BF16: return "bf16";
  case HK_DTYPE_I32: return "i32";
  case HK_DTYPE_I8: return "int8";
  case HK_DTYPE_FP8_E4M3: return "fp8_e4m3";
  default: return "?";
  }
}

bool hk_tensor_shape(const hk_tensor_rec_t *tensor, uint64_t batch, int64_t out_dims[HK_MAX_RANK],
                     uint64_t *out_bytes) {
  if (batch > INT64_MAX || tensor->rank < 1 || tensor->rank > HK_MAX_RANK || tensor->dtype >= HK_DTYPE_COUNT_)
    return false;
  uint64_t bytes = hk_dtype_bytes(tensor->dtype);
  for (uint32_t d = 0; d < tensor->rank; d++) {
    int64_t v;
    if (__builtin_mul_overflow(tensor->dims[d].mul, (int64_t)batch, &v) ||
        __builtin_add_overflow(v, tensor->dims[d].add, &v) || v <= 0)
      return false;
    if (!hk_mul_u64(bytes, (uint64_t)v, &bytes)) return false;
    if (out_dims) out_dims[d] = v;
  }
  if (bytes >= HK_MAX_TENSOR_BYTES || bytes > SIZE_MAX) return false;
  if (out_bytes) *out_bytes = bytes;
  return true;
}

/* What a string may hold. Names reach terminals and logs (hkc inspect, error messages) and
 * tensor names become file names (hkc run --save-outputs DIR writes DIR/<name>.npy), so no
 * control bytes, no '/', and a tensor name never starts with '.' or '-'. */
typedef enum name_kind {
  NAME_FILE, /* tensor names: [A-Za-z0-9_.-], non-empty, not starting with '.' or '-' */
  NAME_ID,   /* spec, target, kernel and node names, ISA features: [A-Za-z0-9_.,:+=-] */
  NAME_TEXT, /* kernel params: printable ASCII (0x20..0x7e) */
} name_kind_t;

static bool name_char_ok(unsigned char c, name_kind_t kind) {
  if (kind == NAME_TEXT) return c >= 0x20 && c <= 0x7e;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-')
    return true;
  return kind == NAME_ID && (c == ',' || c == ':' || c == '+' || c == '=');
}

/* A string ref must start inside STRINGS, end (NUL) within HK_MAX_NAME_LEN+1 bytes and hold
 * only the characters of `kind`. The message shows a bad byte as hex, never raw. */
static hk_status_t check_string_as(const hk_pack_view_t *v, uint32_t ref, name_kind_t kind, const char *what,
                                   uint64_t index) {
  CHECK(ref < v->strings_size, "%s %llu: string ref %u is outside STRINGS (%llu bytes)", what,
        (unsigned long long)index, ref, (unsigned long long)v->strings_size);
  uint64_t avail = v->strings_size - ref;
  if (avail > HK_MAX_NAME_LEN + 1) avail = HK_MAX_NAME_LEN + 1;
  CHECK(memchr(v->strings + ref, 0, (size_t)avail) != NULL,
        "%s %llu: string at %u is not NUL-terminated within %u bytes", what, (unsigned long long)index, ref,
        HK_MAX_NAME_LEN + 1);
  const unsigned char *p = (const unsigned char *)v->strings + ref;
  for (size_t i = 0; p[i]; i++)
    CHECK(name_char_ok(p[i], kind), "%s %llu: name byte %zu is 0x%02x, not one names may hold (%s)", what,
          (unsigned long long)index, i, p[i],
          kind == NAME_TEXT ? "printable ASCII" : kind == NAME_ID ? "letters, digits and _ . , : + = -"
                                                                  : "letters, digits and _ . -");
  CHECK(kind != NAME_FILE || (p[0] != '\0' && p[0] != '.' && p[0] != '-'),
        "%s %llu: name \"%s\" is empty or starts with '.' or '-' (tensor names become file names)", what,
        (unsigned long long)index, (const char *)p);
  return HK_OK;
}

static hk_status_t check_string(const hk_pack_view_t *v, uint32_t ref, const char *what, uint64_t index) {
  return check_string_as(v, ref, NAME_ID, what, index);
}

/* A [first, first+count) range of a table with `total` entries. */
static hk_status_t check_range(uint64_t first, uint64_t count, uint64_t total, const char *what, uint64_t index,
                               const char *table) {
  CHECK(hk_range_ok(first, count, total), "%s %llu: %s range [%llu, +%llu) is outside %s (%llu entries)", what,
        (unsigned long long)index, table, (unsigned long long)first, (unsigned long long)count, table,
        (unsigned long long)total);
  return HK_OK;
}

static hk_status_t verify_header(const uint8_t *data, size_t size, const hk_pack_header_t **out_header) {
  CHECK(size > 0 && (size >= HK_PACK_MAGIC_SIZE || memcmp(data, HK_PACK_MAGIC, size) != 0),
        "truncated: file has %zu bytes, the header needs %zu", size, sizeof(hk_pack_header_t));
  CHECK(size >= HK_PACK_MAGIC_SIZE && memcmp(data, HK_PACK_MAGIC, HK_PACK_MAGIC_SIZE) == 0,
        "not an hkpack artifact (bad magic: expected 89 48 4B 50 0D 0A 1A 0A%s)",
        size >= 5 && memcmp(data, "\x89HKP\n", 5) == 0 ? "; the file went through a line-ending conversion" : "");
  /* The first 16 bytes keep their meaning in every format version. */
  CHECK(size >= 16, "truncated: file has %zu bytes, the header needs %zu", size, sizeof(hk_pack_header_t));
  const hk_pack_header_t *h = (const hk_pack_header_t *)data;
  if (h->endian_tag != HK_PACK_ENDIAN_TAG) {
    return CORRUPT("wrong byte order: endian tag is 0x%08x, expected 0x%08x (the artifact was written on a %s host)",
                   h->endian_tag, HK_PACK_ENDIAN_TAG,
                   h->endian_tag == __builtin_bswap32(HK_PACK_ENDIAN_TAG) ? "big-endian" : "different or corrupt");
  }
  HK_FAIL_IF(h->version_major != HK_PACK_VERSION_MAJOR, HK_STATUS_UNSUPPORTED_VERSION,
             "artifact format %u.x (%u.%u); this loader reads %u.x (use an hkc and libhkrt of the same major version)",
             h->version_major, h->version_major, h->version_minor, HK_PACK_VERSION_MAJOR);
  CHECK(size >= sizeof(hk_pack_header_t), "truncated: file has %zu bytes, the header needs %zu", size,
        sizeof(hk_pack_header_t));
  CHECK(h->header_size == sizeof(hk_pack_header_t), "header_size is %u, expected %zu", h->header_size,
        sizeof(hk_pack_header_t));
  CHECK(h->section_entry_size == sizeof(hk_section_t), "section_entry_size is %u, expected %zu",
        h->section_entry_size, sizeof(hk_section_t));
  hk_pack_header_t copy;
  memcpy(&copy, h, sizeof copy);
  copy.header_checksum = 0;
  uint64_t sum = XXH3_64bits(&copy, sizeof copy);
  CHECK(sum == h->header_checksum, "header checksum mismatch (stored %016llx, computed %016llx)",
        (unsigned long long)h->header_checksum, (unsigned long long)sum);
  CHECK(h->file_size <= size, "truncated: header says %llu bytes, file has %zu", (unsigned long long)h->file_size,
        size);
  CHECK(h->file_size == size, "trailing bytes: header says %llu bytes, file has %zu",
        (unsigned long long)h->file_size, size);
  CHECK(h->reserved0 == 0, "header reserved field is not zero");
  *out_header = h;
  return HK_OK;
}

static hk_status_t verify_sections(hk_pack_view_t *v) {
  const hk_pack_header_t *h = v->header;
  CHECK(h->section_count >= 1 && h->section_count <= HK_MAX_SECTIONS, "section_count %u is outside 1..%u",
        h->section_count, HK_MAX_SECTIONS);
  uint64_t table_bytes = (uint64_t)h->section_count * sizeof(hk_section_t);
  uint64_t table_end;
  CHECK(h->section_table_offset % 8 == 0 && h->section_table_offset >= sizeof(hk_pack_header_t) &&
            hk_add_u64(h->section_table_offset, table_bytes, &table_end) && table_end <= v->size,
        "section table [%llu, +%llu) is not inside the file (%llu bytes) after the header",
        (unsigned long long)h->section_table_offset, (unsigned long long)table_bytes, (unsigned long long)v->size);
  uint64_t sum = XXH3_64bits(v->base + h->section_table_offset, (size_t)table_bytes);
  CHECK(sum == h->table_checksum, "section table checksum mismatch (stored %016llx, computed %016llx)",
        (unsigned long long)h->table_checksum, (unsigned long long)sum);
  v->sections = (const hk_section_t *)(v->base + h->section_table_offset);
  v->section_count = h->section_count;

  uint64_t prev_end = sizeof(hk_pack_header_t);
  for (uint32_t i = 0; i < v->section_count; i++) {
    const hk_section_t *s = &v->sections[i];
    const char *kn = section_kind_name(s->kind);
    CHECK(s->offset % HK_SECTION_ALIGN == 0, "section %u (%s): offset %llu is not a multiple of %u", i, kn,
          (unsigned long long)s->offset, HK_SECTION_ALIGN);
    CHECK(hk_range_ok(s->offset, s->size, v->size), "section %u (%s): [%llu, +%llu) is outside the file (%llu bytes)",
          i, kn, (unsigned long long)s->offset, (unsigned long long)s->size, (unsigned long long)v->size);
    CHECK(s->offset >= prev_end, "section %u (%s) at %llu overlaps the header or the previous section (ends at %llu); "
          "sections must be stored in increasing offset order", i, kn, (unsigned long long)s->offset,
          (unsigned long long)prev_end);
    /* Padding before this section (after the table or the previous section) is zero,
     * so that no byte of a valid file escapes verification. */
    uint64_t gap = prev_end > table_end || s->offset < table_end ? prev_end : table_end;
    for (uint64_t b = gap; b < s->offset; b++)
      CHECK(v->base[b] == 0, "section %u (%s): padding byte at %llu is not zero", i, kn, (unsigned long long)b);
    uint64_t end = s->offset + s->size;
    CHECK(s->size == 0 || end <= h->section_table_offset || s->offset >= table_end,
          "section %u (%s) [%llu, %llu) overlaps the section table", i, kn, (unsigned long long)s->offset,
          (unsigned long long)end);
    prev_end = end;
    CHECK((s->flags & ~(HK_SECTION_FLAG_ZSTD | HK_SECTION_FLAG_OPTIONAL)) == 0, "section %u (%s): unknown flags 0x%x",
          i, kn, s->flags);
    CHECK(s->reserved == 0, "section %u (%s): reserved field is not zero", i, kn);
    uint64_t cs = XXH3_64bits(v->base + s->offset, (size_t)s->size);
    CHECK(cs == s->checksum, "section %u (%s): checksum mismatch (stored %016llx, computed %016llx)", i, kn,
          (unsigned long long)s->checksum, (unsigned long long)cs);
  }
  for (uint64_t b = prev_end > table_end ? prev_end : table_end; b < v->size; b++)
    CHECK(v->base[b] == 0, "trailing byte at %llu (after the last section) is not zero", (unsigned long long)b);
  return HK_OK;
}

/* The most bytes CODE section s may decompress to: the open options' limit, else in
 * proportion to its stored size; never above the format's HK_MAX_CODE_BYTES. */
static uint64_t code_limit(const hk_section_t *s, const hk_pack_limits_t *lim) {
  uint64_t limit = lim->max_code_bytes;
  if (limit == 0 && (!hk_mul_u64(s->size, HK_CODE_RATIO_MAX, &limit) ||
                     !hk_add_u64(limit, HK_CODE_SLACK_BYTES, &limit)))
    limit = HK_MAX_CODE_BYTES;
  return limit < HK_MAX_CODE_BYTES ? limit : HK_MAX_CODE_BYTES;
}

/* Finds the required sections (exactly once each) and sizes the record tables. */
static hk_status_t map_tables(hk_pack_view_t *v, const hk_pack_limits_t *lim) {
  const hk_section_t *found[HK_SECTION_CODE] = {0};
  const hk_section_t *plan = NULL;
  for (uint32_t i = 0; i < v->section_count; i++) {
    const hk_section_t *s = &v->sections[i];
    if (s->kind == HK_SECTION_PLAN) {
      CHECK(plan == NULL, "section PLAN appears more than once (sections %u and %u)", (unsigned)(plan - v->sections),
            i);
      /* Optional by definition: a 1.0 reader must be able to skip it. */
      CHECK(s->flags == HK_SECTION_FLAG_OPTIONAL && s->raw_size == s->size,
            "section %u (PLAN): must be stored uncompressed and flagged optional (flags 0x%x, size %llu, raw_size "
            "%llu)", i, s->flags, (unsigned long long)s->size, (unsigned long long)s->raw_size);
      CHECK(s->target == UINT32_MAX, "section %u (PLAN): target field must be 0xffffffff", i);
      plan = s;
      continue;
    }
    if (s->kind == HK_SECTION_PTX || s->kind == HK_SECTION_PTX_INDEX) continue; /* verify_ptx */
    if (s->kind == HK_SECTION_WEIGHTS || s->kind == HK_SECTION_WEIGHTS_INDEX) continue; /* verify_weights */
    if (s->kind == HK_SECTION_PARTS) continue;                                  /* verify_parts */
    if (s->kind == HK_SECTION_EXTENTS) continue;                                /* verify_extents */
    if (s->kind == HK_SECTION_PARALLEL) continue;                               /* verify_parallel */
    if (s->kind == 0 || s->kind > HK_SECTION_CODE) {
      CHECK(s->flags & HK_SECTION_FLAG_OPTIONAL,
            "section %u has unknown kind %u and is not flagged optional (written by a newer hkc?)", i, s->kind);
      continue;
    }
    if (s->kind == HK_SECTION_CODE) {
      uint64_t limit = code_limit(s, lim);
      CHECK(s->raw_size <= limit, "section %u (CODE): raw_size %llu exceeds the limit %llu (%s)", i,
            (unsigned long long)s->raw_size, (unsigned long long)limit,
            lim->max_code_bytes ? "the open options' max_code_bytes"
                                : "128 x the stored size + 1 MiB, at most 1 GiB; the open options' max_code_bytes "
                                  "sets another");
      continue; /* targets and frames are checked after TARGETS is known */
    }
    CHECK(found[s->kind] == NULL, "section %s appears more than once (sections %u and %u)", section_kind_name(s->kind),
          (unsigned)(found[s->kind] - v->sections), i);
    CHECK(!(s->flags & HK_SECTION_FLAG_ZSTD) && s->raw_size == s->size,
          "section %u (%s): table sections are stored uncompressed (flags 0x%x, size %llu, raw_size %llu)", i,
          section_kind_name(s->kind), s->flags, (unsigned long long)s->size, (unsigned long long)s->raw_size);
    CHECK(s->target == UINT32_MAX, "section %u (%s): target field must be 0xffffffff", i, section_kind_name(s->kind));
    found[s->kind] = s;
  }
  for (uint32_t k = HK_SECTION_STRINGS; k < HK_SECTION_CODE; k++)
    CHECK(found[k] != NULL, "required section %s is missing", section_kind_name(k));

#define TABLE(kind, rec_type, ptr, count, limit)                                                            \
  do {                                                                                                      \
    const hk_section_t *s_ = found[kind];                                                                   \
    CHECK(s_->size % sizeof(rec_type) == 0, "section %s: size %llu is not a multiple of the record size %zu", \
          section_kind_name(kind), (unsigned long long)s_->size, sizeof(rec_type));                         \
    uint64_t n_ = s_->size / sizeof(rec_type);                                                              \
    CHECK(n_ <= (limit), "section %s: %llu records exceed the limit %llu", section_kind_name(kind),          \
          (unsigned long long)n_, (unsigned long long)(limit));                                             \
    v->ptr = (const rec_type *)(v->base + s_->offset);                                                      \
    v->count = (uint32_t)n_;                                                                                \
  } while (0)

  const hk_section_t *str = found[HK_SECTION_STRINGS];
  CHECK(str->size <= HK_MAX_STRINGS_BYTES, "section STRINGS: %llu bytes exceed the limit %u",
        (unsigned long long)str->size, HK_MAX_STRINGS_BYTES);
  v->strings = (const char *)(v->base + str->offset);
  v->strings_size = str->size;
  const hk_section_t *man = found[HK_SECTION_MANIFEST];
  CHECK(man->size == sizeof(hk_manifest_t), "section MANIFEST: size %llu, expected %zu",
        (unsigned long long)man->size, sizeof(hk_manifest_t));
  v->manifest = (const hk_manifest_t *)(v->base + man->offset);
  TABLE(HK_SECTION_TARGETS, hk_target_rec_t, targets, target_count, HK_MAX_TARGETS);
  TABLE(HK_SECTION_KERNELS, hk_kernel_rec_t, kernels, kernel_count, HK_MAX_KERNELS);
  TABLE(HK_SECTION_TENSORS, hk_tensor_rec_t, tensors, tensor_count, HK_MAX_TENSORS);
  TABLE(HK_SECTION_GRAPHS, hk_graph_rec_t, graphs, graph_count, HK_MAX_GRAPHS);
  TABLE(HK_SECTION_NODES, hk_node_rec_t, nodes, node_count, lim->max_nodes);
  TABLE(HK_SECTION_ARGS, hk_arg_rec_t, args, arg_count, (uint64_t)lim->max_nodes * HK_MAX_ARGS_PER_NODE);
  TABLE(HK_SECTION_DEPS, uint32_t, deps, dep_count, lim->max_deps);
#undef TABLE
  const hk_section_t *pl = found[HK_SECTION_PLACEMENTS];
  CHECK(pl->size % sizeof(uint64_t) == 0, "section PLACEMENTS: size %llu is not a multiple of 8",
        (unsigned long long)pl->size);
  v->placements = (const uint64_t *)(v->base + pl->offset);
  v->placement_count = pl->size / sizeof(uint64_t);
  const hk_section_t *prov = found[HK_SECTION_PROVENANCE];
  v->provenance = (const char *)(v->base + prov->offset);
  v->provenance_size = prov->size;
  if (plan) { /* counts are under their limits: no overflow */
    uint64_t want = (uint64_t)v->graph_count * sizeof(hk_plan_graph_rec_t) +
                    (uint64_t)v->node_count * sizeof(hk_plan_node_rec_t);
    CHECK(plan->size == want,
          "section PLAN: size %llu, expected %llu (%zu bytes per graph x %u graphs + %zu per node x %u nodes)",
          (unsigned long long)plan->size, (unsigned long long)want, sizeof(hk_plan_graph_rec_t), v->graph_count,
          sizeof(hk_plan_node_rec_t), v->node_count);
    v->plan_graphs = (const hk_plan_graph_rec_t *)(v->base + plan->offset);
    v->plan_nodes = (const hk_plan_node_rec_t *)(v->base + plan->offset +
                                                 (uint64_t)v->graph_count * sizeof(hk_plan_graph_rec_t));
  }
  return HK_OK;
}

static hk_status_t verify_manifest(const hk_pack_view_t *v) {
  const hk_manifest_t *m = v->manifest;
  HK_RETURN_IF_ERROR(check_string(v, m->name, "manifest", 0));
  CHECK(m->dtype < HK_DTYPE_FLOAT_COUNT, "manifest: dtype %u is not a known element type", m->dtype);
  CHECK(m->target_count == v->target_count, "manifest: target_count %u, but TARGETS has %u records", m->target_count,
        v->target_count);
  CHECK(m->target_count >= 1, "manifest: the artifact has no targets");
  CHECK(m->tensor_count == v->tensor_count, "manifest: tensor_count %u, but TENSORS has %u records", m->tensor_count,
        v->tensor_count);
  CHECK(m->batch_count >= 1 && m->batch_count <= HK_MAX_BATCH_BUCKETS, "manifest: batch_count %u is outside 1..%u",
        m->batch_count, HK_MAX_BATCH_BUCKETS);
  CHECK(m->batch_policy < HK_BATCH_POLICY_REC_COUNT_, "manifest: unknown batch policy %u", m->batch_policy);
  for (uint32_t i = 0; i < m->batch_count; i++) {
    CHECK(m->batch_sizes[i] >= 1 && m->batch_sizes[i] <= INT64_MAX, "manifest: batch size %llu is invalid",
          (unsigned long long)m->batch_sizes[i]);
    CHECK(i == 0 || m->batch_sizes[i] > m->batch_sizes[i - 1], "manifest: batch sizes are not strictly ascending");
  }
  return HK_OK;
}

/* A code payload (CODE, PTX) section i: a zstd frame that declares raw_size bytes, fills the
 * section and carries a content checksum; or stored raw (raw_size == size). */
static hk_status_t check_payload_frame(const hk_pack_view_t *v, uint32_t i) {
  const hk_section_t *s = &v->sections[i];
  const char *kn = section_kind_name(s->kind);
  if (s->flags & HK_SECTION_FLAG_ZSTD) {
    const void *src = v->base + s->offset;
    unsigned long long content = ZSTD_getFrameContentSize(src, (size_t)s->size);
    CHECK(content != ZSTD_CONTENTSIZE_ERROR && content != ZSTD_CONTENTSIZE_UNKNOWN,
          "section %u (%s): not a zstd frame with a declared content size", i, kn);
    CHECK(content == s->raw_size, "section %u (%s): zstd frame holds %llu bytes, raw_size says %llu", i, kn, content,
          (unsigned long long)s->raw_size);
    size_t frame = ZSTD_findFrameCompressedSize(src, (size_t)s->size);
    CHECK(!ZSTD_isError(frame) && frame == s->size, "section %u (%s): the zstd frame does not fill the section", i, kn);
    /* The content checksum is what catches damage to the decompressed bytes. */
    ZSTD_frameHeader zfh;
    CHECK(ZSTD_getFrameHeader(&zfh, src, (size_t)s->size) == 0 && zfh.frameType == ZSTD_frame && zfh.checksumFlag,
          "section %u (%s): the zstd frame has no content checksum", i, kn);
  } else {
    CHECK(s->raw_size == s->size, "section %u (%s): stored raw but raw_size %llu != size %llu", i, kn,
          (unsigned long long)s->raw_size, (unsigned long long)s->size);
  }
  return HK_OK;
}

static hk_status_t verify_targets(const hk_pack_view_t *v) {
  for (uint32_t t = 0; t < v->target_count; t++) {
    const hk_target_rec_t *r = &v->targets[t];
    HK_RETURN_IF_ERROR(check_string(v, r->name, "target", t));
    HK_RETURN_IF_ERROR(check_string(v, r->features, "target", t));
    const char *name = hk_pack_string(v, r->name);
    CHECK(name[0] != '\0', "target %u: empty name", t);
    for (uint32_t u = 0; u < t; u++)
      CHECK(strcmp(name, hk_pack_string(v, v->targets[u].name)) != 0, "target %u: duplicate name \"%s\"", t, name);
    CHECK(r->kind < HK_TARGET_KIND_COUNT_, "target %u (%s): unknown kind %u", t, name, r->kind);
    CHECK(r->code_section < v->section_count && v->sections[r->code_section].kind == HK_SECTION_CODE &&
              v->sections[r->code_section].target == t,
          "target %u (%s): code_section %u is not this target's CODE section", t, name, r->code_section);
    HK_RETURN_IF_ERROR(check_range(r->kernel_first, r->kernel_count, v->kernel_count, "target", t, "KERNELS"));
    /* Loaders and tools take a target's kernels from its range and their code from its
     * CODE section: a kernel of another target there would index the wrong code. */
    for (uint32_t k = r->kernel_first; k < r->kernel_first + r->kernel_count; k++)
      CHECK(v->kernels[k].target == t, "target %u (%s): kernel %u in its kernel range belongs to target %u", t, name, k,
            v->kernels[k].target);
    HK_RETURN_IF_ERROR(check_range(r->graph_first, r->graph_count, v->graph_count, "target", t, "GRAPHS"));
    CHECK(r->graph_count == v->manifest->batch_count, "target %u (%s): %u graphs, expected one per batch size (%u)", t,
          name, r->graph_count, v->manifest->batch_count);
    for (uint32_t i = 0; i < r->graph_count; i++) {
      const hk_graph_rec_t *g = &v->graphs[r->graph_first + i];
      CHECK(g->target == t && g->batch == v->manifest->batch_sizes[i],
            "target %u (%s): graph %u is not its graph for batch %llu", t, name, r->graph_first + i,
            (unsigned long long)v->manifest->batch_sizes[i]);
    }
  }
  /* Every CODE section belongs to a target, and its frame declares raw_size. */
  for (uint32_t i = 0; i < v->section_count; i++) {
    const hk_section_t *s = &v->sections[i];
    if (s->kind != HK_SECTION_CODE) continue;
    CHECK(s->target < v->target_count && v->targets[s->target].code_section == i,
          "section %u (CODE): target %u does not refer back to it", i, s->target);
    HK_RETURN_IF_ERROR(check_payload_frame(v, i));
  }
  return HK_OK;
}

static hk_status_t verify_kernels(const hk_pack_view_t *v) {
  for (uint32_t k = 0; k < v->kernel_count; k++) {
    const hk_kernel_rec_t *r = &v->kernels[k];
    HK_RETURN_IF_ERROR(check_string(v, r->name, "kernel", k));
    HK_RETURN_IF_ERROR(check_string_as(v, r->params, NAME_TEXT, "kernel", k));
    CHECK(r->op < HK_OP_COUNT_, "kernel %u (%s): unknown op %u", k, hk_pack_string(v, r->name), r->op);
    CHECK(r->target < v->target_count, "kernel %u: target %u out of range", k, r->target);
    const hk_target_rec_t *t = &v->targets[r->target];
    CHECK(k >= t->kernel_first && k - t->kernel_first < t->kernel_count,
          "kernel %u (%s): not in the kernel range of its target %u", k, hk_pack_string(v, r->name), r->target);
    if (hk_op_collective(r->op)) { /* no code: the session's communicator runs it */
      CHECK(r->code_offset == 0 && r->code_size == 0 && r->vgprs == 0 && r->agprs == 0 && r->sgprs == 0 &&
                r->shared_bytes == 0 && r->scratch_bytes == 0,
            "kernel %u (%s): a collective has no code and no resources", k, hk_pack_string(v, r->name));
      CHECK(v->tensor_ranks > 0, "kernel %u (%s): a collective in a pack without a PARALLEL section", k,
            hk_pack_string(v, r->name));
      continue;
    }
    uint64_t raw = v->sections[t->code_section].raw_size;
    CHECK(r->code_size > 0 && r->code_offset % 8 == 0 && r->code_offset <= raw && r->code_size <= raw - r->code_offset,
          "kernel %u (%s): code range [%llu, +%llu) is not inside its target's %llu code bytes", k,
          hk_pack_string(v, r->name), (unsigned long long)r->code_offset, (unsigned long long)r->code_size,
          (unsigned long long)raw);
  }
  return HK_OK;
}

static hk_status_t verify_tensors(const hk_pack_view_t *v) {
  for (uint32_t i = 0; i < v->tensor_count; i++) {
    const hk_tensor_rec_t *r = &v->tensors[i];
    HK_RETURN_IF_ERROR(check_string_as(v, r->name, NAME_FILE, "tensor", i));
    const char *name = hk_pack_string(v, r->name);
    CHECK(r->role < HK_ROLE_COUNT_, "tensor %u (%s): unknown role %u", i, name, r->role);
    CHECK(r->dtype < HK_DTYPE_COUNT_, "tensor %u (%s): unknown dtype %u", i, name, r->dtype);
    CHECK(r->rank >= 1 && r->rank <= HK_MAX_RANK, "tensor %u (%s): rank %u is outside 1..%u", i, name, r->rank,
          HK_MAX_RANK);
    /* i32 is an input's (ids, lengths, sample's params) or an argmax or sample output's type,
     * never a param's or state's */
    CHECK(r->dtype != HK_DTYPE_I32 || r->role == HK_ROLE_INPUT || r->role == HK_ROLE_OUTPUT ||
              r->role == HK_ROLE_INTERMEDIATE,
          "tensor %u (%s): an i32 %s", i, name, r->role == HK_ROLE_PARAM ? "param" : "state tensor");
    /* the 8-bit types are params' (quantized weights) and, fp8_e4m3, state tensors' (1.8: FP8 KV
     * caches) only */
    CHECK((r->dtype != HK_DTYPE_I8 && r->dtype != HK_DTYPE_FP8_E4M3) || r->role == HK_ROLE_PARAM ||
              (r->dtype == HK_DTYPE_FP8_E4M3 && r->role == HK_ROLE_STATE),
          "tensor %u (%s): an 8-bit (%s) tensor that is not a param%s", i, name, hk_dtype_label(r->dtype),
          r->dtype == HK_DTYPE_FP8_E4M3 ? " or a state tensor" : "");
    if (r->role == HK_ROLE_STATE) {
      bool batched = false;
      for (uint32_t d = 0; d < r->rank && d < HK_MAX_RANK; d++) batched |= r->dims[d].mul != 0;
      CHECK(!batched, "tensor %u (%s): a state tensor whose shape depends on batch", i, name);
    }
    for (uint32_t b = 0; b < v->manifest->batch_count; b++)
      CHECK(hk_tensor_shape(r, v->manifest->batch_sizes[b], NULL, NULL),
            "tensor %u (%s): a dimension is <= 0, or its size overflows or is 2^48 bytes or more, at batch %llu", i, name,
            (unsigned long long)v->manifest->batch_sizes[b]);
  }
  return HK_OK;
}

/* Largest TMA global dimension (elements) and global stride (bytes, exclusive): the limits
 * cuTensorMapEncodeTiled documents. */
#define HK_TMAP_MAX_DIM (1ull << 32)
#define HK_TMAP_MAX_STRIDE (1ull << 40)

/* A TMAP argument (pack_format.h) of node n (graph gi, target t), argument a: a tensor of a
 * dtype TMA loads, a box TMA accepts, no reserved bits, and a matrix view at the graph's
 * batch whose dims and row stride are within TMA's limits, so that cuTensorMapEncodeTiled
 * can build it from any 16-byte-aligned buffer the session binds. */
static hk_status_t verify_tmap(const hk_pack_view_t *v, const hk_graph_rec_t *g, uint32_t gi, uint32_t n, uint32_t a,
                               uint64_t value) {
  const hk_target_rec_t *t = &v->targets[g->target];
  const char *node = hk_pack_string(v, v->nodes[n].name);
  CHECK(t->kind == HK_TARGET_CUDA, "graph %u node %u (%s) arg %u: a TMA tensor map argument in a graph of target %s, "
        "which is not a CUDA target", gi, n, node, a, hk_pack_string(v, t->name));
  CHECK((value & HK_TMAP_RESERVED_MASK) == 0, "graph %u node %u (%s) arg %u: tensor map reserved bits are set "
        "(value 0x%016llx)", gi, n, node, a, (unsigned long long)value);
  uint32_t ti = hk_tmap_tensor(value), inner = hk_tmap_box_inner(value), outer = hk_tmap_box_outer(value);
  uint32_t swizzle = hk_tmap_swizzle(value);
  CHECK(ti < v->tensor_count, "graph %u node %u (%s) arg %u: tensor map of tensor index %u out of range (%u tensors)",
        gi, n, node, a, ti, v->tensor_count);
  const hk_tensor_rec_t *tr = &v->tensors[ti];
  const char *tname = hk_pack_string(v, tr->name);
  CHECK(inner >= 1 && inner <= HK_TMAP_BOX_MAX && outer >= 1 && outer <= HK_TMAP_BOX_MAX,
        "graph %u node %u (%s) arg %u: tensor map of %s has box %ux%u (inner x outer); each must be 1..%u", gi, n, node,
        a, tname, inner, outer, HK_TMAP_BOX_MAX);
  CHECK(tr->dtype == HK_DTYPE_F16 || tr->dtype == HK_DTYPE_BF16 || tr->dtype == HK_DTYPE_F32,
        "graph %u node %u (%s) arg %u: tensor map of %s: dtype %s is not one TMA loads (f16, bf16, f32)", gi, n, node,
        a, tname, hk_dtype_label(tr->dtype));
  uint64_t esize = hk_dtype_bytes(tr->dtype), box_bytes = (uint64_t)inner * esize;
  CHECK(box_bytes % 16 == 0, "graph %u node %u (%s) arg %u: tensor map of %s: box inner %u x %llu bytes is not a "
        "multiple of 16 bytes", gi, n, node, a, tname, inner, (unsigned long long)esize);
  CHECK(swizzle == HK_TMAP_SWIZZLE_NONE || box_bytes <= hk_tmap_swizzle_bytes(swizzle),
        "graph %u node %u (%s) arg %u: tensor map of %s: box inner %u x %llu bytes exceeds the %u-byte swizzle span",
        gi, n, node, a, tname, inner, (unsigned long long)esize, hk_tmap_swizzle_bytes(swizzle));
  int64_t dims[HK_MAX_RANK];
  uint64_t bytes = 0;
  (void)hk_tensor_shape(tr, g->batch, dims, &bytes); /* true: verify_tensors checked every batch */
  uint64_t cols = (uint64_t)dims[tr->rank - 1], rows = bytes / esize / cols, stride = cols * esize; /* no overflow */
  CHECK(stride % 16 == 0 && stride < HK_TMAP_MAX_STRIDE,
        "graph %u node %u (%s) arg %u: tensor map of %s: row stride %llu x %llu bytes is not a multiple of 16 bytes "
        "below 2^40", gi, n, node, a, tname, (unsigned long long)cols, (unsigned long long)esize);
  CHECK(rows <= HK_TMAP_MAX_DIM && cols <= HK_TMAP_MAX_DIM,
        "graph %u node %u (%s) arg %u: tensor map of %s: matrix [%llu, %llu] at batch %llu exceeds TMA's 2^32 "
        "elements per dim", gi, n, node, a, tname, (unsigned long long)rows, (unsigned long long)cols,
        (unsigned long long)g->batch);
  return HK_OK;
}

/* A SCRATCH argument (format 1.3): a non-empty byte range inside the graph's workspace. */
static hk_status_t verify_scratch(const hk_pack_view_t *v, const hk_graph_rec_t *g, uint32_t gi, uint32_t n, uint32_t a,
                                  uint64_t value) {
  const uint64_t offset = hk_scratch_offset(value), bytes = hk_scratch_bytes(value); /* < 2^40 each */
  CHECK(bytes > 0 && hk_range_ok(offset, bytes, g->workspace_bytes),
        "graph %u node %u (%s) arg %u: scratch [%llu, +%llu bytes) is empty or outside the %llu-byte workspace", gi, n,
        hk_pack_string(v, v->nodes[n].name), a, (unsigned long long)offset, (unsigned long long)bytes,
        (unsigned long long)g->workspace_bytes);
  return HK_OK;
}

/* A SEMAPHORE argument (format 1.3): a non-empty range of the graph's counters. */
static hk_status_t verify_semaphore(const hk_pack_view_t *v, const hk_graph_rec_t *g, uint32_t gi, uint32_t n,
                                    uint32_t a, uint64_t value) {
  const uint32_t first = hk_semaphore_first(value), count = hk_semaphore_count(value);
  CHECK(count > 0 && hk_range_ok(first, count, g->semaphore_count),
        "graph %u node %u (%s) arg %u: semaphores [%u, +%u) are empty or outside the graph's %u", gi, n,
        hk_pack_string(v, v->nodes[n].name), a, first, count, g->semaphore_count);
  return HK_OK;
}

/* Where the next node's args and deps must start: ranges tile ARGS and DEPS in node order, so
 * each record is checked once and the work follows the file's size. */
typedef struct tile {
  uint64_t node, arg, dep;
} tile_t;

static hk_status_t verify_node(const hk_pack_view_t *v, const hk_graph_rec_t *g, uint32_t gi, uint32_t local,
                               tile_t *at) {
  uint32_t n = g->node_first + local;
  const hk_node_rec_t *r = &v->nodes[n];
  const hk_target_rec_t *t = &v->targets[g->target];
  HK_RETURN_IF_ERROR(check_string(v, r->name, "node", n));
  CHECK(r->kernel < v->kernel_count && v->kernels[r->kernel].target == g->target,
        "node %u (%s) of graph %u: kernel %u is not a kernel of the graph's target", n, hk_pack_string(v, r->name), gi,
        r->kernel);
  for (int d = 0; d < 3; d++)
    CHECK(r->grid[d] >= 1 && r->block[d] >= 1, "node %u (%s): grid and block dimensions must be >= 1", n,
          hk_pack_string(v, r->name));
  CHECK(t->kind != HK_TARGET_HOST || (r->grid[1] == 1 && r->grid[2] == 1),
        "node %u (%s): host launches use grid.y = grid.z = 1", n, hk_pack_string(v, r->name));
  CHECK((r->flags & ~HK_NODE_FLAGS_KNOWN) == 0, "node %u (%s) of graph %u: unknown flags 0x%x (written by a newer hkc?)",
        n, hk_pack_string(v, r->name), gi, r->flags & ~HK_NODE_FLAGS_KNOWN);
  CHECK(!(r->flags & HK_NODE_FLAG_PDL) || t->kind == HK_TARGET_CUDA,
        "node %u (%s) of graph %u: flagged for programmatic dependent launch (PDL) in a graph of target %s, which is "
        "not a CUDA target", n, hk_pack_string(v, r->name), gi, hk_pack_string(v, t->name));
  CHECK(r->arg_count <= HK_MAX_ARGS_PER_NODE, "node %u: %u args exceed the limit %u", n, r->arg_count,
        HK_MAX_ARGS_PER_NODE);
  HK_RETURN_IF_ERROR(check_range(r->arg_first, r->arg_count, v->arg_count, "node", n, "ARGS"));
  CHECK(r->dep_count <= HK_MAX_DEPS_PER_NODE, "node %u: %u deps exceed the limit %u", n, r->dep_count,
        HK_MAX_DEPS_PER_NODE);
  HK_RETURN_IF_ERROR(check_range(r->dep_first, r->dep_count, v->dep_count, "node", n, "DEPS"));
  CHECK(r->arg_first == at->arg && r->dep_first == at->dep,
        "node %u: args at %u and deps at %u, expected %llu and %llu (each node's follow the previous node's)", n,
        r->arg_first, r->dep_first, (unsigned long long)at->arg, (unsigned long long)at->dep);
  at->arg += r->arg_count;
  at->dep += r->dep_count;
  for (uint32_t a = 0; a < r->arg_count; a++) {
    const hk_arg_rec_t *arg = &v->args[r->arg_first + a];
    CHECK(arg->kind < HK_ARG_KIND_COUNT_, "node %u arg %u: unknown kind %u (written by a newer hkc?)", n, a,
          arg->kind);
    CHECK(arg->reserved0 == 0, "node %u arg %u: reserved field is not zero", n, a);
    CHECK(arg->kind != HK_ARG_TENSOR || arg->value < v->tensor_count,
          "node %u arg %u: tensor index %llu out of range (%u tensors)", n, a, (unsigned long long)arg->value,
          v->tensor_count);
    /* an intermediate without a placement in this graph (1.8: a dequant's copy where its gemms read
     * the 8-bit param themselves) is one that no launch of the graph may touch */
    CHECK(arg->kind != HK_ARG_TENSOR || v->tensors[arg->value].role != HK_ROLE_INTERMEDIATE ||
              v->placements[g->placement_first + arg->value] != HK_PLACEMENT_NONE,
          "node %u arg %u: intermediate tensor %llu (%s) has no placement in graph %u", n, a,
          (unsigned long long)arg->value, hk_pack_string(v, v->tensors[arg->value].name), gi);
    if (arg->kind == HK_ARG_TMAP) HK_RETURN_IF_ERROR(verify_tmap(v, g, gi, n, a, arg->value));
    if (arg->kind == HK_ARG_SCRATCH) HK_RETURN_IF_ERROR(verify_scratch(v, g, gi, n, a, arg->value));
    if (arg->kind == HK_ARG_SEMAPHORE) HK_RETURN_IF_ERROR(verify_semaphore(v, g, gi, n, a, arg->value));
  }
  for (uint32_t d = 0; d < r->dep_count; d++) {
    uint32_t dep = v->deps[r->dep_first + d];
    CHECK(dep < local, "node %u (local %u) of graph %u: dependency %u is not an earlier node", n, local, gi, dep);
  }
  return HK_OK;
}

static hk_status_t verify_graphs(const hk_pack_view_t *v) {
  tile_t at = {0, 0, 0};
  for (uint32_t gi = 0; gi < v->graph_count; gi++) {
    const hk_graph_rec_t *g = &v->graphs[gi];
    CHECK(g->target < v->target_count, "graph %u: target %u out of range", gi, g->target);
    const hk_target_rec_t *t = &v->targets[g->target];
    CHECK(gi >= t->graph_first && gi - t->graph_first < t->graph_count,
          "graph %u: not in the graph range of its target %u", gi, g->target);
    CHECK(g->semaphore_count <= HK_MAX_SEMAPHORES, "graph %u: %u semaphores exceed the limit %u", gi,
          g->semaphore_count, HK_MAX_SEMAPHORES);
    CHECK(g->workspace_bytes < HK_MAX_TENSOR_BYTES, "graph %u: workspace_bytes %llu is 2^48 or more", gi,
          (unsigned long long)g->workspace_bytes);
    HK_RETURN_IF_ERROR(check_range(g->node_first, g->node_count, v->node_count, "graph", gi, "NODES"));
    CHECK(g->node_first == at.node, "graph %u: nodes at %u, expected %llu (each graph's follow the previous graph's)",
          gi, g->node_first, (unsigned long long)at.node);
    at.node += g->node_count;
    HK_RETURN_IF_ERROR(
        check_range(g->placement_first, v->tensor_count, v->placement_count, "graph", gi, "PLACEMENTS"));
    for (uint32_t j = 0; j < g->node_count; j++) HK_RETURN_IF_ERROR(verify_node(v, g, gi, j, &at));
    for (uint32_t i = 0; i < v->tensor_count; i++) {
      const hk_tensor_rec_t *tr = &v->tensors[i];
      uint64_t p = v->placements[g->placement_first + i];
      if (tr->role != HK_ROLE_INTERMEDIATE) {
        CHECK(p == HK_PLACEMENT_NONE, "graph %u: tensor %u (%s) is bound by the application but has a placement", gi,
              i, hk_pack_string(v, tr->name));
        continue;
      }
      if (p == HK_PLACEMENT_NONE) continue; /* no launch of the graph touches it (verify_node) */
      uint64_t bytes = 0;
      (void)hk_tensor_shape(tr, g->batch, NULL, &bytes); /* true: verify_tensors checked every batch */
      CHECK(p % HK_SECTION_ALIGN == 0 && hk_range_ok(p, bytes, g->workspace_bytes),
            "graph %u: tensor %u (%s) placed at %llu (+%llu bytes) does not fit the %llu-byte workspace (or is not "
            "%u-byte aligned)",
            gi, i, hk_pack_string(v, tr->name), (unsigned long long)p, (unsigned long long)bytes,
            (unsigned long long)g->workspace_bytes, HK_SECTION_ALIGN);
    }
  }
  /* No record is left out: an unreferenced one would be read unchecked by whoever walks
   * the tables (PLAN is parallel to NODES). */
  CHECK(at.node == v->node_count && at.arg == v->arg_count && at.dep == v->dep_count,
        "graphs reference %llu of %u nodes, %llu of %u args, %llu of %u deps (every record belongs to one graph)",
        (unsigned long long)at.node, v->node_count, (unsigned long long)at.arg, v->arg_count,
        (unsigned long long)at.dep, v->dep_count);
  return HK_OK;
}

/* PLAN (when present): records parallel to GRAPHS and NODES, sized by map_tables. */
static hk_status_t verify_plan(const hk_pack_view_t *v) {
  if (!v->plan_graphs) return HK_OK;
  for (uint32_t g = 0; g < v->graph_count; g++)
    CHECK(v->plan_graphs[g].reserved0 == 0, "PLAN graph %u: reserved field is not zero", g);
  for (uint32_t n = 0; n < v->node_count; n++) {
    const hk_plan_node_rec_t *r = &v->plan_nodes[n];
    CHECK(r->fused_nodes >= 1, "PLAN node %u (%s): fused_nodes is 0 (a launch computes at least one spec node)", n,
          hk_pack_string(v, v->nodes[n].name));
    CHECK((r->flags & ~HK_PLAN_MATRIX) == 0, "PLAN node %u (%s): unknown flags 0x%x", n,
          hk_pack_string(v, v->nodes[n].name), r->flags);
  }
  return HK_OK;
}

void hk_pack_limits_from(const hk_pack_open_options_t *o, hk_pack_limits_t *out_limits) {
  *out_limits = (hk_pack_limits_t){0, HK_MAX_NODES, HK_MAX_DEPS};
  if (!o) return;
  if (o->max_nodes) out_limits->max_nodes = o->max_nodes < HK_MAX_NODES ? o->max_nodes : HK_MAX_NODES;
  if (o->max_deps) out_limits->max_deps = o->max_deps < HK_MAX_DEPS ? o->max_deps : HK_MAX_DEPS;
  out_limits->max_code_bytes = o->max_code_bytes < HK_MAX_CODE_BYTES ? o->max_code_bytes : HK_MAX_CODE_BYTES;
}

/* The optional PTX (format 1.3; pack_format.h, hk_ptx_rec_t): at most one PTX_INDEX
 * (uncompressed, optional, no target), at most one PTX section per CUDA target (optional,
 * maybe zstd, within the code size limit), one record per kernel of each target that has a
 * PTX section and none for the others, ascending by kernel, each range inside its target's
 * decompressed PTX bytes. Fills the view's ptx fields. */
static hk_status_t verify_ptx(hk_pack_view_t *v, const hk_pack_limits_t *lim) {
  const hk_section_t *index = NULL;
  uint32_t index_at = 0, with_ptx = 0;
  for (uint32_t t = 0; t < HK_MAX_TARGETS; t++) v->ptx_section[t] = v->ptx_first[t] = UINT32_MAX;
  for (uint32_t i = 0; i < v->section_count; i++) {
    const hk_section_t *s = &v->sections[i];
    if (s->kind == HK_SECTION_PTX_INDEX) {
      CHECK(index == NULL, "section PTX_INDEX appears more than once (sections %u and %u)", index_at, i);
      CHECK(s->flags == HK_SECTION_FLAG_OPTIONAL && s->raw_size == s->size,
            "section %u (PTX_INDEX): must be stored uncompressed and flagged optional (flags 0x%x)", i, s->flags);
      CHECK(s->target == UINT32_MAX, "section %u (PTX_INDEX): target field must be 0xffffffff", i);
      CHECK(s->size % sizeof(hk_ptx_rec_t) == 0 && s->size / sizeof(hk_ptx_rec_t) <= v->kernel_count,
            "section %u (PTX_INDEX): size %llu is not a multiple of %zu bytes or holds more records than the %u "
            "kernels", i, (unsigned long long)s->size, sizeof(hk_ptx_rec_t), v->kernel_count);
      index = s;
      index_at = i;
    } else if (s->kind == HK_SECTION_PTX) {
      CHECK((s->flags & HK_SECTION_FLAG_OPTIONAL) != 0, "section %u (PTX): not flagged optional", i);
      CHECK(s->target < v->target_count, "section %u (PTX): target %u out of range (%u targets)", i, s->target,
            v->target_count);
      const char *name = hk_pack_string(v, v->targets[s->target].name);
      CHECK(v->targets[s->target].kind == HK_TARGET_CUDA, "section %u (PTX): target %u (%s) is not a CUDA target", i,
            s->target, name);
      CHECK(v->ptx_section[s->target] == UINT32_MAX, "target %u (%s): PTX sections %u and %u", s->target, name,
            v->ptx_section[s->target], i);
      uint64_t limit = code_limit(s, lim);
      CHECK(s->raw_size <= limit, "section %u (PTX): raw_size %llu exceeds the limit %llu", i,
            (unsigned long long)s->raw_size, (unsigned long long)limit);
      HK_RETURN_IF_ERROR(check_payload_frame(v, i));
      v->ptx_section[s->target] = i;
      with_ptx++;
    }
  }
  CHECK(with_ptx == 0 || index != NULL, "PTX sections without a PTX_INDEX section");
  if (!index) return HK_OK;
  const hk_ptx_rec_t *recs = (const hk_ptx_rec_t *)(v->base + index->offset);
  uint32_t n = (uint32_t)(index->size / sizeof *recs);
  uint32_t per_target[HK_MAX_TARGETS] = {0};
  for (uint32_t i = 0; i < n; i++) {
    const hk_ptx_rec_t *r = &recs[i];
    CHECK(r->reserved0 == 0, "PTX record %u: reserved field is not zero", i);
    CHECK(r->kernel < v->kernel_count, "PTX record %u: kernel %u out of range (%u kernels)", i, r->kernel,
          v->kernel_count);
    CHECK(i == 0 || r->kernel > recs[i - 1].kernel, "PTX record %u: kernel %u does not ascend", i, r->kernel);
    uint32_t t = v->kernels[r->kernel].target; /* < target_count: verify_kernels */
    CHECK(v->ptx_section[t] != UINT32_MAX, "PTX record %u: kernel %u's target %u has no PTX section", i, r->kernel, t);
    uint64_t raw = v->sections[v->ptx_section[t]].raw_size;
    CHECK(r->size > 0 && r->offset <= raw && r->size <= raw - r->offset,
          "PTX record %u (kernel %u): range [%llu, +%llu) is not inside its target's %llu PTX bytes", i, r->kernel,
          (unsigned long long)r->offset, (unsigned long long)r->size, (unsigned long long)raw);
    if (r->kernel == v->targets[t].kernel_first) v->ptx_first[t] = i;
    per_target[t]++;
  }
  for (uint32_t t = 0; t < v->target_count; t++)
    CHECK(v->ptx_section[t] == UINT32_MAX || per_target[t] == v->targets[t].kernel_count,
          "target %u (%s): %u PTX records for its %u kernels", t, hk_pack_string(v, v->targets[t].name), per_target[t],
          v->targets[t].kernel_count);
  v->ptx_recs = recs;
  v->ptx_count = n;
  return HK_OK;
}

/* One of the stored-weights sections (format 1.4): at most once, flags exactly OPTIONAL
 * (stored raw: the loader binds the bytes in place), target 0xffffffff. */
static hk_status_t weights_section(const hk_pack_view_t *v, uint32_t i, const hk_section_t **slot) {
  const hk_section_t *s = &v->sections[i];
  const char *kn = section_kind_name(s->kind);
  CHECK(*slot == NULL, "section %s appears more than once (sections %u and %u)", kn, (unsigned)(*slot - v->sections),
        i);
  CHECK(s->flags == HK_SECTION_FLAG_OPTIONAL && s->raw_size == s->size,
        "section %u (%s): must be stored uncompressed and flagged optional (flags 0x%x)", i, kn, s->flags);
  CHECK(s->target == UINT32_MAX, "section %u (%s): target field must be 0xffffffff", i, kn);
  *slot = s;
  return HK_OK;
}

/* The stored weights (format 1.4; pack_format.h, hk_weight_rec_t): WEIGHTS_INDEX and WEIGHTS
 * both or neither; records ascending by tensor, each a PARAM whose dims do not depend on batch,
 * size its byte size, laid out canonically (64-byte aligned, zero between, nothing after the
 * last), so every byte of WEIGHTS belongs to a record or is checked padding. Fills the view's
 * weights fields. */
static hk_status_t verify_weights(hk_pack_view_t *v) {
  const hk_section_t *index = NULL, *data = NULL;
  for (uint32_t i = 0; i < v->section_count; i++) {
    if (v->sections[i].kind == HK_SECTION_WEIGHTS_INDEX) HK_RETURN_IF_ERROR(weights_section(v, i, &index));
    if (v->sections[i].kind == HK_SECTION_WEIGHTS) HK_RETURN_IF_ERROR(weights_section(v, i, &data));
  }
  CHECK(!index == !data, "section %s without a %s section", index ? "WEIGHTS_INDEX" : "WEIGHTS",
        index ? "WEIGHTS" : "WEIGHTS_INDEX");
  if (!index) return HK_OK;
  CHECK(index->size % sizeof(hk_weight_rec_t) == 0 && index->size / sizeof(hk_weight_rec_t) <= v->tensor_count,
        "section WEIGHTS_INDEX: size %llu is not a multiple of %zu bytes or holds more records than the %u tensors",
        (unsigned long long)index->size, sizeof(hk_weight_rec_t), v->tensor_count);
  const hk_weight_rec_t *recs = (const hk_weight_rec_t *)(v->base + index->offset);
  const uint32_t n = (uint32_t)(index->size / sizeof *recs);
  const uint8_t *bytes = v->base + data->offset;
  uint64_t end = 0; /* where the previous record's bytes end */
  for (uint32_t i = 0; i < n; i++) {
    const hk_weight_rec_t *r = &recs[i];
    CHECK(r->reserved0 == 0, "weights record %u: reserved field is not zero", i);
    CHECK(r->tensor < v->tensor_count, "weights record %u: tensor %u out of range (%u tensors)", i, r->tensor,
          v->tensor_count);
    CHECK(i == 0 || r->tensor > recs[i - 1].tensor, "weights record %u: tensor %u does not ascend", i, r->tensor);
    const hk_tensor_rec_t *t = &v->tensors[r->tensor];
    const char *name = hk_pack_string(v, t->name);
    CHECK(t->role == HK_ROLE_PARAM, "weights record %u: tensor %u (%s) is not a param", i, r->tensor, name);
    for (uint32_t d = 0; d < t->rank; d++)
      CHECK(t->dims[d].mul == 0, "weights record %u: param %u (%s) has a dimension that depends on batch", i,
            r->tensor, name);
    uint64_t want = 0;
    (void)hk_tensor_shape(t, v->manifest->batch_sizes[0], NULL, &want); /* true: verify_tensors */
    CHECK(r->size == want, "weights record %u (%s): %llu bytes, the tensor has %llu", i, name,
          (unsigned long long)r->size, (unsigned long long)want);
    const uint64_t at = (end + HK_WEIGHTS_ALIGN - 1) / HK_WEIGHTS_ALIGN * HK_WEIGHTS_ALIGN; /* end <= 2^63 */
    CHECK(r->offset == at && hk_range_ok(r->offset, r->size, data->size),
          "weights record %u (%s): bytes [%llu, +%llu) are not at %llu (the previous end rounded up to %u) inside the "
          "%llu-byte WEIGHTS section", i, name, (unsigned long long)r->offset, (unsigned long long)r->size,
          (unsigned long long)at, HK_WEIGHTS_ALIGN, (unsigned long long)data->size);
    for (uint64_t b = end; b < at; b++)
      CHECK(bytes[b] == 0, "section WEIGHTS: padding byte at %llu is not zero", (unsigned long long)b);
    end = r->offset + r->size;
  }
  CHECK(end == data->size, "section WEIGHTS: %llu bytes, its records end at %llu", (unsigned long long)data->size,
        (unsigned long long)end);
  v->weight_recs = recs;
  v->weight_count = n;
  v->weights = bytes;
  v->weights_size = data->size;
  return HK_OK;
}

/* The optional PARTS (format 1.4; pack_format.h, hk_part_rec_t): at most one section,
 * uncompressed, optional, no target; records grouped by tensor in ascending order, each a
 * PARAM, at most HK_MAX_PARTS per tensor with distinct tensor-name strings (a group's names are
 * compared pairwise: at most 64^2/2 comparisons per param). Fills the view's parts fields. */
static hk_status_t verify_parts(hk_pack_view_t *v) {
  const hk_section_t *sec = NULL;
  uint32_t at = 0;
  for (uint32_t i = 0; i < v->section_count; i++) {
    const hk_section_t *s = &v->sections[i];
    if (s->kind != HK_SECTION_PARTS) continue;
    CHECK(sec == NULL, "section PARTS appears more than once (sections %u and %u)", at, i);
    CHECK(s->flags == HK_SECTION_FLAG_OPTIONAL && s->raw_size == s->size,
          "section %u (PARTS): must be stored uncompressed and flagged optional (flags 0x%x)", i, s->flags);
    CHECK(s->target == UINT32_MAX, "section %u (PARTS): target field must be 0xffffffff", i);
    CHECK(s->size % sizeof(hk_part_rec_t) == 0 &&
              s->size / sizeof(hk_part_rec_t) <= (uint64_t)v->tensor_count * HK_MAX_PARTS &&
              s->size / sizeof(hk_part_rec_t) <= HK_MAX_PART_RECORDS,
          "section %u (PARTS): size %llu is not a multiple of %zu bytes or holds more than %u records per tensor "
          "or %u in all", i, (unsigned long long)s->size, sizeof(hk_part_rec_t), HK_MAX_PARTS, HK_MAX_PART_RECORDS);
    sec = s;
    at = i;
  }
  if (!sec) return HK_OK;
  const hk_part_rec_t *recs = (const hk_part_rec_t *)(v->base + sec->offset);
  const uint32_t n = (uint32_t)(sec->size / sizeof *recs);
  uint32_t group = 0; /* first record of the current tensor's group */
  for (uint32_t i = 0; i < n; i++) {
    const hk_part_rec_t *r = &recs[i];
    CHECK(r->tensor < v->tensor_count, "PARTS record %u: tensor %u out of range (%u tensors)", i, r->tensor,
          v->tensor_count);
    const char *tname = hk_pack_string(v, v->tensors[r->tensor].name);
    CHECK(i == 0 || r->tensor >= recs[i - 1].tensor, "PARTS record %u: tensor %u (%s) does not ascend", i, r->tensor,
          tname);
    CHECK(v->tensors[r->tensor].role == HK_ROLE_PARAM, "PARTS record %u: tensor %u (%s) is not a param", i, r->tensor,
          tname);
    if (i > 0 && r->tensor != recs[i - 1].tensor) group = i;
    CHECK(i - group < HK_MAX_PARTS, "PARTS: tensor %u (%s) has more than %u parts", r->tensor, tname, HK_MAX_PARTS);
    HK_RETURN_IF_ERROR(check_string_as(v, r->name, NAME_FILE, "PARTS record", i));
    for (uint32_t k = group; k < i; k++)
      CHECK(recs[k].name != r->name && strcmp(hk_pack_string(v, recs[k].name), hk_pack_string(v, r->name)) != 0,
            "PARTS: tensor %u (%s) names part \"%s\" twice", r->tensor, tname, hk_pack_string(v, r->name));
  }
  v->parts = recs;
  v->part_count = n;
  return HK_OK;
}

/* EXTENTS (format 1.6; pack_format.h, "Launch extents"): in every file of 1.6 or later exactly
 * one section, flags exactly OPTIONAL (a 1.5 reader skips it), uncompressed, no target, one
 * uint64 per ARGS record, 0 for every argument that is not a tensor (a tensor's is checked
 * against the launch by hk_graph_check_extents). Older files may not have one. Fills the view's
 * extents. */
static hk_status_t verify_extents(hk_pack_view_t *v) {
  const hk_section_t *sec = NULL;
  uint32_t at = 0;
  for (uint32_t i = 0; i < v->section_count; i++) {
    const hk_section_t *s = &v->sections[i];
    if (s->kind != HK_SECTION_EXTENTS) continue;
    CHECK(sec == NULL, "section EXTENTS appears more than once (sections %u and %u)", at, i);
    CHECK(s->flags == HK_SECTION_FLAG_OPTIONAL && s->raw_size == s->size,
          "section %u (EXTENTS): must be stored uncompressed and flagged optional (flags 0x%x)", i, s->flags);
    CHECK(s->target == UINT32_MAX, "section %u (EXTENTS): target field must be 0xffffffff", i);
    CHECK(s->size == (uint64_t)v->arg_count * sizeof(uint64_t),
          "section %u (EXTENTS): size %llu, expected %llu (8 bytes for each of the %u arguments)", i,
          (unsigned long long)s->size, (unsigned long long)v->arg_count * sizeof(uint64_t), v->arg_count);
    sec = s;
    at = i;
  }
  CHECK(sec != NULL || v->header->version_minor < HK_PACK_MINOR_EXTENTS,
        "required section EXTENTS is missing (a format 1.%u file records its launches' extents)",
        v->header->version_minor);
  if (!sec) return HK_OK;
  const uint64_t *ext = (const uint64_t *)(v->base + sec->offset);
  for (uint32_t a = 0; a < v->arg_count; a++)
    CHECK(v->args[a].kind == HK_ARG_TENSOR || ext[a] == 0,
          "EXTENTS entry %u is %llu, but argument %u is not a tensor (its entry is 0)", a, (unsigned long long)ext[a],
          a);
  v->extents = ext;
  return HK_OK;
}

/* PARALLEL (format 1.9; pack_format.h, "Tensor parallelism"): at most one section, flags 0 (a
 * reader must know it), no target; tensor_ranks 2..HK_MAX_TENSOR_RANKS and exactly shard_count
 * records after it, strictly ascending by tensor, each a PARAM or STATE not batched, with 1..3
 * segments whose parts divide the ranks and their sizes, the rank's dim along axis their sum of
 * pieces, and a source tensor of the same dtype and rank whose dims are the whole tensor's.
 * Fills the view's tensor_ranks and shards. Runs before verify_kernels (a collective needs the
 * section). */
static hk_status_t verify_parallel(hk_pack_view_t *v) {
  const hk_section_t *sec = NULL;
  for (uint32_t i = 0; i < v->section_count; i++) {
    const hk_section_t *s = &v->sections[i];
    if (s->kind != HK_SECTION_PARALLEL) continue;
    CHECK(sec == NULL, "section PARALLEL appears more than once (section %u)", i);
    CHECK(s->flags == 0 && s->raw_size == s->size && s->target == UINT32_MAX,
          "section %u (PARALLEL): must be stored uncompressed, not optional, with no target (flags 0x%x)", i, s->flags);
    CHECK(s->size >= sizeof(hk_parallel_rec_t), "section %u (PARALLEL): %llu bytes, less than its header", i,
          (unsigned long long)s->size);
    sec = s;
  }
  if (!sec) return HK_OK;
  const hk_parallel_rec_t *pr = (const hk_parallel_rec_t *)(v->base + sec->offset);
  CHECK(pr->tensor_ranks >= 1 && pr->tensor_ranks <= HK_MAX_TENSOR_RANKS, "PARALLEL: tensor_ranks %u is outside 1..%u",
        pr->tensor_ranks, HK_MAX_TENSOR_RANKS);
  CHECK(pr->shard_count <= v->tensor_count &&
            sec->size == sizeof *pr + (uint64_t)pr->shard_count * sizeof(hk_shard_rec_t),
        "PARALLEL: %llu bytes do not hold its header and %u shard records (%u tensors)", (unsigned long long)sec->size,
        pr->shard_count, v->tensor_count);
  const hk_shard_rec_t *recs = (const hk_shard_rec_t *)(pr + 1);
  for (uint32_t i = 0; i < pr->shard_count; i++) {
    const hk_shard_rec_t *r = &recs[i];
    CHECK(r->tensor < v->tensor_count && (i == 0 || r->tensor > recs[i - 1].tensor),
          "PARALLEL record %u: tensor %u is out of range or does not ascend", i, r->tensor);
    const hk_tensor_rec_t *t = &v->tensors[r->tensor];
    const char *tname = hk_pack_string(v, t->name);
    CHECK(t->role == HK_ROLE_PARAM || t->role == HK_ROLE_STATE, "PARALLEL record %u: tensor %s is not a param or state",
          i, tname);
    CHECK(r->axis < t->rank && r->segment_count >= 1 && r->segment_count <= HK_MAX_SHARD_SEGMENTS && r->reserved1 == 0,
          "PARALLEL record %u (%s): axis %u or %u segments out of range", i, tname, r->axis, r->segment_count);
    uint64_t local = 0, whole = 0;
    for (uint32_t k = 0; k < HK_MAX_SHARD_SEGMENTS; k++) {
      if (k >= r->segment_count) {
        CHECK(r->seg_size[k] == 0 && r->seg_parts[k] == 0, "PARALLEL record %u (%s): segment %u past the count is not "
              "zero", i, tname, k);
        continue;
      }
      const uint32_t parts = r->seg_parts[k];
      CHECK(parts >= 1 && pr->tensor_ranks % parts == 0 && r->seg_size[k] >= parts && r->seg_size[k] % parts == 0 &&
                r->seg_size[k] <= HK_MAX_TENSOR_BYTES,
            "PARALLEL record %u (%s): segment %u of %llu elements in %u pieces (pieces must divide the %u ranks and the "
            "segment)", i, tname, k, (unsigned long long)r->seg_size[k], parts, pr->tensor_ranks);
      local += r->seg_size[k] / parts;
      whole += r->seg_size[k];
    }
    CHECK(t->dims[r->axis].mul == 0 && (uint64_t)t->dims[r->axis].add == local,
          "PARALLEL record %u (%s): its dim %u is %lld, the segments' pieces sum to %llu", i, tname, r->axis,
          (long long)t->dims[r->axis].add, (unsigned long long)local);
    for (uint32_t d = 0; d < t->rank; d++)
      CHECK(t->dims[d].mul == 0, "PARALLEL record %u (%s): a sliced tensor does not depend on batch", i, tname);
    CHECK(r->source < v->tensor_count, "PARALLEL record %u (%s): source %u out of range", i, tname, r->source);
    const hk_tensor_rec_t *src = &v->tensors[r->source];
    if (r->source != r->tensor) {
      CHECK(src->role == HK_ROLE_PARAM && t->role == HK_ROLE_PARAM && src->dtype == t->dtype && src->rank == t->rank,
            "PARALLEL record %u (%s): source %s is not a param of its dtype and rank", i, tname,
            hk_pack_string(v, src->name));
      for (uint32_t d = 0; d < t->rank; d++)
        CHECK(src->dims[d].mul == 0 && (uint64_t)src->dims[d].add == (d == r->axis ? whole : (uint64_t)t->dims[d].add),
              "PARALLEL record %u (%s): source %s is not the whole tensor it slices", i, tname,
              hk_pack_string(v, src->name));
    }
  }
  v->tensor_ranks = pr->tensor_ranks;
  v->shards = pr->shard_count ? recs : NULL;
  v->shard_count = pr->shard_count;
  return HK_OK;
}

const hk_shard_rec_t *hk_pack_tensor_shard(const hk_pack_view_t *v, uint32_t tensor) {
  uint32_t lo = 0, hi = v->shard_count;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (v->shards[mid].tensor < tensor) lo = mid + 1;
    else if (v->shards[mid].tensor > tensor) hi = mid;
    else return &v->shards[mid];
  }
  return NULL;
}

void hk_pack_tensor_parts(const hk_pack_view_t *v, uint32_t tensor, uint32_t *out_first, uint32_t *out_count) {
  uint32_t lo = 0, hi = v->part_count; /* first record with .tensor >= tensor */
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (v->parts[mid].tensor < tensor) lo = mid + 1;
    else hi = mid;
  }
  uint32_t end = lo;
  while (end < v->part_count && v->parts[end].tensor == tensor) end++;
  *out_first = lo;
  *out_count = end - lo;
}

hk_status_t hk_pack_verify(const void *data, size_t size, const hk_pack_limits_t *limits, hk_pack_view_t *out_view) {
  memset(out_view, 0, sizeof *out_view);
  hk_pack_limits_t defaults;
  if (!limits) hk_pack_limits_from(NULL, &defaults), limits = &defaults;
  HK_FAIL_IF(data == NULL && size != 0, HK_STATUS_INVALID_ARGUMENT, "data is NULL");
  HK_FAIL_IF(((uintptr_t)data & 7) != 0, HK_STATUS_INVALID_ARGUMENT, "artifact bytes must be 8-byte aligned");
  hk_pack_view_t v = {.base = data, .size = size};
  HK_RETURN_IF_ERROR(verify_header(data, size, &v.header));
  HK_RETURN_IF_ERROR(verify_sections(&v));
  HK_RETURN_IF_ERROR(map_tables(&v, limits));
  HK_RETURN_IF_ERROR(verify_manifest(&v));
  HK_RETURN_IF_ERROR(verify_targets(&v));
  HK_RETURN_IF_ERROR(verify_tensors(&v));
  HK_RETURN_IF_ERROR(verify_parallel(&v));
  HK_RETURN_IF_ERROR(verify_kernels(&v));
  HK_RETURN_IF_ERROR(verify_graphs(&v));
  HK_RETURN_IF_ERROR(verify_plan(&v));
  HK_RETURN_IF_ERROR(verify_ptx(&v, limits));
  HK_RETURN_IF_ERROR(verify_weights(&v));
  HK_RETURN_IF_ERROR(verify_parts(&v));
  HK_RETURN_IF_ERROR(verify_extents(&v));
  *out_view = v;
  return HK_OK;
}

bool hk_pack_find_graph(const hk_pack_view_t *v, uint32_t target, uint64_t batch, uint32_t *out_graph) {
  const hk_target_rec_t *t = &v->targets[target];
  for (uint32_t i = 0; i < t->graph_count; i++) {
    if (v->graphs[t->graph_first + i].batch == batch) {
      *out_graph = t->graph_first + i;
      return true;
    }
  }
  return false;
}
