"""Shape inference for the IR at a fixed batch size, from the op definitions in docs/format.md."""

from __future__ import annotations

import math
from typing import Any

from deepslim.ir.graph import Graph

Shape = tuple[int, ...]


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


def transpose_output_size(size: int, k: int, stride: int, pad_begin: int, pad_end: int, dilation: int = 1,
                          output_padding: int = 0) -> int:
    """Output length of conv_transpose2d along one axis (docs/format.md, op 15)."""
    out = (size - 1) * stride - pad_begin - pad_end + dilation * (k - 1) + output_padding + 1
    if out < 1:
        raise ValueError(f"conv_transpose2d output length {out} < 1")
    return out


def broadcast_shapes(a: Shape, b: Shape) -> Shape:
    """numpy broadcasting: align at the last axis; each pair equal or one of them 1."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def reshape_shape(x: Shape, spec: list[int]) -> Shape:
    """docs/format.md, reshape: 0 copies the input's size at that axis, one -1 takes the rest."""
    if any(d == 0 and i >= len(x) for i, d in enumerate(spec)):
        raise ValueError(f"reshape {x} -> {spec}: a 0 past the input's rank")
    out = [x[i] if d == 0 else d for i, d in enumerate(spec)]
    if out.count(-1) > 1 or any(d < -1 or d == 0 for d in out):
        raise ValueError(f"reshape {x} -> {spec}: at most one -1 and no other size below 1")
    total, known = math.prod(x), math.prod(d for d in out if d != -1)
    if -1 in out:
        if total % known:
            raise ValueError(f"reshape {x} -> {spec}: {total} elements do not divide by {known}")
        out[out.index(-1)] = total // known
    if math.prod(out) != total:
        raise ValueError(f"reshape {x} -> {spec}: {total} elements cannot become {tuple(out)}")
    return tuple(out)


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _conv(x: Shape, w: Shape, a: dict[str, Any], transpose: bool) -> Shape:
    if len(x) != 4 or len(w) != 4:
        raise ValueError(f"input {x} and weight {w} must both be 4-D")
    g = a.get("group", 1)
    sh, sw = a.get("strides", [1, 1])
    t, l, b, r = a.get("pads", [0, 0, 0, 0])
    dh, dw = a.get("dilations", [1, 1])
    if transpose:
        if x[1] != w[0] or x[1] % g:
            raise ValueError(f"input channels {x[1]}, weight {w}, group {g} disagree")
        oph, opw = a.get("output_padding", [0, 0])
        return (x[0], w[1] * g, transpose_output_size(x[2], w[2], sh, t, b, dh, oph),
                transpose_output_size(x[3], w[3], sw, l, r, dw, opw))
    if x[1] != w[1] * g or w[0] % g:
        raise ValueError(f"input channels {x[1]}, weight {w}, group {g} disagree")
    return (x[0], w[0], window_output_size(x[2], w[2], sh, t, b, dh), window_output_size(x[3], w[3], sw, l, r, dw))


def _pool(x: Shape, a: dict[str, Any], op: str) -> Shape:
    kh, kw = a["kernel"]
    sh, sw = a.get("strides", a["kernel"])
    t, l, b, r = a.get("pads", [0, 0, 0, 0])
    dh, dw = a.get("dilations", [1, 1]) if op == "maxpool2d" else (1, 1)
    ceil = bool(a.get("ceil_mode", 0))
    return (x[0], x[1], window_output_size(x[2], kh, sh, t, b, dh, ceil), window_output_size(x[3], kw, sw, l, r, dw, ceil))


def output_shape(op: str, attrs: dict[str, Any], shapes: list[Shape | None]) -> Shape:
    """Output shape of one node from its input shapes (None for an absent optional input)."""
    a = attrs
    x = shapes[0]
    if op in ("conv2d", "conv_transpose2d"):
        return _conv(x, shapes[1], a, op == "conv_transpose2d")
    if op == "dense":
        w = shapes[1]
        if x[-1] != w[1]:
            raise ValueError(f"input {x} does not end in the weight's K = {w[1]}")
        return x[:-1] + (w[0],)
    if op in ("maxpool2d", "avgpool2d"):
        return _pool(x, a, op)
    if op in ("relu", "softmax", "batchnorm", "activation", "lrn", "channel_shuffle"):
        if op == "channel_shuffle" and x[1] % a["group"]:
            raise ValueError(f"{x[1]} channels do not split into {a['group']} groups")
        return x
    if op == "flatten":
        axis = _axis(a.get("axis", 1), len(x) + 1) if x else 0
        return x[:axis] + (math.prod(x[axis:]),)
    if op in ("add", "sub", "mul", "div"):
        return broadcast_shapes(x, shapes[1])
    if op == "concat":
        axis = _axis(a["axis"], len(x))
        for s in shapes[1:]:
            if len(s) != len(x) or any(s[i] != x[i] for i in range(len(x)) if i != axis):
                raise ValueError(f"concat on axis {axis}: shapes {x} and {s} disagree")
        return x[:axis] + (sum(s[axis] for s in shapes),) + x[axis + 1:]
    if op == "reshape":
        return reshape_shape(x, a["shape"])
    if op == "transpose":
        perm = a["perm"]
        if sorted(perm) != list(range(len(x))):
            raise ValueError(f"perm {perm} is not a permutation of {len(x)} axes")
        return tuple(x[p] for p in perm)
    if op == "pad":
        p = a["pads"]
        if len(p) != 2 * len(x):
            raise ValueError(f"pads {p} need {2 * len(x)} values for rank {len(x)}")
        return tuple(d + p[i] + p[len(x) + i] for i, d in enumerate(x))
    if op == "resize":
        return (x[0], x[1], *a["sizes"])
    if op in ("global_avgpool", "global_maxpool"):
        return (x[0], x[1], 1, 1)
    if op == "slice":
        out = list(x)
        if not len(a["axes"]) == len(a["starts"]) == len(a["ends"]):
            raise ValueError("axes, starts and ends need the same length")
        for axis, start, end in zip(a["axes"], a["starts"], a["ends"]):
            axis = _axis(axis, len(x))
            out[axis] = len(range(*slice(start, end).indices(x[axis])))
        return tuple(out)
    raise ValueError(f"no shape rule for op {op!r}")


def infer_shapes(graph: Graph, batch: int = 1) -> dict[str, Shape]:
    """Shape of every activation (graph inputs and node outputs) with -1 dimensions set to `batch`."""
    shapes: dict[str, Shape] = {}
    for name in graph.inputs:
        shapes[name] = tuple(batch if d == -1 else d for d in graph.values[name].shape)
    for node in graph.nodes:
        ins: list[Shape | None] = []
        for name in node.inputs:
            if not name:
                ins.append(None)
            elif name in shapes:
                ins.append(shapes[name])
            elif name in graph.values and graph.values[name].is_constant:
                ins.append(tuple(graph.values[name].data.shape))
            else:
                raise ValueError(f"node {node.name!r} ({node.op}): input {name!r} is not produced before it")
        if not ins or ins[0] is None:
            raise ValueError(f"node {node.name!r} ({node.op}) has no first input")
        try:
            out = output_shape(node.op, node.attrs, ins)
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise ValueError(f"node {node.name!r} ({node.op}): {e}") from None
        for name in node.outputs:
            shapes[name] = out
    return shapes
