/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sign_internal.h -- pack signatures (docs/FORMAT.md, "Signatures"): the signed digest, key
 * ids and the check of a verified pack's SIGNATURE section. libsodium does the cryptography.
 * The compiler's signer (compiler/pack/pack_sign.c) computes the digest with the same function,
 * so that what is signed and what is checked are defined once.
 */
#ifndef HK_SIGN_INTERNAL_H
#define HK_SIGN_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "pack_internal.h"

#define HK_KEY_ID_HEX_SIZE (2 * HK_KEY_ID_SIZE + 1)

/* What a pack's signature says, before the trust policy. */
typedef struct hk_signature {
  hk_signature_state_t state;            /* NONE, VALID or INVALID (TRUSTED is the open's call) */
  uint8_t public_key[HK_PUBLIC_KEY_BYTES];
  char key_id[HK_KEY_ID_HEX_SIZE];       /* "" when NONE */
  char reason[160];                      /* why INVALID */
} hk_signature_t;

/* Initializes libsodium once per process; false when it cannot (no usable random source,
 * which verification does not need, never happens on Linux). Thread-safe. */
bool hk_crypto_init(void);

/* The BLAKE2b-512 digest of the signed bytes of data[0, size): everything but the header's
 * table_checksum and header_checksum, the checksum field of the section table entry at
 * entry_offset and the payload [payload_offset, +payload_size), which read as zero. The
 * ranges must be in that order and inside data (a verified pack guarantees it). */
void hk_signature_digest(const uint8_t *data, uint64_t size, uint64_t entry_offset, uint64_t payload_offset,
                         uint64_t payload_size, uint8_t out_digest[HK_SIGNATURE_DIGEST_SIZE]);

/* The message Ed25519 signs: HK_SIGNATURE_CONTEXT, then the digest. */
#define HK_SIGNATURE_MESSAGE_SIZE (HK_SIGNATURE_CONTEXT_SIZE + HK_SIGNATURE_DIGEST_SIZE)
void hk_signature_message(const uint8_t digest[HK_SIGNATURE_DIGEST_SIZE], uint8_t out[HK_SIGNATURE_MESSAGE_SIZE]);

/* A public key's id: the first HK_KEY_ID_SIZE bytes of BLAKE2b-256(key), and as hex. */
void hk_key_id(const uint8_t key[HK_PUBLIC_KEY_BYTES], uint8_t out_id[HK_KEY_ID_SIZE]);
void hk_key_id_hex(const uint8_t key[HK_PUBLIC_KEY_BYTES], char out_hex[HK_KEY_ID_HEX_SIZE]);

/* Reads the SIGNATURE section of a verified view, if any, and checks it: record layout,
 * key id, and the Ed25519 signature over the digest. A malformed or failing signature is
 * state INVALID with the reason, not an error. Errors: CORRUPT (more than one SIGNATURE
 * section), UNAVAILABLE (libsodium failed to initialize). */
hk_status_t hk_signature_check(const hk_pack_view_t *view, hk_signature_t *out_signature);

#endif /* HK_SIGN_INTERNAL_H */
