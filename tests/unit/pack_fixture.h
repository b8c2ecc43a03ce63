/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small pipeline built by hand for the pack and loader tests:
 *   tensors  x: input f32 [batch, 100]   w: param f32 [100]
 *            t: intermediate f32 [batch, 100] (workspace)   y: output f32 [batch, 100]
 *   launch 0 hk_test_addc(x, w, t, batch, 100, 1.5f, NULL, NULL)   t = x + 1.5
 *   launch 1 hk_test_mul(t, w, y, n, n, 100)      y = t * w[i % 100]   (depends on 0)
 * The kernels take the argument layouts of the ops they are filed under (lower.h: rmsnorm's
 * x, gamma, out, rows, cols, eps, add, sum; mul's a, b, out, n, na, nb), which libhkrt checks
 * against the tensors before it loads code (launch extents); what they compute is their own.
 * at batch sizes 2 and 8 (fx_set_batches: others, up to FX_MAX_GRAPHS), for the host
 * target of this machine and (optionally) a fake "sm_90" target whose code is arbitrary
 * bytes; fx_add_plan adds cost figures (a PLAN section), fx_add_tmap TMA tensor map
 * arguments to the sm_90 launches, fx_add_pdl marks sm_90 launches for programmatic
 * dependent launch, fx_add_workspace scratch and semaphore arguments to sm_90 launches.
 */
#ifndef HK_PACK_FIXTURE_H
#define HK_PACK_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hkc.h"
#include "test_util.h"

#if defined(__x86_64__)
#define FX_HOST "host-x86_64"
#elif defined(__aarch64__)
#define FX_HOST "host-aarch64"
#else
#define FX_HOST "host-unknown"
#endif

#define FX_COLS 100
#define FX_BLOCK 64 /* elements per host block, as in the kernels below */
#define FX_MAX_GRAPHS 4 /* batch buckets fx_set_batches accepts */

static const char fx_kernel_source[] =
    "#include <stdint.h>\n"
    "#define BS 64\n"
    "void hk_test_addc(void *const *args, uint32_t b0, uint32_t b1) {\n"
    "  const float *x = *(float *const *)args[0]; float *y = *(float *const *)args[2];\n"
    "  int64_t n = *(const int64_t *)args[3] * *(const int64_t *)args[4]; float c = *(const float *)args[5];\n"
    "  for (int64_t i = (int64_t)b0 * BS; i < (int64_t)b1 * BS && i < n; i++) y[i] = x[i] + c;\n"
    "}\n"
    "void hk_test_mul(void *const *args, uint32_t b0, uint32_t b1) {\n"
    "  const float *a = *(float *const *)args[0], *w = *(float *const *)args[1];\n"
    "  float *y = *(float *const *)args[2];\n"
    "  int64_t n = *(const int64_t *)args[3], na = *(const int64_t *)args[4], nw = *(const int64_t *)args[5];\n"
    "  for (int64_t i = (int64_t)b0 * BS; i < (int64_t)b1 * BS && i < n; i++) y[i] = a[i % na] * w[i % nw];\n"
    "}\n"
    /* hk_test_mul through scratch (args[6]: n floats of its own) with two semaphores (args[7]):
     * the block range starting at 0 finds both at zero (else it poisons y[0]), moves one and
     * puts it back, as a split kernel does */
    "void hk_test_mul_ws(void *const *args, uint32_t b0, uint32_t b1) {\n"
    "  const float *a = *(float *const *)args[0], *w = *(float *const *)args[1];\n"
    "  float *y = *(float *const *)args[2], *part = *(float *const *)args[6];\n"
    "  uint32_t *sem = *(uint32_t *const *)args[7];\n"
    "  int64_t n = *(const int64_t *)args[3], nw = *(const int64_t *)args[5];\n"
    "  const int clean = b0 != 0 || (sem[0] == 0 && sem[1] == 0);\n"
    "  if (b0 == 0) sem[1]++;\n"
    "  for (int64_t i = (int64_t)b0 * BS; i < (int64_t)b1 * BS && i < n; i++) part[i] = a[i] * w[i % nw];\n"
    "  for (int64_t i = (int64_t)b0 * BS; i < (int64_t)b1 * BS && i < n; i++) y[i] = part[i];\n"
    "  if (b0 == 0) sem[1]--;\n"
    "  if (!clean) y[0] = 0.0f / 0.0f;\n"
    "}\n";

typedef struct fx {
  hkc_tensor_t tensors[4];
  hkc_spec_t spec;
  hkc_kernel_out_t kernels[2];      /* host target */
  hkc_kernel_out_t kernels_cuda[2]; /* the sm_90 target: same kernels, its own code range */
  hkc_launch_t launches[FX_MAX_GRAPHS][2];
  uint32_t dep0;
  uint64_t placements[FX_MAX_GRAPHS][4];
  hkc_graph_out_t graphs[FX_MAX_GRAPHS];
  hkc_cost_t costs[FX_MAX_GRAPHS][2]; /* fx_add_plan: per graph, per launch */
  int fused[FX_MAX_GRAPHS][2];
  hkc_target_out_t targets[2];
  hkc_pack_in_t in;
  /* fx_add_tmap, fx_add_pdl: the sm_90 target's own launches and graphs (the host's stay as
   * they are) */
  hkc_launch_t launches_cuda[FX_MAX_GRAPHS][2];
  hkc_graph_out_t graphs_cuda[FX_MAX_GRAPHS];
  /* fx_add_weights: the param w stored in the pack (format 1.4) */
  hkc_weight_in_t weight;
  float weight_values[FX_COLS];
} fx_t;

static inline hkc_tensor_t fx_tensor(const char *name, hk_role_t role, uint32_t rank, int64_t mul0, int64_t add0,
                                     int64_t mul1, int64_t add1) {
  hkc_tensor_t t;
  memset(&t, 0, sizeof t);
  t.name = (char *)name;
  t.role = role;
  t.dtype = HK_DTYPE_F32;
  t.rank = rank;
  t.dims[0] = (hkc_dim_t){mul0, add0};
  t.dims[1] = (hkc_dim_t){mul1, add1};
  t.producer = -1;
  return t;
}

/* One graph per batch size of fx->spec (launches, placements, workspace). */
static inline void fx_fill_graphs(fx_t *fx) {
  const hkc_spec_t *s = &fx->spec;
  for (int g = 0; g < s->n_batch; g++) {
    int64_t batch = s->batch_sizes[g], n = batch * FX_COLS;
    uint32_t blocks = (uint32_t)((n + FX_BLOCK - 1) / FX_BLOCK);
    hkc_launch_t *l0 = &fx->launches[g][0], *l1 = &fx->launches[g][1];
    l0->kernel = 0;
    l0->node_name = "add";
    l0->grid[0] = blocks;
    l0->grid[1] = l0->grid[2] = 1;
    l0->block[0] = l0->block[1] = l0->block[2] = 1;
    l0->args[0] = (hkc_arg_t){HK_ARG_TENSOR, 0, 0};     /* x */
    l0->args[1] = (hkc_arg_t){HK_ARG_TENSOR, 1, 0};     /* gamma: w */
    l0->args[2] = (hkc_arg_t){HK_ARG_TENSOR, 2, 0};     /* out: t */
    l0->args[3] = (hkc_arg_t){HK_ARG_I64, batch, 0};    /* rows */
    l0->args[4] = (hkc_arg_t){HK_ARG_I64, FX_COLS, 0};  /* cols */
    l0->args[5] = (hkc_arg_t){HK_ARG_F32, 0, 1.5f};     /* eps: the constant added */
    l0->args[6] = (hkc_arg_t){HK_ARG_NULL, 0, 0};       /* add */
    l0->args[7] = (hkc_arg_t){HK_ARG_NULL, 0, 0};       /* sum */
    l0->n_args = 8;
    *l1 = *l0;
    l1->kernel = 1;
    l1->node_name = "mul";
    l1->args[0] = (hkc_arg_t){HK_ARG_TENSOR, 2, 0};     /* a: t */
    l1->args[1] = (hkc_arg_t){HK_ARG_TENSOR, 1, 0};     /* b: w */
    l1->args[2] = (hkc_arg_t){HK_ARG_TENSOR, 3, 0};     /* out: y */
    l1->args[3] = (hkc_arg_t){HK_ARG_I64, n, 0};        /* n */
    l1->args[4] = (hkc_arg_t){HK_ARG_I64, n, 0};        /* na */
    l1->args[5] = (hkc_arg_t){HK_ARG_I64, FX_COLS, 0};  /* nb */
    l1->n_args = 6;
    l1->deps = &fx->dep0;
    l1->n_deps = 1;
    fx->placements[g][0] = fx->placements[g][1] = fx->placements[g][3] = HK_PLACEMENT_NONE;
    fx->placements[g][2] = 0;
    fx->graphs[g].batch = batch;
    fx->graphs[g].workspace_bytes = (uint64_t)((n * 4 + 255) / 256 * 256);
    fx->graphs[g].placements = fx->placements[g];
    fx->graphs[g].launches = fx->launches[g];
    fx->graphs[g].n_launches = 2;
  }
}

/* Fills fx. host_code is the host target's code object (borrowed); with_cuda adds the
 * fake sm_90 target after it. */
static inline void fx_init(fx_t *fx, const void *host_code, size_t host_size, int with_cuda) {
  memset(fx, 0, sizeof *fx);
  fx->tensors[0] = fx_tensor("x", HK_ROLE_INPUT, 2, 1, 0, 0, FX_COLS);
  fx->tensors[1] = fx_tensor("w", HK_ROLE_PARAM, 1, 0, FX_COLS, 0, 0);
  fx->tensors[2] = fx_tensor("t", HK_ROLE_INTERMEDIATE, 2, 1, 0, 0, FX_COLS);
  fx->tensors[3] = fx_tensor("y", HK_ROLE_OUTPUT, 2, 1, 0, 0, FX_COLS);
  hkc_spec_t *s = &fx->spec;
  s->path = (char *)"fixture.yaml";
  s->name = (char *)"fixture";
  s->version = 1;
  s->dtype = HK_DTYPE_F32;
  s->batch_sizes[0] = 2;
  s->batch_sizes[1] = 8;
  s->n_batch = 2;
  s->tensors = fx->tensors;
  s->n_tensors = 4;
  s->hash = 0x1234abcdull;

  snprintf(fx->kernels[0].name, sizeof fx->kernels[0].name, "hk_test_addc");
  fx->kernels[0].key.op = HK_OP_RMSNORM; /* its argument layout (what it computes is x + eps) */
  snprintf(fx->kernels[0].params, sizeof fx->kernels[0].params, "c=1.5");
  snprintf(fx->kernels[1].name, sizeof fx->kernels[1].name, "hk_test_mul");
  fx->kernels[1].key.op = HK_OP_MUL;
  snprintf(fx->kernels[1].params, sizeof fx->kernels[1].params, "bcast=w");
  for (int k = 0; k < 2; k++) fx->kernels[k].wave_size = 1;

  fx->dep0 = 0;
  fx_fill_graphs(fx);
  for (int t = 0; t < 2; t++) {
    hkc_target_out_t *to = &fx->targets[t];
    to->kernels = fx->kernels;
    to->n_kernels = 2;
    to->graphs = fx->graphs;
    to->n_graphs = (size_t)s->n_batch;
  }

  snprintf(fx->targets[0].name, sizeof fx->targets[0].name, "%s", FX_HOST);
  fx->targets[0].kind = HK_TARGET_HOST;
  fx->targets[0].code = (void *)host_code;
  fx->targets[0].code_size = host_size;
  snprintf(fx->targets[0].toolchain, sizeof fx->targets[0].toolchain, "cc: test");
  snprintf(fx->targets[1].name, sizeof fx->targets[1].name, "sm_90");
  fx->targets[1].kind = HK_TARGET_CUDA;
  fx->targets[1].code = (void *)"not a cubin, just bytes for the format tests";
  fx->targets[1].code_size = 45;
  memcpy(fx->kernels_cuda, fx->kernels, sizeof fx->kernels);
  fx->targets[1].kernels = fx->kernels_cuda;
  for (int k = 0; k < 2; k++) {
    fx->kernels[k].code_size = host_size; /* one shared object holds both host kernels */
    fx->kernels_cuda[k].code_offset = k ? 24 : 0; /* two "objects" in the cuda payload */
    fx->kernels_cuda[k].code_size = k ? 21 : 24;
  }
  fx->in.spec = s;
  fx->in.targets = fx->targets;
  fx->in.n_targets = with_cuda ? 2 : 1;
  fx->in.provenance = "hkc=" HKC_VERSION_STRING "\nspec=fixture.yaml\n";
  fx->in.compression_level = 3;
}

/* Gives every graph (both targets share them) the cost-model figures that make the writer
 * add a PLAN section: launch j of graph g moves 1000*(g+1)+j bytes and does
 * 10*(g+1)+j FLOPs; launch 1 is marked matrix and computes 2 spec nodes; unfused: 3
 * kernels, 5000*(g+1) bytes, 50*(g+1) FLOPs. */
/* Stores the param w in the pack (WEIGHTS, format 1.4): w[i] = 1 + i / 64 - `shift`. */
static inline void fx_add_weights(fx_t *fx, float shift) {
  for (int i = 0; i < FX_COLS; i++) fx->weight_values[i] = 1.0f + (float)i / 64 - shift;
  fx->weight = (hkc_weight_in_t){1, fx->weight_values, sizeof fx->weight_values, NULL};
  fx->in.weights = &fx->weight;
  fx->in.n_weights = 1;
}

static inline void fx_add_plan(fx_t *fx) {
  for (int g = 0; g < 2; g++) {
    for (int j = 0; j < 2; j++) {
      fx->costs[g][j] = (hkc_cost_t){.bytes = 1000u * (g + 1) + j, .flops = 10u * (g + 1) + j, .matrix = j == 1};
      fx->fused[g][j] = j + 1;
    }
    fx->graphs[g].costs = fx->costs[g];
    fx->graphs[g].fused_counts = fx->fused[g];
    fx->graphs[g].unfused = (hkc_cost_t){.bytes = 5000u * (g + 1), .flops = 50u * (g + 1)};
    fx->graphs[g].unfused_nodes = 3;
  }
}

/* Replaces the batch sizes (ascending, at most FX_MAX_GRAPHS) and rebuilds the graphs. */
static inline void fx_set_batches(fx_t *fx, const int64_t *batches, int n) {
  fx->spec.n_batch = n;
  for (int i = 0; i < n; i++) fx->spec.batch_sizes[i] = batches[i];
  fx_fill_graphs(fx);
  for (int t = 0; t < 2; t++) fx->targets[t].n_graphs = (size_t)n;
}

/* Gives the sm_90 target its own copy of the graphs (once), so that its launches can differ
 * from the host's. Call after fx_set_batches. */
static inline void fx_own_cuda_graphs(fx_t *fx) {
  if (fx->targets[1].graphs == fx->graphs_cuda) return;
  for (int g = 0; g < fx->spec.n_batch; g++) {
    memcpy(fx->launches_cuda[g], fx->launches[g], sizeof fx->launches[g]);
    fx->graphs_cuda[g] = fx->graphs[g];
    fx->graphs_cuda[g].launches = fx->launches_cuda[g];
  }
  fx->targets[1].graphs = fx->graphs_cuda;
}

/* Appends a TMA tensor map argument (HK_ARG_TMAP, `value` = hk_tmap_pack(...)) to launch
 * `launch` of every graph of the sm_90 target (the host target's launches stay without it).
 * Call after fx_set_batches. */
static inline void fx_add_tmap(fx_t *fx, int launch, uint64_t value) {
  fx_own_cuda_graphs(fx);
  for (int g = 0; g < fx->spec.n_batch; g++) {
    hkc_launch_t *l = &fx->launches_cuda[g][launch];
    l->args[l->n_args++] = (hkc_arg_t){HK_ARG_TMAP, (int64_t)value, 0};
  }
}

/* Marks launch `launch` of every graph of the sm_90 target for programmatic dependent
 * launch (HK_NODE_FLAG_PDL; the host target's launches stay without it). Call after
 * fx_set_batches. */
static inline void fx_add_pdl(fx_t *fx, int launch) {
  fx_own_cuda_graphs(fx);
  for (int g = 0; g < fx->spec.n_batch; g++) fx->launches_cuda[g][launch].pdl = 1;
}

/* Makes launch 1 of the host target's graphs (shared with sm_90 until fx_own_cuda_graphs) the
 * kernel hk_test_mul_ws: its own n floats of scratch after t in a workspace twice as large,
 * and counters [1, 3) of 3 per graph. Call after fx_set_batches. */
static inline void fx_use_workspace_kernel(fx_t *fx) {
  snprintf(fx->kernels[1].name, sizeof fx->kernels[1].name, "hk_test_mul_ws");
  for (int g = 0; g < fx->spec.n_batch; g++) {
    hkc_graph_out_t *go = &fx->graphs[g];
    hkc_launch_t *l = &fx->launches[g][1];
    const uint64_t units = go->workspace_bytes / HK_SCRATCH_UNIT;
    l->args[l->n_args++] = (hkc_arg_t){HK_ARG_SCRATCH, (int64_t)hk_scratch_pack(units, units), 0};
    l->args[l->n_args++] = (hkc_arg_t){HK_ARG_SEMAPHORE, (int64_t)hk_semaphore_pack(1, 2), 0};
    go->workspace_bytes *= 2;
    go->semaphore_count = 3;
  }
}

/* Appends a scratch and a semaphore argument (format 1.3; values hk_scratch_pack(...) and
 * hk_semaphore_pack(...)) to launch `launch` of every graph of the sm_90 target, whose graphs
 * get `semaphores` counters (the host target's stay without). Call after fx_set_batches. */
static inline void fx_add_workspace(fx_t *fx, int launch, uint64_t scratch, uint64_t semaphore, uint32_t semaphores) {
  fx_own_cuda_graphs(fx);
  for (int g = 0; g < fx->spec.n_batch; g++) {
    hkc_launch_t *l = &fx->launches_cuda[g][launch];
    l->args[l->n_args++] = (hkc_arg_t){HK_ARG_SCRATCH, (int64_t)scratch, 0};
    l->args[l->n_args++] = (hkc_arg_t){HK_ARG_SEMAPHORE, (int64_t)semaphore, 0};
    fx->graphs_cuda[g].semaphore_count = semaphores;
  }
}

/* Compiles C source text into a shared object in memory (malloc'd). 0 / -1. */
static inline int fx_compile_source(const char *source, void **out_code, size_t *out_size) {
  char *dir = hk_test_tmpdir();
  if (!dir) return -1;
  char src[4200], so[4200], cmd[9000], log[4096];
  snprintf(src, sizeof src, "%s/k.c", dir);
  snprintf(so, sizeof so, "%s/k.so", dir);
  FILE *f = fopen(src, "w");
  if (!f) return -1;
  fputs(source, f);
  fclose(f);
  const char *cc = getenv("CC");
  snprintf(cmd, sizeof cmd, "%s -O1 -shared -fPIC -o %s %s", cc && *cc ? cc : "cc", so, src);
  int rc = hk_test_run(cmd, log, sizeof log);
  char *data = NULL;
  size_t size = 0;
  if (rc == 0) rc = hkc_read_file(so, &data, &size);
  else fprintf(stderr, "compiling test kernels failed: %s\n", log);
  remove(src);
  remove(so);
  remove(dir);
  free(dir);
  *out_code = data;
  *out_size = size;
  return rc == 0 ? 0 : -1;
}

/* Compiles fx_kernel_source into a shared object in memory (malloc'd). 0 / -1. */
static inline int fx_compile_kernels(void **out_code, size_t *out_size) {
  return fx_compile_source(fx_kernel_source, out_code, out_size);
}

/* An exact-size heap copy (so ASan catches any read past the end). */
static inline uint8_t *fx_copy(const void *data, size_t size) {
  uint8_t *p = malloc(size ? size : 1);
  if (p && size) memcpy(p, data, size);
  return p;
}

/* Section table entry i of an artifact in buf. */
static inline hk_section_t *fx_section(uint8_t *buf, uint32_t i) {
  hk_pack_header_t *h = (hk_pack_header_t *)buf;
  return (hk_section_t *)(buf + h->section_table_offset) + i;
}

/* Index of the first section of `kind`. */
static inline uint32_t fx_find_section(uint8_t *buf, uint32_t kind) {
  hk_pack_header_t *h = (hk_pack_header_t *)buf;
  for (uint32_t i = 0; i < h->section_count; i++)
    if (fx_section(buf, i)->kind == kind) return i;
  return UINT32_MAX;
}

/* Pointer to the payload of the first section of `kind`. */
static inline void *fx_payload(uint8_t *buf, uint32_t kind) {
  return buf + fx_section(buf, fx_find_section(buf, kind))->offset;
}
#endif
