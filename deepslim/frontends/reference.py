"""A plain numpy executor for the IR: the oracle that front ends and graph passes are tested against.

`run_graph(graph, x)` evaluates every node in order with straightforward numpy code (float64
accumulation, float32 results), following the op definitions of docs/format.md. It is written for
clarity, not speed. Needs numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from deepslim.ir.graph import Graph, Node

__all__ = ["run_graph", "pool_output_size"]


def run_graph(graph: Graph, inputs: np.ndarray | dict[str, np.ndarray]) -> np.ndarray | dict[str, np.ndarray]:
    """Run `graph` on `inputs` (one array for a single-input graph, else a dict name -> array).

    Returns the output array, or a dict name -> array when the graph has several outputs.
    """
    if not isinstance(inputs, dict):
        if len(graph.inputs) != 1:
            raise ValueError(f"the graph has {len(graph.inputs)} inputs; pass a dict name -> array")
        inputs = {graph.inputs[0]: inputs}
    env: dict[str, np.ndarray] = {}
    for name in graph.inputs:
        if name not in inputs:
            raise ValueError(f"missing input {name!r}")
        env[name] = np.asarray(inputs[name], dtype=np.float32)
    for v in graph.constants():
        env[v.name] = v.data
    for node in graph.nodes:
        fn = _OPS.get(node.op)
        if fn is None:
            raise ValueError(f"node {node.name!r}: no reference implementation of op {node.op!r}")
        args = [env[i] if i else None for i in node.inputs]
        out = fn(node, *args)
        env[node.outputs[0]] = np.asarray(out, dtype=np.float32)
    outs = {name: env[name] for name in graph.outputs}
    return outs[graph.outputs[0]] if len(outs) == 1 else outs


def pool_output_size(size: int, k: int, stride: int, pad_begin: int, pad_end: int, dilation: int = 1,
                     ceil_mode: bool = False) -> int:
    """docs/format.md: floor (or ceil) of (in + pads - dilation*(k-1) - 1) / stride, plus 1; under
    ceil_mode a last window that would start in the end padding is dropped."""
    span = size + pad_begin + pad_end - dilation * (k - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def _activation(node: Node, y: np.ndarray) -> np.ndarray:
    act = node.attrs.get("activation", 0)
    if act == 0:
        return y
    if act == 1:
        return np.maximum(y, 0)
    raise ValueError(f"node {node.name!r}: unknown activation {act}")


def _windows(xp: np.ndarray, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int, oh: int, ow: int):
    """Yield (i, j, x[..., window rows, window cols]) views of a padded NCHW array."""
    for i in range(kh):
        for j in range(kw):
            yield i, j, xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]


def _conv2d(node: Node, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    a = node.attrs
    sh, sw = a.get("strides", [1, 1])
    t, l, bo, r = a.get("pads", [0, 0, 0, 0])
    dh, dw = a.get("dilations", [1, 1])
    g = a.get("group", 1)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if c != cg * g or o % g:
        raise ValueError(f"node {node.name!r}: input channels {c}, weight {w.shape}, group {g} disagree")
    oh = pool_output_size(h, kh, sh, t, bo, dh)
    ow = pool_output_size(wd, kw, sw, l, r, dw)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, bo), (l, r)))
    cols = np.empty((n, c, kh, kw, oh, ow))
    for i, j, win in _windows(xp, kh, kw, sh, sw, dh, dw, oh, ow):
        cols[:, :, i, j] = win
    cols = cols.reshape(n, g, cg, kh, kw, oh, ow)
    wg = w.astype(np.float64).reshape(g, o // g, cg, kh, kw)
    y = np.einsum("ngcijhw,gocij->ngohw", cols, wg, optimize=True).reshape(n, o, oh, ow)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return _activation(node, y)


def _dense(node: Node, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    y = x.astype(np.float64) @ w.astype(np.float64).T
    if b is not None:
        y = y + b
    return _activation(node, y)


def _pool_geometry(node: Node, x: np.ndarray):
    a = node.attrs
    kh, kw = a["kernel"]
    sh, sw = a.get("strides", a["kernel"])
    t, l, b, r = a.get("pads", [0, 0, 0, 0])
    ceil = bool(a.get("ceil_mode", 0))
    h, w = x.shape[2:]
    oh = pool_output_size(h, kh, sh, t, b, 1, ceil)
    ow = pool_output_size(w, kw, sw, l, r, 1, ceil)
    # extra end padding so that every (ceil_mode) window lies inside the padded array
    eb = max(0, (oh - 1) * sh + kh - (h + t + b))
    er = max(0, (ow - 1) * sw + kw - (w + l + r))
    return kh, kw, sh, sw, t, l, b, r, oh, ow, eb, er


def _maxpool2d(node: Node, x: np.ndarray) -> np.ndarray:
    kh, kw, sh, sw, t, l, b, r, oh, ow, eb, er = _pool_geometry(node, x)
    xp = np.pad(x, ((0, 0), (0, 0), (t, b + eb), (l, r + er)), constant_values=-np.inf)
    y = np.full(x.shape[:2] + (oh, ow), -np.inf, dtype=np.float32)
    for _, _, win in _windows(xp, kh, kw, sh, sw, 1, 1, oh, ow):
        y = np.maximum(y, win)
    return y


def _avgpool2d(node: Node, x: np.ndarray) -> np.ndarray:
    """PyTorch's divisor: with count_include_pad the window clipped to the padded input (not to the
    extra ceil_mode overhang), otherwise the window clipped to the input itself."""
    kh, kw, sh, sw, t, l, b, r, oh, ow, eb, er = _pool_geometry(node, x)
    h, w = x.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, b + eb), (l, r + er)))
    s = np.zeros(x.shape[:2] + (oh, ow))
    for _, _, win in _windows(xp, kh, kw, sh, sw, 1, 1, oh, ow):
        s += win
    include = bool(node.attrs.get("count_include_pad", 0))

    def counts(n_out: int, k: int, stride: int, pad_begin: int, pad_end: int, size: int) -> np.ndarray:
        start = np.arange(n_out) * stride - pad_begin
        end = np.minimum(start + k, size + pad_end)
        if include:
            return (end - start).astype(np.float64)
        return (np.minimum(end, size) - np.maximum(start, 0)).astype(np.float64)

    div = np.outer(counts(oh, kh, sh, t, b, h), counts(ow, kw, sw, l, r, w))
    return s / div


def _relu(node: Node, x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def _flatten(node: Node, x: np.ndarray) -> np.ndarray:
    axis = node.attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(x.shape[:axis] + (math.prod(x.shape[axis:]),))


def _softmax(node: Node, x: np.ndarray) -> np.ndarray:
    axis = node.attrs.get("axis", -1)
    z = x.astype(np.float64)
    z = np.exp(z - z.max(axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)


_OPS: dict[str, Callable[..., np.ndarray]] = {
    "conv2d": _conv2d,
    "dense": _dense,
    "maxpool2d": _maxpool2d,
    "avgpool2d": _avgpool2d,
    "relu": _relu,
    "flatten": _flatten,
    "softmax": _softmax,
}
