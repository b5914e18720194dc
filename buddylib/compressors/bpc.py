"""Bit-Plane Compression (Kim, Sullivan, Choukse, Erez, ISCA 2016), the paper's compressor.

BPC suits GPU data because neighbouring words in an entry are similar (arrays of numbers,
not pointers and text): it deltas the W-bit words, transposes the deltas into bit-planes,
XORs neighbouring planes, and codes the planes with a prefix code in which long runs of
zero planes are nearly free. The canonical code of this suite is SPEC §2.1, for W = 32
("bpc32") and W = 64 ("bpc64").

Three paths share one plane traversal:

* size (``bits``): the exact code length, what capacity studies need, as fast as possible;
* ``encode_entries`` / ``decode_entries``: the real code, one MSB-first bit string per
  entry, entries packed one after another on byte boundaries, with a uint16 length (bits)
  per entry as metadata;
* ``encode`` / ``decode``: a self-describing byte stream (header, lengths, codes, CRC-32 of
  the data) for whole buffers; :mod:`buddylib.compressors.codec` exposes it as a numcodecs
  and a zarr v3 codec.

Every kernel exists twice: a parallel one, for one large buffer, and a serial copy that
releases the GIL, which runs inputs below ``abc.PARALLEL_MIN_ENTRIES`` (starting threads costs
more than it saves there) and every input of ``BPC(width, parallel=False)``, for callers that
parallelise across buffers on their own threads, as zarr does across chunks: numba's parallel
kernels must not be entered from several threads at once (its ``workqueue`` layer aborts the
interpreter), while the serial copies may.

Speed comes from the layout of each entry's bit-planes (see the kernels' comment): the
per-plane work is a vectorised loop across planes, so the size path and the encoder cost no
branch per plane; the encoder appends codes with a branch-free bit writer and the decoder reads
64-bit windows. The codes are those of SPEC §2.1 bit for bit (tests/test_bpc.py's reference).

The decoder accepts exactly the streams the encoder produces: every read is bounds-checked
against the entry's stated length, and a code that is not the canonical encoding of the
data it decodes to is rejected, so a damaged stream raises ``ValueError`` naming the entry
instead of reading out of bounds or silently returning other data.
"""

from __future__ import annotations

import contextlib
import struct
import zlib
from typing import Any

import numba as nb
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from buddylib.compressors.abc import PARALLEL_LAUNCH, Compressor, parallel_for, serial
from buddylib.entries import ENTRY_BYTES, as_entries, n_entries

# Decoder error codes -> messages (0 = ok).
_ERRORS = {
    1: "code ends before the entry is complete (truncated)",
    2: "a zero-plane run goes past the last bit-plane",
    3: "a bit position is outside the plane",
    4: "code is not the canonical BPC encoding of any entry (corrupted)",
    5: "code length differs from the bits it decodes (corrupted length or data)",
    6: "a delta's sign bit contradicts the words it produces (corrupted)",
    7: "nonzero padding bits after the code (corrupted)",
}


class _Params:
    """Code-table constants of SPEC §2.1 for one word width."""

    def __init__(self, width: int):
        if width not in (32, 64):
            raise ValueError(f"BPC width must be 32 or 64, got {width!r}")
        self.width = width
        self.n_words = 1024 // width
        self.plane_bits = self.n_words - 1  # one bit per delta
        self.run_bits = 5 if width == 32 else 6
        self.pos_bits = 5 if width == 32 else 4
        # base classes: zero, then sign-extended fields, then raw
        self.base_fields = (4, 8, 16) if width == 32 else (8, 16, 32)
        self.max_bits = (1 + width) + (width + 1) * (1 + self.plane_bits)
        self.min_bits = 3 + 2 + self.run_bits  # zero base + one run of all planes


# ---------------------------------------------------------------------------------------
# compiled kernels (W = 32 and W = 64 share them; the width enters as constants)
# ---------------------------------------------------------------------------------------
#
# One entry's bit-planes live in a scratch of SCRATCH_WORDS uint64 words ``a``, read through
# its uint32 view ``a32`` (W = 32) or uint16 view ``a16`` (W = 64), laid out so that the
# plane above plane b (the previous one in code order) sits at a constant offset: then the
# per-plane work of the size path and the encoder (XOR with the plane above, classify,
# count) is one loop without a loop-carried dependency, which LLVM vectorises across
# planes, and costs no branch per plane.
#
# * W = 32: ``a32[b]`` is plane b for b < 32, ``a32[32]`` the sign plane; the plane above
#   ``a32[b]`` is ``a32[b + 1]``.
# * W = 64: the four 16 x 16 transposes leave plane 16q + c in lane q of word c, i.e.
#   ``a16[4c + q]``; words 16..19 repeat words 0..3 shifted down one lane (lane 3: the sign
#   plane, then the sentinels), so the plane above ``a16[i]`` is ``a16[i + 4]`` for every
#   plane, and the sign plane is ``a16[67]``.
#
# After the last plane come the sentinels 0, 1, 0: plane W has "plane" 0 above it (the
# DBX of the first plane is the plane itself), and neither sentinel is a zero DBX plane,
# so a run of zero planes never extends past plane W.

