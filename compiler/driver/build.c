/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The build driver: runs the stages of hkc_build() for every requested target and
 * batch bucket, then hands everything to the pack writer. Owns every intermediate
 * allocation; nothing reaches the output path unless all targets built.
 *
 * GPU kernels compile on the compile pool (compile_pool.c: --jobs threads, the compile
 * cache, AMD compiles in worker processes). The host target's single translation unit
 * compiles on the main thread meanwhile. Diagnostics are reported from the main thread only.
 */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "codegen/codegen.h"
#include "codegen/variants/variant.h"
#include "driver/driver.h"
#include "frontend/frontend.h"
#include "lower/lower.h"
#include "pack/pack.h"
#include "rtc/rtc.h"
#include "tune/tune.h"
#include "util/util.h"

/* Code objects inside a GPU target's CODE payload start at multiples of this. */
#define HKC_CODE_ALIGN 256

typedef struct target_plan {
  char *name;                 /* as requested, e.g. "gfx90a:xnack-" */
  const hkc_toolchain_t *tc;  /* rtc/toolchain.h; NULL: unknown target */
  const hkc_gpu_arch_t *arch; /* GPU targets */
  hkc_target_out_t out;
  uint32_t *node_kernel;      /* kernel index of each launch: [bucket * n_nodes + node] (tuning
                                 may pick different kernels for one node in different buckets) */
  char ptx_arch[32];          /* CUDA: "compute_80" when the target stores PTX; "" otherwise */
  hkc_kernel_out_t *ptx_kernels; /* copies of out.kernels the PTX compiles write to */
} target_plan_t;

typedef hkc_compile_item_t compile_job_t; /* rtc.h: one GPU kernel to compile */

static void target_out_free(hkc_target_out_t *t) {
  free(t->code);
  free(t->ptx);
  free(t->kernels);
  for (size_t g = 0; g < t->n_graphs; g++) {
    hkc_graph_out_t *graph = &t->graphs[g];
    for (size_t l = 0; l < graph->n_launches; l++) free(graph->launches[l].deps), free(graph->launches[l].owned_name);
    free(graph->launches);
    free(graph->placements);
    free(graph->costs);
    free(graph->fused_counts);
  }
  free(t->graphs);
  memset(t, 0, sizeof *t);
}

/* The kernel's variant and, for a tunable kernel, its configuration and where the choice
 * came from ("src=db+model": the sources of every launch using it), appended to params. */
static void describe_tuning(const target_plan_t *plan, hkc_kernel_out_t *ko, int tunable, unsigned sources) {
  size_t len = strlen(ko->params);
  const hkc_variant_t *v = hkc_variant_for(plan->arch, &ko->key); /* codegen accepted the key: never NULL */
  if (plan->arch && v) len += (size_t)snprintf(ko->params + len, sizeof ko->params - len, " kernel=%s", v->name);
  if ((!tunable && !ko->key.variant[0]) || len >= sizeof ko->params) return; /* untuned, not chosen by an option */
  hkc_tile_cfg_t cfg;
  const char *params = ko->key.tune;
  if (!params[0] && v && hkc_tune_lookup_cfg(plan->arch, &ko->key, v->name, "", &cfg) == 0)
    params = cfg.tune;
  len += (size_t)snprintf(ko->params + len, sizeof ko->params - len, " cfg=%s src=", params[0] ? params : "default");
  int first = 1;
  for (int s = HKC_TUNE_SRC_OPTION; s >= HKC_TUNE_SRC_DEFAULT && len < sizeof ko->params; s--)
    if (sources & (1u << s)) {
      len += (size_t)snprintf(ko->params + len, sizeof ko->params - len, "%s%s", first ? "" : "+",
                              hkc_tune_source_name((hkc_tune_source_t)s));
      first = 0;
    }
}

/* Collects the distinct kernels the spec needs over every batch bucket, with the tuner's
 * choice per launch; node_kernel[b * n_nodes + i] = kernel index of node i in bucket b.
 * Kernels are numbered in first-use order (bucket-major), so the result is deterministic. */
static int collect_kernels(const hkc_spec_t *spec, target_plan_t *plan, hkc_tuner_t *tuner) {
  hkc_target_out_t *t = &plan->out;
  const size_t n_launches = (size_t)spec->n_batch * spec->n_nodes;
  hkc_tune_launch_t *launches = calloc(n_launches ? n_launches : 1, sizeof *launches);
  unsigned *sources = NULL;
  int *tunable = NULL;
  size_t cap = 0;
  int rc = -1;
  if (!launches) return -1;
  size_t n_tuned = 0; /* launches[0, n_tuned): the nodes with a launch in their bucket */
  for (size_t l = 0; l < n_launches; l++) {
    hkc_arg_t args[HKC_MAX_ARGS];
    const size_t node = l % spec->n_nodes;
    const int64_t batch = spec->batch_sizes[l / spec->n_nodes];
    plan->node_kernel[l] = UINT32_MAX;
    if (hkc_node_left_out(spec, node, batch)) continue;
    hkc_tune_launch_t *tl = &launches[n_tuned++];
    int n_args = hkc_lower_node(spec, node, batch, &tl->key, args);
    if (n_args < 0) goto done;
    if (t->kind == HK_TARGET_HOST) { /* one host kernel serves every shape (a rope gemm's tiles: its head_dim) */
      tl->key.align = 0;
      if (!tl->key.rope) tl->key.head_dim = 0;
    }
    tl->tunable = hkc_tune_shape_of(plan->arch, &tl->key, args, (uint32_t)n_args, &tl->shape);
  }
  if (hkc_tuner_choose(tuner, plan->name, plan->arch, launches, n_tuned) != 0) goto done;
  sources = calloc(n_launches ? n_launches : 1, sizeof *sources);
  tunable = calloc(n_launches ? n_launches : 1, sizeof *tunable);
  if (!sources || !tunable) goto done;
  for (size_t l = 0, tl = 0; l < n_launches; l++) {
    if (hkc_node_left_out(spec, l % spec->n_nodes, spec->batch_sizes[l / spec->n_nodes])) continue;
    const hkc_tune_launch_t *tuned = &launches[tl++];
    const hkc_kernel_key_t *key = &tuned->key;
    size_t k = 0;
    while (k < t->n_kernels && !hkc_kernel_key_equal(&t->kernels[k].key, key)) k++;
    if (k == t->n_kernels) {
      if (hkc_reserve((void **)&t->kernels, &cap, k + 1, sizeof *t->kernels) != 0) goto done;
      hkc_kernel_out_t *ko = &t->kernels[k];
      memset(ko, 0, sizeof *ko);
      ko->key = *key;
      hkc_kernel_key_name(key, ko->name, sizeof ko->name);
      snprintf(ko->params, sizeof ko->params, "op=%s dtype=%s%s%s%s%s%s%s%s%s%s%s%s%s%s", hkc_op_name(key->op),
               hkc_dtype_name(key->dtype), key->op == HK_OP_GEMM ? " act=" : "",
               key->op == HK_OP_GEMM ? hkc_act_name(key->act) : "", key->has_bias ? " bias" : "",
               key->dual ? " dual" : key->has_mul ? " mul" : key->rope ? " rope" : "", key->has_residual ? " residual" : "",
               key->norm_a ? " norm" : "",
               key->trans_b ? " trans_b" : "",
               key->has_add ? " add" : "", key->has_sum ? " sum" : "", key->has_lengths ? " lengths" : "",
               key->has_mask ? " mask" : "", key->program[0] ? " program=" : "",
               key->program);
      ko->wave_size = 1;
      t->n_kernels++;
    }
    sources[k] |= 1u << tuned->source;
    tunable[k] |= tuned->tunable;
    plan->node_kernel[l] = (uint32_t)k;
  }
  for (size_t k = 0; k < t->n_kernels; k++) describe_tuning(plan, &t->kernels[k], tunable[k], sources[k]);
  rc = 0;
done:
  free(launches);
  free(sources);
  free(tunable);
  return rc;
}

