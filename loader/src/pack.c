/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pack.c -- opening an artifact (a file read into owned memory, or caller memory), the
 * trust policy of the open options, its accessors, target selection and the per-target
 * module cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_customMem: zstd allocates through our allocator */
#define XXH_INLINE_ALL
#include <xxhash.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "backend.h"
#include "pack_internal.h"
#include "sign_internal.h"
#include "status_internal.h"
#include "util_internal.h"

struct hk_pack {
  hk_allocator_t allocator;   /* zero: libc */
  hk_pack_view_t view;
  void *copy;                 /* the file's bytes, or an aligned copy of unaligned caller
                                 memory; NULL over aligned caller memory */
  hk_signature_t signature;   /* state TRUSTED when the policy found its key trusted */
  bool metadata_only;         /* hk_pack_open_options_t.metadata_only: never load code */
  pthread_mutex_t lock;       /* guards modules[] and extents_checked[] */
  hk_module_t *modules[HK_MAX_TARGETS]; /* per target, a list: one module per device */
  bool extents_checked[HK_MAX_TARGETS]; /* the target's launches fit their tensors (target_extents) */
  pthread_mutex_t error_lock; /* guards error: failing sessions of several threads write it */
  char error[HK_ERROR_MAX];
};

const hk_pack_view_t *hk_pack_view(const hk_pack_t *pack) { return &pack->view; }
const hk_allocator_t *hk_pack_allocator(const hk_pack_t *pack) { return &pack->allocator; }
void hk_pack_note_error(hk_pack_t *pack) {
  pthread_mutex_lock(&pack->error_lock);
  hk_error_copy(pack->error, sizeof pack->error);
  pthread_mutex_unlock(&pack->error_lock);
}

static hk_status_t check_allocator(const hk_allocator_t *allocator) {
  HK_FAIL_IF(allocator && (!allocator->alloc != !allocator->free), HK_STATUS_INVALID_ARGUMENT,
             "allocator: set both alloc and free, or neither");
  return HK_OK;
}

static hk_status_t pack_new(const hk_allocator_t *allocator, hk_pack_t **out_pack) {
  HK_RETURN_IF_ERROR(check_allocator(allocator));
  hk_allocator_t a = allocator ? *allocator : (hk_allocator_t){0};
  hk_pack_t *p = hk_calloc(&a, 1, sizeof *p);
  HK_FAIL_IF(!p, HK_STATUS_OUT_OF_MEMORY, "out of memory opening an artifact");
  p->allocator = a;
  if (pthread_mutex_init(&p->lock, NULL) != 0) {
    hk_free(&a, p);
    return HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "cannot create a mutex");
  }
  if (pthread_mutex_init(&p->error_lock, NULL) != 0) {
    pthread_mutex_destroy(&p->lock);
    hk_free(&a, p);
    return HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "cannot create a mutex");
  }
  *out_pack = p;
  return HK_OK;
}

HK_API void hk_pack_destroy(hk_pack_t *pack) {
  if (!pack) return;
  for (uint32_t t = 0; t < HK_MAX_TARGETS; t++) {
    for (hk_module_t *m = pack->modules[t], *next; m; m = next) {
      next = m->next;
      m->backend->module_unload(m);
    }
  }
  hk_allocator_t a = pack->allocator;
  hk_free(&a, pack->copy);
  pthread_mutex_destroy(&pack->lock);
  pthread_mutex_destroy(&pack->error_lock);
  hk_free(&a, pack);
}

/* The first layout of hk_pack_open_options_t ends here; later fields are appended. */
#define OPEN_OPTIONS_V1_SIZE (offsetof(hk_pack_open_options_t, reserved0) + sizeof(uint32_t))

