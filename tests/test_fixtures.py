"""The committed quick-scale fixtures: complete, untouched, read as they are.

That this machine makes them too is checked with each workload's quick run in tests/test_workloads.py
(``test_same_seed_same_bytes``): HPC bit for bit against the fixtures' digests, DL by the fixture check
(:func:`buddylib.studies.fixtures.check`) on that run, whose digest is also looked up among the recorded ones
(:func:`buddylib.studies.fixtures.known_digests`), else compared with a second run of the same seed there.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from buddylib import workloads
from buddylib.provenance import MANIFEST, frozen
from buddylib.studies import cache, experiments, fixtures

MADE = json.loads((fixtures.FOLDER / MANIFEST).read_text())


def test_every_workload_and_file_is_there_untouched() -> None:
    assert set(MADE["workloads"]) == {n for s in fixtures.SUITES for n in workloads.names(s)}
    on_disk = {p.name for p in fixtures.FOLDER.iterdir()  # not the results and temporaries cached beside them
               if p.name != MANIFEST and not cache.cached_result(p)}
    assert on_disk == set(MADE["files"])
    for name, digest in MADE["files"].items():  # edited by hand or half-regenerated: the hash says so
        assert hashlib.sha256((fixtures.FOLDER / name).read_bytes()).hexdigest() == digest, name
    batch = {f"{n}-{fixtures.SCALE}-s{fixtures.SEED}.batch.nc" for n in experiments.BATCH_NETWORKS}
    assert batch <= on_disk


def test_notebooks_read_the_fixtures_only_at_quick_scale_seed_0(tmp_path: Path) -> None:
    assert experiments.data_folder("quick", 0) == fixtures.FOLDER
    assert experiments.data_folder("quick", 1) == experiments.data_folder("default", 0) == fixtures.DATA
    assert experiments.data_folder("quick", 0, tmp_path) == tmp_path


def test_a_frozen_folder_is_read_never_remade(tmp_path: Path) -> None:
    folder = tmp_path / "quick"
    folder.mkdir()
    for f in ("ostencil-quick-s0.nc", "ostencil-quick-s0.profile.json", MANIFEST):
        shutil.copy(fixtures.FOLDER / f, folder / f)
    (folder / "ostencil-quick-s0.profile.json").write_text(json.dumps(
        {**json.loads((folder / "ostencil-quick-s0.profile.json").read_text()), "code": "older code"}))
    assert frozen(folder)
    made = (folder / "ostencil-quick-s0.nc").stat().st_mtime_ns
    assert workloads.cached_run("ostencil", "quick", 0, folder) == folder / "ostencil-quick-s0.nc"
    assert (folder / "ostencil-quick-s0.nc").stat().st_mtime_ns == made  # other code, but not remade
    with pytest.raises(ValueError, match="remade only by `make fixtures`"):
        workloads.cached_run("ostencil", "quick", 0, folder, regenerate=True)
    with pytest.raises(FileNotFoundError, match="not among the committed fixtures"):
        workloads.cached_run("swim", "quick", 0, folder)
    with pytest.raises(ValueError, match="hold no memory-vs-batch measurement of squeezenet"):
        experiments.memory_vs_batch(["squeezenet"], [2, 4], "quick", 0, fixtures.FOLDER, progress=False)


def test_a_run_made_in_a_notebook_prints_one_line_not_a_bar(tmp_path: Path, monkeypatch, capsys) -> None:
    """In a Jupyter kernel (a notebook papermill runs at a scale with no cached runs) a run's step bar would be a
    text line per refresh in the saved output: a run made there says one line when it is done instead."""
    monkeypatch.setattr(workloads, "_in_notebook", lambda: True)
    workloads.cached_run("ostencil", 5, 0, tmp_path)
    err = capsys.readouterr().err
    assert err.splitlines() == [next(line for line in err.splitlines() if line.startswith("ran ostencil at scale 5"))]
    assert "step/s" not in err and "%|" not in err


def test_recorded_digests_name_registered_workloads_and_their_machine(tmp_path: Path) -> None:
    """digests.json: each machine's digests of registered workloads; recording here adds this machine's without
    losing another's, and a second recording replaces this machine's digests (keeping the workloads it left out)."""
    from buddylib.provenance import machine

    book = json.loads(fixtures.DIGESTS.read_text())
    names = {n for s in fixtures.SUITES for n in workloads.names(s)}
    for entry in book["machines"]:
        assert set(entry["workloads"]) <= names and {"cpu", "torch_cpu_capability"} <= set(entry["machine"])
    path = tmp_path / "digests.json"
    other = {**machine(), "cpu": "another CPU"}
    path.write_text(json.dumps({"machines": [{"machine": other, "date": "then", "workloads": {"ostencil": "x"}}]}))
    fixtures.record_digests(["ostencil"], path, progress=False)
    fixtures.record_digests(["swim"], path, progress=False)
    entries = json.loads(path.read_text())["machines"]
    assert [e["machine"] for e in entries] == [other, machine()]
    assert set(entries[1]["workloads"]) == {"ostencil", "swim"}
    made = {"ostencil": MADE["workloads"]["ostencil"], "swim": MADE["workloads"]["swim"]}
    if fixtures.fma_avx2() and MADE["machine"]["fma_avx2"] and MADE["machine"]["libc"] == machine()["libc"]:
        assert entries[1]["workloads"] == made  # the HPC proxies' bytes are the fixtures' on such a CPU
    known = fixtures.known_digests("ostencil", path)
    assert known[MADE["workloads"]["ostencil"]][0].startswith(MADE["machine"]["cpu"])
    assert known["x"] == ["another CPU (then)"]


def test_the_check_takes_a_run_only_at_the_fixtures_scale_and_seed_with_its_compressors() -> None:
    run = workloads.get("ostencil").run("quick", seed=1, compressors=["bpc32"])
    with pytest.raises(ValueError, match=r"runs\['ostencil'\]: a run of ostencil at scale quick, seed 1"):
        fixtures.check(names=["ostencil"], runs={"ostencil": run})
    report = fixtures.check(names=["ostencil"], runs={"ostencil": workloads.get("ostencil").run("quick", seed=0)})
    assert report.ok.all() and report.loc["ostencil", "identical"] == report.loc["ostencil", "exact_expected"]
