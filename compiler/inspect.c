/*
 * hkc inspect: prints what an artifact holds, read through the loader's verified view
 * (loader/src/pack_internal.h), so that a pack inspect accepts is one libhkrt accepts.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
  fprintf(out, "; batch policy: %s\n\ntargets:\n", m->batch_policy == HK_BATCH_POLICY_REC_EXACT ? "exact" : "pad");
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
    const hkc_gpu_arch_t *arch = tr->kind == HK_TARGET_HOST ? NULL : hkc_gpu_arch_find(hk_pack_string(v, tr->name));
    const char *occ_unit = tr->kind == HK_TARGET_HIP ? "waves/SIMD" : tr->kind == HK_TARGET_CUDA ? "blocks/SM" : "-";
    fprintf(out, "  %-36s %5s %5s %5s %8s %8s %5s %6s %-10s %7s  %s\n", "name", "vgpr", "agpr", "sgpr", "shared",
            "scratch", "wave", "block", occ_unit, "occup%", "params");
    for (uint32_t k = tr->kernel_first; k < tr->kernel_first + tr->kernel_count; k++) {
      const hk_kernel_rec_t *kr = &v->kernels[k];
      char pct[16] = "-";
      if (arch) {
        hkc_kernel_out_t ko = {.vgprs = kr->vgprs, .agprs = kr->agprs, .sgprs = kr->sgprs,
                               .shared_bytes = kr->shared_bytes, .scratch_bytes = kr->scratch_bytes,
                               .wave_size = kr->wave_size, .max_block = kr->max_block};
        double percent = 0;
        hkc_occupancy(arch, &ko, kr->max_block, &percent, NULL);
        snprintf(pct, sizeof pct, "%.0f%%", percent);
      }
      fprintf(out, "  %-36s %5u %5u %5u %8u %8u %5u %6u %-10u %7s  %s%s\n", hk_pack_string(v, kr->name), kr->vgprs,
              kr->agprs, kr->sgprs, kr->shared_bytes, kr->scratch_bytes, kr->wave_size, kr->max_block, kr->occupancy,
              pct, hk_pack_string(v, kr->params), kr->scratch_bytes ? "  SPILLS" : "");
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

/* ---- disassembly ----------------------------------------------------------------------------- */
/* Runs argv (no shell), its output going to ours. Returns the exit status, or -1 when the
 * program could not be started. */
static int run_tool(char *const argv[]) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execvp(argv[0], argv);
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  if (!WIFEXITED(status)) return -1;
  return WEXITSTATUS(status) == 127 ? -1 : WEXITSTATUS(status);
}

/* Writes bytes to a fresh temporary file; returns its path (malloc'd) or NULL. */
static char *write_temp(const void *data, size_t size, const char *suffix) {
  const char *dir = getenv("TMPDIR");
  char *path = malloc(4096);
  if (!path) return NULL;
  snprintf(path, 4096, "%s/hkc-disasm-XXXXXX%s", dir && *dir ? dir : "/tmp", suffix);
  int fd = mkstemps(path, (int)strlen(suffix));
  if (fd < 0) {
    free(path);
    return NULL;
  }
  const char *p = data;
  while (size) {
    ssize_t n = write(fd, p, size);
    if (n <= 0) {
      close(fd);
      unlink(path);
      free(path);
      return NULL;
    }
    p += n;
    size -= (size_t)n;
  }
  close(fd);
  return path;
}

static int disasm_cuda(const char *kernel, const void *code, size_t size) {
  char *path = write_temp(code, size, ".cubin");
  if (!path) return -1;
  const char *cuda = getenv("HKC_CUDA_PATH");
  char nvdisasm[4096], cuobjdump[4096];
  snprintf(nvdisasm, sizeof nvdisasm, "%s/bin/nvdisasm", cuda && *cuda ? cuda : "/usr/local/cuda");
  snprintf(cuobjdump, sizeof cuobjdump, "%s/bin/cuobjdump", cuda && *cuda ? cuda : "/usr/local/cuda");
  char *a1[] = {nvdisasm, "-c", "-fun", (char *)kernel, path, NULL};
  char *a2[] = {cuobjdump, "-sass", path, NULL};
  int rc = run_tool(a1);
  if (rc != 0) rc = run_tool(a2);
  unlink(path);
  free(path);
  if (rc != 0) fprintf(stderr, "hkc inspect: nvdisasm and cuobjdump failed or are missing (set HKC_CUDA_PATH)\n");
  return rc == 0 ? 0 : -1;
}

static int disasm_host(const char *kernel, const void *code, size_t size) {
  char *path = write_temp(code, size, ".so");
  if (!path) return -1;
  char sel[512];
  snprintf(sel, sizeof sel, "--disassemble=%s", kernel);
  char *argv[] = {"objdump", "-d", "--no-show-raw-insn", sel, path, NULL};
  int rc = run_tool(argv);
  unlink(path);
  free(path);
  if (rc != 0) fprintf(stderr, "hkc inspect: objdump failed or is missing (Debian package binutils)\n");
  return rc == 0 ? 0 : -1;
}

int hkc_inspect_disasm(const char *path, const char *kernel, const char *target, FILE *out) {
  hk_pack_t *pack = NULL;
  if (hk_pack_open_file(path, NULL, &pack) != HK_OK) {
    fprintf(stderr, "hkc inspect: %s: %s\n", path, hk_last_error());
    return -1;
  }
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
      const char *obj = (const char *)code + kr->code_offset;
      fprintf(out, "; kernel %s, target %s, %llu bytes of code object\n", kernel, hk_pack_string(v, tr->name),
              (unsigned long long)kr->code_size);
      if (tr->kind == HK_TARGET_HIP) {
        char arch[160], why[512], *text = NULL;
        const char *features = hk_pack_string(v, tr->features);
        snprintf(arch, sizeof arch, "%s%s%s", hk_pack_string(v, tr->name), features[0] ? ":" : "", features);
        if (hkc_comgr_disassemble(obj, (size_t)kr->code_size, arch, &text, why, sizeof why) == 0) {
          fputs(text, out);
          rc = 0;
        } else {
          fprintf(stderr, "hkc inspect: cannot disassemble: %s\n", why);
        }
        free(text);
      } else if (tr->kind == HK_TARGET_CUDA) {
        rc = disasm_cuda(kernel, obj, (size_t)kr->code_size);
      } else {
        rc = disasm_host(kernel, obj, (size_t)kr->code_size);
      }
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
