"""fuse_activation: a relu right after a conv2d or dense becomes the producer's fused epilogue."""

from __future__ import annotations

from deepslim.ir.graph import ACTIVATIONS, Graph
from deepslim.ir.passes._edit import copy_graph, producers, use_counts

FUSABLE_OPS = ("conv2d", "dense")


def fuse_activation(graph: Graph) -> Graph:
    """Fuse `relu(conv2d|dense(x))` into the producer (`activation` = 1) when the producer's output
    is read by that relu only and is not a graph output. The relu's output name is kept, so graph
    outputs and later readers are unchanged. Returns a new graph; `graph` is not modified."""
    g = copy_graph(graph)
    made_by = producers(g)
    uses = use_counts(g)
    kept = []
    for node in g.nodes:
        src = node.inputs[0] if node.op == "relu" else ""
        p = made_by.get(src)
        if (
            p is not None
            and p.op in FUSABLE_OPS
            and p.attrs.get("activation", 0) == ACTIVATIONS["none"]
            and uses.get(src) == 1
            and src not in g.outputs
        ):
            p.attrs["activation"] = ACTIVATIONS["relu"]
            p.outputs = [node.outputs[0]]
            made_by[node.outputs[0]] = p
            del g.values[src]
            continue
        kept.append(node)
    g.nodes = kept
    return g