/* Lowers every node of bucket `bucket` that has a launch there (launch_of[i] < n_nodes: its
 * index in g) into g's launches: arguments (the op ABI's), kernel, launch dimensions, cost, and
 * the workspace its kernel needs (ws[i]: scratch and counters, zero when none). */
static int lower_launches(const hkc_spec_t *spec, const target_plan_t *plan, int bucket, hkc_graph_out_t *g,
                          const size_t *launch_of, hkc_node_workspace_t *ws) {
  for (size_t i = 0; i < spec->n_nodes; i++) {
    memset(&ws[i], 0, sizeof ws[i]);
    if (launch_of[i] >= spec->n_nodes) continue;
    const size_t at = launch_of[i];
    hkc_launch_t *l = &g->launches[at];
    hkc_kernel_key_t key;
    int n_args = hkc_lower_node(spec, i, g->batch, &key, l->args);
    if (n_args < 0) return -1;
    l->n_args = (uint32_t)n_args;
    l->kernel = plan->node_kernel[(size_t)bucket * spec->n_nodes + i];
    /* A fused node is named for the spec nodes it computes ("fc2,res"), when that fits. */
    const hkc_node_t *node = &spec->nodes[i];
    l->node_name =
        node->fused_names && strlen(node->fused_names) <= HK_MAX_NAME_LEN ? node->fused_names : node->name;
    hkc_node_cost(spec, i, g->batch, &g->costs[at]);
    g->fused_counts[at] = node->n_fused > 0 ? node->n_fused : 1;
    /* an rmsnorm folded into this gemm at this bucket (norm_fold_rows), or a kv_append into this
     * kv_attention (append_fold_rows): named for both */
    const hkc_node_t *nm = hkc_gemm_folded_norm(spec, node, g->batch);
    if (!nm) nm = hkc_kv_folded_append(spec, node, g->batch);
    if (nm) {
      const char *first = nm->fused_names && strlen(nm->fused_names) <= HK_MAX_NAME_LEN ? nm->fused_names : nm->name;
      const size_t len = strlen(first) + 1 + strlen(l->node_name);
      if (len <= HK_MAX_NAME_LEN && (l->owned_name = malloc(len + 1)) != NULL) {
        snprintf(l->owned_name, len + 1, "%s,%s", first, l->node_name);
        l->node_name = l->owned_name;
      }
      g->fused_counts[at] += nm->n_fused > 0 ? nm->n_fused : 1;
    }
    const hkc_kernel_key_t *kkey = &plan->out.kernels[l->kernel].key; /* with its tuning */
    if (hkc_op_collective(kkey->op)) { /* the runtime's communicator: no grid */
      l->grid[0] = l->grid[1] = l->grid[2] = l->block[0] = l->block[1] = l->block[2] = 1;
      l->shared_bytes = 0;
      continue;
    }
    plan->tc->launch_dims(plan->arch, kkey, l->args, l->n_args, l->grid, l->block, &l->shared_bytes);
    if (plan->tc->launch_workspace) plan->tc->launch_workspace(plan->arch, kkey, l->args, l->n_args, &ws[i]);
  }
  return 0;
}

/* Plans one batch bucket: the launch of every node (lower_launches), the memory of its
 * intermediates and its launches' workspace, dependencies, and each launch's full argument
 * list (the variant's extra arguments, then its scratch and semaphores); a launch whose
 * variant waits with griddepcontrol is marked for programmatic dependent launch unless
 * no_pdl. */
static int build_graph(const hkc_spec_t *spec, const target_plan_t *plan, int bucket, int no_pdl,
                       hkc_graph_out_t *g) {
  g->batch = spec->batch_sizes[bucket];
  g->placements = calloc(spec->n_tensors ? spec->n_tensors : 1, sizeof *g->placements);
  g->launches = calloc(spec->n_nodes, sizeof *g->launches);
  g->costs = calloc(spec->n_nodes ? spec->n_nodes : 1, sizeof *g->costs);
  g->fused_counts = calloc(spec->n_nodes ? spec->n_nodes : 1, sizeof *g->fused_counts);
  hkc_node_workspace_t *ws = calloc(spec->n_nodes ? spec->n_nodes : 1, sizeof *ws);
  size_t *launch_of = calloc(spec->n_nodes ? spec->n_nodes : 1, sizeof *launch_of);
  hkc_deps_t deps = {0};
  int rc = -1;
  if (!g->placements || !g->launches || !g->costs || !g->fused_counts || !ws || !launch_of) goto done;
  /* a node left out at this batch (a dequant that its gemms fold) has no launch; the others
   * keep their order */
  g->n_launches = 0;
  for (size_t i = 0; i < spec->n_nodes; i++)
    launch_of[i] = hkc_node_left_out(spec, i, g->batch) ? SIZE_MAX : g->n_launches++;
  if (lower_launches(spec, plan, bucket, g, launch_of, ws) != 0 ||
      hkc_plan_memory(spec, g->batch, ws, g->placements, &g->workspace_bytes, &g->semaphore_count) != 0 ||
      hkc_plan_deps(spec, g->batch, g->placements, ws, &deps) != 0)
    goto done;
  for (size_t i = 0; i < spec->n_nodes; i++) {
    if (launch_of[i] == SIZE_MAX) {
      assert(deps.start[i + 1] == deps.start[i]); /* reads and writes nothing at this batch */
      continue;
    }
    hkc_launch_t *l = &g->launches[launch_of[i]];
    const hkc_kernel_key_t *kkey = &plan->out.kernels[l->kernel].key;
    if (plan->tc->launch_args && !hkc_op_collective(kkey->op)) /* the variant's extra arguments (TMA tensor maps) after the ABI's */
      l->n_args = plan->tc->launch_args(plan->arch, kkey, l->args, l->n_args, HKC_MAX_ARGS);
    l->n_args = hkc_plan_workspace_args(&ws[i], l->args, l->n_args, HKC_MAX_ARGS);
    l->pdl = !no_pdl && !hkc_op_collective(kkey->op) && plan->tc->launch_pdl && plan->tc->launch_pdl(plan->arch, kkey);
    uint32_t nd = deps.start[i + 1] - deps.start[i];
    if (nd) {
      l->deps = malloc(nd * sizeof *l->deps);
      if (!l->deps) goto done;
      for (uint32_t d = 0; d < nd; d++) { /* spec node -> launch index */
        const size_t on = launch_of[deps.list[deps.start[i] + d]];
        assert(on != SIZE_MAX);
        l->deps[d] = (uint32_t)on;
      }
      l->n_deps = nd;
    }
  }
  rc = 0;
done:
  hkc_deps_free(&deps);
  free(launch_of);
  free(ws);
  return rc;
}

