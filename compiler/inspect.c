/*
 * hkc inspect: prints what an artifact holds, read through the loader's verified view
 * (loader/src/pack_internal.h), so that a pack inspect accepts is one libhkrt accepts.
 */
#include <stdio.h>
#include <string.h>

#include "hk/hkrt.h"
#include "hkc.h"
#include "inspect.h"
#include "pack_internal.h"

static const char *const k_target_kinds[] = {"host", "hip", "cuda"};
static const char *const k_roles[] = {"input", "output", "param", "intermediate"};

static void print_dim(FILE *out, const hk_dim_rec_t *d) {
  if (d->mul == 0) fprintf(out, "%lld", (long long)d->add);
  else {
    if (d->mul == 1) fprintf(out, "batch");
    else fprintf(out, "%lld*batch", (long long)d->mul);
    if (d->add) fprintf(out, "%+lld", (long long)d->add);
  }
}

static void print_bytes(FILE *out, uint64_t b) {
  if (b >= (1u << 20)) fprintf(out, "%.2f MiB", (double)b / (1u << 20));
  else if (b >= 1024) fprintf(out, "%.1f KiB", (double)b / 1024);
  else fprintf(out, "%llu B", (unsigned long long)b);
}

static const hk_section_t *code_section(const hk_pack_view_t *v, const hk_target_rec_t *t) {
  return &v->sections[t->code_section];
}

int hkc_inspect(const char *path, FILE *out) {
  hk_pack_t *pack = NULL;
  if (hk_pack_open_file(path, NULL, &pack) != HK_OK) {
    fprintf(stderr, "hkc inspect: %s: %s\n", path, hk_last_error());
    return -1;
  }
  const hk_pack_view_t *v = hk_pack_view(pack);
  const hk_manifest_t *m = v->manifest;
  fprintf(out, "pack %s: %s\n", path, hk_pack_string(v, m->name));
  fprintf(out, "  format %u.%u, %llu bytes, %u sections, spec hash %016llx, dtype %s\n", v->header->version_major,
          v->header->version_minor, (unsigned long long)v->size, v->section_count,
          (unsigned long long)m->spec_hash, hk_dtype_label(m->dtype));
  fprintf(out, "  batch sizes:");
  for (uint32_t b = 0; b < m->batch_count; b++) fprintf(out, " %llu", (unsigned long long)m->batch_sizes[b]);
  fprintf(out, "\n\ntargets:\n");
  for (uint32_t t = 0; t < v->target_count; t++) {
    const hk_target_rec_t *tr = &v->targets[t];
    const hk_section_t *cs = code_section(v, tr);
    fprintf(out, "  %-16s %-5s %u kernel(s), code ", hk_pack_string(v, tr->name), k_target_kinds[tr->kind],
            tr->kernel_count);
    print_bytes(out, cs->raw_size);
    fprintf(out, " (");
    print_bytes(out, cs->size);
    fprintf(out, " stored%s)\n", cs->flags & HK_SECTION_FLAG_ZSTD ? ", zstd" : "");
  }

  fprintf(out, "\ntensors:\n");
  for (uint32_t i = 0; i < v->tensor_count; i++) {
    const hk_tensor_rec_t *tr = &v->tensors[i];
    fprintf(out, "  %-20s %-12s %-4s [", hk_pack_string(v, tr->name), k_roles[tr->role], hk_dtype_label(tr->dtype));
    for (uint32_t d = 0; d < tr->rank; d++) {
      if (d) fprintf(out, ", ");
      print_dim(out, &tr->dims[d]);
    }
    fprintf(out, "]\n");
  }

  for (uint32_t t = 0; t < v->target_count; t++) {
    const hk_target_rec_t *tr = &v->targets[t];
    fprintf(out, "\nkernels for %s:\n", hk_pack_string(v, tr->name));
    fprintf(out, "  %-36s %5s %5s %5s %8s %8s %5s %6s  %s\n", "name", "vgpr", "agpr", "sgpr", "shared", "scratch",
            "wave", "occup", "params");
    for (uint32_t k = tr->kernel_first; k < tr->kernel_first + tr->kernel_count; k++) {
      const hk_kernel_rec_t *kr = &v->kernels[k];
      fprintf(out, "  %-36s %5u %5u %5u %8u %8u %5u %6u  %s\n", hk_pack_string(v, kr->name), kr->vgprs, kr->agprs,
              kr->sgprs, kr->shared_bytes, kr->scratch_bytes, kr->wave_size, kr->occupancy,
              hk_pack_string(v, kr->params));
    }
    for (uint32_t g = tr->graph_first; g < tr->graph_first + tr->graph_count; g++) {
      const hk_graph_rec_t *gr = &v->graphs[g];
      fprintf(out, "\n  graph %s, batch %llu: %u node(s), workspace ", hk_pack_string(v, tr->name),
              (unsigned long long)gr->batch, gr->node_count);
      print_bytes(out, gr->workspace_bytes);
      fprintf(out, "\n");
      for (uint32_t n = 0; n < gr->node_count; n++) {
        const hk_node_rec_t *nr = &v->nodes[gr->node_first + n];
        fprintf(out, "    #%-3u %-14s %-36s grid [%u,%u,%u] block [%u,%u,%u] after [", n,
                hk_pack_string(v, nr->name), hk_pack_string(v, v->kernels[nr->kernel].name), nr->grid[0],
                nr->grid[1], nr->grid[2], nr->block[0], nr->block[1], nr->block[2]);
        for (uint32_t d = 0; d < nr->dep_count; d++) fprintf(out, "%s%u", d ? "," : "", v->deps[nr->dep_first + d]);
        fprintf(out, "]\n");
      }
    }
  }

  fprintf(out, "\nprovenance:\n");
  const char *p = v->provenance, *end = v->provenance + v->provenance_size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    fprintf(out, "  %.*s\n", (int)len, p);
    p += len + 1;
  }
  hk_pack_destroy(pack);
  return 0;
}
