"""make reproduce's caches and command line (the pipeline end to end, small: tests/test_pipeline.py)."""

from __future__ import annotations

from pathlib import Path

import xarray as xr

from buddylib import paper
from buddylib.cli import main
from buddylib.report import reproduce


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
    from buddylib import outputs
    from buddylib.studies import experiments

    names = ["bt", "cloverleaf"]
    experiments.slowdowns(names, "quick", data=tmp_path / "data", progress=False)  # computes, caches
    again = experiments.slowdowns(names, "quick", data=tmp_path / "data", progress=False)  # from the caches
    outputs.save_data(again.drop_vars(["um_slowdown", "um_faults"]), tmp_path / "out", "slowdown")
    assert list(xr.open_dataset(tmp_path / "out/slowdown.nc").workload.values) == names


def test_caches_made_by_other_code_are_recomputed(tmp_path: Path, monkeypatch) -> None:
    """A cached run, slowdown or analysis made before the code changed is never reused (it would be a stale
    number); one made by the same code is, exactly as computed."""
    import json

    from buddylib import workloads
    from buddylib.studies import experiments

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

    fresh = experiments.workload_ratios(["ostencil"], "quick", data=data, progress=False)
    (ratios,) = data.glob("ostencil-quick-s0.ratios-*.nc")
    analysed = ratios.stat().st_mtime_ns
    again = experiments.workload_ratios(["ostencil"], "quick", data=data, progress=False)
    assert ratios.stat().st_mtime_ns == analysed  # reused: the same dataset, variables' types and attributes too
    xr.testing.assert_identical(again, fresh)
    assert again.attrs == fresh.attrs and {v: again[v].dtype for v in again.variables} == \
        {v: fresh[v].dtype for v in fresh.variables}
    other = experiments.workload_ratios(["ostencil"], "quick", data=data, thresholds=[0.3], progress=False)
    assert len(list(data.glob("ostencil-quick-s0.ratios-*.nc"))) == 2 and other.threshold.values.tolist() == [0.3]

    monkeypatch.setattr(experiments, "code_version", lambda *parts: "other-code")
    experiments.slowdowns(["ostencil"], "quick", data=data, progress=False)
    assert sweep.stat().st_mtime_ns > swept  # the timing model changed: recomputed
    assert xr.open_dataset(sweep).attrs["code"].startswith("other-code+")
    experiments.workload_ratios(["ostencil"], "quick", data=data, progress=False)
    assert ratios.stat().st_mtime_ns > analysed  # the analysis changed: recomputed

    meta = json.loads(profile.read_text())
    profile.write_text(json.dumps({**meta, "code": "before-a-compressor-fix"}))
    workloads.cached_run("ostencil", "quick", data=data)
    assert path.stat().st_mtime_ns > made and json.loads(profile.read_text())["code"] == meta["code"]


def test_headline_is_the_timing_models_default() -> None:
    from buddylib.timing import Params

    assert paper.HEADLINE["outstanding"] == Params().outstanding
    assert paper.HEADLINE["metadata_cache_bytes"] == Params().metadata_cache_bytes


def test_every_notebook_has_a_first_run_cost() -> None:
    """A fresh clone starts the notebooks longest first from measured seconds (no steps.csv of its own yet)."""
    assert set(reproduce.NOTEBOOK_SECONDS) == {nb.stem for nb in reproduce.notebook_paths()}
    assert all(s > 0 for s in reproduce.NOTEBOOK_SECONDS.values())
