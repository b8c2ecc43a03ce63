#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Self-contained packs (docs/WEIGHTS.md): `hkc build --weights FILE.safetensors [--weights-map MAP]`
# stores every param in the pack (format 1.4, WEIGHTS_INDEX + WEIGHTS). Checked here on a host
# pack of tests/specs/op_gemm.yaml (bf16 params of odd sizes):
#  - inspect (text and --json) shows the stored params and their bytes;
#  - `hkc run` of the self-contained pack needs no --weights, and its outputs are byte-identical
#    to the weight-less pack run with --weights; --weights and --param still bind over the
#    stored params (their outputs equal the weight-less pack's with the same files);
#  - a flipped byte in a stored weight is refused by the section checksum; signed, the pack
#    is the same bytes as build then `hkc sign`, runs with --trust, and a flipped weight byte is
#    refused (sign_test.c flips weight bytes with the checksums fixed: the signature catches it);
#  - hkc merge of parts built with the same --weights equals one build of all the targets (but
#    for the signature and the merge's provenance lines: lib/pack_same.py)
#    (host + sm_90 of op_elementwise.yaml, when nvrtc is here), and parts with other weights
#    are refused;
#  - an F32 checkpoint of the same values builds the same pack bytes as the BF16 checkpoint
#    NumPy rounded (hkc build converts with libhkrt's rounding, saying so once on stderr), and
#    parts of F16 / F32 likewise; a value beyond bf16's range is refused, named;
#  - at build time a missing param, a wrong shape, an integer dtype, a bad name map or an .npz
#    is an error that names the problem, and no pack is written.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
. "$HK_SOURCE_DIR/tests/integration/lib/checks.sh" # ok, bad, expect_fail; fail

PY=${HK_PYTHON:-/usr/bin/python3}
"$PY" - "$work" <<'EOF'
import json, struct, sys
import numpy as np
work = sys.argv[1]
shapes = {"w": [45, 77], "wt": [77, 45], "b": [77], "w1": [1, 13], "wv": [45, 1]}

def bf16_bits(a):  # float32 -> bf16 bits, round to nearest even
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)

def write_st(path, tensors):
    header, blobs, at = {}, [], 0
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

def checkpoint(seed, rename, dtype="BF16"):
    rng = np.random.default_rng(seed)
    out = {"extra.step": ("I32", [2], np.array([7, 8], "<i4").tobytes())}
    for name, shp in shapes.items():
        x = rng.uniform(-1, 1, size=shp).astype(np.float32)
        bits = bf16_bits(x)
        out[rename.get(name, name)] = ("BF16", shp, bits.tobytes()) if dtype == "BF16" else ("F32", shp, x.astype("<f4").tobytes())
        if seed == 7:  # the other values also as a .npy, for --param
            np.save("%s/%s.npy" % (work, name), (bits.astype(np.uint32) << 16).view(np.float32))
    return out

renamed = checkpoint(19, {"w": "model.w", "wt": "model.wt"})
write_st(work + "/model.safetensors", renamed)
# the same values in F32: hkc build rounds them to the pack's bf16
f32 = checkpoint(19, {"w": "model.w", "wt": "model.wt"}, "F32")
write_st(work + "/f32.safetensors", f32)
big = dict(f32); wt = np.frombuffer(f32["model.wt"][2], "<f4").copy(); wt[100] = -3.4e38
big["model.wt"] = ("F32", [77, 45], wt.tobytes())
write_st(work + "/overflow.safetensors", big)
with open(work + "/map.txt", "w") as f:
    f.write("# pack name   checkpoint name\nw  model.w\nwt model.wt\n")
write_st(work + "/other.safetensors", checkpoint(7, {}))  # other values, own names
missing = dict(renamed); del missing["wv"]; del missing["b"]
write_st(work + "/missing.safetensors", missing)
bad_shape = dict(renamed); bad_shape["model.w"] = ("BF16", [77, 45], renamed["model.w"][2])
write_st(work + "/bad_shape.safetensors", bad_shape)
bad_dtype = dict(renamed); bad_dtype["b"] = ("I32", [77], np.zeros(77, "<i4").tobytes())
write_st(work + "/bad_dtype.safetensors", bad_dtype)
with open(work + "/input_map.txt", "w") as f:
    f.write("x model.w\n")
