"""Notebook 11's study measured (:func:`~buddylib.studies.granularity_measure.measure`): how much of the ideal
(BPC-32's gain without placement
constraints) Buddy keeps with one target per allocation, per 2 MiB, 64 KiB or 4 KiB region, under each rule of
sharing the overflow budget, with the paper's four targets or with 8x and 16x besides, at three thresholds; and
what each costs in slowdown: at the run scale by the per-entry replay, at the committed summaries' scales from
their accesses (:func:`buddylib.studies.summaries.replay`), where they keep them.

This module is the study's code digest (:func:`key`); how the study is committed, read and tabled is
:mod:`buddylib.studies.granularity`.
"""

from __future__ import annotations

import hashlib
import inspect
import textwrap
from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr
from tqdm import tqdm

from buddylib import layout, paper, regions, snapshot, workloads
from buddylib.analysis import analyze_histograms, region_histograms, sector_histograms
from buddylib.provenance import ANALYSIS_ONLY, code_version, normalized_source
from buddylib.studies import summaries
from buddylib.studies.experiments import data_folder
from buddylib.timing.model import Replay, Workset, sweep

#: The compressor: the paper's headline one (and the one the committed summaries keep per region).
COMPRESSOR = paper.HEADLINE["compressor"]
THRESHOLDS = (0.1, 0.3, 0.5)
TARGET_SETS = {"paper": layout.TARGETS, "extended": layout.EXTENDED_TARGETS}
#: The DL networks: the paper's six.
DL_NETWORKS = ("alexnet", "vgg16", "resnet50", "squeezenet", "inception", "biglstm")
#: The committed scales of each suite's summaries, analysed beside the runs (the slowdown where they keep their
#: accesses).
SUMMARY_SCALES = {"hpc": ("large", 4096), "dl": ("paper",)}
#: The code the study depends on besides its workloads': this module and the analysis.
SOURCES = ("studies/granularity_measure.py", *ANALYSIS_ONLY)
#: What the study reads of ``studies/summaries.py``: its readers, digested alone (the rest of that module makes,
#: writes and checks summaries, and decides no number here).
SUMMARY_READERS = ("load", "_read_beside", "_check_regions", "histograms", "region_counts", "_kept_bytes",
                   "_region_parts", "replay")


def key() -> str:
    """Digest of the code the study depends on: :data:`~buddylib.studies.granularity_measure.SOURCES`, the summaries'
    readers and the workloads' code."""
    codes = "+".join(workloads.get(n).code() for n in [*workloads.names("hpc"), *DL_NETWORKS])
    readers = "".join(normalized_source(textwrap.dedent(inspect.getsource(getattr(summaries, f))))
                      for f in SUMMARY_READERS)
    return "+".join([code_version(*SOURCES), hashlib.sha256(readers.encode()).hexdigest()[:12],
                     hashlib.sha256(codes.encode()).hexdigest()[:12]])


def _grid(cell) -> xr.Dataset:
    """``cell(region, rule, targets)`` (a Dataset) over every granularity, rule and target set; one target per
    allocation is computed once per target set (the rules differ only between regions)."""
    memo: dict = {}

    def one(gran, rule, tname):
        k = (gran, rule if gran is not None else "", tname)
        if k not in memo:
            memo[k] = cell(gran, rule, tname)
        return memo[k]

    return xr.concat([xr.concat([xr.concat([one(g, r, t) for t in TARGET_SETS], pd.Index(list(TARGET_SETS),
                                                                                          name="targets"))
                                 for r in regions.RULES], pd.Index(list(regions.RULES), name="rule"))
                      for g in regions.GRANULARITIES],
                     pd.Index([regions.label(g) for g in regions.GRANULARITIES], name="region"))


def _capacity(counts: xr.DataArray, snaps: list, per_region: dict[int, dict[str, np.ndarray]]) -> xr.Dataset:
    """Every (region, rule, targets, threshold) of one run's final snapshot, from its histograms."""
    def cell(gran, rule, tname):
        ds = analyze_histograms(counts, snaps, THRESHOLDS, TARGET_SETS[tname], "profile", region=gran, rule=rule,
                                region_counts=per_region.get(gran))
        last = ds.isel(snapshot=-1).sel(compressor=COMPRESSOR)
        return xr.Dataset({
            "effective_ratio": last.effective_ratio,
            "metadata_bytes": last.metadata_bytes.sum("allocation"),
            "device_bytes": last.device_bytes.sum("allocation"),
            "buddy_bytes": last.buddy_bytes_used.sum("allocation"),
            "overflow": (last.overflow * last.entries).sum("allocation") / last.entries.sum(),
            "buddy_access_fraction": last.buddy_access_fraction,
            "tiered_bytes": last.tiered_bytes.sum("allocation"),
            "effective_ratio_untiered": last.effective_ratio_untiered,
        }).reset_coords(drop=True)

    out = _grid(cell)
    last = analyze_histograms(counts, snaps, THRESHOLDS).isel(snapshot=-1).sel(compressor=COMPRESSOR)
    return out.assign(ideal_ratio=last.ideal_ratio_total.reset_coords(drop=True),
                      footprint=float(last.allocation_bytes.sum()))


