#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU-machine half of bench/skv_device.sh (issue 15 item 6, split-KV attention): build-dev/ (hkc,
# libhkrt and the shared libraries the GPU machine lacks; no harness packs) and the split-KV
# packs -- one single-op spec per case, one pack per tag (bench/attn_bars.py --set skv prepare,
# build-dev/bench/skv/) --, then the model's choice per case and the size to carry.
#   bash bench/skv_prepare.sh            # here (about 2-4 min on 2 cores); then carry build-dev
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release -DHKC_BUILD_TESTS=ON >/dev/null
nice cmake --build build-dev -j"${JOBS:-2}" --target hkc hkrt >/dev/null
bash scripts/carry_libs.sh build-dev
nice python3 bench/attn_bars.py --set skv prepare
python3 - <<'PY'
import json
idx = json.load(open("build-dev/bench/skv/tags.json"))
for case, tags in idx.items():
    d = tags.get("default", {})
    print("model's choice %-40s %s %s" % (case, d.get("kernel", "?"), d.get("cfg", "")))
PY
du -sh build-dev build-dev/bench/skv
