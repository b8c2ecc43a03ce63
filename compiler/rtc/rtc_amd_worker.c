/* SPDX-License-Identifier: Apache-2.0 */
/* The AMD toolchain calls of rtc.h (hkc_hiprtc_compile, hkc_comgr_isa_list,
 * hkc_comgr_disassemble) as jobs for worker processes (rtc_worker.h says why), and the worker
 * side that runs them.
 *
 * Jobs and their fields (rtc_worker.h has the framing):
 *   HKC_JOB_HIPRTC_COMPILE  request: source, kernel name, arch
 *                           reply:   code, log, resources (7 x u32 LE: vgprs agprs sgprs
 *                                    shared_bytes scratch_bytes wave_size max_block)
 *   HKC_JOB_COMGR_ISA_LIST  request: -          reply: names, '\n'-separated | why
 *   HKC_JOB_COMGR_DISASM    request: code, arch reply: text | why
 * A reply's kind is 0 when the call succeeded; a failed call still carries its log or why.
 *
 * Without hkc_amd_workers_start (a program that embeds hkc_core and never starts workers)
 * the calls run in this process, one at a time under one lock: correct, not parallel.
 *
 * The AMD entry of the toolchain table (toolchain.h) is defined here, so that every AMD
 * call made through the table goes through these jobs. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rtc/rtc.h"
#include "rtc/rtc_amd_internal.h"
#include "rtc/rtc_worker.h"
#include "util/util.h"

enum { HKC_JOB_HIPRTC_COMPILE = 1, HKC_JOB_COMGR_ISA_LIST = 2, HKC_JOB_COMGR_DISASM = 3 };
#define N_RESOURCES 7

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* guards g_pool; serializes in-process calls */
static hkc_wpool_t *g_pool;

int hkc_amd_workers_start(const char *exe, int max_workers, int timeout_s) {
  pthread_mutex_lock(&g_lock);
  hkc_wpool_destroy(g_pool);
  g_pool = hkc_wpool_create(exe, HKC_WORKER_ARG, max_workers, timeout_s > 0 ? timeout_s * 1000 : -1);
  const int rc = g_pool ? 0 : -1;
  pthread_mutex_unlock(&g_lock);
  return rc;
}

void hkc_amd_workers_stop(void) {
  pthread_mutex_lock(&g_lock);
  hkc_wpool_destroy(g_pool);
  g_pool = NULL;
  pthread_mutex_unlock(&g_lock);
}

void hkc_amd_workers_counts(unsigned *out_started, unsigned *out_replaced) {
  *out_started = *out_replaced = 0;
  pthread_mutex_lock(&g_lock);
  if (g_pool) hkc_wpool_counts(g_pool, out_started, out_replaced);
  pthread_mutex_unlock(&g_lock);
}

/* The pool, or NULL with g_lock held: the caller runs the call in-process, then unlocks. */
static hkc_wpool_t *pool_or_lock(void) {
  pthread_mutex_lock(&g_lock);
  hkc_wpool_t *pool = g_pool;
  if (pool) pthread_mutex_unlock(&g_lock);
  return pool;
}

static char *dup_field(const hkc_wmsg_t *m, uint32_t i) {
  return i < m->n ? hkc_strdup((const char *)m->f[i].data) : NULL;
}