def _from_snapshots(snaps: list) -> xr.Dataset:
    """Every granularity's capacity of a run's snapshots: the 4 KiB regions' histograms, added for the coarser."""
    counts = sector_histograms(snaps, [COMPRESSOR], progress=False).sel(weighting="entries", drop=True)
    sizes = [g for g in regions.GRANULARITIES if g is not None]
    finest = min(sizes)
    base = region_histograms(snaps, [COMPRESSOR], finest, progress=False)
    per_region = {g: {n: regions.coarsen(h[:, :, :, 0], g // finest) for n, h in base.items()} for g in sizes}
    return _capacity(counts, snaps, per_region)


def _capacity_only(snaps: list) -> xr.Dataset:
    """``_from_snapshots`` with the slowdown NaN (notebook 10's tensor kinds: no access profile)."""
    out = _from_snapshots(snaps)
    nan = xr.full_like(out.effective_ratio, np.nan)
    return out.assign(slowdown=xr.concat([nan, nan], pd.Index([False, True], name="bandwidth_credit")))


def _llm_kinds(scale: str, seed: int) -> list[tuple[str, list]]:
    """Notebook 10's tensor kinds as snapshots of their allocations alone: (label, snapshots)."""
    from buddylib.snapshot import Snapshot
    from buddylib.studies import llm_measure

    made = llm_measure.runs(scale, seed)
    out = []
    for label, source, kind in llm_measure.GROUPS:
        if source == "efficientnet":
            snaps = [Snapshot("efficientnet", llm_measure.efficientnet_bf16())]
        else:
            snaps = [Snapshot(s.workload, [a for a in s.allocations if a.kind == kind], step=s.step, time=s.time)
                     for s in made[source].snapshots]
        out.append((label, [s for s in snaps if s.allocations]))
    return out


def _from_summary(summary: dict) -> xr.Dataset:
    """A committed summary's capacity at every granularity, and its slowdown where it keeps its accesses."""
    counts, snaps = summaries.histograms(summary)
    per_region = {g: summaries.region_counts(summary, g) for g in regions.GRANULARITIES if g is not None}
    out = _capacity(counts.sel(compressor=[COMPRESSOR]), snaps, per_region)
    if "accesses" not in summary:
        return out
    return xr.merge([out, _slowdowns(summaries.replay(summary))])


def _slowdowns(ws: Workset | Replay) -> xr.Dataset:
    """Slowdown of the run's last snapshot per (region, rule, targets, threshold, bandwidth credit): a run's
    (:class:`~buddylib.timing.model.Workset`) or a summary's (its accesses)."""

    def cell(gran, rule, tname):
        ds = sweep(ws, thresholds=THRESHOLDS, bandwidth_credit=(False, True), region=gran, rule=rule,
                   targets=TARGET_SETS[tname])
        s = ds.slowdown.isel(gpu=0, link=0, latency_scale=0, metadata_cache_bytes=0, outstanding=0)
        return s.reset_coords(drop=True).to_dataset()

    return _grid(cell)


def _checked_slowdowns(ws: Workset) -> xr.Dataset:
    """``_slowdowns`` of a run by the per-entry replay, and how far the same from what its summary would keep
    (:class:`~buddylib.timing.accesses.Accesses`, written and read back) lies from it: ``summary_error``,
    percentage points (issue 51: within 0.1)."""
    from buddylib.timing import accesses

    acc = accesses.Accesses.from_workset(ws)
    kept = accesses.decode(*acc.encode(), acc.name, acc.snapshots, acc.counts, acc.region_counts, acc.flops)
    replayed = _slowdowns(ws)
    error = 100 * abs(_slowdowns(kept).slowdown - replayed.slowdown)
    return replayed.assign(summary_error=error)


def measure(scale: str = "quick", seed: int = 0, data_dir: str | None = None, progress: bool = False,
            names: Sequence[str] | None = None) -> xr.Dataset:
    """The study, per workload, size, granularity, rule, target set and threshold.

    Workloads: the HPC proxies, the paper's six networks, notebook 10's LLM tensor kinds (capacity only). Sizes:
    ``scale``'s runs; above quick scale, the committed summaries at 1 GiB and paper scale (capacity, and the
    slowdown where they keep their accesses).

    Parameters
    ----------
    scale, seed, data_dir
        The runs' scale, seed and folder (:func:`~buddylib.studies.experiments.data_folder`).
    progress : bool
        Progress bars.
    names : sequence of str, optional
        Some of the HPC and DL workloads only, no LLM kinds.

    Returns
    -------
    xarray.Dataset
        The final snapshot's effective and ideal ratio, the gain kept, the bytes and overflow, and what it costs: the
        slowdown of ``scale``'s runs (and ``summary_error``, how far their summaries' replay lies from it), with
        units and descriptions in ``attrs``.
    """
    suites = {"hpc": workloads.names("hpc"), "dl": list(DL_NETWORKS)}
    suites = {k: [n for n in v if names is None or n in names] for k, v in suites.items()}
    data = data_folder(scale, seed, data_dir)
    parts = []
    todo = [(suite, n) for suite, ns in suites.items() for n in ns]
    for suite, n in tqdm(todo, desc="granularity", unit="workload", disable=not progress):
        path = workloads.cached_run(n, scale, seed, data)
        run = xr.merge([_from_snapshots(snapshot.load(path)), _checked_slowdowns(Workset.load(path, COMPRESSOR))])
        pieces = [run.expand_dims(size=[str(scale)])]
        for at in SUMMARY_SCALES[suite] if scale != "quick" else ():
            kept = summaries.load(summaries.path(n, at, seed)) if summaries.path(n, at, seed).is_file() else {}
            if "regions" in kept:  # (a summary made before they were kept has no per-region histograms)
                pieces.append(_from_summary(kept).expand_dims(size=[summaries.scale_name(at)]))
        ds = xr.concat(pieces, "size", join="outer", data_vars="all") if len(pieces) > 1 else pieces[0]
        parts.append(ds.expand_dims(workload=[n]).assign_coords(suite=("workload", [suite])))
    if names is None:  # notebook 10's kinds of LLM memory, at this scale (capacity only)
        for label, snaps in tqdm(_llm_kinds(scale, seed), desc="LLM kinds", unit="kind", disable=not progress):
            ds = _capacity_only(snaps).expand_dims(size=[str(scale)])
            parts.append(ds.expand_dims(workload=[label]).assign_coords(suite=("workload", ["llm"])))
    out = xr.concat(parts, "workload", join="outer", data_vars="all")
    gain = out.ideal_ratio - 1
    out["gain_kept"] = ((out.effective_ratio - 1) / gain).where(gain > 1e-9)  # no gain to keep: NaN, not -inf
    units = {"effective_ratio": ("1", "bytes / (device + metadata bytes), final snapshot"),
             "ideal_ratio": ("1", "bytes / (32 B x sectors): no placement constraint"),
             "gain_kept": ("1", "share of the ideal's gain kept: (effective - 1) / (ideal - 1); NaN where the ideal "
                           "gains nothing"),
             "metadata_bytes": ("bytes", "4 bits an entry and the regions' target bits"),
             "device_bytes": ("bytes", "device memory reserved (without metadata)"),
             "buddy_bytes": ("bytes", "bytes stored in buddy memory (overflowing sectors)"),
             "overflow": ("1", "share of entries that overflow"),
             "buddy_access_fraction": ("1", "share of accesses (of entries) that reach buddy memory"),
             "footprint": ("bytes", "bytes of the final snapshot"),
             "summary_error": ("percentage points", "|slowdown from the run's summary (its accesses per 4 KiB "
                               "region) - the per-entry replay's|, runs only"),
             "tiered_bytes": ("bytes", "bytes of entries keeping more of their code in buddy memory than on the device "
                              "(buddy memory as a tier)"),
             "effective_ratio_untiered": ("1", "the effective ratio with the tiered entries' buddy bytes counted as "
                                          "device bytes: compression alone"),
             "slowdown": ("1", f"timing model, {paper.HEADLINE['gpu']} + {paper.HEADLINE['link']}, one iteration "
                               "over the last snapshot (runs, and summaries that keep their accesses)")}
    for v, (u, d) in units.items():
        out[v].attrs.update(units=u, description=d)
    out.attrs.update(scale=str(scale), seed=seed, compressor=COMPRESSOR, policy="profile")
    return out
