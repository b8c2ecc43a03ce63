/* SPDX-License-Identifier: Apache-2.0 */
/* Recomputes every checksum of an artifact in place (sections inside the buffer, the
 * section table, the header), so a test or the fuzzer can patch a record and still
 * reach verify's deeper checks. Written apart from the writer on purpose. */
#ifndef HK_PACK_REFIX_H
#define HK_PACK_REFIX_H
#include <stdint.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "hk/pack_format.h"

static inline void hk_test_refix(uint8_t *buf, size_t size) {
  if (size < sizeof(hk_pack_header_t)) return;
  hk_pack_header_t h;
  memcpy(&h, buf, sizeof h);
  uint64_t off = h.section_table_offset, count = h.section_count;
  if (count <= 4096 && off <= size && count * sizeof(hk_section_t) <= size - off) {
    for (uint64_t i = 0; i < count; i++) {
      hk_section_t s;
      memcpy(&s, buf + off + i * sizeof s, sizeof s);
      if (s.offset <= size && s.size <= size - s.offset) {
        s.checksum = XXH3_64bits(buf + s.offset, (size_t)s.size);
        memcpy(buf + off + i * sizeof s, &s, sizeof s);
      }
    }
    h.table_checksum = XXH3_64bits(buf + off, (size_t)(count * sizeof(hk_section_t)));
  }
  h.header_checksum = 0;
  h.header_checksum = XXH3_64bits(&h, sizeof h);
  memcpy(buf, &h, sizeof h);
}
#endif
