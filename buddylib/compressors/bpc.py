"""Bit-Plane Compression (Kim, Sullivan, Choukse, Erez, ISCA 2016), the paper's compressor.

BPC suits GPU data because neighbouring words in an entry are similar (arrays of numbers,
not pointers and text): it deltas the W-bit words, transposes the deltas into bit-planes,
XORs neighbouring planes, and codes the planes with a prefix code in which long runs of
zero planes are nearly free. The canonical code of this suite is SPEC §2.1, for W = 32
("bpc32") and W = 64 ("bpc64"), bit for bit (tests/test_bpc.py's reference).

:class:`~buddylib.compressors.bpc.BPC` offers three paths:

* size (``bits``): the exact code length, what capacity studies need, as fast as possible;
* ``encode_entries`` / ``decode_entries``: the real code, one MSB-first bit string per
  entry, entries packed one after another on byte boundaries, with a uint16 length (bits)
  per entry as metadata;
* ``encode`` / ``decode``: a self-describing byte stream (header, lengths, codes, CRC-32 of
  the data) for whole buffers; :mod:`buddylib.compressors.codec` exposes it as a numcodecs
  and a zarr v3 codec.

The work is split by job: the compiled kernels are :mod:`~buddylib.compressors.bpc_kernels`,
the containers (stream format, offsets, validation of what is read) are
:mod:`~buddylib.compressors.bpc_stream`, and :class:`~buddylib.compressors.coded.Coded` picks a
kernel and joins the two, as for every code with a decoder; this class names BPC's.

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

from typing import Any, ClassVar

import numpy as np

from buddylib.compressors import bpc_stream
from buddylib.compressors.bpc_kernels import DECODE_ERRORS, KERNELS
from buddylib.compressors.coded import Coded


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


class BPC(Coded):
    """Bit-Plane Compression with W-bit words (SPEC §2.1): size path, encoder and decoder.

    Parameters
    ----------
    width : {32, 64}
        The word width W (``bpc32``, ``bpc64``).
    parallel : bool
        ``False`` runs serial kernels that release the GIL on every input (with the default, only inputs
        below :data:`buddylib.compressors.abc.PARALLEL_MIN_ENTRIES` entries do): the same results, safe to call
        from several threads at once (numba's parallel kernels are not, under its ``workqueue`` threading layer).

    Raises
    ------
    ValueError
        A width other than 32 or 64.

    Examples
    --------
    >>> import numpy as np
    >>> bpc = BPC(32)
    >>> x = np.arange(64, dtype=np.uint32)
    >>> bpc.bits(x)
    array([15, 23], dtype=uint16)
    >>> bytes(bpc.decode(bpc.encode(x))) == x.tobytes()
    True
    """

    magic: ClassVar[bytes] = bpc_stream.MAGIC
    decode_errors: ClassVar[dict[int, str]] = DECODE_ERRORS

    def __init__(self, width: int = 32, *, parallel: bool = True):
        self._p = _Params(width)
        self.width = width
        self.parallel = bool(parallel)
        self.name = f"bpc{width}"  # type: ignore[misc]
        self.max_bits = self._p.max_bits  # type: ignore[misc]
        self.min_bits = self._p.min_bits

    def __repr__(self) -> str:
        return f"BPC(width={self.width})" if self.parallel else f"BPC(width={self.width}, parallel=False)"

    def _kernel_table(self) -> dict[bool, tuple[Any, Any, Any]]:
        return {p: KERNELS[p, self.width] for p in (True, False)}

    def _words(self, entries: np.ndarray) -> np.ndarray:
        return entries.view(np.uint32 if self.width == 32 else np.uint64)

    @property
    def stream_id(self) -> int:
        return self.width
