/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/emu/amd_emu.h -- a CPU emulation of the HIP/CDNA features the AMD MFMA templates use,
 * to run a generated kernel's source (hkc_codegen_gpu) on the host: one thread per lane,
 * blocks one after another. Included (C++, clang) before the generated source, whose prelude
 * and tile library then compile unchanged except for what is defined here:
 *   - threadIdx/blockIdx/blockDim/gridDim, __syncthreads and s_barrier: a barrier of the block;
 *   - MFMA 32x32x8 f16 / bf16_1k and gfx908's 32x32x4 bf16: wave collectives computing the
 *     operand and result layouts that tile_amd.h documents (from AMD's ISA guides);
 *   - atomicAdd (64-bit, shared memory; 32-bit, global counters), atomicExch: plain read-modify-
 *     writes, atomic since lanes switch only at barriers and blocks run one after another;
 *     __threadfence: nothing to order;
 *   - readfirstlane: lane 0's value, and an error unless every lane passed the same value
 *     (the kernels only use it on values that must be wave-uniform); __shfl_xor over the wave;
 *   - raw buffer loads and buffer loads into LDS (buffer_load_dword ... lds): out-of-range
 *     offsets (offset + size > num_records) read zeros; a load in range that falls outside
 *     every tensor the harness registered is an error (a wrong resource would read foreign
 *     memory on the device). Copies into LDS land at once (HK_EMU_LATE=0) or only at the
 *     issuing lane's s_waitcnt vmcnt(0) (HK_EMU_LATE=1): a kernel that reads a copy before
 *     waiting for it, or overwrites LDS another wave still needs, can then go wrong.
 * This checks index arithmetic and layouts, not timing: a race is caught only if the
 * interleaving of a seed exposes it. Nothing here is a model of speed.
 */
#ifndef HK_EMU_H
#define HK_EMU_H
#include <math.h>
#include <setjmp.h>
#include <ucontext.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HK_EMU_MAX_THREADS 512
#define HK_EMU_MAX_WAVES (HK_EMU_MAX_THREADS / 64)

struct hk_emu_dim3 {
  unsigned x, y, z;
};
/* one lane: its coroutine and its copies into LDS that wait for s_waitcnt (HK_EMU_LATE=1) */
struct hk_emu_copy {
  void *dst;
  uint32_t v;
};
/* A lane enters its coroutine once through setcontext (makecontext's stack) and switches
 * afterwards with _setjmp/_longjmp, which leave the signal mask alone: swapcontext makes two
 * sigprocmask system calls per switch, which cost more than the emulated arithmetic. */
struct hk_emu_lane_t {
  ucontext_t ctx;
  jmp_buf jb;
  int started;
  hk_emu_dim3 tid, bid;
  int waiting; /* at a barrier */
  int done;
  hk_emu_copy pending[256];
  int n_pending;
};
static hk_emu_lane_t *hk_emu_cur;
static hk_emu_dim3 blockDim, gridDim;
#define threadIdx (hk_emu_cur->tid)
#define blockIdx (hk_emu_cur->bid)

/* the HIP vocabulary of the prelude */
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static /* one block runs at a time: its threads share the function's statics */
static inline float __fdividef(float a, float b) { return a / b; } /* the device's fast division (common.h) */
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); } /* the device's reciprocal square root (folded norms) */
static inline float __int_as_float(int i) { return __builtin_bit_cast(float, i); }
#if defined(__clang_major__) && __clang_major__ < 15
/* clang 14 has no _Float16 on x86; __fp16 converts the same way, through these helpers */
#define _Float16 __fp16
extern "C" float __gnu_h2f_ieee(unsigned short h) {
  const unsigned sign = (unsigned)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return __builtin_bit_cast(float, sign | 0x7f800000u | (m << 13));
  if (e) return __builtin_bit_cast(float, sign | ((e + 112) << 23) | (m << 13));
  const float v = (float)m * (1.0f / 16777216.0f); /* subnormal: m 2^-24 */
  return sign ? -v : v;
}
extern "C" unsigned short __gnu_f2h_ieee(float f) { /* round to nearest even */
  const unsigned u = __builtin_bit_cast(unsigned, f), sign = (u >> 16) & 0x8000u;
  const unsigned a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u); /* rounds to inf */
  if (a < 0x38800000u) {                                         /* f16 subnormal or zero */
    const float r = __builtin_bit_cast(float, a) * 16777216.0f;  /* exact scaling by 2^24 */
    return (unsigned short)(sign | (unsigned)__builtin_rintf(r));
  }
  const unsigned e = (a >> 23) - 112, m = a & 0x7fffff;
  unsigned h = (e << 10) | (m >> 13);
  const unsigned rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
  return (unsigned short)(sign | h);
}
#endif
#define __asm(name) /* the LLVM intrinsics declared by name become the functions below */
static inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline int __float_as_int(float f) {
  int i;
  memcpy(&i, &f, 4);
  return i;
}
static inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
/* atomicAdd on shared memory (sample's histograms): lanes switch only at barriers, so a plain
 * read-modify-write is atomic here */
