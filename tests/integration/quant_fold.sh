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
