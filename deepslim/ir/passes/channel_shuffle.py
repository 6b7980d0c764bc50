"""fuse_channel_shuffle: ShuffleNet's reshape -> transpose -> reshape becomes one channel_shuffle."""

from __future__ import annotations

from deepslim.analyze.shapes import infer_shapes
from deepslim.ir.graph import Graph
from deepslim.ir.passes._edit import copy_graph, producers, use_counts


def fuse_channel_shuffle(graph: Graph) -> Graph:
    """Replace `reshape (N,C,H,W) -> (N,g,C/g,H,W)`, `transpose perm [0,2,1,3,4]`, `reshape -> (N,C,H,W)`
    by `channel_shuffle(group=g)` writing the last reshape's output. The two intermediate values must be
    read by the next node only and not be graph outputs. Returns a new graph; `graph` is not modified."""
    g = copy_graph(graph)
    shapes = infer_shapes(g, batch=1)
    made_by = producers(g)
    uses = use_counts(g)
    drop: set[int] = set()
    for last in g.nodes:
        if last.op != "reshape":
            continue
        tr = made_by.get(last.inputs[0])
        first = made_by.get(tr.inputs[0]) if tr is not None and tr.op == "transpose" else None
        if first is None or first.op != "reshape" or list(tr.attrs["perm"]) != [0, 2, 1, 3, 4]:
            continue
        x = first.inputs[0]
        xs, split = shapes[x], shapes[first.outputs[0]]
        if len(xs) != 4 or shapes[last.outputs[0]] != xs or len(split) != 5:
            continue
        n, c, h, w = xs
        if split != (n, split[1], c // split[1], h, w) or c % split[1]:
            continue
        mids = (first.outputs[0], tr.outputs[0])
        if any(uses.get(v) != 1 or v in g.outputs for v in mids):
            continue
        last.op, last.inputs, last.attrs = "channel_shuffle", [x], {"group": split[1]}
        drop.update((id(first), id(tr)))
        for v in mids:
            del g.values[v]
    g.nodes = [node for node in g.nodes if id(node) not in drop]
    return g
