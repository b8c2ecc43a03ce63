/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hkc: the command line.
 *
 *   hkc build SPEC -o OUT [--target LIST] [--fusion auto|none] [--tune model|default] [--tuning-db FILE]...
 *             [--kernel-option NAME=VALUE]...
 *   hkc tune SPEC --target T -o DB | hkc tune --merge A.db B.db ... -o DB
 *   hkc inspect PACK [--disasm KERNEL | --plan [--batch N]]
 *   hkc run PACK [--target T] [--batch N] [--seed S] [--input NAME=FILE.npy] [--weights FILE.safetensors]
 *           [--random-params] [--profile] ...
 *   hkc keygen -o KEY | hkc sign PACK --key KEY [-o OUT]
 *   hkc merge PACK PACK... -o OUT [--sign KEY]
 *
 * `run` goes through libhkrt's public API only: the same path an application takes.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    "  tune SPEC --target T -o DB          measure kernel configurations, write a tuning database\n"
    "  targets                             what the installed toolchains can build\n"
    "  keygen -o KEY                       create a signing key pair (KEY, KEY.pub)\n"
    "  sign PACK --key KEY [-o OUT]        sign a pack (libhkrt's trust policy: README, Embedding)\n"
    "  merge PACK... -o OUT [--sign KEY]   one pack from packs of one spec built per target\n"
    "\n"
    "  hkc <command> --help   options of one command\n"
    "  hkc --version          versions of hkc and the artifact format\n";

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
    "                         epilogues, residual add + norm, element-wise chains; none:\n"
    "                         one kernel per spec node; explicit groups: only in the spec)\n"
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
    "  -q, --quiet            no summary\n"
    "\n"
    "environment: the HKC_* variables above map onto their kernel options (boolean ones: set\n"
    "and not 0 = 1; flags win over them); HKC_CACHE_DIR: the compile cache.\n";

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
    "  --weights FILE.safetensors\n"
    "                         take every param the checkpoint names (dtype and shape must\n"
    "                         match exactly; docs/WEIGHTS.md)\n"
    "  --weights-map MAP      name map for --weights: lines \"PACK_NAME CHECKPOINT_NAME\"\n"
    "  --random-params        fill params that nothing gives with seeded random numbers\n"
    "                         (without it, hkc run refuses to start and names them)\n"
    "  --save-outputs DIR     write each output as DIR/NAME.npy (float32)\n"
    "  --runs N               timed runs (default 10); --warmup N untimed runs first (default 2)\n"
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
    "  --kernel-option NAME=VALUE, --host-threads N\n"
    "                         as for `hkc build` (candidates of variants the options turn off\n"
    "                         are not measured; HKC_* variables map the same way)\n"
    "  --merge A B ...        union of databases; a key in several keeps the faster entry\n"
    "                         (each conflict is reported on stderr)\n";

static const char k_inspect_usage[] =
    "usage: hkc inspect PACK [--trust KEY.pub]... [--disasm KERNEL [--target T] | --plan [--batch N] [--target T]]\n"
    "\n"
    "Verifies PACK and prints its manifest, its signature (ed25519 key id, verified or\n"
    "INVALID, or none), targets, kernels with their resources and occupancy, tensors, graphs\n"
    "per batch size (nodes, workspace bytes) and provenance. Never loads the pack's code.\n"
    "\n"
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
    "usage: hkc targets\n"
    "\n"
    "Probes the installed toolchains and prints which targets this machine can build:\n"
    "host (the C compiler), AMD ISAs (comgr's list, each checked by compiling a test\n"
    "kernel with hiprtc) and NVIDIA architectures (nvrtc's list).\n";

static int want_help(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
  return 0;
}

