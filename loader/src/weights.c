/* SPDX-License-Identifier: Apache-2.0 */
/*
 * weights.c -- safetensors checkpoints (hk_weights_*): opening a file (read into owned
 * memory) or caller memory, checking all of it, and the accessors. Binding to a session is
 * session_weights.c.
 *
 * The format (docs/WEIGHTS.md): u64 little-endian N; N bytes of JSON, an object whose
 * members are tensors {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]} and an
 * optional "__metadata__" object of strings; then the data, offsets relative to its start.
 * The file is untrusted. parse() checks, in order: the header length against the file and
 * the cap; the JSON (cJSON, whose tree lives only during the call; a "\u0000" escape is
 * refused, since cJSON would cut the string there); each member: its name's character set
 * and length, dtype known, rank <= HK_WEIGHTS_MAX_RANK, dims and offsets integers in
 * [0, 2^53], end - begin == product(shape) x dtype size without overflow, end within the
 * data; no name twice; and the ranges, sorted, tile [0, data size) with no gap or overlap.
 * After it passes, the accessors trust the records.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h> /* qsort */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "status_internal.h"
#include "util_internal.h"
#include "weights_internal.h"

/* Longest tensor name (bytes). Checkpoint names are dotted paths well under 200 bytes. */
#define HK_WEIGHTS_MAX_NAME 1024u
/* Integers in the header are JSON numbers, which cJSON reads as doubles: exact up to 2^53. */
#define HK_WEIGHTS_MAX_INT 9007199254740992.0
/* The data section starts at a multiple of this in owned memory (file opens). */
#define HK_WEIGHTS_DATA_ALIGN 64u

typedef struct hk_weights_rec {
  const char *name;      /* in the weights' string block */
  hk_weights_dtype_t dtype;
  uint32_t rank;
  int64_t dims[HK_WEIGHTS_MAX_RANK];
  uint64_t begin, end;   /* relative to the data section: checked */
} hk_weights_rec_t;

typedef struct hk_weights_meta {
  const char *key, *value; /* in the string block */
} hk_weights_meta_t;

struct hk_weights {
  hk_allocator_t allocator;
  void *block;            /* the file's bytes (file opens); NULL over caller memory */
  const uint8_t *data;    /* the data section */
  uint64_t data_size;
  hk_weights_rec_t *recs;
  uint32_t count;
  hk_weights_meta_t *meta;
  uint32_t meta_count;
  char *strings;          /* every name, key and value, NUL-terminated */
};

static const struct {
  const char *name;
  uint32_t size;
} k_dtypes[HK_WEIGHTS_DTYPE_COUNT_] = {
    [HK_WEIGHTS_F32] = {"F32", 4},  [HK_WEIGHTS_F16] = {"F16", 2},         [HK_WEIGHTS_BF16] = {"BF16", 2},
    [HK_WEIGHTS_F64] = {"F64", 8},  [HK_WEIGHTS_I8] = {"I8", 1},           [HK_WEIGHTS_U8] = {"U8", 1},
    [HK_WEIGHTS_I16] = {"I16", 2},  [HK_WEIGHTS_U16] = {"U16", 2},         [HK_WEIGHTS_I32] = {"I32", 4},
    [HK_WEIGHTS_U32] = {"U32", 4},  [HK_WEIGHTS_I64] = {"I64", 8},         [HK_WEIGHTS_U64] = {"U64", 8},
    [HK_WEIGHTS_BOOL] = {"BOOL", 1}, [HK_WEIGHTS_F8_E4M3] = {"F8_E4M3", 1}, [HK_WEIGHTS_F8_E5M2] = {"F8_E5M2", 1},
};

const char *hk_weights_dtype_name(hk_weights_dtype_t dtype) {
  return (unsigned)dtype < HK_WEIGHTS_DTYPE_COUNT_ ? k_dtypes[dtype].name : "?";
}

const hk_allocator_t *hk_weights_allocator(const hk_weights_t *w) { return &w->allocator; }

