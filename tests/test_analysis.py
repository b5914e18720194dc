"""analyze(): labelled results that match hand calculations, serial == chunked == dask."""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
import xarray as xr

from buddylib.analysis import allocation_table, analyze, total_row
from buddylib.snapshot import Allocation, Snapshot

RNG = np.random.default_rng(11)
ARRAYS = {
    "zeros": np.zeros(4096, np.float32),  # 128 entries, all zero: 0 sectors each
    "ramp": np.arange(4096, dtype=np.int32),  # 128 entries of 32 consecutive ints: 1 sector each
    "noise": RNG.integers(0, 2**32, 4096, dtype=np.uint32),  # incompressible: 4 sectors each
}


def test_hand_computed_capacity() -> None:
    ds = analyze(ARRAYS, compressors=["bpc32"], thresholds=[0.3])
    at = {"compressor": "bpc32", "threshold": 0.3, "snapshot": 0}
    assert ds.chosen_target.sel(**at).values.tolist() == [4.0, 4.0, 1.0]
    assert ds.sector_count.sel(snapshot=0, compressor="bpc32").values.tolist() == [
        [128, 0, 0, 0, 0], [0, 128, 0, 0, 0], [0, 0, 0, 0, 128]]
    # device: 128 x 32 + 128 x 32 + 128 x 128 bytes; metadata: 384 entries x 0.5 B
    device = 128 * 32 * 2 + 128 * 128
    assert float(ds.device_bytes.sel(**at).sum()) == device
    assert float(ds.buddy_bytes.sel(**at).sum()) == 128 * 96 * 2
    assert float(ds.effective_ratio.sel(**at)) == pytest.approx(3 * 16384 / (device + 384 / 2))
    # ideal: all-zero data needs no storage at all; the ramp 4x; noise 1x
    assert ds.ideal_ratio.sel(snapshot=0, compressor="bpc32").values.tolist() == [np.inf, 4.0, 1.0]
    assert float(ds.ideal_ratio_total.sel(snapshot=0, compressor="bpc32")) == pytest.approx(
        3 * 16384 / (128 * 32 + 128 * 128))
    assert float(ds.buddy_access_fraction.sel(**at)) == 0.0
    assert ds.effective_ratio.attrs["units"] == "1" and ds.device_bytes.attrs["units"] == "bytes"


def test_threshold_sweep_and_overflow() -> None:
    # half the entries compress to 1 sector, half are incompressible
    x = np.concatenate([np.arange(2048, dtype=np.int32), RNG.integers(0, 2**31, 2048, dtype=np.int32)])
    ds = analyze({"x": x}, compressors=["bpc32"], thresholds=[0.0, 0.5, 0.49])
    chosen = ds.chosen_target.sel(snapshot=0, allocation="x", compressor="bpc32")
    assert chosen.values.tolist() == [1.0, 4.0, 1.0]  # at r = 4/3, 2 or 4: exactly half overflow
    np.testing.assert_allclose(ds.overflow.sel(snapshot=0, allocation="x", compressor="bpc32"), [0, 0.5, 0])
    np.testing.assert_allclose(ds.overflow_fraction.sel(snapshot=0, allocation="x", compressor="bpc32"),
                               [0, 0.5, 0.5, 0.5])
    # at r = 4 the overflowing half keeps 32 B on the device and 96 B in buddy memory
    assert float(ds.buddy_bytes_used.sel(snapshot=0, allocation="x", compressor="bpc32", threshold=0.5)) \
        == 64 * 96


def test_policies_profile_global_oracle() -> None:
    early = np.zeros(8192, np.float32)
    late = RNG.standard_normal(8192).astype(np.float32)
    steady = np.arange(8192, dtype=np.int32)
    run = [Snapshot("toy", [Allocation.from_array("a", early), Allocation.from_array("b", steady)], step=0),
           Snapshot("toy", [Allocation.from_array("a", late), Allocation.from_array("b", steady)], step=1)]
    sel = {"compressor": "bpc32", "threshold": 0.3}
    profile = analyze(run, ["bpc32"], policy="profile").chosen_target.sel(**sel).values
    oracle = analyze(run, ["bpc32"], policy="oracle").chosen_target.sel(**sel).values
    glob = analyze(run, ["bpc32"], policy="global").chosen_target.sel(**sel).values
    assert profile.tolist() == [[1.0, 4.0], [1.0, 4.0]]  # 'a' must survive its late, dense snapshot
    assert oracle.tolist() == [[4.0, 4.0], [1.0, 4.0]]  # knows each snapshot
    assert np.unique(glob).size == 1  # one target for everything
    assert glob[0, 0] == 1.0  # in snapshot 1 half of all entries are incompressible


