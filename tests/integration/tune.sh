#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tuning end to end (docs/TUNING.md) through the real hkc binary:
#   - `hkc tune` on the host target: candidates measured through libhkrt, a database written
#     (sorted, well-formed, one entry per launch class) and a report;
#   - a database entry changes the kernel a build records (cfg=..., src=db), the provenance
#     carries the database's hash, outputs still match the NumPy reference;
#   - several databases: the first that has a launch wins; an illegal entry is a warning;
#   - `hkc tune --merge`: union, the faster entry of a conflict, reported;
#   - a malformed database is an error with FILE:LINE, and nothing is written;
#   - GPU targets without a GPU (nvrtc / hiprtc when installed): the model's choices are
#     compiled and recorded (src=model), a database entry wins over the model; on sm_90a
#     (gemm_tma) each GEMM launch's grid and tensor maps agree with its kernel's recorded
#     configuration.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HKC_CACHE_DIR="${HKC_CACHE_DIR:-$work/cache}" # scripts/test.sh shares one between its passes
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
mlp=$HK_SOURCE_DIR/specs/mlp.yaml
gemm_lines() { grep -E '^  hk_gemm' "$1" || true; }
# sm_90a gemm_tma packs (hkc inspect): every GEMM launch runs a gemm_tma kernel, has the two
# tensor maps of its recorded configuration -- A in 64 x rows boxes (rows = 128 mw for
# pp=0, 64 mw for pp=1), B in 64 x bn/cm boxes (trans_b) or 64 x 64 panels -- and a grid of
# whole clusters (sk, cm), within the 132 SMs unless split-K. Prints what disagrees.
check_tma_launches() {
  awk '
    /^  hk_gemm/ && / kernel=gemm_tma cfg=/ {
      cfg = $0; sub(/.* cfg=/, "", cfg); sub(/ .*/, "", cfg)
      n = split(cfg, kv, ","); delete c
      for (i = 1; i <= n; i++) { split(kv[i], p, "="); c[p[1]] = p[2] }
      rows[$1] = (2 - c["pp"]) * 64 * c["mw"]; sk[$1] = c["sk"]; cm[$1] = c["cm"]
      bbox[$1] = / trans_b / ? c["bn"] / c["cm"] : 64
    }
    pending != "" {
      want = "tensor maps: arg 9 tmap\([a-z0-9_]+, box 64x" rows[pending] ", swz128\), arg 10 tmap\([a-z0-9_]+, box 64x" bbox[pending] ", swz128\)$"
      if ($0 !~ want) { print "tensor maps of " pending ": " $0; bad = 1 }
      pending = ""
    }
    /^    #[0-9]+ .* hk_gemm.* grid \[/ {
      k = ""; for (i = 1; i <= NF; i++) if ($i ~ /^hk_gemm/) k = $i
      g = $0; sub(/.*grid \[/, "", g); sub(/,.*/, "", g); g += 0
      if (!(k in rows)) { print "not a gemm_tma kernel: " $0; bad = 1; next }
      if (g < 1 || g % sk[k] || g % cm[k] || (sk[k] == 1 && g > 132)) { print "grid of " k ": " g; bad = 1 }
      pending = k; launches++
    }
    END { if (!launches) { print "no GEMM launches"; bad = 1 } exit bad }' "$1"
}

# ---- 1. measured tuning on the host -------------------------------------------------------
if "$HKC" tune "$mlp" --target host -o "$work/host.db" --top 2 --runs 3 --warmup 1 --report "$work/report.md" \
    >"$work/tune.out" 2>"$work/tune.err"; then
  ok "hkc tune specs/mlp.yaml --target host"
else
  bad "hkc tune failed"; cat "$work/tune.out" "$work/tune.err"
fi
grep -v '^#' "$work/host.db" > "$work/entries.txt" || true
[ "$(wc -l < "$work/entries.txt")" -eq 4 ] && ok "4 launch classes (2 gemms x 2 batch sizes), 4 entries" \
  || { bad "expected 4 entries"; cat "$work/host.db"; }
LC_ALL=C sort -c "$work/entries.txt" && ok "entries sorted by key" || bad "entries not sorted"
awk -F' \\| ' 'NF != 7 || $1 !~ /^host-/ || $2 !~ /^[0-9]+$/ || $5 != "host_gemm" || $6 !~ /^bm=[0-9]+,bn=[0-9]+,bk=[0-9]+$/ || $7 !~ / us$/ {bad=1} END {exit bad}' \
  "$work/entries.txt" && ok "entries well-formed: $(head -n1 "$work/entries.txt")" || bad "malformed entries"
