"""Explore one workload's Buddy layout and slowdown live (notebook 00), and draw the per-allocation picture
that ``buddy analyze --plot`` writes.

Compressing every entry is the only expensive step, so it runs once per (workload, compressor): its sector
histograms (all snapshots) and, per (workload, snapshot, compressor), the access profile's per-kernel
histograms are cached. A change of buddy threshold, policy, snapshot, GPU, link or bandwidth accounting then
recomputes only the layout (:func:`buddylib.analysis.summarize`) and the timing model's kernel times, which
keeps the figures live (times measured in the module's tests and notebook 00).
"""

from __future__ import annotations

import io
import json
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from matplotlib.figure import Figure

from buddylib import analysis, layout, readers, snapshot
from buddylib.entries import ENTRY_BYTES, SECTOR_BYTES
from buddylib.snapshot import Snapshot
from buddylib.timing import GPUS, LINKS, gpu, link
from buddylib.timing import model as tm

#: Allocations drawn one by one in the per-allocation panel; the rest are summed into one bar.
TOP_ALLOCATIONS = 20
COLORS = {"device": "tab:blue", "metadata": "black", "buddy": "tab:orange"}
#: What the bandwidth-accounting control offers: (label, bandwidth_credit).
ACCOUNTING = (("no credit (paper's basis)", False), ("with bandwidth credit", True))


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
    from buddylib import experiments, workloads
    from buddylib.provenance import MANIFEST, frozen

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
    from buddylib import experiments, workloads

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
# the figure
# ---------------------------------------------------------------------------------------


def draw(view: View, slowdown: SlowdownView | None = None, fig: Figure | None = None) -> Figure:
    """Per-allocation device/metadata/buddy bytes with targets, the sectors-per-entry distribution, the
    effective ratio over snapshots, and (given ``slowdown``) the slowdown per link. Redraws ``fig`` if given."""
    fig = fig if fig is not None else Figure(figsize=(13, 7.5 if slowdown is not None else 6))
    fig.clear()
    rows = 3 if slowdown is not None else 2
    # fixed margins, not a layout engine: the engine's solver took most of an update's time
    grid = fig.add_gridspec(rows, 2, width_ratios=[1.35, 1], left=0.13, right=0.985, bottom=0.08, top=0.9,
                            wspace=0.18, hspace=0.6)
    _draw_allocations(fig.add_subplot(grid[:, 0]), view)
    _draw_sectors(fig.add_subplot(grid[0, 1]), view)
    _draw_ratios(fig.add_subplot(grid[1, 1]), view)
    if slowdown is not None:
        _draw_slowdown(fig.add_subplot(grid[2, 1]), slowdown)
    if view.title:
        fig.suptitle(view.title)
    return fig


def _unit(nbytes: float) -> tuple[str, float]:
    for name, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return name, float(size)
    return "B", 1.0


def top_allocations(table: pd.DataFrame, n: int = TOP_ALLOCATIONS) -> pd.DataFrame:
    """The ``n`` largest allocations, largest first, and the rest summed into one row (target NaN)."""
    t = table.sort_values("bytes", ascending=False, kind="stable")
    if len(t) <= n:
        return t
    rest = t.iloc[n - 1:]
    other = rest[["bytes", "device bytes", "metadata bytes", "buddy bytes"]].sum()
    other["kind"], other["target"] = "", np.nan
    other["overflow %"] = float((rest["overflow %"] * rest["bytes"]).sum() / rest["bytes"].sum())
    return pd.concat([t.iloc[:n - 1], other.to_frame(f"({len(rest)} others)").T.astype(t.dtypes)])


def _draw_allocations(ax: Any, view: View) -> None:
    t = top_allocations(view.table)
    unit, size = _unit(float(t["bytes"].max()))
    labels = [n if len(n) <= 30 else n[:14] + "…" + n[-15:] for n in map(str, t.index)]
    y = np.arange(len(t))
    left = np.zeros(len(t))
    for col, name in (("device bytes", "device"), ("metadata bytes", "metadata"), ("buddy bytes", "buddy")):
        width = t[col].to_numpy(float) / size
        ax.barh(y, width, left=left, color=COLORS[name], label=f"{name} ({'reserved' if name == 'buddy' else 'held'})",
                hatch="//" if name == "buddy" else None, alpha=0.5 if name == "buddy" else 1.0, gid=name)
        left += width
    for yi, (x, r, o) in enumerate(zip(left, t["target"], t["overflow %"], strict=True)):
        text = ("" if r != r else f"{r:.3g}x, ") + f"{o:.0f}% overflow"
        ax.text(x, yi, " " + text, va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, left.max() * 1.3 if left.size and left.max() > 0 else 1)
    ax.set(xlabel=f"memory ({unit})", title="per allocation: device, metadata and buddy bytes; chosen target")
    ax.legend(loc="lower right", fontsize=8)


