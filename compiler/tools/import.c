/* SPDX-License-Identifier: Apache-2.0 */
/* `hkc import FORMAT ...`: model importers. Both read a Python ecosystem's formats, so they are
 * Python scripts installed next to hkc (and copied there in the build tree): `hkc import hf`
 * runs python/hkc_import.py (`hkc-import`, the standard library only), `hkc import onnx`
 * python/hkc_import_onnx.py (`hkc-import-onnx`, NumPy and the onnx package). This file only
 * finds the script and hands over the arguments; the script does the work and prints its own
 * errors. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/tools.h"

/* Arguments passed on to the script, at most (far more than its options). */
#define IMPORT_MAX_ARGS 64

int hkc_tool_import(int argc, char **argv) {
  char exe[PATH_MAX], script[PATH_MAX + 16];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) {
    fprintf(stderr, "hkc import: cannot find the hkc binary's folder (/proc/self/exe): %s\n", hkc_strerror(errno));
    return 1;
  }
  exe[n] = '\0';
  char *slash = strrchr(exe, '/');
  if (slash) *slash = '\0';
  /* onnx: its own script, which takes the arguments after the format */
  const int onnx = argc > 0 && strcmp(argv[0], "onnx") == 0;
  if (onnx) argc--, argv++;
  snprintf(script, sizeof script, "%s/%s", exe, onnx ? "hkc-import-onnx" : "hkc-import");
  if (access(script, R_OK) != 0) {
    fprintf(stderr, "hkc import: the importer %s is missing (it is installed with hkc: cmake --install)\n", script);
    return 1;
  }
  if (argc > IMPORT_MAX_ARGS) {
    fprintf(stderr, "hkc import: too many arguments (at most %d)\n", IMPORT_MAX_ARGS);
    return 2;
  }
  /* HKC_PYTHON picks the interpreter (default: python3 on PATH); hf needs only the standard
   * library, onnx NumPy and the onnx package (it says so when they are missing). */
  const char *py = getenv("HKC_PYTHON");
  if (!py || !*py) py = "python3";
  char *args[IMPORT_MAX_ARGS + 3];
  args[0] = (char *)py;
  args[1] = script;
  for (int i = 0; i < argc; i++) args[2 + i] = argv[i];
  args[2 + argc] = NULL;
  fflush(NULL);
  execvp(py, args);
  fprintf(stderr, "hkc import: cannot run %s (%s): the importers need Python 3 (set HKC_PYTHON to choose one)\n",
          py, hkc_strerror(errno));
  return 1;
}
