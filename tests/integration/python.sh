#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The hkrt Python package (python/): `pip install --no-build-isolation` of it into a scratch
# folder (offline, Debian's python3-pip and python3-setuptools; without pip the tests use the
# source tree and say so), then tests/python/test_hkrt.py against this build's libhkrt
# (HKRT_LIBRARY) on a host pack: open, trust, tensors, bind checks, runs against a NumPy
# reference, set_batch, profile, errors. Needs python3 with NumPy (python3-numpy); without it,
# skips (exit 77). Sanitizer builds skip too: their libhkrt needs the sanitizer runtime
# preloaded into python.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}" "${HK_LIBHKRT:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
if [ "${HK_SANITIZED:-0}" = 1 ]; then
  echo "skipped: a sanitizer build's libhkrt cannot be loaded into python without its runtime (the release pass runs this)"
  exit 77
fi
"$PY" -c "import numpy" 2>/dev/null || { echo "skipped: no NumPy for $PY (python3-numpy)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HKC_CACHE_DIR=${HKC_CACHE_DIR:-$work/cache}

# pip builds in the folder it is given (build/, *.egg-info): a copy keeps the source clean.
site=$HK_SOURCE_DIR/python
if "$PY" -m pip --version > /dev/null 2>&1; then
  cp -r "$HK_SOURCE_DIR/python" "$work/src"
  rm -rf "$work/src/build" "$work/src"/*.egg-info
  "$PY" -m pip install -q --no-build-isolation --no-deps --no-index --disable-pip-version-check \
    --root-user-action=ignore --target "$work/site" "$work/src" > "$work/pip.log" 2>&1 ||
    { echo "FAIL: pip install ./python"; cat "$work/pip.log"; exit 1; }
  site=$work/site
  [ -f "$site/hkrt/__init__.py" ] && ls "$site" | grep -q '^hkrt-.*\.dist-info$' || { echo "FAIL: pip installed no hkrt"; exit 1; }
else
  echo "note: no pip for $PY; testing python/ from the source tree (PYTHONPATH)"
fi
# the tests must exercise the installed copy, not the source tree
PYTHONPATH=$site "$PY" -c "import hkrt, sys; sys.exit(not hkrt.__file__.startswith('$site/'))" ||
  { echo "FAIL: hkrt imported from elsewhere than $site"; exit 1; }

cd "$HK_SOURCE_DIR/tests/python"
PYTHONDONTWRITEBYTECODE=1 HKRT_LIBRARY=$HK_LIBHKRT PYTHONPATH=$site "$PY" -W error::ResourceWarning -m unittest -v test_hkrt 2>&1
echo "python: ok"
