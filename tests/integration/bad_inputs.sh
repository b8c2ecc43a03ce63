#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bad input through the real binary: every broken spec exits non-zero with a
# FILE:LINE:COL message naming the problem and leaves no output file; every corrupted
# pack is refused by `hkc inspect` and `hkc run` with a clean error (no crash).
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

base='hkc: 1
name: t
dtype: f32
batch_sizes: [1, 2]
dims: {d: 8}
targets: [host]
inputs: {x: [batch, d]}
params: {w: [d, d]}'

# case_spec NAME EXPECTED-REGEX  (spec text on stdin)
case_spec() {
  local name=$1 want=$2 spec="$work/$1.yaml" out="$work/$1.hkpack"
  cat > "$spec"
  set +e
  msg=$("$HKC" build "$spec" -o "$out" 2>&1)
  rc=$?
  set -e
  if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then
    echo "FAIL $name: exit status $rc"; fail=1
  elif ! grep -Eq "^$spec:[0-9]+:[0-9]+: .*($want)" <<<"$msg"; then
    echo "FAIL $name: message does not match '$want':"; echo "$msg"; fail=1
  elif [ -e "$out" ] || ls "$work" | grep -q "$name.hkpack.tmp"; then
    echo "FAIL $name: output file left behind"; fail=1
  else
    echo "ok   $name: $(head -n1 <<<"$msg")"
  fi
}

# invalid UTF-8 and control characters: FILE:LINE:COL like every other spec error
case_spec invalid_utf8 'invalid trailing UTF-8 octet' < <(printf '%s\n# caf\xc3\x28\n' "$base")
case_spec control_char 'control characters' < <(printf '%s\noutputs: [y\x01]\n' "$base")

case_spec unknown_key 'unknown key' <<EOF
$base
grph: []
graph:
  - {name: a, op: relu, in: [x], out: y}
outputs: [y]
EOF
case_spec undefined_tensor 'undefined|unknown tensor' <<EOF
$base
graph:
  - {name: a, op: relu, in: [nope], out: y}
outputs: [y]
EOF
case_spec shape_mismatch 'shape|mismatch' <<EOF
hkc: 1
name: t
dtype: f32
batch_sizes: [1, 2]
dims: {d: 8}
inputs: {x: [batch, d]}
params: {w: [7, 8]}
graph:
  - {name: a, op: gemm, in: [x, w], out: y}
outputs: [y]
EOF
case_spec cycle 'cycle' <<EOF
$base
graph:
  - {name: a, op: add, in: [x, z], out: y}
  - {name: b, op: relu, in: [y], out: z}
outputs: [y]
EOF
case_spec duplicate_name 'duplicate' <<EOF
$base
graph:
  - {name: a, op: relu, in: [x], out: y}
  - {name: a, op: relu, in: [y], out: z}
outputs: [z]
EOF
case_spec bad_dim 'positive|integer' <<EOF
hkc: 1
name: t
dtype: f32
batch_sizes: [1]
dims: {d: -3}
inputs: {x: [batch, d]}
graph:
  - {name: a, op: relu, in: [x], out: y}
outputs: [y]
EOF
case_spec fractional_dim 'integer|exact|divid' <<EOF
hkc: 1
name: t
dtype: f32
batch_sizes: [1]
dims: {d: 8}
inputs: {x: [batch, d/3]}
graph:
  - {name: a, op: relu, in: [x], out: y}
outputs: [y]
EOF
case_spec bad_dtype 'dtype' <<EOF
hkc: 1
name: t
dtype: f64
batch_sizes: [1]
inputs: {x: [batch, 4]}
graph:
  - {name: a, op: relu, in: [x], out: y}
outputs: [y]
EOF
case_spec bad_op 'op' <<EOF
$base
graph:
  - {name: a, op: conv, in: [x], out: y}
