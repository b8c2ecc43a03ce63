/* SPDX-License-Identifier: Apache-2.0 */
/*
 * npz.c -- NumPy .npz archives for `hkc run --weights` (docs/WEIGHTS.md, ".npz archives").
 *
 * An .npz is a zip archive of NAME.npy members, stored (numpy.savez) or deflated
 * (numpy.savez_compressed). libzip reads the container; each member goes through the .npy
 * parser of --param (npy.c), so the dtypes and the conversion are --param's.
 *
 * The archive is untrusted. Open checks the central directory (libzip, ZIP_CHECKCONS: it
 * must agree with the local headers) and every member's name; a member is decompressed only
 * when a param takes it, into a buffer no larger than that param can need (the zip's
 * declared size is checked first, and the inflater is never asked for more than that), and
 * its CRC is checked by reading it to the end.
 *
 * hkc_npz_checkpoint turns the members a session's params take into a safetensors image in
 * memory, each converted to its param's dtype, so that hk_session_bind_weights binds .npz
 * and safetensors weights the same way (name map rules, errors, all or nothing).
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zip.h>

#include <cjson/cJSON.h>

#include "tools/tools.h"

/* Most members of one archive: far above any model's tensor count (a 70B Llama has ~700),
 * and small enough that the name table and its sort stay instant. */
#define NPZ_MAX_MEMBERS 65536u
/* Longest member name without ".npy": the safetensors limit on tensor names (docs/WEIGHTS.md). */
#define NPZ_MAX_NAME 1024u

typedef struct npz_member {
  char *name;          /* the param name: the member's name without ".npy" */
  zip_uint64_t index;  /* libzip's entry index */
} npz_member_t;

struct hkc_npz {
  zip_t *zip;
  char *label;           /* the archive's name in messages */
  uint32_t count;
  npz_member_t *members; /* sorted by name (hkc_npz_find) */
};

/* 1 when raw is "STEM.npy" with STEM 1..NPZ_MAX_NAME bytes of 0x21-0x7e (the safetensors
 * rule for tensor names: docs/WEIGHTS.md), so a member name is a valid checkpoint name. */
static int member_name_ok(const char *raw) {
  size_t n = strlen(raw);
  if (n <= 4 || n - 4 > NPZ_MAX_NAME || strcmp(raw + n - 4, ".npy") != 0) return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)raw[i] < 0x21 || (unsigned char)raw[i] > 0x7e) return 0;
  return 1;
}

static int member_cmp(const void *a, const void *b) {
  return strcmp(((const npz_member_t *)a)->name, ((const npz_member_t *)b)->name);
}

void hkc_npz_destroy(hkc_npz_t *npz) {
  if (!npz) return;
  if (npz->zip) zip_discard(npz->zip);
  for (uint32_t i = 0; i < npz->count; i++) free(npz->members[i].name);
  free(npz->members);
  free(npz->label);
  free(npz);
}

/* Opens the archive over src (owned from here on, freed on failure too) and checks its
 * member names. zip_magic: the bytes start as a zip does (for the message when libzip finds
 * no directory: then the archive is cut short, not something else). 0 / -1 (printed,
 * naming label). */
