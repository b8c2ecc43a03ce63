#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fusion end to end through the real hkc binary, host target:
#  - specs/bert_layer.yaml (batch 1), specs/llama_block.yaml (batch 1, at smaller dims) and
#    tests/specs/fusion_forms.yaml (every fused form, odd shapes, every batch size) built
#    with --fusion none and --fusion auto: auto runs fewer kernels (launches per graph; the
#    distinct kernel count must not grow), both counts printed; both packs run on the same
#    random inputs, each matches reference.py, and they match each other within the dtype
#    tolerance;
#  - fusion_forms with explicit groups builds and matches too;
#  - a bad explicit group fails: non-zero exit, FILE:LINE:COL, the node and the reason,
#    and no output file.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
REF=$HK_SOURCE_DIR/tests/integration/reference.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# "KERNELS LAUNCHES" of a pack: the host target's distinct kernels, and the nodes of its
# first graph.
counts() {
  "$HKC" inspect "$1" | awk '
    /^  host-/ && k == "" { k = $3 }
    /^  graph host-/ && n == "" { for (i = 1; i <= NF; i++) if ($i == "node(s),") n = $(i - 1) }
    END { print k, n }'
}

# Compares the saved outputs of two runs (DIR_A DIR_B SPEC) with reference.py's tolerance.
compare_outputs() {
  "$PY" - "$1" "$2" "$3" "$REF" <<'EOF'
import importlib.util, os, sys
import numpy as np, yaml
a, b, spec_path, ref_path = sys.argv[1:5]
spec_mod = importlib.util.spec_from_file_location("reference", ref_path)
ref = importlib.util.module_from_spec(spec_mod)
spec_mod.loader.exec_module(ref)
spec = yaml.safe_load(open(spec_path))
norm_tol, max_tol = ref.TOL[spec.get("dtype", "f32")]
ok = True
for name in spec["outputs"]:
    x = np.load(os.path.join(a, name + ".npy")).astype(np.float64)
    y = np.load(os.path.join(b, name + ".npy")).astype(np.float64)
    if x.shape != y.shape:
        print("FAIL %s: shapes %s and %s" % (name, x.shape, y.shape))
        ok = False
        continue
    rel = np.linalg.norm(x - y) / max(np.linalg.norm(x), 1e-30)
    worst = np.max(np.abs(x - y) / (max_tol + max_tol * np.abs(x)))
    good = np.all(np.isfinite(y)) and rel <= norm_tol and worst <= 1.0
    print("%s fused vs unfused %s: rel-norm diff %.3g (bound %.3g), worst elem/bound %.3g"
          % ("ok  " if good else "FAIL", name, rel, norm_tol, worst))
    ok = ok and good
sys.exit(0 if ok else 1)
EOF
}

# run_ref PACK SPEC BATCH DIR LABEL: reference.py on one pack (its default seed, so every
# pack of a spec sees the same inputs, and $HK_REF_CACHE holds one reference per spec and
# batch for this test and specs_e2e); prints its verdict lines.
run_ref() {
  if "$PY" "$REF" "$HKC" "$1" "$2" "$3" "$4" > "$4.log" 2>&1; then
    grep -v '^ \|^target' "$4.log" | sed "s/^/     [$5] /"
  else
    sed "s/^/     [$5] /" "$4.log"
    echo "FAIL $5 batch $3 against reference.py"
    fail=1
  fi
}

# check_spec SPEC "BATCHES": none vs auto, counts, reference, fused vs unfused.
check_spec() {
  local spec=$1 batches=$2 name
  name=$(basename "$spec" .yaml)
  for mode in none auto; do
    "$HKC" build "$spec" -o "$work/$name.$mode.hkpack" --target host --fusion "$mode" -q
  done
  read -r k_none l_none < <(counts "$work/$name.none.hkpack")
  read -r k_auto l_auto < <(counts "$work/$name.auto.hkpack")
  echo "$name: fusion none: $k_none kernel(s), $l_none launch(es) per graph; fusion auto: $k_auto kernel(s), $l_auto launch(es)"
  if [ "$l_auto" -lt "$l_none" ] && [ "$k_auto" -le "$k_none" ]; then
    echo "ok   $name: auto runs fewer kernels than none"
  else
    echo "FAIL $name: auto does not run fewer kernels than none"
    fail=1
  fi
  grep -q "^fusion=auto" <("$HKC" inspect "$work/$name.auto.hkpack" | sed 's/^ *//') ||
    { echo "FAIL $name: provenance does not say fusion=auto"; fail=1; }
  for b in $batches; do
    for mode in none auto; do
      run_ref "$work/$name.$mode.hkpack" "$spec" "$b" "$work/$name-$mode-$b" "$name --fusion $mode"
    done
    compare_outputs "$work/$name-none-$b/out" "$work/$name-auto-$b/out" "$spec" || fail=1
  done
}

