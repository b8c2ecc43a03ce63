# SPDX-License-Identifier: Apache-2.0
"""Finding libhkrt and declaring its C functions (loader/include/hk/hkrt.h) for ctypes.

The library is looked for, first match wins:
  1. the path given to hkrt.load_library(path), or the environment variable HKRT_LIBRARY
     (when set, nothing else is tried);
  2. inside the package: hkrt/_libs/libhkrt.so.N, the copy a wheel carries (scripts/build_wheel.py;
     the other libraries in _libs/, libhkrt's own dependencies, are loaded first), then a
     libhkrt.so* in the package folder itself;
  3. the install prefix the package was installed into by `cmake --install` (P/lib/python3/
     dist-packages/hkrt -> P/lib/libhkrt.so.N: the relative path is in _install_paths.py);
  4. ctypes.util.find_library("hkrt") (the system's linker paths, ldconfig);
  5. the prefix of the `hkc` found on PATH (P/bin/hkc -> P/lib*/libhkrt.so.N), for a package
     pip-installed apart from an installed hkc;
  6. the build trees of a source checkout (build/, build-dev/ beside python/), for development.
hkrt.Unavailable, raised when none loads, names every path tried and why it failed.
"""
import ctypes
import ctypes.util
import glob
import os
import shutil
import threading

_HERE = os.path.dirname(os.path.abspath(__file__))
_lock = threading.Lock()
_loaded = None  # (CDLL, path)

HK_TENSOR_MAX_RANK = 6
HK_PUBLIC_KEY_BYTES = 32

_vp, _cp, _u32, _u64, _sz = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t
_int, _status = ctypes.c_int, ctypes.c_int


class TensorInfoC(ctypes.Structure):  # hk_tensor_info_t
    _fields_ = [("name", _cp), ("role", _int), ("element_type", _int), ("rank", _u32),
                ("dims", ctypes.c_int64 * HK_TENSOR_MAX_RANK), ("bytes", _sz)]


class SessionOptionsC(ctypes.Structure):  # hk_session_options_t
    _fields_ = [("struct_size", _u32), ("batch", _u64), ("target", _cp), ("device", _int),
                ("launch_mode", _int), ("host_threads", _u32), ("reserved0", _u32), ("no_pdl", _u32),
                ("reserved1", _u32), ("prefer_ptx", _u32), ("reserved2", _u32), ("no_pack_weights", _u32)]


class WeightsNameC(ctypes.Structure):  # hk_weights_name_t
    _fields_ = [("tensor", _cp), ("weights", _cp)]


class BindWeightsOptionsC(ctypes.Structure):  # hk_bind_weights_options_t
    _fields_ = [("struct_size", _u32), ("flags", _u32), ("names", ctypes.POINTER(WeightsNameC)),
                ("name_count", _u32)]


class PackOpenOptionsC(ctypes.Structure):  # hk_pack_open_options_t
    _fields_ = [("struct_size", _u32), ("require_signature", _u32), ("allocator", _vp),
                ("trusted_keys", _vp), ("trusted_key_count", _u32), ("allow_unsigned_native_code", _u32),
                ("metadata_only", _u32), ("reserved0", _u32), ("max_nodes", _u32), ("max_deps", _u32),
                ("max_code_bytes", _u64), ("allow_unsigned_code", _u32), ("reserved1", _u32)]


class SamplingC(ctypes.Structure):
    """hk_sampling_t (hkrt.h)."""
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int32), ("top_p", ctypes.c_float),
                ("seed", ctypes.c_uint32)]


class LaunchInfoC(ctypes.Structure):  # hk_launch_info_t
    _fields_ = [("kernel", _cp), ("nodes", _cp), ("bytes", _u64), ("flops", _u64), ("matrix", _int)]


