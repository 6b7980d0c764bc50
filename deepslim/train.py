"""Training and evaluation loops for classifiers on in-memory numpy data, plus checkpoints.

Data is a pair `(x, y)`: float32 inputs (N, C, H, W) and int64 labels (N,). Runs are deterministic
for a given seed and thread count (shuffling uses its own seeded generator).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

Data = tuple[np.ndarray, np.ndarray]

OPTIMIZERS = ("adam", "sgd")
SCHEDULES = ("constant", "cosine")


@dataclass(frozen=True)
class TrainConfig:
    """How a model is trained; its fields (with the model name) key the checkpoint cache."""

    epochs: int = 8
    lr: float = 1e-3
    batch_size: int = 128
    optimizer: str = "adam"
    momentum: float = 0.9
    weight_decay: float = 0.0
    schedule: str = "cosine"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.epochs < 0:
            raise ValueError(f"epochs must be >= 0, got {self.epochs}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "TrainConfig":
        d = dict(d or {})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(
                f"unknown training option(s) {sorted(unknown)}; known: {sorted(cls.__dataclass_fields__)}"
            )
        return cls(**d)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def nll_of_probabilities(probs: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of softmax outputs (for models that end in a softmax)."""
    return nn.functional.nll_loss(torch.log(probs.clamp_min(1e-12)), target)


def default_loss(model: nn.Module) -> Loss:
    """Cross-entropy on logits; `nll_of_probabilities` for a model whose last module is a softmax
    (FaceNet-1M). Decided on the plain model: a traced or wrapped copy (QAT) passes it explicitly."""
    if isinstance(list(model.modules())[-1], nn.Softmax):
        return nll_of_probabilities
    return nn.functional.cross_entropy


