/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What `hkc run` and `hkc generate` share (tools.h): tensors filled from .npy files or a seeded
 * generator, the session options of the environment, --weights checkpoints, the --profile table.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "codegen/codegen.h"
#include "hk/hkrt.h"
#include "tools/tools.h"
#include "util/util.h"

/* hkc_load_elem / hkc_store_elem take either enum: the values must agree. */
_Static_assert(HK_ELEMENT_F32 == (int)HK_DTYPE_F32 && HK_ELEMENT_F16 == (int)HK_DTYPE_F16 &&
                   HK_ELEMENT_BF16 == (int)HK_DTYPE_BF16 && HK_ELEMENT_I32 == (int)HK_DTYPE_I32 &&
                   HK_ELEMENT_I8 == (int)HK_DTYPE_I8 && HK_ELEMENT_FP8_E4M3 == (int)HK_DTYPE_FP8_E4M3,
               "hk_element_type_t and hk_dtype_t differ");

size_t hkc_run_info_count(const hk_tensor_info_t *info) {
  size_t n = 1;
  for (uint32_t d = 0; d < info->rank; d++) n *= (size_t)info->dims[d];
  return n;
}

void hkc_run_format_shape(const hk_tensor_info_t *info, char *out, size_t size) {
  int n = snprintf(out, size, "[");
  for (uint32_t d = 0; d < info->rank && n > 0 && (size_t)n < size; d++)
    n += snprintf(out + n, size - (size_t)n, "%s%lld", d ? ", " : "", (long long)info->dims[d]);
  if (n > 0 && (size_t)n < size) snprintf(out + n, size - (size_t)n, "]");
}

/* Fills a tensor from a .npy file (exact shape; an i32 tensor needs an integer file, an int8
 * one an integer file of values in -128..127; an fp8_e4m3 one takes floats, rounded, or uint8
 * bit patterns) or from the seeded generator (i32: integers in [0, HKC_RUN_RANDOM_I32); int8:
 * -127..127; fp8_e4m3: the float draw, rounded). */
#define HKC_RUN_RANDOM_I32 100 /* random ids and lengths: small, kernels clamp them anyway */
int hkc_run_fill_tensor(const hk_tensor_info_t *info, void *buf, const char *npy_path, uint64_t seed) {
  size_t n = hkc_run_info_count(info);
  if (npy_path) {
    hkc_npy_t npy;
    if (hkc_npy_read(npy_path, &npy) != 0) return -1;
    int same = npy.rank == info->rank;
    for (uint32_t d = 0; same && d < info->rank; d++) same = npy.dims[d] == info->dims[d];
    if (!same) {
      char want[128];
      hkc_run_format_shape(info, want, sizeof want);
      fprintf(stderr, "hkc run: %s: shape does not match tensor %s %s\n", npy_path, info->name, want);
      hkc_npy_free(&npy);
      return -1;
    }
    if (info->element_type == HK_ELEMENT_I32) {
      if (!npy.ints) {
        fprintf(stderr, "hkc run: %s: tensor %s is i32: give an integer .npy (int32 or int64)\n", npy_path, info->name);
        hkc_npy_free(&npy);
        return -1;
      }
      memcpy(buf, npy.ints, n * sizeof(int32_t));
      hkc_npy_free(&npy);
      return 0;
    }
    if (info->element_type == HK_ELEMENT_I8 || (info->element_type == HK_ELEMENT_FP8_E4M3 && npy.ints)) {
      const int i8 = info->element_type == HK_ELEMENT_I8;
      for (size_t i = 0; npy.ints && i < n; i++)
        if (i8 ? npy.ints[i] < -128 || npy.ints[i] > 127 : npy.ints[i] < 0 || npy.ints[i] > 255) {
          fprintf(stderr, "hkc run: %s: element %zu is %d, outside %s (tensor %s is %s)\n", npy_path, i, (int)npy.ints[i],
                  i8 ? "-128..127" : "0..255, an fp8 bit pattern", info->name, i8 ? "int8" : "fp8_e4m3");
          hkc_npy_free(&npy);
          return -1;
        }
      if (!npy.ints) {
        fprintf(stderr, "hkc run: %s: tensor %s is int8: give an integer .npy (int8, int32 or int64)\n", npy_path,
                info->name);
        hkc_npy_free(&npy);
        return -1;
      }
      for (size_t i = 0; i < n; i++) ((uint8_t *)buf)[i] = (uint8_t)npy.ints[i];
      hkc_npy_free(&npy);
      return 0;
    }
    for (size_t i = 0; i < n; i++) hkc_store_elem(buf, (int)info->element_type, i, npy.data[i]);
    hkc_npy_free(&npy);
    return 0;
  }
  uint64_t s = seed ^ hkc_hash64(info->name, strlen(info->name));
  double scale = 1.0;
  if (info->role == HK_TENSOR_PARAM && info->rank >= 2) scale = 1.0 / sqrt((double)info->dims[0]);
  if (info->element_type == HK_ELEMENT_I32) {
    for (size_t i = 0; i < n; i++) ((int32_t *)buf)[i] = (int32_t)(hkc_splitmix64(&s) % HKC_RUN_RANDOM_I32);
    return 0;
  }
  if (info->element_type == HK_ELEMENT_I8) {
    for (size_t i = 0; i < n; i++) ((int8_t *)buf)[i] = (int8_t)((int)(hkc_splitmix64(&s) % 255) - 127);
    return 0;
  }
  for (size_t i = 0; i < n; i++) hkc_store_elem(buf, (int)info->element_type, i, (float)hkc_uniform_pm(&s, scale));
  return 0;
}