CHUNK = 256  # entries per parallel work item; scratch buffers are allocated once per chunk
SCRATCH_WORDS = 32  # planes and sentinels of one entry, plus the lanes the vector loops over-read
CODE_WORDS = 20  # decoder: one entry's code (at most 1105 bits) as big-endian uint64 words, then zeros
CODE_WORDS32 = 40  # encoder: one entry's code as big-endian 32-bit words, after a dummy word
SCRATCH_BYTES = 160  # decoder: one entry's code bytes (at most 139), then 16 zero bytes
LANES32 = 48  # planes the W = 32 plane loops visit: 33 real ones, rounded up to whole vectors
LANES64 = 96  # lanes the W = 64 plane loops visit (a16[0:96]); real planes: i < 64 and i == 67
SIGN64 = 67  # a16 index of the W = 64 sign plane


@nb.njit(inline="always")
def _stage(a, h, j, m):
    """One stage of a bit-matrix transpose of a[0:16]: swap the j-bit blocks masked by m
    between words k and k + h (for every k with k & h == 0)."""
    for k0 in range(0, 16, 2 * h):
        for k in range(k0, k0 + h):
            t = ((a[k] >> np.uint64(j)) ^ a[k + h]) & np.uint64(m)
            a[k + h] ^= t
            a[k] ^= t << np.uint64(j)


@nb.njit(inline="always")
def _transpose32(a):
    """Transpose the 32 x 32 bit matrix whose row r is ``a.view(uint32)[r]`` (rows 2w and 2w + 1
    share word w): row r, bit j -> row j, bit r. Its own inverse (deltas -> planes -> deltas)."""
    for k in range(16):  # swap row-index bit 0 with column bit 0, inside each word
        x = a[k]
        t = ((x >> np.uint64(1)) ^ (x >> np.uint64(32))) & np.uint64(0x55555555)
        a[k] = x ^ ((t << np.uint64(32)) | (t << np.uint64(1)))
    _stage(a, 8, 16, 0x0000FFFF0000FFFF)  # row-index bit 4 with column bit 4
    _stage(a, 4, 8, 0x00FF00FF00FF00FF)
    _stage(a, 2, 4, 0x0F0F0F0F0F0F0F0F)
    _stage(a, 1, 2, 0x3333333333333333)


@nb.njit(inline="always")
def _transpose16x4(a):
    """Transpose the four 16 x 16 bit matrices in the 16-bit lanes of a[0:16], lane by lane
    (row i of lane q is bits 16q..16q+15 of a[i]). Its own inverse."""
    _stage(a, 8, 8, 0x00FF00FF00FF00FF)
    _stage(a, 4, 4, 0x0F0F0F0F0F0F0F0F)
    _stage(a, 2, 2, 0x3333333333333333)
    _stage(a, 1, 1, 0x5555555555555555)


@nb.njit(inline="always")
def _planes32(words, e, a, a32):
    """Lay out entry e's W = 32 DBP planes and sentinels in ``a`` (see above); return the base.

    Plane b holds bit b of delta i at bit i; the sign plane holds the sign bits of the
    33-bit exact deltas.
    """
    sign = np.uint64(0)
    for i in range(31):
        x = words[e, i]
        y = words[e, i + 1]
        a32[i] = y - x  # the low 32 bits of the delta
        sign |= np.uint64(np.int32(y) < np.int32(x)) << np.uint64(i)
    a32[31] = 0
    _transpose32(a)
    a[16] = sign  # a32[32] = signs, a32[33] = 0
    a[17] = 1  # a32[34] = 1, a32[35] = 0
    return np.int64(np.int32(words[e, 0]))


@nb.njit(inline="always")
def _planes64(words, e, a):
    """Lay out entry e's W = 64 DBP planes and sentinels in ``a`` (see above); return the base."""
    sign = np.uint64(0)
    for i in range(15):
        x = words[e, i]
        y = words[e, i + 1]
        a[i] = y - x
        sign |= np.uint64(np.int64(y) < np.int64(x)) << np.uint64(i)
    a[15] = 0
    _transpose16x4(a)
    a[16] = (a[0] >> np.uint64(16)) | (sign << np.uint64(48))
    a[17] = a[1] >> np.uint64(16)
    a[18] = (a[2] >> np.uint64(16)) | (np.uint64(1) << np.uint64(48))
    a[19] = a[3] >> np.uint64(16)
    return np.int64(words[e, 0])


