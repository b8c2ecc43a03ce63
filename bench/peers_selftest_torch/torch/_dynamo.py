"""FAKE torch._dynamo (bench/peers_selftest.py only)."""


def reset():
    pass
