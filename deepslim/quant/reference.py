"""Bit-exact integer reference executor for quantized graphs (docs/format.md, ops 25-32)."""

from __future__ import annotations

import numpy as np

from deepslim.ir.graph import Graph

__all__ = ["run_quantized"]


def run_quantized(graph: Graph, x):
    """Run a quantized graph: integer ops exactly, float ops as deepslim.frontends.reference."""
    raise NotImplementedError("run_quantized is being written")
