#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The largest legal graph builds in seconds: a `repeat:` of 4096 four-node layers (16384 nodes,
# the documented maximum, from a spec of a few hundred bytes) at tiny dims, for the host. Name
# lookups while parsing and dependency planning used to compare every node with every other
# (minutes for this spec); a time limit far above what the build needs catches a return to
# that. The packs must hold every node: 16384 launches with --fusion none, and with fusion
# (gemm + relu pairs may fuse) between half of that and all of it.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

# Under the sanitizers (HK_SANITIZED=1: a Debug + ASan build, tens of times slower) the same
# paths run at a quarter of the size.
layers=4096
[ "${HK_SANITIZED:-0}" = 1 ] && layers=1024
cat > "$work/deep.yaml" <<EOF
hkc: 1
name: deep
dtype: f32
batch_sizes: [1, 2]
dims: {hidden: 8, layers: $layers}
inputs: {x: [batch, hidden]}
graph:
  - repeat:
      count: layers
      in: x
      out: y
      params: {g: [hidden], w1: [hidden, hidden], w2: [hidden, hidden]}
      body:
        - {name: n, op: rmsnorm, in: [x], gamma: g, out: h}
        - {name: a, op: gemm, in: [h, w1], out: u}
        - {name: r, op: relu, in: [u], out: v}
        - {name: b, op: gemm, in: [v, w2], residual: x, out: y}
outputs: [y]
EOF

# nodes PACK MIN MAX: every graph of the pack's one target has MIN..MAX launches
nodes() {
  "$HKC" inspect --json "$1" | "$PY" -c '
import json, sys
lo, hi = int(sys.argv[1]), int(sys.argv[2])
d = json.load(sys.stdin)
counts = [len(g["nodes"]) for t in d["targets"] for g in t["graphs"]]
print(counts)
sys.exit(0 if len(counts) == 2 and all(lo <= c <= hi for c in counts) else 1)' "$2" "$3"
}

for fusion in none auto; do
  start=$(date +%s%N)
  set +e
  msg=$(timeout 60 "$HKC" build "$work/deep.yaml" --target host --fusion $fusion -o "$work/deep_$fusion.hkpack" -q 2>&1)
  rc=$?
  set -e
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [ $rc -eq 124 ]; then bad "--fusion $fusion: the build ran past 60 s"; continue; fi
  if [ $rc -ne 0 ]; then bad "--fusion $fusion: exit status $rc: $msg"; continue; fi
  if [ $fusion = none ]; then want="$((4 * layers)) $((4 * layers))"; else want="$((2 * layers)) $((4 * layers))"; fi
  if counts=$(nodes "$work/deep_$fusion.hkpack" $want); then ok "--fusion $fusion: built in $ms ms, launches per graph $counts"
  else bad "--fusion $fusion: launches per graph $counts, expected $want"; fi
done
exit $fail
