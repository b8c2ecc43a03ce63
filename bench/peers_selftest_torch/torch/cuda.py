"""FAKE torch.cuda: work happens at once on the CPU (bench/peers_selftest.py only)."""
import contextlib
import time


def is_available():
    return True


def init():
    pass


def synchronize():
    pass


def empty_cache():
    pass


def get_device_name(i=0):
    return "FAKE GPU"


class _Props:
    multi_processor_count = 1
    major, minor = 0, 0


def get_device_properties(i=0):
    return _Props()


class Event:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return (other.t - self.t) * 1e3


class Stream:
    cuda_stream = 0

    def wait_stream(self, other):
        pass


_current = Stream()


def current_stream():
    return _current


@contextlib.contextmanager
def stream(s):
    yield


class CUDAGraph:
    def replay(self):
        pass  # the outputs were computed during "capture"


@contextlib.contextmanager
def graph(g, pool=None):
    yield
