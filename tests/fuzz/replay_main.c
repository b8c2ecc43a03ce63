/* SPDX-License-Identifier: Apache-2.0 */
/* Replays every file of a corpus directory through LLVMFuzzerTestOneInput, so the
 * saved corpus runs under ctest on every build (no libFuzzer needed). Exit 0 when
 * every input returned without crashing; fails when the directory is empty. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  DIR *dir = opendir(argv[1]);
  if (!dir) {
    perror(argv[1]);
    return 1;
  }
  int count = 0;
  struct dirent *entry;
  char path[4096];
  while ((entry = readdir(dir)) != NULL) {
    if (entry->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", argv[1], entry->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc(size > 0 ? (size_t)size : 1);
    if (!data || fread(data, 1, (size_t)size, f) != (size_t)size) {
      fprintf(stderr, "cannot read %s\n", path);
      return 1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, (size_t)size);
    free(data);
    count++;
  }
  closedir(dir);
  printf("replayed %d inputs from %s\n", count, argv[1]);
  return count > 0 ? 0 : 1;
}
