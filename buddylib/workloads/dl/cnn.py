"""Image classifiers of the paper's DL set, in plain ``torch.nn``, trained with SGD + momentum.

Architectures keep the published layer types, order, activations and normalisation
(AlexNet and VGG-16 without batch norm, ResNet-50 v1.5 bottlenecks [3, 4, 6, 3],
SqueezeNet 1.1 Fire modules, GoogLeNet Inception modules with batch-normalised convolutions
as in torchvision); channel widths (and the fully connected widths) are scaled by a width
multiplier, and the input resolution and batch are small, so they train on a CPU.
At a resolution below 224 the classifier takes the feature map as it is (no adaptive
pooling up to 6x6 or 7x7): the network is the same, shrunk.

Simplified, so that narrow networks learn within a short run: AlexNet and VGG-16 use He
initialisation (see :func:`he_init`), SqueezeNet's classifier bias starts at 1; GoogLeNet
has no auxiliary classifiers (its 5x5 branch is 5x5, as in the paper). Weight decay 5e-4
(AlexNet, VGG) or 1e-4, momentum 0.9, constant learning rate.

Data (see :mod:`buddylib.workloads.dl.data`): a fixed pool of augmented crops of the
photographs bundled with scikit-image, labelled by the photo they come from (8 classes),
mirrored at random each time a crop is drawn; the loss falls as the network learns them.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from buddylib.workloads._registry import register
from buddylib.workloads.base import SCALES
from buddylib.workloads.dl.base import QUICK_LIMIT, Add, Concat, TorchWorkload, scaled, width_factor
from buddylib.workloads.dl.data import PHOTOS, image_crops

N_CLASSES = len(PHOTOS)


def _feature_size(features: nn.Module, res: int) -> int:
    """Flattened size of ``features`` applied to a ``res``x``res`` image."""
    with torch.no_grad():
        return int(features(torch.zeros(1, 3, res, res)).numel())


def he_init(model: nn.Module, last: nn.Linear) -> None:
    """He (Kaiming, fan-in) normal initialisation of convolutions and hidden linear layers, zero biases.

    Narrow ReLU networks without batch norm (AlexNet, VGG) lose their signal layer by layer
    under PyTorch's default or torchvision's N(0, 0.01) initialisation and do not start
    learning within a short run; He initialisation keeps activations at scale. The output
    layer keeps N(0, 0.01), so training starts at a loss of ln(classes).
    """
    for m in model.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            if m is last:
                nn.init.normal_(m.weight, 0, 0.01)
            else:
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class AlexNet(nn.Module):
    """Krizhevsky et al. 2012 (single-tower, torchvision layout): 5 convolutions, 3 max-pools, 3 FC layers."""

    def __init__(self, w: float, hidden: int, res: int, n_classes: int = N_CLASSES) -> None:
        super().__init__()
        c = [scaled(n, w) for n in (64, 192, 384, 256, 256)]
        self.features = nn.Sequential(
            nn.Conv2d(3, c[0], 11, stride=4, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(c[0], c[1], 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Conv2d(c[1], c[2], 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c[2], c[3], 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(c[3], c[4], 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2))
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(
            nn.Dropout(0.5), nn.Linear(_feature_size(self.features, res), hidden), nn.ReLU(inplace=True),
            nn.Dropout(0.5), nn.Linear(hidden, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, n_classes))
        he_init(self, self.classifier[-1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.flatten(self.features(x)))


class VGG16(nn.Module):
    """Simonyan & Zisserman 2015, configuration D: 13 3x3 convolutions in 5 stages, 3 FC layers."""

    CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")

    def __init__(self, w: float, hidden: int, res: int, n_classes: int = N_CLASSES) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in self.CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                cout = scaled(int(v), w)
                layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(inplace=True)]
                cin = cout
        self.features = nn.Sequential(*layers)
        self.flatten = nn.Flatten()
        self.classifier = nn.Sequential(
            nn.Linear(_feature_size(self.features, res), hidden), nn.ReLU(inplace=True), nn.Dropout(0.5),
            nn.Linear(hidden, hidden), nn.ReLU(inplace=True), nn.Dropout(0.5), nn.Linear(hidden, n_classes))
        he_init(self, self.classifier[-1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.flatten(self.features(x)))


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: 1x1 reduce, 3x3 (carrying the stride), 1x1 expand x4, projection shortcut."""

    expansion = 4

    def __init__(self, cin: int, planes: int, stride: int = 1) -> None:
        super().__init__()
        cout = planes * self.expansion
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.add = Add(inplace=True)
        self.relu3 = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu3(self.add(out, x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    """He et al. 2016, ResNet-50: 7x7 stem, max-pool, bottleneck stages [3, 4, 6, 3], global pool, FC."""

    def __init__(self, w: float, n_classes: int = N_CLASSES) -> None:
        super().__init__()
        stem = scaled(64, w)
        self.conv1 = nn.Conv2d(3, stem, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(stem)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        cin = stem
        stages = []
        for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            p = scaled(planes, w)
            layer = []
            for b in range(blocks):
                layer.append(Bottleneck(cin, p, stride if b == 0 else 1))
                cin = p * Bottleneck.expansion
            stages.append(nn.Sequential(*layer))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(cin, n_classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.flatten(self.avgpool(x)))


class Fire(nn.Module):
    """SqueezeNet Fire module: 1x1 squeeze, then parallel 1x1 and 3x3 expands, concatenated."""

    def __init__(self, cin: int, squeeze: int, e1: int, e3: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)
        self.cat = Concat()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return self.cat(self.expand1x1_activation(self.expand1x1(x)), self.expand3x3_activation(self.expand3x3(x)))


class SqueezeNet11(nn.Module):
    """Iandola et al. 2016, SqueezeNet 1.1: 3x3 stem, 8 Fire modules, 1x1 conv classifier, global pool."""

    FIRES = ((16, 64, 64), (16, 64, 64), "M", (32, 128, 128), (32, 128, 128), "M",
             (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256))

    def __init__(self, w: float, n_classes: int = N_CLASSES) -> None:
        super().__init__()
        cin = scaled(64, w)
        layers: list[nn.Module] = [nn.Conv2d(3, cin, 3, stride=2), nn.ReLU(inplace=True),
                                   nn.MaxPool2d(3, 2, ceil_mode=True)]
        for f in self.FIRES:
            if f == "M":
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=True))
            else:
                s, e1, e3 = (scaled(n, w) for n in f)
                layers.append(Fire(cin, s, e1, e3))
                cin = e1 + e3
        self.features = nn.Sequential(*layers)
        final = nn.Conv2d(cin, n_classes, 1)
        self.classifier = nn.Sequential(nn.Dropout(0.5), final, nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1))
        self.flatten = nn.Flatten()
        for m in self.modules():  # torchvision's initialisation ...
            if isinstance(m, nn.Conv2d):
                if m is final:
                    nn.init.normal_(m.weight, 0, 0.01)
                else:
                    nn.init.kaiming_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        # ... except the classifier's bias: at zero, its ReLU (before the global pool) dies within
        # a few SGD steps at narrow width and the loss stays at ln(classes); at 1 it trains
        nn.init.ones_(final.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.flatten(self.classifier(self.features(x)))


class BasicConv2d(nn.Module):
    """Convolution (no bias), batch norm, ReLU: GoogLeNet's unit in torchvision."""

    def __init__(self, cin: int, cout: int, k: int, stride: int = 1, padding: int = 0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class Inception(nn.Module):
    """GoogLeNet Inception module: 1x1 | 1x1-3x3 | 1x1-5x5 | 3x3 max-pool-1x1 branches, concatenated."""

    def __init__(self, cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool: int) -> None:
        super().__init__()
        self.branch1 = BasicConv2d(cin, c1, 1)
        self.branch2 = nn.Sequential(BasicConv2d(cin, c3r, 1), BasicConv2d(c3r, c3, 3, padding=1))
        self.branch3 = nn.Sequential(BasicConv2d(cin, c5r, 1), BasicConv2d(c5r, c5, 5, padding=2))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), BasicConv2d(cin, pool, 1))
        self.cat = Concat()
        self.out_channels = c1 + c3 + c5 + pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cat(self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x))


