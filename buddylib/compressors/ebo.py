"""Exponent-base-offset coding of 16-bit (and FP8) floats, per 128-byte entry (beyond the paper; issues 23, 42).

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
shortest; among equal lengths ``z = 0`` before ``z = 1`` and the smaller ``k`` first. A code ends on a byte
with zero bits after it. The decoder accepts exactly what the encoder writes (anything else is a ``ValueError``
naming the entry). Like every code
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

**FP8** (``ebo-e4m3``, issue 42): the same code of 8-bit words, ``E = 4``, ``M = 3`` (e4m3fn as FP8 serving
stores it: ``s_i = w_i >> 7``; the code is of bits, so its NaN ``0x7F``/``0xFF`` and the two zeros are values
like any other): an entry is 128 words, the mask 128 bits, so ``L(z, k) = 1 + 128 z + 4 + 3 + n (4 + k) +
4 x_k`` (``1 + 128 z`` with nothing coded). A value keeps sign and mantissa (4 bits) and an offset of ``k``
bits for its 4-bit exponent, so the code gains only where the exponents of an entry sit within a few
binades; the stream's format byte is 18.

**Bigger entries, finer sectors** (issue 42, :func:`entry_sectors`): an entry of ``B`` bytes holds ``V =
B / word`` values and the mask ``V`` bits, so ``L(z, k) = 1 + V z + E + 3 + n (1 + M + k) + E x_k`` (``1 + V z``
with nothing coded); in sectors of ``S`` bytes it takes ``ceil(L / 8S)`` of them, ``B / S`` (raw) where ``L >
8B``, none for an all-zero entry. At ``B = 128``, ``S = 32`` this is the code above. Only its lengths are
computed (notebook 10's study); the stream stays at 128-byte entries.

**Speed** (issue 42). The plan is two vector passes over 32 words at a time, written as LLVM IR
(:mod:`~buddylib.compressors.simd`, in 16- or 8-bit lanes): the largest exponent and the zero words, then the
escapes at every offset width at once (counts of ``d >= 2^k - 1`` for k = 1..7, each the population count of a
comparison's mask). The encoder takes the plans from the size path (one plan per entry), computes every value's
field and width without a branch, then appends them with BPC's branch-free word writer. The decoder reads a code
where it lies in the payload, by big-endian 64-bit loads at any byte, and its values 8 at a time at the stride of
a value with no escape (a funnel shift per value from three words of the code) up to the first escape (or
fault), which is read alone; the next block starts after it. It then checks the result is the encoder's own code
by planning the decoded entry.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numba as nb
import numpy as np

from buddylib.compressors import bpc_stream
from buddylib.compressors.abc import chunk_body, readonly, serial
from buddylib.compressors.bpc_kernels import _bswap32, _put  # BPC's code writer
from buddylib.compressors.coded import Coded
from buddylib.compressors.simd import LANES, STRIDE_LANES, be64, block8, cttz, exponent_stats, offset_counts
from buddylib.entries import ENTRY_BYTES, as_entries

#: (exponent bits, mantissa bits) of each format: the two 16-bit ones and FP8's e4m3 (the generalisation).
FORMATS = {"bf16": (8, 7), "fp16": (5, 10), "e4m3": (4, 3)}
VALUES = ENTRY_BYTES // 2  # 64 values an entry of 16-bit words
CHUNK = 256  # entries per parallel work item
#: The stream's magic (:func:`buddylib.compressors.bpc_stream.pack`).
MAGIC = b"EBO1"
#: The decoder's error codes (:func:`_decode`), as messages naming what is wrong with an entry's code.
DECODE_ERRORS = {1: "the code ends before its values do (truncated or corrupted)",
                 2: "bits are left after the entry's values (corrupted)",
                 3: "an exponent offset points below exponent 0 (corrupted)",
                 4: "not the code the encoder writes for these values (corrupted)",
                 5: "nonzero padding bits after the code (corrupted)"}


@nb.njit(inline="always")
def _plan(words, e, E, M):
    """``(bits, z, k, b)`` of the shortest code of entry ``e``, row e of a C-contiguous (entries, values) array of
    16- or 8-bit words, in two vector passes of 32 words (:mod:`~buddylib.compressors.simd`): the largest exponent
    ``b`` and the zero words, then the escapes at every offset width at once (a value with offset ``d = b - e``
    is escaped at width ``k`` where ``d >= 2^k - 1``; a zero word, coded only where ``z = 0``, has ``d = b``).
    Among equal lengths the specification's order: ``z = 0`` first, then the smaller ``k``."""
    nv = words.shape[1]
    b = 0
    zeros = 0
    for c in range(0, nv, LANES):
        cb, cz = exponent_stats(words, e, c, E, M)
        b = max(b, cb)
        zeros += cz
    c1 = c3 = c7 = c15 = c31 = c63 = c127 = 0
    for c in range(0, nv, LANES):
        n1, n3, n7, n15, n31, n63, n127 = offset_counts(words, e, c, E, M, b)
        c1, c3, c7, c15, c31, c63, c127 = c1 + n1, c3 + n3, c7 + n7, c15 + n15, c31 + n31, c63 + n63, c127 + n127
    escaped = (c1, c1, c3, c7, c15, c31, c63, c127)  # k = 0 and k = 1 share the limit 1
    best, best_z, best_k, best_b = 1 << 30, 0, 0, 0
    for z in range(2):
        n = nv - zeros * z
        if n == 0:  # nothing to code: the all-zero entry
            if 1 + nv * z < best:
                best, best_z, best_k, best_b = 1 + nv * z, z, 0, 0
            continue
        for k in range(8):
            x = escaped[k] + (zeros if z == 0 and b >= max((1 << k) - 1, 1) else 0)
            if k == 0 and x > 0:  # k = 0 codes no offset: every value must sit at b
                continue
            length = 1 + nv * z + E + 3 + n * (1 + M + k) + E * x
            if length < best:  # z = 0 before z = 1, then the smaller k, among equal lengths
                best, best_z, best_k, best_b = length, z, k, b
    return best, best_z, best_k, best_b