double hkc_run_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int hkc_run_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

const char *hkc_run_find_named(const hkc_named_file_t *files, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(files[i].name, name) == 0) return files[i].path;
  return NULL;
}

/* --profile: every launch timed alone (hk_session_profile) beside its roofline floor: on the
 * device the session runs on where its name is a known part (hkc_gpu_part_for_device: "NVIDIA
 * H100 80GB HBM3" -> the H100 SXM's bandwidth and matrix rate), else on the target table's
 * part for the session's target (sm_90: the H200's); printed, or with json (hkc run --json's
 * document) added to it as "profile". 0 / -1 (error printed). */
int hkc_run_print_profile(hk_session_t *session, uint32_t repeats, double graph_us, cJSON *json) {
  uint32_t n = hk_session_launch_count(session);
  double *us = calloc(n ? n : 1, sizeof *us);
  if (!us) return -1;
  if (hk_session_profile(session, NULL, repeats, us) != HK_OK) {
    fprintf(stderr, "hkc run: --profile: %s\n", hk_last_error());
    free(us);
    return -1;
  }
  const hkc_gpu_arch_t *arch = hkc_gpu_arch_find(hk_session_target(session)); /* NULL on host */
  const char *device = hk_session_device_name(session);
  const hkc_gpu_part_t *part = arch ? hkc_gpu_part_for_device(device) : NULL;
  const char *product = part ? part->product : arch ? arch->product : "";
  const double hbm_gbps = part ? part->hbm_gbps : arch ? arch->hbm_gbps : 0.0;
  const double matrix_tflops = part ? part->matrix_tflops_f16 : arch ? arch->matrix_tflops_f16 : 0.0;
  int w_nodes = 5, w_kernel = 6;
  for (uint32_t i = 0; i < n; i++) {
    hk_launch_info_t li;
    hk_session_launch_info(session, i, &li);
    if ((int)strlen(li.nodes) > w_nodes) w_nodes = (int)strlen(li.nodes);
    if ((int)strlen(li.kernel) > w_kernel) w_kernel = (int)strlen(li.kernel);
  }
  cJSON *jp = NULL, *jl = NULL;
  if (json) {
    jp = cJSON_AddObjectToObject(json, "profile");
    cJSON_AddNumberToObject(jp, "repeats", repeats);
    if (arch) {
      cJSON_AddStringToObject(jp, "floor_target", arch->name);
      cJSON_AddStringToObject(jp, "floor_part", product); /* the figures' part: the device's, else the table's */
      cJSON_AddNumberToObject(jp, "floor_gbps", hbm_gbps);
      cJSON_AddNumberToObject(jp, "floor_matrix_tflops", matrix_tflops);
    } else {
      cJSON_AddNullToObject(jp, "floor_target");
    }
    cJSON_AddStringToObject(jp, "device", device);
    jl = cJSON_AddArrayToObject(jp, "launches");
  } else {
    printf("profile: each launch alone, median of %u pass(es) after one warm-up pass", repeats);
    if (arch && part)
      printf("; floor on %s (%s, an %s: %.1f GB/s, %.1f TFLOP/s f16 matrix)\n", arch->name, device, product, hbm_gbps,
             matrix_tflops);
    else if (arch)
      printf("; floor on %s (%s: %.1f GB/s, %.1f TFLOP/s f16 matrix; the device, %s, is not a part hkc knows)\n",
             arch->name, product, hbm_gbps, matrix_tflops, device[0] ? device : "unnamed");
    else
      printf("; no floor (%s is not a GPU target of hkc's table)\n", hk_session_target(session));
    printf("  %3s  %-*s  %-*s  %11s  %10s  %9s  %8s  %7s\n", "#", w_nodes, "nodes", w_kernel, "kernel", "median us",
           "floor us", "GB/s", "TFLOP/s", "floor%");
  }
  double total = 0, total_floor = 0;
  for (uint32_t i = 0; i < n; i++) {
    hk_launch_info_t li;
    hk_session_launch_info(session, i, &li);
    char floor_s[16] = "-", pct_s[16] = "-", gbs[16] = "-", tfs[16] = "-";
    double fl = -1;
    if (li.bytes) snprintf(gbs, sizeof gbs, "%.1f", (double)li.bytes / us[i] * 1e-3);
    if (li.flops) snprintf(tfs, sizeof tfs, "%.2f", (double)li.flops / us[i] * 1e-6);
    if (arch && li.bytes) {
      double mem = (double)li.bytes / (hbm_gbps * 1e3);
      double math = li.matrix ? (double)li.flops / (matrix_tflops * 1e6) : 0.0;
      fl = mem > math ? mem : math;
      total_floor += fl;
      snprintf(floor_s, sizeof floor_s, "%.3f", fl);
      snprintf(pct_s, sizeof pct_s, "%.0f%%", fl / us[i] * 100.0);
    }
    total += us[i];
    if (jl) {
      cJSON *j = cJSON_CreateObject();
      cJSON_AddItemToArray(jl, j);
      cJSON_AddNumberToObject(j, "index", i);
      cJSON_AddStringToObject(j, "nodes", li.nodes);
      cJSON_AddStringToObject(j, "kernel", li.kernel);
      cJSON_AddNumberToObject(j, "median_us", us[i]);
      if (fl >= 0) cJSON_AddNumberToObject(j, "floor_us", fl);
      else cJSON_AddNullToObject(j, "floor_us");
      cJSON_AddNumberToObject(j, "bytes", (double)li.bytes);
      cJSON_AddNumberToObject(j, "flops", (double)li.flops);
      cJSON_AddBoolToObject(j, "matrix", li.matrix != 0);
    } else {
      printf("  %3u  %-*s  %-*s  %11.3f  %10s  %9s  %8s  %7s\n", i, w_nodes, li.nodes, w_kernel, li.kernel, us[i],
             floor_s, gbs, tfs, pct_s);
    }
  }
  double coll_us = 0; /* tensor parallelism: the collectives' share (their time includes waiting for the other
                         ranks to arrive) */
  uint32_t n_coll = 0;
  for (uint32_t i = 0; i < n; i++) {
    hk_launch_info_t li;
    hk_session_launch_info(session, i, &li);
    if (!strncmp(li.kernel, "hk_all_reduce_", 14) || !strncmp(li.kernel, "hk_all_gather_", 14)) coll_us += us[i], n_coll++;
  }
  if (jp) {
    cJSON_AddNumberToObject(jp, "sum_us", total);
    if (n_coll) cJSON_AddNumberToObject(jp, "collectives_us", coll_us);
    if (total_floor > 0) cJSON_AddNumberToObject(jp, "floor_sum_us", total_floor);
    else cJSON_AddNullToObject(jp, "floor_sum_us");
    cJSON_AddNumberToObject(jp, "graph_us", graph_us);
    free(us);
    return 0;
  }
  printf("  sum of launches %.3f us", total);
  if (total_floor > 0) printf(", floor %.3f us (%.0f%% of floor)", total_floor, total_floor / total * 100.0);
  printf("; whole graph (hk_session_run, median) %.3f us\n", graph_us);
  /* the bubbles: the graph's time that no launch accounts for (launch gaps, prologues
   * waiting on their predecessor); negative when launches overlap (PDL) */
  printf("  bubbles: whole graph - sum of launches = %.3f us (%.0f%% of the graph)\n", graph_us - total,
         graph_us > 0 ? (graph_us - total) / graph_us * 100.0 : 0.0);
  if (n_coll)
    printf("  collectives: %u launch(es), %.3f us (%.0f%% of the sum of launches; each timed alone, waiting for the "
           "other ranks included)\n", n_coll, coll_us, total > 0 ? coll_us / total * 100.0 : 0.0);
  printf("  floor%%: floor / measured (100%% = at the roofline). GB/s and TFLOP/s: the compiler's bytes and\n"
         "  FLOPs over the measured time.\n");
  free(us);
  return 0;
}

