# SPDX-License-Identifier: Apache-2.0
"""ctypes binding of libhkrt (loader/include/hk/hkrt.h) for benchmarks and checks:
open a pack, make a session, bind torch device tensors by their data pointers, run on
torch's current stream. The same C entry points an application uses."""
import ctypes
import os

HK_TENSOR_OUTPUT = 1
HK_TENSOR_PARAM = 2
_ELEM = {0: "float32", 1: "float16", 2: "bfloat16"}


class TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("role", ctypes.c_int), ("element_type", ctypes.c_int),
                ("rank", ctypes.c_uint32), ("dims", ctypes.c_int64 * 6), ("bytes", ctypes.c_size_t)]


HK_LAUNCH_MODE_AUTO, HK_LAUNCH_MODE_GRAPH, HK_LAUNCH_MODE_STREAM = 0, 1, 2


class SessionOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("batch", ctypes.c_uint64), ("target", ctypes.c_char_p),
                ("device", ctypes.c_int), ("launch_mode", ctypes.c_int), ("host_threads", ctypes.c_uint32),
                ("reserved0", ctypes.c_uint32), ("no_pdl", ctypes.c_uint32),
                ("reserved1", ctypes.c_uint32), ("prefer_ptx", ctypes.c_uint32)]


class PackOpenOptions(ctypes.Structure):  # hkrt.h hk_pack_open_options_t
    _fields_ = [("struct_size", ctypes.c_uint32), ("require_signature", ctypes.c_uint32),
                ("allocator", ctypes.c_void_p), ("trusted_keys", ctypes.c_void_p),
                ("trusted_key_count", ctypes.c_uint32), ("allow_unsigned_native_code", ctypes.c_uint32),
                ("metadata_only", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                ("max_nodes", ctypes.c_uint32), ("max_deps", ctypes.c_uint32), ("max_code_bytes", ctypes.c_uint64)]


def open_own_pack(lib, path, out_pack):
    """hk_pack_open_file_ex for packs the benchmarks built themselves (unsigned; host code allowed)."""
    o = PackOpenOptions(struct_size=ctypes.sizeof(PackOpenOptions), allow_unsigned_native_code=1)
    return lib.hk_pack_open_file_ex(path.encode(), ctypes.byref(o), out_pack)


def _lib(path=None):
    path = path or os.environ.get("HKRT_LIB") or os.path.join(os.path.dirname(__file__), "..", "build-dev", "libhkrt.so")
    lib = ctypes.CDLL(path)
    vp, c = ctypes.c_void_p, ctypes.c_char_p
    lib.hk_last_error.restype = c
    lib.hk_pack_open_file_ex.argtypes = [c, ctypes.POINTER(PackOpenOptions), ctypes.POINTER(vp)]
    lib.hk_pack_destroy.argtypes = [vp]
    lib.hk_session_create.argtypes = [vp, ctypes.POINTER(SessionOptions), ctypes.POINTER(vp)]
    lib.hk_session_destroy.argtypes = [vp]
    lib.hk_session_target.argtypes = [vp]
    lib.hk_session_target.restype = c
    lib.hk_session_tensor_count.argtypes = [vp]
    lib.hk_session_tensor_count.restype = ctypes.c_uint32
    lib.hk_session_tensor_info.argtypes = [vp, ctypes.c_uint32, ctypes.POINTER(TensorInfo)]
    lib.hk_session_bind.argtypes = [vp, c, vp, ctypes.c_size_t]
    lib.hk_session_run.argtypes = [vp, vp]
    lib.hk_session_synchronize.argtypes = [vp, vp]
    lib.hk_session_pdl_count.argtypes = [vp]
    lib.hk_session_pdl_count.restype = ctypes.c_uint32
    return lib


class Session:
    def __init__(self, pack_path, batch, target=None, lib=None, launch_mode=HK_LAUNCH_MODE_AUTO, no_pdl=False):
        self.lib = lib or _lib()
        self.pack = ctypes.c_void_p()
        self._check(open_own_pack(self.lib, pack_path, ctypes.byref(self.pack)))
        self.s = ctypes.c_void_p()
        opts = SessionOptions(ctypes.sizeof(SessionOptions), batch, target.encode() if target else None, 0,
                              launch_mode, 0, 0, 1 if no_pdl else 0)
        self._check(self.lib.hk_session_create(self.pack, ctypes.byref(opts), ctypes.byref(self.s)))
        self.target = self.lib.hk_session_target(self.s).decode()
        # programmatic edges (graph) or launches (stream) in use; 0 without PDL
        self.pdl_count = self.lib.hk_session_pdl_count(self.s)
        self.tensors = []
        for i in range(self.lib.hk_session_tensor_count(self.s)):
            info = TensorInfo()
            self._check(self.lib.hk_session_tensor_info(self.s, i, ctypes.byref(info)))
            self.tensors.append({"name": info.name.decode(), "output": info.role == HK_TENSOR_OUTPUT,
                                 "param": info.role == HK_TENSOR_PARAM,
                                 "dtype": _ELEM[info.element_type], "shape": list(info.dims[:info.rank]),
                                 "bytes": info.bytes})

    def _check(self, status):
        if status != 0:
            raise RuntimeError("libhkrt: " + self.lib.hk_last_error().decode())

    def bind(self, name, tensor):
        assert tensor.is_contiguous()
        self._check(self.lib.hk_session_bind(self.s, name.encode(), ctypes.c_void_p(tensor.data_ptr()),
                                             tensor.numel() * tensor.element_size()))

    def run(self, stream=None):
        self._check(self.lib.hk_session_run(self.s, ctypes.c_void_p(stream) if stream else None))

    def close(self):
        self.lib.hk_session_destroy(self.s)
        self.lib.hk_pack_destroy(self.pack)
