/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/emu/amd_emu_attention.cpp -- runs one generated AMD attention kernel
 * (attention_mfma.hip or attention_mfma_pp.hip, as hkc_codegen_gpu wrote it for a key) on
 * the CPU through amd_emu.h, against a double-precision reference on random inputs.
 *
 *   clang++ -std=c++17 -O1 -DHK_EMU_SOURCE='"kernel.hip"' amd_emu_attention.cpp
 *   ./a.out BATCH SEQ_Q SEQ_KV HEADS KV_HEADS CAUSAL PACKED MASK_HEADS GRID THREADS SEED LATE
 *
 * The head dim and the masked ABI come from the source's macros (HK_ATTN_DH,
 * HK_ATTN_LENGTHS, HK_ATTN_MASK). PACKED 1: one [batch, seq, 3 heads dh] tensor passed as
 * q, k and v (needs SEQ_Q == SEQ_KV, KV_HEADS == HEADS). With lengths, batch entry b has a
 * random number of keys in 0 .. SEQ_KV (entry 0 none, entry 1 all); the additive mask
 * [batch, MASK_HEADS, SEQ_Q, SEQ_KV] holds values in [-2, 2) and some -inf (one query row of
 * entry 0 wholly -inf). The output is poisoned with NaN and guarded on both sides; exit 0
 * when every element matches, 1 otherwise, with the first mismatches printed.
 */
#include "amd_emu.h"
#include HK_EMU_SOURCE

#include <vector>

#define HK_EMU_STR1(x) #x
#define HK_EMU_STR(x) HK_EMU_STR1(x)
#define HK_EMU_MASKED (HK_ATTN_LENGTHS || HK_ATTN_MASK)

struct attn_args {
  const HK_T *q, *k, *v;
  HK_T *out;
  long long batch, seq_q, seq_kv, heads, kv_heads, dh, ld_q, ld_kv, q_col, k_col, v_col, causal;
  float scale;
  const int *lengths;
  const HK_T *mask;
  long long mask_heads;
};
static void kernel_body(void *p) {
  const attn_args *a = (const attn_args *)p;
  HK_NAME(a->q, a->k, a->v, a->out, a->batch, a->seq_q, a->seq_kv, a->heads, a->kv_heads, a->dh, a->ld_q, a->ld_kv,
          a->q_col, a->k_col, a->v_col, a->causal, a->scale
#if HK_EMU_MASKED
          , a->lengths, a->mask, a->mask_heads
#endif
  );
}

static uint64_t rng_state;
static double uniform(void) { /* xorshift64*, in [-1, 1) */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}
static std::vector<HK_T> random_tensor(size_t n, double amp) {
  std::vector<HK_T> v(n);
  for (size_t i = 0; i < n; i++) v[i] = HK_STORE((float)(amp * uniform()));
  return v;
}