# name: (restype, argtypes)
_PROTOTYPES = {
    "hk_version": (_cp, []),
    "hk_version_number": (_u32, []),
    "hk_status_string": (_cp, [_status]),
    "hk_last_error": (_cp, []),
    "hk_pack_open_file_ex": (_status, [_cp, ctypes.POINTER(PackOpenOptionsC), ctypes.POINTER(_vp)]),
    "hk_pack_open_memory_ex": (_status, [_vp, _sz, ctypes.POINTER(PackOpenOptionsC), ctypes.POINTER(_vp)]),
    "hk_pack_signature": (_int, [_vp, ctypes.POINTER(_cp)]),
    "hk_public_key_parse": (_status, [_cp, _sz, _vp]),
    "hk_pack_destroy": (None, [_vp]),
    "hk_pack_name": (_cp, [_vp]),
    "hk_pack_target_count": (_u32, [_vp]),
    "hk_pack_target_name": (_cp, [_vp, _u32]),
    "hk_pack_batch_count": (_u32, [_vp]),
    "hk_pack_batch_size": (_u64, [_vp, _u32]),
    "hk_pack_batch_policy": (_int, [_vp]),
    "hk_pack_select_target": (_status, [_vp, _cp, ctypes.POINTER(_cp)]),
    "hk_session_create": (_status, [_vp, ctypes.POINTER(SessionOptionsC), ctypes.POINTER(_vp)]),
    "hk_session_destroy": (None, [_vp]),
    "hk_session_target": (_cp, [_vp]),
    "hk_session_device_name": (_cp, [_vp]),
    "hk_session_launch_mode": (_cp, [_vp, ctypes.POINTER(_cp)]),
    "hk_session_pdl_count": (_u32, [_vp]),
    "hk_session_tensor_count": (_u32, [_vp]),
    "hk_session_tensor_info": (_status, [_vp, _u32, ctypes.POINTER(TensorInfoC)]),
    "hk_session_bind": (_status, [_vp, _cp, _vp, _sz]),
    "hk_session_run": (_status, [_vp, _vp]),
    "hk_session_set_batch": (_status, [_vp, _u64]),
    "hk_session_batch": (_u64, [_vp]),
    "hk_session_bucket": (_u64, [_vp]),
    "hk_session_launch_count": (_u32, [_vp]),
    "hk_session_launch_info": (_status, [_vp, _u32, ctypes.POINTER(LaunchInfoC)]),
    "hk_session_profile": (_status, [_vp, _vp, _u32, ctypes.POINTER(ctypes.c_double)]),
    "hk_session_synchronize": (_status, [_vp, _vp]),
    "hk_pack_weight_count": (_u32, [_vp]),
    "hk_session_tensor_part": (_cp, [_vp, _u32, _u32]),
    "hk_session_tensor_bound": (_int, [_vp, _u32]),
    "hk_weights_open_file": (_status, [_cp, _vp, ctypes.POINTER(_vp)]),
    "hk_weights_destroy": (None, [_vp]),
    "hk_weights_find": (_status, [_vp, _cp, ctypes.POINTER(_u32)]),
    "hk_session_bind_weights": (_status, [_vp, _vp, ctypes.POINTER(BindWeightsOptionsC), ctypes.POINTER(_u32)]),
    "hk_generator_create": (_status, [_vp, ctypes.POINTER(_vp)]),
    "hk_generator_destroy": (None, [_vp]),
    "hk_generator_slots": (_u32, [_vp]),
    "hk_generator_max_seq": (_u32, [_vp]),
    "hk_generator_vocab": (_u32, [_vp]),
    "hk_generator_max_step": (_u32, [_vp]),
    "hk_generator_length": (_u32, [_vp, _u32]),
    "hk_generator_reset": (_status, [_vp, _u32]),
    "hk_generator_append": (_status, [_vp, _u32, ctypes.POINTER(_u32), ctypes.POINTER(ctypes.POINTER(ctypes.c_int32)),
                                      ctypes.POINTER(_u32), ctypes.POINTER(ctypes.c_int32)]),
    "hk_generator_logits": (_status, [_vp, _u32, ctypes.POINTER(ctypes.c_float), _sz]),
    "hk_generator_set_sampling": (_status, [_vp, _u32, ctypes.POINTER(SamplingC)]),
}


def _prefix_libraries(prefix):
    """libhkrt.so.N in an install prefix's library folders (lib, lib64, lib/<multiarch>)."""
    found = glob.glob(os.path.join(prefix, "lib*", "libhkrt.so.[0-9]*")) + \
        glob.glob(os.path.join(prefix, "lib", "*", "libhkrt.so.[0-9]*"))
    return sorted(found, key=lambda p: (len(os.path.basename(p)), p))[:1]  # the SONAME link first


