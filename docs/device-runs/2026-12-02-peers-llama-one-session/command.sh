#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s10/call1.sh from the repository root in the session; copied here next to its output)
# Session 10, device call 1 (build-dev from `bash bench/peers_prepare.sh` carried, plus
# build-dev/s10/bert_gelu_apart.{yaml,hkpack}: bert_layer with explicit groups that leave
# ffn_act (gelu) as a kernel of its own):
#   1. llama_block peers, every system, hkc as ONE session with its inputs rebound per call
#      (bench/peers.py --hkc-sessions one), then hkc alone per input set (the old protocol)
#      in the same call for the comparison;
#   2. bert_layer: gelu in ffn_up's epilogue (auto) against gelu apart, whole graph and
#      per launch, interleaved, every batch.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
PEERS_TAG=one PEERS_DEVICE_BUILD=0 PEERS_BUDGET_S=330 bash bench/peers_device.sh llama --no-torch-cold --hkc-sessions one
PEERS_TAG=perset PEERS_DEVICE_BUILD=0 PEERS_BUDGET_S=120 bash bench/peers_device.sh llama --no-torch-cold --systems hkc --cold-runs 0 2>&1 | tail -n 25
for b in 128 32 8 1; do
  for round in 1 2; do
    for v in fused apart; do
      pack=build-dev/peers/bert_layer.hkpack; [ $v = apart ] && pack=build-dev/s10/bert_gelu_apart.hkpack
      r=$(timeout 30 build-dev/hkc run "$pack" --batch "$b" --random-params --runs 300 --warmup 30 2>&1 | grep -E "median" | tail -n 1)
      echo "bert b$b gelu-$v#$round: $r"
    done
  done
  for v in fused apart; do
    pack=build-dev/peers/bert_layer.hkpack; [ $v = apart ] && pack=build-dev/s10/bert_gelu_apart.hkpack
    timeout 40 build-dev/hkc run "$pack" --batch "$b" --random-params --runs 200 --warmup 20 --profile --repeats 50 > "$final/profile_gelu_${v}_b$b.txt" 2>&1
  done
done
