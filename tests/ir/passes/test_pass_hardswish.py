import numpy as np
import pytest

from deepslim.frontends.reference import run_graph
from deepslim.ir.graph import ACTIVATIONS
from deepslim.ir.passes import fuse_hardswish

from ._graphs import Builder

CLIP = dict(kind=ACTIVATIONS["clip"], alpha=0.0, beta=6.0)


def _clip_x_plus_3(b: Builder, x: str, swapped: bool, fused: bool) -> str:
    three = b.const([3.0])
    ins = [three, x] if swapped else [x, three]
    if fused:
        return b.node("add", ins, activation=ACTIVATIONS["clip"], act_alpha=0.0, act_beta=6.0)
    return b.node("activation", [b.node("add", ins)], **CLIP)


def _sixth(b: Builder, y: str, by_mul: bool) -> str:
    return b.node("mul", [y, b.const([1 / 6])]) if by_mul else b.node("div", [y, b.const([6.0])])


SPELLINGS = {
    "mul_then_div": lambda b, x, s, f, m: _sixth(b, b.node("mul", [x, _clip_x_plus_3(b, x, s, f)]), m),
    "clip_mul_x_then_scale": lambda b, x, s, f, m: _sixth(b, b.node("mul", [_clip_x_plus_3(b, x, s, f), x]), m),
    "x_times_scaled_clip": lambda b, x, s, f, m: b.node("mul", [x, _sixth(b, _clip_x_plus_3(b, x, s, f), m)]),
    "scaled_clip_times_x": lambda b, x, s, f, m: b.node("mul", [_sixth(b, _clip_x_plus_3(b, x, s, f), m), x]),
    "hardsigmoid": lambda b, x, s, f, m: b.node(
        "mul", [x, b.node("activation", [x], kind=ACTIVATIONS["hardsigmoid"], alpha=1 / 6, beta=0.5)]),
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
@pytest.mark.parametrize("swapped,fused,by_mul", [(False, False, False), (True, True, True), (False, True, False)])
def test_spellings_become_one_hardswish(spelling, swapped, fused, by_mul):
    b = Builder((-1, 3, 4, 4))
    x = b.node("conv2d", ["x", b.rand(3, 3, 1, 1)])
    hs = SPELLINGS[spelling](b, x, swapped, fused, by_mul)
    out = b.node("relu", [hs], "out")
    g = b.done(out)
    f = fuse_hardswish(g)
    f.validate()
    assert [(n.op, n.attrs.get("kind")) for n in f.nodes] == [("conv2d", None), ("activation", 6), ("relu", None)]
    assert f.nodes[1].inputs == [x] and f.nodes[1].outputs == [hs]
    xv = np.random.default_rng(2).standard_normal((2, 3, 4, 4)).astype(np.float32) * 5
    np.testing.assert_allclose(run_graph(f, xv), run_graph(g, xv), rtol=1e-5, atol=1e-6)


def test_near_misses_are_left_alone():
    b = Builder((-1, 3))
    y = b.node("activation", [b.node("add", ["x", b.const([2.0])])], **CLIP)  # x + 2
    a = b.node("div", [b.node("mul", ["x", y]), b.const([6.0])])
    z = b.node("activation", [b.node("add", ["x", b.const([3.0])])], **CLIP)
    m = b.node("mul", ["x", z])
    c = b.node("div", [m, b.const([6.0])])
    g = b.done(a, c, m)  # m is also a graph output
    assert [n.op for n in fuse_hardswish(g).nodes] == [n.op for n in g.nodes]