/* The documented environment variables of hkc run as session options: HK_LAUNCH
 * (auto|graph|stream), HK_HOST_THREADS (a thread count, 0 = the online CPUs), HK_HOST_BLAS
 * (auto|off) and HK_PREFER_PTX (0|1). 0, or -1 with the problem printed. */
int hkc_run_options_from_env(hk_session_options_t *so) {
  const char *e = getenv("HK_LAUNCH");
  if (e && *e) {
    if (strcmp(e, "auto") == 0) so->launch_mode = HK_LAUNCH_MODE_AUTO;
    else if (strcmp(e, "graph") == 0) so->launch_mode = HK_LAUNCH_MODE_GRAPH;
    else if (strcmp(e, "stream") == 0) so->launch_mode = HK_LAUNCH_MODE_STREAM;
    else {
      fprintf(stderr, "hkc run: HK_LAUNCH is '%s'; expected auto, graph or stream\n", e);
      return -1;
    }
  }
  e = getenv("HK_HOST_THREADS");
  if (e && *e) {
    char *end;
    long long n = strtoll(e, &end, 10);
    if (*end || n < 0 || n > UINT32_MAX) {
      fprintf(stderr, "hkc run: HK_HOST_THREADS is '%s'; expected a thread count (0: the online CPUs)\n", e);
      return -1;
    }
    so->host_threads = (uint32_t)n;
  }
  e = getenv("HK_HOST_BLAS");
  if (e && *e) {
    if (strcmp(e, "auto") != 0 && strcmp(e, "off") != 0) {
      fprintf(stderr, "hkc run: HK_HOST_BLAS is '%s'; expected auto or off\n", e);
      return -1;
    }
    so->host_blas = strcmp(e, "off") == 0;
  }
  e = getenv("HK_PREFER_PTX");
  if (e && *e) {
    if (strcmp(e, "0") != 0 && strcmp(e, "1") != 0) {
      fprintf(stderr, "hkc run: HK_PREFER_PTX is '%s'; expected 0 or 1\n", e);
      return -1;
    }
    so->prefer_ptx = e[0] == '1';
  }
  return 0;
}

