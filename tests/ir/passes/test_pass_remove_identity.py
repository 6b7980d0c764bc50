import numpy as np

from deepslim.frontends.reference import run_graph
from deepslim.ir.graph import Graph, Value
from deepslim.ir.passes import remove_identity

RNG = np.random.default_rng(1)


def _graph() -> Graph:
    g = Graph()
    for name, shape in [("x", (-1, 3, 4, 4)), ("p", (-1, 3, 4, 4)), ("r1", (-1, 3, 4, 4)), ("r2", (-1, 3, 4, 4)),
                        ("f", (-1, 48)), ("d", (-1, 5)), ("out", (-1, 5))]:
        g.add_value(Value(name, shape))
    g.add_constant("w", RNG.standard_normal((5, 48)))
    g.inputs, g.outputs = ["x"], ["out"]
    g.add_node("maxpool2d", "pool1x1", ["x"], ["p"], kernel=[1, 1], strides=[1, 1], pads=[0, 0, 0, 0])
    g.add_node("relu", "relu1", ["p"], ["r1"])
    g.add_node("relu", "relu2", ["r1"], ["r2"])  # relu of relu
    g.add_node("flatten", "flat", ["r2"], ["f"])  # a real flatten: stays
    g.add_node("dense", "fc", ["f", "w"], ["d"])
    g.add_node("flatten", "flat2", ["d"], ["out"])  # flatten of (N, 5): a no-op producing the output
    g.validate()
    return g


def test_removes_identities_and_keeps_output_name():
    g = _graph()
    r = remove_identity(g)
    r.validate()
    assert [n.name for n in r.nodes] == ["relu1", "flat", "fc"]
    assert r.nodes[0].inputs == ["x"]
    assert r.nodes[1].inputs == ["r1"]
    assert r.nodes[2].outputs == ["out"] and r.outputs == ["out"]
    assert set(r.values) == {"x", "r1", "f", "out", "w"}
    assert len(g.nodes) == 6  # input untouched


def test_numerics_unchanged():
    g = _graph()
    x = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(run_graph(remove_identity(g), x), run_graph(g, x))


def test_keeps_identity_between_input_and_output_and_non_identities():
    g = Graph()
    g.add_value(Value("x", (-1, 3, 4, 4)))
    g.add_value(Value("y", (-1, 3, 4, 4)))
    g.add_value(Value("z", (-1, 3, 2, 2)))
    g.inputs, g.outputs = ["x"], ["y", "z"]
    g.add_node("relu", "relu", ["x"], ["y"])  # relu of an input is not an identity
    g.add_node("avgpool2d", "pool", ["x"], ["z"], kernel=[1, 1], strides=[2, 2])  # stride 2: not an identity
    assert [n.name for n in remove_identity(g).nodes] == ["relu", "pool"]
