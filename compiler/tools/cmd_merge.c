/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc merge`: one pack from packs of one spec built per target (pack/pack_merge.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk/hkrt.h"
#include "pack/pack.h"
#include "pack_internal.h" /* hk_pack_view: the verified records, for merge */
#include "tools/tools.h"
#include "util/util.h"

static const char k_merge_usage[] =
    "usage: hkc merge PACK PACK... -o OUT [--sign KEY | --no-sign] [--trust KEY.pub]...\n"
    "                 [--no-user-key] [--allow-unsigned-inputs] [-q]\n"
    "\n"
    "Combines packs of one spec built for different targets (one build per target, on any\n"
    "machines) into one pack: the pack one `hkc build --target A,B,...` of their targets\n"
    "writes, in the order the packs are given, with one provenance line per input saying which\n"
    "targets it gave and who signed it (merge.input.N=targets A; signed by key ID, trusted).\n"
    "The packs must come from the same hkc, spec, batch buckets and build options (fusion,\n"
    "tuning databases, kernel options, ...); what differs is named. Each target may appear once.\n"
    "\n"
    "Every input's signature is checked: one that does not verify is refused. The merged pack\n"
    "is signed (by default with your own key, as hkc build signs), so its code goes out under\n"
    "that signature: each input must be signed by a trusted key -- a --trust key or your own --\n"
    "or the merge is refused, naming it, unless --allow-unsigned-inputs (recorded per input).\n"
    "\n"
    "  -o OUT       the merged pack (written atomically; may be one of the inputs)\n"
    "  --sign KEY   sign the merged pack with the secret key KEY (hkc keygen) instead of your own\n"
    "  --no-sign    write it unsigned (the inputs need no trusted signature then)\n"
    "  --trust KEY.pub\n"
    "               trust inputs signed by this key (repeatable, up to 16)\n"
    "  --no-user-key  do not trust inputs signed by your own key\n"
    "  --allow-unsigned-inputs\n"
    "               sign the merged pack even over inputs that no trusted key signed (parts you\n"
    "               built yourself); each such input is named in the provenance\n"
    "  -q           no summary on stdout\n";

/* ---- merge ---------------------------------------------------------------------------------- */
static void help_merge(void) {
  fputs(k_merge_usage, stdout);
  hkc_cli_common_help(0, 0);
}

/* The provenance note on one input (hkc_pack_merge_memory): its signature as the open found
 * it, and whether --allow-unsigned-inputs let it into a signed pack. */
static void input_note(hk_signature_state_t s, const char *id, int allowed, char *out, size_t size) {
  if (s == HK_SIGNATURE_NONE) snprintf(out, size, "unsigned");
  else snprintf(out, size, "signed by key %s, %s", id, s == HK_SIGNATURE_TRUSTED ? "trusted" : "not trusted");
  if (allowed) snprintf(out + strlen(out), size - strlen(out), " (allowed by --allow-unsigned-inputs)");
}

/* The inputs are untrusted: opened through the verifying reader, metadata only (no code is
 * loaded; merge decompresses each target's code itself to check it), each signature checked
 * and, when the result is signed, required to be a trusted key's (the trust of the result
 * is that of its signer: an input nobody vouches for must not come out signed). */
int hkc_cmd_merge(int argc, char **argv) {
  static const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                           {"sign", required_argument, NULL, OPT_SIGN},
                                           {"no-sign", no_argument, NULL, OPT_NO_SIGN},
                                           {"trust", required_argument, NULL, OPT_TRUST},
                                           {"no-user-key", no_argument, NULL, OPT_NO_USER_KEY},
                                           {"allow-unsigned-inputs", no_argument, NULL, OPT_ALLOW_UNSIGNED_INPUTS},
                                           COMMON_LONG_OPTIONS,
                                           {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "merge", "hkc merge PACK PACK... -o OUT [--sign KEY | --no-sign] [--trust KEY.pub]... [-q]",
               help_merge, 0);
  const char *out = NULL, *key = NULL;
  int c, no_sign = 0, user_key = 1, allow_unsigned = 0;
  hkc_trust_opts_t trust = {0};
  while ((c = hkc_cli_next(&cli, argc, argv, "o:", longopts)) != -1) {
    switch (c) {
    case HKC_CLI_STOP: return cli.rc;
    case OPT_SIGN: key = optarg; break;
    case OPT_NO_SIGN: no_sign = 1; break;
    case OPT_TRUST: if (hkc_trusted_key_add("merge", &trust, optarg)) return 2; break;
    case OPT_NO_USER_KEY: user_key = 0; break;
    case OPT_ALLOW_UNSIGNED_INPUTS: allow_unsigned = 1; break;
    default: out = optarg; break; /* 'o' */
    }
  }
  const char *const *paths = (const char *const *)(argv + optind);
  const size_t n = (size_t)(argc - optind);
  const int quiet = cli.quiet;
  if (n < 2 || !out) return hkc_cli_usage(&cli, "%s", !out ? "no output given (-o OUT)" : "give at least two packs"), 2;
  if (key && no_sign) return hkc_cli_usage(&cli, "--sign KEY and --no-sign exclude each other"), 2;
  char err[4200];
  uint8_t seed[HKC_KEY_SEED_BYTES];
  hk_pack_t **packs = calloc(n, sizeof *packs);
  const hk_pack_view_t **views = calloc(n, sizeof *views);
  char (*notes)[128] = calloc(n, sizeof *notes);
  const char **note_ptrs = calloc(n, sizeof *note_ptrs);
  void *data = NULL;
  size_t size = 0;
  int rc = 1, have_key = 0, refused = 0;
  if (!packs || !views || !notes || !note_ptrs) goto done;
  if (hkc_output_check(out, err, sizeof err) != 0) {
    fprintf(stderr, "hkc merge: %s\n", err);
    goto done;
  }
  if (!no_sign) { /* before reading the inputs: a bad key fails at once */
    if ((key ? hkc_key_load(key, seed) : hkc_user_key_load("merge", quiet, seed)) != 0) goto done;
    have_key = 1;
  }
  if (user_key) hkc_user_key_trust("merge", &trust);
  for (size_t i = 0; i < n; i++) {
    hk_pack_open_options_t o = {.struct_size = sizeof o, .metadata_only = 1,
                                .trusted_keys = (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])trust.keys,
                                .trusted_key_count = trust.n};
    if (hkc_tool_open_pack("merge", paths[i], &o, &packs[i]) != HK_OK) goto done;
    views[i] = hk_pack_view(packs[i]);
    const char *id;
    const hk_signature_state_t s = hk_pack_signature(packs[i], &id);
    if (s == HK_SIGNATURE_INVALID) {
      fprintf(stderr, "hkc merge: %s: its signature (key %s) does not verify: the pack was changed after it was "
                      "signed; refusing it\n", paths[i], id);
      refused = 1;
      continue;
    }
    const int vouched = s == HK_SIGNATURE_TRUSTED || !have_key;
    if (!vouched && !allow_unsigned) {
      const hk_target_rec_t *t0 = &views[i]->targets[0];
      fprintf(stderr,
              "hkc merge: %s carries code (target %s%s) and %s%s%s; signed, the merged pack would pass that code off "
              "under %s. Sign it with a key you trust (hkc sign), trust its signer (--trust KEY.pub), or, for a "
              "part you built yourself, --allow-unsigned-inputs\n",
              paths[i], hk_pack_string(views[i], t0->name), views[i]->target_count > 1 ? ", ..." : "",
              s == HK_SIGNATURE_NONE ? "is not signed" : "is signed by key ", s == HK_SIGNATURE_NONE ? "" : id,
              s == HK_SIGNATURE_NONE ? "" : ", which is not trusted", key ? "the --sign key" : "your key");
      refused = 1;
      continue;
    }
    input_note(s, id, !vouched, notes[i], sizeof notes[i]);
    note_ptrs[i] = notes[i];
    if (!vouched && !quiet)
      fprintf(stderr, "hkc merge: warning: %s: %s\n", paths[i], notes[i]);
  }
  if (refused) goto done;
  if (hkc_pack_merge_memory(views, paths, n, note_ptrs, have_key ? seed : NULL, &data, &size) != 0 ||
      hkc_pack_write_bytes(data, size, out) != 0)
    goto done;
  if (!quiet) {
    char id[HKC_KEY_ID_HEX_BYTES] = "";
    if (have_key) hkc_key_id(seed, id);
    printf("merged %zu packs -> %s (%zu bytes, %s%s):", n, out, size, have_key ? "signed by key " : "unsigned", id);
    for (size_t i = 0; i < n; i++)
      for (uint32_t t = 0; t < views[i]->target_count; t++)
        printf(" %s", hk_pack_string(views[i], views[i]->targets[t].name));
    printf("\n");
  }
  rc = 0;
done:
  if (have_key) hkc_key_wipe(seed, sizeof seed);
  for (size_t i = 0; packs && i < n; i++) hk_pack_destroy(packs[i]);
  free(packs);
  free(views);
  free(notes);
  free(note_ptrs);
  free(data);
  return rc;
}
