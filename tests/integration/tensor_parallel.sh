#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tensor parallelism on the host target (docs/SPEC.md, "Tensor parallelism"): tiny generation
# configs of Llama (4 heads, 2 kv heads: at 4 ranks each kv head is shared by two ranks; tied
# embeddings: the LM head slices a copy of the table), Qwen2 (q/k/v biases) and GPT-2 (Conv1D
# weights [in, out], biases on the row-parallel gemms: added after the all_reduce) are imported
# with --tensor-parallel, built over 1 (collectives of one rank: copies), 2 and 4 ranks, and
# `hkc generate` (one thread per rank, one host group) must give the same greedy ids as the whole
# pack and as gen_reference.py's float64 NumPy model, from the same unsplit checkpoint (each rank
# binds its slices), and `hkc run` of one step the whole pack's logits. The pack's PARALLEL
# section and collectives are checked with inspect; a session without a communicator (the
# example app), a split that does not divide and stored weights are refused with messages that
# say why. Skips (77) without NumPy.
set -euo pipefail
: "${HK_SOURCE_DIR:?}"
source "$HK_SOURCE_DIR/tests/integration/lib/generate.sh" # PY, work, ref, cfgs, fail (or exit 77)
N=6

"$PY" - "$work" <<'EOF'
import sys
import numpy as np
rng = np.random.default_rng(5)
for n in (3, 11, 29):
    np.save("%s/p%d.npy" % (sys.argv[1], n), rng.integers(0, 200, size=n).astype(np.int32))
EOF
ids=(--ids "$work/p3.npy" --ids "$work/p11.npy" --ids "$work/p29.npy")

# ids JSON: the outputs of a generate --json (or reference) file, one line
outputs() { "$PY" -c "import json,sys; t=open(sys.argv[1]).read(); print(json.loads(t[t.index('{'):])['outputs'])" "$1"; }

