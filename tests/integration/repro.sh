#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Reproducible builds (docs/TUNING.md): the same spec, flags, toolchain and tuning database give a
# byte-identical pack -- whatever the paths of the spec, the output and $TMPDIR, the number
# of compile threads (-j1 / -j2), and whether kernels come from the compile cache or not.
# The host target always; GPU targets when their toolchain is installed (no GPU needed).
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
same() { # same DESCRIPTION A B
  if cmp -s "$2" "$3"; then echo "ok   $1"; else echo "FAIL $1: $2 and $3 differ"; cmp "$2" "$3" || true; fail=1; fi
}
mkdir -p "$work/a/deep/dir" "$work/b" "$work/tmp1" "$work/tmp2" "$work/c1" "$work/c2"
bert=$HK_SOURCE_DIR/specs/bert_layer.yaml
cp "$bert" "$work/a/deep/dir/bert copy.yaml"
# a tuning database for the host (hand-written: the check is about bytes, not speed)
units=$(nproc)
echo "host-x86_64 | $units | whatever | gemm f16 m=128 n=2304 k=768 bias | host_gemm | bm=8,bn=128,bk=64 | 1 us" > "$work/t.db"

# ---- host --------------------------------------------------------------------------------------------
HKC_CACHE_DIR="$work/c1" TMPDIR="$work/tmp1" "$HKC" build "$bert" -o "$work/h1.hkpack" --target host -j 1 -q --tuning-db "$work/t.db"
HKC_CACHE_DIR="$work/c2" TMPDIR="$work/tmp2" "$HKC" build "$work/a/deep/dir/bert copy.yaml" -o "$work/b/h2.hkpack" \
  --target host -j 2 -q --tuning-db "$work/t.db"
same "host: twice, other spec/output/TMPDIR paths, -j1 vs -j2" "$work/h1.hkpack" "$work/b/h2.hkpack"
for p in "$work" "$HK_SOURCE_DIR"; do
  grep -aq "$p" "$work/h1.hkpack" && { echo "FAIL a path ($p) is inside the pack"; fail=1; }
done
grep -aEq "20[0-9][0-9]-[01][0-9]-[0-3][0-9]" "$work/h1.hkpack" && { echo "FAIL a date is inside the pack"; fail=1; }
"$HKC" inspect "$work/h1.hkpack" > "$work/h1.txt" && grep -q "^  tuning_db=" "$work/h1.txt" && echo "ok   the database's hash is recorded" || { echo "FAIL no tuning_db"; fail=1; }

# ---- GPU targets ------------------------------------------------------------------------------------------
"$HKC" targets --no-probe > "$work/targets.txt"
gpu=""
grep -q "^NVIDIA (sm):   unavailable" "$work/targets.txt" || gpu="sm_90a"
grep -q "^AMD (gfx):     unavailable" "$work/targets.txt" || gpu="${gpu:+$gpu,}gfx90a"
if [ -z "$gpu" ]; then
  echo "SKIPPED (GPU part): neither nvrtc nor hiprtc installed"
else
  spec=$HK_SOURCE_DIR/tests/specs/op_gemm_aligned_f16.yaml
  # fresh compiles on one thread, then from the cache on two (the model's choices both times)
  HKC_CACHE_DIR="$work/c1" TMPDIR="$work/tmp1" "$HKC" build "$spec" -o "$work/g1.hkpack" --target "host,$gpu" -j 1 -q --no-cache
  HKC_CACHE_DIR="$work/c2" TMPDIR="$work/tmp2" "$HKC" build "$spec" -o "$work/g2.hkpack" --target "host,$gpu" -j 2 -q
  HKC_CACHE_DIR="$work/c2" TMPDIR="$work/tmp2" "$HKC" build "$spec" -o "$work/g3.hkpack" --target "host,$gpu" -j 2 -q
  same "$gpu: --no-cache -j1 vs fresh cache -j2" "$work/g1.hkpack" "$work/g2.hkpack"
  same "$gpu: fresh cache vs cache hits" "$work/g2.hkpack" "$work/g3.hkpack"
fi
[ $fail -eq 0 ] && echo "repro: all packs byte-identical"
exit $fail
