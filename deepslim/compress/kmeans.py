"""Weight sharing (Han et al., 2016): per-layer k-means on the nonzero weights, then centroid training.

Each layer's nonzero weights are clustered into at most 2^bits - 1 clusters (one codebook slot stays
free for the 0.0 that the sparse layout's filler entries decode to), starting from centroids spread
linearly between the smallest and largest weight. The layer's weight then becomes
`where(mask, codebook[index], 0)` through a parametrization whose only parameter is the codebook,
so back-propagation sums the gradients of all weights of a cluster into its centroid's gradient
and pruned weights stay exactly 0.0. `strip_sharing` turns the weights back into plain parameters
whose nonzero values are exactly codebook entries.

With `bias_bits` the biases of the same layers are shared too (one codebook per bias, nonzero
biases clustered like weights) and their codebooks are trained with the weights' codebooks. In
small networks the biases are a tenth of the compressed file when they stay raw float32
(LeNet-5: 580 biases = 2,320 bytes next to ~28 KB of shared weights).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

from deepslim.compress.layers import check_keys, per_layer, weight_layers

MAX_BITS = 16


@dataclass(frozen=True)
class KMeansConfig:
    """bits: cluster-index bits per layer name or type, e.g. {"conv": 8, "fc": 5}.

    bias_bits: cluster-index bits of the biases of the layers in `bits` (0: biases stay float32).
    """

    bits: dict[str, int]
    finetune_epochs: int = 1
    bias_bits: int = 0
    iterations: int = 50  # Lloyd iterations (stops early once assignments settle)
    train: dict[str, Any] = field(default_factory=dict)  # TrainConfig options for centroid training

    def __post_init__(self) -> None:
        if not isinstance(self.bits, dict) or not self.bits:
            raise ValueError("kmeans.bits must be a non-empty mapping of layer name or type -> bits")
        for key, b in self.bits.items():
            if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= MAX_BITS:
                raise ValueError(f"kmeans.bits[{key!r}] = {b!r}: bits must be an integer in 1..{MAX_BITS}")
        b = self.bias_bits
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= MAX_BITS:
            raise ValueError(f"kmeans.bias_bits = {b!r}: bits must be an integer in 0..{MAX_BITS} (0: no sharing)")
        if not isinstance(self.finetune_epochs, int) or self.finetune_epochs < 0:
            raise ValueError(f"kmeans.finetune_epochs must be an integer >= 0, got {self.finetune_epochs!r}")
        if not isinstance(self.iterations, int) or self.iterations < 1:
            raise ValueError(f"kmeans.iterations must be an integer >= 1, got {self.iterations!r}")

    def check(self, model: nn.Module) -> None:
        check_keys(self.bits, model, "kmeans.bits")


# ------------------------------------------------------------------------------ stateless functions


def linear_init(values: torch.Tensor, k: int) -> torch.Tensor:
    """k centroids evenly spaced between min(values) and max(values)."""
    return torch.linspace(float(values.min()), float(values.max()), k, dtype=values.dtype)


def assign(values: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """Index of the nearest centroid (centroids sorted ascending; a tie goes to the lower one)."""
    midpoints = (centroids[1:] + centroids[:-1]) / 2
    return torch.bucketize(values, midpoints, right=False)


def kmeans_1d(values: torch.Tensor, centroids: torch.Tensor, iterations: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Lloyd's algorithm in one dimension from the given sorted centroids.

    Returns (centroids, labels) with centroids sorted and every centroid used by some value
    (empty clusters are dropped).
    """
    values = values.to(torch.float64)
    c = torch.sort(centroids.to(torch.float64)).values
    labels = assign(values, c)
    for _ in range(iterations):
        counts = torch.bincount(labels, minlength=len(c))
        sums = torch.zeros_like(c).index_add_(0, labels, values)
        c = torch.where(counts > 0, sums / counts.clamp_min(1), c)
        c = torch.sort(c).values
        new_labels = assign(values, c)
        if torch.equal(new_labels, labels):
            break
        labels = new_labels
    used = torch.bincount(labels, minlength=len(c)) > 0
    remap = torch.cumsum(used.long(), 0) - 1
    return c[used], remap[labels]


