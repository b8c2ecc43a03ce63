#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hkc's files through the real binary (docs/CLI.md, "Conventions"): inputs must be regular
# files (a device or FIFO fails at once), outputs replace only regular files (the node stays
# what it was), the umask decides output modes, and --save-outputs writes all outputs or none.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
spec=$HK_SOURCE_DIR/tests/specs/op_elementwise.yaml # three outputs: y_relu, y_gelu, y_silu
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }

# expect_fail NAME REGEX CMD...: exits 1 (not a signal, not a timeout) with a message matching REGEX
expect_fail() {
  local name=$1 want=$2; shift 2
  set +e; msg=$(timeout 20 "$@" 2>&1); rc=$?; set -e
  if [ $rc -ne 1 ]; then bad "$name: exit status $rc: $msg"
  elif ! grep -Eq "$want" <<<"$msg"; then bad "$name: message does not match '$want': $msg"
  else ok "$name: $(head -n1 <<<"$msg")"; fi
}

mkfifo "$work/fifo"
expect_fail "build /dev/zero" '/dev/zero: not a regular file' "$HKC" build /dev/zero -o "$work/z.hkpack"
expect_fail "build a FIFO spec" 'fifo: not a regular file' "$HKC" build "$work/fifo" -o "$work/z.hkpack"
[ ! -e "$work/z.hkpack" ] || bad "an output was written for a bad input"
expect_fail "inspect /dev/zero" 'not a regular file' "$HKC" inspect /dev/zero
expect_fail "run a FIFO" 'not a regular file' "$HKC" run "$work/fifo"
expect_fail "build -o FIFO" 'is not a regular file \(a FIFO\): refusing to replace it' \
  "$HKC" build "$spec" --target host -o "$work/fifo" -q
[ -p "$work/fifo" ] && ok "the FIFO is still a FIFO" || bad "the FIFO was replaced"
mkdir "$work/adir"
expect_fail "build -o DIR" 'not a regular file \(a directory\)' "$HKC" build "$spec" --target host -o "$work/adir" -q
ls "$work" | grep -q '\.tmp\.' && bad "a temporary file was left" || ok "no temporary file left"

# the umask decides the mode (packs were forced to 0644, .npy files to 0600)
(umask 077 && "$HKC" build "$spec" --target host -o "$work/p.hkpack" -q)
mode=$(stat -c %a "$work/p.hkpack")
[ "$mode" = 600 ] && ok "pack mode under umask 077: $mode" || bad "pack mode under umask 077: $mode"
(umask 022 && "$HKC" run --random-params --allow-unsigned-native "$work/p.hkpack" --batch 1 --save-outputs "$work/out" >/dev/null)
mode=$(stat -c %a "$work/out/y_relu.npy")
[ "$mode" = 644 ] && ok "npy mode under umask 022: $mode" || bad "npy mode under umask 022: $mode"

# all or nothing: one output cannot be written (a directory in its place), none is
rm -rf "$work/out2" && mkdir -p "$work/out2/y_silu.npy"
expect_fail "save-outputs with one blocked" 'y_silu.npy: it exists and is not a regular file' \
  "$HKC" run --random-params --allow-unsigned-native "$work/p.hkpack" --batch 1 --save-outputs "$work/out2"
left=$(ls -A "$work/out2" | grep -v '^y_silu.npy$' || true)
[ -z "$left" ] && ok "no output saved when one fails" || bad "left in the output directory: $left"
exit $fail
