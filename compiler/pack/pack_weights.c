/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pack_weights.c -- the params a self-contained pack stores (hkc build --weights; format 1.4,
 * docs/FORMAT.md "Weights"): each param of the spec matched to a tensor of a safetensors
 * checkpoint (libhkrt's reader, which checked the whole file at open), through a name map, with
 * exactly the param's dtype and shape, or -- for a param declared with `parts:` that the file
 * holds only in pieces -- assembled from its parts along axis 0, as libhkrt binds it
 * (docs/WEIGHTS.md: a map entry first, then the param's own name, then its parts). The writer
 * (pack_write.c) lays the matches out.
 *
 * A float tensor (F32, F16, BF16) of another float dtype than its param's is converted to the
 * param's dtype with libhkrt's conversion (loader/src/convert.c: round to nearest even, the
 * rounding hk_session_bind_weights does at run time, so a self-contained pack stores the bytes
 * binding the same checkpoint would bind); a finite value that would become infinite is
 * refused, naming the param, the tensor, the element and the value.
 *
 * Everything is checked before anything is returned, and every problem is reported (all the
 * missing params in one message, each mismatch on its own line), so one run of hkc build says
 * all that is wrong with a checkpoint.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert_internal.h" /* loader/src: hk_convert, the loader's rounding */
#include "frontend/frontend.h"
#include "hk/hkrt.h"
#include "pack/pack.h"
#include "util/util.h"

/* Conversions of one build, by (checkpoint dtype, param dtype), for the note. */
typedef struct {
  unsigned count[3][3];
} conversions_t;

static const hkc_loc_t NOLOC = {0};

/* "bf16 [768,3072]" into sb. */
static void shape_text(hkc_strbuf_t *sb, const char *dtype, uint32_t rank, const int64_t *dims) {
  hkc_sb_printf(sb, "%s [", dtype);
  for (uint32_t d = 0; d < rank; d++) hkc_sb_printf(sb, "%s%lld", d ? "," : "", (long long)dims[d]);
  hkc_sb_printf(sb, "]");
}

static const char *dtype_name(hk_dtype_t d) { return hkc_dtype_name(d); }

/* Whether checkpoint dtype `dtype` gives param dtype `type`: the same (safetensors I32 for
 * i32, I8 for int8, F8_E4M3 for fp8_e4m3; the float dtypes share their numbers), or both float
 * types (converted). */
static int dtype_binds(hk_weights_dtype_t dtype, hk_dtype_t type) {
  if (type == HK_DTYPE_I32) return dtype == HK_WEIGHTS_I32;
  if (type == HK_DTYPE_I8) return dtype == HK_WEIGHTS_I8;
  if (type == HK_DTYPE_FP8_E4M3) return dtype == HK_WEIGHTS_F8_E4M3;
  return dtype <= HK_WEIGHTS_BF16 && hk_convert_supported((hk_element_type_t)dtype, (hk_element_type_t)type);
}

/* Whether checkpoint tensor wi holds param t: a dtype that gives t's (dtype_binds) and its dims. */
static int same_shape(const hkc_tensor_t *t, const hk_weights_tensor_info_t *wi) {
  int same = dtype_binds(wi->dtype, t->dtype) && wi->rank == t->rank;
  for (uint32_t d = 0; same && d < t->rank; d++) same = wi->dims[d] == t->dims[d].add;
  return same;
}

/* Checkpoint tensor wi converted to param t's dtype, into dst (its elements in t's dtype),
 * counted in *conv; `what` names the tensor ("tensor \"m.w\"", "part \"m.b\"") and label the
 * file. -1 reported when a finite value would become infinite. */
static int convert_into(const hkc_tensor_t *t, const hk_weights_tensor_info_t *wi, const char *what,
                        const char *label, void *dst, conversions_t *conv) {
  if (t->dtype == HK_DTYPE_I32 || hkc_dtype_quantized(t->dtype) || (uint32_t)wi->dtype == (uint32_t)t->dtype) {
    /* nothing to convert (dtype_binds: the same type) */
    if (wi->bytes) memcpy(dst, wi->data, wi->bytes);
    return 0;
  }
  const hk_element_type_t from = (hk_element_type_t)wi->dtype, to = (hk_element_type_t)t->dtype;
  const size_t count = wi->bytes / (from == HK_ELEMENT_F32 ? 4 : 2);
  const size_t at = hk_convert_find_overflow(wi->data, from, to, count);
  if (at < count) {
    hkc_error(NOLOC, "param %s: %s of %s (%s) holds %.9g at element %zu, beyond the largest finite %s (%s): "
              "converting it would make it infinite, so it is refused (scale or clip the checkpoint, or declare "
              "the param in a wider dtype)", t->name, what, label, wi->dtype_name,
              (double)hk_convert_load(wi->data, from, at), at, dtype_name(t->dtype),
              to == HK_ELEMENT_F16 ? "65504" : "3.3895e38");
    return -1;
  }
  hk_convert(dst, to, wi->data, from, count);
  conv->count[from][to]++;
  return 0;
}

/* Bytes of checkpoint tensor wi once in param t's dtype. */
static uint64_t converted_bytes(const hkc_tensor_t *t, const hk_weights_tensor_info_t *wi) {
  if (t->dtype == HK_DTYPE_I32 || hkc_dtype_quantized(t->dtype)) return wi->bytes;
  const uint64_t in = wi->dtype == HK_WEIGHTS_F32 ? 4 : 2, out = t->dtype == HK_DTYPE_F32 ? 4 : 2;
  return wi->bytes / in * out;
}

/* The spec tensor named `name`, or -1. */
static long find_tensor(const hkc_spec_t *spec, const char *name) {
  for (size_t i = 0; i < spec->n_tensors; i++)
    if (strcmp(spec->tensors[i].name, name) == 0) return (long)i;
  return -1;
}

/* Param t from its parts (every one in w: *out_found; else nothing is reported): each of t's
 * dtype (or another float dtype: converted, counted in *conv), rank and dims but the first, the
 * rows adding up to t's; the bytes concatenated into *out (owned). -1 reported on a mismatch, a
 * value that would overflow or out of memory. */
static int assemble_parts(const hkc_tensor_t *t, const hk_weights_t *w, const char *label, int *out_found,
                          hkc_weight_in_t *out, conversions_t *conv) {
  *out_found = 0;
  uint32_t idx[HK_MAX_PARTS];
  for (uint32_t p = 0; p < t->n_parts; p++)
    if (hk_weights_find(w, t->parts[p], &idx[p]) != HK_OK) return 0;
  *out_found = 1;
  int64_t rows = 0;
  uint64_t bytes = 0;
  for (uint32_t p = 0; p < t->n_parts; p++) {
    hk_weights_tensor_info_t wi;
    (void)hk_weights_tensor_info(w, idx[p], &wi);
    int same = dtype_binds(wi.dtype, t->dtype) && wi.rank == t->rank && t->rank >= 1 &&
               wi.dims[0] >= 1; /* libhkrt's rule too */
    for (uint32_t d = 1; same && d < t->rank; d++) same = wi.dims[d] == t->dims[d].add;
    if (!same) {
      hkc_strbuf_t msg = {0};
      int64_t dims[HK_MAX_RANK];
      for (uint32_t d = 0; d < t->rank; d++) dims[d] = d ? t->dims[d].add : -1;
      hkc_sb_printf(&msg, "param %s: part \"%s\" of %s is ", t->name, wi.name, label);
      shape_text(&msg, wi.dtype_name, wi.rank, wi.dims);
      hkc_sb_printf(&msg, ", the param's parts must be ");
      shape_text(&msg, dtype_name(t->dtype), t->rank, dims);
      hkc_sb_printf(&msg, " (-1: any rows)");
      hkc_error(NOLOC, "%s", msg.failed ? "out of memory" : msg.data);
      free(msg.data);
      return -1;
    }
    rows += wi.dims[0];
    bytes += converted_bytes(t, &wi);
  }
  if (rows != t->dims[0].add) {
    hkc_error(t->loc, "param %s: its %u parts in %s have %lld rows together, the param has %lld", t->name, t->n_parts,
              label, (long long)rows, (long long)t->dims[0].add);
    return -1;
  }
  unsigned char *buf = malloc(bytes ? bytes : 1);
  if (!buf) {
    hkc_error(NOLOC, "out of memory assembling param %s from its parts", t->name);
    return -1;
  }
  uint64_t at = 0;
  conversions_t parts_conv = {0}; /* counted once every part converted */
  for (uint32_t p = 0; p < t->n_parts; p++) {
    hk_weights_tensor_info_t wi;
    (void)hk_weights_tensor_info(w, idx[p], &wi);
    char what[1100];
    snprintf(what, sizeof what, "part \"%s\"", wi.name);
    if (convert_into(t, &wi, what, label, buf + at, &parts_conv) != 0) {
      free(buf);
      return -1;
    }
    at += converted_bytes(t, &wi);
  }
  for (int f = 0; f < 3; f++)
    for (int d = 0; d < 3; d++) conv->count[f][d] += parts_conv.count[f][d];
  *out = (hkc_weight_in_t){0, buf, bytes, buf};
  return 0;
}

/* The map entries: each names a param of the spec, once, and a tensor of the checkpoint. */
static int check_map(const hkc_spec_t *spec, const hk_weights_t *w, const hk_weights_name_t *names, size_t n,
                     const char *label) {
  int bad = 0;
  for (size_t m = 0; m < n; m++) {
    const long t = find_tensor(spec, names[m].tensor);
    uint32_t wi;
    if (t < 0) {
      hkc_error(NOLOC, "--weights-map: %s is no tensor of spec %s", hkc_escaped(names[m].tensor), spec->name);
      bad = 1;
    } else if (spec->tensors[t].role != HK_ROLE_PARAM) {
      hkc_error(NOLOC, "--weights-map: %s is not a param of spec %s (only params are stored)", names[m].tensor,
                spec->name);
      bad = 1;
    } else if (hk_weights_find(w, names[m].weights, &wi) != HK_OK) {
      hkc_error(NOLOC, "--weights-map: param %s maps to \"%s\", which %s does not have", names[m].tensor,
                hkc_escaped(names[m].weights), label);
      bad = 1;
    }
  }
  return bad ? -1 : 0;
}

/* "weights: converting 147 tensors from F32 to BF16[, 3 from F16 to BF16]" on notes. */
static void note_conversions(FILE *notes, const char *label, const conversions_t *conv) {
  static const char *const names[3] = {"F32", "F16", "BF16"};
  int first = 1;
  for (int f = 0; f < 3; f++)
    for (int t = 0; t < 3; t++) {
      const unsigned n = conv->count[f][t];
      if (!n || !notes) continue;
      if (first) fprintf(notes, "hkc build: weights: converting %u tensor%s of %s from %s to %s", n, n == 1 ? "" : "s",
                         label, names[f], names[t]);
      else fprintf(notes, ", %u from %s to %s", n, names[f], names[t]);
      first = 0;
    }
  if (!first) fprintf(notes, "\n");
}

int hkc_pack_weights_match(const hkc_spec_t *spec, const hk_weights_t *w, const hk_weights_name_t *names,
                           size_t n_names, const char *label, FILE *notes, hkc_weight_in_t **out, size_t *out_n) {
  *out = NULL;
  *out_n = 0;
  if (check_map(spec, w, names, n_names, label) != 0) return -1;
  hkc_weight_in_t *list = calloc(spec->n_tensors ? spec->n_tensors : 1, sizeof *list);
  if (!list) {
    hkc_error(NOLOC, "out of memory matching %s to the params", label);
    return -1;
  }
  hkc_strbuf_t missing = {0};
  size_t n = 0, n_missing = 0;
  int bad = 0;
  conversions_t conv = {0};
  for (size_t i = 0; i < spec->n_tensors; i++) {
    const hkc_tensor_t *t = &spec->tensors[i];
    if (t->role != HK_ROLE_PARAM) continue;
    const char *want = t->name;
    int mapped = 0;
    for (size_t m = 0; m < n_names; m++)
      if (strcmp(names[m].tensor, t->name) == 0) want = names[m].weights, mapped = 1;
    int batched = 0;
    for (uint32_t d = 0; d < t->rank; d++) batched |= t->dims[d].mul != 0;
    uint32_t index;
    if (hk_weights_find(w, want, &index) != HK_OK) {
      int found = 0;
      if (!mapped && t->n_parts && !batched) {
        if (assemble_parts(t, w, label, &found, &list[n], &conv) != 0) {
          bad = 1;
          continue;
        }
        if (found) {
          list[n++].tensor = (uint32_t)i;
          continue;
        }
      }
      hkc_sb_printf(&missing, "%s%s", n_missing++ ? ", " : "", t->name);
      continue;
    }
    hk_weights_tensor_info_t wi;
    (void)hk_weights_tensor_info(w, index, &wi);
    if (batched) {
      hkc_error(t->loc, "param %s: its shape depends on batch, so its bytes cannot be stored in the pack", t->name);
      bad = 1;
      continue;
    }
    if (!same_shape(t, &wi)) {
      hkc_strbuf_t msg = {0};
      int64_t dims[HK_MAX_RANK];
      for (uint32_t d = 0; d < t->rank; d++) dims[d] = t->dims[d].add;
      hkc_sb_printf(&msg, "param %s: the spec says ", t->name);
      shape_text(&msg, dtype_name(t->dtype), t->rank, dims);
      hkc_sb_printf(&msg, ", %s's tensor \"%s\" is ", label, wi.name);
      shape_text(&msg, wi.dtype_name, wi.rank, wi.dims);
      hkc_error(NOLOC, "%s", msg.failed ? "out of memory" : msg.data);
      free(msg.data);
      bad = 1;
      continue;
    }
    if ((uint32_t)wi.dtype == (uint32_t)t->dtype || t->dtype == HK_DTYPE_I32) {
      list[n++] = (hkc_weight_in_t){(uint32_t)i, wi.data, wi.bytes, NULL};
      continue;
    }
    const uint64_t bytes = converted_bytes(t, &wi);
    unsigned char *buf = malloc(bytes ? bytes : 1);
    if (!buf) {
      hkc_error(NOLOC, "out of memory converting param %s", t->name);
      bad = 1;
      continue;
    }
    char what[1100];
    snprintf(what, sizeof what, "tensor \"%s\"", wi.name);
    if (convert_into(t, &wi, what, label, buf, &conv) != 0) {
      free(buf);
      bad = 1;
      continue;
    }
    list[n++] = (hkc_weight_in_t){(uint32_t)i, buf, bytes, buf};
  }
  if (n_missing) {
    hkc_error(NOLOC, "%s lacks %zu param(s) of spec %s: %s (every param is stored in the pack; --weights-map "
              "names checkpoint tensors of other names)", label, n_missing, spec->name,
              missing.failed ? "(out of memory)" : missing.data);
    bad = 1;
  }
  free(missing.data);
  if (bad) {
    hkc_pack_weights_free(list, n);
    return -1;
  }
  note_conversions(notes, label, &conv);
  *out = list;
  *out_n = n;
  return 0;
}

void hkc_pack_weights_free(hkc_weight_in_t *list, size_t n) {
  if (!list) return;
  for (size_t i = 0; i < n; i++) free(list[i].owned);
  free(list);
}
