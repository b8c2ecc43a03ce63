/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NumPy .npy reading and writing for `hkc run` (the float16/bfloat16 conversions are in
 * half.c).
 *
 * Format (NumPy's own specification, version 1.0/2.0/3.0): magic "\x93NUMPY", major,
 * minor, header length (u16 for 1.x, u32 for 2.x/3.x), then an ASCII Python dict
 * literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
 * spaces and a newline, then the raw data. Files are untrusted: every length is
 * checked against the bytes present.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/tools.h"
#include "util/util.h"

/* ---- reading ---------------------------------------------------------------------- */

/* The header dict, parsed strictly: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * -- each of the three keys exactly once and nothing else, values of their own syntax
 * (a quoted string, the word True or False, a tuple of integers), then only the padding
 * spaces and newline. A key is only ever read as a key, so 'shape' inside another value
 * is not a shape, and 'Falsey' is not False. */
typedef struct npy_dict {
  char descr[16];
  int fortran;               /* -1: absent */
  int has_shape;
  uint32_t rank;
  int64_t dims[HK_MAX_RANK];
  const char *why;           /* what was wrong, for the message */
} npy_dict_t;

static void skip_space(const char **p) {
  while (**p == ' ' || **p == '\t') (*p)++;
}

/* A '...' or "..." string without escapes into out. 0 / -1. */
static int parse_quoted(const char **p, char *out, size_t size) {
  char q = **p;
  if (q != '\'' && q != '"') return -1;
  const char *end = strchr(*p + 1, q);
  if (!end || (size_t)(end - *p - 1) >= size || memchr(*p + 1, '\\', (size_t)(end - *p - 1))) return -1;
  memcpy(out, *p + 1, (size_t)(end - *p - 1));
  out[end - *p - 1] = '\0';
  *p = end + 1;
  return 0;
}

/* A tuple of non-negative integers: (), (3,), (2, 3) or (2, 3,). 0 / -1 (d->why set). */
static int parse_shape(const char **p, npy_dict_t *d) {
  if (**p != '(') return d->why = "malformed .npy shape", -1;
  (*p)++;
  int comma = 0; /* the last dimension was followed by ',' */
  for (;;) {
    skip_space(p);
    if (**p == ')') break;
    if (**p < '0' || **p > '9') return d->why = "malformed .npy shape", -1;
    char *end;
    errno = 0;
    long long v = strtoll(*p, &end, 10);
    if (errno || d->rank >= HK_MAX_RANK) return d->why = ".npy shape has a bad dimension or too many dimensions", -1;
    d->dims[d->rank++] = v;
    *p = end;
    skip_space(p);
    comma = **p == ',';
    if (comma) (*p)++;
    else if (**p != ')') return d->why = "malformed .npy shape", -1;
  }
  /* (3) is the integer 3 in Python, not a tuple: NumPy writes (3,) */
  if (d->rank == 1 && !comma) return d->why = "malformed .npy shape (a 1-D shape is written (N,))", -1;
  (*p)++;
  return 0;
}

static int parse_value(const char **p, const char *key, npy_dict_t *d) {
  if (strcmp(key, "descr") == 0 && !d->descr[0]) {
    if (parse_quoted(p, d->descr, sizeof d->descr) == 0 && d->descr[0]) return 0;
    return d->why = "unsupported .npy dtype (expected <f2, <f4, <f8, <i4, <i8, |i1 or |u1: little-endian float16, "
                    "float32, float64, int32, int64, int8 or uint8)", -1;
  }
  if (strcmp(key, "fortran_order") == 0 && d->fortran < 0) {
    size_t n = 0;
    while (((*p)[n] >= 'a' && (*p)[n] <= 'z') || ((*p)[n] >= 'A' && (*p)[n] <= 'Z') || (*p)[n] == '_') n++;
    if (n == 5 && strncmp(*p, "False", 5) == 0) d->fortran = 0;
    else if (n == 4 && strncmp(*p, "True", 4) == 0) d->fortran = 1;
    else return d->why = "malformed .npy header (fortran_order must be True or False)", -1;
    *p += n;
    return 0;
  }
  if (strcmp(key, "shape") == 0 && !d->has_shape) {
    d->has_shape = 1;
    return parse_shape(p, d);
  }
  return d->why = "malformed .npy header (an unknown or repeated key)", -1;
}

static int parse_dict(const char *hdr, npy_dict_t *d) {
  memset(d, 0, sizeof *d);
  d->fortran = -1;
  const char *p = hdr;
  skip_space(&p);
  if (*p++ != '{') return d->why = "malformed .npy header (not a dict)", -1;
  for (;;) {
    skip_space(&p);
    if (*p == '}') break;
    char key[32];
    if (parse_quoted(&p, key, sizeof key) != 0) return d->why = "malformed .npy header (a key is not a string)", -1;
    skip_space(&p);
    if (*p++ != ':') return d->why = "malformed .npy header (no ':' after a key)", -1;
    skip_space(&p);
    if (parse_value(&p, key, d) != 0) return -1;
    skip_space(&p);
    if (*p == ',') p++;
    else if (*p != '}') return d->why = "malformed .npy header (no ',' or '}' after a value)", -1;
  }
  for (p++; *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'; p++) {}
  if (*p) return d->why = "malformed .npy header (text after the dict)", -1;
  if (!d->descr[0] || d->fortran < 0 || !d->has_shape)
    return d->why = "malformed .npy header (needs descr, fortran_order, shape)", -1;
  return 0;
}

int hkc_npy_parse(const char *name, const unsigned char *b, size_t size, hkc_npy_t *out) {
  hkc_loc_t loc = {name, 0, 0};
  memset(out, 0, sizeof *out);
  if (size < 10 || memcmp(b, "\x93NUMPY", 6) != 0) {
    hkc_error(loc, "not a .npy file (bad magic)");
    return -1;
  }
  size_t hlen, hstart;
  if (b[6] == 1) {
    hlen = (size_t)b[8] | ((size_t)b[9] << 8);
    hstart = 10;
  } else if (b[6] == 2 || b[6] == 3) {
    if (size < 12) {
      hkc_error(loc, "truncated .npy header");
      return -1;
    }
    hlen = (size_t)b[8] | ((size_t)b[9] << 8) | ((size_t)b[10] << 16) | ((size_t)b[11] << 24);
    hstart = 12;
  } else {
    hkc_error(loc, ".npy format version %u.%u is not supported (1.x, 2.x, 3.x are)", b[6], b[7]);
    return -1;
  }
  if (hlen > HKC_NPY_MAX_HEADER || hlen > size - hstart) {
    hkc_error(loc, "truncated .npy header (%zu header bytes declared, %zu present)", hlen, size - hstart);
    return -1;
  }
  char *hdr = malloc(hlen + 1);
  if (!hdr) return -1;
  memcpy(hdr, b + hstart, hlen);
  hdr[hlen] = '\0';
  if (strlen(hdr) != hlen) {
    hkc_error(loc, "NUL byte in .npy header");
    free(hdr);
    return -1;
  }
  int rc = -1;
  npy_dict_t d;
  int kind = 0; /* 2, 4, 8 = float width; -1, -4, -8 = signed integer width; 1 = uint8 (kind 1 is
                   never a float: there is no 1-byte float .npy dtype) */
  size_t esize = 0, count = 1;
  if (parse_dict(hdr, &d) != 0) {
    hkc_error(loc, "%s", d.why);
    goto done;
  }
  if (strcmp(d.descr, "<f4") == 0) kind = 4;
  else if (strcmp(d.descr, "<f8") == 0) kind = 8;
  else if (strcmp(d.descr, "<f2") == 0) kind = 2;
  else if (strcmp(d.descr, "<i4") == 0) kind = -4;
  else if (strcmp(d.descr, "<i8") == 0) kind = -8;
  else if (strcmp(d.descr, "|i1") == 0) kind = -1;
  else if (strcmp(d.descr, "|u1") == 0) kind = 1;
  else {
    /* the descr as the file has it (at most 15 characters: parse_quoted), escaped */
    hkc_error(loc, "unsupported .npy dtype %s (expected <f2, <f4, <f8, <i4, <i8, |i1 or |u1: little-endian float16, "
              "float32, float64, int32, int64, int8 or uint8)", hkc_escaped(d.descr));
    goto done;
  }
  const int integer = kind < 0 || kind == 1;
  esize = (size_t)(kind < 0 ? -kind : kind);
  if (d.fortran) {
    hkc_error(loc, "Fortran-ordered .npy arrays are not supported (save with C order)");
    goto done;
  }
  for (uint32_t i = 0; i < d.rank; i++) {
    if (d.dims[i] != 0 && count > SIZE_MAX / 8 / (size_t)d.dims[i]) {
      hkc_error(loc, ".npy shape is too large");
      goto done;
    }
    count *= (size_t)d.dims[i];
    out->dims[i] = d.dims[i];
  }
  out->rank = d.rank;
  size_t data_off = hstart + hlen;
  if (count * esize != size - data_off) {
    hkc_error(loc, ".npy data is %zu bytes; shape and dtype need %zu", size - data_off, count * esize);
    goto done;
  }
  out->count = count;
  out->data = malloc(count ? count * sizeof(float) : 1);
  if (!out->data) goto done;
  const unsigned char *src = b + data_off;
  if (integer && !(out->ints = malloc(count ? count * sizeof(int32_t) : 1))) goto done;
  for (size_t i = 0; i < count; i++) {
    if (integer) {
      int64_t v;
      if (kind == -1) v = (int8_t)src[i];
      else if (kind == 1) v = src[i];
      else if (kind == -4) {
        int32_t v32;
        memcpy(&v32, src + 4 * i, 4);
        v = v32;
      } else {
        memcpy(&v, src + 8 * i, 8);
      }
      if (v < INT32_MIN || v > INT32_MAX) {
        hkc_error(loc, ".npy element %zu = %lld does not fit in int32", i, (long long)v);
        goto done;
      }
      out->ints[i] = (int32_t)v;
      out->data[i] = (float)v;
    } else if (kind == 4) memcpy(&out->data[i], src + 4 * i, 4);
    else if (kind == 8) {
      double v;
      memcpy(&v, src + 8 * i, 8);
      out->data[i] = (float)v;
    } else {
      uint16_t h;
      memcpy(&h, src + 2 * i, 2);
      out->data[i] = hkc_f16_to_f32(h);
    }
  }
  rc = 0;
done:
  free(hdr);
  if (rc != 0) hkc_npy_free(out);
  return rc;
}

int hkc_npy_read(const char *path, hkc_npy_t *out) {
  char *bytes;
  size_t size;
  memset(out, 0, sizeof *out);
  if (hkc_read_file(path, &bytes, &size) != 0) {
    hkc_error((hkc_loc_t){path, 0, 0}, "%s", hkc_strerror(errno));
    return -1;
  }
  int rc = hkc_npy_parse(path, (const unsigned char *)bytes, size, out);
  free(bytes);
  return rc;
}

void hkc_npy_free(hkc_npy_t *npy) {
  if (!npy) return;
  free(npy->data);
  free(npy->ints);
  memset(npy, 0, sizeof *npy);
}

/* ---- writing ---------------------------------------------------------------------- */
/* The format 1.0 header of an f32 array: magic, version, length, the dict padded with
 * spaces and a newline to a multiple of 64 bytes. Returns its length (<= size). */
static size_t npy_header(char *out, size_t size, const int64_t *dims, uint32_t rank) {
  char dict[512];
  int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
  for (uint32_t i = 0; i < rank; i++)
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%lld,%s", (long long)dims[i], rank > 1 && i + 1 < rank ? " " : "");
  n += snprintf(dict + n, sizeof dict - (size_t)n, "), }");
  size_t total = 10 + (size_t)n + 1;
  size_t pad = (64 - total % 64) % 64;
  unsigned short hl = (unsigned short)((size_t)n + pad + 1);
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8)};
  if (total + pad > size) return 0;
  memcpy(out, pre, 10);
  memcpy(out + 10, dict, (size_t)n);
  memset(out + 10 + n, ' ', pad);
  out[total + pad - 1] = '\n';
  return total + pad;
}