/* Parses a positive integer option value; prints an error and returns -1 otherwise. */
static int parse_count(const char *opt, const char *text, long long lo, long long hi, long long *out) {
  char *end;
  errno = 0;
  long long v = strtoll(text ? text : "", &end, 10);
  if (!text || errno || *end || end == text || v < lo || v > hi) {
    fprintf(stderr, "hkc: %s expects an integer in [%lld, %lld], got '%s'\n", opt, lo, hi, text ? text : "");
    return -1;
  }
  *out = v;
  return 0;
}

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
  char list[4096] = "";
  size_t at = 0;
  const char *name, *env, *help;
  for (size_t i = 0; hkc_kernel_options_describe(i, &name, &env, &help) && at < sizeof list; i++) {
    int n = snprintf(list + at, sizeof list - at, "                           %s (%s): %s\n", name, env, help);
    at += n > 0 ? (size_t)n : 0;
  }
  printf(k_build_usage, list);
}

/* HK_HOST_THREADS (the loader's variable) as the default of --host-threads; 0 if unset or
 * not a positive count (the loader reports a bad value when it runs). */
static int host_threads_from_env(void) {
  const char *e = getenv("HK_HOST_THREADS");
  char *end;
  long n = e && *e ? strtol(e, &end, 10) : 0;
  return e && *e && !*end && n > 0 && n < 1 << 20 ? (int)n : 0;
}

/* --kernel-option VALUE and --host-threads N, shared by build and tune: 1 consumed (i
 * advanced), 0 not one of them, -1 error (printed). */
static int kernel_option_flag(const char *cmd, int argc, char **argv, int *i, hkc_kernel_options_t *ko,
                              int *host_threads) {
  const char *a = argv[*i];
  if (strcmp(a, "--kernel-option") != 0 && strcmp(a, "--host-threads") != 0) return 0;
  if (*i + 1 >= argc) {
    fprintf(stderr, "hkc %s: %s needs a value\n", cmd, a);
    return -1;
  }
  const char *v = argv[++*i];
  if (strcmp(a, "--host-threads") == 0) {
    long long n;
    if (parse_count(a, v, 1, 1 << 20, &n) != 0) return -1;
    *host_threads = (int)n;
    return 1;
  }
  char err[1024];
  if (hkc_kernel_options_set_arg(ko, v, err, sizeof err) != 0) {
    fprintf(stderr, "hkc %s: --kernel-option %s\n", cmd, err);
    return -1;
  }
  return 1;
}

