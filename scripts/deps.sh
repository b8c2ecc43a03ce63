#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what hkc needs to build and test on Debian 12 / Ubuntu (needs root or sudo).
# Skips the install when every package is already present.
#   build + host target: cmake gcc pkg-config libyaml-dev libzstd-dev libxxhash-dev libsodium-dev
#     libcjson-dev (libsodium: Ed25519 pack signatures; cJSON: safetensors headers; both linked
#     into libhkrt) libhiredis-dev (the shared compile cache, HKC_CACHE_URL; linked into hkc only)
#     libzip-dev (.npz archives for hkc run --weights; linked into hkc only)
#   tests: redis-server (the shared compile cache's tests start their own; without it they
#          skip visibly) libcmocka-dev clang (sanitizers, libFuzzer) python3-numpy python3-yaml (reference;
#          libopenblas0-pthread makes its float64 matmuls ~7x faster than the reference BLAS; libhkrt
#          dlopens it (libopenblas.so.0, never linked) for the host target's f32 GEMMs)
#          python3-pip python3-venv (tests/integration/python.sh installs the hkrt wheel into a
#          fresh venv with pip, and pip-installs ./python; without them it says what it skipped)
#   AMD targets (hiprtc + comgr, dlopen'ed; ROCm 5.2 from Debian): libamdhip64-5 (+ -dev)
#     libamd-comgr2 rocm-device-libs libhiprtc-builtins5
#   NVIDIA targets: nvrtc from the CUDA toolkit (/usr/local/cuda or $HKC_CUDA_PATH); not
#     an apt package here -- without it the sm_* tests skip visibly.
#   `deps.sh models`: the model tests' extra packages only -- python3-torch and python3-onnx
#     (tests/integration/import_onnx.sh exports torch modules to ONNX and checks hkc import onnx
#     against torch; ~1 minute of apt, which scripts/test.sh runs while the build compiles).
set -euo pipefail
if [ "${1:-}" = models ]; then
  pkgs=(python3-torch python3-onnx)
else
  pkgs=(cmake gcc clang libclang-rt-dev make pkg-config libsodium-dev libcjson-dev libzip-dev libyaml-dev libzstd-dev libxxhash-dev libhiredis-dev redis-server libcmocka-dev python3-numpy python3-yaml libopenblas0-pthread
        python3-pip python3-venv
        libamdhip64-5 libamdhip64-dev libamd-comgr2 libamd-comgr-dev rocm-device-libs libhiprtc-builtins5)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
