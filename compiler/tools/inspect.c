/* SPDX-License-Identifier: Apache-2.0 */
/*
 * hkc inspect: prints what an artifact holds, read through the loader's verified view
 * (loader/src/pack_internal.h), so that a pack inspect accepts is one libhkrt accepts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "codegen/codegen.h"
#include "gpu_internal.h"
#include "hk/hkrt.h"
#include "image_internal.h"
#include "pack_internal.h"
#include "rtc/rtc.h"
#include "tools/tools.h"
#include "util/util.h"

static const char *const k_target_kinds[] = {"host", "hip", "cuda"};
static const char *const k_roles[] = {"input", "output", "param", "intermediate", "state"};

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

/* The TMA tensor map arguments of a node, when it has any, on a line of their own:
 * "      tensor maps: arg 9 tmap(x, box 64x128, swz128), arg 10 tmap(w, box 64x256, none)"
 * (box inner x outer elements; verified). */
static void print_tmaps(FILE *out, const hk_pack_view_t *v, const hk_node_rec_t *nr) {
  static const char *const swizzles[] = {"none", "swz32", "swz64", "swz128"};
  int first = 1;
  for (uint32_t a = 0; a < nr->arg_count; a++) {
    const hk_arg_rec_t *ar = &v->args[nr->arg_first + a];
    if (ar->kind != HK_ARG_TMAP) continue;
    fprintf(out, "%sarg %u tmap(%s, box %ux%u, %s)", first ? "      tensor maps: " : ", ", a,
            hk_pack_string(v, v->tensors[hk_tmap_tensor(ar->value)].name), hk_tmap_box_inner(ar->value),
            hk_tmap_box_outer(ar->value), swizzles[hk_tmap_swizzle(ar->value)]);
    first = 0;
  }
  if (!first) fprintf(out, "\n");
}

/* The scratch and semaphore arguments of a node (format 1.3), when it has any, on a line of
 * their own: "      workspace: arg 11 scratch(64.0 KiB at 1.00 MiB), arg 12 semaphores(6 from 0)"
 * (verified ranges of the graph's workspace and counters). */
static void print_workspace_args(FILE *out, const hk_pack_view_t *v, const hk_node_rec_t *nr) {
  int first = 1;
  for (uint32_t a = 0; a < nr->arg_count; a++) {
    const hk_arg_rec_t *ar = &v->args[nr->arg_first + a];
    if (ar->kind != HK_ARG_SCRATCH && ar->kind != HK_ARG_SEMAPHORE) continue;
    fprintf(out, "%sarg %u ", first ? "      workspace: " : ", ", a);
    if (ar->kind == HK_ARG_SCRATCH) {
      fprintf(out, "scratch(");
      print_bytes(out, hk_scratch_bytes(ar->value));
      fprintf(out, " at ");
      print_bytes(out, hk_scratch_offset(ar->value));
      fprintf(out, ")");
    } else {
      fprintf(out, "semaphores(%u from %u)", hk_semaphore_count(ar->value), hk_semaphore_first(ar->value));
    }
    first = 0;
  }
  if (!first) fprintf(out, "\n");
}

/* Opens a pack for reading only (hkrt.h, metadata_only): no code can load, and a signature
 * that does not verify is shown rather than refused. NULL on failure (printed). */
static hk_pack_t *open_for_tools(const char *path, const uint8_t (*trusted)[HK_PUBLIC_KEY_BYTES], uint32_t n_trusted) {
  hk_pack_open_options_t o = {.struct_size = sizeof o, .metadata_only = 1, .trusted_keys = trusted,
                              .trusted_key_count = n_trusted};
  hk_pack_t *pack = NULL;
  return hkc_tool_open_pack("inspect", path, &o, &pack) == HK_OK ? pack : NULL;
}

/* Text from the pack that verify does not restrict (provenance), escaped (hkc_escape_into):
 * an ESC sequence never reaches the terminal raw. (Names are restricted to safe characters by
 * verify, and still printed through hkc_escaped.) */
static void print_escaped(FILE *out, const char *p, size_t len) {
  char *buf = malloc(len * 4 + 1);
  if (buf) fputs(hkc_escape_into(p, len, buf, len * 4 + 1), out);
  free(buf);
}

static const hk_section_t *code_section(const hk_pack_view_t *v, const hk_target_rec_t *t) {
  return &v->sections[t->code_section];
}

hk_status_t hkc_tool_open_pack(const char *tool, const char *path, const hk_pack_open_options_t *options,
                               hk_pack_t **out_pack) {
  *out_pack = NULL;
  if (hkc_input_check(path, HKC_PACK_FILE_MAX) != 0) {
    fprintf(stderr, "hkc %s: %s: %s\n", tool, path, hkc_strerror(errno));
    return HK_STATUS_IO;
  }
  hk_status_t st = hk_pack_open_file_ex(path, options, out_pack);
  if (st != HK_OK) { /* the loader's message names the file already when it is about the file */
    const char *why = hk_last_error();
    if (strncmp(why, path, strlen(path)) == 0) fprintf(stderr, "hkc %s: %s\n", tool, why);
    else fprintf(stderr, "hkc %s: %s: %s\n", tool, path, why);
  }
  return st;
}

int hkc_inspect(const char *path, FILE *out) { return hkc_inspect_trusted(path, NULL, 0, out); }

/* "signature: ed25519 key <id> verified (trusted|not trusted)", "... INVALID (why)", "none". */
static void print_signature(const hk_pack_t *pack, uint32_t n_trusted, FILE *out) {
  const char *id;
  hk_signature_state_t s = hk_pack_signature(pack, &id);
  if (s == HK_SIGNATURE_NONE) {
    fprintf(out, "  signature: none\n");
    return;
  }
  fprintf(out, "  signature: ed25519 key %s %s", id, s == HK_SIGNATURE_INVALID ? "INVALID" : "verified");
  if (s != HK_SIGNATURE_INVALID && n_trusted) fprintf(out, ", %s", s == HK_SIGNATURE_TRUSTED ? "trusted" : "NOT trusted");
  fprintf(out, "\n");
}