EOF

spec="$HK_SOURCE_DIR/tests/specs/op_gemm.yaml"
"$HKC" build "$spec" --target host -o "$work/plain.hkpack" -q
"$HKC" build "$spec" --target host -o "$work/self.hkpack" --weights "$work/model.safetensors" \
  --weights-map "$work/map.txt" > "$work/build.txt"
grep -q "weights *5 param(s)" "$work/build.txt" && ok "build --weights: $(grep weights "$work/build.txt" | xargs)" \
  || { bad "build --weights: no weights line"; cat "$work/build.txt"; }

"$HKC" build "$spec" --target host -o "$work/json.hkpack" --weights "$work/model.safetensors" \
  --weights-map "$work/map.txt" --json > "$work/build.json"
cmp -s "$work/json.hkpack" "$work/self.hkpack" && "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["weights"]["params"] == 5' \
  "$work/build.json" && ok "build --json: weights, and the same bytes again" || bad "build --json / determinism"

# ---- conversion: an F32 checkpoint, the same pack bytes as the BF16 one NumPy rounded ----
"$HKC" build "$spec" --target host -o "$work/f32.hkpack" --weights "$work/f32.safetensors" \
  --weights-map "$work/map.txt" > "$work/f32.txt" 2> "$work/f32.err" || { bad "build --weights f32"; cat "$work/f32.err"; }
[ "$(grep -c "weights: converting" "$work/f32.err")" = 1 ] &&
  grep -q "^hkc build: weights: converting 5 tensors of .*f32.safetensors from F32 to BF16$" "$work/f32.err" &&
  ok "build from F32: $(grep converting "$work/f32.err")" || { bad "build from F32: the note"; cat "$work/f32.err"; }
cmp -s "$work/f32.hkpack" "$work/self.hkpack" && ok "build from F32: the pack of the BF16 checkpoint, byte for byte" \
  || bad "build from F32: the pack differs from the BF16 checkpoint's"
"$HKC" build "$spec" --target host -o "$work/quiet.hkpack" --weights "$work/f32.safetensors" \
  --weights-map "$work/map.txt" -q > "$work/quiet.txt" 2>&1 && [ ! -s "$work/quiet.txt" ] \
  && ok "build from F32 -q: no note" || { bad "build -q printed"; cat "$work/quiet.txt"; }

# ---- inspect ----
"$HKC" inspect "$work/self.hkpack" > "$work/inspect.txt"
grep -q "format 1\.11," "$work/inspect.txt" && grep -q "weights: 5 param(s), .* stored" "$work/inspect.txt" \
  && [ "$(grep -c ' stored$' "$work/inspect.txt")" -eq 5 ] \
  && ok "inspect: $(grep 'weights:' "$work/inspect.txt" | xargs)" || { bad "inspect"; cat "$work/inspect.txt"; }
"$HKC" inspect "$work/plain.hkpack" > "$work/plain.txt" # (no pipe into grep -q: SIGPIPE under pipefail)
grep -q "weights: none stored" "$work/plain.txt" && ok "inspect of a weight-less pack" \
  || bad "inspect of a weight-less pack"
"$HKC" inspect --json "$work/self.hkpack" > "$work/self.json"
"$HKC" inspect --json "$work/plain.hkpack" > "$work/plain.json"
"$PY" - "$work" <<'EOF' && ok "inspect --json: weights {params, bytes}, tensors' stored" || bad "inspect --json"
import json, sys
w = sys.argv[1]
s, p = json.load(open(w + "/self.json")), json.load(open(w + "/plain.json"))
# 45*77 + 77*45 + 77 + 13 + 45 bf16 values, each tensor 64-byte aligned
sizes = [77 * 45 * 2, 77 * 45 * 2, 77 * 2, 13 * 2, 45 * 2]
want = 0
for n in sizes:
    want = (want + 63) // 64 * 64 + n
