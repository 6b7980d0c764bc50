import math

import numpy as np
import pytest
import torch
from torch import nn

from deepslim.compress.fakequant import act_qparams, quantize_weight
from deepslim.compress.qat import (FreezeSchedule, QATConfig, QATLayer, act_quantizers, calibrate, check_ranges,
                                   complete_ranges, convert, prepare_qat, qat_layers,
                                   quantization_aware_training, set_quantized)


class ConvBnNet(nn.Module):
    input_shape = (2, 6, 6)

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3, padding=1, bias=True)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU6()
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(4)
        self.pool = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(36, 3)

    def forward(self, x):
        y = self.relu(self.bn(self.conv(x)))
        y = y + self.bn2(self.conv2(y))
        return self.fc(self.flatten(self.pool(y)))


def _net(seed=0):
    torch.manual_seed(seed)
    net = ConvBnNet()
    with torch.no_grad():
        for bn in (net.bn, net.bn2):
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
            bn.running_mean.uniform_(-0.2, 0.2)
            bn.running_var.uniform_(0.5, 2.0)
    return net


def test_bn_folding_matches_conv_bn_in_eval_and_training():
    net = _net()
    qm = prepare_qat(net)
    set_quantized(qm, [])  # float: only the folding is under test
    layer = qat_layers(qm)["conv"]
    x = torch.randn(5, 2, 6, 6)
    ref = nn.Sequential(net.conv, net.bn).eval()
    layer.eval()
    assert torch.allclose(layer(x), ref(x), atol=1e-5)
    # training with live statistics: batch normalisation and the same running-statistics update
    ref_train = nn.Sequential(*[m for m in [torch.nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4)]])
    ref_train.load_state_dict(ref.state_dict())
    ref_train.train()
    layer.train()
    assert torch.allclose(layer(x), ref_train(x), atol=1e-5)
    assert torch.allclose(layer.bn.running_mean, ref_train[1].running_mean, atol=1e-6)
    assert torch.allclose(layer.bn.running_var, ref_train[1].running_var, atol=1e-6)
    assert int(layer.bn.num_batches_tracked) == 1
    # frozen BN: running statistics in training mode too, and they no longer move
    layer.bn_frozen.fill_(True)
    before = layer.bn.running_mean.clone()
    ref_train.eval()
    assert torch.allclose(layer(x), ref_train(x), atol=1e-5)
    assert torch.equal(layer.bn.running_mean, before)


def test_bn_folded_weight_is_quantized_per_channel():
    net = _net()
    qm = prepare_qat(net)
    layer = qat_layers(qm)["conv"]
    layer.eval()
    x = torch.randn(2, 2, 6, 6)
    w, b = layer.folded()
    q, scale = quantize_weight(w.detach())
    expected = nn.functional.conv2d(x, (q * scale.reshape(-1, 1, 1, 1)).float(), b, padding=1)
    assert torch.allclose(layer(x), expected, atol=1e-6)
    # the float32 folding equals the front end's (float64) one within float rounding
    s = (net.bn.weight / torch.sqrt(net.bn.running_var + net.bn.eps)).detach().double()
    w64 = net.conv.weight.detach().double() * s.reshape(-1, 1, 1, 1)
    assert torch.allclose(w.detach().double(), w64, rtol=1e-6)


def test_activation_points_are_the_ir_values():
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize

    net = _net().eval()
    qm = prepare_qat(net)
    calibrate(qm, torch.randn(16, 2, 6, 6).numpy())
    points = {fq.value_name: (fq.producer, fq.consumers) for fq in act_quantizers(qm)}
    # conv+bn+relu6 is one value named after the ReLU6; conv2+bn2 after conv2; the add; pool and
    # flatten pass u8 through and get no quantizer of their own
    assert points == {"input": (None, ("conv",)), "relu": ("conv", ("conv2", "add")),
                      "conv2": ("conv2", ("add",)), "add": ("add", ("fc",)), "output": ("fc", ())}
    ranges = convert(qm)
    graph = optimize(from_torch(net, torch.zeros(1, 2, 6, 6)))
    check_ranges(graph, ranges)
    full = complete_ranges(graph, ranges)
    assert full["pool"] == full["flatten"] == ranges["add"]
    assert set(full) == {n for n, v in graph.values.items() if not v.is_constant}
    with pytest.raises(ValueError, match="nowhere"):
        check_ranges(graph, {"nowhere": (0.0, 1.0)})


