#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `hkc import hf` end to end, with no network, torch or transformers: small BERT, GPT-2, Llama,
# Mistral and Qwen2 configs (2 layers, tiny sizes, written here) -> import -> build for the host -> random
# weights under the checkpoint's own names and layouts in a safetensors file -> hkc run
# --weights --weights-map -> compared with a NumPy float64 evaluation of the Hugging Face layer
# math (hf_layers_ref.py). A wrongly bound weight (two names swapped in the map) must fail the
# comparison; configs hkc cannot express are refused with the piece named.
set -euo pipefail
: "${HKC:?}" "${HK_SOURCE_DIR:?}"
PY=${HK_PYTHON:-/usr/bin/python3}
export HKC_PYTHON=$PY
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HKC_CACHE_DIR=${HKC_CACHE_DIR:-$work/cache}
ref=$HK_SOURCE_DIR/tests/integration/hf_layers_ref.py
fail() { echo "FAIL: $*"; exit 1; }

cat > "$work/bert.json" <<'JSON'
{"architectures": ["BertForMaskedLM"], "model_type": "bert", "hidden_size": 32, "num_hidden_layers": 2,
 "num_attention_heads": 4, "intermediate_size": 48, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
 "max_position_embeddings": 64, "position_embedding_type": "absolute", "vocab_size": 50, "type_vocab_size": 2,
 "torch_dtype": "float32"}
JSON
cat > "$work/gpt2.json" <<'JSON'
{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4,
 "n_inner": null, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "n_positions": 64,
 "n_ctx": 64, "vocab_size": 50, "scale_attn_weights": true}
JSON
cat > "$work/llama.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 40, "hidden_act": "silu",
 "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "rope_scaling": null, "max_position_embeddings": 64,
 "vocab_size": 50, "attention_bias": false, "torch_dtype": "float32"}
JSON
# Llama with biases on every projection (attention_bias: q, k, v, o; mlp_bias), one kv head
# (multi-query) and a head_dim that is not hidden / heads.
sed 's/"num_key_value_heads": 2/"num_key_value_heads": 1, "head_dim": 16/; s/"attention_bias": false/"attention_bias": true, "mlp_bias": true/' \
  "$work/llama.json" > "$work/llama_bias.json"
grep -q '"mlp_bias": true' "$work/llama_bias.json" || fail "llama_bias.json: $(cat "$work/llama_bias.json")"
# Mistral: Llama's layer without biases, with a sliding window as long as --seq (8: the same as
# causal; the reference applies it); Qwen2: biases on q, k and v but not o, a short window that
# use_sliding_window false leaves unused, tied embeddings (the LM head is not imported anyway).
cat > "$work/mistral.json" <<'JSON'
{"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 32, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": null, "intermediate_size": 40,
 "hidden_act": "silu", "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "sliding_window": 8,
 "max_position_embeddings": 64, "vocab_size": 50, "tie_word_embeddings": false, "torch_dtype": "float32"}
JSON
cat > "$work/qwen2.json" <<'JSON'
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 32, "num_hidden_layers": 2,
 "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 40, "hidden_act": "silu",
 "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "use_sliding_window": false, "sliding_window": 4,
 "max_window_layers": 1, "max_position_embeddings": 64, "vocab_size": 50, "tie_word_embeddings": true,
 "torch_dtype": "float32"}
JSON

for m in bert gpt2 llama llama_bias mistral qwen2; do
  "$HKC" import hf "$work/$m.json" -o "$work/$m.yaml" --weights-map-out "$work/$m.map" --seq 8 --batch-sizes 1,2 \
    > "$work/$m.import.txt" 2>&1 || fail "import $m: $(cat "$work/$m.import.txt")"
  grep -q "^wrote $work/$m.yaml" "$work/$m.import.txt" || fail "import $m said: $(cat "$work/$m.import.txt")"
  grep -q "note: .*embedding" "$work/$m.import.txt" || fail "import $m: no note on the embeddings"
  grep -q "^  - repeat:" "$work/$m.yaml" || fail "$m.yaml has no repeat"
  "$HKC" build "$work/$m.yaml" -o "$work/$m.hkpack" --target host -q
  "$PY" "$ref" "$HKC" "$work/$m.hkpack" "$work/$m.json" "$work/$m.map" "$work/$m-run"
