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
