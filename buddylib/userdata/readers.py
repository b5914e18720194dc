"""Read a user's files as allocations: the bytes as they would sit in GPU memory.

Supported: ``.npy``, ``.npz``, ``.safetensors``, PyTorch checkpoints (``.pt``/``.pth``,
when torch is installed), zarr stores, and raw binary dumps (``dtype`` required, ``shape``
optional). Large inputs are memory-mapped, never read whole; each allocation also records
``(path, offset)`` so dask workers read their own byte ranges.

One rule book for every format:

* **Regular files only** (and zarr store folders of regular files): a FIFO, device or socket is
  refused, since reading one blocks or never ends.
* **Memory counted once**: tensors of a checkpoint that share a storage (views, slices, tied or
  expanded tensors) are one allocation of that storage's bytes, named after the first of them.
* **Headers are checked before data is read**: shapes are non-negative integers, offsets
  integers inside the file, tensors do not overlap, and every size is shape x item size.
* **Little-endian bytes**, as in GPU memory: a big-endian array (``>i4`` in a ``.npy``, a zarr
  store, a raw dump read with ``--dtype '>i4'``) is byte-swapped, so ``>i4`` and ``<i4`` holding
  the same values give the same sizes.
* **Logical C order**: an array's bytes are its elements in C (row-major) order, whatever the
  order in the file, so a Fortran-ordered ``.npy`` and the same array in a ``.npz`` agree.
* **Empty arrays hold no memory and are skipped**; a file holding nothing else is an error.
* **Unique names**: two arrays of one file with the same name are an error.
* **A size limit** (:data:`MAX_BYTES`, raised with ``max_bytes``): an input declaring more is
  refused with its size, so a sparse zarr store that declares terabytes of fill value is not
  silently compressed byte by byte.

Every problem is a one-line ``ValueError`` (``FileNotFoundError`` for a missing path) that
starts with the path and names the array (and chunk) where known.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import stat
import struct
from pathlib import Path
from typing import Any

import numpy as np

from buddylib.snapshot import Allocation

# safetensors dtype codes -> names (https://github.com/huggingface/safetensors, format spec)
_SAFETENSORS_DTYPES = {
    "BOOL": ("bool", 1), "U8": ("uint8", 1), "I8": ("int8", 1), "F8_E4M3": ("float8_e4m3fn", 1),
    "F8_E5M2": ("float8_e5m2", 1), "I16": ("int16", 2), "U16": ("uint16", 2), "F16": ("float16", 2),
    "BF16": ("bfloat16", 2), "I32": ("int32", 4), "U32": ("uint32", 4), "F32": ("float32", 4),
    "I64": ("int64", 8), "U64": ("uint64", 8), "F64": ("float64", 8),
}
SUFFIXES = (".npy", ".npz", ".safetensors", ".pt", ".pth", ".zarr")
#: Default limit on the bytes one input may declare (``--max-bytes`` raises it).
MAX_BYTES = 16 << 30
#: Deepest nesting of containers followed in a PyTorch checkpoint.
MAX_DEPTH = 64


def read(path: str | os.PathLike, dtype: str | None = None, shape: tuple[int, ...] | None = None,
         prefix: str = "", max_bytes: int = MAX_BYTES) -> list[Allocation]:
    """The allocations a file or zarr store holds, one per array, as a GPU would hold them.

    Headers are checked before any data is read; an array's bytes are its elements in logical C order,
    little-endian; empty arrays are skipped; tensors sharing one storage are that storage once.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npy``, ``.npz``, ``.safetensors`` or ``.pt``/``.pth`` file, a zarr store, or a raw dump.
    dtype : str, optional
        Read ``path`` as a raw dump of this dtype.
    shape : tuple of int, optional
        The raw dump's shape (default: one dimension).
    prefix : str
        Put before every allocation's name (to tell apart files of the same name).
    max_bytes : int
        The largest input accepted: a store can declare terabytes of fill value.

    Returns
    -------
    list of Allocation
        One per non-empty array, named after it.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        Anything wrong with the input, in one line naming the file (and the array): not a regular file or store,
        a header that does not hold, more than ``max_bytes``, a dtype it cannot take.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file or directory")
    if p.is_dir():
        if dtype is not None:
            raise ValueError(f"{p}: is a directory, not a raw dump")
        if not (p.suffix == ".zarr" or any((p / m).exists() for m in ("zarr.json", ".zgroup", ".zarray"))):
            raise ValueError(f"{p}: is a directory, not a zarr store or a file")
        allocations = _zarr(p, prefix)
    else:
        if not stat.S_ISREG(p.stat().st_mode):
            raise ValueError(f"{p}: not a regular file (a FIFO, device or socket); only files and zarr stores "
                             "are read")
        readers = {".npy": _npy, ".npz": _npz, ".safetensors": _safetensors, ".pt": _torch, ".pth": _torch}
        if dtype is None and p.suffix not in readers:
            raise ValueError(f"{p}: unknown file type {p.suffix or '(no extension)'!r}; known: "
                             f"{', '.join(SUFFIXES)}; for a raw memory dump give --dtype")
        try:
            allocations = _raw(p, dtype, shape, prefix) if dtype is not None else readers[p.suffix](p, prefix)
        except (ValueError, FileNotFoundError):
            raise
        except OSError as exc:
            raise ValueError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    if not allocations:
        raise ValueError(f"{p}: holds no arrays with any bytes (empty arrays are skipped)")
    names = [a.name for a in allocations]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{p}: several arrays are named {', '.join(map(repr, dup))}")
    total = sum(a.nbytes for a in allocations)
    if total > max_bytes:
        raise ValueError(f"{p}: declares {human_bytes(total)} of arrays, more than the limit of "
                         f"{human_bytes(max_bytes)}; "
                         "every declared byte is compressed (fill values included): raise the limit with "
                         "--max-bytes to go on")
    return allocations


