/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gpu_internal.h -- the vendor driver symbol tables of the CUDA and HIP backends, their
 * fault-injection hooks and the pure target-matching rules (exported for tests).
 *
 * No vendor header is included anywhere: the handful of types, enums and struct layouts
 * the backends need are declared here from the vendors' API documentation (checked
 * against CUDA 13.0's cuda.h and ROCm 5.2's hip_runtime_api.h on 2026-11-30). Each
 * runtime is dlopen'ed on first use; the symbol lists below are X-macros expanded once
 * into the members of the table struct and once into the dlsym loop.
 *
 * Fault injection: hk_cuda_override_symbols(table) / hk_hip_override_symbols(table) make
 * the backend use the given table instead of the library (a fake driver in a test), and
 * forget what it probed before; NULL goes back to dlopen. Not thread-safe: call it while
 * no session of that backend exists.
 */
#ifndef HK_GPU_INTERNAL_H
#define HK_GPU_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- CUDA driver API (libcuda.so.1) ------------------------------------------------ */
typedef int hk_cu_result_t; /* enum cudaError_enum; 0 = CUDA_SUCCESS */
typedef int hk_cu_device_t;
typedef unsigned long long hk_cu_deviceptr_t; /* CUdeviceptr_v2 on 64-bit hosts */
typedef struct CUctx_st *hk_cu_context_t;
typedef struct CUmod_st *hk_cu_module_t;
typedef struct CUfunc_st *hk_cu_function_t;
typedef struct CUkern_st *hk_cu_kernel_t;
typedef struct CUstream_st *hk_cu_stream_t;
typedef struct CUgraph_st *hk_cu_graph_t;
typedef struct CUgraphNode_st *hk_cu_graph_node_t;
typedef struct CUgraphExec_st *hk_cu_graph_exec_t;
typedef struct CUevent_st *hk_cu_event_t;

#define HK_CUDA_SUCCESS 0
#define HK_CUDA_ERROR_OUT_OF_MEMORY 2
#define HK_CUDA_ERROR_NO_DEVICE 100
#define HK_CUDA_ERROR_NOT_FOUND 500
#define HK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define HK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define HK_CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES 1 /* the kernel's static shared memory */
#define HK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
/* Dynamic shared memory a kernel may use without opting in (cuFuncSetAttribute). */
#define HK_CU_DEFAULT_DYNAMIC_SHARED 49152

/* CUDA_KERNEL_NODE_PARAMS_v1 (cuGraphAddKernelNode, CUDA 10+) */
typedef struct hk_cu_kernel_node_params_v1 {
  hk_cu_function_t func;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  void **kernelParams;
  void **extra;
} hk_cu_kernel_node_params_v1_t;

/* CUDA_KERNEL_NODE_PARAMS_v2 (cuGraphAddKernelNode_v2, CUDA 12+): v1 plus kern and ctx
 * (both ignored / NULL = current context when func is set). */
typedef struct hk_cu_kernel_node_params_v2 {
  hk_cu_function_t func;
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  void **kernelParams;
  void **extra;
  hk_cu_kernel_t kern;
  hk_cu_context_t ctx;
} hk_cu_kernel_node_params_v2_t;

/* CUtensorMap (CUDA 12+): an opaque 128-byte descriptor (CU_TENSOR_MAP_NUM_QWORDS = 16).
 * cuda.h declares it 128-byte aligned; cuTensorMapEncodeTiled requires 64. */
typedef struct hk_cu_tensor_map {
  uint64_t opaque[16];
} hk_cu_tensor_map_t;
/* The cuTensorMapEncodeTiled enum values hkc uses (CUtensorMapDataType, ..._Interleave,
 * ..._L2promotion, ..._FloatOOBfill); CUtensorMapSwizzle's values are the pack's own
 * (hk_tmap_swizzle_t). */
#define HK_CU_TENSOR_MAP_DATA_TYPE_FLOAT16 6
#define HK_CU_TENSOR_MAP_DATA_TYPE_FLOAT32 7
#define HK_CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 9
#define HK_CU_TENSOR_MAP_INTERLEAVE_NONE 0
#define HK_CU_TENSOR_MAP_L2_PROMOTION_L2_256B 3
#define HK_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE 0

