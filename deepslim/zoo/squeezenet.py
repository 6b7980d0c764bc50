"""SqueezeNet 1.1 (Iandola et al. 2016; the v1.1 layout from the SqueezeNet repository).

Fire module: squeeze 1x1 conv + ReLU, then an expand layer of 1x1 and 3x3 convs (each + ReLU) whose
outputs are concatenated. v1.1 has a 3x3 stem of 64 channels and pools after stem, fire3 and fire5.
The classifier is dropout 0.5 -> 1x1 conv to the classes -> ReLU -> global average pool. No batch
norm. Pooling rounds up (ceil_mode) as in Caffe; at 224x224 this gives the same sizes as rounding
down. 1,235,496 parameters for 1000 classes and 3 input channels.

`small_input=True` makes the stem stride 1 with padding 1, for 28x28 images (28 -> 14 -> 7 -> 3).
"""

from __future__ import annotations

import torch
from torch import nn

# (squeeze, expand 1x1, expand 3x3) for fire2..fire9; "M" is a 3x3 stride-2 max pool.
_FIRES = [(16, 64, 64), (16, 64, 64), "M", (32, 128, 128), (32, 128, 128), "M",
          (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256)]


class Fire(nn.Module):
    def __init__(self, in_channels: int, squeeze: int, expand1x1: int, expand3x3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(in_channels, squeeze, kernel_size=1)
        self.squeeze_relu = nn.ReLU()
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, kernel_size=1)
        self.expand1x1_relu = nn.ReLU()
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, kernel_size=3, padding=1)
        self.expand3x3_relu = nn.ReLU()

    def forward(self, x):
        x = self.squeeze_relu(self.squeeze(x))
        a = self.expand1x1_relu(self.expand1x1(x))
        b = self.expand3x3_relu(self.expand3x3(x))
        return torch.cat([a, b], dim=1)


class SqueezeNet1_1(nn.Module):
    input_shape = (3, 224, 224)

    def __init__(self, num_classes: int = 1000, in_channels: int = 3, small_input: bool = False) -> None:
        super().__init__()
        self.input_shape = (in_channels, *type(self).input_shape[1:])
        stem = (nn.Conv2d(in_channels, 64, kernel_size=3, stride=1, padding=1) if small_input
                else nn.Conv2d(in_channels, 64, kernel_size=3, stride=2))
        layers: list[nn.Module] = [stem, nn.ReLU(), nn.MaxPool2d(3, stride=2, ceil_mode=True)]
        channels = 64
        for spec in _FIRES:
            if spec == "M":
                layers.append(nn.MaxPool2d(3, stride=2, ceil_mode=True))
            else:
                layers.append(Fire(channels, *spec))
                channels = spec[1] + spec[2]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Dropout(0.5),
            nn.Conv2d(channels, num_classes, kernel_size=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        # the final conv starts small, as in the reference (its ReLU would otherwise kill half the logits)
        nn.init.normal_(self.classifier[1].weight, mean=0.0, std=0.01)

    def forward(self, x):
        return self.classifier(self.features(x))


class SqueezeNet1_1FMNIST(SqueezeNet1_1):
    """SqueezeNet 1.1 for Fashion-MNIST: 1x28x28 input, 10 classes, stride-1 stem."""

    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 10, in_channels: int = 1, small_input: bool = True) -> None:
        super().__init__(num_classes=num_classes, in_channels=in_channels, small_input=small_input)
