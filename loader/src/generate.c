/* SPDX-License-Identifier: Apache-2.0 */
/*
 * generate.c -- the generator: prefill and decode steps of a generation pack
 * (docs/GENERATE.md) over one session.
 *
 * A generation pack's graph runs on token rows: each row carries its token id, the number of
 * cache positions it sees (ctx, its position + 1; 0 marks padding) and its cache slot, and
 * `rows` names, per output row, the token row whose next id (and logits) it returns. The
 * generator keeps each slot's length (the tokens its cache holds), turns a call's sequences
 * into steps of at most the largest bucket's tokens (a longer prefill runs in chunks, each
 * seeing what the earlier ones cached), pads every step itself to a bucket with ctx = 0 rows,
 * and reads the next ids back.
 *
 * One device buffer holds the four i32 inputs, each in its own region of `region` bytes:
 * ids | ctx | slot | rows, and where the pack samples on the device, the input sampling
 * [slots, 4] after them (per output row: a seed for this token, top_k, and the bits of the
 * temperature and top_p). A step writes the host mirror, copies it to the device in one
 * copy, runs the graph and copies `next` back: no other host work per token. The inputs stay
 * bound at the same addresses for every bucket, so after each bucket's first step its graph
 * replays without updating any node.
 */
#include <string.h>

#include "hk/hkrt.h"
#include "hk/pack_format.h"
#include "convert_internal.h"
#include "session_internal.h"
#include "status_internal.h"
#include "util_internal.h"

enum { IN_IDS, IN_CTX, IN_SLOT, IN_ROWS, IN_COUNT };
static const char *const k_inputs[IN_COUNT] = {"ids", "ctx", "slot", "rows"};

struct hk_generator {
  hk_session_t *session;
  const hk_allocator_t *allocator;
  uint32_t slots, max_seq, vocab; /* vocab: logits' width, 0 without a logits output */
  uint64_t buckets[HK_MAX_BATCH_BUCKETS];
  uint32_t bucket_count;
  uint32_t *length;          /* per slot: tokens in its cache */
  size_t region;             /* bytes per input region, a multiple of 256 */
  int32_t *host;             /* IN_COUNT regions, the mirror of `device` */
  void *device;
  int32_t *next_host;        /* [slots] */
  void *next_device;
  void *logits_device;       /* [slots, vocab] of the pack's dtype, or NULL */
  hk_element_type_t logits_type;
  uint64_t bound_bucket;     /* the bucket whose token inputs are bound (0: none yet) */
  int has_sampling;          /* the pack has the input sampling [slots, 4] */
  hk_sampling_t *sampling;   /* per slot (temperature 0: greedy) */
  uint64_t steps;            /* graph runs so far */
};

/* The tensor named `name` of the session, or NULL. */
static bool find_tensor(hk_session_t *s, const char *name, hk_tensor_info_t *out) {
  for (uint32_t i = 0; i < hk_session_tensor_count(s); i++)
    if (hk_session_tensor_info(s, i, out) == HK_OK && strcmp(out->name, name) == 0) return true;
  return false;
}

/* Checks that the session's pack has the generation interface (docs/GENERATE.md) and
 * reads slots, max_seq and vocab from it. Errors: FAILED_PRECONDITION naming what is missing. */