/* Programmatic dependent launch (PDL). Layouts and values from CUDA 13.0's cuda.h (checked
 * with sizeof/offsetof against it on 2026-12-01; tests/unit/gpu_backend_test.c compares them
 * again whenever the build finds a cuda.h). Stream launches: cuLaunchKernelEx with one
 * CUlaunchAttribute, id CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, value
 * programmaticStreamSerializationAllowed = 1. */
#define HK_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION 6
/* CUlaunchAttributeValue: a union padded to 64 bytes (char pad[64]) whose members include
 * pointers (CUevent), hence pointer-aligned; hkc sets only the int below. */
typedef union hk_cu_launch_attribute_value {
  char pad[64];
  int programmaticStreamSerializationAllowed;
  void *align_; /* the union's alignment, as cuda.h's pointer members give it */
} hk_cu_launch_attribute_value_t;
/* CUlaunchAttribute: id (CUlaunchAttributeID, a C enum), padding to 8 bytes
 * (char pad[8 - sizeof(CUlaunchAttributeID)]), value: 72 bytes on 64-bit hosts. */
typedef struct hk_cu_launch_attribute {
  int id;
  char pad[4];
  hk_cu_launch_attribute_value_t value;
} hk_cu_launch_attribute_t;
/* CUlaunchConfig: 56 bytes on 64-bit hosts (hStream at 32, attrs at 40, numAttrs at 48). */
typedef struct hk_cu_launch_config {
  unsigned int gridDimX, gridDimY, gridDimZ;
  unsigned int blockDimX, blockDimY, blockDimZ;
  unsigned int sharedMemBytes;
  hk_cu_stream_t hStream;
  hk_cu_launch_attribute_t *attrs;
  unsigned int numAttrs;
} hk_cu_launch_config_t;
/* CUDA_MEMCPY2D (cuMemcpy2DAsync_v2): 128 bytes on 64-bit hosts; CUmemorytype DEVICE = 2.
 * Checked against CUDA 13.0's cuda.h (tests/unit/cuda_abi_test.c compares it when the build
 * finds a cuda.h). */
#define HK_CU_MEMORYTYPE_DEVICE 2
#define HK_CU_STREAM_NON_BLOCKING 1
#define HK_CU_STREAM_CAPTURE_MODE_RELAXED 2
typedef struct hk_cu_memcpy2d {
  size_t srcXInBytes, srcY;
  int srcMemoryType;
  const void *srcHost;
  hk_cu_deviceptr_t srcDevice;
  void *srcArray;
  size_t srcPitch;
  size_t dstXInBytes, dstY;
  int dstMemoryType;
  void *dstHost;
  hk_cu_deviceptr_t dstDevice;
  void *dstArray;
  size_t dstPitch;
  size_t WidthInBytes, Height;
} hk_cu_memcpy2d_t;

/* ---- NCCL (libnccl.so.2), tensor-parallel sessions on CUDA targets --------------------------
 * The application's communicator (hk_session_options_t comm: an ncclComm_t) runs the pack's
 * collectives; libhkrt dlopens the library that made it (NCCL keeps one copy per process). The
 * calls and values from NCCL 2.x's nccl.h (ncclDataType_t: ncclFloat16 6, ncclFloat32 7,
 * ncclBfloat16 9; ncclRedOp_t ncclSum 0; ncclResult_t ncclSuccess 0, ncclInProgress 7). */
