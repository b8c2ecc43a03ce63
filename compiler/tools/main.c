/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hkc: the command line.
 *
 *   hkc build SPEC -o OUT [--target LIST] [--fusion auto|none] [--tune model|default] [--tuning-db FILE]...
 *             [--kernel-option NAME=VALUE]... [--weights FILE.safetensors [--weights-map MAP]]
 *   hkc tune SPEC --target T -o DB | hkc tune --merge A.db B.db ... -o DB
 *   hkc inspect PACK [--disasm KERNEL | --plan [--batch N]]
 *   hkc run PACK [--target T] [--batch N] [--seed S] [--input NAME=FILE.npy] [--weights FILE.safetensors|FILE.npz]
 *           [--random-params] [--profile] ...
 *   hkc keygen -o KEY | hkc sign PACK [--key KEY] [-o OUT]
 *   hkc merge PACK PACK... -o OUT [--sign KEY]
 *
 * One file per command (cmd_build.c, cmd_run.c, ...; tools.h lists them); this one holds the
 * general usage, the command table and the dispatch.
 *
 * `run` goes through libhkrt's public API only: the same path an application takes.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hk/hkrt.h"
#include "rtc/rtc.h"
#include "rtc/rtc_worker.h"
#include "tools/tools.h"
#include "util/util.h"

static const char k_usage[] =
    "usage: hkc <command> [options]\n"
    "\n"
    "commands:\n"
    "  build SPEC -o OUT [--target LIST]   compile a pipeline spec into a .hkpack artifact\n"
    "  inspect PACK [--disasm K | --plan]  show targets, kernels, graphs, workspace, provenance;\n"
    "                                      --plan: traffic and roofline per launch\n"
    "  run PACK [options]                  run a pack through libhkrt and time it\n"
    "  generate PACK --ids P.npy [-n N]    prefill prompts and decode tokens (a generation pack)\n"
    "  tune SPEC --target T -o DB          measure kernel configurations, write a tuning database\n"
    "  targets                             what the installed toolchains can build\n"
    "  keygen -o KEY                       create a signing key pair (KEY, KEY.pub)\n"
    "  sign PACK [--key KEY] [-o OUT]      sign a pack (default: your key; docs/CLI.md, Signing)\n"
    "  merge PACK... -o OUT [--sign KEY]   one pack from packs of one spec built per target\n"
    "  cache stats | clean [--max-size N]  the compile cache: its size; empty it or cap it\n"
    "  import hf CONFIG.json -o SPEC       a spec and weights name map from a Hugging Face config\n"
    "  import onnx MODEL.onnx -o SPEC --weights-out W.safetensors   a spec and its weights from ONNX\n"
    "  quantize IN -o OUT --dtype int8|fp8_e4m3   a checkpoint's linear weights to 8 bits, with scales\n"
    "\n"
    "  hkc <command> --help   options of one command\n"
    "  hkc --version          versions of hkc and the artifact format\n"
    "\n"
    "The commands take -q (less output) and -v (more; import: the importers' own options);\n"
    "build, inspect, run, targets, tune and cache stats take --json (one JSON document on\n"
    "stdout; docs/CLI.md has the schema).\n";

/* ---- import ---------------------------------------------------------------------------------- */
/* hkc import hf|onnx ...: the importer scripts parse their own arguments (import.c). */
static int cmd_import(int argc, char **argv) { return hkc_tool_import(argc - 1, argv + 1); }

/* ---- the commands --------------------------------------------------------------------------- */
/* One row per command. run gets the command's arguments with argv[0] = its name (getopt_long
 * starts at argv[1]) and returns the exit status: 0, 1 (failed) or 2 (usage error). */
typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
} command_t;

static const command_t k_commands[] = {
    {"build", hkc_cmd_build},     {"run", hkc_cmd_run},       {"tune", hkc_cmd_tune}, {"inspect", hkc_cmd_inspect},
    {"targets", hkc_cmd_targets}, {"keygen", hkc_cmd_keygen}, {"sign", hkc_cmd_sign}, {"merge", hkc_cmd_merge},
    {"cache", hkc_cmd_cache},     {"import", cmd_import},     {"generate", hkc_cmd_generate},
    {"quantize", hkc_cmd_quantize},
};

static int dispatch(int argc, char **argv) {
  for (size_t i = 0; i < sizeof k_commands / sizeof *k_commands; i++)
    if (strcmp(argv[1], k_commands[i].name) == 0) return k_commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "hkc: unknown command '%s'\nusage: hkc <command> [options]\ntry 'hkc --help'\n", argv[1]);
  return 2;
}

int main(int argc, char **argv) {
  hkc_env_from_process(); /* the stages read no environment themselves */
  if (argc == 2 && strcmp(argv[1], HKC_WORKER_ARG) == 0) _exit(hkc_amd_worker_main()); /* no atexit, no leak report */
  if (argc < 2) {
    fputs("usage: hkc <command> [options]\ntry 'hkc --help'\n", stderr);
    return 2;
  }
  if (strcmp(argv[1], "help") == 0 && argc == 3) { /* hkc help CMD: CMD's own help */
    for (size_t i = 0; i < sizeof k_commands / sizeof *k_commands; i++)
      if (strcmp(argv[2], k_commands[i].name) == 0) {
        char *sub[] = {argv[2], "--help", NULL};
        return k_commands[i].run(2, sub);
      }
    fprintf(stderr, "hkc help: unknown command '%s'\ntry 'hkc --help'\n", argv[2]);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    fputs(k_usage, stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
    printf("hkc %s (artifact format %d.%d, libhkrt %s)\n", HKC_VERSION_STRING, HK_PACK_VERSION_MAJOR,
           HK_PACK_VERSION_MINOR, HKRT_VERSION_STRING);
    return 0;
  }
  const int rc = dispatch(argc, argv);
  hkc_amd_workers_stop();
  return rc;
}
