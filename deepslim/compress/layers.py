"""Which layers compression methods act on, and per-layer settings keyed by layer name or type.

A layer is an nn.Conv2d (type "conv") or nn.Linear (type "fc"), named as in `model.named_modules()`
(e.g. "fc1", "features.0"). A setting such as `{"conv": 8, "fc": 5, "fc3": 6}` gives each layer the
value under its own name if present, else the value under its type.
"""

from __future__ import annotations

from typing import Mapping, TypeVar

from torch import nn

LAYER_TYPES = ("conv", "fc")
T = TypeVar("T")


def layer_type(module: nn.Module) -> str | None:
    if isinstance(module, nn.Conv2d):
        return "conv"
    if isinstance(module, nn.Linear):
        return "fc"
    return None


def weight_layers(model: nn.Module) -> dict[str, nn.Module]:
    """name -> module for every conv and fc layer, in model order."""
    return {name: m for name, m in model.named_modules() if layer_type(m) is not None}


def check_keys(setting: Mapping[str, object], model: nn.Module, what: str) -> None:
    """Every key must be a layer type or the name of a conv/fc layer of `model`."""
    layers = weight_layers(model)
    for key in setting:
        if key not in LAYER_TYPES and key not in layers:
            raise ValueError(
                f"{what}: unknown layer {key!r}; this model's conv/fc layers are "
                f"{', '.join(layers)} (or use a layer type: {', '.join(LAYER_TYPES)})"
            )


def per_layer(setting: Mapping[str, T], model: nn.Module) -> dict[str, T]:
    """name -> value for the layers that `setting` covers (by name first, then by type)."""
    out = {}
    for name, module in weight_layers(model).items():
        if name in setting:
            out[name] = setting[name]
        elif layer_type(module) in setting:
            out[name] = setting[layer_type(module)]
    return out
