"""Frequent Pattern Compression (Alameldeen & Wood, 2004) per 128-byte entry (SPEC §2.3).

FPC codes each 32-bit little-endian word on its own with a 3-bit prefix naming one of
the patterns that are common in real memory (small integers, zero runs, padded or
repeated bytes), followed by only the bits that pattern needs:

======  ==============================================  ===========
prefix  pattern                                         bits
======  ==============================================  ===========
000     run of 1-8 zero words (+3-bit run length)       6 per run
001     4-bit sign-extended                             7
010     8-bit sign-extended                             11
011     16-bit sign-extended                            19
100     halfword padded with a zero halfword (low 16    19
        bits zero)
101     two halfwords, each a sign-extended byte        19
110     word of four repeated bytes                     11
111     uncompressed                                    35
======  ==============================================  ===========

A nonzero word takes its cheapest matching pattern. Zero words are coded as runs: a
maximal run of z zero words costs ceil(z / 8) run symbols, since the 3-bit length field
counts 1-8. The longest code is 32 uncompressed words, 32 x 35 = 1120 bits, more than the
raw 1024 bits; the layout then stores the entry raw.
"""

from __future__ import annotations

from typing import ClassVar

import numba as nb
import numpy as np

from buddylib.compressors.abc import Compressor, launch, serial

_RUN_BITS = 6
_WORDS = 32


@nb.njit(inline="always")
def _sext_fits(x, half, mask):
    """Whether the uint32 ``x``, read as signed, fits a signed field ``mask`` = 2^k-1 wide."""
    return ((x + half) & np.uint32(0xFFFFFFFF)) <= mask


@nb.njit(inline="always")
def _word_bits(w):
    """Bits of the cheapest non-zero-run pattern for the uint32 word ``w`` (not zero)."""
    if _sext_fits(w, np.uint32(0x8), np.uint32(0xF)):
        return 7
    if _sext_fits(w, np.uint32(0x80), np.uint32(0xFF)):
        return 11
    b = w & np.uint32(0xFF)
    if w == (b | (b << np.uint32(8)) | (b << np.uint32(16)) | (b << np.uint32(24))):
        return 11
    if _sext_fits(w, np.uint32(0x8000), np.uint32(0xFFFF)):
        return 19
    if (w & np.uint32(0xFFFF)) == np.uint32(0):
        return 19
    lo = w & np.uint32(0xFFFF)
    hi = w >> np.uint32(16)
    if ((lo + np.uint32(0x80)) & np.uint32(0xFFFF)) <= np.uint32(0xFF) \
            and ((hi + np.uint32(0x80)) & np.uint32(0xFFFF)) <= np.uint32(0xFF):
        return 19
    return 35


@nb.njit(parallel=True, cache=True)
def _fpc_kernel(words):
    """FPC code bits of every row of a (E, 32) uint32 array."""
    n = words.shape[0]
    out = np.empty(n, dtype=np.uint16)
    for e in nb.prange(n):
        total = 0
        run = 0
        for i in range(words.shape[1]):
            w = words[e, i]
            if w == np.uint32(0):
                run += 1
                continue
            if run:
                total += (run + 7) // 8 * _RUN_BITS
                run = 0
            total += _word_bits(w)
        if run:
            total += (run + 7) // 8 * _RUN_BITS
        out[e] = total
    return out


_fpc_kernel_serial = serial(_fpc_kernel)


class FPC(Compressor):
    """Frequent Pattern Compression over the 32 little-endian 32-bit words of an entry."""

    name: ClassVar[str] = "fpc"
    max_bits: ClassVar[int] = _WORDS * 35

    def _bits(self, entries: np.ndarray) -> np.ndarray:
        return launch(_fpc_kernel, _fpc_kernel_serial, entries.shape[0], entries.view(np.uint32))
