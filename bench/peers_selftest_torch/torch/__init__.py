"""A FAKE of the small part of PyTorch that bench/peers_torch.py and tests/device/check.py
use, backed by NumPy on the CPU, for bench/peers_selftest.py only (this machine has no
PyTorch). It runs the benchmark's control flow -- data, the spec module, the five systems,
comparisons, timing, compile phases, the fresh-process worker, the JSON records -- so that
mistakes in that flow show here; it proves nothing about PyTorch itself. "CUDA" work runs
at once on the CPU; events read the host clock; graphs replay nothing (their outputs were
computed at capture); torch.compile returns the module. bf16 values are rounded to bf16
but stored as float32 (bind only f32 tensors to a pack).

Knobs for the tests: FAKE_TORCH_GRAPH_BREAK=1 makes fullgraph=True compiles fail;
FAKE_TORCH_COMPILE_SLEEP=S makes each max-autotune first call take S seconds.
"""
import os
import time

import numpy as np

__version__ = "0.0-fake"


class _Version:
    cuda = "0.0-fake"


version = _Version()


class dtype:
    def __init__(self, name, size):
        self.name, self.size = name, size

    def __repr__(self):
        return "torch." + self.name


float32 = dtype("float32", 4)
float16 = dtype("float16", 2)
bfloat16 = dtype("bfloat16", 2)
float64 = dtype("float64", 8)


def _round(a, dt):
    if dt is float64:
        return np.asarray(a, dtype=np.float64)
    f = np.asarray(a, dtype=np.float32)
    if dt is float16:
        return f.astype(np.float16).astype(np.float32)
    if dt is bfloat16:
        u = f.view(np.uint32).astype(np.uint64)
        u = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
        return u.view(np.float32)
    return f


class device:
    def __init__(self, kind):
        self.type = kind

    def __repr__(self):
        return "device(%r)" % self.type


class Tensor:
    def __init__(self, a, dt=float32, dev="cuda"):
        self.dtype = dt
        self.a = np.ascontiguousarray(_round(a, dt))
        self.device = device(dev) if isinstance(dev, str) else dev

    # --- properties
    @property
    def shape(self):
        return Size(self.a.shape)

    @property
    def T(self):
        return Tensor(self.a.T, self.dtype, self.device)

    def numel(self):
        return self.a.size

    def element_size(self):
        return self.a.itemsize

    def data_ptr(self):
        return self.a.ctypes.data

    def is_contiguous(self):
        return self.a.flags.c_contiguous

    def dim(self):
        return self.a.ndim

    # --- conversions
    def to(self, dt):
        return Tensor(self.a, dt, self.device)

    def double(self):
        return Tensor(self.a, float64, self.device)

    def float(self):
        return Tensor(self.a, float32, self.device)

    def clone(self):
        return Tensor(self.a.copy(), self.dtype, self.device)

    def contiguous(self):
        return Tensor(self.a, self.dtype, self.device)

    def cpu(self):
        return Tensor(self.a, self.dtype, "cpu")

    def numpy(self):
        return self.a

    def item(self):
        return self.a.item()

    def __bool__(self):
        return bool(self.a)

    # --- shape
    def reshape(self, *s):
        return Tensor(self.a.reshape(*s), self.dtype, self.device)

    view = reshape

    def t(self):
        return self.T

    def transpose(self, i, j):
        return Tensor(np.swapaxes(self.a, i, j), self.dtype, self.device)

    def __getitem__(self, idx):
        return Tensor(self.a[idx], self.dtype, self.device)

    # --- math
    def _bin(self, o, f):
        dt = self.dtype
        if isinstance(o, Tensor) and float64 in (self.dtype, o.dtype):
            dt = float64
        return Tensor(f(self.a, o.a if isinstance(o, Tensor) else o), dt, self.device)

    def __add__(self, o):
        return self._bin(o, np.add)

    __radd__ = __add__

    def __sub__(self, o):
        return self._bin(o, np.subtract)

    def __mul__(self, o):
        return self._bin(o, np.multiply)

    __rmul__ = __mul__

    def __truediv__(self, o):
        return self._bin(o, np.divide)

    def __rtruediv__(self, o):
        return Tensor(o / self.a, self.dtype, self.device)

    def __rpow__(self, o):
        return Tensor(np.power(o, self.a), self.dtype, self.device)

    def __neg__(self):
        return Tensor(-self.a, self.dtype, self.device)

    def __matmul__(self, o):
        return self._bin(o, np.matmul)

    def cos(self):
        return Tensor(np.cos(self.a), self.dtype, self.device)

    def sin(self):
        return Tensor(np.sin(self.a), self.dtype, self.device)

    def max(self):
        return Tensor(np.max(self.a), self.dtype, self.device)

    def all(self):
        return Tensor(np.all(self.a), float32, self.device)

    def __repr__(self):
        return "FakeTensor(%s, %s)" % (list(self.a.shape), self.dtype)


