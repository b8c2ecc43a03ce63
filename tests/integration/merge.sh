#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hkc merge (docs/CLI.md, "hkc merge and the CI fan-out"): packs of one spec built one target at a time merge into
# the pack one build of all the targets writes (the same sections byte for byte but the
# signature and the merge's own provenance lines: lib/pack_same.py), signed with the user's key
# or --sign, or --no-sign; a spec with SwiGLU needs --merge-targets on the parts, and so does a
# plan auto fusion decides differently per target (fusion_apart=); mismatched inputs (another
# spec, other build options, another fusion, a target twice, a damaged or truncated pack) are
# refused with a message naming what differs, and no output is left behind. GPU targets whose
# toolchain this machine lacks are skipped visibly (host always runs). Params made of parts are
# kept. Trust: a signed merge refuses an input no trusted key signed (an unsigned part, or one
# signed by a key not trusted) -- else anyone who supplies a part gets their code signed --
# unless --trust names its signer or --allow-unsigned-inputs; the provenance records each
# input's targets and signer (hkc inspect --json).
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
same() { python3 "$HK_SOURCE_DIR/tests/integration/lib/pack_same.py" "$@"; }
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

"$HKC" targets --no-probe > "$work/targets.txt"
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
same "$work/merged.hkpack" "$work/all.hkpack" || fail "merged pack differs from the build of $targets"
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
same "$work/pp-merged.hkpack" "$work/pp-all.hkpack" || fail "merged pack with parts differs from the build of $targets"
"$HKC" inspect "$work/pp-merged.hkpack" > "$work/pp.txt"
grep -q "parts: m.q.weight | m.k.weight | m.v.weight" "$work/pp.txt" || fail "parts lost in the merge: $(cat "$work/pp.txt")"
ok "a pack with parts merges to the build of $targets, parts kept"

# 2. signatures. The parts above are signed with the user's key (hkc build's default; the
# tests keep it in the build tree), which merge signs with and trusts by default.
uid=$("$HKC" inspect "${parts[0]}" | sed -n 's/^ *signature: ed25519 key \([0-9a-f]\{16\}\) verified.*/\1/p')
[ -n "$uid" ] || fail "the parts are not signed with the user key: $("$HKC" inspect "${parts[0]}" | grep signature)"
grep -q "signed by key $uid" "$work/merge.txt" || fail "merge summary: $(cat "$work/merge.txt")"
# provenance: one line per input, with its targets and signer (inspect --json shows it)
"$HKC" inspect --json "$work/merged.hkpack" > "$work/merged.json"
names=() # the parts' target names, as the pack spells them
for t in $list; do [ "$t" = host ] && names+=("host-$(uname -m)") || names+=("$t"); done
python3 - "$work/merged.json" "$uid" "${names[@]}" <<'PY' || fail "merge provenance: $(grep merge "$work/merged.json")"
import json, sys
merge = [l for l in json.load(open(sys.argv[1]))["provenance"] if l.startswith("merge.")]
want = ["merge.input.%d=targets %s; signed by key %s, trusted" % (i, t, sys.argv[2]) for i, t in enumerate(sys.argv[3:])]
sys.exit(0 if merge == want else 1)
PY
ok "provenance records each input's targets and signer (key $uid, trusted)"
"$HKC" keygen -o "$work/k" -q
"$HKC" keygen -o "$work/other" -q
kid=$("$HKC" sign "${parts[0]}" --key "$work/k" -o "$work/k-part.hkpack" | sed -n 's/.*with key \([0-9a-f]*\) .*/\1/p')
"$HKC" build "$spec" --target "$targets" -o "$work/all-k.hkpack" -q --sign "$work/k"
"$HKC" merge "${parts[@]}" -o "$work/m-k.hkpack" -q --sign "$work/k"
same "$work/m-k.hkpack" "$work/all-k.hkpack" || fail "merge --sign differs from build --sign"
"$HKC" inspect "$work/m-k.hkpack" --trust "$work/k.pub" > "$work/m-k.txt"
grep -q "key $kid verified, trusted" "$work/m-k.txt" || fail "merge --sign: $(grep signature "$work/m-k.txt")"
"$HKC" run --random-params "$work/m-k.hkpack" --no-user-key --trust "$work/k.pub" --batch 2 --runs 1 --warmup 0 \
  > /dev/null || fail "the --sign merged pack does not run under --trust k.pub"
ok "signatures: each input's checked, the merged pack signed by --sign KEY == build --sign KEY"

