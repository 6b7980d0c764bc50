"""from_onnx: single-op models built with onnx.helper, each run by onnxruntime and by the numpy
reference executor on the converted graph; shape-arithmetic folding; opset conversion; errors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from deepslim.frontends.errors import UnsupportedModelError
from deepslim.frontends.onnx import from_onnx
from deepslim.frontends.reference import run_graph

ort = pytest.importorskip("onnxruntime")

RTOL = 1e-4  # |ref - onnxruntime| <= RTOL * max(1, max|onnxruntime|)
X_SHAPE = (2, 3, 8, 8)


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def make_model(nodes, inputs, outputs, inits=None, opset=17):
    """inputs/outputs: {name: shape or None}; inits: {name: array}."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in (inits or {}).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def single(op, attrs=None, inits=None, extra_inputs=(), x_shape=("N", 3, 8, 8), opset=17, outputs=1):
    """A model with one node: op(x, *extra_inputs) where extra inputs name initializers ('' = absent)."""
    outs = ["y"] + [f"y{i}" for i in range(1, outputs)]
    node = helper.make_node(op, ["x", *extra_inputs], outs, name=f"the_{op.lower()}", **(attrs or {}))
    return make_model([node], {"x": list(x_shape)}, {"y": None}, inits, opset)


def ort_run(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def ref_run(graph, feeds):
    try:
        out = run_graph(graph, feeds)
    except ValueError as e:
        if "no reference implementation" in str(e):
            pytest.xfail(f"reference executor lacks the op: {e}")
        raise
    return out if isinstance(out, dict) else {graph.outputs[0]: out}


def check(model, feeds=None, **kw):
    """Convert, run both, compare every output; returns the graph."""
    if feeds is None:
        feeds = {"x": _rand(*X_SHAPE)}
    graph = from_onnx(model, **kw)
    want = ort_run(model, feeds)
    got = ref_run(graph, feeds)
    for o, w in zip(model.graph.output, want):
        g = got[o.name]
        assert g.shape == w.shape, (o.name, g.shape, w.shape)
        assert np.max(np.abs(g - w), initial=0) <= RTOL * max(1.0, float(np.max(np.abs(w), initial=0))), o.name
    return graph


def ops(graph):
    return [n.op for n in graph.nodes]


# --------------------------------------------------------------------------------------------------
# single ops

W33 = _rand(8, 3, 3, 3, seed=1)
B8 = _rand(8, seed=2)

CONV_CASES = {
    "basic": ({"pads": [1, 1, 1, 1]}, {"w": W33, "b": B8}),
    "no_bias": ({}, {"w": W33}),
    "asymmetric_pads": ({"pads": [0, 1, 2, 1]}, {"w": W33, "b": B8}),
    "stride_dilation": ({"strides": [2, 1], "dilations": [2, 2], "pads": [2, 2, 2, 2]}, {"w": W33, "b": B8}),
    "depthwise": ({"group": 3, "pads": [1, 1, 1, 1]}, {"w": _rand(6, 1, 3, 3), "b": _rand(6)}),
    "groups": ({"group": 3, "kernel_shape": [1, 1]}, {"w": _rand(9, 1, 1, 1)}),
    "same_upper_s2_k4": ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, {"w": _rand(4, 3, 4, 4)}),
    "same_lower_k4": ({"auto_pad": "SAME_LOWER"}, {"w": _rand(4, 3, 4, 4)}),
    "same_upper_odd": ({"auto_pad": "SAME_UPPER", "strides": [3, 3]}, {"w": W33}),
    "valid": ({"auto_pad": "VALID", "strides": [2, 2]}, {"w": W33}),
}


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv(case):
    attrs, inits = CONV_CASES[case]
    g = check(single("Conv", attrs, inits, list(inits)))
    assert ops(g) == ["conv2d"]
    assert g.nodes[0].name == "the_conv"
    assert g.values["y"].shape[0] == -1


