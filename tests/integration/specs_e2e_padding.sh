#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Batch buckets through the real hkc binary: specs/bert_layer.yaml built for the host with
# batch sizes [1, 8, 32] runs batch 5 (padded to bucket 8) and batch 20 (to 32) and matches
# the NumPy reference (reference.py, independent of hkc) at those batch sizes; batch 64
# and batch 0 exit non-zero with a message listing the buckets and write nothing; the
# same spec with `batch_policy: exact` refuses batch 5 the same way.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# The spec with exactly the buckets this test is about (whatever bert_layer.yaml lists).
spec="$work/bert_buckets.yaml"
sed -E 's/^batch_sizes:.*/batch_sizes: [1, 8, 32]/' "$HK_SOURCE_DIR/specs/bert_layer.yaml" > "$spec"
grep -q '^batch_sizes: \[1, 8, 32\]$' "$spec"
"$HKC" build "$spec" -o "$work/b.hkpack" --target host -q

for b in 5 20; do
  out=$("$PY" "$HK_SOURCE_DIR/tests/integration/reference.py" "$HKC" "$work/b.hkpack" "$spec" "$b" "$work/ref-$b")
  echo "$out"
  bucket=$([ "$b" = 5 ] && echo 8 || echo 32)
  if ! grep -q "batch $b, bucket $bucket (padded)" <<<"$out"; then
    echo "FAIL batch $b: hkc run did not report running bucket $bucket padded"; fail=1
  fi
done

# refuse CASE WANT ARGS...: hkc run exits 1 with WANT in its message and creates no output directory.
refuse() {
  local name=$1 want=$2
  shift 2
  set +e
  msg=$("$HKC" run --random-params --allow-unsigned-native "$@" --runs 1 --warmup 0 --save-outputs "$work/out-$name" 2>&1)
  rc=$?
  set -e
  if [ $rc -ne 1 ]; then
    echo "FAIL $name: exit status $rc: $msg"; fail=1
  elif ! grep -qF "$want" <<<"$msg"; then
    echo "FAIL $name: message does not contain '$want': $msg"; fail=1
  elif [ -e "$work/out-$name" ]; then
    echo "FAIL $name: $work/out-$name was created"; fail=1
  else
    echo "ok   $name: $msg"
  fi
}
refuse batch64 "batch size 64 is larger than the largest batch size built into the artifact (batch sizes: 1, 8, 32)" \
  "$work/b.hkpack" --batch 64
# --batch 0 is refused by the option parser before the pack is opened
set +e; msg=$("$HKC" run --random-params --allow-unsigned-native "$work/b.hkpack" --batch 0 --save-outputs "$work/out-zero" 2>&1); rc=$?; set -e
if [ $rc -eq 0 ] || [ -e "$work/out-zero" ]; then echo "FAIL batch0: rc=$rc $msg"; fail=1; else echo "ok   batch0: $msg"; fi

exact="$work/bert_exact.yaml"
sed -E 's/^batch_sizes:.*/batch_sizes: [1, 8, 32]\nbatch_policy: exact/' "$HK_SOURCE_DIR/specs/bert_layer.yaml" > "$exact"
"$HKC" build "$exact" -o "$work/e.hkpack" --target host -q
refuse exact5 "batch size 5 was not built into the artifact and its batch policy is exact (batch sizes: 1, 8, 32)" \
  "$work/e.hkpack" --batch 5
# (inspect's output goes to a file first: `inspect | grep -q` under pipefail fails when grep
# exits at the first match and inspect is still writing -- SIGPIPE)
"$HKC" inspect "$work/e.hkpack" > "$work/e.txt" && grep -q "batch policy: exact" "$work/e.txt" \
  || { echo "FAIL inspect does not show the policy"; fail=1; }
"$HKC" inspect "$work/b.hkpack" > "$work/b.txt" && grep -q "batch policy: pad" "$work/b.txt" \
  || { echo "FAIL inspect does not show the policy"; fail=1; }
exit $fail
