/* SPDX-License-Identifier: Apache-2.0 */
/*
 * templates/gpu/tile_amd.h -- the AMD CDNA (gfx908 / gfx90a / gfx942+) tile library:
 * MFMA wrappers, 16-byte global loads, buffer loads and copies straight into LDS, waits,
 * compiler pins and LDS tile helpers. Emitted after prelude_hip.h and common.h, before an
 * MFMA op template (gemm_mfma.hip, gemm_mfma_pp.hip, attention_mfma.hip). Needs
 * wave64 (HK_WAVE == 64) and HK_MFMA_BF16 (0: f16 operands, 1: bf16 operands), both
 * set by the code generator / variant.
 *
 * Storage: f16 and bf16 elements are `unsigned short` bit patterns (as in the prelude);
 * the MFMA wrappers reinterpret them as _Float16 (f16) or short (bf16_1k) vectors.
 *
 * ---- MFMA register layouts (wave64, lane l = 0..63; A is M x K, B is K x N, C/D is M x N) ----
 * Checked against AMD's matrix instruction calculator output and the CDNA3 ISA guide's
 * operand layout figures (section "Dependent-arithmetic / matrix core" layouts); the
 * bf16_1k instructions use the same layout as their f16 counterparts.
 *
 *   v_mfma_f32_16x16x16f16 / v_mfma_f32_16x16x16bf16_1k   (a, b: 4 x 16-bit; c: 4 x f32)
 *     A: lane l holds A[l % 16][4 * (l / 16) + j],          j = 0..3 (a[j])
 *     B: lane l holds B[4 * (l / 16) + j][l % 16],          j = 0..3 (b[j])
 *     C: lane l holds C[4 * (l / 16) + j][l % 16],          j = 0..3 (c[j])
 *
 *   v_mfma_f32_32x32x8f16 / v_mfma_f32_32x32x8bf16_1k     (a, b: 4 x 16-bit; c: 16 x f32)
 *     A: lane l holds A[l % 32][4 * (l / 32) + j],          j = 0..3
 *     B: lane l holds B[4 * (l / 32) + j][l % 32],          j = 0..3
 *     C: lane l holds C[8 * (r / 4) + 4 * (l / 32) + r % 4][l % 32],  r = 0..15 (c[r])
 *
 *   gfx908 bf16 (no _1k): v_mfma_f32_32x32x4bf16 / v_mfma_f32_16x16x8bf16 (a, b: 2 x bf16):
 *     A: lane l holds A[l % 32][2 * (l / 32) + j] (16x16x8: A[l % 16][2 * (l / 16) + j]), j = 0..1,
 *     B likewise, C as above. The wrappers issue two of them, on elements {0, 1} and {2, 3}
 *     of the 4-element operands: since A and B are split the same way, every k of the
 *     k = 8 (16) block is multiplied exactly once, so the result equals the _1k one up
 *     to the order of the f32 additions.
 *
 * So the k index of A and B is the same in a lane, every lane's C values lie in ONE
 * column (l % 16 or l % 32), and for 32x32x8 the four C values r = 4s..4s+3 of a lane
 * are exactly the B values (k = 4 * (l / 32) + j of the k-block 8s..8s+7) that the same
 * lane must supply when that C (transposed: key-major) feeds a following MFMA as its B
 * operand -- attention_mfma.hip uses this to chain S^T = K Q^T into O^T = V^T P^T without
 * moving data between lanes.
 *
 * ---- LDS tiles ----
 * Tiles are k-contiguous (row = m or n, column = k) so that an MFMA operand (4 consecutive
 * k of one row) is one 8-byte ds_read_b64. Rows are padded by HK_LDS_PAD = 8 elements
 * (16 bytes; keeps 16-byte ds_write_b128 stores aligned): with a 32-element k step the row
 * pitch is 40 elements = 20 banks, so the 32 rows read by one MFMA operand fall on
 * distinct bank pairs in each group of 8 lanes instead of all on the same banks (an
 * unpadded 64-byte pitch would put rows r and r + 2 on the same banks).
 */
