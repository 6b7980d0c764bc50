import numpy as np
import pytest

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


ZOO = ["squeezenet1_1_fmnist", "mobilenet_v1_fmnist", "mobilenet_v2_fmnist", "shufflenet_v2_fmnist",
       "resnet18_fmnist", "efficientnet_lite0_fmnist", "mobilenet_v3_small_fmnist", "seg_mobilenet_v2_fmnist"]


@pytest.mark.parametrize("name", ZOO)
def test_optimized_zoo_models_match_torch(name):
    torch = pytest.importorskip("torch")
    from deepslim import zoo
    from deepslim.frontends.torch import from_torch

    if name not in zoo.names():
        pytest.skip(f"{name} is not in the zoo yet")
    torch.manual_seed(0)
    model = zoo.get(name).eval()
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.2, 0.2), m.running_var.uniform_(0.5, 1.5)
    x = torch.randn(1, *model.input_shape)
    g = from_torch(model, x)
    o = optimize(g)
    o.validate()
    with torch.no_grad():
        want = model(x).numpy()
    got = run_graph(o, x.numpy())
    assert np.max(np.abs(got - want)) <= 1e-4 * max(1.0, float(np.max(np.abs(want))))
    ops = [n.op for n in o.nodes]
    assert len(ops) <= len(g.nodes) and "batchnorm" not in ops and "relu" not in ops
    # every standalone activation left reads something that has no epilogue to take it
    made_by = {n.outputs[0]: n for n in o.nodes}
    for n in o.nodes:
        if n.op == "activation" and n.inputs[0] in made_by:
            assert made_by[n.inputs[0]].op not in ("conv2d", "dense", "add", "conv_transpose2d") or \
                sum(n.inputs[0] in m.inputs for m in o.nodes) > 1