CONVT_CASES = {
    "basic": ({}, {"w": _rand(3, 4, 3, 3), "b": _rand(4)}),
    "stride2_pads": ({"strides": [2, 2], "pads": [1, 0, 1, 2]}, {"w": _rand(3, 4, 3, 3)}),
    "output_padding": ({"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 0]}, {"w": _rand(3, 4, 3, 3)}),
    "group_dilation": ({"group": 3, "dilations": [2, 2], "strides": [2, 2]}, {"w": _rand(3, 2, 3, 3), "b": _rand(6)}),
    "output_shape_even": ({"strides": [2, 2], "output_shape": [16, 16]}, {"w": _rand(3, 4, 4, 4)}),
    "output_shape_odd": ({"strides": [2, 2], "output_shape": [15, 17]}, {"w": _rand(3, 4, 3, 3)}),
    "same_upper": ({"strides": [2, 2], "auto_pad": "SAME_UPPER"}, {"w": _rand(3, 4, 3, 3)}),
    "same_lower": ({"strides": [2, 2], "auto_pad": "SAME_LOWER"}, {"w": _rand(3, 4, 3, 3)}),
}


@pytest.mark.parametrize("case", CONVT_CASES)
def test_conv_transpose(case):
    attrs, inits = CONVT_CASES[case]
    g = check(single("ConvTranspose", attrs, inits, list(inits)))
    assert ops(g) == ["conv_transpose2d"]


GEMM_CASES = {
    "transB1_bias": ({"transB": 1}, {"b": _rand(5, 12), "c": _rand(5)}),
    "transB0": ({}, {"b": _rand(12, 5), "c": _rand(1, 5)}),
    "alpha_beta": ({"alpha": 0.5, "beta": 2.0, "transB": 1}, {"b": _rand(5, 12), "c": _rand(5)}),
    "scalar_c": ({}, {"b": _rand(12, 5), "c": np.array(0.25, np.float32)}),
    "no_c": ({"transB": 1}, {"b": _rand(5, 12)}),
}


@pytest.mark.parametrize("case", GEMM_CASES)
def test_gemm(case):
    attrs, inits = GEMM_CASES[case]
    g = check(single("Gemm", attrs, inits, list(inits), x_shape=("N", 12)), {"x": _rand(3, 12)})
    assert ops(g) == ["dense"]
    assert g.values[g.nodes[0].inputs[1]].shape == (5, 12)


def test_matmul_rank4_and_bias_add_merged():
    w, b = _rand(8, 5), _rand(5)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["b", "m"], ["y"])]
    model = make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None}, {"w": w, "b": b})
    g = check(model)
    assert ops(g) == ["dense"] and len(g.nodes[0].inputs) == 3
    assert g.values["y"].shape == (-1, 3, 8, 5)


def test_matmul_bias_add_kept_when_matmul_has_two_readers():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Mul", ["m", "a"], ["y"])]
    model = make_model(nodes, {"x": ["N", 12]}, {"y": None}, {"w": _rand(12, 5), "b": _rand(5)})
    g = check(model, {"x": _rand(2, 12)})
    assert ops(g) == ["dense", "add", "mul"]


POOL_CASES = {
    "max_k3s2p1": ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "max_default_stride": ("MaxPool", {"kernel_shape": [2, 2]}),
    "max_ceil": ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "max_dilation": ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 2], "pads": [1, 0, 1, 0]}),
    "max_same_upper": ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    "avg_exclude_pad": ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "avg_include_pad": ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 2, 0, 1], "count_include_pad": 1}),
    "avg_ceil": ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    "avg_ceil_pad_include": ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                             "ceil_mode": 1, "count_include_pad": 1}),
    "max_ceil_drops_window_in_padding": ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                                     "ceil_mode": 1}),
    "avg_ceil_drops_window_in_padding": ("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2],
                                                         "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    "avg_same_lower": ("AveragePool", {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER"}),
}


@pytest.mark.parametrize("case", POOL_CASES)
def test_pool(case):
    op, attrs = POOL_CASES[case]
    x_shape = ("N", 3, 7, 9)
    g = check(single(op, attrs, x_shape=x_shape), {"x": _rand(2, 3, 7, 9)})
    assert ops(g) == ["maxpool2d" if op == "MaxPool" else "avgpool2d"]


@pytest.mark.parametrize("op,ir", [("GlobalAveragePool", "global_avgpool"), ("GlobalMaxPool", "global_maxpool")])
def test_global_pool(op, ir):
    assert ops(check(single(op))) == [ir]


