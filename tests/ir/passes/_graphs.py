"""A tiny builder for hand-written pass tests."""

from __future__ import annotations

import numpy as np

from deepslim.ir.graph import Graph, Value


class Builder:
    def __init__(self, x_shape: tuple[int, ...], seed: int = 0) -> None:
        self.g = Graph()
        self.rng = np.random.default_rng(seed)
        self.g.add_value(Value("x", x_shape))
        self.g.inputs = ["x"]
        self.k = 0

    def const(self, data, name: str | None = None) -> str:
        self.k += 1
        name = name or f"k{self.k}"
        self.g.add_constant(name, np.asarray(data, dtype=np.float32))
        return name

    def rand(self, *shape: int) -> str:
        return self.const(self.rng.standard_normal(shape))

    def node(self, op: str, inputs: list[str], out: str | None = None, **attrs) -> str:
        self.k += 1
        out = out or f"v{self.k}"
        self.g.add_value(Value(out, ()))
        self.g.add_node(op, f"n_{out}", inputs, [out], **attrs)
        return out

    def done(self, *outputs: str) -> Graph:
        self.g.outputs = list(outputs)
        self.g.validate()
        return self.g
