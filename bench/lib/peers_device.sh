#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Device half of `bench/run.py peers` (bench/run.py peers bert|llama --device runs it). From the
# repository root, with build-dev/ made by `bench/run.py peers --prepare` on the CPU machine
# carried along; one call per spec, each under 10 minutes:
#
#   bash bench/lib/peers_device.sh bert     # build-dev/peers/bert_layer.{yaml,hkpack}, its batch sizes
#   bash bench/lib/peers_device.sh llama    # build-dev/peers/llama_block.{yaml,hkpack}
#
# Steps: versions; hkc's build time on this machine's CPUs (the cores torch.compile uses:
# a cold build with an empty cache, one warm build; PEERS_DEVICE_BUILD=0 skips it);
# bench/lib/peers.py (hkc cold start; eager, eager + CUDA graph and hkc per batch with the
# float64 check; torch.compile per batch; torch.compile's first call in fresh processes;
# max-autotune per batch, smallest batch first); the markdown report and the plot of what
# was measured. Arguments after the first go to peers.py (--skip-max-autotune,
# --batches 32,128, --systems eager,max-autotune, --no-torch-cold, --cold-runs 0, ...).
#
# Time: PEERS_BUDGET_S (default 540 s) bounds the whole call: peers.py prints its estimate
# first, skips what would not fit (each skip is a row in the table and the JSON) and
# leaves time for the report. Output: $OUT/peers_PART.{jsonl,log,md,png} (PEERS_TAG=x:
# peers_PART_x.*, for a follow-up call); the table last.
# Exit 1 on any output mismatch or hkc failure.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcjson carried in build-dev (scripts/carry_libs.sh)
part=${1:?usage: bash bench/lib/peers_device.sh bert|llama|SPEC_NAME [peers.py arguments]}
shift
case $part in
  bert) name=bert_layer ;;
  llama) name=llama_block ;;
  *) name=$part ;;
esac
start=$(date +%s)
budget=${PEERS_BUDGET_S:-540}
out=${OUT:-/tmp/peers-out}
mkdir -p "$out"
spec=build-dev/peers/$name.yaml
pack=build-dev/peers/$name.hkpack
if [ ! -f "$pack" ] || [ ! -f "$spec" ]; then
  echo "peers_device: no $pack or $spec: run 'bench/run.py peers --prepare' on the CPU machine and carry build-dev"
  exit 2
fi
base=peers_$part${PEERS_TAG:+_$PEERS_TAG}   # PEERS_TAG names a follow-up call's files apart
jsonl=$out/$base.jsonl
log=$out/$base.log
: > "$jsonl"
export PYTHONUNBUFFERED=1
tmp=$(mktemp -d /tmp/peers.XXXXXX)
# torch.compile in the main run starts from empty on-disk caches (compile times are cold)
export TORCHINDUCTOR_CACHE_DIR=$tmp/inductor TRITON_CACHE_DIR=$tmp/triton
{
  echo "peers_device: $name, budget ${budget} s, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv,noheader || true
  build-dev/hkc --version
  python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)' || true
  echo "commit $(cat build-dev/peers/commit.txt 2>/dev/null || echo unknown)"
} 2>&1 | tee "$log"
if [ "${PEERS_DEVICE_BUILD:-1}" = 1 ]; then
  timeout 120 bash bench/lib/build_times.sh --where device --specs "$spec" --targets sm_90a --warm-runs 1 \
    --out "$jsonl" 2>&1 | tee -a "$log" || echo "peers_device: hkc build on this machine failed or took over 120 s" | tee -a "$log"
fi
left=$((budget - ($(date +%s) - start) - 15))
python3 bench/lib/peers.py "$spec" "$pack" --out "$jsonl" --budget "$left" "$@" 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
python3 bench/lib/peers_report.py "$jsonl" > "$out/$base.md" 2>> "$log" || echo "peers_device: report failed" | tee -a "$log"
python3 bench/lib/plot_peers.py "$jsonl" -o "$out/$base.png" >> "$log" 2>&1 || echo "peers_device: no plot (see the log)" | tee -a "$log"
rm -rf "$tmp"
echo "peers_device: $part done in $(($(date +%s) - start)) s, exit $rc; files: $(cd "$out" && ls | tr '\n' ' ')"
exit "$rc"