/* ---- build ---------------------------------------------------------------------------- */
static int cmd_build(int argc, char **argv) {
  if (want_help(argc, argv)) {
    print_build_usage();
    return 0;
  }
  hkc_build_options_t opt = {.fusion = -1};
  /* HKC_PTX=LIST or none: --ptx LIST / --no-ptx from the environment (the flags still win) */
  const char *ptx_env = getenv("HKC_PTX");
  if (ptx_env && *ptx_env) opt.ptx = strcmp(ptx_env, "none") == 0 ? "" : ptx_env;
  hkc_kernel_options_t ko = {0};
  if (hkc_kernel_options_from_env(&ko, "hkc build") != 0) return 2;
  opt.host_threads = host_threads_from_env();
  const char *dbs[64], *sign_key = NULL;
  size_t n_dbs = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const int kf = kernel_option_flag("build", argc, argv, &i, &ko, &opt.host_threads);
    if (kf < 0) return 2;
    if (kf > 0) continue;
    if (strcmp(a, "--tune") == 0) {
      if (++i >= argc) goto missing;
      if (strcmp(argv[i], "model") == 0) opt.tune_mode = HKC_TUNE_MODEL;
      else if (strcmp(argv[i], "default") == 0) opt.tune_mode = HKC_TUNE_DEFAULT;
      else {
        fprintf(stderr, "hkc build: --tune expects model or default, got '%s'\n", argv[i]);
        return 2;
      }
    } else if (strcmp(a, "--tuning-db") == 0) {
      if (++i >= argc) goto missing;
      if (n_dbs == sizeof dbs / sizeof *dbs) {
        fprintf(stderr, "hkc build: more than %zu --tuning-db files\n", sizeof dbs / sizeof *dbs);
        return 2;
      }
      dbs[n_dbs++] = argv[i];
    } else if (strcmp(a, "--tune-verify") == 0) {
      long long v;
      if (++i >= argc) goto missing;
      if (parse_count(a, argv[i], 1, 64, &v) != 0) return 2;
      opt.tune_verify = (int)v;
    } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
      if (++i >= argc) goto missing;
      opt.out_path = argv[i];
    } else if (strcmp(a, "-t") == 0 || strcmp(a, "--target") == 0) {
      if (++i >= argc) goto missing;
      opt.targets = argv[i];
    } else if (strcmp(a, "--merge-targets") == 0) {
      if (++i >= argc) goto missing;
      opt.merge_targets = argv[i];
    } else if (strcmp(a, "--zstd-level") == 0) {
      long long v;
      if (++i >= argc) goto missing;
      if (parse_count(a, argv[i], 1, 22, &v) != 0) return 2;
      opt.compression_level = (int)v;
    } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
      opt.quiet = 1;
    } else if (strcmp(a, "-j") == 0 || strcmp(a, "--jobs") == 0) {
      long long v;
      if (++i >= argc) goto missing;
      if (parse_count(a, argv[i], 1, 1024, &v) != 0) return 2;
      opt.jobs = (int)v;
    } else if (strcmp(a, "--compile-timeout") == 0) {
      long long v;
      if (++i >= argc) goto missing;
      if (parse_count(a, argv[i], 1, 86400, &v) != 0) return 2;
      compile_timeout = (int)v;
    } else if (strcmp(a, "--no-cache") == 0) {
      opt.no_cache = 1;
    } else if (strcmp(a, "--Werror-spills") == 0) {
      opt.werror_spills = 1;
    } else if (strcmp(a, "--no-pdl") == 0) {
      opt.no_pdl = 1;
    } else if (strcmp(a, "--no-ptx") == 0) {
      opt.ptx = "";
    } else if (strcmp(a, "--ptx") == 0) {
      if (++i >= argc) goto missing;
      opt.ptx = argv[i];
    } else if (strcmp(a, "--sign") == 0) {
      if (++i >= argc) goto missing;
      sign_key = argv[i];
    } else if (strcmp(a, "--fusion") == 0) {
      if (++i >= argc) goto missing;
      if (strcmp(argv[i], "auto") == 0) {
        opt.fusion = HKC_FUSION_AUTO;
      } else if (strcmp(argv[i], "none") == 0) {
        opt.fusion = HKC_FUSION_NONE;
      } else {
        fprintf(stderr, "hkc build: --fusion expects auto or none, got '%s'\n", argv[i]);
        return 2;
      }
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "hkc build: unknown option %s\n%s", a, k_build_usage);
      return 2;
    } else if (!opt.spec_path) {
      opt.spec_path = a;
    } else {
      fprintf(stderr, "hkc build: more than one spec given (%s, %s)\n", opt.spec_path, a);
      return 2;
    }
    continue;
  missing:
    fprintf(stderr, "hkc build: %s needs a value\n", a);
    return 2;
  }
  if (!opt.spec_path || !opt.out_path) {
    fprintf(stderr, "hkc build: %s\n%s", !opt.spec_path ? "no spec given" : "no output given (-o OUT)",
            k_build_usage);
    return 2;
  }
  uint8_t seed[HKC_KEY_SEED_BYTES];
  if (sign_key) { /* before compiling: a bad key fails at once */
    if (hkc_key_load(sign_key, seed) != 0) return 1;
    opt.sign_seed = seed;
  }
  opt.tuning_dbs = dbs;
  opt.n_tuning_dbs = n_dbs;
  opt.kernel_options = &ko;
  int rc = start_workers(opt.jobs, compile_timeout) != 0 || hkc_build(&opt) != 0 ? 1 : 0;
  hkc_key_wipe(seed, sizeof seed);
  return rc;
}

