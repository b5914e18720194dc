"""The committed summaries of the slow DL studies (issue 22, item 3): the paper's six networks at paper scale
and the training-maturity, optimizer and framework studies, read by :mod:`buddylib.studies.fidelity` instead of run,
and checked within a tolerance.

No test here runs a paper-scale network or a 480-step study: the committed files are checked for consistency
and read; the machinery (making, reading, comparing) is tested on quick-scale runs and the quick fixtures.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from buddylib import workloads
from buddylib.report import reproduce
from buddylib.studies import cache, fidelity, fixtures, granularity, llm, remake, summaries

pytestmark = pytest.mark.skipif("alexnet" not in workloads.names("dl"), reason="torch is not installed")


@pytest.fixture(scope="module")
def quick_alexnet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """One quick AlexNet run made here, saved as a run (``data``) and as a summary (``folder``)."""
    data, folder = tmp_path_factory.mktemp("data"), tmp_path_factory.mktemp("summaries")
    run = workloads.get("alexnet").run("quick", compressors=summaries.DL_COMPRESSORS)
    run.save(data)
    kept = summaries.summarize_run(run) | {"date": "2000-01-01T00:00:00+00:00", "machine": fixtures.machine()}
    summaries.write(kept, folder)
    return data, folder, summaries.load(summaries.path("alexnet", "quick", folder=folder))


def _study_summary(name: str, study: str) -> dict:
    """A summary of ``name``'s optimizer (``"adam"``) or framework (``"caffe"``) study at quick scale, from the
    committed fixture."""
    ds = cache.load_cached(fixtures.FOLDER / f"{name}-quick-s0.{study}.nc")
    return {"format": summaries.STUDY_FORMAT, "study": study, "workload": name, "scale": "quick", "seed": 0,
            "code": fidelity.study_key(name, study)["code"], "seconds": 1.0, "peak_rss_bytes": 0,
            "date": "2000-01-01T00:00:00+00:00", "machine": fixtures.machine(), "result": summaries._to_dict(ds)}


def _maturity_summary(name: str, steps: int = 200) -> dict:
    """A maturity summary of ``name`` at quick scale from the committed fixture (no training here)."""
    ds = cache.load_cached(fixtures.FOLDER / f"{name}-quick-s0.maturity-200.nc")
    return {"format": summaries.STUDY_FORMAT, "study": "maturity", "workload": name, "scale": "quick", "seed": 0,
            "steps": steps, "snapshots": 9, "code": fidelity.maturity_key(name, steps)["code"], "seconds": 1.0,
            "peak_rss_bytes": 0, "date": "2000-01-01T00:00:00+00:00", "machine": fixtures.machine(),
            "result": summaries._to_dict(ds)}


def _key_shaped(code: str, name: str, study: str) -> bool:
    """Whether ``code`` is a digest of the shape of ``name``'s study key (12-hex parts joined by "+")."""
    parts, now = code.split("+"), fidelity.study_key(name, study)["code"].split("+")
    return len(parts) == len(now) and all(len(p) == 12 for p in parts)


