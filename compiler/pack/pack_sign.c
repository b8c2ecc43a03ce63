/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pack_sign.c -- Ed25519 key files and pack signing (docs/FORMAT.md, "Signatures").
 *
 * Signing lays the artifact out again with one SIGNATURE section (appended, or an existing one
 * replaced in place so that section indices, which CODE sections are named by, never move),
 * then signs the digest the loader checks (loader/src/sign.c, hk_signature_digest: one
 * definition of the signed bytes).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <sodium.h>
#include <xxhash.h>

#include "pack/pack.h"
#include "sign_internal.h"
#include "util/util.h"

_Static_assert(HKC_KEY_SEED_BYTES == crypto_sign_SEEDBYTES, "Ed25519 seed size");
_Static_assert(HKC_KEY_PUBLIC_BYTES == crypto_sign_PUBLICKEYBYTES && HKC_KEY_PUBLIC_BYTES == HK_PUBLIC_KEY_BYTES, "Ed25519 public key size");

static const hkc_loc_t NOLOC = {0};
static const char k_secret_prefix[] = "hk-ed25519-secret ";
static const char k_public_prefix[] = "hk-ed25519-public "; /* hk_public_key_parse reads it */

/* Creates path exclusively with `mode` and writes text; removes it on failure. */
static int write_new_file(const char *path, mode_t mode, const char *text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) {
    hkc_error(NOLOC, "cannot create %s: %s%s", path, hkc_strerror(errno),
              errno == EEXIST ? " (a key is never overwritten; remove it or choose another name)" : "");
    return -1;
  }
  size_t n = strlen(text);
  int ok = fchmod(fd, mode) == 0 && write(fd, text, n) == (ssize_t)n && fsync(fd) == 0;
  ok = (close(fd) == 0) && ok;
  if (!ok) {
    hkc_error(NOLOC, "cannot write %s: %s", path, hkc_strerror(errno));
    unlink(path);
    return -1;
  }
  return 0;
}

int hkc_key_generate(const char *path, int quiet) {
  if (!hk_crypto_init()) {
    hkc_error(NOLOC, "keygen: libsodium failed to initialize");
    return -1;
  }
  char pub_path[4096];
  if (snprintf(pub_path, sizeof pub_path, "%s.pub", path) >= (int)sizeof pub_path) {
    hkc_error(NOLOC, "keygen: path too long");
    return -1;
  }
  struct stat st;
  if (lstat(path, &st) == 0 || lstat(pub_path, &st) == 0) {
    hkc_error(NOLOC, "keygen: %s exists; a key is never overwritten (remove it or choose another name)",
              lstat(path, &st) == 0 ? path : pub_path);
    return -1;
  }
  uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES], seed[crypto_sign_SEEDBYTES];
  randombytes_buf(seed, sizeof seed);
  crypto_sign_seed_keypair(pk, sk, seed);
  char seed_hex[2 * sizeof seed + 1], pk_hex[2 * sizeof pk + 1], text[160], id[HK_KEY_ID_HEX_SIZE];
  sodium_bin2hex(seed_hex, sizeof seed_hex, seed, sizeof seed);
  sodium_bin2hex(pk_hex, sizeof pk_hex, pk, sizeof pk);
  hk_key_id_hex(pk, id);
  snprintf(text, sizeof text, "%s%s\n", k_secret_prefix, seed_hex);
  int rc = write_new_file(path, 0600, text);
  sodium_memzero(text, sizeof text);
  sodium_memzero(seed_hex, sizeof seed_hex);
  sodium_memzero(seed, sizeof seed);
  sodium_memzero(sk, sizeof sk);
  if (rc != 0) return -1;
  snprintf(text, sizeof text, "%s%s\n", k_public_prefix, pk_hex);
  if (write_new_file(pub_path, 0644, text) != 0) {
    unlink(path); /* a secret key without its public half is of no use */
    return -1;
  }
  if (!quiet) printf("wrote %s (secret, mode 0600) and %s; key id %s\n", path, pub_path, id);
  return 0;
}

