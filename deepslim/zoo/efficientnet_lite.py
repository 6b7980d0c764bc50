"""EfficientNet-Lite0 (the mobile variant of EfficientNet-B0, Tan & Le 2019), 224x224.

Table 1 of the EfficientNet paper gives the B0 layout: a 3x3 stride-2 stem of 32 channels, seven
stages of MBConv blocks (1x1 expansion + BN + act, kxk depthwise + BN + act, linear 1x1 projection
+ BN, residual add when stride is 1 and channels are unchanged; no expansion conv when the ratio is
1), a 1x1 conv to 1280 channels, global average pool, dropout 0.2 and a fully connected layer.
The Lite changes (tensorflow/tpu, models/official/efficientnet/lite): no squeeze-and-excite,
ReLU6 instead of swish, and the stem and head keep 32 and 1280 channels at every scale.
Stochastic depth (drop connect) is a training aid of the reference and is left out; it has no
parameters. 4,652,008 parameters for 1000 classes, the published figure.

`small_input=True` makes the stem stride 1, for 28x28 images (28 -> 14 -> 7 -> 4 -> 2).
"""

from __future__ import annotations

from torch import nn

# (expansion, kernel, first stride, output channels, repeats) of the seven B0 stages
_B0_STAGES = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
              (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, act: bool = True):
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if act:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class MBConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = cin * expand_ratio
        self.use_residual = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(_conv_bn(cin, hidden, 1))
        layers.append(_conv_bn(hidden, hidden, kernel, stride=stride, groups=hidden))
        layers.append(_conv_bn(hidden, cout, 1, act=False))
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_residual:  # fixed at construction
            return x + self.conv(x)
        return self.conv(x)


class EfficientNetLite0(nn.Module):
    input_shape = (3, 224, 224)

    def __init__(self, num_classes: int = 1000, in_channels: int = 3, small_input: bool = False,
                 dropout: float = 0.2) -> None:
        super().__init__()
        self.input_shape = (in_channels, *type(self).input_shape[1:])
        channels = 32
        blocks: list[nn.Module] = [_conv_bn(in_channels, channels, 3, stride=1 if small_input else 2)]
        for expand, kernel, stride, cout, repeats in _B0_STAGES:
            for i in range(repeats):
                blocks.append(MBConv(channels, cout, kernel, stride if i == 0 else 1, expand))
                channels = cout
        blocks.append(_conv_bn(channels, 1280, 1))
        self.features = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(1280, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.Linear):
                nn.init.uniform_(m.weight, -1.0 / m.out_features ** 0.5, 1.0 / m.out_features ** 0.5)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.fc(self.dropout(self.flatten(self.pool(self.features(x)))))


class EfficientNetLite0FMNIST(EfficientNetLite0):
    """EfficientNet-Lite0 for Fashion-MNIST: 1x28x28 input, 10 classes, stride-1 stem."""

    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 10, in_channels: int = 1, small_input: bool = True,
                 dropout: float = 0.2) -> None:
        super().__init__(num_classes=num_classes, in_channels=in_channels, small_input=small_input,
                         dropout=dropout)
