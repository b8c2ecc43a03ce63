#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The hkrt Python package (python/) as a user installs it:
#  1. the wheel: scripts/build_wheel.py writes hkrt-V-py3-none-PLATFORM.whl from this build's
#     libhkrt (the same bytes as the build's own build/hkrt-*.whl, target python_wheel, when
#     there is one); its contents (hkrt/_libs/libhkrt.so.N and libcjson, a platform tag, a
#     RECORD that matches) are checked;
#  2. it is installed into a fresh venv (python3 -m venv --system-site-packages, for NumPy) with
#     `pip install --no-index` -- or `pip install --target` without the venv module, or
#     unpacked without pip, saying so -- and, with NO HKRT_LIBRARY or LD_LIBRARY_PATH and from
#     outside the checkout: `import hkrt` must load the wheel's libhkrt (and its libcjson),
#     tests/python/run_check.py runs a host pack through Session.run(**inputs) against a float64
#     reference, and tests/python/test_hkrt.py runs whole (open, trust, tensors, bind checks,
#     runs, run(inputs) and its batches, bf16 with and without ml_dtypes, set_batch, profile,
#     weights, generate, errors);
#  3. the pure package: `pip install --no-build-isolation ./python` (Debian's python3-pip and
#     python3-setuptools, offline), which carries no library, loads this build's libhkrt
#     through HKRT_LIBRARY.
# (The install prefix's copy, cmake --install, is install.sh's.) Needs python3 with NumPy
# (python3-numpy); without it, skips (exit 77). Sanitizer builds skip too: their libhkrt needs
# the sanitizer runtime preloaded into python.
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
fail() { echo "FAIL: $*"; exit 1; }

# ---- 1. the wheel
"$PY" "$HK_SOURCE_DIR/scripts/build_wheel.py" --library "$HK_LIBHKRT" -o "$work/dist" > "$work/wheel.log" 2>&1 ||
  fail "scripts/build_wheel.py: $(cat "$work/wheel.log")"
