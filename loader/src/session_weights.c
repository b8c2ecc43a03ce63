/* SPDX-License-Identifier: Apache-2.0 */
/*
 * session_weights.c -- hk_session_bind_weights: binding a session's params (and inputs) to
 * the tensors of a safetensors checkpoint (weights.c).
 *
 * Everything is checked before anything is bound or allocated: the options, the name map
 * (each entry names a bindable tensor of the session, once, and a tensor of the file), every
 * match's dtype and shape. Then each tensor gets its buffer -- the weights' own bytes on the
 * host target when aligned, else session memory filled by a copy -- and all are bound in one
 * step (hk_session_bind_many); a failure on the way frees what was allocated and binds
 * nothing.
 *
 * A param with parts (format 1.4; hk_session_tensor_part) that the file lacks under its own
 * (unmapped) name is the concatenation of its parts along axis 0: when the file holds all of
 * them, each is checked against the param (dtype, trailing dims, rows summing to dim 0) and
 * copied at its row offset into one buffer the session owns.
 *
 * A float tensor (or part) of another float dtype than the session's is converted
 * (convert.c: round to nearest even) into memory the session owns, through a staging buffer of
 * at most HK_CONVERT_CHUNK bytes that each hk_session_copy empties: a GPU session never holds
 * a converted copy of the whole checkpoint on the host. Values that would overflow to infinity
 * are found in the checking pass, so a refusal still binds nothing.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "convert_internal.h"
#include "pack_internal.h" /* hk_dtype_label */
#include "session_internal.h"
#include "status_internal.h"
#include "util_internal.h"
#include "weights_internal.h"

#define HK_BIND_WEIGHTS_FLAGS \
  (HK_BIND_WEIGHTS_INPUTS | HK_BIND_WEIGHTS_ALL_PARAMS | HK_BIND_WEIGHTS_COPY | HK_BIND_WEIGHTS_EXACT_DTYPE)
/* sizeof the options before reserved0, log and log_user (libhkrt 0.1; 24 on 64-bit hosts):
 * still accepted. */
#define HK_BIND_WEIGHTS_OPTIONS_V0_SIZE                                                                          \
  ((uint32_t)((offsetof(hk_bind_weights_options_t, name_count) + sizeof(uint32_t) + _Alignof(void *) - 1) / \
              _Alignof(void *) * _Alignof(void *)))
/* Converted elements go through a staging buffer of this size on their way to the session. */
#define HK_CONVERT_CHUNK ((size_t)1 << 20)

/* Conversions of one call, counted by (checkpoint dtype, session dtype) for the note. */
typedef struct {
  uint32_t count[3][3]; /* [from][to], hk_element_type_t's float values */
} conversions_t;

/* "F32 [768,768]" / "f32 [768,768]" */
static void shape_text(const char *dtype, uint32_t rank, const int64_t *dims, char *out, size_t size) {
  int n = snprintf(out, size, "%s [", dtype);
  for (uint32_t d = 0; d < rank && n > 0 && (size_t)n < size; d++)
    n += snprintf(out + n, size - (size_t)n, "%s%lld", d ? "," : "", (long long)dims[d]);
  if (n > 0 && (size_t)n < size) snprintf(out + n, size - (size_t)n, "]");
}

static bool bindable(const hk_tensor_info_t *info, uint32_t flags) {
  return info->role == HK_TENSOR_PARAM || (info->role == HK_TENSOR_INPUT && (flags & HK_BIND_WEIGHTS_INPUTS));
}

/* The file tensor session tensor `info` takes: its map entry's, else its own name's. Sets
 * *out_found. Errors: NOT_FOUND for a map entry naming no file tensor. */
static hk_status_t lookup(const hk_weights_t *w, const hk_bind_weights_options_t *o, const hk_tensor_info_t *info,
                          uint32_t *out_index, bool *out_found) {
  const char *want = info->name;
  bool mapped = false;
  for (uint32_t m = 0; m < o->name_count; m++)
    if (strcmp(o->names[m].tensor, info->name) == 0) {
      want = o->names[m].weights;
      mapped = true;
    }
  *out_found = hk_weights_find(w, want, out_index) == HK_OK;
  HK_FAIL_IF(mapped && !*out_found, HK_STATUS_NOT_FOUND,
             "name map: tensor %s maps to \"%s\", which the weights do not have", info->name, want);
  hk_error_clear(); /* a name the file lacks is not an error */
  return HK_OK;
}