def test_batchnorm():
    inits = {"s": _rand(3, seed=1), "b": _rand(3, seed=2), "m": _rand(3, seed=3),
             "v": np.abs(_rand(3, seed=4)) + 0.5}
    g = check(single("BatchNormalization", {"epsilon": 1e-3}, inits, list(inits)))
    assert ops(g) == ["batchnorm"] and g.nodes[0].attrs["epsilon"] == pytest.approx(1e-3)


ACT_CASES = {
    "Relu": ({}, {}, "relu"),
    "Clip_min_max": ({}, {"lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)}, "activation"),
    "Clip_min_only_is_relu": ({}, {"lo": np.array(0.0, np.float32)}, "relu"),
    "Clip_max_only": ({}, {"": None, "hi": np.array(0.3, np.float32)}, "activation"),
    "LeakyRelu": ({"alpha": 0.2}, {}, "activation"),
    "LeakyRelu_default": ({}, {}, "activation"),
    "PRelu": ({}, {"slope": np.array([0.25], np.float32)}, "activation"),
    "Sigmoid": ({}, {}, "activation"),
    "HardSigmoid": ({"alpha": 0.3, "beta": 0.4}, {}, "activation"),
    "HardSigmoid_default": ({}, {}, "activation"),
    "HardSwish": ({}, {}, "activation"),
    "Tanh": ({}, {}, "activation"),
}


@pytest.mark.parametrize("case", ACT_CASES)
def test_activation(case):
    attrs, inits, ir = ACT_CASES[case]
    op = case.split("_")[0]
    names = list(inits)
    inits = {k: v for k, v in inits.items() if k}
    x = _rand(*X_SHAPE) * 4
    g = check(single(op, attrs, inits, names), {"x": x})
    assert ops(g) == [ir]


BINARY_CASES = {
    "channel_const": ((3, 1, 1), False),
    "scalar_const": ((), False),
    "const_first": ((8,), True),
    "full_const": ((1, 3, 8, 8), True),
}


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("case", BINARY_CASES)
def test_binary_with_constant(op, case):
    shape, const_first = BINARY_CASES[case]
    c = _rand(*shape, seed=5) if shape else np.array(1.5, np.float32)
    if op == "Div":
        c = np.abs(c) + 0.5
    ins = ["c", "x"] if const_first else ["x", "c"]
    model = make_model([helper.make_node(op, ins, ["y"])], {"x": ["N", 3, 8, 8]}, {"y": None}, {"c": c})
    assert ops(check(model)) == [op.lower()]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_two_activations_broadcast(op):
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["p"]), helper.make_node(op, ["x", "p"], ["y"])]
    model = make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None})
    check(model)


def test_sum_becomes_add_chain():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sum", ["x", "r", "c"], ["y"])]
    model = make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None}, {"c": _rand(3, 1, 1)})
    assert ops(check(model)) == ["relu", "add", "add"]


@pytest.mark.parametrize("axis", [1, -3, 3])
def test_concat(axis):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Concat", ["x", "r", "x"], ["y"], axis=axis)]
    g = check(make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None}))
    assert ops(g) == ["relu", "concat"]


@pytest.mark.parametrize("size", [3, 5])  # onnxruntime takes odd sizes only
def test_lrn(size):
    g = check(single("LRN", {"size": size, "alpha": 1e-2, "beta": 0.6, "bias": 1.5}))
    assert ops(g) == ["lrn"]


@pytest.mark.parametrize("axis,ir", [(1, "flatten"), (2, "reshape"), (-1, "reshape")])
def test_flatten(axis, ir):
    g = check(single("Flatten", {"axis": axis}))
    assert ops(g) == [ir] and g.values["y"].shape[0] == -1


def test_flatten_axis0_static_batch():
    g = check(single("Flatten", {"axis": 0}, x_shape=(2, 3, 8, 8)))
    assert g.values["y"].shape == (1, 384)


