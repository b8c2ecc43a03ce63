#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The traffic and roofline report through the real binary: `hkc inspect --plan` on real
# specs (every row has numbers, the totals are the sums of the rows, before fusion >=
# after, --batch picks one bucket, the reference parts are there), a pack without a
# PLAN section is refused with a clear message, and `hkc run --profile` on the host
# prints a positive time for every launch and leaves the outputs as a plain run does.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

check_plan() { # FILE EXPECTED-BUCKETS
  "$PY" - "$1" "$2" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
want_buckets = [int(b) for b in sys.argv[2].split()]
fail = []
def close(a, b, tol): return abs(a - b) <= tol
for col in ("MI250X", "MI300X", "H200", "gfx90a", "gfx942", "sm_90"):
    if col not in text: fail.append(f"column {col} missing")
blocks = re.split(r"\n(?=batch \d+: )", text)[1:]
buckets = [int(re.match(r"batch (\d+):", b).group(1)) for b in blocks]
if buckets != want_buckets: fail.append(f"buckets {buckets}, expected {want_buckets}")
for b in blocks:
    rows, totals = [], {}
    launches = int(re.match(r"batch \d+: (\d+) launch", b).group(1))
    for line in b.splitlines():
        if "|" not in line: continue
        left, right = line.split("|", 1)
        floors = [float(x.rstrip("x")) for x in right.split() if re.match(r"^[0-9.]+x?$", x)]
        f = left.split()
        if re.match(r"^\s+\d+\s", line):
            is_m = f[-1] == "M"
            nums = f[-3:-1] if is_m else f[-2:]
            rows.append((int(nums[0]), float(nums[1]), floors))
        for key in ("total (the rows)", "after fusion", "before fusion", "before/after"):
            if left.strip().startswith(key):
                nums = [x for x in f if re.match(r"^[0-9.]+x?$", x)]
                totals[key] = ([float(x.rstrip("x")) for x in nums[-2:]], floors)
    if len(rows) != launches: fail.append(f"{len(rows)} rows for {launches} launches"); continue
    if len(totals) != 4: fail.append(f"totals missing: {sorted(totals)}"); continue
    ncol = len(rows[0][2])
    if ncol < 3: fail.append(f"{ncol} floor columns")
    for r in rows:
        if r[0] <= 0 or r[1] <= 0 or len(r[2]) != ncol or any(x < 0 for x in r[2]): fail.append(f"bad row {r}")
    (tb, tf), tfl = totals["total (the rows)"]
    if tb != sum(r[0] for r in rows): fail.append(f"bytes total {tb} != sum {sum(r[0] for r in rows)}")
    if not close(tf, sum(r[1] for r in rows), 1e-6 * (len(rows) + 1)): fail.append(f"GFLOP total {tf} != sum")
    for c in range(ncol):
        if not close(tfl[c], sum(r[2][c] for r in rows), 1e-3 * (len(rows) + 1)): fail.append(f"floor total col {c}")
    (ab, af), afl = totals["after fusion"]
    (bb, bf), bfl = totals["before fusion"]
    if ab != tb or af != tf: fail.append("after-fusion totals differ from the rows")
    if bb < ab: fail.append(f"before fusion moves fewer bytes ({bb}) than after ({ab})")
    if any(bfl[c] < afl[c] for c in range(ncol)): fail.append("a floor before fusion is lower than after")
    for c in range(ncol):
        if afl[c] > tfl[c] + 1e-3: fail.append("whole-graph floor above the sum of the launches' floors")
    (rb, rf), rfl = totals["before/after"]
    if not close(rb, bb / ab, 0.006): fail.append(f"bytes ratio {rb}, expected {bb / ab:.3f}")
if fail:
    print("\n".join(fail)); print(text); sys.exit(1)
print(f"ok {sys.argv[1]}: buckets {buckets}")
EOF
}

for name in bert_layer mlp; do
  "$HKC" build "$HK_SOURCE_DIR/specs/$name.yaml" -o "$work/$name.hkpack" --target host -q
  "$HKC" inspect "$work/$name.hkpack" --plan > "$work/$name.plan"
