#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Kernel options (`hkc build --kernel-option NAME=VALUE`, codegen.h) through the real hkc:
#   - the defaults record kernel_options=none and change no kernel;
#   - a forced configuration changes the kernel's recorded config (cfg=..., src=option), its
#     name, and the provenance; the documented HKC_* variable maps onto the same option;
#   - sm_90a: gemm_tma by default (two tensor maps per GEMM launch, a persistent grid within
#     the 132 SMs); gemm_tma_cfg forces its configurations (split-K: a cluster of sk blocks
#     per tile; multicast pairs: even grids, 64-row A boxes for ping-pong); gemm_tma=off gives
#     gemm_wgmma_ws (no tensor maps), with gemm_ws=off gemm_wgmma; gemm_ws=off alone keeps
#     gemm_tma;
#   - sm_90a attention: attention_tma by default (three tensor maps of the packed qkv, a
#     persistent grid, pdl), the same kernels with attn_tma=on; attn_tma_cfg (with attn_tma=on)
#     forces its configurations; attn_tma=off gives attention_mma at head_dim 64 (no tensor
#     maps), recorded;
#   - an illegal configuration (the variant's tuning rules) and a bad value are clear errors
#     and write no file;
#   - the build option --no-pdl is recorded (pdl=off) and changes nothing else on the host;
#   - split-K (gemm_mma_cfg ...,sk) and stream-K (gemm_tma_cfg ...,skm) launches take scratch and
#     disjoint semaphores (format 1.3); the host target beside them takes none; the model splits
#     through the workspace only with gemm_split=on (opt-in until proven on the H200).
# GPU kernels compile with nvrtc (no GPU needed); without nvrtc only the host part runs.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HKC_CACHE_DIR="${HKC_CACHE_DIR:-$work/cache}"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
spec=$HK_SOURCE_DIR/specs/bert_layer.yaml

# ---- host: provenance only (the options change GPU kernels) --------------------------------
"$HKC" build "$spec" --target host -q -o "$work/h0.hkpack"
"$HKC" build "$spec" --target host -q --kernel-option ew_exact_act=1 -o "$work/h1.hkpack"
"$HKC" inspect "$work/h0.hkpack" > "$work/h0.txt"; "$HKC" inspect "$work/h1.hkpack" > "$work/h1.txt"
grep -qx "  kernel_options=none" "$work/h0.txt" && ok "defaults: kernel_options=none" || { bad "no kernel_options=none"; cat "$work/h0.txt"; }
grep -qx "  kernel_options=ew_exact_act=1" "$work/h1.txt" && ok "recorded: kernel_options=ew_exact_act=1" || bad "option not recorded"
diff <(grep -v kernel_options= "$work/h0.txt" | tail -n +2) <(grep -v kernel_options= "$work/h1.txt" | tail -n +2) >/dev/null \
  && ok "host kernels unchanged" || bad "host kernels changed"

