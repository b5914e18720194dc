"""BPC's compiled kernels: the size path, the encoder and the decoder of SPEC §2.1.

Three paths share one plane traversal (the layout below): the size path (``bits``: the
exact code length, as fast as possible), the encoder (one MSB-first bit string per entry,
written at a byte offset) and the decoder. W = 32 and W = 64 share every helper; each width
has its own kernels, so that compiling one does not compile the other's code.

Every kernel exists twice (:data:`KERNELS`): a parallel one, for one large buffer, and a
serial copy that releases the GIL (``abc.serial``), for small inputs and for callers that
parallelise across buffers on their own threads (numba's parallel kernels must not be
entered from several threads at once). Both call one compiled body per chunk of entries
(the ``_chunk`` functions, ``abc.chunk_body``): the helpers are inlined once, not once per
kernel, which is most of a cold compile.

Speed comes from the layout: the per-plane work is a vectorised loop across planes, so the
size path and the encoder cost no branch per plane; the encoder appends codes with a
branch-free bit writer and the decoder reads 64-bit windows.

The decoder accepts exactly the codes the encoder produces: every read is bounds-checked
against the entry's stated length, and a code that is not the canonical encoding of the data
it decodes to is rejected, so a damaged entry yields an error code (:data:`DECODE_ERRORS`)
instead of an out-of-bounds read or other data.
"""

from __future__ import annotations

import numba as nb
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from buddylib.compressors.abc import chunk_body, serial

# ---- the plane layout, shared by the three paths ----
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
    """Bits of the base word's code: '000' for zero, '0' + selector + the narrowest field, or '1' + raw."""
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


@nb.njit(inline="always")
def _scratch():
    """One entry's plane layout (see above), zeroed: the lanes past the planes must read as 0."""
    return np.zeros(SCRATCH_WORDS, dtype=np.uint64)


# ---- size path ----
#
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


@chunk_body
def _bits_chunk32(words, lo, hi, out, a):
    """Code length in bits of W = 32 entries lo..hi-1 into out: the one compiled body that the
    parallel and the serial size kernel both call (compiled once, not once per kernel)."""
    a32 = a.view(np.uint32)
    for e in range(lo, hi):
        base = _planes32(words, e, a, a32)
        out[e] = _base_bits(base, 32) + _planes_bits32(a32)


@chunk_body
def _bits_chunk64(words, lo, hi, out, a):
    """As :func:`_bits_chunk32` for W = 64."""
    a16 = a.view(np.uint16)
    for e in range(lo, hi):
        base = _planes64(words, e, a)
        out[e] = _base_bits(base, 64) + _planes_bits64(a16)


@nb.njit(parallel=True, cache=True)
def _bits_kernel32(words):
    """Code length in bits of every W = 32 entry of ``words`` (uint16[E]): what the encoder will write."""
    n = words.shape[0]
    out = np.empty(n, dtype=np.uint16)
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK))
        _bits_chunk32(words, lo, hi, out, _scratch())
    return out


@nb.njit(parallel=True, cache=True)
def _bits_kernel64(words):
    """As :func:`_bits_kernel32` for W = 64."""
    n = words.shape[0]
    out = np.empty(n, dtype=np.uint16)
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK))
        _bits_chunk64(words, lo, hi, out, _scratch())
    return out


# ---- encoder ----


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
def _put_base(o32, acc, pos, base, width):
    """Append the base word's code: '000' for zero, '0' + a 2-bit selector + a sign-extended field,
    or '1' + the raw word; return (acc, pos) as :func:`_put`."""
    nbase = _base_bits(base, width)
    ub = np.uint64(base)
    if nbase == 3:
        return _put(o32, acc, pos, 0, 3)
    if nbase == 1 + width:
        acc, pos = _put(o32, acc, pos, 1, 1)
        if width == 64:
            acc, pos = _put(o32, acc, pos, ub >> np.uint64(32), 32)
        return _put(o32, acc, pos, ub & np.uint64(0xFFFFFFFF), 32)
    f = nbase - 3
    f0 = 4 if width == 32 else 8
    sel = 1 if f == f0 else (2 if f == 2 * f0 else 3)
    field = ub & ((np.uint64(1) << np.uint64(f)) - np.uint64(1))
    return _put(o32, acc, pos, (np.uint64(sel) << np.uint64(f)) | field, nbase)


