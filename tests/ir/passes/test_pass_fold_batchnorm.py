import numpy as np
import pytest

from deepslim.frontends.reference import run_graph
from deepslim.ir.graph import Encoding
from deepslim.ir.passes import fold_batchnorm

from ._graphs import Builder

RNG = np.random.default_rng(0)


def _bn(b: Builder, x: str, c: int, out: str | None = None) -> str:
    var = b.const(RNG.uniform(0.5, 2.0, c))
    return b.node("batchnorm", [x, b.rand(c), b.rand(c), b.rand(c), var], out, epsilon=1e-3)


def _same(g, f, x):
    want, got = run_graph(g, x), run_graph(f, x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["conv2d", "conv_transpose2d", "dense"])
@pytest.mark.parametrize("bias", [True, False])
def test_folds_into_producer(op, bias):
    if op == "dense":
        b, x = Builder((-1, 5)), RNG.standard_normal((3, 5)).astype(np.float32)
        w, c, attrs = b.rand(4, 5), 4, {}
    elif op == "conv2d":
        b, x = Builder((-1, 4, 6, 5)), RNG.standard_normal((2, 4, 6, 5)).astype(np.float32)
        w, c, attrs = b.rand(6, 2, 3, 3), 6, {"group": 2, "pads": [1, 1, 1, 1]}
    else:
        b, x = Builder((-1, 4, 6, 5)), RNG.standard_normal((2, 4, 6, 5)).astype(np.float32)
        w, c, attrs = b.rand(4, 3, 3, 3), 6, {"group": 2, "strides": [2, 2]}  # O = 3 * group
    ins = ["x", w] + ([b.rand(c)] if bias else [])
    y = b.node(op, ins, **attrs)
    out = _bn(b, y, c, "out")
    g = b.done(out)
    f = fold_batchnorm(g)
    f.validate()
    assert [n.op for n in f.nodes] == [op]
    assert f.nodes[0].outputs == ["out"] and len(f.nodes[0].inputs) == 3
    _same(g, f, x)
    assert len(g.nodes) == 2 and g.values[w].data is not f.values[w].data  # input graph untouched


def test_left_alone_when_unsafe():
    b = Builder((-1, 3, 4, 4))
    w = b.rand(3, 3, 1, 1)
    y = b.node("conv2d", ["x", w])
    b1 = _bn(b, y, 3)  # y also read by the add below
    s = b.node("add", [b1, y])
    w2 = b.const(RNG.standard_normal((3, 3, 1, 1)))
    b.g.values[w2].encoding = Encoding(codebook=np.unique(b.g.values[w2].data), cluster_bits=4)
    y2 = b.node("conv2d", [s, w2])
    b2 = _bn(b, y2, 3)  # codebook weight
    y3 = b.node("conv2d", [b2, b.rand(3, 3, 1, 1)], activation=1)
    b3 = _bn(b, y3, 3)  # fused activation before the batchnorm
    y4 = b.node("dense", [b3, b.rand(2, 4)])
    b4 = _bn(b, y4, 3, "out")  # dense on a 4-D input: the channel axis is not M
    g = b.done(b4)
    f = fold_batchnorm(g)
    assert [n.op for n in f.nodes] == [n.op for n in g.nodes]