def cluster_gradient(grad: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor, k: int) -> torch.Tensor:
    """Gradient of each centroid: the sum of the gradients of the kept weights in its cluster."""
    keep = mask.flatten()
    return torch.zeros(k, dtype=grad.dtype).index_add_(0, labels.flatten()[keep], grad.flatten()[keep])


def share(weight: torch.Tensor, bits: int, iterations: int = 50) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cluster the nonzero entries of `weight`: returns (codebook float32, labels, mask).

    labels has the weight's shape (0 where pruned); mask is True where the weight is nonzero.
    """
    w = weight.detach().to(torch.float32)
    mask = w != 0
    nonzero = w[mask]
    labels = torch.zeros(w.shape, dtype=torch.long)
    if nonzero.numel() == 0:
        return torch.zeros(0, dtype=torch.float32), labels, mask
    k = min((1 << bits) - 1 if bits > 1 else 1, nonzero.numel())
    centroids, nz_labels = kmeans_1d(nonzero, linear_init(nonzero.double(), k), iterations)
    labels[mask] = nz_labels
    return centroids.to(torch.float32), labels, mask


# --------------------------------------------------------------------------------- module state


class SharedWeight(nn.Module):
    """Parametrization: codebook (k,) -> weight = where(mask, codebook[labels], 0)."""

    def __init__(self, codebook: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("labels", labels)
        self.register_buffer("mask", mask)
        self._codebook = codebook

    def forward(self, codebook: torch.Tensor) -> torch.Tensor:
        return torch.where(self.mask, codebook[self.labels], torch.zeros((), dtype=codebook.dtype))

    def right_inverse(self, weight: torch.Tensor) -> torch.Tensor:
        return self._codebook.clone()


def attach_sharing(module: nn.Module, bits: int, iterations: int = 50, name: str = "weight") -> SharedWeight:
    """Replace `module.<name>` by shared values; its trainable parameter becomes the codebook."""
    codebook, labels, mask = share(getattr(module, name), bits, iterations)
    p = SharedWeight(codebook, labels, mask)
    parametrize.register_parametrization(module, name, p, unsafe=True)
    return p


def codebook_of(module: nn.Module, name: str = "weight") -> nn.Parameter:
    return getattr(module.parametrizations, name).original


def strip_sharing(model: nn.Module) -> None:
    """Turn shared tensors back into plain parameters (values exactly codebook entries or 0.0)."""
    for module in model.modules():
        for name in ("weight", "bias"):
            if parametrize.is_parametrized(module, name):
                parametrize.remove_parametrizations(module, name, leave_parametrized=True)


# -------------------------------------------------------------------------------------- method


def quantize(
    model: nn.Module,
    config: KMeansConfig,
    train_data=None,
    val_data=None,
    *,
    progress: bool = True,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Share weights per layer, then train the codebooks (and biases, or with `bias_bits` the biases'
    codebooks) for `finetune_epochs`.

    The model is left with plain weights (sharing stripped). Returns the training history.
    """
    from deepslim.train import TrainConfig, fit

    config.check(model)
    layers = weight_layers(model)
    bits = per_layer(config.bits, model)
    for name, b in bits.items():
        attach_sharing(layers[name], b, config.iterations)
        if config.bias_bits and layers[name].bias is not None:
            attach_sharing(layers[name], config.bias_bits, config.iterations, "bias")
    train_config = TrainConfig.from_dict({"seed": seed, "lr": 1e-4, **config.train, "epochs": config.finetune_epochs})
    history = []
    if train_data is not None and train_config.epochs > 0:
        params = [codebook_of(layers[n]) for n in bits]
        for m in layers.values():  # other weights stay frozen
            if parametrize.is_parametrized(m, "bias"):
                params.append(codebook_of(m, "bias"))
            elif m.bias is not None:
                params.append(m.bias)
        history = fit(model, train_data, val_data, config=train_config, params=params, progress=progress,
                      desc="k-means")
    strip_sharing(model)
    return history
