#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hkc run --weights (docs/WEIGHTS.md): a safetensors checkpoint written here by hand (struct + json, NumPy
# only) binds the params of a host pack through libhkrt, a name map renames two of them, and
# the outputs are byte-identical to the same run with every param given as .npy.
# Conversion: the same params as an F32 checkpoint bind to the bf16 pack (libhkrt rounds to
# nearest even, noting "weights: converting 5 tensors from F32 to BF16" once on stderr) with
# outputs byte-identical to the BF16 checkpoint that NumPy rounded; an F16 checkpoint gives
# what its values rounded once to bf16 give; a param larger than the 1 MiB staging buffer
# converts chunk by chunk to the same bytes; a value beyond bf16's range is refused, named.
# Then the refusals: unbound params (each named) unless --random-params, a shape or an
# integer dtype that differs from the pack's, a corrupt file, a bad name map; and more than
# 256 --param flags.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$HK_SOURCE_DIR/tests/integration/lib/checks.sh" # ok, bad, expect_fail; fail

# bf16 params of odd sizes (some tensors land at offsets that are not 16-byte aligned: the
# copy path), plus x, r, x1, v inputs (random from the seed in both runs).
# HK_WEIGHTS_TARGET=sm_90a (on the GPU machine): the same checks through a GPU target, where
# the session copies every bound tensor into device memory it owns.
target=${HK_WEIGHTS_TARGET:-host}
"$HKC" build "$HK_SOURCE_DIR/tests/specs/op_gemm.yaml" --target "$target" -o "$work/g.hkpack" -q
run_target=()
[ "$target" = host ] || run_target=(--target "$target")
run() { "$HKC" run --allow-unsigned-native "$work/g.hkpack" "${run_target[@]}" --batch 3 --runs 1 --warmup 0 "$@"; }

PY=${HK_PYTHON:-/usr/bin/python3}
"$PY" - "$work" <<'EOF'
import json, struct, sys
import numpy as np
work = sys.argv[1]
rng = np.random.default_rng(19)
shapes = {"w": [45, 77], "wt": [77, 45], "b": [77], "w1": [1, 13], "wv": [45, 1]}

def bf16_bits(a):  # float32 -> bf16 bits, round to nearest even
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)

def write_st(path, tensors, metadata=None, pad=True):
    header, blobs, at = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

bits, f32, f16 = {}, {}, {}
for name, shp in shapes.items():
    x = rng.uniform(-1, 1, size=shp).astype(np.float32)
    b = bf16_bits(x)
    bits[name] = b
    f32[name] = x
    f16[name] = x.astype(np.float16)
    # the .npy holds the bf16 values exactly, so both runs bind the same bytes
    np.save("%s/%s.npy" % (work, name), (b.astype(np.uint32) << 16).view(np.float32))

file_name = {"w": "model.w", "wt": "model.wt"}  # the name map renames these two
tensors = {"extra.step": ("I32", [2], np.array([7, 8], "<i4").tobytes())}
for name in ["b", "w", "wv", "wt", "w1"]:
    tensors[file_name.get(name, name)] = ("BF16", shapes[name], bits[name].tobytes())
write_st(work + "/model.safetensors", tensors, {"format": "pt"})
with open(work + "/map.txt", "w") as f:
    f.write("# pack name   checkpoint name\n\nw  model.w\n\twt\tmodel.wt  \n")
# every tensor under its own name: no map needed
write_st(work + "/plain.safetensors", {n: ("BF16", shapes[n], bits[n].tobytes()) for n in shapes}, pad=False)
# mismatches against the pack
bad_shape = dict(tensors); bad_shape["model.w"] = ("BF16", [77, 45], bits["w"].tobytes())
write_st(work + "/bad_shape.safetensors", bad_shape)
bad_dtype = dict(tensors); bad_dtype["b"] = ("I32", [77], np.zeros(77, "<i4").tobytes())
write_st(work + "/bad_dtype.safetensors", bad_dtype)
# the same params in F32 (libhkrt rounds them to bf16), and in F16 with their bf16 roundings
write_st(work + "/f32.safetensors", {file_name.get(n, n): ("F32", shapes[n], f32[n].astype("<f4").tobytes()) for n in shapes})
write_st(work + "/f16.safetensors", {n: ("F16", shapes[n], f16[n].astype("<f2").tobytes()) for n in shapes})
write_st(work + "/f16_as_bf16.safetensors",
         {n: ("BF16", shapes[n], bf16_bits(f16[n].astype(np.float32)).tobytes()) for n in shapes})
