# SPDX-License-Identifier: Apache-2.0
"""hkrt.Pack and hkrt.Session: hk_pack_t and hk_session_t (loader/include/hk/hkrt.h)."""
import collections
import collections.abc
import ctypes
import os
import weakref

from . import _arrays, _lib
from .errors import Error, make, invalid

TensorInfo = collections.namedtuple("TensorInfo", "name role dtype shape bytes")
TensorInfo.__doc__ = """A session's tensor: name; role "input", "output" or "param"; dtype "float32",
"float16", "bfloat16" or "int32" (ids and lengths inputs); shape, a tuple resolved for the session's batch; bytes, the size a bound
buffer has."""
LaunchProfile = collections.namedtuple("LaunchProfile", "kernel nodes us")
LaunchProfile.__doc__ = """One launch of the current batch bucket's graph: kernel (its symbol), nodes
(a tuple of the spec nodes it computes) and us (its median time alone, microseconds)."""
Signature = collections.namedtuple("Signature", "state key_id")
Signature.__doc__ = """The pack's signature as the open found it: state "none", "valid" (verifies, key not
trusted), "trusted" or "invalid" (metadata-only opens); key_id, 16 hex digits ("" when unsigned)."""

_ROLES = {0: "input", 1: "output", 2: "param", 4: "state"}
_DTYPES = {0: "float32", 1: "float16", 2: "bfloat16", 3: "int32", 4: "int8", 5: "float8_e4m3fn"}
_LAUNCH_MODES = {"auto": 0, "graph": 1, "stream": 2}
_SIGNATURES = {0: "none", 1: "valid", 2: "trusted", 3: "invalid"}


def _check(lib, status):
    if status != 0:
        raise make(status, lib.hk_last_error().decode(errors="replace"))


def _str(raw):
    return raw.decode(errors="replace") if raw is not None else None


def public_key(key):
    """An Ed25519 public key as the 32 bytes libhkrt trusts, from the path of a KEY.pub file
    written by `hkc keygen`, that file's text (str or bytes starting with "hk-ed25519-public"),
    or the 32 bytes themselves. Raises hkrt.InvalidArgument (hk_public_key_parse's message)."""
    if isinstance(key, (bytes, bytearray)) and len(key) == _lib.HK_PUBLIC_KEY_BYTES:
        return bytes(key)
    if isinstance(key, str) and key.startswith("hk-ed25519-public"):
        text = key.encode()
    elif isinstance(key, (bytes, bytearray)):
        text = bytes(key)
    elif isinstance(key, (str, os.PathLike)):
        try:
            with open(key, "rb") as f:
                text = f.read()
        except OSError as e:
            raise make(7, "public key %s: %s" % (os.fspath(key), e.strerror)) from None
    else:
        raise invalid("a public key is a KEY.pub path, its text or 32 bytes, not %s" % type(key).__name__)
    lib = _lib.load()[0]
    out = ctypes.create_string_buffer(_lib.HK_PUBLIC_KEY_BYTES)
    _check(lib, lib.hk_public_key_parse(text, len(text), out))
    return out.raw


def user_key_path():
    """Where the user's secret signing key lives, as hkc finds it (docs/CLI.md, "Signing"):
    $HKC_KEY, else $XDG_CONFIG_HOME/hkc/key, else ~/.config/hkc/key (only absolute
    XDG_CONFIG_HOME and HOME count); its public half is this path + ".pub". None when no
    variable names a place."""
    key = os.environ.get("HKC_KEY", "")
    if key:
        return key
    for var, rel in (("XDG_CONFIG_HOME", "hkc/key"), ("HOME", ".config/hkc/key")):
        base = os.environ.get(var, "")
        if base.startswith("/"):
            return os.path.join(base, rel)
    return None


def user_public_key():
    """The user's public key (32 bytes) from user_key_path() + ".pub", which hkc build writes
    when it creates the key; None when there is none. A file that is not a public key is
    warned about (warnings.warn) and not used."""
    path = user_key_path()
    if path is None or not os.path.exists(path + ".pub"):
        return None
    try:
        return public_key(path + ".pub")
    except Error as e:
        import warnings
        warnings.warn("hkrt: your public key %s.pub is not used: %s" % (path, e.message))
        return None


