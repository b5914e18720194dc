"""BPC and EBO as numcodecs codecs and as zarr v3 bytes-to-bytes codecs.

The stream is the compressor's (:meth:`buddylib.compressors.coded.Coded.encode` of BPC and EBO), of the buffer's bytes
as they lie in
memory (a
Fortran-ordered array is encoded in Fortran order, as numcodecs' own codecs do, so that
zarr format 2 arrays with ``order="F"`` round-trip). The adapters run the serial,
GIL-free kernels: zarr decodes chunks on several threads, and numba's parallel kernels must
not be entered from several threads at once. EBO (``buddylib.ebo``, ``fmt`` "bf16" or "fp16") is
the code for arrays of 16-bit floats; on any other bytes it is lossless too, only larger.

Both are registered through entry points (``numcodecs.codecs`` and ``zarr.codecs`` in
pyproject.toml), so a store written with them opens in a fresh process without
``import buddylib``:

>>> import numpy as np, numcodecs
>>> codec = numcodecs.get_codec({"id": "buddylib.bpc", "width": 64})
>>> x = np.linspace(0, 1, 1000)
>>> bool((np.frombuffer(codec.decode(codec.encode(x)), dtype=x.dtype) == x).all())
True
>>> BPCZarrCodec(width=64).to_dict()
{'name': 'buddylib.bpc', 'configuration': {'width': 64}}
>>> EBOZarrCodec(fmt="bf16").to_dict()
{'name': 'buddylib.ebo', 'configuration': {'fmt': 'bf16'}}
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numcodecs
import numcodecs.abc
import numpy as np
from numcodecs.compat import ensure_contiguous_ndarray
from zarr.abc.codec import BytesBytesCodec
from zarr.core.buffer.cpu import as_numpy_array_wrapper
from zarr.core.common import JSON, parse_named_configuration

from buddylib.compressors.bpc import BPC
from buddylib.compressors.coded import Coded
from buddylib.compressors.ebo import EBO, FORMATS

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

CODEC_ID = "buddylib.bpc"
EBO_CODEC_ID = "buddylib.ebo"


def _width(width: object) -> int:
    """The word width as an int, or a one-line ValueError (configs come from JSON)."""
    if isinstance(width, bool) or not isinstance(width, int | np.integer) or width not in (32, 64):
        raise ValueError(f"BPC width must be 32 or 64, got {width!r}")
    return int(width)


def _fmt(fmt: object) -> str:
    """The 16-bit float format, or a one-line ValueError (configs come from JSON)."""
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise ValueError(f"EBO fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return fmt


class _CodedCodec(numcodecs.abc.Codec):
    """A numcodecs codec of a per-entry code with a decoder (:class:`~buddylib.compressors.coded.Coded`).

    Encodes any buffer's bytes in memory order; ``decode`` returns a uint8 array, or fills
    ``out`` (any contiguous buffer of exactly the decoded size).
    """

    _code: Coded

    def encode(self, buf: Any) -> bytes:
        # TypeError for object arrays; datetimes viewed as int64; F order kept as it lies
        arr = ensure_contiguous_ndarray(buf)
        return self._code.encode(arr.view(np.uint8))

    def decode(self, buf: Any, out: Any = None) -> Any:
        stream = ensure_contiguous_ndarray(buf).view(np.uint8)
        dest = None
        if out is not None:  # checked before decoding: an object array must not be written
            dest = ensure_contiguous_ndarray(out).view(np.uint8)
        data = np.frombuffer(self._code.decode(stream), dtype=np.uint8)
        if dest is None:
            return data
        if dest.size != data.size:
            raise ValueError(f"out has {dest.size} bytes but the stream decodes to {data.size}")
        dest[...] = data
        return out


class BPCCodec(_CodedCodec):
    """numcodecs codec: ``{"id": "buddylib.bpc", "width": 32}`` (or 64).

    Parameters
    ----------
    width : {32, 64}
        BPC's word width.

    Raises
    ------
    ValueError
        Any other width (also a bool or a non-integer).
    """

    codec_id = CODEC_ID

    def __init__(self, width: int = 32):
        self.width = _width(width)
        self._code = BPC(self.width, parallel=False)


class EBOCodec(_CodedCodec):
    """numcodecs codec: ``{"id": "buddylib.ebo", "fmt": "bf16"}`` (or "fp16"), for arrays of 16-bit floats.

    Parameters
    ----------
    fmt : {"bf16", "fp16", "e4m3"}
        The float format (:data:`buddylib.compressors.ebo.FORMATS`).

    Raises
    ------
    ValueError
        An unknown format.
    """

    codec_id = EBO_CODEC_ID

    def __init__(self, fmt: str = "bf16"):
        self.fmt = _fmt(fmt)
        self._code = EBO(self.fmt, parallel=False)


numcodecs.register_codec(BPCCodec)
numcodecs.register_codec(EBOCodec)


class _CodedZarrCodec(BytesBytesCodec):
    """zarr v3 bytes-to-bytes codec wrapping a numcodecs one (:class:`_CodedCodec`) the way zarr wraps numcodecs'
    Zstd: zarr 3 (format 3) takes codecs of its own kind. A subclass is a frozen dataclass of the one option its
    numcodecs codec takes (``OPTION``), registered as ``NAME``."""

    is_fixed_size = False
    NAME: ClassVar[str]
    OPTION: ClassVar[str]
    NUMCODECS: ClassVar[type[_CodedCodec]]

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(data, cls.NAME)
        return cls(**(configuration or {}))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        return {"name": self.NAME, "configuration": {self.OPTION: getattr(self, self.OPTION)}}

    @cached_property
    def _codec(self) -> _CodedCodec:
        return self.NUMCODECS(getattr(self, self.OPTION))

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(as_numpy_array_wrapper, self._codec.decode, chunk_bytes, chunk_spec.prototype)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(as_numpy_array_wrapper, self._codec.encode, chunk_bytes, chunk_spec.prototype)

    def compute_encoded_size(self, _input_byte_length: int, _chunk_spec: ArraySpec) -> int:
        raise NotImplementedError  # variable-length code


@dataclass(frozen=True)
class BPCZarrCodec(_CodedZarrCodec):
    """zarr v3 bytes-to-bytes codec: ``{"name": "buddylib.bpc", "configuration": {"width": 32}}``.

    Parameters
    ----------
    width : {32, 64}
        BPC's word width (keyword only).

    Raises
    ------
    ValueError
        Any other width.
    """

    NAME: ClassVar[str] = CODEC_ID
    OPTION: ClassVar[str] = "width"
    NUMCODECS: ClassVar[type[_CodedCodec]] = BPCCodec
    width: int = 32

    def __init__(self, *, width: int = 32) -> None:
        object.__setattr__(self, "width", _width(width))


@dataclass(frozen=True)
class EBOZarrCodec(_CodedZarrCodec):
    """zarr v3 bytes-to-bytes codec: ``{"name": "buddylib.ebo", "configuration": {"fmt": "bf16"}}`` (or "fp16").

    Parameters
    ----------
    fmt : {"bf16", "fp16", "e4m3"}
        The float format (keyword only).

    Raises
    ------
    ValueError
        An unknown format.
    """

    NAME: ClassVar[str] = EBO_CODEC_ID
    OPTION: ClassVar[str] = "fmt"
    NUMCODECS: ClassVar[type[_CodedCodec]] = EBOCodec
    fmt: str = "bf16"

    def __init__(self, *, fmt: str = "bf16") -> None:
        object.__setattr__(self, "fmt", _fmt(fmt))
