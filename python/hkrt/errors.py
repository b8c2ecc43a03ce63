# SPDX-License-Identifier: Apache-2.0
"""hkrt.Error and one subclass per hk_status_t (loader/include/hk/hkrt.h; the codes are pinned)."""


class Error(Exception):
    """A libhkrt call failed, or a check this module makes before calling it.

    status: the hk_status_t code (int); status_name: its name ("NOT_FOUND", ...);
    message: the detail, hk_last_error()'s text for failures of the library."""

    def __init__(self, status, status_name, message):
        super().__init__("%s: %s" % (status_name, message) if message else status_name)
        self.status, self.status_name, self.message = status, status_name, message


class InvalidArgument(Error, ValueError):
    """A caller mistake: a wrong shape, dtype, size, alignment, or name."""


class NotFound(Error, LookupError):
    """No such tensor, target or batch bucket."""


class Corrupt(Error):
    """The artifact failed verification."""


class UnsupportedVersion(Error):
    """The artifact's format is newer than this libhkrt reads."""


class Unavailable(Error):
    """A vendor runtime, a device, or libhkrt itself is missing."""


class OutOfMemory(Error, MemoryError):
    pass


class IOFailure(Error, OSError):
    """Opening or reading a file failed."""


class NoCompatibleTarget(Error):
    """Nothing in the pack runs on this machine."""


class DriverError(Error):
    """A driver or runtime call failed."""


class FailedPrecondition(Error):
    """E.g. a run before every tensor is bound, or a use of a closed pack or session."""


class InternalError(Error):
    pass


class Busy(Error):
    """Another thread is inside a call on the same session; nothing was done."""


class Untrusted(Error):
    """The trust policy refused the pack (unsigned host code, an untrusted or bad signature)."""


# hk_status_t -> (name, class); the order of the C enum, which is never renumbered.
STATUSES = {
    1: ("INVALID_ARGUMENT", InvalidArgument), 2: ("NOT_FOUND", NotFound), 3: ("CORRUPT", Corrupt),
    4: ("UNSUPPORTED_VERSION", UnsupportedVersion), 5: ("UNAVAILABLE", Unavailable),
    6: ("OUT_OF_MEMORY", OutOfMemory), 7: ("IO", IOFailure), 8: ("NO_COMPATIBLE_TARGET", NoCompatibleTarget),
    9: ("DRIVER", DriverError), 10: ("FAILED_PRECONDITION", FailedPrecondition), 11: ("INTERNAL", InternalError),
    12: ("BUSY", Busy), 13: ("UNTRUSTED", Untrusted),
}


def make(status, message):
    """The exception for a status code (a plain Error for a code this module does not know)."""
    name, cls = STATUSES.get(status, ("UNKNOWN_STATUS_%d" % status, Error))
    return cls(status, name, message)


def invalid(message):
    return make(1, message)
