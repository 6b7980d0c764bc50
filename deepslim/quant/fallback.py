"""Per-layer fp32 fallback decided by measurement, so that an int8 model is never slower than fp32.

Each quantized conv/dense node (qconv2d / qdense, with the qlut of an activation split off it) is
timed in the native runtime beside the fp32 node of the same name; a node whose int8 time exceeds its
fp32 time by more than `margin` (relative) and `min_us` (absolute) is re-quantized in keep_fp32. The
quantize/dequantize nodes that keeping it in float adds are not counted (a simple per-node rule).
At most `rounds` re-quantizations.

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
WARMUP, RUNS, ROUNDS = 3, 20, 2
LINEAR_OPS = ("qconv2d", "qdense")

# (graph, input batch, threads) -> mean milliseconds per node name
Timer = Callable[[Graph, np.ndarray, int], dict[str, float]]


@dataclass
class NodeTiming:
    op: str
    int8_ms: float
    fp32_ms: float
    fp32: bool  # kept in float because int8 was slower

    def describe(self) -> str:
        if self.fp32:
            return f"fp32 (int8 measured {self.int8_ms:.4f} ms > fp32 {self.fp32_ms:.4f} ms)"
        return f"int8 (int8 measured {self.int8_ms:.4f} ms, fp32 {self.fp32_ms:.4f} ms)"


@dataclass
class FallbackReport:
    threads: int
    rounds: int = 0  # re-quantizations made
    nodes: dict[str, NodeTiming] = field(default_factory=dict)

    @property
    def keep_fp32(self) -> list[str]:
        return [name for name, t in self.nodes.items() if t.fp32]

    def to_json(self) -> str:
        return json.dumps({"threads": self.threads, "rounds": self.rounds,
                           "nodes": {n: {"op": t.op, "int8_ms": round(t.int8_ms, 6), "fp32_ms": round(t.fp32_ms, 6),
                                         "fp32": t.fp32} for n, t in self.nodes.items()}},
                          separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "FallbackReport":
        d = json.loads(text)
        nodes = {n: NodeTiming(t["op"], float(t["int8_ms"]), float(t["fp32_ms"]), bool(t["fp32"]))
                 for n, t in d["nodes"].items()}
        return cls(int(d["threads"]), int(d["rounds"]), nodes)


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
            for _ in range(warmup):
                session.run(x)
            before = {r["name"]: (r["runs"], r["ms"] * r["runs"]) for r in session.node_profile()}
            for _ in range(runs):
                session.run(x)
            out = {}
            for r in session.node_profile():
                n0, t0 = before.get(r["name"], (0, 0.0))
                n = r["runs"] - n0
                out[r["name"]] = (r["ms"] * r["runs"] - t0) / n if n else 0.0
    return out


def quantize_with_fallback(graph: Graph, quantize: Callable[[list[str]], Graph], x: np.ndarray, *,
                           threads: int = 1, keep_fp32: Iterable[str] = (), timer: Timer | None = None,
                           margin: float = MARGIN, min_us: float = MIN_US, rounds: int = ROUNDS,
                           progress: bool = True) -> tuple[Graph, FallbackReport]:
    """Quantize with `quantize(keep_fp32)`, time the result against the fp32 `graph` on `x` and
    re-quantize with the slower conv/dense nodes in keep_fp32, at most `rounds` times.

    `timer(graph, x, threads) -> {node name: ms}` defaults to `profile_graph` (the native runtime).
    Returns the final quantized graph (with the decision attached, see `attach_report`) and the report.
    """
    from tqdm.auto import tqdm

    timer = timer or profile_graph
    keep = list(keep_fp32)
    report = FallbackReport(threads)
    bar = tqdm(total=rounds + 2, desc="fallback: timing", disable=not progress, leave=False)
    fp32_ms = timer(graph, x, threads)
    bar.update()
    q = quantize(keep)
    for _ in range(rounds + 1):
        int8_ms = timer(q, x, threads)
        bar.update()
        slow = []
        for node in q.nodes:
            if node.op not in LINEAR_OPS or node.name not in fp32_ms:
                continue
            i8 = int8_ms.get(node.name, 0.0) + int8_ms.get(f"{node.name}.act", 0.0)
            f = fp32_ms[node.name]
            report.nodes[node.name] = NodeTiming(node.op, i8, f, False)
            if i8 > f * (1 + margin) and (i8 - f) * 1e3 > min_us:
                slow.append(node.name)
        if not slow or report.rounds == rounds:
            break
        for name in slow:
            report.nodes[name].fp32 = True
        keep += slow
        q = quantize(keep)
        report.rounds += 1
    bar.close()
    attach_report(q, report)
    return q, report


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
