"""FaceNet-1M: a small face classifier with 1,039,744 parameters (input 1x88x88, 848 identities).

Every convolution has stride 1 and no padding; every pooling window is non-overlapping (stride =
kernel), no padding. These are the settings that give exactly 1,039,744 parameters:

    layer                 output      parameters
    conv1 16@7x7 + ReLU   16x82x82           800
    maxpool 2x2           16x41x41
    conv2 48@6x6 + ReLU   48x36x36        27,696
    maxpool 3x3           48x12x12
    conv3 96@5x5 + ReLU   96x8x8         115,296
    fc1 128 + ReLU        128            786,560   (6,144 inputs)
    fc2 848               848            109,392
    softmax               848

The architecture ends in a softmax, so the model outputs probabilities (train it on log(output) with
NLL loss, or on `logits()`).
"""

from __future__ import annotations

from torch import nn


class FaceNet1M(nn.Module):
    input_shape = (1, 88, 88)

    def __init__(self, num_classes: int = 848) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=7)
        self.relu1 = nn.ReLU()
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(16, 48, kernel_size=6)
        self.relu2 = nn.ReLU()
        self.pool2 = nn.MaxPool2d(3)
        self.conv3 = nn.Conv2d(48, 96, kernel_size=5)
        self.relu3 = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(96 * 8 * 8, 128)
        self.relu4 = nn.ReLU()
        self.fc2 = nn.Linear(128, num_classes)
        self.softmax = nn.Softmax(dim=1)

    def logits(self, x):
        x = self.pool1(self.relu1(self.conv1(x)))
        x = self.pool2(self.relu2(self.conv2(x)))
        x = self.flatten(self.relu3(self.conv3(x)))
        return self.fc2(self.relu4(self.fc1(x)))

    def forward(self, x):
        return self.softmax(self.logits(x))