/* A host target's instruction-set variants: "baseline", and "avx2" where its code object
 * defines every kernel's AVX2 twin (HKC_HOST_VARIANT_SUFFIX: hkc build on x86-64; libhkrt runs
 * them on a CPU with AVX2 and FMA). NULL when the code does not decompress or is not a valid
 * shared object for its CPU. */
static const char *host_variants(const hk_pack_view_t *v, uint32_t t) {
  const hk_target_rec_t *tr = &v->targets[t];
  void *code = NULL;
  size_t size = 0;
  if (hk_pack_code_load(v, t, NULL, &code, &size) != HK_OK) return NULL;
  const char *bad = NULL; /* read its symbols only once it checks out, as the loader would */
  if (!hk_elf_image_ok(code, size, hk_elf_host_machine(hk_pack_string(v, tr->name)), HK_ET_DYN, &bad)) {
    free(code);
    return NULL;
  }
  int all = tr->kernel_count > 0;
  for (uint32_t k = tr->kernel_first; all && k < tr->kernel_first + tr->kernel_count; k++) {
    char name[512];
    all = snprintf(name, sizeof name, "%s" HKC_HOST_VARIANT_SUFFIX, hk_pack_string(v, v->kernels[k].name)) <
              (int)sizeof name &&
          hk_elf_defines_function(code, size, name);
  }
  free(code);
  return all ? "baseline, avx2" : "baseline";
}

/* A kernel's occupancy in percent on its target (-1: unknown, the host). */
static double kernel_occupancy_pct(const hk_pack_view_t *v, const hk_target_rec_t *tr, const hk_kernel_rec_t *kr) {
  const hkc_gpu_arch_t *arch = tr->kind == HK_TARGET_HOST ? NULL : hkc_gpu_arch_find(hk_pack_string(v, tr->name));
  if (!arch) return -1;
  hkc_kernel_out_t ko = {.vgprs = kr->vgprs, .agprs = kr->agprs, .sgprs = kr->sgprs,
                         .shared_bytes = kr->shared_bytes, .scratch_bytes = kr->scratch_bytes,
                         .wave_size = kr->wave_size, .max_block = kr->max_block};
  double percent = 0;
  hkc_occupancy(arch, &ko, kr->max_block, &percent, NULL);
  return percent;
}

/* One target's kernel table, with the resource columns of its vendor: NVIDIA registers per
 * thread, shared memory per block, local memory per thread (spills); AMD VGPRs, AGPRs, SGPRs,
 * LDS per workgroup, scratch per lane; the host none (its kernels are plain C functions). */
static void print_kernel_table(FILE *out, const hk_pack_view_t *v, const hk_target_rec_t *tr) {
  const hkc_toolchain_t *tc = hkc_toolchain_for_kind((hk_target_kind_t)tr->kind);
  const char *occ_unit = tc ? tc->occupancy_unit : "-";
  if (tr->kind == HK_TARGET_HOST) fprintf(out, "  %-36s  %s\n", "name", "params");
  else if (tr->kind == HK_TARGET_CUDA)
    fprintf(out, "  %-36s %5s %8s %8s %5s %6s %-10s %7s  %s\n", "name", "regs", "shared", "local", "warp", "block",
            occ_unit, "occup%", "params");
  else
    fprintf(out, "  %-36s %5s %5s %5s %8s %8s %5s %6s %-10s %7s  %s\n", "name", "vgpr", "agpr", "sgpr", "lds",
            "scratch", "wave", "block", occ_unit, "occup%", "params");
  for (uint32_t k = tr->kernel_first; k < tr->kernel_first + tr->kernel_count; k++) {
    const hk_kernel_rec_t *kr = &v->kernels[k];
    const char *name = hkc_escaped(hk_pack_string(v, kr->name)), *params = hkc_escaped(hk_pack_string(v, kr->params));
    const char *spills = kr->scratch_bytes ? "  SPILLS" : "";
    char pct[16] = "-";
    const double percent = kernel_occupancy_pct(v, tr, kr);
    if (percent >= 0) snprintf(pct, sizeof pct, "%.0f%%", percent);
    if (tr->kind == HK_TARGET_HOST)
      fprintf(out, "  %-36s  %s\n", name, params);
    else if (tr->kind == HK_TARGET_CUDA)
      fprintf(out, "  %-36s %5u %8u %8u %5u %6u %-10u %7s  %s%s\n", name, kr->vgprs, kr->shared_bytes,
              kr->scratch_bytes, kr->wave_size, kr->max_block, kr->occupancy, pct, params, spills);
    else
      fprintf(out, "  %-36s %5u %5u %5u %8u %8u %5u %6u %-10u %7s  %s%s\n", name, kr->vgprs, kr->agprs, kr->sgprs,
              kr->shared_bytes, kr->scratch_bytes, kr->wave_size, kr->max_block, kr->occupancy, pct, params, spills);
  }
}

/* Whether the pack stores tensor i's bytes (format 1.4): verify checked that the records
 * ascend by tensor, so a binary search. */
static bool weight_stored(const hk_pack_view_t *v, uint32_t i) {
  uint32_t lo = 0, hi = v->weight_count;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (v->weight_recs[mid].tensor < i) lo = mid + 1;
    else hi = mid;
  }
  return lo < v->weight_count && v->weight_recs[lo].tensor == i;
}