grep -q "^\[1/4\] gemm f32 m=16 n=256 k=64 bias act=gelu (fc1@1)" "$work/tune.err" && ok "progress on stderr" || { bad "progress"; cat "$work/tune.err"; }
grep -q "geomean of best / model" "$work/report.md" && grep -q "^| gemm f32 m=64 n=64 k=256 bias res ln | fc2@4 |" "$work/report.md" \
  && ok "report table written" || { bad "report"; cat "$work/report.md"; }

# ---- 2. a database entry changes the recorded kernel ---------------------------------------------
units=$(head -n1 "$work/entries.txt" | awk -F' \\| ' '{print $2}')
cc=$(head -n1 "$work/entries.txt" | awk -F' \\| ' '{print $3}')
host=$(head -n1 "$work/entries.txt" | awk -F' \\| ' '{print $1}')
{
  echo "# hand-written: every mlp gemm on 8 x 128 tiles"
  for sig in "gemm f32 m=16 n=256 k=64 bias act=gelu" "gemm f32 m=16 n=64 k=256 bias res ln" \
             "gemm f32 m=64 n=256 k=64 bias act=gelu" "gemm f32 m=64 n=64 k=256 bias res ln"; do
    echo "$host | $units | $cc | $sig | host_gemm | bm=8,bn=128,bk=64 | 1.00 us"
  done
} > "$work/hand.db"
"$HKC" build "$mlp" -o "$work/plain.hkpack" -q
"$HKC" build "$mlp" -o "$work/tuned.hkpack" --tuning-db "$work/hand.db" -q
"$HKC" inspect "$work/plain.hkpack" > "$work/plain.txt"
"$HKC" inspect "$work/tuned.hkpack" > "$work/tuned.txt"
[ "$(gemm_lines "$work/plain.txt" | grep -c 'cfg=bm=16,bn=256,bk=32 src=model')" -eq 2 ] \
  && ok "without a database: the host model keeps the defaults (cfg=bm=16,bn=256,bk=32 src=model)" \
  || { bad "untuned params"; gemm_lines "$work/plain.txt"; }
[ "$(gemm_lines "$work/tuned.txt" | grep -c 'cfg=bm=8,bn=128,bk=64 src=db')" -eq 2 ] \
  && ok "with the database: cfg=bm=8,bn=128,bk=64 src=db" || { bad "db params"; gemm_lines "$work/tuned.txt"; }
gemm_lines "$work/tuned.txt" | awk '{print $1}' | grep -Eq '^hk_gemm_f32_(gelu_)?bias_t[0-9a-f]{8}$' \
  && ok "tuned kernels carry the configuration's hash in their names" || bad "tuned kernel names"
grep -Eq "^  tuning_db=[0-9a-f]{16} \(1 file\(s\), 4 entries\)" "$work/tuned.txt" && grep -q "^  tuning_db=none" "$work/plain.txt" \
  && ok "provenance: tuning_db=<hash>" || bad "provenance tuning_db"
grep -aq "$work" "$work/tuned.hkpack" && bad "a path leaked into the pack" || ok "no path in the pack"
if "$PY" -c "import numpy, yaml" 2>/dev/null; then
  for b in 1 4; do
    "$PY" "$HK_SOURCE_DIR/tests/integration/reference.py" "$HKC" "$work/tuned.hkpack" "$mlp" "$b" "$work/ref-$b" \
      >"$work/ref.out" 2>&1 && ok "tuned pack matches the reference at batch $b" || { bad "tuned numerics batch $b"; cat "$work/ref.out"; }
  done
else
  echo "SKIPPED numerics: no numpy/yaml for $PY"
fi

# ---- 3. several databases, illegal entries --------------------------------------------------------
sed 's/bm=8,bn=128,bk=64/bm=32,bn=64,bk=32/' "$work/hand.db" > "$work/second.db"
"$HKC" build "$mlp" -o "$work/two.hkpack" --tuning-db "$work/second.db" --tuning-db "$work/hand.db" -q
"$HKC" inspect "$work/two.hkpack" > "$work/two.txt"
[ "$(gemm_lines "$work/two.txt" | grep -c 'cfg=bm=32,bn=64,bk=32 src=db')" -eq 2 ] && grep -q "(2 file(s), 4 entries)" "$work/two.txt" \
  && ok "two databases: the first that has the launch wins" || { bad "first wins"; gemm_lines "$work/two.txt"; }