@nb.njit(inline="always")
def _base_bits(base, width):
    if base == 0:
        return 3
    f0, f1, f2 = (4, 8, 16) if width == 32 else (8, 16, 32)
    for f in (f0, f1, f2):
        lim = np.int64(1) << (f - 1)
        if -lim <= base < lim:
            return 3 + f
    return 1 + width


@nb.njit(inline="always")
def _plane_class(dbx, dbp, ones):
    """Symbol of a nonzero DBX plane: 0 all ones, 1 DBP zero, 2 two adjacent, 3 one, 4 raw."""
    if dbx == ones:
        return 0
    if dbp == 0:
        return 1
    low = dbx & (~dbx + np.uint64(1))
    if dbx == low * np.uint64(3):
        return 2
    if dbx == low:
        return 3
    return 4


# The plane loops below are written in the lanes' own integer type (uint32 for W = 32, uint16
# for W = 64) so that LLVM packs 16 or 32 planes into one vector register.
U32 = np.uint32
U16 = np.uint16


@nb.njit(inline="always")
def _planes_bits32(a32):
    """Code bits of all W = 32 planes (zero-plane runs included), from the layout of _planes32."""
    ones = U32(0x7FFFFFFF)
    total = U32(0)
    for b in range(LANES32):
        p0 = a32[b]
        x0 = p0 ^ a32[b + 1]  # this plane's DBX
        x1 = a32[b + 1] ^ a32[b + 2]  # the DBX above
        x2 = a32[b + 2] ^ a32[b + 3]  # and the one above that
        low = x0 & (~x0 + U32(1))
        c = U32(32)  # raw: 1 + 31
        c = U32(10) if (x0 == low) | (x0 == low * U32(3)) else c  # one bit or two adjacent: 5 + 5
        c = U32(5) if (x0 == ones) | (p0 == U32(0)) else c  # all ones, or DBP zero
        # a zero plane: its run's first plane pays '001' (3 bits), its second raises that to '01' + 5 bits
        r = U32(0) if x2 == U32(0) else U32(4)
        r = U32(3) if x1 != U32(0) else r
        c = r if x0 == U32(0) else c
        c = c if b <= 32 else U32(0)
        total = U32(total + c)
    return np.int64(total)


@nb.njit(inline="always")
def _planes_bits64(a16):
    """Code bits of all W = 64 planes (zero-plane runs included), from the layout of _planes64."""
    ones = U16(0x7FFF)
    total = U16(0)
    for i in range(LANES64):
        p0 = a16[i]
        x0 = U16(p0 ^ a16[i + 4])
        x1 = U16(a16[i + 4] ^ a16[i + 8])
        x2 = U16(a16[i + 8] ^ a16[i + 12])
        low = U16(x0 & U16(~x0 + U16(1)))
        c = U16(16)  # raw: 1 + 15
        c = U16(9) if (x0 == low) | (x0 == U16(low * U16(3))) else c  # 5 + 4
        c = U16(5) if (x0 == ones) | (p0 == U16(0)) else c
        r = U16(0) if x2 == U16(0) else U16(5)  # '01' + 6 bits = 8 = 3 + 5
        r = U16(3) if x1 != U16(0) else r
        c = r if x0 == U16(0) else c
        c = c if (i < 64) | (i == SIGN64) else U16(0)
        total = U16(total + c)
    return np.int64(total)


@nb.njit(inline="always")
def _entry_bits(words, e, width, a, a32, a16):
    if width == 32:
        base = _planes32(words, e, a, a32)
        return _base_bits(base, 32) + _planes_bits32(a32)
    base = _planes64(words, e, a)
    return _base_bits(base, 64) + _planes_bits64(a16)


@nb.njit(parallel=True, cache=True)
def _bits_kernel(words, width):
    n = words.shape[0]
    out = np.empty(n, dtype=np.uint16)
    nchunks = (n + CHUNK - 1) // CHUNK
    for c in nb.prange(nchunks):
        a = np.zeros(SCRATCH_WORDS, dtype=np.uint64)
        a32 = a.view(np.uint32)
        a16 = a.view(np.uint16)
        for e in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            out[e] = _entry_bits(words, e, width, a, a32, a16)
    return out


