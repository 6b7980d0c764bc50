"""quantize_graph: an fp32 IR graph -> a graph with u8 activations, i8 weights and integer ops.

Walks the nodes in order and keeps, for each activation of the float graph, its f32 and/or u8
version in the new graph, converting (quantize / dequantize) only where a node needs the other one:
the graph input is quantized once, each output dequantized once, and an fp32 island (a node listed
in keep_fp32, or an op without a quantized form such as softmax) converts only at its boundary.

    conv2d, dense         -> qconv2d, qdense (ReLU / clip fused as act_min / act_max)
    add                   -> qadd (both inputs activations; ReLU / clip fused)
    relu, activation      -> qlut (a 256-entry table); a fused sigmoid, hard swish, tanh,
                             leaky ReLU or hard sigmoid becomes the q-op followed by a qlut
    concat                -> concat when every input has the same scale and zero point, else qconcat
    global_avgpool        -> qglobal_avgpool
    maxpool2d, global_maxpool, flatten, reshape, transpose, channel_shuffle, slice,
    pad (reflect, edge, or constant 0), resize (nearest)
                          -> the same op on u8 (its output keeps the input's scale and zero point)
    everything else       -> float, between dequantize and quantize

A conv/dense listed in `int16` (all of them with activation_bits=16) runs "16x8": i8 weights, an i16
output (symmetric, scale max(|lo|, |hi|) / 32767) and whatever input it finds (i16, or u8 as it is;
f32 is quantized to i16). A node or op that takes only u8 reads an i16 value through one shared
`requantize` (i16 -> u8); maxpool2d, global_maxpool, flatten and reshape pass i16 through.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from deepslim.format.tensors import encode_tensor
from deepslim.frontends.reference import apply_activation
from deepslim.ir.graph import ACTIVATIONS, Encoding, Graph, Node, Value
from deepslim.quant.calibrate import DEFAULT_PERCENTILE, METHODS, calibrate_graph
from deepslim.quant.fixedpoint import quantize_multiplier, quantize_multipliers
from deepslim.quant.params import Q_RANGES, choose_qparams, choose_qparams_i16, quantize_bias, quantize_weights

__all__ = ["I16_MOVEMENT_OPS", "MOVEMENT_OPS", "int16_nodes", "prepare_graph", "quantize_graph"]

# ops that run on u8 unchanged (docs/format.md); pad and resize only in some modes, see _moves_u8
MOVEMENT_OPS = ("maxpool2d", "global_maxpool", "flatten", "reshape", "transpose", "channel_shuffle", "slice",
                "pad", "resize")
I16_MOVEMENT_OPS = ("maxpool2d", "global_maxpool", "flatten", "reshape")  # those that also pass i16
_LUT_CODES = (3, 4, 5, 6, 7)  # activation codes with no fused integer form


def quantize_graph(graph: Graph, *, calib: np.ndarray | None = None,
                   ranges: dict[str, tuple[float, float]] | None = None, method: str = "minmax",
                   keep_fp32: Iterable[str] = (), weight_bits: int = 8,
                   percentile: float = DEFAULT_PERCENTILE, int16: Iterable[str] = (),
                   activation_bits: int = 8) -> Graph:
    """Quantize an fp32 graph (after optimize()).

    calib: calibration inputs (N, ...) run through the float reference executor to collect the
        activation statistics `method` needs ("minmax", "percentile", "kl", "mse"); and/or
    ranges: explicit real ranges (lo, hi) per activation value name (e.g. from QAT); they take
        precedence, and values they do not name are calibrated from `calib` (an error without it).
        A sigmoid / hard swish / tanh / leaky ReLU / hard sigmoid fused into a conv, dense or add is
        split off first; the value between them is named `<output>.preact`.
    keep_fp32: node names to keep in float (an fp32 island converts only at its boundary).
    weight_bits: 8, or 4 (int4 weights: i8 values in -7..7, stored 4-bit packed).
    percentile: the percentile of method "percentile".
    int16: conv2d / dense node names to run 16x8 (i8 weights, i16 output activation from the same
        calibrated range; the input is read as it is: i16, u8, or f32 quantized to i16).
        A node whose fused activation needs a table (sigmoid, hard swish, tanh, leaky ReLU, hard
        sigmoid) stays in the u8 path: an i16 table would have 65536 entries.
    activation_bits: 8, or 16 to put every conv2d / dense not in keep_fp32 in `int16`.

    Returns a new graph: quantize after the graph input, dequantize before each output. Weights
    keep their layout (dense or sparse_rel) unless the other is smaller, and are Huffman coded
    where that is smaller.
    """
    if method not in METHODS:
        raise ValueError(f"unknown calibration method {method!r}; known: {', '.join(METHODS)}")
    if weight_bits not in (4, 8):
        raise ValueError(f"weight_bits must be 8 or 4, got {weight_bits}")
    if calib is None and ranges is None:
        raise ValueError("quantize_graph needs calibration inputs (calib) or activation ranges (ranges)")
    keep = set(keep_fp32)
    unknown = keep - {n.name for n in graph.nodes}
    if unknown:
        raise ValueError(f"keep_fp32 names nodes that are not in the graph: {', '.join(sorted(unknown))}")
    wide = int16_nodes(graph, int16, activation_bits, keep)
    float_graph = prepare_graph(graph)
    keep |= {f"{n}.act" for n in keep}  # a split-off activation stays with its node
    table = dict(ranges or {})
    calibrated: dict[str, tuple[float, float]] | None = None
    if calib is not None:
        calibrated = calibrate_graph(float_graph, calib, method, percentile)

    def range_of(name: str) -> tuple[float, float]:
        if name in table:
            lo, hi = table[name]
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ValueError(f"range of {name!r} is ({lo}, {hi}); needs finite lo <= hi")
            return float(lo), float(hi)
        if calibrated is None:
            raise ValueError(f"no range for activation {name!r}: pass it in `ranges` or give `calib`")
        return calibrated[name]

    return _Quantizer(float_graph, range_of, keep, weight_bits, wide).run()


def int16_nodes(graph: Graph, int16: Iterable[str] = (), activation_bits: int = 8,
                keep_fp32: Iterable[str] = ()) -> set[str]:
    """The conv2d / dense nodes that run 16x8: those named in `int16` (all but keep_fp32 with
    activation_bits=16), less those whose fused activation needs a table (they stay u8)."""
    if activation_bits not in (8, 16) or isinstance(activation_bits, bool):
        raise ValueError(f"activation_bits must be 8 or 16, got {activation_bits!r}")
    if isinstance(int16, str):
        raise ValueError(f"int16 must be a list of node names, got {int16!r}")
    keep, wide = set(keep_fp32), set(int16)
    ops = {n.name: n.op for n in graph.nodes}
    unknown = wide - set(ops)
    if unknown:
        raise ValueError(f"int16 names nodes that are not in the graph: {', '.join(sorted(unknown))}")
    other = sorted(n for n in wide if ops[n] not in ("conv2d", "dense"))
    if other:
        raise ValueError(f"int16 names nodes that are not conv2d or dense: {', '.join(other)}")
    both = sorted(wide & keep)
    if both:
        raise ValueError(f"nodes both in int16 and keep_fp32: {', '.join(both)}")
    if activation_bits == 16:
        wide = {name for name, op in ops.items() if op in ("conv2d", "dense") and name not in keep}
    return {n.name for n in graph.nodes if n.name in wide and n.attrs.get("activation", 0) not in _LUT_CODES}


def prepare_graph(graph: Graph) -> Graph:
    """A copy of `graph` where a fused activation without an integer form (codes 3-7) on conv2d,
    dense or add is a separate `activation` node reading `<output>.preact`."""
    g = Graph(dict(graph.values), [], list(graph.inputs), list(graph.outputs))
    for node in graph.nodes:
        code = node.attrs.get("activation", 0)
        if node.op in ("conv2d", "dense", "add") and code in _LUT_CODES:
            out = node.outputs[0]
            pre = _unique(g.values, f"{out}.preact")
            g.add_value(Value(pre, graph.values[out].shape))
            attrs = {k: v for k, v in node.attrs.items() if k not in ("activation", "act_alpha", "act_beta")}
            g.nodes.append(Node(node.op, node.name, list(node.inputs), [pre], attrs))
            g.nodes.append(Node("activation", f"{node.name}.act", [pre], [out],
                                {"kind": code, "alpha": node.attrs.get("act_alpha", 0.0),
                                 "beta": node.attrs.get("act_beta", 0.0)}))
        else:
            g.nodes.append(Node(node.op, node.name, list(node.inputs), list(node.outputs), dict(node.attrs)))
    return g


def _unique(taken, base: str) -> str:
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}{i}"
    return name


def _clamp_q(zp: int, scale: float, real: float, qmin: int = 0, qmax: int = 255) -> int:
    """The quantized value of the real bound `real` (e.g. a clip's), clamped to qmin..qmax."""
    if real == math.inf:
        return qmax
    if real == -math.inf:
        return qmin
    return int(np.clip(zp + round(real / scale), qmin, qmax))


class _Quantizer:
    def __init__(self, src: Graph, range_of, keep: set[str], weight_bits: int, wide: set[str]) -> None:
        self.src, self.range_of, self.keep, self.bits, self.wide = src, range_of, keep, weight_bits, wide
        self.out = Graph()
        self.f32: dict[str, str] = {}  # float-graph value -> its f32 version in out
        self.u8: dict[str, str] = {}  # float-graph value -> its u8 version in out
        self.i16: dict[str, str] = {}  # float-graph value -> its i16 version in out
        self.produced: dict[str, str] = {}  # float-graph value -> the dtype its node writes
        self.params: dict[str, tuple[float, int]] = {}  # u8 / i16 value in out -> (scale, zero point)
        self.copied: dict[str, str] = {}  # float constant -> its name in out

    # -- names and values ---------------------------------------------------------------------
    def _activation(self, name: str, like: str, dtype: str) -> str:
        self.out.add_value(Value(name, tuple(self.src.values[like].shape), dtype))
        return name

    def _constant(self, name: str, data: np.ndarray, dtype: str, encoding: Encoding | None = None) -> str:
        """A new constant; a quantized weight keeps its float name (the float one, if a float node
        also reads it, is then copied under another name)."""
        taken = self.out.values.keys() | (self.src.values.keys() - {name})
        name = _unique(taken, name)
        self.out.add_value(Value(name, tuple(data.shape), dtype, data, encoding or Encoding()))
        return name

    def _copy_constant(self, name: str) -> str:
        if name not in self.copied:
            v = self.src.values[name]
            new = _unique(self.out.values.keys(), name)
            self.out.add_value(Value(new, v.shape, v.dtype, v.data, v.encoding))
            self.copied[name] = new
        return self.copied[name]

    def _new_value(self, v: str, suffix: str, dtype: str) -> str:
        return self._activation(_unique(self.out.values.keys() | self.src.values.keys(), f"{v}.{suffix}"), v, dtype)

    def _new_node_name(self, base: str) -> str:
        return _unique({n.name for n in self.out.nodes}, base)

    # -- conversions ----------------------------------------------------------------------------
    def as_f32(self, v: str) -> str:
        if self.src.values[v].is_constant:
            return self._copy_constant(v)
        if v not in self.f32:
            q = self.i16[v] if self.produced[v] == "i16" else self.u8[v]
            name = v if v in self.src.outputs and v not in self.out.values else _unique(
                self.out.values.keys() | self.src.values.keys(), f"{v}.f32")
            self._activation(name, v, "f32")
            scale, zp = self.params[q]
            self.out.add_node("dequantize", self._new_node_name(f"{v}.dequantize"), [q], [name], scale=scale,
                              zero_point=zp)
            self.f32[v] = name
        return self.f32[v]

    def as_u8(self, v: str) -> str:
        if v not in self.u8:
            scale, zp = choose_qparams(*self.range_of(v))
            if self.produced.get(v) == "i16":
                x = self.i16[v]
                name = self._new_value(v, "u8", "u8")
                mult, shift = quantize_multiplier(self.params[x][0] / scale)
                self.out.add_node("requantize", self._new_node_name(f"{v}.requantize"), [x], [name],
                                  x_zero_point=0, y_zero_point=zp, multiplier=mult, shift=shift)
            else:
                x = self.f32[v]
                name = self._new_value(v, "u8", "u8")
                self.out.add_node("quantize", self._new_node_name(f"{v}.quantize"), [x], [name], scale=scale,
                                  zero_point=zp)
            self.u8[v] = name
            self.params[name] = (scale, zp)
        return self.u8[v]

    def as_i16(self, v: str) -> str:
        """The i16 version of an f32 value (a quantize)."""
        if v not in self.i16:
            scale, zp = choose_qparams_i16(*self.range_of(v))
            name = self._new_value(v, "i16", "i16")
            self.out.add_node("quantize", self._new_node_name(f"{v}.quantize"), [self.f32[v]], [name], scale=scale,
                              zero_point=zp)
            self.i16[v] = name
            self.params[name] = (scale, zp)
        return self.i16[v]

    def _q_output(self, v: str, params: tuple[float, int], dtype: str = "u8") -> str:
        """Declare the u8 or i16 version of float-graph value v, which a node writes (a graph output's
        gets another name)."""
        name = v
        if v in self.src.outputs:
            name = _unique(self.out.values.keys() | self.src.values.keys(), f"{v}.{dtype}")
        self._activation(name, v, dtype)
        (self.i16 if dtype == "i16" else self.u8)[v] = name
        self.produced[v] = dtype
        self.params[name] = params
        return name

    def _out_params(self, v: str, dtype: str = "u8") -> tuple[float, int]:
        return (choose_qparams_i16 if dtype == "i16" else choose_qparams)(*self.range_of(v))

    # -- the walk ---------------------------------------------------------------------------------
    def run(self) -> Graph:
        for name in self.src.inputs:
            self._activation(name, name, "f32")
            self.f32[name] = name
            self.produced[name] = "f32"
        for node in self.src.nodes:
            self.node(node)
        for name in self.src.outputs:
            if name in self.src.inputs:
                continue
            self.as_f32(name)
            if self.f32[name] != name:  # only when a float op already wrote it under another name
                raise AssertionError(f"output {name!r} lost its name")
        self.out.inputs, self.out.outputs = list(self.src.inputs), list(self.src.outputs)
        self.out.validate()
        return self.out

    def _is_act(self, v: str) -> bool:
        return bool(v) and not self.src.values[v].is_constant

    def node(self, node: Node) -> None:
        op = node.op
        if node.name not in self.keep:
            acts = [v for v in node.inputs if self._is_act(v)]
            if op in ("conv2d", "dense") and node.attrs.get("activation", 0) in (0, 1, 2) \
                    and self._weights_ok(node):
                return self.qlinear(node)
            if op == "add" and len(acts) == 2 and node.attrs.get("activation", 0) in (0, 1, 2):
                return self.qadd(node)
            if op in ("relu", "activation"):
                return self.qlut(node)
            if op == "global_avgpool":
                return self.qgap(node)
            if op == "concat" and len(acts) == len(node.inputs):
                return self.qconcat(node)
            if op in I16_MOVEMENT_OPS and self._moves_i16(node):
                return self.move(node, self.i16[node.inputs[0]])
            if op in MOVEMENT_OPS and self._moves_u8(node):
                return self.move(node, self.as_u8(node.inputs[0]))
        self.float_node(node)

    def _weights_ok(self, node: Node) -> bool:
        w = node.inputs[1]
        return self.src.values[w].is_constant and not self._is_act(node.inputs[2] if len(node.inputs) > 2 else "")

    def _moves_i16(self, node: Node) -> bool:
        return self.produced.get(node.inputs[0]) == "i16" and not any(self._is_act(v) for v in node.inputs[1:])

    def _moves_u8(self, node: Node) -> bool:
        x = node.inputs[0]
        if (x not in self.u8 and self.produced.get(x) != "i16") or any(self._is_act(v) for v in node.inputs[1:]):
            return False
        if node.op == "resize":
            return node.attrs.get("mode", "nearest") == "nearest"
        if node.op == "pad" and node.attrs.get("mode", "constant") == "constant":
            return float(node.attrs.get("value", 0.0)) == 0.0
        return True

    def float_node(self, node: Node) -> None:
        inputs = [self.as_f32(v) if v else "" for v in node.inputs]
        for o in node.outputs:
            self._activation(o, o, "f32")
            self.f32[o] = o
            self.produced[o] = "f32"
        self.out.add_node(node.op, node.name, inputs, list(node.outputs), **node.attrs)

    def move(self, node: Node, x: str) -> None:
        """A movement op on the u8 or i16 value x: the output keeps x's scale and zero point."""
        params = self.params[x]
        attrs = dict(node.attrs)
        if node.op == "pad" and attrs.get("mode", "constant") == "constant":
            attrs["value"] = float(params[1])
        y = self._q_output(node.outputs[0], params, self.out.values[x].dtype)
        self.out.add_node(node.op, node.name, [x], [y], **attrs)

    def _linear_input(self, v: str, wide: bool) -> str:
        """What a conv/dense reads: u8 in the u8 path; a 16x8 node takes an i16 or u8 value as it
        is and quantizes an f32 one to i16."""
        if not wide:
            return self.as_u8(v)
        if self.produced[v] == "i16":
            return self.i16[v]
        if self.produced[v] == "u8":
            return self.u8[v]
        return self.as_i16(v)

    def qlinear(self, node: Node) -> None:
        a = node.attrs
        wide = node.name in self.wide
        y_dtype = "i16" if wide else "u8"
        x = self._linear_input(node.inputs[0], wide)
        sx, zx = self.params[x]
        wv = self.src.values[node.inputs[1]]
        bias = self.src.values[node.inputs[2]].data if len(node.inputs) > 2 and node.inputs[2] else None
        qw, sw = quantize_weights(wv.data, self.bits)
        sy, zy = self._out_params(node.outputs[0], y_dtype)
        # with i16 x the multiplier has 15 significant bits, so that acc * (M >> 16) fits int64
        mult, shift = quantize_multipliers(sx * sw / sy, 15 if self.out.values[x].dtype == "i16" else 31)
        code = a.get("activation", 0)
        lo, hi = Q_RANGES[y_dtype]
        if code == 1:
            lo = zy
        elif code == 2:
            qmin, qmax = lo, hi
            lo = _clamp_q(zy, sy, a.get("act_alpha", 0.0), qmin, qmax)
            hi = _clamp_q(zy, sy, a.get("act_beta", 0.0), qmin, qmax)
        w = self._constant(wv.name, qw, "i8", _smallest_encoding(wv.name, qw, wv.encoding))
        b = self._constant(f"{node.name}.bias_q", quantize_bias(bias, sx, sw), "i32")
        m = self._constant(f"{node.name}.multiplier", mult, "i32")
        s = self._constant(f"{node.name}.shift", shift, "i32")
        y = self._q_output(node.outputs[0], (sy, zy), y_dtype)
        attrs = {k: v for k, v in a.items() if k in ("strides", "pads", "dilations", "group")}
        self.out.add_node("qconv2d" if node.op == "conv2d" else "qdense", node.name, [x, w, b, m, s], [y],
                          **attrs, x_zero_point=zx, y_zero_point=zy, act_min=lo, act_max=hi)

    def qadd(self, node: Node) -> None:
        a_, b_ = (self.as_u8(v) for v in node.inputs)
        (sa, za), (sb, zb) = self.params[a_], self.params[b_]
        sy, zy = self._out_params(node.outputs[0])
        ra, rb = sa / sy, sb / sy
        m_big, shift = quantize_multiplier(max(ra, rb))
        ma, mb = (round(math.ldexp(r, 31 + shift)) for r in (ra, rb))
        ma, mb = min(ma, 2**31 - 1), min(mb, 2**31 - 1)
        code, at = node.attrs.get("activation", 0), node.attrs
        lo, hi = 0, 255
        if code == 1:
            lo = zy
        elif code == 2:
            lo, hi = _clamp_q(zy, sy, at.get("act_alpha", 0.0)), _clamp_q(zy, sy, at.get("act_beta", 0.0))
        y = self._q_output(node.outputs[0], (sy, zy))
        self.out.add_node("qadd", node.name, [a_, b_], [y], a_zero_point=za, b_zero_point=zb, y_zero_point=zy,
                          a_multiplier=ma, b_multiplier=mb, shift=shift, act_min=lo, act_max=hi)

    def qlut(self, node: Node) -> None:
        x = self.as_u8(node.inputs[0])
        si, zi = self.params[x]
        so, zo = self._out_params(node.outputs[0])
        if node.op == "relu":
            kind, alpha, beta = ACTIVATIONS["relu"], 0.0, 0.0
        else:
            kind, alpha, beta = node.attrs["kind"], node.attrs.get("alpha", 0.0), node.attrs.get("beta", 0.0)
        real = np.float64(si) * (np.arange(256) - zi)
        with np.errstate(over="ignore", invalid="ignore"):
            f = apply_activation(kind, real, alpha, beta)
        table = np.clip(np.rint(f / so) + zo, 0, 255).astype(np.uint8)
        t = self._constant(f"{node.name}.table", table, "u8")
        y = self._q_output(node.outputs[0], (so, zo))
        self.out.add_node("qlut", node.name, [x, t], [y])

    def qgap(self, node: Node) -> None:
        x = self.as_u8(node.inputs[0])
        si, zi = self.params[x]
        so, zo = self._out_params(node.outputs[0])
        h, w = self.src.values[node.inputs[0]].shape[2:]
        mult, shift = quantize_multiplier(si / (so * h * w))
        y = self._q_output(node.outputs[0], (so, zo))
        self.out.add_node("qglobal_avgpool", node.name, [x], [y], x_zero_point=zi, y_zero_point=zo,
                          multiplier=mult, shift=shift)

    def qconcat(self, node: Node) -> None:
        xs = [self.as_u8(v) for v in node.inputs]
        ps = [self.params[x] for x in xs]
        if all(p == ps[0] for p in ps):
            y = self._q_output(node.outputs[0], ps[0])
            self.out.add_node("concat", node.name, xs, [y], **node.attrs)
            return
        so, zo = self._out_params(node.outputs[0])
        pairs = [quantize_multiplier(s / so) for s, _ in ps]
        y = self._q_output(node.outputs[0], (so, zo))
        self.out.add_node("qconcat", node.name, xs, [y], axis=node.attrs["axis"], zero_points=[z for _, z in ps],
                          multipliers=[m for m, _ in pairs], shifts=[s for _, s in pairs], y_zero_point=zo)


def _smallest_encoding(name: str, q: np.ndarray, float_encoding: Encoding) -> Encoding:
    """Of dense and (for a mostly-zero tensor) sparse_rel layouts, Huffman coding allowed, the one
    the writer stores in the fewest bytes."""
    candidates = [Encoding(huffman=True)]
    density = np.count_nonzero(q) / q.size
    if float_encoding.layout == "sparse_rel" or density < 0.5:
        bits = {float_encoding.index_bits} if float_encoding.layout == "sparse_rel" else set()
        candidates += [Encoding("sparse_rel", index_bits=b, huffman=True) for b in sorted(bits | {2, 3, 4, 5, 8})]

    def size(enc: Encoding) -> int:
        return encode_tensor(Value(name, tuple(q.shape), "i8", q, enc)).info.stored_bytes

    return min(candidates, key=size)
