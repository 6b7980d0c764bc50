"""The integer reference executor against plain loops over Python integers (the format's formulas)."""

import numpy as np
import pytest

from deepslim.ir import Graph, Node, Value
from deepslim.quant.reference import run_quantized

RNG = np.random.default_rng(0)


def _rs(v: int, n: int) -> int:
    return (v + (1 << (n - 1))) >> n


def _node(op, inputs, consts, attrs, out_shape, out_dtype="u8"):
    """A one-node graph: activation inputs (name -> array) become graph inputs."""
    g = Graph()
    for name, (dtype, data) in consts.items():
        g.add_value(Value(name, data.shape, dtype, data))
    names = []
    for name, a in inputs:
        g.add_value(Value(name, a.shape, "u8" if a.dtype == np.uint8 else "f32"))
        names.append(name)
    g.add_value(Value("y", out_shape, out_dtype))
    g.nodes.append(Node(op, op, [n for n, _ in inputs] + list(consts), ["y"], attrs))
    g.inputs, g.outputs = names, ["y"]
    return g


def qconv2d_loop(x, wt, b, m, s, a, out_hw):
    """qconv2d by the format's formula over Python integers (requant on unbounded integers)."""
    (stride, _), (dil, _), group = a["strides"], a.get("dilations", [1, 1]), a["group"]
    t, l, _, _ = a["pads"]
    n, c, h, w = x.shape
    o, cg, k, _ = wt.shape
    xz, og = a["x_zero_point"], o // group
    want = np.zeros((n, o, *out_hw), dtype=np.int64)
    for ni in range(n):
        for oi in range(o):
            gi = oi // og
            for yi in range(out_hw[0]):
                for xi in range(out_hw[1]):
                    acc = int(b[oi])
                    for ci in range(cg):
                        for i in range(k):
                            for j in range(k):
                                yy, xx = yi * stride - t + i * dil, xi * stride - l + j * dil
                                v = int(x[ni, gi * cg + ci, yy, xx]) if 0 <= yy < h and 0 <= xx < w else xz
                                acc += (v - xz) * int(wt[oi, ci, i, j])
                    q = a["y_zero_point"] + _rs(acc * int(m[oi]), 31 + int(s[oi]))
                    want[ni, oi, yi, xi] = min(max(q, a["act_min"]), a["act_max"])
    return want


@pytest.mark.parametrize("group, stride, pads, dil", [(1, 1, [0, 0, 0, 0], 1), (2, 2, [1, 0, 2, 1], 1),
                                                      (4, 1, [1, 1, 1, 1], 2)])