def _draw_sectors(ax: Any, view: View) -> None:
    share = 100 * view.sectors / max(view.sectors.sum(), 1)
    ax.bar(layout.SECTOR_VALUES, share, color="tab:green", gid="sectors")
    ax.set_xticks(layout.SECTOR_VALUES)
    ax.set(xlabel="compressed size (32-B sectors per 128-B entry)", ylabel="entries (%)",
           title=f"sectors per entry: ideal ratio {view.totals['ideal ratio']:.2f}x")


def _draw_ratios(ax: Any, view: View) -> None:
    k = view.snapshot
    title = f"effective ratio {view.totals['effective ratio']:.2f}x"
    if view.steps.size == 1:  # one snapshot (a file of arrays): the two ratios side by side
        values = [view.effective[0], view.ideal[0]]
        ax.bar([0, 1], values, color=["tab:blue", "tab:gray"], gid="effective")
        for x, v in enumerate(values):
            ax.text(x, v, f"{v:.3f}x", ha="center", va="bottom", fontsize=9)
        ax.set_xticks([0, 1], ["effective ratio (Buddy)", "ideal ratio (no placement)"])
        ax.set(ylabel="compression ratio (x)", title=title)
        ax.set_ylim(0, max(values) * 1.2 if np.isfinite(max(values)) else 1)
        return
    ax.plot(view.steps, view.effective, marker="o", color="tab:blue", label="effective ratio (Buddy)", gid="effective")
    ax.plot(view.steps, view.ideal, marker=".", ls="--", color="tab:gray", label="ideal ratio (no placement)")
    ax.plot([view.steps[k]], [view.effective[k]], marker="o", ms=11, mfc="none", color="tab:red", ls="none",
            label="shown snapshot")
    ax.set(xlabel="step", ylabel="compression ratio (x)", title=f"{title} at step {view.steps[k]}")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)


def _draw_slowdown(ax: Any, sv: SlowdownView) -> None:
    if sv.reason:
        ax.text(0.5, 0.5, f"no slowdown: {sv.reason}", ha="center", va="center", wrap=True, fontsize=9,
                transform=ax.transAxes)
        ax.set(xticks=[], yticks=[], title="slowdown vs ideal GPU")
        return
    names = sorted(sv.by_link, key=lambda n: LINKS[n].bandwidth)
    pct = [100 * (sv.by_link[n] - 1) for n in names]
    ax.bar(range(len(names)), pct, color=["tab:red" if n == sv.link else "tab:gray" for n in names], gid="slowdown")
    ax.set_xticks(range(len(names)), names, fontsize=7)
    ax.axhline(0, color="k", lw=0.8)
    credit = "with" if sv.bandwidth_credit else "no"
    ax.set(ylabel="slowdown vs ideal GPU (%)",
           title=f"{sv.gpu}, {credit} bandwidth credit: {100 * (sv.slowdown - 1):.2f}% on {sv.link}")


def png(fig: Figure, dpi: int = 80) -> bytes:
    """The figure as PNG bytes (what notebook 00 shows statically)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def svg(fig: Figure) -> bytes:
    """The figure as SVG with text left as text: what the explorer's image widget shows, written in about
    60% of a PNG's time (text rendering dominates an update)."""
    import matplotlib

    buf = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


# ---------------------------------------------------------------------------------------
# the explorer: widgets driving the figure
# ---------------------------------------------------------------------------------------


