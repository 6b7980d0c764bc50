"""int8 against fp32 in our runtime, and against the int8 peers, on a zoo model (random weights).

    .venv/bin/python tools/bench_int8.py resnet18 --threads 1 [--seconds 3] [--fallback measure|none]

Makes (under results/bench/int8): our int8 .dsm with `deepslim quantize` (8 random calibration
inputs), ONNX Runtime's static QDQ int8 model (per-channel i8 weights, u8 activations, the same
inputs), then times deepslim fp32, deepslim int8, ONNX Runtime int8 and OpenVINO int8 (the QDQ
model, OpenVINO's own low-precision path) interleaved round by round, and prints medians.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

from deepslim.bench.engines import Deepslim, EngineUnavailable, OnnxRuntime, OpenVino
from deepslim.bench.run import _time_interleaved, cpu_model, prepare


def ort_qdq(onnx_path: Path, calib: np.ndarray, out: Path) -> Path:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self):
            import onnx

            self.name = onnx.load(str(onnx_path)).graph.input[0].name
            self.items = iter(calib[i : i + 1] for i in range(len(calib)))

        def get_next(self):
            x = next(self.items, None)
            return None if x is None else {self.name: x}

    pre = out.with_suffix(".pre.onnx")
    quant_pre_process(str(onnx_path), str(pre))
    quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return out


class OpenVinoInt8(OpenVino):
    """OpenVINO on a QDQ model: no f32 precision hint, so its int8 kernels run."""

    name = "openvino-int8"

    def __init__(self, onnx_path: Path, threads: int):
        super().__init__(onnx_path, threads)
        self.config = {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}


def build_int8(model: str, threads: int, fallback: str = "measure"):
    """(prepared fp32 model, our int8 .dsm, the QDQ .onnx, the calibration inputs) under
    results/bench/int8, made as described above (tools/compare_layers.py --int8 uses the same)."""
    work = Path("results/bench/int8")
    work.mkdir(parents=True, exist_ok=True)
    prepared = prepare(model, Path("results/bench"))
    calib = np.random.default_rng(0).standard_normal((8, *prepared.input_shape)).astype(np.float32)
    calib_path = work / f"{model}.calib.npy"
    np.save(calib_path, calib)
    ours_int8 = work / f"{model}_int8.dsm"
    subprocess.run([sys.executable, "-m", "deepslim.cli", "quantize", str(prepared.onnx), "--calib", str(calib_path),
                    "-o", str(ours_int8), "--fallback", fallback, "--threads", str(threads)], check=True)
    qdq = ort_qdq(prepared.onnx, calib, work / f"{model}_qdq.onnx")
    return prepared, ours_int8, qdq, calib


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="zoo model name, e.g. mobilenet_v2, resnet18")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--fallback", default="measure", choices=["measure", "none"])
    args = ap.parse_args()
    prepared, ours_int8, qdq, calib = build_int8(args.model, args.threads, args.fallback)
    engines = {"deepslim fp32": Deepslim(prepared.dsm, args.threads), "deepslim int8": Deepslim(ours_int8, args.threads)}
    for name, make in (("onnxruntime int8", OnnxRuntime), ("openvino int8", OpenVinoInt8)):
        try:
            engines[name] = make(qdq, args.threads)
        except EngineUnavailable as e:
            print(f"note: {name} skipped: {e}")
    x = calib[:1]
    ref = engines["deepslim fp32"].run(x)
    scale = float(np.abs(ref).max()) or 1.0
    for name, e in engines.items():
        diff = float(np.abs(e.run(x) - ref).max())
        print(f"{name}: max abs diff to deepslim fp32 {diff:.3g} ({diff / scale:.3g} of max |y| = {scale:.3g})")
    samples = _time_interleaved(engines, x, args.seconds, pause=0.005 if args.threads > 1 else 0.0)
    fp32 = float(np.median(samples["deepslim fp32"]))
    print(f"\n{args.model}, batch 1, threads {args.threads}, CPU {cpu_model()}")
    print("| engine | median ms | min | p10 | p90 | / deepslim fp32 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, s in samples.items():
        p10, p50, p90 = np.percentile(s, [10, 50, 90])
        print(f"| {name} | {p50:.3f} | {np.min(s):.3f} | {p10:.3f} | {p90:.3f} | {p50 / fp32:.2f} |")


if __name__ == "__main__":
    main()