class Size(tuple):
    pass


class Parameter(Tensor):
    def __init__(self, t, requires_grad=True):
        super().__init__(t.a, t.dtype, t.device)


def _dev(d):
    return d if d is not None else "cpu"


class Generator:
    def __init__(self, device=None):
        self.rng = np.random.default_rng(0)

    def manual_seed(self, s):
        self.rng = np.random.default_rng(s)
        return self


def randn(shape, generator=None, device=None, dtype=float32):
    rng = generator.rng if generator else np.random.default_rng()
    return Tensor(rng.standard_normal(tuple(shape)), dtype, _dev(device))


def zeros(shape, dtype=float32, device=None):
    return Tensor(np.zeros(tuple(shape)), dtype, _dev(device))


def empty(*shape, dtype=float32, device=None):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = shape[0]
    return Tensor(np.zeros(tuple(shape)), dtype, _dev(device))


def empty_like(t):
    return Tensor(np.zeros(t.a.shape), t.dtype, t.device)


def full(shape, value, dtype=float32, device=None):
    return Tensor(np.full(tuple(shape), value), dtype, _dev(device))


def arange(start, end=None, step=1, device=None, dtype=float32):
    if end is None:
        start, end = 0, start
    return Tensor(np.arange(start, end, step), dtype, _dev(device))


def outer(a, b):
    return Tensor(np.outer(a.a, b.a), a.dtype, a.device)


def cat(ts, dim=0):
    return Tensor(np.concatenate([t.a for t in ts], axis=dim), ts[0].dtype, ts[0].device)


def split(t, sizes, dim=0):
    idx = np.cumsum(sizes)[:-1]
    return tuple(Tensor(x, t.dtype, t.device) for x in np.split(t.a, idx, axis=dim))


def isfinite(t):
    return Tensor(np.isfinite(t.a), float32, t.device)


def abs(t):  # noqa: A001
    return Tensor(np.abs(t.a), t.dtype, t.device)


def as_tensor(x, dtype=float32, device=None):
    return Tensor(np.asarray(x), dtype, _dev(device))


class _Linalg:
    @staticmethod
    def vector_norm(t):
        return Tensor(np.linalg.norm(t.a.ravel()), t.dtype, t.device)


linalg = _Linalg()


class no_grad:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False

    def __call__(self, f):
        def g(*a, **k):
            return f(*a, **k)
        return g


def compile(model, mode=None, dynamic=None, fullgraph=False, **kw):  # noqa: A001
    if fullgraph and os.environ.get("FAKE_TORCH_GRAPH_BREAK") == "1":
        def broken(*a):
            raise RuntimeError("Unsupported: fake graph break")
        return broken
    state = {"first": True}

    def compiled(*a):
        if state["first"]:
            state["first"] = False
            time.sleep(0.05)
            if mode == "max-autotune":
                t_end = time.time() + float(os.environ.get("FAKE_TORCH_COMPILE_SLEEP", "0"))
                while time.time() < t_end:
                    time.sleep(0.01)
        return model(*a)
    return compiled


class _Compiler:
    @staticmethod
    def cudagraph_mark_step_begin():
        pass


compiler = _Compiler()

from . import nn  # noqa: E402
from . import cuda  # noqa: E402
from . import backends  # noqa: E402
from . import _dynamo  # noqa: E402