def _numpy():
    try:
        import numpy
    except ImportError:
        raise make(5, "the host target binds NumPy arrays, and numpy is not installed (python3-numpy, "
                   "pip install numpy)") from None
    return numpy


def _stream_handle(stream):
    """A stream argument as the address libhkrt takes: None (the default stream), an int, or an
    object with .cuda_stream (torch.cuda.Stream) or .ptr (cupy.cuda.Stream)."""
    if stream is None:
        return None
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            stream = getattr(stream, attr)
            break
    if not isinstance(stream, int):
        raise invalid("a stream is None, an int handle, or an object with .cuda_stream / .ptr, not %s"
                      % type(stream).__name__)
    return ctypes.c_void_p(stream) if stream else None


def _shape_of(obj):
    """The shape of an array-like bound to a tensor (NumPy, torch, CuPy, or an object with
    __cuda_array_interface__), as a tuple of ints; None when it has none to read."""
    shape = getattr(obj, "shape", None)
    if shape is None:
        try:
            shape = obj.__cuda_array_interface__["shape"]
        except (AttributeError, TypeError, KeyError):
            return None
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return None


class Pack:
    """An open .hkpack (hk_pack_t). Open with Pack.open(); close() (or a with block) frees it
    after closing its sessions."""

    def __init__(self, _handle, _lib_obj, _keepalive):
        self._h, self._lib, self._keep = _handle, _lib_obj, _keepalive
        self._sessions = weakref.WeakSet()

    @classmethod
    def open(cls, source, trusted_keys=(), allow_unsigned_native_code=False, require_signature=False,
             metadata_only=False, allow_unsigned_code=False, trust_user_key=True):
        """Opens and verifies a pack: `source` is a path (str, os.PathLike) or the pack's bytes
        (bytes, bytearray, memoryview; copied unless bytes, so later changes cannot reach the
        pack). trusted_keys: public keys as public_key() takes them; trust_user_key: trust the
        user's own key too (the one hkc build signs with: user_public_key()). The trust policy is
        libhkrt's: a pack (host or GPU code) needs a signature by a trusted key or
        allow_unsigned_code=True (allow_unsigned_native_code, its older name, is the same), else
        hkrt.Untrusted; metadata_only=True opens any pack that verifies, for reading only.
        Other errors: hkrt.IOFailure, hkrt.Corrupt, hkrt.UnsupportedVersion."""
        lib = _lib.load()[0]
        keys = [public_key(k) for k in trusted_keys]
        user = user_public_key() if trust_user_key else None
        if user is not None and user not in keys:
            keys.append(user)
        keys = b"".join(keys)
        key_buf = ctypes.create_string_buffer(keys, len(keys)) if keys else None
        opts = _lib.PackOpenOptionsC(struct_size=ctypes.sizeof(_lib.PackOpenOptionsC),
                                     require_signature=int(bool(require_signature)),
                                     trusted_keys=ctypes.cast(key_buf, ctypes.c_void_p) if keys else None,
                                     trusted_key_count=len(keys) // _lib.HK_PUBLIC_KEY_BYTES,
                                     allow_unsigned_native_code=int(bool(allow_unsigned_native_code)),
                                     allow_unsigned_code=int(bool(allow_unsigned_code)),
                                     metadata_only=int(bool(metadata_only)))
        handle = ctypes.c_void_p()
        keep = None
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            keep = ctypes.c_char_p(data)  # points into `data`, which must outlive the pack
            _check(lib, lib.hk_pack_open_memory_ex(ctypes.cast(keep, ctypes.c_void_p), len(data),
                                                   ctypes.byref(opts), ctypes.byref(handle)))
            keep = (data, keep)
        elif isinstance(source, (str, os.PathLike)):
            _check(lib, lib.hk_pack_open_file_ex(os.fsencode(source), ctypes.byref(opts), ctypes.byref(handle)))
        else:
            raise invalid("Pack.open takes a path or bytes, not %s" % type(source).__name__)
        return cls(handle, lib, keep)

    def _handle(self):
        if not self._h:
            raise make(10, "the pack is closed")
        return self._h

    def close(self):
        """Closes the pack's open sessions, then frees the pack. Closing twice does nothing."""
        for s in list(self._sessions):
            s.close()
        if self._h:
            self._lib.hk_pack_destroy(self._h)
            self._h = None
        self._keep = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    @property
    def name(self):
        return _str(self._lib.hk_pack_name(self._handle()))

    @property
    def targets(self):
        """The targets the pack holds code for ("host-x86_64", "sm_90a", ...)."""
        h = self._handle()
        return [_str(self._lib.hk_pack_target_name(h, i)) for i in range(self._lib.hk_pack_target_count(h))]

    @property
    def batch_sizes(self):
        """The batch buckets, in the pack's order."""
        h = self._handle()
        return [self._lib.hk_pack_batch_size(h, i) for i in range(self._lib.hk_pack_batch_count(h))]

    @property
    def batch_policy(self):
        """"pad" (any batch up to the largest bucket runs padded) or "exact" (only the buckets)."""
        return "exact" if self._lib.hk_pack_batch_policy(self._handle()) == 1 else "pad"

    @property
    def signature(self):
        key = ctypes.c_char_p()
        state = self._lib.hk_pack_signature(self._handle(), ctypes.byref(key))
        return Signature(_SIGNATURES.get(state, str(state)), _str(key.value) or "")

    def select_target(self, requested=None):
        """The target a session would run here (requested: a name, or None for the best one).
        Errors: hkrt.NotFound, hkrt.NoCompatibleTarget (the message lists both sides)."""
        out = ctypes.c_char_p()
        _check(self._lib, self._lib.hk_pack_select_target(self._handle(), requested.encode() if requested else None,
                                                          ctypes.byref(out)))
        return _str(out.value)

    @property
    def weight_count(self):
        """How many params the pack stores (hkc build --weights; 0: the application binds them).
        A session binds them when it is created unless Pack.session(no_pack_weights=True)."""
        return self._lib.hk_pack_weight_count(self._handle())

    def session(self, batch=1, target=None, device=0, launch_mode="auto", host_threads=0, no_pdl=False,
                prefer_ptx=False, no_pack_weights=False):
        """A new Session (hk_session_create). target: a name, or None for the best one here;
        device: the GPU ordinal; launch_mode: "auto", "graph" or "stream" (GPU targets);
        host_threads: host target threads per launch (0: the online CPUs); no_pdl: launch every
        kernel the ordinary way; prefer_ptx: a CUDA target's PTX wherever it runs, not its
        cubins; no_pack_weights: do not bind the params a self-contained pack stores.
        Errors: hkrt.NotFound (batch, target), hkrt.NoCompatibleTarget, hkrt.Unavailable,
        hkrt.DriverError."""
        if launch_mode not in _LAUNCH_MODES:
            raise invalid("launch_mode is one of %s, not %r" % (", ".join(_LAUNCH_MODES), launch_mode))
        opts = _lib.SessionOptionsC(struct_size=ctypes.sizeof(_lib.SessionOptionsC), batch=batch,
                                    target=target.encode() if target else None, device=device,
                                    launch_mode=_LAUNCH_MODES[launch_mode], host_threads=host_threads,
                                    no_pdl=int(bool(no_pdl)), prefer_ptx=int(bool(prefer_ptx)),
                                    no_pack_weights=int(bool(no_pack_weights)))
        handle = ctypes.c_void_p()
        _check(self._lib, self._lib.hk_session_create(self._handle(), ctypes.byref(opts), ctypes.byref(handle)))
        s = Session(self, handle, device)
        self._sessions.add(s)
        return s