/* Checks options and the name map against the session. Errors: INVALID_ARGUMENT, NOT_FOUND. */
static hk_status_t check_options(const hk_session_t *s, const hk_bind_weights_options_t *o) {
  HK_FAIL_IF(o->flags & ~HK_BIND_WEIGHTS_FLAGS, HK_STATUS_INVALID_ARGUMENT,
             "bind weights options: unknown flags 0x%x", o->flags & ~HK_BIND_WEIGHTS_FLAGS);
  HK_FAIL_IF(o->name_count && !o->names, HK_STATUS_INVALID_ARGUMENT,
             "bind weights options: names is NULL but name_count is %u", o->name_count);
  for (uint32_t m = 0; m < o->name_count; m++) {
    const hk_weights_name_t *e = &o->names[m];
    HK_FAIL_IF(!e->tensor || !e->weights, HK_STATUS_INVALID_ARGUMENT, "name map entry %u has a NULL name", m);
    for (uint32_t k = 0; k < m; k++)
      HK_FAIL_IF(strcmp(o->names[k].tensor, e->tensor) == 0, HK_STATUS_INVALID_ARGUMENT,
                 "name map: tensor %s is mapped twice", e->tensor);
    bool found = false;
    for (uint32_t t = 0; t < hk_session_tensor_count(s) && !found; t++) {
      hk_tensor_info_t info;
      (void)hk_session_tensor_info(s, t, &info);
      if (strcmp(info.name, e->tensor) != 0) continue;
      found = true;
      HK_FAIL_IF(!bindable(&info, o->flags), HK_STATUS_INVALID_ARGUMENT,
                 "name map: tensor %s is %s, not a param%s", e->tensor,
                 info.role == HK_TENSOR_OUTPUT ? "an output" : "an input",
                 info.role == HK_TENSOR_INPUT ? " (HK_BIND_WEIGHTS_INPUTS binds inputs too)" : "");
    }
    for (uint32_t t = 0; t < hk_session_tensor_count(s) && !found; t++) {
      const char *part;
      for (uint32_t p = 0; (part = hk_session_tensor_part(s, t, p)) != NULL; p++) {
        hk_tensor_info_t info;
        (void)hk_session_tensor_info(s, t, &info);
        HK_FAIL_IF(strcmp(part, e->tensor) == 0, HK_STATUS_NOT_FOUND,
                   "name map: the session has no tensor named %s; it is a part of param %s, and parts are "
                   "checkpoint names looked up as written (the name map does not apply to them)",
                   e->tensor, info.name);
      }
    }
    HK_FAIL_IF(!found, HK_STATUS_NOT_FOUND, "name map: the session has no tensor named %s", e->tensor);
  }
  return HK_OK;
}

/* Whether file dtype `dtype` binds to session element type `type`: the same (safetensors I32
 * for an i32 tensor, I8 for an int8 param, F8_E4M3 for an fp8_e4m3 one; the float types share
 * their numbers), or -- unless `exact` -- both float types, converted. */
static bool dtype_binds(hk_weights_dtype_t dtype, hk_element_type_t type, bool exact) {
  if (type == HK_ELEMENT_I32) return dtype == HK_WEIGHTS_I32;
  if (type == HK_ELEMENT_I8) return dtype == HK_WEIGHTS_I8;
  if (type == HK_ELEMENT_FP8_E4M3) return dtype == HK_WEIGHTS_F8_E4M3;
  if ((uint32_t)dtype == (uint32_t)type) return true;
  return !exact && dtype <= HK_WEIGHTS_BF16 && hk_convert_supported((hk_element_type_t)dtype, type);
}

/* Whether a file tensor of `dtype` that binds to `type` (dtype_binds) is copied as it is: the
 * same type, or one only its own file dtype binds to (i32, int8, fp8_e4m3); otherwise both are
 * float types and it is converted. */
static bool binds_as_is(hk_weights_dtype_t dtype, hk_element_type_t type) {
  return type == HK_ELEMENT_I32 || type == HK_ELEMENT_I8 || type == HK_ELEMENT_FP8_E4M3 ||
         (uint32_t)dtype == (uint32_t)type;
}

