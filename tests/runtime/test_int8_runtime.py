"""The native int8 runtime against deepslim.quant.reference.run_quantized, bit for bit: small random
quantized graphs (every op 25-32 and the u8 movement ops, convolutions of many shapes), a quantized
LeNet-5 and a quantized MobileNet V2 at reduced width, at every ISA level this machine runs
(DS_FORCE_ISA), with 1 and 2 threads; and rejection of corrupt quantization parameters at load."""

import copy
import os

import numpy as np
import pytest

from deepslim.format import write_dsm
from deepslim.format.dsm import assemble_dsm
from deepslim.format.graph_section import encode_graph_section
from deepslim.format.tensors import encode_tensor
from deepslim.ir import Graph, Value
from deepslim.quant import quantize_graph, run_quantized
from deepslim.runtime import FormatError, Session

ISAS = ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni")


def _available_isas():
    """The levels this build and CPU run: a forced level that is missing fails at session creation."""
    found = []
    path = _tiny_model_path()
    for isa in ISAS:
        old = os.environ.get("DS_FORCE_ISA")
        os.environ["DS_FORCE_ISA"] = isa
        try:
            Session(path)
            found.append(isa)
        except Exception:
            pass
        finally:
            if old is None:
                os.environ.pop("DS_FORCE_ISA", None)
            else:
                os.environ["DS_FORCE_ISA"] = old
    return found


_TINY = {}


def _tiny_model_path():
    if "path" not in _TINY:
        import tempfile

        g = Graph()
        g.add_value(Value("x", (1, 4)))
        g.add_value(Value("y", (1, 4)))
        g.add_node("relu", "r", ["x"], ["y"])
        g.inputs, g.outputs = ["x"], ["y"]
        path = os.path.join(tempfile.mkdtemp(), "tiny.dsm")
        write_dsm(g, path)
        _TINY["path"] = path
    return _TINY["path"]


def run_native(path, x, isa, threads=1):
    old = os.environ.get("DS_FORCE_ISA")
    os.environ["DS_FORCE_ISA"] = isa
    try:
        s = Session(path, threads=threads)
    finally:
        if old is None:
            os.environ.pop("DS_FORCE_ISA", None)
        else:
            os.environ["DS_FORCE_ISA"] = old
    return s.run(x)