/* ---- tune ------------------------------------------------------------------------------- */
static int cmd_tune(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(k_tune_usage, stdout);
    return 0;
  }
  hkc_tune_run_options_t opt = {0};
  hkc_kernel_options_t ko = {0};
  if (hkc_kernel_options_from_env(&ko, "hkc tune") != 0) return 2;
  opt.kernel_options = &ko;
  opt.host_threads = host_threads_from_env();
  const char *merge[256];
  size_t n_merge = 0;
  int merging = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    long long v;
    const int kf = kernel_option_flag("tune", argc, argv, &i, &ko, &opt.host_threads);
    if (kf < 0) return 2;
    if (kf > 0) continue;
    if (strcmp(a, "--merge") == 0) {
      merging = 1;
    } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
      if (++i >= argc) goto missing;
      opt.out_path = argv[i];
    } else if (strcmp(a, "-t") == 0 || strcmp(a, "--target") == 0) {
      if (++i >= argc) goto missing;
      opt.target = argv[i];
    } else if (strcmp(a, "--report") == 0) {
      if (++i >= argc) goto missing;
      opt.report_path = argv[i];
    } else if (strcmp(a, "--top") == 0 || strcmp(a, "--runs") == 0 || strcmp(a, "--warmup") == 0 ||
               strcmp(a, "-j") == 0 || strcmp(a, "--jobs") == 0) {
      if (++i >= argc) goto missing;
      if (parse_count(a, argv[i], strcmp(a, "--warmup") == 0 ? 0 : 1, 100000, &v) != 0) return 2;
      if (strcmp(a, "--top") == 0) opt.top = (int)v;
      else if (strcmp(a, "--runs") == 0) opt.runs = (int)v;
      else if (strcmp(a, "--warmup") == 0) opt.warmup = v ? (int)v : -1;
      else opt.jobs = (int)v;
    } else if (strcmp(a, "--no-cache") == 0) {
      opt.no_cache = 1;
    } else if (strcmp(a, "--dry-run") == 0) {
      opt.dry_run = 1;
    } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
      opt.quiet = 1;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "hkc tune: unknown option %s\n%s", a, k_tune_usage);
      return 2;
    } else if (merging) {
      if (n_merge == sizeof merge / sizeof *merge) {
        fprintf(stderr, "hkc tune: more than %zu files to merge\n", sizeof merge / sizeof *merge);
        return 2;
      }
      merge[n_merge++] = a;
    } else if (!opt.spec_path) {
      opt.spec_path = a;
    } else {
      fprintf(stderr, "hkc tune: more than one spec given (%s, %s)\n", opt.spec_path, a);
      return 2;
    }
    continue;
  missing:
    fprintf(stderr, "hkc tune: %s needs a value\n", a);
    return 2;
  }
  if (!opt.out_path && !opt.dry_run) {
    fprintf(stderr, "hkc tune: no output given (-o DB)\n%s", k_tune_usage);
    return 2;
  }
  if (merging) {
    if (n_merge == 0 || opt.spec_path || opt.target || !opt.out_path) {
      fprintf(stderr, "hkc tune --merge: give only database files and -o\n");
      return 2;
    }
    return hkc_tune_db_merge(merge, n_merge, opt.out_path, opt.quiet) == 0 ? 0 : 1;
  }
  if (!opt.spec_path || !opt.target) {
    fprintf(stderr, "hkc tune: %s\n%s", !opt.spec_path ? "no spec given" : "no target given (--target T)", k_tune_usage);
    return 2;
  }
  if (start_workers(opt.jobs, compile_timeout) != 0) return 1;
  return hkc_tune_run(&opt) == 0 ? 0 : 1;
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
 * the session's target when the target table knows it. 0 / -1 (error printed). */
