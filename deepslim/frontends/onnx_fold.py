"""Constant folding for the ONNX front end: the shape arithmetic exporters put around Reshape, Resize
and Pad (Shape -> Gather -> Unsqueeze -> Concat -> Reshape, Cast, Slice, Range, Where, ...) evaluated
with numpy at convert time.

A folded tensor is a `Const`: its value, and a *batch tag* array of the same shape (None when no
element depends on the batch size). A dynamic batch is folded with the placeholder value `BATCH` (1);
tag 1 marks an element that *is* the batch size, tag 2 one that depends on it in another way
(B * 3, B == 0, ...). Ops that only move elements (Gather, Slice, Concat, Unsqueeze, ...) move the
tags with them; element-wise ops tag every output element one of whose inputs is tagged; any other
op fails on a tagged input, so a batch-dependent value is never mistaken for a constant.

Needs numpy only (attributes come in as plain Python values, decoded by the caller).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

BATCH = 1  # the value a dynamic batch dimension takes while folding


class FoldError(ValueError):
    """A constant cannot be folded; the caller adds the node's name and op."""


@dataclass
class Const:
    value: np.ndarray
    tag: np.ndarray | None = None  # int8, same shape: 0 fixed, 1 the batch size, 2 depends on it

    @property
    def tagged(self) -> bool:
        return self.tag is not None and bool(np.any(self.tag))


# A fold function gets the node's attributes, its input values (None for an absent optional input)
# and the opset; it returns the output values.
Fold = Callable[[dict[str, Any], list[Any], int], list[np.ndarray]]


def _axes_arg(attrs: dict[str, Any], inputs: list[Any], index: int, attr_name: str = "axes") -> list[int] | None:
    """Axes given as an input (newer opsets) or as an attribute (older ones)."""
    if len(inputs) > index and inputs[index] is not None:
        return [int(a) for a in np.asarray(inputs[index]).ravel()]
    if attr_name in attrs:
        return [int(a) for a in attrs[attr_name]]
    return None