def test_committed_dl_summaries_are_complete_and_read_without_running() -> None:
    for n in fidelity.PAPER_NETWORKS:
        s = summaries.load(summaries.path(n, "paper"))
        assert s["workload"] == n and s["compressors"] == list(summaries.DL_COMPRESSORS)
        assert len(s["code"]) == 12 and s["date"] and s["machine"]["cpu"] and s["seconds"] > 0
    studied = list(fidelity.STUDY_CNNS)  # every study CNN's maturity study is committed
    for n in studied:
        s = summaries.load(summaries.path(n, "default", study="maturity"))
        assert (s["steps"], s["snapshots"]) == (fidelity.maturity_steps("default"), 9) \
            and _key_shaped(s["code"], n, "maturity")
    for study, names in (("adam", fidelity.OPTIMIZER_NETWORKS), ("caffe", studied)):  # and the other two studies
        for n in names:
            s = summaries.load(summaries.path(n, "default", study=study))
            assert s["study"] == study and _key_shaped(s["code"], n, study) and s["seconds"] > 0
    files = [*summaries.DL_FOLDER.glob("*.json")]
    assert len(files) == len(fidelity.PAPER_NETWORKS) + 2 * len(studied) + len(fidelity.OPTIMIZER_NETWORKS)
    assert sum(f.stat().st_size for f in files) < 4 << 20  # a few MB
    # and BPC-32's histograms per 4 KiB region beside them: binary, no file of 1 MB or more
    sides = [*summaries.DL_FOLDER.glob(f"*{summaries.REGIONS_SUFFIX}")]
    assert len(sides) == len(fidelity.PAPER_NETWORKS) and max(f.stat().st_size for f in sides) < 10**6

    ps = fidelity.paper_scale(progress=False, data="/nonexistent")  # reading a run would fail there
    assert list(ps.source.values) == ["summary"] * len(fidelity.PAPER_NETWORKS)
    eff = ps.effective_ratio.sel(compressor="bpc32", threshold=0.3)
    assert bool(((eff > 0.9) & (eff < 10)).all()) and bool((ps.batch > 0).all())
    mat = fidelity.maturity(studied, "default", data="/nonexistent", progress=False)
    assert list(mat.source.values) == ["summary"] * len(studied) and int(mat.step.max()) == 480
    assert "Read from the committed summaries" in summaries.note(ps) and "alexnet (code" in summaries.note(mat)
    opt = fidelity.optimizer(scale="default", data="/nonexistent", progress=False)
    fa = fidelity.framework_accounting(studied, "default", data="/nonexistent", progress=False)
    assert list(opt.workload.values) == list(fidelity.OPTIMIZER_NETWORKS)
    assert list(opt.source.values) == ["summary"] * len(fidelity.OPTIMIZER_NETWORKS)
    assert list(fa.source.values) == ["summary"] * len(studied)
    eff = opt.effective_ratio.sel(compressor="bpc32")
    share = opt.optimizer_share
    assert bool(((eff > 0.9) & (eff < 10)).all()) and bool(((share > 0) & (share < 1)).all())
    assert bool((fa.footprint.sel(accounting="caffe", point="after_update") >
                 fa.footprint.sel(accounting="pytorch", point="after_update")).all())


def test_a_dl_summary_gives_the_runs_numbers(quick_alexnet: tuple[Path, Path, dict]) -> None:
    data, folder, _ = quick_alexnet
    a = fidelity.paper_scale(["alexnet"], data=data, scale="quick", progress=False, summary_folder=folder)
    b = fidelity.paper_scale(["alexnet"], data=data, scale="quick", progress=False, summary_folder=False)
    for v in ("effective_ratio", "ideal_ratio_total", "kind_effective_ratio", "footprint", "activation_share"):
        assert a[v].equals(b[v]), v
    assert a.source.item() == "summary" and b.source.item() == "run"
    assert bool(a.code_current.item()) and bool(b.code_current.item()) and a.code.item() == b.code.item()
    assert summaries.note(b) == "" and "2000-01-01" in summaries.note(a)


def test_the_reader_takes_what_is_committed_and_runs_the_rest(quick_alexnet: tuple[Path, Path, dict],
                                                              tmp_path: Path) -> None:
    data, _, kept = quick_alexnet
    # missing: squeezenet has no summary, so it is run (from the quick fixtures); an extra one (vgg16) is ignored
    summaries.write(kept | {"workload": "vgg16"}, tmp_path)
    summaries.write(kept, tmp_path)
    ds = fidelity.paper_scale(["squeezenet", "alexnet"], data=fixtures.FOLDER, scale="quick", progress=False,
                              summary_folder=tmp_path)
    assert list(ds.workload.values) == ["squeezenet", "alexnet"] and list(ds.source.values) == ["run", "summary"]
    # a file that is not the summary its name says is an error naming it
    summaries.write(kept, tmp_path / "misnamed").rename(tmp_path / "squeezenet-quick-s0.json")
    with pytest.raises(ValueError, match=r"squeezenet-quick-s0\.json: the summary of alexnet"):
        fidelity.paper_scale(["squeezenet"], data=fixtures.FOLDER, scale="quick", progress=False,
                             summary_folder=tmp_path)
    # made by other code: read all the same, and said so
    summaries.write(kept | {"code": "0" * 12}, tmp_path)
    old = fidelity.paper_scale(["alexnet"], data=data, scale="quick", progress=False, summary_folder=tmp_path)
    assert old.source.item() == "summary" and not bool(old.code_current.item()) and "since changed" in \
        summaries.note(old)


def test_maturity_reads_a_committed_study_of_the_same_steps(tmp_path: Path) -> None:
    summaries.write(_maturity_summary("alexnet"), tmp_path)
    summaries.write(_maturity_summary("vgg16", steps=100), tmp_path / "other")
    mat = fidelity.maturity(["alexnet", "vgg16"], "quick", data=fixtures.FOLDER, progress=False,
                            summary_folder=tmp_path)
    run = fidelity.maturity(["alexnet", "vgg16"], "quick", data=fixtures.FOLDER, progress=False,
                            summary_folder=False)
    assert list(mat.source.values) == ["summary", "run"] and list(run.source.values) == ["run", "run"]
    for v in ("activation_zero_fraction", "activation_ideal_ratio", "effective_ratio", "final_effective_ratio"):
        assert mat[v].equals(run[v]), v
    assert bool(mat.code_current.sel(workload="alexnet"))
    # a study of other steps is not read
    other = fidelity.maturity(["vgg16"], "quick", data=fixtures.FOLDER, progress=False,
                              summary_folder=tmp_path / "other")
    assert other.source.item() == "run"


