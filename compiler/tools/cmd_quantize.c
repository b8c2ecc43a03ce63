/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `hkc quantize`: a float safetensors checkpoint's linear weights to 8 bits (int8 or fp8_e4m3)
 * with f32 scales, for a spec whose params are quantized (docs/SPEC.md, "Quantized params";
 * `hkc import hf --quantize`). Each selected tensor W [rows, cols] becomes q [rows, cols] and
 * `<name>_scale` [rows / block_rows, cols / block_cols] (rounded up), with
 *   scale = absmax(block) / QMAX   (QMAX 127 for int8, 448 for fp8_e4m3; 1 for an all-zero block)
 *   q     = round(W / scale)       (int8: to nearest even, within -127..127; fp8: nearest even)
 * so that q * scale approximates W; by default a scale per row (block 1 x cols: per output
 * channel of nn.Linear's [out, in]). Every other tensor is copied as it is. The input is
 * untrusted and checked by libhkrt (hk_weights_open_file); the output is written atomically.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "convert_internal.h" /* loader/src: hk_convert_load, the one float conversion */
#include "hk/hkrt.h"
#include "tools/tools.h"
#include "util/util.h"

static const char k_usage[] =
    "usage: hkc quantize IN.safetensors -o OUT.safetensors --dtype int8|fp8_e4m3 [--match SUFFIX]...\n"
    "                    [--block ROWS,COLS] [--no-lm-head] [-q]\n"
    "\n"
    "Writes OUT, a copy of the checkpoint IN whose 2-D float tensors (F32, F16, BF16) named with one\n"
    "of the --match suffixes (default _proj.weight: the q, k, v, o, gate, up and down projections\n"
    "of Llama, Mistral and Qwen2) are quantized to --dtype, each with its f32 scales as\n"
    "<name>_scale: absmax / 127 (int8) or absmax / 448 (fp8_e4m3) per row of the [out, in]\n"
    "weight, or per ROWS x COLS block with --block (blocks at the edges may be partial). The LM\n"
    "head too: lm_head.weight, or where the checkpoint has none (tied embeddings) a quantized copy of\n"
    "model.embed_tokens.weight written as lm_head.weight, the float table kept for the embedding;\n"
    "--no-lm-head leaves it as it is. What a spec from `hkc import hf --quantize DTYPE` binds\n"
    "(docs/SPEC.md, \"Quantized params\").\n";

#define QUANT_MAX_MATCH 16

typedef struct quant_opts {
  hk_dtype_t dtype; /* HK_DTYPE_I8 or HK_DTYPE_FP8_E4M3 */
  const char *match[QUANT_MAX_MATCH];
  int n_match;
  int64_t block_rows, block_cols; /* 0: per row (1 x cols) */
  int lm_head;                    /* also the LM head (lm_head.weight, or the tied table's copy) */
} quant_opts_t;

#define QUANT_HEAD "lm_head.weight"
#define QUANT_TIED_TABLE "model.embed_tokens.weight" /* the head of tied Llama-family checkpoints */

/* One tensor of the output: its name, dtype and shape for the header, and its bytes. */
typedef struct out_tensor {
  char *name; /* owned */
  const char *dtype;
  uint32_t rank;
  int64_t dims[HK_WEIGHTS_MAX_RANK];
  const void *data; /* borrowed from the input, or `owned` */
  void *owned;
  size_t bytes;
} out_tensor_t;

static int ends_with(const char *s, const char *suffix) {
  const size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* A 2-D float tensor (what quantizes). */
static int float_matrix(const hk_weights_tensor_info_t *wi) {
  return wi->rank == 2 && wi->dims[0] >= 1 && wi->dims[1] >= 1 &&
         (wi->dtype == HK_WEIGHTS_F32 || wi->dtype == HK_WEIGHTS_F16 || wi->dtype == HK_WEIGHTS_BF16);
}

static int selected(const quant_opts_t *o, const hk_weights_tensor_info_t *wi) {
  if (!float_matrix(wi)) return 0;
  if (o->lm_head && strcmp(wi->name, QUANT_HEAD) == 0) return 1;
  for (int i = 0; i < o->n_match; i++)
    if (ends_with(wi->name, o->match[i])) return 1;
  return 0;
}

/* Quantizes wi into q (rows * cols bytes) and scale ([srows, scols] f32). Returns -1 when a value
 * is not finite (reported). */
static int quantize_tensor(const quant_opts_t *o, const hk_weights_tensor_info_t *wi, uint8_t *q, float *scale,
                           int64_t br, int64_t bc, int64_t scols) {
  const int64_t rows = wi->dims[0], cols = wi->dims[1];
  const hk_element_type_t from = (hk_element_type_t)wi->dtype; /* F32, F16, BF16 share the element numbers */
  const float qmax = o->dtype == HK_DTYPE_I8 ? 127.0f : 448.0f;
  for (int64_t r0 = 0; r0 < rows; r0 += br)
    for (int64_t c0 = 0; c0 < cols; c0 += bc) {
      const int64_t r1 = r0 + br < rows ? r0 + br : rows, c1 = c0 + bc < cols ? c0 + bc : cols;
      float amax = 0.0f;
      for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) {
          const float v = hk_convert_load(wi->data, from, (size_t)(r * cols + c));
          if (!isfinite(v)) {
            fprintf(stderr, "hkc quantize: %s: element [%lld, %lld] is %g; only finite weights quantize\n", wi->name,
                    (long long)r, (long long)c, (double)v);
            return -1;
          }
          if (fabsf(v) > amax) amax = fabsf(v);
        }
      const float s = amax > 0.0f ? amax / qmax : 1.0f;
      scale[(r0 / br) * scols + c0 / bc] = s;
      for (int64_t r = r0; r < r1; r++)
        for (int64_t c = c0; c < c1; c++) {
          const float x = hk_convert_load(wi->data, from, (size_t)(r * cols + c)) / s;
          if (o->dtype == HK_DTYPE_I8) {
            const float t = rintf(x); /* to nearest even; |x| <= 127 up to rounding */
            q[r * cols + c] = (uint8_t)(int8_t)(t > 127.0f ? 127 : t < -127.0f ? -127 : (int)t);
          } else {
            q[r * cols + c] = hkc_f32_to_fp8_e4m3(x);
          }
        }
    }
  return 0;
}

/* The safetensors header: {"__metadata__": {...}, name: {"dtype", "shape", "data_offsets"}...},
 * padded with spaces to a multiple of 8 bytes. NULL when out of memory. */
static char *header_json(const out_tensor_t *t, size_t n, const quant_opts_t *o, size_t *out_len) {
  cJSON *root = cJSON_CreateObject();
  cJSON *meta = root ? cJSON_AddObjectToObject(root, "__metadata__") : NULL;
  int ok = meta && cJSON_AddStringToObject(meta, "format", "pt") &&
           cJSON_AddStringToObject(meta, "quantized_by", o->dtype == HK_DTYPE_I8 ? "hkc quantize int8" : "hkc quantize fp8_e4m3");
  size_t at = 0;
  for (size_t i = 0; ok && i < n; i++) {
    cJSON *e = cJSON_AddObjectToObject(root, t[i].name), *shape = NULL, *off = NULL;
    ok = e && cJSON_AddStringToObject(e, "dtype", t[i].dtype) && (shape = cJSON_AddArrayToObject(e, "shape")) &&
         (off = cJSON_AddArrayToObject(e, "data_offsets"));
    for (uint32_t d = 0; ok && d < t[i].rank; d++) ok = cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].dims[d]));
    ok = ok && cJSON_AddItemToArray(off, cJSON_CreateNumber((double)at)) &&
         cJSON_AddItemToArray(off, cJSON_CreateNumber((double)(at + t[i].bytes)));
    at += t[i].bytes;
  }
  char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  if (!text) return NULL;
  const size_t len = strlen(text), padded = (len + 7) / 8 * 8;
  char *out = realloc(text, padded + 1);
  if (!out) {
    free(text);
    return NULL;
  }
  memset(out + len, ' ', padded - len);
  out[padded] = '\0';
  *out_len = padded;
  return out;
}