typedef int hk_nccl_result_t;
#define HK_NCCL_SYMBOL_MEMBER(member, symbol, alt, required, ret, params) ret(*member) params;
#define HK_NCCL_FLOAT16 6
#define HK_NCCL_FLOAT32 7
#define HK_NCCL_BFLOAT16 9
#define HK_NCCL_SUM 0
#define HK_NCCL_SYMBOLS(X)                                                                                    \
  X(ncclAllReduce, "ncclAllReduce", NULL, true, hk_nccl_result_t,                                            \
    (const void *sendbuff, void *recvbuff, size_t count, int datatype, int op, void *comm, void *stream))     \
  X(ncclAllGather, "ncclAllGather", NULL, true, hk_nccl_result_t,                                            \
    (const void *sendbuff, void *recvbuff, size_t sendcount, int datatype, void *comm, void *stream))         \
  X(ncclCommCount, "ncclCommCount", NULL, true, hk_nccl_result_t, (const void *comm, int *count))             \
  X(ncclCommUserRank, "ncclCommUserRank", NULL, true, hk_nccl_result_t, (const void *comm, int *rank))        \
  X(ncclGetErrorString, "ncclGetErrorString", NULL, true, const char *, (hk_nccl_result_t result))
typedef struct hk_nccl_symbols {
  HK_NCCL_SYMBOLS(HK_NCCL_SYMBOL_MEMBER)
} hk_nccl_symbols_t;
/* Makes tensor-parallel CUDA sessions use `table` instead of libnccl.so.2 (a fake in a test);
 * NULL goes back to dlopen. Not thread-safe. */
void hk_nccl_override_symbols(const hk_nccl_symbols_t *table);
/* The same for tensor-parallel HIP sessions and librccl.so.1 (RCCL has NCCL's calls). */
void hk_rccl_override_symbols(const hk_nccl_symbols_t *table);

/* Graph edges (cuGraphAddDependencies_v2, CUDA 12.3+): CUgraphEdgeData, 8 bytes. A
 * programmatic edge leaves the upstream kernel node from its programmatic port (it fires
 * when every block of the upstream kernel has triggered launch_dependents or exited) and has
 * type CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC; to_port must be 0, reserved zero. Both ends
 * must be kernel nodes. */
#define HK_CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC 1
#define HK_CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC 1
typedef struct hk_cu_graph_edge_data {
  unsigned char from_port;
  unsigned char to_port;
  unsigned char type;
  unsigned char reserved[5];
} hk_cu_graph_edge_data_t;
_Static_assert(sizeof(hk_cu_graph_edge_data_t) == 8, "CUgraphEdgeData is 8 bytes");
_Static_assert(sizeof(hk_cu_launch_attribute_value_t) == 64, "CUlaunchAttributeValue is 64 bytes");
_Static_assert(offsetof(hk_cu_launch_attribute_t, value) == 8, "CUlaunchAttribute.value follows 8 bytes");