static hk_status_t read_interface(hk_generator_t *g) {
  hk_session_t *s = g->session;
  hk_tensor_info_t t;
  for (int i = 0; i < IN_COUNT; i++) {
    HK_FAIL_IF(!find_tensor(s, k_inputs[i], &t) || t.role != HK_TENSOR_INPUT || t.element_type != HK_ELEMENT_I32 ||
                   t.rank != 1,
               HK_STATUS_FAILED_PRECONDITION,
               "not a generation pack: it needs an i32 input '%s' of one dim (docs/GENERATE.md)", k_inputs[i]);
  }
  (void)find_tensor(s, "rows", &t);
  HK_FAIL_IF(t.dims[0] < 1 || t.dims[0] > 65536, HK_STATUS_FAILED_PRECONDITION,
             "generation pack: input 'rows' has %lld entries (slots), expected 1 .. 65536", (long long)t.dims[0]);
  g->slots = (uint32_t)t.dims[0];
  HK_FAIL_IF(!find_tensor(s, "next", &t) || t.role != HK_TENSOR_OUTPUT || t.element_type != HK_ELEMENT_I32 ||
                 t.rank != 1 || t.dims[0] != g->slots,
             HK_STATUS_FAILED_PRECONDITION,
             "not a generation pack: it needs an i32 output 'next' of %u entries (one per slot)", g->slots);
  g->max_seq = 0;
  for (uint32_t i = 0; i < hk_session_tensor_count(s); i++) {
    if (hk_session_tensor_info(s, i, &t) != HK_OK || t.role != HK_TENSOR_STATE) continue;
    HK_FAIL_IF(t.rank != 4 || t.dims[1] != g->slots || t.dims[2] < 1 || t.dims[2] > INT32_MAX ||
                   (g->max_seq && t.dims[2] != g->max_seq),
               HK_STATUS_FAILED_PRECONDITION,
               "generation pack: state tensor '%s' is not [layers, %u slots, max_seq, width] with one max_seq for all",
               t.name, g->slots);
    g->max_seq = (uint32_t)t.dims[2];
  }
  HK_FAIL_IF(!g->max_seq, HK_STATUS_FAILED_PRECONDITION, "not a generation pack: it has no state (KV cache) tensor");
  g->has_sampling = find_tensor(s, "sampling", &t);
  HK_FAIL_IF(g->has_sampling && (t.role != HK_TENSOR_INPUT || t.element_type != HK_ELEMENT_I32 || t.rank != 2 ||
                                 t.dims[0] != g->slots || t.dims[1] != 4),
             HK_STATUS_FAILED_PRECONDITION, "generation pack: 'sampling' is not an i32 input [%u slots, 4]", g->slots);
  g->vocab = 0;
  if (find_tensor(s, "logits", &t)) {
    HK_FAIL_IF(t.role != HK_TENSOR_OUTPUT || t.rank != 2 || t.dims[0] != g->slots || t.dims[1] < 1 ||
                   t.dims[1] > INT32_MAX,
               HK_STATUS_FAILED_PRECONDITION, "generation pack: 'logits' is not an output [%u slots, vocab]", g->slots);
    g->vocab = (uint32_t)t.dims[1];
    g->logits_type = t.element_type;
  }
  return HK_OK;
}

/* Allocates the device buffers and binds the batch-independent ones (rows, next, logits). */
static hk_status_t alloc_buffers(hk_generator_t *g) {
  hk_session_t *s = g->session;
  const uint64_t most = g->buckets[g->bucket_count - 1];
  uint64_t region = (most > g->slots ? most : g->slots) * sizeof(int32_t);
  region = (region + 255) & ~(uint64_t)255;
  HK_FAIL_IF(region > SIZE_MAX / (IN_COUNT + 4), HK_STATUS_OUT_OF_MEMORY, "generation buffers too large");
  g->region = (size_t)region; /* the sampling region, [slots, 4], is 4 regions: region >= slots * 4 bytes */
  g->host = hk_calloc(g->allocator, IN_COUNT + 4, g->region);
  g->sampling = hk_calloc(g->allocator, g->slots, sizeof *g->sampling);
  g->next_host = hk_calloc(g->allocator, g->slots, sizeof(int32_t));
  g->length = hk_calloc(g->allocator, g->slots, sizeof(uint32_t));
  HK_FAIL_IF(!g->host || !g->next_host || !g->length || !g->sampling, HK_STATUS_OUT_OF_MEMORY,
             "out of memory creating a generator");
  HK_RETURN_IF_ERROR(hk_session_alloc(s, (IN_COUNT + 4) * g->region, &g->device));
  if (g->has_sampling)
    HK_RETURN_IF_ERROR(hk_session_bind(s, "sampling", (char *)g->device + IN_COUNT * g->region,
                                       (size_t)g->slots * 4 * sizeof(int32_t)));
  HK_RETURN_IF_ERROR(hk_session_alloc(s, g->slots * sizeof(int32_t), &g->next_device));
  HK_RETURN_IF_ERROR(hk_session_bind(s, "rows", (char *)g->device + IN_ROWS * g->region, g->slots * sizeof(int32_t)));
  HK_RETURN_IF_ERROR(hk_session_bind(s, "next", g->next_device, g->slots * sizeof(int32_t)));
  if (g->vocab) {
    hk_tensor_info_t t;
    (void)find_tensor(s, "logits", &t);
    HK_RETURN_IF_ERROR(hk_session_alloc(s, t.bytes, &g->logits_device));
    HK_RETURN_IF_ERROR(hk_session_bind(s, "logits", g->logits_device, t.bytes));
  }
  return HK_OK;
}