static int npz_open_source(const char *label, zip_source_t *src, int zip_magic, hkc_npz_t **out) {
  hkc_loc_t loc = {label, 0, 0};
  *out = NULL;
  hkc_npz_t *npz = calloc(1, sizeof *npz);
  if (!npz || !(npz->label = hkc_strdup(label))) {
    free(npz);
    zip_source_free(src);
    hkc_error(loc, "out of memory");
    return -1;
  }
  zip_error_t ze;
  zip_error_init(&ze);
  npz->zip = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
  if (!npz->zip) {
    int code = zip_error_code_zip(&ze);
    if (code == ZIP_ER_NOZIP && zip_magic)
      hkc_error(loc, "truncated or damaged zip archive (it starts as one, but libzip finds no central directory "
                     "at its end)");
    else if (code == ZIP_ER_EXISTS)
      hkc_error(loc, "two members have the same name");
    else if (code == ZIP_ER_NOZIP)
      hkc_error(loc, "not a zip archive (an .npz is a zip of NAME.npy files: numpy.savez)");
    else
      hkc_error(loc, "not a readable zip archive (%s)%s", zip_error_strerror(&ze),
                code == ZIP_ER_INCONS ? ": truncated or damaged" : "");
    zip_error_fini(&ze);
    zip_source_free(src);
    hkc_npz_destroy(npz);
    return -1;
  }
  zip_error_fini(&ze);
  zip_int64_t n = zip_get_num_entries(npz->zip, 0);
  if (n < 0 || (uint64_t)n > NPZ_MAX_MEMBERS) {
    hkc_error(loc, "%lld members (at most %u)", (long long)n, NPZ_MAX_MEMBERS);
    hkc_npz_destroy(npz);
    return -1;
  }
  npz->members = calloc(n ? (size_t)n : 1, sizeof *npz->members);
  if (!npz->members) {
    hkc_error(loc, "out of memory");
    hkc_npz_destroy(npz);
    return -1;
  }
  for (zip_int64_t i = 0; i < n; i++) {
    const char *raw = zip_get_name(npz->zip, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
    if (!raw || !member_name_ok(raw)) {
      hkc_error(loc, "member \"%s\" is not a .npy member (an .npz holds NAME.npy files only; NAME: 1 to %u "
                     "printable ASCII characters, no spaces)", hkc_escaped(raw), NPZ_MAX_NAME);
      hkc_npz_destroy(npz);
      return -1;
    }
    size_t len = strlen(raw) - 4;
    char *name = malloc(len + 1);
    if (!name) {
      hkc_error(loc, "out of memory");
      hkc_npz_destroy(npz);
      return -1;
    }
    memcpy(name, raw, len);
    name[len] = '\0';
    npz->members[npz->count++] = (npz_member_t){name, (zip_uint64_t)i};
  }
  qsort(npz->members, npz->count, sizeof *npz->members, member_cmp);
  for (uint32_t i = 1; i < npz->count; i++)
    if (strcmp(npz->members[i - 1].name, npz->members[i].name) == 0) {
      hkc_error(loc, "member %s.npy appears twice", npz->members[i].name);
      hkc_npz_destroy(npz);
      return -1;
    }
  *out = npz;
  return 0;
}

int hkc_npz_open_file(const char *path, hkc_npz_t **out) {
  *out = NULL;
  const int fd = hkc_open_input(path, UINT64_MAX, NULL); /* a FIFO or device: refused, never read */
  if (fd < 0) {
    hkc_error((hkc_loc_t){path, 0, 0}, "%s", hkc_strerror(errno));
    return -1;
  }
  unsigned char head[16]; /* hkc_weights_format reads up to 9 bytes */
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    hkc_error((hkc_loc_t){path, 0, 0}, "%s", hkc_strerror(errno));
    close(fd);
    return -1;
  }
  const size_t n = fread(head, 1, sizeof head, f);
  if (n == 0) { /* libzip would take it for an archive without members */
    hkc_error((hkc_loc_t){path, 0, 0}, "empty file (not a zip archive)");
    fclose(f);
    return -1;
  }
  rewind(f);
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_filep_create(f, 0, -1, &ze); /* reads the descriptor opened above */
  if (!src) {
    hkc_error((hkc_loc_t){path, 0, 0}, "%s", zip_error_strerror(&ze));
    zip_error_fini(&ze);
    fclose(f);
    return -1;
  }
  zip_error_fini(&ze);
  return npz_open_source(path, src, hkc_weights_format(head, n, NULL) == HKC_WEIGHTS_NPZ, out);
}

