#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hkc merge (docs/CLI.md, "hkc merge and the CI fan-out"): packs of one spec built one target at a time merge into
# the same bytes (cmp) as one build of all the targets, unsigned and with --sign; a spec with
# SwiGLU needs --merge-targets on the parts, and so does a plan auto fusion decides
# differently per target (fusion_apart=); mismatched inputs (another spec, other build
# options, another fusion, a target twice, a damaged or truncated pack) are refused with a
# message naming what differs, and no output is left behind. GPU targets whose toolchain this
# machine lacks are skipped visibly (host always runs). Params made of parts are kept.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok   $*"; }
# expect_refused WANT ARGS...: hkc exits 1, says WANT, and writes no $work/bad.hkpack
expect_refused() {
  local want=$1; shift
  set +e; msg=$("$HKC" "$@" 2>&1); rc=$?; set -e
  [ $rc -eq 1 ] && grep -q -- "$want" <<<"$msg" || fail "hkc $* (rc $rc): expected '$want', got: $msg"
  [ ! -e "$work/bad.hkpack" ] || fail "hkc $*: left an output behind"
  ok "refused: $(grep -m1 -- "$want" <<<"$msg" | cut -c1-150)"
}

"$HKC" targets > "$work/targets.txt"
targets=host
grep -q "^AMD (gfx):     unavailable" "$work/targets.txt" && echo "SKIPPED (gfx90a): hiprtc/comgr unavailable" ||
  targets="$targets,gfx90a"
grep -q "^NVIDIA (sm):   unavailable" "$work/targets.txt" && echo "SKIPPED (sm_90a): nvrtc unavailable" ||
  targets="$targets,sm_90a"