def little_endian_c(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a C-ordered, little-endian array (the rule book's bytes); no copy when it already is.

    Parameters
    ----------
    arr : numpy.ndarray
        Any array, of either byte order and memory order.

    Returns
    -------
    numpy.ndarray
        The same values.

    Examples
    --------
    >>> import numpy as np
    >>> a = little_endian_c(np.arange(4, dtype=">i4"))
    >>> a.dtype.str, a.tolist()
    ('<i4', [0, 1, 2, 3])
    """
    le = arr.dtype.newbyteorder("<")
    if le != arr.dtype:
        arr = arr.astype(le)
    return np.ascontiguousarray(arr)


def _name(prefix: str, name: str) -> str:
    return f"{prefix}{name}"


def _allocation(p: Path, name: str, offset: int, dtype: np.dtype | str, shape: tuple[int, ...],
                fortran: bool = False) -> Allocation:
    """The array at ``offset`` of ``p``: memory-mapped bytes when they already follow the rule book,
    else read and converted (byte-swapped, reordered to C)."""
    if isinstance(dtype, np.dtype) and (fortran or dtype.newbyteorder("<") != dtype):
        arr = np.memmap(p, dtype=dtype, mode="r", offset=offset, shape=shape or (1,), order="F" if fortran else "C")
        arr = little_endian_c(arr).reshape(shape)
        return Allocation.from_array(name, arr, dtype=str(arr.dtype), shape=shape)
    nbytes = math.prod(shape) * (dtype.itemsize if isinstance(dtype, np.dtype) else _SAFETENSORS_ITEM[dtype])
    raw = np.memmap(p, dtype=np.uint8, mode="r", offset=offset, shape=(nbytes,))
    label = str(dtype.newbyteorder("<")) if isinstance(dtype, np.dtype) else dtype
    return Allocation.from_array(name, raw, source=(str(p), offset), dtype=label, shape=shape)


_SAFETENSORS_ITEM = {name: size for name, size in _SAFETENSORS_DTYPES.values()}


def _check_dtype(p: Path, dt: np.dtype, what: str) -> None:
    if dt.hasobject:
        raise ValueError(f"{p}: {what} holds Python objects (dtype {dt}), not raw memory")
    if dt.kind == "U":
        raise ValueError(f"{p}: {what} holds text (dtype {dt}), not numeric memory")
    if dt.itemsize == 0:
        raise ValueError(f"{p}: {what} has dtype {dt}, whose items have no bytes")


def _raw(p: Path, dtype: str, shape: tuple[int, ...] | None, prefix: str) -> list[Allocation]:
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{p}: unknown dtype {dtype!r}") from exc
    _check_dtype(p, dt, f"dtype {dtype!r}")
    size = p.stat().st_size
    if size == 0:
        return []
    if size % dt.itemsize:
        raise ValueError(f"{p}: size {size} bytes is not a multiple of the {dt} item size ({dt.itemsize} bytes)")
    n = size // dt.itemsize
    if shape is not None:
        if any(s < 0 for s in shape) or math.prod(shape) != n:
            raise ValueError(f"{p}: shape {tuple(shape)} holds {math.prod(shape)} items but the file has {n} "
                             f"{dt} items")
    return [_allocation(p, _name(prefix, p.stem), 0, dt, tuple(shape) if shape else (n,))]


def _npy(p: Path, prefix: str) -> list[Allocation]:
    # Read the header ourselves: np.load would blame object arrays on memory-mapping and
    # take any non-.npy file for a pickle.
    fmt = np.lib.format
    try:
        with open(p, "rb") as f:
            version = fmt.read_magic(f)
            if version not in ((1, 0), (2, 0), (3, 0)):
                raise ValueError(f"format version {version[0]}.{version[1]} (known: 1.0, 2.0, 3.0)")
            if version == (3, 0):
                shape, fortran, dtype = _npy_header_3_0(f)
            else:
                read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                shape, fortran, dtype = read_header(f)
            offset = f.tell()
    except OSError:
        raise
    except Exception as exc:  # ValueError, EOFError, and tokenize/syntax errors from a mangled header dict
        raise ValueError(f"{p}: not a readable .npy array ({type(exc).__name__}: {_first_line(exc)})") from exc
    if any(s < 0 for s in shape):
        raise ValueError(f"{p}: header has a negative shape {tuple(shape)}")
    _check_dtype(p, dtype, "the array")
    nbytes = math.prod(shape) * dtype.itemsize
    size = p.stat().st_size
    if offset + nbytes != size:
        raise ValueError(f"{p}: {'truncated: ' if offset + nbytes > size else ''}the header promises {nbytes} data "
                         f"bytes (shape {tuple(shape)} of {dtype}), the file holds {size - offset}")
    if nbytes == 0:
        return []
    return [_allocation(p, _name(prefix, p.stem), offset, dtype, tuple(shape), fortran=fortran and len(shape) > 1)]


#: numpy's default ``max_header_size``: the longest ``.npy`` header, in characters, it parses.
_NPY_MAX_HEADER = 10_000


def _npy_header_3_0(f: Any) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Shape, Fortran order and dtype of a format 3.0 ``.npy`` header, whose text is UTF-8, checked as numpy
    checks it: numpy's public header readers cover 1.0 and 2.0 only, and decode their text as latin-1."""
    import ast

    head = f.read(4)
    if len(head) < 4:
        raise EOFError("the file ends inside the array header length")
    (n,) = struct.unpack("<I", head)
    if n > 4 * _NPY_MAX_HEADER:  # UTF-8 takes at most 4 bytes a character; refused before reading it
        raise ValueError(f"header of {n} bytes is longer than numpy reads ({_NPY_MAX_HEADER} characters)")
    raw = f.read(n)
    if len(raw) < n:
        raise EOFError(f"the file ends inside the {n}-byte array header")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"format 3.0 header is not UTF-8 (byte {exc.start} of the header: {exc.reason})") from None
    if len(text) > _NPY_MAX_HEADER:
        raise ValueError(f"header of {len(text)} characters is longer than numpy reads ({_NPY_MAX_HEADER})")
    d = ast.literal_eval(text)  # SyntaxError or ValueError on a mangled header: the caller names the file
    if not isinstance(d, dict):
        raise ValueError(f"Header is not a dictionary: {d!r}")
    if d.keys() != {"descr", "fortran_order", "shape"}:
        raise ValueError(f"Header does not contain the correct keys: {sorted(d, key=repr)}")
    if not isinstance(d["shape"], tuple) or not all(isinstance(x, int) for x in d["shape"]):
        raise ValueError(f"shape is not valid: {d['shape']!r}")
    if not isinstance(d["fortran_order"], bool):
        raise ValueError(f"fortran_order is not a valid bool: {d['fortran_order']!r}")
    try:
        dtype = np.lib.format.descr_to_dtype(d["descr"])
    except TypeError as exc:
        raise ValueError(f"descr is not a valid dtype descriptor: {d['descr']!r}") from exc
    return d["shape"], d["fortran_order"], dtype


def _npz(p: Path, prefix: str) -> list[Allocation]:
    import zipfile

    out = []
    try:
        with zipfile.ZipFile(p) as z:
            members = z.namelist()
            for member in members:
                if not member.endswith(".npy"):
                    raise ValueError(f"{p}: member {member!r} is not a .npy array")
                key = member.removesuffix(".npy")
                with z.open(member) as f:
                    try:
                        arr = np.lib.format.read_array(f, allow_pickle=False)
                    except Exception as exc:  # also tokenize/syntax errors from a mangled header dict
                        raise ValueError(f"{p}: array {key!r} is not a readable .npy member "
                                         f"({_first_line(exc)})") from exc
                _check_dtype(p, arr.dtype, f"array {key!r}")
                if arr.nbytes:
                    arr = little_endian_c(arr)
                    out.append(Allocation.from_array(_name(prefix, key), arr))
    except ValueError:
        raise
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
            header = json.loads(f.read(n), object_pairs_hook=_no_duplicate_keys)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{p}: corrupted safetensors header ({_first_line(exc)})") from exc
        except KeyError as exc:
            raise ValueError(f"{p}: safetensors header names tensor {exc.args[0]!r} twice") from None
    if not isinstance(header, dict):
        raise ValueError(f"{p}: corrupted safetensors header (not a JSON object)")
    base, data_size = 8 + n, size - 8 - n
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        where = f"{p}: tensor {name!r}"
        if not isinstance(info, dict) or not {"dtype", "shape", "data_offsets"} <= set(info):
            raise ValueError(f"{where}: header entry needs dtype, shape and data_offsets, got {info!r}")
        code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if code not in _SAFETENSORS_DTYPES:
            raise ValueError(f"{where}: unknown dtype {code!r}")
        if not isinstance(shape, list) or not all(_is_int(s) and s >= 0 for s in shape):
            raise ValueError(f"{where}: shape {shape!r} is not a list of non-negative integers")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
            raise ValueError(f"{where}: data_offsets {offsets!r} are not two integers")
        dtype, itemsize = _SAFETENSORS_DTYPES[code]
        begin, end = offsets
        if not 0 <= begin <= end:
            raise ValueError(f"{where}: data offsets {begin}..{end} are not an increasing pair of byte positions")
        if end - begin != math.prod(shape) * itemsize:
            raise ValueError(f"{where}: data offsets {begin}..{end} ({end - begin} bytes) do not match shape "
                             f"{tuple(shape)} of {dtype} ({math.prod(shape) * itemsize} bytes)")
        if end > data_size:
            raise ValueError(f"{p}: truncated: tensor {name!r} needs data bytes up to {end}, the file holds "
                             f"{data_size}")
        spans.append((begin, end, name, dtype, tuple(shape)))
    spans.sort()
    for (b0, e0, n0, *_), (b1, _, n1, *_) in itertools.pairwise(spans):
        if b1 < e0:
            raise ValueError(f"{p}: tensors {n0!r} ({b0}..{e0}) and {n1!r} (from {b1}) overlap")
    return [_allocation(p, _name(prefix, name), base + begin, dtype, shape)
            for begin, end, name, dtype, shape in spans if end > begin]


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    for k in keys:
        if keys.count(k) > 1:
            raise KeyError(k)
    return dict(pairs)


def _torch(p: Path, prefix: str) -> list[Allocation]:
    try:
        import torch
    except ImportError as exc:
        raise ValueError(f"{p}: reading PyTorch checkpoints needs torch; install it with "
                         "pip install 'buddylib[dl]'") from exc
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises RuntimeError, pickle errors, EOFError, RecursionError...
        raise ValueError(f"{p}: not a readable PyTorch checkpoint ({type(exc).__name__}: "
                         f"{_first_line(exc)})") from exc
    out, storages = [], set()
    for name, t in _tensors(p, obj):
        try:
            for part, raw in _tensor_memory(p, name, t):
                mem = _storage_bytes(raw, storages)
                if mem is not None and mem.numel():
                    out.append(Allocation.from_array(
                        _name(prefix, part), mem.numpy(), dtype=str(raw.dtype).removeprefix("torch."),
                        shape=tuple(raw.shape) if not raw.is_nested and mem.numel() == raw.numel() * raw.itemsize
                        else (mem.numel() // raw.itemsize,)))
        except ValueError:
            raise
        except Exception as exc:  # a tensor subclass or layout torch cannot flatten
            raise ValueError(f"{p}: tensor {name!r} cannot be read as memory ({type(exc).__name__}: "
                             f"{_first_line(exc)})") from exc
    return out


def _storage_bytes(t: Any, seen: set[tuple[int, int]]) -> Any:
    """The bytes ``t`` holds in memory, as a flat uint8 tensor, or None when an earlier tensor's storage
    holds them: a tensor that is its whole storage gives its elements in logical C order; a view, slice or
    expanded tensor gives the storage it shares (a GPU holds that storage once, whole)."""
    import torch

    if t.is_nested:  # its components one after another, as its buffer holds them
        parts = [c.detach().contiguous().reshape(-1).view(torch.uint8) for c in t.unbind()]
        return torch.cat(parts) if parts else torch.empty(0, dtype=torch.uint8)
    storage = t.untyped_storage()
    key = (storage.data_ptr(), storage.nbytes())
    if storage.nbytes() and key in seen:
        return None
    seen.add(key)
    if t.numel() * t.element_size() == storage.nbytes():
        return t.detach().contiguous().reshape(-1).view(torch.uint8)
    return torch.empty(0, dtype=torch.uint8).set_(storage)


def _tensor_memory(p: Path, name: str, t: Any) -> list[tuple[str, Any]]:
    """The buffers a tensor holds in memory: itself when dense; indices and values when sparse."""
    import torch

    if t.is_meta:
        raise ValueError(f"{p}: tensor {name!r} is on the meta device: it has a shape {tuple(t.shape)} but no data")
    if t.is_nested:  # its components one after another, as its buffer holds them
        return [(name, t)]
    if t.layout == torch.strided:
        return [(name, t.int_repr() if t.is_quantized else t)]
    if t.layout == torch.sparse_coo:
        return [(f"{name}.indices", t._indices()), (f"{name}.values", t._values())]
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return [(f"{name}.crow_indices", t.crow_indices()), (f"{name}.col_indices", t.col_indices()),
                (f"{name}.values", t.values())]
    if t.layout in (torch.sparse_csc, torch.sparse_bsc):
        return [(f"{name}.ccol_indices", t.ccol_indices()), (f"{name}.row_indices", t.row_indices()),
                (f"{name}.values", t.values())]
    raise ValueError(f"{p}: tensor {name!r} has layout {t.layout}, which is not read")


def _tensors(p: Path, obj: Any) -> list[tuple[str, Any]]:
    """(dotted name, tensor) for every tensor in nested dicts/lists (state dicts, optimizers), depth-first
    without recursion, refusing nesting deeper than :data:`MAX_DEPTH`."""
    import torch

    out, stack = [], [("", obj, 0)]
    while stack:
        name, node, depth = stack.pop()
        if isinstance(node, torch.Tensor):
            out.append((name or "tensor", node))
            continue
        items = list(node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list | tuple)
                     else ())
        if items and depth >= MAX_DEPTH:
            raise ValueError(f"{p}: containers nested deeper than {MAX_DEPTH} levels (at {name!r})")
        stack.extend((f"{name}.{k}" if name else str(k), v, depth + 1) for k, v in reversed(items))
    return out


class _ZarrChunks:
    """A zarr array as dask reads it, naming the store, array and chunk in any read error."""

    def __init__(self, arr: Any, where: str):
        self.arr, self.where = arr, where
        self.shape, self.dtype, self.ndim = arr.shape, arr.dtype, arr.ndim

    def __getitem__(self, key: Any) -> np.ndarray:
        try:
            return self.arr[key]
        except Exception as exc:  # codec errors (a BPC checksum), missing or damaged chunk files
            at = ", ".join(f"{k.start}:{k.stop}" if isinstance(k, slice) else str(k)
                           for k in (key if isinstance(key, tuple) else (key,)))
            raise ValueError(f"{self.where}, chunk [{at}]: cannot be read ({type(exc).__name__}: "
                             f"{_first_line(exc)})") from exc


def _zarr(p: Path, prefix: str) -> list[Allocation]:
    import dask.array as da
    import zarr

    _regular_store(p)
    try:
        node = zarr.open(str(p), mode="r")
        arrays = [(p.stem, node)] if isinstance(node, zarr.Array) else \
            sorted(((k, v) for k, v in node.members(max_depth=None) if isinstance(v, zarr.Array)),
                   key=lambda kv: kv[0])
    except Exception as exc:  # zarr raises several types for damaged stores
        raise ValueError(f"{p}: not a readable zarr store ({type(exc).__name__}: {_first_line(exc)})") from exc
    out = []
    for key, arr in arrays:
        _check_dtype(p, np.dtype(arr.dtype), f"array {key!r}")
        if arr.size == 0:
            continue
        if any(c < 1 for c in arr.chunks):
            raise ValueError(f"{p}: array {key!r} declares chunks {arr.chunks}: every chunk side must be at least 1")
        d = da.from_array(_ZarrChunks(arr, f"{p}: array {key!r}"), chunks=arr.chunks, asarray=True, lock=False)
        if d.dtype.newbyteorder("<") != d.dtype:
            d = d.astype(d.dtype.newbyteorder("<"))
        out.append(Allocation.from_array(_name(prefix, key), d))
    return out


def _regular_store(p: Path) -> None:
    """A zarr folder holds only folders and regular files: a FIFO inside (or a link to one) would block the read."""
    for root, dirs, files in os.walk(p):
        for entry in (*dirs, *files):
            q = Path(root) / entry
            try:
                mode = q.stat().st_mode
            except OSError as exc:
                raise ValueError(f"{p}: cannot read {q.relative_to(p)} ({exc.strerror or exc})") from exc
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise ValueError(f"{p}: {q.relative_to(p)} is not a regular file (a FIFO, device or socket); "
                                 "a zarr store holds files and folders only")


def human_bytes(n: float) -> str:
    """``n`` bytes the way people read them.

    Parameters
    ----------
    n : float
        A number of bytes.

    Returns
    -------
    str
        Whole bytes below 1 KiB, else one decimal in KiB, MiB, GiB or TiB.

    Examples
    --------
    >>> human_bytes(3 << 20), human_bytes(512)
    ('3.0 MiB', '512 B')
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n}"


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]
