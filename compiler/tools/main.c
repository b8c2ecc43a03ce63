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
 *   hkc keygen -o KEY | hkc sign PACK --key KEY [-o OUT]
 *   hkc merge PACK PACK... -o OUT [--sign KEY]
 *
 * `run` goes through libhkrt's public API only: the same path an application takes.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "codegen/codegen.h"
#include "driver/driver.h"
#include "frontend/frontend.h"
#include "hk/hkrt.h"
#include "pack/pack.h"
#include "pack_internal.h" /* hk_pack_view: the verified records, for merge */
#include "rtc/rtc.h"
#include "rtc/rtc_worker.h"
#include "tools/tools.h"
#include "tune/tune.h"
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
    "  sign PACK --key KEY [-o OUT]        sign a pack (libhkrt's trust policy: README, Embedding)\n"
    "  merge PACK... -o OUT [--sign KEY]   one pack from packs of one spec built per target\n"
    "  cache stats | clean [--max-size N]  the compile cache: its size; empty it or cap it\n"
    "  import hf CONFIG.json -o SPEC       a spec and weights name map from a Hugging Face config\n"
    "  import onnx MODEL.onnx -o SPEC --weights-out W.safetensors   a spec and its weights from ONNX\n"
    "\n"
    "  hkc <command> --help   options of one command\n"
    "  hkc --version          versions of hkc and the artifact format\n"
    "\n"
    "The commands take -q (less output) and -v (more; import: the importers' own options);\n"
    "build, inspect, run, targets, tune and cache stats take --json (one JSON document on\n"
    "stdout; docs/CLI.md has the schema).\n";

static const char k_build_usage[] =
    "usage: hkc build SPEC -o OUT [options]\n"
    "\n"
    "Compiles the pipeline in SPEC (YAML, format v1) for each target and writes one\n"
    "artifact. The file appears only when the whole build succeeded.\n"
    "\n"
    "options:\n"
    "  -o, --output OUT       artifact path (required)\n"
    "  -t, --target LIST      comma-separated targets, overriding the spec's `targets`:\n"
    "                         host, AMD ISAs (gfx90a, gfx90a:xnack-, gfx908, gfx1030, ...),\n"
    "                         NVIDIA (sm_75 ... sm_121, sm_90a); `hkc targets` lists them\n"
    "  --ptx LIST             NVIDIA targets that also store their kernels' PTX, which the driver\n"
    "                         JIT-compiles for a newer GPU no cubin runs on (default: the newest\n"
    "                         sm_XY of the build without an arch-specific suffix: sm_90a's PTX\n"
    "                         runs on sm_90 GPUs only)\n"
    "  --no-ptx               store no PTX (HKC_PTX=LIST or none: the same from the environment)\n"
    "  --weights FILE.safetensors\n"
    "                         store every param's bytes in the pack (a self-contained pack:\n"
    "                         libhkrt binds them when a session is created, hkc run needs no\n"
    "                         --weights); each param must be in the file with its exact dtype\n"
    "                         and shape. Safetensors only (an .npz: hkc run --weights)\n"
    "  --weights-map MAP      name map for --weights (lines \"PACK_NAME CHECKPOINT_NAME\")\n"
    "  --merge-targets LIST   this build is one part of `hkc merge`: fuse as one build of all\n"
    "                         of LIST (which must hold --target) would, so that merging the\n"
    "                         parts gives the same pack (needed only for specs with SwiGLU)\n"
    "  -j, --jobs N           parallel kernel compiles (default: number of cores); AMD\n"
    "                         compiles run in as many hkc worker processes\n"
    "  --compile-timeout SEC  a single AMD compile running longer is killed and retried once\n"
    "                         (default 600)\n"
    "  --no-cache             do not read or write the compile cache ($HKC_CACHE_DIR,\n"
    "                         default ~/.cache/hkc)\n"
    "  --Werror-spills        a kernel that spills registers to memory is an error\n"
    "  --no-pdl               mark no launch for programmatic dependent launch (PDL: on CUDA\n"
    "                         targets, a kernel whose variant waits with griddepcontrol may\n"
    "                         start while the kernels it depends on finish); recorded in the\n"
    "                         pack's provenance (pdl=off). hkc run --no-pdl turns it off at\n"
    "                         run time instead\n"
    "  --fusion auto|none     fusion plan, overriding the spec's `fusion:` (auto: gemm\n"
    "                         epilogues (a rope too, on sm_90a and the host), the dual\n"
    "                         SwiGLU gemm, residual add + norm, rmsnorm into the gemm\n"
    "                         reading it (sm_90a and the host),\n"
    "                         element-wise chains, each where the cost model says it pays on\n"
    "                         the built GPU targets at the spec's batch sizes; none: one\n"
    "                         kernel per spec node; explicit groups: only in the spec)\n"
    "  --fusion-report        auto's verdicts on stderr: per legal step it weighs, fused /\n"
    "                         apart time estimates per target and batch size (docs/SPEC.md,\n"
    "                         Fusion; nothing with --fusion none or explicit groups)\n"
    "  --tune MODE            how kernel parameters (GEMM tiles, stages, ...) are chosen for\n"
    "                         launches no tuning database covers: model (default: the\n"
    "                         analytical model ranks the candidates, its top ones are compiled\n"
    "                         and checked) or default (each kernel's fixed defaults)\n"
    "  --tuning-db FILE       use the measured choices of a tuning database (`hkc tune`); may\n"
    "                         be given several times, the first file that has a launch wins\n"
    "  --tune-verify N        model: candidates compiled and checked per launch (default 3)\n"
    "  --zstd-level N         compression level of code sections, 1..22 (default 19)\n"
    "  --kernel-option NAME=VALUE\n"
    "                         a kernel option, for experiments and A/B runs (repeatable; the\n"
    "                         last of one name wins): recorded in the pack's provenance\n"
    "                         (kernel_options=), and every kernel whose code it changes gets\n"
    "                         another name (and compile-cache key). A forced configuration is\n"
    "                         checked by its variant's tuning rules on each target: an illegal\n"
    "                         one is an error and nothing is written. Options (HKC_* variable):\n"
    "%s"
    "  --host-threads N       host target: the CPU threads tuning-database entries are matched\n"
    "                         for (default: $HK_HOST_THREADS, else the online CPUs)\n"
    "  --sign KEY             sign the artifact with the secret key KEY (hkc keygen; the same\n"
    "                         as hkc sign after the build)\n"
    "  --cache-max-size SIZE  after the build, remove the compile cache's least recently used\n"
    "                         entries until it holds at most SIZE (500M, 2G, ...; as hkc cache\n"
    "                         clean --max-size; default $HKC_CACHE_MAX_SIZE, else no cap)\n"
    "  --json                 a summary of the build as one JSON document on stdout (docs/CLI.md)\n"
    "  -q, --quiet            no summary, no progress\n"
    "  -v, --verbose          progress: a line per item done (tuning candidate, kernel, host\n"
    "                         unit, pack)\n"
    "\n"
    "Progress goes to stderr, by phase (the tuner's candidate compiles per target, each\n"
    "target's kernel compiles, the host unit, the pack), each with its total: on a terminal\n"
    "one line \"[done/total] phase: item\" rewritten in place; otherwise (a log, a pipe) a\n"
    "plain line per phase and the summary.\n"
    "\n"
    "environment: the HKC_* variables above map onto their kernel options (boolean ones: set\n"
    "and not 0 = 1; flags win over them); HKC_CACHE_DIR: the compile cache; HKC_CACHE_MAX_SIZE:\n"
    "its size cap.\n";

static const char k_run_usage[] =
    "usage: hkc run PACK [options]\n"
    "\n"
    "Opens PACK through libhkrt, creates a session for one batch size, fills inputs\n"
    "(random from --seed unless given as .npy) and params (from --weights and --param;\n"
    "every param must be given, unless --random-params), runs the graph and reports the\n"
    "median latency. Outputs are poisoned (NaN) before the first run; a non-finite\n"
    "output element is an error. A batch size between two of the pack's buckets runs the\n"
    "next larger bucket on padded tensors when the pack's batch policy is pad (the\n"
    "default); inputs and outputs are still sized for N.\n"
    "\n"
    "Random values: inputs uniform in [-1, 1); params (only with --random-params, and\n"
    "only those that no --weights or --param gives) of rank >= 2 uniform in\n"
    "[-1/sqrt(d0), 1/sqrt(d0)) with d0 their first dimension (fan-in of a [K, N] weight),\n"
    "1-D ones uniform in [-1, 1). Each tensor's stream depends only on the seed and its\n"
    "name.\n"
    "\n"
    "options:\n"
    "  --target T             run this target (default: the best one for this machine)\n"
    "  --batch N              batch size: a bucket of the pack, or under batch policy pad any\n"
    "                         size up to the largest bucket (default: the smallest bucket)\n"
    "  --seed S               random seed (default 1)\n"
    "  --input NAME=FILE.npy  take an input from a .npy file (f16/f32/f64, exact shape)\n"
    "  --param NAME=FILE.npy  take a param from a .npy file (wins over --weights)\n"
    "  --weights FILE.safetensors | FILE.npz\n"
    "                         take every param the checkpoint names (safetensors: dtype and\n"
    "                         shape must match exactly; .npz: members NAME.npy converted as\n"
    "                         --param does; the format is told by content; docs/WEIGHTS.md);\n"
    "                         over the params a pack built with --weights stores, if any\n"
    "  --weights-map MAP      name map for --weights: lines \"PACK_NAME CHECKPOINT_NAME\"\n"
    "  --random-params        fill params that nothing gives with seeded random numbers\n"
    "                         (without it, hkc run refuses to start and names them)\n"
    "  --save-outputs DIR     write each output as DIR/NAME.npy (float32)\n"
    "  --runs N               timed runs (default 10); --warmup N untimed runs first (default 2)\n"
    "  --json                 the result as one JSON document on stdout (docs/CLI.md)\n"
    "  -q, --quiet            print nothing but errors (the exit status says whether it ran and\n"
    "                         every output was finite)\n"
    "  --profile              then time every launch alone (one warm-up pass, then --repeats\n"
    "                         passes; median per launch) beside its roofline floor on the\n"
    "                         session's GPU target (hkc inspect --plan explains the floor)\n"
    "  --repeats R            passes of --profile (default 20)\n"
    "  --no-pdl               launch every kernel the ordinary way: no programmatic dependent\n"
    "                         launch (PDL) of the kernels the pack marks for it (session option\n"
    "                         no_pdl); when PDL is in use, hkc run says how much\n"
    "  --prefer-ptx           run a CUDA target's PTX (JIT by the driver) wherever it runs, not\n"
    "                         its cubins (session option prefer_ptx; also HK_PREFER_PTX=1); hkc\n"
    "                         run says which code it chose\n"
    "  --trust KEY.pub        trust packs signed by this key (repeatable, up to 16)\n"
    "  --require-signature    refuse a pack that is not signed by a trusted key\n"
    "  --allow-unsigned-native\n"
    "                         run a pack with host code that no trusted key signed (its code\n"
    "                         runs in this process: only for packs you built yourself)\n"
    "\n"
    "A pack with host code is refused unless signed by a --trust key or --allow-unsigned-native\n"
    "is given; a pack whose signature does not verify is always refused (README, Embedding).\n"
    "\n"
    "environment:\n"
    "  HK_LAUNCH=auto|graph|stream  GPU targets: replay one CUDA/HIP graph per run when the\n"
    "                         driver can build it, else launch kernel by kernel with a warning\n"
    "                         (auto, the default); insist on the graph (graph: an error when it\n"
    "                         cannot be built); or launch kernel by kernel (stream)\n"
    "  HK_HOST_THREADS=N      host target: threads sharing each launch (default: the online CPUs)\n"
    "  HK_PREFER_PTX=0|1      1: as --prefer-ptx\n";

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