/* An .npz for --weights: the members the session's params take, as a safetensors image in
 * *out_image (freed by the caller after the weights) opened as *out_weights; *out_members:
 * the archive's member count. 0 / -1 (printed). */
static int open_npz_weights(hk_session_t *session, const char *path, const hkc_weights_map_t *map,
                            hk_weights_t **out_weights, void **out_image, uint32_t *out_members) {
  hkc_npz_t *npz;
  if (hkc_npz_open_file(path, &npz) != 0) return -1;
  size_t size;
  int rc = hkc_npz_checkpoint(npz, session, map, out_image, &size);
  *out_members = hkc_npz_count(npz);
  hkc_npz_destroy(npz);
  if (rc != 0) return -1;
  if (hk_weights_open_memory(*out_image, size, NULL, out_weights) != HK_OK) {
    fprintf(stderr, "hkc run: --weights %s: %s\n", path, hk_last_error());
    return -1;
  }
  return 0;
}

/* --weights FILE [--weights-map MAP]: opens the checkpoint (safetensors, or an .npz: the
 * format told by content) and binds every param it gives (hk_session_bind_weights).
 * *out_weights, *out_image (an .npz's members as safetensors) and *map stay with the caller,
 * who destroys the weights after the session and the image after the weights. 0, or -1 with
 * the problem printed. */
