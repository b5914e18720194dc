"""The contract every per-entry compressor keeps.

A compressor maps each 128-byte memory entry, on its own, to the length in **bits** of
its compressed code. That length is all the Buddy layout needs: it becomes the number of
32-byte **sectors** the entry occupies, ``ceil(bits / 256)`` clamped to 4 (a code longer
than 1024 bits is stored raw), and an all-zero entry may be flagged in the per-entry
metadata and take 0 sectors. So a compressor implements one thing, ``_bits(entries)``,
over a whole ``(E, 128)`` uint8 array in compiled code; ``bits`` and ``sectors`` are
derived here and are the same for every compressor.

Compressors that can also produce their code (BPC) add ``encode``/``decode``; those
must be exact inverses and their code lengths must equal ``bits``. Compressors are
stateless apart from their constructor options, are named by a string in the registry
(:mod:`buddylib.compressors.registry`) and rebuilt from ``get_config()``, as numcodecs
codecs are.
"""

from __future__ import annotations

import abc
import threading
from typing import Any, ClassVar

import numba as nb
import numpy as np

from buddylib.entries import SECTORS_PER_ENTRY, as_entries

SECTOR_BITS = 256
#: Held around every launch of a parallel (``prange``) kernel: numba's ``workqueue`` threading layer,
#: what it falls back to without OpenMP or TBB, aborts the interpreter when two threads enter
#: parallel code at once (dask's threads analysing several allocations did). Each launch already
#: uses every core, so taking turns costs little.
PARALLEL_LAUNCH = threading.RLock()


class Compressor(abc.ABC):
    """Base class: subclasses set ``name`` and ``max_bits`` and implement ``_bits``."""

    name: ClassVar[str]
    #: Longest code (bits) the compressor can emit; ``bits`` fits in uint16.
    max_bits: ClassVar[int]

    @abc.abstractmethod
    def _bits(self, entries: np.ndarray) -> np.ndarray:
        """Code length in bits of every row of a C-contiguous ``(E, 128)`` uint8 array."""

    def bits(self, data: object) -> np.ndarray:
        """Compressed size in bits of each 128-byte entry of ``data`` (uint16[E])."""
        entries = as_entries(data)
        with PARALLEL_LAUNCH:
            return self._bits(entries)

    def sectors(self, data: object, zero_flag: bool = True) -> np.ndarray:
        """32-byte sectors each entry occupies (uint8[E], 0..4).

        ``zero_flag``: an all-zero entry is marked in metadata and stores 0 sectors.
        """
        entries = as_entries(data)
        with PARALLEL_LAUNCH:
            return sectors_from_bits(self._bits(entries), entries, zero_flag)

    def get_config(self) -> dict[str, Any]:
        """JSON-able description from which :func:`registry.get` rebuilds this compressor."""
        return {"id": self.name}

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def sectors_from_bits(bits: np.ndarray, entries: np.ndarray, zero_flag: bool = True) -> np.ndarray:
    """Sectors per entry from code lengths: ``ceil(bits/256)`` clamped to 4, zeros to 0."""
    entries = as_entries(entries)
    if bits.shape != (entries.shape[0],):
        raise ValueError(f"bits has shape {bits.shape}, expected ({entries.shape[0]},) to match entries")
    with PARALLEL_LAUNCH:
        return _sectors(bits, entries.view(np.uint64), bool(zero_flag))


@nb.njit(parallel=True, cache=True)
def _sectors(bits, words, zero_flag):
    n = bits.shape[0]
    out = np.empty(n, dtype=np.uint8)
    for e in nb.prange(n):
        s = (np.int64(bits[e]) + SECTOR_BITS - 1) // SECTOR_BITS
        if s > SECTORS_PER_ENTRY:
            s = SECTORS_PER_ENTRY
        if zero_flag:
            nz = np.uint64(0)
            for i in range(words.shape[1]):
                nz |= words[e, i]
            if nz == 0:
                s = 0
        out[e] = s
    return out
