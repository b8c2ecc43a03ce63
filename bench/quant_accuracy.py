#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""What 8-bit weights and FP8 KV caches cost in accuracy, against the bf16 pack of the same
model: on the host target (the same math as every target: a folded or unfolded 8-bit gemm takes
each weight as q * scale rounded to bf16), no GPU needed.

    python3 bench/quant_accuracy.py [--configs llama-3.2-1b,qwen2.5-0.5b,tinyllama-1.1b]
                                    [--tokens 32] [--work DIR] [--hkc build/hkc]

Per config of bench/gen_configs/: seeded random weights (the configs have no trained checkpoint
here), written as BF16: --init hf (the default) as Hugging Face initializes a model from its
config -- every Linear and Embedding weight normal(0, initializer_range), norm gains 1, biases
0 -- the weights bench/gen_device.py's GPU check generates from; --init wide
tests/integration/gen_reference.py's larger matrices (normal * 2 / sqrt(fan_in)), whose deep
models are chaotic (the bf16 pack differs from the f32 one by ~15% in its logits); then
`hkc quantize` to int8 and to fp8_e4m3 (a scale per output row, the LM head too), and six
generation specs from `hkc import hf --generate` (bf16; f32, which says how much the model
amplifies a rounding the size of bf16's; --quantize int8; --quantize fp8_e4m3, weight-only and
with the FP8 product, `hkc build --kernel-option gemm_fp8=on`; bf16 with --kv-cache fp8_e4m3),
built for the host. For each mode against bf16:
  - logits: one prefill of a 32-token prompt (`hkc run`, batch 32), the last token's logits:
    relative error ||q - b|| / ||b|| and the largest element error over the largest |b|;
  - greedy: four prompts (8, 16, 24 and 32 tokens) decoded --tokens steps in one `hkc
    generate` call: per prompt the tokens equal to the bf16 pack's at the same step, and the
    first step where they differ.
Prints a Markdown table (docs/BENCHMARKS.md, "8-bit accuracy").
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import gen_reference  # noqa: E402  (the seeded initializer)
import safetensors_io  # noqa: E402

# (mode, import flags, checkpoint, dtype, build flags); the first is the baseline; "f32" (the f32
# pack against the bf16 one) says how much this model amplifies a rounding the size of bf16's
MODES = [("bf16", [], "w", "bf16", []), ("f32", [], "w", "f32", []),
         ("int8", ["--quantize", "int8"], "w_int8", "bf16", []),
         ("fp8_e4m3", ["--quantize", "fp8_e4m3"], "w_fp8", "bf16", []),
         ("fp8_e4m3 W8A8", ["--quantize", "fp8_e4m3"], "w_fp8", "bf16", ["--kernel-option", "gemm_fp8=on"]),
         ("kv fp8_e4m3", ["--kv-cache", "fp8_e4m3"], "w", "bf16", [])]