def _candidates():
    """(where, path, folder of dependencies to load first or None) in lookup order, after
    load_library's argument and HKRT_LIBRARY."""
    libs = os.path.join(_HERE, "_libs")
    out = [("the wheel's copy", p, libs) for p in sorted(glob.glob(os.path.join(libs, "libhkrt.so*")))]
    out += [("next to the package", p, None) for p in sorted(glob.glob(os.path.join(_HERE, "libhkrt.so*")))]
    try:
        from . import _install_paths  # written by `cmake --install` only
        out.append(("the install prefix", os.path.normpath(os.path.join(_HERE, _install_paths.LIBRARY)), None))
    except ImportError:
        pass
    found = ctypes.util.find_library("hkrt")
    if found:
        out.append(("ctypes.util.find_library", found, None))
    hkc = shutil.which("hkc")
    if hkc:
        prefixes = []
        for exe in (hkc, os.path.realpath(hkc)):
            p = os.path.dirname(os.path.dirname(os.path.abspath(exe)))
            if p not in prefixes:
                prefixes.append(p)
        for p in prefixes:
            out += [("the prefix of %s" % hkc, lib, None) for lib in _prefix_libraries(p)]
    root = os.path.dirname(os.path.dirname(_HERE))  # the source checkout, when run from python/
    for build in ("build", "build-dev"):
        out.append(("the build tree", os.path.join(root, build, "libhkrt.so"), None))
    return out


_preloaded = []  # the wheel's dependency libraries, loaded before its libhkrt (kept alive)


def _preload(folder):
    """Loads every shared library in `folder` but libhkrt itself, so that libhkrt's NEEDED
    entries resolve to them by SONAME (the wheel carries them; its libhkrt has no rpath).
    Retries while some load: a library may need another one of the folder loaded first.
    Returns the errors of those that never loaded."""
    todo = sorted(f for f in os.listdir(folder) if ".so" in f and not f.startswith("libhkrt.so"))
    errors = {}
    while todo:
        left = []
        for f in todo:
            try:
                _preloaded.append(ctypes.CDLL(os.path.join(folder, f)))
                errors.pop(f, None)
            except OSError as e:
                errors[f] = str(e)
                left.append(f)
        if len(left) == len(todo):
            break
        todo = left
    return errors


def _declare(lib):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def load(path=None):
    """Loads libhkrt once per process and returns (CDLL, path). Raises hkrt.Unavailable, naming
    every place looked at, when no library loads."""
    global _loaded
    from .errors import Unavailable
    with _lock:
        if _loaded is not None:
            if path is not None and os.path.realpath(path) != os.path.realpath(_loaded[1]):
                raise Unavailable(5, "UNAVAILABLE", "libhkrt is already loaded from %s; load_library(%s) "
                                  "must come before any other hkrt call" % (_loaded[1], path))
            return _loaded
        explicit = path or os.environ.get("HKRT_LIBRARY")
        tried = []
        cands = [("HKRT_LIBRARY" if not path else "load_library()", explicit, None)] if explicit else _candidates()
        for where, cand, deps in cands:
            if os.sep in cand and not os.path.exists(cand):
                tried.append("%s (%s): no such file" % (cand, where))
                continue
            if deps is not None:
                for f, e in sorted(_preload(deps).items()):
                    tried.append("%s (%s, loaded before libhkrt): %s" % (os.path.join(deps, f), where, e))
            try:
                lib = _declare(ctypes.CDLL(cand))
            except (OSError, AttributeError) as e:
                tried.append("%s (%s): %s" % (cand, where, e))
                continue
            _loaded = (lib, getattr(lib, "_name", cand))
            return _loaded
        raise Unavailable(5, "UNAVAILABLE", "libhkrt not found; tried:\n  " + "\n  ".join(tried) +
                          "\nSet HKRT_LIBRARY to the path of libhkrt.so, install hkc (cmake --install) "
                          "or build it (cmake --build build)")
