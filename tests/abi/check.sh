#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libhkrt's binary interface (docs/ABI.md, "Checking the ABI"); two ctest tests
# (tests/CMakeLists.txt):
#   check.sh header       scripts/hkrt_abi.py's selftest (breaks planted in copies of hkrt.h must
#                         be found, additions accepted), then hk/hkrt.h against the reference
#                         dumps here (hkrt-<version>.txt): the last release of the header's
#                         SONAME must still hold, or the test fails saying to bump the SONAME or
#                         restore the layout
#   check.sh soname LIB   the built library (libhkrt.so.X.Y.Z): its SONAME is
#                         libhkrt.so.HKRT_SOVERSION of the header, its name carries the header's
#                         version, and it exports exactly the header's functions
# Needs python3 (HK_PYTHON), a C compiler (CC; the build's) and, for soname, readelf and nm.
set -euo pipefail
: "${HK_SOURCE_DIR:?}"
py=${HK_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || py=$(command -v python3 || true)
if [ -z "$py" ]; then
  echo "skipped: no python3 (scripts/hkrt_abi.py)"
  exit 77
fi
tool="$HK_SOURCE_DIR/scripts/hkrt_abi.py"
header="$HK_SOURCE_DIR/loader/include/hk/hkrt.h"
case "${1:-}" in
  header)
    "$py" "$tool" selftest "$header"
    "$py" "$tool" check "$header" "$HK_SOURCE_DIR"/tests/abi/hkrt-*.txt
    ;;
  soname)
    [ -n "${2:-}" ] || { echo "usage: check.sh soname LIBRARY" >&2; exit 2; }
    "$py" "$tool" soname "$header" "$2"
    ;;
  *)
    echo "usage: check.sh header | soname LIBRARY" >&2
    exit 2
    ;;
esac
