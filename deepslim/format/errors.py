"""Errors raised while writing or reading a .dsm file. Each message names the field at fault."""


class DsmFormatError(ValueError):
    """A .dsm file (or a stream inside it) is malformed, or a graph cannot be stored as one."""


class DsmVersionError(DsmFormatError):
    """The file's format version is not one this reader knows."""


class DsmChecksumError(DsmFormatError):
    """A section's or a stream's CRC-32 does not match its bytes."""
