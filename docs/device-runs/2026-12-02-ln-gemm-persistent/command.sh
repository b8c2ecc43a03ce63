#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# (run as bench/s12/call1.sh from the repository root in the session; copied here next to its output)
# Session 12, device call 1: the layernorm epilogue (gemm_tma, sm_90a: a cluster of blocks per
# row tile, the rows' statistics through distributed shared memory).
# build-dev from `bash bench/peers_prepare.sh` carried:
#   1. numerics against PyTorch (tests/device/check.py): tests/specs/op_ln_gemm.yaml in bf16 and
#      f16 with gemm_ln=on (every layernorm after a gemm in the epilogue), a narrower copy (rows of
#      256 and 512) under five forced gemm_tma configurations (bn 64 / 128, mw 1 / 2, clusters of
#      2 to 8), bert_layer with gemm_ln=on;
#   2. hkc tune of the layernorm gemms' launch classes (specs/tuning/bert_ln.yaml, gemm_ln=on);
#   3. bert_layer with gemm_ln=on (tuned: 2. + specs/tuning/h200.db) against the default plan
#      (h200.db), whole graph interleaved (3 rounds), then the per-launch profile of each, every batch.
set -uo pipefail
cd "$(dirname "$0")/../../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
final=${OUT:-/tmp}
res=/tmp/s12c1
mkdir -p "$res"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > "$res/gpu.txt" 2>&1
sed 's/^dtype: bf16/dtype: f16/; s/^name: op_ln_gemm/name: op_ln_gemm_f16/' tests/specs/op_ln_gemm.yaml > /tmp/op_ln_gemm_f16.yaml
sed 's/n1: 768, n2: 320/n1: 256, n2: 512/; s/^name: op_ln_gemm/name: op_ln_gemm_narrow/' tests/specs/op_ln_gemm.yaml \
  > /tmp/op_ln_gemm_narrow.yaml
check() { # name spec options...
  local name=$1 spec=$2; shift 2
  if ! build-dev/hkc build "$spec" -o "/tmp/$name.hkpack" --target host,sm_90a -q --kernel-option gemm_ln=on "$@" \
      > "$res/build_$name.log" 2>&1; then
    echo "$name: build FAILED: $(head -c 400 "$res/build_$name.log")"; return
  fi
  build-dev/hkc inspect "/tmp/$name.hkpack" | grep -c "_ln[0-9]" > "$res/ln_kernels_$name.txt"
  timeout 120 python3 tests/device/check.py build-dev/hkc "$spec" "/tmp/$name.hkpack" "/tmp/w_$name" --gpu-target sm_90a \
    > "$res/check_$name.log" 2>&1
  echo "$name: rc $? $(grep -c FAIL "$res/check_$name.log") FAIL rows, $(grep -c '^ok\|OK\| ok' "$res/check_$name.log") ok rows, ln kernels $(cat "$res/ln_kernels_$name.txt")"
}
check op_ln_gemm tests/specs/op_ln_gemm.yaml
check op_ln_gemm_f16 /tmp/op_ln_gemm_f16.yaml
i=0
for cfg in pp=0,mw=1,bn=128,st=5,sk=1,cm=1,ts=0 pp=0,mw=2,bn=128,st=3,sk=1,cm=1,ts=0 pp=0,mw=1,bn=64,st=6,sk=1,cm=1,ts=0 \
           pp=0,mw=2,bn=64,st=4,sk=1,cm=1,ts=0 pp=0,mw=1,bn=128,st=3,sk=1,cm=1,ts=0; do
  i=$((i + 1))
  echo "cfg$i = $cfg"
  check "narrow_cfg$i" /tmp/op_ln_gemm_narrow.yaml --kernel-option "gemm_tma_cfg=$cfg"
done
check bert_layer_ln specs/bert_layer.yaml --tuning-db specs/tuning/h200.db
timeout 200 build-dev/hkc tune specs/tuning/bert_ln.yaml -t sm_90a -o "$res/ln.db" --top 8 --kernel-option gemm_ln=on \
  --report "$res/ln_tune.md" > "$res/tune.log" 2>&1
echo "tune rc $?"; grep -v "^#" "$res/ln.db"
db="--tuning-db specs/tuning/h200.db"
[ -s "$res/ln.db" ] && db="--tuning-db $res/ln.db $db"
build-dev/hkc build specs/bert_layer.yaml -o /tmp/b_ln.hkpack --target sm_90a $db -q --kernel-option gemm_ln=on
build-dev/hkc build specs/bert_layer.yaml -o /tmp/b_def.hkpack --target sm_90a --tuning-db specs/tuning/h200.db -q
build-dev/hkc inspect /tmp/b_ln.hkpack | grep -E "_ln768" | head -4
for b in 1 8 32 128; do
  for round in 1 2 3; do
    for v in ln def; do
      r=$(timeout 40 build-dev/hkc run "/tmp/b_$v.hkpack" --batch "$b" --random-params --runs 300 --warmup 30 2>&1 | grep -E "median" | tail -n 1)
      echo "bert b$b $v#$round: $r"
    done
  done
done 2>&1 | tee "$res/ab.log" | sed 's/target sm_90a, //'
for b in 1 8 32 128; do
  for v in ln def; do
    timeout 60 build-dev/hkc run "/tmp/b_$v.hkpack" --batch "$b" --random-params --runs 100 --warmup 10 \
      --profile --repeats 30 > "$res/profile_${v}_b$b.txt" 2>&1
    echo "$v b$b: $(grep -E 'ln|sum of|bubbles' "$res/profile_${v}_b$b.txt" | tr -s ' ' | tr '\n' ' ' | cut -c1-600)"
  done
done
# every gemm_tma candidate of bert's large gemms at batch 32 and 128 (what limits batch 128)
timeout 240 build-dev/hkc tune docs/device-runs/2026-12-02-ln-gemm-clusters/bert_gemms.yaml -t sm_90a -o "$res/gemms.db" --top 60 \
  --report "$res/gemms_tune.md" > "$res/gemms_tune.log" 2>&1
echo "gemms tune rc $?"; grep -v "^#" "$res/gemms.db"
tar -C /tmp -czf "$final/s12c1.tar.gz" s12c1