sed '3s/bm=8,bn=128,bk=64/bm=8,bn=100,bk=64/' "$work/hand.db" > "$work/illegal.db"
"$HKC" build "$mlp" -o "$work/ill.hkpack" --tuning-db "$work/illegal.db" -q 2>"$work/ill.err"
grep -q "illegal.db:3:.*not used" "$work/ill.err" && ok "an illegal configuration is a warning at its line: $(head -n1 "$work/ill.err" | cut -c1-120)" \
  || { bad "illegal entry"; cat "$work/ill.err"; }

# ---- 4. merge ------------------------------------------------------------------------------------------
sed 's/| 1.00 us$/| 0.50 us/; s/bm=8,bn=128,bk=64/bm=64,bn=128,bk=32/' "$work/hand.db" | head -n3 > "$work/faster.db"
"$HKC" tune --merge "$work/hand.db" "$work/faster.db" -o "$work/merged.db" >"$work/merge.out" 2>"$work/merge.err"
[ "$(grep -vc '^#' "$work/merged.db")" -eq 4 ] && [ "$(grep -c 'bm=64,bn=128,bk=32 | 0.50 us' "$work/merged.db")" -eq 2 ] \
  && [ "$(grep -c 'kept .*faster.db' "$work/merge.err")" -eq 2 ] && grep -q "2 conflict(s)" "$work/merge.out" \
  && ok "merge: union, the faster entry of each conflict, conflicts reported" || { bad "merge"; cat "$work/merged.db" "$work/merge.err"; }
grep -v '^#' "$work/merged.db" | LC_ALL=C sort -c && ok "merged file sorted" || bad "merged file not sorted"
"$HKC" tune --merge "$work/merged.db" -o "$work/merged2.db" -q && cmp -s "$work/merged.db" "$work/merged2.db" \
  && ok "merge of a canonical file is the identity" || bad "merge not idempotent"

# ---- 5. malformed databases -------------------------------------------------------------------------
{ head -n2 "$work/hand.db"; echo "$host | $units | $cc | gemm f32 m=16 n=64 | host_gemm | bm=8,bn=128,bk=64 | 1 us"; } > "$work/broken.db"
set +e
"$HKC" build "$mlp" -o "$work/broken.hkpack" --tuning-db "$work/broken.db" >"$work/broken.out" 2>&1
rc=$?
set -e
[ $rc -eq 1 ] && grep -q "broken.db:3:[0-9]*: bad entry (expected m=<rows> n=<cols> k=<depth>" "$work/broken.out" && [ ! -e "$work/broken.hkpack" ] \
  && ok "malformed line: $(head -n1 "$work/broken.out")" || { bad "malformed db (rc $rc)"; cat "$work/broken.out"; }
set +e
"$HKC" tune --merge "$work/hand.db" "$work/broken.db" -o "$work/bm.db" >"$work/bm.out" 2>&1
rc=$?
set -e
[ $rc -eq 1 ] && grep -q "broken.db:3:" "$work/bm.out" && [ ! -e "$work/bm.db" ] && ok "merge refuses a malformed file" \
  || { bad "merge of a malformed file (rc $rc)"; cat "$work/bm.out"; }
set +e
"$HKC" build "$mlp" -o "$work/x.hkpack" --tune fastest >"$work/x.out" 2>&1; rc=$?
set -e
[ $rc -eq 2 ] && grep -q "expects model or default" "$work/x.out" && ok "--tune checks its value" || bad "--tune value"

# ---- 6. GPU targets: the model's choices, compiled without a GPU --------------------------------------
"$HKC" targets --no-probe > "$work/targets.txt"
spec=$HK_SOURCE_DIR/tests/specs/op_gemm_aligned_bf16.yaml
if grep -q "^NVIDIA (sm):   unavailable" "$work/targets.txt"; then
  echo "SKIPPED (NVIDIA part): nvrtc unavailable"
