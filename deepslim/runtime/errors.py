"""Exception classes, one per C API status code (native/include/deepslim/deepslim.h)."""


class DsmRuntimeError(RuntimeError):
    """A call into the native runtime failed; the message is the runtime's own."""

    status = -1


class InvalidArgumentError(DsmRuntimeError, ValueError):
    status = 1


class RuntimeIOError(DsmRuntimeError, OSError):
    status = 2


class FormatError(DsmRuntimeError, ValueError):
    status = 3


class VersionError(FormatError):
    status = 4


class ChecksumError(FormatError):
    status = 5


class UnsupportedOpError(DsmRuntimeError):
    status = 6


class ShapeError(DsmRuntimeError, ValueError):
    status = 7


class OutOfMemoryError(DsmRuntimeError, MemoryError):
    status = 8


class InternalError(DsmRuntimeError):
    status = 9


BY_STATUS: dict[int, type[DsmRuntimeError]] = {
    cls.status: cls
    for cls in (
        InvalidArgumentError,
        RuntimeIOError,
        FormatError,
        VersionError,
        ChecksumError,
        UnsupportedOpError,
        ShapeError,
        OutOfMemoryError,
        InternalError,
    )
}
