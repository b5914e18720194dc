"""View any buffer as 128-byte memory entries, the unit Buddy Compression works on.

A GPU compresses each 128-byte entry on its own, so every compressor in this package
takes a ``(E, 128)`` uint8 array. This module is the one place that turns user data
(numpy arrays of any dtype, ``bytes``, ``memoryview``, anything exposing the buffer
protocol) into that shape. An array's bytes are its elements in logical C order and
little-endian, exactly as they would sit in (little-endian) device memory: a big-endian
array is byte-swapped, a Fortran-ordered one reordered. ``bytes`` and byte memoryviews are
taken as they are; a typed ``memoryview`` (``'>i'``, ``'d'``...) follows the array rule.
"""

from __future__ import annotations

import numpy as np

ENTRY_BYTES = 128
SECTOR_BYTES = 32
SECTORS_PER_ENTRY = ENTRY_BYTES // SECTOR_BYTES


def as_entries(data: object, *, name: str = "data") -> np.ndarray:
    """Return ``data``'s bytes as a ``(E, 128)`` uint8 array, zero-padding the tail entry.

    No copy is made when the buffer is C-contiguous and its size is a multiple of 128
    bytes: the result is a view (read-only if the source is). Otherwise the bytes are
    copied once into a zero-padded array.

    Parameters
    ----------
    data : array_like, bytes, memoryview or buffer
        Any numpy array (bytes in logical C order, little-endian) or object exposing the buffer protocol.
    name : str
        Labels the input in error messages.

    Returns
    -------
    numpy.ndarray
        ``uint8``, shape ``(ceil(nbytes / 128), 128)``.

    Raises
    ------
    TypeError
        ``data`` cannot be read as a buffer, or holds Python objects or text.

    Examples
    --------
    >>> as_entries(np.arange(64, dtype=np.uint32)).shape
    (2, 128)
    """
    if isinstance(data, np.ndarray) and data.ndim == 2 and data.shape[1] == ENTRY_BYTES \
            and data.dtype == np.uint8 and data.flags.c_contiguous:
        return data
    flat = _as_byte_array(data, name)
    n = flat.size
    if n % ENTRY_BYTES == 0:
        return flat.reshape(-1, ENTRY_BYTES)
    out = np.zeros((n + ENTRY_BYTES - 1) // ENTRY_BYTES * ENTRY_BYTES, dtype=np.uint8)
    out[:n] = flat
    return out.reshape(-1, ENTRY_BYTES)


def _as_byte_array(data: object, name: str) -> np.ndarray:
    """Flat uint8 view of ``data``'s memory, copying only if it is not contiguous."""
    if isinstance(data, memoryview) and data.format not in ("B", "b", "c"):
        data = np.asarray(data)  # typed memory (e.g. '>i'): by the array rule below, byte order and order included
    if isinstance(data, (bytes, bytearray, memoryview)):
        mv = memoryview(data)
        if not mv.contiguous:
            return np.frombuffer(mv.tobytes(), dtype=np.uint8)
        return np.frombuffer(mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv,
                             dtype=np.uint8)
    try:
        arr = np.asarray(data)
    except Exception as exc:
        raise TypeError(f"{name}: cannot read as a buffer ({type(data).__name__}): {exc}") from exc
    if arr.dtype.hasobject:
        raise TypeError(f"{name}: dtype {arr.dtype} holds Python objects, not raw memory")
    if arr.dtype.kind == "U":
        raise TypeError(f"{name}: dtype {arr.dtype} is a text array, not raw memory")
    little = arr.dtype.newbyteorder("<")
    arr = np.ascontiguousarray(arr.astype(little) if little != arr.dtype else arr)
    return arr.reshape(-1).view(np.uint8)


def n_entries(nbytes: int) -> int:
    """Number of 128-byte entries that hold ``nbytes`` bytes.

    Parameters
    ----------
    nbytes : int
        A size in bytes.

    Returns
    -------
    int
        ``ceil(nbytes / 128)``.
    """
    return -(-int(nbytes) // ENTRY_BYTES)
