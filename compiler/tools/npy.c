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
#define NPY_MAX_HEADER (1u << 20) /* NumPy itself caps headers far below this */

/* Finds the value text after 'key': in the header dict; NULL when absent. */
static const char *dict_value(const char *hdr, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "'%s'", key);
  const char *p = strstr(hdr, pat);
  if (!p) return NULL;
  p += strlen(pat);
  while (*p == ' ') p++;
  if (*p != ':') return NULL;
  p++;
  while (*p == ' ') p++;
  return p;
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
  if (hlen > NPY_MAX_HEADER || hlen > size - hstart) {
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
  const char *descr = dict_value(hdr, "descr");
  const char *fortran = dict_value(hdr, "fortran_order");
  const char *shape = dict_value(hdr, "shape");
  size_t esize = 0;
  int kind = 0; /* 2, 4, 8 = float width */
  if (!descr || !fortran || !shape) {
    hkc_error(loc, "malformed .npy header (needs descr, fortran_order, shape)");
    goto done;
  }
  if (strncmp(descr, "'<f4'", 5) == 0) kind = 4;
  else if (strncmp(descr, "'<f8'", 5) == 0) kind = 8;
  else if (strncmp(descr, "'<f2'", 5) == 0) kind = 2;
  else {
    hkc_error(loc, "unsupported .npy dtype %.8s (expected '<f2', '<f4' or '<f8')", descr);
    goto done;
  }
  esize = (size_t)kind;
  if (strncmp(fortran, "False", 5) != 0) {
    hkc_error(loc, "Fortran-ordered .npy arrays are not supported (save with C order)");
    goto done;
  }
  if (*shape != '(') {
    hkc_error(loc, "malformed .npy shape");
    goto done;
  }
  const char *p = shape + 1;
  size_t count = 1;
  for (;;) {
    while (*p == ' ' || *p == ',') p++;
    if (*p == ')') break;
    if (*p < '0' || *p > '9') {
      hkc_error(loc, "malformed .npy shape");
      goto done;
    }
    char *end;
    errno = 0;
    long long d = strtoll(p, &end, 10);
    if (errno || d < 0 || out->rank >= HK_MAX_RANK) {
      hkc_error(loc, ".npy shape has a bad dimension or more than %u dimensions", HK_MAX_RANK);
      goto done;
    }
    if (d != 0 && count > SIZE_MAX / 8 / (size_t)d) {
      hkc_error(loc, ".npy shape is too large");
      goto done;
    }
    count *= (size_t)d;
    out->dims[out->rank++] = d;
    p = end;
  }
  size_t data_off = hstart + hlen;
  if (count * esize != size - data_off) {
    hkc_error(loc, ".npy data is %zu bytes; shape and dtype need %zu", size - data_off, count * esize);
    goto done;
  }
  out->count = count;
  out->data = malloc(count ? count * sizeof(float) : 1);
  if (!out->data) goto done;
  const unsigned char *d = b + data_off;
  for (size_t i = 0; i < count; i++) {
    if (kind == 4) memcpy(&out->data[i], d + 4 * i, 4);
    else if (kind == 8) {
      double v;
      memcpy(&v, d + 8 * i, 8);
      out->data[i] = (float)v;
    } else {
      uint16_t h;
      memcpy(&h, d + 2 * i, 2);
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
