"""fuse_activation: a relu or activation node right after a conv2d, dense, add or conv_transpose2d becomes
the producer's fused epilogue (docs/format.md, "Fused activation epilogue")."""

from __future__ import annotations

from deepslim.ir.graph import ACTIVATIONS, Graph, Node
from deepslim.ir.passes._edit import copy_graph, producers, use_counts

FUSABLE_OPS = ("conv2d", "dense", "add", "conv_transpose2d")


def epilogue_of(node: Node) -> tuple[int, float, float] | None:
    """(code, alpha, beta) of a relu or activation node, else None."""
    if node.op == "relu":
        return ACTIVATIONS["relu"], 0.0, 0.0
    if node.op == "activation":
        a = node.attrs
        return int(a["kind"]), float(a.get("alpha", 0.0)), float(a.get("beta", 0.0))
    return None


def fuse_activation(graph: Graph) -> Graph:
    """Fuse `relu|activation(conv2d|dense|add|conv_transpose2d(x))` into the producer (`activation`,
    `act_alpha`, `act_beta`) when the producer has no fused activation yet and its output is read by
    that node only and is not a graph output. The activation's output name is kept, so graph outputs
    and later readers are unchanged. Returns a new graph; `graph` is not modified."""
    g = copy_graph(graph)
    made_by = producers(g)
    uses = use_counts(g)
    kept = []
    for node in g.nodes:
        act = epilogue_of(node)
        src = node.inputs[0] if act is not None else ""
        p = made_by.get(src)
        if (
            p is not None
            and p.op in FUSABLE_OPS
            and p.attrs.get("activation", 0) == ACTIVATIONS["none"]
            and uses.get(src) == 1
            and src not in g.outputs
        ):
            if act[0] != ACTIVATIONS["none"]:
                p.attrs["activation"] = act[0]
                if act[1] or act[2]:
                    p.attrs["act_alpha"], p.attrs["act_beta"] = act[1], act[2]
            p.outputs = [node.outputs[0]]
            made_by[node.outputs[0]] = p
            del g.values[src]
            continue
        kept.append(node)
    g.nodes = kept
    return g
