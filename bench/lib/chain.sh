#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Writes a spec of N chained tiny element-wise kernels (launch-bound by design).
# usage: bench/lib/chain.sh N OUT.yaml
n=${1:-200}; out=${2:-/dev/stdout}
{
  echo "hkc: 1"; echo "name: chain$n"; echo "dtype: f32"; echo "batch_sizes: [1]"
  echo "inputs: {x: [batch, 256]}"; echo "graph:"
  prev=x
  for ((i = 0; i < n; i++)); do
    op=relu; [ $((i % 2)) -eq 1 ] && op=silu
    o=t$i; [ $i -eq $((n - 1)) ] && o=y
    echo "  - {name: n$i, op: $op, in: [$prev], out: $o}"; prev=$o
  done
  echo "outputs: [y]"
} > "$out"