/* Copies the caller's options (NULL: zero) into *out, zero past struct_size. */
static hk_status_t read_open_options(const hk_pack_open_options_t *options, hk_pack_open_options_t *out) {
  memset(out, 0, sizeof *out);
  if (!options) return HK_OK;
  HK_FAIL_IF(options->struct_size < OPEN_OPTIONS_V1_SIZE || options->struct_size > sizeof *out,
             HK_STATUS_INVALID_ARGUMENT, "open options: struct_size %u is not a size of hk_pack_open_options_t "
             "(%zu; built against another hkrt.h?)", options->struct_size, sizeof *out);
  memcpy(out, options, options->struct_size);
  HK_FAIL_IF(out->trusted_key_count && !out->trusted_keys, HK_STATUS_INVALID_ARGUMENT,
             "open options: trusted_keys is NULL but trusted_key_count is %u", out->trusted_key_count);
  HK_FAIL_IF(out->require_signature > 1 || out->allow_unsigned_native_code > 1 || out->metadata_only > 1 ||
                 out->allow_unsigned_code > 1 || out->reserved0 != 0 || out->reserved1 != 0,
             HK_STATUS_INVALID_ARGUMENT, "open options: flags are 0 or 1 and reserved0 and reserved1 are zero");
  return HK_OK;
}

/* The target the policy's message names: the first host target (its code would run in this
 * process), else the first target (a GPU's). A verified pack has at least one. */
static const hk_target_rec_t *code_target(const hk_pack_view_t *v) {
  for (uint32_t t = 0; t < v->target_count; t++)
    if (v->targets[t].kind == HK_TARGET_HOST) return &v->targets[t];
  return &v->targets[0];
}

/* Checks the signature and applies the policy of hkrt.h ("packs: opening and trust"). */
static hk_status_t apply_trust(hk_pack_t *p, const hk_pack_open_options_t *o) {
  hk_signature_t *sig = &p->signature;
  HK_RETURN_IF_ERROR(hk_signature_check(&p->view, sig));
  for (uint32_t k = 0; k < o->trusted_key_count && sig->state == HK_SIGNATURE_VALID; k++)
    if (memcmp(o->trusted_keys[k], sig->public_key, HK_PUBLIC_KEY_BYTES) == 0) sig->state = HK_SIGNATURE_TRUSTED;
  p->metadata_only = o->metadata_only != 0;
  if (p->metadata_only) return HK_OK; /* nothing will run: report, do not refuse */
  HK_FAIL_IF(sig->state == HK_SIGNATURE_INVALID, HK_STATUS_UNTRUSTED, "signature by key %s: %s", sig->key_id,
             sig->reason);
  if (sig->state == HK_SIGNATURE_TRUSTED) return HK_OK;
  char who[64] = "it is not signed";
  if (sig->state == HK_SIGNATURE_VALID)
    snprintf(who, sizeof who, "it is signed by key %s, which is not trusted", sig->key_id);
  HK_FAIL_IF(o->require_signature, HK_STATUS_UNTRUSTED,
             "a signature by a trusted key is required and %s (pass the signer's public key as trusted)", who);
  if (o->allow_unsigned_code || o->allow_unsigned_native_code) return HK_OK; /* the two names, one opt-in */
  const hk_target_rec_t *t = code_target(&p->view);
  const int host = t->kind == HK_TARGET_HOST;
  return HK_ERROR(HK_STATUS_UNTRUSTED,
                  "the pack carries %s code (target %s), which would run %s, and %s; %s, or allow unsigned code "
                  "(allow_unsigned_code, hkc run --allow-unsigned)",
                  host ? "native host" : "GPU", hk_pack_string(&p->view, t->name),
                  host ? "in this process" : "on the device with access to this process's device memory", who,
                  sig->state == HK_SIGNATURE_VALID ? "trust its key (hkc run --trust KEY.pub)"
                                                   : "sign it (hkc sign) and trust the key (hkc run --trust KEY.pub)");
}

/* Tensor names are unique: applications and hkc find tensors by name (hk_session_bind_weights,
 * hkc run --input NAME=, --save-outputs DIR/NAME.npy), so a second tensor of one name would be
 * unreachable, or overwrite the first's file. A hash table of tensor indices (through the
 * pack's allocator) keeps the check linear for the HK_MAX_TENSORS a pack may hold. Names are
 * verified strings (hk_pack_verify) by now. */
