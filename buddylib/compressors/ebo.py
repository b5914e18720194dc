"""Exponent-base-offset coding of 16-bit floats, per 128-byte entry (beyond the paper; issue 23).

Why: most of an LLM's GPU memory is bf16 (weights, a KV cache), and BPC, built for 32- and 64-bit
words, finds almost nothing in it (MiniLM's weights cast to bf16: 1.00x). A 16-bit float's sign and
mantissa are close to random, but its exponent is not: the values of one tensor sit in a few binades
around its scale, so neighbouring exponents are close. Whole-tensor coders exploit that with an entropy
code of the exponents (DFloat11, ZipNN); Buddy needs each 128-byte entry coded alone, decodable without
its neighbours and stored in 32-byte sectors, so this code gives each entry one exponent base and a
fixed-width offset per value, with an escape for the rare far exponent, and keeps sign and mantissa raw.

**The code** (``ebo-bf16``: exponent bits ``E = 8``, mantissa bits ``M = 7``; ``ebo-fp16``: ``E = 5``,
``M = 10``). An entry is 64 little-endian 16-bit words ``w_0 .. w_63``; ``s_i = w_i >> 15`` is a value's
sign, ``e_i = (w_i >> M) & (2^E - 1)`` its exponent field and ``m_i = w_i & (2^M - 1)`` its mantissa.
Written MSB first:

==========  ========  ==================================================================================
field       bits      meaning
==========  ========  ==================================================================================
``z``       1         1: a zero mask follows and only the values whose word is not 0 are coded; 0: all 64
mask        64 (z=1)  bit ``i`` (the ``i``-th written) is 1 where ``w_i != 0`` (a negative zero is a value)
                      -- the code ends here when no value is coded (the all-zero entry: 65 bits) --
``b``       E         the largest exponent field of the coded values
``k``       3         the width of an exponent offset, 0..7
per value   ...       for each coded value in order: ``s_i`` (1 bit); the offset ``d_i = b - e_i`` in ``k``
                      bits if ``d_i < 2^k - 1``, else ``2^k - 1`` in ``k`` bits and then ``e_i`` in ``E``
                      bits (an escape); no offset bits when ``k = 0`` (every ``e_i`` is ``b``); ``m_i``
                      (``M`` bits)
==========  ========  ==================================================================================

So with ``n`` values coded and ``x_k`` of them escaped, ``L(z, k) = 1 + 64 z + E + 3 + n (1 + M + k) +
E x_k`` bits (``1 + 64 z`` when ``n = 0``; ``k = 0`` only where every ``d_i = 0``). The encoder writes the
shortest; among equal lengths ``z = 0`` before ``z = 1`` and the smaller ``k`` first. The decoder accepts
exactly what the encoder writes (anything else is a ``ValueError`` naming the entry). Like every code
here, one longer than 1024 bits is stored raw (4 sectors).

Worked examples (bf16; ``tests/test_ebo.py`` checks each):

* an all-zero entry: ``z = 1`` and a mask of zeros, **65 bits** (stored in 0 sectors, flagged zero);
* 64 values of 1.0 (``0x3F80``, ``e = 127``): ``z = 0, b = 127, k = 0``: ``1 + 8 + 3 + 64 * 8 =`` **524
  bits**, 3 sectors;
* 1.0 and -1.5 alternating with 0.0 (32 values, 32 zeros): ``z = 1``, ``b = 127``, ``k = 0``: ``1 + 64 +
  8 + 3 + 32 * 8 =`` **332 bits**, 2 sectors;
* 62 values with exponents 127, 126, 125, 124 (offsets 0..3) and two of ``e = 100``: ``k = 2`` escapes
  offset 3 and both far ones; ``k = 3`` escapes only the two: ``1 + 8 + 3 + 64 * 11 + 2 * 8 =`` **732
  bits**, 3 sectors, where the raw entry takes 4.

Trained weights land at 3 sectors (MiniLM in bf16: 99.6% of entries, 1.33x), because sign and mantissa
alone take 8 of 16 bits and 64 values of 8 bits already fill 2 sectors: the sector, not the exponent's
entropy, bounds a per-entry code of bf16 weights. fp16's 10-bit mantissa leaves less to gain.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numba as nb
import numpy as np

from buddylib.compressors.abc import chunk_body, serial
from buddylib.compressors.coded import Coded
from buddylib.entries import ENTRY_BYTES

#: (exponent bits, mantissa bits) of each 16-bit format.
FORMATS = {"bf16": (8, 7), "fp16": (5, 10)}
VALUES = ENTRY_BYTES // 2  # 64 values an entry
CHUNK = 256  # entries per parallel work item
#: The stream's magic (:func:`bpc_stream.pack`).
MAGIC = b"EBO1"
#: The decoder's error codes (:func:`_decode`), as messages naming what is wrong with an entry's code.
DECODE_ERRORS = {1: "the code ends before its 64 values do (truncated or corrupted)",
                 2: "bits are left after the 64 values (corrupted)",
                 3: "an exponent offset points below exponent 0 (corrupted)",
                 4: "not the code the encoder writes for these values (corrupted)"}


@nb.njit(inline="always")
def _plan(w, E, M):
    """``(bits, z, k, b)`` of the shortest code of one entry (64 uint16 words)."""
    emask = (1 << E) - 1
    best, best_z, best_k, best_b = 1 << 30, 0, 0, 0
    for z in range(2):
        n = 0
        b = 0
        for i in range(VALUES):
            if z == 0 or w[i] != 0:
                n += 1
                b = max(b, (np.int64(w[i]) >> M) & emask)
        if n == 0:
            if 1 + 64 * z < best:
                best, best_z, best_k, best_b = 1 + 64 * z, z, 0, 0
            continue
        for k in range(8):
            lim = max((1 << k) - 1, 1)  # k = 0: the count of offsets above 0, which it cannot code
            escaped = 0
            for i in range(VALUES):
                if (z == 0 or w[i] != 0) and b - ((np.int64(w[i]) >> M) & emask) >= lim:
                    escaped += 1
            if k == 0 and escaped > 0:
                continue
            length = 1 + 64 * z + E + 3 + n * (1 + M + k) + E * escaped
            if length < best:
                best, best_z, best_k, best_b = length, z, k, b
    return best, best_z, best_k, best_b


@chunk_body
def _bits_chunk(words, E, M, lo, hi, out):
    """Code length in bits of entries lo..hi-1 into ``out``: the one compiled body that the parallel and the
    serial size kernel both call (compiled once, not once per kernel, as BPC's)."""
    for e in range(lo, hi):
        out[e] = _plan(words[e], E, M)[0]


@nb.njit(parallel=True, cache=True)
def _bits(words, E, M):
    """Code length in bits of every row of an (entries, 64) uint16 array."""
    n = words.shape[0]
    out = np.empty(n, dtype=np.uint16)
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        _bits_chunk(words, E, M, np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK)), out)
    return out


