#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# hkc run --weights FILE.npz (docs/WEIGHTS.md): specs/mlp.yaml's params written by numpy.savez
# (stored) and numpy.savez_compressed (deflated), in f64, f32 and f16, bind through libzip and
# the .npy reader of --param: the outputs are byte-identical to the run with every param given
# as .npy, and match a float64 NumPy reference. The same for a bf16 build of the spec (the
# members converted to the pack's dtype). A name map renames members; the format is told by
# content (a zip named .bin, a safetensors file named .npz). Then the refusals: a missing
# member (the unbound-param error), a wrong shape, a truncated archive, a member that is no
# .npy (by name and by content), a member larger than its param can need (a zip bomb), a
# file that is no zip, a map entry naming no member.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$HK_SOURCE_DIR/tests/integration/lib/checks.sh" # ok, bad, expect_fail; fail

"$HKC" build "$HK_SOURCE_DIR/specs/mlp.yaml" --target host -o "$work/mlp.hkpack" -q
sed 's/^dtype: f32$/dtype: bf16/' "$HK_SOURCE_DIR/specs/mlp.yaml" > "$work/mlp_bf16.yaml"
grep -q '^dtype: bf16$' "$work/mlp_bf16.yaml" || bad "no bf16 spec written"
"$HKC" build "$work/mlp_bf16.yaml" --target host -o "$work/mlp_bf16.hkpack" -q
run() { "$HKC" run --allow-unsigned-native "$1" --runs 1 --warmup 0 --input "x=$work/x.npy" "${@:2}"; }

PY=${HK_PYTHON:-/usr/bin/python3}
"$PY" - "$work" <<'EOF'
import io, math, sys, zipfile
import numpy as np
work = sys.argv[1]
rng = np.random.default_rng(1919)
shapes = {"w1": (64, 256), "b1": (256,), "w2": (256, 64), "b2": (64,), "g": (64,), "b": (64,)}
dtypes = {"w1": np.float64, "b1": np.float16, "w2": np.float32, "b2": np.float32, "g": np.float64, "b": np.float16}
p = {}
for n, s in shapes.items():
    scale = 1 / math.sqrt(s[0]) if len(s) == 2 else 1.0
    p[n] = rng.uniform(-scale, scale, size=s).astype(dtypes[n])
    if n == "g":
        p[n] = (1 + p[n]).astype(dtypes[n])
    np.save("%s/%s.npy" % (work, n), p[n])            # the --param run reads the same values
x = rng.uniform(-1, 1, size=(1, 16, 64)).astype(np.float32)
np.save(work + "/x.npy", x)
np.savez(work + "/w.npz", **p)                        # stored
np.savez_compressed(work + "/wc.npz", **p)            # deflated
# extra members the pack does not need are ignored, as a checkpoint's extra tensors are
np.savez_compressed(work + "/extra.npz", step=np.arange(3.0), **p)
# under other names, for the name map
np.savez(work + "/renamed.npz", **{("layer0." + n if n in ("w1", "w2") else n): v for n, v in p.items()})
with open(work + "/map.txt", "w") as f:
    f.write("# pack name   member name\nw1 layer0.w1\nw2\tlayer0.w2\n")
with open(work + "/bad_map.txt", "w") as f:
    f.write("w1 layer0.nothing\n")

# the float64 reference (specs/mlp.yaml: gemm + bias + gelu (erf), gemm + bias, + x, layernorm)
t = {n: v.astype(np.float64) for n, v in p.items()}
erf = np.vectorize(math.erf)
h = x.astype(np.float64) @ t["w1"] + t["b1"]
h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
y1 = h @ t["w2"] + t["b2"] + x
mu = y1.mean(-1, keepdims=True)
var = ((y1 - mu) ** 2).mean(-1, keepdims=True)
np.save(work + "/ref.npy", (y1 - mu) / np.sqrt(var + 1e-5) * t["g"] + t["b"])