class Explorer:
    """ipywidgets controls (``controls``: workload, snapshot, compressor, threshold, policy, gpu, link,
    accounting), an image of :func:`draw`'s figure and an HTML line of numbers; ``numbers`` holds what the
    line shows, ``timings`` the wall seconds of each update's steps (and its ``cpu`` seconds: on a busy
    machine wall time also counts other processes), ``computed`` how many sector histograms and kernel
    replays were computed rather than taken from the cache. Display it with ``explorer.ui``."""

    def __init__(self, workload: str = "md", scale: str | float = "quick", seed: int = 0,
                 data_dir: str | Path | None = None, snapshot: int = -1, compressor: str = "bpc32",
                 threshold: float = layout.DEFAULT_THRESHOLD, policy: str = "profile", gpu: str = "V100-32GB",
                 link: str = "NVLink2", bandwidth_credit: bool = False, params: tm.Params | None = None):
        import ipywidgets as w

        self.scale, self.seed, self.data_dir = scale, seed, data_dir
        self.params = params or tm.Params()
        self._hists: dict[tuple[str, str], xr.DataArray] = {}
        self._replays: dict[tuple[str, int, str], Replay | str] = {}
        self._streams: dict[str, dict[tuple, tuple]] = {}
        self.timings: list[dict[str, float]] = []
        self.computed = {"histograms": 0, "replays": 0}  # cache misses: what a change really recomputed
        self.numbers: dict[str, Any] = {}
        self.source = load_source(workload, scale, seed, data_dir)
        if compressor not in self.source.compressors:
            raise ValueError(f"compressor {compressor!r}: {self.source.name} records {self.source.compressors}")
        n = len(self.source.snapshots)
        cont = {"continuous_update": False, "style": {"description_width": "110px"}}
        self.controls = {
            "workload": w.Combobox(value=workload, options=builtin_names(scale, seed, data_dir), ensure_option=False,
                                   description="workload", placeholder="built-in name, or a file path", **cont),
            "snapshot": w.IntSlider(value=snapshot % n, min=0, max=n - 1, description="snapshot", **cont),
            "compressor": w.Dropdown(options=self.source.compressors, value=compressor, description="compressor",
                                     style=cont["style"]),
            "threshold": w.FloatSlider(value=threshold, min=0, max=0.5, step=0.05, description="buddy threshold",
                                       readout_format=".2f", **cont),
            "policy": w.Dropdown(options=layout.POLICIES, value=policy, description="policy", style=cont["style"]),
            "gpu": w.Dropdown(options=list(GPUS), value=gpu, description="GPU", style=cont["style"]),
            "link": w.Dropdown(options=list(LINKS), value=link, description="link", style=cont["style"]),
            "accounting": w.ToggleButtons(options=ACCOUNTING, value=bool(bandwidth_credit),
                                          description="bandwidth",
                                          style={"button_width": "200px", "description_width": "110px"}),
        }
        self.summary = w.HTML()
        self.image = w.Image(format="svg+xml", layout=w.Layout(width="100%", max_width="1040px"))
        c = self.controls
        self.ui = w.VBox([w.HBox([w.VBox([c["workload"], c["snapshot"], c["compressor"], c["threshold"]]),
                                  w.VBox([c["policy"], c["gpu"], c["link"]])]),
                          c["accounting"], self.summary, self.image])
        self.figure = Figure(figsize=(13, 7.5))
        self._quiet = False
        for name, ctl in c.items():
            ctl.observe(self._on_workload if name == "workload" else self._on_change, names="value")
        self.update()

    # -- callbacks ----------------------------------------------------------------------

    def _on_change(self, _change: dict | None = None) -> None:
        if not self._quiet:
            self.update()

    def _on_workload(self, change: dict) -> None:
        if self._quiet:
            return
        try:
            self.load(change["new"])
        except (ValueError, TypeError, OSError) as exc:
            self.summary.value = f"<b style='color:#b00'>{_escape(' '.join(str(exc).split()))}</b>"

    def load(self, workload: str) -> None:
        """Switch to another workload or file: its snapshots, compressors, and a fresh figure."""
        t0 = time.perf_counter()
        source = load_source(workload, self.scale, self.seed, self.data_dir)
        c = self.controls
        self._quiet = True
        try:
            self.source = source
            c["snapshot"].max = len(source.snapshots) - 1
            c["snapshot"].value = len(source.snapshots) - 1
            keep = c["compressor"].value
            c["compressor"].options = source.compressors
            c["compressor"].value = keep if keep in source.compressors else source.compressors[0]
        finally:
            self._quiet = False
        self.update(load_seconds=time.perf_counter() - t0)

    # -- computing ----------------------------------------------------------------------

    def _hist(self, compressor: str) -> xr.DataArray:
        key = (self.source.name, compressor)
        if key not in self._hists:
            self.computed["histograms"] += 1
            self._hists[key] = analysis.sector_histograms(self.source.snapshots, [compressor], progress=False)
        return self._hists[key]

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
        """Recompute layout and slowdown for the controls' values and redraw; ``timings`` gets the seconds."""
        v = {k: c.value for k, c in self.controls.items()}
        t0, cpu0 = time.perf_counter(), time.process_time()
        hist = self._hist(v["compressor"])
        t1 = time.perf_counter()
        ds = analysis.summarize(hist, self.source.snapshots, layout.check_threshold(v["threshold"]),
                                layout.check_targets(layout.TARGETS), v["policy"])
        step = int(ds.step.values[v["snapshot"]])
        title = (f"{self.source.name}, snapshot {v['snapshot']} (step {step}), {v['compressor']}, buddy threshold "
                 f"{v['threshold']:.2f}, {v['policy']} policy")
        view = layout_view(ds, v["compressor"], v["threshold"], v["snapshot"], title)
        t2 = time.perf_counter()
        rp = self._replay(v["snapshot"], v["compressor"])
        t3 = time.perf_counter()
        if isinstance(rp, str):
            sv = SlowdownView(v["gpu"], v["link"], v["accounting"], reason=rp)
        else:
            chosen = ds.chosen_target.isel(snapshot=v["snapshot"]).sel(compressor=v["compressor"]).isel(threshold=0)
            targets = {str(n): float(r) for n, r in zip(chosen.allocation.values, chosen.values, strict=True) if r == r}
            sv = slowdowns(rp, targets, v["gpu"], v["link"], v["accounting"], self.params)
        t4 = time.perf_counter()
        draw(view, sv, self.figure)
        self.image.value = svg(self.figure)
        t5 = time.perf_counter()
        self.view, self.slowdown = view, sv
        self.numbers = {"workload": self.source.name, "snapshot": v["snapshot"], "step": step, **view.totals,
                        "slowdown": sv.slowdown, "allocations": len(view.table)}
        self.timings.append({"load": load_seconds, "histograms": t1 - t0, "layout": t2 - t1, "replay": t3 - t2,
                             "timing": t4 - t3, "draw": t5 - t4, "total": load_seconds + t5 - t0,
                             "cpu": time.process_time() - cpu0})
        self.summary.value = _escape(self.text()).replace("\n", "<br>") + \
            f"<br><small>updated in {self.timings[-1]['total']:.2f} s</small>"

    def text(self) -> str:
        """The numbers shown, as plain text (what notebook 00 prints for nbval)."""
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