done
# --padding-mask: an i32 input lengths on every attention node; random lengths (the last entry
# padded to seq/2) against the reference with the same key mask (a pack that ignored lengths
# would miss it: the padded entries' keys change every row's softmax).
for m in bert gpt2 llama mistral qwen2; do
  "$HKC" import hf "$work/$m.json" -o "$work/${m}_pad.yaml" --weights-map-out "$work/${m}_pad.map" --seq 8 \
    --batch-sizes 1,3 --padding-mask -q
  grep -q "^  lengths: {shape: \[batch\], dtype: i32}" "$work/${m}_pad.yaml" || fail "$m --padding-mask: no lengths input"
  "$HKC" build "$work/${m}_pad.yaml" -o "$work/${m}_pad.hkpack" --target host -q
  "$PY" "$ref" "$HKC" "$work/${m}_pad.hkpack" "$work/$m.json" "$work/${m}_pad.map" "$work/$m-pad" --batch 3 --padding
done

# --embeddings: token ids in (i32; a few out of range, clamped), the input embeddings as embedding
# ops (BERT: word + position + token type, LayerNorm; GPT-2: wte + wpe; Llama: embed_tokens);
# with --padding-mask too.
for m in bert gpt2 llama; do
  "$HKC" import hf "$work/$m.json" -o "$work/${m}_emb.yaml" --weights-map-out "$work/${m}_emb.map" --seq 8 \
    --batch-sizes 1,3 --embeddings --padding-mask -q
  grep -q "op: embedding" "$work/${m}_emb.yaml" && grep -q "^  ids: {shape: \[batch, seq\], dtype: i32}" "$work/${m}_emb.yaml" \
    || fail "$m --embeddings: no embedding op / ids input"
  "$HKC" build "$work/${m}_emb.yaml" -o "$work/${m}_emb.hkpack" --target host -q
  "$PY" "$ref" "$HKC" "$work/${m}_emb.hkpack" "$work/$m.json" "$work/${m}_emb.map" "$work/$m-emb" --batch 3 \
    --embeddings --padding
done

# The map names the checkpoint's tensors: 10 per BERT layer (query, key and value are the parts
# of one q|k|v weight and bias, named in the spec), 12 per GPT-2 layer (+ ln_f), 6 per Llama
# layer (+ norm; q_proj, k_proj and v_proj are parts too), 10 with Llama's biases; Mistral's and
# Qwen2's as Llama's (Qwen2's q, k and v biases are parts).
[ "$(grep -vc '^#' "$work/bert.map")" = 20 ] && [ "$(grep -vc '^#' "$work/gpt2.map")" = 26 ] &&
  [ "$(grep -vc '^#' "$work/llama.map")" = 13 ] && [ "$(grep -vc '^#' "$work/llama_bias.map")" = 21 ] &&
  [ "$(grep -vc '^#' "$work/mistral.map")" = 13 ] && [ "$(grep -vc '^#' "$work/qwen2.map")" = 13 ] ||
  fail "name map sizes: $(wc -l "$work"/*.map)"
grep -Eq '^o_w_1 +bert\.encoder\.layer\.1\.attention\.output\.dense\.weight$' "$work/bert.map" || fail "bert.map"
grep -Fq 'qkv_w: {shape: [3*hidden, hidden], parts: ["bert.encoder.layer.{i}.attention.self.query.weight", "bert.encoder.layer.{i}.attention.self.key.weight", "bert.encoder.layer.{i}.attention.self.value.weight"]}' "$work/bert.yaml" &&
  grep -Fq '{name: attn, op: attention, in: [qkv],' "$work/bert.yaml" || fail "bert.yaml: no q|k|v parts: $(cat "$work/bert.yaml")"