@nb.njit(inline="always")
def _symbols32(a32, sv, sl):
    """Code of each W = 32 plane b without its run prefix: value sv[b], length sl[b] (0: zero plane)."""
    ones = U32(0x7FFFFFFF)
    for b in range(LANES32):
        p0 = a32[b]
        x0 = p0 ^ a32[b + 1]
        low = x0 & (~x0 + U32(1))
        at = U32(trailing_zeros(x0) & 31)
        v = U32(0x80000000) | x0  # '1' + 31 bits
        n = U32(32)
        v = U32(U32(0x40) | at) if x0 == low * U32(3) else v  # '00010' + position
        v = U32(U32(0x60) | at) if x0 == low else v  # '00011' + position
        n = U32(10) if (x0 == low) | (x0 == low * U32(3)) else n
        v = U32(1) if p0 == U32(0) else v  # '00001'
        v = U32(0) if x0 == ones else v  # '00000'
        n = U32(5) if (x0 == ones) | (p0 == U32(0)) else n
        v = U32(0) if x0 == U32(0) else v  # a zero plane writes nothing
        n = U32(0) if x0 == U32(0) else n
        sv[b] = v
        sl[b] = n


@nb.njit(inline="always")
def _symbols64(a16, sv, sl):
    """As _symbols32 for W = 64, over the lanes of _planes64."""
    ones = U16(0x7FFF)
    for i in range(LANES64):
        p0 = a16[i]
        x0 = U16(p0 ^ a16[i + 4])
        low = U16(x0 & U16(~x0 + U16(1)))
        three = U16(low * U16(3))
        at = U16(trailing_zeros(x0) & 15)
        v = U16(U16(0x8000) | x0)  # '1' + 15 bits
        n = U16(16)
        v = U16(U16(0x20) | at) if x0 == three else v  # '00010' + 4-bit position
        v = U16(U16(0x30) | at) if x0 == low else v  # '00011' + position
        n = U16(9) if (x0 == low) | (x0 == three) else n
        v = U16(1) if p0 == U16(0) else v
        v = U16(0) if x0 == ones else v
        n = U16(5) if (x0 == ones) | (p0 == U16(0)) else n
        v = U16(0) if x0 == U16(0) else v
        n = U16(0) if x0 == U16(0) else n
        sv[i] = v
        sl[i] = n


@nb.njit(inline="always")
def _bswap32(x):
    """The low 32 bits of x, byte-reversed (a single instruction once compiled)."""
    return (((x & np.uint64(0xFF)) << np.uint64(24)) | ((x & np.uint64(0xFF00)) << np.uint64(8))
            | ((x >> np.uint64(8)) & np.uint64(0xFF00)) | ((x >> np.uint64(24)) & np.uint64(0xFF)))


@nb.njit(inline="always")
def _put(o32, acc, pos, value, nbits):
    """Append the low ``nbits`` (0..32) of value to the code, MSB first; return (acc, pos).

    ``acc`` holds the code's last bits right-aligned, ``pos`` its length. The last complete
    32-bit word of the code, word ``pos // 32 - 1``, is stored big-endian at ``o32[pos // 32]``
    on every call, with no branch: a put completes at most one word, and only ``pos`` (an add)
    and ``acc`` (a shift and an or) chain from one put to the next. value must be below 2**nbits.
    """
    acc = (acc << np.uint64(nbits)) | np.uint64(value)
    pos += nbits
    o32[np.uint64(pos) >> np.uint64(5)] = np.uint32(_bswap32(acc >> np.uint64(pos & 31)))
    return acc, pos


@nb.njit(inline="always")
def _run_code(run, rb):
    """(value, bits) of the code of a run of ``run`` zero planes ((0, 0) for none)."""
    value = (1 << rb) | (run - 2) if run >= 2 else run
    nbits = 2 + rb if run >= 2 else 3 * run
    return value, nbits


