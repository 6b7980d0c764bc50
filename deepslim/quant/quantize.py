"""quantize_graph: an fp32 IR graph -> a graph with u8 activations, i8 weights and integer ops."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from deepslim.ir.graph import Graph

__all__ = ["quantize_graph"]


def quantize_graph(graph: Graph, *, calib: np.ndarray | None = None,
                   ranges: dict[str, tuple[float, float]] | None = None, method: str = "minmax",
                   keep_fp32: Iterable[str] = (), weight_bits: int = 8) -> Graph:
    """Quantize an fp32 graph (after optimize()).

    calib: calibration inputs (N, ...) run through the float reference executor to collect the
        activation statistics `method` needs ("minmax", "percentile", "kl", "mse"); or
    ranges: explicit real ranges (lo, hi) per activation value name (e.g. from QAT); values it does
        not name are calibrated from `calib` if given, otherwise an error.
    keep_fp32: node names to keep in float (an fp32 island converts only at its boundary).
    weight_bits: 8, or 4 (int4 weights stored as 4-bit i8).

    Returns a new graph: quantize after the graph input, dequantize before each output.
    """
    raise NotImplementedError("quantize_graph is being written")
