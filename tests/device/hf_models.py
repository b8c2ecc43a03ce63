# SPDX-License-Identifier: Apache-2.0
"""Hugging Face modules against hkc on the GPU (proof on real model code).

    python3 tests/device/hf_models.py HKC DIR OUT

DIR holds what tests/device/hf_prepare.sh made from tests/device/hf/*.json: NAME.yaml (from
`hkc import hf`), NAME.map (the weights name map) and NAME.hkpack (sm_90a). For each model this
builds the transformers module from the same configuration (random weights, seeded; no
download), saves the weights the map names as safetensors (the module's own names and
layouts), draws hidden states x, runs the module in bf16 and in float64, runs the pack with
`hkc run --weights ... --weights-map ...`, and compares:

  bert   BertModel (2 layers, bert-base sizes): model.encoder(x), no mask
  gpt2   GPT2Model (1 block, GPT-2 small sizes), position embeddings zeroed: ln_f(h0(x)), causal
  llama  LlamaModel (1 decoder layer, Llama-3-8B sizes): norm(layer0(x)) with rope, GQA, causal

NAME_mask (`hkc import hf --padding-mask`): the same with random lengths (1 .. seq, the first
entry the full length), Hugging Face's attention_mask with lengths[b] leading ones against the
pack's i32 input lengths; the rows compared are the unpadded ones (b, i < lengths[b]).

Pass: hkc's error against float64 (relative norm) <= 2 x torch bf16's own + 1e-3, and finite.

Self-contained packs (`hkc build --weights`): for each model without a mask, the spec is built
again here with the saved safetensors stored in the pack (same target and tuning database as
hf_prepare.sh), run at batch 1 without --weights, and its output must be the same bytes as the
pack run with --weights (HF_SELF_CONTAINED=0 skips this).
Exit 1 on any failure."""
import copy
import json
import os
import subprocess
import sys

import numpy as np
import torch
import transformers
import yaml
from safetensors.torch import save_file

hkc, src, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
torch.backends.cuda.matmul.allow_tf32 = False
failures = []


def config(name):
    raw = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf", name + ".json")))
    kind = raw.pop("model_type")
    raw.pop("torch_dtype", None)
    cls = {"bert": transformers.BertConfig, "gpt2": transformers.GPT2Config, "llama": transformers.LlamaConfig}[kind]
    return cls(**raw)


def cfg_theta(name):
    return json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf", name + ".json")))["rope_theta"]