def _escape(text: str) -> str:
    import html

    return html.escape(text)


# ---------------------------------------------------------------------------------------
# a picture of the explorer in JupyterLab
# ---------------------------------------------------------------------------------------


def _chromium() -> str | None:
    import shutil

    return next((p for n in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
                 if (p := shutil.which(n))), None)


def screenshot_lab(out_png: str | Path, notebook: str | Path | None = None, execute: bool = True,
                   timeout: float = 300.0) -> Path | None:
    """Open ``notebook`` (default notebooks/00_explore.ipynb) in JupyterLab in headless Chromium and save a PNG.

    With ``execute`` its cells run in that JupyterLab (Run All, through the DevTools protocol) and the picture
    waits for the live widgets and their figure; without, it shows the committed outputs. Returns the PNG's
    path, or None with a message on stderr when no Chromium is installed (``apt-get install chromium``).
    """
    import sys
    import tempfile

    chrome = _chromium()
    if chrome is None:
        print("screenshot_lab: skipped, no chromium on PATH (apt-get install -y chromium)", file=sys.stderr)
        return None
    out_png = Path(out_png).absolute()
    if not out_png.parent.is_dir():
        raise ValueError(f"screenshot_lab: folder {out_png.parent} does not exist")
    notebook = Path(notebook) if notebook else Path(__file__).resolve().parents[1] / "notebooks" / "00_explore.ipynb"
    with tempfile.TemporaryDirectory(prefix="buddy-lab-") as tmp:
        copy = Path(tmp) / notebook.name
        _prepare_notebook(notebook, copy, clear=execute)
        with _lab_server(Path(tmp), timeout) as (base, token):
            _chromium_screenshot(chrome, f"{base}/lab/tree/{copy.name}?token={token}", out_png, timeout, Path(tmp),
                                 run_all=execute)
    if not out_png.is_file():
        raise RuntimeError(f"screenshot_lab: chromium wrote no {out_png}")
    return out_png


def _prepare_notebook(src: Path, dst: Path, clear: bool) -> None:
    """Copy the notebook; with ``clear`` without outputs or widget state, so what the picture shows is fresh."""
    import nbformat

    nb = nbformat.read(src, as_version=4)
    if clear:
        nb.metadata.pop("widgets", None)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
    nbformat.write(nb, dst)


