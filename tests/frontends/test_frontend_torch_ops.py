"""from_torch for the mobile-CNN mappings (ops 8-24): each module or function against PyTorch through the
reference executor, within 1e-4 x max(1, max |reference|)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from deepslim.frontends.errors import UnsupportedModelError
from deepslim.frontends.reference import run_graph
from deepslim.frontends.torch import from_torch
from deepslim.ir.graph import ACTIVATIONS

TOL = 1e-4


def _check(model: nn.Module, x: torch.Tensor, **kw):
    model.eval()
    g = from_torch(model, x, **kw)
    g.validate()
    with torch.no_grad():
        want = model(x).numpy()
    for batch_x in (x, torch.cat([x, x[:1] * 0.5])) if kw.get("dynamic_batch", True) else (x,):
        with torch.no_grad():
            want = model(batch_x).numpy()
        got = run_graph(g, batch_x.numpy())
        assert got.shape == want.shape
        assert np.max(np.abs(got - want)) <= TOL * max(1.0, float(np.max(np.abs(want))))
    return g


class Fn(nn.Module):
    def __init__(self, fn, *modules: nn.Module) -> None:
        super().__init__()
        self.fn = fn
        self.mods = nn.ModuleList(modules)

    def forward(self, x):
        return self.fn(self, x)


@pytest.mark.parametrize("module,kind,alpha,beta", [
    (nn.ReLU6(), "clip", 0.0, 6.0),
    (nn.Hardtanh(-2.0, 0.5), "clip", -2.0, 0.5),
    (nn.LeakyReLU(0.2), "leaky_relu", 0.2, 0.0),
    (nn.Sigmoid(), "sigmoid", 0.0, 0.0),
    (nn.Hardsigmoid(), "hardsigmoid", 1 / 6, 0.5),
    (nn.Hardswish(), "hardswish", 0.0, 0.0),
    (nn.Tanh(), "tanh", 0.0, 0.0),
])
def test_activation_modules(module, kind, alpha, beta):
    g = _check(nn.Sequential(module), torch.randn(2, 3, 5, 5) * 4)
    (node,) = g.nodes
    assert node.op == "activation" and node.attrs["kind"] == ACTIVATIONS[kind]
    assert node.attrs["alpha"] == pytest.approx(alpha) and node.attrs["beta"] == pytest.approx(beta)


@pytest.mark.parametrize("fn", [
    lambda m, x: F.relu6(x), lambda m, x: F.hardtanh(x, -1.5, 2.0), lambda m, x: F.leaky_relu(x, 0.3),
    lambda m, x: torch.sigmoid(x), lambda m, x: x.sigmoid(), lambda m, x: torch.tanh(x), lambda m, x: x.tanh(),
    lambda m, x: F.hardsigmoid(x), lambda m, x: F.hardswish(x), lambda m, x: x.clamp(-1, 2),
    lambda m, x: torch.clamp(x, min=0), lambda m, x: F.relu6(x + 3) / 6,
])
def test_activation_functions(fn):
    g = _check(Fn(fn), torch.randn(2, 3, 4, 5) * 4)
    assert all(n.op in ("activation", "relu", "add", "div") for n in g.nodes)


def test_silu_is_not_in_the_op_set():
    for m in (nn.Sequential(nn.SiLU()), Fn(lambda m, x: F.silu(x))):
        with pytest.raises(UnsupportedModelError, match="not in the op set"):
            from_torch(m, torch.randn(1, 3, 4, 4))


def test_binary_ops_with_tensors_and_constants():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 1)
            self.register_buffer("scale", torch.randn(1, 3, 1, 1))

        def forward(self, x):
            y = self.conv(x)
            a = x + y
            b = torch.sub(a, 0.5) * self.scale
            c = 2.0 - b / (y * y + 1)
            d = torch.mul(c, x.mean((2, 3), keepdim=True))
            return torch.add(d, 3) / 4

    g = _check(Net(), torch.randn(2, 3, 5, 6))
    assert [n.op for n in g.nodes].count("add") == 3
    assert "scale" in g.values and g.values["scale"].shape == (1, 3, 1, 1)
    sub = next(n for n in g.nodes if n.op == "sub" and g.values[n.inputs[0]].is_constant)
    assert g.values[sub.inputs[0]].data.tolist() == [2.0]  # 2 - b keeps the operand order


def test_residual_block_with_batchnorm_folded_and_standalone():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1, bias=False)
            self.bn = nn.BatchNorm2d(4)
            self.bn_in = nn.BatchNorm2d(4)
            self.act = nn.ReLU6()

        def forward(self, x):
            return self.act(self.bn(self.conv(self.bn_in(x))) + x)

    m = Block()
    for bn in (m.bn, m.bn_in):
        with torch.no_grad():
            bn.running_mean.uniform_(-1, 1), bn.running_var.uniform_(0.5, 2), bn.weight.uniform_(0.5, 2)
    g = _check(m, torch.randn(2, 4, 6, 7))
    assert [n.op for n in g.nodes] == ["batchnorm", "conv2d", "add", "activation"]


def test_cat_and_negative_dim():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(2, 3, 1), nn.Conv2d(2, 5, 3, padding=1)

        def forward(self, x):
            y = torch.cat([self.a(x), self.b(x), x], dim=1)
            return torch.cat((y, y), -1)

    g = _check(Net(), torch.randn(2, 2, 4, 5))
    assert [n.attrs["axis"] for n in g.nodes if n.op == "concat"] == [1, -1]


@pytest.mark.parametrize("pool", [nn.AdaptiveAvgPool2d(1), nn.AdaptiveMaxPool2d((1, 1))])
def test_global_pools(pool):
    g = _check(nn.Sequential(pool, nn.Flatten()), torch.randn(2, 3, 5, 7))
    assert g.nodes[0].op == ("global_avgpool" if isinstance(pool, nn.AdaptiveAvgPool2d) else "global_maxpool")


def test_mean_and_functional_adaptive_pool():
    g = _check(Fn(lambda m, x: x.mean([2, 3]) + F.adaptive_avg_pool2d(x, 1).flatten(1)), torch.randn(2, 3, 5, 4))
    assert [n.op for n in g.nodes] == ["global_avgpool", "reshape", "global_avgpool", "flatten", "add"]
    with pytest.raises(UnsupportedModelError, match="mean over dims"):
        from_torch(Fn(lambda m, x: x.mean(1)), torch.randn(1, 3, 4, 4))


def test_view_permute_transpose_and_general_reshape():
    def fn(m, x):  # (N, 6, 4, 5)
        y = x.permute(0, 2, 3, 1).contiguous()  # (N, 4, 5, 6)
        y = y.reshape(y.size(0), 20, 6).transpose(1, 2)  # (N, 6, 20)
        return torch.transpose(y.view(-1, 3, 2, 20), 2, 3)

    g = _check(Fn(fn), torch.randn(2, 6, 4, 5))
    assert [n.op for n in g.nodes] == ["transpose", "reshape", "transpose", "reshape", "transpose"]
    assert g.nodes[1].attrs["shape"] == [0, 20, 6]
    assert g.nodes[3].attrs["shape"] == [0, 3, 2, 20]


def test_channel_shuffle_pattern_and_module():
    class Shuffle(nn.Module):
        def forward(self, x):
            n, c, h, w = x.size()
            x = x.view(n, 3, c // 3, h, w)
            return torch.transpose(x, 1, 2).contiguous().view(n, c, h, w)

    g = _check(Shuffle(), torch.randn(2, 12, 3, 5))
    assert [(n.op, n.attrs) for n in g.nodes] == [("channel_shuffle", {"group": 3})]
    assert g.nodes[0].inputs == ["input"] and g.nodes[0].outputs == ["output"]
    assert set(g.values) == {"input", "output"}
    g = _check(nn.Sequential(nn.Conv2d(4, 8, 1), nn.ChannelShuffle(2)), torch.randn(2, 4, 3, 3))
    assert g.nodes[1].op == "channel_shuffle"


def test_channel_split_by_slicing():
    class Split(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 3, 1)

        def forward(self, x):
            return x[..., 1:]

    with pytest.raises(UnsupportedModelError, match="Ellipsis"):
        from_torch(Split(), torch.randn(2, 6, 4, 4))

    class Split2(Split):
        def forward(self, x):
            return torch.cat([x[:, :3], self.conv(x[:, 3:]), x[:, -2:]], 1)[:, :, 1:-1, -3::1]

    g = _check(Split2(), torch.randn(2, 6, 4, 5))
    slices = [n.attrs for n in g.nodes if n.op == "slice"]
    assert slices == [{"axes": [1], "starts": [0], "ends": [3]}, {"axes": [1], "starts": [3], "ends": [6]},
                      {"axes": [1], "starts": [4], "ends": [6]}, {"axes": [2, 3], "starts": [1, 2], "ends": [3, 5]}]


@pytest.mark.parametrize("mode,align,size,scale", [
    ("nearest", None, None, 2),
    ("nearest", None, (7, 3), None),
    ("nearest-exact", None, (9, 11), None),
    ("bilinear", False, (9, 11), None),
    ("bilinear", True, (9, 11), None),
    ("bilinear", False, None, 2),
    ("bilinear", True, (3, 2), None),
])
def test_interpolate(mode, align, size, scale):
    fn = lambda m, x: F.interpolate(x, size=size, scale_factor=scale, mode=mode, align_corners=align)  # noqa: E731
    g = _check(Fn(fn), torch.randn(2, 3, 5, 6))
    assert g.nodes[0].op == "resize"
    _check(nn.Sequential(nn.Upsample(size=size, scale_factor=scale, mode=mode, align_corners=align)), torch.randn(1, 2, 5, 6))


def test_interpolate_fractional_scale_is_an_error():
    with pytest.raises(UnsupportedModelError, match="scale_factor"):
        from_torch(Fn(lambda m, x: F.interpolate(x, scale_factor=1.5)), torch.randn(1, 2, 5, 5))


@pytest.mark.parametrize("stride,padding,output_padding,groups,dilation,bias", [
    (2, 1, 1, 1, 1, True), (2, 0, 0, 2, 1, False), (3, 2, 1, 4, 2, True), (1, 0, 0, 1, 1, True),
])
def test_conv_transpose2d(stride, padding, output_padding, groups, dilation, bias):
    m = nn.Sequential(nn.ConvTranspose2d(4, 8, 3, stride, padding, output_padding, groups, bias, dilation),
                      nn.BatchNorm2d(8))
    with torch.no_grad():
        m[1].running_mean.uniform_(-1, 1), m[1].running_var.uniform_(0.5, 2)
    g = _check(m, torch.randn(2, 4, 5, 6))
    assert [n.op for n in g.nodes] == ["conv_transpose2d", "batchnorm"]
    assert g.nodes[0].attrs["output_padding"] == [output_padding] * 2


def test_lrn():
    g = _check(nn.Sequential(nn.LocalResponseNorm(5, alpha=1e-2, beta=0.7, k=2.0)), torch.randn(2, 7, 3, 4) * 3)
    assert g.nodes[0].attrs == {"size": 5, "alpha": pytest.approx(1e-2), "beta": pytest.approx(0.7), "bias": 2.0}
    _check(Fn(lambda m, x: F.local_response_norm(x, 3)), torch.randn(2, 7, 3, 4))
    with pytest.raises(UnsupportedModelError, match="even size"):
        from_torch(nn.Sequential(nn.LocalResponseNorm(4)), torch.randn(1, 7, 3, 4))


@pytest.mark.parametrize("module", [
    nn.ZeroPad2d((1, 2, 0, 3)), nn.ConstantPad2d(2, 1.5), nn.ReflectionPad2d((2, 1, 1, 2)),
    nn.ReplicationPad2d(3),
])
def test_pad_modules(module):
    g = _check(nn.Sequential(module), torch.randn(2, 3, 4, 5))
    assert g.nodes[0].op == "pad"


def test_pad_function():
    g = _check(Fn(lambda m, x: F.pad(x, (1, 2, 3, 0), mode="reflect")), torch.randn(2, 3, 5, 4))
    assert g.nodes[0].attrs["pads"] == [0, 0, 3, 1, 0, 0, 0, 2]
    _check(Fn(lambda m, x: F.pad(x, (1, 1), value=-2.0)), torch.randn(2, 3, 5, 4))
    with pytest.raises(UnsupportedModelError, match="circular"):
        from_torch(Fn(lambda m, x: F.pad(x, (1, 1, 1, 1), mode="circular")), torch.randn(1, 3, 5, 4))


def test_dropout_and_identity_removed():
    m = nn.Sequential(nn.Conv2d(2, 3, 1), nn.Dropout2d(0.3), nn.Identity(), nn.Hardswish())
    g = _check(m, torch.randn(2, 2, 3, 3))
    assert [n.op for n in g.nodes] == ["conv2d", "activation"]


ZOO = ["squeezenet1_1_fmnist", "mobilenet_v1_fmnist", "mobilenet_v2_fmnist", "shufflenet_v2_fmnist",
       "resnet18_fmnist", "efficientnet_lite0_fmnist", "mobilenet_v3_small_fmnist", "seg_mobilenet_v2_fmnist"]


@pytest.mark.parametrize("name", ZOO)
def test_zoo_models_convert_and_match(name):
    zoo = pytest.importorskip("deepslim.zoo")
    if name not in zoo.names():
        pytest.skip(f"{name} is not in the zoo yet")
    from deepslim.analyze import analyze, infer_shapes, totals

    torch.manual_seed(0)
    model = zoo.get(name).eval()
    for mod in model.modules():
        if isinstance(mod, nn.BatchNorm2d):
            with torch.no_grad():
                mod.running_mean.uniform_(-0.2, 0.2), mod.running_var.uniform_(0.5, 1.5)
    g = _check(model, torch.randn(1, *model.input_shape))
    assert totals(analyze(g)).params <= sum(p.numel() for p in model.parameters())
    shapes = infer_shapes(g, batch=-1)
    assert all(shapes[v] == g.values[v].shape for v in shapes)
