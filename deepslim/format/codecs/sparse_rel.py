"""Relative indexing of a sparse tensor (Deep Compression; docs/format.md, "sparse_rel").

Each entry stores the number of zeros skipped since the previous entry in `index_bits` bits. A run
of zeros longer than 2^index_bits - 1 is bridged by *filler* entries: index 2^index_bits - 1 and
value 0.0, each advancing the position by 2^index_bits.
"""

from __future__ import annotations

import numpy as np

from deepslim.format.errors import DsmFormatError


def sparse_rel_encode(flat: np.ndarray, index_bits: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Flat array -> (relative indices uint16, values, number of filler entries)."""
    if not 1 <= index_bits <= 16:
        raise DsmFormatError(f"sparse_rel: index_bits must be in 1..16, got {index_bits}")
    flat = np.asarray(flat).ravel()
    nz = np.flatnonzero(flat)
    gaps = np.diff(nz, prepend=-1) - 1  # zeros skipped before each nonzero
    fillers = gaps >> index_bits
    remainder = gaps & ((1 << index_bits) - 1)
    total = len(nz) + int(fillers.sum())
    indices = np.full(total, (1 << index_bits) - 1, dtype=np.uint16)
    values = np.zeros(total, dtype=flat.dtype)
    real = np.cumsum(fillers + 1) - 1  # where each nonzero's entry lands
    indices[real] = remainder
    values[real] = flat[nz]
    return indices, values, total - len(nz)


def sparse_rel_positions(indices: np.ndarray, size: int, what: str = "sparse_rel") -> np.ndarray:
    """Flat positions of the entries; raises if one passes `size` (the element count)."""
    positions = np.cumsum(np.asarray(indices, dtype=np.int64) + 1) - 1
    if len(positions) and positions[-1] >= size:
        first = int(np.argmax(positions >= size))
        raise DsmFormatError(
            f"{what}: entry {first} lands at position {int(positions[first])}, "
            f"past the element count {size}"
        )
    return positions


def sparse_rel_decode(indices: np.ndarray, values: np.ndarray, size: int, what: str = "sparse_rel",
                      dtype=np.float32) -> np.ndarray:
    """(relative indices, values) -> flat array of `size` elements of `dtype` (float32 by default)."""
    if len(indices) != len(values):
        raise DsmFormatError(f"{what}: {len(indices)} indices but {len(values)} values")
    positions = sparse_rel_positions(indices, size, what)
    out = np.zeros(size, dtype=dtype)
    out[positions] = values
    return out