class GoogLeNet(nn.Module):
    """Szegedy et al. 2015 (Inception v1) with batch-normalised convolutions; no auxiliary classifiers."""

    BLOCKS: ClassVar[dict[str, tuple[int, ...]]] = {
              "3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64),
              "4a": (192, 96, 208, 16, 48, 64), "4b": (160, 112, 224, 24, 64, 64),
              "4c": (128, 128, 256, 24, 64, 64), "4d": (112, 144, 288, 32, 64, 64),
              "4e": (256, 160, 320, 32, 128, 128), "5a": (256, 160, 320, 32, 128, 128),
              "5b": (384, 192, 384, 48, 128, 128)}

    def __init__(self, w: float, n_classes: int = N_CLASSES) -> None:
        super().__init__()
        c64, c192 = scaled(64, w), scaled(192, w)
        self.conv1 = BasicConv2d(3, c64, 7, stride=2, padding=3)
        self.maxpool1 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.conv2 = BasicConv2d(c64, c64, 1)
        self.conv3 = BasicConv2d(c64, c192, 3, padding=1)
        self.maxpool2 = nn.MaxPool2d(3, 2, ceil_mode=True)
        cin = c192
        blocks = {}
        for name, spec in self.BLOCKS.items():
            blocks[name] = Inception(cin, *(scaled(n, w) for n in spec))
            cin = blocks[name].out_channels
        self.inception3a, self.inception3b = blocks["3a"], blocks["3b"]
        self.maxpool3 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.inception4a, self.inception4b, self.inception4c = blocks["4a"], blocks["4b"], blocks["4c"]
        self.inception4d, self.inception4e = blocks["4d"], blocks["4e"]
        self.maxpool4 = nn.MaxPool2d(2, 2, ceil_mode=True)
        self.inception5a, self.inception5b = blocks["5a"], blocks["5b"]
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten()
        self.dropout = nn.Dropout(0.4)
        self.fc = nn.Linear(cin, n_classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, mean=0.0, std=0.01, a=-2, b=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool1(self.conv1(x))
        x = self.maxpool2(self.conv3(self.conv2(x)))
        x = self.maxpool3(self.inception3b(self.inception3a(x)))
        for m in (self.inception4a, self.inception4b, self.inception4c, self.inception4d, self.inception4e):
            x = m(x)
        x = self.inception5b(self.inception5a(self.maxpool4(x)))
        return self.fc(self.dropout(self.flatten(self.avgpool(x))))


class ImageClassifier(TorchWorkload):
    """Training on crops of real photographs; subclasses give the network and per-scale settings.

    ``QUICK``/``DEFAULT``/``PAPER``: width multiplier ``w``, FC width ``hidden`` (AlexNet, VGG), input
    resolution ``res``, ``batch``, crop-pool size ``pool``, ``steps``, learning rate ``lr``.
    Footprints other than quick scale the default widths by sqrt(footprint / default), up to the
    "paper" scale: the network as published (``w`` 1, 4096-wide FC layers, 224x224 inputs), two
    steps from its initialisation, at the batch one GPU holds in its original training recipe (``recipe``:
    the recipe's batch split over its GPUs, or the batch of one forward pass where it accumulates gradients),
    at the recipe's learning rate: what one GPU's memory holds in that training.
    Its kernels are large, so torch and the compressors get both cores there.
    """

    QUICK: ClassVar[dict[str, Any]]
    DEFAULT: ClassVar[dict[str, Any]]
    PAPER: ClassVar[dict[str, Any]]
    weight_decay: ClassVar[float] = 1e-4
    paper_scale = True

    def configure(self, footprint: int) -> None:
        if footprint >= SCALES["paper"]:
            self.cfg = dict(self.PAPER)
            self.threads, self.compress_threads = 2, None
        else:
            cfg = dict(self.QUICK if footprint <= QUICK_LIMIT else self.DEFAULT)
            if footprint > QUICK_LIMIT:
                g = width_factor(footprint)
                cfg["w"] *= g
                cfg["hidden"] = scaled(cfg.get("hidden", 0), g)
            self.cfg = cfg
        cfg = self.cfg
        self.n_steps = cfg["steps"]
        self.pool_x, self.pool_y = image_crops(cfg["pool"], cfg["res"], self.rng)
        self._order = np.zeros(0, np.int64)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=self.cfg["lr"], momentum=0.9, weight_decay=self.weight_decay)

    def batch(self) -> tuple[np.ndarray, np.ndarray]:
        b = self.cfg["batch"]
        if self._order.size < b:  # a new epoch over the crop pool
            self._order = np.concatenate([self._order, self.rng.permutation(len(self.pool_y))])
        idx, self._order = self._order[:b], self._order[b:]
        x = self.pool_x[idx].copy()
        flip = self.rng.random(b) < 0.5
        x[flip] = x[flip, :, :, ::-1]
        return x, self.pool_y[idx].copy()


