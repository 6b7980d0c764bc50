import numpy as np

from deepslim.frontends.reference import run_graph
from deepslim.ir.graph import Graph, Value
from deepslim.ir.passes import dead_nodes


def test_drops_unreachable_nodes_and_their_constants():
    rng = np.random.default_rng(2)
    g = Graph()
    for name, shape in [("x", (-1, 4)), ("a", (-1, 3)), ("b", (-1, 3)), ("c", (-1, 2)), ("d", (-1, 2)), ("unused", (-1, 1))]:
        g.add_value(Value(name, shape))
    g.add_constant("w1", rng.standard_normal((3, 4)))
    g.add_constant("w2", rng.standard_normal((2, 3)))
    g.add_constant("w3", rng.standard_normal((2, 3)))
    g.inputs, g.outputs = ["x"], ["b"]
    g.add_node("dense", "fc1", ["x", "w1"], ["a"])
    g.add_node("dense", "side", ["a", "w2"], ["c"])  # dead: c feeds only d
    g.add_node("relu", "relu", ["a"], ["b"])
    g.add_node("relu", "side_relu", ["c"], ["d"])  # dead
    g.validate()
    d = dead_nodes(g)
    d.validate()
    assert [n.name for n in d.nodes] == ["fc1", "relu"]
    assert set(d.values) == {"x", "a", "b", "w1"}
    assert len(g.nodes) == 4 and "w2" in g.values
    x = rng.standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_array_equal(run_graph(d, x), run_graph(g, x))


def test_unused_graph_input_is_kept():
    g = Graph()
    for name in ("x", "y", "z"):
        g.add_value(Value(name, (-1, 2)))
    g.inputs, g.outputs = ["x", "y"], ["z"]
    g.add_node("relu", "relu", ["x"], ["z"])
    d = dead_nodes(g)
    assert d.inputs == ["x", "y"] and "y" in d.values
