"""Base-Delta-Immediate compression (Pekhimenko et al., PACT 2012) at 128-byte entries (SPEC §2.2).

BDI rests on the observation that the values packed into one cache line (pointers,
array indices, counters, slowly varying data) lie close to each other or close to zero.
An entry is read as ``n = 128 / B`` little-endian B-byte values; each value is stored
as a Δ-byte signed number, either an *immediate* from an implicit zero base or a
*delta* from one explicit base (the first value that is not a small immediate). A
one-bit-per-value mask says which base each value uses. Candidate encodings and sizes:

==============  ==============================  =========
id / name       layout                          bits
==============  ==============================  =========
0 zeros         one byte                        8
1 repeated      one 8-byte value                64
2 b8d1          8-byte base + 16 x 1-byte       64+128+16 = 208
3 b8d2          8-byte base + 16 x 2-byte       64+256+16 = 336
4 b8d4          8-byte base + 16 x 4-byte       64+512+16 = 592
5 b4d1          4-byte base + 32 x 1-byte       32+256+32 = 320
6 b4d2          4-byte base + 32 x 2-byte       32+512+32 = 576
7 b2d1          2-byte base + 64 x 1-byte       16+512+64 = 592
8 uncompressed  the raw entry                   1024
==============  ==============================  =========

The smallest encoding that represents the entry wins; on a tie the lower id wins (so
b8d4 beats b2d1 at 592 bits), which is the order SPEC §2.2 lists them in.

A delta is the B-byte two's-complement (wrapping) difference ``value - base`` read as
signed: that is exactly what a B-byte hardware subtractor computes, and the decoder's
B-byte adder undoes it, ``base + delta mod 2^(8B) == value``, so the encoding is lossless
even where the mathematical difference of the two values would overflow B bytes (e.g.
values on both sides of the signed wrap point).
"""

from __future__ import annotations

from typing import ClassVar

import numba as nb
import numpy as np

from buddylib.compressors.abc import Compressor, launch, serial
from buddylib.entries import as_entries

#: Names of the encoding ids returned by :meth:`BDI.encodings`, by id.
ENCODINGS: tuple[str, ...] = (
    "zeros", "repeated", "b8d1", "b8d2", "b8d4", "b4d1", "b4d2", "b2d1", "uncompressed",
)

#: (base bytes B, delta bytes Δ) of the base+delta encodings ids 2..7.
BASE_DELTA: tuple[tuple[int, int], ...] = ((8, 1), (8, 2), (8, 4), (4, 1), (4, 2), (2, 1))

