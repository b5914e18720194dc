"""The peers on the same bytes: whole-tensor lossless compressors of 16-bit floats from the LLM literature.

Why: Buddy's per-entry code of 16-bit floats (:mod:`~buddylib.compressors.ebo`) is bounded by the 32-byte
sector; the papers on lossless LLM weights quote whole-tensor ratios. To say how far a per-entry code is from
them, this module gives their sizes on the same bytes (issue 23), beside zstd
(:mod:`~buddylib.compressors.reference`). Like zstd they are not per-entry, so no GPU could use them for
Buddy's random access; they are references, not compressors of the registry.

* **DFloat11** (Zhang et al. 2025, "70% size, 100% accuracy", package ``dfloat11`` 0.5.0):
  :func:`dfloat11_bytes` is a *size model* of its scheme, computed with numpy, that reproduces the bytes its
  compressor stores for one bf16 tensor; its decoder is a CUDA kernel, so nothing here decodes.
* **ZipNN** (Hershcovitch et al. 2024, package ``zipnn`` 0.5.4, a C extension): :func:`zipnn_bytes`,
  :func:`zipnn_compress`, :func:`zipnn_decompress` run the package itself, imported only when called.
* The **exponent-entropy bound** many papers quote (:func:`exponent_entropy_bytes`): the exponent field
  at its empirical entropy and the other bits raw, the ceiling of any code that keeps sign and mantissa.

A tensor is given as its 16-bit patterns (numpy ``uint16``/``int16``), as numpy ``float16``, ml_dtypes
``bfloat16`` or a torch ``bfloat16``/``float16`` tensor; ``fmt`` (``"bf16"`` or ``"fp16"``) says how to
read bit patterns and is inferred from a float dtype. FP8 (issue 42): ml_dtypes or torch ``float8_e4m3fn``,
or its 8-bit patterns (``uint8``/``int8``) with ``fmt="e4m3"``; ZipNN and the entropy bound take it,
DFloat11 (a code of bf16) does not.

>>> import numpy as np
>>> from buddylib.compressors import peers
>>> ones = np.full(100, 0x3F80, np.uint16)          # 100 values of 1.0 in bf16: one exponent, 1-bit codes
>>> peers.dfloat11_size(ones)                       # 13 + 100 bytes of streams, and what the GPU decoder needs
DFloat11Size(encoded_exponent=13, sign_mantissa=100, luts=512, output_positions=8, gaps=320)
>>> peers.exponent_entropy_bytes(ones)              # exponent entropy 0: only the 8 raw bits of each value
100.0
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from buddylib.compressors.ebo import FORMATS
from buddylib.compressors.reference import reference_bytes

#: The peers :func:`peer_bytes` knows.
PEERS = ("dfloat11", "zipnn", "exponent-entropy")
#: The ZipNN release whose API and sizes this module was checked against.
ZIPNN_VERSION = "0.5.4"
_ZIPNN_HINT = f"pip install zipnn=={ZIPNN_VERSION}"

# DFloat11 0.5.0's constants (dfloat11/dfloat11.py: ``bytes_per_thread``, ``threads_per_block``), the limit of
# its code lengths (dfloat11_utils.get_32bit_codec) and the width of a gap (dfloat11_utils.encode: '05b').
DF11_BYTES_PER_THREAD = 8
DF11_THREADS_PER_BLOCK = 512
DF11_MAX_CODE_BITS = 32
DF11_GAP_BITS = 5
_DF11_EOF = -1  # dahuffman's end-of-file symbol: frequency 1, ordered before every exponent on a tie


#: Bytes of a value of each format.
WORD_BYTES = {"bf16": 2, "fp16": 2, "e4m3": 1}


def _bits16(a: object, fmt: str | None, name: str = "a") -> tuple[np.ndarray, str]:
    """Flat bit patterns of ``a`` (uint16; uint8 for FP8) and its format, checking dtype, format and emptiness."""
    inferred: str | None = None
    if type(a).__module__.split(".")[0] == "torch":
        import torch  # only for a tensor given as one: torch is never imported otherwise

        tensor: Any = a
        kinds = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.int16: None, torch.uint16: None,
                 torch.float8_e4m3fn: "e4m3", torch.uint8: None, torch.int8: None}
        if tensor.dtype not in kinds:
            raise ValueError(f"{name}: torch dtype {tensor.dtype} is not a 16-bit or FP8 float or its bits "
                             "(bfloat16, float16, float8_e4m3fn, int16, uint16, int8, uint8)")
        inferred = kinds[tensor.dtype]
        small = tensor.dtype.itemsize == 1
        arr = tensor.detach().cpu().contiguous().view(torch.uint8 if small else torch.int16).numpy()
        arr = arr.view(np.uint8 if small else np.uint16)
    else:
        arr = np.asarray(a)
        dt = arr.dtype
        if not ((dt.itemsize == 2 and (dt.kind in "ui" or dt.name in ("float16", "bfloat16")))
                or (dt.itemsize == 1 and (dt.kind in "ui" or dt.name == "float8_e4m3fn"))):
            raise ValueError(f"{name}: dtype {dt} is not a 16-bit or FP8 float; pass float16, bfloat16, "
                             "float8_e4m3fn or their bit patterns as uint16 (uint8 for FP8)")
        inferred = {"float16": "fp16", "bfloat16": "bf16", "float8_e4m3fn": "e4m3"}.get(dt.name)
        if not dt.isnative:
            arr = arr.astype(dt.newbyteorder("="))
        arr = np.ascontiguousarray(arr).reshape(-1).view(np.uint16 if dt.itemsize == 2 else np.uint8)
    if fmt is None:
        fmt = inferred or ("bf16" if arr.itemsize == 2 else "e4m3")
    elif fmt not in FORMATS:
        raise ValueError(f"fmt: unknown float format {fmt!r}; available: {', '.join(FORMATS)}")
    elif inferred is not None and fmt != inferred:
        raise ValueError(f"fmt: {fmt!r} given for {name} of format {inferred!r}")
    if WORD_BYTES[fmt] != arr.itemsize:
        raise ValueError(f"fmt: {fmt!r} values are {WORD_BYTES[fmt]} bytes, {name} holds {arr.itemsize}-byte words")
    if arr.size == 0:
        raise ValueError(f"{name}: empty tensor; a whole-tensor code needs at least one value")
    return arr.reshape(-1), fmt


def exponent_counts(a: object, fmt: str | None = None) -> np.ndarray:
    """How many values of ``a`` have each exponent field.

    Parameters
    ----------
    a : array or torch.Tensor
        The tensor: 16-bit or FP8 floats, or their bit patterns (module docstring).
    fmt : {"bf16", "fp16", "e4m3"}, optional
        How to read bit patterns; inferred from a float dtype (bit patterns: bf16, or e4m3 for 8-bit words).

    Returns
    -------
    numpy.ndarray
        ``int64[2**E]``: 256 entries for bf16, 32 for fp16, 16 for e4m3.

    Raises
    ------
    ValueError
        A dtype that is not a 16-bit or FP8 float or its bits, an unknown ``fmt`` or one that contradicts the
        dtype or the word size, or an empty tensor.
    """
    return _counts(*_bits16(a, fmt))


def _counts(w: np.ndarray, fmt: str) -> np.ndarray:
    e_bits, m_bits = FORMATS[fmt]
    return np.bincount((w >> m_bits) & ((1 << e_bits) - 1), minlength=1 << e_bits).astype(np.int64)


def exponent_entropy_bytes(a: object, fmt: str | None = None) -> float:
    """The Shannon bound in bytes of a code that keeps sign and mantissa raw: ``N * (H + 1 + M) / 8``.

    ``H`` is the empirical entropy of the exponent field (order 0, code book not counted) and ``1 + M`` the raw
    sign and mantissa bits (8 for bf16, 11 for fp16, 4 for e4m3). No such code beats it by coding exponents one at a
    time; DFloat11 and ZipNN's exponent stream sit just above it.

    Parameters
    ----------
    a, fmt
        The tensor and its format, as for :func:`exponent_counts`.

    Returns
    -------
    float
        The bound in bytes: a bound, not a stored size.

    Raises
    ------
    ValueError
        As :func:`exponent_counts`.

    Examples
    --------
    >>> import numpy as np
    >>> exponent_entropy_bytes(np.array([1.0, 2.0, 4.0, 0.5] * 25, np.float16))   # 2 bits + 11 a value
    162.5
    """
    w, fmt = _bits16(a, fmt)
    counts = _counts(w, fmt)
    n = w.size
    p = counts[counts > 0] / n
    entropy = float(-(p * np.log2(p)).sum()) + 0.0  # + 0.0: -0.0 when one exponent holds every value
    return n * (entropy + 1 + FORMATS[fmt][1]) / 8


def _dahuffman_code(counts: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    """``{symbol: (length, value)}`` exactly as ``dahuffman.HuffmanCodec.from_frequencies`` (0.4.2) builds it.

    The symbols with their counts and an end-of-file symbol of count 1 go on a heap of ``(count, members)``;
    equal counts are ordered by their first member's symbol, the end of file first. The two smallest merge,
    the first popped taking bit 0 and the second bit 1 in front of their members' codes. Ties decide which
    of several optimal codes comes out, and with it the lookup tables DFloat11 stores, so they are kept.
    """
    members: list[list[int]] = []
    heap: list[tuple[int, int, int]] = []
    for s, f in [*counts.items(), (_DF11_EOF, 1)]:
        heap.append((int(f), s, len(members)))
        members.append([s])
    heapq.heapify(heap)
    length = dict.fromkeys([s for group in members for s in group], 0)
    value = dict.fromkeys(length, 0)
    while len(heap) > 1:
        fa, sa, ia = heapq.heappop(heap)
        fb, _, ib = heapq.heappop(heap)
        for s in members[ia]:
            length[s] += 1
        for s in members[ib]:
            value[s] += 1 << length[s]
            length[s] += 1
        members[ia] += members[ib]
        heapq.heappush(heap, (fa + fb, sa, ia))
    return {s: (length[s], value[s]) for s in length}


def dfloat11_code(counts: np.ndarray) -> dict[int, tuple[int, int]]:
    """DFloat11's Huffman code of the exponents with these counts, after its limit of
    ``DF11_MAX_CODE_BITS`` (32) bits.

    The limit is the package's own heuristic (``dfloat11_utils.get_32bit_codec``), not a length-limited
    Huffman code: while the longest code exceeds 32 bits, the ``k`` rarest exponents (``k = 2, 3, ...``,
    picked by ``np.argpartition`` as it does) are given count 1 and the code is rebuilt.

    Parameters
    ----------
    counts : numpy.ndarray
        Values per exponent field (:func:`exponent_counts`); exponents of count 0 get no code.

    Returns
    -------
    dict of int to (int, int)
        ``{exponent: (length, value)}``: each code's length in bits and its bits; the end of file as ``-1``.

    Examples
    --------
    >>> import numpy as np
    >>> dfloat11_code(exponent_counts(np.full(100, 0x3F80, np.uint16)))   # one exponent and the end of file
    {127: (1, 1), -1: (1, 0)}
    """
    symbols = np.flatnonzero(counts)
    freq = counts[symbols]
    table = _dahuffman_code(dict(zip(symbols.tolist(), freq.tolist(), strict=True)))
    k = 2
    while max(length for length, _ in table.values()) > DF11_MAX_CODE_BITS:
        rare = symbols[np.argpartition(freq, k)[:k]]
        k += 1
        limited = freq.copy()
        limited[np.isin(symbols, rare)] = 1
        table = _dahuffman_code(dict(zip(symbols.tolist(), limited.tolist(), strict=True)))
    return table


class DFloat11Size(NamedTuple):
    """The bytes DFloat11 stores for one tensor, buffer by buffer (the names its modules register)."""

    encoded_exponent: int  # the Huffman-coded exponents, one bit stream, MSB first
    sign_mantissa: int  # one raw byte a value: sign and the 7 mantissa bits
    luts: int  # the decoder's 256-entry lookup tables and the code-length row, uint8
    output_positions: int  # uint32: the first value of each thread block, and the count
    gaps: int  # 5 bits a thread: where its first code starts in its 8 bytes

    @property
    def total(self) -> int:
        """The whole tensor's size, in bytes."""
        return sum(self)


