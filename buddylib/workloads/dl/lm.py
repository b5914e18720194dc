"""Byte-level language models trained with Adam on real English prose, beside the paper's set (suite
``dl-extra``: never averaged with the paper's networks).

* ``lstm``: BigLSTM's network (Jozefowicz et al. 2016, "Exploring the limits of language
  modeling": embedding, two stacked LSTM layers with a linear projection of the hidden
  state (LSTMP, ``nn.LSTM(proj_size=...)``), dropout) on bytes, with a full softmax and Adam. Not
  BigLSTM's memory: a 256-symbol vocabulary leaves no large, sparsely touched tables, and Adam keeps
  no untouched state; BigLSTM itself, with its word vocabulary, sampled softmax and Adagrad, is
  ``biglstm`` (``buddylib/workloads/dl/biglstm.py``).
* ``transformer``: a decoder-only Transformer (GPT-2 layout, Radford et al. 2019): token and
  learned position embeddings, pre-LayerNorm blocks of causal multi-head self-attention
  (explicit attention matrix, as before fused attention kernels) and a GELU MLP, residual
  connections, final LayerNorm, output projection tied to the token embedding.

Text (see ``buddylib/workloads/dl/data.py``): UTF-8 bytes of the Python documentation
topics shipped with CPython (``pydoc_data.topics``); each step draws random windows; the
loss is next-byte cross-entropy, which falls from ln 256 within tens of steps.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from buddylib.workloads._registry import register
from buddylib.workloads.dl.base import QUICK_LIMIT, Add, TorchWorkload, scaled, width_factor
from buddylib.workloads.dl.data import VOCAB, text_batch


class LSTMLM(nn.Module):
    """Embedding -> dropout -> 2-layer LSTM with projection -> dropout -> softmax layer (logits B*T x V).

    Parameters
    ----------
    emb, hidden, proj : int
        Embedding width, LSTM hidden size and its projection's.
    layers : int
        Stacked LSTM layers.
    dropout : float
    """

    def __init__(self, emb: int, hidden: int, proj: int, layers: int = 2, dropout: float = 0.1) -> None:
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, emb)
        self.drop_in = nn.Dropout(dropout)
        self.lstm = nn.LSTM(emb, hidden, num_layers=layers, proj_size=proj, batch_first=True, dropout=dropout)
        self.drop_out = nn.Dropout(dropout)
        self.softmax = nn.Linear(proj, VOCAB)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of the next byte.

        Parameters
        ----------
        tokens : torch.Tensor
            Byte ids, batch x time.

        Returns
        -------
        torch.Tensor
            (batch x time) x vocabulary.
        """
        with warnings.catch_warnings():  # "LSTM with projections is not supported with oneDNN": the generic path
            warnings.simplefilter("ignore", UserWarning)
            h, _ = self.lstm(self.drop_in(self.embedding(tokens)))
        return self.softmax(self.drop_out(h)).reshape(-1, VOCAB)