static const char k_keygen_usage[] =
    "usage: hkc keygen -o KEY [-q]\n"
    "\n"
    "Creates an Ed25519 key pair for signing packs: KEY, the secret key (mode 0600), and\n"
    "KEY.pub, the public key that hkc run --trust and applications (hk_public_key_parse)\n"
    "take. Prints the key id (16 hex digits, as hkc inspect shows it). Never overwrites a file.\n";

static const char k_sign_usage[] =
    "usage: hkc sign PACK --key KEY [-o OUT] [-q]\n"
    "\n"
    "Signs PACK with the secret key KEY (hkc keygen): adds a SIGNATURE section (replacing an\n"
    "existing one) covering every other byte of the pack, and writes the result atomically to\n"
    "OUT (default: PACK itself). docs/FORMAT.md, Signatures.\n";

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

/* The options of every command (hkc_cli_next takes -q, -v, -h and --json). */
#define COMMON_LONG_OPTIONS                                                                          \
  {"quiet", no_argument, NULL, 'q'}, {"verbose", no_argument, NULL, 'v'}, {"help", no_argument, NULL, 'h'}
#define JSON_LONG_OPTION {"json", no_argument, NULL, HKC_OPT_JSON}
/* The help's last lines: the options every command takes, and -v / --json where the command
 * has them (docs/CLI.md, "Conventions"). */
static void print_common_help(int verbose, int json) {
  printf("\ncommon options: -q/--quiet, -h/--help%s%s.\n"
         "Options take their value as `--opt VALUE` or `--opt=VALUE`.\n",
         verbose ? ", -v/--verbose (a progress line per item done)" : "",
         json ? ", --json (one document on stdout: docs/CLI.md)" : "");
}

/* Long-only options of the commands: getopt_long's values above the short options'. */
enum {
  OPT_TUNE = HKC_OPT_BASE, OPT_TUNING_DB, OPT_TUNE_VERIFY, OPT_MERGE_TARGETS, OPT_ZSTD_LEVEL, OPT_COMPILE_TIMEOUT,
  OPT_NO_CACHE, OPT_WERROR_SPILLS, OPT_NO_PDL, OPT_NO_PTX, OPT_PTX, OPT_SIGN, OPT_FUSION, OPT_FUSION_REPORT, OPT_KERNEL_OPTION,
  OPT_HOST_THREADS, OPT_CACHE_MAX_SIZE, OPT_MERGE, OPT_REPORT, OPT_TOP, OPT_RUNS, OPT_WARMUP, OPT_DRY_RUN,
  OPT_BATCH, OPT_SEED, OPT_INPUT, OPT_PARAM, OPT_SAVE_OUTPUTS, OPT_REPEATS, OPT_TRUST, OPT_WEIGHTS,
  OPT_WEIGHTS_MAP, OPT_PROFILE, OPT_PREFER_PTX, OPT_REQUIRE_SIGNATURE, OPT_ALLOW_UNSIGNED_NATIVE,
  OPT_RANDOM_PARAMS, OPT_PLAN, OPT_DISASM, OPT_KEY, OPT_NO_PROBE, OPT_IDS, OPT_STOP, OPT_TEMPERATURE, OPT_TOP_K, OPT_TOP_P, OPT_SAMPLE_SEED,
};

/* AMD toolchain calls run in worker processes, this binary re-executed (rtc_worker.h says
 * why); at most `jobs` of them (0: one per core), started when the first call needs one. */
#define DEFAULT_COMPILE_TIMEOUT_S 600
static int compile_timeout = DEFAULT_COMPILE_TIMEOUT_S;

static int start_workers(int jobs, int timeout_s) {
  if (jobs <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    jobs = n > 0 ? (int)n : 1;
  }
  if (hkc_amd_workers_start("/proc/self/exe", jobs, timeout_s) != 0) {
    fprintf(stderr, "hkc: out of memory starting the compile workers\n");
    return -1;
  }
  return 0;
}

/* ---- kernel options ------------------------------------------------------------------------ */
/* The kernel options' lines of `hkc build --help`. */
static void print_build_usage(void) {
  hkc_strbuf_t list = {0}; /* grows with the table: every option's line, however long */
  const char *name, *env, *help;
  for (size_t i = 0; hkc_kernel_options_describe(i, &name, &env, &help); i++) {
    static const char indent[] = "                           ";
    hkc_sb_append(&list, indent, sizeof indent - 1);
    hkc_sb_append(&list, name, strlen(name));
    hkc_sb_append(&list, " (", 2);
    hkc_sb_append(&list, env, strlen(env));
    hkc_sb_append(&list, "): ", 3);
    hkc_sb_append(&list, help, strlen(help));
    hkc_sb_append(&list, "\n", 1);
  }
  printf(k_build_usage, list.data && !list.failed ? list.data : "(out of memory listing the kernel options)\n");
  free(list.data);
  print_common_help(1, 1);
}

/* HK_HOST_THREADS (the loader's variable) as the default of --host-threads; 0 if unset or
 * not a positive count (the loader reports a bad value when it runs). */
static int host_threads_from_env(void) {
  const char *e = getenv("HK_HOST_THREADS");
  char *end;
  long n = e && *e ? strtol(e, &end, 10) : 0;
  return e && *e && !*end && n > 0 && n < 1 << 20 ? (int)n : 0;
}

/* --kernel-option VALUE and --host-threads N, shared by build and tune (c: getopt's value).
 * 0, or -1 after a usage error. */
static int kernel_option_value(hkc_cli_t *cli, int c, const char *v, hkc_kernel_options_t *ko, int *host_threads) {
  if (c == OPT_HOST_THREADS) {
    long long n;
    if (hkc_cli_count(cli, "--host-threads", v, 1, 1 << 20, &n) != 0) return -1;
    *host_threads = (int)n;
    return 0;
  }
  char err[1024];
  if (hkc_kernel_options_set_arg(ko, v, err, sizeof err) != 0) {
    hkc_cli_usage(cli, "--kernel-option %s", err);
    return -1;
  }
  return 0;
}

/* The compile cache's size cap: --cache-max-size SIZE, else $HKC_CACHE_MAX_SIZE (hkc cache
 * clean --max-size after the command). 0, or -1 after a usage error; *out UINT64_MAX: none. */
static int cache_cap_from_env(hkc_cli_t *cli, uint64_t *out) {
  *out = UINT64_MAX;
  const char *e = getenv("HKC_CACHE_MAX_SIZE");
  if (e && *e && hkc_cli_size(e, out) != 0) {
    hkc_cli_usage(cli, "HKC_CACHE_MAX_SIZE is '%s'; expected a size such as 500M or 2G", e);
    return -1;
  }
  return 0;
}

/* Applies the cap after a command that wrote to the cache. Never changes the exit status. */
static void apply_cache_cap(const hkc_cli_t *cli, uint64_t cap) {
  if (cap == UINT64_MAX) return;
  hkc_cache_stats_t removed;
  if (hkc_cache_trim(NULL, cap, &removed) != 0)
    fprintf(stderr, "hkc %s: warning: compile cache size cap: %s\n", cli->cmd, strerror(errno));
  else if (cli->verbose && removed.entries)
    fprintf(stderr, "hkc %s: compile cache over its cap: removed %llu entr%s (%llu bytes)\n", cli->cmd,
            (unsigned long long)removed.entries, removed.entries == 1 ? "y" : "ies",
            (unsigned long long)removed.bytes);
}

/* ---- build ---------------------------------------------------------------------------- */
static const char *const k_target_kinds[] = {"host", "hip", "cuda"};

/* hkc build --json: the summary of the pack just written, read back through the verifying
 * reader (metadata only), and the build's counts. docs/CLI.md, "build". 0 / -1. */
static int build_json(const hkc_build_options_t *opt, const hkc_build_stats_t *stats) {
  hk_pack_open_options_t o = {.struct_size = sizeof o, .metadata_only = 1};
  hk_pack_t *pack = NULL;
  if (hkc_tool_open_pack("build", opt->out_path, &o, &pack) != HK_OK) return -1;
  const hk_pack_view_t *v = hk_pack_view(pack);
  cJSON *root = hkc_json_begin("build");
  if (!root) {
    hk_pack_destroy(pack);
    return -1;
  }
  cJSON_AddStringToObject(root, "spec", opt->spec_path);
  cJSON_AddStringToObject(root, "output", opt->out_path);
  cJSON_AddStringToObject(root, "name", hk_pack_string(v, v->manifest->name));
  cJSON_AddNumberToObject(root, "bytes", (double)v->size);
  cJSON_AddBoolToObject(root, "signed", hk_pack_signature(pack, NULL) != HK_SIGNATURE_NONE);
  if (v->weight_count) {
    cJSON *jw = cJSON_AddObjectToObject(root, "weights");
    cJSON_AddNumberToObject(jw, "params", v->weight_count);
    cJSON_AddNumberToObject(jw, "bytes", (double)v->weights_size);
  } else {
    cJSON_AddNullToObject(root, "weights");
  }
  cJSON_AddNumberToObject(root, "seconds", stats->seconds);
  cJSON *batches = cJSON_AddArrayToObject(root, "batch_sizes");
  for (uint32_t b = 0; b < v->manifest->batch_count; b++)
    cJSON_AddItemToArray(batches, cJSON_CreateNumber((double)v->manifest->batch_sizes[b]));
  cJSON *k = cJSON_AddObjectToObject(root, "kernels");
  cJSON_AddNumberToObject(k, "gpu", (double)stats->gpu_kernels);
  cJSON_AddNumberToObject(k, "cached", (double)stats->cached);
  cJSON_AddNumberToObject(k, "shared_cached", (double)stats->shared_cached);
  cJSON_AddNumberToObject(k, "from_tuning", (double)stats->from_tuning);
  cJSON_AddNumberToObject(k, "compiled", (double)stats->compiled);
  cJSON_AddNumberToObject(k, "ptx_compiles", (double)stats->ptx_compiles);
  cJSON_AddNumberToObject(k, "ptx_cached", (double)stats->ptx_cached);
  cJSON_AddNumberToObject(k, "threads", stats->threads);
  cJSON *tu = cJSON_AddObjectToObject(root, "tuning");
  cJSON_AddNumberToObject(tu, "candidates", (double)stats->tune_compiles);
  cJSON_AddNumberToObject(tu, "cached", (double)stats->tune_cached);
  cJSON_AddNumberToObject(tu, "shared_cached", (double)stats->tune_shared_cached);
  cJSON_AddNumberToObject(tu, "compiled", (double)(stats->tune_compiles - stats->tune_cached - stats->tune_failed));
  cJSON_AddNumberToObject(tu, "failed", (double)stats->tune_failed);
  cJSON_AddNumberToObject(tu, "threads", stats->tune_threads);
  cJSON *targets = cJSON_AddArrayToObject(root, "targets");
  for (uint32_t t = 0; t < v->target_count; t++) {
    const hk_target_rec_t *tr = &v->targets[t];
    cJSON *jt = cJSON_CreateObject();
    cJSON_AddItemToArray(targets, jt);
    cJSON_AddStringToObject(jt, "name", hk_pack_string(v, tr->name));
    cJSON_AddStringToObject(jt, "kind", k_target_kinds[tr->kind]);
    cJSON_AddNumberToObject(jt, "kernels", tr->kernel_count);
    cJSON_AddNumberToObject(jt, "code_bytes", (double)v->sections[tr->code_section].raw_size);
    cJSON_AddBoolToObject(jt, "ptx", t < HK_MAX_TARGETS && v->ptx_section[t] != UINT32_MAX);
    cJSON *graphs = cJSON_AddArrayToObject(jt, "graphs");
    for (uint32_t g = tr->graph_first; g < tr->graph_first + tr->graph_count; g++) {
      cJSON *jg = cJSON_CreateObject();
      cJSON_AddItemToArray(graphs, jg);
      cJSON_AddNumberToObject(jg, "batch", (double)v->graphs[g].batch);
      cJSON_AddNumberToObject(jg, "nodes", v->graphs[g].node_count);
      cJSON_AddNumberToObject(jg, "workspace_bytes", (double)v->graphs[g].workspace_bytes);
    }
  }
  hk_pack_destroy(pack);
  return hkc_json_end(root, stdout);
}