static int print_profile(hk_session_t *session, uint32_t repeats, double graph_us) {
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
  printf("profile: each launch alone, median of %u pass(es) after one warm-up pass", repeats);
  if (arch)
    printf("; floor on %s (%s: %.1f GB/s, %.1f TFLOP/s f16 matrix)\n", arch->name, arch->product, arch->hbm_gbps,
           arch->matrix_tflops_f16);
  else
    printf("; no floor (%s is not a GPU target of hkc's table)\n", hk_session_target(session));
  printf("  %3s  %-*s  %-*s  %11s  %10s  %9s  %8s  %7s\n", "#", w_nodes, "nodes", w_kernel, "kernel", "median us",
         "floor us", "GB/s", "TFLOP/s", "floor%");
  double total = 0, total_floor = 0;
  for (uint32_t i = 0; i < n; i++) {
    hk_launch_info_t li;
    hk_session_launch_info(session, i, &li);
    char floor_s[16] = "-", pct_s[16] = "-", gbs[16] = "-", tfs[16] = "-";
    if (li.bytes) snprintf(gbs, sizeof gbs, "%.1f", (double)li.bytes / us[i] * 1e-3);
    if (li.flops) snprintf(tfs, sizeof tfs, "%.2f", (double)li.flops / us[i] * 1e-6);
    if (arch && li.bytes) {
      double mem = (double)li.bytes / (arch->hbm_gbps * 1e3);
      double math = li.matrix ? (double)li.flops / (arch->matrix_tflops_f16 * 1e6) : 0.0;
      double fl = mem > math ? mem : math;
      total_floor += fl;
      snprintf(floor_s, sizeof floor_s, "%.3f", fl);
      snprintf(pct_s, sizeof pct_s, "%.0f%%", fl / us[i] * 100.0);
    }
    total += us[i];
    printf("  %3u  %-*s  %-*s  %11.3f  %10s  %9s  %8s  %7s\n", i, w_nodes, li.nodes, w_kernel, li.kernel, us[i],
           floor_s, gbs, tfs, pct_s);
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

/* --weights FILE [--weights-map MAP]: opens the checkpoint and binds every param it gives
 * (hk_session_bind_weights). *out_weights and *map stay with the caller, who destroys the
 * weights after the session. 0, or -1 with the problem printed. */
static int bind_weights_file(hk_session_t *session, const char *path, const char *map_path, hk_weights_t **out_weights,
                             hkc_weights_map_t *map) {
  if (map_path && hkc_weights_map_read(map_path, map) != 0) {
    fprintf(stderr, "hkc run: no usable --weights-map\n");
    return -1;
  }
  if (hk_weights_open_file(path, NULL, out_weights) != HK_OK) {
    fprintf(stderr, "hkc run: --weights: %s\n", hk_last_error());
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
  printf("weights: %u of %u param(s) bound from %s (%u tensor(s) in the file)\n", bound, params, path,
         hk_weights_count(*out_weights));
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
    fprintf(stderr, "  %s %s\n", info.name, shape);
  }
  if (!missing) return 0;
  fprintf(stderr, "hkc run: %u param(s) unbound: give them with --weights FILE.safetensors or --param NAME=FILE.npy, "
                  "or pass --random-params to run on seeded random values\n", missing);
  return -1;
}

/* hkc run; *files_out holds the --input/--param list (grown here, freed by cmd_run). */
static int run_command(int argc, char **argv, named_file_t **files_out) {
  if (want_help(argc, argv)) {
    fputs(k_run_usage, stdout);
    return 0;
  }
  const char *pack_path = NULL, *target = NULL, *save_dir = NULL, *weights_path = NULL, *map_path = NULL;
  long long batch = 0, seed = 1, runs = 10, warmup = 2, repeats = 20;
  int profile = 0, no_pdl = 0, prefer_ptx = 0, require_signature = 0, allow_unsigned_native = 0, random_params = 0;
  trust_opts_t trust = {0};
  named_file_t *files = NULL; /* --input / --param, as many as given (*files_out) */
  int n_files = 0, cap_files = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    int takes_value = strcmp(a, "--target") == 0 || strcmp(a, "--batch") == 0 || strcmp(a, "--seed") == 0 ||
                      strcmp(a, "--input") == 0 || strcmp(a, "--param") == 0 ||
                      strcmp(a, "--save-outputs") == 0 || strcmp(a, "--runs") == 0 || strcmp(a, "--warmup") == 0 ||
                      strcmp(a, "--repeats") == 0 || strcmp(a, "--trust") == 0 || strcmp(a, "--weights") == 0 ||
                      strcmp(a, "--weights-map") == 0;
    if (takes_value && !v) {
      fprintf(stderr, "hkc run: %s needs a value\n", a);
      return 2;
    }
    if (strcmp(a, "--target") == 0) target = v;
    else if (strcmp(a, "--batch") == 0) { if (parse_count(a, v, 1, INT64_MAX / 2, &batch)) return 2; }
    else if (strcmp(a, "--seed") == 0) { if (parse_count(a, v, 0, INT64_MAX, &seed)) return 2; }
    else if (strcmp(a, "--runs") == 0) { if (parse_count(a, v, 1, 1000000, &runs)) return 2; }
    else if (strcmp(a, "--warmup") == 0) { if (parse_count(a, v, 0, 1000000, &warmup)) return 2; }
    else if (strcmp(a, "--repeats") == 0) { if (parse_count(a, v, 1, 100000, &repeats)) return 2; }
    else if (strcmp(a, "--profile") == 0) { profile = 1; continue; }
    else if (strcmp(a, "--no-pdl") == 0) { no_pdl = 1; continue; }
    else if (strcmp(a, "--prefer-ptx") == 0) { prefer_ptx = 1; continue; }
    else if (strcmp(a, "--require-signature") == 0) { require_signature = 1; continue; }
    else if (strcmp(a, "--allow-unsigned-native") == 0) { allow_unsigned_native = 1; continue; }
    else if (strcmp(a, "--trust") == 0) { if (add_trusted_key("run", &trust, v)) return 2; }
    else if (strcmp(a, "--save-outputs") == 0) save_dir = v;
    else if (strcmp(a, "--weights") == 0) weights_path = v;
    else if (strcmp(a, "--weights-map") == 0) map_path = v;
    else if (strcmp(a, "--random-params") == 0) { random_params = 1; continue; }
    else if (strcmp(a, "--input") == 0 || strcmp(a, "--param") == 0) {
      char *eq = strchr(v, '=');
      if (!eq || eq == v || !eq[1]) {
        fprintf(stderr, "hkc run: %s expects NAME=FILE.npy, got '%s'\n", a, v);
        return 2;
      }
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
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "hkc run: unknown option %s\n%s", a, k_run_usage);
      return 2;
    } else if (!pack_path) {
      pack_path = a;
      continue;
    } else {
      fprintf(stderr, "hkc run: more than one pack given\n");
      return 2;
    }
    i++;
  }
  if (!pack_path || (map_path && !weights_path)) {
    fprintf(stderr, "hkc run: %s\n%s", pack_path ? "--weights-map needs --weights" : "no pack given", k_run_usage);
    return 2;
  }

  int rc = 1;
  hk_pack_t *pack = NULL;
  hk_session_t *session = NULL;
  uint32_t n_tensors = 0;
  void **buffers = NULL;  /* host staging copies */
  void **device = NULL;   /* the session's memory (device memory on GPU targets) */
  hk_weights_t *weights = NULL;
  hkc_weights_map_t map = {0};
  hk_pack_open_options_t oo = {.struct_size = sizeof oo, .trusted_keys = (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])trust.keys,
                                .trusted_key_count = trust.n, .require_signature = (uint32_t)require_signature,
                                .allow_unsigned_native_code = (uint32_t)allow_unsigned_native};
  hk_status_t st = hkc_tool_open_pack("run", pack_path, &oo, &pack);
  if (st != HK_OK) {
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
  if (hk_session_code_kind(session) == HK_CODE_PTX)
    printf("code: PTX of target %s (compute_%s), JIT-compiled by the driver\n", hk_session_target(session),
           hk_session_target(session) + 3);
  else if (strncmp(hk_session_target(session), "sm_", 3) == 0)
    printf("code: SASS of target %s\n", hk_session_target(session));
  else
    printf("code: code object of target %s\n", hk_session_target(session));
  const char *fallback = "";
  const int graph = strcmp(hk_session_launch_mode(session, &fallback), "graph") == 0;
  if (fallback[0])
    fprintf(stderr, "hkc run: warning: graph replay unavailable (%s); running with stream launches\n", fallback);
  const uint32_t pdl = hk_session_pdl_count(session);
  if (pdl)
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
  if (weights_path && bind_weights_file(session, weights_path, map_path, &weights, &map) != 0) goto done;
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
  printf("target %s, batch %lld, bucket %llu%s: median %.3f ms, min %.3f ms over %lld runs (%lld warm-up)\n",
         hk_session_target(session), batch, (unsigned long long)bucket, bucket != (uint64_t)batch ? " (padded)" : "",
         times[runs / 2], times[0], runs, warmup);
  double graph_us = times[runs / 2] * 1e3;
  free(times);
  if (profile && print_profile(session, (uint32_t)repeats, graph_us) != 0) goto done;

  if (save_dir && mkdir(save_dir, 0777) != 0 && errno != EEXIST) {
    fprintf(stderr, "hkc run: cannot create %s: %s\n", save_dir, strerror(errno));
    goto done;
  }
  int bad = 0, save_failed = 0;
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
    printf("  output %s %s: mean %.6g, max |x| %.6g%s\n", info.name, shape, n ? sum / (double)n : 0.0, absmax,
           nonfinite ? "  NON-FINITE VALUES" : "");
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
  if (save_dir && !bad) printf("  outputs saved to %s/\n", save_dir);
  rc = bad ? 1 : 0;
done:
  for (uint32_t t = 0; t < n_tensors; t++) {
    if (buffers) free(buffers[t]);
    if (device) hk_session_free(session, device[t]);
  }
  free(buffers);
  free(device);
  hk_session_destroy(session);
  hk_weights_destroy(weights); /* after the session: host tensors may be bound in place */
  hkc_weights_map_free(&map);
  hk_pack_destroy(pack);
  return rc;
}