int hkc_npz_open_memory(const char *label, const void *data, size_t size, hkc_npz_t **out) {
  *out = NULL;
  if (size == 0) { /* libzip would take it for an archive without members */
    hkc_error((hkc_loc_t){label, 0, 0}, "empty file (not a zip archive)");
    return -1;
  }
  zip_error_t ze;
  zip_error_init(&ze);
  zip_source_t *src = zip_source_buffer_create(data, size, 0, &ze);
  if (!src) {
    hkc_error((hkc_loc_t){label, 0, 0}, "%s", zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return -1;
  }
  zip_error_fini(&ze);
  const int zip_magic = hkc_weights_format((const unsigned char *)data, size, NULL) == HKC_WEIGHTS_NPZ;
  return npz_open_source(label, src, zip_magic, out);
}

uint32_t hkc_npz_count(const hkc_npz_t *npz) { return npz ? npz->count : 0; }

const char *hkc_npz_name(const hkc_npz_t *npz, uint32_t index) {
  return npz && index < npz->count ? npz->members[index].name : NULL;
}

int hkc_npz_find(const hkc_npz_t *npz, const char *name, uint32_t *out_index) {
  npz_member_t key = {(char *)name, 0};
  const npz_member_t *m = bsearch(&key, npz->members, npz->count, sizeof key, member_cmp);
  if (!m) return -1;
  *out_index = (uint32_t)(m - npz->members);
  return 0;
}

size_t hkc_npz_member_limit(size_t count) {
  const size_t header = 12 + HKC_NPY_MAX_HEADER; /* magic, version, u32 length, the dict */
  if (count > (SIZE_MAX - header) / 8) return SIZE_MAX;
  return header + count * 8; /* f8, the widest dtype --param reads */
}

int hkc_npz_read(hkc_npz_t *npz, uint32_t index, size_t max_bytes, hkc_npy_t *out) {
  memset(out, 0, sizeof *out);
  if (index >= npz->count) return -1;
  const npz_member_t *m = &npz->members[index];
  /* "ARCHIVE: member NAME.npy" names both in every message, the .npy parser's too */
  size_t llen = strlen(npz->label) + strlen(m->name) + 16;
  char *label = malloc(llen);
  if (!label) return -1;
  snprintf(label, llen, "%s: member %s.npy", npz->label, m->name);
  hkc_loc_t loc = {label, 0, 0};
  int rc = -1;
  unsigned char *buf = NULL;
  zip_file_t *zf = NULL;
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_stat_index(npz->zip, m->index, 0, &st) != 0) {
    hkc_error(loc, "%s", zip_strerror(npz->zip));
    goto done;
  }
  const zip_uint64_t need = ZIP_STAT_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
  if ((st.valid & need) != need) {
    hkc_error(loc, "the archive does not give its size and compression");
    goto done;
  }
  if (st.encryption_method != ZIP_EM_NONE) {
    hkc_error(loc, "encrypted (not supported)");
    goto done;
  }
  if (st.comp_method != ZIP_CM_STORE && st.comp_method != ZIP_CM_DEFLATE) {
    hkc_error(loc, "compression method %d (an .npz member is stored or deflated: numpy.savez, savez_compressed)",
              (int)st.comp_method);
    goto done;
  }
  if (st.size > max_bytes || st.size >= SIZE_MAX) { /* SIZE_MAX: size + 1 below must not wrap */
    hkc_error(loc, "%llu bytes uncompressed, more than the %zu a .npy of its param can take (refused unread)",
              (unsigned long long)st.size, max_bytes);
    goto done;
  }
  size_t size = (size_t)st.size, got = 0;
  buf = malloc(size + 1);
  zf = zip_fopen_index(npz->zip, m->index, 0);
  if (!buf || !zf) {
    hkc_error(loc, "%s", buf ? zip_strerror(npz->zip) : "out of memory");
    goto done;
  }
  /* read to the end (libzip checks the CRC there), one byte past the declared size at most */
  for (;;) {
    zip_int64_t r = zip_fread(zf, buf + got, size + 1 - got);
    if (r < 0) {
      hkc_error(loc, "damaged: %s", zip_file_strerror(zf));
      goto done;
    }
    if (r == 0) break;
    got += (size_t)r;
    if (got > size) {
      hkc_error(loc, "holds more than the %zu bytes the archive declares", size);
      goto done;
    }
  }
  if (got != size) {
    hkc_error(loc, "holds %zu bytes, the archive declares %zu", got, size);
    goto done;
  }
  int close_err = zip_fclose(zf);
  zf = NULL;
  if (close_err != 0) {
    zip_error_t ze;
    zip_error_init_with_code(&ze, close_err);
    hkc_error(loc, "damaged: %s", zip_error_strerror(&ze));
    zip_error_fini(&ze);
    goto done;
  }
  rc = hkc_npy_parse(label, buf, size, out);
done:
  if (zf) zip_fclose(zf);
  free(buf);
  free(label);
  return rc;
}

/* ---- the safetensors image of hkc_npz_checkpoint ------------------------------------- */
/* One tensor of the image: member `member`, converted for session param `param`. */
typedef struct npz_part {
  uint32_t member;    /* index into the archive's members */
  const char *param;  /* borrowed from the session */
  int type;           /* hk_element_type_t */
  uint32_t rank;
  int64_t dims[HK_TENSOR_MAX_RANK];
  size_t bytes;       /* in the param's dtype */
  size_t offset;      /* in the image's data section */
} npz_part_t;

static const char *const k_st_dtype[] = {"F32", "F16", "BF16", "I32", "I8", "F8_E4M3"}; /* by hk_element_type_t */

