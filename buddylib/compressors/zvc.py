"""Zero-value compression per 128-byte entry, as in cDMA (Rhu et al., HPCA 2018) (SPEC §2.4).

cDMA observed that ReLU activations are mostly exact zeros, and that a bitmask of which
32-bit words are nonzero, followed by just the nonzero words, captures that sparsity with
trivial hardware. Per entry: a 32-bit mask (one bit per little-endian 32-bit word) plus
32 bits for each nonzero word, so 32 + 32·nnz bits; the longest code, 1056 bits for a
dense entry, is longer than the raw entry and is then stored raw.
"""

from __future__ import annotations

from typing import ClassVar

import numba as nb
import numpy as np

from buddylib.compressors.abc import Compressor, launch, serial


@nb.njit(parallel=True, cache=True)
def _zvc_kernel(words):
    """ZVC code bits of every row of a (E, 32) uint32 array."""
    n = words.shape[0]
    out = np.empty(n, dtype=np.uint16)
    for e in nb.prange(n):
        nnz = 0
        for i in range(words.shape[1]):
            if words[e, i] != np.uint32(0):
                nnz += 1
        out[e] = 32 + 32 * nnz
    return out


_zvc_kernel_serial = serial(_zvc_kernel)


class ZVC(Compressor):
    """Zero-value compression: a word mask plus the nonzero 32-bit words."""

    name: ClassVar[str] = "zvc"
    max_bits: ClassVar[int] = 32 + 32 * 32

    def _bits(self, entries: np.ndarray) -> np.ndarray:
        return launch(_zvc_kernel, _zvc_kernel_serial, entries.shape[0], entries.view(np.uint32))