int hkc_inspect_trusted(const char *path, const uint8_t (*trusted)[HK_PUBLIC_KEY_BYTES], uint32_t n_trusted,
                        FILE *out) {
  hk_pack_t *pack = open_for_tools(path, trusted, n_trusted);
  if (!pack) return -1;
  const hk_pack_view_t *v = hk_pack_view(pack);
  const hk_manifest_t *m = v->manifest;
  fprintf(out, "pack %s: %s\n", path, hkc_escaped(hk_pack_string(v, m->name)));
  fprintf(out, "  format %u.%u, %llu bytes, %u sections, spec hash %016llx, dtype %s\n", v->header->version_major,
          v->header->version_minor, (unsigned long long)v->size, v->section_count,
          (unsigned long long)m->spec_hash, hk_dtype_label(m->dtype));
  fprintf(out, "  batch sizes:");
  for (uint32_t b = 0; b < m->batch_count; b++) fprintf(out, " %llu", (unsigned long long)m->batch_sizes[b]);
  fprintf(out, "; batch policy: %s\n", m->batch_policy == HK_BATCH_POLICY_REC_EXACT ? "exact" : "pad");
  print_signature(pack, n_trusted, out);
  if (v->weight_count) { /* format 1.4: the params' bytes are in the pack (hkc build --weights) */
    fprintf(out, "  weights: %u param(s), ", v->weight_count);
    print_bytes(out, v->weights_size);
    fprintf(out, " stored (sessions bind them)\n");
  } else {
    fprintf(out, "  weights: none stored (the application binds every param)\n");
  }
  if (v->tensor_ranks) /* format 1.9: one rank's graphs; sliced params and state marked below */
    fprintf(out, "  tensor parallel: %u ranks (each runs these graphs on its slices of %u tensor(s), with a "
            "communicator)\n", v->tensor_ranks, v->shard_count);
  fprintf(out, "\ntargets:\n");
  for (uint32_t t = 0; t < v->target_count; t++) {
    const hk_target_rec_t *tr = &v->targets[t];
    const hk_section_t *cs = code_section(v, tr);
    fprintf(out, "  %-16s %-5s %u kernel(s), code ", hkc_escaped(hk_pack_string(v, tr->name)), k_target_kinds[tr->kind],
            tr->kernel_count);
    print_bytes(out, cs->raw_size);
    fprintf(out, " (");
    print_bytes(out, cs->size);
    fprintf(out, " stored%s)", cs->flags & HK_SECTION_FLAG_ZSTD ? ", zstd" : "");
    if (tr->kind == HK_TARGET_CUDA && t < HK_MAX_TARGETS && v->ptx_section[t] != UINT32_MAX) {
      /* PTX for the target's virtual architecture: "sm_80" -> compute_80 (pack_format.h) */
      const hk_section_t *ps = &v->sections[v->ptx_section[t]];
      fprintf(out, "; PTX compute_%s ", hk_pack_string(v, tr->name) + 3);
      print_bytes(out, ps->raw_size);
      fprintf(out, " (");
      print_bytes(out, ps->size);
      fprintf(out, " stored)");
    } else if (tr->kind == HK_TARGET_CUDA) {
      fprintf(out, "; no PTX");
    } else if (tr->kind == HK_TARGET_HOST) {
      const char *isa = host_variants(v, t);
      fprintf(out, "; isa %s", isa ? isa : "unknown (the code object is not a valid shared object)");
    }
    fprintf(out, "\n");
  }

  fprintf(out, "\ntensors:\n");
  for (uint32_t i = 0; i < v->tensor_count; i++) {
    const hk_tensor_rec_t *tr = &v->tensors[i];
    fprintf(out, "  %-20s %-12s %-4s [", hkc_escaped(hk_pack_string(v, tr->name)), k_roles[tr->role],
            hk_dtype_label(tr->dtype));
    for (uint32_t d = 0; d < tr->rank; d++) {
      if (d) fprintf(out, ", ");
      print_dim(out, &tr->dims[d]);
    }
    fprintf(out, "]%s", weight_stored(v, i) ? " stored" : "");
    uint32_t first, count; /* PARTS (format 1.4): what the param concatenates */
    hk_pack_tensor_parts(v, i, &first, &count);
    for (uint32_t p = 0; p < count; p++)
      fprintf(out, "%s%s", p ? " | " : "  parts: ", hkc_escaped(hk_pack_string(v, v->parts[first + p].name)));
    const hk_shard_rec_t *sh = hk_pack_tensor_shard(v, i);
    if (sh) { /* format 1.9: "  slice: dim 0 of [64 | 32 | 32] by 2 | 2 | 2" (of a `_shard` copy: "of embed") */
      fprintf(out, "  slice: dim %u of [", sh->axis);
      for (uint32_t k = 0; k < sh->segment_count; k++)
        fprintf(out, "%s%llu", k ? " | " : "", (unsigned long long)sh->seg_size[k]);
      fprintf(out, "] by ");
      for (uint32_t k = 0; k < sh->segment_count; k++) fprintf(out, "%s%u", k ? " | " : "", sh->seg_parts[k]);
      if (sh->source != i) fprintf(out, " of %s", hkc_escaped(hk_pack_string(v, v->tensors[sh->source].name)));
    }
    fprintf(out, "\n");
  }

  for (uint32_t t = 0; t < v->target_count; t++) {
    const hk_target_rec_t *tr = &v->targets[t];
    fprintf(out, "\nkernels for %s:\n", hkc_escaped(hk_pack_string(v, tr->name)));
    print_kernel_table(out, v, tr);
    for (uint32_t g = tr->graph_first; g < tr->graph_first + tr->graph_count; g++) {
      const hk_graph_rec_t *gr = &v->graphs[g];
      fprintf(out, "\n  graph %s, batch %llu: %u node(s), workspace ", hkc_escaped(hk_pack_string(v, tr->name)),
              (unsigned long long)gr->batch, gr->node_count);
      print_bytes(out, gr->workspace_bytes);
      if (gr->semaphore_count) fprintf(out, ", %u semaphore(s)", gr->semaphore_count);
      fprintf(out, "\n");
      /* columns as wide as the graph's longest node name (fused nodes: "a,b,c") and kernel name */
      int w_node = 14, w_kernel = 36;
      for (uint32_t n = 0; n < gr->node_count; n++) {
        const hk_node_rec_t *nr = &v->nodes[gr->node_first + n];
        const size_t ln = strlen(hk_pack_string(v, nr->name)), lk = strlen(hk_pack_string(v, v->kernels[nr->kernel].name));
        if (ln > (size_t)w_node) w_node = ln < 200 ? (int)ln : 200;
        if (lk > (size_t)w_kernel) w_kernel = lk < 200 ? (int)lk : 200;
      }
      for (uint32_t n = 0; n < gr->node_count; n++) {
        const hk_node_rec_t *nr = &v->nodes[gr->node_first + n];
        fprintf(out, "    #%-3u %-*s %-*s grid [%u,%u,%u] block [%u,%u,%u] after [", n, w_node,
                hkc_escaped(hk_pack_string(v, nr->name)), w_kernel,
                hkc_escaped(hk_pack_string(v, v->kernels[nr->kernel].name)), nr->grid[0],
                nr->grid[1], nr->grid[2], nr->block[0], nr->block[1], nr->block[2]);
        for (uint32_t d = 0; d < nr->dep_count; d++) fprintf(out, "%s%u", d ? "," : "", v->deps[nr->dep_first + d]);
        /* pdl: may start while its dependencies finish (HK_NODE_FLAG_PDL) */
        fprintf(out, "]%s\n", nr->flags & HK_NODE_FLAG_PDL ? " pdl" : "");
        print_tmaps(out, v, nr);
        print_workspace_args(out, v, nr);
      }
    }
  }

  fprintf(out, "\nprovenance:\n");
  const char *p = v->provenance, *end = v->provenance + v->provenance_size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    fprintf(out, "  ");
    print_escaped(out, p, len);
    fprintf(out, "\n");
    p += len + 1;
  }
  hk_pack_destroy(pack);
  return 0;
}

