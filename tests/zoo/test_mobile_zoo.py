"""The mobile / ImageNet-layout zoo models: parameter counts, shapes, tracing, ONNX export."""

import io
import operator

import numpy as np
import pytest
import torch
from torch import nn

from deepslim import zoo
from deepslim.zoo.seg_mobilenet_v2 import fmnist_pixel_labels
from deepslim.zoo.shufflenet_v2 import ChannelShuffle

torch.set_num_threads(1)

# parameters at 1000 classes (seg: 21), 3 input channels. All but seg_mobilenet_v2 are the published
# figures; seg_mobilenet_v2 is our own (MobileNet V2 trunk to 320 channels + 1x1 head).
PARAMS_224 = {
    "squeezenet1_1": 1_235_496,
    "mobilenet_v1": 4_231_976,
    "mobilenet_v2": 3_504_872,
    "shufflenet_v2": 2_278_604,
    "resnet18": 11_689_512,
    "efficientnet_lite0": 4_652_008,
    "mobilenet_v3_small": 2_542_856,
    "seg_mobilenet_v2": 1_818_453,
}
SMALL = [f"{name}_fmnist" for name in PARAMS_224]

# residual additions each architecture has (stride-1 blocks whose channel count is unchanged)
RESIDUAL_ADDS = {
    "squeezenet1_1": 0,
    "mobilenet_v1": 0,
    "mobilenet_v2": 10,  # 1 + 2 + 3 + 2 + 2 over the 24..160 stages
    "shufflenet_v2": 0,  # concatenation, not addition
    "resnet18": 8,  # every basic block
    "efficientnet_lite0": 9,  # 1 + 1 + 2 + 2 + 3 over the 24..192 stages
    "mobilenet_v3_small": 6,
    "seg_mobilenet_v2": 10,
}

ALLOWED_LEAVES = (nn.Conv2d, nn.BatchNorm2d, nn.ReLU, nn.ReLU6, nn.Hardswish, nn.Hardsigmoid,
                  nn.MaxPool2d, nn.AdaptiveAvgPool2d, nn.Linear, nn.Dropout, nn.Flatten, ChannelShuffle)


def n_params(model):
    return sum(p.numel() for p in model.parameters())


def test_names_registered():
    assert set(PARAMS_224) | set(SMALL) <= set(zoo.names())


@pytest.mark.parametrize("name", sorted(PARAMS_224))
def test_parameter_count(name):
    model = zoo.get(name)
    assert n_params(model) == PARAMS_224[name]
    assert model.input_shape == (3, 224, 224)


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")
@pytest.mark.parametrize("name", sorted(PARAMS_224))
def test_224_forward_and_onnx_export(name, tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    model = zoo.get(name).eval()
    x = torch.randn(1, *model.input_shape)
    with torch.no_grad():
        y = model(x)
    expected = (1, 21, 224, 224) if name.startswith("seg_") else (1, 1000)
    assert y.shape == expected

    buf = io.BytesIO()
    torch.onnx.export(model, (x,), buf, opset_version=17, dynamo=False,
                      input_names=["input"], output_names=["output"])
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto)
    sess = ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    (out,) = sess.run(None, {"input": x.numpy()})
    scale = float(y.abs().max())
    np.testing.assert_allclose(out, y.numpy(), rtol=1e-3, atol=1e-4 * scale)


@pytest.mark.parametrize("name", sorted(PARAMS_224))
def test_plain_layers_and_trace(name):
    model = zoo.get(name).eval()
    leaves = [m for m in model.modules() if not list(m.children())]
    assert all(isinstance(m, ALLOWED_LEAVES) for m in leaves), {type(m).__name__ for m in leaves}
    traced = torch.fx.symbolic_trace(model)
    adds = [n for n in traced.graph.nodes if n.op == "call_function" and n.target in (operator.add, torch.add)]
    assert len(adds) == RESIDUAL_ADDS[name]
    # the models are fully convolutional up to a global pool, so a small input checks the trace cheaply
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(traced(x), model(x))


@pytest.mark.parametrize("name", SMALL)
def test_fashion_mnist_variant(name):
    model = zoo.get(name).eval()
    assert model.input_shape == (1, 28, 28)
    x = torch.randn(1, 1, 28, 28)
    with torch.no_grad():
        y = model(x)
        expected = (1, 11, 28, 28) if name.startswith("seg_") else (1, 10)
        assert y.shape == expected
        torch.testing.assert_close(torch.fx.symbolic_trace(model)(x), y)


@pytest.mark.parametrize("name", sorted(PARAMS_224))
def test_num_classes_and_in_channels(name):
    model = zoo.get(name, num_classes=7, in_channels=1).eval()
    assert model.input_shape == (1, 224, 224)
    with torch.no_grad():
        y = model(torch.randn(1, 1, 64, 64))
    assert y.shape[:2] == (1, 7)


def test_fashion_mnist_variant_trains_one_step():
    torch.manual_seed(0)
    model = zoo.get("mobilenet_v2_fmnist").train()
    x, t = torch.randn(8, 1, 28, 28), torch.arange(8) % 10
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = nn.functional.cross_entropy(model(x), t)
    before.backward()
    opt.step()
    assert all(p.grad is not None for p in model.parameters())
    model.eval()
    with torch.no_grad():
        assert torch.isfinite(model(x)).all()


def test_seg_output_stride_and_arbitrary_size():
    with torch.no_grad():
        for os_, fmap in [(16, (6, 8)), (32, (3, 4))]:
            model = zoo.get("seg_mobilenet_v2", output_stride=os_).eval()
            x = torch.randn(1, 3, 96, 128)
            assert model.features(x).shape[2:] == fmap
            assert model(x).shape == (1, 21, 96, 128)
        assert n_params(zoo.get("seg_mobilenet_v2", output_stride=32)) == PARAMS_224["seg_mobilenet_v2"]
    with pytest.raises(ValueError, match="output_stride"):
        zoo.get("seg_mobilenet_v2", output_stride=4)


def test_fmnist_pixel_labels():
    images = np.array([[[0, 200], [40, 10]], [[255, 0], [33, 32]]], dtype=np.uint8)
    targets = fmnist_pixel_labels(images, np.array([3, 0]))
    assert targets.dtype == torch.int64
    assert targets.tolist() == [[[0, 4], [4, 0]], [[1, 0], [1, 0]]]


def test_shufflenet_channel_shuffle_interleaves_groups():
    x = torch.arange(8.0).view(1, 8, 1, 1).expand(1, 8, 2, 3).contiguous()
    y = ChannelShuffle(8, groups=2)(x)
    assert y[0, :, 0, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    assert y.shape == x.shape


def test_mobilenet_v2_segmentation_trunk_dilates_instead_of_striding():
    model = zoo.get("seg_mobilenet_v2", output_stride=16)
    depthwise = [m for m in model.modules() if isinstance(m, nn.Conv2d) and m.groups > 1]
    assert [m.stride[0] for m in depthwise].count(2) == 3  # 4 strided stages in the classifier, one traded
    assert [m.dilation[0] for m in depthwise][-3:] == [2, 2, 2]
