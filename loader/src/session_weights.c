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
 */
#include <stdio.h>
#include <string.h>

#include "pack_internal.h" /* hk_dtype_label */
#include "session_internal.h"
#include "status_internal.h"
#include "util_internal.h"
#include "weights_internal.h"

#define HK_BIND_WEIGHTS_FLAGS (HK_BIND_WEIGHTS_INPUTS | HK_BIND_WEIGHTS_ALL_PARAMS | HK_BIND_WEIGHTS_COPY)

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

/* dtype and shape of file tensor wi equal the session's (safetensors I32 for an i32 tensor;
 * the float types share their numbers). Errors: INVALID_ARGUMENT. */
static hk_status_t check_match(const hk_tensor_info_t *info, const hk_weights_tensor_info_t *wi) {
  bool same = (info->element_type == HK_ELEMENT_I32 ? wi->dtype == HK_WEIGHTS_I32
                                                    : (uint32_t)wi->dtype == (uint32_t)info->element_type) &&
              wi->rank == info->rank;
  for (uint32_t d = 0; same && d < info->rank; d++) same = wi->dims[d] == info->dims[d];
  if (same) return HK_OK;
  char want[160], got[160];
  shape_text(hk_dtype_label(info->element_type), info->rank, info->dims, want, sizeof want);
  shape_text(wi->dtype_name, wi->rank, wi->dims, got, sizeof got);
  return HK_ERROR(HK_STATUS_INVALID_ARGUMENT, "tensor %s: the session expects %s, the weights' tensor \"%s\" is %s",
                  info->name, want, wi->name, got);
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
 * dtype and rank, its dims but the first, rows summing to its dim 0. Errors: INVALID_ARGUMENT
 * naming the param, the part and what was expected. */
static hk_status_t check_parts(const hk_session_t *s, const hk_weights_t *w, uint32_t index,
                               const hk_tensor_info_t *info, bool *out_found, const char **out_missing) {
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
    bool same = info->element_type != HK_ELEMENT_I32 && (uint32_t)wi.dtype == (uint32_t)info->element_type &&
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
                      "must be %s; part %u \"%s\" is %s", info->name, want, rows_of, p, part, got);
    }
    rows += wi.dims[0]; /* each at most 2^53, at most HK_MAX_PARTS of them: no overflow */
  }
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
  *out_found = true;
  return HK_OK;
}

/* Copies the parts of session tensor `index` into dst (the tensor's bytes, the session's
 * memory), each at its row offset. */
static hk_status_t copy_parts(hk_session_t *s, const hk_weights_t *w, uint32_t index, uint8_t *dst) {
  const char *part;
  size_t at = 0;
  for (uint32_t p = 0; (part = hk_session_tensor_part(s, index, p)) != NULL; p++) {
    uint32_t wi_index;
    hk_weights_tensor_info_t wi;
    (void)hk_weights_find(w, part, &wi_index); /* check_parts found it */
    (void)hk_weights_tensor_info(w, wi_index, &wi);
    HK_RETURN_IF_ERROR(hk_session_copy(s, dst + at, wi.data, wi.bytes, HK_COPY_HOST_TO_DEVICE));
    at += wi.bytes;
  }
  return HK_OK;
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
  uint32_t count = 0;
  hk_status_t st = HK_OK;
  char missing[600] = "";
  size_t missing_used = 0;
  if (!idx || !src || !data || !owned) st = HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory binding weights");
  for (uint32_t t = 0; t < n && st == HK_OK; t++) {
    hk_tensor_info_t info;
    (void)hk_session_tensor_info(s, t, &info);
    if (!bindable(&info, o->flags)) continue;
    uint32_t wi_index;
    bool found;
    st = lookup(w, o, &info, &wi_index, &found);
    if (st != HK_OK) break;
    if (!found && info.role == HK_TENSOR_PARAM && hk_session_tensor_part(s, t, 0)) {
      const char *lacks;
      st = check_parts(s, w, t, &info, &found, &lacks);
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
    st = check_match(&info, &wi);
    idx[count] = t;
    src[count++] = wi_index;
  }
  if (st == HK_OK && (o->flags & HK_BIND_WEIGHTS_ALL_PARAMS) && missing[0])
    st = HK_ERROR(HK_STATUS_NOT_FOUND, "the weights lack param(s) %s", missing);
  for (uint32_t k = 0; k < count && st == HK_OK; k++) {
    if (src[k] == UINT32_MAX) { /* one buffer the session owns, filled part by part */
      hk_tensor_info_t info;
      (void)hk_session_tensor_info(s, idx[k], &info);
      st = hk_session_alloc(s, info.bytes ? info.bytes : 1, &data[k]);
      if (st == HK_OK) {
        owned[k] = true;
        st = copy_parts(s, w, idx[k], data[k]);
      }
      continue;
    }
    hk_weights_tensor_info_t wi;
    (void)hk_weights_tensor_info(w, src[k], &wi);
    if (!(o->flags & HK_BIND_WEIGHTS_COPY) && hk_session_binds_in_place(s, wi.data)) {
      data[k] = (void *)(uintptr_t)wi.data; /* the session only reads params (and inputs) */
      continue;
    }
    st = hk_session_alloc(s, wi.bytes ? wi.bytes : 1, &data[k]);
    if (st == HK_OK) {
      owned[k] = true;
      st = hk_session_copy(s, data[k], wi.data, wi.bytes, HK_COPY_HOST_TO_DEVICE);
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
  return st;
}

HK_API hk_status_t hk_session_bind_weights(hk_session_t *session, const hk_weights_t *weights,
                                           const hk_bind_weights_options_t *options, uint32_t *out_bound) {
  if (out_bound) *out_bound = 0;
  HK_FAIL_IF(!session || !weights, HK_STATUS_INVALID_ARGUMENT, "session and weights must not be NULL");
  hk_bind_weights_options_t o = {.struct_size = sizeof o};
  if (options) {
    HK_FAIL_IF(options->struct_size != sizeof *options, HK_STATUS_INVALID_ARGUMENT,
               "bind weights options: struct_size %u is not sizeof(hk_bind_weights_options_t) (%zu)",
               options->struct_size, sizeof *options);
    o = *options;
  }
  hk_status_t st = bind_weights(session, weights, &o, out_bound);
  if (st != HK_OK && st != HK_STATUS_BUSY) hk_session_note_error(session);
  return st;
}