/* ---- disassembly: through the target's toolchain entry (rtc/toolchain.h) ---------------------- */
int hkc_inspect_disasm(const char *path, const char *kernel, const char *target, FILE *out) {
  hk_pack_t *pack = open_for_tools(path, NULL, 0);
  if (!pack) return -1;
  const hk_pack_view_t *v = hk_pack_view(pack);
  int rc = -1;
  for (uint32_t t = 0; t < v->target_count; t++) {
    const hk_target_rec_t *tr = &v->targets[t];
    if (target && strcmp(target, hk_pack_string(v, tr->name)) != 0) continue;
    for (uint32_t k = tr->kernel_first; k < tr->kernel_first + tr->kernel_count; k++) {
      const hk_kernel_rec_t *kr = &v->kernels[k];
      if (strcmp(hk_pack_string(v, kr->name), kernel) != 0) continue;
      void *code = NULL;
      size_t size = 0;
      if (hk_pack_code_load(v, t, NULL, &code, &size) != HK_OK) {
        fprintf(stderr, "hkc inspect: %s\n", hk_last_error());
        goto done;
      }
      const char *obj = (const char *)code + kr->code_offset; /* verify: inside its target's code */
      /* The object is checked as the loader would before a disassembler, which trusts its
       * headers, reads it (AMD's comgr runs in a worker process besides: rtc_worker.h). */
      const char *bad;
      bool ok = tr->kind == HK_TARGET_HOST
                    ? hk_elf_image_ok(obj, (size_t)kr->code_size, hk_elf_host_machine(hk_pack_string(v, tr->name)),
                                      HK_ET_DYN, &bad)
                    : hk_gpu_image_ok(obj, (size_t)kr->code_size, tr->kind == HK_TARGET_HIP,
                                      tr->kind == HK_TARGET_HIP ? HK_EM_AMDGPU : HK_EM_CUDA, &bad);
      if (!ok) {
        fprintf(stderr, "hkc inspect: cannot disassemble %s for %s: its code object is invalid: %s\n", kernel,
                hk_pack_string(v, tr->name), bad);
        free(code);
        goto done;
      }
      fprintf(out, "; kernel %s, target %s, %llu bytes of code object\n", kernel, hk_pack_string(v, tr->name),
              (unsigned long long)kr->code_size);
      const hkc_toolchain_t *tc = hkc_toolchain_for_kind((hk_target_kind_t)tr->kind);
      char target_name[160], why[512] = "no toolchain for this kind of target", *text = NULL;
      const char *features = hk_pack_string(v, tr->features);
      snprintf(target_name, sizeof target_name, "%s%s%s", hk_pack_string(v, tr->name), features[0] ? ":" : "",
               features);
      if (tc && tc->disassemble(obj, (size_t)kr->code_size, kernel, target_name, &text, why, sizeof why) == 0) {
        fputs(text, out);
        rc = 0;
      } else {
        fprintf(stderr, "hkc inspect: cannot disassemble: %s\n", why);
      }
      free(text);
      free(code);
      goto done;
    }
  }
  fprintf(stderr, "hkc inspect: no kernel %s%s%s in %s (hkc inspect lists them)\n", kernel, target ? " for target " : "",
          target ? target : "", path);
done:
  hk_pack_destroy(pack);
  return rc;
}

/* ---- the traffic and roofline report (--plan) ------------------------------------------------ */
#define PLAN_MAX_COLUMNS 16 /* floor columns: 3 reference parts + the pack's other GPU targets */
#define PLAN_LABEL_WIDTH 30 /* the totals' labels ("before fusion: N kernel(s)") fit the first columns */

typedef struct plan_column {
  const hkc_gpu_arch_t *arch;
  char product[24]; /* short: the product up to " (" */
} plan_column_t;

/* Floor of one launch in µs: the slower of moving its bytes and doing its matrix FLOPs. */
static double launch_floor_us(const hkc_gpu_arch_t *a, uint64_t bytes, uint64_t matrix_flops) {
  double mem = (double)bytes / (a->hbm_gbps * 1e3);              /* GB/s = 1e3 bytes/µs */
  double math = (double)matrix_flops / (a->matrix_tflops_f16 * 1e6); /* TFLOP/s = 1e6 FLOP/µs */
  return mem > math ? mem : math;
}

