/* SPDX-License-Identifier: Apache-2.0 */
/* The IR's small accessors: names of enums, tensor lookup and sizes, destruction.
 * Building and validating the IR from YAML is spec.c. */
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"

void hkc_spec_destroy(hkc_spec_t *spec) {
  if (!spec) return;
  free(spec->path);
  free(spec->name);
  for (size_t i = 0; i < spec->n_dims; i++) free(spec->dims[i].name);
  free(spec->dims);
  for (size_t i = 0; i < spec->n_targets; i++) free(spec->targets[i]);
  free(spec->targets);
  for (size_t i = 0; i < spec->n_tensors; i++) hkc_tensor_free(&spec->tensors[i]);
  free(spec->tensors);
  for (size_t i = 0; i < spec->n_nodes; i++) {
    free(spec->nodes[i].name);
    free(spec->nodes[i].fused_names);
  }
  free(spec->nodes);
  free(spec->outputs);
  for (size_t i = 0; i < spec->n_groups; i++) free(spec->groups[i]);
  free(spec->groups);
  free(spec->group_sizes);
  free(spec->group_locs);
  free(spec->fusion_apart);
  free(spec);
}

void hkc_tensor_free(hkc_tensor_t *t) {
  free(t->name);
  for (uint32_t p = 0; p < t->n_parts; p++) free(t->parts[p]);
  free(t->parts);
  t->name = NULL;
  t->parts = NULL;
  t->n_parts = 0;
}

int hkc_tensor_find(const hkc_spec_t *spec, const char *name) {
  for (size_t i = 0; i < spec->n_tensors; i++)
    if (strcmp(spec->tensors[i].name, name) == 0) return (int)i;
  return HKC_NONE;
}

/* Product of the dims at this batch size; -1 when it overflows int64 or a dim is
 * not positive (the spec validator rules both out for its own batch sizes). */
int64_t hkc_tensor_elems(const hkc_tensor_t *t, int64_t batch) {
  int64_t n = 1;
  for (uint32_t i = 0; i < t->rank; i++) {
    int64_t v, scaled;
    if (__builtin_mul_overflow(t->dims[i].mul, batch, &scaled) || __builtin_add_overflow(scaled, t->dims[i].add, &v) ||
        v <= 0 || __builtin_mul_overflow(n, v, &n))
      return -1;
  }
  return n;
}

size_t hkc_dtype_size(hk_dtype_t dtype) {
  switch (dtype) {
  case HK_DTYPE_F32: return 4;
  case HK_DTYPE_F16: return 2;
  case HK_DTYPE_BF16: return 2;
  case HK_DTYPE_I32: return 4;
  case HK_DTYPE_I8:
  case HK_DTYPE_FP8_E4M3: return 1;
  default: return 0;
  }
}

const char *hkc_dtype_name(hk_dtype_t dtype) {
  switch (dtype) {
  case HK_DTYPE_F32: return "f32";
  case HK_DTYPE_F16: return "f16";
  case HK_DTYPE_BF16: return "bf16";
  case HK_DTYPE_I32: return "i32";
  case HK_DTYPE_I8: return "int8";
  case HK_DTYPE_FP8_E4M3: return "fp8_e4m3";
  default: return "?";
  }
}

const char *hkc_op_name(hk_op_t op) {
  static const char *const names[HK_OP_COUNT_] = {
      [HK_OP_GEMM] = "gemm",           [HK_OP_ADD] = "add",         [HK_OP_MUL] = "mul",
      [HK_OP_RELU] = "relu",           [HK_OP_GELU] = "gelu",       [HK_OP_SILU] = "silu",
      [HK_OP_LAYERNORM] = "layernorm", [HK_OP_RMSNORM] = "rmsnorm", [HK_OP_SOFTMAX] = "softmax",
      [HK_OP_ATTENTION] = "attention", [HK_OP_ROPE] = "rope",       [HK_OP_EWCHAIN] = "ewchain",
      [HK_OP_GELU_TANH] = "gelu_tanh", [HK_OP_TANH] = "tanh",  [HK_OP_EMBEDDING] = "embedding",
      [HK_OP_KV_APPEND] = "kv_append", [HK_OP_KV_ATTENTION] = "kv_attention", [HK_OP_TAKE_ROWS] = "take_rows",
      [HK_OP_ARGMAX] = "argmax",       [HK_OP_SAMPLE] = "sample",   [HK_OP_DEQUANT] = "dequant",
      [HK_OP_ALL_REDUCE] = "all_reduce", [HK_OP_ALL_GATHER] = "all_gather",
  };
  return (unsigned)op < HK_OP_COUNT_ ? names[op] : "?";
}

const char *hkc_act_name(hk_act_t act) {
  static const char *const names[HK_ACT_COUNT_] = {
      [HK_ACT_NONE] = "none", [HK_ACT_RELU] = "relu",           [HK_ACT_GELU] = "gelu",
      [HK_ACT_SILU] = "silu", [HK_ACT_GELU_TANH] = "gelu_tanh",
  };
  return (unsigned)act < HK_ACT_COUNT_ ? names[act] : "?";
}
