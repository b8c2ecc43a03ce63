/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The smallest application that embeds libhkrt: open a pack, make a session for one
 * batch size, bind every tensor, run, read the outputs. Copy this into your app.
 *
 *   cc run_pack.c -Iloader/include -Lbuild -lhkrt -o run_pack
 *   ./run_pack model.hkpack 8 KEY.pub         (trust packs signed by this key: hkc keygen)
 *   ./run_pack model.hkpack 8 --allow-unsigned   (an unsigned pack you built yourself)
 *
 * Inputs and params here are filled with a fixed pattern; a real application binds
 * its own buffers (device memory for GPU targets).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk/hkrt.h"

/* float -> IEEE half / bfloat16, enough for filling demo data (truncating). */
static uint16_t to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, exp = (x >> 23) & 0xff, man = x & 0x7fffff;
  int e = (int)exp - 112;
  if (e <= 0) return (uint16_t)sign; /* tiny values flush to zero in this demo */
  if (e >= 31) return (uint16_t)(sign | 0x7c00);
  return (uint16_t)(sign | (uint32_t)e << 10 | man >> 13);
}

static float from_half(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, x;
  x = exp == 0 ? sign : exp == 31 ? sign | 0x7f800000 | man << 13 : sign | (exp + 112) << 23 | man << 13;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static void fill(void *buf, const hk_tensor_info_t *info, size_t count) {
  for (size_t i = 0; i < count; i++) {
    float v = (float)((int)(i % 17) - 8) / 16.0f; /* values in [-0.5, 0.5] */
    if (info->element_type == HK_ELEMENT_I32) ((int32_t *)buf)[i] = (int32_t)(i % 7); /* ids, lengths */
    else if (info->element_type == HK_ELEMENT_F32) ((float *)buf)[i] = v;
    else if (info->element_type == HK_ELEMENT_F16) ((uint16_t *)buf)[i] = to_half(v);
    else {
      uint32_t x;
      memcpy(&x, &v, 4);
      ((uint16_t *)buf)[i] = (uint16_t)(x >> 16);
    }
  }
}

static float get(const void *buf, const hk_tensor_info_t *info, size_t i) {
  if (info->element_type == HK_ELEMENT_F32) return ((const float *)buf)[i];
  if (info->element_type == HK_ELEMENT_F16) return from_half(((const uint16_t *)buf)[i]);
  uint32_t x = (uint32_t)((const uint16_t *)buf)[i] << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* The trust of the open: the signer's public key (a KEY.pub file), or, for a pack that no
 * trusted key signed (its host or GPU code runs with this process's memory), the explicit
 * opt-in (--allow-unsigned-native, its older spelling, too). 0 / -1. */
static int trust_from_arg(const char *arg, uint8_t key[HK_PUBLIC_KEY_BYTES], hk_pack_open_options_t *o) {
  if (strcmp(arg, "--allow-unsigned") == 0 || strcmp(arg, "--allow-unsigned-native") == 0) {
    o->allow_unsigned_code = 1;
    return 0;
  }
  char text[256];
  FILE *f = fopen(arg, "r");
  size_t n = f ? fread(text, 1, sizeof text, f) : 0;
  if (f) fclose(f);
  if (hk_public_key_parse(text, n, key) != HK_OK) {
    fprintf(stderr, "%s: %s\n", arg, f ? hk_last_error() : "cannot read it");
    return -1;
  }
  o->trusted_keys = (const uint8_t(*)[HK_PUBLIC_KEY_BYTES])key;
  o->trusted_key_count = 1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3 && argc != 4) {
    fprintf(stderr, "usage: %s PACK BATCH [KEY.pub | --allow-unsigned]\n", argv[0]);
    return 2;
  }
  hk_pack_t *pack = NULL;
  hk_session_t *session = NULL;
  uint8_t key[HK_PUBLIC_KEY_BYTES];
  hk_pack_open_options_t open_options = {.struct_size = sizeof open_options};
  if (argc == 4 && trust_from_arg(argv[3], key, &open_options) != 0) return 2;
  if (hk_pack_open_file_ex(argv[1], &open_options, &pack) != HK_OK) {
    fprintf(stderr, "open: %s\n", hk_last_error());
    return 1;
  }
  hk_session_options_t options = {.struct_size = sizeof options, .batch = strtoull(argv[2], NULL, 10)};
  if (hk_session_create(pack, &options, &session) != HK_OK) {
    fprintf(stderr, "session: %s\n", hk_last_error());
    hk_pack_destroy(pack);
    return 1;
  }
  printf("pack %s on target %s, batch %s\n", hk_pack_name(pack), hk_session_target(session), argv[2]);

  uint32_t n = hk_session_tensor_count(session);
  void **buffers = calloc(n, sizeof *buffers);
  int rc = 1;
  for (uint32_t t = 0; t < n; t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(session, t, &info);
    buffers[t] = malloc(info.bytes);
    if (!buffers[t]) goto done;
    if (info.role != HK_TENSOR_OUTPUT) fill(buffers[t], &info, info.bytes / (info.element_type == HK_ELEMENT_F32 || info.element_type == HK_ELEMENT_I32 ? 4 : 2));
    if (hk_session_bind(session, info.name, buffers[t], info.bytes) != HK_OK) {
      fprintf(stderr, "bind: %s\n", hk_last_error());
      goto done;
    }
  }
  if (hk_session_run(session, NULL) != HK_OK) {
    fprintf(stderr, "run: %s\n", hk_last_error());
    goto done;
  }
  for (uint32_t t = 0; t < n; t++) {
    hk_tensor_info_t info;
    hk_session_tensor_info(session, t, &info);
    if (info.role != HK_TENSOR_OUTPUT) continue;
    printf("output %s:", info.name);
    for (size_t i = 0; i < 4 && i * (info.element_type == HK_ELEMENT_F32 ? 4 : 2) < info.bytes; i++)
      printf(" %g", get(buffers[t], &info, i));
    printf(" ...\n");
  }
  rc = 0;
done:
  for (uint32_t t = 0; t < n; t++) free(buffers[t]);
  free(buffers);
  hk_session_destroy(session);
  hk_pack_destroy(pack);
  return rc;
}