int hkc_run_bind_weights_file(hk_session_t *session, const char *path, const char *map_path, hk_weights_t **out_weights,
                              void **out_image, hkc_weights_map_t *map, int quiet, cJSON *json) {
  if (map_path && hkc_weights_map_read(map_path, map) != 0) {
    fprintf(stderr, "hkc run: no usable --weights-map\n");
    return -1;
  }
  const hkc_weights_format_t format = hkc_weights_file_format(path);
  uint32_t file_tensors = 0;
  if (format == HKC_WEIGHTS_NPZ) {
    if (open_npz_weights(session, path, map, out_weights, out_image, &file_tensors) != 0) return -1;
  } else if (format == HKC_WEIGHTS_SAFETENSORS) {
    if (hk_weights_open_file(path, NULL, out_weights) != HK_OK) {
      fprintf(stderr, "hkc run: --weights: %s\n", hk_last_error());
      return -1;
    }
    file_tensors = hk_weights_count(*out_weights);
  } else {
    fprintf(stderr, "hkc run: --weights %s: neither a safetensors checkpoint (a u64 header length, then a JSON "
                    "object) nor an .npz archive (a zip of NAME.npy files, starting PK\\3\\4)\n", path);
    return -1;
  }
  hk_bind_weights_options_t bo = {.struct_size = sizeof bo, .names = map->names, .name_count = map->count};
  uint32_t bound = 0, params = 0;
  if (hk_session_bind_weights(session, *out_weights, &bo, &bound) != HK_OK) {
    fprintf(stderr, "hkc run: --weights %s: %s\n", path, hk_last_error());
    return -1;
  }
  for (uint32_t t = 0; t < hk_session_tensor_count(session); t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(session, t, &info);
    params += info.role == HK_TENSOR_PARAM;
  }
  if (json) {
    cJSON *jw = cJSON_AddObjectToObject(json, "weights");
    cJSON_AddStringToObject(jw, "path", path);
    cJSON_AddNumberToObject(jw, "bound", bound);
    cJSON_AddNumberToObject(jw, "params", params);
    cJSON_AddNumberToObject(jw, "tensors", file_tensors);
    cJSON_AddStringToObject(jw, "format", format == HKC_WEIGHTS_NPZ ? "npz" : "safetensors");
  } else if (!quiet) {
    printf("weights: %u of %u param(s) bound from %s (%u tensor(s) in the file)\n", bound, params, path,
           file_tensors);
  }
  return 0;
}

/* Refuses (-1, printed) when a param is neither bound (--weights) nor given (--param), naming
 * every one, unless random_params. */
