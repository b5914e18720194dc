"""The containers of BPC's codes, apart from the code itself: their layout and their validation. Every
per-entry code with a decoder keeps its codes in them (:class:`~buddylib.compressors.coded.Coded`; EBO's
stream under its own magic, ``EBO1``, its format in the width byte).

Two containers hold the codes:

* the entries' codes, ``(lengths, payload)``: a uint16 length in bits per entry, and the codes
  packed one after another on byte boundaries (:func:`code_offsets`), as
  ``BPC.encode_entries`` returns them;
* the stream, a self-describing byte string for a whole buffer (``BPC.encode``): a header
  (:data:`HEADER`: magic, width, the buffer's size, the number of entries, CRC-32 of the
  data), the lengths little-endian, then the payload.

Everything read from outside is checked here before a kernel touches it, so that a damaged or
foreign input raises ``ValueError`` saying what is wrong instead of reading out of bounds; the
decoder kernel checks the codes themselves.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

import numpy as np

from buddylib.entries import n_entries

#: The stream's header: magic, width, 3 zero bytes, the input's bytes, its entries, CRC-32 of the payload.
HEADER = struct.Struct("<4sB3sQQI")  # magic, width, 3 zero bytes, nbytes, entries, crc32
MAGIC = b"BPC1"


class Stream(NamedTuple):
    """A stream's parts, as :func:`unpack` read them."""

    nbytes: int  # size of the encoded buffer
    crc: int  # CRC-32 of its bytes
    lengths: np.ndarray  # uint16 (little-endian) code length in bits per entry
    payload: np.ndarray  # uint8: the entries' codes


def code_offsets(lengths: np.ndarray) -> np.ndarray:
    """Byte offset of each entry's code, plus the total, from code lengths in bits.

    Parameters
    ----------
    lengths : numpy.ndarray
        ``[E]``: each entry's code length in bits; a code takes whole bytes.

    Returns
    -------
    numpy.ndarray
        ``int64[E + 1]``: where each code starts in the payload, then the payload's size.

    Examples
    --------
    >>> import numpy as np
    >>> code_offsets(np.array([15, 23, 8]))
    array([0, 2, 5, 6])
    """
    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum((lengths.astype(np.int64) + 7) >> 3, out=offsets[1:])
    return offsets