int hkc_key_create_exclusive(const char *path, int *out_created) {
  *out_created = 0;
  if (!hk_crypto_init()) {
    hkc_error(NOLOC, "cannot create the key %s: libsodium failed to initialize", path);
    return -1;
  }
  uint8_t seed[crypto_sign_SEEDBYTES];
  char seed_hex[2 * sizeof seed + 1], text[160], err[4200];
  randombytes_buf(seed, sizeof seed);
  sodium_bin2hex(seed_hex, sizeof seed_hex, seed, sizeof seed);
  snprintf(text, sizeof text, "%s%s\n", k_secret_prefix, seed_hex);
  const hkc_chunk_t chunk = {text, strlen(text)};
  char *tmp = NULL;
  int rc = hkc_file_stage(path, &chunk, 1, 0600, &tmp, err, sizeof err);
  sodium_memzero(text, sizeof text);
  sodium_memzero(seed_hex, sizeof seed_hex);
  sodium_memzero(seed, sizeof seed);
  if (rc != 0) {
    hkc_error(NOLOC, "cannot create the key %s: %s", path, err);
    return -1;
  }
  /* link, unlike rename, never replaces: of two processes creating the key at once one wins,
   * and the other finds a whole key (written and fsynced before the link) */
  if (link(tmp, path) == 0) {
    *out_created = 1;
  } else if (errno != EEXIST) {
    hkc_error(NOLOC, "cannot create the key %s: %s", path, hkc_strerror(errno));
    rc = -1;
  }
  hkc_file_discard(tmp);
  return rc;
}

void hkc_key_public(const uint8_t seed[HKC_KEY_SEED_BYTES], uint8_t out_key[HKC_KEY_PUBLIC_BYTES]) {
  uint8_t sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(out_key, sk, seed);
  sodium_memzero(sk, sizeof sk);
}

int hkc_key_write_public(const char *path, const uint8_t seed[HKC_KEY_SEED_BYTES]) {
  uint8_t pk[HK_PUBLIC_KEY_BYTES];
  hkc_key_public(seed, pk);
  char pk_hex[2 * sizeof pk + 1], text[160], err[4200];
  sodium_bin2hex(pk_hex, sizeof pk_hex, pk, sizeof pk);
  snprintf(text, sizeof text, "%s%s\n", k_public_prefix, pk_hex);
  const hkc_chunk_t chunk = {text, strlen(text)};
  if (hkc_file_replace(path, &chunk, 1, 0644, err, sizeof err) != 0) {
    hkc_error(NOLOC, "cannot write the public key %s: %s", path, err);
    return -1;
  }
  return 0;
}

int hkc_key_parse(const char *label, const char *text, size_t size, uint8_t out_seed[HKC_KEY_SEED_BYTES]) {
  const size_t plen = sizeof k_secret_prefix - 1, hlen = 2 * HKC_KEY_SEED_BYTES;
  size_t got = 0, end = plen + hlen;
  int ok = size >= end && memcmp(text, k_secret_prefix, plen) == 0 &&
           sodium_hex2bin(out_seed, HKC_KEY_SEED_BYTES, text + plen, hlen, NULL, &got, NULL) == 0 &&
           got == HKC_KEY_SEED_BYTES;
  for (size_t i = end; ok && i < size; i++) ok = strchr(" \t\r\n", text[i]) && text[i];
  if (!ok) {
    sodium_memzero(out_seed, HKC_KEY_SEED_BYTES);
    hkc_error(NOLOC, "%s is not an hkc secret key (expected \"%s<64 hex digits>\", from hkc keygen)", label,
              k_secret_prefix);
    return -1;
  }
  return 0;
}

int hkc_key_load(const char *path, uint8_t out_seed[HKC_KEY_SEED_BYTES]) {
  char *text = NULL;
  size_t size = 0;
  struct stat st; /* of the file read, not of whatever the path names later */
  if (hkc_read_file_stat(path, HKC_READ_MAX, &text, &size, &st) != 0) {
    hkc_error(NOLOC, "cannot read the secret key %s: %s", path, hkc_strerror(errno));
    return -1;
  }
  const int rc = hkc_key_parse(path, text, size, out_seed);
  sodium_memzero(text, size);
  free(text);
  if (rc == 0 && (st.st_mode & 077))
    fprintf(stderr, "hkc: warning: secret key %s is readable by others (mode %03o); chmod 600 it\n", path,
            (unsigned)(st.st_mode & 0777));
  return rc;
}

