#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Device half of `bench/run.py gemm --tune-bars`, one device call: hkc tune (gemm_tma alone) over the GEMM bars' standalone launches
# (build-dev/bench/gemm/{big,small,epi,swiglu}_*.yaml, from bench/lib/gemm_bars.py prepare), merged
# with specs/tuning/h200.db into OUT/h200.db (commit it as specs/tuning/h200.db); then the
# bars' default packs rebuilt with it and measured again (OUT/bars.jsonl, OUT/bars.log).
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcjson carried in build-dev (scripts/carry_libs.sh)
out=${OUT:-/tmp/hk-tune-bars}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
start=$(date +%s)
rc=0
dbs=()
for y in build-dev/bench/gemm/big_*.yaml build-dev/bench/gemm/small_*.yaml build-dev/bench/gemm/epi_*.yaml \
         build-dev/bench/gemm/swiglu_*.yaml; do
  n=$(basename "$y" .yaml)
  build-dev/hkc tune "$y" --target sm_90a --kernel-option gemm_tma=on -o "/tmp/$n.db" --top "${TUNE_TOP:-6}" \
    -j "$(nproc)" --report "/tmp/tune_$n.md" >> "$out/tune.log" 2>&1 && dbs+=("/tmp/$n.db") || { rc=1; echo "tune $n failed"; }
done
cat /tmp/tune_*.md > "$out/tune_bars.md"
echo "tuned ${#dbs[@]} specs ($(( $(date +%s) - start )) s)"
build-dev/hkc tune --merge specs/tuning/h200.db "${dbs[@]}" -o "$out/h200.db" >> "$out/tune.log" 2>&1 || rc=1
python3 bench/lib/gemm_bars.py prepare --keep --only '^(big|small|epi|swiglu)' --build-flags "--tuning-db $out/h200.db" \
  > "$out/prepare.log" 2>&1 || rc=1
python3 bench/lib/gemm_bars.py run --only '^(big|small|epi|swiglu)' --out "$out/bars.jsonl" > "$out/bars.log" 2>&1 || rc=1
echo "bars: $(grep -c 'NUMERICS FAIL' "$out/bars.log") numerics failures; gemm_tune_bars_device: $(( $(date +%s) - start )) s, exit $rc"
exit $rc
