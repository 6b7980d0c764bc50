"""The .dsm file format (docs/format.md): writer, reader, storage details. Needs numpy only."""

from deepslim.format.dsm import (
    DsmInfo, TensorReport, WriteReport, encode_dsm, load_dsm, read_dsm, read_dsm_info, write_dsm,
)
from deepslim.format.errors import DsmChecksumError, DsmFormatError, DsmVersionError
from deepslim.format.tensors import StreamInfo, TensorInfo

__all__ = [
    "DsmChecksumError", "DsmFormatError", "DsmInfo", "DsmVersionError", "StreamInfo", "TensorInfo",
    "TensorReport", "WriteReport", "encode_dsm", "load_dsm", "read_dsm", "read_dsm_info", "write_dsm",
]
