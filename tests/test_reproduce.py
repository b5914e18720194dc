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
    from buddylib.studies import analyses, experiments

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

    monkeypatch.setattr(analyses, "code_version", lambda *parts: "other-code")
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


def test_a_notebook_helper_stales_no_result_and_an_analysis_stales_its_own(tmp_path: Path, monkeypatch) -> None:
    """A cached or committed result's digest covers the code that computes it and nothing else: a function added to
    what reads, tables or draws results (``studies/experiments.py``, ``llm.py``, ``fidelity.py``, ``cache.py``)
    changes no digest; one added to the analyses (``studies/analyses.py``) changes every analysis's (the DL
    studies' and the LLM study's too), one added to notebook 10's measurement (``studies/llm_measure.py``) that
    study's alone, one added to the training studies' (``studies/training.py``) theirs alone."""
    import shutil

    from buddylib import provenance
    from buddylib.studies import fidelity, llm_measure

    copy = tmp_path / "buddylib"
    shutil.copytree(provenance.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))

    def digests() -> tuple[str, str, str]:
        provenance.code_version.cache_clear()
        return (provenance.code_version(*provenance.ANALYSIS_SOURCES), provenance.code_version(*llm_measure.SOURCES),
                provenance.code_version(*fidelity.STUDY_SOURCES["maturity"]))

    def edit(rel: str) -> tuple[str, str, str]:
        with open(copy / rel, "a") as f:
            f.write("\n\ndef _added_by_a_test() -> int:\n    return 1\n")
        return digests()

    monkeypatch.setattr(provenance, "PACKAGE", copy)
    monkeypatch.setattr(provenance, "DISK_CACHE", tmp_path / "digests.json")  # the checkout's kept for its code
    provenance._disk.cache_clear()
    try:
        analysis, study, training = before = digests()
        for helper in ("studies/experiments.py", "studies/llm.py", "studies/fidelity.py", "studies/cache.py"):
            assert edit(helper) == before, helper
        analysis2, study2, _ = edit("studies/analyses.py")
        assert analysis2 != analysis and study2 != study  # the LLM study's analysis is the analyses' too
        measured = edit("studies/llm_measure.py")
        assert measured[::2] == (analysis2, training) and measured[1] != study2
        trained = edit("studies/training.py")
        assert trained[:2] == measured[:2] and trained[2] != training
    finally:
        monkeypatch.undo()
        provenance.code_version.cache_clear()
        provenance._disk.cache_clear()


def test_a_skipped_screenshot_says_why(tmp_path: Path, monkeypatch) -> None:
    """Without Chromium the JupyterLab screenshot is skipped, and the reason (with how to enable it) reaches the
    index instead of a time; a browser failure is reported the same way, and the run goes on."""
    from buddylib import explore
    from buddylib.report import reproduce

    executed = [{"notebook": "00_explore", "seconds": 1.0, "files": []}]
    monkeypatch.setattr(explore, "screenshot_lab", lambda path: None)
    assert "apt-get install chromium" in reproduce._explorer_screenshot(tmp_path, executed)

    def broken(path: Path) -> Path:
        raise RuntimeError("no\ndisplay")

    monkeypatch.setattr(explore, "screenshot_lab", broken)
    assert reproduce._explorer_screenshot(tmp_path, executed) == "the browser failed (RuntimeError: no display)"
    assert executed[0]["files"] == []
