"""BERT's uncased WordPiece tokenizer in plain Python: a pre-trained BERT needs the ids it was trained on,
and this gives them without the ``transformers``/``tokenizers`` packages, which nothing else here needs."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import numpy as np

#: WordPiece leaves a word longer than this as one [UNK] (as BERT's tokenizer does).
MAX_WORD_CHARS = 100
#: BERT's position table: no sequence is longer (a model may set a shorter ``max_len``).
BERT_MAX_LEN = 512
#: Unicode blocks of CJK ideographs, which BERT splits into one word each.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


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
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


class WordPiece:
    """BERT's uncased tokenizer (``BertTokenizer``, do_lower_case): basic split, then greedy WordPiece.

    Basic: drop control characters, space out CJK ideographs, split on whitespace, lower-case,
    strip accents (NFD without combining marks), split off every punctuation character.
    WordPiece: longest vocabulary prefix first, continuations as ``##piece``; a word with an
    unmatched remainder or over :data:`MAX_WORD_CHARS` characters becomes ``[UNK]``.
    Sequences are cut at ``max_len`` ids unless a call gives another length.
    """

    def __init__(self, vocab: Path, max_len: int = BERT_MAX_LEN) -> None:
        tokens = vocab.read_text(encoding="utf-8").split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        self.vocab = {t: i for i, t in enumerate(tokens)}
        self.max_len = max_len
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

    def encode(self, text: str, max_len: int | None = None) -> list[int]:
        """``[CLS] pieces [SEP]``, the pieces truncated so the whole is at most ``max_len`` ids."""
        ids = [i for w in self.words(text) for i in self.pieces(w)]
        return [self.cls, *ids[:(max_len or self.max_len) - 2], self.sep]

    def batch(self, texts: list[str], max_len: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``input_ids``, ``token_type_ids`` (zeros) and ``attention_mask``, int64 (B, longest), [PAD]-padded."""
        seqs = [self.encode(t, max_len) for t in texts]
        t = max(len(s) for s in seqs)
        ids = np.full((len(seqs), t), self.pad, np.int64)
        mask = np.zeros((len(seqs), t), np.int64)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = s
            mask[i, :len(s)] = 1
        return ids, np.zeros_like(ids), mask