/* "[2, 3]" */
static void dims_text(uint32_t rank, const int64_t *dims, char *out, size_t size) {
  int n = snprintf(out, size, "[");
  for (uint32_t d = 0; d < rank && n > 0 && (size_t)n < size; d++)
    n += snprintf(out + n, size - (size_t)n, "%s%lld", d ? ", " : "", (long long)dims[d]);
  if (n > 0 && (size_t)n < size) snprintf(out + n, size - (size_t)n, "]");
}

static int same_dims(uint32_t ra, const int64_t *a, uint32_t rb, const int64_t *b) {
  if (ra != rb) return 0;
  for (uint32_t d = 0; d < ra; d++)
    if (a[d] != b[d]) return 0;
  return 1;
}

/* Reads the part's member into dst (part->bytes): the param's shape exactly, values stored
 * as its dtype (hkc_store_elem, as --param does). 0 / -1 (printed). */
static int read_part(hkc_npz_t *npz, const npz_part_t *part, unsigned char *dst) {
  size_t count = 1;
  for (uint32_t d = 0; d < part->rank; d++) count *= (size_t)part->dims[d]; /* a verified pack's shape */
  hkc_npy_t npy;
  if (hkc_npz_read(npz, part->member, hkc_npz_member_limit(count), &npy) != 0) return -1;
  if (!same_dims(npy.rank, npy.dims, part->rank, part->dims)) {
    char got[160], want[160];
    dims_text(npy.rank, npy.dims, got, sizeof got);
    dims_text(part->rank, part->dims, want, sizeof want);
    hkc_error((hkc_loc_t){npz->label, 0, 0}, "member %s.npy: shape %s does not match tensor %s %s",
              npz->members[part->member].name, got, part->param, want);
    hkc_npy_free(&npy);
    return -1;
  }
  assert(npy.count == count);
  for (size_t i = 0; i < count; i++) hkc_store_elem(dst, part->type, i, npy.data[i]);
  hkc_npy_free(&npy);
  return 0;
}

/* The JSON header of the image (docs/WEIGHTS.md, "The file"), the parts' offsets set: those
 * whose size is a multiple of 16 first, so that most stay 16-byte aligned and a host session
 * binds them in place. *out_data_bytes: the data section's size. NULL on OOM. */
static char *image_header(const hkc_npz_t *npz, npz_part_t *parts, uint32_t n, size_t *out_data_bytes) {
  cJSON *root = cJSON_CreateObject();
  size_t at = 0;
  int ok = root != NULL;
  for (int pass = 0; pass < 2 && ok; pass++)
    for (uint32_t i = 0; i < n && ok; i++) {
      npz_part_t *p = &parts[i];
      if ((p->bytes % 16 == 0) != (pass == 0)) continue;
      cJSON *t = cJSON_CreateObject();
      ok = t && cJSON_AddItemToObject(root, npz->members[p->member].name, t);
      if (!ok) {
        cJSON_Delete(t);
        break;
      }
      cJSON *shape = cJSON_AddArrayToObject(t, "shape"), *offsets = cJSON_AddArrayToObject(t, "data_offsets");
      ok = shape && offsets && cJSON_AddStringToObject(t, "dtype", k_st_dtype[p->type]);
      for (uint32_t d = 0; d < p->rank && ok; d++)
        ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)p->dims[d]));
      p->offset = at;
      at += p->bytes;
      ok = ok && cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)p->offset)) &&
           cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)at));
    }
  char *json = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  *out_data_bytes = at;
  return json;
}

