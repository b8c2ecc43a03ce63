/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_key: the key file readers on arbitrary bytes -- hkc_key_parse (a secret key: hkc sign
 * --key, hkc build --sign) and libhkrt's hk_public_key_parse (a KEY.pub: hkc run / inspect
 * --trust, applications). Both read whatever file they are given.
 *
 * A key that parses must be exactly its prefix, 64 hex digits and blanks, so the canonical
 * text written from the parsed bytes ("PREFIX<hex>\n", as hkc keygen writes it) parses again
 * to the same bytes; a rejected secret key leaves no bytes of a seed behind (out_seed zeroed).
 *
 * Seeds in corpus/key/: keys hkc keygen wrote (a secret and a public half), with CRLF, and
 * near misses (one hex digit short, a non-hex digit, text after the key, a NUL byte after
 * it, the other half's prefix, an escape sequence in the key's place).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk/hkrt.h"
#include "hkc.h"
#include "pack/pack.h"

static const char k_secret[] = "hk-ed25519-secret ", k_public[] = "hk-ed25519-public ";

/* The canonical text of a key: prefix, lower-case hex, newline. */
static size_t canonical(char *out, const char *prefix, const uint8_t *bytes, size_t n) {
  size_t o = (size_t)sprintf(out, "%s", prefix);
  for (size_t i = 0; i < n; i++) o += (size_t)sprintf(out + o, "%02x", bytes[i]);
  out[o++] = '\n';
  return o;
}

/* A key that parsed: prefix, then 64 hex digits, then only blanks. */
static void check_shape(const uint8_t *data, size_t size, const char *prefix) {
  const size_t plen = strlen(prefix);
  if (size < plen + 64 || memcmp(data, prefix, plen) != 0) abort();
  for (size_t i = plen; i < plen + 64; i++)
    if (!strchr("0123456789abcdefABCDEF", data[i]) || !data[i]) abort();
  for (size_t i = plen + 64; i < size; i++)
    if (!data[i] || !strchr(" \t\r\n", data[i])) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char diag[4096];
  char text[160];
  uint8_t seed[HKC_KEY_SEED_BYTES], again[HKC_KEY_SEED_BYTES];
  hkc_diag_capture(diag, sizeof diag);
  memset(seed, 0xa5, sizeof seed);
  if (hkc_key_parse("fuzz.key", (const char *)data, size, seed) == 0) {
    check_shape(data, size, k_secret);
    const size_t n = canonical(text, k_secret, seed, sizeof seed);
    if (hkc_key_parse("again.key", text, n, again) != 0 || memcmp(seed, again, sizeof seed) != 0) abort();
  } else {
    for (size_t i = 0; i < sizeof seed; i++)
      if (seed[i]) abort(); /* nothing of a rejected seed is left */
  }
  hkc_diag_capture(NULL, 0);
  hkc_error_reset();

  uint8_t key[HK_PUBLIC_KEY_BYTES], key2[HK_PUBLIC_KEY_BYTES];
  if (hk_public_key_parse((const char *)data, size, key) == HK_OK) {
    check_shape(data, size, k_public);
    const size_t n = canonical(text, k_public, key, sizeof key);
    if (hk_public_key_parse(text, n, key2) != HK_OK || memcmp(key, key2, sizeof key) != 0) abort();
  } else if (!hk_last_error()[0]) {
    abort(); /* a refusal says why */
  }
  return 0;
}