def test_reshape_transpose_reshape_channel_shuffle():
    nodes = [
        helper.make_node("Reshape", ["x", "s1"], ["a"]),
        helper.make_node("Transpose", ["a"], ["t"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t", "s2"], ["y"]),
    ]
    inits = {"s1": np.array([0, 2, 3, -1, 8], np.int64), "s2": np.array([0, -1, 8, 8], np.int64)}
    model = make_model(nodes, {"x": ["N", 6, 8, 8]}, {"y": None}, inits)
    g = check(model, {"x": _rand(2, 6, 8, 8)})
    assert ops(g) == ["reshape", "transpose", "reshape"]
    assert g.values["a"].shape == (-1, 2, 3, 8, 8)


def test_squeeze_unsqueeze():
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["p"]),
        helper.make_node("Squeeze", ["p", "ax"], ["s"]),
        helper.make_node("Unsqueeze", ["s", "ax2"], ["y"]),
    ]
    inits = {"ax": np.array([2, 3], np.int64), "ax2": np.array([-1, 1], np.int64)}
    g = check(make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None}, inits))
    assert g.values["s"].shape == (-1, 3) and g.values["y"].shape == (-1, 1, 3, 1)


def test_squeeze_unsqueeze_opset11_attributes():
    nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[2]), helper.make_node("Squeeze", ["u"], ["y"], axes=[2])]
    check(make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None}, opset=11))


PAD_CASES = {
    "constant": ({"mode": "constant"}, [0, 0, 1, 2, 0, 0, 3, 0], 1.5),
    "reflect": ({"mode": "reflect"}, [0, 0, 2, 1, 0, 0, 1, 3], None),
    "edge": ({"mode": "edge"}, [0, 1, 2, 0, 0, 0, 1, 4], None),
}


@pytest.mark.parametrize("case", PAD_CASES)
def test_pad(case):
    attrs, pads, value = PAD_CASES[case]
    inits = {"pads": np.array(pads, np.int64)}
    names = ["pads"]
    if value is not None:
        inits["v"] = np.array(value, np.float32)
        names.append("v")
    g = check(single("Pad", attrs, inits, names, x_shape=(2, 3, 8, 8)))
    assert ops(g) == ["pad"] and g.nodes[0].attrs["pads"] == pads


def test_pad_opset18_axes():
    inits = {"pads": _i64(1, 2, 3, 0), "v": np.array(-1.0, np.float32), "axes": _i64(-1, 2)}
    g = check(single("Pad", {}, inits, ["pads", "v", "axes"], opset=18))
    assert g.nodes[0].attrs["pads"] == [0, 0, 2, 1, 0, 0, 0, 3]


def test_pad_opset2_attributes_through_version_converter():
    model = single("Pad", {"pads": [0, 0, 1, 1, 0, 0, 1, 1], "mode": "reflect"}, x_shape=(2, 3, 8, 8), opset=7)
    assert ops(check(model)) == ["pad"]