#if HK_WAVE != 64
#error "tile_amd.h: MFMA kernels need wave64"
#endif
#ifndef HK_MFMA_BF16
#error "tile_amd.h: HK_MFMA_BF16 must be defined (0 = f16, 1 = bf16)"
#endif
/* HK_MFMA_BF16_1K: 1 where the bf16_1k instructions exist (gfx90a and later), 0 on gfx908,
 * which only has the older bf16 MFMAs with half the k per instruction (set by the variant). */
#ifndef HK_MFMA_BF16_1K
#define HK_MFMA_BF16_1K 1
#endif

typedef float hk_f32x4 __attribute__((ext_vector_type(4)));
typedef float hk_f32x16 __attribute__((ext_vector_type(16)));
typedef unsigned short hk_u16x4 __attribute__((ext_vector_type(4)));  /* 8 bytes: one MFMA operand */
typedef unsigned short hk_u16x8 __attribute__((ext_vector_type(8)));  /* 16 bytes: one global load */
typedef _Float16 hk_f16x4 __attribute__((ext_vector_type(4)));
typedef short hk_i16x4 __attribute__((ext_vector_type(4)));
typedef short hk_i16x2 __attribute__((ext_vector_type(2)));

#define HK_LDS_PAD 8

/* ---- MFMA wrappers: d = a * b + c with 16-bit operands (f16 or bf16 per HK_MFMA_BF16) ------ */
HK_DEVICE hk_f32x4 hk_mfma_16x16x16(hk_u16x4 a, hk_u16x4 b, hk_f32x4 c) {
#if HK_MFMA_BF16 && !HK_MFMA_BF16_1K
  const hk_i16x4 a4 = __builtin_bit_cast(hk_i16x4, a), b4 = __builtin_bit_cast(hk_i16x4, b);
  c = __builtin_amdgcn_mfma_f32_16x16x8bf16(a4.xy, b4.xy, c, 0, 0, 0);
  return __builtin_amdgcn_mfma_f32_16x16x8bf16(a4.zw, b4.zw, c, 0, 0, 0);
#elif HK_MFMA_BF16
  return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(hk_i16x4, a), __builtin_bit_cast(hk_i16x4, b),
                                                   c, 0, 0, 0);
#else
  return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(hk_f16x4, a), __builtin_bit_cast(hk_f16x4, b), c, 0,
                                               0, 0);
#endif
}

HK_DEVICE hk_f32x16 hk_mfma_32x32x8(hk_u16x4 a, hk_u16x4 b, hk_f32x16 c) {
#if HK_MFMA_BF16 && !HK_MFMA_BF16_1K
  const hk_i16x4 a4 = __builtin_bit_cast(hk_i16x4, a), b4 = __builtin_bit_cast(hk_i16x4, b);
  c = __builtin_amdgcn_mfma_f32_32x32x4bf16(a4.xy, b4.xy, c, 0, 0, 0);
  return __builtin_amdgcn_mfma_f32_32x32x4bf16(a4.zw, b4.zw, c, 0, 0, 0);
#elif HK_MFMA_BF16
  return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(__builtin_bit_cast(hk_i16x4, a), __builtin_bit_cast(hk_i16x4, b), c,
                                                  0, 0, 0);
#else
  return __builtin_amdgcn_mfma_f32_32x32x8f16(__builtin_bit_cast(hk_f16x4, a), __builtin_bit_cast(hk_f16x4, b), c, 0, 0,
                                              0);
#endif
}

/* Element (row, col) of a 32x32x8 C fragment held in c[r] by lane `lane`. */
HK_DEVICE int hk_mfma32_c_row(int lane, int r) { return 8 * (r >> 2) + 4 * (lane >> 5) + (r & 3); }
HK_DEVICE int hk_mfma32_c_col(int lane) { return lane & 31; }
/* Element (row, col) of a 16x16x16 C fragment held in c[j] by lane `lane`. */
HK_DEVICE int hk_mfma16_c_row(int lane, int j) { return 4 * (lane >> 4) + j; }
HK_DEVICE int hk_mfma16_c_col(int lane) { return lane & 15; }

HK_DEVICE hk_f32x4 hk_zero_f32x4(void) {
  hk_f32x4 z;
  z = 0.0f;
  return z;
}
HK_DEVICE hk_f32x16 hk_zero_f32x16(void) {
  hk_f32x16 z;
  z = 0.0f;
  return z;
}
HK_DEVICE hk_u16x8 hk_zero_u16x8(void) {
  hk_u16x8 z;
  z = (unsigned short)0;
  return z;
}