for mt in llama:1 llama:2 llama:4 qwen2:2 gpt2:2; do
  m=${mt%%:*} tp=${mt#*:}
  imp=("$HKC" import hf "$cfgs/$m.json" --generate --max-seq 64 --slots 4 --token-buckets 1,4,16 --dtype f32
       --targets host --weights-map-out "$work/$m.map" -q)
  if [ ! -f "$work/$m.hkpack" ]; then
    "${imp[@]}" -o "$work/$m.yaml"
    "$HKC" build "$work/$m.yaml" -o "$work/$m.hkpack" --target host -q
    "$PY" "$ref" weights "$cfgs/$m.json" "$work/$m.safetensors" > /dev/null
    "$PY" "$ref" greedy "$cfgs/$m.json" "$work/$m.safetensors" "${ids[@]}" -n $N --json > "$work/$m.ref.json"
    "$HKC" generate "$work/$m.hkpack" --weights "$work/$m.safetensors" --weights-map "$work/$m.map" "${ids[@]}" -n $N \
      --json --allow-unsigned-native > "$work/$m.whole.json"
  fi
  "${imp[@]}" -o "$work/$m.tp.yaml" --tensor-parallel "$tp"
  grep -Fq "shard: column, out: qkv}" "$work/$m.tp.yaml" && grep -Fq "shard: row, out: a}" "$work/$m.tp.yaml" &&
    grep -Fqx "parallel: {tensor: $tp}" "$work/$m.tp.yaml" || fail "$m.tp.yaml: $(cat "$work/$m.tp.yaml")"
  "$HKC" build "$work/$m.tp.yaml" -o "$work/$m.tp$tp.hkpack" --target host -q
  "$HKC" inspect "$work/$m.tp$tp.hkpack" > "$work/$m.tp$tp.inspect.txt"
  grep -Eq "hk_all_reduce_f32 +op=all_reduce" "$work/$m.tp$tp.inspect.txt" &&
    grep -Eq "hk_all_gather_f32 +op=all_gather" "$work/$m.tp$tp.inspect.txt" &&
    grep -Eq "tensor parallel: $tp ranks" "$work/$m.tp$tp.inspect.txt" ||
    fail "inspect $m over $tp ranks: $(cat "$work/$m.tp$tp.inspect.txt")"
  "$HKC" generate "$work/$m.tp$tp.hkpack" --weights "$work/$m.safetensors" --weights-map "$work/$m.map" "${ids[@]}" \
    -n $N --json --allow-unsigned-native > "$work/$m.tp$tp.json" 2> "$work/$m.tp$tp.err" ||
    fail "generate $m over $tp ranks: $(cat "$work/$m.tp$tp.err")"
  got=$(outputs "$work/$m.tp$tp.json") whole=$(outputs "$work/$m.whole.json") want=$(outputs "$work/$m.ref.json")
  [ "$whole" = "$want" ] || fail "$m whole pack: $whole, reference $want"
  [ "$got" = "$want" ] || fail "$m over $tp ranks: $got, whole pack and reference $want"
  echo "ok   $m over $tp ranks: the whole pack's and the reference's ids: $got"
done

# 8-bit weights split too (the int8 / fp8_e4m3 params and their per-row scales sliced with their
# gemm's B): the quantized checkpoint over 2 ranks gives the whole quantized pack's ids
for mq in llama:int8 qwen2:fp8_e4m3; do
  m=${mq%%:*} q=${mq#*:}
  "$HKC" import hf "$cfgs/$m.json" --generate --max-seq 64 --slots 4 --token-buckets 1,4,16 --dtype f32 --targets host \
    --quantize "$q" --tensor-parallel 2 -o "$work/${m}_q.yaml" --weights-map-out "$work/${m}_q.map" -q
  "$HKC" quantize "$work/$m.safetensors" -o "$work/${m}_q.safetensors" --dtype "$q" -q
  grep -v '^parallel:' "$work/${m}_q.yaml" > "$work/${m}_q1.yaml"
  for p in "${m}_q1" "${m}_q"; do
    "$HKC" build "$work/$p.yaml" -o "$work/$p.hkpack" --target host -q
    "$HKC" generate "$work/$p.hkpack" --weights "$work/${m}_q.safetensors" --weights-map "$work/${m}_q.map" "${ids[@]}" \
      -n $N --json --allow-unsigned-native > "$work/$p.json" || fail "generate $p"
  done
  got=$(outputs "$work/${m}_q.json") want=$(outputs "$work/${m}_q1.json")
  [ "$got" = "$want" ] && [ "$want" != "[]" ] || fail "$m $q over 2 ranks: $got, whole $want"
  echo "ok   $m $q over 2 ranks: the whole quantized pack's ids"
done

# a checkpoint split ahead of time, one file per rank (--weights 'FILE-{rank}.safetensors'): each
# param's slice under the name it binds by (the name map's, else its own), cut by the pack's own
# slice records (hkc inspect --json); the same ids as from the whole checkpoint
"$HKC" inspect --json "$work/llama.tp2.hkpack" > "$work/llama.tp2.json"
"$PY" - "$work" <<'EOF2' || fail "writing the pre-split checkpoints"
import json, os, sys
import numpy as np
sys.path.insert(0, os.environ["HK_SOURCE_DIR"] + "/tests/integration")
import safetensors_io
w = sys.argv[1]
pack = json.load(open(w + "/llama.tp2.json"))
ranks = pack["tensor_ranks"]
names = dict(l.split() for l in open(w + "/llama.map") if l.strip() and not l.startswith("#"))
whole = {k: v[1] for k, v in safetensors_io.read(w + "/llama.safetensors").items()}
params = {t["name"]: t for t in pack["tensors"] if t["role"] == "param"}
def whole_of(t):  # the whole tensor a param comes from: its checkpoint name, or its parts
    if t["name"] in names:
        return whole[names[t["name"]]]
    if "parts" in t:
        return np.concatenate([whole[p] for p in t["parts"]], axis=0)
    return whole[t["name"]]
for r in range(ranks):
    out = {}
    for name, t in params.items():
        sl = t.get("slice")
        src = params[sl["source"]] if sl else t
        a = whole_of(src)
        if sl:
            pieces, at = [], 0
            for size, parts in zip(sl["segments"], sl["parts"]):
                piece = size // parts
                k = r * parts // ranks
                pieces.append(np.take(a, range(at + k * piece, at + (k + 1) * piece), axis=sl["axis"]))
                at += size
            a = np.concatenate(pieces, axis=sl["axis"])
        assert list(a.shape) == t["shape"], (name, a.shape, t["shape"])
        out[names.get(name, name)] = ("F32", a.astype("<f4"))
    safetensors_io.write("%s/llama-%d.safetensors" % (w, r), out)
EOF2
"$HKC" generate "$work/llama.tp2.hkpack" --weights "$work/llama-{rank}.safetensors" --weights-map "$work/llama.map" \
  "${ids[@]}" -n $N --json --allow-unsigned-native > "$work/presplit.json" || fail "generate from pre-split checkpoints"
[ "$(outputs "$work/presplit.json")" = "$(outputs "$work/llama.whole.json")" ] ||
  fail "pre-split: $(outputs "$work/presplit.json"), whole $(outputs "$work/llama.whole.json")"
echo "ok   llama over 2 ranks from a checkpoint split ahead of time: the whole pack's ids"

# a rank that fails ends every rank: rank 1's file is missing, rank 0 must not wait for it (the
# group is aborted), and the command fails naming rank 1
cp "$work/llama-0.safetensors" "$work/half-0.safetensors"
set +e
out=$(timeout 60 "$HKC" generate "$work/llama.tp2.hkpack" --weights "$work/half-{rank}.safetensors" \
  --weights-map "$work/llama.map" "${ids[@]}" -n $N --allow-unsigned-native 2>&1)
rc=$?
set -e
[ $rc -eq 1 ] && grep -Fq "rank 1 of 2" <<< "$out" || fail "a failing rank (rc $rc): $out"
echo "ok   a rank that fails: every rank ends, exit status 1"

# --random-params: every rank fills the whole params from the seed (a `_shard` copy under its
# source's name) and binds its slice, so the split pack generates what the whole pack does
for p in llama llama.tp4; do
  "$HKC" generate "$work/$p.hkpack" --random-params "${ids[@]}" -n $N --json --allow-unsigned-native > "$work/rp.$p.json" ||
    fail "generate --random-params $p"
done
[ "$(outputs "$work/rp.llama.json")" = "$(outputs "$work/rp.llama.tp4.json")" ] ||
  fail "--random-params: $(outputs "$work/rp.llama.tp4.json") over 4 ranks, $(outputs "$work/rp.llama.json") whole"
echo "ok   --random-params over 4 ranks: the whole pack's ids"

# --profile over 2 ranks: every rank profiles in step; rank 0's launches, the collectives' share
"$HKC" generate "$work/llama.tp2.hkpack" --random-params "${ids[@]}" -n 4 --profile --allow-unsigned-native \
  > "$work/prof.txt" 2>&1 || fail "generate --profile over 2 ranks: $(cat "$work/prof.txt")"
grep -Eq "hk_all_reduce_f32" "$work/prof.txt" && grep -Eq "^  collectives: 5 launch\(es\)" "$work/prof.txt" ||
  fail "generate --profile over 2 ranks: $(cat "$work/prof.txt")"
echo "ok   --profile over 2 ranks: $(grep '^  collectives:' "$work/prof.txt" | xargs)"

# the split is in the pack: each rank's q|k|v weight holds its heads (llama over 2 ranks: 2 of 4
# q heads and 1 of 2 kv heads of 16 -> 64 rows of 64), the caches half the kv width, the LM head
# a copy of the table cut by vocabulary
grep -Eq "^  qkv_w_0 +param +f32 +\[64, 64\]" "$work/llama.tp2.inspect.txt" &&
  grep -Eq "^  k_cache +state +f32 +\[2, 4, 64, 16\]" "$work/llama.tp2.inspect.txt" &&
  grep -Eq "^  embed_shard +param +f32 +\[100, 64\]" "$work/llama.tp2.inspect.txt" ||
  fail "llama over 2 ranks: $(cat "$work/llama.tp2.inspect.txt")"

# hkc run runs every rank too (threads, the same seeded inputs): one step of the 2-rank pack gives
# the whole pack's logits (sums in another order: within f32 rounding)
# (a step of 3 token rows: slot 0 at positions 1 and 2, slot 1 at position 1; slots 0 and 1 read
# their last row, slots 2 and 3 none)
"$PY" - "$work" <<'EOF2'
import sys
import numpy as np
w = sys.argv[1]
for name, v in (("ids", [17, 42, 99]), ("ctx", [1, 2, 1]), ("slot", [0, 0, 1]), ("rows", [1, 2, -1, -1])):
    np.save("%s/in_%s.npy" % (w, name), np.array(v, np.int32))
np.save("%s/in_sampling.npy" % w, np.zeros((4, 4), np.int32))
EOF2
for p in llama llama.tp2; do
  "$HKC" run "$work/$p.hkpack" --batch 3 --weights "$work/llama.safetensors" --weights-map "$work/llama.map" --runs 1 \
    --warmup 0 --save-outputs "$work/run.$p" --allow-unsigned-native -q \
    $(for i in ids ctx slot rows sampling; do echo --input "$i=$work/in_$i.npy"; done) || fail "hkc run $p"
done
"$PY" - "$work/run.llama/logits.npy" "$work/run.llama.tp2/logits.npy" <<'EOF2' || fail "hkc run: logits differ"
import sys
import numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
err = np.abs(a - b).max() / max(np.abs(a).max(), 1e-30)
print("ok   hkc run, llama over 2 ranks: logits %s, max |diff| / max |logit| %.2e" % (a.shape, err))
sys.exit(0 if a.shape == b.shape and np.abs(a[:2]).min() > 0 and not a[2:].any() and err < 1e-5 else 1)
EOF2
# an application that gives a tensor-parallel pack's session no communicator is refused, naming
# the ranks (the example app, when built)
if [ -n "${HK_EXAMPLE:-}" ]; then
  set +e
  out=$("$HK_EXAMPLE" "$work/llama.tp2.hkpack" 1 --allow-unsigned-native 2>&1)
  rc=$?
  set -e
  [ $rc -ne 0 ] && grep -Fq "one of 2 tensor-parallel ranks" <<< "$out" || fail "example app on a 2-rank pack (rc $rc): $out"
  echo "ok   a session without a communicator: refused"
fi
# 3 ranks do not divide 4 heads; GPU targets are refused (no NCCL collectives yet)
set +e
out=$("$HKC" build "$work/llama.tp.yaml" --tensor-parallel 3 -o "$work/x.hkpack" --target host -q 2>&1)
rc=$?
out2=$("$HKC" build "$work/llama.tp.yaml" -o "$work/y.hkpack" --target host --weights "$work/llama.safetensors" \
  --weights-map "$work/llama.map" -q 2>&1)
rc2=$?
set -e
[ $rc -ne 0 ] && grep -Fq "cannot be split over 3 ranks" <<< "$out" || fail "3 ranks (rc $rc): $out"
[ $rc2 -ne 0 ] && grep -Fq "each rank binds its own shard" <<< "$out2" || fail "--weights (rc $rc2): $out2"
[ ! -e "$work/x.hkpack" ] && [ ! -e "$work/y.hkpack" ] || fail "a refused build left a pack"
echo "ok   refusals: 3 ranks of 4 heads, stored weights"