/* ---- compiling ---------------------------------------------------------------------------- */
/* Whether the target's kernels are one translation unit (the host's C compiler), compiled
 * on the build's thread, rather than one code object each on the compile pool. */
static int one_unit(const target_plan_t *plan) { return plan->tc->codegen_unit != NULL; }

/* A target compiled as one translation unit (the host: the system C compiler). */
static int compile_unit(target_plan_t *plan) {
  hkc_target_out_t *t = &plan->out;
  char *source = plan->tc->codegen_unit(t->kernels, t->n_kernels);
  if (!source) {
    hkc_error((hkc_loc_t){0}, "out of memory generating %s kernels", plan->tc->vendor);
    return -1;
  }
  uint64_t source_hash = hkc_hash64(source, strlen(source));
  hkc_rtc_result_t r = {0};
  int rc = plan->tc->compile(source, NULL, plan->name, &r);
  free(source);
  if (rc != 0) {
    if (r.log) hkc_error((hkc_loc_t){0}, "%s", r.log);
    hkc_rtc_result_free(&r);
    return -1;
  }
  t->code = r.code; /* taken from the result */
  t->code_size = r.code_size;
  r.code = NULL;
  hkc_rtc_result_free(&r);
  snprintf(t->toolchain, sizeof t->toolchain, "%s", plan->tc->version());
  for (size_t k = 0; k < t->n_kernels; k++) { /* one code object holds every kernel */
    if (hkc_op_collective(t->kernels[k].key.op)) continue; /* no code (pack_format.h) */
    t->kernels[k].source_hash = source_hash;
    t->kernels[k].code_offset = 0;
    t->kernels[k].code_size = t->code_size;
  }
  return 0;
}

/* Concatenates a GPU target's per-kernel code objects and records their resources. */
static int assemble_gpu(target_plan_t *plan, compile_job_t *jobs, target_plan_t *const *owners, size_t n_jobs) {
  hkc_target_out_t *t = &plan->out;
  size_t total = 0;
  for (size_t j = 0; j < n_jobs; j++)
    if (owners[j] == plan) total = (total + HKC_CODE_ALIGN - 1) / HKC_CODE_ALIGN * HKC_CODE_ALIGN + jobs[j].result.code_size;
  t->code = calloc(total ? total : 1, 1);
  if (!t->code) return -1;
  size_t at = 0;
  for (size_t j = 0; j < n_jobs; j++) {
    if (owners[j] != plan) continue;
    const hkc_rtc_result_t *r = &jobs[j].result;
    hkc_kernel_out_t *k = jobs[j].kernel;
    if (hkc_op_collective(k->key.op)) continue; /* no code: code_offset and code_size stay 0 */
    at = (at + HKC_CODE_ALIGN - 1) / HKC_CODE_ALIGN * HKC_CODE_ALIGN;
    memcpy((char *)t->code + at, r->code, r->code_size);
    k->code_offset = at;
    k->code_size = r->code_size;
    at += r->code_size;
    k->vgprs = r->vgprs;
    k->agprs = r->agprs;
    k->sgprs = r->sgprs;
    k->shared_bytes = r->shared_bytes;
    k->scratch_bytes = r->scratch_bytes;
    k->wave_size = r->wave_size ? r->wave_size : plan->arch->wave_size;
  }
  t->code_size = total;
  snprintf(t->toolchain, sizeof t->toolchain, "%s", plan->tc->version());
  return 0;
}

/* Concatenates a CUDA target's PTX texts (jobs[j] with ptx_owners[j] == plan; their kernels
 * are plan->ptx_kernels[i], parallel to out.kernels) and records each kernel's range. */
static int assemble_ptx(target_plan_t *plan, compile_job_t *jobs, target_plan_t *const *ptx_owners, size_t n_jobs) {
  hkc_target_out_t *t = &plan->out;
  size_t total = 0;
  for (size_t j = 0; j < n_jobs; j++)
    if (ptx_owners[j] == plan) total = (total + HKC_CODE_ALIGN - 1) / HKC_CODE_ALIGN * HKC_CODE_ALIGN + jobs[j].result.code_size;
  t->ptx = calloc(total ? total : 1, 1);
  if (!t->ptx) return -1;
  size_t at = 0;
  for (size_t j = 0; j < n_jobs; j++) {
    if (ptx_owners[j] != plan) continue;
    const hkc_rtc_result_t *r = &jobs[j].result;
    hkc_kernel_out_t *k = &t->kernels[jobs[j].kernel - plan->ptx_kernels];
    if (hkc_op_collective(k->key.op)) continue;
    at = (at + HKC_CODE_ALIGN - 1) / HKC_CODE_ALIGN * HKC_CODE_ALIGN;
    memcpy((char *)t->ptx + at, r->code, r->code_size);
    k->ptx_offset = at;
    k->ptx_size = r->code_size;
    at += r->code_size;
  }
  t->ptx_size = total;
  return 0;
}

