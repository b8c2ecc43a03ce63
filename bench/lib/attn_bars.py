#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Attention on the H200 (`bench/run.py attention`): hkc's single-op attention packs against
F.scaled_dot_product_attention, same run.

  python3 bench/lib/attn_bars.py prepare [--only REGEX]                      # CPU machine (needs build-dev/hkc)
  python3 bench/lib/attn_bars.py numerics [--only REGEX] [--out F.jsonl]     # H200 (build-dev carried)
  python3 bench/lib/attn_bars.py timing [--only REGEX] [--out F.jsonl]       # H200
  python3 bench/lib/attn_bars.py db --from F.jsonl [--bad B.json] > x.db      # tuning entries from a timing run
  python3 bench/lib/attn_bars.py --set skv prepare|numerics|timing ...         # split-KV (bench/run.py attention --decode)

prepare writes build-dev/bench/attn/<case>.yaml (one attention node) and packs for sm_90a,
one per tag (TAGS below): `default`: the build's default (attention_tma in the model's
configuration; the tuning database's where it has the shape), attention_tma forced into each of its schedules (`simple`: pp=0,ov=0, the
bisecting baseline; `ov`: overlap only; `pp`: ping-pong only; `full`: both) and a few other
configurations, and `old` (attn_tma=off: attention_wgmma at dh 128, attention_mma at 64).
Pack file names: <case>__<tag>.hkpack; build-dev/bench/attn/tags.json maps tags to options.

numerics, per numerics case and tag: random inputs (never zeros), the output poisoned with NaN,
one run through libhkrt (the hkrt package, python/hkrt), compared with a float64 reference (softmax(q k^T s) v,
causal top-left, GQA by repeat): relative Frobenius error <= 2 x SDPA's own error + 2e-3
(bf16) / 1e-3 (f16), every row written. Case `tailnan`: the second sequence's first K/V rows
are +inf/NaN, only the first sequence is compared (a box running past the first sequence must
not leak them). A
watchdog (--hang-s) ends the process with "HANG <case>__<tag>" (exit 3) when a run does not
complete, a broken CUDA context after a failed run with "FAULT <case>__<tag>" (exit 4); the
device script then reruns the step without that tag. Writes the tags that failed or hung to
--bad (JSON), which timing skips.

timing, per timing case: one protocol for both -- R launches over R input/output copies
(together past the 60 MB L2) captured in one CUDA graph on torch's stream (hkc through libhkrt
in stream launch mode, each run's bindings and tensor maps captured), SDPA on the same [B, S,
H dh] tensors viewed as [B, H, S, dh] (enable_gqa for grouped heads), replayed after warm-up,
median over --reps replays of graph time / R; GPU time only against GPU time. FLOPs 4 B H Sq Skv
dh, halved when causal. A table per case: SDPA, hkc's default, the best attention_tma tag, old.