def make_optimizer(params, config: TrainConfig) -> torch.optim.Optimizer:
    if config.optimizer == "adam":
        return torch.optim.Adam(params, lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.SGD(params, lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay)


def fit(
    model: nn.Module,
    train_data: Data,
    val_data: Data | None = None,
    epochs: int = 8,
    lr: float = 1e-3,
    *,
    config: TrainConfig | None = None,
    params: list[torch.nn.Parameter] | None = None,
    after_step: Callable[[nn.Module], None] | None = None,
    loss: Loss | None = None,
    progress: bool = True,
    desc: str = "train",
    **options: Any,
) -> list[dict[str, float]]:
    """Train `model` in place; returns one record per epoch (loss, and val accuracy if given).

    `config` overrides `epochs`, `lr` and `options` (the other TrainConfig fields, e.g. seed=1).
    `params` limits training to those parameters (default: all that require grad). `after_step` runs
    after every optimizer step (pruning uses it to re-apply its masks). `loss(output, target)` is the
    training loss; default `default_loss(model)` (cross-entropy on logits, NLL of a final softmax).
    """
    if config is None:
        config = TrainConfig(epochs=epochs, lr=lr, **options)
    seed_everything(config.seed)
    x_all = torch.from_numpy(np.ascontiguousarray(train_data[0], dtype=np.float32))
    y_all = torch.from_numpy(np.ascontiguousarray(train_data[1], dtype=np.int64))
    n = len(x_all)
    steps_per_epoch = math.ceil(n / config.batch_size)
    total_steps = max(1, steps_per_epoch * config.epochs)
    trainable = params if params is not None else [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(trainable, config)
    if config.schedule == "cosine":
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: 0.5 * (1 + math.cos(math.pi * min(step, total_steps) / total_steps))
        )
    else:
        scheduler = None
    loss_fn = loss if loss is not None else default_loss(model)
    if not callable(loss_fn):
        raise TypeError(f"loss must be a callable (output, target) -> tensor, got {loss_fn!r}")
    generator = torch.Generator().manual_seed(config.seed)
    history = []
    for epoch in range(config.epochs):
        model.train()
        order = torch.randperm(n, generator=generator)
        total_loss, seen = 0.0, 0
        bar = tqdm(range(steps_per_epoch), desc=f"{desc} {epoch + 1}/{config.epochs}", disable=not progress,
                   leave=False)
        for step in bar:
            idx = order[step * config.batch_size:(step + 1) * config.batch_size]
            x, y = x_all[idx], y_all[idx]
            optimizer.zero_grad(set_to_none=True)
            batch_loss = loss_fn(model(x), y)
            batch_loss.backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
            if after_step is not None:
                after_step(model)
            total_loss += batch_loss.item() * len(idx)
            seen += len(idx)
            if step % 20 == 0:
                bar.set_postfix(loss=f"{total_loss / seen:.4f}")
        record = {"epoch": epoch + 1, "loss": total_loss / max(seen, 1)}
        if val_data is not None:
            record["val_accuracy"] = evaluate(model, val_data)
        if progress:
            tqdm.write(f"{desc} epoch {epoch + 1}/{config.epochs}: " +
                       ", ".join(f"{k} {v:.4f}" for k, v in record.items() if k != "epoch"))
        history.append(record)
    model.eval()
    return history


@torch.no_grad()
def predict(model: nn.Module, x: np.ndarray, batch_size: int = 1000) -> np.ndarray:
    """Model outputs for all of `x`, in eval mode, as a numpy array."""
    model.eval()
    out = [model(torch.from_numpy(np.ascontiguousarray(x[i:i + batch_size], dtype=np.float32))).numpy()
           for i in range(0, len(x), batch_size)]
    return np.concatenate(out) if out else np.zeros((0,), np.float32)


def evaluate(model: nn.Module, data: Data, batch_size: int = 1000) -> float:
    """Top-1 accuracy in percent."""
    x, y = data
    if len(x) == 0:
        raise ValueError("cannot evaluate on an empty data set")
    pred = predict(model, x, batch_size).argmax(axis=1)
    return float((pred == np.asarray(y)).mean() * 100.0)


# ---------------------------------------------------------------------------------------- checkpoints


def cache_dir() -> Path:
    """$DEEPSLIM_CACHE/checkpoints, else ~/.cache/deepslim/checkpoints."""
    root = os.environ.get("DEEPSLIM_CACHE") or (Path.home() / ".cache" / "deepslim")
    return Path(root) / "checkpoints"


def config_key(model_name: str, config: dict[str, Any]) -> str:
    """`<model>-<12 hex digits of the config's hash>`; the same config always gives the same key."""
    blob = json.dumps({"model": model_name, **config}, sort_keys=True, default=str)
    return f"{model_name}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def checkpoint_path(model_name: str, config: dict[str, Any], directory: str | os.PathLike | None = None) -> Path:
    return Path(directory or cache_dir()) / f"{config_key(model_name, config)}.pt"


def save_checkpoint(model: nn.Module, path: str | os.PathLike, metadata: dict[str, Any]) -> Path:
    """Write the state dict and metadata atomically (a temporary file, then a rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    torch.save({"state_dict": model.state_dict(), "metadata": metadata}, tmp)
    os.replace(tmp, path)
    return path


def load_checkpoint(model: nn.Module, path: str | os.PathLike) -> dict[str, Any]:
    """Load weights into `model`; returns the stored metadata."""
    blob = torch.load(Path(path), map_location="cpu", weights_only=True)
    model.load_state_dict(blob["state_dict"])
    model.eval()
    return blob["metadata"]


def train_or_load(
    model_name: str,
    model: nn.Module,
    train_data: Data,
    val_data: Data | None,
    config: TrainConfig,
    *,
    data_tag: str = "",
    directory: str | os.PathLike | None = None,
    progress: bool = True,
) -> tuple[dict[str, Any], Path]:
    """Train `model` with `config` unless a checkpoint for the same model, config and data exists.

    `data_tag` names the training data (e.g. "fashion-mnist/val5000") so different data never shares
    a checkpoint. Returns the checkpoint metadata and its path.
    """
    key_config = {**asdict(config), "data": data_tag}
    path = checkpoint_path(model_name, key_config, directory)
    if path.exists():
        meta = load_checkpoint(model, path)
        if progress:
            tqdm.write(f"{model_name}: loaded {path}")
        return meta, path
    history = fit(model, train_data, val_data, config=config, progress=progress, desc=model_name)
    meta = {"model": model_name, "config": key_config, "history": history}
    if val_data is not None:
        meta["val_accuracy"] = evaluate(model, val_data)
    save_checkpoint(model, path, meta)
    return meta, path
