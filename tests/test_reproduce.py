"""The make-reproduce pipeline end to end, small: every step writes real, indexed results."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import xarray as xr

from buddylib import reproduce
from buddylib.cli import main


def test_pipeline_small(tmp_path: Path) -> None:
    index = reproduce.run(tmp_path / "reports", bench_mib=1, data=tmp_path / "data", scale="quick",
                          names=["ostencil"], notebooks=["02_hpc_ratios"])
    text = index.read_text()
    assert "effective capacity, HPC workloads" in text and "1.9x (ISCA)" in text
    for f in ("bench/bench.csv", "bench/bench.png", "hpc/hpc_ratios.nc", "hpc/hpc_ratios.csv",
              "slowdown/slowdown.nc", "slowdown/slowdown.csv"):
        assert (tmp_path / "reports" / f).stat().st_size > 0, f
    hpc = xr.open_dataset(tmp_path / "reports/hpc/hpc_ratios.nc")
    assert float(hpc.effective_ratio.sel(workload="ostencil", compressor="bpc32", threshold=0.3)) > 0.9
    slow = pd.read_csv(tmp_path / "reports/slowdown/slowdown.csv", index_col=0)
    assert list(slow.index) == ["ostencil"] and "NVLink2" in slow.columns
    assert (tmp_path / "data/ostencil-quick-s0.nc").exists()  # cached for the next run
    assert (tmp_path / "reports/index.html").exists()
    assert (tmp_path / "reports/notebooks/02_hpc_ratios.html").exists()
    assert (tmp_path / "reports/02_hpc_ratios/hpc_ratios.png").exists()
    assert "](02_hpc_ratios/hpc_ratios.png)" in text  # the index shows the notebook's figure
    assert "05_slowdown_sensitivity/slowdown_sensitivity.png" not in text  # notebook 05 did not run
    assert "notebook 02_hpc_ratios" in text


def test_workloads_cli(tmp_path: Path, capsys) -> None:
    assert main(["workloads", "list"]) == 0
    assert "ostencil" in capsys.readouterr().out
    assert main(["workloads", "run", "ostencil", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "ostencil-quick-s0.nc").exists() and (tmp_path / "ostencil-quick-s0.profile.json").exists()
    assert main(["workloads", "run", "nope"]) == 2
    assert "unknown workload 'nope'" in capsys.readouterr().err


def test_cached_results_write_back_whole_names(tmp_path: Path) -> None:
    """A result read from its cache and written again keeps every workload name whole (a stale
    2-character string encoding from 'bt' once cut 'cloverleaf' to 'cl')."""
    from buddylib import experiments, report

    names = ["bt", "cloverleaf"]
    experiments.slowdowns(names, "quick", data=tmp_path / "data", progress=False)  # computes, caches
    again = experiments.slowdowns(names, "quick", data=tmp_path / "data", progress=False)  # from the caches
    report.save_data(again.drop_vars(["um_slowdown", "um_faults"]), tmp_path / "out", "slowdown")
    assert list(xr.open_dataset(tmp_path / "out/slowdown.nc").workload.values) == names


def test_caches_made_by_other_code_are_recomputed(tmp_path: Path, monkeypatch) -> None:
    """A cached run or slowdown made before the code changed is never reused (it would be a stale number)."""
    import json

    from buddylib import experiments, workloads

    data = tmp_path / "data"
    path = workloads.cached_run("ostencil", "quick", data=data)
    profile = path.with_suffix(".profile.json")
    made = path.stat().st_mtime_ns
    assert workloads.cached_run("ostencil", "quick", data=data) == path and path.stat().st_mtime_ns == made  # reused
    experiments.slowdowns(["ostencil"], "quick", data=data, progress=False)
    sweep = path.with_suffix(".slowdown-t0.3.nc")
    swept = sweep.stat().st_mtime_ns
    experiments.slowdowns(["ostencil"], "quick", data=data, progress=False)
    assert sweep.stat().st_mtime_ns == swept  # same run, same code: reused

    monkeypatch.setattr(experiments, "code_version", lambda *parts: "other-code")
    experiments.slowdowns(["ostencil"], "quick", data=data, progress=False)
    assert sweep.stat().st_mtime_ns > swept  # the timing model changed: recomputed
    assert xr.open_dataset(sweep).attrs["code"] == "other-code"

    meta = json.loads(profile.read_text())
    profile.write_text(json.dumps({**meta, "code": "before-a-compressor-fix"}))
    workloads.cached_run("ostencil", "quick", data=data)
    assert path.stat().st_mtime_ns > made and json.loads(profile.read_text())["code"] == meta["code"]
