"""What every per-entry code with an encoder and a decoder shares (BPC, EBO): picking the kernels, the
entries' codes as ``(lengths, payload)``, the self-describing stream, and checking what is read.

A subclass names its kernels and its containers' constants; the rest is here once:

* ``_kernels(n_entries)``: the ``(bits, encode, decode)`` kernels for an input of that size, and the lock
  they need (a parallel launch takes turns, ``abc.PARALLEL_LAUNCH``; serial kernels need none);
* ``_words(entries)``: the view of ``(E, 128)`` uint8 entries the kernels take, and ``_args``: the
  arguments after the arrays (a format's field widths);
* ``magic``, ``stream_id``, ``min_bits``, ``max_bits``, ``decode_errors``: the stream's and the decoder's
  constants (:mod:`~buddylib.compressors.bpc_stream`).

The kernels' signatures: ``bits(words, *args)``, ``encode(words, offsets, payload, lengths, *args)``
returning the count of entries whose code length differs from ``bits`` (a bug, never data), and
``decode(payload, offsets, lengths, out_words, errors, *args)`` setting ``errors[e]`` to a key of
``decode_errors``.
"""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar

import numpy as np

from buddylib.compressors import bpc_stream
from buddylib.compressors.abc import PARALLEL_LAUNCH, Compressor, parallel_for, readonly
from buddylib.entries import ENTRY_BYTES, as_entries


class Coded(Compressor):
    """Base of a per-entry code with an encoder and a decoder (module docstring)."""

    parallel: bool
    magic: ClassVar[bytes]
    decode_errors: ClassVar[dict[int, str]]
    min_bits: int
    _args: tuple = ()

    def _kernel_table(self) -> dict[bool, tuple[Any, Any, Any]]:
        """``{parallel: (bits, encode, decode)}``."""
        raise NotImplementedError

    def _words(self, entries: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @property
    def stream_id(self) -> int:
        """The stream header's byte that says which variant of the code wrote it."""
        raise NotImplementedError

    def _kernels(self, n_entries: int) -> tuple[tuple[Any, Any, Any], contextlib.AbstractContextManager]:
        """The (bits, encode, decode) kernels for an input of ``n_entries``, and the lock they need:
        one parallel launch at a time (``abc.PARALLEL_LAUNCH``); serial kernels need no turn."""
        if self.parallel and parallel_for(n_entries):
            return self._kernel_table()[True], PARALLEL_LAUNCH
        return self._kernel_table()[False], contextlib.nullcontext()

    def _bits(self, entries: np.ndarray) -> np.ndarray:
        (bits, _, _), turn = self._kernels(entries.shape[0])
        with turn:
            return bits(readonly(self._words(entries)), *self._args)

    def encode_entries(self, data: object) -> tuple[np.ndarray, np.ndarray]:
        """Encode every entry: ``(lengths, payload)``.

        Parameters
        ----------
        data : array, bytes or buffer
            Any buffer, cut into 128-byte entries (the last one zero-padded).

        Returns
        -------
        lengths : numpy.ndarray
            ``uint16[E]``: each entry's code length in bits, equal to ``bits``.
        payload : numpy.ndarray
            ``uint8``: the codes MSB first, entry e starting at byte ``sum(ceil(lengths[:e] / 8))``
            (:func:`~buddylib.compressors.bpc_stream.code_offsets`), unused bits of an entry's last byte zero.

        Raises
        ------
        TypeError
            ``data`` cannot be read as raw memory.
        """
        entries = as_entries(data)
        words = readonly(self._words(entries))
        (bits, encode, _), turn = self._kernels(entries.shape[0])
        with turn:
            lengths = bits(words, *self._args)
            offsets = bpc_stream.code_offsets(lengths)
            payload = np.zeros(int(offsets[-1]), dtype=np.uint8)
            bad = encode(words, offsets, payload, lengths, *self._args)
        if bad:  # the two traversals disagree: a bug, never a data condition
            raise AssertionError(f"{self.name} encoder and size path disagree on {bad} entries")
        return lengths, payload

    def decode_entries(self, lengths: np.ndarray, payload: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`encode_entries`: the entries from their codes.

        Parameters
        ----------
        lengths : numpy.ndarray
            1-D integer array: each entry's code length in bits.
        payload : numpy.ndarray
            1-D uint8 array: the codes, packed as :meth:`encode_entries` packs them.

        Returns
        -------
        numpy.ndarray
            ``uint8[E, 128]``: the decoded entries.

        Raises
        ------
        ValueError
            A truncated or corrupted input, naming the first bad entry: a length outside the code's range, a
            payload shorter or longer than the lengths say, or a code the encoder would not write; also arrays
            of the wrong kind.
        """
        lengths, offsets, payload = bpc_stream.check_codes(lengths, payload, self.min_bits, self.max_bits,
                                                              self.name)
        out = np.empty((lengths.size, ENTRY_BYTES), dtype=np.uint8)
        errors = np.zeros(lengths.size, dtype=np.uint8)
        (_, _, decode), turn = self._kernels(lengths.size)
        with turn:
            decode(readonly(payload), offsets, lengths, self._words(out), errors, *self._args)
        bpc_stream.raise_entry_error(errors, self.decode_errors)
        return out

    def encode(self, data: object) -> bytes:
        """Whole buffer -> self-describing stream (header, lengths, codes).

        Parameters
        ----------
        data : array, bytes or buffer
            Any buffer; its size in bytes is recorded, so :meth:`decode` drops the zero padding.

        Returns
        -------
        bytes
            The stream (:mod:`~buddylib.compressors.bpc_stream`): header with a CRC-32 of the data, lengths, codes.

        Raises
        ------
        TypeError
            ``data`` cannot be read as raw memory.
        """
        flat = as_entries(data)
        nbytes = bpc_stream.data_nbytes(data, flat)
        lengths, payload = self.encode_entries(flat)
        return bpc_stream.pack(self.stream_id, flat.reshape(-1)[:nbytes], lengths, payload, self.magic)

    def decode(self, stream: object) -> bytes:
        """Inverse of :meth:`encode`.

        Parameters
        ----------
        stream : bytes or buffer
            A stream written by :meth:`encode` of this code (the same width or format).

        Returns
        -------
        bytes
            The encoded buffer's bytes.

        Raises
        ------
        ValueError
            Any damaged or foreign stream: another code's, a bad header, truncated, corrupted codes, or a
            checksum mismatch.
        """
        parts = bpc_stream.unpack(stream, self.stream_id, self.magic, self.name)
        return bpc_stream.check_data(self.decode_entries(parts.lengths, parts.payload), parts)

    def get_config(self) -> dict[str, Any]:
        return {"id": self.name}