@nb.njit(inline="always")
def _put(payload, start, pos, value, nbits):
    """Write the ``nbits`` (<= 32) low bits of ``value`` MSB first at bit ``pos`` of the code starting at byte
    ``start`` (the payload is zero there), a byte's worth at a time; return the next bit position."""
    while nbits > 0:
        room = 8 - (pos & 7)
        take = min(room, nbits)
        chunk = (value >> (nbits - take)) & ((1 << take) - 1)
        payload[start + (pos >> 3)] |= np.uint8(chunk << (room - take))
        pos += take
        nbits -= take
    return pos


@nb.njit(inline="always")
def _get(payload, start, pos, nbits):
    """The ``nbits``-bit (<= 32) value MSB first at bit ``pos`` of the code starting at byte ``start``."""
    v = 0
    while nbits > 0:
        room = 8 - (pos & 7)
        take = min(room, nbits)
        v = (v << take) | ((np.int64(payload[start + (pos >> 3)]) >> (room - take)) & ((1 << take) - 1))
        pos += take
        nbits -= take
    return v


@chunk_body
def _encode_chunk(words, E, M, lo, hi, offsets, payload, lengths):
    """Write the codes of entries lo..hi-1 at their byte offsets; return how many differ in length from
    ``lengths`` (0 unless this and :func:`_plan` disagree)."""
    emask = (1 << E) - 1
    mmask = (1 << M) - 1
    bad = 0
    for e in range(lo, hi):
        w = words[e]
        length, z, k, b = _plan(w, E, M)
        start = offsets[e]
        pos = _put(payload, start, 0, z, 1)
        n = 0
        for half in range(2):  # the mask in two 32-bit halves
            bits = 0
            for i in range(32 * half, 32 * half + 32):
                nonzero = 1 if w[i] != 0 else 0
                n += 1 if z == 0 else nonzero
                bits = (bits << 1) | nonzero
            if z == 1:
                pos = _put(payload, start, pos, bits, 32)
        if n > 0:
            pos = _put(payload, start, pos, b, E)
            pos = _put(payload, start, pos, k, 3)
            lim = (1 << k) - 1
            for i in range(VALUES):
                if z == 1 and w[i] == 0:
                    continue
                v = np.int64(w[i])
                pos = _put(payload, start, pos, v >> 15, 1)
                if k > 0:
                    ex = (v >> M) & emask
                    if b - ex < lim:
                        pos = _put(payload, start, pos, b - ex, k)
                    else:
                        pos = _put(payload, start, pos, lim, k)
                        pos = _put(payload, start, pos, ex, E)
                pos = _put(payload, start, pos, v & mmask, M)
        if pos != length or length != lengths[e]:
            bad += 1
    return bad


