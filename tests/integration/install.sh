#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hkc in other people's builds: `cmake --install` of this build into a prefix that is then
# moved (every installed file must find the others by relative path), and three projects
# outside the tree that use it, each running a host pack once and checking its outputs
# against a double-precision reference (examples/consumer-cmake/main.c):
#  - examples/consumer-cmake: find_package(hkrt CONFIG) + hkc_add_pack, linked with
#    hkrt::hkrt and hkrt::hkrt_static; the pack is rebuilt when the spec changes, not otherwise;
#  - a project written here, built out of its source tree: hkc_add_pack(... WEIGHTS
#    weights/w.safetensors WEIGHTS_MAP weights/names.txt), relative to its source dir, stores the
#    weights (the pack's outputs equal a weight-less pack's run with --weights); a changed
#    checkpoint or map rebuilds the pack, which then holds the new weights; OPTIONS --weights is
#    refused at configure time;
#  - examples/consumer-pkgconfig: `pkg-config --cflags --libs hkrt` (and --static with libhkrt.a);
#  - examples/consumer-subdir: add_subdirectory(hkc), which must build without tests.
# Also: the installed Python package (lib/python3/dist-packages/hkrt) loads the installed libhkrt
# with no HKRT_LIBRARY or LD_LIBRARY_PATH and runs a host pack through Session.run
# (tests/python/run_check.py, with NumPy), the package pip-installed on its own finds the
# prefix's libhkrt through the hkc on PATH, and the installed importers run (hkc import hf;
# hkc import onnx when NumPy and onnx are there).
# Sanitizer builds skip (exit 77): their libraries need the sanitizer runtime in every consumer;
# the release pass runs this test.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}" "${HK_BUILD_DIR:?}"
if [ "${HK_SANITIZED:-0}" = 1 ]; then
  echo "skipped: a sanitizer build's libhkrt needs the sanitizer runtime in its consumers (the release pass runs this)"
  exit 77
fi
cmake=${HK_CMAKE:-cmake}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HKC_CACHE_DIR=${HKC_CACHE_DIR:-$work/cache}
fail() { echo "FAIL: $*"; exit 1; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# ---- the install, then moved
"$cmake" --install "$HK_BUILD_DIR" --prefix "$work/p0" > "$work/install.log"
mv "$work/p0" "$work/prefix"
prefix=$work/prefix
pc=$(find "$prefix" -name hkrt.pc)
[ -n "$pc" ] || fail "no hkrt.pc installed: $(cat "$work/install.log")"
libdir=$(cd "$(dirname "$pc")/.." && pwd)
for f in bin/hkc include/hk/hkrt.h include/hk/pack_format.h share/bash-completion/completions/hkc; do
  [ -f "$prefix/$f" ] || fail "$f not installed"
done
for f in libhkrt.a cmake/hkrt/hkrtConfig.cmake cmake/hkrt/hkrtConfigVersion.cmake cmake/hkrt/HkcPack.cmake; do
  [ -f "$libdir/$f" ] || fail "$libdir/$f not installed"
done
soname=$(readelf -d "$libdir/libhkrt.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ "$soname" =~ ^libhkrt\.so\.[0-9]+$ ]] && [ -f "$libdir/$soname" ] || fail "SONAME '$soname'"
version=$(sed -n 's/^Version: //p' "$pc")
grep -q "PACKAGE_VERSION \"$version\"" "$libdir/cmake/hkrt/hkrtConfigVersion.cmake" || fail "versions of hkrt.pc and hkrtConfigVersion.cmake differ"
[ -L "$libdir/libhkrt.so" ] && [ -f "$libdir/libhkrt.so.$version" ] || fail "libhkrt.so.$version and its links"
"$prefix/bin/hkc" --version | grep -q "$version" || fail "hkc --version: $("$prefix/bin/hkc" --version 2>&1)"
# `hkc import` runs the importer installed next to hkc (bin/hkc-import), wherever the prefix moved.
[ -x "$prefix/bin/hkc-import" ] || fail "bin/hkc-import not installed"
printf '%s\n' '{"model_type": "llama", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,' \
  '"intermediate_size": 24, "max_position_embeddings": 32}' > "$work/config.json"
HKC_PYTHON=${HK_PYTHON:-/usr/bin/python3} "$prefix/bin/hkc" import hf "$work/config.json" -o "$work/imported.yaml" \
  --seq 16 -q || fail "installed hkc import hf"
grep -q "^  - repeat:" "$work/imported.yaml" && [ -s "$work/imported.map" ] || fail "installed hkc import hf wrote nothing"
# `hkc import onnx`: bin/hkc-import-onnx, the entry point, finds its package (share/hkc/python/hkc_onnx) by
# its path relative to bin/ -- checked on a one-Gemm model written with the onnx package (without it: a note)
[ -x "$prefix/bin/hkc-import-onnx" ] && [ -f "$prefix/share/hkc/python/hkc_onnx/cli.py" ] \
  || fail "bin/hkc-import-onnx or share/hkc/python/hkc_onnx not installed"
pyo=${HK_PYTHON:-/usr/bin/python3}
if "$pyo" -c "import numpy, onnx" > /dev/null 2>&1; then
  "$pyo" - "$work/gemm.onnx" <<'EOF'
import sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper, save
w = numpy_helper.from_array(np.ones((8, 4), np.float32), "w")
g = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])], [w])
save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), sys.argv[1])
EOF
  (cd / && HKC_PYTHON=$pyo "$prefix/bin/hkc" import onnx "$work/gemm.onnx" -o "$work/gemm.yaml" \
    --weights-out "$work/gemm.safetensors" > "$work/onnx.log" 2>&1) || fail "installed hkc import onnx: $(cat "$work/onnx.log")"
  grep -q "op: gemm, in: \[x, w\], trans_b: true" "$work/gemm.yaml" || fail "installed hkc import onnx wrote no gemm"
