#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Text generation end to end (docs/GENERATE.md), with no network, torch or transformers: tiny
# configs in gen_configs/ -- Llama (grouped-query, rope scaling llama3, tied embeddings), Qwen2
# (q/k/v biases, tied embeddings), Mistral (a sliding window of 16 < max_seq, an untied
# lm_head) and GPT-2 (learned positions, tied) -- are imported with `hkc import hf --generate`
# (max_seq 64, 4 slots, f32), built for the host, given random weights under the checkpoint's
# names (gen_reference.py weights), and `hkc generate` greedy ids are compared token for token
# with gen_reference.py, a float64 NumPy model that recomputes the whole sequence at every step
# (no KV cache): prompts of 3, 11 and 29 tokens batched in one call, one of 52 that decodes to 63
# of the 64 positions, and (Llama) buckets smaller than the prompts, so that the prefill runs in
# chunks that read the cache the earlier ones wrote. gen_reference.py's emulation of the spec
# (its ops and the generator as GENERATE.md defines them, in NumPy) must give the same ids
# first: a difference there is the importer's, one only in hkc generate is the compiler's or
# the runtime's. Then: --stop; a prompt longer than max_seq fails with exit status 1 naming
# max_seq; a wrongly bound weight fails the comparison; what --generate cannot express is
# refused. Skips (77) without NumPy; the emulation is skipped, saying so, without PyYAML.
set -euo pipefail
: "${HK_SOURCE_DIR:?}"
source "$HK_SOURCE_DIR/tests/integration/lib/generate.sh" # PY, work, ref, cfgs, fail (or exit 77)
emulate=1
"$PY" -c "import yaml" > /dev/null 2>&1 || { emulate=0; echo "note: no PyYAML for $PY: the spec emulation is skipped"; }
N=12

# Prompts (ids < the configs' vocab of 200). With these and gen_reference.py's weights (seed 0)
# greedy's top two logits are at least 4e-3 apart at every step of the four models (logits of
# about 1; f32 errors near 1e-6), so the ids must be equal, not merely close.
"$PY" - "$work" <<'EOF'
import sys
import numpy as np
rng = np.random.default_rng(5)
for n in (3, 11, 29, 52, 70):
    np.save("%s/p%d.npy" % (sys.argv[1], n), rng.integers(0, 200, size=n).astype(np.int32))
EOF
batch=(--ids "$work/p3.npy" --ids "$work/p11.npy" --ids "$work/p29.npy")
long=(--ids "$work/p52.npy")

# same NAME HKC_JSON REF_JSON: hkc generate's ids equal the reference's, prompt for prompt;
# where they differ, the reference's margin at that step says whether it is a near tie.
same() {
  "$PY" - "$@" <<'EOF'
import json, sys
name, got_path, ref_path = sys.argv[1:4]
text = open(got_path).read()
try:
    got = json.loads(text)
except ValueError:  # tolerate lines before the object
    got = json.loads(text[text.index("{"):])
ref = json.load(open(ref_path))
bad = 0
if len(got["outputs"]) != len(ref["outputs"]):
    print("FAIL %s: %d outputs, reference %d" % (name, len(got["outputs"]), len(ref["outputs"])))
    sys.exit(1)
for i, (g, r) in enumerate(zip(got["outputs"], ref["outputs"])):
    if g == r:
        continue
    bad = 1
    k = next((j for j in range(min(len(g), len(r))) if g[j] != r[j]), min(len(g), len(r)))
    m = ref.get("margins", [[]] * (i + 1))[i]
    print("FAIL %s prompt %d: ids differ from step %d\n  got %s\n  ref %s%s" % (
        name, i, k, g, r, "\n  reference top-1/top-2 margin there: %.3g" % m[k] if k < len(m) else ""))
if bad:
    sys.exit(1)
print("ok   %s: %s (reference's smallest margin %.3g)" % (name, " | ".join(" ".join(map(str, o)) for o in got["outputs"]),
                                                          ref["min_margin"]))
EOF
}

