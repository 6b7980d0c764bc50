"""MSB-first bit streams (docs/format.md, "Bit order"), vectorised with numpy.

Bit `k` of a stream is bit `7 - k % 8` of byte `k // 8`; unused bits of the last byte are zero.
"""

from __future__ import annotations

import numpy as np

from deepslim.format.errors import DsmFormatError

MAX_CODE_BITS = 16


def pack_codes(codes: np.ndarray, lengths: np.ndarray) -> bytes:
    """Concatenate codes of varying widths, each `lengths[i]` bits (0..16), MSB first, into bytes."""
    codes = np.asarray(codes, dtype=np.uint32).ravel()
    lengths = np.asarray(lengths, dtype=np.int64).ravel()
    if codes.shape != lengths.shape:
        raise DsmFormatError(f"pack_codes: {codes.size} codes but {lengths.size} lengths")
    if codes.size == 0:
        return b""
    width = int(lengths.max())
    if width == 0:
        return b""
    if width > MAX_CODE_BITS or lengths.min() < 0:
        raise DsmFormatError(f"pack_codes: code lengths must be in 0..{MAX_CODE_BITS}")
    if np.any(codes >> lengths.astype(np.uint32) != 0):
        raise DsmFormatError("pack_codes: a code does not fit in its length")
    # Left-align every code in a `width`-bit field, spread the fields into bits, keep the used ones.
    aligned = codes << (width - lengths).astype(np.uint32)
    shifts = np.arange(width - 1, -1, -1, dtype=np.uint32)
    bits = ((aligned[:, None] >> shifts) & 1).astype(np.uint8)
    keep = np.arange(width)[None, :] < lengths[:, None]
    return np.packbits(bits[keep]).tobytes()


def pack_fixed(symbols: np.ndarray, width: int) -> bytes:
    """Concatenate `width`-bit unsigned symbols (1..16), MSB first."""
    if not 1 <= width <= MAX_CODE_BITS:
        raise DsmFormatError(f"pack_fixed: width must be in 1..{MAX_CODE_BITS}, got {width}")
    symbols = np.asarray(symbols).ravel()
    if symbols.size == 0:
        return b""
    if symbols.min() < 0 or int(symbols.max()) >> width:
        raise DsmFormatError(f"pack_fixed: a symbol does not fit in {width} bits")
    symbols = symbols.astype(np.uint32)
    shifts = np.arange(width - 1, -1, -1, dtype=np.uint32)
    bits = ((symbols[:, None] >> shifts) & 1).astype(np.uint8)
    return np.packbits(bits.ravel()).tobytes()


def unpack_fixed(data: bytes, count: int, width: int) -> np.ndarray:
    """Read `count` `width`-bit symbols from the start of `data`; returns uint16."""
    if not 1 <= width <= MAX_CODE_BITS:
        raise DsmFormatError(f"unpack_fixed: width must be in 1..{MAX_CODE_BITS}, got {width}")
    nbits = count * width
    if count < 0 or nbits > 8 * len(data):
        raise DsmFormatError(
            f"unpack_fixed: {count} symbols of {width} bits need {nbits} bits, stream has {8 * len(data)}"
        )
    if count == 0:
        return np.zeros(0, dtype=np.uint16)
    raw = np.frombuffer(data, dtype=np.uint8, count=(nbits + 7) // 8)
    bits = np.unpackbits(raw, count=nbits).reshape(count, width)
    weights = (1 << np.arange(width - 1, -1, -1)).astype(np.uint16)
    return (bits.astype(np.uint16) * weights).sum(axis=1, dtype=np.uint16)


def windows16(data: bytes, nbits: int) -> np.ndarray:
    """For every bit position p < nbits, the 16 stream bits starting at p (zeros past the end)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    padded = np.zeros(len(raw) + 3, dtype=np.uint32)
    padded[: len(raw)] = raw
    word = (padded[:-2] << 16) | (padded[1:-1] << 8) | padded[2:]  # 24 bits from each byte
    out = np.empty((len(raw), 8), dtype=np.uint32)
    for r in range(8):  # bit position 8k + r
        np.bitwise_and(word[:-1] >> (8 - r), 0xFFFF, out=out[:, r])
    return out.ravel()[:nbits]