#: Code length in bits of each encoding id.
ENCODING_BITS: np.ndarray = np.array(
    [8, 64] + [8 * b + 8 * (128 // b) * d + 128 // b for b, d in BASE_DELTA] + [1024], dtype=np.uint16
)

_ZEROS, _REPEATED, _B8D1, _B8D2, _B8D4, _B4D1, _B4D2, _B2D1, _RAW = range(9)


@nb.njit(inline="always")
def _fits(x, half, field_mask, value_mask):
    """Whether the ``value_mask``-wide unsigned ``x``, read as signed, fits a signed field.

    ``half`` = 2^(k-1) and ``field_mask`` = 2^k - 1 for a k-bit field: shifting by ``half``
    maps the signed range [-2^(k-1), 2^(k-1)) onto [0, 2^k), modulo the value width.
    """
    return ((x + half) & value_mask) <= field_mask


@nb.njit(inline="always")
def _base_delta_fits(vals, e, delta_bytes, value_mask):
    """Whether row ``e`` of ``vals`` (unsigned B-byte values) fits B-byte base + Δ-byte deltas."""
    k = 8 * delta_bytes
    half = np.uint64(1) << np.uint64(k - 1)
    field_mask = (np.uint64(1) << np.uint64(k)) - np.uint64(1)
    have_base = False
    base = np.uint64(0)
    for i in range(vals.shape[1]):
        v = np.uint64(vals[e, i])
        if _fits(v, half, field_mask, value_mask):  # immediate from the zero base
            continue
        if not have_base:  # first value that is not an immediate becomes the base
            have_base = True
            base = v
            continue
        # Wrapping B-byte difference, as the hardware subtractor computes it.
        if not _fits((v - base) & value_mask, half, field_mask, value_mask):
            return False
    return True


@nb.njit(parallel=True, cache=True)
def _bdi_kernel(w64, w32, w16, code_bits):
    """Encoding id and code bits of every entry, from its uint64/uint32/uint16 views.

    ``code_bits`` is :data:`ENCODING_BITS`, the length of each encoding id.

    Encodings are tried in increasing size (ties in id order), so the first that fits
    is the answer and random data fails each try within a couple of values.
    """
    n = w64.shape[0]
    enc = np.empty(n, dtype=np.uint8)
    bits = np.empty(n, dtype=np.uint16)
    m64 = np.uint64(0xFFFFFFFFFFFFFFFF)
    m32 = np.uint64(0xFFFFFFFF)
    m16 = np.uint64(0xFFFF)
    for e in nb.prange(n):
        first = w64[e, 0]
        allzero = True
        repeated = True
        for i in range(w64.shape[1]):
            if w64[e, i] != np.uint64(0):
                allzero = False
            if w64[e, i] != first:
                repeated = False
        if allzero:
            c = _ZEROS
        elif repeated:
            c = _REPEATED
        elif _base_delta_fits(w64, e, 1, m64):  # 208 bits
            c = _B8D1
        elif _base_delta_fits(w32, e, 1, m32):  # 320
            c = _B4D1
        elif _base_delta_fits(w64, e, 2, m64):  # 336
            c = _B8D2
        elif _base_delta_fits(w32, e, 2, m32):  # 576
            c = _B4D2
        elif _base_delta_fits(w64, e, 4, m64):  # 592, before b2d1 on the tie
            c = _B8D4
        elif _base_delta_fits(w16, e, 1, m16):  # 592
            c = _B2D1
        else:
            c = _RAW
        enc[e] = c
        bits[e] = code_bits[c]
    return enc, bits


_bdi_kernel_serial = serial(_bdi_kernel)


def _run(entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Encoding ids and bits of a C-contiguous (E, 128) uint8 array (little-endian host)."""
    views = entries.view(np.uint64), entries.view(np.uint32), entries.view(np.uint16)
    return launch(_bdi_kernel, _bdi_kernel_serial, entries.shape[0], *views, ENCODING_BITS)


class BDI(Compressor):
    """Base-Delta-Immediate with one explicit base plus the implicit zero base, at 128 B."""

    name: ClassVar[str] = "bdi"
    max_bits: ClassVar[int] = 1024

    def _bits(self, entries: np.ndarray) -> np.ndarray:
        return _run(entries)[1]

    def encodings(self, data: object) -> np.ndarray:
        """Encoding id chosen for each entry; ``ENCODINGS[id]`` names it (``ENCODINGS``).

        Reported beside the size because which encoding wins (e.g. many b4d1 entries in
        integer index arrays) explains *why* a workload compresses, not only how much.

        Parameters
        ----------
        data : array, bytes or buffer
            Any buffer, cut into 128-byte entries (the last one zero-padded).

        Returns
        -------
        numpy.ndarray
            ``uint8[E]``: each entry's encoding id, 0 (zeros) to 8 (uncompressed).

        Raises
        ------
        TypeError
            ``data`` cannot be read as raw memory.

        Examples
        --------
        >>> import numpy as np
        >>> x = np.r_[np.zeros(32), np.arange(1000, 1032)].astype(np.uint32)  # a zero entry, then indices
        >>> [ENCODINGS[i] for i in BDI().encodings(x)]
        ['zeros', 'b4d1']
        """
        return _run(as_entries(data))[0]
