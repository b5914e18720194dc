"""The explorer's model (notebook 00): what it looks at, its state, its caches, and what a change recomputes; no
widgets, so it is used and tested on its own (:mod:`buddylib.explore.view` draws it and drives it with controls).

Compressing every entry is the only expensive step, so it runs once per (workload, compressor): its sector
histograms (all snapshots) and, per (workload, snapshot, compressor), the access profile's per-kernel
histograms are cached. A change of buddy threshold, policy, snapshot, GPU, link or bandwidth accounting then
recomputes only the layout (:func:`buddylib.analysis.summarize`) and the timing model's kernel times, which
keeps the figures live (times measured in the module's tests and notebook 00).
"""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from buddylib import analysis, layout, regions, snapshot
from buddylib.entries import ENTRY_BYTES, SECTOR_BYTES
from buddylib.snapshot import Snapshot
from buddylib.timing import LINKS, gpu, link
from buddylib.timing import model as tm
from buddylib.userdata import readers

# ---------------------------------------------------------------------------------------
# sources: a built-in workload's saved run, a run file, or a user's arrays
# ---------------------------------------------------------------------------------------


@dataclass
class Source:
    """What the explorer looks at: snapshots, and the access profile when there is one (for the slowdown)."""

    name: str
    snapshots: list[Snapshot]
    workset: tm.Workset | None = None
    compressors: list[str] = field(default_factory=list)


def builtin_names(scale: str | float = "quick", seed: int = 0, data_dir: str | Path | None = None) -> list[str]:
    """Built-in workloads on offer: those of the committed fixtures at quick scale and seed 0 (the same list on
    every machine), else every registered one that can run here."""
    from buddylib import workloads
    from buddylib.provenance import MANIFEST, frozen
    from buddylib.studies import experiments

    folder = experiments.data_folder(scale, seed, data_dir)
    if frozen(folder):
        return list(json.loads((folder / MANIFEST).read_text())["workloads"])
    with warnings.catch_warnings():  # a workload that cannot run here is simply not offered
        warnings.simplefilter("ignore")
        return workloads.names()


def load_source(workload: str, scale: str | float = "quick", seed: int = 0,
                data_dir: str | Path | None = None) -> Source:
    """A built-in workload's run (made and cached if missing), or a file: a run saved by the suite (with its
    access profile if one lies beside it) or arrays read by the same readers as ``buddy analyze``."""
    from buddylib import workloads
    from buddylib.studies import experiments

    if workload in builtin_names(scale, seed, data_dir):
        path = workloads.cached_run(workload, scale, seed, experiments.data_folder(scale, seed, data_dir))
        return _run_source(path, workload)
    path = Path(workload).expanduser()
    if not path.exists():
        raise ValueError(f"workload {workload!r}: neither a built-in workload nor an existing file or zarr store")
    if snapshot.is_saved_run(path):
        return _run_source(path, path.name)
    snap = Snapshot("user", readers.read(path))
    return Source(path.name, [snap], None, list(analysis.DEFAULT_COMPRESSORS))


def _run_source(path: Path, name: str) -> Source:
    profile = path.with_suffix(".profile.json")
    ws = tm.Workset.load(path) if profile.exists() else None
    snaps = ws.snapshots if ws is not None else snapshot.load(path)
    recorded = set.intersection(*(set(a.sectors) for s in snaps for a in s.allocations))
    return Source(name, snaps, ws, [c for c in analysis.compressor_names() if c in recorded])


# ---------------------------------------------------------------------------------------
# what the figures show, from an analysis Dataset (shared with `buddy analyze --plot`)
# ---------------------------------------------------------------------------------------


@dataclass
class View:
    """One snapshot's layout at one compressor and buddy threshold: the numbers behind the figure."""

    title: str
    table: pd.DataFrame  # per allocation: bytes, device/metadata/buddy bytes, target, overflow
    sectors: np.ndarray  # entries per sector count 0..4, all allocations of the snapshot
    steps: np.ndarray  # every snapshot's step, and its effective and ideal ratio
    effective: np.ndarray
    ideal: np.ndarray
    snapshot: int  # index of the snapshot shown
    totals: dict[str, float]


