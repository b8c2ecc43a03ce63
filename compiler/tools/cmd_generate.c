/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc generate`: prefill and decode with a generation pack (docs/GENERATE.md).
 */
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "hk/hkrt.h"
#include "tools/tools.h"
#include "util/util.h"

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
    "  --no-user-key, --require-signature, --allow-unsigned (--allow-unsigned-native), --no-pdl,\n"
    "  --prefer-ptx\n"
    "                         as hkc run (every param must be given unless --random-params)\n"
    "  --profile              then time every launch of the decode step's graph alone beside\n"
    "                         its floor, as hkc run --profile\n"
    "  --repeats R            passes of --profile (default 20)\n"
    "  --json                 the result as one JSON document on stdout\n"
    "  -q, --quiet            print nothing but errors\n";

static void help_generate(void) {
  fputs(k_generate_usage, stdout);
  hkc_cli_common_help(0, 1);
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

/* Binds every param nothing bound yet to seeded random values (hkc run --random-params). A
 * tensor-parallel rank's sliced param: the whole tensor filled, the rank's slice bound (every
 * rank fills the same whole tensor). */
static int bind_random_params(hk_session_t *session, uint64_t seed, void ***owned, uint32_t *n_owned) {
  const uint32_t n = hk_session_tensor_count(session);
  *owned = calloc(n ? n : 1, sizeof **owned);
  if (!*owned) return -1;
  *n_owned = n;
  for (uint32_t t = 0; t < n; t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(session, t, &info);
    if (info.role != HK_TENSOR_PARAM || hk_session_tensor_bound(session, t)) continue;
    hk_tensor_info_t whole;
    hk_session_tensor_whole_info(session, t, &whole);
    if (whole.bytes != info.bytes) {
      void *host = malloc(whole.bytes ? whole.bytes : 1);
      int rc = host ? hkc_run_fill_tensor(&whole, host, NULL, seed) : -1;
      if (rc == 0 && hk_session_bind_sliced(session, info.name, host, whole.bytes) != HK_OK) {
        fprintf(stderr, "hkc generate: %s\n", hk_last_error());
        rc = -1;
      }
      free(host);
      if (rc != 0) return -1;
      continue;
    }
    void *host = malloc(info.bytes ? info.bytes : 1);
    int rc = host ? hkc_run_fill_tensor(&info, host, NULL, seed) : -1;
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
  double t0 = hkc_run_now_ms();
  if (hk_generator_append(g, p->n, slots, toks, p->len, next) != HK_OK) {
    fprintf(stderr, "hkc generate: %s\n", hk_last_error());
    goto done;
  }
  r->ttft_ms = hkc_run_now_ms() - t0;
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
    t0 = hkc_run_now_ms();
    if (hk_generator_append(g, n_live, slots, toks, ones, next) != HK_OK) {
      fprintf(stderr, "hkc generate: %s\n", hk_last_error());
      goto done;
    }
    r->step_ms[r->steps++] = hkc_run_now_ms() - t0;
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

/* Tensor parallelism on the host (a pack of N ranks): ranks 1 .. N-1 are threads of this process
 * that make the same calls as rank 0 (the main thread) on sessions of their own rank, sharing
 * one host group; their ids are the same as rank 0's (every rank samples from the gathered
 * logits), so only rank 0's are printed. A rank that fails aborts the group, which fails the
 * others' next collective instead of leaving them waiting. */
typedef struct rank_job {
  hk_pack_t *pack;
  hk_session_options_t so;
  const char *weights_path, *map_path;
  const prompts_t *prompts;
  uint32_t max_new;
  const int32_t *stop;
  int n_stop;
  const hk_sampling_t *sampling; /* per prompt; NULL: greedy */
  hkc_tp_t *tp;
  int random_params;
  uint64_t seed;
  int profile;       /* then, as rank 0 does: 64 replays of the last step and hk_session_profile */
  uint32_t repeats;
  int rc;
  char error[512];
} rank_job_t;

static void *rank_main(void *arg) {
  rank_job_t *j = arg;
  hkc_tp_rank_t rank;
  hk_generator_t *gen = NULL;
  gen_result_t res = {0};
  void **random_bufs = NULL;
  uint32_t n_random = 0;
  j->rc = 1;
  if (hkc_tp_rank_open(&rank, j->pack, &j->so, j->weights_path, j->map_path) != 0) goto done;
  hk_session_t *session = rank.session;
  if (j->random_params && bind_random_params(session, j->seed, &random_bufs, &n_random) != 0) goto done;
  if (hk_generator_create(session, &gen) != HK_OK) goto done;
  for (uint32_t i = 0; j->sampling && i < j->prompts->n; i++)
    if (hk_generator_set_sampling(gen, i, &j->sampling[i]) != HK_OK) goto done;
  if (generate_all(gen, j->prompts, j->max_new, j->stop, j->n_stop, &res) != 0) goto done;
  if (j->profile && res.steps && hkc_tp_follow(session, 64, j->repeats) != 0) goto done;
  j->rc = 0;
done:
  if (j->rc) hkc_tp_rank_fail(j->tp, j->error, sizeof j->error);
  free(res.out);
  free(res.count);
  free(res.step_ms);
  hk_generator_destroy(gen);
  for (uint32_t t = 0; t < n_random; t++) hk_session_free(rank.session, random_bufs[t]);
  free(random_bufs);
  hkc_tp_rank_close(&rank);
  return NULL;
}

int hkc_cmd_generate(int argc, char **argv) {
  static const struct option longopts[] = {
      {"target", required_argument, NULL, 't'}, {"ids", required_argument, NULL, OPT_IDS},
      {"max-new-tokens", required_argument, NULL, 'n'}, {"stop", required_argument, NULL, OPT_STOP},
      {"seed", required_argument, NULL, OPT_SEED}, {"repeats", required_argument, NULL, OPT_REPEATS},
      {"trust", required_argument, NULL, OPT_TRUST}, {"weights", required_argument, NULL, OPT_WEIGHTS},
      {"weights-map", required_argument, NULL, OPT_WEIGHTS_MAP}, {"profile", no_argument, NULL, OPT_PROFILE},
      {"no-pdl", no_argument, NULL, OPT_NO_PDL}, {"prefer-ptx", no_argument, NULL, OPT_PREFER_PTX},
      {"require-signature", no_argument, NULL, OPT_REQUIRE_SIGNATURE},
      {"allow-unsigned-native", no_argument, NULL, OPT_ALLOW_UNSIGNED_NATIVE},
      {"allow-unsigned", no_argument, NULL, OPT_ALLOW_UNSIGNED}, {"no-user-key", no_argument, NULL, OPT_NO_USER_KEY},
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
  int profile = 0, no_pdl = 0, prefer_ptx = 0, require_signature = 0, allow_unsigned = 0, random_params = 0;
  int user_key = 1;
  hkc_trust_opts_t trust = {0};
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
    case OPT_ALLOW_UNSIGNED_NATIVE:
    case OPT_ALLOW_UNSIGNED: allow_unsigned = 1; break;
    case OPT_NO_USER_KEY: user_key = 0; break;
    case OPT_RANDOM_PARAMS: random_params = 1; break;
    case OPT_TRUST: if (hkc_trusted_key_add("generate", &trust, v)) return 2; break;
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
  hkc_tp_t tp = {0};
  pthread_t threads[HKC_TP_MAX_RANKS];
  rank_job_t *jobs = NULL;
  uint32_t ranks = 1, started = 0;
  hk_sampling_t *sampling = NULL;
  if (user_key) hkc_user_key_trust("generate", &trust);
  hk_pack_open_options_t oo = {.struct_size = sizeof oo, .trusted_keys = (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])trust.keys,
                                .trusted_key_count = trust.n, .require_signature = (uint32_t)require_signature,
                                .allow_unsigned_code = (uint32_t)allow_unsigned};
  if (hkc_tool_open_pack("generate", pack_path, &oo, &pack) != HK_OK) return 1;
  hk_session_options_t so = {.struct_size = sizeof so, .batch = hk_pack_batch_size(pack, 0), .target = target,
                             .no_pdl = (uint32_t)no_pdl};
  if (hkc_run_options_from_env(&so) != 0) {
    rc = 2;
    goto done;
  }
  if (prefer_ptx) so.prefer_ptx = 1;
  ranks = hk_pack_tensor_ranks(pack);
  if (ranks >= 1) { /* rank 0 here, the others on threads (rank_main) */
    if (hkc_tp_open(&tp, pack, target, "generate") != 0) goto done;
    hkc_tp_options(&tp, 0, &so);
  }
  if (hk_session_create(pack, &so, &session) != HK_OK) {
    fprintf(stderr, "hkc generate: %s\n", hk_last_error());
    goto done;
  }
  char wbuf[4200];
  const char *wpath = hkc_tp_rank_path(weights_path, 0, wbuf, sizeof wbuf); /* rank 0's, or the whole one */
  if (wpath && hkc_run_bind_weights_file(session, wpath, map_path, &weights, &weights_image, &map, 1, NULL) != 0)
    goto done;
  if (hkc_run_check_params_given(session, NULL, 0, random_params) != 0) goto done;
  if (bind_random_params(session, (uint64_t)seed, &random_bufs, &n_random) != 0) goto done;
  if (hk_generator_create(session, &gen) != HK_OK) {
    fprintf(stderr, "hkc generate: %s\n", hk_last_error());
    goto done;
  }
  if (prompts_read(id_paths, n_ids, hk_generator_slots(gen), &prompts) != 0) goto done;
  if (!(sampling = calloc(prompts.n ? prompts.n : 1, sizeof *sampling))) goto done;
  for (uint32_t i = 0; i < prompts.n && temperature > 0; i++) {
    sampling[i] = (hk_sampling_t){.temperature = (float)temperature, .top_k = (int32_t)top_k, .top_p = (float)top_p,
                                  .seed = (uint32_t)((uint64_t)sample_seed + i)};
    if (hk_generator_set_sampling(gen, i, &sampling[i]) != HK_OK) {
      fprintf(stderr, "hkc generate: %s\n", hk_last_error());
      goto done;
    }
  }
  if (ranks > 1) {
    if (!(jobs = calloc(ranks, sizeof *jobs))) goto done;
    for (uint32_t r = 1; r < ranks; r++) {
      jobs[r] = (rank_job_t){.pack = pack, .so = so, .weights_path = weights_path, .map_path = map_path,
                             .prompts = &prompts, .max_new = (uint32_t)max_new, .stop = stop, .n_stop = n_stop,
                             .sampling = temperature > 0 ? sampling : NULL, .random_params = random_params,
                             .seed = (uint64_t)seed, .profile = profile, .repeats = (uint32_t)repeats};
      hkc_tp_options(&tp, r, &jobs[r].so);
      jobs[r].tp = &tp;
      if (pthread_create(&threads[r - 1], NULL, rank_main, &jobs[r]) != 0) {
        fprintf(stderr, "hkc generate: cannot start the thread of rank %u\n", r);
        hkc_tp_abort(&tp);
        goto done;
      }
      started++;
    }
  }
  const int gen_rc = generate_all(gen, &prompts, (uint32_t)max_new, stop, n_stop, &res);
  if (gen_rc != 0) goto done; /* done: the other ranks aborted and joined, their errors printed */

  double *sorted = calloc(res.steps ? res.steps : 1, sizeof *sorted), decode_ms = 0;
  if (!sorted) goto done;
  for (uint32_t i = 0; i < res.steps; i++) decode_ms += sorted[i] = res.step_ms[i];
  qsort(sorted, res.steps, sizeof *sorted, hkc_run_cmp_double);
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
      const double t0 = hkc_run_now_ms();
      if (hk_session_run(session, NULL) != HK_OK || hk_session_synchronize(session, NULL) != HK_OK) {
        fprintf(stderr, "hkc generate: %s\n", hk_last_error());
        rc = 1;
      }
      graph[r] = hkc_run_now_ms() - t0;
    }
    qsort(graph, 64, sizeof *graph, hkc_run_cmp_double);
    if (rc == 0 && !quiet)
      printf("decode step: %.3f ms (inputs copied in, graph replay, ids copied out); the graph replay alone %.3f ms: "
             "%.3f ms of host work per step\n", median, graph[32], median - graph[32]);
    if (rc == 0 && json) {
      cJSON_AddNumberToObject(json, "graph_ms", graph[32]);
      cJSON_AddNumberToObject(json, "host_ms_per_step", median - graph[32]);
    }
    if (rc == 0 && hkc_run_print_profile(session, (uint32_t)repeats, graph[32] * 1e3, json) != 0) rc = 1;
  }
  if (rc != 0 && started) hkc_tp_abort(&tp); /* the other ranks' runs and profile pair with ours */
  for (; started > 0; started--) pthread_join(threads[started - 1], NULL);
  for (uint32_t r = 1; r < ranks && jobs; r++)
    if (jobs[r].rc) {
      fprintf(stderr, "hkc generate: rank %u of %u: %s\n", r, ranks, jobs[r].error);
      rc = 1;
    }
  if (json && hkc_json_end(json, stdout) != 0) rc = 1;
  json = NULL;
done:
  if (started) hkc_tp_abort(&tp); /* the other ranks may wait in a collective: end them */
  for (; started > 0; started--) pthread_join(threads[started - 1], NULL);
  for (uint32_t r = 1; rc && r < ranks && jobs; r++)
    if (jobs[r].rc && jobs[r].error[0]) fprintf(stderr, "hkc generate: rank %u of %u: %s\n", r, ranks, jobs[r].error),
                                         jobs[r].error[0] = '\0';
  free(jobs);
  free(sampling);
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
  hkc_tp_close(&tp); /* after every session of it */
  hk_pack_destroy(pack);
  cJSON_Delete(json);
  return rc;
}
