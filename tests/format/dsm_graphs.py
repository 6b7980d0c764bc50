"""Small graphs and file surgery shared by the .dsm tests."""

from __future__ import annotations

import numpy as np

from deepslim.format.codecs import crc32
from deepslim.format.dsm import assemble_dsm, read_dsm_info
from deepslim.ir import Encoding, Graph, Value


def dense_net(weight: np.ndarray, encoding: Encoding | None = None, batch: int = -1) -> Graph:
    """x (batch, K) -> dense(weight (M, K), bias) -> softmax -> y."""
    m, k = weight.shape
    g = Graph()
    g.add_value(Value("x", (batch, k)))
    g.add_constant("fc.weight", weight, encoding)
    g.add_constant("fc.bias", np.linspace(-1, 1, m, dtype=np.float32))
    g.add_value(Value("h", (batch, m)))
    g.add_value(Value("y", (batch, m)))
    g.add_node("dense", "fc", ["x", "fc.weight", "fc.bias"], ["h"], activation=1)
    g.add_node("softmax", "prob", ["h"], ["y"], axis=-1)
    g.inputs, g.outputs = ["x"], ["y"]
    return g


def split(data: bytes):
    """(graph section bytes, tensor infos, per-tensor stream payloads) of a valid file."""
    info = read_dsm_info(data)
    graph_bytes = data[info.graph_offset : info.graph_offset + info.graph_length]
    payloads = [[data[s.offset : s.offset + s.length] for s in t.streams] for t in info.tensors]
    return graph_bytes, info.tensors, payloads


def rebuild(data: bytes, graph_bytes=None, edit=None, fix_crcs=True, **header) -> bytes:
    """Re-lay a valid file after `edit(infos, payloads)` changed records or stream bytes."""
    old_graph, infos, payloads = split(data)
    if edit is not None:
        edit(infos, payloads)
    if fix_crcs:
        for t, streams in zip(infos, payloads):
            for s, p in zip(t.streams, streams):
                s.crc32 = crc32(p)
    return assemble_dsm(old_graph if graph_bytes is None else graph_bytes, infos, payloads, **header)