set +e
msg=$("$HKC" build "$spec" --target host --kernel-option gemm_ws=sometimes -o "$work/bad1.hkpack" 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && [ ! -e "$work/bad1.hkpack" ] && grep -q "gemm_ws=sometimes: expected auto|on|off" <<<"$msg" \
  && ok "bad value: $msg" || bad "bad value: exit $rc: $msg"
set +e
msg=$(HKC_GEMM_WS=maybe "$HKC" build "$spec" --target host -o "$work/bad2.hkpack" 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && [ ! -e "$work/bad2.hkpack" ] && grep -q "environment variable HKC_GEMM_WS" <<<"$msg" \
  && ok "bad environment value names the variable" || bad "bad env: exit $rc: $msg"
"$HKC" build --help > "$work/help.txt" # (no pipe into grep -q: SIGPIPE under pipefail)
grep -q "gemm_ws_cfg (HKC_GEMM_WS_CFG)" "$work/help.txt" && grep -q "gemm_tma (HKC_GEMM_TMA)" "$work/help.txt" \
  && grep -q "gemm_tma_cfg (HKC_GEMM_TMA_CFG)" "$work/help.txt" && ok "--help lists the options and their variables" || bad "--help"
# every option of the table (compiler/codegen/kernel_options.c), each "name (VARIABLE): " line, and
# the text after the list: the help is not cut off however long the table grows
missing=""
while read -r name env; do
  grep -q "^ *$name ($env): " "$work/help.txt" || missing="$missing $name"
done < <(sed -n 's/^ *{"\([a-z0-9_]*\)", "\(HKC_[A-Z0-9_]*\)".*/\1 \2/p' "$HK_SOURCE_DIR/compiler/codegen/kernel_options.c")
n_opts=$(grep -c '^ *{"[a-z0-9_]*", "HKC_' "$HK_SOURCE_DIR/compiler/codegen/kernel_options.c")
[ -z "$missing" ] && [ "$n_opts" -ge 28 ] && grep -q "^Options take their value as" "$work/help.txt" &&
  ok "build --help: all $n_opts kernel options, and the common options after them" ||
  bad "build --help lacks:$missing (of $n_opts), or is cut off: $(tail -c 300 "$work/help.txt")"

# ---- --no-pdl (a build option beside the kernel options): provenance pdl=off only when given;
# host launches are never marked for programmatic dependent launch ------------------------------
"$HKC" build "$spec" --target host -q --no-pdl -o "$work/h2.hkpack"
"$HKC" inspect "$work/h2.hkpack" > "$work/h2.txt"
grep -qx "  pdl=off" "$work/h2.txt" && ! grep -q "pdl=" "$work/h0.txt" && ok "--no-pdl: provenance pdl=off, absent otherwise" \
  || bad "--no-pdl provenance"
diff <(grep -vx "  pdl=off" "$work/h2.txt" | tail -n +2) <(tail -n +2 "$work/h0.txt") >/dev/null \
  && ok "--no-pdl: host pack otherwise the same" || bad "--no-pdl changed the host pack"
grep -q "\] pdl$" "$work/h0.txt" && bad "a host launch is marked pdl" || ok "no host launch marked pdl"
grep -q -- "--no-pdl" "$work/help.txt" && ok "build --help lists --no-pdl" || bad "build --help lacks --no-pdl"
"$HKC" run --random-params --allow-unsigned-native "$work/h0.hkpack" --runs 1 --warmup 0 --no-pdl > "$work/run.txt" 2>&1 && ! grep -q "programmatic" "$work/run.txt" \
  && ok "run --no-pdl" || { bad "run --no-pdl"; cat "$work/run.txt"; }

# ---- sm_90a (nvrtc): the kernel's configuration and name ---------------------------------------
if ! "$HKC" build "$spec" --target sm_90a -q --tune default -o "$work/g0.hkpack" 2>"$work/g0.err"; then
  if grep -q "need nvrtc" "$work/g0.err"; then echo "skip sm_90a part: $(cat "$work/g0.err")"; exit $fail; fi
  bad "sm_90a build"; cat "$work/g0.err"; exit 1
fi
build() { local out=$1; shift; "$HKC" build "$spec" --target sm_90a -q --tune default -o "$work/$out.hkpack" "$@"; "$HKC" inspect "$work/$out.hkpack" > "$work/$out.txt"; }
build g0
build g1 --kernel-option gemm_tma_cfg=1,1,64,8,1,2
HKC_GEMM_TMA_CFG=0,1,128,5,4 build g2
HKC_GEMM_TMA=0 build g3
build g4 --kernel-option gemm_tma=off --kernel-option gemm_ws_cfg=128,4,0
HKC_GEMM_TMA=0 HKC_GEMM_WS=0 build g5
HKC_GEMM_WS=0 build g6
kernels() { grep -E "^  hk_gemm" "$1"; }
# the GEMM launches of a pack: "kernel grid" per line, and their tensor-map lines
launches() { grep -E "^    #[0-9]+ .* hk_gemm" "$1" | sed -E 's/.* (hk_gemm[^ ]*) +grid \[([0-9]+),1,1\].*/\1 \2/'; }
tmaps() { grep -E "^      tensor maps: arg 9 " "$1" || true; } # the GEMMs' (attention's start at arg 17)
n_gemm=$(launches "$work/g0.txt" | wc -l)
[ "$n_gemm" -ge 4 ] || bad "no GEMM launches in the sm_90a pack"
# every GEMM kernel: gemm_tma with cfg (the name: untuned for the defaults, _t<hash> when forced)
all_kernels() { # file, name suffix pattern, expected tail of the params
  local n; n=$(kernels "$1" | wc -l)
  [ "$n" -ge 3 ] && [ "$(kernels "$1" | grep -cE "^  hk_gemm_[a-z0-9_]+_a8$2 .*$3$")" -eq "$n" ]
}
all_kernels "$work/g0.txt" "" "kernel=gemm_tma cfg=pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=0 src=default" \
  && ok "default: gemm_tma, untuned names" || { bad "default gemm"; kernels "$work/g0.txt"; }
# tensor maps: one line per GEMM launch, A [M][K] in 64 x 128 boxes, B [K][N] in 64 x 64 panels
[ "$(tmaps "$work/g0.txt" | wc -l)" -eq "$n_gemm" ] \
  && [ "$(tmaps "$work/g0.txt" | grep -cE "^      tensor maps: arg 9 tmap\([a-z0-9_]+, box 64x128, swz128\), arg 10 tmap\(w_[a-z0-9]+, box 64x64, swz128\)$")" -eq "$n_gemm" ] \
  && ok "default: two tensor maps per GEMM launch ($n_gemm), boxes 64x128 and 64x64" || { bad "default tensor maps"; tmaps "$work/g0.txt"; }
launches "$work/g0.txt" | awk '$2 < 1 || $2 > 132 {bad=1} END {exit bad}' \
  && ok "default: persistent grids within the 132 SMs" || { bad "default grids"; launches "$work/g0.txt"; }
# gemm_tma waits with griddepcontrol (variant_gemm_nv.c, HKC_GEMM_TMA_PDL): its launches with a
# predecessor are marked pdl; gemm_wgmma_ws (gemm_tma=off, g3 below) never is
[ "$(grep -cE "^    #[0-9]+ .* hk_gemm.* after \[[0-9,]+\] pdl$" "$work/g0.txt")" -eq "$(grep -cE "^    #[0-9]+ .* hk_gemm.* after \[[0-9,]+\]" "$work/g0.txt")" ] \
  && ok "default: every gemm_tma launch after another is marked pdl" || { bad "pdl marks"; grep -E "^    #" "$work/g0.txt"; }
# gemm_tma_cfg=1,1,64,8,1,2: ping-pong 64x64 tiles in multicast pairs
all_kernels "$work/g1.txt" "_t[0-9a-f]{8}" "kernel=gemm_tma cfg=pp=1,mw=1,bn=64,st=8,sk=1,cm=2,ts=0 src=option" \
  && ok "gemm_tma_cfg: recorded config, src=option, another name" || { bad "forced gemm_tma config"; kernels "$work/g1.txt"; }
grep -qx "  kernel_options=gemm_tma_cfg=pp=1,mw=1,bn=64,st=8,sk=1,cm=2,ts=0" "$work/g1.txt" && ok "provenance: gemm_tma_cfg" || bad "provenance gemm_tma_cfg"
launches "$work/g1.txt" | awk '$2 < 2 || $2 > 132 || $2 % 2 {bad=1} END {exit bad}' \
  && [ "$(tmaps "$work/g1.txt" | grep -c "arg 9 tmap([a-z0-9_]*, box 64x64, swz128), arg 10 tmap(w_[a-z0-9]*, box 64x64, swz128)$")" -eq "$n_gemm" ] \
  && ok "multicast pairs: even grids within the 132 SMs, 64x64 A boxes" || { bad "cm=2 launches"; grep -E "hk_gemm|tensor maps" "$work/g1.txt"; }
# HKC_GEMM_TMA_CFG=0,1,128,5,4 (split-K 4): one cluster of 4 blocks per 128x128 tile; batch 1:
# qkv_proj M = 128, N = 2304: 18 tiles, 72 blocks
all_kernels "$work/g2.txt" "_t[0-9a-f]{8}" "kernel=gemm_tma cfg=pp=0,mw=1,bn=128,st=5,sk=4,cm=1,ts=0 src=option" \
  && grep -qx "  kernel_options=gemm_tma_cfg=pp=0,mw=1,bn=128,st=5,sk=4,cm=1,ts=0" "$work/g2.txt" \
  && ok "HKC_GEMM_TMA_CFG maps to gemm_tma_cfg (positional SPLIT_K)" || { bad "HKC_GEMM_TMA_CFG"; grep -E "hk_gemm|kernel_options" "$work/g2.txt"; }
grep -qE "^    #0 +qkv_proj +hk_gemm_bf16_bias_a8_t[0-9a-f]{8} +grid \[72,1,1\]" "$work/g2.txt" \
  && launches "$work/g2.txt" | awk '$2 % 4 {bad=1} END {exit bad}' \
  && ok "split-K: grid = tiles x 4 (qkv_proj, batch 1: 72)" || { bad "split-K grid"; launches "$work/g2.txt"; }
# gemm_tma=off: gemm_wgmma_ws (named in the key: src=option), no tensor maps
all_kernels "$work/g3.txt" "_t[0-9a-f]{8}" "kernel=gemm_wgmma_ws cfg=bn=256,st=3,p=1 src=option" \
  && grep -qx "  kernel_options=gemm_tma=off" "$work/g3.txt" && [ "$(tmaps "$work/g3.txt" | wc -l)" -eq 0 ] \
  && ok "HKC_GEMM_TMA=0 maps to gemm_tma=off: gemm_wgmma_ws, no tensor maps" || { bad "HKC_GEMM_TMA=0"; grep -E "hk_gemm|kernel_options|tensor maps" "$work/g3.txt"; }
grep -E "^    #[0-9]+ .* hk_gemm" "$work/g3.txt" | grep -q "\] pdl$" && bad "a gemm_wgmma_ws launch is marked pdl" || ok "gemm_wgmma_ws launches: no pdl"
all_kernels "$work/g4.txt" "_t[0-9a-f]{8}" "kernel=gemm_wgmma_ws cfg=bn=128,st=4,p=0 src=option" \
  && ok "gemm_tma=off + gemm_ws_cfg: recorded config, src=option, another name" || { bad "forced gemm_ws config"; kernels "$work/g4.txt"; }
grep -qx "  kernel_options=gemm_tma=off;gemm_ws_cfg=bn=128,st=4,p=0" "$work/g4.txt" && ok "provenance: gemm_ws_cfg" || bad "provenance gemm_ws_cfg"
all_kernels "$work/g5.txt" "_t[0-9a-f]{8}" "kernel=gemm_wgmma cfg=bm=128,bn=256,st=4 src=option" \
  && grep -qx "  kernel_options=gemm_tma=off;gemm_ws=off" "$work/g5.txt" \
  && ok "HKC_GEMM_TMA=0 HKC_GEMM_WS=0: gemm_wgmma" || { bad "HKC_GEMM_TMA=0 HKC_GEMM_WS=0"; grep -E "hk_gemm|kernel_options" "$work/g5.txt"; }
diff <(kernels "$work/g0.txt") <(kernels "$work/g6.txt") >/dev/null && grep -qx "  kernel_options=gemm_ws=off" "$work/g6.txt" \
  && ok "gemm_ws=off alone: recorded, the gemm_tma kernels unchanged" || { bad "gemm_ws=off alone"; grep -E "hk_gemm|kernel_options" "$work/g6.txt"; }
# ---- attention (bert_layer: packed qkv, 12 heads of 64): attention_tma by default --------------
build a0
build a1 --kernel-option attn_tma=on --kernel-option attn_tma_cfg=2,128,2,0,0
HKC_ATTN_TMA=off build a2
build a3 --kernel-option attn_tma=on
attn_kernel() { grep -E "^  hk_attention" "$1"; }
attn_tmaps() { grep -E "^      tensor maps: arg 17 " "$1" || true; }
n_attn=$(grep -cE "^    #[0-9]+ +attn +hk_attention" "$work/a0.txt")
attn_kernel "$work/a0.txt" | grep -qE "^  hk_attention_bf16_a8_d64(_t[0-9a-f]{8})? .* kernel=attention_tma( |$)" \
  && [ "$(attn_tmaps "$work/a0.txt" | grep -cxE "      tensor maps: arg 17 tmap\(qkv, box 64x128, swz128\), arg 18 tmap\(qkv, box 64x128, swz128\), arg 19 tmap\(qkv, box 64x128, swz128\)")" -eq "$n_attn" ] \
  && [ "$n_attn" -ge 1 ] && ok "default: attention_tma, three tensor maps of qkv per launch ($n_attn)" \
  || { bad "default attention"; attn_kernel "$work/a0.txt"; attn_tmaps "$work/a0.txt"; }
grep -E "^    #[0-9]+ +attn +hk_attention" "$work/a0.txt" | sed -E 's/.*grid \[([0-9]+),1,1\].*/\1/' | awk '$1 < 1 || $1 > 132 {bad=1} END {exit bad}' \
  && grep -E "^    #[0-9]+ +attn +hk_attention" "$work/a0.txt" | grep -qE "after \[[0-9,]+\] pdl$" \
  && ok "attention_tma: persistent grids within the 132 SMs, pdl after the qkv GEMM" || { bad "attention grids / pdl"; grep -E "^    #[0-9]+ +attn" "$work/a0.txt"; }
attn_kernel "$work/a1.txt" | grep -qE "^  hk_attention_bf16_a8_d64_t[0-9a-f]{8} .* kernel=attention_tma cfg=wg=2,kv=128,st=2,pp=0,ov=0,p=1 src=option$" \
  && grep -qx "  kernel_options=attn_tma=on;attn_tma_cfg=wg=2,kv=128,st=2,pp=0,ov=0,p=1" "$work/a1.txt" \
  && ok "attn_tma_cfg: the simple pipeline, recorded, src=option, another name" || { bad "attn_tma_cfg"; attn_kernel "$work/a1.txt"; }
attn_kernel "$work/a2.txt" | grep -qE "^  hk_attention_bf16_a8_d64(_t[0-9a-f]{8})? .* kernel=attention_mma" \
  && [ "$(attn_tmaps "$work/a2.txt" | wc -l)" -eq 0 ] && grep -qx "  kernel_options=attn_tma=off" "$work/a2.txt" \
  && ok "HKC_ATTN_TMA=off maps to attn_tma=off: attention_mma, no tensor maps" || { bad "attn_tma=off"; attn_kernel "$work/a2.txt"; }
[ "$(attn_kernel "$work/a3.txt" | sed -E 's/ +src=[a-z]+$//; s/_t[0-9a-f]{8} / /')" = "$(attn_kernel "$work/a0.txt" | sed -E 's/ +src=[a-z]+$//; s/_t[0-9a-f]{8} / /')" ] \
  && grep -qx "  kernel_options=attn_tma=on" "$work/a3.txt" \
  && ok "attn_tma=on: the default's attention_tma configuration, recorded" || { bad "attn_tma=on"; attn_kernel "$work/a3.txt"; attn_kernel "$work/a0.txt"; }

# illegal configurations: one clear error quoting the rules, no file
illegal() { # name, expected message, build options...
  local name=$1 want=$2; shift 2
  set +e
  msg=$("$HKC" build "$spec" --target sm_90a "$@" -o "$work/$name.hkpack" 2>&1); rc=$?
  set -e
  [ $rc -ne 0 ] && [ ! -e "$work/$name.hkpack" ] && [ "$(grep -c 'is not legal' <<<"$msg")" -eq 1 ] && grep -qF "$want" <<<"$msg" \
    && ok "illegal configuration ${*:-(environment)}: one clear error, no file" || bad "illegal config ${*:-(environment)}: exit $rc: $msg"
}
illegal bad3 "kernel option gemm_ws_cfg=bn=256,st=12,p=1 is not legal for kernel hk_gemm_bf16_bias_a8 on sm_90a (gemm_wgmma_ws: " \
  --kernel-option gemm_tma=off --kernel-option gemm_ws_cfg=256,12,1
illegal bad4 "kernel option gemm_tma_cfg=pp=0,mw=1,bn=96,st=4,sk=1,cm=1,ts=0 is not legal for kernel hk_gemm_bf16_bias_a8 on sm_90a (gemm_tma: pp 0 or 1; mw 1 or 2; bn 64, 96 (trans_b only)" \
  --kernel-option gemm_tma_cfg=0,1,96,4
illegal bad5 "kernel option gemm_tma_cfg=pp=0,mw=1,bn=256,st=4,sk=2,cm=1,ts=0 is not legal for kernel hk_gemm_bf16_bias_a8 on sm_90a (gemm_tma: " \
  --kernel-option gemm_tma_cfg=0,1,256,4,2
HKC_GEMM_TMA_CFG=1,1,64,8,2,2 illegal bad6 "kernel option gemm_tma_cfg=pp=1,mw=1,bn=64,st=8,sk=2,cm=2,ts=0 is not legal"
illegal bad7 "kernel option attn_tma_cfg=wg=1,kv=64,st=2,pp=1,ov=1,p=1 is not legal for kernel hk_attention_bf16_a8_d64 on sm_90a (attention_tma: " \
  --kernel-option attn_tma=on --kernel-option attn_tma_cfg=1,64,2
illegal bad8 "kernel option gemm_tma_cfg=pp=0,mw=1,bn=256,st=4,sk=1,cm=1,ts=0,skm=4 is not legal" \
  --kernel-option gemm_tma_cfg=0,1,256,4,1,1,0,4

# ---- launch workspace (format 1.3): gemm_mma split-K on sm_90, gemm_tma stream-K on sm_90a ------
# Every GEMM launch of those targets takes scratch and semaphores as its last two arguments,
# the semaphore ranges of a graph are disjoint and add up to the graph's count; the host
# target in the same pack has none and runs as before.
"$HKC" build "$spec" --target host,sm_90,sm_90a -q --tune default --kernel-option gemm_mma_cfg=64,64,2,2,4,4 \
  --kernel-option gemm_tma_cfg=0,1,128,6,1,1,0,4 -o "$work/w.hkpack"
"$HKC" inspect "$work/w.hkpack" > "$work/w.txt"
# per graph: "target batch semaphores" then per GEMM launch "arg_scratch arg_semaphore first count"
awk '/^  graph /{t=$2; sub(",", "", t); b=$4; sub(":", "", b); n=0; if (match($0, /, [0-9]+ semaphore/)) n=substr($0, RSTART+2, RLENGTH-12); print "G", t, b, n}
     /^      workspace: /{print "W", t, b, $0}' "$work/w.txt" > "$work/w.ws"
check_ws() { # target, scratch arg, semaphore arg
  awk -v t="$1" -v sa="arg $2 scratch" -v ma="arg $3 semaphores" '
    $1 == "G" && $2 == t { graphs++; want[$3] = $4 }
    $1 == "W" && $2 == t {
      if (index($0, sa) == 0 || index($0, ma) == 0) bad = 1
      match($0, /semaphores\([0-9]+ from [0-9]+\)/); split(substr($0, RSTART + 11, RLENGTH - 12), f, " from ")
      if (f[2] != next_first[$3] + 0) bad = 1   # ranges in launch order, disjoint
      next_first[$3] = f[2] + f[1]; launches++ }
    END { for (b in want) if (next_first[b] + 0 != want[b]) bad = 1
          exit !(graphs > 0 && launches >= 4 * graphs && !bad) }' "$work/w.ws"
}
check_ws sm_90 9 10 && ok "sm_90 split-K launches: scratch and disjoint semaphores after the ABI's arguments" \
  || { bad "sm_90 workspace"; cat "$work/w.ws"; }
check_ws sm_90a 11 12 && ok "sm_90a stream-K launches: scratch and semaphores after the tensor maps" \
  || { bad "sm_90a workspace"; cat "$work/w.ws"; }
grep -E "^W host" "$work/w.ws" >/dev/null && bad "host launches with workspace" || ok "host launches: no workspace"
awk '$1 == "G" && $2 ~ /^host/ && $4 != 0 {bad=1} END {exit bad}' "$work/w.ws" && ok "host graphs: no semaphores" || bad "host semaphores"
host_target=$(awk '/^  host-/ {print $1; exit}' "$work/w.txt")
"$HKC" run --random-params --allow-unsigned-native "$work/w.hkpack" --target "$host_target" --runs 1 --warmup 0 > "$work/wrun.txt" 2>&1 && ok "the host target of that pack runs" \
  || { bad "host run"; cat "$work/wrun.txt"; }
# gemm_split: split-K through the workspace is in the model's space by default (sm_90: the
# small-M GEMMs split); gemm_split=off keeps it out, recorded
"$HKC" build "$spec" --target sm_90 -q --kernel-option gemm_split=off -o "$work/m0.hkpack"
"$HKC" build "$spec" --target sm_90 -q -o "$work/m1.hkpack"
"$HKC" inspect "$work/m0.hkpack" > "$work/m0.txt"; "$HKC" inspect "$work/m1.hkpack" > "$work/m1.txt"
! grep -q "workspace: " "$work/m0.txt" && ! grep -q ",sk=" "$work/m0.txt" && grep -qx "  kernel_options=gemm_split=off" "$work/m0.txt" \
  && ok "model, gemm_split=off: no split-K through the workspace" || { bad "gemm_split=off model split"; cat "$work/m0.txt"; }
grep -qx "  kernel_options=none" "$work/m1.txt" && grep -q "workspace: " "$work/m1.txt" && grep -q ",sk=" "$work/m1.txt" \
  && ok "model, default options: split GEMMs with workspace" || { bad "default model split"; cat "$work/m1.txt"; }
exit $fail