static inline unsigned long long atomicAdd(unsigned long long *p, unsigned long long v) {
  const unsigned long long old = *p;
  *p = old + v;
  return old;
}
/* on global memory (split kernels' tile counters): blocks run one after another here, so the
 * last block of a tile in launch order is the one that sees every arrival */
static inline unsigned atomicAdd(unsigned *p, unsigned v) {
  const unsigned old = *p;
  *p = old + v;
  return old;
}
static inline unsigned atomicExch(unsigned *p, unsigned v) {
  const unsigned old = *p;
  *p = v;
  return old;
}
static inline void __threadfence(void) {} /* one block at a time: its stores are every block's */
#define HK_PIN_DEF(x) ((void)0)
#define HK_PIN_USE(x) ((void)0)

/* ---- block and wave synchronisation: a barrier parks the lane and runs another --------- */
static hk_emu_lane_t hk_emu_lanes[HK_EMU_MAX_THREADS];
static unsigned hk_emu_n_lanes;
static jmp_buf hk_emu_sched;
static inline unsigned hk_emu_lane(void) { return threadIdx.x % 64; }
static inline unsigned hk_emu_wave(void) { return threadIdx.x / 64; }
static inline void hk_emu_fail(const char *what) {
  fprintf(stderr, "emu: block %u thread %u: %s\n", blockIdx.x, threadIdx.x, what);
  abort();
}
/* The lanes that may run (not parked at a barrier, not finished), in no order. */
static unsigned hk_emu_runnable[HK_EMU_MAX_THREADS], hk_emu_n_runnable;
static void hk_emu_make_runnable(unsigned t) { hk_emu_runnable[hk_emu_n_runnable++] = t; }
/* A barrier over lanes [first, first + n): the last to arrive releases the others. */
struct hk_emu_barrier {
  unsigned arrived;
};
static hk_emu_barrier hk_emu_block_bar, hk_emu_wave_bar[HK_EMU_MAX_WAVES];
static void hk_emu_barrier_wait(hk_emu_barrier *b, unsigned first, unsigned n) {
  if (++b->arrived == n) {
    b->arrived = 0;
    for (unsigned i = first; i < first + n; i++)
      if (hk_emu_lanes[i].waiting) {
        hk_emu_lanes[i].waiting = 0;
        hk_emu_make_runnable(i);
      }
    return;
  }
  hk_emu_cur->waiting = 1;
  if (!_setjmp(hk_emu_cur->jb)) _longjmp(hk_emu_sched, 1); /* back when released and drawn again */
}
static inline void hk_emu_wave_sync(void) {
  hk_emu_barrier_wait(&hk_emu_wave_bar[hk_emu_wave()], 64 * hk_emu_wave(), 64);
}
static inline void hk_emu_block_sync(void) { hk_emu_barrier_wait(&hk_emu_block_bar, 0, hk_emu_n_lanes); }

static int hk_emu_late;
static inline void hk_emu_land(void) {
  for (int i = 0; i < hk_emu_cur->n_pending; i++) memcpy(hk_emu_cur->pending[i].dst, &hk_emu_cur->pending[i].v, 4);
  hk_emu_cur->n_pending = 0;
}
static inline void __syncthreads(void) { hk_emu_block_sync(); }
static inline void __builtin_amdgcn_s_barrier(void) { hk_emu_block_sync(); }
static inline void __builtin_amdgcn_s_waitcnt(int imm) {
  if ((imm & 0xf) == 0 && (imm & 0xc000) == 0) hk_emu_land(); /* vmcnt(0) in the gfx9 encoding */
}
static inline void __builtin_amdgcn_s_setprio(int) {}
static inline void __builtin_amdgcn_sched_barrier(int) {}

