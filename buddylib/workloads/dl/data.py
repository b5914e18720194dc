"""Real training data that ships inside installed packages, so no workload downloads anything.

Images: the colour (and one grey) photographs bundled with scikit-image (``skimage/data``:
astronaut, coffee, chelsea the cat, motorcycle, rocket, retina, Hubble deep field, camera
man). A sample is a random square crop of one photo (30-70 % of its short side), randomly
mirrored, with brightness/contrast jitter, resized with anti-aliasing and normalised with
the ImageNet channel statistics; its label is the photo it was cut from. Real photographs
give activations and gradients the statistics of real images (smooth regions, edges, sky).

Text: the Python documentation topics shipped with CPython (``pydoc_data.topics``, about
0.5 MB of English prose and code), as UTF-8 bytes: a byte-level language-model corpus; and as
words (:func:`word_corpus`), numbered in a real English vocabulary: the ``wordfreq`` package's
"large" English list (about 320,000 words with their frequencies in a mix of web, subtitle, news
and book text), ranked by frequency as a word-level language model's vocabulary is.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

#: The bundled photographs used as classes, in label order.
PHOTOS = ("astronaut.png", "coffee.png", "chelsea.png", "motorcycle_left.png", "rocket.jpg", "retina.jpg",
          "hubble_deep_field.jpg", "camera.png")
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)
#: Byte-level vocabulary of the text corpus.
VOCAB = 256
#: The word list the word-level vocabulary is drawn from (``wordfreq.get_frequency_list``).
WORD_LIST = ("en", "large")


@functools.cache
def photos() -> tuple[np.ndarray, ...]:
    """The bundled photographs as float32 HxWx3 arrays in [0, 1] (grey ones repeated to 3 channels)."""
    import skimage
    import skimage.io

    folder = Path(skimage.__file__).parent / "data"
    out = []
    for name in PHOTOS:
        img = skimage.io.imread(folder / name)
        if img.ndim == 2:
            img = np.repeat(img[:, :, None], 3, axis=2)
        out.append(np.ascontiguousarray(img[:, :, :3], dtype=np.float32) / 255)
    return tuple(out)


def image_crops(n: int, res: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` augmented ``res``x``res`` crops (float32 N,3,H,W, normalised) and their photo labels (int64).

    Classes are balanced and the order shuffled; the same ``rng`` state gives the same crops.
    Resizing is torch's anti-aliased bilinear interpolation (fast and deterministic on CPU).
    """
    import torch
    from torch.nn import functional as F

    imgs = photos()
    labels = rng.permutation(np.arange(n) % len(imgs)).astype(np.int64)
    x = np.empty((n, 3, res, res), np.float32)
    for i, c in enumerate(labels):
        img = imgs[c]
        h, w = img.shape[:2]
        side = int(rng.uniform(0.3, 0.7) * min(h, w))
        y0, x0 = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
        crop = torch.from_numpy(np.ascontiguousarray(img[y0:y0 + side, x0:x0 + side].transpose(2, 0, 1)))
        crop = F.interpolate(crop[None], size=(res, res), mode="bilinear", antialias=True, align_corners=False)[0]
        crop = crop.numpy()
        if rng.random() < 0.5:
            crop = crop[:, :, ::-1]
        mean = crop.mean()
        crop = np.clip((crop - mean) * rng.uniform(0.8, 1.2) + mean * rng.uniform(0.9, 1.1), 0, 1)
        x[i] = (crop - IMAGENET_MEAN[:, None, None]) / IMAGENET_STD[:, None, None]
    return x, labels


@functools.cache
def corpus() -> np.ndarray:
    """The pydoc topics (sorted by topic name, blank-line separated) as a uint8 array of UTF-8 bytes."""
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[k] for k in sorted(topics))
    arr = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).copy()
    arr.flags.writeable = False
    return arr


def text_batch(batch: int, length: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``batch`` random windows of the corpus: tokens (int64 B,T) and next-byte targets (int64 B,T)."""
    data = corpus()
    starts = rng.integers(0, data.size - length - 1, batch)
    idx = starts[:, None] + np.arange(length + 1)[None, :]
    win = data[idx].astype(np.int64)
    return np.ascontiguousarray(win[:, :-1]), np.ascontiguousarray(win[:, 1:])


@functools.cache
def english_words() -> tuple[tuple[str, ...], np.ndarray]:
    """The English words of :data:`WORD_LIST` by decreasing frequency, and their frequencies (float64,
    per word of running text). ``wordfreq`` stores frequencies in centibel buckets: bucket ``i`` holds the
    words of frequency ``10 ** (-i / 100)``; a word listed twice keeps its first (higher) bucket."""
    import wordfreq

    words: dict[str, float] = {}
    for i, bucket in enumerate(wordfreq.get_frequency_list(*WORD_LIST)):
        for w in bucket:
            words.setdefault(w, 10.0 ** (-i / 100))
    freq = np.fromiter(words.values(), np.float64, len(words))
    freq.flags.writeable = False
    return tuple(words), freq


@functools.cache
def word_corpus(vocab: int) -> np.ndarray:
    """The pydoc topics as words (``wordfreq.tokenize``: lower case, punctuation dropped), each its rank
    among the first ``vocab`` words of :func:`english_words`, or -1 where the text's word is not among them
    (code identifiers such as ``assert_stmt``; :func:`word_batch` fills those by frequency)."""
    from pydoc_data.topics import topics

    import wordfreq

    words, _ = english_words()
    rank = {w: i for i, w in enumerate(words[:vocab])}
    text = "\n\n".join(topics[k] for k in sorted(topics))
    ids = np.array([rank.get(w, -1) for w in wordfreq.tokenize(text, "en")], dtype=np.int64)
    ids.flags.writeable = False
    return ids


@functools.cache
def _word_cdf(vocab: int) -> np.ndarray:
    freq = english_words()[1][:vocab]
    cdf = np.cumsum(freq / freq.sum())
    cdf[-1] = 1.0
    return cdf


def word_batch(batch: int, length: int, vocab: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``batch`` random windows of the word corpus: tokens (int64 B,T) and next-word targets (int64 B,T).

    Tokens are the real text where its word is in the vocabulary; a word that is not (6% of the
    text's words at 100,000 words) is replaced by a word drawn by its frequency, so every position
    holds a real English word with real statistics."""
    data = word_corpus(vocab)
    starts = rng.integers(0, data.size - length - 1, batch)
    win = data[starts[:, None] + np.arange(length + 1)[None, :]]
    missing = win < 0
    win[missing] = np.searchsorted(_word_cdf(vocab), rng.random(int(missing.sum())), side="right")
    return np.ascontiguousarray(win[:, :-1]), np.ascontiguousarray(win[:, 1:])