HK_API hk_status_t hk_generator_create(hk_session_t *session, hk_generator_t **out_generator) {
  if (out_generator) *out_generator = NULL;
  HK_FAIL_IF(!session || !out_generator, HK_STATUS_INVALID_ARGUMENT, "session and out_generator must not be NULL");
  const hk_allocator_t *a = hk_session_allocator(session);
  hk_generator_t *g = hk_calloc(a, 1, sizeof *g);
  HK_FAIL_IF(!g, HK_STATUS_OUT_OF_MEMORY, "out of memory creating a generator");
  g->session = session;
  g->allocator = a;
  hk_pack_t *pack = hk_session_pack(session);
  g->bucket_count = hk_pack_batch_count(pack);
  for (uint32_t i = 0; i < g->bucket_count && i < HK_MAX_BATCH_BUCKETS; i++) g->buckets[i] = hk_pack_batch_size(pack, i);
  hk_status_t st = g->bucket_count >= 1 && g->bucket_count <= HK_MAX_BATCH_BUCKETS
                       ? HK_OK
                       : HK_ERROR(HK_STATUS_CORRUPT, "the pack has %u batch buckets", g->bucket_count);
  if (st == HK_OK) st = read_interface(g);
  if (st == HK_OK) st = alloc_buffers(g);
  if (st != HK_OK) {
    hk_session_note_error(session);
    hk_generator_destroy(g);
    return st;
  }
  *out_generator = g;
  return HK_OK;
}

HK_API void hk_generator_destroy(hk_generator_t *g) {
  if (!g) return;
  hk_session_free(g->session, g->device);
  hk_session_free(g->session, g->next_device);
  hk_session_free(g->session, g->logits_device);
  hk_free(g->allocator, g->host);
  hk_free(g->allocator, g->next_host);
  hk_free(g->allocator, g->length);
  hk_free(g->allocator, g->sampling);
  hk_free(g->allocator, g);
}

HK_API uint32_t hk_generator_slots(const hk_generator_t *g) { return g ? g->slots : 0; }
HK_API uint32_t hk_generator_max_seq(const hk_generator_t *g) { return g ? g->max_seq : 0; }
HK_API uint32_t hk_generator_vocab(const hk_generator_t *g) { return g ? g->vocab : 0; }
HK_API uint32_t hk_generator_max_step(const hk_generator_t *g) {
  return g ? (uint32_t)g->buckets[g->bucket_count - 1] : 0;
}
HK_API uint64_t hk_generator_steps(const hk_generator_t *g) { return g ? g->steps : 0; }
HK_API uint32_t hk_generator_length(const hk_generator_t *g, uint32_t slot) {
  return g && slot < g->slots ? g->length[slot] : 0;
}

HK_API hk_status_t hk_generator_reset(hk_generator_t *g, uint32_t slot) {
  HK_FAIL_IF(!g, HK_STATUS_INVALID_ARGUMENT, "generator is NULL");
  HK_FAIL_IF(slot >= g->slots, HK_STATUS_INVALID_ARGUMENT, "slot %u is out of range (the pack has %u slots)", slot,
             g->slots);
  /* Nothing to clear: a step reads only the positions [0, ctx) of a slot, and a sequence
   * writes each of them before any of its tokens reads it. */
  g->length[slot] = 0;
  return HK_OK;
}

HK_API hk_status_t hk_generator_set_sampling(hk_generator_t *g, uint32_t slot, const hk_sampling_t *sampling) {
  HK_FAIL_IF(!g, HK_STATUS_INVALID_ARGUMENT, "generator is NULL");
  HK_FAIL_IF(slot >= g->slots, HK_STATUS_INVALID_ARGUMENT, "slot %u is out of range (the pack has %u slots)", slot,
             g->slots);
  const hk_sampling_t greedy = {0};
  const hk_sampling_t *p = sampling ? sampling : &greedy;
  HK_FAIL_IF(p->temperature != p->temperature || p->top_p != p->top_p || p->top_k < 0, HK_STATUS_INVALID_ARGUMENT,
             "slot %u: temperature and top_p must be numbers and top_k >= 0", slot);
  HK_FAIL_IF(!g->has_sampling && p->temperature > 0 && p->top_k != 1, HK_STATUS_FAILED_PRECONDITION,
             "the pack decodes greedily (its output 'next' is an argmax; no input 'sampling'): import it with `hkc "
             "import hf --generate` of hkc 0.2 or later to sample");
  g->sampling[slot] = *p;
  return HK_OK;
}

