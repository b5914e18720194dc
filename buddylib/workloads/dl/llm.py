"""LLM-era memory (suite ``llm``, beyond the paper, issue 23): what a GPU holds when it serves or trains a
transformer in bf16 today.

* ``minilm_kv``: **serving**. The real pre-trained all-MiniLM-L6-v2 (``buddylib.workloads.dl.minilm``) loaded
  as a serving stack loads a checkpoint into bf16 (each fp32 weight rounded to nearest even), running on
  passages of the pydoc topics; a snapshot holds the bf16 weights and the **KV cache**, the keys and values
  every layer computed for every token of the batch, laid out as a decoder's cache is (``kv.<layer>.key`` and
  ``.value``, bf16, batch x heads x tokens x head dim). Each step is another (batch, length) point of a grid,
  so the snapshots hold caches of several sequence lengths and batch sizes. MiniLM is an encoder: its keys
  and values are those a decoder of its size and training would cache, computed the same way (the token's
  hidden state times the layer's key and value weights, plus bias), not those of a decoder itself.
  Products are summed in fp32 and rounded to bf16, as tensor cores do
  (:class:`~buddylib.workloads.dl.base.HalfMatmulsInFloat`). Its access profile is one *decode step*: each
  layer streams its weights once for the whole batch and reads every sequence's cache, then appends one
  token's key and value.
* ``gpt_bf16``: **training**. A GPT-2-layout decoder (``TransformerLM``, ``buddylib/workloads/dl/lm.py``) over a
  real sub-word vocabulary, MiniLM's 30,522 WordPiece pieces, on the pydoc topics so tokenised; AdamW
  (betas 0.9/0.95, weight decay 0.1 on matrices only, as GPT-2/3 and nanoGPT), bf16 autocast with fp32
  master weights: fp32 weights, gradients and both moments, bf16 copies of the matrices autocast made
  (``half_weights``) and mostly-bf16 saved activations, as a mixed-precision LLM training holds them.
  Small models are dominated by their embedding table (tied to the output layer): 70% of the parameters at
  the default width, as 31% of GPT-2 small's; a 7B model's is ~2%.

Both need the model package of ``minilm`` (its vocabulary; ``minilm_kv`` its weights too).
"""

from __future__ import annotations

import functools
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from buddylib.workloads._registry import register
from buddylib.workloads.base import QUICK_LIMIT, SCALES, Access, AccessProfile, Kernel, Workload
from buddylib.workloads.dl import minilm
from buddylib.workloads.dl.base import HalfMatmulsInFloat, deterministic_torch, host_array
from buddylib.workloads.dl.data import corpus
from buddylib.workloads.dl.lm import LanguageModel, TransformerLM


@functools.cache
def wordpiece_corpus() -> np.ndarray:
    """The pydoc topics as MiniLM's WordPiece ids (int64, read-only), paragraph by paragraph with ``[SEP]``
    between: the token stream both workloads draw from (~150,000 tokens, tokenised once a process)."""
    tok = minilm.tokenizer()
    text = corpus().tobytes().decode("utf-8")
    ids: list[int] = []
    for para in text.split("\n\n"):
        ids += [i for w in tok.words(para) for i in tok.pieces(w)]
        ids.append(tok.sep)
    arr = np.asarray(ids, np.int64)
    arr.flags.writeable = False
    return arr