static void add_column(plan_column_t *cols, size_t *n, const hkc_gpu_arch_t *a) {
  if (!a || *n >= PLAN_MAX_COLUMNS) return;
  for (size_t i = 0; i < *n; i++)
    if (cols[i].arch == a) return;
  size_t len = strcspn(a->product, "(");
  while (len > 0 && a->product[len - 1] == ' ') len--;
  snprintf(cols[*n].product, sizeof cols[*n].product, "%.*s", (int)len, a->product);
  cols[(*n)++].arch = a;
}

static double ratio(double before, double after) { return after > 0 ? before / after : 0.0; }

/* One batch bucket's table: the launches of graph gi, then the totals before and after. */
static void plan_bucket(FILE *out, const hk_pack_view_t *v, uint32_t gi, const plan_column_t *cols, size_t n_cols) {
  const hk_graph_rec_t *g = &v->graphs[gi];
  const hk_plan_graph_rec_t *pg = &v->plan_graphs[gi];
  const char *target = hk_pack_string(v, v->targets[g->target].name);
  int w_nodes = 5, w_kernel = 6;
  for (uint32_t j = 0; j < g->node_count; j++) {
    const hk_node_rec_t *nr = &v->nodes[g->node_first + j];
    int a = (int)strlen(hk_pack_string(v, nr->name)), b = (int)strlen(hk_pack_string(v, v->kernels[nr->kernel].name));
    if (a > w_nodes) w_nodes = a;
    if (b > w_kernel) w_kernel = b;
  }
  if (3 + 2 + w_nodes + 2 + w_kernel < PLAN_LABEL_WIDTH) w_kernel = PLAN_LABEL_WIDTH - 3 - 2 - w_nodes - 2;
  fprintf(out, "\nbatch %llu: %u launch(es) of target %s\n", (unsigned long long)g->batch, g->node_count, target);
  fprintf(out, "  %3s  %-*s  %-*s  %14s  %12s  %s  %s", "#", w_nodes, "nodes", w_kernel, "kernel", "bytes", "GFLOP",
          "M", "| floor us");
  for (size_t c = 0; c < n_cols; c++) fprintf(out, " %10s", cols[c].product);
  fprintf(out, "\n  %3s  %-*s  %-*s  %14s  %12s  %s  %s", "", w_nodes, "", w_kernel, "", "", "", " ", "|         ");
  for (size_t c = 0; c < n_cols; c++) fprintf(out, " %10s", cols[c].arch->name);
  fprintf(out, "\n");

  uint64_t bytes = 0, flops = 0, matrix = 0;
  double sum_floor[PLAN_MAX_COLUMNS] = {0};
  for (uint32_t j = 0; j < g->node_count; j++) {
    const hk_node_rec_t *nr = &v->nodes[g->node_first + j];
    const hk_plan_node_rec_t *pn = &v->plan_nodes[g->node_first + j];
    int is_matrix = (pn->flags & HK_PLAN_MATRIX) != 0;
    fprintf(out, "  %3u  %-*s  %-*s  %14llu  %12.6f  %s  %s", j, w_nodes, hkc_escaped(hk_pack_string(v, nr->name)),
            w_kernel, hkc_escaped(hk_pack_string(v, v->kernels[nr->kernel].name)), (unsigned long long)pn->bytes,
            (double)pn->flops * 1e-9,
            is_matrix ? "M" : " ", "|         ");
    for (size_t c = 0; c < n_cols; c++) {
      double f = launch_floor_us(cols[c].arch, pn->bytes, is_matrix ? pn->flops : 0);
      sum_floor[c] += f;
      fprintf(out, " %10.3f", f);
    }
    fprintf(out, "\n");
    bytes += pn->bytes;
    flops += pn->flops;
    if (is_matrix) matrix += pn->flops;
  }
  /* Totals: the sum of the rows, then whole-graph floors before and after fusion. Both
   * use the matrix FLOPs above: fusion moves element-wise work, never matrix work, and the
   * pack keeps only totals of the unfused graph. */
  int w_label = 3 + 2 + w_nodes + 2 + w_kernel;
  char label[64];
  fprintf(out, "  %-*s  %14llu  %12.6f     | sum      ", w_label, "total (the rows)", (unsigned long long)bytes,
          (double)flops * 1e-9);
  for (size_t c = 0; c < n_cols; c++) fprintf(out, " %10.3f", sum_floor[c]);
  snprintf(label, sizeof label, "after fusion: %u launch(es)", g->node_count);
  fprintf(out, "\n  %-*s  %14llu  %12.6f     | graph    ", w_label, label, (unsigned long long)bytes,
          (double)flops * 1e-9);
  for (size_t c = 0; c < n_cols; c++) fprintf(out, " %10.3f", launch_floor_us(cols[c].arch, bytes, matrix));
  snprintf(label, sizeof label, "before fusion: %u kernel(s)", pg->unfused_nodes);
  fprintf(out, "\n  %-*s  %14llu  %12.6f     | graph    ", w_label, label, (unsigned long long)pg->unfused_bytes,
          (double)pg->unfused_flops * 1e-9);
  for (size_t c = 0; c < n_cols; c++) fprintf(out, " %10.3f", launch_floor_us(cols[c].arch, pg->unfused_bytes, matrix));
  snprintf(label, sizeof label, "before/after: %.2fx kernels", ratio(pg->unfused_nodes, g->node_count));
  fprintf(out, "\n  %-*s  %13.2fx  %11.2fx     | graph    ", w_label, label,
          ratio((double)pg->unfused_bytes, (double)bytes), ratio((double)pg->unfused_flops, (double)flops));
  for (size_t c = 0; c < n_cols; c++)
    fprintf(out, " %9.2fx", ratio(launch_floor_us(cols[c].arch, pg->unfused_bytes, matrix),
                                  launch_floor_us(cols[c].arch, bytes, matrix)));
  fprintf(out, "\n");
}

