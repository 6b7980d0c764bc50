import numpy as np
import pytest
import torch
from torch import nn

from deepslim.compress import prune
from deepslim.compress.prune import PruneConfig


def tiny_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))


def tiny_data(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 1, 3, 4)).astype(np.float32)
    y = (x.reshape(n, -1).sum(1) > 0).astype(np.int64) + (x[:, 0, 0, 0] > 1)
    return x, y


def numpy_magnitude_mask(w, sparsity):
    k = int(round(sparsity * w.size))
    order = np.argsort(np.abs(w).ravel(), kind="stable")
    keep = np.ones(w.size, bool)
    keep[order[:k]] = False
    return keep.reshape(w.shape)


@pytest.mark.parametrize("sparsity", [0.0, 0.25, 0.5, 0.9])
def test_magnitude_mask_matches_numpy(sparsity):
    w = torch.randn(7, 9, generator=torch.Generator().manual_seed(3))
    mask = prune.magnitude_mask(w, sparsity)
    np.testing.assert_array_equal(mask.numpy(), numpy_magnitude_mask(w.numpy(), sparsity))
    assert int((~mask).sum()) == round(sparsity * w.numel())


def test_mask_keeps_already_pruned():
    w = torch.tensor([5.0, 0.1, 3.0, 0.2, 4.0, 0.3])
    first = torch.tensor([True, True, False, True, True, True])  # 3.0 already pruned
    mask = prune.magnitude_mask(w, 0.5, first)
    assert mask.tolist() == [True, False, False, False, True, True]
    with pytest.raises(ValueError, match="fewer than"):
        prune.magnitude_mask(w, 0.0, first)


def test_schedule():
    assert prune.schedule(0.9, 3, "linear") == pytest.approx([0.3, 0.6, 0.9])
    cubic = prune.schedule(0.9, 3, "cubic")
    assert cubic[-1] == 0.9 and cubic[0] > 0.3 and cubic == sorted(cubic)
    geometric = prune.schedule(0.875, 3, "geometric")  # density 1/8 reached by halving it 3 times
    assert geometric == pytest.approx([0.5, 0.75, 0.875])


def test_masked_weights_stay_zero_through_optimizer_steps():
    model = tiny_mlp()
    layer = model[1]
    mask = prune.magnitude_mask(layer.weight, 0.6)
    prune.attach_mask(layer, mask)
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9, weight_decay=0.1)
    x, y = (torch.from_numpy(a) for a in tiny_data())
    for _ in range(5):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        assert torch.all(layer.weight.grad[~mask] == 0)
        opt.step()
        prune.reapply_masks(model)
        assert torch.all(layer.weight[~mask] == 0)
    assert torch.all(layer.weight[mask] != 0)
    prune.strip_masks(model)
    assert not hasattr(layer, "weight_mask")
    assert "weight_mask" not in dict(model.named_buffers())
    assert int((layer.weight == 0).sum()) == int((~mask).sum())


def test_iterative_prune_reaches_exact_sparsity():
    model = tiny_mlp()
    config = PruneConfig(sparsity={"1": 0.7, "3": 0.5}, iterations=3, epochs_per_iteration=1, schedule="linear",
                         train={"batch_size": 16, "lr": 0.01})
    records = prune.prune(model, config, tiny_data(), progress=False)
    assert [r["iteration"] for r in records] == [1, 2, 3]
    assert records[0]["sparsity"]["1"] == pytest.approx(round(0.7 / 3 * 192) / 192)
    prune.strip_masks(model)
    assert int((model[1].weight == 0).sum()) == round(0.7 * 192)
    assert int((model[3].weight == 0).sum()) == round(0.5 * 48)


def test_config_validation():
    with pytest.raises(ValueError, match=r"sparsity\['fc1'\] = 1.0.*\[0, 1\)"):
        PruneConfig(sparsity={"fc1": 1.0})
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        PruneConfig(sparsity={"fc1": -0.1})
    with pytest.raises(ValueError, match="iterations"):
        PruneConfig(sparsity={"fc": 0.5}, iterations=0)
    with pytest.raises(ValueError, match="unknown layer 'fc9'.*1, 3"):
        PruneConfig(sparsity={"fc9": 0.5}).check(tiny_mlp())


def test_final_round_overrides_last_retraining_only(monkeypatch):
    import deepslim.train

    seen = []
    real_fit = deepslim.train.fit

    def spy(model, train_data, val_data=None, *, config, **kw):
        seen.append(config)
        return real_fit(model, train_data, val_data, config=config, **kw)

    monkeypatch.setattr(deepslim.train, "fit", spy)
    model = tiny_mlp()
    config = PruneConfig(sparsity={"1": 0.7}, iterations=3, epochs_per_iteration=1,
                         train={"batch_size": 16, "lr": 0.01}, final_round={"epochs": 3, "lr": 0.002})
    records = prune.prune(model, config, tiny_data(), tiny_data(32, seed=1), progress=False)
    assert [(c.epochs, c.lr, c.batch_size) for c in seen] == [(1, 0.01, 16), (1, 0.01, 16), (3, 0.002, 16)]
    assert [len(r["history"]) for r in records] == [1, 1, 3]
    assert int((model[1].weight == 0).sum()) == round(0.7 * 192)


def test_final_round_validation():
    with pytest.raises(ValueError, match=r"prune.final_round: unknown training option\(s\) \['epoch'\]"):
        PruneConfig(sparsity={"fc": 0.5}, final_round={"epoch": 3})
    with pytest.raises(ValueError, match="prune.final_round must be a mapping"):
        PruneConfig(sparsity={"fc": 0.5}, final_round=4)
    with pytest.raises(ValueError, match="lr must be > 0"):
        PruneConfig(sparsity={"fc": 0.5}, final_round={"lr": 0})
