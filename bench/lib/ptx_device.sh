#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# PTX on the GPU (docs/FORMAT.md, "PTX"): run on the GPU machine (H200, compute capability
# 9.0) from the repository root, with build-dev/ built on the CPU machine
# (tests/device/prepare.sh builds it; nvrtc is on the GPU machine too, so the packs are built
# here with build-dev/hkc). Not run in CI (no GPU).
#
#   bench/run.py ptx --device   (= bash bench/lib/ptx_device.sh [OUTDIR])        (default /tmp/hk-ptx; SPECS="a.yaml b.yaml")
#
# Per spec (default: tests/specs/op_gemm.yaml, op_gemm_aligned_bf16.yaml, arch_tiny.yaml):
#   A. host,sm_80 --ptx sm_80: no cubin of the pack runs on 9.0 (cubins do not cross
#      majors), so the session must run the PTX (JIT): "code: PTX of target sm_80"; with
#      HK_PREFER_PTX=1 the same.
#   B. host,sm_90 (PTX stored by default for sm_90): without HK_PREFER_PTX the exact cubin,
#      "code: SASS of target sm_90"; with HK_PREFER_PTX=1 "code: PTX of target sm_90".
#   C. host,sm_80 --no-ptx: refused on 9.0 (NO_COMPATIBLE_TARGET: "cannot run").
# Each GPU run is checked against PyTorch by tests/device/check.py (with the host target as a
# cross-check), and the saved outputs of A (PTX sm_80), B (SASS sm_90), B (PTX sm_90) and the
# host are compared with each other (same seed). Exits 1 on any failure.
set -uo pipefail
cd "$(dirname "$0")/../.."
export LD_LIBRARY_PATH="$PWD/build-dev${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libcjson carried in build-dev (scripts/carry_libs.sh)
out=${1:-/tmp/hk-ptx}
mkdir -p "$out"
HKC=build-dev/hkc
[ -x "$HKC" ] || { echo "no $HKC: build it with tests/device/prepare.sh on the CPU machine"; exit 2; }
specs=${SPECS:-tests/specs/op_gemm.yaml tests/specs/op_gemm_aligned_bf16.yaml tests/specs/arch_tiny.yaml}
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader || true
"$HKC" --version
fail=0
bad() { echo "FAIL $*"; fail=1; }
okay() { echo "ok   $*"; }

# run_code PACK TARGET WANT [ENV...]: hkc run once; its "code:" line must match WANT (regex).
run_code() {
  local pack=$1 target=$2 want=$3; shift 3
  local log
  log=$(env "$@" "$HKC" run "$pack" --target "$target" --allow-unsigned-native --random-params --runs 3 --warmup 1 2>&1)
  local rc=$?
  local line
  line=$(grep -m1 '^code:' <<<"$log")
  if [ $rc -eq 0 ] && grep -Eq "$want" <<<"$line"; then okay "$(basename "$pack") $target ${*:-(default)}: $line"
  else bad "$(basename "$pack") $target ${*:-(default)}: rc $rc, want /$want/: ${log: -400}"; fi
}

# check SPEC PACK TARGET NAME [ENV...]: tests/device/check.py against PyTorch (host cross-check).
check() {
  local spec=$1 pack=$2 target=$3 name=$4; shift 4
  if env "$@" python3 tests/device/check.py "$HKC" "$spec" "$pack" "$out/$name" --gpu-target "$target" \
      --host-target "$("$HKC" inspect "$pack" | awk '/^  host-/{print $1; exit}')" --host-max-batch 1 --no-padded \
      > "$out/$name.check.txt" 2>&1; then
    okay "$name: matches PyTorch"
  else
    bad "$name: check.py (see $out/$name.check.txt)"; tail -20 "$out/$name.check.txt"
  fi
}

# save PACK TARGET DIR [ENV...]: outputs of one run at the pack's first batch size, seed 5.
save() {
  local pack=$1 target=$2 dir=$3; shift 3
  rm -rf "$dir"
  env "$@" "$HKC" run "$pack" --target "$target" --allow-unsigned-native --random-params --runs 1 --warmup 0 --seed 5 \
    --save-outputs "$dir" > "$dir.log" 2>&1 || bad "save $(basename "$pack") $target: $(tail -3 "$dir.log")"
}