@chunk_body
def _bits_chunk(words, E, M, lo, hi, out):
    """Code length in bits of entries lo..hi-1 into ``out``: the one compiled body that the parallel and the
    serial size kernel both call (compiled once, not once per kernel, as BPC's)."""
    for e in range(lo, hi):
        out[e] = _plan(words, e, E, M)[0]


@nb.njit(parallel=True, cache=True)
def _bits(words, E, M):
    """Code length in bits of every row of an (entries, values) array of 16- or 8-bit words."""
    n = words.shape[0]
    out = np.empty(n, dtype=np.uint16)
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        _bits_chunk(words, E, M, np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK)), out)
    return out


#: The encoder's scratch of one entry's code, in 32-bit words: its longest (8-bit words: 2,056 bits) and more.
CODE_WORDS = 40
#: Bytes from a code's start that decoding it may read: its longest (8-bit words: 2,056 bits, 257 bytes), then
#: the 24 bytes a block of ``buddylib.compressors.simd.block8`` reads from a bit inside it.
MARGIN = 320


@chunk_body
def _plans_chunk(words, E, M, lo, hi, lengths, plans):
    """Code length in bits and the plan (``z << 11 | k << 8 | b``) of entries lo..hi-1: the size path's
    work, kept for the encoder so that it plans each entry once."""
    for e in range(lo, hi):
        length, z, k, b = _plan(words, e, E, M)
        lengths[e] = length
        plans[e] = (z << 11) | (k << 8) | b


@nb.njit(parallel=True, cache=True)
def _plans(words, E, M):
    """``(lengths, plans)`` of every row (:func:`_plans_chunk` on chunks)."""
    n = words.shape[0]
    lengths = np.empty(n, dtype=np.uint16)
    plans = np.empty(n, dtype=np.uint16)
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        _plans_chunk(words, E, M, np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK)), lengths, plans)
    return lengths, plans