static hk_status_t check_tensor_names(hk_pack_t *p) {
  const hk_pack_view_t *v = &p->view;
  const uint32_t n = v->tensor_count;
  if (n < 2) return HK_OK;
  size_t cap = 1;
  while (cap < 2 * (size_t)n) cap *= 2;
  uint32_t *slot = hk_alloc(&p->allocator, cap * sizeof *slot); /* tensor index + 1; 0: empty */
  HK_FAIL_IF(!slot, HK_STATUS_OUT_OF_MEMORY, "out of memory checking %u tensor names", n);
  memset(slot, 0, cap * sizeof *slot);
  hk_status_t st = HK_OK;
  for (uint32_t i = 0; i < n && st == HK_OK; i++) {
    const char *name = hk_pack_string(v, v->tensors[i].name);
    size_t k = (size_t)XXH3_64bits(name, strlen(name)) & (cap - 1);
    for (; slot[k]; k = (k + 1) & (cap - 1)) {
      const uint32_t other = slot[k] - 1;
      if (strcmp(hk_pack_string(v, v->tensors[other].name), name) == 0) {
        st = HK_ERROR(HK_STATUS_CORRUPT, "tensors %u and %u have the same name \"%s\" (tensor names are unique)",
                      other, i, name);
        break;
      }
    }
    slot[k] = i + 1;
  }
  hk_free(&p->allocator, slot);
  return st;
}

/* Verifies bytes[0, size) (8-byte aligned, owned by p or the caller) and applies the policy;
 * destroys p on failure. */
static hk_status_t open_bytes(hk_pack_t *p, const void *bytes, size_t size, const hk_pack_open_options_t *o,
                              hk_pack_t **out_pack) {
  hk_pack_limits_t limits;
  hk_pack_limits_from(o, &limits);
  hk_status_t st = hk_pack_verify(bytes, size, &limits, &p->view);
  if (st == HK_OK) st = check_tensor_names(p);
  if (st == HK_OK) st = apply_trust(p, o);
  if (st != HK_OK) {
    hk_pack_destroy(p);
    return st;
  }
  *out_pack = p;
  return HK_OK;
}

HK_API hk_status_t hk_pack_open_memory_ex(const void *data, size_t size, const hk_pack_open_options_t *options,
                                          hk_pack_t **out_pack) {
  HK_FAIL_IF(!out_pack, HK_STATUS_INVALID_ARGUMENT, "out_pack is NULL");
  *out_pack = NULL;
  HK_FAIL_IF(!data, HK_STATUS_INVALID_ARGUMENT, "data is NULL");
  hk_pack_open_options_t o;
  HK_RETURN_IF_ERROR(read_open_options(options, &o));
  hk_pack_t *p = NULL;
  HK_RETURN_IF_ERROR(pack_new(o.allocator, &p));
  const void *bytes = data;
  if (((uintptr_t)data & 7) != 0) {
    /* Records are read in place; unaligned caller memory is copied once. */
    p->copy = hk_alloc(&p->allocator, size);
    if (!p->copy) {
      hk_pack_destroy(p);
      return HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory copying a %zu-byte artifact", size);
    }
    memcpy(p->copy, data, size);
    bytes = p->copy;
  }
  return open_bytes(p, bytes, size, &o, out_pack);
}

/* Reads exactly `size` bytes of fd into owned memory: after this the file may change or
 * vanish without the pack noticing (a mapping would fault on truncation and show another
 * file's bytes after a copy over it). */
static hk_status_t read_owned(hk_pack_t *p, int fd, size_t size, const char *path) {
  p->copy = hk_alloc(&p->allocator, size ? size : 1);
  HK_FAIL_IF(!p->copy, HK_STATUS_OUT_OF_MEMORY, "out of memory reading the %zu-byte artifact %s", size, path);
  return hk_read_exact(fd, p->copy, size, path);
}