assert s["weights"] == {"params": 5, "bytes": want}, s["weights"]
assert p["weights"] is None
stored = {t["name"] for t in s["tensors"] if t["stored"]}
assert stored == {"w", "wt", "b", "w1", "wv"}, stored
assert not any(t["stored"] for t in p["tensors"])
assert s["bytes"] > p["bytes"] + want
EOF

# ---- run: the stored params, byte-identical to --weights on the weight-less pack ----
run() { "$HKC" run --allow-unsigned-native "$@" --batch 3 --runs 1 --warmup 0; }
run "$work/self.hkpack" --save-outputs "$work/self" > "$work/self.txt" \
  && grep -q "weights: 5 param(s) bound from the pack" "$work/self.txt" \
  && ok "run without --weights: $(grep 'weights:' "$work/self.txt")" || { bad "run self-contained"; cat "$work/self.txt"; }
run "$work/plain.hkpack" --weights "$work/model.safetensors" --weights-map "$work/map.txt" \
  --save-outputs "$work/plain" > /dev/null || bad "run plain --weights"
same() { # same DIR_A DIR_B: every output byte-identical
  for y in y1 y2 y3 y4 y5 y6 y7; do cmp -s "$1/$y.npy" "$2/$y.npy" || return 1; done
}
same "$work/self" "$work/plain" && ok "outputs byte-identical to the weight-less pack with --weights (7 outputs)" \
  || bad "outputs of the self-contained pack differ"
run "$work/self.hkpack" --json > "$work/run.json"
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["pack_weights"] == 5 and d["weights"] is None and d["ok"]' \
  "$work/run.json" && ok "run --json: pack_weights 5" || bad "run --json"

# ---- binding by hand still overrides ----
run "$work/self.hkpack" --weights "$work/other.safetensors" --save-outputs "$work/over" > /dev/null || bad "run --weights over"
run "$work/plain.hkpack" --weights "$work/other.safetensors" --save-outputs "$work/other" > /dev/null || bad "run plain other"
same "$work/over" "$work/other" && ! cmp -s "$work/over/y1.npy" "$work/self/y1.npy" \
  && ok "--weights binds over the stored params" || bad "--weights over the stored params"
params=()
for p in w wt b w1 wv; do params+=(--param "$p=$work/$p.npy"); done
run "$work/self.hkpack" "${params[@]}" --save-outputs "$work/param" > /dev/null || bad "run --param over"
same "$work/param" "$work/other" && ok "--param binds over the stored params" || bad "--param over the stored params"

# ---- damage and signatures ----
weights_at() { # weights_at PACK: the offset of a byte in the middle of the WEIGHTS section
  "$PY" - "$1" <<'EOF'
import struct, sys
d = open(sys.argv[1], "rb").read()
count, table = struct.unpack_from("<I", d, 24)[0], struct.unpack_from("<Q", d, 40)[0]
for i in range(count):
    kind, flags, off, size = struct.unpack_from("<IIQQ", d, table + 48 * i)
    if kind == 19:
        print(off + size // 2)
EOF
}
flip() { # flip PACK OUT AT
  "$PY" -c 'import sys; d=bytearray(open(sys.argv[1],"rb").read()); d[int(sys.argv[3])]^=0x10; open(sys.argv[2],"wb").write(d)' "$@"
}
flip "$work/self.hkpack" "$work/flipped.hkpack" "$(weights_at "$work/self.hkpack")"
expect_fail "a flipped weight byte" 'section [0-9]+ \(WEIGHTS\): checksum mismatch' run "$work/flipped.hkpack"
"$HKC" keygen -o "$work/k" -q
"$HKC" build "$spec" --target host -o "$work/signed.hkpack" --weights "$work/model.safetensors" \
  --weights-map "$work/map.txt" --sign "$work/k" -q
"$HKC" sign "$work/self.hkpack" --key "$work/k" -o "$work/signed2.hkpack" -q
cmp -s "$work/signed.hkpack" "$work/signed2.hkpack" && ok "build --weights --sign equals build, then hkc sign" \
  || bad "build --sign differs from build + sign"
"$HKC" run "$work/signed.hkpack" --trust "$work/k.pub" --batch 3 --runs 1 --warmup 0 --save-outputs "$work/signed" \
  > /dev/null && same "$work/signed" "$work/self" && ok "signed self-contained pack runs with --trust" \
  || bad "signed run"
flip "$work/signed.hkpack" "$work/signed_flipped.hkpack" "$(weights_at "$work/signed.hkpack")"
expect_fail "a flipped weight byte, signed" 'WEIGHTS\): checksum mismatch' \
  "$HKC" run "$work/signed_flipped.hkpack" --trust "$work/k.pub" --batch 3 --runs 1

# ---- hkc merge keeps stored weights when every part has the same (sm_90 when nvrtc is here) ----
if "$HKC" targets --no-probe | grep -q "^NVIDIA (sm):   unavailable"; then
  echo "SKIPPED (merge with sm_90): nvrtc unavailable"
else
  "$PY" -c 'import numpy as np, struct, json, sys
t = {"row": np.linspace(-1, 1, 1001, dtype="<f4") * float(sys.argv[2]), "one": np.array([0.5], "<f4")}
h, at, blob = {}, 0, b""
for n, a in t.items():
    h[n] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + a.nbytes]}; at += a.nbytes; blob += a.tobytes()
