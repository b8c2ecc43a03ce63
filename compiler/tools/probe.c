/*
 * `hkc targets`: what the installed toolchains can build on this machine. AMD ISAs come
 * from comgr's list and each is checked by compiling a tiny kernel with hiprtc (comgr
 * knows ISAs that a given hiprtc cannot build); NVIDIA architectures from nvrtc.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codegen/codegen.h"
#include "rtc/rtc.h"
#include "tools/tools.h"
#include "util/util.h"

static const char k_probe_kernel[] =
    "extern \"C\" __global__ void hk_probe(float *p) { p[threadIdx.x] = 1.0f; }\n";

typedef struct {
  char **names;
  int *ok;
  size_t n;
  atomic_size_t next;
} probe_t;

static void *probe_worker(void *arg) {
  probe_t *p = arg;
  for (;;) {
    size_t i = atomic_fetch_add(&p->next, 1);
    if (i >= p->n) return NULL;
    hkc_rtc_result_t r = {0};
    p->ok[i] = hkc_hiprtc_compile(k_probe_kernel, "hk_probe", p->names[i], &r) == 0;
    hkc_rtc_result_free(&r);
  }
}

static void print_amd(FILE *out) {
  char why[512];
  if (hkc_hiprtc_available(why, sizeof why) != 0) {
    fprintf(out, "AMD (gfx):     unavailable: %s\n", why);
    return;
  }
  fprintf(out, "AMD (gfx):     %s\n", hkc_hiprtc_version());
  char **isas = NULL;
  size_t n_isas = 0;
  if (hkc_comgr_isa_list(&isas, &n_isas, why, sizeof why) != 0) {
    fprintf(out, "               comgr: %s\n", why);
    return;
  }
  /* Probe the bare ISA names; feature variants build whenever the bare one does. */
  probe_t p = {.names = calloc(n_isas + 1, sizeof(char *)), .ok = calloc(n_isas + 1, sizeof(int))};
  for (size_t i = 0; p.names && i < n_isas; i++)
    if (!strchr(isas[i], ':')) p.names[p.n++] = isas[i];
  atomic_init(&p.next, 0);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  size_t n_threads = cores > 0 ? (size_t)cores : 1;
  if (n_threads > 16) n_threads = 16;
  pthread_t threads[16];
  size_t started = 0;
  for (; started < n_threads && started < p.n; started++)
    if (pthread_create(&threads[started], NULL, probe_worker, &p) != 0) break;
  if (started == 0) probe_worker(&p);
  for (size_t i = 0; i < started; i++) pthread_join(threads[i], NULL);
  fprintf(out, "               builds:");
  for (size_t i = 0; i < p.n; i++)
    if (p.ok[i]) fprintf(out, " %s", p.names[i]);
  fprintf(out, "\n               comgr lists, hiprtc cannot build:");
  int any = 0;
  for (size_t i = 0; i < p.n; i++)
    if (!p.ok[i]) {
      fprintf(out, " %s", p.names[i]);
      any = 1;
    }
  fprintf(out, "%s\n", any ? "" : " (none)");
  fprintf(out, "               ISA features: append xnack+/xnack-/sramecc+/sramecc- to pin them "
               "(gfx90a:xnack-); a bare name runs with either setting\n");
  free(p.names);
  free(p.ok);
  for (size_t i = 0; i < n_isas; i++) free(isas[i]);
  free(isas);
}

static void print_nvidia(FILE *out) {
  char why[512];
  if (hkc_nvrtc_available(why, sizeof why) != 0) {
    fprintf(out, "NVIDIA (sm):   unavailable: %s\n", why);
    return;
  }
  fprintf(out, "NVIDIA (sm):   %s\n               builds:", hkc_nvrtc_version());
  int *archs = NULL;
  size_t n = 0;
  if (hkc_nvrtc_supported_archs(&archs, &n, why, sizeof why) != 0) {
    fprintf(out, " (unknown: %s)\n", why);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    fprintf(out, " sm_%d", archs[i]);
    if (archs[i] == 90) fprintf(out, " sm_90a");
  }
  fprintf(out, "\n");
  free(archs);
}

int hkc_print_targets(FILE *out) {
  const char *cc = getenv("CC");
  fprintf(out, "host:          %s (C compiler: %s)\n", hkc_host_target_name(), cc && *cc ? cc : "cc");
  print_amd(out);
  print_nvidia(out);
  size_t n;
  const hkc_gpu_arch_t *list = hkc_gpu_arch_list(&n);
  fprintf(out, "\nhkc's target table (occupancy, rooflines):\n");
  for (size_t i = 0; i < n; i++)
    fprintf(out, "  %-8s %-24s %3u %s, wave %u, %6.0f GB/s, %6.0f TFLOP/s f16\n", list[i].name, list[i].product,
            list[i].compute_units, list[i].kind == HK_TARGET_HIP ? "CUs" : "SMs", list[i].wave_size, list[i].hbm_gbps,
            list[i].matrix_tflops_f16);
  return 0;
}