static int cmd_run(int argc, char **argv) {
  named_file_t *files = NULL;
  int rc = run_command(argc, argv, &files);
  free(files);
  return rc;
}

/* ---- inspect ---------------------------------------------------------------------------- */
static int cmd_inspect(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(k_inspect_usage, stdout);
    return 0;
  }
  const char *pack = NULL, *kernel = NULL, *target = NULL;
  int plan = 0;
  long long batch = 0;
  trust_opts_t trust = {0};
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--plan") == 0) {
      plan = 1;
    } else if (strcmp(argv[i], "--trust") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "hkc inspect: --trust needs a value\n");
        return 2;
      }
      if (add_trusted_key("inspect", &trust, argv[++i])) return 2;
    } else if (strcmp(argv[i], "--batch") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "hkc inspect: --batch needs a value\n");
        return 2;
      }
      if (parse_count("--batch", argv[++i], 1, INT64_MAX, &batch) != 0) return 2;
    } else if (strcmp(argv[i], "--disasm") == 0 || strcmp(argv[i], "--target") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "hkc inspect: %s needs a value\n", argv[i]);
        return 2;
      }
      *(argv[i][2] == 'd' ? &kernel : &target) = argv[i + 1];
      i++;
    } else if (argv[i][0] == '-' || pack) {
      fprintf(stderr, "hkc inspect: unexpected argument %s\n%s", argv[i], k_inspect_usage);
      return 2;
    } else {
      pack = argv[i];
    }
  }
  if (!pack) {
    fprintf(stderr, "hkc inspect: no pack given\n%s", k_inspect_usage);
    return 2;
  }
  if (plan && kernel) {
    fprintf(stderr, "hkc inspect: --plan and --disasm are separate reports\n");
    return 2;
  }
  if (batch && !plan) {
    fprintf(stderr, "hkc inspect: --batch goes with --plan\n");
    return 2;
  }
  if (plan) return hkc_inspect_plan(pack, (uint64_t)batch, target, stdout) == 0 ? 0 : 1;
  if (target && !kernel) {
    fprintf(stderr, "hkc inspect: --target goes with --disasm or --plan\n");
    return 2;
  }
  if (kernel) return hkc_inspect_disasm(pack, kernel, target, stdout) == 0 ? 0 : 1;
  return hkc_inspect_trusted(pack, (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])trust.keys, trust.n, stdout) == 0 ? 0 : 1;
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

