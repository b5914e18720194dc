"""Snapshots: metadata and per-entry sectors (optionally bytes) survive netCDF and zarr."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from buddylib import compressors, snapshot
from buddylib.analysis import analyze
from buddylib.snapshot import Allocation, Snapshot


def _run() -> list[Snapshot]:
    rng = np.random.default_rng(3)
    field = np.zeros((16, 16, 16))
    snaps = []
    for step in range(3):
        field[: 4 * (step + 1)] = rng.standard_normal((4 * (step + 1), 16, 16))  # fills in over the run
        snaps.append(Snapshot("toy", [
            Allocation.from_array("field", field.copy(), kind="field"),
            Allocation.from_array("index", np.arange(1000, dtype=np.int32), kind="index"),
        ], step=step, time=0.5 * step))
    return snaps


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_save_load_round_trip(tmp_path: Path, suffix: str) -> None:
    snaps = _run()
    path = snapshot.save(snaps, tmp_path / f"run{suffix}", compressors=["bpc32", "bdi"])
    back = snapshot.load(path)
    assert [s.step for s in back] == [0, 1, 2] and back[2].time == 1.0
    for a, b in zip(snaps, back, strict=True):
        for x, y in zip(a.allocations, b.allocations, strict=True):
            assert (x.name, x.kind, x.dtype, x.shape, x.nbytes) == (y.name, y.kind, y.dtype, y.shape, y.nbytes)
            assert y.data is None  # sectors only, by default
            for c in ("bpc32", "bdi"):
                np.testing.assert_array_equal(y.sectors[c], compressors.sectors(np.asarray(x.data), c))
    # analysing the saved sectors gives what analysing the bytes gives
    xr.testing.assert_identical(analyze(back, ["bpc32", "bdi"]), analyze(_run(), ["bpc32", "bdi"]))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind


def test_save_with_bytes(tmp_path: Path) -> None:
    snaps = _run()
    back = snapshot.load(snapshot.save(snaps, tmp_path / "run.nc", include_bytes=True))
    assert np.asarray(back[1].allocations[0].data).tobytes() == snaps[1].allocations[0].data.tobytes()


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"run\.h5: snapshot files end in \.nc"):
        snapshot.save(_run(), tmp_path / "run.h5")
    with pytest.raises(FileNotFoundError, match=r"missing\.nc"):
        snapshot.load(tmp_path / "missing.nc")
    with pytest.raises(ValueError, match="kind 'weight'"):
        Allocation.from_array("w", np.ones(4), kind="weight")
    with pytest.raises(ValueError, match="empty array"):
        Allocation.from_array("w", np.ones(0))
    with pytest.raises(TypeError, match="text or Python objects"):
        Allocation.from_array("w", np.array(["a"]))
    with pytest.raises(ValueError, match="duplicate allocation names"):
        Snapshot("x", [Allocation.from_array("a", np.ones(4)), Allocation.from_array("a", np.ones(4))])


def test_reference_sizes_survive_and_are_analysed(tmp_path: Path) -> None:
    from buddylib import workloads

    run = workloads.get("ostencil").run("quick", compressors=["bpc32"], references=("zstd", "lz4"))
    back = snapshot.load(run.save(tmp_path))
    for a, b in zip(run.snapshots[-1].allocations, back[-1].allocations, strict=True):
        assert a.reference_bytes == b.reference_bytes and set(a.reference_bytes) == {"zstd", "lz4"}
    ds = analyze(back, ["bpc32"])
    first = back[0].allocations[0]
    assert float(ds.reference_ratio.sel(snapshot=0, allocation=first.name, reference="zstd")) == \
        first.nbytes / first.reference_bytes["zstd"]


def test_a_run_is_one_dataset_and_says_so(tmp_path: Path) -> None:
    """One dataset any xarray user can open; other files, and runs saved in the old layout, are refused by name."""
    import zarr

    path = snapshot.save(_run(), tmp_path / "run.nc", compressors=["bpc32"])
    with xr.open_dataset(path) as ds:
        assert ds.attrs["format"] == snapshot.FORMAT and ds.sizes["snapshot"] == 3
        assert list(ds.step.values) == [0, 1, 2] and list(ds.allocation.values) == ["field", "index"]
    zpath = snapshot.save(_run(), tmp_path / "run.zarr", compressors=["bpc32"])
    assert snapshot.is_saved_run(zpath) and snapshot.is_saved_run(path)
    zarr.open_group(str(tmp_path / "mine.zarr"), mode="w").create_array("u", shape=(4,), dtype="f4")
    assert not snapshot.is_saved_run(tmp_path / "mine.zarr")
    old = tmp_path / "old.nc"  # the layout before: one group per snapshot
    xr.Dataset({"sectors": ("entry", np.zeros(4, np.uint8))}).to_netcdf(old, group="snapshot_000")
    with pytest.raises(ValueError, match=r"old\.nc: not a run saved by `buddy workloads run` .* regenerated"):
        snapshot.load(old)
