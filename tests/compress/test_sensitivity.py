import numpy as np
import pytest
import torch
from torch import nn

from deepslim.compress.sensitivity import (SensitivityConfig, analyze, choose_fp32, layer_drops,
                                           torch_sensitivity)


def additive_accuracy(costs, reference=90.0):
    """A fake model: each quantized op costs a fixed number of points."""
    return lambda ops: reference - sum(costs.get(op, 0.0) for op in ops)


def test_layer_drops_measure_each_layer_alone():
    acc = additive_accuracy({"a": 0.1, "b": 2.0, "c": 0.5, "add": 0.05})
    assert layer_drops(["a", "b", "c"], acc, 90.0) == pytest.approx({"a": 0.1, "b": 2.0, "c": 0.5})


def test_choose_fp32_keeps_worst_layers_until_within_budget():
    costs = {"a": 0.1, "b": 2.0, "c": 0.5, "d": 0.3}
    drops = dict(costs)
    with_fp32 = lambda kept: 90.0 - sum(v for k, v in costs.items() if k not in kept)
    kept, trail = choose_fp32(drops, with_fp32, 90.0, budget=0.5)
    assert kept == ["b", "c"]  # 2.9 -> 0.9 -> 0.4 points lost
    assert [t[0] for t in trail] == [[], ["b"], ["b", "c"]]
    assert trail[-1][1] == pytest.approx(89.6)
    assert choose_fp32(drops, with_fp32, 90.0, budget=5.0)[0] == []  # already within budget
    assert choose_fp32(drops, with_fp32, 90.0, budget=0.0, max_layers=1)[0] == ["b"]  # capped


def test_analyze_combines_drops_and_choice():
    acc = additive_accuracy({"a": 0.1, "b": 2.0, "add": 0.05})
    report = analyze(["a", "b"], ["a", "b", "add"], acc, 90.0, SensitivityConfig(budget=0.3))
    assert report.keep_fp32 == ["b"]
    assert report.accuracy == pytest.approx(89.85)
    assert "b" in report.table()


def test_config_validation():
    with pytest.raises(ValueError):
        SensitivityConfig(budget=-1)
    with pytest.raises(ValueError):
        SensitivityConfig(max_fp32_layers=-1)
    with pytest.raises(ValueError):
        SensitivityConfig(samples=0)


def test_torch_sensitivity_finds_the_layer_that_int8_breaks():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    with torch.no_grad():
        # one huge weight per output row makes the per-channel scale too coarse for the rest
        model[1].weight[:, 0] = 1000.0
        model[1].weight[:, 1:] = torch.randn(16, 7) * 0.5
    x = torch.randn(400, 1, 1, 8)
    x[:, 0, 0, 0] = 0.0
    y = model(x).argmax(1)
    data = (x.numpy(), y.numpy())
    report = torch_sensitivity(model, x[:100].numpy(), data, SensitivityConfig(budget=1.0, samples=400))
    assert report.reference == 100.0
    assert report.drops["1"] > 10 and report.drops["1"] > report.drops["3"]
    assert report.keep_fp32[0] == "1"
    assert report.accuracy >= 99.0


def test_graph_backend_agrees_on_the_sensitive_layer():
    from deepslim.compress.sensitivity import graph_accuracy_fn
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize

    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    with torch.no_grad():
        model[1].weight[:, 0] = 1000.0
        model[1].weight[:, 1:] = torch.randn(16, 7) * 0.5
    x = torch.randn(300, 1, 1, 8)
    x[:, 0, 0, 0] = 0.0
    data = (x.numpy(), model(x).argmax(1).numpy())
    graph = optimize(from_torch(model, torch.zeros(1, 1, 1, 8)))
    accuracy = graph_accuracy_fn(graph, x[:100].numpy(), data)
    assert accuracy([]) == 100.0  # nothing quantized: the float graph
    report = analyze(["1", "3"], ["1", "3"], accuracy, 100.0, SensitivityConfig(budget=1.0))
    assert report.drops["1"] > 10 and report.keep_fp32 == ["1"] and report.accuracy >= 99.0
