# SPDX-License-Identifier: Apache-2.0
"""hkc import onnx: an ONNX model (as torch.onnx.export writes transformer blocks: BERT-, GPT-2-
and Llama-style, torch's nn.TransformerEncoderLayer and nn.MultiheadAttention, nn.Linear) -> an
hkc spec (YAML) and a safetensors file with the params it needs. docs/IMPORT.md says what is
mapped; python/hkc_import_onnx.py is the entry point (installed as hkc-import-onnx).

How it works: the nodes are walked in graph order (core.py). Every node whose inputs are all
known constants is evaluated with NumPy (fold.py: shape arithmetic, masks, rotary tables), twice:
with the batch dim set to 2 and to 3, so that values depending on the batch size (Reshape targets
built from Shape(x)) are told apart from real constants. Every other value (values.py) carries a
layout: rows [batch, seq, width] (an hkc tensor, or a lazy element-wise expression over hkc
tensors, recognised as gelu / gelu_tanh / tanh / layernorm / rmsnorm / silu / add / mul when
something needs it), possibly seen by the graph seq first or flattened, a view of rows as heads
([b, t, nh, d] or nn.MultiheadAttention's [b*nh, t, d], transposed, K transposed, repeated for
grouped-query attention, scaled), attention scores and probabilities. Q @ K^T, scale, mask,
Softmax and @ V become one hkc attention node; rotate-half rotary becomes rope. Integer (and
mask) inputs [batch, seq] are Sources: a Gather of a table by one is an embedding; values
computed from one are NumPy functions of it (MaskFn), probed where they meet the attention scores
and mapped onto attention's lengths (right padding assumed) or mask.

The modules, by concern:
  graph.py        loading the model, its inputs' batch axes, pinning symbolic dims
  fold.py         NumPy evaluation of nodes on constants
  values.py       the value kinds, layouts, errors
  core.py         the walk, node emission, param naming, error collection, materialization
  elementwise.py  Add / Sub / Mul / Div / Pow / unary ops: lazy expressions, add and mul nodes
  activations.py  gelu, gelu_tanh, tanh, relu, silu (and why a lone Sigmoid / Erf is refused)
  norms.py        layernorm, rmsnorm
  linear.py       MatMul by weights, Gemm, gemm epilogues, column slices of fused projections
  layout.py       Reshape, Transpose, Split, Slice, Concat, Unsqueeze, Expand over rows and heads
  attention.py    scores, constant masks, the attention node
  masks.py        masks computed from inputs: lengths or additive mask
  rope.py         rotary
  embeddings.py   embeddings from token ids, position tables
  spec.py         the spec and the safetensors file
  cli.py          the command line
"""
