"""Magnitude pruning (Han et al., 2015): zero the smallest weights of each layer, then retrain.

A mask is a bool tensor the shape of the weight (True = kept). While masks are attached, each layer
holds its mask as a buffer `weight_mask`, the gradient of a pruned weight is zeroed by a hook, and
`reapply_masks` (run after every optimizer step) puts pruned weights back to exactly 0.0, so
momentum or weight decay cannot revive them. `strip_masks` removes buffers and hooks; the zeros stay.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn

from deepslim.compress.layers import check_keys, per_layer, weight_layers

SCHEDULES = ("geometric", "linear", "cubic")
_HOOK_ATTR = "_deepslim_mask_hook"


@dataclass(frozen=True)
class PruneConfig:
    """sparsity: fraction of weights set to zero, per layer name or type ("conv", "fc").

    The sparsity is reached in `iterations` prune-retrain rounds of `epochs_per_iteration` epochs.
    Round i of n prunes to: "geometric" 1 - (1 - target)^(i/n) (every round removes the same share of
    the weights still left, so late rounds stay gentle), "linear" target * i/n, or "cubic"
    target * (1 - (1 - i/n)^3). iterations=1 is one-shot pruning.

    `final_round` (TrainConfig options, e.g. {epochs: 6, lr: 0.0005}) overrides `train` and
    `epochs_per_iteration` for the retraining after the last round only: the weights the model ends
    with are pruned hardest, so that round is the one worth retraining longer (and at a lower rate).
    """

    sparsity: dict[str, float]
    iterations: int = 1
    epochs_per_iteration: int = 1
    schedule: str = "geometric"
    train: dict[str, Any] = field(default_factory=dict)  # TrainConfig options for retraining
    final_round: dict[str, Any] = field(default_factory=dict)  # overrides for the last round's retraining

    def __post_init__(self) -> None:
        if not isinstance(self.final_round, dict):
            raise ValueError(f"prune.final_round must be a mapping of training options, got {self.final_round!r}")
        from deepslim.train import TrainConfig

        try:
            TrainConfig.from_dict(self.final_round)
        except ValueError as e:
            raise ValueError(f"prune.final_round: {e}") from e
        if not isinstance(self.sparsity, dict) or not self.sparsity:
            raise ValueError("prune.sparsity must be a non-empty mapping of layer name or type -> fraction")
        for key, s in self.sparsity.items():
            if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0.0 <= s < 1.0:
                raise ValueError(f"prune.sparsity[{key!r}] = {s!r}: a sparsity must be a number in [0, 1)")
        if not isinstance(self.iterations, int) or self.iterations < 1:
            raise ValueError(f"prune.iterations must be an integer >= 1, got {self.iterations!r}")
        if not isinstance(self.epochs_per_iteration, int) or self.epochs_per_iteration < 0:
            raise ValueError(f"prune.epochs_per_iteration must be an integer >= 0, got {self.epochs_per_iteration!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"prune.schedule must be one of {SCHEDULES}, got {self.schedule!r}")

    def check(self, model: nn.Module) -> None:
        check_keys(self.sparsity, model, "prune.sparsity")


# ------------------------------------------------------------------------------ stateless functions


def schedule(target: float, iterations: int, kind: str = "geometric") -> list[float]:
    """Sparsity after each of `iterations` rounds; the last is exactly `target`."""
    if kind not in SCHEDULES:
        raise ValueError(f"unknown pruning schedule {kind!r}; known: {SCHEDULES}")
    out = []
    for i in range(1, iterations + 1):
        t = i / iterations
        if kind == "geometric":
            s = 1.0 - (1.0 - target) ** t
        elif kind == "linear":
            s = target * t
        else:
            s = target * (1.0 - (1.0 - t) ** 3)
        out.append(target if i == iterations else s)
    return out


def magnitude_mask(weight: torch.Tensor, sparsity: float, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Keep-mask that prunes exactly round(sparsity * numel) weights, the smallest by magnitude.

    Weights already pruned by `mask` are pruned first (so masks only grow); ties go to the lower
    flat index (a stable sort), which makes the result deterministic.
    """
    n = weight.numel()
    k = int(round(sparsity * n))
    score = weight.detach().abs().flatten().to(torch.float64)
    if mask is not None:
        already = int((~mask).sum())
        if k < already:
            raise ValueError(f"sparsity {sparsity} would prune {k} weights, fewer than the {already} already pruned")
        score[~mask.flatten()] = -1.0
    order = torch.argsort(score, stable=True)
    keep = torch.ones(n, dtype=torch.bool)
    keep[order[:k]] = False
    return keep.view_as(weight)