def test_fake_quantized_model_matches_an_integer_simulation():
    # a one-layer model: quantize input, int8 conv with i32 accumulation, requantize output
    torch.manual_seed(3)
    net = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU()).eval()
    net.input_shape = (1, 5, 5)
    qm = prepare_qat(net)
    x = torch.randn(4, 1, 5, 5)
    calibrate(qm, x.numpy())
    y = qm.eval()(x)
    (fin, fout) = act_quantizers(qm)
    sx, zx = fin.qparams()
    sy, zy = fout.qparams()
    assert zy == 0  # after ReLU
    qx = torch.clamp(torch.round(x / sx) + zx, 0, 255)
    qw, sw = quantize_weight(net[0].weight.detach())
    acc = nn.functional.conv2d(qx - zx, qw).double()  # exact integers
    real = acc * (sx * sw.double()).reshape(1, -1, 1, 1) + net[0].bias.detach().double().reshape(1, -1, 1, 1)
    qy = torch.clamp(torch.round(real / sy) + zy, 0, 255)
    expected = ((qy - zy) * sy).float()
    # equal up to a rounding step where float32 and float64 disagree at a half
    assert (y - expected).abs().max() <= sy * 1.001
    assert (y == expected).float().mean() > 0.95


def test_freeze_schedule_stops_observers_then_bn_at_the_configured_steps():
    net = _net()
    qm = prepare_qat(net, QATConfig(averaging=0.5))
    qm.train()
    fq = act_quantizers(qm)[0]
    layer = qat_layers(qm)["conv"]
    schedule = FreezeSchedule(observer_step=2, bn_step=3)
    seen = []
    for step in range(5):
        qm(torch.randn(8, 2, 6, 6) * (step + 1))
        seen.append((fq.observer.range(), layer.bn.running_mean.clone()))
        schedule(qm)
    assert seen[0][0] != seen[1][0]
    assert seen[1][0] == seen[2][0] == seen[3][0] == seen[4][0]  # after step 2: no update
    assert not torch.equal(seen[1][1], seen[2][1])
    assert torch.equal(seen[2][1], seen[3][1]) and torch.equal(seen[3][1], seen[4][1])  # after step 3
    assert bool(fq.frozen) and bool(layer.bn_frozen)


def test_keep_fp32_and_set_quantized():
    qm = prepare_qat(_net(), keep_fp32=["fc"])
    layers = qat_layers(qm)
    assert not layers["fc"].quantize_weight and layers["conv"].quantize_weight
    enabled = {fq.value_name: fq.enabled for fq in act_quantizers(qm)}
    assert enabled == {"input": True, "relu": True, "conv2": True, "add": True, "output": False}
    set_quantized(qm, ["conv2"])  # only conv2: its input and output, its weight
    enabled = {fq.value_name: fq.enabled for fq in act_quantizers(qm)}
    assert enabled == {"input": False, "relu": True, "conv2": True, "add": False, "output": False}
    assert [n for n, m in qat_layers(qm).items() if m.quantize_weight] == ["conv2"]
    with pytest.raises(ValueError, match="unknown layer"):
        prepare_qat(_net(), keep_fp32=["nope"])


def test_config_validation():
    with pytest.raises(ValueError):
        QATConfig(epochs=-1)
    with pytest.raises(ValueError):
        QATConfig(averaging=0)
    with pytest.raises(ValueError, match="qat.train"):
        QATConfig(train={"nope": 1})
    with pytest.raises(ValueError):
        QATConfig(freeze_bn_after=-0.5)


def _toy_data(n=256, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2, 6, 6)).astype(np.float32)
    x[:, 0] += rng.choice([-1.0, 1.0], size=(n, 1, 1)).astype(np.float32)
    y = (x[:, 0].mean(axis=(1, 2)) > 0).astype(np.int64)
    return x, y