int hkc_run_check_params_given(hk_session_t *session, const hkc_named_file_t *files, int n_files, int random_params) {
  if (random_params) return 0;
  uint32_t missing = 0;
  for (uint32_t t = 0; t < hk_session_tensor_count(session); t++) {
    hk_tensor_info_t info, whole; /* a tensor-parallel `_shard` copy: given under its source's name */
    hk_session_tensor_info(session, t, &info);
    hk_session_tensor_whole_info(session, t, &whole);
    if (info.role != HK_TENSOR_PARAM || hk_session_tensor_bound(session, t) ||
        hkc_run_find_named(files, n_files, info.name) || hkc_run_find_named(files, n_files, whole.name))
      continue;
    char shape[128];
    hkc_run_format_shape(&info, shape, sizeof shape);
    if (!missing++) fprintf(stderr, "hkc run: these params are not given:\n");
    fprintf(stderr, "  %s %s", info.name, shape);
    const char *part; /* a param made of parts: the checkpoint tensors that would give it */
    for (uint32_t p = 0; (part = hk_session_tensor_part(session, t, p)) != NULL; p++)
      fprintf(stderr, "%s%s", p ? " | " : " (or its parts, all of: ", part);
    fprintf(stderr, "%s\n", hk_session_tensor_part(session, t, 0) ? ")" : "");
  }
  if (!missing) return 0;
  fprintf(stderr, "hkc run: %u param(s) unbound: give them with --weights FILE.safetensors|FILE.npz or --param "
                  "NAME=FILE.npy, or pass --random-params to run on seeded random values\n", missing);
  return -1;
}

/* ---- tensor-parallel packs: the communicators of hkc run / generate ---------------------------- */
typedef int (*nccl_init_all_fn)(void **comms, int ndev, const int *devlist);
typedef int (*nccl_destroy_fn)(void *comm);
typedef const char *(*nccl_error_fn)(int result);