class Session:
    """A session of a pack (hk_session_t): its tensors, bound buffers, and runs. Made by
    Pack.session(); close() (or a with block) frees it. It keeps every bound object alive
    until it is rebound, its shape changes with set_batch, or the session closes."""

    def __init__(self, pack, handle, device):
        self._pack, self._lib, self._h, self._device = pack, pack._lib, handle, device
        self.target = _str(self._lib.hk_session_target(handle))
        self.device_name = _str(self._lib.hk_session_device_name(handle))  # "NVIDIA H100 80GB HBM3", "host"
        self._host = self.target.startswith("host")
        self._bound = {}  # name -> (caller's object, staging array or None, keepalive)
        self._owned = set()   # host outputs bound to arrays the session allocated (_prepare)
        self._handed = set()  # of those, the ones run(inputs) returned: replaced before the next run
        self._infos = None
        self._weights = []  # hk_weights_t handles whose bytes a host session may use in place

    def _handle(self):
        if not self._h:
            raise make(10, "the session is closed")
        return self._h

    def close(self):
        """Frees the session and drops the bound objects. Closing twice does nothing."""
        if self._h:
            self._lib.hk_session_destroy(self._h)
            self._h = None
        for w in self._weights:
            self._lib.hk_weights_destroy(w)
        self._weights = []
        self._bound.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- tensors
    @property
    def tensors(self):
        """Every input, output and param as a TensorInfo, shapes resolved for the current batch."""
        if self._infos is None:
            h, infos = self._handle(), []
            for i in range(self._lib.hk_session_tensor_count(h)):
                c = _lib.TensorInfoC()
                _check(self._lib, self._lib.hk_session_tensor_info(h, i, ctypes.byref(c)))
                infos.append(TensorInfo(_str(c.name), _ROLES.get(c.role, str(c.role)),
                                        _DTYPES.get(c.element_type, str(c.element_type)),
                                        tuple(c.dims[:c.rank]), c.bytes))
            self._infos = infos
        return list(self._infos)

    def tensor(self, name):
        """The TensorInfo of one tensor; hkrt.NotFound (listing the names) if there is none."""
        for t in self.tensors:
            if t.name == name:
                return t
        raise make(2, "no tensor '%s' in pack '%s' (tensors: %s)"
                   % (name, self._pack.name, ", ".join(t.name for t in self.tensors)))

    def bind(self, name, array):
        """Binds the buffer of `array` to the tensor `name` (rebinding is allowed).

        Host target: a NumPy array of the tensor's shape and dtype. bfloat16 tensors take
        ml_dtypes.bfloat16 arrays, uint16 arrays of the raw bits, or float32 arrays: those are
        converted (rounded to nearest, ties to even) into a bf16 copy before each run, or, bound
        to a bf16 output, receive its values widened to float32 after each run. An array that is
        not C-contiguous or not 16-byte aligned is staged: an aligned copy is bound, filled from
        the array before each run (inputs, params) or copied back into it after each run
        (outputs).
        GPU targets: an object with __cuda_array_interface__ (torch CUDA tensors, CuPy) or DLPack
        (__dlpack__, __dlpack_device__) on the session's device, C-contiguous, of the tensor's
        shape and dtype (bfloat16: a bf16 or 16-bit integer type).
        Errors: hkrt.NotFound (no such tensor), hkrt.InvalidArgument (shape, dtype, device,
        layout, a read-only output)."""
        h = self._handle()
        info = self.tensor(name)
        if self._host:
            np = _numpy()
            target, staged = _arrays.host_array(np, info, array)
            addr, keep = target.ctypes.data, None
            staging = target if staged else None
        else:
            addr, keep = _arrays.device_object(info, array, self._device)
            staging = None
        _check(self._lib, self._lib.hk_session_bind(h, name.encode(), ctypes.c_void_p(addr), info.bytes))
        self._bound[name] = (array, staging, keep)
        self._owned.discard(name)
        self._handed.discard(name)

    def parts(self, name):
        """The checkpoint tensors a param declared with `parts:` concatenates, in order ([] for
        any other tensor; hk_session_tensor_part)."""
        h, index = self._handle(), [t.name for t in self.tensors].index(self.tensor(name).name)
        out = []
        while True:
            p = self._lib.hk_session_tensor_part(h, index, len(out))
            if not p:
                return out
            out.append(_str(p))

    def is_bound(self, name):
        """Whether the tensor has a buffer at the current batch (bound here, by bind_weights, or
        from a self-contained pack's stored params)."""
        index = [t.name for t in self.tensors].index(self.tensor(name).name)
        return bool(self._lib.hk_session_tensor_bound(self._handle(), index))

    def bind_weights(self, path, names=None, inputs=False, all_params=False, copy=False):
        """Binds the params (inputs=True: and inputs) that a safetensors checkpoint provides
        (hk_session_bind_weights, docs/WEIGHTS.md): names maps session tensor -> checkpoint tensor
        for the ones stored under other names; params declared with `parts:` bind from their
        parts. Everything is checked before anything is bound (dtype and shape exactly the
        session's). all_params: hkrt.NotFound unless every param is provided. copy: host target,
        copy into session memory instead of using the file's bytes in place. Returns the number
        of tensors bound. Errors: hkrt.InvalidArgument (a mismatch, named), hkrt.NotFound, and
        the file's own (hkrt.Corrupt for a malformed checkpoint)."""
        h = self._handle()
        w = ctypes.c_void_p()
        _check(self._lib, self._lib.hk_weights_open_file(os.fspath(path).encode(), None, ctypes.byref(w)))
        try:
            entries = list((names or {}).items())
            arr = (_lib.WeightsNameC * max(1, len(entries)))()
            keep = []
            for i, (tensor, weights) in enumerate(entries):
                keep += [tensor.encode(), weights.encode()]
                arr[i].tensor, arr[i].weights = keep[-2], keep[-1]
            flags = (1 if inputs else 0) | (2 if all_params else 0) | (4 if copy else 0)
            opts = _lib.BindWeightsOptionsC(struct_size=ctypes.sizeof(_lib.BindWeightsOptionsC), flags=flags,
                                            names=arr if entries else None, name_count=len(entries))
            bound = ctypes.c_uint32(0)
            _check(self._lib, self._lib.hk_session_bind_weights(h, w, ctypes.byref(opts), ctypes.byref(bound)))
        except BaseException:
            self._lib.hk_weights_destroy(w)
            raise
        self._weights.append(w)  # a host session may read its bytes in place: kept until close()
        # what the file bound replaces this object's earlier bindings (their staging included)
        def has(name):
            return self._lib.hk_weights_find(w, name.encode(), ctypes.byref(ctypes.c_uint32())) == 0
        for t in self.tensors:
            if t.name in self._bound and (t.role == "param" or (inputs and t.role == "input")):
                parts = self.parts(t.name) if t.role == "param" and t.name not in (names or {}) else []
                if has((names or {}).get(t.name, t.name)) or (parts and all(has(p) for p in parts)):
                    del self._bound[t.name]
        return bound.value

    # ---- runs
    def _prepare(self):
        """Host target: binds a session-allocated array to every unbound output (and a fresh one
        to each output whose array run(inputs) returned), and fills staged inputs and params
        from the caller's arrays."""
        if not self._host:
            return
        np = _numpy()
        self._allocate_outputs(np, replace_handed=True)
        roles = {t.name: t.role for t in self.tensors}
        for name, (array, staging, _) in self._bound.items():
            if staging is not None and roles[name] != "output":
                _arrays.stage_in(np, staging, array)

    def _allocate_outputs(self, np, replace_handed):
        for t in self.tensors:
            if t.role == "output" and (t.name not in self._bound or (replace_handed and t.name in self._handed)):
                self.bind(t.name, _arrays.aligned_empty(np, t.shape, _arrays.host_dtype(np, t.dtype)))
                self._owned.add(t.name)

    def _finish(self):
        if not self._host:
            return
        np = _numpy()
        roles = {t.name: t.role for t in self.tensors}
        for name, (array, staging, _) in self._bound.items():
            if staging is not None and roles[name] == "output":
                _arrays.stage_out(np, array, staging)

    def _fit_batch(self, given):
        """Before run(inputs) binds them: makes the session's batch the one the given inputs'
        shapes ask for. The batch stays when every given input already has its tensor's shape;
        else each distinct leading dimension of a mismatching input is tried (as the N of
        `hkc run --batch N`) until one gives every given input its shape. When none does, the
        batch is left at the first one the pack accepts, so that bind() names the tensor whose
        shape is wrong; a batch the pack refuses raises set_batch's hkrt.NotFound (the message
        lists the buckets)."""
        infos = {t.name: t for t in self.tensors}
        shapes = {}
        for name, obj in given.items():
            info = infos.get(name)
            shape = _shape_of(obj)
            if info is not None and info.role == "input" and shape is not None:
                shapes[name] = shape

        def fits():
            return all(shape == infos[name].shape for name, shape in shapes.items())

        if fits():
            return
        candidates = []
        for name, shape in shapes.items():
            want = infos[name].shape
            if shape != want and len(shape) == len(want) and shape and int(shape[0]) >= 1 \
                    and int(shape[0]) not in candidates:
                candidates.append(int(shape[0]))
        first, refused = None, None
        for b in candidates:
            try:
                self.set_batch(b)
            except Error as e:
                if e.status != 2:  # NOT_FOUND: the pack has no such batch; try the next
                    raise
                refused = refused or e
                continue
            infos = {t.name: t for t in self.tensors}
            if fits():
                return
            first = b if first is None else first
        if first is not None:
            self.set_batch(first)
        elif refused is not None:
            raise refused

    def run(self, inputs=None, /, stream=None, **named):
        """Runs the whole graph once (hk_session_run).

        run() or run(stream=...): runs with the tensors bound so far and returns None. Host
        target: returns when the outputs are written; outputs nobody bound go to arrays the
        session allocates (outputs() returns them). GPU targets: queued on `stream` (None: the
        default stream; an int handle, a torch.cuda.Stream or a cupy stream; also accepted as
        the first positional argument, as before).

        run({"x": x, ...}) or run(x=x, ...): binds the given tensors (inputs, and params or
        outputs too, as bind() takes them), runs, and returns {name: array} of every output,
        as ONNX Runtime's InferenceSession.run returns its outputs. The batch follows the
        inputs: it stays when they fit the session's current batch, else it becomes their
        leading dimension (as `hkc run --batch N`; any N up to the largest bucket under the
        pack's pad policy, a bucket under exact) -- call set_batch() first for a pack whose
        batch is not the inputs' leading dimension. Host target: the outputs the caller bound
        are returned as those arrays, written in place; the others are fresh arrays that the
        session never writes again (bfloat16 ones are ml_dtypes.bfloat16 arrays when ml_dtypes
        imports, else uint16 arrays of the raw bits). GPU targets: the objects bound to the
        outputs (every output must be bound, here or with bind()), valid once `stream` gets
        there. The dict form takes any tensor name, also ones that are not Python identifiers
        or that clash with `stream`. Tensors bound here stay bound for later runs; a batch
        change unbinds the batch-dependent ones (set_batch).

        Errors: hkrt.FailedPrecondition (a tensor unbound, named), hkrt.InvalidArgument (a
        given array's shape or dtype, named), hkrt.NotFound (no such tensor; a batch the pack
        has no bucket for), hkrt.DriverError."""
        if inputs is not None and not isinstance(inputs, collections.abc.Mapping):
            if stream is not None:
                raise invalid("run() takes a dict of inputs or a stream as its first argument, and "
                              "stream= was given too")
            inputs, stream = None, inputs  # run(stream), the positional form of before
        h = self._handle()
        given = None
        if inputs is not None or named:
            given = dict(inputs or {})
            for name, obj in named.items():
                if name in given:
                    raise invalid("tensor '%s' given twice (in the dict and as a keyword)" % name)
                given[name] = obj
            self._fit_batch(given)
            for name, obj in given.items():
                self.bind(name, obj)
        self._prepare()
        _check(self._lib, self._lib.hk_session_run(h, _stream_handle(stream)))
        self._finish()
        if given is None:
            return None
        out = {}
        for t in self.tensors:
            if t.role == "output" and t.name in self._bound:
                out[t.name] = self._bound[t.name][0]
                if t.name in self._owned:
                    self._handed.add(t.name)
        return out

    def outputs(self, copy=True):
        """Host target: {name: NumPy array} of every output as the last run wrote it, copies
        unless copy=False (then the bound arrays themselves, overwritten by the next run unless
        run(inputs) returned them). Outputs the caller did not bind are allocated by the
        session; bfloat16 ones are ml_dtypes.bfloat16 arrays when ml_dtypes imports, else
        uint16 arrays of the raw bits."""
        if not self._host:
            raise make(10, "outputs() is for the host target; session target is %s (read the bound "
                       "device tensors instead)" % self.target)
        self._handle()
        self._allocate_outputs(_numpy(), replace_handed=False)
        out = {}
        for t in self.tensors:
            if t.role == "output":
                array, staging, _ = self._bound[t.name]
                out[t.name] = array.copy() if copy else array
        return out

    def synchronize(self, stream=None):
        """Waits for the work queued on `stream` to finish (hk_session_synchronize)."""
        _check(self._lib, self._lib.hk_session_synchronize(self._handle(), _stream_handle(stream)))

    # ---- batch
    def set_batch(self, batch):
        """Changes the batch (hk_session_set_batch). Tensors whose shape changes must be bound
        again (the session drops its references to them); the others stay bound.
        Errors: hkrt.NotFound (beyond the largest bucket, or not a bucket under the exact
        policy; the message lists the buckets)."""
        h = self._handle()
        before = {t.name: t for t in self.tensors}
        _check(self._lib, self._lib.hk_session_set_batch(h, batch))
        self._infos = None
        for t in self.tensors:
            if before[t.name].shape != t.shape:
                self._bound.pop(t.name, None)
                self._owned.discard(t.name)
                self._handed.discard(t.name)

    @property
    def batch(self):
        return self._lib.hk_session_batch(self._handle())

    @property
    def bucket(self):
        """The batch bucket the session runs (>= batch under the pad policy)."""
        return self._lib.hk_session_bucket(self._handle())

    @property
    def launch_mode(self):
        """(mode, reason): "graph" or "stream", and why a wanted GPU graph is not used ("" if not)."""
        reason = ctypes.c_char_p()
        mode = self._lib.hk_session_launch_mode(self._handle(), ctypes.byref(reason))
        return _str(mode), _str(reason.value) or ""

    @property
    def pdl_count(self):
        return self._lib.hk_session_pdl_count(self._handle())

    # ---- generation
    def generator(self):
        """A Generator over this session (a generation pack: docs/GENERATE.md). It binds the
        pack's step inputs and outputs itself; close it before the session."""
        return Generator(self)

    def generate(self, prompts, max_new_tokens=32, stop=(), temperature=0.0, top_k=0, top_p=1.0, seed=0):
        """Generation: prefills every prompt (a list of id sequences -- lists, 1-D NumPy arrays
        or tensors -- or a 2-D array, one prompt per row), each in its own cache slot, then
        decodes one token per sequence per step until max_new_tokens, a `stop` id (kept in the
        output) or the cache's max_seq. Greedy by default; temperature > 0 samples on the device
        (top_k, top_p, seed: Generator.set_sampling; prompt i draws with seed + i). Returns one
        list of new ids per prompt. Errors: hkrt.InvalidArgument (more prompts than slots, a
        prompt past max_seq or with ids outside the vocabulary), hkrt.FailedPrecondition (not a
        generation pack; sampling asked of a pack that decodes greedily)."""
        if max_new_tokens < 1:
            raise invalid("max_new_tokens must be at least 1, not %r" % max_new_tokens)
        seqs = [[int(t) for t in (p.tolist() if hasattr(p, "tolist") else p)] for p in prompts]
        stop = set(int(t) for t in stop)
        with Generator(self) as gen:
            for i in range(len(seqs)):
                gen.reset(i)
                gen.set_sampling(i, temperature, top_k, top_p, (int(seed) + i) & 0xffffffff)
            nxt = gen.append(list(range(len(seqs))), seqs)
            out = [[t] for t in nxt]
            live = [i for i in range(len(seqs))
                    if not (max_new_tokens <= 1 or out[i][-1] in stop or gen.length(i) >= gen.max_seq)]
            while live:
                nxt = gen.append(live, [[out[i][-1]] for i in live])
                for i, t in zip(live, nxt):
                    out[i].append(t)
                live = [i for i in live
                        if not (len(out[i]) >= max_new_tokens or out[i][-1] in stop or gen.length(i) >= gen.max_seq)]
        return out

    # ---- profiling
    def profile(self, repeats=20, stream=None):
        """Times every launch of the current bucket's graph alone (median of `repeats`, after a
        warm-up) and returns one LaunchProfile per launch, in launch order. Needs every input and
        param bound (host target: outputs are bound as run() does); the outputs are those of a
        normal run."""
        h = self._handle()
        if repeats < 1:
            raise invalid("repeats must be at least 1, not %r" % repeats)
        n = self._lib.hk_session_launch_count(h)
        us = (ctypes.c_double * max(n, 1))()
        self._prepare()
        _check(self._lib, self._lib.hk_session_profile(h, _stream_handle(stream), repeats, us))
        self._finish()
        out = []
        for i in range(n):
            c = _lib.LaunchInfoC()
            _check(self._lib, self._lib.hk_session_launch_info(h, i, ctypes.byref(c)))
            nodes = tuple(x for x in (_str(c.nodes) or "").split(",") if x)
            out.append(LaunchProfile(_str(c.kernel), nodes, us[i]))
        return out


