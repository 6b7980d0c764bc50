"""from_onnx on whole models: small nn.Modules and zoo models exported by torch.onnx.export
(TorchScript exporter, opsets 13 and 17, dynamic batch), and ONNX files from other exporters that
ship with the onnx package (Caffe2-converted model-zoo networks, old PyTorch single-op tests)."""

from __future__ import annotations

import io
import os

import numpy as np
import onnx
import pytest

from deepslim.frontends.onnx import from_onnx
from deepslim.frontends.reference import run_graph
from deepslim.ir.passes import optimize

ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

RTOL = 1e-4  # |ref - onnxruntime| <= RTOL * max(1, max|onnxruntime|)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= RTOL * max(1.0, float(np.max(np.abs(want))))


def export(model: nn.Module, x: torch.Tensor, opset: int, dynamic_batch: bool = True) -> bytes:
    f = io.BytesIO()
    torch.onnx.export(
        model.eval(), x, f, dynamo=False, opset_version=opset, input_names=["x"], output_names=["y"],
        dynamic_axes={"x": {0: "N"}, "y": {0: "N"}} if dynamic_batch else None,
    )
    return f.getvalue()


def check_export(model: nn.Module, shape: tuple[int, ...], opset: int, batch: int = 2, **kw):
    torch.manual_seed(0)
    data = export(model, torch.randn(1, *shape), opset, **kw)
    graph = from_onnx(data)
    x = np.random.default_rng(1).standard_normal((batch, *shape)).astype(np.float32)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    _close(run_graph(graph, x), want)
    _close(run_graph(optimize(graph), x), want)
    return graph


class Classifier(nn.Module):
    """conv-bn-relu6, ceil-mode pool, depthwise + hardswish, global pool, view(size(0), -1), linear, softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)
        self.pw = nn.Conv2d(8, 16, 1)
        self.fc = nn.Linear(16, 10)
        self.drop = nn.Dropout(0.2)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        x = F.relu6(self.bn(self.conv(x)))
        x = F.max_pool2d(x, 3, 2, ceil_mode=True)
        x = F.hardswish(self.pw(self.dw(x)))
        x = F.avg_pool2d(x, 2, padding=1, count_include_pad=False)
        x = F.adaptive_avg_pool2d(x, 1)
        x = x.view(x.size(0), -1)
        return F.softmax(self.fc(self.drop(x)), dim=1)


class Features(nn.Module):
    """Residual add, concat, channel shuffle by view/transpose/view, chunk, interpolate (nearest and
    bilinear, scale and size), transposed conv, reflect pad, leaky relu / sigmoid / hardsigmoid / tanh,
    an SE-style mean and multiply."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.se = nn.Conv2d(8, 8, 1)
        self.head = nn.Conv2d(12, 4, 1)

    def forward(self, x):
        a = F.leaky_relu(self.c1(x), 0.1)
        b = torch.tanh(self.c2(a)) + a
        y = torch.cat([a, b], dim=1)
        n, c, h, w = y.shape
        y = y.view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        y = F.max_pool2d(y, 2)
        y = F.hardsigmoid(self.up(y))
        s = torch.sigmoid(self.se(y.mean((2, 3), keepdim=True)))
        y = y * s
        left, right = y.chunk(2, dim=1)
        z = torch.cat([F.interpolate(left, scale_factor=2, mode="nearest"),
                       F.interpolate(right, size=(2 * h, 2 * w), mode="bilinear", align_corners=False),
                       F.interpolate(right, size=(2 * h, 2 * w), mode="bilinear", align_corners=True)], dim=1)
        z = F.pad(z, (1, 2, 0, 1), mode="reflect")
        return self.head(z)


@pytest.mark.parametrize("opset", [13, 17])
def test_classifier_export(opset):
    g = check_export(Classifier(), (3, 16, 16), opset, batch=3)
    assert g.values["x"].shape == (-1, 3, 16, 16) and g.values["y"].shape == (-1, 10)
    assert "reshape" in [n.op for n in g.nodes] or "flatten" in [n.op for n in g.nodes]


@pytest.mark.parametrize("opset", [13, 17])
def test_features_export(opset):
    g = check_export(Features(), (3, 8, 6), opset)
    used = {n.op for n in g.nodes}
    assert {"conv_transpose2d", "resize", "pad", "concat", "transpose", "slice", "mul", "add"} <= used
    assert "channel_shuffle" in {n.op for n in optimize(g).nodes}  # view/transpose/view recognised


def test_static_batch_export():
    g = check_export(Classifier(), (3, 16, 16), 13, batch=1, dynamic_batch=False)
    assert g.values["x"].shape == (1, 3, 16, 16)


def test_zoo_mobilenet_v2_224():
    from deepslim import zoo

    torch.manual_seed(0)
    net = zoo.get("mobilenet_v2").eval()
    assert tuple(net.input_shape) == (3, 224, 224)
    g = check_export(net, tuple(net.input_shape), 13, batch=1)
    assert g.values["y"].shape == (-1, 1000)


def test_zoo_shufflenet_v2_fmnist():
    from deepslim import zoo

    net = zoo.get("shufflenet_v2_fmnist").eval()
    g = check_export(net, tuple(net.input_shape), 17)
    assert "slice" in {n.op for n in g.nodes}


# --------------------------------------------------------------------------------------------------
# ONNX files shipped with the onnx package, from other exporters

DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def _sample(path: str) -> str:
    full = os.path.join(DATA, path)
    if not os.path.exists(full):
        pytest.skip(f"{path} is not in this onnx package")
    return full


def _check_file(path: str):
    graph = from_onnx(path)
    model = onnx.load(path)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in graph.inputs:
            shape = [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]
            feeds[vi.name] = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = run_graph(graph, feeds)
    got = got if isinstance(got, dict) else {graph.outputs[0]: got}
    for o, w in zip(model.graph.output, want):
        _close(got[o.name], w)
    return graph


@pytest.mark.parametrize("name", ["light_squeezenet", "light_shufflenet", "light_inception_v1"])
def test_caffe2_converted_model_zoo(name):
    # opset 9 (converted to 13 first); weights built by ConstantOfShape, folded at convert time
    g = _check_file(_sample(f"light/{name}.onnx"))
    ops = {n.op for n in g.nodes}
    assert "conv2d" in ops and "softmax" in ops
    if name == "light_shufflenet":
        assert "transpose" in ops  # the reshape-transpose-reshape channel shuffle


@pytest.mark.parametrize("name", [
    "test_PixelShuffle", "test_MaxPool2d_stride_padding_dilation", "test_Conv2d_depthwise_padded",
    "test_ConvTranspose2d", "test_ReflectionPad2d", "test_Softmax",
])
def test_old_pytorch_exports(name):
    # some are opset 6 files: converted by onnx.version_converter only when >= 7
    model = onnx.load(_sample(f"pytorch-converted/{name}/model.onnx"))
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if opset < 7:
        from deepslim.frontends.errors import UnsupportedModelError

        with pytest.raises(UnsupportedModelError, match=f"opset {opset}; supported opsets are 7 to 21"):
            from_onnx(model)
        return
    _check_file(_sample(f"pytorch-converted/{name}/model.onnx"))
