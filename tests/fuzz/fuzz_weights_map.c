/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_weights_map: the name map reader of --weights-map (hkc run and hkc build) on arbitrary
 * bytes, through hkc_weights_map_parse (the text of a map file).
 *
 * A map that parses has at most its documented number of entries; each is two non-empty
 * names without blanks, NULs or line ends, the pack name never a comment and never mapped
 * twice; writing the entries back one per line ("PACK_NAME CHECKPOINT_NAME\n") gives a map
 * that parses to the same pairs in the same order.
 *
 * Seeds in corpus/weights_map/: maps as hkc import hf writes them (comments, blank lines,
 * tabs, CRLF), and near misses (a line with one or three names, a name mapped twice, a NUL
 * byte, control bytes in a name, no final newline).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"

/* The documented limit (docs/WEIGHTS.md; weights_map.c). */
#define FUZZ_MAP_MAX 16384u

static void check_name(const char *s) {
  if (!s || !*s) abort();
  for (; *s; s++)
    if (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n') abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull; /* the reader reports to stderr: keep the fuzzer's log readable */
  if (!devnull) devnull = fopen("/dev/null", "w");
  FILE *saved = stderr;
  if (devnull) stderr = devnull;
  hkc_weights_map_t map, again;
  if (hkc_weights_map_parse("fuzz.map", (const char *)data, size, &map) == 0) {
    if (map.count > FUZZ_MAP_MAX || (map.count && !map.names)) abort();
    size_t len = 1;
    for (uint32_t i = 0; i < map.count; i++) {
      check_name(map.names[i].tensor);
      check_name(map.names[i].weights);
      if (map.names[i].tensor[0] == '#') abort();
      for (uint32_t k = 0; k < i; k++)
        if (strcmp(map.names[k].tensor, map.names[i].tensor) == 0) abort();
      len += strlen(map.names[i].tensor) + strlen(map.names[i].weights) + 2;
    }
    char *text = malloc(len);
    if (!text) abort();
    size_t o = 0;
    for (uint32_t i = 0; i < map.count; i++)
      o += (size_t)sprintf(text + o, "%s %s\n", map.names[i].tensor, map.names[i].weights);
    if (hkc_weights_map_parse("again.map", text, o, &again) != 0 || again.count != map.count) abort();
    for (uint32_t i = 0; i < map.count; i++)
      if (strcmp(again.names[i].tensor, map.names[i].tensor) != 0 ||
          strcmp(again.names[i].weights, map.names[i].weights) != 0)
        abort();
    hkc_weights_map_free(&again);
    free(text);
    hkc_weights_map_free(&map);
  }
  stderr = saved;
  return 0;
}