def build(name):
    cfg = config(name)
    torch.manual_seed(1234)
    # run(module, x, mask): mask None, or Hugging Face's [batch, seq] attention_mask (1 = token)
    if name == "bert":
        m = transformers.BertModel(cfg, add_pooling_layer=False)

        def run(mod, x, mask):
            # the encoder takes the additive form: 0 for a token, the dtype's lowest for padding
            ext = None if mask is None else (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
            return mod.encoder(x, attention_mask=ext)[0]
    elif name == "gpt2":
        m = transformers.GPT2Model(cfg)
        with torch.no_grad():
            m.wpe.weight.zero_()  # the spec starts after the embeddings: x is the block's input

        def run(mod, x, mask):
            return mod(inputs_embeds=x, attention_mask=mask).last_hidden_state
    else:
        print("     config as built: rope_theta %s, rope_parameters %s" % (getattr(cfg, "rope_theta", None),
                                                                      getattr(cfg, "rope_parameters", None)))
        if getattr(cfg, "rope_parameters", None) is not None:  # newer transformers: theta lives here
            cfg.rope_parameters = {"rope_type": "default", "rope_theta": float(cfg_theta(name))}
        m = transformers.LlamaModel(cfg)
        d = cfg.hidden_size // cfg.num_attention_heads
        want = 1.0 / (float(cfg_theta(name)) ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
        got = m.rotary_emb.inv_freq.double()
        print("     transformers %s: rope inv_freq vs theta %g: max rel diff %.1e" % (
            transformers.__version__, cfg_theta(name), float(((got - want) / want).abs().max())))

        def run(mod, x, mask):
            return mod(inputs_embeds=x, attention_mask=mask).last_hidden_state
    with torch.no_grad():  # norms and biases away from their 1 / 0 initial values
        for n, p in m.named_parameters():
            if p.dim() == 1:
                if n.endswith("weight"):
                    p.uniform_(0.5, 1.5)
                else:
                    p.normal_(0.0, 0.1)
    return m.eval(), run


def self_contained(tag, st, run_args, out_npy, y_name):
    """hkc build --weights: the weights stored in the pack; the same output bytes at batch 1."""
    pack = os.path.join(out, tag + "_self.hkpack")
    target = os.environ.get("HK_GPU_TARGET", "sm_90a")
    cmd = [hkc, "build", os.path.join(src, tag + ".yaml"), "-o", pack, "--target", target, "-q",
           "--tuning-db", "specs/tuning/h200.db", "--weights", st, "--weights-map", os.path.join(src, tag + ".map")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return "hkc build --weights exited %d: %s" % (r.returncode, r.stderr.strip()[-400:])
    odir = os.path.join(out, tag + "_self_b1")
    keep = [a for i, a in enumerate(run_args) if a not in ("--weights", "--weights-map")
            and (i == 0 or run_args[i - 1] not in ("--weights", "--weights-map"))]
    r = subprocess.run([hkc, "run", pack, "--save-outputs", odir] + keep, capture_output=True, text=True)
    if r.returncode != 0:
        return "hkc run of the self-contained pack exited %d: %s" % (r.returncode, r.stderr.strip()[-400:])
    a, b = np.load(os.path.join(odir, y_name + ".npy")), np.load(out_npy)
    if a.shape != b.shape or a.tobytes() != b.tobytes():
        return "the self-contained pack's output differs from the --weights run's (max |diff| %g)" % float(
            np.abs(a.astype(np.float64) - b).max()) if a.shape == b.shape else "output shapes differ"
    print("ok   %-10s self-contained pack (hkc build --weights, %d MB): the same output bytes at batch 1 as "
          "--weights" % (tag, os.path.getsize(pack) >> 20), flush=True)
    return None


def rel(a, b):
    return float((a.double() - b).norm() / b.norm())


only = [m for m in os.environ.get("HF_MODELS", "").split(",") if m]  # e.g. HF_MODELS=llama,llama_mask
for name, masked in (("bert", 0), ("gpt2", 0), ("llama", 0), ("bert", 1), ("gpt2", 1), ("llama", 1)):
    tag = name + ("_mask" if masked else "")
    if only and tag not in only:
        continue
    if not os.path.exists(os.path.join(src, tag + ".hkpack")):
        failures.append("%s: no pack (tests/device/hf_prepare.sh)" % tag)
        print("FAIL", failures[-1])
        continue
    spec = yaml.safe_load(open(os.path.join(src, tag + ".yaml")))
    x_name, y_name = list(spec["inputs"])[0], spec["outputs"][0]
    seq = int(spec["dims"]["seq"]) if "dims" in spec and "seq" in spec["dims"] else None
    names = [line.split()[1] for line in open(os.path.join(src, tag + ".map"))
             if line.strip() and not line.startswith("#")]
    # params declared with `parts:` (BERT's q|k|v) bind from the checkpoint tensors the spec names
    for entry in spec["graph"]:
        rep = entry.get("repeat") if isinstance(entry, dict) else None
        for decl in ((rep or {}).get("params") or {}).values():
            if isinstance(decl, dict) and "parts" in decl:
                count = rep["count"] if isinstance(rep["count"], int) else int(spec["dims"][rep["count"]])
                var = "{%s}" % rep.get("var", "i")
                names += [p.replace(var, str(k)) for k in range(count) for p in decl["parts"]]
    model, run = build(name)
    state = model.state_dict()
    missing = [n for n in names if n not in state]
    if missing:
        failures.append("%s: the map names tensors the module lacks: %s" % (tag, missing[:5]))
        print("FAIL", failures[-1])
        continue
    rope_f32 = {n: b.detach().clone() for n, b in model.named_buffers() if n.endswith("inv_freq")}
    m16 = model.to("cuda", torch.bfloat16)
    # Module.to(bfloat16) also rounds the rotary inv_freq buffers to bf16 (positions x 2^-9 of
    # angle error), which from_pretrained(torch_dtype=...) does not do: keep them float32, as the
    # module computed them (a first run on 2026-12-02 compared against bf16-rounded frequencies)
    for n, b in rope_f32.items():
        owner = m16.get_submodule(n.rsplit(".", 1)[0]) if "." in n else m16
        owner.register_buffer(n.rsplit(".", 1)[-1], b.to("cuda"), persistent=False)
    st = os.path.join(out, tag + ".safetensors")
    save_file({n: state[n].detach().to(torch.bfloat16).contiguous() for n in names}, st)
    m64 = copy.deepcopy(m16).double()  # inv_freq: the float32 values, widened
    hidden = m16.config.hidden_size
    for batch in spec["batch_sizes"]:
        g = torch.Generator(device="cpu").manual_seed(100 + batch)
        x = torch.randn(batch, seq, hidden, generator=g).to(torch.bfloat16)
        xf = os.path.join(out, "%s_x_b%d.npy" % (tag, batch))
        np.save(xf, x.float().numpy())
        extra, mask, lengths = [], None, None
        if masked:
            lengths = torch.randint(1, seq + 1, (batch,), generator=g)
            lengths[0] = seq
            mask = (torch.arange(seq)[None, :] < lengths[:, None]).long().cuda()
            lf = os.path.join(out, "%s_len_b%d.npy" % (tag, batch))
            np.save(lf, lengths.numpy().astype(np.int32))
            extra = ["--input", "lengths=%s" % lf]
        with torch.no_grad():
            y16 = run(m16, x.cuda(), mask).float()
            y64 = run(m64, x.cuda().double(), mask)
        odir = os.path.join(out, "%s_b%d" % (tag, batch))
        args = ["--batch", str(batch), "--weights", st, "--weights-map", os.path.join(src, tag + ".map"),
                "--input", "%s=%s" % (x_name, xf), "--runs", "1", "--warmup", "0"] + extra
        cmd = [hkc, "run", os.path.join(src, tag + ".hkpack"), "--save-outputs", odir] + args
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append("%s batch %d: hkc run exited %d: %s" % (tag, batch, r.returncode, r.stderr.strip()[-400:]))
            print("FAIL", failures[-1], flush=True)
            continue
        got = torch.from_numpy(np.load(os.path.join(odir, y_name + ".npy"))).cuda()
        if batch == 1 and not masked and os.environ.get("HF_SELF_CONTAINED", "1") != "0":
            why = self_contained(tag, st, args, os.path.join(odir, y_name + ".npy"), y_name)
            if why:
                failures.append("%s: %s" % (tag, why))
                print("FAIL", failures[-1], flush=True)
        if masked and tuple(got.shape) == tuple(y64.shape):  # the unpadded rows only
            keep = mask.bool()
            got, y16, y64 = got[keep], y16[keep], y64[keep]
        if tuple(got.shape) != tuple(y64.shape):
            failures.append("%s batch %d: output shape %s, the module's %s" % (tag, batch, tuple(got.shape),
                                                                             tuple(y64.shape)))
            print("FAIL", failures[-1], flush=True)
            continue
        e_hkc, e_torch = rel(got, y64), rel(y16, y64)
        e_vs = rel(got, y16.double())
        ok = bool(torch.isfinite(got).all()) and e_hkc <= 2 * e_torch + 1e-3
        host = os.path.join(src, tag + "_host.hkpack")  # diagnosis: the same spec on the host target
        if not ok and os.path.exists(host) and batch == 1:
            hdir = odir + "_host"
            r = subprocess.run([hkc, "run", host, "--allow-unsigned-native", "--save-outputs", hdir] + args,
                               capture_output=True, text=True)
            if r.returncode == 0:
                h = torch.from_numpy(np.load(os.path.join(hdir, y_name + ".npy"))).cuda()
                if masked:
                    h = h[mask.bool()]
                print("     %s batch 1 on the host target: vs float64 %.2e, vs the GPU %.2e" % (tag, rel(h, y64),
                                                                                           rel(got, h.double())))
            else:
                print("     host run failed: " + r.stderr.strip()[-300:])
        if not ok and not masked:  # where the error is: by position
            d = (got.double() - y64).norm(dim=-1) / y64.norm(dim=-1)
            q = [float(d[:, i * seq // 8:(i + 1) * seq // 8].mean()) for i in range(8)]
            print("     relative error by position eighth: " + " ".join("%.1e" % v for v in q))
        line = ("%-10s batch %d seq %d%s: hkc vs float64 %.2e, torch bf16 vs float64 %.2e, hkc vs torch bf16 %.2e, "
                "max |hkc - f64| %.3g" % (tag, batch, seq, " lengths %s" % lengths.tolist() if masked else "",
                                          e_hkc, e_torch, e_vs, float((got.double() - y64).abs().max())))
        print(("ok   " if ok else "FAIL ") + line, flush=True)
        if not ok:
            failures.append(line)
    del m16, m64, model, state
    torch.cuda.empty_cache()

print("hf_models: %s" % ("all match" if not failures else "%d failure(s)" % len(failures)))
sys.exit(1 if failures else 0)
