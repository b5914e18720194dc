"""Experiments over the built-in workloads: runs (cached in ``data/``) → labelled results.

The notebooks and ``make reproduce`` share these, so a figure in a notebook and the same
number in the report index come from one code path. Each returns an ``xarray.Dataset``
with a ``workload`` dimension.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr
from tqdm import tqdm

from buddylib import snapshot, workloads
from buddylib.analysis import analyze
from buddylib.compressors import DEFAULT_COMPRESSORS
from buddylib.layout import DEFAULT_THRESHOLD
from buddylib.provenance import (
    ANALYSIS_ONLY,
    ANALYSIS_SOURCES,
    DATA,
    FIXTURE_SCALE,
    FIXTURE_SEED,
    FIXTURES,
    code_version,
    frozen,
)

THRESHOLDS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
#: The CNNs of the larger-batch study (notebook 07) and the mini-batch sizes measured at each scale.
BATCH_NETWORKS = ("alexnet", "vgg16", "resnet50", "squeezenet", "inception", "resnet50_bf16")
BATCHES = {"quick": (4, 8, 16, 32), "default": (8, 16, 32, 64, 128)}
#: What names a result cached beside a run (:func:`slowdowns`, :func:`workload_ratios`): remade from the run and
#: the code, never part of a committed folder of runs.
CACHED = (".slowdown-", ".ratios-")


def cached_result(path: str | Path) -> bool:
    """Whether ``path`` names a result cached beside a run (or a temporary file of one being written)."""
    name = Path(path).name
    return name.startswith(".") or any(c in name for c in CACHED)


def data_folder(scale: str | float, seed: int = 0, data_dir: str | Path | None = None) -> Path:
    """Where runs are read and cached: ``data_dir`` if given; else, at quick scale and seed 0, the
    committed fixtures (:mod:`buddylib.studies.fixtures`: the same numbers on every machine); else ``data/``."""
    if data_dir is not None:
        return Path(data_dir)
    if (str(scale), seed) == (FIXTURE_SCALE, FIXTURE_SEED) and frozen(FIXTURES):
        return FIXTURES
    return DATA


def analysis_code(name: str) -> str:
    """Digest of the code an analysis of ``name``'s run depends on: the workload's own
    (:meth:`~buddylib.workloads.base.Workload.code`) and the analysis, layout and timing model's
    (:data:`~buddylib.provenance.ANALYSIS_ONLY`); editing another workload changes neither."""
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
    """
    parts = []
    key = hashlib.sha256(repr(([float(t) for t in thresholds], list(compressors), policy)).encode()).hexdigest()[:10]
    for name in tqdm(list(names), desc="workloads", unit="workload", disable=not progress):
        t0 = time.perf_counter()
        run_path = workloads.cached_run(name, scale, seed, data, regenerate)
        cache = run_path.with_suffix(f".ratios-{key}.nc")
        part = _reused(cache, run_path, name)
        if part is None:
            ds = analyze(snapshot.load(run_path), compressors, thresholds=thresholds, policy=policy, progress=False)
            part = _per_workload(ds, name, time.perf_counter() - t0)
            # netCDF reads strings back as fixed-width and integer attributes as numpy's: say which were objects
            objects = ",".join(str(v) for v in part.variables if part[v].dtype == object)
            save_cache(part.assign_attrs(code=analysis_code(name), object_variables=objects), cache)
        parts.append(part)
    return xr.concat(parts, "workload", join="outer", coords="different", compat="equals",
                     combine_attrs="drop_conflicts")


