"""Whole-allocation references: zstd and lz4 over an entire buffer.

Not per-entry, so no GPU could use them for random access; they are the honest upper
reference for how much redundancy a buffer holds, measured with the maintained codecs.
"""

from __future__ import annotations

import lz4.frame
import zstandard

from buddylib.entries import _as_byte_array

REFERENCES = ("zstd", "lz4")


def reference_bytes(data: object, method: str = "zstd", level: int = 1) -> int:
    """Compressed size in bytes of the whole buffer ``data`` with ``method`` at ``level``.

    Parameters
    ----------
    data : array, bytes or buffer
        Any buffer: its bytes in logical C order.
    method : {"zstd", "lz4"}
        The codec (``REFERENCES``).
    level : int
        zstd's level (1 = fastest) or lz4 frame's compression level (0 = fast; 1 is taken as 0).

    Returns
    -------
    int
        Bytes of the ``reference_compress`` frame, header included.

    Raises
    ------
    ValueError
        An unknown method.
    TypeError
        ``data`` cannot be read as raw memory.

    Examples
    --------
    >>> import numpy as np
    >>> reference_bytes(np.zeros(4096, np.uint8))
    19
    """
    return len(reference_compress(data, method, level))


def reference_compress(data: object, method: str = "zstd", level: int = 1) -> bytes:
    """Compress the whole buffer with zstd or lz4 (frame format, content size recorded).

    Parameters
    ----------
    data, method, level
        As for :func:`reference_bytes`.

    Returns
    -------
    bytes
        The compressed frame.

    Raises
    ------
    ValueError
        An unknown method.
    TypeError
        ``data`` cannot be read as raw memory.
    """
    buf = _as_byte_array(data, "data")
    if method == "zstd":
        return zstandard.ZstdCompressor(level=level).compress(buf)
    if method == "lz4":
        return lz4.frame.compress(buf, compression_level=level if level > 1 else 0)
    raise ValueError(f"unknown reference compressor {method!r}; available: {', '.join(REFERENCES)}")


def reference_ratio(data: object, method: str = "zstd", level: int = 1) -> float:
    """Uncompressed bytes over compressed bytes for the whole buffer.

    Parameters
    ----------
    data, method, level
        As for :func:`reference_bytes`.

    Returns
    -------
    float
        The ratio; NaN for an empty buffer.

    Raises
    ------
    ValueError
        An unknown method.
    TypeError
        ``data`` cannot be read as raw memory.
    """
    n = _as_byte_array(data, "data").size
    return n / reference_bytes(data, method, level) if n else float("nan")


__all__ = ["REFERENCES", "reference_bytes", "reference_compress", "reference_ratio"]