for spec in $specs; do
  name=$(basename "$spec" .yaml)
  a=$out/$name.sm80-ptx.hkpack b=$out/$name.sm90.hkpack c=$out/$name.sm80-noptx.hkpack
  "$HKC" build "$spec" --target host,sm_80 --ptx sm_80 -o "$a" -q || { bad "build $a"; continue; }
  "$HKC" build "$spec" --target host,sm_90 -o "$b" -q || { bad "build $b"; continue; }
  "$HKC" build "$spec" --target host,sm_80 --no-ptx -o "$c" -q || { bad "build $c"; continue; }
  "$HKC" inspect "$a" | grep -q '^  sm_80 .*; PTX compute_80' || bad "$a: no PTX for sm_80 in hkc inspect"
  "$HKC" inspect "$b" | grep -q '^  sm_90 .*; PTX compute_90' || bad "$b: no PTX for sm_90 in hkc inspect"

  # A: only PTX can run on 9.0
  run_code "$a" sm_80 '^code: PTX of target sm_80 \(compute_80\), JIT'
  run_code "$a" sm_80 '^code: PTX of target sm_80 \(compute_80\), JIT' HK_PREFER_PTX=1
  check "$spec" "$a" sm_80 "$name.A-ptx-sm80"
  # B: the exact cubin, or the PTX when preferred
  run_code "$b" sm_90 '^code: SASS of target sm_90$'
  run_code "$b" sm_90 '^code: PTX of target sm_90 \(compute_90\), JIT' HK_PREFER_PTX=1
  check "$spec" "$b" sm_90 "$name.B-sass-sm90"
  check "$spec" "$b" sm_90 "$name.B-ptx-sm90" HK_PREFER_PTX=1
  # C: without PTX an sm_80-only pack cannot run here
  if log=$("$HKC" run "$c" --target sm_80 --allow-unsigned-native --random-params --runs 1 2>&1); then
    bad "$name: the sm_80 pack without PTX ran on this GPU: $(grep -m1 '^code:' <<<"$log")"
  elif grep -q "cannot run on this machine" <<<"$log"; then okay "$name: sm_80 without PTX refused here"
  else bad "$name: sm_80 without PTX: unexpected failure: ${log: -300}"; fi

  # The outputs of every GPU way and the host, same seed, against each other.
  save "$a" sm_80 "$out/$name.o-ptx80"
  save "$b" sm_90 "$out/$name.o-sass90"
  save "$b" sm_90 "$out/$name.o-ptx90" HK_PREFER_PTX=1
  save "$b" "$("$HKC" inspect "$b" | awk '/^  host-/{print $1; exit}')" "$out/$name.o-host"
  python3 - "$out/$name" <<'PY' || fail=1
import glob, os, sys
import numpy as np
base = sys.argv[1]
ways = ["o-sass90", "o-ptx90", "o-ptx80", "o-host"]
bad = 0
for f in sorted(glob.glob(base + ".o-sass90/*.npy")):
    ref = np.load(f).astype(np.float64)
    for w in ways[1:]:
        g = os.path.join(base + "." + w, os.path.basename(f))
        if not os.path.exists(g):
            print("FAIL %s: %s has no %s" % (base, w, os.path.basename(f))); bad = 1; continue
        x = np.load(g).astype(np.float64)
        rel = np.linalg.norm(x - ref) / max(np.linalg.norm(ref), 1e-30) if x.shape == ref.shape else float("inf")
        exact = x.shape == ref.shape and np.array_equal(x, ref)
        # GPU ways: the same kernels (ptxas offline vs the driver's JIT), f32 accumulation;
        # the host: other kernels, so the tolerance of check.py's f16/bf16 norm test
        tol = 1e-2 if w == "o-host" else 2e-3
        ok = np.all(np.isfinite(x)) and rel <= tol
        print("%s %s %-10s vs o-sass90: rel %.2e%s" % ("ok  " if ok else "FAIL", os.path.basename(base),
              w + "/" + os.path.basename(f)[:-4], rel, " (bit-identical)" if exact else ""))
        bad |= not ok
sys.exit(bad)
PY
done
if [ $fail -ne 0 ]; then echo "PTX DEVICE CHECK: FAILURES"; else echo "PTX DEVICE CHECK: PTX JIT and SASS both match PyTorch and each other"; fi
exit $fail