@nb.njit(parallel=True, cache=True)
def _encode(words, offsets, payload, lengths, E, M):
    """Every entry's code at its offset (:func:`_encode_chunk` on chunks); the count of those it returns."""
    n = words.shape[0]
    bad = 0
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        bad += _encode_chunk(words, E, M, np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK)), offsets,
                             payload, lengths)
    return bad


@chunk_body
def _decode_chunk(payload, offsets, lengths, E, M, lo, hi, out, errors):
    """Decode the codes of entries lo..hi-1 into ``out`` (entries, 64) uint16; ``errors[e]``: 0, or a
    :data:`DECODE_ERRORS` code. Every read is checked against the entry's length first."""
    for e in range(lo, hi):
        start = offsets[e]
        length = np.int64(lengths[e])
        err = 0
        pos = 0
        z = _get(payload, start, pos, 1)
        pos += 1
        mask = np.uint64(0xFFFFFFFFFFFFFFFF)
        n = VALUES
        b = 0
        k = 0
        if z == 1:
            if pos + 64 > length:
                err = 1
            else:
                mask = np.uint64(0)
                n = 0
                for half in range(2):
                    bits = _get(payload, start, pos, 32)
                    pos += 32
                    for j in range(32):
                        if (bits >> (31 - j)) & 1:
                            mask |= np.uint64(1) << np.uint64(32 * half + j)
                            n += 1
        for i in range(VALUES):
            out[e, i] = 0
        if err == 0 and n > 0:
            if pos + E + 3 > length:
                err = 1
            else:
                b = _get(payload, start, pos, E)
                k = _get(payload, start, pos + E, 3)
                pos += E + 3
                lim = (1 << k) - 1
                for i in range(VALUES):
                    if (mask >> np.uint64(i)) & np.uint64(1) == 0:
                        continue
                    if pos + 1 + k > length:
                        err = 1
                        break
                    sign = _get(payload, start, pos, 1)
                    pos += 1
                    ex = b
                    if k > 0:
                        d = _get(payload, start, pos, k)
                        pos += k
                        if d == lim:
                            if pos + E > length:
                                err = 1
                                break
                            ex = _get(payload, start, pos, E)
                            pos += E
                        else:
                            ex = b - d
                            if ex < 0:
                                err = 3
                                break
                    if pos + M > length:
                        err = 1
                        break
                    m = _get(payload, start, pos, M)
                    pos += M
                    out[e, i] = np.uint16((sign << 15) | (ex << M) | m)
        if err == 0 and pos != length:
            err = 2
        if err == 0:
            got, gz, gk, gb = _plan(out[e], E, M)
            if got != length or gz != z or gk != k or gb != b:  # the encoder's own choice, bit for bit
                err = 4
        errors[e] = err




@nb.njit(parallel=True, cache=True)
def _decode(payload, offsets, lengths, out, errors, E, M):
    """Every entry's code decoded (:func:`_decode_chunk` on chunks)."""
    n = out.shape[0]
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        _decode_chunk(payload, offsets, lengths, E, M, np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK)),
                      out, errors)


KERNELS = {True: (_bits, _encode, _decode), False: (serial(_bits), serial(_encode), serial(_decode))}


class EBO(Coded):
    """Exponent-base-offset code of 16-bit floats (module docstring): size path, encoder and decoder.

    >>> import numpy as np
    >>> ebo = EBO("bf16")
    >>> ones = np.full(64, 0x3F80, dtype=np.uint16)     # one entry of 64 bf16 values 1.0
    >>> ebo.bits(ones)
    array([524], dtype=uint16)
    >>> ebo.decode(ebo.encode(ones)) == ones.tobytes()
    True

    ``parallel=False``: serial kernels that release the GIL on every input, as :class:`BPC`'s. Its stream is
    BPC's container under its own magic (``EBO1``), the format byte 16 for bf16 and 17 for fp16.
    """

    max_bits: ClassVar[int] = 1 + 64 + 8 + 3 + VALUES * (1 + 7 + 7 + 8)  # the longer of the two formats
    min_bits = 1 + 64  # the all-zero entry
    magic: ClassVar[bytes] = MAGIC
    decode_errors: ClassVar[dict[int, str]] = DECODE_ERRORS

    def __init__(self, fmt: str = "bf16", *, parallel: bool = True):
        if fmt not in FORMATS:
            raise ValueError(f"EBO format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        self.fmt = fmt
        self.parallel = bool(parallel)
        self.name = f"ebo-{fmt}"  # type: ignore[misc]
        self._args = FORMATS[fmt]

    def __repr__(self) -> str:
        return f"EBO({self.fmt!r})" if self.parallel else f"EBO({self.fmt!r}, parallel=False)"

    def _kernel_table(self) -> dict[bool, tuple[Any, Any, Any]]:
        return KERNELS

    def _words(self, entries: np.ndarray) -> np.ndarray:
        return entries.view(np.uint16)

    @property
    def stream_id(self) -> int:
        return 16 + list(FORMATS).index(self.fmt)