# refusals
q = dict(p); del q["w2"]
np.savez(work + "/missing.npz", **q)
q = dict(p); q["w1"] = p["w1"].T.copy()
np.savez(work + "/shape.npz", **q)
raw = open(work + "/wc.npz", "rb").read()
open(work + "/truncated.npz", "wb").write(raw[: len(raw) // 2])
def npy(v):
    b = io.BytesIO(); np.save(b, v); return b.getvalue()
with zipfile.ZipFile(work + "/textmember.npz", "w") as z:
    for n, v in p.items():
        z.writestr(n + ".npy", npy(v))
    z.writestr("README.txt", "not an array")
with zipfile.ZipFile(work + "/notnpy.npz", "w", zipfile.ZIP_DEFLATED) as z:
    for n, v in p.items():
        z.writestr(n + ".npy", b"plain text, not a .npy" if n == "b2" else npy(v))
q = dict(p); q["b1"] = np.zeros(4 << 20, np.float32)   # 16 MiB of zeros: a few KiB deflated
np.savez_compressed(work + "/bomb.npz", **q)
q = dict(p); q["b"] = p["b"].astype(np.uint16)
np.savez(work + "/int.npz", **q)
# a safetensors checkpoint of the same values (f32), named .npz
import json, struct
hdr, blobs, at = {}, [], 0
for n, v in p.items():
    raw = v.astype("<f4").tobytes()
    hdr[n] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [at, at + len(raw)]}
    blobs.append(raw); at += len(raw)
hj = json.dumps(hdr).encode()
open(work + "/st.npz", "wb").write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))
open(work + "/junk.npz", "wb").write(b"this is not a zip archive at all\n" * 4)
open(work + "/junk.bin", "wb").write(b"neither format\n" * 4)
EOF

params=()
for n in w1 b1 w2 b2 g b; do params+=(--param "$n=$work/$n.npy"); done
run "$work/mlp.hkpack" "${params[@]}" --save-outputs "$work/npy" -q || bad "run with --param"
cmp_out() { cmp -s "$work/npy/y.npy" "$work/$1/y.npy"; }
for f in w wc extra; do
  if run "$work/mlp.hkpack" --weights "$work/$f.npz" --save-outputs "$work/$f" > "$work/$f.txt"; then
    grep -q "weights: 6 of 6 param(s) bound from $work/$f.npz" "$work/$f.txt" || bad "$f.npz: no summary line: $(cat "$work/$f.txt")"
    cmp_out "$f" && ok "$f.npz: outputs byte-identical to the --param run $(grep -o '([0-9]* tensor(s) in the file)' "$work/$f.txt")" \
      || bad "$f.npz: output differs from the --param run"
  else
    bad "run --weights $f.npz: $(cat "$work/$f.txt")"
  fi
done
# --json names the format
run "$work/mlp.hkpack" --weights "$work/wc.npz" --json | "$PY" -c '
import json, sys
w = json.load(sys.stdin)["weights"]
sys.exit(0 if (w["format"], w["bound"], w["tensors"]) == ("npz", 6, 6) else 1)' && ok "--json: weights.format npz" \
  || bad "--json weights object"
"$PY" - "$work" <<'EOF' && ok "outputs match the float64 NumPy reference" || bad "outputs vs the NumPy reference"
import sys
import numpy as np
work = sys.argv[1]
y, ref = np.load(work + "/wc/y.npy").astype(np.float64), np.load(work + "/ref.npy")
err = np.abs(y - ref).max()
print("     max |hkc - numpy| = %.3g" % err)
sys.exit(0 if y.shape == ref.shape and err < 1e-3 and np.abs(ref).max() > 0.5 else 1)
EOF

# bf16 pack: each member converted to bf16 as --param converts it
run "$work/mlp_bf16.hkpack" "${params[@]}" --save-outputs "$work/npy16" -q || bad "bf16 run with --param"
run "$work/mlp_bf16.hkpack" --weights "$work/wc.npz" --save-outputs "$work/wc16" -q \
  && cmp -s "$work/npy16/y.npy" "$work/wc16/y.npy" && ok "bf16 pack: outputs byte-identical to the --param run" \
  || bad "bf16 pack: --weights wc.npz differs from --param"