@nb.njit(inline="always")
def _encode_entry(words, e, width, a, a32, a16, sv32, sl32, sv16, sl16, o32):
    """Entry e's code into the bytes of o32[1:] (big-endian words); return its length in bits."""
    if width == 32:
        base = _planes32(words, e, a, a32)
        _symbols32(a32, sv32, sl32)
    else:
        base = _planes64(words, e, a)
        _symbols64(a16, sv16, sl16)
    rb = 5 if width == 32 else 6
    acc = np.uint64(0)
    pos = 0
    nbase = _base_bits(base, width)
    ub = np.uint64(base)
    if nbase == 3:
        acc, pos = _put(o32, acc, pos, 0, 3)
    elif nbase == 1 + width:
        acc, pos = _put(o32, acc, pos, 1, 1)
        if width == 64:
            acc, pos = _put(o32, acc, pos, ub >> np.uint64(32), 32)
        acc, pos = _put(o32, acc, pos, ub & np.uint64(0xFFFFFFFF), 32)
    else:
        f = nbase - 3
        f0 = 4 if width == 32 else 8
        sel = 1 if f == f0 else (2 if f == 2 * f0 else 3)
        field = ub & ((np.uint64(1) << np.uint64(f)) - np.uint64(1))
        acc, pos = _put(o32, acc, pos, (np.uint64(sel) << np.uint64(f)) | field, nbase)
    # planes from W down to 0; the run of zero planes above a nonzero plane is written just before it
    run = 0
    if width == 32:
        for b in range(32, -1, -1):
            n = np.int64(sl32[np.uint64(b)])
            nz = n != 0
            r = run * nz  # the zero planes above this one, if it is not zero itself
            acc, pos = _put(o32, acc, pos, (r > 1) * (30 + r) + (r == 1), 3 * (r > 0) + 4 * (r > 1))  # 001, 01+5b
            acc, pos = _put(o32, acc, pos, sv32[np.uint64(b)], n)
            run = (run + 1) * (1 - nz)
    else:
        n = np.int64(sl16[SIGN64])
        acc, pos = _put(o32, acc, pos, sv16[SIGN64], n)
        run = 1 - (n != 0)
        for q in range(3, -1, -1):  # planes 63..0: lane q of words 15..0
            for c in range(15, -1, -1):
                i = np.uint64(4 * c + q)
                n = np.int64(sl16[i])
                nz = n != 0
                r = run * nz
                rv = (r > 1) * (62 + r) + (r == 1)  # 001, or 01 + 6 bits (r - 2)
                rn = 3 * (r > 0) + 5 * (r > 1)
                acc, pos = _put(o32, acc, pos, (np.uint64(rv) << np.uint64(n)) | np.uint64(sv16[i]), rn + n)
                run = (run + 1) * (1 - nz)
    rv, rn = _run_code(run, rb)  # the zero planes at the bottom
    acc, pos = _put(o32, acc, pos, rv, rn)
    r = pos & 31  # the last, partial word, left-aligned
    o32[(np.uint64(pos) >> np.uint64(5)) + np.uint64(1)] = np.uint32(_bswap32(acc << np.uint64(32 - r)))
    return pos


@nb.njit(parallel=True, cache=True)
def _encode_kernel(words, width, offsets, payload, lengths):
    """Write every entry's code at its offset; return how many entries' codes are not ``lengths``
    long (a bug, never a data condition: those entries' bytes are not written)."""
    n = words.shape[0]
    nchunks = (n + CHUNK - 1) // CHUNK
    bad = 0
    for c in nb.prange(nchunks):
        a = np.zeros(SCRATCH_WORDS, dtype=np.uint64)
        a32 = a.view(np.uint32)
        a16 = a.view(np.uint16)
        sv32 = np.empty(LANES32, dtype=np.uint32)
        sl32 = np.empty(LANES32, dtype=np.uint32)
        sv16 = np.empty(LANES64, dtype=np.uint16)
        sl16 = np.empty(LANES64, dtype=np.uint16)
        o32 = np.empty(CODE_WORDS32, dtype=np.uint32)
        o8 = o32.view(np.uint8)
        for e in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            nbits = _encode_entry(words, e, width, a, a32, a16, sv32, sl32, sv16, sl16, o32)
            if nbits != lengths[e]:
                bad += 1
                continue
            start = np.uint64(offsets[e])  # unsigned indices: no negative-index wraparound, so LLVM vectorises
            for i in range(np.uint64((nbits + 7) >> 3)):
                payload[start + i] = o8[np.uint64(4) + i]
    return bad


@nb.njit(inline="always")
def _peek(s64, pos):
    """The 64 code bits from bit ``pos`` on, MSB first, from the big-endian words s64."""
    i = np.uint64(pos) >> np.uint64(6)
    sh = np.uint64(pos & 63)
    return (s64[i] << sh) | ((s64[i + np.uint64(1)] >> np.uint64(1)) >> (np.uint64(63) - sh))


@nb.njit(inline="always")
def _get(s64, pos, nbits):
    """Read ``nbits`` (1..64) bits at bit ``pos``, MSB first."""
    return _peek(s64, pos) >> np.uint64(64 - nbits)


