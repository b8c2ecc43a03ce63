/* SPDX-License-Identifier: Apache-2.0 */
/* Checks of code objects before they reach a driver or the dynamic loader (image_internal.h,
 * gpu_internal.h). Every offset read from an object goes through hk_range_ok. */
#include <string.h>

#include "gpu_internal.h"
#include "image_internal.h"
#include "util_internal.h"

#define ELF64_EHDR_SIZE 64u
#define ELF64_PHDR_SIZE 56u
#define ELF64_SHDR_SIZE 64u
#define ELF64_SYM_SIZE 24u
#define ELF_PT_LOAD 1u
#define ELF_SHT_NOBITS 8u
#define ELF_SHT_DYNSYM 11u
#define ELF_STT_FUNC 2u
#define BUNDLE_MAGIC "__CLANG_OFFLOAD_BUNDLE__"
#define BUNDLE_MAGIC_SIZE 24u

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)rd16(p) | (uint32_t)rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* Program headers: the table inside the object, and each loadable segment's file bytes too
 * (a truncated shared object keeps its headers but loses the segments they map). */
static bool elf_segments_ok(const uint8_t *p, size_t size, const char **why) {
  uint64_t phoff = rd64(p + 32);
  uint16_t phentsize = rd16(p + 54), phnum = rd16(p + 56);
  *why = "ELF program headers outside the object";
  if (phnum && (phentsize < ELF64_PHDR_SIZE || !hk_range_ok(phoff, (uint64_t)phentsize * phnum, size))) return false;
  *why = "an ELF segment lies outside the object";
  for (uint32_t i = 0; i < phnum; i++) {
    const uint8_t *ph = p + phoff + (uint64_t)i * phentsize;
    uint64_t offset = rd64(ph + 8), filesz = rd64(ph + 32), memsz = rd64(ph + 40);
    if (rd32(ph) == ELF_PT_LOAD && (!hk_range_ok(offset, filesz, size) || filesz > memsz)) return false;
  }
  return true;
}

static bool elf_sections_ok(const uint8_t *p, size_t size, const char **why) {
  uint64_t shoff = rd64(p + 40);
  uint16_t shentsize = rd16(p + 58), shnum = rd16(p + 60);
  *why = "ELF section headers outside the object";
  if (shnum && (shentsize < ELF64_SHDR_SIZE || !hk_range_ok(shoff, (uint64_t)shentsize * shnum, size))) return false;
  *why = "an ELF section lies outside the object";
  for (uint32_t i = 0; i < shnum; i++) {
    const uint8_t *sh = p + shoff + (uint64_t)i * shentsize;
    if (rd32(sh + 4) != ELF_SHT_NOBITS && !hk_range_ok(rd64(sh + 24), rd64(sh + 32), size)) return false;
  }
  return true;
}

bool hk_elf_image_ok(const void *image, size_t size, uint16_t machine, uint16_t type, const char **why) {
  const uint8_t *p = image;
  *why = "truncated ELF header";
  if (size < ELF64_EHDR_SIZE) return false;
  *why = "not an ELF object";
  if (memcmp(p, "\x7f" "ELF", 4) != 0) return false;
  *why = "not a 64-bit little-endian ELF object";
  if (p[4] != 2 || p[5] != 1) return false;
  *why = "ELF object for another machine (e_machine)";
  if (machine && rd16(p + 18) != machine) return false;
  *why = type == HK_ET_DYN ? "ELF object is not a shared object (e_type)" : "ELF object of another type (e_type)";
  if (type && rd16(p + 16) != type) return false;
  return elf_segments_ok(p, size, why) && elf_sections_ok(p, size, why);
}

/* Section header i of a checked image. */
static const uint8_t *elf_section(const uint8_t *p, uint32_t i) { return p + rd64(p + 40) + (uint64_t)i * rd16(p + 58); }

bool hk_elf_defines_function(const void *image, size_t size, const char *name) {
  const uint8_t *p = image;
  uint16_t shnum = rd16(p + 60);
  size_t len = strlen(name);
  for (uint32_t i = 0; i < shnum; i++) {
    const uint8_t *sh = elf_section(p, i);
    uint32_t link = rd32(sh + 40);
    if (rd32(sh + 4) != ELF_SHT_DYNSYM || rd64(sh + 56) != ELF64_SYM_SIZE || link >= shnum) continue;
    const uint8_t *strtab = elf_section(p, link);
    uint64_t str_off = rd64(strtab + 24), str_size = rd64(strtab + 32);
    if (rd32(strtab + 4) == ELF_SHT_NOBITS) continue;
    uint64_t count = rd64(sh + 32) / ELF64_SYM_SIZE;
    for (uint64_t s = 0; s < count; s++) {
      const uint8_t *sym = p + rd64(sh + 24) + s * ELF64_SYM_SIZE;
      uint32_t at = rd32(sym);
      /* defined (st_shndx != 0), a function, and the name with its NUL inside the string table */
      if ((sym[4] & 0xf) != ELF_STT_FUNC || rd16(sym + 6) == 0 || !hk_range_ok(at, len + 1, str_size)) continue;
      if (memcmp(p + str_off + at, name, len + 1) == 0) return true;
    }
  }
  return false;
}

uint16_t hk_elf_host_machine(const char *target) {
  if (strcmp(target, "host-x86_64") == 0) return HK_EM_X86_64;
  if (strcmp(target, "host-aarch64") == 0) return HK_EM_AARCH64;
  return 0;
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

bool hk_gpu_image_ok(const void *image, size_t size, bool allow_bundle, uint16_t machine, const char **out_why) {
  const uint8_t *p = image;
  if (size >= 4 && memcmp(p, "\x7f" "ELF", 4) == 0) return hk_elf_image_ok(p, size, machine, 0, out_why);
  if (allow_bundle && size >= BUNDLE_MAGIC_SIZE && memcmp(p, BUNDLE_MAGIC, BUNDLE_MAGIC_SIZE) == 0)
    return bundle_ok(p, size, out_why);
  *out_why = allow_bundle ? "not an ELF code object or offload bundle" : "not an ELF cubin";
  return false;
}

bool hk_ptx_text_ok(const void *text, size_t size, const char **out_why) {
  const char *p = text;
  *out_why = "empty PTX text";
  if (size < 2) return false;
  *out_why = "PTX text is not NUL-terminated at the end of its range";
  if (p[size - 1] != '\0' || memchr(p, '\0', size - 1) != NULL) return false;
  return true;
}
