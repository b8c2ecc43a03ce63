/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc targets`: its options; the probe is probe.c's.
 */
#include <stdio.h>

#include "tools/tools.h"
#include "util/util.h"

static const char k_targets_usage[] =
    "usage: hkc targets [--json] [--no-probe]\n"
    "\n"
    "Probes the installed toolchains and prints which targets this machine can build:\n"
    "host (the C compiler), AMD ISAs (comgr's list, each checked by compiling a test\n"
    "kernel with hiprtc) and NVIDIA architectures (nvrtc's list), and hkc's target table.\n"
    "\n"
    "  --json       the same as one JSON document (docs/CLI.md)\n"
    "  --no-probe   take each toolchain's list as it is: no test compile per target (fast;\n"
    "               AMD: comgr may list ISAs this hiprtc cannot build)\n";

/* ---- targets -------------------------------------------------------------------------------- */
static void help_targets(void) {
  fputs(k_targets_usage, stdout);
  hkc_cli_common_help(0, 1);
}

int hkc_cmd_targets(int argc, char **argv) {
  static const struct option longopts[] = {{"no-probe", no_argument, NULL, OPT_NO_PROBE}, JSON_LONG_OPTION,
                                           COMMON_LONG_OPTIONS, {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "targets", "hkc targets [--json] [--no-probe]", help_targets, 1);
  int c, probe = 1;
  while ((c = hkc_cli_next(&cli, argc, argv, "", longopts)) != -1) {
    if (c == HKC_CLI_STOP) return cli.rc;
    probe = 0; /* --no-probe */
  }
  if (optind < argc) return hkc_cli_usage(&cli, "takes no arguments (got %s)", argv[optind]), 2;
  if (hkc_cli_start_workers(0, HKC_DEFAULT_COMPILE_TIMEOUT_S) != 0) return 1;
  if (cli.json) return hkc_targets_json(stdout, probe) == 0 ? 0 : 1;
  return hkc_print_targets(stdout, probe) == 0 ? 0 : 1;
}
