"""The make-reproduce pipeline end to end, small: every step writes real, indexed results."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import xarray as xr

from buddylib import analysis, paper, snapshot
from buddylib.cli import main
from buddylib.report import reproduce


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A whole ``make reproduce``, small: one workload, one notebook. Returns the folder holding reports/, data/."""
    tmp_path = tmp_path_factory.mktemp("reproduce")
    reproduce.run(tmp_path / "reports", bench_mib=1, data=tmp_path / "data", scale="quick",
                  names=["ostencil"], notebooks=["02_hpc_ratios"])
    return tmp_path


def test_pipeline_small(small_run: Path) -> None:
    tmp_path = small_run
    text = (tmp_path / "reports/README.md").read_text()
    for f in ("bench/bench.csv", "bench/bench.png", "hpc/hpc_ratios.nc", "hpc/hpc_ratios.csv",
              "slowdown/slowdown.nc", "slowdown/slowdown.csv"):
        assert (tmp_path / "reports" / f).stat().st_size > 0, f
    # the index's HPC number is the saved run's final snapshot at the headline configuration, beside the paper's
    final = analysis.analyze(snapshot.load(tmp_path / "data/ostencil-quick-s0.nc"), [paper.HEADLINE["compressor"]],
                             thresholds=[paper.HEADLINE["threshold"]]).isel(snapshot=-1)
    eff = float(paper.headline(final.effective_ratio))
    hpc = xr.open_dataset(tmp_path / "reports/hpc/hpc_ratios.nc")
    assert float(paper.headline(hpc.effective_ratio.sel(workload="ostencil"))) == eff
    row = next(ln for ln in text.splitlines() if ln.startswith("| effective capacity, HPC workloads"))
    assert row == (f"| effective capacity, HPC workloads (BPC-32, threshold 30%, mean of 1) | {eff:.2f}x (geometric "
                   f"mean {eff:.2f}x) | {paper.HPC_RATIO_ISCA}x (ISCA), {paper.HPC_RATIO_ARXIV}x (arXiv) |")
    slow = pd.read_csv(tmp_path / "reports/slowdown/slowdown.csv", index_col=0)
    nv = float(paper.headline(xr.open_dataset(tmp_path / "reports/slowdown/slowdown.nc").slowdown).item())
    assert list(slow.index) == ["ostencil"] and slow.loc["ostencil", "NVLink2"] == pytest.approx(100 * (nv - 1))
    row = next(ln for ln in text.splitlines() if ln.startswith("| slowdown vs ideal GPU, V100-32GB + NVLink2, HPC"))
    assert f"| {100 * (nv - 1):+.1f}% (range" in row and row.endswith(f"| {paper.SLOWDOWN_TEXT} |")
    assert paper.CITATION in text
    assert (tmp_path / "data/ostencil-quick-s0.nc").exists()  # cached for the next run
    assert (tmp_path / "reports/index.html").exists()
    assert (tmp_path / "reports/notebooks/02_hpc_ratios.html").exists()
    assert (tmp_path / "reports/02_hpc_ratios/hpc_ratios.png").exists()
    assert "](02_hpc_ratios/hpc_ratios.png)" in text  # the index shows the notebook's figure
    assert "05_slowdown_sensitivity/slowdown_sensitivity.png" not in text  # notebook 05 did not run
    assert "notebook 02_hpc_ratios" in text


def test_small_run_page(small_run: Path, capsys) -> None:
    """The page's links all resolve; it is rendered again, unchanged, from the results saved beside it; the
    run's step times are there for the next run's estimate."""
    from buddylib.report import index_page

    out = small_run / "reports"
    assert index_page.broken_links(out) == []
    assert 'href="02_hpc_ratios/hpc_ratios.png"' in (out / "index.html").read_text()  # a thumbnail
    before = [(out / f).read_text() for f in ("README.md", "index.html")]
    index_page.rerender(out)
    assert [(out / f).read_text() for f in ("README.md", "index.html")] == before
    last = reproduce.last_run_seconds(out)
    assert {"compressor benchmark", "total", "run:ostencil@quick", "notebook 02_hpc_ratios"} <= set(last)
    reproduce._Clock(last)
    assert "make reproduce: about" in capsys.readouterr().out


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
