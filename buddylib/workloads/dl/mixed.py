"""Mixed-precision training (beyond the paper): bf16 autocast with fp32 master weights and Adam.

The paper measured fp32 training. Today's training runs the forward and backward in a
16-bit format while the optimizer keeps fp32 master weights and fp32 Adam moments
(Micikevicius et al. 2018, "Mixed precision training"; bf16 needs no loss scaling). GPU
memory then holds a different mix: fp32 parameters, gradients and two Adam moments, bf16
copies of the parameters (kind ``half_weights``) and mostly-bf16 saved activations. These
workloads are the fp32 ones with ``torch.autocast(dtype=torch.bfloat16)`` around the forward
(CPU autocast: convolutions and matmuls in bf16; normalisation, softmax and the loss stay
fp32, as autocast decides) and Adam for every network:

* ``transformer_bf16``: the ``transformer`` language model, same configuration;
* ``resnet50_bf16``: the ``resnet50`` classifier with Adam (lr 1e-3) instead of SGD.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

from buddylib.workloads._registry import register
from buddylib.workloads.dl.cnn import ResNet50Training
from buddylib.workloads.dl.lm import TransformerTraining


@register
class TransformerBF16Training(TransformerTraining):
    name = "transformer_bf16"
    suite = "dl-extra"
    proxies = "Transformer language model, bf16 mixed precision (beyond the paper)"
    autocast: ClassVar[torch.dtype | None] = torch.bfloat16


@register
class ResNet50BF16Training(ResNet50Training):
    name = "resnet50_bf16"
    suite = "dl-extra"
    proxies = "ResNet-50 training, bf16 mixed precision with Adam (beyond the paper)"
    autocast: ClassVar[torch.dtype | None] = torch.bfloat16
    QUICK: ClassVar[dict[str, Any]] = {**ResNet50Training.QUICK, "lr": 1e-3}
    DEFAULT: ClassVar[dict[str, Any]] = {**ResNet50Training.DEFAULT, "lr": 1e-3}

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adam(model.parameters(), lr=self.cfg["lr"])