@chunk_body
def _encode_chunk(words, E, M, lo, hi, offsets, payload, lengths, plans, o32, fv, fn):
    """Write the codes of entries lo..hi-1 (planned: ``plans``) at their byte offsets; return how many differ
    in length from ``lengths`` (a bug, never data: those entries' bytes are not written). First every value's
    field and width, with no branch (the compiler vectorises it): sign, offset and mantissa, or for an escape
    sign, escape, exponent and mantissa; a zero word of a ``z = 1`` code has none. Then the fields appended."""
    nv = words.shape[1]
    emask = (1 << E) - 1
    mmask = (1 << M) - 1
    sshift = E + M
    smask = (1 << sshift) - 1
    o8 = o32.view(np.uint8)
    bad = 0
    for e in range(lo, hi):
        w = words[e]
        plan = np.int64(plans[e])
        z, k, b = plan >> 11, (plan >> 8) & 7, plan & 255
        lim = max((1 << k) - 1, 1)
        for i in range(nv):
            v = np.int64(w[i])
            coded = np.int64((z == 0) | (v != 0))
            d = b - ((v >> M) & emask)
            esc = np.int64(d >= lim)  # never where k = 0: every offset is 0 there
            head = ((v >> sshift) << k) | (esc * lim + (1 - esc) * d)
            fv[i] = (((head << sshift) | (v & smask)) * esc + ((head << M) | (v & mmask)) * (1 - esc)) * coded
            fn[i] = (1 + k + M + E * esc) * coded
        acc, pos = _put(o32, np.uint64(0), 0, z, 1)
        n = nv
        if z == 1:
            n = 0
            for part in range(nv // 32):  # the mask, 32 bits at a time
                bits = 0
                for i in range(32 * part, 32 * part + 32):
                    nonzero = np.int64(w[i] != 0)
                    n += nonzero
                    bits = (bits << 1) | nonzero
                acc, pos = _put(o32, acc, pos, bits, 32)
        if n > 0:
            acc, pos = _put(o32, acc, pos, (b << 3) | k, E + 3)
            for i in range(nv):
                acc, pos = _put(o32, acc, pos, fv[i], fn[i])
        r = pos & 31
        o32[(np.uint64(pos) >> np.uint64(5)) + np.uint64(1)] = np.uint32(_bswap32(acc << np.uint64(32 - r)))
        if pos != lengths[e]:
            bad += 1
        else:
            start = np.uint64(offsets[e])
            for q in range(np.uint64((pos + 7) >> 3)):
                payload[start + q] = o8[np.uint64(4) + q]
    return bad


@nb.njit(parallel=True, cache=True)
def _encode(words, offsets, payload, lengths, plans, E, M):
    """Every entry's code at its offset (:func:`_encode_chunk` on chunks); the count of those it returns."""
    n = words.shape[0]
    nv = words.shape[1]
    bad = 0
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        bad += _encode_chunk(words, E, M, np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK)), offsets,
                             payload, lengths, plans, np.empty(CODE_WORDS * 2, dtype=np.uint32),
                             np.empty(nv, dtype=np.int64), np.empty(nv, dtype=np.int64))
    return bad


@nb.njit(inline="always")
def _peek(code, pos):
    """The bits of the code at address ``code`` from bit ``pos`` on, MSB first, in a uint64 (its top 57 bits at
    least are the code's)."""
    return be64(code + (pos >> 3)) << np.uint64(pos & 7)


