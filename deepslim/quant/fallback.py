"""Per-layer fp32 fallback decided by measurement, so that an int8 model is never slower than fp32.

Each quantized conv/dense node (qconv2d / qdense, with the qlut of an activation split off it) is
timed in the native runtime beside the fp32 node of the same name (each node's least time over
`passes` timings, the graphs taking turns: a busy machine's bursts then neither condemn nor save a
layer); a node whose int8 time exceeds its
fp32 time by more than `margin` (relative) and `min_us` (absolute) is re-quantized in keep_fp32; then
each fp32 island so made whose fp32 time plus the quantize/dequantize nodes at its border is not below
its int8 time goes back to int8 (conversions can cost more than the layer gains). At most `rounds`
re-quantizations.

The decision is stored in the .dsm as the u8 constant `deepslim.fallback` that no node reads (the
format has no metadata field): UTF-8 JSON, see `FallbackReport.to_json`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from deepslim.ir.graph import Encoding, Graph, Value

__all__ = ["FallbackReport", "NodeTiming", "RECORD", "attach_report", "profile_graph", "quantize_with_fallback",
           "read_report", "runtime_available"]

RECORD = "deepslim.fallback"  # name of the constant holding the decision
MARGIN = 0.10  # int8 may be up to 10% slower than fp32 ...
MIN_US = 2.0  # ... or up to 2 us, before the node falls back
WARMUP, RUNS, ROUNDS, PASSES = 3, 20, 2, 3
LINEAR_OPS = ("qconv2d", "qdense")

# (graph, input batch, threads) -> mean milliseconds per node name
Timer = Callable[[Graph, np.ndarray, int], dict[str, float]]


@dataclass
class NodeTiming:
    op: str
    int8_ms: float
    fp32_ms: float
    fp32: bool  # kept in float because int8 was slower
    boundary_ms: float = 0.0  # quantize/dequantize time at the border of its fp32 island (round 2)
    activation_bits: int = 8  # 16: the quantized form timed was 16x8 (i16 output); int8_ms is its time

    def describe(self) -> str:
        border = f"; its fp32 island's quantize/dequantize {self.boundary_ms:.4f} ms" if self.boundary_ms else ""
        q = "int8" if self.activation_bits == 8 else "int16"
        if self.fp32:
            return f"fp32 ({q} measured {self.int8_ms:.4f} ms > fp32 {self.fp32_ms:.4f} ms{border})"
        return f"{q} ({q} measured {self.int8_ms:.4f} ms, fp32 {self.fp32_ms:.4f} ms{border})"


@dataclass
class FallbackReport:
    threads: int
    rounds: int = 0  # re-quantizations made
    nodes: dict[str, NodeTiming] = field(default_factory=dict)
    fp32_total_ms: float = 0.0  # the whole fp32 model
    int8_total_ms: float = 0.0  # the first int8 candidate (before any fallback)

    @property
    def keep_fp32(self) -> list[str]:
        return [name for name, t in self.nodes.items() if t.fp32]

    def to_json(self) -> str:
        return json.dumps({"threads": self.threads, "rounds": self.rounds,
                           "fp32_total_ms": round(self.fp32_total_ms, 6), "int8_total_ms": round(self.int8_total_ms, 6),
                           "nodes": {n: {"op": t.op, "int8_ms": round(t.int8_ms, 6), "fp32_ms": round(t.fp32_ms, 6),
                                         "fp32": t.fp32, "boundary_ms": round(t.boundary_ms, 6),
                                         "activation_bits": t.activation_bits}
                                     for n, t in self.nodes.items()}},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "FallbackReport":
        d = json.loads(text)
        nodes = {n: NodeTiming(t["op"], float(t["int8_ms"]), float(t["fp32_ms"]), bool(t["fp32"]),
                             float(t.get("boundary_ms", 0.0)), int(t.get("activation_bits", 8)))
                 for n, t in d["nodes"].items()}
        return cls(int(d["threads"]), int(d["rounds"]), nodes, float(d.get("fp32_total_ms", 0.0)),
                   float(d.get("int8_total_ms", 0.0)))


def runtime_available() -> str | None:
    """None when the native runtime library loads, else why not."""
    try:
        from deepslim.runtime.session import _load

        _load()
    except (ImportError, OSError) as e:
        return str(e)
    return None


def profile_graph(graph: Graph, x: np.ndarray, threads: int = 1, *, warmup: int = WARMUP,
                  runs: int = RUNS) -> dict[str, float]:
    """Mean milliseconds per node of `graph` in the native runtime on input `x`, over `runs` runs
    after `warmup` runs (the warm-up runs are subtracted from the profile's totals)."""
    from deepslim.format import write_dsm
    from deepslim.runtime import Session

    with tempfile.TemporaryDirectory(prefix="deepslim-fallback-") as tmp:
        path = os.path.join(tmp, "model.dsm")
        write_dsm(graph, path)
        with Session(path, threads=threads, profile=True) as session:
            return {r["name"]: r["ms"] for r in session.time_nodes(x, runs=runs, warmup=warmup)}


def _least_times(timer: Timer, graphs: list[Graph], x: np.ndarray, threads: int, passes: int) -> list[dict[str, float]]:
    """Per graph, each node's least time over `passes` timings; in every pass the graphs are timed
    in turn, so load that comes and goes hits them alike, and a node's least time is the one the
    machine disturbed least (one preempted run can double a 20-run mean)."""
    best: list[dict[str, float]] = [{} for _ in graphs]
    for _ in range(max(1, passes)):
        for g, b in zip(graphs, best):
            for name, ms in timer(g, x, threads).items():
                b[name] = min(ms, b.get(name, ms))
    return best


def quantize_with_fallback(graph: Graph, quantize: Callable[[list[str]], Graph], x: np.ndarray, *,
                           threads: int = 1, keep_fp32: Iterable[str] = (), timer: Timer | None = None,
                           margin: float = MARGIN, min_us: float = MIN_US, rounds: int = ROUNDS,
                           passes: int = PASSES, progress: bool = True) -> tuple[Graph, FallbackReport]:
    """Quantize with `quantize(keep_fp32)` and time the result against the fp32 `graph` on `x`.

    Round 1: every conv/dense node whose int8 time (with the qlut split off it) exceeds its fp32 time
    by more than `margin` and `min_us` is re-quantized in keep_fp32. Round 2 (rounds >= 2) times that
    candidate and counts what the per-node rule ignores: each fp32 island (float nodes connected
    through values) costs its nodes' fp32 time plus the quantize/dequantize nodes at its border; an
    island that costs at least its nodes' int8 time goes back to int8.

    `timer(graph, x, threads) -> {node name: ms}` defaults to `profile_graph` (the native runtime);
    every timing takes each node's least time over `passes` calls of it.
    Returns the final quantized graph (with the decision attached, see `attach_report`) and the report.
    """
    from tqdm.auto import tqdm

    timer = timer or profile_graph
    keep = list(keep_fp32)
    report = FallbackReport(threads)
    bar = tqdm(total=min(rounds, 2) + 1, desc="fallback: timing", disable=not progress, leave=False)
    q = quantize(keep)
    fp32_ms, int8_ms = _least_times(timer, [graph, q], x, threads, passes)
    report.fp32_total_ms, report.int8_total_ms = sum(fp32_ms.values()), sum(int8_ms.values())
    bar.update()
    slow = []
    for node in q.nodes:
        if node.op not in LINEAR_OPS or node.name not in fp32_ms:
            continue
        i8 = int8_ms.get(node.name, 0.0) + int8_ms.get(f"{node.name}.act", 0.0)
        f = fp32_ms[node.name]
        bits = 16 if q.values[node.outputs[0]].dtype == "i16" else 8
        report.nodes[node.name] = NodeTiming(node.op, i8, f, False, activation_bits=bits)
        if i8 > f * (1 + margin) and (i8 - f) * 1e3 > min_us:
            slow.append(node.name)
    if slow and rounds >= 1:
        q = quantize(keep + slow)
        report.rounds = 1
        bar.update()
        if rounds >= 2:
            ms = _least_times(timer, [q], x, threads, passes)[0]
            back = []
            for island, border in _islands(q):
                mine = [n for n in island if n in slow]
                if not mine:
                    continue
                conversions = sum(ms.get(b, 0.0) for b in border)
                for n in mine:
                    report.nodes[n].boundary_ms = conversions
                cost = sum(ms.get(n, 0.0) + ms.get(f"{n}.act", 0.0) for n in mine) + conversions
                if cost >= sum(report.nodes[n].int8_ms for n in mine):
                    back += mine
            if back:
                slow = [n for n in slow if n not in back]
                q = quantize(keep + slow)
                report.rounds = 2
        for name in slow:
            report.nodes[name].fp32 = True
    bar.close()
    attach_report(q, report)
    return q, report


def _islands(q: Graph) -> list[tuple[list[str], list[str]]]:
    """The fp32 islands of a quantized graph: float nodes (other than quantize / dequantize) connected
    through the values between them, each with the quantize/dequantize nodes on its border."""
    conv = ("quantize", "dequantize")
    floats = [n for n in q.nodes if n.op not in conv and q.values[n.outputs[0]].dtype == "f32"]
    parent = {n.name: n.name for n in floats}

    def root(a: str) -> str:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    producer = {o: n.name for n in floats for o in n.outputs}
    for n in floats:
        for v in n.inputs:
            if v in producer:
                parent[root(producer[v])] = root(n.name)
    groups: dict[str, list[str]] = {}
    for n in floats:
        groups.setdefault(root(n.name), []).append(n.name)
    readers: dict[str, list[str]] = {}
    for n in floats:
        for v in n.inputs:
            readers.setdefault(v, []).append(n.name)
    borders: dict[str, list[str]] = {r: [] for r in groups}
    for n in q.nodes:
        if n.op == "quantize" and n.inputs[0] in producer:
            borders[root(producer[n.inputs[0]])].append(n.name)
        elif n.op == "dequantize":
            for r in {root(m) for m in readers.get(n.outputs[0], [])}:
                borders[r].append(n.name)
    return [(groups[r], borders[r]) for r in groups]


def attach_report(graph: Graph, report: FallbackReport) -> None:
    """Store `report` in `graph` as the u8 constant RECORD (UTF-8 JSON) that no node reads."""
    data = np.frombuffer(report.to_json().encode(), dtype=np.uint8).copy()
    graph.values.pop(RECORD, None)
    graph.add_value(Value(RECORD, tuple(data.shape), "u8", data, Encoding()))


def read_report(graph: Graph) -> FallbackReport | None:
    """The fallback decision stored in a loaded graph, or None."""
    v = graph.values.get(RECORD)
    if v is None or v.data is None or v.dtype != "u8":
        return None
    try:
        return FallbackReport.from_json(bytes(np.asarray(v.data, dtype=np.uint8)).decode())
    except (ValueError, KeyError, TypeError):
        return None