/* lane 0's value; every lane must pass the same */
static uint64_t hk_emu_rfl_slot[HK_EMU_MAX_WAVES];
static inline uint64_t hk_emu_first_lane(uint64_t v) {
  if (hk_emu_lane() == 0) hk_emu_rfl_slot[hk_emu_wave()] = v;
  hk_emu_wave_sync();
  const uint64_t r = hk_emu_rfl_slot[hk_emu_wave()];
  hk_emu_wave_sync();
  if (r != v) hk_emu_fail("readfirstlane of a value that differs between lanes");
  return r;
}
static inline int __builtin_amdgcn_readfirstlane(int v) { return (int)hk_emu_first_lane((uint32_t)v); }

/* __shfl_xor (the attention kernels' softmax): lane l reads lane l ^ mask's value, a wave
 * collective (every lane of the wave takes part, as on the device with a full exec mask). */
static float hk_emu_shfl_slot[HK_EMU_MAX_WAVES][64];
static inline float __shfl_xor(float v, int mask, int width = 64) {
  if (width != 64 || mask < 0 || mask >= 64) hk_emu_fail("__shfl_xor: width or mask outside the wave");
  hk_emu_shfl_slot[hk_emu_wave()][hk_emu_lane()] = v;
  hk_emu_wave_sync();
  const float r = hk_emu_shfl_slot[hk_emu_wave()][hk_emu_lane() ^ (unsigned)mask];
  hk_emu_wave_sync();
  return r;
}

/* ---- memory the kernel may read through buffer resources -------------------------------- */
struct hk_emu_region {
  const char *base;
  size_t bytes;
};
static hk_emu_region hk_emu_regions[8];
static int hk_emu_n_regions;
static inline void hk_emu_register(const void *p, size_t bytes) {
  hk_emu_regions[hk_emu_n_regions++] = hk_emu_region{(const char *)p, bytes};
}
static inline void hk_emu_check_read(const char *p, size_t n) {
  for (int i = 0; i < hk_emu_n_regions; i++)
    if (p >= hk_emu_regions[i].base && p + n <= hk_emu_regions[i].base + hk_emu_regions[i].bytes) return;
  hk_emu_fail("buffer load in range of its resource but outside every tensor");
}

typedef int hk_emu_i32x4 __attribute__((ext_vector_type(4)));
/* the V# fields the kernels set: base[47:0] in x and y[15:0], num_records in z */
static inline const char *hk_emu_rsrc_base(hk_emu_i32x4 r) {
  return (const char *)(uintptr_t)((uint64_t)(uint32_t)r.x | ((uint64_t)((uint32_t)r.y & 0xffffu) << 32));
}
static inline int hk_emu_in_range(hk_emu_i32x4 r, int voffset, unsigned size) {
  return (uint64_t)(uint32_t)voffset + size <= (uint64_t)(uint32_t)r.z;
}

void hk_llvm_raw_buffer_load_lds(hk_emu_i32x4 rsrc, __attribute__((address_space(3))) void *lds, int size, int voffset,
                                 int soffset, int offset, int aux) {
  if (size != 4 || soffset != 0 || offset != 0 || aux != 0) hk_emu_fail("unexpected buffer_load ... lds operands");
  /* M0 (the LDS base) and the resource are wave-uniform on the device */
  char *dst = (char *)(uintptr_t)hk_emu_first_lane((uint64_t)(uintptr_t)(void *)lds) + 4 * hk_emu_lane();
  for (int i = 0; i < 4; i++) hk_emu_first_lane((uint32_t)rsrc[i]);
  uint32_t v = 0;
  if (hk_emu_in_range(rsrc, voffset, 4)) {
    const char *src = hk_emu_rsrc_base(rsrc) + (uint32_t)voffset;
    hk_emu_check_read(src, 4);
    memcpy(&v, src, 4);
  }
  if (!hk_emu_late) {
    memcpy(dst, &v, 4);
  } else {
    if (hk_emu_cur->n_pending == 256) hk_emu_fail("too many copies in flight");
    hk_emu_cur->pending[hk_emu_cur->n_pending++] = hk_emu_copy{dst, v};
  }
}

