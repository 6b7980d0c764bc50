"""bitpack: fixed-width unsigned symbols, MSB first (docs/format.md, "bitpack")."""

from __future__ import annotations

import numpy as np

from deepslim.format.codecs.bitio import pack_fixed, unpack_fixed
from deepslim.format.errors import DsmFormatError


def bitpack_size(count: int, bits: int) -> int:
    """Bytes of a bitpack stream of `count` symbols of `bits` bits."""
    return (count * bits + 7) // 8


def bitpack_encode(symbols: np.ndarray, bits: int) -> bytes:
    """Pack symbols (each < 2^bits, bits in 1..16) into ceil(n * bits / 8) bytes."""
    return pack_fixed(symbols, bits)


def bitpack_decode(data: bytes, count: int, bits: int) -> np.ndarray:
    """Unpack `count` symbols; the stream must be exactly ceil(count * bits / 8) bytes."""
    if len(data) != bitpack_size(count, bits):
        raise DsmFormatError(
            f"bitpack stream of {count} symbols x {bits} bits must be "
            f"{bitpack_size(count, bits)} bytes, is {len(data)}"
        )
    return unpack_fixed(data, count, bits)
