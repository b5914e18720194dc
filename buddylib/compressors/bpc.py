"""Bit-Plane Compression (Kim, Sullivan, Choukse, Erez, ISCA 2016), the paper's compressor.

BPC suits GPU data because neighbouring words in an entry are similar (arrays of numbers,
not pointers and text): it deltas the W-bit words, transposes the deltas into bit-planes,
XORs neighbouring planes, and codes the planes with a prefix code in which long runs of
zero planes are nearly free. The canonical code of this suite is SPEC §2.1, for W = 32
("bpc32") and W = 64 ("bpc64"), bit for bit (tests/test_bpc.py's reference).

:class:`BPC` offers three paths:

* size (``bits``): the exact code length, what capacity studies need, as fast as possible;
* ``encode_entries`` / ``decode_entries``: the real code, one MSB-first bit string per
  entry, entries packed one after another on byte boundaries, with a uint16 length (bits)
  per entry as metadata;
* ``encode`` / ``decode``: a self-describing byte stream (header, lengths, codes, CRC-32 of
  the data) for whole buffers; :mod:`buddylib.compressors.codec` exposes it as a numcodecs
  and a zarr v3 codec.

The work is split by job: the compiled kernels are :mod:`~buddylib.compressors.bpc_kernels`,
the containers (stream format, offsets, validation of what is read) are
:mod:`~buddylib.compressors.bpc_stream`; this class picks a kernel and joins the two.

Each kernel runs in parallel on one large buffer, and serially, without the GIL, on inputs
below ``abc.PARALLEL_MIN_ENTRIES`` (starting threads costs more than it saves there) and on
every input of ``BPC(width, parallel=False)``, for callers that parallelise across buffers on
their own threads, as zarr does across chunks: numba's parallel kernels must not be entered
from several threads at once (its ``workqueue`` layer aborts the interpreter), while the
serial copies may.

The decoder accepts exactly the streams the encoder produces, so a damaged stream raises
``ValueError`` naming the entry instead of reading out of bounds or silently returning other
data.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from buddylib.compressors import bpc_stream
from buddylib.compressors.abc import PARALLEL_LAUNCH, Compressor, parallel_for, readonly
from buddylib.compressors.bpc_kernels import DECODE_ERRORS, KERNELS
from buddylib.entries import ENTRY_BYTES, as_entries


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
            return KERNELS[True, self.width], PARALLEL_LAUNCH
        return KERNELS[False, self.width], contextlib.nullcontext()

    def _words(self, entries: np.ndarray) -> np.ndarray:
        return entries.view(np.uint32 if self.width == 32 else np.uint64)

    def _bits(self, entries: np.ndarray) -> np.ndarray:
        (bits_kernel, _, _), turn = self._kernels(entries.shape[0])
        with turn:
            return bits_kernel(readonly(self._words(entries)))

    def encode_entries(self, data: object) -> tuple[np.ndarray, np.ndarray]:
        """Encode every entry: ``(lengths, payload)``.

        ``lengths`` (uint16[E]) is each entry's code length in bits, equal to ``bits``;
        ``payload`` (uint8) holds the codes MSB first, entry e starting at byte
        ``sum(ceil(lengths[:e] / 8))``, unused bits of an entry's last byte zero.
        """
        entries = as_entries(data)
        words = readonly(self._words(entries))
        (bits_kernel, encode_kernel, _), turn = self._kernels(entries.shape[0])
        with turn:
            lengths = bits_kernel(words)
            offsets = bpc_stream.code_offsets(lengths)
            payload = np.empty(int(offsets[-1]), dtype=np.uint8)
            bad = encode_kernel(words, offsets, payload, lengths)
        if bad:  # the two traversals disagree: a bug, never a data condition
            raise AssertionError(f"BPC encoder and size path disagree on {bad} entries")
        return lengths, payload

    def decode_entries(self, lengths: np.ndarray, payload: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`encode_entries`: the ``(E, 128)`` uint8 entries.

        Raises ``ValueError`` naming the first bad entry for a truncated or corrupted input.
        """
        lengths, offsets, payload = bpc_stream.check_codes(lengths, payload, self._p.min_bits,
                                                              self._p.max_bits, self.name)
        out = np.empty((lengths.size, ENTRY_BYTES), dtype=np.uint8)
        errors = np.zeros(lengths.size, dtype=np.uint8)
        (_, _, decode_kernel), turn = self._kernels(lengths.size)
        with turn:
            decode_kernel(readonly(payload), offsets, lengths, self._words(out), errors)
        bpc_stream.raise_entry_error(errors, DECODE_ERRORS)
        return out

    def encode(self, data: object) -> bytes:
        """Whole buffer -> self-describing BPC stream (header, lengths, codes)."""
        flat = as_entries(data)
        nbytes = bpc_stream.data_nbytes(data, flat)
        lengths, payload = self.encode_entries(flat)
        return bpc_stream.pack(self.width, flat.reshape(-1)[:nbytes], lengths, payload)

    def decode(self, stream: object) -> bytes:
        """Inverse of :meth:`encode`; ``ValueError`` for any damaged or foreign stream."""
        parts = bpc_stream.unpack(stream, self.width)
        return bpc_stream.check_data(self.decode_entries(parts.lengths, parts.payload), parts)

    def get_config(self) -> dict[str, Any]:
        return {"id": self.name}
