"""from_torch: structure, shapes and numerics against PyTorch, through the numpy reference executor."""

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from deepslim.frontends.errors import UnsupportedModelError
from deepslim.frontends.reference import run_graph
from deepslim.frontends.torch import from_torch
from deepslim.ir.graph import Encoding

TOL = 1e-4


class LeNet5(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.pool2 = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(800, 500)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(500, 10)

    def forward(self, x):
        x = self.pool2(self.conv2(self.pool1(self.conv1(x))))
        return self.fc2(self.relu(self.fc1(self.flatten(x))))


class FunctionalNet(nn.Module):
    """The classic PyTorch-examples style: functional relu/pool, view(x.size(0), -1), F.softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, 8, 3, bias=False)
        self.fc = nn.Linear(8 * 3 * 3, 5)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.avg_pool2d(torch.relu(self.conv2(x)), 2, ceil_mode=True)
        x = x.view(x.size(0), -1)
        x = self.drop(x)
        return F.softmax(self.fc(x), dim=1)


def _check(model: nn.Module, x: torch.Tensor, **kw):
    model.eval()
    g = from_torch(model, x, **kw)
    with torch.no_grad():
        want = model(x).numpy()
    got = run_graph(g, x.numpy())
    assert got.shape == want.shape
    assert np.max(np.abs(got - want)) <= TOL
    return g


def test_lenet5_structure_and_numerics():
    torch.manual_seed(0)
    model = LeNet5()
    g = _check(model, torch.randn(2, 1, 28, 28))
    assert [n.op for n in g.nodes] == ["conv2d", "maxpool2d", "conv2d", "maxpool2d", "flatten", "dense", "relu", "dense"]
    assert [n.name for n in g.nodes] == ["conv1", "pool1", "conv2", "pool2", "flatten", "fc1", "relu", "fc2"]
    assert g.inputs == ["input"] and g.outputs == ["output"]
    assert g.values["input"].shape == (-1, 1, 28, 28)
    assert g.values["conv1"].shape == (-1, 20, 24, 24)
    assert g.values["flatten"].shape == (-1, 800)
    assert g.values["output"].shape == (-1, 10)
    assert g.nodes[-1].outputs == ["output"]
    assert g.nodes[0].inputs == ["input", "conv1.weight", "conv1.bias"]
    params = dict(model.named_parameters())
    assert sorted(v.name for v in g.constants()) == sorted(params)
    for v in g.constants():
        np.testing.assert_array_equal(v.data, params[v.name].detach().numpy())
        assert v.encoding.layout == "dense" and v.encoding.codebook is None
    assert g.nodes[0].attrs == {"strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1], "group": 1, "activation": 0}
    assert g.nodes[1].attrs == {"kernel": [2, 2], "strides": [2, 2], "pads": [0, 0, 0, 0], "ceil_mode": 0}


def test_static_batch_and_names():
    g = from_torch(LeNet5(), torch.randn(3, 1, 28, 28), dynamic_batch=False, input_name="img", output_name="logits")
    assert g.inputs == ["img"] and g.outputs == ["logits"]
    assert g.values["img"].shape == (3, 1, 28, 28)
    assert g.values["logits"].shape == (3, 10)


def test_functional_style_net():
    torch.manual_seed(1)
    g = _check(FunctionalNet(), torch.randn(2, 3, 15, 15))
    assert [n.op for n in g.nodes] == [
        "conv2d", "relu", "maxpool2d", "conv2d", "relu", "avgpool2d", "flatten", "dense", "softmax"
    ]
    conv2 = g.nodes[3]
    assert conv2.inputs[1:] == ["conv2.weight"]  # no bias
    assert g.nodes[5].attrs["ceil_mode"] == 1 and g.nodes[5].attrs["count_include_pad"] == 1
    assert g.nodes[6].attrs == {"axis": 1}
    assert g.nodes[8].attrs == {"axis": 1}


@pytest.mark.parametrize(
    "conv",
    [
        nn.Conv2d(4, 6, 3, stride=2, padding=1),
        nn.Conv2d(4, 6, (3, 5), stride=(1, 2), padding=(2, 1)),
        nn.Conv2d(4, 6, 3, padding="same", dilation=2),
        nn.Conv2d(4, 6, 4, padding="same"),  # even kernel: PyTorch pads one more at the end
        nn.Conv2d(4, 6, 3, padding="valid", groups=2),
        nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False),  # depthwise
        nn.Conv2d(4, 8, (2, 3), stride=(2, 1), dilation=(2, 1), groups=2),
    ],
)
def test_conv_variants(conv):
    torch.manual_seed(2)
    g = _check(nn.Sequential(conv), torch.randn(2, 4, 11, 12))
    node = g.nodes[0]
    assert node.attrs["group"] == conv.groups
    assert node.attrs["dilations"] == list(conv.dilation)


def test_same_padding_even_kernel_is_asymmetric():
    g = from_torch(nn.Sequential(nn.Conv2d(1, 1, 4, padding="same")), torch.randn(1, 1, 8, 8))
    assert g.nodes[0].attrs["pads"] == [1, 1, 2, 2]


@pytest.mark.parametrize(
    "pool",
    [
        nn.MaxPool2d(3, stride=2, padding=1),
        nn.MaxPool2d(3, stride=2, ceil_mode=True),
        nn.MaxPool2d((2, 3), stride=(2, 1), padding=(1, 1), ceil_mode=True),
        nn.AvgPool2d(3, stride=2, padding=1),
        nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False),
        nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True),
        nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        nn.AvgPool2d(2, ceil_mode=True),
        nn.AdaptiveAvgPool2d(1),
        nn.AdaptiveMaxPool2d((2, 5)),
    ],
)
def test_pool_variants(pool):
    torch.manual_seed(3)
    _check(nn.Sequential(pool), torch.randn(2, 3, 10, 10))


def test_flatten_forms():
    class Forms(nn.Module):
        def forward(self, x):
            a = torch.flatten(x, 2)  # (N, C, H*W)
            b = a.reshape(a.shape[0], -1)
            c = b.view(-1, b.size(1))
            return torch.softmax(c.flatten(1), -1)

    g = _check(Forms(), torch.randn(2, 3, 4, 5))
    assert [(n.op, n.attrs) for n in g.nodes] == [
        ("flatten", {"axis": 2}), ("flatten", {"axis": 1}), ("flatten", {"axis": 1}),
        ("flatten", {"axis": 1}), ("softmax", {"axis": -1}),
    ]


def test_dropout_and_identity_removed():
    torch.manual_seed(4)
    m = nn.Sequential(nn.Linear(6, 5), nn.Dropout(0.3), nn.Identity(), nn.ReLU(), nn.Dropout(0.9), nn.Linear(5, 2))
    m.train()
    g = from_torch(m, torch.randn(2, 6))
    assert [n.op for n in g.nodes] == ["dense", "relu", "dense"]
    assert m.training  # flags restored
    m.eval()
    x = torch.randn(4, 6)
    np.testing.assert_allclose(run_graph(g, x.numpy()), m(x).detach().numpy(), atol=TOL)


def _randomize_bn(bn: nn.Module) -> None:
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)


def test_batchnorm_folded_into_conv_and_linear():
    torch.manual_seed(5)
    m = nn.Sequential(
        nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 4, 3), nn.BatchNorm2d(4),
        nn.Flatten(), nn.Linear(4 * 6 * 6, 7), nn.BatchNorm1d(7),
    )
    for bn in (m[1], m[4], m[7]):
        _randomize_bn(bn)
    g = _check(m, torch.randn(3, 3, 10, 10))
    assert [n.op for n in g.nodes] == ["conv2d", "relu", "conv2d", "flatten", "dense"]
    assert g.nodes[0].inputs == ["input", "0.weight", "0.bias"]  # bias created by folding
    # folding by hand for the first conv
    bn = m[1]
    scale = (bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach().numpy()
    np.testing.assert_allclose(g.values["0.weight"].data, m[0].weight.detach().numpy() * scale[:, None, None, None], rtol=1e-6)
    np.testing.assert_allclose(
        g.values["0.bias"].data, (bn.bias - bn.running_mean * bn.weight / torch.sqrt(bn.running_var + bn.eps)).detach().numpy(), rtol=1e-5, atol=1e-6
    )


def test_batchnorm_not_after_a_conv_is_a_batchnorm_op():
    torch.manual_seed(5)
    m = nn.Sequential(nn.Conv2d(3, 4, 1), nn.ReLU(), nn.BatchNorm2d(4))
    _randomize_bn(m[2])
    g = _check(m, torch.randn(2, 3, 4, 4))
    assert [n.op for n in g.nodes] == ["conv2d", "relu", "batchnorm"]
    assert g.nodes[2].inputs[1:] == ["2.weight", "2.bias", "2.running_mean", "2.running_var"]
    assert g.nodes[2].attrs == {"epsilon": 1e-5}


def test_encodings_by_parameter_name():
    enc = Encoding(layout="sparse_rel", index_bits=4)
    g = from_torch(LeNet5(), torch.randn(1, 1, 28, 28), encodings={"fc1.weight": enc})
    assert g.values["fc1.weight"].encoding is enc
    assert g.values["fc2.weight"].encoding.layout == "dense"
    with pytest.raises(ValueError, match="fc3.weight"):
        from_torch(LeNet5(), torch.randn(1, 1, 28, 28), encodings={"fc3.weight": enc})


def test_codebook_on_folded_weight_is_an_error():
    m = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2))
    enc = Encoding(codebook=np.array([0.0, 1.0]), cluster_bits=1)
    with pytest.raises(ValueError, match="BatchNorm folding"):
        from_torch(m, torch.randn(1, 1, 5, 5), encodings={"0.weight": enc})


def test_unsupported_module_names_node_and_type():
    m = nn.Sequential(nn.Linear(4, 4), nn.Softplus())
    with pytest.raises(UnsupportedModelError) as e:
        from_torch(m, torch.randn(1, 4))
    msg = str(e.value)
    assert "'1'" in msg and "Softplus" in msg and "Conv2d" in msg  # node, type, what is supported


def test_unsupported_function_and_padding_mode():
    class Erf(nn.Module):
        def forward(self, x):
            return torch.erf(x)

    with pytest.raises(UnsupportedModelError, match="erf"):
        from_torch(Erf(), torch.randn(1, 4))
    with pytest.raises(UnsupportedModelError, match="padding_mode='reflect'"):
        from_torch(nn.Sequential(nn.Conv2d(1, 1, 3, padding=1, padding_mode="reflect")), torch.randn(1, 1, 5, 5))
    with pytest.raises(UnsupportedModelError, match="dilation"):
        from_torch(nn.Sequential(nn.MaxPool2d(2, dilation=2)), torch.randn(1, 1, 6, 6))


def test_non_flatten_reshape_and_hard_coded_batch():
    class Split(nn.Module):
        def forward(self, x):
            return x.view(x.size(0), 2, -1)

    g = _check(Split(), torch.randn(2, 4, 3))
    assert [(n.op, n.attrs) for n in g.nodes] == [("reshape", {"shape": [0, 2, 6]})]

    class Fixed(nn.Module):
        def forward(self, x):
            return torch.relu(x.view(1, -1))

    with pytest.raises(UnsupportedModelError, match="dynamic_batch=False"):
        from_torch(Fixed(), torch.randn(1, 4, 3))
    g = from_torch(Fixed(), torch.randn(1, 4, 3), dynamic_batch=False)
    assert g.values["output"].shape == (1, 12)


def test_untraceable_model_mentions_torch_export():
    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(UnsupportedModelError, match="torch.export"):
        from_torch(Branchy(), torch.randn(1, 3))


def test_shared_module_called_twice():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(5, 5)

        def forward(self, x):
            return self.fc(torch.relu(self.fc(x)))

    g = _check(Twice(), torch.randn(2, 5))
    assert [n.name for n in g.nodes] == ["fc", "relu", "fc_1"] and g.nodes[2].outputs == ["output"]
    assert g.nodes[0].inputs[1:] == g.nodes[2].inputs[1:] == ["fc.weight", "fc.bias"]


def test_optimized_graph_matches_torch():
    from deepslim.ir.passes import optimize

    torch.manual_seed(6)
    model = FunctionalNet().eval()
    x = torch.randn(3, 3, 15, 15)
    g = optimize(from_torch(model, x))
    g.validate()
    assert [(n.op, n.attrs.get("activation", 0)) for n in g.nodes] == [
        ("conv2d", 1), ("maxpool2d", 0), ("conv2d", 1), ("avgpool2d", 0), ("flatten", 0), ("dense", 0), ("softmax", 0)
    ]
    with torch.no_grad():
        np.testing.assert_allclose(run_graph(g, x.numpy()), model(x).numpy(), atol=TOL)


@pytest.mark.parametrize("name", ["lenet300", "lenet5", "facenet1m"])
def test_zoo_models_convert_and_analyze(name):
    zoo = pytest.importorskip("deepslim.zoo")
    from deepslim.analyze import analyze, infer_shapes, totals

    torch.manual_seed(7)
    model = zoo.get(name).eval()
    x = torch.randn(2, *model.input_shape)
    g = _check(model, x)
    assert totals(analyze(g)).params == sum(p.numel() for p in model.parameters())
    shapes = infer_shapes(g, batch=-1)
    assert all(shapes[name] == g.values[name].shape for name in shapes)


def test_shared_conv_folded_differently_is_an_error():
    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 2, 1)
            self.bn = nn.BatchNorm2d(2)

        def forward(self, x):
            return self.conv(self.bn(self.conv(x)))  # folded at the first call only

    m = Shared()
    _randomize_bn(m.bn)
    with pytest.raises(UnsupportedModelError, match="conv.weight"):
        from_torch(m, torch.randn(1, 2, 3, 3))