cat "$work/wheel.log"
wheels=("$work"/dist/hkrt-*.whl)
[ ${#wheels[@]} = 1 ] && [ -f "${wheels[0]}" ] || fail "no wheel in $work/dist"
whl=${wheels[0]}
plat=$("$PY" -c "import sysconfig, re; print(re.sub(r'[-.]', '_', sysconfig.get_platform()))")
[[ "$(basename "$whl")" == hkrt-*-py3-none-"$plat".whl ]] || fail "wheel $(basename "$whl"): want the tag py3-none-$plat"
if [ -n "${HK_BUILD_DIR:-}" ] && [ -f "$HK_BUILD_DIR/$(basename "$whl")" ]; then
  cmp -s "$whl" "$HK_BUILD_DIR/$(basename "$whl")" ||
    fail "$HK_BUILD_DIR/$(basename "$whl") differs from a wheel built now from $HK_LIBHKRT (a stale build?)"
  echo "the build's $(basename "$whl") is the same file"
else
  echo "note: the build has no $(basename "$whl") (HKC_PYTHON_WHEEL=OFF?); testing the one built here"
fi
soname=$(readelf -d "$HK_LIBHKRT" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
"$PY" - "$whl" "$soname" <<'EOF' || fail "the wheel's contents"
import base64, hashlib, sys, zipfile
whl, soname = sys.argv[1], sys.argv[2]
z = zipfile.ZipFile(whl)
names = set(z.namelist())
info = [n.split("/")[0] for n in names if n.endswith(".dist-info/WHEEL")][0]
want = {"hkrt/__init__.py", "hkrt/_lib.py", "hkrt/_pack.py", "hkrt/_libs/" + soname, "hkrt/_libs/libcjson.so.1",
        info + "/METADATA", info + "/RECORD", info + "/licenses/LICENSE"}
missing = want - names
assert not missing, "missing %s" % sorted(missing)
assert "hkrt/_install_paths.py" not in names
wheel = z.read(info + "/WHEEL").decode()
assert "Root-Is-Purelib: false" in wheel and "Tag: py3-none-linux" in wheel, wheel
assert (z.getinfo("hkrt/_libs/" + soname).external_attr >> 16) & 0o111, "libhkrt is not executable"
rows = [r.split(",") for r in z.read(info + "/RECORD").decode().splitlines()]
assert {r[0] for r in rows} == names, "RECORD lists %s" % sorted({r[0] for r in rows} ^ names)
for name, digest, size in rows:
    if name.endswith("/RECORD"):
        continue
    data = z.read(name)
    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert digest == want and int(size) == len(data), "RECORD row of %s" % name
print("wheel: %d files, %s and libcjson.so.1 in hkrt/_libs/, RECORD matches" % (len(names), soname))
EOF

# ---- 2. installed from the wheel, nothing in the environment pointing at a library
if "$PY" -m venv --system-site-packages "$work/venv" > "$work/venv.log" 2>&1 &&
   "$work/venv/bin/python" -m pip --version > /dev/null 2>&1; then
  how="a fresh venv"
  vpy=$work/venv/bin/python
  "$vpy" -m pip install -q --no-index --no-deps --disable-pip-version-check "$whl" > "$work/pip.log" 2>&1 ||
    fail "pip install $(basename "$whl") into a venv: $(cat "$work/pip.log")"
  site=$("$vpy" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  [ -f "$site/hkrt/_libs/$soname" ] || site=$("$vpy" -c "import sysconfig; print(sysconfig.get_paths()['platlib'])")
  pypath=
elif "$PY" -m pip --version > /dev/null 2>&1; then
  how="pip install --target (no venv module: python3-venv)"
  vpy=$PY
  site=$work/target
  "$PY" -m pip install -q --no-index --no-deps --disable-pip-version-check --root-user-action=ignore \
    --target "$site" "$whl" > "$work/pip.log" 2>&1 || fail "pip install --target: $(cat "$work/pip.log")"
  pypath=$site
else
  how="the wheel unpacked by zipfile (no pip for $PY: python3-pip)"
  vpy=$PY
  site=$work/target
  "$PY" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$whl" "$site"
  chmod +x "$site/hkrt/_libs/"*
  pypath=$site
fi
echo "installed into $how: $site"
[ -f "$site/hkrt/_libs/$soname" ] && [ -x "$site/hkrt/_libs/$soname" ] || fail "no executable $site/hkrt/_libs/$soname"
user_env=(env -u HKRT_LIBRARY -u LD_LIBRARY_PATH -u LD_PRELOAD PYTHONDONTWRITEBYTECODE=1 ${pypath:+PYTHONPATH=$pypath})
pack=$work/e.hkpack
"$HKC" build "$HK_SOURCE_DIR/tests/specs/op_elementwise.yaml" -o "$pack" --target host -q
(cd / && "${user_env[@]}" "$vpy" - "$site" <<'EOF') || fail "import hkrt from the wheel"
import os, sys
import hkrt
site = os.path.realpath(sys.argv[1])
assert os.path.realpath(hkrt.__file__).startswith(site + os.sep), "hkrt imported from %s" % hkrt.__file__
lib = hkrt.load_library()
assert os.path.realpath(lib).startswith(os.path.join(site, "hkrt", "_libs") + os.sep), "libhkrt loaded from %s" % lib
cjson = [l.split()[-1] for l in open("/proc/self/maps") if "libcjson" in l]
assert cjson and all(os.path.realpath(p).startswith(os.path.join(site, "hkrt", "_libs")) for p in cjson), cjson
print("import hkrt: the wheel's %s (libhkrt %s) and %s" % (os.path.basename(lib), hkrt.version(), os.path.basename(cjson[0])))
EOF
(cd / && "${user_env[@]}" "$vpy" "$HK_SOURCE_DIR/tests/python/run_check.py" "$pack" "$site/hkrt/_libs") ||
  fail "Session.run on a host pack with the wheel's hkrt"
cd "$HK_SOURCE_DIR/tests/python"
"${user_env[@]}" "$vpy" -W error::ResourceWarning -m unittest -v test_hkrt 2>&1

# ---- 3. the pure package (pip install ./python): no library inside, HKRT_LIBRARY names one
if "$PY" -m pip --version > /dev/null 2>&1; then
  # pip builds in the folder it is given (build/, *.egg-info): a copy keeps the source clean.
  cp -r "$HK_SOURCE_DIR/python" "$work/src"
  rm -rf "$work/src/build" "$work/src"/*.egg-info
  "$PY" -m pip install -q --no-build-isolation --no-deps --no-index --disable-pip-version-check \
    --root-user-action=ignore --target "$work/pure" "$work/src" > "$work/pip.log" 2>&1 ||
    { echo "FAIL: pip install ./python"; cat "$work/pip.log"; exit 1; }
  ls "$work/pure" | grep -q '^hkrt-.*\.dist-info$' && [ ! -e "$work/pure/hkrt/_libs" ] ||
    fail "pip install ./python: no hkrt dist-info, or a library inside"
  got=$(cd / && env -u LD_LIBRARY_PATH HKRT_LIBRARY="$HK_LIBHKRT" PYTHONPATH="$work/pure" "$PY" -c \
        "import hkrt; print(hkrt.__file__); print(hkrt.load_library())") || fail "the pure package: $got"
  [[ "$(head -n 1 <<<"$got")" == "$work/pure/"* ]] && [ "$(tail -n 1 <<<"$got")" = "$HK_LIBHKRT" ] ||
    fail "the pure package imported or loaded from elsewhere: $got"
  echo "pip install ./python: the pure package loads HKRT_LIBRARY's library"
else
  echo "note: no pip for $PY (python3-pip); pip install ./python is not checked"
fi
echo "python: ok"