void hkc_key_id(const uint8_t seed[HKC_KEY_SEED_BYTES], char out_hex[HKC_KEY_ID_HEX_BYTES]) {
  _Static_assert(HKC_KEY_ID_HEX_BYTES == HK_KEY_ID_HEX_SIZE, "key id text");
  uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(pk, sk, seed);
  sodium_memzero(sk, sizeof sk);
  hk_key_id_hex(pk, out_hex);
}

void hkc_key_wipe(void *data, size_t size) { sodium_memzero(data, size); }

static uint64_t align_up(uint64_t x) { return (x + HK_SECTION_ALIGN - 1) & ~(uint64_t)(HK_SECTION_ALIGN - 1); }

/* The SIGNATURE section's index in v, or section_count when the pack has none. */
static uint32_t signature_index(const hk_pack_view_t *v) {
  for (uint32_t i = 0; i < v->section_count; i++)
    if (v->sections[i].kind == HK_SECTION_SIGNATURE) return i;
  return v->section_count;
}

/* Copies v's sections into a new zeroed layout with the signature slot at `sig`, an empty
 * record with the signer's key (its signature and the checksums are filled later). */
static uint8_t *relayout(const hk_pack_view_t *v, uint32_t sig, const uint8_t pk[HK_PUBLIC_KEY_BYTES],
                         uint64_t *out_size) {
  uint32_t n = sig < v->section_count ? v->section_count : v->section_count + 1;
  hk_section_t *table = calloc(n, sizeof *table);
  if (!table) return NULL;
  uint64_t at = align_up(sizeof(hk_pack_header_t) + (uint64_t)n * sizeof(hk_section_t));
  for (uint32_t i = 0; i < n; i++) {
    if (i == sig) {
      table[i] = (hk_section_t){.kind = HK_SECTION_SIGNATURE, .flags = HK_SECTION_FLAG_OPTIONAL,
                                .size = sizeof(hk_signature_rec_t), .raw_size = sizeof(hk_signature_rec_t),
                                .target = UINT32_MAX};
    } else {
      table[i] = v->sections[i];
    }
    table[i].offset = at;
    at = i + 1 < n ? align_up(at + table[i].size) : at + table[i].size;
  }
  uint8_t *buf = calloc(1, (size_t)at);
  if (!buf) {
    free(table);
    return NULL;
  }
  for (uint32_t i = 0; i < n; i++)
    if (i != sig && table[i].size) memcpy(buf + table[i].offset, v->base + v->sections[i].offset, table[i].size);
  hk_signature_rec_t rec = {.algorithm = HK_SIGNATURE_ED25519_BLAKE2B};
  memcpy(rec.public_key, pk, sizeof rec.public_key);
  hk_key_id(pk, rec.key_id);
  memcpy(buf + table[sig].offset, &rec, sizeof rec);
  memcpy(buf + sizeof(hk_pack_header_t), table, (size_t)n * sizeof *table);
  hk_pack_header_t h = *v->header;
  h.section_count = n;
  h.file_size = at;
  h.section_table_offset = sizeof(hk_pack_header_t);
  memcpy(buf, &h, sizeof h);
  free(table);
  *out_size = at;
  return buf;
}

/* Fills the signature, then the checksums that depend on it (the signature's own section,
 * the table, the header). */
static void seal(uint8_t *buf, uint64_t size, uint32_t sig, const uint8_t sk[crypto_sign_SECRETKEYBYTES]) {
  hk_pack_header_t h;
  memcpy(&h, buf, sizeof h);
  uint64_t entry = h.section_table_offset + (uint64_t)sig * sizeof(hk_section_t);
  hk_section_t s;
  memcpy(&s, buf + entry, sizeof s);
  uint8_t digest[HK_SIGNATURE_DIGEST_SIZE], msg[HK_SIGNATURE_MESSAGE_SIZE];
  hk_signature_digest(buf, size, entry, s.offset, s.size, digest);
  hk_signature_message(digest, msg);
  hk_signature_rec_t rec;
  memcpy(&rec, buf + s.offset, sizeof rec);
  crypto_sign_detached(rec.signature, NULL, msg, sizeof msg, sk);
  memcpy(buf + s.offset, &rec, sizeof rec);
  s.checksum = XXH3_64bits(buf + s.offset, (size_t)s.size);
  memcpy(buf + entry, &s, sizeof s);
  h.table_checksum = XXH3_64bits(buf + h.section_table_offset, (size_t)h.section_count * sizeof(hk_section_t));
  h.header_checksum = 0;
  h.header_checksum = XXH3_64bits(&h, sizeof h);
  memcpy(buf, &h, sizeof h);
}

