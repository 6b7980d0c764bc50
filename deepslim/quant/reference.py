"""Bit-exact integer reference executor for quantized graphs (docs/format.md, "Quantized inference").

`run_quantized(graph, x)` runs ops 25-33 with exact integer arithmetic (int64 numpy; the qconv2d /
qdense sums go through float64 matrix products, which are exact because every partial sum is an
integer below 2^53: K * 255 * 128 < 2^31 with u8 x, K * 32768 * 128 < 2^46 with i16 x), the movement
ops on u8 and i16 unchanged, and every other op as the float reference executor
(deepslim.frontends.reference) does. It is the oracle the native runtime's integer kernels must match
bit for bit. Needs numpy only.
"""

from __future__ import annotations

import numpy as np

from deepslim.frontends.reference import pool_output_size, run_graph
from deepslim.ir.graph import Graph, Node, Value
from deepslim.quant.fixedpoint import requant, requant_i16_input, round_shift
from deepslim.quant.params import Q_RANGES, dequantize_array, quantize_array

__all__ = ["I16_OPS", "U8_OPS", "run_quantized"]

# f32 ops that also take u8 activations unchanged (docs/format.md)
U8_OPS = ("maxpool2d", "global_maxpool", "flatten", "reshape", "transpose", "channel_shuffle", "slice", "concat",
          "pad", "resize")
I16_OPS = ("maxpool2d", "global_maxpool", "flatten", "reshape")  # those that also take i16
_NP = {"u8": np.uint8, "i16": np.int16}


def run_quantized(graph: Graph, x, *, batch: int | None = None):
    """Run `graph` on `x` (an array for a one-input graph, else a dict name -> array); returns the
    output array, or a dict name -> array for several outputs. `batch` splits the input's first
    axis into chunks of that many (same results, less memory)."""
    inputs = x if isinstance(x, dict) else None
    if inputs is None:
        if len(graph.inputs) != 1:
            raise ValueError(f"the graph has {len(graph.inputs)} inputs; pass a dict name -> array")
        inputs = {graph.inputs[0]: x}
    for name in graph.inputs:
        if name not in inputs:
            raise ValueError(f"missing input {name!r}")
    if batch is not None and len(graph.inputs) == 1:
        arr = np.asarray(inputs[graph.inputs[0]])
        parts = [_run(graph, {graph.inputs[0]: arr[i : i + batch]}) for i in range(0, len(arr), batch)]
        outs = {k: np.concatenate([p[k] for p in parts]) for k in graph.outputs}
    else:
        outs = _run(graph, inputs)
    return outs[graph.outputs[0]] if len(outs) == 1 else outs


def _run(graph: Graph, inputs: dict) -> dict[str, np.ndarray]:
    env: dict[str, np.ndarray] = {}
    for name in graph.inputs:  # a graph input is f32, or u8 / i16 when the graph says so
        env[name] = np.asarray(inputs[name], dtype=_NP.get(graph.values[name].dtype, np.float32))
    for v in graph.constants():
        env[v.name] = v.data
    for node in graph.nodes:
        args = [env[i] if i else None for i in node.inputs]
        fn = _QOPS.get(node.op)
        try:
            if fn is not None:
                out = fn(node, graph.values[node.outputs[0]].dtype, *args)
            elif any(a is not None and a.dtype in (np.uint8, np.int16) for a in args):
                out = _move_op(node, graph, args)
            else:
                out = _float_op(node, graph, args)
        except (ValueError, KeyError, IndexError) as e:
            raise ValueError(f"node {node.name!r} ({node.op}): {e}") from None
        env[node.outputs[0]] = out
    return {name: env[name] for name in graph.outputs}


def _float_op(node: Node, graph: Graph, args: list) -> np.ndarray:
    """One f32 node through the float reference executor."""
    g = Graph()
    names = []
    for i, (name, a) in enumerate(zip(node.inputs, args)):
        if not name:
            names.append("")
            continue
        if a.dtype != np.float32:
            raise ValueError(f"input {name!r} is {a.dtype}, the op takes f32")
        src = graph.values[name]
        if src.is_constant:
            if name not in g.values:
                g.add_value(Value(name, src.shape, "f32", src.data))
        elif name not in g.values:
            g.add_value(Value(name, a.shape))
            g.inputs.append(name)
        names.append(name)
    out = node.outputs[0]
    g.add_value(Value(out, graph.values[out].shape))
    g.nodes.append(Node(node.op, node.name, names, [out], dict(node.attrs)))
    g.outputs = [out]
    feed = {n: a for n, a in zip(node.inputs, args) if n and n in g.inputs}
    return np.asarray(run_graph(g, feed), dtype=np.float32)