int hkc_tp_open(hkc_tp_t *tp, hk_pack_t *pack, const char *target, const char *cmd) {
  memset(tp, 0, sizeof *tp);
  tp->ranks = hk_pack_tensor_ranks(pack);
  if (tp->ranks > HKC_TP_MAX_RANKS) {
    fprintf(stderr, "hkc %s: the pack has %u tensor-parallel ranks; this command runs at most %d\n", cmd, tp->ranks,
            HKC_TP_MAX_RANKS);
    return -1;
  }
  const char *name = NULL;
  if (hk_pack_select_target(pack, target, &name) != HK_OK) {
    fprintf(stderr, "hkc %s: %s\n", cmd, hk_last_error());
    return -1;
  }
  if (strncmp(name, "host", 4) == 0) {
    if (hk_host_group_create(tp->ranks, 0, &tp->group) != HK_OK) {
      fprintf(stderr, "hkc %s: %s\n", cmd, hk_last_error());
      return -1;
    }
    for (uint32_t r = 0; r < tp->ranks; r++) tp->comm[r] = tp->group;
    return 0;
  }
  tp->cuda = 1; /* a GPU target: NCCL on CUDA, RCCL (the same calls) on HIP */
  const int hip = strncmp(name, "sm_", 3) != 0;
  const char *lib = hip ? "librccl.so.1" : "libnccl.so.2";
  if (!(tp->nccl = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) {
    fprintf(stderr, "hkc %s: the pack's %u ranks run their collectives through %s, and %s cannot be loaded: %s\n", cmd,
            tp->ranks, hip ? "RCCL" : "NCCL", lib, dlerror());
    return -1;
  }
  nccl_init_all_fn init_all;
  nccl_error_fn error;
  void *sym = dlsym(tp->nccl, "ncclCommInitAll"), *esym = dlsym(tp->nccl, "ncclGetErrorString");
  memcpy(&init_all, &sym, sizeof sym);
  memcpy(&error, &esym, sizeof esym);
  int devs[HKC_TP_MAX_RANKS];
  for (uint32_t r = 0; r < tp->ranks; r++) devs[r] = (int)r;
  const int rc = sym ? init_all(tp->comm, (int)tp->ranks, devs) : -1;
  if (rc != 0) {
    fprintf(stderr, "hkc %s: ncclCommInitAll over GPUs 0..%u failed: %s (the pack's %u ranks run on one GPU each)\n",
            cmd, tp->ranks - 1, !sym ? "libnccl.so.2 lacks it" : error ? error(rc) : "?", tp->ranks);
    memset(tp->comm, 0, sizeof tp->comm);
    return -1;
  }
  return 0;
}

void hkc_tp_abort(hkc_tp_t *tp) {
  if (tp->group) hk_host_group_abort(tp->group);
  if (!tp->cuda || !tp->nccl) return;
  void *sym = dlsym(tp->nccl, "ncclCommAbort");
  nccl_destroy_fn abort_fn;
  memcpy(&abort_fn, &sym, sizeof sym);
  for (uint32_t r = 0; sym && r < tp->ranks; r++) { /* once per communicator, whichever thread comes first */
    void *c = __atomic_exchange_n(&tp->comm[r], NULL, __ATOMIC_ACQ_REL);
    if (c) (void)abort_fn(c);
  }
}

void hkc_tp_close(hkc_tp_t *tp) {
  hk_host_group_destroy(tp->group);
  if (tp->nccl) {
    void *sym = dlsym(tp->nccl, "ncclCommDestroy");
    nccl_destroy_fn destroy;
    memcpy(&destroy, &sym, sizeof sym);
    for (uint32_t r = 0; sym && r < tp->ranks; r++)
      if (tp->comm[r]) (void)destroy(tp->comm[r]);
    dlclose(tp->nccl);
  }
  memset(tp, 0, sizeof *tp);
}

const char *hkc_tp_rank_path(const char *path, uint32_t rank, char *buf, size_t size) {
  const char *at = path ? strstr(path, "{rank}") : NULL;
  if (!at) return path;
  snprintf(buf, size, "%.*s%u%s", (int)(at - path), path, rank, at + 6);
  return buf;
}

int hkc_tp_rank_open(hkc_tp_rank_t *r, hk_pack_t *pack, const hk_session_options_t *so, const char *weights_path,
                     const char *map_path) {
  memset(r, 0, sizeof *r);
  if (hk_session_create(pack, so, &r->session) != HK_OK) return -1;
  char buf[4200];
  const char *path = hkc_tp_rank_path(weights_path, so->tensor_rank, buf, sizeof buf);
  return path && hkc_run_bind_weights_file(r->session, path, map_path, &r->weights, &r->image, &r->map, 1, NULL) != 0
             ? -1
             : 0;
}

void hkc_tp_rank_close(hkc_tp_rank_t *r) {
  hk_session_destroy(r->session);
  hk_weights_destroy(r->weights); /* after the session: host tensors may be bound in place */
  free(r->image);
  hkc_weights_map_free(&r->map);
  memset(r, 0, sizeof *r);
}

void hkc_tp_rank_fail(hkc_tp_t *tp, char *error, size_t size) {
  snprintf(error, size, "%s", hk_last_error());
  hkc_tp_abort(tp);
}

int hkc_tp_follow(hk_session_t *session, long long runs, uint32_t repeats) {
  for (long long r = 0; r < runs; r++)
    if (hk_session_run(session, NULL) != HK_OK || hk_session_synchronize(session, NULL) != HK_OK) return -1;
  if (!repeats) return 0;
  const uint32_t n = hk_session_launch_count(session);
  double *us = calloc(n ? n : 1, sizeof *us);
  const hk_status_t st = us ? hk_session_profile(session, NULL, repeats, us) : HK_STATUS_OUT_OF_MEMORY;
  free(us);
  return st == HK_OK ? 0 : -1;
}

void hkc_tp_options(const hkc_tp_t *tp, uint32_t r, hk_session_options_t *so) {
  so->comm = tp->comm[r];
  so->tensor_rank = r;
  if (tp->cuda) so->device = (int)r;
}
