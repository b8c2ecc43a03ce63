# SPDX-License-Identifier: Apache-2.0
# Sourced by the generation tests (generate_hf.sh, tensor_parallel.sh; not a test itself): the
# Python with NumPy that gen_reference.py needs (exit 77, saying why, without it), a work folder
# removed on exit, the compile cache, the reference script, the tiny configs, and fail().
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
if ! "$PY" -c "import numpy" > /dev/null 2>&1; then
  echo "SKIPPED: $PY cannot import numpy (python3-numpy; or set HK_PYTHON)"
  exit 77
fi
export HKC_PYTHON=$PY
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HKC_CACHE_DIR=${HKC_CACHE_DIR:-$work/cache}
ref=$HK_SOURCE_DIR/tests/integration/gen_reference.py
cfgs=$HK_SOURCE_DIR/tests/integration/gen_configs
fail() { echo "FAIL: $*"; exit 1; }