hk_emu_i32x4 hk_llvm_raw_buffer_load_v4i32(hk_emu_i32x4 rsrc, int voffset, int soffset, int aux) {
  if (soffset != 0 || aux != 0) hk_emu_fail("unexpected buffer_load operands");
  for (int i = 0; i < 4; i++) hk_emu_first_lane((uint32_t)rsrc[i]);
  hk_emu_i32x4 v = {0, 0, 0, 0};
  if (hk_emu_in_range(rsrc, voffset, 16)) {
    const char *src = hk_emu_rsrc_base(rsrc) + (uint32_t)voffset;
    hk_emu_check_read(src, 16);
    memcpy(&v, src, 16);
  }
  return v;
}

/* ---- MFMA: D = A B + C for one wave, operands and results as tile_amd.h documents ---------
 * 32x32xK: lane l holds A[l % 32][KL (l / 32) + j] and B[KL (l / 32) + j][l % 32], j < KL
 * (KL = 4 for 32x32x8, 2 for gfx908's 32x32x4 bf16), and C value r of lane l is
 * C[8 (r / 4) + 4 (l / 32) + r % 4][l % 32]. */
typedef float hk_emu_f32x16 __attribute__((ext_vector_type(16)));
static float hk_emu_opa[HK_EMU_MAX_WAVES][64][4], hk_emu_opb[HK_EMU_MAX_WAVES][64][4];

static hk_emu_f32x16 hk_emu_mfma32(const float *a, const float *b, int kl, hk_emu_f32x16 c) {
  const unsigned w = hk_emu_wave(), l = hk_emu_lane();
  for (int j = 0; j < kl; j++) {
    hk_emu_opa[w][l][j] = a[j];
    hk_emu_opb[w][l][j] = b[j];
  }
  hk_emu_wave_sync();
  for (int r = 0; r < 16; r++) {
    const unsigned row = 8 * (r / 4) + 4 * (l / 32) + r % 4, col = l % 32;
    double s = c[r];
    for (int k = 0; k < 2 * kl; k++) s += (double)hk_emu_opa[w][row + 32 * (k / kl)][k % kl] *
                                          hk_emu_opb[w][col + 32 * (k / kl)][k % kl];
    c[r] = (float)s;
  }
  hk_emu_wave_sync();
  return c;
}
static inline float hk_emu_bf16(short h) { return __uint_as_float((unsigned)(unsigned short)h << 16); }

typedef _Float16 hk_emu_f16x4 __attribute__((ext_vector_type(4)));
typedef short hk_emu_i16x4 __attribute__((ext_vector_type(4)));
typedef short hk_emu_i16x2 __attribute__((ext_vector_type(2)));
static inline hk_emu_f32x16 __builtin_amdgcn_mfma_f32_32x32x8f16(hk_emu_f16x4 a, hk_emu_f16x4 b, hk_emu_f32x16 c, int,
                                                                 int, int) {
  float fa[4], fb[4];
  for (int j = 0; j < 4; j++) fa[j] = (float)a[j], fb[j] = (float)b[j];
  return hk_emu_mfma32(fa, fb, 4, c);
}
static inline hk_emu_f32x16 __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(hk_emu_i16x4 a, hk_emu_i16x4 b, hk_emu_f32x16 c,
                                                                     int, int, int) {
  float fa[4], fb[4];
  for (int j = 0; j < 4; j++) fa[j] = hk_emu_bf16(a[j]), fb[j] = hk_emu_bf16(b[j]);
  return hk_emu_mfma32(fa, fb, 4, c);
}
static inline hk_emu_f32x16 __builtin_amdgcn_mfma_f32_32x32x4bf16(hk_emu_i16x2 a, hk_emu_i16x2 b, hk_emu_f32x16 c, int,
                                                                  int, int) {
  float fa[2], fb[2];
  for (int j = 0; j < 2; j++) fa[j] = hk_emu_bf16(a[j]), fb[j] = hk_emu_bf16(b[j]);
  return hk_emu_mfma32(fa, fb, 2, c);
}
/* the 16x16 forms are not used by the GEMMs */
#define __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, x, y, z) (hk_emu_fail("16x16 MFMA not emulated"), c)
#define __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, x, y, z) (hk_emu_fail("16x16 MFMA not emulated"), c)
#define __builtin_amdgcn_mfma_f32_16x16x8bf16(a, b, c, x, y, z) (hk_emu_fail("16x16 MFMA not emulated"), c)

