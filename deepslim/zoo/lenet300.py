"""LeNet-300-100: a 784-300-100-10 multilayer perceptron with ReLU (LeCun et al., 1998).

266,610 parameters. Outputs logits (no softmax).
"""

from __future__ import annotations

from torch import nn


class LeNet300(nn.Module):
    input_shape = (1, 28, 28)

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(784, 300)
        self.relu1 = nn.ReLU()
        self.fc2 = nn.Linear(300, 100)
        self.relu2 = nn.ReLU()
        self.fc3 = nn.Linear(100, num_classes)

    def forward(self, x):
        x = self.relu1(self.fc1(self.flatten(x)))
        x = self.relu2(self.fc2(x))
        return self.fc3(x)