RESIZE_CASES = {
    "nearest_asym_floor_x2": ({"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
                               "nearest_mode": "floor"}, [1, 1, 2, 2], None),
    "nearest_half_pixel_ceil": ({"mode": "nearest", "nearest_mode": "round_prefer_ceil"}, None, [2, 3, 13, 11]),
    "nearest_default_down": ({"mode": "nearest"}, [1, 1, 0.5, 0.5], None),
    "nearest_align_corners_ceil": ({"mode": "nearest", "coordinate_transformation_mode": "align_corners",
                                    "nearest_mode": "ceil"}, None, [2, 3, 5, 12]),
    "linear_half_pixel": ({"mode": "linear"}, [1, 1, 2, 2], None),
    "linear_pytorch_half_pixel": ({"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
                                  None, [2, 3, 1, 15]),
    "linear_align_corners": ({"mode": "linear", "coordinate_transformation_mode": "align_corners"},
                             None, [2, 3, 15, 6]),
    "linear_asymmetric": ({"mode": "linear", "coordinate_transformation_mode": "asymmetric"}, [1, 1, 3, 1.5], None),
}


@pytest.mark.parametrize("case", RESIZE_CASES)
def test_resize(case):
    attrs, scales, sizes = RESIZE_CASES[case]
    inits, names = {}, [""]
    if scales is not None:
        inits["scales"] = np.array(scales, np.float32)
        names.append("scales")
    else:
        inits["sizes"] = np.array(sizes, np.int64)
        names += ["", "sizes"]
    g = check(single("Resize", attrs, inits, names, x_shape=(2, 3, 8, 8)))
    assert ops(g) == ["resize"]


def test_resize_opset11_empty_scales_and_roi():
    inits = {"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32), "sizes": _i64(2, 3, 12, 4)}
    check(single("Resize", {"mode": "linear"}, inits, ["roi", "scales", "sizes"], x_shape=(2, 3, 8, 8), opset=11))


def test_upsample_opset9_through_version_converter():
    inits = {"scales": np.array([1, 1, 2, 2], np.float32)}
    model = single("Upsample", {"mode": "nearest"}, inits, ["scales"], x_shape=(2, 3, 8, 8), opset=9)
    assert ops(check(model)) == ["resize"]


@pytest.mark.parametrize("opset,shape,axis,ir_axis", [
    (13, (2, 5), 1, 1), (13, (2, 3, 4), 1, 1), (17, (2, 3, 4), -1, 2),
    (11, (2, 5), 1, 1), (11, (2, 5, 1, 1), 1, 1), (11, (2, 3, 4), 2, 2), (12, (2, 1, 4), 1, 2),
])
def test_softmax(opset, shape, axis, ir_axis):
    g = check(single("Softmax", {"axis": axis}, x_shape=("N", *shape[1:]), opset=opset), {"x": _rand(*shape)})
    assert ops(g) == ["softmax"] and g.nodes[0].attrs["axis"] == ir_axis


def test_softmax_old_semantics_over_several_axes_is_rejected():
    with pytest.raises(UnsupportedModelError, match="node 0 'the_softmax' \\(Softmax\\).*one axis"):
        from_onnx(single("Softmax", {"axis": 1}, x_shape=("N", 3, 4), opset=11))


def test_dropout_identity_cast_removed():
    nodes = [
        helper.make_node("Dropout", ["x"], ["d"]),
        helper.make_node("Identity", ["d"], ["i"]),
        helper.make_node("Cast", ["i"], ["c"], to=TensorProto.FLOAT),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Identity", ["r"], ["y"]),
    ]
    g = check(make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None}))
    assert ops(g) == ["relu"] and g.outputs == ["y"] and g.nodes[0].outputs == ["y"]


# --------------------------------------------------------------------------------------------------
# folding of shape arithmetic


def _i64(*v):
    return np.array(v, np.int64)


def test_shape_gather_unsqueeze_concat_reshape_with_dynamic_batch():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Shape", ["c"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Gather", ["s", "one"], ["ch"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["nu"]),
        helper.make_node("Unsqueeze", ["ch", "ax0"], ["chu"]),
        helper.make_node("Constant", [], ["minus1"], value=numpy_helper.from_array(_i64(-1))),
        helper.make_node("Concat", ["nu", "chu", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["c", "target"], ["y"]),
    ]
    inits = {"w": W33, "zero": np.array(0, np.int64), "one": np.array(1, np.int64), "ax0": _i64(0)}
    model = make_model(nodes, {"x": ["batch", 3, 8, 8]}, {"y": None}, inits)
    g = check(model, {"x": _rand(3, 3, 8, 8)})
    assert ops(g) == ["conv2d", "reshape"]
    assert g.nodes[1].attrs["shape"] == [0, 8, -1]
    assert g.values["y"].shape == (-1, 8, 64)
    assert set(v.name for v in g.constants()) == {"w"}  # the int64 constants are consumed


def test_reshape_with_batch_times_channels_uses_minus_one():
    # target [N*C, H*W] computed from Shape: the batch-dependent size becomes -1
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "st0", "st2"], ["nc"]),
        helper.make_node("ReduceProd", ["nc"], ["ncp"], keepdims=1),
        helper.make_node("Slice", ["s", "st2", "st4"], ["hw"]),
        helper.make_node("ReduceProd", ["hw"], ["hwp"], keepdims=1),
        helper.make_node("Concat", ["ncp", "hwp"], ["t"], axis=0),
        helper.make_node("Reshape", ["x", "t"], ["y"]),
    ]
    inits = {"st0": _i64(0), "st2": _i64(2), "st4": _i64(4)}
    g = check(make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None}, inits, opset=13))
    assert g.nodes[0].attrs["shape"] == [-1, 64]


