"""ShuffleNet V2 (Ma et al. 2018), 1.0x, 224x224: 2,278,604 parameters for 1000 classes.

Table 5 of the paper: conv1 3x3 stride 2 (24 channels) + max pool 3x3 stride 2, three stages of
4, 8 and 4 units (116, 232, 464 channels at 1.0x), conv5 1x1 to 1024, global average pool, fully
connected. Figure 3: a basic unit splits the channels in half, passes one half through
1x1 conv-BN-ReLU, 3x3 depthwise conv-BN, 1x1 conv-BN-ReLU, concatenates it with the untouched half
and shuffles the channels (2 groups); the down-sampling unit (first of each stage) feeds the whole
input to two branches (3x3 stride-2 depthwise + 1x1 on the left, the three-layer branch with a
stride-2 depthwise on the right) so the channels double. Convolutions have no bias.

`width` picks 0.5, 1.0, 1.5 or 2.0 (Table 5). `small_input=True` makes conv1 stride 1 and removes
the max pool, for 28x28 images (28 -> 14 -> 7 -> 4).
"""

from __future__ import annotations

import torch
from torch import nn

_STAGE_REPEATS = (4, 8, 4)
_STAGE_CHANNELS = {0.5: (48, 96, 192, 1024), 1.0: (116, 232, 464, 1024),
                   1.5: (176, 352, 704, 1024), 2.0: (244, 488, 976, 2048)}


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, relu: bool = True):
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if relu:
        layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _branch(cin: int, cout: int, stride: int) -> nn.Sequential:
    """1x1 conv-BN-ReLU, 3x3 depthwise conv-BN, 1x1 conv-BN-ReLU."""
    return nn.Sequential(
        _conv_bn(cin, cout, 1),
        _conv_bn(cout, cout, 3, stride=stride, groups=cout, relu=False),
        _conv_bn(cout, cout, 1),
    )


class ChannelShuffle(nn.Module):
    def __init__(self, channels: int, groups: int = 2) -> None:
        super().__init__()
        self.channels = channels
        self.groups = groups

    def forward(self, x):
        n, h, w = x.size(0), x.size(2), x.size(3)
        x = x.view(n, self.groups, self.channels // self.groups, h, w)
        return x.transpose(1, 2).contiguous().view(n, self.channels, h, w)


class ShuffleUnit(nn.Module):
    """Basic unit (stride 1, channels kept) of Figure 3(c)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.half = channels // 2
        self.branch = _branch(self.half, self.half, 1)
        self.shuffle = ChannelShuffle(channels)

    def forward(self, x):
        a = x[:, : self.half]
        b = x[:, self.half :]
        return self.shuffle(torch.cat([a, self.branch(b)], dim=1))


class ShuffleDownUnit(nn.Module):
    """Spatial down-sampling unit of Figure 3(d): both branches see the whole input."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        half = cout // 2
        self.left = nn.Sequential(
            _conv_bn(cin, cin, 3, stride=2, groups=cin, relu=False),
            _conv_bn(cin, half, 1),
        )
        self.right = nn.Sequential(
            _conv_bn(cin, half, 1),
            _conv_bn(half, half, 3, stride=2, groups=half, relu=False),
            _conv_bn(half, half, 1),
        )
        self.shuffle = ChannelShuffle(cout)

    def forward(self, x):
        return self.shuffle(torch.cat([self.left(x), self.right(x)], dim=1))


class ShuffleNetV2(nn.Module):
    input_shape = (3, 224, 224)

    def __init__(self, num_classes: int = 1000, in_channels: int = 3, width: float = 1.0,
                 small_input: bool = False) -> None:
        super().__init__()
        if width not in _STAGE_CHANNELS:
            raise ValueError(f"width must be one of {sorted(_STAGE_CHANNELS)}, got {width}")
        self.input_shape = (in_channels, *type(self).input_shape[1:])
        *stage_channels, last = _STAGE_CHANNELS[width]
        if small_input:
            self.stem = _conv_bn(in_channels, 24, 3, stride=1)
        else:
            self.stem = nn.Sequential(_conv_bn(in_channels, 24, 3, stride=2),
                                      nn.MaxPool2d(3, stride=2, padding=1))
        stages: list[nn.Module] = []
        channels = 24
        for repeats, cout in zip(_STAGE_REPEATS, stage_channels):
            units: list[nn.Module] = [ShuffleDownUnit(channels, cout)]
            units += [ShuffleUnit(cout) for _ in range(repeats - 1)]
            stages.append(nn.Sequential(*units))
            channels = cout
        self.stages = nn.Sequential(*stages)
        self.conv5 = _conv_bn(channels, last, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(last, num_classes)

    def forward(self, x):
        x = self.conv5(self.stages(self.stem(x)))
        return self.fc(self.flatten(self.pool(x)))


class ShuffleNetV2FMNIST(ShuffleNetV2):
    """ShuffleNet V2 1.0x for Fashion-MNIST: 1x28x28 input, 10 classes, stride-1 stem, no max pool."""

    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 10, in_channels: int = 1, width: float = 1.0,
                 small_input: bool = True) -> None:
        super().__init__(num_classes=num_classes, in_channels=in_channels, width=width,
                         small_input=small_input)
