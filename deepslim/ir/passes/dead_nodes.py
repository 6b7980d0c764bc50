"""dead_nodes: drop nodes none of whose outputs reach a graph output, and values nothing uses."""

from __future__ import annotations

from deepslim.ir.graph import Graph
from deepslim.ir.passes._edit import copy_graph


def dead_nodes(graph: Graph) -> Graph:
    """Keep only the nodes a graph output depends on, then drop values (activations and constants)
    that no kept node reads or writes. Graph inputs stay even when unused, since they are part of the
    model's interface. Returns a new graph; `graph` is not modified."""
    g = copy_graph(graph)
    needed = set(g.outputs)
    kept = []
    for node in reversed(g.nodes):
        if any(name in needed for name in node.outputs):
            kept.append(node)
            needed.update(name for name in node.inputs if name)
    g.nodes = kept[::-1]
    used = set(g.inputs) | set(g.outputs)
    for node in g.nodes:
        used.update(node.inputs)
        used.update(node.outputs)
    g.values = {name: v for name, v in g.values.items() if name in used}
    return g
