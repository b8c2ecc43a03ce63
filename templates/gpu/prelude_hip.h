/* SPDX-License-Identifier: Apache-2.0 */
/*
 * templates/gpu/prelude_hip.h -- the AMD vendor layer of the GPU kernel templates
 * (compiled by hiprtc, which pre-includes its own runtime, fp16 and math headers, so
 * this source includes no header at all: a second copy of hip headers breaks hiprtc).
 *
 * The code generator emits, in this order: the parameter macros of one kernel (HK_NAME,
 * HK_T, HK_LOAD, HK_STORE, HK_WAVE, tile sizes, ...), this prelude, common.h, then one
 * op template from templates/gpu/<op>.hip.
 *
 * HK_WAVE is the wavefront size the code is compiled for: 64 on CDNA (gfx9xx), 32 on
 * RDNA (gfx10xx/gfx11xx, where hiprtc compiles wave32 unless -mwavefrontsize64 is
 * given). The code generator sets it from hkc_gpu_arch_t.wave_size; the reductions in
 * common.h work in groups of 32 lanes, so they are right for either size.
 *
 * Storage types: f32 is float; f16 and bf16 are `unsigned short` bit patterns, converted
 * to f32 on load and rounded to nearest even on store. All arithmetic is in f32.
 */
#ifndef HK_WAVE
#define HK_WAVE 64 /* CDNA wavefronts */
#endif

#define HK_GLOBAL extern "C" __global__
#define HK_DEVICE static __device__ __forceinline__
/* kept inline on AMD: an out-of-line call needs a stack (scratch) there */
#define HK_DEVICE_OUTLINED HK_DEVICE
#define HK_SHARED __shared__
#define HK_LAUNCH_BOUNDS(n) __launch_bounds__(n)
#define HK_PDL_ENTRY() ((void)0) /* no programmatic dependent launch on AMD (prelude_cuda.h) */
#define HK_SYNC() __syncthreads()
#define HK_TID ((int)threadIdx.x)
/* 16 bytes moved as one load or store (a copy's unit; the elements are the user's business) */
typedef unsigned hk_v16_t __attribute__((ext_vector_type(4)));
#define HK_NTHREADS ((int)blockDim.x)
#define HK_BID ((long long)blockIdx.x)
#define HK_NBLOCKS ((long long)gridDim.x)

HK_DEVICE float hk_shfl_xor(float v, int mask) { return __shfl_xor(v, mask); }

HK_DEVICE float hk_inf(void) { return __uint_as_float(0x7f800000u); }

/* ---- element conversions ---------------------------------------------------------------- */
HK_DEVICE float hk_f32_load(float x) { return x; }
HK_DEVICE float hk_f32_store(float x) { return x; }

/* _Float16 conversions are exact (load) and round to nearest even (store). */
HK_DEVICE float hk_f16_to_f32(unsigned short h) { return (float)__builtin_bit_cast(_Float16, h); }
HK_DEVICE unsigned short hk_f32_to_f16(float f) { return __builtin_bit_cast(unsigned short, (_Float16)f); }

HK_DEVICE float hk_bf16_to_f32(unsigned short h) { return __uint_as_float((unsigned)h << 16); }

HK_DEVICE unsigned short hk_f32_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even; overflow carries into inf */
  return (unsigned short)(u >> 16);
}
