/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc inspect`: its options; the reports are inspect.c's.
 */
#include <stdio.h>
#include <string.h>

#include "hk/hkrt.h"
#include "tools/tools.h"
#include "util/util.h"

static const char k_inspect_usage[] =
    "usage: hkc inspect PACK [--json] [--trust KEY.pub]... [--disasm KERNEL [--target T] | --plan [--batch N] [--target T]]\n"
    "\n"
    "Verifies PACK and prints its manifest, its signature (ed25519 key id, verified or\n"
    "INVALID, or none), targets, kernels with their resources and occupancy, tensors, graphs\n"
    "per batch size (nodes, workspace bytes) and provenance. Never loads the pack's code.\n"
    "Kernel resources per vendor: NVIDIA registers, shared and local memory per block/thread;\n"
    "AMD VGPRs, AGPRs, SGPRs, LDS and scratch; host kernels none.\n"
    "\n"
    "  --json            the same report as one JSON document (docs/CLI.md)\n"
    "  -q                verify only: nothing printed, the exit status says\n"
    "  --trust KEY.pub   also say whether the signing key is this one (repeatable)\n"
    "  --plan            the traffic and roofline report instead: per batch bucket, each\n"
    "                    launch's spec nodes, kernel, estimated HBM bytes and GFLOP, and its\n"
    "                    floor in us on MI250X (gfx90a, one GCD), MI300X (gfx942), H200\n"
    "                    (sm_90) and the pack's other GPU targets; totals before and after\n"
    "                    fusion and their ratio\n"
    "  --batch N         --plan: only this batch bucket\n"
    "  --target T        --plan: list this target's launches and kernels (default: the\n"
    "                    first GPU target of the pack)\n"
    "  --disasm KERNEL   print the machine code of one kernel instead: AMD through comgr,\n"
    "                    NVIDIA through nvdisasm/cuobjdump, host through objdump\n"
    "  --target T        the target whose code to show (default: the first that has KERNEL)\n";

/* ---- inspect ---------------------------------------------------------------------------- */
static void help_inspect(void) {
  fputs(k_inspect_usage, stdout);
  hkc_cli_common_help(0, 1);
}

int hkc_cmd_inspect(int argc, char **argv) {
  static const struct option longopts[] = {
      {"plan", no_argument, NULL, OPT_PLAN}, {"trust", required_argument, NULL, OPT_TRUST},
      {"batch", required_argument, NULL, OPT_BATCH}, {"disasm", required_argument, NULL, OPT_DISASM},
      {"target", required_argument, NULL, 't'}, JSON_LONG_OPTION, COMMON_LONG_OPTIONS, {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "inspect", "hkc inspect PACK [--json] [--disasm KERNEL | --plan [--batch N]] [--target T]",
               help_inspect, 1);
  const char *pack = NULL, *kernel = NULL, *target = NULL;
  int plan = 0, c;
  long long batch = 0;
  hkc_trust_opts_t trust = {0};
  while ((c = hkc_cli_next(&cli, argc, argv, "t:", longopts)) != -1) {
    switch (c) {
    case HKC_CLI_STOP: return cli.rc;
    case OPT_PLAN: plan = 1; break;
    case OPT_TRUST: if (hkc_trusted_key_add("inspect", &trust, optarg)) return 2; break;
    case OPT_BATCH: if (hkc_cli_count(&cli, "--batch", optarg, 1, INT64_MAX, &batch) != 0) return cli.rc; break;
    case OPT_DISASM: kernel = optarg; break;
    case 't': target = optarg; break;
    default: return hkc_cli_usage(&cli, "unhandled option"), cli.rc;
    }
  }
  if (optind < argc) pack = argv[optind++];
  if (optind < argc) return hkc_cli_usage(&cli, "unexpected argument %s", argv[optind]), 2;
  if (!pack) return hkc_cli_usage(&cli, "no pack given"), 2;
  if (plan && kernel) return hkc_cli_usage(&cli, "--plan and --disasm are separate reports"), 2;
  if (batch && !plan) return hkc_cli_usage(&cli, "--batch goes with --plan"), 2;
  if (target && !kernel && !plan) return hkc_cli_usage(&cli, "--target goes with --disasm or --plan"), 2;
  if (cli.json && (plan || kernel)) return hkc_cli_usage(&cli, "--json is the report itself: not with --plan or --disasm"), 2;
  if (hkc_cli_start_workers(1, HKC_DEFAULT_COMPILE_TIMEOUT_S) != 0) return 1;
  if (plan) return hkc_inspect_plan(pack, (uint64_t)batch, target, stdout) == 0 ? 0 : 1;
  if (kernel) return hkc_inspect_disasm(pack, kernel, target, stdout) == 0 ? 0 : 1;
  const uint8_t(*keys)[HK_PUBLIC_KEY_BYTES] = (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])trust.keys;
  if (cli.json) return hkc_inspect_json(pack, keys, trust.n, stdout) == 0 ? 0 : 1;
  /* -q: verify only (the exit status says whether the pack is sound) */
  FILE *out = stdout, *null = NULL;
  if (cli.quiet && !(out = null = fopen("/dev/null", "w"))) return 1;
  const int rc = hkc_inspect_trusted(pack, keys, trust.n, out) == 0 ? 0 : 1;
  if (null) fclose(null);
  return rc;
}