def test_qat_trains_keeps_pruned_zeros_and_writes_back():
    torch.set_num_threads(1)
    net = _net()
    with torch.no_grad():
        net.fc.weight[:, :10] = 0.0
    data = _toy_data()
    ranges, history = quantization_aware_training(
        net, QATConfig(epochs=2, train={"lr": 1e-2, "batch_size": 32}, calib_samples=64), data, data,
        progress=False)
    assert set(ranges) == {"input", "relu", "conv2", "add", "output"}
    assert history["qat_val_accuracy"] > max(90, history["ptq_val_accuracy"])
    assert torch.all(net.fc.weight[:, :10] == 0) and torch.any(net.fc.weight[:, 10:] != 0)
    lo, hi = ranges["relu"]
    assert lo >= 0 and act_qparams(lo, hi)[1] == 0


def test_qat_with_shared_weights_keeps_the_codebook():
    from deepslim.compress.qat import preserve_structure

    net = _net()
    with torch.no_grad():
        net.fc.weight.copy_(torch.tensor([-0.2, 0.0, 0.1, 0.3])[torch.randint(0, 4, net.fc.weight.shape)])
    qm = prepare_qat(net)
    preserve_structure(qm, shared=True)
    opt = torch.optim.SGD(qm.parameters(), lr=0.1)
    qm.train()
    qm(torch.randn(8, 2, 6, 6)).square().sum().backward()
    opt.step()
    convert(qm)
    values = torch.unique(net.fc.weight.detach())
    assert len(values) <= 4 and 0.0 in values.tolist()
    assert not math.isclose(float(values.max()), 0.3)  # the codebook moved


def test_ranges_drive_the_integer_reference_to_the_simulated_outputs():
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize
    from deepslim.quant import quantize_graph, run_quantized

    net = _net().eval()
    qm = prepare_qat(net)
    x = torch.randn(64, 2, 6, 6)
    calibrate(qm, x.numpy())
    simulated = qm.eval()(x).detach().numpy()
    ranges = convert(qm)
    graph = quantize_graph(optimize(from_torch(net, torch.zeros(1, 2, 6, 6))), ranges=ranges)
    assert {n.op for n in graph.nodes} >= {"qconv2d", "qadd", "qdense"}
    integer = run_quantized(graph, x.numpy())
    step = act_qparams(*ranges["output"])[0]
    # the same u8 code almost everywhere; otherwise one step apart (float vs fixed-point rounding)
    assert np.abs(integer - simulated).max() <= step * 1.01
    assert (integer == simulated).mean() > 0.9


def test_recipe_quantize_section():
    from deepslim.compress import RecipeError, load_recipe
    from deepslim.compress.qat import QuantizeConfig
    from deepslim.compress.sensitivity import SensitivityConfig

    r = load_recipe({"quantize": {"method": {"conv": "kl", "fc": "minmax"}, "keep_fp32": ["fc"],
                                  "sensitivity": {"budget": 0.2}, "qat": {"epochs": 2}}})
    assert isinstance(r.quantize, QuantizeConfig) and r.steps()[-1][0] == "quantize"
    assert r.quantize.qat == QATConfig(epochs=2) and r.quantize.sensitivity == SensitivityConfig(budget=0.2)
    r.check(_net())
    assert load_recipe({"quantize": {}}).quantize.qat is None  # post-training only
    for bad in ({"method": "median"}, {"weight_bits": 3}, {"qat": {"epochs": -1}}, {"qat": {"nope": 1}},
                {"sensitivity": {"budget": -1}}, {"keep_fp32": "fc"}):
        with pytest.raises(RecipeError):
            load_recipe({"quantize": bad})
    with pytest.raises(ValueError, match="keep_fp32"):
        load_recipe({"quantize": {"keep_fp32": ["nope"]}}).check(_net())


