#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""hkc import onnx: an ONNX model -> an hkc spec (YAML) and a safetensors file with the params
it needs. The importer is the package hkc_onnx (python/hkc_onnx/; its __init__ says how it works
and which module holds what); this is its entry point, which `hkc import onnx` runs (installed
as hkc-import-onnx, next to hkc).

usage: hkc_import_onnx.py MODEL.onnx -o SPEC.yaml --weights-out W.safetensors
                          [--name N] [--batch-sizes 1,8] [--dtype f32|f16|bf16]
                          [--padding-mask-as lengths|mask] [--seq N] [--dim NAME=N ...] [--seq-first]

Exit 0 on success; 1 with one line `error: ...` per problem (every ONNX node that cannot be
mapped, with its op type, its name, its inputs and why) otherwise; 2 on a usage error.
docs/IMPORT.md says what is mapped.
"""
import os
import sys

# Where the package is. Still the placeholder (starting with an at sign): next to this file, as in
# python/ of the source tree. The build tree's and the installed copies have the folder written in
# by CMake's configure_file, relative to this file's folder or absolute (CMakeLists.txt,
# cmake/HkcInstall.cmake).
PKGDIR = "@HKC_ONNX_PKGDIR@"


def main():
    try:
        import numpy  # noqa: F401
    except ImportError:  # one line, as every other error (docs/IMPORT.md), not a traceback
        sys.stderr.write("hkc import onnx: NumPy is needed and %s cannot import it (Debian: apt install "
                         "python3-numpy; or set HKC_PYTHON to an interpreter that has it)\n" % sys.executable)
        return 1
    here = os.path.dirname(os.path.realpath(__file__))
    pkgdir = here if PKGDIR.startswith("@") else os.path.join(here, PKGDIR)
    sys.path.insert(0, pkgdir)
    try:
        from hkc_onnx.cli import main as cli_main
    except ImportError as e:
        sys.stderr.write("hkc import onnx: cannot load the importer package hkc_onnx from %s (%s; it is installed "
                         "with hkc: cmake --install)\n" % (pkgdir, e))
        return 1
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