/* " (HK_BIND_WEIGHTS_EXACT_DTYPE: no conversion)" when that refused a float tensor. */
static const char *exact_note(hk_weights_dtype_t dtype, hk_element_type_t type, bool exact) {
  return exact && !dtype_binds(dtype, type, true) && dtype_binds(dtype, type, false)
             ? " (HK_BIND_WEIGHTS_EXACT_DTYPE: no conversion)"
             : "";
}

/* A converted file tensor wi (`what` names it: "the weights' tensor \"m.w\"", "part 1
 * \"m.b\"") must hold no finite value that becomes infinite in the session's dtype, and is
 * counted in *conv. Errors: INVALID_ARGUMENT naming the tensor, the element and its value. */
static hk_status_t check_conversion(const hk_tensor_info_t *info, const hk_weights_tensor_info_t *wi,
                                    const char *what, conversions_t *conv) {
  if (binds_as_is(wi->dtype, info->element_type)) return HK_OK;
  const hk_element_type_t from = (hk_element_type_t)wi->dtype, to = info->element_type;
  const size_t count = wi->bytes / (from == HK_ELEMENT_F32 ? 4 : 2);
  const size_t at = hk_convert_find_overflow(wi->data, from, to, count);
  HK_FAIL_IF(at < count, HK_STATUS_INVALID_ARGUMENT,
             "tensor %s: %s (%s) holds %.9g at element %zu, beyond the largest finite %s (%s): converting it would "
             "make it infinite, so it is refused (scale or clip the checkpoint, or use a pack of a wider dtype)",
             info->name, what, wi->dtype_name, (double)hk_convert_load(wi->data, from, at), at,
             hk_dtype_label(to), to == HK_ELEMENT_F16 ? "65504" : "3.3895e38");
  conv->count[from][to]++;
  return HK_OK;
}

/* dtype and shape of file tensor wi match the session's (dtype_binds). Errors: INVALID_ARGUMENT. */
static hk_status_t check_match(const hk_tensor_info_t *info, const hk_weights_tensor_info_t *wi, bool exact) {
  bool same = dtype_binds(wi->dtype, info->element_type, exact) && wi->rank == info->rank;
  for (uint32_t d = 0; same && d < info->rank; d++) same = wi->dims[d] == info->dims[d];
  if (same) return HK_OK;
  char want[160], got[160];
  shape_text(hk_dtype_label(info->element_type), info->rank, info->dims, want, sizeof want);
  shape_text(wi->dtype_name, wi->rank, wi->dims, got, sizeof got);
  return HK_ERROR(HK_STATUS_INVALID_ARGUMENT, "tensor %s: the session expects %s, the weights' tensor \"%s\" is %s%s",
                  info->name, want, wi->name, got, exact_note(wi->dtype, info->element_type, exact));
}

/* Appends `name` (and a note) to the missing list, "..." once it is full. */
static void note_missing(char *missing, size_t size, size_t *used, const char *name, const char *part) {
  if (*used + 4 >= size) return;
  int m = part ? snprintf(missing + *used, size - *used, "%s%s (part \"%s\")", *used ? ", " : "", name, part)
               : snprintf(missing + *used, size - *used, "%s%s", *used ? ", " : "", name);
  if (m < 0 || (size_t)m >= size - *used) memcpy(missing + size - 4, "...", 4);
  else *used += (size_t)m;
}

/* Session tensor `index` (info) from its parts: *out_found when the file holds every part (else
 * *out_missing names the first part it lacks), each checked against the param: the param's
 * dtype (or another float dtype, unless `exact`: converted, no value overflowing, counted in
 * *conv) and rank, its dims but the first, rows summing to its dim 0. Errors: INVALID_ARGUMENT
 * naming the param, the part and what was expected (or the value that would overflow). */