@nb.njit(inline="always")
def _put_planes32(o32, acc, pos, sv, sl):
    """Append the W = 32 planes' codes, 32 down to 0, each nonzero plane's preceded by the run of
    zero planes above it; return (acc, pos, the zero planes left at the bottom)."""
    run = 0
    for b in range(32, -1, -1):
        n = np.int64(sl[np.uint64(b)])
        nz = n != 0
        r = run * nz  # the zero planes above this one, if it is not zero itself
        acc, pos = _put(o32, acc, pos, (r > 1) * (30 + r) + (r == 1), 3 * (r > 0) + 4 * (r > 1))  # 001, 01+5b
        acc, pos = _put(o32, acc, pos, sv[np.uint64(b)], n)
        run = (run + 1) * (1 - nz)
    return acc, pos, run


@nb.njit(inline="always")
def _put_planes64(o32, acc, pos, sv, sl):
    """As :func:`_put_planes32` for W = 64, through the layout of _planes64 (run code and plane
    code in one put: together they fit in 32 bits)."""
    n = np.int64(sl[SIGN64])
    acc, pos = _put(o32, acc, pos, sv[SIGN64], n)
    run = 1 - (n != 0)
    for q in range(3, -1, -1):  # planes 63..0: lane q of words 15..0
        for c in range(15, -1, -1):
            i = np.uint64(4 * c + q)
            n = np.int64(sl[i])
            nz = n != 0
            r = run * nz
            rv = (r > 1) * (62 + r) + (r == 1)  # 001, or 01 + 6 bits (r - 2)
            rn = 3 * (r > 0) + 5 * (r > 1)
            acc, pos = _put(o32, acc, pos, (np.uint64(rv) << np.uint64(n)) | np.uint64(sv[i]), rn + n)
            run = (run + 1) * (1 - nz)
    return acc, pos, run


@nb.njit(inline="always")
def _finish(o32, acc, pos, run, rb):
    """Append the run of zero planes at the bottom and store the last, partial word (left-aligned);
    return the code's length in bits."""
    rv, rn = _run_code(run, rb)
    acc, pos = _put(o32, acc, pos, rv, rn)
    r = pos & 31
    o32[(np.uint64(pos) >> np.uint64(5)) + np.uint64(1)] = np.uint32(_bswap32(acc << np.uint64(32 - r)))
    return pos


@nb.njit(inline="always")
def _store(o8, nbits, payload, offset):
    """Copy a code of ``nbits`` from the scratch o8[4:] to the payload at byte ``offset``."""
    start = np.uint64(offset)  # unsigned indices: no negative-index wraparound, so LLVM vectorises
    for i in range(np.uint64((nbits + 7) >> 3)):
        payload[start + i] = o8[np.uint64(4) + i]


@chunk_body
def _encode_chunk32(words, lo, hi, offsets, payload, lengths, a, sv, sl, o32):
    """Write the codes of W = 32 entries lo..hi-1 at their offsets; return how many entries' codes are
    not ``lengths`` long (a bug, never a data condition: those entries' bytes are not written)."""
    a32 = a.view(np.uint32)
    o8 = o32.view(np.uint8)
    bad = 0
    for e in range(lo, hi):
        base = _planes32(words, e, a, a32)
        _symbols32(a32, sv, sl)
        acc, pos = _put_base(o32, np.uint64(0), 0, base, 32)
        acc, pos, run = _put_planes32(o32, acc, pos, sv, sl)
        nbits = _finish(o32, acc, pos, run, 5)
        if nbits != lengths[e]:
            bad += 1
        else:
            _store(o8, nbits, payload, offsets[e])
    return bad


@chunk_body
def _encode_chunk64(words, lo, hi, offsets, payload, lengths, a, sv, sl, o32):
    """As :func:`_encode_chunk32` for W = 64."""
    a16 = a.view(np.uint16)
    o8 = o32.view(np.uint8)
    bad = 0
    for e in range(lo, hi):
        base = _planes64(words, e, a)
        _symbols64(a16, sv, sl)
        acc, pos = _put_base(o32, np.uint64(0), 0, base, 64)
        acc, pos, run = _put_planes64(o32, acc, pos, sv, sl)
        nbits = _finish(o32, acc, pos, run, 6)
        if nbits != lengths[e]:
            bad += 1
        else:
            _store(o8, nbits, payload, offsets[e])
    return bad


