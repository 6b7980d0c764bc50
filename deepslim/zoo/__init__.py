"""Model definitions written here (no torchvision), built by name: `get("lenet5")`.

Models use plain nn.Conv2d / nn.Linear / nn.ReLU / nn.MaxPool2d / nn.Flatten / nn.Softmax modules
so the torch front end can trace them, and expose `input_shape` (C, H, W) as a class attribute.
"""

from __future__ import annotations

import importlib

# name -> (module, class); modules are imported on first use so listing names needs no torch.
_REGISTRY: dict[str, tuple[str, str]] = {
    "lenet300": ("deepslim.zoo.lenet300", "LeNet300"),
    "lenet5": ("deepslim.zoo.lenet5", "LeNet5"),
    "facenet1m": ("deepslim.zoo.facenet1m", "FaceNet1M"),
    "squeezenet1_1": ("deepslim.zoo.squeezenet", "SqueezeNet1_1"),
    "squeezenet1_1_fmnist": ("deepslim.zoo.squeezenet", "SqueezeNet1_1FMNIST"),
    "mobilenet_v1": ("deepslim.zoo.mobilenet_v1", "MobileNetV1"),
    "mobilenet_v1_fmnist": ("deepslim.zoo.mobilenet_v1", "MobileNetV1FMNIST"),
    "mobilenet_v2": ("deepslim.zoo.mobilenet_v2", "MobileNetV2"),
    "mobilenet_v2_fmnist": ("deepslim.zoo.mobilenet_v2", "MobileNetV2FMNIST"),
    "shufflenet_v2": ("deepslim.zoo.shufflenet_v2", "ShuffleNetV2"),
    "shufflenet_v2_fmnist": ("deepslim.zoo.shufflenet_v2", "ShuffleNetV2FMNIST"),
    "resnet18": ("deepslim.zoo.resnet18", "ResNet18"),
    "resnet18_fmnist": ("deepslim.zoo.resnet18", "ResNet18FMNIST"),
    "efficientnet_lite0": ("deepslim.zoo.efficientnet_lite", "EfficientNetLite0"),
    "efficientnet_lite0_fmnist": ("deepslim.zoo.efficientnet_lite", "EfficientNetLite0FMNIST"),
    "mobilenet_v3_small": ("deepslim.zoo.mobilenet_v3", "MobileNetV3Small"),
    "mobilenet_v3_small_fmnist": ("deepslim.zoo.mobilenet_v3", "MobileNetV3SmallFMNIST"),
    "seg_mobilenet_v2": ("deepslim.zoo.seg_mobilenet_v2", "SegMobileNetV2"),
    "seg_mobilenet_v2_fmnist": ("deepslim.zoo.seg_mobilenet_v2", "SegMobileNetV2FMNIST"),
}


def names() -> list[str]:
    return sorted(_REGISTRY)


def model_class(name: str):
    if name not in _REGISTRY:
        raise KeyError(f"unknown model {name!r}; known models: {', '.join(names())}")
    module, cls = _REGISTRY[name]
    return getattr(importlib.import_module(module), cls)


def get(name: str, **kwargs):
    """A freshly initialised model; keyword arguments go to its constructor (e.g. num_classes)."""
    return model_class(name)(**kwargs)


__all__ = ["get", "model_class", "names"]
