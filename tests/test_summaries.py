"""Per-workload code digests (issue 22) and the committed gigabyte-scale HPC summaries (issue 21).

No test here runs a gigabyte workload: the committed summaries are checked for consistency, and the
check machinery on quick-scale summaries made in a temporary folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from buddylib import cli, paper, provenance, workloads
from buddylib.studies import experiments, fidelity, fixtures, summaries
from buddylib.timing import model

HPC = workloads.names("hpc")


@pytest.fixture
def package_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A copy of the package that the code digests read instead of the real one (edited by the test)."""
    copy = tmp_path / "buddylib"
    shutil.copytree(provenance.PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    _forget()
    monkeypatch.setattr(provenance, "PACKAGE", copy)
    monkeypatch.setattr(provenance, "DISK_CACHE", tmp_path / "digests.json")
    yield copy
    monkeypatch.undo()
    _forget()


def _forget() -> None:
    """Drop what this process remembers of the package's code (the disk cache is keyed by the code itself)."""
    for cached in (provenance.code_version, provenance._imported, provenance._package_files, provenance._disk):
        cached.cache_clear()


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name}: {old!r} not found"
    path.write_text(text.replace(old, new, 1))
    _forget()


def test_digests_kept_on_disk_are_those_computed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process reads the digests an earlier one computed: the same values as computing them, a damaged or
    unwritable cache file computed around, never trusted."""
    parts = provenance.ANALYSIS_SOURCES
    (tmp_path / "a file").write_text("")
    monkeypatch.setattr(provenance, "DISK_CACHE", tmp_path / "a file" / "digests.json")
    _forget()
    computed = provenance.code_version(*parts), _codes()  # cannot be written: computed
    monkeypatch.setattr(provenance, "DISK_CACHE", tmp_path / "digests.json")
    _forget()
    assert (provenance.code_version(*parts), _codes()) == computed and provenance.DISK_CACHE.is_file()
    _forget()
    reads = provenance.DISK_CACHE.read_text()
    assert (provenance.code_version(*parts), _codes()) == computed and provenance.DISK_CACHE.read_text() == reads
    provenance.DISK_CACHE.write_text(reads[: len(reads) // 2])
    _forget()
    assert (provenance.code_version(*parts), _codes()) == computed
    monkeypatch.undo()
    _forget()


def _codes() -> dict[str, str]:
    return {n: workloads.get(n).code() for n in HPC}


def test_a_workloads_digest_covers_its_own_code_and_nothing_else(package_copy: Path) -> None:
    before = _codes()
    assert len(set(before.values())) == len(HPC)  # every proxy its own digest
    hpc = package_copy / "workloads" / "hpc"
    # documenting: docstrings and comments change no digest
    _edit(hpc / "lulesh.py", '"""', '"""Edited docstring. ')
    _edit(hpc / "_adi.py", "\nimport", "\n# a new comment\nimport")
    _edit(package_copy / "compressors" / "bpc.py", '"""', '"""Edited. ')
    assert _codes() == before
    # editing lulesh's code changes lulesh's digest alone
    (hpc / "lulesh.py").write_text((hpc / "lulesh.py").read_text() + "\n_EDITED = 1\n")
    _edit(hpc / "lulesh.py", "_EDITED = 1", "_EDITED = 2")
    after = _codes()
    assert {n for n in HPC if after[n] != before[n]} == {"lulesh"}
    # a shared module: the workloads that import it
    (hpc / "_adi.py").write_text((hpc / "_adi.py").read_text() + "\n_EDITED = 1\n")
    _edit(hpc / "_adi.py", "_EDITED = 1", "_EDITED = 2")
    assert {n for n, c in _codes().items() if c != after[n]} == {"bt", "sp"}
    # the compressors: every workload
    now = _codes()
    (package_copy / "compressors" / "bpc.py").write_text((package_copy / "compressors" / "bpc.py").read_text()
                                                         + "\n_EDITED = 1\n")
    _forget()
    assert all(c != now[n] for n, c in _codes().items())


def test_a_compressor_no_run_records_changes_no_workloads_digest(package_copy: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    before = _codes()
    comp = package_copy / "compressors"
    (comp / "ebo.py").write_text((comp / "ebo.py").read_text() + "\n_EDITED = 1\n")  # not recorded by runs
    (comp / "new_peer.py").write_text("def size(a):\n    return 1\n")
    _edit(comp / "__init__.py", "\nregistry.register(", '\nregistry.register("new", ZVC)\nregistry.register(')
    assert _codes() == before
    # a recorded compressor's registration (its options) changes every digest
    from buddylib.compressors import registry

    cls, options = registry._REGISTRY["bpc32zvc"]
    monkeypatch.setitem(registry._REGISTRY, "bpc32zvc", (cls, {**options, "label": "edited"}))
    provenance._registrations.cache_clear()
    try:
        assert all(c != before[n] for n, c in _codes().items())
    finally:
        monkeypatch.undo()
        provenance._registrations.cache_clear()


def test_editing_lulesh_remakes_lulesh_alone(package_copy: Path, tmp_path: Path) -> None:
    data, scale = tmp_path / "data", 1  # MiB: the property is the same at any scale, and a small run is quick
    paths = {n: workloads.cached_run(n, scale, data=data) for n in ("lulesh", "ostencil")}
    made = {n: p.stat().st_mtime_ns for n, p in paths.items()}
    assert all(workloads.cached_run(n, scale, data=data).stat().st_mtime_ns == made[n] for n in paths)
    lulesh = package_copy / "workloads" / "hpc" / "lulesh.py"
    lulesh.write_text(lulesh.read_text() + "\n_EDITED = 1\n")
    _forget()
    for n in paths:
        workloads.cached_run(n, scale, data=data)
    assert paths["lulesh"].stat().st_mtime_ns > made["lulesh"]  # remade
    assert paths["ostencil"].stat().st_mtime_ns == made["ostencil"]  # kept
    profile = json.loads(paths["lulesh"].with_suffix(".profile.json").read_text())
    assert profile["code"] == workloads.get("lulesh").code()


def test_normalized_source_ignores_docstrings_comments_and_layout() -> None:
    a = 'def f(x):\n    """Doc."""\n    return x + 1  # one\n'
    b = "def f(x):\n\n    return (x +\n            1)\n"
    assert provenance.normalized_source(a) == provenance.normalized_source(b)
    assert provenance.normalized_source(a) != provenance.normalized_source(a.replace("+ 1", "+ 2"))


# ---------------------------------------------------------------------------------------
# the committed summaries
# ---------------------------------------------------------------------------------------


def test_committed_summaries_are_complete_and_consistent() -> None:
    files = sorted(summaries.FOLDER.glob("*.json"))
    assert summaries.available("large"), "every HPC proxy has a committed 1 GiB summary"
    for f in files:
        s = summaries.load(f)  # histograms count every allocation's entries
        assert f == summaries.path(s["workload"], s["scale"], s["seed"])
        assert s["workload"] in HPC and s["compressors"] == list(summaries.COMPRESSORS)
        assert len(s["digest"]) == 64 and len(s["code"]) == 12 and s["machine"]["fma_avx2"]
        assert s["footprint_bytes"] == workloads.footprint_bytes(s["scale"])
        biggest = max(sum(a["nbytes"] for a in snap["allocations"]) for snap in s["snapshots"])
        assert 0.5 < biggest / s["footprint_bytes"] < 2
    assert sum(f.stat().st_size for f in files) < 8 << 20  # a few MB


def test_hpc_scales_reads_the_committed_summaries_without_running() -> None:
    hs = fidelity.hpc_scales(scales=["large"], progress=False)
    assert str(hs.source.sel(scale="large").item()) == "summary"
    final = hs.final.sel(scale="large")
    assert final.sizes["workload"] == len(HPC) and bool(np.isfinite(final).all()) and bool((final > 0.9).all())


def test_summary_analysis_is_the_runs_analysis(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A quick run summarized, then analysed from its histograms, gives the committed fixture's numbers exactly,
    through fidelity.hpc_scales too; and the check machinery finds a changed histogram."""
    names = ["ostencil"]
    summaries.write(summaries.make("ostencil", "quick"), tmp_path)  # here; the check below runs it in a process
    a = summaries.workload_ratios(names, "quick", folder=tmp_path)
    b = experiments.workload_ratios(names, "quick", 0, fixtures.FOLDER, progress=False)
    for v in ("effective_ratio", "ideal_ratio_total", "kind_effective_ratio", "footprint", "buddy_access_fraction"):
        assert a[v].equals(b[v]), v
    hs = fidelity.hpc_scales(names, ["quick"], progress=False, summary_folder=tmp_path)
    runs = fidelity.hpc_scales(names, ["quick"], progress=False, summary_folder=False)
    assert hs.final.equals(runs.final) and hs.run_mean.equals(runs.run_mean)
    assert str(hs.source.item()) == "summary" and str(runs.source.item()) == "run"
    assert float(paper.headline(a.effective_ratio).isel(snapshot=-1).sel(workload="ostencil")) > 0.99

    # its accesses give the run's slowdown, here and through `buddy analyze SUMMARY.json`
    kept = summaries.load(summaries.path("ostencil", "quick", folder=tmp_path))
    ws = model.Workset.load(fixtures.FOLDER / "ostencil-quick-s0.nc")
    for region, rule in ((None, "budget"), ("4KiB", "traffic")):
        want = model.sweep(ws, region=region, rule=rule, bandwidth_credit=(False, True)).slowdown
        assert model.sweep(summaries.replay(kept), region=region, rule=rule,
                           bandwidth_credit=(False, True)).slowdown.equals(want)
    assert cli.main(["analyze", str(summaries.path("ostencil", "quick", folder=tmp_path)), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["slowdown"] == float(model.slowdown(ws, bandwidth_credit=False)["slowdown"])
    assert printed["slowdown_credit"] == float(model.slowdown(ws, bandwidth_credit=True)["slowdown"])

    # bit for bit: the same summary twice is ok; a changed histogram or byte digest is named
    kept = summaries.load(summaries.path("ostencil", "quick", folder=tmp_path))
    assert summaries.compare(kept, kept)["ok"]
    changed = json.loads(json.dumps(kept))
    changed.pop("regions")  # its 4 KiB histograms would contradict the changed one: load refuses that
    h = changed["snapshots"][-1]["allocations"][0]["sectors"]["bpc32"]
    h[3], h[4] = h[3] + 1, h[4] - 1
    row = summaries.compare(kept, changed)
    assert not row["ok"] and not row["histograms_equal"] and row["digest_equal"] and "bpc32" in row["first_difference"]
    assert not summaries.compare(kept, changed | {"digest": "0" * 64})["digest_equal"]

    # the check regenerates in a temporary folder: the same bytes (digest), but not the changed histogram
    summaries.write(changed, tmp_path)
    assert cli.main(["summaries", "ostencil", "--check", "--folder", str(tmp_path), "--scale", "quick"]) == 1
    report = capsys.readouterr().out
    assert "0 of 1 identical" in report and "ostencil@quick" in report and "bpc32" in report

    # a remake keeps a summary this code made and remakes one other code made, so a remake of hours resumes
    from buddylib.studies import remake

    made: list[list[str]] = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(remake.subprocess, "run", lambda args, check: made.append(args))
        assert cli.main(["summaries", "ostencil", "--folder", str(tmp_path), "--scale", "quick"]) == 0
        assert made == [] and "ostencil at quick: kept, made by this code" in capsys.readouterr().out
        summaries.write(kept | {"code": "0" * 12}, tmp_path)
        assert list(remake.generate(["ostencil"], ["quick"], folder=tmp_path)) == [
            (summaries.path("ostencil", "quick", folder=tmp_path), True)]
        assert made and made[0][-5:] == ["ostencil", "quick", "0", str(tmp_path), "run"]


def test_load_refuses_a_histogram_that_does_not_count_the_entries(tmp_path: Path) -> None:
    src = min(summaries.FOLDER.glob("*.json"), key=lambda f: f.stat().st_size)
    s = json.loads(src.read_text())
    s["snapshots"][0]["allocations"][0]["sectors"]["bpc32"][0] += 1
    bad = summaries.write(s, tmp_path)
    with pytest.raises(ValueError, match="does not count"):
        summaries.load(bad)