grep -Eq '^qkv_w_0 +transformer\.h\.0\.attn\.c_attn\.weight$' "$work/gpt2.map" || fail "gpt2.map"
grep -Eq '^o_w_1 +model\.layers\.1\.self_attn\.o_proj\.weight$' "$work/llama.map" || fail "llama.map"
# Llama: one q|k|v gemm over q_proj | k_proj | v_proj, one rope on the packed q|k|v, packed GQA attention.
grep -Fq 'qkv_w: {shape: [(heads+2*kv_heads)*head_dim, hidden], parts: ["model.layers.{i}.self_attn.q_proj.weight", "model.layers.{i}.self_attn.k_proj.weight", "model.layers.{i}.self_attn.v_proj.weight"]}' "$work/llama.yaml" &&
  grep -Fq '{name: qk_rope, op: rope, in: [qkv], heads: heads, kv_heads: kv_heads, packed: true,' "$work/llama.yaml" &&
  grep -Fq '{name: attn, op: attention, in: [qkv_rot], heads: heads, kv_heads: kv_heads, causal: true' "$work/llama.yaml" &&
  grep -Fq 'qkv_b: {shape: [(heads+2*kv_heads)*head_dim], parts: ["model.layers.{i}.self_attn.q_proj.bias",' "$work/llama_bias.yaml" ||
  fail "llama.yaml: no packed q|k|v: $(cat "$work/llama.yaml")"
# Mistral: no bias; Qwen2: a q|k|v bias of parts, none on o_proj; both: Llama's packed rope and attention.
grep -Fq '{name: qk_rope, op: rope, in: [qkv], heads: heads, kv_heads: kv_heads, packed: true, theta: 1000000.0,' "$work/mistral.yaml" &&
  ! grep -q "bias" "$work/mistral.yaml" &&
  grep -Fq 'qkv_b: {shape: [(heads+2*kv_heads)*head_dim], parts: ["model.layers.{i}.self_attn.q_proj.bias", "model.layers.{i}.self_attn.k_proj.bias", "model.layers.{i}.self_attn.v_proj.bias"]}' "$work/qwen2.yaml" &&
  grep -Fq '{name: o_proj, op: gemm, in: [ctx, o_w], trans_b: true, residual: x, out: a}' "$work/qwen2.yaml" &&
  grep -Fq '{name: attn, op: attention, in: [qkv_rot], heads: heads, kv_heads: kv_heads, causal: true' "$work/qwen2.yaml" ||
  fail "mistral.yaml / qwen2.yaml: $(cat "$work/mistral.yaml" "$work/qwen2.yaml")"
grep -q "note: .*sliding_window 8 >= --seq 8: the same as full causal attention" "$work/mistral.import.txt" ||
  fail "mistral: no note on the sliding window: $(cat "$work/mistral.import.txt")"

