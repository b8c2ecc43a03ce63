# SPDX-License-Identifier: Apache-2.0
"""hkrt: Python bindings of libhkrt, the runtime that replays .hkpack artifacts built by hkc.

Pure Python over ctypes; the C API is loader/include/hk/hkrt.h and this module follows it
(docs/PYTHON.md is the guide):

    import numpy as np, hkrt
    with hkrt.Pack.open("model.hkpack", trusted_keys=["key.pub"]) as pack:   # and your own key
        with pack.session() as sess:
            y = sess.run(x=x)["y"]             # binds, picks the batch from x, runs, returns outputs
            for t in sess.tensors:             # TensorInfo(name, role, dtype, shape, bytes)
                ...
            sess.bind("x", x)                  # or step by step; GPU targets: torch/CuPy/DLPack
            sess.run()
            y = sess.outputs()["y"]            # host target: every output, as NumPy arrays

bfloat16: float32 arrays are converted (round to nearest even); outputs are
ml_dtypes.bfloat16 arrays when ml_dtypes imports, else uint16 arrays of the raw bits.
Every failure raises hkrt.Error (a subclass per status: hkrt.NotFound, hkrt.Untrusted, ...)
carrying .status, .status_name and .message (hk_last_error()'s text). A pack and its sessions
are used by one thread at a time (hkrt.h, "Threads"). The library is found as _lib.py says
(load_library(path) or HKRT_LIBRARY, the wheel's hkrt/_libs/, the cmake --install prefix, the
linker's paths, the prefix of the hkc on PATH, a source checkout's build tree).
"""
from ._pack import (Pack, Session, Generator, TensorInfo, LaunchProfile, Signature, public_key, user_key_path,
                    user_public_key)
from ._lib import HK_PUBLIC_KEY_BYTES
from .errors import (Error, InvalidArgument, NotFound, Corrupt, UnsupportedVersion, Unavailable, OutOfMemory,
                     IOFailure, NoCompatibleTarget, DriverError, FailedPrecondition, InternalError, Busy,
                     Untrusted)

__all__ = ["Pack", "Session", "Generator", "TensorInfo", "LaunchProfile", "Signature", "public_key", "user_key_path",
           "user_public_key", "HK_PUBLIC_KEY_BYTES",
           "Error", "InvalidArgument", "NotFound", "Corrupt", "UnsupportedVersion", "Unavailable", "OutOfMemory",
           "IOFailure", "NoCompatibleTarget", "DriverError", "FailedPrecondition", "InternalError", "Busy",
           "Untrusted", "load_library", "version"]
__version__ = "0.4.3"  # the libhkrt version these bindings were written with (hkrt.h HKRT_VERSION_*)


def load_library(path=None):
    """Loads libhkrt (from `path` if given, which must then come before any other call) and
    returns the path it was loaded from. Other functions call it on first use."""
    from . import _lib
    return _lib.load(path)[1]


def version():
    """The version of the loaded libhkrt, "MAJOR.MINOR.PATCH" (hk_version())."""
    from . import _lib
    return _lib.load()[0].hk_version().decode()
