#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s9/call5.sh from the repository root in the session; copied here next to its output)
# Session 9, device call 5: rows_vec16 configurations (HKC_ROWS_CFG_16 at build time,
# build-dev/rs/cfgs.txt) on the norms of bert_layer (768 columns) and llama_block (4096):
# hkc run --profile, the norm launches' medians per configuration.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
while read -r i cfg; do
  for s in bert_layer:128,32,8,1 llama_block:16,4,1; do
    name=${s%%:*}
    for b in $(echo "${s#*:}" | tr , ' '); do
      r=$(timeout 30 build-dev/hkc run "build-dev/rs/${name}_$i.hkpack" --batch "$b" --random-params --runs 100 --warmup 10 \
          --profile --repeats 30 2>&1 | grep -E "norm|whole graph \(" | awk '/norm/ {printf "%s %s; ", $2, $4} /whole graph/ {printf "graph %s", $(NF-1)}')
      echo "cfg $cfg $name b$b: $r"
    done
  done
done < build-dev/rs/cfgs.txt
