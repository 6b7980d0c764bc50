"""MobileNet V2 (Sandler et al. 2018), width 1.0, 224x224: 3,504,872 parameters for 1000 classes.

Table 2 of the paper: a 3x3 stride-2 conv of 32 channels, 17 inverted-residual bottlenecks
(1x1 expansion + BN + ReLU6, 3x3 depthwise + BN + ReLU6, linear 1x1 projection + BN; a residual
add when stride is 1 and the channel count is unchanged; no expansion conv when t = 1), a 1x1 conv
to 1280 channels, global average pool, dropout 0.2 and a fully connected layer. Channel counts are
scaled by `width_mult` and rounded to multiples of 8; the last conv is never narrowed below 1280.

`small_input=True` makes the stem stride 1, for 28x28 images (28 -> 14 -> 7 -> 4 -> 2).
`mobilenet_v2_features` builds the convolutional trunk alone; the segmentation model reuses it
with dilation instead of the last stride.
"""

from __future__ import annotations

from torch import nn

# (expansion t, output channels c, repeats n, first stride s)
_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
             (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def make_divisible(v: float, divisor: int = 8) -> int:
    """Round to the nearest multiple of `divisor`, never going more than 10% below `v`."""
    r = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return r + divisor if r < 0.9 * v else r


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1, dilation: int = 1,
             relu6: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, kernel, stride=stride, padding=dilation * (kernel // 2), dilation=dilation,
                  groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]
    if relu6:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand_ratio: int, dilation: int = 1) -> None:
        super().__init__()
        hidden = cin * expand_ratio
        self.use_residual = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(_conv_bn(cin, hidden, 1))
        layers.append(_conv_bn(hidden, hidden, 3, stride=stride, groups=hidden, dilation=dilation))
        layers.append(_conv_bn(hidden, cout, 1, relu6=False))
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        if self.use_residual:  # fixed at construction, so tracing sees one branch
            return x + self.conv(x)
        return self.conv(x)


def mobilenet_v2_features(in_channels: int = 3, width_mult: float = 1.0, small_input: bool = False,
                          output_stride: int = 32, last_channel: int | None = 1280) -> nn.Sequential:
    """Stem + bottlenecks (+ the 1x1 conv to `last_channel` unless it is None).

    `output_stride` 32 is the classifier; 16 or 8 replace the later strides by dilation (as in
    DeepLab v3), keeping the parameter count. With `small_input` the stem stride is 1, so the trunk
    reduces the input by output_stride / 2.
    """
    if output_stride not in (8, 16, 32):
        raise ValueError(f"output_stride must be 8, 16 or 32, got {output_stride}")
    channels = make_divisible(32 * width_mult)
    stem_stride = 1 if small_input else 2
    layers: list[nn.Module] = [_conv_bn(in_channels, channels, 3, stride=stem_stride)]
    current_stride = 2  # counted as if the stem strides, so output_stride means the same in both modes
    dilation = 1
    for t, c, n, s in _SETTINGS:
        cout = make_divisible(c * width_mult)
        for i in range(n):
            stride = s if i == 0 else 1
            block_dilation = dilation
            if stride > 1 and current_stride * stride > output_stride:
                dilation *= stride  # keep resolution; later depthwise convs see a wider field
                stride = 1
            elif stride > 1:
                current_stride *= stride
            layers.append(InvertedResidual(channels, cout, stride, t, dilation=block_dilation))
            channels = cout
    if last_channel is not None:
        last = make_divisible(last_channel * max(1.0, width_mult))
        layers.append(_conv_bn(channels, last, 1))
    return nn.Sequential(*layers)


class MobileNetV2(nn.Module):
    input_shape = (3, 224, 224)

    def __init__(self, num_classes: int = 1000, in_channels: int = 3, width_mult: float = 1.0,
                 small_input: bool = False, dropout: float = 0.2) -> None:
        super().__init__()
        self.input_shape = (in_channels, *type(self).input_shape[1:])
        self.features = mobilenet_v2_features(in_channels, width_mult, small_input)
        last = self.features[-1][0].out_channels
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(last, num_classes)
        init_weights(self)

    def forward(self, x):
        return self.fc(self.dropout(self.flatten(self.pool(self.features(x)))))


def init_weights(model: nn.Module) -> None:
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.01)
            nn.init.zeros_(m.bias)


class MobileNetV2FMNIST(MobileNetV2):
    """MobileNet V2 for Fashion-MNIST: 1x28x28 input, 10 classes, stride-1 stem."""

    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 10, in_channels: int = 1, width_mult: float = 1.0,
                 small_input: bool = True, dropout: float = 0.2) -> None:
        super().__init__(num_classes=num_classes, in_channels=in_channels, width_mult=width_mult,
                         small_input=small_input, dropout=dropout)
