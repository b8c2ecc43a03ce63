/* SPDX-License-Identifier: Apache-2.0 */
/* The CUDA driver types libhkrt declares itself (loader/src/gpu_internal.h: no vendor header is
 * included by the loader) against the toolkit's own cuda.h, when the build found one
 * (tests/CMakeLists.txt defines HK_TEST_CUDA_H as its path; without it the test is skipped,
 * saying so): the sizes and field offsets of the structs libhkrt passes to the driver, and the
 * enum values it uses. cuda.h is included in this file alone: its macros rename driver calls
 * (cuGraphAddKernelNode -> cuGraphAddKernelNode_v2, ...), which would rename the members of
 * gpu_internal.h's symbol table in a file that uses it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "gpu_internal.h"
#ifdef HK_TEST_CUDA_H
#include HK_TEST_CUDA_H
#endif

#define SAME_LAYOUT(ours, theirs) assert_int_equal(sizeof(ours), sizeof(theirs))
#define SAME_OFFSET(ours, theirs, f_ours, f_theirs) assert_int_equal(offsetof(ours, f_ours), offsetof(theirs, f_theirs))

static void test_layouts(void **state) {
  (void)state;
#ifdef HK_TEST_CUDA_H
  print_message("[ info     ] %s (CUDA_VERSION %d)\n", HK_TEST_CUDA_H, CUDA_VERSION);
  /* programmatic dependent launch: cuLaunchKernelEx's configuration and attribute */
  SAME_LAYOUT(hk_cu_launch_config_t, CUlaunchConfig);
  SAME_OFFSET(hk_cu_launch_config_t, CUlaunchConfig, gridDimX, gridDimX);
  SAME_OFFSET(hk_cu_launch_config_t, CUlaunchConfig, blockDimX, blockDimX);
  SAME_OFFSET(hk_cu_launch_config_t, CUlaunchConfig, sharedMemBytes, sharedMemBytes);
  SAME_OFFSET(hk_cu_launch_config_t, CUlaunchConfig, hStream, hStream);
  SAME_OFFSET(hk_cu_launch_config_t, CUlaunchConfig, attrs, attrs);
  SAME_OFFSET(hk_cu_launch_config_t, CUlaunchConfig, numAttrs, numAttrs);
  SAME_LAYOUT(hk_cu_launch_attribute_t, CUlaunchAttribute);
  assert_int_equal(_Alignof(hk_cu_launch_attribute_t), _Alignof(CUlaunchAttribute));
  SAME_OFFSET(hk_cu_launch_attribute_t, CUlaunchAttribute, id, id);
  SAME_OFFSET(hk_cu_launch_attribute_t, CUlaunchAttribute, value, value);
  SAME_LAYOUT(hk_cu_launch_attribute_value_t, CUlaunchAttributeValue);
  assert_int_equal(sizeof(((CUlaunchAttribute *)0)->id), sizeof(int));
  assert_int_equal(offsetof(CUlaunchAttributeValue, programmaticStreamSerializationAllowed), 0);
  assert_int_equal(HK_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
                   CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  /* programmatic graph edges */
  SAME_LAYOUT(hk_cu_graph_edge_data_t, CUgraphEdgeData);
  SAME_OFFSET(hk_cu_graph_edge_data_t, CUgraphEdgeData, from_port, from_port);
  SAME_OFFSET(hk_cu_graph_edge_data_t, CUgraphEdgeData, to_port, to_port);
  SAME_OFFSET(hk_cu_graph_edge_data_t, CUgraphEdgeData, type, type);
  SAME_OFFSET(hk_cu_graph_edge_data_t, CUgraphEdgeData, reserved, reserved);
  assert_int_equal(HK_CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC, CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC);
  assert_int_equal(HK_CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC, CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC);
  /* graph kernel nodes (v2 on CUDA 12+; v1 is its prefix) and tensor maps */
  SAME_LAYOUT(hk_cu_kernel_node_params_v2_t, CUDA_KERNEL_NODE_PARAMS_v2);
  SAME_OFFSET(hk_cu_kernel_node_params_v2_t, CUDA_KERNEL_NODE_PARAMS_v2, kernelParams, kernelParams);
  SAME_OFFSET(hk_cu_kernel_node_params_v2_t, CUDA_KERNEL_NODE_PARAMS_v2, ctx, ctx);
  SAME_LAYOUT(hk_cu_kernel_node_params_v1_t, CUDA_KERNEL_NODE_PARAMS_v1);
  SAME_LAYOUT(hk_cu_tensor_map_t, CUtensorMap);
  assert_int_equal(HK_CU_TENSOR_MAP_DATA_TYPE_FLOAT16, CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  assert_int_equal(HK_CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  assert_int_equal(HK_CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  assert_int_equal(HK_CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  assert_int_equal(HK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
#else
  print_message("[ SKIP     ] no cuda.h found when the tests were configured: the CUDA layouts libhkrt declares "
                "are not compared with the toolkit's\n");
  skip();
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layouts),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