/* Largest block each kernel is launched with, occupancy, and the spill check. */
static int finish_gpu_kernels(target_plan_t *plan, int werror_spills) {
  hkc_target_out_t *t = &plan->out;
  int rc = 0;
  for (size_t g = 0; g < t->n_graphs; g++)
    for (size_t l = 0; l < t->graphs[g].n_launches; l++) {
      const hkc_launch_t *ln = &t->graphs[g].launches[l];
      uint32_t threads = ln->block[0] * ln->block[1] * ln->block[2];
      hkc_kernel_out_t *k = &t->kernels[ln->kernel];
      if (hkc_op_collective(k->key.op)) continue; /* no code, no resources */
      if (threads > k->max_block) k->max_block = threads;
      uint32_t shared = ln->shared_bytes;
      if (shared > k->shared_bytes) k->shared_bytes = shared; /* dynamic shared memory counts too */
    }
  for (size_t i = 0; i < t->n_kernels; i++) {
    hkc_kernel_out_t *k = &t->kernels[i];
    if (hkc_op_collective(k->key.op)) {
      k->wave_size = 0;
      continue;
    }
    k->occupancy = hkc_occupancy(plan->arch, k, k->max_block, NULL, NULL);
    if (k->scratch_bytes) {
      if (werror_spills) {
        hkc_error((hkc_loc_t){0}, "kernel %s on %s spills %u bytes per thread to %s memory (--Werror-spills)",
                  k->name, plan->name, k->scratch_bytes, plan->tc->spill_memory);
        rc = -1;
      } else {
        hkc_warning((hkc_loc_t){0}, "kernel %s on %s spills %u bytes per thread to %s memory", k->name, plan->name,
                    k->scratch_bytes, plan->tc->spill_memory);
      }
    }
  }
  return rc;
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What the compiles of a build did: the summary's counts (build_summary). */
typedef struct build_counts {
  size_t gpu_kernels;      /* GPU kernels of the pack = from_tuning + cached + compiled */
  size_t from_tuning;      /* the model's compile of the kernel, taken (hkc_tuner_take) */
  size_t cached;           /* from the compile cache by the build's pool */
  size_t shared_cached;    /* of those: from the shared cache (HKC_CACHE_URL) */
  size_t compiled;         /* compiled by the build's pool */
  size_t ptx, ptx_cached;  /* PTX compiles (ptx - ptx_cached compiled) */
  int threads;             /* threads of the build's pool (0: it had nothing to do) */
} build_counts_t;

/* Frees a compile_all's arrays (results included: the pool's and those taken from the tuner). */
static void jobs_free(compile_job_t *jobs, size_t n_jobs, target_plan_t **owners, target_plan_t **ptx_owners) {
  for (size_t j = 0; jobs && j < n_jobs; j++) hkc_rtc_result_free(&jobs[j].result);
  free(jobs);
  free(owners);
  free(ptx_owners);
}

/* Compiles every target's kernels: GPU kernels on the pool (except those the tuner already
 * compiled), the host TU (one_unit) meanwhile, each target a progress phase ("compile
 * sm_90a", "ptx sm_90", "compile host") begun before anything compiles. Fills *counts. */
static int compile_all(target_plan_t *plans, size_t n_plans, const hkc_build_options_t *options, hkc_tuner_t *tuner,
                       hkc_reporter_t *progress, build_counts_t *counts) {
  size_t n_jobs = 0, n_ptx = 0;
  for (size_t p = 0; p < n_plans; p++)
    if (!one_unit(&plans[p])) {
      n_jobs += plans[p].out.n_kernels;
      if (plans[p].ptx_arch[0]) n_ptx += plans[p].out.n_kernels;
    }
  n_jobs += n_ptx;
  compile_job_t *jobs = calloc(n_jobs ? n_jobs : 1, sizeof *jobs);
  target_plan_t **owners = calloc(n_jobs ? n_jobs : 1, sizeof *owners);
  target_plan_t **ptx_owners = calloc(n_jobs ? n_jobs : 1, sizeof *ptx_owners);
  if (!jobs || !owners || !ptx_owners) {
    jobs_free(jobs, 0, owners, ptx_owners);
    return -1;
  }
  memset(counts, 0, sizeof *counts);
  size_t j = 0;
  for (size_t p = 0; p < n_plans; p++) {
    if (one_unit(&plans[p])) continue;
    const size_t first = j;
    size_t taken = 0;
    for (size_t k = 0; k < plans[p].out.n_kernels; k++) {
      owners[j] = &plans[p];
      jobs[j] = (compile_job_t){.target = plans[p].name, .arch = plans[p].arch, .kernel = &plans[p].out.kernels[k]};
      if (hkc_op_collective(jobs[j].kernel->key.op)) { /* no code: nothing to compile */
        jobs[j].rc = 0;
        taken++;
      } else if (hkc_tuner_take(tuner, plans[p].name, jobs[j].kernel, &jobs[j].result, &jobs[j].cached)) {
        jobs[j].rc = 0;
        jobs[j].cached = 0; /* the tuner's compile, counted where it happened */
        taken++;
      } else {
        jobs[j].rc = 1; /* to compile */
      }
      j++;
    }
    char phase[80];
    snprintf(phase, sizeof phase, "compile %s", plans[p].name);
    const int id = hkc_reporter_begin(progress, phase, plans[p].out.n_kernels - taken,
                                      "kernel(s) to compile (%zu in the pack, %zu of them from tuning)",
                                      plans[p].out.n_kernels, taken);
    for (size_t i = first; i < j; i++) jobs[i].phase = id;
    counts->gpu_kernels += plans[p].out.n_kernels;
    counts->from_tuning += taken;
  }
  /* PTX: the same kernels for the virtual architecture, on copies of the kernel records
   * (the pool writes source_hash into its job's kernel; two jobs must not share one) */
  for (size_t p = 0; p < n_plans; p++) {
    target_plan_t *plan = &plans[p];
    if (one_unit(plan) || !plan->ptx_arch[0]) continue;
    plan->ptx_kernels = calloc(plan->out.n_kernels ? plan->out.n_kernels : 1, sizeof *plan->ptx_kernels);
    if (!plan->ptx_kernels) {
      jobs_free(jobs, n_jobs, owners, ptx_owners);
      return -1;
    }
    char phase[80];
    snprintf(phase, sizeof phase, "ptx %s", plan->name);
    const int id = hkc_reporter_begin(progress, phase, plan->out.n_kernels, "kernel(s) to compile to %s", plan->ptx_arch);
    for (size_t k = 0; k < plan->out.n_kernels; k++) {
      plan->ptx_kernels[k] = plan->out.kernels[k];
      ptx_owners[j] = plan;
      jobs[j++] = (compile_job_t){.target = plan->ptx_arch, .arch = plan->arch, .kernel = &plan->ptx_kernels[k],
                                  .rc = hkc_op_collective(plan->ptx_kernels[k].key.op) ? 0 : 1, .phase = id};
    }
  }
  /* the pool compiles the rest: moved to the front, in order */
  size_t n_pending = 0;
  for (j = 0; j < n_jobs; j++)
    if (jobs[j].rc == 1) n_pending++;
  compile_job_t *pending = calloc(n_pending ? n_pending : 1, sizeof *pending);
  if (!pending) {
    jobs_free(jobs, n_jobs, owners, ptx_owners);
    return -1;
  }
  for (size_t i = 0, t = 0; i < n_jobs; i++)
    if (jobs[i].rc == 1) pending[t++] = jobs[i];
  int unit_phase[HK_MAX_TARGETS];
  for (size_t p = 0; p < n_plans && p < HK_MAX_TARGETS; p++)
    if (one_unit(&plans[p])) {
      char phase[80];
      snprintf(phase, sizeof phase, "compile %s", plans[p].name);
      unit_phase[p] = hkc_reporter_begin(progress, phase, 1, "unit of %zu kernel(s)", plans[p].out.n_kernels);
    }
  hkc_compile_pool_t *pool =
      hkc_compile_pool_start(pending, n_pending, options->jobs, options->no_cache, options->cache_dir, progress);
  if (!pool) {
    free(pending);
    jobs_free(jobs, n_jobs, owners, ptx_owners);
    return -1;
  }

  int rc = 0;
  for (size_t p = 0; p < n_plans; p++) {
    if (!one_unit(&plans[p])) continue;
    const int unit_rc = compile_unit(&plans[p]);
    if (unit_rc != 0) rc = -1;
    hkc_reporter_item(progress, p < HK_MAX_TARGETS ? unit_phase[p] : -1, "%zu kernel(s) as one unit%s",
                      plans[p].out.n_kernels, unit_rc ? " (failed)" : "");
  }
  counts->threads = hkc_compile_pool_finish(pool);
  for (size_t i = 0, t = 0; i < n_jobs; i++)
    if (jobs[i].rc == 1) jobs[i] = pending[t++];
  free(pending);

  for (j = 0; j < n_jobs; j++) {
    compile_job_t *job = &jobs[j];
    if (ptx_owners[j]) {
      counts->ptx++;
      counts->ptx_cached += job->cached != 0;
    } else {
      counts->cached += job->cached != 0;
      counts->shared_cached += job->cached == 2;
    }
    if (job->rc != 0) {
      hkc_error((hkc_loc_t){0}, "kernel %s (op %s) for %s did not compile:\n%s", job->kernel->name,
                hkc_op_name(job->kernel->key.op), job->target, job->result.log ? job->result.log : "(no log)");
      rc = -1;
    }
  }
  counts->compiled = counts->gpu_kernels - counts->from_tuning - counts->cached;
  for (size_t p = 0; rc == 0 && p < n_plans; p++)
    if (!one_unit(&plans[p]) && (assemble_gpu(&plans[p], jobs, owners, n_jobs) != 0 ||
                                 (plans[p].ptx_arch[0] && assemble_ptx(&plans[p], jobs, ptx_owners, n_jobs) != 0))) {
      hkc_error((hkc_loc_t){0}, "out of memory assembling target %s", plans[p].name);
      rc = -1;
    }
  jobs_free(jobs, n_jobs, owners, ptx_owners);
  return rc;
}

/* The summary of a build's compiles: each line through emit (stdout, or a progress note).
 * The GPU kernels of the pack, then the tuner's candidate compiles, then the PTX; every
 * line's parts add up to its total. Nothing when nothing was compiled for a GPU. */
static void build_summary(const target_plan_t *plans, size_t n_plans, const build_counts_t *c,
                          const hkc_tune_stats_t *tuning, int show_shared, void (*emit)(void *, const char *),
                          void *arg) {
  char line[512];
  int len;
  if (c->gpu_kernels) {
    len = snprintf(line, sizeof line, "compiled %zu GPU kernel(s)", c->gpu_kernels);
    if (c->threads) len += snprintf(line + len, sizeof line - (size_t)len, " on %d thread(s)", c->threads);
    len += snprintf(line + len, sizeof line - (size_t)len, ", %zu from the cache", c->cached);
    if (show_shared) len += snprintf(line + len, sizeof line - (size_t)len, " (%zu from the shared cache)", c->shared_cached);
    snprintf(line + len, sizeof line - (size_t)len, ", %zu from tuning, %zu compiled", c->from_tuning, c->compiled);
    emit(arg, line);
  }
  if (tuning->compiles) {
    len = snprintf(line, sizeof line, "tuning: %zu candidate kernel(s) on %d thread(s), %zu from the cache",
                   tuning->compiles, tuning->threads, tuning->cached);
    if (show_shared)
      len += snprintf(line + len, sizeof line - (size_t)len, " (%zu from the shared cache)", tuning->shared_cached);
    snprintf(line + len, sizeof line - (size_t)len, ", %zu compiled, %zu failed; %zu kept in the pack",
             tuning->compiles - tuning->cached - tuning->failed, tuning->failed, c->from_tuning);
    emit(arg, line);
  }
  for (size_t p = 0; c->ptx && p < n_plans; p++)
    if (plans[p].ptx_arch[0]) {
      snprintf(line, sizeof line, "PTX (%s) of %s: %zu kernel(s) stored for JIT on newer GPUs", plans[p].ptx_arch,
               plans[p].name, plans[p].out.n_kernels);
      emit(arg, line);
    }
  if (c->ptx) {
    snprintf(line, sizeof line, "PTX: %zu compile(s), %zu from the cache, %zu compiled", c->ptx, c->ptx_cached,
             c->ptx - c->ptx_cached);
    emit(arg, line);
  }
}

static void emit_stdout(void *arg, const char *line) {
  (void)arg;
  printf("%s\n", line);
}

static void emit_note(void *arg, const char *line) { hkc_reporter_note(arg, "%s", line); }

/* ---- targets ---------------------------------------------------------------------------------- */
/* Splits the comma-separated list (or the spec's targets) into validated plans, and checks
 * that the toolchain each target needs is there, and builds it, before anything compiles. */
static int resolve_targets(const hkc_spec_t *spec, const char *list, target_plan_t **out_plans, size_t *out_n) {
  char **names = NULL;
  size_t n = 0, cap = 0;
  if (list) {
    char *copy = hkc_strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      while (*tok == ' ') tok++;
      if (!*tok) continue;
      if (hkc_reserve((void **)&names, &cap, n + 1, sizeof *names) != 0) break;
      names[n++] = hkc_strdup(tok);
    }
    free(copy);
  } else {
    for (size_t i = 0; i < spec->n_targets; i++) {
      if (hkc_reserve((void **)&names, &cap, n + 1, sizeof *names) != 0) break;
      names[n++] = hkc_strdup(spec->targets[i]);
    }
  }
  char known[1024];
  hkc_toolchain_known_targets(known, sizeof known);
  target_plan_t *plans = calloc(n ? n : 1, sizeof *plans);
  int rc = plans ? 0 : -1;
  if (n == 0) {
    hkc_error((hkc_loc_t){spec->path, 0, 0}, "no targets: give `targets:` in the spec or --target (known: %s)", known);
    rc = -1;
  }
  for (size_t i = 0; plans && i < n; i++) {
    plans[i].name = names[i];
    char why[2048] = "";
    plans[i].tc = hkc_toolchain_for_target(names[i], &plans[i].arch, why, sizeof why);
    /* "host" and "host-x86_64" are one target: a toolchain without target table rows has one */
    for (size_t j = 0; j < i; j++)
      if (plans[i].tc && plans[i].tc == plans[j].tc && (strcmp(names[i], names[j]) == 0 || !plans[i].arch)) {
        hkc_error((hkc_loc_t){0}, "target %s given twice", names[i]);
        rc = -1;
      }
    if (!plans[i].tc && strncmp(names[i], "host-", 5) == 0 && why[0]) {
      hkc_error((hkc_loc_t){0}, "%s", why); /* another CPU's host target: why it is not built */
      rc = -1;
    } else if (!plans[i].tc) {
      hkc_error((hkc_loc_t){0}, "unknown target %s (hkc knows: %s; `hkc targets` shows what this machine builds)",
                names[i], known);
      rc = -1;
    }
  }
  /* Each toolchain the targets need must load, and say it builds them: one clear error per
   * target the installed toolchain cannot build (gfx942 on ROCm 5.2), rather than one per
   * kernel. A toolchain that cannot list its targets is taken at its word. */
  size_t n_tc;
  const hkc_toolchain_t *const *tcs = hkc_toolchain_list(&n_tc);
  for (size_t c = 0; plans && c < n_tc; c++) {
    const hkc_toolchain_t *tc = tcs[c];
    int needed = 0;
    for (size_t i = 0; i < n; i++) needed |= plans[i].tc == tc;
    if (!needed) continue;
    char why[512];
    if (tc->available(why, sizeof why) != 0) {
      hkc_error((hkc_loc_t){0}, "%s targets need %s: %s", tc->vendor, tc->program, why);
      rc = -1;
      continue;
    }
    char **buildable = NULL;
    size_t n_buildable = 0;
    if (tc->list_targets(&buildable, &n_buildable, why, sizeof why) != 0) continue;
    for (size_t i = 0; i < n; i++) {
      if (plans[i].tc != tc) continue;
      size_t base = strcspn(plans[i].name, ":");
      int found = !plans[i].arch; /* the host builds for this machine */
      for (size_t k = 0; k < n_buildable && !found; k++)
        found = strlen(buildable[k]) == base && strncmp(buildable[k], plans[i].name, base) == 0;
      if (!found) {
        char builds[2048];
        int len = 0;
        builds[0] = '\0';
        for (size_t k = 0; k < n_buildable && len >= 0 && (size_t)len < sizeof builds; k++)
          if (!strchr(buildable[k], ':') && hkc_gpu_arch_find(buildable[k]))
            len += snprintf(builds + len, sizeof builds - (size_t)len, "%s%s", len ? " " : "", buildable[k]);
        hkc_error((hkc_loc_t){0}, "target %s: the installed toolchain (%s) cannot build it; it builds: %s",
                  plans[i].name, tc->version(), builds);
        rc = -1;
      }
    }
    for (size_t k = 0; k < n_buildable; k++) free(buildable[k]);
    free(buildable);
  }
  free(names); /* the strings now belong to the plans */
  *out_plans = plans;
  *out_n = plans ? n : 0;
  return rc;
}