big = dict(f32); big["wt"] = f32["wt"].copy(); big["wt"][3, 5] = 3.4e38  # beyond bf16's largest finite
write_st(work + "/overflow.safetensors", {n: ("F32", shapes[n], big[n].astype("<f4").tobytes()) for n in shapes})
with open(work + "/corrupt.safetensors", "wb") as f:
    f.write(struct.pack("<Q", 1 << 20) + b'{"a": {}}')
with open(work + "/bad_map.txt", "w") as f:
    f.write("w model.w\nwt model.wt extra\n")
EOF

params=()
for p in w wt b w1 wv; do params+=(--param "$p=$work/$p.npy"); done
run "${params[@]}" --save-outputs "$work/npy" > "$work/npy.txt" || { bad "run with --param"; cat "$work/npy.txt"; }
if run --weights "$work/model.safetensors" --weights-map "$work/map.txt" --save-outputs "$work/st" > "$work/st.txt"; then
  grep -q "weights: 5 of 5 param(s) bound" "$work/st.txt" && ok "run --weights --weights-map: $(grep weights: "$work/st.txt")" \
    || { bad "run --weights: no summary line"; cat "$work/st.txt"; }
else
  bad "run --weights"; cat "$work/st.txt"
fi
same=1
for y in y1 y2 y3 y4 y5 y6 y7; do cmp -s "$work/npy/$y.npy" "$work/st/$y.npy" || { same=0; bad "output $y differs"; }; done
[ $same -eq 1 ] && ok "outputs byte-identical to the --param run (7 outputs)"
run --weights "$work/plain.safetensors" --save-outputs "$work/plain" > /dev/null && cmp -s "$work/npy/y4.npy" "$work/plain/y4.npy" \
  && ok "unpadded header, names as in the pack" || bad "plain.safetensors"
# --param wins over --weights for its tensor: the same bytes here, so the same outputs
run --weights "$work/plain.safetensors" --param "b=$work/b.npy" --save-outputs "$work/mixed" > /dev/null \
  && cmp -s "$work/npy/y1.npy" "$work/mixed/y1.npy" && ok "--param with --weights" || bad "--param with --weights"

expect_fail "unbound params refused" 'not given:' run
msg=$(run 2>&1 || true)
for p in w wt b w1 wv; do grep -q "^  $p \[" <<<"$msg" || bad "refusal does not name $p"; done
expect_fail "without the map, w and wt are unbound" '2 param\(s\) unbound' run --weights "$work/model.safetensors"
run --random-params > /dev/null && ok "--random-params runs" || bad "--random-params"
expect_fail "shape mismatch" 'tensor w: the session expects bf16 \[45,77\], the weights. tensor "model.w" is BF16 \[77,45\]' \
  run --weights "$work/bad_shape.safetensors" --weights-map "$work/map.txt"
expect_fail "dtype mismatch" 'tensor b: the session expects bf16 \[77\], the weights. tensor "b" is I32 \[77\]' \
  run --weights "$work/bad_dtype.safetensors" --weights-map "$work/map.txt"

# ---- conversion: F32 and F16 checkpoints for the bf16 pack ----
same_outputs() { # same_outputs DIR_A DIR_B: every output byte-identical
  for y in y1 y2 y3 y4 y5 y6 y7; do cmp -s "$1/$y.npy" "$2/$y.npy" || return 1; done
}
if run --weights "$work/f32.safetensors" --weights-map "$work/map.txt" --save-outputs "$work/f32" \
     > "$work/f32.txt" 2> "$work/f32.err"; then
  [ "$(grep -c "^weights: converting" "$work/f32.err")" = 1 ] &&
    grep -qx "weights: converting 5 tensors from F32 to BF16" "$work/f32.err" &&
    ok "F32 checkpoint, bf16 pack: $(cat "$work/f32.err")" || { bad "F32 checkpoint: the note"; cat "$work/f32.err"; }
  same_outputs "$work/npy" "$work/f32" && ok "F32 checkpoint: outputs byte-identical to the BF16 checkpoint NumPy rounded (7 outputs)" \
    || bad "F32 checkpoint: outputs differ from the BF16 checkpoint's"
