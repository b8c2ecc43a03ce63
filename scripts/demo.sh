#!/usr/bin/env bash
# The main job, end to end on the CPU: build hkc, compile specs/bert_layer.yaml for the
# host target into a pack, inspect it, and run it at batch 8 through libhkrt.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
./build/hkc build specs/bert_layer.yaml -o build/bert_layer.hkpack --target host
./build/hkc inspect build/bert_layer.hkpack
./build/hkc run build/bert_layer.hkpack --batch 8 --save-outputs build/bert_outputs