def random_graph(rng, conv_specs, cin, size, *, residual=True, concat=True, dense=True):
    """x (-1,cin,size,size) -> convs (each spec: cout, k, stride, pad, group, dilation, act) ->
    optional residual add / concat of the last two same-shape outputs -> maxpool -> global avgpool
    -> flatten -> dense; every op quantizes to its q-op or stays u8."""
    g = Graph()
    g.add_value(Value("x", (-1, cin, size, size)))
    cur, c, h = "x", cin, size
    outs = []
    for i, (cout, k, s, p, grp, d, act) in enumerate(conv_specs):
        if grp == "dw":
            grp, cout = c, c
        w = rng.standard_normal((cout, c // grp, k, k)) * (1.5 / np.sqrt(c // grp * k * k))
        g.add_constant(f"w{i}", w.astype(np.float32))
        g.add_constant(f"b{i}", (rng.standard_normal(cout) * 0.2).astype(np.float32))
        h = (h + 2 * p - d * (k - 1) - 1) // s + 1
        g.add_value(Value(f"c{i}", (-1, cout, h, h)))
        attrs = dict(strides=[s, s], pads=[p, p, p, p], dilations=[d, d], group=grp, activation=act)
        if act == 2:
            attrs.update(act_alpha=0.0, act_beta=6.0)
        g.add_node("conv2d", f"conv{i}", [cur, f"w{i}", f"b{i}"], [f"c{i}"], **attrs)
        outs.append((f"c{i}", cout, h))
        cur, c = f"c{i}", cout
    if residual and len(outs) >= 2 and outs[-1][1:] == outs[-2][1:]:
        g.add_value(Value("res", (-1, c, h, h)))
        g.add_node("add", "res", [outs[-2][0], outs[-1][0]], ["res"], activation=1)
        cur = "res"
    if concat and len(outs) >= 2 and outs[-1][2] == outs[-2][2]:
        c2 = outs[-2][1]
        g.add_value(Value("cat", (-1, c + c2, h, h)))
        g.add_node("concat", "cat", [cur, outs[-2][0]], ["cat"], axis=1)
        cur, c = "cat", c + c2
    if h >= 2:
        h2 = (h - 2) // 2 + 1
        g.add_value(Value("mp", (-1, c, h2, h2)))
        g.add_node("maxpool2d", "mp", [cur], ["mp"], kernel=[2, 2])
        cur, h = "mp", h2
    g.add_value(Value("gap", (-1, c, 1, 1)))
    g.add_node("global_avgpool", "gap", [cur], ["gap"])
    g.add_value(Value("flat", (-1, c)))
    g.add_node("flatten", "flat", ["gap"], ["flat"])
    cur = "flat"
    if dense:
        g.add_constant("wd", (rng.standard_normal((10, c)) / np.sqrt(c)).astype(np.float32))
        g.add_constant("bd", (rng.standard_normal(10) * 0.1).astype(np.float32))
        g.add_value(Value("y", (-1, 10)))
        g.add_node("dense", "fc", [cur, "wd", "bd"], ["y"])
        cur = "y"
    g.inputs, g.outputs = ["x"], [cur]
    return g


# (cout, k, stride, pad, group, dilation, activation)
CASES = {
    "1x1": [(16, 1, 1, 0, 1, 1, 1), (16, 1, 1, 0, 1, 1, 0)],
    "3x3_pad_stride2": [(12, 3, 2, 1, 1, 1, 2), (12, 3, 1, 1, 1, 1, 0)],
    "depthwise_3x3": [(16, 1, 1, 0, 1, 1, 2), (0, 3, 1, 1, "dw", 1, 2), (0, 3, 2, 1, "dw", 1, 2), (24, 1, 1, 0, 1, 1, 0)],
    "depthwise_5x5_dilated": [(8, 1, 1, 0, 1, 1, 1), (0, 5, 1, 2, "dw", 1, 1), (0, 3, 1, 2, "dw", 2, 0)],
    "grouped": [(12, 3, 1, 1, 1, 1, 1), (12, 3, 1, 1, 3, 1, 1)],
    "odd_sizes": [(37, 3, 1, 0, 1, 1, 1), (5, 7, 2, 3, 1, 1, 0), (33, 1, 1, 0, 1, 1, 1)],
    "wide_k": [(70, 5, 1, 2, 1, 1, 1), (130, 3, 1, 1, 1, 1, 1)],
}
SIZES = {"1x1": 9, "3x3_pad_stride2": 13, "depthwise_3x3": 17, "depthwise_5x5_dilated": 11, "grouped": 10,
         "odd_sizes": 19, "wide_k": 8}


@pytest.fixture(scope="module")
def isas():
    return _available_isas()


@pytest.mark.parametrize("case", sorted(CASES))
def test_random_graphs_match_the_integer_reference_bit_for_bit(case, isas, tmp_path):
    rng = np.random.default_rng(abs(hash(case)) % 2**32)
    cin = 3
    g = random_graph(rng, CASES[case], cin, SIZES[case])
    calib = rng.standard_normal((8, cin, SIZES[case], SIZES[case])).astype(np.float32)
    q = quantize_graph(g, calib=calib)
    ops = [n.op for n in q.nodes]
    assert ops[0] == "quantize" and "dequantize" in ops and "qconv2d" in ops
    path = tmp_path / "q.dsm"
    write_dsm(q, path)
    x = rng.standard_normal((2, cin, SIZES[case], SIZES[case])).astype(np.float32) * 1.5
    want = run_quantized(q, x)
    assert "scalar" in isas
    for isa in isas:
        for threads in (1, 2):
            got = run_native(str(path), x, isa, threads)
            np.testing.assert_array_equal(got, want, err_msg=f"{case} at {isa}, {threads} threads")


def _from_torch_quantized(model, shape, rng, n_calib=4):
    import torch

    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize

    torch.manual_seed(0)
    model.eval()
    g = optimize(from_torch(model, torch.zeros(1, *shape)))
    calib = rng.standard_normal((n_calib, *shape)).astype(np.float32)
    return quantize_graph(g, calib=calib)


def test_quantized_lenet5_matches_the_reference(isas, tmp_path):
    pytest.importorskip("torch")
    from deepslim.zoo.lenet5 import LeNet5

    rng = np.random.default_rng(5)
    m = LeNet5()
    q = _from_torch_quantized(m, tuple(m.input_shape) if hasattr(m, "input_shape") else (1, 28, 28), rng)
    shape = q.values[q.inputs[0]].shape[1:]
    path = tmp_path / "lenet5.dsm"
    write_dsm(q, path)
    x = rng.standard_normal((3, *shape)).astype(np.float32)
    want = run_quantized(q, x)
    for isa in isas:
        np.testing.assert_array_equal(run_native(str(path), x, isa), want, err_msg=isa)


def test_quantized_mobilenet_v2_matches_the_reference(isas, tmp_path):
    pytest.importorskip("torch")
    from deepslim.zoo.mobilenet_v2 import MobileNetV2

    rng = np.random.default_rng(7)
    m = MobileNetV2(num_classes=10, width_mult=0.35, small_input=True)
    q = _from_torch_quantized(m, (3, 32, 32), rng, n_calib=2)
    ops = {n.op for n in q.nodes}
    assert {"qconv2d", "qadd", "qglobal_avgpool", "qdense"} <= ops
    path = tmp_path / "mnv2.dsm"
    write_dsm(q, path)
    x = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    want = run_quantized(q, x)
    for isa in isas:
        for threads in (1, 2):
            np.testing.assert_array_equal(run_native(str(path), x, isa, threads), want, err_msg=isa)


def _unchecked_bytes(graph):
    encoded = [encode_tensor(v) for v in graph.constants()]
    index = {e.info.name: i for i, e in enumerate(encoded)}
    return assemble_dsm(encode_graph_section(graph, index), [e.info for e in encoded], [e.payloads for e in encoded])


@pytest.fixture(scope="module")
def small_quantized():
    rng = np.random.default_rng(11)
    g = random_graph(rng, CASES["3x3_pad_stride2"], 3, 9)
    return quantize_graph(g, calib=rng.standard_normal((4, 3, 9, 9)).astype(np.float32))


@pytest.mark.parametrize("corrupt, message", [
    (lambda g: g.nodes[0].attrs.update(scale=0.0), r"node '[^']*' \(quantize\): attribute 'scale' is 0"),
    (lambda g: g.nodes[0].attrs.update(scale=float("nan")), r"attribute 'scale' is nan"),
    (lambda g: g.nodes[0].attrs.update(scale=float("inf")), r"attribute 'scale' is inf"),
    (lambda g: next(n for n in g.nodes if n.op == "dequantize").attrs.update(scale=-1.0),
     r"\(dequantize\): attribute 'scale' is -1"),
    (lambda g: g.nodes[0].attrs.update(zero_point=300), r"attribute 'zero_point' is 300, outside 0..255"),
    (lambda g: g.nodes[1].attrs.update(x_zero_point=-1), r"\(qconv2d\): attribute 'x_zero_point' is -1"),
    (lambda g: g.values[g.nodes[1].inputs[3]].data.__setitem__(2, -5), r"\(qconv2d\): multiplier\[2\] is -5"),
    (lambda g: g.values[g.nodes[1].inputs[4]].data.__setitem__(0, 31), r"\(qconv2d\): shift\[0\] is 31"),
    (lambda g: g.nodes[1].attrs.update(act_min=200, act_max=100), "act_min 200 is greater than act_max 100"),
])
def test_corrupt_quantization_parameters_are_rejected_by_the_native_loader(small_quantized, corrupt, message,
                                                                         tmp_path):
    g = copy.deepcopy(small_quantized)
    corrupt(g)
    path = tmp_path / "bad.dsm"
    path.write_bytes(_unchecked_bytes(g))
    with pytest.raises(FormatError, match=message):
        Session(str(path))


@pytest.mark.parametrize("stride, kernel", [(2, 7), (1, 3), (2, 1)])
def test_input_quantize_folded_into_its_qconv2d_matches_the_two_nodes(isas, tmp_path, stride, kernel):
    """A quantize of the graph input whose u8 output only a qconv2d (3 input channels: taps packed
    from phase planes) reads runs in that conv, row by row as the planes are filled; the result is
    the reference's and that of the graph with the u8 input also exported (not folded)."""
    rng = np.random.default_rng(5)
    pad = kernel // 2
    g = random_graph(rng, [(8, kernel, stride, pad, 1, 1, 1), (8, 3, 1, 1, 1, 1, 0)], 3, 17, concat=False)
    q = quantize_graph(g, calib=rng.standard_normal((4, 3, 17, 17)).astype(np.float32))
    (quant,) = [n for n in q.nodes if n.op == "quantize"]
    folded_path = tmp_path / "folded.dsm"
    write_dsm(q, folded_path)
    apart = copy.deepcopy(q)
    apart.add_value(Value("x_u8_f32", apart.values[quant.outputs[0]].shape))
    apart.add_node("dequantize", "x_u8_dq", [quant.outputs[0]], ["x_u8_f32"], scale=1.0, zero_point=0)
    apart.outputs = list(apart.outputs) + ["x_u8_f32"]
    apart_path = tmp_path / "apart.dsm"
    write_dsm(apart, apart_path)
    x = rng.standard_normal((2, 3, 17, 17)).astype(np.float32) * 2
    x.flat[::7] = 0.5 * np.float32(quant.attrs["scale"])  # ties: round half to even
    want = run_quantized(q, x)
    with Session(folded_path, profile=True) as s:
        s.time_nodes(x, runs=1, warmup=0)
        (row,) = [r for r in s.node_profile() if r["name"] == quant.name]
    for isa in isas:
        for threads in (1, 2, 3):
            got = run_native(str(folded_path), x, isa, threads)
            np.testing.assert_array_equal(got, want, err_msg=f"folded at {isa}, {threads} threads")
            two = run_native(str(apart_path), x, isa, threads)
            np.testing.assert_array_equal(two[q.outputs[0]], got, err_msg=f"apart at {isa}, {threads} threads")
    if "avx512vnni" in isas:  # the session's default level
        assert row["ms"] == 0.0, "the quantize was not folded into the qconv2d"


def test_qconv2d_with_its_qadd_fused_matches_the_two_nodes(isas, tmp_path):
    """The session runs a qadd in the epilogue of the qconv2d it follows; the result is the unfused
    graph's (the conv's output also exported, so that it has a second reader) and the reference's."""
    rng = np.random.default_rng(11)
    g = random_graph(rng, [(16, 3, 1, 1, 1, 1, 1), (16, 1, 1, 0, 1, 1, 0), (16, 3, 1, 1, 1, 1, 0)], 3, 10,
                     concat=False)
    calib = rng.standard_normal((8, 3, 10, 10)).astype(np.float32)
    q = quantize_graph(g, calib=calib)
    (add,) = [n for n in q.nodes if n.op == "qadd"]
    producers = {o: n for n in q.nodes for o in n.outputs}
    convs = [producers[i] for i in add.inputs if i in producers and producers[i].op == "qconv2d"]
    assert convs, "the qadd must follow a qconv2d"
    fused_path = tmp_path / "fused.dsm"
    write_dsm(q, fused_path)
    unfused = copy.deepcopy(q)
    conv_out = convs[-1].outputs[0]
    unfused.add_value(Value("conv_out_f32", unfused.values[conv_out].shape))
    unfused.add_node("dequantize", "conv_out_dq", [conv_out], ["conv_out_f32"], scale=1.0, zero_point=0)
    unfused.outputs = list(unfused.outputs) + ["conv_out_f32"]
    unfused_path = tmp_path / "unfused.dsm"
    write_dsm(unfused, unfused_path)
    x = rng.standard_normal((2, 3, 10, 10)).astype(np.float32) * 1.5
    want = run_quantized(q, x)
    with Session(fused_path, profile=True) as s:
        s.time_nodes(x, runs=1, warmup=0)
        (row,) = [r for r in s.node_profile() if r["name"] == add.name]
        assert row["ms"] == 0.0, "the qadd was not fused into its qconv2d"
    for isa in isas:
        for threads in (1, 2, 3):
            got = run_native(str(fused_path), x, isa, threads)
            np.testing.assert_array_equal(got, want, err_msg=f"fused at {isa}, {threads} threads")
            old = os.environ.get("DS_FORCE_ISA")
            os.environ["DS_FORCE_ISA"] = isa
            try:
                two = Session(unfused_path, threads=threads).run(x)
            finally:
                if old is None:
                    os.environ.pop("DS_FORCE_ISA", None)
                else:
                    os.environ["DS_FORCE_ISA"] = old
            np.testing.assert_array_equal(two[q.outputs[0]], got, err_msg=f"unfused at {isa}, {threads} threads")