def layout_view(ds: xr.Dataset, compressor: str, threshold: float, snapshot: int = -1, title: str = "") -> View:
    """The :class:`View` of ``snapshot`` in a result of :func:`buddylib.analysis.analyze` or ``summarize``."""
    at = {"compressor": compressor, "threshold": threshold}
    snapshot = snapshot % ds.sizes["snapshot"]
    s = ds.isel(snapshot=snapshot)
    s = s.isel(allocation=np.flatnonzero(s.allocation_bytes.values > 0))
    table = pd.DataFrame({
        "kind": s.kind.values, "bytes": s.allocation_bytes.values.astype(float),
        "device bytes": s.device_bytes.sel(**at).values, "metadata bytes": s.metadata_bytes.values,
        "buddy bytes": s.buddy_bytes.sel(**at).values, "target": s.chosen_target.sel(**at).values,
        "overflow %": 100 * s.overflow.sel(**at).values}, index=pd.Index(s.allocation.values, name="allocation"))
    sectors = s.sector_count.sel(compressor=compressor).sum("allocation").values.astype(float)
    device = float(table["device bytes"].sum() + table["metadata bytes"].sum())
    totals = {"bytes": float(table["bytes"].sum()), "device bytes": device,
              "metadata bytes": float(table["metadata bytes"].sum()), "buddy bytes": float(table["buddy bytes"].sum()),
              "effective ratio": float(s.effective_ratio.sel(**at)),
              "ideal ratio": float(s.ideal_ratio_total.sel(compressor=compressor)),
              "overflow": float((s.overflow.sel(**at).fillna(0) * s.entries).sum() / max(float(s.entries.sum()), 1)),
              "buddy access fraction": float(s.buddy_access_fraction.sel(**at))}
    return View(title, table, sectors, ds.step.values, ds.effective_ratio.sel(**at).values,
                ds.ideal_ratio_total.sel(compressor=compressor).values, snapshot, totals)


# ---------------------------------------------------------------------------------------
# slowdown: the timing model on cached per-kernel histograms
# ---------------------------------------------------------------------------------------


@dataclass
class Replay:
    """The access profile replayed over one snapshot: per kernel, accessed entries per sector count."""

    names: list[str]
    hist: np.ndarray  # (kernel, allocation, sector count), weighted by passes
    flops: np.ndarray
    misses: np.ndarray  # metadata-cache misses per kernel
    workset: tm.Workset  # the snapshot's Workset (its last snapshot is the one replayed)


@dataclass
class SlowdownView:
    """Slowdown (buddy time / ideal time) over every link preset at one GPU and accounting."""

    gpu: str
    link: str
    bandwidth_credit: bool
    by_link: dict[str, float] = field(default_factory=dict)
    reason: str = ""  # why there is no slowdown (no access profile...), else empty

    @property
    def slowdown(self) -> float:
        return self.by_link.get(self.link, float("nan"))


def replay(ws: tm.Workset, snapshot: int, compressor: str, params: tm.Params,
           streams: dict[tuple, tuple] | None = None) -> Replay:
    """Per-kernel histograms of ``snapshot`` (an index into ``ws.snapshots``) for ``compressor``.

    ``streams`` caches each allocation layout's access streams and metadata-cache misses, the slow part
    (tens of seconds for cg at default scale), shared by snapshots whose allocations have the same sizes.
    """
    snap = ws.snapshots[snapshot]
    one = tm.Workset(ws.name, [snap], ws.profile, ws.index_arrays, compressor)
    key = tuple((a.name, a.nbytes, a.dtype) for a in snap.allocations)
    streams = {} if streams is None else streams
    if key not in streams:
        try:
            one.streams()
        except KeyError as exc:
            raise ValueError(f"the access profile reads {exc}, which snapshot {snapshot} (step {snap.step}) "
                             "does not hold") from None
        streams[key] = (one._streams, tm._metadata_misses(one, params))
    one._streams, misses = streams[key]
    names, hist, flops = tm._sector_hists(one)
    return Replay(names, hist, flops, misses, one)


def slowdowns(rp: Replay, targets: dict[str, float], gpu_name: str, link_name: str, bandwidth_credit: bool,
              params: tm.Params) -> SlowdownView:
    """Slowdown over every link preset; the same arithmetic as :func:`buddylib.timing.model.traffic` and
    ``sweep`` (tests check it), on the cached histograms instead of replaying the streams again."""
    share = np.array([ENTRY_BYTES / targets.get(n, 1.0) for n in rp.names])[None, :, None]
    size = SECTOR_BYTES * layout.SECTOR_VALUES[None, None, :]
    tr = {"baseline_bytes": (rp.hist.sum(-1) * ENTRY_BYTES).sum(-1),
          "device_bytes": (rp.hist * np.minimum(size, share)).sum((-1, -2)),
          "link_bytes": (rp.hist * np.maximum(size - share, 0)).sum((-1, -2)), "flops": rp.flops}
    g = gpu(gpu_name)
    peak = tm._peak(rp.workset, g)
    out = SlowdownView(gpu_name, link_name, bandwidth_credit)
    for name in LINKS:
        base, buddy = tm.kernel_times(tr, rp.misses, g, link(name), params, peak, bandwidth_credit=bandwidth_credit)
        out.by_link[name] = float(buddy.sum() / base.sum())
    return out