/* ---- global memory: 16-byte loads (p must be 16-byte aligned) -------------------------------- */
HK_DEVICE hk_u16x8 hk_load16(const unsigned short *p) { return *(const hk_u16x8 *)p; }
/* 16 bytes from p when ok, else zeros (masked tails; p is not dereferenced). */
HK_DEVICE hk_u16x8 hk_load16_masked(const unsigned short *p, bool ok) { return ok ? hk_load16(p) : hk_zero_u16x8(); }
HK_DEVICE hk_u16x4 hk_load8(const unsigned short *p) { return *(const hk_u16x4 *)p; }

/* ---- global -> LDS without registers: MUBUF loads in LDS mode (buffer_load_dword ... lds) -----
 * CDNA1-3 copy 4 bytes per lane this way: lane l's dword lands at LDS byte lds + 4 l. The
 * destination is fixed by the lane, its source address is free, so a kernel lays out (and
 * swizzles) an LDS tile through the source address it gives each lane. A lane reads
 * base + voffset if voffset lies within the resource's `bytes`, else the hardware answers
 * zeros without touching memory (the ISA's out-of-range rule for raw buffers): masked tails.
 * (hk_buffer_load16 below reads into registers through the same kind of resource.)
 * The copy is asynchronous: it counts in vmcnt, its data is in LDS once the issuing wave has
 * waited (s_waitcnt vmcnt), and other waves see it after a barrier that follows that wait.
 * ROCm 5.2's clang has no builtin for it, so the LLVM intrinsic is declared by name
 * (its <4 x i32> resource form is kept by later LLVMs). */
typedef int hk_i32x4 __attribute__((ext_vector_type(4)));
__device__ void hk_llvm_raw_buffer_load_lds(hk_i32x4 rsrc, __attribute__((address_space(3))) void *lds, int size,
                                            int voffset, int soffset, int offset, int aux)
    __asm("llvm.amdgcn.raw.buffer.load.lds");
#define HK_DMA_MASKED 0x80000000u /* a voffset past any range below 2^31: the lane copies zeros */

/* A raw buffer resource (V#) of `bytes` bytes from base (wave-uniform; bytes < 2^31). */
HK_DEVICE hk_i32x4 hk_buffer_rsrc(const void *base, unsigned bytes) {
  const unsigned long long a = (unsigned long long)base;
  hk_i32x4 rsrc;
  rsrc.x = __builtin_amdgcn_readfirstlane((int)(unsigned)a);
  rsrc.y = __builtin_amdgcn_readfirstlane((int)(unsigned)(a >> 32) & 0xffff); /* base[47:32]; stride 0 */
  rsrc.z = __builtin_amdgcn_readfirstlane((int)bytes);                        /* num_records */
  rsrc.w = 0x00020000; /* gfx9 DATA_FORMAT 32: any nonzero format makes an untyped buffer valid */
  return rsrc;
}

/* One wave-wide copy: lane l's 4 bytes at base + voffset (base wave-uniform, 4-byte aligned;
 * in range when voffset + 4 <= bytes) to LDS byte lds + 4 l (lds wave-uniform). */
HK_DEVICE void hk_lds_dma4(const void *base, unsigned bytes, unsigned short *lds, unsigned voffset) {
  hk_llvm_raw_buffer_load_lds(hk_buffer_rsrc(base, bytes), (__attribute__((address_space(3))) void *)lds, 4,
                              (int)voffset, 0, 0, 0);
}

/* 16 bytes at base + voffset into registers (a raw buffer load), zeros when voffset + 16 >
 * bytes (< 2^31): the same resource and out-of-range rule as hk_lds_dma4. */
__device__ hk_i32x4 hk_llvm_raw_buffer_load_v4i32(hk_i32x4 rsrc, int voffset, int soffset, int aux)
    __asm("llvm.amdgcn.raw.buffer.load.v4i32");
