"""BigLSTM (Jozefowicz et al. 2016, "Exploring the limits of language modeling"), trained as published
where that decides what GPU memory holds.

What decides BigLSTM's memory is its vocabulary: LM1B's 793,471 words give an input embedding and a
softmax table of ``V x 512`` floats each, which dwarf the LSTM. Training touches few of their rows per
step, so what the tables and their optimizer state hold depends on the recipe:

* a **word-level vocabulary with real frequencies**: the ``wordfreq`` package's English list (321,180
  words, ranked by frequency as LM1B's vocabulary is; :func:`~buddylib.workloads.dl.data.english_words`).
  At the paper scale the tables have LM1B's 793,471 rows; rows past the word list keep their initial
  values, as words that never occur do;
* text: the pydoc topics as words (:func:`~buddylib.workloads.dl.data.word_batch`): the real text where
  its word is in the vocabulary, otherwise (code identifiers, 6% of its words) a word drawn by frequency;
* an input embedding looked up row by row, its gradient sparse (the rows of the step's tokens, as
  TensorFlow's ``IndexedSlices`` and PyTorch's ``nn.Embedding(sparse=True)`` hold it);
* a 2-layer LSTM with a linear projection of the hidden state (LSTMP), dropout 0.1;
* a **sampled softmax** (:class:`SampledSoftmax`): 8,192 candidates per step from the **log-uniform
  (Zipfian) sampler**, drawn without repeats, each logit corrected by the log of its expected count, the
  true class's accidental hits removed (``tf.nn.sampled_softmax_loss``); only the candidates' rows of
  the softmax table are read and get a (sparse) gradient;
* **Adagrad** (learning rate 0.2, initial accumulator 0.1) after clipping the global gradient norm at 1:
  an accumulator row no gradient has reached stays exactly 0.1.

Scaled, where a CPU forces it: the LSTM (hidden 1,024 at default scale, 2,048 as LSTM-2048-512 at paper
scale; BIG LSTM's 8,192 would take minutes per step), the batch (32 x 20 at default, 128 x 20 at paper
scale), the vocabulary at default scale (100,000 words: the 1.6 GB tables of the full one take the
paper scale) and the number of steps. The tables set the footprint, not the scale's nominal size: four
100,000 x 512 float tables make the default run about 1 GB, LM1B's about 6.9 GB. Quick scale (tests)
keeps 8,192 words at width 16.
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
from buddylib.workloads.base import SCALES
from buddylib.workloads.dl.base import QUICK_LIMIT, TorchWorkload
from buddylib.workloads.dl.data import word_batch

# Adagrad builds sparse tensors each update; checking their invariants is off by default, said explicitly so
# torch does not warn of it at every step.
torch.sparse.check_sparse_tensor_invariants.disable()

#: LM1B's vocabulary (Chelba et al. 2013, as BigLSTM used it).
LM1B_VOCAB = 793_471


class LogUniformSampler:
    """TensorFlow's ``log_uniform_candidate_sampler`` over ids ``0..vocab-1`` (id = frequency rank):
    ``P(k) = (log(k + 2) - log(k + 1)) / log(vocab + 1)``, drawn as ``floor(exp(u log(vocab + 1))) - 1``."""

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab
        self.log_range = math.log(vocab + 1)

    def probability(self, ids: np.ndarray) -> np.ndarray:
        """``P(k)`` of each id."""
        k = np.asarray(ids, np.float64)
        return (np.log(k + 2) - np.log(k + 1)) / self.log_range

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` independent draws (int64)."""
        k = np.floor(np.exp(rng.random(n) * self.log_range)).astype(np.int64) - 1
        return np.minimum(k, self.vocab - 1)

    def unique(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
        """``n`` distinct ids, drawn until that many differ (``unique=True``), in order of first draw, and
        the number of draws it took (which gives each id's expected count, :meth:`expected_count`)."""
        if not 0 < n <= self.vocab:
            raise ValueError(f"cannot draw {n} distinct ids from a vocabulary of {self.vocab}")
        draws = np.empty(0, np.int64)
        while True:
            draws = np.concatenate([draws, self.draw(max(n, draws.size), rng)])
            _, first = np.unique(draws, return_index=True)
            if first.size >= n:
                order = np.sort(first)[:n]
                return draws[order], int(order[-1]) + 1

    def expected_count(self, ids: np.ndarray, tries: int) -> np.ndarray:
        """Expected times each id is drawn in ``tries`` draws, as the unique sampler counts it: the
        probability it is among them, ``1 - (1 - P(k)) ** tries``."""
        return -np.expm1(tries * np.log1p(-self.probability(ids)))


class SampledSoftmax(nn.Module):
    """Softmax layer (``vocab x width`` weights, a bias per word) trained by sampled softmax.

    Called with ``candidates`` (the ``N`` targets, then the ``S`` sampled ids), their log expected counts
    and the ``N x width`` projected hidden states; returns the mean cross-entropy of each target against
    the sampled ids. Only the candidates' rows are gathered (sparse gradients)."""

    #: Gathers rows of its parameters through its first argument (the access profile reads it so).
    gathers_rows = True

    def __init__(self, vocab: int, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab, width))
        self.bias = nn.Parameter(torch.zeros(vocab, 1))
        nn.init.normal_(self.weight, 0.0, 1.0 / math.sqrt(width))

    def forward(self, candidates: torch.Tensor, log_q: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        n = h.shape[0]
        w = F.embedding(candidates, self.weight, sparse=True)
        b = F.embedding(candidates, self.bias, sparse=True).reshape(-1) - log_q
        true = (h * w[:n]).sum(1) + b[:n]
        sampled = h @ w[n:].T + b[n:]
        sampled = sampled.masked_fill(candidates[:n, None] == candidates[None, n:], torch.finfo(h.dtype).min)
        logits = torch.cat([true[:, None], sampled], 1)
        return F.cross_entropy(logits, torch.zeros(n, dtype=torch.int64))

    def flops(self, args: tuple[Any, ...], out: torch.Tensor) -> float:
        candidates, _, h = args
        return 2.0 * h.shape[0] * candidates.shape[0] * h.shape[1]


class BigLSTMLM(nn.Module):
    """Embedding (sparse gradient) -> dropout -> LSTM with projection -> dropout -> sampled softmax."""

    def __init__(self, vocab: int, emb: int, hidden: int, proj: int, layers: int = 2, dropout: float = 0.1) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb, sparse=True)
        self.drop_in = nn.Dropout(dropout)
        self.lstm = nn.LSTM(emb, hidden, num_layers=layers, proj_size=proj, batch_first=True, dropout=dropout)
        self.drop_out = nn.Dropout(dropout)
        self.softmax = SampledSoftmax(vocab, proj)
        nn.init.uniform_(self.embedding.weight, -0.05, 0.05)

    def forward(self, tokens: torch.Tensor, candidates: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
        with warnings.catch_warnings():  # "LSTM with projections is not supported with oneDNN": the generic path
            warnings.simplefilter("ignore", UserWarning)
            h, _ = self.lstm(self.drop_in(self.embedding(tokens)))
        return self.softmax(candidates, log_q, self.drop_out(h).reshape(-1, h.shape[-1]))


@register
class BigLSTMTraining(TorchWorkload):
    """BigLSTM language-model training (see the module docstring for what is published and what is scaled).

    ``QUICK``/``DEFAULT``/``PAPER``: ``vocab`` (rows of the tables), ``emb`` and ``proj`` widths, LSTM
    ``hidden``, ``batch`` x ``seq`` tokens, ``samples`` per step (at most half the vocabulary), ``steps``,
    and at paper scale the ``recipe``'s batch (Jozefowicz et al.: 128 sequences of 20 words per worker).
    Footprints between quick and paper scale the vocabulary with the footprint (the tables are the
    memory), up to LM1B's.
    """

    name = "biglstm"
    proxies = "BigLSTM language model training on a word vocabulary (paper's DL set)"
    paper_scale = True
    clip_norm = 1.0
    QUICK: ClassVar[dict[str, Any]] = dict(vocab=8192, emb=16, hidden=32, proj=16, batch=4, seq=10, samples=512,
                                           steps=40, lr=0.2)
    DEFAULT: ClassVar[dict[str, Any]] = dict(vocab=100_000, emb=512, hidden=1024, proj=512, batch=32, seq=20,
                                             samples=8192, steps=60, lr=0.2)
    PAPER: ClassVar[dict[str, Any]] = dict(vocab=LM1B_VOCAB, emb=512, hidden=2048, proj=512, batch=128, seq=20,
                                           samples=8192, steps=4, lr=0.2, recipe=128)

    def configure(self, footprint: int) -> None:
        if footprint >= SCALES["paper"]:
            cfg = dict(self.PAPER)
            self.threads, self.compress_threads = 2, None
        elif footprint <= QUICK_LIMIT:
            cfg = dict(self.QUICK)
        else:
            cfg = dict(self.DEFAULT)
            cfg["vocab"] = min(LM1B_VOCAB, round(cfg["vocab"] * footprint / SCALES["default"]))
            cfg["samples"] = min(cfg["samples"], cfg["vocab"] // 2)  # a small vocabulary: half of it sampled
        self.cfg = cfg
        self.n_steps = cfg["steps"]
        self.sampler = LogUniformSampler(cfg["vocab"])
        #: Draws the sampler has made so far, and which rows of the softmax table have been a target or sampled.
        self.tries = 0
        self.target_rows = np.zeros(cfg["vocab"], bool)
        self.sampled_rows = np.zeros(cfg["vocab"], bool)

    def build(self) -> nn.Module:
        c = self.cfg
        return BigLSTMLM(c["vocab"], c["emb"], c["hidden"], c["proj"])

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        return torch.optim.Adagrad(model.parameters(), lr=self.cfg["lr"], initial_accumulator_value=0.1)

    def batch(self) -> tuple[np.ndarray, np.ndarray]:
        x, y = word_batch(self.cfg["batch"], self.cfg["seq"], self.cfg["vocab"], self.rng)
        return x, y.reshape(-1)

    def _next_batch(self) -> None:
        """The batch, then this step's sampled candidates: the targets followed by the sampled ids, and
        the log of each one's expected count."""
        super()._next_batch()
        sampled, tries = self.sampler.unique(self.cfg["samples"], self.rng)
        ids = np.concatenate([self.y.numpy(), sampled])
        self.tries += tries
        self.target_rows[self.y.numpy()] = True
        self.sampled_rows[sampled] = True
        self.candidates = torch.from_numpy(ids)
        self.log_q = torch.from_numpy(np.log(self.sampler.expected_count(ids, tries)).astype(np.float32))

    def inputs(self) -> dict[str, torch.Tensor]:
        return {**super().inputs(), "candidates": self.candidates, "candidate_log_q": self.log_q}

    def loss(self) -> torch.Tensor:
        return self.model(self.x, self.candidates, self.log_q)
