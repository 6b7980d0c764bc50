import numpy as np

from deepslim.frontends.reference import run_graph
from deepslim.ir.passes import remove_identity

from ._graphs import Builder


def test_new_no_op_forms_are_removed():
    b = Builder((-1, 4, 3, 5))
    v = b.node("activation", ["x"], kind=0)
    v = b.node("channel_shuffle", [v], group=1)
    v = b.node("concat", [v], axis=1)
    v = b.node("pad", [v], pads=[0] * 8)
    v = b.node("transpose", [v], perm=[0, 1, 2, 3])
    v = b.node("reshape", [v], shape=[0, 4, 3, 5])
    v = b.node("resize", [v], sizes=[3, 5], mode="linear")
    v = b.node("slice", [v], axes=[1], starts=[0], ends=[100])
    v = b.node("add", [v, b.const(np.zeros((4, 1, 1)))])
    v = b.node("mul", [v, b.const([1.0])])
    v = b.node("div", [v, b.const([1.0])])
    v = b.node("sub", [v, b.const([0.0])])
    out = b.node("relu", [v], "out")
    g = b.done(out)
    f = remove_identity(g)
    f.validate()
    assert [n.op for n in f.nodes] == ["relu"] and f.nodes[0].inputs == ["x"]


def test_real_work_is_kept():
    b = Builder((-1, 4, 3, 5))
    v = b.node("add", ["x", b.const(np.zeros((2, 4, 3, 5)))])  # broadcasts the batch up: not a no-op
    v = b.node("mul", [v, b.const([2.0])])
    v = b.node("activation", [v], kind=1)
    v = b.node("reshape", [v], shape=[0, 12, 5])
    v = b.node("slice", [v], axes=[1], starts=[1], ends=[100])
    out = b.node("resize", [b.node("reshape", [v], shape=[0, 1, 11, 5])], "out", sizes=[11, 6])
    g = b.done(out)
    f = remove_identity(g)
    assert [n.op for n in f.nodes] == [n.op for n in g.nodes]
    x = np.random.default_rng(0).standard_normal((1, 4, 3, 5)).astype(np.float32)
    np.testing.assert_array_equal(run_graph(f, x), run_graph(g, x))