def test_access_weights() -> None:
    x = np.concatenate([np.arange(2048, dtype=np.int32), RNG.integers(0, 2**31, 2048, dtype=np.int32)])
    w = np.r_[np.zeros(64), np.ones(64)]  # only the incompressible half is accessed
    ds = analyze({"x": x}, ["bpc32"], thresholds=[0.5], access={"x": w})
    assert ds.buddy_access_fraction.sel(compressor="bpc32", threshold=0.5).item() == 1.0
    with pytest.raises(ValueError, match="3 values for 128 entries"):
        analyze({"x": x}, ["bpc32"], access={"x": np.ones(3)})


def test_chunked_and_dask_paths_match_serial() -> None:
    serial = analyze(ARRAYS)
    xr.testing.assert_identical(analyze(ARRAYS, chunk_bytes=1280), serial)
    lazy = {k: da.from_array(v, chunks=1000) for k, v in ARRAYS.items()}  # chunks not entry-aligned
    xr.testing.assert_identical(analyze(lazy), serial)


def test_local_cluster_matches_serial() -> None:
    from distributed import Client, LocalCluster

    data = {"a": RNG.standard_normal((64, 1000)), "b": np.maximum(RNG.standard_normal(50_001), 0)}
    serial = analyze(data, thresholds=[0.1, 0.3])
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        distributed = analyze(data, thresholds=[0.1, 0.3], client=client, chunk_bytes=64 * 1024)
    xr.testing.assert_identical(distributed, serial)


def test_nan_inf_are_just_data() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 1.0] * 1000)
    ds = analyze({"x": x})
    assert np.isfinite(ds.effective_ratio).all()


def test_bad_parameters() -> None:
    with pytest.raises(ValueError, match="buddy threshold 2"):
        analyze(ARRAYS, thresholds=2)
    with pytest.raises(ValueError, match="unknown compressor 'lz77'"):
        analyze(ARRAYS, compressors=["lz77"])
    with pytest.raises(ValueError, match="target 3 is not supported"):
        analyze(ARRAYS, targets=[1, 3])
    with pytest.raises(ValueError, match="unknown policy"):
        analyze(ARRAYS, policy="greedy")


def test_allocation_table() -> None:
    ds = analyze(ARRAYS, thresholds=[0.3])
    t, total = allocation_table(ds), total_row(ds)
    assert list(t.index) == ["zeros", "ramp", "noise"]
    assert total["bytes"] == 3 * 16384 == t["bytes"].sum()
    effective = ds.effective_ratio.sel(compressor="bpc32", threshold=0.3).item()
    assert total["effective"] == pytest.approx(effective)
    # an allocation may be called TOTAL: it is a row like any other, the totals stay apart
    named = analyze({"TOTAL": ARRAYS["noise"], "zeros": ARRAYS["zeros"]}, thresholds=[0.3])
    t, total = allocation_table(named), total_row(named)
    assert list(t.index) == ["TOTAL", "zeros"] and t.loc["TOTAL", "bytes"] == 16384
    assert total["bytes"] == 2 * 16384


def test_nothing_or_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="nothing to analyse"):
        analyze({})
    with pytest.raises(ValueError, match="compressor 'bpc32' is given twice"):
        analyze(ARRAYS, compressors=["bpc32", "bdi", "bpc32"])


def test_threads_never_enter_parallel_kernels_together() -> None:
    """dask's threads compressing several allocations at once, under numba's workqueue threading layer
    (what numba uses without OpenMP or TBB): two parallel launches at once aborted the interpreter."""
    import os
    import subprocess
    import sys

    code = """
import numba, numpy as np, dask.array as da
from buddylib.analysis import analyze
arrays = {f"a{i}": da.from_array(np.random.default_rng(i).standard_normal(1 << 20).astype("f4"), chunks=1 << 17)
          for i in range(6)}
ds = analyze(arrays, ["bpc32", "bdi"], chunk_bytes=1 << 19, progress=False)
print(numba.threading_layer(), float(ds.ideal_ratio_total.sel(compressor="bpc32").item()) > 0)
"""
    env = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["workqueue", "True"]


def test_constants_have_one_home() -> None:
    """A run records every registered compressor but the 16-bit floats' codes (computed where named); an analysis
    defaults to the paper's five and threshold."""
    from buddylib import compressors, layout, paper
    from buddylib.studies import experiments

    assert [*compressors.ALL_COMPRESSORS, *compressors.FLOAT16_COMPRESSORS, *compressors.FLOAT8_COMPRESSORS] == \
        compressors.names()
    assert set(compressors.DEFAULT_COMPRESSORS) < set(compressors.ALL_COMPRESSORS)
    assert layout.DEFAULT_THRESHOLD == paper.HEADLINE["threshold"]
    assert experiments.geometric_mean(np.array([1.0, 4.0])) == pytest.approx(2.0)
    da = xr.DataArray([[1.0, 4.0], [9.0, 1.0]], dims=("workload", "x"))
    np.testing.assert_allclose(experiments.geometric_mean(da).values, [3.0, 2.0])
