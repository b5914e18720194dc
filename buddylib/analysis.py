"""Snapshots → labelled capacity results (xarray), serially or chunk by chunk on dask.

The one expensive step is compressing every entry; its result, per allocation and
compressor, is a 5-bin **sector histogram** (entries taking 0..4 sectors), optionally
weighted by accesses. Histograms add over chunks, so the dask path compresses chunks in
parallel and sums them, giving exactly the serial result. Everything else — ideal ratio,
overflow per target, the placement policy's choice, device/buddy bytes, effective ratio,
buddy-access fraction — is derived from the histograms with named dimensions
(``snapshot, allocation, compressor, threshold, target``) and units in ``attrs``, so
notebooks only select and plot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numba
import numpy as np
import pandas as pd
import xarray as xr
from tqdm import tqdm

from buddylib import layout, regions
from buddylib.compressors import DEFAULT_COMPRESSORS
from buddylib.compressors import get as get_compressor
from buddylib.compressors import names as compressor_names
from buddylib.entries import ENTRY_BYTES, SECTOR_BYTES, SECTORS_PER_ENTRY, _as_byte_array, as_entries
from buddylib.snapshot import Allocation, Snapshot, snapshot_from_arrays
from buddylib.threads import numba_threads

MiB = 1 << 20
CHUNK_BYTES = 64 * MiB
#: Marks a result of :func:`analyze` (``attrs["source"]``), so ``--out`` knows what it may replace.
RESULT_SOURCE = "buddylib.analysis.analyze"


def as_snapshots(data: Any) -> list[Snapshot]:
    """Snapshots from a Snapshot, a list of them, ``{name: array}``, Allocations or one array.

    Parameters
    ----------
    data : Snapshot, list of Snapshot, dict of str to array, list of Allocation, or array
        ``{name: array}`` and a list of allocations make one snapshot (workload ``user``); one array makes a
        snapshot of one allocation, ``data``.

    Returns
    -------
    list of Snapshot

    Raises
    ------
    ValueError
        An empty mapping, or an empty array.
    TypeError
        An array of text or Python objects.

    Examples
    --------
    >>> [a.name for s in as_snapshots(np.zeros(64)) for a in s.allocations]
    ['data']
    """
    if isinstance(data, Snapshot):
        return [data]
    if isinstance(data, Mapping):
        if not data:
            raise ValueError("nothing to analyse: no arrays given")
        return [snapshot_from_arrays(data)]
    if isinstance(data, Sequence) and data and all(isinstance(d, Snapshot) for d in data):
        return list(data)
    if isinstance(data, Sequence) and data and all(isinstance(d, Allocation) for d in data):
        return [Snapshot("user", list(data))]
    return [snapshot_from_arrays({"data": data})]


# ---------------------------------------------------------------------------------------
# the expensive part: sector histograms
# ---------------------------------------------------------------------------------------


def _hist_of_bytes(flat: np.ndarray, compressors: Sequence[str], zero_flag: bool,
                   weights: np.ndarray | None = None, threads: int | None = None,
                   region: int | None = None) -> np.ndarray:
    """(compressors, 2, 5): entry counts and access-weighted counts per sector value; with ``region`` the same
    per aligned region of the chunk (it starts on one): ``(regions, compressors, 2, 5)``.

    ``threads``: numba threads for this call (a dask worker's share), restored after it.
    """
    entries = as_entries(flat)
    n = 1 if region is None else -(-entries.shape[0] // (region // ENTRY_BYTES))
    out = np.zeros((n, len(compressors), 2, SECTORS_PER_ENTRY + 1))
    with numba_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)) if threads else None):
        for i, name in enumerate(compressors):
            s = get_compressor(name).sectors(entries, zero_flag=zero_flag)
            if region is None:
                out[0, i, 0] = layout.sector_histogram(s)
                out[0, i, 1] = out[0, i, 0] if weights is None else layout.sector_histogram(s, weights)
            else:
                out[:, i, 0] = regions.histograms(s, region)
                out[:, i, 1] = out[:, i, 0] if weights is None else regions.histograms(s, region, weights)
    return out if region is not None else out[0]


def _hist_of_sectors(sectors: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    counts = layout.sector_histogram(sectors)
    return np.stack([counts, counts if weights is None else layout.sector_histogram(sectors, weights)])


def _hist_of_file_range(path: str, offset: int, length: int, compressors: Sequence[str], zero_flag: bool,
                        weights: np.ndarray | None, threads: int | None, region: int | None = None) -> np.ndarray:
    """Histogram of ``length`` bytes at ``offset`` of ``path``, read by whoever runs it."""
    flat = np.memmap(path, dtype=np.uint8, mode="r", offset=offset, shape=(length,))
    return _hist_of_bytes(flat, compressors, zero_flag, weights, threads, region)


def _chunks(nbytes: int, chunk_bytes: int) -> list[tuple[int, int]]:
    step = max(ENTRY_BYTES, chunk_bytes // ENTRY_BYTES * ENTRY_BYTES)
    return [(lo, min(nbytes, lo + step)) for lo in range(0, nbytes, step)]


def _weights_slice(weights: np.ndarray | None, lo: int, hi: int) -> np.ndarray | None:
    if weights is None:
        return None
    return weights[lo // ENTRY_BYTES: -(-hi // ENTRY_BYTES)]


def sector_histograms(snapshots: Sequence[Snapshot], compressors: Sequence[str] = DEFAULT_COMPRESSORS,
                      zero_flag: bool = True, access: Mapping[str, np.ndarray] | None = None,
                      client: Any = None, chunk_bytes: int = CHUNK_BYTES, progress: bool | None = None,
                      worker_threads: int = 1) -> xr.DataArray:
    """Entries per sector count: ``(snapshot, allocation, compressor, weighting, sectors)``.

    Chunk by chunk; with ``client`` or dask-array data, the chunks run as dask tasks and their histograms add up
    to the serial result. Allocations that already hold every compressor's sectors (a loaded run) are not
    compressed again.

    Parameters
    ----------
    snapshots : sequence of Snapshot
        The run.
    compressors : sequence of str
        Compressor names (:func:`check_compressors`).
    zero_flag : bool
        Whether an all-zero entry takes no sectors (a flag in its metadata).
    access : mapping of str to numpy.ndarray, optional
        Accesses per entry of the named allocations: finite, >= 0, one per entry.
    client : dask.distributed.Client, optional
        A dask cluster to compress on.
    chunk_bytes, progress, worker_threads
        Chunk size, a progress bar (None: where there are 256 MiB or more), numba threads per dask task.

    Returns
    -------
    xarray.DataArray
        ``sector_count``; ``weighting`` is ``entries`` (plain counts) or ``accesses`` (weighted by
        ``access[name]``; equal to ``entries`` where no weights are given). Zeros where a snapshot lacks an
        allocation.

    Raises
    ------
    ValueError
        An unknown or repeated compressor, access weights that do not fit, or an allocation with neither bytes
        nor sectors.
    """
    compressors = check_compressors(compressors)
    names = _allocation_names(snapshots)
    index = {n: i for i, n in enumerate(names)}
    hist = np.zeros((len(snapshots), len(names), len(compressors), 2, SECTORS_PER_ENTRY + 1))
    access = dict(access or {})
    jobs: list[tuple[tuple[int, int], Any]] = []  # (snapshot, allocation) -> a task or a result
    total = sum(a.nbytes for s in snapshots for a in s.allocations)
    show = progress if progress is not None else total >= 256 * MiB
    bar = tqdm(total=total, unit="B", unit_scale=True, desc="compress", disable=not show or client is not None)
    for si, snap in enumerate(snapshots):
        for alloc in snap.allocations:
            ai = index[alloc.name]
            w = _check_weights(alloc, access.get(alloc.name))
            have = [c for c in compressors if c in alloc.sectors]
            if len(have) == len(compressors):  # sectors already known (loaded snapshot)
                for ci, c in enumerate(compressors):
                    hist[si, ai, ci] = _hist_of_sectors(alloc.sectors[c], w)
                bar.update(alloc.nbytes)
                continue
            if alloc.data is None:
                raise ValueError(f"allocation {alloc.name!r} has no bytes and no sectors for "
                                 f"{', '.join(c for c in compressors if c not in have)}")
            if client is not None or _is_dask(alloc.data):
                jobs.extend(((si, ai), t) for _, t in _dask_tasks(alloc, compressors, zero_flag, w, chunk_bytes,
                                                               worker_threads if client is not None else None))
                continue
            flat = _as_byte_array(alloc.data, alloc.name)
            for lo, hi in _chunks(alloc.nbytes, chunk_bytes):
                hist[si, ai] += _hist_of_bytes(flat[lo:hi], compressors, zero_flag, _weights_slice(w, lo, hi))
                bar.update(hi - lo)
    bar.close()
    if jobs:
        for (si, ai), h in zip((k for k, _ in jobs), _run_dask([t for _, t in jobs], client, progress),
                               strict=True):
            hist[si, ai] += h
    return _histogram_array(hist, names, compressors)


def _histogram_array(hist: np.ndarray, names: Sequence[str], compressors: Sequence[str]) -> xr.DataArray:
    """``hist[snapshot, allocation, compressor, weighting, sectors]`` labelled: :func:`sector_histograms`'
    result."""
    return xr.DataArray(
        hist, dims=("snapshot", "allocation", "compressor", "weighting", "sectors"),
        coords={"snapshot": np.arange(hist.shape[0]), "allocation": list(names), "compressor": list(compressors),
                "weighting": ["entries", "accesses"], "sectors": layout.SECTOR_VALUES},
        name="sector_count", attrs={"units": "entries", "description": "entries per sector count"})


def _is_dask(x: Any) -> bool:
    return type(x).__module__.startswith("dask")


def _dask_tasks(alloc: Allocation, compressors: Sequence[str], zero_flag: bool, w: np.ndarray | None,
                chunk_bytes: int, threads: int | None, region: int | None = None) -> list[tuple[int, Any]]:
    """One dask task per chunk of ``alloc`` (whole regions of ``region`` bytes each, where given), with the
    chunk's first byte: ``[(offset, task)]``."""
    import dask

    hist = dask.delayed(_hist_of_bytes, pure=True)
    if alloc.source is not None:
        path, offset = alloc.source
        from_file = dask.delayed(_hist_of_file_range, pure=True)
        return [(lo, from_file(path, offset + lo, hi - lo, tuple(compressors), zero_flag, _weights_slice(w, lo, hi),
                               threads, region)) for lo, hi in _chunks(alloc.nbytes, chunk_bytes)]
    if _is_dask(alloc.data):
        x = alloc.data.reshape(-1)
        per = int(np.lcm(x.dtype.itemsize, region or ENTRY_BYTES)) // x.dtype.itemsize
        elems = max(per, chunk_bytes // x.dtype.itemsize // per * per)
        blocks = x.rechunk(elems).to_delayed().ravel()
        out, lo = [], 0
        for b, n in zip(blocks, x.rechunk(elems).chunks[0], strict=True):
            hi = lo + n * x.dtype.itemsize
            out.append((lo, hist(dask.delayed(_as_bytes_task)(b), tuple(compressors), zero_flag,
                                 _weights_slice(w, lo, hi), threads, region)))
            lo = hi
        return out
    flat = _as_byte_array(alloc.data, alloc.name)
    return [(lo, hist(flat[lo:hi], tuple(compressors), zero_flag, _weights_slice(w, lo, hi), threads, region))
            for lo, hi in _chunks(alloc.nbytes, chunk_bytes)]


def _as_bytes_task(block: np.ndarray) -> np.ndarray:
    return _as_byte_array(block, "block")


def _run_dask(tasks: list[Any], client: Any, progress: bool | None) -> list[np.ndarray]:
    import dask

    if client is None:
        return list(dask.compute(*tasks))
    futures = client.compute(tasks)
    if progress:
        from distributed import as_completed

        for _ in tqdm(as_completed(futures), total=len(futures), desc="compress (dask)", unit="chunk"):
            pass
    return client.gather(futures)


def _allocation_names(snapshots: Sequence[Snapshot]) -> list[str]:
    """Every allocation's name, in order of first appearance over the snapshots."""
    return list(dict.fromkeys(a.name for s in snapshots for a in s.allocations))


def check_compressors(compressors: Sequence[str] | str) -> list[str]:
    """Compressor names as a list.

    Parameters
    ----------
    compressors : str or sequence of str
        Names among :func:`buddylib.compressors.names`.

    Returns
    -------
    list of str
        In the order given.

    Raises
    ------
    ValueError
        None given, an unknown one or one given twice.
    """
    compressors = [compressors] if isinstance(compressors, str) else list(compressors)
    if not compressors:
        raise ValueError("compressors: at least one is needed; available: " + ", ".join(compressor_names()))
    for i, c in enumerate(compressors):
        if c not in compressor_names():
            raise ValueError(f"unknown compressor {c!r}; available: {', '.join(compressor_names())}")
        if c in compressors[:i]:
            raise ValueError(f"compressor {c!r} is given twice")
    return compressors


def _check_weights(alloc: Allocation, w: np.ndarray | None) -> np.ndarray | None:
    if w is None:
        return None
    w = np.asarray(w, dtype=float).reshape(-1)
    if w.size != alloc.n_entries:
        raise ValueError(f"access weights for {alloc.name!r}: {w.size} values for {alloc.n_entries} entries")
    if not np.all(np.isfinite(w)) or (w < 0).any():
        raise ValueError(f"access weights for {alloc.name!r} must be finite and >= 0")
    return w


# ---------------------------------------------------------------------------------------
# the cheap part: layout and policy on histograms
# ---------------------------------------------------------------------------------------


def analyze(data: Any, compressors: Sequence[str] = DEFAULT_COMPRESSORS,
            thresholds: Sequence[float] | float = layout.DEFAULT_THRESHOLD,
            targets: Sequence[float] = layout.TARGETS, policy: str = "profile", zero_flag: bool = True,
            access: Mapping[str, np.ndarray] | None = None, client: Any = None,
            chunk_bytes: int = CHUNK_BYTES, progress: bool | None = None, worker_threads: int = 1,
            region: int | str | None = None, rule: str = "budget") -> xr.Dataset:
    """Buddy Compression capacity results for ``data`` (SPEC §3) as an ``xarray.Dataset``.

    Parameters
    ----------
    data : Snapshot, list of Snapshot, dict of str to array, or array
        A snapshot or a run (a list of them), ``{name: array}`` (each array an allocation), or one array.
    compressors : sequence of str
        Compressor names (:func:`buddylib.compressors.names`); the first drives the layout.
    thresholds : float or sequence of float
        Buddy thresholds: the largest share of an allocation's entries allowed to overflow.
    targets : sequence of float
        Target ratios the policy may choose (:data:`buddylib.layout.TARGETS`; 8 and 16 extend them).
    policy : {"profile", "global", "oracle"}
        ``profile``: per allocation, the most aggressive target whose overflow stays within the threshold in every
        snapshot; ``global``: one target for all allocations, chosen the same way on their total; ``oracle``: per
        allocation and snapshot, knowing that snapshot (an upper bound).
    zero_flag : bool
        Whether an all-zero entry takes no sectors (a flag in its metadata).
    access, client
        Accesses per entry of each allocation (weighing the buddy-access fraction); a dask cluster to compress on.
    chunk_bytes, progress, worker_threads
        Chunk size, a progress bar (None: where it takes long), numba threads per task.
    region : int or str, optional
        One target per allocation (``None`` or ``"allocation"``, the paper's) or per aligned region of that size
        (``"64KiB"``, a power of two from 4 KiB).
    rule : {"budget", "traffic", "naive"}
        How an allocation's regions share its overflow budget (:data:`buddylib.regions.RULES`).

    Returns
    -------
    xarray.Dataset
        Dims ``snapshot``, ``allocation``, ``compressor``, ``threshold``, ``sectors``: the sector histograms, the
        ideal ratio, the chosen target and overflow, device, buddy and metadata bytes, the effective ratio and the
        buddy-access fraction, per allocation and in total, with units in ``attrs``. With ``region``,
        ``chosen_target`` is the allocation's bytes over its device bytes, its regions' targets together.

    Raises
    ------
    ValueError
        An unknown compressor, policy or rule, a threshold outside [0, 1], a target not offered, a region that is
        not a power of two from 4 KiB, or snapshots that hold no allocation.

    Examples
    --------
    >>> import numpy as np
    >>> ds = analyze({"x": np.zeros(1024, np.float32), "y": np.arange(1024, dtype=np.int32)},
    ...              compressors=["bpc32"])
    >>> float(ds.effective_ratio.sel(compressor="bpc32", threshold=0.3).item())
    3.9384615384615387
    """
    compressors = check_compressors(compressors)
    thresholds = layout.check_threshold(thresholds)
    targets = layout.check_targets(targets)
    if policy not in layout.POLICIES:
        raise ValueError(f"unknown policy {policy!r}; available: {', '.join(layout.POLICIES)}")
    size = regions.region_bytes(region)
    regions.check_rule(rule)
    snapshots = as_snapshots(data)
    if not any(s.allocations for s in snapshots):
        raise ValueError("nothing to analyse: the snapshots hold no allocations")
    if size is None:
        hist = sector_histograms(snapshots, compressors, zero_flag, access, client, chunk_bytes, progress,
                                 worker_threads)
        return summarize(hist, snapshots, thresholds, targets, policy, zero_flag)
    # targets per region for the layout's compressor (the first) alone: the others' per-region arrays would hold
    # (regions x 10) numbers each and decide nothing shown (their ideal ratios need only their histograms)
    per_region = region_histograms(snapshots, compressors[:1], size, zero_flag, access, progress, client,
                                   max(chunk_bytes, size), worker_threads)
    hist = _total_of_regions(per_region, compressors[:1])
    if len(compressors) > 1:
        rest = sector_histograms(snapshots, compressors[1:], zero_flag, access, client, chunk_bytes, progress,
                                 worker_threads)
        hist = xr.concat([hist, rest], "compressor")
    return summarize(hist, snapshots, thresholds, targets, policy, zero_flag, (size, rule, per_region))


def region_histograms(snapshots: Sequence[Snapshot], compressors: Sequence[str], region: int,
                      zero_flag: bool = True, access: Mapping[str, np.ndarray] | None = None,
                      progress: bool | None = None, client: Any = None, chunk_bytes: int = CHUNK_BYTES,
                      worker_threads: int = 1) -> dict[str, np.ndarray]:
    """Entries per sector count in each aligned ``region``-byte region of every allocation.

    Chunk by chunk (whole regions each); with ``client`` or dask-array data, the chunks to compress run as dask
    tasks.

    Parameters
    ----------
    snapshots : sequence of Snapshot
        The run.
    compressors : sequence of str
        Compressor names (:func:`check_compressors`).
    region : int
        Region bytes (:func:`buddylib.regions.region_bytes`).
    zero_flag, access, progress, client, chunk_bytes, worker_threads
        As in :func:`sector_histograms`; a chunk holds at least one region.

    Returns
    -------
    dict of str to numpy.ndarray
        ``{name: [snapshot, region, compressor, weighting, 5]}``, weighting as in :func:`sector_histograms`;
        zeros where a snapshot lacks the allocation or its region.

    Raises
    ------
    ValueError
        As :func:`sector_histograms` raises.
    """
    compressors = check_compressors(compressors)
    names = _allocation_names(snapshots)
    per = region // ENTRY_BYTES
    size = {n: max(-(-a.n_entries // per) for s in snapshots for a in s.allocations if a.name == n) for n in names}
    out = {n: np.zeros((len(snapshots), size[n], len(compressors), 2, SECTORS_PER_ENTRY + 1)) for n in names}
    access = dict(access or {})
    total = sum(a.nbytes for s in snapshots for a in s.allocations)
    show = progress if progress is not None else total >= 256 * MiB
    step = max(chunk_bytes, region) // region * region
    jobs: list[tuple[tuple[str, int, int], Any]] = []  # (name, snapshot, first region) -> a task
    with tqdm(total=total, unit="B", unit_scale=True, desc="compress", disable=not show or client is not None) as bar:
        for si, snap in enumerate(snapshots):
            for alloc in snap.allocations:
                w = _check_weights(alloc, access.get(alloc.name))
                known = all(c in alloc.sectors for c in compressors)
                if not known and alloc.data is None:
                    raise ValueError(f"allocation {alloc.name!r} has no bytes and no sectors for "
                                     f"{', '.join(c for c in compressors if c not in alloc.sectors)}")
                if not known and (client is not None or _is_dask(alloc.data)):
                    jobs.extend(((alloc.name, si, lo // region), t) for lo, t in _dask_tasks(
                        alloc, compressors, zero_flag, w, step, worker_threads if client else None, region))
                    continue
                flat = None if known else _as_byte_array(alloc.data, alloc.name)
                for lo, hi in _chunks(alloc.nbytes, step):
                    first, last = lo // ENTRY_BYTES, -(-hi // ENTRY_BYTES)
                    if known:
                        h = np.stack([np.stack([regions.histograms(alloc.sectors[c][first:last], region),
                                                regions.histograms(alloc.sectors[c][first:last], region,
                                                                   None if w is None else w[first:last])], 1)
                                      for c in compressors], 1)
                    else:
                        h = _hist_of_bytes(flat[lo:hi], compressors, zero_flag, _weights_slice(w, lo, hi),
                                           region=region)
                    out[alloc.name][si, first // per:first // per + h.shape[0]] += h
                    bar.update(hi - lo)
    if jobs:
        for (name, si, r0), h in zip((k for k, _ in jobs), _run_dask([t for _, t in jobs], client, progress),
                                     strict=True):
            out[name][si, r0:r0 + h.shape[0]] += h
    return out


def _total_of_regions(per_region: Mapping[str, np.ndarray], compressors: Sequence[str]) -> xr.DataArray:
    """The allocations' histograms, :func:`sector_histograms`' array, as the sums of their regions'."""
    names = list(per_region)
    return _histogram_array(np.stack([per_region[n].sum(1) for n in names], axis=1), names, compressors)


def analyze_histograms(counts: xr.DataArray, snapshots: Sequence[Snapshot],
                       thresholds: Sequence[float] | float = layout.DEFAULT_THRESHOLD,
                       targets: Sequence[float] = layout.TARGETS, policy: str = "profile",
                       zero_flag: bool = True, region: int | str | None = None, rule: str = "budget",
                       region_counts: Mapping[str, np.ndarray] | None = None) -> xr.Dataset:
    """:func:`analyze` of a run kept only as sector histograms (e.g. a committed summary of a run too large
    to keep per entry).

    Without an access profile, accesses weigh like entries, as in :func:`analyze`.

    Parameters
    ----------
    counts : xarray.DataArray
        Entries per sector count, dims ``(snapshot, allocation, compressor, sectors)``.
    snapshots : sequence of Snapshot
        Each allocation's kind, dtype and bytes (their ``data`` and ``sectors`` are not read).
    thresholds, targets, policy, zero_flag, region, rule
        As in :func:`analyze`.
    region_counts : mapping of str to numpy.ndarray, optional
        With ``region``: each allocation's histograms per region of that size,
        ``{name: [snapshot, region, compressor, sectors]}``.

    Returns
    -------
    xarray.Dataset
        As :func:`analyze` returns it.

    Raises
    ------
    ValueError
        An unsupported threshold, target, policy, region or rule; histograms without 5 bins or with negative
        counts; with ``region``, an allocation without region histograms or with ones that do not add up to its
        histogram.

    Examples
    --------
    >>> import numpy as np
    >>> run = {"x": np.zeros(1024, np.float32), "y": np.arange(1024, dtype=np.int32)}
    >>> full = analyze(run, compressors=["bpc32"])
    >>> again = analyze_histograms(full.sector_count, as_snapshots(run))
    >>> bool((again.effective_ratio == full.effective_ratio).all())
    True
    """
    thresholds = layout.check_threshold(thresholds)
    targets = layout.check_targets(targets)
    if policy not in layout.POLICIES:
        raise ValueError(f"unknown policy {policy!r}; available: {', '.join(layout.POLICIES)}")
    counts = counts.transpose("snapshot", "allocation", "compressor", "sectors")
    if counts.sizes["sectors"] != SECTORS_PER_ENTRY + 1 or (counts < 0).any():
        raise ValueError(f"sector histograms count entries taking 0..{SECTORS_PER_ENTRY} sectors, >= 0 each")
    hist = xr.concat([counts, counts], "weighting").transpose(*counts.dims[:-1], "weighting", "sectors")
    hist = hist.assign_coords(weighting=["entries", "accesses"], sectors=layout.SECTOR_VALUES,
                              snapshot=np.arange(counts.sizes["snapshot"])).astype(float)
    size = regions.region_bytes(region)
    if size is None:
        return summarize(hist, list(snapshots), thresholds, targets, policy, zero_flag)
    regions.check_rule(rule)
    names = [str(n) for n in counts.allocation.values]
    if region_counts is None or set(names) - set(region_counts):
        raise ValueError(f"targets per {regions.label(size)} region need every allocation's region histograms")
    per_region = {n: np.stack([region_counts[n]] * 2, axis=3) for n in names}
    for n in names:
        if not np.array_equal(per_region[n][:, :, :, 0].sum(1), counts.sel(allocation=n).values):
            raise ValueError(f"allocation {n!r}: its region histograms do not add up to its histogram")
    return summarize(hist, list(snapshots), thresholds, targets, policy, zero_flag, (size, rule, per_region))


def summarize(hist: xr.DataArray, snapshots: Sequence[Snapshot], thresholds: np.ndarray, targets: np.ndarray,
              policy: str = "profile", zero_flag: bool = True,
              by_region: tuple[int, str, Mapping[str, np.ndarray]] | None = None) -> xr.Dataset:
    """All capacity results (:func:`analyze`'s Dataset) derived from sector histograms, :func:`sector_histograms`'.

    Parameters
    ----------
    hist, snapshots, thresholds, targets, policy, zero_flag, by_region
        As :func:`analyze` passes them; ``by_region``: region size, rule, :func:`region_histograms`' result, or None."""
    names = list(hist.allocation.values)
    meta = _allocation_table(snapshots, names)
    counts = hist.sel(weighting="entries", drop=True).astype(np.int64)
    n_entries = counts.sum("sectors")
    nbytes = meta["nbytes"]
    stored = (counts * hist.sectors).sum("sectors") * SECTOR_BYTES
    place = _placement(hist, counts, n_entries, thresholds, targets, policy)
    if by_region is not None:
        place |= _region_placement(by_region, counts, n_entries, thresholds, targets, policy)
    chosen = place["chosen_target"]
    # the layout's bytes per allocation at its chosen target; none where the allocation is absent
    device = xr.apply_ufunc(layout.device_bytes, n_entries, chosen).where(n_entries > 0, 0)
    buddy = xr.apply_ufunc(layout.buddy_bytes, n_entries, chosen).where(n_entries > 0, 0)
    size, rule = (by_region[0], by_region[1]) if by_region is not None else (None, "")
    entries0 = n_entries.isel(compressor=0, drop=True)
    metadata = (xr.apply_ufunc(layout.metadata_bytes, entries0)
                + xr.apply_ufunc(regions.metadata_bytes, entries0, kwargs={"region": size, "targets": targets}))
    accesses = hist.sel(weighting="accesses", drop=True).sum("sectors")
    total_bytes = nbytes.sum("allocation")
    variables = {
        "allocation_bytes": (nbytes, "bytes", "size of the allocation (0 where absent from the snapshot)"),
        "entries": (n_entries.isel(compressor=0, drop=True), "entries", "128-byte entries (tail zero-padded)"),
        "sector_count": (counts, "entries", "entries per compressed size in 32-byte sectors"),
        "ideal_ratio": (_ratio(nbytes, stored), "1",
                        "bytes / (32 B x sectors): capacity gain without placement constraints"),
        "overflow_fraction": (place["overflow_fraction"], "1",
                              "share of entries exceeding the device share at each target"),
        "chosen_target": (chosen, "1", f"target compression ratio chosen by the {policy} policy" + (
            f" (targets per {regions.label(size)} region, {rule} rule: bytes / device bytes)" if size else "")),
        "overflow": (_ratio(place["overflow_entries"], n_entries), "1",
                     "share of entries that overflow to buddy memory at the chosen target"),
        "device_bytes": (device, "bytes", "device memory reserved: entries x 128 B / target"),
        "buddy_bytes": (buddy, "bytes", "buddy memory reserved: entries x (128 B - 128 B / target)"),
        "buddy_bytes_used": (place["buddy_bytes_used"], "bytes",
                             "bytes actually stored in buddy memory (overflowing sectors)"),
        "metadata_bytes": (metadata, "bytes", "device memory for 4-bit per-entry metadata (and, with targets "
                           "per region, each region's target)"),
        "effective_ratio": (_ratio(total_bytes, device.sum("allocation", skipna=False) + metadata.sum("allocation")),
                            "1",
                            "capacity expansion: bytes / (device bytes + metadata bytes)"),
        "tiered_bytes": (place["tiered_entries"] * ENTRY_BYTES, "bytes",
                         "bytes of the entries that keep more of their code in buddy memory than on the device: "
                         "buddy memory as a tier, not compression"),
        "effective_ratio_untiered": (_ratio(total_bytes, device.sum("allocation", skipna=False)
                                            + metadata.sum("allocation")
                                            + place["tiered_buddy_bytes"].sum("allocation", skipna=False)), "1",
                                     "the effective ratio with the buddy bytes of tiered entries counted as device "
                                     "bytes: what compression alone gives"),
        "ideal_ratio_total": (_ratio(total_bytes, stored.sum("allocation")), "1",
                              "snapshot bytes / (32 B x all sectors)"),
        "buddy_access_fraction": (_ratio(place["overflow_accesses"].sum("allocation", skipna=False),
                                         accesses.sum("allocation")),
                                  "1", "share of accesses (of entries, without an access profile) that hit "
                                  "overflowing entries"),
    }
    ds = xr.Dataset()
    for name, (da, units, desc) in variables.items():
        ds[name] = da.drop_vars("weighting", errors="ignore")
        ds[name].attrs.update(units=units, description=desc)
    ds = _add_references(ds, snapshots, names, hist.snapshot.values, nbytes, total_bytes)
    ds = ds.assign_coords(kind=("allocation", meta["kind"]), dtype=("allocation", meta["dtype"]),
                          step=("snapshot", [int(s.step) for s in snapshots]),
                          workload=("snapshot", [s.workload for s in snapshots]))
    ds.threshold.attrs.update(units="1", description="buddy threshold: largest accepted overflow fraction")
    ds.target.attrs.update(units="1", description="target compression ratio r (device share 128/r bytes)")
    ds.attrs.update(policy=policy, zero_flag=int(zero_flag), entry_bytes=ENTRY_BYTES, sector_bytes=SECTOR_BYTES,
                    metadata_bits_per_entry=layout.METADATA_BITS_PER_ENTRY,
                    region=regions.label(size), region_bytes=size or 0, rule=rule,
                    region_target_bits=regions.target_bits(targets) if size else 0,
                    source=f"{RESULT_SOURCE} (SPEC §3)")
    return ds


def _placement(hist: xr.DataArray, counts: xr.DataArray, n_entries: xr.DataArray, thresholds: np.ndarray,
               targets: np.ndarray, policy: str) -> dict[str, xr.DataArray]:
    """The policy's target per (snapshot, allocation, compressor, threshold) and what overflows at it."""
    h = counts.values  # (S, A, C, 5)
    lead = {k: counts.coords[k] for k in counts.dims[:-1]}
    dims4 = (*counts.dims[:-1], "threshold")
    coords4 = {**lead, "threshold": thresholds}
    chosen = xr.DataArray(layout.policy_targets(h, thresholds, targets, policy), dims=dims4, coords=coords4)
    chosen = chosen.where(n_entries > 0)
    r = np.nan_to_num(chosen.values, nan=1.0)  # (S, A, C, T); absent allocations have nothing to overflow
    over = layout.overflow_entries(hist.values[:, :, :, None], r[..., None])  # (S, A, C, T, weighting)
    return {
        "overflow_fraction": xr.DataArray(layout.overflow_fraction(h[..., None, :], targets),
                                          dims=(*counts.dims[:-1], "target"), coords={**lead, "target": targets}),
        "chosen_target": chosen,
        "overflow_entries": xr.DataArray(over[..., 0], dims=dims4, coords=chosen.coords),
        "overflow_accesses": xr.DataArray(over[..., 1], dims=dims4, coords=chosen.coords),
        "buddy_bytes_used": xr.DataArray(layout.overflow_bytes(h[:, :, :, None], r), dims=dims4, coords=chosen.coords),
        "tiered_entries": xr.DataArray(layout.tiered_entries(h[:, :, :, None], r), dims=dims4, coords=chosen.coords),
        "tiered_buddy_bytes": xr.DataArray(layout.tiered_buddy_bytes(h[:, :, :, None], r), dims=dims4,
                                           coords=chosen.coords),
    }


def _region_placement(by_region: tuple[int, str, Mapping[str, np.ndarray]], counts: xr.DataArray,
                      n_entries: xr.DataArray, thresholds: np.ndarray, targets: np.ndarray,
                      policy: str) -> dict[str, xr.DataArray]:
    """:func:`_placement`'s per-allocation results with a target per region: the chosen target is the
    allocation's entries x 128 B over its device bytes."""
    _, rule, per_region = by_region
    names = [str(n) for n in counts.allocation.values]
    dims = (*counts.dims[:-1], "threshold")
    shape = (*counts.shape[:-1], len(thresholds))
    # the compressors with per-region histograms (analyze keeps them for the layout's alone): NaN for the others
    out = {k: np.full(shape, np.nan) for k in ("device_bytes", "overflow_entries", "overflow_accesses",
                                               "buddy_bytes_used", "tiered_entries", "tiered_buddy_bytes")}
    for ci in range(next(iter(per_region.values())).shape[2] if per_region else 0):
        got = regions.placement({n: per_region[n][:, :, ci, 0] for n in names},
                                {n: per_region[n][:, :, ci, 1] for n in names}, names, thresholds, targets,
                                policy, rule)
        for k, v in got.items():
            out[k][:, :, ci] = v
    coords = {**{k: counts.coords[k] for k in counts.dims[:-1]}, "threshold": thresholds}
    da = {k: xr.DataArray(v, dims=dims, coords=coords) for k, v in out.items()}
    chosen = (n_entries * ENTRY_BYTES / da["device_bytes"].where(n_entries > 0))
    return {"chosen_target": chosen, **{k: v for k, v in da.items() if k != "device_bytes"}}


def _ratio(num: xr.DataArray, den: xr.DataArray) -> xr.DataArray:
    """num / den; inf where only den is 0 (all-zero data), NaN where both are (absent) or den is unknown."""
    out = (num / den.where(den > 0)).astype(float)
    return out.where((den > 0) | (num == 0) | den.isnull(), np.inf)


def _add_references(ds: xr.Dataset, snapshots: Sequence[Snapshot], names: list[str], snapshot_ids: np.ndarray,
                    nbytes: xr.DataArray, total_bytes: xr.DataArray) -> xr.Dataset:
    """Whole-allocation zstd/lz4 ratios, where the snapshots measured them."""
    refs = sorted({r for snap in snapshots for a in snap.allocations for r in a.reference_bytes})
    if not refs:
        return ds
    ref = np.full((len(snapshots), len(names), len(refs)), np.nan)
    col = {n: i for i, n in enumerate(names)}
    for si, snap in enumerate(snapshots):
        for a in snap.allocations:
            for ri, r in enumerate(refs):
                if r in a.reference_bytes:
                    ref[si, col[a.name], ri] = a.reference_bytes[r]
    ref_da = xr.DataArray(ref, dims=("snapshot", "allocation", "reference"),
                          coords={"snapshot": snapshot_ids, "allocation": names, "reference": refs})
    ds["reference_ratio"] = _ratio(nbytes, ref_da)
    ds["reference_ratio"].attrs.update(units="1", description="bytes / whole-allocation zstd-1 or lz4 bytes "
                                       "(not per entry: an upper reference, unusable by hardware)")
    ds["reference_ratio_total"] = _ratio(total_bytes, ref_da.sum("allocation", min_count=1))
    ds["reference_ratio_total"].attrs.update(units="1", description="snapshot bytes / zstd-1 or lz4 bytes")
    return ds


def _allocation_table(snapshots: Sequence[Snapshot], names: list[str]) -> dict[str, Any]:
    nbytes = np.zeros((len(snapshots), len(names)), dtype=np.int64)
    kind: dict[str, str] = {}  # every name is set below: names come from these snapshots
    dtype: dict[str, str] = {}
    index = {n: i for i, n in enumerate(names)}
    for si, s in enumerate(snapshots):
        for a in s.allocations:
            nbytes[si, index[a.name]] = a.nbytes
            kind[a.name], dtype[a.name] = a.kind, a.dtype
    return {"nbytes": xr.DataArray(nbytes, dims=("snapshot", "allocation"),
                                   coords={"snapshot": np.arange(len(snapshots)), "allocation": names}),
            "kind": [kind[n] for n in names], "dtype": [dtype[n] for n in names]}


def allocation_table(ds: xr.Dataset, compressor: str | None = None, threshold: float | None = None,
                     snapshot: int = -1) -> pd.DataFrame:
    """One row per allocation of one snapshot: what ``buddy analyze`` prints (its totals: :func:`total_row`).

    Parameters
    ----------
    ds : xarray.Dataset
        A result of :func:`analyze`.
    compressor : str, optional
        Whose placement to show (default: the first, the layout's).
    threshold : float, optional
        Buddy threshold to show (default: the first); one of ``ds``'s.
    snapshot : int
        Position of the snapshot, negative from the end (default: the last).

    Returns
    -------
    pandas.DataFrame
        Indexed by allocation, those present in the snapshot. Columns: kind, dtype, bytes, ideal ratio per
        compressor, and for ``compressor`` at ``threshold``: chosen target, overflow (%), device bytes, buddy
        bytes and the effective ratio, bytes / (device + metadata bytes).

    Raises
    ------
    KeyError
        A ``compressor`` or ``threshold`` that ``ds`` lacks.
    IndexError
        A ``snapshot`` out of range.
    """
    compressor, threshold, s = _table_at(ds, compressor, threshold, snapshot)
    at = {"compressor": compressor, "threshold": threshold}
    table = pd.DataFrame({"kind": s.kind.values, "dtype": s.dtype.values, "bytes": s.allocation_bytes.values},
                         index=pd.Index(s.allocation.values, name="allocation"))
    for c in s.compressor.values:
        table[f"ideal {c}"] = s.ideal_ratio.sel(compressor=c).values
    table["target"] = s.chosen_target.sel(**at).values
    table["overflow %"] = 100 * s.overflow.sel(**at).values
    table["device bytes"] = s.device_bytes.sel(**at).values
    table["buddy bytes"] = s.buddy_bytes.sel(**at).values
    table["effective"] = s.allocation_bytes.values / (table["device bytes"] + s.metadata_bytes.values)
    return table


def total_row(ds: xr.Dataset, compressor: str | None = None, threshold: float | None = None,
              snapshot: int = -1) -> pd.Series:
    """The snapshot's totals, with :func:`allocation_table`'s columns; device bytes include the metadata.

    Kept apart from the allocations' rows: an allocation may be called anything, "TOTAL" included.

    Parameters
    ----------
    ds, compressor, threshold, snapshot
        As in :func:`allocation_table`.

    Returns
    -------
    pandas.Series
        Named ``TOTAL``: the bytes and ideal ratios of the whole snapshot, overflow weighted by entries, no
        target (NaN), and the snapshot's effective ratio.

    Raises
    ------
    KeyError, IndexError
        As :func:`allocation_table` raises them.
    """
    compressor, threshold, s = _table_at(ds, compressor, threshold, snapshot)
    at = {"compressor": compressor, "threshold": threshold}
    total: dict[str, Any] = {"kind": "", "dtype": "", "bytes": int(s.allocation_bytes.sum())}
    for c in s.compressor.values:
        total[f"ideal {c}"] = float(s.ideal_ratio_total.sel(compressor=c))
    total["target"] = np.nan
    entries = s.entries.sum()
    total["overflow %"] = float(100 * (s.overflow.sel(**at) * s.entries).sum() / entries) if entries else 0.0
    total["device bytes"] = float(s.device_bytes.sel(**at).sum() + s.metadata_bytes.sum())
    total["buddy bytes"] = float(s.buddy_bytes.sel(**at).sum())
    total["effective"] = float(s.effective_ratio.sel(**at))
    return pd.Series(total, name="TOTAL")


def _table_at(ds: xr.Dataset, compressor: str | None, threshold: float | None,
              snapshot: int) -> tuple[str, float, xr.Dataset]:
    compressor = compressor or str(ds.compressor.values[0])
    threshold = float(ds.threshold.values[0]) if threshold is None else threshold
    s = ds.isel(snapshot=snapshot)
    return compressor, threshold, s.isel(allocation=np.flatnonzero(s.allocation_bytes.values > 0))


def is_result(path: str | Path) -> bool:
    """Whether ``path`` is a result :func:`analyze` made and ``buddy analyze --out`` wrote (netCDF or zarr).

    Parameters
    ----------
    path : str or pathlib.Path
        A netCDF file, or a zarr store (``.zarr``).

    Returns
    -------
    bool
        True where its ``source`` attribute starts with :data:`RESULT_SOURCE`; False for anything else, a file
        that does not open included.
    """
    path = Path(path)
    try:
        kw = {"engine": "zarr", "consolidated": False} if path.suffix == ".zarr" else {}
        with xr.open_dataset(path, **kw) as ds:
            return str(ds.attrs.get("source", "")).startswith(RESULT_SOURCE)
    except Exception:  # not netCDF or zarr at all
        return False
