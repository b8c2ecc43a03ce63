#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Signed packs and the trust policy through the real binary: hkc keygen (0600, never
# overwrites), hkc build --sign / --no-sign, hkc inspect's signature line (with and without
# --trust), hkc run with --trust / --require-signature / --allow-unsigned(-native), hkc sign -o,
# a byte flipped after signing refused, and outputs identical whether the pack is signed or
# not. The user's key (docs/CLI.md, "Signing"): created on first use (0600 in a 0700
# directory, one key however many first uses run at once), hkc build and hkc sign sign with
# it, hkc run trusts it (--no-user-key: not), HKC_KEY moves it. A GPU-only pack (sm_90a, when
# nvrtc is here) is refused unsigned like a host one: GPU code is code.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export XDG_CONFIG_HOME=$work/config HKC_KEY= # a home of this test's own: the user key's first use
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
"$HKC" build "$spec" -o "$work/u.hkpack" --target host -q --no-sign
"$HKC" inspect "$work/s.hkpack" | grep "signature: ed25519 key $id verified$" > /dev/null || fail "inspect: signed"
"$HKC" inspect "$work/s.hkpack" --trust "$work/k.pub" | grep "key $id verified, trusted" > /dev/null || fail "inspect --trust"
"$HKC" inspect "$work/s.hkpack" --trust "$work/other.pub" | grep "NOT trusted" > /dev/null || fail "inspect: other key"
"$HKC" inspect "$work/u.hkpack" | grep "signature: none" > /dev/null || fail "inspect: unsigned"

run() { "$HKC" run --random-params "$@" --batch 5 --runs 1 --warmup 0 > /dev/null; }
run "$work/s.hkpack" --trust "$work/other.pub" --trust "$work/k.pub" --require-signature --save-outputs "$work/o-signed"
run "$work/u.hkpack" --allow-unsigned --save-outputs "$work/o-unsigned"
run "$work/u.hkpack" --allow-unsigned-native # the older name of the opt-in
for f in "$work"/o-unsigned/*.npy; do cmp -s "$f" "$work/o-signed/$(basename "$f")" || fail "outputs differ: $f"; done
expect_refused "native host code" run "$work/u.hkpack" --batch 1 --runs 1
expect_refused "not trusted" run "$work/s.hkpack" --batch 1 --runs 1 --trust "$work/other.pub"
expect_refused "required" run "$work/u.hkpack" --batch 1 --runs 1 --allow-unsigned --require-signature
[ ! -e "$XDG_CONFIG_HOME" ] || fail "--sign, --no-sign and run made a user key: $(ls -R "$XDG_CONFIG_HOME")"

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

# The user's key: the first build creates it (and says so), later ones use it silently.
"$HKC" build "$spec" -o "$work/user.hkpack" --target host 2> "$work/first.txt" > /dev/null
ukey=$XDG_CONFIG_HOME/hkc/key
grep -q "created your signing key $ukey" "$work/first.txt" || fail "no note of the created key: $(cat "$work/first.txt")"
[ "$(stat -c %a "$ukey")" = 600 ] && [ "$(stat -c %a "$XDG_CONFIG_HOME/hkc")" = 700 ] && [ -s "$ukey.pub" ] ||
  fail "user key modes: key $(stat -c %a "$ukey"), dir $(stat -c %a "$XDG_CONFIG_HOME/hkc")"
uid=$(sed -n 's/.*key id \([0-9a-f]\{16\}\);.*/\1/p' "$work/first.txt")
"$HKC" inspect "$work/user.hkpack" --trust "$ukey.pub" | grep -q "key $uid verified, trusted" || fail "user key: not its signer"
"$HKC" build "$spec" -o "$work/user2.hkpack" --target host 2> "$work/second.txt" > /dev/null
! grep -q "created" "$work/second.txt" && cmp -s "$work/user.hkpack" "$work/user2.hkpack" || fail "second build: $(cat "$work/second.txt")"
run "$work/user.hkpack" --save-outputs "$work/o-user" # trusted by default, no flag
for f in "$work"/o-unsigned/*.npy; do cmp -s "$f" "$work/o-user/$(basename "$f")" || fail "outputs differ: $f"; done
expect_refused "signed by key $uid, which is not trusted" run "$work/user.hkpack" --no-user-key
run "$work/user.hkpack" --no-user-key --trust "$ukey.pub"
expect_refused "not signed" run "$work/u.hkpack" # the user key trusts only what it signed
echo "ok   user key $uid: created once, signs builds, trusted by hkc run"
# HKC_KEY names another key (created there on first use too; hkc sign signs with it by default)
HKC_KEY=$work/k "$HKC" build "$spec" -o "$work/hk.hkpack" --target host -q
cmp -s "$work/hk.hkpack" "$work/s.hkpack" || fail "HKC_KEY=k build differs from build --sign k"
HKC_KEY=$work/new "$HKC" sign "$work/u.hkpack" -o "$work/new.hkpack" -q
[ "$(stat -c %a "$work/new")" = 600 ] && "$HKC" run --random-params "$work/new.hkpack" --batch 1 --runs 1 --warmup 0 \
  --no-user-key --trust "$work/new.pub" > /dev/null || fail "HKC_KEY=new: hkc sign did not create and use it"
# Eight first uses at once (hkc sign, by default with the user key) agree on one key.
export XDG_CONFIG_HOME=$work/race
for i in 1 2 3 4 5 6 7 8; do "$HKC" sign "$work/u.hkpack" -o "$work/race$i.hkpack" -q & done
wait
for i in 2 3 4 5 6 7 8; do cmp -s "$work/race1.hkpack" "$work/race$i.hkpack" || fail "first uses at once: pack $i differs"; done
"$HKC" run --random-params "$work/race1.hkpack" --batch 1 --runs 1 --warmup 0 --no-user-key \
  --trust "$XDG_CONFIG_HOME/hkc/key.pub" > /dev/null || fail "first uses at once: the key.pub is not the signer's"
echo "ok   HKC_KEY; eight first uses at once make one key"

# GPU code is code: an unsigned sm_90a pack is refused at open (before any device is needed);
# the user key's signature or --allow-unsigned passes the open (the run itself then needs the GPU).
if "$HKC" targets --no-probe | grep -q "^NVIDIA (sm):   unavailable"; then
  echo "SKIPPED (GPU-only pack): nvrtc unavailable"
else
  "$HKC" build "$spec" -o "$work/gpu-u.hkpack" --target sm_90a -q --no-sign
  "$HKC" build "$spec" -o "$work/gpu-s.hkpack" --target sm_90a -q
  expect_refused "GPU code (target sm_90a)" run "$work/gpu-u.hkpack" --batch 1 --runs 1
  for args in "$work/gpu-u.hkpack --allow-unsigned" "$work/gpu-s.hkpack"; do
    set +e; msg=$("$HKC" run --random-params $args --batch 1 --runs 1 2>&1); set -e
    ! grep -q "not signed\|not trusted\|UNTRUSTED" <<<"$msg" || fail "hkc run $args: refused by the trust policy: $msg"
  done
  echo "ok   GPU-only pack: refused unsigned, opens signed by the user key or with --allow-unsigned"
fi
echo "ok signing: key $id"