echo "targets: $targets"
list=${targets//,/ }

# 1. one target per build, merged == one build of all (in the order given)
spec=$HK_SOURCE_DIR/tests/specs/llama_small.yaml # SwiGLU: dual gemm fusion depends on the target list
parts=()
for t in $list; do
  "$HKC" build "$spec" --target "$t" --merge-targets "$targets" -o "$work/part-$t.hkpack" -q
  parts+=("$work/part-$t.hkpack")
done
"$HKC" build "$spec" --target "$targets" -o "$work/all.hkpack" -q
"$HKC" merge "${parts[@]}" -o "$work/merged.hkpack" > "$work/merge.txt"
cmp "$work/merged.hkpack" "$work/all.hkpack" || fail "merged pack differs from the build of $targets"
ok "merge of ${#parts[@]} parts == build --target $targets ($(stat -c %s "$work/all.hkpack") bytes)"
"$HKC" inspect "$work/merged.hkpack" > /dev/null || fail "inspect of the merged pack"
"$HKC" run --random-params "$work/merged.hkpack" --batch 2 --runs 1 --warmup 0 --allow-unsigned-native > /dev/null ||
  fail "hkc run of the merged pack"
ok "the merged pack verifies and runs (host)"
# params made of parts (PARTS, format 1.4) travel through the merge too
cat > "$work/parts.yaml" <<'EOF'
hkc: 1
name: parts
batch_sizes: [1]
dims: {seq: 4, hidden: 16, heads: 2}
inputs: {x: [batch, seq, hidden]}
params:
  wqkv: {shape: [3*hidden, hidden], parts: [m.q.weight, m.k.weight, m.v.weight]}
graph:
  - {name: qkv_proj, op: gemm, in: [x, wqkv], trans_b: true, out: qkv}
  - {name: attn, op: attention, in: [qkv], heads: heads, out: y}
outputs: [y]
EOF
pparts=()
for t in $list; do
  "$HKC" build "$work/parts.yaml" --target "$t" -o "$work/pp-$t.hkpack" -q
  pparts+=("$work/pp-$t.hkpack")
done
"$HKC" build "$work/parts.yaml" --target "$targets" -o "$work/pp-all.hkpack" -q
"$HKC" merge "${pparts[@]}" -o "$work/pp-merged.hkpack" -q
cmp "$work/pp-merged.hkpack" "$work/pp-all.hkpack" || fail "merged pack with parts differs from the build of $targets"
"$HKC" inspect "$work/pp-merged.hkpack" > "$work/pp.txt"
grep -q "parts: m.q.weight | m.k.weight | m.v.weight" "$work/pp.txt" || fail "parts lost in the merge: $(cat "$work/pp.txt")"
ok "a pack with parts merges to the build of $targets, parts kept"

# 2. signed: inputs' signatures dropped; --sign == build --sign
"$HKC" keygen -o "$work/k" -q
"$HKC" sign "${parts[0]}" --key "$work/k" -o "$work/signed-part.hkpack" -q
"$HKC" build "$spec" --target "$targets" -o "$work/all-signed.hkpack" -q --sign "$work/k"
"$HKC" merge "$work/signed-part.hkpack" "${parts[@]:1}" -o "$work/m-signed.hkpack" -q --sign "$work/k"
cmp "$work/m-signed.hkpack" "$work/all-signed.hkpack" || fail "merge --sign differs from build --sign"
"$HKC" merge "$work/signed-part.hkpack" "${parts[@]:1}" -o "$work/m-unsigned.hkpack" 2> "$work/note.txt" > /dev/null
grep -q "does not keep the signature" "$work/note.txt" || fail "no note about the dropped signature"
cmp "$work/m-unsigned.hkpack" "$work/all.hkpack" || fail "merge of a signed part without --sign is not the unsigned pack"
# (into a file, not a pipe: grep -q stops reading at its match, and pipefail would then count
# inspect's SIGPIPE as a failure)
"$HKC" inspect "$work/m-unsigned.hkpack" > "$work/m-unsigned.txt" || fail "inspect of the merged pack"
grep -q "signature: none" "$work/m-unsigned.txt" || fail "input signature carried over: $(grep signature "$work/m-unsigned.txt")"
ok "signatures: input dropped (noted), --sign == build --sign"

# 3. refusals
small=$HK_SOURCE_DIR/tests/specs/op_elementwise.yaml
"$HKC" build "$small" --target host -o "$work/e-host.hkpack" -q
"$HKC" build "$small" --target host --fusion none -o "$work/e-host-nofuse.hkpack" -q
expect_refused "different specs" merge "$work/e-host.hkpack" "${parts[0]}" -o "$work/bad.hkpack"
expect_refused "target host-" merge "${parts[0]}" "$work/all.hkpack" -o "$work/bad.hkpack"
expect_refused "fusion=auto in" merge "$work/e-host.hkpack" "$work/e-host-nofuse.hkpack" -o "$work/bad.hkpack"
if [ "$targets" != host ]; then
  t2=${list#host }; t2=${t2%% *}
  "$HKC" build "$spec" --target host -o "$work/host-alone.hkpack" -q
  "$HKC" build "$spec" --target "$t2" -o "$work/$t2-alone.hkpack" -q
  if grep -q "^fusion_dual=off" <("$HKC" inspect "$work/$t2-alone.hkpack" | sed 's/^ *//'); then
    expect_refused "merge-targets" merge "$work/host-alone.hkpack" "$work/$t2-alone.hkpack" -o "$work/bad.hkpack"
  else
    echo "note: $t2 has a dual gemm kernel: nothing to refuse"
  fi
  expect_refused "is not in --merge-targets" build "$spec" --target "$t2" --merge-targets host -o "$work/bad.hkpack"
fi
# 1b. auto fusion weighs each step on the build's targets: a gelu in a large GEMM's epilogue
# pays on sm_90a's clock and not on sm_120's (docs/SPEC.md, "auto"), so the parts built alone
# are fused differently (fusion_apart=) and refused; with --merge-targets they merge into the
# bytes of one build of both
if [[ $targets == *sm_90a* ]]; then
  cat > "$work/ffn.yaml" <<'YAML'
hkc: 1
name: ffn_gelu
dtype: bf16
batch_sizes: [32, 128]
dims: {seq: 128, hidden: 768, ffn: 3072}
inputs: {x: [batch, seq, hidden]}
params: {w1: [hidden, ffn], b1: [ffn]}
graph:
  - {name: up, op: gemm, in: [x, w1], bias: b1, out: u0}
  - {name: act, op: gelu, in: [u0], out: y}
outputs: [y]
YAML
  for t in sm_90a sm_120; do
    "$HKC" build "$work/ffn.yaml" --target $t --tune default -o "$work/ffn-$t-alone.hkpack" -q
    "$HKC" build "$work/ffn.yaml" --target $t --tune default --merge-targets sm_90a,sm_120 -o "$work/ffn-$t.hkpack" -q
  done
  "$HKC" build "$work/ffn.yaml" --target sm_90a,sm_120 --tune default -o "$work/ffn-all.hkpack" -q
  if ! cmp -s <("$HKC" inspect "$work/ffn-sm_90a-alone.hkpack" | grep "^  fusion_apart=") \
              <("$HKC" inspect "$work/ffn-sm_120-alone.hkpack" | grep "^  fusion_apart="); then
    expect_refused "fused differently" merge "$work/ffn-sm_90a-alone.hkpack" "$work/ffn-sm_120-alone.hkpack" -o "$work/bad.hkpack"
  else
    echo "note: sm_90a and sm_120 plan ffn_gelu alike: nothing to refuse"
  fi
  "$HKC" merge "$work/ffn-sm_90a.hkpack" "$work/ffn-sm_120.hkpack" -o "$work/ffn-merged.hkpack" -q
  cmp -s "$work/ffn-merged.hkpack" "$work/ffn-all.hkpack" && ok "auto fusion with --merge-targets: merged == one build" ||
    fail "ffn_gelu: merged parts differ from one build of sm_90a,sm_120"
fi
head -c 3000 "${parts[0]}" > "$work/truncated.hkpack"
expect_refused "truncated" merge "$work/truncated.hkpack" "$work/e-host.hkpack" -o "$work/bad.hkpack"
cp "$work/all.hkpack" "$work/flipped.hkpack"
size=$(stat -c %s "$work/flipped.hkpack")
printf '\x5a' | dd of="$work/flipped.hkpack" bs=1 seek=$((size - 100)) conv=notrunc status=none
expect_refused "checksum" merge "$work/flipped.hkpack" "$work/e-host.hkpack" -o "$work/bad.hkpack"
set +e; "$HKC" merge "${parts[0]}" -o "$work/bad.hkpack" > /dev/null 2>&1; rc1=$?
"$HKC" merge "${parts[@]}" > /dev/null 2>&1; rc2=$?; set -e
[ $rc1 -eq 2 ] && [ $rc2 -eq 2 ] && [ ! -e "$work/bad.hkpack" ] || fail "usage errors: rc $rc1 (one pack), $rc2 (no -o)"
ok "usage errors: one pack, no -o"
echo "merge: all checks passed"