static hk_status_t check_parts(const hk_session_t *s, const hk_weights_t *w, uint32_t index,
                               const hk_tensor_info_t *info, bool exact, bool *out_found, const char **out_missing,
                               conversions_t *conv) {
  *out_found = false;
  *out_missing = NULL;
  const char *part;
  int64_t rows = 0;
  for (uint32_t p = 0; (part = hk_session_tensor_part(s, index, p)) != NULL; p++) {
    uint32_t wi_index;
    if (hk_weights_find(w, part, &wi_index) != HK_OK) {
      hk_error_clear(); /* a part the file lacks is not an error */
      *out_missing = part;
      return HK_OK;
    }
  }
  char want[160], got[160];
  shape_text(hk_dtype_label(info->element_type), info->rank, info->dims, want, sizeof want);
  for (uint32_t p = 0; (part = hk_session_tensor_part(s, index, p)) != NULL; p++) {
    uint32_t wi_index;
    hk_weights_tensor_info_t wi;
    (void)hk_weights_find(w, part, &wi_index);
    (void)hk_weights_tensor_info(w, wi_index, &wi);
    bool same = info->element_type != HK_ELEMENT_I32 && dtype_binds(wi.dtype, info->element_type, exact) &&
                wi.rank == info->rank && wi.rank >= 1 && wi.dims[0] >= 1;
    for (uint32_t d = 1; same && d < info->rank; d++) same = wi.dims[d] == info->dims[d];
    if (!same) {
      shape_text(wi.dtype_name, wi.rank, wi.dims, got, sizeof got);
      char rows_of[160];
      int n = snprintf(rows_of, sizeof rows_of, "%s [ROWS", hk_dtype_label(info->element_type));
      for (uint32_t d = 1; d < info->rank && n > 0 && (size_t)n < sizeof rows_of; d++)
        n += snprintf(rows_of + n, sizeof rows_of - (size_t)n, ",%lld", (long long)info->dims[d]);
      if (n > 0 && (size_t)n < sizeof rows_of) snprintf(rows_of + n, sizeof rows_of - (size_t)n, "]");
      return HK_ERROR(HK_STATUS_INVALID_ARGUMENT,
                      "tensor %s: the session expects %s, concatenated from its parts along axis 0, so each part "
                      "must be %s; part %u \"%s\" is %s%s", info->name, want, rows_of, p, part, got,
                      exact_note(wi.dtype, info->element_type, exact));
    }
    rows += wi.dims[0]; /* each at most 2^53, at most HK_MAX_PARTS of them: no overflow */
  }
  conversions_t parts_conv = {0}; /* counted only once every part is checked */
  if (rows != info->dims[0]) {
    char list[400] = "";
    size_t used = 0;
    for (uint32_t p = 0; (part = hk_session_tensor_part(s, index, p)) != NULL && used + 4 < sizeof list; p++) {
      uint32_t wi_index;
      hk_weights_tensor_info_t wi;
      (void)hk_weights_find(w, part, &wi_index);
      (void)hk_weights_tensor_info(w, wi_index, &wi);
      int m = snprintf(list + used, sizeof list - used, "%s\"%s\" %lld", p ? " + " : "", part, (long long)wi.dims[0]);
      if (m < 0 || (size_t)m >= sizeof list - used) memcpy(list + sizeof list - 4, "...", 4);
      else used += (size_t)m;
    }
    return HK_ERROR(HK_STATUS_INVALID_ARGUMENT,
                    "tensor %s: the session expects %s, but the rows of its parts sum to %lld, not %lld (%s)",
                    info->name, want, (long long)rows, (long long)info->dims[0], list);
  }
  for (uint32_t p = 0; (part = hk_session_tensor_part(s, index, p)) != NULL; p++) {
    uint32_t wi_index;
    hk_weights_tensor_info_t wi;
    (void)hk_weights_find(w, part, &wi_index);
    (void)hk_weights_tensor_info(w, wi_index, &wi);
    char what[1100];
    snprintf(what, sizeof what, "part %u \"%s\"", p, part);
    HK_RETURN_IF_ERROR(check_conversion(info, &wi, what, &parts_conv));
  }
  for (int f = 0; f < 3; f++)
    for (int t = 0; t < 3; t++) conv->count[f][t] += parts_conv.count[f][t];
  *out_found = true;
  return HK_OK;
}

/* Copies file tensor wi into dst (session memory) as element type `to`: as it is, or
 * converted through *staging (HK_CONVERT_CHUNK bytes from allocator a, allocated on first use,
 * the caller frees it), one chunk per copy. Sets *out_bytes to the bytes written. */
