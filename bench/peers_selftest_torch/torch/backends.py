"""FAKE torch.backends (bench/peers_selftest.py only)."""


class cudnn:
    @staticmethod
    def is_available():
        return False

    @staticmethod
    def version():
        return None
