"""A real CUDA training step for `buddy capture`: ResNet-50 as published, batch 64, bf16 autocast, on one GPU.

    buddy capture examples/resnet50_cuda.py --out resnet50-cuda.nc

Needs a CUDA device (it says so in one line where there is none). What it records is what the GPU holds at each
step, copied to the host to compress, with ``torch.cuda.memory_allocated``/``memory_reserved`` beside; the
timing model's slowdown comes from the step's access profile. Two steps (the second has the optimizer's momentum),
a snapshot after each.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from buddylib.workloads.dl.cnn import ResNet50
from buddylib.workloads.dl.data import image_crops

STEPS, BATCH, RES = 2, 64, 224

if not torch.cuda.is_available():
    raise RuntimeError("this example records a CUDA training step and no CUDA device is visible here")

torch.manual_seed(0)
device = torch.device("cuda")
model = ResNet50(1.0).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1 * BATCH / 256, momentum=0.9, weight_decay=1e-4)
loss_fn = nn.CrossEntropyLoss()
images, labels = image_crops(STEPS * BATCH, RES, np.random.default_rng(0))


def loop() -> None:
    for step in range(STEPS):
        part = slice(step * BATCH, (step + 1) * BATCH)
        x = torch.from_numpy(images[part]).to(device, non_blocking=True)
        y = torch.from_numpy(labels[part]).to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