HK_API hk_status_t hk_pack_open_file_ex(const char *path, const hk_pack_open_options_t *options,
                                        hk_pack_t **out_pack) {
  HK_FAIL_IF(!out_pack, HK_STATUS_INVALID_ARGUMENT, "out_pack is NULL");
  *out_pack = NULL;
  HK_FAIL_IF(!path, HK_STATUS_INVALID_ARGUMENT, "path is NULL");
  hk_pack_open_options_t o;
  HK_RETURN_IF_ERROR(read_open_options(options, &o));
  int fd;
  uint64_t file_size;
  HK_RETURN_IF_ERROR(hk_file_open_input(path, &fd, &file_size)); /* never blocks on a FIFO */
  if (file_size > SIZE_MAX) {
    close(fd);
    return HK_ERROR(HK_STATUS_IO, "cannot open %s: too large for this address space", path);
  }
  hk_pack_t *p = NULL;
  hk_status_t s = pack_new(o.allocator, &p);
  if (s == HK_OK) s = read_owned(p, fd, (size_t)file_size, path);
  close(fd);
  if (s == HK_OK) s = open_bytes(p, p->copy, (size_t)file_size, &o, out_pack);
  else hk_pack_destroy(p);
  if (s != HK_OK) hk_error_prefix(path);
  return s;
}

HK_API hk_status_t hk_pack_open_memory(const void *data, size_t size, const hk_allocator_t *allocator,
                                       hk_pack_t **out_pack) {
  hk_pack_open_options_t o = {.struct_size = sizeof o, .allocator = allocator};
  return hk_pack_open_memory_ex(data, size, &o, out_pack);
}

HK_API hk_status_t hk_pack_open_file(const char *path, const hk_allocator_t *allocator, hk_pack_t **out_pack) {
  hk_pack_open_options_t o = {.struct_size = sizeof o, .allocator = allocator};
  return hk_pack_open_file_ex(path, &o, out_pack);
}

HK_API hk_signature_state_t hk_pack_signature(const hk_pack_t *pack, const char **out_key_id) {
  if (out_key_id) *out_key_id = pack ? pack->signature.key_id : "";
  return pack ? pack->signature.state : HK_SIGNATURE_NONE;
}

/* A copy per thread: another thread's failing call may rewrite pack->error while the
 * caller reads the string it got (hkrt.h, "Threads"). */
static _Thread_local char tls_pack_error[HK_ERROR_MAX];

HK_API const char *hk_pack_error(const hk_pack_t *pack) {
  if (!pack) return "";
  hk_pack_t *p = (hk_pack_t *)pack; /* the lock is not part of the pack's observable state */
  pthread_mutex_lock(&p->error_lock);
  memcpy(tls_pack_error, p->error, sizeof tls_pack_error);
  pthread_mutex_unlock(&p->error_lock);
  return tls_pack_error;
}

/* Accessors: a NULL pack gives the neutral value (hkrt.h, "NULL"). */
HK_API const char *hk_pack_name(const hk_pack_t *pack) {
  return pack ? hk_pack_string(&pack->view, pack->view.manifest->name) : "";
}
HK_API uint32_t hk_pack_target_count(const hk_pack_t *pack) { return pack ? pack->view.target_count : 0; }
HK_API const char *hk_pack_target_name(const hk_pack_t *pack, uint32_t index) {
  if (index >= hk_pack_target_count(pack)) return NULL;
  return hk_pack_string(&pack->view, pack->view.targets[index].name);
}
HK_API uint32_t hk_pack_batch_count(const hk_pack_t *pack) { return pack ? pack->view.manifest->batch_count : 0; }
HK_API uint32_t hk_pack_weight_count(const hk_pack_t *pack) { return pack ? pack->view.weight_count : 0; }
HK_API uint32_t hk_pack_tensor_ranks(const hk_pack_t *pack) {
  return pack ? pack->view.tensor_ranks : 0;
}
HK_API uint64_t hk_pack_batch_size(const hk_pack_t *pack, uint32_t index) {
  if (index >= hk_pack_batch_count(pack)) return 0;
  return pack->view.manifest->batch_sizes[index];
}
/* The record and API enums share their numbers (verify checked the range). */
_Static_assert((int)HK_BATCH_POLICY_PAD == (int)HK_BATCH_POLICY_REC_PAD &&
                   (int)HK_BATCH_POLICY_EXACT == (int)HK_BATCH_POLICY_REC_EXACT,
               "batch policy numbers");
HK_API hk_batch_policy_t hk_pack_batch_policy(const hk_pack_t *pack) {
  return pack ? (hk_batch_policy_t)pack->view.manifest->batch_policy : HK_BATCH_POLICY_PAD;
}