@nb.njit(inline="always")
def _mask(code, pos, out, e):
    """Read the mask at bit ``pos`` into ``out[e]`` (a coded value's flag 1, a zero word's 0); the count of ones."""
    n = 0
    for part in range(out.shape[1] // 32):
        bits = np.int64(_peek(code, pos + 32 * part) >> np.uint64(32))
        for j in range(32):
            one = (bits >> (31 - j)) & 1
            out[e, 32 * part + j] = one
            n += one
    return n


@nb.njit(inline="always")
def _place(out, e, tmp, z):
    """The decoded values ``tmp`` into ``out[e]``: in order, or (``z``) at the mask's ones, zeros between."""
    nv = out.shape[1]
    if z == 0:
        for i in range(nv):
            out[e, i] = tmp[i]
    else:
        c = 0
        for i in range(nv):
            one = np.int64(out[e, i])
            out[e, i] = tmp[c] * one
            c += one


@nb.njit(inline="always")
def _values(code, length, E, M, out, e, tmp):
    """Decode the code of ``length`` bits at address ``code`` into ``out[e]``; return ``(0, its plan z << 11 | k
    << 8 | b)`` or ``(a DECODE_ERRORS code, 0)``. Its reads stay within the :data:`MARGIN` bytes from ``code``."""
    nv = out.shape[1]
    sshift = E + M
    mmask = (1 << M) - 1
    emask = (1 << E) - 1
    z = np.int64(_peek(code, 0) >> np.uint64(63))
    pos = 1
    n = nv
    b = 0
    k = 0
    if z == 1:
        if pos + nv > length:
            return 1, 0
        n = _mask(code, pos, out, e)
        pos += nv
    if n > 0:
        if pos + E + 3 > length:
            return 1, 0
        bk = np.int64(_peek(code, pos) >> np.uint64(64 - E - 3))
        b, k = bk >> 3, bk & 7
        pos += E + 3
        lim = max((1 << k) - 1, 1)
        kmask = (1 << k) - 1
        w = 1 + k + M
        s1 = np.uint64(63 - k)
        j = 0
        while j < n:
            first = 0  # values from j on at the stride w, 8 at a time, up to the first escape, fault or the last
            while True:
                p = pos + first * w
                if p > length:  # this block starts past the code's end
                    break
                stop = block8(code + (p >> 3), p & 7, w, k, M, b, sshift, tmp, j + first)
                left = n - j - first
                if left <= STRIDE_LANES:
                    stop |= np.uint64(1) << np.uint64(left)
                if stop:
                    first += cttz(stop)
                    break
                first += STRIDE_LANES
            pos += first * w
            if pos > length:
                return 1, 0
            j += first
            if j == n:
                break
            if pos + 1 + k > length:  # an escape or a fault, read alone
                return 1, 0
            x = _peek(code, pos)
            head = np.int64(x >> s1)
            pos += 1 + k
            ex = b
            if k > 0:
                d = head & kmask
                if d == lim:
                    if pos + E > length:
                        return 1, 0
                    ex = np.int64(x >> np.uint64(63 - k - E)) & emask
                    pos += E
                else:
                    ex = b - d
                    if ex < 0:
                        return 3, 0
            if pos + M > length:
                return 1, 0
            mant = np.int64(_peek(code, pos) >> np.uint64(64 - M)) & mmask
            tmp[j] = ((head >> k) << sshift) | (ex << M) | mant
            pos += M
            j += 1
    _place(out, e, tmp, z)
    if pos != length:
        return 2, 0
    return 0, (z << 11) | (k << 8) | b


@chunk_body
def _decode_chunk(payload, offsets, lengths, E, M, lo, hi, out, errors, s8, tmp, plans):
    """Decode the codes of entries lo..hi-1 into ``out`` (entries, values); ``errors[e]``: 0, or a
    ``DECODE_ERRORS`` code. A code is read where it lies in the payload, or, within :data:`MARGIN` bytes of
    the payload's end, from a copy in ``s8`` (scratch) with zeros after it, so no read leaves an array: the
    values a block reads past the code are discarded. First the bits after the code in its last byte are checked
    to be zero; last, once the chunk is decoded (its entries' stores done, not waited on by each plan's loads),
    that each code is the encoder's own, by planning the decoded entry (``plans``: scratch of the headers)."""
    size = payload.size
    for e in range(lo, hi):
        length = np.int64(lengths[e])
        o = np.int64(offsets[e])
        nbytes = (length + 7) >> 3
        if np.int64(payload[o + nbytes - 1]) & ((1 << (8 * nbytes - length)) - 1):
            errors[e] = 5
            continue
        code = np.int64(payload.ctypes.data) + o
        if o + MARGIN > size:
            for q in range(MARGIN):
                s8[q] = payload[o + q] if q < nbytes else 0
            code = np.int64(s8.ctypes.data)
        errors[e], plans[e - lo] = _values(code, length, E, M, out, e, tmp)
    for e in range(lo, hi):
        if errors[e] == 0:
            got, z, k, b = _plan(out, e, E, M)
            if got != lengths[e] or ((z << 11) | (k << 8) | b) != plans[e - lo]:  # the encoder's choice, bit for bit
                errors[e] = 4


@nb.njit(parallel=True, cache=True)
def _decode(payload, offsets, lengths, out, errors, E, M):
    """Every entry's code decoded (:func:`_decode_chunk` on chunks)."""
    n = out.shape[0]
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        _decode_chunk(payload, offsets, lengths, E, M, np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK)),
                      out, errors, np.empty(MARGIN, dtype=np.uint8),
                      np.empty(out.shape[1] + STRIDE_LANES, dtype=np.uint16), np.empty(CHUNK, dtype=np.int64))


