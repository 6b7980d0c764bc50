"""A small semantic-segmentation net: MobileNet V2 trunk, 1x1 conv head, bilinear upsampling.

The trunk is MobileNet V2 (width 1.0) up to its last bottleneck (320 channels), without the 1x1 conv
to 1280 and without the classifier, as DeepLab v3 uses it on mobile. At output stride 16 (the
default) the stride of the 160-channel stage is replaced by dilation 2 in the depthwise convs that
follow, so a 224x224 input gives a 14x14 feature map; at output stride 32 the trunk is the plain
classifier trunk (7x7). A 1x1 conv (with bias) maps the 320 channels to per-pixel class scores, and
bilinear interpolation (align_corners=False) brings them back to the input size. Output:
(N, num_classes, H, W) logits.

Parameters for 21 classes (PASCAL VOC): 1,811,712 trunk + 6,741 head = 1,818,453, at either output
stride (dilation adds none).

The Fashion-MNIST variant (`seg_mobilenet_v2_fmnist`) takes 1x28x28 with a stride-1 stem and predicts
11 classes per pixel: background and the 10 garment classes. `fmnist_pixel_labels` makes its
targets from the classification labels (pixels brighter than a threshold take the image's class).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from deepslim.zoo.mobilenet_v2 import init_weights, mobilenet_v2_features


class SegMobileNetV2(nn.Module):
    input_shape = (3, 224, 224)

    def __init__(self, num_classes: int = 21, in_channels: int = 3, output_stride: int = 16,
                 width_mult: float = 1.0, small_input: bool = False) -> None:
        super().__init__()
        self.input_shape = (in_channels, *type(self).input_shape[1:])
        self.output_stride = output_stride
        self.features = mobilenet_v2_features(in_channels, width_mult, small_input, output_stride,
                                              last_channel=None)
        channels = self.features[-1].conv[-1][0].out_channels
        self.head = nn.Conv2d(channels, num_classes, 1)
        init_weights(self)

    def forward(self, x):
        size = (x.size(2), x.size(3))
        y = self.head(self.features(x))
        return F.interpolate(y, size=size, mode="bilinear", align_corners=False)


class SegMobileNetV2FMNIST(SegMobileNetV2):
    """Per-pixel Fashion-MNIST: 1x28x28 input, 11 classes (0 = background), stride-1 stem."""

    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 11, in_channels: int = 1, output_stride: int = 16,
                 width_mult: float = 1.0, small_input: bool = True) -> None:
        super().__init__(num_classes=num_classes, in_channels=in_channels, output_stride=output_stride,
                         width_mult=width_mult, small_input=small_input)


def fmnist_pixel_labels(images, labels, threshold: int = 32):
    """uint8 images (N, 28, 28) and labels (N,) -> int64 targets (N, 28, 28): 0 where a pixel is at
    most `threshold`, else the image's label + 1."""
    images = torch.as_tensor(images)
    labels = torch.as_tensor(labels).long().view(-1, 1, 1)
    return torch.where(images > threshold, labels + 1, torch.zeros_like(labels))