@nb.njit(parallel=True, cache=True)
def _encode_kernel32(words, offsets, payload, lengths):
    """Write every W = 32 entry's code at its offset; return the count of :func:`_encode_chunk32`."""
    n = words.shape[0]
    bad = 0
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK))
        bad += _encode_chunk32(words, lo, hi, offsets, payload, lengths,
                              _scratch(), np.empty(LANES32, dtype=np.uint32), np.empty(LANES32, dtype=np.uint32),
                              np.empty(CODE_WORDS32, dtype=np.uint32))
    return bad


@nb.njit(parallel=True, cache=True)
def _encode_kernel64(words, offsets, payload, lengths):
    """As :func:`_encode_kernel32` for W = 64."""
    n = words.shape[0]
    bad = 0
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK))
        bad += _encode_chunk64(words, lo, hi, offsets, payload, lengths,
                              _scratch(), np.empty(LANES64, dtype=np.uint16), np.empty(LANES64, dtype=np.uint16),
                              np.empty(CODE_WORDS32, dtype=np.uint32))
    return bad


# ---- decoder ----

# Decoder error codes (0: the entry decoded); the messages are DECODE_ERRORS.
TRUNCATED = 1
RUN_PAST_END = 2
BAD_POSITION = 3
NOT_CANONICAL = 4
BAD_LENGTH = 5
BAD_SIGN = 6
BAD_PADDING = 7
#: What each decoder error code means (the message a damaged stream's error gives).
DECODE_ERRORS = {
    TRUNCATED: "code ends before the entry is complete (truncated)",
    RUN_PAST_END: "a zero-plane run goes past the last bit-plane",
    BAD_POSITION: "a bit position is outside the plane",
    NOT_CANONICAL: "code is not the canonical BPC encoding of any entry (corrupted)",
    BAD_LENGTH: "code length differs from the bits it decodes (corrupted length or data)",
    BAD_SIGN: "a delta's sign bit contradicts the words it produces (corrupted)",
    BAD_PADDING: "nonzero padding bits after the code (corrupted)",
}


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
def _load_code(payload, start, length, s, s64):
    """Entry's code (``length`` bits at byte ``start``) into the big-endian words s64, then a zero
    word, so that every 64-bit window read stays in bounds; BAD_PADDING or 0."""
    nbytes = (length + 7) >> 3
    ustart = np.uint64(start)  # unsigned indices: no negative-index wraparound, so LLVM vectorises the copy
    for i in range(np.uint64(nbytes)):
        s[i] = payload[ustart + i]
    for i in range(np.uint64(nbytes), np.uint64(nbytes + 16)):
        s[i] = 0
    if length & 7:
        if s[nbytes - 1] & ((1 << (8 - (length & 7))) - 1):
            return BAD_PADDING
    for j in range((nbytes + 15) >> 3):
        x = np.uint64(0)
        for k in range(8):
            x = (x << np.uint64(8)) | np.uint64(s[np.uint64(8 * j + k)])
        s64[j] = x
    return 0


@nb.njit(inline="always")
def _read_base(s64, length, width):
    """The base word, coded at the start of the entry: (error or 0, base, its code's bits).

    A base coded in a wider class than it needs is not canonical (NOT_CANONICAL)."""
    base = np.int64(0)
    if length < 1:
        return TRUNCATED, base, 0
    if _get(s64, 0, 1) == 1:  # '1' + the raw word
        if 1 + width > length:
            return TRUNCATED, base, 0
        if width == 64:
            base = np.int64((_get(s64, 1, 32) << np.uint64(32)) | _get(s64, 33, 32))
        else:
            base = np.int64(np.int32(np.uint32(_get(s64, 1, 32))))
        return (NOT_CANONICAL if _base_bits(base, width) != 1 + width else 0), base, 1 + width
    if 3 > length:
        return TRUNCATED, base, 0
    sel = np.int64(_get(s64, 0, 3))  # '000' zero, else '0' + a 2-bit field-width selector
    if sel == 0:
        return 0, base, 3
    f = (4 if width == 32 else 8) << (sel - 1)
    if 3 + f > length:
        return TRUNCATED, base, 0
    raw = _get(s64, 3, f)
    base = np.int64(raw)
    if raw >> np.uint64(f - 1):  # sign-extend
        base -= np.int64(1) << f
    return (NOT_CANONICAL if _base_bits(base, width) != 3 + f else 0), base, 3 + f


