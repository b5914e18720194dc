"""Allocations and snapshots: what a GPU holds at one moment of a run (SPEC §5, §7).

An *allocation* is one named buffer (a tensor, a field, an index array) with its kind,
dtype, shape and bytes. A *snapshot* is every live allocation of a workload at one point
of its run. Compressibility is a property of the bytes, so a snapshot either carries the
bytes or, to save disk, just the per-entry sector counts for each compressor (1 byte per
128-byte entry per compressor), which is all the layout and timing model need.

A run's snapshots are saved as one netCDF file or zarr store holding one dataset
(:func:`to_dataset`), through xarray, so they open anywhere xarray does.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from buddylib.entries import n_entries

#: Kinds of allocation, for per-kind plots. ``kv_cache``: the keys and values a transformer keeps per sequence
#: while it generates (an inference server's other large memory besides the weights).
KINDS = ("weights", "half_weights", "gradients", "optimizer", "activations", "kv_cache", "input", "field", "index",
         "other")


@dataclass
class Allocation:
    """One live buffer: name, kind, dtype, shape, size, and its bytes or sector counts.

    Parameters
    ----------
    name : str
        Unique within a snapshot.
    data : object, optional
        The bytes: anything :func:`buddylib.entries.as_entries` reads (numpy or memory-mapped array, bytes) or a
        dask array; ``None`` where only ``sectors`` are kept.
    kind : str
        One of :data:`KINDS`.
    dtype : str
        Element type, as text (it may be one numpy lacks: bfloat16, float8).
    shape : tuple of int
        Logical shape.
    nbytes : int
        Size in bytes.
    source : tuple of (str, int), optional
        Where the bytes sit in a file, ``(path, offset)``, so distributed workers read them themselves.
    sectors : dict of str to numpy.ndarray
        A compressor name to uint8 sectors per entry, when already computed or loaded.
    reference_bytes : dict of str to int
        Whole-allocation compressed bytes by reference codec (``"zstd"``, ``"lz4"``), when measured.

    Raises
    ------
    ValueError
        A ``kind`` not in :data:`KINDS`.
    """

    name: str
    data: Any = None
    kind: str = "other"
    dtype: str = "uint8"
    shape: tuple[int, ...] = ()
    nbytes: int = 0
    source: tuple[str, int] | None = None
    sectors: dict[str, np.ndarray] = field(default_factory=dict)
    #: whole-allocation compressed bytes by reference codec ("zstd", "lz4"), when measured
    reference_bytes: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"allocation {self.name!r}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        self.shape = tuple(int(s) for s in self.shape)
        self.nbytes = int(self.nbytes)

    @classmethod
    def from_array(cls, name: str, array: Any, kind: str = "other", source: tuple[str, int] | None = None,
                   dtype: str | None = None, shape: tuple[int, ...] | None = None) -> Allocation:
        """Wrap a numpy/dask array (or anything with ``dtype``, ``shape``, ``nbytes``).

        Parameters
        ----------
        name, kind, source
            As in :class:`Allocation`.
        array : array_like
            The bytes; anything else is read by ``numpy.asarray``.
        dtype : str, optional
            Element type to record instead of the array's.
        shape : tuple of int, optional
            Shape to record instead of the array's; with ``dtype``, labels raw bytes whose type numpy lacks
            (bfloat16, float8).

        Returns
        -------
        Allocation
            Holding ``array`` as its ``data``.

        Raises
        ------
        TypeError
            A dtype of text or Python objects, not raw numeric memory.
        ValueError
            An empty array, or a ``kind`` not in :data:`KINDS`.
        """
        if not (hasattr(array, "dtype") and hasattr(array, "shape") and hasattr(array, "nbytes")):
            array = np.asarray(array)
        np_dtype = np.dtype(array.dtype)
        if np_dtype.hasobject or np_dtype.kind in "UO":
            raise TypeError(f"allocation {name!r}: dtype {np_dtype} holds text or Python objects, "
                            "not raw numeric memory")
        nbytes = int(array.nbytes)
        if nbytes == 0:
            raise ValueError(f"allocation {name!r}: empty array (shape {tuple(array.shape)}), nothing to analyse")
        return cls(name=name, data=array, kind=kind, dtype=dtype or str(np_dtype),
                   shape=tuple(shape if shape is not None else array.shape), nbytes=nbytes, source=source)

    @property
    def n_entries(self) -> int:
        """Number of 128-byte entries (the last one zero-padded)."""
        return n_entries(self.nbytes)


@dataclass
class Snapshot:
    """Every live allocation of ``workload`` at ``step`` (and wall/simulated ``time``).

    Parameters
    ----------
    workload : str
        The workload's name.
    allocations : list of Allocation
        The live allocations, each name once.
    step : int
        The run's step at the snapshot.
    time : float
        Wall or simulated time at the snapshot.

    Raises
    ------
    ValueError
        Two allocations with the same name.
    """

    workload: str
    allocations: list[Allocation]
    step: int = 0
    time: float = 0.0

    def __post_init__(self) -> None:
        names = [a.name for a in self.allocations]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"snapshot {self.workload}@{self.step}: duplicate allocation names {sorted(dup)}")

    @property
    def nbytes(self) -> int:
        """Bytes of all the snapshot's allocations."""
        return sum(a.nbytes for a in self.allocations)

    def compute_sectors(self, compressors: Sequence[str], zero_flag: bool = True) -> Snapshot:
        """Fill every allocation's ``sectors`` for ``compressors`` (in place).

        Parameters
        ----------
        compressors : sequence of str
            Compressor names (:func:`buddylib.compressors.names`); those already in ``sectors`` are kept.
        zero_flag : bool
            Whether an all-zero entry takes no sectors (a flag in its metadata).

        Returns
        -------
        Snapshot
            ``self``.

        Raises
        ------
        ValueError
            An unknown compressor, or an allocation with neither bytes nor that compressor's sectors.
        """
        from buddylib.compressors import get

        for a in self.allocations:
            for name in compressors:
                if name not in a.sectors:
                    if a.data is None:
                        raise ValueError(f"allocation {a.name!r} has neither bytes nor {name} sectors")
                    a.sectors[name] = get(name).sectors(np.asarray(a.data), zero_flag=zero_flag)
        return self


