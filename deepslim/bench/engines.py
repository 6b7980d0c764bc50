"""The engines `deepslim bench` compares: our runtime and the peers (PyTorch, ONNX Runtime, ncnn,
OpenVINO). Each peer is optional: `load_engine` raises EngineUnavailable with the reason when its
package or a conversion is missing, and the benchmark goes on without it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np


class EngineUnavailable(RuntimeError):
    """The engine cannot run here (package missing, model not convertible); the message says why."""


class Engine:
    name = "?"

    def run(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError


class Deepslim(Engine):
    name = "deepslim"

    def __init__(self, dsm: Path, threads: int):
        from deepslim.runtime import Session

        self.session = Session(dsm, threads=threads)

    def run(self, x):
        return self.session.run(x)


class Torch(Engine):
    name = "pytorch"

    def __init__(self, model, threads: int):
        import torch

        if model is None:
            raise EngineUnavailable("no PyTorch model (benchmark a zoo model by name to include PyTorch)")
        torch.set_num_threads(threads)
        self.torch = torch
        self.model = model.eval()

    def run(self, x):
        with self.torch.inference_mode():
            return self.model(self.torch.from_numpy(x)).numpy()


class OnnxRuntime(Engine):
    name = "onnxruntime"

    def __init__(self, onnx_path: Path, threads: int):
        try:
            import onnxruntime as ort
        except ImportError:
            raise EngineUnavailable("onnxruntime is not installed (pip install onnxruntime)") from None
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        self.input = self.session.get_inputs()[0].name

    def run(self, x):
        return self.session.run(None, {self.input: x})[0]


class OpenVino(Engine):
    name = "openvino"

    def __init__(self, onnx_path: Path, threads: int):
        try:
            import openvino as ov
        except ImportError:
            raise EngineUnavailable("openvino is not installed (pip install openvino)") from None
        core = ov.Core()
        self.compiled = {}
        self.core, self.onnx_path, self.threads = core, onnx_path, threads
        self.config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32",
                       "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1}

    def _request(self, shape):
        if shape not in self.compiled:
            model = self.core.read_model(str(self.onnx_path))
            model.reshape({model.inputs[0].any_name: list(shape)})
            self.compiled[shape] = self.core.compile_model(model, "CPU", self.config).create_infer_request()
        return self.compiled[shape]

    def run(self, x):
        request = self._request(x.shape)
        request.infer({0: x})
        return request.get_output_tensor(0).data.copy()


class Ncnn(Engine):
    """ncnn runs one image at a time; a batch is a loop over its images. fp32 options throughout."""

    name = "ncnn"

    def __init__(self, onnx_path: Path, threads: int, input_shape: tuple[int, ...]):
        try:
            import ncnn
        except ImportError:
            raise EngineUnavailable("ncnn is not installed (pip install ncnn)") from None
        param, binary = _ncnn_files(onnx_path, input_shape)
        net = ncnn.Net()
        net.opt.num_threads = threads
        for flag in ("use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic", "use_bf16_storage",
                     "use_int8_inference"):
            setattr(net.opt, flag, False)
        if net.load_param(str(param)) != 0 or net.load_model(str(binary)) != 0:
            raise EngineUnavailable(f"ncnn could not load {param}")
        self.ncnn, self.net = ncnn, net

    def run(self, x):
        outs = []
        for image in x:
            with self.net.create_extractor() as ex:
                ex.input("in0", self.ncnn.Mat(np.ascontiguousarray(image)))
                status, out = ex.extract("out0")
                if status != 0:
                    raise RuntimeError(f"ncnn extract failed with status {status}")
                outs.append(np.array(out).reshape(-1))
        return np.stack(outs)


def _ncnn_files(onnx_path: Path, input_shape: tuple[int, ...]) -> tuple[Path, Path]:
    """Convert the ONNX model with pnnx (pip install pnnx) once; the files sit beside it."""
    param = onnx_path.with_suffix(".ncnn.param")
    binary = onnx_path.with_suffix(".ncnn.bin")
    if param.exists() and binary.exists():
        return param, binary
    try:
        import pnnx
    except ImportError:
        raise EngineUnavailable("ncnn needs the model converted by pnnx, which is not installed (pip install pnnx)") from None
    exe = Path(getattr(pnnx, "EXEC_PATH", "")) if getattr(pnnx, "EXEC_PATH", None) else None
    if exe is None or not exe.exists():
        found = shutil.which("pnnx")
        if not found:
            raise EngineUnavailable("the pnnx converter executable was not found")
        exe = Path(found)
    shape = ",".join(str(d) for d in (1, *input_shape))
    result = subprocess.run([str(exe), onnx_path.name, f"inputshape=[{shape}]"], cwd=onnx_path.parent,
                            capture_output=True, text=True, env={**os.environ})
    if result.returncode != 0 or not param.exists():
        raise EngineUnavailable(f"pnnx could not convert {onnx_path.name}: {result.stderr.strip()[-300:]}")
    return param, binary


PEERS = ("pytorch", "onnxruntime", "openvino", "ncnn")