# a name map, as for safetensors
run "$work/mlp.hkpack" --weights "$work/renamed.npz" --weights-map "$work/map.txt" --save-outputs "$work/mapped" -q \
  && cmp_out mapped && ok "--weights-map renames members" || bad "--weights-map"
# several params may take one member (g and b from b.npy here), when they agree in dtype and shape
printf 'w1 layer0.w1\nw2 layer0.w2\ng b\n' > "$work/shared_map.txt"
shared=()
for n in w1 b1 w2 b2 b; do shared+=(--param "$n=$work/$n.npy"); done
run "$work/mlp.hkpack" --weights "$work/renamed.npz" --weights-map "$work/shared_map.txt" --save-outputs "$work/shared" -q \
  && run "$work/mlp.hkpack" "${shared[@]}" --param "g=$work/b.npy" --save-outputs "$work/shared_npy" -q \
  && cmp -s "$work/shared/y.npy" "$work/shared_npy/y.npy" && ! cmp -s "$work/shared/y.npy" "$work/npy/y.npy" \
  && ok "two params take one member" || bad "two params taking one member"
printf 'b1 b\n' > "$work/clash_map.txt"
expect_fail "two params of different shapes take one member" \
  'member b.npy is taken by tensors b1 \(F32 \[256\]\) and b \(F32 \[64\]\)' \
  run "$work/mlp.hkpack" --weights "$work/w.npz" --weights-map "$work/clash_map.txt"
expect_fail "without the map, w1 and w2 are unbound" '2 param\(s\) unbound' run "$work/mlp.hkpack" --weights "$work/renamed.npz"
expect_fail "map entry naming no member" 'tensor w1 maps to "layer0.nothing", which the weights do not have' \
  run "$work/mlp.hkpack" --weights "$work/renamed.npz" --weights-map "$work/bad_map.txt"

# the format is told by content, not by the name
cp "$work/wc.npz" "$work/wc.bin"
run "$work/mlp.hkpack" --weights "$work/wc.bin" --save-outputs "$work/bin" -q && cmp_out bin \
  && ok "a zip named .bin is read as .npz" || bad "wc.bin"

run "$work/mlp.hkpack" --weights "$work/st.npz" --save-outputs "$work/st" -q && cmp_out st \
  && ok "a safetensors file named .npz is read as safetensors" || bad "st.npz"

# refusals
expect_fail "missing member: the unbound param named" '^  w2 \[256, 64\]' run "$work/mlp.hkpack" --weights "$work/missing.npz"
expect_fail "wrong shape" 'shape.npz: member w1.npy: shape \[256, 64\] does not match tensor w1 \[64, 256\]' \
  run "$work/mlp.hkpack" --weights "$work/shape.npz"
expect_fail "truncated archive" 'truncated.npz: truncated or damaged zip archive' \
  run "$work/mlp.hkpack" --weights "$work/truncated.npz"
expect_fail "a member that is no .npy (name)" 'textmember.npz: member "README.txt" is not a .npy member' \
  run "$work/mlp.hkpack" --weights "$work/textmember.npz"
expect_fail "a member that is no .npy (content)" 'notnpy.npz: member b2.npy: not a .npy file' \
  run "$work/mlp.hkpack" --weights "$work/notnpy.npz"
expect_fail "an unsupported member dtype (uint16)" 'int.npz: member b.npy: unsupported .npy dtype <u2' \
  run "$work/mlp.hkpack" --weights "$work/int.npz"
expect_fail "zip bomb refused unread" 'bomb.npz: member b1.npy: 16777344 bytes uncompressed, more than the [0-9]+ a .npy of its param can take' \
  run "$work/mlp.hkpack" --weights "$work/bomb.npz"
expect_fail "not a zip" 'junk.npz: not a zip archive' run "$work/mlp.hkpack" --weights "$work/junk.npz"
expect_fail "neither format" 'junk.bin: neither a safetensors checkpoint .* nor an .npz archive' \
  run "$work/mlp.hkpack" --weights "$work/junk.bin"

exit $fail