/* The compute capability of "sm_XY[a|f]" as 10*X+Y, and whether it is arch-specific; 0 when
 * the name is not an sm_ target. */
static int sm_cc(const char *name, int *out_specific) {
  int cc = 0, used = 0;
  *out_specific = 0;
  if (sscanf(name, "sm_%d%n", &cc, &used) != 1) return 0;
  *out_specific = name[used] != '\0';
  return cc;
}

/* Marks the CUDA targets that store PTX (hkc_build_options_t.ptx): the listed ones, each a
 * CUDA target of this build, or by default the newest sm_XY without an arch-specific suffix
 * -- of merge_targets when given (the build is one part of hkc merge: the parts must choose
 * as one build of all the targets would). 0 / -1 (reported). */
static int choose_ptx(target_plan_t *plans, size_t n, const char *list, const char *merge_targets) {
  if (!list) {
    const char *best = NULL;
    size_t best_len = 0;
    int best_cc = 0;
    char *copy = merge_targets ? hkc_strdup(merge_targets) : NULL, *save = NULL;
    if (merge_targets && !copy) return -1;
    for (size_t i = 0;; i++) { /* over merge_targets' names, else the plans' */
      const char *name = copy ? strtok_r(i ? NULL : copy, ",", &save) : i < n ? plans[i].name : NULL;
      if (!name) break;
      while (*name == ' ') name++;
      int specific = 0, cc = sm_cc(name, &specific);
      if (cc > best_cc && !specific) best = name, best_len = strlen(name), best_cc = cc;
    }
    for (size_t i = 0; best && i < n; i++)
      if (plans[i].tc && plans[i].tc->kind == HK_TARGET_CUDA && strlen(plans[i].name) == best_len &&
          strncmp(plans[i].name, best, best_len) == 0)
        snprintf(plans[i].ptx_arch, sizeof plans[i].ptx_arch, "compute_%s", plans[i].name + 3);
    free(copy);
    return 0;
  }
  char *copy = hkc_strdup(list), *save = NULL;
  int rc = copy ? 0 : -1;
  for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok; tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ') tok++;
    if (!*tok) continue;
    target_plan_t *hit = NULL;
    for (size_t i = 0; i < n && !hit; i++)
      if (strcmp(plans[i].name, tok) == 0) hit = &plans[i];
    int specific = 0;
    if (!hit || !hit->tc || hit->tc->kind != HK_TARGET_CUDA || !sm_cc(tok, &specific) || strlen(tok) > 20) {
      hkc_error((hkc_loc_t){0}, "--ptx %s: not an NVIDIA (sm_*) target of this build", tok);
      rc = -1;
      continue;
    }
    snprintf(hit->ptx_arch, sizeof hit->ptx_arch, "compute_%s", tok + 3);
  }
  free(copy);
  return rc;
}

