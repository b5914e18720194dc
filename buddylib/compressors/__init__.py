"""Per-entry compressors for 128-byte GPU memory entries (SPEC §2).

Every compressor turns each entry of a buffer into a code length in bits; ``sectors``
turns that into the 32-byte sectors the Buddy layout stores. The contract is in
:mod:`buddylib.compressors.abc`; compressors are named by string:

>>> import numpy as np, buddylib
>>> x = np.arange(32, dtype=np.uint32)          # one entry: the words 0, 1, ..., 31
>>> buddylib.compressors.bits(x, "bpc32")
array([15], dtype=uint16)
>>> buddylib.compressors.sectors(np.zeros(64, np.float32), "bdi")
array([0, 0], dtype=uint8)

Available: ``bpc32``, ``bpc64`` (Bit-Plane Compression, with a real encoder/decoder),
``bdi`` (Base-Delta-Immediate), ``fpc`` (Frequent Pattern Compression), ``zvc``
(zero-value compression), ``bpc32zvc`` (per entry the shorter of BPC-32 and ZVC, beyond the
paper), ``ebo-bf16``, ``ebo-fp16`` and ``ebo-e4m3`` (exponent-base-offset code of 16-bit and FP8 floats, beyond
the paper);
and the whole-allocation references ``zstd`` and ``lz4`` in
:mod:`buddylib.compressors.reference`.
"""

from __future__ import annotations

import numpy as np

from buddylib.compressors import codec, registry  # codec: registers the numcodecs codec buddylib.bpc
from buddylib.compressors.abc import Compressor, sectors_from_bits
from buddylib.compressors.bdi import BDI
from buddylib.compressors.bestof import BestOf
from buddylib.compressors.bpc import BPC
from buddylib.compressors.ebo import EBO
from buddylib.compressors.fpc import FPC
from buddylib.compressors.reference import reference_bytes
from buddylib.compressors.registry import get, names
from buddylib.compressors.zvc import ZVC

registry.register("bpc32", BPC, width=32)
registry.register("bpc64", BPC, width=64)
registry.register("bdi", BDI)
registry.register("fpc", FPC)
registry.register("zvc", ZVC)
registry.register("bpc32zvc", BestOf, parts=("bpc32", "zvc"), label="bpc32zvc")
registry.register("ebo-bf16", EBO, fmt="bf16")
registry.register("ebo-fp16", EBO, fmt="fp16")
registry.register("ebo-e4m3", EBO, fmt="e4m3")

# Two sets, side by side so they cannot drift apart: an analysis compares the paper's five unless asked
# for more, while a workload run is recorded once (minutes) and read by every later analysis, so it
# records every registered compressor, those beyond the paper included.
#: What an analysis compares by default (``analyze``, ``buddy analyze``): the paper's five.
DEFAULT_COMPRESSORS = ("bpc32", "bpc64", "bdi", "fpc", "zvc")
#: What a workload run records per entry: every registered compressor of 32- and 64-bit data, beyond-the-paper
#: ones included.
ALL_COMPRESSORS = (*DEFAULT_COMPRESSORS, "bpc32zvc")
#: The codes of 16-bit floats (:mod:`~buddylib.compressors.ebo`): computed where an analysis names them, not yet
#: recorded by every run (the committed fixtures and summaries were made without them; issue 23).
FLOAT16_COMPRESSORS = ("ebo-bf16", "ebo-fp16")
#: ... and of FP8's e4m3 floats (the same code generalised to 8-bit words, 128 values an entry; issue 42).
FLOAT8_COMPRESSORS = ("ebo-e4m3",)


def bits(data: object, compressor: str = "bpc32") -> np.ndarray:
    """Compressed size in bits of every 128-byte entry of ``data``.

    Parameters
    ----------
    data : array, bytes or buffer
        Any buffer: its bytes, in logical C order, are cut into 128-byte entries (the last one zero-padded).
    compressor : str
        A name of :func:`names`.

    Returns
    -------
    numpy.ndarray
        ``uint16[E]``: each entry's code length in bits.

    Raises
    ------
    ValueError
        An unknown compressor.
    """
    return get(compressor).bits(data)


def sectors(data: object, compressor: str = "bpc32", zero_flag: bool = True) -> np.ndarray:
    """32-byte sectors every 128-byte entry of ``data`` occupies: ``ceil(bits / 256)``, at most 4.

    Parameters
    ----------
    data : array, bytes or buffer
        Any buffer, as for :func:`bits`.
    compressor : str
        A name of :func:`names`.
    zero_flag : bool
        Whether an all-zero entry takes 0 sectors (flagged in its metadata) instead of 1.

    Returns
    -------
    numpy.ndarray
        ``uint8[E]``: 0 to 4 sectors per entry.
    """
    return get(compressor).sectors(data, zero_flag=zero_flag)


__all__ = [
    "ALL_COMPRESSORS", "BDI", "BPC", "DEFAULT_COMPRESSORS", "EBO", "FLOAT8_COMPRESSORS", "FLOAT16_COMPRESSORS", "FPC",
    "ZVC", "BestOf",
    "Compressor", "bits", "codec",
    "get", "names", "reference_bytes", "registry", "sectors", "sectors_from_bits",
]