/* X(member, symbol, alternative symbol or NULL, required, return type, parameters) */
#define HK_CUDA_SYMBOLS(X)                                                                                     \
  X(cuInit, "cuInit", NULL, true, hk_cu_result_t, (unsigned int flags))                                             \
  X(cuDeviceGetCount, "cuDeviceGetCount", NULL, true, hk_cu_result_t, (int *count))                                 \
  X(cuDeviceGet, "cuDeviceGet", NULL, true, hk_cu_result_t, (hk_cu_device_t * device, int ordinal))                       \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL, true, hk_cu_result_t, (int *value, int attrib, hk_cu_device_t dev)) \
  X(cuDeviceGetName, "cuDeviceGetName", NULL, true, hk_cu_result_t, (char *name, int len, hk_cu_device_t dev))            \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL, true, hk_cu_result_t, (hk_cu_context_t * ctx, hk_cu_device_t dev)) \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease", true, hk_cu_result_t,   \
    (hk_cu_device_t dev))                                                                                            \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", NULL, true, hk_cu_result_t, (hk_cu_context_t ctx))                                \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", NULL, true, hk_cu_result_t, (hk_cu_context_t * ctx))                              \
  X(cuCtxSynchronize, "cuCtxSynchronize", NULL, true, hk_cu_result_t, (void))                                       \
  X(cuModuleLoadData, "cuModuleLoadData", NULL, true, hk_cu_result_t, (hk_cu_module_t * module, const void *image))       \
  X(cuModuleUnload, "cuModuleUnload", NULL, true, hk_cu_result_t, (hk_cu_module_t module))                                \
  X(cuModuleGetFunction, "cuModuleGetFunction", NULL, true, hk_cu_result_t,                                         \
    (hk_cu_function_t * fn, hk_cu_module_t module, const char *name))                                                      \
  X(cuMemAlloc, "cuMemAlloc_v2", NULL, true, hk_cu_result_t, (hk_cu_deviceptr_t * ptr, size_t bytes))                     \
  X(cuMemFree, "cuMemFree_v2", NULL, true, hk_cu_result_t, (hk_cu_deviceptr_t ptr))                                       \
  X(cuMemcpyHtoD, "cuMemcpyHtoD_v2", NULL, true, hk_cu_result_t, (hk_cu_deviceptr_t dst, const void *src, size_t bytes))  \
  X(cuMemcpyDtoH, "cuMemcpyDtoH_v2", NULL, true, hk_cu_result_t, (void *dst, hk_cu_deviceptr_t src, size_t bytes))        \
  X(cuMemcpyDtoD, "cuMemcpyDtoD_v2", NULL, true, hk_cu_result_t, (hk_cu_deviceptr_t dst, hk_cu_deviceptr_t src, size_t bytes))  \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", NULL, true, hk_cu_result_t,                                         \
    (hk_cu_deviceptr_t dst, hk_cu_deviceptr_t src, size_t bytes, hk_cu_stream_t stream))                             \
  X(cuMemsetD8Async, "cuMemsetD8Async", NULL, true, hk_cu_result_t,                                                 \
    (hk_cu_deviceptr_t dst, unsigned char value, size_t count, hk_cu_stream_t stream))                               \
  X(cuLaunchKernel, "cuLaunchKernel", NULL, true, hk_cu_result_t,                                                   \
    (hk_cu_function_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,        \
     unsigned int bz, unsigned int shared, hk_cu_stream_t stream, void **params, void **extra))                      \
  X(cuStreamSynchronize, "cuStreamSynchronize", NULL, true, hk_cu_result_t, (hk_cu_stream_t stream))                      \
  X(cuGetErrorName, "cuGetErrorName", NULL, true, hk_cu_result_t, (hk_cu_result_t error, const char **str))               \
  X(cuGetErrorString, "cuGetErrorString", NULL, true, hk_cu_result_t, (hk_cu_result_t error, const char **str))           \
  /* graphs: optional; without them (or when they fail) sessions launch on the stream */                      \
  X(cuGraphCreate, "cuGraphCreate", NULL, false, hk_cu_result_t, (hk_cu_graph_t * graph, unsigned int flags))             \
  X(cuGraphAddKernelNode_v2, "cuGraphAddKernelNode_v2", NULL, false, hk_cu_result_t,                                \
    (hk_cu_graph_node_t * node, hk_cu_graph_t graph, const hk_cu_graph_node_t *deps, size_t ndeps,                                 \
     const hk_cu_kernel_node_params_v2_t *params))                                                             \
  X(cuGraphAddKernelNode, "cuGraphAddKernelNode", NULL, false, hk_cu_result_t,                                      \
    (hk_cu_graph_node_t * node, hk_cu_graph_t graph, const hk_cu_graph_node_t *deps, size_t ndeps,                                 \
     const hk_cu_kernel_node_params_v1_t *params))                                                             \
  X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", NULL, false, hk_cu_result_t,                        \
    (hk_cu_graph_exec_t * exec, hk_cu_graph_t graph, unsigned long long flags))                                             \
  X(cuGraphInstantiate_v2, "cuGraphInstantiate_v2", NULL, false, hk_cu_result_t,                                    \
    (hk_cu_graph_exec_t * exec, hk_cu_graph_t graph, hk_cu_graph_node_t * error_node, char *log, size_t log_size))                \
  X(cuGraphLaunch, "cuGraphLaunch", NULL, false, hk_cu_result_t, (hk_cu_graph_exec_t exec, hk_cu_stream_t stream))               \
  X(cuGraphExecKernelNodeSetParams_v2, "cuGraphExecKernelNodeSetParams_v2", NULL, false, hk_cu_result_t,            \
    (hk_cu_graph_exec_t exec, hk_cu_graph_node_t node, const hk_cu_kernel_node_params_v2_t *params))                         \
  X(cuGraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams", NULL, false, hk_cu_result_t,                  \
    (hk_cu_graph_exec_t exec, hk_cu_graph_node_t node, const hk_cu_kernel_node_params_v1_t *params))                         \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", NULL, false, hk_cu_result_t, (hk_cu_graph_exec_t exec))                      \
  X(cuGraphDestroy, "cuGraphDestroy", NULL, false, hk_cu_result_t, (hk_cu_graph_t graph))                                 \
  X(cuFuncGetAttribute, "cuFuncGetAttribute", NULL, false, hk_cu_result_t, (int *value, int attrib, hk_cu_function_t f)) \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", NULL, false, hk_cu_result_t, (hk_cu_function_t f, int attrib, int value)) \
  /* events: optional; only hk_session_profile needs them (CUDA 13's cuda.h maps the */                      \
  /* plain names of elapsed-time and destroy to their _v2 symbols) */                                        \
  X(cuEventCreate, "cuEventCreate", NULL, false, hk_cu_result_t, (hk_cu_event_t * event, unsigned int flags))      \
  X(cuEventRecord, "cuEventRecord", NULL, false, hk_cu_result_t, (hk_cu_event_t event, hk_cu_stream_t stream))      \
  X(cuEventSynchronize, "cuEventSynchronize", NULL, false, hk_cu_result_t, (hk_cu_event_t event))                  \
  X(cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime", false, hk_cu_result_t,                      \
    (float *ms, hk_cu_event_t start, hk_cu_event_t end))                                                         \
  X(cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy", false, hk_cu_result_t, (hk_cu_event_t event))   \
  /* TMA tensor maps: optional (CUDA 12.0+); only packs with TMAP arguments need it. The */               \
  /* enums (data type, interleave, swizzle, L2 promotion, OOB fill) are C enums: int */                  \
  X(cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled", NULL, false, hk_cu_result_t,                       \
    (hk_cu_tensor_map_t * tensorMap, int dataType, uint32_t rank, void *globalAddress,                    \
     const uint64_t *globalDim, const uint64_t *globalStrides, const uint32_t *boxDim,                    \
     const uint32_t *elementStrides, int interleave, int swizzle, int l2Promotion, int oobFill))           \
  /* programmatic dependent launch: optional; without them PDL launches go the ordinary way */          \
  X(cuLaunchKernelEx, "cuLaunchKernelEx", NULL, false, hk_cu_result_t,                                   \
    (const hk_cu_launch_config_t *config, hk_cu_function_t f, void **params, void **extra))               \
  X(cuGraphAddDependencies_v2, "cuGraphAddDependencies_v2", NULL, false, hk_cu_result_t,                 \
    (hk_cu_graph_t graph, const hk_cu_graph_node_t *from, const hk_cu_graph_node_t *to,                   \
     const hk_cu_graph_edge_data_t *edgeData, size_t numDependencies))                                    \
  /* tensor-parallel sessions: optional; their graph is captured from a stream of their own */          \
  /* (NCCL calls cannot be added as nodes) and all_gather's columns are placed with 2D copies */          \
  X(cuStreamCreate, "cuStreamCreate", NULL, false, hk_cu_result_t, (hk_cu_stream_t * stream, unsigned int flags)) \
  X(cuStreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy", false, hk_cu_result_t, (hk_cu_stream_t stream))       \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", NULL, false, hk_cu_result_t,                        \
    (hk_cu_stream_t stream, int mode))                                                                    \
  X(cuStreamEndCapture, "cuStreamEndCapture", NULL, false, hk_cu_result_t,                               \
    (hk_cu_stream_t stream, hk_cu_graph_t * graph))                                                       \
  X(cuMemcpy2DAsync, "cuMemcpy2DAsync_v2", NULL, false, hk_cu_result_t,                                  \
    (const hk_cu_memcpy2d_t *copy, hk_cu_stream_t stream))

