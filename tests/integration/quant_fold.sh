#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Gemms that read their 8-bit weights themselves (the kernel option gemm_quant; docs/SPEC.md,
# "Quantized params"): the folded gemm rounds each q * scale to the spec's dtype as the dequant
# node stores it, so a folded pack's outputs equal the unfolded pack's bit for bit on the host
# (the NumPy reference is specs_e2e's, on the same specs). Then which launches fold where:
#   - a host-only build folds every dequant (auto), gemm_quant=off none;
#   - host + sm_90a with gemm_quant=on folds the launches of M <= 8 that gemm_skinny serves (B
#     stored [N, K]), both targets alike; the larger bucket keeps its dequant launches, and the
#     host target of that pack computes what the host-only packs do;
#   - gemm_quant=on with sm_80 (no kernel that reads 8-bit B) folds nothing; auto on a GPU build
#     folds nothing (opt-in until it has run on a GPU).
# And gemm_fp8=on (the FP8 product: A quantized per row) against a NumPy model of the rule, which
# the weight-only pack misses by far more; refused with a GPU target, which has no such kernel.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
specs=(op_gemm_quant_fold op_gemm_quant)

build() { # build NAME SPEC TARGETS [OPTIONS...]: the pack and its inspect text
  local name=$1 spec=$2 targets=$3; shift 3
  "$HKC" build "$HK_SOURCE_DIR/tests/specs/$spec.yaml" -o "$work/$name.hkpack" --target "$targets" -q --tune default "$@"
  "$HKC" inspect "$work/$name.hkpack" > "$work/$name.txt" # (no pipe into grep -q: SIGPIPE under pipefail)
}
run() { # run NAME BATCH [OPTIONS...]: outputs in $work/NAME-BATCH/
  local name=$1 b=$2; shift 2
  rm -rf "$work/$name-$b"
  "$HKC" run "$work/$name.hkpack" --batch "$b" --random-params --seed 3 --runs 1 --warmup 0 \
    --save-outputs "$work/$name-$b" -q "$@"
}
same() { # same A B: every output .npy of A equals B's byte for byte
  local n=0
  for f in "$1"/*.npy; do cmp -s "$f" "$2/$(basename "$f")" || fail "$(basename "$f"): $1 and $2 differ"; n=$((n + 1)); done
  [ "$n" -gt 0 ] || fail "no outputs in $1"
}
launches() { grep -cE "^    #[0-9]+ +$2 " "$1" || true; } # launches FILE REGEX: launch lines whose node matches

# ---- host: folded and unfolded, the same bits --------------------------------------------------
for s in "${specs[@]}"; do
  build "$s-fold" "$s" host
  build "$s-off" "$s" host --kernel-option gemm_quant=off
  [ "$(launches "$work/$s-fold.txt" "[a-z_]+_dequant")" -eq 0 ] || fail "$s: a host-only build keeps dequant launches"
  [ "$(launches "$work/$s-off.txt" "[a-z_]+_dequant")" -gt 0 ] || fail "$s: gemm_quant=off folded a dequant"
  grep -qE "hk_gemm_bf16_(i8|e4m3)_" "$work/$s-fold.txt" || fail "$s: no gemm reads 8-bit B"
  for b in 1 3; do
    run "$s-fold" $b
    run "$s-off" $b
    same "$work/$s-fold-$b" "$work/$s-off-$b"
  done
  echo "ok   $s: host, folded and unfolded outputs equal at batch 1 and 3"
done

# ---- gemm_fp8=on: the FP8 product (A quantized per row) against NumPy ---------------------------
PY=${HK_PYTHON:-/usr/bin/python3}
if "$PY" -c "import numpy" 2>/dev/null; then
  s=op_gemm_fp8
  build fp8 "$s" host --kernel-option gemm_fp8=on
  build wo "$s" host
  grep -q "hk_gemm_bf16_e4m3a_gelu_bias_tb" "$work/fp8.txt" && grep -q "hk_gemm_bf16_e4m3a_res" "$work/fp8.txt" ||
    fail "gemm_fp8=on: not the FP8 gemms: $(cat "$work/fp8.txt")"
  "$PY" - "$work" <<'PYEOF'
import os, sys
import numpy as np
sys.path.insert(0, os.environ["HK_SOURCE_DIR"] + "/tests/integration")
from safetensors_io import fp8_e4m3_values
work = sys.argv[1]
rng = np.random.default_rng(9)
codes = fp8_e4m3_values()
finite = np.unique(codes[np.isfinite(codes)])
def fp8(x):  # nearest e4m3 value, ties to the even code, saturating: written apart from hkc's
    a = np.clip(np.abs(x), 0, 448)
    i = np.clip(np.searchsorted(finite, a), 1, len(finite) - 1)
    lo, hi = finite[i - 1], finite[i]
    code = lambda v: np.array([np.flatnonzero(codes[:127] == t)[0] for t in v.ravel()]).reshape(v.shape)
    pick = np.where(a - lo < hi - a, lo, np.where(a - lo > hi - a, hi, np.where(code(lo) % 2 == 0, lo, hi)))
    return np.sign(x) * pick
def bf16(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32).astype(np.float64)
x = bf16(rng.uniform(-1, 1, (3, 5, 96)))
w = fp8(rng.normal(0, 40, (40, 96)))
wt = fp8(rng.normal(0, 40, (96, 40)))
w_s = rng.uniform(0.5, 1.5, (40, 1)) / 400
wt_s = rng.uniform(0.5, 1.5, (1, 40)) / 400
b = bf16(rng.uniform(-1, 1, 40))
for name, v in dict(x=x, w=w, wt=wt, w_s=w_s, wt_s=wt_s, b=b).items():
    np.save("%s/%s.npy" % (work, name), v.astype(np.float32))
a = x.reshape(15, 96)
a32 = a.astype(np.float32)  # the scale and the division in f32, as the rule says
sa = (np.abs(a32).max(axis=1, keepdims=True) / np.float32(448)).astype(np.float32)
qa = fp8((a32 / sa).astype(np.float64))
sa = sa.astype(np.float64)
gelu = lambda v: 0.5 * v * (1 + np.vectorize(__import__("math").erf)(v / np.sqrt(2)))
y1 = bf16(gelu((qa @ w.T) * sa * w_s.T + b))
y2 = bf16((qa @ wt) * sa * wt_s + y1)
np.save(work + "/ref_y1.npy", y1.reshape(3, 5, 40)); np.save(work + "/ref_y2.npy", y2.reshape(3, 5, 40))
# weight-only (A kept in bf16), to show the check tells the two apart
np.save(work + "/wo_y1.npy", bf16(gelu(a @ bf16(w * w_s).T + b)).reshape(3, 5, 40))
PYEOF
  args=(--input "x=$work/x.npy"); for p in w wt w_s wt_s b; do args+=(--param "$p=$work/$p.npy"); done
  for p in fp8 wo; do
    "$HKC" run "$work/$p.hkpack" --batch 3 "${args[@]}" --runs 1 --warmup 0 --save-outputs "$work/$p-out" -q
  done
  "$PY" - "$work" <<'PYEOF' || fail "gemm_fp8=on against NumPy"
import sys
import numpy as np
w = sys.argv[1]
for y in ("y1", "y2"):
    got, ref = np.load("%s/fp8-out/%s.npy" % (w, y)).astype(np.float64), np.load("%s/ref_%s.npy" % (w, y))
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    worst = np.max(np.abs(got - ref) / (np.abs(ref) + 1e-2))
    assert err < 5e-3 and worst < 2e-2, (y, err, worst)  # bf16 rounding of near-equal f32 sums
    print("ok   gemm_fp8=on %s: rel-norm err %.2g against the FP8 reference" % (y, err))
got, wo = np.load(w + "/fp8-out/y1.npy").astype(np.float64), np.load(w + "/wo-out/y1.npy").astype(np.float64)
ref, rwo = np.load(w + "/ref_y1.npy"), np.load(w + "/wo_y1.npy")
d_wo = np.linalg.norm(wo - ref) / np.linalg.norm(ref)
assert d_wo > 20 * np.linalg.norm(got - ref) / np.linalg.norm(ref), d_wo  # the check tells FP8 from weight-only
print("ok   the weight-only pack is %.2g away from the FP8 reference (A's quantization)" % d_wo)
PYEOF
  if "$HKC" build "$HK_SOURCE_DIR/tests/specs/$s.yaml" -o "$work/x.hkpack" --target host,sm_90a -q --tune default \
      --kernel-option gemm_fp8=on 2> "$work/e.txt"; then fail "gemm_fp8=on with sm_90a built"; fi
  grep -q "gemm_fp8=on: target sm_90a has no FP8 gemm kernel yet" "$work/e.txt" || fail "gemm_fp8=on sm_90a: $(cat "$work/e.txt")"
  echo "ok   gemm_fp8=on with sm_90a: refused, naming the target"
else
  echo "note: no numpy for $PY: the gemm_fp8 check is skipped"
fi

# ---- host + sm_90a: the decode-sized launches fold on both targets -------------------------------
s=op_gemm_quant_fold
if ! build mixed "$s" host,sm_90a --kernel-option gemm_quant=on 2>"$work/mixed.err"; then
  if grep -q "need nvrtc" "$work/mixed.err"; then echo "SKIPPED: sm_90a part (no nvrtc): $(cat "$work/mixed.err")"; exit 77; fi
  fail "host,sm_90a build: $(cat "$work/mixed.err")"
fi
graph() { sed -n "/^  graph $1, batch $2:/,/^\$/p" "$work/mixed.txt"; } # one graph's launch lines
for t in sm_90a host-x86_64; do
  graph $t 1 > "$work/g1.txt"
  graph $t 3 > "$work/g3.txt"
  [ "$(launches "$work/g1.txt" "[a-z_]+_dequant")" -eq 0 ] && [ "$(launches "$work/g1.txt" "[a-z_,]+")" -eq 4 ] ||
    fail "$t batch 1 (M = 5): not 4 launches without dequant: $(cat "$work/g1.txt")"
  [ "$(launches "$work/g3.txt" "[a-z_]+_dequant")" -eq 5 ] ||
    fail "$t batch 3 (M = 15): not the 5 dequant launches: $(cat "$work/g3.txt")"
done
grep -qE "hk_gemm_bf16_i8_silu_dual_tb_a8_t[0-9a-f]+ .*kernel=gemm_skinny" "$work/mixed.txt" &&
  grep -qE "hk_gemm_bf16_e4m3_res_tb_a8_t[0-9a-f]+ .*kernel=gemm_skinny" "$work/mixed.txt" ||
  fail "sm_90a: the folded gemms are not gemm_skinny's: $(cat "$work/mixed.txt")"
for b in 1 3; do
  run mixed $b --target host-x86_64
  same "$work/mixed-$b" "$work/$s-fold-$b"
done
echo "ok   host + sm_90a, gemm_quant=on: batch 1 folded on both targets (gemm_skinny on sm_90a), batch 3 not; host outputs equal"

build nv80 "$s" host,sm_80 --kernel-option gemm_quant=on
build auto "$s" host,sm_90a
for p in nv80 auto; do
  [ "$(launches "$work/$p.txt" "[a-z_]+_dequant")" -eq $((2 * 5 * 2)) ] ||
    fail "$p: expected every dequant launch (5 per graph, 2 buckets, 2 targets): $(cat "$work/$p.txt")"
done
echo "ok   gemm_quant=on with sm_80, and auto with sm_90a: no fold"
echo "quant_fold: ok"