/* out[0], out[1] = wi quantized under the name `name`, and its scales `<name>_scale`. 0, or -1
 * (reported; whatever out[] holds is freed by the caller). */
static int add_quantized(const hk_weights_t *w, const char *in_path, const quant_opts_t *o,
                         const hk_weights_tensor_info_t *wi, const char *name, out_tensor_t *out) {
  char *scale_name = malloc(strlen(name) + sizeof "_scale");
  if (!scale_name) {
    fprintf(stderr, "hkc quantize: out of memory\n");
    return -1;
  }
  sprintf(scale_name, "%s_scale", name);
  uint32_t clash;
  if (hk_weights_find(w, scale_name, &clash) == HK_OK) {
    fprintf(stderr, "hkc quantize: %s: the checkpoint already has %s (is it quantized already?)\n", in_path,
            scale_name);
    free(scale_name);
    return -1;
  }
  const int64_t rows = wi->dims[0], cols = wi->dims[1];
  const int64_t br = o->block_rows ? o->block_rows : 1, bc = o->block_rows ? o->block_cols : cols;
  const int64_t srows = (rows + br - 1) / br, scols = (cols + bc - 1) / bc;
  out_tensor_t *qt = &out[0], *st = &out[1];
  *qt = (out_tensor_t){.name = hkc_strdup(name), .dtype = o->dtype == HK_DTYPE_I8 ? "I8" : "F8_E4M3", .rank = 2,
                       .dims = {rows, cols}, .bytes = (size_t)(rows * cols)};
  *st = (out_tensor_t){.name = scale_name, .dtype = "F32", .rank = 2, .dims = {srows, scols},
                       .bytes = (size_t)(srows * scols) * sizeof(float)};
  qt->owned = malloc(qt->bytes);
  st->owned = malloc(st->bytes);
  if (!qt->name || !qt->owned || !st->owned) {
    fprintf(stderr, "hkc quantize: out of memory\n");
    return -1;
  }
  qt->data = qt->owned;
  st->data = st->owned;
  return quantize_tensor(o, wi, qt->owned, st->owned, br, bc, scols);
}