/* Appends "a, b, c" lists into a fixed buffer, cutting with "..." when full. */
static void list_append(char *buf, size_t size, const char *item) {
  size_t used = strlen(buf);
  if (used + 4 >= size) return;
  int n = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", item);
  if (n < 0 || (size_t)n >= size - used) memcpy(buf + size - 4, "...", 4);
}

/* Scores of the code a target offers (target_rank): its code objects outrank any PTX, and
 * PTX outranks them when PTX is preferred; within each, the backend's rank. */
#define RANK_NATIVE 1000
#define RANK_PTX 100
#define RANK_PREFERRED 10000

/* How well target t runs on GPU `device` here (0: not at all; see runs_target and runs_ptx),
 * and whether that is through its PTX (*out_ptx). Exact code objects > compatible code objects
 * > PTX of an older or equal architecture (closest first); prefer_ptx puts PTX first. */
static int target_rank(const hk_pack_view_t *v, uint32_t t, int device, bool prefer_ptx, bool *out_ptx) {
  *out_ptx = false;
  const hk_backend_t *b = hk_backend_for_kind((hk_target_kind_t)v->targets[t].kind);
  if (!b || !b->available()) return 0;
  const char *name = hk_pack_string(v, v->targets[t].name);
  int native = b->runs_target(name, hk_pack_string(v, v->targets[t].features), device);
  int ptx = t < HK_MAX_TARGETS && v->ptx_section[t] != UINT32_MAX && b->runs_ptx && b->module_load_ptx
                ? b->runs_ptx(name, device)
                : 0;
  int native_score = native ? native + (prefer_ptx ? RANK_PTX : RANK_NATIVE) : 0;
  int ptx_score = ptx ? ptx + (prefer_ptx ? RANK_PREFERRED : RANK_PTX) : 0;
  *out_ptx = ptx_score > native_score;
  return *out_ptx ? ptx_score : native_score;
}

static hk_status_t no_compatible(const hk_pack_view_t *v, hk_status_t code, const char *what) {
  char have[400] = "", can[400] = "";
  for (uint32_t t = 0; t < v->target_count; t++) list_append(have, sizeof have, hk_pack_string(v, v->targets[t].name));
  for (const hk_backend_t *const *b = hk_backends; *b; b++) {
    if (!(*b)->available()) continue;
    char one[200];
    (*b)->describe(one, sizeof one);
    list_append(can, sizeof can, one);
  }
  return HK_ERROR(code, "%s; the artifact has [%s]; this machine runs [%s]", what, have, can);
}

hk_status_t hk_pack_select_code_on(hk_pack_t *pack, const char *requested, int device, bool prefer_ptx,
                                   uint32_t *out_index, bool *out_ptx) {
  const hk_pack_view_t *v = &pack->view;
  bool ptx = false;
  *out_ptx = false;
  if (requested) {
    for (uint32_t t = 0; t < v->target_count; t++) {
      if (strcmp(requested, hk_pack_string(v, v->targets[t].name)) != 0) continue;
      if (target_rank(v, t, device, prefer_ptx, &ptx) == 0) {
        /* A missing runtime or device is UNAVAILABLE (with the backend's reason); a
         * device that exists but cannot run this ISA is NO_COMPATIBLE_TARGET. */
        const hk_backend_t *b = hk_backend_for_kind((hk_target_kind_t)v->targets[t].kind);
        char what[HK_MAX_NAME_LEN + 400];
        if (!b || !b->available()) {
          snprintf(what, sizeof what, "target %s cannot run on this machine: %s", requested,
                   b ? b->unavailable_reason() : "no backend for it in this build");
          return no_compatible(v, HK_STATUS_UNAVAILABLE, what);
        }
        snprintf(what, sizeof what, "target %s cannot run on this machine (device %d)", requested, device);
        return no_compatible(v, HK_STATUS_NO_COMPATIBLE_TARGET, what);
      }
      *out_index = t;
      *out_ptx = ptx;
      return HK_OK;
    }
    char have[400] = "";
    for (uint32_t t = 0; t < v->target_count; t++) list_append(have, sizeof have, hk_pack_string(v, v->targets[t].name));
    return HK_ERROR(HK_STATUS_NOT_FOUND, "target %s is not in the artifact (it has: %s)", requested, have);
  }
  /* Backends in order of preference; within one, the best-ranked target (pack order breaks ties). */
  for (const hk_backend_t *const *b = hk_backends; *b; b++) {
    int best = 0;
    for (uint32_t t = 0; t < v->target_count; t++) {
      if (v->targets[t].kind != (uint32_t)(*b)->kind) continue;
      int r = target_rank(v, t, device, prefer_ptx, &ptx);
      if (r > best) {
        best = r;
        *out_index = t;
        *out_ptx = ptx;
      }
    }
    if (best > 0) return HK_OK;
  }
  return no_compatible(v, HK_STATUS_NO_COMPATIBLE_TARGET, "no target of the artifact runs on this machine");
}