j = json.dumps(h).encode(); open(sys.argv[1], "wb").write(struct.pack("<Q", len(j)) + j + blob)' "$work/ew.safetensors" 1
  ew="$HK_SOURCE_DIR/tests/specs/op_elementwise.yaml"
  for t in host sm_90 host,sm_90; do
    HKC_PTX=none "$HKC" build "$ew" --target $t -o "$work/ew-$t.hkpack" --weights "$work/ew.safetensors" -q
  done
  HKC_PTX=none "$HKC" build "$ew" --target sm_90 -o "$work/ew-bare.hkpack" -q
  "$PY" - "$work" <<'EOF2'
import sys
w = sys.argv[1]
d = bytearray(open(w + "/ew.safetensors", "rb").read())
d[-9] ^= 0x01  # a bit of row's last element (one is the last 4 bytes)
open(w + "/ew2.safetensors", "wb").write(d)
EOF2
  HKC_PTX=none "$HKC" build "$ew" --target sm_90 -o "$work/ew-other.hkpack" --weights "$work/ew2.safetensors" -q
  "$HKC" merge "$work/ew-host.hkpack" "$work/ew-sm_90.hkpack" -o "$work/ew-merged.hkpack" -q
  "$PY" "$HK_SOURCE_DIR/tests/integration/lib/pack_same.py" "$work/ew-merged.hkpack" "$work/ew-host,sm_90.hkpack" &&
    ok "merge of parts with weights == one build (but for the signature and the merge's provenance lines)" \
    || bad "merge with weights differs from one build"
  expect_fail "merge of a part without the weights" 'cannot merge' \
    "$HKC" merge "$work/ew-host.hkpack" "$work/ew-bare.hkpack" -o "$work/ew-bad.hkpack"
  expect_fail "merge of parts with other weights" 'different stored weights' \
    "$HKC" merge "$work/ew-host.hkpack" "$work/ew-other.hkpack" -o "$work/ew-bad.hkpack"
  [ ! -e "$work/ew-bad.hkpack" ] || bad "a refused merge wrote its output"
fi

# ---- params made of parts (spec `parts:`): hkc build --weights assembles them from a
# checkpoint holding only the parts, as libhkrt's binding does (the same output bytes) ----
cat > "$work/parts.yaml" <<'EOF'
hkc: 1
name: parts_gemm
dtype: bf16
batch_sizes: [1, 3]
inputs: {x: [batch, 7, 45]}
params:
  w: {shape: [77, 45], parts: [p.q, p.k, p.v]}
  b: {shape: [77], parts: [p.qb, p.kb]}
graph:
  - {name: g, op: gemm, in: [x, w], trans_b: true, bias: b, out: y}