static int quantize_file(const char *in_path, const char *out_path, const quant_opts_t *o, int quiet) {
  hk_weights_t *w = NULL;
  if (hk_weights_open_file(in_path, NULL, &w) != HK_OK) {
    fprintf(stderr, "hkc quantize: %s\n", hk_last_error());
    return -1;
  }
  const uint32_t n_in = hk_weights_count(w);
  out_tensor_t *t = calloc((size_t)n_in * 2 + 3, sizeof *t);
  size_t n = 0, n_quant = 0, n_tied = 0, bytes_in = 0, bytes_out = 0;
  int rc = -1;
  if (!t) goto oom;
  for (uint32_t i = 0; i < n_in; i++) {
    hk_weights_tensor_info_t wi;
    (void)hk_weights_tensor_info(w, i, &wi);
    bytes_in += wi.bytes;
    if (!selected(o, &wi)) { /* as it is */
      t[n] = (out_tensor_t){.name = hkc_strdup(wi.name), .dtype = wi.dtype_name, .rank = wi.rank, .data = wi.data,
                            .bytes = wi.bytes};
      if (!t[n].name) goto oom;
      memcpy(t[n].dims, wi.dims, sizeof t[n].dims);
      bytes_out += t[n++].bytes;
      continue;
    }
    const int r = add_quantized(w, in_path, o, &wi, wi.name, &t[n]);
    n += 2;
    if (r != 0) goto fail;
    bytes_out += t[n - 2].bytes + t[n - 1].bytes;
    n_quant++;
  }
  uint32_t at;
  if (o->lm_head && hk_weights_find(w, QUANT_HEAD, &at) != HK_OK && hk_weights_find(w, QUANT_TIED_TABLE, &at) == HK_OK) {
    hk_weights_tensor_info_t wi; /* tied embeddings: the head's own quantized copy of the table */
    (void)hk_weights_tensor_info(w, at, &wi);
    if (float_matrix(&wi)) {
      const int r = add_quantized(w, in_path, o, &wi, QUANT_HEAD, &t[n]);
      n += 2;
      if (r != 0) goto fail;
      bytes_out += t[n - 2].bytes + t[n - 1].bytes;
      n_quant++;
      n_tied = 1;
    }
  }
  if (n_quant == 0) {
    fprintf(stderr, "hkc quantize: %s: no 2-D F32, F16 or BF16 tensor is named with", in_path);
    for (int i = 0; i < o->n_match; i++) fprintf(stderr, "%s %s", i ? "," : "", o->match[i]);
    fprintf(stderr, " (--match)\n");
    goto done;
  }
  size_t hlen = 0;
  char *header = header_json(t, n, o, &hlen);
  if (!header) goto oom;
  uint8_t len8[8];
  for (int b = 0; b < 8; b++) len8[b] = (uint8_t)((uint64_t)hlen >> (8 * b));
  hkc_chunk_t *chunks = malloc((n + 2) * sizeof *chunks);
  if (!chunks) {
    free(header);
    goto oom;
  }
  chunks[0] = (hkc_chunk_t){len8, 8};
  chunks[1] = (hkc_chunk_t){header, hlen};
  for (size_t i = 0; i < n; i++) chunks[2 + i] = (hkc_chunk_t){t[i].data, t[i].bytes};
  char err[512];
  if (hkc_file_replace(out_path, chunks, n + 2, 0666, err, sizeof err) != 0) {
    fprintf(stderr, "hkc quantize: %s\n", err);
  } else {
    rc = 0;
    if (!quiet)
      printf("wrote %s: %zu tensor(s) quantized to %s (%s%s), %zu copied; %.1f MB -> %.1f MB\n", out_path, n_quant,
             hkc_dtype_name(o->dtype), o->block_rows ? "blocks" : "a scale per row",
             n_tied ? "; " QUANT_HEAD " from the tied " QUANT_TIED_TABLE : "", n - 2 * n_quant, bytes_in / 1e6,
             bytes_out / 1e6);
  }
  free(chunks);
  free(header);
  goto done;
oom:
  fprintf(stderr, "hkc quantize: out of memory\n");
  goto done;
fail: /* reported */
done:
  for (size_t i = 0; t && i < n; i++) {
    free(t[i].name);
    free(t[i].owned);
  }
  free(t);
  hk_weights_destroy(w);
  return rc;
}