HK_API void hk_weights_destroy(hk_weights_t *w) {
  if (!w) return;
  hk_allocator_t a = w->allocator;
  hk_free(&a, w->block);
  hk_free(&a, w->recs);
  hk_free(&a, w->meta);
  hk_free(&a, w->strings);
  hk_free(&a, w);
}

/* ---- parsing -------------------------------------------------------------------------------- */
/* A name: 1..HK_WEIGHTS_MAX_NAME bytes of printable ASCII without space (docs/WEIGHTS.md:
 * the name map file separates names by white space). */
static bool name_ok(const char *s) {
  size_t n = 0;
  for (; s[n]; n++)
    if ((unsigned char)s[n] <= 0x20 || (unsigned char)s[n] >= 0x7f) return false;
  return n >= 1 && n <= HK_WEIGHTS_MAX_NAME;
}

/* A JSON number that is an integer in [0, 2^53]. */
static bool read_uint(const cJSON *j, uint64_t *out) {
  if (!cJSON_IsNumber(j)) return false;
  double d = j->valuedouble;
  if (!(d >= 0.0 && d <= HK_WEIGHTS_MAX_INT) || d != (double)(uint64_t)d) return false;
  *out = (uint64_t)d;
  return true;
}

/* Fills rec from the tensor member j (name already checked) and checks it against the data
 * section's size. Errors: CORRUPT naming the tensor. */
static hk_status_t parse_tensor(const cJSON *j, uint64_t data_size, hk_weights_rec_t *rec) {
  const char *name = j->string;
  HK_FAIL_IF(!cJSON_IsObject(j), HK_STATUS_CORRUPT, "tensor \"%s\": not a JSON object", name);
  const cJSON *dt = cJSON_GetObjectItemCaseSensitive(j, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
  const cJSON *offs = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
  HK_FAIL_IF(!cJSON_IsString(dt) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs), HK_STATUS_CORRUPT,
             "tensor \"%s\": needs \"dtype\" (a string), \"shape\" and \"data_offsets\" (arrays)", name);
  uint32_t d = 0;
  while (d < HK_WEIGHTS_DTYPE_COUNT_ && strcmp(k_dtypes[d].name, dt->valuestring) != 0) d++;
  HK_FAIL_IF(d == HK_WEIGHTS_DTYPE_COUNT_, HK_STATUS_CORRUPT,
             "tensor \"%s\": unknown dtype \"%.32s\" (known: F32 F16 BF16 F64 I8 U8 I16 U16 I32 U32 I64 U64 BOOL "
             "F8_E4M3 F8_E5M2)", name, dt->valuestring);
  rec->dtype = (hk_weights_dtype_t)d;
  int rank = cJSON_GetArraySize(shape);
  HK_FAIL_IF(rank > (int)HK_WEIGHTS_MAX_RANK, HK_STATUS_CORRUPT, "tensor \"%s\": rank %d is above %u", name, rank,
             HK_WEIGHTS_MAX_RANK);
  rec->rank = (uint32_t)rank;
  uint64_t elems = 1, bytes;
  bool overflow = false;
  const cJSON *e;
  uint32_t k = 0;
  cJSON_ArrayForEach(e, shape) {
    uint64_t v;
    HK_FAIL_IF(!read_uint(e, &v), HK_STATUS_CORRUPT,
               "tensor \"%s\": shape[%u] is not an integer in [0, 2^53]", name, k);
    rec->dims[k++] = (int64_t)v;
    overflow |= !hk_mul_u64(elems, v, &elems);
  }
  overflow |= !hk_mul_u64(elems, k_dtypes[d].size, &bytes);
  HK_FAIL_IF(overflow, HK_STATUS_CORRUPT, "tensor \"%s\": its shape's size overflows 64 bits", name);
  uint64_t begin, end;
  HK_FAIL_IF(cJSON_GetArraySize(offs) != 2 || !read_uint(cJSON_GetArrayItem(offs, 0), &begin) ||
                 !read_uint(cJSON_GetArrayItem(offs, 1), &end),
             HK_STATUS_CORRUPT, "tensor \"%s\": data_offsets must be two integers [begin, end]", name);
  HK_FAIL_IF(begin > end || end > data_size, HK_STATUS_CORRUPT,
             "tensor \"%s\": data_offsets [%llu, %llu] are not a range within the %llu data bytes", name,
             (unsigned long long)begin, (unsigned long long)end, (unsigned long long)data_size);
  HK_FAIL_IF(end - begin != bytes, HK_STATUS_CORRUPT,
             "tensor \"%s\": data_offsets hold %llu bytes, its shape and dtype %s need %llu", name,
             (unsigned long long)(end - begin), k_dtypes[d].name, (unsigned long long)bytes);
  rec->begin = begin;
  rec->end = end;
  return HK_OK;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(((const hk_weights_rec_t *)a)->name, ((const hk_weights_rec_t *)b)->name);
}

