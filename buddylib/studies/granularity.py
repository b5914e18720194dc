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
from buddylib.provenance import machine
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

__all__ = ["ACROSS_KERNELS", "COMMITTED", "COMPRESSOR", "DL_NETWORKS", "SUMMARY_SCALES", "TARGET_SETS", "THRESHOLDS",
           "TOLERANCE", "check_committed", "committed_path", "frontier", "headline", "key", "largest_size", "measure",
           "same_bytes", "smallest_keeping", "study", "summaries_read", "table", "write_committed"]

#: Where the committed studies lie (one netCDF file per scale).
COMMITTED = fixtures.DATA / "summaries" / "granularity"
#: The largest relative change :func:`check_committed` accepts: the fixtures' (the default study's DL runs are
#: torch's float bytes, which move between CPUs; the rest is the same bytes everywhere and compares closer).
TOLERANCE = fixtures.TOLERANCE
#: What :func:`check_committed` compares in rows made from bytes that move with the CPU's kernels (:func:`same_bytes`)
#: where the study was made with other kernels than here: what the fixtures' check compares of a network's run
#: (:func:`buddylib.studies.fixtures.check`), the footprint exactly and the ideal ratio within :data:`TOLERANCE`. The
#: rest of such a row follows from which entries' sizes fall just above or below a target, and moves further: the
#: committed studies (AMD EPYC, PyTorch's AVX2 kernels) against those made before on an Intel Xeon (AVX-512) differ in
#: the default study's DL rows by up to 6.0% in the ideal ratio but 5.1x in the overflow (buddy and tiered bytes from
#: none to megabytes), in the quick study's LLM rows by 0.03% and 1.75x. Those are reported, not failed.
ACROSS_KERNELS = {"footprint": 0.0, "ideal_ratio": TOLERANCE}
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

    Rows made from the same bytes on the study's machine and here compare exactly (:func:`same_bytes`); rows made
    from bytes that depend on the CPU's kernels compare as the fixtures do (:data:`ACROSS_KERNELS`), where the study
    was made with other kernels than here, and exactly where with the same.

    Parameters
    ----------
    scale : str
        The study's scale.
    seed : int
        Its seed.
    fresh : xarray.Dataset, optional
        A study made already, which may hold some workloads only; its ``machine`` attribute (as
        :func:`write_committed` records it) says where, else here.

    Returns
    -------
    pandas.DataFrame
        Per variable and kind of rows (``rows``: "same bytes everywhere" or "bytes of the CPU's kernels"): the largest
        relative change (NaN where both are NaN counts as equal), how it is ``compared`` ("exact", "within 10%" or
        "reported only") and ``ok``.

    Raises
    ------
    FileNotFoundError
        No study committed at ``scale`` and ``seed``.
    """
    path = committed_path(scale, seed)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no committed study; `buddy granularity --write --scale {scale}` makes it")
    kept = cache.load_cached(path)
    here = json.loads(fresh.attrs["machine"]) if fresh is not None and "machine" in fresh.attrs else machine()
    fresh = measure(scale, seed) if fresh is None else fresh
    kept = kept.sel(workload=fresh.workload.values)
    exact = same_bytes(kept, scale, json.loads(kept.attrs.get("machine", "{}")), here)
    rows = []
    for v in kept.data_vars:
        a, b = kept[v], fresh[v]
        if a.dims != b.dims or a.shape != b.shape:
            rows.append({"variable": v, "rows": "all", "max_rel_change": np.inf, "compared": "shape", "ok": False})
            continue
        rel = a.copy(data=fixtures.relative_change(a, b))
        for label, mask, limit in (("same bytes everywhere", exact, 0.0),
                                   ("bytes of the CPU's kernels", ~exact, ACROSS_KERNELS.get(v))):
            if not bool(mask.any()):
                continue
            worst = float(rel.where(mask).max(skipna=True))
            compared = "reported only" if limit is None else "exact" if limit == 0 else f"within {limit:.0%}"
            rows.append({"variable": v, "rows": label, "max_rel_change": worst, "compared": compared,
                         "ok": limit is None or worst <= limit})
    return pd.DataFrame(rows).set_index(["variable", "rows"])


def same_bytes(ds: xr.Dataset, scale: str, made: dict, here: dict) -> xr.DataArray:
    """Which rows of the study at ``scale`` are made from the same bytes on a machine described as ``made`` and on one
    described as ``here`` (:func:`buddylib.provenance.machine`).

    The committed summaries' sizes, and at quick scale the committed fixtures' runs, are the same bytes everywhere;
    the HPC proxies' runs are on two CPUs with FMA and AVX2 and the same C library (their libm); every run is on two
    machines with the same kernels (all but the CPU's name alike). The LLM kinds' and the networks' runs made here
    are PyTorch's float bytes, which move with its kernels.

    Parameters
    ----------
    ds : xarray.Dataset
        The study (its ``size`` and ``suite`` coordinates).
    scale : str
        Its run scale.
    made, here : dict
        The two machines.

    Returns
    -------
    xarray.DataArray
        Boolean, per workload and size.
    """
    at_run = ds["size"] == str(scale)
    kernels = {k: v for k, v in made.items() if k != "cpu"} == {k: v for k, v in here.items() if k != "cpu"}
    libm = bool(made.get("fma_avx2")) and bool(here.get("fma_avx2")) and made.get("libc") == here.get("libc")
    from_fixtures = (ds.suite != "llm") & (str(scale) == "quick")
    return (~at_run | from_fixtures | ((ds.suite == "hpc") & libm) | kernels).transpose("workload", "size")


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