static void help(void) {
  fputs(k_usage, stdout);
  hkc_cli_common_help(0, 0);
}

int hkc_cmd_quantize(int argc, char **argv) {
  static const struct option longopts[] = {{"output", required_argument, NULL, 'o'},
                                           {"dtype", required_argument, NULL, OPT_QUANT_DTYPE},
                                           {"match", required_argument, NULL, OPT_MATCH},
                                           {"block", required_argument, NULL, OPT_BLOCK},
                                           {"no-lm-head", no_argument, NULL, OPT_NO_LM_HEAD},
                                           COMMON_LONG_OPTIONS,
                                           {NULL, 0, NULL, 0}};
  hkc_cli_t cli;
  hkc_cli_init(&cli, "quantize", "hkc quantize IN.safetensors -o OUT.safetensors --dtype int8|fp8_e4m3", help, 0);
  quant_opts_t o = {.dtype = HK_DTYPE_COUNT_, .lm_head = 1};
  const char *in = NULL, *out = NULL;
  int c;
  while ((c = hkc_cli_next(&cli, argc, argv, "o:", longopts)) != -1) {
    if (c == HKC_CLI_STOP) return cli.rc;
    if (c == OPT_QUANT_DTYPE) {
      if (!strcmp(optarg, "int8")) o.dtype = HK_DTYPE_I8;
      else if (!strcmp(optarg, "fp8_e4m3")) o.dtype = HK_DTYPE_FP8_E4M3;
      else return hkc_cli_usage(&cli, "--dtype expects int8 or fp8_e4m3, got '%s'", optarg), 2;
    } else if (c == OPT_MATCH) {
      if (o.n_match == QUANT_MAX_MATCH) return hkc_cli_usage(&cli, "at most %d --match suffixes", QUANT_MAX_MATCH), 2;
      if (!*optarg) return hkc_cli_usage(&cli, "--match expects a non-empty name suffix"), 2;
      o.match[o.n_match++] = optarg;
    } else if (c == OPT_NO_LM_HEAD) {
      o.lm_head = 0;
    } else if (c == OPT_BLOCK) {
      char *end;
      errno = 0;
      const long long r = strtoll(optarg, &end, 10);
      const long long k = *end == ',' ? strtoll(end + 1, &end, 10) : 0;
      if (errno || *end || r < 1 || k < 1 || r > INT32_MAX || k > INT32_MAX)
        return hkc_cli_usage(&cli, "--block expects ROWS,COLS (positive integers), got '%s'", optarg), 2;
      o.block_rows = r, o.block_cols = k;
    } else {
      out = optarg; /* 'o' */
    }
  }
  if (optind < argc) in = argv[optind++];
  if (optind < argc) return hkc_cli_usage(&cli, "unexpected argument %s", argv[optind]), 2;
  if (!in) return hkc_cli_usage(&cli, "no checkpoint given"), 2;
  if (!out) return hkc_cli_usage(&cli, "no output given (-o OUT.safetensors)"), 2;
  if (o.dtype == HK_DTYPE_COUNT_) return hkc_cli_usage(&cli, "no --dtype given (int8 or fp8_e4m3)"), 2;
  if (!o.n_match) o.match[o.n_match++] = "_proj.weight";
  return quantize_file(in, out, &o, cli.quiet) == 0 ? 0 : 1;
}
