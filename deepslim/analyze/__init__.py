"""Counts and cost models of an IR graph (numpy only): parameters, MACs, bytes, memory, energy.

    stats = analyze(graph)          # one LayerStats per node, batch 1
    print(format_analysis(stats))   # aligned table with totals and a legend
"""

from deepslim.analyze.shapes import infer_shapes, window_output_size
from deepslim.analyze.stats import LayerStats, Totals, analyze, stored_bytes, totals
from deepslim.analyze.table import format_analysis

__all__ = [
    "LayerStats", "Totals", "analyze", "format_analysis", "infer_shapes", "stored_bytes", "totals",
    "window_output_size",
]
