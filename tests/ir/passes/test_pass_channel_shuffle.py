import numpy as np

from deepslim.frontends.reference import run_graph
from deepslim.ir.passes import fuse_channel_shuffle

from ._graphs import Builder


def _pattern(b: Builder, x: str, spec1, perm=(0, 2, 1, 3, 4), spec2=(0, 12, 3, 5), out=None) -> str:
    r = b.node("reshape", [x], shape=list(spec1))
    t = b.node("transpose", [r], perm=list(perm))
    return b.node("reshape", [t], out, shape=list(spec2))


def test_pattern_becomes_channel_shuffle():
    b = Builder((-1, 12, 3, 5))
    y = b.node("relu", ["x"])
    out = _pattern(b, y, (0, 4, 3, 3, 5), out="out")
    g = b.done(out)
    f = fuse_channel_shuffle(g)
    f.validate()
    assert [(n.op, n.attrs) for n in f.nodes] == [("relu", {}), ("channel_shuffle", {"group": 4})]
    assert f.nodes[1].inputs == [y] and f.nodes[1].outputs == ["out"] and len(f.values) == 3
    x = np.random.default_rng(0).standard_normal((2, 12, 3, 5)).astype(np.float32)
    np.testing.assert_array_equal(run_graph(f, x), run_graph(g, x))


def test_other_permutations_and_shared_values_are_left_alone():
    b = Builder((-1, 12, 3, 5))
    a = _pattern(b, "x", (0, 4, 3, 3, 5), perm=(0, 1, 2, 4, 3), spec2=(0, 12, 5, 3))
    r = b.node("reshape", ["x"], shape=[0, 4, 3, 3, 5])
    t = b.node("transpose", [r], perm=[0, 2, 1, 3, 4])
    c = b.node("reshape", [t], shape=[0, 12, 3, 5])
    g = b.done(a, c, t)  # t is a graph output
    assert [n.op for n in fuse_channel_shuffle(g).nodes] == [n.op for n in g.nodes]
