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
    "usage: hkc merge PACK PACK... -o OUT [--sign KEY] [-q]\n"
    "\n"
    "Combines packs of one spec built for different targets (one build per target, on any\n"
    "machines) into one pack: the same bytes as one `hkc build --target A,B,...` of their\n"
    "targets, in the order the packs are given. The packs must come from the same hkc, spec,\n"
    "batch buckets and build options (fusion, tuning databases, kernel options, ...); what\n"
    "differs is named. Each target may appear once. Input signatures are dropped (they do not\n"
    "cover the merged bytes).\n"
    "\n"
    "  -o OUT       the merged pack (written atomically; may be one of the inputs)\n"
    "  --sign KEY   sign the merged pack with the secret key KEY (hkc keygen)\n"
    "  -q           no summary on stdout\n";

/* ---- merge ---------------------------------------------------------------------------------- */
static void help_merge(void) {
  fputs(k_merge_usage, stdout);
  hkc_cli_common_help(0, 0);
}

/* The inputs are untrusted: opened through the verifying reader, metadata only (no code is
 * loaded; merge decompresses each target's code itself to check it). */
int hkc_cmd_merge(int argc, char **argv) {
  static const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                           {"sign", required_argument, NULL, OPT_SIGN}, COMMON_LONG_OPTIONS,
                                           {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "merge", "hkc merge PACK PACK... -o OUT [--sign KEY] [-q]", help_merge, 0);
  const char *out = NULL, *key = NULL;
  int c;
  while ((c = hkc_cli_next(&cli, argc, argv, "o:", longopts)) != -1) {
    if (c == HKC_CLI_STOP) return cli.rc;
    if (c == OPT_SIGN) key = optarg;
    else out = optarg; /* 'o' */
  }
  const char *const *paths = (const char *const *)(argv + optind);
  const size_t n = (size_t)(argc - optind);
  const int quiet = cli.quiet;
  if (n < 2 || !out) return hkc_cli_usage(&cli, "%s", !out ? "no output given (-o OUT)" : "give at least two packs"), 2;
  char err[4200];
  uint8_t seed[HKC_KEY_SEED_BYTES];
  hk_pack_t **packs = calloc(n, sizeof *packs);
  const hk_pack_view_t **views = calloc(n, sizeof *views);
  void *data = NULL;
  size_t size = 0;
  int rc = 1, have_key = 0;
  if (!packs || !views) goto done;
  if (hkc_output_check(out, err, sizeof err) != 0) {
    fprintf(stderr, "hkc merge: %s\n", err);
    goto done;
  }
  if (key) { /* before reading the inputs: a bad key fails at once */
    if (hkc_key_load(key, seed) != 0) goto done;
    have_key = 1;
  }
  for (size_t i = 0; i < n; i++) {
    hk_pack_open_options_t o = {.struct_size = sizeof o, .metadata_only = 1};
    if (hkc_tool_open_pack("merge", paths[i], &o, &packs[i]) != HK_OK) goto done;
    views[i] = hk_pack_view(packs[i]);
    const char *id;
    hk_signature_state_t s = hk_pack_signature(packs[i], &id);
    if (s != HK_SIGNATURE_NONE && !quiet)
      fprintf(stderr, "hkc merge: note: %s is signed (key %s%s); the merged pack does not keep the signature%s\n",
              paths[i], id, s == HK_SIGNATURE_INVALID ? ", INVALID" : "", have_key ? "" : " (--sign KEY signs it)");
  }
  if (hkc_pack_merge_memory(views, paths, n, have_key ? seed : NULL, &data, &size) != 0 ||
      hkc_pack_write_bytes(data, size, out) != 0)
    goto done;
  if (!quiet) {
    printf("merged %zu packs -> %s (%zu bytes%s):", n, out, size, have_key ? ", signed" : "");
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
  free(data);
  return rc;
}