int hkc_inspect_plan(const char *path, uint64_t batch, const char *target, FILE *out) {
  hk_pack_t *pack = open_for_tools(path, NULL, 0);
  if (!pack) return -1;
  const hk_pack_view_t *v = hk_pack_view(pack);
  const hk_manifest_t *m = v->manifest;
  int rc = -1;
  if (!v->plan_graphs) {
    fprintf(stderr, "hkc inspect: %s has no PLAN section (packs written before artifact format 1.1 have none); "
            "rebuild it with this hkc for the plan\n", path);
    goto done;
  }
  /* The launches listed are those of one target: --target, else the first GPU target
   * (its kernel names), else the first. Costs are the same for every target. */
  uint32_t ref = v->target_count;
  for (uint32_t t = 0; t < v->target_count; t++) {
    const char *name = hk_pack_string(v, v->targets[t].name);
    if (target ? strcmp(name, target) == 0 : v->targets[t].kind != HK_TARGET_HOST) {
      ref = t;
      break;
    }
  }
  if (ref == v->target_count && target) {
    fprintf(stderr, "hkc inspect: %s has no target %s\n", path, target);
    goto done;
  }
  if (ref == v->target_count) ref = 0;
  plan_column_t cols[PLAN_MAX_COLUMNS];
  size_t n_cols = 0;
  add_column(cols, &n_cols, hkc_gpu_arch_find("gfx90a"));
  add_column(cols, &n_cols, hkc_gpu_arch_find("gfx942"));
  add_column(cols, &n_cols, hkc_gpu_arch_find("sm_90"));
  for (uint32_t t = 0; t < v->target_count; t++)
    if (v->targets[t].kind != HK_TARGET_HOST)
      add_column(cols, &n_cols, hkc_gpu_arch_find(hk_pack_string(v, v->targets[t].name)));

  const hk_target_rec_t *tr = &v->targets[ref];
  uint32_t graph;
  if (batch && !hk_pack_find_graph(v, ref, batch, &graph)) {
    fprintf(stderr, "hkc inspect: %s has no batch bucket %llu (buckets:", path, (unsigned long long)batch);
    for (uint32_t b = 0; b < m->batch_count; b++) fprintf(stderr, " %llu", (unsigned long long)m->batch_sizes[b]);
    fprintf(stderr, ")\n");
    goto done;
  }
  fprintf(out, "plan of %s (%s): estimated least HBM traffic and FLOPs per launch, and the roofline floor\n", path,
          hk_pack_string(v, m->name));
  for (uint32_t b = 0; b < tr->graph_count; b++)
    if (!batch || v->graphs[tr->graph_first + b].batch == batch) plan_bucket(out, v, tr->graph_first + b, cols, n_cols);
  fprintf(out, "\n  bytes: every distinct tensor a launch reads, once, plus every tensor it writes (a packed qkv\n"
               "  tensor counts once). GFLOP: multiply-add = 2; M = matrix-core work (gemm incl. its epilogue,\n"
               "  attention). floor = max(bytes / HBM bandwidth, M FLOPs / dense f16 matrix rate), in us; FLOPs\n"
               "  without M (norms, softmax, element-wise) are left out of the floor (no vector rate is used).\n"
               "  sum: the rows' floors added (launches run one after another). graph: the same formula\n"
               "  over the whole graph's bytes and M FLOPs; before fusion uses the M FLOPs after it (fusion moves\n"
               "  element-wise work, never matrix work; the pack keeps only the unfused totals).\n"
               "  columns, from hkc's target table:\n");
  for (size_t c = 0; c < n_cols; c++)
    fprintf(out, "    %-8s %-18s %8.1f GB/s HBM, %7.1f TFLOP/s f16 matrix\n", cols[c].arch->name, cols[c].arch->product,
            cols[c].arch->hbm_gbps, cols[c].arch->matrix_tflops_f16);
  rc = 0;
done:
  hk_pack_destroy(pack);
  return rc;
}

int hkc_public_key_load(const char *path, uint8_t out_key[HK_PUBLIC_KEY_BYTES]) {
  char *text = NULL;
  size_t size = 0;
  if (hkc_read_file(path, &text, &size) != 0) {
    fprintf(stderr, "hkc: cannot read the public key %s: %s\n", path, hkc_strerror(errno));
    return -1;
  }
  hk_status_t st = hk_public_key_parse(text, size, out_key);
  free(text);
  if (st != HK_OK) fprintf(stderr, "hkc: %s: %s\n", path, hk_last_error());
  return st == HK_OK ? 0 : -1;
}

/* Reads one --trust value into t. 0, or 2 (usage error, printed). */
int hkc_trusted_key_add(const char *cmd, hkc_trust_opts_t *t, const char *path) {
  if (t->n >= HKC_MAX_TRUSTED_KEYS) {
    fprintf(stderr, "hkc %s: at most %d --trust keys\n", cmd, HKC_MAX_TRUSTED_KEYS);
    return 2;
  }
  if (hkc_public_key_load(path, t->keys[t->n]) != 0) return 2;
  t->n++;
  return 0;
}

/* ---- inspect --json (docs/CLI.md, "inspect") ------------------------------------------------- */
/* A dimension: a number when fixed, else its text ("batch", "2*batch+1"). */
static cJSON *json_dim(const hk_dim_rec_t *d) {
  if (d->mul == 0) return cJSON_CreateNumber((double)d->add);
  char text[64];
  int n = d->mul == 1 ? snprintf(text, sizeof text, "batch") : snprintf(text, sizeof text, "%lld*batch", (long long)d->mul);
  if (d->add && n > 0 && (size_t)n < sizeof text) snprintf(text + n, sizeof text - (size_t)n, "%+lld", (long long)d->add);
  return cJSON_CreateString(text);
}

/* Text the pack does not restrict (provenance), escaped as the human report does. */
static cJSON *json_escaped(const char *p, size_t len) {
  char *buf = malloc(len * 4 + 1);
  if (!buf) return cJSON_CreateNull();
  cJSON *s = cJSON_CreateString(hkc_escape_into(p, len, buf, len * 4 + 1));
  free(buf);
  return s;
}

