#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GPU targets without a GPU: AMD kernels through hiprtc + comgr and NVIDIA kernels through
# nvrtc, built into packs and inspected; the compile cache; disassembly; and the bad
# inputs (unknown target, unbuildable target, a kernel that fails to compile, spills
# under --Werror-spills). Exits 77 (ctest: skipped) when neither toolchain is installed;
# each half skips visibly on its own.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HKC_CACHE_DIR="$work/cache"
fail=0
check() { # check DESCRIPTION COMMAND...: runs the command, prints ok/FAIL
  local what=$1; shift
  if "$@" >"$work/out" 2>&1; then echo "ok   $what"; else echo "FAIL $what"; cat "$work/out"; fail=1; fi
}
expect_fail() { # expect_fail DESCRIPTION REGEX PACK COMMAND...: must fail, match REGEX, leave no PACK
  local what=$1 want=$2 pack=$3; shift 3
  set +e; "$@" >"$work/out" 2>&1; local rc=$?; set -e
  if [ $rc -ne 1 ] || ! grep -Eq "$want" "$work/out" || [ -e "$pack" ]; then
    echo "FAIL $what (rc=$rc)"; cat "$work/out"; fail=1
  else
    echo "ok   $what: $(grep -Em1 "$want" "$work/out" | cut -c1-160)"
  fi
}

"$HKC" targets --no-probe > "$work/targets.txt"
cat "$work/targets.txt"
have_amd=1; grep -q "^AMD (gfx):     unavailable" "$work/targets.txt" && have_amd=0
have_nv=1; grep -q "^NVIDIA (sm):   unavailable" "$work/targets.txt" && have_nv=0
if [ $have_amd -eq 0 ] && [ $have_nv -eq 0 ]; then echo "SKIPPED: no hiprtc and no nvrtc"; exit 77; fi
[ $have_amd -eq 1 ] || echo "SKIPPED (AMD half): hiprtc/comgr unavailable"
[ $have_nv -eq 1 ] || echo "SKIPPED (NVIDIA half): nvrtc unavailable"

bert=$HK_SOURCE_DIR/specs/bert_layer.yaml # bf16: the kernel names and MFMA instructions below say bf16
# one bf16 gemm + bias (bert's first kernel, hk_gemm_bf16_bias_a8): the cold compiles that need
# not be the whole layer (--no-cache, a template that fails) take one kernel, not five
small=$work/gemm_bias.yaml
cat > "$small" <<'EOF'
hkc: 1
name: gemm_bias
dtype: bf16
batch_sizes: [1]
dims: {seq: 16, hidden: 64}
inputs: {x: [batch, seq, hidden]}
params: {w: [hidden, hidden], b: [hidden]}
graph:
  - {name: proj, op: gemm, in: [x, w], bias: b, out: y}
