"""Slowdown of a Buddy-Compressed GPU against an ideal GPU with unlimited memory (SPEC §4).

For each kernel of a workload's access profile the model computes, from the real
per-entry sector counts of the workload's last snapshot and the targets the placement
policy chose:

* targets per region (:mod:`buddylib.regions`): each region's device share decides which of its entries
  overflow; the region's target rides on the address translation (page-table entry) or on the entries'
  metadata line, so looking it up costs no memory access (its bits count as capacity only);
* device traffic: with ``bandwidth_credit`` on, accessed entries cost min(32 B x sectors,
  device share) — compression saves HBM bandwidth too; off, every accessed entry costs the
  uncompressed 128 B, so Buddy Compression can only add time (the paper's comparison with
  an ideal GPU; see below); either way plus metadata-cache misses (one metadata line each);
* link traffic: the sectors beyond the device share of overflowing entries;
* time = max(compute, device bytes / HBM bandwidth, link bytes / effective link
  bandwidth) + one link latency when the kernel touches buddy memory, where the effective
  link bandwidth is capped by Little's law: ``outstanding`` 32-B requests in flight per
  ``latency`` seconds.

The baseline is the same kernel, uncompressed, every accessed entry 128 B from HBM.
Slowdown = sum of kernel times / sum of baseline times over one iteration.
Unified-Memory oversubscription is the comparison: the same accesses, with device memory
smaller than the footprint by Buddy's gain, page-granular LRU migration on fault.
Every parameter is named here and swept by :func:`sweep`.

Which accounting the paper's "slowdown of 1–2%" uses: its arXiv abstract presents Buddy
Compression as raising effective capacity *and bandwidth*; its ISCA abstract states
performance "within 2%" of a system with no memory limit. Both read as a net slowdown
against an ideal GPU, so the headline compares the credit-off number with the paper's and
reports the credit-on one beside it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import xarray as xr

from buddylib import layout, paper
from buddylib.entries import ENTRY_BYTES, SECTOR_BYTES, SECTORS_PER_ENTRY
from buddylib.snapshot import Snapshot
from buddylib.timing import caches
from buddylib.timing.hardware import GPU, Link, gpu, link
from buddylib.workloads.base import AccessProfile

KiB = 1 << 10


@dataclass(frozen=True)
class Params:
    """Model parameters that are not hardware presets, with the values used by default.

    Parameters
    ----------
    metadata_cache_bytes, metadata_ways, metadata_line_bytes : int
        The metadata cache: size, associativity, bytes per line.
    outstanding : int
        32-B link requests the GPU keeps in flight (an assumption; swept).
    um_page_bytes : int
        Unified Memory's page size.
    um_fault_seconds : float
        The fixed cost of handling one fault (driver and TLB shootdown).
    """

    #: metadata cache: size, associativity, bytes per line (4 bits per entry -> 64 entries per 32-B line)
    metadata_cache_bytes: int = 64 * KiB
    metadata_ways: int = 8
    metadata_line_bytes: int = 32
    #: 32-B link requests the GPU keeps in flight (Little's law caps link throughput):
    #: 80 SMs x 64 misses each on a V100-class GPU (an assumption; experiments.slowdowns sweeps it), enough to fill
    #: NVLink2 at 0.7 us (150 GB/s x 0.7 us / 32 B = 3,281 requests)
    outstanding: int = 5120
    #: Unified Memory: page size and the fixed cost of handling one fault (driver + TLB shootdown)
    um_page_bytes: int = 64 * KiB
    um_fault_seconds: float = 20e-6

    @property
    def entries_per_metadata_line(self) -> int:
        """Entries whose 4-bit metadata one metadata-cache line holds."""
        return self.metadata_line_bytes * 8 // layout.METADATA_BITS_PER_ENTRY


@dataclass
class Workset:
    """What the model replays: a run's snapshots, access profile and gather index arrays.

    Parameters
    ----------
    name : str
        The workload's name.
    snapshots : list of Snapshot
        The run's snapshots, with their sectors; the last is replayed.
    profile : AccessProfile
        One iteration's kernels.
    index_arrays : dict of str to numpy.ndarray
        The arrays gathers index through, by allocation name.
    compressor : str
        The compressor whose sectors drive the layout.
    """

    name: str
    snapshots: list[Snapshot]
    profile: AccessProfile
    index_arrays: dict[str, np.ndarray] = field(default_factory=dict)
    compressor: str = "bpc32"
    _streams: list | None = field(default=None, repr=False)
    _merged: tuple | None = field(default=None, repr=False)
    _hists: tuple | None = field(default=None, repr=False)
    _region_hists: dict = field(default_factory=dict, repr=False)
    _snapshot_regions: dict = field(default_factory=dict, repr=False)
    _misses: dict = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, path: str | Path, compressor: str = "bpc32") -> Workset:
        """From the files ``Run.save`` wrote (``NAME-SCALE-sSEED.nc`` and its siblings).

        Parameters
        ----------
        path : str or pathlib.Path
            The snapshots' file; the profile (``.profile.json``) and index arrays (``.index.npz``, if any) lie
            beside it.
        compressor : str
            The compressor whose sectors drive the layout.

        Returns
        -------
        Workset
        """
        import json

        from buddylib import snapshot

        path = Path(path)
        snaps = snapshot.load(path)
        profile = AccessProfile.from_dict(json.loads(path.with_suffix(".profile.json").read_text()))
        idx_path = path.with_suffix(".index.npz")
        index = dict(np.load(idx_path)) if idx_path.exists() else {}
        return cls(profile.workload, snaps, profile, index, compressor)

    @property
    def last(self) -> Snapshot:
        """The run's last snapshot (the one the timing model replays)."""
        return self.snapshots[-1]

    def streams(self) -> list[list[tuple[str, np.ndarray, float]]]:
        """Per kernel, per access: (allocation, entry ids in access order, passes)."""
        if self._streams is None:
            allocs = {a.name: a for a in self.last.allocations}
            rng = np.random.default_rng(0)
            self._streams = [[(a.allocation, _entries(a, allocs[a.allocation], allocs, self.index_arrays, rng),
                               a.passes) for a in k.accesses] for k in self.profile.kernels]
        return self._streams

    def merged(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every kernel's accesses as they happen side by side (:func:`~buddylib.timing.caches.merge_order`),
        kernel after kernel. Computed once: the metadata cache and Unified Memory map the same order to their own
        lines and pages.

        Returns
        -------
        which, entry, bounds : numpy.ndarray
            The position of each access's allocation in ``last.allocations`` (int32), its entry id (int64), and
            where each kernel's accesses end.
        """
        if self._merged is None:
            col = {a.name: i for i, a in enumerate(self.last.allocations)}
            kernels = self.streams()
            bounds = np.cumsum([sum(ent.size for _, ent, _ in acc) for acc in kernels], dtype=np.int64)
            which = np.empty(int(bounds[-1]) if bounds.size else 0, np.int32)
            entry = np.empty(which.size, np.int64)
            for accesses, end in zip(kernels, bounds, strict=True):
                sizes = np.array([ent.size for _, ent, _ in accesses], dtype=np.int64)
                if sizes.sum():
                    span = slice(end - sizes.sum(), end)
                    caches.merge(np.concatenate([ent for _, ent, _ in accesses]), sizes,
                                 np.array([col[n] for n, _, _ in accesses]), which[span], entry[span])
            self._merged = (which, entry, bounds)
        return self._merged


class Replay(Protocol):
    """What the model replays instead of a :class:`Workset` where a run's per-entry sectors are not kept: a
    committed summary's accesses (:class:`buddylib.timing.accesses.Accesses`), which answer the model's questions
    from per-region counts."""

    name: str
    compressor: str
    n_accesses: int
    _misses: dict

    @property
    def last(self) -> Snapshot:
        """The run's last snapshot (the one replayed)."""
        ...

    def traffic(self, targets: dict[str, Any], region: int | None) -> dict[str, np.ndarray]:
        """Baseline, device and link bytes and flops per kernel under ``targets`` (:func:`traffic`).

        Parameters
        ----------
        targets : dict of str to float or array
            Per allocation, its target, or with ``region`` one per region.
        region : int or None
            Region bytes, or None for one target per allocation.

        Returns
        -------
        dict of str to numpy.ndarray
            ``baseline_bytes``, ``device_bytes``, ``link_bytes`` and ``flops``, per kernel.
        """
        ...

    def choose(self, thresholds: Sequence[float], policy: str, region: int | None, rule: str,
               targets: Sequence[float]) -> list[dict[str, Any]]:
        """The targets the policy chooses, one ``{allocation: target}`` per threshold (:func:`targets_for`).

        Parameters
        ----------
        thresholds : sequence of float
            Buddy thresholds.
        policy, region, rule, targets
            As for :func:`targets_for`.

        Returns
        -------
        list of dict
            One ``{allocation: target}`` per threshold.
        """
        ...

    def metadata_misses(self, params: Params) -> np.ndarray:
        """Metadata-cache misses per kernel for ``params``' cache.

        Parameters
        ----------
        params : Params
            Gives the cache's size, associativity and line.

        Returns
        -------
        numpy.ndarray
            Misses per kernel.
        """
        ...

    def um_faults(self, capacity_pages: int, page_bytes: int) -> int:
        """Unified Memory's faults in one iteration with ``capacity_pages`` pages of ``page_bytes`` resident.

        Parameters
        ----------
        capacity_pages, page_bytes : int
            Pages device memory holds, and their size.

        Returns
        -------
        int
        """
        ...


#: Names of the small floats numpy does not know (ml_dtypes' and torch's: bfloat16, float8_e4m3fn, float8_e4m3,
#: float8_e5m2fnuz, ...), their width in bits first.
_SMALL_FLOAT = re.compile(r"b?float(8|16)(_e\d+m\d+\w*)?")


def _itemsize(alloc) -> int:
    """Bytes per element of an allocation; an unknown dtype is an error, not a guess."""
    try:
        return np.dtype(alloc.dtype).itemsize
    except TypeError:
        small = _SMALL_FLOAT.fullmatch(str(alloc.dtype))
        if small:
            return int(small.group(1)) // 8
        raise ValueError(f"allocation {alloc.name!r}: dtype {alloc.dtype!r} has no known element size; the timing "
                         f"model needs it to map elements to entries") from None


def _collapse(x: np.ndarray) -> np.ndarray:
    """Drop consecutive repeats: a run of accesses to one entry fetches it once."""
    if x.size == 0:
        return x
    keep = np.ones(x.size, dtype=bool)
    keep[1:] = x[1:] != x[:-1]
    return x[keep]


def _entries(access, alloc, allocs, index_arrays, rng) -> np.ndarray:
    """Entry ids an access touches, in order, from its pattern and the allocation's size."""
    n_entries = alloc.n_entries
    itemsize = _itemsize(alloc)
    n_items = max(1, alloc.nbytes // itemsize)
    if access.pattern == "stream":
        return np.arange(max(1, round(access.fraction * n_entries)), dtype=np.int64)
    if access.pattern == "strided":
        count = max(1, round(access.fraction * n_items))
        items = (np.arange(count, dtype=np.int64) * access.stride) % n_items
        return _collapse(items * itemsize // ENTRY_BYTES)
    if access.pattern == "random":
        return rng.integers(0, n_entries, max(1, round(access.fraction * n_entries)), dtype=np.int64)
    idx = index_arrays.get(access.index)
    if idx is None:
        raise ValueError(f"gather of {access.allocation!r} through {access.index!r}: index array not recorded")
    try:  # compiled: a gigabyte run's index would otherwise need several temporaries of its size
        return caches.gather_entries(idx, access.fraction, access.row, n_items, itemsize, ENTRY_BYTES)
    except ValueError as err:
        raise ValueError(f"gather of {access.allocation!r} through {access.index!r}: {err}") from None


# ---------------------------------------------------------------------------------------
# traffic
# ---------------------------------------------------------------------------------------


def _sector_hists(ws: Workset) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Per kernel and allocation: accessed-entry counts per sector value (x passes); computed once per workset
    (they do not depend on the targets)."""
    if ws._hists is None:
        ws._hists = _count_sectors(ws)
    return ws._hists


def _count_sectors(ws: Workset) -> tuple[list[str], np.ndarray, np.ndarray]:
    names = [a.name for a in ws.last.allocations]
    col = {n: i for i, n in enumerate(names)}
    sectors = {a.name: a.sectors[ws.compressor] for a in ws.last.allocations}
    h = np.zeros((len(ws.profile.kernels), len(names), SECTORS_PER_ENTRY + 1))
    for ki, accesses in enumerate(ws.streams()):
        for name, ent, passes in accesses:
            h[ki, col[name]] += passes * np.bincount(sectors[name][ent], minlength=SECTORS_PER_ENTRY + 1)
    flops = np.array([k.flops for k in ws.profile.kernels], dtype=float)
    return names, h, flops


def _region_sectors(ws: Workset, region: int) -> dict[str, np.ndarray]:
    """Per allocation, kernel and ``region``-byte region: accessed-entry counts per sector value (x passes)."""
    if region not in ws._region_hists:
        sectors = {a.name: a.sectors[ws.compressor] for a in ws.last.allocations}
        per = region // ENTRY_BYTES
        out = {a.name: np.zeros((len(ws.profile.kernels), -(-a.n_entries // per), SECTORS_PER_ENTRY + 1))
               for a in ws.last.allocations}
        for ki, accesses in enumerate(ws.streams()):
            for name, ent, passes in accesses:
                h = out[name][ki]
                key = ent // per * (SECTORS_PER_ENTRY + 1) + sectors[name][ent]
                h += passes * np.bincount(key, minlength=h.size).reshape(h.shape)
        ws._region_hists[region] = out
    return ws._region_hists[region]


def _metadata_misses(ws: Workset | Replay, params: Params) -> np.ndarray:
    """Metadata-cache misses per kernel, replaying the iteration twice (the second is counted): each entry
    access reads the metadata line of its allocation holding its entry's bits (allocations' lines follow
    each other)."""
    if not isinstance(ws, Workset):
        return ws.metadata_misses(params)
    per_line = params.entries_per_metadata_line
    which, entry, bounds = ws.merged()
    first = np.cumsum([0] + [-(-a.n_entries // per_line) for a in ws.last.allocations], dtype=np.int64)
    hits = caches.metadata_hits(which, entry, first, per_line, bounds, params.metadata_cache_bytes,
                                params.metadata_line_bytes, params.metadata_ways)
    return np.diff(bounds, prepend=0).astype(float) - hits


def traffic(ws: Workset | Replay, targets: dict[str, float], region: int | None = None) -> dict[str, np.ndarray]:
    """Per kernel: baseline, device and link bytes at the given per-allocation targets, or per region.

    Parameters
    ----------
    ws : Workset or Replay
        A run's per-entry replay, or an :class:`~buddylib.timing.accesses.Accesses` (a summary's), as everywhere a
        Workset is replayed.
    targets : dict of str to float or array
        Per allocation name, its target (missing: 1, uncompressed); with ``region``, one target per
        ``region``-byte region.
    region : int, optional
        Region bytes; None: one target per allocation.

    Returns
    -------
    dict of str to numpy.ndarray
        ``baseline_bytes`` (every accessed entry 128 B), ``device_bytes``, ``link_bytes`` and ``flops``, per kernel.
    """
    if not isinstance(ws, Workset):
        return ws.traffic(targets, region)
    names, h, flops = _sector_hists(ws)
    size = SECTOR_BYTES * layout.SECTOR_VALUES
    if region is None:
        share = np.array([ENTRY_BYTES / targets.get(n, 1.0) for n in names])[None, :, None]
        device = (h * np.minimum(size, share)).sum((-1, -2))
        link = (h * np.maximum(size - share, 0)).sum((-1, -2))
    else:
        device, link = np.zeros(len(flops)), np.zeros(len(flops))
        for n, hr in _region_sectors(ws, region).items():
            r = np.asarray(targets.get(n, 1.0), float)
            share = ENTRY_BYTES / np.broadcast_to(r[:hr.shape[1]] if r.ndim else r, hr.shape[1:2])
            device += (hr * np.minimum(size, share[:, None])).sum((-1, -2))
            link += (hr * np.maximum(size - share[:, None], 0)).sum((-1, -2))
    return {"baseline_bytes": (h.sum(-1) * ENTRY_BYTES).sum(-1), "device_bytes": device, "link_bytes": link,
            "flops": flops}


# ---------------------------------------------------------------------------------------
# time
# ---------------------------------------------------------------------------------------


def _peak(ws: Workset | Replay, g: GPU) -> float:
    dtypes = {a.dtype for a in ws.last.allocations}
    return g.fp64_flops if "float64" in dtypes else g.fp32_flops


def kernel_times(tr: dict[str, np.ndarray], meta_misses: np.ndarray, g: GPU, lk: Link, params: Params,
                 peak: float, latency_scale: float | np.ndarray = 1.0, outstanding: int | np.ndarray | None = None,
                 bandwidth_credit: bool | np.ndarray = True) -> tuple[np.ndarray, np.ndarray]:
    """Baseline and Buddy seconds per kernel.

    Parameters
    ----------
    tr : dict of str to numpy.ndarray
        Traffic per kernel (:func:`traffic`).
    meta_misses : numpy.ndarray
        Metadata-cache misses per kernel.
    g, lk, params : GPU, Link, Params
        The hardware and the model's constants.
    peak : float
        Arithmetic peak, FLOP/s.
    latency_scale, outstanding, bandwidth_credit : scalar or array
        Multiple of the link's latency, link requests in flight (default ``params.outstanding``), and whether
        compressed entries save HBM bytes; arrays broadcast against each other.

    Returns
    -------
    baseline, buddy : numpy.ndarray
        Seconds per kernel (the last axis); the shape of the broadcast parameters leads.
    """
    compute = tr["flops"] / peak
    latency = np.asarray(lk.latency * np.asarray(latency_scale, dtype=float))[..., None]
    in_flight = np.asarray(params.outstanding if outstanding is None else outstanding, dtype=float)[..., None]
    link_bw = np.minimum(lk.bandwidth, in_flight * SECTOR_BYTES / latency)
    base = np.maximum(compute, tr["baseline_bytes"] / g.hbm_bandwidth)
    credit = np.asarray(bandwidth_credit, dtype=bool)[..., None]
    device = np.where(credit, tr["device_bytes"], tr["baseline_bytes"]) + meta_misses * params.metadata_line_bytes
    buddy = np.maximum(np.maximum(compute, device / g.hbm_bandwidth), tr["link_bytes"] / link_bw)
    buddy = buddy + np.where(tr["link_bytes"] > 0, latency, 0.0)
    return np.broadcast_to(base, buddy.shape), buddy


def targets_for(ws: Workset | Replay, thresholds: Sequence[float], policy: str = "profile", region: int | None = None,
                rule: str = "budget", targets: Sequence[float] = layout.TARGETS) -> list[dict[str, float]]:
    """Targets per allocation chosen by the placement policy over the run's snapshots, one mapping per buddy
    threshold: one analysis for them all (its sector histograms and their reductions, most of its time, are the
    same for every threshold).

    Parameters
    ----------
    ws : Workset or Replay
        A run's per-entry replay or a summary's accesses.
    thresholds : sequence of float
        Buddy thresholds.
    policy : {"profile", "global", "oracle"}
        The placement policy (:func:`buddylib.analysis.analyze`).
    region : int, optional
        Region bytes: one target per region of each allocation, shared out by ``rule``
        (:data:`buddylib.regions.RULES`).
    rule : str
        How an allocation's regions share its overflow budget.
    targets : sequence of float
        Target ratios the policy may choose.

    Returns
    -------
    list of dict
        Per threshold, ``{allocation: target}`` in the last snapshot; with ``region``, each value an array of its
        regions' targets.
    """
    from buddylib import regions
    from buddylib.analysis import analyze, region_histograms

    if not isinstance(ws, Workset):
        return ws.choose(thresholds, policy, region, rule, targets)
    if region is not None:
        if region not in ws._snapshot_regions:
            ws._snapshot_regions[region] = region_histograms(ws.snapshots, [ws.compressor], region, progress=False)
        hists = ws._snapshot_regions[region]
        chosen = regions.choose({n: h[:, :, 0, 0] for n, h in hists.items()}, thresholds, targets, policy, rule)
        return [{n: c[-1, :, ti] for n, c in chosen.items()} for ti in range(len(thresholds))]
    ds = analyze(ws.snapshots, [ws.compressor], thresholds=list(thresholds), policy=policy, progress=False,
                 targets=targets)
    last = ds.chosen_target.isel(snapshot=-1).sel(compressor=ws.compressor)
    out = []
    for t in thresholds:
        chosen = last.sel(threshold=t)
        out.append({str(n): float(v) for n, v in zip(chosen.allocation.values, chosen.values, strict=True) if v == v})
    return out


def um_slowdown(ws: Workset | Replay, capacity_ratio: float, g: GPU, lk: Link, params: Params) -> tuple[float, int]:
    """Unified-Memory oversubscription: slowdown and faults per iteration.

    Device memory holds ``footprint / capacity_ratio``; pages migrate on first touch when not
    resident (LRU eviction), each costing ``um_fault_seconds`` plus the page over the link.

    Parameters
    ----------
    ws : Workset or Replay
        A run's per-entry replay or a summary's accesses.
    capacity_ratio : float
        Footprint over device memory (Buddy's gain, for the comparison).
    g, lk, params : GPU, Link, Params
        The hardware and the model's constants (page size, fault cost).

    Returns
    -------
    slowdown : float
        Time of one iteration over the baseline's.
    faults : int
        Faults in one (warm) iteration.
    """
    page = params.um_page_bytes
    # allocations start on page boundaries
    first = np.cumsum([0] + [-(-a.nbytes // page) for a in ws.last.allocations], dtype=np.int64)
    offset = int(first[-1]) * page
    capacity = max(1, int(offset / capacity_ratio) // page)
    if isinstance(ws, Workset):
        one = caches.page_sequence(*ws.merged(), first, ENTRY_BYTES, page)
        faults = caches.page_faults(np.concatenate([one, one]), capacity, warm_start=one.size)
    else:
        faults = ws.um_faults(capacity, page)
    tr = traffic(ws, {})
    t_base = np.maximum(tr["flops"] / _peak(ws, g), tr["baseline_bytes"] / g.hbm_bandwidth).sum()
    t_um = t_base + faults * (params.um_fault_seconds + page / lk.bandwidth)
    return float(t_um / t_base), int(faults)


def slowdown(ws: Workset | Replay, gpu_name: str = paper.HEADLINE["gpu"], link_name: str = paper.HEADLINE["link"],
             threshold: float = layout.DEFAULT_THRESHOLD,
             params: Params | None = None, bandwidth_credit: bool = True, region: int | str | None = None,
             rule: str = "budget", targets: Sequence[float] = layout.TARGETS,
             policy: str = "profile") -> dict[str, float]:
    """One configuration: slowdown and the traffic behind it, summed over an iteration.

    Parameters
    ----------
    ws : Workset or Replay
        A run's per-entry replay or a summary's accesses.
    gpu_name, link_name : str
        Presets of :mod:`buddylib.timing.hardware` (default: the paper's, :data:`buddylib.paper.HEADLINE`).
    threshold : float
        The buddy threshold.
    params, bandwidth_credit, region, rule, targets, policy
        As for :func:`sweep`, one value each.

    Returns
    -------
    dict of str to float
        Every scalar of :func:`sweep`'s Dataset: ``slowdown``, ``baseline_seconds``, ``buddy_seconds``, the link
        traffic fraction, the device traffic saving and the metadata hit rate.

    Raises
    ------
    ValueError
        A bad parameter, as :func:`sweep`.
    """
    ds = sweep(ws, gpus=[gpu_name], links=[link_name], thresholds=[threshold], params=params,
               bandwidth_credit=[bandwidth_credit], region=region, rule=rule, targets=targets, policy=policy)
    return {k: float(v.item()) for k, v in ds.data_vars.items() if v.size == 1}


def sweep(ws: Workset | Replay, gpus: Sequence[str] = (paper.HEADLINE["gpu"],),
          links: Sequence[str] = (paper.HEADLINE["link"],),
          thresholds: Sequence[float] = (layout.DEFAULT_THRESHOLD,), latency_scales: Sequence[float] = (1.0,),
          metadata_cache_bytes: Sequence[int] | None = None, outstanding: Sequence[int] | None = None,
          bandwidth_credit: Sequence[bool] = (True,), params: Params | None = None,
          region: int | str | None = None, rule: str = "budget",
          targets: Sequence[float] = layout.TARGETS, policy: str = "profile") -> xr.Dataset:
    """The slowdown of one iteration against an ideal GPU (``slowdown`` in a Dataset, with the seconds and traffic
    behind it), one dim per swept parameter, over every combination of them; ``ValueError`` for a bad one.

    Parameters
    ----------
    ws : Workset or Replay
        A run's per-entry replay or a committed summary's accesses (:func:`buddylib.studies.summaries.replay`).
    gpus, links, thresholds, latency_scales, metadata_cache_bytes, outstanding, bandwidth_credit : sequence
        Swept: presets of :mod:`buddylib.timing.hardware`, buddy thresholds, multiples of the link's latency,
        metadata-cache sizes and link requests in flight (default: ``params``'), and whether compressed entries
        save HBM bytes (False: each accessed entry costs its uncompressed bytes, the paper's comparison).
    params, region, rule, targets, policy
        The model's other constants; the targets, per allocation or per ``region`` by ``rule``.
    """
    from buddylib import regions

    region = regions.region_bytes(region)
    params = params or Params()
    cache_sizes = list(metadata_cache_bytes or [params.metadata_cache_bytes])
    in_flight = [int(o) for o in (outstanding or [params.outstanding])]
    if min(in_flight) < 1:
        raise ValueError(f"outstanding {min(in_flight)}: at least one link request must be in flight")
    credits = [bool(c) for c in bandwidth_credit]
    thresholds = list(layout.check_threshold(thresholds))
    for c in cache_sizes:  # the replay depends on the cache alone: once per workset
        key = (c, params.metadata_ways, params.metadata_line_bytes)
        if key not in ws._misses:
            ws._misses[key] = _metadata_misses(ws, Params(**{**params.__dict__, "metadata_cache_bytes": c}))
    misses = {c: ws._misses[(c, params.metadata_ways, params.metadata_line_bytes)] for c in cache_sizes}
    n_accesses = float(ws.merged()[1].size if isinstance(ws, Workset) else ws.n_accesses)
    shape = (len(gpus), len(links), len(thresholds), len(latency_scales), len(cache_sizes), len(in_flight),
             len(credits))
    out = {k: np.zeros(shape) for k in ("slowdown", "baseline_seconds", "buddy_seconds")}
    link_frac = np.zeros(len(thresholds))
    dev_saving = np.zeros(len(thresholds))
    # the last three parameters vary together, vectorised: (latency, outstanding, credit) grids
    lat, flight, cred = np.meshgrid(np.asarray(latency_scales, float), np.asarray(in_flight, float),
                                    np.asarray(credits, bool), indexing="ij")
    for ti, chosen in enumerate(targets_for(ws, thresholds, policy, region, rule, targets)):
        tr = traffic(ws, chosen, region)
        link_frac[ti] = tr["link_bytes"].sum() / max(tr["baseline_bytes"].sum(), 1)
        dev_saving[ti] = 1 - tr["device_bytes"].sum() / max(tr["baseline_bytes"].sum(), 1)
        for gi, gname in enumerate(gpus):
            g = gpu(gname)
            for li, lname in enumerate(links):
                lk = link(lname)
                for ci, c in enumerate(cache_sizes):
                    b, bu = kernel_times(tr, misses[c], g, lk, params, _peak(ws, g), lat, flight, cred)
                    b, bu = b.sum(-1), bu.sum(-1)  # (latency, outstanding, credit)
                    out["slowdown"][gi, li, ti, :, ci] = bu / b
                    out["baseline_seconds"][gi, li, ti, :, ci] = b
                    out["buddy_seconds"][gi, li, ti, :, ci] = bu
    dims = ("gpu", "link", "threshold", "latency_scale", "metadata_cache_bytes", "outstanding", "bandwidth_credit")
    ds = xr.Dataset({k: (dims, v) for k, v in out.items()},
                    coords={"gpu": list(gpus), "link": list(links), "threshold": thresholds,
                            "latency_scale": list(latency_scales), "metadata_cache_bytes": cache_sizes,
                            "outstanding": in_flight, "bandwidth_credit": credits,
                            "link_bandwidth": ("link", [link(n).bandwidth for n in links])})
    ds["link_traffic_fraction"] = ("threshold", link_frac)
    ds["device_traffic_saving"] = ("threshold", dev_saving)
    ds["metadata_hit_rate"] = ("metadata_cache_bytes",
                               [1 - misses[c].sum() / max(n_accesses, 1) for c in cache_sizes])
    units = {"slowdown": "1", "baseline_seconds": "s", "buddy_seconds": "s", "link_traffic_fraction": "1",
             "device_traffic_saving": "1", "metadata_hit_rate": "1", "link_bandwidth": "bytes/s",
             "outstanding": "32-B link requests in flight"}
    for k, u in units.items():
        ds[k].attrs["units"] = u
    ds["bandwidth_credit"].attrs["description"] = ("compressed entries also save HBM bytes (True), or cost the "
                                                   "uncompressed 128 B, so Buddy only adds time (False)")
    ds.attrs.update(workload=ws.name, compressor=ws.compressor, region=regions.label(region), rule=rule,
                    **{k: v for k, v in params.__dict__.items() if k not in ("outstanding", "metadata_cache_bytes")})
    return ds