def test_resize_with_scales_computed_from_shape():
    # scales = [1, 1, out_h / in_h, out_w / in_w] where in_h, in_w come from Shape(x) (torch's sizes= export style)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "st2", "st4"], ["hw"]),
        helper.make_node("Cast", ["hw"], ["hwf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["hwf", "two"], ["outf"]),
        helper.make_node("Div", ["outf", "hwf"], ["sc_hw"]),
        helper.make_node("Concat", ["ones", "sc_hw"], ["scales"], axis=0),
        helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
    ]
    inits = {"st2": _i64(2), "st4": _i64(4), "two": np.array([2.0, 3.0], np.float32), "ones": np.ones(2, np.float32)}
    g = check(make_model(nodes, {"x": ["N", 3, 5, 4]}, {"y": None}, inits), {"x": _rand(2, 3, 5, 4)})
    assert ops(g) == ["resize"] and g.nodes[0].attrs["sizes"] == [10, 12]


def test_resize_with_sizes_from_shape_keeps_batch():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Slice", ["s", "st0", "st2"], ["nc"]),
        helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear"),
    ]
    inits = {"st0": _i64(0), "st2": _i64(2), "hw": _i64(16, 6)}
    g = check(make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None}, inits))
    assert g.values["y"].shape == (-1, 3, 16, 6)


def test_pad_from_constant_of_shape_range_where():
    # pads = [0, 0, 1, 1, 0, 0, 1, 1] built with ConstantOfShape, Range, Equal, Where
    nodes = [
        helper.make_node("ConstantOfShape", ["eight"], ["zeros"], value=numpy_helper.from_array(_i64(0))),
        helper.make_node("Range", ["r0", "r8", "r1"], ["idx"]),
        helper.make_node("Mod", ["idx", "four"], ["m"]),
        helper.make_node("GreaterOrEqual", ["m", "two"], ["sel"]),
        helper.make_node("Where", ["sel", "onesv", "zeros"], ["pads"]),
        helper.make_node("Pad", ["x", "pads"], ["y"], mode="edge"),
    ]
    inits = {"eight": _i64(8), "r0": np.array(0, np.int64), "r8": np.array(8, np.int64), "r1": np.array(1, np.int64),
             "four": np.array(4, np.int64), "two": np.array(2, np.int64), "onesv": _i64(1)}
    model = make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None}, inits)
    with pytest.raises(UnsupportedModelError, match="Mod"):
        from_onnx(model)  # Mod is not folded: the error names it
    nodes[2] = helper.make_node("Sub", ["idx", "four"], ["m0"])
    nodes.insert(3, helper.make_node("Abs", ["m0"], ["m"]))
    nodes[4] = helper.make_node("Less", ["m", "two"], ["sel"])
    # idx - 4 -> |.| = 4 3 2 1 0 1 2 3; < 2 -> pads 0 0 0 1 1 1 0 0 (axis 3 begin, axes 0..1 end: batch!)
    model = make_model(nodes, {"x": [2, 3, 8, 8]}, {"y": None}, inits)
    g = check(model)
    assert g.nodes[0].attrs["pads"] == [0, 0, 0, 1, 1, 1, 0, 0]


def test_batch_dependent_constant_into_an_op_is_rejected():
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
        helper.make_node("Slice", ["sf", "st0", "st1"], ["n"]),
        helper.make_node("Mul", ["x", "n"], ["y"]),
    ]
    inits = {"st0": _i64(0), "st1": _i64(1)}
    with pytest.raises(UnsupportedModelError, match="node 3 .*depends on the batch"):
        from_onnx(make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None}, inits))
    g = check(make_model(nodes, {"x": [2, 3, 8, 8]}, {"y": None}, inits))  # a fixed batch folds
    assert ops(g) == ["mul"]


def test_reshape_that_moves_the_batch_is_rejected():
    model = make_model([helper.make_node("Reshape", ["x", "t"], ["y"])], {"x": ["N", 3, 8, 8]}, {"y": None},
                       {"t": _i64(3, -1)})
    with pytest.raises(UnsupportedModelError, match="node 0 .*Reshape.*batch at dim 0"):
        from_onnx(model)


