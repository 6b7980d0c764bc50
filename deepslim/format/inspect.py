"""`deepslim inspect`: a .dsm file's graph and a per-tensor size table in the manner of the Deep
Compression paper (dense -> pruned -> quantized -> Huffman coded)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from deepslim.format.dsm import DsmInfo, load_dsm
from deepslim.format.tensors import TensorInfo
from deepslim.ir.graph import Graph


@dataclass
class SizeRow:
    name: str
    shape: tuple[int, ...]
    encoding: str
    dense_bytes: int  # every element as f32
    pruned_bytes: int  # stored entries as f32 + relative indices at index_bits (dense: = dense_bytes)
    quantized_bytes: int  # cluster indices at cluster_bits + relative indices + codebook
    stored_bytes: int  # what the file actually holds (after Huffman where chosen)
    density: float  # nonzeros / elements, in percent
    ratio: float  # dense_bytes / stored_bytes


def _bits_to_bytes(bits: int) -> int:
    return (bits + 7) // 8


def size_row(t: TensorInfo, nonzeros: int | None = None) -> SizeRow:
    n, entries = t.element_count, t.entry_count
    dense = 4 * n
    indices = _bits_to_bytes(entries * t.index_bits)
    pruned = dense if t.layout == "dense" else 4 * entries + indices
    if t.values == "codebook":
        book = t.stream("codebook")
        quantized = _bits_to_bytes(entries * t.cluster_bits) + indices + (book.length if book else 0)
    else:
        quantized = pruned
    stored = t.stored_bytes
    nz = entries if nonzeros is None else nonzeros
    return SizeRow(t.name, t.shape, t.describe(), dense, pruned, quantized, stored,
                   100.0 * nz / n, dense / stored if stored else float("inf"))


def size_breakdown(info: DsmInfo, graph: Graph | None = None) -> list[SizeRow]:
    """One row per stored tensor; with `graph` (decoded), density counts the actual nonzeros."""
    rows = []
    for t in info.tensors:
        nonzeros = None
        if graph is not None and t.name in graph.values and graph.values[t.name].data is not None:
            nonzeros = int(np.count_nonzero(graph.values[t.name].data))
        rows.append(size_row(t, nonzeros))
    return rows


def _fmt_attr(value) -> str:
    if isinstance(value, list):
        return "[" + ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def format_graph(graph: Graph) -> str:
    """Inputs, outputs and one line per node; for a quantized model whose fp32 fallback was measured
    (`deepslim.quant.fallback`), each timed conv/dense node also shows the decision."""
    from deepslim.quant.fallback import read_report

    fallback = read_report(graph)
    lines = ["inputs:  " + ", ".join(f"{n} {list(graph.values[n].shape)}" for n in graph.inputs),
             "outputs: " + ", ".join(f"{n} {list(graph.values[n].shape)}" for n in graph.outputs),
             f"nodes ({len(graph.nodes)}):"]
    for node in graph.nodes:
        attrs = " ".join(f"{k}={_fmt_attr(v)}" for k, v in node.attrs.items())
        ins = ", ".join(n or "-" for n in node.inputs)
        outs = ", ".join(f"{n} {list(graph.values[n].shape)}" for n in node.outputs)
        lines.append(f"  {node.op:<10} {node.name:<16} ({ins}) -> {outs}" + (f"  {attrs}" if attrs else ""))
        if fallback is not None and node.name in fallback.nodes:
            lines.append(f"      {fallback.nodes[node.name].describe()}")
    if fallback is not None:
        kept = fallback.keep_fp32
        lines.append(f"fallback measured at {fallback.threads} thread(s): {len(kept)} of {len(fallback.nodes)} "
                     f"conv/dense layers kept in fp32 because int8 was slower")
    return "\n".join(lines)


def format_size_table(rows: list[SizeRow], file_size: int) -> str:
    head = ("tensor", "shape", "dense f32", "pruned", "quantized", "stored", "density", "ratio", "encoding")
    table = [head]
    for r in rows:
        table.append((r.name, "x".join(map(str, r.shape)), str(r.dense_bytes), str(r.pruned_bytes),
                      str(r.quantized_bytes), str(r.stored_bytes), f"{r.density:.1f}%", f"{r.ratio:.1f}x",
                      r.encoding))
    dense = sum(r.dense_bytes for r in rows)
    stored = sum(r.stored_bytes for r in rows)
    elements = sum(r.dense_bytes // 4 for r in rows)
    nz = sum(r.density * r.dense_bytes / 400 for r in rows)
    table.append(("total", "", str(dense), str(sum(r.pruned_bytes for r in rows)),
                  str(sum(r.quantized_bytes for r in rows)), str(stored),
                  f"{100 * nz / elements:.1f}%" if elements else "-",
                  f"{dense / stored:.1f}x" if stored else "-", ""))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines = []
    for i, row in enumerate(table):
        cells = [c.ljust(w) if j in (0, 1, 8) else c.rjust(w) for j, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if i == 0 or i == len(table) - 2:
            lines.append("  ".join("-" * w for w in widths))
    overhead = file_size - stored
    ratio = f"{dense / file_size:.1f}x" if file_size else "-"
    lines.append(f"file: {file_size} bytes ({stored} tensor data + {overhead} header, graph, table "
                 f"and padding); dense f32 / file = {ratio}")
    return "\n".join(lines)


def format_inspect(path: str | os.PathLike) -> str:
    """The text `deepslim inspect PATH` prints: the graph, then the per-tensor size table."""
    from deepslim.ir.memory import plan_memory

    graph, info = load_dsm(path)
    try:
        plan = plan_memory(graph, batch=1)
        memory = (f"activation memory at batch 1 (float32): planned arena {plan.arena_bytes:,} bytes "
                  f"(live peak {plan.peak_bytes:,}) vs {plan.total_bytes:,} bytes for all activations "
                  f"({plan.total_bytes / max(plan.arena_bytes, 1):.1f}x less by reusing buffers)")
    except ValueError as e:  # the memory planner does not know the int8 ops yet
        memory = f"activation memory: not planned ({e})"
    return "\n".join([
        f"{os.fspath(path)}: .dsm version {info.version}, {info.file_size} bytes, "
        f"{len(graph.values)} values, {len(graph.nodes)} nodes, {len(info.tensors)} tensors",
        format_graph(graph),
        "",
        memory,
        "",
        format_size_table(size_breakdown(info, graph), info.file_size),
    ])
