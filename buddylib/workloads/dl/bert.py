"""A BERT sentence encoder in plain torch (``BertModel`` + sentence-transformers' mean pooling and L2
normalisation), so a pre-trained checkpoint loads by its own tensor names and every allocation of an
inference is named as in the checkpoint. Attention is the explicit (eager) form, so the probabilities
are materialised as before fused kernels; elementwise steps that BERT writes inline (the embedding sum,
residual adds) are modules, so each is a traced kernel."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from buddylib.workloads.dl.base import Add


class Sum(nn.Module):
    """Word + token-type + position embeddings in one elementwise kernel (in that order, as BERT adds them)."""

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        out = xs[0] + xs[1]
        for x in xs[2:]:
            out = out + x
        return out

    def flops(self, args: tuple[Any, ...], out: torch.Tensor) -> float:
        return (len(args) - 1) * float(out.numel())


class Embeddings(nn.Module):
    """BERT embeddings: gathers of the three tables, their sum, LayerNorm (dropout is off in inference)."""

    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        d = c["hidden_size"]
        self.word_embeddings = nn.Embedding(c["vocab_size"], d, padding_idx=c["pad_token_id"])
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], d)
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], d)
        self.sum = Sum()
        self.LayerNorm = nn.LayerNorm(d, eps=c["layer_norm_eps"])
        self.register_buffer("position_ids", torch.arange(c["max_position_embeddings"])[None])

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        pos = self.position_ids[:, :input_ids.shape[1]]
        x = self.sum(self.word_embeddings(input_ids), self.token_type_embeddings(token_type_ids),
                     self.position_embeddings(pos))
        return self.LayerNorm(x)


class AttentionProbs(nn.Module):
    """softmax(Q K^T / sqrt(d_head) + mask) per head: padding keys get the most negative float, as in BERT."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.heads = heads

    def forward(self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, d = q.shape
        q = q.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.heads)
        bias = (1.0 - mask[:, None, None, :].to(scores.dtype)) * torch.finfo(scores.dtype).min
        return F.softmax(scores + bias, dim=-1)

    def flops(self, args: tuple[Any, ...], out: torch.Tensor) -> float:
        b, t, d = args[0].shape
        return 2.0 * b * t * t * d + 6.0 * out.numel()  # Q K^T; scale, mask, softmax


class AttentionContext(nn.Module):
    """probs @ V per head, heads concatenated back to (B, T, d)."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.heads = heads

    def forward(self, probs: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        b, t, d = v.shape
        ctx = probs @ v.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        return ctx.transpose(1, 2).contiguous().view(b, t, d)

    def flops(self, args: tuple[Any, ...], out: torch.Tensor) -> float:
        b, t, d = out.shape
        return 2.0 * b * t * t * d


class SelfAttention(nn.Module):
    """Separate query, key and value projections, then the attention matrix and its product with V."""

    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        d, h = c["hidden_size"], c["num_attention_heads"]
        self.query, self.key, self.value = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.probs = AttentionProbs(h)
        self.context = AttentionContext(h)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.context(self.probs(self.query(x), self.key(x), mask), self.value(x))


class ResidualNorm(nn.Module):
    """BERT's ``*Output`` block: LayerNorm(dense(x) + residual)."""

    def __init__(self, d_in: int, d: int, eps: float) -> None:
        super().__init__()
        self.dense = nn.Linear(d_in, d)
        self.add = Add()
        self.LayerNorm = nn.LayerNorm(d, eps=eps)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.add(self.dense(x), residual))


class Attention(nn.Module):
    """BERT's attention block: self-attention, then its output projection onto the residual."""

    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.self = SelfAttention(c)
        self.output = ResidualNorm(c["hidden_size"], c["hidden_size"], c["layer_norm_eps"])

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x, mask), x)


class Intermediate(nn.Module):
    """The feed-forward expansion: dense to ``intermediate_size``, then exact GELU (the checkpoint's)."""

    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        if c["hidden_act"] != "gelu":
            raise ValueError(f"hidden_act {c['hidden_act']!r}: this BERT implements the exact (erf) GELU only")
        self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])
        self.intermediate_act_fn = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.intermediate_act_fn(self.dense(x))


class Layer(nn.Module):
    """One encoder layer: attention block, then the feed-forward block, each post-LayerNorm."""

    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.attention = Attention(c)
        self.intermediate = Intermediate(c)
        self.output = ResidualNorm(c["intermediate_size"], c["hidden_size"], c["layer_norm_eps"])

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.attention(x, mask)
        return self.output(self.intermediate(x), x)


class Encoder(nn.Module):
    """The stack of encoder layers, each seeing the same attention mask."""

    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.layer = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            x = layer(x, mask)
        return x


class Pooler(nn.Module):
    """BERT's pooler: tanh(dense([CLS] state)); computed by ``BertModel``, unused by the sentence embedding."""

    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])
        self.activation = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(self.dense(x[:, 0]))


class MeanPooling(nn.Module):
    """Mean of the token states over the attention mask (sentence-transformers' Pooling, mean mode)."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        m = mask[:, :, None].to(x.dtype)
        return (x * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)

    def flops(self, args: tuple[Any, ...], out: torch.Tensor) -> float:
        return 2.0 * args[0].numel() + out.numel()


class Normalize(nn.Module):
    """L2 normalisation of each embedding (sentence-transformers' Normalize)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, p=2, dim=1)

    def flops(self, args: tuple[Any, ...], out: torch.Tensor) -> float:
        return 3.0 * out.numel()


class SentenceEncoder(nn.Module):
    """BertModel (embeddings, encoder, pooler; parameters named as in the checkpoint) + mean pooling + L2 norm:
    sentence-transformers' Transformer, Pooling (mean) and Normalize modules."""

    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.embeddings = Embeddings(c)
        self.encoder = Encoder(c)
        self.pooler = Pooler(c)
        self.pooling = MeanPooling()
        self.normalize = Normalize()

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor,
                attention_mask: torch.Tensor) -> torch.Tensor:
        x = self.encoder(self.embeddings(input_ids, token_type_ids), attention_mask)
        self.pooler(x)  # BertModel's pooler_output: computed, then dropped by the sentence embedding
        return self.normalize(self.pooling(x, attention_mask))


def load(config: dict[str, Any], weights: Path) -> SentenceEncoder:
    """The pre-trained network of a BERT ``config.json`` and its ``model.safetensors``, in eval mode: built on
    the meta device, then given the checkpoint's tensors (every one, no more)."""
    from safetensors.torch import load_file

    with torch.device("meta"):
        model = SentenceEncoder(config)
    model.load_state_dict(load_file(weights), strict=True, assign=True)
    return model.eval().requires_grad_(False)
