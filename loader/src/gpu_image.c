/* Bounds checks of GPU code objects before they reach a driver (see gpu_internal.h). */
#include <string.h>

#include "gpu_internal.h"
#include "util_internal.h"

#define ELF64_EHDR_SIZE 64u
#define ELF64_SHDR_SIZE 64u
#define ELF_SHT_NOBITS 8u
#define BUNDLE_MAGIC "__CLANG_OFFLOAD_BUNDLE__"
#define BUNDLE_MAGIC_SIZE 24u

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static bool elf_ok(const uint8_t *p, size_t size, const char **why) {
  *why = "truncated ELF header";
  if (size < ELF64_EHDR_SIZE) return false;
  *why = "not a 64-bit little-endian ELF object";
  if (p[4] != 2 || p[5] != 1) return false;
  uint64_t phoff = rd64(p + 32), shoff = rd64(p + 40);
  uint16_t phentsize = rd16(p + 54), phnum = rd16(p + 56), shentsize = rd16(p + 58), shnum = rd16(p + 60);
  *why = "ELF program headers outside the object";
  if (phnum && !hk_range_ok(phoff, (uint64_t)phentsize * phnum, size)) return false;
  *why = "ELF section headers outside the object";
  if (shnum && (shentsize < ELF64_SHDR_SIZE || !hk_range_ok(shoff, (uint64_t)shentsize * shnum, size))) return false;
  *why = "an ELF section lies outside the object";
  for (uint32_t i = 0; i < shnum; i++) {
    const uint8_t *sh = p + shoff + (uint64_t)i * shentsize;
    if (rd32(sh + 4) != ELF_SHT_NOBITS && !hk_range_ok(rd64(sh + 24), rd64(sh + 32), size)) return false;
  }
  return true;
}

/* Layout: magic, u64 entry count, entries {u64 offset, u64 size, u64 id_size, id bytes}. */
static bool bundle_ok(const uint8_t *p, size_t size, const char **why) {
  *why = "truncated offload bundle";
  uint64_t pos = BUNDLE_MAGIC_SIZE;
  if (!hk_range_ok(pos, 8, size)) return false;
  uint64_t n = rd64(p + pos);
  pos += 8;
  for (uint64_t i = 0; i < n; i++) {
    if (!hk_range_ok(pos, 24, size)) return false;
    uint64_t off = rd64(p + pos), len = rd64(p + pos + 8), id = rd64(p + pos + 16);
    pos += 24;
    *why = "an offload bundle entry lies outside the object";
    if (!hk_range_ok(pos, id, size) || !hk_range_ok(off, len, size)) return false;
    pos += id;
    *why = "truncated offload bundle";
  }
  return true;
}

bool hk_gpu_image_ok(const void *image, size_t size, bool allow_bundle, const char **out_why) {
  const uint8_t *p = image;
  if (size >= 4 && memcmp(p, "\x7f" "ELF", 4) == 0) return elf_ok(p, size, out_why);
  if (allow_bundle && size >= BUNDLE_MAGIC_SIZE && memcmp(p, BUNDLE_MAGIC, BUNDLE_MAGIC_SIZE) == 0)
    return bundle_ok(p, size, out_why);
  *out_why = allow_bundle ? "not an ELF code object or offload bundle" : "not an ELF cubin";
  return false;
}
