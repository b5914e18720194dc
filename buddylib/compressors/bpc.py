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

from buddylib.compressors.abc import PARALLEL_LAUNCH, Compressor, parallel_for, serial
from buddylib.entries import ENTRY_BYTES, as_entries, n_entries

CHUNK = 256  # entries per parallel work item; scratch buffers are allocated once per chunk
PLANE_SCRATCH = 81  # 65 planes + 16 deltas (W = 64)
SCRATCH_BYTES = 160  # one entry's code is at most 1105 bits = 139 bytes, plus 8 for peeking

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


@nb.njit(inline="always")
def _transpose(a, off, n, rep):
    """In place, transpose the n x n bit matrix a[off:off+n] (row i, bit j -> row j, bit i).

    ``rep`` replicates the masks across 64 / n lanes of each uint64 (1 for n = 32;
    0x0001000100010001 for n = 16), so one call transposes four 16 x 16 blocks at once.
    """
    j = n >> 1
    m = (np.uint64(1) << np.uint64(j)) - np.uint64(1)
    while j != 0:
        mr = m * rep
        k = 0
        while k < n:
            t = ((a[off + k] >> np.uint64(j)) ^ a[off + k + j]) & mr
            a[off + k + j] ^= t
            a[off + k] ^= t << np.uint64(j)
            k = (k + j + 1) & ~j
        j >>= 1
        m ^= m << np.uint64(j)


@nb.njit(inline="always")
def _transpose32(a, off):
    """Transpose a 32 x 32 bit matrix packed two rows per uint64 (row k | row k+16 << 32).

    The first stage (swap 16 x 16 blocks) happens inside each word; the other four run
    on both 32-bit lanes at once.
    """
    for k in range(16):
        x = a[off + k]
        t = ((x >> np.uint64(16)) ^ (x >> np.uint64(32))) & np.uint64(0xFFFF)
        a[off + k] = x ^ ((t << np.uint64(32)) | (t << np.uint64(16)))
    _transpose(a, off, 16, np.uint64(0x0001000100010001))


@nb.njit(inline="always")
def _planes(words, e, width, p):
    """Fill p[0..width] with the DBP bit-planes of entry e's deltas; return the base word.

    Plane b holds bit b of delta i at bit position i; plane ``width`` holds the sign bits
    of the (width+1)-bit exact deltas.
    """
    nw = words.shape[1]
    sign = np.uint64(0)
    if width == 32:
        for i in range(16):  # delta i and delta i+16 share p[65 + i]
            a = np.int64(np.int32(words[e, i]))
            b = np.int64(np.int32(words[e, i + 1]))
            lo = np.uint64((b - a) & 0xFFFFFFFF)
            if b < a:
                sign |= np.uint64(1) << np.uint64(i)
            hi = np.uint64(0)
            if i < 15:
                a = np.int64(np.int32(words[e, i + 16]))
                b = np.int64(np.int32(words[e, i + 17]))
                hi = np.uint64((b - a) & 0xFFFFFFFF)
                if b < a:
                    sign |= np.uint64(1) << np.uint64(i + 16)
            p[65 + i] = lo | (hi << np.uint64(32))
        _transpose32(p, 65)
        for c in range(16):
            p[c] = p[65 + c] & np.uint64(0xFFFFFFFF)
            p[16 + c] = p[65 + c] >> np.uint64(32)
        p[32] = sign
    else:
        for i in range(nw - 1):  # deltas go to p[65:81], out of the planes' way
            a = np.int64(words[e, i])
            b = np.int64(words[e, i + 1])
            p[65 + i] = np.uint64(words[e, i + 1] - words[e, i])
            if b < a:
                sign |= np.uint64(1) << np.uint64(i)
        p[65 + nw - 1] = 0
        # four 16 x 16 transposes at once, one per 16-bit lane; row c, lane q = plane 16q + c
        _transpose(p, 65, 16, np.uint64(0x0001000100010001))
        for q in range(4):
            for c in range(16):
                p[16 * q + c] = (p[65 + c] >> np.uint64(16 * q)) & np.uint64(0xFFFF)
        p[64] = sign
    return np.int64(words[e, 0]) if width == 64 else np.int64(np.int32(words[e, 0]))


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


@nb.njit(inline="always")
def _entry_bits(words, e, width, p):
    base = _planes(words, e, width, p)
    npb = 31 if width == 32 else 15
    ones = (np.uint64(1) << np.uint64(npb)) - np.uint64(1)
    sym = 5 + (5 if width == 32 else 4)  # 5-bit prefix + position
    run_code = 7 if width == 32 else 8
    total = _base_bits(base, width)
    run = 0
    prev = np.uint64(0)
    for b in range(width, -1, -1):
        dbp = p[b]
        dbx = dbp ^ prev
        prev = dbp
        if dbx == 0:
            run += 1
            continue
        if run:
            total += 3 if run == 1 else run_code
            run = 0
        c = _plane_class(dbx, dbp, ones)
        total += 5 if c <= 1 else (sym if c <= 3 else 1 + npb)
    if run:
        total += 3 if run == 1 else run_code
    return total


