/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc keygen` and `hkc sign`: Ed25519 keys and signed packs (pack/pack_sign.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk/hkrt.h"
#include "pack/pack.h"
#include "tools/tools.h"
#include "util/util.h"

static const char k_keygen_usage[] =
    "usage: hkc keygen -o KEY [-q]\n"
    "\n"
    "Creates an Ed25519 key pair for signing packs: KEY, the secret key (mode 0600), and\n"
    "KEY.pub, the public key that hkc run --trust and applications (hk_public_key_parse)\n"
    "take. Prints the key id (16 hex digits, as hkc inspect shows it). Never overwrites a file.\n";

static const char k_sign_usage[] =
    "usage: hkc sign PACK [--key KEY] [-o OUT] [-q]\n"
    "\n"
    "Signs PACK with the secret key KEY (hkc keygen), by default your own key (the one hkc build\n"
    "signs with, created on first use: docs/CLI.md, \"Signing\"): adds a SIGNATURE section\n"
    "(replacing an existing one) covering every other byte of the pack, and writes the result\n"
    "atomically to OUT (default: PACK itself). docs/FORMAT.md, Signatures. A pack built before\n"
    "hkc signed by default runs again after `hkc sign PACK`.\n";

/* ---- keygen, sign --------------------------------------------------------------------------- */
/* Signs the artifact at in_path with the key at key_path (NULL: the user's key) and writes it
 * atomically to out_path (may equal in_path). Prints the key id unless quiet. 0 / -1
 * (reported). */
static int sign_file(const char *in_path, const char *key_path, const char *out_path, int quiet) {
  uint8_t seed[HKC_KEY_SEED_BYTES];
  if ((key_path ? hkc_key_load(key_path, seed) : hkc_user_key_load("sign", quiet, seed)) != 0) return -1;
  char *data = NULL;
  size_t size = 0;
  void *signed_data = NULL;
  size_t signed_size = 0;
  int rc = -1;
  hk_pack_t *check = NULL; /* verified first, so that an error names the file once: "hkc sign: PATH: why" */
  hk_pack_open_options_t o = {.struct_size = sizeof o, .metadata_only = 1};
  if (hkc_tool_open_pack("sign", in_path, &o, &check) != HK_OK) {
    hkc_key_wipe(seed, sizeof seed);
    return -1;
  }
  hk_pack_destroy(check);
  /* hkc_read_file's buffer comes from malloc: aligned for the records. */
  if (hkc_read_file(in_path, &data, &size) != 0) {
    fprintf(stderr, "hkc sign: cannot read %s: %s\n", in_path, hkc_strerror(errno));
  } else if (hkc_pack_sign_memory(data, size, seed, &signed_data, &signed_size) == 0 &&
             hkc_pack_write_bytes(signed_data, signed_size, out_path) == 0) {
    char id[HKC_KEY_ID_HEX_BYTES];
    hkc_key_id(seed, id);
    if (!quiet) printf("signed %s with key %s -> %s\n", in_path, id, out_path);
    rc = 0;
  }
  hkc_key_wipe(seed, sizeof seed);
  free(data);
  free(signed_data);
  return rc;
}

static void help_keygen(void) {
  fputs(k_keygen_usage, stdout);
  hkc_cli_common_help(0, 0);
}

int hkc_cmd_keygen(int argc, char **argv) {
  static const struct option longopts[] = {{"output", required_argument, NULL, 'o'}, COMMON_LONG_OPTIONS,
                                           {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "keygen", "hkc keygen -o KEY [-q]", help_keygen, 0);
  const char *out = NULL;
  int c;
  while ((c = hkc_cli_next(&cli, argc, argv, "o:", longopts)) != -1) {
    if (c == HKC_CLI_STOP) return cli.rc;
    out = optarg; /* 'o' */
  }
  if (optind < argc) return hkc_cli_usage(&cli, "unexpected argument %s", argv[optind]), 2;
  if (!out) return hkc_cli_usage(&cli, "no output given (-o KEY)"), 2;
  return hkc_key_generate(out, cli.quiet) == 0 ? 0 : 1;
}

static void help_sign(void) {
  fputs(k_sign_usage, stdout);
  hkc_cli_common_help(0, 0);
}

int hkc_cmd_sign(int argc, char **argv) {
  static const struct option longopts[] = {{"key", required_argument, NULL, OPT_KEY},
                                           {"output", required_argument, NULL, 'o'}, COMMON_LONG_OPTIONS,
                                           {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "sign", "hkc sign PACK [--key KEY] [-o OUT] [-q]", help_sign, 0);
  const char *pack = NULL, *key = NULL, *out = NULL;
  int c;
  while ((c = hkc_cli_next(&cli, argc, argv, "o:", longopts)) != -1) {
    if (c == HKC_CLI_STOP) return cli.rc;
    if (c == OPT_KEY) key = optarg;
    else out = optarg; /* 'o' */
  }
  if (optind < argc) pack = argv[optind++];
  if (optind < argc) return hkc_cli_usage(&cli, "unexpected argument %s", argv[optind]), 2;
  if (!pack) return hkc_cli_usage(&cli, "no pack given"), 2;
  return sign_file(pack, key, out ? out : pack, cli.quiet) == 0 ? 0 : 1;
}