def _move_op(node: Node, graph: Graph, args: list) -> np.ndarray:
    """A movement op on u8 or i16: selecting and copying values is exact in float32, so run it there."""
    x = next(a for a in args if a is not None and a.dtype in (np.uint8, np.int16))
    kind, ops = ("u8", U8_OPS) if x.dtype == np.uint8 else ("i16", I16_OPS)
    if node.op not in ops:
        raise ValueError(f"does not take {kind} activations")
    if any(a is not None and a.dtype != x.dtype for a in args):
        raise ValueError(f"mixes {kind} and other dtypes")
    if node.op == "resize" and node.attrs.get("mode", "nearest") != "nearest":
        raise ValueError("resize of u8 needs mode nearest")
    if node.op == "pad" and node.attrs.get("mode", "constant") == "constant":
        v = float(node.attrs.get("value", 0.0))
        if v != int(v) or not 0 <= v <= 255:
            raise ValueError(f"pad of u8 needs an integer value 0..255 (the zero point), got {v}")
    y = _float_op(node, graph, [a.astype(np.float32) if a is not None else None for a in args])
    return y.astype(x.dtype)


def _need(a: np.ndarray, dtype, what: str) -> np.ndarray:
    if a.dtype != dtype:
        raise ValueError(f"{what} is {a.dtype}, must be {np.dtype(dtype)}")
    return a


def _activation(a: np.ndarray, what: str) -> str:
    """'u8' or 'i16', the dtype of a quantized activation."""
    for name, t in _NP.items():
        if a.dtype == t:
            return name
    raise ValueError(f"{what} is {a.dtype}, must be uint8 or int16")


def _q_output(y_dtype: str) -> str:
    if y_dtype not in _NP:
        raise ValueError(f"the output is {y_dtype}, must be u8 or i16")
    return y_dtype


def _zero_point(a: dict, key: str, dtype: str) -> int:
    zp = a[key]
    if dtype == "i16" and zp != 0:
        raise ValueError(f"{key} is {zp}; an i16 value's zero point must be 0")
    return zp


def _clamp(y: np.ndarray, dtype: str, lo=None, hi=None) -> np.ndarray:
    """Clamp to [lo, hi] (default: the dtype's whole range) and store as the dtype."""
    qmin, qmax = Q_RANGES[dtype]
    return np.clip(y, qmin if lo is None else lo, qmax if hi is None else hi).astype(_NP[dtype])


def _linear_inputs(node: Node, y_dtype: str, x, w, b, mult, shift) -> str:
    """Check the operands of qconv2d / qdense; returns x's dtype."""
    x_dtype = _activation(x, "x")
    _q_output(y_dtype)
    _need(w, np.int8, "weight")
    for t, n in ((b, "bias"), (mult, "multiplier"), (shift, "shift")):
        _need(t, np.int32, n)
    _zero_point(node.attrs, "x_zero_point", x_dtype)
    _zero_point(node.attrs, "y_zero_point", y_dtype)
    return x_dtype


def _epilogue(acc: np.ndarray, a: dict, mult: np.ndarray, shift: np.ndarray, axis_shape, x_dtype: str,
              y_dtype: str) -> np.ndarray:
    m = np.asarray(mult, dtype=np.int64).reshape(axis_shape)
    s = np.asarray(shift, dtype=np.int64).reshape(axis_shape)
    # with i16 x, acc * M would overflow int64; M is then a multiple of 2^16 and the shortcut is exact
    rescaled = requant_i16_input(acc, m, s) if x_dtype == "i16" else requant(acc, m, s)
    return _clamp(a["y_zero_point"] + rescaled, y_dtype, a.get("act_min"), a.get("act_max"))


