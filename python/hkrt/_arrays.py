# SPDX-License-Identifier: Apache-2.0
"""Turning the objects bound to a session into (address, bytes) after checking them against the
tensor's TensorInfo: NumPy arrays for the host target; `__cuda_array_interface__` or DLPack
objects (torch, CuPy, ...) holding device memory for GPU targets."""
import ctypes

from .errors import invalid

ALIGNMENT = 16  # hk_session_bind's required alignment of a bound address

# TensorInfo.dtype -> accepted NumPy dtype names. NumPy has no bfloat16: bf16 tensors take
# uint16 arrays holding the raw bits, ml_dtypes.bfloat16 arrays, or float32 arrays (converted).
_NUMPY = {"float32": ("float32",), "float16": ("float16",), "bfloat16": ("uint16", "bfloat16"), "int32": ("int32",),
          "int8": ("int8",), "float8_e4m3fn": ("uint8", "float8_e4m3fn")}  # fp8: the raw bits, or ml_dtypes' type
_UNSET = object()
_bf16 = _UNSET  # np.dtype(ml_dtypes.bfloat16), or None without ml_dtypes; looked up once


def bf16_dtype(np):
    """NumPy's dtype for ml_dtypes.bfloat16 when ml_dtypes imports, else None (then bf16 data
    is uint16 arrays of the raw bits). Looked up on first use, once per process."""
    global _bf16
    if _bf16 is _UNSET:
        try:
            import ml_dtypes
            _bf16 = np.dtype(ml_dtypes.bfloat16)
        except Exception:  # ImportError, or a broken install: behave as without it
            _bf16 = None
    return _bf16


def _is_bf16(np, dtype):
    """Whether an array's dtype holds bfloat16 values (ml_dtypes.bfloat16 or a dtype named so)."""
    bf = bf16_dtype(np)
    return dtype.name == "bfloat16" or (bf is not None and dtype == bf)


def host_dtype(np, dtype_name):
    """The NumPy dtype the session allocates for a tensor's dtype: bfloat16 tensors get
    ml_dtypes.bfloat16 when ml_dtypes imports, else uint16 (the raw bits)."""
    if dtype_name == "bfloat16":
        bf = bf16_dtype(np)
        return bf if bf is not None else np.dtype(np.uint16)
    if dtype_name == "float8_e4m3fn":  # quantized params: their bit patterns
        return np.dtype(np.uint8)
    return np.dtype(dtype_name)


def f32_to_bf16_bits(np, a):
    """float32 values -> bfloat16 bits (uint16), rounding to nearest, ties to even (as
    ml_dtypes and torch do); infinities stay infinite, a NaN stays a (quiet) NaN."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    bits = ((u + (((u >> 16) & 1) + 0x7FFF)) >> 16).astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    if nan.any():
        bits[nan] = ((u[nan] >> 16) | 0x0040).astype(np.uint16)
    return bits


def bf16_bits_to_f32(np, bits):
    """bfloat16 bits (uint16) -> float32 values (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def stage_in(np, staging, array):
    """Fills a staged tensor's aligned buffer from the caller's array (before a run), converting
    float32 to bfloat16 where the buffer holds bf16 bits."""
    if array.dtype == np.float32 and staging.dtype != np.float32:
        staging.view(np.uint16)[...] = f32_to_bf16_bits(np, array)
    else:
        np.copyto(staging, array)


def stage_out(np, array, staging):
    """Copies a staged output's buffer into the caller's array (after a run), converting
    bfloat16 bits to float32 where the caller bound a float32 array to a bf16 tensor."""
    if array.dtype == np.float32 and staging.dtype != np.float32:
        array[...] = bf16_bits_to_f32(np, staging.view(np.uint16))
    else:
        np.copyto(array, staging)


# TensorInfo.dtype -> accepted __cuda_array_interface__ typestrs (little-endian only).
_TYPESTR = {"float32": ("<f4",), "float16": ("<f2",), "bfloat16": ("<u2", "<i2", "<V2"), "int32": ("<i4",),
            "int8": ("|i1",), "float8_e4m3fn": ("|u1", "|V1")}
# DLPack: (type code, bits) -> TensorInfo.dtype (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4)
_DLTYPE = {(2, 32): "float32", (2, 16): "float16", (4, 16): "bfloat16", (1, 16): "bfloat16", (0, 16): "bfloat16",
           (0, 32): "int32", (0, 8): "int8", (1, 8): "float8_e4m3fn"}
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
    a fresh aligned buffer that the caller must keep in sync (staged=True) with stage_in /
    stage_out. A float32 array for a bfloat16 tensor is always staged: the buffer holds the
    bf16 bits (inputs and params converted before each run, outputs widened after it)."""
    if not isinstance(array, np.ndarray):
        raise invalid("%s: the host target binds NumPy arrays, got %s" % (_where(info), type(array).__name__))
    bf16 = info.dtype == "bfloat16"
    convert = bf16 and array.dtype == np.float32
    if not (convert or (array.dtype.name in _NUMPY[info.dtype] and array.dtype.isnative)
            or (bf16 and _is_bf16(np, array.dtype))):
        accepted = _NUMPY[info.dtype] if not bf16 else ("uint16 (the raw bits)", "ml_dtypes.bfloat16",
                                                       "float32 (converted)")
        raise invalid("%s: got dtype %s (accepted: %s)" % (_where(info), array.dtype, ", ".join(accepted)))
    _check_shape(info, array.shape)
    if info.role == "output" and not array.flags.writeable:
        raise invalid("%s: the output array is read-only" % _where(info))
    if convert:
        return aligned_empty(np, array.shape, np.uint16), True
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
