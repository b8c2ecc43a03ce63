#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hkc build times (`bench/run.py build-times`), on the machine it runs on (the 2-core CPU machine; the GPU
# machine's CPUs too, from bench/lib/peers_device.sh): for each spec and target, all batch
# buckets,
#   cold  one build with an empty compile cache (a fresh HKC_CACHE_DIR): every kernel
#         generated and compiled
#   warm  the same build again with that cache filled, median of N (default 3)
# and the pack's size; once, the size of libhkrt.so (as built, and stripped).
# Writes JSON lines (kind "build", then one kind "sizes" for the loader) that
# bench/lib/peers_report.py reads, and prints a table.
#
#   bash bench/lib/build_times.sh [--specs "specs/bert_layer.yaml ..."] [--targets "sm_90 sm_90a"]
#                             [--warm-runs 3] [--hkc build-dev/hkc] [--hkrt build-dev/libhkrt.so]
#                             [--where cpu] [--out build-dev/peers/build_times.jsonl]
# Defaults: specs/bert_layer.yaml and specs/llama_block.yaml (those present); sm_90 (the
# bar: bert_layer cold <= 60 s on the 2-core machine) and sm_90a (what the H200 runs).
set -euo pipefail
cd "$(dirname "$0")/../.."
specs="" targets="sm_90 sm_90a" warm_runs=3 hkc=build-dev/hkc hkrt=build-dev/libhkrt.so where=cpu
out=build-dev/peers/build_times.jsonl
while [ $# -gt 0 ]; do
  case $1 in
    --specs) specs=$2; shift 2 ;;
    --targets) targets=$2; shift 2 ;;
    --warm-runs) warm_runs=$2; shift 2 ;;
    --hkc) hkc=$2; shift 2 ;;
    --hkrt) hkrt=$2; shift 2 ;;
    --where) where=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "build_times.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$specs" ]; then
  for s in specs/bert_layer.yaml specs/llama_block.yaml; do [ -f "$s" ] && specs="$specs $s"; done
fi
[ -x "$hkc" ] || { echo "build_times.sh: no hkc at $hkc (bench/run.py build-times --prepare builds build-dev/)" >&2; exit 2; }
mkdir -p "$(dirname "$out")"
work=$(mktemp -d /tmp/hk-build-times.XXXXXX)
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
jstr() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g')"; }

cpu=$(awk -F': *' '/model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || echo unknown)
cores=$(nproc)
version=$("$hkc" --version)
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
printf "%-14s %-7s %9s %9s %-22s %10s  %s\n" spec target "cold s" "warm s" "warm runs" "pack B" "load avg at start"
for spec in $specs; do
  name=$(basename "$spec" .yaml)
  batches=$(awk -F'[][]' '/^batch_sizes:/ { gsub(/ /, "", $2); print $2; exit }' "$spec")
  for target in $targets; do
    cache=$work/cache-$name-$target
    pack=$work/$name-$target.hkpack
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    t0=$(now)
    if ! HKC_CACHE_DIR=$cache "$hkc" build "$spec" -o "$pack" --target "$target" -q > "$work/log" 2>&1; then
      echo "build_times.sh: $name for $target failed:" >&2; tail -5 "$work/log" >&2
      printf '{"kind": "build", "spec": "%s", "target": "%s", "where": "%s", "error": %s}\n' "$name" "$target" \
        "$where" "$(jstr "$(tail -3 "$work/log")")" >> "$out"
      continue
    fi
    cold=$(secs "$t0" "$(now)")
    warm=""
    for ((i = 0; i < warm_runs; i++)); do
      t0=$(now)
      HKC_CACHE_DIR=$cache "$hkc" build "$spec" -o "$pack.warm" --target "$target" -q
      warm="$warm $(secs "$t0" "$(now)")"
    done
    wmed=$(echo "$warm" | median)
    bytes=$(stat -c %s "$pack")
    bar=null met=null
    if [ "$name" = bert_layer ] && [ "$target" = sm_90a ] && [ "$where" = cpu ]; then
      bar=30 met=$(awk -v c="$cold" 'BEGIN { print (c <= 30) ? "true" : "false" }')
    fi
    printf "%-14s %-7s %9s %9s %-22s %10s  %s\n" "$name" "$target" "$cold" "$wmed" "$warm" "$bytes" "$load"
    printf '{"kind": "build", "spec": "%s", "target": "%s", "where": "%s", "batch_sizes": [%s], "cold_s": %s, ' \
      "$name" "$target" "$where" "$batches" "$cold" >> "$out"
    printf '"warm_s": %s, "warm_runs_s": [%s], "pack_bytes": %s, "cores": %s, "cpu": %s, "loadavg": %s, ' \
      "$wmed" "$(echo $warm | tr ' ' ',')" "$bytes" "$cores" "$(jstr "$cpu")" "$(jstr "$load")" >> "$out"
    printf '"hkc_version": %s, "date_utc": "%s", "bar_s": %s, "met": %s}\n' "$(jstr "$version")" "$date" "$bar" \
      "$met" >> "$out"
  done
done
if [ -f "$hkrt" ]; then
  real=$(readlink -f "$hkrt")
  strip --strip-unneeded -o "$work/libhkrt.stripped" "$real"
  printf "libhkrt.so: %s bytes as built, %s stripped\n" "$(stat -c %s "$real")" "$(stat -c %s "$work/libhkrt.stripped")"
  printf '{"kind": "sizes", "where": "%s", "libhkrt_bytes": %s, "libhkrt_stripped_bytes": %s}\n' "$where" \
    "$(stat -c %s "$real")" "$(stat -c %s "$work/libhkrt.stripped")" >> "$out"
fi
echo "wrote $out"