@nb.njit(inline="always")
def _decode_entry(payload, start, length, width, s, s64, a, a32, a16, xb, out, e):
    """Decode one entry's code into out[e]; return 0 or an error code of _ERRORS."""
    nbytes = (length + 7) >> 3
    ustart = np.uint64(start)  # unsigned indices: no negative-index wraparound, so LLVM vectorises the copy
    for i in range(np.uint64(nbytes)):
        s[i] = payload[ustart + i]
    for i in range(np.uint64(nbytes), np.uint64(nbytes + 16)):
        s[i] = 0
    if length & 7:
        if s[nbytes - 1] & ((1 << (8 - (length & 7))) - 1):
            return 7
    for j in range((nbytes + 15) >> 3):  # the code as big-endian words, then a zero word
        x = np.uint64(0)
        for k in range(8):
            x = (x << np.uint64(8)) | np.uint64(s[np.uint64(8 * j + k)])
        s64[j] = x
    npb = 31 if width == 32 else 15
    pb = 5 if width == 32 else 4
    rb = 5 if width == 32 else 6
    ones = (np.uint64(1) << np.uint64(npb)) - np.uint64(1)
    pos = 0
    # base
    if pos + 1 > length:
        return 1
    if _get(s64, pos, 1) == 1:
        if pos + 1 + width > length:
            return 1
        if width == 64:
            hi = _get(s64, pos + 1, 32)
            ub = (hi << np.uint64(32)) | _get(s64, pos + 33, 32)
        else:
            ub = _get(s64, pos + 1, 32)
        pos += 1 + width
        base = np.int64(ub) if width == 64 else np.int64(np.int32(np.uint32(ub)))
        if _base_bits(base, width) != 1 + width:
            return 4
    else:
        if pos + 3 > length:
            return 1
        sel = np.int64(_get(s64, pos, 3))
        pos += 3
        if sel == 0:
            base = np.int64(0)
        else:
            f0 = 4 if width == 32 else 8
            f = f0 << (sel - 1)
            if pos + f > length:
                return 1
            raw = _get(s64, pos, f)
            pos += f
            base = np.int64(raw)
            if raw >> np.uint64(f - 1):  # sign-extend
                base -= np.int64(1) << f
            if _base_bits(base, width) != 3 + f:
                return 4
    # planes, from b = width down to 0: xb[b] = DBX of plane b (zero planes stay 0)
    for b in range(width + 1):
        xb[b] = 0
    b = width
    prev = np.uint64(0)
    after_run = False
    while b >= 0:
        if pos + 1 > length:
            return 1
        v = _peek(s64, pos)
        if v >> np.uint64(63):  # raw plane
            if pos + 1 + npb > length:
                return 1
            dbx = (v << np.uint64(1)) >> np.uint64(64 - npb)
            pos += 1 + npb
            dbp = dbx ^ prev
            if dbx == 0 or _plane_class(dbx, dbp, ones) != 4:
                return 4
            after_run = False
        elif pos + 2 <= length and (v >> np.uint64(62)) == 1:  # 01: run of k >= 2 zero planes
            if after_run:
                return 4
            if pos + 2 + rb > length:
                return 1
            k = np.int64((v << np.uint64(2)) >> np.uint64(64 - rb)) + 2
            pos += 2 + rb
            if k > b + 1:
                return 2
            b -= k
            after_run = True
            continue
        elif pos + 3 <= length and (v >> np.uint64(61)) == 1:  # 001: one zero plane
            if after_run:
                return 4
            pos += 3
            b -= 1
            after_run = True
            continue
        else:
            if pos + 5 > length:
                return 1
            sym = v >> np.uint64(59)
            pos += 5
            if sym == 0:
                dbx = ones
                dbp = dbx ^ prev
            elif sym == 1:
                dbp = np.uint64(0)
                dbx = prev
                if dbx == 0 or dbx == ones:
                    return 4
            else:
                if pos + pb > length:
                    return 1
                at = np.int64((v << np.uint64(5)) >> np.uint64(64 - pb))
                pos += pb
                if sym == 2:
                    if at > npb - 2:
                        return 3
                    dbx = np.uint64(3) << np.uint64(at)
                else:
                    if at > npb - 1:
                        return 3
                    dbx = np.uint64(1) << np.uint64(at)
                dbp = dbx ^ prev
                if dbx == ones or dbp == 0:
                    return 4
            after_run = False
        xb[np.uint64(b)] = dbx
        prev = dbp
        b -= 1
    if pos != length:
        return 5
    # DBX -> planes (into the layout of the planes kernels) -> deltas -> words
    p = np.uint64(0)
    if width == 32:
        p = xb[32]
        sign = p
        for b in range(31, -1, -1):
            p ^= xb[b]
            a32[b] = np.uint32(p)
        _transpose32(a)  # a32[i] is now delta i
        w = np.uint32(np.int32(base))
        out[e, 0] = w
        for i in range(31):
            nxt = np.uint32(w + a32[i])
            if (np.int32(nxt) < np.int32(w)) != ((sign >> np.uint64(i)) & np.uint64(1) == 1):
                return 6
            out[e, i + 1] = nxt
            w = nxt
    else:
        p = xb[64]
        sign = p
        for b in range(63, -1, -1):
            p ^= xb[b]
            a16[4 * (b & 15) + (b >> 4)] = np.uint16(p)
        _transpose16x4(a)  # a[i] is now delta i
        w64 = np.uint64(base)
        out[e, 0] = w64
        for i in range(15):
            nxt = w64 + a[i]
            if (np.int64(nxt) < np.int64(w64)) != ((sign >> np.uint64(i)) & np.uint64(1) == 1):
                return 6
            out[e, i + 1] = nxt
            w64 = nxt
    return 0


