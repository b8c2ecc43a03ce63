/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc tune`: its options (the measurement is tune_run.c, the database merge tune/tune_db.c).
 */
#include <stdio.h>
#include <string.h>

#include "codegen/codegen.h"
#include "tools/tools.h"
#include "tune/tune.h"
#include "util/util.h"

static const char k_tune_usage[] =
    "usage: hkc tune SPEC --target T -o DB [options]\n"
    "       hkc tune --merge A.db B.db ... -o DB\n"
    "\n"
    "Measured tuning, on the machine that has the target's GPU (or the host target): every\n"
    "distinct GEMM launch of SPEC (all nodes and batch sizes) is tuned once. Its candidate\n"
    "configurations are compiled in parallel and pruned (spills, shared memory / LDS,\n"
    "registers, occupancy), the analytical model ranks the survivors, the top K plus the\n"
    "default run through libhkrt on random inputs (outputs cross-checked against the\n"
    "default's), and the fastest (median of the timed samples) is written to DB.\n"
    "`hkc build --tuning-db DB` then uses these choices. docs/TUNING.md has the format.\n"
    "\n"
    "options:\n"
    "  -t, --target T         one target: host, sm_80, sm_90, sm_90a, gfx90a, ...\n"
    "  -o, --output DB        database to write (replaced)\n"
    "  --top K                candidates measured per launch after the model's ranking (default 12)\n"
    "  --runs N               timed samples per candidate (default 15), each about 1 ms of\n"
    "                         back-to-back runs; --warmup N untimed runs first (default 3)\n"
    "  --report FILE          also write the default / model / measured table as Markdown\n"
    "  -j, --jobs N           parallel kernel compiles (default: number of cores)\n"
    "  --no-cache             do not use the compile cache\n"
    "  --dry-run              compile, prune and rank only: print the model's ranking (no GPU\n"
    "                         needed, no database written)\n"
    "  -q, --quiet            no progress or table\n"
    "  --json                 the result as one JSON document on stdout instead of the table\n"
    "                         (docs/CLI.md; progress stays on stderr)\n"
    "  --cache-max-size SIZE  cap the compile cache afterwards (as hkc build)\n"
    "  --kernel-option NAME=VALUE, --host-threads N\n"
    "                         as for `hkc build` (candidates of variants the options turn off\n"
    "                         are not measured; HKC_* variables map the same way)\n"
    "  --merge A B ...        union of databases; a key in several keeps the faster entry\n"
    "                         (each conflict is reported on stderr)\n";

/* ---- tune ------------------------------------------------------------------------------- */
static void help_tune(void) {
  fputs(k_tune_usage, stdout);
  hkc_cli_common_help(0, 1);
}

int hkc_cmd_tune(int argc, char **argv) {
  static const struct option longopts[] = {
      {"output", required_argument, NULL, 'o'}, {"target", required_argument, NULL, 't'},
      {"jobs", required_argument, NULL, 'j'}, {"merge", no_argument, NULL, OPT_MERGE},
      {"report", required_argument, NULL, OPT_REPORT}, {"top", required_argument, NULL, OPT_TOP},
      {"runs", required_argument, NULL, OPT_RUNS}, {"warmup", required_argument, NULL, OPT_WARMUP},
      {"no-cache", no_argument, NULL, OPT_NO_CACHE}, {"dry-run", no_argument, NULL, OPT_DRY_RUN},
      {"kernel-option", required_argument, NULL, OPT_KERNEL_OPTION},
      {"host-threads", required_argument, NULL, OPT_HOST_THREADS},
      {"cache-max-size", required_argument, NULL, OPT_CACHE_MAX_SIZE}, JSON_LONG_OPTION, COMMON_LONG_OPTIONS,
      {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "tune", "hkc tune SPEC --target T -o DB [options] | hkc tune --merge A.db B.db ... -o DB",
               help_tune, 1);
  hkc_tune_run_options_t opt = {0};
  hkc_kernel_options_t ko = {0};
  if (hkc_kernel_options_from_env(&ko, "hkc tune") != 0) return 2;
  opt.kernel_options = &ko;
  opt.host_threads = hkc_cli_host_threads_env();
  uint64_t cache_cap;
  if (hkc_cli_cache_cap_env(&cli, &cache_cap) != 0) return cli.rc;
  int merging = 0, c;
  long long v;
  while ((c = hkc_cli_next(&cli, argc, argv, "o:t:j:", longopts)) != -1) {
    switch (c) {
    case HKC_CLI_STOP: return cli.rc;
    case OPT_KERNEL_OPTION:
    case OPT_HOST_THREADS:
      if (hkc_cli_kernel_option(&cli, c, optarg, &ko, &opt.host_threads) != 0) return cli.rc;
      break;
    case OPT_MERGE: merging = 1; break;
    case 'o': opt.out_path = optarg; break;
    case 't': opt.target = optarg; break;
    case OPT_REPORT: opt.report_path = optarg; break;
    case OPT_TOP:
    case OPT_RUNS:
    case OPT_WARMUP:
    case 'j':
      if (hkc_cli_count(&cli, c == OPT_TOP ? "--top" : c == OPT_RUNS ? "--runs" : c == OPT_WARMUP ? "--warmup" : "--jobs",
                        optarg, c == OPT_WARMUP ? 0 : 1, 100000, &v) != 0)
        return cli.rc;
      if (c == OPT_TOP) opt.top = (int)v;
      else if (c == OPT_RUNS) opt.runs = (int)v;
      else if (c == OPT_WARMUP) opt.warmup = v ? (int)v : -1;
      else opt.jobs = (int)v;
      break;
    case OPT_CACHE_MAX_SIZE:
      if (hkc_cli_size(optarg, &cache_cap) != 0)
        return hkc_cli_usage(&cli, "--cache-max-size expects a size such as 500M or 2G, got '%s'", optarg), cli.rc;
      break;
    case OPT_NO_CACHE: opt.no_cache = 1; break;
    case OPT_DRY_RUN: opt.dry_run = 1; break;
    default: return hkc_cli_usage(&cli, "unhandled option"), cli.rc;
    }
  }
  opt.quiet = cli.quiet;
  opt.json = cli.json;
  if (!opt.out_path && !opt.dry_run) return hkc_cli_usage(&cli, "no output given (-o DB)"), 2;
  if (merging) {
    const size_t n_merge = (size_t)(argc - optind);
    if (n_merge == 0 || opt.target || !opt.out_path || cli.json)
      return hkc_cli_usage(&cli, "--merge takes only database files and -o%s", cli.json ? " (no --json)" : ""), 2;
    return hkc_tune_db_merge((const char *const *)(argv + optind), n_merge, opt.out_path, opt.quiet) == 0 ? 0 : 1;
  }
  if (optind < argc) opt.spec_path = argv[optind++];
  if (optind < argc) return hkc_cli_usage(&cli, "more than one spec given (%s, %s)", opt.spec_path, argv[optind]), 2;
  if (!opt.spec_path || !opt.target)
    return hkc_cli_usage(&cli, "%s", !opt.spec_path ? "no spec given" : "no target given (--target T)"), 2;
  if (hkc_cli_start_workers(opt.jobs, HKC_DEFAULT_COMPILE_TIMEOUT_S) != 0) return 1;
  const int rc = hkc_tune_run(&opt) == 0 ? 0 : 1;
  if (!opt.no_cache) hkc_cli_apply_cache_cap(&cli, cache_cap);
  return rc;
}