outputs: [y]
EOF
"$PY" - "$work" <<'EOF'
import json, struct, sys
import numpy as np
work = sys.argv[1]
rng = np.random.default_rng(5)
def st(path, tensors):
    h, at, blob = {}, 0, b""
    for n, a in tensors.items():
        raw = (a.astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()  # bf16 by truncation
        h[n] = {"dtype": "BF16", "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}; at += len(raw); blob += raw
    j = json.dumps(h).encode()
    open(path, "wb").write(struct.pack("<Q", len(j)) + j + blob)
t = {"p.q": rng.uniform(-1, 1, (30, 45)), "p.k": rng.uniform(-1, 1, (40, 45)), "p.v": rng.uniform(-1, 1, (7, 45)),
     "p.qb": rng.uniform(-1, 1, (70,)), "p.kb": rng.uniform(-1, 1, (7,))}
st(work + "/parts.safetensors", t)
bad = dict(t); bad["p.v"] = rng.uniform(-1, 1, (8, 45))
st(work + "/parts_rows.safetensors", bad)
# the same parts as F32 (their bf16 values: exact) and F16 (bf16 values with 8 significant bits:
# exact in f16 too, within its range): converted, they are the BF16 checkpoint's bytes
def trunc(a):
    return ((a.astype(np.float32).view(np.uint32) >> 16) << 16).view(np.float32)
h, at, blob = {}, 0, b""
for i, (n, a) in enumerate(t.items()):
    v = trunc(a)
    raw = v.astype("<f2").tobytes() if i % 2 else v.astype("<f4").tobytes()
    h[n] = {"dtype": "F16" if i % 2 else "F32", "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
    at += len(raw); blob += raw
j = json.dumps(h).encode()
open(work + "/parts_mixed.safetensors", "wb").write(struct.pack("<Q", len(j)) + j + blob)
EOF
"$HKC" build "$work/parts.yaml" --target host -o "$work/parts_plain.hkpack" -q
"$HKC" build "$work/parts.yaml" --target host -o "$work/parts_self.hkpack" -q --weights "$work/parts.safetensors"
run "$work/parts_self.hkpack" --save-outputs "$work/ps" > /dev/null \
  && run "$work/parts_plain.hkpack" --weights "$work/parts.safetensors" --save-outputs "$work/pp" > /dev/null \
  && cmp -s "$work/ps/y.npy" "$work/pp/y.npy" \
  && ok "parts: the stored param assembled from its parts gives the bytes of binding the parts at run time" \
  || bad "parts: build --weights with a parts param"
"$HKC" build "$work/parts.yaml" --target host -o "$work/parts_mixed.hkpack" -q --weights "$work/parts_mixed.safetensors" \
  && cmp -s "$work/parts_mixed.hkpack" "$work/parts_self.hkpack" \
  && ok "parts of F32 and F16: converted, the pack of the BF16 parts" || bad "parts of F32 and F16"
rm -f "$work/no.hkpack"
expect_fail "parts whose rows do not add up" 'param w: its 3 parts in .*parts_rows.safetensors have 78 rows together, the param has 77' \
  "$HKC" build "$work/parts.yaml" --target host -o "$work/no.hkpack" -q --weights "$work/parts_rows.safetensors"
[ ! -e "$work/no.hkpack" ] || bad "parts rows: a pack was written"

# ---- build-time refusals: nothing written ----
refuse() { # refuse NAME REGEX ARGS...: hkc build fails naming the problem, and writes no pack
  local name=$1 want=$2; shift 2
  rm -f "$work/no.hkpack"
  expect_fail "$name" "$want" "$HKC" build "$spec" --target host -o "$work/no.hkpack" -q "$@"
  [ ! -e "$work/no.hkpack" ] || bad "$name: a pack was written"
}
refuse "missing params" 'missing.safetensors lacks 2 param\(s\) of spec op_gemm: b, wv' \
  --weights "$work/missing.safetensors" --weights-map "$work/map.txt"
refuse "without the map" 'lacks 2 param\(s\) of spec op_gemm: w, wt' --weights "$work/model.safetensors"
refuse "wrong shape" 'param w: the spec says bf16 \[45,77\], .*bad_shape.safetensors.s tensor "model.w" is BF16 \[77,45\]' \
  --weights "$work/bad_shape.safetensors" --weights-map "$work/map.txt"
refuse "wrong dtype" 'param b: the spec says bf16 \[77\], .* is I32 \[77\]' \
  --weights "$work/bad_dtype.safetensors" --weights-map "$work/map.txt"
refuse "a value beyond bf16's range" \
  'param wt: tensor "model.wt" of .*overflow.safetensors \(F32\) holds -3\.[0-9]+e\+38 at element 100, beyond the largest finite bf16' \
  --weights "$work/overflow.safetensors" --weights-map "$work/map.txt"
refuse "a map entry naming an input" 'x is not a param of spec op_gemm' \
  --weights "$work/model.safetensors" --weights-map "$work/input_map.txt"
"$PY" -c 'import numpy as np, sys; np.savez(sys.argv[1], w=np.zeros((45, 77), np.float32))' "$work/w.npz"
refuse "an .npz" 'an .npz archive; hkc build stores safetensors checkpoints only' --weights "$work/w.npz"
set +e; msg=$("$HKC" build "$spec" -o "$work/no.hkpack" --weights-map "$work/map.txt" 2>&1); rc=$?; set -e
[ $rc -eq 2 ] && grep -q "needs --weights" <<<"$msg" && ok "--weights-map alone: usage error" || bad "--weights-map alone: $rc $msg"

# 8-bit weights stored in the pack (int8, fp8_e4m3; scales from F32 and BF16, converted): the same
# outputs, bit for bit, as the plain pack bound to the checkpoint at run time.
qspec=$HK_SOURCE_DIR/tests/specs/op_gemm_quant.yaml
"$PY" - "$work/q.safetensors" <<'EOF'
import os, sys
import numpy as np
sys.path.insert(0, os.environ["HK_SOURCE_DIR"] + "/tests/integration")
from safetensors_io import write
rng = np.random.default_rng(1)
k, n = 80, 72
write(sys.argv[1], {
    "w_col": ("I8", rng.integers(-127, 128, (k, n)).astype(np.int8)),
    "s_col": ("F32", (rng.uniform(0.5, 1.5, (1, n)) / 127 / 9).astype(np.float32)),
    "w_row": ("F8_E4M3", rng.integers(0, 0x7e, (n, k)).astype(np.uint8)),
    "s_row": ("BF16", np.full((n, 1), 0x3a80, np.uint16)),  # 2^-10 in bf16 bits
    "w_blk": ("F8_E4M3", rng.integers(0, 0x7e, (k, n)).astype(np.uint8)), "s_blk": ("F32", np.full((3, 3), 1e-3, np.float32)),
    "w_one": ("I8", rng.integers(-127, 128, (n, n)).astype(np.int8)), "s_one": ("F32", np.array([1e-3], np.float32)),
    "b": ("F32", rng.uniform(-1, 1, n).astype(np.float32))})
EOF
"$HKC" build "$qspec" --target host -o "$work/q_self.hkpack" --weights "$work/q.safetensors" -q
"$HKC" build "$qspec" --target host -o "$work/q_plain.hkpack" -q
for q in self plain; do
  more=(); [ $q = plain ] && more=(--weights "$work/q.safetensors")
  "$HKC" run "$work/q_$q.hkpack" --batch 3 --runs 1 --warmup 0 "${more[@]}" --save-outputs "$work/q_$q" > "$work/q_$q.txt" 2>&1 ||
    { bad "hkc run of the 8-bit $q pack"; cat "$work/q_$q.txt"; exit 1; }
done
same=1
for o in y_blk y_one y_again; do cmp -s "$work/q_self/$o.npy" "$work/q_plain/$o.npy" || same=0; done
"$HKC" inspect "$work/q_self.hkpack" > "$work/q_self.txt" # (no pipe into grep -q: SIGPIPE under pipefail)
grep -q "weights: 9 param(s), .* stored" "$work/q_self.txt" && [ $same = 1 ] \
  && ok "8-bit weights stored in the pack: the outputs of binding them at run time, bit for bit" || bad "8-bit weights stored"

exit $fail