int hkc_npz_checkpoint(hkc_npz_t *npz, hk_session_t *session, const hkc_weights_map_t *map, void **out_data,
                       size_t *out_size) {
  hkc_loc_t loc = {npz->label, 0, 0};
  *out_data = NULL;
  *out_size = 0;
  const uint32_t n = hk_session_tensor_count(session);
  npz_part_t *parts = calloc(n ? n : 1, sizeof *parts);
  uint32_t *taken = calloc(npz->count ? npz->count : 1, sizeof *taken); /* member -> its part + 1 */
  uint32_t used = 0;
  unsigned char *img = NULL;
  char *json = NULL;
  int rc = -1;
  if (!parts || !taken) {
    hkc_error(loc, "out of memory");
    goto done;
  }
  /* which member each param takes: hk_session_bind_weights's lookup (the map's name, else
   * its own); a param without one stays unbound, and the binding or hkc run says so */
  for (uint32_t t = 0; t < n; t++) {
    hk_tensor_info_t info;
    if (hk_session_tensor_info(session, t, &info) != HK_OK || info.role != HK_TENSOR_PARAM) continue;
    const char *want = info.name;
    for (uint32_t m = 0; map && m < map->count; m++)
      if (strcmp(map->names[m].tensor, info.name) == 0) want = map->names[m].weights;
    uint32_t mi;
    if (hkc_npz_find(npz, want, &mi) != 0) continue;
    if (taken[mi]) { /* a member two params take: one tensor of the image, so one dtype and shape */
      const npz_part_t *p = &parts[taken[mi] - 1];
      if (p->type != (int)info.element_type || !same_dims(p->rank, p->dims, info.rank, info.dims)) {
        char a[160], b[160];
        dims_text(p->rank, p->dims, a, sizeof a);
        dims_text(info.rank, info.dims, b, sizeof b);
        hkc_error(loc, "member %s.npy is taken by tensors %s (%s %s) and %s (%s %s): one member binds tensors of one "
                  "dtype and shape", want, p->param, k_st_dtype[p->type], a, info.name,
                  (unsigned)info.element_type <= HK_ELEMENT_FP8_E4M3 ? k_st_dtype[info.element_type] : "?", b);
        goto done;
      }
      continue;
    }
    if ((unsigned)info.element_type > HK_ELEMENT_BF16) {
      hkc_error(loc, "tensor %s has an element type .npz weights cannot fill", info.name);
      goto done;
    }
    parts[used] = (npz_part_t){.member = mi, .param = info.name, .type = (int)info.element_type, .rank = info.rank,
                               .bytes = info.bytes};
    memcpy(parts[used].dims, info.dims, sizeof parts[used].dims);
    taken[mi] = ++used;
  }
  /* u64 header length, the header padded with spaces so that the data starts at a multiple
   * of 64 bytes of the 64-byte-aligned image, then each member converted in place */
  size_t data_bytes;
  json = image_header(npz, parts, used, &data_bytes);
  size_t hlen = json ? strlen(json) : 0;
  hlen += (64 - (8 + hlen) % 64) % 64;
  const size_t total = 8 + hlen + data_bytes;
  if (json) img = aligned_alloc(64, (total + 63) / 64 * 64);
  if (!img) {
    hkc_error(loc, "out of memory");
    goto done;
  }
  for (int b = 0; b < 8; b++) img[b] = (unsigned char)((uint64_t)hlen >> (8 * b));
  memset(img + 8, ' ', hlen);
  memcpy(img + 8, json, strlen(json));
  for (uint32_t k = 0; k < used; k++) /* in the session's order, so errors come as the params do */
    if (read_part(npz, &parts[k], img + 8 + hlen + parts[k].offset) != 0) goto done;
  *out_data = img;
  *out_size = total;
  img = NULL;
  rc = 0;
done:
  free(img);
  free(json);
  free(parts);
  free(taken);
  return rc;
}

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), t = strlen(tail);
  return n >= t && strcmp(s + n - t, tail) == 0;
}

hkc_weights_format_t hkc_weights_format(const unsigned char *head, size_t n, const char *path) {
  if (n >= 4 && (memcmp(head, "PK\3\4", 4) == 0 || memcmp(head, "PK\5\6", 4) == 0)) return HKC_WEIGHTS_NPZ;
  if (n >= 9 && head[8] == '{') return HKC_WEIGHTS_SAFETENSORS; /* writers start the JSON at once */
  if (path && ends_with(path, ".npz")) return HKC_WEIGHTS_NPZ;
  if (path && ends_with(path, ".safetensors")) return HKC_WEIGHTS_SAFETENSORS;
  return HKC_WEIGHTS_UNKNOWN;
}

/* The format of a --weights file from its first bytes (hkc_weights_format); a file that
 * cannot be read here is left to the reader its extension names, which says why. */
hkc_weights_format_t hkc_weights_file_format(const char *path) {
  unsigned char head[16];
  size_t n = 0;
  const int fd = hkc_open_input(path, UINT64_MAX, NULL); /* never a FIFO */
  if (fd < 0) return hkc_weights_format(head, 0, path) == HKC_WEIGHTS_NPZ ? HKC_WEIGHTS_NPZ : HKC_WEIGHTS_SAFETENSORS;
  ssize_t got;
  while (n < sizeof head && ((got = read(fd, head + n, sizeof head - n)) > 0 || (got < 0 && errno == EINTR)))
    if (got > 0) n += (size_t)got;
  close(fd);
  return hkc_weights_format(head, n, path);
}
