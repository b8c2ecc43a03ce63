#!/usr/bin/env bash
# Kernel options (`hkc build --kernel-option NAME=VALUE`, codegen.h) through the real hkc:
#   - the defaults record kernel_options=none and change no kernel;
#   - a forced configuration changes the kernel's recorded config (cfg=..., src=option), its
#     name, and the provenance; the documented HKC_* variable maps onto the same option;
#   - an illegal configuration (the variant's tuning rules) and a bad value are clear errors
#     and write no file;
#   - the build option --no-pdl is recorded (pdl=off) and changes nothing else on the host.
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
grep -q "gemm_ws_cfg (HKC_GEMM_WS_CFG)" "$work/help.txt" && ok "--help lists the options and their variables" || bad "--help"

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
"$HKC" run "$work/h0.hkpack" --runs 1 --warmup 0 --no-pdl > "$work/run.txt" 2>&1 && ! grep -q "programmatic" "$work/run.txt" \
  && ok "run --no-pdl" || { bad "run --no-pdl"; cat "$work/run.txt"; }

# ---- sm_90a (nvrtc): the kernel's configuration and name ---------------------------------------
if ! "$HKC" build "$spec" --target sm_90a -q --tune default -o "$work/g0.hkpack" 2>"$work/g0.err"; then
  if grep -q "need nvrtc" "$work/g0.err"; then echo "skip sm_90a part: $(cat "$work/g0.err")"; exit $fail; fi
  bad "sm_90a build"; cat "$work/g0.err"; exit 1
fi
"$HKC" build "$spec" --target sm_90a -q --tune default --kernel-option gemm_ws_cfg=128,4,0 -o "$work/g1.hkpack"
HKC_GEMM_WS=0 "$HKC" build "$spec" --target sm_90a -q --tune default -o "$work/g2.hkpack"
for i in 0 1 2; do "$HKC" inspect "$work/g$i.hkpack" > "$work/g$i.txt"; done
grep -E "^  hk_gemm_bf16_bias_a8 .*kernel=gemm_wgmma_ws cfg=bn=256,st=3,p=1 src=default$" "$work/g0.txt" >/dev/null && ok "default: gemm_wgmma_ws, untuned name" \
  || { bad "default gemm"; grep hk_gemm "$work/g0.txt"; }
grep -E "^  hk_gemm_bf16_bias_a8_t[0-9a-f]{8} .*kernel=gemm_wgmma_ws cfg=bn=128,st=4,p=0 src=option$" "$work/g1.txt" >/dev/null \
  && ok "gemm_ws_cfg: recorded config, src=option, another name" || { bad "forced config"; grep hk_gemm "$work/g1.txt"; }
grep -qx "  kernel_options=gemm_ws_cfg=bn=128,st=4,p=0" "$work/g1.txt" && ok "provenance: gemm_ws_cfg" || bad "provenance gemm_ws_cfg"
grep -E "^  hk_gemm_bf16_bias_a8_t[0-9a-f]{8} .*kernel=gemm_wgmma cfg=bm=128,bn=256,st=4 src=option$" "$work/g2.txt" >/dev/null \
  && grep -qx "  kernel_options=gemm_ws=off" "$work/g2.txt" && ok "HKC_GEMM_WS=0 maps to gemm_ws=off" \
  || { bad "HKC_GEMM_WS=0"; grep -E "hk_gemm|kernel_options" "$work/g2.txt"; }
# no variant waits with griddepcontrol yet (variant_gemm_nv.c, HKC_GEMM_TMA_PDL): nothing marked
grep -q "\] pdl$" "$work/g0.txt" && bad "an sm_90a launch is marked pdl" || ok "no sm_90a launch marked pdl (yet)"
set +e
msg=$("$HKC" build "$spec" --target sm_90a --kernel-option gemm_ws_cfg=256,12,1 -o "$work/bad3.hkpack" 2>&1); rc=$?
set -e
[ $rc -ne 0 ] && [ ! -e "$work/bad3.hkpack" ] && [ "$(grep -c 'is not legal' <<<"$msg")" -eq 1 ] \
  && grep -q "kernel option gemm_ws_cfg=bn=256,st=12,p=1 is not legal for kernel hk_gemm_bf16_bias_a8 on sm_90a (gemm_wgmma_ws: " <<<"$msg" \
  && ok "illegal configuration: one clear error, no file" || bad "illegal config: exit $rc: $msg"
exit $fail
