# SPDX-License-Identifier: Apache-2.0
"""The benchmarks' access to libhkrt: the hkrt Python package (python/hkrt, what applications
use), loaded from the library the benchmarks were built with ($HKRT_LIB, else build-dev/).

    from hkrt_load import hkrt, open_session
    pack, s = open_session("x.hkpack", batch=8, launch_mode="stream")
"""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import hkrt  # noqa: E402  (python/hkrt)


def library_path(path=None):
    return path or os.environ.get("HKRT_LIB") or os.path.join(ROOT, "build-dev", "libhkrt.so")


_loaded = None


def load(path=None):
    """Loads libhkrt once (path, $HKRT_LIB or build-dev/libhkrt.so) and returns its ctypes CDLL;
    later calls without a path return the library already loaded."""
    global _loaded
    if _loaded is None or path is not None:
        hkrt.load_library(library_path(path))
        from hkrt import _lib
        _loaded = _lib.load()[0]
    return _loaded


def open_session(pack_path, batch, target=None, launch_mode="auto", no_pdl=False):
    """(Pack, Session) of a pack the benchmarks built themselves (unsigned; host code allowed).
    Close the session, then the pack."""
    load()
    pack = hkrt.Pack.open(pack_path, allow_unsigned_native_code=True)
    try:
        return pack, pack.session(batch=batch, target=target, launch_mode=launch_mode, no_pdl=no_pdl)
    except Exception:
        pack.close()
        raise