# --------------------------------------------------------------------------------------------------
# input shapes, opsets, errors


def _yolo_like():
    return single("Conv", {"pads": [1, 1, 1, 1]}, {"w": W33}, ["w"], x_shape=("batch", 3, "height", "width"))


def test_dynamic_hw_needs_input_shapes():
    with pytest.raises(UnsupportedModelError, match=r"'x'.*axis 2 \(height\), 3 \(width\).*--input-shape x="):
        from_onnx(_yolo_like())


def test_input_shapes_fix_hw_and_keep_batch_dynamic():
    g = check(_yolo_like(), {"x": _rand(2, 3, 10, 12)}, input_shapes={"x": [1, 3, 10, 12]})
    assert g.values["x"].shape == (-1, 3, 10, 12) and g.values["y"].shape == (-1, 8, 10, 12)


@pytest.mark.parametrize("shapes,match", [
    ({"nope": [1, 3, 8, 8]}, "not graph inputs"),
    ({"x": [1, 3, 8]}, "rank 4"),
    ({"x": [1, 4, 8, 8]}, "fixes it to 3"),
    ({"x": [1, 3, 0, 8]}, "dims must be >= 1"),
])
def test_bad_input_shapes(shapes, match):
    with pytest.raises(ValueError, match=match):
        from_onnx(_yolo_like(), input_shapes=shapes)


def test_unsupported_op_names_node_index_and_supported_ops():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Elu", ["r"], ["y"], name="act2")]
    with pytest.raises(UnsupportedModelError, match=r"node 1 'act2' \(Elu\): op Elu is not supported.*Conv"):
        from_onnx(make_model(nodes, {"x": ["N", 3, 8, 8]}, {"y": None}))


