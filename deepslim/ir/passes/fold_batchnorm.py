"""fold_batchnorm: a batchnorm right after a conv2d / conv_transpose2d / dense goes into its weight and bias."""

from __future__ import annotations

import numpy as np

from deepslim.analyze.shapes import infer_shapes
from deepslim.ir.graph import Graph, Node
from deepslim.ir.passes._edit import copy_graph, producers, use_counts

FOLDABLE_OPS = ("conv2d", "conv_transpose2d", "dense")


def _raw_dense(graph: Graph, name: str) -> bool:
    v = graph.values[name]
    return v.is_constant and v.encoding.layout == "dense" and v.encoding.codebook is None


def _scaled_weight(op: str, attrs: dict, w: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Multiply each output channel's weights by s (float64)."""
    w = w.astype(np.float64)
    if op == "conv_transpose2d":  # weight (C, O/group, kh, kw): output channel gi*(O/group) + j
        g = attrs.get("group", 1)
        c, og = w.shape[:2]
        return (w.reshape(g, c // g, og, *w.shape[2:]) * s.reshape(g, 1, og, 1, 1)).reshape(w.shape)
    return w * s.reshape((-1,) + (1,) * (w.ndim - 1))


def _can_fold(g: Graph, bn: Node, p: Node | None, uses: dict[str, int], shapes: dict) -> bool:
    if p is None or p.op not in FOLDABLE_OPS or p.attrs.get("activation", 0) != 0:
        return False
    src = bn.inputs[0]
    if uses.get(src) != 1 or src in g.outputs:
        return False
    if not all(g.values[i].is_constant for i in bn.inputs[1:]):
        return False
    if p.op == "dense" and len(shapes[src]) != 2:  # batchnorm's channel axis 1 is dense's M only at rank 2
        return False
    params = [p.inputs[1]] + ([p.inputs[2]] if len(p.inputs) > 2 and p.inputs[2] else [])
    return all(_raw_dense(g, name) and uses.get(name) == 1 for name in params)


def fold_batchnorm(graph: Graph) -> Graph:
    """Fold `batchnorm(conv2d|conv_transpose2d|dense(x))` into the producer when the producer has no fused
    activation, its output is read by the batchnorm only and is not a graph output, the batchnorm's
    inputs are constants, and the weight (and bias) are dense raw float32 read by this node only
    (a codebook or sparse tensor would lose its encoding). The producer gets
    w' = w * s, b' = (b - mean) * s + beta with s = scale / sqrt(var + eps), computed in float64; a
    missing bias is created as `<weight name>.bn_bias`. The batchnorm's output name is kept.
    Returns a new graph; `graph` is not modified."""
    g = copy_graph(graph)
    shapes = infer_shapes(g, batch=1)
    made_by = producers(g)
    uses = use_counts(g)
    kept = []
    for node in g.nodes:
        p = made_by.get(node.inputs[0]) if node.op == "batchnorm" else None
        if p is None or not _can_fold(g, node, p, uses, shapes):
            kept.append(node)
            continue
        scale, beta, mean, var = (g.values[i].data.astype(np.float64) for i in node.inputs[1:])
        s = scale / np.sqrt(var + node.attrs.get("epsilon", 1e-5))
        w_name = p.inputs[1]
        w = _scaled_weight(p.op, p.attrs, g.values[w_name].data, s)
        has_bias = len(p.inputs) > 2 and bool(p.inputs[2])
        b0 = g.values[p.inputs[2]].data.astype(np.float64) if has_bias else np.zeros_like(mean)
        b = (b0 - mean) * s + beta
        del g.values[w_name]
        g.add_constant(w_name, w)
        if has_bias:
            b_name = p.inputs[2]
            del g.values[b_name]
        else:
            b_name = f"{w_name}.bn_bias"
            while b_name in g.values:
                b_name += "_"
        g.add_constant(b_name, b)
        p.inputs = [p.inputs[0], w_name, b_name]
        del g.values[node.inputs[0]]
        p.outputs = [node.outputs[0]]
        made_by[node.outputs[0]] = p
    g.nodes = kept
    return g
