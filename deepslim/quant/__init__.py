"""Post-training quantization to int8, with optional int16 activations (docs/quantization.md):
calibration, the graph transform and the bit-exact integer reference executor. Needs numpy (and
onnx for ONNX input) only.

    quantize_graph(graph, calib=..., method="kl")   fp32 IR graph -> quantized IR graph
    run_quantized(graph, x)                          integer reference for ops 25-33
"""

from deepslim.quant.quantize import quantize_graph
from deepslim.quant.reference import run_quantized

__all__ = ["quantize_graph", "run_quantized"]