def windows(n: int, length: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` random windows of ``length`` consecutive corpus tokens (:func:`wordpiece_corpus`).

    Parameters
    ----------
    n, length : int
    rng : numpy.random.Generator
        Draws the windows' starts.

    Returns
    -------
    numpy.ndarray
        int64, n x length.
    """
    data = wordpiece_corpus()
    starts = rng.integers(0, data.size - length, n)
    return data[starts[:, None] + np.arange(length)[None, :]]


# -- serving: weights and KV cache ---------------------------------------------------------------
@register
class MiniLMKVCache(Workload):
    """all-MiniLM-L6-v2 served in bf16: the weights and the KV cache of a batch, one (batch, length) per step.

    ``GRID``: the sequence lengths and batch sizes, each step the next (length, batch), lengths fastest. The
    default's batches scale with the footprint ("large" 8x the default's). Sequences are ``[CLS]`` + corpus
    window + ``[SEP]``, all of the step's length (no padding, as a cache of running sequences holds no pad).
    """

    name = "minilm_kv"
    proxies = "LLM serving in bf16: pre-trained weights and the KV cache (all-MiniLM-L6-v2's keys and values)"
    suite: ClassVar[str] = "llm"
    compress_threads: ClassVar[int | None] = 1
    QUICK: ClassVar[dict[str, tuple[int, ...]]] = dict(lengths=(16, 32, 64), batches=(1, 2))
    DEFAULT: ClassVar[dict[str, tuple[int, ...]]] = dict(lengths=(32, 64, 128, 256), batches=(4, 16))

    @classmethod
    def missing(cls) -> str | None:
        return minilm.MiniLMInference.missing()

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        """Load the model in bf16, lay out the grid (``QUICK`` up to the quick limit, else ``DEFAULT`` with its
        batches scaled by the footprint) and draw the first batch.

        Parameters
        ----------
        footprint : int
            Bytes.
        rng : numpy.random.Generator
            Draws the batches.
        """
        self.rng = rng
        if footprint <= QUICK_LIMIT:
            cfg = dict(self.QUICK)
        else:
            f = footprint / SCALES["default"]
            cfg = dict(self.DEFAULT, batches=tuple(max(1, round(b * f)) for b in self.DEFAULT["batches"]))
        self.grid = [(length, b) for b in cfg["batches"] for length in cfg["lengths"]]
        self.n_steps = len(self.grid)
        self.model = minilm.load_model().to(torch.bfloat16)  # round to nearest even, as a serving stack loads it
        self.config = minilm.config()
        self.state = dict(self.model.state_dict())
        self.layers = [f"encoder.layer.{i}" for i in range(len(self.model.encoder.layer))]
        self.kv: dict[str, torch.Tensor] = {}
        self.i = 0
        self._draw()

    def step(self) -> None:
        heads = self.config["num_attention_heads"]
        cache: dict[str, torch.Tensor] = {}

        def keep(name: str):
            def hook(mod: nn.Module, args: tuple[Any, ...], out: torch.Tensor) -> None:
                b, t, d = out.shape  # (batch, tokens, hidden) -> the cache's (batch, heads, tokens, head dim)
                cache[name] = out.reshape(b, t, heads, d // heads).transpose(1, 2).contiguous()
            return hook

        handles = []
        for layer in self.layers:
            att = self.model.get_submodule(f"{layer}.attention.self")
            handles += [att.key.register_forward_hook(keep(f"kv.{layer}.key")),
                        att.value.register_forward_hook(keep(f"kv.{layer}.value"))]
        try:
            with deterministic_torch(), torch.no_grad(), HalfMatmulsInFloat():
                self.model(self.input_ids, torch.zeros_like(self.input_ids), torch.ones_like(self.input_ids))
        finally:
            for h in handles:
                h.remove()
        self.kv = {n: cache[n] for layer in self.layers for n in (f"kv.{layer}.key", f"kv.{layer}.value")}
        self.i += 1
        if self.i < self.n_steps:
            self._draw()

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        out = {n: (host_array(t), "index" if n.endswith("position_ids") else "weights") for n, t in self.state.items()}
        out["input_ids"] = (self.input_ids.numpy(), "input")
        out.update({n: (host_array(t), "kv_cache") for n, t in self.kv.items()})
        return out

    def profile(self) -> AccessProfile:
        """One decode step of the cached batch: per layer, its weights streamed once for the whole batch, every
        sequence's cached keys and values read, one token's appended; the embedding gathered for the new
        tokens. FLOPs: 2 per weight per sequence, 4 x tokens x hidden per sequence for attention."""
        kernels = [Kernel("decode.embeddings", [Access(n, "read") for n in self.state
                                                if n.startswith("embeddings.") and not n.endswith("position_ids")],
                          2.0 * self.config["hidden_size"])]
        b, _, t, _ = next(iter(self.kv.values())).shape if self.kv else (1, 0, 1, 0)
        d = self.config["hidden_size"]
        for layer in self.layers:
            params = [n for n in self.state if n.startswith(f"{layer}.")]
            kv = [f"kv.{layer}.key", f"kv.{layer}.value"] if self.kv else []
            accesses = [Access(n, "read") for n in params]
            accesses += [Access(n, "read") for n in kv]
            accesses += [Access(n, "write", fraction=1.0 / t) for n in kv]
            flops = 2.0 * b * sum(self.state[n].numel() for n in params) + 4.0 * b * t * d
            kernels.append(Kernel(f"decode.{layer}", accesses, flops))
        return AccessProfile(self.name, kernels)

    def _draw(self) -> None:
        """The next step's batch: ``[CLS]`` + a corpus window + ``[SEP]``, of the grid point's length."""
        length, b = self.grid[self.i]
        tok = minilm.tokenizer()
        body = windows(b, length - 2, self.rng)
        self.input_ids = torch.from_numpy(np.concatenate(
            [np.full((b, 1), tok.cls), body, np.full((b, 1), tok.sep)], axis=1).astype(np.int64))


# -- training: a GPT-style decoder in bf16 with AdamW ---------------------------------------------
@register
class GPTBF16Training(LanguageModel):
    """Next-token prediction over MiniLM's WordPiece vocabulary with AdamW, bf16 autocast, fp32 masters."""

    name = "gpt_bf16"
    proxies = "GPT-style LLM training: WordPiece vocabulary, AdamW, bf16 autocast with fp32 master weights"
    suite: ClassVar[str] = "llm"
    autocast: ClassVar[torch.dtype | None] = torch.bfloat16
    WIDTHS = ("d",)
    QUICK: ClassVar[dict[str, Any]] = dict(d=32, layers=2, heads=2, batch=4, seq=32, steps=24, lr=3e-3)
    DEFAULT: ClassVar[dict[str, Any]] = dict(d=256, layers=4, heads=8, batch=8, seq=64, steps=60, lr=1e-3)

    @classmethod
    def missing(cls) -> str | None:
        return minilm.MiniLMInference.missing()

    def build(self) -> nn.Module:
        c = self.cfg
        return TransformerLM(c["d"], c["layers"], c["heads"], c["seq"], vocab=len(minilm.tokenizer().vocab))

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        """AdamW, betas 0.9/0.95, weight decay 0.1 on matrices only (as GPT-2/3 and nanoGPT).

        Parameters
        ----------
        model : torch.nn.Module

        Returns
        -------
        torch.optim.Optimizer
        """
        decay = [p for p in model.parameters() if p.dim() >= 2]
        rest = [p for p in model.parameters() if p.dim() < 2]
        return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                                 lr=self.cfg["lr"], betas=(0.9, 0.95))

    def batch(self) -> tuple[np.ndarray, np.ndarray]:
        w = windows(self.cfg["batch"], self.cfg["seq"] + 1, self.rng)
        return np.ascontiguousarray(w[:, :-1]), np.ascontiguousarray(w[:, 1:]).reshape(-1)
