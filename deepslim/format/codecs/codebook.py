"""Weight sharing: map values to the index of the identical codebook entry, and back."""

from __future__ import annotations

import numpy as np

from deepslim.format.errors import DsmFormatError


def codebook_indices(values: np.ndarray, codebook: np.ndarray, what: str = "tensor") -> np.ndarray:
    """Index of each value in `codebook` (exact float32 match); raises naming `what` otherwise."""
    values = np.asarray(values, dtype=np.float32).ravel()
    codebook = np.asarray(codebook, dtype=np.float32).ravel()
    if len(codebook) == 0:
        raise DsmFormatError(f"{what}: the codebook is empty")
    order = np.argsort(codebook, kind="stable")
    sorted_book = codebook[order]
    pos = np.clip(np.searchsorted(sorted_book, values), 0, len(codebook) - 1)
    missing = sorted_book[pos] != values
    if np.any(missing):
        i = int(np.argmax(missing))
        raise DsmFormatError(
            f"{what}: value {float(values[i])!r} (element {i} of the stored values) is not in the codebook"
        )
    return order[pos].astype(np.uint16)


def codebook_lookup(indices: np.ndarray, codebook: np.ndarray, what: str = "tensor") -> np.ndarray:
    """codebook[indices] as float32; raises if an index is not less than the codebook's count."""
    indices = np.asarray(indices)
    if len(indices) and int(indices.max()) >= len(codebook):
        i = int(np.argmax(indices >= len(codebook)))
        raise DsmFormatError(
            f"{what}: cluster index {int(indices[i])} (entry {i}) is not less than the "
            f"codebook's count {len(codebook)}"
        )
    return np.asarray(codebook, dtype=np.float32)[indices]