@nb.njit(parallel=True, cache=True)
def _decode_kernel(payload, offsets, lengths, width, out, errors):
    n = lengths.shape[0]
    nchunks = (n + CHUNK - 1) // CHUNK
    for c in nb.prange(nchunks):
        s = np.empty(SCRATCH_BYTES, dtype=np.uint8)
        s64 = np.empty(CODE_WORDS, dtype=np.uint64)
        a = np.zeros(SCRATCH_WORDS, dtype=np.uint64)
        a32 = a.view(np.uint32)
        a16 = a.view(np.uint16)
        xb = np.empty(65, dtype=np.uint64)
        for e in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            errors[e] = _decode_entry(payload, offsets[e], np.int64(lengths[e]), width, s, s64, a, a32, a16, xb,
                                      out, e)




_serial = serial  # the serial, GIL-free copy of a kernel (abc.serial)
_bits_kernel_serial = _serial(_bits_kernel)
_encode_kernel_serial = _serial(_encode_kernel)
_decode_kernel_serial = _serial(_decode_kernel)
# (bits, encode, decode) kernels, by the ``parallel`` flag of BPC
_KERNELS = {
    True: (_bits_kernel, _encode_kernel, _decode_kernel),
    False: (_bits_kernel_serial, _encode_kernel_serial, _decode_kernel_serial),
}


# ---------------------------------------------------------------------------------------
# Python API
# ---------------------------------------------------------------------------------------

_HEADER = struct.Struct("<4sB3sQQI")  # magic, width, 3 zero bytes, nbytes, entries, crc32
_MAGIC = b"BPC1"


