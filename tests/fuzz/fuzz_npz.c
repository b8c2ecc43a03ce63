/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_npz: .npz archives (hkc run --weights FILE.npz) on arbitrary bytes, from memory
 * (hkc_npz_open_memory: libzip over zip_source_buffer, then the member name checks).
 *
 * When an archive opens, every member is read (hkc_npz_read: the size cap, inflate, CRC,
 * the .npy parser) with a cap of FUZZ_MAX_ELEMS elements, as for a param of that many: a
 * member that parses must fit under the cap (f2: two bytes an element), its shape must multiply to its element count,
 * and every element is touched, so ASan proves the data lies within what was allocated.
 * Names must be unique and findable (hkc_npz_find).
 *
 * Seeds in corpus/npz/: small archives NumPy wrote (savez, savez_compressed, f2/f4/f8, a
 * 0-d and an empty array, no members) and near misses (a member that is no .npy, a name
 * without .npy, a truncated archive, a flipped CRC, a member larger than the cap).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"

/* The element cap a member is read with: a small param, so that inflating is cheap and
 * larger members take the refusal path. */
#define FUZZ_MAX_ELEMS 4096u

static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static FILE *devnull; /* the reader reports to stderr: keep the fuzzer's log readable */
  if (!devnull) devnull = fopen("/dev/null", "w");
  FILE *saved = stderr;
  if (devnull) stderr = devnull;
  hkc_npz_t *npz;
  if (hkc_npz_open_memory("fuzz.npz", data, size, &npz) == 0) {
    const size_t cap = hkc_npz_member_limit(FUZZ_MAX_ELEMS);
    for (uint32_t i = 0; i < hkc_npz_count(npz); i++) {
      const char *name = hkc_npz_name(npz, i);
      uint32_t found;
      if (!name || hkc_npz_find(npz, name, &found) != 0 || found != i) abort(); /* unique, sorted */
      if (i && strcmp(hkc_npz_name(npz, i - 1), name) >= 0) abort();
      hkc_npy_t npy;
      if (hkc_npz_read(npz, i, cap, &npy) != 0) continue;
      size_t elems = 1;
      for (uint32_t d = 0; d < npy.rank; d++) elems *= (size_t)npy.dims[d];
      if (elems != npy.count || npy.count * 2 > cap || !npy.data) abort(); /* f2: the narrowest */
      for (size_t e = 0; e < npy.count; e++) sink += npy.data[e];
      hkc_npy_free(&npy);
    }
    if (hkc_npz_name(npz, hkc_npz_count(npz)) != NULL) abort();
    hkc_npz_destroy(npz);
  }
  /* the format sniffing of --weights on the same bytes */
  hkc_weights_format_t f = hkc_weights_format(data, size, NULL);
  if (f == HKC_WEIGHTS_NPZ && (size < 4 || data[0] != 'P')) abort();
  stderr = saved;
  return 0;
}