static int cmd_keygen(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(k_keygen_usage, stdout);
    return 0;
  }
  const char *out = NULL;
  int quiet = 0;
  for (int i = 0; i < argc; i++) {
    if ((strcmp(argv[i], "-o") == 0 || strcmp(argv[i], "--output") == 0) && i + 1 < argc) out = argv[++i];
    else if (strcmp(argv[i], "-q") == 0 || strcmp(argv[i], "--quiet") == 0) quiet = 1;
    else {
      fprintf(stderr, "hkc keygen: unexpected argument %s\n%s", argv[i], k_keygen_usage);
      return 2;
    }
  }
  if (!out) {
    fprintf(stderr, "hkc keygen: no output given (-o KEY)\n%s", k_keygen_usage);
    return 2;
  }
  return hkc_key_generate(out, quiet) == 0 ? 0 : 1;
}

static int cmd_sign(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(k_sign_usage, stdout);
    return 0;
  }
  const char *pack = NULL, *key = NULL, *out = NULL;
  int quiet = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--key") == 0 && i + 1 < argc) key = argv[++i];
    else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && i + 1 < argc) out = argv[++i];
    else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) quiet = 1;
    else if (a[0] != '-' && !pack) pack = a;
    else {
      fprintf(stderr, "hkc sign: unexpected argument %s\n%s", a, k_sign_usage);
      return 2;
    }
  }
  if (!pack || !key) {
    fprintf(stderr, "hkc sign: %s\n%s", !pack ? "no pack given" : "no key given (--key KEY)", k_sign_usage);
    return 2;
  }
  return sign_file(pack, key, out ? out : pack, quiet) == 0 ? 0 : 1;
}