static hk_status_t copy_tensor(hk_session_t *s, const hk_allocator_t *a, const hk_weights_tensor_info_t *wi,
                               hk_element_type_t to, uint8_t *dst, void **staging, size_t *out_bytes) {
  if (binds_as_is(wi->dtype, to)) {
    *out_bytes = wi->bytes;
    return hk_session_copy(s, dst, wi->data, wi->bytes, HK_COPY_HOST_TO_DEVICE);
  }
  const hk_element_type_t from = (hk_element_type_t)wi->dtype;
  const size_t in_size = from == HK_ELEMENT_F32 ? 4 : 2, out_size = to == HK_ELEMENT_F32 ? 4 : 2;
  const size_t count = wi->bytes / in_size, chunk = HK_CONVERT_CHUNK / out_size;
  *out_bytes = count * out_size;
  if (!*staging && count) {
    *staging = hk_alloc(a, HK_CONVERT_CHUNK);
    HK_FAIL_IF(!*staging, HK_STATUS_OUT_OF_MEMORY, "out of memory converting weights");
  }
  for (size_t i = 0; i < count; i += chunk) {
    const size_t n = count - i < chunk ? count - i : chunk;
    hk_convert(*staging, to, (const uint8_t *)wi->data + i * in_size, from, n);
    HK_RETURN_IF_ERROR(hk_session_copy(s, dst + i * out_size, *staging, n * out_size, HK_COPY_HOST_TO_DEVICE));
  }
  return HK_OK;
}

/* Copies the parts of session tensor `index` (info) into dst (the tensor's bytes, the
 * session's memory), each at its row offset, converted to the tensor's dtype where needed. */
static hk_status_t copy_parts(hk_session_t *s, const hk_weights_t *w, uint32_t index, const hk_tensor_info_t *info,
                              uint8_t *dst, void **staging) {
  const char *part;
  size_t at = 0;
  for (uint32_t p = 0; (part = hk_session_tensor_part(s, index, p)) != NULL; p++) {
    uint32_t wi_index;
    hk_weights_tensor_info_t wi;
    (void)hk_weights_find(w, part, &wi_index); /* check_parts found it */
    (void)hk_weights_tensor_info(w, wi_index, &wi);
    size_t written;
    HK_RETURN_IF_ERROR(copy_tensor(s, hk_weights_allocator(w), &wi, info->element_type, dst + at, staging, &written));
    at += written;
  }
  return HK_OK;
}

/* Whether file tensor wi binds to a session tensor described by info (its dtype and shape, and a
 * conversion that does not overflow, counted in conv). Errors: INVALID_ARGUMENT. */
static hk_status_t check_file_tensor(const hk_tensor_info_t *info, const hk_weights_tensor_info_t *wi, bool exact,
                                     conversions_t *conv) {
  HK_RETURN_IF_ERROR(check_match(info, wi, exact));
  char what[1100];
  snprintf(what, sizeof what, "the weights' tensor \"%s\"", wi->name);
  return check_conversion(info, wi, what, conv);
}

/* A sliced param (tensor parallelism): its whole tensor's info (the dim along the shard's axis
 * the segments' sum; the name the source's, whose checkpoint tensor it slices). */
static hk_tensor_info_t whole_info(const hk_session_t *s, const hk_tensor_info_t *info, const hk_shard_rec_t *sh,
                                   uint32_t source) {
  hk_tensor_info_t whole = *info;
  if (source != UINT32_MAX) {
    hk_tensor_info_t src;
    (void)hk_session_tensor_info(s, source, &src);
    whole.name = src.name;
  }
  uint64_t along = 0;
  for (uint32_t k = 0; k < sh->segment_count; k++) along += sh->seg_size[k];
  whole.bytes = whole.bytes / (size_t)info->dims[sh->axis] * (size_t)along;
  whole.dims[sh->axis] = (int64_t)along;
  return whole;
}

/* Copies this rank's pieces of the whole tensor `whole` (session memory, the tensor's dtype) into
 * dst (session memory of the rank's shape): per segment, piece rank * parts / ranks. */
static hk_status_t copy_slice(hk_session_t *s, const hk_tensor_info_t *info, const hk_shard_rec_t *sh, uint32_t rank,
                              uint32_t ranks, const uint8_t *whole, uint8_t *dst, hk_copy_kind_t kind) {
  size_t outer = 1, inner;
  for (uint32_t d = 0; d < sh->axis; d++) outer *= (size_t)info->dims[d];
  inner = info->bytes / outer / (size_t)info->dims[sh->axis]; /* bytes of one step along the axis */
  size_t whole_along = 0;
  for (uint32_t k = 0; k < sh->segment_count; k++) whole_along += (size_t)sh->seg_size[k];
  const size_t local_along = (size_t)info->dims[sh->axis];
  size_t woff = 0, loff = 0;
  for (uint32_t k = 0; k < sh->segment_count; k++) {
    const size_t piece = (size_t)(sh->seg_size[k] / sh->seg_parts[k]);
    const size_t at = woff + (size_t)((uint64_t)rank * sh->seg_parts[k] / ranks) * piece;
    for (size_t o = 0; o < outer; o++)
      HK_RETURN_IF_ERROR(hk_session_copy(s, dst + (o * local_along + loff) * inner, whole + (o * whole_along + at) * inner,
                                         piece * inner, kind));
    woff += (size_t)sh->seg_size[k];
    loff += piece;
  }
  return HK_OK;
}

