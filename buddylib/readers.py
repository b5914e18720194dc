"""Read a user's files as allocations: the bytes exactly as they would sit in GPU memory.

Supported: ``.npy``, ``.npz``, ``.safetensors``, PyTorch checkpoints (``.pt``/``.pth``,
when torch is installed), zarr stores, and raw binary dumps (``dtype`` required, ``shape``
optional). Large inputs are memory-mapped, never read whole; each allocation also records
``(path, offset)`` so dask workers read their own byte ranges. Every problem is a
``ValueError`` (or ``FileNotFoundError``) whose message starts with the path.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from buddylib.snapshot import Allocation

# safetensors dtype codes -> names (https://github.com/huggingface/safetensors, format spec)
_SAFETENSORS_DTYPES = {
    "BOOL": ("bool", 1), "U8": ("uint8", 1), "I8": ("int8", 1), "F8_E4M3": ("float8_e4m3", 1),
    "F8_E5M2": ("float8_e5m2", 1), "I16": ("int16", 2), "U16": ("uint16", 2), "F16": ("float16", 2),
    "BF16": ("bfloat16", 2), "I32": ("int32", 4), "U32": ("uint32", 4), "F32": ("float32", 4),
    "I64": ("int64", 8), "U64": ("uint64", 8), "F64": ("float64", 8),
}
SUFFIXES = (".npy", ".npz", ".safetensors", ".pt", ".pth", ".zarr")


def read(path: str | os.PathLike, dtype: str | None = None, shape: tuple[int, ...] | None = None,
         prefix: str = "") -> list[Allocation]:
    """Allocations held in ``path``; ``dtype`` (and ``shape``) read it as a raw dump."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    if dtype is not None:
        return [_raw(p, dtype, shape, prefix)]
    if p.is_dir() and (p.suffix == ".zarr" or (p / "zarr.json").exists() or (p / ".zgroup").exists()
                       or (p / ".zarray").exists()):
        return _zarr(p, prefix)
    if p.is_dir():
        raise ValueError(f"{p}: is a directory, not a zarr store or a file")
    readers = {".npy": _npy, ".npz": _npz, ".safetensors": _safetensors, ".pt": _torch, ".pth": _torch}
    if p.suffix not in readers:
        raise ValueError(f"{p}: unknown file type {p.suffix or '(no extension)'!r}; known: "
                         f"{', '.join(SUFFIXES)}; for a raw memory dump give --dtype")
    try:
        allocations = readers[p.suffix](p, prefix)
    except (ValueError, FileNotFoundError):
        raise
    except OSError as exc:
        raise ValueError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    if not allocations:
        raise ValueError(f"{p}: holds no arrays")
    return allocations


def _name(prefix: str, name: str) -> str:
    return f"{prefix}{name}"


def _bytes_at(p: Path, offset: int, nbytes: int) -> np.ndarray:
    return np.memmap(p, dtype=np.uint8, mode="r", offset=offset, shape=(nbytes,))


def _allocation(p: Path, name: str, offset: int, nbytes: int, dtype: str, shape: tuple[int, ...]) -> Allocation:
    if nbytes == 0:
        raise ValueError(f"{p}: array {name!r} is empty (shape {shape}), nothing to analyse")
    return Allocation.from_array(name, _bytes_at(p, offset, nbytes), source=(str(p), offset), dtype=dtype,
                                 shape=shape)


def _raw(p: Path, dtype: str, shape: tuple[int, ...] | None, prefix: str) -> Allocation:
    if p.is_dir():
        raise ValueError(f"{p}: is a directory, not a raw dump")
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise ValueError(f"{p}: unknown dtype {dtype!r}") from exc
    if dt.hasobject or dt.kind == "U":
        raise ValueError(f"{p}: dtype {dtype!r} holds text or Python objects, not raw memory")
    size = p.stat().st_size
    if size == 0:
        raise ValueError(f"{p}: file is empty, nothing to analyse")
    if size % dt.itemsize:
        raise ValueError(f"{p}: size {size} bytes is not a multiple of the {dt} item size ({dt.itemsize} bytes)")
    n = size // dt.itemsize
    if shape is not None:
        if any(s < 0 for s in shape) or math.prod(shape) != n:
            raise ValueError(f"{p}: shape {tuple(shape)} holds {math.prod(shape)} items but the file has {n} "
                             f"{dt} items")
    return _allocation(p, _name(prefix, p.stem), 0, size, str(dt), tuple(shape) if shape else (n,))


def _npy(p: Path, prefix: str) -> list[Allocation]:
    # Read the header ourselves: np.load would blame object arrays on memory-mapping and
    # take any non-.npy file for a pickle.
    fmt = np.lib.format
    try:
        with open(p, "rb") as f:
            version = fmt.read_magic(f)
            read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, _, dtype = read_header(f)
            offset = f.tell()
    except (ValueError, EOFError) as exc:
        raise ValueError(f"{p}: not a readable .npy array ({_first_line(exc)})") from exc
    if dtype.hasobject:
        raise ValueError(f"{p}: holds Python objects (dtype {dtype}), not raw memory")
    if dtype.kind == "U":
        raise ValueError(f"{p}: holds text (dtype {dtype}), not numeric memory")
    nbytes = math.prod(shape) * dtype.itemsize
    if offset + nbytes > p.stat().st_size:
        raise ValueError(f"{p}: truncated: the header promises {nbytes} data bytes, the file holds "
                         f"{p.stat().st_size - offset}")
    return [_allocation(p, _name(prefix, p.stem), offset, nbytes, str(dtype), tuple(shape))]


