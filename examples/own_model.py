"""A model of your own, recorded by `buddy capture examples/own_model.py --out mine.nc`.

The convention `buddy capture` reads: this file defines ``model``, ``loop()`` (the steps to record) and, for
training, ``optimizer`` and ``loss_fn``. Here: a small residual network of torchvision-style blocks written by
hand, trained with AdamW under bf16 autocast on crops of real photographs (the ones scikit-image ships), as a
user's own training script would be. The committed recording ``data/fixtures/recorded/own_model.nc`` (notebook
08) is this script's; ``make fixtures`` remakes it.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from buddylib.workloads.dl.data import image_crops

STEPS, BATCH, RES = 3, 8, 32

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)  # so the same script records the same bytes on this machine
torch.set_num_threads(1)


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block: two 3x3 convolutions, batch norm, a projected shortcut on a stride."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class SmallResNet(nn.Module):
    def __init__(self, classes: int = 8, width: int = 16) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(True))
        self.layers = nn.Sequential(BasicBlock(width, width), BasicBlock(width, 2 * width, 2),
                                    BasicBlock(2 * width, 4 * width, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


model = SmallResNet()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
loss_fn = nn.CrossEntropyLoss()
images, labels = image_crops(STEPS * BATCH, RES, np.random.default_rng(0))


def loop() -> None:
    for step in range(STEPS):
        part = slice(step * BATCH, (step + 1) * BATCH)
        x, y = torch.from_numpy(images[part]), torch.from_numpy(labels[part])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
