/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sign.c -- pack signatures: the signed digest, key ids, and the check of a SIGNATURE
 * section (docs/FORMAT.md, "Signatures"). The trust policy that uses the result is in pack.c.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "sign_internal.h"
#include "status_internal.h"

_Static_assert(HK_PUBLIC_KEY_BYTES == crypto_sign_PUBLICKEYBYTES, "Ed25519 public key size");
_Static_assert(sizeof(((hk_signature_rec_t *)0)->signature) == crypto_sign_BYTES, "Ed25519 signature size");
_Static_assert(HK_SIGNATURE_DIGEST_SIZE <= crypto_generichash_BYTES_MAX, "BLAKE2b-512");
_Static_assert(sizeof(HK_SIGNATURE_CONTEXT) - 1 == HK_SIGNATURE_CONTEXT_SIZE, "context size");

static pthread_once_t g_sodium_once = PTHREAD_ONCE_INIT;
static int g_sodium_ok;
static void sodium_once(void) { g_sodium_ok = sodium_init() >= 0; }

bool hk_crypto_init(void) {
  pthread_once(&g_sodium_once, sodium_once);
  return g_sodium_ok;
}

/* Hashes [from, to), or as many zero bytes when `zero`. */
static void hash_span(crypto_generichash_state *st, const uint8_t *data, uint64_t from, uint64_t to, bool zero) {
  static const uint8_t zeros[256];
  if (!zero) {
    crypto_generichash_update(st, data + from, to - from);
    return;
  }
  for (uint64_t n; from < to; from += n) {
    n = to - from < sizeof zeros ? to - from : sizeof zeros;
    crypto_generichash_update(st, zeros, n);
  }
}

void hk_signature_digest(const uint8_t *data, uint64_t size, uint64_t entry_offset, uint64_t payload_offset,
                         uint64_t payload_size, uint8_t out_digest[HK_SIGNATURE_DIGEST_SIZE]) {
  /* The holes, in file order: they depend on the signature, so they cannot be signed. */
  const uint64_t holes[3][2] = {
      {offsetof(hk_pack_header_t, table_checksum), sizeof(hk_pack_header_t)},
      {entry_offset + offsetof(hk_section_t, checksum), entry_offset + offsetof(hk_section_t, target)},
      {payload_offset, payload_offset + payload_size},
  };
  _Static_assert(offsetof(hk_pack_header_t, header_checksum) + 8 == sizeof(hk_pack_header_t) &&
                     offsetof(hk_pack_header_t, table_checksum) + 8 == offsetof(hk_pack_header_t, header_checksum),
                 "the header's checksums are its last 16 bytes");
  crypto_generichash_state st;
  crypto_generichash_init(&st, NULL, 0, HK_SIGNATURE_DIGEST_SIZE);
  uint64_t at = 0;
  for (int i = 0; i < 3; i++) {
    hash_span(&st, data, at, holes[i][0], false);
    hash_span(&st, data, holes[i][0], holes[i][1], true);
    at = holes[i][1];
  }
  hash_span(&st, data, at, size, false);
  crypto_generichash_final(&st, out_digest, HK_SIGNATURE_DIGEST_SIZE);
}

void hk_signature_message(const uint8_t digest[HK_SIGNATURE_DIGEST_SIZE], uint8_t out[HK_SIGNATURE_MESSAGE_SIZE]) {
  memcpy(out, HK_SIGNATURE_CONTEXT, HK_SIGNATURE_CONTEXT_SIZE);
  memcpy(out + HK_SIGNATURE_CONTEXT_SIZE, digest, HK_SIGNATURE_DIGEST_SIZE);
}

void hk_key_id(const uint8_t key[HK_PUBLIC_KEY_BYTES], uint8_t out_id[HK_KEY_ID_SIZE]) {
  uint8_t h[32];
  crypto_generichash(h, sizeof h, key, HK_PUBLIC_KEY_BYTES, NULL, 0);
  memcpy(out_id, h, HK_KEY_ID_SIZE);
}

static void hex(const uint8_t *bytes, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", bytes[i]);
}

void hk_key_id_hex(const uint8_t key[HK_PUBLIC_KEY_BYTES], char out_hex[HK_KEY_ID_HEX_SIZE]) {
  uint8_t id[HK_KEY_ID_SIZE];
  hk_key_id(key, id);
  hex(id, sizeof id, out_hex);
}

/* The SIGNATURE section of a verified view (NULL when none); CORRUPT when there are two. */
static hk_status_t find_section(const hk_pack_view_t *v, const hk_section_t **out) {
  *out = NULL;
  for (uint32_t i = 0; i < v->section_count; i++) {
    if (v->sections[i].kind != HK_SECTION_SIGNATURE) continue;
    HK_FAIL_IF(*out, HK_STATUS_CORRUPT, "section SIGNATURE appears more than once (sections %u and %u)",
               (unsigned)(*out - v->sections), i);
    *out = &v->sections[i];
  }
  return HK_OK;
}