HK_API hk_status_t hk_session_tensor_whole_info(const hk_session_t *s, uint32_t index, hk_tensor_info_t *out_info) {
  HK_RETURN_IF_ERROR(hk_session_tensor_info(s, index, out_info)); /* checks s, index, out_info */
  uint32_t rank, ranks, source;
  const hk_shard_rec_t *sh = hk_session_tensor_shard(s, index, &rank, &ranks, &source);
  if (sh) *out_info = whole_info(s, out_info, sh, source == index ? UINT32_MAX : source);
  return HK_OK;
}

HK_API hk_status_t hk_session_bind_sliced(hk_session_t *s, const char *name, const void *whole, size_t bytes) {
  HK_FAIL_IF(!s || !name || !whole, HK_STATUS_INVALID_ARGUMENT, "session, name and whole must not be NULL");
  uint32_t index = UINT32_MAX;
  hk_tensor_info_t info, winfo;
  for (uint32_t t = 0; t < hk_session_tensor_count(s) && index == UINT32_MAX; t++) {
    (void)hk_session_tensor_info(s, t, &info);
    if (strcmp(info.name, name) == 0) index = t;
  }
  HK_FAIL_IF(index == UINT32_MAX, HK_STATUS_NOT_FOUND, "the session has no tensor named %s", name);
  (void)hk_session_tensor_whole_info(s, index, &winfo);
  HK_FAIL_IF(bytes != winfo.bytes, HK_STATUS_INVALID_ARGUMENT, "tensor %s: the whole tensor has %zu bytes, got %zu",
             name, winfo.bytes, bytes);
  uint32_t rank = 0, ranks = 1, source;
  const hk_shard_rec_t *sh = hk_session_tensor_shard(s, index, &rank, &ranks, &source);
  void *data = NULL;
  HK_RETURN_IF_ERROR(hk_session_alloc(s, info.bytes ? info.bytes : 1, &data));
  hk_status_t st = sh ? copy_slice(s, &info, sh, rank, ranks, whole, data, HK_COPY_HOST_TO_DEVICE)
                      : hk_session_copy(s, data, whole, bytes, HK_COPY_HOST_TO_DEVICE);
  const bool owned = true;
  if (st == HK_OK) st = hk_session_bind_many(s, 1, &index, &data, &owned);
  if (st != HK_OK) hk_session_free(s, data);
  return st;
}

/* The note of the conversions, once: "weights: converting 147 tensors from F32 to BF16[, 3
 * from F16 to BF16]". */
static void note_conversions(const hk_bind_weights_options_t *o, const conversions_t *conv) {
  static const char *const names[3] = {"F32", "F16", "BF16"};
  char line[256];
  size_t used = 0;
  for (int f = 0; f < 3; f++)
    for (int t = 0; t < 3; t++) {
      const uint32_t n = conv->count[f][t];
      if (!n || used + 64 > sizeof line) continue;
      if (used)
        used += (size_t)snprintf(line + used, sizeof line - used, ", %u from %s to %s", n, names[f], names[t]);
      else
        used = (size_t)snprintf(line, sizeof line, "weights: converting %u tensor%s from %s to %s", n,
                                n == 1 ? "" : "s", names[f], names[t]);
    }
  if (!used) return;
  if (o->log) o->log(o->log_user, line);
  else fprintf(stderr, "%s\n", line);
}