def test_qconv2d_matches_a_loop(group, stride, pads, dil):
    n, c, h, w, o, k = 2, 4, 6, 5, 8, 3
    x = RNG.integers(0, 256, (n, c, h, w)).astype(np.uint8)
    wt = RNG.integers(-127, 128, (o, c // group, k, k)).astype(np.int8)
    b = RNG.integers(-5000, 5000, o).astype(np.int32)
    m = RNG.integers(1 << 30, 1 << 31, o).astype(np.int32)
    s = RNG.integers(-2, 12, o).astype(np.int32)
    a = dict(strides=[stride, stride], pads=pads, dilations=[dil, dil], group=group, x_zero_point=17,
             y_zero_point=100, act_min=20, act_max=240)
    t, l, bo, r = pads
    oh = (h + t + bo - dil * (k - 1) - 1) // stride + 1
    ow = (w + l + r - dil * (k - 1) - 1) // stride + 1
    consts = {"w": ("i8", wt), "b": ("i32", b), "m": ("i32", m), "s": ("i32", s)}
    got = run_quantized(_node("qconv2d", [("x", x)], consts, a, (n, o, oh, ow)), x)
    want = qconv2d_loop(x, wt, b, m, s, a, (oh, ow))
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.uint8


def test_qdense_qadd_qconcat_qgap_qlut_match_loops():
    x = RNG.integers(0, 256, (3, 7)).astype(np.uint8)
    wt = RNG.integers(-127, 128, (5, 7)).astype(np.int8)
    b, m, s = (np.array(v, dtype=np.int32) for v in ([1, -2, 300, 0, -7000], [1 << 30] * 5, [3, 4, 5, 6, 7]))
    a = dict(x_zero_point=128, y_zero_point=10, act_min=10, act_max=255)
    got = run_quantized(_node("qdense", [("x", x)], {"w": ("i8", wt), "b": ("i32", b), "m": ("i32", m),
                                                      "s": ("i32", s)}, a, (3, 5)), x)
    for i in range(3):
        for o in range(5):
            acc = int(b[o]) + sum((int(x[i, k]) - 128) * int(wt[o, k]) for k in range(7))
            assert got[i, o] == min(max(10 + _rs(acc * int(m[o]), 31 + int(s[o])), 10), 255)

    p, q = (RNG.integers(0, 256, (2, 3, 4, 4)).astype(np.uint8) for _ in range(2))
    qa = dict(a_zero_point=3, b_zero_point=250, y_zero_point=128, a_multiplier=1 << 30, b_multiplier=1500000000,
              shift=1, act_min=0, act_max=200)
    got = run_quantized(_node("qadd", [("a", p), ("b", q)], {}, qa, p.shape), {"a": p, "b": q})
    want = [min(max(128 + _rs((int(u) - 3) * (1 << 30) + (int(v) - 250) * 1500000000, 32), 0), 200)
            for u, v in zip(p.ravel(), q.ravel())]
    assert got.ravel().tolist() == want

    qc = dict(axis=1, zero_points=[0, 200], multipliers=[1 << 30, 1717986918], shifts=[-1, 0], y_zero_point=5)
    got = run_quantized(_node("qconcat", [("a", p), ("b", q)], {}, qc, (2, 6, 4, 4)), {"a": p, "b": q})
    np.testing.assert_array_equal(got[:, :3], np.clip(p.astype(int) + 5, 0, 255))  # ratio exactly 1
    want_b = [min(max(5 + _rs((int(v) - 200) * 1717986918, 31), 0), 255) for v in q.ravel()]
    assert got[:, 3:].ravel().tolist() == want_b

    gp = dict(x_zero_point=7, y_zero_point=9, multiplier=1 << 30, shift=3)  # / 16 = 2^-4
    got = run_quantized(_node("qglobal_avgpool", [("x", p)], {}, gp, (2, 3, 1, 1)), p)
    sums = (p.astype(np.int64) - 7).sum(axis=(2, 3))
    want = [min(max(9 + _rs(int(v) * (1 << 30), 34), 0), 255) for v in sums.ravel()]
    assert got.ravel().tolist() == want

    table = RNG.integers(0, 256, 256).astype(np.uint8)
    got = run_quantized(_node("qlut", [("x", p)], {"t": ("u8", table)}, {}, p.shape), p)
    np.testing.assert_array_equal(got, table[p])


def test_quantize_rounds_half_to_even_and_dequantize_is_exact():
    x = np.array([[-1.0, 0.0, 0.5, 1.5, 2.5, 1000.0, -0.75]], dtype=np.float32)
    got = run_quantized(_node("quantize", [("x", x)], {}, dict(scale=1.0, zero_point=2), x.shape), x)
    assert got.tolist() == [[1, 2, 2, 4, 4, 255, 1]]
    q = np.array([[0, 2, 255]], dtype=np.uint8)
    y = run_quantized(_node("dequantize", [("q", q)], {}, dict(scale=0.5, zero_point=2), q.shape, "f32"), q)
    assert y.dtype == np.float32 and y.tolist() == [[-1.0, 0.0, 126.5]]


def test_movement_ops_keep_u8_and_float_ops_refuse_it():
    x = RNG.integers(0, 256, (1, 2, 4, 4)).astype(np.uint8)
    y = run_quantized(_node("maxpool2d", [("x", x)], {}, dict(kernel=[2, 2]), (1, 2, 2, 2)), x)
    assert y.dtype == np.uint8
    np.testing.assert_array_equal(y, x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5)))
    y = run_quantized(_node("pad", [("x", x)], {}, dict(pads=[0, 0, 1, 0, 0, 0, 0, 1], value=9.0), (1, 2, 5, 5)), x)
    assert y.dtype == np.uint8 and y[0, 0, 0, 0] == 9 and y[0, 1, 4, 4] == 9
    with pytest.raises(ValueError, match="does not take u8"):
        run_quantized(_node("softmax", [("x", x)], {}, {}, x.shape), x)