static void json_kernel(cJSON *arr, const hk_pack_view_t *v, const hk_target_rec_t *tr, const hk_kernel_rec_t *kr) {
  cJSON *k = cJSON_CreateObject();
  cJSON_AddItemToArray(arr, k);
  cJSON_AddStringToObject(k, "name", hk_pack_string(v, kr->name));
  cJSON_AddStringToObject(k, "params", hk_pack_string(v, kr->params));
  cJSON *r = cJSON_AddObjectToObject(k, "resources");
  if (tr->kind == HK_TARGET_HOST) {
    cJSON_AddNullToObject(k, "occupancy");
    return;
  }
  if (tr->kind == HK_TARGET_CUDA) {
    cJSON_AddNumberToObject(r, "registers", kr->vgprs);
    cJSON_AddNumberToObject(r, "shared_bytes", kr->shared_bytes);
    cJSON_AddNumberToObject(r, "local_bytes", kr->scratch_bytes);
  } else {
    cJSON_AddNumberToObject(r, "vgprs", kr->vgprs);
    cJSON_AddNumberToObject(r, "agprs", kr->agprs);
    cJSON_AddNumberToObject(r, "sgprs", kr->sgprs);
    cJSON_AddNumberToObject(r, "lds_bytes", kr->shared_bytes);
    cJSON_AddNumberToObject(r, "scratch_bytes", kr->scratch_bytes);
  }
  cJSON_AddNumberToObject(k, "wave_size", kr->wave_size);
  cJSON_AddNumberToObject(k, "max_block", kr->max_block);
  cJSON_AddBoolToObject(k, "spills", kr->scratch_bytes != 0);
  const hkc_toolchain_t *tc = hkc_toolchain_for_kind((hk_target_kind_t)tr->kind);
  cJSON *o = cJSON_AddObjectToObject(k, "occupancy");
  cJSON_AddNumberToObject(o, "value", kr->occupancy);
  cJSON_AddStringToObject(o, "unit", tc ? tc->occupancy_unit : "");
  const double pct = kernel_occupancy_pct(v, tr, kr);
  if (pct >= 0) cJSON_AddNumberToObject(o, "percent", pct);
  else cJSON_AddNullToObject(o, "percent");
}