/* ---- launching: blocks one after another, a coroutine per lane ---------------------------- */
typedef void (*hk_emu_body_t)(void *ctx);
static hk_emu_body_t hk_emu_body;
static void *hk_emu_body_ctx;
static void hk_emu_lane_main(void) {
  hk_emu_body(hk_emu_body_ctx);
  if (hk_emu_cur->n_pending) hk_emu_fail("copies into LDS never waited for");
  hk_emu_cur->done = 1;
  _longjmp(hk_emu_sched, 1); /* a lane's coroutine never returns */
}

static uint64_t hk_emu_sched_rng = 1;
static unsigned hk_emu_draw(unsigned n) { /* xorshift64* */
  hk_emu_sched_rng ^= hk_emu_sched_rng >> 12;
  hk_emu_sched_rng ^= hk_emu_sched_rng << 25;
  hk_emu_sched_rng ^= hk_emu_sched_rng >> 27;
  return (unsigned)((hk_emu_sched_rng * 2685821657736338717ull) >> 33) % n;
}

/* Runs body(ctx) as grid blocks of `threads` lanes; lanes are drawn in a random order
 * (seed) whenever the running one parks at a barrier or ends. */
static void hk_emu_launch(unsigned grid, unsigned threads, uint64_t seed, hk_emu_body_t body, void *ctx) {
  if (threads % 64 || threads > HK_EMU_MAX_THREADS) {
    fprintf(stderr, "emu: block size %u\n", threads);
    abort();
  }
  static char stacks[HK_EMU_MAX_THREADS][1 << 16];
  blockDim = hk_emu_dim3{threads, 1, 1};
  gridDim = hk_emu_dim3{grid, 1, 1};
  hk_emu_body = body;
  hk_emu_body_ctx = ctx;
  hk_emu_n_lanes = threads;
  hk_emu_sched_rng = seed * 0x9E3779B97F4A7C15ull + 1;
  for (unsigned b = 0; b < grid; b++) {
    hk_emu_n_runnable = 0;
    for (unsigned t = 0; t < threads; t++) {
      hk_emu_lane_t *l = &hk_emu_lanes[t];
      l->tid = hk_emu_dim3{t, 0, 0};
      l->bid = hk_emu_dim3{b, 0, 0};
      l->waiting = l->done = l->started = 0;
      l->n_pending = 0;
      getcontext(&l->ctx);
      l->ctx.uc_stack.ss_sp = stacks[t];
      l->ctx.uc_stack.ss_size = sizeof stacks[t];
      l->ctx.uc_link = NULL;
      makecontext(&l->ctx, hk_emu_lane_main, 0);
      hk_emu_make_runnable(t);
    }
    for (unsigned done = 0; done < threads;) {
      if (!hk_emu_n_runnable) {
        fprintf(stderr, "emu: block %u: every lane waits at a barrier the others never reach\n", b);
        abort();
      }
      const unsigned i = hk_emu_draw(hk_emu_n_runnable); /* the drawn lane leaves the list */
      hk_emu_cur = &hk_emu_lanes[hk_emu_runnable[i]];
      hk_emu_runnable[i] = hk_emu_runnable[--hk_emu_n_runnable];
      if (!_setjmp(hk_emu_sched)) {
        if (!hk_emu_cur->started) {
          hk_emu_cur->started = 1;
          setcontext(&hk_emu_cur->ctx);
        }
        _longjmp(hk_emu_cur->jb, 1);
      }
      if (hk_emu_cur->done) done++;
      else if (!hk_emu_cur->waiting) hk_emu_make_runnable((unsigned)(hk_emu_cur - hk_emu_lanes));
    }
  }
}
#endif /* HK_EMU_H */
