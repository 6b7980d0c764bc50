"""Graph, Node, Value: a small dataflow graph of named values.

Activations and constants are both `Value`s; a constant carries its data (float32 numpy array) and
the `Encoding` the .dsm writer should store it in. Nodes are kept in topological order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Stable op ids of the .dsm format (docs/format.md, "ops"). Never reuse an id.
OPS: dict[str, int] = {
    "conv2d": 1,
    "dense": 2,
    "maxpool2d": 3,
    "avgpool2d": 4,
    "relu": 5,
    "flatten": 6,
    "softmax": 7,
    "batchnorm": 8,
    "activation": 9,
    "add": 10,
    "sub": 11,
    "mul": 12,
    "div": 13,
    "concat": 14,
    "conv_transpose2d": 15,
    "lrn": 16,
    "channel_shuffle": 17,
    "reshape": 18,
    "transpose": 19,
    "pad": 20,
    "resize": 21,
    "global_avgpool": 22,
    "global_maxpool": 23,
    "slice": 24,
    "quantize": 25,
    "dequantize": 26,
    "qconv2d": 27,
    "qdense": 28,
    "qadd": 29,
    "qconcat": 30,
    "qlut": 31,
    "qglobal_avgpool": 32,
}

# Element types of values and tensors (docs/format.md, "dtypes").
DTYPES: dict[str, int] = {"f32": 1, "i8": 2, "u8": 3, "i32": 4, "i16": 5}

# Codes of the fused activation epilogue (`activation` attribute) and of the `activation` op's `kind`.
ACTIVATIONS: dict[str, int] = {
    "none": 0,
    "relu": 1,
    "clip": 2,
    "leaky_relu": 3,
    "sigmoid": 4,
    "hardsigmoid": 5,
    "hardswish": 6,
    "tanh": 7,
}


@dataclass
class Encoding:
    """How a constant tensor is stored (docs/format.md, "Tensor table").

    layout: "dense" or "sparse_rel" (relative indices of the nonzeros, `index_bits` wide).
    codebook: None for raw float32 values, else the centroids; every stored value must then be
        exactly one of them (the writer maps values to cluster indices of `cluster_bits` bits).
    huffman: canonical-Huffman code the index streams (else they are bit-packed).
    """

    layout: str = "dense"
    index_bits: int = 0
    codebook: np.ndarray | None = None
    cluster_bits: int = 0
    huffman: bool = False

    def __post_init__(self) -> None:
        if self.layout not in ("dense", "sparse_rel"):
            raise ValueError(f"Encoding.layout must be 'dense' or 'sparse_rel', not {self.layout!r}")
        if self.layout == "sparse_rel" and not 1 <= self.index_bits <= 16:
            raise ValueError(f"sparse_rel needs index_bits in 1..16, got {self.index_bits}")
        if self.codebook is not None:
            self.codebook = np.asarray(self.codebook, dtype=np.float32).ravel()
            if not 1 <= self.cluster_bits <= 16:
                raise ValueError(f"a codebook needs cluster_bits in 1..16, got {self.cluster_bits}")
            if len(self.codebook) > (1 << self.cluster_bits):
                raise ValueError(
                    f"codebook has {len(self.codebook)} entries, more than 2^{self.cluster_bits}"
                )


@dataclass
class Value:
    name: str
    shape: tuple[int, ...]  # -1 marks a dimension fixed only at run time (the batch)
    dtype: str = "f32"
    data: np.ndarray | None = None  # set for constants
    encoding: Encoding = field(default_factory=Encoding)

    @property
    def is_constant(self) -> bool:
        return self.data is not None


@dataclass
class Node:
    op: str
    name: str
    inputs: list[str]  # value names; "" for an absent optional input
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Graph:
    values: dict[str, Value] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def add_value(self, value: Value) -> Value:
        if value.name in self.values:
            raise ValueError(f"value {value.name!r} is already in the graph")
        self.values[value.name] = value
        return value

    def add_constant(self, name: str, data: np.ndarray, encoding: Encoding | None = None) -> Value:
        data = np.ascontiguousarray(data, dtype=np.float32)
        return self.add_value(Value(name, tuple(data.shape), "f32", data, encoding or Encoding()))

    def add_node(self, op: str, name: str, inputs: list[str], outputs: list[str], **attrs: Any) -> Node:
        if op not in OPS:
            raise ValueError(f"unknown op {op!r}; known ops: {', '.join(OPS)}")
        node = Node(op, name, list(inputs), list(outputs), dict(attrs))
        self.nodes.append(node)
        return node

    def constants(self) -> list[Value]:
        return [v for v in self.values.values() if v.is_constant]

    def validate(self) -> None:
        """Check that every node input exists before it is used and every output is produced once."""
        available = set(self.inputs) | {v.name for v in self.constants()}
        for name in self.inputs:
            if name not in self.values:
                raise ValueError(f"graph input {name!r} has no value")
        for node in self.nodes:
            for name in node.inputs:
                if name and name not in available:
                    raise ValueError(f"node {node.name!r} ({node.op}) reads {name!r} before it is produced")
            for name in node.outputs:
                if name not in self.values:
                    raise ValueError(f"node {node.name!r} writes {name!r}, which has no value")
                if name in available:
                    raise ValueError(f"value {name!r} is produced twice (by {node.name!r})")
                available.add(name)
        for name in self.outputs:
            if name not in available:
                raise ValueError(f"graph output {name!r} is never produced")
