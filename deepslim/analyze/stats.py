"""Per-layer counts of an IR graph: parameters, MACs, bytes, activation memory and an energy estimate.

Works on the IR alone (numpy, no torch). Everything is counted for one sample (batch 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from deepslim.analyze.energy import DRAM_READ_32BIT_PJ, FP32_MAC_PJ
from deepslim.analyze.shapes import infer_shapes
from deepslim.ir.graph import Graph, Node, Value

F32_BYTES = 4


@dataclass(frozen=True)
class LayerStats:
    """Counts for one node at batch 1.

    params: elements of the constants the node reads (weight + bias), each constant counted once in
        the graph (at its first reader).
    macs: multiply-accumulates (conv2d: out_elems * C/group * kh * kw; conv_transpose2d: in_elems *
        O/group * kh * kw; dense: rows * M * K; others 0).
    other_ops: elementwise work not in macs (relu, activation, add/sub/mul/div: one per output
        element; max pool: compares; avg pool and global pools: adds; batchnorm: 2 per element;
        softmax: exp + add + divide per element; lrn: 2*size + 2 per element; linear resize: 3 per
        element; bias adds; fused activations). Data movement (reshape, transpose, concat, pad,
        channel_shuffle, nearest resize) counts 0.
    weight_bytes: params stored as dense float32.
    stored_bytes: the constants in their `Encoding` (sparse relative indices incl. fillers, codebook
        indices bit-packed plus centroids), before Huffman coding and without stream alignment.
    activation_bytes: the node's output, float32.
    live_bytes: float32 activations alive while the node runs (its inputs, its outputs and every
        value still to be read later, graph outputs until the end), with no in-place reuse.
    """

    name: str
    op: str
    output_shape: tuple[int, ...]
    params: int
    macs: int
    other_ops: int
    weight_bytes: int
    stored_bytes: int
    activation_bytes: int
    live_bytes: int

    @property
    def energy_compute_pj(self) -> float:
        return self.macs * FP32_MAC_PJ

    @property
    def energy_dram_pj(self) -> float:
        return self.params * DRAM_READ_32BIT_PJ

    @property
    def energy_pj(self) -> float:
        return self.energy_compute_pj + self.energy_dram_pj


@dataclass(frozen=True)
class Totals:
    params: int
    macs: int
    other_ops: int
    weight_bytes: int
    stored_bytes: int
    activation_bytes: int  # sum of every node's output
    peak_live_bytes: int  # the worst point of the liveness plan
    peak_layer: str  # the node running at that point
    energy_compute_pj: float
    energy_dram_pj: float

    @property
    def energy_pj(self) -> float:
        return self.energy_compute_pj + self.energy_dram_pj


def stored_bytes(value: Value) -> int:
    """Estimated size of a constant in its encoding (bit-packed streams, no Huffman, no padding)."""
    enc = value.encoding
    data = np.asarray(value.data).ravel()
    value_bits = enc.cluster_bits if enc.codebook is not None else 32
    book = len(enc.codebook) * F32_BYTES if enc.codebook is not None else 0
    if enc.layout == "dense":
        entries, index_bits = data.size, 0
    else:
        nz = np.flatnonzero(data)
        gaps = np.diff(np.concatenate([[-1], nz])) - 1
        fillers = int(np.sum(gaps // (1 << enc.index_bits)))  # each filler covers 2^b - 1 zeros + itself
        entries, index_bits = nz.size + fillers, enc.index_bits
    return math.ceil(entries * index_bits / 8) + math.ceil(entries * value_bits / 8) + book


def _counts(graph: Graph, node: Node, shapes: dict[str, tuple[int, ...]]) -> tuple[int, int]:
    """(macs, other_ops) of one node at batch 1."""
    out = math.prod(shapes[node.outputs[0]])
    first = node.inputs[0]
    x = shapes[first] if first in shapes else tuple(graph.values[first].data.shape)
    a = node.attrs
    has_bias = len(node.inputs) > 2 and bool(node.inputs[2])
    epilogue = (out if has_bias else 0) + (out if a.get("activation", 0) else 0)
    if node.op == "conv2d":
        w = graph.values[node.inputs[1]].shape
        return out * w[1] * w[2] * w[3], epilogue
    if node.op == "conv_transpose2d":  # every input element times its kernel slice of O/group outputs
        w = graph.values[node.inputs[1]].shape
        return math.prod(x) * w[1] * w[2] * w[3], epilogue
    if node.op == "dense":
        m, k = graph.values[node.inputs[1]].shape
        return math.prod(x[:-1]) * m * k, epilogue
    if node.op == "maxpool2d":
        return 0, out * (a["kernel"][0] * a["kernel"][1] - 1)
    if node.op == "avgpool2d":
        return 0, out * a["kernel"][0] * a["kernel"][1]
    if node.op in ("global_avgpool", "global_maxpool"):
        return 0, math.prod(x)
    if node.op in ("relu", "activation", "sub", "mul", "div"):
        return 0, out
    if node.op == "add":
        return 0, epilogue + out
    if node.op == "batchnorm":  # one multiply and one add per element after folding the constants
        return 0, 2 * out
    if node.op == "softmax":
        return 0, 3 * out
    if node.op == "lrn":  # a square and an add per window element, then a power and a divide
        return 0, out * (2 * a["size"] + 2)
    if node.op == "resize" and a.get("mode", "nearest") == "linear":
        return 0, 3 * out  # two lerps of (a multiply-add) per axis, counted loosely
    return 0, 0  # flatten, reshape, transpose, concat, pad, channel_shuffle, nearest resize: data movement


def _live_bytes(graph: Graph, act_bytes: dict[str, int]) -> list[int]:
    """Bytes of activations alive at each node under a plan that frees a value after its last reader."""
    n = len(graph.nodes)
    born = {name: -1 for name in graph.inputs}
    last = {name: -1 for name in graph.inputs}
    for i, node in enumerate(graph.nodes):
        for name in node.inputs:
            if name in last:
                last[name] = i
        for name in node.outputs:
            born[name] = last[name] = i
    for name in graph.outputs:
        last[name] = n
    return [sum(b for name, b in act_bytes.items() if born[name] <= i <= last[name]) for i in range(n)]


def analyze(graph: Graph) -> list[LayerStats]:
    """One LayerStats per node, in graph order, for batch 1."""
    shapes = infer_shapes(graph, batch=1)
    act_bytes = {name: math.prod(s) * F32_BYTES for name, s in shapes.items()}
    live = _live_bytes(graph, act_bytes)
    seen: set[str] = set()
    stats = []
    for node, live_b in zip(graph.nodes, live):
        consts = [graph.values[i] for i in node.inputs if i and i not in seen and graph.values[i].is_constant]
        seen.update(v.name for v in consts)
        params = sum(int(v.data.size) for v in consts)
        macs, other = _counts(graph, node, shapes)
        stats.append(LayerStats(
            name=node.name, op=node.op, output_shape=shapes[node.outputs[0]], params=params, macs=macs,
            other_ops=other, weight_bytes=params * F32_BYTES, stored_bytes=sum(stored_bytes(v) for v in consts),
            activation_bytes=sum(act_bytes[o] for o in node.outputs), live_bytes=live_b,
        ))
    return stats


def totals(stats: list[LayerStats]) -> Totals:
    peak = max(stats, key=lambda s: s.live_bytes) if stats else None
    return Totals(
        params=sum(s.params for s in stats),
        macs=sum(s.macs for s in stats),
        other_ops=sum(s.other_ops for s in stats),
        weight_bytes=sum(s.weight_bytes for s in stats),
        stored_bytes=sum(s.stored_bytes for s in stats),
        activation_bytes=sum(s.activation_bytes for s in stats),
        peak_live_bytes=peak.live_bytes if peak else 0,
        peak_layer=peak.name if peak else "",
        energy_compute_pj=sum(s.energy_compute_pj for s in stats),
        energy_dram_pj=sum(s.energy_dram_pj for s in stats),
    )
