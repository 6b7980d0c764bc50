"""The reference executor, op by op, against onnxruntime (one-node ONNX models) and PyTorch."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper

from deepslim.frontends.reference import apply_activation, resize_indices, run_graph
from deepslim.ir.graph import ACTIVATIONS, Graph, Value
from deepslim.ir.ops import check_node

RNG = np.random.default_rng(1234)
OPSET = 18


def _rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def ir_run(op: str, inputs: list[np.ndarray], consts: dict[int, np.ndarray] | None = None, **attrs) -> np.ndarray:
    """Run a one-node IR graph; inputs listed in `consts` (by position) become constants."""
    consts = consts or {}
    g = Graph()
    names, feed = [], {}
    for i, arr in enumerate(inputs):
        name = f"i{i}"
        if arr is None:
            names.append("")
            continue
        if i in consts:
            g.add_constant(name, arr)
        else:
            g.add_value(Value(name, arr.shape))
            g.inputs.append(name)
            feed[name] = arr
        names.append(name)
    check_node(op, names, attrs)
    g.add_value(Value("y", ()))
    g.add_node(op, "n", names, ["y"], **attrs)
    g.outputs = ["y"]
    g.validate()
    return run_graph(g, feed)


def onnx_run(op_type: str, inputs: list[np.ndarray], **attrs) -> np.ndarray:
    """Run one ONNX node with onnxruntime; float32 inputs are graph inputs, int64 ones initializers."""
    graph_inputs, inits, names, feed = [], [], [], {}
    for i, arr in enumerate(inputs):
        name = f"i{i}"
        if arr is None:
            names.append("")
            continue
        names.append(name)
        if arr.dtype == np.int64:
            inits.append(helper.make_tensor(name, TensorProto.INT64, arr.shape, arr.ravel().tolist()))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, arr.shape))
            feed[name] = arr
    node = helper.make_node(op_type, names, ["y"], **attrs)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph([node], "one", graph_inputs, [out], inits),
                              opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feed)[0]


def close(got: np.ndarray, want: np.ndarray, tol: float = 1e-5) -> None:
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == np.float32
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    err = float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0
    assert err <= tol * scale, f"max error {err} > {tol * scale}"


# ---- conv2d, dense, pools ---------------------------------------------------------------------------


@pytest.mark.parametrize("n,c,h,w,o,k,stride,pads,dil,group", [
    (1, 3, 7, 9, 5, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (2, 4, 11, 6, 6, (3, 2), (2, 1), (0, 1, 2, 0), (1, 2), 2),
    (1, 6, 9, 9, 6, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 6),
    (1, 2, 5, 8, 3, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
])
def test_conv2d_vs_onnxruntime(n, c, h, w, o, k, stride, pads, dil, group):
    x, wt, b = _rand(n, c, h, w), _rand(o, c // group, *k), _rand(o)
    attrs = dict(strides=list(stride), pads=list(pads), dilations=list(dil), group=group)
    want = onnx_run("Conv", [x, wt, b], **attrs)
    close(ir_run("conv2d", [x, wt, b], {1: wt, 2: b}, **attrs), want)
    close(ir_run("conv2d", [x, wt, None], {1: wt}, **attrs), onnx_run("Conv", [x, wt], **attrs))


ACT_CASES = [
    ("relu", 0.0, 0.0, lambda t: F.relu(t)),
    ("clip", 0.0, 6.0, lambda t: F.relu6(t)),
    ("clip", -0.5, 0.25, lambda t: torch.clamp(t, -0.5, 0.25)),
    ("leaky_relu", 0.1, 0.0, lambda t: F.leaky_relu(t, 0.1)),
    ("sigmoid", 0.0, 0.0, torch.sigmoid),
    ("hardsigmoid", 1 / 6, 0.5, F.hardsigmoid),
    ("hardsigmoid", 0.2, 0.5, lambda t: torch.clamp(0.2 * t + 0.5, 0, 1)),
    ("hardswish", 0.0, 0.0, F.hardswish),
    ("tanh", 0.0, 0.0, torch.tanh),
]


@pytest.mark.parametrize("kind,alpha,beta,fn", ACT_CASES)
def test_activation_op_vs_torch(kind, alpha, beta, fn):
    x = _rand(2, 3, 5, 7) * 5
    x[0, 0, 0, :4] = [-3.0, 3.0, 0.0, 6.0]  # the hard functions' corners
    want = fn(torch.from_numpy(x).double()).numpy()
    close(ir_run("activation", [x], kind=ACTIVATIONS[kind], alpha=alpha, beta=beta), want)


def test_sigmoid_does_not_overflow():
    y = apply_activation(ACTIVATIONS["sigmoid"], np.array([-1000.0, 0.0, 1000.0]))
    np.testing.assert_array_equal(y, [0.0, 0.5, 1.0])


@pytest.mark.parametrize("kind,alpha,beta,fn", ACT_CASES)
def test_fused_epilogue_on_conv_dense_add_conv_transpose(kind, alpha, beta, fn):
    act = dict(activation=ACTIVATIONS[kind], act_alpha=alpha, act_beta=beta)
    x, wt, b = _rand(1, 3, 6, 5), _rand(4, 3, 3, 3), _rand(4)
    plain = ir_run("conv2d", [x, wt, b], {1: wt, 2: b}, pads=[1, 1, 1, 1])
    close(ir_run("conv2d", [x, wt, b], {1: wt, 2: b}, pads=[1, 1, 1, 1], **act), fn(torch.from_numpy(plain).double()).numpy())
    d, dw = _rand(2, 5, 7), _rand(3, 7)
    plain = ir_run("dense", [d, dw], {1: dw})
    close(ir_run("dense", [d, dw], {1: dw}, **act), fn(torch.from_numpy(plain).double()).numpy())
    a1, a2 = _rand(2, 3, 4), _rand(3, 1)
    close(ir_run("add", [a1, a2], **act), fn(torch.from_numpy(a1 + a2).double()).numpy())
    tw = _rand(3, 2, 3, 3)
    plain = ir_run("conv_transpose2d", [x, tw], {1: tw}, strides=[2, 2])
    close(ir_run("conv_transpose2d", [x, tw], {1: tw}, strides=[2, 2], **act), fn(torch.from_numpy(plain).double()).numpy())


def test_unknown_activation_code_is_an_error():
    x = _rand(2, 3)
    with pytest.raises(ValueError, match="activation code 9"):
        ir_run("activation", [x], kind=9)
    with pytest.raises(ValueError, match="node 'n'"):
        ir_run("add", [x, x], activation=8)


@pytest.mark.parametrize("shape", [(5, 7), (3, 7), (2, 3, 7), (2, 1, 3, 7)])
def test_dense_over_last_axis_of_any_rank(shape):
    x, w, b = _rand(*shape), _rand(4, 7), _rand(4)
    want = F.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)).numpy()
    close(ir_run("dense", [x, w, b], {1: w, 2: b}), want)


@pytest.mark.parametrize("k,s,pads,dil,ceil", [
    ((3, 3), (2, 2), (1, 1, 1, 1), (2, 2), 0),
    ((2, 3), (1, 2), (0, 1, 1, 0), (3, 1), 0),
    ((3, 2), (2, 2), (1, 0, 1, 1), (2, 2), 1),
    ((3, 3), (2, 2), (0, 0, 0, 0), (1, 1), 1),
])
def test_maxpool_dilations_vs_onnxruntime(k, s, pads, dil, ceil):
    x = _rand(2, 3, 11, 10)
    attrs = dict(kernel_shape=list(k), strides=list(s), pads=list(pads), dilations=list(dil), ceil_mode=ceil)
    want = onnx_run("MaxPool", [x], **attrs)
    close(ir_run("maxpool2d", [x], kernel=list(k), strides=list(s), pads=list(pads), dilations=list(dil),
                 ceil_mode=ceil), want)


def test_maxpool_dilation_vs_torch():
    x = _rand(1, 2, 13, 9)
    want = F.max_pool2d(torch.from_numpy(x), 3, 2, 1, dilation=2, ceil_mode=True).numpy()
    close(ir_run("maxpool2d", [x], kernel=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], dilations=[2, 2], ceil_mode=1), want)


@pytest.mark.parametrize("op,onnx_op", [("global_avgpool", "GlobalAveragePool"), ("global_maxpool", "GlobalMaxPool")])
@pytest.mark.parametrize("shape", [(1, 3, 7, 7), (2, 5, 1, 9), (3, 1, 4, 1)])
def test_global_pools(op, onnx_op, shape):
    x = _rand(*shape)
    close(ir_run(op, [x]), onnx_run(onnx_op, [x]))


# ---- batchnorm, binary ops, concat ---------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (3, 6), (1, 4, 7)])
def test_batchnorm_vs_onnxruntime(shape):
    c = shape[1]
    x, scale, bias, mean = _rand(*shape), _rand(c), _rand(c), _rand(c)
    var = RNG.uniform(0.1, 2.0, c).astype(np.float32)
    want = onnx_run("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-3)
    close(ir_run("batchnorm", [x, scale, bias, mean, var], {1: scale, 2: bias, 3: mean, 4: var}, epsilon=1e-3), want)


@pytest.mark.parametrize("op,onnx_op", [("add", "Add"), ("sub", "Sub"), ("mul", "Mul"), ("div", "Div")])
@pytest.mark.parametrize("sa,sb", [
    ((2, 3, 4, 5), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (3, 1, 1)),
    ((1, 3, 1, 5), (2, 1, 4, 1)),
    ((7,), (2, 3, 7)),
    ((2, 3, 4, 5), (1,)),
])
def test_binary_broadcasting(op, onnx_op, sa, sb):
    a, b = _rand(*sa), _rand(*sb)
    if op == "div":
        b = np.where(np.abs(b) < 0.1, 0.5, b).astype(np.float32)
    close(ir_run(op, [a, b]), onnx_run(onnx_op, [a, b]))
    close(ir_run(op, [a, b], {1: b}), onnx_run(onnx_op, [a, b]))  # with a constant operand
    close(ir_run(op, [b, a], {0: b}), onnx_run(onnx_op, [b, a]))


@pytest.mark.parametrize("axis", [0, 1, 3, -1, -3])
def test_concat_vs_onnxruntime(axis):
    base = [2, 3, 4, 5]
    xs = []
    for extra in (1, 2, 3):
        s = list(base)
        s[axis] = extra
        xs.append(_rand(*s))
    close(ir_run("concat", xs, axis=axis), onnx_run("Concat", xs, axis=axis))


# ---- conv_transpose2d ------------------------------------------------------------------------------


@pytest.mark.parametrize("c,o,k,stride,pads,dil,outpad,group", [
    (3, 4, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1),
    (4, 6, (2, 3), (2, 1), (0, 1, 1, 0), (1, 2), (0, 0), 2),
    (4, 4, (4, 4), (2, 2), (1, 1, 1, 1), (1, 1), (0, 0), 4),
    (2, 3, (3, 2), (3, 2), (2, 0, 1, 1), (2, 1), (2, 1), 1),
    (3, 2, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), (0, 0), 1),
])
def test_conv_transpose2d_vs_onnxruntime(c, o, k, stride, pads, dil, outpad, group):
    x, w, b = _rand(2, c, 5, 6), _rand(c, o // group, *k), _rand(o)
    attrs = dict(strides=list(stride), pads=list(pads), dilations=list(dil), group=group)
    want = onnx_run("ConvTranspose", [x, w, b], output_padding=list(outpad), **attrs)
    close(ir_run("conv_transpose2d", [x, w, b], {1: w, 2: b}, output_padding=list(outpad), **attrs), want)


def test_conv_transpose2d_vs_torch():
    x, w, b = _rand(1, 4, 7, 5), _rand(4, 3, 3, 3), _rand(6)
    want = F.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride=2, padding=1,
                              output_padding=1, groups=2, dilation=2).numpy()
    got = ir_run("conv_transpose2d", [x, w, b], {1: w, 2: b}, strides=[2, 2], pads=[1, 1, 1, 1],
                 dilations=[2, 2], output_padding=[1, 1], group=2)
    close(got, want)


# ---- lrn, channel_shuffle, reshape, transpose, pad --------------------------------------------------


@pytest.mark.parametrize("size,c", [(1, 3), (3, 5), (5, 8), (7, 3)])
def test_lrn_vs_onnxruntime(size, c):
    x = _rand(2, c, 3, 4) * 3
    attrs = dict(alpha=1e-2, beta=0.6, bias=1.5)
    close(ir_run("lrn", [x], size=size, **attrs), onnx_run("LRN", [x], size=size, **attrs))


@pytest.mark.parametrize("size,c", [(2, 2), (4, 7), (6, 5)])
def test_lrn_even_size_window(size, c):
    """onnxruntime refuses even sizes; the window is channels c-floor((size-1)/2) .. c+ceil((size-1)/2)."""
    x = _rand(1, c, 2, 3)
    got = ir_run("lrn", [x], size=size, alpha=0.5, beta=0.75, bias=2.0)
    x64 = x.astype(np.float64)
    want = np.empty_like(x64)
    for ch in range(c):
        lo, hi = max(0, ch - (size - 1) // 2), min(c - 1, ch + size // 2)
        s = (x64[:, lo: hi + 1] ** 2).sum(axis=1)
        want[:, ch] = x64[:, ch] / (2.0 + 0.5 / size * s) ** 0.75
    close(got, want)


@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn_odd_size_vs_torch(size):
    x = _rand(2, 7, 3, 4) * 3
    want = F.local_response_norm(torch.from_numpy(x), size, alpha=1e-2, beta=0.6, k=1.5).numpy()
    close(ir_run("lrn", [x], size=size, alpha=1e-2, beta=0.6, bias=1.5), want)


@pytest.mark.parametrize("c,g", [(6, 2), (6, 3), (12, 4), (5, 1), (5, 5)])
def test_channel_shuffle_vs_torch(c, g):
    x = _rand(2, c, 3, 5)
    want = F.channel_shuffle(torch.from_numpy(x), g).numpy()
    close(ir_run("channel_shuffle", [x], group=g), want)
    # docs/format.md: input channel g*(C/group) + i becomes output channel i*group + g
    y = ir_run("channel_shuffle", [x], group=g)
    for gi in range(g):
        for i in range(c // g):
            np.testing.assert_array_equal(y[:, i * g + gi], x[:, gi * (c // g) + i])


@pytest.mark.parametrize("shape,spec", [
    ((2, 3, 4, 5), [0, -1]),
    ((2, 3, 4, 5), [0, 3, 2, -1, 5]),
    ((2, 3, 4, 5), [-1]),
    ((2, 3, 4, 5), [0, 0, 5, 4]),
    ((2, 12), [0, 3, 2, 2]),
])
def test_reshape_vs_onnxruntime(shape, spec):
    x = _rand(*shape)
    close(ir_run("reshape", [x], shape=spec), onnx_run("Reshape", [x, np.array(spec, dtype=np.int64)]))


def test_reshape_rejects_bad_specs():
    x = _rand(2, 3, 4)
    for spec in ([-1, -1], [5, -1], [7, 0, 4], [-2, 12], [2, 3, 4, 0]):
        with pytest.raises(ValueError, match="reshape"):
            ir_run("reshape", [x], shape=spec)


@pytest.mark.parametrize("shape,perm", [((2, 3, 4, 5), [0, 2, 3, 1]), ((2, 3, 4, 5, 1), [0, 2, 1, 3, 4]), ((3, 7), [1, 0])])
def test_transpose_vs_onnxruntime(shape, perm):
    x = _rand(*shape)
    close(ir_run("transpose", [x], perm=perm), onnx_run("Transpose", [x], perm=perm))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("pads", [[0, 0, 1, 2, 0, 0, 3, 0], [0, 1, 2, 2, 0, 2, 1, 1], [0, 0, 0, 0, 0, 0, 0, 0]])
def test_pad_vs_onnxruntime(mode, pads):
    x = _rand(2, 3, 5, 4)
    kw = {"value": 1.5} if mode == "constant" else {}
    want = onnx_run("Pad", [x, np.array(pads, dtype=np.int64), np.array(1.5, dtype=np.float32) if kw else None],
                    mode=mode) if kw else onnx_run("Pad", [x, np.array(pads, dtype=np.int64)], mode=mode)
    close(ir_run("pad", [x], pads=pads, mode=mode, **kw), want)


def test_pad_default_is_zero_constant_and_reflect_needs_room():
    x = _rand(1, 2, 3, 3)
    y = ir_run("pad", [x], pads=[0, 0, 1, 1, 0, 0, 1, 1])
    assert y.shape == (1, 2, 5, 5) and y[0, 0, 0, 0] == 0
    with pytest.raises(ValueError, match="reflect"):
        ir_run("pad", [x], pads=[0, 0, 3, 0, 0, 0, 0, 0], mode="reflect")


# ---- resize ----------------------------------------------------------------------------------------

COORD_MODES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
RESIZE_SIZES = [((5, 7), (10, 14)), ((6, 9), (4, 5)), ((3, 4), (7, 1)), ((4, 4), (12, 6)), ((1, 5), (3, 11))]


def _onnx_resize(x: np.ndarray, sizes, **attrs) -> np.ndarray:
    return onnx_run("Resize", [x, None, None, np.array([x.shape[0], x.shape[1], *sizes], dtype=np.int64)], **attrs)


@pytest.mark.parametrize("ctm", COORD_MODES)
@pytest.mark.parametrize("nearest_mode", NEAREST_MODES)
def test_resize_nearest_vs_onnxruntime(ctm, nearest_mode):
    for (h, w), sizes in RESIZE_SIZES:
        x = _rand(2, 3, h, w)
        want = _onnx_resize(x, sizes, mode="nearest", coordinate_transformation_mode=ctm, nearest_mode=nearest_mode)
        close(ir_run("resize", [x], sizes=list(sizes), mode="nearest", coordinate_transformation_mode=ctm,
                     nearest_mode=nearest_mode), want, tol=0)


@pytest.mark.parametrize("ctm", COORD_MODES)
def test_resize_linear_vs_onnxruntime(ctm):
    for (h, w), sizes in RESIZE_SIZES:
        x = _rand(2, 3, h, w)
        want = _onnx_resize(x, sizes, mode="linear", coordinate_transformation_mode=ctm)
        close(ir_run("resize", [x], sizes=list(sizes), mode="linear", coordinate_transformation_mode=ctm), want)


@pytest.mark.parametrize("align", [False, True])
def test_resize_linear_vs_torch_bilinear(align):
    # PyTorch's bilinear without align_corners is half_pixel (pytorch_half_pixel differs for an output of 1)
    ctm = "align_corners" if align else "half_pixel"
    for (h, w), sizes in RESIZE_SIZES:
        x = _rand(1, 2, h, w)
        want = F.interpolate(torch.from_numpy(x), size=sizes, mode="bilinear", align_corners=align).numpy()
        close(ir_run("resize", [x], sizes=list(sizes), mode="linear", coordinate_transformation_mode=ctm), want)


def test_resize_nearest_vs_torch_nearest():
    # PyTorch's "nearest" is ONNX asymmetric + floor
    for (h, w), sizes in RESIZE_SIZES:
        x = _rand(1, 2, h, w)
        want = F.interpolate(torch.from_numpy(x), size=sizes, mode="nearest").numpy()
        close(ir_run("resize", [x], sizes=list(sizes), coordinate_transformation_mode="asymmetric",
                     nearest_mode="floor"), want, tol=0)


def test_resize_indices_ties():
    # 2 -> 4 with half_pixel: coordinates -0.25, 0.25, 0.75, 1.25; 3 -> 2 asymmetric: 0, 1.5
    assert resize_indices(4, 2, "half_pixel", "round_prefer_floor").tolist() == [0, 0, 1, 1]
    assert resize_indices(2, 3, "asymmetric", "round_prefer_floor").tolist() == [0, 1]
    assert resize_indices(2, 3, "asymmetric", "round_prefer_ceil").tolist() == [0, 2]


@pytest.mark.parametrize("axes,starts,ends", [
    ([1], [0], [3]), ([1], [3], [6]), ([1, 3], [-2, 1], [100, -1]), ([2], [-100, ], [2]), ([0, 2], [0, 5], [1, 9]),
])
def test_slice_vs_onnxruntime(axes, starts, ends):
    x = _rand(2, 6, 5, 4)
    i64 = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
    want = onnx_run("Slice", [x, i64(starts), i64(ends), i64(axes)])
    close(ir_run("slice", [x], axes=axes, starts=starts, ends=ends), want)
