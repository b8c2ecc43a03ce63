/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc tune SPEC --target T -o tuning.db`: measured tuning on the machine that has the GPU
 * (docs/TUNING.md).
 *
 * The spec is lowered as `hkc build` lowers it; every distinct tunable launch (launch class:
 * kernel key + sizes, over all nodes and batch buckets) is tuned once:
 *   1. every candidate configuration of its key is compiled (GPU targets: all of them, on
 *      the compile pool through the cache) and pruned as the build prunes (failed compile,
 *      spills, over the register file / shared memory, occupancy floor);
 *   2. the model ranks the survivors; the top K (--top, 12) are measured, plus the default
 *      configuration and the model's first choice if they are not among them (host: the
 *      first K in enumeration order, the default first);
 *   3. each measured candidate becomes a one-launch pack in memory (the candidate's code
 *      object, the launch's tensors as inputs and output) run through libhkrt -- the path an
 *      application takes -- on shared random inputs: warm-up, then the median of --runs
 *      samples, each sample R back-to-back runs and one synchronize (R chosen so that a
 *      sample takes about 1 ms), clock_gettime around them;
 *   4. every candidate's output is checked against the default configuration's (same
 *      inputs; differences are only the f32 summation order); a candidate whose output
 *      differs, or is not finite, is rejected with a warning;
 *   5. the fastest valid candidate is written as the class's database entry.
 * Progress goes to stderr; the table (default / model / measured per class) to stdout and
 * to --report FILE (Markdown).
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "frontend/frontend.h"
#include "hk/hkrt.h"
#include "lower/lower.h"
#include "pack/pack.h"
#include "rtc/rtc.h"
#include "tools/tools.h"
#include "tune/tune.h"
#include "util/util.h"

#define TUNE_DEFAULT_TOP 12
#define TUNE_DEFAULT_RUNS 15
#define TUNE_DEFAULT_WARMUP 3
#define TUNE_SAMPLE_SECONDS 1e-3 /* a sample's length: launch overhead amortized, noise averaged */
#define TUNE_MAX_REPS 1000
/* A candidate that has not finished its runs after this long hangs (the slowest launch of
 * the bundled specs' shapes takes ~2 ms; a candidate's runs ~50 of them): stop with its name
 * instead of waiting for the machine's limit. The database written so far stays. */
#define TUNE_WATCHDOG_SECONDS 120

/* The candidate packs are built in this process's memory a moment before they run: their code
 * (host or GPU) is hkc's own, so the trust policy's signature would add nothing (hkrt.h). */
static const hk_pack_open_options_t k_own_pack = {.struct_size = sizeof(hk_pack_open_options_t),
                                                  .allow_unsigned_code = 1};

static char g_watch_label[256]; /* the candidate running, for the watchdog's message */

static void watchdog(int sig) {
  (void)sig;
  static const char head[] = "\nhkc tune: candidate ", tail[] = " did not finish its runs within the watchdog's "
                                                                  "time (a hang?); stopped. The database holds the "
                                                                  "launches tuned before it.\n";
  ssize_t w = write(2, head, sizeof head - 1);
  w = write(2, g_watch_label, strnlen(g_watch_label, sizeof g_watch_label));
  w = write(2, tail, sizeof tail - 1);
  (void)w;
  _exit(3);
}

/* One launch class: the first launch that has it and everything measured for it. */
typedef struct tune_class {
  hkc_kernel_key_t key;       /* lowered, untuned */
  hkc_tune_shape_t shape;
  size_t node;                /* first node and bucket using it */
  int bucket;
  char nodes[160];            /* "qkv_proj@1, qkv_proj@8" (node@batch) */
  hkc_tune_cand_t *cands;
  int n_cands;
  int *order;
  int n_order;
  double *time_us;            /* per candidate; 0 = not measured, < 0 = rejected */
  int best, model, def;       /* candidate indices; -1 when none */
} tune_class_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}


/* ---- the one-launch pack of a candidate ----------------------------------------------------- */
typedef struct mini {
  hkc_spec_t spec;
  hkc_tensor_t tensors[HKC_MAX_ARGS];
  int map[HKC_MAX_ARGS];      /* mini tensor -> spec tensor */
  hkc_launch_t launch;
  int out;                    /* the mini tensor the launch writes */
} mini_t;

/* The launch's tensors with their sizes at the bucket, as inputs (and the output). */
static int mini_init(mini_t *m, const hkc_spec_t *spec, size_t node, int bucket) {
  memset(m, 0, sizeof *m);
  const int64_t batch = spec->batch_sizes[bucket];
  hkc_kernel_key_t key;
  int n_args = hkc_lower_node(spec, node, batch, &key, m->launch.args);
  if (n_args < 0) return -1;
  m->launch.n_args = (uint32_t)n_args;
  m->launch.node_name = spec->nodes[node].name;
  m->out = -1;
  size_t n = 0;
  for (int a = 0; a < n_args; a++) {
    hkc_arg_t *arg = &m->launch.args[a];
    if (arg->kind != HK_ARG_TENSOR) continue;
    size_t j = 0;
    while (j < n && m->map[j] != (int)arg->i) j++;
    if (j == n) {
      const hkc_tensor_t *src = &spec->tensors[arg->i];
      hkc_tensor_t *t = &m->tensors[n];
      *t = *src;
      t->producer = -1;
      for (uint32_t d = 0; d < t->rank; d++) t->dims[d] = (hkc_dim_t){0, hkc_dim_value(src->dims[d], batch)};
      const int written = (int)arg->i == spec->nodes[node].out || (int)arg->i == spec->nodes[node].sum_out;
      t->role = written ? HK_ROLE_OUTPUT : HK_ROLE_INPUT;
      if ((int)arg->i == spec->nodes[node].out) m->out = (int)j;
      m->map[n++] = (int)arg->i;
    }
    arg->i = (int64_t)j;
  }
  m->spec.name = "tune";
  m->spec.dtype = spec->dtype;
  m->spec.batch_sizes[0] = 1;
  m->spec.n_batch = 1;
  m->spec.tensors = m->tensors;
  m->spec.n_tensors = n;
  return m->out >= 0 ? 0 : -1;
}

/* Writes the pack of one candidate (its code object and launch) into memory. */
static int mini_pack(mini_t *m, const char *target, const hkc_gpu_arch_t *arch, hkc_kernel_out_t *kernel, void *code,
                     size_t code_size, void **out_data, size_t *out_size) {
  uint64_t placements[HKC_MAX_ARGS];
  for (size_t i = 0; i < m->spec.n_tensors; i++) placements[i] = HK_PLACEMENT_NONE;
  hkc_launch_t launch = m->launch;
  launch.kernel = 0;
  /* the launch's own workspace (a split GEMM's scratch and counters) is the whole arena: the
   * mini pack's tensors are all bound by the application */
  hkc_node_workspace_t ws = {.scratch_offset = HK_PLACEMENT_NONE};
  if (arch) {
    hkc_gpu_launch_dims(arch, &kernel->key, launch.args, launch.n_args, launch.grid, launch.block, &launch.shared_bytes);
    const hkc_toolchain_t *tc = hkc_toolchain_for_arch(arch);
    if (tc && tc->launch_workspace) tc->launch_workspace(arch, &kernel->key, launch.args, launch.n_args, &ws);
    if (tc && tc->launch_args) /* extra arguments (TMA tensor maps) over the mini pack's tensor indices */
      launch.n_args = tc->launch_args(arch, &kernel->key, launch.args, launch.n_args, HKC_MAX_ARGS);
    ws.scratch_offset = 0;
    launch.n_args = hkc_plan_workspace_args(&ws, launch.args, launch.n_args, HKC_MAX_ARGS);
  } else
    hkc_host_launch_dims(&kernel->key, launch.args, launch.n_args, launch.grid, launch.block);
  kernel->code_offset = 0;
  kernel->code_size = code_size;
  kernel->max_block = launch.block[0] * launch.block[1] * launch.block[2];
  const uint64_t arena = (ws.scratch_bytes + HKC_ARENA_ALIGN - 1) / HKC_ARENA_ALIGN * HKC_ARENA_ALIGN;
  hkc_graph_out_t graph = {.batch = 1, .placements = placements, .launches = &launch, .n_launches = 1,
                           .workspace_bytes = arena, .semaphore_count = ws.counters};
  hkc_target_out_t t;
  memset(&t, 0, sizeof t);
  t.kind = arch ? arch->kind : HK_TARGET_HOST;
  const char *colon = strchr(target, ':');
  if (arch) {
    snprintf(t.name, sizeof t.name, "%.*s", colon ? (int)(colon - target) : (int)strlen(target), target);
    snprintf(t.features, sizeof t.features, "%s", colon ? colon + 1 : "");
  } else {
    snprintf(t.name, sizeof t.name, "%s", hkc_host_target_name());
  }
  t.code = code;
  t.code_size = code_size;
  t.kernels = kernel;
  t.n_kernels = 1;
  t.graphs = &graph;
  t.n_graphs = 1;
  hkc_pack_in_t in = {.spec = &m->spec, .targets = &t, .n_targets = 1, .provenance = "tune=1\n", .compression_level = 1};
  return hkc_pack_write_memory(&in, out_data, out_size);
}

/* ---- measuring ---------------------------------------------------------------------------------- */
/* The buffers of a class, allocated by the first session and shared by the others. */
typedef struct buffers {
  hk_session_t *holder;
  hk_pack_t *holder_pack;
  void *holder_data;
  void *dev[HKC_MAX_ARGS];
  size_t bytes[HKC_MAX_ARGS];
  void *poison;               /* NaN bytes for the output */
  void *ref;                  /* the reference output (host, element type of the output) */
  void *got;
  int have_ref;
} buffers_t;

static void buffers_free(buffers_t *b, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (b->dev[i]) hk_session_free(b->holder, b->dev[i]);
  hk_session_destroy(b->holder);
  hk_pack_destroy(b->holder_pack);
  free(b->holder_data);
  free(b->poison);
  free(b->ref);
  free(b->got);
  memset(b, 0, sizeof *b);
}

/* Random inputs: uniform [-1, 1), the second gemm operand scaled by 1/sqrt(K) so that
 * outputs stay O(1); each tensor's stream depends only on its position. */
static int buffers_fill(buffers_t *b, hk_session_t *s, const mini_t *m, int64_t k) {
  for (size_t i = 0; i < m->spec.n_tensors; i++) {
    const hkc_tensor_t *t = &m->tensors[i];
    size_t count = (size_t)hkc_tensor_elems(t, 1), bytes = count * hkc_dtype_size(t->dtype);
    void *host = malloc(bytes ? bytes : 1);
    if (!host) return -1;
    if ((int)i == m->out) memset(host, 0xff, bytes);
    else {
      uint64_t seed = 0x7475e3e5u + i;
      const double scale = i == 1 && k > 0 ? 1.0 / sqrt((double)k) : 1.0;
      for (size_t e = 0; e < count; e++) hkc_store_elem(host, (int)t->dtype, e, (float)hkc_uniform_pm(&seed, scale));
    }
    b->bytes[i] = bytes;
    hk_status_t st = hk_session_alloc(s, bytes, &b->dev[i]);
    if (st == HK_OK) st = hk_session_copy(s, b->dev[i], host, bytes, HK_COPY_HOST_TO_DEVICE);
    if ((int)i == m->out) b->poison = host;
    else free(host);
    if (st != HK_OK) {
      hkc_error((hkc_loc_t){0}, "tune: %s", hk_last_error());
      return -1;
    }
  }
  b->ref = malloc(b->bytes[m->out] ? b->bytes[m->out] : 1);
  b->got = malloc(b->bytes[m->out] ? b->bytes[m->out] : 1);
  return b->ref && b->got ? 0 : -1;
}

/* Compares the output with the reference: within two units in the last place of the type
 * (f32 summation order) relative to the output's largest magnitude or the element's own.
 * Returns the number of bad elements. */
static size_t output_check(const void *got, const void *ref, hk_dtype_t dtype, size_t count, double *out_err) {
  const double rel = dtype == HK_DTYPE_BF16 ? 1.6e-2 : dtype == HK_DTYPE_F16 ? 2e-3 : 1e-4;
  double amax = 0;
  for (size_t i = 0; i < count; i++) amax = fmax(amax, fabs(hkc_load_elem(ref, (int)dtype, i)));
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < count; i++) {
    const double g = hkc_load_elem(got, (int)dtype, i), r = hkc_load_elem(ref, (int)dtype, i);
    const double err = fabs(g - r);
    if (!isfinite(g) || err > rel * (fabs(r) + 0.05 * amax)) bad++;
    if (err > worst || !isfinite(g)) worst = isfinite(g) ? err : INFINITY;
  }
  *out_err = worst;
  return bad;
}

/* Options of a measuring session: batch 1 of `target`; on the host as many threads as the
 * tuning model counts units (hkc_tune_units), so the measurements match what it assumes. */
static hk_session_options_t tune_session_options(const hkc_tune_run_options_t *o, const char *target) {
  return (hk_session_options_t){.struct_size = sizeof(hk_session_options_t), .batch = 1, .target = target,
                                .host_threads = (uint32_t)hkc_tune_units(NULL, o->host_threads)};
}

/* Runs one candidate's pack: binds the class buffers, warms up, checks the output, times.
 * Returns the median time in microseconds, or -1 (reported as a warning) when it cannot run
 * or its output is wrong. Creates the buffers with the first session it opens. */
static double measure(const hkc_tune_run_options_t *o, buffers_t *b, const mini_t *m, const char *label, void *data,
                      size_t size, int64_t k) {
  hk_pack_t *pack = NULL;
  hk_session_t *s = NULL;
  double result = -1;
  int keep = 0;
  const char *colon = strchr(o->target, ':');
  char target[64];
  if (strcmp(o->target, "host") == 0) snprintf(target, sizeof target, "%s", hkc_host_target_name());
  else snprintf(target, sizeof target, "%.*s", colon ? (int)(colon - o->target) : (int)strlen(o->target), o->target);
  hk_session_options_t so = tune_session_options(o, target);
  if (hk_pack_open_memory_ex(data, size, &k_own_pack, &pack) != HK_OK || hk_session_create(pack, &so, &s) != HK_OK) {
    hkc_warning((hkc_loc_t){0}, "tune: %s: %s", label, hk_last_error());
    goto done;
  }
  if (!b->holder) {
    b->holder = s;
    b->holder_pack = pack;
    b->holder_data = data;
    keep = 1;
    if (buffers_fill(b, s, m, k) != 0) goto done;
  }
  for (size_t i = 0; i < m->spec.n_tensors; i++)
    if (hk_session_bind(s, m->tensors[i].name, b->dev[i], b->bytes[i]) != HK_OK) {
      hkc_warning((hkc_loc_t){0}, "tune: %s: %s", label, hk_last_error());
      goto done;
    }
  const size_t out_bytes = b->bytes[m->out];
  hk_status_t st = hk_session_copy(s, b->dev[m->out], b->poison, out_bytes, HK_COPY_HOST_TO_DEVICE);
  /* at least one run: its output is what gets checked */
  const int warmup = o->warmup < 0 ? 1 : o->warmup > 0 ? o->warmup : TUNE_DEFAULT_WARMUP;
  for (int w = 0; st == HK_OK && w < warmup; w++) {
    st = hk_session_run(s, NULL);
    if (st == HK_OK) st = hk_session_synchronize(s, NULL);
  }
  if (st == HK_OK) st = hk_session_copy(s, b->have_ref ? b->got : b->ref, b->dev[m->out], out_bytes, HK_COPY_DEVICE_TO_HOST);
  if (st != HK_OK) {
    hkc_warning((hkc_loc_t){0}, "tune: %s: %s", label, hk_last_error());
    goto done;
  }
  const size_t count = out_bytes / hkc_dtype_size(m->tensors[m->out].dtype);
  double err = 0;
  if (!b->have_ref) {
    size_t bad = output_check(b->ref, b->ref, m->tensors[m->out].dtype, count, &err);
    if (bad) {
      hkc_warning((hkc_loc_t){0}, "tune: %s: %zu output element(s) not finite; rejected", label, bad);
      goto done;
    }
    b->have_ref = 1;
  } else {
    size_t bad = output_check(b->got, b->ref, m->tensors[m->out].dtype, count, &err);
    if (bad) {
      hkc_warning((hkc_loc_t){0}, "tune: %s: %zu of %zu output elements differ from the reference configuration's "
                  "(largest difference %g); rejected", label, bad, count, err);
      goto done;
    }
  }
  /* repetitions per sample from one timed run */
  double t0 = now_s();
  st = hk_session_run(s, NULL);
  if (st == HK_OK) st = hk_session_synchronize(s, NULL);
  const double one = now_s() - t0;
  int reps = one > 0 ? (int)ceil(TUNE_SAMPLE_SECONDS / one) : TUNE_MAX_REPS;
  if (reps < 1) reps = 1;
  if (reps > TUNE_MAX_REPS) reps = TUNE_MAX_REPS;
  const int runs = o->runs > 0 ? o->runs : TUNE_DEFAULT_RUNS;
  double *samples = calloc((size_t)runs, sizeof *samples);
  if (!samples) goto done;
  for (int r = 0; st == HK_OK && r < runs; r++) {
    t0 = now_s();
    for (int i = 0; st == HK_OK && i < reps; i++) st = hk_session_run(s, NULL);
    if (st == HK_OK) st = hk_session_synchronize(s, NULL);
    samples[r] = (now_s() - t0) / reps;
  }
  if (st == HK_OK) {
    qsort(samples, (size_t)runs, sizeof *samples, cmp_double);
    result = samples[runs / 2] * 1e6;
  } else {
    hkc_warning((hkc_loc_t){0}, "tune: %s: %s", label, hk_last_error());
  }
  free(samples);
done:
  if (!keep) {
    hk_session_destroy(s);
    hk_pack_destroy(pack);
    free(data);
  }
  return result;
}

/* ---- the driver ------------------------------------------------------------------------------------ */
static void class_free(tune_class_t *c) {
  free(c->cands);
  free(c->order);
  free(c->time_us);
}

/* Compiles one candidate of a one-translation-unit toolchain (the host's C compiler): a
 * one-kernel unit. */
static int unit_compile(const hkc_toolchain_t *tc, hkc_kernel_out_t *k, void **out_code, size_t *out_size) {
  char *src = tc->codegen_unit(k, 1);
  if (!src) return -1;
  hkc_rtc_result_t r = {0};
  int rc = tc->compile(src, NULL, NULL, &r);
  if (rc != 0 && r.log) hkc_error((hkc_loc_t){0}, "%s", r.log);
  k->source_hash = hkc_hash64(src, strlen(src));
  free(src);
  *out_code = rc == 0 ? r.code : NULL;
  *out_size = rc == 0 ? r.code_size : 0;
  if (rc == 0) r.code = NULL;
  hkc_rtc_result_free(&r);
  return rc;
}

static double ratio_pct(double num, double den) { return den > 0 && num > 0 ? 100.0 * num / den : 0; }

/* Whether this machine runs the target: one candidate (a class's first, its default)
 * compiled, packed and given a session. 0, or -1 after reporting why not (no GPU, no
 * driver, another GPU) -- before minutes of compiling for nothing. */
static int runnable(const hkc_tune_run_options_t *o, const hkc_spec_t *spec, const hkc_gpu_arch_t *arch,
                    const tune_class_t *tc) {
  hkc_kernel_out_t kernel;
  memset(&kernel, 0, sizeof kernel);
  kernel.key = tc->cands[0].key;
  hkc_kernel_key_name(&kernel.key, kernel.name, sizeof kernel.name);
  hkc_compile_item_t item = {.target = o->target, .arch = arch, .kernel = &kernel};
  if (hkc_compile_gpu_items(&item, 1, 1, o->no_cache, o->cache_dir, NULL, NULL) != 0) {
    hkc_error((hkc_loc_t){0}, "tune: %s did not compile for %s:\n%s", kernel.name, o->target,
              item.result.log ? item.result.log : "(no log)");
    hkc_rtc_result_free(&item.result);
    return -1;
  }
  mini_t m;
  void *data = NULL;
  size_t size = 0;
  int rc = -1;
  kernel.vgprs = item.result.vgprs;
  kernel.wave_size = arch->wave_size;
  if (mini_init(&m, spec, tc->node, tc->bucket) == 0 &&
      mini_pack(&m, o->target, arch, &kernel, item.result.code, item.result.code_size, &data, &size) == 0) {
    hk_pack_t *pack = NULL;
    hk_session_t *s = NULL;
    const char *colon = strchr(o->target, ':');
    char target[64];
    snprintf(target, sizeof target, "%.*s", colon ? (int)(colon - o->target) : (int)strlen(o->target), o->target);
    hk_session_options_t so = tune_session_options(o, target);
    if (hk_pack_open_memory_ex(data, size, &k_own_pack, &pack) == HK_OK && hk_session_create(pack, &so, &s) == HK_OK)
      rc = 0;
    else
      hkc_error((hkc_loc_t){0}, "tune: this machine cannot run %s: %s (measured tuning runs where the GPU is; "
                "--dry-run ranks without one)", o->target, hk_last_error());
    hk_session_destroy(s);
    hk_pack_destroy(pack);
  }
  free(data);
  hkc_rtc_result_free(&item.result);
  return rc;
}

int hkc_tune_run(const hkc_tune_run_options_t *o) {
  hkc_spec_t *spec = NULL;
  tune_class_t *classes = NULL;
  size_t n_classes = 0;
  hkc_compile_item_t *items = NULL;
  hkc_kernel_out_t *kouts = NULL;
  size_t n_items = 0;
  hkc_tune_db_t db = {0};
  FILE *report = NULL; /* an in-memory stream, written to report_path at the end (atomically) */
  char *report_text = NULL;
  size_t report_size = 0;
  cJSON *json = NULL, *jlaunches = NULL; /* --json: the document (docs/CLI.md, "tune") */
  int rc = -1;
  const int top = o->top > 0 ? o->top : TUNE_DEFAULT_TOP;
  const hkc_gpu_arch_t *arch = NULL;
  char why[512];

  const hkc_toolchain_t *tc_entry = hkc_toolchain_for_target(o->target, &arch, NULL, 0);
  if (!tc_entry) {
    hkc_error((hkc_loc_t){0}, "tune: unknown target %s (one of host, sm_80, sm_90, sm_90a, gfx90a, ...)", o->target);
    return -1;
  }
  if (tc_entry->available(why, sizeof why) != 0) {
    hkc_error((hkc_loc_t){0}, "tune: %s needs its toolchain: %s", o->target, why);
    return -1;
  }
  if (hkc_spec_load(o->spec_path, &spec) != 0) return -1;
  /* As hkc_build() plans for this target alone, so the launch classes are that build's
   * (database lookups also match entries of the same shape with another epilogue, see
   * hkc_tune_db_find). A build of several targets plans on all of them and may fuse
   * differently (hkc build --fusion-report shows it). */
  const hkc_gpu_arch_t *archs[1] = {arch};
  if (hkc_fuse_for_targets(spec, -1, archs, 1, o->kernel_options, NULL) != 0) {
    hkc_spec_destroy(spec);
    return -1;
  }

  /* 1. launch classes, bucket-major (the build's order) */
  size_t cap_classes = 0;
  for (int b = 0; b < spec->n_batch; b++)
    for (size_t i = 0; i < spec->n_nodes; i++) {
      hkc_kernel_key_t key;
      hkc_arg_t args[HKC_MAX_ARGS];
      if (hkc_node_left_out(spec, i, spec->batch_sizes[b])) continue; /* no launch (folded into its gemms) */
      int n_args = hkc_lower_node(spec, i, spec->batch_sizes[b], &key, args);
      if (n_args < 0) goto done;
      if (!arch) { /* as hkc build keys host kernels */
        key.align = 0;
        if (!key.rope) key.head_dim = 0;
      }
      hkc_tune_shape_t shape;
      if (!hkc_tune_shape_of(arch, &key, args, (uint32_t)n_args, &shape)) continue;
      size_t c = 0;
      while (c < n_classes && !(hkc_kernel_key_equal(&classes[c].key, &key) && hkc_tune_shape_equal(classes[c].shape, shape)))
        c++;
      if (c == n_classes) { /* a new class: room for it, zeroed */
        if (hkc_reserve((void **)&classes, &cap_classes, n_classes + 1, sizeof *classes) != 0) goto oom;
        memset(&classes[c], 0, sizeof *classes);
      }
      tune_class_t *tc = &classes[c];
      size_t len = strlen(tc->nodes);
      if (len + 2 < sizeof tc->nodes)
        snprintf(tc->nodes + len, sizeof tc->nodes - len, "%s%s@%lld", len ? ", " : "", spec->nodes[i].name,
                 (long long)spec->batch_sizes[b]);
      if (c < n_classes) continue;
      n_classes++;
      tc->key = key;
      tc->shape = shape;
      tc->node = i;
      tc->bucket = b;
      tc->best = tc->model = tc->def = -1;
      tc->cands = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *tc->cands);
      tc->order = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *tc->order);
      tc->time_us = calloc(HKC_TUNE_MAX_CANDIDATES, sizeof *tc->time_us);
      if (!tc->cands || !tc->order || !tc->time_us) goto oom;
      tc->n_cands = hkc_tune_cands_for(arch, o->kernel_options, &key, tc->cands, HKC_TUNE_MAX_CANDIDATES);
    }
  if (!o->quiet) fprintf(stderr, "hkc tune: %s for %s: %zu launch class(es)\n", spec->name, o->target, n_classes);

  /* 2. compile every candidate of every distinct key (GPU), prune, rank -- after checking,
   * with the first class's default, that this machine runs the target at all */
  if (arch && !o->dry_run && n_classes && classes[0].n_cands && runnable(o, spec, arch, &classes[0]) != 0) goto done;
  if (arch) {
    size_t cap = 0;
    for (size_t c = 0; c < n_classes; c++) cap += (size_t)classes[c].n_cands;
    items = calloc(cap ? cap : 1, sizeof *items);
    kouts = calloc(cap ? cap : 1, sizeof *kouts);
    if (!items || !kouts) goto oom;
    for (size_t c = 0; c < n_classes; c++)
      for (int j = 0; j < classes[c].n_cands; j++) {
        const hkc_kernel_key_t *key = &classes[c].cands[j].key;
        size_t k = 0;
        while (k < n_items && !hkc_kernel_key_equal(&kouts[k].key, key)) k++;
        if (k < n_items) continue;
        kouts[k].key = *key;
        hkc_kernel_key_name(key, kouts[k].name, sizeof kouts[k].name);
        items[k] = (hkc_compile_item_t){.target = o->target, .arch = arch, .kernel = &kouts[k]};
        n_items++;
      }
    if (!o->quiet) fprintf(stderr, "hkc tune: compiling %zu candidate kernel(s)\n", n_items);
    double t0 = now_s();
    /* on a terminal, "[done/total] compile TARGET: kernel" rewritten in place */
    hkc_reporter_t *progress = hkc_reporter_create(o->quiet ? HKC_PROGRESS_OFF : HKC_PROGRESS_TTY, "hkc tune");
    char phase[80];
    snprintf(phase, sizeof phase, "compile %s", o->target);
    const int id = hkc_reporter_begin(progress, phase, n_items, "candidate kernel(s)");
    for (size_t k = 0; k < n_items; k++) items[k].phase = id;
    size_t failed = hkc_compile_gpu_items(items, n_items, o->jobs, o->no_cache, o->cache_dir, progress, NULL);
    hkc_reporter_destroy(progress);
    if (!o->quiet)
      fprintf(stderr, "hkc tune: compiled in %.1f s, %zu failed (dropped)\n", now_s() - t0, failed);
    for (size_t c = 0; c < n_classes; c++)
      for (int j = 0; j < classes[c].n_cands; j++)
        for (size_t k = 0; k < n_items; k++)
          if (hkc_kernel_key_equal(&kouts[k].key, &classes[c].cands[j].key))
            hkc_tune_cand_resources(arch, &classes[c].cands[j], &items[k]);
  }
  for (size_t c = 0; c < n_classes; c++) {
    tune_class_t *tc = &classes[c];
    tc->n_order = hkc_tune_rank(arch, &tc->key, tc->shape, tc->cands, tc->n_cands, tc->order);
    /* what `hkc build --tune model` would take (it compiles only its estimated top 3) */
    tc->model = hkc_tune_model_choice(arch, &tc->key, tc->shape, tc->cands, tc->n_cands, 0);
    for (int j = 0; j < tc->n_cands; j++)
      if (tc->cands[j].cfg.is_default && !tc->cands[j].pruned) tc->def = j;
    if (tc->model < 0) tc->model = tc->def; /* the build falls back to the default */
  }

  if (o->json) {
    if (!(json = hkc_json_begin("tune"))) goto oom;
    cJSON_AddStringToObject(json, "spec", o->spec_path);
    cJSON_AddStringToObject(json, "target", o->target);
    cJSON_AddBoolToObject(json, "dry_run", o->dry_run != 0);
    jlaunches = cJSON_AddArrayToObject(json, "launches");
  }
  if (o->dry_run) { /* the model's ranking, nothing run */
    const char *unit = tc_entry->compute_unit;
    for (size_t c = 0; c < n_classes; c++) {
      tune_class_t *tc = &classes[c];
      char sig[160];
      hkc_tune_signature(&tc->key, tc->shape, sig, sizeof sig);
      int pruned = 0;
      for (int j = 0; j < tc->n_cands; j++) pruned += tc->cands[j].pruned != NULL;
      cJSON *jl = NULL, *jrank = NULL;
      if (json) {
        jl = cJSON_CreateObject();
        cJSON_AddItemToArray(jlaunches, jl);
        cJSON_AddStringToObject(jl, "signature", sig);
        cJSON_AddStringToObject(jl, "nodes", tc->nodes);
        cJSON_AddNumberToObject(jl, "candidates", tc->n_cands);
        cJSON_AddNumberToObject(jl, "pruned", pruned);
        jrank = cJSON_AddArrayToObject(jl, "ranking");
      } else {
        printf("%s (%s): %d candidate(s), %d pruned\n", sig, tc->nodes, tc->n_cands, pruned);
      }
      const double flops = hkc_tune_shape_flops(&tc->key, tc->shape);
      /* the top, then the default and the build's choice when they are not among it */
      int list[HKC_TUNE_MAX_CANDIDATES + 2], ranks[HKC_TUNE_MAX_CANDIDATES + 2], n_list = 0, shown_def = 0, shown_model = 0;
      for (int r = 0; r < tc->n_order && r < top; r++) {
        shown_def |= tc->order[r] == tc->def;
        shown_model |= tc->order[r] == tc->model;
        ranks[n_list] = r + 1;
        list[n_list++] = tc->order[r];
      }
      if (!shown_def && tc->def >= 0) ranks[n_list] = 0, list[n_list++] = tc->def;
      if (!shown_model && tc->model >= 0 && tc->model != tc->def) ranks[n_list] = 0, list[n_list++] = tc->model;
      for (int i = 0; i < n_list; i++) {
        const int j = list[i];
        const hkc_tune_cand_t *cand = &tc->cands[j];
        char pos[8];
        snprintf(pos, sizeof pos, ranks[i] ? "%2d." : " - ", ranks[i]);
        const char *mark = j == tc->model && j == tc->def ? "  (default, build's choice)"
                           : j == tc->model            ? "  (build's choice)"
                           : j == tc->def              ? "  (default)"
                                                       : "";
        if (jrank) {
          cJSON *jc = cJSON_CreateObject();
          cJSON_AddItemToArray(jrank, jc);
          if (ranks[i]) cJSON_AddNumberToObject(jc, "rank", ranks[i]);
          else cJSON_AddNullToObject(jc, "rank");
          cJSON_AddStringToObject(jc, "variant", cand->cfg.variant);
          cJSON_AddStringToObject(jc, "params", cand->cfg.tune);
          if (arch) cJSON_AddNumberToObject(jc, "estimate_us", cand->est.seconds * 1e6);
          else cJSON_AddNullToObject(jc, "estimate_us");
          cJSON_AddBoolToObject(jc, "default", j == tc->def);
          cJSON_AddBoolToObject(jc, "model_choice", j == tc->model);
        } else if (arch)
          printf("  %s %-14s %-28s %9.2f us %7.1f TFLOP/s  %-9s tiles %-6lld %u/%s%s\n", pos, cand->cfg.variant,
                 cand->cfg.tune, cand->est.seconds * 1e6, flops / cand->est.seconds / 1e12, cand->est.limiter,
                 (long long)cand->est.tiles, cand->per_cu, unit, mark);
        else
          printf("  %s %-14s %s%s\n", pos, cand->cfg.variant, cand->cfg.tune, mark);
      }
    }
    rc = 0;
    if (json) {
      cJSON_AddNullToObject(json, "output");
      if (hkc_json_end(json, stdout) != 0) rc = -1;
      json = NULL;
    }
    goto done;
  }

  /* 3. measure */
  const int units = hkc_tune_units(arch, o->host_threads);
  char toolchain[160];
  hkc_tune_toolchain(arch, toolchain, sizeof toolchain);
  for (size_t c = 0; c < n_classes; c++) {
    tune_class_t *tc = &classes[c];
    char sig[160];
    hkc_tune_signature(&tc->key, tc->shape, sig, sizeof sig);
    /* the measured set: default first (the reference), then the ranking's top, the model's pick */
    int set[HKC_TUNE_MAX_CANDIDATES + 2], n_set = 0, has_model = tc->model < 0 || tc->model == tc->def;
    if (tc->def >= 0) set[n_set++] = tc->def;
    for (int r = 0; r < tc->n_order && r < top; r++)
      if (tc->order[r] != tc->def) {
        set[n_set++] = tc->order[r];
        has_model |= tc->order[r] == tc->model;
      }
    if (!has_model) set[n_set++] = tc->model;
    if (!o->quiet) fprintf(stderr, "[%zu/%zu] %s (%s): %d candidate(s), %d after pruning, measuring %d\n", c + 1,
                           n_classes, sig, tc->nodes, tc->n_cands, tc->n_order, n_set);
    mini_t m;
    if (mini_init(&m, spec, tc->node, tc->bucket) != 0) {
      hkc_error((hkc_loc_t){0}, "tune: cannot build the launch of %s", sig);
      goto done;
    }
    buffers_t bufs;
    memset(&bufs, 0, sizeof bufs);
    for (int s = 0; s < n_set; s++) {
      hkc_tune_cand_t *cand = &tc->cands[set[s]];
      hkc_kernel_out_t kernel;
      memset(&kernel, 0, sizeof kernel);
      kernel.key = cand->key;
      hkc_kernel_key_name(&cand->key, kernel.name, sizeof kernel.name);
      void *code = NULL, *data = NULL;
      size_t code_size = 0, size = 0;
      char label[160];
      snprintf(label, sizeof label, "%s %s", cand->cfg.variant, cand->cfg.tune);
      if (arch) {
        for (size_t k = 0; k < n_items; k++)
          if (hkc_kernel_key_equal(&kouts[k].key, &cand->key)) {
            code = items[k].result.code;
            code_size = items[k].result.code_size;
            kernel.vgprs = items[k].result.vgprs;
            kernel.shared_bytes = cand->shared;
            kernel.wave_size = arch->wave_size;
          }
      } else if (unit_compile(tc_entry, &kernel, &code, &code_size) != 0) {
        tc->time_us[set[s]] = -1;
        continue;
      }
      int packed = code && mini_pack(&m, o->target, arch, &kernel, code, code_size, &data, &size) == 0;
      if (!arch) free(code);
      if (!packed) {
        hkc_warning((hkc_loc_t){0}, "tune: %s: %s: cannot build its pack", sig, label);
        tc->time_us[set[s]] = -1;
        continue;
      }
      snprintf(g_watch_label, sizeof g_watch_label, "%s %s for %s", cand->cfg.variant, cand->cfg.tune, sig);
      signal(SIGALRM, watchdog);
      alarm(TUNE_WATCHDOG_SECONDS);
      double us = measure(o, &bufs, &m, label, data, size, tc->shape.k);
      alarm(0);
      tc->time_us[set[s]] = us;
      if (us > 0 && (tc->best < 0 || us < tc->time_us[tc->best])) tc->best = set[s];
      if (!o->quiet) fprintf(stderr, "    %-14s %-28s %10.2f us%s\n", cand->cfg.variant, cand->cfg.tune, us,
                             set[s] == tc->model ? "  (model's choice)" : set[s] == tc->def ? "  (default)" : "");
    }
    buffers_free(&bufs, m.spec.n_tensors);
    if (tc->best < 0) {
      hkc_warning((hkc_loc_t){0}, "tune: %s: no candidate ran; no entry written", sig);
      continue;
    }
    const hkc_tune_cand_t *best = &tc->cands[tc->best];
    hkc_tune_entry_t e = {.target = (char *)(arch ? arch->name : hkc_host_target_name()), .units = units,
                          .toolchain = toolchain, .signature = sig, .variant = (char *)best->cfg.variant,
                          .params = (char *)best->cfg.tune, .time_us = tc->time_us[tc->best]};
    if (hkc_tune_db_put(&db, &e, 1) < 0) goto oom;
    if (hkc_tune_db_write(&db, o->out_path) != 0) goto done; /* so far: a later hang or crash keeps these */
  }

  /* 4. the database and the table */
  if (hkc_tune_db_write(&db, o->out_path) != 0) goto done;
  if (o->report_path && !(report = open_memstream(&report_text, &report_size))) goto oom;
  double log_model = 0, log_default = 0;
  int n_model = 0, n_default = 0;
  for (size_t c = 0; c < n_classes; c++) {
    const tune_class_t *tc = &classes[c];
    if (tc->best < 0) continue;
    const double tb = tc->time_us[tc->best];
    if (tc->model >= 0 && tc->time_us[tc->model] > 0) log_model += log(tb / tc->time_us[tc->model]), n_model++;
    if (tc->def >= 0 && tc->time_us[tc->def] > 0) log_default += log(tb / tc->time_us[tc->def]), n_default++;
  }
  for (int pass = 0; pass < 2; pass++) {
    FILE *f = pass == 0 ? stdout : report;
    if (!f || (pass == 0 && (o->quiet || json))) continue;
    fprintf(f, "| launch (%s, %s) | nodes@batch | default | model's choice | model | measured best | best | "
               "model / best | default / best |\n|---|---|---|---|---:|---|---:|---:|---:|\n",
            o->target, toolchain);
    for (size_t c = 0; c < n_classes; c++) {
      const tune_class_t *tc = &classes[c];
      if (tc->best < 0) continue;
      char sig[160];
      hkc_tune_signature(&tc->key, tc->shape, sig, sizeof sig);
      const double tb = tc->time_us[tc->best];
      const double tm = tc->model >= 0 ? tc->time_us[tc->model] : 0, td = tc->def >= 0 ? tc->time_us[tc->def] : 0;
      fprintf(f, "| %s | %s | %.2f us | %s %s | %.2f us | %s %s | %.2f us | %.1f%% | %.1f%% |\n", sig, tc->nodes, td,
              tc->model >= 0 ? tc->cands[tc->model].cfg.variant : "-", tc->model >= 0 ? tc->cands[tc->model].cfg.tune : "",
              tm, tc->cands[tc->best].cfg.variant, tc->cands[tc->best].cfg.tune, tb, ratio_pct(tb, tm), ratio_pct(tb, td));
    }
    fprintf(f, "\ngeomean of best / model (throughput of the model's choice relative to the measured best): %.1f%% "
               "over %d launch(es); default / best: %.1f%% over %d\n",
            n_model ? 100.0 * exp(log_model / n_model) : 0.0, n_model, n_default ? 100.0 * exp(log_default / n_default) : 0.0,
            n_default);
  }
  if (report) {
    char msg[4200];
    const int bad = fclose(report) != 0;
    report = NULL;
    if (bad) goto oom;
    const hkc_chunk_t chunk = {report_text, report_size};
    if (hkc_file_replace(o->report_path, &chunk, 1, 0666, msg, sizeof msg) != 0) {
      hkc_error((hkc_loc_t){0}, "tune: %s", msg);
      goto done;
    }
  }
  if (json) {
    cJSON_AddStringToObject(json, "output", o->out_path);
    cJSON_AddNumberToObject(json, "entries", (double)db.n);
    for (size_t c = 0; c < n_classes; c++) {
      const tune_class_t *tc = &classes[c];
      char sig[160];
      hkc_tune_signature(&tc->key, tc->shape, sig, sizeof sig);
      cJSON *jl = cJSON_CreateObject();
      cJSON_AddItemToArray(jlaunches, jl);
      cJSON_AddStringToObject(jl, "signature", sig);
      cJSON_AddStringToObject(jl, "nodes", tc->nodes);
      const int picks[3] = {tc->def, tc->model, tc->best};
      const char *keys[3] = {"default", "model_choice", "best"};
      for (int k = 0; k < 3; k++) {
        if (picks[k] < 0) {
          cJSON_AddNullToObject(jl, keys[k]);
          continue;
        }
        cJSON *jc = cJSON_AddObjectToObject(jl, keys[k]);
        cJSON_AddStringToObject(jc, "variant", tc->cands[picks[k]].cfg.variant);
        cJSON_AddStringToObject(jc, "params", tc->cands[picks[k]].cfg.tune);
        if (tc->time_us[picks[k]] > 0) cJSON_AddNumberToObject(jc, "us", tc->time_us[picks[k]]);
        else cJSON_AddNullToObject(jc, "us");
      }
    }
    const int jrc = hkc_json_end(json, stdout);
    json = NULL;
    if (jrc != 0) goto done;
  } else if (!o->quiet) {
    printf("wrote %s: %zu entr%s\n", o->out_path, db.n, db.n == 1 ? "y" : "ies");
  }
  rc = 0;
  goto done;
oom:
  hkc_error((hkc_loc_t){0}, "tune: out of memory");
done:
  cJSON_Delete(json);
  if (report) fclose(report);
  free(report_text);
  for (size_t k = 0; k < n_items; k++) hkc_rtc_result_free(&items[k].result);
  free(items);
  free(kouts);
  for (size_t c = 0; classes && c < n_classes; c++) class_free(&classes[c]);
  free(classes);
  hkc_tune_db_free(&db);
  hkc_spec_destroy(spec);
  return rc;
}
