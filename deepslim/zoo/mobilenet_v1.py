"""MobileNet V1 (Howard et al. 2017), width 1.0, 224x224: 4,231,976 parameters for 1000 classes.

Table 1 of the paper: a 3x3 stride-2 conv of 32 channels, then 13 depthwise-separable blocks
(3x3 depthwise conv + BN + ReLU, 1x1 pointwise conv + BN + ReLU), global average pool and a fully
connected layer. Convolutions have no bias (each is followed by batch norm); ReLU as in the paper.

`width_mult` scales every channel count (the paper's alpha). `small_input=True` makes the stem
stride 1, for 28x28 images (28 -> 14 -> 7 -> 4 -> 2 through the four stride-2 blocks).
"""

from __future__ import annotations

from torch import nn

# (output channels, stride) of the 13 depthwise-separable blocks
_BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
           (512, 1), (512, 1), (512, 1), (512, 1), (512, 1), (1024, 2), (1024, 1)]


def _conv_bn_relu(cin: int, cout: int, kernel: int, stride: int, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(),
    )


class DepthwiseSeparable(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.depthwise = _conv_bn_relu(cin, cin, 3, stride, groups=cin)
        self.pointwise = _conv_bn_relu(cin, cout, 1, 1)

    def forward(self, x):
        return self.pointwise(self.depthwise(x))


class MobileNetV1(nn.Module):
    input_shape = (3, 224, 224)

    def __init__(self, num_classes: int = 1000, in_channels: int = 3, width_mult: float = 1.0,
                 small_input: bool = False) -> None:
        super().__init__()
        self.input_shape = (in_channels, *type(self).input_shape[1:])
        channels = int(32 * width_mult)
        layers: list[nn.Module] = [_conv_bn_relu(in_channels, channels, 3, 1 if small_input else 2)]
        for cout, stride in _BLOCKS:
            cout = int(cout * width_mult)
            layers.append(DepthwiseSeparable(channels, cout, stride))
            channels = cout
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(channels, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")

    def forward(self, x):
        return self.fc(self.flatten(self.pool(self.features(x))))


class MobileNetV1FMNIST(MobileNetV1):
    """MobileNet V1 for Fashion-MNIST: 1x28x28 input, 10 classes, stride-1 stem."""

    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 10, in_channels: int = 1, width_mult: float = 1.0,
                 small_input: bool = True) -> None:
        super().__init__(num_classes=num_classes, in_channels=in_channels, width_mult=width_mult,
                         small_input=small_input)