@pytest.mark.parametrize("study", ["adam", "caffe"])
def test_the_optimizer_and_framework_studies_read_a_committed_one(study: str, tmp_path: Path) -> None:
    summaries.write(_study_summary("alexnet", study), tmp_path)
    read = getattr(fidelity, {"adam": "optimizer", "caffe": "framework_accounting"}[study])
    kept = read(["alexnet", "vgg16"], "quick", data=fixtures.FOLDER, progress=False, summary_folder=tmp_path)
    run = read(["alexnet", "vgg16"], "quick", data=fixtures.FOLDER, progress=False, summary_folder=False)
    assert list(kept.source.values) == ["summary", "run"] and list(run.source.values) == ["run", "run"]
    assert bool(kept.code_current.sel(workload="alexnet")) and "alexnet (code" in summaries.note(kept)
    for v in ("effective_ratio", "optimizer_share") if study == "adam" else ("footprint", "ideal_ratio",
                                                                               "effective_ratio"):
        assert kept[v].equals(run[v]), v
    summaries.write(_study_summary("alexnet", study) | {"code": "0" * 12}, tmp_path)  # other code: read, said so
    old = read(["alexnet"], "quick", data=fixtures.FOLDER, progress=False, summary_folder=tmp_path)
    assert old.source.item() == "summary" and not bool(old.code_current.item())


def test_dl_summaries_compare_within_the_tolerance(quick_alexnet: tuple[Path, Path, dict]) -> None:
    _, _, kept = quick_alexnet
    same = summaries.compare_close(kept, kept)
    assert same["ok"] and same["histograms_equal"] and same["max_rel_change"] == 0
    # one entry of the largest allocation moved by a sector: other bytes, ratios within the tolerance
    near = json.loads(json.dumps(kept))
    last = near["snapshots"][-1]["allocations"]
    big = max(range(len(last)), key=lambda i: last[i]["nbytes"])
    h = last[big]["sectors"]["bpc32"]
    k = next(i for i in range(4) if h[i] > 0)
    h[k], h[k + 1] = h[k] - 1, h[k + 1] + 1
    row = summaries.compare_close(kept, near)
    assert row["ok"] and not row["histograms_equal"] and 0 < row["max_rel_change"] <= summaries.DL_TOLERANCE
    assert not summaries.compare_close(kept, near, tolerance=row["max_rel_change"] / 2)["ok"]
    # another layout is never within a tolerance
    fewer = json.loads(json.dumps(kept))
    fewer["snapshots"][-1]["allocations"].pop()
    assert not summaries.compare_close(kept, fewer)["ok"]

    study = _maturity_summary("alexnet")
    assert summaries.compare_study(study, study)["ok"]
    moved = json.loads(json.dumps(study))
    moved["result"]["data_vars"]["final_effective_ratio"]["data"][0] *= 1.5
    row = summaries.compare_study(study, moved)
    assert not row["ok"] and row["max_rel_change"] == pytest.approx(0.5) and "final_effective" in \
        row["first_difference"]


