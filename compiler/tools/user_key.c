/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The user's signing key (docs/CLI.md, "Signing"): the Ed25519 key with which hkc build and
 * hkc merge sign by default, created on first use like an ssh key, and which hkc run, hkc
 * generate and hkc merge trust besides their --trust keys. It lives at $HKC_KEY, else
 * $XDG_CONFIG_HOME/hkc/key, else ~/.config/hkc/key (secret, mode 0600, in a directory hkc
 * creates with mode 0700), its public half next to it as KEY.pub. Only the command line reads
 * these variables: libhkrt trusts nothing but the keys an application passes it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hk/hkrt.h"
#include "pack/pack.h"
#include "tools/tools.h"
#include "util/util.h"

/* An absolute path in the environment variable, or NULL (unset, empty or relative: the XDG
 * base directory rules ignore a relative XDG_CONFIG_HOME). */
static const char *abs_env(const char *name) {
  const char *v = getenv(name);
  return v && v[0] == '/' ? v : NULL;
}

int hkc_user_key_path(char *out, size_t size, int *out_explicit) {
  const char *key = getenv("HKC_KEY"), *xdg = abs_env("XDG_CONFIG_HOME"), *home = abs_env("HOME");
  int n;
  *out_explicit = key && key[0];
  if (*out_explicit) n = snprintf(out, size, "%s", key);
  else if (xdg) n = snprintf(out, size, "%s/hkc/key", xdg);
  else if (home) n = snprintf(out, size, "%s/.config/hkc/key", home);
  else return -1;
  return n > 0 && (size_t)n < size ? 0 : -1;
}

/* mkdir -p of the directory holding path, with mode 0700 for what it creates (an existing
 * directory keeps its mode). 0 / -1 (errno). */
static int make_parent(const char *path) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  char *slash = strrchr(buf, '/');
  if (!slash || slash == buf) return 0;
  *slash = '\0';
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0700) != 0 && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(buf, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* Reads a public key file into key. 1: read, 0: absent, -1: unreadable or malformed (the
 * reason in why). */
static int read_public(const char *path, uint8_t key[HK_PUBLIC_KEY_BYTES], char *why, size_t why_size) {
  char *text = NULL;
  size_t n = 0;
  if (hkc_read_file(path, &text, &n) != 0) {
    if (errno == ENOENT) return 0;
    snprintf(why, why_size, "%s", hkc_strerror(errno));
    return -1;
  }
  const hk_status_t st = hk_public_key_parse(text, n, key);
  free(text);
  if (st != HK_OK) snprintf(why, why_size, "%s", hk_last_error());
  return st == HK_OK ? 1 : -1;
}

int hkc_user_key_load(const char *cmd, int quiet, uint8_t out_seed[HKC_KEY_SEED_BYTES]) {
  char path[4096], pub[4200], why[512];
  int explicit_path, created = 0;
  if (hkc_user_key_path(path, sizeof path, &explicit_path) != 0) {
    fprintf(stderr, "hkc %s: no place for your signing key: neither HKC_KEY, XDG_CONFIG_HOME nor HOME is set to "
                    "an absolute path (set one, pass --sign KEY, or --no-sign for an unsigned pack)\n", cmd);
    return -1;
  }
  snprintf(pub, sizeof pub, "%s.pub", path);
  struct stat st;
  if (stat(path, &st) != 0) {
    /* first use: create it (the directory too, unless HKC_KEY named the place) */
    if (errno != ENOENT || (!explicit_path && make_parent(path) != 0)) {
      fprintf(stderr, "hkc %s: cannot create your signing key %s: %s (pass --sign KEY, --no-sign, or set HKC_KEY)\n",
              cmd, path, hkc_strerror(errno));
      return -1;
    }
    if (hkc_key_create_exclusive(path, &created) != 0) {
      fprintf(stderr, "hkc %s: (pass --sign KEY, --no-sign, or set HKC_KEY)\n", cmd);
      return -1;
    }
  }
  if (hkc_key_load(path, out_seed) != 0) return -1;
  /* the public half: written when missing, rewritten when it is not this key's */
  uint8_t want[HK_PUBLIC_KEY_BYTES], have[HK_PUBLIC_KEY_BYTES];
  hkc_key_public(out_seed, want);
  const int got = read_public(pub, have, why, sizeof why);
  if (got != 1 || memcmp(have, want, sizeof want) != 0) {
    if (got != 0)
      fprintf(stderr, "hkc %s: warning: %s is not the public half of %s (%s); writing it again\n", cmd, pub, path,
              got < 0 ? why : "another key");
    if (hkc_key_write_public(pub, out_seed) != 0) {
      hkc_key_wipe(out_seed, HKC_KEY_SEED_BYTES);
      return -1;
    }
  }
  if (created && !quiet) {
    char id[HKC_KEY_ID_HEX_BYTES];
    hkc_key_id(out_seed, id);
    fprintf(stderr,
            "hkc %s: created your signing key %s (key id %s; public half %s). hkc build and hkc merge sign with "
            "it; hkc run, hkc generate and the Python package trust it (docs/CLI.md, \"Signing\")\n",
            cmd, path, id, pub);
  }
  return 0;
}

int hkc_user_key_trust(const char *cmd, hkc_trust_opts_t *t) {
  char path[4096], pub[4200], why[512];
  int explicit_path;
  if (hkc_user_key_path(path, sizeof path, &explicit_path) != 0) return 0; /* nowhere: no user key */
  snprintf(pub, sizeof pub, "%s.pub", path);
  uint8_t key[HK_PUBLIC_KEY_BYTES];
  const int got = read_public(pub, key, why, sizeof why);
  if (got == 0) return 0; /* no user key yet (hkc build creates it) */
  if (got < 0) {
    fprintf(stderr, "hkc %s: warning: your public key %s is not used: %s\n", cmd, pub, why);
    return 0;
  }
  for (uint32_t i = 0; i < t->n; i++)
    if (memcmp(t->keys[i], key, sizeof key) == 0) return 0; /* given with --trust too */
  if (t->n >= HKC_MAX_TRUSTED_KEYS + 1) return -1; /* cannot happen: one slot is kept for it */
  memcpy(t->keys[t->n++], key, sizeof key);
  return 0;
}