class _lab_server:
    """``jupyter lab --no-browser`` on a free local port with a random token, stopped on exit."""

    def __init__(self, root: Path, timeout: float):
        self.root, self.timeout = root, timeout

    def __enter__(self) -> tuple[str, str]:
        import secrets
        import socket
        import subprocess
        import sys

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.token = secrets.token_hex(16)
        news = self.root / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        news.parent.mkdir(parents=True)
        news.write_text('{"fetchNews": "false"}')  # no "get notified about news?" toast over the picture
        self.log = open(self.root / "lab.log", "wb")  # closed in __exit__
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
             f"--ServerApp.token={self.token}", f"--ServerApp.root_dir={self.root}",
             "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             "--LabApp.expose_app_in_browser=True", f"--LabApp.user_settings_dir={self.root / 'settings'}",
             f"--LabApp.workspaces_dir={self.root / 'workspaces'}",
             *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=self.root)
        base = f"http://127.0.0.1:{port}"
        self._wait(f"{base}/api/status?token={self.token}")
        return base, self.token

    def _wait(self, url: str) -> None:
        import urllib.request

        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter lab exited ({self.proc.returncode}): "
                                   + (self.root / "lab.log").read_text(errors="replace")[-2000:])
            try:
                with urllib.request.urlopen(url, timeout=2):
                    return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"jupyter lab did not answer within {self.timeout:g} s")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _chromium_screenshot(chrome: str, url: str, out_png: Path, timeout: float, profile: Path,
                         run_all: bool = True) -> None:
    """Headless Chromium driven over its DevTools protocol: open ``url``, wait for the notebook, run all
    cells (JupyterLab exposes its app with ``expose_app_in_browser``), wait for the widgets, save a PNG."""
    import base64
    import subprocess
    import urllib.request

    import websocket  # websocket-client, a jupyter_server dependency

    data_dir = profile / "chromium"
    browser = subprocess.Popen([chrome, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                                "--hide-scrollbars", "--window-size=1400,1500", "--remote-debugging-port=0",
                                f"--user-data-dir={data_dir}", "about:blank"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        port = _until(lambda: (data_dir / "DevToolsActivePort").read_text().split()[0], timeout, "chromium's port")
        pages = _until(lambda: [t for t in json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
                                if t["type"] == "page"], timeout, "a chromium page")
        ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True)
        cdp = _Devtools(ws)
        cdp.call("Emulation.setFocusEmulationEnabled", enabled=True)
        cdp.call("Page.navigate", url=url)
        ready = "!!(window.jupyterapp && document.querySelector('.jp-Notebook .jp-Cell'))"
        _until(lambda: cdp.evaluate(ready) or None, timeout, "JupyterLab to open the notebook")
        if run_all:
            _until(lambda: cdp.evaluate(_KERNEL_IDLE) or None, timeout, "the notebook's kernel")
            cdp.call("Runtime.evaluate", expression=_RUN_ALL, awaitPromise=True)
            image = "(document.querySelector('img.widget-image') || {}).naturalWidth > 0"
            _until(lambda: cdp.evaluate(image) or None, timeout, "the explorer's widgets")
            _until(lambda: cdp.evaluate(_KERNEL_IDLE) or None, timeout, "the cells to finish")
        cdp.evaluate("(document.querySelector('.jupyter-widgets') || document.body).scrollIntoView({block: 'start'})")
        time.sleep(1)
        shot = cdp.call("Page.captureScreenshot", format="png")
        out_png.write_bytes(base64.b64decode(shot["data"]))
        ws.close()
    finally:
        browser.terminate()
        try:
            browser.wait(timeout=10)
        except subprocess.TimeoutExpired:
            browser.kill()
            browser.wait()


#: JavaScript: the notebook panel (headless Chromium has no focus, so ``shell.currentWidget`` may be empty)
_PANEL = "Array.from(window.jupyterapp.shell.widgets('main')).find(w => w.sessionContext)"
#: JavaScript: is the notebook's kernel started and idle?
_KERNEL_IDLE = (f"(() => {{ const w = {_PANEL}; const s = w && w.sessionContext; "
                "const k = s && s.session && s.session.kernel; return !!k && k.status === 'idle'; })()")
#: JavaScript: make the notebook the current widget, then Run All
_RUN_ALL = (f"(() => {{ const w = {_PANEL}; window.jupyterapp.shell.activateById(w.id); "
            "return window.jupyterapp.commands.execute('notebook:run-all-cells').then(() => true); })()")


class _Devtools:
    """The few DevTools-protocol calls the screenshot needs, over one websocket."""

    def __init__(self, ws: Any):
        self.ws, self.next_id = ws, 0

    def call(self, method: str, **params: Any) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"chromium {method}: {msg['error']}")
                return msg.get("result", {})

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


def _until(probe: Any, timeout: float, what: str) -> Any:
    """``probe()``'s first truthy value, polled until ``timeout`` seconds; errors while waiting count as no."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = probe()
        except (OSError, ValueError, IndexError, KeyError):
            value = None
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(f"screenshot_lab: waited {timeout:g} s for {what}")
