"""The `onnx.backend.base.Backend` interface over the native runtime, so the onnx package's own
node test cases (and any tool that speaks that interface) can run models through deepslim:
ONNX -> IR (deepslim.frontends.onnx) -> graph passes -> .dsm bytes -> native Session.

The runtime computes in float32 with constant shapes and constant weights. Non-float inputs of a
model (shapes, axes, pads, sizes given as graph inputs, as the node tests do) are bound as constants
when the first `run` supplies them; the model is converted then, and again only if those values
change. When the converter needs a float input to be constant too (a Conv weight, a Clip bound, Resize
scales passed as graph inputs), every input but the first is bound as a constant.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

import re

from deepslim.format import encode_dsm
from deepslim.frontends.errors import UnsupportedModelError
from deepslim.frontends.onnx import from_onnx
from deepslim.ir.passes import optimize


# The converter's wording when an input it needs constant (a weight, a bound) is a graph input.
_NEEDS_CONSTANT = re.compile(r"computed at run time|is an activation; only a constant")


class DeepslimRep(BackendRep):
    def __init__(self, model: onnx.ModelProto, threads: int = 1):
        self.model = model
        self.threads = threads
        initializers = {t.name for t in model.graph.initializer}
        self.inputs = [i for i in model.graph.input if i.name not in initializers]
        self._bound: dict[str, np.ndarray] | None = None
        self._session = None
        self._float_inputs: list[str] = []

    def _prepare(self, constants: dict[str, np.ndarray]) -> None:
        from deepslim.runtime import Session

        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        graph = model.graph
        keep = [i for i in graph.input if i.name not in constants]
        del graph.input[:]
        graph.input.extend(keep)
        for name, value in constants.items():
            graph.initializer.append(onnx.numpy_helper.from_array(value, name))
        ir = optimize(from_onnx(model))
        data, _ = encode_dsm(ir)
        self._session = Session(data, threads=self.threads)
        self._float_inputs = [i.name for i in keep]
        self._bound = {k: v.copy() for k, v in constants.items()}

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            named = dict(inputs)
        else:
            if not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            named = {i.name: np.asarray(x) for i, x in zip(self.inputs, inputs)}
        constants = {k: np.asarray(v) for k, v in named.items() if np.asarray(v).dtype != np.float32}
        if self._session is None or not _same(constants, self._bound):
            try:
                self._prepare(constants)
            except UnsupportedModelError as e:
                if not _NEEDS_CONSTANT.search(str(e)):
                    raise
                first = self.inputs[0].name
                self._prepare({k: np.asarray(v) for k, v in named.items() if k != first})
        feeds = [np.asarray(named[name], dtype=np.float32) for name in self._float_inputs]
        out = self._session.run(*feeds)
        if isinstance(out, dict):
            return tuple(out[o.name] for o in self.model.graph.output)
        return (out,)


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray] | None) -> bool:
    return b is not None and a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and np.array_equal(a[k], b[k]) for k in a
    )


class DeepslimBackend(Backend):
    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> DeepslimRep:
        super().prepare(model, device, **kwargs)
        return DeepslimRep(model, threads=int(kwargs.get("threads", 1)))

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


prepare = DeepslimBackend.prepare
run_model = DeepslimBackend.run_model
supports_device = DeepslimBackend.supports_device
