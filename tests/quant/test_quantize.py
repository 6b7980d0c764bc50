"""quantize_graph on small graphs: structure, accuracy against the float reference, fp32 islands,
explicit ranges, int4, pruned + shared weights, .dsm round trips and rejection of corrupt files."""

import argparse
import subprocess
import sys

import numpy as np
import pytest

from deepslim.format import DsmFormatError, encode_dsm, load_dsm, read_dsm, write_dsm
from deepslim.format.dsm import assemble_dsm
from deepslim.format.graph_section import encode_graph_section
from deepslim.format.tensors import encode_tensor
from deepslim.frontends.reference import run_graph
from deepslim.ir import Encoding, Graph, Value
from deepslim.quant import quantize_graph, run_quantized
from deepslim.quant.calibrate import calibrate_graph

RNG = np.random.default_rng(0)


def small_cnn(w2_encoding: Encoding | None = None, w2=None) -> Graph:
    """x (N,1,8,8) -> conv 3x3 + ReLU -> maxpool 2 -> conv 3x3 pad 1 + hard swish -> global avgpool
    -> flatten -> dense 10 -> add(residual with a dense) + ReLU -> dense -> softmax."""
    r = np.random.default_rng(1)
    g = Graph()
    act = lambda n, s: g.add_value(Value(n, s))  # noqa: E731
    act("x", (-1, 1, 8, 8))
    g.add_constant("w1", r.standard_normal((8, 1, 3, 3)) * 0.5)
    g.add_constant("b1", r.standard_normal(8) * 0.1)
    g.add_constant("w2", r.standard_normal((16, 8, 3, 3)) * 0.2 if w2 is None else w2, w2_encoding)
    g.add_constant("b2", r.standard_normal(16) * 0.1)
    g.add_constant("w3", r.standard_normal((12, 16)) * 0.3)
    g.add_constant("w4", r.standard_normal((12, 16)) * 0.3)
    g.add_constant("w5", r.standard_normal((10, 12)) * 0.3)
    for n, s in [("c1", (-1, 8, 6, 6)), ("p1", (-1, 8, 3, 3)), ("c2", (-1, 16, 3, 3)), ("gp", (-1, 16, 1, 1)),
                 ("f", (-1, 16)), ("d3", (-1, 12)), ("d4", (-1, 12)), ("s", (-1, 12)), ("d5", (-1, 10)),
                 ("y", (-1, 10))]:
        act(n, s)
    g.add_node("conv2d", "conv1", ["x", "w1", "b1"], ["c1"], activation=1)
    g.add_node("maxpool2d", "pool1", ["c1"], ["p1"], kernel=[2, 2])
    g.add_node("conv2d", "conv2", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], activation=6)
    g.add_node("global_avgpool", "gap", ["c2"], ["gp"])
    g.add_node("flatten", "flat", ["gp"], ["f"])
    g.add_node("dense", "fc3", ["f", "w3"], ["d3"])
    g.add_node("dense", "fc4", ["f", "w4"], ["d4"])
    g.add_node("add", "res", ["d3", "d4"], ["s"], activation=1)
    g.add_node("dense", "fc5", ["s", "w5"], ["d5"])
    g.add_node("softmax", "prob", ["d5"], ["y"], axis=-1)
    g.inputs, g.outputs = ["x"], ["y"]
    return g


X = RNG.standard_normal((300, 1, 8, 8)).astype(np.float32)
CALIB, TEST = X[:200], X[200:]


def _ops(g):
    return [n.op for n in g.nodes]


@pytest.fixture(scope="module")
def quantized():
    return quantize_graph(small_cnn(), calib=CALIB, method="minmax")


def test_structure_quantizes_once_and_dequantizes_once(quantized):
    ops = _ops(quantized)
    assert ops.count("quantize") == 1 and ops.count("dequantize") == 1
    assert ops[0] == "quantize" and ops[-2:] == ["dequantize", "softmax"]
    assert ops[:8] == ["quantize", "qconv2d", "maxpool2d", "qconv2d", "qlut", "qglobal_avgpool", "flatten", "qdense"]
    assert "qadd" in ops
    conv1 = quantized.nodes[1]
    assert conv1.attrs["act_min"] == conv1.attrs["y_zero_point"]  # ReLU fused as the lower clamp
    for name in ("conv2", "fc3"):
        node = next(n for n in quantized.nodes if n.name == name)
        w, b, m, s = (quantized.values[i] for i in node.inputs[1:])
        assert (w.dtype, b.dtype, m.dtype, s.dtype) == ("i8", "i32", "i32", "i32")
        assert np.all(m.data >= 1 << 30) and np.abs(w.data).max() == 127
    assert quantized.outputs == ["y"] and quantized.values["y"].dtype == "f32"
    assert {v.dtype for v in quantized.values.values() if not v.is_constant} == {"f32", "u8"}