else
  bad "run --weights f32.safetensors"; cat "$work/f32.txt" "$work/f32.err"
fi
run --weights "$work/f16.safetensors" --save-outputs "$work/f16" > /dev/null 2> "$work/f16.err" &&
  run --weights "$work/f16_as_bf16.safetensors" --save-outputs "$work/f16ref" > /dev/null 2>&1 &&
  grep -qx "weights: converting 5 tensors from F16 to BF16" "$work/f16.err" && same_outputs "$work/f16" "$work/f16ref" &&
  ok "F16 checkpoint: the outputs of its values rounded once to bf16 by NumPy" || bad "F16 checkpoint"
# a param larger than libhkrt's 1 MiB staging buffer (700001 bf16 values: two chunks, the
# second starting mid-tensor), converted from F32 and compared with NumPy's rounding
cat > "$work/big.yaml" <<'YAML'
hkc: 1
name: big_row
dtype: bf16
batch_sizes: [2]
dims: {c: 700001}
inputs: {x: [batch, c]}
params: {row: [c]}
graph:
  - {name: m, op: mul, in: [x, row], out: y}
outputs: [y]
YAML
"$PY" - "$work" <<'EOF'
import json, struct, sys
import numpy as np
work = sys.argv[1]
row = np.random.default_rng(3).standard_normal(700001).astype(np.float32) * np.float32(1e3)
u = row.view(np.uint32).astype(np.uint64)
bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
for name, dtype, raw in (("big_f32", "F32", row.astype("<f4").tobytes()), ("big_bf16", "BF16", bits.tobytes())):
    h = json.dumps({"row": {"dtype": dtype, "shape": [700001], "data_offsets": [0, len(raw)]}}).encode()
    open("%s/%s.safetensors" % (work, name), "wb").write(struct.pack("<Q", len(h)) + h + raw)
EOF
"$HKC" build "$work/big.yaml" --target "$target" -o "$work/big.hkpack" -q
big() { "$HKC" run --allow-unsigned-native "$work/big.hkpack" "${run_target[@]}" --batch 2 --runs 1 --warmup 0 "$@"; }
big --weights "$work/big_f32.safetensors" --save-outputs "$work/big_f32" > /dev/null 2> "$work/big.err" &&
  big --weights "$work/big_bf16.safetensors" --save-outputs "$work/big_bf16" > /dev/null &&
  grep -qx "weights: converting 1 tensor from F32 to BF16" "$work/big.err" &&
  cmp -s "$work/big_f32/y.npy" "$work/big_bf16/y.npy" &&
  ok "a 700001-element param through the staging buffer in two chunks: NumPy's rounding" || bad "big param: $(cat "$work/big.err")"
expect_fail "a value beyond bf16's range" \
  'tensor wt: the weights. tensor "wt" \(F32\) holds 3\.[0-9]+e\+38 at element 140, beyond the largest finite bf16' \
  run --weights "$work/overflow.safetensors"
expect_fail "corrupt file" 'header length 1048576 runs past the end' run --weights "$work/corrupt.safetensors"
expect_fail "bad map line" 'bad_map.txt:2: expected two names' \
  run --weights "$work/model.safetensors" --weights-map "$work/bad_map.txt"
printf 'w no.such.tensor\n' > "$work/missing_map.txt"
expect_fail "map to a missing tensor" 'tensor w maps to "no.such.tensor", which the weights do not have' \
  run --weights "$work/model.safetensors" --weights-map "$work/missing_map.txt"
set +e; msg=$(run --weights-map "$work/map.txt" 2>&1); rc=$?; set -e
[ $rc -eq 2 ] && grep -q "needs --weights" <<<"$msg" && ok "--weights-map alone: usage error" || bad "--weights-map alone: $rc $msg"

# more than 256 --param flags (the limit was fixed at 256 with a misleading message)
many=()
for i in $(seq 300); do many+=(--param "b=$work/b.npy"); done
run "${params[@]}" "${many[@]}" > /dev/null && ok "300 --param flags" || bad "300 --param flags"

exit $fail