else
  # gemm_tma's tuning (gemm_skinny=off: the few-row launches too; by default they are gemm_skinny's,
  # gemm_stream's under gemm_stream=on)
  "$HKC" build "$spec" -o "$work/sk.hkpack" --target sm_90a -q
  "$HKC" inspect "$work/sk.hkpack" > "$work/sk.txt"
  grep -E "^    #[0-9]+ +g_gemv_tb " "$work/sk.txt" > "$work/sk_gemv.txt" || true
  k1=$(head -n1 "$work/sk_gemv.txt" | awk '{print $3}')
  [ -n "$k1" ] && gemm_lines "$work/sk.txt" | grep -E "^  $k1 " | grep -q "kernel=gemm_skinny cfg=mb=1,ks=2 src=model" \
    && ok "sm_90a by default: the batch-1 launch of g_gemv_tb is gemm_skinny's" || { bad "gemm_skinny default"; cat "$work/sk.txt"; }
  # gemm_skinny_cfg forces the split of every gemm_skinny launch (mb still from the launch's rows);
  # an illegal one is an error and writes nothing
  "$HKC" build "$spec" -o "$work/sk4.hkpack" --target sm_90a --kernel-option gemm_skinny_cfg=ks=4 -q
  "$HKC" inspect "$work/sk4.hkpack" > "$work/sk4.txt"
  k1f=$(grep -E "^    #[0-9]+ +g_gemv_tb " "$work/sk4.txt" | head -n1 | awk '{print $3}')
  [ -n "$k1f" ] && gemm_lines "$work/sk4.txt" | grep -E "^  $k1f " | grep -q "kernel=gemm_skinny cfg=mb=1,ks=4 src=option" \
    && ok "sm_90a, gemm_skinny_cfg=ks=4: the batch-1 launch of g_gemv_tb is split over 4 warps" || { bad "gemm_skinny_cfg"; cat "$work/sk4.txt"; }
  if "$HKC" build "$spec" -o "$work/sk8.hkpack" --target sm_90a --kernel-option gemm_skinny_cfg=ks=8 -q 2> "$work/sk8.err" ||
    [ -e "$work/sk8.hkpack" ] || ! grep -q "gemm_skinny_cfg=mb=8,ks=8 is not legal" "$work/sk8.err"; then
    bad "gemm_skinny_cfg=ks=8 (4 warps a block) accepted or not explained"; cat "$work/sk8.err"
  else
    ok "sm_90a, gemm_skinny_cfg=ks=8 with 4 warps a block: refused, nothing written"
  fi
  "$HKC" build "$spec" -o "$work/st_on.hkpack" --target sm_90a --kernel-option gemm_stream=on -q
  "$HKC" inspect "$work/st_on.hkpack" > "$work/st_on.txt"
  k1on=$(grep -E "^    #[0-9]+ +g_gemv_tb " "$work/st_on.txt" | head -n1 | awk '{print $3}')
  [ -n "$k1on" ] && gemm_lines "$work/st_on.txt" | grep -E "^  $k1on " | grep -q "kernel=gemm_stream cfg=mb=1 src=model" \
    && ok "sm_90a, gemm_stream=on: the batch-1 launch of g_gemv_tb is gemm_stream's" || { bad "gemm_stream=on"; cat "$work/st_on.txt"; }
  # its batch-3 launch (M = 3): a tensor-core kernel by default, gemm_skinny (mb=4) under gemm_skinny=on,
  # gemm_stream (mb=4) with gemm_stream=on too
  k3=$(sed -n 2p "$work/sk_gemv.txt" | awk '{print $3}')
  "$HKC" build "$spec" -o "$work/sk_on.hkpack" --target sm_90a --kernel-option gemm_skinny=on -q
  "$HKC" inspect "$work/sk_on.hkpack" > "$work/sk_on.txt"
  k3on=$(grep -E "^    #[0-9]+ +g_gemv_tb " "$work/sk_on.txt" | sed -n 2p | awk '{print $3}')
  "$HKC" build "$spec" -o "$work/st3.hkpack" --target sm_90a --kernel-option gemm_skinny=on --kernel-option gemm_stream=on -q
  "$HKC" inspect "$work/st3.hkpack" > "$work/st3.txt"
  k3st=$(grep -E "^    #[0-9]+ +g_gemv_tb " "$work/st3.txt" | sed -n 2p | awk '{print $3}')
  [ -n "$k3" ] && [ -n "$k3on" ] && [ -n "$k3st" ] && ! gemm_lines "$work/sk.txt" | grep -E "^  $k3 " | grep -q "kernel=gemm_s" &&
    gemm_lines "$work/sk_on.txt" | grep -E "^  $k3on " | grep -q "kernel=gemm_skinny cfg=mb=4,ks=2 src=model" &&
    gemm_lines "$work/st3.txt" | grep -E "^  $k3st " | grep -q "kernel=gemm_stream cfg=mb=4 src=model" &&
    ok "sm_90a: the batch-3 launch of g_gemv_tb: a tensor-core kernel by default, gemm_skinny / gemm_stream mb=4 when on" ||
    { bad "few-row kernels at M = 3"; grep g_gemv "$work/sk.txt" "$work/sk_on.txt" "$work/st3.txt"; }
  # kv_attention: by default kv_attention_mma for the launches of >= 64 token rows (prefill) and
  # kv_attention_warp below (decode steps); kv_fold=on: at one row with the kv_append folded in,
  # named for both; kv_mma=off: kv_attention_warp for both; kv_warp=off kv_mma=off: the portable
  # kernel for both (under kv_fold=on its folded form at one row)
  sed -e 's/"hidden_size": 64/"hidden_size": 256/' -e 's/"head_dim": 16/"head_dim": 64/' \
    "$HK_SOURCE_DIR/tests/integration/gen_configs/llama.json" > "$work/gen.json" # head_dim 64: the NVIDIA kernels'
  "$HKC" import hf "$work/gen.json" --generate --max-seq 128 --slots 4 --token-buckets 1,64 --dtype bf16 \
    -o "$work/gen.yaml" -q
  "$HKC" build "$work/gen.yaml" -o "$work/gen_default.hkpack" --target sm_90a -q
  "$HKC" build "$work/gen.yaml" -o "$work/gen_warp.hkpack" --target sm_90a --kernel-option kv_mma=off \
    --kernel-option kv_fold=on -q
  "$HKC" build "$work/gen.yaml" -o "$work/gen_off.hkpack" --target sm_90a --kernel-option kv_warp=off \
    --kernel-option kv_mma=off --kernel-option kv_fold=on -q
  for kv in default warp off; do "$HKC" inspect "$work/gen_$kv.hkpack" > "$work/gen_$kv.txt"; done
  kva() { # the kernel variant of kv_attention launch #$2's kernel in inspect output $1, per bucket
    grep -E "^    #[0-9]+ +([a-z_0-9]+,)*attn_0 " "$1" | awk '{print $3}' | while read -r k; do
      grep -E "^  $k " "$1" | grep -o 'kernel=[a-z_]*'; done | tr '\n' ' '
  }
  [ "$(kva "$work/gen_default.txt")" = "kernel=kv_attention_warp kernel=kv_attention_mma " ] &&
    [ "$(kva "$work/gen_warp.txt")" = "kernel=kv_attention_warp kernel=kv_attention_warp " ] &&
    [ "$(kva "$work/gen_off.txt")" = "kernel=simple kernel=simple " ] &&
    [ "$(grep -cE "^    #[0-9]+ +[a-z_0-9,]*kv_append_0,attn_0 " "$work/gen_default.txt")" = 0 ] &&
    [ "$(grep -cE "^    #[0-9]+ +qk_rope_0,kv_append_0,attn_0 " "$work/gen_warp.txt")" = 1 ] &&
    [ "$(grep -cE "^    #[0-9]+ +qk_rope_0,kv_append_0,attn_0 " "$work/gen_off.txt")" = 1 ] &&
    ok "sm_90a kv_attention: default: bucket 1 kv_attention_warp, bucket 64 kv_attention_mma; kv_mma=off kv_fold=on: kv_attention_warp, the append folded in at bucket 1; both off: the portable kernel (folded too)" ||
    bad "kv_attention variants: $(kva "$work/gen_default.txt")/ $(kva "$work/gen_warp.txt")/ $(kva "$work/gen_off.txt")"
  # the layer's rmsnorms fold into the gemms after them at the one-row bucket only (gemm_skinny's:
  # norm_fold_rows; the launch named for both), and run as launches of their own at 64 rows
  grep -A12 -E "^  graph sm_90a, batch 1:" "$work/gen_default.txt" > "$work/gen_b1.txt"
  grep -A12 -E "^  graph sm_90a, batch 64:" "$work/gen_default.txt" > "$work/gen_b64.txt"
  grep -qE "^    #[0-9]+ +attn_norm_0,qkv_proj_0 +hk_gemm_bf16_nrm_tb_a8" "$work/gen_b1.txt" &&
    ! grep -qE "^    #[0-9]+ +attn_norm_0 " "$work/gen_b1.txt" &&
    grep -qE "^    #[0-9]+ +attn_norm_0 +hk_rmsnorm" "$work/gen_b64.txt" &&
    ok "sm_90a: attn_norm_0 folded into qkv_proj_0 at batch 1, a launch of its own at 64" ||
    { bad "per-bucket norm fold"; cat "$work/gen_b1.txt" "$work/gen_b64.txt"; }
  # a decode step's rope rides in its kv_append (fusion's rope + append): no rope launch is left
  grep -qE "^    #[0-9]+ +qk_rope_0,kv_append_0 +hk_kv_append_bf16_rope_l3_a8_d64 " "$work/gen_default.txt" &&
    ! grep -qE "^  hk_rope_" "$work/gen_default.txt" &&
    ok "sm_90a: the rope folded into kv_append (hk_kv_append_bf16_rope_l3_a8_d64, no rope kernel)" ||
    { bad "rope + append"; grep -E "rope|kv_append" "$work/gen_default.txt"; }
  "$HKC" build "$spec" -o "$work/nv.hkpack" --target sm_90a --kernel-option gemm_skinny=off -q
  "$HKC" build "$spec" -o "$work/nv0.hkpack" --target sm_90a --tune default --kernel-option gemm_skinny=off -q
  "$HKC" inspect "$work/nv.hkpack" > "$work/nv.txt"
  "$HKC" inspect "$work/nv0.hkpack" > "$work/nv0.txt"
  n_model=$(gemm_lines "$work/nv.txt" | grep -c "src=model" || true)
  [ "$n_model" -ge 5 ] && ! gemm_lines "$work/nv.txt" | grep -q SPILLS \
    && ok "sm_90a: $n_model gemm kernels chosen by the model" || { bad "sm_90a model"; gemm_lines "$work/nv.txt"; }
  gemm_lines "$work/nv0.txt" | grep -v "kernel=gemm_tma cfg=pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=0 src=default" && bad "--tune default: not the defaults" \
    || ok "sm_90a --tune default: gemm_tma pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=0 everywhere"
  check_tma_launches "$work/nv0.txt" > "$work/nv0.chk" \
    && grep -q "tmap(wt, box 64x256, swz128)" "$work/nv0.txt" && grep -q "tmap(w, box 64x64, swz128)" "$work/nv0.txt" \
    && ok "sm_90a --tune default: tensor maps 64x128 (A), 64x256 (trans_b B), 64x64 (B panels); persistent grids" \
    || { bad "sm_90a default launches"; cat "$work/nv0.chk"; }
  check_tma_launches "$work/nv.txt" > "$work/nv.chk" \
    && ok "sm_90a model: every launch's grid and tensor maps follow its kernel's configuration" \
    || { bad "sm_90a model launches"; cat "$work/nv.chk"; }
  # M = 77, N = 520 (batch 1): the default's 128x256 tiles make 3 blocks for 132 SMs; the
  # model takes smaller ones
  k1=$(grep -E "^    #0 +g_plain " "$work/nv.txt" | head -n1 | awk '{print $3}')
  gemm_lines "$work/nv.txt" | grep -E "^  $k1 " | grep "src=model" | grep -vq "cfg=pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=0" \
    && ok "sm_90a, M = 77: $(gemm_lines "$work/nv.txt" | grep -E "^  $k1 " | grep -o 'kernel=.*')" \
    || { bad "M = 77 choice"; gemm_lines "$work/nv.txt"; }
  nvrtc=$(grep -o "nvrtc [0-9.]*" "$work/targets.txt" | head -n1)
  echo "sm_90a | 132 | $nvrtc | gemm bf16 m=77 n=520 k=264 | gemm_mma | bm=64,bn=64,wm=2,wn=2,st=3 | 3.00 us" > "$work/nv.db"
  "$HKC" build "$spec" -o "$work/nvdb.hkpack" --target sm_90a --tuning-db "$work/nv.db" --kernel-option gemm_skinny=off -q
  "$HKC" inspect "$work/nvdb.hkpack" > "$work/nvdb.txt"
  k1=$(grep -E "^    #0 +g_plain " "$work/nvdb.txt" | head -n1 | awk '{print $3}')
  gemm_lines "$work/nvdb.txt" | grep -E "^  $k1 " | grep -q "kernel=gemm_mma cfg=bm=64,bn=64,wm=2,wn=2,st=3 src=db" \
    && ok "sm_90a: the database entry wins over the model" || { bad "sm_90a db"; gemm_lines "$work/nvdb.txt"; }
  ldconfig -p > "$work/ldconfig.txt" 2>/dev/null || true # (no pipe into grep -q under pipefail)
  if ! grep -q "libcuda.so.1 " "$work/ldconfig.txt"; then
    set +e
    "$HKC" tune "$spec" --target sm_90a -o "$work/nogpu.db" >"$work/nogpu.out" 2>&1; rc=$?
    set -e
    [ $rc -eq 1 ] && grep -q "this machine cannot run sm_90a" "$work/nogpu.out" && [ ! -e "$work/nogpu.db" ] \
      && ok "hkc tune without the GPU: a clear error before compiling the space" || { bad "tune without a GPU (rc $rc)"; cat "$work/nogpu.out"; }
  fi
fi
if grep -q "^AMD (gfx):     unavailable" "$work/targets.txt"; then
  echo "SKIPPED (AMD part): hiprtc unavailable"
else
  "$HKC" build "$spec" -o "$work/amd.hkpack" --target gfx90a -q
  "$HKC" inspect "$work/amd.hkpack" > "$work/amd.txt"
  n_model=$(gemm_lines "$work/amd.txt" | grep -c "kernel=gemm_mfma cfg=bm=[0-9]*,bn=[0-9]*,bk=[0-9]* src=model" || true)
  [ "$n_model" -ge 5 ] && ! gemm_lines "$work/amd.txt" | grep -q SPILLS \
    && ok "gfx90a: $n_model gemm_mfma kernels chosen by the model, none spills" || { bad "gfx90a model"; gemm_lines "$work/amd.txt"; }
  # the few-row launches: gemm_skinny_amd (wave64) at one row, as gemm_skinny on sm_90a; up to 8
  # rows under gemm_skinny=on; none under gemm_skinny=off
  grep -E "^    #[0-9]+ +g_gemv_tb " "$work/amd.txt" > "$work/amd_gemv.txt" || true
  a1=$(sed -n 1p "$work/amd_gemv.txt" | awk '{print $3}') a3=$(sed -n 2p "$work/amd_gemv.txt" | awk '{print $3}')
  "$HKC" build "$spec" -o "$work/amd_on.hkpack" --target gfx90a --kernel-option gemm_skinny=on -q
  "$HKC" inspect "$work/amd_on.hkpack" > "$work/amd_on.txt"
  a3on=$(grep -E "^    #[0-9]+ +g_gemv_tb " "$work/amd_on.txt" | sed -n 2p | awk '{print $3}')
  "$HKC" build "$spec" -o "$work/amd_off.hkpack" --target gfx90a --kernel-option gemm_skinny=off -q
  "$HKC" inspect "$work/amd_off.hkpack" > "$work/amd_off.txt"
  [ -n "$a1" ] && [ -n "$a3" ] && [ -n "$a3on" ] &&
    gemm_lines "$work/amd.txt" | grep -E "^  $a1 " | grep -q "kernel=gemm_skinny_amd cfg=mb=1 src=model" &&
    ! gemm_lines "$work/amd.txt" | grep -E "^  $a3 " | grep -q "kernel=gemm_skinny_amd" &&
    gemm_lines "$work/amd_on.txt" | grep -E "^  $a3on " | grep -q "kernel=gemm_skinny_amd cfg=mb=4 src=model" &&
    ! gemm_lines "$work/amd_off.txt" | grep -q "kernel=gemm_skinny_amd" &&
    ok "gfx90a: the batch-1 launch of g_gemv_tb is gemm_skinny_amd's (batch 3: under gemm_skinny=on; =off: none)" ||
    { bad "gemm_skinny_amd selection"; grep g_gemv "$work/amd.txt" "$work/amd_on.txt" "$work/amd_off.txt"; gemm_lines "$work/amd.txt"; }
  # a generation graph on gfx90a: attn_norm folds into the q|k|v gemm at the one-row bucket
  # (gemm_skinny_amd with the norm), a launch of its own at 64 rows; gemm_skinny=off: nowhere
  sed -e 's/"hidden_size": 64/"hidden_size": 256/' -e 's/"head_dim": 16/"head_dim": 64/' \
    "$HK_SOURCE_DIR/tests/integration/gen_configs/llama.json" > "$work/amd_gen.json"
  "$HKC" import hf "$work/amd_gen.json" --generate --max-seq 128 --slots 4 --token-buckets 1,64 --dtype bf16 \
    -o "$work/amd_gen.yaml" -q
  "$HKC" build "$work/amd_gen.yaml" -o "$work/amd_gen.hkpack" --target gfx90a -q
  "$HKC" build "$work/amd_gen.yaml" -o "$work/amd_gen_off.hkpack" --target gfx90a --kernel-option gemm_skinny=off -q
  "$HKC" inspect "$work/amd_gen.hkpack" > "$work/amd_gen.txt"
  "$HKC" inspect "$work/amd_gen_off.hkpack" > "$work/amd_gen_off.txt"
  grep -A12 -E "^  graph gfx90a, batch 1:" "$work/amd_gen.txt" > "$work/amd_gen_b1.txt"
  grep -A12 -E "^  graph gfx90a, batch 64:" "$work/amd_gen.txt" > "$work/amd_gen_b64.txt"
  kn=$(grep -E "^    #[0-9]+ +attn_norm_0,qkv_proj_0 " "$work/amd_gen_b1.txt" | awk '{print $3}')
  [ -n "$kn" ] && gemm_lines "$work/amd_gen.txt" | grep -E "^  $kn " | grep -q "kernel=gemm_skinny_amd cfg=mb=1 src=model" &&
    ! grep -qE "^    #[0-9]+ +attn_norm_0 " "$work/amd_gen_b1.txt" &&
    grep -qE "^    #[0-9]+ +attn_norm_0 +hk_rmsnorm" "$work/amd_gen_b64.txt" &&
    ! grep -qE "attn_norm_0,qkv_proj_0" "$work/amd_gen_off.txt" &&
    ok "gfx90a: attn_norm_0 folded into qkv_proj_0 (gemm_skinny_amd) at batch 1, a launch of its own at 64 and under gemm_skinny=off" ||
    { bad "gfx90a per-bucket norm fold"; cat "$work/amd_gen_b1.txt" "$work/amd_gen_b64.txt"; gemm_lines "$work/amd_gen.txt"; }
  # a graph that is not a generation graph never folds a norm on AMD (gemm_skinny_amd serves a
  # few rows only; the MFMA gemms fold none), whatever the clock or gemm_norm=on say
  cat > "$work/amd_ng.yaml" <<'SPEC'
hkc: 1
name: amd_ng
dtype: bf16
batch_sizes: [1, 64]
dims: {k: 256, n: 200}
inputs:
  x: [batch, k]
params:
  ga: [k]
  w1: [n, k]
graph:
  - {name: n1, op: rmsnorm, in: [x], gamma: ga, eps: 1.0e-5, out: x1}
  - {name: g1, op: gemm, in: [x1, w1], trans_b: true, out: y1}
outputs: [y1]
SPEC
  "$HKC" build "$work/amd_ng.yaml" -o "$work/amd_ng.hkpack" --target gfx90a --kernel-option gemm_norm=on \
    --fusion-report > "$work/amd_ng.txt" 2>&1
  "$HKC" inspect "$work/amd_ng.hkpack" >> "$work/amd_ng.txt"
  grep -q "keep apart n1 + g1 (norm into gemm): a target folds it at a few rows only" "$work/amd_ng.txt" &&
    ! grep -q "_nrm_" "$work/amd_ng.txt" &&
    ok "gfx90a, not a generation graph: rmsnorm + gemm kept apart (gemm_norm=on too)" ||
    { bad "gfx90a whole-plan norm fold"; cat "$work/amd_ng.txt"; }
  # its kv_attention launches (both buckets): kv_attention_wave; kv_warp=off: the portable kernel
  "$HKC" build "$work/amd_gen.yaml" -o "$work/amd_gen_kvoff.hkpack" --target gfx90a --kernel-option kv_warp=off -q
  "$HKC" inspect "$work/amd_gen_kvoff.hkpack" > "$work/amd_gen_kvoff.txt"
  amd_kva() { grep -E "^    #[0-9]+ +attn_0 " "$1" | awk '{print $3}' | while read -r k; do
      grep -E "^  $k " "$1" | grep -o 'kernel=[a-z_]*'; done | tr '\n' ' '; }
  [ "$(amd_kva "$work/amd_gen.txt")" = "kernel=kv_attention_wave kernel=kv_attention_wave " ] &&
    [ "$(amd_kva "$work/amd_gen_kvoff.txt")" = "kernel=simple kernel=simple " ] &&
    ok "gfx90a kv_attention: kv_attention_wave at both buckets; kv_warp=off: the portable kernel" ||
    bad "gfx90a kv_attention variants: $(amd_kva "$work/amd_gen.txt")/ $(amd_kva "$work/amd_gen_kvoff.txt")"
  # the whole space compiled and ranked, no GPU needed (two of the spec's GEMMs, both B layouts:
  # every candidate is a hiprtc compile)
  sed -e 's/batch_sizes: \[1, 3\]/batch_sizes: [3]/' -e '/g_silu_res\|g_gemv/d' -e 's/outputs: .*/outputs: [y1, y2]/' \
    "$spec" > "$work/dry.yaml"
  "$HKC" tune "$work/dry.yaml" --target gfx90a --dry-run --top 3 >"$work/dry.txt" 2>"$work/dry.err"
  [ "$(grep -c "^gemm bf16 m=" "$work/dry.txt")" -eq 2 ] && grep -q "0 failed" "$work/dry.err" \
    && grep -Eq "^ +1\. gemm_mfma +bm=[0-9]+,bn=[0-9]+,bk=[0-9]+ +[0-9.]+ us" "$work/dry.txt" \
    && ok "gfx90a --dry-run: 2 launch classes ranked, every candidate compiled" || { bad "gfx90a dry run"; cat "$work/dry.txt" "$work/dry.err"; }
fi

[ $fail -eq 0 ] && echo "tune: all checks passed"
exit $fail
