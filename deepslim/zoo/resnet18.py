"""ResNet-18 (He et al. 2016), 224x224: 11,689,512 parameters for 1000 classes.

Table 1 of the paper: conv1 7x7 stride 2 (64) + BN + ReLU, max pool 3x3 stride 2, four stages of
two basic blocks (two 3x3 conv-BN, ReLU between and after the residual add) with 64, 128, 256 and
512 channels, global average pool, fully connected. Stages 2-4 start with stride 2; their shortcut
is a 1x1 stride-2 conv + BN (option B). Convolutions have no bias.

`small_input=True` replaces conv1 by a 3x3 stride-1 conv and removes the max pool (the paper's
CIFAR practice), for 28x28 images (28 -> 14 -> 7 -> 4).
"""

from __future__ import annotations

from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu2 = nn.ReLU()
        self.downsample = stride != 1 or cin != cout
        if self.downsample:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.relu1(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        shortcut = self.shortcut(x) if self.downsample else x  # fixed at construction
        return self.relu2(y + shortcut)


class ResNet18(nn.Module):
    input_shape = (3, 224, 224)

    def __init__(self, num_classes: int = 1000, in_channels: int = 3, small_input: bool = False) -> None:
        super().__init__()
        self.input_shape = (in_channels, *type(self).input_shape[1:])
        if small_input:
            self.stem = nn.Sequential(nn.Conv2d(in_channels, 64, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(64), nn.ReLU())
        else:
            self.stem = nn.Sequential(nn.Conv2d(in_channels, 64, 7, stride=2, padding=3, bias=False),
                                      nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, stride=2, padding=1))
        stages: list[nn.Module] = []
        channels = 64
        for i, cout in enumerate((64, 128, 256, 512)):
            stride = 1 if i == 0 else 2
            stages.append(nn.Sequential(BasicBlock(channels, cout, stride), BasicBlock(cout, cout, 1)))
            channels = cout
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(channels, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        return self.fc(self.flatten(self.pool(self.stages(self.stem(x)))))


class ResNet18FMNIST(ResNet18):
    """ResNet-18 for Fashion-MNIST: 1x28x28 input, 10 classes, 3x3 stride-1 stem, no max pool."""

    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 10, in_channels: int = 1, small_input: bool = True) -> None:
        super().__init__(num_classes=num_classes, in_channels=in_channels, small_input=small_input)
