#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Signed packs and the trust policy through the real binary: hkc keygen (0600, never
# overwrites), hkc build --sign, hkc inspect's signature line (with and without --trust),
# hkc run with --trust / --require-signature / --allow-unsigned-native, hkc sign -o, a byte
# flipped after signing refused, and outputs identical whether the pack is signed or not.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
spec=$HK_SOURCE_DIR/tests/specs/op_elementwise.yaml
fail() { echo "FAIL: $*"; exit 1; }
# expect_refused WANT ARGS...: hkc exits 1 and says WANT
expect_refused() {
  local want=$1; shift
  set +e; msg=$("$HKC" "$@" 2>&1); rc=$?; set -e
  [ $rc -eq 1 ] && grep -q -- "$want" <<<"$msg" || fail "hkc $* (rc $rc): expected '$want', got: $msg"
}

"$HKC" keygen -o "$work/k" > "$work/keygen.txt"
"$HKC" keygen -o "$work/other" -q
[ "$(stat -c %a "$work/k")" = 600 ] || fail "secret key mode $(stat -c %a "$work/k")"
id=$(sed -n 's/.*key id \([0-9a-f]\{16\}\)$/\1/p' "$work/keygen.txt")
[ -n "$id" ] || fail "keygen printed no key id: $(cat "$work/keygen.txt")"
expect_refused "never overwritten" keygen -o "$work/k"

"$HKC" build "$spec" -o "$work/s.hkpack" --target host -q --sign "$work/k"
"$HKC" build "$spec" -o "$work/u.hkpack" --target host -q
"$HKC" inspect "$work/s.hkpack" | grep "signature: ed25519 key $id verified$" > /dev/null || fail "inspect: signed"
"$HKC" inspect "$work/s.hkpack" --trust "$work/k.pub" | grep "key $id verified, trusted" > /dev/null || fail "inspect --trust"
"$HKC" inspect "$work/s.hkpack" --trust "$work/other.pub" | grep "NOT trusted" > /dev/null || fail "inspect: other key"
"$HKC" inspect "$work/u.hkpack" | grep "signature: none" > /dev/null || fail "inspect: unsigned"

run() { "$HKC" run --random-params "$@" --batch 5 --runs 1 --warmup 0 > /dev/null; }
run "$work/s.hkpack" --trust "$work/other.pub" --trust "$work/k.pub" --require-signature --save-outputs "$work/o-signed"
run "$work/u.hkpack" --allow-unsigned-native --save-outputs "$work/o-unsigned"
for f in "$work"/o-unsigned/*.npy; do cmp -s "$f" "$work/o-signed/$(basename "$f")" || fail "outputs differ: $f"; done
expect_refused "native host code" run "$work/u.hkpack" --batch 1 --runs 1
expect_refused "not trusted" run "$work/s.hkpack" --batch 1 --runs 1 --trust "$work/other.pub"
expect_refused "required" run "$work/u.hkpack" --batch 1 --runs 1 --allow-unsigned-native --require-signature

# hkc sign: into another file, then the signed pack re-signed in place with another key.
"$HKC" sign "$work/u.hkpack" --key "$work/k" -o "$work/u-signed.hkpack" -q
cmp -s "$work/u-signed.hkpack" "$work/s.hkpack" || fail "hkc sign and build --sign differ"
cp "$work/s.hkpack" "$work/r.hkpack"
"$HKC" sign "$work/r.hkpack" --key "$work/other" -q
"$HKC" inspect "$work/r.hkpack" --trust "$work/other.pub" | grep "verified, trusted" > /dev/null || fail "re-signed"

# A flipped byte in a code section (checksums not fixed: the loader's checksum catches it
# first; sign_test.c flips every byte with fixed checksums).
size=$(stat -c %s "$work/s.hkpack")
cp "$work/s.hkpack" "$work/t.hkpack"
printf '\x5a' | dd of="$work/t.hkpack" bs=1 seek=$((size / 2)) conv=notrunc status=none
expect_refused "checksum\|signature" run "$work/t.hkpack" --batch 1 --runs 1 --trust "$work/k.pub"
echo "ok signing: key $id"
