# SPDX-License-Identifier: Apache-2.0
"""Turning the objects bound to a session into (address, bytes) after checking them against the
tensor's TensorInfo: NumPy arrays for the host target; `__cuda_array_interface__` or DLPack
objects (torch, CuPy, ...) holding device memory for GPU targets."""
import ctypes

from .errors import invalid

ALIGNMENT = 16  # hk_session_bind's required alignment of a bound address

# TensorInfo.dtype -> accepted NumPy dtype names. NumPy has no bfloat16: bf16 tensors take
# uint16 arrays holding the raw bits, or ml_dtypes.bfloat16 arrays.
_NUMPY = {"float32": ("float32",), "float16": ("float16",), "bfloat16": ("uint16", "bfloat16"), "int32": ("int32",)}
# TensorInfo.dtype -> accepted __cuda_array_interface__ typestrs (little-endian only).
_TYPESTR = {"float32": ("<f4",), "float16": ("<f2",), "bfloat16": ("<u2", "<i2", "<V2"), "int32": ("<i4",)}
# DLPack: (type code, bits) -> TensorInfo.dtype (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4)
_DLTYPE = {(2, 32): "float32", (2, 16): "float16", (4, 16): "bfloat16", (1, 16): "bfloat16", (0, 16): "bfloat16",
           (0, 32): "int32"}
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_CUDA_MANAGED, _DL_ROCM = 1, 2, 3, 13, 10
_DL_DEVICE_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 10: "rocm", 13: "cuda_managed"}


def _where(info):
    return "tensor '%s' (%s %s %s)" % (info.name, info.role, info.dtype, list(info.shape))


def _check_shape(info, shape):
    if tuple(shape) != tuple(info.shape):
        raise invalid("%s: got shape %s" % (_where(info), list(shape)))


def host_array(np, info, array):
    """Checks a NumPy array for a host-target tensor. Returns (array_to_bind, staged): the
    array itself when it is C-contiguous and 16-byte aligned (and writable, for outputs), else
    a fresh aligned copy that the caller must keep in sync (staged=True)."""
    if not isinstance(array, np.ndarray):
        raise invalid("%s: the host target binds NumPy arrays, got %s" % (_where(info), type(array).__name__))
    if array.dtype.name not in _NUMPY[info.dtype] or not array.dtype.isnative:
        raise invalid("%s: got dtype %s (accepted: %s)" % (_where(info), array.dtype, ", ".join(_NUMPY[info.dtype])))
    _check_shape(info, array.shape)
    if info.role == "output" and not array.flags.writeable:
        raise invalid("%s: the output array is read-only" % _where(info))
    if array.flags.c_contiguous and array.ctypes.data % ALIGNMENT == 0:
        return array, False
    return aligned_empty(np, array.shape, array.dtype), True


def aligned_empty(np, shape, dtype):
    """An uninitialized C-contiguous array whose data starts at a 16-byte boundary."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(n + ALIGNMENT, dtype=np.uint8)
    skip = (-raw.ctypes.data) % ALIGNMENT
    return raw[skip:skip + n].view(dtype).reshape(shape)


def device_object(info, obj, device):
    """Checks an object holding device memory for a GPU-target tensor and returns (address,
    keepalive): `__cuda_array_interface__` first, then DLPack (`__dlpack__`). keepalive holds
    what must live while the memory stays bound (the object, a DLPack capsule)."""
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is not None:
        kind, ordinal = dev()
        if kind not in (_DL_CUDA, _DL_ROCM, _DL_CUDA_MANAGED):
            raise invalid("%s: the memory is on %s, not a GPU" % (_where(info), _DL_DEVICE_NAMES.get(kind, kind)))
        if ordinal != device:
            raise invalid("%s: the memory is on device %d, the session runs on device %d"
                          % (_where(info), ordinal, device))
    try:
        cai = obj.__cuda_array_interface__
    except (AttributeError, TypeError):  # torch raises TypeError for dtypes it cannot describe (bf16)
        cai = None
    if cai is not None:
        if cai["typestr"] not in _TYPESTR[info.dtype]:
            raise invalid("%s: got typestr %s (accepted: %s)" % (_where(info), cai["typestr"],
                                                                ", ".join(_TYPESTR[info.dtype])))
        _check_shape(info, cai["shape"])
        strides = cai.get("strides")
        if strides is not None and tuple(strides) != _c_strides(cai["shape"], int(cai["typestr"][2:])):
            raise invalid("%s: not C-contiguous (strides %s)" % (_where(info), list(strides)))
        ptr, readonly = cai["data"]
        if readonly and info.role == "output":
            raise invalid("%s: the output's memory is read-only" % _where(info))
        return ptr, (obj,)
    if getattr(obj, "__dlpack__", None) is None:
        raise invalid("%s: a GPU target binds objects with __cuda_array_interface__ or __dlpack__ "
                      "(torch CUDA tensors, CuPy arrays), got %s" % (_where(info), type(obj).__name__))
    capsule = obj.__dlpack__()
    return _dlpack_address(info, capsule, device), (obj, capsule)


def _c_strides(shape, itemsize):
    out, step = [], itemsize
    for d in reversed(shape):
        out.append(step)
        step *= d
    return tuple(reversed(out))


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


def _dlpack_address(info, capsule, device):
    """The data address of an unconsumed "dltensor" capsule (DLManagedTensor starts with its
    DLTensor). The capsule is left unconsumed: its destructor releases the tensor when the
    session drops it."""
    t = _DLTensor.from_address(_capsule_pointer(capsule, b"dltensor"))
    if t.device_type not in (_DL_CUDA, _DL_ROCM, _DL_CUDA_MANAGED) or t.device_id != device:
        raise invalid("%s: the memory is on %s:%d, the session runs on GPU %d"
                      % (_where(info), _DL_DEVICE_NAMES.get(t.device_type, t.device_type), t.device_id, device))
    dtype = _DLTYPE.get((t.code, t.bits)) if t.lanes == 1 else None
    if dtype != info.dtype:
        raise invalid("%s: got DLPack type code %d, %d bits, %d lanes" % (_where(info), t.code, t.bits, t.lanes))
    shape = [t.shape[i] for i in range(t.ndim)]
    _check_shape(info, shape)
    if t.strides and tuple(t.strides[i] for i in range(t.ndim)) != _c_strides(shape, 1):
        raise invalid("%s: not C-contiguous (DLPack strides, in elements, %s)"
                      % (_where(info), [t.strides[i] for i in range(t.ndim)]))
    return t.data + t.byte_offset