#: Marks a file :func:`save` wrote, and its layout: one dataset, every snapshot in it.
FORMAT = "buddylib-run-2"


def to_dataset(snapshots: Sequence[Snapshot], compressors: Sequence[str] | None = None,
               include_bytes: bool = False) -> xr.Dataset:
    """A run's snapshots as one Dataset: per-entry sectors ``(compressor, entry)`` for every snapshot's allocations
    one after another, and a table ``(snapshot, allocation)`` saying where each lies (one dataset, not a group per
    snapshot: netCDF pays several kB for every variable of every group, which made a small run's file mostly overhead).

    Parameters
    ----------
    snapshots, compressors, include_bytes
        The run's snapshots; the compressors whose sectors to keep, computed where missing (default: those every
        allocation has); whether to keep the allocations' bytes too (``bytes``, ``byte_start``).

    Returns
    -------
    xarray.Dataset
        With ``attrs["format"]`` :data:`FORMAT`; :func:`from_dataset` reads it back.

    Raises
    ------
    ValueError
        No snapshots, an unknown compressor, or an allocation with neither bytes nor a compressor's sectors.
    """
    snapshots = list(snapshots)
    if not snapshots:
        raise ValueError("no snapshots to save")
    compressors = list(compressors if compressors is not None else _common_compressors(snapshots))
    for snap in snapshots:
        snap.compute_sectors(compressors)
    names = list(dict.fromkeys(a.name for s in snapshots for a in s.allocations))
    col = {n: i for i, n in enumerate(names)}
    shape2 = (len(snapshots), len(names))
    start, count, nbytes = (np.zeros(shape2, np.int64) for _ in range(3))
    text = {k: np.full(shape2, "", dtype=object) for k in ("kind", "dtype", "shape")}
    refs = sorted({r for s in snapshots for a in s.allocations for r in a.reference_bytes})
    ref = np.full((*shape2, len(refs)), -1, np.int64)
    offset = 0
    for si, snap in enumerate(snapshots):
        for a in snap.allocations:
            ai = col[a.name]
            start[si, ai], count[si, ai], nbytes[si, ai] = offset, a.n_entries, a.nbytes
            text["kind"][si, ai], text["dtype"][si, ai] = a.kind, a.dtype
            text["shape"][si, ai] = ",".join(map(str, a.shape))
            ref[si, ai] = [a.reference_bytes.get(r, -1) for r in refs]
            offset += a.n_entries
    chunks = [a.sectors[c] for s in snapshots for a in s.allocations for c in compressors]
    per = len(compressors)
    sectors = np.stack([np.concatenate(chunks[i::per]) for i in range(per)]) if chunks and per \
        else np.zeros((per, offset), np.uint8)
    grid = ("snapshot", "allocation")
    ds = xr.Dataset(
        {
            "sectors": (("compressor", "entry"), sectors.astype(np.uint8),
                        {"units": "sectors", "description": "32-byte sectors per 128-byte entry"}),
            "entry_start": (grid, start, {"description": "first entry of the allocation in this snapshot"}),
            "entry_count": (grid, count, {"units": "entries", "description": "0 where absent"}),
            "nbytes": (grid, nbytes, {"units": "bytes", "description": "0 where absent"}),
            **{k: (grid, v) for k, v in text.items()},
            "reference_bytes": ((*grid, "reference"), ref,
                                {"units": "bytes", "description": "whole-allocation zstd-1 / lz4 size, -1 if absent"}),
        },
        coords={"snapshot": np.arange(len(snapshots)), "allocation": _text(names), "compressor": _text(compressors),
                "reference": _text(refs), "step": ("snapshot", [int(s.step) for s in snapshots]),
                "time": ("snapshot", [float(s.time) for s in snapshots]),
                "workload": ("snapshot", _text([s.workload for s in snapshots]))},
        attrs={"format": FORMAT},
    )
    if include_bytes:
        from buddylib.entries import as_entries

        raw = [as_entries(np.asarray(a.data), name=a.name).reshape(-1)[: a.nbytes]
               for s in snapshots for a in s.allocations]
        byte_start = np.zeros(shape2, np.int64)
        pos = 0
        for si, snap in enumerate(snapshots):
            for a in snap.allocations:
                byte_start[si, col[a.name]] = pos
                pos += a.nbytes
        ds["bytes"] = ("byte", np.concatenate(raw) if raw else np.zeros(0, np.uint8))
        ds["byte_start"] = (grid, byte_start)
    return ds