done
check_plan "$work/bert_layer.plan" "1 8 32 128"
check_plan "$work/mlp.plan" "1 4"
"$HKC" inspect "$work/bert_layer.hkpack" --plan --batch 8 > "$work/bert8.plan"
check_plan "$work/bert8.plan" "8"
# bert at batch 8: qkv_proj reads x [8,128,768], w_qkv [768,2304], b_qkv and writes qkv, bf16
grep -Eq "^ +0  qkv_proj .* 9835008 +3\.626238  M " "$work/bert8.plan"
# attention reads the packed qkv once: 8*128*2304 + 8*128*768 halves
grep -Eq "^ +1  attn .* 6291456 +0\.402653  M " "$work/bert8.plan"

set +e
msg=$("$HKC" inspect "$work/mlp.hkpack" --plan --batch 3 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "no batch bucket 3 (buckets: 1 4)" <<<"$msg"
set +e
msg=$("$HKC" inspect "$HK_SOURCE_DIR/tests/fuzz/corpus/pack/valid_two_targets" --plan 2>&1); rc=$?
set -e
[ $rc -eq 1 ] && grep -q "has no PLAN section" <<<"$msg"

# run --profile on the host: one row per launch with a positive median, no floor on host.
"$HKC" run --random-params --allow-unsigned-native "$work/mlp.hkpack" --batch 4 --save-outputs "$work/plain" > "$work/plain.txt"
"$HKC" run --random-params --allow-unsigned-native "$work/mlp.hkpack" --batch 4 --profile --repeats 3 --save-outputs "$work/prof" > "$work/prof.txt"
"$PY" - "$work/prof.txt" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
rows = [l.split() for l in text.splitlines() if re.match(r"^ +\d+  ", l)]
assert [r[1] for r in rows] == ["fc1", "fc2,res,ln"], text  # fusion: auto folds res and the layernorm into fc2
for r in rows:
    assert float(r[3]) > 0 and r[4] == "-" and r[7] == "-", r  # median us > 0; host: no floor
assert "no floor (host-" in text and "sum of launches" in text and "whole graph" in text and "bubbles: whole graph - sum of launches" in text, text
print("ok run --profile:", [r[3] for r in rows])
EOF
cmp "$work/plain/y.npy" "$work/prof/y.npy"
# Graph structure: unfused, llama_block's gate and up projections are parallel branches (each
# waits only for the rmsnorm they read, node 6), not a chain, and the SwiGLU product waits for both.
"$HKC" build "$HK_SOURCE_DIR/specs/llama_block.yaml" -o "$work/llama.hkpack" --target host --fusion none -q
"$HKC" inspect "$work/llama.hkpack" > "$work/llama.txt"
for node in gate_proj up_proj; do
  grep -Eq "^ +#[0-9]+ +$node +hk_gemm.* after \[6\]$" "$work/llama.txt" \
    || { echo "FAIL: $node does not depend on ffn_norm alone:"; grep -E "#[0-9]+ " "$work/llama.txt" | head -12; exit 1; }
done
grep -Eq "^ +#9 +swiglu +hk_mul.* after \[7,8\]$" "$work/llama.txt" \
  || { echo "FAIL: swiglu does not wait for both projections:"; grep -E "#[0-9]+ " "$work/llama.txt" | head -12; exit 1; }
echo "ok gate/up projections are parallel branches"
# repeat: the memory planner reuses one layer's buffers across layers: 12 layers of
# tests/specs/repeat_layers.yaml need the workspace of 2 (layer k's buffers are dead once
# layer k+1 has read its output), not 6x it.
ws() { "$HKC" inspect "$1" | sed -n 's/.*batch 3: [0-9]* node(s), workspace \(.*\)$/\1/p'; }
for n in 2 12; do
  sed "s/layers: 3}/layers: $n}/" "$HK_SOURCE_DIR/tests/specs/repeat_layers.yaml" > "$work/rep$n.yaml"
  "$HKC" build "$work/rep$n.yaml" -o "$work/rep$n.hkpack" --target host -q
done
[ -n "$(ws "$work/rep2.hkpack")" ] && [ "$(ws "$work/rep2.hkpack")" = "$(ws "$work/rep12.hkpack")" ] \
  || { echo "FAIL: repeat workspace: 2 layers $(ws "$work/rep2.hkpack"), 12 layers $(ws "$work/rep12.hkpack")"; exit 1; }
echo "ok repeat: 12 layers plan the workspace of 2 ($(ws "$work/rep12.hkpack"))"
echo "plan_report: ok"
