import numpy as np
import pytest
import torch
from torch import nn

from deepslim import train


def blobs(n=120, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    centers = np.array([[2.0, 0.0], [-2.0, 0.0], [0.0, 2.5]])
    x = (centers[y] + 0.5 * rng.standard_normal((n, 2))).astype(np.float32)
    return x.reshape(n, 1, 1, 2), y.astype(np.int64)


def small_model():
    return nn.Sequential(nn.Flatten(), nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 3))


def test_fit_learns_and_is_deterministic():
    data = blobs()
    runs = []
    for _ in range(2):
        torch.manual_seed(123)
        model = small_model()
        history = train.fit(model, data, data, epochs=5, lr=0.05, batch_size=16, seed=7, progress=False)
        runs.append(model.state_dict())
    assert len(history) == 5 and history[-1]["loss"] < history[0]["loss"]
    assert history[-1]["val_accuracy"] > 90
    for key in runs[0]:
        assert torch.equal(runs[0][key], runs[1][key])


def test_evaluate_counts_correct_predictions():
    model = nn.Sequential(nn.Flatten())  # outputs the input: argmax over the 2 features
    x = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 2.0], [0.0, 5.0]], np.float32).reshape(4, 1, 1, 2)
    assert train.evaluate(model, (x, np.array([0, 1, 1, 1]))) == 75.0
    with pytest.raises(ValueError):
        train.evaluate(model, (x[:0], np.zeros(0)))


def test_after_step_runs_every_step():
    calls = []
    train.fit(small_model(), blobs(40), epochs=2, lr=0.01, batch_size=16, after_step=calls.append, progress=False)
    assert len(calls) == 2 * 3


def test_config_validation():
    with pytest.raises(ValueError, match="optimizer"):
        train.TrainConfig(optimizer="lbfgs")
    with pytest.raises(ValueError, match="lr"):
        train.TrainConfig(lr=0)
    with pytest.raises(ValueError, match="unknown training option"):
        train.TrainConfig.from_dict({"epoch": 3})


def test_checkpoint_cache_reuses_training(tmp_path):
    data = blobs()
    config = train.TrainConfig(epochs=2, lr=0.05, batch_size=16)
    model = small_model()
    meta, path = train.train_or_load("blobs", model, data, data, config, data_tag="t", directory=tmp_path, progress=False)
    assert path.exists() and path.parent == tmp_path and meta["config"]["epochs"] == 2
    other = small_model()
    meta2, path2 = train.train_or_load("blobs", other, data, data, config, data_tag="t", directory=tmp_path, progress=False)
    assert path2 == path and meta2 == meta
    for key, value in model.state_dict().items():
        assert torch.equal(other.state_dict()[key], value)
    changed = train.checkpoint_path("blobs", {**meta["config"], "epochs": 3}, tmp_path)
    assert changed != path


def test_explicit_loss_is_used_and_softmax_models_train_on_probabilities():
    data = blobs()
    seen = []

    def loss(out, target):
        seen.append(out.shape)
        return nn.functional.cross_entropy(out, target)

    train.fit(small_model(), data, epochs=1, lr=0.05, batch_size=40, loss=loss, progress=False)
    assert seen == [(40, 3)] * 3
    with pytest.raises(TypeError, match="loss must be a callable"):
        train.fit(small_model(), data, epochs=1, loss="nll", progress=False)

    # a model ending in a softmax: its default loss is the NLL of the probabilities ...
    probs_model = nn.Sequential(*small_model(), nn.Softmax(dim=1))
    assert train.default_loss(probs_model) is train.nll_of_probabilities
    assert train.default_loss(small_model()) is nn.functional.cross_entropy
    # ... and given explicitly it trains a wrapper whose last module is not the softmax
    torch.manual_seed(0)
    wrapped = nn.Sequential(probs_model, nn.Identity())
    history = train.fit(wrapped, data, data, epochs=5, lr=0.05, batch_size=16, loss=train.nll_of_probabilities,
                        progress=False)
    assert history[-1]["val_accuracy"] > 90
    # cross-entropy on probabilities (what the default gave a wrapped softmax model) learns far less well
    assert train.nll_of_probabilities(torch.tensor([[0.9, 0.1]]), torch.tensor([0])) < \
        nn.functional.cross_entropy(torch.tensor([[0.9, 0.1]]), torch.tensor([0]))


def test_qat_of_a_softmax_model_uses_the_nll_of_its_probabilities(monkeypatch):
    from deepslim.compress.qat import QATConfig, quantization_aware_training

    data = blobs()
    torch.manual_seed(0)
    model = nn.Sequential(*small_model(), nn.Softmax(dim=1))
    train.fit(model, data, epochs=3, lr=0.05, batch_size=16, progress=False)
    calls = []
    real = train.nll_of_probabilities

    def spy(out, target):
        calls.append(float(out.detach().sum(1).mean()))  # probabilities: rows sum to 1
        return real(out, target)

    # by default: decided on the model, not on the traced copy (which ends in a fake quantizer)
    monkeypatch.setattr(train, "nll_of_probabilities", spy)
    ranges, history = quantization_aware_training(model, QATConfig(epochs=1, train={"batch_size": 40}), data, data,
                                                  progress=False)
    assert len(calls) == 3 and all(abs(c - 1) < 1e-3 for c in calls)
    assert history["qat_val_accuracy"] > 90 and "output" in ranges