# --quantize: the linear weights 8-bit with a scale per row (q|k|v and its scales of parts), the
# checkpoint through `hkc quantize`, the reference on the dequantized weights (hf_layers_ref.py
# also checks them against the float weights); int8 on Llama with biases, fp8_e4m3 on Qwen2.
for mq in llama_bias:int8 qwen2:fp8_e4m3; do
  m=${mq%%:*} q=${mq#*:}
  "$HKC" import hf "$work/$m.json" -o "$work/${m}_q.yaml" --weights-map-out "$work/${m}_q.map" --seq 8 \
    --batch-sizes 1,2 --quantize "$q" -q
  grep -Fq "qkv_w: {shape: [(heads+2*kv_heads)*head_dim, hidden], dtype: $q, scale: qkv_w_s, parts: [" "$work/${m}_q.yaml" &&
    grep -Fq 'qkv_w_s: {shape: [(heads+2*kv_heads)*head_dim, 1], dtype: f32, parts: ["model.layers.{i}.self_attn.q_proj.weight_scale",' "$work/${m}_q.yaml" &&
    grep -Eq '^down_w_s_1 +model\.layers\.1\.mlp\.down_proj\.weight_scale$' "$work/${m}_q.map" ||
    fail "$m --quantize $q: $(cat "$work/${m}_q.yaml" "$work/${m}_q.map")"
  "$HKC" build "$work/${m}_q.yaml" -o "$work/${m}_q.hkpack" --target host -q
  "$HKC" inspect "$work/${m}_q.hkpack" > "$work/${m}_q.inspect" # (no pipe into grep -q: SIGPIPE under pipefail)
  # a host-only build: every gemm reads its 8-bit weights itself (gemm_quant auto), no dequant launch
  qk=i8; [ "$q" = fp8_e4m3 ] && qk=e4m3
  grep -q "hk_gemm_f32_${qk}_" "$work/${m}_q.inspect" && ! grep -q "hk_dequant_" "$work/${m}_q.inspect" ||
    fail "$m --quantize: not the folded 8-bit gemms: $(cat "$work/${m}_q.inspect")"
  "$PY" "$ref" "$HKC" "$work/${m}_q.hkpack" "$work/$m.json" "$work/${m}_q.map" "$work/$m-q" --quantize "$q"
done
# A config's quantization_config (compressed-tensors, 8-bit per channel) gives the same spec as
# --quantize; the formats hkc cannot express are refused, naming the piece.
qc='"quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"], "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false}, "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}}}}'
sed "s/^{/{$qc, /" "$work/qwen2.json" > "$work/qwen2_fp8.json"
"$HKC" import hf "$work/qwen2_fp8.json" -o "$work/qwen2_cfg.yaml" --weights-map-out "$work/qwen2_cfg.map" --seq 8 \
  --batch-sizes 1,2 -q || fail "import qwen2_fp8.json"
diff <(grep -v '^#' "$work/qwen2_cfg.yaml") <(grep -v '^#' "$work/qwen2_q.yaml") > /dev/null &&
  cmp -s <(grep -v '^#' "$work/qwen2_cfg.map") <(grep -v '^#' "$work/qwen2_q.map") ||
  fail "quantization_config: not the --quantize fp8_e4m3 spec: $(diff "$work/qwen2_cfg.yaml" "$work/qwen2_q.yaml")"
echo "ok   quantization_config (compressed-tensors fp8, per channel): the --quantize fp8_e4m3 spec"
for bad in 's/"strategy": "channel"/"strategy": "tensor"/@@weights .* are not supported' \
           's/"quant_method": "compressed-tensors"/"quant_method": "awq"/@@quant_method .awq. is not supported' \
           's/"ignore": \["lm_head"\]/"ignore": ["lm_head", "re:.*down_proj"]/@@ignores \["re:.\*down_proj"\]'; do
  sed "${bad%%@@*}" "$work/qwen2_fp8.json" > "$work/qbad.json"
  if "$HKC" import hf "$work/qbad.json" -o "$work/qbad.yaml" --seq 8 > "$work/qbad.txt" 2>&1; then fail "accepted: ${bad%%@@*}"; fi
  grep -Eq "quantization_config ${bad#*@@}" "$work/qbad.txt" || fail "${bad%%@@*}: $(cat "$work/qbad.txt")"
  echo "ok   refused: $(cut -c1-160 "$work/qbad.txt")"
done
if "$HKC" import hf "$work/qwen2_fp8.json" -o "$work/qbad.yaml" --seq 8 --quantize int8 > "$work/qbad.txt" 2>&1; then
  fail "--quantize int8 on an fp8 checkpoint accepted"
fi
grep -q "the checkpoint stores fp8_e4m3 weights" "$work/qbad.txt" || fail "--quantize mismatch: $(cat "$work/qbad.txt")"
if "$HKC" import hf "$work/gpt2.json" -o "$work/gq.yaml" --seq 8 --quantize int8 > "$work/gq.txt" 2>&1; then
  fail "gpt2 --quantize accepted"
fi
grep -q "the gpt2 importer has no quantizable linear weights" "$work/gq.txt" || fail "gpt2 --quantize: $(cat "$work/gq.txt")"

# Can fail: layer 0's and layer 1's o projections swapped in the map.
if "$PY" "$ref" "$HKC" "$work/llama.hkpack" "$work/llama.json" "$work/llama.map" "$work/swap" \
     --swap-map o_w_0 o_w_1 > "$work/swap.txt"; then
  fail "swapped weights passed the comparison: $(cat "$work/swap.txt")"
fi
grep -q "^FAIL llama" "$work/swap.txt" || fail "swapped weights: $(cat "$work/swap.txt")"
# Can fail too: Llama's k and v parts (the same shape) in the wrong order: rope would rotate v.
sed 's/k_proj\.weight"/@K@/; s/v_proj\.weight"/k_proj.weight"/; s/@K@/v_proj.weight"/' \
  "$work/llama.yaml" > "$work/llama_kv.yaml"
grep -Fq 'self_attn.v_proj.weight", "model.layers.{i}.self_attn.k_proj.weight"' "$work/llama_kv.yaml" ||
  fail "llama_kv.yaml: parts not swapped"
"$HKC" build "$work/llama_kv.yaml" -o "$work/llama_kv.hkpack" --target host -q
if "$PY" "$ref" "$HKC" "$work/llama_kv.hkpack" "$work/llama.json" "$work/llama.map" "$work/lkv" > "$work/lkv.txt"; then
  fail "swapped Llama parts passed the comparison: $(cat "$work/lkv.txt")"
fi
grep -q "^FAIL llama" "$work/lkv.txt" || fail "swapped Llama parts: $(cat "$work/lkv.txt")"
# Can fail too: BERT's key and value parts in the wrong order.
sed 's/self\.key\.weight"/@KEY@/; s/self\.value\.weight"/self.key.weight"/; s/@KEY@/self.value.weight"/' \
  "$work/bert.yaml" > "$work/bert_kv.yaml"
grep -Fq 'self.value.weight", "bert.encoder.layer.{i}.attention.self.key.weight"' "$work/bert_kv.yaml" ||
  fail "bert_kv.yaml: parts not swapped"
"$HKC" build "$work/bert_kv.yaml" -o "$work/bert_kv.hkpack" --target host -q
if "$PY" "$ref" "$HKC" "$work/bert_kv.hkpack" "$work/bert.json" "$work/bert.map" "$work/kv" > "$work/kv.txt"; then
  fail "swapped parts passed the comparison: $(cat "$work/kv.txt")"
fi
grep -q "^FAIL bert" "$work/kv.txt" || fail "swapped parts: $(cat "$work/kv.txt")"
echo "ok a wrongly bound weight fails the comparison (map entries; parts of BERT and Llama)"

# --layers, --dtype, --prefix; the spec builds with its batch sizes.
"$HKC" import hf "$work/llama.json" -o "$work/l1.yaml" --layers 1 --dtype bf16 --prefix "" --seq 16 \
  --batch-sizes 1,4 -q
grep -q "layers: 1}" "$work/l1.yaml" && grep -q "^dtype: bf16" "$work/l1.yaml" && grep -q "^batch_sizes: \[1, 4\]" "$work/l1.yaml" \
  || fail "--layers/--dtype/--batch-sizes: $(cat "$work/l1.yaml")"
grep -Eq '^o_w_0 +layers\.0\.self_attn\.o_proj\.weight$' "$work/l1.map" &&
  grep -Fq 'parts: ["layers.{i}.self_attn.q_proj.weight",' "$work/l1.yaml" || fail "--prefix '': $(cat "$work/l1.map")"
[ "$(grep -vc '^#' "$work/l1.map")" = 7 ] || fail "--layers 1 map"

# What hkc cannot express is refused, naming it; nothing is written.
refused() { # CONFIG-JSON WORDS...
  printf '%s\n' "$1" > "$work/bad.json"; shift
  rm -f "$work/bad.yaml"
  if "$HKC" import hf "$work/bad.json" -o "$work/bad.yaml" --seq 8 > "$work/bad.txt" 2>&1; then
    fail "accepted: $(cat "$work/bad.json")"
  fi
  for w in "$@"; do grep -q -- "$w" "$work/bad.txt" || fail "no '$w' in: $(cat "$work/bad.txt")"; done
  [ ! -e "$work/bad.yaml" ] || fail "a spec was written for a refused config"
}
refused "$(sed 's/"rope_scaling": null/"rope_scaling": {"rope_type": "llama3", "factor": 8.0}/' "$work/llama.json")" \
  "rope_scaling" "llama3"
refused '{"model_type": "t5", "d_model": 8}' "model_type 't5' is not supported" "bert, gpt2, llama, mistral, qwen2"
refused "$(sed 's/"absolute"/"relative_key"/' "$work/bert.json")" "position_embedding_type 'relative_key'"
# a sliding window shorter than --seq 8: on every Mistral layer; on Qwen2's layers >= max_window_layers
refused "$(sed 's/"sliding_window": 8/"sliding_window": 4/' "$work/mistral.json")" \
  "sliding_window 4 is shorter than --seq 8 (layers 0, 1): hkc's attention has no sliding window" "--seq 4 or less"
refused "$(sed 's/"use_sliding_window": false/"use_sliding_window": true/' "$work/qwen2.json")" \
  "sliding_window 4 is shorter than --seq 8 (layer 1)"
sed 's/"use_sliding_window": false/"use_sliding_window": true/' "$work/qwen2.json" > "$work/qwen2_win.json"
"$HKC" import hf "$work/qwen2_win.json" -o "$work/x.yaml" --seq 4 -q || fail "qwen2 --seq 4 (window 4) refused"
refused "$(sed 's/"n_layer": 2/"n_layer": 2, "scale_attn_by_inverse_layer_idx": true/' "$work/gpt2.json")" \
  "scale_attn_by_inverse_layer_idx"
refused "$(sed 's/"gelu_new"/"quick_gelu"/' "$work/gpt2.json")" "activation_function 'quick_gelu'"
"$HKC" import hf "$work/llama.json" -o "$work/x.yaml" --seq 65 > "$work/bad.txt" 2>&1 && fail "--seq 65 accepted"
grep -q "longer than the model's 64 positions" "$work/bad.txt" || fail "--seq: $(cat "$work/bad.txt")"
"$HKC" import tflite m.tflite > "$work/bad.txt" 2>&1 && fail "import tflite accepted"
grep -q "unknown format 'tflite'" "$work/bad.txt" || fail "import tflite: $(cat "$work/bad.txt")"
# without a format: both formats' usage, exit status 2; a bad option is a usage error (2) for both
set +e
"$HKC" import > "$work/none.txt" 2>&1; r0=$?
"$HKC" import hf --bogus > /dev/null 2>&1; r1=$?
"$HKC" import onnx --bogus > "$work/onnx_bogus.txt" 2>&1; r2=$?
set -e
[ $r0 = 2 ] && grep -q "hkc import hf CONFIG.json" "$work/none.txt" && grep -q "hkc import onnx MODEL.onnx" "$work/none.txt" &&
  [ $r1 = 2 ] && [ $r2 = 2 ] && grep -q "^hkc import onnx: error: " "$work/onnx_bogus.txt" ||
  fail "usage: import $r0 ($(cat "$work/none.txt")), hf --bogus $r1, onnx --bogus $r2 ($(cat "$work/onnx_bogus.txt"))"
echo "import_hf: ok"