def test_check_compares_a_dl_summary_within_the_tolerance(quick_alexnet: tuple[Path, Path, dict], tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """check() on DL summaries: the ratios within the tolerance pass, beyond it fail (the remaking itself, a
    fresh process per summary, is test_summaries' HPC check: here ``generate`` hands back the run made here)."""
    _, folder, kept = quick_alexnet
    far = json.loads(json.dumps(kept))
    far.pop("regions"), far.pop("accesses", None)  # its 4 KiB histograms would contradict the changed ones
    for a in far["snapshots"][-1]["allocations"]:  # every entry stored uncompressed: ratios far off
        a["sectors"]["bpc32"] = [0, 0, 0, 0, sum(a["sectors"]["bpc32"])]
    summaries.write(far, tmp_path / "far")
    summaries.write(_maturity_summary("alexnet"), tmp_path / "far")
    study = _maturity_summary("alexnet")
    study["result"]["data_vars"]["final_effective_ratio"]["data"][0] *= 1 + summaries.STUDY_TOLERANCE / 2

    def remade(names, scales, seed, out, studies):
        yield summaries.write(kept if studies == ["run"] else study, out), True

    monkeypatch.setattr(remake, "generate", remade)
    report = remake.check(["alexnet"], ["quick"], folder=tmp_path / "far")
    run, mat = report.loc[("alexnet", "quick", "run")], report.loc[("alexnet", "quick", "maturity")]
    assert not run.ok and run.max_rel_change > summaries.DL_TOLERANCE and not run.exact_expected
    assert run.tolerance == summaries.DL_TOLERANCE and run.code_equal and run.digest_equal
    assert mat.ok and summaries.DL_TOLERANCE < mat.max_rel_change <= summaries.STUDY_TOLERANCE
    assert remake.check(["alexnet"], ["quick"], folder=folder).ok.all()  # the same run: bit for bit


def test_reproduce_schedules_no_committed_study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """make reproduce reads the committed studies: no paper-scale run, a maturity task only for a network
    whose study is not committed, an HPC run at 32 MiB only for a proxy without a committed summary there
    (quick runs always: they are cheap and notebook 09 reads them with the rest), and notebook 10's study only
    where it is not committed."""
    from buddylib.report import pipeline

    seen: list[pipeline.Task] = []
    monkeypatch.setattr(pipeline, "run_all", lambda tasks, *a, **k: seen.extend(tasks) or {})
    reproduce.generate(tmp_path, "default", [*fidelity.STUDY_CNNS, "ostencil"], full=True)
    kinds = {t.kind for t in seen}
    assert "paper" not in kinds and "run" in kinds
    assert not [t for t in seen if t.kind == "llm"]  # notebook 10's study: committed, read by the notebook
    for kind in ("maturity", "adam", "caffe"):
        assert {t.name for t in seen if t.kind == kind} == {
            n for n in fidelity.STUDY_CNNS if not summaries.path(n, "default", study=kind).is_file()}, kind
    at = {s: {t.name for t in seen if t.kind == "run" and t.scale == s} for s in ("quick", 32)}
    assert at["quick"] == set(workloads.names("hpc"))
    assert at[32] == {n for n in workloads.names("hpc") if not summaries.path(n, 32).is_file()}
    seen.clear()
    monkeypatch.setattr(llm, "committed_path", lambda scale, seed=0: tmp_path / "not-committed.nc")
    reproduce.generate(tmp_path, "default", ["ostencil"], full=True)
    assert [t.label for t in seen if t.kind == "llm"] == ["llm:llm@default"]  # measured where not committed


def test_provenance_lists_every_committed_summary() -> None:
    table = remake.provenance()
    assert len(table) == len(summaries.committed()) + len(list(llm.COMMITTED.glob("llm-*.nc"))) + len(
        list(granularity.COMMITTED.glob("granularity-*.nc")))
    assert {"used by", "code", "code current", "made", "machine", "run s"} <= set(table.columns)
    assert any(i.startswith("alexnet, paper scale") for i in table.index)
    assert any("maturity (480 steps)" in i for i in table.index)
    assert any(i.startswith("biglstm, default scale, Adam") for i in table.index)
    assert any(i.startswith("vgg16, default scale, Caffe") for i in table.index)
    assert table["code"].str.split("+").map(lambda p: all(len(x) == 12 for x in p)).all() and table["run s"].gt(0).all()
    assert table.loc["LLM-era memory study, quick scale", "used by"].startswith("notebook 10")


def test_study_results_round_trip_exactly() -> None:
    ds = cache.load_cached(fixtures.FOLDER / "vgg16-quick-s0.maturity-200.nc")
    back = summaries.result({"result": json.loads(json.dumps(summaries._to_dict(ds)))})
    xr.testing.assert_identical(back, ds)
    assert np.isnan(back.activation_zero_fraction.isel(snapshot=0)).all()


def test_input_sensitivity_reads_the_suites_input_from_its_run(tmp_path: Path) -> None:
    """The first input of each proxy is the workload's own (notebook 09 reads its run, not a second one), and its
    row is that run's numbers: with no run cached, the suite's run is made where the runs are cached."""
    for name, inputs in fidelity.INPUTS.items():
        assert next(iter(inputs)) == workloads.get(name).initial, name
    table = fidelity.input_sensitivity("ostencil", "quick", 0, tmp_path)
    assert (tmp_path / "ostencil-quick-s0.nc").is_file()
    again = fidelity.input_sensitivity("ostencil", "quick", 0)  # the committed fixture's run
    assert table.equals(again) and len(table) == len(fidelity.INPUTS["ostencil"])