/* ---- merge ---------------------------------------------------------------------------------- */
/* The inputs are untrusted: opened through the verifying reader, metadata only (no code is
 * loaded; merge decompresses each target's code itself to check it). */
static int cmd_merge(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(k_merge_usage, stdout);
    return 0;
  }
  const char *out = NULL, *key = NULL;
  const char **paths = calloc((size_t)argc + 1, sizeof *paths);
  size_t n = 0;
  int quiet = 0;
  if (!paths) return 1;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && i + 1 < argc) out = argv[++i];
    else if (strcmp(a, "--sign") == 0 && i + 1 < argc) key = argv[++i];
    else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) quiet = 1;
    else if (a[0] != '-') paths[n++] = a;
    else {
      fprintf(stderr, "hkc merge: unexpected argument %s\n%s", a, k_merge_usage);
      free(paths);
      return 2;
    }
  }
  if (n < 2 || !out) {
    fprintf(stderr, "hkc merge: %s\n%s", !out ? "no output given (-o OUT)" : "give at least two packs", k_merge_usage);
    free(paths);
    return 2;
  }
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
  free(paths);
  free(data);
  return rc;
}

static int cmd_targets(int argc, char **argv) {
  if (want_help(argc, argv)) {
    fputs(k_targets_usage, stdout);
    return 0;
  }
  if (argc) {
    fprintf(stderr, "hkc targets: takes no arguments\n");
    return 2;
  }
  return hkc_print_targets(stdout) == 0 ? 0 : 1;
}

static int dispatch(int argc, char **argv) {
  if (strcmp(argv[1], "build") == 0) return cmd_build(argc - 2, argv + 2);
  if (strcmp(argv[1], "run") == 0) return cmd_run(argc - 2, argv + 2);
  if (strcmp(argv[1], "tune") == 0) return cmd_tune(argc - 2, argv + 2);
  if (strcmp(argv[1], "inspect") == 0) return start_workers(1, compile_timeout) ? 1 : cmd_inspect(argc - 2, argv + 2);
  if (strcmp(argv[1], "keygen") == 0) return cmd_keygen(argc - 2, argv + 2);
  if (strcmp(argv[1], "sign") == 0) return cmd_sign(argc - 2, argv + 2);
  if (strcmp(argv[1], "merge") == 0) return cmd_merge(argc - 2, argv + 2);
  if (strcmp(argv[1], "targets") == 0) return start_workers(0, compile_timeout) ? 1 : cmd_targets(argc - 2, argv + 2);
  fprintf(stderr, "hkc: unknown command '%s'\n%s", argv[1], k_usage);
  return 2;
}

int main(int argc, char **argv) {
  hkc_env_from_process(); /* the stages read no environment themselves */
  if (argc == 2 && strcmp(argv[1], HKC_WORKER_ARG) == 0) _exit(hkc_amd_worker_main()); /* no atexit, no leak report */
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    fputs(k_usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
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
