/*
 * The build driver: runs the stages of hkc_build() for every requested target and
 * batch bucket, then hands everything to the pack writer. Owns every intermediate
 * allocation; nothing reaches the output path unless all targets built.
 */
#include <stdlib.h>
#include <string.h>

#include "hkc.h"

typedef enum { TARGET_HOST, TARGET_UNKNOWN } target_family_t;

/* Target names a user may write, as accepted by this build of hkc. */
static const char *const k_known_targets = "host";

static void target_out_free(hkc_target_out_t *t) {
  free(t->code);
  free(t->kernels);
  for (size_t g = 0; g < t->n_graphs; g++) {
    hkc_graph_out_t *graph = &t->graphs[g];
    for (size_t l = 0; l < graph->n_launches; l++) free(graph->launches[l].deps);
    free(graph->launches);
    free(graph->placements);
  }
  free(t->graphs);
  memset(t, 0, sizeof *t);
}

/* Collects the distinct kernels the spec needs; node_kernel[i] = kernel index of node i. */
static int collect_kernels(const hkc_spec_t *spec, hkc_target_out_t *t, uint32_t *node_kernel) {
  size_t cap = 0;
  for (size_t i = 0; i < spec->n_nodes; i++) {
    hkc_kernel_key_t key;
    hkc_arg_t args[HKC_MAX_ARGS];
    if (hkc_lower_node(spec, i, spec->batch_sizes[0], &key, args) < 0) return -1;
    size_t k = 0;
    while (k < t->n_kernels && !hkc_kernel_key_equal(&t->kernels[k].key, &key)) k++;
    if (k == t->n_kernels) {
      if (hkc_reserve((void **)&t->kernels, &cap, k + 1, sizeof *t->kernels) != 0) return -1;
      hkc_kernel_out_t *ko = &t->kernels[k];
      memset(ko, 0, sizeof *ko);
      ko->key = key;
      hkc_kernel_key_name(&key, ko->name, sizeof ko->name);
      snprintf(ko->params, sizeof ko->params, "op=%s dtype=%s%s%s%s%s%s", hkc_op_name(key.op),
               hkc_dtype_name(key.dtype), key.op == HK_OP_GEMM ? " act=" : "",
               key.op == HK_OP_GEMM ? hkc_act_name(key.act) : "", key.has_bias ? " bias" : "",
               key.has_residual ? " residual" : "", key.trans_b ? " trans_b" : "");
      ko->wave_size = 1;
      t->n_kernels++;
    }
    node_kernel[i] = (uint32_t)k;
  }
  return 0;
}

/* Plans one batch bucket: memory, dependencies and the launch of every node. */
static int build_graph(const hkc_spec_t *spec, const hkc_target_out_t *t, const uint32_t *node_kernel,
                       int64_t batch, hkc_graph_out_t *g) {
  g->batch = batch;
  g->placements = calloc(spec->n_tensors ? spec->n_tensors : 1, sizeof *g->placements);
  g->launches = calloc(spec->n_nodes, sizeof *g->launches);
  if (!g->placements || !g->launches) return -1;
  if (hkc_plan_memory(spec, batch, g->placements, &g->workspace_bytes) != 0) return -1;
  hkc_deps_t deps;
  if (hkc_plan_deps(spec, batch, g->placements, &deps) != 0) return -1;
  g->n_launches = spec->n_nodes;
  for (size_t i = 0; i < spec->n_nodes; i++) {
    hkc_launch_t *l = &g->launches[i];
    hkc_kernel_key_t key;
    int n_args = hkc_lower_node(spec, i, batch, &key, l->args);
    if (n_args < 0) {
      hkc_deps_free(&deps);
      return -1;
    }
    l->n_args = (uint32_t)n_args;
    l->kernel = node_kernel[i];
    l->node_name = spec->nodes[i].name;
    if (t->kind == HK_TARGET_HOST) hkc_host_launch_dims(&key, l->args, l->n_args, l->grid, l->block);
    uint32_t nd = deps.start[i + 1] - deps.start[i];
    if (nd) {
      l->deps = malloc(nd * sizeof *l->deps);
      if (!l->deps) {
        hkc_deps_free(&deps);
        return -1;
      }
      memcpy(l->deps, &deps.list[deps.start[i]], nd * sizeof *l->deps);
      l->n_deps = nd;
    }
  }
  hkc_deps_free(&deps);
  return 0;
}

static int build_host(const hkc_spec_t *spec, hkc_target_out_t *t) {
  t->kind = HK_TARGET_HOST;
  snprintf(t->name, sizeof t->name, "%s", hkc_host_target_name());
  uint32_t *node_kernel = calloc(spec->n_nodes, sizeof *node_kernel);
  if (!node_kernel) goto oom;
  if (collect_kernels(spec, t, node_kernel) != 0) goto fail;
  char *source = hkc_codegen_host(t->kernels, t->n_kernels);
  if (!source) goto oom;
  uint64_t source_hash = hkc_hash64(source, strlen(source));
  int rc = hkc_rtc_host_compile(source, &t->code, &t->code_size, t->toolchain, sizeof t->toolchain);
  free(source);
  if (rc != 0) {
    free(node_kernel);
    return -1;
  }
  /* One shared object holds every host kernel. */
  for (size_t k = 0; k < t->n_kernels; k++) {
    t->kernels[k].source_hash = source_hash;
    t->kernels[k].code_offset = 0;
    t->kernels[k].code_size = t->code_size;
  }
  t->graphs = calloc((size_t)spec->n_batch, sizeof *t->graphs);
  if (!t->graphs) goto oom;
  t->n_graphs = (size_t)spec->n_batch;
  for (int b = 0; b < spec->n_batch; b++)
    if (build_graph(spec, t, node_kernel, spec->batch_sizes[b], &t->graphs[b]) != 0) goto fail;
  free(node_kernel);
  return 0;
oom:
  hkc_error((hkc_loc_t){0}, "out of memory while building target %s", t->name);
fail:
  free(node_kernel);
  if (hkc_error_count() == 0) hkc_error((hkc_loc_t){0}, "out of memory while building target %s", t->name);
  return -1;
}

