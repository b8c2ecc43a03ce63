#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hkc's files through the real binary (docs/CLI.md, "Conventions"): inputs must be regular
# files (a device or FIFO fails at once, naming what it is, for every file argument of every
# command), outputs replace only regular files (the node stays what it was), the umask decides
# output modes, and --save-outputs writes all outputs or none.
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

# Every file argument, given a FIFO nobody writes (an open that waits for a writer never
# returns) and /dev/zero (a read that never ends): a non-zero exit within 10 s whose message
# names the argument and what it is. Never "Unknown error N".
"$HKC" build "$spec" --target host -o "$work/ok.hkpack" -q
"$HKC" keygen -o "$work/key" -q
absent=$work/absent.safetensors # read after the map, which fails first
# expect_special NAME FILE CMD...: as above, for FILE the FIFO or /dev/zero
expect_special() {
  local name=$1 file=$2; shift 2
  local what; [ "$file" = /dev/zero ] && what=device || what=FIFO
  set +e; msg=$(timeout 10 "$@" 2>&1); rc=$?; set -e
  if [ $rc -eq 124 ]; then bad "$name $file: blocked (killed after 10 s)"
  elif [ $rc -eq 0 ] || [ $rc -ge 128 ]; then bad "$name $file: exit status $rc: $msg"
  elif ! grep -Fq "$file: not a regular file (a $what)" <<<"$msg"; then bad "$name $file: message: $msg"
  elif grep -q "Unknown error" <<<"$msg"; then bad "$name $file: message: $msg"
  else ok "$name $file: $(grep -F "$file: not a regular file" <<<"$msg" | head -n1)"; fi
}
for f in "$work/fifo" /dev/zero; do
  pack=$work/ok.hkpack
  expect_special "build SPEC" "$f" "$HKC" build "$f" --target host -o "$work/z.hkpack" -q
  expect_special "build --weights" "$f" "$HKC" build "$spec" --target host -o "$work/z.hkpack" -q --weights "$f"
  expect_special "build --weights-map" "$f" \
    "$HKC" build "$spec" --target host -o "$work/z.hkpack" -q --weights "$absent" --weights-map "$f"
  expect_special "build --tuning-db" "$f" "$HKC" build "$spec" --target host -o "$work/z.hkpack" -q --tuning-db "$f"
  expect_special "build --sign (key)" "$f" "$HKC" build "$spec" --target host -o "$work/z.hkpack" -q --sign "$f"
  expect_special "run PACK" "$f" "$HKC" run "$f"
  expect_special "run --weights" "$f" "$HKC" run "$pack" --allow-unsigned-native --weights "$f"
  expect_special "run --weights-map" "$f" \
    "$HKC" run "$pack" --allow-unsigned-native --weights "$absent" --weights-map "$f"
  expect_special "run --trust" "$f" "$HKC" run "$pack" --trust "$f"
  expect_special "run --input" "$f" "$HKC" run "$pack" --allow-unsigned-native --random-params --input "x=$f"
  expect_special "run --param" "$f" "$HKC" run "$pack" --allow-unsigned-native --random-params --param "row=$f"
  expect_special "inspect PACK" "$f" "$HKC" inspect "$f"
  expect_special "inspect --trust" "$f" "$HKC" inspect "$pack" --trust "$f"
  expect_special "sign PACK" "$f" "$HKC" sign "$f" --key "$work/key" -o "$work/z.hkpack"
  expect_special "sign --key" "$f" "$HKC" sign "$pack" --key "$f" -o "$work/z.hkpack"
  expect_special "merge PACK" "$f" "$HKC" merge "$pack" "$f" -o "$work/z.hkpack"
  expect_special "tune --merge DB" "$f" "$HKC" tune --merge "$f" -o "$work/z.db"
done
[ ! -e "$work/z.hkpack" ] && [ ! -e "$work/z.db" ] && ok "nothing written for a special input" \
  || bad "an output was written for a special input"
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