static void plans_free(target_plan_t *plans, size_t n) {
  for (size_t i = 0; plans && i < n; i++) {
    target_out_free(&plans[i].out);
    free(plans[i].node_kernel);
    free(plans[i].ptx_kernels);
    free(plans[i].name);
  }
  free(plans);
}

/* Name and features of a built target: host targets are named for this machine; AMD
 * feature suffixes ("gfx90a:xnack-") are stored apart from the ISA name. */
static void name_target(target_plan_t *plan) {
  hkc_target_out_t *t = &plan->out;
  t->kind = plan->tc->kind;
  if (!plan->arch) { /* no target table row: this machine */
    snprintf(t->name, sizeof t->name, "%s", hkc_host_target_name());
    return;
  }
  const char *colon = strchr(plan->name, ':');
  snprintf(t->name, sizeof t->name, "%.*s", colon ? (int)(colon - plan->name) : (int)strlen(plan->name), plan->name);
  snprintf(t->features, sizeof t->features, "%s", colon ? colon + 1 : "");
}

/* The pipeline as written, one kernel per spec node: the "before fusion" totals of each
 * batch bucket (inspect --plan). The sum's `matrix` flag has no meaning and stays 0. */
static void unfused_costs(const hkc_spec_t *spec, hkc_cost_t out[HK_MAX_BATCH_BUCKETS]) {
  for (int b = 0; b < spec->n_batch; b++) {
    memset(&out[b], 0, sizeof out[b]);
    for (size_t i = 0; i < spec->n_nodes; i++) {
      hkc_cost_t c;
      hkc_node_cost(spec, i, spec->batch_sizes[b], &c);
      out[b].bytes += c.bytes;
      out[b].flops += c.flops;
    }
  }
}


/* --merge-targets: every built target must be in the list, whose architectures (NULL: the
 * host) fusion is then decided for: fuse_archs[*n_fuse]. 0 / -1 (reported). */
static int check_merge_targets(const char *list, const target_plan_t *plans, size_t n_plans,
                               const hkc_gpu_arch_t **fuse_archs, size_t *n_fuse) {
  char *copy = hkc_strdup(list), *save = NULL;
  int rc = copy ? 0 : -1;
  const hkc_toolchain_t *tcs[HK_MAX_TARGETS];
  const hkc_gpu_arch_t *archs[HK_MAX_TARGETS];
  size_t n = 0;
  for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && rc == 0; tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ') tok++;
    if (!*tok) continue;
    if (n == HK_MAX_TARGETS) {
      hkc_error((hkc_loc_t){0}, "--merge-targets: more than %u targets", HK_MAX_TARGETS);
      rc = -1;
      break;
    }
    tcs[n] = hkc_toolchain_for_target(tok, &archs[n], NULL, 0);
    if (!tcs[n]) {
      hkc_error((hkc_loc_t){0}, "--merge-targets: unknown target %s", tok);
      rc = -1;
    }
    n++;
  }
  for (size_t i = 0; i < n_plans && rc == 0; i++) {
    int found = 0;
    for (size_t k = 0; k < n && !found; k++) found = tcs[k] == plans[i].tc && archs[k] == plans[i].arch;
    if (!found) {
      hkc_error((hkc_loc_t){0}, "target %s is not in --merge-targets %s (list every target of the merged pack)",
                plans[i].name, list);
      rc = -1;
    }
  }
  for (size_t k = 0; k < n; k++) fuse_archs[k] = archs[k];
  *n_fuse = n;
  free(copy);
  return rc;
}