class CausalAttention(nn.Module):
    """softmax(Q K^T / sqrt(d) + causal mask) V over heads: the attention matrix is materialised.

    Parameters
    ----------
    heads : int
    context : int
        The longest sequence (the causal mask's side).
    """

    def __init__(self, heads: int, context: int) -> None:
        super().__init__()
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(context, context, dtype=torch.bool)), persistent=False)

    def forward(self, qkv: torch.Tensor) -> torch.Tensor:
        """Attention of the heads.

        Parameters
        ----------
        qkv : torch.Tensor
            Queries, keys and values side by side, batch x time x 3d.

        Returns
        -------
        torch.Tensor
            batch x time x d.
        """
        b, t, three_d = qkv.shape
        d = three_d // 3
        q, k, v = (z.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for z in qkv.split(d, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        att = F.softmax(att.masked_fill(~self.mask[:t, :t], float("-inf")), dim=-1)
        return (att @ v).transpose(1, 2).reshape(b, t, d)

    def flops(self, args: tuple[Any, ...], out: torch.Tensor) -> float:
        """Multiply-adds of QK^T and AV (2 flops each), and the scale, mask and softmax per score.

        Parameters
        ----------
        args, out
            The call's arguments and output (:func:`~buddylib.workloads.dl.base.layer_flops`).

        Returns
        -------
        float
        """
        b, t, d = out.shape
        return 4.0 * b * t * t * d + 6.0 * b * self.heads * t * t  # QK^T and AV; scale, mask, softmax


class Block(nn.Module):
    """Pre-LN Transformer block: x + proj(attn(qkv(ln1 x))), then x + fc2(gelu(fc1(ln2 x))).

    Parameters
    ----------
    d, heads, context : int
        Width, attention heads, longest sequence.
    dropout : float
    """

    def __init__(self, d: int, heads: int, context: int, dropout: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.attn = CausalAttention(heads, context)
        self.proj = nn.Linear(d, d)
        self.drop1 = nn.Dropout(dropout)
        self.add1 = Add()
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.gelu = nn.GELU()
        self.fc2 = nn.Linear(4 * d, d)
        self.drop2 = nn.Dropout(dropout)
        self.add2 = Add()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output.

        Parameters
        ----------
        x : torch.Tensor
            batch x time x d.
        """
        x = self.add1(x, self.drop1(self.proj(self.attn(self.qkv(self.ln1(x))))))
        return self.add2(x, self.drop2(self.fc2(self.gelu(self.fc1(self.ln2(x))))))


class TransformerLM(nn.Module):
    """GPT-2 layout: token + position embeddings, ``layers`` blocks, final LayerNorm, tied output layer.

    Parameters
    ----------
    d, layers, heads, context : int
        Width, blocks, attention heads, longest sequence.
    dropout : float
    vocab : int
        Symbols (bytes unless told).
    """

    def __init__(self, d: int, layers: int, heads: int, context: int, dropout: float = 0.1,
                 vocab: int = VOCAB) -> None:
        super().__init__()
        self.vocab = vocab
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.add = Add()
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.Sequential(*(Block(d, heads, context, dropout) for _ in range(layers)))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight
        for name, p in self.named_parameters():  # GPT-2 initialisation
            if name.endswith("weight") and p.dim() == 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of the next token.

        Parameters
        ----------
        tokens : torch.Tensor
            Token ids, batch x time.

        Returns
        -------
        torch.Tensor
            (batch x time) x vocab.
        """
        pos = torch.arange(tokens.shape[1])
        x = self.drop(self.add(self.wte(tokens), self.wpe(pos)))
        return self.head(self.ln_f(self.blocks(x))).reshape(-1, self.vocab)


class LanguageModel(TorchWorkload):
    """Next-byte prediction on the pydoc topics with Adam; subclasses give the network.

    Beyond the paper's DL set (suite ``dl-extra``): the Transformer is not among its networks, and the
    byte-level LSTM is not BigLSTM as trained (see the module docstring).

    ``QUICK``/``DEFAULT``: widths, ``batch``, sequence length ``seq``, ``steps``, ``lr``.
    Footprints other than quick scale the default widths by sqrt(footprint / default).
    """

    suite: ClassVar[str] = "dl-extra"
    QUICK: ClassVar[dict[str, Any]]
    DEFAULT: ClassVar[dict[str, Any]]
    #: Settings that are widths (scaled with the footprint).
    WIDTHS: ClassVar[tuple[str, ...]] = ()

    def configure(self, footprint: int) -> None:
        """``QUICK`` up to the quick limit, else ``DEFAULT`` with its ``WIDTHS`` scaled (at least 8).

        Parameters
        ----------
        footprint : int
            Bytes.
        """
        cfg = dict(self.QUICK if footprint <= QUICK_LIMIT else self.DEFAULT)
        if footprint > QUICK_LIMIT:
            g = width_factor(footprint)
            cfg.update({k: scaled(cfg[k], g, 8) for k in self.WIDTHS})
        self.cfg = cfg
        self.n_steps = cfg["steps"]

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        """Adam at the configuration's ``lr``.

        Parameters
        ----------
        model : torch.nn.Module

        Returns
        -------
        torch.optim.Optimizer
        """
        return torch.optim.Adam(model.parameters(), lr=self.cfg["lr"])

    def batch(self) -> tuple[np.ndarray, np.ndarray]:
        x, y = text_batch(self.cfg["batch"], self.cfg["seq"], self.rng)
        return x, y.reshape(-1)


@register
class LSTMTraining(LanguageModel):
    name = "lstm"
    proxies = "byte-level LSTM language model training (BigLSTM's network; vocabulary and optimizer not)"
    WIDTHS = ("emb", "hidden", "proj")
    QUICK: ClassVar[dict[str, Any]] = dict(emb=32, hidden=96, proj=32, batch=4, seq=32, steps=40, lr=1e-2)
    DEFAULT: ClassVar[dict[str, Any]] = dict(emb=256, hidden=1024, proj=256, batch=16, seq=32, steps=120, lr=2e-3)

    def build(self) -> nn.Module:
        c = self.cfg
        return LSTMLM(c["emb"], c["hidden"], c["proj"])


@register
class TransformerTraining(LanguageModel):
    name = "transformer"
    proxies = "Transformer (decoder-only) language model training"
    WIDTHS = ("d",)
    QUICK: ClassVar[dict[str, Any]] = dict(d=48, layers=2, heads=2, batch=4, seq=32, steps=40, lr=3e-3)
    DEFAULT: ClassVar[dict[str, Any]] = dict(d=256, layers=4, heads=8, batch=8, seq=64, steps=120, lr=1e-3)

    def build(self) -> nn.Module:
        c = self.cfg
        return TransformerLM(c["d"], c["layers"], c["heads"], c["seq"])