# gen NAME PACK MAP WEIGHTS OUT IDS...: hkc generate, JSON to OUT; fails the test on an error.
gen() {
  local name=$1 pack=$2 map=$3 weights=$4 out=$5
  shift 5
  "$HKC" generate "$pack" --weights "$weights" --weights-map "$map" "$@" -n $N --json --allow-unsigned-native \
    > "$out" 2> "$out.err" || fail "hkc generate $name exited $?: $(cat "$out.err")"
}

for m in llama qwen2 mistral gpt2; do
  cfg=$cfgs/$m.json
  "$HKC" import hf "$cfg" --generate --max-seq 64 --slots 4 --token-buckets 1,4,16,64 --dtype f32 --targets host \
    -o "$work/$m.yaml" --weights-map-out "$work/$m.map" > "$work/$m.import.txt" 2>&1 ||
    fail "import $m: $(cat "$work/$m.import.txt")"
  grep -q "^wrote $work/$m.yaml (.*generation: 4 slots of 64 positions)" "$work/$m.import.txt" ||
    fail "import $m said: $(cat "$work/$m.import.txt")"
  y=$work/$m.yaml
  grep -Fqx "batch_sizes: [1, 4, 16, 64]" "$y" && grep -Fqx "  ids: {shape: [batch], dtype: i32}    # token id of each row" "$y" &&
    grep -Fq "  rows: {shape: [slots], dtype: i32}" "$y" && grep -q "^state:$" "$y" &&
    grep -Eq "^  k_cache: \[layers, slots, max_seq, (kv_heads|heads)\*head_dim\]$" "$y" &&
    grep -Fq "op: kv_append, in: [qkv" "$y" && grep -Fq 'layer: "{i}", ctx: ctx, slot: slot, out: q}' "$y" &&
    grep -Fq "op: kv_attention, in: [q]," "$y" && grep -Fq "in: [ctx_out, o_w]" "$y" &&
    grep -Fq "{name: take_last, op: take_rows, in: [y, rows], out: last}" "$y" &&
    grep -Fq "op: gemm, in: [last_n, " "$y" && grep -Fq "{name: next_id, op: sample, in: [logits, sampling], out: next}" "$y" &&
    grep -Fqx "outputs: [next, logits]" "$y" || fail "$m.yaml: $(cat "$y")"
  "$PY" "$ref" weights "$cfg" "$work/$m.safetensors" > /dev/null
  "$PY" "$ref" greedy "$cfg" "$work/$m.safetensors" "${batch[@]}" -n $N --json > "$work/$m.ref.json"
  "$PY" "$ref" greedy "$cfg" "$work/$m.safetensors" "${long[@]}" -n $N --json > "$work/$m.ref52.json"
  if [ $emulate = 1 ]; then
    "$PY" "$ref" emulate "$y" "$work/$m.map" "$work/$m.safetensors" "${batch[@]}" -n $N --json > "$work/$m.emu.json"
    same "$m spec emulated (3, 11, 29 tokens)" "$work/$m.emu.json" "$work/$m.ref.json"
  fi
  "$HKC" build "$y" -o "$work/$m.hkpack" --target host -q
  gen "$m" "$work/$m.hkpack" "$work/$m.map" "$work/$m.safetensors" "$work/$m.out.json" "${batch[@]}"
  same "$m hkc generate (3, 11, 29 tokens, batched)" "$work/$m.out.json" "$work/$m.ref.json"
  gen "$m" "$work/$m.hkpack" "$work/$m.map" "$work/$m.safetensors" "$work/$m.out52.json" "${long[@]}"
  same "$m hkc generate (52 tokens, to position 63 of 64)" "$work/$m.out52.json" "$work/$m.ref52.json"
done

