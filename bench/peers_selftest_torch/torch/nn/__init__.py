"""FAKE torch.nn (bench/peers_selftest.py only)."""
from .. import Parameter  # noqa: F401
from . import functional  # noqa: F401


class Module:
    def __init__(self):
        object.__setattr__(self, "_buffers", {})

    def register_parameter(self, name, p):
        object.__setattr__(self, name, p)

    def register_buffer(self, name, t, persistent=True):
        object.__setattr__(self, name, t)

    def eval(self):
        return self

    def __call__(self, *a, **k):
        return self.forward(*a, **k)