hk_status_t hk_pack_select_target_on(hk_pack_t *pack, const char *requested, int device, uint32_t *out_index) {
  bool ptx;
  return hk_pack_select_code_on(pack, requested, device, false, out_index, &ptx);
}

/* hk_pack_select_target_on for GPU ordinal 0, as sessions created without a device pick. */
static hk_status_t hk_pack_select_target_index(hk_pack_t *pack, const char *requested, uint32_t *out_index) {
  return hk_pack_select_target_on(pack, requested, 0, out_index);
}

HK_API hk_status_t hk_pack_select_target(hk_pack_t *pack, const char *requested, const char **out_name) {
  if (out_name) *out_name = NULL;
  HK_FAIL_IF(!pack || !out_name, HK_STATUS_INVALID_ARGUMENT, "pack and out_name must not be NULL");
  uint32_t t;
  hk_status_t st = hk_pack_select_target_index(pack, requested, &t);
  if (st != HK_OK) {
    hk_pack_note_error(pack);
    return st;
  }
  *out_name = hk_pack_string(&pack->view, pack->view.targets[t].name);
  return HK_OK;
}

static void *zstd_alloc(void *opaque, size_t size) { return hk_alloc(opaque, size); }
static void zstd_free(void *opaque, void *ptr) { hk_free(opaque, ptr); }

/* The payload of section `section` (CODE or PTX of target `target`), decompressed and owned
 * (hk_pack_code_load). */
static hk_status_t payload_load(const hk_pack_view_t *v, uint32_t target, uint32_t section,
                                const hk_allocator_t *allocator, void **out_code, size_t *out_size) {
  *out_code = NULL;
  *out_size = 0;
  const hk_section_t *s = &v->sections[section];
  const char *tname = hk_pack_string(v, v->targets[target].name);
  const uint8_t *src = v->base + s->offset;
  size_t raw = (size_t)s->raw_size; /* <= HK_MAX_CODE_BYTES: verified */
  void *dst = hk_alloc(allocator, raw ? raw : 1);
  HK_FAIL_IF(!dst, HK_STATUS_OUT_OF_MEMORY, "out of memory for the %zu-byte code object of target %s", raw, tname);
  if (!(s->flags & HK_SECTION_FLAG_ZSTD)) {
    if (raw) memcpy(dst, src, raw);
  } else {
    hk_allocator_t a = allocator ? *allocator : (hk_allocator_t){0};
    ZSTD_customMem mem = {zstd_alloc, zstd_free, &a};
    ZSTD_DCtx *dctx = ZSTD_createDCtx_advanced(mem);
    if (!dctx) {
      hk_free(allocator, dst);
      return HK_ERROR(HK_STATUS_OUT_OF_MEMORY, "out of memory decompressing the code of target %s", tname);
    }
    size_t got = ZSTD_decompressDCtx(dctx, dst, raw ? raw : 1, src, (size_t)s->size);
    ZSTD_freeDCtx(dctx);
    if (ZSTD_isError(got) || got != raw) {
      hk_free(allocator, dst);
      bool oom = ZSTD_isError(got) && ZSTD_getErrorCode(got) == ZSTD_error_memory_allocation;
      HK_FAIL_IF(oom, HK_STATUS_OUT_OF_MEMORY, "out of memory decompressing the code of target %s", tname);
      return HK_ERROR(HK_STATUS_CORRUPT, "code of target %s: %s (declared %zu bytes)", tname,
                      ZSTD_isError(got) ? ZSTD_getErrorName(got) : "decompressed size differs from raw_size", raw);
    }
  }
  *out_code = dst;
  *out_size = raw;
  return HK_OK;
}

