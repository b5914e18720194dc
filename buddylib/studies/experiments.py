"""Experiments over the built-in workloads for the notebooks and ``make reproduce``: runs (cached in ``data/``) →
labelled results, and the helpers that read them (the last snapshot, geometric means, the largest batch that fits).

The notebooks and ``make reproduce`` share these, so a figure in a notebook and the same number in the report index
come from one code path. Each returns an ``xarray.Dataset`` with a ``workload`` dimension. The analyses themselves
are :mod:`buddylib.studies.analyses` (in the cached results' code digest), named here too; editing a helper here
stales no cached or committed result.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from buddylib.provenance import DATA, FIXTURE_SCALE, FIXTURE_SEED, FIXTURES, frozen
from buddylib.studies.analyses import (
    BATCH_NETWORKS,
    BATCHES,
    THRESHOLDS,
    analysis_code,
    memory_vs_batch,
    slowdowns,
    workload_ratios,
)

__all__ = ["BATCHES", "BATCH_NETWORKS", "THRESHOLDS", "analysis_code", "data_folder", "final", "geometric_mean",
           "largest_batch", "memory_vs_batch", "slowdowns", "workload_ratios"]


def data_folder(scale: str | float, seed: int = 0, data_dir: str | Path | None = None) -> Path:
    """Where runs are read and cached.

    Parameters
    ----------
    scale : str or float
        The runs' scale (``"quick"``, ``"default"``, ``"paper"`` or a footprint).
    seed : int
        The runs' seed.
    data_dir : str or pathlib.Path, optional
        Use this folder.

    Returns
    -------
    pathlib.Path
        ``data_dir`` if given; else, at quick scale and seed 0, the committed fixtures
        (:mod:`buddylib.studies.fixtures`: the same numbers on every machine); else ``data/``.
    """
    if data_dir is not None:
        return Path(data_dir)
    if (str(scale), seed) == (FIXTURE_SCALE, FIXTURE_SEED) and frozen(FIXTURES):
        return FIXTURES
    return DATA


def largest_batch(ds: xr.Dataset, budget: xr.DataArray | float) -> xr.Dataset:
    """Largest mini-batch whose memory fits ``budget`` bytes, with and without Buddy, and the throughput it buys.

    Memory between measured batch sizes is interpolated linearly (weights, gradients and optimizer
    state are fixed; activations and input grow per sample) and extended past the ends along the
    nearest measured segment; throughput is interpolated in log batch between measured points and
    held at the ends (never extrapolated upwards).

    Parameters
    ----------
    ds : xarray.Dataset
        A :func:`~buddylib.studies.analyses.memory_vs_batch` result (at least two batch sizes).
    budget : float or xarray.DataArray
        Bytes of GPU memory, or per workload.

    Returns
    -------
    xarray.Dataset
        Per workload: ``budget_bytes``, ``uncompressed_batch`` and ``buddy_batch`` (0 where none fits), their
        ``*_samples_per_s``, ``batch_gain`` and ``speedup`` (Buddy's over uncompressed), with units in ``attrs``.
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


def final(ds: xr.Dataset) -> xr.Dataset:
    """The last snapshot of each workload (runs may differ in snapshot count).

    Parameters
    ----------
    ds : xarray.Dataset
        Results with dims ``workload`` and ``snapshot`` and a ``step`` variable (NaN past a run's end).

    Returns
    -------
    xarray.Dataset
        ``ds`` without its ``snapshot`` dimension.
    """
    last = ds.step.notnull().cumsum("snapshot").argmax("snapshot")
    return ds.isel(snapshot=last)


def geometric_mean(x: xr.DataArray | pd.Series | np.ndarray, dim: str = "workload") -> xr.DataArray | float:
    """Geometric mean, the right average of ratios.

    Parameters
    ----------
    x : xarray.DataArray, pandas.Series or numpy.ndarray
        Positive values.
    dim : str
        The dimension a DataArray is averaged along.

    Returns
    -------
    xarray.DataArray or float
        Along ``dim`` of a DataArray; of all values of a Series or array, as a float (a notebook's table column).

    Examples
    --------
    >>> import numpy as np
    >>> geometric_mean(np.array([1.0, 4.0]))
    2.0
    """
    if isinstance(x, xr.DataArray):
        return np.exp(np.log(x).mean(dim))
    return float(np.exp(np.log(x).mean()))
