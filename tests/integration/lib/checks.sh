# SPDX-License-Identifier: Apache-2.0
# Sourced by the integration tests that report check by check (weights.sh, weights_npz.sh,
# (Not a test itself: tests/CMakeLists.txt registers tests/integration/*.sh only.)
# weights_pack.sh): `ok NAME` and `bad NAME` print one line each (bad also sets fail=1, which
# the script exits with), and expect_fail runs a command that must fail with a given message.
fail=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fail=1; }
# expect_fail NAME REGEX CMD...: the command exits 1 with a message matching REGEX (grep -E)
expect_fail() {
  local name=$1 want=$2; shift 2
  set +e; msg=$("$@" 2>&1); rc=$?; set -e
  if [ $rc -ne 1 ]; then bad "$name: exit status $rc: $msg"
  elif ! grep -Eq "$want" <<<"$msg"; then bad "$name: message does not match '$want': $msg"
  else ok "$name: $(grep -E "$want" <<<"$msg" | head -n1)"; fi
}
