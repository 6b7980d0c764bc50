"""remove_identity: drop nodes whose output equals their input."""

from __future__ import annotations

import numpy as np

from deepslim.analyze.shapes import infer_shapes
from deepslim.ir.graph import Graph, Node
from deepslim.ir.passes._edit import copy_graph, producers, replace_uses, use_counts


def _const_equal(graph: Graph, name: str, value: float) -> bool:
    v = graph.values.get(name)
    return v is not None and v.is_constant and bool(np.all(v.data == value))


def is_identity(graph: Graph, node: Node, shapes: dict[str, tuple[int, ...]] | None = None) -> bool:
    """True for a node that returns its input unchanged:
    - flatten whose axis is the input's last dimension (nothing to merge),
    - maxpool2d / avgpool2d with a 1x1 window, stride 1 and no padding,
    - relu of a value that is already >= 0 (produced by relu, or by a conv2d/dense with a fused relu),
    - activation of kind 0 (none), channel_shuffle with group 1, concat of one input, pad by zeros,
      transpose by the identity permutation, reshape / resize / slice whose output shape is the input's,
    - add or sub of zeros, mul or div by ones, when the output shape is the first input's.
    """
    a = node.attrs
    if shapes is None:
        shapes = infer_shapes(graph, batch=1)
    same_shape = node.inputs[0] in shapes and shapes[node.inputs[0]] == shapes.get(node.outputs[0])
    if node.op == "flatten":
        rank = len(shapes.get(node.inputs[0], graph.values[node.inputs[0]].shape))
        axis = a.get("axis", 1)
        return rank > 0 and (axis + rank if axis < 0 else axis) == rank - 1
    if node.op in ("maxpool2d", "avgpool2d"):
        return (
            list(a["kernel"]) == [1, 1]
            and list(a.get("strides", a["kernel"])) == [1, 1]
            and list(a.get("pads", [0, 0, 0, 0])) == [0, 0, 0, 0]
            and list(a.get("dilations", [1, 1])) == [1, 1]
        )
    if node.op == "relu":
        p = producers(graph).get(node.inputs[0])
        return p is not None and (p.op == "relu" or (p.op in ("conv2d", "dense") and p.attrs.get("activation", 0) == 1))
    if node.op == "activation":
        return a["kind"] == 0
    if node.op == "channel_shuffle":
        return a["group"] == 1
    if node.op == "concat":
        return len([i for i in node.inputs if i]) == 1
    if node.op == "pad":
        return not any(a["pads"])
    if node.op == "transpose":
        return list(a["perm"]) == list(range(len(a["perm"])))
    if node.op in ("reshape", "resize", "slice"):
        return same_shape
    if node.op in ("add", "sub"):
        return same_shape and a.get("activation", 0) == 0 and _const_equal(graph, node.inputs[1], 0.0)
    if node.op in ("mul", "div"):
        return same_shape and _const_equal(graph, node.inputs[1], 1.0)
    return False


def remove_identity(graph: Graph) -> Graph:
    """Remove identity nodes (see `is_identity`); readers of the removed output read its input.

    When the removed output is a graph output, its name is kept by renaming the input's producer's
    output instead, which needs the input to be a node output read by nothing else; otherwise the
    node stays. Returns a new graph; `graph` is not modified."""
    g = copy_graph(graph)
    changed = True
    while changed:
        changed = False
        shapes = infer_shapes(g, batch=1)
        for node in g.nodes:
            if not is_identity(g, node, shapes):
                continue
            src, out = node.inputs[0], node.outputs[0]
            if out not in g.outputs:
                replace_uses(g, out, src)
            else:
                p = producers(g).get(src)
                if p is None or src in g.outputs or use_counts(g).get(src) != 1:
                    continue
                p.outputs = [out if o == src else o for o in p.outputs]
                out, src = src, out  # the value that disappears is now the input
            g.nodes.remove(node)
            del g.values[out]
            changed = True
            break
    return g