def test_int8_outputs_are_close_to_float(quantized):
    g = small_cnn()
    yf, yq = run_graph(g, TEST), run_quantized(quantized, TEST)
    assert np.abs(yf - yq).max() < 0.05
    assert (yf.argmax(1) == yq.argmax(1)).mean() > 0.9


def test_dsm_round_trip_gives_the_same_bits(quantized, tmp_path):
    write_dsm(quantized, tmp_path / "q.dsm")
    back = read_dsm(tmp_path / "q.dsm")
    assert _ops(back) == _ops(quantized)
    np.testing.assert_array_equal(run_quantized(back, TEST), run_quantized(quantized, TEST))


def test_keep_fp32_island_converts_at_its_boundary_only():
    q = quantize_graph(small_cnn(), calib=CALIB, keep_fp32=["conv2"])
    ops = _ops(q)
    i = ops.index("conv2d")
    assert ops[i - 1] == "dequantize" and ops[i + 1] == "activation" and ops[i + 2] == "quantize"
    assert ops.count("quantize") == 2 and ops.count("dequantize") == 2
    assert np.abs(run_quantized(q, TEST) - run_graph(small_cnn(), TEST)).max() < 0.05
    with pytest.raises(ValueError, match="not in the graph"):
        quantize_graph(small_cnn(), calib=CALIB, keep_fp32=["nope"])


def test_explicit_ranges_replace_calibration():
    g = small_cnn()
    from deepslim.quant.quantize import prepare_graph

    ranges = calibrate_graph(prepare_graph(g), CALIB)
    q1 = quantize_graph(g, ranges=ranges)
    q2 = quantize_graph(g, calib=CALIB)
    assert [n.attrs for n in q1.nodes] == [n.attrs for n in q2.nodes]
    del ranges["c1"]
    with pytest.raises(ValueError, match="no range for activation 'c1'"):
        quantize_graph(g, ranges=ranges)
    with pytest.raises(ValueError, match="calib"):
        quantize_graph(g)


@pytest.mark.parametrize("method", ["percentile", "kl", "mse"])
def test_every_method_gives_a_working_graph(method):
    q = quantize_graph(small_cnn(), calib=CALIB, method=method)
    assert (run_quantized(q, TEST).argmax(1) == run_graph(small_cnn(), TEST).argmax(1)).mean() > 0.85


def test_int4_weights_are_stored_in_four_bits():
    q = quantize_graph(small_cnn(), calib=CALIB, weight_bits=4)
    w2 = q.values["w2"].data
    assert w2.dtype == np.int8 and np.abs(w2).max() == 7
    data, report = encode_dsm(q)
    row = next(t for t in report.tensors if t.name == "w2")
    assert row.total_bytes <= w2.size // 2
    back, info = load_dsm(data)
    np.testing.assert_array_equal(back.values["w2"].data, w2)


def test_pruned_shared_weights_stay_sparse_and_small():
    r = np.random.default_rng(3)
    book = np.linspace(-0.5, 0.5, 16).astype(np.float32)
    w2 = book[r.integers(0, 16, (16, 8, 3, 3))] * (r.random((16, 8, 3, 3)) < 0.1)
    enc = Encoding("sparse_rel", index_bits=4, codebook=np.append(book, 0.0), cluster_bits=5, huffman=True)
    g = small_cnn(enc, w2.astype(np.float32))
    q = quantize_graph(g, calib=CALIB)
    assert q.values["w2"].encoding.layout == "sparse_rel"
    data, report = encode_dsm(q)
    row = next(t for t in report.tensors if t.name == "w2")
    assert row.total_bytes < 0.2 * w2.size  # under 1.6 bits per weight
    np.testing.assert_array_equal(load_dsm(data)[0].values["w2"].data == 0, w2 == 0)


def _unchecked_bytes(graph: Graph) -> bytes:
    encoded = [encode_tensor(v) for v in graph.constants()]
    index = {e.info.name: i for i, e in enumerate(encoded)}
    return assemble_dsm(encode_graph_section(graph, index), [e.info for e in encoded], [e.payloads for e in encoded])