check_spec "$HK_SOURCE_DIR/specs/bert_layer.yaml" "1"
# llama_block's graph, dtype and fusion plan at smaller dims (GQA and the head size kept):
# its full size spends ~25 s per host run and ~1 GB of .npy files on each of the two packs,
# and specs_e2e already runs the full-size block against the reference.
sed 's/^dims: .*/dims: {seq: 67, hidden: 512, heads: 4, kv_heads: 2, head_dim: 128, ffn: 1000}/' \
  "$HK_SOURCE_DIR/specs/llama_block.yaml" > "$work/llama_block.yaml"
grep -q "^dims: {seq: 67," "$work/llama_block.yaml" || { echo "FAIL llama_block.yaml: no dims line to shrink"; exit 1; }
check_spec "$work/llama_block.yaml" "1"
forms=$HK_SOURCE_DIR/tests/specs/fusion_forms.yaml
check_spec "$forms" "1 2"

# The fused forms the auto build must contain (host kernel names carry no alignment).
"$HKC" inspect "$work/fusion_forms.auto.hkpack" > "$work/forms.inspect"
for k in hk_gemm_f16_gelu_bias_mul_res hk_gemm_f16_silu_dual "up,gate,glu" hk_gemm_f16_res hk_layernorm_f16_add_sum \
  hk_rmsnorm_f16_add hk_ewchain_f16_a1m2sm3 "g1,g1_bias,g1_act,g1_mul,g1_res" hk_gemm_f16_bias_rope_d16 \
  "q1,q1_bias,q1_rope"; do
  grep -q -- "$k" "$work/forms.inspect" || { echo "FAIL fusion_forms auto: no $k"; fail=1; }
done

# Explicit groups: the spec's own fusion plan (no --fusion), groups of one node allowed.
sed 's/^fusion: auto$/fusion: {groups: [[g1, g1_bias, g1_act, g1_mul, g1_res], [sum1, ln], [e1, e2, e3, e4], [down], [q1, q1_bias, q1_rope]]}/' \
  "$forms" > "$work/groups.yaml"
grep -q "groups:" "$work/groups.yaml"
"$HKC" build "$work/groups.yaml" -o "$work/groups.hkpack" --target host -q
read -r k_grp l_grp < <(counts "$work/groups.hkpack")
echo "fusion_forms with explicit groups: $k_grp kernel(s), $l_grp launch(es)"
[ "$l_grp" -eq 13 ] || { echo "FAIL explicit groups: expected 13 launches (23 nodes, groups of 5, 2, 4, 1, 3)"; fail=1; }
run_ref "$work/groups.hkpack" "$work/groups.yaml" 2 "$work/groups-2" "fusion_forms groups"
compare_outputs "$work/fusion_forms-none-2/out" "$work/groups-2/out" "$forms" || fail=1

# A bad explicit group: activation after the residual add.
cat > "$work/bad.yaml" <<'EOF'
hkc: 1
name: bad
dtype: f32
batch_sizes: [1]
inputs: {x: [batch, 8], r: [batch, 4]}
params: {w: [8, 4]}
graph:
  - {name: fc, op: gemm, in: [x, w], out: h0}
  - {name: res, op: add, in: [h0, r], out: h1}
  - {name: act, op: gelu, in: [h1], out: y}
outputs: [y]
fusion:
  groups:
    - [fc, res, act]
EOF
set +e
"$HKC" build "$work/bad.yaml" -o "$work/bad.hkpack" --target host > "$work/bad.out" 2>&1
rc=$?
set -e
want="$work/bad.yaml:14:7: fusion group [fc, res, act] cannot be one kernel: node 'act': activation after the residual add cannot be fused into gemm 'fc' (epilogue order: bias, act, mul, residual; or bias, rope)"
if [ $rc -ne 0 ] && grep -qF "$want" "$work/bad.out" && [ ! -e "$work/bad.hkpack" ]; then
  echo "ok   bad explicit group: exit $rc, $(head -1 "$work/bad.out" | sed "s|$work/||")"
else
  echo "FAIL bad explicit group: exit $rc, output file $([ -e "$work/bad.hkpack" ] && echo present || echo absent):"
  cat "$work/bad.out"
  echo "expected: $want"
  fail=1
fi
# --fusion none skips the plan, so the same spec builds.
"$HKC" build "$work/bad.yaml" -o "$work/bad.hkpack" --target host --fusion none -q ||
  { echo "FAIL bad.yaml with --fusion none"; fail=1; }
# A bad --fusion value is a usage error.
if "$HKC" build "$work/bad.yaml" -o "$work/x.hkpack" --fusion greedy 2> "$work/usage.out"; then
  echo "FAIL --fusion greedy accepted"
  fail=1
fi
grep -q "expects auto or none" "$work/usage.out" || { echo "FAIL --fusion greedy message"; cat "$work/usage.out"; fail=1; }

if [ $fail -ne 0 ]; then
  echo "fusion_e2e: FAILURES"
  exit 1
fi
echo "fusion_e2e: fused and unfused pipelines agree"
