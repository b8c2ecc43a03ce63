/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc run`: a pack through libhkrt's public API only (the path an application takes), timed.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "codegen/codegen.h"
#include "hk/hkrt.h"
#include "pack_internal.h" /* hk_dtype_label */
#include "tools/tools.h"
#include "util/util.h"

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
    "  --no-user-key          do not trust your own key (only the --trust keys)\n"
    "  --require-signature    refuse a pack that is not signed by a trusted key\n"
    "  --allow-unsigned       run a pack that no trusted key signed (its host code runs in this\n"
    "                         process, its GPU code on the device with this process's device\n"
    "                         memory: only for packs you built yourself);\n"
    "                         --allow-unsigned-native is its older name\n"
    "\n"
    "A pack (host or GPU code) is refused unless signed by a trusted key -- a --trust key, or\n"
    "your own key, with which hkc build signs (docs/CLI.md, \"Signing\") -- or --allow-unsigned\n"
    "is given; a pack whose signature does not verify is always refused (docs/EMBEDDING.md,\n"
    "Trust).\n"
    "\n"
    "environment:\n"
    "  HK_LAUNCH=auto|graph|stream  GPU targets: replay one CUDA/HIP graph per run when the\n"
    "                         driver can build it, else launch kernel by kernel with a warning\n"
    "                         (auto, the default); insist on the graph (graph: an error when it\n"
    "                         cannot be built); or launch kernel by kernel (stream)\n"
    "  HK_HOST_THREADS=N      host target: threads sharing each launch (default: the online CPUs)\n"
    "  HK_HOST_BLAS=auto|off  host target: f32 GEMM products from OpenBLAS (libopenblas.so.0) where\n"
    "                         it is installed (auto, the default), or from hkc's C loops (off);\n"
    "                         hkc run says which\n"
    "  HK_PREFER_PTX=0|1      1: as --prefer-ptx\n";

static void help_run(void) {
  fputs(k_run_usage, stdout);
  hkc_cli_common_help(0, 1);
}

/* hkc run; *files_out holds the --input/--param list (grown here, freed by hkc_cmd_run). */
/* Tensor parallelism on the host (a pack of N ranks): ranks 1 .. N-1 are threads that make the
 * same calls as rank 0 (the main thread) on sessions of their own rank, one host group between
 * them: they bind --weights themselves and the same whole --input / --param buffers rank 0 filled
 * (hk_session_bind_sliced takes each rank's slice), then run as many times as rank 0. The
 * outputs are whole on every rank (gathered); rank 0's are reported. A rank that fails aborts
 * the group, so the others fail instead of waiting. */
typedef struct run_rank {
  hk_pack_t *pack;
  hk_session_options_t so;
  const char *weights_path, *map_path;
  void *const *whole;  /* per session tensor: rank 0's host buffer of the whole tensor, or NULL */
  hkc_tp_t *tp;
  long long runs;
  uint32_t profile_repeats; /* then hk_session_profile, as rank 0 does (0: no --profile) */
  int rc;
  char error[512];
} run_rank_t;

static void *run_rank_main(void *arg) {
  run_rank_t *j = arg;
  hkc_tp_rank_t rank;
  void **outs = NULL;
  uint32_t n = 0;
  j->rc = 1;
  if (hkc_tp_rank_open(&rank, j->pack, &j->so, j->weights_path, j->map_path) != 0) goto done;
  hk_session_t *session = rank.session;
  n = hk_session_tensor_count(session);
  if (!(outs = calloc(n ? n : 1, sizeof *outs))) goto done;
  for (uint32_t t = 0; t < n; t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(session, t, &info);
    if (info.role == HK_TENSOR_OUTPUT) {
      if (hk_session_alloc(session, info.bytes, &outs[t]) != HK_OK ||
          hk_session_bind(session, info.name, outs[t], info.bytes) != HK_OK)
        goto done;
    } else if (j->whole[t]) {
      hk_tensor_info_t whole;
      hk_session_tensor_whole_info(session, t, &whole);
      if (hk_session_bind_sliced(session, info.name, j->whole[t], whole.bytes) != HK_OK) goto done;
    }
  }
  if (hkc_tp_follow(session, j->runs, j->profile_repeats) != 0) goto done;
  j->rc = 0;
done:
  if (j->rc) hkc_tp_rank_fail(j->tp, j->error, sizeof j->error);
  for (uint32_t t = 0; outs && t < n; t++) hk_session_free(rank.session, outs[t]);
  free(outs);
  hkc_tp_rank_close(&rank);
  return NULL;
}

static int run_command(int argc, char **argv, hkc_named_file_t **files_out) {
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
      {"allow-unsigned", no_argument, NULL, OPT_ALLOW_UNSIGNED}, {"no-user-key", no_argument, NULL, OPT_NO_USER_KEY},
      {"random-params", no_argument, NULL, OPT_RANDOM_PARAMS}, JSON_LONG_OPTION, COMMON_LONG_OPTIONS,
      {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "run", "hkc run PACK [options]", help_run, 1);
  const char *pack_path = NULL, *target = NULL, *save_dir = NULL, *weights_path = NULL, *map_path = NULL;
  long long batch = 0, seed = 1, runs = 10, warmup = 2, repeats = 20;
  int profile = 0, no_pdl = 0, prefer_ptx = 0, require_signature = 0, allow_unsigned = 0, random_params = 0;
  int user_key = 1;
  hkc_trust_opts_t trust = {0};
  hkc_named_file_t *files = NULL; /* --input / --param, as many as given (*files_out) */
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
    case OPT_ALLOW_UNSIGNED_NATIVE:
    case OPT_ALLOW_UNSIGNED: allow_unsigned = 1; break;
    case OPT_NO_USER_KEY: user_key = 0; break;
    case OPT_RANDOM_PARAMS: random_params = 1; break;
    case OPT_TRUST: if (hkc_trusted_key_add("run", &trust, v)) return 2; break;
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
        hkc_named_file_t *grown = realloc(files, (size_t)cap_files * sizeof *grown);
        if (!grown) {
          fprintf(stderr, "hkc run: out of memory\n");
          return 1;
        }
        files = *files_out = grown;
      }
      *eq = '\0';
      files[n_files++] = (hkc_named_file_t){v, eq + 1};
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
  hkc_tp_t tp = {0};
  uint32_t ranks = 0, started = 0;
  pthread_t threads[HKC_TP_MAX_RANKS];
  run_rank_t *jobs = NULL;
  if (user_key) hkc_user_key_trust("run", &trust);
  hk_pack_open_options_t oo = {.struct_size = sizeof oo, .trusted_keys = (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])trust.keys,
                                .trusted_key_count = trust.n, .require_signature = (uint32_t)require_signature,
                                .allow_unsigned_code = (uint32_t)allow_unsigned};
  hk_status_t st = hkc_tool_open_pack("run", pack_path, &oo, &pack);
  if (st != HK_OK) {
    cJSON_Delete(json);
    return 1;
  }
  if (batch == 0) batch = (long long)hk_pack_batch_size(pack, 0);
  hk_session_options_t so = {.struct_size = sizeof so, .batch = (uint64_t)batch, .target = target,
                             .no_pdl = (uint32_t)no_pdl};
  if (hkc_run_options_from_env(&so) != 0) {
    rc = 2;
    goto done;
  }
  if (prefer_ptx) so.prefer_ptx = 1;
  ranks = hk_pack_tensor_ranks(pack);
  if (ranks >= 1) { /* rank 0 here, the others on threads (run_rank_main) */
    if (hkc_tp_open(&tp, pack, target, "run") != 0) goto done;
    hkc_tp_options(&tp, 0, &so);
  }
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
  const char *blas_reason = "", *blas = hk_session_host_blas(session, &blas_reason);
  if (!quiet && strncmp(hk_session_target(session), "host", 4) == 0) {
    printf("host gemm: %s%s%s\n", blas[0] ? blas : "C loops", blas_reason[0] ? ": " : "", blas_reason);
    printf("host isa: %s\n", hk_session_host_isa(session));
  }
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
  char wbuf[4200];
  const char *wpath = hkc_tp_rank_path(weights_path, 0, wbuf, sizeof wbuf); /* rank 0's, or the whole one */
  if (wpath && hkc_run_bind_weights_file(session, wpath, map_path, &weights, &weights_image, &map, quiet, json) != 0)
    goto done;
  if (json && !weights_path) cJSON_AddNullToObject(json, "weights");
  if (hkc_run_check_params_given(session, files, n_files, random_params) != 0) goto done;
  buffers = calloc(n_tensors ? n_tensors : 1, sizeof *buffers);
  device = calloc(n_tensors ? n_tensors : 1, sizeof *device);
  if (!buffers || !device) goto done;
  for (uint32_t t = 0; t < n_tensors; t++) {
    hk_tensor_info_t info, whole;
    hk_session_tensor_info(session, t, &info);
    hk_session_tensor_whole_info(session, t, &whole);
    const int sliced = whole.bytes != info.bytes; /* a rank's slice of a param: filled whole */
    const char *bind_name = info.name; /* whole.name: a `_shard` copy's source, whose file and values it takes */
    if (sliced) info = whole;
    buffers[t] = malloc(info.bytes ? info.bytes : 1);
    if (!buffers[t]) {
      fprintf(stderr, "hkc run: out of memory for tensor %s (%zu bytes)\n", info.name, info.bytes);
      goto done;
    }
    const char *npy_path = hkc_run_find_named(files, n_files, info.name);
    if (info.role != HK_TENSOR_OUTPUT && !npy_path && hk_session_tensor_bound(session, t)) {
      free(buffers[t]); /* bound from --weights */
      buffers[t] = NULL;
      continue;
    }
    if (info.role == HK_TENSOR_OUTPUT) {
      memset(buffers[t], 0xff, info.bytes); /* NaN in every element type */
    } else if (hkc_run_fill_tensor(&info, buffers[t], npy_path, (uint64_t)seed) != 0) {
      goto done;
    }
    if (sliced) {
      if (hk_session_bind_sliced(session, bind_name, buffers[t], info.bytes) != HK_OK) {
        fprintf(stderr, "hkc run: %s\n", hk_last_error());
        goto done;
      }
      continue;
    }
    if (hk_session_alloc(session, info.bytes, &device[t]) != HK_OK ||
        hk_session_copy(session, device[t], buffers[t], info.bytes, HK_COPY_HOST_TO_DEVICE) != HK_OK ||
        hk_session_bind(session, info.name, device[t], info.bytes) != HK_OK) {
      fprintf(stderr, "hkc run: %s\n", hk_last_error());
      goto done;
    }
  }

  if (ranks > 1) {
    if (!(jobs = calloc(ranks, sizeof *jobs))) goto done;
    for (uint32_t r = 1; r < ranks; r++) {
      jobs[r] = (run_rank_t){.pack = pack, .so = so, .weights_path = weights_path, .map_path = map_path,
                             .whole = buffers, .runs = warmup + runs,
                             .profile_repeats = profile ? (uint32_t)repeats : 0};
      hkc_tp_options(&tp, r, &jobs[r].so);
      jobs[r].tp = &tp;
      if (pthread_create(&threads[r - 1], NULL, run_rank_main, &jobs[r]) != 0) {
        fprintf(stderr, "hkc run: cannot start the thread of rank %u\n", r);
        goto done;
      }
      started++;
    }
  }
  double *times = calloc((size_t)runs, sizeof *times);
  if (!times) goto done;
  for (long long r = 0; r < warmup + runs; r++) {
    double t0 = hkc_run_now_ms();
    st = hk_session_run(session, NULL);
    if (st == HK_OK) st = hk_session_synchronize(session, NULL);
    double t1 = hkc_run_now_ms();
    if (st != HK_OK) {
      fprintf(stderr, "hkc run: %s\n", hk_last_error());
      free(times);
      goto done;
    }
    if (r >= warmup) times[r - warmup] = t1 - t0;
  }
  qsort(times, (size_t)runs, sizeof *times, hkc_run_cmp_double);
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
  if (profile && hkc_run_print_profile(session, (uint32_t)repeats, graph_us, json) != 0) goto done;
  if (json && !profile) cJSON_AddNullToObject(json, "profile");
  for (; started > 0; started--) pthread_join(threads[started - 1], NULL); /* their runs and profile pair with ours */
  for (uint32_t r = 1; r < ranks; r++)
    if (jobs[r].rc) {
      fprintf(stderr, "hkc run: rank %u of %u: %s\n", r, ranks, jobs[r].error);
      goto done;
    }

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
    size_t n = hkc_run_info_count(&info), nonfinite = 0;
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
    hkc_run_format_shape(&info, shape, sizeof shape);
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
  if (started) hkc_tp_abort(&tp); /* the other ranks may wait in a collective: end them */
  for (; started > 0; started--) pthread_join(threads[started - 1], NULL);
  free(jobs);
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
  hkc_tp_close(&tp); /* after every session of it */
  hk_pack_destroy(pack);
  cJSON_Delete(json);
  return rc;
}

int hkc_cmd_run(int argc, char **argv) {
  hkc_named_file_t *files = NULL;
  int rc = run_command(argc, argv, &files);
  free(files);
  return rc;
}