@register
class AlexNetTraining(ImageClassifier):
    name = "alexnet"
    proxies = "AlexNet training (paper's DL set)"
    weight_decay = 5e-4
    QUICK: ClassVar[dict[str, Any]] = dict(w=1 / 8, hidden=256, res=63, batch=16, pool=64, steps=100, lr=0.01)
    DEFAULT: ClassVar[dict[str, Any]] = dict(w=3 / 4, hidden=1536, res=127, batch=32, pool=512, steps=160, lr=0.001)
    # Krizhevsky et al. 2012: batches of 128, learning rate 0.01; each of its two GPUs holds half the kernels and
    # the whole batch
    PAPER: ClassVar[dict[str, Any]] = dict(w=1, hidden=4096, res=224, batch=128, recipe=128, pool=128, steps=2,
                                           lr=0.01)

    def build(self) -> nn.Module:
        return AlexNet(self.cfg["w"], self.cfg["hidden"], self.cfg["res"])


@register
class VGG16Training(ImageClassifier):
    name = "vgg16"
    proxies = "VGG-16 training (paper's DL set)"
    weight_decay = 5e-4
    QUICK: ClassVar[dict[str, Any]] = dict(w=1 / 16, hidden=256, res=32, batch=16, pool=64, steps=100, lr=0.01)
    DEFAULT: ClassVar[dict[str, Any]] = dict(w=1 / 4, hidden=1024, res=64, batch=32, pool=512, steps=160, lr=0.01)
    # Simonyan & Zisserman 2015: batches of 256 split over four GPUs (their section 3.3), 64 each; lr 0.01
    PAPER: ClassVar[dict[str, Any]] = dict(w=1, hidden=4096, res=224, batch=64, recipe=64, pool=64, steps=2,
                                           lr=0.01)

    def build(self) -> nn.Module:
        return VGG16(self.cfg["w"], self.cfg["hidden"], self.cfg["res"])


