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

__all__ = [
    "apply_activation", "conv_transpose_output_size", "pool_output_size", "reshape_target", "resize_indices",
    "run_graph",
]


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


def apply_activation(kind: int, y: np.ndarray, alpha: float = 0.0, beta: float = 0.0) -> np.ndarray:
    """The activation codes of docs/format.md ("Fused activation epilogue"), in float64."""
    y = np.asarray(y, dtype=np.float64)
    if kind == 0:
        return y
    if kind == 1:
        return np.maximum(y, 0)
    if kind == 2:
        return np.minimum(np.maximum(y, alpha), beta)
    if kind == 3:
        return np.where(y >= 0, y, alpha * y)
    if kind == 4:
        return 0.5 * (1.0 + np.tanh(0.5 * y))  # = 1 / (1 + exp(-y)), without overflow
    if kind == 5:
        return np.maximum(0.0, np.minimum(1.0, alpha * y + beta))
    if kind == 6:
        return y * np.maximum(0.0, np.minimum(1.0, y / 6.0 + 0.5))
    if kind == 7:
        return np.tanh(y)
    raise ValueError(f"unknown activation code {kind}")


def _activation(node: Node, y: np.ndarray) -> np.ndarray:
    """The fused epilogue of conv2d / dense / add / conv_transpose2d."""
    a = node.attrs
    try:
        return apply_activation(a.get("activation", 0), y, a.get("act_alpha", 0.0), a.get("act_beta", 0.0))
    except ValueError as e:
        raise ValueError(f"node {node.name!r}: {e}") from None


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
    dh, dw = a.get("dilations", [1, 1]) if node.op == "maxpool2d" else (1, 1)
    ceil = bool(a.get("ceil_mode", 0))
    h, w = x.shape[2:]
    oh = pool_output_size(h, kh, sh, t, b, dh, ceil)
    ow = pool_output_size(w, kw, sw, l, r, dw, ceil)
    # extra end padding so that every (ceil_mode) window lies inside the padded array
    eb = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - (h + t + b))
    er = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - (w + l + r))
    return kh, kw, sh, sw, dh, dw, t, l, b, r, oh, ow, eb, er


def _maxpool2d(node: Node, x: np.ndarray) -> np.ndarray:
    kh, kw, sh, sw, dh, dw, t, l, b, r, oh, ow, eb, er = _pool_geometry(node, x)
    xp = np.pad(x, ((0, 0), (0, 0), (t, b + eb), (l, r + er)), constant_values=-np.inf)
    y = np.full(x.shape[:2] + (oh, ow), -np.inf, dtype=np.float32)
    for _, _, win in _windows(xp, kh, kw, sh, sw, dh, dw, oh, ow):
        y = np.maximum(y, win)
    return y


def _avgpool2d(node: Node, x: np.ndarray) -> np.ndarray:
    """PyTorch's divisor: with count_include_pad the window clipped to the padded input (not to the
    extra ceil_mode overhang), otherwise the window clipped to the input itself."""
    kh, kw, sh, sw, _, _, t, l, b, r, oh, ow, eb, er = _pool_geometry(node, x)
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


def _batchnorm(node: Node, x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
               var: np.ndarray) -> np.ndarray:
    eps = node.attrs.get("epsilon", 1e-5)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    f = lambda v: v.astype(np.float64).reshape(shape)  # noqa: E731
    return (x.astype(np.float64) - f(mean)) / np.sqrt(f(var) + eps) * f(scale) + f(bias)


def _activation_op(node: Node, x: np.ndarray) -> np.ndarray:
    a = node.attrs
    try:
        return apply_activation(a["kind"], x, a.get("alpha", 0.0), a.get("beta", 0.0))
    except ValueError as e:
        raise ValueError(f"node {node.name!r}: {e}") from None