/* ---- parent side ------------------------------------------------------------------------ */
int hkc_hiprtc_compile(const char *source, const char *name, const char *arch, hkc_rtc_result_t *out) {
  hkc_wpool_t *pool = pool_or_lock();
  if (!pool) {
    int rc = hkc_hiprtc_compile_local(source, name, arch, out);
    pthread_mutex_unlock(&g_lock);
    return rc;
  }
  memset(out, 0, sizeof *out);
  hkc_wmsg_t req = {.kind = HKC_JOB_HIPRTC_COMPILE}, reply;
  hkc_wmsg_add(&req, source, strlen(source));
  hkc_wmsg_add(&req, name, strlen(name));
  hkc_wmsg_add(&req, arch, strlen(arch));
  char why[512];
  if (hkc_wpool_call(pool, &req, &reply, why, sizeof why) != 0) {
    hkc_rtc_set_log(out, "hiprtc compile of kernel %s for %s failed in its worker process: %s", name, arch, why);
    return -1;
  }
  if (reply.n != 3 || reply.f[2].size != 4 * N_RESOURCES) {
    hkc_rtc_set_log(out, "hiprtc worker replied with %u fields for kernel %s (%s); expected 3", reply.n, name, arch);
    hkc_wmsg_free(&reply);
    return -1;
  }
  if (reply.f[1].size) out->log = dup_field(&reply, 1);
  if (reply.kind != 0) {
    if (!out->log) hkc_rtc_set_log(out, "hiprtc compile for %s failed", arch);
    hkc_wmsg_free(&reply);
    return -1;
  }
  out->code = reply.f[0].data; /* taken over */
  out->code_size = reply.f[0].size;
  reply.f[0].data = NULL;
  uint32_t res[N_RESOURCES];
  const unsigned char *p = reply.f[2].data;
  for (int i = 0; i < N_RESOURCES; i++)
    res[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
             (uint32_t)p[4 * i + 3] << 24;
  out->vgprs = res[0], out->agprs = res[1], out->sgprs = res[2], out->shared_bytes = res[3];
  out->scratch_bytes = res[4], out->wave_size = res[5], out->max_block = res[6];
  hkc_wmsg_free(&reply);
  return 0;
}

int hkc_comgr_isa_list(char ***out_names, size_t *out_count, char *why, size_t why_size) {
  hkc_wpool_t *pool = pool_or_lock();
  if (!pool) {
    int rc = hkc_comgr_isa_list_local(out_names, out_count, why, why_size);
    pthread_mutex_unlock(&g_lock);
    return rc;
  }
  *out_names = NULL;
  *out_count = 0;
  hkc_wmsg_t req = {.kind = HKC_JOB_COMGR_ISA_LIST}, reply;
  char pool_why[512];
  if (hkc_wpool_call(pool, &req, &reply, pool_why, sizeof pool_why) != 0) {
    snprintf(why, why_size, "comgr ISA list failed in its worker process: %s", pool_why);
    return -1;
  }
  if (reply.n != 1 || reply.kind != 0) {
    snprintf(why, why_size, "%s", reply.n ? (const char *)reply.f[0].data : "comgr worker sent no ISA list");
    hkc_wmsg_free(&reply);
    return -1;
  }
  char **names = NULL;
  size_t count = 0, cap = 0;
  for (char *save = NULL, *tok = strtok_r(reply.f[0].data, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save)) {
    char *d = hkc_strdup(tok);
    if (!d || hkc_reserve((void **)&names, &cap, count + 1, sizeof *names) != 0) {
      free(d);
      for (size_t i = 0; i < count; i++) free(names[i]);
      free(names);
      hkc_wmsg_free(&reply);
      snprintf(why, why_size, "out of memory listing comgr ISAs");
      return -1;
    }
    names[count++] = d;
  }
  hkc_wmsg_free(&reply);
  *out_names = names;
  *out_count = count;
  return 0;
}

int hkc_comgr_disassemble(const void *code, size_t size, const char *arch, char **out_text, char *why,
                          size_t why_size) {
  hkc_wpool_t *pool = pool_or_lock();
  if (!pool) {
    int rc = hkc_comgr_disassemble_local(code, size, arch, out_text, why, why_size);
    pthread_mutex_unlock(&g_lock);
    return rc;
  }
  *out_text = NULL;
  hkc_wmsg_t req = {.kind = HKC_JOB_COMGR_DISASM}, reply;
  if (hkc_wmsg_add(&req, code, size) != 0) {
    snprintf(why, why_size, "code object of %zu bytes is too large to disassemble", size);
    return -1;
  }
  hkc_wmsg_add(&req, arch, strlen(arch));
  char pool_why[512];
  if (hkc_wpool_call(pool, &req, &reply, pool_why, sizeof pool_why) != 0) {
    snprintf(why, why_size, "comgr disassembly for %s failed in its worker process: %s", arch, pool_why);
    return -1;
  }
  if (reply.n != 1 || reply.kind != 0) {
    snprintf(why, why_size, "%s", reply.n ? (const char *)reply.f[0].data : "comgr worker sent no disassembly");
    hkc_wmsg_free(&reply);
    return -1;
  }
  *out_text = reply.f[0].data; /* NUL-terminated by hkc_wmsg_read */
  reply.f[0].data = NULL;
  hkc_wmsg_free(&reply);
  return 0;
}

/* ---- the AMD entry of the toolchain table (toolchain.h) ------------------------------------- */
/* comgr disassembles the kernel's whole code object (one kernel each) for the ISA with its
 * features ("gfx90a:xnack-"). */
static int amd_disassemble(const void *code, size_t size, const char *kernel, const char *target, char **out_text,
                           char *why, size_t why_size) {
  return hkc_comgr_disassemble(code, size, target, out_text, why, why_size);
}

const hkc_toolchain_t hkc_toolchain_hiprtc = {
    .name = "hiprtc",
    .kind = HK_TARGET_HIP,
    .vendor = "AMD",
    .program = "hiprtc",
    .label = "AMD (gfx)",
    .features = "append xnack+/xnack-/sramecc+/sramecc- to pin them (gfx90a:xnack-); a bare name runs with "
                "either setting",
    .probe_compile = "comgr lists, hiprtc cannot build",
    .spill_memory = "scratch",
    .compute_unit = "CU",
    .occupancy_unit = "waves/SIMD",
    .available = hkc_hiprtc_available,
    .version = hkc_hiprtc_version,
    .codegen_kernel = hkc_codegen_gpu,
    .launch_dims = hkc_gpu_launch_dims,
    .compile = hkc_hiprtc_compile,
    .disassemble = amd_disassemble,
    .list_targets = hkc_comgr_isa_list,
};

/* ---- worker side ----------------------------------------------------------------------- */
static void reply_text(hkc_wmsg_t *reply, uint32_t kind, const char *text) {
  reply->kind = kind;
  char *t = hkc_strdup(text ? text : "");
  hkc_wmsg_add(reply, t, t ? strlen(t) : 0);
}

static void amd_handler(const hkc_wmsg_t *req, hkc_wmsg_t *reply) {
  char why[1024] = "";
  switch (req->kind) {
  case HKC_JOB_HIPRTC_COMPILE: {
    if (req->n != 3) {
      reply_text(reply, 1, "malformed compile request");
      return;
    }
    hkc_rtc_result_t r;
    const int rc = hkc_hiprtc_compile_local(req->f[0].data, req->f[1].data, req->f[2].data, &r);
    unsigned char *res = malloc(4 * N_RESOURCES);
    const uint32_t v[N_RESOURCES] = {r.vgprs, r.agprs, r.sgprs, r.shared_bytes, r.scratch_bytes, r.wave_size,
                                     r.max_block};
    for (int i = 0; res && i < N_RESOURCES; i++)
      for (int b = 0; b < 4; b++) res[4 * i + b] = (unsigned char)(v[i] >> (8 * b));
    reply->kind = rc == 0 ? 0 : 1;
    hkc_wmsg_add(reply, rc == 0 ? r.code : NULL, rc == 0 ? r.code_size : 0);
    hkc_wmsg_add(reply, r.log, r.log ? strlen(r.log) : 0);
    hkc_wmsg_add(reply, res, res ? 4 * N_RESOURCES : 0);
    if (rc != 0) free(r.code); /* on success code and log belong to the reply now */
    return;
  }
  case HKC_JOB_COMGR_ISA_LIST: {
    char **names = NULL;
    size_t n = 0;
    if (hkc_comgr_isa_list_local(&names, &n, why, sizeof why) != 0) {
      reply_text(reply, 1, why);
      return;
    }
    hkc_strbuf_t sb = {0};
    for (size_t i = 0; i < n; i++) {
      hkc_sb_printf(&sb, "%s\n", names[i]);
      free(names[i]);
    }
    free(names);
    reply->kind = 0;
    hkc_wmsg_add(reply, sb.data ? sb.data : hkc_strdup(""), sb.len);
    return;
  }
  case HKC_JOB_COMGR_DISASM: {
    if (req->n != 2) {
      reply_text(reply, 1, "malformed disassembly request");
      return;
    }
    char *text = NULL;
    if (hkc_comgr_disassemble_local(req->f[0].data, req->f[0].size, req->f[1].data, &text, why, sizeof why) != 0) {
      reply_text(reply, 1, why);
      return;
    }
    reply->kind = 0;
    hkc_wmsg_add(reply, text, strlen(text));
    return;
  }
  default: {
    char msg[64];
    snprintf(msg, sizeof msg, "unknown job kind %u", req->kind);
    reply_text(reply, 1, msg);
  }
  }
}

int hkc_amd_worker_main(void) { return hkc_worker_serve(HKC_WORKER_FD, amd_handler); }