outputs: [y]
EOF
# The cache checks count kernels: fixed defaults (--tune default), one kernel per key.
# Tuned builds (the model) are tests/integration/tune.sh's.
untuned="--tune default"
if [ $have_amd -eq 1 ]; then
  grep -Eq "builds:.*gfx90a" "$work/targets.txt" && echo "ok   hkc targets lists gfx90a as buildable"
  check "bert_layer for host,gfx90a,gfx1030" "$HKC" build "$bert" -o "$work/b.hkpack" --target host,gfx90a,gfx1030 $untuned
  grep -q "from the cache" "$work/out" && grep -q " 0 from the cache" "$work/out" || { echo "FAIL first build used the cache"; fail=1; }
  "$HKC" inspect "$work/b.hkpack" > "$work/inspect.txt"
  for t in host-x86_64 gfx90a gfx1030; do
    grep -Eq "^  $t " "$work/inspect.txt" && echo "ok   inspect lists $t" || { echo "FAIL inspect lacks $t"; fail=1; }
  done
  # resources: every gfx kernel has VGPRs > 0, wave 64 on gfx90a and 32 on gfx1030, an occupancy %
  awk '/^kernels for gfx90a/{on=1;next} /^kernels for/{on=0} on && /^  hk_/{n++; if ($2<=0 || $7!=64 || $10 !~ /%$/) bad++} END{exit !(n>0 && bad==0)}' \
    "$work/inspect.txt" && echo "ok   gfx90a kernels: vgprs > 0, wave 64, occupancy shown" || { echo "FAIL gfx90a resources"; fail=1; }
  awk '/^kernels for gfx1030/{on=1;next} /^kernels for/{on=0} on && /^  hk_/{n++; if ($2<=0 || $7!=32) bad++} END{exit !(n>0 && bad==0)}' \
    "$work/inspect.txt" && echo "ok   gfx1030 kernels: vgprs > 0, wave 32" || { echo "FAIL gfx1030 resources"; fail=1; }
  # cache: a second build compiles nothing and writes the same bytes
  check "rebuild from the cache" "$HKC" build "$bert" -o "$work/b2.hkpack" --target host,gfx90a,gfx1030 $untuned
  grep -Eq "compiled 10 GPU kernel\(s\) .* 10 from the cache" "$work/out" || { echo "FAIL second build not cached"; cat "$work/out"; fail=1; }
  cmp "$work/b.hkpack" "$work/b2.hkpack" && echo "ok   cached build is byte-identical" || { echo "FAIL cached build differs"; fail=1; }
  # a corrupt cache entry is rebuilt, never trusted
  victim=$(ls "$HKC_CACHE_DIR"/*.hkcc | head -n1)
  printf '\xff\xff\xff\xff' | dd of="$victim" bs=1 seek=200 conv=notrunc status=none
  check "rebuild with a corrupt cache entry" "$HKC" build "$bert" -o "$work/b3.hkpack" --target host,gfx90a,gfx1030 $untuned
  grep -Eq " 9 from the cache" "$work/out" && cmp -s "$work/b.hkpack" "$work/b3.hkpack" \
    && echo "ok   corrupt entry recompiled, same pack" || { echo "FAIL corrupt cache entry"; cat "$work/out"; fail=1; }
  check "--no-cache" "$HKC" build "$small" -o "$work/b4.hkpack" --target gfx90a --no-cache $untuned
  grep -q " 0 from the cache" "$work/out" || { echo "FAIL --no-cache used the cache"; fail=1; }
  # disassembly through comgr
  gemm=$(awk '/^kernels for gfx90a/{on=1;next} on && /^  hk_gemm_bf16_bias/{print $1; exit}' "$work/inspect.txt")
  "$HKC" inspect "$work/b.hkpack" --disasm "$gemm" --target gfx90a > "$work/dis.txt"
  grep -q "s_endpgm" "$work/dis.txt" && grep -q "v_" "$work/dis.txt" \
    && echo "ok   gfx90a disassembly ($(wc -l < "$work/dis.txt") lines)" || { echo "FAIL disassembly"; fail=1; }
  # CDNA matrix-core variants on gfx90a, the simple (FMA) kernels on gfx1030
  awk '/^kernels for gfx90a/{on=1;next} /^kernels for/{on=0} on && /kernel=gemm_mfma/{g++} on && /kernel=attention_mfma/{a++} END{exit !(g>0 && a>0)}' \
    "$work/inspect.txt" && grep -q "v_mfma_f32_32x32x8bf16_1k" "$work/dis.txt" \
    && echo "ok   gfx90a: gemm_mfma / attention_mfma with v_mfma" || { echo "FAIL gfx90a MFMA variants"; fail=1; }
  awk '/^kernels for gfx1030/{on=1;next} /^kernels for/{on=0} on && /_mfma/{bad++} END{exit bad>0}' "$work/inspect.txt" \
    && echo "ok   gfx1030 keeps the simple kernels" || { echo "FAIL gfx1030 selected an MFMA variant"; fail=1; }
  # the 8-wave ping-pong attention on request (the other kernels come from the cache)
  check "bert_layer with attn_mfma_pp=on" "$HKC" build "$bert" -o "$work/pp.hkpack" --target gfx90a $untuned \
    --kernel-option attn_mfma_pp=on
  "$HKC" inspect "$work/pp.hkpack" > "$work/inspect_pp.txt"
  grep -q "kernel=attention_mfma_pp" "$work/inspect_pp.txt" && grep -Eq "attn .* block \[512,1,1\]" "$work/inspect_pp.txt" \
    && echo "ok   attn_mfma_pp=on: gfx90a attention_mfma_pp, 512 threads" || { echo "FAIL attn_mfma_pp=on"; fail=1; }
  # bad inputs: nothing written
  expect_fail "unknown target" "unknown target gfx9000x" "$work/x.hkpack" \
    "$HKC" build "$bert" -o "$work/x.hkpack" --target host,gfx9000x
  expect_fail "target the toolchain cannot build" "gfx942: the installed toolchain .* cannot build it; it builds: .*gfx90a" \
    "$work/x.hkpack" "$HKC" build "$bert" -o "$work/x.hkpack" --target gfx942
  mkdir -p "$work/tpl/gpu"
  for t in gemm gemm_mfma gemm_mfma_pp; do # the simple kernel and gfx90a's MFMA variants (the tuner drops
    # candidates that fail to compile, so every GEMM kernel a gfx90a key can become is broken here)
    { echo "#error invalid template parameter HK_TILE_M"; cat "$HK_SOURCE_DIR/templates/gpu/$t.hip"; } > "$work/tpl/gpu/$t.hip"
  done
  expect_fail "kernel that fails to compile" "kernel hk_gemm_bf16_bias(_a[0-9]+)? \(op gemm\) for gfx90a did not compile" "$work/x.hkpack" \
    env HKC_TEMPLATE_DIR="$work/tpl" "$HKC" build "$small" -o "$work/x.hkpack" --target gfx90a --no-cache
  grep -q "invalid template parameter" "$work/out" || { echo "FAIL compile error lacks the compiler's log"; fail=1; }
  # a kernel that spills: a warning, and an error with --Werror-spills
  mkdir -p "$work/spill/gpu"
  cat > "$work/spill/gpu/unary.hip" <<'EOF'
/* test template: forces register spills with a large dynamically indexed local array */
HK_GLOBAL void HK_LAUNCH_BOUNDS(HK_THREADS) HK_NAME(const HK_T *x, HK_T *out, long long n) {
  float big[1024];
  for (int j = 0; j < 1024; j++) big[j] = HK_LOAD(x[(j * 7) % n]);
  for (long long i = HK_BID * HK_THREADS + HK_TID; i < n; i += HK_NBLOCKS * HK_THREADS)
    out[i] = HK_STORE(big[(i * 13) % 1024]);
}
EOF
  ew=$HK_SOURCE_DIR/tests/specs/op_elementwise.yaml
  check "spilling kernel builds with a warning" env HKC_TEMPLATE_DIR="$work/spill" "$HKC" build "$ew" -o "$work/s.hkpack" --target gfx90a --no-cache
  grep -Eq "warning: kernel hk_relu_f32 on gfx90a spills [0-9]+ bytes" "$work/out" || { echo "FAIL no spill warning"; cat "$work/out"; fail=1; }
  rm -f "$work/s.hkpack"
  expect_fail "--Werror-spills" "kernel hk_relu_f32 on gfx90a spills [0-9]+ bytes .*--Werror-spills" "$work/s.hkpack" \
    env HKC_TEMPLATE_DIR="$work/spill" "$HKC" build "$ew" -o "$work/s.hkpack" --target gfx90a --no-cache --Werror-spills
fi

if [ $have_nv -eq 1 ]; then
  # the shipped specs and the ones whose builds combine features (fused forms, masks, i32
  # inputs, embedding, repeat:); every op's kernels alone compile for sm_90 and sm_80 in
  # gpu_codegen_test (HK_GPU_TARGETS_ALL=1: every spec of tests/specs here too)
  specs=("$HK_SOURCE_DIR"/specs/*.yaml)
  if [ "${HK_GPU_TARGETS_ALL:-0}" = 1 ]; then specs+=("$HK_SOURCE_DIR"/tests/specs/*.yaml)
  else
    for n in fusion_forms op_fused op_attention_lengths op_attention_mask op_embedding repeat_layers op_tanh; do
      [ -f "$HK_SOURCE_DIR/tests/specs/$n.yaml" ] && specs+=("$HK_SOURCE_DIR/tests/specs/$n.yaml")
    done
  fi
  for spec in "${specs[@]}"; do
    name=$(basename "$spec" .yaml)
    [ "$name" = bert_layer ] && continue # below, for sm_80 and sm_90a
    check "$name for sm_90 (cubins, no GPU needed)" "$HKC" build "$spec" -o "$work/$name.sm90.hkpack" --target host,sm_90
  done
  check "bert_layer for sm_80 and sm_90a" "$HKC" build "$bert" -o "$work/b80.hkpack" --target sm_80,sm_90a
  "$HKC" inspect "$work/b80.hkpack" > "$work/inspect.txt"
  # NVIDIA columns: name regs shared local warp block blocks/SM occup% params
  for t in sm_80 sm_90a; do
    awk -v t="$t" '$0 == "kernels for " t ":" {on=1;next} /^kernels for/{on=0}
      on && /^  hk_/{n++; if ($2<=0 || $5!=32 || $8 !~ /%$/) bad++} END{exit !(n>0 && bad==0)}' "$work/inspect.txt" \
      && echo "ok   $t kernels: registers > 0, warp 32, occupancy shown" || { echo "FAIL $t resources"; fail=1; }
  done
fi
exit $fail
