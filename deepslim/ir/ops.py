"""What each op accepts: inputs and attributes with their types and defaults (docs/format.md, "ops").

Attribute kinds are the .dsm attribute types: "int", "float", "ints", "floats", "string".
A default of `REQUIRED` marks an attribute that must be given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deepslim.ir.graph import OPS

REQUIRED = object()


@dataclass(frozen=True)
class AttrSpec:
    kind: str  # "int" | "float" | "ints" | "floats" | "string"
    default: Any = REQUIRED
    length: int | None = None  # required length of an "ints"/"floats" attribute


@dataclass(frozen=True)
class OpSpec:
    name: str
    inputs: tuple[str, ...]  # required inputs, in order
    optional: tuple[str, ...] = ()  # optional inputs after them
    attrs: dict[str, AttrSpec] = field(default_factory=dict)

    @property
    def id(self) -> int:
        return OPS[self.name]


_POOL = {
    "kernel": AttrSpec("ints", REQUIRED, 2),
    "strides": AttrSpec("ints", None, 2),  # None: the default is `kernel`
    "pads": AttrSpec("ints", [0, 0, 0, 0], 4),
    "ceil_mode": AttrSpec("int", 0),
}

# The fused activation epilogue (docs/format.md, "Fused activation epilogue").
_ACT = {
    "activation": AttrSpec("int", 0),
    "act_alpha": AttrSpec("float", 0.0),
    "act_beta": AttrSpec("float", 0.0),
}

_CONV = {
    "strides": AttrSpec("ints", [1, 1], 2),
    "pads": AttrSpec("ints", [0, 0, 0, 0], 4),
    "dilations": AttrSpec("ints", [1, 1], 2),
    "group": AttrSpec("int", 1),
}

MAX_CONCAT_INPUTS = 255

OP_SPECS: dict[str, OpSpec] = {
    "conv2d": OpSpec("conv2d", ("x", "weight"), ("bias",), {**_CONV, **_ACT}),
    "dense": OpSpec("dense", ("x", "weight"), ("bias",), dict(_ACT)),
    "maxpool2d": OpSpec("maxpool2d", ("x",), (), {**_POOL, "dilations": AttrSpec("ints", [1, 1], 2)}),
    "avgpool2d": OpSpec("avgpool2d", ("x",), (), {**_POOL, "count_include_pad": AttrSpec("int", 0)}),
    "relu": OpSpec("relu", ("x",)),
    "flatten": OpSpec("flatten", ("x",), (), {"axis": AttrSpec("int", 1)}),
    "softmax": OpSpec("softmax", ("x",), (), {"axis": AttrSpec("int", -1)}),
    "batchnorm": OpSpec("batchnorm", ("x", "scale", "bias", "mean", "var"), (), {"epsilon": AttrSpec("float", 1e-5)}),
    "activation": OpSpec(
        "activation", ("x",), (),
        {"kind": AttrSpec("int", REQUIRED), "alpha": AttrSpec("float", 0.0), "beta": AttrSpec("float", 0.0)},
    ),
    "add": OpSpec("add", ("a", "b"), (), dict(_ACT)),
    "sub": OpSpec("sub", ("a", "b")),
    "mul": OpSpec("mul", ("a", "b")),
    "div": OpSpec("div", ("a", "b")),
    # concat is variadic: one required input, up to MAX_CONCAT_INPUTS - 1 more
    "concat": OpSpec("concat", ("x0",), tuple(f"x{i}" for i in range(1, MAX_CONCAT_INPUTS)),
                     {"axis": AttrSpec("int", REQUIRED)}),
    "conv_transpose2d": OpSpec(
        "conv_transpose2d", ("x", "weight"), ("bias",),
        {**_CONV, "output_padding": AttrSpec("ints", [0, 0], 2), **_ACT},
    ),
    "lrn": OpSpec(
        "lrn", ("x",), (),
        {"size": AttrSpec("int", REQUIRED), "alpha": AttrSpec("float", 1e-4),
         "beta": AttrSpec("float", 0.75), "bias": AttrSpec("float", 1.0)},
    ),
    "channel_shuffle": OpSpec("channel_shuffle", ("x",), (), {"group": AttrSpec("int", REQUIRED)}),
    "reshape": OpSpec("reshape", ("x",), (), {"shape": AttrSpec("ints", REQUIRED)}),
    "transpose": OpSpec("transpose", ("x",), (), {"perm": AttrSpec("ints", REQUIRED)}),
    "pad": OpSpec(
        "pad", ("x",), (),
        {"pads": AttrSpec("ints", REQUIRED), "mode": AttrSpec("string", "constant"), "value": AttrSpec("float", 0.0)},
    ),
    "resize": OpSpec(
        "resize", ("x",), (),
        {"sizes": AttrSpec("ints", REQUIRED, 2), "mode": AttrSpec("string", "nearest"),
         "coordinate_transformation_mode": AttrSpec("string", "half_pixel"),
         "nearest_mode": AttrSpec("string", "round_prefer_floor")},
    ),
    "global_avgpool": OpSpec("global_avgpool", ("x",)),
    "global_maxpool": OpSpec("global_maxpool", ("x",)),
    "slice": OpSpec(
        "slice", ("x",), (),
        {"axes": AttrSpec("ints", REQUIRED), "starts": AttrSpec("ints", REQUIRED), "ends": AttrSpec("ints", REQUIRED)},
    ),
}

_QZP = {"x_zero_point": AttrSpec("int", REQUIRED), "y_zero_point": AttrSpec("int", REQUIRED),
        "act_min": AttrSpec("int", 0), "act_max": AttrSpec("int", 255)}
OP_SPECS.update({
    "quantize": OpSpec("quantize", ("x",), (), {"scale": AttrSpec("float", REQUIRED), "zero_point": AttrSpec("int", REQUIRED)}),
    "dequantize": OpSpec("dequantize", ("x",), (), {"scale": AttrSpec("float", REQUIRED), "zero_point": AttrSpec("int", REQUIRED)}),
    "qconv2d": OpSpec("qconv2d", ("x", "weight", "bias", "multiplier", "shift"), (), {**_CONV, **_QZP}),
    "qdense": OpSpec("qdense", ("x", "weight", "bias", "multiplier", "shift"), (), dict(_QZP)),
    "qadd": OpSpec(
        "qadd", ("a", "b"), (),
        {"a_zero_point": AttrSpec("int", REQUIRED), "b_zero_point": AttrSpec("int", REQUIRED),
         "y_zero_point": AttrSpec("int", REQUIRED), "a_multiplier": AttrSpec("int", REQUIRED),
         "b_multiplier": AttrSpec("int", REQUIRED), "shift": AttrSpec("int", REQUIRED),
         "act_min": AttrSpec("int", 0), "act_max": AttrSpec("int", 255)},
    ),
    "qconcat": OpSpec(
        "qconcat", ("x0",), tuple(f"x{i}" for i in range(1, MAX_CONCAT_INPUTS)),
        {"axis": AttrSpec("int", REQUIRED), "zero_points": AttrSpec("ints", REQUIRED),
         "multipliers": AttrSpec("ints", REQUIRED), "shifts": AttrSpec("ints", REQUIRED),
         "y_zero_point": AttrSpec("int", REQUIRED)},
    ),
    "qlut": OpSpec("qlut", ("x", "table")),
    "qglobal_avgpool": OpSpec(
        "qglobal_avgpool", ("x",), (),
        {"x_zero_point": AttrSpec("int", REQUIRED), "y_zero_point": AttrSpec("int", REQUIRED),
         "multiplier": AttrSpec("int", REQUIRED), "shift": AttrSpec("int", REQUIRED)},
    ),
    "requantize": OpSpec(
        "requantize", ("x",), (),
        {"x_zero_point": AttrSpec("int", REQUIRED), "y_zero_point": AttrSpec("int", REQUIRED),
         "multiplier": AttrSpec("int", REQUIRED), "shift": AttrSpec("int", REQUIRED)},
    ),
})

OPS_BY_ID: dict[int, str] = {op_id: name for name, op_id in OPS.items()}


def check_attr(op: str, key: str, value: Any) -> Any:
    """Return `value` normalised to its kind (int, float, list[int], list[float], str); raise
    ValueError naming the op and the attribute if the key is unknown or the value does not fit."""
    spec = OP_SPECS[op].attrs.get(key)
    if spec is None:
        known = ", ".join(OP_SPECS[op].attrs) or "none"
        raise ValueError(f"{op}: unknown attribute {key!r} (known: {known})")
    try:
        if spec.kind == "int":
            return _as_int(value)
        if spec.kind == "float":
            return float(value)
        if spec.kind == "string":
            if not isinstance(value, str):
                raise TypeError
            return value
        items = list(value)
        items = [_as_int(v) for v in items] if spec.kind == "ints" else [float(v) for v in items]
    except (TypeError, ValueError):
        raise ValueError(f"{op}: attribute {key!r} must be of kind {spec.kind}, got {value!r}") from None
    if spec.length is not None and len(items) != spec.length:
        raise ValueError(f"{op}: attribute {key!r} needs {spec.length} values, got {len(items)}")
    return items


def check_node(op: str, inputs: list[str], attrs: dict[str, Any]) -> dict[str, Any]:
    """Check input count and attributes of a node; returns the normalised attributes."""
    spec = OP_SPECS[op]
    if not len(spec.inputs) <= len(inputs) <= len(spec.inputs) + len(spec.optional):
        raise ValueError(
            f"{op}: takes {len(spec.inputs)} to {len(spec.inputs) + len(spec.optional)} inputs, "
            f"got {len(inputs)}"
        )
    for i, name in enumerate(inputs[: len(spec.inputs)]):
        if not name:
            raise ValueError(f"{op}: input {spec.inputs[i]!r} is required")
    out = {key: check_attr(op, key, value) for key, value in attrs.items()}
    for key, a in spec.attrs.items():
        if a.default is REQUIRED and key not in out:
            raise ValueError(f"{op}: attribute {key!r} is required")
    return out


def _as_int(value: Any) -> int:
    if isinstance(value, float) or not hasattr(value, "__index__"):
        raise TypeError
    return int(value)