static int cmp_range(const void *a, const void *b) {
  const hk_weights_rec_t *x = *(const hk_weights_rec_t *const *)a, *y = *(const hk_weights_rec_t *const *)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

/* No name twice, and the ranges tile [0, data_size) (the format's rule: the buffer is
 * entirely indexed, without holes). Errors: CORRUPT, OUT_OF_MEMORY. */
static hk_status_t check_table(hk_weights_t *w) {
  if (w->count == 0) {
    HK_FAIL_IF(w->data_size != 0, HK_STATUS_CORRUPT, "no tensor, but %llu data bytes follow the header",
               (unsigned long long)w->data_size);
    return HK_OK;
  }
  hk_weights_rec_t *sorted = hk_calloc(&w->allocator, w->count, sizeof *sorted);
  const hk_weights_rec_t **by_range = hk_calloc(&w->allocator, w->count, sizeof *by_range);
  hk_status_t st = HK_OK;
  if (!sorted || !by_range) {
    st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory checking %u tensors", w->count);
    goto done;
  }
  memcpy(sorted, w->recs, w->count * sizeof *sorted);
  qsort(sorted, w->count, sizeof *sorted, cmp_name);
  for (uint32_t i = 1; i < w->count && st == HK_OK; i++)
    if (strcmp(sorted[i - 1].name, sorted[i].name) == 0)
      st = HK_ERROR(HK_STATUS_CORRUPT, "tensor \"%s\" appears twice in the header", sorted[i].name);
  for (uint32_t i = 0; i < w->count; i++) by_range[i] = &w->recs[i];
  qsort(by_range, w->count, sizeof *by_range, cmp_range);
  uint64_t at = 0;
  for (uint32_t i = 0; i < w->count && st == HK_OK; i++) {
    const hk_weights_rec_t *r = by_range[i];
    if (r->begin < at)
      st = HK_ERROR(HK_STATUS_CORRUPT, "tensor \"%s\": data_offsets [%llu, %llu] overlap another tensor's", r->name,
                    (unsigned long long)r->begin, (unsigned long long)r->end);
    else if (r->begin > at)
      st = HK_ERROR(HK_STATUS_CORRUPT, "data bytes [%llu, %llu) belong to no tensor (the next, \"%s\", starts at %llu)",
                    (unsigned long long)at, (unsigned long long)r->begin, r->name, (unsigned long long)r->begin);
    at = r->end;
  }
  if (st == HK_OK && at != w->data_size)
    st = HK_ERROR(HK_STATUS_CORRUPT, "data bytes [%llu, %llu) at the end of the file belong to no tensor",
                  (unsigned long long)at, (unsigned long long)w->data_size);
done:
  hk_free(&w->allocator, sorted);
  hk_free(&w->allocator, by_range);
  return st;
}

/* Copies s into the string block at *used. */
static const char *keep(hk_weights_t *w, size_t *used, const char *s) {
  size_t n = strlen(s) + 1;
  char *dst = w->strings + *used;
  memcpy(dst, s, n);
  *used += n;
  return dst;
}

/* The records of the parsed header root. Errors: CORRUPT, OUT_OF_MEMORY. */
static hk_status_t read_root(hk_weights_t *w, const cJSON *root) {
  HK_FAIL_IF(!cJSON_IsObject(root), HK_STATUS_CORRUPT, "the header is not a JSON object");
  size_t strings = 1;
  uint32_t count = 0, meta_count = 0;
  const cJSON *m, *e;
  bool seen_meta = false;
  cJSON_ArrayForEach(m, root) {
    if (strcmp(m->string, "__metadata__") == 0) {
      HK_FAIL_IF(seen_meta, HK_STATUS_CORRUPT, "\"__metadata__\" appears twice in the header");
      seen_meta = true;
      HK_FAIL_IF(!cJSON_IsObject(m), HK_STATUS_CORRUPT, "\"__metadata__\" is not a JSON object");
      cJSON_ArrayForEach(e, m) {
        HK_FAIL_IF(!cJSON_IsString(e), HK_STATUS_CORRUPT, "__metadata__ \"%.64s\": the value is not a string",
                   e->string);
        strings += strlen(e->string) + strlen(e->valuestring) + 2;
        meta_count++;
      }
      continue;
    }
    HK_FAIL_IF(!name_ok(m->string), HK_STATUS_CORRUPT,
               "tensor name \"%.64s\" is not 1 to %u bytes of printable ASCII without spaces", m->string,
               HK_WEIGHTS_MAX_NAME);
    strings += strlen(m->string) + 1;
    count++;
  }
  w->recs = hk_calloc(&w->allocator, count ? count : 1, sizeof *w->recs);
  w->meta = hk_calloc(&w->allocator, meta_count ? meta_count : 1, sizeof *w->meta);
  w->strings = hk_alloc(&w->allocator, strings);
  HK_FAIL_IF(!w->recs || !w->meta || !w->strings, HK_STATUS_OUT_OF_MEMORY,
             "out of memory reading a header of %u tensors", count);
  size_t used = 0;
  cJSON_ArrayForEach(m, root) {
    if (strcmp(m->string, "__metadata__") == 0) {
      cJSON_ArrayForEach(e, m) {
        hk_weights_meta_t *kv = &w->meta[w->meta_count++];
        kv->key = keep(w, &used, e->string);
        kv->value = keep(w, &used, e->valuestring);
      }
      continue;
    }
    hk_weights_rec_t *rec = &w->recs[w->count];
    HK_RETURN_IF_ERROR(parse_tensor(m, w->data_size, rec));
    rec->name = keep(w, &used, m->string);
    w->count++;
  }
  return check_table(w);
}

/* Checks bytes[0, size) as a safetensors file and fills w's records; w->data points into
 * bytes. Errors: CORRUPT, OUT_OF_MEMORY. */
static hk_status_t parse(hk_weights_t *w, const uint8_t *bytes, size_t size, uint64_t max_header) {
  HK_FAIL_IF(size < 8, HK_STATUS_CORRUPT,
             "the file is %zu bytes; a safetensors file starts with an 8-byte header length", size);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | bytes[i];
  HK_FAIL_IF(n > max_header, HK_STATUS_CORRUPT, "header length %llu is above the limit of %llu bytes",
             (unsigned long long)n, (unsigned long long)max_header);
  HK_FAIL_IF(n > size - 8, HK_STATUS_CORRUPT, "header length %llu runs past the end of the %zu-byte file",
             (unsigned long long)n, size);
  const char *json = (const char *)bytes + 8;
  HK_FAIL_IF(n < 2 || json[0] != '{', HK_STATUS_CORRUPT, "the header does not start with '{' (not safetensors)");
  HK_FAIL_IF(memmem(json, (size_t)n, "\\u0000", 6) != NULL, HK_STATUS_CORRUPT,
             "the header contains a \\u0000 escape (a NUL inside a name or value)");
  w->data = bytes + 8 + n;
  w->data_size = size - 8 - n;
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(json, (size_t)n, &end, false);
  if (!root) { /* cJSON sets end at the failure too (not cJSON_GetErrorPtr: a process-wide global) */
    size_t off = end && end >= json && end <= json + n ? (size_t)(end - json) : 0;
    return HK_ERROR(HK_STATUS_CORRUPT, "the header is not valid JSON (near byte %zu of %llu)", off,
                    (unsigned long long)n);
  }
  hk_status_t st = HK_OK;
  for (const char *p = end; p < json + n && st == HK_OK; p++) /* the format pads with spaces */
    if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
      st = HK_ERROR(HK_STATUS_CORRUPT, "bytes after the header's JSON object (at byte %zu) are not white space",
                    (size_t)(p - json));
  if (st == HK_OK) st = read_root(w, root);
  cJSON_Delete(root);
  return st;
}

/* ---- opening ----------------------------------------------------------------------------------- */
static hk_status_t read_options(const hk_weights_open_options_t *in, hk_weights_open_options_t *out) {
  memset(out, 0, sizeof *out);
  if (!in) return HK_OK;
  HK_FAIL_IF(in->struct_size != sizeof *in, HK_STATUS_INVALID_ARGUMENT,
             "weights open options: struct_size %u is not sizeof(hk_weights_open_options_t) (%zu)", in->struct_size,
             sizeof *in);
  HK_FAIL_IF(in->reserved0 != 0, HK_STATUS_INVALID_ARGUMENT, "weights open options: reserved0 must be zero");
  *out = *in;
  return HK_OK;
}

static hk_status_t weights_new(const hk_weights_open_options_t *o, hk_weights_t **out) {
  hk_weights_t *w = hk_calloc(o->allocator, 1, sizeof *w);
  HK_FAIL_IF(!w, HK_STATUS_OUT_OF_MEMORY, "out of memory opening weights");
  if (o->allocator) w->allocator = *o->allocator;
  *out = w;
  return HK_OK;
}

static uint64_t header_cap(const hk_weights_open_options_t *o) {
  return o->max_header_bytes && o->max_header_bytes < HK_WEIGHTS_MAX_HEADER_BYTES ? o->max_header_bytes
                                                                                   : HK_WEIGHTS_MAX_HEADER_BYTES;
}

HK_API hk_status_t hk_weights_open_memory(const void *data, size_t size, const hk_weights_open_options_t *options,
                                          hk_weights_t **out_weights) {
  HK_FAIL_IF(!out_weights, HK_STATUS_INVALID_ARGUMENT, "out_weights is NULL");
  *out_weights = NULL;
  HK_FAIL_IF(!data && size, HK_STATUS_INVALID_ARGUMENT, "data is NULL");
  hk_weights_open_options_t o;
  HK_RETURN_IF_ERROR(read_options(options, &o));
  hk_weights_t *w = NULL;
  HK_RETURN_IF_ERROR(weights_new(&o, &w));
  hk_status_t st = parse(w, data ? data : (const void *)"", size, header_cap(&o));
  if (st != HK_OK) {
    hk_weights_destroy(w);
    return st;
  }
  *out_weights = w;
  return HK_OK;
}

/* Reads the file into w->block so that its data section starts HK_WEIGHTS_DATA_ALIGN-aligned
 * (when the header length is sane; parse() judges it), and parses it. */
static hk_status_t open_fd(hk_weights_t *w, int fd, uint64_t file_size, const char *path,
                           const hk_weights_open_options_t *o) {
  HK_FAIL_IF(file_size > SIZE_MAX - HK_WEIGHTS_DATA_ALIGN, HK_STATUS_IO,
             "cannot open %s: too large for this address space", path);
  size_t size = (size_t)file_size;
  uint8_t head[8] = {0};
  size_t head_n = size < 8 ? size : 8;
  HK_RETURN_IF_ERROR(hk_read_exact(fd, head, head_n, path));
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = n << 8 | head[i];
  w->block = hk_alloc(&w->allocator, size + HK_WEIGHTS_DATA_ALIGN);
  HK_FAIL_IF(!w->block, HK_STATUS_OUT_OF_MEMORY, "out of memory reading the %zu-byte file %s", size, path);
  uint64_t data_at = n <= size ? 8 + n : 0;
  size_t pad = (size_t)((HK_WEIGHTS_DATA_ALIGN - ((uintptr_t)w->block + data_at) % HK_WEIGHTS_DATA_ALIGN) %
                        HK_WEIGHTS_DATA_ALIGN);
  uint8_t *bytes = (uint8_t *)w->block + pad;
  memcpy(bytes, head, head_n);
  HK_RETURN_IF_ERROR(hk_read_exact(fd, bytes + head_n, size - head_n, path));
  return parse(w, bytes, size, header_cap(o));
}

HK_API hk_status_t hk_weights_open_file(const char *path, const hk_weights_open_options_t *options,
                                        hk_weights_t **out_weights) {
  HK_FAIL_IF(!out_weights, HK_STATUS_INVALID_ARGUMENT, "out_weights is NULL");
  *out_weights = NULL;
  HK_FAIL_IF(!path, HK_STATUS_INVALID_ARGUMENT, "path is NULL");
  hk_weights_open_options_t o;
  HK_RETURN_IF_ERROR(read_options(options, &o));
  int fd;
  uint64_t file_size;
  HK_RETURN_IF_ERROR(hk_file_open_input(path, &fd, &file_size)); /* never blocks on a FIFO */
  hk_weights_t *w = NULL;
  hk_status_t st = weights_new(&o, &w);
  if (st == HK_OK) st = open_fd(w, fd, file_size, path, &o);
  close(fd);
  if (st != HK_OK) {
    hk_weights_destroy(w);
    hk_error_prefix(path);
    return st;
  }
  *out_weights = w;
  return HK_OK;
}

/* ---- accessors ------------------------------------------------------------------------------- */
HK_API uint32_t hk_weights_count(const hk_weights_t *w) { return w ? w->count : 0; }

HK_API hk_status_t hk_weights_tensor_info(const hk_weights_t *w, uint32_t index, hk_weights_tensor_info_t *out_info) {
  HK_FAIL_IF(!w || !out_info, HK_STATUS_INVALID_ARGUMENT, "weights and out_info must not be NULL");
  HK_FAIL_IF(index >= w->count, HK_STATUS_NOT_FOUND, "weights tensor index %u out of range (%u tensors)", index,
             w->count);
  const hk_weights_rec_t *r = &w->recs[index];
  memset(out_info, 0, sizeof *out_info);
  out_info->name = r->name;
  out_info->dtype = r->dtype;
  out_info->dtype_name = k_dtypes[r->dtype].name;
  out_info->rank = r->rank;
  memcpy(out_info->dims, r->dims, sizeof r->dims);
  out_info->bytes = (size_t)(r->end - r->begin);
  out_info->data = out_info->bytes ? w->data + r->begin : NULL;
  return HK_OK;
}

HK_API hk_status_t hk_weights_find(const hk_weights_t *w, const char *name, uint32_t *out_index) {
  HK_FAIL_IF(!w || !name || !out_index, HK_STATUS_INVALID_ARGUMENT, "weights, name and out_index must not be NULL");
  for (uint32_t i = 0; i < w->count; i++)
    if (strcmp(w->recs[i].name, name) == 0) {
      *out_index = i;
      return HK_OK;
    }
  return HK_ERROR(HK_STATUS_NOT_FOUND, "the weights have no tensor named \"%s\"", name);
}

HK_API const char *hk_weights_metadata(const hk_weights_t *w, const char *key) {
  for (uint32_t i = 0; w && key && i < w->meta_count; i++)
    if (strcmp(w->meta[i].key, key) == 0) return w->meta[i].value;
  return NULL;
}