--set skv (`bench/run.py attention --decode`): attention_mma's split-KV
(flash-decoding) on few queries over long keys, packs in build-dev/bench/skv/. Tags: `default`
(the build's choice: the model picks split-KV where it pays), `tma` (attn_tma=on: attention_tma
alone, as before split-KV), `kvsN` (attn_kvs=N with attn_mma_cfg=4,64,2: the model's split tile,
N KV pieces per query tile; kvs1 unsplit), `kvs4w8` (128-row tiles, 4 pieces: warps without
query rows), on grouped-query cases `gpN` (gp=1: the query heads of a kv head packed into one
tile, N pieces; gp2w8: 128-row packed tiles). Numerics cases: decode steps (one to 64 queries over 1000-16384 keys, odd lengths,
GQA 32/8, packed qkv, causal top-left: pieces past a row's keys are empty), key lengths
(`len_`: 0, 1, short and full lengths; a row with no key outputs zeros) and an additive mask
(`mask_`, per query head: `maskh_`), the packing's own cases (`gp_`: causal Sq 16 over 4097
keys, odd Sq, groups of 6 and 128); their peer error is the reference rounded to the dtype (SDPA has no lengths and
gives NaN on empty rows). Each split tag also runs twice: the two outputs must be the same bytes
(the merge's fixed order). Timing cases: batch 1/4/8, 32 heads (and GQA 32/8), 1/16/64 queries,
4096/16384 keys, head dim 128 and 64, against SDPA (enable_gqa) in the protocol above; the GQA
ones also with gp2/4/8/16.
"""
import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_bars import capture_time  # noqa: E402  the same graph-captured protocol as the GEMM bars

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DIR = os.path.join(ROOT, "build-dev", "bench", "attn")
L2_BYTES = 60 << 20
BEST_KERNEL = "attention_tma"  # the kernel whose tags the timing table's "best" column ranks
OLD_TAG = "old"  # the tag of its last column

# (name, dtype, batch, seq_q, seq_kv, heads, kv_heads, dh, causal, packed, kind)
CASES = []
for s in (1024, 4096):
    for dh in (64, 128):
        for causal in (0, 1):
            CASES.append(("bar_s%d_d%d_%s" % (s, dh, "causal" if causal else "full"), "bf16", 8, s, s, 16, 16, dh,
                          causal, 0, "timing"))
CASES.append(("bar_s4096_d128_full_f16", "f16", 8, 4096, 4096, 16, 16, 128, 0, 0, "timing"))
CASES.append(("bar_s1024_d64_causal_f16", "f16", 8, 1024, 1024, 16, 16, 64, 1, 0, "timing"))
for b in (1, 8, 32, 128):
    CASES.append(("bert_b%d" % b, "bf16", b, 128, 128, 12, 12, 64, 0, 1, "timing"))
for b in (1, 4, 16):
    CASES.append(("llama_b%d" % b, "bf16", b, 512, 512, 32, 8, 128, 1, 0, "timing"))
# numerics: odd lengths (tails of query and key tiles, boxes running into the next sequence),
# causal and full, GQA 32/8, packed qkv, cross (Sq != Skv), a single query, dh 64/128, bf16/f16
CASES += [
    ("odd_s77_d64_full", "bf16", 2, 77, 77, 4, 4, 64, 0, 0, "numerics"),
    ("odd_s77_d64_causal_f16", "f16", 2, 77, 77, 4, 4, 64, 1, 0, "numerics"),
    ("odd_s1000_d128_causal", "bf16", 2, 1000, 1000, 4, 4, 128, 1, 0, "numerics"),
    ("odd_s1000_d128_full_f16", "f16", 2, 1000, 1000, 4, 4, 128, 0, 0, "numerics"),
    ("odd_s1000_d64_causal", "bf16", 3, 1000, 1000, 2, 2, 64, 1, 0, "numerics"),
    ("gqa_s77_d128_causal", "bf16", 2, 77, 77, 32, 8, 128, 1, 0, "numerics"),
    ("gqa_s1000_d64_full_f16", "f16", 2, 1000, 1000, 32, 8, 64, 0, 0, "numerics"),
    ("gqa_s333_d128_causal_f16", "f16", 3, 333, 333, 32, 8, 128, 1, 0, "numerics"),
    ("packed_s77_d64_full", "bf16", 3, 77, 77, 12, 12, 64, 0, 1, "numerics"),
    ("packed_s1000_d128_causal_f16", "f16", 2, 1000, 1000, 4, 4, 128, 1, 1, "numerics"),
    ("packed_gqa_s200_d128_causal", "bf16", 2, 200, 200, 8, 2, 128, 1, 1, "numerics"),
    ("cross_q77_kv1000_d64_causal", "bf16", 2, 77, 1000, 4, 4, 64, 1, 0, "numerics"),
    ("cross_q1000_kv77_d128_causal", "bf16", 2, 1000, 77, 4, 2, 128, 1, 0, "numerics"),
    ("decode_q1_kv1000_d128", "bf16", 4, 1, 1000, 32, 8, 128, 0, 0, "numerics"),
    ("tailnan_s77_d128", "bf16", 2, 77, 77, 4, 4, 128, 0, 0, "numerics"),
    ("tailnan_s200_d64_causal", "f16", 2, 200, 200, 4, 4, 64, 1, 0, "numerics"),
    ("big_s4096_d128_causal", "bf16", 1, 4096, 4096, 4, 4, 128, 1, 0, "numerics"),
]

# tag -> (kernel options, which cases: "all", "numerics", "timing", or a dh)
SCHEDULES = {"simple": "pp=0,ov=0", "ov": "pp=0,ov=1", "pp": "pp=1,ov=0", "full": "pp=1,ov=1"}


# ---- split-KV (--set skv) -----------------------------------------------------------------------
SKV_CASES = [
    ("skv_b1_q1_kv4096_d128", "bf16", 1, 1, 4096, 32, 32, 128, 0, 0, "numerics"),
    ("skv_b4_q1_kv16384_gqa_d128", "bf16", 4, 1, 16384, 32, 8, 128, 0, 0, "numerics"),
    ("skv_b8_q16_kv4097_gqa_d64_f16", "f16", 8, 16, 4097, 32, 8, 64, 0, 0, "numerics"),
    ("skv_b2_q64_kv1000_gqa_d128", "bf16", 2, 64, 1000, 32, 8, 128, 0, 0, "numerics"),
    ("skv_b3_q77_kv1000_d64_f16", "f16", 3, 77, 1000, 4, 4, 64, 0, 0, "numerics"),
    ("skv_b1_q1_kv64_d64", "bf16", 1, 1, 64, 8, 8, 64, 0, 0, "numerics"),
    ("skv_b1_q77_kv4096_d64_causal", "bf16", 1, 77, 4096, 8, 8, 64, 1, 0, "numerics"),
    ("skv_b2_q16_kv1000_gqa_d128_causal_f16", "f16", 2, 16, 1000, 32, 8, 128, 1, 0, "numerics"),
    ("skv_packed_b2_s1000_d64", "bf16", 2, 1000, 1000, 8, 8, 64, 0, 1, "numerics"),
    ("skv_packed_gqa_b1_s4097_d128_causal", "bf16", 1, 4097, 4097, 8, 2, 128, 1, 1, "numerics"),
    ("len_b4_q1_kv4096_gqa_d128", "bf16", 4, 1, 4096, 32, 8, 128, 0, 0, "numerics"),
    ("len_b3_q16_kv4097_d64_causal_f16", "f16", 3, 16, 4097, 8, 8, 64, 1, 0, "numerics"),
    ("mask_b2_q16_kv1000_gqa_d128", "bf16", 2, 16, 1000, 32, 8, 128, 0, 0, "numerics"),
    # grouped-query row packing (gp): causal Sq 16 over 4097 keys (rows see keys 0..i: 15 of 16
    # pieces empty), odd Sq (a last query tile of 13), group 6 (30 rows), group 128 (two head
    # chunks of 64, one query each), per-head mask rows, f16 lengths, packed qkv
    ("gp_b2_q16_kv4097_gqa_d128_causal", "bf16", 2, 16, 4097, 32, 8, 128, 1, 0, "numerics"),
    ("gp_b2_q77_kv1000_gqa_d64_causal", "bf16", 2, 77, 1000, 32, 8, 64, 1, 0, "numerics"),
    ("gp_b2_q5_kv1000_h12_2_d128_f16", "f16", 2, 5, 1000, 12, 2, 128, 0, 0, "numerics"),
    ("gp_b1_q3_kv999_h128_1_d64", "bf16", 1, 3, 999, 128, 1, 64, 0, 0, "numerics"),
    ("maskh_b2_q3_kv1000_gqa_d64_f16", "f16", 2, 3, 1000, 32, 8, 64, 0, 0, "numerics"),
    ("len_b3_q1_kv4097_gqa_d64_causal_f16", "f16", 3, 1, 4097, 32, 8, 64, 1, 0, "numerics"),
    ("skv_packed_gqa_b2_s77_d64_f16", "f16", 2, 77, 77, 16, 4, 64, 0, 1, "numerics"),
]
for b, sq, skv, hkv, dh in ((1, 1, 4096, 32, 128), (1, 1, 16384, 32, 128), (4, 1, 16384, 8, 128), (8, 1, 16384, 8, 128),
                            (8, 1, 4096, 32, 128), (1, 16, 16384, 32, 128), (4, 64, 4096, 8, 128),
                            (1, 1, 16384, 32, 64), (8, 1, 16384, 8, 64), (1, 64, 16384, 32, 64), (4, 16, 4096, 8, 64)):
    SKV_CASES.append(("dec_b%d_q%d_kv%d_h32_%d_d%d" % (b, sq, skv, hkv, dh), "bf16", b, sq, skv, 32, hkv, dh, 0, 0,
                      "timing"))
# the cases added for grouped-query row packing (fewer unpacked tags: the device script's 4 minutes)
SKV_GP_CASES = {c[0] for c in SKV_CASES if c[0].startswith(("gp_", "maskh_"))} | {
    "len_b3_q1_kv4097_gqa_d64_causal_f16", "skv_packed_gqa_b2_s77_d64_f16"}
# lengths of the len_ cases, per batch entry (clamped by the kernel: longer than Skv counts as Skv)
SKV_LENGTHS = {"len_b4_q1_kv4096_gqa_d128": [4096, 1000, 0, 1], "len_b3_q16_kv4097_d64_causal_f16": [77, 0, 5000],
               "len_b3_q1_kv4097_gqa_d64_causal_f16": [4097, 0, 3000]}


def skv_tags_for(case):
    """The split-KV packs of a case: tag -> hkc build options."""
    name, kind, sq, h, hkv = case[0], case[10], case[3], case[5], case[6]
    split = lambda n: ["--kernel-option", "attn_kvs=%d" % n, "--kernel-option", "attn_mma_cfg=4,64,2"]
    packed = lambda n, tile="4,64,2": ["--kernel-option", "attn_kvs=%d" % n, "--kernel-option", "attn_mma_cfg=%s,1,1" % tile]
    own = name in SKV_GP_CASES  # the packing's own cases: the packed tags, few others
    t = {"default": [], "kvs1": split(1)}
    if not own:
        t.update({"kvs2": split(2), "kvs4": split(4), "kvs8": split(8)})
    if not name.startswith(("len_", "mask_", "maskh_")):  # attention_tma alone (it takes no lengths or mask)
        t["tma"] = ["--kernel-option", "attn_tma=on"]
    if kind == "timing":
        t["kvs16"] = split(16)
    elif not own:
        t["kvs4w8"] = ["--kernel-option", "attn_kvs=4", "--kernel-option", "attn_mma_cfg=8,64,1"]
    if h > hkv:  # grouped-query row packing: gpN = gp=1 with N pieces
        if kind == "timing":
            for n in (2, 4, 8, 16):
                t["gp%d" % n] = packed(n)
        else:
            t["gp1"], t["gp4"] = packed(1), packed(4)
            if sq == 1 or (own and sq <= 16):
                t["gp16"] = packed(16)  # most pieces of few key tiles: empty ranges
            if own:
                t["gp2w8"] = packed(2, "8,64,1")  # 128-row packed tiles
    return t


def tags_for(case):
    """The packs of a case: tag -> hkc build options."""
    dh, kind = case[7], case[10]
    on = ["--kernel-option", "attn_tma=on"]  # attention_tma alone, in the configuration named
    t = {"default": [], "old": ["--kernel-option", "attn_tma=off"]}
    for tag, sched in SCHEDULES.items():  # the default tile in each schedule: bisecting
        t[tag] = on + ["--kernel-option", "attn_tma_cfg=wg=2,kv=128,st=2,%s,p=1" % sched]
    t["np"] = on + ["--kernel-option", "attn_tma_cfg=wg=2,kv=128,st=2,pp=1,ov=1,p=0"]  # one block per work tile
    t["wg1"] = on + ["--kernel-option", "attn_tma_cfg=wg=1,kv=64,st=2,pp=0,ov=1,p=1"]  # 64-row tiles, 2 blocks/SM
    t["kv64"] = on + ["--kernel-option", "attn_tma_cfg=wg=2,kv=64,st=3,pp=1,ov=1,p=1"]
    if dh == 64:
        t["wg3"] = on + ["--kernel-option", "attn_tma_cfg=wg=3,kv=128,st=2,pp=1,ov=1,p=1"]
        t["kv192"] = on + ["--kernel-option", "attn_tma_cfg=wg=2,kv=192,st=2,pp=1,ov=1,p=1"]
        t["wg1kv128"] = on + ["--kernel-option", "attn_tma_cfg=wg=1,kv=128,st=2,pp=0,ov=1,p=1"]
    else:
        t["ovst3"] = on + ["--kernel-option", "attn_tma_cfg=wg=2,kv=128,st=3,pp=0,ov=1,p=1"]
        t["wg3"] = on + ["--kernel-option", "attn_tma_cfg=wg=3,kv=64,st=2,pp=1,ov=1,p=1"]
    if kind == "numerics":  # the schedules with other tiles too (they share the kernel's code paths)
        t["simple_wg3"] = on + ["--kernel-option", "attn_tma_cfg=wg=3,kv=64,st=2,pp=0,ov=0,p=1"]
    return t


def spec_text(name, dt, b, sq, skv, h, hkv, dh, causal, packed, kind):
    lines = ["hkc: 1", "name: %s" % name, "dtype: %s" % dt, "batch_sizes: [1]"]
    flags = ", causal: true" if causal else ""
    if packed:
        assert sq == skv
        lines += ["inputs: {qkv: [%d, %d, %d]}" % (b, sq, (h + 2 * hkv) * dh), "graph:",
                  "  - {name: a, op: attention, in: [qkv], heads: %d, kv_heads: %d%s, out: y}" % (h, hkv, flags)]
    else:
        extra = ""
        if name.startswith("len_"):
            extra, flags = ", len: {shape: [%d], dtype: i32}" % b, flags + ", lengths: len"
        elif name.startswith("mask_"):
            extra, flags = ", m: [%d, 1, %d, %d]" % (b, sq, skv), flags + ", mask: m"
        elif name.startswith("maskh_"):  # a mask row per query head
            extra, flags = ", m: [%d, %d, %d, %d]" % (b, h, sq, skv), flags + ", mask: m"
        lines += ["inputs: {q: [%d, %d, %d], k: [%d, %d, %d], v: [%d, %d, %d]%s}"
                  % (b, sq, h * dh, b, skv, hkv * dh, b, skv, hkv * dh, extra), "graph:",
                  "  - {name: a, op: attention, in: [q, k, v], heads: %d, kv_heads: %d%s, out: y}" % (h, hkv, flags)]
    return "\n".join(lines + ["outputs: [y]", ""])


def prepare(args):
    os.makedirs(DIR, exist_ok=True)
    for f in glob.glob(os.path.join(DIR, "*")):
        os.remove(f)
    hkc = os.path.join(ROOT, "build-dev", "hkc")
    index = {}
    for case in CASES:
        if args.only and not re.search(args.only, case[0]):
            continue
        yaml_path = os.path.join(DIR, case[0] + ".yaml")
        with open(yaml_path, "w") as f:
            f.write(spec_text(*case))
        built = []
        for tag, extra in tags_for(case).items():
            out = os.path.join(DIR, "%s__%s.hkpack" % (case[0], tag))
            cmd = [hkc, "build", yaml_path, "--target", "sm_90a", "-q", "-o", out] + args.build_flags.split() + extra
            r = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
            if r.returncode != 0:
                sys.exit("hkc build failed for %s %s:\n%s" % (case[0], tag, r.stderr))
            ins = subprocess.run([hkc, "inspect", out], capture_output=True, text=True).stdout
            kern = re.search(r"^  (hk_attention\S*) .*kernel=(\S+)(?: cfg=(\S+))?", ins, re.M)
            built.append(tag)
            index.setdefault(case[0], {})[tag] = {"options": extra, "kernel": kern.group(2) if kern else "?",
                                                  "cfg": kern.group(3) if kern and kern.group(3) else ""}
        print("prepared %-32s %s" % (case[0], " ".join(built)), flush=True)
    with open(os.path.join(DIR, "tags.json"), "w") as f:
        json.dump(index, f, indent=1)


# ---- the GPU side ------------------------------------------------------------------------------
def make_inputs(torch, case, gen, dt):
    name, _, b, sq, skv, h, hkv, dh, causal, packed, _ = case
    dev = "cuda"
    if packed:
        qkv = (torch.rand(b, sq, (h + 2 * hkv) * dh, generator=gen, device=dev) * 2 - 1).to(dt)
        return {"qkv": qkv}
    t = {"q": (torch.rand(b, sq, h * dh, generator=gen, device=dev) * 2 - 1).to(dt),
         "k": (torch.rand(b, skv, hkv * dh, generator=gen, device=dev) * 2 - 1).to(dt),
         "v": (torch.rand(b, skv, hkv * dh, generator=gen, device=dev) * 2 - 1).to(dt)}
    if name.startswith("tailnan"):  # the second sequence's first rows: not finite
        t["k"][1, :64] = float("nan")
        t["v"][1, :64] = float("inf")
    if name in SKV_LENGTHS:
        t["len"] = torch.tensor(SKV_LENGTHS[name], dtype=torch.int32, device=dev)
    if name.startswith(("mask_", "maskh_")):  # additive, in [-4, 0], a few keys masked out by -inf
        m = (torch.rand(b, h if name.startswith("maskh_") else 1, sq, skv, generator=gen, device=dev) * -4)
        m[m < -3.9] = float("-inf")
        t["m"] = m.to(dt)
    return t


def qkv_views(case, t):
    """q, k, v as [B, H, S, dh] views of the bound tensors (no copy)."""
    _, _, b, sq, skv, h, hkv, dh, _, packed, _ = case
    if packed:
        q, k, v = t["qkv"].split([h * dh, hkv * dh, hkv * dh], dim=-1)
    else:
        q, k, v = t["q"], t["k"], t["v"]
    return (q.unflatten(-1, (h, dh)).transpose(1, 2), k.unflatten(-1, (hkv, dh)).transpose(1, 2),
            v.unflatten(-1, (hkv, dh)).transpose(1, 2))


def sdpa(torch, case, t):
    import torch.nn.functional as F
    causal, h, hkv = case[8], case[5], case[6]
    q, k, v = qkv_views(case, t)
    if h != hkv:
        try:
            return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal), enable_gqa=True)
        except TypeError:  # torch < 2.5: no enable_gqa
            k, v = k.repeat_interleave(h // hkv, dim=1), v.repeat_interleave(h // hkv, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))


def reference(torch, case, t):
    """float64 softmax(q k^T / sqrt(dh)) v, causal top-left, [B, Sq, H dh]."""
    _, _, b, sq, skv, h, hkv, dh, causal, _, _ = case
    q, k, v = (x.double() for x in qkv_views(case, t))
    k, v = k.repeat_interleave(h // hkv, dim=1), v.repeat_interleave(h // hkv, dim=1)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
    if "m" in t:
        s = s + t["m"].double()
    if causal:
        s = s.masked_fill(torch.ones(sq, skv, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    if "len" in t:  # keys j >= len[b] masked
        keep = torch.arange(skv, device=s.device)[None, :] < t["len"].clamp(0, skv).long()[:, None]
        s = s.masked_fill(~keep[:, None, None, :], float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row with no key: zeros
    o = p @ v
    return o.transpose(1, 2).reshape(b, sq, h * dh)


def rel(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


class Watchdog:
    """Ends the process with 'HANG <label>' when `arm`ed longer than `seconds`."""

    def __init__(self, seconds):
        self.seconds, self.timer = seconds, None

    def arm(self, label):
        self.disarm()
        self.timer = threading.Timer(self.seconds, self._fire, [label])
        self.timer.daemon = True
        self.timer.start()

    def disarm(self):
        if self.timer:
            self.timer.cancel()
        self.timer = None

    def _fire(self, label):
        print("HANG %s (no completion within %d s)" % (label, self.seconds), flush=True)
        os._exit(3)


def check_context(torch, label):
    """After a failed run: when the CUDA context is broken (a fault is sticky), end the process
    with 'FAULT <label>' (exit 4) so that the device script reruns the step without the tag."""
    try:
        torch.cuda.synchronize()
    except Exception as e:
        print("FAULT %s (%s)" % (label, str(e)[:200]), flush=True)
        os._exit(4)


def packs_of(name, skip_tags):
    out = []
    for p in sorted(glob.glob(os.path.join(DIR, name + "__*.hkpack"))):
        tag = os.path.basename(p)[len(name) + 2:-len(".hkpack")]
        if tag not in skip_tags:
            out.append((tag, p))
    return out


def numerics(args):
    import torch
    sys.path.insert(0, HERE)
    from hkrt_load import open_session
    dts = {"bf16": torch.bfloat16, "f16": torch.float16}
    dog = Watchdog(args.hang_s)
    bad = json.load(open(args.bad)) if args.bad and os.path.exists(args.bad) else {}
    skip = set(args.skip_tags.split(",")) if args.skip_tags else set()
    out = open(args.out, "a") if args.out else None
    print("GPU %s, torch %s" % (torch.cuda.get_device_name(), torch.__version__))
    print("%-30s %-10s %-16s %9s %9s  %s" % ("case", "tag", "kernel", "err", "sdpa err", ""), flush=True)
    fails = 0
    index = json.load(open(os.path.join(DIR, "tags.json")))
    for case in CASES:
        name = case[0]
        if args.only and not re.search(args.only, name):
            continue
        packs = packs_of(name, skip) if case[10] == "numerics" else []
        if not packs:
            continue
        dt = dts[case[1]]
        gen = torch.Generator(device="cuda").manual_seed(7)
        t = make_inputs(torch, case, gen, dt)
        first = slice(0, 1) if name.startswith("tailnan") else slice(None)
        expect = reference(torch, case, t)[first]
        if "len" in t or "m" in t:  # SDPA takes neither lengths nor empty rows: the rounded reference
            peer = expect.to(dt)
        else:
            peer = sdpa(torch, case, t).transpose(1, 2).reshape(case[2], case[3], -1)
        sdpa_err = rel(peer[first], expect)
        for tag, pack in packs:
            y = torch.full((case[2], case[3], case[5] * case[7]), float("nan"), dtype=dt, device="cuda")
            try:
                p, s = open_session(pack, 1, launch_mode="stream")
                try:
                    for k, v in t.items():
                        s.bind(k, v)
                    s.bind("y", y)
                    dog.arm("%s__%s" % (name, tag))
                    s.run(torch.cuda.current_stream().cuda_stream)
                    torch.cuda.synchronize()
                    dog.disarm()
                    same = None
                    if args.twice:  # a second run into a fresh poisoned buffer: the same bytes
                        y2 = torch.full_like(y, float("nan"))
                        s.bind("y", y2)
                        dog.arm("%s__%s" % (name, tag))
                        s.run(torch.cuda.current_stream().cuda_stream)
                        torch.cuda.synchronize()
                        dog.disarm()
                        same = bool(torch.equal(y.view(torch.int16), y2.view(torch.int16)))
                        del y2
                finally:
                    s.close()
                    p.close()
            except Exception as e:  # a failed launch or session: reported, the other packs still run
                dog.disarm()
                check_context(torch, "%s__%s" % (name, tag))
                fails += 1
                bad.setdefault(tag, []).append(name)
                print("%-30s %-10s ERROR %s" % (name, tag, str(e)[:300]), flush=True)
                continue
            got = y[first]
            err = rel(got, expect)
            unwritten = int(torch.isnan(got).any(dim=-1).sum().item())
            ok = math.isfinite(err) and err <= 2 * sdpa_err + (2e-3 if case[1] == "bf16" else 1e-3) and unwritten == 0
            ok = ok and same is not False
            if not ok:
                fails += 1
                bad.setdefault(tag, []).append(name)
            kern = index.get(name, {}).get(tag, {}).get("kernel", "?")
            print("%-30s %-10s %-16s %9.2e %9.2e  %s" % (name, tag, kern, err, sdpa_err,
                  "ok" if ok else "NUMERICS FAIL (%d rows not finite%s)" % (
                      unwritten, ", two runs differ" if same is False else "")), flush=True)
            if out:
                out.write(json.dumps({"case": name, "tag": tag, "kernel": kern, "err": err, "sdpa_err": sdpa_err,
                                      "ok": ok, "nonfinite_rows": unwritten, "same_twice": same}) + "\n")
                out.flush()
        del t, expect, peer
        torch.cuda.empty_cache()
    if args.bad:
        json.dump(bad, open(args.bad, "w"))
    print("numerics: %d failure(s)" % fails)
    return 1 if fails else 0


def timing(args):
    import torch
    sys.path.insert(0, HERE)
    from hkrt_load import open_session
    dts = {"bf16": torch.bfloat16, "f16": torch.float16}
    dog = Watchdog(args.hang_s)
    bad = json.load(open(args.bad)) if args.bad and os.path.exists(args.bad) else {}
    skip = set(bad) | (set(args.skip_tags.split(",")) if args.skip_tags else set())
    out = open(args.out, "a") if args.out else None
    index = json.load(open(os.path.join(DIR, "tags.json")))
    print("GPU %s, torch %s; skipped tags (numerics): %s" % (torch.cuda.get_device_name(), torch.__version__,
                                                            ",".join(sorted(skip)) or "none"))
    print("%-26s %-10s %-16s %9s %9s %8s %8s %7s %9s" % ("case", "tag", "kernel", "hkc us", "sdpa us", "hkc TF",
                                                          "sdpa TF", "ratio", "err/sdpa"), flush=True)
    summary = []
    for case in CASES:
        name, dtn, b, sq, skv, h, hkv, dh, causal, packed, kind = case
        if kind != "timing" or (args.only and not re.search(args.only, name)):
            continue
        packs = packs_of(name, skip)
        if not packs:
            continue
        dt = dts[dtn]
        per = 2 * (b * sq * h * dh * 2 + 2 * b * skv * hkv * dh)  # bytes of q, k, v and y
        R = max(2, min(64, math.ceil(3 * L2_BYTES / per)))
        gen = torch.Generator(device="cuda").manual_seed(3)
        sets = [make_inputs(torch, case, gen, dt) for _ in range(R)]
        ys = [torch.empty(b, sq, h * dh, dtype=dt, device="cuda") for _ in range(R)]
        flops = 4.0 * b * h * sq * skv * dh / (2 if causal else 1)
        peer0 = sdpa(torch, case, sets[0]).transpose(1, 2).reshape(b, sq, h * dh)
        dog.arm("sdpa " + name)
        sdpa_us = capture_time(torch, lambda i: sdpa(torch, case, sets[i]), R, args.reps)
        dog.disarm()
        row = {"case": name, "sdpa_us": sdpa_us, "tags": {}}
        for tag, pack in packs:
            try:
                p, s = open_session(pack, 1, launch_mode="stream")
                try:
                    def hk(i):
                        for k, v in sets[i].items():
                            s.bind(k, v)
                        s.bind("y", ys[i])
                        s.run(torch.cuda.current_stream().cuda_stream)
                    ys[0].fill_(float("nan"))
                    dog.arm("%s__%s" % (name, tag))
                    hk(0)
                    torch.cuda.synchronize()
                    err = rel(ys[0], peer0.double())
                    us = capture_time(torch, hk, R, args.reps)
                    dog.disarm()
                finally:
                    s.close()
                    p.close()
            except Exception as e:  # reported; the other packs still run
                dog.disarm()
                check_context(torch, "%s__%s" % (name, tag))
                print("%-26s %-10s ERROR %s" % (name, tag, str(e)[:300]), flush=True)
                continue
            kern = index.get(name, {}).get(tag, {}).get("kernel", "?")
            ok = math.isfinite(err) and err < (2e-2 if dtn == "bf16" else 5e-3)
            row["tags"][tag] = {"us": us, "err": err, "ok": ok, "kernel": kern,
                                "cfg": index.get(name, {}).get(tag, {}).get("cfg", "")}
            print("%-26s %-10s %-16s %9.2f %9.2f %8.1f %8.1f %7.3f %9.2e%s" % (
                name, tag, kern, us, sdpa_us, flops / us / 1e6, flops / sdpa_us / 1e6, sdpa_us / us, err,
                "" if ok else "  OUTPUT DIFFERS FROM SDPA"), flush=True)
            if out:
                out.write(json.dumps({"case": name, "tag": tag, "kernel": kern, "hkc_us": us, "sdpa_us": sdpa_us,
                                      "ratio": sdpa_us / us, "hkc_tflops": flops / us / 1e6,
                                      "sdpa_tflops": flops / sdpa_us / 1e6, "err_vs_sdpa": err, "ok": ok, "R": R,
                                      "cfg": row["tags"][tag]["cfg"]}) + "\n")
                out.flush()
        summary.append(row)
        del sets, ys, peer0
        torch.cuda.empty_cache()
    # the bar table: per case SDPA, hkc's default pack, the best attention_tma tag, old
    print("\n%-26s %9s %9s %7s %-10s %9s %7s %9s %7s" % ("case", "sdpa us", "default", "ratio", "best tag", "best us",
                                                          "ratio", OLD_TAG + " us", "ratio"))
    ratios = {"default": [], "best": []}
    for row in summary:
        tg = row["tags"]
        d = tg.get("default")
        tma = {k: v for k, v in tg.items() if v["kernel"] == BEST_KERNEL and v["ok"]}
        best = min(tma, key=lambda k: tma[k]["us"]) if tma else None
        o = tg.get(OLD_TAG)
        f = lambda x: ("%9.2f %7.3f" % (x["us"], row["sdpa_us"] / x["us"])) if x else "%9s %7s" % ("-", "-")
        print("%-26s %9.2f %s %-10s %s %s" % (row["case"], row["sdpa_us"], f(d), best or "-", f(tg.get(best)), f(o)))
        if d and d["ok"]:
            ratios["default"].append(row["sdpa_us"] / d["us"])
        if best:
            ratios["best"].append(row["sdpa_us"] / tg[best]["us"])
    for k, v in ratios.items():
        if v:
            print("geomean hkc/sdpa (%s): %.3f over %d cases" % (k, math.exp(sum(map(math.log, v)) / len(v)), len(v)))
    return 0


def tuning_db(args):
    """Tuning-database entries (docs/TUNING.md format) from a timing run: per timing case, the
    attention_tma tag that was fastest, when it beat the build's default by more than --margin
    (noise between replays of one case is about 1-2%) and passed numerics (not in --bad)."""
    bad = set(json.load(open(args.bad))) if args.bad and os.path.exists(args.bad) else set()  # tags that failed
    rows = [json.loads(line) for line in open(getattr(args, "from"))]
    cases = {c[0]: c for c in CASES}
    out = []
    for name in sorted({r["case"] for r in rows}):
        rs = [r for r in rows if r["case"] == name and r.get("ok", True)]
        default = next((r for r in rs if r["tag"] == "default"), None)
        cands = [r for r in rs if r["kernel"] == "attention_tma" and r["tag"] not in bad and r.get("cfg")]
        if not default or not cands or name not in cases:
            continue
        best = min(cands, key=lambda r: r["hkc_us"])
        if best["cfg"] == default.get("cfg") or best["hkc_us"] * (1 + args.margin) >= default["hkc_us"]:
            continue
        _, dt, b, sq, skv, h, hkv, dh, causal, _, _ = cases[name]
        sig = "attention %s b=%d h=%d kvh=%d sq=%d skv=%d d=%d%s" % (dt, b, h, hkv, sq, skv, dh, " causal" if causal else "")
        out.append("sm_90a | 132 | %s | %s | attention_tma | %s | %.2f us" % (args.toolchain, sig, best["cfg"], best["hkc_us"]))
    print("# hkc tuning database (docs/TUNING.md): attention_tma, from bench/lib/attn_bars.py timing (%s)"
          % os.path.basename(getattr(args, "from")))
    print("# target | units | toolchain | signature | variant | params | time")
    for line in out:
        print(line)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["prepare", "numerics", "timing", "db"])
    p.add_argument("--from", help="db: the timing run's JSON lines")
    p.add_argument("--margin", type=float, default=0.02, help="db: how much faster than the default a tag must be")
    p.add_argument("--toolchain", default="nvrtc 13.0", help="db: the toolchain field (hkc's nvrtc on both machines)")
    p.add_argument("--only", help="regex over case names")
    p.add_argument("--build-flags", default="--tuning-db specs/tuning/h200.db", help="prepare: extra hkc build flags")
    p.add_argument("--out", help="append JSON lines here")
    p.add_argument("--bad", help="numerics writes / timing reads: JSON of the tags that failed or hung")
    p.add_argument("--skip-tags", help="','-separated tags not to run")
    p.add_argument("--hang-s", type=int, default=30, help="watchdog: seconds a run may take")
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--set", choices=["attn", "skv"], default="attn", help="the cases: attention_tma's, or split-KV's")
    p.add_argument("--twice", action="store_true", help="numerics: run each pack twice, the same bytes expected")
    args = p.parse_args()
    os.chdir(ROOT)
    if args.set == "skv":
        global CASES, DIR, tags_for, BEST_KERNEL, OLD_TAG
        CASES, DIR, tags_for = SKV_CASES, os.path.join(ROOT, "build-dev", "bench", "skv"), skv_tags_for
        BEST_KERNEL, OLD_TAG = "attention_mma", "tma"
        if args.mode == "db":
            sys.exit("db: attention_tma entries only (--set attn)")
    if args.mode == "prepare":
        prepare(args)
        return 0
    if args.mode == "db":
        return tuning_db(args)
    return numerics(args) if args.mode == "numerics" else timing(args)


if __name__ == "__main__":
    sys.exit(main())
