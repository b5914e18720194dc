"""The training studies of the DL networks measured, one network at a time: how ratios evolve as a network trains
(:func:`~buddylib.studies.training.maturity_run`), with Adam instead of the recipe's optimizer
(:func:`~buddylib.studies.training.adam_run`), and under a blob-based
framework's accounting (:func:`~buddylib.studies.training.caffe_run`).

This module is in each study's code digest (:data:`buddylib.studies.fidelity.STUDY_SOURCES`), so it holds what
computes them and nothing else: caching, committing and the tables notebook 09 shows are in
:mod:`buddylib.studies.fidelity`.
"""

from __future__ import annotations

import time

import numpy as np
import xarray as xr

from buddylib import paper, workloads
from buddylib.analysis import analyze
from buddylib.workloads.base import PAPER_COMPRESSORS

#: Compressors of the fidelity study: the paper's BPC, ZVC (scattered zeros), and the per-entry best of both.
COMPRESSORS = PAPER_COMPRESSORS


def maturity_run(name: str, scale: str | float, seed: int, key: dict) -> xr.Dataset:
    """One network's maturity result, made here, uncached.

    Parameters
    ----------
    name : str
        A DL training workload.
    scale, seed : str or float, int
        The run's scale and seed.
    key : dict
        :func:`~buddylib.studies.fidelity.maturity_key`'s: the run's ``steps`` and ``snapshots`` (all of it lands in the
        result's attributes).

    Returns
    -------
    xarray.Dataset
        Dims (workload, snapshot): the activations' bytes, zero fraction and ideal ratio, the snapshot's ideal and
        effective ratio (BPC-32, oracle policy), and ``final_effective_ratio`` (targets chosen over the run).

    Raises
    ------
    ValueError
        An unknown workload, or one that does not train.
    """
    steps, snapshots = key["steps"], key["snapshots"]
    w = workloads.get(name)
    if not hasattr(w, "train_steps"):
        raise ValueError(f"workload {name!r} does not train (not a DL training workload)")
    w.train_steps = steps
    t0 = time.perf_counter()
    run = w.run(scale, seed=seed, n_snapshots=snapshots, compressors=COMPRESSORS, keep_bytes=True)
    at = {"thresholds": [paper.HEADLINE["threshold"]], "progress": False}
    ds = analyze(run.snapshots, COMPRESSORS, policy="oracle", **at)
    over_run = analyze(run.snapshots, ["bpc32"], **at).effective_ratio.isel(snapshot=-1).item()
    acts = ds.kind == "activations"
    stored = (ds.sector_count * ds.sectors).sum("sectors") * 32
    zeros = []
    for snap in run.snapshots:
        arrays = [np.asarray(a.data) for a in snap.allocations if a.kind == "activations"]
        n = sum(x.size for x in arrays)
        zeros.append(sum(int(np.count_nonzero(x == 0)) for x in arrays) / n if n else np.nan)
    act_bytes = ds.allocation_bytes.where(acts).sum("allocation")
    res = xr.Dataset({
        "activation_bytes": act_bytes,
        "activation_zero_fraction": ("snapshot", np.array(zeros)),
        "activation_ideal_ratio": act_bytes / stored.where(acts).sum("allocation").where(lambda x: x > 0),
        "ideal_ratio": ds.ideal_ratio_total.sel(compressor="bpc32", drop=True),
        "effective_ratio": ds.effective_ratio.sel(compressor="bpc32", drop=True).isel(threshold=0, drop=True),
    }).drop_vars(["workload"], errors="ignore")
    units = {"activation_bytes": "bytes", "activation_zero_fraction": "1", "activation_ideal_ratio": "1",
             "ideal_ratio": "1", "effective_ratio": "1"}
    for v, u in units.items():
        res[v].attrs["units"] = u
    res["final_effective_ratio"] = ((), float(over_run), {
        "units": "1", "description": "effective ratio of the last snapshot, targets chosen over the run (profile)"})
    res.attrs.update(key, seconds=time.perf_counter() - t0, scale=str(scale))
    return res.expand_dims(workload=[name])


def adam_run(name: str, scale: str | float, seed: int) -> xr.Dataset:
    """One network trained with Adam instead of its recipe's optimizer, its ratios per snapshot, made here, uncached.

    Parameters
    ----------
    name : str
        A DL training workload.
    scale, seed : str or float, int
        The run's scale and seed.

    Returns
    -------
    xarray.Dataset
        Dims (workload, compressor): the final snapshot's ``effective_ratio`` and ``optimizer_share`` (the optimizer
        state's share of its bytes).

    Raises
    ------
    ValueError
        An unknown workload, or one that does not train.
    """
    w = workloads.get(name)
    if not hasattr(w, "adam"):
        raise ValueError(f"workload {name!r} does not train (not a DL training workload)")
    w.adam = True
    t0 = time.perf_counter()
    run = w.run(scale, seed=seed, compressors=COMPRESSORS)
    ds = analyze(run.snapshots, COMPRESSORS, thresholds=[paper.HEADLINE["threshold"]], progress=False)
    last = ds.isel(snapshot=-1, threshold=0)
    state = last.allocation_bytes.where(last.kind == "optimizer").sum("allocation")
    res = xr.Dataset({
        "effective_ratio": last.effective_ratio.assign_attrs(units="1"),
        "optimizer_share": (state / last.allocation_bytes.sum("allocation")).assign_attrs(
            units="1", description="the optimizer state's share of the final snapshot's bytes"),
    }).drop_vars(["workload", "snapshot", "step", "time", "threshold"], errors="ignore")
    res.attrs.update(optimizer=str(run.profile.kernels[-1].name), scale=str(scale), seconds=time.perf_counter() - t0)
    return res.expand_dims(workload=[name])


def caffe_run(name: str, scale: str | float, seed: int) -> xr.Dataset:
    """One network's memory under a blob-based framework's accounting (Caffe's), beside PyTorch's, made here, uncached.

    Parameters
    ----------
    name : str
        A DL network.
    scale, seed : str or float, int
        The run's scale and seed.

    Returns
    -------
    xarray.Dataset
        Dims (workload, accounting, point): ``footprint``, ``ideal_ratio`` and ``effective_ratio`` (BPC-32).
    """
    from buddylib.workloads.dl import caffe

    run = caffe.caffe_run(name, scale, seed, compressors=["bpc32"])
    at = {"thresholds": [paper.HEADLINE["threshold"]], "progress": False}
    parts = []
    for label, snaps, points in (("caffe", run.snapshots, list(run.points)),
                                 ("pytorch", run.pytorch, ["before_forward", "after_update"])):
        ds = analyze(snaps, ["bpc32"], **at).sel(compressor="bpc32", drop=True).isel(threshold=0, drop=True)
        parts.append(xr.Dataset({
            "footprint": ds.allocation_bytes.sum("allocation"), "ideal_ratio": ds.ideal_ratio_total,
            "effective_ratio": ds.effective_ratio}).assign_coords(snapshot=points).rename(snapshot="point")
            .drop_vars(["step", "workload"], errors="ignore").expand_dims(accounting=[label]))
    res = xr.concat(parts, "accounting", join="outer").reindex(point=list(caffe.POINTS))
    res.attrs.update(step=run.step, scale=str(scale))
    return res.expand_dims(workload=[name])