static void set_invalid(hk_signature_t *sig, const char *reason) {
  sig->state = HK_SIGNATURE_INVALID;
  snprintf(sig->reason, sizeof sig->reason, "%s", reason);
}

/* The record's own rules; false (with the reason) when one fails. */
static bool record_ok(const hk_section_t *s, const hk_signature_rec_t *r, hk_signature_t *sig) {
  static const uint8_t zeros[sizeof r->reserved];
  if (s->flags != HK_SECTION_FLAG_OPTIONAL || s->raw_size != s->size || s->target != UINT32_MAX ||
      s->size != sizeof *r) {
    set_invalid(sig, "the SIGNATURE section is malformed (flags, size or target)");
    return false;
  }
  if (r->algorithm != HK_SIGNATURE_ED25519_BLAKE2B) {
    char why[80];
    snprintf(why, sizeof why, "unknown signature algorithm %u (signed by a newer hkc?)", r->algorithm);
    set_invalid(sig, why);
    return false;
  }
  if (r->reserved0 != 0 || memcmp(r->reserved, zeros, sizeof zeros) != 0) {
    set_invalid(sig, "the signature record's reserved fields are not zero");
    return false;
  }
  uint8_t id[HK_KEY_ID_SIZE];
  hk_key_id(r->public_key, id);
  if (memcmp(id, r->key_id, sizeof id) != 0) {
    set_invalid(sig, "the signature's key id does not match its public key");
    return false;
  }
  return true;
}

hk_status_t hk_signature_check(const hk_pack_view_t *v, hk_signature_t *sig) {
  memset(sig, 0, sizeof *sig);
  const hk_section_t *s;
  HK_RETURN_IF_ERROR(find_section(v, &s));
  if (!s) return HK_OK; /* HK_SIGNATURE_NONE */
  HK_FAIL_IF(!hk_crypto_init(), HK_STATUS_UNAVAILABLE, "libsodium failed to initialize");
  if (s->size < sizeof(hk_signature_rec_t)) {
    set_invalid(sig, "the SIGNATURE section is malformed (size)");
    return HK_OK;
  }
  hk_signature_rec_t r;
  memcpy(&r, v->base + s->offset, sizeof r);
  memcpy(sig->public_key, r.public_key, sizeof sig->public_key);
  hk_key_id_hex(r.public_key, sig->key_id);
  if (!record_ok(s, &r, sig)) return HK_OK;
  uint8_t digest[HK_SIGNATURE_DIGEST_SIZE], msg[HK_SIGNATURE_MESSAGE_SIZE];
  uint64_t entry = v->header->section_table_offset + (uint64_t)(s - v->sections) * sizeof(hk_section_t);
  hk_signature_digest(v->base, v->size, entry, s->offset, s->size, digest);
  hk_signature_message(digest, msg);
  if (crypto_sign_verify_detached(r.signature, msg, sizeof msg, r.public_key) != 0) {
    set_invalid(sig, "the signature does not verify: the pack was changed after it was signed");
    return HK_OK;
  }
  sig->state = HK_SIGNATURE_VALID;
  return HK_OK;
}

HK_API hk_status_t hk_public_key_parse(const char *text, size_t size, uint8_t out_key[HK_PUBLIC_KEY_BYTES]) {
  static const char prefix[] = "hk-ed25519-public ";
  const size_t plen = sizeof prefix - 1, hlen = 2 * HK_PUBLIC_KEY_BYTES;
  HK_FAIL_IF(!text || !out_key, HK_STATUS_INVALID_ARGUMENT, "text and out_key must not be NULL");
  HK_FAIL_IF(size < plen + hlen || memcmp(text, prefix, plen) != 0, HK_STATUS_INVALID_ARGUMENT,
             "not an hkc public key (expected the line \"hk-ed25519-public <64 hex digits>\", from hkc keygen)");
  for (size_t i = plen + hlen; i < size; i++)
    HK_FAIL_IF(!strchr(" \t\r\n", text[i]) || !text[i], HK_STATUS_INVALID_ARGUMENT,
               "public key: unexpected text after the key");
  size_t got = 0;
  HK_FAIL_IF(sodium_hex2bin(out_key, HK_PUBLIC_KEY_BYTES, text + plen, hlen, NULL, &got, NULL) != 0 ||
                 got != HK_PUBLIC_KEY_BYTES,
             HK_STATUS_INVALID_ARGUMENT, "public key: expected 64 hex digits");
  return HK_OK;
}
