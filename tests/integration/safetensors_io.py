# SPDX-License-Identifier: Apache-2.0
"""safetensors files for the integration tests, by hand (u64 little-endian header length, the JSON
header padded with spaces to 8 bytes, then each tensor's bytes): written from storage arrays of
any dtype, read back as float64 values (F32, F16, BF16, I8, F8_E4M3: what `hkc quantize` and
the tests write), with the float8 e4m3fn table the 8-bit checks use."""
import json
import math

import numpy as np


def fp8_e4m3_values():
    """The 256 values of float8 e4m3fn by bit pattern: (8 + m) 2^(e - 10) for exponent field e in
    1..15, m 2^-9 for e = 0; S.1111.111 is NaN."""
    v = np.array([math.nan if (b & 0x7f) == 0x7f else
                  ((8 + (b & 7)) * 2.0 ** (((b >> 3) & 15) - 10) if (b >> 3) & 15 else (b & 7) * 2.0 ** -9)
                  for b in range(256)])
    v[128:] *= -1
    return v


def write(path, tensors):
    """{name: (safetensors dtype, array holding that dtype's storage)} as a file, in order."""
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (dtype, a) in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(np.shape(a)), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def read(path):
    """{name: (dtype, float64 values, raw bytes)} of a file."""
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        raw = data[8 + n + e["data_offsets"][0]:8 + n + e["data_offsets"][1]]
        dt = e["dtype"]
        if dt == "F32":
            a = np.frombuffer(raw, "<f4").astype(np.float64)
        elif dt == "F16":
            a = np.frombuffer(raw, "<f2").astype(np.float64)
        elif dt == "BF16":
            a = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif dt == "I8":
            a = np.frombuffer(raw, np.int8).astype(np.float64)
        elif dt == "F8_E4M3":
            a = fp8_e4m3_values()[np.frombuffer(raw, np.uint8)]
        else:
            raise ValueError("%s: dtype %s" % (name, dt))
        out[name] = (dt, a.reshape(e["shape"]), raw)
    return out
