/* SPDX-License-Identifier: Apache-2.0 */
/*
 * templates/gpu/prelude_cuda.h -- the NVIDIA vendor layer of the GPU kernel templates
 * (compiled by nvrtc; no headers: nvrtc has the CUDA math functions built in).
 *
 * The code generator emits, in this order: the parameter macros of one kernel (HK_NAME,
 * HK_T, HK_LOAD, HK_STORE, HK_WAVE, tile sizes, ...), this prelude, common.h, then one
 * op template from templates/gpu/<op>.hip.
 *
 * Storage types: f32 is float; f16 and bf16 are `unsigned short` bit patterns, converted
 * to f32 on load and rounded to nearest even on store. All arithmetic is in f32.
 */
#ifndef HK_WAVE
#define HK_WAVE 32 /* NVIDIA warps */
#endif

/* helpers a kernel does not use are expected: no "declared but never referenced" */
#pragma nv_diag_suppress 177

#define HK_GLOBAL extern "C" __global__
#define HK_DEVICE static __device__ __forceinline__
/* a device function kept out of line: ptxas allocates its registers apart from its caller's */
#define HK_DEVICE_OUTLINED static __device__ __noinline__
#define HK_SHARED __shared__
#define HK_LAUNCH_BOUNDS(n) __launch_bounds__(n, 1) /* min 1 block: ptxas may use up to 65536/n registers */
#define HK_SYNC() __syncthreads()
/* Programmatic dependent launch (sm_90 and later): the first statement of the kernels whose
 * variant is marked pdl (codegen/variants/variant.h) and that touch nothing before it. It waits
 * until the launches this one depends on have completed and their writes are visible (a no-op
 * for an ordinary launch), then lets the next launch of the graph put its blocks on the SMs,
 * where they wait in turn: a chain of small kernels pays the launch gap once, not per kernel. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define HK_PDL_ENTRY() asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;\n" ::: "memory")
#else
#define HK_PDL_ENTRY() ((void)0)
#endif
#define HK_TID ((int)threadIdx.x)
/* 16 bytes moved as one load or store (a copy's unit; the elements are the user's business) */
typedef uint4 hk_v16_t;
#define HK_NTHREADS ((int)blockDim.x)
#define HK_BID ((long long)blockIdx.x)
#define HK_NBLOCKS ((long long)gridDim.x)

HK_DEVICE float hk_shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }

HK_DEVICE float hk_inf(void) { return __int_as_float(0x7f800000); }

/* ---- element conversions ---------------------------------------------------------------- */
HK_DEVICE float hk_f32_load(float x) { return x; }
HK_DEVICE float hk_f32_store(float x) { return x; }

HK_DEVICE float hk_f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

HK_DEVICE unsigned short hk_f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

HK_DEVICE float hk_bf16_to_f32(unsigned short h) { return __uint_as_float((unsigned)h << 16); }

HK_DEVICE unsigned short hk_f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflow carries into inf */
  return (unsigned short)(u >> 16);
#endif
}
