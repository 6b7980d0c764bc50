"""A YAML recipe -> validated config dataclasses -> the ordered compression steps.

    model: lenet5                 # optional: a deepslim.zoo name
    train: {epochs: 6, lr: 0.001} # optional: how the fp32 model is trained (deepslim.train.TrainConfig)
    prune:
      sparsity: {conv1: 0.34, conv2: 0.88, fc1: 0.92, fc2: 0.81}
      iterations: 3
      epochs_per_iteration: 2
      train: {lr: 0.0005}         # optional TrainConfig options for retraining
    kmeans:
      bits: {conv: 8, fc: 5}      # cluster-index bits per layer type or name
      finetune_epochs: 2
    huffman: true
    index_bits: {conv: 8, fc: 5}  # relative-index bits of the sparse layout; "auto" picks the smallest
    quantize:                     # optional: int8 (deepslim.compress.qat.QuantizeConfig)
      method: minmax              # calibration: minmax | percentile | kl | mse, or per layer {conv: kl}
      keep_fp32: [fc2]            # layers that stay float32
      int16: [conv1]              # layers that run 16x8 (i16 activations); activation_bits: 16 for all
      sensitivity: {budget: 0.5}  # optional: keep the most sensitive layers in fp32 (keep_as: int16:
                                  # run them 16x8) within a budget
      qat: {epochs: 1, train: {lr: 0.0001}, freeze_observers_after: 0.5, freeze_bn_after: 0.5}

Steps run in the order prune, kmeans, quantize; Huffman coding and relative indexing happen when
the model is encoded (`deepslim.compress.encodings`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from deepslim.compress.kmeans import KMeansConfig
from deepslim.compress.layers import check_keys
from deepslim.compress.prune import PruneConfig
from deepslim.compress.qat import QuantizeConfig

KEYS = ("model", "train", "prune", "kmeans", "quantize", "huffman", "index_bits")


class RecipeError(ValueError):
    """A recipe that cannot be used; the message names the offending key."""


@dataclass(frozen=True)
class Recipe:
    model: str | None = None
    train: dict[str, Any] = field(default_factory=dict)
    prune: PruneConfig | None = None
    kmeans: KMeansConfig | None = None
    quantize: QuantizeConfig | None = None
    huffman: bool = True
    index_bits: dict[str, int] | None = field(default_factory=lambda: {"conv": 8, "fc": 5})

    def __post_init__(self) -> None:
        if not isinstance(self.huffman, bool):
            raise RecipeError(f"huffman must be true or false, got {self.huffman!r}")
        if self.index_bits is not None:
            for key, b in self.index_bits.items():
                if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= 16:
                    raise RecipeError(f"index_bits[{key!r}] = {b!r}: index bits must be an integer in 1..16")
        if self.train:
            from deepslim.train import TrainConfig

            try:
                TrainConfig.from_dict(self.train)
            except ValueError as e:
                raise RecipeError(f"train: {e}") from e

    def steps(self) -> list[tuple[str, Any]]:
        """The compression steps in order: [("prune", PruneConfig), ("kmeans", KMeansConfig),
        ("quantize", QuantizeConfig)], those the recipe has."""
        steps = (("prune", self.prune), ("kmeans", self.kmeans), ("quantize", self.quantize))
        return [(name, cfg) for name, cfg in steps if cfg is not None]

    def check(self, model: nn.Module) -> None:
        """Every layer the recipe names must be a conv/fc layer of `model`."""
        for _, cfg in self.steps():
            cfg.check(model)
        if self.index_bits:
            check_keys(self.index_bits, model, "index_bits")


def _section(d: dict[str, Any], cls, name: str):
    if d is None or d is False:
        return None
    if not isinstance(d, dict):
        raise RecipeError(f"{name} must be a mapping, got {d!r}")
    known = set(cls.__dataclass_fields__)
    unknown = set(d) - known
    if unknown:
        raise RecipeError(f"{name}: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
    try:
        return cls(**d)
    except (TypeError, ValueError) as e:
        raise RecipeError(str(e)) from e


def from_dict(d: dict[str, Any]) -> Recipe:
    if not isinstance(d, dict):
        raise RecipeError(f"a recipe must be a mapping, got {type(d).__name__}")
    unknown = set(d) - set(KEYS)
    if unknown:
        raise RecipeError(f"unknown recipe key(s) {sorted(unknown)}; known: {', '.join(KEYS)}")
    index_bits = d.get("index_bits", {"conv": 8, "fc": 5})
    if index_bits == "auto":
        index_bits = None
    elif isinstance(index_bits, int) and not isinstance(index_bits, bool):
        index_bits = {"conv": index_bits, "fc": index_bits}
    elif not isinstance(index_bits, dict):
        raise RecipeError(f"index_bits must be a mapping, an integer or 'auto', got {index_bits!r}")
    train = d.get("train") or {}
    if not isinstance(train, dict):
        raise RecipeError(f"train must be a mapping, got {train!r}")
    return Recipe(
        model=d.get("model"),
        train=train,
        prune=_section(d.get("prune"), PruneConfig, "prune"),
        kmeans=_section(d.get("kmeans"), KMeansConfig, "kmeans"),
        quantize=_section(d.get("quantize"), QuantizeConfig, "quantize"),
        huffman=d.get("huffman", True),
        index_bits=index_bits,
    )


def load(path_or_dict: str | os.PathLike | dict[str, Any]) -> Recipe:
    """A Recipe from a YAML file or an already parsed mapping."""
    if isinstance(path_or_dict, dict):
        return from_dict(path_or_dict)
    import yaml

    path = Path(path_or_dict)
    try:
        d = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise RecipeError(f"{path}: not valid YAML ({e})") from e
    try:
        return from_dict(d)
    except RecipeError as e:
        raise RecipeError(f"{path}: {e}") from e
