import numpy as np

from deepslim.frontends.reference import run_graph
from deepslim.ir.graph import Graph, Value
from deepslim.ir.passes import (
    PIPELINE, dead_nodes, fold_batchnorm, fold_constants, fuse_activation, fuse_channel_shuffle, fuse_hardswish, optimize,
    remove_identity,
)


def test_pipeline_order():
    assert PIPELINE == (
        dead_nodes, fold_constants, remove_identity, fuse_channel_shuffle, fuse_hardswish, fold_batchnorm,
        fuse_activation, dead_nodes,
    )


def test_optimize_fuses_through_a_removed_identity():
    rng = np.random.default_rng(3)
    g = Graph()
    for name, shape in [("x", (-1, 6)), ("d", (-1, 4)), ("f", (-1, 4)), ("r", (-1, 4)), ("r2", (-1, 4)),
                        ("out", (-1, 3)), ("dead", (-1, 4))]:
        g.add_value(Value(name, shape))
    g.add_constant("w1", rng.standard_normal((4, 6)))
    g.add_constant("b1", rng.standard_normal(4))
    g.add_constant("w2", rng.standard_normal((3, 4)))
    g.inputs, g.outputs = ["x"], ["out"]
    g.add_node("dense", "fc1", ["x", "w1", "b1"], ["d"])
    g.add_node("flatten", "noop", ["d"], ["f"])
    g.add_node("relu", "relu", ["f"], ["r"])
    g.add_node("relu", "relu_again", ["r"], ["r2"])
    g.add_node("relu", "unused", ["d"], ["dead"])
    g.add_node("dense", "fc2", ["r2", "w2"], ["out"])
    g.validate()
    o = optimize(g)
    o.validate()
    assert [(n.name, n.attrs.get("activation", 0)) for n in o.nodes] == [("fc1", 1), ("fc2", 0)]
    x = rng.standard_normal((5, 6)).astype(np.float32)
    np.testing.assert_allclose(run_graph(o, x), run_graph(g, x), rtol=1e-6, atol=1e-6)
