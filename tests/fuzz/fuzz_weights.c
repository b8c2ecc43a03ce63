/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_weights: safetensors checkpoints (hk_weights_open_memory) on arbitrary bytes.
 *
 * When a file opens, every record is read back and every byte of every tensor touched, so
 * ASan proves that what the checks accepted lies within the input; the dims must multiply
 * to the tensor's size. The same bytes also go through the name map parser of hkc run
 * --weights-map (hkc_weights_map_parse), the other text hkc takes from a user about weights.
 *
 * Seeds in corpus/weights/: small valid files (tensors of several dtypes, metadata, a
 * zero-size tensor, padding) and near misses.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hk/hkrt.h"
#ifndef HK_FUZZ_NO_MAP
#include "tools/tools.h"
#endif

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  hk_weights_t *w = NULL;
  if (hk_weights_open_memory(data, size, NULL, &w) == HK_OK) {
    for (uint32_t i = 0; i < hk_weights_count(w); i++) {
      hk_weights_tensor_info_t info;
      if (hk_weights_tensor_info(w, i, &info) != HK_OK) abort();
      uint32_t found;
      if (hk_weights_find(w, info.name, &found) != HK_OK || found != i) abort(); /* names are unique */
      uint64_t elems = 1;
      for (uint32_t d = 0; d < info.rank; d++) elems *= (uint64_t)info.dims[d];
      if (info.bytes && (info.bytes % elems != 0 || !info.data)) abort();
      for (size_t b = 0; b < info.bytes; b++) sink += ((const uint8_t *)info.data)[b];
      sink += strlen(info.dtype_name);
    }
    const char *v = hk_weights_metadata(w, "format");
    if (v) sink += strlen(v);
    hk_weights_destroy(w);
  }
#ifndef HK_FUZZ_NO_MAP
  static FILE *devnull; /* the map parser reports to stderr: keep the fuzzer's log readable */
  if (!devnull) devnull = fopen("/dev/null", "w");
  FILE *saved = stderr;
  if (devnull) stderr = devnull;
  hkc_weights_map_t map;
  if (hkc_weights_map_parse("fuzz", (const char *)data, size, &map) == 0) {
    for (uint32_t i = 0; i < map.count; i++) sink += strlen(map.names[i].tensor) + strlen(map.names[i].weights);
    hkc_weights_map_free(&map);
  }
  stderr = saved;
#endif
  return 0;
}
