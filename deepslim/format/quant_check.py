"""Checks of a quantized graph's dtypes and parameters (docs/format.md, "Quantized inference"),
run by the writer and, after decoding, by the reader: a scale that is zero, negative or not finite,
a u8 zero point outside 0..255 or an i16 one other than 0, act_min / act_max outside the output
dtype's range, a multiplier outside 0..2^31-1 (with i16 x: not a multiple of 2^16) or a shift outside
-30..30 (with i16 x: -14..30) is rejected with a message naming the node and the field."""

from __future__ import annotations

import math

import numpy as np

from deepslim.format.errors import DsmFormatError
from deepslim.ir.graph import Graph, Node

__all__ = ["check_quantized"]

U8_OPS = ("maxpool2d", "global_maxpool", "flatten", "reshape", "transpose", "channel_shuffle", "slice", "concat",
          "pad", "resize")
I16_OPS = ("maxpool2d", "global_maxpool", "flatten", "reshape")  # the movement ops that also take i16
Q_RANGE = {"u8": (0, 255), "i16": (-32768, 32767)}
MAX_ACC_K = (2**31 - 1) // (255 * 128)  # u8 x: K * 255 * 128 < 2^31
MAX_ACC_K_I16 = (2**46 - 1) // (32768 * 128)  # i16 x: K * 32768 * 128 < 2^46
I16_MULT_STEP = 1 << 16  # an i16-input multiplier is a multiple of 2^16 (15 significant bits)


def check_quantized(graph: Graph) -> None:
    """Raise DsmFormatError if a node is given a dtype it does not take or a quantization parameter
    that is out of range. Constants must carry their data."""
    dtype = {name: v.dtype for name, v in graph.values.items()}
    for node in graph.nodes:
        where = f"node {node.name!r} ({node.op})"
        ins = [dtype[i] if i else None for i in node.inputs]
        outs = [dtype[o] for o in node.outputs]
        try:
            _check_node(graph, node, ins, outs)
        except ValueError as e:
            raise DsmFormatError(f"{where}: {e}") from None


def _need(got, want, what: str) -> None:
    if got != want:
        raise ValueError(f"{what} is {got}, must be {want}")


def _range(value, lo: int, hi: int, what: str) -> None:
    values = np.atleast_1d(np.asarray(value, dtype=np.int64))
    bad = (values < lo) | (values > hi)
    if np.any(bad):
        i = int(np.argmax(bad))
        at = f"[{i}] " if values.size > 1 else " "
        raise ValueError(f"{what}{at}is {int(values[i])}, must be in {lo}..{hi}")


def _constant(graph: Graph, name: str, dtype: str, what: str, length: int | None = None) -> np.ndarray | None:
    v = graph.values[name]
    if not v.is_constant:
        raise ValueError(f"{what} {name!r} must be a constant")
    _need(v.dtype, dtype, f"{what} {name!r}")
    if length is not None and tuple(v.shape) != (length,):
        raise ValueError(f"{what} {name!r} has shape {tuple(v.shape)}, must be ({length},)")
    return v.data


def _scale(value: float, what: str) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} is {value}; a scale must be finite and > 0")


def _one_of(got, allowed: tuple[str, ...], what: str) -> None:
    if got not in allowed:
        raise ValueError(f"{what} is {got}, must be {' or '.join(allowed)}")


def _zero_point(a: dict, key: str, dtype: str) -> None:
    """A u8 zero point is in 0..255; an i16 value is symmetric, its zero point 0."""
    if dtype == "i16":
        if a[key] != 0:
            raise ValueError(f"{key} is {a[key]}, must be 0 (the value is i16, symmetric)")
    else:
        _range(a[key], 0, 255, key)


def _act_bounds(a: dict, dtype: str) -> None:
    """act_min / act_max within the output dtype's range (absent: the whole range)."""
    qmin, qmax = Q_RANGE[dtype]
    lo, hi = a.get("act_min", qmin), a.get("act_max", qmax)
    _range(lo, qmin, qmax, f"act_min ({dtype} output)")
    _range(hi, qmin, qmax, f"act_max ({dtype} output)")
    if lo > hi:
        raise ValueError(f"act_min {lo} is greater than act_max {hi}")