int hkc_inspect_json(const char *path, const uint8_t (*trusted)[HK_PUBLIC_KEY_BYTES], uint32_t n_trusted, FILE *out) {
  hk_pack_t *pack = open_for_tools(path, trusted, n_trusted);
  if (!pack) return -1;
  const hk_pack_view_t *v = hk_pack_view(pack);
  const hk_manifest_t *m = v->manifest;
  cJSON *root = hkc_json_begin("inspect");
  if (!root) {
    hk_pack_destroy(pack);
    return -1;
  }
  char text[64];
  cJSON_AddStringToObject(root, "path", path);
  cJSON_AddStringToObject(root, "name", hk_pack_string(v, m->name));
  snprintf(text, sizeof text, "%u.%u", v->header->version_major, v->header->version_minor);
  cJSON_AddStringToObject(root, "format", text);
  cJSON_AddNumberToObject(root, "bytes", (double)v->size);
  cJSON_AddNumberToObject(root, "sections", v->section_count);
  snprintf(text, sizeof text, "%016llx", (unsigned long long)m->spec_hash);
  cJSON_AddStringToObject(root, "spec_hash", text);
  cJSON_AddStringToObject(root, "dtype", hk_dtype_label(m->dtype));
  cJSON *batches = cJSON_AddArrayToObject(root, "batch_sizes");
  for (uint32_t b = 0; b < m->batch_count; b++) cJSON_AddItemToArray(batches, cJSON_CreateNumber((double)m->batch_sizes[b]));
  cJSON_AddStringToObject(root, "batch_policy", m->batch_policy == HK_BATCH_POLICY_REC_EXACT ? "exact" : "pad");
  cJSON_AddNumberToObject(root, "tensor_ranks", v->tensor_ranks);
  const char *id;
  const hk_signature_state_t sig = hk_pack_signature(pack, &id);
  cJSON *js = cJSON_AddObjectToObject(root, "signature");
  cJSON_AddStringToObject(js, "state", sig == HK_SIGNATURE_NONE ? "none" : sig == HK_SIGNATURE_INVALID ? "invalid"
                                                                                                      : "verified");
  if (sig == HK_SIGNATURE_NONE) cJSON_AddNullToObject(js, "key_id");
  else cJSON_AddStringToObject(js, "key_id", id);
  if (sig == HK_SIGNATURE_NONE || sig == HK_SIGNATURE_INVALID || !n_trusted) cJSON_AddNullToObject(js, "trusted");
  else cJSON_AddBoolToObject(js, "trusted", sig == HK_SIGNATURE_TRUSTED);

  if (v->weight_count) {
    cJSON *jw = cJSON_AddObjectToObject(root, "weights");
    cJSON_AddNumberToObject(jw, "params", v->weight_count);
    cJSON_AddNumberToObject(jw, "bytes", (double)v->weights_size);
  } else {
    cJSON_AddNullToObject(root, "weights");
  }

  cJSON *targets = cJSON_AddArrayToObject(root, "targets");
  for (uint32_t t = 0; t < v->target_count; t++) {
    const hk_target_rec_t *tr = &v->targets[t];
    const hk_section_t *cs = code_section(v, tr);
    cJSON *jt = cJSON_CreateObject();
    cJSON_AddItemToArray(targets, jt);
    cJSON_AddStringToObject(jt, "name", hk_pack_string(v, tr->name));
    cJSON_AddStringToObject(jt, "kind", k_target_kinds[tr->kind]);
    cJSON_AddStringToObject(jt, "features", hk_pack_string(v, tr->features));
    cJSON_AddNumberToObject(jt, "code_bytes", (double)cs->raw_size);
    cJSON_AddNumberToObject(jt, "code_stored_bytes", (double)cs->size);
    cJSON_AddBoolToObject(jt, "zstd", (cs->flags & HK_SECTION_FLAG_ZSTD) != 0);
    if (tr->kind == HK_TARGET_CUDA && t < HK_MAX_TARGETS && v->ptx_section[t] != UINT32_MAX) {
      const hk_section_t *ps = &v->sections[v->ptx_section[t]];
      cJSON *jp = cJSON_AddObjectToObject(jt, "ptx");
      snprintf(text, sizeof text, "compute_%s", hk_pack_string(v, tr->name) + 3);
      cJSON_AddStringToObject(jp, "arch", text);
      cJSON_AddNumberToObject(jp, "bytes", (double)ps->raw_size);
      cJSON_AddNumberToObject(jp, "stored_bytes", (double)ps->size);
    } else {
      cJSON_AddNullToObject(jt, "ptx");
    }
    if (tr->kind == HK_TARGET_HOST) { /* "baseline, avx2" -> ["baseline", "avx2"] */
      const char *isa = host_variants(v, t);
      cJSON *ji = isa ? cJSON_AddArrayToObject(jt, "isa") : NULL;
      if (ji) cJSON_AddItemToArray(ji, cJSON_CreateString("baseline"));
      if (ji && strstr(isa, "avx2")) cJSON_AddItemToArray(ji, cJSON_CreateString("avx2"));
      if (!isa) cJSON_AddNullToObject(jt, "isa");
    }
    cJSON *kernels = cJSON_AddArrayToObject(jt, "kernels");
    for (uint32_t k = tr->kernel_first; k < tr->kernel_first + tr->kernel_count; k++)
      json_kernel(kernels, v, tr, &v->kernels[k]);
    cJSON *graphs = cJSON_AddArrayToObject(jt, "graphs");
    for (uint32_t g = tr->graph_first; g < tr->graph_first + tr->graph_count; g++) {
      const hk_graph_rec_t *gr = &v->graphs[g];
      cJSON *jg = cJSON_CreateObject();
      cJSON_AddItemToArray(graphs, jg);
      cJSON_AddNumberToObject(jg, "batch", (double)gr->batch);
      cJSON_AddNumberToObject(jg, "workspace_bytes", (double)gr->workspace_bytes);
      cJSON_AddNumberToObject(jg, "semaphores", gr->semaphore_count);
      cJSON *nodes = cJSON_AddArrayToObject(jg, "nodes");
      for (uint32_t n = 0; n < gr->node_count; n++) {
        const hk_node_rec_t *nr = &v->nodes[gr->node_first + n];
        cJSON *jn = cJSON_CreateObject();
        cJSON_AddItemToArray(nodes, jn);
        cJSON_AddStringToObject(jn, "name", hk_pack_string(v, nr->name));
        cJSON_AddStringToObject(jn, "kernel", hk_pack_string(v, v->kernels[nr->kernel].name));
        cJSON *grid = cJSON_AddArrayToObject(jn, "grid"), *block = cJSON_AddArrayToObject(jn, "block");
        for (int d = 0; d < 3; d++) {
          cJSON_AddItemToArray(grid, cJSON_CreateNumber(nr->grid[d]));
          cJSON_AddItemToArray(block, cJSON_CreateNumber(nr->block[d]));
        }
        cJSON *after = cJSON_AddArrayToObject(jn, "after");
        for (uint32_t d = 0; d < nr->dep_count; d++)
          cJSON_AddItemToArray(after, cJSON_CreateNumber(v->deps[nr->dep_first + d]));
        cJSON_AddBoolToObject(jn, "pdl", (nr->flags & HK_NODE_FLAG_PDL) != 0);
      }
    }
  }

  cJSON *tensors = cJSON_AddArrayToObject(root, "tensors");
  for (uint32_t i = 0; i < v->tensor_count; i++) {
    const hk_tensor_rec_t *tr = &v->tensors[i];
    cJSON *jt = cJSON_CreateObject();
    cJSON_AddItemToArray(tensors, jt);
    cJSON_AddStringToObject(jt, "name", hk_pack_string(v, tr->name));
    cJSON_AddStringToObject(jt, "role", k_roles[tr->role]);
    cJSON_AddStringToObject(jt, "dtype", hk_dtype_label(tr->dtype));
    cJSON *shape = cJSON_AddArrayToObject(jt, "shape");
    for (uint32_t d = 0; d < tr->rank; d++) cJSON_AddItemToArray(shape, json_dim(&tr->dims[d]));
    cJSON_AddBoolToObject(jt, "stored", weight_stored(v, i));
    uint32_t first, count;
    hk_pack_tensor_parts(v, i, &first, &count);
    if (count) {
      cJSON *parts = cJSON_AddArrayToObject(jt, "parts");
      for (uint32_t p = 0; p < count; p++)
        cJSON_AddItemToArray(parts, cJSON_CreateString(hk_pack_string(v, v->parts[first + p].name)));
    }
    const hk_shard_rec_t *sh = hk_pack_tensor_shard(v, i);
    if (sh) { /* format 1.9: {"axis", "segments": [size...], "parts": [n...], "source"} */
      cJSON *jslice = cJSON_AddObjectToObject(jt, "slice");
      cJSON_AddNumberToObject(jslice, "axis", sh->axis);
      cJSON *seg = cJSON_AddArrayToObject(jslice, "segments"), *pieces = cJSON_AddArrayToObject(jslice, "parts");
      for (uint32_t k = 0; k < sh->segment_count; k++) {
        cJSON_AddItemToArray(seg, cJSON_CreateNumber((double)sh->seg_size[k]));
        cJSON_AddItemToArray(pieces, cJSON_CreateNumber(sh->seg_parts[k]));
      }
      cJSON_AddStringToObject(jslice, "source", hk_pack_string(v, v->tensors[sh->source].name));
    }
  }

  /* provenance: its lines ("key=value"), escaped as printed */
  cJSON *prov = cJSON_AddArrayToObject(root, "provenance");
  const char *p = v->provenance, *end = v->provenance + v->provenance_size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    if (len) cJSON_AddItemToArray(prov, json_escaped(p, len));
    p += len + 1;
  }
  hk_pack_destroy(pack);
  return hkc_json_end(root, out);
}