@nb.njit(inline="always")
def _raw_plane(v, pos, length, prev, width):
    """A raw plane, '1' + its DBX, at the window v of bit pos: (error or 0, DBX, DBP, next pos).

    ``prev`` is the DBP of the plane above; a plane with a shorter code is not canonical."""
    npb = 31 if width == 32 else 15
    ones = (np.uint64(1) << np.uint64(npb)) - np.uint64(1)
    dbx = (v << np.uint64(1)) >> np.uint64(64 - npb)
    dbp = dbx ^ prev
    if pos + 1 + npb > length:
        return TRUNCATED, dbx, dbp, pos
    if dbx == 0 or _plane_class(dbx, dbp, ones) != 4:
        return NOT_CANONICAL, dbx, dbp, pos
    return 0, dbx, dbp, pos + 1 + npb


@nb.njit(inline="always")
def _symbol_plane(v, pos, length, prev, width):
    """A plane coded by a 5-bit symbol ('00000' all ones, '00001' DBP zero, '00010' two adjacent
    ones and '00011' a single one, each with its position) at the window v of bit pos:
    (error or 0, DBX, DBP, next pos), as :func:`_raw_plane`."""
    npb = 31 if width == 32 else 15
    pb = 5 if width == 32 else 4
    ones = (np.uint64(1) << np.uint64(npb)) - np.uint64(1)
    zero = np.uint64(0)
    if pos + 5 > length:
        return TRUNCATED, zero, zero, pos
    sym = v >> np.uint64(59)
    if sym == 0:
        return 0, ones, ones ^ prev, pos + 5
    if sym == 1:  # the DBX repeats the one above, which must not have a shorter code of its own
        if prev == 0 or prev == ones:
            return NOT_CANONICAL, prev, zero, pos
        return 0, prev, zero, pos + 5
    if pos + 5 + pb > length:
        return TRUNCATED, zero, zero, pos
    at = np.int64((v << np.uint64(5)) >> np.uint64(64 - pb))
    if at > npb - (2 if sym == 2 else 1):
        return BAD_POSITION, zero, zero, pos
    dbx = (np.uint64(3) if sym == 2 else np.uint64(1)) << np.uint64(at)
    dbp = dbx ^ prev
    if dbx == ones or dbp == 0:
        return NOT_CANONICAL, dbx, dbp, pos
    return 0, dbx, dbp, pos + 5 + pb


@nb.njit(inline="always")
def _read_planes(s64, pos, length, width, xb):
    """The plane codes from bit pos to the end of the entry, planes W down to 0: xb[b] = DBX of
    plane b (zero planes 0); an error code, or 0 if they end exactly at ``length``."""
    rb = 5 if width == 32 else 6
    for b in range(width + 1):
        xb[b] = 0
    b = width
    prev = np.uint64(0)  # the DBP of the plane above
    after_run = False  # two runs in a row are not canonical: one longer run codes them
    while b >= 0:
        if pos + 1 > length:
            return TRUNCATED
        v = _peek(s64, pos)
        if v >> np.uint64(63):
            err, dbx, dbp, pos = _raw_plane(v, pos, length, prev, width)
        elif pos + 2 <= length and (v >> np.uint64(62)) == 1:  # 01: run of k >= 2 zero planes
            if after_run:
                return NOT_CANONICAL
            if pos + 2 + rb > length:
                return TRUNCATED
            k = np.int64((v << np.uint64(2)) >> np.uint64(64 - rb)) + 2
            pos += 2 + rb
            if k > b + 1:
                return RUN_PAST_END
            b -= k
            after_run = True
            continue
        elif pos + 3 <= length and (v >> np.uint64(61)) == 1:  # 001: one zero plane
            if after_run:
                return NOT_CANONICAL
            pos += 3
            b -= 1
            after_run = True
            continue
        else:
            err, dbx, dbp, pos = _symbol_plane(v, pos, length, prev, width)
        if err:
            return err
        xb[np.uint64(b)] = dbx
        prev = dbp
        after_run = False
        b -= 1
    return BAD_LENGTH if pos != length else 0


@nb.njit(inline="always")
def _words32(xb, base, a, a32, out, e):
    """W = 32: DBX -> planes (the layout of _planes32) -> deltas -> entry e's words in ``out``;
    BAD_SIGN if a delta's sign bit contradicts the words, else 0."""
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
            return BAD_SIGN
        out[e, i + 1] = nxt
        w = nxt
    return 0


