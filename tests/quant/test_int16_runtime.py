"""The native runtime on int16 activations against deepslim.quant.reference.run_quantized, bit for
bit: .dsm files written with activation_bits=16 and with a few int16 layers among u8 ones (i16
qconv2d / qdense from i16 and u8 inputs, requantize, i16 quantize / dequantize, i16 maxpool2d /
global_maxpool / flatten / reshape), at every ISA level this machine runs (DS_FORCE_ISA), with 1 and
2 threads; and the loader's rejection of bad i16 parameters."""

import copy
import os

import numpy as np
import pytest

from deepslim.format import write_dsm
from deepslim.ir import Graph, Value
from deepslim.quant import quantize_graph, run_quantized
from deepslim.runtime import FormatError, Session

from test_quantize import _unchecked_bytes, small_cnn

ISAS = ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni")


def _session(path, isa=None, threads=1):
    old = os.environ.get("DS_FORCE_ISA")
    if isa is not None:
        os.environ["DS_FORCE_ISA"] = isa
    try:
        return Session(str(path), threads=threads)
    finally:
        if old is None:
            os.environ.pop("DS_FORCE_ISA", None)
        else:
            os.environ["DS_FORCE_ISA"] = old


@pytest.fixture(scope="module")
def isas(tmp_path_factory):
    """The levels this build and CPU run (a forced level that is missing fails at session creation)."""
    g = Graph()
    g.add_value(Value("x", (1, 4)))
    g.add_value(Value("y", (1, 4)))
    g.add_node("relu", "r", ["x"], ["y"])
    g.inputs, g.outputs = ["x"], ["y"]
    path = tmp_path_factory.mktemp("tiny") / "tiny.dsm"
    write_dsm(g, path)
    found = []
    for isa in ISAS:
        try:
            _session(path, isa)
            found.append(isa)
        except Exception:
            pass
    assert "scalar" in found
    return found