#define HK_GPU_SYMBOL_MEMBER(member, symbol, alt, required, ret, params) ret(*member) params;
typedef struct hk_cuda_symbols {
  HK_CUDA_SYMBOLS(HK_GPU_SYMBOL_MEMBER)
} hk_cuda_symbols_t;

/* See the file comment. table is copied. */
void hk_cuda_override_symbols(const hk_cuda_symbols_t *table);
/* The loaded driver table, or NULL when CUDA is unavailable (benchmarks that drive the
 * driver directly, next to libhkrt, use the same symbols). */
const hk_cuda_symbols_t *hk_cuda_symbols(void);

/* Whether a cubin for target `name` (+ `features`, which must be "") runs on a device of
 * compute capability major.minor: 0 no, else a rank (higher = better).
 *   "sm_XY"  : same major, device minor >= Y (an sm_80 cubin runs on 8.6, not on 9.0)
 *   "sm_XYf" : the same (family-portable, CUDA 12.9+)
 *   "sm_XYa" : exactly X.Y (arch-specific features such as wgmma on sm_90a)
 * Rank: 3 arch-specific exact, 2 exact, 1 an older minor of the same major. */
int hk_cuda_target_rank(const char *name, const char *features, int major, int minor);
/* Whether the PTX of target `name` (virtual architecture compute_XY[a|f]; pack_format.h,
 * hk_ptx_rec_t) JIT-compiles for a device of compute capability major.minor: 0 no, else
 * 10*X+Y (higher = closer to the device).
 *   "sm_XY"  : X.Y <= major.minor (PTX runs on every later GPU)
 *   "sm_XYf" : same major, Y <= minor
 *   "sm_XYa" : exactly X.Y (arch-specific PTX, wgmma/TMA/setmaxnreg, runs nowhere else) */
