/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Launch overhead on a GPU: one pack of many tiny kernels, replayed three ways.
 *
 *   graph  -- hk_session_run with the pack's CUDA graph (the default)
 *   stream -- hk_session_run with HK_LAUNCH_MODE_STREAM (one cuLaunchKernel per node)
 *   raw    -- a CUDA graph of the same cubins and arguments built here directly with the
 *             driver API, the floor a graph-based runtime can reach
 *
 * Each mode: warm-up, then REPS samples of ITERS back-to-back runs followed by one
 * synchronize; the figure is the median over samples of time per run / nodes.
 *
 *   usage: hk_bench_launch PACK [--batch N] [--reps R] [--iters K]
 *
 * Uses libhkrt's internal view of the pack for the raw graph (same cubins, grid, block
 * and arguments as the pack's own graph).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_internal.h"
#include "hk/hkrt.h"
#include "pack_internal.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#define CHECK_HK(call)                                                       \
  do {                                                                       \
    if ((call) != HK_OK) {                                                   \
      fprintf(stderr, "%s failed: %s\n", #call, hk_last_error());            \
      exit(1);                                                               \
    }                                                                        \
  } while (0)
#define CHECK_CU(call)                                                       \
  do {                                                                       \
    int r_ = (call);                                                         \
    if (r_ != 0) {                                                           \
      fprintf(stderr, "%s failed: CUDA error %d\n", #call, r_);              \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

typedef struct {
  hk_session_t *s;
  void **buffers;
  uint32_t n;
} bound_t;

/* A session with every application tensor bound to fresh device memory (filled). */
static bound_t make_session(hk_pack_t *pack, uint64_t batch, hk_launch_mode_t mode) {
  bound_t b = {0};
  hk_session_options_t so = {.struct_size = sizeof so, .batch = batch, .launch_mode = mode};
  CHECK_HK(hk_session_create(pack, &so, &b.s));
  b.n = hk_session_tensor_count(b.s);
  b.buffers = calloc(b.n, sizeof *b.buffers);
  for (uint32_t t = 0; t < b.n; t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(b.s, t, &info);
    unsigned char *host = malloc(info.bytes);
    for (size_t i = 0; i < info.bytes; i++) host[i] = (unsigned char)(i * 37 + 11); /* finite in f32/f16/bf16 */
    if (info.element_type == HK_ELEMENT_F32)
      for (size_t i = 0; i < info.bytes / 4; i++) ((float *)host)[i] = (float)(i % 13) * 0.1f - 0.6f;
    CHECK_HK(hk_session_alloc(b.s, info.bytes, &b.buffers[t]));
    CHECK_HK(hk_session_copy(b.s, b.buffers[t], host, info.bytes, HK_COPY_HOST_TO_DEVICE));
    CHECK_HK(hk_session_bind(b.s, info.name, b.buffers[t], info.bytes));
    free(host);
  }
  return b;
}

static double time_session(hk_session_t *s, int reps, int iters, uint32_t nodes) {
  for (int i = 0; i < 50; i++) CHECK_HK(hk_session_run(s, NULL));
  CHECK_HK(hk_session_synchronize(s, NULL));
  double *samples = malloc(reps * sizeof *samples);
  for (int r = 0; r < reps; r++) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) CHECK_HK(hk_session_run(s, NULL));
    CHECK_HK(hk_session_synchronize(s, NULL));
    samples[r] = (now_us() - t0) / iters / nodes;
  }
  qsort(samples, reps, sizeof *samples, cmp_double);
  double m = samples[reps / 2];
  free(samples);
  return m;
}

/* The raw graph: the pack's graph for this batch rebuilt here with the driver API. */
static double time_raw(hk_pack_t *pack, const bound_t *b, uint64_t batch, int reps, int iters, uint32_t *out_nodes) {
  const hk_cuda_symbols_t *cu = hk_cuda_symbols();
  if (!cu || !cu->cuGraphCreate || !cu->cuGraphAddKernelNode_v2 || !cu->cuGraphInstantiateWithFlags) {
    fprintf(stderr, "raw graph: CUDA graph API unavailable\n");
    exit(1);
  }
  const hk_pack_view_t *v = hk_pack_view(pack);
  uint32_t target = UINT32_MAX, graph = 0;
  for (uint32_t t = 0; t < v->target_count; t++)
    if (v->targets[t].kind == HK_TARGET_CUDA) target = t;
  if (target == UINT32_MAX || !hk_pack_find_graph(v, target, batch, &graph)) {
    fprintf(stderr, "raw graph: the pack has no CUDA graph for batch %llu\n", (unsigned long long)batch);
    exit(1);
  }
  void *code;
  size_t code_size;
  CHECK_HK(hk_pack_code_load(v, target, NULL, &code, &code_size));
  const hk_graph_rec_t *g = &v->graphs[graph];
  /* tensor addresses: bound buffers by name, intermediates in our own workspace */
  hk_cu_deviceptr_t ws = 0;
  if (g->workspace_bytes) CHECK_CU(cu->cuMemAlloc(&ws, g->workspace_bytes));
  void **tensor_ptr = calloc(v->tensor_count, sizeof *tensor_ptr);
  for (uint32_t t = 0; t < v->tensor_count; t++) {
    uint64_t place = v->placements[g->placement_first + t];
    if (place != HK_PLACEMENT_NONE) {
      tensor_ptr[t] = (void *)(uintptr_t)(ws + place);
      continue;
    }
    for (uint32_t a = 0; a < b->n; a++) {
      hk_tensor_info_t info;
      hk_session_tensor_info(b->s, a, &info);
      if (strcmp(info.name, hk_pack_string(v, v->tensors[t].name)) == 0) tensor_ptr[t] = b->buffers[a];
    }
  }
  hk_cu_graph_t cg;
  CHECK_CU(cu->cuGraphCreate(&cg, 0));
  hk_cu_graph_node_t *nodes = calloc(g->node_count, sizeof *nodes);
  /* argument values live here for the graph's lifetime */
  uint64_t *values = calloc((size_t)g->node_count * HK_MAX_ARGS_PER_NODE, sizeof *values);
  void **params = calloc((size_t)g->node_count * HK_MAX_ARGS_PER_NODE, sizeof *params);
  for (uint32_t n = 0; n < g->node_count; n++) {
    const hk_node_rec_t *nr = &v->nodes[g->node_first + n];
    const hk_kernel_rec_t *kr = &v->kernels[nr->kernel];
    hk_cu_module_t mod;
    hk_cu_function_t fn;
    CHECK_CU(cu->cuModuleLoadData(&mod, (const char *)code + kr->code_offset));
    CHECK_CU(cu->cuModuleGetFunction(&fn, mod, hk_pack_string(v, kr->name)));
    for (uint32_t a = 0; a < nr->arg_count; a++) {
      const hk_arg_rec_t *ar = &v->args[nr->arg_first + a];
      uint64_t *slot = &values[(size_t)n * HK_MAX_ARGS_PER_NODE + a];
      if (ar->kind == HK_ARG_TMAP) { /* a 128-byte descriptor, built by libhkrt only */
        fprintf(stderr, "raw graph: node %u takes a TMA tensor map, which this benchmark does not build\n", n);
        exit(1);
      }
      if (ar->kind == HK_ARG_TENSOR) *slot = (uint64_t)(uintptr_t)tensor_ptr[ar->value];
      else if (ar->kind == HK_ARG_NULL) *slot = 0;
      else *slot = ar->value; /* I64, or F32 in the low 32 bits (little-endian) */
      params[(size_t)n * HK_MAX_ARGS_PER_NODE + a] = slot;
    }
    /* plain edges even into HK_NODE_FLAG_PDL nodes: correct (their wait returns at once), but
     * without the overlap libhkrt's graph gets from programmatic edges */
    hk_cu_graph_node_t deps[64];
    uint32_t nd = nr->dep_count < 64 ? nr->dep_count : 64;
    for (uint32_t d = 0; d < nd; d++) deps[d] = nodes[v->deps[nr->dep_first + d]];
    hk_cu_kernel_node_params_v2_t p = {.func = fn, .gridDimX = nr->grid[0], .gridDimY = nr->grid[1],
                                       .gridDimZ = nr->grid[2], .blockDimX = nr->block[0],
                                       .blockDimY = nr->block[1], .blockDimZ = nr->block[2],
                                       .sharedMemBytes = nr->shared_bytes,
                                       .kernelParams = &params[(size_t)n * HK_MAX_ARGS_PER_NODE]};
    CHECK_CU(cu->cuGraphAddKernelNode_v2(&nodes[n], cg, deps, nd, &p));
  }
  hk_cu_graph_exec_t exec;
  CHECK_CU(cu->cuGraphInstantiateWithFlags(&exec, cg, 0));
  for (int i = 0; i < 50; i++) CHECK_CU(cu->cuGraphLaunch(exec, NULL));
  CHECK_CU(cu->cuCtxSynchronize());
  double *samples = malloc(reps * sizeof *samples);
  for (int r = 0; r < reps; r++) {
    double t0 = now_us();
    for (int i = 0; i < iters; i++) CHECK_CU(cu->cuGraphLaunch(exec, NULL));
    CHECK_CU(cu->cuCtxSynchronize());
    samples[r] = (now_us() - t0) / iters / g->node_count;
  }
  qsort(samples, reps, sizeof *samples, cmp_double);
  *out_nodes = g->node_count;
  double m = samples[reps / 2];
  free(samples);
  return m; /* modules, graph and workspace are left to process exit */
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PACK [--batch N] [--reps R] [--iters K]\n", argv[0]);
    return 2;
  }
  uint64_t batch = 1;
  int reps = 21, iters = 50;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--batch")) batch = strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--iters")) iters = atoi(argv[i + 1]);
  }
  hk_pack_t *pack;
  const hk_pack_open_options_t oo = {.struct_size = sizeof oo, .allow_unsigned_native_code = 1}; /* its own pack */
  CHECK_HK(hk_pack_open_file_ex(argv[1], &oo, &pack));
  bound_t graph = make_session(pack, batch, HK_LAUNCH_MODE_GRAPH);
  bound_t stream = make_session(pack, batch, HK_LAUNCH_MODE_STREAM);
  uint32_t nodes = 0;
  double raw = time_raw(pack, &graph, batch, reps, iters, &nodes);
  double tg = time_session(graph.s, reps, iters, nodes);
  double ts = time_session(stream.s, reps, iters, nodes);
  double raw2 = time_raw(pack, &graph, batch, reps, iters, &nodes); /* again: drift check */
  printf("pack %s, target %s, batch %llu, %u nodes, median of %d samples x %d runs\n", argv[1],
         hk_session_target(graph.s), (unsigned long long)batch, nodes, reps, iters);
  printf("  hkc graph replay   %8.3f us/node\n", tg);
  printf("  hkc stream launch  %8.3f us/node  (%.2fx the graph)\n", ts, ts / tg);
  printf("  raw CUDA graph     %8.3f us/node  (again: %.3f; hkc graph / raw = %.3f)\n", raw, raw2,
         tg / (raw < raw2 ? raw : raw2));
  return 0;
}
