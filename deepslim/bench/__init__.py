"""`deepslim bench`: our runtime beside PyTorch, ONNX Runtime, ncnn and OpenVINO on the same model,
input and thread count. Engines are interleaved round by round so machine drift hits all alike;
each engine's output is checked against ours before it is timed."""

from deepslim.bench.run import BenchResult, bench, format_results

__all__ = ["BenchResult", "bench", "format_results"]