def conv_graph(rng) -> Graph:
    """x (-1,3,13,13) -> conv 3x3 pad 1 + ReLU -> maxpool 2 -> grouped conv 3x3 stride 2 pads (1,2,2,1)
    -> depthwise 3x3 dilation 2 pad 2 + clip -> conv 1x1 (37 odd channels) -> maxpool 3x3 pad 1 ->
    global maxpool -> reshape -> dense 10, and a wide-K conv branch (K = 70 * 25) from the maxpool output."""
    g = Graph()
    g.add_value(Value("x", (-1, 3, 13, 13)))

    def conv(name, x, cin, cout, k, h_out, **attrs):
        group = attrs.get("group", 1)
        w = rng.standard_normal((cout, cin // group, k, k)) * (1.5 / np.sqrt(cin // group * k * k))
        g.add_constant(f"{name}.w", w.astype(np.float32))
        g.add_constant(f"{name}.b", (rng.standard_normal(cout) * 0.2).astype(np.float32))
        g.add_value(Value(name, (-1, cout, h_out, h_out)))
        g.add_node("conv2d", name, [x, f"{name}.w", f"{name}.b"], [name], **attrs)

    conv("c1", "x", 3, 70, 3, 13, pads=[1, 1, 1, 1], activation=1)
    g.add_value(Value("p1", (-1, 70, 6, 6)))
    g.add_node("maxpool2d", "pool1", ["c1"], ["p1"], kernel=[2, 2])
    conv("c2", "p1", 70, 14, 3, 4, strides=[2, 2], pads=[1, 2, 2, 1], group=7)
    conv("c3", "c2", 14, 14, 3, 4, pads=[2, 2, 2, 2], dilations=[2, 2], group=14, activation=2, act_alpha=-1.0,
         act_beta=2.0)
    conv("c4", "c3", 14, 37, 1, 4)
    g.add_value(Value("p4", (-1, 37, 4, 4)))  # padded positions must not win over negative values
    g.add_node("maxpool2d", "pool4", ["c4"], ["p4"], kernel=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    g.add_value(Value("gm", (-1, 37, 1, 1)))
    g.add_node("global_maxpool", "gmax", ["p4"], ["gm"])
    g.add_value(Value("r", (-1, 37)))
    g.add_node("reshape", "reshape", ["gm"], ["r"], shape=[-1, 37])
    g.add_constant("fc.w", (rng.standard_normal((10, 37)) / 6).astype(np.float32))
    g.add_constant("fc.b", (rng.standard_normal(10) * 0.1).astype(np.float32))
    g.add_value(Value("y", (-1, 10)))
    g.add_node("dense", "fc", ["r", "fc.w", "fc.b"], ["y"])
    conv("wide", "p1", 70, 5, 5, 2)
    g.add_value(Value("wf", (-1, 20)))
    g.add_node("flatten", "wflat", ["wide"], ["wf"])
    g.inputs, g.outputs = ["x"], ["y", "wf"]
    return g


def cnn_logits() -> Graph:
    """small_cnn without its final softmax: only exact float ops (flatten, dequantize) stay, so the
    outputs compare bit for bit (the runtime's softmax may differ from numpy's in the last bit)."""
    g = small_cnn()
    assert g.nodes[-1].op == "softmax"
    g.outputs = [g.nodes.pop().inputs[0]]
    return g


def lenet5_graph():
    torch = pytest.importorskip("torch")
    from deepslim import zoo
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize

    torch.manual_seed(0)
    model = zoo.get("lenet5").eval()
    return optimize(from_torch(model, torch.zeros(1, *model.input_shape)))


def _cases():
    rng = np.random.default_rng(0)
    g = conv_graph(rng)
    x = rng.standard_normal((6, 3, 13, 13)).astype(np.float32)
    yield "convs_int16", g, dict(activation_bits=16), x
    yield "convs_mixed", g, dict(int16=["c2", "c4", "wide"]), x  # i16 <- u8, u8 <- i16, i16 <- i16
    xs = rng.standard_normal((8, 1, 8, 8)).astype(np.float32)
    yield "small_cnn_int16", cnn_logits(), dict(activation_bits=16), xs  # requantize into qadd, qlut
    # the f32 flatten island: fc3 quantizes its f32 input to i16, fc4 to u8
    yield "small_cnn_mixed", cnn_logits(), dict(int16=["conv1", "fc3", "fc5"], keep_fp32=["flat"]), xs
    lenet = lenet5_graph()
    xl = rng.standard_normal((4, 1, 28, 28)).astype(np.float32)
    yield "lenet5_int16", lenet, dict(activation_bits=16), xl
    yield "lenet5_mixed", lenet, dict(int16=["conv2", "fc2"]), xl


CASES = {name: (g, kw, x) for name, g, kw, x in _cases()}


def _outputs(out, graph):
    return out if isinstance(out, dict) else {graph.outputs[0]: out}


@pytest.mark.parametrize("name", list(CASES))
def test_native_int16_matches_the_integer_reference(name, isas, tmp_path):
    graph, kwargs, x = CASES[name]
    calib = np.concatenate([x, x * 1.5])
    q = quantize_graph(graph, calib=calib, **kwargs)
    assert any(v.dtype == "i16" for v in q.values.values())
    path = tmp_path / f"{name}.dsm"
    write_dsm(q, path)
    want = _outputs(run_quantized(q, x), q)
    for isa in isas:
        for threads in (1, 2):
            got = _outputs(_session(path, isa, threads).run(x), q)
            for key in want:
                np.testing.assert_array_equal(np.asarray(got[key]), want[key],
                                              err_msg=f"{name}: output {key}, {isa}, {threads} thread(s)")


BAD_I16 = [  # (how to corrupt the convs_int16 graph, the field the loader's message names)
    (lambda g: g.values["c1.multiplier"].data.__setitem__(0, (1 << 30) + 1), "multiplier"),
    (lambda g: next(n for n in g.nodes if n.name == "x.quantize").attrs.update(zero_point=1), "zero_point"),
    (lambda g: next(n for n in g.nodes if n.name == "c4").attrs.update(act_max=40000), "act_max"),
    (lambda g: g.values["c2.shift"].data.__setitem__(1, -15), "shift"),
]


def test_native_loader_rejects_bad_i16_parameters(tmp_path):
    graph, kwargs, x = CASES["convs_int16"]
    q = quantize_graph(graph, calib=x, **kwargs)
    for i, (corrupt, field) in enumerate(BAD_I16):
        bad = copy.deepcopy(q)
        corrupt(bad)
        (tmp_path / f"bad{i}.dsm").write_bytes(_unchecked_bytes(bad))
        with pytest.raises(FormatError, match=field):
            Session(str(tmp_path / f"bad{i}.dsm"))