def dfloat11_size(a: object) -> DFloat11Size:
    """The bytes DFloat11 0.5.0 stores for the bf16 tensor ``a``, computed from its exponent counts.

    A size model of the scheme in the package's compressor (``dfloat11_utils.get_codec``, ``get_32bit_codec``,
    ``get_luts``, ``encode``/``encode_weights``; constants in ``dfloat11.py``), not the package, which needs a
    CUDA GPU and cupy to import; its ``encode`` checked on CPU gives the same bytes, buffer by buffer. A value's
    8-bit exponent (``w >> 7 & 0xFF``) is Huffman coded with the code of :func:`dfloat11_code`; sign and
    mantissa are kept as one raw byte. Besides those two streams it stores, per tensor:

    * ``luts``: uint8 ``[P + 2, 256]``: the first-byte table, one table for each distinct prefix of whole bytes
      of the codes longer than 8 bits (``P`` of them: the first ``8 * ((length - 1) // 8)`` bits), and a row of
      code lengths;
    * ``output_positions``: uint32, the index of the first value starting in each thread block (512 threads of
      8 bytes: 32768 bits of stream), one more where the end-of-file pad starts a block, and the value count;
    * ``gaps``: 5 bits for each thread of every launched block (the bit where the thread's first code starts),
      ``ceil(stream bytes / 4096)`` blocks, so 320 bytes a block.

    The stream ends with the first bits of the end-of-file code up to a byte boundary: ``ceil(bits / 8)``
    bytes. Not counted: the safetensors header and, for several weights coded together with one code (the
    ``pattern_dict`` of a fused module), their 8-byte ``split_positions``; ``compress_model`` codes one weight
    of an ``nn.Linear`` or ``nn.Embedding`` alone, as here. The percentage ``encode_weights`` prints leaves the
    tables out; this total has them (1 KiB for MiniLM's weights in bf16, so a tensor of a few hundred values
    pays far more than 11 bits a value). The gaps cost 5 bits every 64 bits of stream, 7.8% of it.
    Where the package's ``get_luts`` fails (``UnboundLocalError`` when no exponent's code starts the first
    table, as with a single exponent), the tables it would build are counted.

    Parameters
    ----------
    a : array or torch.Tensor
        A bf16 tensor, or its bit patterns (read as bf16).

    Returns
    -------
    DFloat11Size
        The bytes of each buffer; ``.total`` their sum.

    Raises
    ------
    ValueError
        ``a`` is not bf16 (its compressor asserts ``torch.bfloat16``), or as :func:`exponent_counts`.
    """
    w, fmt = _bits16(a, None)
    if fmt != "bf16":
        raise ValueError(f"a: DFloat11 codes bf16 tensors only; got {fmt} (its compressor asserts torch.bfloat16)")
    e = (w >> 7) & 0xFF
    counts = _counts(w, fmt)
    table = dfloat11_code(counts)
    lengths = np.zeros(256, dtype=np.int64)
    for s, (length, _) in table.items():
        if s != _DF11_EOF:
            lengths[s] = length
    bits = int(counts @ lengths)
    stream = -(-bits // 8)
    block_bytes = DF11_THREADS_PER_BLOCK * DF11_BYTES_PER_THREAD
    block_bits = 8 * block_bytes
    blocks = -(-stream // block_bytes)
    # encode(): a position as each block's first code starts (codes are shorter than a block, so every block
    # up to the last code's has one), one where the end-of-file pad starts a new block, and the count.
    positions = (bits - int(lengths[e[-1]])) // block_bits + 1
    if bits % 8 and bits // block_bits + 1 > positions:
        positions += 1
    prefixes = {(8 * ((n - 1) // 8), v >> (n - 8 * ((n - 1) // 8)))
                for s, (n, v) in table.items() if s != _DF11_EOF and n > 8}
    return DFloat11Size(encoded_exponent=stream, sign_mantissa=w.size, luts=(len(prefixes) + 2) * 256,
                        output_positions=4 * (positions + 1),
                        gaps=-(-DF11_GAP_BITS * DF11_THREADS_PER_BLOCK * blocks // 8))


def dfloat11_bytes(a: object) -> int:
    """Compressed size in bytes of the bf16 tensor ``a`` under DFloat11 0.5.0 (see :func:`dfloat11_size`).

    Parameters
    ----------
    a : array or torch.Tensor
        A bf16 tensor, or its bit patterns (read as bf16).

    Returns
    -------
    int
        ``dfloat11_size(a).total``: both streams and the decoder's tables.

    Raises
    ------
    ValueError
        As :func:`dfloat11_size`.
    """
    return dfloat11_size(a).total


def _zipnn(fmt: str, threads: int) -> Any:
    """A ZipNN 0.5.4 codec of raw bytes of ``fmt`` on ``threads`` threads; zipnn imported here, not above."""
    try:
        import zipnn
    except ImportError as exc:
        raise ImportError(f"ZipNN's sizes need the zipnn package (a C extension, built with a C compiler): "
                          f"{_ZIPNN_HINT}") from exc
    if threads < 1:
        raise ValueError(f"threads: at least 1, got {threads}")
    return zipnn.ZipNN(method="HUFFMAN", input_format="byte",
                       bytearray_dtype={"bf16": "bfloat16", "fp16": "float16", "e4m3": "float8_e4m3fn"}[fmt],
                       threads=threads)


def zipnn_compress(a: object, fmt: str | None = None, threads: int = 1) -> bytes:
    """ZipNN's compressed stream of the 16-bit floats ``a``: its header and per 256 KiB chunk the exponent
    bytes and the sign-mantissa bytes, each Huffman coded (FSE's ``HUF_compress``) or kept raw when that saves
    under 5%.

    For bf16 ZipNN first moves the sign bit below the exponent so the exponent fills one byte; fp16 is split
    into its two bytes as they are. zipnn 0.5.4 does that reordering in place, even in a ``bytes`` object, so
    it is given a private copy here.

    Parameters
    ----------
    a, fmt
        The tensor and its format, as for :func:`exponent_counts` (FP8 included).
    threads : int
        ZipNN's threads; one by default: sizes do not depend on it, speeds per core do.

    Returns
    -------
    bytes
        The stream, for :func:`zipnn_decompress`.

    Raises
    ------
    ImportError
        zipnn is not installed (:func:`zipnn_available`).
    ValueError
        ``threads`` below 1, or as :func:`exponent_counts`.
    """
    w, fmt = _bits16(a, fmt)
    return bytes(_zipnn(fmt, threads).compress(bytearray(memoryview(w))))


def zipnn_decompress(blob: bytes, fmt: str = "bf16", threads: int = 1) -> np.ndarray:
    """The bit patterns of a :func:`zipnn_compress` stream of format ``fmt``.

    Parameters
    ----------
    blob : bytes
        The stream; not modified (ZipNN is given a copy).
    fmt : {"bf16", "fp16", "e4m3"}
        The format it was compressed as.
    threads : int
        ZipNN's threads.

    Returns
    -------
    numpy.ndarray
        The values' bit patterns, flat and writable: uint16, or uint8 for e4m3.

    Raises
    ------
    ImportError
        zipnn is not installed.
    ValueError
        An unknown ``fmt``, or ``threads`` below 1.
    """
    if fmt not in FORMATS:
        raise ValueError(f"fmt: unknown float format {fmt!r}; available: {', '.join(FORMATS)}")
    out = _zipnn(fmt, threads).decompress(bytearray(blob))  # a copy: the stream is not the caller's to change
    return np.frombuffer(out, dtype=np.uint16 if WORD_BYTES[fmt] == 2 else np.uint8)  # a new bytearray: writable


def zipnn_bytes(a: object, fmt: str | None = None, threads: int = 1) -> int:
    """Compressed size in bytes of ``a`` under ZipNN 0.5.4 (:func:`zipnn_compress`), header included.

    Parameters
    ----------
    a, fmt, threads
        As for :func:`zipnn_compress`.

    Returns
    -------
    int
        Bytes of the stream.

    Raises
    ------
    ImportError, ValueError
        As :func:`zipnn_compress`.
    """
    return len(zipnn_compress(a, fmt, threads))


def zipnn_available() -> bool:
    """Whether the zipnn package imports (it needs torch)."""
    try:
        import zipnn  # noqa: F401
    except ImportError:
        return False
    return True


def peer_bytes(a: object, peer: str, fmt: str | None = None) -> float:
    """Size in bytes of ``a`` under one of :data:`PEERS`.

    Parameters
    ----------
    a, fmt
        The tensor and its format, as for :func:`exponent_counts`.
    peer : {"dfloat11", "zipnn", "exponent-entropy"}
        :func:`dfloat11_bytes`, :func:`zipnn_bytes` (one thread) or :func:`exponent_entropy_bytes`.

    Returns
    -------
    int or float
        The size; a float only for the entropy bound.

    Raises
    ------
    ValueError
        An unknown peer, DFloat11 of a tensor that is not bf16, or as :func:`exponent_counts`.
    ImportError
        ZipNN without zipnn installed.
    """
    if peer == "dfloat11":
        if fmt not in (None, "bf16") or _bits16(a, fmt)[1] != "bf16":
            raise ValueError(f"fmt: DFloat11 codes bf16 tensors only; got {fmt!r}")
        return dfloat11_bytes(a)
    if peer == "zipnn":
        return zipnn_bytes(a, fmt)
    if peer == "exponent-entropy":
        return exponent_entropy_bytes(a, fmt)
    raise ValueError(f"peer: unknown peer {peer!r}; available: {', '.join(PEERS)}")


def peer_ratios(a: object, fmt: str | None = None, peers: Sequence[str] | None = None,
                zstd_levels: Sequence[int] = (1, 3)) -> dict[str, float]:
    """Uncompressed over compressed bytes of ``a`` for each peer and for zstd at each level.

    Parameters
    ----------
    a, fmt
        The tensor and its format, as for :func:`exponent_counts`.
    peers : sequence of str, optional
        Names of :data:`PEERS`; default every peer that applies: DFloat11 on bf16 only, ZipNN only where zipnn
        imports.
    zstd_levels : sequence of int
        zstd levels (:func:`~buddylib.compressors.reference.reference_bytes`) to compare with.

    Returns
    -------
    dict of str to float
        The ratio of each peer, then ``"zstd-<level>"`` of each level.

    Raises
    ------
    ValueError, ImportError
        As :func:`peer_bytes`.

    Examples
    --------
    >>> import numpy as np
    >>> peer_ratios(np.full(100, 0x3F80, np.uint16), peers=["exponent-entropy"], zstd_levels=[1])
    {'exponent-entropy': 2.0, 'zstd-1': 11.11111111111111}
    """
    w, fmt = _bits16(a, fmt)
    if peers is None:
        peers = [p for p in PEERS if (p != "dfloat11" or fmt == "bf16") and (p != "zipnn" or zipnn_available())]
    raw = w.nbytes
    out = {p: raw / peer_bytes(w, p, fmt) for p in peers}
    out.update({f"zstd-{level}": raw / reference_bytes(w, "zstd", level) for level in zstd_levels})
    return out


__all__ = ["DF11_MAX_CODE_BITS", "PEERS", "ZIPNN_VERSION", "DFloat11Size", "dfloat11_bytes", "dfloat11_code",
           "dfloat11_size", "exponent_counts", "exponent_entropy_bytes", "peer_bytes", "peer_ratios",
           "zipnn_available", "zipnn_bytes", "zipnn_compress", "zipnn_decompress"]