/* A file name the writer accepts: a tensor name is untrusted (it comes from the pack), so
 * it must not leave the directory or hide: no '/', no "..", no leading '.', no control
 * characters. */
static int name_ok(const char *name) {
  if (!name[0] || name[0] == '.' || strchr(name, '/') || strstr(name, "..")) return 0;
  for (const unsigned char *p = (const unsigned char *)name; *p; p++)
    if (*p < 0x20 || *p == 0x7f) return 0;
  return 1;
}

int hkc_npy_set_add(hkc_npy_set_t *set, const char *dir, const char *name, const float *data, const int64_t *dims,
                    uint32_t rank) {
  hkc_loc_t loc = {dir, 0, 0};
  if (!name_ok(name)) {
    hkc_error(loc, "refusing to write an output named \"%s\" (a file name may not contain '/' or '..', start with "
                   "'.' or hold control characters)", name);
    return -1;
  }
  char header[640];
  size_t hlen = npy_header(header, sizeof header, dims, rank);
  size_t count = 1;
  for (uint32_t i = 0; i < rank; i++) count *= (size_t)dims[i];
  size_t plen = strlen(dir) + strlen(name) + 6;
  char *path = malloc(plen);
  if (!path || hlen == 0 || set->n == HKC_NPY_SET_MAX) {
    free(path);
    hkc_error(loc, "cannot write output %s: %s", name, hlen ? "too many outputs" : "out of memory");
    return -1;
  }
  snprintf(path, plen, "%s/%s.npy", dir, name);
  hkc_chunk_t chunks[2] = {{header, hlen}, {data, count * sizeof(float)}};
  char err[4200], *tmp;
  if (hkc_file_stage(path, chunks, 2, 0666, &tmp, err, sizeof err) != 0) {
    hkc_error((hkc_loc_t){0}, "%s", err);
    free(path);
    return -1;
  }
  set->paths[set->n] = path;
  set->tmps[set->n++] = tmp;
  return 0;
}