@nb.njit(inline="always")
def _words64(xb, base, a, a16, out, e):
    """As :func:`_words32` for W = 64, through the layout of _planes64."""
    p = xb[64]
    sign = p
    for b in range(63, -1, -1):
        p ^= xb[b]
        a16[4 * (b & 15) + (b >> 4)] = np.uint16(p)
    _transpose16x4(a)  # a[i] is now delta i
    w = np.uint64(base)
    out[e, 0] = w
    for i in range(15):
        nxt = w + a[i]
        if (np.int64(nxt) < np.int64(w)) != ((sign >> np.uint64(i)) & np.uint64(1) == 1):
            return BAD_SIGN
        out[e, i + 1] = nxt
        w = nxt
    return 0


@nb.njit(inline="always")
def _decode_entry32(payload, start, length, s, s64, a, a32, xb, out, e):
    """Decode one W = 32 entry's code into out[e]; return 0 or an error code of DECODE_ERRORS."""
    err = _load_code(payload, start, length, s, s64)
    if err:
        return err
    err, base, pos = _read_base(s64, length, 32)
    if err:
        return err
    err = _read_planes(s64, pos, length, 32, xb)
    if err:
        return err
    return _words32(xb, base, a, a32, out, e)


@nb.njit(inline="always")
def _decode_entry64(payload, start, length, s, s64, a, a16, xb, out, e):
    """As :func:`_decode_entry32` for W = 64."""
    err = _load_code(payload, start, length, s, s64)
    if err:
        return err
    err, base, pos = _read_base(s64, length, 64)
    if err:
        return err
    err = _read_planes(s64, pos, length, 64, xb)
    if err:
        return err
    return _words64(xb, base, a, a16, out, e)


@chunk_body
def _decode_chunk32(payload, offsets, lengths, lo, hi, out, errors, s, s64, a, xb):
    """Decode the codes of W = 32 entries lo..hi-1 into ``out``; errors[e]: 0 or entry e's error code.
    The scratch arrays are arguments, so that LLVM knows they alias nothing else (``noalias``)."""
    a32 = a.view(np.uint32)
    for e in range(lo, hi):
        errors[e] = _decode_entry32(payload, offsets[e], np.int64(lengths[e]), s, s64, a, a32, xb, out, e)


@chunk_body
def _decode_chunk64(payload, offsets, lengths, lo, hi, out, errors, s, s64, a, xb):
    """Decode the codes of W = 64 entries lo..hi-1 into ``out``; errors[e]: 0 or entry e's error code.
    The scratch arrays are arguments, so that LLVM knows they alias nothing else (``noalias``)."""
    a16 = a.view(np.uint16)
    for e in range(lo, hi):
        errors[e] = _decode_entry64(payload, offsets[e], np.int64(lengths[e]), s, s64, a, a16, xb, out, e)


@nb.njit(parallel=True, cache=True)
def _decode_kernel32(payload, offsets, lengths, out, errors):
    """Decode every W = 32 entry's code at its offset into ``out``; errors[e]: 0 or entry e's error code."""
    n = lengths.shape[0]
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK))
        _decode_chunk32(payload, offsets, lengths, lo, hi, out, errors,
                        np.empty(SCRATCH_BYTES, dtype=np.uint8), np.empty(CODE_WORDS, dtype=np.uint64),
                        _scratch(), np.empty(65, dtype=np.uint64))


@nb.njit(parallel=True, cache=True)
def _decode_kernel64(payload, offsets, lengths, out, errors):
    """As :func:`_decode_kernel32` for W = 64."""
    n = lengths.shape[0]
    for c in nb.prange((n + CHUNK - 1) // CHUNK):
        lo, hi = np.uint64(c * CHUNK), np.uint64(min(n, (c + 1) * CHUNK))
        _decode_chunk64(payload, offsets, lengths, lo, hi, out, errors,
                        np.empty(SCRATCH_BYTES, dtype=np.uint8), np.empty(CODE_WORDS, dtype=np.uint64),
                        _scratch(), np.empty(65, dtype=np.uint64))


# ---- the kernels ----

#: (bits, encode, decode) kernels by (parallel, width): the parallel ones (``True``), for one large buffer,
#: and their serial, GIL-free copies (``False``). Each pair shares its compiled body (the ``_chunk``
#: functions): the parallel kernel only splits the entries into chunks.
KERNELS = {
    (True, 32): (_bits_kernel32, _encode_kernel32, _decode_kernel32),
    (True, 64): (_bits_kernel64, _encode_kernel64, _decode_kernel64),
    (False, 32): (serial(_bits_kernel32), serial(_encode_kernel32), serial(_decode_kernel32)),
    (False, 64): (serial(_bits_kernel64), serial(_encode_kernel64), serial(_decode_kernel64)),
}