@nb.njit(parallel=True, cache=True)
def _bits_kernel(words, width):
    n = words.shape[0]
    out = np.empty(n, dtype=np.uint16)
    nchunks = (n + CHUNK - 1) // CHUNK
    for c in nb.prange(nchunks):
        p = np.empty(PLANE_SCRATCH, dtype=np.uint64)
        for e in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            out[e] = _entry_bits(words, e, width, p)
    return out


@nb.njit(inline="always")
def _put(buf, state, value, nbits):
    """Append the low ``nbits`` (<= 32) of value, MSB first; state = [acc, nacc, byte pos]."""
    mask = (np.uint64(1) << np.uint64(nbits)) - np.uint64(1)
    acc = (np.uint64(state[0]) << np.uint64(nbits)) | (np.uint64(value) & mask)
    nacc = state[1] + nbits
    pos = state[2]
    while nacc >= 8:
        nacc -= 8
        buf[pos] = np.uint8((acc >> np.uint64(nacc)) & np.uint64(0xFF))
        pos += 1
    state[0] = np.int64(acc & ((np.uint64(1) << np.uint64(nacc)) - np.uint64(1)))
    state[1] = nacc
    state[2] = pos


@nb.njit(inline="always")
def _put_run(buf, st, run, width):
    if run == 1:
        _put(buf, st, 1, 3)  # 001
    else:
        rb = 5 if width == 32 else 6
        _put(buf, st, 1, 2)  # 01
        _put(buf, st, run - 2, rb)


@nb.njit(inline="always")
def _encode_entry(words, e, width, p, buf, start, st):
    """Write entry e's code at byte ``start`` of buf; return the number of bits written."""
    base = _planes(words, e, width, p)
    npb = 31 if width == 32 else 15
    pb = 5 if width == 32 else 4
    ones = (np.uint64(1) << np.uint64(npb)) - np.uint64(1)
    st[0] = 0
    st[1] = 0
    st[2] = start
    nbase = _base_bits(base, width)
    if nbase == 3:
        _put(buf, st, 0, 3)
    elif nbase == 1 + width:
        _put(buf, st, 1, 1)
        ub = np.uint64(base)
        if width == 64:
            _put(buf, st, ub >> np.uint64(32), 32)
        _put(buf, st, ub & np.uint64(0xFFFFFFFF), 32)
    else:
        f = nbase - 3
        f0 = 4 if width == 32 else 8
        sel = 1 if f == f0 else (2 if f == 2 * f0 else 3)
        _put(buf, st, sel, 3)
        _put(buf, st, np.uint64(base), f)
    total = nbase
    run = 0
    prev = np.uint64(0)
    for b in range(width, -1, -1):
        dbp = p[b]
        dbx = dbp ^ prev
        prev = dbp
        if dbx == 0:
            run += 1
            continue
        if run:
            _put_run(buf, st, run, width)
            total += 3 if run == 1 else 2 + (5 if width == 32 else 6)
            run = 0
        c = _plane_class(dbx, dbp, ones)
        if c == 0:
            _put(buf, st, 0, 5)
            total += 5
        elif c == 1:
            _put(buf, st, 1, 5)
            total += 5
        elif c <= 3:
            low = dbx & (~dbx + np.uint64(1))
            pos = 0
            while (low >> np.uint64(pos)) != np.uint64(1):
                pos += 1
            _put(buf, st, 2 if c == 2 else 3, 5)
            _put(buf, st, pos, pb)
            total += 5 + pb
        else:
            _put(buf, st, 1, 1)
            _put(buf, st, dbx, npb)
            total += 1 + npb
    if run:
        _put_run(buf, st, run, width)
        total += 3 if run == 1 else 2 + (5 if width == 32 else 6)
    if st[1]:  # flush, zero-padding the last byte
        _put(buf, st, 0, 8 - st[1])
    return total


@nb.njit(parallel=True, cache=True)
def _encode_kernel(words, width, offsets, payload, lengths):
    n = words.shape[0]
    nchunks = (n + CHUNK - 1) // CHUNK
    bad = 0
    for c in nb.prange(nchunks):
        p = np.empty(PLANE_SCRATCH, dtype=np.uint64)
        st = np.empty(3, dtype=np.int64)
        for e in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            if _encode_entry(words, e, width, p, payload, offsets[e], st) != lengths[e]:
                bad += 1
    return bad


@nb.njit(inline="always")
def _get(s, pos, nbits):
    """Read ``nbits`` (<= 32) bits at bit ``pos`` of the scratch copy s, MSB first."""
    byte = pos >> 3
    x = np.uint64(0)
    for i in range(6):
        x = (x << np.uint64(8)) | np.uint64(s[byte + i])
    x = x << np.uint64(16 + (pos & 7))
    return x >> np.uint64(64 - nbits)