PROMPT_LENS = (8, 16, 24, 32)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("%s: exit %d\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return r.stdout


def to_bf16(a):
    """f32 -> bf16 bits, to nearest even."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def hf_init(cfg, seed):
    """Weights as a Hugging Face model initializes itself from a config: Linear and Embedding
    weights normal(0, initializer_range), the norms' gains 1, biases 0."""
    rng = np.random.default_rng(seed)
    std = cfg.get("initializer_range", 0.02)
    w = {}
    for name, shp in gen_reference.checkpoint_shapes(cfg).items():
        if len(shp) == 1:
            w[name] = np.ones(shp, np.float32) if name.endswith("norm.weight") else np.zeros(shp, np.float32)
        else:
            w[name] = rng.standard_normal(shp, dtype=np.float32) * np.float32(std)
    return w


def weights(cfg_path, out, init):
    if os.path.exists(out):
        return
    cfg = gen_reference.load_config(cfg_path)
    t0 = time.time()
    w = hf_init(cfg, 0) if init == "hf" else gen_reference.random_weights(cfg, seed=0)
    safetensors_io.write(out, {k: ("BF16", to_bf16(v)) for k, v in w.items()})
    print("  weights %s: %.1f s" % (os.path.basename(out), time.time() - t0), file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--configs", default="llama-3.2-1b,qwen2.5-0.5b,tinyllama-1.1b")
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--work", default="/tmp/hkc-quant-accuracy")
    p.add_argument("--hkc", default=os.path.join(ROOT, "build", "hkc"))
    p.add_argument("--init", choices=("hf", "wide"), default="hf")
    p.add_argument("--modes", help="the modes to compare with bf16, comma-separated (default: all)")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    hkc = a.hkc
    rng = np.random.default_rng(11)
    rows = []
    for name in a.configs.split(","):
        cfg_path = os.path.join(ROOT, "bench", "gen_configs", name + ".json")
        vocab = json.load(open(cfg_path))["vocab_size"]
        d = os.path.join(a.work, a.init, name)
        os.makedirs(d, exist_ok=True)
        ck = {"w": os.path.join(d, "w.safetensors"), "w_int8": os.path.join(d, "w_int8.safetensors"),
              "w_fp8": os.path.join(d, "w_fp8.safetensors")}
        print("%s:" % name, file=sys.stderr)
        weights(cfg_path, ck["w"], a.init)
        for key, dt in (("w_int8", "int8"), ("w_fp8", "fp8_e4m3")):
            if not os.path.exists(ck[key]):
                run([hkc, "quantize", ck["w"], "-o", ck[key], "--dtype", dt, "-q"])
        prompts = []
        for n in PROMPT_LENS:
            f = os.path.join(d, "p%d.npy" % n)
            np.save(f, rng.integers(0, vocab, size=n).astype(np.int32))
            prompts.append(f)
        # the logits run's inputs: the 32-token prompt in slot 0, every slot's row its last token
        T = PROMPT_LENS[-1]
        inp = {"ids": np.load(prompts[-1]), "ctx": np.arange(1, T + 1, dtype=np.int32),
               "slot": np.zeros(T, np.int32), "rows": np.full(4, T - 1, np.int32),
               "sampling": np.zeros((4, 4), np.int32)}
        for k, v in inp.items():
            np.save(os.path.join(d, "in_%s.npy" % k), v)
        base_logits, base_ids = None, None
        for mode, flags, wkey, dtype, bflags in MODES:
            if mode != "bf16" and a.modes and mode not in a.modes.split(","):
                continue
            tag = mode.replace(" ", "_")
            spec, mp, pack = (os.path.join(d, "%s.%s" % (tag, e)) for e in ("yaml", "map", "hkpack"))
            run([hkc, "import", "hf", cfg_path, "--generate", "--max-seq", "128", "--slots", "4", "--token-buckets",
                 "1,4,16,32", "--dtype", dtype, "--targets", "host", "-o", spec, "--weights-map-out", mp, "-q"] + flags)
            run([hkc, "build", spec, "-o", pack, "-q"] + bflags)
            t0 = time.time()
            out = os.path.join(d, "out_" + tag)
            run([hkc, "run", pack, "--batch", str(T), "--weights", ck[wkey], "--weights-map", mp, "--runs", "1",
                 "--warmup", "0", "--save-outputs", out, "-q", "--allow-unsigned-native"] +
                sum((["--input", "%s=%s" % (k, os.path.join(d, "in_%s.npy" % k))] for k in inp), []))
            logits = np.load(os.path.join(out, "logits.npy"))[0].astype(np.float64)
            gen = json.loads(run([hkc, "generate", pack, "--weights", ck[wkey], "--weights-map", mp, "-n",
                                  str(a.tokens), "--json", "--allow-unsigned-native"] +
                                 sum((["--ids", f] for f in prompts), [])))
            ids = gen["outputs"]
            print("  %-12s %.1f s" % (mode, time.time() - t0), file=sys.stderr)
            if base_logits is None:
                base_logits, base_ids = logits, ids
                continue
            rel = np.linalg.norm(logits - base_logits) / np.linalg.norm(base_logits)
            worst = np.max(np.abs(logits - base_logits)) / np.max(np.abs(base_logits))
            same = [sum(x == y for x, y in zip(g, b)) for g, b in zip(ids, base_ids)]
            first = [next((i for i, (x, y) in enumerate(zip(g, b)) if x != y), None) for g, b in zip(ids, base_ids)]
            rows.append((name, mode, rel, worst, same, first, len(base_ids[0])))
    print("| config | mode | logits rel. error | max elem. error / max abs | greedy: same ids per prompt | first differing step |")
    print("|---|---|---|---|---|---|")
    for name, mode, rel, worst, same, first, n in rows:
        print("| %s | %s | %.2f%% | %.2f%% | %s | %s |" % (
            name, mode, 100 * rel, 100 * worst, ", ".join("%d/%d" % (s, n) for s in same),
            ", ".join("-" if f is None else str(f) for f in first)))


if __name__ == "__main__":
    main()
