"""Targets per region (notebook 11): how much of what BPC finds can Buddy keep at each target granularity, and
at what cost (:mod:`buddylib.regions` defines the granularities and the rules;
:func:`~buddylib.studies.granularity_measure.measure` computes).

The study is committed per scale (:data:`COMMITTED`): the quick one, from the committed fixtures, for nbval; the
default one, from default-scale runs and the committed 1 GiB, 4 GiB and paper-scale summaries, for make reproduce, which
reads it instead of spending minutes on it. :func:`check_committed` (``buddy granularity --check``) remakes one
and compares.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from buddylib import regions
from buddylib.studies import cache, fixtures
from buddylib.studies.granularity_measure import (
    COMPRESSOR,
    DL_NETWORKS,
    SUMMARY_SCALES,
    TARGET_SETS,
    THRESHOLDS,
    measure,
)
from buddylib.studies.granularity_measure import key as code_key

__all__ = ["COMMITTED", "COMPRESSOR", "DL_NETWORKS", "SUMMARY_SCALES", "TARGET_SETS", "THRESHOLDS", "TOLERANCE",
           "check_committed", "committed_path", "frontier", "headline", "key", "largest_size", "measure",
           "smallest_keeping", "study", "summaries_read", "table", "write_committed"]

#: Where the committed studies lie (one netCDF file per scale).
COMMITTED = fixtures.DATA / "summaries" / "granularity"
#: The largest relative change :func:`check_committed` accepts: the fixtures' (the default study's DL runs are
#: torch's float bytes, which move between CPUs; the rest is the same bytes everywhere and compares closer).
TOLERANCE = fixtures.TOLERANCE
#: What "keeps the ideal" means in :func:`smallest_keeping`: the issue's question, 90% of the gain within +2%.
KEEP, SLOWER = 0.9, 0.02


def committed_path(scale: str = "quick", seed: int = 0) -> Path:
    """Where the committed study of ``scale`` and ``seed`` lies.

    Parameters
    ----------
    scale : str
        The study's scale.
    seed : int
        Its seed.

    Returns
    -------
    pathlib.Path
        In :data:`COMMITTED`; the file need not exist.

    Examples
    --------
    >>> committed_path("default").name
    'granularity-default-s0.nc'
    """
    return COMMITTED / f"granularity-{scale}-s{seed}.nc"


def key(scale: str = "quick", seed: int = 0) -> str:
    """Digest of what the committed study at ``scale`` depends on: the code
    (:func:`~buddylib.studies.granularity_measure.key`) and, above quick scale, the committed summaries it reads
    (:func:`summaries_read`), so that a summary remade with other data, or given its region histograms, stales it.

    Parameters
    ----------
    scale : str
        The study's scale.
    seed : int
        Its seed.

    Returns
    -------
    str
        The code's digest, then ``+`` and 12 hex digits of the summaries' where it reads some.
    """
    read = summaries_read(scale, seed)
    return code_key() + (f"+{hashlib.sha256(read.encode()).hexdigest()[:12]}" if read else "")


def summaries_read(scale: str, seed: int = 0) -> str:
    """What the study at ``scale`` reads of the committed summaries (none at quick scale): per workload and summary
    scale with region histograms, its bytes' digest and those of its region histograms and accesses, a line each
    (from the summaries' JSON, as recorded: the files beside them are checked where the study reads them)."""
    from buddylib import workloads
    from buddylib.studies import summaries

    lines = []
    for suite, names in (("hpc", workloads.names("hpc")), ("dl", DL_NETWORKS)):
        for n, at in ((n, at) for n in names for at in (SUMMARY_SCALES[suite] if scale != "quick" else ())):
            f = summaries.path(n, at, seed)
            s = json.loads(f.read_text()) if f.is_file() else {}
            if "regions" in s:
                lines.append(f"{n}@{at}:{s['digest']}:{s['regions']['sha256']}:{s.get('accesses', {}).get('sha256')}")
    return "\n".join(lines)


def study(scale: str = "quick", seed: int = 0) -> xr.Dataset:
    """The committed study of ``scale``, else measured here (minutes at default scale).

    Parameters
    ----------
    scale : str
        The study's scale.
    seed : int
        Its seed.

    Returns
    -------
    xarray.Dataset
        :func:`~buddylib.studies.granularity_measure.measure`'s; attributes ``source`` ("committed" or "measured"),
        ``code`` (what made it) and ``code_current`` (whether it is this checkout's).
    """
    path = committed_path(scale, seed)
    if path.is_file():
        ds = cache.load_cached(path)
        return ds.assign_attrs(source="committed", code_current=int(ds.attrs.get("code") == key(scale, seed)))
    return measure(scale, seed).assign_attrs(source="measured", code=key(scale, seed), code_current=1)


def write_committed(scale: str = "quick", seed: int = 0, progress: bool = True) -> Path:
    """Measure here and commit, with the code digest, date and machine.

    Parameters
    ----------
    scale : str
        The study's scale.
    seed : int
        Its seed.
    progress : bool
        Progress bars.

    Returns
    -------
    pathlib.Path
        The file written (:func:`committed_path`).
    """
    import datetime
    import time

    t0 = time.perf_counter()
    ds = measure(scale, seed, progress=progress)
    ds.attrs.update(code=key(scale, seed), seconds=round(time.perf_counter() - t0, 1),
                    date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                    machine=json.dumps(fixtures.machine()))
    path = committed_path(scale, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    cache.save_cache(ds, path)
    return path


def check_committed(scale: str = "quick", seed: int = 0, fresh: xr.Dataset | None = None) -> pd.DataFrame:
    """Remake the committed study (or take ``fresh``) and compare.

    Parameters
    ----------
    scale : str
        The study's scale.
    seed : int
        Its seed.
    fresh : xarray.Dataset, optional
        A study made already, which may hold some workloads only.

    Returns
    -------
    pandas.DataFrame
        Per variable the largest relative change and ``ok`` (within :data:`TOLERANCE`; NaN where both are NaN
        counts as equal).

    Raises
    ------
    FileNotFoundError
        No study committed at ``scale`` and ``seed``.
    """
    path = committed_path(scale, seed)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no committed study; `buddy granularity --write --scale {scale}` makes it")
    kept = cache.load_cached(path)
    fresh = measure(scale, seed) if fresh is None else fresh
    kept = kept.sel(workload=fresh.workload.values)
    rows = []
    for v in kept.data_vars:
        a, b = kept[v], fresh[v]
        if a.dims != b.dims or a.shape != b.shape:
            rows.append({"variable": v, "max_rel_change": np.inf, "ok": False})
            continue
        x, y = np.asarray(a, float), np.asarray(b, float)
        same = (np.isnan(x) & np.isnan(y)) | (x == y)
        rel = np.where(same, 0.0, np.abs(y - x) / np.where(x == 0, 1.0, np.abs(x)))
        worst = float(np.nan_to_num(rel, nan=np.inf).max(initial=0.0))
        rows.append({"variable": v, "max_rel_change": worst, "ok": worst <= TOLERANCE})
    return pd.DataFrame(rows).set_index("variable")


def table(ds: xr.Dataset, size: str, suite: str, threshold: float = 0.3) -> pd.DataFrame:
    """Mean over a suite's workloads at one size and threshold: one row per (targets, rule).

    Parameters
    ----------
    ds : xarray.Dataset
        The study (:func:`study`).
    size : str
        A size of ``ds``.
    suite : {"hpc", "dl", "llm"}
        The suite.
    threshold : float
        A threshold of ``ds``.

    Returns
    -------
    pandas.DataFrame
        One column group per granularity: effective ratio, share of the ideal's gain kept, slowdown (no bandwidth
        credit, runs only), metadata bytes (% of the footprint); empty where the suite has no workload at ``size``.
    """
    w = ds.sel(size=size, threshold=threshold).where(ds.suite == suite, drop=True)
    w = w.where(w.footprint.notnull(), drop=True)
    if w.workload.size == 0:  # no workload of the suite at this size (the HPC proxies at paper scale...)
        return pd.DataFrame()
    kept = (w.effective_ratio.mean("workload") - 1) / (w.ideal_ratio.mean("workload") - 1)
    parts = {"effective": w.effective_ratio.mean("workload"), "kept": kept,
             "slowdown": w.slowdown.sel(bandwidth_credit=False).mean("workload"),
             "metadata %": 100 * (w.metadata_bytes / w.footprint).mean("workload")}
    frames = {k: v.to_series().unstack("region")[[regions.label(g) for g in regions.GRANULARITIES]]
              for k, v in parts.items()}
    out = pd.concat(frames, axis=1).swaplevel(0, 1, axis=1)
    return out.reindex(columns=[regions.label(g) for g in regions.GRANULARITIES], level=0)


def headline(ds: xr.Dataset, size: str, suite: str, threshold: float = 0.3) -> pd.Series:
    """The effective ratio per granularity: the index's rows beside the paper's.

    The paper's targets, the budget rule at equal traffic and at full budget.

    Parameters
    ----------
    ds : xarray.Dataset
        The study (:func:`study`).
    size, suite, threshold
        As for :func:`table`.

    Returns
    -------
    pandas.Series
        The suite's mean, indexed ``"<granularity>, <rule>"``.
    """
    w = ds.sel(size=size, threshold=threshold, targets="paper").where(ds.suite == suite, drop=True)
    w = w.where(w.footprint.notnull(), drop=True)
    eff = w.effective_ratio.mean("workload")
    return pd.Series({f"{regions.label(g)}, {rule}": float(eff.sel(region=regions.label(g), rule=rule))
                      for g in regions.GRANULARITIES for rule in (("traffic", "budget") if g else ("budget",))})


def smallest_keeping(ds: xr.Dataset, suite: str, threshold: float = 0.3, keep: float = KEEP,
                     slower: float = SLOWER, size: str | None = None) -> pd.DataFrame:
    """Per (targets, rule), the largest region (coarsest granularity) whose mean keeps ``keep`` of the ideal's gain.

    At ``size``, with a slowdown within ``slower`` of one target per allocation's (no bandwidth credit); the rows
    say what each granularity keeps and costs, so where none qualifies the table says why.

    Parameters
    ----------
    ds : xarray.Dataset
        The study (:func:`study`).
    suite : str
        The suite.
    threshold : float
        A threshold of ``ds``.
    keep, slower : float
        The share of the ideal's gain to keep and the slowdown allowed (``KEEP``, ``SLOWER``).
    size : str, optional
        A size of ``ds`` (default the run size).

    Returns
    -------
    pandas.DataFrame
        Indexed by (targets, rule): ``coarsest that keeps it`` ("none" where none does), and per granularity what it
        keeps and its added slowdown.
    """
    size = str(ds.attrs["scale"]) if size is None else size
    w = ds.sel(size=size, threshold=threshold).where(ds.suite == suite, drop=True)
    w = _timed(w.where(w.footprint.notnull(), drop=True))
    kept = (w.effective_ratio.mean("workload") - 1) / (w.ideal_ratio.mean("workload") - 1)
    slow = w.slowdown.sel(bandwidth_credit=False).mean("workload")
    base = slow.sel(region="allocation")
    rows = []
    for tname in TARGET_SETS:
        for rule in regions.RULES:
            ok = [regions.label(g) for g in regions.GRANULARITIES
                  if float(kept.sel(region=regions.label(g), rule=rule, targets=tname)) >= keep
                  and float((slow - base).sel(region=regions.label(g), rule=rule, targets=tname)) <= slower]
            rows.append({"targets": tname, "rule": rule, "coarsest that keeps it": ok[0] if ok else "none",
                         **{f"kept, {regions.label(g)}": float(kept.sel(region=regions.label(g), rule=rule,
                                                                       targets=tname))
                            for g in regions.GRANULARITIES},
                         **{f"+slowdown, {regions.label(g)}": float((slow - base).sel(
                             region=regions.label(g), rule=rule, targets=tname)) for g in regions.GRANULARITIES}})
    return pd.DataFrame(rows).set_index(["targets", "rule"])


def _timed(w: xr.Dataset) -> xr.Dataset:
    """The workloads of ``w`` with a slowdown, where any has one (a size whose summaries are remade in part keeps
    the capacity of all and the slowdown of some: a mean over others would mix them)."""
    has = np.isfinite(w.slowdown).any([d for d in w.slowdown.dims if d != "workload"])
    return w.sel(workload=has) if bool(has.any()) else w


def largest_size(ds: xr.Dataset, suite: str, timed: bool = True) -> str | None:
    """The largest size of ``ds`` at which the suite has workloads.

    Parameters
    ----------
    ds : xarray.Dataset
        The study (:func:`study`).
    suite : str
        The suite.
    timed : bool
        Only sizes with a slowdown: its largest committed summary's scale where one keeps its accesses.

    Returns
    -------
    str or None
        None where there is none.
    """
    best, biggest = None, -1.0
    for size in map(str, ds["size"].values):
        w = ds.sel(size=size).where(ds.suite == suite, drop=True)
        w = w.where(w.footprint.notnull(), drop=True)
        if w.workload.size and (not timed or bool(np.isfinite(w.slowdown).any())):
            if float(w.footprint.mean()) > biggest:
                best, biggest = size, float(w.footprint.mean())
    return best


def frontier(ds: xr.Dataset, size: str, suite: str, threshold: float = 0.3) -> pd.DataFrame:
    """Capacity against its cost, one row per design.

    The designs: one target per allocation; a target per 2 MiB, 64 KiB or 4 KiB region under each rule; the paper's
    targets or with 8x and 16x. Over the workloads with a slowdown where only some have one.

    Parameters
    ----------
    ds : xarray.Dataset
        The study (:func:`study`).
    size, suite, threshold
        As for :func:`table`.

    Returns
    -------
    pandas.DataFrame
        Indexed by (region, rule, targets): ``workloads`` (how many), the suite's mean effective ratio, its part
        without tiering (the tiered entries' buddy bytes counted as device bytes) and the tiered bytes' share, the mean
        ideal ratio, and the mean slowdown without and with bandwidth credit.
    """
    w = ds.sel(size=size, threshold=threshold).where(ds.suite == suite, drop=True)
    w = _timed(w.where(w.footprint.notnull(), drop=True))
    rows = []
    for g in regions.GRANULARITIES:
        for rule in regions.RULES if g else ("budget",):
            for tname in TARGET_SETS:
                c = w.sel(region=regions.label(g), rule=rule, targets=tname)
                slow = c.slowdown.mean("workload") if "slowdown" in c else xr.full_like(c.footprint.mean(), np.nan)
                rows.append({"region": regions.label(g), "rule": rule if g else "-", "targets": tname,
                             "workloads": int(w.workload.size),
                             "effective": float(c.effective_ratio.mean()),
                             "compression alone": float(c.effective_ratio_untiered.mean()),
                             "tiered %": float(100 * (c.tiered_bytes / c.footprint).mean()),
                             "ideal": float(c.ideal_ratio.mean()),
                             "slowdown %": float(100 * (slow.sel(bandwidth_credit=False) - 1)),
                             "slowdown with credit %": float(100 * (slow.sel(bandwidth_credit=True) - 1))})
    return pd.DataFrame(rows).set_index(["region", "rule", "targets"])
