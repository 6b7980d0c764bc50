import numpy as np

from deepslim.frontends.reference import run_graph
from deepslim.ir.passes import fold_constants

from ._graphs import Builder


def test_constant_chain_folds_to_one_constant():
    b = Builder((-1, 2, 3))
    k = b.const(np.arange(6).reshape(2, 3))
    t = b.node("transpose", [k], perm=[1, 0])  # (3, 2)
    r = b.node("reshape", [t], shape=[2, 3])
    s = b.node("mul", [r, b.const([2.0])])
    out = b.node("add", ["x", s], "out")
    g = b.done(out)
    f = fold_constants(g)
    f.validate()
    assert [n.op for n in f.nodes] == ["add"]
    assert f.values[s].is_constant
    np.testing.assert_array_equal(f.values[s].data, np.arange(6).reshape(2, 3).T.reshape(2, 3) * 2)
    x = np.ones((2, 2, 3), np.float32)
    np.testing.assert_array_equal(run_graph(f, x), run_graph(g, x))
    assert not g.values[s].is_constant  # the input graph is untouched


def test_graph_output_and_activation_readers_are_kept():
    b = Builder((-1, 3))
    c = b.node("relu", [b.const([-1.0, 2.0, 3.0])], "c")
    d = b.node("add", ["x", c], "d")
    f = fold_constants(b.done(c, d))
    assert [n.op for n in f.nodes] == ["relu", "add"]