int hkc_npy_set_commit(hkc_npy_set_t *set) {
  char err[4200];
  size_t done = 0;
  for (; done < set->n; done++) {
    char *tmp = set->tmps[done];
    set->tmps[done] = NULL;
    if (hkc_file_commit(tmp, set->paths[done], err, sizeof err) != 0) break;
  }
  if (done == set->n) return 0;
  hkc_error((hkc_loc_t){0}, "%s (no output written)", err);
  for (size_t i = 0; i < done; i++) unlink(set->paths[i]); /* all or nothing: the ones renamed already go */
  return -1;
}

void hkc_npy_set_free(hkc_npy_set_t *set) {
  for (size_t i = 0; i < set->n; i++) {
    hkc_file_discard(set->tmps[i]);
    free(set->paths[i]);
  }
  memset(set, 0, sizeof *set);
}

int hkc_npy_write_f32(const char *path, const float *data, const int64_t *dims, uint32_t rank) {
  char header[640];
  size_t hlen = npy_header(header, sizeof header, dims, rank);
  size_t count = 1;
  for (uint32_t i = 0; i < rank; i++) count *= (size_t)dims[i];
  hkc_chunk_t chunks[2] = {{header, hlen}, {data, count * sizeof(float)}};
  char err[4200];
  if (hlen == 0 || hkc_file_replace(path, chunks, 2, 0666, err, sizeof err) != 0) {
    hkc_error((hkc_loc_t){0}, "%s", hlen ? err : "cannot write a .npy header that large");
    return -1;
  }
  return 0;
}