def _text(values: Sequence[str]) -> np.ndarray:
    """Strings as an object array: zarr stores them as its variable-length string type, netCDF as characters."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def from_dataset(ds: xr.Dataset) -> list[Snapshot]:
    """Inverse of :func:`to_dataset`.

    Parameters
    ----------
    ds : xarray.Dataset
        A run as :func:`to_dataset` makes it (loaded: its arrays are read whole).

    Returns
    -------
    list of Snapshot
        In order, each allocation with its sectors and, where the dataset keeps them, its bytes.

    Raises
    ------
    ValueError
        Where the dataset contradicts itself, naming where: no snapshots or allocations, non-integer or negative
        counts, entry counts that do not match the sizes, entries outside the sectors, more than 4 sectors.
    """
    comps = [str(c) for c in ds["compressor"].values]
    sectors = np.asarray(ds["sectors"].values)
    start, count, nbytes = (np.asarray(ds[v].values) for v in ("entry_start", "entry_count", "nbytes"))
    _check_run(ds, sectors, start, count, nbytes)
    kind, dtype, shape = (np.asarray(ds[v].values).astype(object) for v in ("kind", "dtype", "shape"))
    refs = [str(r) for r in ds["reference"].values]
    ref = np.asarray(ds["reference_bytes"].values)
    raw = np.asarray(ds["bytes"].values) if "bytes" in ds else None
    names = [str(n) for n in ds["allocation"].values]
    out = []
    for si in range(ds.sizes["snapshot"]):
        present = np.flatnonzero(count[si] > 0)
        allocations = []
        for ai in present[np.argsort(start[si, present], kind="stable")]:  # in the order they were saved
            lo, n = int(start[si, ai]), int(count[si, ai])
            data = None
            if raw is not None:
                b0 = int(ds["byte_start"].values[si, ai])
                data = raw[b0:b0 + int(nbytes[si, ai])]
            allocations.append(Allocation(
                name=names[ai], data=data, kind=str(kind[si, ai]), dtype=str(dtype[si, ai]),
                shape=tuple(int(x) for x in str(shape[si, ai]).split(",") if x), nbytes=int(nbytes[si, ai]),
                sectors={c: sectors[ci, lo:lo + n] for ci, c in enumerate(comps)},
                reference_bytes={r: int(ref[si, ai, ri]) for ri, r in enumerate(refs) if ref[si, ai, ri] >= 0}))
        out.append(Snapshot(workload=str(ds["workload"].values[si]), allocations=allocations,
                            step=int(ds["step"].values[si]), time=float(ds["time"].values[si])))
    return out


def _check_run(ds: xr.Dataset, sectors: np.ndarray, start: np.ndarray, count: np.ndarray, nbytes: np.ndarray) -> None:
    """Entry counts that match the sizes, entry ranges inside the sectors, sector counts of 0..4."""
    from buddylib.entries import SECTORS_PER_ENTRY

    names = [str(n) for n in ds["allocation"].values]
    if not ds.sizes.get("snapshot", 0) or not names:
        raise ValueError(f"holds {ds.sizes.get('snapshot', 0)} snapshots of {len(names)} allocations: nothing to "
                         "analyse (corrupted run)")
    for var, arr in (("sectors", sectors), ("entry_start", start), ("entry_count", count), ("nbytes", nbytes)):
        if arr.dtype.kind not in "iu":
            raise ValueError(f"{var} stored as {arr.dtype}, not integers (corrupted run)")
        if arr.size and arr.min() < 0 and var != "entry_start":
            raise ValueError(f"{var} holds the negative value {int(arr.min())} (corrupted run)")
    expect = -(-nbytes.astype(np.int64) // 128)
    for si, ai in zip(*np.nonzero((count != expect) | (nbytes < 0)), strict=True):
        raise ValueError(f"snapshot {si}, allocation {names[ai]!r}: {int(nbytes[si, ai])} bytes but "
                         f"{int(count[si, ai])} entries (corrupted run)")
    for si, ai in zip(*np.nonzero((count > 0) & ((start < 0) | (start + count > sectors.shape[-1]))), strict=True):
        raise ValueError(f"snapshot {si}, allocation {names[ai]!r}: entries {int(start[si, ai])}.."
                         f"{int(start[si, ai] + count[si, ai])} lie outside the {sectors.shape[-1]} recorded "
                         "(corrupted run)")
    bad = np.argwhere(sectors > SECTORS_PER_ENTRY)
    if bad.size:
        ci, e = bad[0]
        raise ValueError(f"entry {int(e)}: {int(sectors[ci, e])} sectors of {ds['compressor'].values[ci]} (at most "
                         f"{SECTORS_PER_ENTRY}; corrupted run)")


def _common_compressors(snapshots: Sequence[Snapshot]) -> list[str]:
    sets = [set(a.sectors) for s in snapshots for a in s.allocations]
    return sorted(set.intersection(*sets)) if sets else []


def save(snapshots: Iterable[Snapshot], path: str | os.PathLike, compressors: Sequence[str] = ("bpc32",),
         include_bytes: bool = False) -> Path:
    """Save a run's snapshots to one netCDF file (``.nc``) or zarr store (``.zarr``), compressed.

    The file holds one dataset (:func:`to_dataset`); it is written to a temporary name and moved
    into place, so a failure never leaves half a file behind.

    Parameters
    ----------
    snapshots : iterable of Snapshot
        The run.
    path : str or os.PathLike
        Ends in ``.nc`` or ``.zarr``; an existing file or store there is replaced.
    compressors, include_bytes
        As in :func:`to_dataset`: whose sectors to keep (computed where missing) and whether to keep the bytes.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        Another suffix, or what :func:`to_dataset` refuses.
    """
    path = Path(path)
    engine = _engine(path)
    ds = to_dataset(list(snapshots), compressors, include_bytes)
    tmp = Path(tempfile.mkdtemp(dir=path.parent or ".", prefix=f".{path.name}.")) / path.name
    try:
        if engine == "zarr":
            ds.to_zarr(tmp, mode="w", consolidated=False)
        else:
            ds.to_netcdf(tmp, engine="netcdf4", encoding=_netcdf_encoding(ds))
        if path.exists():
            _remove(path)
        os.replace(tmp, path)
    finally:
        _remove(tmp.parent)
    return path


def _netcdf_encoding(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """zlib for every array; text as fixed-width characters (netCDF's variable-length strings cost ~100 B each)."""
    enc: dict[str, dict[str, Any]] = {}
    for name, v in ds.variables.items():
        if v.dtype.kind in "OU":
            enc[name] = {"dtype": "S1", "zlib": True}
        elif v.ndim and v.size:
            enc[name] = {"zlib": True, "shuffle": v.dtype.itemsize > 1,
                         "chunksizes": tuple(min(n, 1 << 22) if d in ("entry", "byte") else n
                                             for d, n in zip(v.dims, v.shape, strict=True))}
    return enc


def load(path: str | os.PathLike) -> list[Snapshot]:
    """Snapshots saved by :func:`save`, in order.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.nc`` file or ``.zarr`` store.

    Returns
    -------
    list of Snapshot
        As :func:`from_dataset` gives them.

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        Another suffix, a file that is not a run in format :data:`FORMAT` (a result of ``buddy analyze --out``, a
        run saved before 2026-12 with one group per snapshot, which must be regenerated, another netCDF), or a
        corrupted run; the message starts with ``path``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    engine = _engine(path)
    with xr.open_dataset(path, engine=engine, **({"consolidated": False} if engine == "zarr" else {})) as ds:
        if ds.attrs.get("format") is None:
            raise ValueError(f"{path}: not a run saved by `buddy workloads run` (no format attribute: a result of "
                             "`buddy analyze --out`, a run saved before 2026-12 with one group per snapshot, which "
                             "must be regenerated, or another netCDF)")
        if ds.attrs.get("format") != FORMAT:
            raise ValueError(f"{path}: a run in format {ds.attrs.get('format')!r}, which this buddylib does not read "
                             f"(it reads {FORMAT!r})")
        missing = {"sectors", "entry_start", "entry_count", "nbytes", "kind", "dtype", "shape"} - set(ds.variables)
        if missing:
            raise ValueError(f"{path}: a run without {', '.join(sorted(missing))} (corrupted run)")
        try:
            return from_dataset(ds.load())
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def is_saved_run(path: str | os.PathLike) -> bool:
    """Whether ``path`` looks like a run :func:`save` wrote (a ``.nc`` file, or a zarr store marked as one).

    Parameters
    ----------
    path : str or os.PathLike
        Any path; a regular ``.nc`` file counts without being opened.

    Returns
    -------
    bool
        False for anything else, a missing path included.
    """
    path = Path(path)
    if path.suffix == ".nc":
        return path.is_file()  # a FIFO named like a run is refused by the readers, not opened here
    if not path.is_dir():
        return False
    import zarr

    try:
        return zarr.open_group(str(path), mode="r").attrs.get("format") == FORMAT
    except Exception:  # not a zarr group at all
        return False


def _engine(path: Path) -> str:
    if path.suffix == ".nc":
        return "netcdf4"
    if path.suffix == ".zarr":
        return "zarr"
    raise ValueError(f"{path}: snapshot files end in .nc (netCDF) or .zarr (zarr store)")


def _remove(p: Path) -> None:
    import shutil

    if p.is_dir():
        shutil.rmtree(p, ignore_errors=True)
    elif p.exists():
        p.unlink()


def snapshot_from_arrays(arrays: Mapping[str, Any], workload: str = "user", step: int = 0,
                         kinds: Mapping[str, str] | None = None) -> Snapshot:
    """A snapshot from ``{name: array}`` (numpy, dask, memory-mapped...).

    Parameters
    ----------
    arrays : mapping of str to array_like
        One allocation per array (:meth:`Allocation.from_array`), named by its key.
    workload : str
        The snapshot's workload.
    step : int
        The snapshot's step.
    kinds : mapping of str to str, optional
        An allocation's kind by name (:data:`KINDS`); ``other`` for those not given.

    Returns
    -------
    Snapshot

    Raises
    ------
    TypeError
        An array of text or Python objects.
    ValueError
        An empty array or an unknown kind.

    Examples
    --------
    >>> snap = snapshot_from_arrays({"w": np.ones((4, 64), np.float32)}, kinds={"w": "weights"})
    >>> snap.nbytes, snap.allocations[0].n_entries
    (1024, 8)
    """
    kinds = kinds or {}
    return Snapshot(workload, [Allocation.from_array(n, a, kinds.get(n, "other")) for n, a in arrays.items()],
                    step=step)