# 8-bit weights (hkc import hf --quantize, hkc quantize): the greedy ids of the quantized pack on
# the quantized checkpoint equal the reference's on that checkpoint's dequantized weights
# (q * scale, written back as F32 under the same names), through prefill, decode and the caches.
for mq in llama:int8 qwen2:fp8_e4m3; do
  m=${mq%%:*} q=${mq#*:}
  "$HKC" import hf "$cfgs/$m.json" --generate --max-seq 64 --slots 4 --token-buckets 1,4,16,64 --dtype f32 --targets host \
    --quantize "$q" -o "$work/${m}_q.yaml" --weights-map-out "$work/${m}_q.map" -q
  "$HKC" quantize "$work/$m.safetensors" -o "$work/${m}_q.safetensors" --dtype "$q" -q
  "$PY" - "$work/${m}_q.safetensors" "$work/${m}_deq.safetensors" <<'EOF'
import os, sys
import numpy as np
sys.path.insert(0, os.environ["HK_SOURCE_DIR"] + "/tests/integration")
import safetensors_io
t = safetensors_io.read(sys.argv[1])
out = {k: v for k, (_, v, _) in t.items() if not k.endswith("_scale")}
scaled = [k for k in out if k + "_scale" in t]
assert scaled
for k in scaled:
    out[k] = out[k] * t[k + "_scale"][1]
safetensors_io.write(sys.argv[2], {k: ("F32", v.astype("<f4")) for k, v in out.items()})
EOF
  "$PY" "$ref" greedy "$cfgs/$m.json" "$work/${m}_deq.safetensors" "${batch[@]}" -n $N --json > "$work/${m}_q.ref.json"
  "$HKC" build "$work/${m}_q.yaml" -o "$work/${m}_q.hkpack" --target host -q
  gen "$m $q" "$work/${m}_q.hkpack" "$work/${m}_q.map" "$work/${m}_q.safetensors" "$work/${m}_q.out.json" "${batch[@]}"
  same "$m --quantize $q hkc generate (3, 11, 29 tokens, batched)" "$work/${m}_q.out.json" "$work/${m}_q.ref.json"
done

# FP8 KV caches (--kv-cache fp8_e4m3): each k and v element is rounded to e4m3 as it is stored;
# hkc generate's ids equal the spec's emulation, which rounds the same way (Llama: grouped-query;
# prompts batched, and the 52-token one whose prefill runs in chunks that read the FP8 caches).
if [ $emulate = 1 ]; then
  m=llama
  "$HKC" import hf "$cfgs/$m.json" --generate --max-seq 64 --slots 4 --token-buckets 1,4,16,64 --dtype f32 --targets host \
    --kv-cache fp8_e4m3 -o "$work/${m}_kv8.yaml" --weights-map-out "$work/${m}_kv8.map" -q
  grep -Fq "  k_cache: {shape: [layers, slots, max_seq, kv_heads*head_dim], dtype: fp8_e4m3}" "$work/${m}_kv8.yaml" ||
    fail "--kv-cache fp8_e4m3: $(cat "$work/${m}_kv8.yaml")"
  "$HKC" build "$work/${m}_kv8.yaml" -o "$work/${m}_kv8.hkpack" --target host -q
  "$HKC" inspect "$work/${m}_kv8.hkpack" > "$work/${m}_kv8.inspect"
  grep -Eq "k_cache +state +fp8_e4m3 \[2, 4, 64, " "$work/${m}_kv8.inspect" && grep -q "hk_kv_attention_f32_e4m3" "$work/${m}_kv8.inspect" ||
    fail "--kv-cache fp8_e4m3 pack: $(cat "$work/${m}_kv8.inspect")"
  for set in batch long; do
    if [ $set = batch ]; then ids=("${batch[@]}"); else ids=("${long[@]}"); fi
    "$PY" "$ref" emulate "$work/${m}_kv8.yaml" "$work/${m}_kv8.map" "$work/$m.safetensors" "${ids[@]}" -n $N --json \
      > "$work/${m}_kv8.$set.emu.json"
    gen "$m kv8" "$work/${m}_kv8.hkpack" "$work/${m}_kv8.map" "$work/$m.safetensors" "$work/${m}_kv8.$set.json" "${ids[@]}"
    same "$m --kv-cache fp8_e4m3 hkc generate ($set)" "$work/${m}_kv8.$set.json" "$work/${m}_kv8.$set.emu.json"
  done
else
  echo "note: no PyYAML: the FP8 KV cache check (against the emulation) is skipped"
fi

# Model-specific spec pieces: llama3 scaling on the rope, Qwen2's q|k|v bias, Mistral's window
# and untied head, GPT-2's positions from ctx.
grep -Fq "ctx: ctx, scaling: llama3, factor: 8.0, low_freq_factor: 1.0, high_freq_factor: 4.0, original_max: 64, out: qkv_rot}" "$work/llama.yaml" &&
  grep -Fq "{name: lm_head, op: gemm, in: [last_n, embed], trans_b: true, out: logits}" "$work/llama.yaml" &&
  grep -Fq 'qkv_b: {shape: [(heads+2*kv_heads)*head_dim], parts: ["model.layers.{i}.self_attn.q_proj.bias",' "$work/qwen2.yaml" &&
  grep -Fq "slot: slot, window: 16, out: ctx_out}" "$work/mistral.yaml" &&
  grep -Eq "^lm_head_w +lm_head\.weight$" "$work/mistral.map" && ! grep -q "window" "$work/llama.yaml" &&
  grep -Fq "{name: emb, op: embedding, in: [ids, wte], pos: wpe, ctx: ctx, out: x}" "$work/gpt2.yaml" &&
  grep -Eq "^wpe +transformer\.wpe\.weight$" "$work/gpt2.map" && ! grep -q "lm_head_w" "$work/gpt2.map" ||
  fail "spec pieces: $(cat "$work"/llama.yaml "$work"/mistral.map "$work"/gpt2.yaml)"
grep -q "note: sliding_window 16 on every layer" "$work/mistral.import.txt" || fail "mistral: $(cat "$work/mistral.import.txt")"

# The defaults: buckets 1..512, max_seq the model's positions up to 2048, 8 slots; dynamic rope
# scaling within its original positions is the plain rope (a note says so).
"$HKC" import hf "$cfgs/llama.json" --generate -o "$work/def.yaml" -q
grep -Fqx "batch_sizes: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]" "$work/def.yaml" &&
  grep -Fq "slots: 8, max_seq: 512, layers: 2}" "$work/def.yaml" || fail "defaults: $(cat "$work/def.yaml")"
sed 's/"rope_type": "llama3"/"rope_type": "dynamic"/' "$cfgs/llama.json" > "$work/dyn.json"
"$HKC" import hf "$work/dyn.json" --generate --max-seq 64 -o "$work/dyn.yaml" > "$work/dyn.txt" 2>&1 ||
  fail "dynamic rope scaling at max_seq 64: $(cat "$work/dyn.txt")"
grep -q "note: rope scaling dynamic is the identity up to 64 positions" "$work/dyn.txt" && ! grep -q "scaling:" "$work/dyn.yaml" ||
  fail "dynamic rope scaling: $(cat "$work/dyn.txt" "$work/dyn.yaml")"

# Chunked prefill: with buckets of at most 8 tokens the 43 prompt tokens run in 6 steps, each
# reading what the earlier ones wrote, one sequence spanning several.
"$HKC" import hf "$cfgs/llama.json" --generate --max-seq 64 --slots 4 --token-buckets 1,2,8 --dtype f32 \
  -o "$work/chunk.yaml" --weights-map-out "$work/chunk.map" -q
if [ $emulate = 1 ]; then
  "$PY" "$ref" emulate "$work/chunk.yaml" "$work/chunk.map" "$work/llama.safetensors" "${batch[@]}" -n $N --json \
    > "$work/chunk.emu.json"
  same "llama spec emulated, buckets 1,2,8" "$work/chunk.emu.json" "$work/llama.ref.json"
fi
"$HKC" build "$work/chunk.yaml" -o "$work/chunk.hkpack" --target host -q
gen chunk "$work/chunk.hkpack" "$work/chunk.map" "$work/llama.safetensors" "$work/chunk.out.json" "${batch[@]}"
same "llama hkc generate, buckets 1,2,8 (chunked prefill)" "$work/chunk.out.json" "$work/llama.ref.json"
"$PY" -c "import json, sys; s = json.load(open(sys.argv[1]))['prefill_steps']; sys.exit(0 if s == 6 else 1)" \
  "$work/chunk.out.json" || fail "43 prompt tokens in buckets of 8: not 6 prefill steps: $(cat "$work/chunk.out.json")"

# Sampling on the device (the sample op; docs/GENERATE.md): a seed gives the same ids whatever
# the batch (prompt i draws with seed + i, and each draw's noise depends on its position only),
# top_k 1 is greedy, top_k 3 keeps every draw among the 3 largest logits of its step (the
# reference's logits of the sampled sequence), and temperature 0.9 leaves the greedy ids.
gen s1 "$work/llama.hkpack" "$work/llama.map" "$work/llama.safetensors" "$work/s1.json" "${batch[@]}" \
  --temperature 0.9 --top-k 3 --sample-seed 11
gen s2 "$work/llama.hkpack" "$work/llama.map" "$work/llama.safetensors" "$work/s2.json" "${batch[@]}" \
  --temperature 0.9 --top-k 3 --sample-seed 11
gen s3 "$work/llama.hkpack" "$work/llama.map" "$work/llama.safetensors" "$work/s3.json" --ids "$work/p11.npy" \
  --temperature 0.9 --top-k 3 --sample-seed 12
gen s4 "$work/llama.hkpack" "$work/llama.map" "$work/llama.safetensors" "$work/s4.json" "${batch[@]}" \
  --temperature 0.9 --top-k 1 --sample-seed 5
"$PY" - "$work" "$cfgs/llama.json" "$work/llama.safetensors" "$ref" <<'EOF' || fail "sampling"
import importlib.util, json, sys
import numpy as np
work, cfg_path, weights, ref_path = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("gen_reference", ref_path)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
def outs(name):
    text = open("%s/%s.json" % (work, name)).read()
    return json.loads(text[text.index("{"):])["outputs"]
s1, s2, s3, s4 = outs("s1"), outs("s2"), outs("s3"), outs("s4")
greedy = json.load(open(work + "/llama.ref.json"))["outputs"]
bad = []
if s1 != s2:
    bad.append("the same seed gave %s, then %s" % (s1, s2))
if s3[0] != s1[1]:  # prompt 1 of the batch draws with seed 11 + 1 = 12, as prompt 0 alone with 12
    bad.append("seed 12 alone %s, prompt 1 of the batch with seed 11 + 1 %s" % (s3[0], s1[1]))
if s4 != greedy:
    bad.append("top_k 1 %s, greedy %s" % (s4, greedy))
if s1 == greedy:
    bad.append("temperature 0.9 gave the greedy ids %s" % s1)
cfg, w = ref.load_config(cfg_path), ref.read_safetensors(weights)
prompts = [np.load("%s/p%d.npy" % (work, n)).tolist() for n in (3, 11, 29)]
for p, seq in zip(prompts, s1):
    for k, tok in enumerate(seq):
        row = ref.logits(cfg, w, p + seq[:k])[-1]
        top3 = np.argsort(-row, kind="stable")[:3]
        if tok not in top3:
            bad.append("prompt of %d, step %d: %d is not among the top 3 %s" % (len(p), k, tok, top3.tolist()))
for b in bad:
    print("FAIL " + b)
if not bad:
    print("ok   sampling: seed 11 %s; deterministic, per-prompt seeds, top_k 1 = greedy, top_k 3 respected" % s1)
sys.exit(1 if bad else 0)
EOF

# --stop ID: prompt 0's sequence ends at the first ID it produces, which it keeps (as Hugging
# Face's generate keeps its eos); the others at theirs, if any.
stop=$("$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))['outputs'][0][4])" "$work/qwen2.ref.json")
"$PY" "$ref" greedy "$cfgs/qwen2.json" "$work/qwen2.safetensors" "${batch[@]}" -n $N --stop "$stop" --json \
  > "$work/stop.ref.json"
gen stop "$work/qwen2.hkpack" "$work/qwen2.map" "$work/qwen2.safetensors" "$work/stop.out.json" "${batch[@]}" --stop "$stop"
"$PY" - "$work/stop.out.json" "$work/stop.ref.json" "$stop" <<'EOF' || fail "--stop $stop: $(cat "$work/stop.out.json")"
import json, sys
text = open(sys.argv[1]).read()
got = json.loads(text[text.index("{"):])["outputs"]
ref, stop = json.load(open(sys.argv[2]))["outputs"], int(sys.argv[3])
if got != ref:
    print("FAIL --stop %d: got %s, reference %s" % (stop, got, ref))
    sys.exit(1)
if len(ref[0]) >= 12 or ref[0][-1] != stop:
    print("FAIL --stop %d: the reference did not stop early: %s" % (stop, ref[0]))
    sys.exit(1)
print("ok   --stop %d: %s" % (stop, got))
EOF

# A prompt longer than max_seq: exit status 1, an error naming max_seq.
set +e
"$HKC" generate "$work/llama.hkpack" --weights "$work/llama.safetensors" --weights-map "$work/llama.map" \
  --ids "$work/p70.npy" -n 2 --json --allow-unsigned-native > "$work/long.txt" 2>&1
rc=$?
set -e
[ $rc = 1 ] && grep -q "max_seq" "$work/long.txt" || fail "a 70-token prompt at max_seq 64: exit $rc: $(cat "$work/long.txt")"
echo "ok   a prompt of 70 tokens at max_seq 64: $(grep -m1 max_seq "$work/long.txt")"

# Can fail: layer 0's and layer 1's o projections swapped in the map.
sed -E 's/^(o_w_0 +)(.*)layers\.0\./\1\2layers.@./; s/^(o_w_1 +)(.*)layers\.1\./\1\2layers.0./; s/layers\.@\./layers.1./' \
  "$work/llama.map" > "$work/swap.map"
grep -Eq "^o_w_0 +model\.layers\.1\.self_attn\.o_proj\.weight$" "$work/swap.map" || fail "swap.map: $(cat "$work/swap.map")"
gen swap "$work/llama.hkpack" "$work/swap.map" "$work/llama.safetensors" "$work/swap.out.json" "${batch[@]}"
if same "swapped" "$work/swap.out.json" "$work/llama.ref.json" > /dev/null; then
  fail "swapped o projections gave the reference's ids"
fi
echo "ok   a wrongly bound weight changes the ids"

# Refused: an encoder; a window on some layers only; rope scaling hkc has no form for; dynamic
# scaling past its original positions; --generate with --seq. Nothing is written.
refused() { # CONFIG-JSON EXTRA-ARGS WORDS...
  printf '%s\n' "$1" > "$work/bad.json"
  local extra=$2
  shift 2
  rm -f "$work/bad.yaml"
  # shellcheck disable=SC2086
  if "$HKC" import hf "$work/bad.json" --generate -o "$work/bad.yaml" $extra > "$work/bad.txt" 2>&1; then
    fail "accepted: $(cat "$work/bad.json")"
  fi
  for w in "$@"; do grep -q -- "$w" "$work/bad.txt" || fail "no '$w' in: $(cat "$work/bad.txt")"; done
  [ ! -e "$work/bad.yaml" ] || fail "a spec was written for a refused config"
}
refused '{"model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 48, "vocab_size": 50, "max_position_embeddings": 64}' \
  "" "needs a decoder"
refused "$(sed 's/"use_sliding_window": false/"use_sliding_window": true/; s/"max_window_layers": 2/"max_window_layers": 1/; s/"sliding_window": 64/"sliding_window": 8/' "$cfgs/qwen2.json")" \
  "" "sliding_window 8 on layer 1 but not on layer 0" "--max-seq 8 or less"
refused "$(sed 's/"rope_type": "llama3"/"rope_type": "yarn"/' "$cfgs/llama.json")" "" "rope type 'yarn' is not supported"
refused "$(sed 's/"rope_type": "llama3"/"rope_type": "dynamic"/' "$cfgs/llama.json")" "--max-seq 128" \
  "longer than 64 positions, which --max-seq 128 allows" "--max-seq 64 or less"
refused "$(cat "$cfgs/llama.json")" "--seq 8" "not with --generate"
refused "$(cat "$cfgs/gpt2.json")" "--max-seq 65" "--max-seq 65 is longer than the model's 64 positions"
echo "generate_hf: ok"