# ---------------------------------------------------------------------------------------
# the model: settings, caches, and the numbers for them
# ---------------------------------------------------------------------------------------

#: What can be set, with the explorer's defaults.
DEFAULTS: dict[str, Any] = {"snapshot": -1, "compressor": "bpc32", "threshold": layout.DEFAULT_THRESHOLD,
                            "policy": "profile", "gpu": "V100-32GB", "link": "NVLink2", "bandwidth_credit": False,
                            "region": "allocation", "rule": "budget"}
#: The target granularities on offer (:mod:`buddylib.regions`): one target per allocation, the paper's, first.
REGIONS = tuple(regions.label(g) for g in regions.GRANULARITIES)


class Model:
    """One source (a built-in workload's run, a saved run, a file of arrays) and the settings it is looked at
    with (:data:`DEFAULTS`): :meth:`set` changes some, :meth:`load` another source, and each recomputes only
    what the change needs. ``view`` and ``slowdown`` are the numbers behind the figure, ``numbers`` the line
    of text, ``timings`` the wall seconds of each update's steps (and its ``cpu`` seconds: on a busy machine
    wall time also counts other processes), ``computed`` how many sector histograms and kernel replays were
    computed rather than taken from the cache."""

    def __init__(self, workload: str = "md", scale: str | float = "quick", seed: int = 0,
                 data_dir: str | Path | None = None, params: tm.Params | None = None, **settings: Any) -> None:
        unknown = set(settings) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"explorer settings: {', '.join(sorted(unknown))} unknown; one of {', '.join(DEFAULTS)}")
        self.scale, self.seed, self.data_dir = scale, seed, data_dir
        self.params = params or tm.Params()
        self._hists: dict[tuple[str, str], xr.DataArray] = {}
        self._region_hists: dict[tuple[str, str, int], dict[str, np.ndarray]] = {}
        self._replays: dict[tuple[str, int, str], Replay | str] = {}
        self._streams: dict[str, dict[tuple, tuple]] = {}
        self.timings: list[dict[str, float]] = []
        self.computed = {"histograms": 0, "replays": 0}  # cache misses: what a change really recomputed
        self.numbers: dict[str, Any] = {}
        self.settings = {**DEFAULTS, **settings}
        self.source = load_source(workload, scale, seed, data_dir)
        if self.settings["compressor"] not in self.source.compressors:
            raise ValueError(f"compressor {self.settings['compressor']!r}: {self.source.name} records "
                             f"{self.source.compressors}")
        self.settings["snapshot"] %= len(self.source.snapshots)
        self.update()

    def set(self, **changes: Any) -> None:
        """Change settings and recompute; a snapshot, compressor, policy or hardware not on offer is an error."""
        unknown = set(changes) - set(DEFAULTS)
        if unknown:
            raise TypeError(f"explorer settings: {', '.join(sorted(unknown))} unknown; one of {', '.join(DEFAULTS)}")
        if "compressor" in changes and changes["compressor"] not in self.source.compressors:
            raise ValueError(f"compressor {changes['compressor']!r}: {self.source.name} records "
                             f"{self.source.compressors}")
        if "region" in changes:
            regions.region_bytes(changes["region"].replace(" ", ""))
        if "rule" in changes:
            regions.check_rule(changes["rule"])
        if "snapshot" in changes and not 0 <= changes["snapshot"] < len(self.source.snapshots):
            raise ValueError(f"snapshot {changes['snapshot']}: {self.source.name} has {len(self.source.snapshots)}")
        self.settings.update(changes)
        self.update()

    def load(self, workload: str) -> None:
        """Switch to another workload or file: its last snapshot, the compressor kept where it records it."""
        t0 = time.perf_counter()
        source = load_source(workload, self.scale, self.seed, self.data_dir)
        self.source = source
        self.settings["snapshot"] = len(source.snapshots) - 1
        if self.settings["compressor"] not in source.compressors:
            self.settings["compressor"] = source.compressors[0]
        self.update(load_seconds=time.perf_counter() - t0)

    def _hist(self, compressor: str) -> xr.DataArray:
        key = (self.source.name, compressor)
        if key not in self._hists:
            self.computed["histograms"] += 1
            self._hists[key] = analysis.sector_histograms(self.source.snapshots, [compressor], progress=False)
        return self._hists[key]

    def _regions(self, compressor: str, size: int) -> dict[str, np.ndarray]:
        key = (self.source.name, compressor, size)
        if key not in self._region_hists:
            self.computed["histograms"] += 1
            self._region_hists[key] = analysis.region_histograms(self.source.snapshots, [compressor], size,
                                                                 progress=False)
        return self._region_hists[key]

    def _replay(self, snap: int, compressor: str) -> Replay | str:
        """The cached :class:`Replay`, or why there is none."""
        ws = self.source.workset
        if ws is None:
            return "no access profile (a file of arrays has no kernels to replay)"
        key = (self.source.name, snap, compressor)
        if key not in self._replays:
            self.computed["replays"] += 1
            try:
                self._replays[key] = replay(ws, snap, compressor, self.params,
                                            self._streams.setdefault(self.source.name, {}))
            except ValueError as exc:
                self._replays[key] = str(exc)
        return self._replays[key]

    def update(self, load_seconds: float = 0.0) -> None:
        """Recompute the layout and slowdown for the settings; ``timings`` gets the seconds."""
        v = self.settings
        t0, cpu0 = time.perf_counter(), time.process_time()
        hist = self._hist(v["compressor"])
        t1 = time.perf_counter()
        size = regions.region_bytes(v["region"].replace(" ", ""))
        by_region = None if size is None else (size, v["rule"], self._regions(v["compressor"], size))
        ds = analysis.summarize(hist, self.source.snapshots, layout.check_threshold(v["threshold"]),
                                layout.check_targets(layout.TARGETS), v["policy"], by_region=by_region)
        step = int(ds.step.values[v["snapshot"]])
        title = (f"{self.source.name}, snapshot {v['snapshot']} (step {step}), {v['compressor']}, buddy threshold "
                 f"{v['threshold']:.2f}, {v['policy']} policy"
                 + (f", a target per {regions.label(size)} region ({v['rule']} rule)" if size else ""))
        view = layout_view(ds, v["compressor"], v["threshold"], v["snapshot"], title)
        t2 = time.perf_counter()
        rp = self._replay(v["snapshot"], v["compressor"])
        t3 = time.perf_counter()
        if isinstance(rp, str):
            sv = SlowdownView(v["gpu"], v["link"], v["bandwidth_credit"], reason=rp)
        elif size is not None:  # the timing model's own replay, of the run's last snapshot
            sw = tm.sweep(self.source.workset, gpus=[v["gpu"]], links=list(LINKS), thresholds=[v["threshold"]],
                          bandwidth_credit=[v["bandwidth_credit"]], params=self.params, region=size,
                          rule=v["rule"], policy=v["policy"])
            sv = SlowdownView(v["gpu"], v["link"], v["bandwidth_credit"],
                              by_link={str(k): float(x) for k, x in zip(sw.link.values, sw.slowdown.values.ravel(),
                                                                        strict=True)})
        else:
            chosen = ds.chosen_target.isel(snapshot=v["snapshot"]).sel(compressor=v["compressor"]).isel(threshold=0)
            targets = {str(n): float(r) for n, r in zip(chosen.allocation.values, chosen.values, strict=True) if r == r}
            sv = slowdowns(rp, targets, v["gpu"], v["link"], v["bandwidth_credit"], self.params)
        t4 = time.perf_counter()
        self.view, self.slowdown = view, sv
        self.numbers = {"workload": self.source.name, "snapshot": v["snapshot"], "step": step, **view.totals,
                        "slowdown": sv.slowdown, "allocations": len(view.table)}
        self.timings.append({"load": load_seconds, "histograms": t1 - t0, "layout": t2 - t1, "replay": t3 - t2,
                             "timing": t4 - t3, "total": load_seconds + t4 - t0, "cpu": time.process_time() - cpu0})

    def text(self) -> str:
        """The numbers, as plain text (what notebook 00 prints for nbval)."""
        n = self.numbers
        hb = readers.human_bytes
        slow = ("n/a (" + self.slowdown.reason + ")" if self.slowdown.reason else
                f"{100 * (n['slowdown'] - 1):.2f}% ({self.slowdown.gpu} + {self.slowdown.link}, "
                f"{'with' if self.slowdown.bandwidth_credit else 'without'} bandwidth credit)")
        return (f"{n['workload']} snapshot {n['snapshot']} (step {n['step']}): {n['allocations']} allocations, "
                f"{hb(n['bytes'])}\n"
                f"effective ratio {n['effective ratio']:.3f}x, ideal ratio {n['ideal ratio']:.3f}x\n"
                f"device {hb(n['device bytes'])} (incl. metadata {hb(n['metadata bytes'])}), "
                f"buddy {hb(n['buddy bytes'])} reserved; {100 * n['overflow']:.1f}% of entries overflow, "
                f"{100 * n['buddy access fraction']:.1f}% of accesses\n"
                f"slowdown vs ideal GPU: {slow}")