def _qconv2d(node: Node, y_dtype: str, x, w, b, mult, shift) -> np.ndarray:
    a = node.attrs
    x_dtype = _linear_inputs(node, y_dtype, x, w, b, mult, shift)
    sh, sw = a.get("strides", [1, 1])
    t, l, bo, r = a.get("pads", [0, 0, 0, 0])
    dh, dw = a.get("dilations", [1, 1])
    g = a.get("group", 1)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    if c != cg * g or o % g:
        raise ValueError(f"input channels {c}, weight {w.shape}, group {g} disagree")
    oh = pool_output_size(h, kh, sh, t, bo, dh)
    ow = pool_output_size(wd, kw, sw, l, r, dw)
    # padded positions take x = x_zero_point, i.e. 0 after subtracting it
    xp = np.pad(x.astype(np.float64) - a["x_zero_point"], ((0, 0), (0, 0), (t, bo), (l, r)))
    cols = np.empty((n, c, kh, kw, oh, ow))
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
    cols = cols.reshape(n, g, cg * kh * kw, oh * ow)
    wg = w.astype(np.float64).reshape(g, o // g, cg * kh * kw)
    acc = np.matmul(wg[None], cols)  # (n, g, o/g, oh*ow): exact, every partial sum is an integer < 2^53
    acc = acc.reshape(n, o, oh, ow).astype(np.int64) + b.astype(np.int64).reshape(1, o, 1, 1)
    return _epilogue(acc, a, mult, shift, (1, o, 1, 1), x_dtype, y_dtype)


def _qdense(node: Node, y_dtype: str, x, w, b, mult, shift) -> np.ndarray:
    a = node.attrs
    x_dtype = _linear_inputs(node, y_dtype, x, w, b, mult, shift)
    acc = (x.astype(np.float64) - a["x_zero_point"]) @ w.astype(np.float64).T
    acc = acc.astype(np.int64) + b.astype(np.int64)
    return _epilogue(acc, a, mult, shift, (-1,), x_dtype, y_dtype)


def _requantize(node: Node, y_dtype: str, x) -> np.ndarray:
    a = node.attrs
    x_dtype = _activation(x, "x")
    _q_output(y_dtype)
    xz, yz = _zero_point(a, "x_zero_point", x_dtype), _zero_point(a, "y_zero_point", y_dtype)
    y = yz + requant(x.astype(np.int64) - xz, a["multiplier"], a["shift"])
    return _clamp(y, y_dtype)


def _qadd(node: Node, y_dtype: str, x, y) -> np.ndarray:
    a = node.attrs
    _need(x, np.uint8, "a")
    _need(y, np.uint8, "b")
    v = ((x.astype(np.int64) - a["a_zero_point"]) * a["a_multiplier"]
         + (y.astype(np.int64) - a["b_zero_point"]) * a["b_multiplier"])
    out = a["y_zero_point"] + round_shift(v, 31 + a["shift"])
    return np.clip(out, a.get("act_min", 0), a.get("act_max", 255)).astype(np.uint8)


def _qconcat(node: Node, y_dtype: str, *xs) -> np.ndarray:
    a = node.attrs
    parts = []
    for i, x in enumerate(xs):
        _need(x, np.uint8, f"input {i}")
        y = a["y_zero_point"] + requant(x.astype(np.int64) - a["zero_points"][i], a["multipliers"][i], a["shifts"][i])
        parts.append(np.clip(y, 0, 255).astype(np.uint8))
    return np.concatenate(parts, axis=a["axis"])


def _qlut(node: Node, y_dtype: str, x, table) -> np.ndarray:
    _need(x, np.uint8, "x")
    _need(table, np.uint8, "table")
    if table.shape != (256,):
        raise ValueError(f"table has shape {table.shape}, must be (256,)")
    return table[x]


def _qglobal_avgpool(node: Node, y_dtype: str, x) -> np.ndarray:
    a = node.attrs
    _need(x, np.uint8, "x")
    acc = (x.astype(np.int64) - a["x_zero_point"]).sum(axis=(2, 3), keepdims=True)
    y = a["y_zero_point"] + requant(acc, a["multiplier"], a["shift"])
    return np.clip(y, 0, 255).astype(np.uint8)


def _quantize(node: Node, y_dtype: str, x) -> np.ndarray:
    _need(x, np.float32, "x")
    _q_output(y_dtype)
    zp = _zero_point(node.attrs, "zero_point", y_dtype)
    return quantize_array(x, node.attrs["scale"], zp, y_dtype)


def _dequantize(node: Node, y_dtype: str, x) -> np.ndarray:
    zp = _zero_point(node.attrs, "zero_point", _activation(x, "x"))
    return dequantize_array(x, node.attrs["scale"], zp)


_QOPS = {
    "quantize": _quantize,
    "dequantize": _dequantize,
    "qconv2d": _qconv2d,
    "qdense": _qdense,
    "qadd": _qadd,
    "qconcat": _qconcat,
    "qlut": _qlut,
    "qglobal_avgpool": _qglobal_avgpool,
    "requantize": _requantize,
}
