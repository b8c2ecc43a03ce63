#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU-machine half of the Hugging Face check (proof on real model code): the
# configurations in tests/device/hf/ (a 2-layer BERT at bert-base sizes, one GPT-2 block at
# GPT-2 small sizes, one Llama-3-8B decoder layer) imported with `hkc import hf` and built for
# sm_90a into build-dev/hf/. tests/device/hf_models.py then builds the transformers modules
# from the same configurations on the H200 and compares.
#   bash tests/device/hf_prepare.sh      # here (after tests/device/prepare.sh or bench/run.py ... --prepare)
#   bash tests/device/hf_device.sh       # on the H200, build-dev carried
set -euo pipefail
cd "$(dirname "$0")/../.."
export HKC_KEY=${HKC_KEY:-$PWD/build-dev/signing.key} # packs built on one machine run on the other: both trust this key (docs/CLI.md, "Signing")
[ -x build-dev/hkc ] || { cmake -S . -B build-dev -DCMAKE_BUILD_TYPE=Release >/dev/null; cmake --build build-dev -j"$(nproc)" --target hkc hkrt; }
bash scripts/carry_libs.sh build-dev
mkdir -p build-dev/hf
target=${HK_GPU_TARGET:-sm_90a}
for m in bert:128 gpt2:128 llama:512; do
  name=${m%%:*} seq=${m##*:}
  # the modules' state dicts have no prefix (BertModel, GPT2Model, LlamaModel): --prefix '';
  # NAME_mask: with the padding mask (an i32 input lengths [batch])
  for variant in "" _mask; do
    build-dev/hkc import hf "tests/device/hf/$name.json" -o "build-dev/hf/$name$variant.yaml" \
      --weights-map-out "build-dev/hf/$name$variant.map" --prefix '' --seq "$seq" --batch-sizes 1,4 -q \
      ${variant:+--padding-mask}
    build-dev/hkc build "build-dev/hf/$name$variant.yaml" -o "build-dev/hf/$name$variant.hkpack" --target "$target" \
      --tuning-db specs/tuning/h200.db -q
  done
done
ls -la build-dev/hf