/* A 32-bit mix of a slot's seed and the position of the token it draws (splitmix64's
 * finaliser): the draw's noise depends on nothing else. */
static int32_t draw_seed(uint32_t seed, uint32_t position) {
  uint64_t z = ((uint64_t)seed << 32 | position) + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (int32_t)(uint32_t)z;
}

/* Runs one step of `tokens` rows already written into the host mirror (rows set too): pads
 * to the smallest bucket that holds them with ctx = 0 rows, copies the inputs in, runs, and
 * copies `next` back. */
static hk_status_t run_step(hk_generator_t *g, uint32_t tokens) {
  hk_session_t *s = g->session;
  uint32_t b = 0;
  while (g->buckets[b] < tokens) b++; /* tokens <= the largest bucket: the caller splits */
  const uint64_t bucket = g->buckets[b];
  for (int i = IN_IDS; i <= IN_SLOT; i++) /* padding rows: id 0, ctx 0 (nothing), slot 0 */
    memset((char *)g->host + (size_t)i * g->region + tokens * sizeof(int32_t), 0,
           (size_t)(bucket - tokens) * sizeof(int32_t));
  if (hk_session_batch(s) != bucket) HK_RETURN_IF_ERROR(hk_session_set_batch(s, bucket));
  if (g->bound_bucket != bucket) {
    for (int i = IN_IDS; i <= IN_SLOT; i++)
      HK_RETURN_IF_ERROR(hk_session_bind(s, k_inputs[i], (char *)g->device + (size_t)i * g->region,
                                         (size_t)bucket * sizeof(int32_t)));
    g->bound_bucket = bucket;
  }
  HK_RETURN_IF_ERROR(hk_session_copy(s, g->device, g->host, (size_t)(IN_COUNT + (g->has_sampling ? 4 : 0)) * g->region,
                                     HK_COPY_HOST_TO_DEVICE));
  HK_RETURN_IF_ERROR(hk_session_run(s, NULL));
  HK_RETURN_IF_ERROR(
      hk_session_copy(s, g->next_host, g->next_device, g->slots * sizeof(int32_t), HK_COPY_DEVICE_TO_HOST));
  g->steps++;
  return HK_OK;
}

/* The checks of hk_generator_append, before anything runs. */
static hk_status_t check_append(const hk_generator_t *g, uint32_t n, const uint32_t *slots,
                                const int32_t *const *tokens, const uint32_t *counts) {
  HK_FAIL_IF(n < 1 || n > g->slots, HK_STATUS_INVALID_ARGUMENT, "%u sequences in one call; the pack has %u slots", n,
             g->slots);
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t sl = slots[i];
    HK_FAIL_IF(sl >= g->slots, HK_STATUS_INVALID_ARGUMENT, "sequence %u: slot %u is out of range (the pack has %u slots)",
               i, sl, g->slots);
    for (uint32_t j = 0; j < i; j++)
      HK_FAIL_IF(slots[j] == sl, HK_STATUS_INVALID_ARGUMENT, "slot %u is given twice (sequences %u and %u)", sl, j, i);
    HK_FAIL_IF(counts[i] < 1 || !tokens[i], HK_STATUS_INVALID_ARGUMENT, "sequence %u (slot %u): no tokens", i, sl);
    HK_FAIL_IF((uint64_t)g->length[sl] + counts[i] > g->max_seq, HK_STATUS_INVALID_ARGUMENT,
               "sequence %u (slot %u): %u more token(s) after the %u cached would pass max_seq %u (the KV cache's "
               "length)", i, sl, counts[i], g->length[sl], g->max_seq);
    for (uint32_t k = 0; k < counts[i] && g->vocab; k++)
      HK_FAIL_IF(tokens[i][k] < 0 || (uint32_t)tokens[i][k] >= g->vocab, HK_STATUS_INVALID_ARGUMENT,
                 "sequence %u (slot %u): token %u is id %d, outside the vocabulary 0 .. %u", i, sl, k, tokens[i][k],
                 g->vocab - 1);
  }
  return HK_OK;
}