def _check_node(graph: Graph, node: Node, ins: list, outs: list) -> None:
    a, op = node.attrs, node.op
    if op == "quantize":
        _need(ins[0], "f32", "input x")
        _one_of(outs[0], ("u8", "i16"), "output")
        _zero_point(a, "zero_point", outs[0])
        _scale(a["scale"], "scale")
    elif op == "dequantize":
        _one_of(ins[0], ("u8", "i16"), "input x")
        _need(outs[0], "f32", "output")
        _zero_point(a, "zero_point", ins[0])
        _scale(a["scale"], "scale")
    elif op in ("qconv2d", "qdense"):
        _one_of(ins[0], ("u8", "i16"), "input x")
        _one_of(outs[0], ("u8", "i16"), "output")
        _zero_point(a, "x_zero_point", ins[0])
        _zero_point(a, "y_zero_point", outs[0])
        _act_bounds(a, outs[0])
        w = graph.values[node.inputs[1]]
        _constant(graph, w.name, "i8", "weight")
        o = w.shape[0]
        k = math.prod(w.shape[1:])
        if ins[0] == "u8" and k > MAX_ACC_K:
            raise ValueError(f"weight {w.name!r} sums {k} products per output, more than {MAX_ACC_K} "
                             "(K * 255 * 128 must be < 2^31)")
        if ins[0] == "i16" and k > MAX_ACC_K_I16:
            raise ValueError(f"weight {w.name!r} sums {k} products per output, more than {MAX_ACC_K_I16} "
                             "(with i16 x, K * 32768 * 128 must be < 2^46)")
        _constant(graph, node.inputs[2], "i32", "bias", o)
        m = _constant(graph, node.inputs[3], "i32", "multiplier", o)
        s = _constant(graph, node.inputs[4], "i32", "shift", o)
        if m is not None:
            _range(m, 0, 2**31 - 1, f"multiplier {node.inputs[3]!r}")
        if s is not None:
            _range(s, -30, 30, f"shift {node.inputs[4]!r}")
        if ins[0] == "i16":
            _i16_input_requant(m, s, node.inputs[3], node.inputs[4])
    elif op == "requantize":
        _one_of(ins[0], ("u8", "i16"), "input x")
        _one_of(outs[0], ("u8", "i16"), "output")
        _zero_point(a, "x_zero_point", ins[0])
        _zero_point(a, "y_zero_point", outs[0])
        _range(a["multiplier"], 0, 2**31 - 1, "multiplier")
        _range(a["shift"], -30, 30, "shift")
    elif op == "qadd":
        _need(ins[0], "u8", "input a")
        _need(ins[1], "u8", "input b")
        _need(outs[0], "u8", "output")
        for key in ("a_zero_point", "b_zero_point", "y_zero_point"):
            _zero_point(a, key, "u8")
        _act_bounds(a, "u8")
        _range(a["a_multiplier"], 0, 2**31 - 1, "a_multiplier")
        _range(a["b_multiplier"], 0, 2**31 - 1, "b_multiplier")
        _range(a["shift"], -30, 30, "shift")
    elif op == "qconcat":
        for i, t in enumerate(ins):
            _need(t, "u8", f"input {i}")
        _need(outs[0], "u8", "output")
        _zero_point(a, "y_zero_point", "u8")
        _range(a["zero_points"], 0, 255, "zero_points")
        for key in ("zero_points", "multipliers", "shifts"):
            if len(a[key]) != len(ins):
                raise ValueError(f"{key} has {len(a[key])} entries for {len(ins)} inputs")
        _range(a["multipliers"], 0, 2**31 - 1, "multipliers")
        _range(a["shifts"], -30, 30, "shifts")
    elif op == "qlut":
        _need(ins[0], "u8", "input x")
        _need(outs[0], "u8", "output")
        _constant(graph, node.inputs[1], "u8", "table", 256)
    elif op == "qglobal_avgpool":
        _need(ins[0], "u8", "input x")
        _need(outs[0], "u8", "output")
        for key in ("x_zero_point", "y_zero_point"):
            _zero_point(a, key, "u8")
        _range(a["multiplier"], 0, 2**31 - 1, "multiplier")
        _range(a["shift"], -30, 30, "shift")
    elif "i16" in ins:
        if op not in I16_OPS:
            raise ValueError(f"does not take i16 activations (inputs are {', '.join(str(t) for t in ins)}); "
                             f"the ops that do: {', '.join(I16_OPS)}")
        if any(t != "i16" for t in ins if t is not None) or any(t != "i16" for t in outs):
            raise ValueError("an i16 input needs every input and the output to be i16")
    elif "u8" in ins:
        if op not in U8_OPS:
            raise ValueError(f"does not take u8 activations (inputs are {', '.join(str(t) for t in ins)})")
        if any(t != "u8" for t in ins if t is not None) or any(t != "u8" for t in outs):
            raise ValueError("a u8 input needs every input and the output to be u8")
        if op == "resize" and a.get("mode", "nearest") != "nearest":
            raise ValueError("resize of u8 needs mode nearest")
        if op == "pad" and a.get("mode", "constant") == "constant":
            v = float(a.get("value", 0.0))
            if v != int(v) or not 0 <= v <= 255:
                raise ValueError(f"pad of u8 needs value = the zero point (an integer 0..255), got {v}")
    else:
        for i, t in enumerate(ins):
            if t is not None and t != "f32":
                raise ValueError(f"input {i} ({node.inputs[i]!r}) is {t}; the op takes f32")
        for t in outs:
            _need(t, "f32", "output")


def _i16_input_requant(m, s, m_name: str, s_name: str) -> None:
    """With i16 x the multiplier is a multiple of 2^16 and 15 + shift >= 1, so that
    requant(acc, M, s) = round_shift(acc * (M >> 16), 15 + s) is exact in int64."""
    if m is not None:
        bad = np.asarray(m, dtype=np.int64) % I16_MULT_STEP != 0
        if np.any(bad):
            i = int(np.argmax(bad))
            raise ValueError(f"multiplier {m_name!r}[{i}] is {int(np.asarray(m).ravel()[i])}; with i16 x it must be "
                             "a multiple of 2^16 (15 significant bits)")
    if s is not None:
        _range(s, -14, 30, f"shift {s_name!r} (i16 x: 15 + shift >= 1)")
