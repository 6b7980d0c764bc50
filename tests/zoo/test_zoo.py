import pytest
import torch
from torch import nn

from deepslim import zoo

EXPECTED = {"lenet300": (266_610, 10), "lenet5": (431_080, 10), "facenet1m": (1_039_744, 848)}


def test_names():
    assert set(EXPECTED) <= set(zoo.names())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parameter_count_and_forward_shape(name):
    params, classes = EXPECTED[name]
    model = zoo.get(name)
    assert sum(p.numel() for p in model.parameters()) == params
    x = torch.zeros(3, *model.input_shape)
    assert model(x).shape == (3, classes)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_only_plain_modules_and_traceable(name):
    model = zoo.get(name)
    allowed = (nn.Conv2d, nn.Linear, nn.ReLU, nn.MaxPool2d, nn.Flatten, nn.Softmax)
    leaves = [m for m in model.modules() if not list(m.children())]
    assert all(isinstance(m, allowed) for m in leaves)
    traced = torch.fx.symbolic_trace(model)
    x = torch.randn(2, *model.input_shape)
    torch.testing.assert_close(traced(x), model(x))


def test_facenet_outputs_probabilities():
    model = zoo.get("facenet1m")
    y = model(torch.randn(2, 1, 88, 88))
    torch.testing.assert_close(y.sum(dim=1), torch.ones(2))


def test_num_classes_and_unknown_name():
    assert zoo.get("lenet5", num_classes=3)(torch.zeros(1, 1, 28, 28)).shape == (1, 3)
    with pytest.raises(KeyError, match="known models"):
        zoo.get("alexnet")
