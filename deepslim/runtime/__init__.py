"""Run .dsm models with the native runtime. Needs numpy only (never torch).

    from deepslim.runtime import Session
    s = Session("lenet5.dsm", threads=1)
    y = s.run(x)          # x: float32 NCHW numpy array
"""

from deepslim.runtime.errors import (
    ChecksumError,
    DsmRuntimeError,
    FormatError,
    InternalError,
    InvalidArgumentError,
    ShapeError,
    UnsupportedOpError,
    VersionError,
)
from deepslim.runtime.session import Session, library_path, runtime_version

__all__ = [
    "Session",
    "library_path",
    "runtime_version",
    "DsmRuntimeError",
    "InvalidArgumentError",
    "FormatError",
    "VersionError",
    "ChecksumError",
    "UnsupportedOpError",
    "ShapeError",
    "InternalError",
]