HK_DEVICE hk_u16x8 hk_buffer_load16(const void *base, unsigned bytes, unsigned voffset) {
  return __builtin_bit_cast(hk_u16x8, hk_llvm_raw_buffer_load_v4i32(hk_buffer_rsrc(base, bytes), (int)voffset, 0, 0));
}

/* Compiler-only ties (no instruction): HK_PIN_DEF(x) as if x were rewritten at this point,
 * HK_PIN_USE(x) as if it were read here, in order with the statements around them that
 * have side effects (s_setprio, barriers). A CPU emulation of the kernels may define them
 * first. */
#ifndef HK_PIN_DEF
#define HK_PIN_DEF(x) asm volatile("" : "+v"(x))
#define HK_PIN_USE(x) asm volatile("" ::"v"(x))
#endif

/* s_waitcnt with the gfx9 encoding (vmcnt [3:0] and [15:14], expcnt [6:4], lgkmcnt [11:8]):
 * a wave's own global loads / copies into LDS (vmcnt) or its LDS accesses (lgkmcnt) done. */
#define HK_WAIT_VMCNT0() __builtin_amdgcn_s_waitcnt(0x0F70)
#define HK_WAIT_LGKMCNT0() __builtin_amdgcn_s_waitcnt(0xC07F)

#ifndef HK_PP_ASYNC_BARRIER
#define HK_PP_ASYNC_BARRIER 0
#endif
/* s_barrier for the ping-pong kernels (gemm_mfma_pp.hip, attention_mfma_pp.hip). On gfx90a and
 * later (HK_PP_ASYNC_BARRIER 1, from the variant) a wave may wait at
 * a barrier with loads in flight (the hardware backs off), but LLVM 15 (ROCm 5.2) still puts
 * s_waitcnt 0 before every s_barrier it emits, which would drain each phase's copies: there
 * the instruction is issued as inline assembly, which the compiler does not look into (the
 * "memory" clobber keeps it from moving memory accesses across). gfx908 cannot back off,
 * so it keeps the compiler's barrier and its drain (copies then overlap the other group's
 * MFMAs only). */
#if HK_PP_ASYNC_BARRIER
#define HK_PP_BARRIER() asm volatile("s_barrier" ::: "memory")
#else
#define HK_PP_BARRIER()            \
  do {                             \
    asm volatile("" ::: "memory"); \
    __builtin_amdgcn_s_barrier();  \
    asm volatile("" ::: "memory"); \
  } while (0)
#endif

/* x, known to be the same in every lane, in scalar registers: lane 0's value. */
HK_DEVICE long long hk_uniform_i64(long long x) {
  const unsigned lo = __builtin_amdgcn_readfirstlane((unsigned)x);
  const unsigned hi = __builtin_amdgcn_readfirstlane((unsigned)(x >> 32));
  return (long long)(((unsigned long long)hi << 32) | lo);
}

/* ---- LDS tiles: unsigned short [rows][pitch], pitch = cols + HK_LDS_PAD ----------------------- */
/* 8 consecutive elements of one row (16-byte aligned: pitch and col multiples of 8). */
HK_DEVICE void hk_lds_store_row8(unsigned short *tile, int pitch, int row, int col, hk_u16x8 v) {
  *(hk_u16x8 *)(tile + row * pitch + col) = v;
}
/* 8 elements of one column, rows row..row+7 (a transposing store). */
HK_DEVICE void hk_lds_store_col8(unsigned short *tile, int pitch, int row, int col, hk_u16x8 v) {
#pragma unroll
  for (int e = 0; e < 8; e++) tile[(row + e) * pitch + col] = v[e];
}
/* One MFMA operand: 4 consecutive k (col) of one row, an 8-byte read (col multiple of 4). */
HK_DEVICE hk_u16x4 hk_lds_load4(const unsigned short *tile, int pitch, int row, int col) {
  return *(const hk_u16x4 *)(tile + row * pitch + col);
}

/* f32 -> 4 storage elements (f16 or bf16 per HK_STORE), e.g. probabilities as an operand. */
HK_DEVICE hk_u16x4 hk_pack4(float a, float b, float c, float d) {
  hk_u16x4 v;
  v[0] = HK_STORE(a);
  v[1] = HK_STORE(b);
  v[2] = HK_STORE(c);
  v[3] = HK_STORE(d);
  return v;
}
