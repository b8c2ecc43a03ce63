#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""GPU half of the generation check and benchmark (the CPU half, bench/gen_prepare.sh, builds
build-dev/ and one pack per config in build-dev/gen/).

    python3 bench/gen_device.py check          # greedy tokens against Hugging Face generate
    python3 bench/gen_device.py bench          # ms/token and time to first token, against HF
    python3 bench/gen_device.py weights        # only the Llama-3.2-1B checkpoint (random weights)

check: for each config in bench/gen_configs/, a Hugging Face model built from the config with
random weights (torch.manual_seed(0), the config's own initializer), bf16, saved with
save_pretrained; 4 prompts of different lengths (random ids); Hugging Face greedy generate
(use_cache=True) per prompt against one `hkc generate` call that prefills and decodes all four
batched. Where the tokens differ, the step and Hugging Face's logit margin there (its top-1 logit
minus the logit of hkc's token) say whether it is a bf16 near-tie; and every step's logits, hkc's
and HF bf16's, are compared with an f32 copy of the HF model fed the same tokens (logits_drift):
up to the divergence hkc's error must stay within twice HF bf16's own.

bench (Llama-3.2-1B): ms per decode step at batch B and context C for hkc (`hkc generate`, the
median step, wall clock) and Hugging Face generate with the static cache (transformers compiles
the decoding step itself): ms/token = (t(N2) - t(N1)) / (N2 - N1), after a warm-up of both; time
to first token for prompts of 128 and 1024 tokens; the weight-read floor: (weight bytes + KV
bytes read per step) / the device-to-device copy bandwidth measured in the same run.
The A/B pack (llama-3.2-1b-alt: the kernel options of build-dev/gen/alt-options.txt, which
bench/gen_prepare.sh wrote) is checked and timed beside the default one.
Environment: GEN_POINTS ("1x1024,8x1024,32x1024,1x128,1x4096"), GEN_MODELS (pack names), GEN_FAST=0
(the -alt pack not timed), GEN_CHECK_SINGLE=1 (check also runs each prompt alone: the batch-1
decode graphs, whose launches differ from the batched ones' -- their tokens against HF's and the
batch's, their logits against the f32 model under the same bf16 bound).
"""
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HKC = os.path.join(ROOT, "build-dev", "hkc")
GEN = os.path.join(ROOT, "build-dev", "gen")
OUT = os.environ.get("OUT", "/tmp")


def log(*a):
    print(*a, flush=True)


def alt_options():
    """The kernel options of the A/B pack (bench/gen_prepare.sh's GEN_ALT_OPTIONS)."""
    try:
        with open(os.path.join(ROOT, "build-dev", "gen", "alt-options.txt")) as f:
            return f.read().strip()
    except OSError:
        return "?"


def hf_model(name):
    """The Hugging Face model of config `name` ("NAME-alt": NAME's, for the A/B pack)."""
    from transformers import AutoConfig, AutoModelForCausalLM
    name = name[:-len("-alt")] if name.endswith("-alt") else name
    cfg_path = os.path.join(ROOT, "bench", "gen_configs", name + ".json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    config = AutoConfig.for_model(**cfg)
    torch.manual_seed(0)
    with torch.device("cuda"):  # weights initialized on the GPU, not the CPU
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16).eval()
    model.generation_config.pad_token_id = 0
    path = "/tmp/gen_%s" % name
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        model.save_pretrained(path, safe_serialization=True)
    return model, cfg, os.path.join(path, "model.safetensors")


def hkc_generate(name, weights, prompts, n, extra=()):
    files = []
    for i, p in enumerate(prompts):
        f = "/tmp/gen_prompt_%s_%d.npy" % (name, i)
        np.save(f, np.asarray(p, dtype=np.int32))
        files += ["--ids", f]
    cmd = [HKC, "generate", os.path.join(GEN, name + ".hkpack"), "--weights", weights, "--weights-map",
           os.path.join(GEN, name + ".map"), "-n", str(n), "--json"] + files + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("hkc generate failed (%d): %s" % (r.returncode, r.stderr[-2000:]))
    return json.loads(r.stdout)


def check(names):
    rows = []
    for name in names:
        model, cfg, weights = hf_model(name)
        rng = np.random.default_rng(1)
        lens = [5, 17, 64, 200]
        prompts = [rng.integers(0, cfg["vocab_size"], size=L).tolist() for L in lens]
        n = 32
        hf = []
        for p in prompts:
            ids = torch.tensor([p], device="cuda")
            with torch.no_grad():
                g = model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, use_cache=True,
                                   output_logits=True, return_dict_in_generate=True)
            # raw logits (generate's scores carry min_new_tokens' -inf at the stop id)
            hf.append((g.sequences[0, len(p):].tolist(), [s[0].float().cpu() for s in g.logits]))
        res = hkc_generate(name, weights, prompts, n)
        drift = logits_drift(name, model, weights, prompts, [t for t, _ in hf], [sc for _, sc in hf])
        for i, p in enumerate(prompts):
            ours, (theirs, scores) = res["outputs"][i], hf[i]
            same = 0
            while same < min(len(ours), len(theirs)) and ours[same] == theirs[same]:
                same += 1
            note = ""
            if same < n:
                s = scores[same]
                top = torch.topk(s, 2)
                note = ("diverge at step %d: HF top-1 %d (%.4f), hkc %d (HF logit %.4f): margin %.4f, HF top-2 gap %.4f"
                        % (same, theirs[same], top.values[0].item(), ours[same], s[ours[same]].item(),
                           top.values[0].item() - s[ours[same]].item(), (top.values[0] - top.values[1]).item()))
            d = drift[i]
            upto = max(d["hkc"][:same + 1])  # the steps both took with the same tokens, the divergence's included
            ok = upto <= 2 * max(d["hf"][:same + 1]) + 1e-3
            rows.append((name, len(p), same, n, note, upto))
            log("%-16s prompt %4d: %2d/%d tokens equal %s" % (name, len(p), same, n, note))
            log("%-16s prompt %4d: logits vs f32, steps 0..%d: hkc %.4f, HF bf16 %.4f (max rel. L2); all %d steps "
                "(HF's tokens fed): hkc %.4f, HF bf16 %.4f; hkc vs HF bf16 %.4f; f32 picks HF's token at the "
                "divergence: %s -> %s; greedy picks not the argmax of hkc's logits: %d of %d"
                % (name, len(p), min(same, n - 1), upto, max(d["hf"][:same + 1]), n, max(d["hkc"]), max(d["hf"]),
                   max(d["hkc_hf"]), d["f32_pick"][same] if same < n else "-",
                   "within bf16 bounds" if ok else "OUTSIDE bf16 bounds", d["argmax_bad"], n))
        if os.environ.get("GEN_CHECK_SINGLE", "0") != "0":  # each prompt alone: the batch-1 decode graph
            drift1 = logits_drift(name, model, weights, prompts, [t for t, _ in hf], [sc for _, sc in hf],
                                  single=True)
            for i, p in enumerate(prompts):
                ours = hkc_generate(name, weights, [p], n)["outputs"][0]
                theirs, batched = hf[i][0], res["outputs"][i]
                same = 0
                while same < min(len(ours), len(theirs)) and ours[same] == theirs[same]:
                    same += 1
                d = drift1[i]
                upto = max(d["hkc"][:same + 1])
                ok = upto <= 2 * max(d["hf"][:same + 1]) + 1e-3
                rows.append((name + " (batch 1)", len(p), same, n, "", upto))
                log("%-16s prompt %4d alone (batch 1): %2d/%d tokens equal HF's (%s the batched run's); logits vs "
                    "f32, steps 0..%d: hkc %.4f, HF bf16 %.4f -> %s; greedy picks not the argmax of hkc's logits: "
                    "%d of %d" % (name, len(p), same, n, "the same as" if ours == batched else "not", min(same, n - 1),
                                  upto, max(d["hf"][:same + 1]),
                                  "within bf16 bounds" if ok else "OUTSIDE bf16 bounds", d["argmax_bad"], n))
        del model
        torch.cuda.empty_cache()
    return rows


def logits_drift(name, model, weights, prompts, hf_tokens, hf_scores, single=False):
    """Logits of every step against an f32 reference, with Hugging Face's tokens fed to both:
    hkc's (hkrt Generator over the pack, the prompts batched in slots 0..3 -- single: each alone
    in slot 0, the batch-1 graphs -- then one token per slot per step: the tokens HF chose, so
    every step compares the same inputs, before and after a divergence) and HF bf16 generate's
    scores, each as ||x - f32|| / ||f32|| per step,
    where f32 is one forward pass of an f32 copy of the HF model over prompt + HF's tokens.
    "Within bf16 bounds": hkc's error at most twice HF bf16's own (+1e-3). Also, per step,
    whether the f32 logits rank HF's token above hkc's greedy pick (f32_pick: "HF", "hkc",
    "same")."""
    import copy
    import hkrt
    ref = copy.deepcopy(model).float()
    names = {}
    with open(os.path.join(GEN, name + ".map")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                a, b = line.split()[:2]
                names[a] = b
    out = []
    with hkrt.Pack.open(os.path.join(GEN, name + ".hkpack")) as pack:
        sess = pack.session()
        sess.bind_weights(weights, names=names)
        with sess.generator() as gen:
            # groups of prompts run together: all at once, or (single) one at a time in slot 0
            groups = [[i] for i in range(len(prompts))] if single else [list(range(len(prompts)))]
            n_steps = len(hf_tokens[0])
            picks = [[None] * len(prompts) for _ in range(n_steps)]
            steps = [[None] * len(prompts) for _ in range(n_steps)]
            for grp in groups:
                slots = list(range(len(grp)))
                for j in slots:
                    gen.reset(j)
                got = gen.append(slots, [list(prompts[i]) for i in grp])
                for s in range(n_steps):
                    for j, i in enumerate(grp):
                        picks[s][i], steps[s][i] = got[j], gen.logits(j)
                    if s + 1 < n_steps:
                        got = gen.append(slots, [[hf_tokens[i][s]] for i in grp])
        sess.close()
    for i, p in enumerate(prompts):
        seq = torch.tensor([list(p) + hf_tokens[i]], device="cuda")
        with torch.no_grad():
            f32 = ref(seq).logits[0, len(p) - 1:len(p) - 1 + len(hf_tokens[i])].double().cpu()
        d = dict(hkc=[], hf=[], hkc_hf=[], f32_pick=[], argmax_bad=0)
        for s in range(len(hf_tokens[i])):
            # the device's greedy pick is the first index of the largest of its own logits
            lg = steps[s][i]
            d["argmax_bad"] += int(picks[s][i] != int(np.argmax(lg)))
            r, ours, theirs = f32[s], torch.from_numpy(steps[s][i]).double(), hf_scores[i][s].double()
            nr = r.norm().item()
            d["hkc"].append((ours - r).norm().item() / nr)
            d["hf"].append((theirs - r).norm().item() / nr)
            d["hkc_hf"].append((ours - theirs).norm().item() / theirs.norm().item())
            a, b = hf_tokens[i][s], picks[s][i]
            d["f32_pick"].append("same" if a == b else ("HF" if r[a] > r[b] else ("hkc" if r[b] > r[a] else "tie")))
        out.append(d)
    del ref
    torch.cuda.empty_cache()
    return out


def copy_bandwidth():
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        y.copy_(x)
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ms = sorted(ts)[len(ts) // 2]
    return 2 * x.numel() / (ms * 1e-3)


def hf_ms_per_token(model, batch, ctx, vocab):
    ids = torch.randint(0, vocab, (batch, ctx), device="cuda")
    def gen(n):
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, cache_implementation="static")
        torch.cuda.synchronize()
        return time.perf_counter() - t
    n1, n2 = 16, 48
    for _ in range(2):
        gen(n1), gen(n2)
    t1 = sorted(gen(n1) for _ in range(3))[1]
    t2 = sorted(gen(n2) for _ in range(3))[1]
    ttft = sorted(gen(1) for _ in range(3))[1]
    return (t2 - t1) / (n2 - n1) * 1e3, ttft * 1e3


def bench(name="llama-3.2-1b"):
    points = [tuple(int(v) for v in p.split("x")) for p in
              os.environ.get("GEN_POINTS", "1x1024,8x1024,32x1024,1x128,1x4096").split(",")]
    model, cfg, weights = hf_model(name)
    bw = copy_bandwidth()
    params = sum(p.numel() for p in model.parameters())  # tied: the table once
    kv_width = cfg["num_key_value_heads"] * cfg.get("head_dim", cfg["hidden_size"] // cfg["num_attention_heads"])
    log("copy bandwidth %.3f TB/s; %s: %.3f B params (%.1f MB bf16)" % (bw / 1e12, name, params / 1e9, params * 2e-6))
    rows = []
    for batch, ctx in points:
        kv = batch * cfg["num_hidden_layers"] * 2 * ctx * kv_width * 2
        floor = (params * 2 + kv) / bw * 1e3
        rng = np.random.default_rng(batch * 100003 + ctx)
        prompts = [rng.integers(0, cfg["vocab_size"], size=ctx).tolist() for _ in range(batch)]
        r = hkc_generate(name, weights, prompts, 33)
        ours, ttft = r["ms_per_token"], r["ttft_ms"]
        try:  # the A/B pack, when gen_prepare.sh built it
            if os.environ.get("GEN_FAST", "1") == "0":
                raise RuntimeError("not timed (GEN_FAST=0)")
            rf = hkc_generate(name + "-alt", weights, prompts, 33)
            alt, alt_ttft = rf["ms_per_token"], rf["ttft_ms"]
        except Exception as e:
            log("the -alt pack at b%d ctx%d: %s" % (batch, ctx, str(e)[:300]))
            alt, alt_ttft = float("nan"), float("nan")
        try:
            theirs, hf_ttft = hf_ms_per_token(model, batch, ctx, cfg["vocab_size"])
        except Exception as e:  # a configuration HF cannot compile is reported, not fatal
            log("HF failed at b%d ctx%d: %s" % (batch, ctx, str(e)[:300]))
            theirs, hf_ttft = float("nan"), float("nan")
        rows.append(dict(batch=batch, ctx=ctx, hkc_ms=ours, hkc_alt_ms=alt, alt_options=alt_options(), hf_ms=theirs,
                         floor_ms=floor, hkc_ttft_ms=ttft, hkc_alt_ttft_ms=alt_ttft, hf_ttft_ms=hf_ttft))
        log("b%-3d ctx %-5d hkc %.3f ms/token (%.2fx floor, %.2fx HF), alt (%s) %.3f (%.2fx HF)  "
            "HF static %.3f  floor %.3f | TTFT hkc %.2f (%.2fx HF), alt %.2f, HF %.2f ms"
            % (batch, ctx, ours, ours / floor, ours / theirs, alt_options(), alt, alt / theirs, theirs, floor, ttft,
               ttft / hf_ttft, alt_ttft, hf_ttft))
    with open(os.path.join(OUT, "gen_bench.json"), "w") as f:
        json.dump(dict(copy_bw=bw, rows=rows, device=torch.cuda.get_device_name()), f, indent=1)
    return rows


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "check"
    models = os.environ.get("GEN_MODELS", "llama-3.2-1b,llama-3.2-1b-alt,qwen2.5-0.5b,tinyllama-1.1b").split(",")
    log("device:", torch.cuda.get_device_name())
    if what in ("check", "all"):
        check(models)
    if what in ("bench", "all"):
        bench()
    if what == "weights":  # only the Llama-3.2-1B checkpoint the profiles bind (no check)
        hf_model("llama-3.2-1b")
