"""Small graph-editing helpers shared by the passes."""

from __future__ import annotations

from deepslim.ir.graph import Graph, Node


def copy_graph(graph: Graph) -> Graph:
    """A copy whose node list, nodes and value table can be edited; Values (and constant data) are shared."""
    nodes = [Node(n.op, n.name, list(n.inputs), list(n.outputs), dict(n.attrs)) for n in graph.nodes]
    return Graph(dict(graph.values), nodes, list(graph.inputs), list(graph.outputs))


def producers(graph: Graph) -> dict[str, Node]:
    return {name: node for node in graph.nodes for name in node.outputs}


def use_counts(graph: Graph) -> dict[str, int]:
    """How many node inputs read each value (a node reading it twice counts twice)."""
    counts: dict[str, int] = {}
    for node in graph.nodes:
        for name in node.inputs:
            if name:
                counts[name] = counts.get(name, 0) + 1
    return counts


def replace_uses(graph: Graph, old: str, new: str) -> None:
    for node in graph.nodes:
        node.inputs = [new if name == old else name for name in node.inputs]