static hkc_weights_format_t weights_file_format(const char *path);

/* hkc build --weights: the checkpoint mapped read-only (the writer copies each param once, into
 * the pack, so a large checkpoint is not also held on the heap) and its name map. */
typedef struct build_weights {
  hk_weights_t *weights;
  void *map_base; /* the file's mapping; NULL: weights read the file (an empty one) */
  size_t map_size;
  hkc_weights_map_t map;
} build_weights_t;

static void build_weights_close(build_weights_t *bw) {
  hk_weights_destroy(bw->weights);
  if (bw->map_base) munmap(bw->map_base, bw->map_size);
  hkc_weights_map_free(&bw->map);
  memset(bw, 0, sizeof *bw);
}

/* Opens --weights FILE (safetensors only; an .npz is refused with what to do) and --weights-map.
 * 0, or -1 printed. */
static int build_weights_open(const char *path, const char *map_path, build_weights_t *bw) {
  if (map_path && hkc_weights_map_read(map_path, &bw->map) != 0) {
    fprintf(stderr, "hkc build: no usable --weights-map\n");
    return -1;
  }
  if (weights_file_format(path) == HKC_WEIGHTS_NPZ) {
    fprintf(stderr, "hkc build: --weights %s: an .npz archive; hkc build stores safetensors checkpoints only (hkc "
                    "run --weights reads .npz)\n", path);
    return -1;
  }
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  const char *why = fd < 0 || fstat(fd, &st) != 0 ? strerror(errno)
                    : !S_ISREG(st.st_mode)           ? "not a regular file"
                                                     : NULL;
  if (why) {
    fprintf(stderr, "hkc build: --weights %s: %s\n", path, why);
    if (fd >= 0) close(fd);
    return -1;
  }
  hk_status_t hs;
  if (st.st_size > 0 && (uint64_t)st.st_size <= SIZE_MAX) {
    bw->map_size = (size_t)st.st_size;
    bw->map_base = mmap(NULL, bw->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (bw->map_base == MAP_FAILED) {
      fprintf(stderr, "hkc build: --weights %s: cannot map it: %s\n", path, strerror(errno));
      bw->map_base = NULL;
      close(fd);
      return -1;
    }
    hs = hk_weights_open_memory(bw->map_base, bw->map_size, NULL, &bw->weights);
  } else {
    hs = hk_weights_open_file(path, NULL, &bw->weights); /* says what is wrong with an empty file */
  }
  close(fd);
  if (hs != HK_OK) {
    fprintf(stderr, "hkc build: --weights %s: %s\n", path, hk_last_error());
    return -1;
  }
  return 0;
}

static int cmd_build(int argc, char **argv) {
  static const struct option longopts[] = {
      {"output", required_argument, NULL, 'o'}, {"target", required_argument, NULL, 't'},
      {"jobs", required_argument, NULL, 'j'}, {"tune", required_argument, NULL, OPT_TUNE},
      {"tuning-db", required_argument, NULL, OPT_TUNING_DB}, {"tune-verify", required_argument, NULL, OPT_TUNE_VERIFY},
      {"merge-targets", required_argument, NULL, OPT_MERGE_TARGETS},
      {"zstd-level", required_argument, NULL, OPT_ZSTD_LEVEL},
      {"compile-timeout", required_argument, NULL, OPT_COMPILE_TIMEOUT},
      {"no-cache", no_argument, NULL, OPT_NO_CACHE}, {"Werror-spills", no_argument, NULL, OPT_WERROR_SPILLS},
      {"no-pdl", no_argument, NULL, OPT_NO_PDL}, {"no-ptx", no_argument, NULL, OPT_NO_PTX},
      {"ptx", required_argument, NULL, OPT_PTX}, {"sign", required_argument, NULL, OPT_SIGN},
      {"fusion", required_argument, NULL, OPT_FUSION}, {"fusion-report", no_argument, NULL, OPT_FUSION_REPORT},
      {"kernel-option", required_argument, NULL, OPT_KERNEL_OPTION},
      {"host-threads", required_argument, NULL, OPT_HOST_THREADS},
      {"weights", required_argument, NULL, OPT_WEIGHTS}, {"weights-map", required_argument, NULL, OPT_WEIGHTS_MAP},
      {"cache-max-size", required_argument, NULL, OPT_CACHE_MAX_SIZE}, JSON_LONG_OPTION, COMMON_LONG_OPTIONS,
      {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "build", "hkc build SPEC -o OUT [options]", print_build_usage, 1);
  hkc_build_options_t opt = {.fusion = -1};
  /* HKC_PTX=LIST or none: --ptx LIST / --no-ptx from the environment (the flags still win) */
  const char *ptx_env = getenv("HKC_PTX");
  if (ptx_env && *ptx_env) opt.ptx = strcmp(ptx_env, "none") == 0 ? "" : ptx_env;
  hkc_kernel_options_t ko = {0};
  if (hkc_kernel_options_from_env(&ko, "hkc build") != 0) return 2;
  opt.host_threads = host_threads_from_env();
  uint64_t cache_cap;
  if (cache_cap_from_env(&cli, &cache_cap) != 0) return cli.rc;
  const char *dbs[64], *sign_key = NULL, *weights_path = NULL, *map_path = NULL;
  size_t n_dbs = 0;
  long long v;
  int c;
  while ((c = hkc_cli_next(&cli, argc, argv, "o:t:j:", longopts)) != -1) {
    switch (c) {
    case HKC_CLI_STOP: return cli.rc;
    case OPT_KERNEL_OPTION:
    case OPT_HOST_THREADS:
      if (kernel_option_value(&cli, c, optarg, &ko, &opt.host_threads) != 0) return cli.rc;
      break;
    case OPT_TUNE:
      if (strcmp(optarg, "model") == 0) opt.tune_mode = HKC_TUNE_MODEL;
      else if (strcmp(optarg, "default") == 0) opt.tune_mode = HKC_TUNE_DEFAULT;
      else return hkc_cli_usage(&cli, "--tune expects model or default, got '%s'", optarg), cli.rc;
      break;
    case OPT_TUNING_DB:
      if (n_dbs == sizeof dbs / sizeof *dbs)
        return hkc_cli_usage(&cli, "more than %zu --tuning-db files", sizeof dbs / sizeof *dbs), cli.rc;
      dbs[n_dbs++] = optarg;
      break;
    case OPT_TUNE_VERIFY:
      if (hkc_cli_count(&cli, "--tune-verify", optarg, 1, 64, &v) != 0) return cli.rc;
      opt.tune_verify = (int)v;
      break;
    case 'o': opt.out_path = optarg; break;
    case 't': opt.targets = optarg; break;
    case OPT_MERGE_TARGETS: opt.merge_targets = optarg; break;
    case OPT_ZSTD_LEVEL:
      if (hkc_cli_count(&cli, "--zstd-level", optarg, 1, 22, &v) != 0) return cli.rc;
      opt.compression_level = (int)v;
      break;
    case 'j':
      if (hkc_cli_count(&cli, "--jobs", optarg, 1, 1024, &v) != 0) return cli.rc;
      opt.jobs = (int)v;
      break;
    case OPT_COMPILE_TIMEOUT:
      if (hkc_cli_count(&cli, "--compile-timeout", optarg, 1, 86400, &v) != 0) return cli.rc;
      compile_timeout = (int)v;
      break;
    case OPT_CACHE_MAX_SIZE:
      if (hkc_cli_size(optarg, &cache_cap) != 0)
        return hkc_cli_usage(&cli, "--cache-max-size expects a size such as 500M or 2G, got '%s'", optarg), cli.rc;
      break;
    case OPT_NO_CACHE: opt.no_cache = 1; break;
    case OPT_WERROR_SPILLS: opt.werror_spills = 1; break;
    case OPT_NO_PDL: opt.no_pdl = 1; break;
    case OPT_NO_PTX: opt.ptx = ""; break;
    case OPT_PTX: opt.ptx = optarg; break;
    case OPT_SIGN: sign_key = optarg; break;
    case OPT_WEIGHTS: weights_path = optarg; break;
    case OPT_WEIGHTS_MAP: map_path = optarg; break;
    case OPT_FUSION:
      if (strcmp(optarg, "auto") == 0) opt.fusion = HKC_FUSION_AUTO;
      else if (strcmp(optarg, "none") == 0) opt.fusion = HKC_FUSION_NONE;
      else return hkc_cli_usage(&cli, "--fusion expects auto or none, got '%s'", optarg), cli.rc;
      break;
    case OPT_FUSION_REPORT: opt.fusion_report = 1; break;
    default: return hkc_cli_usage(&cli, "unhandled option"), cli.rc;
    }
  }
  if (optind < argc) opt.spec_path = argv[optind++];
  if (optind < argc) return hkc_cli_usage(&cli, "more than one spec given (%s, %s)", opt.spec_path, argv[optind]), 2;
  if (!opt.spec_path || !opt.out_path)
    return hkc_cli_usage(&cli, "%s", !opt.spec_path ? "no spec given" : "no output given (-o OUT)"), 2;
  if (map_path && !weights_path) return hkc_cli_usage(&cli, "--weights-map needs --weights"), 2;
  /* the checkpoint and its name map, before compiling: a bad file fails at once */
  build_weights_t bw = {0};
  if (weights_path && build_weights_open(weights_path, map_path, &bw) != 0) {
    build_weights_close(&bw);
    return 1;
  }
  opt.weights = bw.weights;
  opt.weights_names = bw.map.names;
  opt.n_weights_names = bw.map.count;
  opt.weights_label = weights_path;
  uint8_t seed[HKC_KEY_SEED_BYTES];
  if (sign_key) { /* before compiling: a bad key fails at once */
    if (hkc_key_load(sign_key, seed) != 0) {
      build_weights_close(&bw);
      return 1;
    }
    opt.sign_seed = seed;
  }
  hkc_build_stats_t stats = {0};
  opt.tuning_dbs = dbs;
  opt.n_tuning_dbs = n_dbs;
  opt.kernel_options = &ko;
  opt.quiet = cli.quiet || cli.json; /* the human summary; with --json stdout holds the document only */
  opt.progress = hkc_cli_progress(&cli);
  opt.out_stats = &stats;
  int rc = start_workers(opt.jobs, compile_timeout) != 0 || hkc_build(&opt) != 0 ? 1 : 0;
  hkc_key_wipe(seed, sizeof seed);
  build_weights_close(&bw);
  if (!opt.no_cache) apply_cache_cap(&cli, cache_cap);
  if (rc == 0 && cli.json && build_json(&opt, &stats) != 0) rc = 1;
  return rc;
}

/* ---- tune ------------------------------------------------------------------------------- */
static void help_tune(void) {
  fputs(k_tune_usage, stdout);
  print_common_help(0, 1);
}

static int cmd_tune(int argc, char **argv) {
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
  opt.host_threads = host_threads_from_env();
  uint64_t cache_cap;
  if (cache_cap_from_env(&cli, &cache_cap) != 0) return cli.rc;
  int merging = 0, c;
  long long v;
  while ((c = hkc_cli_next(&cli, argc, argv, "o:t:j:", longopts)) != -1) {
    switch (c) {
    case HKC_CLI_STOP: return cli.rc;
    case OPT_KERNEL_OPTION:
    case OPT_HOST_THREADS:
      if (kernel_option_value(&cli, c, optarg, &ko, &opt.host_threads) != 0) return cli.rc;
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
  if (start_workers(opt.jobs, compile_timeout) != 0) return 1;
  const int rc = hkc_tune_run(&opt) == 0 ? 0 : 1;
  if (!opt.no_cache) apply_cache_cap(&cli, cache_cap);
  return rc;
}

/* ---- run ------------------------------------------------------------------------------- */
typedef struct {
  const char *name;
  const char *path;
} named_file_t;

/* hkc_load_elem / hkc_store_elem take either enum: the values must agree. */
_Static_assert(HK_ELEMENT_F32 == (int)HK_DTYPE_F32 && HK_ELEMENT_F16 == (int)HK_DTYPE_F16 &&
                   HK_ELEMENT_BF16 == (int)HK_DTYPE_BF16 && HK_ELEMENT_I32 == (int)HK_DTYPE_I32,
               "hk_element_type_t and hk_dtype_t differ");


static size_t info_count(const hk_tensor_info_t *info) {
  size_t n = 1;
  for (uint32_t d = 0; d < info->rank; d++) n *= (size_t)info->dims[d];
  return n;
}

static void format_shape(const hk_tensor_info_t *info, char *out, size_t size) {
  int n = snprintf(out, size, "[");
  for (uint32_t d = 0; d < info->rank && n > 0 && (size_t)n < size; d++)
    n += snprintf(out + n, size - (size_t)n, "%s%lld", d ? ", " : "", (long long)info->dims[d]);
  if (n > 0 && (size_t)n < size) snprintf(out + n, size - (size_t)n, "]");
}

/* Fills a tensor from a .npy file (exact shape; an i32 tensor needs an integer file) or
 * from the seeded generator (i32: integers in [0, HKC_RUN_RANDOM_I32)). */
#define HKC_RUN_RANDOM_I32 100 /* random ids and lengths: small, kernels clamp them anyway */
static int fill_tensor(const hk_tensor_info_t *info, void *buf, const char *npy_path, uint64_t seed) {
  size_t n = info_count(info);
  if (npy_path) {
    hkc_npy_t npy;
    if (hkc_npy_read(npy_path, &npy) != 0) return -1;
    int same = npy.rank == info->rank;
    for (uint32_t d = 0; same && d < info->rank; d++) same = npy.dims[d] == info->dims[d];
    if (!same) {
      char want[128];
      format_shape(info, want, sizeof want);
      fprintf(stderr, "hkc run: %s: shape does not match tensor %s %s\n", npy_path, info->name, want);
      hkc_npy_free(&npy);
      return -1;
    }
    if (info->element_type == HK_ELEMENT_I32) {
      if (!npy.ints) {
        fprintf(stderr, "hkc run: %s: tensor %s is i32: give an integer .npy (int32 or int64)\n", npy_path, info->name);
        hkc_npy_free(&npy);
        return -1;
      }
      memcpy(buf, npy.ints, n * sizeof(int32_t));
      hkc_npy_free(&npy);
      return 0;
    }
    for (size_t i = 0; i < n; i++) hkc_store_elem(buf, (int)info->element_type, i, npy.data[i]);
    hkc_npy_free(&npy);
    return 0;
  }
  uint64_t s = seed ^ hkc_hash64(info->name, strlen(info->name));
  double scale = 1.0;
  if (info->role == HK_TENSOR_PARAM && info->rank >= 2) scale = 1.0 / sqrt((double)info->dims[0]);
  if (info->element_type == HK_ELEMENT_I32) {
    for (size_t i = 0; i < n; i++) ((int32_t *)buf)[i] = (int32_t)(hkc_splitmix64(&s) % HKC_RUN_RANDOM_I32);
    return 0;
  }
  for (size_t i = 0; i < n; i++) hkc_store_elem(buf, (int)info->element_type, i, (float)hkc_uniform_pm(&s, scale));
  return 0;
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static const char *find_named(const named_file_t *files, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(files[i].name, name) == 0) return files[i].path;
  return NULL;
}

/* --profile: every launch timed alone (hk_session_profile) beside its roofline floor on
 * the session's target when the target table knows it; printed, or with json (hkc run
 * --json's document) added to it as "profile". 0 / -1 (error printed). */
static int print_profile(hk_session_t *session, uint32_t repeats, double graph_us, cJSON *json) {
  uint32_t n = hk_session_launch_count(session);
  double *us = calloc(n ? n : 1, sizeof *us);
  if (!us) return -1;
  if (hk_session_profile(session, NULL, repeats, us) != HK_OK) {
    fprintf(stderr, "hkc run: --profile: %s\n", hk_last_error());
    free(us);
    return -1;
  }
  const hkc_gpu_arch_t *arch = hkc_gpu_arch_find(hk_session_target(session)); /* NULL on host */
  int w_nodes = 5, w_kernel = 6;
  for (uint32_t i = 0; i < n; i++) {
    hk_launch_info_t li;
    hk_session_launch_info(session, i, &li);
    if ((int)strlen(li.nodes) > w_nodes) w_nodes = (int)strlen(li.nodes);
    if ((int)strlen(li.kernel) > w_kernel) w_kernel = (int)strlen(li.kernel);
  }
  cJSON *jp = NULL, *jl = NULL;
  if (json) {
    jp = cJSON_AddObjectToObject(json, "profile");
    cJSON_AddNumberToObject(jp, "repeats", repeats);
    if (arch) cJSON_AddStringToObject(jp, "floor_target", arch->name);
    else cJSON_AddNullToObject(jp, "floor_target");
    jl = cJSON_AddArrayToObject(jp, "launches");
  } else {
    printf("profile: each launch alone, median of %u pass(es) after one warm-up pass", repeats);
    if (arch)
      printf("; floor on %s (%s: %.1f GB/s, %.1f TFLOP/s f16 matrix)\n", arch->name, arch->product, arch->hbm_gbps,
             arch->matrix_tflops_f16);
    else
      printf("; no floor (%s is not a GPU target of hkc's table)\n", hk_session_target(session));
    printf("  %3s  %-*s  %-*s  %11s  %10s  %9s  %8s  %7s\n", "#", w_nodes, "nodes", w_kernel, "kernel", "median us",
           "floor us", "GB/s", "TFLOP/s", "floor%");
  }
  double total = 0, total_floor = 0;
  for (uint32_t i = 0; i < n; i++) {
    hk_launch_info_t li;
    hk_session_launch_info(session, i, &li);
    char floor_s[16] = "-", pct_s[16] = "-", gbs[16] = "-", tfs[16] = "-";
    double fl = -1;
    if (li.bytes) snprintf(gbs, sizeof gbs, "%.1f", (double)li.bytes / us[i] * 1e-3);
    if (li.flops) snprintf(tfs, sizeof tfs, "%.2f", (double)li.flops / us[i] * 1e-6);
    if (arch && li.bytes) {
      double mem = (double)li.bytes / (arch->hbm_gbps * 1e3);
      double math = li.matrix ? (double)li.flops / (arch->matrix_tflops_f16 * 1e6) : 0.0;
      fl = mem > math ? mem : math;
      total_floor += fl;
      snprintf(floor_s, sizeof floor_s, "%.3f", fl);
      snprintf(pct_s, sizeof pct_s, "%.0f%%", fl / us[i] * 100.0);
    }
    total += us[i];
    if (jl) {
      cJSON *j = cJSON_CreateObject();
      cJSON_AddItemToArray(jl, j);
      cJSON_AddNumberToObject(j, "index", i);
      cJSON_AddStringToObject(j, "nodes", li.nodes);
      cJSON_AddStringToObject(j, "kernel", li.kernel);
      cJSON_AddNumberToObject(j, "median_us", us[i]);
      if (fl >= 0) cJSON_AddNumberToObject(j, "floor_us", fl);
      else cJSON_AddNullToObject(j, "floor_us");
      cJSON_AddNumberToObject(j, "bytes", (double)li.bytes);
      cJSON_AddNumberToObject(j, "flops", (double)li.flops);
      cJSON_AddBoolToObject(j, "matrix", li.matrix != 0);
    } else {
      printf("  %3u  %-*s  %-*s  %11.3f  %10s  %9s  %8s  %7s\n", i, w_nodes, li.nodes, w_kernel, li.kernel, us[i],
             floor_s, gbs, tfs, pct_s);
    }
  }
  if (jp) {
    cJSON_AddNumberToObject(jp, "sum_us", total);
    if (total_floor > 0) cJSON_AddNumberToObject(jp, "floor_sum_us", total_floor);
    else cJSON_AddNullToObject(jp, "floor_sum_us");
    cJSON_AddNumberToObject(jp, "graph_us", graph_us);
    free(us);
    return 0;
  }
  printf("  sum of launches %.3f us", total);
  if (total_floor > 0) printf(", floor %.3f us (%.0f%% of floor)", total_floor, total_floor / total * 100.0);
  printf("; whole graph (hk_session_run, median) %.3f us\n", graph_us);
  /* the bubbles: the graph's time that no launch accounts for (launch gaps, prologues
   * waiting on their predecessor); negative when launches overlap (PDL) */
  printf("  bubbles: whole graph - sum of launches = %.3f us (%.0f%% of the graph)\n", graph_us - total,
         graph_us > 0 ? (graph_us - total) / graph_us * 100.0 : 0.0);
  printf("  floor%%: floor / measured (100%% = at the roofline). GB/s and TFLOP/s: the compiler's bytes and\n"
         "  FLOPs over the measured time.\n");
  free(us);
  return 0;
}

/* The documented environment variables of hkc run as session options: HK_LAUNCH
 * (auto|graph|stream) and HK_HOST_THREADS (a thread count, 0 = the online CPUs). 0, or -1
 * with the problem printed. */
static int run_options_from_env(hk_session_options_t *so) {
  const char *e = getenv("HK_LAUNCH");
  if (e && *e) {
    if (strcmp(e, "auto") == 0) so->launch_mode = HK_LAUNCH_MODE_AUTO;
    else if (strcmp(e, "graph") == 0) so->launch_mode = HK_LAUNCH_MODE_GRAPH;
    else if (strcmp(e, "stream") == 0) so->launch_mode = HK_LAUNCH_MODE_STREAM;
    else {
      fprintf(stderr, "hkc run: HK_LAUNCH is '%s'; expected auto, graph or stream\n", e);
      return -1;
    }
  }
  e = getenv("HK_HOST_THREADS");
  if (e && *e) {
    char *end;
    long long n = strtoll(e, &end, 10);
    if (*end || n < 0 || n > UINT32_MAX) {
      fprintf(stderr, "hkc run: HK_HOST_THREADS is '%s'; expected a thread count (0: the online CPUs)\n", e);
      return -1;
    }
    so->host_threads = (uint32_t)n;
  }
  e = getenv("HK_PREFER_PTX");
  if (e && *e) {
    if (strcmp(e, "0") != 0 && strcmp(e, "1") != 0) {
      fprintf(stderr, "hkc run: HK_PREFER_PTX is '%s'; expected 0 or 1\n", e);
      return -1;
    }
    so->prefer_ptx = e[0] == '1';
  }
  return 0;
}

/* The trust options of run and inspect: --trust KEY.pub (repeatable). */
#define MAX_TRUSTED_KEYS 16
typedef struct trust_opts {
  uint8_t keys[MAX_TRUSTED_KEYS][HK_PUBLIC_KEY_BYTES];
  uint32_t n;
} trust_opts_t;

/* Reads one --trust value into t. 0, or 2 (usage error, printed). */
static int add_trusted_key(const char *cmd, trust_opts_t *t, const char *path) {
  if (t->n >= MAX_TRUSTED_KEYS) {
    fprintf(stderr, "hkc %s: at most %d --trust keys\n", cmd, MAX_TRUSTED_KEYS);
    return 2;
  }
  if (hkc_public_key_load(path, t->keys[t->n]) != 0) return 2;
  t->n++;
  return 0;
}

/* The format of a --weights file from its first bytes (hkc_weights_format); a file that
 * cannot be read here is left to the reader its extension names, which says why. */
static hkc_weights_format_t weights_file_format(const char *path) {
  unsigned char head[16];
  size_t n = 0;
  FILE *f = hkc_input_check(path, UINT64_MAX) == 0 ? fopen(path, "rb") : NULL; /* never a FIFO */
  if (!f) return hkc_weights_format(head, 0, path) == HKC_WEIGHTS_NPZ ? HKC_WEIGHTS_NPZ : HKC_WEIGHTS_SAFETENSORS;
  n = fread(head, 1, sizeof head, f);
  fclose(f);
  return hkc_weights_format(head, n, path);
}

/* An .npz for --weights: the members the session's params take, as a safetensors image in
 * *out_image (freed by the caller after the weights) opened as *out_weights; *out_members:
 * the archive's member count. 0 / -1 (printed). */
static int open_npz_weights(hk_session_t *session, const char *path, const hkc_weights_map_t *map,
                            hk_weights_t **out_weights, void **out_image, uint32_t *out_members) {
  hkc_npz_t *npz;
  if (hkc_npz_open_file(path, &npz) != 0) return -1;
  size_t size;
  int rc = hkc_npz_checkpoint(npz, session, map, out_image, &size);
  *out_members = hkc_npz_count(npz);
  hkc_npz_destroy(npz);
  if (rc != 0) return -1;
  if (hk_weights_open_memory(*out_image, size, NULL, out_weights) != HK_OK) {
    fprintf(stderr, "hkc run: --weights %s: %s\n", path, hk_last_error());
    return -1;
  }
  return 0;
}

/* --weights FILE [--weights-map MAP]: opens the checkpoint (safetensors, or an .npz: the
 * format told by content) and binds every param it gives (hk_session_bind_weights).
 * *out_weights, *out_image (an .npz's members as safetensors) and *map stay with the caller,
 * who destroys the weights after the session and the image after the weights. 0, or -1 with
 * the problem printed. */
static int bind_weights_file(hk_session_t *session, const char *path, const char *map_path, hk_weights_t **out_weights,
                             void **out_image, hkc_weights_map_t *map, int quiet, cJSON *json) {
  if (map_path && hkc_weights_map_read(map_path, map) != 0) {
    fprintf(stderr, "hkc run: no usable --weights-map\n");
    return -1;
  }
  const hkc_weights_format_t format = weights_file_format(path);
  uint32_t file_tensors = 0;
  if (format == HKC_WEIGHTS_NPZ) {
    if (open_npz_weights(session, path, map, out_weights, out_image, &file_tensors) != 0) return -1;
  } else if (format == HKC_WEIGHTS_SAFETENSORS) {
    if (hk_weights_open_file(path, NULL, out_weights) != HK_OK) {
      fprintf(stderr, "hkc run: --weights: %s\n", hk_last_error());
      return -1;
    }
    file_tensors = hk_weights_count(*out_weights);
  } else {
    fprintf(stderr, "hkc run: --weights %s: neither a safetensors checkpoint (a u64 header length, then a JSON "
                    "object) nor an .npz archive (a zip of NAME.npy files, starting PK\\3\\4)\n", path);
    return -1;
  }
  hk_bind_weights_options_t bo = {.struct_size = sizeof bo, .names = map->names, .name_count = map->count};
  uint32_t bound = 0, params = 0;
  if (hk_session_bind_weights(session, *out_weights, &bo, &bound) != HK_OK) {
    fprintf(stderr, "hkc run: --weights %s: %s\n", path, hk_last_error());
    return -1;
  }
  for (uint32_t t = 0; t < hk_session_tensor_count(session); t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(session, t, &info);
    params += info.role == HK_TENSOR_PARAM;
  }
  if (json) {
    cJSON *jw = cJSON_AddObjectToObject(json, "weights");
    cJSON_AddStringToObject(jw, "path", path);
    cJSON_AddNumberToObject(jw, "bound", bound);
    cJSON_AddNumberToObject(jw, "params", params);
    cJSON_AddNumberToObject(jw, "tensors", file_tensors);
    cJSON_AddStringToObject(jw, "format", format == HKC_WEIGHTS_NPZ ? "npz" : "safetensors");
  } else if (!quiet) {
    printf("weights: %u of %u param(s) bound from %s (%u tensor(s) in the file)\n", bound, params, path,
           file_tensors);
  }
  return 0;
}

/* Refuses (-1, printed) when a param is neither bound (--weights) nor given (--param), naming
 * every one, unless random_params. */
static int check_params_given(hk_session_t *session, const named_file_t *files, int n_files, int random_params) {
  if (random_params) return 0;
  uint32_t missing = 0;
  for (uint32_t t = 0; t < hk_session_tensor_count(session); t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(session, t, &info);
    if (info.role != HK_TENSOR_PARAM || hk_session_tensor_bound(session, t) || find_named(files, n_files, info.name))
      continue;
    char shape[128];
    format_shape(&info, shape, sizeof shape);
    if (!missing++) fprintf(stderr, "hkc run: these params are not given:\n");
    fprintf(stderr, "  %s %s", info.name, shape);
    const char *part; /* a param made of parts: the checkpoint tensors that would give it */
    for (uint32_t p = 0; (part = hk_session_tensor_part(session, t, p)) != NULL; p++)
      fprintf(stderr, "%s%s", p ? " | " : " (or its parts, all of: ", part);
    fprintf(stderr, "%s\n", hk_session_tensor_part(session, t, 0) ? ")" : "");
  }
  if (!missing) return 0;
  fprintf(stderr, "hkc run: %u param(s) unbound: give them with --weights FILE.safetensors|FILE.npz or --param "
                  "NAME=FILE.npy, or pass --random-params to run on seeded random values\n", missing);
  return -1;
}

static void help_run(void) {
  fputs(k_run_usage, stdout);
  print_common_help(0, 1);
}

/* hkc run; *files_out holds the --input/--param list (grown here, freed by cmd_run). */
static int run_command(int argc, char **argv, named_file_t **files_out) {
  static const struct option longopts[] = {
      {"target", required_argument, NULL, 't'}, {"batch", required_argument, NULL, OPT_BATCH},
      {"seed", required_argument, NULL, OPT_SEED}, {"input", required_argument, NULL, OPT_INPUT},
      {"param", required_argument, NULL, OPT_PARAM}, {"save-outputs", required_argument, NULL, OPT_SAVE_OUTPUTS},
      {"runs", required_argument, NULL, OPT_RUNS}, {"warmup", required_argument, NULL, OPT_WARMUP},
      {"repeats", required_argument, NULL, OPT_REPEATS}, {"trust", required_argument, NULL, OPT_TRUST},
      {"weights", required_argument, NULL, OPT_WEIGHTS}, {"weights-map", required_argument, NULL, OPT_WEIGHTS_MAP},
      {"profile", no_argument, NULL, OPT_PROFILE}, {"no-pdl", no_argument, NULL, OPT_NO_PDL},
      {"prefer-ptx", no_argument, NULL, OPT_PREFER_PTX},
      {"require-signature", no_argument, NULL, OPT_REQUIRE_SIGNATURE},
      {"allow-unsigned-native", no_argument, NULL, OPT_ALLOW_UNSIGNED_NATIVE},
      {"random-params", no_argument, NULL, OPT_RANDOM_PARAMS}, JSON_LONG_OPTION, COMMON_LONG_OPTIONS,
      {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "run", "hkc run PACK [options]", help_run, 1);
  const char *pack_path = NULL, *target = NULL, *save_dir = NULL, *weights_path = NULL, *map_path = NULL;
  long long batch = 0, seed = 1, runs = 10, warmup = 2, repeats = 20;
  int profile = 0, no_pdl = 0, prefer_ptx = 0, require_signature = 0, allow_unsigned_native = 0, random_params = 0;
  trust_opts_t trust = {0};
  named_file_t *files = NULL; /* --input / --param, as many as given (*files_out) */
  int n_files = 0, cap_files = 0, c;
  while ((c = hkc_cli_next(&cli, argc, argv, "t:", longopts)) != -1) {
    const char *v = optarg;
    switch (c) {
    case HKC_CLI_STOP: return cli.rc;
    case 't': target = v; break;
    case OPT_BATCH: if (hkc_cli_count(&cli, "--batch", v, 1, INT64_MAX / 2, &batch)) return cli.rc; break;
    case OPT_SEED: if (hkc_cli_count(&cli, "--seed", v, 0, INT64_MAX, &seed)) return cli.rc; break;
    case OPT_RUNS: if (hkc_cli_count(&cli, "--runs", v, 1, 1000000, &runs)) return cli.rc; break;
    case OPT_WARMUP: if (hkc_cli_count(&cli, "--warmup", v, 0, 1000000, &warmup)) return cli.rc; break;
    case OPT_REPEATS: if (hkc_cli_count(&cli, "--repeats", v, 1, 100000, &repeats)) return cli.rc; break;
    case OPT_PROFILE: profile = 1; break;
    case OPT_NO_PDL: no_pdl = 1; break;
    case OPT_PREFER_PTX: prefer_ptx = 1; break;
    case OPT_REQUIRE_SIGNATURE: require_signature = 1; break;
    case OPT_ALLOW_UNSIGNED_NATIVE: allow_unsigned_native = 1; break;
    case OPT_RANDOM_PARAMS: random_params = 1; break;
    case OPT_TRUST: if (add_trusted_key("run", &trust, v)) return 2; break;
    case OPT_SAVE_OUTPUTS: save_dir = v; break;
    case OPT_WEIGHTS: weights_path = v; break;
    case OPT_WEIGHTS_MAP: map_path = v; break;
    case OPT_INPUT:
    case OPT_PARAM: {
      char *eq = strchr(v, '=');
      if (!eq || eq == v || !eq[1])
        return hkc_cli_usage(&cli, "%s expects NAME=FILE.npy, got '%s'", c == OPT_INPUT ? "--input" : "--param", v),
               cli.rc;
      if (n_files == cap_files) {
        cap_files = cap_files ? cap_files * 2 : 16;
        named_file_t *grown = realloc(files, (size_t)cap_files * sizeof *grown);
        if (!grown) {
          fprintf(stderr, "hkc run: out of memory\n");
          return 1;
        }
        files = *files_out = grown;
      }
      *eq = '\0';
      files[n_files++] = (named_file_t){v, eq + 1};
      break;
    }
    default: return hkc_cli_usage(&cli, "unhandled option"), cli.rc;
    }
  }
  if (optind < argc) pack_path = argv[optind++];
  if (optind < argc) return hkc_cli_usage(&cli, "more than one pack given (%s, %s)", pack_path, argv[optind]), 2;
  if (!pack_path || (map_path && !weights_path))
    return hkc_cli_usage(&cli, "%s", pack_path ? "--weights-map needs --weights" : "no pack given"), 2;
  const int quiet = cli.quiet || cli.json; /* the human lines on stdout */
  cJSON *json = NULL;
  if (cli.json && !(json = hkc_json_begin("run"))) return 1;

  int rc = 1;
  hk_pack_t *pack = NULL;
  hk_session_t *session = NULL;
  uint32_t n_tensors = 0;
  void **buffers = NULL;  /* host staging copies */
  void **device = NULL;   /* the session's memory (device memory on GPU targets) */
  hk_weights_t *weights = NULL;
  void *weights_image = NULL; /* an .npz's params as safetensors: the memory under weights */
  hkc_weights_map_t map = {0};
  hk_pack_open_options_t oo = {.struct_size = sizeof oo, .trusted_keys = (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])trust.keys,
                                .trusted_key_count = trust.n, .require_signature = (uint32_t)require_signature,
                                .allow_unsigned_native_code = (uint32_t)allow_unsigned_native};
  hk_status_t st = hkc_tool_open_pack("run", pack_path, &oo, &pack);
  if (st != HK_OK) {
    cJSON_Delete(json);
    return 1;
  }
  if (batch == 0) batch = (long long)hk_pack_batch_size(pack, 0);
  hk_session_options_t so = {.struct_size = sizeof so, .batch = (uint64_t)batch, .target = target,
                             .no_pdl = (uint32_t)no_pdl};
  if (run_options_from_env(&so) != 0) {
    rc = 2;
    goto done;
  }
  if (prefer_ptx) so.prefer_ptx = 1;
  st = hk_session_create(pack, &so, &session);
  if (st != HK_OK) {
    fprintf(stderr, "hkc run: %s\n", hk_last_error());
    goto done;
  }
  /* which code runs: the target's code objects, or (CUDA) its PTX through the driver's JIT */
  const char *code_kind = hk_session_code_kind(session) == HK_CODE_PTX               ? "ptx"
                          : strncmp(hk_session_target(session), "sm_", 3) == 0 ? "sass"
                                                                                 : "code_object";
  if (!quiet && strcmp(code_kind, "ptx") == 0)
    printf("code: PTX of target %s (compute_%s), JIT-compiled by the driver\n", hk_session_target(session),
           hk_session_target(session) + 3);
  else if (!quiet)
    printf("code: %s of target %s\n", strcmp(code_kind, "sass") == 0 ? "SASS" : "code object",
           hk_session_target(session));
  const char *fallback = "";
  const int graph = strcmp(hk_session_launch_mode(session, &fallback), "graph") == 0;
  if (fallback[0])
    fprintf(stderr, "hkc run: warning: graph replay unavailable (%s); running with stream launches\n", fallback);
  const uint32_t pdl = hk_session_pdl_count(session);
  if (json) {
    cJSON_AddStringToObject(json, "pack", pack_path);
    cJSON_AddStringToObject(json, "target", hk_session_target(session));
    cJSON_AddStringToObject(json, "code", code_kind);
    cJSON_AddStringToObject(json, "launch", graph ? "graph" : "stream");
    if (fallback[0]) cJSON_AddStringToObject(json, "launch_fallback", fallback);
    else cJSON_AddNullToObject(json, "launch_fallback");
    cJSON_AddNumberToObject(json, "pdl", pdl);
  }
  if (pdl && !quiet)
    printf("programmatic dependent launch: %u %s\n", pdl,
           graph ? "programmatic edge(s) in the graph" : "launch(es) overlapping the kernel before them");
  for (int f = 0; f < n_files; f++) {
    int known = 0;
    for (uint32_t t = 0; t < hk_session_tensor_count(session) && !known; t++) {
      hk_tensor_info_t info;
      hk_session_tensor_info(session, t, &info);
      known = strcmp(info.name, files[f].name) == 0 && info.role != HK_TENSOR_OUTPUT;
    }
    if (!known) {
      fprintf(stderr, "hkc run: the pack has no input or param named '%s'\n", files[f].name);
      goto done;
    }
  }
  n_tensors = hk_session_tensor_count(session);
  /* a self-contained pack (hkc build --weights): the session bound its stored params; --weights
   * and --param bind over them */
  const uint32_t pack_weights = hk_pack_weight_count(pack);
  if (json) cJSON_AddNumberToObject(json, "pack_weights", pack_weights);
  if (pack_weights && !quiet)
    printf("weights: %u param(s) bound from the pack%s\n", pack_weights,
           weights_path || n_files ? " (--weights and --param bind over them)" : "");
  if (weights_path &&
      bind_weights_file(session, weights_path, map_path, &weights, &weights_image, &map, quiet, json) != 0)
    goto done;
  if (json && !weights_path) cJSON_AddNullToObject(json, "weights");
  if (check_params_given(session, files, n_files, random_params) != 0) goto done;
  buffers = calloc(n_tensors ? n_tensors : 1, sizeof *buffers);
  device = calloc(n_tensors ? n_tensors : 1, sizeof *device);
  if (!buffers || !device) goto done;
  for (uint32_t t = 0; t < n_tensors; t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(session, t, &info);
    buffers[t] = malloc(info.bytes ? info.bytes : 1);
    if (!buffers[t]) {
      fprintf(stderr, "hkc run: out of memory for tensor %s (%zu bytes)\n", info.name, info.bytes);
      goto done;
    }
    const char *npy_path = find_named(files, n_files, info.name);
    if (info.role != HK_TENSOR_OUTPUT && !npy_path && hk_session_tensor_bound(session, t)) {
      free(buffers[t]); /* bound from --weights */
      buffers[t] = NULL;
      continue;
    }
    if (info.role == HK_TENSOR_OUTPUT) {
      memset(buffers[t], 0xff, info.bytes); /* NaN in every element type */
    } else if (fill_tensor(&info, buffers[t], npy_path, (uint64_t)seed) != 0) {
      goto done;
    }
    if (hk_session_alloc(session, info.bytes, &device[t]) != HK_OK ||
        hk_session_copy(session, device[t], buffers[t], info.bytes, HK_COPY_HOST_TO_DEVICE) != HK_OK ||
        hk_session_bind(session, info.name, device[t], info.bytes) != HK_OK) {
      fprintf(stderr, "hkc run: %s\n", hk_last_error());
      goto done;
    }
  }

  double *times = calloc((size_t)runs, sizeof *times);
  if (!times) goto done;
  for (long long r = 0; r < warmup + runs; r++) {
    double t0 = now_ms();
    st = hk_session_run(session, NULL);
    if (st == HK_OK) st = hk_session_synchronize(session, NULL);
    double t1 = now_ms();
    if (st != HK_OK) {
      fprintf(stderr, "hkc run: %s\n", hk_last_error());
      free(times);
      goto done;
    }
    if (r >= warmup) times[r - warmup] = t1 - t0;
  }
  qsort(times, (size_t)runs, sizeof *times, cmp_double);
  uint64_t bucket = hk_session_bucket(session);
  if (json) {
    cJSON_AddNumberToObject(json, "batch", (double)batch);
    cJSON_AddNumberToObject(json, "bucket", (double)bucket);
    cJSON_AddBoolToObject(json, "padded", bucket != (uint64_t)batch);
    cJSON_AddNumberToObject(json, "runs", (double)runs);
    cJSON_AddNumberToObject(json, "warmup", (double)warmup);
    cJSON_AddNumberToObject(json, "median_ms", times[runs / 2]);
    cJSON_AddNumberToObject(json, "min_ms", times[0]);
  }
  if (!quiet) printf("target %s, batch %lld, bucket %llu%s: median %.3f ms, min %.3f ms over %lld runs (%lld warm-up)\n",
         hk_session_target(session), batch, (unsigned long long)bucket, bucket != (uint64_t)batch ? " (padded)" : "",
         times[runs / 2], times[0], runs, warmup);
  double graph_us = times[runs / 2] * 1e3;
  free(times);
  if (profile && print_profile(session, (uint32_t)repeats, graph_us, json) != 0) goto done;
  if (json && !profile) cJSON_AddNullToObject(json, "profile");

  if (save_dir && mkdir(save_dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "hkc run: cannot create %s: %s\n", save_dir, strerror(errno));
    goto done;
  }
  int bad = 0, save_failed = 0;
  cJSON *jouts = json ? cJSON_AddArrayToObject(json, "outputs") : NULL;
  hkc_npy_set_t saved = {0}; /* all outputs or none (a later failure removes the earlier files) */
  for (uint32_t t = 0; t < n_tensors; t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(session, t, &info);
    if (info.role != HK_TENSOR_OUTPUT) continue;
    if (hk_session_copy(session, buffers[t], device[t], info.bytes, HK_COPY_DEVICE_TO_HOST) != HK_OK) {
      fprintf(stderr, "hkc run: %s\n", hk_last_error());
      hkc_npy_set_free(&saved);
      goto done;
    }
    size_t n = info_count(&info), nonfinite = 0;
    float *f32 = malloc((n ? n : 1) * sizeof *f32);
    if (!f32) {
      hkc_npy_set_free(&saved);
      goto done;
    }
    double sum = 0, absmax = 0;
    for (size_t i = 0; i < n; i++) {
      f32[i] = hkc_load_elem(buffers[t], (int)info.element_type, i);
      if (!isfinite(f32[i])) nonfinite++;
      else {
        sum += f32[i];
        if (fabs(f32[i]) > absmax) absmax = fabs(f32[i]);
      }
    }
    char shape[128];
    format_shape(&info, shape, sizeof shape);
    if (jouts) {
      cJSON *jo = cJSON_CreateObject(), *jshape = cJSON_CreateArray();
      cJSON_AddItemToArray(jouts, jo);
      cJSON_AddStringToObject(jo, "name", info.name);
      cJSON_AddItemToObject(jo, "shape", jshape);
      for (uint32_t d = 0; d < info.rank; d++) cJSON_AddItemToArray(jshape, cJSON_CreateNumber((double)info.dims[d]));
      cJSON_AddStringToObject(jo, "dtype", hk_dtype_label((uint32_t)info.element_type));
      cJSON_AddNumberToObject(jo, "mean", n ? sum / (double)n : 0.0); /* as printed: the finite elements' sum over n */
      cJSON_AddNumberToObject(jo, "max_abs", absmax);
      cJSON_AddNumberToObject(jo, "nonfinite", (double)nonfinite);
    } else if (!quiet) {
      printf("  output %s %s: mean %.6g, max |x| %.6g%s\n", info.name, shape, n ? sum / (double)n : 0.0, absmax,
             nonfinite ? "  NON-FINITE VALUES" : "");
    }
    if (nonfinite) {
      fprintf(stderr, "hkc run: output %s has %zu non-finite element(s) of %zu\n", info.name, nonfinite, n);
      bad = 1;
    }
    if (save_dir && !save_failed && hkc_npy_set_add(&saved, save_dir, info.name, f32, info.dims, info.rank) != 0)
      save_failed = 1;
    free(f32);
  }
  if (save_dir && !save_failed && hkc_npy_set_commit(&saved) != 0) save_failed = 1;
  hkc_npy_set_free(&saved);
  if (save_dir && save_failed) fprintf(stderr, "hkc run: no output saved to %s/\n", save_dir);
  bad |= save_failed;
  if (save_dir && !bad && !quiet) printf("  outputs saved to %s/\n", save_dir);
  rc = bad ? 1 : 0;
  if (json) {
    if (save_dir && !save_failed) cJSON_AddStringToObject(json, "saved_to", save_dir);
    else cJSON_AddNullToObject(json, "saved_to");
    cJSON_AddBoolToObject(json, "ok", !bad);
    if (hkc_json_end(json, stdout) != 0) rc = 1;
    json = NULL;
  }
done:
  for (uint32_t t = 0; t < n_tensors; t++) {
    if (buffers) free(buffers[t]);
    if (device) hk_session_free(session, device[t]);
  }
  free(buffers);
  free(device);
  hk_session_destroy(session);
  hk_weights_destroy(weights); /* after the session: host tensors may be bound in place */
  free(weights_image);          /* after the weights: they read it in place */
  hkc_weights_map_free(&map);
  hk_pack_destroy(pack);
  cJSON_Delete(json);
  return rc;
}

static int cmd_run(int argc, char **argv) {
  named_file_t *files = NULL;
  int rc = run_command(argc, argv, &files);
  free(files);
  return rc;
}

/* ---- generate ------------------------------------------------------------------------------ */
static const char k_generate_usage[] =
    "usage: hkc generate PACK --ids PROMPT.npy [--ids ...] [-n N] [options]\n"
    "\n"
    "Generates text with a generation pack (hkc import hf --generate; docs/GENERATE.md):\n"
    "prefills every prompt in one call (each in its own KV-cache slot, batched into as few\n"
    "steps as the pack's token buckets allow), then decodes one token per sequence per step,\n"
    "greedily (or drawn on the device: --temperature), until N new tokens, a --stop id or the\n"
    "cache's max_seq.\n"
    "Prints each prompt's new ids, the time to the first token (the prefill), the decode\n"
    "time per step (median) and tokens per second. Times are wall-clock on this machine and\n"
    "include the copies of each step's inputs and ids (what an application would see).\n"
    "\n"
    "options:\n"
    "  --ids FILE.npy         a prompt: a 1-D integer .npy (int32, or int64 whose values fit);\n"
    "                         a 2-D one is one prompt per row; repeatable, at most the pack's\n"
    "                         slots prompts in all\n"
    "  -n, --max-new-tokens N new tokens per prompt (default 32), the first from the prefill\n"
    "  --stop ID              a token id that ends a sequence (kept in its output; repeatable)\n"
    "  --temperature T        > 0: sample from softmax(logits / T) on the device (default 0:\n"
    "                         greedy); with --top-k K (0: all, default) and --top-p P (the\n"
    "                         smallest set of the top tokens holding P of the probability;\n"
    "                         default 1) and --sample-seed S (default 0; prompt i draws with\n"
    "                         S + i): the same seed gives the same tokens\n"
    "  --target T, --weights FILE, --weights-map MAP, --random-params, --seed S, --trust KEY.pub,\n"
    "  --require-signature, --allow-unsigned-native, --no-pdl, --prefer-ptx\n"
    "                         as hkc run (every param must be given unless --random-params)\n"
    "  --profile              then time every launch of the decode step's graph alone beside\n"
    "                         its floor, as hkc run --profile\n"
    "  --repeats R            passes of --profile (default 20)\n"
    "  --json                 the result as one JSON document on stdout\n"
    "  -q, --quiet            print nothing but errors\n";

static void help_generate(void) {
  fputs(k_generate_usage, stdout);
  print_common_help(0, 1);
}

/* The prompts of --ids files: each 1-D file one prompt, each row of a 2-D one another. */
typedef struct prompts {
  int32_t **ids;
  uint32_t *len;
  uint32_t n;
} prompts_t;

static void prompts_free(prompts_t *p) {
  for (uint32_t i = 0; i < p->n; i++) free(p->ids[i]);
  free(p->ids);
  free(p->len);
  *p = (prompts_t){0};
}

static int prompts_read(const char *const *paths, int n_paths, uint32_t limit, prompts_t *out) {
  for (int f = 0; f < n_paths; f++) {
    hkc_npy_t npy;
    if (hkc_npy_read(paths[f], &npy) != 0) return -1;
    const int64_t rows = npy.rank == 2 ? npy.dims[0] : 1, cols = npy.rank == 2 ? npy.dims[1] : npy.dims[0];
    const char *why = !npy.ints ? "not an integer .npy (int32, or int64 whose values fit in int32)"
                      : npy.rank < 1 || npy.rank > 2 ? "not 1-D (one prompt) or 2-D (one prompt per row)"
                      : cols < 1 || rows < 1 ? "an empty prompt"
                      : out->n + (uint64_t)rows > limit ? "more prompts than the pack has KV-cache slots"
                                                        : NULL;
    if (why) {
      fprintf(stderr, "hkc generate: --ids %s: %s (slots: %u)\n", paths[f], why, limit);
      hkc_npy_free(&npy);
      return -1;
    }
    int32_t **ids = realloc(out->ids, (out->n + (size_t)rows) * sizeof *ids);
    uint32_t *len = ids ? realloc(out->len, (out->n + (size_t)rows) * sizeof *len) : NULL;
    if (ids) out->ids = ids;
    if (len) out->len = len;
    for (int64_t r = 0; r < rows && ids && len; r++) {
      int32_t *row = malloc((size_t)cols * sizeof *row);
      if (!row) break;
      memcpy(row, npy.ints + r * cols, (size_t)cols * sizeof *row);
      out->ids[out->n] = row;
      out->len[out->n++] = (uint32_t)cols;
    }
    hkc_npy_free(&npy);
    if (!ids || !len || out->n == 0) {
      fprintf(stderr, "hkc generate: out of memory\n");
      return -1;
    }
  }
  return 0;
}

/* Binds every param nothing bound yet to seeded random values (hkc run --random-params). */
static int bind_random_params(hk_session_t *session, uint64_t seed, void ***owned, uint32_t *n_owned) {
  const uint32_t n = hk_session_tensor_count(session);
  *owned = calloc(n ? n : 1, sizeof **owned);
  if (!*owned) return -1;
  *n_owned = n;
  for (uint32_t t = 0; t < n; t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(session, t, &info);
    if (info.role != HK_TENSOR_PARAM || hk_session_tensor_bound(session, t)) continue;
    void *host = malloc(info.bytes ? info.bytes : 1);
    int rc = host ? fill_tensor(&info, host, NULL, seed) : -1;
    if (rc == 0 && (hk_session_alloc(session, info.bytes, &(*owned)[t]) != HK_OK ||
                    hk_session_copy(session, (*owned)[t], host, info.bytes, HK_COPY_HOST_TO_DEVICE) != HK_OK ||
                    hk_session_bind(session, info.name, (*owned)[t], info.bytes) != HK_OK)) {
      fprintf(stderr, "hkc generate: %s\n", hk_last_error());
      rc = -1;
    }
    free(host);
    if (rc != 0) return -1;
  }
  return 0;
}

static int cmp_double(const void *a, const void *b);
static double now_ms(void);

/* Prefill + greedy decode of every prompt, each in slot i. out[i] gets up to max_new ids. */
typedef struct gen_result {
  int32_t *out;        /* [prompts][max_new] */
  uint32_t *count;     /* per prompt */
  double ttft_ms;      /* the prefill append */
  double *step_ms;     /* per decode step */
  uint32_t steps;      /* decode steps run */
  uint64_t prefill_runs;
  uint64_t decode_tokens;
} gen_result_t;

static int generate_all(hk_generator_t *g, const prompts_t *p, uint32_t max_new, const int32_t *stop, int n_stop,
                        gen_result_t *r) {
  uint32_t *slots = calloc(p->n, sizeof *slots), *ones = calloc(p->n, sizeof *ones);
  int32_t *next = calloc(p->n, sizeof *next);
  const int32_t **toks = calloc(p->n, sizeof *toks);
  uint32_t *live = calloc(p->n, sizeof *live); /* prompt index of each live sequence */
  r->out = calloc((size_t)p->n * max_new, sizeof *r->out);
  r->count = calloc(p->n, sizeof *r->count);
  r->step_ms = calloc(max_new, sizeof *r->step_ms);
  int rc = -1;
  if (!slots || !ones || !next || !toks || !live || !r->out || !r->count || !r->step_ms) goto done;
  for (uint32_t i = 0; i < p->n; i++) {
    slots[i] = i;
    ones[i] = 1;
    toks[i] = p->ids[i];
    (void)hk_generator_reset(g, i);
  }
  const uint64_t runs0 = hk_generator_steps(g);
  double t0 = now_ms();
  if (hk_generator_append(g, p->n, slots, toks, p->len, next) != HK_OK) {
    fprintf(stderr, "hkc generate: %s\n", hk_last_error());
    goto done;
  }
  r->ttft_ms = now_ms() - t0;
  r->prefill_runs = hk_generator_steps(g) - runs0;
  uint32_t n_live = 0;
  for (uint32_t i = 0; i < p->n; i++) { /* the first new token of each prompt */
    r->out[(size_t)i * max_new] = next[i];
    r->count[i] = 1;
    int stopped = r->count[i] >= max_new || hk_generator_length(g, i) >= hk_generator_max_seq(g);
    for (int k = 0; k < n_stop; k++) stopped |= next[i] == stop[k];
    if (!stopped) live[n_live++] = i;
  }
  while (n_live > 0) { /* one decode step: the live sequences' last ids */
    for (uint32_t j = 0; j < n_live; j++) {
      slots[j] = live[j];
      toks[j] = &r->out[(size_t)live[j] * max_new + r->count[live[j]] - 1];
    }
    t0 = now_ms();
    if (hk_generator_append(g, n_live, slots, toks, ones, next) != HK_OK) {
      fprintf(stderr, "hkc generate: %s\n", hk_last_error());
      goto done;
    }
    r->step_ms[r->steps++] = now_ms() - t0;
    r->decode_tokens += n_live;
    uint32_t kept = 0;
    for (uint32_t j = 0; j < n_live; j++) {
      const uint32_t i = live[j];
      r->out[(size_t)i * max_new + r->count[i]++] = next[j];
      int stopped = r->count[i] >= max_new || hk_generator_length(g, i) >= hk_generator_max_seq(g);
      for (int k = 0; k < n_stop; k++) stopped |= next[j] == stop[k];
      if (!stopped) live[kept++] = i;
    }
    n_live = kept;
  }
  rc = 0;
done:
  free(slots);
  free(ones);
  free(next);
  free(toks);
  free(live);
  return rc;
}

static int cmd_generate(int argc, char **argv) {
  static const struct option longopts[] = {
      {"target", required_argument, NULL, 't'}, {"ids", required_argument, NULL, OPT_IDS},
      {"max-new-tokens", required_argument, NULL, 'n'}, {"stop", required_argument, NULL, OPT_STOP},
      {"seed", required_argument, NULL, OPT_SEED}, {"repeats", required_argument, NULL, OPT_REPEATS},
      {"trust", required_argument, NULL, OPT_TRUST}, {"weights", required_argument, NULL, OPT_WEIGHTS},
      {"weights-map", required_argument, NULL, OPT_WEIGHTS_MAP}, {"profile", no_argument, NULL, OPT_PROFILE},
      {"no-pdl", no_argument, NULL, OPT_NO_PDL}, {"prefer-ptx", no_argument, NULL, OPT_PREFER_PTX},
      {"require-signature", no_argument, NULL, OPT_REQUIRE_SIGNATURE},
      {"allow-unsigned-native", no_argument, NULL, OPT_ALLOW_UNSIGNED_NATIVE},
      {"random-params", no_argument, NULL, OPT_RANDOM_PARAMS}, {"temperature", required_argument, NULL, OPT_TEMPERATURE},
      {"top-k", required_argument, NULL, OPT_TOP_K}, {"top-p", required_argument, NULL, OPT_TOP_P},
      {"sample-seed", required_argument, NULL, OPT_SAMPLE_SEED}, JSON_LONG_OPTION, COMMON_LONG_OPTIONS,
      {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "generate", "hkc generate PACK --ids PROMPT.npy [-n N] [options]", help_generate, 1);
  const char *pack_path = NULL, *target = NULL, *weights_path = NULL, *map_path = NULL;
  const char *id_paths[256];
  int n_ids = 0, n_stop = 0, c;
  int32_t stop[64];
  long long max_new = 32, seed = 1, repeats = 20, v64, top_k = 0, sample_seed = 0;
  double temperature = 0, top_p = 1;
  int profile = 0, no_pdl = 0, prefer_ptx = 0, require_signature = 0, allow_unsigned_native = 0, random_params = 0;
  trust_opts_t trust = {0};
  while ((c = hkc_cli_next(&cli, argc, argv, "t:n:", longopts)) != -1) {
    const char *v = optarg;
    switch (c) {
    case HKC_CLI_STOP: return cli.rc;
    case 't': target = v; break;
    case 'n': if (hkc_cli_count(&cli, "--max-new-tokens", v, 1, 1 << 24, &max_new)) return cli.rc; break;
    case OPT_IDS:
      if (n_ids == (int)(sizeof id_paths / sizeof *id_paths)) return hkc_cli_usage(&cli, "at most 256 --ids files"), 2;
      id_paths[n_ids++] = v;
      break;
    case OPT_STOP:
      if (n_stop == (int)(sizeof stop / sizeof *stop)) return hkc_cli_usage(&cli, "at most 64 --stop ids"), 2;
      if (hkc_cli_count(&cli, "--stop", v, 0, INT32_MAX, &v64)) return cli.rc;
      stop[n_stop++] = (int32_t)v64;
      break;
    case OPT_SEED: if (hkc_cli_count(&cli, "--seed", v, 0, INT64_MAX, &seed)) return cli.rc; break;
    case OPT_REPEATS: if (hkc_cli_count(&cli, "--repeats", v, 1, 100000, &repeats)) return cli.rc; break;
    case OPT_TOP_K: if (hkc_cli_count(&cli, "--top-k", v, 0, INT32_MAX, &top_k)) return cli.rc; break;
    case OPT_SAMPLE_SEED: if (hkc_cli_count(&cli, "--sample-seed", v, 0, UINT32_MAX, &sample_seed)) return cli.rc; break;
    case OPT_TEMPERATURE:
    case OPT_TOP_P: {
      char *end = NULL;
      const double x = strtod(v, &end);
      const int is_p = c == OPT_TOP_P;
      if (!*v || *end || !(x >= 0) || x > (is_p ? 1.0 : 1e6))
        return hkc_cli_usage(&cli, "%s %s: a number in %s", is_p ? "--top-p" : "--temperature", v,
                             is_p ? "[0, 1]" : "[0, 1e6]"), 2;
      *(is_p ? &top_p : &temperature) = x;
      break;
    }
    case OPT_PROFILE: profile = 1; break;
    case OPT_NO_PDL: no_pdl = 1; break;
    case OPT_PREFER_PTX: prefer_ptx = 1; break;
    case OPT_REQUIRE_SIGNATURE: require_signature = 1; break;
    case OPT_ALLOW_UNSIGNED_NATIVE: allow_unsigned_native = 1; break;
    case OPT_RANDOM_PARAMS: random_params = 1; break;
    case OPT_TRUST: if (add_trusted_key("generate", &trust, v)) return 2; break;
    case OPT_WEIGHTS: weights_path = v; break;
    case OPT_WEIGHTS_MAP: map_path = v; break;
    default: return hkc_cli_usage(&cli, "unhandled option"), cli.rc;
    }
  }
  if (optind < argc) pack_path = argv[optind++];
  if (optind < argc) return hkc_cli_usage(&cli, "more than one pack given (%s, %s)", pack_path, argv[optind]), 2;
  if (!pack_path) return hkc_cli_usage(&cli, "no pack given"), 2;
  if (map_path && !weights_path) return hkc_cli_usage(&cli, "--weights-map needs --weights"), 2;
  if (n_ids == 0) return hkc_cli_usage(&cli, "no prompt given (--ids PROMPT.npy)"), 2;
  const int quiet = cli.quiet || cli.json;

  int rc = 1;
  hk_pack_t *pack = NULL;
  hk_session_t *session = NULL;
  hk_generator_t *gen = NULL;
  hk_weights_t *weights = NULL;
  void *weights_image = NULL, **random_bufs = NULL;
  uint32_t n_random = 0;
  hkc_weights_map_t map = {0};
  prompts_t prompts = {0};
  gen_result_t res = {0};
  cJSON *json = NULL;
  hk_pack_open_options_t oo = {.struct_size = sizeof oo, .trusted_keys = (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])trust.keys,
                                .trusted_key_count = trust.n, .require_signature = (uint32_t)require_signature,
                                .allow_unsigned_native_code = (uint32_t)allow_unsigned_native};
  if (hkc_tool_open_pack("generate", pack_path, &oo, &pack) != HK_OK) return 1;
  hk_session_options_t so = {.struct_size = sizeof so, .batch = hk_pack_batch_size(pack, 0), .target = target,
                             .no_pdl = (uint32_t)no_pdl};
  if (run_options_from_env(&so) != 0) {
    rc = 2;
    goto done;
  }
  if (prefer_ptx) so.prefer_ptx = 1;
  if (hk_session_create(pack, &so, &session) != HK_OK) {
    fprintf(stderr, "hkc generate: %s\n", hk_last_error());
    goto done;
  }
  if (weights_path && bind_weights_file(session, weights_path, map_path, &weights, &weights_image, &map, 1, NULL) != 0)
    goto done;
  if (check_params_given(session, NULL, 0, random_params) != 0) goto done;
  if (bind_random_params(session, (uint64_t)seed, &random_bufs, &n_random) != 0) goto done;
  if (hk_generator_create(session, &gen) != HK_OK) {
    fprintf(stderr, "hkc generate: %s\n", hk_last_error());
    goto done;
  }
  if (prompts_read(id_paths, n_ids, hk_generator_slots(gen), &prompts) != 0) goto done;
  for (uint32_t i = 0; i < prompts.n && temperature > 0; i++) {
    const hk_sampling_t sp = {.temperature = (float)temperature, .top_k = (int32_t)top_k, .top_p = (float)top_p,
                              .seed = (uint32_t)((uint64_t)sample_seed + i)};
    if (hk_generator_set_sampling(gen, i, &sp) != HK_OK) {
      fprintf(stderr, "hkc generate: %s\n", hk_last_error());
      goto done;
    }
  }
  if (generate_all(gen, &prompts, (uint32_t)max_new, stop, n_stop, &res) != 0) goto done;

  double *sorted = calloc(res.steps ? res.steps : 1, sizeof *sorted), decode_ms = 0;
  if (!sorted) goto done;
  for (uint32_t i = 0; i < res.steps; i++) decode_ms += sorted[i] = res.step_ms[i];
  qsort(sorted, res.steps, sizeof *sorted, cmp_double);
  const double median = res.steps ? sorted[res.steps / 2] : 0;
  free(sorted);
  const double tok_s = decode_ms > 0 ? (double)res.decode_tokens / (decode_ms / 1e3) : 0;
  if (cli.json) {
    if (!(json = hkc_json_begin("generate"))) goto done;
    cJSON_AddStringToObject(json, "pack", pack_path);
    cJSON_AddStringToObject(json, "target", hk_session_target(session));
    cJSON *jo = cJSON_AddArrayToObject(json, "outputs"), *jl = cJSON_AddArrayToObject(json, "prompt_lengths");
    for (uint32_t i = 0; i < prompts.n; i++) {
      cJSON *row = cJSON_CreateArray();
      for (uint32_t k = 0; k < res.count[i]; k++)
        cJSON_AddItemToArray(row, cJSON_CreateNumber(res.out[(size_t)i * (size_t)max_new + k]));
      cJSON_AddItemToArray(jo, row);
      cJSON_AddItemToArray(jl, cJSON_CreateNumber(prompts.len[i]));
    }
    cJSON_AddNumberToObject(json, "ttft_ms", res.ttft_ms);
    cJSON_AddNumberToObject(json, "prefill_steps", (double)res.prefill_runs);
    cJSON_AddNumberToObject(json, "decode_steps", res.steps);
    cJSON_AddNumberToObject(json, "ms_per_token", median);
    cJSON_AddNumberToObject(json, "tokens_per_s", tok_s);
  } else if (!quiet) {
    for (uint32_t i = 0; i < prompts.n; i++) {
      printf("prompt %u (%u tokens):", i, prompts.len[i]);
      for (uint32_t k = 0; k < res.count[i]; k++) printf(" %d", res.out[(size_t)i * (size_t)max_new + k]);
      printf("\n");
    }
    printf("target %s, %u prompt(s): time to first token %.3f ms (prefill in %llu step(s)); decode %.3f ms per step "
           "(median of %u), %.1f tokens/s\n",
           hk_session_target(session), prompts.n, res.ttft_ms, (unsigned long long)res.prefill_runs, median, res.steps,
           tok_s);
  }
  rc = 0;
  if (profile && res.steps) { /* the last decode step's graph again: the same writes, the same cache */
    double graph[64];
    for (int r = 0; r < 64 && rc == 0; r++) {
      const double t0 = now_ms();
      if (hk_session_run(session, NULL) != HK_OK || hk_session_synchronize(session, NULL) != HK_OK) {
        fprintf(stderr, "hkc generate: %s\n", hk_last_error());
        rc = 1;
      }
      graph[r] = now_ms() - t0;
    }
    qsort(graph, 64, sizeof *graph, cmp_double);
    if (rc == 0 && !quiet)
      printf("decode step: %.3f ms (inputs copied in, graph replay, ids copied out); the graph replay alone %.3f ms: "
             "%.3f ms of host work per step\n", median, graph[32], median - graph[32]);
    if (rc == 0 && json) {
      cJSON_AddNumberToObject(json, "graph_ms", graph[32]);
      cJSON_AddNumberToObject(json, "host_ms_per_step", median - graph[32]);
    }
    if (rc == 0 && print_profile(session, (uint32_t)repeats, graph[32] * 1e3, json) != 0) rc = 1;
  }
  if (json && hkc_json_end(json, stdout) != 0) rc = 1;
  json = NULL;
done:
  free(res.out);
  free(res.count);
  free(res.step_ms);
  prompts_free(&prompts);
  hk_generator_destroy(gen);
  for (uint32_t t = 0; t < n_random; t++) hk_session_free(session, random_bufs[t]);
  free(random_bufs);
  hk_session_destroy(session);
  hk_weights_destroy(weights);
  free(weights_image);
  hkc_weights_map_free(&map);
  hk_pack_destroy(pack);
  cJSON_Delete(json);
  return rc;
}

/* ---- inspect ---------------------------------------------------------------------------- */
static void help_inspect(void) {
  fputs(k_inspect_usage, stdout);
  print_common_help(0, 1);
}

static int cmd_inspect(int argc, char **argv) {
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
  trust_opts_t trust = {0};
  while ((c = hkc_cli_next(&cli, argc, argv, "t:", longopts)) != -1) {
    switch (c) {
    case HKC_CLI_STOP: return cli.rc;
    case OPT_PLAN: plan = 1; break;
    case OPT_TRUST: if (add_trusted_key("inspect", &trust, optarg)) return 2; break;
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
  if (start_workers(1, compile_timeout) != 0) return 1;
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

/* ---- keygen, sign --------------------------------------------------------------------------- */
/* Signs the artifact at in_path and writes it atomically to out_path (may equal in_path).
 * Prints the key id unless quiet. 0 / -1 (reported). */
static int sign_file(const char *in_path, const char *key_path, const char *out_path, int quiet) {
  uint8_t seed[HKC_KEY_SEED_BYTES];
  if (hkc_key_load(key_path, seed) != 0) return -1;
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
    fprintf(stderr, "hkc sign: cannot read %s: %s\n", in_path, strerror(errno));
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
  print_common_help(0, 0);
}

static int cmd_keygen(int argc, char **argv) {
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
  print_common_help(0, 0);
}

static int cmd_sign(int argc, char **argv) {
  static const struct option longopts[] = {{"key", required_argument, NULL, OPT_KEY},
                                           {"output", required_argument, NULL, 'o'}, COMMON_LONG_OPTIONS,
                                           {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "sign", "hkc sign PACK --key KEY [-o OUT] [-q]", help_sign, 0);
  const char *pack = NULL, *key = NULL, *out = NULL;
  int c;
  while ((c = hkc_cli_next(&cli, argc, argv, "o:", longopts)) != -1) {
    if (c == HKC_CLI_STOP) return cli.rc;
    if (c == OPT_KEY) key = optarg;
    else out = optarg; /* 'o' */
  }
  if (optind < argc) pack = argv[optind++];
  if (optind < argc) return hkc_cli_usage(&cli, "unexpected argument %s", argv[optind]), 2;
  if (!pack || !key) return hkc_cli_usage(&cli, "%s", !pack ? "no pack given" : "no key given (--key KEY)"), 2;
  return sign_file(pack, key, out ? out : pack, cli.quiet) == 0 ? 0 : 1;
}

/* ---- merge ---------------------------------------------------------------------------------- */
static void help_merge(void) {
  fputs(k_merge_usage, stdout);
  print_common_help(0, 0);
}

/* The inputs are untrusted: opened through the verifying reader, metadata only (no code is
 * loaded; merge decompresses each target's code itself to check it). */
static int cmd_merge(int argc, char **argv) {
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

/* ---- targets -------------------------------------------------------------------------------- */
static void help_targets(void) {
  fputs(k_targets_usage, stdout);
  print_common_help(0, 1);
}

static int cmd_targets(int argc, char **argv) {
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
  if (start_workers(0, compile_timeout) != 0) return 1;
  if (cli.json) return hkc_targets_json(stdout, probe) == 0 ? 0 : 1;
  return hkc_print_targets(stdout, probe) == 0 ? 0 : 1;
}

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
    {"build", cmd_build},     {"run", cmd_run},     {"tune", cmd_tune},   {"inspect", cmd_inspect},
    {"targets", cmd_targets}, {"keygen", cmd_keygen}, {"sign", cmd_sign}, {"merge", cmd_merge},
    {"cache", hkc_cmd_cache}, {"import", cmd_import}, {"generate", cmd_generate},
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