hk_status_t hk_pack_code_load(const hk_pack_view_t *v, uint32_t target, const hk_allocator_t *allocator,
                              void **out_code, size_t *out_size) {
  return payload_load(v, target, v->targets[target].code_section, allocator, out_code, out_size);
}

hk_status_t hk_pack_ptx_load(const hk_pack_view_t *v, uint32_t target, const hk_allocator_t *allocator,
                             void **out_ptx, size_t *out_size) {
  *out_ptx = NULL;
  *out_size = 0;
  HK_FAIL_IF(target >= HK_MAX_TARGETS || v->ptx_section[target] == UINT32_MAX, HK_STATUS_NOT_FOUND,
             "target %s stores no PTX", hk_pack_string(v, v->targets[target].name));
  return payload_load(v, target, v->ptx_section[target], allocator, out_ptx, out_size);
}

hk_status_t hk_pack_module_on(hk_pack_t *pack, uint32_t target, int device, hk_module_t **out_module) {
  return hk_pack_module_code_on(pack, target, device, false, out_module);
}

/* Every launch of every graph of `target` fits the tensors it touches (hk_graph_check_extents):
 * checked before the target's code first loads, once per pack and target (pack->lock held).
 * Errors: CORRUPT, naming the launch. */
static hk_status_t target_extents(hk_pack_t *pack, uint32_t target) {
  if (pack->extents_checked[target]) return HK_OK;
  const hk_target_rec_t *t = &pack->view.targets[target];
  for (uint32_t i = 0; i < t->graph_count; i++)
    HK_RETURN_IF_ERROR(hk_graph_check_extents(&pack->view, t->graph_first + i));
  pack->extents_checked[target] = true;
  return HK_OK;
}

hk_status_t hk_pack_module_code_on(hk_pack_t *pack, uint32_t target, int device, bool ptx,
                                   hk_module_t **out_module) {
  const hk_pack_view_t *v = &pack->view;
  pthread_mutex_lock(&pack->lock);
  hk_status_t st = HK_OK;
  hk_module_t *m = pack->modules[target];
  while (m && (m->device != device || m->ptx != ptx)) m = m->next;
  if (!m && pack->metadata_only) {
    /* The open's policy was not applied: this pack's code must never load. */
    st = HK_ERROR(HK_STATUS_FAILED_PRECONDITION, "the pack was opened for metadata only; no code is loaded");
  } else if (!m && (st = target_extents(pack, target)) != HK_OK) {
    /* a launch overruns a tensor: its code never loads */
  } else if (!m) {
    const hk_backend_t *b = hk_backend_for_kind((hk_target_kind_t)v->targets[target].kind);
    if (!b) {
      st = HK_ERROR(HK_STATUS_UNAVAILABLE, "no backend for target %s in this build",
                    hk_pack_string(v, v->targets[target].name));
    } else if (ptx && !b->module_load_ptx) {
      st = HK_ERROR(HK_STATUS_UNAVAILABLE, "target %s: the %s backend loads no PTX",
                    hk_pack_string(v, v->targets[target].name), b->name);
    } else {
      void *code;
      size_t size;
      st = ptx ? hk_pack_ptx_load(v, target, &pack->allocator, &code, &size)
               : hk_pack_code_load(v, target, &pack->allocator, &code, &size);
      if (st == HK_OK) {
        st = ptx ? b->module_load_ptx(v, target, device, &pack->allocator, code, size, &m)
                 : b->module_load(v, target, device, &pack->allocator, code, size, &m);
        hk_free(&pack->allocator, code);
      }
      if (st == HK_OK) {
        m->device = device;
        m->next = pack->modules[target];
        pack->modules[target] = m;
      } else {
        m = NULL;
      }
    }
  }
  *out_module = m;
  pthread_mutex_unlock(&pack->lock);
  return st;
}

hk_status_t hk_pack_module(hk_pack_t *pack, uint32_t target, hk_module_t **out_module) {
  return hk_pack_module_on(pack, target, 0, out_module);
}