int hk_cuda_ptx_rank(const char *name, int major, int minor);

/* ---- HIP runtime (libamdhip64.so.6 / .so.5 / .so) -------------------------------- */
typedef int hk_hip_error_t; /* 0 = hipSuccess */
typedef struct ihipModule_t *hk_hip_module_t;
typedef struct ihipModuleSymbol_t *hk_hip_function_t;
typedef struct ihipStream_t *hk_hip_stream_t;
typedef struct ihipGraph *hk_hip_graph_t;
typedef struct hipGraphNode *hk_hip_graph_node_t;
typedef struct hipGraphExec *hk_hip_graph_exec_t;
typedef struct ihipEvent_t *hk_hip_event_t;

#define HK_HIP_SUCCESS 0
#define HK_HIP_ERROR_OUT_OF_MEMORY 2
#define HK_HIP_ERROR_NO_DEVICE 100
#define HK_HIP_MEMCPY_HOST_TO_DEVICE 1
#define HK_HIP_MEMCPY_DEVICE_TO_HOST 2
#define HK_HIP_MEMCPY_DEVICE_TO_DEVICE 3

typedef struct hk_hip_dim3 {
  uint32_t x, y, z;
} hk_hip_dim3_t;

/* hipKernelNodeParams (ROCm 5.x and 6.x: unchanged) */
typedef struct hk_hip_kernel_node_params {
  hk_hip_dim3_t blockDim;
  void **extra;
  void *func;
  hk_hip_dim3_t gridDim;
  void **kernelParams;
  unsigned int sharedMemBytes;
} hk_hip_kernel_node_params_t;

/* Bytes handed to hipGetDeviceProperties*: far more than any hipDeviceProp_t (ROCm 5.2:
 * 792 bytes; ROCm 6's R0600 layout ~1.5 KB), so a newer, larger layout cannot overrun it. */
#define HK_HIP_PROPS_BUFFER 16384u

