#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `hkc quantize` on its own (import_hf.sh runs it end to end on imported Llama and Qwen2 layers):
# blocks with partial edges in both dtypes, from F16 and BF16 as well as F32, checked in NumPy
# (the scales are absmax / 127 or / 448 per block; q * scale within half a step of the weights);
# tensors that do not match copied byte for byte; the errors (no --dtype, a bad --block, nothing
# to quantize, a checkpoint quantized already, a non-finite weight, an output that is a
# directory) leave no output.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$PY" -c "import numpy" 2>/dev/null || { echo "SKIPPED: no numpy for $PY"; exit 77; }

"$PY" - "$work" <<'PYEOF'
import os, sys
import numpy as np
sys.path.insert(0, os.environ["HK_SOURCE_DIR"] + "/tests/integration")
from safetensors_io import write as st
work = sys.argv[1]
rng = np.random.default_rng(5)
w = rng.standard_normal((70, 45)).astype(np.float32); w[3] = 0.0  # an all-zero row: scale 1
bf = (rng.standard_normal((33, 40)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
st(work + "/in.safetensors", {"a.q_proj.weight": ("F32", w), "b.up_proj.weight": ("BF16", bf),
                              "c.down_proj.weight": ("F16", rng.standard_normal((9, 130)).astype(np.float16)),
                              "norm.weight": ("F32", rng.standard_normal(45).astype(np.float32)),
                              "e.v_proj.bias": ("F32", rng.standard_normal(45).astype(np.float32))})
nan = w.copy(); nan[5, 7] = np.nan
st(work + "/nan.safetensors", {"a.q_proj.weight": ("F32", nan)})
st(work + "/scaled.safetensors", {"a.q_proj.weight": ("F32", w), "a.q_proj.weight_scale": ("F32", w[:, :1].copy())})
PYEOF

check() { # check DTYPE QMAX BLOCK|-: quantize in.safetensors and verify it in NumPy
  local dt=$1 qmax=$2 block=$3 out=$work/out-$1-$3.safetensors
  if [ "$block" = - ]; then "$HKC" quantize "$work/in.safetensors" -o "$out" --dtype "$dt" > "$work/q.txt"
  else "$HKC" quantize "$work/in.safetensors" -o "$out" --dtype "$dt" --block "$block" > "$work/q.txt"; fi
  grep -q "3 tensor(s) quantized to $dt" "$work/q.txt" || fail "$dt $block: $(cat "$work/q.txt")"
  "$PY" - "$work/in.safetensors" "$out" "$dt" "$qmax" "$block" <<'PYEOF' || fail "$dt $block: numpy check"
import os, sys
import numpy as np
sys.path.insert(0, os.environ["HK_SOURCE_DIR"] + "/tests/integration")
from safetensors_io import read
src, out = read(sys.argv[1]), read(sys.argv[2])
dt, qmax, block = sys.argv[3], float(sys.argv[4]), sys.argv[5]
assert set(out) == set(src) | {k + "_scale" for k in src if k.endswith("_proj.weight")}, sorted(out)
for k, (sdt, w, raw) in src.items():
    if not k.endswith("_proj.weight"):
        assert out[k][0] == sdt and out[k][1].shape == w.shape and out[k][2] == raw, k  # copied byte for byte
        continue
    rows, cols = w.shape
    br, bc = (1, cols) if block == "-" else map(int, block.split(","))
    qdt, q, _ = out[k]; s = out[k + "_scale"][1]
    assert qdt == ("I8" if dt == "int8" else "F8_E4M3") and q.shape == w.shape, (k, qdt, q.shape)
    assert s.shape == (-(-rows // br), -(-cols // bc)), (k, s.shape)
    full = s[np.arange(rows)[:, None] // br, np.arange(cols)[None, :] // bc]
    for i in range(s.shape[0]):
        for j in range(s.shape[1]):
            amax = np.abs(w[i * br:(i + 1) * br, j * bc:(j + 1) * bc]).max()
            want = amax / qmax if amax > 0 else 1.0
            assert abs(s[i, j] - np.float32(want)) <= 1e-7 * want, (k, i, j, s[i, j], want)
    d = q * full
    bound = full / 2 if dt == "int8" else np.maximum(np.abs(w) * 2.0 ** -4, full * 2.0 ** -10)
    assert np.all(np.abs(d - w) <= bound * (1 + 1e-6)), (k, np.max(np.abs(d - w) / bound))
    if dt == "int8": assert np.abs(q).max() <= 127
print("ok   %s block %s: %d tensors" % (dt, block, len(out)))
PYEOF
}
check int8 127 -
check fp8_e4m3 448 -
check int8 127 32,16
check fp8_e4m3 448 16,128

# The LM head: lm_head.weight quantized in place; a tied checkpoint (no lm_head.weight) gets the
# table's quantized copy as lm_head.weight, the float table kept; --no-lm-head leaves both float.
"$PY" - "$work" <<'PYEOF'
import os, sys
import numpy as np
sys.path.insert(0, os.environ["HK_SOURCE_DIR"] + "/tests/integration")
from safetensors_io import write as st
rng = np.random.default_rng(7)
p = rng.standard_normal((12, 10)).astype(np.float32)
emb = rng.standard_normal((50, 12)).astype(np.float32)
st(sys.argv[1] + "/tied.safetensors", {"model.layers.0.mlp.up_proj.weight": ("F32", p),
                                       "model.embed_tokens.weight": ("F32", emb)})
st(sys.argv[1] + "/untied.safetensors", {"model.layers.0.mlp.up_proj.weight": ("F32", p),
                                         "model.embed_tokens.weight": ("F32", emb), "lm_head.weight": ("F32", emb + 1)})
PYEOF
for what in tied untied tied-no; do
  src=${what%-no}; extra=(); [ "$what" = tied-no ] && extra=(--no-lm-head)
  "$HKC" quantize "$work/$src.safetensors" -o "$work/h-$what.safetensors" --dtype int8 "${extra[@]}" > "$work/q.txt"
  "$PY" - "$work/$src.safetensors" "$work/h-$what.safetensors" "$what" <<'PYEOF' || fail "LM head ($what): $(cat "$work/q.txt")"
import os, sys
import numpy as np
sys.path.insert(0, os.environ["HK_SOURCE_DIR"] + "/tests/integration")
from safetensors_io import read
src, out, what = read(sys.argv[1]), read(sys.argv[2]), sys.argv[3]
emb = "model.embed_tokens.weight"
assert out[emb][0] == "F32" and out[emb][2] == src[emb][2], "the table is copied as it is"
if what == "tied-no":
    assert "lm_head.weight" not in out and "lm_head.weight_scale" not in out, sorted(out)
else:
    w = src["lm_head.weight"][1] if what == "untied" else src[emb][1]
    dt, q, _ = out["lm_head.weight"]
    s = out["lm_head.weight_scale"][1]
    assert dt == "I8" and q.shape == w.shape and s.shape == (w.shape[0], 1), (dt, q.shape, s.shape)
    assert np.allclose(s[:, 0], np.abs(w).max(axis=1) / 127, rtol=1e-6)
    assert np.all(np.abs(q * s - w) <= s / 2 * (1 + 1e-6))
print("ok   LM head (%s): %s" % (what, sorted(out)))
PYEOF
done
"$HKC" quantize "$work/tied.safetensors" -o "$work/h2.safetensors" --dtype int8 > "$work/q.txt" # says so
grep -q "lm_head.weight from the tied model.embed_tokens.weight" "$work/q.txt" || fail "tied head: $(cat "$work/q.txt")"

expect_fail() { # expect_fail RC REGEX OUT COMMAND...
  local rc=$1 want=$2 out=$3; shift 3
  set +e; "$@" > "$work/e.txt" 2>&1; local got=$?; set -e
  [ "$got" -eq "$rc" ] && grep -Eq -e "$want" "$work/e.txt" && [ ! -e "$out" ] || fail "$* (rc $got): $(cat "$work/e.txt")"
  echo "ok   $(head -n1 "$work/e.txt" | cut -c1-150)"
}
expect_fail 2 "no --dtype given" "$work/x.safetensors" "$HKC" quantize "$work/in.safetensors" -o "$work/x.safetensors"
expect_fail 2 "--block expects ROWS,COLS" "$work/x.safetensors" \
  "$HKC" quantize "$work/in.safetensors" -o "$work/x.safetensors" --dtype int8 --block 0,4
expect_fail 1 "no 2-D F32, F16 or BF16 tensor is named with .*\.nothing" "$work/x.safetensors" \
  "$HKC" quantize "$work/in.safetensors" -o "$work/x.safetensors" --dtype int8 --match .nothing
expect_fail 1 "already has a.q_proj.weight_scale" "$work/x.safetensors" \
  "$HKC" quantize "$work/scaled.safetensors" -o "$work/x.safetensors" --dtype int8
expect_fail 1 "no 2-D F32, F16 or BF16 tensor is named with _proj.weight" "$work/x.safetensors" \
  "$HKC" quantize "$work/out-int8--.safetensors" -o "$work/x.safetensors" --dtype int8 # quantized already
expect_fail 1 "a.q_proj.weight: element \[5, 7\] is nan" "$work/x.safetensors" \
  "$HKC" quantize "$work/nan.safetensors" -o "$work/x.safetensors" --dtype fp8_e4m3
mkdir "$work/dir.safetensors"
set +e; "$HKC" quantize "$work/in.safetensors" -o "$work/dir.safetensors" --dtype int8 > "$work/e.txt" 2>&1; rc=$?; set -e
[ $rc -eq 1 ] && [ -d "$work/dir.safetensors" ] || fail "output over a directory (rc $rc): $(cat "$work/e.txt")"
echo "ok   an output that is a directory: $(head -n1 "$work/e.txt" | cut -c1-150)"
echo "quantize: ok"
