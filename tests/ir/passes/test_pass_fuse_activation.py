import numpy as np

from deepslim.frontends.reference import run_graph
from deepslim.ir.graph import Graph, Value
from deepslim.ir.passes import fuse_activation

RNG = np.random.default_rng(0)


def _graph() -> Graph:
    """x -> conv -> relu -> dense(flattened) -> relu -> out; conv2 -> relu where conv2 is read twice."""
    g = Graph()
    for name, shape in [("x", (-1, 2, 5, 5)), ("c", (-1, 3, 3, 3)), ("r", (-1, 3, 3, 3)), ("f", (-1, 27)),
                        ("d", (-1, 4)), ("out", (-1, 4)), ("d2", (-1, 4)), ("r2", (-1, 4))]:
        g.add_value(Value(name, shape))
    g.add_constant("cw", RNG.standard_normal((3, 2, 3, 3)))
    g.add_constant("cb", RNG.standard_normal(3))
    g.add_constant("dw", RNG.standard_normal((4, 27)))
    g.add_constant("dw2", RNG.standard_normal((4, 4)))
    g.inputs = ["x"]
    g.add_node("conv2d", "conv", ["x", "cw", "cb"], ["c"])
    g.add_node("relu", "relu1", ["c"], ["r"])
    g.add_node("flatten", "flat", ["r"], ["f"])
    g.add_node("dense", "fc", ["f", "dw"], ["d"])
    g.add_node("relu", "relu2", ["d"], ["out"])
    g.add_node("dense", "fc2", ["out", "dw2"], ["d2"])  # read by relu3 and is a graph output
    g.add_node("relu", "relu3", ["d2"], ["r2"])
    g.outputs = ["out", "d2", "r2"]
    g.validate()
    return g


def test_fuses_single_consumer_relus_and_keeps_names():
    g = _graph()
    f = fuse_activation(g)
    f.validate()
    assert [n.name for n in f.nodes] == ["conv", "flat", "fc", "fc2", "relu3"]
    assert f.nodes[0].attrs["activation"] == 1 and f.nodes[0].outputs == ["r"]
    assert f.nodes[2].attrs["activation"] == 1 and f.nodes[2].outputs == ["out"]
    assert f.nodes[3].attrs.get("activation", 0) == 0  # d2 is a graph output: not fused
    assert "c" not in f.values and "d" not in f.values
    assert f.outputs == g.outputs
    # the input graph is untouched
    assert len(g.nodes) == 7 and "activation" not in g.nodes[0].attrs and "c" in g.values


def test_numerics_unchanged():
    g = _graph()
    x = RNG.standard_normal((2, 2, 5, 5)).astype(np.float32)
    before, after = run_graph(g, x), run_graph(fuse_activation(g), x)
    for k in g.outputs:
        np.testing.assert_allclose(after[k], before[k], rtol=1e-6, atol=1e-6)


def test_relu_after_already_fused_producer_is_left_alone():
    g = Graph()
    for name in ("x", "y", "z"):
        g.add_value(Value(name, (-1, 3)))
    g.add_constant("w", np.eye(3))
    g.inputs, g.outputs = ["x"], ["z"]
    g.add_node("dense", "fc", ["x", "w"], ["y"], activation=1)
    g.add_node("relu", "relu", ["y"], ["z"])
    assert [n.op for n in fuse_activation(g).nodes] == ["dense", "relu"]