def _npz(p: Path, prefix: str) -> list[Allocation]:
    out = []
    try:
        with np.load(p, allow_pickle=False) as z:
            for key in z.files:
                arr = z[key]
                if arr.dtype.hasobject or arr.dtype.kind == "U":
                    raise ValueError(f"{p}: array {key!r} holds text or Python objects (dtype {arr.dtype}), "
                                     "not raw numeric memory")
                if arr.nbytes == 0:
                    raise ValueError(f"{p}: array {key!r} is empty (shape {arr.shape}), nothing to analyse")
                out.append(Allocation.from_array(_name(prefix, key), arr))
    except ValueError as exc:
        if str(exc).startswith(str(p)):
            raise
        raise ValueError(f"{p}: not a readable .npz archive ({_first_line(exc)})") from exc
    except Exception as exc:  # zipfile.BadZipFile, EOFError, zlib.error on damaged archives
        raise ValueError(f"{p}: not a readable .npz archive ({type(exc).__name__}: {_first_line(exc)})") from exc
    return out


def _safetensors(p: Path, prefix: str) -> list[Allocation]:
    size = p.stat().st_size
    with open(p, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{p}: truncated: shorter than the 8-byte safetensors header length")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8 or n > 100 << 20:
            raise ValueError(f"{p}: truncated or not safetensors: header of {n} bytes in a {size}-byte file")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{p}: corrupted safetensors header ({exc})") from exc
    if not isinstance(header, dict):
        raise ValueError(f"{p}: corrupted safetensors header (not a JSON object)")
    base = 8 + n
    out = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            code, shape, (begin, end) = info["dtype"], tuple(int(s) for s in info["shape"]), info["data_offsets"]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{p}: tensor {name!r}: malformed header entry {info!r}") from exc
        if code not in _SAFETENSORS_DTYPES:
            raise ValueError(f"{p}: tensor {name!r}: unknown dtype {code!r}")
        dtype, itemsize = _SAFETENSORS_DTYPES[code]
        if not (0 <= begin <= end) or end - begin != math.prod(shape) * itemsize:
            raise ValueError(f"{p}: tensor {name!r}: data offsets {begin}..{end} do not match shape {shape} "
                             f"of {dtype}")
        if base + end > size:
            raise ValueError(f"{p}: truncated: tensor {name!r} needs bytes up to {base + end}, file has {size}")
        out.append(_allocation(p, _name(prefix, name), base + begin, end - begin, dtype, shape))
    return out


def _torch(p: Path, prefix: str) -> list[Allocation]:
    try:
        import torch
    except ImportError as exc:
        raise ValueError(f"{p}: reading PyTorch checkpoints needs torch; install it with "
                         "pip install 'buddylib[dl]'") from exc
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises RuntimeError, pickle errors, EOFError...
        raise ValueError(f"{p}: not a readable PyTorch checkpoint ({type(exc).__name__}: "
                         f"{_first_line(exc)})") from exc
    out = []
    for name, t in _tensors(obj):
        if t.numel() == 0:
            continue
        raw = t.detach().contiguous().reshape(-1).view(torch.uint8).numpy()
        out.append(Allocation.from_array(_name(prefix, name), raw, dtype=str(t.dtype).removeprefix("torch."),
                                         shape=tuple(t.shape)))
    return out


def _tensors(obj: Any, name: str = "") -> list[tuple[str, Any]]:
    """(dotted name, tensor) for every tensor in nested dicts/lists (state dicts, optimizers)."""
    import torch

    if isinstance(obj, torch.Tensor):
        return [(name or "tensor", obj)]
    items: Any = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list | tuple) else ()
    out = []
    for k, v in items:
        out.extend(_tensors(v, f"{name}.{k}" if name else str(k)))
    return out


def _zarr(p: Path, prefix: str) -> list[Allocation]:
    import dask.array as da
    import zarr

    try:
        node = zarr.open(str(p), mode="r")
    except Exception as exc:  # zarr raises several types for damaged stores
        raise ValueError(f"{p}: not a readable zarr store ({type(exc).__name__}: {_first_line(exc)})") from exc
    arrays = [(p.stem, node)] if isinstance(node, zarr.Array) else \
        sorted(((k, v) for k, v in node.members(max_depth=None) if isinstance(v, zarr.Array)), key=lambda kv: kv[0])
    out = []
    for key, arr in arrays:
        if arr.dtype.kind in "OU" or arr.size == 0:
            raise ValueError(f"{p}: array {key!r} is empty or holds text/objects (dtype {arr.dtype})")
        out.append(Allocation.from_array(_name(prefix, key), da.from_zarr(arr)))
    return out


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]