# --------------------------------------------------------------------------------- module state


def attach_mask(module: nn.Module, mask: torch.Tensor) -> None:
    """Zero the pruned weights of `module` and keep them at zero through training."""
    mask = mask.to(dtype=torch.bool, device=module.weight.device)
    if hasattr(module, "weight_mask"):
        module.weight_mask.copy_(mask)
    else:
        module.register_buffer("weight_mask", mask, persistent=False)
        handle = module.weight.register_hook(lambda grad, m=module: grad * m.weight_mask)
        setattr(module, _HOOK_ATTR, handle)
    with torch.no_grad():
        module.weight.masked_fill_(~module.weight_mask, 0.0)


def reapply_masks(model: nn.Module) -> None:
    """Set every pruned weight back to exactly 0.0 (call after each optimizer step)."""
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "weight_mask"):
                module.weight.masked_fill_(~module.weight_mask, 0.0)


def strip_masks(model: nn.Module) -> None:
    """Remove masks and hooks; pruned weights stay zero."""
    reapply_masks(model)
    for module in model.modules():
        if hasattr(module, _HOOK_ATTR):
            getattr(module, _HOOK_ATTR).remove()
            delattr(module, _HOOK_ATTR)
        if "weight_mask" in module._buffers:
            del module._buffers["weight_mask"]


def masks(model: nn.Module) -> dict[str, torch.Tensor]:
    return {name: m.weight_mask for name, m in model.named_modules() if hasattr(m, "weight_mask")}


def sparsity_of(model: nn.Module) -> dict[str, float]:
    """Fraction of exactly-zero weights per conv/fc layer."""
    return {name: float((m.weight == 0).sum()) / m.weight.numel() for name, m in weight_layers(model).items()}


# -------------------------------------------------------------------------------------- method


def prune(
    model: nn.Module,
    config: PruneConfig,
    train_data=None,
    val_data=None,
    *,
    progress: bool = True,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Prune-retrain rounds in place; masks stay attached (call `strip_masks` when done).

    Returns one record per round: the sparsity per layer and the retraining history.
    """
    from deepslim.train import TrainConfig, fit  # torch training loop, imported when used

    config.check(model)
    targets = per_layer(config.sparsity, model)
    layers = weight_layers(model)
    train_config = TrainConfig.from_dict({"seed": seed, **config.train, "epochs": config.epochs_per_iteration})
    final_config = TrainConfig.from_dict({**asdict(train_config), **config.final_round})
    records = []
    for i in range(config.iterations):
        round_config = final_config if i == config.iterations - 1 else train_config
        for name, target in targets.items():
            module = layers[name]
            s = schedule(target, config.iterations, config.schedule)[i]
            current = getattr(module, "weight_mask", None)
            attach_mask(module, magnitude_mask(module.weight, s, current))
        history = []
        if train_data is not None and round_config.epochs > 0:
            history = fit(model, train_data, val_data, config=round_config, after_step=reapply_masks,
                          progress=progress, desc=f"prune {i + 1}/{config.iterations}")
        records.append({"iteration": i + 1, "sparsity": {n: sparsity_of(model)[n] for n in targets},
                        "history": history})
    return records