@register
class ResNet50Training(ImageClassifier):
    name = "resnet50"
    proxies = "ResNet-50 training (paper's DL set)"
    QUICK: ClassVar[dict[str, Any]] = dict(w=1 / 16, res=32, batch=16, pool=64, steps=80, lr=0.01)
    DEFAULT: ClassVar[dict[str, Any]] = dict(w=1 / 4, res=64, batch=32, pool=512, steps=160, lr=0.02)
    # He et al. 2016: batches of 256, learning rate 0.1, on eight GPUs (Goyal et al. 2017's baseline): 32 each
    PAPER: ClassVar[dict[str, Any]] = dict(w=1, res=224, batch=32, recipe=32, pool=64, steps=2, lr=0.1)

    def build(self) -> nn.Module:
        return ResNet50(self.cfg["w"])


@register
class SqueezeNetTraining(ImageClassifier):
    name = "squeezenet"
    proxies = "SqueezeNet 1.1 training (paper's DL set)"
    QUICK: ClassVar[dict[str, Any]] = dict(w=1 / 4, res=32, batch=16, pool=64, steps=150, lr=0.01)
    DEFAULT: ClassVar[dict[str, Any]] = dict(w=1 / 2, res=112, batch=32, pool=512, steps=160, lr=0.01)
    # SqueezeNet v1.1's released Caffe recipe: forward passes of 32 (its train_val's batch_size), gradients
    # accumulated over 16 (iter_size) for 512
    PAPER: ClassVar[dict[str, Any]] = dict(w=1, res=224, batch=32, recipe=32, pool=64, steps=2, lr=0.01)

    def build(self) -> nn.Module:
        return SqueezeNet11(self.cfg["w"])


@register
class InceptionTraining(ImageClassifier):
    name = "inception"
    proxies = "GoogLeNet / Inception v1 training (paper's DL set)"
    QUICK: ClassVar[dict[str, Any]] = dict(w=1 / 16, res=32, batch=16, pool=64, steps=80, lr=0.02)
    DEFAULT: ClassVar[dict[str, Any]] = dict(w=1 / 2, res=64, batch=32, pool=512, steps=160, lr=0.02)
    # Szegedy et al. 2015 trained asynchronously and state no batch size; BVLC's Caffe reproduction of GoogLeNet
    # (bvlc_googlenet) trains on batches of 32
    PAPER: ClassVar[dict[str, Any]] = dict(w=1, res=224, batch=32, recipe=32, pool=64, steps=2, lr=0.01)

    def build(self) -> nn.Module:
        return GoogLeNet(self.cfg["w"])
