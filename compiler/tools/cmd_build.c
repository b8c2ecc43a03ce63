/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc build`: its options, the --weights checkpoint it maps and the --json summary; the build
 * itself is hkc_build() (driver/build.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "codegen/codegen.h"
#include "driver/driver.h"
#include "hk/hkrt.h"
#include "pack/pack.h"
#include "pack_internal.h" /* hk_pack_view: the verified records, for --json */
#include "tools/tools.h"
#include "tune/tune.h"
#include "util/util.h"

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
    "  --tensor-parallel N    split the graph over N ranks (overriding the spec's\n"
    "                         `parallel:`): the gemms marked `shard:` take their slices,\n"
    "                         collectives join them; the pack is one rank's graphs (docs/SPEC.md,\n"
    "                         Tensor parallelism; host target only in this version)\n"
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
    "                         as hkc sign after the build) instead of your own key\n"
    "  --no-sign              write an unsigned artifact (it runs only where unsigned code is\n"
    "                         allowed: hkc run --allow-unsigned, allow_unsigned_code)\n"
    "  --cache-max-size SIZE  after the build, remove the compile cache's least recently used\n"
    "                         entries until it holds at most SIZE (500M, 2G, ...; as hkc cache\n"
    "                         clean --max-size; default $HKC_CACHE_MAX_SIZE, else no cap)\n"
    "  --json                 a summary of the build as one JSON document on stdout (docs/CLI.md)\n"
    "  -q, --quiet            no summary, no progress\n"
    "  -v, --verbose          progress: a line per item done (tuning candidate, kernel, host\n"
    "                         unit, pack)\n"
    "\n"
    "Signing: by default the artifact is signed with your own key ($HKC_KEY, else\n"
    "$XDG_CONFIG_HOME/hkc/key, else ~/.config/hkc/key; created on first use, mode 0600), which\n"
    "hkc run, hkc generate and the Python package trust; an application trusts the keys it\n"
    "names (docs/CLI.md, \"Signing\").\n"
    "\n"
    "Progress goes to stderr, by phase (the tuner's candidate compiles per target, each\n"
    "target's kernel compiles, the host unit, the pack), each with its total: on a terminal\n"
    "one line \"[done/total] phase: item\" rewritten in place; otherwise (a log, a pipe) a\n"
    "plain line per phase and the summary.\n"
    "\n"
    "environment: the HKC_* variables above map onto their kernel options (boolean ones: set\n"
    "and not 0 = 1; flags win over them); HKC_CACHE_DIR: the compile cache; HKC_CACHE_MAX_SIZE:\n"
    "its size cap.\n";

/* --compile-timeout: the AMD worker processes' limit per compile (hkc_cli_start_workers). */
static int compile_timeout = HKC_DEFAULT_COMPILE_TIMEOUT_S;

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
  hkc_cli_common_help(1, 1);
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
  if (hkc_weights_file_format(path) == HKC_WEIGHTS_NPZ) {
    fprintf(stderr, "hkc build: --weights %s: an .npz archive; hkc build stores safetensors checkpoints only (hkc "
                    "run --weights reads .npz)\n", path);
    return -1;
  }
  struct stat st;
  int fd = hkc_open_input(path, UINT64_MAX, &st); /* never blocks on a FIFO; regular files only */
  if (fd < 0) {
    fprintf(stderr, "hkc build: --weights %s: %s\n", path, hkc_strerror(errno));
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

int hkc_cmd_build(int argc, char **argv) {
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
      {"no-sign", no_argument, NULL, OPT_NO_SIGN},
      {"fusion", required_argument, NULL, OPT_FUSION}, {"fusion-report", no_argument, NULL, OPT_FUSION_REPORT},
      {"tensor-parallel", required_argument, NULL, OPT_TENSOR_PARALLEL},
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
  opt.host_threads = hkc_cli_host_threads_env();
  uint64_t cache_cap;
  if (hkc_cli_cache_cap_env(&cli, &cache_cap) != 0) return cli.rc;
  const char *dbs[64], *sign_key = NULL, *weights_path = NULL, *map_path = NULL;
  size_t n_dbs = 0;
  long long v;
  int c, no_sign = 0;
  while ((c = hkc_cli_next(&cli, argc, argv, "o:t:j:", longopts)) != -1) {
    switch (c) {
    case HKC_CLI_STOP: return cli.rc;
    case OPT_KERNEL_OPTION:
    case OPT_HOST_THREADS:
      if (hkc_cli_kernel_option(&cli, c, optarg, &ko, &opt.host_threads) != 0) return cli.rc;
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
    case OPT_NO_SIGN: no_sign = 1; break;
    case OPT_WEIGHTS: weights_path = optarg; break;
    case OPT_WEIGHTS_MAP: map_path = optarg; break;
    case OPT_FUSION:
      if (strcmp(optarg, "auto") == 0) opt.fusion = HKC_FUSION_AUTO;
      else if (strcmp(optarg, "none") == 0) opt.fusion = HKC_FUSION_NONE;
      else return hkc_cli_usage(&cli, "--fusion expects auto or none, got '%s'", optarg), cli.rc;
      break;
    case OPT_FUSION_REPORT: opt.fusion_report = 1; break;
    case OPT_TENSOR_PARALLEL: {
      long long tp;
      if (hkc_cli_count(&cli, "--tensor-parallel", optarg, 1, HK_MAX_TENSOR_RANKS, &tp)) return cli.rc;
      opt.tensor_parallel = (int)tp;
      break;
    }
    default: return hkc_cli_usage(&cli, "unhandled option"), cli.rc;
    }
  }
  if (optind < argc) opt.spec_path = argv[optind++];
  if (optind < argc) return hkc_cli_usage(&cli, "more than one spec given (%s, %s)", opt.spec_path, argv[optind]), 2;
  if (!opt.spec_path || !opt.out_path)
    return hkc_cli_usage(&cli, "%s", !opt.spec_path ? "no spec given" : "no output given (-o OUT)"), 2;
  if (map_path && !weights_path) return hkc_cli_usage(&cli, "--weights-map needs --weights"), 2;
  if (sign_key && no_sign) return hkc_cli_usage(&cli, "--sign KEY and --no-sign exclude each other"), 2;
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
  if (!no_sign) { /* before compiling: a bad key fails at once */
    if ((sign_key ? hkc_key_load(sign_key, seed) : hkc_user_key_load("build", cli.quiet, seed)) != 0) {
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
  int rc = hkc_cli_start_workers(opt.jobs, compile_timeout) != 0 || hkc_build(&opt) != 0 ? 1 : 0;
  hkc_key_wipe(seed, sizeof seed);
  build_weights_close(&bw);
  if (!opt.no_cache) hkc_cli_apply_cache_cap(&cli, cache_cap);
  if (rc == 0 && cli.json && build_json(&opt, &stats) != 0) rc = 1;
  return rc;
}
