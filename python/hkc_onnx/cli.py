# SPDX-License-Identifier: Apache-2.0
"""The command line of hkc import onnx: options, then load, import, write; every error one line
`error: ...` (one per node that cannot be mapped), exit 1; usage errors exit 2 (docs/CLI.md)."""
import argparse
import os
import re
import sys

import numpy as np

from .graph import batch_axes, load_model, pin_dims, rows_2d_inputs
from .importer import Importer
from .spec import sanitize, spec_yaml, write_safetensors, write_text
from .values import ImportError_, Refused, fail


class ArgParser(argparse.ArgumentParser):
    def error(self, message):  # one line and exit status 2, a usage error (docs/CLI.md), as hf's
        print("%s: error: %s (see --help)" % (self.prog, message), file=sys.stderr)
        sys.exit(2)


def parse_args(argv):
    ap = ArgParser(prog="hkc import onnx", description="Import an ONNX model (torch.onnx.export of a BERT-, "
                   "GPT-2- or Llama-style block, nn.TransformerEncoderLayer, nn.MultiheadAttention, nn.Linear) as an "
                   "hkc spec and a safetensors file of its params (docs/IMPORT.md).")
    ap.add_argument("model")
    ap.add_argument("-o", "--output", required=True, help="the spec to write (YAML)")
    ap.add_argument("--weights-out", required=True, help="the safetensors file to write")
    ap.add_argument("--name", help="the spec's name (default: the model file's stem)")
    ap.add_argument("--batch-sizes", default="1,8")
    ap.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    ap.add_argument("--padding-mask-as", default="lengths", choices=["lengths", "mask"],
                    help="a [batch, seq] attention mask input becomes an i32 [batch] lengths input (right padding "
                         "assumed) or a [batch, 1, seq, seq] additive mask input (any pattern)")
    ap.add_argument("--seq", metavar="N", help="pin the inputs' symbolic seq dims (dynamic_axes {1: 'seq'}) to N")
    ap.add_argument("--dim", action="append", default=[], metavar="NAME=N",
                    help="pin the inputs' symbolic dim NAME to N (repeatable)")
    ap.add_argument("--seq-first", action="store_true",
                    help="the 3-D float inputs are [seq, batch, hidden] (nn.Transformer's default batch_first=False; "
                         "found without it when their axis 1 is named like 'batch')")
    return ap.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    np.seterr(all="ignore")  # folding finfo.min + finfo.min overflows to -inf, as the model does
    pinned = ""
    try:
        try:
            batch_sizes = sorted({int(b) for b in args.batch_sizes.split(",")})
            if not batch_sizes or batch_sizes[0] < 1:
                raise ValueError
        except ValueError:
            fail("--batch-sizes must be a comma-separated list of positive integers, not '%s'" % args.batch_sizes)
        seq, dims = None, {}
        if args.seq is not None:
            if not re.fullmatch(r"[0-9]+", args.seq) or int(args.seq) < 1:
                fail("--seq must be a positive integer, not '%s'" % args.seq)
            seq = int(args.seq)
        for d in args.dim:
            m = re.fullmatch(r"([^=]+)=([0-9]+)", d)
            if not m or int(m.group(2)) < 1:
                fail("--dim must be NAME=N with N a positive integer, not '%s'" % d)
            if dims.get(m.group(1), int(m.group(2))) != int(m.group(2)):
                fail("--dim %s given twice with different values" % m.group(1))
            dims[m.group(1)] = int(m.group(2))
        name = args.name or sanitize(os.path.splitext(os.path.basename(args.model))[0])
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,255}", name):
            fail("--name '%s': letters, digits, '_', '-', '.' only" % name)
        model = load_model(args.model)
        baxes = batch_axes(model, args.seq_first)
        pinned = pin_dims(model, seq, dims, baxes)
        imp = Importer(model, args.padding_mask_as, baxes, rows_2d_inputs(model))
        imp.run()
        spec = spec_yaml(imp, name, batch_sizes, args.dtype)
        write_safetensors(args.weights_out, imp.params, imp.param_origin, args.dtype)
        write_text(args.output, spec)
    except ImportError_ as e:
        # a graph that needs another size (a Reshape to a size frozen by the export, ...): the pins repeated
        suffix = " (with %s pinned)" % pinned if pinned else ""
        for msg in (e.msgs if isinstance(e, Refused) else [str(e)]):
            print("error: %s%s" % (msg, suffix), file=sys.stderr)
        return 1
    except OSError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    print("%s: %d nodes, %d params -> %s, %s" % (args.model, len(imp.nodes), len(imp.params), args.output,
                                                 args.weights_out))
    return 0