/* Fills buf's SIGNATURE record (section sig) for the key and seals it, then checks the result
 * as a loader would: a signer bug must not produce a pack that fails. 0 / -1 (reported). */
static int sign_buffer(uint8_t *buf, uint64_t n, uint32_t sig, const uint8_t seed[HKC_KEY_SEED_BYTES]) {
  uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(pk, sk, seed);
  hk_section_t s;
  memcpy(&s, buf + sizeof(hk_pack_header_t) + (uint64_t)sig * sizeof s, sizeof s);
  hk_signature_rec_t rec = {.algorithm = HK_SIGNATURE_ED25519_BLAKE2B};
  memcpy(rec.public_key, pk, sizeof rec.public_key);
  hk_key_id(pk, rec.key_id);
  memcpy(buf + s.offset, &rec, sizeof rec);
  seal(buf, n, sig, sk);
  sodium_memzero(sk, sizeof sk);
  hk_pack_view_t v;
  hk_signature_t check;
  if (hk_pack_verify(buf, (size_t)n, NULL, &v) != HK_OK || hk_signature_check(&v, &check) != HK_OK ||
      check.state != HK_SIGNATURE_VALID) {
    hkc_error(NOLOC, "cannot sign: the signed artifact does not verify (%s)",
              check.state == HK_SIGNATURE_INVALID ? check.reason : hk_last_error());
    return -1;
  }
  return 0;
}

int hkc_pack_sign_memory(const void *data, size_t size, const uint8_t seed[HKC_KEY_SEED_BYTES], void **out_data,
                         size_t *out_size) {
  *out_data = NULL;
  *out_size = 0;
  hk_pack_view_t v;
  if (hk_pack_verify(data, size, NULL, &v) != HK_OK) {
    hkc_error(NOLOC, "cannot sign: the artifact does not verify: %s", hk_last_error());
    return -1;
  }
  if (!hk_crypto_init()) {
    hkc_error(NOLOC, "cannot sign: libsodium failed to initialize");
    return -1;
  }
  uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_seed_keypair(pk, sk, seed);
  sodium_memzero(sk, sizeof sk);
  uint32_t sig = signature_index(&v);
  uint64_t n = 0;
  uint8_t *buf = relayout(&v, sig, pk, &n);
  if (!buf) {
    hkc_error(NOLOC, "cannot sign: out of memory");
    return -1;
  }
  if (sign_buffer(buf, n, sig, seed) != 0) {
    free(buf);
    return -1;
  }
  *out_data = buf;
  *out_size = (size_t)n;
  return 0;
}

int hkc_pack_sign_in_place(void *data, size_t size, const uint8_t seed[HKC_KEY_SEED_BYTES]) {
  hk_pack_view_t v;
  if (hk_pack_verify(data, size, NULL, &v) != HK_OK) {
    hkc_error(NOLOC, "cannot sign: the artifact does not verify: %s", hk_last_error());
    return -1;
  }
  if (!hk_crypto_init()) {
    hkc_error(NOLOC, "cannot sign: libsodium failed to initialize");
    return -1;
  }
  const uint32_t sig = signature_index(&v);
  if (sig == v.section_count || v.sections[sig].size != sizeof(hk_signature_rec_t) ||
      v.header->section_table_offset != sizeof(hk_pack_header_t)) {
    hkc_error(NOLOC, "cannot sign in place: the artifact has no SIGNATURE section of %zu bytes",
              sizeof(hk_signature_rec_t));
    return -1;
  }
  return sign_buffer(data, size, sig, seed);
}