def _norm_axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise FoldError(f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _constant(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in attrs:
            v = attrs[key]
            if key.startswith("value_float"):
                return [np.asarray(v, dtype=np.float32)]
            if key.startswith("value_int"):
                return [np.asarray(v, dtype=np.int64)]
            return [np.asarray(v)]
    raise FoldError(f"Constant with attribute(s) {sorted(attrs)} (string or sparse constants) is not supported")


def _constant_of_shape(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    value = np.asarray(attrs.get("value", np.zeros(1, dtype=np.float32))).ravel()
    shape = [int(d) for d in np.asarray(inputs[0]).ravel()]
    return [np.full(shape, value[0], dtype=value.dtype)]


def _gather(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    data, idx = np.asarray(inputs[0]), np.asarray(inputs[1]).astype(np.int64)
    axis = _norm_axis(int(attrs.get("axis", 0)), data.ndim)
    idx = np.where(idx < 0, idx + data.shape[axis], idx)
    if np.any(idx < 0) or np.any(idx >= data.shape[axis]):
        raise FoldError(f"Gather index out of range for size {data.shape[axis]}")
    return [np.take(data, idx, axis=axis)]


def _slice(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    data = np.asarray(inputs[0])
    if opset < 10:
        starts, ends = list(attrs["starts"]), list(attrs["ends"])
        axes = list(attrs.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in np.asarray(inputs[1]).ravel()]
        ends = [int(v) for v in np.asarray(inputs[2]).ravel()]
        axes = _axes_arg(attrs, inputs, 3, "__none__") or list(range(len(starts)))
        steps = _axes_arg(attrs, inputs, 4, "__none__") or [1] * len(starts)
    out = data
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = _norm_axis(int(axis), data.ndim)
        dim = data.shape[axis]
        if step == 0:
            raise FoldError("Slice step 0")
        s = start + dim if start < 0 else start
        e = end + dim if end < 0 else end
        if step > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
        out = np.take(out, np.arange(s, e, step, dtype=np.int64), axis=axis)
    return [out]


def _cast(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    import onnx.helper  # the caller has onnx

    dtype = onnx.helper.tensor_dtype_to_np_dtype(int(attrs["to"]))
    return [np.asarray(inputs[0]).astype(dtype)]


def _concat(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    arrays = [np.asarray(a) for a in inputs if a is not None]
    axis = _norm_axis(int(attrs["axis"]), arrays[0].ndim)
    return [np.concatenate(arrays, axis=axis)]


def _unsqueeze(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    data = np.asarray(inputs[0])
    axes = _axes_arg(attrs, inputs, 1) or []
    rank = data.ndim + len(axes)
    return [np.expand_dims(data, tuple(sorted(_norm_axis(a, rank) for a in axes)))]


def _squeeze(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    data = np.asarray(inputs[0])
    axes = _axes_arg(attrs, inputs, 1)
    if axes is None:
        return [np.squeeze(data)]
    return [np.squeeze(data, axis=tuple(_norm_axis(a, data.ndim) for a in axes))]


def _reshape(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    data = np.asarray(inputs[0])
    shape = [int(d) for d in np.asarray(inputs[1]).ravel()]
    if not attrs.get("allowzero", 0):
        shape = [data.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return [data.reshape(shape)]


def _flatten(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    data = np.asarray(inputs[0])
    axis = int(attrs.get("axis", 1))
    axis = axis + data.ndim if axis < 0 else axis
    return [data.reshape(int(np.prod(data.shape[:axis])), -1)]


def _transpose(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    data = np.asarray(inputs[0])
    perm = attrs.get("perm")
    return [np.transpose(data, None if perm is None else [int(p) for p in perm])]


def _identity(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    return [np.asarray(inputs[0])]


def _expand(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    data = np.asarray(inputs[0])
    shape = [int(d) for d in np.asarray(inputs[1]).ravel()]
    out_shape = np.broadcast_shapes(data.shape, tuple(shape))
    return [np.broadcast_to(data, out_shape).copy()]


def _tile(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    return [np.tile(np.asarray(inputs[0]), [int(r) for r in np.asarray(inputs[1]).ravel()])]


def _range(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
    start, limit, delta = (np.asarray(v).item() for v in inputs[:3])
    return [np.arange(start, limit, delta, dtype=np.asarray(inputs[0]).dtype)]


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        if np.any(b == 0):
            raise FoldError("integer division by zero")
        return np.fix(np.true_divide(a, b)).astype(a.dtype)  # ONNX integer Div truncates
    return np.true_divide(a, b)


def _elementwise(fn: Callable[..., np.ndarray], keep_dtype: bool = True) -> Fold:
    def fold(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
        arrays = [np.asarray(a) for a in inputs if a is not None]
        out = np.asarray(fn(*arrays))
        if keep_dtype and out.dtype != np.bool_:
            out = out.astype(arrays[-1].dtype if fn is np.where else arrays[0].dtype)
        return [out]
    return fold


def _reduce(fn: Callable[..., np.ndarray], axes_input_opset: int) -> Fold:
    def fold(attrs: dict[str, Any], inputs: list[Any], opset: int) -> list[np.ndarray]:
        data = np.asarray(inputs[0])
        axes = _axes_arg(attrs, inputs, 1) if opset >= axes_input_opset else _axes_arg(attrs, [], 1)
        keep = bool(attrs.get("keepdims", 1))
        if axes is None or len(axes) == 0:
            if attrs.get("noop_with_empty_axes", 0):
                return [data]
            axes = list(range(data.ndim))
        axis = tuple(_norm_axis(a, data.ndim) for a in axes)
        return [np.asarray(fn(data, axis=axis, keepdims=keep)).astype(data.dtype)]
    return fold


FOLDS: dict[str, Fold] = {
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Gather": _gather,
    "Slice": _slice,
    "Cast": _cast,
    "Concat": _concat,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Transpose": _transpose,
    "Identity": _identity,
    "Dropout": _identity,
    "Expand": _expand,
    "Tile": _tile,
    "Range": _range,
    "Add": _elementwise(np.add),
    "Sub": _elementwise(np.subtract),
    "Mul": _elementwise(np.multiply),
    "Div": _elementwise(_div),
    "Neg": _elementwise(np.negative),
    "Abs": _elementwise(np.abs),
    "Floor": _elementwise(np.floor),
    "Ceil": _elementwise(np.ceil),
    "Sqrt": _elementwise(np.sqrt),
    "Reciprocal": _elementwise(np.reciprocal),
    "Pow": _elementwise(np.power),
    "Min": _elementwise(lambda *a: np.minimum.reduce(np.broadcast_arrays(*a))),
    "Max": _elementwise(lambda *a: np.maximum.reduce(np.broadcast_arrays(*a))),
    "Equal": _elementwise(np.equal, keep_dtype=False),
    "Less": _elementwise(np.less, keep_dtype=False),
    "Greater": _elementwise(np.greater, keep_dtype=False),
    "LessOrEqual": _elementwise(np.less_equal, keep_dtype=False),
    "GreaterOrEqual": _elementwise(np.greater_equal, keep_dtype=False),
    "Not": _elementwise(np.logical_not, keep_dtype=False),
    "And": _elementwise(np.logical_and, keep_dtype=False),
    "Or": _elementwise(np.logical_or, keep_dtype=False),
    "Where": _elementwise(np.where),
    "ReduceProd": _reduce(np.prod, 18),
    "ReduceSum": _reduce(np.sum, 13),
    "ReduceMax": _reduce(np.max, 18),
    "ReduceMin": _reduce(np.min, 18),
}

# Ops that move elements without computing on them: the tags of these inputs go through the same
# op (the other inputs are indices, axes or shapes, which must not be batch-dependent).
_MOVERS: dict[str, tuple[int, ...] | None] = {  # None: every input
    "Gather": (0,), "Slice": (0,), "Cast": (0,), "Concat": None, "Unsqueeze": (0,), "Squeeze": (0,),
    "Reshape": (0,), "Flatten": (0,), "Transpose": (0,), "Identity": (0,), "Dropout": (0,),
    "Expand": (0,), "Tile": (0,),
}
_ELEMENTWISE = {
    "Add", "Sub", "Mul", "Div", "Neg", "Abs", "Floor", "Ceil", "Sqrt", "Reciprocal", "Pow", "Min", "Max",
    "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Where",
}
_REDUCERS = {"ReduceProd", "ReduceSum", "ReduceMax", "ReduceMin"}


def fold(op: str, attrs: dict[str, Any], inputs: list[Const | None], opset: int) -> list[Const]:
    """Evaluate op on constant inputs; raises FoldError when it cannot be folded."""
    fn = FOLDS.get(op)
    if fn is None:
        raise FoldError(f"{op} cannot be evaluated at convert time")
    values = [c.value if c is not None else None for c in inputs]
    try:
        outs = fn(attrs, values, opset)
    except FoldError:
        raise
    except (ValueError, IndexError, KeyError, TypeError) as e:
        raise FoldError(f"evaluating {op} on constants failed: {e}") from None
    if op == "Dropout":
        outs = outs[:1]
    tagged = [i for i, c in enumerate(inputs) if c is not None and c.tagged]
    if not tagged:
        return [Const(v) for v in outs]
    if op in _MOVERS:
        movable = _MOVERS[op]
        if movable is not None and any(i not in movable for i in tagged):
            raise FoldError(f"the indices, axes or shape of {op} depend on the batch size")
        if op == "Cast":
            return [Const(outs[0], inputs[0].tag.copy())]
        tag_inputs = [
            (np.zeros(c.value.shape, np.int8) if c.tag is None else c.tag)
            if c is not None and (movable is None or i in movable) else (c.value if c is not None else None)
            for i, c in enumerate(inputs)
        ]
        tag = fn(attrs, tag_inputs, opset)[0].astype(np.int8)
        return [Const(outs[0], tag)]
    if op in _ELEMENTWISE:
        tags = [np.asarray(c.tag if c.tag is not None else np.zeros(c.value.shape, np.int8)) != 0
                for c in inputs if c is not None]
        any_tag = np.broadcast_to(np.logical_or.reduce(np.broadcast_arrays(*tags)), outs[0].shape)
        return [Const(outs[0], (any_tag * 2).astype(np.int8))]
    if op in _REDUCERS:
        return [Const(outs[0], np.full(outs[0].shape, 2, np.int8))]
    raise FoldError(f"{op} on a value that depends on the batch size cannot be evaluated at convert time; "
                    "the batch must stay dynamic")


def shape_of(shape: tuple[int, ...], start: int | None = None, end: int | None = None) -> Const:
    """The folded result of ONNX Shape on an activation of IR shape `shape` (-1 = the batch)."""
    dims = np.array([BATCH if d == -1 else d for d in shape], dtype=np.int64)
    tag = np.array([1 if d == -1 else 0 for d in shape], dtype=np.int8)
    rank = len(shape)
    s = 0 if start is None else min(max(start + rank if start < 0 else start, 0), rank)
    e = rank if end is None else min(max(end + rank if end < 0 else end, 0), rank)
    return Const(dims[s:e], tag[s:e])