@nb.njit(inline="always")
def _decode_entry(payload, start, length, width, s, p, out, e):
    """Decode one entry's code into out[e]; return 0 or an error code of _ERRORS."""
    nbytes = (length + 7) >> 3
    for i in range(nbytes):
        s[i] = payload[start + i]
    for i in range(nbytes, nbytes + 8):
        s[i] = 0
    if length & 7:
        if s[nbytes - 1] & ((1 << (8 - (length & 7))) - 1):
            return 7
    npb = 31 if width == 32 else 15
    pb = 5 if width == 32 else 4
    rb = 5 if width == 32 else 6
    ones = (np.uint64(1) << np.uint64(npb)) - np.uint64(1)
    pos = 0
    # base
    if pos + 1 > length:
        return 1
    if _get(s, pos, 1) == 1:
        if pos + 1 + width > length:
            return 1
        if width == 64:
            hi = _get(s, pos + 1, 32)
            ub = (hi << np.uint64(32)) | _get(s, pos + 33, 32)
        else:
            ub = _get(s, pos + 1, 32)
        pos += 1 + width
        base = np.int64(ub) if width == 64 else np.int64(np.int32(np.uint32(ub)))
        if _base_bits(base, width) != 1 + width:
            return 4
    else:
        if pos + 3 > length:
            return 1
        sel = np.int64(_get(s, pos, 3))
        pos += 3
        if sel == 0:
            base = np.int64(0)
        else:
            f0 = 4 if width == 32 else 8
            f = f0 << (sel - 1)
            if pos + f > length:
                return 1
            raw = _get(s, pos, f)
            pos += f
            base = np.int64(raw)
            if raw >> np.uint64(f - 1):  # sign-extend
                base -= np.int64(1) << f
            if _base_bits(base, width) != 3 + f:
                return 4
    # planes, from b = width down to 0
    b = width
    prev = np.uint64(0)
    after_run = False
    while b >= 0:
        if pos + 1 > length:
            return 1
        if _get(s, pos, 1) == 1:  # raw plane
            if pos + 1 + npb > length:
                return 1
            dbx = _get(s, pos + 1, npb)
            pos += 1 + npb
            dbp = dbx ^ prev
            if dbx == 0 or _plane_class(dbx, dbp, ones) != 4:
                return 4
            after_run = False
        elif pos + 2 <= length and _get(s, pos, 2) == 1:  # 01: run of k >= 2 zero planes
            if after_run:
                return 4
            if pos + 2 + rb > length:
                return 1
            k = np.int64(_get(s, pos + 2, rb)) + 2
            pos += 2 + rb
            if k > b + 1:
                return 2
            for _ in range(k):
                p[b] = prev
                b -= 1
            after_run = True
            continue
        elif pos + 3 <= length and _get(s, pos, 3) == 1:  # 001: one zero plane
            if after_run:
                return 4
            pos += 3
            p[b] = prev
            b -= 1
            after_run = True
            continue
        else:
            if pos + 5 > length:
                return 1
            sym = _get(s, pos, 5)
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
                at = np.int64(_get(s, pos, pb))
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
        p[b] = dbp
        prev = dbp
        b -= 1
    if pos != length:
        return 5
    # planes -> deltas -> words
    sign = p[width]
    if width == 32:
        for c in range(16):
            p[65 + c] = p[c] | (p[16 + c] << np.uint64(32))
        _transpose32(p, 65)  # row i = delta i, row i+16 = delta i+16
        for c in range(16):
            p[c] = p[65 + c] & np.uint64(0xFFFFFFFF)
            p[16 + c] = p[65 + c] >> np.uint64(32)
        w = np.uint32(np.int32(base))
        out[e, 0] = w
        for i in range(31):
            nxt = np.uint32(w + np.uint32(p[i]))
            if (np.int32(nxt) < np.int32(w)) != ((sign >> np.uint64(i)) & np.uint64(1) == 1):
                return 6
            out[e, i + 1] = nxt
            w = nxt
    else:
        for c in range(16):
            p[65 + c] = 0
            for q in range(4):
                p[65 + c] |= p[16 * q + c] << np.uint64(16 * q)
        _transpose(p, 65, 16, np.uint64(0x0001000100010001))  # row i is now delta i
        w64 = np.uint64(base)
        out[e, 0] = w64
        for i in range(15):
            nxt = w64 + p[65 + i]
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
        p = np.empty(PLANE_SCRATCH, dtype=np.uint64)
        for e in range(c * CHUNK, min(n, (c + 1) * CHUNK)):
            errors[e] = _decode_entry(payload, offsets[e], np.int64(lengths[e]), width, s, p, out, e)


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