def _per_workload(ds: xr.Dataset, name: str, seconds: float) -> xr.Dataset:
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
    """
    from buddylib.paper import HEADLINE
    from buddylib.timing import LINKS, Params, Workset, gpu, link, sweep, um_slowdown

    out = []
    for name in tqdm(list(names), desc="timing model", unit="workload", disable=not progress):
        run_path = workloads.cached_run(name, scale, seed, data)
        cache = run_path.with_suffix(f".slowdown-t{threshold:g}.nc")
        cached = _reused(cache, run_path, name, keep_code=True)
        if cached is not None:
            out.append(cached)
            continue
        ws = Workset.load(run_path)
        ds = sweep(ws, gpus=["V100-32GB", "A100-80GB", "H100-80GB", "H200-141GB"], links=list(LINKS),
                   thresholds=[0.1, 0.2, 0.3, 0.4, 0.5], latency_scales=[0.5, 1, 2, 4, 8],
                   metadata_cache_bytes=[4 << 10, 16 << 10, 64 << 10, 256 << 10],
                   outstanding=[1280, 2560, 5120, 10240, 20480], bandwidth_credit=[False, True])
        eff = analyze(ws.snapshots, [ws.compressor], thresholds=[threshold], progress=False)
        ratio = float(eff.effective_ratio.isel(snapshot=-1).item())
        # UM oversubscribed by Buddy's gain; where Buddy gains nothing, nothing is oversubscribed
        um = [um_slowdown(ws, ratio, gpu(HEADLINE["gpu"]), link(HEADLINE["link"]), Params(um_page_bytes=p)) if ratio > 1
              else (1.0, 0) for p in (4 << 10, 64 << 10, 2 << 20)]
        ds["um_slowdown"] = ("um_page_bytes", [u[0] for u in um], {"units": "1"})
        ds["um_faults"] = ("um_page_bytes", [u[1] for u in um], {"units": "faults per iteration"})
        ds = ds.assign_coords(um_page_bytes=[4 << 10, 64 << 10, 2 << 20])
        ds["effective_ratio"] = ((), ratio, {"units": "1"})
        ds = ds.expand_dims(workload=[name])
        ds.attrs["code"] = analysis_code(name)
        save_cache(ds, cache)
        out.append(ds)
    return xr.concat(out, "workload", coords="different", compat="equals", join="outer",
                     combine_attrs="drop_conflicts")


def memory_vs_batch(names: Sequence[str], batches: Sequence[int], scale: str | float = "quick", seed: int = 0,
                    data: str | Path = "data", steps: int = 3, compressor: str = "bpc32",
                    threshold: float = DEFAULT_THRESHOLD, regenerate: bool = False, progress: bool = True
                    ) -> xr.Dataset:
    """GPU memory and measured training throughput of DL workloads at several mini-batch sizes.

    For each network and batch size: a fresh model trained one warm-up step (so gradients and
    optimizer state exist), then ``steps`` timed steps; the live allocations after them give the
    bytes per kind and, compressed with ``compressor`` under the profile policy at ``threshold``,
    the device bytes Buddy Compression reserves (targets chosen from that snapshot itself).
    Throughput is measured on this machine (torch, one thread), so it is a CPU's curve, not a
    GPU's. Dims (workload, batch, kind); cached beside the runs as ``<name>-<scale>-s<seed>.batch.nc``
    and reused only when every parameter and the code are the same (in a frozen folder: every parameter).
    """
    out = []
    key = {"batches": [int(b) for b in batches], "steps": int(steps), "compressor": compressor,
           "threshold": float(threshold)}
    for name in tqdm(list(names), desc="memory vs batch", unit="workload", disable=not progress):
        if not hasattr(workloads.get(name), "batch_size"):
            raise ValueError(f"workload {name!r} has no mini-batch (not a DL training workload)")
        cache = Path(data) / f"{name}-{scale}-s{seed}.batch.nc"
        if cache.exists() and not regenerate:
            cached = _load_cached(cache)
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
        save_cache(ds, cache)
        out.append(ds)
    return xr.concat(out, "workload", join="outer", fill_value=0, combine_attrs="drop_conflicts")


def largest_batch(ds: xr.Dataset, budget: xr.DataArray | float) -> xr.Dataset:
    """Largest mini-batch whose memory fits ``budget`` bytes, with and without Buddy, and the throughput it buys.

    Memory between measured batch sizes is interpolated linearly (weights, gradients and optimizer
    state are fixed; activations and input grow per sample) and extended past the ends along the
    nearest measured segment; throughput is interpolated in log batch between measured points and
    held at the ends (never extrapolated upwards). ``budget``: bytes, or per workload.
    """
    rows = []
    for name in ds.workload.values:
        d = ds.sel(workload=name)
        b = d.batch.values.astype(float)
        m = float(budget.sel(workload=name)) if isinstance(budget, xr.DataArray) else float(budget)
        row: dict[str, float] = {"budget_bytes": m}
        for key, var in (("uncompressed", "footprint"), ("buddy", "device_footprint")):
            y = d[var].values.astype(float)
            per_sample = (y[-1] - y[-2]) / (b[-1] - b[-2])
            upper = int(b[-1] + max(0.0, m - y[-1]) / per_sample) + 1 if per_sample > 0 else int(b[-1])
            cand = np.arange(1, max(upper, int(b[-1])) + 1, dtype=float)
            mem = np.interp(cand, b, y)
            lo, hi = cand < b[0], cand > b[-1]
            mem[lo] = y[0] + (cand[lo] - b[0]) * (y[1] - y[0]) / (b[1] - b[0])
            mem[hi] = y[-1] + (cand[hi] - b[-1]) * per_sample
            fits = int(cand[mem <= m].max()) if (mem <= m).any() else 0
            row[f"{key}_batch"] = fits
            row[f"{key}_samples_per_s"] = (float(np.interp(np.log(fits), np.log(b), d.samples_per_s.values))
                                           if fits else np.nan)
        rows.append(row)
    out = xr.Dataset({k: ("workload", [r[k] for r in rows]) for k in rows[0]}, coords={"workload": ds.workload.values})
    out["batch_gain"] = out.buddy_batch / out.uncompressed_batch.where(out.uncompressed_batch > 0)
    out["speedup"] = out.buddy_samples_per_s / out.uncompressed_samples_per_s
    for v, u in (("budget_bytes", "bytes"), ("uncompressed_batch", "samples"), ("buddy_batch", "samples"),
                 ("uncompressed_samples_per_s", "samples/s"), ("buddy_samples_per_s", "samples/s"),
                 ("batch_gain", "1"), ("speedup", "1")):
        out[v].attrs["units"] = u
    return out


def save_cache(ds: xr.Dataset, path: Path) -> None:
    """Write a cached result under a temporary name and move it into place: processes that compute the same
    result at once (parallel notebooks, test workers) never read a half-written file."""
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".nc")
    os.close(fd)
    try:
        ds.to_netcdf(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _reused(cache: Path, run_path: Path, name: str, keep_code: bool = False) -> xr.Dataset | None:
    """The result cached at ``cache`` if it was made from the run now at ``run_path`` (not older than it) by the
    analysis code of now (its ``code`` attribute, dropped unless ``keep_code``); else None."""
    if not cache.exists() or cache.stat().st_mtime < run_path.stat().st_mtime:
        return None
    cached = _load_cached(cache)
    if cached.attrs.get("code") != analysis_code(name):
        return None
    if keep_code:
        return cached
    del cached.attrs["code"]
    for v in filter(None, cached.attrs.pop("object_variables", "").split(",")):
        cached[v] = cached[v].astype(object)
    cached.attrs = {k: v.item() if isinstance(v, np.generic) else v for k, v in cached.attrs.items()}
    return cached


def _load_cached(path: Path) -> xr.Dataset:
    """A cached result, in memory and without its file encodings: kept, an encoding such as a
    2-character string width would truncate longer workload names when the result is written again."""
    with xr.open_dataset(path) as ds:
        ds = ds.load()
    for v in ds.variables.values():
        v.encoding = {}
    return ds


def final(ds: xr.Dataset) -> xr.Dataset:
    """The last snapshot of each workload (runs may differ in snapshot count)."""
    last = ds.step.notnull().cumsum("snapshot").argmax("snapshot")
    return ds.isel(snapshot=last)


def geometric_mean(x: xr.DataArray | pd.Series | np.ndarray, dim: str = "workload") -> xr.DataArray | float:
    """Geometric mean, the right average of ratios: along ``dim`` of a DataArray; of all values
    of a Series or array, as a float (a notebook's table column)."""
    if isinstance(x, xr.DataArray):
        return np.exp(np.log(x).mean(dim))
    return float(np.exp(np.log(x).mean()))