outputs: [y]
EOF
case_spec empty_graph 'empty' <<EOF
$base
graph: []
outputs: []
EOF
case_spec pad_layout 'cannot be padded.*batch_policy: exact' <<EOF
hkc: 1
name: t
dtype: f32
batch_sizes: [1, 8, 32]
dims: {d: 8}
inputs: {x: [d, batch]}
graph:
  - {name: a, op: relu, in: [x], out: y}
outputs: [y]
EOF
case_spec bad_batch_policy 'unknown batch policy' <<EOF
$base
batch_policy: nearest
graph:
  - {name: a, op: relu, in: [x], out: y}
outputs: [y]
EOF
case_spec yaml_syntax 'yaml|YAML|syntax|mapping|scan|parse|flow' <<EOF
hkc: 1
name: [unclosed
EOF

# A missing file: a message naming the file, no output.
set +e
msg=$("$HKC" build "$work/does_not_exist.yaml" -o "$work/missing.hkpack" 2>&1); rc=$?
set -e
if [ $rc -eq 0 ] || [ $rc -ge 128 ] || ! grep -q "does_not_exist.yaml" <<<"$msg" || [ -e "$work/missing.hkpack" ]; then
  echo "FAIL missing_file: rc=$rc $msg"; fail=1
else
  echo "ok   missing_file: $msg"
fi

# Corrupted packs: truncations and byte flips across the whole file.
"$HKC" build "$HK_SOURCE_DIR/specs/mlp.yaml" -o "$work/good.hkpack" --target host -q
size=$(stat -c %s "$work/good.hkpack")
"$HKC" run --random-params --allow-unsigned-native "$work/good.hkpack" --runs 1 --warmup 0 >/dev/null
# The documented environment of hkc run becomes session options; bad values are usage errors.
for env in HK_LAUNCH=bogus HK_HOST_THREADS=two HK_HOST_THREADS=-1; do
  set +e; msg=$(env "$env" "$HKC" run --random-params --allow-unsigned-native "$work/good.hkpack" --runs 1 --warmup 0 2>&1); rc=$?; set -e
  if [ $rc -ne 2 ] || ! grep -q "hkc run: ${env%%=*} is '${env#*=}'" <<<"$msg"; then
    echo "FAIL $env: exit $rc: $msg"; fail=1
  else
    echo "ok   $env: $msg"
  fi
done
set +e; msg=$(HK_LAUNCH=graph HK_HOST_THREADS=2 "$HKC" run --random-params --allow-unsigned-native "$work/good.hkpack" --runs 1 --warmup 0 2>&1 >/dev/null); rc=$?; set -e
if [ $rc -ne 0 ] || [ -n "$msg" ]; then echo "FAIL HK_LAUNCH=graph HK_HOST_THREADS=2 on host: exit $rc: $msg"; fail=1; fi
checked=0
for len in 0 1 7 8 63 64 65 100 $((size / 2)) $((size - 1)); do
  head -c "$len" "$work/good.hkpack" > "$work/bad.hkpack"
  for cmd in inspect run; do
    set +e; msg=$("$HKC" $cmd "$work/bad.hkpack" 2>&1); rc=$?; set -e
    if [ $rc -ne 1 ]; then echo "FAIL truncated to $len ($cmd): exit $rc: $msg"; fail=1; fi
    checked=$((checked + 1))
  done
done
step=$((size / 97 + 1))
for ((off = 0; off < size; off += step)); do
  cp "$work/good.hkpack" "$work/bad.hkpack"
  byte=$(od -An -tu1 -j "$off" -N1 "$work/good.hkpack" | tr -d ' ')
  printf "$(printf '\\%03o' $(( (byte ^ 0x5a) & 255 )))" | dd of="$work/bad.hkpack" bs=1 seek="$off" conv=notrunc status=none
  set +e; msg=$("$HKC" run --random-params --allow-unsigned-native "$work/bad.hkpack" --runs 1 --warmup 0 2>&1); rc=$?; set -e
  if [ $rc -ne 1 ]; then echo "FAIL byte $off flipped: exit $rc: $msg"; fail=1; fi
  checked=$((checked + 1))
done
echo "corrupted packs: $checked cases checked"
exit $fail
