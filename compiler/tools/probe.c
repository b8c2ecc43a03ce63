/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc targets`: what the installed toolchains can build on this machine, through the
 * toolchain table (rtc/toolchain.h). Each GPU toolchain lists its targets; where that list
 * may name targets the compiler cannot build (comgr lists ISAs that a given hiprtc rejects),
 * each is checked by compiling a tiny kernel.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "codegen/codegen.h"
#include "rtc/rtc.h"
#include "tools/tools.h"
#include "util/util.h"

/* Most probe threads: beyond this the AMD worker processes (one per core) are the limit. */
#define PROBE_MAX_THREADS 16

static const char k_probe_kernel[] =
    "extern \"C\" __global__ void hk_probe(float *p) { p[threadIdx.x] = 1.0f; }\n";

typedef struct {
  const hkc_toolchain_t *tc;
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
    p->ok[i] = p->tc->compile(k_probe_kernel, "hk_probe", p->names[i], &r) == 0;
    hkc_rtc_result_free(&r);
  }
}

/* Compiles the probe kernel for every bare name of the list (feature variants build whenever
 * the bare one does) on a few threads; p->ok[i] says whether p->names[i] built. */
static void probe_compile(probe_t *p) {
  atomic_init(&p->next, 0);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  size_t n_threads = cores > 0 ? (size_t)cores : 1;
  if (n_threads > PROBE_MAX_THREADS) n_threads = PROBE_MAX_THREADS;
  pthread_t threads[PROBE_MAX_THREADS];
  size_t started = 0;
  for (; started < n_threads && started < p->n; started++)
    if (pthread_create(&threads[started], NULL, probe_worker, p) != 0) break;
  if (started == 0) probe_worker(p);
  for (size_t i = 0; i < started; i++) pthread_join(threads[i], NULL);
}

/* One GPU toolchain: its version, what it builds, and (probe_compile) what it lists but
 * cannot build; printed to out, or (json non-NULL) added to that array as one object. */
static void print_toolchain(FILE *out, const hkc_toolchain_t *tc, int probe, cJSON *json) {
  char why[512], heading[32];
  snprintf(heading, sizeof heading, "%s:", tc->label);
  cJSON *jt = NULL, *builds = NULL, *no_row = NULL, *cannot = NULL;
  if (json) {
    jt = cJSON_CreateObject();
    cJSON_AddItemToArray(json, jt);
    cJSON_AddStringToObject(jt, "toolchain", tc->label);
  }
  if (tc->available(why, sizeof why) != 0) {
    if (jt) {
      cJSON_AddBoolToObject(jt, "available", 0);
      cJSON_AddStringToObject(jt, "why", why);
    } else {
      fprintf(out, "%-15sunavailable: %s\n", heading, why);
    }
    return;
  }
  if (jt) {
    cJSON_AddBoolToObject(jt, "available", 1);
    cJSON_AddStringToObject(jt, "version", tc->version());
    cJSON_AddBoolToObject(jt, "probed", tc->probe_compile && probe);
    builds = cJSON_AddArrayToObject(jt, "builds");
    no_row = cJSON_AddArrayToObject(jt, "builds_without_table_row");
    cannot = cJSON_AddArrayToObject(jt, "listed_not_buildable");
  } else {
    fprintf(out, "%-15s%s\n               builds:", heading, tc->version());
  }
  char **names = NULL;
  size_t n_names = 0;
  if (tc->list_targets(&names, &n_names, why, sizeof why) != 0) {
    if (jt) cJSON_AddStringToObject(jt, "why", why);
    else fprintf(out, " (unknown: %s)\n", why);
    return;
  }
  probe_t p = {.tc = tc, .names = calloc(n_names + 1, sizeof(char *)), .ok = calloc(n_names + 1, sizeof(int))};
  for (size_t i = 0; p.names && p.ok && i < n_names; i++)
    if (!tc->probe_compile || !strchr(names[i], ':')) {
      p.ok[p.n] = 1;
      p.names[p.n++] = names[i];
    }
  if (tc->probe_compile && probe) probe_compile(&p);
  /* "builds" names only what `hkc build --target` accepts: the toolchain builds it and hkc's
   * target table has its row; the rest the toolchain builds are named apart */
  int unknown = 0;
  for (size_t i = 0; i < p.n; i++) {
    if (p.ok[i] && hkc_gpu_arch_find(p.names[i])) {
      if (builds) cJSON_AddItemToArray(builds, cJSON_CreateString(p.names[i]));
      else fprintf(out, " %s", p.names[i]);
    }
    unknown |= p.ok[i] && !hkc_gpu_arch_find(p.names[i]);
  }
  if (jt) {
    for (size_t i = 0; i < p.n; i++) {
      if (p.ok[i] && !hkc_gpu_arch_find(p.names[i])) cJSON_AddItemToArray(no_row, cJSON_CreateString(p.names[i]));
      if (!p.ok[i]) cJSON_AddItemToArray(cannot, cJSON_CreateString(p.names[i]));
    }
  } else {
    fprintf(out, "\n");
    if (unknown) {
      fprintf(out, "               %s builds, hkc has no target table row:", tc->program);
      for (size_t i = 0; i < p.n; i++)
        if (p.ok[i] && !hkc_gpu_arch_find(p.names[i])) fprintf(out, " %s", p.names[i]);
      fprintf(out, "\n");
    }
    if (tc->probe_compile && !probe) {
      fprintf(out, "               (not checked by test compiles: --no-probe)\n");
    } else if (tc->probe_compile) {
      fprintf(out, "               %s:", tc->probe_compile);
      int any = 0;
      for (size_t i = 0; i < p.n; i++)
        if (!p.ok[i]) {
          fprintf(out, " %s", p.names[i]);
          any = 1;
        }
      fprintf(out, "%s\n", any ? "" : " (none)");
    }
    if (tc->features) fprintf(out, "               ISA features: %s\n", tc->features);
  }
  free(p.names);
  free(p.ok);
  for (size_t i = 0; i < n_names; i++) free(names[i]);
  free(names);
}

int hkc_print_targets(FILE *out, int probe) {
  fprintf(out, "host:          %s (C compiler: %s)\n", hkc_host_target_name(), hkc_env_cc());
  size_t n_tc;
  const hkc_toolchain_t *const *tcs = hkc_toolchain_list(&n_tc);
  for (size_t c = 0; c < n_tc; c++)
    if (tcs[c] != &hkc_toolchain_host) print_toolchain(out, tcs[c], probe, NULL); /* the host: the line above */
  size_t n;
  const hkc_gpu_arch_t *list = hkc_gpu_arch_list(&n);
  fprintf(out, "\nhkc's target table (occupancy, rooflines):\n");
  for (size_t i = 0; i < n; i++)
    fprintf(out, "  %-8s %-24s %3u %ss, wave %u, %6.0f GB/s, %6.0f TFLOP/s f16\n", list[i].name, list[i].product,
            list[i].compute_units, hkc_toolchain_for_arch(&list[i])->compute_unit, list[i].wave_size,
            list[i].hbm_gbps, list[i].matrix_tflops_f16);
  return 0;
}

int hkc_targets_json(FILE *out, int probe) {
  cJSON *root = hkc_json_begin("targets");
  if (!root) return -1;
  cJSON *host = cJSON_AddObjectToObject(root, "host");
  cJSON_AddStringToObject(host, "name", hkc_host_target_name());
  cJSON_AddStringToObject(host, "cc", hkc_env_cc());
  cJSON *tcj = cJSON_AddArrayToObject(root, "toolchains");
  size_t n_tc;
  const hkc_toolchain_t *const *tcs = hkc_toolchain_list(&n_tc);
  for (size_t c = 0; c < n_tc; c++)
    if (tcs[c] != &hkc_toolchain_host) print_toolchain(NULL, tcs[c], probe, tcj);
  size_t n;
  const hkc_gpu_arch_t *list = hkc_gpu_arch_list(&n);
  cJSON *table = cJSON_AddArrayToObject(root, "table");
  for (size_t i = 0; i < n; i++) {
    cJSON *a = cJSON_CreateObject();
    cJSON_AddItemToArray(table, a);
    cJSON_AddStringToObject(a, "name", list[i].name);
    cJSON_AddStringToObject(a, "product", list[i].product);
    cJSON_AddNumberToObject(a, "compute_units", list[i].compute_units);
    cJSON_AddStringToObject(a, "compute_unit", hkc_toolchain_for_arch(&list[i])->compute_unit);
    cJSON_AddNumberToObject(a, "wave_size", list[i].wave_size);
    cJSON_AddNumberToObject(a, "hbm_gbps", list[i].hbm_gbps);
    cJSON_AddNumberToObject(a, "matrix_tflops_f16", list[i].matrix_tflops_f16);
  }
  return hkc_json_end(root, out);
}
