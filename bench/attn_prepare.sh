#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU-machine half of bench/attn_device.sh (issue 15): build-dev/ and the device harness's packs
# (tests/device/prepare.sh: every spec for host, sm_90 and sm_90a -- on sm_90a the attention
# nodes are attention_tma), then the attention packs: one single-op spec per case, one pack per
# configuration tag (bench/attn_bars.py prepare, build-dev/bench/attn/). Run here, then carry
# build-dev to the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/device/prepare.sh > /dev/null
# the harness's packs of the specs with attention again (attention_tma on sm_90a, the default)
mkdir -p build-dev/packs-attn
for s in specs/bert_layer.yaml specs/llama_block.yaml tests/specs/op_attention.yaml tests/specs/op_attention128.yaml; do
  p=build-dev/packs-attn/$(basename "$s" .yaml).hkpack
  build-dev/hkc build "$s" -o "$p" --target host,sm_90,sm_90a -q --tuning-db specs/tuning/h200.db
  build-dev/hkc inspect "$p" | grep -E "^  hk_attention" | grep -q "kernel=attention_tma" \
    || { echo "attn_prepare: $s has no attention_tma kernel on sm_90a"; exit 1; }
done
python3 bench/attn_bars.py prepare
du -sh build-dev
