# SPDX-License-Identifier: Apache-2.0
"""Writing the result: the spec (YAML, docs/SPEC.md) and the safetensors file of its params
(docs/WEIGHTS.md), both with NumPy and the standard library only."""
import json
import os
import re
import struct

import numpy as np

# the order of a graph node's keys in the spec
KEY_ORDER = ["name", "op", "in", "trans_b", "bias", "act", "mul", "residual", "gamma", "beta", "eps", "heads",
             "kv_heads", "causal", "scale", "lengths", "mask", "theta", "pos", "out"]


def sanitize(name):
    s = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")
    s = re.sub(r"_+", "_", s)
    if not s or not re.match(r"[A-Za-z_]", s[0]):
        s = "t_" + s
    if s == "batch":
        s = "batch_"
    return s[:200]


def spec_yaml(imp, name, batch_sizes, dtype):
    """The spec of an importer that has run (core.Core.run)."""
    def shape(r):
        return "[" + ", ".join(["batch"] + [str(d) for d in r]) + "]"

    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, float):
            return repr(v) if "e" in repr(v) or "." in repr(v) else repr(v) + ".0"
        if isinstance(v, list):
            return "[" + ", ".join(v) + "]"
        return str(v)

    lines = ["# Imported from ONNX by hkc import onnx (python/hkc_onnx/; docs/IMPORT.md).",
             "# Params are the ONNX initializers (names sanitized; the weights file's",
             "# __metadata__ maps each to its ONNX name).",
             "hkc: 1", "name: %s" % name, "dtype: %s" % dtype,
             "batch_sizes: [%s]" % ", ".join(map(str, batch_sizes)), "targets: [host]", "inputs:"]
    for k, r in imp.inputs.items():
        note = "  # " + imp.input_note[k] if k in imp.input_note else ""
        if k in imp.input_dtype:
            lines.append("  %s: {shape: %s, dtype: %s}%s" % (k, shape(r), imp.input_dtype[k], note))
        else:
            lines.append("  %s: %s%s" % (k, shape(r), note))
    if imp.params:
        lines.append("params:")
        for k, v in imp.params.items():
            lines.append("  %s: [%s]%s" % (k, ", ".join(map(str, v.shape)),
                                            "  # " + imp.param_origin[k] if imp.param_origin[k] != k else ""))
    lines.append("graph:")
    for node in imp.nodes:
        items = ["%s: %s" % (k, val(node[k])) for k in KEY_ORDER if k in node]
        lines.append("  - {%s}" % ", ".join(items))
    for k in imp.outputs:
        if k in imp.output_note:
            lines.append("# output %s: %s" % (k, imp.output_note[k]))
    lines.append("outputs: [%s]" % ", ".join(imp.outputs))
    lines.append("fusion: auto")
    return "\n".join(lines) + "\n"


def to_dtype_bytes(arr, dtype):
    a = np.ascontiguousarray(arr, np.float32)
    if dtype == "f32":
        return "F32", a.astype("<f4").tobytes()
    if dtype == "f16":
        return "F16", a.astype("<f2").tobytes()
    u = a.view(np.uint32).astype(np.uint64)
    u = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2")
    return "BF16", u.tobytes()


def write_safetensors(path, params, origins, dtype):
    header, blobs, at = {}, [], 0
    for name, arr in params.items():
        st, raw = to_dtype_bytes(arr, dtype)
        header[name] = {"dtype": st, "shape": list(arr.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    header["__metadata__"] = {"format": "hkc", "source": "onnx",
                              "onnx_names": json.dumps({k: origins[k] for k in params})}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(tmp, path)


def write_text(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
