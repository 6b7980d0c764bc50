"""Shape inference for the IR at a fixed batch size, from the op definitions in docs/format.md."""

from __future__ import annotations

import math

from deepslim.ir.graph import Graph, Node


def window_output_size(size: int, k: int, stride: int, pad_begin: int, pad_end: int, dilation: int = 1,
                       ceil_mode: bool = False) -> int:
    """Output length of a conv/pool window along one axis (docs/format.md, "Output sizes")."""
    span = size + pad_begin + pad_end - dilation * (k - 1) - 1
    if span < 0:
        raise ValueError(f"window {k} (dilation {dilation}) is larger than the padded input {size + pad_begin + pad_end}")
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1  # the last window would start in the end padding
    return out


def _node_shape(graph: Graph, node: Node, x: tuple[int, ...]) -> tuple[int, ...]:
    a = node.attrs
    if node.op == "conv2d":
        w = graph.values[node.inputs[1]].shape
        sh, sw = a.get("strides", [1, 1])
        t, l, b, r = a.get("pads", [0, 0, 0, 0])
        dh, dw = a.get("dilations", [1, 1])
        return (x[0], w[0], window_output_size(x[2], w[2], sh, t, b, dh), window_output_size(x[3], w[3], sw, l, r, dw))
    if node.op == "dense":
        return (x[0], graph.values[node.inputs[1]].shape[0])
    if node.op in ("maxpool2d", "avgpool2d"):
        kh, kw = a["kernel"]
        sh, sw = a.get("strides", a["kernel"])
        t, l, b, r = a.get("pads", [0, 0, 0, 0])
        ceil = bool(a.get("ceil_mode", 0))
        return (x[0], x[1], window_output_size(x[2], kh, sh, t, b, 1, ceil), window_output_size(x[3], kw, sw, l, r, 1, ceil))
    if node.op in ("relu", "softmax"):
        return x
    if node.op == "flatten":
        axis = a.get("axis", 1)
        axis = axis + len(x) if axis < 0 else axis
        return x[:axis] + (math.prod(x[axis:]),)
    raise ValueError(f"node {node.name!r}: no shape rule for op {node.op!r}")


def infer_shapes(graph: Graph, batch: int = 1) -> dict[str, tuple[int, ...]]:
    """Shape of every activation (graph inputs and node outputs) with -1 dimensions set to `batch`."""
    shapes: dict[str, tuple[int, ...]] = {}
    for name in graph.inputs:
        shapes[name] = tuple(batch if d == -1 else d for d in graph.values[name].shape)
    for node in graph.nodes:
        x = shapes.get(node.inputs[0]) if node.inputs else None
        if x is None:
            raise ValueError(f"node {node.name!r} ({node.op}): its first input {node.inputs[:1]} is not an activation")
        out = _node_shape(graph, node, x)
        for name in node.outputs:
            shapes[name] = out
    return shapes