HK_API hk_status_t hk_generator_append(hk_generator_t *g, uint32_t n, const uint32_t *slots,
                                       const int32_t *const *tokens, const uint32_t *counts, int32_t *out_next) {
  HK_FAIL_IF(!g || !slots || !tokens || !counts || !out_next, HK_STATUS_INVALID_ARGUMENT,
             "generator, slots, tokens, counts and out_next must not be NULL");
  hk_status_t st = check_append(g, n, slots, tokens, counts);
  if (st != HK_OK) {
    hk_session_note_error(g->session);
    return st;
  }
  const uint32_t most = (uint32_t)g->buckets[g->bucket_count - 1];
  int32_t *ids = g->host, *ctx = g->host + g->region / 4, *slot = g->host + 2 * (g->region / 4);
  int32_t *rows = g->host + 3 * (g->region / 4);
  uint32_t seq = 0, done = 0; /* the sequence being placed, and how many of its tokens are placed */
  while (st == HK_OK && seq < n) {
    uint32_t t = 0;
    for (uint32_t r = 0; r < g->slots; r++) rows[r] = -1;
    uint32_t first = seq;
    while (seq < n && t < most) { /* fill the step: whole sequences, the last one maybe in part */
      const uint32_t sl = slots[seq], take = counts[seq] - done < most - t ? counts[seq] - done : most - t;
      for (uint32_t k = 0; k < take; k++, t++) {
        ids[t] = tokens[seq][done + k];
        ctx[t] = (int32_t)(g->length[sl] + k + 1);
        slot[t] = (int32_t)sl;
      }
      g->length[sl] += take;
      done += take;
      if (done == counts[seq]) {
        rows[seq] = (int32_t)(t - 1);
        if (g->has_sampling) { /* output row seq draws the token at position length[sl] */
          const hk_sampling_t *p = &g->sampling[sl];
          int32_t *row = g->host + IN_COUNT * (g->region / 4) + 4 * (size_t)seq;
          float f[2] = {p->temperature, p->top_p};
          row[0] = draw_seed(p->seed, g->length[sl]);
          row[1] = p->top_k;
          memcpy(&row[2], &f[0], 4);
          memcpy(&row[3], &f[1], 4);
        }
        seq++;
        done = 0;
      }
    }
    st = run_step(g, t);
    for (uint32_t i = first; i < seq && st == HK_OK; i++) out_next[i] = g->next_host[i];
  }
  if (st != HK_OK) { /* what a failed step cached is not known: the call's slots start again */
    for (uint32_t i = 0; i < n; i++) g->length[slots[i]] = 0;
    hk_session_note_error(g->session);
  }
  return st;
}

HK_API hk_status_t hk_generator_logits(hk_generator_t *g, uint32_t index, float *out, size_t count) {
  HK_FAIL_IF(!g || !out, HK_STATUS_INVALID_ARGUMENT, "generator and out must not be NULL");
  HK_FAIL_IF(!g->vocab, HK_STATUS_FAILED_PRECONDITION, "the pack has no 'logits' output");
  HK_FAIL_IF(index >= g->slots || count != g->vocab, HK_STATUS_INVALID_ARGUMENT,
             "logits row %u of %u, %zu values asked for %u", index, g->slots, count, g->vocab);
  const size_t esize = g->logits_type == HK_ELEMENT_F32 ? 4 : 2;
  uint8_t *row = hk_alloc(g->allocator, g->vocab * esize);
  HK_FAIL_IF(!row, HK_STATUS_OUT_OF_MEMORY, "out of memory reading logits");
  hk_status_t st = hk_session_copy(g->session, row, (char *)g->logits_device + (size_t)index * g->vocab * esize,
                                   g->vocab * esize, HK_COPY_DEVICE_TO_HOST);
  if (st == HK_OK) hk_convert(out, HK_ELEMENT_F32, row, g->logits_type, g->vocab); /* f16 / bf16: exact */
  hk_free(g->allocator, row);
  return st;
}