static target_family_t target_family(const char *name) {
  if (strcmp(name, "host") == 0 || strcmp(name, hkc_host_target_name()) == 0) return TARGET_HOST;
  return TARGET_UNKNOWN;
}

/* Splits the comma-separated list (or the spec's targets) into validated names. */
static int resolve_targets(const hkc_spec_t *spec, const char *list, char ***out_names, size_t *out_n) {
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
  int rc = 0;
  if (n == 0) {
    hkc_error((hkc_loc_t){spec->path, 0, 0},
              "no targets: give `targets:` in the spec or --target (known: %s)", k_known_targets);
    rc = -1;
  }
  for (size_t i = 0; i < n; i++) {
    for (size_t j = 0; j < i; j++)
      if (target_family(names[i]) == target_family(names[j]) && strcmp(names[i], names[j]) == 0) {
        hkc_error((hkc_loc_t){0}, "target %s given twice", names[i]);
        rc = -1;
      }
    if (target_family(names[i]) == TARGET_UNKNOWN) {
      const char *why = (strncmp(names[i], "gfx", 3) == 0 || strncmp(names[i], "sm_", 3) == 0)
                            ? "GPU targets are not supported by this build of hkc yet"
                            : "unknown target";
      hkc_error((hkc_loc_t){0}, "target %s: %s (this hkc builds: %s)", names[i], why, k_known_targets);
      rc = -1;
    }
  }
  *out_names = names;
  *out_n = n;
  return rc;
}

static void free_names(char **names, size_t n) {
  for (size_t i = 0; i < n; i++) free(names[i]);
  free(names);
}

int hkc_build(const hkc_build_options_t *options) {
  hkc_spec_t *spec = NULL;
  if (hkc_spec_load(options->spec_path, &spec) != 0) return -1;
  char **names = NULL;
  size_t n_names = 0;
  hkc_target_out_t *targets = NULL;
  char *provenance = NULL;
  int rc = -1;
  if (resolve_targets(spec, options->targets, &names, &n_names) != 0) goto done;
  targets = calloc(n_names, sizeof *targets);
  if (!targets) goto done;
  for (size_t i = 0; i < n_names; i++) {
    if (target_family(names[i]) == TARGET_HOST && build_host(spec, &targets[i]) != 0) goto done;
  }

  /* Provenance: what produced this artifact, without paths or time so that the same
   * inputs give the same bytes. */
  size_t cap = 4096 + n_names * 256;
  provenance = malloc(cap);
  if (!provenance) goto done;
  int len = snprintf(provenance, cap,
                     "hkc_version=%s\nformat=%d.%d\nspec_name=%s\nspec_hash=%016llx\nfusion=%s\n"
                     "zstd_level=%d\n",
                     HKC_VERSION_STRING, HK_PACK_VERSION_MAJOR, HK_PACK_VERSION_MINOR, spec->name,
                     (unsigned long long)spec->hash,
                     spec->fusion == HKC_FUSION_NONE ? "none" : spec->fusion == HKC_FUSION_AUTO ? "auto" : "groups",
                     options->compression_level ? options->compression_level : 19);
  for (size_t i = 0; i < n_names && len > 0 && (size_t)len < cap; i++)
    len += snprintf(provenance + len, cap - (size_t)len, "toolchain.%s=%s\n", targets[i].name,
                    targets[i].toolchain);

  hkc_pack_in_t in = {.spec = spec,
                      .targets = targets,
                      .n_targets = n_names,
                      .provenance = provenance,
                      .compression_level = options->compression_level};
  if (hkc_pack_write(&in, options->out_path) != 0) goto done;
  if (!options->quiet) {
    printf("wrote %s: %zu target(s), %d batch size(s)\n", options->out_path, n_names, spec->n_batch);
    for (size_t i = 0; i < n_names; i++) {
      printf("  %-14s %zu kernel(s), %zu bytes of code; workspace:", targets[i].name, targets[i].n_kernels,
             targets[i].code_size);
      for (size_t g = 0; g < targets[i].n_graphs; g++)
        printf(" batch %lld %llu B%s", (long long)targets[i].graphs[g].batch,
               (unsigned long long)targets[i].graphs[g].workspace_bytes, g + 1 < targets[i].n_graphs ? "," : "");
      printf("\n");
    }
  }
  rc = 0;
done:
  if (targets)
    for (size_t i = 0; i < n_names; i++) target_out_free(&targets[i]);
  free(targets);
  free(provenance);
  free_names(names, n_names);
  hkc_spec_destroy(spec);
  return rc;
}
