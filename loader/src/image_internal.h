/* SPDX-License-Identifier: Apache-2.0 */
/*
 * image_internal.h -- checks of the code objects a pack carries (gpu_image.c), run on the
 * decompressed bytes before a dynamic loader or a GPU driver, which trust the objects'
 * headers, reads them. They catch damaged and mismatched objects cheaply; they are not a
 * defence against a well-formed hostile object (signatures are).
 */
#ifndef HK_IMAGE_INTERNAL_H
#define HK_IMAGE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ELF e_machine and e_type values of the objects hkc writes. */
#define HK_EM_X86_64 62u
#define HK_EM_AARCH64 183u
#define HK_EM_CUDA 190u
#define HK_EM_AMDGPU 224u
#define HK_ET_EXEC 2u
#define HK_ET_DYN 3u

/* True when [image, image + size) is a little-endian ELF64 object of `machine` (0: any) and
 * `type` (0: any) whose program headers, section headers, every section's bytes and every
 * loadable segment's file bytes lie inside it. False with a short reason in *out_why. */
bool hk_elf_image_ok(const void *image, size_t size, uint16_t machine, uint16_t type, const char **out_why);

/* True when a checked ELF image (hk_elf_image_ok) defines `name` as a function in its dynamic
 * symbol table (.dynsym): what dlsym would find. */
bool hk_elf_defines_function(const void *image, size_t size, const char *name);

/* The ELF machine of the host target named `target` ("host-x86_64"), 0 when unknown. */
uint16_t hk_elf_host_machine(const char *target);

#endif /* HK_IMAGE_INTERNAL_H */
