import numpy as np
import pytest

from deepslim.frontends.reference import run_graph
from deepslim.ir.graph import ACTIVATIONS
from deepslim.ir.passes import fuse_activation

from ._graphs import Builder

RNG = np.random.default_rng(1)


@pytest.mark.parametrize("kind,alpha,beta", [(1, 0, 0), (2, 0, 6), (3, 0.1, 0), (4, 0, 0), (5, 0.2, 0.5), (6, 0, 0), (7, 0, 0)])
@pytest.mark.parametrize("op", ["conv2d", "dense", "add", "conv_transpose2d"])
def test_activation_op_fuses_into_producer(op, kind, alpha, beta):
    b = Builder((-1, 3, 5, 5))
    if op == "conv2d":
        y = b.node(op, ["x", b.rand(4, 3, 3, 3), b.rand(4)])
    elif op == "conv_transpose2d":
        y = b.node(op, ["x", b.rand(3, 2, 2, 2)], strides=[2, 2])
    elif op == "dense":
        y = b.node(op, ["x", b.rand(4, 5)])
    else:  # a residual add
        y = b.node(op, ["x", b.node("conv2d", ["x", b.rand(3, 3, 1, 1)])])
    out = b.node("activation", [y], "out", kind=kind, alpha=alpha, beta=beta)
    g = b.done(out)
    f = fuse_activation(g)
    f.validate()
    last = f.nodes[-1]
    assert last.op == op and last.outputs == ["out"] and last.attrs["activation"] == kind
    assert last.attrs.get("act_alpha", 0.0) == pytest.approx(alpha) and last.attrs.get("act_beta", 0.0) == pytest.approx(beta)
    x = RNG.standard_normal((2, 3, 5, 5)).astype(np.float32) * 4
    np.testing.assert_allclose(run_graph(f, x), run_graph(g, x), rtol=1e-6, atol=1e-6)


def test_relu_after_residual_add_and_not_into_other_ops():
    b = Builder((-1, 3, 4, 4))
    s = b.node("add", ["x", b.node("conv2d", ["x", b.rand(3, 3, 1, 1)])])
    r = b.node("relu", [s])
    m = b.node("mul", [r, r])
    out = b.node("activation", [m], "out", kind=ACTIVATIONS["sigmoid"])
    f = fuse_activation(b.done(out))
    assert [(n.op, n.attrs.get("activation", 0)) for n in f.nodes] == [("conv2d", 0), ("add", 1), ("mul", 0), ("activation", 0)]
