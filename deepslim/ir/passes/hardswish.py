"""fuse_hardswish: the spellings of hard swish that exporters write become one activation (kind 6).

    x * clip(x + 3, 0, 6) / 6        mul(x, clip(add(x, 3))) then div by 6 (or mul by 1/6)
    x * (clip(x + 3, 0, 6) / 6)      div (or mul by 1/6) first, then mul by x
    x * hardsigmoid(x)               hardsigmoid with alpha 1/6, beta 1/2

clip(x + 3, 0, 6) is an activation (kind clip, alpha 0, beta 6) of add(x, 3), or an add(x, 3) with
that clip fused as its epilogue. Operands of add and mul may come in either order.
"""

from __future__ import annotations


from deepslim.ir.graph import ACTIVATIONS, Graph, Node
from deepslim.ir.passes._edit import copy_graph, producers, use_counts

_TOL = 1e-6


class _Match:
    def __init__(self, g: Graph, made_by: dict[str, Node], uses: dict[str, int]) -> None:
        self.g, self.made_by, self.uses = g, made_by, uses
        self.nodes: list[Node] = []  # the intermediate nodes a match consumes

    def const(self, name: str, value: float) -> bool:
        v = self.g.values.get(name)
        return v is not None and v.is_constant and v.data.size == 1 and abs(float(v.data.ravel()[0]) - value) <= _TOL

    def inner(self, name: str, op: str) -> Node | None:
        """The producer of `name` if it is `op`, read once and not a graph output."""
        p = self.made_by.get(name)
        if p is None or p.op != op or self.uses.get(name) != 1 or name in self.g.outputs:
            return None
        self.nodes.append(p)
        return p

    def clip_x_plus_3(self, name: str) -> str | None:
        """x when `name` is clip(x + 3, 0, 6)."""
        p = self.made_by.get(name)
        if p is None:
            return None
        if p.op == "activation":
            a = p.attrs
            if a["kind"] != ACTIVATIONS["clip"] or a.get("alpha", 0.0) != 0.0 or a.get("beta", 0.0) != 6.0:
                return None
            if self.inner(name, "activation") is None:
                return None
            add = self.inner(p.inputs[0], "add")
            if add is None or add.attrs.get("activation", 0) != 0:
                return None
        elif p.op == "add":
            a = p.attrs
            if a.get("activation", 0) != ACTIVATIONS["clip"] or a.get("act_alpha", 0.0) != 0.0 or a.get("act_beta", 0.0) != 6.0:
                return None
            add = self.inner(name, "add")
        else:
            return None
        x, k = add.inputs
        if self.const(k, 3.0):
            return x
        return k if self.const(x, 3.0) else None

    def scaled_by_sixth(self, node: Node) -> str | None:
        """y when node is div(y, 6) or mul(y, 1/6) / mul(1/6, y)."""
        a, b = node.inputs
        if node.op == "div" and self.const(b, 6.0):
            return a
        if node.op == "mul":
            if self.const(b, 1 / 6):
                return a
            if self.const(a, 1 / 6):
                return b
        return None

    def times_x(self, node: Node, inner_test) -> str | None:
        """x when node is mul(x, t) or mul(t, x) and inner_test(t) gives x."""
        if node.op != "mul":
            return None
        for x, t in (node.inputs, node.inputs[::-1]):
            mark = len(self.nodes)
            if inner_test(t) == x:
                return x
            del self.nodes[mark:]
        return None


def _match(g: Graph, node: Node, made_by: dict[str, Node], uses: dict[str, int]) -> tuple[str, list[Node]] | None:
    """(x, intermediate nodes) when node ends a hard swish of x."""
    m = _Match(g, made_by, uses)
    # x * clip(x + 3) / 6: the scaling is last
    y = m.scaled_by_sixth(node) if node.op in ("div", "mul") else None
    if y is not None:
        prod = m.inner(y, "mul")
        x = m.times_x(prod, m.clip_x_plus_3) if prod is not None else None
        if x is not None:
            return x, m.nodes
    m.nodes.clear()

    # x * (clip(x + 3) / 6)
    def sixth_of_clip(t: str) -> str | None:
        inner = m.made_by.get(t)
        if inner is None or inner.op not in ("div", "mul") or m.inner(t, inner.op) is None:
            return None
        y = m.scaled_by_sixth(inner)
        return m.clip_x_plus_3(y) if y is not None else None

    x = m.times_x(node, sixth_of_clip)
    if x is not None:
        return x, m.nodes
    m.nodes.clear()

    # x * hardsigmoid(x)
    def hardsigmoid(t: str) -> str | None:
        hs = m.inner(t, "activation")
        if hs is None or hs.attrs["kind"] != ACTIVATIONS["hardsigmoid"]:
            return None
        if abs(hs.attrs.get("alpha", 0.0) - 1 / 6) > _TOL or abs(hs.attrs.get("beta", 0.0) - 0.5) > _TOL:
            return None
        return hs.inputs[0]

    x = m.times_x(node, hardsigmoid)
    return (x, m.nodes) if x is not None else None


def fuse_hardswish(graph: Graph) -> Graph:
    """Replace each hard swish spelling (module docstring) by `activation(kind=hardswish)` of x, writing
    the last node's output. Intermediate values must be read once and not be graph outputs.
    Returns a new graph; `graph` is not modified."""
    g = copy_graph(graph)
    made_by = producers(g)
    uses = use_counts(g)
    drop: set[int] = set()
    for node in g.nodes:
        if node.op not in ("mul", "div") or id(node) in drop:
            continue
        found = _match(g, node, made_by, uses)
        if found is None:
            continue
        x, inner = found
        for n in inner:
            drop.add(id(n))
            del g.values[n.outputs[0]]
        node.op, node.inputs, node.attrs = "activation", [x], {"kind": ACTIVATIONS["hardswish"]}
    g.nodes = [n for n in g.nodes if id(n) not in drop]
    return g