# 2b. laundering: an unsigned host part (its code would run in the process of whoever trusts
# the release key) merged with --sign release.key is refused, and so is a part signed by a key
# not trusted; nothing is written.
if [ ${#parts[@]} -ge 2 ]; then
  "$HKC" build "$spec" --target host --merge-targets "$targets" -o "$work/u-host.hkpack" -q --no-sign
  "$HKC" sign "$work/u-host.hkpack" --key "$work/other" -o "$work/o-host.hkpack" -q
  oid=$("$HKC" inspect "$work/o-host.hkpack" | sed -n 's/^ *signature: ed25519 key \([0-9a-f]\{16\}\) .*/\1/p')
  expect_refused "u-host.hkpack carries code (target host-.*) and is not signed" \
    merge "$work/u-host.hkpack" "${parts[@]:1}" -o "$work/bad.hkpack" --sign "$work/k"
  expect_refused "is signed by key $oid, which is not trusted" \
    merge "$work/o-host.hkpack" "${parts[@]:1}" -o "$work/bad.hkpack" --sign "$work/k"
  expect_refused "not signed" merge "$work/u-host.hkpack" "${parts[@]:1}" -o "$work/bad.hkpack" # the user key signs too
  expect_refused "signed by key $uid, which is not trusted" \
    merge "${parts[@]}" -o "$work/bad.hkpack" --sign "$work/k" --no-user-key
  # the signer trusted by name: merges, and says so
  "$HKC" merge "$work/o-host.hkpack" "${parts[@]:1}" -o "$work/m-o.hkpack" -q --sign "$work/k" --trust "$work/other.pub"
  "$HKC" inspect --json "$work/m-o.hkpack" > "$work/m-o.json"
  grep -q "merge.input.0=targets host-[a-z0-9_]*; signed by key $oid, trusted" "$work/m-o.json" ||
    fail "--trust other.pub: $(grep merge "$work/m-o.json")"
  # --allow-unsigned-inputs: merges over the unsigned part, recorded in the provenance
  "$HKC" merge "$work/u-host.hkpack" "${parts[@]:1}" -o "$work/m-u.hkpack" --sign "$work/k" \
    --allow-unsigned-inputs > /dev/null 2> "$work/m-u.err"
  grep -q "warning: .*u-host.hkpack: unsigned (allowed by --allow-unsigned-inputs)" "$work/m-u.err" ||
    fail "no warning for the allowed unsigned input: $(cat "$work/m-u.err")"
  "$HKC" inspect --json "$work/m-u.hkpack" > "$work/m-u.json"
  grep -q "merge.input.0=targets host-[a-z0-9_]*; unsigned (allowed by --allow-unsigned-inputs)" "$work/m-u.json" &&
    grep -q "merge.input.1=targets [a-z0-9_]*; signed by key $uid, trusted" "$work/m-u.json" ||
    fail "--allow-unsigned-inputs not recorded: $(grep merge "$work/m-u.json")"
  same "$work/m-u.hkpack" "$work/all-k.hkpack" || fail "--allow-unsigned-inputs: the merged pack differs"
  # --no-sign: nothing is vouched for, so the inputs need no trusted signature; the result
  # does not run without the opt-in
  "$HKC" merge "$work/u-host.hkpack" "${parts[@]:1}" -o "$work/m-n.hkpack" -q --no-sign
  "$HKC" inspect "$work/m-n.hkpack" > "$work/m-n.txt"
  grep -q "signature: none" "$work/m-n.txt" && grep -q "merge.input.0=targets host-[a-z0-9_]*; unsigned$" "$work/m-n.txt" ||
    fail "--no-sign: $(grep "signature\|merge" "$work/m-n.txt")"
  expect_refused "not signed" run "$work/m-n.hkpack" --batch 2 --runs 1
  ok "laundering refused (unsigned part, part of an untrusted key); --trust, --allow-unsigned-inputs, --no-sign"
else
  echo "SKIPPED (laundering): one target only ($targets)"
fi
# a merged pack merges again: its own merge lines are replaced by the new merge's
if [ ${#parts[@]} -ge 3 ]; then
  "$HKC" merge "${parts[0]}" "${parts[1]}" -o "$work/m01.hkpack" -q
  "$HKC" merge "$work/m01.hkpack" "${parts[@]:2}" -o "$work/m01-2.hkpack" -q
  same "$work/m01-2.hkpack" "$work/all.hkpack" || fail "a merged pack merged again differs"
  [ "$("$HKC" inspect "$work/m01-2.hkpack" | grep -c "merge.input")" = 2 ] || fail "merge of a merge: merge lines"
  ok "a merged pack merges again"
fi

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
  same "$work/ffn-merged.hkpack" "$work/ffn-all.hkpack" && ok "auto fusion with --merge-targets: merged == one build" ||
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
