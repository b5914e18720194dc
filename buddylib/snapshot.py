"""Allocations and snapshots: what a GPU holds at one moment of a run (SPEC §5, §7).

An *allocation* is one named buffer (a tensor, a field, an index array) with its kind,
dtype, shape and bytes. A *snapshot* is every live allocation of a workload at one point
of its run. Compressibility is a property of the bytes, so a snapshot either carries the
bytes or, to save disk, just the per-entry sector counts for each compressor (1 byte per
128-byte entry per compressor), which is all the layout and timing model need.

Snapshots are saved as one netCDF file or zarr store per run, one group per snapshot,
through xarray, so they open anywhere xarray does.
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

#: Kinds of allocation, for per-kind plots.
KINDS = ("weights", "half_weights", "gradients", "optimizer", "activations", "input", "field", "index", "other")


@dataclass
class Allocation:
    """One live buffer: name, kind, dtype, shape, size, and its bytes or sector counts.

    ``data`` is anything :func:`buddylib.entries.as_entries` reads (numpy or memory-mapped
    array, bytes) or a dask array; ``source`` optionally says where the bytes sit in a
    file, ``(path, offset)``, so distributed workers read them themselves. ``sectors``
    maps a compressor name to uint8 sectors per entry, when already computed or loaded.
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

        ``dtype``/``shape`` label raw bytes whose type numpy lacks (bfloat16, float8).
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
    """Every live allocation of ``workload`` at ``step`` (and wall/simulated ``time``)."""

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
        return sum(a.nbytes for a in self.allocations)

    def compute_sectors(self, compressors: Sequence[str], zero_flag: bool = True) -> Snapshot:
        """Fill every allocation's ``sectors`` for ``compressors`` (in place; returns self)."""
        from buddylib.compressors import get

        for a in self.allocations:
            for name in compressors:
                if name not in a.sectors:
                    if a.data is None:
                        raise ValueError(f"allocation {a.name!r} has neither bytes nor {name} sectors")
                    a.sectors[name] = get(name).sectors(np.asarray(a.data), zero_flag=zero_flag)
        return self

    def to_dataset(self, compressors: Sequence[str] | None = None, include_bytes: bool = False) -> xr.Dataset:
        """Per-entry sectors (and optionally bytes) plus allocation metadata, as a Dataset."""
        compressors = list(compressors if compressors is not None else _common_compressors(self))
        self.compute_sectors(compressors)
        counts = np.array([a.n_entries for a in self.allocations], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        sectors = np.stack([np.concatenate([a.sectors[c] for a in self.allocations]) for c in compressors]) \
            if compressors else np.zeros((0, int(counts.sum())), np.uint8)
        ds = xr.Dataset(
            {
                "sectors": (("compressor", "entry"), sectors.astype(np.uint8),
                            {"units": "sectors", "description": "32-byte sectors per 128-byte entry"}),
                "entry_start": ("allocation", starts),
                "entry_count": ("allocation", counts),
                "nbytes": ("allocation", np.array([a.nbytes for a in self.allocations], np.int64),
                           {"units": "bytes"}),
                "kind": ("allocation", np.array([a.kind for a in self.allocations], dtype=object)),
                "dtype": ("allocation", np.array([a.dtype for a in self.allocations], dtype=object)),
                "shape": ("allocation", np.array([",".join(map(str, a.shape)) for a in self.allocations],
                                                 dtype=object)),
            },
            coords={"allocation": [a.name for a in self.allocations], "compressor": compressors},
            attrs={"workload": self.workload, "step": int(self.step), "time": float(self.time)},
        )
        refs = sorted(set.intersection(*(set(a.reference_bytes) for a in self.allocations))) \
            if self.allocations else []
        if refs:
            ds["reference_bytes"] = (("allocation", "reference"),
                                     np.array([[a.reference_bytes[r] for r in refs] for a in self.allocations],
                                              np.int64), {"units": "bytes",
                                                          "description": "whole-allocation zstd-1 / lz4 size"})
            ds = ds.assign_coords(reference=refs)
        if include_bytes:
            from buddylib.entries import as_entries

            raw = [as_entries(np.asarray(a.data)).reshape(-1)[: a.nbytes] for a in self.allocations]
            ds["bytes"] = ("byte", np.concatenate(raw) if raw else np.zeros(0, np.uint8))
            ds["byte_start"] = ("allocation", np.concatenate([[0], np.cumsum([a.nbytes for a in
                                                                             self.allocations])[:-1]]))
        return ds

    @classmethod
    def from_dataset(cls, ds: xr.Dataset) -> Snapshot:
        """Inverse of :meth:`to_dataset`."""
        allocations = []
        comps = [str(c) for c in ds["compressor"].values]
        for i, name in enumerate(ds["allocation"].values):
            start, count = int(ds["entry_start"][i]), int(ds["entry_count"][i])
            shape = tuple(int(s) for s in str(ds["shape"].values[i]).split(",") if s)
            data = None
            if "bytes" in ds:
                b0 = int(ds["byte_start"][i])
                data = np.asarray(ds["bytes"][b0:b0 + int(ds["nbytes"][i])].values, dtype=np.uint8)
            allocations.append(Allocation(
                name=str(name), data=data, kind=str(ds["kind"].values[i]), dtype=str(ds["dtype"].values[i]),
                shape=shape, nbytes=int(ds["nbytes"][i]),
                sectors={c: np.asarray(ds["sectors"].sel(compressor=c).values[start:start + count])
                         for c in comps},
                reference_bytes={str(r): int(ds["reference_bytes"].values[i, j])
                                 for j, r in enumerate(ds["reference"].values)} if "reference_bytes" in ds else {}))
        return cls(workload=str(ds.attrs["workload"]), allocations=allocations, step=int(ds.attrs["step"]),
                   time=float(ds.attrs["time"]))


def _common_compressors(snapshot: Snapshot) -> list[str]:
    sets = [set(a.sectors) for a in snapshot.allocations]
    return sorted(set.intersection(*sets)) if sets else []


def save(snapshots: Iterable[Snapshot], path: str | os.PathLike, compressors: Sequence[str] = ("bpc32",),
         include_bytes: bool = False) -> Path:
    """Save a run's snapshots to one netCDF file (``.nc``) or zarr store (``.zarr``).

    Each snapshot is a group ``snapshot_000``, ``snapshot_001``...; the file is written to a
    temporary name and moved into place, so a failure never leaves half a file behind.
    """
    path = Path(path)
    engine = _engine(path)
    snapshots = list(snapshots)
    tmp = Path(tempfile.mkdtemp(dir=path.parent or ".", prefix=f".{path.name}.")) / path.name
    try:
        for i, snap in enumerate(snapshots):
            ds = snap.to_dataset(compressors, include_bytes)
            group = f"snapshot_{i:03d}"
            if engine == "zarr":
                ds.to_zarr(tmp, group=group, mode="a" if i else "w", consolidated=False)
            else:
                ds.to_netcdf(tmp, group=group, mode="a" if i else "w", engine="netcdf4")
        if path.exists():
            _remove(path)
        os.replace(tmp, path)
    finally:
        _remove(tmp.parent)
    return path


def load(path: str | os.PathLike) -> list[Snapshot]:
    """Snapshots saved by :func:`save`, in order."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    engine = _engine(path)
    groups = _groups(path, engine)
    out = []
    for g in groups:
        with xr.open_dataset(path, group=g, engine=engine, **({"consolidated": False} if engine == "zarr"
                                                               else {})) as ds:
            out.append(Snapshot.from_dataset(ds.load()))
    return out


def _engine(path: Path) -> str:
    if path.suffix == ".nc":
        return "netcdf4"
    if path.suffix == ".zarr":
        return "zarr"
    raise ValueError(f"{path}: snapshot files end in .nc (netCDF) or .zarr (zarr store)")


def _groups(path: Path, engine: str) -> list[str]:
    if engine == "zarr":
        import zarr

        names = sorted(k for k, _ in zarr.open_group(str(path), mode="r").groups())
    else:
        import netCDF4

        with netCDF4.Dataset(path) as nc:
            names = sorted(nc.groups)
    return [n for n in names if n.startswith("snapshot_")]


def _remove(p: Path) -> None:
    import shutil

    if p.is_dir():
        shutil.rmtree(p, ignore_errors=True)
    elif p.exists():
        p.unlink()


def snapshot_from_arrays(arrays: Mapping[str, Any], workload: str = "user", step: int = 0,
                         kinds: Mapping[str, str] | None = None) -> Snapshot:
    """A snapshot from ``{name: array}`` (numpy, dask, memory-mapped...)."""
    kinds = kinds or {}
    return Snapshot(workload, [Allocation.from_array(n, a, kinds.get(n, "other")) for n, a in arrays.items()],
                    step=step)