def check_codes(lengths: object, payload: object, min_bits: int, max_bits: int,
                name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate a ``(lengths, payload)`` pair for the decoder.

    Parameters
    ----------
    lengths : array_like
        1-D integers: each entry's code length in bits.
    payload : array_like
        1-D uint8: the codes (:func:`code_offsets`).
    min_bits, max_bits : int
        The shortest and longest code the code can emit.
    name : str
        The code's name, for the messages (``"bpc32"``).

    Returns
    -------
    lengths : numpy.ndarray
        The lengths as uint16.
    offsets : numpy.ndarray
        :func:`code_offsets` of them.
    payload : numpy.ndarray
        The payload, as an array.

    Raises
    ------
    ValueError
        Arrays of the wrong kind, or, naming the first bad entry, lengths outside ``[min_bits, max_bits]`` or a
        payload shorter or longer than the lengths say.
    """
    lengths = np.asarray(lengths)
    payload = np.asarray(payload)
    if lengths.ndim != 1 or lengths.dtype.kind not in "ui":
        raise ValueError(f"lengths must be a 1-D integer array, got {lengths.dtype} {lengths.shape}")
    if payload.ndim != 1 or payload.dtype != np.uint8:
        raise ValueError(f"payload must be a 1-D uint8 array, got {payload.dtype} {payload.shape}")
    bad = np.flatnonzero((lengths < min_bits) | (lengths > max_bits))
    if bad.size:
        e = int(bad[0])
        raise ValueError(f"entry {e}: code length {int(lengths[e])} bits is outside "
                         f"[{min_bits}, {max_bits}] for {name} (corrupted)")
    lengths = lengths.astype(np.uint16)
    offsets = code_offsets(lengths)
    if payload.size < offsets[-1]:
        e = int(np.searchsorted(offsets[1:], payload.size, side="right"))
        raise ValueError(f"entry {e}: payload ends at byte {payload.size} but the entry's code "
                         f"needs bytes up to {int(offsets[e + 1])} (truncated)")
    if payload.size > offsets[-1]:
        raise ValueError(f"payload has {payload.size - int(offsets[-1])} bytes after the last "
                         f"entry's code (lengths and payload do not match)")
    return lengths, offsets, payload


def raise_entry_error(errors: np.ndarray, messages: dict[int, str]) -> None:
    """``ValueError`` naming the first entry whose decoder error code (errors[e]) is not 0, if any.

    Parameters
    ----------
    errors : numpy.ndarray
        ``[E]``: the decoder's error code of each entry, 0 where it decoded.
    messages : dict of int to str
        The message of each error code (a code's ``decode_errors``).

    Raises
    ------
    ValueError
        ``"entry e: <message>"`` for the first entry with an error.
    """
    bad = np.flatnonzero(errors)
    if bad.size:
        e = int(bad[0])
        raise ValueError(f"entry {e}: {messages[int(errors[e])]}")


def data_nbytes(data: object, entries: np.ndarray) -> int:
    """Size in bytes of the original buffer, before zero padding to whole entries.

    Parameters
    ----------
    data : array, bytes or buffer
        The buffer as given: an array's own ``nbytes`` is taken (memoryview refuses ml_dtypes' bfloat16 and
        float8), else the buffer's.
    entries : numpy.ndarray
        Its entries (``(E, 128)`` uint8); not read.

    Returns
    -------
    int
        The buffer's size in bytes.
    """
    if isinstance(data, np.ndarray):
        return data.nbytes
    try:
        return memoryview(data).nbytes  # type: ignore[arg-type]
    except TypeError:
        return np.asarray(data).nbytes


def pack(width: int, data: np.ndarray, lengths: np.ndarray, payload: np.ndarray, magic: bytes = MAGIC) -> bytes:
    """The stream of a buffer ``data`` whose entries' codes are ``(lengths, payload)``.

    Parameters
    ----------
    width : int
        The header's width byte: BPC's word width, or another code's format.
    data : numpy.ndarray
        The buffer's bytes, uint8, without the entries' zero padding (their size and CRC-32 go in the header).
    lengths, payload : numpy.ndarray
        The entries' codes (``encode_entries``).
    magic : bytes
        Four bytes naming the code (another per-entry code keeps this container under its own).

    Returns
    -------
    bytes
        :data:`HEADER`, the lengths as little-endian uint16, then the payload.
    """
    header = HEADER.pack(magic, width, bytes(3), data.size, lengths.size, zlib.crc32(data))
    return b"".join((header, lengths.astype("<u2").tobytes(), payload.tobytes()))


def unpack(stream: object, width: int, magic: bytes = MAGIC, name: str | None = None) -> Stream:
    """Split a stream written by bpc``width`` (or by the code ``name`` whose stream has ``magic``) into its
    parts.

    Parameters
    ----------
    stream : bytes or buffer
        The stream.
    width : int
        The width byte the stream must have.
    magic : bytes
        The magic the stream must have.
    name : str, optional
        The code's name, for the messages (default ``bpc<width>``).

    Returns
    -------
    Stream
        Its size, CRC-32, lengths and payload; the codes are not checked here (:func:`check_codes` and the
        decoder do).

    Raises
    ------
    ValueError
        A foreign stream (another magic or width), or a damaged header or length table.
    TypeError
        ``stream`` is not a buffer.
    """
    kind = "BPC" if magic == MAGIC else magic[:3].decode("ascii", "replace")
    name = name or f"bpc{width}"
    buf = np.frombuffer(memoryview(stream).cast("B"), dtype=np.uint8)  # type: ignore[arg-type]
    if buf.size < HEADER.size:
        raise ValueError(f"{kind} stream of {buf.size} bytes is shorter than its {HEADER.size}-byte header")
    found, stream_width, reserved, nbytes, n, crc = HEADER.unpack(buf[: HEADER.size].tobytes())
    if found != magic:
        raise ValueError(f"not {'an' if kind[0] in 'AEIOU' else 'a'} {kind} stream (magic {found!r}, expected "
                         f"{magic!r})")
    if reserved != bytes(3):
        raise ValueError(f"{kind} stream header has nonzero reserved bytes (corrupted header)")
    if stream_width != width:
        writer = f"bpc{stream_width}" if magic == MAGIC else f"format {stream_width}"
        raise ValueError(f"stream was written by {writer}, not {name}")
    if n != n_entries(nbytes):
        raise ValueError(f"header says {n} entries for {nbytes} bytes (corrupted header)")
    end = HEADER.size + 2 * n
    if buf.size < end:
        raise ValueError(f"{kind} stream truncated inside its length table ({buf.size} of {end} bytes)")
    return Stream(nbytes, crc, buf[HEADER.size:end].view("<u2"), buf[end:])


def check_data(entries: np.ndarray, stream: Stream) -> bytes:
    """The decoded buffer: the first ``nbytes`` of the decoded entries, once the zero padding after
    them and the CRC-32 are checked.

    Parameters
    ----------
    entries : numpy.ndarray
        The decoded entries, ``uint8[E, 128]``.
    stream : Stream
        The parts of the stream they were decoded from (:func:`unpack`).

    Returns
    -------
    bytes
        The buffer's ``stream.nbytes`` bytes.

    Raises
    ------
    ValueError
        Nonzero bytes after the data, or a checksum mismatch.
    """
    flat = entries.reshape(-1)
    if flat[stream.nbytes:].any():
        raise ValueError(f"entry {entries.shape[0] - 1}: nonzero bytes past the end of the data (corrupted)")
    data = flat[: stream.nbytes]
    if zlib.crc32(data) != stream.crc:
        raise ValueError("stream checksum mismatch: the decoded data is not what was encoded")
    return data.tobytes()
