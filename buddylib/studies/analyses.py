"""The analyses of the built-in workloads' runs that results are cached and committed from: capacity per snapshot
(:func:`~buddylib.studies.analyses.workload_ratios`), the timing model's sweep
(:func:`~buddylib.studies.analyses.slowdowns`), memory against mini-batch
(:func:`~buddylib.studies.analyses.memory_vs_batch`).

This module is part of every such result's code digest (:data:`~buddylib.provenance.ANALYSIS_SOURCES`), so it holds
what computes them and nothing else: what draws or formats them for the notebooks is in
:mod:`buddylib.studies.experiments`, the caching in :mod:`buddylib.studies.cache`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import xarray as xr
from tqdm import tqdm

from buddylib import snapshot, workloads
from buddylib.analysis import analyze
from buddylib.compressors import DEFAULT_COMPRESSORS
from buddylib.layout import DEFAULT_THRESHOLD
from buddylib.provenance import ANALYSIS_ONLY, ANALYSIS_SOURCES, code_version, frozen
from buddylib.studies import cache as cache_
from buddylib.timing import accesses

THRESHOLDS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
#: The CNNs of the larger-batch study (notebook 07) and the mini-batch sizes measured at each scale.
BATCH_NETWORKS = ("alexnet", "vgg16", "resnet50", "squeezenet", "inception", "resnet50_bf16")
BATCHES = {"quick": (4, 8, 16, 32), "default": (8, 16, 32, 64, 128)}
def analysis_code(name: str) -> str:
    """Digest of the code an analysis of ``name``'s run depends on.

    The workload's own (:meth:`~buddylib.workloads.base.Workload.code`) and the analysis, layout and timing model's
    (:data:`~buddylib.provenance.ANALYSIS_ONLY`); editing another workload changes neither.

    Parameters
    ----------
    name : str
        A built-in workload.

    Returns
    -------
    str
        ``ANALYSIS+WORKLOAD`` digests.

    Raises
    ------
    ValueError
        An unknown workload.
    """
    return f"{code_version(*ANALYSIS_ONLY)}+{workloads.get(name).code()}"


def workload_ratios(names: Sequence[str], scale: str | float = "quick", seed: int = 0,
                    data: str | Path = "data", thresholds: Sequence[float] = THRESHOLDS,
                    compressors: Sequence[str] = DEFAULT_COMPRESSORS, policy: str = "profile",
                    regenerate: bool = False, progress: bool = True) -> xr.Dataset:
    """Capacity results of every snapshot of every workload: dims (workload, snapshot, ...).

    Per-allocation variables are reduced to per-kind sums (``kind`` dimension) so workloads
    with different allocations stack. ``seconds`` is the time it took to run (or load) and analyse.
    Each workload's result is cached beside its run (``.ratios-KEY.nc``, ``KEY`` naming the thresholds,
    compressors and policy) and reused while the run and the analysis code are unchanged, so notebooks and
    checks that analyse the same runs analyse them once.

    Parameters
    ----------
    names : sequence of str
        Built-in workloads.
    scale, seed, data, regenerate
        The runs' scale and seed, their folder, and whether to run them again
        (:func:`~buddylib.workloads.cached_run`).
    thresholds, compressors, policy
        As for :func:`~buddylib.analysis.analyze`.
    progress : bool
        A progress bar over the workloads.

    Returns
    -------
    xarray.Dataset
        :func:`~buddylib.analysis.analyze`'s variables without an ``allocation`` dimension, plus ``kind_bytes``,
        ``kind_ideal_ratio``, ``kind_effective_ratio``, ``footprint``, ``n_allocations``, ``sector_count_total`` and
        ``seconds``.

    Raises
    ------
    ValueError
        An unknown workload, ``regenerate`` in a frozen folder, or what :func:`~buddylib.analysis.analyze` rejects.
    FileNotFoundError
        A run missing from a frozen folder.
    """
    parts = []
    key = hashlib.sha256(repr(([float(t) for t in thresholds], list(compressors), policy)).encode()).hexdigest()[:10]
    for name in tqdm(list(names), desc="workloads", unit="workload", disable=not progress):
        t0 = time.perf_counter()
        run_path = workloads.cached_run(name, scale, seed, data, regenerate)
        cache = run_path.with_suffix(f".ratios-{key}.nc")
        part = cache_.reused(cache, run_path, analysis_code(name))
        if part is None:
            ds = analyze(snapshot.load(run_path), compressors, thresholds=thresholds, policy=policy, progress=False)
            part = per_workload(ds, name, time.perf_counter() - t0)
            # netCDF reads strings back as fixed-width and integer attributes as numpy's: say which were objects
            objects = ",".join(str(v) for v in part.variables if part[v].dtype == object)
            cache_.save_cache(part.assign_attrs(code=analysis_code(name), object_variables=objects), cache)
        parts.append(part)
    return xr.concat(parts, "workload", join="outer", coords="different", compat="equals",
                     combine_attrs="drop_conflicts")


def per_workload(ds: xr.Dataset, name: str, seconds: float) -> xr.Dataset:
    """One workload's capacity result reduced to what the notebooks table per workload.

    Parameters
    ----------
    ds : xarray.Dataset
        An :func:`~buddylib.analysis.analyze` result.
    name : str
        The workload (the new ``workload`` dimension's label).
    seconds : float
        How long its run and analysis took.

    Returns
    -------
    xarray.Dataset
        Bytes and ratios per tensor kind, stored and device bytes, the run's seconds.
    """
    by_kind = ds[["allocation_bytes", "device_bytes", "metadata_bytes"]].groupby("kind").sum()
    stored = (ds.sector_count * ds.sectors).sum("sectors") * 32
    sector_total = ds.sector_count.sum("allocation")
    kinds = xr.Dataset({
        "kind_bytes": by_kind.allocation_bytes,
        "kind_ideal_ratio": (ds.allocation_bytes.groupby("kind").sum()
                             / stored.groupby("kind").sum().where(lambda x: x > 0)),
        "kind_effective_ratio": by_kind.allocation_bytes / (by_kind.device_bytes + by_kind.metadata_bytes),
    })
    keep = [v for v in ds.data_vars if "allocation" not in ds[v].dims]
    out = xr.merge([ds[keep], kinds], combine_attrs="override")
    out = out.assign(footprint=ds.allocation_bytes.sum("allocation"),
                     n_allocations=(ds.allocation_bytes > 0).sum("allocation"),
                     seconds=((), seconds), sector_count_total=sector_total).drop_vars(["workload"], errors="ignore")
    out["footprint"].attrs["units"] = "bytes"
    out["seconds"].attrs["units"] = "s"
    return out.expand_dims(workload=[name])


def slowdowns(names: Sequence[str], scale: str | float = "quick", seed: int = 0, data: str | Path = "data",
              threshold: float = DEFAULT_THRESHOLD, progress: bool = True) -> xr.Dataset:
    """Timing-model sweep for each saved workload run, plus the Unified-Memory comparison.

    Each workload's result is cached beside its run (``.slowdown-t0.3.nc``) and reused while the
    run is unchanged, so the notebooks and ``make reproduce`` compute it once.

    Parameters
    ----------
    names : sequence of str
        Built-in workloads.
    scale, seed, data
        The runs' scale, seed and folder (:func:`~buddylib.workloads.cached_run`).
    threshold : float
        The buddy threshold whose last-snapshot effective ratio sets Unified Memory's oversubscription.
    progress : bool
        A progress bar over the workloads.

    Returns
    -------
    xarray.Dataset
        ``sensitivity`` of each run, along ``workload``.

    Raises
    ------
    ValueError
        An unknown workload.
    FileNotFoundError
        A run missing from a frozen folder.
    """
    from buddylib.timing import Workset

    out = []
    for name in tqdm(list(names), desc="timing model", unit="workload", disable=not progress):
        run_path = workloads.cached_run(name, scale, seed, data)
        cache = run_path.with_suffix(f".slowdown-t{threshold:g}.nc")
        cached = cache_.reused(cache, run_path, analysis_code(name), keep_code=True)
        if cached is not None:
            out.append(cached)
            continue
        ws = Workset.load(run_path)
        eff = analyze(ws.snapshots, [ws.compressor], thresholds=[threshold], progress=False)
        ds = sensitivity(ws, float(eff.effective_ratio.isel(snapshot=-1).item())).expand_dims(workload=[name])
        ds.attrs["code"] = analysis_code(name)
        cache_.save_cache(ds, cache)
        out.append(ds)
    return xr.concat(out, "workload", coords="different", compat="equals", join="outer",
                     combine_attrs="drop_conflicts")


#: The sweep of ``sensitivity`` (notebook 05): every GPU and link preset, the thresholds, link latency (x the
#: preset's), metadata-cache sizes (those a summary keeps, :data:`buddylib.timing.accesses.METADATA_CACHES`), link
#: requests in flight and both device-traffic accountings; Unified Memory at three page sizes.
SWEEP = {"gpus": ("V100-32GB", "A100-80GB", "H100-80GB", "H200-141GB"), "thresholds": (0.1, 0.2, 0.3, 0.4, 0.5),
         "latency_scales": (0.5, 1, 2, 4, 8), "metadata_cache_bytes": accesses.METADATA_CACHES,
         "outstanding": (1280, 2560, 5120, 10240, 20480), "bandwidth_credit": (False, True)}
UM_PAGES = accesses.UM_PAGES


def sensitivity(ws, ratio: float) -> xr.Dataset:
    """The timing model's sweep (:data:`SWEEP`) of a run and Unified Memory oversubscribed by ``ratio``.

    Parameters
    ----------
    ws : Workset or Accesses
        A run (a :class:`~buddylib.timing.Workset`) or a committed summary's accesses
        (:class:`~buddylib.timing.accesses.Accesses`).
    ratio : float
        The effective ratio Buddy gains (where it gains nothing, nothing is oversubscribed).

    Returns
    -------
    xarray.Dataset
        :func:`~buddylib.timing.sweep`'s result plus ``um_slowdown`` and ``um_faults`` per ``um_page_bytes``
        (``UM_PAGES``) and ``effective_ratio``.
    """
    from buddylib.paper import HEADLINE
    from buddylib.timing import LINKS, Params, gpu, link, sweep, um_slowdown

    ds = sweep(ws, links=list(LINKS), **{k: list(v) for k, v in SWEEP.items()})
    um = [um_slowdown(ws, ratio, gpu(HEADLINE["gpu"]), link(HEADLINE["link"]), Params(um_page_bytes=p)) if ratio > 1
          else (1.0, 0) for p in UM_PAGES]
    ds["um_slowdown"] = ("um_page_bytes", [u[0] for u in um], {"units": "1"})
    ds["um_faults"] = ("um_page_bytes", [u[1] for u in um], {"units": "faults per iteration"})
    ds = ds.assign_coords(um_page_bytes=list(UM_PAGES))
    ds["effective_ratio"] = ((), ratio, {"units": "1"})
    return ds


def memory_vs_batch(names: Sequence[str], batches: Sequence[int], scale: str | float = "quick", seed: int = 0,
                    data: str | Path = "data", steps: int = 3, compressor: str = "bpc32",
                    threshold: float = DEFAULT_THRESHOLD, regenerate: bool = False, progress: bool = True
                    ) -> xr.Dataset:
    """GPU memory and measured training throughput of DL workloads at several mini-batch sizes.

    Per network and batch size, a fresh model trains a warm-up step (so gradients and optimizer state exist) and
    ``steps`` timed ones; the live allocations then give the bytes per kind and, under Buddy (profile policy), the
    device bytes (targets chosen from that snapshot). Throughput is this machine's (torch, one thread): a CPU's curve,
    not a GPU's. Cached beside the runs as ``<name>-<scale>-s<seed>.batch.nc``, reused while every parameter and the
    code are the same (in a frozen folder: every parameter). ``ValueError`` for a workload with no mini-batch, or a
    measurement a frozen folder lacks.

    Parameters
    ----------
    names, batches, scale, seed, data, steps, compressor, threshold, regenerate, progress
        DL training workloads, batch sizes (``BATCHES``), the model's scale and seed, the cache's folder, the timed
        steps, Buddy's compressor and threshold, whether to measure again, a progress bar.

    Returns
    -------
    xarray.Dataset
        Dims (workload, batch, kind): ``kind_bytes``, ``kind_device_bytes``, their totals (``footprint``,
        ``device_footprint``), ``step_seconds``, ``samples_per_s``.
    """
    out = []
    key = {"batches": [int(b) for b in batches], "steps": int(steps), "compressor": compressor,
           "threshold": float(threshold)}
    for name in tqdm(list(names), desc="memory vs batch", unit="workload", disable=not progress):
        if not hasattr(workloads.get(name), "batch_size"):
            raise ValueError(f"workload {name!r} has no mini-batch (not a DL training workload)")
        cache = Path(data) / f"{name}-{scale}-s{seed}.batch.nc"
        if cache.exists() and not regenerate:
            cached = cache_.load_cached(cache)
            held = {"batches": [int(b) for b in cached.batch.values], "steps": int(cached.attrs.get("steps", -1)),
                    "compressor": cached.attrs.get("compressor"), "threshold": float(cached.attrs.get("threshold", -1))}
            if held == key and (frozen(data) or cached.attrs.get("code") == code_version(*ANALYSIS_SOURCES)):
                out.append(cached)
                continue
        if frozen(data):  # committed fixtures are read as they are, never remade in place
            raise ValueError(f"{cache}: the committed fixtures in {data} hold no memory-vs-batch measurement "
                             f"of {name} with {key}; pass another data folder to measure it")
        rows = []
        for b in batches:
            w = workloads.get(name)  # a fresh model for every batch size
            w.batch_size = int(b)
            w.setup(workloads.footprint_bytes(scale), np.random.default_rng(seed))
            w.step()  # warm-up: first-touch allocations, gradients and optimizer state
            t0 = time.perf_counter()
            for _ in range(steps):
                w.step()
            seconds = (time.perf_counter() - t0) / steps
            live = w.allocations()
            snap = snapshot.snapshot_from_arrays({n: a for n, (a, _) in live.items()}, name,
                                                 kinds={n: k for n, (_, k) in live.items()})
            ds = analyze(snap, [compressor], thresholds=[threshold], progress=False)
            ds = ds.isel(snapshot=0, threshold=0).sel(compressor=compressor)
            by_kind = ds[["allocation_bytes", "device_bytes", "metadata_bytes"]].groupby("kind").sum()
            rows.append(xr.Dataset({
                "kind_bytes": by_kind.allocation_bytes,
                "kind_device_bytes": by_kind.device_bytes + by_kind.metadata_bytes,
                "step_seconds": ((), seconds),
                "samples_per_s": ((), b / seconds),
            }).drop_vars(["compressor", "threshold", "snapshot", "step", "time", "workload"], errors="ignore"))
        ds = xr.concat(rows, "batch", join="outer", fill_value=0).assign_coords(batch=list(batches))
        ds = ds.assign(footprint=ds.kind_bytes.sum("kind"), device_footprint=ds.kind_device_bytes.sum("kind"))
        units = {"kind_bytes": "bytes", "kind_device_bytes": "bytes", "footprint": "bytes",
                 "device_footprint": "bytes", "step_seconds": "s", "samples_per_s": "samples/s"}
        for v, u in units.items():
            ds[v].attrs["units"] = u
        ds["device_footprint"].attrs["description"] = (f"device + metadata bytes under Buddy ({compressor}, "
                                                       f"threshold {threshold})")
        ds.attrs.update(compressor=compressor, threshold=threshold, scale=str(scale), seed=seed, steps=steps,
                        code=code_version(*ANALYSIS_SOURCES))
        ds = ds.expand_dims(workload=[name])
        cache_.save_cache(ds, cache)
        out.append(ds)
    return xr.concat(out, "workload", join="outer", fill_value=0, combine_attrs="drop_conflicts")