#define HK_HIP_SYMBOLS(X)                                                                                      \
  X(hipInit, "hipInit", NULL, true, hk_hip_error_t, (unsigned int flags))                                         \
  X(hipGetDeviceCount, "hipGetDeviceCount", NULL, true, hk_hip_error_t, (int *count))                             \
  X(hipSetDevice, "hipSetDevice", NULL, true, hk_hip_error_t, (int device))                                       \
  X(hipGetDevice, "hipGetDevice", NULL, true, hk_hip_error_t, (int *device))                                      \
  /* ROCm 6 has the R0600 layout under its own name; ROCm 5 only the plain one */                              \
  X(hipGetDeviceProperties, "hipGetDevicePropertiesR0600", "hipGetDeviceProperties", true, hk_hip_error_t,        \
    (void *props, int device))                                                                                 \
  X(hipModuleLoadData, "hipModuleLoadData", NULL, true, hk_hip_error_t, (hk_hip_module_t * module, const void *image)) \
  X(hipModuleUnload, "hipModuleUnload", NULL, true, hk_hip_error_t, (hk_hip_module_t module))                         \
  X(hipModuleGetFunction, "hipModuleGetFunction", NULL, true, hk_hip_error_t,                                     \
    (hk_hip_function_t * fn, hk_hip_module_t module, const char *name))                                                \
  X(hipMalloc, "hipMalloc", NULL, true, hk_hip_error_t, (void **ptr, size_t bytes))                               \
  X(hipFree, "hipFree", NULL, true, hk_hip_error_t, (void *ptr))                                                  \
  X(hipMemcpy, "hipMemcpy", NULL, true, hk_hip_error_t, (void *dst, const void *src, size_t bytes, int kind))     \
  X(hipMemcpyAsync, "hipMemcpyAsync", NULL, true, hk_hip_error_t,                                                 \
    (void *dst, const void *src, size_t bytes, int kind, hk_hip_stream_t stream))                                 \
  X(hipMemsetAsync, "hipMemsetAsync", NULL, true, hk_hip_error_t, (void *dst, int value, size_t bytes, hk_hip_stream_t stream)) \
  X(hipModuleLaunchKernel, "hipModuleLaunchKernel", NULL, true, hk_hip_error_t,                                   \
    (hk_hip_function_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,     \
     unsigned int bz, unsigned int shared, hk_hip_stream_t stream, void **params, void **extra))                   \
  X(hipStreamSynchronize, "hipStreamSynchronize", NULL, true, hk_hip_error_t, (hk_hip_stream_t stream))               \
  X(hipDeviceSynchronize, "hipDeviceSynchronize", NULL, true, hk_hip_error_t, (void))                             \
  X(hipGetErrorName, "hipGetErrorName", NULL, true, const char *, (hk_hip_error_t error))                         \
  X(hipGetErrorString, "hipGetErrorString", NULL, true, const char *, (hk_hip_error_t error))                     \
  X(hipGraphCreate, "hipGraphCreate", NULL, false, hk_hip_error_t, (hk_hip_graph_t * graph, unsigned int flags))      \
  X(hipGraphAddKernelNode, "hipGraphAddKernelNode", NULL, false, hk_hip_error_t,                                  \
    (hk_hip_graph_node_t * node, hk_hip_graph_t graph, const hk_hip_graph_node_t *deps, size_t ndeps,                        \
     const hk_hip_kernel_node_params_t *params))                                                               \
  X(hipGraphInstantiate, "hipGraphInstantiate", NULL, false, hk_hip_error_t,                                      \
    (hk_hip_graph_exec_t * exec, hk_hip_graph_t graph, hk_hip_graph_node_t * error_node, char *log, size_t log_size))       \
  X(hipGraphLaunch, "hipGraphLaunch", NULL, false, hk_hip_error_t, (hk_hip_graph_exec_t exec, hk_hip_stream_t stream))     \
  X(hipGraphExecKernelNodeSetParams, "hipGraphExecKernelNodeSetParams", NULL, false, hk_hip_error_t,              \
    (hk_hip_graph_exec_t exec, hk_hip_graph_node_t node, const hk_hip_kernel_node_params_t *params))                     \
  X(hipGraphExecDestroy, "hipGraphExecDestroy", NULL, false, hk_hip_error_t, (hk_hip_graph_exec_t exec))               \
  X(hipGraphDestroy, "hipGraphDestroy", NULL, false, hk_hip_error_t, (hk_hip_graph_t graph))                    \
  /* events: optional; only hk_session_profile needs them */                                                  \
  X(hipEventCreate, "hipEventCreate", NULL, false, hk_hip_error_t, (hk_hip_event_t * event))                     \
  X(hipEventRecord, "hipEventRecord", NULL, false, hk_hip_error_t, (hk_hip_event_t event, hk_hip_stream_t stream)) \
  X(hipEventSynchronize, "hipEventSynchronize", NULL, false, hk_hip_error_t, (hk_hip_event_t event))             \
  X(hipEventElapsedTime, "hipEventElapsedTime", NULL, false, hk_hip_error_t,                                     \
    (float *ms, hk_hip_event_t start, hk_hip_event_t stop))                                                    \
  X(hipEventDestroy, "hipEventDestroy", NULL, false, hk_hip_error_t, (hk_hip_event_t event))                      \
  /* tensor-parallel sessions: optional (stream capture; all_gather's 2D copies) */                          \
  X(hipStreamCreateWithFlags, "hipStreamCreateWithFlags", NULL, false, hk_hip_error_t,                           \
    (hk_hip_stream_t * stream, unsigned int flags))                                                            \
  X(hipStreamDestroy, "hipStreamDestroy", NULL, false, hk_hip_error_t, (hk_hip_stream_t stream))                 \
  X(hipStreamBeginCapture, "hipStreamBeginCapture", NULL, false, hk_hip_error_t, (hk_hip_stream_t stream, int mode)) \
  X(hipStreamEndCapture, "hipStreamEndCapture", NULL, false, hk_hip_error_t,                                    \
    (hk_hip_stream_t stream, hk_hip_graph_t * graph))                                                          \
  X(hipMemcpy2DAsync, "hipMemcpy2DAsync", NULL, false, hk_hip_error_t,                                          \
    (void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, int kind,          \
     hk_hip_stream_t stream))
