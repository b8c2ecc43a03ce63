#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job, end to end on the CPU: build hkc, compile specs/bert_layer.yaml for the
# host target into a pack signed with a throwaway key (build/demo.key, made once), inspect
# it, and run it at batch 8 through libhkrt, trusting that key (a pack with host code is
# refused unless a trusted key signed it: docs/EMBEDDING.md, "Trust").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
[ -f build/demo.key ] || ./build/hkc keygen -o build/demo.key
./build/hkc build specs/bert_layer.yaml -o build/bert_layer.hkpack --target host --sign build/demo.key
./build/hkc inspect build/bert_layer.hkpack --trust build/demo.key.pub
./build/hkc run --random-params build/bert_layer.hkpack --batch 8 --save-outputs build/bert_outputs --trust build/demo.key.pub