def _add(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _activation(node, a.astype(np.float64) + b.astype(np.float64))


def _sub(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) - b.astype(np.float64)


def _mul(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) * b.astype(np.float64)


def _div(node: Node, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return a.astype(np.float64) / b.astype(np.float64)


def _concat(node: Node, *xs: np.ndarray) -> np.ndarray:
    return np.concatenate(xs, axis=node.attrs["axis"])


def conv_transpose_output_size(size: int, k: int, stride: int, pad_begin: int, pad_end: int, dilation: int = 1,
                               output_padding: int = 0) -> int:
    """docs/format.md: (in-1)*stride - pad_begin - pad_end + dilation*(k-1) + output_padding + 1."""
    return (size - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + output_padding + 1


def _conv_transpose2d(node: Node, x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Scatter every input pixel times the kernel into a full (unpadded) output, then crop the pads."""
    a = node.attrs
    sh, sw = a.get("strides", [1, 1])
    t, l, bo, r = a.get("pads", [0, 0, 0, 0])
    dh, dw = a.get("dilations", [1, 1])
    ph, pw = a.get("output_padding", [0, 0])
    g = a.get("group", 1)
    n, c, h, wd = x.shape
    cw, og, kh, kw = w.shape
    if c != cw or c % g:
        raise ValueError(f"node {node.name!r}: input channels {c}, weight {w.shape}, group {g} disagree")
    o = og * g
    oh = conv_transpose_output_size(h, kh, sh, t, bo, dh, ph)
    ow = conv_transpose_output_size(wd, kw, sw, l, r, dw, pw)
    if oh < 1 or ow < 1:
        raise ValueError(f"node {node.name!r}: output size {oh}x{ow} is empty")
    fh, fw = oh + t + bo, ow + l + r  # full output before cropping the pads
    full = np.zeros((n, g, og, fh, fw))
    xg = x.astype(np.float64).reshape(n, g, c // g, h, wd)
    wg = w.astype(np.float64).reshape(g, c // g, og, kh, kw)
    for i in range(kh):
        for j in range(kw):
            contrib = np.einsum("ngchw,gco->ngohw", xg, wg[:, :, :, i, j])
            full[:, :, :, i * dh: i * dh + sh * (h - 1) + 1: sh, j * dw: j * dw + sw * (wd - 1) + 1: sw] += contrib
    y = full.reshape(n, o, fh, fw)[:, :, t: t + oh, l: l + ow]
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return _activation(node, y)


def _lrn(node: Node, x: np.ndarray) -> np.ndarray:
    a = node.attrs
    size = a["size"]
    alpha, beta, bias = a.get("alpha", 1e-4), a.get("beta", 0.75), a.get("bias", 1.0)
    before, after = (size - 1) // 2, size // 2  # floor((size-1)/2), ceil((size-1)/2)
    x64 = x.astype(np.float64)
    sq = np.pad(x64 * x64, ((0, 0), (before, after), (0, 0), (0, 0)))
    c = x.shape[1]
    s = sum(sq[:, k: k + c] for k in range(size))
    return x64 / (bias + alpha / size * s) ** beta


def _channel_shuffle(node: Node, x: np.ndarray) -> np.ndarray:
    g = node.attrs["group"]
    n, c, h, w = x.shape
    if c % g:
        raise ValueError(f"node {node.name!r}: {c} channels do not split into {g} groups")
    return x.reshape(n, g, c // g, h, w).transpose(0, 2, 1, 3, 4).reshape(n, c, h, w)


def reshape_target(in_shape: tuple[int, ...], spec: list[int]) -> tuple[int, ...]:
    """docs/format.md, reshape: 0 copies the input's size at that axis, one -1 takes the rest."""
    if any(d == 0 and i >= len(in_shape) for i, d in enumerate(spec)):
        raise ValueError(f"reshape {in_shape} -> {spec}: a 0 past the input's rank")
    out = [in_shape[i] if d == 0 else d for i, d in enumerate(spec)]
    if out.count(-1) > 1 or any(d < -1 for d in out):
        raise ValueError(f"reshape {in_shape} -> {spec}: at most one -1 and no other negative size")
    total, known = math.prod(in_shape), math.prod(d for d in out if d != -1)
    if -1 in out:
        if known == 0 or total % known:
            raise ValueError(f"reshape {in_shape} -> {spec}: {total} elements do not divide by {known}")
        out[out.index(-1)] = total // known
    if math.prod(out) != total:
        raise ValueError(f"reshape {in_shape} -> {spec}: {total} elements cannot become {tuple(out)}")
    return tuple(out)


def _reshape(node: Node, x: np.ndarray) -> np.ndarray:
    return x.reshape(reshape_target(x.shape, node.attrs["shape"]))


def _transpose(node: Node, x: np.ndarray) -> np.ndarray:
    return x.transpose(node.attrs["perm"])


def _pad(node: Node, x: np.ndarray) -> np.ndarray:
    a = node.attrs
    pads, mode = a["pads"], a.get("mode", "constant")
    r = x.ndim
    if len(pads) != 2 * r or min(pads) < 0:
        raise ValueError(f"node {node.name!r}: pads {pads} must be {2 * r} values >= 0")
    widths = [(pads[i], pads[r + i]) for i in range(r)]
    if mode == "constant":
        return np.pad(x, widths, constant_values=a.get("value", 0.0))
    if mode == "reflect":
        for i, (lo, hi) in enumerate(widths):
            if max(lo, hi) > x.shape[i] - 1:
                raise ValueError(f"node {node.name!r}: reflect padding {lo},{hi} needs axis {i} longer than "
                                 f"{max(lo, hi)}, got {x.shape[i]}")
        return np.pad(x, widths, mode="reflect")
    if mode == "edge":
        return np.pad(x, widths, mode="edge")
    raise ValueError(f"node {node.name!r}: unknown pad mode {mode!r}")


def _source_coordinate(out_size: int, in_size: int, mode: str) -> np.ndarray:
    """ONNX Resize: the input coordinate of each output index, for scale = out_size / in_size.
    Computed as x * in / out (not x / scale) so that exact halves and integers stay exact."""
    x = np.arange(out_size, dtype=np.float64)
    if mode == "half_pixel":
        return (x + 0.5) * in_size / out_size - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) * in_size / out_size - 0.5 if out_size > 1 else np.zeros(1)
    if mode == "align_corners":
        return x * (in_size - 1) / (out_size - 1) if out_size > 1 else np.zeros(1)
    if mode == "asymmetric":
        return x * in_size / out_size
    raise ValueError(f"unknown coordinate_transformation_mode {mode!r}")


def resize_indices(out_size: int, in_size: int, coordinate_mode: str, nearest_mode: str) -> np.ndarray:
    """Input index of each output index for `nearest` resizing (ONNX Resize)."""
    c = _source_coordinate(out_size, in_size, coordinate_mode)
    if nearest_mode == "round_prefer_floor":
        idx = np.where(c - np.floor(c) == 0.5, np.floor(c), np.round(c))
    elif nearest_mode == "round_prefer_ceil":
        idx = np.where(c - np.floor(c) == 0.5, np.ceil(c), np.round(c))
    elif nearest_mode == "floor":
        idx = np.floor(c)
    elif nearest_mode == "ceil":
        idx = np.ceil(c)
    else:
        raise ValueError(f"unknown nearest_mode {nearest_mode!r}")
    return np.clip(idx, 0, in_size - 1).astype(np.int64)


def _linear_weights(out_size: int, in_size: int, coordinate_mode: str):
    """(lower index, upper index, weight of the upper) per output index: the coordinate is clamped to
    [0, in-1] first, as onnxruntime does (and as PyTorch's bilinear does for align_corners=False)."""
    c = np.clip(_source_coordinate(out_size, in_size, coordinate_mode), 0, in_size - 1)
    lo = np.floor(c).astype(np.int64)
    hi = np.minimum(lo + 1, in_size - 1)
    return lo, hi, c - lo


def _resize(node: Node, x: np.ndarray) -> np.ndarray:
    a = node.attrs
    oh, ow = a["sizes"]
    mode = a.get("mode", "nearest")
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    h, w = x.shape[2:]
    if mode == "nearest":
        nm = a.get("nearest_mode", "round_prefer_floor")
        return x[:, :, resize_indices(oh, h, ctm, nm)][:, :, :, resize_indices(ow, w, ctm, nm)]
    if mode == "linear":
        x64 = x.astype(np.float64)
        lo, hi, f = _linear_weights(oh, h, ctm)
        f = f.reshape(-1, 1)
        rows = x64[:, :, lo] * (1 - f) + x64[:, :, hi] * f
        lo, hi, f = _linear_weights(ow, w, ctm)
        return rows[:, :, :, lo] * (1 - f) + rows[:, :, :, hi] * f
    raise ValueError(f"node {node.name!r}: unknown resize mode {mode!r}")


def _slice(node: Node, x: np.ndarray) -> np.ndarray:
    a = node.attrs
    index = [slice(None)] * x.ndim
    for axis, start, end in zip(a["axes"], a["starts"], a["ends"], strict=True):
        index[axis] = slice(start, end)  # numpy: negative counts from the end, clamped to the size
    return x[tuple(index)]


def _global_avgpool(node: Node, x: np.ndarray) -> np.ndarray:
    return x.astype(np.float64).mean(axis=(2, 3), keepdims=True)


def _global_maxpool(node: Node, x: np.ndarray) -> np.ndarray:
    return x.max(axis=(2, 3), keepdims=True)


_OPS: dict[str, Callable[..., np.ndarray]] = {
    "conv2d": _conv2d,
    "dense": _dense,
    "maxpool2d": _maxpool2d,
    "avgpool2d": _avgpool2d,
    "relu": _relu,
    "flatten": _flatten,
    "softmax": _softmax,
    "batchnorm": _batchnorm,
    "activation": _activation_op,
    "add": _add,
    "sub": _sub,
    "mul": _mul,
    "div": _div,
    "concat": _concat,
    "conv_transpose2d": _conv_transpose2d,
    "lrn": _lrn,
    "channel_shuffle": _channel_shuffle,
    "reshape": _reshape,
    "transpose": _transpose,
    "pad": _pad,
    "resize": _resize,
    "global_avgpool": _global_avgpool,
    "global_maxpool": _global_maxpool,
    "slice": _slice,
}
