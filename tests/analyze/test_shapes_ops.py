"""infer_shapes and the counts of analyze for ops 8-23, checked against the reference executor's outputs."""

from __future__ import annotations

import numpy as np
import pytest

from deepslim.analyze import analyze, infer_shapes
from deepslim.analyze.shapes import broadcast_shapes, output_shape, reshape_shape
from deepslim.frontends.reference import run_graph
from deepslim.ir.graph import Graph, Value

RNG = np.random.default_rng(7)


def _one_node(op: str, x_shape, consts=(), **attrs) -> Graph:
    g = Graph()
    g.add_value(Value("x", (-1, *x_shape[1:])))
    g.inputs = ["x"]
    names = ["x"]
    for i, c in enumerate(consts):
        if c is None:
            names.append("")
            continue
        g.add_constant(f"c{i}", RNG.standard_normal(c))
        names.append(f"c{i}")
    g.add_value(Value("y", ()))
    g.add_node(op, "n", names, ["y"], **attrs)
    g.outputs = ["y"]
    return g


CASES = [
    ("conv2d", (1, 4, 9, 7), [(6, 2, 3, 2)], dict(strides=[2, 1], pads=[1, 0, 0, 1], dilations=[1, 2], group=2)),
    ("conv_transpose2d", (1, 4, 5, 6), [(4, 3, 3, 2), (6,)],
     dict(strides=[2, 3], pads=[1, 0, 0, 1], dilations=[2, 1], group=2, output_padding=[1, 2])),
    ("dense", (1, 3, 5, 7), [(4, 7)], {}),
    ("maxpool2d", (1, 2, 11, 10), [], dict(kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], dilations=[2, 2], ceil_mode=1)),
    ("avgpool2d", (1, 2, 11, 10), [], dict(kernel=[3, 2], strides=[2, 2], ceil_mode=1)),
    ("batchnorm", (1, 3, 4, 5), [(3,), (3,), (3,), (3,)], {}),
    ("activation", (1, 3, 4), [], dict(kind=6)),
    ("add", (1, 3, 4, 5), [(3, 1, 1)], {}),
    ("sub", (1, 1, 4, 1), [(2, 1, 5)], {}),
    ("mul", (1, 3, 4, 5), [(5,)], {}),
    ("div", (1, 3, 4, 5), [(1,)], {}),
    ("lrn", (1, 5, 3, 3), [], dict(size=3)),
    ("channel_shuffle", (1, 6, 3, 3), [], dict(group=3)),
    ("reshape", (1, 6, 4, 5), [], dict(shape=[0, 2, 3, -1])),
    ("transpose", (1, 6, 4, 5), [], dict(perm=[0, 2, 3, 1])),
    ("pad", (1, 3, 4, 5), [], dict(pads=[0, 1, 2, 3, 0, 0, 1, 2], mode="reflect")),
    ("resize", (1, 3, 4, 5), [], dict(sizes=[9, 2], mode="linear")),
    ("global_avgpool", (1, 3, 4, 5), [], {}),
    ("global_maxpool", (1, 3, 4, 5), [], {}),
    ("flatten", (1, 3, 4, 5), [], dict(axis=2)),
    ("softmax", (1, 3, 4), [], dict(axis=1)),
    ("slice", (1, 6, 4, 5), [], dict(axes=[1, -1], starts=[3, -10], ends=[100, -2])),
]


@pytest.mark.parametrize("op,x_shape,consts,attrs", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("batch", [1, 3])
def test_infer_shapes_matches_reference(op, x_shape, consts, attrs, batch):
    g = _one_node(op, x_shape, consts, **attrs)
    x = RNG.standard_normal((batch, *x_shape[1:])).astype(np.float32)
    if op == "batchnorm":
        g.values["c3"].data[:] = np.abs(g.values["c3"].data) + 0.1
    assert infer_shapes(g, batch=batch)["y"] == run_graph(g, x).shape


def test_concat_with_constant_first_input_and_negative_axis():
    g = Graph()
    g.add_value(Value("x", (-1, 3, 4)))
    g.inputs = ["x"]
    g.add_constant("k", np.ones((2, 2, 4)))
    g.add_value(Value("y", ()))
    g.add_node("concat", "cat", ["k", "x", "x"], ["y"], axis=-2)
    g.outputs = ["y"]
    assert infer_shapes(g, batch=2)["y"] == (2, 8, 4)
    assert run_graph(g, np.zeros((2, 3, 4), np.float32)).shape == (2, 8, 4)


def test_shape_errors_name_the_node():
    g = _one_node("concat", (1, 3, 4), [(1, 2, 5)], axis=1)
    with pytest.raises(ValueError, match="node 'n' \\(concat\\)"):
        infer_shapes(g)
    with pytest.raises(ValueError, match="do not broadcast"):
        broadcast_shapes((2, 3), (4, 3, 2))
    with pytest.raises(ValueError, match="elements"):
        reshape_shape((2, 3, 4), [5, -1])
    with pytest.raises(ValueError, match="disagree"):
        output_shape("conv_transpose2d", {"group": 2}, [(1, 4, 5, 5), (3, 2, 3, 3)])


def test_counts_of_new_ops():
    g = Graph()
    g.add_value(Value("x", (-1, 4, 5, 6)))
    g.inputs = ["x"]
    g.add_constant("tw", RNG.standard_normal((4, 3, 3, 3)))  # group 2: O = 6
    g.add_constant("tb", RNG.standard_normal(6))
    for v in ("t", "bn", "g", "f", "d", "s"):
        g.add_value(Value(v, ()))
    for c in ("sc", "bi", "mu", "va"):
        g.add_constant(c, np.ones(6))
    g.add_constant("dw", RNG.standard_normal((7, 6)))
    g.add_node("conv_transpose2d", "up", ["x", "tw", "tb"], ["t"], strides=[2, 2], group=2, activation=1)
    g.add_node("batchnorm", "bn", ["t", "sc", "bi", "mu", "va"], ["bn"])
    g.add_node("global_avgpool", "gap", ["bn"], ["g"])
    g.add_node("transpose", "tr", ["g"], ["f"], perm=[0, 2, 3, 1])  # (1, 1, 1, 6)
    g.add_node("dense", "fc", ["f", "dw"], ["d"])
    g.add_node("add", "res", ["d", "d"], ["s"], activation=1)
    g.outputs = ["s"]
    stats = {s.name: s for s in analyze(g)}
    oh, ow = (5 - 1) * 2 + 3, (6 - 1) * 2 + 3  # 11 x 13
    assert stats["up"].output_shape == (1, 6, oh, ow)
    assert stats["up"].macs == (4 * 5 * 6) * 3 * 3 * 3
    assert stats["up"].other_ops == 2 * 6 * oh * ow  # bias + fused relu
    assert stats["up"].params == 4 * 3 * 3 * 3 + 6
    assert stats["bn"].params == 24 and stats["bn"].other_ops == 2 * 6 * oh * ow and stats["bn"].macs == 0
    assert stats["gap"].other_ops == 6 * oh * ow
    assert stats["tr"].output_shape == (1, 1, 1, 6) and stats["tr"].other_ops == 0
    assert stats["fc"].macs == 7 * 6 and stats["fc"].output_shape == (1, 1, 1, 7)
    assert stats["res"].other_ops == 2 * 7
