import numpy as np
import pytest
import torch
from torch import nn

from deepslim.compress import kmeans
from deepslim.compress.kmeans import KMeansConfig


def numpy_kmeans_1d(values, k, iterations):
    """Plain Lloyd's algorithm: linear init, nearest centroid by argmin, empty clusters dropped."""
    values = values.astype(np.float64)
    c = np.linspace(values.min(), values.max(), k)
    labels = np.argmin(np.abs(values[:, None] - c[None, :]), axis=1)
    for _ in range(iterations):
        for j in range(len(c)):
            if np.any(labels == j):
                c[j] = values[labels == j].mean()
        c = np.sort(c)
        new = np.argmin(np.abs(values[:, None] - c[None, :]), axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
    used = np.unique(labels)
    return c[used], np.searchsorted(used, labels)


@pytest.mark.parametrize("seed,n,k", [(0, 50, 4), (1, 200, 7), (2, 31, 15), (3, 500, 31)])
def test_kmeans_matches_numpy(seed, n, k):
    values = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    ref_c, ref_labels = numpy_kmeans_1d(values, k, 50)
    v = torch.from_numpy(values)
    c, labels = kmeans.kmeans_1d(v, kmeans.linear_init(v.double(), k), 50)
    np.testing.assert_allclose(c.numpy(), ref_c, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(labels.numpy(), ref_labels)


def test_linear_init_and_assign():
    v = torch.tensor([-1.0, 0.0, 3.0])
    torch.testing.assert_close(kmeans.linear_init(v, 3), torch.tensor([-1.0, 1.0, 3.0]))
    assert kmeans.assign(torch.tensor([-5.0, 0.1, 1.9, 2.1, 9.0]), torch.tensor([-1.0, 1.0, 3.0])).tolist() == [0, 1, 1, 2, 2]


def test_share_keeps_zeros_and_uses_few_values():
    w = torch.randn(20, 30, generator=torch.Generator().manual_seed(0))
    w[w.abs() < 0.5] = 0
    codebook, labels, mask = kmeans.share(w, bits=3)
    assert len(codebook) <= 7  # one slot of 2^3 stays free for 0.0
    assert torch.equal(mask, w != 0)
    shared = torch.where(mask, codebook[labels], torch.tensor(0.0))
    assert set(shared[mask].tolist()) <= set(codebook.tolist())
    assert torch.all(shared[~mask] == 0)


def test_centroid_gradient_is_sum_of_cluster_gradients():
    layer = nn.Linear(3, 2, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1.0, 0.0, -1.0], [1.1, -0.9, 0.0]]))
    kmeans.attach_sharing(layer, bits=2)  # 3 clusters: about -0.95, 1.05 (0 is pruned)
    codebook = kmeans.codebook_of(layer)
    assert len(codebook) == 2
    x = torch.tensor([[1.0, 2.0, 3.0]])
    out = layer(x)
    (out * torch.tensor([[1.0, 10.0]])).sum().backward()
    # dL/dW[i, j] = g[i] * x[j]; cluster "negative" = W[0,2], W[1,1]; "positive" = W[0,0], W[1,0]
    expected = torch.tensor([1.0 * 3.0 + 10.0 * 2.0, 1.0 * 1.0 + 10.0 * 1.0])
    torch.testing.assert_close(codebook.grad, expected)
    labels = layer.parametrizations.weight[0].labels
    mask = layer.parametrizations.weight[0].mask
    grad_w = torch.tensor([[1.0], [10.0]]) * x
    torch.testing.assert_close(kmeans.cluster_gradient(grad_w, labels, mask, 2), expected)


def numpy_cluster_gradient(grad, labels, mask, k):
    out = np.zeros(k)
    for g, lab, m in zip(grad.ravel(), labels.ravel(), mask.ravel()):
        if m:
            out[lab] += g
    return out


def test_cluster_gradient_matches_numpy():
    rng = np.random.default_rng(0)
    grad = rng.standard_normal((6, 5))
    labels = rng.integers(0, 4, (6, 5))
    mask = rng.random((6, 5)) > 0.3
    got = kmeans.cluster_gradient(torch.from_numpy(grad), torch.from_numpy(labels), torch.from_numpy(mask), 4)
    np.testing.assert_allclose(got.numpy(), numpy_cluster_gradient(grad, labels, mask, 4))


def test_finetune_keeps_zeros_and_codebook_values():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
    with torch.no_grad():
        model[1].weight[model[1].weight.abs() < 0.1] = 0
    zeros = model[1].weight == 0
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1, 3, 4)).astype(np.float32)
    y = (x.reshape(64, -1).sum(1) > 0).astype(np.int64)
    before = model[1].weight.detach().clone()
    kmeans.quantize(model, KMeansConfig(bits={"fc": 3}, finetune_epochs=2, train={"lr": 0.01, "batch_size": 16}),
                    (x, y), progress=False)
    w = model[1].weight.detach()
    assert isinstance(model[1].weight, nn.Parameter)
    assert torch.equal(w == 0, zeros)
    assert len(torch.unique(w[w != 0])) <= 7
    assert not torch.equal(w, before)


def test_config_validation():
    with pytest.raises(ValueError, match=r"bits\['fc'\] = 17.*1\.\.16"):
        KMeansConfig(bits={"fc": 17})
    with pytest.raises(ValueError, match="1..16"):
        KMeansConfig(bits={"conv": 0})
    with pytest.raises(ValueError, match="finetune_epochs"):
        KMeansConfig(bits={"fc": 4}, finetune_epochs=-1)


def test_bias_sharing_trains_bias_codebooks():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 3))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 1, 3, 4)).astype(np.float32)
    y = (x.reshape(64, -1).sum(1) > 0).astype(np.int64)
    config = KMeansConfig(bits={"fc": 3}, bias_bits=2, finetune_epochs=2, train={"lr": 0.01, "batch_size": 16})
    # what the biases are right after clustering, before centroid training
    shared_only = kmeans.share(model[1].bias, 2)
    kmeans.quantize(model, config, (x, y), progress=False)
    for layer in (model[1], model[3]):
        assert isinstance(layer.bias, nn.Parameter) and isinstance(layer.weight, nn.Parameter)
        assert len(torch.unique(layer.bias)) <= 3
    # the cluster structure is kept; the centroids moved
    codebook, labels, _ = shared_only
    b = model[1].bias.detach()
    for j in range(len(codebook)):
        assert len(torch.unique(b[labels == j])) == 1
    assert not torch.allclose(torch.unique(b), codebook)


def test_bias_bits_validation():
    with pytest.raises(ValueError, match=r"kmeans.bias_bits = 17"):
        KMeansConfig(bits={"fc": 4}, bias_bits=17)
    assert KMeansConfig(bits={"fc": 4}).bias_bits == 0