KERNELS = {True: (_bits, _encode, _decode), False: (serial(_bits), serial(_encode), serial(_decode))}


def entry_sectors(x: np.ndarray, fmt: str, entry: int = ENTRY_BYTES, sector: int = 32) -> np.ndarray:
    """Sectors each ``entry``-byte entry of ``x`` takes in ``sector``-byte sectors under the code generalised
    to that entry (module docstring).

    Parameters
    ----------
    x : numpy.ndarray
        The values; its bytes, in C order, are zero-padded to whole entries.
    fmt : {"bf16", "fp16", "e4m3"}
        The float format (a key of ``FORMATS``).
    entry, sector : int
        Bytes of an entry and of a sector: the entry must hold whole sectors and a multiple of 32 values.

    Returns
    -------
    numpy.ndarray
        ``int64[E]``: each entry's code length rounded up to whole sectors, ``entry / sector`` (raw) where
        longer than the entry, 0 for an all-zero entry (flagged).

    Raises
    ------
    ValueError
        An unknown format, or an entry and sector size that do not fit each other.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.r_[np.full(64, 0x3F80), np.zeros(64)].astype(np.uint16)   # 64 bf16 values 1.0, 64 zeros
    >>> entry_sectors(x, "bf16"), entry_sectors(x, "bf16", sector=16), entry_sectors(x, "bf16", 256, 16)
    (array([3, 0]), array([5, 0]), array([6]))
    """
    if fmt not in FORMATS:
        raise ValueError(f"EBO format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    e_bits, m_bits = FORMATS[fmt]
    word = np.dtype(np.uint16 if 1 + e_bits + m_bits == 16 else np.uint8)
    if sector < 1 or entry % sector or entry % (32 * word.itemsize):
        raise ValueError(f"entry {entry} and sector {sector} bytes: the entry must hold whole sectors and a "
                         "multiple of 32 values")
    b = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    b = np.concatenate([b, np.zeros((-b.size) % entry, np.uint8)])
    words = readonly(b.view(word).reshape(-1, entry // word.itemsize))
    bits = _bits(words, e_bits, m_bits).astype(np.int64)
    n = entry // sector
    s = np.minimum(-(-bits // (8 * sector)), n)
    return np.where(bits == 1 + words.shape[1], 0, s)  # only the all-zero entry is as short as its mask
#: The size path that keeps each entry's plan for the encoder.
PLANS = {True: _plans, False: serial(_plans)}


class EBO(Coded):
    """Exponent-base-offset code of 16-bit floats (module docstring): size path, encoder and decoder.

    Its stream is BPC's container under its own magic (``EBO1``), the format byte 16 for bf16, 17 for fp16 and
    18 for e4m3.

    Parameters
    ----------
    fmt : {"bf16", "fp16", "e4m3"}
        The float format (a key of ``FORMATS``).
    parallel : bool
        ``False``: serial kernels that release the GIL on every input, as
        :class:`~buddylib.compressors.bpc.BPC`'s.

    Raises
    ------
    ValueError
        An unknown format.

    Examples
    --------
    >>> import numpy as np
    >>> ebo = EBO("bf16")
    >>> ones = np.full(64, 0x3F80, dtype=np.uint16)     # one entry of 64 bf16 values 1.0
    >>> ebo.bits(ones)
    array([524], dtype=uint16)
    >>> ebo.decode(ebo.encode(ones)) == ones.tobytes()
    True
    """

    magic: ClassVar[bytes] = MAGIC
    decode_errors: ClassVar[dict[int, str]] = DECODE_ERRORS

    def __init__(self, fmt: str = "bf16", *, parallel: bool = True):
        if fmt not in FORMATS:
            raise ValueError(f"EBO format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        self.fmt = fmt
        self.parallel = bool(parallel)
        self.name = f"ebo-{fmt}"  # type: ignore[misc]
        self._args = FORMATS[fmt]
        e, m = self._args
        self.word = np.dtype(np.uint16 if 1 + e + m == 16 else np.uint8)
        values = ENTRY_BYTES // self.word.itemsize
        self.min_bits = 1 + values  # the all-zero entry
        self.max_bits = 1 + values + e + 3 + values * (1 + 7 + e + m)  # every value escaped at k = 7

    def __repr__(self) -> str:
        return f"EBO({self.fmt!r})" if self.parallel else f"EBO({self.fmt!r}, parallel=False)"

    def _kernel_table(self) -> dict[bool, tuple[Any, Any, Any]]:
        return KERNELS

    def _words(self, entries: np.ndarray) -> np.ndarray:
        return entries.view(self.word)

    @property
    def stream_id(self) -> int:
        return 16 + list(FORMATS).index(self.fmt)

    def decode_entries(self, lengths: np.ndarray, payload: np.ndarray) -> np.ndarray:
        """As :meth:`buddylib.compressors.coded.Coded.decode_entries`, on a contiguous copy of a strided payload:
        the decoder reads a code at its address.

        Parameters
        ----------
        lengths : numpy.ndarray
            1-D integer array: each entry's code length in bits.
        payload : numpy.ndarray
            1-D uint8 array: the codes, as :meth:`encode_entries` packs them.

        Returns
        -------
        numpy.ndarray
            ``uint8[E, 128]``: the decoded entries.

        Raises
        ------
        ValueError
            A truncated or corrupted input, naming the first bad entry (``DECODE_ERRORS``), or arrays of the
            wrong kind.
        """
        return super().decode_entries(lengths, np.ascontiguousarray(payload))

    def encode_entries(self, data: object) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`buddylib.compressors.coded.Coded.encode_entries`, planning each entry once: the size path
        keeps its plans for the encoder.

        Parameters
        ----------
        data : array, bytes or buffer
            Any buffer, cut into 128-byte entries (the last one zero-padded).

        Returns
        -------
        lengths : numpy.ndarray
            ``uint16[E]``: each entry's code length in bits, equal to ``bits``.
        payload : numpy.ndarray
            ``uint8``: the codes MSB first, one after another on byte boundaries, unused bits zero.

        Raises
        ------
        TypeError
            ``data`` cannot be read as raw memory.
        """
        entries = as_entries(data)
        words = readonly(self._words(entries))
        (_, encode, _), turn = self._kernels(entries.shape[0])
        plans = PLANS[encode is _encode]
        with turn:
            lengths, plan = plans(words, *self._args)
            offsets = bpc_stream.code_offsets(lengths)
            payload = np.empty(int(offsets[-1]), dtype=np.uint8)
            bad = encode(words, offsets, payload, lengths, plan, *self._args)
        if bad:  # the two traversals disagree: a bug, never a data condition
            raise AssertionError(f"{self.name} encoder and size path disagree on {bad} entries")
        return lengths, payload