else
  echo "note: $pyo cannot import numpy and onnx; the installed hkc import onnx is not run"
fi

# ---- the Python package (python/hkrt) finds the installed libhkrt by its relative path
py=${HK_PYTHON:-/usr/bin/python3}
if [ -x "$py" ]; then
  [ -f "$prefix/lib/python3/dist-packages/hkrt/_install_paths.py" ] || fail "the hkrt Python package is not installed"
  got=$(cd / && env -u HKRT_LIBRARY PYTHONPATH="$prefix/lib/python3/dist-packages" "$py" -c \
        "import hkrt; print(hkrt.load_library()); print(hkrt.version())") || fail "import hkrt from the prefix: $got"
  [[ "$(head -n 1 <<<"$got")" == "$libdir/$soname" ]] || fail "installed hkrt loaded $(head -n 1 <<<"$got"), not $libdir/$soname"
  [ "$(tail -n 1 <<<"$got")" = "$version" ] || fail "hkrt.version() $(tail -n 1 <<<"$got"), want $version"
  "$prefix/bin/hkc" build "$HK_SOURCE_DIR/tests/specs/op_elementwise.yaml" -o "$work/py.hkpack" --target host -q
  if "$py" -c "import numpy" 2>/dev/null; then
    # a host pack through Session.run(**inputs) against a float64 reference, from the prefix
    (cd / && env -u HKRT_LIBRARY -u LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$prefix/lib/python3/dist-packages" \
      "$py" "$HK_SOURCE_DIR/tests/python/run_check.py" "$work/py.hkpack" "$libdir") > "$work/py.log" 2>&1 ||
      fail "Session.run with the installed hkrt: $(cat "$work/py.log")"
  else
    echo "note: no NumPy for $py; the installed package's Session.run is not checked"
  fi
  # the package pip-installed on its own (no _install_paths.py) finds the prefix through the
  # hkc on PATH (P/bin/hkc -> P/lib/libhkrt.so.N), unless the linker's paths have a libhkrt
  if "$py" -m pip --version > /dev/null 2>&1; then
    cp -r "$HK_SOURCE_DIR/python" "$work/pysrc"
    rm -rf "$work/pysrc/build" "$work/pysrc"/*.egg-info
    "$py" -m pip install -q --no-build-isolation --no-deps --no-index --disable-pip-version-check \
      --root-user-action=ignore --target "$work/pure" "$work/pysrc" > "$work/pip.log" 2>&1 ||
      fail "pip install ./python: $(cat "$work/pip.log")"
    if [ -n "$("$py" -c "import ctypes.util; print(ctypes.util.find_library('hkrt') or '')")" ]; then
      echo "note: this machine's linker paths have a libhkrt; the lookup through the hkc on PATH is not checked"
    else
      got=$(cd / && env -u HKRT_LIBRARY -u LD_LIBRARY_PATH PATH="$prefix/bin:/usr/bin:/bin" PYTHONPATH="$work/pure" \
            "$py" -c "import hkrt; print(hkrt.load_library())" 2>&1) || fail "pip-installed hkrt with hkc on PATH: $got"
      [ "$got" = "$libdir/$soname" ] || fail "pip-installed hkrt with $prefix/bin on PATH loaded $got, not $libdir/$soname"
    fi
  else
    echo "note: no pip for $py; the pip-installed package's lookup through PATH is not checked"
  fi
else
  echo "note: no $py; the installed Python package is not checked"
fi

# ---- find_package(hkrt) + hkc_add_pack
cp "$HK_SOURCE_DIR/tests/specs/op_elementwise.yaml" "$work/spec.yaml"
"$cmake" -S "$HK_SOURCE_DIR/examples/consumer-cmake" -B "$work/cm" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCONSUMER_SPEC="$work/spec.yaml" > "$work/cm.log" 2>&1 || fail "configure: $(cat "$work/cm.log")"
"$cmake" --build "$work/cm" -j2 > "$work/cm.log" 2>&1 || fail "build: $(cat "$work/cm.log")"
"$work/cm/consumer" "$work/cm/elementwise.hkpack" || fail "consumer (hkrt::hkrt)"
"$prefix/bin/hkc" inspect "$work/cm/elementwise.hkpack" > "$work/cm-inspect.txt"
grep -q "signature: none" "$work/cm-inspect.txt" || fail "hkc_add_pack without SIGN_KEY signed the pack (--no-sign)"
"$work/cm/consumer_static" "$work/cm/elementwise.hkpack" || fail "consumer_static (hkrt::hkrt_static)"
grep -qx "$soname" <<<"$(needed "$work/cm/consumer")" || fail "consumer does not load $soname"
grep -q hkrt <<<"$(needed "$work/cm/consumer_static")" && fail "consumer_static loads libhkrt.so"
"$cmake" --build "$work/cm" > "$work/cm2.log" 2>&1
grep -q "hkc build" "$work/cm2.log" && fail "the pack was rebuilt with nothing changed"
sed -i 's/batch_sizes: \[1, 5\]/batch_sizes: [1, 5, 8]/' "$work/spec.yaml"
"$cmake" --build "$work/cm" > "$work/cm3.log" 2>&1 || fail "rebuild: $(cat "$work/cm3.log")"
grep -q "3 batch size" "$work/cm3.log" || fail "a changed spec did not rebuild the pack: $(cat "$work/cm3.log")"
"$work/cm/consumer" "$work/cm/elementwise.hkpack" > /dev/null || fail "consumer on the rebuilt pack"

# ---- hkc_add_pack(WEIGHTS, WEIGHTS_MAP): paths from the source dir, a changed file rebuilds
if [ -x "$py" ] && "$py" -c 'import numpy' 2>/dev/null; then
  mkdir -p "$work/wsrc/weights"
  cp "$HK_SOURCE_DIR/tests/specs/op_elementwise.yaml" "$work/wsrc/spec.yaml" # f32 params row [1001], one [1]
  cat > "$work/wsrc/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(hkrt_weights_consumer LANGUAGES C)
find_package(hkrt CONFIG REQUIRED)
hkc_add_pack(NAME weighted SPEC spec.yaml TARGETS host WEIGHTS weights/w.safetensors WEIGHTS_MAP weights/names.txt
             OUTPUT weighted.hkpack ALL)
CMAKE
  write_weights() { # write_weights SCALE: row = linspace(-1, 1) * SCALE as model.row (F32), one (F16: converted)
    "$py" - "$work/wsrc/weights/w.safetensors" "$1" <<'PY'
import json, struct, sys
import numpy as np
t = {"model.row": np.linspace(-1, 1, 1001, dtype="<f4") * np.float32(sys.argv[2]), "one": np.array([0.5], "<f2")}
h, at, blob = {}, 0, b""
for n, a in t.items():
    h[n] = {"dtype": "F32" if a.dtype == np.float32 else "F16", "shape": list(a.shape),
            "data_offsets": [at, at + a.nbytes]}
    at += a.nbytes; blob += a.tobytes()
j = json.dumps(h).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(j)) + j + blob)
PY
  }
  write_weights 1
  printf 'row model.row\n' > "$work/wsrc/weights/names.txt"
  "$prefix/bin/hkc" build "$work/wsrc/spec.yaml" --target host -o "$work/bare.hkpack" -q
  wrun() { "$prefix/bin/hkc" run --allow-unsigned-native "$@" --batch 5 --runs 1 --warmup 0 > /dev/null; }
  same_as_checkpoint() { # the pack's outputs = the weight-less pack's, bound to the checkpoint at run time
    rm -rf "$work/wout" "$work/wref"
    wrun "$work/wb/weighted.hkpack" --save-outputs "$work/wout" &&
      wrun "$work/bare.hkpack" --weights "$work/wsrc/weights/w.safetensors" \
        --weights-map "$work/wsrc/weights/names.txt" --save-outputs "$work/wref" 2> /dev/null || return 1
    for y in y_relu y_gelu y_silu; do cmp -s "$work/wout/$y.npy" "$work/wref/$y.npy" || return 1; done
  }
  # configured from another directory than the source dir: relative paths must not follow it
  (cd "$work" && "$cmake" -S wsrc -B wb -DCMAKE_PREFIX_PATH="$prefix" > "$work/wb.log" 2>&1) ||
    fail "configure (WEIGHTS): $(cat "$work/wb.log")"
  "$cmake" --build "$work/wb" > "$work/wb.log" 2>&1 || fail "build (WEIGHTS): $(cat "$work/wb.log")"
  grep -q "converting 1 tensor of $work/wsrc/weights/w.safetensors from F16 to F32" "$work/wb.log" ||
    fail "hkc_add_pack WEIGHTS: no conversion note naming the source dir's file: $(cat "$work/wb.log")"
  "$prefix/bin/hkc" inspect "$work/wb/weighted.hkpack" | grep -q "weights: 2 param(s)" || fail "the pack stores no weights"
  same_as_checkpoint || fail "the pack's outputs are not those of its checkpoint"
  "$cmake" --build "$work/wb" > "$work/wb2.log" 2>&1
  grep -q "hkc build" "$work/wb2.log" && fail "the weighted pack was rebuilt with nothing changed"
  cp "$work/wb/weighted.hkpack" "$work/weighted-1.hkpack"
  touch -d '-1 minute' "$work/wb/weighted.hkpack" # older than the new checkpoint, whatever the clock's resolution
  write_weights 3
  "$cmake" --build "$work/wb" > "$work/wb3.log" 2>&1 || fail "rebuild (WEIGHTS): $(cat "$work/wb3.log")"
  grep -q "hkc build" "$work/wb3.log" || fail "a changed checkpoint did not rebuild the pack: $(cat "$work/wb3.log")"
  cmp -s "$work/wb/weighted.hkpack" "$work/weighted-1.hkpack" && fail "the rebuilt pack holds the old weights"
  same_as_checkpoint || fail "the rebuilt pack's outputs are not those of the new checkpoint"
  touch -d '-1 minute' "$work/wb/weighted.hkpack"
  printf '# pack name, checkpoint name\nrow model.row\n' > "$work/wsrc/weights/names.txt"
  "$cmake" --build "$work/wb" > "$work/wb4.log" 2>&1 || fail "rebuild (WEIGHTS_MAP): $(cat "$work/wb4.log")"
  grep -q "hkc build" "$work/wb4.log" || fail "a changed name map did not rebuild the pack: $(cat "$work/wb4.log")"
  sed -i 's|WEIGHTS weights/w.safetensors WEIGHTS_MAP weights/names.txt|OPTIONS --weights weights/w.safetensors|' \
    "$work/wsrc/CMakeLists.txt"
  grep -q "OPTIONS --weights" "$work/wsrc/CMakeLists.txt" || fail "the test's edit of CMakeLists.txt did not apply"
  if "$cmake" -S "$work/wsrc" -B "$work/wb5" -DCMAKE_PREFIX_PATH="$prefix" > "$work/wb5.log" 2>&1 ||
     ! grep -q "give the checkpoint as WEIGHTS" "$work/wb5.log"; then
    fail "OPTIONS --weights was not refused: $(cat "$work/wb5.log")"
  fi
else
  echo "note: no NumPy for $py; hkc_add_pack's WEIGHTS are not checked"
fi

# ---- pkg-config, shared and static
mkdir "$work/pc"
PKG_CONFIG_PATH="$libdir/pkgconfig" make -s -C "$HK_SOURCE_DIR/examples/consumer-pkgconfig" O="$work/pc" \
  > "$work/pc.log" 2>&1 || fail "pkg-config consumer: $(cat "$work/pc.log")"
"$work/pc/consumer" "$work/pc/elementwise.hkpack" || fail "consumer (pkg-config --libs hkrt)"
# --cflags names hkrt's own include folder only; --libs alone (no LD_LIBRARY_PATH, no -rpath of
# the consumer's) finds libhkrt.so.N in this non-system prefix
cflags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags hkrt)
read -r -a cflag_words <<<"$cflags"
[ ${#cflag_words[@]} = 1 ] && [[ ${cflag_words[0]} == -I* ]] &&
  [ "$(cd "${cflag_words[0]#-I}" && pwd -P)" = "$(cd "$prefix/include" && pwd -P)" ] ||
  fail "pkg-config --cflags hkrt: '$cflags', expected only -I of $prefix/include"
(unset LD_LIBRARY_PATH; "$work/pc/consumer" "$work/pc/elementwise.hkpack" > /dev/null) ||
  fail "the pkg-config consumer does not run without LD_LIBRARY_PATH"
"$work/pc/consumer_static" "$work/pc/elementwise.hkpack" || fail "consumer_static (pkg-config --static)"
grep -q hkrt <<<"$(needed "$work/pc/consumer_static")" && fail "pkg-config consumer_static loads libhkrt.so"

# ---- add_subdirectory(hkc): builds hkc, libhkrt and the pack, no tests
"$cmake" -S "$HK_SOURCE_DIR/examples/consumer-subdir" -B "$work/sd" -DHKC_SOURCE_DIR="$HK_SOURCE_DIR" \
  > "$work/sd.log" 2>&1 || fail "configure: $(cat "$work/sd.log")"
targets=$("$cmake" --build "$work/sd" --target help)
grep -Eq "_test$|_replay$|hk_example|hk_bench" <<<"$targets" && fail "a subproject builds tests or examples"
"$cmake" --build "$work/sd" -j2 > "$work/sd.log" 2>&1 || fail "build: $(cat "$work/sd.log")"
"$work/sd/consumer" "$work/sd/elementwise.hkpack" || fail "consumer (add_subdirectory)"
echo "install: ok"
