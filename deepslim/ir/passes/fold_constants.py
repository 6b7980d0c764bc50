"""fold_constants: a node whose inputs are all constants is evaluated once, by the reference executor."""

from __future__ import annotations

from deepslim.frontends.reference import run_graph
from deepslim.ir.graph import Graph, Node
from deepslim.ir.passes._edit import copy_graph


def _evaluate(graph: Graph, node: Node) -> dict:
    """Run one node on its constant inputs with the reference executor."""
    g = Graph()
    for name in node.inputs:
        if name and name not in g.values:
            g.add_value(graph.values[name])
    for name in node.outputs:
        g.add_value(graph.values[name])
    g.nodes = [node]
    g.outputs = list(node.outputs)
    out = run_graph(g, {})
    return out if isinstance(out, dict) else {node.outputs[0]: out}


def fold_constants(graph: Graph) -> Graph:
    """Replace every node whose inputs are all constants (and which has at least one input) by
    constants holding its outputs (dense raw float32), in graph order so that chains fold. Nodes writing
    a graph output are kept. Returns a new graph; `graph` is not modified."""
    g = copy_graph(graph)
    kept = []
    for node in g.nodes:
        names = [i for i in node.inputs if i]
        if not names or any(o in g.outputs for o in node.outputs) or not all(g.values[i].is_constant for i in names):
            kept.append(node)
            continue
        for name, data in _evaluate(g, node).items():
            del g.values[name]
            g.add_constant(name, data)
    g.nodes = kept
    return g