def test_compress_runs_prune_then_qat_and_exports_an_int8_graph():
    from deepslim.compress import compress
    from deepslim.compress.qat import quantize_for_export
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize
    from deepslim.quant import run_quantized

    torch.set_num_threads(1)
    net = _net()
    data = _toy_data()
    recipe = {"prune": {"sparsity": {"fc": 0.5}, "epochs_per_iteration": 1, "train": {"batch_size": 32}},
              "quantize": {"calib_samples": 64, "method": {"conv": "percentile"},
                           "qat": {"epochs": 2, "train": {"lr": 1e-2, "batch_size": 32}}}}
    result = compress(net, recipe, data, data, progress=False)
    plan = result.quantize
    assert plan.history["qat"]["qat_val_accuracy"] > 90
    assert float((net.fc.weight == 0).float().mean()) == pytest.approx(0.5, abs=0.01)  # sparsity kept
    graph = optimize(from_torch(net, torch.zeros(1, 2, 6, 6)))
    qgraph = quantize_for_export(graph, plan)
    assert qgraph.values["fc.weight"].dtype == "i8"
    out = run_quantized(qgraph, data[0])
    assert (out.argmax(1) == data[1]).mean() > 0.9


def test_complete_ranges_covers_a_flatten_before_the_first_layer():
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize
    from deepslim.quant import quantize_graph, run_quantized

    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(12, 5), nn.ReLU(), nn.Linear(5, 3)).eval()
    qm = prepare_qat(net)
    x = torch.randn(32, 1, 3, 4)
    calibrate(qm, x.numpy())
    ranges = convert(qm)
    graph = optimize(from_torch(net, torch.zeros(1, 1, 3, 4)))
    assert "0" not in ranges  # flatten (module "0") passes u8 through: no quantizer of its own
    full = complete_ranges(graph, ranges)
    assert full["0"] == ranges["input"]
    out = run_quantized(quantize_graph(graph, ranges=full), x.numpy())
    assert np.abs(out - qm.eval()(x).detach().numpy()).max() <= act_qparams(*ranges["output"])[0] * 1.01


def test_int16_layers_are_simulated_as_i16_and_the_integer_reference_agrees():
    from deepslim.frontends.torch import from_torch
    from deepslim.ir.passes import optimize
    from deepslim.quant import quantize_graph, run_quantized
    from deepslim.quant.params import choose_qparams_i16

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3)).eval()
    x = torch.randn(256, 12)
    reference = net(x).detach().numpy()
    graph = optimize(from_torch(net, torch.zeros(1, 12)))
    errors = {}
    for wide in ([], ["0", "2", "4"]):
        qm = prepare_qat(net, int16=wide)
        assert {f.bits for f in act_quantizers(qm)} == ({16} if wide else {8})
        calibrate(qm, x.numpy())
        simulated = qm.eval()(x).detach().numpy()
        ranges = convert(qm)
        qgraph = quantize_graph(graph, ranges=complete_ranges(graph, ranges), int16=wide)
        integer = run_quantized(qgraph, x.numpy())
        step = choose_qparams_i16(*ranges["output"])[0] if wide else act_qparams(*ranges["output"])[0]
        # float vs fixed-point rounding only: mostly the same code, else a step or two (carried through layers)
        assert np.abs(integer - simulated).max() <= step * 3.01
        assert (np.abs(integer - simulated) < step / 2).mean() > 0.7
        errors[bool(wide)] = np.abs(simulated - reference).mean()
    assert errors[True] < errors[False] / 2  # what is left is the int8 weights' error
    with pytest.raises(ValueError, match="int16: unknown layer"):
        prepare_qat(net, int16=["nope"])


def test_qat_with_activation_bits_16_trains_the_layers_in_i16(monkeypatch):
    import deepslim.train

    torch.set_num_threads(1)
    fit, seen = deepslim.train.fit, {}

    def spy(qm, *args, **kwargs):
        seen[qm] = {f.value_name: f.bits for f in act_quantizers(qm) if f.enabled}
        return fit(qm, *args, **kwargs)

    monkeypatch.setattr(deepslim.train, "fit", spy)
    config = QATConfig(epochs=1, calib_samples=64, train={"lr": 1e-3, "batch_size": 32})
    quantization_aware_training(_net(), config, _toy_data(), keep_fp32=["fc"], activation_bits=16, progress=False)
    quantization_aware_training(_net(), config, _toy_data(), int16=["fc"], progress=False)
    wide, one = seen.values()
    # conv and conv2 run 16x8; the input is read by conv alone, the rest also by u8 ops (add, pool)
    assert wide == {"input": 16, "relu": 8, "conv2": 8, "add": 8}
    assert one == {"input": 8, "relu": 8, "conv2": 8, "add": 8, "output": 16}
