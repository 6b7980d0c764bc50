"""LeNet-5 as in Caffe's MNIST example (the variant Deep Compression prunes).

conv 20@5x5 -> maxpool 2 -> conv 50@5x5 -> maxpool 2 -> fc 500 + ReLU -> fc 10. As in Caffe, the
convolutions have no activation of their own. Input 1x28x28; 431,080 parameters. Outputs logits.
"""

from __future__ import annotations

from torch import nn


class LeNet5(nn.Module):
    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, kernel_size=5)  # 28 -> 24
        self.pool1 = nn.MaxPool2d(2)  # 24 -> 12
        self.conv2 = nn.Conv2d(20, 50, kernel_size=5)  # 12 -> 8
        self.pool2 = nn.MaxPool2d(2)  # 8 -> 4
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(50 * 4 * 4, 500)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(500, num_classes)

    def forward(self, x):
        x = self.pool1(self.conv1(x))
        x = self.pool2(self.conv2(x))
        x = self.relu1(self.fc1(self.flatten(x)))
        return self.fc2(x)