@pytest.mark.parametrize("corrupt, message", [
    (lambda g: g.nodes[0].attrs.update(scale=0.0), r"quantize.*scale is 0.0; a scale must be finite and > 0"),
    (lambda g: g.nodes[0].attrs.update(scale=float("nan")), "scale is nan"),
    (lambda g: g.nodes[-2].attrs.update(scale=-1.0), r"dequantize.*scale is -1.0"),
    (lambda g: g.nodes[0].attrs.update(zero_point=300), "zero_point is 300"),
    (lambda g: g.values["conv1.multiplier"].data.__setitem__(2, -5), r"multiplier 'conv1.multiplier'\[2\] is -5"),
    (lambda g: g.values["conv1.shift"].data.__setitem__(0, 31), "shift 'conv1.shift'.* is 31"),
    (lambda g: g.nodes[1].attrs.update(act_min=200, act_max=100), "act_min 200 is greater than act_max 100"),
])
def test_corrupt_quantization_parameters_are_rejected_at_load(quantized, corrupt, message):
    import copy

    g = copy.deepcopy(quantized)
    corrupt(g)
    data = _unchecked_bytes(g)
    with pytest.raises(DsmFormatError, match=message):
        read_dsm(data)
    with pytest.raises(DsmFormatError, match=message):
        encode_dsm(g)


def test_quantize_needs_no_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import numpy as np, deepslim.quant, deepslim.quantize_cmd\n"
        "from deepslim.ir import Graph, Value\n"
        "from deepslim.quant import quantize_graph, run_quantized\n"
        "g = Graph(); g.add_value(Value('x', (-1, 4))); g.add_value(Value('y', (-1, 3)))\n"
        "g.add_constant('w', np.ones((3, 4))); g.add_node('dense', 'fc', ['x', 'w'], ['y'])\n"
        "g.inputs, g.outputs = ['x'], ['y']\n"
        "x = np.random.default_rng(0).standard_normal((20, 4)).astype(np.float32)\n"
        "q = quantize_graph(g, calib=x, method='kl'); print(run_quantized(q, x).shape)\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(20, 3)"


def _parse(argv):
    from deepslim.quantize_cmd import build_quantize_parser

    p = argparse.ArgumentParser()
    build_quantize_parser(p.add_subparsers())
    return p.parse_args(argv)


def test_quantize_command_on_a_dsm_and_an_onnx_model(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from deepslim.quantize_cmd import quantize_command

    write_dsm(small_cnn(), tmp_path / "m.dsm")
    np.save(tmp_path / "calib.npy", CALIB)
    args = _parse(["quantize", str(tmp_path / "m.dsm"), "--calib", str(tmp_path / "calib.npy"),
                   "-o", str(tmp_path / "q.dsm"), "--method", "percentile"])
    assert args.func(args) == 0
    assert "x the fp32 .dsm" in capsys.readouterr().out
    q = read_dsm(tmp_path / "q.dsm")
    assert (run_quantized(q, TEST).argmax(1) == run_graph(small_cnn(), TEST).argmax(1)).mean() > 0.85

    w = numpy_helper.from_array(RNG.standard_normal((4, 1, 3, 3)).astype(np.float32), "w")
    fw = numpy_helper.from_array(RNG.standard_normal((5, 144)).astype(np.float32), "fw")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"]), helper.make_node("Gemm", ["f", "fw"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])], [w, fw])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), tmp_path / "m.onnx")
    args = _parse(["quantize", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "calib.npy"),
                   "-o", str(tmp_path / "q2.dsm"), "--weight-bits", "4", "--samples", "50"])
    assert quantize_command(args) == 0
    assert [n.op for n in read_dsm(tmp_path / "q2.dsm").nodes] == ["quantize", "qconv2d", "flatten", "qdense",
                                                                    "dequantize"]
    args = _parse(["quantize", str(tmp_path / "m.onnx"), "--calib", str(tmp_path / "none.npy"), "-o", "x.dsm"])
    with pytest.raises(FileNotFoundError, match="calibration file"):
        quantize_command(args)
    args = _parse(["quantize", str(tmp_path / "q.dsm"), "--calib", str(tmp_path / "calib.npy"), "-o", "x.dsm"])
    with pytest.raises(ValueError, match="already quantized"):
        quantize_command(args)