#define HK_HIP_STREAM_NON_BLOCKING 1
#define HK_HIP_STREAM_CAPTURE_MODE_RELAXED 2

typedef struct hk_hip_symbols {
  HK_HIP_SYMBOLS(HK_GPU_SYMBOL_MEMBER)
} hk_hip_symbols_t;

void hk_hip_override_symbols(const hk_hip_symbols_t *table);

/* Whether code for target `name` + `features` (a name may carry features itself,
 * "gfx90a:xnack-"; `features` is "xnack-" or "sramecc+:xnack-" or "") runs on a device
 * whose ISA is `device_isa` ("gfx90a:sramecc+:xnack-"): 0 no, 2 exact (every feature
 * the device reports is pinned to the device's value), 1 compatible (same processor,
 * no pinned feature contradicts the device; unpinned = "any"). A feature the device does
 * not report cannot be pinned. */
int hk_hip_target_rank(const char *name, const char *features, const char *device_isa);

/* Finds the ISA name ("gfx90a:sramecc+:xnack-") in the bytes of a hipDeviceProp_t of any
 * layout: the longest NUL-terminated string that matches gfx<hex>(:<feature>[+-])* at
 * any offset. False when there is none. */
bool hk_hip_find_arch_name(const void *props, size_t size, char *out, size_t out_size);

/* ---- code objects (gpu_image.c) ------------------------------------------------------- */
/* Checks that [image, image + size) holds a GPU code object whose own tables stay inside
 * it, before a driver that trusts the object's headers reads it: a little-endian ELF64
 * of `machine` (HK_EM_CUDA, HK_EM_AMDGPU in image_internal.h; 0: any) with its program and
 * section headers, every section's and loadable segment's bytes in range
 * (hk_elf_image_ok), or (allow_bundle) a clang offload bundle whose entries are in range.
 * False with a short reason in *out_why. */
bool hk_gpu_image_ok(const void *image, size_t size, bool allow_bundle, uint16_t machine, const char **out_why);
/* Whether text[0, size) is one PTX module's text: NUL-terminated at its last byte and nowhere
 * before, and not empty. */
bool hk_ptx_text_ok(const void *text, size_t size, const char **out_why);

#endif /* HK_GPU_INTERNAL_H */
