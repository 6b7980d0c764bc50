"""Activation memory planning by liveness: one arena, greedy best-fit offsets (numpy only).

    plan = plan_memory(graph)        # batch 1
    plan.arena_bytes                 # size of the arena holding every activation
    plan.offsets["conv1"]            # where one value lives in it
    plan.peak_bytes                  # the most bytes alive at once: no plan can do better
    plan.total_bytes                 # every activation in its own buffer

A value lives from the step that produces it (graph inputs: step 0) to the last step that reads it
(graph outputs: to the end). A node's inputs and outputs are alive together (no in-place reuse).
Values are placed largest first; each goes into the smallest gap between the already placed values
whose lifetimes overlap its own that fits it, else after them ("greedy by size", as TFLite's arena
planner). The native runtime plans its own arena; this one is for reporting (`analyze`, `inspect`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from deepslim.analyze.shapes import infer_shapes
from deepslim.ir.graph import Graph

F32_BYTES = 4

__all__ = ["MemoryPlan", "lifetimes", "peak_bytes", "plan_memory"]


@dataclass(frozen=True)
class MemoryPlan:
    offsets: dict[str, int]  # activation -> byte offset in the arena
    sizes: dict[str, int]  # activation -> bytes (float32, rounded up to the alignment)
    lifetimes: dict[str, tuple[int, int]]  # activation -> (first step, last step), inclusive
    arena_bytes: int
    peak_bytes: int
    total_bytes: int


def lifetimes(graph: Graph) -> dict[str, tuple[int, int]]:
    """(first, last) node index each activation is alive at; graph inputs start at 0, graph outputs
    last to the final node. An activation nothing reads lives only at the step producing it."""
    n = len(graph.nodes)
    first = {name: 0 for name in graph.inputs}
    last = {name: 0 for name in graph.inputs}
    for i, node in enumerate(graph.nodes):
        for name in node.inputs:
            if name in last:
                last[name] = i
        for name in node.outputs:
            first[name] = last[name] = i
    for name in graph.outputs:
        if name in last:
            last[name] = max(n - 1, 0)
    return {name: (first[name], last[name]) for name in first}


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def plan_memory(graph: Graph, batch: int = 1, alignment: int = 64) -> MemoryPlan:
    """Offsets of every activation (graph inputs and node outputs) in one arena; see the module doc."""
    shapes = infer_shapes(graph, batch=batch)
    life = lifetimes(graph)
    sizes = {name: _align(math.prod(shapes[name]) * F32_BYTES, alignment) for name in life}
    order = sorted(life, key=lambda name: (-sizes[name], life[name][0], name))
    offsets: dict[str, int] = {}
    for name in order:
        busy = sorted((offsets[o], offsets[o] + sizes[o]) for o in offsets if _overlap(life[o], life[name]))
        best, best_gap, cursor = None, None, 0
        for start, end in busy:
            gap = start - cursor
            if gap >= sizes[name] and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, end)
        offsets[name] = cursor if best is None else best
    arena = max((offsets[v] + sizes[v] for v in offsets), default=0)
    return MemoryPlan(offsets, sizes, life, arena, _peak(life, sizes, len(graph.nodes)), sum(sizes.values()))


def _peak(life: dict[str, tuple[int, int]], sizes: dict[str, int], steps: int) -> int:
    return max((sum(sizes[v] for v, (a, b) in life.items() if a <= i <= b) for i in range(max(steps, 1))), default=0)


def peak_bytes(graph: Graph, batch: int = 1) -> int:
    """The most float32 activation bytes alive at one step (unaligned): a lower bound for any plan
    without in-place reuse."""
    shapes = infer_shapes(graph, batch=batch)
    life = lifetimes(graph)
    return _peak(life, {v: math.prod(shapes[v]) * F32_BYTES for v in life}, len(graph.nodes))