class Generator:
    """Prefill and decode steps over a generation pack's KV caches (hk_generator_t; hkrt.h and
    docs/GENERATE.md). Each of the pack's `slots` cache slots holds one sequence; append()
    adds tokens to some of them in as few steps as the pack's buckets allow and returns the
    next id of each. Made by Session.generator(); close() (or a with block) frees it."""

    def __init__(self, session):
        self._session, self._lib = session, session._lib
        handle = ctypes.c_void_p()
        _check(self._lib, self._lib.hk_generator_create(session._handle(), ctypes.byref(handle)))
        self._h = handle.value
        self.slots = self._lib.hk_generator_slots(self._h)
        self.max_seq = self._lib.hk_generator_max_seq(self._h)
        self.vocab = self._lib.hk_generator_vocab(self._h)
        self.max_step = self._lib.hk_generator_max_step(self._h)

    def _handle(self):
        if not self._h:
            raise make(10, "the generator is closed")
        return self._h

    def close(self):
        if self._h:
            self._lib.hk_generator_destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def length(self, slot):
        """Tokens the slot's cache holds."""
        return self._lib.hk_generator_length(self._handle(), slot)

    def reset(self, slot):
        """Starts a new sequence in `slot` (the others keep theirs)."""
        _check(self._lib, self._lib.hk_generator_reset(self._handle(), slot))

    def append(self, slots, tokens):
        """Appends tokens[i] (a sequence of ids) to the sequence in slots[i]; returns the next
        id of each (hk_generator_append)."""
        n = len(slots)
        if n != len(tokens):
            raise invalid("%d slots but %d token lists" % (n, len(tokens)))
        arrays = [(ctypes.c_int32 * max(len(t), 1))(*[int(x) for x in t]) for t in tokens]
        ptrs = (ctypes.POINTER(ctypes.c_int32) * max(n, 1))(
            *[ctypes.cast(a, ctypes.POINTER(ctypes.c_int32)) for a in arrays])
        c_slots = (ctypes.c_uint32 * max(n, 1))(*slots)
        counts = (ctypes.c_uint32 * max(n, 1))(*[len(t) for t in tokens])
        out = (ctypes.c_int32 * max(n, 1))()
        _check(self._lib, self._lib.hk_generator_append(self._handle(), n, c_slots, ptrs, counts, out))
        return [out[i] for i in range(n)]

    def set_sampling(self, slot, temperature=0.0, top_k=0, top_p=1.0, seed=0):
        """How `slot` draws its next tokens (hk_generator_set_sampling): temperature <= 0 or
        top_k == 1 greedy; else softmax(logits / temperature) over the top_k largest (0: all)
        and the smallest set of them holding top_p of the probability, drawn on the device with
        noise from (seed, position)."""
        c = _lib.SamplingC(float(temperature), int(top_k), float(top_p), int(seed) & 0xffffffff)
        _check(self._lib, self._lib.hk_generator_set_sampling(self._handle(), slot, ctypes.byref(c)))

    def logits(self, index):
        """The logits behind the last append's out id `index`, as a float32 NumPy array."""
        np = _numpy()
        out = np.empty(self.vocab, dtype=np.float32)
        _check(self._lib, self._lib.hk_generator_logits(
            self._handle(), index, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), out.size))
        return out