int hkc_build(const hkc_build_options_t *options) {
  hkc_spec_t *spec = NULL;
  char err[4200];
  if (options->out_path && hkc_output_check(options->out_path, err, sizeof err) != 0) { /* before any compile */
    hkc_error((hkc_loc_t){0}, "%s", err);
    return -1;
  }
  const double t0 = now_seconds();
  if (hkc_spec_load(options->spec_path, &spec) != 0) return -1;
  /* tensor parallelism: from here on the IR is one rank's (frontend/shard.c) */
  if (hkc_shard(spec, options->tensor_parallel ? options->tensor_parallel : spec->tensor_parallel) != 0) {
    hkc_spec_destroy(spec);
    return -1;
  }
  /* Unfused accounting, on the spec as one rank runs it before fusion. */
  hkc_cost_t unfused[HK_MAX_BATCH_BUCKETS];
  const uint32_t unfused_nodes = (uint32_t)spec->n_nodes;
  unfused_costs(spec, unfused);
  target_plan_t *plans = NULL;
  size_t n_plans = 0;
  build_counts_t counts = {0};
  hkc_tune_stats_t tuning = {0};
  hkc_reporter_t *progress = hkc_reporter_create(options->progress, "hkc build");
  hkc_target_out_t *outs = NULL;
  char *provenance = NULL;
  hkc_weight_in_t *weights = NULL;
  size_t n_weights = 0;
  int rc = -1;
  /* tuning: the databases (first wins), then the model or the defaults (tune.c) */
  hkc_tune_db_t db = {0};
  hkc_tuner_t *tuner = NULL;
  for (size_t i = 0; i < options->n_tuning_dbs; i++)
    if (hkc_tune_db_load(&db, options->tuning_dbs[i]) != 0) goto done;
  tuner = hkc_tuner_create(options->tune_mode == HKC_TUNE_DEFAULT ? HKC_TUNE_DEFAULT : HKC_TUNE_MODEL,
                           options->n_tuning_dbs ? &db : NULL, options->tune_verify, options->jobs, options->no_cache,
                           options->cache_dir);
  if (!tuner) goto fail;
  hkc_tuner_set_options(tuner, options->kernel_options, options->host_threads);
  hkc_tuner_set_progress(tuner, progress);
  if (resolve_targets(spec, options->targets, &plans, &n_plans) != 0) goto done;
  if (choose_ptx(plans, n_plans, options->ptx, options->merge_targets) != 0) goto done;
  for (size_t i = 0; spec->sharded_ranks && i < n_plans; i++) /* docs/SPEC.md, "Tensor parallelism" */
    plans[i].ptx_arch[0] = '\0'; /* the collectives have no PTX: a tensor-parallel pack carries cubins only */
  if (spec->sharded_ranks && options->weights) {
    hkc_error((hkc_loc_t){spec->path, 0, 0}, "--weights with --tensor-parallel: a pack stores one set of params, and "
              "each rank binds its own shard; bind the checkpoint at run time (hkc run/generate --weights)");
    goto done;
  }
  /* ---- fusion: everything below sees the fused spec, planned for every target of the build
   * (with --merge-targets, of that list): codegen/fusion_model.c */
  const hkc_gpu_arch_t *fuse_archs[HK_MAX_TARGETS];
  size_t n_fuse = 0;
  if (options->merge_targets) {
    if (check_merge_targets(options->merge_targets, plans, n_plans, fuse_archs, &n_fuse) != 0) goto done;
  } else {
    for (size_t i = 0; i < n_plans; i++) fuse_archs[n_fuse++] = plans[i].arch;
  }
  if (hkc_fuse_for_targets(spec, options->fusion, fuse_archs, n_fuse, options->kernel_options,
                           options->fusion_report ? stderr : NULL) != 0)
    goto done;
  /* stored weights: matched to the fused spec's tensor table (the pack's), before compiling */
  if (options->weights &&
      hkc_pack_weights_match(spec, options->weights, options->weights_names, options->n_weights_names,
                             options->weights_label ? options->weights_label : "the weights",
                             options->progress != HKC_PROGRESS_OFF ? stderr : NULL, &weights, &n_weights) != 0)
    goto done;
  if (hkc_reporter_mode(progress) >= HKC_PROGRESS_LINES) {
    char names[HK_MAX_TARGETS * 40] = "";
    for (size_t i = 0, len = 0; i < n_plans && len < sizeof names; i++)
      len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", plans[i].name);
    hkc_reporter_note(progress, "%s: %zu target(s) (%s), %d batch size(s), %zu node(s) after fusion", spec->name,
                      n_plans, names, spec->n_batch, spec->n_nodes);
  }
  for (size_t i = 0; i < n_plans; i++) {
    target_plan_t *p = &plans[i];
    name_target(p);
    p->node_kernel = calloc((size_t)spec->n_batch * spec->n_nodes + 1, sizeof *p->node_kernel);
    if (!p->node_kernel) goto fail;
    if (collect_kernels(spec, p, tuner) != 0) goto done;
  }
  if (compile_all(plans, n_plans, options, tuner, progress, &counts) != 0) goto done;
  tuning = hkc_tuner_stats(tuner);
  for (size_t i = 0; i < n_plans; i++) {
    hkc_target_out_t *t = &plans[i].out;
    t->graphs = calloc((size_t)spec->n_batch, sizeof *t->graphs);
    if (!t->graphs) goto fail;
    t->n_graphs = (size_t)spec->n_batch;
    for (int b = 0; b < spec->n_batch; b++) {
      if (build_graph(spec, &plans[i], b, options->no_pdl, &t->graphs[b]) != 0) goto fail;
      t->graphs[b].unfused = unfused[b];
      t->graphs[b].unfused_nodes = unfused_nodes;
    }
    if (plans[i].arch && finish_gpu_kernels(&plans[i], options->werror_spills) != 0) goto done;
  }

  /* Provenance: what produced this artifact, without paths or time so that the same
   * inputs give the same bytes. */
  size_t cap = 4096 + n_plans * 256 + (spec->fusion_apart ? strlen(spec->fusion_apart) : 0);
  provenance = malloc(cap);
  outs = calloc(n_plans, sizeof *outs);
  if (!provenance || !outs) goto fail;
  int len = snprintf(provenance, cap,
                     "hkc_version=%s\nformat=%d.%d\nspec_name=%s\nspec_hash=%016llx\nfusion=%s\nzstd_level=%d\n",
                     HKC_VERSION_STRING, HK_PACK_VERSION_MAJOR, HK_PACK_VERSION_MINOR, spec->name,
                     (unsigned long long)spec->hash,
                     spec->fusion == HKC_FUSION_NONE ? "none" : spec->fusion == HKC_FUSION_AUTO ? "auto" : "groups",
                     options->compression_level ? options->compression_level : 19);
  /* tuning: the mode and the databases' hash (never their paths) */
  if (len > 0 && (size_t)len < cap)
    len += snprintf(provenance + len, cap - (size_t)len, "tune=%s\n",
                    options->tune_mode == HKC_TUNE_DEFAULT ? "default" : "model");
  if (len > 0 && (size_t)len < cap && options->n_tuning_dbs)
    len += snprintf(provenance + len, cap - (size_t)len, "tuning_db=%016llx (%zu file(s), %zu entries)\n",
                    (unsigned long long)db.hash, db.n_files, db.n);
  else if (len > 0 && (size_t)len < cap)
    len += snprintf(provenance + len, cap - (size_t)len, "tuning_db=none\n");
  if (len > 0 && (size_t)len < cap && options->host_threads > 0)
    len += snprintf(provenance + len, cap - (size_t)len, "host_threads=%d\n", options->host_threads);
  if (len > 0 && (size_t)len < cap && options->no_pdl) /* only when given: other packs keep their bytes */
    len += snprintf(provenance + len, cap - (size_t)len, "pdl=off\n");
  if (len > 0 && (size_t)len < cap && n_weights) /* only when stored: other packs keep their bytes */
    len += snprintf(provenance + len, cap - (size_t)len, "weights=stored (%zu param(s))\n", n_weights);
  if (len > 0 && (size_t)len < cap && spec->fusion_dual_blocked) /* a target without a dual gemm kept SwiGLU apart */
    len += snprintf(provenance + len, cap - (size_t)len, "fusion_dual=off\n");
  if (len > 0 && (size_t)len < cap && spec->fusion_rope_blocked) /* a target without a rope epilogue kept rope apart */
    len += snprintf(provenance + len, cap - (size_t)len, "fusion_rope=off\n");
  if (len > 0 && (size_t)len < cap && spec->fusion_norm_blocked) /* a target without a folded rmsnorm kept it apart */
    len += snprintf(provenance + len, cap - (size_t)len, "fusion_norm=off\n");
  if (len > 0 && (size_t)len < cap && spec->fusion_ln_blocked) /* a target without a norm epilogue kept it apart */
    len += snprintf(provenance + len, cap - (size_t)len, "fusion_ln=off\n");
  /* auto's clock refused legal steps (only then: other packs keep their bytes); equal lines,
   * equal plans -- what hkc merge compares */
  if (len > 0 && (size_t)len < cap && spec->fusion_apart)
    len += snprintf(provenance + len, cap - (size_t)len, "fusion_apart=%s\n", spec->fusion_apart);
  /* kernel options: canonical, "none" for the defaults (codegen.h) */
  char kopts[HKC_KOPT_N_CFG * (HKC_TUNE_MAX + 24) + 128] = "none";
  if (options->kernel_options) hkc_kernel_options_format(options->kernel_options, kopts, sizeof kopts);
  if (len > 0 && (size_t)len < cap) len += snprintf(provenance + len, cap - (size_t)len, "kernel_options=%s\n", kopts);
  for (size_t i = 0; i < n_plans; i++) {
    outs[i] = plans[i].out; /* shallow: plans keep ownership */
    if (len > 0 && (size_t)len < cap)
      /* the target's own line, so that hkc merge carries it with the target: ", PTX compute_XY"
       * where the target stores PTX */
      len += snprintf(provenance + len, cap - (size_t)len, "target.%s=%s%s%s%s%s\n", plans[i].out.name, plans[i].name,
                      plans[i].out.toolchain[0] ? " built with " : "", plans[i].out.toolchain,
                      plans[i].ptx_arch[0] ? ", PTX " : "", plans[i].ptx_arch);
  }
  hkc_pack_in_t in = {.spec = spec,
                      .targets = outs,
                      .n_targets = n_plans,
                      .provenance = provenance,
                      .compression_level = options->compression_level,
                      .sign_seed = options->sign_seed,
                      .weights = weights,
                      .n_weights = n_weights};
  const int pack_phase = hkc_reporter_begin(progress, "pack", 1, "file (%zu target(s), zstd level %d)", n_plans,
                                            options->compression_level ? options->compression_level : 19);
  if (hkc_pack_write(&in, options->out_path) != 0) goto done;
  hkc_reporter_item(progress, pack_phase, "%s", options->out_path);
  if (options->out_stats) {
    hkc_build_stats_t *st = options->out_stats;
    st->seconds = now_seconds() - t0;
    st->gpu_kernels = counts.gpu_kernels;
    st->from_tuning = counts.from_tuning;
    st->cached = counts.cached;
    st->shared_cached = counts.shared_cached;
    st->compiled = counts.compiled;
    st->ptx_compiles = counts.ptx;
    st->ptx_cached = counts.ptx_cached;
    st->threads = counts.threads;
    st->tune_compiles = tuning.compiles;
    st->tune_cached = tuning.cached;
    st->tune_shared_cached = tuning.shared_cached;
    st->tune_failed = tuning.failed;
    st->tune_threads = tuning.threads;
  }
  const int show_shared = hkc_env_cache_url() && !options->no_cache;
  build_summary(plans, n_plans, &counts, &tuning, show_shared, emit_note, progress);
  hkc_reporter_note(progress, "wrote %s in %.2f s", options->out_path, now_seconds() - t0);
  hkc_reporter_destroy(progress); /* its line leaves the terminal before the summary */
  progress = NULL;
  if (!options->quiet) {
    build_summary(plans, n_plans, &counts, &tuning, show_shared, emit_stdout, NULL);
    printf("wrote %s: %zu target(s), %d batch size(s)\n", options->out_path, n_plans, spec->n_batch);
    for (size_t i = 0; i < n_plans; i++) {
      const hkc_target_out_t *t = &plans[i].out;
      printf("  %-14s %zu kernel(s), %zu bytes of code; workspace:", t->name, t->n_kernels, t->code_size);
      for (size_t g = 0; g < t->n_graphs; g++)
        printf(" batch %lld %llu B%s", (long long)t->graphs[g].batch, (unsigned long long)t->graphs[g].workspace_bytes,
               g + 1 < t->n_graphs ? "," : "");
      printf("\n");
    }
    if (n_weights) {
      uint64_t bytes = 0;
      for (size_t w = 0; w < n_weights; w++) bytes += weights[w].bytes;
      printf("  weights        %zu param(s), %llu bytes stored from %s\n", n_weights, (unsigned long long)bytes,
             options->weights_label ? options->weights_label : "the weights");
    }
  }
  rc = 0;
  goto done;
fail:
  if (hkc_error_count() == 0) hkc_error((hkc_loc_t){0}, "out of memory while building %s", spec->path);
done:
  plans_free(plans, n_plans);
  hkc_pack_weights_free(weights, n_weights);
  free(outs);
  free(provenance);
  hkc_tuner_destroy(tuner);
  hkc_reporter_destroy(progress);
  hkc_tune_db_free(&db);
  hkc_spec_destroy(spec);
  return rc;
}
