"""Op mappings of the ONNX front end: one method per ONNX op (or family), mixed into the converter
in deepslim/frontends/onnx.py, and the dispatch table HANDLERS.

The methods use the converter's helpers: `_act` (IR activation of an input), `_shape`, `_const` /
`_ints` / `_floats` (convert-time constants), `_ir_const` / `_operand` (IR constants), `_emit` (add an
IR node with its output shape), `_alias`, `_fail` (UnsupportedModelError naming the node).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from deepslim.frontends.onnx_fold import FOLDS
from deepslim.ir.graph import ACTIVATIONS
from deepslim.ir.ops import MAX_CONCAT_INPUTS

_FLOAT = 1  # onnx.TensorProto.FLOAT


# --------------------------------------------------------------------------------------------------
# Shape helpers (-1 marks the dynamic batch, only ever at dim 0)


def _conv_out(size: int, k: int, stride: int, pad_begin: int, pad_end: int, dilation: int = 1,
              ceil_mode: bool = False) -> int:
    span = size + pad_begin + pad_end - dilation * (k - 1) - 1
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1  # a window that would start in the end padding is dropped
    return out


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy broadcasting where -1 (the batch) only matches -1 or 1; None if incompatible."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def _type_name(elem_type: int) -> str:
    try:
        import onnx

        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except (ImportError, ValueError):
        return str(elem_type)


# --------------------------------------------------------------------------------------------------
# Op mappings


class OpMappings:
    """ONNX op -> IR nodes; each method takes (node, attributes)."""


    def _spatial_pads(self, a: dict[str, Any], size: tuple[int, ...], kernel: list[int], strides: list[int],
                      dilations: list[int]) -> list[int]:
        """IR pads [top, left, bottom, right] from ONNX pads / auto_pad."""
        auto = a.get("auto_pad", "NOTSET")
        if auto == "NOTSET":
            pads = [int(p) for p in a.get("pads", [0, 0, 0, 0])]
            if len(pads) != 4:
                raise self._fail(f"pads {pads} needs 4 values for a 2-D op")
            if any(p < 0 for p in pads):
                raise self._fail(f"negative pads {pads} are not supported")
            return pads
        if auto == "VALID":
            return [0, 0, 0, 0]
        if auto not in ("SAME_UPPER", "SAME_LOWER"):
            raise self._fail(f"auto_pad={auto!r}; supported: NOTSET, SAME_UPPER, SAME_LOWER, VALID")
        begin, end = [], []
        for n, k, s, d in zip(size, kernel, strides, dilations):
            out = -(-n // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
            small, big = total // 2, total - total // 2
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
        return begin + end

    def _need_rank4(self, name: str, what: str = "input") -> tuple[int, ...]:
        shape = self._shape(name)
        if len(shape) != 4:
            raise self._fail(f"{what} has shape {list(shape)}; only 4-D NCHW tensors (2-D spatial) are supported")
        return shape

    def _conv(self, node, a: dict[str, Any]) -> None:
        x = self._act(node.input[0])
        xs = self._need_rank4(node.input[0])
        w = self._floats(node.input[1], "weight")
        if w.ndim != 4:
            raise self._fail(f"weight has shape {list(w.shape)}; expected (O, C/group, kh, kw)")
        o, cg, kh, kw = w.shape
        if "kernel_shape" in a and list(a["kernel_shape"]) != [kh, kw]:
            raise self._fail(f"kernel_shape {a['kernel_shape']} disagrees with the weight shape {list(w.shape)}")
        strides = list(a.get("strides", [1, 1]))
        dilations = list(a.get("dilations", [1, 1]))
        group = int(a.get("group", 1))
        if xs[1] != cg * group or o % group:
            raise self._fail(f"input channels {xs[1]}, weight {list(w.shape)} and group {group} disagree")
        pads = self._spatial_pads(a, xs[2:], [kh, kw], strides, dilations)
        inputs = [x, self._ir_const(node.input[1], "weight")]
        if self._has(node, 2):
            b = self._floats(node.input[2], "bias")
            if b.shape != (o,):
                raise self._fail(f"bias has shape {list(b.shape)}; expected [{o}]")
            inputs.append(self._ir_const(node.input[2], "bias"))
        oh = _conv_out(xs[2], kh, strides[0], pads[0], pads[2], dilations[0])
        ow = _conv_out(xs[3], kw, strides[1], pads[1], pads[3], dilations[1])
        self._emit("conv2d", inputs, node.output[0], (xs[0], o, oh, ow), strides=strides, pads=pads,
                   dilations=dilations, group=group, activation=0)

    def _conv_transpose(self, node, a: dict[str, Any]) -> None:
        x = self._act(node.input[0])
        xs = self._need_rank4(node.input[0])
        w = self._floats(node.input[1], "weight")
        if w.ndim != 4:
            raise self._fail(f"weight has shape {list(w.shape)}; expected (C, O/group, kh, kw)")
        c, og, kh, kw = w.shape
        if "kernel_shape" in a and list(a["kernel_shape"]) != [kh, kw]:
            raise self._fail(f"kernel_shape {a['kernel_shape']} disagrees with the weight shape {list(w.shape)}")
        strides = [int(s) for s in a.get("strides", [1, 1])]
        dilations = [int(d) for d in a.get("dilations", [1, 1])]
        group = int(a.get("group", 1))
        out_pad = [int(p) for p in a.get("output_padding", [0, 0])]
        if xs[1] != c or c % group:
            raise self._fail(f"input channels {xs[1]}, weight {list(w.shape)} and group {group} disagree")
        auto = a.get("auto_pad", "NOTSET")
        ksz = [(kh - 1) * dilations[0] + 1, (kw - 1) * dilations[1] + 1]
        target = [int(s) for s in a["output_shape"]][-2:] if "output_shape" in a else None
        if target is None and auto in ("SAME_UPPER", "SAME_LOWER"):
            target = [xs[2] * strides[0], xs[3] * strides[1]]
        if target is not None:
            begin, end = [], []
            for i in range(2):
                total = strides[i] * (xs[2 + i] - 1) + out_pad[i] + ksz[i] - target[i]
                if total < 0:
                    raise self._fail(f"output_shape {target} needs negative padding")
                if auto == "SAME_UPPER":
                    begin.append(total // 2)
                    end.append(total - total // 2)
                else:
                    begin.append(total - total // 2)
                    end.append(total // 2)
            pads = begin + end
        elif auto == "VALID":
            pads = [0, 0, 0, 0]
        elif auto == "NOTSET":
            pads = [int(p) for p in a.get("pads", [0, 0, 0, 0])]
            if len(pads) != 4 or any(p < 0 for p in pads):
                raise self._fail(f"pads {pads} must be 4 non-negative values")
        else:
            raise self._fail(f"auto_pad={auto!r}; supported: NOTSET, SAME_UPPER, SAME_LOWER, VALID")
        o = og * group
        inputs = [x, self._ir_const(node.input[1], "weight")]
        if self._has(node, 2):
            b = self._floats(node.input[2], "bias")
            if b.shape != (o,):
                raise self._fail(f"bias has shape {list(b.shape)}; expected [{o}]")
            inputs.append(self._ir_const(node.input[2], "bias"))
        oh = (xs[2] - 1) * strides[0] - pads[0] - pads[2] + ksz[0] + out_pad[0]
        ow = (xs[3] - 1) * strides[1] - pads[1] - pads[3] + ksz[1] + out_pad[1]
        self._emit("conv_transpose2d", inputs, node.output[0], (xs[0], o, oh, ow), strides=strides, pads=pads,
                   dilations=dilations, group=group, output_padding=out_pad, activation=0)

    def _gemm(self, node, a: dict[str, Any]) -> None:
        x = self._act(node.input[0], "input A")
        xs = self._shape(node.input[0])
        if len(xs) != 2:
            raise self._fail(f"input A has shape {list(xs)}; expected 2-D")
        if int(a.get("transA", 0)):
            raise self._fail("transA=1 is not supported (only transA=0)")
        b = self._floats(node.input[1], "input B")
        if b.ndim != 2:
            raise self._fail(f"input B has shape {list(b.shape)}; expected 2-D")
        weight = b if int(a.get("transB", 0)) else b.T
        alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
        m, k = weight.shape
        if xs[1] != k:
            raise self._fail(f"input A {list(xs)} and B {list(b.shape)} disagree")
        if alpha != 1.0:
            weight = weight * np.float32(alpha)
        variant = "" if weight is b else "_t" if alpha == 1.0 else "_scaled"
        inputs = [x, self._ir_const(node.input[1], "input B", np.ascontiguousarray(weight), variant)]
        if self._has(node, 2):
            c = self._floats(node.input[2], "input C")
            if c.size == 1:
                bias = np.full(m, c.ravel()[0], dtype=np.float32)
            elif c.shape in ((m,), (1, m)):
                bias = c.reshape(m)
            else:
                raise self._fail(
                    f"input C has shape {list(c.shape)}; only a bias of shape [{m}] or [1, {m}] is supported"
                )
            if beta != 1.0:
                bias = bias * np.float32(beta)
            same = bias.shape == c.shape and beta == 1.0
            inputs.append(self._ir_const(node.input[2], "input C", bias, "" if same else "_bias"))
        self._emit("dense", inputs, node.output[0], (xs[0], m), activation=0)

    def _matmul(self, node, a: dict[str, Any]) -> None:
        x = self._act(node.input[0], "input A")
        xs = self._shape(node.input[0])
        if node.input[1] in self.acts:
            raise self._fail("input B is an activation; only a constant 2-D weight is supported")
        b = self._floats(node.input[1], "input B")
        if b.ndim != 2 or len(xs) < 2 or xs[-1] != b.shape[0]:
            raise self._fail(f"shapes {list(xs)} x {list(b.shape)}: only (..., K) x (K, M) with a constant 2-D "
                             "weight is supported")
        m = b.shape[1]
        out = node.output[0]
        inputs = [x, self._ir_const(node.input[1], "input B", np.ascontiguousarray(b.T), "_t")]
        bias_add = self._bias_add_after(out, m)
        if bias_add is not None:
            index, add, bias_name = bias_add
            inputs.append(self._ir_const(bias_name, "bias", self.consts[bias_name].value.reshape(m),
                                         "" if self.consts[bias_name].value.shape == (m,) else "_bias"))
            self.skip.add(index)
            out = add.output[0]
        self._emit("dense", inputs, out, (*xs[:-1], m), activation=0)

    def _bias_add_after(self, out: str, m: int):
        """The Add right after a MatMul that adds a constant bias [m] (or [1, .., m]), if any."""
        if self.consumers.get(out) != 1 or out in self.graph_outputs:
            return None
        for j in range(self.index + 1, len(self.onnx_graph.node)):
            n = self.onnx_graph.node[j]
            if out not in n.input:
                continue
            if n.op_type != "Add" or len(n.input) != 2:
                return None
            other = n.input[1] if n.input[0] == out else n.input[0]
            c = self.consts.get(other)
            if c is None or c.tagged or c.value.dtype != np.float32 or c.value.size != m:
                return None
            if c.value.ndim > len(self._shape(self.node.input[0])) or (c.value.ndim and c.value.shape[-1] != m):
                return None
            return j, n, other
        return None

    def _pool(self, node, a: dict[str, Any], op: str) -> None:
        x = self._act(node.input[0])
        xs = self._need_rank4(node.input[0])
        kernel = [int(k) for k in a["kernel_shape"]]
        if len(kernel) != 2:
            raise self._fail(f"kernel_shape {kernel}: only 2-D pooling is supported")
        strides = [int(s) for s in a.get("strides", [1, 1])]
        dilations = [int(d) for d in a.get("dilations", [1, 1])]
        if int(a.get("storage_order", 0)) != 0:
            raise self._fail("storage_order=1 is not supported")
        self._extra_outputs_unused(node)
        ceil = int(a.get("ceil_mode", 0))
        pads = self._spatial_pads(a, xs[2:], kernel, strides, dilations)
        attrs: dict[str, Any] = dict(kernel=kernel, strides=strides, pads=pads, ceil_mode=ceil)
        if op == "maxpool2d":
            attrs["dilations"] = dilations
        else:
            if dilations != [1, 1]:
                raise self._fail(f"dilations {dilations}: average pooling supports dilation 1 only")
            attrs["count_include_pad"] = int(a.get("count_include_pad", 0))
        if a.get("auto_pad", "NOTSET") != "NOTSET":
            ceil = 0  # auto_pad fixes the output size; pads were computed for it
            attrs["ceil_mode"] = 0
        oh = _conv_out(xs[2], kernel[0], strides[0], pads[0], pads[2], dilations[0], bool(ceil))
        ow = _conv_out(xs[3], kernel[1], strides[1], pads[1], pads[3], dilations[1], bool(ceil))
        self._emit(op, [x], node.output[0], (xs[0], xs[1], oh, ow), **attrs)

    def _global_pool(self, node, a: dict[str, Any], op: str) -> None:
        x = self._act(node.input[0])
        xs = self._need_rank4(node.input[0])
        self._emit(op, [x], node.output[0], (xs[0], xs[1], 1, 1))

    def _reduce_spatial(self, node, a: dict[str, Any], op: str) -> None:
        """ReduceMean / ReduceMax over H and W of a 4-D tensor (x.mean((2, 3))) -> global pool."""
        xs = self._need_rank4(node.input[0])
        if self._has(node, 1):
            axes = self._ints(node.input[1], "axes")
        else:
            axes = [int(v) for v in a.get("axes", [])]
        if sorted(self._norm_axis(ax, 4) for ax in axes) != [2, 3]:
            raise self._fail(f"axes {axes}: only a reduction over axes 2 and 3 (H, W) of a 4-D tensor is supported")
        if int(a.get("keepdims", 1)):
            self._global_pool(node, a, op)
            return
        pooled = self._fresh(f"{node.output[0]}_pool")
        self._emit(op, [self._act(node.input[0])], pooled, (xs[0], xs[1], 1, 1))
        self._emit("flatten", [pooled], node.output[0], (xs[0], xs[1]), axis=1)

    def _batchnorm(self, node, a: dict[str, Any]) -> None:
        x = self._act(node.input[0])
        xs = self._shape(node.input[0])
        if int(a.get("training_mode", 0)):
            raise self._fail("training_mode=1 is not supported (inference form only)")
        if int(a.get("spatial", 1)) != 1:
            raise self._fail("spatial=0 is not supported")
        self._extra_outputs_unused(node)
        if len(xs) < 2:
            raise self._fail(f"input shape {list(xs)} has no channel dimension")
        names = []
        for i, what in enumerate(("scale", "bias", "mean", "var"), start=1):
            v = self._floats(node.input[i], what)
            if v.shape != (xs[1],):
                raise self._fail(f"{what} has shape {list(v.shape)}; expected [{xs[1]}]")
            names.append(self._ir_const(node.input[i], what))
        self._emit("batchnorm", [x, *names], node.output[0], xs, epsilon=float(a.get("epsilon", 1e-5)))

    def _unary(self, node, op: str, **attrs: Any) -> None:
        x = self._act(node.input[0])
        self._emit(op, [x], node.output[0], self._shape(node.input[0]), **attrs)

    def _activation(self, node, kind: str, alpha: float = 0.0, beta: float = 0.0) -> None:
        self._unary(node, "activation", kind=ACTIVATIONS[kind], alpha=float(alpha), beta=float(beta))

    def _clip(self, node, a: dict[str, Any]) -> None:
        if self.opset < 11:
            lo, hi = float(a.get("min", -np.inf)), float(a.get("max", np.inf))
        else:
            lo = float(self._floats(node.input[1], "min").item()) if self._has(node, 1) else -np.inf
            hi = float(self._floats(node.input[2], "max").item()) if self._has(node, 2) else np.inf
        if lo == 0.0 and hi == np.inf:
            self._unary(node, "relu")
        else:
            self._activation(node, "clip", lo, hi)

    def _prelu(self, node, a: dict[str, Any]) -> None:
        slope = self._floats(node.input[1], "slope")
        if slope.size == 0 or np.any(slope != slope.ravel()[0]):
            raise self._fail("PRelu with per-channel slopes is not supported (only one slope, as LeakyRelu)")
        self._activation(node, "leaky_relu", float(slope.ravel()[0]))

    def _binary(self, node, a: dict[str, Any], op: str) -> None:
        if len(node.input) != 2:
            raise self._fail(f"{len(node.input)} inputs; expected 2")
        sa, sb = self._shape(node.input[0]), self._shape(node.input[1])
        shape = _broadcast(sa, sb)
        if shape is None:
            raise self._fail(f"shapes {list(sa)} and {list(sb)} do not broadcast (a dynamic batch only "
                             "broadcasts with 1)")
        ins = [self._operand(n, "input") for n in node.input]
        self._emit(op, ins, node.output[0], shape, **({"activation": 0} if op == "add" else {}))

    def _sum(self, node, a: dict[str, Any]) -> None:
        names = list(node.input)
        if len(names) == 1:
            self._alias(node.output[0], names[0])
            return
        acc, acc_shape = self._operand(names[0], "input"), self._shape(names[0])
        for i, n in enumerate(names[1:], start=1):
            shape = _broadcast(acc_shape, self._shape(n))
            if shape is None:
                raise self._fail(f"shapes {list(acc_shape)} and {list(self._shape(n))} do not broadcast")
            out = node.output[0] if i == len(names) - 1 else self._fresh(f"{node.output[0]}_sum{i}")
            acc = self._emit("add", [acc, self._operand(n, "input")], out, shape, activation=0)
            acc_shape = shape

    def _concat(self, node, a: dict[str, Any]) -> None:
        names = [n for n in node.input if n]
        shapes = [self._shape(n) for n in names]
        rank = len(shapes[0])
        axis = int(a["axis"])
        if not -rank <= axis < rank:
            raise self._fail(f"axis {axis} is out of range for rank {rank}")
        axis = axis + rank if axis < 0 else axis
        for s in shapes:
            if len(s) != rank or any(s[i] != shapes[0][i] for i in range(rank) if i != axis):
                raise self._fail(f"input shapes {[list(s) for s in shapes]} disagree off axis {axis}")
        if len(names) > MAX_CONCAT_INPUTS:
            raise self._fail(f"{len(names)} inputs; at most {MAX_CONCAT_INPUTS} are supported")
        if len(names) == 1:
            self._alias(node.output[0], names[0])
            return
        sizes = [s[axis] for s in shapes]
        shape = list(shapes[0])
        shape[axis] = -1 if -1 in sizes else sum(sizes)
        ins = [self._operand(n, "input") for n in names]
        self._emit("concat", ins, node.output[0], tuple(shape), axis=axis)

    def _lrn(self, node, a: dict[str, Any]) -> None:
        self._need_rank4(node.input[0])
        self._unary(node, "lrn", size=int(a["size"]), alpha=float(a.get("alpha", 1e-4)),
                    beta=float(a.get("beta", 0.75)), bias=float(a.get("bias", 1.0)))

    def _softmax(self, node, a: dict[str, Any]) -> None:
        xs = self._shape(node.input[0])
        rank = len(xs)
        axis = int(a.get("axis", -1 if self.opset >= 13 else 1))
        if not -rank <= axis < rank:
            raise self._fail(f"axis {axis} is out of range for rank {rank}")
        axis = axis + rank if axis < 0 else axis
        if self.opset < 13:
            # softmax over all of dims axis.. flattened: one axis when the others there are 1
            big = [i for i in range(axis, rank) if xs[i] != 1]
            if len(big) > 1 or -1 in [xs[i] for i in big]:
                raise self._fail(
                    f"opset {self.opset} Softmax over the flattened dims {axis}.. of shape {list(xs)} is not "
                    "a softmax over one axis; only that case is supported"
                )
            axis = big[0] if big else rank - 1
        self._unary(node, "softmax", axis=axis)

    def _flatten(self, node, a: dict[str, Any]) -> None:
        xs = self._shape(node.input[0])
        axis = int(a.get("axis", 1))
        axis = axis + len(xs) if axis < 0 else axis
        if axis == 1:
            rest = math.prod(xs[1:])
            self._unary_shape(node, "flatten", (xs[0], rest), axis=1)
            return
        self._reshape_to(node, [-1 if -1 in xs[:axis] else math.prod(xs[:axis]), math.prod(xs[axis:])]
                         if axis > 0 else [1, -1])

    def _unary_shape(self, node, op: str, out_shape: tuple[int, ...], **attrs: Any) -> None:
        self._emit(op, [self._act(node.input[0])], node.output[0], out_shape, **attrs)

    def _reshape_to(self, node, target: list[int]) -> None:
        """Emit reshape to `target` (0 copies the input dim, one -1 takes the rest), checking that the
        result is the same for every batch size up to where the batch stays at dim 0."""
        xs = self._shape(node.input[0])
        outs = []
        for b in (1, 2) if xs and xs[0] == -1 else (None,):
            xb = [b if d == -1 else d for d in xs]
            shape = [xb[i] if t == 0 else t for i, t in enumerate(target)]
            total, known = math.prod(xb), math.prod(d for d in shape if d != -1)
            if shape.count(-1) > 1 or known == 0 or total % known:
                raise self._fail(f"cannot reshape {list(xs)} to {target}")
            outs.append([total // known if d == -1 else d for d in shape])
        if len(outs) == 2:
            one, two = outs
            if any(p != q for p, q in zip(one[1:], two[1:])) or two[0] != 2 * one[0]:
                raise self._fail(
                    f"reshape of {list(xs)} to {target} does not keep the dynamic batch at dim 0; "
                    "only reshapes that keep it there are supported"
                )
            out_shape = (-1, *one[1:])
        else:
            out_shape = tuple(outs[0])
        self._emit("reshape", [self._act(node.input[0])], node.output[0], out_shape, shape=list(target))

    def _reshape(self, node, a: dict[str, Any]) -> None:
        xs = self._shape(node.input[0])
        c = self.consts.get(node.input[1])
        if c is None:
            raise self._fail(f"shape {node.input[1]!r} is computed at run time; only a constant shape is supported")
        values = [int(v) for v in c.value.ravel()]
        tags = [int(t) for t in c.tag.ravel()] if c.tag is not None else [0] * len(values)
        target = []
        for i, (v, t) in enumerate(zip(values, tags)):
            if t == 1 and i == 0 and xs and xs[0] == -1:
                target.append(0)
            elif t:
                target.append(-1)
            elif v == 0 and int(a.get("allowzero", 0)):
                raise self._fail("allowzero=1 with a 0 in the shape (an empty tensor) is not supported")
            else:
                target.append(v)
        if target.count(-1) > 1:
            raise self._fail(f"shape {values} has more than one size that depends on the batch or is -1")
        self._reshape_to(node, target)

    def _squeeze(self, node, a: dict[str, Any]) -> None:
        xs = self._shape(node.input[0])
        axes = self._axes(node, a)
        if axes is None:
            if xs and xs[0] == -1:
                raise self._fail("Squeeze without axes on a dynamic batch: the output rank depends on the batch")
            axes = [i for i, d in enumerate(xs) if d == 1]
        axes = [self._norm_axis(x, len(xs)) for x in axes]
        for ax in axes:
            if xs[ax] != 1:
                raise self._fail(f"cannot squeeze axis {ax} of size {xs[ax]} (shape {list(xs)})")
        out = [d for i, d in enumerate(xs) if i not in axes]
        self._reshape_to(node, [0 if (i == 0 and d == -1) else d for i, d in enumerate(out)]
                         if 0 not in axes else out)

    def _unsqueeze(self, node, a: dict[str, Any]) -> None:
        xs = self._shape(node.input[0])
        axes = self._axes(node, a)
        if axes is None:
            raise self._fail("Unsqueeze needs axes")
        rank = len(xs) + len(axes)
        axes = sorted(self._norm_axis(x, rank) for x in axes)
        out, it = [], iter(xs)
        for i in range(rank):
            out.append(1 if i in axes else next(it))
        target = [0 if (i == 0 and d == -1) else d for i, d in enumerate(out)]
        self._reshape_to(node, target)

    def _axes(self, node, a: dict[str, Any]) -> list[int] | None:
        if self._has(node, 1):
            return self._ints(node.input[1], "axes")
        return [int(x) for x in a["axes"]] if "axes" in a else None

    def _norm_axis(self, axis: int, rank: int) -> int:
        if not -rank <= axis < rank:
            raise self._fail(f"axis {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis

    def _transpose(self, node, a: dict[str, Any]) -> None:
        xs = self._shape(node.input[0])
        perm = [int(p) for p in a.get("perm", range(len(xs) - 1, -1, -1))]
        if sorted(perm) != list(range(len(xs))):
            raise self._fail(f"perm {perm} is not a permutation of {len(xs)} axes")
        self._unary_shape(node, "transpose", tuple(xs[p] for p in perm), perm=perm)

    def _pad(self, node, a: dict[str, Any]) -> None:
        xs = self._shape(node.input[0])
        rank = len(xs)
        mode = a.get("mode", "constant")
        if mode not in ("constant", "reflect", "edge"):
            raise self._fail(f"mode={mode!r}; supported: constant, reflect, edge")
        if self.opset < 11:
            pads, value = [int(p) for p in a["pads"]], float(a.get("value", 0.0))
        else:
            pads = self._ints(node.input[1], "pads")
            value = 0.0
            if self._has(node, 2):
                v = self._const(node.input[2], "constant_value")
                if v.size != 1:
                    raise self._fail("constant_value must be a scalar")
                value = float(v.ravel()[0])
            if self._has(node, 3):
                axes = [self._norm_axis(x, rank) for x in self._ints(node.input[3], "axes")]
                if len(pads) != 2 * len(axes):
                    raise self._fail(f"pads {pads} do not match axes {axes}")
                full = [0] * (2 * rank)
                for j, ax in enumerate(axes):
                    full[ax], full[rank + ax] = pads[j], pads[len(axes) + j]
                pads = full
        if len(pads) != 2 * rank:
            raise self._fail(f"pads {pads} need {2 * rank} values for rank {rank}")
        if any(p < 0 for p in pads):
            raise self._fail(f"negative pads {pads} (cropping) are not supported")
        out = []
        for i, d in enumerate(xs):
            if d == -1:
                if pads[i] or pads[rank + i]:
                    raise self._fail("padding the dynamic batch dimension is not supported")
                out.append(-1)
                continue
            if mode == "reflect" and max(pads[i], pads[rank + i]) >= d:
                raise self._fail(f"reflect pads {pads} need to be smaller than the input size {d} on axis {i}")
            out.append(d + pads[i] + pads[rank + i])
        self._unary_shape(node, "pad", tuple(out), pads=pads, mode=mode, value=value)

    def _resize(self, node, a: dict[str, Any]) -> None:
        xs = self._need_rank4(node.input[0])
        mode = a.get("mode", "nearest")
        if mode not in ("nearest", "linear"):
            raise self._fail(f"mode={mode!r}; supported: nearest, linear")
        ctm = a.get("coordinate_transformation_mode", "half_pixel")
        if ctm not in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"):
            raise self._fail(f"coordinate_transformation_mode={ctm!r}; supported: half_pixel, "
                             "pytorch_half_pixel, align_corners, asymmetric")
        nearest = a.get("nearest_mode", "round_prefer_floor")
        if int(a.get("exclude_outside", 0)) or int(a.get("antialias", 0)):
            raise self._fail("exclude_outside=1 and antialias=1 are not supported")
        policy = a.get("keep_aspect_ratio_policy", "stretch")
        axes = [self._norm_axis(int(x), 4) for x in a["axes"]] if "axes" in a else [0, 1, 2, 3]
        scales = sizes = None
        if self._has(node, 3):
            sizes = self._resize_arg(node.input[3], axes, "sizes", xs, integer=True)
        if sizes is None and self._has(node, 2):
            scales = self._resize_arg(node.input[2], axes, "scales", xs, integer=False)
        if sizes is None and scales is None:
            raise self._fail("neither scales nor sizes is given")
        if sizes is not None and policy != "stretch":
            raise self._fail(f"keep_aspect_ratio_policy={policy!r}; only 'stretch' is supported")
        if scales is not None:
            for i in (0, 1):
                if scales[i] is not None and scales[i] != 1.0:
                    raise self._fail(f"scales {scales} resize the batch or channel axis; only H and W are supported")
            out_hw = []
            for i in (2, 3):
                s = scales[i]
                out = int(math.floor(xs[i] * s))
                if out != xs[i] * s:
                    # every coordinate mode, align_corners included, then maps with the unrounded size
                    raise self._fail(
                        f"scale {s} on an input of size {xs[i]} gives {xs[i] * s}, not a whole size; ONNX then "
                        "maps coordinates with the scale, the IR with the size ratio"
                    )
                out_hw.append(out)
        else:
            if (sizes[0] is not None and sizes[0] != xs[0]) or (sizes[1] is not None and sizes[1] != xs[1]):
                raise self._fail(f"sizes {sizes} resize the batch or channel axis; only H and W are supported")
            out_hw = [sizes[2], sizes[3]]
        if min(out_hw) < 1:
            raise self._fail(f"output size {out_hw} is empty")
        self._unary_shape(node, "resize", (xs[0], xs[1], *out_hw), sizes=out_hw, mode=mode,
                          coordinate_transformation_mode=ctm, nearest_mode=nearest)

    def _resize_arg(self, name: str, axes: list[int], what: str, xs, integer: bool) -> list | None:
        """Per-axis scales or sizes (None where they follow the batch); None if the tensor is empty."""
        c = self.consts.get(name)
        if c is None:
            raise self._fail(f"{what} {name!r} is computed at run time; only constants are supported")
        if c.value.size == 0:
            return None
        values = c.value.ravel()
        tags = c.tag.ravel() if c.tag is not None else np.zeros(values.size, np.int8)
        if values.size != len(axes):
            raise self._fail(f"{what} has {values.size} values for {len(axes)} axes")
        out: list = [1.0 if not integer else xs[i] for i in range(4)]
        for v, t, ax in zip(values, tags, axes):
            if t:
                if ax != 0 or not integer or t != 1:
                    raise self._fail(f"{what} on axis {ax} depends on the batch size")
                out[ax] = None
            else:
                out[ax] = int(v) if integer else float(v)
        return out

    def _slice_to(self, node, out: str, bounds: dict[int, tuple[int, int]]) -> None:
        """Emit slice keeping [start, end) of each axis in `bounds` (already clamped, non-empty)."""
        xs = self._shape(node.input[0])
        shape = list(xs)
        axes = sorted(ax for ax, (s, e) in bounds.items() if (s, e) != (0, xs[ax]))
        for ax in axes:
            shape[ax] = bounds[ax][1] - bounds[ax][0]
        self._emit("slice", [self._act(node.input[0])], out, tuple(shape), axes=axes,
                   starts=[bounds[ax][0] for ax in axes], ends=[bounds[ax][1] for ax in axes])

    def _clamp_range(self, xs, axis: int, start: int, end: int) -> tuple[int, int]:
        dim = xs[axis]
        if dim == -1:
            if start in (0, -(2**63)) and end >= 2**31 - 1:
                return 0, -1
            raise self._fail(f"slicing the dynamic batch dimension ({start}:{end}) is not supported")
        s = min(max(start + dim if start < 0 else start, 0), dim)
        e = min(max(end + dim if end < 0 else end, 0), dim)
        if e <= s:
            raise self._fail(f"slice {start}:{end} of axis {axis} (size {dim}) is empty")
        return s, e

    def _slice(self, node, a: dict[str, Any]) -> None:
        xs = self._shape(node.input[0])
        if self.opset < 10:
            starts, ends = [int(v) for v in a["starts"]], [int(v) for v in a["ends"]]
            axes = [int(v) for v in a.get("axes", range(len(starts)))]
            steps = [1] * len(starts)
        else:
            starts, ends = self._ints(node.input[1], "starts"), self._ints(node.input[2], "ends")
            axes = self._ints(node.input[3], "axes") if self._has(node, 3) else list(range(len(starts)))
            steps = self._ints(node.input[4], "steps") if self._has(node, 4) else [1] * len(starts)
        if any(st != 1 for st in steps):
            raise self._fail(f"steps {steps}: only step 1 is supported")
        bounds = {}
        for ax, s, e in zip(axes, starts, ends):
            ax = self._norm_axis(ax, len(xs))
            bounds[ax] = self._clamp_range(xs, ax, s, e)
        bounds = {ax: (s, e) for ax, (s, e) in bounds.items() if e != -1}
        self._slice_to(node, node.output[0], bounds)

    def _split(self, node, a: dict[str, Any]) -> None:
        xs = self._shape(node.input[0])
        axis = self._norm_axis(int(a.get("axis", 0)), len(xs))
        if xs[axis] == -1:
            raise self._fail("splitting the dynamic batch dimension is not supported")
        outs = list(node.output)
        if self._has(node, 1):
            split = self._ints(node.input[1], "split")
        elif "split" in a:
            split = [int(v) for v in a["split"]]
        else:
            n = int(a.get("num_outputs", len(outs)))
            chunk = -(-xs[axis] // n)
            split = [min(chunk, xs[axis] - i * chunk) for i in range(n)]
        if len(split) != len(outs) or sum(split) != xs[axis] or min(split) < 1:
            raise self._fail(f"split {split} does not divide axis {axis} of size {xs[axis]} into {len(outs)} parts")
        start = 0
        for out, size in zip(outs, split):
            if out:
                self._slice_to(node, out, {axis: (start, start + size)})
            start += size

    def _dropout(self, node, a: dict[str, Any]) -> None:
        if self._has(node, 2):
            training = self._const(node.input[2], "training_mode")
            if bool(np.asarray(training).ravel()[0]):
                raise self._fail("training_mode=true is not supported")
        self._extra_outputs_unused(node)
        self._alias(node.output[0], node.input[0])

    def _cast(self, node, a: dict[str, Any]) -> None:
        if int(a["to"]) != _FLOAT:
            raise self._fail(f"cast of an activation to {_type_name(int(a['to']))}; only float32 is supported")
        self._alias(node.output[0], node.input[0])


# --------------------------------------------------------------------------------------------------
# Dispatch table: adding a mapping means one line here and, if needed, one method above.

_C = OpMappings
_Handler = Callable[[_C, Any, dict[str, Any]], None]
HANDLERS: dict[str, _Handler] = {
    "Conv": _C._conv,
    "ConvTranspose": _C._conv_transpose,
    "Gemm": _C._gemm,
    "MatMul": _C._matmul,
    "MaxPool": lambda c, n, a: c._pool(n, a, "maxpool2d"),
    "AveragePool": lambda c, n, a: c._pool(n, a, "avgpool2d"),
    "GlobalAveragePool": lambda c, n, a: c._global_pool(n, a, "global_avgpool"),
    "GlobalMaxPool": lambda c, n, a: c._global_pool(n, a, "global_maxpool"),
    "ReduceMean": lambda c, n, a: c._reduce_spatial(n, a, "global_avgpool"),
    "ReduceMax": lambda c, n, a: c._reduce_spatial(n, a, "global_maxpool"),
    "BatchNormalization": _C._batchnorm,
    "Relu": lambda c, n, a: c._unary(n, "relu"),
    "Clip": _C._clip,
    "LeakyRelu": lambda c, n, a: c._activation(n, "leaky_relu", a.get("alpha", 0.01)),
    "PRelu": _C._prelu,
    "Sigmoid": lambda c, n, a: c._activation(n, "sigmoid"),
    "HardSigmoid": lambda c, n, a: c._activation(n, "hardsigmoid", a.get("alpha", 0.2), a.get("beta", 0.5)),
    "HardSwish": lambda c, n, a: c._activation(n, "hardswish"),
    "Tanh": lambda c, n, a: c._activation(n, "tanh"),
    "Add": lambda c, n, a: c._binary(n, a, "add"),
    "Sub": lambda c, n, a: c._binary(n, a, "sub"),
    "Mul": lambda c, n, a: c._binary(n, a, "mul"),
    "Div": lambda c, n, a: c._binary(n, a, "div"),
    "Sum": _C._sum,
    "Concat": _C._concat,
    "LRN": _C._lrn,
    "Flatten": _C._flatten,
    "Reshape": _C._reshape,
    "Squeeze": _C._squeeze,
    "Unsqueeze": _C._unsqueeze,
    "Transpose": _C._transpose,
    "Pad": _C._pad,
    "Resize": _C._resize,
    "Softmax": _C._softmax,
    "Slice": _C._slice,
    "Split": _C._split,
    "Dropout": _C._dropout,
    "Identity": lambda c, n, a: c._alias(n.output[0], n.input[0]),
    "Cast": _C._cast,
}

SUPPORTED = (
    "Supported ops: " + ", ".join(sorted(HANDLERS))
    + "; folded when their inputs are constants: " + ", ".join(sorted(set(FOLDS) - set(HANDLERS)))
    + ", Shape, Size"
)