/* The buffers: plan[k] (session tensor idx[k], file tensor src[k]) gets data[k]. */
static hk_status_t bind_weights(hk_session_t *s, const hk_weights_t *w, const hk_bind_weights_options_t *o,
                                uint32_t *out_bound) {
  HK_RETURN_IF_ERROR(check_options(s, o));
  const uint32_t n = hk_session_tensor_count(s);
  const hk_allocator_t *a = hk_weights_allocator(w);
  uint32_t *idx = hk_calloc(a, n ? n : 1, sizeof *idx), *src = hk_calloc(a, n ? n : 1, sizeof *src);
  void **data = hk_calloc(a, n ? n : 1, sizeof *data);
  bool *owned = hk_calloc(a, n ? n : 1, sizeof *owned);
  uint32_t *sliced = hk_calloc(a, n ? n : 1, sizeof *sliced); /* per plan entry: the source of a slice, or UINT32_MAX */
  uint32_t count = 0;
  for (uint32_t k = 0; sliced && k < n; k++) sliced[k] = UINT32_MAX;
  hk_status_t st = HK_OK;
  const bool exact = (o->flags & HK_BIND_WEIGHTS_EXACT_DTYPE) != 0;
  conversions_t conv = {0};
  void *staging = NULL;
  char missing[600] = "";
  size_t missing_used = 0;
  if (!idx || !src || !data || !owned || !sliced) st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory binding weights");
  for (uint32_t t = 0; t < n && st == HK_OK; t++) {
    hk_tensor_info_t info;
    (void)hk_session_tensor_info(s, t, &info);
    if (!bindable(&info, o->flags)) continue;
    uint32_t wi_index;
    bool found;
    uint32_t rank = 0, ranks = 1, source = UINT32_MAX;
    const hk_shard_rec_t *sh = info.role == HK_TENSOR_PARAM ? hk_session_tensor_shard(s, t, &rank, &ranks, &source)
                                                            : NULL;
    st = lookup(w, o, &info, &wi_index, &found);
    if (st != HK_OK) break;
    if (sh && found) { /* the rank's own shard (a pre-split checkpoint) binds as it is */
      hk_weights_tensor_info_t wi;
      (void)hk_weights_tensor_info(w, wi_index, &wi);
      found = check_match(&info, &wi, exact) == HK_OK;
      hk_error_clear();
    }
    if (sh && !found) { /* the whole tensor (or its parts), sliced */
      const hk_tensor_info_t whole = whole_info(s, &info, sh, source);
      const uint32_t from = source != UINT32_MAX ? source : t;
      st = lookup(w, o, &whole, &wi_index, &found);
      if (st != HK_OK) break;
      if (found) {
        hk_weights_tensor_info_t wi;
        (void)hk_weights_tensor_info(w, wi_index, &wi);
        if ((st = check_file_tensor(&whole, &wi, exact, &conv)) != HK_OK) break;
      } else if (hk_session_tensor_part(s, from, 0)) {
        const char *lacks;
        st = check_parts(s, w, from, &whole, exact, &found, &lacks, &conv);
        if (st != HK_OK) break;
        wi_index = UINT32_MAX;
      }
      if (!found) {
        note_missing(missing, sizeof missing, &missing_used, info.name, NULL);
        continue;
      }
      idx[count] = t;
      sliced[count] = from;
      src[count++] = wi_index;
      continue;
    }
    if (!found && info.role == HK_TENSOR_PARAM && hk_session_tensor_part(s, t, 0)) {
      const char *lacks;
      st = check_parts(s, w, t, &info, exact, &found, &lacks, &conv);
      if (st != HK_OK) break;
      if (!found) {
        note_missing(missing, sizeof missing, &missing_used, info.name, lacks);
        continue;
      }
      idx[count] = t;
      src[count++] = UINT32_MAX; /* from its parts */
      continue;
    }
    if (!found) {
      if (info.role == HK_TENSOR_PARAM) note_missing(missing, sizeof missing, &missing_used, info.name, NULL);
      continue;
    }
    hk_weights_tensor_info_t wi;
    (void)hk_weights_tensor_info(w, wi_index, &wi);
    st = check_file_tensor(&info, &wi, exact, &conv);
    idx[count] = t;
    src[count++] = wi_index;
  }
  if (st == HK_OK && (o->flags & HK_BIND_WEIGHTS_ALL_PARAMS) && missing[0])
    st = HK_ERROR(HK_STATUS_NOT_FOUND, "the weights lack param(s) %s", missing);
  if (st == HK_OK) note_conversions(o, &conv);
  for (uint32_t k = 0; k < count && st == HK_OK; k++) {
    if (sliced[k] != UINT32_MAX) { /* the whole tensor in session memory, then the rank's pieces */
      hk_tensor_info_t info;
      uint32_t rank, ranks, source;
      (void)hk_session_tensor_info(s, idx[k], &info);
      const hk_shard_rec_t *sh = hk_session_tensor_shard(s, idx[k], &rank, &ranks, &source);
      const hk_tensor_info_t whole = whole_info(s, &info, sh, source);
      void *buf = NULL;
      st = hk_session_alloc(s, whole.bytes ? whole.bytes : 1, &buf);
      if (st == HK_OK) {
        if (src[k] == UINT32_MAX) {
          st = copy_parts(s, w, sliced[k], &whole, buf, &staging);
        } else {
          hk_weights_tensor_info_t wi;
          size_t written;
          (void)hk_weights_tensor_info(w, src[k], &wi);
          st = copy_tensor(s, a, &wi, info.element_type, buf, &staging, &written);
        }
      }
      if (st == HK_OK) st = hk_session_alloc(s, info.bytes ? info.bytes : 1, &data[k]);
      if (st == HK_OK) {
        owned[k] = true;
        st = copy_slice(s, &info, sh, rank, ranks, buf, data[k], HK_COPY_DEVICE_TO_DEVICE);
      }
      if (buf) hk_session_free(s, buf);
      continue;
    }
    if (src[k] == UINT32_MAX) { /* one buffer the session owns, filled part by part */
      hk_tensor_info_t info;
      (void)hk_session_tensor_info(s, idx[k], &info);
      st = hk_session_alloc(s, info.bytes ? info.bytes : 1, &data[k]);
      if (st == HK_OK) {
        owned[k] = true;
        st = copy_parts(s, w, idx[k], &info, data[k], &staging);
      }
      continue;
    }
    hk_weights_tensor_info_t wi;
    hk_tensor_info_t info;
    (void)hk_weights_tensor_info(w, src[k], &wi);
    (void)hk_session_tensor_info(s, idx[k], &info);
    const bool converted = (uint32_t)wi.dtype != (uint32_t)info.element_type && info.element_type != HK_ELEMENT_I32;
    if (!converted && !(o->flags & HK_BIND_WEIGHTS_COPY) && hk_session_binds_in_place(s, wi.data)) {
      data[k] = (void *)(uintptr_t)wi.data; /* the session only reads params (and inputs) */
      continue;
    }
    st = hk_session_alloc(s, info.bytes ? info.bytes : 1, &data[k]);
    if (st == HK_OK) {
      owned[k] = true;
      size_t written;
      st = copy_tensor(s, a, &wi, info.element_type, data[k], &staging, &written);
    }
  }
  if (st == HK_OK) st = hk_session_bind_many(s, count, idx, data, owned);
  if (st == HK_OK) {
    if (out_bound) *out_bound = count;
  } else {
    for (uint32_t k = 0; k < count; k++)
      if (owned[k]) hk_session_free(s, data[k]);
  }
  hk_free(a, idx);
  hk_free(a, src);
  hk_free(a, data);
  hk_free(a, owned);
  hk_free(a, sliced);
  hk_free(a, staging);
  return st;
}

HK_API hk_status_t hk_session_bind_weights(hk_session_t *session, const hk_weights_t *weights,
                                           const hk_bind_weights_options_t *options, uint32_t *out_bound) {
  if (out_bound) *out_bound = 0;
  HK_FAIL_IF(!session || !weights, HK_STATUS_INVALID_ARGUMENT, "session and weights must not be NULL");
  hk_bind_weights_options_t o = {.struct_size = sizeof o};
  if (options) {
    HK_FAIL_IF(options->struct_size != sizeof *options && options->struct_size != HK_BIND_WEIGHTS_OPTIONS_V0_SIZE,
               HK_STATUS_INVALID_ARGUMENT,
               "bind weights options: struct_size %u is neither sizeof(hk_bind_weights_options_t) (%zu) nor %u "
               "(libhkrt 0.1's)", options->struct_size, sizeof *options, HK_BIND_WEIGHTS_OPTIONS_V0_SIZE);
    memcpy(&o, options, options->struct_size); /* an older caller's: the fields after it stay zero */
  }
  hk_status_t st = bind_weights(session, weights, &o, out_bound);
  if (st != HK_OK && st != HK_STATUS_BUSY) hk_session_note_error(session);
  return st;
}