int main(int argc, char **argv) {
  if (argc != 13) {
    fprintf(stderr, "usage: %s BATCH SEQ_Q SEQ_KV HEADS KV_HEADS CAUSAL PACKED MASK_HEADS GRID THREADS SEED LATE\n",
            argv[0]);
    return 2;
  }
  const long long B = atoll(argv[1]), SQ = atoll(argv[2]), SK = atoll(argv[3]), H = atoll(argv[4]),
                  KH = atoll(argv[5]), causal = atoll(argv[6]), packed = atoll(argv[7]), MH = atoll(argv[8]);
  const unsigned grid = (unsigned)atoi(argv[9]), threads = (unsigned)atoi(argv[10]);
  rng_state = (uint64_t)atoll(argv[11]) * 0x9E3779B97F4A7C15ull + 1;
  hk_emu_late = atoi(argv[12]);
  const long long D = HK_ATTN_DH;
  if (packed && (SQ != SK || KH != H)) {
    fprintf(stderr, "packed needs SEQ_Q == SEQ_KV and KV_HEADS == HEADS\n");
    return 2;
  }
  /* inputs: q scaled so that the scores spread (softmax not flat) */
  const long long ld_q = packed ? 3 * H * D : H * D, ld_kv = packed ? 3 * H * D : KH * D;
  std::vector<HK_T> qkv, qs, ks, vs;
  const HK_T *q, *k, *v;
  if (packed) {
    qkv = random_tensor((size_t)(B * SQ * ld_q), 1.0);
    q = k = v = qkv.data();
    hk_emu_register(qkv.data(), qkv.size() * sizeof(HK_T));
  } else {
    qs = random_tensor((size_t)(B * SQ * ld_q), 1.0);
    ks = random_tensor((size_t)(B * SK * ld_kv), 1.0);
    vs = random_tensor((size_t)(B * SK * ld_kv), 1.0);
    q = qs.data(), k = ks.data(), v = vs.data();
    hk_emu_register(qs.data(), qs.size() * sizeof(HK_T));
    hk_emu_register(ks.data(), ks.size() * sizeof(HK_T));
    hk_emu_register(vs.data(), vs.size() * sizeof(HK_T));
  }
  const long long q_col = 0, k_col = packed ? H * D : 0, v_col = packed ? 2 * H * D : 0;
  std::vector<int> lengths((size_t)B);
  for (long long b = 0; b < B; b++)
    lengths[(size_t)b] =
        b == 0 ? 0 : b == 1 ? (int)SK : (int)((uniform() + 1.0) / 2.0 * (double)(SK + 1)) % (int)(SK + 1);
  const HK_T neg_inf = HK_STORE(-INFINITY);
  std::vector<HK_T> mask = random_tensor((size_t)(B * MH * SQ * SK), 2.0);
  for (size_t i = 0; i < mask.size(); i++)
    if (uniform() > 0.9) mask[i] = neg_inf;
  for (long long j = 0; j < SK && SQ > 3; j++) mask[(size_t)(3 * SK + j)] = neg_inf; /* entry 0, head 0, query 3 */
  const float scale = (float)(1.3 / sqrt((double)D));

  const size_t guard = 64, n_out = (size_t)(B * SQ * H * D);
  const HK_T poison = (HK_T)0x7fff; /* NaN in f16 and bf16 */
  std::vector<HK_T> out(n_out + 2 * guard, poison);
  attn_args a = {q, k, v, out.data() + guard, B, SQ, SK, H, KH, D, ld_q, ld_kv, q_col, k_col, v_col, causal, scale,
                 HK_ATTN_LENGTHS ? lengths.data() : NULL, HK_ATTN_MASK ? mask.data() : NULL, MH};
  hk_emu_launch(grid, threads, (uint64_t)atoll(argv[11]), kernel_body, &a);

  /* reference: double scores of the rounded inputs, the kernel's masking rules */
  const double unit = HK_MFMA_BF16 ? 1.0 / 256 : 1.0 / 2048; /* the 16-bit rounding unit (P and the output) */
  long long bad = 0;
  for (size_t i = 0; i < guard; i++)
    if (out[i] != poison || out[out.size() - 1 - i] != poison) bad++;
  if (bad) fprintf(stderr, "writes outside out\n");
  std::vector<double> sc((size_t)SK);
  const long long group = H / KH;
  for (long long b = 0; b < B; b++)
    for (long long h = 0; h < H; h++)
      for (long long i = 0; i < SQ; i++) {
        const long long n = HK_ATTN_LENGTHS ? lengths[(size_t)b] : SK;
        const HK_T *qr = q + (b * SQ + i) * ld_q + q_col + h * D;
        double mx = -INFINITY;
        for (long long j = 0; j < SK; j++) {
          sc[(size_t)j] = -INFINITY;
          if (j >= n || (causal && j > i)) continue;
          const HK_T *kr = k + (b * SK + j) * ld_kv + k_col + (h / group) * D;
          double s = 0;
          for (long long d = 0; d < D; d++) s += (double)HK_LOAD(qr[d]) * HK_LOAD(kr[d]);
          s *= scale;
          if (HK_ATTN_MASK) s += HK_LOAD(mask[(size_t)(((b * MH + (MH > 1 ? h : 0)) * SQ + i) * SK + j)]);
          sc[(size_t)j] = s;
          mx = s > mx ? s : mx;
        }
        double l = 0;
        for (long long j = 0; j < SK; j++) {
          sc[(size_t)j] = mx == -INFINITY ? 0.0 : exp(sc[(size_t)j] - mx);
          l += sc[(size_t)j];
        }
        for (long long d = 0; d < D; d++) {
          double o = 0;
          for (long long j = 0; j < SK; j++)
            if (sc[(size_t)j] != 0.0)
              o += sc[(size_t)j] * HK_LOAD(v[(b * SK + j) * ld_kv + v_col + (h / group) * D + d]);
          const double want = l > 0 ? o / l : 0.0;
          const float got = HK_LOAD(out[guard + (size_t)(((b * SQ + i) * H + h) * D + d)]);
          /* P is rounded to 16 bits before PV: a few units of error on values of size <= 1 */
          if (!(fabs((double)got - want) <= 4 * unit * (fabs(want) + 1.0))) {
            if (bad++ < 5)
              fprintf(stderr, "out[b%lld][q%lld][h%lld][d%lld] = %g, want %g\n", b, i, h, d, got, want);
          }
        }
      }
  printf("%s B=%lld Sq=%lld Skv=%lld H=%lld/%lld causal=%lld packed=%lld grid %u x %u late=%d: %lld bad\n",
         HK_EMU_STR(HK_NAME), B, SQ, SK, H, KH, causal, packed, grid, threads, hk_emu_late, bad);
  return bad ? 1 : 0;
}