@pytest.mark.parametrize("model,match", [
    (single("Resize", {"mode": "cubic"}, {"s": np.array([1, 1, 2, 2], np.float32)}, ["", "s"]), "mode='cubic'"),
    (single("Pad", {"mode": "wrap"}, {"p": _i64(0, 0, 1, 1, 0, 0, 1, 1)}, ["p"], opset=19), "mode='wrap'"),
    (single("MaxPool", {"kernel_shape": [2, 2]}, outputs=2), "output 'y1' is used"),
    (single("MaxPool", {"kernel_shape": [2, 2], "storage_order": 1}), "storage_order"),
    (single("Conv", {}, {"w": _rand(4, 3, 3)}, ["w"], x_shape=("N", 3, 8)), "4-D NCHW"),
    (single("Resize", {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize"},
            {"s": np.array([1, 1, 2, 2], np.float32)}, ["", "s"]), "tf_crop_and_resize"),
    (single("Resize", {}, {"s": np.array([1, 1, 1.3, 1.3], np.float32)}, ["", "s"]), "not a whole size"),
    (single("Gemm", {"transA": 1}, {"b": _rand(12, 5)}, ["b"], x_shape=(12, 2)), "transA"),
    (single("MatMul", {}, {"b": _rand(2, 8, 5)}, ["b"]), "constant 2-D weight"),
    (single("PRelu", {}, {"s": _rand(3, 1, 1)}, ["s"]), "per-channel"),
])
def test_unsupported_attributes(model, match):
    if model.graph.node[0].op_type == "MaxPool" and len(model.graph.node[0].output) == 2:
        model.graph.output.append(helper.make_tensor_value_info("y1", TensorProto.INT64, None))
    with pytest.raises(UnsupportedModelError, match=match):
        from_onnx(model)


def test_non_float_input_is_rejected():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [1, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UnsupportedModelError, match="'x' has element type double"):
        from_onnx(model)


def test_opset_out_of_range():
    import onnx.defs

    newest = onnx.defs.onnx_opset_version()
    with pytest.raises(UnsupportedModelError, match=f"opset {newest + 1}, newer than"):
        from_onnx(single("Relu", opset=newest + 1))
    with pytest.raises(UnsupportedModelError, match="opset 6"):
        from_onnx(single("Relu", opset=6))


def test_newer_opset_is_read_when_its_ops_changed_only_types():
    g = from_onnx(single("Relu", opset=22))
    assert [n.op for n in g.nodes] == ["relu"]
    # Cast gained a `round` attribute after opset 21: a model using it at a newer opset is refused
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["c"], to=TensorProto.FLOAT), helper.make_node("Relu", ["c"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    with pytest.raises(UnsupportedModelError, match="Cast differs from opset 21"):
        from_onnx(model)


def test_opset7_model_through_version_converter():
    # opset 7: BatchNormalization with spatial, Gemm with broadcast C, Dropout with ratio, Softmax axis 1
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["bn"], epsilon=1e-4),
        helper.make_node("Relu", ["bn"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Dropout", ["f"], ["d"], ratio=0.3),
        helper.make_node("Gemm", ["d", "gw", "gb"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y"], axis=1),
    ]
    inits = {"w": W33, "b": B8, "s": _rand(8, seed=3), "bb": _rand(8, seed=4), "m": _rand(8, seed=5),
             "v": np.abs(_rand(8, seed=6)) + 0.5, "gw": _rand(10, 128, seed=7), "gb": _rand(10, seed=8)}
    model = make_model(nodes, {"x": [2, 3, 8, 8]}, {"y": [2, 10]}, inits, opset=7)
    model.ir_version = 3  # initializers are listed as graph inputs too, as old exporters did
    for name, v in inits.items():
        model.graph.input.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, v.shape))
    g = check(model)
    assert ops(g) == ["conv2d", "batchnorm", "relu", "maxpool2d", "flatten", "dense", "softmax"]


def test_not_an_onnx_model(tmp_path):
    p = tmp_path / "junk.onnx"
    p.write_bytes(b"\x00\x01 this is not protobuf \xff\xfe" * 10)
    with pytest.raises(ValueError, match="is not an ONNX model"):
        from_onnx(p)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        from_onnx(tmp_path / "missing.onnx")


def test_path_and_bytes_inputs(tmp_path):
    model = single("Relu")
    p = tmp_path / "relu.onnx"
    onnx.save(model, p)
    assert ops(from_onnx(str(p))) == ["relu"]
    assert ops(from_onnx(p.read_bytes())) == ["relu"]


@pytest.mark.parametrize("starts,ends,axes,shape", [
    ([1], [3], [1], (-1, 2, 8, 8)),
    ([-5, 2], [2**63 - 1, -1], [2, -1], (-1, 3, 5, 5)),
    ([0, 0], [2**63 - 1, 100], [0, 3], (-1, 3, 8, 8)),
])
def test_slice(starts, ends, axes, shape):
    inits = {"s": _i64(*starts), "e": _i64(*ends), "a": _i64(*axes)}
    g = check(single("Slice", {}, inits, ["s", "e", "a"]))
    assert ops(g) == ["slice"] and g.values["y"].shape == shape


def test_slice_with_step_is_rejected():
    inits = {"s": _i64(0), "e": _i64(8), "a": _i64(2), "st": _i64(2)}
    with pytest.raises(UnsupportedModelError, match="only step 1"):
        from_onnx(single("Slice", {}, inits, ["s", "e", "a", "st"]))


@pytest.mark.parametrize("opset,attrs,inits,names", [
    (13, {"axis": 1}, {"sp": _i64(1, 2)}, ["sp"]),
    (11, {"axis": 1, "split": [2, 1]}, {}, []),
    (18, {"axis": 2, "num_outputs": 2}, {}, []),
])
def test_split(opset, attrs, inits, names):
    node = helper.make_node("Split", ["x", *names], ["y0", "y1"], **attrs)
    model = make_model([node], {"x": ["N", 3, 8, 8]}, {"y0": None, "y1": None}, inits, opset=opset)
    g = check(model)
    assert ops(g) == ["slice", "slice"]


@pytest.mark.parametrize("op,ir", [("ReduceMean", "global_avgpool"), ("ReduceMax", "global_maxpool")])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_over_hw_is_global_pool(op, ir, keepdims):
    g = check(single(op, {"axes": [-1, 2], "keepdims": keepdims}, opset=13))
    assert ops(g) == [ir] + ([] if keepdims else ["flatten"])
    with pytest.raises(UnsupportedModelError, match="axes 2 and 3"):
        from_onnx(single(op, {"axes": [1], "keepdims": keepdims}, opset=13))
