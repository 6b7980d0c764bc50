"""MobileNet V3-Small (Howard et al. 2019), width 1.0, 224x224: 2,542,856 parameters for 1000 classes.

Table 2 of the paper: a 3x3 stride-2 stem of 16 channels with hard-swish, 11 bottlenecks
(1x1 expansion + BN + act, kxk depthwise + BN + act, optional squeeze-and-excite, linear 1x1
projection + BN; residual add when stride is 1 and channels are unchanged; no expansion conv when
the expansion width equals the input width), a 1x1 conv to 576 + BN + hard-swish, global average
pool, a 1024-wide fully connected layer with hard-swish (no BN), dropout 0.2 and the classifier.

Squeeze-and-excite (section 5.3): global average pool, 1x1 conv to a quarter of the expansion width
(rounded to a multiple of 8) + ReLU, 1x1 conv back + hard-sigmoid, then x * s. The paper's table
also marks SE on the 576-channel conv; like the common reference implementation we leave it out
there, which is what gives 2,542,856 parameters. BN uses eps 1e-3 as in the reference.

`small_input=True` makes the stem stride 1, for 28x28 images (28 -> 14 -> 7 -> 4 -> 2).
"""

from __future__ import annotations

from torch import nn

# kernel, expansion width, output channels, squeeze-excite, hard-swish (else ReLU), stride
_SMALL = [(3, 16, 16, True, False, 2), (3, 72, 24, False, False, 2), (3, 88, 24, False, False, 1),
          (5, 96, 40, True, True, 2), (5, 240, 40, True, True, 1), (5, 240, 40, True, True, 1),
          (5, 120, 48, True, True, 1), (5, 144, 48, True, True, 1), (5, 288, 96, True, True, 2),
          (5, 576, 96, True, True, 1), (5, 576, 96, True, True, 1)]


def _make_divisible(v: float, divisor: int = 8) -> int:
    r = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return r + divisor if r < 0.9 * v else r


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, act: str | None = "hswish"):
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout, eps=1e-3),
    ]
    if act == "hswish":
        layers.append(nn.Hardswish())
    elif act == "relu":
        layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        squeeze = _make_divisible(channels / 4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.relu = nn.ReLU()
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.gate = nn.Hardsigmoid()

    def forward(self, x):
        s = self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))
        return x * s


class Bottleneck(nn.Module):
    def __init__(self, cin: int, kernel: int, expand: int, cout: int, se: bool, hswish: bool,
                 stride: int) -> None:
        super().__init__()
        act = "hswish" if hswish else "relu"
        self.use_residual = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != cin:
            layers.append(_conv_bn(cin, expand, 1, act=act))
        layers.append(_conv_bn(expand, expand, kernel, stride=stride, groups=expand, act=act))
        if se:
            layers.append(SqueezeExcite(expand))
        layers.append(_conv_bn(expand, cout, 1, act=None))
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_residual:  # fixed at construction
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV3Small(nn.Module):
    input_shape = (3, 224, 224)

    def __init__(self, num_classes: int = 1000, in_channels: int = 3, width_mult: float = 1.0,
                 small_input: bool = False, dropout: float = 0.2) -> None:
        super().__init__()
        self.input_shape = (in_channels, *type(self).input_shape[1:])
        channels = _make_divisible(16 * width_mult)
        layers: list[nn.Module] = [_conv_bn(in_channels, channels, 3, stride=1 if small_input else 2)]
        for kernel, expand, cout, se, hswish, stride in _SMALL:
            expand, cout = _make_divisible(expand * width_mult), _make_divisible(cout * width_mult)
            layers.append(Bottleneck(channels, kernel, expand, cout, se, hswish, stride))
            channels = cout
        last_conv = 6 * channels  # 576 at width 1.0
        layers.append(_conv_bn(channels, last_conv, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(
            nn.Linear(last_conv, 1024),
            nn.Hardswish(),
            nn.Dropout(dropout),
            nn.Linear(1024, num_classes),
        )
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0.0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(self.flatten(self.pool(self.features(x))))


class MobileNetV3SmallFMNIST(MobileNetV3Small):
    """MobileNet V3-Small for Fashion-MNIST: 1x28x28 input, 10 classes, stride-1 stem."""

    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 10, in_channels: int = 1, width_mult: float = 1.0,
                 small_input: bool = True, dropout: float = 0.2) -> None:
        super().__init__(num_classes=num_classes, in_channels=in_channels, width_mult=width_mult,
                         small_input=small_input, dropout=dropout)