class BPC(Compressor):
    """Bit-Plane Compression with W-bit words (SPEC §2.1): size path, encoder and decoder.

    >>> import numpy as np
    >>> bpc = BPC(32)
    >>> x = np.arange(64, dtype=np.uint32)
    >>> bpc.bits(x)
    array([15, 23], dtype=uint16)
    >>> bytes(bpc.decode(bpc.encode(x))) == x.tobytes()
    True

    ``parallel=False`` runs serial kernels that release the GIL on every input (with the default,
    only inputs below ``abc.PARALLEL_MIN_ENTRIES`` entries do): the same results, safe to call from
    several threads at once (numba's parallel kernels are not, under its ``workqueue`` threading layer).
    """

    def __init__(self, width: int = 32, *, parallel: bool = True):
        self._p = _Params(width)
        self.width = width
        self.parallel = bool(parallel)
        self.name = f"bpc{width}"  # type: ignore[misc]
        self.max_bits = self._p.max_bits  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"BPC(width={self.width})" if self.parallel else f"BPC(width={self.width}, parallel=False)"

    def _kernels(self, n_entries: int) -> tuple[tuple[Any, Any, Any], contextlib.AbstractContextManager]:
        """The (bits, encode, decode) kernels for an input of ``n_entries``, and the lock they need:
        one parallel launch at a time (``abc.PARALLEL_LAUNCH``); serial kernels need no turn."""
        if self.parallel and parallel_for(n_entries):
            return _KERNELS[True], PARALLEL_LAUNCH
        return _KERNELS[False], contextlib.nullcontext()

    def _words(self, entries: np.ndarray) -> np.ndarray:
        return entries.view(np.uint32 if self.width == 32 else np.uint64)

    def _bits(self, entries: np.ndarray) -> np.ndarray:
        (bits_kernel, _, _), turn = self._kernels(entries.shape[0])
        with turn:
            return bits_kernel(self._words(entries), self.width)

    def encode_entries(self, data: object) -> tuple[np.ndarray, np.ndarray]:
        """Encode every entry: ``(lengths, payload)``.

        ``lengths`` (uint16[E]) is each entry's code length in bits, equal to ``bits``;
        ``payload`` (uint8) holds the codes MSB first, entry e starting at byte
        ``sum(ceil(lengths[:e] / 8))``, unused bits of an entry's last byte zero.
        """
        entries = as_entries(data)
        words = self._words(entries)
        (bits_kernel, encode_kernel, _), turn = self._kernels(entries.shape[0])
        with turn:
            lengths = bits_kernel(words, self.width)
            offsets = _offsets(lengths)
            payload = np.empty(int(offsets[-1]), dtype=np.uint8)
            bad = encode_kernel(words, self.width, offsets, payload, lengths)
        if bad:  # the two traversals disagree: a bug, never a data condition
            raise AssertionError(f"BPC encoder and size path disagree on {bad} entries")
        return lengths, payload

    def decode_entries(self, lengths: np.ndarray, payload: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`encode_entries`: the ``(E, 128)`` uint8 entries.

        Raises ``ValueError`` naming the first bad entry for a truncated or corrupted input.
        """
        lengths = np.asarray(lengths)
        payload = np.asarray(payload)
        if lengths.ndim != 1 or lengths.dtype.kind not in "ui":
            raise ValueError(f"lengths must be a 1-D integer array, got {lengths.dtype} {lengths.shape}")
        if payload.ndim != 1 or payload.dtype != np.uint8:
            raise ValueError(f"payload must be a 1-D uint8 array, got {payload.dtype} {payload.shape}")
        bad = np.flatnonzero((lengths < self._p.min_bits) | (lengths > self._p.max_bits))
        if bad.size:
            e = int(bad[0])
            raise ValueError(f"entry {e}: code length {int(lengths[e])} bits is outside "
                             f"[{self._p.min_bits}, {self._p.max_bits}] for {self.name} (corrupted)")
        lengths = lengths.astype(np.uint16)
        offsets = _offsets(lengths)
        if payload.size < offsets[-1]:
            e = int(np.searchsorted(offsets[1:], payload.size, side="right"))
            raise ValueError(f"entry {e}: payload ends at byte {payload.size} but the entry's code "
                             f"needs bytes up to {int(offsets[e + 1])} (truncated)")
        if payload.size > offsets[-1]:
            raise ValueError(f"payload has {payload.size - int(offsets[-1])} bytes after the last "
                             f"entry's code (lengths and payload do not match)")
        out = np.empty((lengths.size, ENTRY_BYTES), dtype=np.uint8)
        errors = np.zeros(lengths.size, dtype=np.uint8)
        (_, _, decode_kernel), turn = self._kernels(lengths.size)
        with turn:
            decode_kernel(payload, offsets, lengths, self.width, self._words(out), errors)
        bad = np.flatnonzero(errors)
        if bad.size:
            e = int(bad[0])
            raise ValueError(f"entry {e}: {_ERRORS[int(errors[e])]}")
        return out

    def encode(self, data: object) -> bytes:
        """Whole buffer -> self-describing BPC stream (header, lengths, codes)."""
        flat = as_entries(data)
        nbytes = _nbytes(data, flat)
        lengths, payload = self.encode_entries(flat)
        crc = zlib.crc32(flat.reshape(-1)[:nbytes])
        header = _HEADER.pack(_MAGIC, self.width, bytes(3), nbytes, lengths.size, crc)
        return b"".join((header, lengths.astype("<u2").tobytes(), payload.tobytes()))

    def decode(self, stream: object) -> bytes:
        """Inverse of :meth:`encode`; ``ValueError`` for any damaged or foreign stream."""
        buf = np.frombuffer(memoryview(stream).cast("B"), dtype=np.uint8)  # type: ignore[arg-type]
        if buf.size < _HEADER.size:
            raise ValueError(f"BPC stream of {buf.size} bytes is shorter than its {_HEADER.size}-byte header")
        magic, width, reserved, nbytes, n, crc = _HEADER.unpack(buf[: _HEADER.size].tobytes())
        if magic != _MAGIC:
            raise ValueError(f"not a BPC stream (magic {magic!r}, expected {_MAGIC!r})")
        if reserved != bytes(3):
            raise ValueError("BPC stream header has nonzero reserved bytes (corrupted header)")
        if width != self.width:
            raise ValueError(f"stream was written by bpc{width}, not {self.name}")
        if n != n_entries(nbytes):
            raise ValueError(f"header says {n} entries for {nbytes} bytes (corrupted header)")
        end = _HEADER.size + 2 * n
        if buf.size < end:
            raise ValueError(f"BPC stream truncated inside its length table ({buf.size} of {end} bytes)")
        lengths = buf[_HEADER.size:end].view("<u2")
        entries = self.decode_entries(lengths, buf[end:])
        flat = entries.reshape(-1)
        if flat[nbytes:].any():
            raise ValueError(f"entry {n - 1}: nonzero bytes past the end of the data (corrupted)")
        data = flat[:nbytes]
        if zlib.crc32(data) != crc:
            raise ValueError("BPC stream checksum mismatch: the decoded data is not what was encoded")
        return data.tobytes()

    def get_config(self) -> dict[str, Any]:
        return {"id": self.name}


def _offsets(lengths: np.ndarray) -> np.ndarray:
    """Byte offset of each entry's code, plus the total, from code lengths in bits."""
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum((lengths.astype(np.int64) + 7) >> 3, out=offsets[1:])
    return offsets


def _nbytes(data: object, entries: np.ndarray) -> int:
    """Size in bytes of the original buffer (before zero padding to whole entries)."""
    if isinstance(data, np.ndarray) and data is entries:
        return entries.size
    try:
        return memoryview(data).nbytes  # type: ignore[arg-type]
    except TypeError:
        return np.asarray(data).nbytes
